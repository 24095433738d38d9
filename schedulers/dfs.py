"""Depth-first search: a LIFO frontier with a depth limit.

Source: the graph-traversal thesis (IJCA vol. 106 no. 11, 2014): DFS uses a stack and needs a
depth limit; the thesis fixed it at 5 levels below the seeds.

Parameters:
    max_depth (int, default 5): links deeper than this level are not queued.

Score = discovery order, so the link found last is fetched first; a link found again moves
back to the top of the stack, as in stack-based graph DFS. Seeds come first, in the order given:
they are the roots of the search, so a link to a seed found before the seed is fetched must not
put it back on the stack as that page's child, a level deeper.
"""

from __future__ import annotations

from scrapy import Request

from focused.arguments import Param
from schedulers.base import StrategyQueue

# Above any discovery count: the score of a seed.
SEED_FIRST = 2.0**62


class DepthFirstQueue(StrategyQueue):
    name = "dfs"
    reads_link_scores = False
    params = {"max_depth": Param(5, "deepest level to queue", low=0)}

    def score(self, request: Request) -> float:
        meta = request.meta
        if meta.get("depth", 0) == 0:
            return SEED_FIRST  # a seed: equal keys pop in push order, the order given
        return meta.get("discovery", 0)

    def admit(self, request: Request) -> bool:
        if request.meta.get("depth", 0) <= self.params["max_depth"]:
            return True
        self.stats.inc_value("focused/depth_cut")
        return False

    def links_left_out(self) -> tuple[str, str]:
        return "focused/depth_cut", "max_depth"
