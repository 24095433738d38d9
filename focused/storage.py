"""Where page and crawl records are kept: MongoDB when ``MONGO_URI`` is set, else SQLite.

Settings read by ``open_store``:
    MONGO_URI         MongoDB connection string; unset or empty = use SQLite (default: unset)
    MONGO_DATABASE    MongoDB database name (default ``focused``; empty, or a name MongoDB
                      would refuse, is refused)
    MONGO_TIMEOUT_MS  server selection timeout in ms, so that a dead server fails fast
                      (default 5000)
    FOCUSED_DB        SQLite file, relative to the working directory (default ``focused.sqlite3``;
                      empty is refused)
    FOCUSED_DB_TIMEOUT  seconds a SQLite read or write waits for another process's lock
                        (default 5.0)

Both backends take and return plain dicts with the same keys (``PAGE_FIELDS``,
``CRAWL_FIELDS``, in that order) and the same value types, so that commands and reports never
care which one is in use; a stored value of another type (a cell edited by hand, a document
another program wrote) is read as unknown, None. The shared part (validation, type coercion,
filters, sort orders, error translation) lives in ``Store``; a backend (``focused.sqlitestore``,
``focused.mongostore``) only says how to read and write.

Every failure of the backend itself (unreachable server, unwritable file, ...) is raised as
``StoreError`` with a one-line message, and so is a value the backend cannot hold
(``RecordRefused``); mistakes of the caller stay ``ValueError``/``TypeError``.
"""

from __future__ import annotations

import logging
import math
import os
import re
import secrets
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from focused.errors import counted, cut, one_line, quoted

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

    from scrapy.settings import Settings

logger = logging.getLogger(__name__)

# Field -> Python type. Values are coerced to these types on the way in, so that both
# backends give back the same types (SQLite would turn an int relevance into a REAL 1.0 while
# MongoDB keeps it an int, and neither knows numpy floats).
PAGE_SCHEMA: dict[str, type] = {
    "crawl_id": str,
    "url": str,
    "title": str,
    "text": str,
    "level": int,
    "parent_url": str,
    "anchor": str,
    "link_relevance": float,
    "tfidf": float,
    "lsi": float,
    "relevance": float,
    "is_relevant": bool,
    "strategy": str,
    "fetch_order": int,
    "fetched_at": str,  # ISO 8601 UTC
    "status": int,  # HTTP status of the latest fetch: one of GONE when the page is no longer there
    # Hardening (issue 8): a duplicate page (same rel=canonical, or near-duplicate content)
    # keeps the URL of the page it duplicates here and no text.
    "duplicate_of": str,
    "language": str,  # ISO 639-1 code of the page's language, None when unknown
    # Refresh (issue 8, focused.refresh): the hash of the page's normalised title and text, when
    # it last changed (ISO 8601 UTC), how many changes the revisits saw, and how many fetches.
    "content_hash": str,
    "last_changed": str,
    "changes": int,
    "visits": int,
    # The page's own robots directives honoured (focused.robotsmeta): "noindex" (stored without
    # its text), "nofollow" (its links not followed) or "noindex,nofollow"; None: neither.
    "robots": str,
    # When a recrawl last requested the page and got nothing to record (a failure, a response
    # that is no page); None until then.
    "tried_at": str,
    # The validators of the response whose content is stored, its ETag and Last-Modified header
    # values as sent, when it answered the page's own URL (focused.refresh: a recrawl sends them
    # back as If-None-Match and If-Modified-Since); None when it sent none or answered another
    # URL, and in records written before them. Last, where SQLite adds them to a file written
    # before them.
    "etag": str,
    "last_modified": str,
    # The URL the crawl requested the page at, where it is stored under another: the start of
    # a redirect (the URL a link or seed named), or the URL fetched for a page stored under its
    # rel=canonical. None when the page is stored under the URL requested, and in records
    # written before it. A recrawl leaves it as the crawl found it.
    "requested_url": str,
}
CRAWL_SCHEMA: dict[str, type] = {
    "crawl_id": str,
    "query": str,
    "strategy": str,
    "params": dict,
    "seeds": list,
    "started_at": str,  # ISO 8601 UTC
    "finished_at": str,
    "status": str,  # one of CRAWL_STATUSES
    "finish_reason": str,
    "pages": int,
    "relevant": int,
    "harvest_rate": float,
    # When the latest run of a crawl started, if it is not the first (a JOBDIR resume, the
    # crawl's id run again, another process of a shared crawl); started_at stays the first
    # run's. Last, where SQLite adds it to a file written before it.
    "resumed_at": str,
    # When a process of the crawl last said it is alive: set at each start, refreshed every
    # FOCUSED_HEARTBEAT_INTERVAL seconds (pipelines.storage), so that a crawl killed outright
    # (kill -9, a power cut) can be told from a live one; None in records written before it.
    "seen_at": str,
    # The FOCUSED_HEARTBEAT_INTERVAL of the crawl's latest run, by which seen_at is judged.
    "heartbeat_interval": float,
    # The domains the crawl's latest run stayed within (-a allowed_domains, as requests name
    # them: punycode), which its recrawl stays within too (focused.refresh); [] for a crawl
    # that could go anywhere, None in records written before it.
    "allowed_domains": list,
    # A recrawl's heartbeat (focused.refresh): set as a recrawl of the crawl starts
    # (``claim_recrawl``), refreshed every recrawl_heartbeat_interval seconds (its
    # FOCUSED_HEARTBEAT_INTERVAL) while it runs, both None once it ended. The crawl's own
    # seen_at and status stay as the crawl left them. Last, where SQLite adds them to a file
    # written before them.
    "recrawl_seen_at": str,
    "recrawl_heartbeat_interval": float,
    # How the crawl's latest run fetched its pages, which its recrawl does too: its -a render
    # mode, and the settings of focused.fetchsettings.FETCH_SETTINGS it was given with -s, by
    # name ({} for none); None in records written before them. Last, where SQLite adds them.
    "render": str,
    "fetch_settings": dict,
    # The identity of the recrawl that holds recrawl_seen_at (a random token and the process
    # that holds it, ``new_claim``, written by ``claim_recrawl``): its heartbeat and its end
    # touch the mark only while it is still its own, not one another recrawl took over once it
    # went stale or its process was gone (``claim_gone``). None with the mark, and in records
    # written before it. Last, where SQLite adds it.
    "recrawl_claim": str,
    # The -a topic_file the crawl's topic was read from, as given (None: none, and in records
    # written before it); a crawl of a topic file alone has no query. Last, where SQLite adds it.
    "topic_file": str,
    # The process of the crawl's latest run (``this_process``: its kernel, pid and start time),
    # so that a run or a recrawl on the same machine knows a run killed outright gone at once
    # (``process_gone``), its heartbeat fresh still. None for a shared crawl (its processes
    # beat in turn: one gone tells nothing of the others), where /proc cannot tell, and in
    # records written before it. Last, where SQLite adds it.
    "run_by": str,
    # The verdicts (is_relevant) of stored pages that recrawls moved (``--model``, or their
    # updates restored), counted by ``Store.update_pages`` as it writes them against the
    # verdict stored: how many moves made a page relevant, and how many made one irrelevant (a
    # page moved and moved back counts in both: the difference is the change in relevant
    # pages). The crawl's own ``relevant`` stays the crawl's measure; these tell its stored
    # pages' count now from it (``focused.report``, ``focused.resume.recover_state``). 0 in a
    # new crawl's record, kept by the crawl's later runs; None in records written before them,
    # which a recrawl leaves None (the recrawls before it went uncounted). Last, where SQLite
    # adds them.
    "rescored_now_relevant": int,
    "rescored_no_longer_relevant": int,
}
PAGE_FIELDS: tuple[str, ...] = tuple(PAGE_SCHEMA)
# The statuses of a page no longer there: a recrawl keeps the record of a page it finds so, with
# the status (focused.refresh), and the reading commands mark it gone.
GONE: tuple[int, ...] = (404, 410)
CRAWL_FIELDS: tuple[str, ...] = tuple(CRAWL_SCHEMA)
# What finish_crawl may update.
FINISH_FIELDS: tuple[str, ...] = (
    "finished_at",
    "status",
    "finish_reason",
    "pages",
    "relevant",
    "harvest_rate",
)
CRAWL_STATUSES: tuple[str, ...] = ("running", "finished", "interrupted")

