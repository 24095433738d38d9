"""A crawl's job checked before it starts: the JOBDIR it resumes (its files, its frontier, and
the order it was crawled in: strategy, parameters, topic), the store and shared frontier it
goes on with, and the locks that keep two processes off one JOBDIR or one crawl.

Every check raises :class:`focused.errors.ConfigError` with a one-line message.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import sqlite3
from collections.abc import Mapping
from contextlib import closing, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from scrapy.exporters import CsvItemExporter, JsonItemExporter, XmlItemExporter
from scrapy.extensions.feedexport import apply_uri_params
from scrapy.utils.conf import feed_complete_default_values_from_settings
from scrapy.utils.misc import load_object

from focused.errors import (
    ConfigError,
    JSONTooDeep,
    counted,
    cut,
    load_json,
    one_line,
    quoted,
    redact_uri,
    spider_arguments,
)
from focused.jobdir import (
    COUNT,
    FINGERPRINT,
    FLAG,
    NUMBER,
    TEXT,
    WHOLE,
    ColumnRule,
    damaged_row,
    one_of,
    or_null,
)
from focused.report import (
    being_recrawled,
    describe_params,
    is_live,
    recrawl_is_live,
    running_elsewhere,
)
from focused.resume import (
    COUNTERS_FILE,
    STATE_FILE,
    STATE_TEMP_FILE,
    TOPIC_FILE,
    CrawlCounters,
    TopicJournal,
)
from focused.settingchecks import local_feed_path
from focused.storage import DEFAULT_SQLITE_PATH, StoreError, open_store, stored_time
from focused.strategies import strategy_class
from focused.traps import COUNTS_FILE as TRAP_COUNTS_FILE
from focused.traps import KINDS as TRAP_KINDS
from schedulers.base import FRONTIER_FILE, FRONTIER_TABLES, FRONTIER_VALUES, QUEUE_DIR

if TYPE_CHECKING:
    from collections.abc import Callable

    from focused.arguments import CrawlConfig
    from focused.distributed import BudgetMarks


def _job_file(settings: Any, name: str) -> Path | None:
    jobdir = settings.get("JOBDIR") if settings is not None else None
    return Path(jobdir, name) if jobdir else None


def check_jobdir(settings: Any) -> None:
    """JOBDIR is a directory the crawl can write (Scrapy would create it, with a traceback when
    a file is in the way)."""
    jobdir = settings.get("JOBDIR")
    if not jobdir:
        return
    try:
        if Path(jobdir).exists() and not Path(jobdir).is_dir():
            raise ConfigError(f"cannot use JOBDIR {quoted(jobdir)}: it is a file, not a directory")
        Path(jobdir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # exists() too: a name longer than the file system takes
        raise ConfigError(f"cannot use JOBDIR {quoted(jobdir)}: {exc.strerror}") from None
    if not os.access(jobdir, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot use JOBDIR {quoted(jobdir)}: it is not writable")
    _check_job_databases(Path(jobdir))
    _check_job_tables(Path(jobdir))
    _check_job_files(Path(jobdir))


# The lock of a job directory (lock_jobdir), in it; the descriptors this process holds.
JOBDIR_LOCK = "lock"
_held_jobdir_locks: dict[str, int] = {}


def lock_jobdir(settings: Any) -> None:
    """One crawl at a time in a job directory: two would pop the same frontier and number their
    pages alike, fetching pages twice and past the budget. The lock is the kernel's (flock), so
    it goes with the process that held it, ``kill -9`` included. Held until this process ends."""
    jobdir = settings.get("JOBDIR")
    held = str(Path(jobdir).resolve()) if jobdir else None
    if held is None or held in _held_jobdir_locks:
        return
    try:
        descriptor = os.open(Path(jobdir, JOBDIR_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ConfigError(f"cannot use JOBDIR {quoted(jobdir)}: {exc.strerror}") from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        raise ConfigError(
            f"JOBDIR {quoted(jobdir)} is in use by another crawl: let it end (Ctrl-C pauses "
            "it), or use another JOBDIR"
        ) from None
    _held_jobdir_locks[held] = descriptor


# The lock of the crawls of an SQLite store (lock_crawl), beside it; the descriptor this
# process holds for each such file (one: closing any descriptor of a file drops all of this
# process's POSIX locks on it).
CRAWL_LOCK_SUFFIX = ".lock"
_held_crawl_locks: dict[str, int] = {}
_held_crawl_ids: set[tuple[str, int]] = set()  # (lock file, offset) this process holds


def crawl_lock_offset(crawl_id: str) -> int:
    """The byte of the store's lock file that stands for the crawl id."""
    return int.from_bytes(hashlib.sha256(crawl_id.encode()).digest()[:6], "big")


