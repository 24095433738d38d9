"""Shark-search: a link's score mixes what its path inherits with what its anchor says.

Source: M. Hersovici, M. Jacovi, Y. S. Maarek, D. Pelleg, M. Shtalhaim, S. Ur, "The
shark-search algorithm. An application: tailored Web site mapping", WWW7, 1998.

For a link to ``child`` found on page ``parent``:

    inherited(child)     = delta * sim(parent)           if parent is relevant
                           delta * inherited(parent)     otherwise
    neighbourhood(child) = beta * anchor + (1 - beta) * context,
                           context = 1 if the anchor is relevant, else the relevance of the
                           text around the link
    score(child)         = gamma * inherited + (1 - gamma) * neighbourhood

sim(parent) is the page's combined relevance; "relevant" means at or above
RELEVANCE_THRESHOLD, for a page and for an anchor alike (the paper's sim > 0 would count
almost every page and anchor, as cosine scores, LSI's above all, are rarely exactly 0: the
context would then count for nothing). anchor = ``anchor_relevance``, the text around the
link = ``context_relevance``. A seed inherits 0: no path leads to it.

Unrolled, inherited(child) = delta ** (run + 1) * sim(a), where a is the nearest relevant page
on the path and run the number of irrelevant pages after it, so ``child_meta`` carries just
those two values down the path (``shark_sim``, ``shark_run``) and the score needs no state.

The fish-search depth: a chain is not followed after ``depth`` irrelevant pages in a row (a
link whose run reaches ``depth`` is not queued; ``focused/depth_cut`` counts them). An
irrelevant seed is the first irrelevant page of its chains. Fish-search's own depth D (De Bra
and Post, 1994) counts down on the links, and a link at 0 is still fetched (only its page's
links are dropped, unless the page is relevant): D lets D + 1 irrelevant pages in a row be
fetched, so ``depth`` here is D + 1 (the default 3 is D = 2).

A URL found again while it is queued (rediscovery, ``merge_paths``; the sources say nothing
of it) keeps the better of each of its discoveries: the higher score, with that discovery's
link (parent, anchor, level), and the two paths merged: the shorter run of irrelevant pages
(the larger remaining depth) and the larger inherited score, both handed on to its links. So a
URL found again on a relevant page has its full ``depth`` again, as fish-search gives the
children of a relevant page, even through a poorer anchor that does not raise its score; and a
better score found through irrelevant pages never shortens its remaining depth. The inherited
score kept, delta ** (run_b + 1) * sim_b of the other path b, is carried as ``shark_sim`` =
delta ** (run_b - run) * sim_b at the shorter ``run``, so every page below decays from it as
from its own. The request's meta may then score it a little above its queued score, which
stays the better discovery's: only a request queued anew (a retry, one a crash left in flight)
is scored from its meta. On the shared frontier (``FOCUSED_FRONTIER``) the paths are merged in
Redis (``shared_merge``, the same merge in Lua) as each discovery is put, by whichever process
found it, so that no process's discovery is lost to another's.

Parameters:
    delta (float in [0, 1], default 0.5): decay of the inherited score per link.
    beta (float in [0, 1], default 0.8): weight of the anchor against its context.
    gamma (float in [0, 1], default 0.8): weight of the inherited score against the
        neighbourhood.
    depth (int >= 1, default 3): irrelevant pages in a row after which a chain is dropped; the
        paper leaves its value open, 3 lets a crawl cross two off-topic pages to a third. A
        URL found again counts the shorter of its runs (above).

The defaults of delta, beta and gamma are this project's choice: the paper requires only that
each be < 1. 1 is accepted but degenerate: delta=1 never decays (a chain keeps sim(a) until
``depth`` cuts it), beta=1 ignores the context and gamma=1 the whole neighbourhood (the link's
own text).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.crawler import Crawler

from focused.arguments import Param
from schedulers.base import SEED_SCORE, StrategyQueue

if TYPE_CHECKING:
    from focused.relevance import Scores


# merge_paths on the shared frontier (shared_merge): kept and other are "run sim"; DELTA is
# replaced by the crawl's delta. %.17g writes a double that Python reads back unchanged.
MERGE_LUA = """
local function merge(kept, other)
  local delta = DELTA
  local run_a, sim_a = string.match(kept, '^(%S+) (%S+)$')
  local run_b, sim_b = string.match(other, '^(%S+) (%S+)$')
  run_a, sim_a, run_b, sim_b = tonumber(run_a), tonumber(sim_a), tonumber(run_b), tonumber(sim_b)
  local run, best_run, sim = math.min(run_a, run_b), run_a, sim_a
  if delta ^ (run_b + 1) * sim_b > delta ^ (run_a + 1) * sim_a then
    best_run, sim = run_b, sim_b
  end
  if best_run > run then sim = sim * delta ^ (best_run - run) end
  if run == run_a and sim == sim_a then return kept end
  return string.format('%d %.17g', run, sim)
