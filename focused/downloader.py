"""Scrapy's downloader, with each host's concurrency kept.

Scrapy 2.19 counts a request against its download slot's concurrency
(``CONCURRENT_REQUESTS_PER_DOMAIN``, ``CONCURRENT_REQUESTS_PER_IP``, ``DOWNLOAD_SLOTS``) from
the moment its download task starts: ``Slot.transferring`` gains it in ``Downloader._download``.
Under the asyncio reactor that task starts in a later turn of the event loop than the one in
which the slot let the request go, so every request that reached the slot in the same turn
found the slot free: as the engine handed out a burst, or several answers freed the slot at
once, all went on the wire (16 at once to a host whose limit was 4,
``tests/test_politeness.py``). Here a request counts from the moment the slot lets it go.

In a crawl shared by several processes (``focused.distributed``) a slot's delay
(``DOWNLOAD_DELAY``, a robots.txt Crawl-delay, AutoThrottle's) is the crawl's, not only this
process's: before a delayed slot sends, it takes its host's lease in Redis
(``SharedCrawl.lease``), which no process gets again until the delay has passed. Not taken, the
slot is held (``Slot.latercall``, as for its own delay) until the lease ends. A slot without a
delay only looks whether another process was asked to pause the host (Retry-After,
``focused.retryafter``). Concurrency (``CONCURRENT_REQUESTS_PER_DOMAIN``) stays per process.
"""

from __future__ import annotations

from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy.core.downloader import Downloader
from scrapy.utils.asyncio import call_later
from scrapy.utils.defer import _schedule_coro

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from scrapy import Request
    from scrapy.core.downloader import Slot
    from twisted.internet.defer import Deferred


class PoliteDownloader(Downloader):
    def _wait_for_download(
        self, slot: Slot, request: Request, queue_dfd: Deferred
    ) -> Coroutine[Any, Any, None]:
        # Called as the slot lets the request go, before the task that downloads it is started:
        # counted now, the next request reaching the slot in this turn finds one place fewer.
        # Scrapy's _download adds it again (a set) and removes it when the download ends.
        slot.transferring.add(request)
        return super()._wait_for_download(slot, request, queue_dfd)

    def _process_queue(self, slot: Slot) -> None:
        shared = getattr(self.crawler.spider, "shared", None)
        if shared is None or slot.latercall or not slot.queue or slot.free_transfer_slots() <= 0:
            super()._process_queue(slot)  # one process, or nothing to send now
            return
        key = slot.queue[0][0].meta[self.DOWNLOAD_SLOT]  # set as the request reached the slot
        # Drawn once: Scrapy draws a jittered delay at each look, and the lease must last the
        # delay the send below is spaced by.
        delay = slot.download_delay()
        wait = delay - (monotonic() - slot.lastseen)  # this process's own delay comes first
        if wait <= 0:
            wait = shared.lease(key, delay)
        if wait > 0:
            slot.latercall = call_later(wait, self._latercall, slot)
            return
        if not delay:
            super()._process_queue(slot)  # no pause: Scrapy sends what the slot's room allows
            return
        # Taken: one request now; the look below holds the slot for the delay before the next.
        slot.lastseen = monotonic()
        request, queue_dfd = slot.queue.popleft()
        _schedule_coro(self._wait_for_download(slot, request, queue_dfd))
        self._process_queue(slot)
