"""Duplicate pages: the same page under another URL is stored once.

``DuplicateMiddleware`` (spider middleware, order 850: after ``DepthMiddleware``, before
``RelevanceMiddleware``) looks at each page the spider yields:

- **rel=canonical.** The spider stores a page under its same-host ``<link rel="canonical">``.
  If that canonical URL was already fetched, the page is a duplicate of it.
  A page fetched at a URL another page already declared as its canonical (and so was stored
  under) is not stored again.
- **Near-duplicate content** (``focused.simhash``, ``NEAR_DUPLICATE_DISTANCE``, default 3 bits;
  -1 = off): a page whose SimHash is that close to the SimHash of a page stored earlier.

A duplicate keeps its own URL, gets ``duplicate_of`` = the URL of the page it repeats, and is
stored without text (the storage pipeline drops it); its links are not followed, since the
original's were. Children whose canonical URL was already fetched are dropped too (the
dupefilter does not know URLs that were only declared as canonical).

The URLs seen and the SimHash index live in ``spider.state``, so a paused JOBDIR crawl keeps
them; after a crash the URLs come back from the store (``focused.resume.recover_state``), the
SimHash index as saved at the last pause.

Stats: ``focused/duplicates/canonical``, ``focused/duplicates/near``,
``focused/skipped/already_fetched``, ``focused/skipped/duplicate_links``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request

from focused.canonical import canonicalize, drop_params_setting
from focused.items import PageItem
from focused.simhash import SimHashIndex, simhash
from focused.text import tokenize

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from scrapy.crawler import Crawler
    from scrapy.http import Response


class DuplicateMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.drop = drop_params_setting(crawler.settings)
        self.near_distance = crawler.settings.getint("NEAR_DUPLICATE_DISTANCE")

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
        if not page.get("duplicate_of") and self.near_distance >= 0:
            self._check_near_duplicate(page)
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

    def _check_near_duplicate(self, page: PageItem) -> None:
        fingerprint = simhash(tokenize(page.get("text") or "", page.get("language")))
        if fingerprint is None:
            return
        buckets = self.crawler.spider.state.setdefault("simhash_bands", {})
        index = SimHashIndex(buckets, self.near_distance)
        original = index.find(fingerprint)
        if original == page["url"]:  # fetched again (a request in flight at a crash)
            return
        if original is None:
            index.add(fingerprint, page["url"])
        else:
            page["duplicate_of"] = original
            self.stats.inc_value("focused/duplicates/near")
