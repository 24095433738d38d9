"""The progress line of a focused crawl, in the style of Scrapy's LogStats.

Every ``FOCUSED_LOGSTATS_INTERVAL`` seconds (default 30; 0 turns it off) it logs pages fetched,
relevant pages, harvest rate and frontier size: the pages are the crawl's counters (so a run resumed
from JOBDIR starts from the counts it resumes), the frontier the ``focused/frontier`` stat, which
the scheduler counts afresh for each line (``frontier_count_wanted``). While requests of the
frontier are held for their host's failed robots.txt (``ROBOTS_HOLD_RETRIES``), the line says how
many, of how many hosts, how many of those are being fetched again and when the next is: a crawl
left with them alone waits for them, up to ``ROBOTS_HOLD_RETRIES`` times
``ROBOTS_RETRY_FAILED_AFTER``, and looked stuck.
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

from focused.errors import counted
from focused.resume import crawl_counter

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

# Sent before each line: the scheduler counts the frontier for the ``focused/frontier`` stat at
# most once a second as requests come and go (a count is a round trip in a shared crawl), so
# between two counts the stat missed the links queued since, a whole page's of them.
frontier_count_wanted = object()
# Counted by the scheduler with the frontier: the requests held for their host's failed
# robots.txt, their hosts (netlocs), how many of those are being fetched again now, and when the
# next of the others is (a UTC datetime; None when none is waiting).
HOLDING_REQUESTS = "focused/robots/holding_requests"
HOLDING_HOSTS = "focused/robots/holding_hosts"
HOLDING_FETCHING = "focused/robots/holding_fetching"
HOLDING_UNTIL = "focused/robots/holding_until"


class ProgressLog:
    def __init__(self, crawler: Crawler, interval: float) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.interval = interval
        self._loop: task.LoopingCall | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProgressLog:
        interval = crawler.settings.getfloat("FOCUSED_LOGSTATS_INTERVAL")
        if not interval:
            raise NotConfigured
        extension = cls(crawler, interval)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self, spider: Spider) -> None:
        self._loop = task.LoopingCall(self.log)
        self._loop.start(self.interval, now=False)

    def log(self) -> None:
        spider = self.crawler.spider
        pages, relevant = crawl_counter(spider, "pages"), crawl_counter(spider, "relevant")
        self.crawler.signals.send_catch_log(frontier_count_wanted)
        logger.info(
            "Focused: %(pages)s, %(relevant)d relevant (harvest rate %(harvest).3f),"
            " frontier %(frontier)s%(held)s",
            {
                "pages": counted(pages, "page"),
                "relevant": relevant,
                "harvest": relevant / pages if pages else 0.0,
                "frontier": counted(self.stats.get_value("focused/frontier", 0), "request"),
                "held": self._held(),
            },
        )

    def _held(self) -> str:
        """What the line says of the requests held for a failed robots.txt, if any."""
        requests = self.stats.get_value(HOLDING_REQUESTS, 0)
        if not requests:
            return ""
        hosts = self.stats.get_value(HOLDING_HOSTS, 0)
        until = self.stats.get_value(HOLDING_UNTIL)
        fetching = self.stats.get_value(HOLDING_FETCHING, 0)
        if until is None:
            when = "being fetched again"
        else:
            seconds = math.ceil(max(0.0, (until - datetime.now(UTC)).total_seconds()))
            # One host's being fetched, another's due later: "the next fetched again in 30 s"
            # read as if none were being fetched.
            if fetching:
                when = f"{fetching} being fetched again, the next in {seconds} s"
            else:
                when = f"{'the next ' if hosts > 1 else ''}fetched again in {seconds} s"
        return (
            f", {requests} of them held for the robots.txt of {counted(hosts, 'host')} that"
            f" failed: {when}"
        )

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.log()
