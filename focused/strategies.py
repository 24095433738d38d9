"""The strategy registry: the name given as ``-a strategy=NAME`` -> its priority-queue class."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.utils.misc import load_object

if TYPE_CHECKING:
    from schedulers.base import StrategyQueue

STRATEGIES: dict[str, str] = {
    "bfs": "schedulers.bfs.BreadthFirstQueue",
    "dfs": "schedulers.dfs.DepthFirstQueue",
    "bestfirst": "schedulers.bestfirst.BestFirstQueue",
    "anchor": "schedulers.anchor.AnchorQueue",
    "oracle": "schedulers.oracle.OracleQueue",
}


def strategy_class(name: str) -> type[StrategyQueue]:
    return load_object(STRATEGIES[name])
