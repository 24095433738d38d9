"""Rank plus semantic similarity: crawl the medium-ranked URLs, most similar to the topic first.

Source: K. Pavani and G. P. Sajeev, "A novel web crawling method for vertical search engines",
ICACCI 2017. Ordering a frontier by PageRank alone makes the rich richer: well-linked pages are
fetched again and again while medium-ranked relevant pages stay hidden. So:

1. PageRank, PR(p) = (1 - d)/N + d * sum over v -> p of PR(v)/out(v), is computed over the
   link graph discovered so far: every edge the queue has seen, pushed or rediscovered (a URL
   found again adds its edge), from the URL its page was fetched at (``parent_fetched_url``)
   to the URL requested. A page is one node under the URL the frontier knows it by, whatever
   URL it is stored under (``parent_url``: its rel=canonical, say), and the URLs of a redirect
   are one node, its page's: the links to any of them link to it, and it links out by the
   page's links (a redirect's start apart was a node without out-links, and the rank of the
   page linking to it went half to it, half to its target, as to two pages). Pages without
   known out-links spread their rank evenly, as usual. d = 0.85, PageRank's usual value, is
   this project's choice: the paper gives none.
2. Only URLs whose rank lies in a medium band tmin <= PR <= tmax are crawled; tmin and tmax
   are the ``band_low`` and ``band_high`` quantiles of the current ranks of all discovered
   pages (the paper gives no values; ranks average 1/N, so fixed values would mean less and
   less as the graph grows).
3. Among them, the one whose link is most similar to the topic is fetched first. The paper
   compares the content of the medium-band pages with the topic; here the similarity is
   ``link_relevance``, the cosine of the link's anchor and context to the topic, known while
   the URL waits in the frontier, before its page is fetched (the crawl's weighted
   tf-idf/LSI score; ``-s RELEVANCE_LSI_WEIGHT=1`` makes it a pure LSI cosine, as in the
   paper, but of the link's text, not the page's).
4. A URL whose similarity is below ``T``, or whose rank is outside the band, is held back: it is
   not dropped, but fetched only when nothing else is left (most similar first).

A redirect's target, new to the graph, is classed by the rank of the URL redirected until a
ranking ranks it: it is that URL's page.

Ranks are recomputed once the new links found since the last ranking (links the graph lacked:
not a retry's, nor a link a page names twice, nor a redirect's) reach ``rank_every`` and
``rank_growth`` times the links of the graph then ranked, and also when nothing crawlable is
left while URLs found since the last ranking wait for a rank (they are never fetched unranked).
Push and pop cost O(log n); a ranking costs O(edges) for PageRank plus one vectorised pass over
the queued URLs, after which only the URLs whose class changed are re-keyed. Ranking at a
fixed interval would make a crawl's rankings cost O(edges²) in all (the queue's CPU a link grew
from 30 to 172 µs between 25,000 and 200,000 links, ``benchmarks.rankings``). Spaced by the
graph's growth, they cost O(edges / rank_growth) in all (about 11 times the last ranking at the
default; 12-19 µs a link). Each PageRank
starts from the previous ranking's ranks (new URLs at 1/N, the whole renormalised) and stops at
the same tolerance: on the Wikispeedia graph, crawled breadth-first, that takes 22 iterations
a ranking instead of 29, with the same bands. Seeds come first.

Saved on pause, so that a resumed crawl goes on as if it had never stopped: the graph (its URLs
numbered, its edges in order of discovery and its redirects) and the last ranking's ranks, in
``linkgraph.sqlite3`` next to the frontier; the band, the links found since that ranking and
the links it ranked, in the queue's state. The queued URLs' classes and similarities are their
frontier keys. The ranks are taken out of the file as it is read: after a crash, the graph
file is the last pause's (or missing), the queued links are added to it from their parents,
and the whole is ranked again at once (a JOBDIR saved before the ranks were is resumed so too).

With ``-s FOCUSED_FRONTIER=redis://...`` the processes of a crawl share the graph: every link
the graph lacked is appended to a list in Redis (a link found before, by any process, only if
it is a redirect's, whose URLs it makes one page), each process mirrors that list in its own
``LinkGraph``, and the classes are the scores of the shared frontier (see ``SharedLinks``).
``rank_every`` then counts the crawl's links, not one process's, each link once as one process
counts it: a set of the links' 8-byte digests beside the list (about 64 bytes of Redis memory
a link) tells, in the script that logs a link, whether any process logged it before. One
difference: a process finding only unranked URLs while another process is applying a ranking
fetches the best of them rather than wait.

Parameters:
    band_low (quantile in [0, 1], default 0.1): ranks below this quantile are held back.
    band_high (quantile in [0, 1], default 0.9): ranks above this quantile are held back. Both
        defaults are this project's choice: the lowest and highest tenth are out of the band.
    T (float in [0, 1], default 0.05): links less similar to the topic are held back; the paper
        gives no value, 0.05 holds back links whose anchor and context share almost nothing
        with the topic.
    rank_every (int >= 1, default 200): new links discovered between two PageRank
        computations, at least.
    rank_growth (float >= 0, default 0.1): and at least this fraction of the links ranked last
        time; 0 ranks every ``rank_every`` links whatever the graph's size. Both are this
        project's choice: the paper ranks "the extracted URLs" and says nothing of when to rank
        again as more are extracted.

Stats: ``focused/rankings`` (the rankings this process computed).
"""

