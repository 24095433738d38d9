"""Breadth-first search: a FIFO frontier, level by level.

Source: the graph-traversal thesis (IJCA vol. 106 no. 11, 2014), the uninformed baseline of
every focused-crawling comparison. Score = -level; pages of one level pop in discovery order.
No parameters.
"""

from __future__ import annotations

from scrapy import Request

from schedulers.base import StrategyQueue


class BreadthFirstQueue(StrategyQueue):
    name = "bfs"
    reads_link_scores = False

    def score(self, request: Request) -> float:
        return -request.meta.get("depth", 0)
