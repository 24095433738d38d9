"""Components whose modules are imported only when their setting turns them on.

Scrapy imports every component named in ``EXTENSIONS``, ``DOWNLOADER_MIDDLEWARES`` and their
``_BASE`` settings, and builds each to let it turn itself off. So their modules and what those
import are in every crawl's start-up (``python -X importtime``, on a slow machine):

- Scrapy's remote control (``REMOTE_CONTROL_ENABLED``, off in the project): aiohttp's web server,
  0.45 s of a 5.3 s start-up. The project's ``EXTENSIONS_BASE`` leaves Scrapy's out.
- The shared crawl's extension and middleware (``FOCUSED_FRONTIER``): redis and scrapy-redis,
  about 0.2 s.

Each class here stands in for one of them in the settings, and builds it when its setting is on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class RemoteControl:
    """Scrapy's ``RemoteControl``, with ``REMOTE_CONTROL_ENABLED``."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        if not crawler.settings.getbool("REMOTE_CONTROL_ENABLED"):
            raise NotConfigured
        from scrapy.extensions.remote_control import RemoteControl as ScrapyRemoteControl

        return build_from_crawler(ScrapyRemoteControl, crawler)


class DistributedCrawl:
    """``focused.distributed.DistributedCrawl``, with ``FOCUSED_FRONTIER``."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        if not crawler.settings.get("FOCUSED_FRONTIER"):
            raise NotConfigured
        from focused.distributed import DistributedCrawl as Extension

        return build_from_crawler(Extension, crawler)


class FrontierAck:
    """``focused.distributed.FrontierAck``, with ``FOCUSED_FRONTIER``."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        if not crawler.settings.get("FOCUSED_FRONTIER"):
            raise NotConfigured
        from focused.distributed import FrontierAck as Middleware

        return build_from_crawler(Middleware, crawler)
