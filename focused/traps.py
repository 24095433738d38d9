"""Spider traps: URL families that keep producing new URLs without new content.

A trap is a family of URLs a site can generate without end: a calendar linking to the next
day forever, a relative link that nests a path in itself (``/a/b/a/b/a/...``), a session id
that makes every visit a new URL. The crawler literature (Heydon and Najork's Mercator, 1999;
Heritrix's path rules) recognises them by the shape of the URL and caps what each family may
take. Here:

- ``family(url)`` is the URL's shape: host, path with digit runs as ``#`` (a run of numeric
  segments as one ``#``, so days and months of a calendar are one family), a nested path cut
  at its first repeat, and the sorted names of the query parameters without their values.
- ``trap_pattern(url)`` names the pattern a single URL shows, or None:

  - ``repeated_path``: a (non-numeric) segment three times, or a block of two or more
    segments twice in a row;
  - ``calendar``: a date at the end of the path (``/cal/2026/11/30``, ``/2026-11``) or as a
    query value (``?month=2026-12``, ``?date=20261130``); a dated article
    (``/2026/11/30/a-title``) is not one, nor a season (``/season/2021-22/``), a price or a
    version (``?min_price=1999.99``, ``?version=2021.3``);
  - ``session_id``: a query value that looks like a random token (16 or more letters and
    digits, mixed), unless its parameter names an id (``id``, ``uuid``, ``guid``, ``hash``,
    ``list``, a name ending in ``id``) other than a session's (a name with ``sess`` or ending
    in ``sid``, ``zenid``, ``cfid``): a page's own id (``article?id=<uuid>``, a commit's hash,
    YouTube's ``?list=``) is no session.

- ``TrapFamilies`` adds the query-parameter explosion (more than ``TRAP_QUERY_VARIANTS`` URLs
  of one path with one parameter set) and the counts: ``FocusedScheduler`` marks a trap
  request with ``TRAP_META`` (the frontiers queue it behind every other request) and drops it
  once its family has had ``TRAP_MAX_PER_FAMILY`` requests queued.
- ``trap_counts(spider)`` decides where the counts live: in Redis for a crawl shared by several
  processes (``SharedCounts``), so that the cap and the explosion test are the crawl's, not
  each process's; under JOBDIR in an SQLite file written through (``SqliteCounts``,
  ``JOBDIR/trapfamilies.sqlite3``), so that both a pause and a ``kill -9`` keep them; else in
  memory (``LocalCounts``).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from scrapy import signals

from focused.errors import counted
from focused.jobdir import JobdirUnwritable, jobdir_writes

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.statscollectors import StatsCollector

    from focused.distributed import SharedCrawl
    from focused.jobdir import JobdirWrites

logger = logging.getLogger(__name__)

COUNTS_FILE = "trapfamilies.sqlite3"  # under JOBDIR
KINDS = ("variants", "queued")  # the counts kept per family (LocalCounts)
TRAP_META = "trap_family"  # meta key: the family of a request queued at the back
VARIANT_META = "query_variant"  # meta key: the query family whose variant slot a request took

_DIGITS = re.compile(r"\d+")
_NUMERIC = re.compile(r"[\W_]*\d[\d\W_]*")  # digits and separators: 2026, 11, 2026-11-30
_YEAR = r"(?:19|20)\d\d"
# Month and day are not checked: an endless calendar may well count on to month 13 or day 0.
_MONTH = _DAY = r"\d\d?"
_SEP = r"[-_./]"
# A year and month (and day) with separators closing the path (a trailing slash or a file
# extension allowed): /cal/2026/11/30, /archive/2026-11/. A year alone could be any number.
_DATE_PATH_TAIL = re.compile(f"/{_YEAR}{_SEP}{_MONTH}(?:{_SEP}{_DAY})?(?:\\.\\w+)?/?$", re.ASCII)
# A season or a school year, not a month: 2021-22 (the next year's last two digits), in a path
# such as /season/2021-22/ or /courses/2023-24/.
_SEASON = re.compile(r"((?:19|20)\d\d)-(\d\d)", re.ASCII)
# As a query value: with separators, or a valid compact YYYYMMDD (shorter numbers are ids).
_DATE_VALUE = re.compile(
    f"{_YEAR}(?:{_SEP}{_MONTH}(?:{_SEP}{_DAY})?|(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\\d|3[01]))",
    re.ASCII,
)
# A random id: 16+ letters and digits in one run (a slug has hyphens), or a UUID.
_TOKEN = re.compile(r"[A-Za-z0-9]{16,}|[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
# Query parameters whose value is a page's id whatever it looks like (and any name ending in
# id), and sessions' names that end in id (with any name holding "sess" or ending in "sid":
# jsessionid, phpsessid, osCsid).
ID_NAMES = frozenset({"uuid", "guid", "list", "hash"})
SESSION_NAMES = frozenset({"zenid", "cfid"})
REPEATS = 3  # a path segment this many times is a nested path
# The scheduler asks for every link it is given, and most links of a crawl are found again
# from many pages: the shape of a URL is computed once, while it stays in this many.
SHAPE_CACHE = 1 << 16


def _segments(path: str) -> list[str]:
    return [segment for segment in path.split("/") if segment]


def _repeats_itself(segments: list[str]) -> bool:
    """A (non-numeric) segment ``REPEATS`` times, or a block of 2+ segments twice in a row."""
    words = Counter(s for s in segments if not _NUMERIC.fullmatch(s))
    if words and max(words.values()) >= REPEATS:
        return True
    return any(
        segments[start : start + size] == segments[start + size : start + 2 * size]
        for size in range(2, len(segments) // 2 + 1)
        for start in range(len(segments) - 2 * size + 1)
    )


@lru_cache(maxsize=SHAPE_CACHE)
def family(url: str) -> str:
    """The URL's family: host, path shape and query parameter names (see the module doc)."""
    parts = urlsplit(url)
    segments = _segments(parts.path)
    if _repeats_itself(segments):  # cut at the first segment seen before: one family per loop
        first_repeat = next(i for i, s in enumerate(segments) if s in segments[:i])
        segments = [*segments[:first_repeat], "..."]
    shape: list[str] = []
    for segment in segments:
        token = "#" if _NUMERIC.fullmatch(segment) else _DIGITS.sub("#", segment)
        if not (token == "#" and shape and shape[-1] == "#"):
            shape.append(token)
    names = sorted({name for name, _ in parse_qsl(parts.query, keep_blank_values=True)})
    query = "?" + "&".join(names) if names else ""
    return f"{parts.hostname or ''}/{'/'.join(shape)}{query}"


