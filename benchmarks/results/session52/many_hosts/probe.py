"""An extension for ``measure.py``'s crawls: at the close, the robots.txt parsers kept, the
hosts met and the resident memory, in one log line."""

import logging

from scrapy import signals

from focused.robots import RobotsTxtMiddleware

logger = logging.getLogger("probe")


def rss_mb() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return -1


class Probe:
    def __init__(self, crawler) -> None:
        self.crawler = crawler
        crawler.signals.connect(self.closed, signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def closed(self, spider) -> None:
        robots = self.crawler.get_downloader_middleware(RobotsTxtMiddleware)
        hosts = len(spider.state.get("host_pages", {}))
        logger.warning("PROBE parsers=%d hosts=%d rss_mb=%d", len(robots._parsers), hosts, rss_mb())
