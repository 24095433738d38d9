"""Hill climbing: from the current page, follow its best child if it improves on the page.

Source: the graph-traversal thesis (IJCA vol. 106 no. 11, 2014), local search: hill climbing
moves to the best neighbour, and stops when no neighbour is better.

The current pages are the most recently fetched pages whose children are arriving: with
concurrent downloads several climbs run at once, one per page being parsed. A child's value is
its link relevance (anchor and context); the page's value is its own relevance (see
``schedulers.local``). Of each page's children, only the best one whose value is above the
page's is a climbing move (a link already queued and found again on the page counts as one
of its children); it is fetched before anything else, and so is the move retried or
redirected (a redirect's target takes its place as the page's best child). Every other child
waits in the pending pool, best value first. When no climbing move is left, the climb restarts
from the best pending candidate (``focused/hillclimbing/restarts`` in the stats;
``focused/hillclimbing/climbs`` counts the moves).

No parameters. The pending pool and the climbing moves live in the frontier (the climbing tier
is part of the key), so they survive pause and resume; the state saved with them is the best
climbing child of each page whose children may still be arriving.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from scrapy import Request

from schedulers import state_shapes as shapes
from schedulers.base import StrategyQueue, at_back
from schedulers.local import candidate_value, page_value, sent_again

# Added to the score of a climbing move, so that every one of them pops before the pending pool.
CLIMB = 2.0
# Pages whose best child is remembered: children of one page arrive together, so a few suffice.
RECENT_PAGES = 256


class HillClimbingQueue(StrategyQueue):
    name = "hillclimbing"

    def score(self, request: Request) -> float:
        return candidate_value(request)

    def tiebreak(self, request: Request) -> float:
        return page_value(request)

    state_shapes = StrategyQueue.state_shapes | {
        "best_child": shapes.list_of(shapes.row(shapes.text, shapes.fingerprint, shapes.number)),
    }

    def restore(self, state: dict[str, Any]) -> None:
        # page url -> (fingerprint of its climbing child, that child's value)
        self._best_child: OrderedDict[str, tuple[bytes, float]] = OrderedDict(
            (url, (bytes.fromhex(fp), value)) for url, fp, value in state.get("best_child", [])
        )

    def state(self) -> dict[str, Any]:
        return {"best_child": [[url, fp.hex(), v] for url, (fp, v) in self._best_child.items()]}

    def push(self, request: Request) -> None:
        fp = self._fingerprint(request)
        key = self.key(request)
        if self._is_best_improving_child(request, fp):
            key = (key[0] - CLIMB, *key[1:])
        self.frontier.put(fp, key, request)

    def rediscover(self, request: Request) -> bool:
        """A queued URL found again is a child of this page too: it may be its climbing move."""
        fp = self._fingerprint(request)
        queued = self.frontier.key_of(fp)
        if (
            queued is None
            or self.links_to_seed(request, fp)
            # The base refuses it: a climbing move at the back would lower a URL in front.
            or (at_back(request) and self.frontier.in_front(fp))
            or not self._is_best_improving_child(request, fp)
        ):
            return super().rediscover(request)
        climbing = (-self.score(request) - CLIMB, -self.tiebreak(request))
        if climbing >= queued[:2]:
            # A climbing move already (another page's, or this one's by a link as good): this
            # page's best child is recorded all the same, so that none of its worse children
            # is taken for its climb.
            return False
        self.frontier.put(fp, (*climbing, queued[2]), request)
        self.stats.inc_value("focused/rescored")
        return True

    def _is_best_improving_child(self, request: Request, fp: bytes) -> bool:
        """Whether ``request`` is now its page's best child that improves on the page."""
        parent = request.meta.get("parent_url")
        value = candidate_value(request)
        if parent is None or value <= page_value(request):
            return False
        best = self._best_child.get(parent)
        if best is not None and best[1] >= value and not self._sent_again(request, fp, best[0]):
            return False
        if best is not None and best[0] != fp:  # the same URL linked again, better: it climbs
            self._demote(best[0], parent)
        self._best_child[parent] = (fp, value)
        self._best_child.move_to_end(parent)
        if len(self._best_child) > RECENT_PAGES:
            self._best_child.popitem(last=False)
        return True

    def _sent_again(self, request: Request, fp: bytes, move: bytes) -> bool:
        """Whether ``request`` (fingerprint ``fp``) is the climbing move ``move`` sent again,
        retried or redirected, with its meta: it goes on with the climb, not to the pending
        pool behind better links of other pages."""
        if not sent_again(request):
            return False
        if fp == move:
            return True  # retried
        redirected_from = request.meta.get("redirect_urls", [])[-1:]
        return bool(redirected_from) and (
            self._fingerprint(request.replace(url=redirected_from[0])) == move
        )

    def _demote(self, fp: bytes, page: str) -> None:
        """A better child of ``page`` arrived: the old one goes back to the pending pool, unless
        it is still another page's climbing move (a link found again on both)."""
        if any(best == fp for other, (best, _) in self._best_child.items() if other != page):
            return
        key = self.frontier.key_of(fp)
        if key is not None and key[0] <= -CLIMB:
            self.frontier.rekey(fp, (key[0] + CLIMB, *key[1:]))

    def pop(self) -> Request | None:
        request = self.frontier.pop()
        if request is not None and request.meta.get("parent_url") is not None:
            climbing = self._best_child.get(request.meta["parent_url"])
            is_climb = climbing is not None and climbing[0] == self._fingerprint(request)
            self.stats.inc_value(f"focused/hillclimbing/{'climbs' if is_climb else 'restarts'}")
        return request
