"""Threshold acceptance: a move is accepted when Δ > -T, T lowered as the crawl goes on.

Source: the graph-traversal thesis (IJCA vol. 106 no. 11, 2014), local search: threshold
acceptance accepts a move when ΔE > -T, with T lowered linearly or non-linearly (Dueck and
Scheuer's deterministic variant of simulated annealing, 1990).

Everything but the acceptance rule is simulated annealing (``schedulers.annealing``): the same
current pages, random draw among their children, lower rank for rejected candidates, cooling
and parameters (``t0`` default 0 = derived, ``cooling`` default ``geometric``, ``factor``
default 0.99, ``seed`` default 0). Only two things differ:

- a drawn candidate is accepted exactly when Δ > -T (no randomness in the decision); at T = 0
  a sideways move (Δ = 0) still is, as in annealing: Δ > -T holds for it at every T > 0, and T
  is 0 only until the first worse move derives T0 (when the source's starting T would accept
  it) or once linear cooling reaches the page budget;
- the derived T0 is the 80th percentile of |Δ| over the worse moves among the first 30
  candidates, so that about 80% of those worse moves would be accepted at first (|Δ| < T0,
  strictly). Worse moves tie (a page's links with no topic word around them all have
  Δ = -its relevance): when moves below the 80th place tie with it, T0 is the next larger
  |Δ| (or just above the largest), so that at least 80% are accepted rather than as few as
  none.

The source lowers T "linearly or non-linearly" and gives no schedule, so both coolings follow
it; as in ``annealing``, only ``linear`` reaches 0 at the page budget, and the default
``geometric`` (chosen because a crawl has no last iteration known in advance) still keeps about
half of T0 after 60 moves (0.99^60 = 0.55).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right

from schedulers.annealing import ACCEPT_AT_FIRST, AnnealingQueue


class ThresholdQueue(AnnealingQueue):
    name = "threshold"

    def accepts(self, delta: float, temperature: float) -> bool:
        # At T = 0 (before the first worse move derives T0, or cooled to 0) a sideways move is
        # still taken, as at every T > 0: refused, it fell below every candidate not yet drawn.
        return delta > -temperature or delta == 0

    @staticmethod
    def initial_temperature(worse: list[float]) -> float:
        """The smallest |Δ| of the sample with 80% of the sample's |Δ|s below it: a move is
        accepted when |Δ| < T, strictly, so a T0 tied with moves below the 80th place refused
        them all (every one, when all worse moves tied). Past the largest: just above it."""
        ordered = sorted(worse)
        # Rounded up: int() made one worse move's own |Δ| its T0, which refused it.
        needed = math.ceil(ACCEPT_AT_FIRST * len(ordered) - 1e-9)
        if needed >= len(ordered):
            return math.nextafter(ordered[-1], math.inf)
        value = ordered[needed]
        if bisect_left(ordered, value) >= needed:
            return value  # no tie across the 80th place
        above = bisect_right(ordered, value)  # the next larger |Δ| has all the tied ones below
        return ordered[above] if above < len(ordered) else math.nextafter(value, math.inf)
