"""Stop criteria of the focused-crawling literature, on top of Scrapy's page budget.

Settings (each off by default):
    CLOSESPIDER_RELEVANT  stop once the crawl has fetched this many relevant pages; the count is
                          the crawl's (``focused/relevant``), so it goes on across a JOBDIR
                          resume; 0 = off (default 0). Close reason ``closespider_relevant``.
    DRIFT_WINDOW          topic-drift stop: the number N of most recently fetched pages whose
                          harvest rate is watched; 0 = off (default 0)
    DRIFT_MIN_HARVEST     stop when the harvest rate of the last DRIFT_WINDOW pages falls below
                          this (default 0.1). Close reason ``closespider_drift``.

The others live where they act: the page budget is Scrapy's CLOSESPIDER_PAGECOUNT, threshold
crawl-and-store is STORE_MIN_RELEVANCE (``pipelines.relevance``). A crawl stopped by any of them
is recorded as ``finished``.

Pages are counted as their items leave the pipelines (``item_scraped``, or ``item_dropped`` for
a page not stored), by the ``is_relevant`` the relevance pipeline gave them. As with
CLOSESPIDER_PAGECOUNT, the requests already under way still complete after the stop.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import deferred_from_coro

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)


class StopCriteria:
    def __init__(self, crawler: Crawler, relevant: int, window: int, min_harvest: float) -> None:
        self.crawler = crawler
        self.relevant = relevant
        self.min_harvest = min_harvest
        self.window: deque[bool] = deque(maxlen=window)
        self._closing: Deferred[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StopCriteria:
        settings = crawler.settings
        relevant = settings.getint("CLOSESPIDER_RELEVANT")
        window = settings.getint("DRIFT_WINDOW")
        if not relevant and not window:
            raise NotConfigured
        extension = cls(crawler, relevant, window, settings.getfloat("DRIFT_MIN_HARVEST"))
        crawler.signals.connect(extension.page_done, signal=signals.item_scraped)
        crawler.signals.connect(extension.page_done, signal=signals.item_dropped)
        return extension

    def page_done(self, item: Any) -> None:
        is_relevant = ItemAdapter(item).get("is_relevant")
        if is_relevant is None or self._closing is not None:
            return
        relevant = self.crawler.stats.get_value("focused/relevant", 0)
        if self.relevant and relevant >= self.relevant:
            self._close("closespider_relevant", "%d relevant pages", relevant)
            return
        if self.window.maxlen:
            self.window.append(is_relevant)
            harvest = sum(self.window) / self.window.maxlen
            if len(self.window) == self.window.maxlen and harvest < self.min_harvest:
                self._close(
                    "closespider_drift",
                    "harvest rate %.3f over the last %d pages",
                    harvest,
                    self.window.maxlen,
                )

    def _close(self, reason: str, message: str, *args: Any) -> None:
        logger.info("Closing spider (%s): " + message, reason, *args)
        self._closing = deferred_from_coro(self.crawler.engine.close_spider_async(reason=reason))
