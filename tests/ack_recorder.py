"""Test-only extension: records, in order, what a crawl process puts on the shared Redis
frontier (as it reaches Redis: the frontier buffers puts) and which popped requests it marks
done (``tests/test_redis_frontier.py``)."""

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
        put, flush, pop, ack = frontier.put, frontier.flush, frontier.pop, frontier.ack
        urls: dict[bytes, str] = {}  # popped member -> its URL
        buffered: list[list] = []

        def recorded_put(fp, key, request):
            buffered.append(["put", request.url, request.meta.get("parent_url")])
            return put(fp, key, request)

        def recorded_flush():
            self.events.extend(buffered)
            buffered.clear()
            return flush()

        def recorded_pop():
            request = pop()
            if request is not None:
                urls[request.meta[INFLIGHT_META]] = request.url
            return request

        def recorded_ack(member):
            ack(member)  # which sends the buffered links first
            self.events.append(["done", urls.get(member)])

        frontier.put, frontier.flush = recorded_put, recorded_flush
        frontier.pop, frontier.ack = recorded_pop, recorded_ack

    def closed(self, spider) -> None:
        self.path.write_text(json.dumps(self.events), encoding="utf-8")
