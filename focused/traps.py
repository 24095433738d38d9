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
    (``/2026/11/30/a-title``) is not one;
  - ``session_id``: a query value that looks like a random token (16 or more letters and
    digits, mixed).

- ``TrapFamilies`` adds the query-parameter explosion (more than ``TRAP_QUERY_VARIANTS`` URLs
  of one path with one parameter set) and the counts: ``FocusedScheduler`` marks a trap
  request with ``TRAP_META`` (the frontiers queue it behind every other request) and drops it
  once its family has had ``TRAP_MAX_PER_FAMILY`` requests queued.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

TRAP_META = "trap_family"  # meta key: the family of a request queued at the back

_DIGITS = re.compile(r"\d+")
_NUMERIC = re.compile(r"[\W_]*\d[\d\W_]*")  # digits and separators: 2026, 11, 2026-11-30
_YEAR = r"(?:19|20)\d\d"
# Month and day are not checked: an endless calendar may well count on to month 13 or day 0.
_MONTH = _DAY = r"\d\d?"
_SEP = r"[-_./]"
# A year and month (and day) with separators closing the path (a trailing slash or a file
# extension allowed): /cal/2026/11/30, /archive/2026-11/. A year alone could be any number.
_DATE_PATH_TAIL = re.compile(f"/{_YEAR}{_SEP}{_MONTH}(?:{_SEP}{_DAY})?(?:\\.\\w+)?/?$", re.ASCII)
# As a query value: with separators, or a valid compact YYYYMMDD (shorter numbers are ids).
_DATE_VALUE = re.compile(
    f"{_YEAR}(?:{_SEP}{_MONTH}(?:{_SEP}{_DAY})?|(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\\d|3[01]))",
    re.ASCII,
)
# A random id: 16+ letters and digits in one run (a slug has hyphens), or a UUID.
_TOKEN = re.compile(r"[A-Za-z0-9]{16,}|[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
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
    if _DATE_PATH_TAIL.search(parts.path):
        return "calendar"
    values = [value for _, value in parse_qsl(parts.query, keep_blank_values=True)]
    if any(_DATE_VALUE.fullmatch(value) for value in values):
        return "calendar"
    if any(_is_token(value) for value in values):
        return "session_id"
    return None


def _is_token(value: str) -> bool:
    """A random-looking id: long, and letters mixed with digits."""
    return (
        bool(_TOKEN.fullmatch(value))
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


class TrapFamilies:
    """Per-family counts, and the decision on each request the scheduler is given.

    ``counts`` is kept in ``spider.state`` (saved on a JOBDIR pause): ``variants`` counts the
    queued URLs of each family with a query (the explosion test), ``queued`` the queued trap
    requests of each trap family (the cap).
    """

    def __init__(
        self, max_per_family: int, max_variants: int, counts: dict, stats: StatsCollector
    ) -> None:
        self.max_per_family = max_per_family
        self.max_variants = max_variants
        self.variants: Counter[str] = counts.setdefault("variants", Counter())
        self.queued: Counter[str] = counts.setdefault("queued", Counter())
        self.stats = stats
        self._logged: set[str] = set()

    def admit(self, request: Request) -> bool:
        """Mark a trap request with its family (``TRAP_META``); False when the family is full."""
        name = family(request.url)
        reason = trap_pattern(request.url)
        if reason is None and "?" in name and self.variants[name] >= self.max_variants:
            reason = "query_explosion"
        if reason is None:
            request.meta.pop(TRAP_META, None)
            return True
        request.meta[TRAP_META] = name
        if self.queued[name] < self.max_per_family:
            return True
        self.stats.inc_value("focused/trap/dropped")
        if name not in self._logged:
            self._logged.add(name)
            logger.info(
                "Trap family %s (%s): %d requests queued, the limit (TRAP_MAX_PER_FAMILY);"
                " dropping the rest",
                name,
                reason,
                self.queued[name],
            )
        return False

    def count(self, request: Request) -> None:
        """``request`` (admitted) joined the frontier."""
        name = request.meta.get(TRAP_META)
        if name is not None:
            self.queued[name] += 1
            self.stats.inc_value("focused/trap/penalised")
        elif urlsplit(request.url).query:
            self.variants[family(request.url)] += 1
