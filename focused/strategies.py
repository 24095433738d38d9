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
    "ucs": "schedulers.ucs.UniformCostQueue",
    "astar": "schedulers.astar.AStarQueue",
    "hybrid": "schedulers.hybrid.HybridQueue",
    "shark": "schedulers.shark.SharkSearchQueue",
    "rank_semantic": "schedulers.rank_semantic.RankSemanticQueue",
    "hillclimbing": "schedulers.hillclimbing.HillClimbingQueue",
    "beam": "schedulers.beam.BeamQueue",
    "annealing": "schedulers.annealing.AnnealingQueue",
    "threshold": "schedulers.threshold.ThresholdQueue",
    "pso": "schedulers.pso.PsoQueue",
    "bees": "schedulers.bees.BeesQueue",
    "anchor": "schedulers.anchor.AnchorQueue",
    "semantic": "schedulers.semantic.SemanticQueue",
    "oracle": "schedulers.oracle.OracleQueue",
}


def strategy_class(name: str) -> type[StrategyQueue]:
    return load_object(STRATEGIES[name])
