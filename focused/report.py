"""What a crawl found, computed from its stored records: the one place these figures are made.

Pure functions over page records (dicts as ``Store.pages`` returns them) and a crawl record;
the ``crawls`` and ``report`` commands print them, ``draw_png`` plots them, and nothing else
recomputes them.

Definitions:
    fetched        pages fetched by the crawl: the crawl record's ``pages`` once it has ended,
                   else the highest ``fetch_order`` stored (a running crawl)
    harvest rate   relevant pages / pages fetched (Pant, Srinivasan & Menczer, "Crawling the
                   Web", 2004)
    harvest curve  after each page in fetch order, the relevant pages fetched so far over the
                   pages fetched so far; the deciles read it after 10%, 20%, ... 100% of the
                   pages fetched
"""

from __future__ import annotations

import bisect
import math
import re
import warnings
from array import array
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from itertools import accumulate, pairwise
from typing import TYPE_CHECKING, Any

from focused.robotsmeta import is_noindex
from focused.storage import PageCounts, claim_gone, is_gone, process_gone, rescored, stored_time

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Mapping, Sequence

# The page fields the figures need: the report reads only these, never the page texts.
REPORT_FIELDS = (
    *("level", "relevance", "is_relevant", "fetch_order", "status", "robots", "duplicate_of"),
)
TOP_FIELDS = (
    *("url", "title", "level", "tfidf", "lsi", "relevance", "is_relevant", "fetch_order"),
    *("status", "robots", "duplicate_of"),
)
TOP_PAGES = 10
DECILES = 10
# The slices of its axis of pages fetched the plot's harvest curve keeps at most 4 points of
# each of (``plotted_curve``): more than the ~500 pixels of the axis.
CURVE_BUCKETS = 1000
PNG_SIZE_INCHES = (11.0, 4.5)
PNG_DPI = 100  # 1100 x 450 pixels
# Heartbeats (FOCUSED_HEARTBEAT_INTERVAL) a running crawl may miss before it is shown as stopped:
# one late beat (a store slow to answer, the reactor busy) is no dead crawl.
STALE_BEATS = 3


@dataclass(frozen=True)
class Totals:
    fetched: int
    relevant: int

    @property
    def harvest_rate(self) -> float | None:
        return self.relevant / self.fetched if self.fetched else None


@dataclass(frozen=True)
class LevelRow:
    level: int | None  # None: pages whose level is unknown
    pages: int
    relevant: int
    mean_relevance: float | None  # over the scored pages of the level

    @property
    def percent_relevant(self) -> float:
        return 100.0 * self.relevant / self.pages


@dataclass(frozen=True)
class HarvestPoint:
    fetched: int  # pages fetched so far
    relevant: int  # relevant pages among them

    @property
    def harvest_rate(self) -> float:
        return self.relevant / self.fetched


@dataclass(frozen=True)
class Report:
    crawl: dict[str, Any]
    totals: Totals
    stored: int  # pages stored: fewer than fetched with STORE_MIN_RELEVANCE
    # Relevant pages fetched but not stored (below STORE_MIN_RELEVANCE, or unstored): the
    # totals count them, the curve and deciles (stored pages only) cannot.
    relevant_not_stored: int
    # Stored pages relevant now less those the crawl found relevant (negative: fewer now): a
    # recrawl's --model moved their verdicts, and the totals, the crawl's measure, stay as they
    # were while the levels, curve and deciles read the pages' verdicts now. As the crawl
    # record counts them (``rescored``); guessed for a record without the counts.
    relevant_rescored: int
    gone: int  # stored pages no longer there when last fetched (a recrawl's 404 or 410)
    noindex: int  # stored pages kept without their text: they asked not to be indexed
    duplicates: int  # stored pages kept without their text: copies of others (duplicate_of)
    levels: list[LevelRow]
    curve: list[HarvestPoint]  # the harvest curve as the plot draws it (``plotted_curve``)
    deciles: list[HarvestPoint]
    top: list[dict[str, Any]]


