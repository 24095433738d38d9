"""The oracle: fetch the page closest to a relevant page first. A reference, not a crawler.

It reads the answer key, so it exists only to give the upper reference of a benchmark: how much
harvest the link graph allows from the seeds (Anthelion's simulator and the focused-crawling
literature compare against such a perfect-knowledge ordering). ``python -m benchmarks.harvest``
computes, from the ground-truth labels, the fewest links from every page to a relevant page and
writes them to a JSON file ``{url: distance}``; the setting ``ORACLE_DISTANCES`` names that file.
The crawler never reads categories: without the file the strategy is refused.

Score = -distance of the link's target (relevant pages, distance 0, first); a page that reaches
no relevant page comes last. Equal distances pop in discovery order. No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from scrapy import Request

from focused.errors import ConfigError, cut, load_json, quoted, setting_options
from schedulers.base import StrategyQueue

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

# Below every real distance: a page from which no relevant page can be reached.
UNREACHABLE = 1_000_000


def load_distances(path: str) -> dict[str, int]:
    """The ``{url: distance}`` file, keyed by the percent-decoded URL. A distance is a count of
    links below ``UNREACHABLE``: one past 64 bits (or 1e300) failed the JOBDIR frontier's
    SQLite with a traceback, and the seed was lost."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = load_json(f.read())
        distances = {unquote(url): int(distance) for url, distance in raw.items()}
    except (OSError, ValueError, TypeError, AttributeError, OverflowError) as exc:
        raise ConfigError(
            f"ORACLE_DISTANCES={path!r} is not a readable distances file: {cut(str(exc))}"
        ) from None
    for url, distance in distances.items():
        if not 0 <= distance < UNREACHABLE:
            raise ConfigError(
                f"ORACLE_DISTANCES={path!r} is not a readable distances file: {quoted(url)} is"
                f" {cut(str(distance))} links away; a distance is 0 to {UNREACHABLE - 1}"
            )
    return distances


class OracleQueue(StrategyQueue):
    name = "oracle"
    reads_link_scores = False

    @classmethod
    def distances(cls, settings: Any, scrapyd: bool = False) -> dict[str, int]:
        path = settings.get("ORACLE_DISTANCES")
        if not path:
            needed = setting_options("ORACLE_DISTANCES=FILE", scrapyd=scrapyd)
            raise ConfigError(
                f"strategy oracle is a benchmark reference: it needs {needed}"
                " (written by python -m benchmarks.harvest)"
            )
        return load_distances(path)

    @classmethod
    def check_settings(cls, settings: Any, scrapyd: bool = False) -> None:
        cls.distances(settings, scrapyd)

    def __init__(self, crawler: Crawler, key: str = "", state: dict[str, Any] | None = None):
        self._distances = self.distances(crawler.settings)
        super().__init__(crawler, key, state)

    def score(self, request: Request) -> float:
        return -self._distances.get(unquote(request.url), UNREACHABLE)