PageOrder = Literal["relevance", "fetch_order", "latest"]
SortSpec = tuple[tuple[str, int], ...]  # (field, 1 ascending | -1 descending), pymongo style
# Each order ends on a unique key so that both backends return ties in the same order.
PAGE_SORTS: dict[str, SortSpec] = {
    "relevance": (("relevance", -1), ("fetch_order", 1), ("url", 1)),
    "fetch_order": (("fetch_order", 1), ("url", 1)),
    "latest": (("fetch_order", -1), ("url", 1)),  # the last fetched first
}
# The pages whose sort key is unknown (none, text edited in, infinity, a negative fetch order)
# come after the others, in this order: the backends sort none below every number, and text and
# infinity above, so that they came first in one direction or the other.
UNKNOWN_LAST: dict[str, SortSpec] = {
    "relevance": PAGE_SORTS["fetch_order"],
    "fetch_order": (("url", 1),),
}
# The least known value of each field UNKNOWN_LAST sorts on: a count is never negative.
LEAST_KNOWN: dict[str, float] = {"relevance": -math.inf, "fetch_order": 0}
CRAWL_SORT: SortSpec = (("started_at", -1), ("crawl_id", -1))  # newest first

DEFAULT_MONGO_DATABASE = "focused"
# What MongoDB takes as a database name: none of these characters (pymongo refuses them as the
# database is named, a traceback) and fewer than 64 bytes (the server refuses a longer one only
# as it is written to, once the crawl ran).
MONGO_NAME_FORBIDDEN = ("/", "\\", ".", '"', "$", " ", "\0")
MONGO_NAME_MAX_BYTES = 63
DEFAULT_MONGO_TIMEOUT_MS = 5000
DEFAULT_SQLITE_PATH = "focused.sqlite3"
DEFAULT_SQLITE_TIMEOUT = 5.0  # seconds: sqlite3's own busy timeout
# MongoDB refuses a document over 16 MiB, where SQLite takes any: a page whose text is larger
# (a 10 MiB page in a one-byte encoding, Cyrillic or Thai, is two or three times that in UTF-8)
# stopped a crawl on MongoDB, and was stored whole on SQLite. The page's free text is cut to
# this many UTF-8 bytes in all, in either store, leaving room for the other fields, the field
# names and an update's filter.
PAGE_MAX_BYTES = 15 * 1024 * 1024
# The fields cut, in this order, until the page fits: what it says, then what names it.
CUT_FIELDS: tuple[str, ...] = ("text", "title", "anchor")


class StoreError(Exception):
    """The store cannot be opened, reached or written; the message is one line for the user."""


class RecordRefused(StoreError):
    """The backend cannot hold a value of the records being written (an integer over 64 bits,
    text that is no UTF-8...): their failure, not the store's, and the same write fails again."""


class RecrawlUnderWay(Exception):
    """``Store.start_crawl`` found a recrawl of the crawl under way (``crawl``: the record it
    read, whose ``recrawl_seen_at`` is fresh) and wrote nothing."""

    def __init__(self, crawl: dict[str, Any]) -> None:
        super().__init__(f"crawl {crawl['crawl_id']} is being recrawled")
        self.crawl = crawl