def needs_pages_for_totals(crawl: Mapping[str, Any]) -> bool:
    return crawl.get("pages") is None or crawl.get("relevant") is None


def totals(crawl: Mapping[str, Any], counts: PageCounts | None = None) -> Totals:
    """Pages fetched and relevant as the crawl record has them; while the record has none yet
    (a running crawl, or one killed before it could finish; or a count it holds is unknown),
    counted from ``counts``, what its stored pages add up to (``Store.page_counts``), their
    relevant pages less those a recrawl's --model made so (``rescored``), as a run going on
    with the crawl counts them (``focused.resume.recover_state``)."""
    if not needs_pages_for_totals(crawl):
        return Totals(crawl["pages"], crawl["relevant"])
    counts = counts or PageCounts()
    relevant = max(0, counts.relevant - (rescored(crawl) or 0))
    return Totals(max(counts.last_fetch_order, counts.stored), relevant)


def level_rows(counts: Mapping[int | None, Sequence[float]]) -> list[LevelRow]:
    """Pages, relevant pages and mean relevance at each level (depth from the seeds), pages of
    an unknown level last, from ``counts``: level -> [pages, relevant, sum of scores, pages
    scored] (``_count_level``)."""
    return [
        LevelRow(level, int(n), int(relevant), total / scored if scored else None)
        for level, (n, relevant, total, scored) in sorted(
            counts.items(), key=lambda item: (item[0] is None, item[0] or 0)
        )
    ]


def _count_level(counts: dict[int | None, list[float]], page: Mapping[str, Any]) -> None:
    row = counts.setdefault(page["level"], [0, 0, 0.0, 0])
    row[0] += 1
    row[1] += bool(page["is_relevant"])
    if page["relevance"] is not None:
        row[2] += page["relevance"]
        row[3] += 1


@dataclass(frozen=True)
class HarvestCurve:
    """The harvest curve, one point per stored page in fetch order, as two arrays of numbers
    (a point object a page held 32 MB for 200,000 pages): ``fetched[i]``, the page's fetch
    order, and ``relevant[i]``, the relevant pages up to it. ``fetch_order`` counts every page
    fetched, so pages fetched but not stored (``STORE_MIN_RELEVANCE``) still count as fetched.
    A page whose fetch order is unknown (a record restored without it) has no place on it."""

    fetched: array[float]  # floats: a fetch order edited by hand may be past 64 bits
    relevant: array[int]

    @classmethod
    def of(cls, fetch_orders: array[float], relevant: bytearray) -> HarvestCurve:
        """The curve of the pages of these fetch orders and verdicts (1: relevant), in any
        order."""
        if any(later < earlier for earlier, later in pairwise(fetch_orders)):
            order = sorted(range(len(fetch_orders)), key=fetch_orders.__getitem__)
            fetch_orders = array("d", (fetch_orders[i] for i in order))
            relevant = bytearray(relevant[i] for i in order)
        return cls(fetch_orders, array("q", accumulate(relevant)))

    def point(self, index: int) -> HarvestPoint:
        return HarvestPoint(int(self.fetched[index]), self.relevant[index])


def harvest_deciles(curve: HarvestCurve, fetched: int) -> list[HarvestPoint]:
    """The curve read after 10%, 20%, ... 100% of ``fetched`` pages (rounded up to a page)."""
    if not fetched:
        return []
    deciles = []
    for decile in range(1, DECILES + 1):
        upto = math.ceil(decile * fetched / DECILES)
        last = bisect.bisect_right(curve.fetched, upto) - 1
        deciles.append(HarvestPoint(upto, curve.relevant[last] if last >= 0 else 0))
    return deciles


