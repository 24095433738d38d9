"""Measurement-only extension (session 12): samples the engine every 0.1 s and prints, when
the spider closes, the mean number of requests downloading, responses waiting for the scraper,
pages in the scraper, and pages the scheduler knows as scored."""

from scrapy import signals
from twisted.internet.task import LoopingCall


class SlotProbe:
    def __init__(self, crawler):
        self.crawler = crawler
        self.samples = []
        self.loop = LoopingCall(self.sample)
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def opened(self, spider):
        self.loop.start(0.1)

    def sample(self):
        engine = self.crawler.engine
        scraper = engine.scraper.slot
        scheduler = engine._slot.scheduler if engine._slot else None
        self.samples.append(
            (
                len(engine.downloader.active),
                len(scraper.queue) if scraper else 0,
                len(scraper.active) if scraper else 0,
                len(getattr(scheduler, "scored_pages", ())),
            )
        )

    def closed(self, spider):
        self.loop.stop()
        means = [sum(column) / len(self.samples) for column in zip(*self.samples, strict=True)]
        print(
            "SLOTPROBE mean downloading {:.2f} scraper-queue {:.2f} scraper-active {:.2f} "
            "scored {:.2f} over {} samples".format(*means, len(self.samples))
        )
