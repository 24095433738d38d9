"""Record a page's relevance on its item, and optionally drop pages not worth storing.

Settings:
    RELEVANCE_THRESHOLD  a page is relevant when its combined score is at least this
                         (default 0.15; the same setting the relevance model uses)
    STORE_MIN_RELEVANCE  pages scoring below this are fetched but not stored ("threshold
                         crawl-and-store"); None or empty = store every page (default None)

Stats: ``focused/not_stored`` (pages dropped by ``STORE_MIN_RELEVANCE``, as ``NotStored``).
Under JOBDIR the crawl counts them too, and the relevant ones among them, as they leave the
pipelines (``focused.resume.CrawlCounters``): after ``kill -9`` the crawl's page and relevant
counts come back from the store (``focused.resume.recover_state``), which lacks these pages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from focused.relevance import Scores

DEFAULT_RELEVANCE_THRESHOLD = 0.15
DIGITS = 6  # scores are stored rounded: more digits are noise, and they bloat the records


class NotStored(DropItem):
    """A page dropped for its relevance below ``STORE_MIN_RELEVANCE``: fetched and scored, its
    outcome settled, unlike a page the store refused."""


class RelevancePipeline:
    """Turns the transient ``scores`` (set by ``RelevanceMiddleware``) into record fields."""

    def __init__(
        self,
        stats: StatsCollector,
        threshold: float = DEFAULT_RELEVANCE_THRESHOLD,
        store_min_relevance: float | None = None,
    ) -> None:
        self.stats = stats
        self.threshold = threshold
        self.store_min_relevance = store_min_relevance

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RelevancePipeline:
        settings = crawler.settings
        min_relevance = settings.get("STORE_MIN_RELEVANCE")
        return cls(
            crawler.stats,
            threshold=settings.getfloat("RELEVANCE_THRESHOLD", DEFAULT_RELEVANCE_THRESHOLD),
            store_min_relevance=None if min_relevance in (None, "") else float(min_relevance),
        )

    def process_item(self, item: Any) -> Any:
        adapter = ItemAdapter(item)
        if adapter.get("scores") is None:
            raise ValueError(f"page {adapter.get('url')} has no scores: is RelevanceMiddleware on?")
        scores = adapter.pop("scores")
        combined = float(scores.combined)
        adapter.update(score_fields(scores, self.threshold))
        if self.store_min_relevance is not None and combined < self.store_min_relevance:
            self.stats.inc_value("focused/not_stored")
            raise NotStored(
                f"relevance {combined:.4f} is below STORE_MIN_RELEVANCE {self.store_min_relevance}",
                log_level="DEBUG",  # expected, and the dropped-item log line carries the whole text
            )
        return item


def score_fields(scores: Scores, threshold: float) -> dict[str, Any]:
    """The record fields of a page's ``Scores``."""
    combined = float(scores.combined)
    return {
        "tfidf": round(float(scores.tfidf), DIGITS),
        "lsi": round(float(scores.lsi), DIGITS),
        "relevance": round(combined, DIGITS),
        # Decided on the unrounded score, as RelevanceMiddleware does for focused/relevant, so
        # that the relevant pages in the store match the crawl's harvest rate.
        "is_relevant": combined >= threshold,
    }
