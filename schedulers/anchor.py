"""Link-evidence best-first: a link is judged by its own anchor and context, then its page.

Source: the lesson of this project's harvest benchmark (issue 7) and the neighbourhood score of
Shark-search (Hersovici et al., 1998, via Pant, Srinivasan & Menczer, "Crawling the Web", 2004):
what a link says about its target (anchor text and the words around it) predicts the target's
topic better than the page it sits on, which naive best-first passes to every outlink.

    score = link_weight * link_relevance + (1 - link_weight) * parent_relevance

``link_relevance`` is the crawl's relevance model applied to anchor + context (written by the
scoring middleware). Seeds come first. Ties pop in discovery order.

Parameters:
    link_weight (float, default 0.7): share of the link's own evidence in the score.
"""

from __future__ import annotations

from scrapy import Request

from focused.arguments import Param
from schedulers.base import SEED_SCORE, StrategyQueue


class AnchorQueue(StrategyQueue):
    name = "anchor"
    params = {"link_weight": Param(0.7, "share of anchor+context relevance in the score", 0.0, 1.0)}

    def score(self, request: Request) -> float:
        meta = request.meta  # a property: read once, this runs on every push
        if "parent_relevance" not in meta:
            return SEED_SCORE
        weight = self.params["link_weight"]
        link = self.link_evidence(meta)
        return weight * link + (1.0 - weight) * meta["parent_relevance"]

    def link_evidence(self, meta: dict) -> float:
        """What the link itself says about its target, in [0, 1]."""
        return meta.get("link_relevance", 0.0)
