"""Naive best-first search: every outlink inherits its page's relevance.

Source: the graph-traversal thesis (IJCA vol. 106 no. 11, 2014) and Pant, Srinivasan and
Menczer, "Crawling the Web" (2004): sim(topic, page) is given to all of the page's outlinks.
The source's sim is the cosine of term-frequency vectors; here it is the crawl's page relevance
(``focused.relevance``: tf-idf and LSI combined), which every strategy reads alike.
Ties are broken by the link's own anchor-and-context relevance. Seeds come first.
No parameters.
"""

from __future__ import annotations

from scrapy import Request

from schedulers.base import SEED_SCORE, StrategyQueue


class BestFirstQueue(StrategyQueue):
    name = "bestfirst"

    def score(self, request: Request) -> float:
        return request.meta.get("parent_relevance", SEED_SCORE)

    def tiebreak(self, request: Request) -> float:
        return request.meta.get("link_relevance", 0.0)