@lru_cache(maxsize=SHAPE_CACHE)
def trap_pattern(url: str) -> str | None:
    """The trap pattern ``url`` shows by itself: ``repeated_path``, ``calendar``,
    ``session_id``, or None."""
    parts = urlsplit(url)
    if _repeats_itself(_segments(parts.path)):
        return "repeated_path"
    tail = _DATE_PATH_TAIL.search(parts.path)
    if tail and not _is_season(tail.group().strip("/").split(".")[0]):
        return "calendar"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if any(_is_date_value(value) for _, value in pairs):
        return "calendar"
    if any(_is_token(value) and not _names_an_id(name) for name, value in pairs):
        return "session_id"
    return None


def _is_season(text: str) -> bool:
    """2021-22: a season or a school year (the next year's last two digits), not a month."""
    found = _SEASON.fullmatch(text)
    return found is not None and (int(found.group(1)) + 1) % 100 == int(found.group(2))


def _is_date_value(value: str) -> bool:
    """A query value that is a date (``_DATE_VALUE``): with dots, only a whole one (2026.11.30),
    since a year and a number after a dot is a price or a version (1999.99, 2021.3)."""
    if not _DATE_VALUE.fullmatch(value):
        return False
    return "." not in value or value.count(".") == 2


def _names_an_id(name: str) -> bool:
    """Whether a query parameter's name says its value is a page's id, not a session's: with
    the token rule alone, every article of a site of ``article?id=<uuid>`` past the family's
    ``TRAP_MAX_PER_FAMILY`` (10) was dropped."""
    name = name.lower()
    if "sess" in name or name.endswith("sid") or name in SESSION_NAMES:
        return False
    return name in ID_NAMES or name.endswith("id")


