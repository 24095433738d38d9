"""Test-only extension: records, in order, what a crawl process puts on the shared Redis
frontier and which popped requests it marks done (``tests/test_redis_frontier.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from scrapy import signals

from schedulers.redis_frontier import INFLIGHT_META


class FrontierRecorder:
    def __init__(self, crawler) -> None:
        self.path = Path(crawler.settings["FRONTIER_RECORD"])
        self.events: list[list] = []
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def opened(self, spider) -> None:
        frontier = spider.shared.frontier
        put, pop, ack = frontier.put, frontier.pop, frontier.ack
        urls: dict[bytes, str] = {}  # popped member -> its URL

        def recorded_put(fp, key, request):
            self.events.append(["put", request.url, request.meta.get("parent_url")])
            return put(fp, key, request)

        def recorded_pop():
            request = pop()
            if request is not None:
                urls[request.meta[INFLIGHT_META]] = request.url
            return request

        def recorded_ack(member):
            self.events.append(["done", urls.get(member)])
            return ack(member)

        frontier.put, frontier.pop, frontier.ack = recorded_put, recorded_pop, recorded_ack

    def closed(self, spider) -> None:
        self.path.write_text(json.dumps(self.events), encoding="utf-8")
