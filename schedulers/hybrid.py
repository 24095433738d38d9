"""The combined method: breadth-first over the first levels, then best-first or depth-first.

Source: the graph-traversal thesis (IJCA vol. 106 no. 11, 2014): crawl levels 1, 1-2 or 1-3
breadth-first, then continue depth-first to a fixed depth (5 levels below the seeds there).

One queue holds both parts. Every link at level <= ``bfs_levels`` scores above any link
deeper down, and among themselves they pop as in ``bfs`` (level by level, in discovery order);
the deeper links pop in the order of the ``then`` strategy. So the crawl finishes the BFS
levels it has found before it follows the second order, and a link deeper down that is found
again at a shallow level moves into the BFS part.

Parameters:
    bfs_levels (int, default 2): the deepest level crawled breadth-first (0: the seeds only).
        The thesis crawls levels 1, 1-2 or 1-3 breadth-first and names none the best: 2 is
        this project's choice, not tuned. At a budget of |rel| the public topics' crawls end
        within those two levels, as ``bfs`` does (mean harvest@|rel| 0.254, against 0.304 at
        ``bfs_levels=1``, BENCHMARKS.md, session 53).
    then (str, default ``bestfirst``): the order below those levels, ``bestfirst`` or ``dfs``
        (which, as breadth-first, reads no link scores: the crawl does not score its links then,
        and stores no ``link_relevance``).
        The thesis continues depth-first (``then=dfs``); the default ``bestfirst`` is this
        project's choice, not the thesis's: on the public topics, a crawl that gets past its
        breadth-first levels harvests more with it (mean harvest@|rel| 0.304 against 0.262 at
        ``bfs_levels=1``, 0.298 against 0.090 at 0, BENCHMARKS.md, session 53).
    max_depth (int, default 5): with ``then=dfs``, links deeper than this are not queued (the
        thesis's fixed depth), so it may not be below ``bfs_levels``. Best-first has no depth
        limit: given with ``then=bestfirst``, it is refused.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from scrapy import Request

from focused.arguments import Param
from focused.errors import ConfigError
from schedulers.base import StrategyQueue
from schedulers.bestfirst import BestFirstQueue
from schedulers.bfs import BreadthFirstQueue
from schedulers.dfs import DepthFirstQueue

SECOND_ORDERS: dict[str, type[StrategyQueue]] = {
    "bestfirst": BestFirstQueue,
    "dfs": DepthFirstQueue,
}
# Above any score of the second order (a dfs score is a discovery count).
BFS_PART = 1e15


class HybridQueue(StrategyQueue):
    name = "hybrid"
    params = {
        "bfs_levels": Param(2, "deepest level crawled breadth-first", low=0),
        "then": Param("bestfirst", "order below the BFS levels", choices=tuple(SECOND_ORDERS)),
        "max_depth": Param(
            5, "with then=dfs, deepest level to queue", low=0, works_with=("then", "dfs")
        ),
    }

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        # The thesis crawls the breadth-first levels, then depth-first down to the fixed depth:
        # a depth limit below the last BFS level would cut it and end the crawl there.
        if params["then"] == "dfs" and params["max_depth"] < params["bfs_levels"]:
            raise ConfigError(
                f"max_depth={params['max_depth']} is below bfs_levels={params['bfs_levels']}:"
                " with then=dfs, the breadth-first levels would be cut"
            )

    @classmethod
    def reads_link_scores_with(cls, params: dict[str, Any]) -> bool:
        # Neither breadth-first nor depth-first reads them: a crawl then=dfs need not score them.
        second = SECOND_ORDERS[params["then"]]
        return BreadthFirstQueue.reads_link_scores or second.reads_link_scores_with(params)

    @cached_property
    def then(self) -> type[StrategyQueue]:
        # Read first while the base class opens the queue (the requests a crash left in flight
        # are pushed again there), before an __init__ of this class could set it.
        return SECOND_ORDERS[self.params["then"]]

    def _breadth_first(self, request: Request) -> bool:
        return request.meta.get("depth", 0) <= self.params["bfs_levels"]

    # The second order's methods read only the request, and params/stats that this queue has.
    def score(self, request: Request) -> float:
        if self._breadth_first(request):
            return BFS_PART + BreadthFirstQueue.score(self, request)
        return self.then.score(self, request)

    def tiebreak(self, request: Request) -> float:
        return 0.0 if self._breadth_first(request) else self.then.tiebreak(self, request)

    def admit(self, request: Request) -> bool:
        return self.then.admit(self, request)

    def links_left_out(self) -> tuple[str, str] | None:
        return self.then.links_left_out(self)
