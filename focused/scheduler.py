"""Scrapy's scheduler, plus rediscovery: a URL seen again may raise its queued score.

The dupefilter marks a URL as seen when it is first queued, so Scrapy drops every later
discovery of it. A focused crawl must not lose that evidence: the same URL found from a more
relevant parent deserves a higher place in the frontier. Requests the dupefilter rejects are
offered to the strategy queue's ``rediscover``, which raises the score if the URL is still
queued and the new discovery scores higher.

It also keeps the ``focused/frontier`` stat (the number of queued requests) current for the
progress log.

Frontier-wide limits live here, so that every strategy gets them:

- ``FRONTIER_MAX`` (default 1,000,000; 0 = unbounded): when a push makes the frontier larger,
  the lowest-ranked requests are evicted (the sources' MAX_BUFFER). Stat ``focused/evicted``;
  a log line every 1,000 evictions.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.core.scheduler import Scheduler

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

EVICTION_LOG_EVERY = 1000


class FocusedScheduler(Scheduler):
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FocusedScheduler:
        scheduler = super().from_crawler(crawler)
        scheduler.frontier_max = crawler.settings.getint("FRONTIER_MAX")
        return scheduler

    def enqueue_request(self, request: Request) -> bool:
        queued = super().enqueue_request(request)
        if not queued and not request.dont_filter:
            # Only the dupefilter makes Scheduler.enqueue_request return False.
            for queue in (self.dqs, self.mqs):
                if queue is not None and queue.rediscover(request):
                    break
        if queued and self.frontier_max and len(self) > self.frontier_max:
            self._evict(len(self) - self.frontier_max)
        self._count_frontier()
        return queued

    def _evict(self, count: int) -> None:
        # The disk queue holds what could be serialized, i.e. nearly everything under JOBDIR.
        queue = self.dqs if self.dqs is not None and len(self.dqs) else self.mqs
        evicted = queue.evict(count)
        assert self.stats is not None
        before = self.stats.get_value("focused/evicted", 0)
        self.stats.inc_value("focused/evicted", evicted)
        if (before + evicted) // EVICTION_LOG_EVERY > before // EVICTION_LOG_EVERY:
            logger.info(
                "Frontier full (FRONTIER_MAX=%d): %d lowest-ranked requests evicted so far",
                self.frontier_max,
                before + evicted,
            )

    def next_request(self) -> Request | None:
        request = super().next_request()
        self._count_frontier()
        return request

    def _count_frontier(self) -> None:
        assert self.stats is not None
        self.stats.set_value("focused/frontier", len(self))
