"""Dynamical particle swarm: value = alpha·immediate + beta·future, the weights tuned by PSO.

Source: "Spider search by dynamical particle swarm", Application Research of Computers, 2008,
issue 5, p. 1374; future value after Rennie & McCallum (1999).

value(link) = alpha·I + beta·M:
- I, the immediate value, is the link's anchor-and-context relevance (``link_relevance``).
- M, the future value, is learned online. Each word has a value; when a fetched page turns out
  relevant, the words of the anchors on the path that led to it are credited: the anchor of
  the link into the page with 1, the one before it with ``discount``, then ``discount``², up to
  three links back. A link's M is the sum of its anchor words' values divided by (number of
  words * the largest word value), which puts it in [0, 1] like I. (The source's M is the
  plain sum: a long anchor would be worth more for its length, and M off I's scale would
  make the weights compare unlike things.)

(alpha, beta) ∈ [0, 1]² is the position of the particle that is flying. A swarm of ``particles``
takes turns of ``epoch`` fetches each; the fetches of a turn are made under that particle's
weights. Its fitness at a position is the harvest rate of the fetches it made there whose
outcome has come back (the source's fitness formula is lost; this is the measured outcome it
suggests), judged as it leaves the position, not as its turn there ends: a page's outcome
comes back after its fetch, most of a turn's after the turn, and counted at its end they were
mostly the position before's. At the end of a turn, the particle with the smallest
slct = Σ|p| + λ·log(activity) (λ = 1; activity counts its turns) is chosen; its momentum
p = f(t) - f(t-1) and its best position are updated with its fitness at the position it
leaves (so each particle's slct is as of its last move), and it flies:
v ← ω·v + c1·r1·(lbest - x) + c2·r2·(gbest - x), x ← x + v, with ω = 0.7298, c1 = c2 = 1.496,
lbest the best position found in its ring neighbourhood of 5 (itself and two on each side) and
gbest the best of the swarm (a best not judged yet pulls nothing: when none is, v ← ω·v);
x is clipped to [0, 1]² (and that component of v zeroed). The outcomes still to come back
from the position it left are forgotten (a particle chosen again right after its own turn is
judged on those back by then). A particle that has not had a turn is chosen first, at its
initial random position, and judged there a turn after its turn, so that the first flights fly
toward the best of those first turns. So the swarm first flies no sooner than ``particles`` x
``epoch`` fetches (100 by default): a shorter crawl runs under the particles' random initial
weights. From there one particle moves every ``epoch`` fetches, so tuning online needs budgets
well above 100.

Outcomes are learned from the queue's own input: the first child of a fetched page pushed
back carries ``parent_is_relevant``, the path's anchors (``pso_path``, from ``child_meta``) and
the URL the page was popped at (``parent_fetched_url``): not ``parent_url``, which names the
page as stored (canonicalized, or its rel=canonical). No signal handler is needed,
and with JOBDIR only the queue that popped the page sees its children. So only a page with at
least one new link (pushed, not a known URL found again) teaches, both the fitness and the
word values: a page without links, or whose links are all known already (more of them late in
a crawl), teaches nothing.

The frontier is re-keyed lazily: each request carries the weights version it was scored under;
a pop whose top is stale re-scores it and puts it back, at most 50 times per pop, so one
change of weights costs nothing up front and a bounded amount per fetch. The price: the source
follows the link of highest value, and a stale key may understate a link's value under the
new weights, so the link popped is the best of those re-keyed, not always of the frontier (of
3,000 links, with the weights turned from (0.9, 0.1) to (0.1, 0.9), the first ten pops were
within its 60 best). A queued link's M is also as of its last scoring: the word values learned
since move no key until the weights change. A URL found again is re-keyed at once, so that the
new discovery is compared with what the queued one is worth now.

Parameters:
    particles (int, default 10): swarm size (5, the ring neighbourhood, to 1000).
    epoch (int, default 10): fetches per turn, and the fitness window.
    discount (float, default 0.5): credit factor per link back along the path.
    seed (int >= 0, default 0): seed of the initial positions and of r1, r2.

State saved on pause: the swarm, whose turn it is, the word values, the recent outcomes and
the random generator.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Any

from scrapy import Request

from focused.arguments import Param
from focused.text import tokenize
from schedulers import state_shapes as shapes
from schedulers.base import NO_TIEBREAK, StrategyQueue
from schedulers.local import SEED, random_state, seeded_random

if TYPE_CHECKING:
    from focused.relevance import Scores

INERTIA, C1, C2 = 0.7298, 1.496, 1.496
RING = 2  # neighbours on each side: a ring neighbourhood of 5
LAMBDA = 1.0
PATH_LINKS = 3  # anchors credited back along the path
REKEY_PER_POP = 50
FLYING_MEMORY = 1000  # popped pages whose outcome may still come back
ANCHOR_WORDS_CACHE = 100_000  # anchor texts whose words are remembered


class PsoQueue(StrategyQueue):
    name = "pso"
    reads_fetched_parent = True  # a page's particle is found by the URL it was popped at
    params = {
        # At most 1000: each particle is state kept and scanned at every turn, and a mistyped
        # size (particles=1000000000) would fill the memory before the first page.
        "particles": Param(10, "swarm size", low=5, high=1000),
        "epoch": Param(10, "fetches per particle turn (and fitness window)", low=1),
        "discount": Param(0.5, "credit factor per link back along the path", low=0, high=1),
        "seed": SEED,
    }

    @classmethod
    def child_meta(
        cls, parent_meta: dict[str, Any], scores: Scores, is_relevant: bool
    ) -> dict[str, Any]:
        path = [parent_meta.get("anchor") or "", *parent_meta.get("pso_path", [])]
        return {"pso_path": path[:PATH_LINKS]}

    # -- state ---------------------------------------------------------------------------------

    _point = shapes.list_of(shapes.row(shapes.number, shapes.number))
    _numbers = shapes.list_of(shapes.number)
    _swarm = {
        "x": _point,
        "v": _point,
        "best_x": _point,
        "best_f": _numbers,
        "f": shapes.list_of(shapes.optional(shapes.number)),
        "momentum": _numbers,
        "activity": shapes.list_of(shapes.whole),
    }
    state_shapes = StrategyQueue.state_shapes | {
        "random": shapes.random_state,
        "swarm": shapes.optional(shapes.record(_swarm)),
        "active": shapes.whole,
        "turn_pops": shapes.whole,
        "version": shapes.whole,
        "word_value": shapes.dict_of(shapes.text, shapes.number),
        "outcomes": shapes.list_of(shapes.list_of(shapes.flag)),
        "flying": shapes.list_of(shapes.row(shapes.text, shapes.whole)),
    }

    @classmethod
    def check_state(cls, state: Any) -> None:
        """Also: the particles' lists are as long as each other, and every particle named (the
        active one, those of the pages flying) is one of them."""
        super().check_state(state)
        swarm = state.get("swarm")
        if not swarm:
            return  # restore starts a swarm
        particles = len(swarm["x"])
        if not particles or any(len(swarm[name]) != particles for name in cls._swarm):
            raise ValueError(f"its swarm is not what the {cls.name} strategy saves")
        named = [state.get("active", 0), *(particle for _, particle in state.get("flying", []))]
        if len(state.get("outcomes", swarm["x"])) != particles or max(named) >= particles:
            raise ValueError("its particles are not those of its swarm")

    def restore(self, state: dict[str, Any]) -> None:
        self._random = seeded_random(self.params["seed"], state.get("random"))
        n = self.params["particles"]
        self.swarm: dict[str, list] = state.get("swarm") or {
            "x": [[self._random.random(), self._random.random()] for _ in range(n)],
            "v": [[0.0, 0.0] for _ in range(n)],
            "best_x": [[0.0, 0.0] for _ in range(n)],
            "best_f": [-1.0] * n,
            "f": [None] * n,
            "momentum": [0.0] * n,
            "activity": [0] * n,
        }
        self._active: int = state.get("active", 0)
        self._turn_pops: int = state.get("turn_pops", 0)
        self._version: int = state.get("version", 0)
        self.word_value: dict[str, float] = state.get("word_value", {})
        self._max_word_value: float = max(self.word_value.values(), default=0.0)
        epoch = self.params["epoch"]
        self._outcomes = [deque(o, maxlen=epoch) for o in state.get("outcomes", [[]] * n)]
        self._flying: OrderedDict[str, int] = OrderedDict(state.get("flying", []))
        self._anchor_words: dict[str, tuple[str, ...]] = {}
        if not state.get("swarm"):
            self.swarm["activity"][0] = 1  # particle 0 takes the first turn

    def state(self) -> dict[str, Any]:
        return {
            "random": random_state(self._random),
            "swarm": self.swarm,
            "active": self._active,
            "turn_pops": self._turn_pops,
            "version": self._version,
            "word_value": self.word_value,
            "outcomes": [list(o) for o in self._outcomes],
            "flying": list(self._flying.items()),
        }

    # -- link value ----------------------------------------------------------------------------

    @property
    def weights(self) -> tuple[float, float]:
        alpha, beta = self.swarm["x"][self._active]
        return alpha, beta

    def anchor_words(self, anchor: str) -> tuple[str, ...]:
        """The distinct words of an anchor, tokenized once per anchor text: the frontier is
        re-scored on every change of weights, and tokenizing was most of a score."""
        words = self._anchor_words.get(anchor)
        if words is None:
            if len(self._anchor_words) >= ANCHOR_WORDS_CACHE:
                self._anchor_words.clear()  # bounded; the next scores fill it again
            words = self._anchor_words[anchor] = tuple(set(tokenize(anchor)))
        return words

    def future_value(self, anchor: str) -> float:
        if not self._max_word_value:
            return 0.0  # no word credited yet
        words = self.anchor_words(anchor)
        if not words:
            return 0.0
        total = sum(self.word_value.get(word, 0.0) for word in words)
        return total / (len(words) * self._max_word_value)

    def score(self, request: Request) -> float:
        alpha, beta = self.weights
        immediate = request.meta.get("link_relevance", 1.0)
        return alpha * immediate + beta * self.future_value(request.meta.get("anchor") or "")

    def credit(self, path: list[str]) -> None:
        """A relevant page was found at the end of ``path`` (anchors, the last link first)."""
        for distance, anchor in enumerate(path):
            credit = self.params["discount"] ** distance
            for word in set(tokenize(anchor)):
                value = self.word_value.get(word, 0.0) + credit
                self.word_value[word] = value
                self._max_word_value = max(self._max_word_value, value)

    # -- the swarm -----------------------------------------------------------------------------

    def slct(self, particle: int) -> float:
        activity = self.swarm["activity"][particle]
        return self.swarm["momentum"][particle] + LAMBDA * math.log(activity)

    def fitness(self, particle: int) -> float | None:
        outcomes = self._outcomes[particle]
        return sum(outcomes) / len(outcomes) if outcomes else None

    def end_turn(self) -> None:
        """The active particle's turn ends: choose the next one, judge it and fly it."""
        swarm = self.swarm
        # A particle that has not had a turn yet takes one at its initial random position.
        fresh = [i for i, turns in enumerate(swarm["activity"]) if not turns]
        if fresh:
            chosen = fresh[0]
        else:
            # A first turn's outcomes are back a turn later: judged before any particle flies,
            # so that the first flights have the swarm's bests to fly toward.
            for i, fitness in enumerate(swarm["f"]):
                if fitness is None and i != self._active:
                    self.judge(i)
            chosen = min(range(len(swarm["x"])), key=self.slct)
            self.judge(chosen)
            self.fly(chosen)
        swarm["activity"][chosen] += 1
        self._active = chosen
        self._turn_pops = 0
        self._version += 1
        self.stats.set_value("focused/pso/alpha", round(self.weights[0], 4))
        self.stats.set_value("focused/pso/beta", round(self.weights[1], 4))
        self.stats.inc_value("focused/pso/turns")

    def judge(self, j: int) -> None:
        """Particle ``j`` leaves its position: its fitness there, its momentum, its best.

        Judged now, not as its turn at the position ended: a page's outcome comes back a fetch
        later, and counted at the end of the turn, the outcomes were mostly those of the
        position before, with which the new one was credited."""
        swarm, fitness = self.swarm, self.fitness(j)
        if fitness is None:
            return  # no outcome came back from there
        previous = swarm["f"][j]
        if previous is not None:
            swarm["momentum"][j] += abs(fitness - previous)
        swarm["f"][j] = fitness
        if fitness > swarm["best_f"][j]:
            swarm["best_f"][j], swarm["best_x"][j] = fitness, list(swarm["x"][j])

    def fly(self, j: int) -> None:
        swarm, n = self.swarm, len(self.swarm["x"])
        x, v = swarm["x"][j], swarm["v"][j]

        def best_of(indices: list[int]) -> list[float]:
            best = max(indices, key=lambda i: swarm["best_f"][i])
            # None of them judged by an outcome yet (best_f -1): the placeholder (0, 0) would
            # pull the swarm to weights that value every link at 0.
            return swarm["best_x"][best] if swarm["best_f"][best] >= 0 else list(x)

        lbest = best_of([(j + offset) % n for offset in range(-RING, RING + 1)])
        gbest = best_of(list(range(n)))
        for d in range(2):
            r1, r2 = self._random.random(), self._random.random()
            v[d] = INERTIA * v[d] + C1 * r1 * (lbest[d] - x[d]) + C2 * r2 * (gbest[d] - x[d])
            x[d] += v[d]
            if not 0.0 <= x[d] <= 1.0:
                x[d] = min(1.0, max(0.0, x[d]))
                v[d] = 0.0
        # What comes back from here on was fetched at the new position: the outcomes of the
        # old one still out are forgotten, not counted at the new one.
        self._outcomes[j].clear()
        for url in [url for url, particle in self._flying.items() if particle == j]:
            del self._flying[url]

    # -- the queue -----------------------------------------------------------------------------

    def _put(self, request: Request) -> None:
        request.meta["pso_version"] = self._version
        self.frontier.put(self._fingerprint(request), self.key(request), request)

    def push(self, request: Request) -> None:
        particle = self._flying.pop(request.meta.get("parent_fetched_url") or "", None)
        if particle is not None:
            relevant = bool(request.meta.get("parent_is_relevant"))
            self._outcomes[particle].append(relevant)
            if relevant:
                self.credit(request.meta.get("pso_path", []))
        self._put(request)

    def rediscover(self, request: Request) -> bool:
        """As the base, against what the queued URL is worth now. Its key may be of older
        weights (re-keyed at pops only) or older word values: compared with that, a discovery
        worth more now than the queued request, but less than its key, was refused (its anchor
        lost, the URL popped at the queued request's value), and one worth less now, but more
        than its key, replaced it."""
        fp = self._fingerprint(request)
        queued = self.frontier.request_of(fp)
        if queued is not None:
            key = self.frontier.key_of(fp)
            now = (-self.score(queued), NO_TIEBREAK, key[2])  # its place among equals stays
            if now != key or queued.meta.get("pso_version") != self._version:
                queued.meta["pso_version"] = self._version
                self.frontier.put(fp, now, queued)
        request.meta["pso_version"] = self._version  # scored under these weights, if queued
        return super().rediscover(request)

    def pop(self) -> Request | None:
        rekeyed = 0
        for _ in range(REKEY_PER_POP):
            request = self.frontier.pop()
            if request is None or request.meta.get("pso_version") == self._version:
                break
            self._put(request)
            rekeyed += 1
        else:
            request = self.frontier.pop()
        if rekeyed:
            self.stats.inc_value("focused/pso/rekeyed", rekeyed)
        if request is None:
            return None
        self._flying[request.url] = self._active
        while len(self._flying) > FLYING_MEMORY:
            self._flying.popitem(last=False)
        self._turn_pops += 1
        if self._turn_pops >= self.params["epoch"]:
            self.end_turn()
        return request