from __future__ import annotations

import os
import sqlite3
from array import array
from hashlib import blake2b
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import sparse
from scrapy import Request
from scrapy.crawler import Crawler

from focused.arguments import Param
from focused.errors import ConfigError
from schedulers import state_shapes as shapes
from schedulers.base import StrategyQueue, at_back
from schedulers.redis_frontier import GREATER, encode_tiebreak

if TYPE_CHECKING:
    from focused.distributed import SharedCrawl

DAMPING = 0.85  # PageRank's usual d; the paper gives no value
GRAPH_FILE = "linkgraph.sqlite3"
# Classes of queued URLs, which are the first part of the frontier key: the highest pops first.
HELD_BACK, UNRANKED, CRAWLABLE, SEED = 0, 1, 2, 3


class LinkGraph:
    """The discovered link graph: URLs numbered in order of discovery, edges kept once, and the
    URLs that redirect, each one page with the URL it redirects to."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.edges: set[int] = set()  # src << 32 | dst
        # The same edges in order of discovery, which numpy copies in one step: iterating the
        # set for every ranking would cost a Python step per edge, every rank_every links.
        self._pairs = array("q")
        # A redirect's start -> the node it redirects to; the nodes of one page form a tree.
        self.merged: dict[int, int] = {}

    def node(self, url: str) -> int:
        return self.ids.setdefault(url, len(self.ids))

    def add_edge(self, src: str, dst: str) -> bool:
        """Add the link; whether the graph lacked it."""
        pair = self.node(src) << 32 | self.node(dst)
        if pair in self.edges:
            return False
        self.edges.add(pair)
        self._pairs.append(pair)
        return True

    def merge(self, url: str, into: str) -> None:
        """``url`` redirects to ``into``: one page, which PageRank ranks as one node, linked
        from the links to either and linking out by the links of the page fetched."""
        node, target = self._page(self.node(url)), self._page(self.node(into))
        if node != target:  # a redirect back to a URL of the same page adds nothing
            self.merged[node] = target

    def _page(self, node: int) -> int:
        while node in self.merged:
            node = self.merged[node]
        return node

    def pages(self, rank: np.ndarray) -> np.ndarray:
        """``rank`` with one rank a page: that of a node merged into another left out."""
        return np.delete(rank, np.fromiter(self.merged, dtype=np.int64, count=len(self.merged)))

    def pagerank(
        self, damping: float = DAMPING, tol: float = 1e-10, start: np.ndarray | None = None
    ) -> np.ndarray:
        """The rank of every node: a node merged into another has that page's rank."""
        nodes = len(self.ids)
        pairs = np.array(self._pairs, dtype=np.int64)
        # Each node's page, numbered among the pages (0..n-1).
        page = np.arange(nodes)
        if self.merged:
            page[np.fromiter(self.merged, dtype=np.int64)] = list(self.merged.values())
            while not np.array_equal(page, page[page]):
                page = page[page]
        kept = page == np.arange(nodes)
        number = np.cumsum(kept) - 1
        page, n = number[page], int(kept.sum())
        src, dst = page[pairs >> 32], page[pairs & 0xFFFFFFFF]
        if self.merged:  # a page linked under two of its URLs is linked once
            pairs = np.unique(src << 32 | dst)
            src, dst = pairs >> 32, pairs & 0xFFFFFFFF
        out_degree = np.bincount(src, minlength=n)
        links = sparse.csr_matrix((1.0 / out_degree[src], (dst, src)), shape=(n, n))
        dangling = out_degree == 0
        # ``start``: the ranks of a previous ranking of this graph when it had fewer nodes.
        rank = np.full(nodes, 1.0 / n)
        if start is not None and len(start):
            rank[: len(start)] = start
            rank[kept] /= rank[kept].sum()
        rank = rank[kept]
        for _ in range(200):
            new = (1 - damping) / n + damping * (links @ rank + rank[dangling].sum() / n)
            done = np.abs(new - rank).sum() < tol
            rank = new
            if done:
                break
        return rank[page]

    def save(self, path: Path, rank: np.ndarray) -> None:
        """Save the graph with ``rank``, its last ranking (of its first ``len(rank)`` nodes).

        Written whole or not at all: to a new file that then takes the old one's place. A save
        that fails (a full disk) leaves the graph saved before, as ``kill -9`` would."""
        written = path.with_name(f"{path.name}.new")
        written.unlink(missing_ok=True)
        try:
            db = sqlite3.connect(written)
            try:
                with db:
                    db.execute("CREATE TABLE nodes (id INTEGER PRIMARY KEY, url TEXT)")
                    db.execute("CREATE TABLE edges (pair INTEGER)")
                    db.execute("CREATE TABLE ranking (rank BLOB)")
                    db.execute("CREATE TABLE merged (node INTEGER, into_node INTEGER)")
                    db.executemany(
                        "INSERT INTO nodes VALUES (?, ?)", ((i, u) for u, i in self.ids.items())
                    )
                    db.executemany(
                        "INSERT INTO edges VALUES (?)", ((pair,) for pair in self._pairs)
                    )
                    db.execute("INSERT INTO ranking VALUES (?)", (rank.tobytes(),))
                    db.executemany("INSERT INTO merged VALUES (?, ?)", self.merged.items())
            finally:
                db.close()
            os.replace(written, path)
        except BaseException:
            written.unlink(missing_ok=True)
            raise

    def load(self, path: Path) -> np.ndarray | None:
        """Read the graph back, its nodes numbered as saved (the ranks are by number); returns
        the saved ranks, taken out of the file (None if it has none): they hold for the
        frontier of the pause they were saved at, the graph also for a crash after it."""
        db = sqlite3.connect(path)
        with db:
            self.ids = {url: i for i, url in db.execute("SELECT id, url FROM nodes ORDER BY id")}
            edges = db.execute("SELECT pair FROM edges ORDER BY rowid")
            self._pairs = array("q", (pair for (pair,) in edges))
            self.edges = set(self._pairs)
            # A file saved before redirects were merged has no table of them.
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'merged'").fetchone():
                self.merged = dict(db.execute("SELECT node, into_node FROM merged ORDER BY rowid"))
            saved = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'ranking'").fetchone()
            row = db.execute("SELECT rank FROM ranking").fetchone() if saved else None
            db.execute("DROP TABLE IF EXISTS ranking")
        db.close()
        return np.frombuffer(row[0]) if row else None


