"""Test-only parts for ``tests/test_dispatch_hold.py``: a scheduler that records how many
requests were under way (downloading, or downloaded and not yet scored) each time one left the
frontier, spider middlewares that cut a page's output short or drop a seed's links, and item
pipelines that keep a page's item as long as a slow store would."""

from __future__ import annotations

from urllib.parse import urlparse

from scrapy import Request, signals
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import reactor
from twisted.internet.defer import Deferred

from focused.scheduler import FocusedScheduler

ITEM_WAIT_LIMIT = 5.0  # seconds
LEAVES_HELD = 2  # LeafItemsWaitForAResponse: the leaf pages whose items it holds


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
    ``ITEM_WAIT_LIMIT`` seconds. Stat ``probe/first_item_released_by/response`` or
    ``probe/first_item_released_by/time_limit``."""

    held = "first_item"  # the stats' name for the items held

    def __init__(self, crawler):
        self.crawler = crawler
        self.seen = 0
        self.waiting: list[Deferred[str]] = []

    @classmethod
    def from_crawler(cls, crawler):
        pipeline = cls(crawler)
        crawler.signals.connect(pipeline.response_received, signal=signals.response_received)
        return pipeline

    def response_received(self, response, request, spider):
        for waiting in self.waiting:
            self._release(waiting, "response")
        self.waiting = []

    @staticmethod
    def _release(waiting: Deferred[str], cause: str) -> None:
        if not waiting.called:
            waiting.callback(cause)

    def holds(self, item) -> bool:
        self.seen += 1
        return self.seen == 1

    async def process_item(self, item):
        if self.holds(item):
            waiting: Deferred[str] = Deferred()
            self.waiting.append(waiting)
            timer = reactor.callLater(ITEM_WAIT_LIMIT, self._release, waiting, "time_limit")
            cause = await maybe_deferred_to_future(waiting)
            if timer.active():
                timer.cancel()
            self.crawler.stats.inc_value(f"probe/{self.held}_released_by/{cause}")
        return item


class LeafItemsWaitForAResponse(FirstItemWaitsForAResponse):
    """The same for the items of the first ``LEAVES_HELD`` pages whose path starts with
    ``/leaf`` (pages without links): stats ``probe/leaf_item_released_by/...``."""

    held = "leaf_item"

    def holds(self, item) -> bool:
        if self.seen < LEAVES_HELD and urlparse(item["url"]).path.startswith("/leaf"):
            self.seen += 1
            return True
        return False