def plotted_curve(curve: HarvestCurve, fetched: int) -> list[HarvestPoint]:
    """The points of the curve the plot draws: all of a curve of at most 4 x
    ``CURVE_BUCKETS``; of a longer one, in each of ``CURVE_BUCKETS`` equal slices of the plot's
    axis of pages fetched (0 to ``fetched``), its first and last points and those of its least
    and greatest harvest rate. A slice is narrower than a pixel of the plot, and the line
    through these points covers in it the same rates as the line through all of them, and
    leaves it where that one does: the same curve, drawn from a few thousand points where
    there was one a page."""
    count = len(curve.fetched)
    if count <= 4 * CURVE_BUCKETS:
        return [curve.point(index) for index in range(count)]
    span = max(fetched, curve.fetched[-1], 1)

    def rate(index: int) -> float:
        return curve.relevant[index] / curve.fetched[index] if curve.fetched[index] else 0.0

    kept: list[int] = []
    first = least = greatest = 0
    bucket = None
    for index in range(count + 1):
        here = (
            min(int(curve.fetched[index] * CURVE_BUCKETS / span), CURVE_BUCKETS - 1)
            if index < count
            else None
        )
        if here != bucket:
            if bucket is not None:
                kept += sorted({first, least, greatest, index - 1})
            first = least = greatest = index
            bucket = here
        elif rate(index) < rate(least):
            least = index
        elif rate(index) > rate(greatest):
            greatest = index
    return [curve.point(index) for index in kept]


def build_report(
    crawl: Mapping[str, Any],
    pages: Iterable[Mapping[str, Any]],
    top: Sequence[Mapping[str, Any]],
) -> Report:
    """``pages``: every stored page with at least ``REPORT_FIELDS``, best in fetch order (as
    ``Store.iter_pages(order="fetch_order")`` gives them), read once as they come: what the
    report holds of them is counts and its curve (``HarvestCurve``), where holding the
    records took 170 MB for 200,000 pages; ``top``: the best pages, as ``Store.pages(crawl_id,
    limit=TOP_PAGES)`` orders them."""
    counts = PageCounts()
    levels: dict[int | None, list[float]] = {}
    fetch_orders, verdicts = array("d"), bytearray()
    gone = noindex = duplicates = 0
    for page in pages:
        counts.add(page)
        _count_level(levels, page)
        gone += is_gone(page)
        noindex += is_noindex(page)
        duplicates += is_duplicate(page)
        if page["fetch_order"] is not None:
            fetch_orders.append(page["fetch_order"])
            verdicts.append(bool(page["is_relevant"]))
    crawl_totals = totals(crawl, counts)
    curve = HarvestCurve.of(fetch_orders, verdicts)
    moved = rescored(crawl)
    if moved is not None:
        # The crawl's relevant pages it stored are those relevant now, less the verdicts its
        # recrawls moved: the rest it did not store.
        not_stored = max(0, crawl_totals.relevant - (counts.relevant - moved))
    else:
        # A record without the counts: a difference alone can name pages that were all stored
        # (their verdicts moved) as well as pages not stored. Counted as these first, at most
        # the pages not stored, and the rest as moved.
        not_stored = max(
            0, min(crawl_totals.relevant - counts.relevant, crawl_totals.fetched - counts.stored)
        )
        moved = counts.relevant - (crawl_totals.relevant - not_stored)
    return Report(
        crawl=dict(crawl),
        totals=crawl_totals,
        stored=counts.stored,
        relevant_not_stored=not_stored,
        relevant_rescored=moved,
        gone=gone,
        noindex=noindex,
        duplicates=duplicates,
        levels=level_rows(levels),
        curve=plotted_curve(curve, crawl_totals.fetched),
        deciles=harvest_deciles(curve, crawl_totals.fetched),
        top=[dict(page) for page in top],
    )