def _is_token(value: str) -> bool:
    """A random-looking id: long, and letters mixed with digits."""
    return (
        bool(_TOKEN.fullmatch(value))
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


class LocalCounts:
    """The counts of one process, in memory: ``variants`` and ``queued`` (family -> count).

    Each count is taken as a slot, check and count in one step (``take``, ``take_variant``),
    and given back when the request is not queued after all (``give_back``,
    ``give_back_variant``), as ``SharedCounts`` must do across processes.
    """

    def __init__(self) -> None:
        self.variants: Counter[str] = Counter()
        self.queued: Counter[str] = Counter()

    def _kind(self, kind: str) -> Counter[str]:
        return self.variants if kind == "variants" else self.queued

    def _take(self, kind: str, name: str, limit: int) -> bool:
        counts = self._kind(kind)
        if counts[name] >= limit:
            return False
        counts[name] += 1
        return True

    def _give_back(self, kind: str, name: str) -> None:
        counts = self._kind(kind)
        counts[name] = max(0, counts[name] - 1)

    def query_variants(self, name: str) -> int:
        return self.variants[name]

    def take_variant(self, name: str, limit: int) -> bool:
        """Count one more queued URL of query family ``name``, unless it has ``limit``."""
        return self._take("variants", name, limit)

    def give_back_variant(self, name: str) -> None:
        self._give_back("variants", name)

    def take(self, name: str, limit: int) -> bool:
        """Count one more request of trap family ``name``, unless it has ``limit`` already."""
        return self._take("queued", name, limit)

    def give_back(self, name: str) -> None:
        self._give_back("queued", name)

    def queued_count(self, name: str) -> int:
        return self.queued[name]

    def close(self) -> None:
        """Nothing to release: the counts are in memory."""


class SharedCounts:
    """The counts of a crawl shared through Redis (``spider.shared``): hashes
    ``trap:variants`` and ``trap:queued`` (family -> count) under the crawl's prefix, so that
    a family's cap and its query variants are the crawl's, whatever process queues the
    requests (a slot is taken with ``SharedCrawl.take``, check and count in one step, and given
    back with ``SharedCrawl.give_back``).

    Once Redis is lost (``SharedCrawl.run``) a trap request is dropped: the spider is closing
    and nothing can be queued anyway.
    """

    VARIANTS, QUEUED = "trap:variants", "trap:queued"  # hashes under the crawl's prefix

    def __init__(self, shared: SharedCrawl) -> None:
        self.shared = shared
        self._variants = shared.key(self.VARIANTS)
        self._queued = shared.key(self.QUEUED)

    def query_variants(self, name: str) -> int:
        return int(self.shared.run(self.shared.redis.hget, self._variants, name, default=0) or 0)

    def take_variant(self, name: str, limit: int) -> bool:
        return self.shared.take(self.VARIANTS, name, limit)

    def give_back_variant(self, name: str) -> None:
        self.shared.give_back(self.VARIANTS, name)

    def take(self, name: str, limit: int) -> bool:
        return self.shared.take(self.QUEUED, name, limit)

    def give_back(self, name: str) -> None:
        self.shared.give_back(self.QUEUED, name)

    def queued_count(self, name: str) -> int:
        return int(self.shared.run(self.shared.redis.hget, self._queued, name, default=0) or 0)

    def close(self) -> None:
        """Nothing to release: the connection is the shared crawl's."""


class SqliteCounts(LocalCounts):
    """The counts of a JOBDIR crawl: ``LocalCounts`` whose every change is also committed at
    once to the table ``counts`` (family, kind, count; kind ``variants`` or ``queued``) of an
    SQLite file, so that a crawl resumed after ``kill -9`` keeps its caps, as after a pause.

    A JOBDIR written before kept the counts in ``spider.state["trap_families"]``, which Scrapy
    loads only when the spider opens: ``carry_over`` then moves them into the file, the larger
    count per family winning.
    """

    def __init__(self, path: Path, writes: JobdirWrites | None = None) -> None:
        # Imported here: schedulers.base imports this module.
        from schedulers.base import connect_crash_safe

        super().__init__()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = connect_crash_safe(path, writes)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS counts (family TEXT, kind TEXT, count INTEGER NOT NULL,"
            " PRIMARY KEY (family, kind))"
        )
        for name, kind, count in self._db.execute("SELECT family, kind, count FROM counts"):
            self._kind(kind)[name] = count

    def _save(self, name: str, kind: str) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO counts VALUES (?, ?, ?)", (name, kind, self._kind(kind)[name])
        )

    def _take(self, kind: str, name: str, limit: int) -> bool:
        taken = super()._take(kind, name, limit)
        if taken:
            self._save(name, kind)
        return taken

    def _give_back(self, kind: str, name: str) -> None:
        super()._give_back(kind, name)
        self._save(name, kind)

    def carry_over(self, spider: Spider) -> None:
        """Take over the counts an older version kept in ``spider.state`` (on spider_opened,
        after Scrapy's SpiderState has loaded it)."""
        old = spider.state.pop("trap_families", None) or {}
        if not old:
            return
        try:
            self._db.execute("BEGIN")
            for kind in KINDS:
                counts = self._kind(kind)
                for name, count in old.get(kind, {}).items():
                    if count > counts[name]:
                        counts[name] = count
                        self._save(name, kind)
            self._db.execute("COMMIT")
        except JobdirUnwritable:
            self._db.rollback_quietly()  # the crawl stops (focused.jobdir)

    def close(self) -> None:
        self._db.close()


