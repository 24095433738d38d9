"""Waking Scrapy's engine.

The engine asks the scheduler for requests when a download ends, when a request is queued, and
every 5 seconds (its heartbeat). A request the scheduler held back for a reason that ends
otherwise (a host's robots.txt read, the time up of one that failed, another process of a
shared crawl done, a page scored without a link to queue) would wait for one of those;
``wake_engine`` makes the engine ask at its next turn. Scrapy has no public call for it: its
engine slot's ``nextcall`` (tests/test_scrapy_internals.py).

Nor for the crawl's scheduler, which the local-search strategies and the page budget read:
``engine_scheduler`` takes it from the same slot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def wake_engine(crawler: Crawler) -> None:
    """Make the engine ask the scheduler again at its next turn (nothing while it is closed)."""
    slot = getattr(crawler.engine, "_slot", None)
    if slot is not None:
        slot.nextcall.schedule()


def engine_scheduler(crawler: Crawler) -> Any:
    """The crawl's scheduler (a ``focused.scheduler.FocusedScheduler`` in a crawl), or None
    outside an open spider."""
    try:
        engine = crawler.engine
    except RuntimeError:  # Scrapy's: not set before the crawl starts
        return None
    return getattr(getattr(engine, "_slot", None), "scheduler", None)
