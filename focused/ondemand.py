"""Components whose modules are imported only when their setting turns them on.

Scrapy imports every component named in ``EXTENSIONS``, ``DOWNLOADER_MIDDLEWARES`` and their
``_BASE`` settings, and builds each to let it turn itself off. So their modules and what those
import are in every crawl's start-up (``python -X importtime``, on a slow machine):

- Scrapy's remote control (``REMOTE_CONTROL_ENABLED``, off in the project): aiohttp's web server,
  0.45 s of a 5.3 s start-up. The project's ``EXTENSIONS_BASE`` leaves Scrapy's out.
- The shared crawl's extension and middleware (``FOCUSED_FRONTIER``): redis and scrapy-redis,
  about 0.2 s.
- The WARC export (``WARC_DIR``): warcio, about 0.06 s.
- Scrapy's cookies middleware (``COOKIES_ENABLED``, off in the project): tldextract, 0.08 s of a
  2.0 s start-up. The project's ``DOWNLOADER_MIDDLEWARES_BASE`` leaves Scrapy's out.

Each class here stands in for one of them in the settings, and builds it when its setting is on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler, load_object

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings


class _OnDemand:
    """Builds ``component`` (its import path) when ``setting`` is on; else refuses itself."""

    setting: ClassVar[str]
    component: ClassVar[str]

    @classmethod
    def is_on(cls, settings: BaseSettings) -> bool:
        return bool(settings.get(cls.setting))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        if not cls.is_on(crawler.settings):
            raise NotConfigured
        return build_from_crawler(load_object(cls.component), crawler)


class _OnDemandFlag(_OnDemand):
    """One of Scrapy's components, turned on by a true/false setting of Scrapy's."""

    @classmethod
    def is_on(cls, settings: BaseSettings) -> bool:
        return settings.getbool(cls.setting)  # "False" given with -s is off


class RemoteControl(_OnDemandFlag):
    setting = "REMOTE_CONTROL_ENABLED"
    component = "scrapy.extensions.remote_control.RemoteControl"


class CookiesMiddleware(_OnDemandFlag):
    setting = "COOKIES_ENABLED"
    component = "scrapy.downloadermiddlewares.cookies.CookiesMiddleware"


class DistributedCrawl(_OnDemand):
    setting = "FOCUSED_FRONTIER"
    component = "focused.distributed.DistributedCrawl"


class FrontierAck(_OnDemand):
    setting = "FOCUSED_FRONTIER"
    component = "focused.distributed.FrontierAck"


class WarcExport(_OnDemand):
    setting = "WARC_DIR"
    component = "focused.warc.WarcExport"
