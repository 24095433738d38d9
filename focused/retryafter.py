"""A host that answers 429 or 503 gets a pause before its next request: the one its
``Retry-After`` asks for, else one that doubles with each such answer in a row.

Scrapy's RetryMiddleware retries a 429 (Too Many Requests) or a 503 (Service Unavailable) as soon
as the scheduler hands the retry out, and goes on sending the host's other requests meanwhile:
it ignores the ``Retry-After`` header, in seconds or as an HTTP date, in which the server says
how long to wait, and without one it does not slow down at all. ``RetryAfterMiddleware`` sees
the response as its download ends (``response_downloaded``), before the slot sends the next
request waiting in it and before RetryMiddleware retries it, and holds the host's downloader
slot: neither the retry nor any other request to the host is sent before the pause ends.
Retries are then Scrapy's, as many as ``RETRY_TIMES``.

The pause is the ``Retry-After``'s when the answer has one (a delay of 0, or a date past, asks
for none): the server knows best how long it needs. Without one (or with one that is no delay
nor date), the host's first 429 or 503 in a row pauses it ``RETRY_BACKOFF_BASE`` seconds, and
each further one twice as long as the one before; any other answer ends the run, and so does
Scrapy dropping the host's slot, idle a minute past its last pause (``forget_dropped_slots``:
kept, a wide crawl held a run for every host whose last answer was a 429 or 503). Answers to
the requests that were on the wire as the host was paused say nothing of whether the pause was
long enough, whenever they come: they neither lengthen the run nor end it (the 503s of the
requests a host had on the wire as it went down count once, those a proxy gives each of them
as it times out there, after the first pause has ended, too). Either pause is at most
``RETRY_AFTER_MAX`` seconds: a longer one is cut to it rather than giving up the page, so a host
that keeps answering 429 costs at most ``RETRY_TIMES`` pauses of the cap for each page.

The pause uses the slot's own hold, ``Slot.latercall``, by which the downloader spaces requests
by ``DOWNLOAD_DELAY``: while it is set the slot sends nothing, and when it fires the downloader
sends the slot's queue, by the slot's delay as before. Other hosts are not held. In a crawl
shared by several processes (``focused.distributed``) the pause is the crawl's: it is also set on
the host's lease in Redis (``SharedCrawl.pause``), which every process's downloader looks at
before it sends to the host (``focused.downloader``). The run of answers is each process's own.
"""

from __future__ import annotations

import logging
import weakref
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from time import monotonic
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.core.downloader import Downloader
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import call_later

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapy import Request
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


def backoff_seconds(answers: int, base: float, most: float) -> float:
    """The pause after a host's ``answers``-th 429 or 503 in a row without ``Retry-After``:
    ``base`` seconds, doubled for each answer after the first, at most ``most``."""
    # 2.0 ** 1024 overflows; by then the cap has long been reached.
    return min(most, base * 2.0 ** min(answers - 1, 1000))


class RetryAfterMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.max_pause = crawler.settings.getfloat("RETRY_AFTER_MAX")
        self.backoff_base = crawler.settings.getfloat("RETRY_BACKOFF_BASE")
        self._paused_until: dict[str, float] = {}  # slot key -> monotonic time
        # Slot key -> its 429s and 503s in a row, while its slot lives (forget_dropped_slots).
        self._answers: dict[str, int] = {}
        # Slot key -> its requests sent before it was last paused, until each is answered here
        # (weakly: one whose download fails is not).
        self._sent_before: dict[str, weakref.WeakSet[Request]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RetryAfterMiddleware:
        if crawler.settings.getfloat("RETRY_AFTER_MAX") <= 0:
            raise NotConfigured  # Scrapy's behaviour: retried at once
        middleware = cls(crawler)
        # Sent as the download ends, before its slot sends the next request waiting there: seen
        # in process_response, the answer came too late to hold that one back.
        crawler.signals.connect(middleware.response_downloaded, signal=signals.response_downloaded)
        return middleware

    @property
    def paused_until(self) -> Mapping[str, float]:
        """When each slot paused may send again (monotonic time; past, for some, until the next
        pause)."""
        return self._paused_until

    def response_downloaded(self, response: Response, request: Request) -> None:
        key = request.meta.get(Downloader.DOWNLOAD_SLOT)  # set by the downloader when it sent it
        if key is None:
            return
        # Sent before the host's last pause (nothing is sent during one), answered during it or
        # after, when a proxy times each of them out: it tells nothing of the pause.
        held = self._sent_before_pause(key, request)
        if response.status not in PAUSE_STATUSES:
            if not held:  # the run ends, and with it the pause's record
                self._answers.pop(key, None)
                self._paused_until.pop(key, None)
            return
        if not held:
            self._answers[key] = self._answers.get(key, 0) + 1
        header = response.headers.get(b"Retry-After")
        seconds = retry_after_seconds(header)
        if seconds is not None:
            if seconds:
                reason = f"with Retry-After {header.decode('latin-1')}"
                if self._pause(key, request, response, min(seconds, self.max_pause), reason):
                    self.stats.inc_value("focused/retry_after/pauses")
        elif not held and self.backoff_base > 0:
            answers = self._answers[key]
            seconds = backoff_seconds(answers, self.backoff_base, self.max_pause)
            reason = f"without Retry-After, {answers} in a row"
            if self._pause(key, request, response, seconds, reason):
                self.stats.inc_value("focused/retry_backoff/pauses")

    def forget_dropped_slots(self) -> None:
        """Forget the run of answers of each host whose slot Scrapy dropped (idle a minute past
        its last pause, ``PoliteDownloader._slot_gc``), with no pause pending: kept, a crawl
        held one for every host it ever met whose last answer was a 429 or 503. Its next 429 or
        503 starts a run again, from ``RETRY_BACKOFF_BASE``: the host was left alone longer
        than the pause its run had reached, and its slot was dropped. A host answering 429
        again and again keeps its slot (its retries, its pauses), and its pause doubles."""
        slots, now = self.crawler.engine.downloader.slots, monotonic()
        for key in [key for key in self._answers if key not in slots]:
            if self._paused_until.get(key, 0.0) <= now:
                del self._answers[key]
                self._paused_until.pop(key, None)
                self._sent_before.pop(key, None)

    def _sent_before_pause(self, key: str, request: Request) -> bool:
        """Whether ``request``, answered now, was sent before slot ``key`` was last paused."""
        before = self._sent_before.get(key)
        if before is None or request not in before:
            return False
        before.discard(request)
        if not before:
            del self._sent_before[key]
        return True

    def _pause(
        self, key: str, request: Request, response: Response, seconds: float, reason: str
    ) -> bool:
        """Holds slot ``key`` for ``seconds``; whether it was not held as long already."""
        downloader: Downloader = self.crawler.engine.downloader
        slot = downloader.slots.get(key)
        if slot is None:
            return False
        now = monotonic()
        until = now + seconds
        if until <= self._paused_until.get(key, 0.0):
            return False  # already held as long
        # A pause past holds nothing (PoliteDownloader keeps a slot's own end anyway): kept, a
        # host whose last answer was a 429 or 503 had its entry for good. Dropped here, once a
        # pause, they are at most those that began within RETRY_AFTER_MAX.
        for ended in [other for other, end in self._paused_until.items() if end <= now]:
            del self._paused_until[ended]
        self._paused_until[key] = until
        # Sent: those the slot let go, on the wire or answered but not yet seen here (the slot's
        # active requests but those it queues). Any from an earlier pause not seen yet are too.
        queued = {waiting for waiting, _ in slot.queue}
        sent = slot.active - queued - {request}
        # Kept only while one of them is unanswered: empty sets, kept for good, were some 1 KB
        # for every host ever paused. Those whose requests all failed since (weakly held, they
        # are gone) are dropped here.
        for emptied in [other for other, before in self._sent_before.items() if not before]:
            del self._sent_before[emptied]
        if sent:
            self._sent_before[key] = weakref.WeakSet(sent)
        else:
            self._sent_before.pop(key, None)
        # A pending hold (DOWNLOAD_DELAY's) is replaced: when ours fires, the downloader
        # works out the slot's delay again from lastseen.
        if slot.latercall:
            slot.latercall.cancel()
        slot.latercall = call_later(seconds, downloader._latercall, slot)
        # Scrapy drops a slot idle for a minute past lastseen + delay, and a new one would not be
        # held: this keeps it a minute past the pause (PoliteDownloader keeps a held slot
        # anyway, whatever its delay becomes meanwhile), and a JOBDIR pause holds the host
        # until then (focused.downloader). The delay then ends with the pause.
        slot.lastseen = max(slot.lastseen, until - slot.delay)
        if (shared := getattr(self.crawler.spider, "shared", None)) is not None:
            shared.pause(key, seconds)
        logger.info(
            "%s answered %d %s: no request to it for %.3g s", key, response.status, reason, seconds
        )
        return True
