"""Helpers to build strategy queues outside a crawl, on hand-made requests."""

from __future__ import annotations

from typing import Any

import scrapy
from scrapy.utils.test import get_crawler

from focused.strategies import strategy_class


class QueueSpider(scrapy.Spider):
    name = "queue-test"

    def parse(self, response: Any) -> None:
        pass


def make_queue(strategy: str, key: str = "", state: dict | None = None, **params: Any):
    crawler = get_crawler(QueueSpider)
    spider = QueueSpider()
    spider.strategy_params = params
    spider.state = {}
    crawler.spider = spider
    spider.crawler = crawler
    cls = strategy_class(strategy)
    return cls.from_crawler(crawler, None, key, state or ())


def req(url: str, **meta: Any) -> scrapy.Request:
    """A request for http://t/<url> with the meta the scoring middleware would write."""
    return scrapy.Request(f"http://t/{url}", meta=meta)


def rankings_after(queue, links: int) -> list[int]:
    """Push ``links`` new links, one by one, to a ``rank_semantic`` queue: after which of them
    (counted from 1) a PageRank was computed."""
    points = []
    for count in range(1, links + 1):
        queue.push(req(f"u{count}", parent_url=f"http://t/p{count}", link_relevance=0.5))
        if queue.stats.get_value("focused/rankings", 0) > len(points):
            points.append(count)
    return points


def drain(queue) -> list[str]:
    urls = []
    while (request := queue.pop()) is not None:
        urls.append(request.url.rsplit("/", 1)[1])
    return urls
