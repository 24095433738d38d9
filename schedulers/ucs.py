"""Uniform-cost search: the frontier URL with the lowest path cost is fetched first.

Source: the graph-traversal thesis (IJCA vol. 106 no. 11, 2014), after Russell & Norvig:
uniform-cost search always expands the node of lowest path cost g.

Here g = the sum, over the fetched pages on the path from a seed to the link, of
(1 - relevance): ``meta["path_cost"]``, written by ``RelevanceMiddleware``. A path through
on-topic pages is cheap, so UCS prefers long chains of relevant pages to short detours through
off-topic ones. Seeds cost 0. Equal costs pop in discovery order. No parameters.
"""

from __future__ import annotations

from scrapy import Request

from schedulers.base import StrategyQueue


class UniformCostQueue(StrategyQueue):
    name = "ucs"
    reads_link_scores = False

    def score(self, request: Request) -> float:
        return -request.meta.get("path_cost", 0.0)
