"""Components of a user's own, given with -s to the crawls of the tests."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from signal import SIGKILL
from typing import IO, Any
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.extensions.feedexport import BlockingFeedStorage

logger = logging.getLogger(__name__)


class CountingPipeline:
    """Counts the items it sees (stat ``test/items_seen``), and passes them on."""

    def __init__(self, crawler: Any) -> None:
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> CountingPipeline:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        self.stats.inc_value("test/items_seen")
        return item


class SlowFileFeedStorage(BlockingFeedStorage):
    """A feed storage that uploads as S3's and FTP's do, in a thread, to the local file its
    URI names (``slowfile:///PATH``), in ``UPLOAD_S`` (a slow server): the file is there only
    once the upload has ended."""

    UPLOAD_S = 2.0

    def __init__(self, uri: str, *, feed_options: dict[str, Any] | None = None) -> None:
        self.path = Path(urlsplit(uri).path)

    def _store_in_thread(self, file: IO[bytes]) -> None:
        time.sleep(self.UPLOAD_S)
        file.seek(0)
        self.path.write_bytes(file.read())


class SlowEngineStart:
    """An ``engine_started`` handler that takes 2 s, as a slow extension's would, logging
    ``test: engine starting`` first: the engine runs only once it is done."""

    @classmethod
    def from_crawler(cls, crawler: Any) -> SlowEngineStart:
        extension = cls()
        crawler.signals.connect(extension.engine_started, signal=signals.engine_started)
        return extension

    async def engine_started(self) -> None:
        logger.info("test: engine starting")
        await asyncio.sleep(2.0)  # the crawl's reactor is asyncio's


class SlowPipeline:
    """An item pipeline that takes 0.3 s an item, as a store across a slow network would."""

    async def process_item(self, item: Any) -> Any:
        await asyncio.sleep(0.3)
        return item


def site_params(params: dict[str, Any], spider: Any) -> dict[str, Any]:
    """A feed's ``uri_params`` (FEED_URI_PARAMS): ``%(site)s``, a name of the user's."""
    return {**params, "site": "birds"}


class KillAtPageDone:
    """Kills its crawl outright (SIGKILL) as the page whose URL ends with ``TEST_KILL_AT_PAGE``
    leaves the item pipelines: after the handlers of ``item_scraped`` or ``item_dropped``
    connected before it (``focused.resume.CrawlCounters``, an extension of lower order) and
    before the scheduler's, which finishes the page's request; with ``TEST_KILL_ONCE_DONE``,
    once every handler has run (the request finished)."""

    def __init__(self, path: str, once_done: bool) -> None:
        self.path = path
        self.once_done = once_done

    @classmethod
    def from_crawler(cls, crawler: Any) -> KillAtPageDone:
        settings = crawler.settings
        extension = cls(settings["TEST_KILL_AT_PAGE"], settings.getbool("TEST_KILL_ONCE_DONE"))
        for signal in (signals.item_scraped, signals.item_dropped):
            crawler.signals.connect(extension.page_done, signal=signal)
        return extension

    def page_done(self, item: Any) -> None:
        if not item["url"].endswith(self.path):
            return
        if self.once_done:
            from twisted.internet import reactor

            reactor.callLater(0, os.kill, os.getpid(), SIGKILL)
        else:
            os.kill(os.getpid(), SIGKILL)


class SlowPagePipeline:
    """Holds the item of the page whose URL ends with ``TEST_SLOW_PAGE`` for a minute, as a
    store slow for that one page would; the others pass."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def from_crawler(cls, crawler: Any) -> SlowPagePipeline:
        return cls(crawler.settings["TEST_SLOW_PAGE"])

    async def process_item(self, item: Any) -> Any:
        if item["url"].endswith(self.path):
            await asyncio.sleep(60)
        return item
