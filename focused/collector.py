"""The cyclic garbage collector, tuned for a crawl once its start-up is done.

A focused crawl loads gensim, scipy, the sentence encoder, its tokenizer and vocabulary tables
before its first request: objects that live as long as the crawl. Python's full collections
walked them all again (8-9 in a 1,000-page crawl, up to 260-430 ms each, holding the GIL: the
crawl's longest reactor stalls), and its young collections ran every 700 allocations, over
1,000 times. Once the engine has started, with the spider, its model and encoder loaded at
``spider_opened``, this extension:

- ``FOCUSED_GC_FREEZE``: collects once, then moves every object left into the permanent
  generation (``gc.freeze()``), which no collection walks again;
- ``FOCUSED_GC_GEN0_THRESHOLD``: collects the young generation every this many allocations
  (net of deallocations) instead of 700, so a crawl pays for far fewer collections.

Objects made later are collected as before, only less often: memory stays bounded (the same max
RSS over a 1,000-page crawl). Only cycles among start-up objects that become garbage later are
never freed. BENCHMARKS.md, "The garbage collector (session 8)".
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


def tune_collector(freeze: bool, gen0_threshold: int) -> int:
    """Freeze what exists (after a collection, so garbage is freed rather than kept) and set the
    young generation's threshold (0: Python's own); returns the number of frozen objects."""
    if gen0_threshold:
        gc.set_threshold(gen0_threshold, *gc.get_threshold()[1:])
    if freeze:
        gc.collect()
        gc.freeze()
    return gc.get_freeze_count()


class GarbageCollector:
    def __init__(self, crawler: Crawler, freeze: bool, gen0_threshold: int) -> None:
        self.stats = crawler.stats
        self.freeze = freeze
        self.gen0_threshold = gen0_threshold

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> GarbageCollector:
        freeze = crawler.settings.getbool("FOCUSED_GC_FREEZE")
        gen0_threshold = crawler.settings.getint("FOCUSED_GC_GEN0_THRESHOLD")
        if not freeze and not gen0_threshold:
            raise NotConfigured
        extension = cls(crawler, freeze, gen0_threshold)
        # engine_started comes after every spider_opened handler (the encoder is loaded there).
        crawler.signals.connect(extension.engine_started, signal=signals.engine_started)
        return extension

    def engine_started(self) -> None:
        frozen = tune_collector(self.freeze, self.gen0_threshold)
        self.stats.set_value("focused/gc_frozen_objects", frozen)
        logger.info(
            "Garbage collector: %(frozen)d start-up objects frozen, thresholds %(thresholds)s",
            {"frozen": frozen, "thresholds": gc.get_threshold()},
        )