class CrawlRunning(Exception):
    """``Store.start_crawl``, asked to refuse a live crawl, found one (``crawl``: the record it
    read, whose heartbeat is fresh) and wrote nothing."""

    def __init__(self, crawl: dict[str, Any]) -> None:
        super().__init__(f"crawl {crawl['crawl_id']} is running")
        self.crawl = crawl


class StoreSettingError(StoreError):
    """The setting names no store this command can use: a folder, or a store it cannot write
    (read-only media, another user's file) for a command that writes. A bad setting (exit
    status 2), where a store that fails or does not exist is not."""


@dataclass(frozen=True)
class PageQuery:
    """A validated ``Store.pages`` request, handed to the backend."""

    crawl_id: str
    min_relevance: float | None
    level: int | None
    relevant_only: bool
    limit: int | None
    sort: SortSpec
    fields: tuple[str, ...] = PAGE_FIELDS  # the fields each record carries, in PAGE_FIELDS order
    # Field of LEAST_KNOWN -> True: only pages whose value is a finite number of at least its
    # LEAST_KNOWN (``Store.pages`` sets it for relevance with min_relevance); False: only the
    # others (none, another type, NaN, infinite, below it). A field not named: any.
    known: Mapping[str, bool] = field(default_factory=dict)


# The page fields ``PageCounts`` adds up.
COUNT_FIELDS: tuple[str, ...] = ("is_relevant", "fetch_order")


@dataclass
class PageCounts:
    """What a crawl's stored pages add up to, each page's ``COUNT_FIELDS`` read as
    ``Store.pages`` reads them: what ``focused.report.totals`` counts a crawl from while its
    record has no totals yet."""

    stored: int = 0
    relevant: int = 0
    last_fetch_order: int = 0  # the highest fetch order stored; 0: none known

    def add(self, page: Mapping[str, Any]) -> None:
        """Count a page record with (at least) ``COUNT_FIELDS``."""
        self.stored += 1
        self.relevant += bool(page["is_relevant"])
        self.last_fetch_order = max(self.last_fetch_order, page["fetch_order"] or 0)


def _utc_now() -> str:
    return datetime.now(UTC).isoformat()


# The crawl record's fields of a recrawl's mark: a run of the crawl that starts keeps them.
RECRAWL_MARK: tuple[str, ...] = ("recrawl_seen_at", "recrawl_heartbeat_interval", "recrawl_claim")
# The crawl record's counts of the verdicts recrawls moved (``verdicts_moved``), in this order:
# a run of the crawl that starts leaves them as they are, and a new crawl's are 0.
RESCORED: tuple[str, ...] = ("rescored_now_relevant", "rescored_no_longer_relevant")