def lock_crawl(settings: Any, crawl_id: str, then: str) -> None:
    """One process at a time runs a crawl id into an SQLite store, a crawl or a recrawl (``then``
    ends the refusal: what to do instead). ``check_store`` refuses a run under the id of a crawl
    with pages stored, but two runs started together (a Scrapyd job scheduled twice) both found
    none, and both crawled: every page fetched twice, each run's pages overwriting the other's.
    The lock is the kernel's (a POSIX lock on one byte of ``FOCUSED_DB.lock``, at an offset
    hashed from the crawl id), so it goes with the process that held it, ``kill -9`` included.
    Held until this process ends. The processes of a shared frontier run one crawl id by
    design: each takes the lock shared, so that a process that holds it whole knows that none
    of them is alive either (``holds_crawl_lock``). A MongoDB server is no file to lock."""
    if settings.get("MONGO_URI"):
        return
    path = _crawl_lock_file(settings)
    descriptor = _held_crawl_locks.get(path)
    if descriptor is None:
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(f"cannot lock crawl {crawl_id}: {path}: {exc.strerror}") from None
        _held_crawl_locks[path] = descriptor
    offset = crawl_lock_offset(crawl_id)
    kind = fcntl.LOCK_SH if settings.get("FOCUSED_FRONTIER") else fcntl.LOCK_EX
    try:
        # A lock this process holds already is taken again: a POSIX lock never conflicts
        # with its own process.
        fcntl.lockf(descriptor, kind | fcntl.LOCK_NB, 1, offset)
    except OSError:
        raise ConfigError(running_elsewhere(crawl_id, then=then)) from None
    _held_crawl_ids.add((path, offset))


def _crawl_lock_file(settings: Any) -> str:
    """The lock file of the crawls of the settings' SQLite store."""
    store = Path(settings.get("FOCUSED_DB") or DEFAULT_SQLITE_PATH).resolve()
    return str(store) + CRAWL_LOCK_SUFFIX


def holds_crawl_lock(settings: Any, crawl_id: str) -> bool:
    """Whether this process holds the lock of crawl ``crawl_id`` in its SQLite store
    (``lock_crawl``). Every recrawl of an SQLite store holds it whole while it runs (it takes no
    shared frontier): a recrawl's mark in the crawl's record (``focused.report.recrawl_is_live``)
    is then that of one killed outright (``kill -9``, its terminal closed): its lock went with
    its process, but its mark stays fresh for 3 heartbeat intervals (90 s by default). So does
    every process of the crawl, whole or shared: a recrawl that holds it finds a ``running``
    record with a fresh heartbeat (``focused.report.is_live``) only when the crawl was killed.
    Never for MongoDB: ``lock_crawl`` takes no lock for it."""
    return (_crawl_lock_file(settings), crawl_lock_offset(crawl_id)) in _held_crawl_ids


def _recrawl_killed(settings: Any, crawl_id: str) -> bool:
    """Whether the recrawl whose mark the crawl's record holds fresh is gone: the crawl's lock
    in its SQLite store is free. Taken then, and held: the crawl takes it next anyway."""
    try:
        lock_crawl(settings, crawl_id, then="")
    except ConfigError:
        return False  # a recrawl (or a run) of the crawl holds it
    return holds_crawl_lock(settings, crawl_id)


def _not_a_job_directory(jobdir: Path, name: str | Path, reason: str | None = None) -> ConfigError:
    because = f" ({reason})" if reason else ""
    return ConfigError(
        f"JOBDIR {quoted(str(jobdir))} is not a job directory of this crawler: "
        f"{name} cannot be read{because}; use a new JOBDIR"
    )


def _check_job_databases(jobdir: Path) -> None:
    """Every SQLite file of a job directory (the frontier, the counters, the trap families...)
    is a database: one that is not (damaged, or another program's) failed with a traceback as
    the component that owns it opened, and the crawl went on without it or stopped."""
    for path in sorted(jobdir.rglob("*.sqlite3")):
        try:
            with closing(sqlite3.connect(path)) as database:
                database.execute("PRAGMA schema_version")
        except sqlite3.Error as exc:
            name = path.relative_to(jobdir)
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _DISK_FAILURES:
                # Its disk failed or is full (reading a file in WAL mode writes its index):
                # the job is likely whole, and resumes once there is room.
                raise ConfigError(
                    f"cannot use JOBDIR {quoted(str(jobdir))}: {name} cannot be read ({exc}):"
                    " free space on its disk (or copy the JOBDIR to another) and run the"
                    " crawl again"
                ) from None
            raise _not_a_job_directory(jobdir, name, str(exc)) from None


# SQLite's primary result codes of a file that could not be read because of its disk, not its
# content: SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN.
_DISK_FAILURES = frozenset({10, 13, 14})


# In the JOBDIR queue's folder, the state the queue's close() returned, which Scrapy reads
# back as the scheduler opens (``_read_dqs_state``).
QUEUE_STATE_FILE = f"{QUEUE_DIR}/active.json"
JOB_FRONTIER_FILE = f"{QUEUE_DIR}/{FRONTIER_FILE}"


class JobTable(NamedTuple):
    columns: tuple[str, ...]  # those the crawl reads
    may_lack: bool  # whether a file of the crawl's may lack the table
    values: dict[str, ColumnRule]  # what each column holds (focused.jobdir.damaged_row)


