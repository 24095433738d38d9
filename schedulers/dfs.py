"""Depth-first search: a LIFO frontier with a depth limit.

Source: the graph-traversal thesis (IJCA vol. 106 no. 11, 2014): DFS uses a stack and needs a
depth limit; the thesis fixed it at 5 levels below the seeds.

Parameters:
    max_depth (int, default 5): links deeper than this level are not queued.

Score = discovery order, so the link found last is fetched first; a link found again moves
back to the top of the stack, as in stack-based graph DFS.
"""

from __future__ import annotations

from scrapy import Request

from focused.arguments import Param
from schedulers.base import StrategyQueue


class DepthFirstQueue(StrategyQueue):
    name = "dfs"
    reads_link_scores = False
    params = {"max_depth": Param(5, "deepest level to queue", low=0)}

    def score(self, request: Request) -> float:
        return request.meta.get("discovery", 0)

    def admit(self, request: Request) -> bool:
        if request.meta.get("depth", 0) <= self.params["max_depth"]:
            return True
        self.stats.inc_value("focused/depth_cut")
        return False