# Log a link (``edge`` is "parent\nurl", or the URLs of a redirect after the parent; ``fp``
# the URL's fingerprint) and elect the process that ranks: the one whose call finds ``every``
# links, and ``growth`` times those of the last ranking, new since the last ranking claims them
# (returns how many links there are; 0: not elected). A link counts once, as ``LinkGraph``
# counts it, whichever process found it first: its parent and URL's digest joins a set in the
# same step as it is counted, so that two processes finding it at once count it once. A link
# found before is not listed again, unless it is a redirect's (its URLs are merged into one
# page). KEYS: links, urls, ranked, edges. ARGV: edge ('' = log nothing, only claim), fp, url,
# every, growth, the link's digest ('' = no link: a seed's redirect), '1' for a redirect's.
LOG_LINK = """
if ARGV[1] ~= '' then
  local new = ARGV[6] ~= '' and redis.call('SADD', KEYS[4], ARGV[6]) == 1
  if new or ARGV[7] == '1' then redis.call('RPUSH', KEYS[1], ARGV[1]) end
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
end
local n = redis.call('SCARD', KEYS[4])
local ranked = tonumber(redis.call('GET', KEYS[3]) or '0')
if n - ranked < math.max(tonumber(ARGV[4]), tonumber(ARGV[5]) * ranked) then return 0 end
redis.call('SET', KEYS[3], n)
return n
"""

