"""A JOBDIR that can no longer be written: a full disk, an I/O error, a file past its size limit.

The crawl writes its JOBDIR as it goes (``focused.resume``: the frontier and in-flight tables,
``counters.sqlite3``, ``trapfamilies.sqlite3``, ``nearduplicates.sqlite3``, ``topic.jsonl``;
``paused_hosts.json`` while a host is held, ``focused.downloader``), so that ``kill -9`` loses
nothing. The first of those writes that fails stops the crawl
(``JobdirWrites.failed``): one error line naming the file and the reason, the spider closed
with reason ``jobdir_unwritable`` (the crawl record says ``interrupted (jobdir_unwritable)``,
the ``crawl`` command exits with status 1). From then on nothing of the JOBDIR is written or
read again, at the close neither (``spider.state``, the relevance model, the encoder's state,
the frontier's state): the JOBDIR stays what ``kill -9`` at that moment would have left, every
committed transaction whole, and the storage pipeline stores no more pages (their links may not
have reached the frontier: fetched again after the resume, as after ``kill -9``). Free space and
run the crawl again: it resumes as after ``kill -9``.

Every SQLite file of the JOBDIR is opened with ``schedulers.base.connect_crash_safe``, whose
connection (``GuardedConnection``) turns a failing statement into ``JobdirUnwritable`` and
refuses every statement once the crawl's JOBDIR has failed: nothing can call into a broken file
in a loop. The callers into the JOBDIR (the scheduler, the counters, the middlewares) catch
``JobdirUnwritable`` and stop what they were doing.

The files written only as the crawl closes (a pause) fail apart: each one that cannot be written
is one error line (``JobdirWrites.not_saved``), and the crawl's close reason becomes
``jobdir_unwritable`` too: the pause was not saved whole (the resume goes on as after
``kill -9``).

Stat: ``focused/jobdir_unwritable`` (1 once a JOBDIR file could not be written).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from contextlib import suppress
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from focused.errors import one_line, quoted

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import BinaryIO

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

JOBDIR_UNWRITABLE = "jobdir_unwritable"  # the close reason
UNWRITABLE_STAT = "focused/jobdir_unwritable"


class JobdirUnwritable(Exception):
    """A JOBDIR file could not be written (or the JOBDIR failed before: nothing more goes)."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path} cannot be written ({reason})")
        self.path = path
        self.reason = reason


def failure_reason(exc: BaseException) -> str | None:
    """Why a write failed, when ``exc`` says the file or its disk failed (not a bug in the
    caller): an OSError's message, or an SQLite operational error's (a full disk, an I/O error,
    a file that cannot be opened, a read-only file). None for anything else."""
    if isinstance(exc, JobdirUnwritable):
        return exc.reason
    if isinstance(exc, OSError):
        return exc.strerror or one_line(exc)
    if type(exc) in (sqlite3.OperationalError, sqlite3.DatabaseError):
        return one_line(exc)
    return None


