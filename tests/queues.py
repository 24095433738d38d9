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


def drain(queue) -> list[str]:
    urls = []
    while (request := queue.pop()) is not None:
        urls.append(request.url.rsplit("/", 1)[1])
    return urls