# Rewrite the class (score) of queued URLs after a ranking of the first ``version`` links,
# unless a ranking of a larger graph has re-keyed already. The class is worked out here from
# the member as it is now (its similarity is the tiebreak), so that a rediscovery since the
# ranking read the frontier is not undone; seeds stay seeds; popped URLs are gone.
# KEYS: frontier, members, rekeyed. ARGV: version, T as tiebreak bytes, then (fp, in band).
REKEY = (
    GREATER
    + f"""
if tonumber(redis.call('GET', KEYS[3]) or '0') > tonumber(ARGV[1]) then return -1 end
redis.call('SET', KEYS[3], ARGV[1])
local changed = 0
for i = 3, #ARGV, 2 do
  local member = redis.call('HGET', KEYS[2], ARGV[i])
  if member then
    local old = tonumber(redis.call('ZSCORE', KEYS[1], member))
    local class = {HELD_BACK}
    if ARGV[i + 1] == '1' and not greater(ARGV[2], string.sub(member, 1, 8)) then
      class = {CRAWLABLE}
    end
    if old ~= {SEED} and old ~= class then
      redis.call('ZADD', KEYS[1], 'XX', class, member)
      changed = changed + 1
    end
  end
end
return changed
"""
)
REKEY_BATCH = 1000  # URLs per script call: Redis serves nobody else while a script runs


class SharedLinks:
    """The link graph of a crawl shared through Redis, and the re-keying of its frontier.

    Why no lock: any process may rank, since each ranks the same list of links, and a ranking
    only ever writes classes through ``REKEY``, which is atomic per batch and refuses a ranking
    older than one already applied. So two rankings at once cannot leave the frontier with
    classes from an older graph, and a process that dies while ranking holds nothing up: the
    next ranking redoes its work. ``LOG_LINK`` elects one process per ranking interval
    (``rank_every``, ``rank_growth``), so that the crawl ranks as often as one process would.
    """

    def __init__(self, shared: SharedCrawl) -> None:
        self.shared = shared
        self._links, self._urls = shared.key("rank:links"), shared.key("rank:urls")
        self._edges, self._ranked = shared.key("rank:edges"), shared.key("rank:ranked_edges")
        self._log = shared.redis.register_script(LOG_LINK)
        self._rekey = shared.redis.register_script(REKEY)
        self._read = 0  # links of the list already in this process's graph

    def log(self, parent: str, urls: list[str], fp: bytes, every: int, growth: float) -> int:
        """Log a link from ``parent`` (or "": a seed redirected) to the page of ``urls`` (as
        ``_add_link`` takes them), the last URL's fingerprint ``fp``; the number of links to
        rank if this process is to rank now, else 0."""
        # 8 bytes a link: a collision, one in 2**64 for two links, leaves one of them uncounted
        digest = blake2b(f"{parent}\n{urls[0]}".encode(), digest_size=8).digest() if parent else ""
        edge = "\n".join([parent, *urls])
        redirect = "1" if len(urls) > 1 else "0"
        return self._call([edge, fp, urls[-1], every, repr(growth), digest, redirect])

    def claim(self) -> int:
        """Elect this process to rank if any link came since the last ranking (as ``log``)."""
        return self._call(["", "", "", 1, "0.0", "", "0"])

    def _call(self, args: list) -> int:
        keys = [self._links, self._urls, self._ranked, self._edges]
        return self.shared.run(self._log, keys=keys, args=args, default=0)

    def sync(self, graph: LinkGraph) -> int:
        """Add the links logged since the last call to ``graph``; returns how many it holds."""
        fresh = self.shared.run(self.shared.redis.lrange, self._links, self._read, -1) or []
        for edge in fresh:
            parent, *urls = edge.decode().split("\n")
            _add_link(graph, parent or None, urls)
        self._read += len(fresh)
        return self._read

    def queued_urls(self) -> dict[bytes, str]:
        """Fingerprint -> URL of every URL queued in the shared frontier."""
        fps = self.shared.run(self.shared.redis.hkeys, self.shared.key("members"), default=[])
        urls = self.shared.run(self.shared.redis.hmget, self._urls, fps, default=[]) if fps else []
        return {fp: url.decode() for fp, url in zip(fps, urls, strict=False) if url}

    def rekey(self, version: int, threshold: float, in_band: dict[bytes, bool]) -> int:
        """Apply a ranking of ``version`` links; returns how many URLs changed class."""
        keys = [self.shared.key(name) for name in ("frontier", "members", "rank:rekeyed")]
        head = [version, encode_tiebreak(threshold)]
        items = [value for fp, band in in_band.items() for value in (fp, "1" if band else "0")]
        changed = 0
        for start in range(0, max(len(items), 1), 2 * REKEY_BATCH):
            args = head + items[start : start + 2 * REKEY_BATCH]
            done = self.shared.run(self._rekey, keys=keys, args=args, default=-1)
            if done < 0:
                break  # a ranking of a larger graph was applied meanwhile
            changed += done
        return changed


