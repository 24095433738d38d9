"""Test-only parts for ``tests/test_dispatch_hold.py``: a scheduler that records how many
requests were under way (downloading, or downloaded and not yet scored) each time one left the
frontier, and a spider middleware that cuts a page's output short."""

from __future__ import annotations

from scrapy import Request

from focused.scheduler import FocusedScheduler


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
