"""A component of a user's own, given with -s to the crawls of the tests."""

from __future__ import annotations

from typing import Any


class CountingPipeline:
    """Counts the items it sees (stat ``test/items_seen``), and passes them on."""

    def __init__(self, crawler: Any) -> None:
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> CountingPipeline:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        self.stats.inc_value("test/items_seen")
        return item