class RankSemanticQueue(StrategyQueue):
    name = "rank_semantic"
    reads_fetched_parent = True  # the graph's nodes are the URLs the frontier knows
    params = {
        "band_low": Param(0.1, "rank quantile below which URLs are held back", low=0.0, high=1.0),
        "band_high": Param(0.9, "rank quantile above which URLs are held back", low=0.0, high=1.0),
        "T": Param(0.05, "similarity below which links are held back", low=0.0, high=1.0),
        "rank_every": Param(200, "new links discovered between PageRank computations", low=1),
        "rank_growth": Param(
            0.1, "and at least this fraction of the links ranked last time", low=0.0
        ),
    }

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        if params["band_low"] > params["band_high"]:
            raise ConfigError(
                f"band_low={params['band_low']:g} is above band_high={params['band_high']:g}"
            )

    def __init__(self, crawler: Crawler, key: str = "", state: dict[str, Any] | None = None):
        self.graph = LinkGraph()
        shared = getattr(crawler.spider, "shared", None)
        self.links = SharedLinks(shared) if shared is not None else None
        self._graph_path = Path(key, GRAPH_FILE) if key else None
        # Under JOBDIR Scrapy also builds a memory queue, used only for requests that cannot be
        # serialised; rediscoveries go to both, and only the queue holding the crawl keeps them.
        self._records_rediscoveries = bool(key) or not crawler.settings.get("JOBDIR")
        self._rank = np.zeros(0)
        self._band = (0.0, 1.0)
        # The queued URLs: fp -> row of four arrays (node, similarity, class, back; class -1
        # marks a free row), so that a ranking re-classes them in one vectorised pass whose
        # cost is that of the arrays, not of a Python loop over every queued URL.
        self._queued: dict[bytes, int] = {}
        self._row_fp: list[bytes | None] = []
        self._free_rows: list[int] = []
        self._node = np.zeros(0, dtype=np.int64)
        self._similarity = np.zeros(0)
        self._class = np.zeros(0, dtype=np.int8)
        self._back = np.zeros(0, dtype=np.int8)  # 1: a trap request, at the frontier's back
        # Queued URLs per class, of the front and of the back: what pop hands out next is the
        # best class of the front, or of the back once the front is empty.
        self._count = [[0] * 4, [0] * 4]
        self._new_links = 0
        self._ranked_links = 0  # links of the graph at the last ranking
        super().__init__(crawler, key, state)

    # -- the order ---------------------------------------------------------------------------

    def score(self, request: Request) -> float:
        """The URL's class (see the module docstring)."""
        if "parent_url" not in request.meta:
            return SEED
        if self.tiebreak(request) < self.params["T"]:
            return HELD_BACK
        node = self._ranked_node(request)
        if node is None:
            return UNRANKED
        return CRAWLABLE if self._band[0] <= self._rank[node] <= self._band[1] else HELD_BACK

    def _ranked_node(self, request: Request) -> int | None:
        """The ranked node whose rank classes ``request``: its URL's, or, for the request a
        redirect made, whose URL no ranking has ranked, the URL the frontier handed out, whose
        page it is (unranked, it would wait for the next ranking behind every crawlable URL,
        were it the page of the most similar link)."""
        for url in (request.url, *request.meta.get("redirect_urls", [])[:1]):
            node = self.graph.ids.get(url)
            if node is not None and node < len(self._rank):
                return node
        return None

    def tiebreak(self, request: Request) -> float:
        return request.meta.get("link_relevance", 1.0)

    # -- the queue ---------------------------------------------------------------------------

    rekeys = True

    @classmethod
    def runs_distributed(cls) -> bool:
        return True  # the graph and the classes live in Redis: see SharedLinks

    def push(self, request: Request) -> None:
        fp = self._fingerprint(request)
        if self.links is not None:
            # Queued (in Redis, not only buffered) before its link is logged: a ranking that
            # counts the link sees the URL.
            self.frontier.put(fp, self.key(request), request)
            self.frontier.flush()
            self._share_link(request, fp)
            return
        self._record_link(request)
        key = self.key(request)
        self.frontier.put(fp, key, request)
        self._track(fp, request, key)
        self._rank_if_due()

    def pop(self) -> Request | None:
        if self.links is not None:
            # Rank before fetching unranked URLs, if links came since the last ranking (else
            # another process is applying it, and the URL is fetched unranked).
            if self.frontier.top_score() == UNRANKED and self.links.claim():
                self._rerank_shared()
            return self.frontier.pop()
        if self._next_class() == UNRANKED:
            self._rerank()
        request = self.frontier.pop()
        if request is not None:
            self._untrack(self._fingerprint(request))
        return request

    def _next_class(self) -> int | None:
        """The class of the URL ``pop`` hands out next (None: the frontier is empty)."""
        for counts in self._count:
            for cls in (SEED, CRAWLABLE, UNRANKED, HELD_BACK):
                if counts[cls]:
                    return cls
        return None

    def rediscover(self, request: Request) -> bool:
        if self.links is not None:
            self._share_link(request, self._fingerprint(request))
            raised = super().rediscover(request)
            # Its class is this process's latest ranking's: in Redis at once, not after a
            # ranking another process applies meanwhile, which it would undo.
            self.frontier.flush()
            return raised
        if self._records_rediscoveries:
            self._record_link(request)
        fp = self._fingerprint(request)
        raised = fp in self._queued and super().rediscover(request)
        if raised:
            self._untrack(fp)
            self._track(fp, request, (-self.score(request), -self.tiebreak(request), 0))
        # A link found again on a new page is a new edge, due a ranking as a push's is.
        self._rank_if_due()
        return raised

    def _rank_if_due(self) -> None:
        growth = self.params["rank_growth"] * self._ranked_links
        if self._new_links >= max(self.params["rank_every"], growth):
            self._rerank()

    def evicted(self, fps: list[bytes]) -> None:
        if self.links is None:  # a shared frontier keeps no record here: see SharedLinks
            for fp in fps:
                self._untrack(fp)

    def _record_link(self, request: Request) -> None:
        # Only a link the graph lacked brings the next ranking nearer: not a retry's, not a
        # link named twice, not a redirect's (its page's link is the URL redirected).
        if _add_link(self.graph, _graph_parent(request), _urls(request)):
            self._new_links += 1

    def _share_link(self, request: Request, fp: bytes) -> None:
        parent, urls = _graph_parent(request), _urls(request)
        if not parent and len(urls) == 1:
            return  # a seed: nothing to log
        every, growth = self.params["rank_every"], self.params["rank_growth"]
        if self.links.log(parent or "", urls, fp, every, growth):
            self._rerank_shared()

    def _track(self, fp: bytes, request: Request, key: tuple[float, float, int]) -> None:
        cls = int(-key[0])
        if not self._free_rows:
            self._grow_rows()
        row = self._queued[fp] = self._free_rows.pop()
        self._row_fp[row] = fp
        self._node[row] = self.graph.node(request.url)
        self._similarity[row] = -key[1]
        self._class[row] = cls
        self._back[row] = at_back(request)
        self._count[self._back[row]][cls] += 1

    def _untrack(self, fp: bytes) -> None:
        row = self._queued.pop(fp)
        self._count[self._back[row]][self._class[row]] -= 1
        self._class[row] = -1
        self._row_fp[row] = None
        self._free_rows.append(row)

    def _grow_rows(self) -> None:
        size = len(self._row_fp)
        grown = max(1024, 2 * size)
        more = grown - size
        self._node = np.concatenate([self._node, np.zeros(more, dtype=np.int64)])
        self._similarity = np.concatenate([self._similarity, np.zeros(more)])
        self._class = np.concatenate([self._class, np.full(more, -1, dtype=np.int8)])
        self._back = np.concatenate([self._back, np.zeros(more, dtype=np.int8)])
        self._row_fp += [None] * (grown - size)
        self._free_rows += range(grown - 1, size - 1, -1)  # the lowest row is taken first

    def _rerank(self) -> None:
        """Recompute PageRank and the band, then re-key the queued URLs whose class changed."""
        self._new_links = 0
        if not self.graph.ids:
            return
        self._rank_graph()
        if not self._queued:
            return
        old = self._class
        rank = self._rank[self._node]
        in_band = (rank >= self._band[0]) & (rank <= self._band[1])
        new = np.where(in_band & (self._similarity >= self.params["T"]), CRAWLABLE, HELD_BACK)
        new = np.where(old == SEED, SEED, new)
        for row in np.flatnonzero((new != old) & (old >= 0)).tolist():
            fp, cls = self._row_fp[row], int(new[row])
            key = self.frontier.key_of(fp)
            self.frontier.rekey(fp, (-float(cls), key[1], key[2]))
            counts = self._count[self._back[row]]
            counts[old[row]] -= 1
            counts[cls] += 1
            old[row] = cls

    def _rank_graph(self) -> None:
        self._rank = self.graph.pagerank(start=self._rank)
        self._ranked_links = len(self.graph.edges)
        self._band = tuple(
            np.quantile(
                self.graph.pages(self._rank), [self.params["band_low"], self.params["band_high"]]
            )
        )
        self.stats.inc_value("focused/rankings")

    def _rerank_shared(self) -> None:
        """Rank the crawl's graph, then re-key the shared frontier (see SharedLinks)."""
        version = self.links.sync(self.graph)
        if not self.graph.ids:
            return
        self._rank_graph()
        queued = self.links.queued_urls()
        nodes = {fp: self.graph.ids.get(url) for fp, url in queued.items()}
        nodes = {fp: node for fp, node in nodes.items() if node is not None}
        rank = self._rank[np.fromiter(nodes.values(), dtype=np.int64, count=len(nodes))]
        in_band = (rank >= self._band[0]) & (rank <= self._band[1])
        self.links.rekey(version, self.params["T"], dict(zip(nodes, in_band.tolist(), strict=True)))

    # -- pause and resume ----------------------------------------------------------------------

    state_shapes = StrategyQueue.state_shapes | {
        "band": shapes.row(shapes.number, shapes.number),
        "new_links": shapes.whole,
        "ranked_links": shapes.whole,
    }

    @classmethod
    def check_state(cls, state: Any) -> None:
        """Also: a state with its ranking (``ranked_links``) has all of it."""
        super().check_state(state)
        if "ranked_links" in state and not {"band", "new_links"} <= state.keys():
            raise ValueError(f"its ranking is not what the {cls.name} strategy saves")

    def state(self) -> dict[str, Any]:
        return {
            "band": list(self._band),
            "new_links": self._new_links,
            "ranked_links": self._ranked_links,
        }

    def restore(self, state: dict[str, Any]) -> None:
        if self._graph_path is None:
            return
        rank = self.graph.load(self._graph_path) if self._graph_path.exists() else None
        # The frontier keys hold each URL's class and similarity; after a crash without a saved
        # graph, the queued links are still known from their parents.
        for fp, key, request in self.frontier.entries():
            _add_link(self.graph, _graph_parent(request), _urls(request))
            self._track(fp, request, key)
        if rank is None or "ranked_links" not in state:
            # A crash, or a JOBDIR saved without its ranking: the classes queued may be of a
            # later ranking than the graph, rank everything again.
            self._rerank()
            return
        # A pause: ranking now would change the classes off the schedule of an unpaused crawl.
        self._rank, self._band = rank, tuple(state["band"])
        self._new_links, self._ranked_links = state["new_links"], state["ranked_links"]

    def close(self) -> dict[str, Any]:
        if self._graph_path is not None:
            self.graph.save(self._graph_path, self._rank)
        return super().close()


def _urls(request: Request) -> list[str]:
    """The URLs of the request's page: those it was redirected from, then its own."""
    return [*request.meta.get("redirect_urls", ()), request.url]


def _add_link(graph: LinkGraph, parent: str | None, urls: list[str]) -> bool:
    """Add a link from ``parent`` to the page of ``urls`` (a redirect's URLs, the first the
    link's), each URL of it merged into the next; whether the graph lacked the link."""
    new = bool(parent) and graph.add_edge(parent, urls[0])
    for url, into in pairwise(urls):
        graph.merge(url, into)
    return new


def _graph_parent(request: Request) -> str | None:
    """The node a link comes from: its page's URL as the frontier handed it out. A request
    queued before children carried ``parent_fetched_url`` (an older JOBDIR) names its page as
    stored, which for most pages is the same URL."""
    return request.meta.get("parent_fetched_url") or request.meta.get("parent_url")