class JobdirWrites:
    """The state of one crawl's JOBDIR writes: whether one failed, and what to do then."""

    def __init__(self, jobdir: Path | str, crawler: Crawler | None = None) -> None:
        self.jobdir = jobdir
        self.crawler = crawler
        self.failure: JobdirUnwritable | None = None
        self.unsaved = False  # a file written at the close could not be
        self._closing: Any = None  # keeps the close task referenced

    def check(self) -> None:
        """Raise the failure, if the JOBDIR failed: nothing more is written to it."""
        if self.failure is not None:
            raise self.failure

    def _name(self, path: Path | str) -> str:
        try:
            from pathlib import Path

            return str(Path(path).relative_to(self.jobdir))
        except ValueError:
            return str(path)

    def failed(self, path: Path | str, exc: BaseException) -> BaseException:
        """``exc``, raised writing ``path``, as the exception to raise: the crawl's
        ``JobdirUnwritable`` (the first stops the crawl, in one error line) when the file or its
        disk failed, else ``exc`` itself (a bug)."""
        reason = failure_reason(exc)
        if reason is None:
            return exc
        if self.failure is not None:
            return self.failure
        self.failure = JobdirUnwritable(path, reason)
        logger.error(
            "JOBDIR %s can no longer be written (%s: %s): the crawl stops; free space and run it"
            " again to resume",
            self.jobdir,
            self._name(path),
            reason,
        )
        self._stop()
        return self.failure

    def not_saved(self, what: str, path: Path | str, exc: BaseException) -> None:
        """A file written as the crawl closes could not be: one error line, and the close
        reason becomes ``jobdir_unwritable`` (``pipelines.storage`` records it so)."""
        reason = failure_reason(exc) or one_line(exc)
        self.unsaved = True
        if self.crawler is not None and self.crawler.stats is not None:
            self.crawler.stats.set_value(UNWRITABLE_STAT, 1)
        logger.error(
            "JOBDIR %s: %s could not be saved (%s: %s): the pause is not saved whole; the"
            " crawl resumes as after a crash",
            self.jobdir,
            what,
            self._name(path),
            reason,
        )

    def save_at_pause(self, what: str, path: Path | str, save: Callable[[], None]) -> None:
        """Run ``save``, which writes ``path`` as the crawl closes: not at all once a write
        failed during the crawl (the JOBDIR is left as ``kill -9`` would leave it), and an
        ``OSError`` (a full disk) as one error line (:meth:`not_saved`)."""
        if self.failure is not None:
            return
        try:
            save()
        except OSError as exc:
            self.not_saved(what, path, exc)

    @property
    def broken(self) -> bool:
        """Whether a JOBDIR write failed, during the crawl or at its close."""
        return self.failure is not None or self.unsaved

    def _stop(self) -> None:
        crawler = self.crawler
        if crawler is None:
            return
        if crawler.stats is not None:
            crawler.stats.set_value(UNWRITABLE_STAT, 1)
        engine = crawler.engine
        if engine is None or engine.spider is None:
            return  # the spider is not open yet: its open fails, or it closes
        slot = getattr(engine, "_slot", None)
        if slot is None or slot.closing is not None:
            return  # closing already: the close reason becomes ours (pipelines.storage)
        from scrapy import signals
        from scrapy.utils.asyncio import call_later
        from scrapy.utils.defer import deferred_from_coro

        from focused.stopping import close_spider_now

        if engine.running:
            self._closing = close_spider_now(crawler, JOBDIR_UNWRITABLE)
            return

        def engine_started() -> None:  # the failure came as the spider opened
            self._closing = call_later(
                0, lambda: deferred_from_coro(engine.close_spider_async(reason=JOBDIR_UNWRITABLE))
            )

        engine.pause()
        crawler.signals.connect(engine_started, signal=signals.engine_started, weak=False)


