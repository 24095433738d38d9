"""Test-only extension: when the page budget's count reaches CLOSESPIDER_PAGECOUNT, runs the
engine's next-request call in that same turn of the event loop, as happens whenever its timer
is due in the turn that counts the budget's last response (seen in real crawls, about one stop
in three). It makes that interleaving certain, so that a test can check that no request starts
once the budget is reached (``tests/test_budget_pauses.py``)."""

from __future__ import annotations

from scrapy import signals


class NextCallAtBudget:
    def __init__(self, crawler) -> None:
        self.crawler = crawler
        self.budget = crawler.settings.getint("CLOSESPIDER_PAGECOUNT")
        # After PageBudget's handler (an extension built earlier), so the count is up to date.
        crawler.signals.connect(self.response_received, signal=signals.response_received)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def response_received(self, response, request, spider) -> None:
        if spider.state.get("responses") == self.budget:
            self.crawler.engine._slot.nextcall()
