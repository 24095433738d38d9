"""Local beam search: the k best candidates of each generation survive, the rest are dropped.

Source: the graph-traversal thesis (IJCA vol. 106 no. 11, 2014), local search: local beam
search generates the neighbours of its k states and keeps the k best.

Parameters:
    beam_width (int, default 10): k, the candidates kept in each generation. The source gives
        no k: 10 is this project's choice, not tuned on the benchmark.

A generation is a level: the seeds are generation 0, and generation g+1 is the children of the
pages of generation g. Every seed is kept, however many: they are the search's starting states,
as the user gave them, and the beam applies from generation 1. The current pages are the pages
of the generation being fetched; their children arrive as candidates for the next one. While
they arrive, only the ``beam_width`` best (by link relevance, then the page's relevance; see
``schedulers.local``) are kept, and a better newcomer evicts the worst; every dropped
candidate counts in ``focused/beam/dropped``. A trap family's request ranks below every other
candidate, as the frontier queues it behind every other request: it is the first dropped. One
kept (its generation had room) is fetched last in its generation, before the next one starts.
A dropped URL is not marked seen: found again on a page of a later generation, it is a
candidate of that generation (as a resumed crawl, whose seen set is rebuilt from the frontier
file, always had it).
The next generation is held back until every page of the current one has landed, so that it
is chosen among all of their children: ``pop`` returns None only while a page of the current
generation is still being fetched or parsed, and its landing makes the engine ask again.
A generation with no surviving candidate ends the search (the frontier is then empty).
A candidate ``FRONTIER_MAX`` evicts frees its place in its generation, and so does one found
again in the current generation (a page being fetched redirects to it), which it then joins.

State saved on pause: the current generation and how many candidates each generation kept.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request

from focused.arguments import Param
from schedulers import state_shapes as shapes
from schedulers.base import Key, StrategyQueue, at_back
from schedulers.local import Flights, candidate_value, page_value


class BeamQueue(StrategyQueue):
    name = "beam"
    params = {"beam_width": Param(10, "candidates kept in each generation", low=1)}

    def score(self, request: Request) -> float:
        # An earlier generation always pops first; within one, the better candidate.
        return -2.0 * self._generation_of(request) + candidate_value(request)

    def tiebreak(self, request: Request) -> float:
        return page_value(request)

    @staticmethod
    def _generation_of(request: Request) -> int:
        return request.meta.get("depth", 0)

    state_shapes = StrategyQueue.state_shapes | {
        "generation": shapes.whole,
        "kept": shapes.dict_of(shapes.whole_text, shapes.whole),
    }

    def restore(self, state: dict[str, Any]) -> None:
        self.flights = Flights(self.crawler)
        self._generation: int = state.get("generation", 0)
        self._kept: dict[int, int] = {int(g): n for g, n in state.get("kept", {}).items()}
        # Queued candidates by fingerprint: (generation, rank). The frontier of a beam is small
        # (at most two generations of k), so finding the worst is a scan; it is kept per
        # generation until that generation changes, since most newcomers of a full one lose to
        # it and change nothing.
        self._queued: dict[bytes, tuple[int, Rank]] = {
            fp: (self._generation_of(request), _rank(key, request))
            for fp, key, request in self.frontier.entries()
        }
        self._worst: dict[int, tuple[Rank, bytes]] = {}
        self._dropped: list[bytes] = []  # for take_dropped

    def state(self) -> dict[str, Any]:
        return {"generation": self._generation, "kept": self._kept}

    def links_left_out(self) -> tuple[str, str]:
        return "focused/beam/dropped", "beam_width"

    def push(self, request: Request) -> None:
        fp = self._fingerprint(request)
        generation = self._generation_of(request)
        key = self.key(request)
        # A request of the current generation (a retry or redirect of a page being fetched)
        # continues a flight; only the next generation's candidates compete for the beam.
        if generation > self._generation:
            if self._kept.get(generation, 0) < self.params["beam_width"]:
                self._kept[generation] = self._kept.get(generation, 0) + 1
            elif not self._evict_worse_than(generation, _rank(key, request)):
                self.stats.inc_value("focused/beam/dropped")
                self._dropped.append(fp)
                return
        self.frontier.put(fp, key, request)
        self._queue(fp, generation, _rank(key, request))

    def _queue(self, fp: bytes, generation: int, rank: Rank) -> None:
        self._unqueue(fp)  # a rediscovered candidate may move to another generation
        self._queued[fp] = (generation, rank)
        self._worst.pop(generation, None)

    def _unqueue(self, fp: bytes) -> int | None:
        """Forget a queued candidate; its generation, or None if it was not queued."""
        generation, _ = self._queued.pop(fp, (None, None))
        self._worst.pop(generation, None)
        return generation

    def _evict_worse_than(self, generation: int, rank: Rank) -> bool:
        """Drop the worst queued candidate of a full generation if ``rank`` beats it."""
        if (worst := self._worst.get(generation)) is None:
            candidates = [(r, fp) for fp, (g, r) in self._queued.items() if g == generation]
            if not candidates:
                return False
            worst = self._worst[generation] = max(candidates)
        worst_rank, worst_fp = worst
        if worst_rank[:3] <= rank[:3]:
            return False
        self.frontier.remove(worst_fp)
        self._unqueue(worst_fp)
        self.stats.inc_value("focused/beam/dropped")
        self._dropped.append(worst_fp)
        return True

    def evicted(self, fps: list[bytes]) -> None:
        # FRONTIER_MAX took them: their places in their generation's beam are free again (they
        # were held, and a generation kept fewer than k after evictions).
        for fp in fps:
            self._free_place(fp)

    def _free_place(self, fp: bytes) -> None:
        generation = self._unqueue(fp)
        if generation in self._kept:
            self._kept[generation] -= 1

    def take_dropped(self) -> list[bytes]:
        dropped, self._dropped = self._dropped, []
        return dropped

    def pop(self) -> Request | None:
        self.flights.land()
        request = self.frontier.peek()
        if request is None:
            return None
        generation = self._generation_of(request)
        if generation > self._generation and len(self.flights):
            return None  # the current generation is still out: its children are not all in
        if generation > self._generation and (kept := self._kept_behind()) is not None:
            request = self.frontier.remove(kept)
        else:
            if generation > self._generation:
                self._generation = generation
                self._kept = {g: n for g, n in self._kept.items() if g > generation}
                self.stats.set_value("focused/beam/generation", generation)
            request = self.frontier.pop()
        self._unqueue(self._fingerprint(request))
        self.flights.launch(request)
        return request

    def _kept_behind(self) -> bytes | None:
        """The best candidate kept in the current generation (or an earlier one) that is still
        queued once the next generation's are in: a trap family's request, which the frontier
        puts behind every other. Kept, it is expanded before the generation ends; fetched
        later, its children were of a generation already chosen, and were queued unlimited."""
        behind = [(r, fp) for fp, (g, r) in self._queued.items() if g <= self._generation]
        return min(behind)[1] if behind else None

    def rediscover(self, request: Request) -> bool:
        changed = super().rediscover(request)
        if changed:
            fp = self._fingerprint(request)
            generation = self._generation_of(request)
            if (queued := self._queued.get(fp)) is not None and queued[0] != generation:
                # Found in the current generation (a redirect of a page being fetched carries
                # its level), which counts no places: its place in the next one is free, or
                # that one would keep fewer than k.
                self._free_place(fp)
            rank = _rank(self.frontier.key_of(fp), request)
            self._queue(fp, generation, rank)
        return changed


# A candidate's place in its generation, worst last: a trap family's request (``at_back``) is
# behind every other, as in the frontier, then the key.
Rank = tuple[int, float, float, int]


def _rank(key: Key, request: Request) -> Rank:
    return (at_back(request), *key)
