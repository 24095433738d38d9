"""Test-only scheduler: records how many requests were under way (downloading, or downloaded
and not yet scored) each time one left the frontier (``tests/test_dispatch_hold.py``)."""

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
