"""Rank plus semantic similarity: crawl the medium-ranked URLs, most similar to the topic first.

Source: K. Pavani and G. P. Sajeev, "A novel web crawling method for vertical search engines",
ICACCI 2017. Ordering a frontier by PageRank alone makes the rich richer: well-linked pages are
fetched again and again while medium-ranked relevant pages stay hidden. So:

1. PageRank, PR(p) = (1 - d)/N + d * sum over v -> p of PR(v)/out(v), d = 0.85, is computed over
   the link graph discovered so far: every parent_url -> url edge the queue has seen, pushed or
   rediscovered (a URL found again adds its edge). Pages without known out-links spread their
   rank evenly, as usual.
2. Only URLs whose rank lies in a medium band tmin <= PR <= tmax are crawled; tmin and tmax
   are the ``band_low`` and ``band_high`` quantiles of the current ranks of all discovered URLs.
3. Among them, the one whose link is most similar to the topic is fetched first. The
   similarity is ``link_relevance``, the cosine of the link's anchor and context to the topic
   (the crawl's weighted tf-idf/LSI score; ``-s RELEVANCE_LSI_WEIGHT=1`` makes it the paper's
   pure LSI cosine).
4. A URL whose similarity is below ``T``, or whose rank is outside the band, is held back: it is
   not dropped, but fetched only when nothing else is left (most similar first).

Ranks are recomputed every ``rank_every`` new links, and also when nothing crawlable is left
while URLs found since the last ranking wait for a rank (they are never fetched unranked).
Push and pop cost O(log n); a ranking costs O(edges) for PageRank plus one vectorised pass over
the queued URLs, after which only the URLs whose class changed are re-keyed. Seeds come first.

Under JOBDIR the graph is kept in ``linkgraph.sqlite3`` next to the frontier, so a resumed crawl
ranks over everything found before the pause.

Parameters:
    band_low (quantile in [0, 1], default 0.1): ranks below this quantile are held back.
    band_high (quantile in [0, 1], default 0.9): ranks above this quantile are held back.
    T (float in [0, 1], default 0.05): links less similar to the topic are held back; the paper
        gives no value, 0.05 holds back links whose anchor and context share almost nothing
        with the topic.
    rank_every (int >= 1, default 200): links discovered between two PageRank computations.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse
from scrapy import Request
from scrapy.crawler import Crawler

from focused.arguments import Param
from focused.errors import ConfigError
from schedulers.base import StrategyQueue

DAMPING = 0.85
GRAPH_FILE = "linkgraph.sqlite3"
# Classes of queued URLs, which are the first part of the frontier key: the highest pops first.
HELD_BACK, UNRANKED, CRAWLABLE, SEED = 0, 1, 2, 3


class LinkGraph:
    """The discovered link graph: URLs numbered in order of discovery, edges kept once."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.edges: set[int] = set()  # src << 32 | dst

    def node(self, url: str) -> int:
        return self.ids.setdefault(url, len(self.ids))

    def add_edge(self, src: str, dst: str) -> None:
        self.edges.add(self.node(src) << 32 | self.node(dst))

    def pagerank(self, damping: float = DAMPING, tol: float = 1e-10) -> np.ndarray:
        n = len(self.ids)
        pairs = np.fromiter(self.edges, dtype=np.int64, count=len(self.edges))
        src, dst = pairs >> 32, pairs & 0xFFFFFFFF
        out_degree = np.bincount(src, minlength=n)
        links = sparse.csr_matrix((1.0 / out_degree[src], (dst, src)), shape=(n, n))
        dangling = out_degree == 0
        rank = np.full(n, 1.0 / n)
        for _ in range(200):
            new = (1 - damping) / n + damping * (links @ rank + rank[dangling].sum() / n)
            done = np.abs(new - rank).sum() < tol
            rank = new
            if done:
                break
        return rank

    def save(self, path: Path) -> None:
        db = sqlite3.connect(path)
        with db:
            db.execute("DROP TABLE IF EXISTS nodes")
            db.execute("DROP TABLE IF EXISTS edges")
            db.execute("CREATE TABLE nodes (id INTEGER PRIMARY KEY, url TEXT)")
            db.execute("CREATE TABLE edges (pair INTEGER)")
            db.executemany("INSERT INTO nodes VALUES (?, ?)", ((i, u) for u, i in self.ids.items()))
            db.executemany("INSERT INTO edges VALUES (?)", ((pair,) for pair in self.edges))
        db.close()

    def load(self, path: Path) -> None:
        db = sqlite3.connect(path)
        self.ids = {url: i for i, url in db.execute("SELECT id, url FROM nodes ORDER BY id")}
        self.edges = {pair for (pair,) in db.execute("SELECT pair FROM edges")}
        db.close()


