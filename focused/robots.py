"""robots.txt for every request that waits for it, not only the first.

Scrapy 2.19's ``RobotsTxtMiddleware`` keeps one Deferred per host while that host's robots.txt
is downloading, and each waiting request awaits it through ``maybe_deferred_to_future``. Under
the asyncio reactor that adds a callback which consumes the result: the first waiter gets the
parser, every later one gets ``None`` and is let through unchecked. A crawl that starts from
several URLs on one host (or a recrawl of stored pages) would fetch disallowed pages.

Here each later waiter gets a Deferred of its own, chained to the host's, which passes the parser
on to the next one.

A robots.txt that cannot be downloaded (host down, refused, timed out, not resolved) is logged by
Scrapy with the whole traceback, some sixty lines for each dead host a crawl meets; here it is
the one line of Scrapy's message, which already names the host and the error.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import exceptions
from scrapy.downloadermiddlewares import robotstxt
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as ScrapyRobotsTxt
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.robotstxt import RobotParser


# What a download of a site's robots.txt can fail with when the site is not there: not a bug.
UNREACHABLE = (
    exceptions.CannotResolveHostError,
    exceptions.DownloadConnectionRefusedError,
    exceptions.DownloadFailedError,
    exceptions.DownloadTimeoutError,
    exceptions.ResponseDataLossError,
    OSError,
)


class _UnreachableInOneLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], UNREACHABLE):
            record.exc_info = record.exc_text = None
        return True


class RobotsTxtMiddleware(ScrapyRobotsTxt):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        robots_logger = logging.getLogger(robotstxt.__name__)
        if not any(isinstance(f, _UnreachableInOneLine) for f in robots_logger.filters):
            robots_logger.addFilter(_UnreachableInOneLine())

    async def robot_parser(self, request: Request) -> RobotParser | None:
        pending = self._parsers.get(urlparse_cached(request).netloc)
        if not isinstance(pending, Deferred):
            return await super().robot_parser(request)
        mine: Deferred[RobotParser | None] = Deferred()

        def hand_on(parser: RobotParser | None) -> RobotParser | None:
            mine.callback(parser)
            return parser

        pending.addCallback(hand_on)
        return await maybe_deferred_to_future(mine)