def _job_tables() -> dict[str, dict[str, JobTable]]:
    """The tables of a job directory's SQLite files, the columns the crawl reads from them and
    what their values are, by file. A table the file lacks is made, as in a new file; a file
    that has tables but not the first is another's."""
    # focused.dedup imports numpy, 0.06 s that every command paid at its start (Scrapy imports
    # the project's commands before it runs any): only when a JOBDIR is checked.
    from focused.dedup import INDEX_FILE as NEAR_DUPLICATES_FILE

    return {
        # schedulers.base.SqliteFrontier: inflight and finished came with the crash-safe resume.
        JOB_FRONTIER_FILE: {
            table: JobTable(columns, table != "frontier", FRONTIER_VALUES[table])
            for table, columns in FRONTIER_TABLES.items()
        },
        COUNTERS_FILE: {  # focused.resume.CrawlCounters
            "counters": JobTable(
                ("name", "value"),
                False,
                {"name": one_of(TEXT, CrawlCounters.NAMES), "value": COUNT},
            ),
            # made with the resume of a failed robots.txt after kill -9
            "robots_failures": JobTable(
                ("netloc", "failures", "retry_at", "why", "there"),
                True,
                {
                    "netloc": TEXT,
                    "failures": COUNT,
                    "retry_at": or_null(NUMBER),
                    "why": or_null(TEXT),
                    "there": FLAG,
                },
            ),
            # made with the topic-drift window's verdicts written through
            "drift_window": JobTable(
                ("fetch_order", "relevant"),
                True,
                {"fetch_order": COUNT, "relevant": FLAG, "fp": or_null(FINGERPRINT)},
            ),
            # made with the pages below STORE_MIN_RELEVANCE counted through, and with the URL a
            # page stored under its rel=canonical was fetched at: written as the crawl runs,
            # another shape stopped it at its first such page, as if the JOBDIR's disk failed
            "not_stored": JobTable(("url",), True, {"url": TEXT}),
            "stored_under": JobTable(("fetched", "url"), True, {"fetched": TEXT, "url": TEXT}),
            # made with each host's MAX_PAGES_PER_HOST slots written through
            "host_pages": JobTable(("host", "pages"), True, {"host": TEXT, "pages": COUNT}),
        },
        TRAP_COUNTS_FILE: {  # focused.traps.SqliteCounts
            "counts": JobTable(
                ("family", "kind", "count"),
                False,
                {"family": TEXT, "kind": one_of(TEXT, TRAP_KINDS), "count": COUNT},
            )
        },
        NEAR_DUPLICATES_FILE: {  # focused.simhash.SimHashIndex
            "bands": JobTable(
                ("band", "value", "fingerprint", "url"),
                False,
                {"band": WHOLE, "value": WHOLE, "fingerprint": SIMHASH, "url": TEXT},
            )
        },
        # schedulers.rank_semantic.LinkGraph (GRAPH_FILE), saved whole; its ranking read once.
        f"{QUEUE_DIR}/linkgraph.sqlite3": {
            "nodes": JobTable(("id", "url"), False, {"url": TEXT}),
            "edges": JobTable(("pair",), False, {"pair": WHOLE}),
            "ranking": JobTable(("rank",), True, {"rank": RANKS}),
            # saved since redirects were merged
            "merged": JobTable(("node", "into_node"), True, {"node": WHOLE, "into_node": WHOLE}),
        },
    }


# A SimHash fingerprint as focused.simhash stores it (8 bytes), and a ranking as
# rank_semantic's LinkGraph saves it (float64s).
SIMHASH: ColumnRule = ("typeof({c}) = 'blob' AND length({c}) = 8", "a fingerprint of 8 bytes")
RANKS: ColumnRule = ("typeof({c}) = 'blob' AND length({c}) % 8 = 0", "an array of ranks")


def _check_job_tables(jobdir: Path) -> None:
    """The SQLite files of a job directory hold the tables their code reads, with its columns:
    a database of another program, or a table of another shape, under the name of one was a
    cascade of tracebacks as the crawl opened it (a frontier table without its columns), or a
    frontier made anew beside the other's tables, its requests lost without a word. An empty
    file is let be (its code makes the tables); ``check_job_queue`` refuses an empty frontier
    of a crawl that had queued requests. And their rows hold what the crawl wrote: a value
    damaged in one (text for a number, a request that is no pickle) was a traceback as the
    resume read it, or a crawl that logged one every 5 seconds and never ended."""
    for name, tables in _job_tables().items():
        path = jobdir / name
        if not path.is_file():
            continue
        try:
            with closing(sqlite3.connect(path)) as database:
                reason = _missing_table(database, tables)
                damage = None if reason else _damaged_value(database, tables)
        except sqlite3.Error as exc:
            reason, damage = str(exc), None
        if reason:
            raise _not_a_job_directory(jobdir, name, reason)
        if damage:
            raise ConfigError(
                f"JOBDIR {quoted(str(jobdir))} is damaged: {name} cannot be read ({damage});"
                " mend or delete that row, or use a new JOBDIR"
            )


