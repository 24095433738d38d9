"""Scrapy's downloader, with each host's concurrency kept.

Scrapy 2.19 counts a request against its download slot's concurrency
(``CONCURRENT_REQUESTS_PER_DOMAIN``, ``CONCURRENT_REQUESTS_PER_IP``, ``DOWNLOAD_SLOTS``) from
the moment its download task starts: ``Slot.transferring`` gains it in ``Downloader._download``.
Under the asyncio reactor that task starts in a later turn of the event loop than the one in
which the slot let the request go, so every request that reached the slot in the same turn
found the slot free: as the engine handed out a burst, or several answers freed the slot at
once, all went on the wire (16 at once to a host whose limit was 4,
``tests/test_politeness.py``). Here a request counts from the moment the slot lets it go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.core.downloader import Downloader

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