def report_json(report: Report) -> dict[str, Any]:
    """The report as plain JSON data (the per-page curve left out: the deciles sum it up)."""
    return {
        "crawl": crawl_json(report.crawl),
        "totals": {
            **asdict(report.totals),
            "stored": report.stored,
            "relevant_not_stored": report.relevant_not_stored,
            "relevant_rescored": report.relevant_rescored,
            "gone": report.gone,
            "noindex": report.noindex,
            "duplicates": report.duplicates,
            "harvest_rate": report.totals.harvest_rate,
        },
        "levels": [
            {**asdict(row), "percent_relevant": row.percent_relevant} for row in report.levels
        ],
        "harvest_deciles": [
            {"percent": 100 * n // DECILES, **asdict(point), "harvest_rate": point.harvest_rate}
            for n, point in enumerate(report.deciles, 1)
        ],
        "top": [page_json(page) for page in report.top],
    }


def page_json(page: Mapping[str, Any]) -> dict[str, Any]:
    """A page record (with ``status``, ``robots`` and ``duplicate_of``) as ``--json`` prints it,
    with ``gone``, ``noindex`` and ``duplicate``, as ``describe_page_status`` marks it, so that a
    script need not repeat the rules."""
    marks = {"gone": is_gone(page), "noindex": is_noindex(page), "duplicate": is_duplicate(page)}
    return {**page, **marks}


def is_duplicate(page: Mapping[str, Any]) -> bool:
    """Whether a page record is a copy of another page, stored without text (``focused.dedup``)."""
    return bool(page.get("duplicate_of"))


def describe_page_status(page: Mapping[str, Any]) -> str:
    """A page's HTTP status (``-`` unknown), then ``gone`` when a recrawl found it no longer
    there (404, 410), ``noindex`` when it is stored without its text as it asked, ``duplicate``
    when it is stored without its text as a copy of another page: ``200``, ``404 gone``, ``200
    noindex``, ``200 duplicate``. The pages a listing cannot give the reader to read stand out."""
    described = ["-" if page.get("status") is None else str(page["status"])]
    if is_gone(page):
        described.append("gone")
    if is_noindex(page):
        described.append("noindex")
    if is_duplicate(page):
        described.append("duplicate")
    return " ".join(described)


def describe_time(iso: str | None) -> str:
    """A stored time in UTC to the second, e.g. ``2024-05-01 10:00:00 UTC``; ``-`` when unknown.
    A time written with another offset (by hand, or by another program) is told in UTC: its
    first 19 characters were shown as UTC as they were."""
    time = stored_time(iso)
    return time.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if time else "-"


def describe_query(crawl: Mapping[str, Any]) -> str:
    """The crawl's query, and the topic file it added (``topic_file PATH``); ``-`` for neither.
    A crawl of a topic file alone has no query."""
    parts = [
        crawl.get("query") or "",
        f"topic_file {crawl['topic_file']}" if crawl.get("topic_file") else "",
    ]
    return " + ".join(part for part in parts if part) or "-"


def describe_params(params: Mapping[str, Any] | None) -> str:
    """``max_depth=5, ...``; empty for a strategy without parameters."""
    return ", ".join(f"{name}={value}" for name, value in (params or {}).items())


def is_stale(crawl: Mapping[str, Any], now: datetime) -> bool:
    """Whether a crawl recorded ``running`` has not refreshed its ``seen_at`` for more than
    ``STALE_BEATS`` of its heartbeat intervals, or its process (``run_by``, one of this
    machine) is gone: it was killed (kill -9, a power cut, the OOM killer) before it could
    record how it ended. A record without them (written before there were heartbeats) cannot
    tell, and is taken at its word."""
    beats = _beats_since_seen(crawl, now)
    return beats is not None and (beats > STALE_BEATS or process_gone(crawl.get("run_by")))


def is_live(crawl: Mapping[str, Any], now: datetime) -> bool:
    """Whether a crawl recorded ``running`` has refreshed its ``seen_at`` within ``STALE_BEATS``
    of its heartbeat intervals, and its process is not known to be gone: a process of it is
    crawling. A record without them cannot tell (nor say it is not a crawl killed before there
    were heartbeats)."""
    return _beats_since_seen(crawl, now) is not None and not is_stale(crawl, now)


def recrawl_is_live(crawl: Mapping[str, Any], now: datetime) -> bool:
    """Whether a recrawl of the crawl is under way: its heartbeat (``recrawl_seen_at``, cleared
    as it ends) is within ``STALE_BEATS`` of its intervals, and its process is not known to be
    gone (``claim_gone``: one of this machine). A recrawl killed outright elsewhere leaves it,
    stale after as long as a crawl's."""
    beats = _beats_since(crawl.get("recrawl_seen_at"), crawl.get("recrawl_heartbeat_interval"), now)
    return beats is not None and beats <= STALE_BEATS and not claim_gone(crawl.get("recrawl_claim"))


def running_elsewhere(
    crawl_id: str, live: Mapping[str, Any] | None = None, then: str = "or give another crawl_id"
) -> str:
    """Why a run or a recrawl of the crawl is refused beside another process of it: one that
    holds the crawl's lock (``focused.jobchecks.lock_crawl``), or whose record ``live`` is
    ``running`` with a fresh heartbeat (``is_live``). ``then`` says what to do: by default,
    what a refused run does."""
    seen_at = live.get("seen_at") if live is not None else None
    seen = f" (last seen {describe_time(seen_at)})" if seen_at else ""
    killed = _if_killed(seen_at, live.get("heartbeat_interval")) if live is not None else ""
    return (
        f"crawl {crawl_id} is running in another process{seen}: let it end (Ctrl-C pauses it),"
        f" {then}{killed}"
    )


def being_recrawled(crawl: Mapping[str, Any], then: str = "then run the crawl") -> str:
    """Why a run or another recrawl of the crawl is refused while a recrawl of it is under way
    (``recrawl_is_live``): both would fetch the pages it fetches, each visit counted twice.
    ``then`` says what to do once it has ended: by default, what a refused run does."""
    seen_at = crawl.get("recrawl_seen_at")
    killed = _if_killed(seen_at, crawl.get("recrawl_heartbeat_interval"))
    return (
        f"crawl {crawl['crawl_id']} is being recrawled in another process (last seen"
        f" {describe_time(seen_at)}): let that recrawl end, {then}{killed}"
    )


def _if_killed(seen_at: str | None, interval: float | None) -> str:
    """What a refusal by a heartbeat adds for a process killed outright (kill -9, a machine
    gone), which no one can let end: when its heartbeat goes stale, and the refusal with it.
    Nothing when the record cannot tell."""
    seen = stored_time(seen_at)
    if seen is None or not isinstance(interval, int | float) or not 0 < interval < math.inf:
        return ""
    try:
        stale = seen + timedelta(seconds=STALE_BEATS * interval)
    except OverflowError:  # a record of before FOCUSED_HEARTBEAT_INTERVAL's bound: never stale
        return ""
    return f"; if it was killed, it counts as stopped from {describe_time(stale.isoformat())}"


def _beats_since_seen(crawl: Mapping[str, Any], now: datetime) -> float | None:
    """The heartbeat intervals since a ``running`` crawl's ``seen_at``; None when it is not
    running or its record cannot tell."""
    if crawl.get("status") != "running":
        return None
    return _beats_since(crawl.get("seen_at"), crawl.get("heartbeat_interval"), now)


def _beats_since(seen_at: str | None, interval: float | None, now: datetime) -> float | None:
    """The heartbeat intervals from ``seen_at`` to now; None when they cannot be told."""
    seen = stored_time(seen_at)
    return None if seen is None or not interval else (now - seen).total_seconds() / interval


def describe_status(crawl: Mapping[str, Any], now: datetime | None = None) -> str:
    """``finished``, ``running``, or ``interrupted (reason)``: why it stopped when it is not
    the usual end. A ``running`` crawl whose heartbeat is stale (``is_stale``) is
    ``stopped? (last seen TIME)``: resuming its JOBDIR continues it. ``, recrawling`` follows
    while a recrawl of it is under way (``recrawl_is_live``)."""
    now = now or datetime.now(UTC)
    if is_stale(crawl, now):
        status = f"stopped? (last seen {describe_time(crawl['seen_at'])})"
    else:
        status = crawl.get("status") or "unknown"
        reason = crawl.get("finish_reason")
        status = f"{status} ({reason})" if status == "interrupted" and reason else status
    return f"{status}, recrawling" if recrawl_is_live(crawl, now) else status


def crawl_json(crawl: Mapping[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """The crawl record as stored, with ``stale``: whether ``describe_status`` shows it as
    ``stopped?``, and ``recrawling``: whether a recrawl of it is under way
    (``recrawl_is_live``), so that a script reading ``--json`` need not repeat the rules."""
    now = now or datetime.now(UTC)
    return {**crawl, "stale": is_stale(crawl, now), "recrawling": recrawl_is_live(crawl, now)}


# matplotlib's warning for a character its font cannot draw.
_MISSING_GLYPH = re.compile(r"Glyph (\d+) .*missing from font")


def draw_png(report: Report, path: str | os.PathLike[str]) -> str:
    """The harvest-rate curve and the relevant pages per level, side by side, in a PNG file of
    ``PNG_SIZE_INCHES`` x ``PNG_DPI`` pixels. Returns the title's characters that its font has
    no glyph for (drawn as boxes: a Chinese crawl id on a machine without a CJK font), which
    matplotlib would warn of twice each, with its source line."""
    import matplotlib  # here, not at the top: only --png needs it, and it is slow to import

    matplotlib.use("Agg")
    from matplotlib import pyplot

    crawl = report.crawl
    figure, (harvest, levels) = pyplot.subplots(
        1, 2, figsize=PNG_SIZE_INCHES, dpi=PNG_DPI, layout="constrained"
    )
    try:
        figure.suptitle(
            f'crawl {crawl["crawl_id"]}: {crawl.get("strategy")}, query "{describe_query(crawl)}"'
            f" ({describe_status(crawl)})",
            # A query is text: "$5 to $10" is no formula, and "$^$" failed as one.
            parse_math=False,
        )
        harvest.plot(
            [point.fetched for point in report.curve],
            [point.harvest_rate for point in report.curve],
            color="tab:blue",
            label="after each page",
        )
        harvest.plot(
            [point.fetched for point in report.deciles],
            [point.harvest_rate for point in report.deciles],
            "o",
            color="tab:orange",
            label="deciles",
        )
        harvest.set(
            title="harvest rate",
            xlabel="pages fetched",
            ylabel="relevant / fetched",
            ylim=(0, 1.05),
            xlim=(0, max(report.totals.fetched, 1)),
        )
        harvest.grid(alpha=0.3)
        harvest.legend(loc="upper right")

        known = [row for row in report.levels if row.level is not None]  # an axis has no "-"
        numbers = [row.level for row in known]
        levels.bar(numbers, [row.pages for row in known], color="0.8", label="pages")
        levels.bar(numbers, [row.relevant for row in known], color="tab:green", label="relevant")
        levels.set(title="pages per level", xlabel="level (links from the seeds)", ylabel="pages")
        levels.set_xticks(numbers)
        levels.grid(axis="y", alpha=0.3)
        levels.legend(loc="upper right")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            figure.savefig(path, format="png")
    finally:
        pyplot.close(figure)
    missing = []
    for warning in caught:
        glyph = _MISSING_GLYPH.match(str(warning.message))
        if glyph is None:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
        else:
            missing.append(chr(int(glyph.group(1))))
    return "".join(dict.fromkeys(missing))
