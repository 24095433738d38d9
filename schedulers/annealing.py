"""Simulated annealing: a worse move is accepted with probability exp(Δ/T), T cooling.

Source: the graph-traversal thesis (IJCA vol. 106 no. 11, 2014), local search: simulated
annealing accepts a worse move with probability exp(ΔE/T); T starts where about 80% of moves
are accepted and falls to about 0 by the last iteration.

Parameters:
    t0 (float, default 0 = derived): the starting temperature. Derived, when 0, from the first
        worse moves seen: T0 = mean |Δ| of the worse moves (Δ < 0; a sideways move, Δ = 0, is
        always accepted and not one) among the first 30 candidates divided by ln(1/0.8), so
        that exp(-mean|Δ|/T0) = 0.8 and about 80% of worse moves are accepted at first.
        Until 30 candidates have been seen it is computed from those seen so far; if none of
        the first 30 is worse, from the first worse one.
    cooling (str, default ``geometric``): ``geometric`` (T = t0 · factor^moves) or ``linear``
        (T = t0 · (1 - moves / budget), reaching 0 at the page budget CLOSESPIDER_PAGECOUNT,
        or after 1000 moves when there is no page budget).
    factor (float, default 0.99): the geometric cooling factor per move (refused with
        ``cooling=linear``).
    seed (int >= 0, default 0): seed of the random draws and of the acceptance of worse moves.

Cooling departs from the source by default. Only ``linear`` brings T to about 0 by the last
iteration, as the source does, and that needs the budget known in advance. ``geometric`` is the
default because a crawl is open-ended (often no page budget, or one that CLOSESPIDER_RELEVANT
or the drift stop cuts short): it has no last iteration to cool towards. With factor 0.99, T is
still about half of T0 after 60 moves (0.99^60 = 0.55) and nears 0 (1% of T0) only after about
460, so a crawl of a few hundred pages still accepts worse moves at its end; a smaller
``factor`` cools faster.

A move is one fetch. The current pages are the most recently fetched pages whose children are
arriving: the last CONCURRENT_REQUESTS pages whose children came in. Their children not yet
drawn are the fresh candidates (including links already queued and found again on them).
Each pop draws a fresh candidate uniformly at random and accepts it when Δ = value(candidate) -
value(its page) > 0 (values as in ``schedulers.local``, of the link and the page it was found
on: a URL found again on a current page is a move from that page, whichever discovery the
frontier keeps), otherwise with probability exp(Δ/T) (at T = 0, a move with Δ = 0 still, as at
every T > 0). A rejected candidate is not lost: it stays queued at a lower rank, below every
candidate not yet rejected (lowered once, however often it is drawn: a URL found on two current
pages is a candidate from each). When no fresh candidate is left (or a draw budget per pop is
spent), the best queued candidate is fetched. A fetched request sent again with its meta
(retried, rendered again, or the request a redirect made) is no candidate: it is handed out
before any draw, as the move it continues.
Stats under ``focused/<name>/``: ``improving``, ``sideways`` (Δ = 0), ``accepted_worse``,
``rejected``, ``best_queued`` (fetches that were not a drawn move) and ``temperature`` (after
the last move: the one the next pop decides at).

State saved on pause: the moves made, T0, the Δs it was derived from, the current pages and
their fresh candidates with the Δ of each move, the requests sent again, and the random
generator. After a crash the moves are taken to be the fetches the crawl counted (its budget's
responses, its fetch order), so that the schedule goes on from where the crawl is, as after a
pause (a derived T0 is derived again).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

from scrapy import Request

from focused.arguments import Param
from schedulers import state_shapes as shapes
from schedulers.base import Key, StrategyQueue, at_back
from schedulers.local import (
    SEED,
    candidate_value,
    page_value,
    random_state,
    seeded_random,
    sent_again,
)

ACCEPT_AT_FIRST = 0.8
T0_SAMPLE = 30  # candidates whose worse Δs set T0
LINEAR_MOVES_WITHOUT_BUDGET = 1000
REJECTED = 2.0  # subtracted from a rejected candidate's score: below every other candidate
DRAWS_PER_POP = 50  # bounds the work of one pop when most draws are rejected
# A fresh candidate: its fingerprint and the Δ of the move to it from the page it was found on
# (None: a candidate of a state saved before Δs were, judged on the request queued).
Candidate = tuple[bytes, float | None]


def _saved_candidate(value: Any) -> bool:
    """A fresh candidate as saved: [fingerprint, Δ], or a fingerprint alone (before Δs were)."""
    return shapes.fingerprint(value) or shapes.row(shapes.fingerprint, shapes.number)(value)


class AnnealingQueue(StrategyQueue):
    name = "annealing"
    params = {
        "t0": Param(0.0, "starting temperature; 0 derives it from the first worse moves", low=0),
        "cooling": Param("geometric", "how T falls", choices=("geometric", "linear")),
        "factor": Param(
            0.99,
            "geometric cooling factor per move",
            low=0.0,
            high=1.0,
            works_with=("cooling", "geometric"),
        ),
        "seed": SEED,
    }

    def score(self, request: Request) -> float:
        return candidate_value(request)

    def tiebreak(self, request: Request) -> float:
        return page_value(request)

    # -- the acceptance rule (threshold acceptance overrides these two) -----------------------

    def accepts(self, delta: float, temperature: float) -> bool:
        if delta > 0:
            return True
        if temperature <= 0:
            # exp(0 / T) = 1 at every T > 0: frozen, a sideways move is still taken, as in the
            # limit, and only worse ones are refused.
            return delta == 0
        return self._random.random() < math.exp(delta / temperature)

    @staticmethod
    def initial_temperature(worse: list[float]) -> float:
        """T0 at which a worse move of mean size is accepted with probability 0.8."""
        return sum(worse) / len(worse) / math.log(1 / ACCEPT_AT_FIRST)

    # -- state ---------------------------------------------------------------------------------

    state_shapes = StrategyQueue.state_shapes | {
        "moves": shapes.whole,
        "t0": shapes.optional(shapes.number),
        "worse_sample": shapes.list_of(shapes.number),
        "seen": shapes.whole,
        "fresh": shapes.list_of(shapes.row(shapes.text, shapes.list_of(_saved_candidate))),
        "again": shapes.list_of(shapes.fingerprint),
        "random": shapes.random_state,
    }

    def restore(self, state: dict[str, Any]) -> None:
        self._moves: int = state.get("moves", 0)
        self._t0: float = state.get("t0") or self.params["t0"]
        # Without the sideways moves (|Δ| = 0) a state saved before they were left out holds.
        self._worse_sample: list[float] = [d for d in state.get("worse_sample", []) if d > 0]
        self._seen: int = state.get("seen", 0)
        # current page url -> its children not yet drawn: (fingerprint, Δ of the move to it)
        self._fresh: OrderedDict[str, list[Candidate]] = OrderedDict(
            (url, [_candidate(saved) for saved in candidates])
            for url, candidates in state.get("fresh", [])
        )
        # Fetched requests sent again (``sent_again``), handed out before any draw.
        self._again: list[bytes] = [bytes.fromhex(fp) for fp in state.get("again", [])]
        self._random = seeded_random(self.params["seed"], state.get("random"))
        self._shown_temperature: float | None = None  # the temperature stat last set
        settings = self.crawler.settings
        self._current_pages = settings.getint("CONCURRENT_REQUESTS", 16)
        self._budget = settings.getint("CLOSESPIDER_PAGECOUNT") or LINEAR_MOVES_WITHOUT_BUDGET

    def state(self) -> dict[str, Any]:
        return {
            "moves": self._moves,
            "t0": self._t0,
            "worse_sample": self._worse_sample,
            "seen": self._seen,
            "fresh": [
                [url, [fp.hex() if delta is None else [fp.hex(), delta] for fp, delta in fresh]]
                for url, fresh in self._fresh.items()
            ],
            "again": [fp.hex() for fp in self._again],
            "random": random_state(self._random),
        }

    # -- temperature ---------------------------------------------------------------------------

    def temperature(self) -> float:
        t0 = self._t0
        if not t0:
            if not self._worse_sample:
                return 0.0
            t0 = self.initial_temperature(self._worse_sample)
            if self._seen >= T0_SAMPLE:
                self._t0 = t0  # fixed from here on
        moves = self._crawl_moves()
        if self.params["cooling"] == "linear":
            return t0 * max(0.0, 1.0 - moves / self._budget)
        return t0 * self.params["factor"] ** moves

    def _crawl_moves(self) -> int:
        """The moves the crawl has made, across resumes. They are saved only on a clean pause;
        the page budget's count of responses and the fetch order, which the budget and the
        store count, survive ``kill -9`` (``focused.resume``). A move is one fetch, so the crawl
        has made at least as many: without this a crawl resumed after a crash cooled from T0
        again and reached its budget hot. (Read here, not in ``restore``: the spider's state is
        loaded after the scheduler opens.)"""
        state = self.crawler.spider.state
        self._moves = max(self._moves, state.get("responses", 0), state.get("pages", 0))
        return self._moves

    # -- the queue -----------------------------------------------------------------------------

    def push(self, request: Request) -> None:
        fp = self._fingerprint(request)
        self.frontier.put(fp, self.key(request), request)
        self._note(request, fp)

    def rediscover(self, request: Request) -> bool:
        """A queued URL found again on a current page is a candidate move from that page too.

        A rejected candidate is compared on its own value, not on the lower rank its rejection
        gave it: else any discovery, however poor, beat that rank and replaced the request (its
        better link and page, which the page is then stored with, and the order of the
        best-queued fetches, lost)."""
        fp = self._fingerprint(request)
        queued = self.frontier.key_of(fp)
        rejected = queued is not None and _rejected(queued)
        if rejected:
            self.frontier.rekey(fp, (queued[0] - REJECTED, *queued[1:]))
        changed = super().rediscover(request)
        if rejected and not changed:
            self.frontier.rekey(fp, queued)
        if self.frontier.key_of(fp) is not None:
            self._note(request, fp)  # sent again: a redirect to a queued URL
        return changed

    def _note(self, request: Request, fp: bytes) -> None:
        """A queued request is a fresh candidate of its page, or, sent again, the next fetch. A
        trap family's request is neither: it waits behind every other request (``at_back``),
        which a draw, or a retry handed out first, would not keep."""
        if not sent_again(request):
            self._offer(request)
        elif not at_back(request):
            self._again.append(fp)

    def _offer(self, request: Request) -> None:
        """Make a child of a current page a fresh candidate, and sample its Δ for T0 (a trap
        family's request is none: a random draw accepting it, any Δ = 0 once T > 0, would not
        keep it at the back)."""
        parent = request.meta.get("parent_url")
        if parent is None or at_back(request):
            return
        # The move from this page: a URL found again may be queued with another page's link.
        delta = candidate_value(request) - page_value(request)
        if not self._t0:
            self._seen += 1
            # Only worse moves: a sideways one (Δ = 0) is always accepted, and its |Δ| = 0 would
            # pull T0 down, to 0 when the first candidates are all sideways.
            if delta < 0 and (self._seen <= T0_SAMPLE or not self._worse_sample):
                self._worse_sample.append(-delta)
        if parent not in self._fresh:
            self._fresh[parent] = []
            while len(self._fresh) > self._current_pages:
                self._fresh.popitem(last=False)  # no longer a current page: its rest waits
        self._fresh[parent].append((self._fingerprint(request), delta))

    def _draw(self) -> Candidate | None:
        pages = [url for url, fps in self._fresh.items() if fps]
        total = sum(len(self._fresh[url]) for url in pages)
        if not total:
            self._fresh.clear()
            return None
        index = self._random.randrange(total)
        for url in pages:
            fps = self._fresh[url]
            if index < len(fps):
                fps[index], fps[-1] = fps[-1], fps[index]
                return fps.pop()
            index -= len(fps)
        raise AssertionError("unreachable")

    def _moved(self) -> None:
        """Count a move and show the temperature it leaves, the one the next pop decides at."""
        self._moves += 1
        shown = round(self.temperature(), 6)
        if shown != self._shown_temperature:  # a stats call costs more than the rest of a pop
            self.stats.set_value(f"focused/{self.name}/temperature", shown)
            self._shown_temperature = shown

    def pop(self) -> Request | None:
        while self._again:
            # The move was made when it was first handed out: its retry or redirect is its
            # fetch, not a candidate to accept or reject again.
            request = self.frontier.remove(self._again.pop(0))
            if request is not None:
                self._moved()
                return request
        temperature = self.temperature()
        for _ in range(DRAWS_PER_POP):
            drawn = self._draw()
            if drawn is None:
                break
            fp, delta = drawn
            key = self.frontier.key_of(fp)
            if key is None:  # fetched meanwhile (found again from another page)
                continue
            request = self.frontier.remove(fp)
            if delta is None:  # a candidate of a state saved before Δs were kept
                delta = candidate_value(request) - page_value(request)
            if self.accepts(delta, temperature):
                # A sideways move is no worse one, and is taken at every T: counted apart.
                outcome = "improving" if delta > 0 else "accepted_worse" if delta else "sideways"
                self.stats.inc_value(f"focused/{self.name}/{outcome}")
                self._moved()
                return request
            self.stats.inc_value(f"focused/{self.name}/rejected")
            # Once: a URL found on two current pages is drawn twice, and a second penalty put
            # it below rejected candidates of lower value.
            rank = key if _rejected(key) else (key[0] + REJECTED, *key[1:])
            self.frontier.put(fp, rank, request)
        request = self.frontier.pop()
        if request is not None:
            self.stats.inc_value(f"focused/{self.name}/best_queued")
            self._moved()
        return request


def _rejected(key: Key) -> bool:
    """Whether a queued candidate's key is a rejected one's: a value in [0, 1] negated is at
    most 0, and a rejection adds ``REJECTED`` to it."""
    return key[0] > 0.0


def _candidate(saved: str | list) -> Candidate:
    if isinstance(saved, str):
        return bytes.fromhex(saved), None
    return bytes.fromhex(saved[0]), saved[1]
