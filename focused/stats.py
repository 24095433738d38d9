"""The crawl's stats collector: Scrapy's in-memory one, without its per-access wrapper.

Scrapy 2.19's ``StatsCollector`` routes every attribute access through ``__getattribute__`` to
wrap its methods in a check for their deprecated ``spider`` argument, and a method's own access
to ``self._stats`` takes the wrapper's slow path (an ``AttributeError`` raised and caught). An
``inc_value`` then costs 1.6 µs instead of 0.07 µs, and a crawl makes a few hundred stats calls
a page (Scrapy's scheduler and depth middleware count every link): about a fiftieth of a topical
page's CPU on the reactor thread (BENCHMARKS.md, "Session 21"). The methods are Scrapy's; a
caller that still passes ``spider`` is served as before, only not warned.
"""

from __future__ import annotations

from scrapy.statscollectors import MemoryStatsCollector


class StatsCollector(MemoryStatsCollector):
    __getattribute__ = object.__getattribute__
