"""Duplicate pages: the same page under another URL is stored once.

``DuplicateMiddleware`` (spider middleware, order 850: after ``DepthMiddleware``, before
``RelevanceMiddleware``) looks at each page the spider yields:

- **rel=canonical.** The spider stores a page under its same-host ``<link rel="canonical">``.
  If that canonical URL was already fetched, the page is a duplicate of it.
  A page fetched at a URL another page already declared as its canonical (and so was stored
  under) is not stored again.
- **Near-duplicate content** (see ``focused.simhash``).

A duplicate keeps its own URL, gets ``duplicate_of`` = the URL of the page it repeats, and is
stored without text (the storage pipeline drops it); its links are not followed, since the
original's were. Children whose canonical URL was already fetched are dropped too (the
dupefilter does not know URLs that were only declared as canonical).

The URLs seen live in ``spider.state`` so a paused JOBDIR crawl keeps them.

Stats: ``focused/duplicates/canonical``, ``focused/skipped/already_fetched``,
``focused/skipped/duplicate_links``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request

from focused.canonical import canonicalize, drop_params_setting
from focused.items import PageItem

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from scrapy.crawler import Crawler
    from scrapy.http import Response


class DuplicateMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.drop = drop_params_setting(crawler.settings)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DuplicateMiddleware:
        return cls(crawler)

    @property
    def fetched(self) -> set[str]:
        """Canonical URLs of the pages stored so far (as fetched or as declared canonical)."""
        return self.crawler.spider.state.setdefault("fetched_urls", set())

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterable[Any]:
        yield from self._check(response, list(result))

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        for output in self._check(response, [o async for o in result]):
            yield output

    def _check(self, response: Response, outputs: list[Any]) -> list[Any]:
        pages = [o for o in outputs if isinstance(o, PageItem)]
        if not pages:
            return outputs
        page = pages[0]
        fetched = self.fetched
        fetched_as = canonicalize(response.url, self.drop)
        declared = page["url"]
        if declared != fetched_as and declared in fetched:
            page["url"] = fetched_as
            page["duplicate_of"] = declared
            self.stats.inc_value("focused/duplicates/canonical")
        elif declared == fetched_as and fetched_as in fetched:
            # Already stored under this URL, as the canonical of a page fetched earlier.
            self.stats.inc_value("focused/skipped/already_fetched")
            return []
        fetched.update((declared, fetched_as))
        if page.get("duplicate_of"):
            children = sum(isinstance(o, Request) for o in outputs)
            self.stats.inc_value("focused/skipped/duplicate_links", children)
            return [page]
        kept = []
        for output in outputs:
            if isinstance(output, Request) and output.url in fetched:  # links are canonical
                self.stats.inc_value("focused/skipped/already_fetched")
                continue
            kept.append(output)
        return kept
