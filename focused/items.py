"""The item a fetched page travels through Scrapy as.

Its fields are the page record of ARCHITECTURE.md ("Stores") plus one transient field,
``scores``: the ``focused.relevance.Scores`` (tfidf, lsi, combined) that ``RelevanceMiddleware``
attaches and ``pipelines.relevance.RelevancePipeline`` turns into ``tfidf``, ``lsi``,
``relevance`` and ``is_relevant`` before removing it, so that it never reaches the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import scrapy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from scrapy.crawler import Crawler
    from scrapy.http import Response


class PageItem(scrapy.Item):
    crawl_id = scrapy.Field()
    url = scrapy.Field()
    title = scrapy.Field()
    text = scrapy.Field()
    level = scrapy.Field()
    parent_url = scrapy.Field()
    anchor = scrapy.Field()
    link_relevance = scrapy.Field()
    tfidf = scrapy.Field()
    lsi = scrapy.Field()
    relevance = scrapy.Field()
    is_relevant = scrapy.Field()
    strategy = scrapy.Field()
    fetch_order = scrapy.Field()
    fetched_at = scrapy.Field()
    status = scrapy.Field()
    duplicate_of = scrapy.Field()  # see focused.dedup
    language = scrapy.Field()  # ISO 639-1 code, None when unknown (focused.languages)
    content_hash = scrapy.Field()  # see focused.refresh
    last_changed = scrapy.Field()
    changes = scrapy.Field()
    visits = scrapy.Field()
    robots = scrapy.Field()  # see focused.robotsmeta
    tried_at = scrapy.Field()  # set by a recrawl only (focused.refresh)
    etag = scrapy.Field()  # the response's validators (focused.refresh.validators)
    last_modified = scrapy.Field()
    requested_url = scrapy.Field()  # the URL the link named, if the page is stored under another
    scores = scrapy.Field()  # transient: removed by RelevancePipeline


def requested_url(requested: str, stored_under: str) -> str | None:
    """A page's ``requested_url`` field: the URL it was requested at, if it is stored under
    another (a redirect's target, its rel=canonical), else None."""
    return requested if requested != stored_under else None


class PageOutputMiddleware:
    """The base of the spider middlewares that take a callback's output whole: the page's item
    and the requests for its links, as one list, because each needs both at once (a page is
    scored, or found to be a duplicate, before its links are touched). A subclass defines
    ``process_outputs``; Scrapy calls the synchronous or the asynchronous entry point depending
    on the middlewares around it.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PageOutputMiddleware:
        return cls(crawler)

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterable[Any]:
        yield from self.process_outputs(response, list(result))

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        for output in self.process_outputs(response, [o async for o in result]):
            yield output

    def process_outputs(self, response: Response, outputs: list[Any]) -> list[Any]:
        """What goes on from one callback's ``outputs`` (the page item is at most one)."""
        raise NotImplementedError
