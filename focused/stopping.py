"""Stop criteria of the focused-crawling literature, on top of Scrapy's page budget.

Settings (each off by default):
    CLOSESPIDER_RELEVANT  stop once the crawl has fetched this many relevant pages; the count is
                          the crawl's (``focused/relevant``), so it goes on across a JOBDIR
                          resume; 0 = off (default 0). Close reason ``closespider_relevant``.
    DRIFT_WINDOW          topic-drift stop: the number N of most recently fetched pages whose
                          harvest rate is watched; 0 = off (default 0)
    DRIFT_MIN_HARVEST     stop when the harvest rate of the last DRIFT_WINDOW pages falls below
                          this (default 0.1). Close reason ``closespider_drift``. The window is
                          the crawl's, in ``spider.state``: a JOBDIR pause saves it, and its
                          verdicts are written through to ``JOBDIR/counters.sqlite3``
                          (``focused.resume.CrawlCounters``), from which it is rebuilt after a
                          crash; from the pages stored only for the pages the file lacks (at a
                          resume that turns it on or widens it), saying so where the store
                          lacks pages (STORE_MIN_RELEVANCE). After a crash each page is in it
                          once: a page not stored whose request the crash left in flight, its
                          verdict written, is fetched and scored again, and is out of the
                          window until then (at once where the page budget counted its
                          response; else in its place in the strategy's order); in a shared
                          crawl, each
                          process watches its own pages, and the first to see the crawl drift
                          stops them all (within SHARED_DRIFT_LOOK seconds).

The page budget is Scrapy's CLOSESPIDER_PAGECOUNT, counted by ``PageBudget`` over the whole
crawl rather than per run: the responses to the crawl's requests (robots.txt not counted) are
``spider.state["responses"]``, which a JOBDIR pause saves and which is also written through to
``JOBDIR/counters.sqlite3`` as it grows (``focused.resume.CrawlCounters``), so a crawl resumed
after a pause or a crash stops when the crawl's total reaches the budget. A crawl shared
through Redis counts the budget in its atomic pops instead (``focused.distributed``).
Threshold crawl-and-store is STORE_MIN_RELEVANCE (``pipelines.relevance``). A crawl stopped by
any of them is recorded as ``finished``.

Pages are counted as they are scored (``page_scored``, sent by ``focused.middlewares``), before
their links are queued: counted as their items left the pipelines, a slow store kept the crawl
fetching (3 relevant pages asked, 71 fetched, with 0.3 s a page to store). The requests
already under way when one of them stops the crawl still complete, and no other starts
(``close_spider_now``); one still waiting for its host's delay or pause is not sent
(``focused.downloader``). The page budget has none under way at its stop: the scheduler starts
no request that the ones downloading could make beyond it
(``focused.scheduler.FocusedScheduler._budget_under_way``).

A JOBDIR pause loses no count: Scrapy's engine closes the spider only once every request under
way has its response (``response_received``) and its items have left the pipelines, and only
then sends ``spider_closed``, on which ``SpiderState`` saves ``spider.state``. The responses
that arrive during the close are counted, saved and stored like the others
(``tests/test_resume.py``). After ``kill -9`` no ``spider.state`` is saved: the count
comes back as the largest of the written-through count, the state saved at the last clean close
and the fetch order of the last page stored (``focused.resume.recover_state``). Every response
counted before the kill is in it, the ones that gave no page (an HTTP error, not HTML) too, so
the crawl still stops at its budget (``tests/test_crash_counts.py``). A response counted whose
page was not yet stored at the kill is fetched again but not counted again: its request is
marked in the frontier file's in-flight table as it is counted (``response_counted``), and
comes back from there marked ``RESPONSE_COUNTED``, to be fetched again before any other
request (``FocusedScheduler.refetches``): the budget paid for its page. A crawl resumed with
its budget spent closes once the last of them has started (``counted_refetched``). Only a kill
between the count's write and the mark's can count one response twice, and stop the crawl one
page early.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.extensions.closespider import CloseSpider
from scrapy.utils.asyncio import call_later
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import task
from twisted.internet.defer import Deferred

from focused.engine import engine_scheduler
from focused.errors import counted
from focused.resume import (
    DRIFT_STATE,
    add_to_counter,
    counted_refetched,
    crawl_counter,
    drift_verdict,
    page_scored,
    response_counted,
)
from schedulers.base import RESPONSE_COUNTED

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

# The close reason of a crawl that could fetch none of its seeds (the spider closes it so once
# it has nothing left to fetch): the ``crawl`` command exits with status 1.
NO_SEED_FETCHED = "seeds_unreachable"
# The finish reason recorded for a crawl stopped by a second Ctrl-C (or SIGTERM): Scrapy then
# stops the reactor without closing the spider, so no close reason exists
# (``pipelines.storage``); the ``crawl`` command exits with status 1.
FORCED_SHUTDOWN = "forced_shutdown"
# The close reason of a crawl shared through Redis that lost its Redis (focused.distributed);
# the ``crawl`` command exits with status 1, so that a supervisor starts it again.
FRONTIER_UNREACHABLE = "frontier_unreachable"
# The close reason of a crawl whose WARC file (WARC_DIR) could not be written (focused.warc): the
# ``crawl`` command exits with status 1. Here, so that the command does not import warcio.
WARC_FAILED = "warc_failed"


# The crawl-wide counter (in Redis) of a shared crawl's processes stopped by topic drift, and
# the seconds between two looks at it.
DRIFTED = "drifted"
SHARED_DRIFT_LOOK = 1.0

# Seconds between two looks at an engine whose engine_started handlers are still running.
ENGINE_START_POLL = 0.05


def stop_once_started(crawler: Crawler, crawl_ended: Callable[[], Any]) -> None:
    """Make a graceful stop asked before the engine runs close the spider once it does.

    Ctrl-C, or Scrapyd's cancel, can come while the spider is still opening (the store, the
    relevance model and the sentence encoder load in ``spider_opened`` handlers, about 0.3 s),
    or while the engine starts (its ``engine_started`` handlers run before it does).
    Scrapy's ``Crawler.stop_async`` then does nothing, and the process stops the reactor under
    the opening spider: the crawl ended as after a second Ctrl-C (``forced_shutdown``, exit
    status 1, resumed as after a crash). Here the stop waits for the engine to start, stops it
    as at any other moment, and completes once the crawl has ended (``crawl_ended``: the crawler
    process's ``join``), also when the spider never got open. The stop the engine asks for as it
    closes a spider that never ran (closed as it opened) is Scrapy's.
    """
    scrapy_stop = crawler.stop_async
    asked = False

    def engine_started() -> None:
        # The engine runs once every engine_started handler is done, on a later turn of the
        # loop when one takes its time (an extension's own start): a stop asked until then
        # is made then, as at any later moment.
        def stop_if_asked() -> None:
            engine = crawler._engine
            if engine is not None and engine._starting and not engine.running:
                call_later(ENGINE_START_POLL, stop_if_asked)
            elif asked:
                deferred_from_coro(scrapy_stop())

        call_later(0, stop_if_asked)

    async def stop_async() -> None:
        nonlocal asked
        engine = crawler._engine  # Scrapy's name for it before the crawl starts
        # An engine without its spider has closed it: the engine asks for the stop itself once
        # a spider closed before it ran (a component's CloseSpider as it opened, such as the
        # storage pipeline's refusal of a crawl being recrawled), and waiting for the crawl to
        # end there waited for itself, the process hung.
        if (
            not crawler.crawling
            or (engine is not None and engine.running)
            or (engine is not None and engine.spider is None)
        ):
            await scrapy_stop()
            return
        asked = True
        ended = crawl_ended()
        await (maybe_deferred_to_future(ended) if isinstance(ended, Deferred) else ended)

    crawler.signals.connect(engine_started, signal=signals.engine_started, weak=False)
    crawler.stop_async = stop_async


def close_spider_now(crawler: Crawler, reason: str) -> Deferred[None]:
    """Close the spider, and start no new request meanwhile.

    The engine begins its close only on a later turn of the event loop (under the asyncio
    reactor the close is a task). Its next-request call, if due in the same turn, would first
    refill the downloader slots that responses freed, and the engine fetches in full whatever
    it has started (seen: 12 pages fetched for a budget of 10 at CONCURRENT_REQUESTS=2).
    Pausing it at once leaves only the requests already under way to finish.
    """
    crawler.engine.pause()
    return deferred_from_coro(crawler.engine.close_spider_async(reason=reason))


class StopCriteria:
    def __init__(self, crawler: Crawler, relevant: int, window: int, min_harvest: float) -> None:
        self.crawler = crawler
        self.relevant = relevant
        self.min_harvest = min_harvest
        self.window: deque[bool] = deque(maxlen=window)
        self._closing: Deferred[None] | None = None
        self._drift_loop: task.LoopingCall | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StopCriteria:
        settings = crawler.settings
        relevant = settings.getint("CLOSESPIDER_RELEVANT")
        window = settings.getint("DRIFT_WINDOW")
        if not relevant and not window:
            raise NotConfigured
        extension = cls(crawler, relevant, window, settings.getfloat("DRIFT_MIN_HARVEST"))
        crawler.signals.connect(extension.page_done, signal=page_scored)
        if relevant:
            crawler.signals.connect(extension.relevant_opened, signal=signals.spider_opened)
        if window:
            crawler.signals.connect(extension.drift_opened, signal=signals.spider_opened)
            crawler.signals.connect(extension.drift_closed, signal=signals.spider_closed)
        return extension

    def relevant_opened(self, spider: Spider) -> None:
        # Later, once every spider_opened handler has run: the state is loaded and recovered.
        call_later(0, self._check_relevant)

    def drift_opened(self, spider: Spider) -> None:
        call_later(0, self._restore_window)
        if getattr(spider, "shared", None) is not None:
            self._drift_loop = task.LoopingCall(self._check_shared_drift)
            self._drift_loop.start(SHARED_DRIFT_LOOK, now=False)

    def drift_closed(self, spider: Spider) -> None:
        if self._drift_loop is not None and self._drift_loop.running:
            self._drift_loop.stop()

    def _check_shared_drift(self) -> None:
        """In a crawl shared by several processes each watches its own pages: the first to see
        the crawl drift stops them all (``DRIFTED``). Stopped alone, it left the others
        fetching until each drifted in turn (46 pages more, the crawl's record marked finished
        under them)."""
        if self._closing is None and crawl_counter(self.crawler.spider, DRIFTED):
            self._close("closespider_drift", "another process of the crawl saw it drift")

    def _restore_window(self) -> None:
        """A resumed crawl watches the same last pages as one never paused: begun empty, the
        window let each resume fetch DRIFT_WINDOW more pages before drift could stop it (a
        crawl that drifted at page 10 went on to page 16 across a pause at page 6)."""
        state = self.crawler.spider.state
        self.window.extend(state.get(DRIFT_STATE, ()))
        state[DRIFT_STATE] = self.window  # saved with spider.state at a pause
        if self._closing is None:
            self._check_drift()
        if getattr(self.crawler.spider, "shared", None) is not None:
            self._check_shared_drift()  # a process joining a crawl that drifted

    def _check_relevant(self) -> None:
        """A crawl resumed from JOBDIR, or a process joining a shared crawl, after the crawl
        has its relevant pages fetches none: counted after each page only, it fetched on until
        one more relevant page came."""
        relevant = crawl_counter(self.crawler.spider, "relevant")
        if relevant >= self.relevant and self._closing is None:
            self._close("closespider_relevant", "%s", counted(relevant, "relevant page"))

    def page_done(self, is_relevant: bool, relevant: int, fetch_order: int) -> None:
        if self._closing is not None:
            return
        if self.relevant and relevant >= self.relevant:
            self._close("closespider_relevant", "%s", counted(relevant, "relevant page"))
            return
        if self.window.maxlen:
            self.window.append(is_relevant)
            self.crawler.signals.send_catch_log(
                drift_verdict, is_relevant=is_relevant, fetch_order=fetch_order
            )
            self._check_drift()

    def _check_drift(self) -> None:
        assert self.window.maxlen is not None
        harvest = sum(self.window) / self.window.maxlen
        if len(self.window) == self.window.maxlen and harvest < self.min_harvest:
            shared = getattr(self.crawler.spider, "shared", None)
            if shared is not None:
                shared.incr(DRIFTED)
            self._close(
                "closespider_drift",
                "harvest rate %.3f over the last %s",
                harvest,
                counted(self.window.maxlen, "page"),
            )

    def _close(self, reason: str, message: str, *args: Any) -> None:
        logger.info("Closing spider (%s): " + message, reason, *args)
        self._closing = close_spider_now(self.crawler, reason)


class PageBudget(CloseSpider):
    """Scrapy's CloseSpider (in its place in EXTENSIONS), with CLOSESPIDER_PAGECOUNT the crawl's
    budget: a crawl resumed from JOBDIR stops when its total, not the run's, reaches it.

    Unlike Scrapy's, the crawl fetches its budget and no more: the scheduler starts no request
    that those downloading could make beyond it (Scrapy's went up to CONCURRENT_REQUESTS - 1
    pages beyond), and no request starts once a limit is reached (``close_spider_now``).
    """

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._closing: Deferred[None] | None = None
        # Scrapy's own count of this run would close at the budget again after every resume.
        self.budget = self.close_on["pagecount"]
        self.close_on["pagecount"] = 0
        if self.budget:
            crawler.signals.connect(self.budget_opened, signal=signals.spider_opened)
            crawler.signals.connect(self.budget_count, signal=signals.response_received)
            crawler.signals.connect(self._check_budget, signal=counted_refetched)

    def _counts(self) -> bool:
        # A shared crawl takes a budget slot with each atomic pop from Redis.
        return getattr(self.crawler.spider, "shared", None) is None

    def budget_opened(self, spider: Spider) -> None:
        # Later, once every spider_opened handler has run: the state is loaded and recovered.
        call_later(0, self._check_budget)

    def _check_budget(self) -> None:
        """Close a crawl whose budget is spent, once the pages it paid for before a crash and
        did not store are fetched again (``FocusedScheduler.refetches``): the close lets the
        requests under way finish."""
        spent = self.crawler.spider.state.get("responses", 0)
        if not self._counts() or spent < self.budget:
            return
        refetches = len(getattr(engine_scheduler(self.crawler), "refetches", ()))
        if refetches:
            logger.info(
                "Page budget %d already spent by this crawl (%s): fetching again the %d"
                " it counted whose pages a crash kept from the store",
                self.budget,
                counted(spent, "page"),
                refetches,
            )
            return
        logger.info(
            "Page budget %d already spent by this crawl (%s)", self.budget, counted(spent, "page")
        )
        self._close_spider("closespider_pagecount")

    def _close_spider(self, reason: str) -> None:
        if self._closing is None:
            self._closing = close_spider_now(self.crawler, reason)

    def budget_count(self, response: Response, request: Request, spider: Spider) -> None:
        if not self._counts() or request.meta.get("dont_obey_robotstxt"):
            return
        if request.meta.get(RESPONSE_COUNTED):
            return  # its response came in before a crash: counted then
        spent = add_to_counter(self.crawler, "responses")
        # After the count is written (focused.resume.CrawlCounters): a crash between the two
        # can only count a response twice, never not at all.
        self.crawler.signals.send_catch_log(response_counted, request=request)
        if spent == self.budget:
            self._close_spider("closespider_pagecount")
