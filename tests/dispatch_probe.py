"""Test-only parts for ``tests/test_dispatch_hold.py``: a scheduler that records how many
requests were under way (downloading, or downloaded and not yet scored) each time one left the
frontier, spider middlewares that cut a page's output short or drop a seed's links, and an
item pipeline that keeps the first page's item as long as a slow store would."""

from __future__ import annotations

from scrapy import Request, signals
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import reactor
from twisted.internet.defer import Deferred

from focused.scheduler import FocusedScheduler

FIRST_ITEM_WAIT_LIMIT = 5.0  # seconds


class OutstandingProbeScheduler(FocusedScheduler):
    def next_request(self) -> Request | None:
        outstanding = self._outstanding()
        request = super().next_request()
        if request is not None:
            self.stats.inc_value("probe/dispatched")
            self.stats.max_value("probe/max_outstanding_at_dispatch", outstanding)
        return request


class CutShortMiddleware:
    """Test-only spider middleware, outside ``FinishMiddleware``: raises after a page's first
    link, as a faulty middleware would, so the page's other links never reach the scheduler."""

    def process_spider_output(self, response, result, spider=None):
        for position, output in enumerate(result):
            if position == 1:
                raise RuntimeError("output cut short")
            yield output

    async def process_spider_output_async(self, response, result, spider=None):
        position = 0
        async for output in result:
            if position == 1:
                raise RuntimeError("output cut short")
            position += 1
            yield output


class DropSeedLinksMiddleware:
    """Test-only spider middleware, inside ``FinishMiddleware``: a seed's page comes out
    without links, as a page that has none would."""

    def process_spider_output(self, response, result, spider=None):
        return [output for output in result if not self._seed_link(response, output)]

    async def process_spider_output_async(self, response, result, spider=None):
        async for output in result:
            if not self._seed_link(response, output):
                yield output

    @staticmethod
    def _seed_link(response, output) -> bool:
        return isinstance(output, Request) and response.meta.get("depth", 0) == 0


class FirstItemWaitsForAResponse:
    """Test-only item pipeline: the first page's item stays in the pipeline, as it would while
    a store a round trip away writes it, until another response comes in, or for
    ``FIRST_ITEM_WAIT_LIMIT`` seconds. Stat ``probe/first_item_released_by/response`` or
    ``probe/first_item_released_by/time_limit``."""

    def __init__(self, crawler):
        self.crawler = crawler
        self.first = True
        self.waiting: Deferred[str] | None = None

    @classmethod
    def from_crawler(cls, crawler):
        pipeline = cls(crawler)
        crawler.signals.connect(pipeline.response_received, signal=signals.response_received)
        return pipeline

    def response_received(self, response, request, spider):
        self._release("response")

    def _release(self, cause: str) -> None:
        if self.waiting is not None and not self.waiting.called:
            self.waiting.callback(cause)

    async def process_item(self, item):
        if self.first:
            self.first = False
            self.waiting = Deferred()
            timer = reactor.callLater(FIRST_ITEM_WAIT_LIMIT, self._release, "time_limit")
            cause = await maybe_deferred_to_future(self.waiting)
            if timer.active():
                timer.cancel()
            self.crawler.stats.set_value(f"probe/first_item_released_by/{cause}", 1)
        return item
