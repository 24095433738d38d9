"""Write the crawl record when the spider opens, page records in batches, and the crawl's
outcome when it closes.

Settings:
    STORAGE_BATCH_SIZE   page records per write (default 50); the rest is written at close
    STORAGE_RETRIES      retries of a failed write before giving up (default 3)
    STORAGE_RETRY_DELAY  seconds before the first retry, doubled for each next one (default 1.0)
plus the settings of ``focused.storage.open_store`` (MONGO_URI, MONGO_DATABASE,
MONGO_TIMEOUT_MS, FOCUSED_DB).

Stats: ``focused/stored`` (page records written).

Threads: a store that says it is ``threadsafe`` (MongoDB) is called in worker threads, so that a
round trip to the server never stalls the reactor; SQLite is fast and its connection belongs to
the thread that opened it, so it is called inline. Either way batches are written one at a time
and in order, by a single writer (``_drain``).

If a write still fails after the retries, the spider is closed with reason
``store_unreachable`` (the crawl record then says ``interrupted``); the records not written stay
buffered, get one more try at close, and are reported as lost in the log if that fails too.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypeVar

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.utils.asyncio import run_in_thread, sleep
from scrapy.utils.defer import deferred_from_coro

from focused.storage import PAGE_FIELDS, Store, StoreError, open_store

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 50
DEFAULT_RETRIES = 3
DEFAULT_RETRY_DELAY = 1.0
STORE_UNREACHABLE = "store_unreachable"  # the close reason when the store cannot be written

_T = TypeVar("_T")


def crawl_status(reason: str) -> str:
    """``finished`` when the crawl ended on its own or on a CLOSESPIDER_* limit."""
    return (
        "finished" if reason == "finished" or reason.startswith("closespider_") else "interrupted"
    )


class StoragePipeline:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.batch_size = max(1, settings.getint("STORAGE_BATCH_SIZE", DEFAULT_BATCH_SIZE))
        self.retries = max(0, settings.getint("STORAGE_RETRIES", DEFAULT_RETRIES))
        self.retry_delay = settings.getfloat("STORAGE_RETRY_DELAY", DEFAULT_RETRY_DELAY)
        self.store: Store
        self.crawl_id: str
        self._buffer: list[dict[str, Any]] = []  # page records not yet written, oldest first
        self._writing = False  # a _drain is running
        self._failed = False  # gave up on the store: no more retries, spider closing
        self._closing_spider: Deferred[None] | None = None  # keeps the close task referenced

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StoragePipeline:
        pipeline = cls(crawler)
        # The close reason reaches signal handlers only, not close_spider().
        crawler.signals.connect(pipeline.spider_closed, signal=signals.spider_closed)
        return pipeline

    async def open_spider(self) -> None:
        self.store = open_store(self.crawler.settings)
        record = self.crawler.spider.crawl_record()
        self.crawl_id = record["crawl_id"]
        try:
            await self._retrying(self.store.start_crawl, record)
        except StoreError:
            self.store.close()
            raise

    async def process_item(self, item: Any) -> Any:
        adapter = ItemAdapter(item)
        record = {name: adapter.get(name) for name in PAGE_FIELDS}
        if record["duplicate_of"]:
            record["text"] = None  # stored once, with the page it duplicates
        self._buffer.append(record)
        if len(self._buffer) >= self.batch_size and not self._failed:
            try:
                await self._drain()
            except StoreError as exc:
                self._give_up(exc)
        return item

    async def close_spider(self) -> None:
        # Every process_item has returned by now, so no _drain is running.
        try:
            await self._drain(final=True)
        except StoreError as exc:
            logger.error(
                "%d page records of crawl %s were not stored: %s",
                len(self._buffer),
                self.crawl_id,
                exc,
            )

    async def spider_closed(self, reason: str) -> None:
        status = crawl_status(reason)
        try:
            await self._retrying(
                self.store.finish_crawl,
                self.crawl_id,
                status=status,
                finish_reason=reason,
                pages=self.stats.get_value("focused/pages", 0),
                relevant=self.stats.get_value("focused/relevant", 0),
                harvest_rate=self.stats.get_value("focused/harvest_rate"),
            )
        except StoreError as exc:
            logger.error("crawl %s could not be recorded as %s: %s", self.crawl_id, status, exc)
        finally:
            self.store.close()

    async def _drain(self, *, final: bool = False) -> None:
        """Write full batches (everything buffered when ``final``), oldest first.

        The only writer: a call made while another runs returns at once, its records being
        written by the running one, so batches never overlap or reorder. A batch leaves the
        buffer only once written.
        """
        if self._writing:
            return
        self._writing = True
        try:
            while self._buffer and (final or len(self._buffer) >= self.batch_size):
                batch = self._buffer[: self.batch_size]
                await self._retrying(self.store.save_pages, batch)
                del self._buffer[: len(batch)]  # only appended to meanwhile
                self.stats.inc_value("focused/stored", len(batch))
        finally:
            self._writing = False

    def _give_up(self, exc: StoreError) -> None:
        """Close the spider: crawling on would only pile up records that cannot be written."""
        self._failed = True
        logger.error("%s; closing the spider (%s)", exc, STORE_UNREACHABLE)
        self._closing_spider = deferred_from_coro(
            self.crawler.engine.close_spider_async(reason=STORE_UNREACHABLE)
        )

    async def _retrying(self, method: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Call a store method, retrying a StoreError after doubling delays (a server failing
        over, a locked file); once the store was given up on, try only once."""
        retries = 0 if self._failed else self.retries
        delay = self.retry_delay
        for attempt in range(1, retries + 1):
            try:
                return await self._call(method, *args, **kwargs)
            except StoreError as exc:
                logger.warning("%s; retry %d of %d in %.1f s", exc, attempt, retries, delay)
            await sleep(delay)
            delay *= 2
        return await self._call(method, *args, **kwargs)

    async def _call(self, method: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        if self.store.threadsafe:
            return await run_in_thread(method, *args, **kwargs)
        return method(*args, **kwargs)
