"""robots.txt for every request that waits for it, not only the first.

Scrapy 2.19's ``RobotsTxtMiddleware`` keeps one Deferred per host while that host's robots.txt
is downloading, and each waiting request awaits it through ``maybe_deferred_to_future``. Under
the asyncio reactor that adds a callback which consumes the result: the first waiter gets the
parser, every later one gets ``None`` and is let through unchecked. A crawl that starts from
several URLs on one host (or a recrawl of stored pages) would fetch disallowed pages.

Here each later waiter gets a Deferred of its own, chained to the host's, which passes the parser
on to the next one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as ScrapyRobotsTxt
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.robotstxt import RobotParser


class RobotsTxtMiddleware(ScrapyRobotsTxt):
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
