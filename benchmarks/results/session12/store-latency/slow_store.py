"""A store a round trip away, for the session-12 measurement: each page's item waits DELAY
seconds in one of the reactor's worker threads after the project's own pipelines, as a
MongoDB write does (``pipelines.storage`` calls a thread-safe store in worker threads).

    PYTHONPATH=<this dir> scrapy crawl topical ... \
        -s ITEM_PIPELINES='{..., "slow_store.SlowStore": 900}' -s SLOW_STORE_DELAY=0.05
"""

import time

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread


class SlowStore:
    def __init__(self, delay: float) -> None:
        self.delay = delay

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.getfloat("SLOW_STORE_DELAY", 0.05))

    async def process_item(self, item):
        await maybe_deferred_to_future(deferToThread(time.sleep, self.delay))
        return item
