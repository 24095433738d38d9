"""Duplicate pages: the same page under another URL is stored once.

``DuplicateMiddleware`` (spider middleware, order 850: after ``DepthMiddleware``, before
``RelevanceMiddleware``) looks at each page the spider yields:

- **rel=canonical.** The spider stores a page under its ``<link rel="canonical">`` on the same
  site (host and port). If that canonical URL was already fetched, the page is a duplicate of it.
  A page fetched at a URL another page already declared as its canonical (and so was stored
  under) is not stored again.
- **Near-duplicate content** (``focused.simhash``, ``NEAR_DUPLICATE_DISTANCE``, default 3 bits;
  -1 = off): a page whose SimHash is that close to the SimHash of a page stored earlier. A page
  marked ``noindex`` (``focused.robotsmeta``) is looked up but not added: stored without text,
  it must not stand for the pages that resemble it, while a copy of a page stored earlier is a
  duplicate as any other, and its links are not followed.

A duplicate keeps its own URL, gets ``duplicate_of`` = the URL of the page it repeats, and is
stored without text (the storage pipeline drops it); its links are not followed, since the
original's were. Children whose canonical URL was already fetched are dropped too (the
dupefilter does not know URLs that were only declared as canonical). A page fetched at a URL
already taken, its rel=canonical taken too, is skipped as fetched: a kill -9 left its request in
flight, and fetched again it was a duplicate of itself, scored and counted twice. Under JOBDIR
the URL a page to be stored under its rel=canonical was fetched at is kept with that one before
the page is stored (``focused.resume.stored_under_canonical``), so that after a crash the
resume takes it as fetched once the store holds the page.

The URLs seen live in ``spider.state``, so a paused JOBDIR crawl keeps them (after a crash
they come back from the store, ``focused.resume.recover_state``). The SimHash index is an
SQLite file under JOBDIR (``nearduplicates.sqlite3``), written through, so both a pause and a
``kill -9`` keep it; without JOBDIR it is in memory.

In a crawl shared by several processes through Redis (``spider.shared``) both are the crawl's:
``SharedFetched`` and ``focused.simhash.SharedSimHashIndex``, each checked and added in one
Lua step, so that a page is stored once in the crawl, whichever processes meet its copies.

Stats: ``focused/duplicates/canonical``, ``focused/duplicates/near``,
``focused/skipped/already_fetched``, ``focused/skipped/duplicate_links``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals

from focused.canonical import canonicalize, drop_params_setting
from focused.items import PageItem, PageOutputMiddleware, requested_url
from focused.jobdir import JobdirUnwritable, jobdir_writes
from focused.resume import stored_under_canonical
from focused.robotsmeta import is_noindex
from focused.simhash import SharedSimHashIndex, SimHashIndex, simhash
from focused.text import tokenize

INDEX_FILE = "nearduplicates.sqlite3"

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from focused.distributed import SharedCrawl


class LocalFetched:
    """The canonical URLs stored by one process, in ``spider.state`` (read at each use: a
    resumed JOBDIR crawl replaces the state when the spider opens)."""

    def __init__(self, spider: Any) -> None:
        self.spider = spider

    @property
    def urls(self) -> set[str]:
        return self.spider.state.setdefault("fetched_urls", set())

    def claim(self, declared: str, fetched_as: str) -> bool:
        """Take both URLs as fetched; True if ``declared`` was already."""
        urls = self.urls
        taken = declared in urls
        urls.update((declared, fetched_as))
        return taken

    def taken(self, urls: list[str]) -> list[bool]:
        return [url in self.urls for url in urls]

    def fetched_before(self, fetched_as: str) -> bool:
        """Whether a page fetched at ``fetched_as`` was fetched before (or another page stored
        under it). After a kill -9 the set holds only the pages whose outcome was safe
        (``focused.resume.recover_state``), with the URL fetched of those the store holds,
        or counts below STORE_MIN_RELEVANCE, under their rel=canonical
        (``focused.resume.stored_under_canonical``): such a page, whose request the kill left
        in flight, is fetched again at it."""
        return fetched_as in self.urls


# KEYS: the fetched hash. ARGV: declared URL, URL fetched. Returns 1 if another page holds the
# declared URL. A URL is held by the URL fetched that first claimed it, so that a request
# fetched again (popped by a worker that died, then re-queued) is not its own duplicate.
CLAIM = """
local owner = redis.call('HGET', KEYS[1], ARGV[1])
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[2])
if owner and owner ~= ARGV[2] then return 1 end
return 0
"""


class SharedFetched:
    """The canonical URLs stored by every process of a crawl shared through Redis: the hash
    ``fetched`` (URL -> the URL fetched that claimed it) under the crawl's prefix."""

    def __init__(self, shared: SharedCrawl) -> None:
        self.shared = shared
        self.key = shared.key("fetched")
        self._claim = shared.redis.register_script(CLAIM)

    def claim(self, declared: str, fetched_as: str) -> bool:
        return bool(self.shared.run(self._claim, keys=[self.key], args=[declared, fetched_as]))

    def taken(self, urls: list[str]) -> list[bool]:
        if not urls:
            return []
        owners = self.shared.run(self.shared.redis.hmget, self.key, urls)
        return [owner is not None for owner in owners or [None] * len(urls)]

    def fetched_before(self, fetched_as: str) -> bool:
        """Never: a URL is claimed before its page's outcome is safe, so a page fetched again
        (its worker died) must be handled again (``CLAIM``)."""
        return False


