"""Crash-safe resume: after ``kill -9`` a JOBDIR crawl continues and loses nothing.

What a crash can cut off, and where it is kept instead:

- **The frontier** (``schedulers.base.SqliteFrontier``): every change is committed at once.
- **Requests in flight**: ``FocusedScheduler`` records each request it hands to the downloader
  in the frontier file's ``inflight`` table, in the transaction that pops it, and moves it to
  ``finished`` once its outcome is safe: its page left the item pipelines (``item_scraped``,
  ``item_dropped``), its response held no page, its download failed (``request_finished``,
  sent by ``FinishMiddleware`` and the spider's errback), the callback raised
  (``spider_error``), or a redirect or retry of it was queued. On restart the requests still
  in flight are queued again: only they can be fetched twice.
- **Pages** (``pipelines.storage``): an item is written before it leaves the pipeline.
  ``FinishMiddleware`` hands a page's links to the scheduler before the page item, so a stored
  page always has its links queued.
- **The seen set**: ``FrontierDupeFilter`` keeps no ``requests.seen`` file (Scrapy's is
  buffered, so a crash loses its tail); the seen fingerprints are those of the frontier file
  (queued, in flight, finished), which change in the same transactions as the queue.
- **Trap-family counts** (``focused.traps.SqliteCounts``): ``JOBDIR/trapfamilies.sqlite3``,
  every change committed at once.
- **Counters** in ``spider.state`` (Scrapy saves it only on a clean close): ``recover_state``
  takes fetch order, relevant pages, canonical URLs, per-host counts and (at least) the page
  budget's count back from the store.

Stats: ``focused/resume/recovered_inflight`` (requests queued again after a crash).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.dupefilters import RFPDupeFilter

from focused.items import PageItem

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

# Signal: request_finished(request). The request's outcome is safe; it need not be fetched
# again after a crash.
request_finished = object()


def connect_request_done(crawler: Crawler, done: Callable[[Request | None], None]) -> None:
    """Call ``done(request)`` when a request's outcome is safe: its page left the item pipelines
    (``item_scraped``, ``item_dropped``; ``FinishMiddleware`` hands the page's links to the
    scheduler before the page), its callback raised (``spider_error``), or ``request_finished``
    (a response without a page, a failed download)."""

    def response_done(response: Response | None = None, **kwargs: Any) -> None:
        done(getattr(response, "request", None))

    for signal in (signals.item_scraped, signals.item_dropped, signals.spider_error):
        # The closure would be collected at once if held weakly.
        crawler.signals.connect(response_done, signal=signal, weak=False)
    crawler.signals.connect(done, signal=request_finished)


# Request meta: the fingerprint under which a popped request is recorded as in flight.
INFLIGHT = "focused_jobdir_inflight"  # not schedulers.redis_frontier.INFLIGHT_META


class FrontierDupeFilter(RFPDupeFilter):
    """Scrapy's dupefilter without its ``requests.seen`` file: under JOBDIR the scheduler fills
    it from the frontier file (``remember``), which a crash cannot leave behind the queue."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierDupeFilter:
        return cls(
            None,
            crawler.settings.getbool("DUPEFILTER_DEBUG"),
            fingerprinter=crawler.request_fingerprinter,
        )

    def remember(self, fingerprints: Iterable[bytes]) -> None:
        self._fingerprints.update(fingerprints)


class FinishMiddleware:
    """Spider middleware (order 15: only ``focused.distributed.FrontierAck``, which passes the
    output through unchanged, is closer to the engine).

    It yields a page's link requests before its page item, so that the links are queued before
    the page is stored, and sends ``request_finished`` for a response that produced no page
    (not HTML, already fetched): nothing of it waits in the pipelines.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FinishMiddleware:
        return cls(crawler)

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterable[Any]:
        yield from self._order(response, list(result))

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        for output in self._order(response, [o async for o in result]):
            yield output

    def _order(self, response: Response, outputs: list[Any]) -> list[Any]:
        pages = [o for o in outputs if isinstance(o, PageItem)]
        if not pages:
            self.crawler.signals.send_catch_log(request_finished, request=response.request)
            return outputs
        return [o for o in outputs if not isinstance(o, PageItem)] + pages


def recover_state(state: dict[str, Any], pages: Iterable[dict[str, Any]]) -> None:
    """Bring the counters of ``spider.state`` up to what the stored pages show.

    After a crash ``spider.state`` is the one saved at the last clean close (or empty), behind
    the store. Counters only grow, so the larger value wins: fetch order (``pages``) continues
    after the highest stored, ``relevant`` is at least the relevant pages stored, and each host
    has at least its stored pages (``MAX_PAGES_PER_HOST``). The canonical URLs taken as fetched
    (``focused.dedup``) are exactly those stored: a page seen but never stored (its write
    failed) must not be taken for a duplicate of itself when its request is fetched again.
    """
    last = relevant = 0
    urls: set[str] = set()
    hosts: Counter[str] = Counter()
    for page in pages:
        last = max(last, page["fetch_order"] or 0)
        relevant += bool(page["is_relevant"])
        urls.add(page["url"])
        if page["duplicate_of"]:
            urls.add(page["duplicate_of"])
        hosts[urlsplit(page["url"]).hostname or ""] += 1
    state["pages"] = max(state.get("pages", 0), last)
    # The page budget's count (focused.stopping.PageBudget): each page fetched was a response.
    state["responses"] = max(state.get("responses", 0), state["pages"])
    state["relevant"] = max(state.get("relevant", 0), relevant)
    state["fetched_urls"] = urls
    host_pages = state.setdefault("host_pages", Counter())
    for host, count in hosts.items():
        host_pages[host] = max(host_pages[host], count)