def write_whole(path: Path, temp: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` whole or not at all: ``write`` fills ``temp``, which then replaces it. A
    file that cannot be written (a full disk) leaves ``path`` as it was, and no ``temp``."""
    try:
        with temp.open("wb") as file:
            write(file)
        os.replace(temp, path)
    except OSError:
        temp.unlink(missing_ok=True)
        raise


_WRITES: WeakKeyDictionary[Any, JobdirWrites] = WeakKeyDictionary()


def jobdir_writes(crawler: Crawler | None) -> JobdirWrites | None:
    """The crawl's ``JobdirWrites``; None without a JOBDIR (or without a crawler)."""
    if crawler is None:
        return None
    writes = _WRITES.get(crawler)
    if writes is None:
        jobdir = crawler.settings.get("JOBDIR")
        if not jobdir:
            return None
        writes = _WRITES[crawler] = JobdirWrites(jobdir, crawler)
    return writes


class GuardedConnection(sqlite3.Connection):
    """An SQLite connection to a JOBDIR file: a statement that fails because the file or its
    disk did raises the crawl's ``JobdirUnwritable``, and none runs once the JOBDIR failed."""

    writes: JobdirWrites | None = None
    path: Path | str = ""

    def _failed(self, exc: sqlite3.Error) -> BaseException:
        return exc if self.writes is None else self.writes.failed(self.path, exc)

    def _check(self) -> None:
        if self.writes is not None:
            self.writes.check()

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self._check()
        try:
            return super().execute(sql, parameters)
        except sqlite3.Error as exc:
            raise self._failed(exc) from None

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        self._check()
        try:
            return super().executemany(sql, parameters)
        except sqlite3.Error as exc:
            raise self._failed(exc) from None

    def executescript(self, script: str, /) -> sqlite3.Cursor:
        self._check()
        try:
            return super().executescript(script)
        except sqlite3.Error as exc:
            raise self._failed(exc) from None

    def rollback_quietly(self) -> None:
        """End the transaction under way, if any, whatever the JOBDIR's state: what it wrote
        was never committed."""
        if self.in_transaction:
            with suppress(sqlite3.Error):  # else closing the connection rolls it back
                super().execute("ROLLBACK")

    def close(self) -> None:
        with suppress(sqlite3.Error):  # a checkpoint on a full disk: the log stays, whole
            super().close()


# What a column of a JOBDIR table holds, as the code that reads it back needs it: an SQL
# condition on the column (``{c}``), true of every value the crawl writes, and how an error line
# names such a value. ``focused.jobchecks`` refuses, before the crawl starts, a file with a row
# that fails one (``damaged_row``): a number turned text or NULL, a request that is no pickle
# was a traceback as the resume read it, or a crawl that hung on it.
ColumnRule = tuple[str, str]
FINGERPRINT: ColumnRule = ("typeof({c}) = 'blob'", "a fingerprint (bytes)")
NUMBER: ColumnRule = ("typeof({c}) IN ('integer', 'real')", "a number")
WHOLE: ColumnRule = ("typeof({c}) = 'integer'", "a whole number")
COUNT: ColumnRule = ("typeof({c}) = 'integer' AND {c} >= 0", "a count")
FLAG: ColumnRule = ("typeof({c}) = 'integer' AND {c} IN (0, 1)", "0 or 1")
# Text whose bytes are no UTF-8 passes typeof, and Python's sqlite3 fails to read it: a
# traceback each time the crawl read the row (a frontier's host, every few seconds).
TEXT: ColumnRule = ("typeof({c}) = 'text' AND is_utf8(CAST({c} AS BLOB))", "UTF-8 text")
# Pickles of protocol 2 and later start with the PROTO opcode: a request's bytes replaced by
# others are seen without unpickling the frontier (a pickle cut short or of another value is
# found as it is read, ``schedulers.base.SqliteFrontier``).
PICKLE: ColumnRule = ("typeof({c}) = 'blob' AND substr({c}, 1, 1) = x'80'", "a pickled request")


def or_null(rule: ColumnRule) -> ColumnRule:
    return f"typeof({{c}}) = 'null' OR ({rule[0]})", f"{rule[1]} or null"


def one_of(rule: ColumnRule, values: tuple[str, ...]) -> ColumnRule:
    listed = ", ".join(f"'{value}'" for value in values)
    return f"({rule[0]}) AND {{c}} IN ({listed})", " or ".join(values)


def damaged_row(
    database: sqlite3.Connection, table: str, rules: dict[str, ColumnRule]
) -> str | None:
    """What is wrong with the first row of ``table`` with a value its column's rule refuses
    (None: every row passes; a column the table lacks is let be, an older file's). One scan of
    the table in SQLite: ``typeof`` reads no blob."""
    database.create_function("is_utf8", 1, _is_utf8, deterministic=True)  # TEXT's
    found = {row[1] for row in database.execute(f"PRAGMA table_info({table})")}
    checks = {
        column: rule[0].replace("{c}", f'"{column}"')
        for column, rule in rules.items()
        if column in found
    }
    if not checks:
        return None
    passes = " AND ".join(f"coalesce({check}, 0)" for check in checks.values())
    row = database.execute(
        f"SELECT rowid, {', '.join(f'coalesce({check}, 0)' for check in checks.values())}"
        f" FROM {table} WHERE NOT ({passes}) LIMIT 1"
    ).fetchone()
    if row is None:
        return None
    column = next(column for column, ok in zip(checks, row[1:], strict=True) if not ok)
    text_factory = database.text_factory
    database.text_factory = lambda data: data.decode(errors="replace")  # shown, not read
    try:
        (value,) = database.execute(
            f'SELECT "{column}" FROM {table} WHERE rowid = ?', (row[0],)
        ).fetchone()
    finally:
        database.text_factory = text_factory
    return (
        f"row {row[0]} of its table {table} has {quoted(value)} in {column}, not {rules[column][1]}"
    )


def _is_utf8(data: bytes | None) -> bool:
    """Whether ``data`` (a value cast to bytes; None for NULL) is UTF-8 text."""
    if data is None:
        return False
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True
