"""The SQLite store (``focused.storage.Store``): a file, no server needed. What a crawl stores
when ``MONGO_URI`` is not set, in ``FOCUSED_DB`` (``open_store``)."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import stat
import time
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from focused.errors import cut, load_json
from focused.storage import (
    CRAWL_FIELDS,
    CRAWL_SCHEMA,
    CRAWL_SORT,
    DEFAULT_SQLITE_TIMEOUT,
    LEAST_KNOWN,
    PAGE_FIELDS,
    PAGE_SCHEMA,
    RESCORED,
    PageCounts,
    PageQuery,
    SortSpec,
    Store,
    StoreError,
    StoreSettingError,
    rescoring,
    verdicts_moved,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

logger = logging.getLogger(__name__)

# A new file's switch to WAL lost to another process's: tried again this often, this far apart
# (5 s in all, sqlite3's own busy timeout).
WAL_SWITCH_TRIES = 100
WAL_SWITCH_PAUSE = 0.05  # seconds


_SQL_TYPES: dict[type, str] = {
    str: "TEXT",
    int: "INTEGER",
    float: "REAL",
    bool: "INTEGER",
    dict: "TEXT",  # JSON
    list: "TEXT",  # JSON
}
_JSON_TYPES = (dict, list)


def _table_sql(table: str, schema: Mapping[str, type], key: tuple[str, ...]) -> str:
    columns = [
        f"{name} {_SQL_TYPES[kind]}{' NOT NULL' if name in key else ''}"
        for name, kind in schema.items()
    ]
    return f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(columns)}, UNIQUE ({', '.join(key)}))"


def _upsert_sql(table: str, fields: tuple[str, ...], key: tuple[str, ...]) -> str:
    updates = ", ".join(f"{name} = excluded.{name}" for name in fields if name not in key)
    return (
        f"INSERT INTO {table} ({', '.join(fields)}) VALUES ({', '.join('?' * len(fields))})"
        f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
    )


def _order_sql(sort: SortSpec, *, apart: bool = False) -> str:
    """``apart``: sorted apart from any index's order (``+``), which SQLite would read instead
    of the index its WHERE is told by."""
    plus = "+" if apart else ""
    return ", ".join(
        f"{plus}{name} {'DESC' if direction < 0 else 'ASC'}" for name, direction in sort
    )


_PAGE_KEY = ("crawl_id", "url")
_CRAWL_KEY = ("crawl_id",)
# SQLite keeps a row's columns in the order of its table, and a page's text, longer than a
# database page, goes on overflow pages: a column after it is read by walking them all. A new
# store's pages table has it last: the other fields are read before it (from the row's first
# part, or the first overflow page where they are long), and a report or a resume reads none
# of the texts (in an earlier store, text 4th, they read 3.5 GB for 200,000 pages: it keeps
# its order, read by name as well, since a table cannot be reordered but by copying it whole
# under the write lock). A field added to PAGE_SCHEMA later is added after the text in an
# existing store (_add_missing_columns), before it in a new one.
_PAGE_COLUMNS = {name: kind for name, kind in PAGE_SCHEMA.items() if name != "text"} | {
    "text": PAGE_SCHEMA["text"]
}
_SQLITE_SCHEMA = ";\n".join(
    [
        _table_sql("crawls", CRAWL_SCHEMA, _CRAWL_KEY),
        _table_sql("pages", _PAGE_COLUMNS, _PAGE_KEY),
        "CREATE INDEX IF NOT EXISTS pages_crawl_relevance ON pages (crawl_id, relevance)",
        "CREATE INDEX IF NOT EXISTS pages_crawl_level ON pages (crawl_id, level)",
    ]
)
# Covers the reads of a whole crawl in fetch order, which then read no row: the counts
# (_COUNT_PAGES), a report's (focused.report.REPORT_FIELDS) and a resume's
# (focused.resume.RECOVER_FIELDS). A crawl's rows lie between the overflow pages of their
# texts, and the OS reads ahead of each: read from the rows, a report read the whole file from
# disk, text last or not. Made by a writer's open (_make_fetch_order_index): a store written
# before it gains it then; one that has it on (crawl_id, fetch_order, is_relevant) only, as it
# was made before it covered a report, keeps that (made anew, it would hold the write lock as
# long as the first): its reports and resumes read the rows.
_FETCH_ORDER_INDEX = (
    "CREATE INDEX IF NOT EXISTS pages_crawl_fetch_order ON pages (crawl_id, fetch_order, url,"
    " is_relevant, level, relevance, status, robots, duplicate_of)"
)
# The share of FOCUSED_DB_TIMEOUT a writer's open may hold the write lock for to make the
# fetch-order index of a store written before it, reading every page (past its text, in such a
# store): another process of the crawl writing to it meanwhile waits FOCUSED_DB_TIMEOUT for the
# lock, then fails. Longer, it is left unmade (``_make_fetch_order_index``).
INDEX_BUILD_SHARE = 0.5
# The SQLite virtual machine's steps between two looks at the time left for it.
INDEX_BUILD_STEPS = 10_000
# A page holding only values a crawl writes (SQLite keeps booleans as 0 and 1) is counted here;
# one holding another makes _count_pages leave the count to Store.page_counts.
_WRITTEN = (
    "(fetch_order IS NULL OR typeof(fetch_order) = 'integer' AND fetch_order >= 0)"
    " AND (is_relevant IS NULL OR typeof(is_relevant) = 'integer' AND is_relevant IN (0, 1))"
)
_COUNT_PAGES = (
    "SELECT count(*), coalesce(sum(is_relevant), 0), coalesce(max(fetch_order), 0),"
    f" coalesce(sum(NOT ({_WRITTEN})), 0) FROM pages WHERE crawl_id = ?"
)
_INSERT_CRAWL = (
    f"INSERT INTO crawls ({', '.join(CRAWL_FIELDS)}) VALUES ({', '.join('?' * len(CRAWL_FIELDS))})"
    " ON CONFLICT (crawl_id) DO NOTHING"
)
_UPSERT_PAGE = _upsert_sql("pages", PAGE_FIELDS, _PAGE_KEY)
_STORED_VERDICT = "SELECT is_relevant FROM pages WHERE crawl_id = ? AND url = ?"
# NULL + n is NULL: a record written before the counts keeps none.
_ADD_MOVED = (
    f"UPDATE crawls SET {', '.join(f'{name} = {name} + ?' for name in RESCORED)} WHERE crawl_id = ?"
)


class SqliteStore(Store):
    """A SQLite file: no server needed. One connection, used only from the thread that opened
    it (sqlite3 enforces this), in WAL mode so that readers (reports) do not block the crawl."""

    backend = "SQLite"
    errors = (sqlite3.Error, OSError)
    threadsafe = False

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        read_only: bool = False,
        timeout: float = DEFAULT_SQLITE_TIMEOUT,
        make_index: bool = True,
    ) -> None:
        self.location = cut(os.fspath(path))  # for messages
        file = Path(path)
        try:
            # One look, not one per question: a process of the same crawl creating the file
            # between two looks made it exist and not be a file.
            mode: int | None = file.stat().st_mode
        except FileNotFoundError:
            mode = None
        except NotADirectoryError:  # readers said "no such file" of it, a crawl "not a folder"
            raise self._not_a_folder(file.parent) from None
        except OSError as exc:  # a name longer than the file system takes
            raise StoreSettingError(
                f"{self.backend} store at {self.location}: {exc.strerror}"
            ) from None
        if mode is not None and stat.S_ISDIR(mode):
            raise StoreSettingError(
                f"{self.backend} store at {self.location}: it is a folder, not a file"
            )
        if mode is not None and not stat.S_ISREG(mode):
            # A device or a pipe (/dev/null, to store nothing): SQLite would write its journal
            # beside it (/dev/null-journal), then fail on "disk I/O error".
            raise StoreSettingError(
                f"{self.backend} store at {self.location}: it is not a regular file"
            )
        is_file = mode is not None
        if (read_only or not create) and not is_file:
            # A reader (a report) must not leave an empty database behind a mistyped path.
            raise StoreError(f"{self.backend} store at {self.location}: no such file")
        with self._failing("open the database"):
            if read_only:
                self._conn = self._connect_read_only(file, timeout)
                self._check_is_store()
            else:
                self._make_folder(file.parent)
                self._check_writable(file)
                self._conn = sqlite3.connect(file, timeout=timeout)
                if create:
                    self._check_not_foreign()
                else:
                    self._check_is_store()
                self._use_wal()
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.executescript(_SQLITE_SCHEMA)
                self._add_missing_columns("pages", PAGE_SCHEMA)
                self._add_missing_columns("crawls", CRAWL_SCHEMA)
                if make_index:
                    self._make_fetch_order_index(timeout)
            # A reader leaves a file of an older version as it is: the fields it lacks are read
            # as NULL.
            self._columns = {table: self._present_columns(table) for table in ("crawls", "pages")}

    def _make_folder(self, folder: Path) -> None:
        """The store's folder, and those above it, made where missing. A file in the place of
        one of them makes FOCUSED_DB a setting that names no store, and mkdir's own word for it
        was "File exists"."""
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise self._not_a_folder(folder) from None

    def _not_a_folder(self, folder: Path) -> StoreSettingError:
        """The store's folder, or one above it, is a file."""
        above = [*reversed(folder.parents), folder]  # from the root down
        taken = next((path for path in above if path.exists() and not path.is_dir()), folder)
        return StoreSettingError(
            f"{self.backend} store at {self.location}: {cut(str(taken))} is not a folder"
        )

    def _use_wal(self) -> None:
        """WAL mode, which lets a crawl's readers in while it writes. Processes opening a new
        file at once (a shared crawl's start) race to switch it, and SQLite answers the losers
        "database is locked" at once, without waiting out the busy timeout: they try again."""
        for _ in range(WAL_SWITCH_TRIES - 1):
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc):
                    raise
                time.sleep(WAL_SWITCH_PAUSE)
        self._conn.execute("PRAGMA journal_mode=WAL")

    def _check_writable(self, path: Path) -> None:
        """Checked before opening: SQLite opens a read-only file for reading without a word,
        and in WAL mode even writes go on, into the -wal file, until a checkpoint fails."""
        folder = path.parent
        if path.exists() and not os.access(path, os.W_OK):
            what = "the file"
        elif not os.access(folder, os.W_OK | os.X_OK):  # where the -wal and -shm files go
            what = f"its folder {folder}"
        else:
            return
        raise StoreSettingError(
            f"{self.backend} store at {self.location} is read-only: {what} cannot be written"
        )

    def _connect_read_only(self, path: Path, timeout: float) -> sqlite3.Connection:
        """A connection that writes nothing. A store in WAL mode needs its -shm file, and where
        there is none SQLite makes it, with an empty -wal file, as the reader's own: it cannot
        in a folder it may not write (read-only media, a crawl copied from another user), and
        must not for a store it may not write (another user's in a shared folder), whose owner
        could then write it no more ("attempt to write a readonly database"). There the file
        is opened as immutable, which nothing can change. A lock it meets (a writer's EXCLUSIVE
        lock, a checkpoint) is waited for ``timeout`` seconds (FOCUSED_DB_TIMEOUT), as writes
        wait."""
        uri = f"{path.absolute().as_uri()}?mode=ro"
        shm = path.with_name(f"{path.name}-shm")
        if os.access(path, os.W_OK) or shm.exists():  # a -shm file there: a writer's, used
            conn = sqlite3.connect(uri, uri=True, timeout=timeout)
            try:
                conn.execute("SELECT 1 FROM sqlite_master LIMIT 1")  # opens the file
                return conn
            except sqlite3.OperationalError:
                conn.close()
                if os.access(path.parent, os.W_OK | os.X_OK):
                    raise
        wal = path.with_name(f"{path.name}-wal")
        if wal.exists() and wal.stat().st_size:  # immutable would ignore the pages it holds
            raise StoreError(
                f"{self.backend} store at {self.location}: its write-ahead log {wal} cannot be"
                f" read without making {shm.name} beside it; copy the store with it to a folder"
                " of your own"
            )
        return sqlite3.connect(f"{uri}&immutable=1", uri=True, timeout=timeout)

    def _check_is_store(self) -> None:
        """A reader finds the crawler's tables before it writes anything: another program's
        database (or an empty file) given as FOCUSED_DB is left as it was, not given them."""
        if not {"crawls", "pages"} <= self._tables():
            self._conn.close()
            raise StoreError(
                f"{self.backend} store at {self.location}: not a store of this crawler (no"
                " crawls and pages tables)"
            )

    def _check_not_foreign(self) -> None:
        """A crawl writes to a new file, an empty database or a store of this crawler (its tables
        ``crawls`` and ``pages``, keyed by ``crawl_id``); another program's database given as
        FOCUSED_DB by mistake is refused before anything is written (it was switched to WAL and
        given the crawler's tables, or, where its own tables had these names, switched and then
        refused)."""
        tables = self._tables()
        # An older version's store may lack a table, and another process opening a new file
        # at once may have made one table of the two yet: only tables of other names, or ours
        # without their crawl_id, are another program's.
        if tables <= {"crawls", "pages"} and all(
            "crawl_id" in self._present_columns(table) for table in tables
        ):
            return
        self._conn.close()
        raise StoreError(
            f"{self.backend} store at {self.location}: another program's database (tables:"
            f" {', '.join(sorted(tables)[:5])}), not a store of this crawler: nothing was written"
        )

    def _tables(self) -> set[str]:
        """The database's tables, but SQLite's own (sqlite_sequence...)."""
        return {
            row[0]
            for row in self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }

    def _add_missing_columns(self, table: str, schema: Mapping[str, type]) -> None:
        """A file made by an older version lacks the newer fields: add them (as NULL)."""
        present = self._present_columns(table)
        with self._conn:
            for name, kind in schema.items():
                if name not in present:
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {_SQL_TYPES[kind]}")

    def _make_fetch_order_index(self, timeout: float) -> None:
        """The fetch-order index (``_FETCH_ORDER_INDEX``), made if it is missing and can be
        within ``INDEX_BUILD_SHARE`` of ``timeout`` (FOCUSED_DB_TIMEOUT), under the write lock
        taken at once where the store holds pages: longer, for a large store written before
        it, it is left for a later open, with a warning, and the pages are counted without it
        (``crawls`` reads every page of a running crawl). An open queueing for the lock to make
        it waited behind the builds of the processes ahead of it, each up to its share, and an
        open arriving later could be let in first: a shared crawl's process failed to open with
        "database is locked". With the lock taken, it waits as long as a build may take for
        the process holding it, then looks again, making none itself: the processes of a crawl
        opening an old store together each warned that it was not made, as the first made it."""
        if self._has_fetch_order_index():
            return
        within = timeout * INDEX_BUILD_SHARE
        if not self._conn.execute("SELECT EXISTS (SELECT 1 FROM pages)").fetchone()[0]:
            # A new store, which the processes of a crawl open together: made at once, it
            # waits for the lock as a write does, behind their opens.
            self._conn.execute("BEGIN IMMEDIATE")
        elif not self._write_lock_within(0):
            self._wait_for_another_build(within)
            return
        deadline = time.monotonic() + within
        over = False

        def over_time() -> bool:
            nonlocal over
            over = time.monotonic() > deadline
            return over

        self._conn.set_progress_handler(over_time, INDEX_BUILD_STEPS)
        try:
            self._conn.execute(_FETCH_ORDER_INDEX)
            self._conn.commit()
        except sqlite3.OperationalError as exc:
            if "interrupted" not in str(exc):
                raise
            if not over:
                # Interrupted by an exception in the handler, which sqlite3 drops: a Ctrl-C's
                # KeyboardInterrupt, raised there as the handler is most of the Python run
                # meanwhile. It was lost, the command going on as if the index took too long.
                raise KeyboardInterrupt from None
            self._index_not_made(
                f"it took over {within:g} s ({100 * INDEX_BUILD_SHARE:.0f}% of"
                " FOCUSED_DB_TIMEOUT), holding the write lock that other processes of a crawl"
                " wait for",
                "a run of its own with a larger FOCUSED_DB_TIMEOUT makes it",
            )
        finally:
            self._conn.set_progress_handler(None, 0)
            self._conn.rollback()  # what is left of a build that failed

    def _has_fetch_order_index(self) -> bool:
        indexes = {row[1] for row in self._conn.execute("PRAGMA index_list(pages)")}
        return "pages_crawl_fetch_order" in indexes

    def _wait_for_another_build(self, within: float) -> None:
        """Another process holds the write lock the index is made under: waits up to
        ``within`` (a build's share) for it, to say only what is so. Taken, the lock is let go
        at once, the index made or not: building after a wait, the processes of a crawl
        queued behind each other's builds."""
        if not self._write_lock_within(within):
            self._index_not_made(
                f"another process held the write lock it is made under for over {within:g} s"
                " (writing, or making it for longer than this open's"
                f" {100 * INDEX_BUILD_SHARE:.0f}% of FOCUSED_DB_TIMEOUT)",
                "whichever open finds the lock free makes it",
            )
            return
        try:
            if self._has_fetch_order_index():
                return  # made by the process that held the lock
        finally:
            self._conn.rollback()
        self._index_not_made(
            "another process held the write lock it is made under, writing or giving up making"
            " it (an open that waited for the lock makes none: the processes of a crawl would"
            " queue behind each other's builds)",
            "the next open that finds the lock free makes it",
        )

    def _write_lock_within(self, seconds: float) -> bool:
        """Whether the write lock, waited for up to ``seconds``, is this connection's (a
        transaction begun: commit or roll it back)."""
        (waits,) = self._conn.execute("PRAGMA busy_timeout").fetchone()
        self._conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            return False
        finally:
            self._conn.execute(f"PRAGMA busy_timeout = {int(waits)}")
        return True

    def _index_not_made(self, why: str, remedy: str) -> None:
        logger.warning(
            "%s store at %s: its index of the pages' fetch order, which `scrapy crawls`,"
            " `scrapy report` and a resume read, was not made by this open: %s; %s",
            self.backend,
            self.location,
            why,
            remedy,
        )

    def _present_columns(self, table: str) -> set[str]:
        return {row[1] for row in self._conn.execute(f"PRAGMA table_info({table})")}

    def close(self) -> None:
        self._conn.close()

    @staticmethod
    def _encode(schema: Mapping[str, type], record: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(
            json.dumps(record[name])
            if kind in _JSON_TYPES and record[name] is not None
            else record[name]
            for name, kind in schema.items()
        )

    @staticmethod
    def _decode(schema: Mapping[str, type], row: tuple[Any, ...]) -> dict[str, Any]:
        record = {}
        for (name, kind), value in zip(schema.items(), row, strict=True):
            if isinstance(value, str) and kind in _JSON_TYPES:
                # Text that is no JSON stays text, which Store reads as unknown.
                with suppress(ValueError):
                    value = load_json(value)
            record[name] = value
        return record

    def _select(
        self,
        table: str,
        schema: Mapping[str, type],
        where: list[tuple[str, Any]],
        sort: SortSpec,
        limit: int | None,
        *,
        apart: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """Rows matching every ``(condition with one ?, parameter)`` of ``where``, read as
        they are taken; sorted ``apart`` (``_order_sql``)."""
        columns = [name if name in self._columns[table] else f"NULL AS {name}" for name in schema]
        sql = f"SELECT {', '.join(columns)} FROM {table}"
        params = [param for _, param in where]
        if where:
            sql += " WHERE " + " AND ".join(condition for condition, _ in where)
        sql += f" ORDER BY {_order_sql(sort, apart=apart)}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        for row in self._conn.execute(sql, params):
            yield self._decode(schema, row)

    def _insert_crawl(self, crawl: dict[str, Any]) -> bool:
        with self._conn:
            cursor = self._conn.execute(_INSERT_CRAWL, self._encode(CRAWL_SCHEMA, crawl))
        return cursor.rowcount > 0

    def _upsert_pages(self, pages: list[dict[str, Any]]) -> None:
        with self._conn:
            self._conn.executemany(
                _UPSERT_PAGE, [self._encode(PAGE_SCHEMA, page) for page in pages]
            )

    def _update_pages(self, updates: list[dict[str, Any]]) -> None:
        rescored = rescoring(updates)
        with self._conn:
            if rescored:
                # The verdicts read under the write lock, and counted in the transaction that
                # moves them: the count stays true to the pages, a write that fails or a
                # process killed leaving neither.
                self._conn.execute("BEGIN IMMEDIATE")
            stored: dict[tuple[str, str], Any] = {}
            for key in rescored:
                row = self._conn.execute(_STORED_VERDICT, key).fetchone()
                if row is not None:
                    stored[key] = row[0]
            for update in updates:
                fields = [name for name in update if name not in _PAGE_KEY]
                assignments = ", ".join(f"{name} = ?" for name in fields)  # checked names
                self._conn.execute(
                    f"UPDATE pages SET {assignments} WHERE crawl_id = ? AND url = ?",
                    [*(update[name] for name in fields), update["crawl_id"], update["url"]],
                )
            for crawl_id, moved in verdicts_moved(updates, stored).items():
                self._conn.execute(_ADD_MOVED, [*moved, crawl_id])

    def _update_crawl(
        self, crawl_id: str, fields: dict[str, Any], where: dict[str, Any] | None = None
    ) -> bool:
        # Names checked by the caller. IS compares NULL as a value.
        assignments = ", ".join(f"{name} = ?" for name in fields)
        conditions = "".join(f" AND {name} IS ?" for name in where or {})
        values = self._encode({name: CRAWL_SCHEMA[name] for name in fields}, fields)
        with self._conn:
            cursor = self._conn.execute(
                f"UPDATE crawls SET {assignments} WHERE crawl_id = ?{conditions}",
                [*values, crawl_id, *(where or {}).values()],
            )
        return cursor.rowcount > 0

    def _find_crawls(self, crawl_id: str | None, *, limit: int | None) -> list[dict[str, Any]]:
        where = [] if crawl_id is None else [("crawl_id = ?", crawl_id)]
        return list(self._select("crawls", CRAWL_SCHEMA, where, CRAWL_SORT, limit))

    def _find_pages(self, query: PageQuery) -> Iterator[dict[str, Any]]:
        where: list[tuple[str, Any]] = [("crawl_id = ?", query.crawl_id)]
        for name, known in query.known.items():
            # SQLite compares text above any number: a relevance edited into text passed
            # `relevance >= ?` (MongoDB compares numbers with numbers only). NaN is NULL here.
            # 9e999 reads as infinity (a literal: a condition of `where` takes one parameter).
            number = f"typeof({name}) IN ('integer', 'real') AND abs({name}) < 9e999"
            condition = f"({number} AND {name} >= ?)"
            where.append((condition if known else f"NOT {condition}", LEAST_KNOWN[name]))
        if query.min_relevance is not None:
            where.append(("relevance >= ?", query.min_relevance))
        if query.level is not None:
            where.append(("level = ?", query.level))
        if query.relevant_only:
            where.append(("is_relevant = ?", True))
        schema = {name: PAGE_SCHEMA[name] for name in query.fields}
        # The pages of an unknown fetch order (Store._unknown_last), few if any, are sorted by
        # URL: SQLite read them in the order of the key's index (crawl_id, url), every row of
        # the crawl, past its text in a store that has it before fetch_order, to find them.
        # Sorted apart, they are found from the fetch-order index.
        apart = query.known.get("fetch_order") is False
        return self._select("pages", schema, where, query.sort, query.limit, apart=apart)

    def _count_pages(self, crawl_id: str) -> PageCounts | None:
        stored, relevant, last, unwritten = self._conn.execute(_COUNT_PAGES, (crawl_id,)).fetchone()
        return None if unwritten else PageCounts(stored, relevant, last)