def _missing_table(database: sqlite3.Connection, tables: dict[str, JobTable]) -> str | None:
    """What the file ``database`` lacks of ``tables`` (None: nothing, or it is empty)."""
    if not _has_tables(database):
        return None
    for table, (columns, may_lack, _) in tables.items():
        kind = database.execute(
            "SELECT type FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
        if kind is None and may_lack:
            continue
        if kind != ("table",):
            return f"it has no table {table}"
        found = {row[1] for row in database.execute(f"PRAGMA table_info({table})")}
        missing = [column for column in columns if column not in found]
        if missing:
            return f"its table {table} has no column {missing[0]}"
    return None


def _damaged_value(database: sqlite3.Connection, tables: dict[str, JobTable]) -> str | None:
    """The first row of the file ``database`` with a value its reader would fail on (None:
    none)."""
    for table, job_table in tables.items():
        exists = database.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        if exists and (damage := damaged_row(database, table, job_table.values)):
            return damage
    return None


def _has_tables(database: sqlite3.Connection) -> bool:
    return database.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None


def check_job_queue(settings: Any, strategy: str) -> None:
    """The JOBDIR queue a resumed crawl goes on with (``requests.queue``): its saved state is
    what the strategy's ``close()`` writes, for Scrapy and the strategy's ``restore`` read it
    as the scheduler opens (a file cut short, a folder, a value of another type: a cascade of
    tracebacks, on every resume); and its frontier file holds the requests the crawl queued
    (one emptied would resume an empty frontier and end the crawl early without a word).
    A missing state is let be: it is what a crash leaves (the frontier file knows the rest,
    and the crawl's counters whether there should be one)."""
    jobdir = settings.get("JOBDIR") if settings is not None else None
    if not jobdir:
        return
    jobdir = Path(jobdir)
    if (jobdir / QUEUE_DIR).exists() and not (jobdir / QUEUE_DIR).is_dir():
        raise _not_a_job_directory(jobdir, QUEUE_DIR, "it is not a folder")
    state = _queue_state(jobdir)
    if state is not None:
        try:
            strategy_class(strategy).check_state(state)
        except ValueError as exc:
            raise _not_a_job_directory(jobdir, QUEUE_STATE_FILE, str(exc)) from None
    queued = (state is not None and state.get("seq", 0) > 0) or _counted(jobdir)
    frontier = jobdir / JOB_FRONTIER_FILE
    if not frontier.exists():
        if queued:
            raise _not_a_job_directory(jobdir, JOB_FRONTIER_FILE, "it is missing")
        return
    # focused.json is written before the frontier file is made (and the frontier's tables
    # with it): a job that has both has queued into it.
    if queued or (jobdir / "focused.json").exists():
        try:
            with closing(sqlite3.connect(frontier)) as database:
                empty = not _has_tables(database)
        except sqlite3.Error as exc:
            raise _not_a_job_directory(jobdir, JOB_FRONTIER_FILE, str(exc)) from None
        if empty:
            raise _not_a_job_directory(jobdir, JOB_FRONTIER_FILE, "it is empty")


def _counted(jobdir: Path) -> bool:
    """Whether the crawl's counters (``focused.resume.CrawlCounters``) counted anything: a
    response or a link, which came after its seeds were queued, so its frontier file was made.
    They are written as they change, where the queue's state waits for a pause: after a crash
    they alone tell a frontier file deleted from one never made."""
    path = jobdir / COUNTERS_FILE
    if not path.is_file():
        return False
    try:
        with closing(sqlite3.connect(path)) as database:
            if not _has_tables(database):
                return False
            query = "SELECT 1 FROM counters WHERE value > 0 LIMIT 1"
            return database.execute(query).fetchone() is not None
    except sqlite3.Error as exc:
        raise _not_a_job_directory(jobdir, COUNTERS_FILE, str(exc)) from None


def _queue_state(jobdir: Path) -> Any:
    """The JOBDIR queue's saved state as JSON gives it back (None when there is none)."""
    path = jobdir / QUEUE_STATE_FILE
    try:
        return load_json(path.read_bytes().decode("utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        reason = "it is not a file"
    except OSError as exc:
        reason = exc.strerror or one_line(exc)
    except UnicodeDecodeError:
        reason = "it is not UTF-8 text"
    except JSONTooDeep as exc:
        reason = f"it is {exc}"
    except ValueError:
        reason = "it is not JSON"
    raise _not_a_job_directory(jobdir, QUEUE_STATE_FILE, reason)


def _check_job_files(jobdir: Path) -> None:
    """The files the resume reads once the crawl has started: a folder where ``spider.state``,
    the sentence encoder's state, the hosts' holds of a pause (``paused_hosts.json``: the
    crawl ran, and failed at its pause, exit 1) or their temporary files are written (a
    traceback as the crawl closed, its state lost), or a ``topic.jsonl`` that
    ``focused.resume.TopicJournal`` did not write (junk, binary: a traceback as the spider
    opened) is refused now. A ``spider.state`` that cannot be unpickled, or is not what a crawl
    saves, is read as missing (``focused.resume.SpiderState``), as after a crash, and so is
    the encoder's state."""
    # focused.encoder imports numpy: only when a JOBDIR is checked (see _job_tables).
    from focused.downloader import PAUSED_HOSTS_FILE, PAUSED_HOSTS_TEMP_FILE
    from focused.encoder import STATE_FILE as ENCODER_STATE_FILE
    from focused.encoder import STATE_TEMP_FILE as ENCODER_STATE_TEMP_FILE

    kept = (
        STATE_FILE,
        STATE_TEMP_FILE,
        ENCODER_STATE_FILE,
        ENCODER_STATE_TEMP_FILE,
        TOPIC_FILE,
        PAUSED_HOSTS_FILE,
        PAUSED_HOSTS_TEMP_FILE,
    )
    for name in kept:
        path = jobdir / name
        if path.exists() and not path.is_file():
            raise _not_a_job_directory(jobdir, name, "it is not a file")
    try:
        TopicJournal(jobdir).texts()
    except (OSError, ValueError) as exc:
        raise _not_a_job_directory(jobdir, TOPIC_FILE, one_line(exc)) from None


def job_record(settings: Any) -> dict[str, Any]:
    """``JOBDIR/focused.json``: what a resumed crawl must reuse ({} for a new JOBDIR)."""
    path = _job_file(settings, "focused.json")
    if path is None:
        return {}
    try:
        record = load_json(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return {}  # a new JOBDIR (one that is a file is refused by check_jobdir)
    except OSError as exc:  # a folder, no permission, a JOBDIR name too long...
        raise _not_a_job_directory(path.parent, path.name, exc.strerror) from None
    except ValueError:  # also JSON and UTF-8 errors
        record = None
    if not _is_job_record(record):
        raise _not_a_job_directory(path.parent, path.name)
    return record


def jobdir_holds(settings: Any, crawl_id: str) -> bool:
    """Whether JOBDIR (if any) holds crawl ``crawl_id``: this run goes on with it from there."""
    return job_record(settings).get("crawl_id") == crawl_id


def _is_job_record(record: Any) -> bool:
    """What ``remember_job`` writes: another value was a traceback as the resume compared it
    (a crawl id of 5, an order without its topic)."""
    if not isinstance(record, dict):
        return False
    if not all(
        isinstance(record.get(name, ""), str) for name in ("crawl_id", "strategy", "last_run")
    ):
        return False
    order = record.get("order", {})
    return order == {} or is_crawl_order(order)


def is_crawl_order(order: Any) -> bool:
    """Whether ``order`` is one ``crawl_order`` made, as JSON gives it back (a JOBDIR's, a
    shared crawl's in Redis): another value (no topic, a list) was a traceback as it was
    compared with this run's. An order saved before orders named their language has none."""
    return (
        isinstance(order, dict)
        and isinstance(order.get("strategy"), str)
        and isinstance(order.get("topic"), str)
        and isinstance(order.get("params"), dict)
        and isinstance(order.get("language"), str | None)
    )


def crawl_order(
    strategy: str, params: Mapping[str, Any], topic: str, language: str | None
) -> dict[str, Any]:
    """What orders a crawl's frontier, which a resumed JOBDIR crawl and every process of a
    shared crawl must be given alike: the topic hashed (it may be a whole file), the parameters
    as JSON gives them back, and the language the topic is tokenized in (None: unknown)."""
    return {
        "strategy": strategy,
        "params": json.loads(json.dumps(dict(params))),
        "topic": hashlib.sha256(topic.encode()).hexdigest()[:16],
        "language": language,
    }


def as_saved_now(saved: Mapping[str, Any], order: Mapping[str, Any]) -> dict[str, Any]:
    """An order ``saved`` by an earlier run (a JOBDIR's, a shared crawl's first process's) as
    this version saves it: one saved before orders named their language (session 33) is taken
    to tokenize its topic as ``order`` does."""
    return {"language": order["language"], **saved}


def describe_language(language: str | None) -> str:
    return f"language={language}" if language else "no language (none given, none told)"


def check_resumed_job(
    job: Mapping[str, Any], order: Mapping[str, Any], crawl_id: str, scrapyd: bool = False
) -> None:
    """A JOBDIR goes on only with the crawl it holds: its frontier was ordered by its strategy,
    parameters and topic, and its pages are stored under its crawl id. (A job directory
    written before session 19 has no order: only its strategy is compared.) ``scrapyd``: as
    ``spider_arguments`` takes it."""
    saved = job.get("strategy")
    if saved and saved != order["strategy"]:
        raise ConfigError(
            f"JOBDIR holds a {saved} crawl; resume it with "
            f"{spider_arguments(f'strategy={saved}', scrapyd=scrapyd)} or use a new JOBDIR"
        )
    saved_order = job.get("order") and as_saved_now(job["order"], order)
    if saved_order and saved_order["topic"] != order["topic"]:
        raise ConfigError(
            "JOBDIR holds a crawl of another query or topic_file; resume it with the same, or "
            "use a new JOBDIR"
        )
    if saved_order and saved_order["language"] != order["language"]:
        # Its frontier's scores came from the topic's words in that language's tokenizer.
        raise ConfigError(
            f"JOBDIR holds a crawl whose query has {describe_language(saved_order['language'])}"
            f", this run {describe_language(order['language'])}; resume it with the same "
            f"{spider_arguments('language', scrapyd=scrapyd)} or use a new JOBDIR"
        )
    if saved_order and saved_order["params"] != _asked_of_older_job(saved_order, order):
        raise ConfigError(
            f"JOBDIR holds a {saved} crawl with {describe_params(saved_order['params'])}; resume "
            "it with the same parameters or use a new JOBDIR"
        )
    saved_id = job.get("crawl_id")
    if crawl_id and saved_id and crawl_id != saved_id:
        raise ConfigError(
            f"JOBDIR holds crawl {saved_id}; resume it with "
            f"{spider_arguments(f'crawl_id={saved_id}', scrapyd=scrapyd)} (or none), or use a new "
            "JOBDIR"
        )


def _asked_of_older_job(saved: Mapping[str, Any], order: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters ``order`` asks of a job whose ``saved`` order may be older than a
    parameter: one it does not name counts only when given another value than its default."""
    defaults = {
        name: param.default for name, param in strategy_class(order["strategy"]).params.items()
    }
    return {
        name: value
        for name, value in order["params"].items()
        if name in saved["params"] or value != defaults[name]
    }


def check_shared_frontier(
    settings: Any, order: Mapping[str, Any], args: Mapping[str, str], scrapyd: bool = False
) -> BudgetMarks | None:
    """``scrapyd``: as ``spider_arguments`` takes it. Returns the page budget marks a shared
    crawl's process wrote (``take_back_shared_budget``)."""
    url = settings.get("FOCUSED_FRONTIER") if settings is not None else None
    if not url:
        return None
    strategy = order["strategy"]
    if not strategy_class(strategy).runs_distributed():
        raise ConfigError(
            f"strategy {strategy} keeps its order in one process: it cannot use FOCUSED_FRONTIER"
        )
    if not args.get("crawl_id", "").strip():
        given = spider_arguments("crawl_id=ID", scrapyd=scrapyd)
        raise ConfigError(f"FOCUSED_FRONTIER needs {given}, the same for every process")
    if settings.get("JOBDIR"):
        raise ConfigError("FOCUSED_FRONTIER and JOBDIR exclude each other: Redis keeps the crawl")
    from focused.distributed import check_frontier  # imports redis: only when asked for

    budget, timeout = (
        settings.getint("CLOSESPIDER_PAGECOUNT"),
        settings.getfloat("FOCUSED_WORKER_TIMEOUT"),
    )
    return check_frontier(str(url), args["crawl_id"].strip(), order, budget, timeout)


def take_back_shared_budget(config: CrawlConfig) -> None:
    """A start refused after ``check_shared_frontier`` recorded its page budget: its marks put
    back (``focused.distributed.take_back_budget``), so that the next start is judged on the
    processes that run."""
    if config.budget_marks is not None:
        from focused.distributed import take_back_budget  # imports redis: only when asked for

        # Redis gone since: the refusal is what to say, and the marks go stale in time.
        with suppress(ConfigError):
            take_back_budget(config.budget_marks)


def check_store(settings: Any, config: CrawlConfig) -> None:
    """The store opens: an SQLite file that can be made, a MongoDB server that answers. Run
    once before the crawl starts; a store that fails later stops the crawl
    (``store_unreachable``). And the crawl's id holds no pages but its own: a crawl goes on
    only from its JOBDIR or its shared frontier, and a run of its own under the id of another
    began its fetch order and counts again over the pages stored (a report of 10 pages
    fetched and 30 stored, 2 relevant where 10 were)."""

    url = settings.get("FOCUSED_FRONTIER")
    # Its JOBDIR's crawl ran: the crawl was recorded as it started, before its first request,
    # so a store without its record is not the one it ran with (a FOCUSED_DB relative to
    # another working directory, a MONGO_URI not given again), where it went on, its pages
    # split between two.
    job_ran = not url and _job_has_run(settings, config.crawl_id)
    if job_ran and not settings.get("MONGO_URI"):
        path = settings.get("FOCUSED_DB") or DEFAULT_SQLITE_PATH
        # An SQLite store not made yet holds no crawl: refused before it is made, so that a
        # resume run from the wrong folder leaves no empty store there.
        if not os.path.exists(path):
            raise _not_in_store(config.crawl_id, f"SQLite store at {cut(os.fspath(path))}")
    try:
        store = open_store(settings, make_index=False)  # made as the crawl opens it
        try:
            crawl = store.get_crawl(config.crawl_id)
            # A recrawl of it under way (its mark in the record, focused.refresh) would fetch
            # the pages this run fetches, each visit counted twice.
            # Checked again as the crawl records its start (Store.start_crawl): a recrawl
            # may claim it meanwhile.
            if (
                crawl is not None
                and recrawl_is_live(crawl, datetime.now(UTC))
                and not _recrawl_killed(settings, config.crawl_id)
            ):
                raise ConfigError(being_recrawled(crawl))
            # Checked again as the crawl records its start: two runs started together both
            # pass here (Store.start_crawl).
            unlocked = starts_unlocked(settings, config.crawl_id)
            if crawl is not None and unlocked and is_live(crawl, datetime.now(UTC)):
                raise ConfigError(running_elsewhere(crawl["crawl_id"], crawl))
            if crawl is None and job_ran:
                raise _not_in_store(config.crawl_id, f"{store.backend} store at {store.location}")
            if crawl is not None and not url:
                _check_jobdir_not_behind(settings, crawl)
            stored = crawl is not None and store.pages(
                config.crawl_id, order="latest", limit=1, fields=("fetch_order",)
            )
            # Only a frontier that holds the crawl goes on with it: one that lost it (Redis
            # restarted without its data) or never had it (the id of a crawl of one process)
            # would start it again from nothing, its fetch order and budget from 0 over the
            # pages stored.
            goes_on = bool(stored) and (
                _frontier_goes_on(store, str(url), config.crawl_id)
                if url
                else jobdir_holds(settings, config.crawl_id)
            )
        finally:
            store.close()
    except StoreError as exc:
        raise ConfigError(str(exc)) from None
    if stored and not goes_on:
        # A run of the crawl under way holds its lock: that, not its pages, is what refuses
        # this one (the line said to give another id, as for a crawl long ended).
        lock_crawl(settings, config.crawl_id, then="or give another crawl_id")
        raise ConfigError(
            f"crawl {config.crawl_id} has pages in the store already: a crawl goes on only from "
            "its JOBDIR (or its shared frontier); give another crawl_id"
            + (f" ({config.jobdir_note})" if config.jobdir_note else "")
        )


def check_feeds(settings: Any, crawl_id: str, spider: Callable[[], object]) -> None:
    """A feed's file (named as Scrapy names it this run, from the spider's attributes, made by
    ``spider`` when asked) that holds anything. With -o, a JSON, XML or CSV feed got a second
    array, root or header after what it held, and was no file of its format any more: refused,
    whatever the crawl; -o adds to a JSON lines, pickle or marshal feed. With -O, a crawl that
    goes on (from its JOBDIR, or from a shared frontier that holds it) opened anew the file of
    its earlier runs, or of its other processes, and what they exported to it was gone without
    a word (the store keeps the pages): refused too; a new crawl writes its -O feed anew."""
    earlier: str | None = None  # what the file holds, where the crawl goes on; asked once
    for uri, options in settings.getdict("FEEDS").items():
        options = feed_complete_default_values_from_settings(options, settings, str(uri))
        second = _second_document(settings, options)
        if not (options.get("overwrite") or second):
            continue
        if not _holds_anything(_feed_file_of_this_run(str(uri), options, spider)):
            continue
        if earlier is None:
            earlier = _exported_before(settings, crawl_id)
        if options.get("overwrite"):
            if not earlier:
                continue
            hint = "give it with -o to add to it, or name another file"
            if second:
                hint = f"name another file (-o would add {second} to it), or use a .jsonl feed"
            raise ConfigError(
                f"the feed {quoted(str(uri))} (-O) would be written anew, losing {earlier}: {hint}"
            )
        if earlier:
            raise ConfigError(
                f"the feed {quoted(str(uri))} holds {earlier}, and -o would add {second} after"
                " it: name another file, or use a .jsonl feed, which -o adds to (-O would write"
                " it anew, losing what it holds)"
            )
        raise ConfigError(
            f"the feed {quoted(str(uri))} is not empty, and -o would add {second} after what it"
            " holds: give it with -O to write it anew, name another file, or use a .jsonl feed,"
            " which -o adds to"
        )


def _exported_before(settings: Any, crawl_id: str) -> str:
    """What a crawl that goes on exported before this run, as the feed messages name it; ""
    for a new crawl."""
    if _job_has_run(settings, crawl_id):
        return f"what the earlier runs of crawl {crawl_id} exported to it"
    url = settings.get("FOCUSED_FRONTIER")
    if url:
        from focused.distributed import frontier_state  # imports redis: only when asked for

        if frontier_state(str(url), crawl_id) is not None:
            return f"what the processes of crawl {crawl_id} exported to it"
    return ""


def _feed_file_of_this_run(
    uri: str, options: dict[str, Any], spider: Callable[[], object]
) -> Path | None:
    """The local file a feed's URI names on this run, as Scrapy fills its ``%(name)s``; None
    for another storage, a name Scrapy makes anew each run (``%(time)s``, ``%(batch_time)s``)
    and one a ``uri_params`` function of the user's fills."""
    names = set(re.findall(r"%\(([^)]*)\)", uri))
    if names & {"time", "batch_time"} or (names and options.get("uri_params")):
        return None
    made = spider() if names - {"batch_id"} else None
    # The first batch of this run is numbered 1, as the first of the earlier runs was.
    params = {name: 1 if name == "batch_id" else getattr(made, name) for name in names}
    return local_feed_path(apply_uri_params(uri, params))


def _holds_anything(path: Path | None) -> bool:
    try:
        return path is not None and path.stat().st_size > 0
    except OSError:  # no such file yet
        return False


# Scrapy's exporters that write one document, with a start and an end: what a run adds to the
# file comes after the earlier runs' document, as a second one.
_ONE_DOCUMENT = (
    (JsonItemExporter, "a second JSON array"),
    (XmlItemExporter, "a second XML root"),
    (CsvItemExporter, "a second header line"),
)


def _second_document(settings: Any, options: dict[str, Any]) -> str | None:
    """What the feed's exporter writes before this run's records, where it makes a file that
    holds the earlier runs' records no file of its format; None where the records simply
    follow them (JSON lines, pickle, marshal, CSV without its header line)."""
    exporter = load_object(settings.getwithbase("FEED_EXPORTERS")[options["format"]])
    if issubclass(exporter, CsvItemExporter) and not options["item_export_kwargs"].get(
        "include_headers_line", True
    ):
        return None
    return next((what for kind, what in _ONE_DOCUMENT if issubclass(exporter, kind)), None)


def _check_jobdir_not_behind(settings: Any, crawl: Mapping[str, Any]) -> None:
    """Refuse a JOBDIR behind its crawl: another copy of it (a backup, a copy to a roomy disk)
    went on with the crawl since. Each run records its start in its JOBDIR (``remember_job``)
    before the store records it, so the store's latest start (``resumed_at``, else
    ``started_at``) is never later than the latest this JOBDIR recorded, unless a run from
    another copy came after. Going on from this one fetched again every page stored since,
    counted them in the page budget, stored none of them (already fetched) and queued none of
    their links."""
    job = job_record(settings)
    mine = stored_time(job.get("last_run"))
    latest = crawl.get("resumed_at") or crawl.get("started_at")
    if job.get("crawl_id") != crawl["crawl_id"] or mine is None:
        return  # not this JOBDIR's crawl, or a JOBDIR from before its runs were recorded
    stored = stored_time(latest)
    if stored is not None and stored > mine:
        raise ConfigError(
            f"JOBDIR {quoted(settings.get('JOBDIR'))} is behind crawl {crawl['crawl_id']}: a run"
            f" of the crawl started at {latest}, after this JOBDIR's last, went on from another"
            " copy of it (going on from this one would fetch again the pages stored since);"
            " resume the crawl from that copy, or use a new JOBDIR"
        )


def _not_in_store(crawl_id: str, where: str) -> ConfigError:
    return ConfigError(
        f"JOBDIR holds crawl {crawl_id}, which the {where} does not hold: resume it with the"
        " store its pages went to (FOCUSED_DB, or MONGO_URI), or use a new JOBDIR"
    )


def _job_has_run(settings: Any, crawl_id: str) -> bool:
    """Whether JOBDIR holds crawl ``crawl_id`` and it ran: its counters counted a queued seed
    or a response, which come once its store has recorded it."""
    jobdir = settings.get("JOBDIR")
    return bool(jobdir) and jobdir_holds(settings, crawl_id) and _counted(Path(jobdir))


def starts_unlocked(settings: Any, crawl_id: str) -> bool:
    """Whether this run starts crawl ``crawl_id`` where no lock keeps it to one process: into
    MongoDB (``lock_crawl`` locks an SQLite store's crawls), not shared (the processes of a
    shared frontier run one crawl by design), and not going on from a JOBDIR that holds it (the
    kernel's lock on it, ``lock_jobdir``). Two such runs started together (a Scrapyd job
    scheduled twice) both found no page stored, and both crawled: every page fetched, numbered
    and counted twice. The later is refused while the other's record is live
    (``focused.report.is_live``): a run killed before it stored a page is one for 3 heartbeats.
    Read before the crawl writes its JOBDIR's record (``remember_job``)."""
    return (
        bool(settings.get("MONGO_URI"))
        and not settings.get("FOCUSED_FRONTIER")
        and not jobdir_holds(settings, crawl_id)
    )


def _frontier_goes_on(store: Any, url: str, crawl_id: str) -> bool:
    """Whether the Redis frontier at ``url`` holds crawl ``crawl_id``, whose pages ``store``
    holds; ConfigError if it holds it behind the store. Redis restarted from an older snapshot
    (RDB, a replica that lagged) holds the crawl as it was: going on would fetch the pages
    stored since again, numbered again over fetch orders stored, past the page budget. Every
    fetch order stored was given by Redis; a process that lost Redis stores none of the pages it
    still has under way (``pipelines.storage``). Earlier versions stored them, numbered on from
    its last count, their requests in flight in Redis: a store they wrote may hold no more
    pages than those numbered past Redis's count."""
    from focused.distributed import frontier_state  # imports redis: only when asked for

    state = frontier_state(url, crawl_id)
    if state is None:
        return False
    latest = store.pages(
        crawl_id, order="latest", limit=state.in_flight + 1, fields=("fetch_order",)
    )
    past = [page["fetch_order"] for page in latest if (page["fetch_order"] or 0) > state.pages]
    if len(past) > state.in_flight:
        raise ConfigError(
            f"crawl {crawl_id} on {redact_uri(url)} is behind its store: Redis numbered"
            f" {counted(state.pages, 'page')} fetched, the store holds pages numbered up to"
            f" {past[0]}, more of them past {state.pages} than the"
            f" {counted(state.in_flight, 'request')} its processes left under way (Redis"
            " restarted from an older snapshot?): going on would fetch them again, past the page"
            " budget; give another crawl_id"
        )
    return True


def remember_job(settings: Any, config: CrawlConfig, started_at: str | None = None) -> None:
    """Write what a resume must reuse into JOBDIR, with ``last_run``: the latest start of a run
    from it (``_check_jobdir_not_behind``), this one's (``started_at``), or an earlier one's
    should the clock have been set back since."""
    path = _job_file(settings, "focused.json")
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "crawl_id": config.crawl_id,
        "strategy": config.strategy,
        "order": config.order,
    }
    runs = [started_at] if stored_time(started_at) is not None else []
    previous = job_record(settings)
    if previous.get("crawl_id") == config.crawl_id and stored_time(previous.get("last_run")):
        runs.append(previous["last_run"])
    if runs:
        record["last_run"] = max(runs, key=stored_time)
    path.write_text(json.dumps(record), encoding="utf-8")
