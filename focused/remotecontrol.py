"""Scrapy's remote control (``REMOTE_CONTROL_ENABLED``), its module imported only when it is on.

Scrapy builds every extension of ``EXTENSIONS`` and lets each refuse itself, so its
``RemoteControl`` module was imported by every crawl, and with it aiohttp's web server: 0.45 s
of a crawl's 5.3 s start-up on a slow machine (``python -X importtime``), for a port the project
leaves closed (``REMOTE_CONTROL_ENABLED = False``). This extension takes its place in
``EXTENSIONS`` and builds Scrapy's when the setting turns it on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class RemoteControl:
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        if not crawler.settings.getbool("REMOTE_CONTROL_ENABLED"):
            raise NotConfigured
        from scrapy.extensions.remote_control import RemoteControl as ScrapyRemoteControl

        return build_from_crawler(ScrapyRemoteControl, crawler)
