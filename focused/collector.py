"""Start-up objects kept out of the cyclic garbage collector's way (``FOCUSED_GC_FREEZE``).

A focused crawl loads gensim, scipy, the sentence encoder, its tokenizer and vocabulary tables
before its first request: hundreds of thousands of objects that live as long as the crawl. Every
full collection walked them all again (9 of them in a 1,000-page crawl, up to ~290 ms each,
holding the GIL: the crawl's longest reactor stalls). Once the engine has started, with the
spider, its model and encoder loaded at ``spider_opened``, this collects once, then moves every
object left into the permanent generation (``gc.freeze()``), which no collection walks again.
Objects made later are collected as before, so memory stays bounded: only cycles among the
start-up objects that become garbage later would not be freed. BENCHMARKS.md, "The garbage
collector (session 8)".
"""

from __future__ import annotations

import gc
import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class FreezeStartup:
    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FreezeStartup:
        if not crawler.settings.getbool("FOCUSED_GC_FREEZE"):
            raise NotConfigured
        extension = cls(crawler)
        # engine_started comes after every spider_opened handler (the encoder is loaded there).
        crawler.signals.connect(extension.engine_started, signal=signals.engine_started)
        return extension

    def engine_started(self) -> None:
        gc.collect()  # the start-up's garbage is freed, not frozen
        gc.freeze()
        frozen = gc.get_freeze_count()
        self.stats.set_value("focused/gc_frozen_objects", frozen)
        logger.debug(
            "Froze %(frozen)d start-up objects out of the garbage collector's walks",
            {"frozen": frozen},
        )
