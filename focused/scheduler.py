"""Scrapy's scheduler, plus rediscovery: a URL seen again may raise its queued score.

The dupefilter marks a URL as seen when it is first queued, so Scrapy drops every later
discovery of it. A focused crawl must not lose that evidence: the same URL found from a more
relevant parent deserves a higher place in the frontier. Requests the dupefilter rejects are
offered to the strategy queue's ``rediscover``, which raises the score if the URL is still
queued and the new discovery scores higher.

It also keeps the ``focused/frontier`` stat (the number of queued requests) current for the
progress log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.core.scheduler import Scheduler

if TYPE_CHECKING:
    from scrapy import Request


class FocusedScheduler(Scheduler):
    def enqueue_request(self, request: Request) -> bool:
        queued = super().enqueue_request(request)
        if not queued and not request.dont_filter:
            # Only the dupefilter makes Scheduler.enqueue_request return False.
            for queue in (self.dqs, self.mqs):
                if queue is not None and queue.rediscover(request):
                    break
        self._count_frontier()
        return queued

    def next_request(self) -> Request | None:
        request = super().next_request()
        self._count_frontier()
        return request

    def _count_frontier(self) -> None:
        assert self.stats is not None
        self.stats.set_value("focused/frontier", len(self))