end
"""


class SharkSearchQueue(StrategyQueue):
    name = "shark"
    # The paper has delta, beta, gamma < 1; Param's bounds are inclusive, so 1 is accepted
    # (a degenerate case, said in the docstring) rather than a bound like 0.999 invented.
    params = {
        "delta": Param(0.5, "decay of the inherited score", low=0.0, high=1.0),
        "beta": Param(0.8, "weight of the anchor against its context", low=0.0, high=1.0),
        "gamma": Param(0.8, "weight of inherited against neighbourhood", low=0.0, high=1.0),
        "depth": Param(3, "irrelevant pages in a row after which a chain is dropped", low=1),
    }

    def __init__(self, crawler: Crawler, key: str = "", state: dict[str, Any] | None = None):
        # Imported here: the relevance model's module loads gensim, which listing or checking
        # the strategies need not.
        from focused.relevance import relevance_threshold

        self._threshold = relevance_threshold(crawler.settings)
        super().__init__(crawler, key, state)

    @classmethod
    def child_meta(
        cls, parent_meta: dict[str, Any], scores: Scores, is_relevant: bool
    ) -> dict[str, Any]:
        if is_relevant:
            return {"shark_sim": scores.combined, "shark_run": 0}
        return {
            "shark_sim": parent_meta.get("shark_sim", 0.0),
            "shark_run": parent_meta.get("shark_run", 0) + 1,
        }

    def inherited(self, request: Request) -> float:
        meta = request.meta
        return self.params["delta"] ** (meta["shark_run"] + 1) * meta["shark_sim"]

    def neighbourhood(self, request: Request) -> float:
        anchor = request.meta.get("anchor_relevance", 0.0)
        relevant = anchor >= self._threshold
        context = 1.0 if relevant else request.meta.get("context_relevance", 0.0)
        return self.params["beta"] * anchor + (1 - self.params["beta"]) * context

    def score(self, request: Request) -> float:
        if "shark_run" not in request.meta:
            return SEED_SCORE
        gamma = self.params["gamma"]
        return gamma * self.inherited(request) + (1 - gamma) * self.neighbourhood(request)

    def merge_paths(self, kept: Request, other: Request) -> bool:
        """Give ``kept`` the union of both discoveries' paths (module docstring)."""
        a, b = kept.meta, other.meta
        if "shark_run" not in a or "shark_run" not in b:
            return False  # a seed, queued or found as one: it inherits nothing
        run = min(a["shark_run"], b["shark_run"])
        best = a if self.inherited(kept) >= self.inherited(other) else b
        sim = best["shark_sim"]
        if best["shark_run"] > run:
            # The better inherited score came down the longer path: carried at the shorter
            # path's run, so that each page below decays from it as it would from its own.
            sim *= self.params["delta"] ** (best["shark_run"] - run)
        if (sim, run) == (a["shark_sim"], a["shark_run"]):
            return False
        a["shark_sim"], a["shark_run"] = sim, run
        return True

    def shared_merge(self) -> str:
        """``merge_paths`` in Lua, on "run sim" texts (``pow`` and IEEE doubles as in Python:
        ``tests/test_redis_frontier.py`` checks that both merge alike)."""
        return MERGE_LUA.replace("DELTA", repr(float(self.params["delta"])))

    def shared_path(self, request: Request) -> str:
        meta = request.meta
        return (
            f"{int(meta['shark_run'])} {float(meta['shark_sim'])!r}" if "shark_run" in meta else ""
        )

    def take_shared_path(self, request: Request, path: str) -> None:
        run, sim = path.split()
        request.meta["shark_run"], request.meta["shark_sim"] = int(run), float(sim)

    def admit(self, request: Request) -> bool:
        if request.meta.get("shark_run", 0) < self.params["depth"]:
            return True
        self.stats.inc_value("focused/depth_cut")
        return False

    def links_left_out(self) -> tuple[str, str]:
        return "focused/depth_cut", "depth"