class RankSemanticQueue(StrategyQueue):
    name = "rank_semantic"
    params = {
        "band_low": Param(0.1, "rank quantile below which URLs are held back", low=0.0, high=1.0),
        "band_high": Param(0.9, "rank quantile above which URLs are held back", low=0.0, high=1.0),
        "T": Param(0.05, "similarity below which links are held back", low=0.0, high=1.0),
        "rank_every": Param(200, "links discovered between PageRank computations", low=1),
    }

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        if params["band_low"] > params["band_high"]:
            raise ConfigError(
                f"band_low={params['band_low']:g} is above band_high={params['band_high']:g}"
            )

    def __init__(self, crawler: Crawler, key: str = "", state: dict[str, Any] | None = None):
        self.graph = LinkGraph()
        self._graph_path = Path(key, GRAPH_FILE) if key else None
        # Under JOBDIR Scrapy also builds a memory queue, used only for requests that cannot be
        # serialised; rediscoveries go to both, and only the queue holding the crawl keeps them.
        self._records_rediscoveries = bool(key) or not crawler.settings.get("JOBDIR")
        self._rank = np.zeros(0)
        self._band = (0.0, 1.0)
        self._queued: dict[bytes, tuple[int, float, int]] = {}  # fp -> (node, similarity, class)
        self._count = [0, 0, 0, 0]  # queued URLs per class
        self._new_links = 0
        super().__init__(crawler, key, state)

    # -- the order ---------------------------------------------------------------------------

    def score(self, request: Request) -> float:
        """The URL's class (see the module docstring)."""
        if "parent_url" not in request.meta:
            return SEED
        if self.tiebreak(request) < self.params["T"]:
            return HELD_BACK
        node = self.graph.node(request.url)
        if node >= len(self._rank):
            return UNRANKED
        return CRAWLABLE if self._band[0] <= self._rank[node] <= self._band[1] else HELD_BACK

    def tiebreak(self, request: Request) -> float:
        return request.meta.get("link_relevance", 1.0)

    # -- the queue ---------------------------------------------------------------------------

    def push(self, request: Request) -> None:
        self._record_link(request)
        fp = self._fingerprint(request)
        key = self.key(request)
        self.frontier.put(fp, key, request)
        self._track(fp, request, key)
        if self._new_links >= self.params["rank_every"]:
            self._rerank()

    def pop(self) -> Request | None:
        if self._count[UNRANKED] and not (self._count[SEED] or self._count[CRAWLABLE]):
            self._rerank()
        request = self.frontier.pop()
        if request is not None:
            self._untrack(self._fingerprint(request))
        return request

    def rediscover(self, request: Request) -> bool:
        if self._records_rediscoveries:
            self._record_link(request)
        fp = self._fingerprint(request)
        if fp not in self._queued or not super().rediscover(request):
            return False
        self._untrack(fp)
        self._track(fp, request, (-self.score(request), -self.tiebreak(request), 0))
        return True

    def _record_link(self, request: Request) -> None:
        parent = request.meta.get("parent_url")
        if parent:
            self.graph.add_edge(parent, request.url)
            self._new_links += 1

    def _track(self, fp: bytes, request: Request, key: tuple[float, float, int]) -> None:
        cls = int(-key[0])
        self._queued[fp] = (self.graph.node(request.url), -key[1], cls)
        self._count[cls] += 1

    def _untrack(self, fp: bytes) -> None:
        self._count[self._queued.pop(fp)[2]] -= 1

    def _rerank(self) -> None:
        """Recompute PageRank and the band, then re-key the queued URLs whose class changed."""
        self._new_links = 0
        if not self.graph.ids:
            return
        self._rank = self.graph.pagerank()
        self._band = tuple(
            np.quantile(self._rank, [self.params["band_low"], self.params["band_high"]])
        )
        self.stats.inc_value("focused/rankings")
        if not self._queued:
            return
        fps = list(self._queued)
        node, similarity, old = (
            np.array(column) for column in zip(*self._queued.values(), strict=True)
        )
        rank = self._rank[node]
        in_band = (rank >= self._band[0]) & (rank <= self._band[1])
        new = np.where(in_band & (similarity >= self.params["T"]), CRAWLABLE, HELD_BACK)
        new = np.where(old == SEED, SEED, new)
        for i in np.flatnonzero(new != old):
            fp = fps[i]
            key = self.frontier.key_of(fp)
            request = self.frontier.remove(fp)
            self.frontier.put(fp, (-float(new[i]), key[1], key[2]), request)
            self._untrack(fp)
            self._track(fp, request, (-float(new[i]), key[1], key[2]))

    # -- pause and resume ----------------------------------------------------------------------

    def restore(self, state: dict[str, Any]) -> None:
        if self._graph_path is None:
            return
        if self._graph_path.exists():
            self.graph.load(self._graph_path)
        # The frontier keys hold each URL's class and similarity; after a crash without a saved
        # graph, the queued links are still known from their parents.
        for fp, key, request in self.frontier.entries():
            if request.meta.get("parent_url"):
                self.graph.add_edge(request.meta["parent_url"], request.url)
            self._track(fp, request, key)
        self._rerank()

    def close(self) -> dict[str, Any]:
        if self._graph_path is not None:
            self.graph.save(self._graph_path)
        return super().close()
