"""The crawl's stats collector (focused.stats)."""

from __future__ import annotations

from scrapy import Spider
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

import focused.settings


def project_crawler():
    return get_crawler(Spider, {"STATS_CLASS": focused.settings.STATS_CLASS})


def test_a_stats_call_is_scrapys_method_itself_without_the_per_access_wrapper():
    """Each call went through Scrapy 2.19's wrapper, 20 x the cost of the method."""
    stats = project_crawler().stats
    assert stats.inc_value.__func__ is MemoryStatsCollector.inc_value
    assert stats.get_value.__func__ is MemoryStatsCollector.get_value


def test_stats_count_as_scrapys_and_still_take_the_spider_argument():
    crawler = project_crawler()
    stats, spider = crawler.stats, Spider("s")
    stats.inc_value("pages")
    stats.inc_value("pages", 2, spider=spider)
    stats.max_value("most", 3)
    stats.max_value("most", 2)
    stats.min_value("least", 3)
    stats.min_value("least", 5)
    stats.set_value("name", "x", spider=spider)
    assert stats.get_stats() == {"pages": 3, "most": 3, "least": 3, "name": "x"}
    assert stats.get_value("absent", 7) == 7