def rescored(crawl: Mapping[str, Any]) -> int | None:
    """The relevant pages the recrawls of the crawl added by moving stored verdicts, as its
    record counts them (``RESCORED``: those now relevant less those no longer;
    negative for fewer); None where it cannot tell (a record written before the counts, or
    one read as unknown)."""
    now, no_longer = (crawl.get(name) for name in RESCORED)
    if not isinstance(now, int) or not isinstance(no_longer, int):
        return None
    return now - no_longer


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, Linux's /proc), None if there is
    no such process, or one that has ended (a zombie: killed, its parent gone, where the
    machine's init reaps none, as a container's first process may not), or no /proc to tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # After the command's name in parentheses (which may hold any character): field 3 is its
    # state, field 22 its start.
    fields = stat.rpartition(")")[2].split()
    if len(fields) <= 19 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def this_process() -> str | None:
    """This process, as a record names it for another process of the same machine to tell
    whether it is still alive (``process_gone``): the boot of this machine's kernel and its PID
    namespace, in which a pid names one process (another machine, another boot or another
    container's namespace, whose host name may be this one's, cannot look it up), its pid and
    its start time (a pid is reused). None where /proc cannot tell."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    pid = os.getpid()
    start = _process_start(pid)
    return None if start is None else f"{boot}:{namespace}/{pid}/{start}"


def process_gone(process: str | None) -> bool:
    """Whether ``process`` (``this_process`` of another) is known to be gone: it ran on this
    machine's kernel and in this PID namespace, and its pid names no process now, or one
    started at another time. One of another machine, or unknown, cannot tell: False."""
    parts = process.split("/") if isinstance(process, str) else []
    here = this_process()
    if len(parts) != 3 or here is None or parts[0] != here.split("/")[0]:
        return False
    return parts[1].isdigit() and _process_start(int(parts[1])) != parts[2]


def new_claim() -> str:
    """A recrawl's claim of a crawl (``recrawl_claim``): a random token, and this process where
    /proc tells it, so that another process of the same machine knows the claim dead as soon
    as its process is (``claim_gone``)."""
    token = secrets.token_hex(8)
    process = this_process()
    return token if process is None else f"{token}/{process}"


def claim_gone(claim: str | None) -> bool:
    """Whether the process that made recrawl ``claim`` (``new_claim``) is known to be gone
    (``process_gone``). A killed recrawl's mark is otherwise taken for live until it is stale
    (3 heartbeats: 90 s by default). A claim written before claims named their process cannot
    tell: False."""
    return isinstance(claim, str) and process_gone(claim.partition("/")[2] or None)


def _recrawl_mark(claim: str | None, interval: float | None) -> dict[str, Any]:
    """The crawl record's fields of recrawl ``claim`` under way, beating every ``interval``
    seconds; all None (``claim`` None) for none."""
    if claim is None:
        return dict.fromkeys(RECRAWL_MARK)
    return {
        "recrawl_seen_at": _utc_now(),
        "recrawl_heartbeat_interval": interval,
        "recrawl_claim": claim,
    }


def stored_time(iso: str | None) -> datetime | None:
    """A stored ISO 8601 time, in UTC; None when it is unknown or no time (a cell edited by
    hand, or a JOBDIR's file). One without an offset (written by hand, or by another program) is
    taken as UTC, the store's time."""
    try:
        time = datetime.fromisoformat(iso) if iso else None
    except (TypeError, ValueError):  # TypeError: no text at all
        return None
    return time.replace(tzinfo=UTC) if time and time.tzinfo is None else time


def is_gone(page: Mapping[str, Any]) -> bool:
    """Whether a page record says the page is no longer there (its latest fetch: 404, 410)."""
    return page.get("status") in GONE


def _in_time(iso: str | None) -> datetime:
    """A stored time to order crawls by, in time and not as text (a time edited into no time
    came after every time, one written with another offset than UTC's by its digits); the
    earliest of all when it is unknown."""
    return stored_time(iso) or datetime.min.replace(tzinfo=UTC)


def _coerce(schema: Mapping[str, type], record: Mapping[str, Any]) -> dict[str, Any]:
    """The record restricted to the schema's fields, in its order, with its types (None kept)."""
    return {
        name: None if (value := record.get(name)) is None else kind(value)
        for name, kind in schema.items()
    }


# What a stored value of no version's making is read as (see ``_read_as``).
_UNREADABLE = object()


def _read_as(kind: type, value: Any) -> Any:
    """A stored value as its field's type, or ``_UNREADABLE`` when no version wrote it: a cell
    edited by hand or a document another program wrote (text in a number, JSON that is no
    object, a BSON date, a negative count or level, a score or rate that is NaN or infinite,
    which JSON cannot hold). SQLite keeps booleans as 0 and 1, and mongosh writes every number
    as a double (a boolean edited into 1 with it is 1.0)."""
    if value is None:
        return None
    if type(value) is kind:
        if kind is float and not math.isfinite(value):
            return _UNREADABLE
        return _UNREADABLE if kind is int and value < 0 else value
    if kind is float and type(value) is int:
        return float(value)
    if kind is bool and type(value) in (int, float) and value in (0, 1):
        return bool(value)
    if kind is int and type(value) is float and value.is_integer() and value >= 0:
        return int(value)
    return _UNREADABLE


# The fields that hold a time, as the crawl writes it (``_utc_now``: ISO 8601, in UTC).
TIME_FIELDS = frozenset(
    {"fetched_at", "last_changed", "tried_at", "started_at", "finished_at", "resumed_at"}
    | {"seen_at", "recrawl_seen_at"}
)
# What a field of each type holds, for an error line.
KIND_WORDS = {
    str: "text",
    int: "a whole number, at least 0",
    float: "a finite number",
    bool: "true or false",
    dict: "a JSON object",
    list: "a JSON array",
}


def wrong_kind(schema: Mapping[str, type], record: Mapping[str, Any]) -> str | None:
    """Why a field of ``record`` holds a value no version writes there, as ``_read_as`` reads a
    stored one (a score given as text, a title as a list), or a time that is none; None when
    every field of the schema it has is of its type. ``_coerce`` would have stored the text of
    the value (``language: 7`` as ``"7"``), or raised for one of another shape."""
    for name, value in record.items():
        kind = schema.get(name)
        if kind is None or value is None:
            continue
        if _read_as(kind, value) is _UNREADABLE:
            return f"{name}={quoted(value)} is not {KIND_WORDS[kind]}"
        if name in TIME_FIELDS and stored_time(value) is None:
            return f"{name}={quoted(value)} is not an ISO 8601 time"
    return None


def _require(record: Mapping[str, Any], *names: str) -> None:
    for name in names:
        if not record.get(name):
            raise ValueError(f"a record needs a non-empty {name!r}: {dict(record)!r:.200}")


# The records the writing methods take, validated and given the store's types: also what
# ``focused.unstored`` keeps in a file when the store cannot take them, and checks as it loads
# them back. A mistake raises ValueError or TypeError.


def _fitted(page: dict[str, Any]) -> dict[str, Any]:
    """The page (a record or an update) with its ``CUT_FIELDS`` cut, at a character, so that
    its text fields hold at most ``PAGE_MAX_BYTES`` in UTF-8; said in the log."""
    texts = [value for value in page.values() if isinstance(value, str)]
    if 4 * sum(map(len, texts)) <= PAGE_MAX_BYTES:  # at most 4 bytes a character: no need
        return page
    excess = sum(len(value.encode()) for value in texts) - PAGE_MAX_BYTES
    for name in CUT_FIELDS:
        if excess <= 0:
            break
        if page.get(name):
            encoded = page[name].encode()
            kept = encoded[: max(0, len(encoded) - excess)].decode(errors="ignore")
            excess -= len(encoded) - len(kept.encode())
            logger.warning(
                "Page %s: its %s (%d bytes in UTF-8) is stored cut to %d bytes, to fit a"
                " store's record (%d bytes of text in all)",
                cut(page["url"]),
                name,
                len(encoded),
                len(kept.encode()),
                PAGE_MAX_BYTES,
            )
            page[name] = kept
    return page


def page_to_save(record: Mapping[str, Any]) -> dict[str, Any]:
    """A page record as ``Store.save_pages`` stores it: every field of ``PAGE_FIELDS``, its
    text cut to fit (``PAGE_MAX_BYTES``)."""
    page = _coerce(PAGE_SCHEMA, record)
    _require(page, "crawl_id", "url")
    return _fitted(page)


def page_update(record: Mapping[str, Any]) -> dict[str, Any]:
    """The fields ``Store.update_pages`` sets on the stored page (crawl_id, url)."""
    _require(record, "crawl_id", "url")
    unknown = sorted(set(record) - set(PAGE_FIELDS))
    if unknown:
        raise ValueError(f"page fields must be some of {PAGE_FIELDS}, not {unknown}")
    return _fitted(_coerce({name: PAGE_SCHEMA[name] for name in record}, record))


def rescoring(updates: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The pages (crawl_id, url) whose verdict (is_relevant) some of ``updates`` set: those
    whose stored verdict ``verdicts_moved`` compares with."""
    return list(dict.fromkeys((u["crawl_id"], u["url"]) for u in updates if "is_relevant" in u))


def verdicts_moved(
    updates: Iterable[Mapping[str, Any]], stored: Mapping[tuple[str, str], Any]
) -> dict[str, tuple[int, int]]:
    """What ``Store.update_pages``'s ``updates`` do to the stored pages' verdicts: per crawl id
    with any moved, how many pages became relevant and how many no longer are (``RESCORED``'s
    order). ``stored``: (crawl_id, url) -> the is_relevant the store holds before them, for
    each page of ``rescoring(updates)`` it holds (an update of another changes nothing). Read
    as a report counts a page (a value of another type: not relevant); a page updated twice
    in the batch is compared the second time with the first update's verdict."""
    verdicts = {key: _read_as(bool, value) is True for key, value in stored.items()}
    moved: dict[str, list[int]] = {}
    for update in updates:
        key = (update["crawl_id"], update["url"])
        if "is_relevant" not in update or key not in verdicts:
            continue
        now = update["is_relevant"] is True
        if now != verdicts[key]:
            moved.setdefault(key[0], [0, 0])[0 if now else 1] += 1
        verdicts[key] = now
    return {crawl_id: (became, lost) for crawl_id, (became, lost) in moved.items()}


def crawl_finish(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The fields ``Store.finish_crawl`` sets on a crawl record: ``finished_at`` defaults to
    now and ``status`` to ``finished``."""
    unknown = sorted(set(fields) - set(FINISH_FIELDS))
    if unknown:
        raise TypeError(f"finish_crawl() got unknown fields {unknown}; known: {FINISH_FIELDS}")
    fields = {"finished_at": _utc_now(), "status": "finished", **fields}
    if fields["status"] not in CRAWL_STATUSES:
        raise ValueError(f"crawl status {fields['status']!r} is not one of {CRAWL_STATUSES}")
    return {name: value for name, value in _coerce(CRAWL_SCHEMA, fields).items() if name in fields}


_PYMONGO_DETAIL = re.compile(r" \(configured timeouts:|, Timeout: |, Topology Description: ")


def error_summary(exc: BaseException) -> str:
    """One line out of a backend exception (pymongo appends a whole topology dump)."""
    return one_line(exc, cut=_PYMONGO_DETAIL)


class Store(ABC):
    """The records of crawls and of the pages they fetched.

    Subclasses implement the ``_``-prefixed primitives on already validated, coerced records.
    """

    backend: ClassVar[str]  # for messages
    errors: ClassVar[tuple[type[BaseException], ...]]  # backend failures, raised as StoreError
    # What the backend raises for a value it cannot hold, raised as RecordRefused: the driver
    # converts every value before anything is sent (Python's int and str: 64 bits, UTF-8).
    refusals: ClassVar[tuple[type[BaseException], ...]] = (OverflowError, UnicodeEncodeError)
    # True when the store may be called from any thread: the storage pipeline then moves its
    # calls off the reactor thread, where a network round trip would stall the crawl.
    threadsafe: ClassVar[bool]
    location: str  # file or redacted URI, for messages
    # The first value read as unknown (``_read_as``), for a warning: ``crawls.params = 'x'``.
    unreadable: str = ""

    @contextmanager
    def _failing(self, action: str) -> Iterator[None]:
        try:
            yield
        except (*self.refusals, *self.errors) as exc:
            error = RecordRefused if isinstance(exc, self.refusals) else StoreError
            raise error(
                f"{self.backend} store at {self.location}: cannot {action}: {error_summary(exc)}"
            ) from exc

    # -- writing -------------------------------------------------------------------------------

    def start_crawl(
        self, record: Mapping[str, Any], *, refuse_live: bool = False, locked: bool = False
    ) -> None:
        """Insert or replace the crawl record, with status ``running`` and no finish fields.

        A crawl already recorded (resumed, or run again under its id) keeps its first
        ``started_at``; the record's own start becomes its ``resumed_at``. ``started_at`` and
        ``seen_at`` default to now. It keeps a recrawl's mark (``RECRAWL_MARK``) too, as it
        was; one that is live (``focused.report.recrawl_is_live``) refuses the start:
        ``RecrawlUnderWay``, nothing written. The record read is compared and set, so that a
        recrawl claiming the crawl between the read and the write is seen (read again), and
        so is another run starting, whose seeds are kept beside this run's. With
        ``refuse_live`` (``focused.jobchecks.starts_unlocked``), so does a record of the crawl
        running with a fresh heartbeat (``focused.report.is_live``): ``CrawlRunning``. Of two
        such starts at once, the insert lets one through. With ``locked`` (this process holds
        the crawl's lock, ``focused.jobchecks.holds_crawl_lock``) a recrawl's mark is a killed
        one's, whatever its heartbeat: it is cleared.
        """
        from focused.report import is_live, recrawl_is_live  # it imports this module

        now = _utc_now()
        crawl = _coerce(
            CRAWL_SCHEMA,
            {
                "started_at": now,
                "seen_at": now,
                **record,
                "status": "running",
                "resumed_at": None,
                # No verdict moved yet: a recrawl counts from here (a record without them
                # cannot tell which its recrawls moved, and stays without).
                **dict.fromkeys(RESCORED, 0),
            },
        )
        _require(crawl, "crawl_id")
        started_at = crawl["started_at"]
        with self._failing(f"save crawl {crawl['crawl_id']}"):
            # Each turn means a recrawl wrote its mark, or another run of the crawl started,
            # between the read and the write: a live recrawl ends the loop, and a mark is
            # written only by a recrawl starting or beating.
            while True:
                stored = self._find_crawls(crawl["crawl_id"], limit=1)
                if not stored:
                    if self._insert_crawl(crawl):
                        return
                    continue  # another process of the crawl recorded it first
                # Compared as stored, a value of another type too (read as unknown below).
                mark = {name: stored[0][name] for name in RECRAWL_MARK}
                [earlier] = self._readable("crawls", [dict(stored[0])])
                if recrawl_is_live(earlier, datetime.now(UTC)) and not locked:
                    raise RecrawlUnderWay(earlier)
                if refuse_live and is_live(earlier, datetime.now(UTC)):
                    raise CrawlRunning(earlier)
                if earlier["started_at"]:
                    crawl["resumed_at"] = started_at
                    crawl["started_at"] = earlier["started_at"]
                # The crawl's seeds are those of all its runs: a JOBDIR resumed, or a process
                # joining a shared crawl, with seeds of its own fetches them too (at level 0),
                # and its record named them alone.
                given = [seed for seed in earlier.get("seeds") or [] if isinstance(seed, str)]
                crawl["seeds"] = list(dict.fromkeys([*given, *(crawl.get("seeds") or [])]))
                kept = _recrawl_mark(None, None) if locked else mark
                # Another process that started since the read wrote its resumed_at, and its
                # seeds, which this write would drop: read again.
                read = {**mark, "resumed_at": stored[0]["resumed_at"]}
                # The verdicts moved stay as the recrawls counted them: the pages keep them.
                run = {name: value for name, value in crawl.items() if name not in RESCORED}
                if self._update_crawl(crawl["crawl_id"], {**run, **kept}, where=read):
                    return

    def save_pages(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Insert or replace page records by (crawl_id, url): saving a page again keeps one,
        the latest, so a retried or resumed batch never duplicates pages."""
        latest: dict[tuple[str, str], dict[str, Any]] = {}
        for record in records:
            page = page_to_save(record)
            # A page twice in one batch: keep the later. MongoDB runs an unordered bulk write's
            # operations in no fixed order, so it must not be left to decide.
            latest[page["crawl_id"], page["url"]] = page
        pages = list(latest.values())
        if pages:
            with self._failing(f"save {counted(len(pages), 'page')}"):
                self._upsert_pages(pages)

    def heartbeat(self, crawl_id: str) -> None:
        """Set the crawl record's ``seen_at`` to now: a process of the crawl is alive."""
        with self._failing(f"refresh the heartbeat of crawl {crawl_id}"):
            self._update_crawl(crawl_id, {"seen_at": _utc_now()})

    def claim_recrawl(self, crawl_id: str, seen: str | None, interval: float) -> str | None:
        """Mark a recrawl of the crawl under way, beating every ``interval`` seconds
        (``recrawl_heartbeat``), if its record still has the ``recrawl_seen_at`` read as
        ``seen``: the claim's identity (``recrawl_claim``), None if it did not. Compare and
        set in one update, so that of two recrawls started together, each having read no
        recrawl under way (or the same stale mark), one only goes on."""
        claim = new_claim()
        with self._failing(f"mark crawl {crawl_id} as being recrawled"):
            marked = self._update_crawl(
                crawl_id, _recrawl_mark(claim, interval), where={"recrawl_seen_at": seen}
            )
        return claim if marked else None

    def recrawl_heartbeat(self, crawl_id: str, claim: str, interval: float) -> bool:
        """Set the crawl record's ``recrawl_seen_at`` to now: recrawl ``claim`` is alive, and
        says so every ``interval`` seconds. Whether the mark was still its own: a recrawl
        stalled past its mark's staleness finds it taken over by another, and leaves it."""
        with self._failing(f"refresh the recrawl heartbeat of crawl {crawl_id}"):
            return self._update_crawl(
                crawl_id, _recrawl_mark(claim, interval), where={"recrawl_claim": claim}
            )

    def end_recrawl(self, crawl_id: str, claim: str) -> bool:
        """Clear the crawl record's mark of recrawl ``claim``, which ended: whether it was
        still its own (another recrawl's, taken over, is left to it)."""
        with self._failing(f"clear the recrawl mark of crawl {crawl_id}"):
            return self._update_crawl(
                crawl_id, _recrawl_mark(None, None), where={"recrawl_claim": claim}
            )

    def finish_crawl(self, crawl_id: str, **fields: Any) -> None:
        """Update the finish fields (``FINISH_FIELDS``) of a crawl record.

        ``finished_at`` defaults to now and ``status`` to ``finished``. A crawl_id without a
        record is left alone.
        """
        update = crawl_finish(fields)
        with self._failing(f"finish crawl {crawl_id}"):
            self._update_crawl(crawl_id, update)

    # -- reading -------------------------------------------------------------------------------

    def get_crawl(self, crawl_id: str) -> dict[str, Any] | None:
        with self._failing(f"read crawl {crawl_id}"):
            found = self._readable("crawls", self._find_crawls(crawl_id, limit=1))
        return found[0] if found else None

    def crawls(self) -> list[dict[str, Any]]:
        """All crawl records, newest (by started_at) first, those whose start is unknown last.
        The backends sort the times as text (``CRAWL_SORT``): here in time, the sort keeping
        their order of ties."""
        with self._failing("read crawls"):
            found = self._readable("crawls", self._find_crawls(None, limit=None))
        return sorted(found, key=lambda crawl: _in_time(crawl["started_at"]), reverse=True)

    def latest_crawl_id(self) -> str | None:
        """The crawl whose latest run started last: a crawl just resumed is the latest, though
        ``crawls()`` lists it by its first start."""
        with self._failing("read crawls"):
            found = self._readable("crawls", self._find_crawls(None, limit=None))  # few
        # A record whose id is unknown (edited by hand) cannot be asked for: the latest is
        # another.
        named = [crawl for crawl in found if crawl["crawl_id"] is not None]
        latest = max(
            named,
            key=lambda crawl: max(_in_time(crawl["resumed_at"]), _in_time(crawl["started_at"])),
            default=None,
        )
        return latest["crawl_id"] if latest else None

    def pages(
        self,
        crawl_id: str,
        *,
        min_relevance: float | None = None,
        level: int | None = None,
        relevant_only: bool = False,
        limit: int | None = None,
        order: PageOrder = "relevance",
        fields: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Page records of a crawl, most relevant first (or in fetch order).

        ``fields`` restricts each record to those fields (in ``PAGE_FIELDS`` order), so that a
        report over many pages need not read their texts.
        """
        return list(
            self.iter_pages(
                crawl_id,
                min_relevance=min_relevance,
                level=level,
                relevant_only=relevant_only,
                limit=limit,
                order=order,
                fields=fields,
            )
        )

    def iter_pages(
        self,
        crawl_id: str,
        *,
        min_relevance: float | None = None,
        level: int | None = None,
        relevant_only: bool = False,
        limit: int | None = None,
        order: PageOrder = "relevance",
        fields: Iterable[str] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """``pages``, read as they are used: a listing of a large crawl (``scrapy pages
        --json``) holds one record at a time, where a list held them all before the first was
        printed. The arguments are checked at once; the store is read (and fails, as
        ``StoreError``) as the records are taken. The store must stay open meanwhile, and an
        SQLite reader holds its snapshot until the last record is taken: a crawl writing
        meanwhile cannot checkpoint past it, and its -wal file grows until then."""
        if order not in PAGE_SORTS:
            raise ValueError(f"page order {order!r} is not one of {tuple(PAGE_SORTS)}")
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        wanted = set(PAGE_FIELDS if fields is None else fields)
        if not wanted or not wanted <= set(PAGE_FIELDS):
            raise ValueError(f"page fields must be some of {PAGE_FIELDS}, not {sorted(wanted)}")
        query = PageQuery(
            crawl_id=crawl_id,
            min_relevance=None if min_relevance is None else float(min_relevance),
            level=None if level is None else int(level),
            relevant_only=relevant_only,
            limit=limit,
            sort=PAGE_SORTS[order],
            fields=tuple(name for name in PAGE_FIELDS if name in wanted),
            known={"relevance": True} if min_relevance is not None else {},
        )
        return self._read_pages(query)

    def page_counts(self, crawl_id: str) -> PageCounts:
        """The crawl's stored pages counted (``PageCounts``) by the store itself, from an index
        of the counted fields: reading each page past its text took SQLite 15 s for a crawl of
        200,000 pages, and holding them in Python 120 MB. A store holding a value no crawl
        writes there (a cell edited by hand: text, a negative or fractional fetch order...)
        has its pages read and counted one by one instead, each value read as ``pages`` reads
        it, and said (``unreadable``)."""
        with self._failing(f"count pages of crawl {crawl_id}"):
            counted = self._count_pages(crawl_id)
        if counted is not None:
            return counted
        counts = PageCounts()
        for page in self.iter_pages(crawl_id, fields=COUNT_FIELDS):
            counts.add(page)
        return counts

    def _read_pages(self, query: PageQuery) -> Iterator[dict[str, Any]]:
        with self._failing(f"read pages of crawl {query.crawl_id}"):
            for page in self._unknown_last(query):
                yield self._readable_record("pages", page)

    def _unknown_last(self, query: PageQuery) -> Iterator[dict[str, Any]]:
        """The pages of ``query`` in its order, those whose sort key is unknown (``known``)
        after the others, in the order ``UNKNOWN_LAST`` gives them (itself with its unknown
        last). Both backends sort text (a cell edited by hand) and infinity above every number
        and none below: a page whose key was read as unknown came first in one direction."""
        key = query.sort[0][0]
        if key not in UNKNOWN_LAST or key in query.known:
            yield from self._find_pages(query)
            return
        count = 0
        for page in self._find_pages(replace(query, known={**query.known, key: True})):
            count += 1
            yield page
        if query.limit is None or count < query.limit:
            rest = None if query.limit is None else query.limit - count
            unknown = {**query.known, key: False}
            yield from self._unknown_last(
                replace(query, known=unknown, sort=UNKNOWN_LAST[key], limit=rest)
            )

    def update_pages(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Set the fields given in each record on the stored page (crawl_id, url); the other
        fields keep their values, and a page not in the store is not created. The verdicts
        (is_relevant) they move are added to their crawl records' ``RESCORED`` counts
        (``verdicts_moved``) with the same write, where the record has them: a recrawl
        stopped half way has counted those it stored. MongoDB, which has no transaction here,
        counts a batch whose writes failed half way with the next (``focused.mongostore``)."""
        updates = [page_update(record) for record in records]
        if updates:
            with self._failing(f"update {counted(len(updates), 'page')}"):
                self._update_pages(updates)

    def unreadable_warning(self, read: str) -> str:
        """The one line that says which value was read as unknown (``read``: ``shown``,
        ``planned``...), for whoever fixes it; empty when there was none."""
        if not self.unreadable:
            return ""
        return (
            f"the {self.backend} store at {self.location} holds values of another type than"
            f" their field's, {read} as unknown: {self.unreadable}"
        )

    @abstractmethod
    def close(self) -> None: ...

    def _readable(self, table: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The records with each value of another type than its field's read as unknown
        (None), as a field the store does not have is: a command lists what it can read."""
        return [self._readable_record(table, record) for record in records]

    def _readable_record(self, table: str, record: dict[str, Any]) -> dict[str, Any]:
        schema = CRAWL_SCHEMA if table == "crawls" else PAGE_SCHEMA
        for name, value in record.items():
            record[name] = _read_as(schema[name], value)
            if record[name] is _UNREADABLE:
                record[name] = None
                self.unreadable = self.unreadable or cut(f"{table}.{name} = {value!r}")
        return record

    # -- backend primitives --------------------------------------------------------------------

    @abstractmethod
    def _insert_crawl(self, crawl: dict[str, Any]) -> bool:
        """Insert the crawl record unless one with its crawl_id is there: whether it did."""

    @abstractmethod
    def _upsert_pages(self, pages: list[dict[str, Any]]) -> None: ...

    @abstractmethod
    def _update_pages(self, updates: list[dict[str, Any]]) -> None:
        """Set the updates' fields on the pages stored, and add the verdicts they move
        (``verdicts_moved``, read against the pages of ``rescoring``) to each crawl record's
        ``RESCORED`` counts that are numbers (None stays None)."""

    @abstractmethod
    def _update_crawl(
        self, crawl_id: str, fields: dict[str, Any], where: dict[str, Any] | None = None
    ) -> bool:
        """Set fields of the crawl record, if its fields named in ``where`` have those values
        (None: null or missing); whether a record was updated."""

    @abstractmethod
    def _find_crawls(self, crawl_id: str | None, *, limit: int | None) -> list[dict[str, Any]]:
        """Crawl records (all, or the one with crawl_id) in ``CRAWL_SORT`` order."""

    @abstractmethod
    def _find_pages(self, query: PageQuery) -> Iterator[dict[str, Any]]:
        """The pages of ``query``, read from the store as they are taken."""

    @abstractmethod
    def _count_pages(self, crawl_id: str) -> PageCounts | None:
        """The crawl's stored pages counted in the store, without reading their texts; None
        when one holds a value of ``COUNT_FIELDS`` that no crawl writes in this store (the
        caller then reads the pages)."""


def _setting(settings: Settings | Mapping[str, Any], name: str, default: Any) -> Any:
    value = settings.get(name)
    return default if value is None or value == "" else value


def _mongo_database(settings: Settings | Mapping[str, Any]) -> str:
    """``MONGO_DATABASE``, a name MongoDB takes. Given empty, it is refused as ``FOCUSED_DB``
    is: it meant the default database, another crawl's store perhaps, which a variable that
    expanded to nothing did not ask for."""
    name = settings.get("MONGO_DATABASE")
    if name is None:
        return DEFAULT_MONGO_DATABASE
    name = str(name)
    if not name:
        raise StoreSettingError("setting MONGO_DATABASE needs a database name, not ''")
    invalid = f"setting MONGO_DATABASE: MongoDB database name {quoted(name)} is invalid"
    for character in MONGO_NAME_FORBIDDEN:
        if character in name:
            raise StoreSettingError(
                f'{invalid}: it holds {character!r}; a name has none of / \\ . " $, no space'
                " and no NUL"
            )
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:  # bytes of the command line that are not UTF-8
        raise StoreSettingError(f"{invalid}: it is not UTF-8 text") from None
    if size > MONGO_NAME_MAX_BYTES:
        raise StoreSettingError(
            f"{invalid}: it is {size} bytes long, and MongoDB takes at most {MONGO_NAME_MAX_BYTES}"
        )
    return name


def open_store(
    settings: Settings | Mapping[str, Any],
    *,
    create: bool = True,
    read_only: bool = False,
    make_index: bool = True,
) -> Store:
    """The store the settings ask for (a scrapy ``Settings`` or a plain dict).

    ``create=False`` is for a command that works on an existing store: nothing is created (a
    missing SQLite file is a ``StoreError``, not a new empty database). ``read_only`` is for
    readers: nothing is created or written, so that a store on read-only media can be read. A
    store that cannot be written when it should be is a ``StoreSettingError``.
    ``make_index=False`` leaves the fetch-order index an SQLite store written before it lacks
    to a later open (``SqliteStore``), as a crawl's checks and a recrawl's plan and end do: its
    storage pipeline opens the store too, and each tried to make it in turn, up to half of
    FOCUSED_DB_TIMEOUT.
    """
    uri = _setting(settings, "MONGO_URI", None)
    if isinstance(uri, str) and not uri.strip():
        # pymongo would take it for a host with no name, and say so only after MONGO_TIMEOUT_MS.
        raise StoreSettingError(
            f"setting MONGO_URI needs a mongodb:// URI, not {quoted(uri)} (empty: the SQLite store)"
        )
    if uri:
        from focused.mongostore import MongoStore  # imports pymongo: only when asked for

        return MongoStore(
            uri,
            _mongo_database(settings),
            timeout_ms=int(_setting(settings, "MONGO_TIMEOUT_MS", DEFAULT_MONGO_TIMEOUT_MS)),
            create=create and not read_only,
        )
    db = settings.get("FOCUSED_DB")
    if isinstance(db, str) and not db.strip():
        # Unlike an empty MONGO_URI (-s MONGO_URI= is how the command line turns off a server
        # the project's settings name), it cannot mean "no file": it would mean the default file,
        # another crawl's store perhaps, which a variable that expanded to nothing did not ask for
        # (nor a file named " " in the working directory, which one that expanded to a space).
        raise StoreSettingError(f"setting FOCUSED_DB needs a file, not {quoted(db)}")
    if db == ":memory:":  # SQLite's name of no file: a crawl's pages did not outlive it
        raise StoreSettingError(
            "setting FOCUSED_DB needs a file, not ':memory:', SQLite's database in memory, which"
            " the crawl's pages would not outlive"
        )
    if isinstance(db, str) and (db.startswith("file:") or "://" in db):
        # SQLite read file:... as a URI of its own; a URL (sqlite:///tmp/pages.sqlite3, as
        # SQLAlchemy names one) made folders sqlite:/tmp in the working directory, and the store
        # in them.
        raise StoreSettingError(
            f"setting FOCUSED_DB needs the path of a file, not a URI: {quoted(db)}"
        )
    path = _setting(settings, "FOCUSED_DB", DEFAULT_SQLITE_PATH)
    timeout = float(_setting(settings, "FOCUSED_DB_TIMEOUT", DEFAULT_SQLITE_TIMEOUT))
    from focused.sqlitestore import SqliteStore  # imports this module

    return SqliteStore(
        path, create=create, read_only=read_only, timeout=timeout, make_index=make_index
    )
