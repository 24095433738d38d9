"""A host that answers 429 or 503 with ``Retry-After`` gets that pause before its next request.

Scrapy's RetryMiddleware retries a 429 (Too Many Requests) or a 503 (Service Unavailable) as soon
as the scheduler hands the retry out, and goes on sending the host's other requests meanwhile:
it ignores the ``Retry-After`` header, in seconds or as an HTTP date, in which the server says
how long to wait. ``RetryAfterMiddleware`` sees the response before RetryMiddleware does and
holds the host's downloader slot for that long (at most ``RETRY_AFTER_MAX`` seconds): neither
the retry nor any other request to the host is sent before. Retries are then Scrapy's, as many
as ``RETRY_TIMES``. A longer Retry-After is cut to the cap rather than giving up the page: a
host that keeps answering 429 costs at most ``RETRY_TIMES`` pauses of the cap for each page.

The pause uses the slot's own hold, ``Slot.latercall``, by which the downloader spaces requests
by ``DOWNLOAD_DELAY``: while it is set the slot sends nothing, and when it fires the downloader
sends the slot's queue, by the slot's delay as before. Other hosts are not held. In a crawl
shared by several processes (``focused.distributed``) the pause is the crawl's: it is also set on
the host's lease in Redis (``SharedCrawl.pause``), which every process's downloader looks at
before it sends to the host (``focused.downloader``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from time import monotonic
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import call_later

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.core.downloader import Downloader
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

# The statuses whose Retry-After asks a client to come back later (RFC 9110, 10.2.3).
PAUSE_STATUSES = (429, 503)


def retry_after_seconds(value: bytes | None, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header value asks to wait; None if it is not a delay or a date."""
    if not value:
        return None
    text = value.decode("latin-1").strip()
    if text.isascii() and text.isdigit():  # "²" is a digit to str.isdigit, not to float
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # HTTP dates are in GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class RetryAfterMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.max_pause = crawler.settings.getfloat("RETRY_AFTER_MAX")
        self._paused_until: dict[str, float] = {}  # slot key -> monotonic time

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RetryAfterMiddleware:
        if crawler.settings.getfloat("RETRY_AFTER_MAX") <= 0:
            raise NotConfigured  # Scrapy's behaviour: retried at once
        return cls(crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        if response.status in PAUSE_STATUSES:
            seconds = retry_after_seconds(response.headers.get(b"Retry-After"))
            if seconds:
                self._pause(request, response, min(seconds, self.max_pause))
        return response

    def _pause(self, request: Request, response: Response, seconds: float) -> None:
        downloader: Downloader = self.crawler.engine.downloader
        key = request.meta.get(downloader.DOWNLOAD_SLOT)  # set by the downloader when it sent it
        slot = downloader.slots.get(key) if key is not None else None
        if slot is None:
            return
        until = monotonic() + seconds
        if until <= self._paused_until.get(key, 0.0):
            return  # already held as long
        self._paused_until[key] = until
        # A pending hold (DOWNLOAD_DELAY's) is replaced: when ours fires, the downloader
        # works out the slot's delay again from lastseen.
        if slot.latercall:
            slot.latercall.cancel()
        slot.latercall = call_later(seconds, downloader._latercall, slot)
        # Scrapy drops a slot idle for a minute past lastseen + delay, and a new one would not be
        # held: this keeps it a minute past the pause. The delay then ends with the pause.
        slot.lastseen = max(slot.lastseen, until - slot.delay)
        if (shared := getattr(self.crawler.spider, "shared", None)) is not None:
            shared.pause(key, seconds)
        self.stats.inc_value("focused/retry_after/pauses")
        logger.info(
            "%s answered %d with Retry-After %s: no request to it for %.3g s",
            key,
            response.status,
            response.headers.get(b"Retry-After", b"").decode("latin-1"),
            seconds,
        )