def trap_counts(spider: Spider) -> LocalCounts | SqliteCounts | SharedCounts:
    """Where a crawl keeps its trap counts: in Redis when it is shared by several processes,
    in ``JOBDIR/trapfamilies.sqlite3`` under JOBDIR, else in memory."""
    shared = getattr(spider, "shared", None)
    if shared is not None:
        return SharedCounts(shared)
    jobdir = spider.crawler.settings.get("JOBDIR")
    if not jobdir:
        return LocalCounts()
    counts = SqliteCounts(Path(jobdir, COUNTS_FILE), jobdir_writes(spider.crawler))
    spider.crawler.signals.connect(counts.carry_over, signal=signals.spider_opened)
    return counts


class TrapFamilies:
    """Per-family counts, and the decision on each request the scheduler is given.

    ``counts`` (``trap_counts``) holds, per family, ``variants``: the queued URLs of each family
    with a query (the explosion test), and ``queued``: the queued trap requests of each trap
    family (the cap). A URL with a query takes one of its family's ``TRAP_QUERY_VARIANTS``
    variant slots when it is admitted (none left: a query explosion), a trap request one of its
    family's ``TRAP_MAX_PER_FAMILY`` slots; either goes back if the request is not queued after
    all (a URL seen before), so that the check and the count are one step, also across the
    processes of a shared crawl. Seeds and retries are not admitted: they take no slot.
    """

    def __init__(
        self,
        max_per_family: int,
        max_variants: int,
        counts: LocalCounts | SqliteCounts | SharedCounts,
        stats: StatsCollector,
    ) -> None:
        self.max_per_family = max_per_family
        self.max_variants = max_variants
        self.counts = counts
        self.stats = stats
        self._logged: set[str] = set()

    def admit(self, request: Request) -> bool:
        """Mark a trap request with its family (``TRAP_META``) and take one of the family's
        slots; False when the family is full. A URL with a query that is no trap takes a
        variant slot instead (``VARIANT_META``)."""
        name = family(request.url)
        reason = trap_pattern(request.url)
        request.meta.pop(VARIANT_META, None)  # a redirect carries its original's marks
        if reason is None and "?" in name:
            if self.counts.take_variant(name, self.max_variants):
                request.meta[VARIANT_META] = name
            else:
                reason = "query_explosion"
        if reason is None:
            request.meta.pop(TRAP_META, None)
            return True
        request.meta[TRAP_META] = name
        if self.counts.take(name, self.max_per_family):
            return True
        self.stats.inc_value("focused/trap/dropped")
        if name not in self._logged:
            self._logged.add(name)
            logger.info(
                "Trap family %s (%s): %s queued, the limit (TRAP_MAX_PER_FAMILY);"
                " dropping the rest",
                name,
                reason,
                counted(self.counts.queued_count(name), "request"),
            )
        return False

    def count(self, request: Request) -> None:
        """``request`` (admitted) joined the frontier: its slot is used for good."""
        request.meta.pop(VARIANT_META, None)
        if request.meta.get(TRAP_META) is not None:
            self.stats.inc_value("focused/trap/penalised")

    def release(self, request: Request) -> None:
        """``request`` (admitted) was not queued: its slot goes back to its family."""
        variant_of = request.meta.pop(VARIANT_META, None)
        if variant_of is not None:
            self.counts.give_back_variant(variant_of)
        name = request.meta.get(TRAP_META)
        if name is not None:
            self.counts.give_back(name)

    def close(self) -> None:
        self.counts.close()