class DuplicateMiddleware(PageOutputMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.stats = crawler.stats
        self.drop = drop_params_setting(crawler.settings)
        # A crawl shared by several processes keeps both in Redis, so that a page is stored
        # once in the crawl, not once per process.
        shared = getattr(crawler.spider, "shared", None)
        self.fetched = LocalFetched(crawler.spider) if shared is None else SharedFetched(shared)
        self.near_index: SimHashIndex | SharedSimHashIndex | None = None
        distance = crawler.settings.getint("NEAR_DUPLICATE_DISTANCE")
        if distance >= 0 and shared is not None:
            self.near_index = SharedSimHashIndex(distance, shared)
        elif distance >= 0:
            jobdir = crawler.settings.get("JOBDIR")
            path = Path(jobdir, INDEX_FILE) if jobdir else ":memory:"
            if jobdir:
                Path(jobdir).mkdir(parents=True, exist_ok=True)
            index = self.near_index = SimHashIndex(distance, path, jobdir_writes(crawler))
            crawler.signals.connect(index.close, signal=signals.spider_closed)

    def process_outputs(self, response: Response, outputs: list[Any]) -> list[Any]:
        pages = [o for o in outputs if isinstance(o, PageItem)]
        if not pages:
            return outputs
        page = pages[0]
        fetched_as = canonicalize(response.url, self.drop)
        declared = page["url"]
        before = declared != fetched_as and self.fetched.fetched_before(fetched_as)
        if self.fetched.claim(declared, fetched_as):
            if declared == fetched_as or before:
                # Already stored under this URL, as the canonical of a page fetched earlier, or
                # this page fetched again: not a duplicate of itself.
                self.stats.inc_value("focused/skipped/already_fetched")
                return []
            requested = page.get("requested_url") or declared  # None: the URL was the one asked
            page["url"] = fetched_as
            page["requested_url"] = requested_url(requested, fetched_as)
            page["duplicate_of"] = declared
            self.stats.inc_value("focused/duplicates/canonical")
        if not page.get("duplicate_of") and self.near_index is not None:
            self._check_near_duplicate(page, self.near_index)
        if page["url"] != fetched_as:
            # Kept under JOBDIR before the store writes the page (focused.resume.CrawlCounters):
            # a kill after its write leaves its request in flight, fetched again at fetched_as.
            self.crawler.signals.send_catch_log(
                stored_under_canonical, fetched_as=fetched_as, url=page["url"]
            )
        if page.get("duplicate_of"):
            children = sum(isinstance(o, Request) for o in outputs)
            self.stats.inc_value("focused/skipped/duplicate_links", children)
            return [page]
        links = [output.url for output in outputs if isinstance(output, Request)]
        taken = iter(self.fetched.taken(links))  # links are canonical
        kept = []
        for output in outputs:
            if isinstance(output, Request) and next(taken):
                self.stats.inc_value("focused/skipped/already_fetched")
                continue
            kept.append(output)
        return kept

    def _check_near_duplicate(
        self, page: PageItem, index: SimHashIndex | SharedSimHashIndex
    ) -> None:
        text, language = page.get("text") or "", page.get("language")
        model = getattr(self.crawler.spider, "relevance", None)
        if model is None:
            tokens = tokenize(text, language)
        else:
            # The relevance model scores the page next and keeps these tokens for it: their CPU
            # is the scoring's, and counts in its stat (focused.middlewares).
            started = time.thread_time()
            tokens = model.page_tokens(text, language)
            cpu_ms = (time.thread_time() - started) * 1000
            self.stats.inc_value("focused/scoring_cpu_ms", cpu_ms, start=0.0)
        fingerprint = simhash(tokens)
        if fingerprint is None:
            return
        try:
            # A noindex page is stored without text: taken as the original of a later copy, it
            # would leave that copy's text unstored too (focused.robotsmeta).
            original = index.find_or_add(fingerprint, page["url"], add=not is_noindex(page))
        except JobdirUnwritable:
            return  # the crawl stops, and stores no more pages (focused.jobdir)
        # The page's own URL: fetched again (a request in flight at a crash).
        if original is not None and original != page["url"]:
            page["duplicate_of"] = original
            self.stats.inc_value("focused/duplicates/near")
