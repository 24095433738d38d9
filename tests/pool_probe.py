"""Test-only extension for ``tests/test_politeness.py``: once the crawl has nothing left to
fetch, it waits for the servers to close their idle connections, drops the idle downloader slots
as Scrapy's minute-long loop does (``Downloader._slot_gc``), and counts in the stats what
Twisted's HTTP connection pools still hold, and the timeouts Twisted still has set for
connections no longer pooled (each would fail as it fires: its key, or itself, is gone)."""

from __future__ import annotations

from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.asyncio import call_later

SERVERS_CLOSE_WITHIN = 1.0  # seconds: tests.sites.KeepAliveSite closes one idle 0.3 s


class PoolProbe:
    def __init__(self, crawler) -> None:
        self.crawler = crawler
        self.waited = False
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)

    @classmethod
    def from_crawler(cls, crawler) -> PoolProbe:
        return cls(crawler)

    def spider_idle(self) -> None:
        if not self.waited:
            self.waited = True
            call_later(SERVERS_CLOSE_WITHIN, self.count)
            raise DontCloseSpider

    def count(self) -> None:
        downloader = self.crawler.engine.downloader
        handlers = downloader.handlers._handlers.values()
        pools = [handler._pool for handler in handlers if hasattr(handler, "_pool")]
        stats = self.crawler.stats
        stats.set_value("probe/pool_keys_before", sum(len(pool._connections) for pool in pools))
        downloader._slot_gc(age=0)
        stats.set_value("probe/pool_keys", sum(len(pool._connections) for pool in pools))
        pooled = sum(len(kept) for pool in pools for kept in pool._connections.values())
        stats.set_value("probe/pooled_connections", pooled)
        from twisted.internet import reactor  # the installed one

        orphans = [
            call
            for pool in pools
            for call in reactor.getDelayedCalls()
            if call.func == pool._removeConnection
            and call.args[1] not in pool._connections.get(call.args[0], ())
        ]
        stats.set_value("probe/orphan_pool_timeouts", len(orphans))
