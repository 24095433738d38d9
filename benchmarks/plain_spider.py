"""The baseline of the throughput benchmark: a plain Scrapy spider, nothing focused about it.

Same project settings as ``topical`` (concurrency, robots.txt, timeouts), but no scoring
middleware, no item pipelines, and Scrapy's own scheduler and priority queue. It follows every
link (``response.follow_all``) and yields one small item per page: the ratio to it prices
everything focusing adds (text and link-context extraction, scoring, the strategy queue, storage).
It lives in benchmarks/, not spiders/, so the project's spider list stays the product's:

    scrapy runspider benchmarks/plain_spider.py -a seeds=URL -s CLOSESPIDER_PAGECOUNT=N
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from focused.settings import EXTENSIONS as PROJECT_EXTENSIONS

GC_EXTENSION = "focused.collector.GarbageCollector"
PLAIN_SETTINGS = {
    "SCHEDULER": "scrapy.core.scheduler.Scheduler",
    "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
    "SPIDER_MIDDLEWARES": {"focused.middlewares.RelevanceMiddleware": None},
    "ITEM_PIPELINES": {},
    # Scrapy's extensions, with the project's garbage-collector tuning: without it the baseline
    # ran Python's untuned collector, 1.2 ms of CPU a page more than the project's settings give
    # (session 24). The project's other extensions serve a topical crawl (its budget over a
    # resumed job, the progress line of relevant pages, stop criteria, shared crawls).
    "EXTENSIONS": {GC_EXTENSION: PROJECT_EXTENSIONS[GC_EXTENSION]},
}


class PlainSpider(scrapy.Spider):
    name = "plain"
    custom_settings = PLAIN_SETTINGS

    def __init__(self, seeds: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seeds = [seed for seed in seeds.split(",") if seed]

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for url in self.seeds:
            yield scrapy.Request(url)

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url, "title": response.css("title::text").get()}
        yield from response.follow_all(css="a")
