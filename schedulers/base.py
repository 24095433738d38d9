"""The base of every strategy: a Scrapy priority queue ordered by a float score.

Scrapy's own queues order by the integer ``Request.priority`` and, by default
(``DownloaderAwarePriorityQueue``), round-robin across domains, which ignores priority between
sites. A focused crawl needs one global order by a real-valued score, so each strategy is a
queue class that Scrapy's scheduler builds in place of those (``SCHEDULER_PRIORITY_QUEUE``).

A strategy subclass defines ``score(request)`` (higher is fetched first) and optionally
``tiebreak(request)``; equal keys pop in push order. The entries live in a ``MemoryFrontier``
(a sorted run and a heap, with lazy deletion) or, for the JOBDIR queue, a ``SqliteFrontier``
file that survives pause and resume. ``rediscover(request)`` lets a URL found again from a
better parent raise its queued score instead of being dropped by the dupefilter.

``ranked()`` lists the queued requests' hosts in pop's order without taking them out, and
``take(fp)`` hands out one of them: the scheduler passes over a host held by its delay this way
(``HELD_HOST_LOOKAHEAD``) without changing the order of what it leaves queued.

``evict(count)`` drops the ``count`` lowest-ranked entries: the frontier bound of the sources
(MAX_BUFFER), applied by ``focused.scheduler.FocusedScheduler`` for every strategy. Both
frontiers find their worst entries in O(log n): the memory one keeps a second heap ordered
worst-first (from its first eviction on), the SQLite one walks its order index backwards.

A request of a trap family (``meta[TRAP_META]``, set by the scheduler, see ``focused.traps``)
is kept behind every other one: each frontier orders its entries by ``(back, key)``. The
penalty lives in the frontier, not in the key, because strategies read their keys back
(``rank_semantic`` keeps a URL's class in the first element) and every strategy must respect it.
Trap requests are also the first evicted.
"""

from __future__ import annotations

import heapq
import logging
import pickle
import sqlite3
from collections import Counter
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.request import request_from_dict

from focused.errors import one_line
from focused.jobdir import (
    FINGERPRINT,
    FLAG,
    NUMBER,
    PICKLE,
    TEXT,
    WHOLE,
    GuardedConnection,
    jobdir_writes,
    or_null,
)
from focused.traps import TRAP_META
from schedulers import state_shapes as shapes

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

    from focused.arguments import Param
    from focused.jobdir import JobdirWrites
    from focused.relevance import Scores
    from schedulers.redis_frontier import RedisFrontier

# (-score, -tiebreak, seq): the smallest key pops first.
Key = tuple[float, float, int]
# Every frontier orders its entries by (back, *key): requests of a trap family (marked by the
# scheduler, see focused.traps) are at the back, behind every other request, whatever their
# key. The penalty is the frontier's, so every strategy's keys stay its own.
# A memory frontier's item: (*key, fp).
# The key's tiebreak for a strategy without one: -tiebreak() of the default, 0.0, as before.
NO_TIEBREAK = -0.0
Item = tuple[float, float, int, bytes]


# Request meta: the response to this request was counted in the page budget before a crash cut
# it off (``SqliteFrontier.recover_inflight``); it is not counted again when fetched again.
RESPONSE_COUNTED = "focused_response_counted"

# Stat: requests of the frontier file that could not be read back, dropped (``SqliteFrontier``).
DAMAGED_STAT = "focused/resume/damaged_requests"

# Scrapy's folder of the JOBDIR queue (``Scheduler._dqdir``), and in it the SQLite frontier's
# file.
QUEUE_DIR = "requests.queue"
FRONTIER_FILE = "frontier.sqlite3"
# The SQLite frontier's tables, with the columns read from them (focused.jobchecks checks a
# JOBDIR's file has them): ``frontier`` is made with the file, the others came later.
FRONTIER_TABLES = {
    "frontier": ("fp", "neg_score", "neg_tiebreak", "seq", "request"),
    "inflight": ("fp", "request"),
    "finished": ("fp",),
}
# What each column of those tables holds (``focused.jobdir.damaged_row``; a column an older
# file lacks is made as it opens).
FRONTIER_VALUES = {
    "frontier": {
        "fp": FINGERPRINT,
        "neg_score": NUMBER,
        "neg_tiebreak": NUMBER,
        "seq": WHOLE,
        "request": PICKLE,
        "back": FLAG,
        "host": or_null(TEXT),
        "counted": FLAG,
    },
    "inflight": {"fp": FINGERPRINT, "request": PICKLE, "counted": FLAG, "seq": or_null(WHOLE)},
    "finished": {"fp": FINGERPRINT},
}

# The SQLite frontier's order, as its index and every read in that order name it.
RANK_ORDER = "back, neg_score, neg_tiebreak, seq"
RANKED_CHUNK = 64  # entries read at a time by a frontier's ranked() outside the process
# A seed's score in the strategies that score a link in [0, 1]: above every link, so the seeds
# are fetched first.
SEED_SCORE = 2.0


def at_back(request: Request) -> int:
    return 1 if request.meta.get(TRAP_META) else 0


def host_of(request: Request) -> str:
    return urlparse_cached(request).hostname or ""


def dump_request(request: Request, spider: Spider) -> bytes:
    """A request as bytes, for a frontier kept outside the process (may raise ValueError)."""
    return pickle.dumps(request.to_dict(spider=spider), protocol=pickle.HIGHEST_PROTOCOL)


def load_request(blob: bytes, spider: Spider) -> Request:
    return request_from_dict(pickle.loads(blob), spider=spider)


class _Order:
    """Items ``(*key, fp)`` in three places that together order them, smallest first:

    - ``pending``, items put since the last pop, unsorted (a put is a list append);
    - ``run``, items sorted largest first, so the smallest is popped from its end;
    - ``heap``, a smallest-first heap.

    A pop first moves the pending items in: onto the heap when they are few, or, when they
    outnumber the rest (a crawl's start, a resumed or benchmarked queue), by sorting everything
    into a new run, which is much cheaper in C than a heap operation per item.
    """

    __slots__ = ("heap", "pending", "run")

    def __init__(self) -> None:
        self.pending: list[Item] = []
        self.run: list[Item] = []
        self.heap: list[Item] = []

    def _take_pending(self) -> None:
        pending, heap = self.pending, self.heap
        self.pending = []
        if len(pending) > len(heap) + len(self.run):
            pending += heap
            pending += self.run
            pending.sort(reverse=True)
            self.run, self.heap = pending, []
        else:
            for item in pending:
                heapq.heappush(heap, item)

    def best(self, items: dict[bytes, Item], remove: bool) -> Item | None:
        """The current item with the smallest key; stale items are dropped on the way. The
        frontier holds the very tuple that was queued for each fingerprint, so an item is
        current exactly when it *is* that tuple."""
        if self.pending:
            self._take_pending()
        heap, run, get = self.heap, self.run, items.get
        while run or heap:
            from_heap = bool(heap) and (not run or heap[0] < run[-1])
            item = heap[0] if from_heap else run[-1]
            current = get(item[3]) is item
            if current and not remove:
                return item
            if from_heap:
                heapq.heappop(heap)
            else:
                run.pop()
            if current:
                return item
        return None

    def ranked(self, items: dict[bytes, Item]) -> Iterator[Item]:
        """The current items, smallest first, left where they are, as long as the caller reads
        on: the run is read from its end and the heap's smallest walked through a small heap of
        its indices, so the cost grows with what is read (and the stale items met), not with
        the frontier. Nothing may change the order while the iterator is in use."""
        if self.pending:
            self._take_pending()
        heap, run, get = self.heap, self.run, items.get
        next_in_heap = [(heap[0], 0)] if heap else []
        in_run = len(run) - 1
        while next_in_heap or in_run >= 0:
            if next_in_heap and (in_run < 0 or next_in_heap[0][0] < run[in_run]):
                item, index = heapq.heappop(next_in_heap)
                for child in (2 * index + 1, 2 * index + 2):
                    if child < len(heap):
                        heapq.heappush(next_in_heap, (heap[child], child))
            else:
                item = run[in_run]
                in_run -= 1
            if get(item[3]) is item:
                yield item


class MemoryFrontier:
    """Entries by fingerprint, ordered by key in two tiers: requests of a trap family (the
    back tier) come after every other one. Each tier is an ``_Order`` with lazy deletion: an
    item that a pop, a rescoring or an eviction made stale is skipped when it comes up.

    Two choices keep a push+pop cheap. The tiers are apart, rather than one order by
    ``(back, *key)``, because tuples whose first element decides compare much faster (in a sort
    and in the heap) than tuples whose first element is almost always equal. Items hold only
    numbers and the fingerprint, and the requests are in a dict of their own: the garbage
    collector stops tracking such tuples after its first pass over them, whereas a tuple that
    held its request would stay tracked and make every full collection walk the frontier (three
    times the cost of the push itself, measured with ``benchmarks/frontier.py``).
    The worst-first heap of ``evict_worst`` is built on the first eviction: crawls that never
    reach ``FRONTIER_MAX`` never pay for it.
    Stale items that no pop will meet (evicted entries are the worst, and a crawl may never
    reach a rescored entry's old key) are dropped by rebuilding the tiers once there are more
    of them than entries: else a frontier kept at ``FRONTIER_MAX`` grew by an item per link
    it ever evicted.
    """

    def __init__(self) -> None:
        self._front, self._back = _Order(), _Order()
        self._worst: list[tuple] | None = None  # _worst_order() of items
        self._items: dict[bytes, Item] = {}
        self._requests: dict[bytes, Request] = {}
        self._stale = 0  # items left in the tiers by removals and rescorings since a rebuild

    def put(self, fp: bytes, key: Key, request: Request) -> None:
        item = (key[0], key[1], key[2], fp)
        if fp in self._items:
            self._went_stale()
        self._items[fp] = item
        self._requests[fp] = request
        back = at_back(request)
        (self._back if back else self._front).pending.append(item)
        worst = self._worst
        if worst is None:
            return
        heapq.heappush(worst, _worst_order(item, back))
        if len(worst) > 2 * len(self._items) + 1024:
            # Popped and rescored entries leave stale items behind: rebuild, O(n) once per
            # n puts, so that the worst-first heap stays proportional to the frontier.
            self._build_worst()

    def _build_worst(self) -> None:
        requests = self._requests
        self._worst = [
            _worst_order(item, at_back(requests[fp])) for fp, item in self._items.items()
        ]
        heapq.heapify(self._worst)

    def evict_worst(self, count: int) -> list[bytes]:
        """Remove up to ``count`` entries with the largest orders; returns their fingerprints."""
        if self._worst is None:
            self._build_worst()
        worst, items = self._worst, self._items
        evicted: list[bytes] = []
        while worst and len(evicted) < count:
            order = heapq.heappop(worst)
            fp = order[4]
            item = items.get(fp)
            if item is not None and _worst_order(item, at_back(self._requests[fp])) == order:
                self.remove(fp)  # its item in the best-first structures is now stale
                evicted.append(fp)
        return evicted

    def _went_stale(self) -> None:
        self._stale += 1
        if self._stale > len(self._items) + 1024:  # O(n) once per n stale items
            self._stale = 0
            self._front, self._back = _Order(), _Order()
            requests = self._requests
            for fp, item in self._items.items():
                (self._back if at_back(requests[fp]) else self._front).pending.append(item)

    def _best(self, remove: bool) -> Request | None:
        item = self._front.best(self._items, remove) or self._back.best(self._items, remove)
        if item is None:
            return None
        if not remove:
            return self._requests[item[3]]
        del self._items[item[3]]  # its item is out of the tiers already
        return self._requests.pop(item[3])

    def peek(self) -> Request | None:
        return self._best(remove=False)

    def pop(self) -> Request | None:
        return self._best(remove=True)

    def ranked(self, start: int = 0) -> Iterator[tuple[bytes, str]]:
        """Every entry's fingerprint and host, in the order ``pop`` would hand them out, from
        the ``start``-th on, left queued; lazily, so reading a few costs a few."""
        requests, entries = self._requests, self._items
        in_order = (item for tier in (self._front, self._back) for item in tier.ranked(entries))
        for item in islice(in_order, start, None):
            yield item[3], host_of(requests[item[3]])

    def key_of(self, fp: bytes) -> Key | None:
        item = self._items.get(fp)
        return item[:3] if item else None

    def request_of(self, fp: bytes) -> Request | None:
        """The request queued under ``fp``, left queued (None if there is none)."""
        return self._requests.get(fp)

    def key_to_beat(self, fp: bytes, better: tuple[float, float]) -> Key | None:
        """The key a rediscovery of ``better`` (-score, -tiebreak) would have to beat: here
        simply ``key_of`` (see ``RedisFrontier.key_to_beat``)."""
        return self.key_of(fp)

    def rekey(self, fp: bytes, key: Key) -> None:
        """Give the queued entry ``fp`` another key (a strategy moving it in its order)."""
        self.put(fp, key, self._requests[fp])

    def replace(self, fp: bytes, request: Request) -> bool:
        """Put ``request`` in the place of the one queued under ``fp``, under its key (a
        strategy's ``merge_paths``; the mark of the back, ``at_back``, must be the same)."""
        if fp not in self._requests:
            return False
        self._requests[fp] = request
        return True

    def in_front(self, fp: bytes) -> bool:
        """Whether ``fp`` is queued, and not at the back (a trap family's)."""
        return fp in self._items and not at_back(self._requests[fp])

    def remove(self, fp: bytes) -> Request | None:
        if self._items.pop(fp, None) is None:
            return None
        request = self._requests.pop(fp)
        self._went_stale()
        return request

    take = remove  # an entry ``ranked`` listed, handed out

    def entries(self) -> Iterator[tuple[bytes, Key, Request]]:
        for fp, item in self._items.items():
            yield fp, item[:3], self._requests[fp]

    def max_seq(self) -> int:
        return max((item[2] for item in self._items.values()), default=0)

    def __len__(self) -> int:
        return len(self._items)

    def close(self) -> None:
        self._front, self._back, self._worst = _Order(), _Order(), None
        self._items.clear()
        self._requests.clear()
        self._stale = 0


def _worst_order(item: Item, back: int) -> tuple:
    """An entry's place in the worst-first heap: the back tier first, then the largest keys."""
    return (-back, -item[0], -item[1], -item[2], item[3])


def connect_crash_safe(path: Path | str, writes: JobdirWrites | None = None) -> GuardedConnection:
    """An SQLite file where every statement outside ``BEGIN`` is its own transaction, and a
    commit survives ``kill -9`` (WAL, ``synchronous=NORMAL``: written to the OS, no fsync).

    With ``writes`` (a JOBDIR file), a statement that fails because the file or its disk did
    raises ``focused.jobdir.JobdirUnwritable`` and stops the crawl, and no statement runs once
    the JOBDIR failed."""
    if writes is not None:
        writes.check()
    try:
        db = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, factory=GuardedConnection
        )
    except sqlite3.Error as exc:
        raise (exc if writes is None else writes.failed(path, exc)) from None
    db.writes, db.path = writes, path
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        db.close()
        raise
    return db


class SqliteFrontier:
    """The same entries in an SQLite table indexed by key, so a crawl resumes from disk.

    Crash-safe (``kill -9``): every change is its own transaction (WAL, ``synchronous=NORMAL``:
    a commit is a write to the OS, no fsync, so it survives the process but not a power cut).
    Two more tables make the file the whole truth about which requests were seen:
    ``inflight`` holds requests handed to the downloader and not finished (the scheduler moves
    a request there in the same transaction that pops it, see ``transaction``), ``finished``
    the fingerprints of requests done with (fetched, failed, dropped or evicted). When the file
    is opened, requests still in flight were cut off by a crash: ``recover_inflight`` hands
    back those to be queued again, each with the sequence number it was queued under, which
    keeps its place among requests of equal score. The ones whose response the page budget
    had counted (``mark_counted``) stay in flight, for the scheduler to fetch again before any
    other (``counted_inflight``): the budget paid for their pages, which the crash kept from
    being stored. Their mark (``RESPONSE_COUNTED``) goes with a retry or redirect of one into the
    frontier, where it is the row's ``counted`` column, set on every request read back: a
    better request for the URL that replaces one so marked (``put``) keeps it.
    """

    def __init__(self, path: Path, spider: Spider) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._spider = spider
        self._path = path
        self._db = connect_crash_safe(path, jobdir_writes(getattr(spider, "crawler", None)))
        self._db.executescript(
            "CREATE TABLE IF NOT EXISTS frontier (fp BLOB PRIMARY KEY, neg_score REAL,"
            " neg_tiebreak REAL, seq INTEGER, request BLOB, back INTEGER NOT NULL DEFAULT 0,"
            " host TEXT, counted INTEGER NOT NULL DEFAULT 0);"
            "CREATE TABLE IF NOT EXISTS inflight (fp BLOB PRIMARY KEY, request BLOB,"
            " counted INTEGER NOT NULL DEFAULT 0, seq INTEGER);"
            "CREATE TABLE IF NOT EXISTS finished (fp BLOB PRIMARY KEY);"
        )
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(frontier)")}
        if "back" not in columns:  # a file written before trap requests went to the back
            self._db.execute("ALTER TABLE frontier ADD COLUMN back INTEGER NOT NULL DEFAULT 0")
        if "host" not in columns:  # a file written before the scheduler read hosts ahead
            self._db.execute("ALTER TABLE frontier ADD COLUMN host TEXT")
        if "counted" not in columns:  # a file whose marks were only in the requests' meta
            self._db.execute("ALTER TABLE frontier ADD COLUMN counted INTEGER NOT NULL DEFAULT 0")
        inflight = {row[1] for row in self._db.execute("PRAGMA table_info(inflight)")}
        if "counted" not in inflight:
            # A file written before in-flight responses were marked as counted.
            self._db.execute("ALTER TABLE inflight ADD COLUMN counted INTEGER NOT NULL DEFAULT 0")
        if "seq" not in inflight:  # a file written before in-flight requests kept their place
            self._db.execute("ALTER TABLE inflight ADD COLUMN seq INTEGER")
        self._db.executescript(
            "DROP INDEX IF EXISTS frontier_order;"
            f"CREATE INDEX IF NOT EXISTS frontier_rank ON frontier ({RANK_ORDER});"
        )
        self._len = self._db.execute("SELECT COUNT(*) FROM frontier").fetchone()[0]
        # The fingerprint and sequence number of the entry last taken out (pop, remove): the
        # request handed out, which ``start_inflight`` records with its place among equals.
        self._taken: tuple[bytes, int] | None = None
        # The host of each request ``recover_inflight`` gave back: it took one of its host's
        # MAX_PAGES_PER_HOST slots before the crash, and takes one again (focused.scheduler).
        self.recovered_hosts: Counter[str] = Counter()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around several changes (e.g. popping requests and recording them as
        in flight), so that a crash leaves each request queued or in flight, never neither.
        Nested uses join the outer transaction."""
        if self._db.in_transaction:
            yield
            return
        length = self._len
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            # A failed COMMIT (a full disk) too: nothing of it reached the file, and the count
            # of queued entries is the file's again.
            self._db.rollback_quietly()
            self._len = length
            raise

    def start_inflight(self, fp: bytes, request: Request) -> None:
        # A retry or redirect of a request fetched again keeps its mark (``counted_inflight``).
        counted = 1 if request.meta.get(RESPONSE_COUNTED) else 0
        seq = self._taken[1] if self._taken is not None and self._taken[0] == fp else None
        self._db.execute(
            "INSERT OR REPLACE INTO inflight (fp, request, counted, seq) VALUES (?, ?, ?, ?)",
            (fp, self._dump(request), counted, seq),
        )

    def mark_counted(self, fp: bytes) -> None:
        """The page budget counted the response to the request in flight under ``fp``."""
        self._db.execute("UPDATE inflight SET counted = 1 WHERE fp = ?", (fp,))

    def finish(self, fp: bytes) -> None:
        with self.transaction():
            self.leave_inflight(fp)
            self._db.execute("INSERT OR IGNORE INTO finished VALUES (?)", (fp,))

    def leave_inflight(self, fp: bytes) -> None:
        """The request is no longer in flight, and not finished either: queued again unsent."""
        self._db.execute("DELETE FROM inflight WHERE fp = ?", (fp,))

    def recover_inflight(self) -> list[tuple[bytes, Request, int | None]]:
        """The requests a crash left in flight whose response was not counted, removed from
        ``inflight``, each with the sequence number it was queued under (None in a file of
        before they kept it): queue them again."""
        rows = self._db.execute(
            "DELETE FROM inflight WHERE counted = 0 RETURNING fp, request, seq"
        ).fetchall()
        loaded = [(fp, self._loaded(fp, blob), seq) for fp, blob, seq in rows]
        recovered = [(fp, request, seq) for fp, request, seq in loaded if request is not None]
        self.recovered_hosts.update(host_of(request) for _, request, _ in recovered)
        return recovered

    def counted_inflight(self) -> list[tuple[bytes, Request]]:
        """The requests left in flight whose response was counted, marked ``RESPONSE_COUNTED``,
        in the order they were handed out: still in flight until fetched again."""
        rows = self._db.execute(
            "SELECT fp, request FROM inflight WHERE counted = 1 ORDER BY rowid"
        ).fetchall()
        loaded = [(fp, self._loaded(fp, blob, counted=1)) for fp, blob in rows]
        return [(fp, request) for fp, request in loaded if request is not None]

    def fingerprints(self) -> Iterator[bytes]:
        """Every fingerprint queued, in flight or finished: what the dupefilter has seen."""
        for table in ("frontier", "inflight", "finished"):
            for (fp,) in self._db.execute(f"SELECT fp FROM {table}"):
                yield fp

    def _dump(self, request: Request) -> bytes:
        return dump_request(request, self._spider)

    def _load(self, blob: bytes, counted: int = 0) -> Request:
        request = load_request(blob, self._spider)
        if counted:
            request.meta[RESPONSE_COUNTED] = True
        return request

    def _loaded(self, fp: bytes, blob: bytes, counted: int = 0) -> Request | None:
        """The request of the row ``fp`` (queued, in flight, or taken out already), or None
        when its bytes cannot be read back: the row is then dropped, its URL left seen, as an
        evicted one is. The JOBDIR check refuses, before the crawl starts, a request that is no
        pickle at all (``focused.jobdir.PICKLE``); one cut short, or the pickle of another value,
        is found only here, since unpickling the whole frontier would slow every resume. Dropped
        with a warning rather than ending the crawl: the bytes name no URL to fetch, and a crawl
        that ended at the row would end at it again at every resume. Before, the crawl logged a
        traceback at each turn of the engine and never ended."""
        try:
            return self._load(blob, counted)
        except Exception as exc:  # unpickling damaged bytes raises about anything
            reason = one_line(exc)
        with self.transaction():
            self._len -= (
                self._db.execute("DELETE FROM frontier WHERE fp = ? RETURNING fp", (fp,)).fetchone()
                is not None
            )
            self._db.execute("DELETE FROM inflight WHERE fp = ?", (fp,))
            self._db.execute("INSERT OR IGNORE INTO finished VALUES (?)", (fp,))
        logger.warning(
            "%s: a request cannot be read (%s): dropped, its URL not fetched", self._path, reason
        )
        crawler = getattr(self._spider, "crawler", None)
        if crawler is not None and crawler.stats is not None:
            crawler.stats.inc_value(DAMAGED_STAT)
        return None

    def put(self, fp: bytes, key: Key, request: Request) -> None:
        blob = self._dump(request)  # may raise ValueError: Scrapy then keeps it in memory
        back, host = at_back(request), host_of(request)
        counted = 1 if request.meta.get(RESPONSE_COUNTED) else 0
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO frontier"
            " (fp, neg_score, neg_tiebreak, seq, request, back, host, counted)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (fp, *key, blob, back, host, counted),
        )
        if cursor.rowcount:
            self._len += 1
        else:
            # A URL queued again after a crash with its response counted keeps its mark when
            # a better discovery replaces its request (most are links of the first pages, soon
            # found on better ones): the same fetch, whose response must not be counted twice.
            self._db.execute(
                "UPDATE frontier SET neg_score = ?, neg_tiebreak = ?, seq = ?, request = ?,"
                " back = ?, host = ?, counted = max(counted, ?) WHERE fp = ?",
                (*key, blob, back, host, counted, fp),
            )

    def _first(self) -> tuple[bytes, bytes, int, int] | None:
        return self._db.execute(
            f"SELECT fp, request, counted, seq FROM frontier ORDER BY {RANK_ORDER} LIMIT 1"
        ).fetchone()

    def peek(self) -> Request | None:
        while row := self._first():
            request = self._loaded(row[0], row[1], row[2])
            if request is not None:
                return request
        return None

    def ranked(self, start: int = 0) -> Iterator[tuple[bytes, str]]:
        """As ``MemoryFrontier.ranked``: the rows are read in chunks as the caller reads on, and
        the host is a column, so no request is unpickled."""
        cursor = self._db.execute(
            f"SELECT fp, host FROM frontier ORDER BY {RANK_ORDER} LIMIT -1 OFFSET ?", (start,)
        )
        try:
            while rows := cursor.fetchmany(RANKED_CHUNK):
                for fp, host in rows:
                    if host is None:  # a row of a file written before the column
                        try:
                            host = host_of(self._load(self._blob(fp)))
                        except Exception:  # damaged: dropped as it comes up (_loaded)
                            host = ""
                    yield fp, host
        finally:
            cursor.close()

    def _blob(self, fp: bytes) -> bytes:
        return self._db.execute("SELECT request FROM frontier WHERE fp = ?", (fp,)).fetchone()[0]

    def pop(self) -> Request | None:
        while row := self._first():
            self._db.execute("DELETE FROM frontier WHERE fp = ?", (row[0],))
            self._len -= 1
            self._taken = (row[0], row[3])
            request = self._loaded(row[0], row[1], row[2])
            if request is not None:
                return request
        return None

    def evict_worst(self, count: int) -> list[bytes]:
        with self.transaction():  # an evicted request stays seen: it is finished
            evicted = self._db.execute(
                "DELETE FROM frontier WHERE fp IN (SELECT fp FROM frontier"
                " ORDER BY back DESC, neg_score DESC, neg_tiebreak DESC, seq DESC LIMIT ?)"
                " RETURNING fp",
                (count,),
            ).fetchall()
            self._db.executemany("INSERT OR IGNORE INTO finished VALUES (?)", evicted)
        self._len -= len(evicted)
        return [fp for (fp,) in evicted]

    def key_of(self, fp: bytes) -> Key | None:
        row = self._db.execute(
            "SELECT neg_score, neg_tiebreak, seq FROM frontier WHERE fp = ?", (fp,)
        ).fetchone()
        return tuple(row) if row else None

    key_to_beat = MemoryFrontier.key_to_beat

    def request_of(self, fp: bytes) -> Request | None:
        row = self._db.execute(
            "SELECT request, counted FROM frontier WHERE fp = ?", (fp,)
        ).fetchone()
        return self._loaded(fp, *row) if row else None

    def replace(self, fp: bytes, request: Request) -> bool:
        """As ``MemoryFrontier.replace``."""
        blob = self._dump(request)
        return bool(
            self._db.execute("UPDATE frontier SET request = ? WHERE fp = ?", (blob, fp)).rowcount
        )

    def in_front(self, fp: bytes) -> bool:
        row = self._db.execute("SELECT back FROM frontier WHERE fp = ?", (fp,)).fetchone()
        return row is not None and not row[0]

    def rekey(self, fp: bytes, key: Key) -> None:
        """As ``MemoryFrontier.rekey``, in one statement: a remove and a put were two commits,
        and a kill between them lost the request from the file."""
        self._db.execute(
            "UPDATE frontier SET neg_score = ?, neg_tiebreak = ?, seq = ? WHERE fp = ?", (*key, fp)
        )

    def remove(self, fp: bytes) -> Request | None:
        row = self._db.execute(
            "DELETE FROM frontier WHERE fp = ? RETURNING request, counted, seq", (fp,)
        ).fetchone()
        if row is None:
            return None
        self._len -= 1
        self._taken = (fp, row[2])
        return self._loaded(fp, row[0], row[1])

    take = remove

    def entries(self) -> Iterator[tuple[bytes, Key, Request]]:
        rows = self._db.execute(
            "SELECT fp, neg_score, neg_tiebreak, seq, request, counted FROM frontier"
        ).fetchall()
        for fp, neg_score, neg_tiebreak, seq, blob, counted in rows:
            request = self._loaded(fp, blob, counted)
            if request is not None:
                yield fp, (neg_score, neg_tiebreak, seq), request

    def max_seq(self) -> int:
        # In flight too: one cut off by a crash goes back under its own (``recover_inflight``).
        return self._db.execute(
            "SELECT MAX((SELECT COALESCE(MAX(seq), 0) FROM frontier),"
            " (SELECT COALESCE(MAX(seq), 0) FROM inflight))"
        ).fetchone()[0]

    def __len__(self) -> int:
        return self._len

    def close(self) -> None:
        self._db.close()


class StrategyQueue:
    """A Scrapy priority queue whose order is ``score(request)``, highest first.

    Built by Scrapy's scheduler with the same arguments as ``scrapy.pqueues.ScrapyPriorityQueue``:
    ``key`` is empty for the memory queue and the JOBDIR queue directory for the disk queue,
    ``startprios`` is what ``close()`` returned when the crawl was paused.
    """

    name: ClassVar[str]
    params: ClassVar[dict[str, Param]] = {}
    # Whether processes sharing a Redis frontier (FOCUSED_FRONTIER) can run the strategy. Its
    # order must then be score() and tiebreak() alone; see runs_distributed().
    distributable: ClassVar[bool] = True
    # Whether the order reads the crawl's own link scores (anchor_relevance, context_relevance,
    # link_relevance). Scoring every link's anchor and context is a third of a page's scoring
    # CPU, so the scoring middleware skips it for strategies that do not; the stored
    # link_relevance is then None. One whose parameters decide it overrides
    # reads_link_scores_with().
    reads_link_scores: ClassVar[bool] = True
    # Whether the strategy reads a child's parent_fetched_url: the URL its page was fetched at,
    # as the frontier handed it out (parent_url names the page as stored, which after a
    # rel=canonical or a redirect followed by Chromium is another URL).
    reads_fetched_parent: ClassVar[bool] = False
    # Whether the strategy changes the keys of queued requests itself (rank_semantic re-classes
    # them), lowering some: a shared frontier then takes no key put as a bound of the key queued.
    rekeys: ClassVar[bool] = False
    # The shape of each key of the saved state, ``close()``'s (see ``schedulers.state_shapes``):
    # a strategy whose ``state()`` saves more adds its keys to these.
    state_shapes: ClassVar[dict[str, shapes.Shape]] = {"strategy": shapes.text, "seq": shapes.whole}

    @classmethod
    def from_crawler(
        cls,
        crawler: Crawler,
        downstream_queue_cls: Any = None,
        key: str = "",
        startprios: Any = (),
        *,
        start_queue_cls: Any = None,
    ) -> StrategyQueue:
        # The downstream queue classes are Scrapy's per-priority FIFO/LIFO queues; a frontier
        # ordered by float score replaces all of them.
        return cls(crawler, key, startprios if isinstance(startprios, dict) else {})

    def __init__(self, crawler: Crawler, key: str = "", state: dict[str, Any] | None = None):
        self.crawler = crawler
        self.stats = crawler.stats
        # Whether the strategy defines admit() and tiebreak(): if not, a push skips their calls.
        self._admits = type(self).admit is not StrategyQueue.admit
        self._tiebreaks = type(self).tiebreak is not StrategyQueue.tiebreak
        self._merges = type(self).merge_paths is not StrategyQueue.merge_paths
        self._merges_in_redis = False  # merge_paths done by the shared frontier: shared_merge
        spider = crawler.spider
        self.params: dict[str, Any] = self.crawl_params(spider)
        self._fingerprint = crawler.request_fingerprinter.fingerprint
        # The seeds' fingerprints, filled by the scheduler (focused.scheduler), for links_to_seed
        self.seeds: set[bytes] = set()
        self.frontier: MemoryFrontier | SqliteFrontier | RedisFrontier
        shared = getattr(spider, "shared", None)  # the crawl's Redis state, FOCUSED_FRONTIER
        if shared is not None:
            from schedulers.redis_frontier import RedisFrontier

            self._merges_in_redis = self._merges and self.shared_merge() is not None
            paths = self if self._merges_in_redis else None
            self.frontier = RedisFrontier(shared, keys_only_rise=not self.rekeys, paths=paths)
        elif key:
            self.frontier = SqliteFrontier(Path(key, FRONTIER_FILE), spider)
        else:
            self.frontier = MemoryFrontier()
        state = state or {}
        # After a crash there is no saved state; the table still knows the last sequence number.
        self._seq: int = max(state.get("seq", 0), self.frontier.max_seq())
        self.restore(state)
        if isinstance(self.frontier, SqliteFrontier):
            with self.frontier.transaction():
                recovered = self.frontier.recover_inflight()
                for fp, request, seq in recovered:
                    self.push(request)
                    # Back in its place among requests of its score (a level of bfs), not
                    # behind them all: a crawl resumed to its budget fetches what it would
                    # have fetched.
                    key = self.frontier.key_of(fp)
                    if seq is not None and key is not None:
                        self.frontier.rekey(fp, (key[0], key[1], seq))
            if recovered:
                self.stats.inc_value("focused/resume/recovered_inflight", len(recovered))

    @classmethod
    def crawl_params(cls, spider: Any) -> dict[str, Any]:
        """The parameters the crawl gave the strategy, and the defaults of those it did not."""
        defaults = {name: param.default for name, param in cls.params.items()}
        return defaults | dict(getattr(spider, "strategy_params", {}))

    @classmethod
    def runs_distributed(cls) -> bool:
        """Whether the order is the frontier's alone: a strategy that overrides the queue
        methods or saves state of its own keeps part of its order in one process's memory."""
        own = ("push", "pop", "peek", "rediscover", "state", "restore", "close")
        return cls.distributable and all(
            getattr(cls, method) is getattr(StrategyQueue, method) for method in own
        )

    # -- what a strategy defines -------------------------------------------------------------

    def score(self, request: Request) -> float:
        raise NotImplementedError

    def tiebreak(self, request: Request) -> float:
        return 0.0

    @classmethod
    def check_settings(cls, settings: Any, scrapyd: bool = False) -> None:
        """Refuse settings this strategy cannot run with (raise ConfigError); default: none.
        ``scrapyd``: a Scrapyd job, told to give a setting as ``focused.errors.setting_options``
        words it."""

    def admit(self, request: Request) -> bool:
        """Whether the strategy queues this request at all (e.g. a depth limit)."""
        return True

    def links_left_out(self) -> tuple[str, str] | None:
        """The stat that counts the links the strategy leaves out by a parameter of its own (a
        depth limit, a beam's width), and that parameter; None for a strategy that leaves none
        out. A crawl that runs out of requests after it left some out says so at its close
        (``focused.scheduler``): its log would otherwise show a crawl of all it could reach."""
        return None

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        """Check the parameters against each other (``Param`` checks each one alone); raise
        ``focused.errors.ConfigError``. Called by ``focused.arguments`` before the crawl."""

    @classmethod
    def reads_link_scores_with(cls, params: dict[str, Any]) -> bool:
        """Whether the order reads the crawl's link scores with these parameters (default:
        ``reads_link_scores``): the scoring middleware asks it as the spider opens."""
        return cls.reads_link_scores

    @classmethod
    def child_meta(
        cls, parent_meta: dict[str, Any], scores: Scores, is_relevant: bool
    ) -> dict[str, Any]:
        """Strategy state a child inherits from the page it was found on (default: none)."""
        return {}

    @classmethod
    def check_state(cls, state: Any) -> None:
        """Raise ``ValueError`` (saying why) for a saved state that ``close()`` did not write:
        ``restore`` would fail on it, or the crawl later. A key left out is let be: ``restore``
        reads it as after a crash (no state at all is saved then)."""
        if not isinstance(state, dict):
            raise ValueError("it is not a JSON object")
        for name, fits in cls.state_shapes.items():
            if name in state and not fits(state[name]):
                raise ValueError(f"its {name} is not what the {cls.name} strategy saves")

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state beyond the entries themselves, saved on pause (add the
        shape of each key to ``state_shapes``)."""
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        """Take back what ``state()`` returned."""

    # -- the queue contract ------------------------------------------------------------------

    def key(self, request: Request) -> Key:
        self._seq += 1
        tiebreak = -self.tiebreak(request) if self._tiebreaks else NO_TIEBREAK
        return (-self.score(request), tiebreak, self._seq)

    def push(self, request: Request) -> None:
        if not self._admits or self.admit(request):
            self.frontier.put(self._fingerprint(request), self.key(request), request)

    def pop(self) -> Request | None:
        return self.frontier.pop()

    def peek(self) -> Request | None:
        return self.frontier.peek()

    def ranked(self, start: int = 0) -> Iterator[tuple[bytes, str]]:
        """The queued requests' fingerprints and hosts, in the order ``pop`` would hand them
        out, from the ``start``-th on, lazily and left queued; ``take`` hands out one of them
        instead of the first. Nothing for a strategy that decides as it pops (a local search,
        a beam, the bees): its pops are taken as they come."""
        if type(self).pop is StrategyQueue.pop:
            yield from self.frontier.ranked(start)

    def take(self, fp: bytes) -> Request | None:
        """Hand out the queued request ``ranked`` listed under ``fp`` (None if it is gone)."""
        return self.frontier.take(fp)

    def rediscover(self, request: Request) -> bool:
        """Raise the queued score of ``request``'s URL if this discovery scores higher.

        The better request replaces the queued one, so its meta (parent, level, path cost)
        describes the better path. A request at the back (``at_back``) never replaces one queued
        in front: that would lower it (``RedisFrontier``'s put leaves it too). Returns whether
        anything changed.
        """
        fp = self._fingerprint(request)
        if self.links_to_seed(request, fp):
            return False
        # Scored first: a shared frontier may then know without a round trip that it cannot raise.
        better = (-self.score(request), -self.tiebreak(request))
        queued = self.frontier.key_to_beat(fp, better)
        if queued is None or not self.admit(request):
            return False
        if better >= queued[:2] or (at_back(request) and self.frontier.in_front(fp)):
            # Not raised. Found again as a trap family's (a query family that exploded since it
            # was queued), it is not moved: the back is behind every other request.
            return self._merged_into_queued(fp, request)
        # A shared frontier that merges paths merges them as the request is put.
        merges_here = self._merges and not self._merges_in_redis
        if merges_here and (old := self.frontier.request_of(fp)) is not None:
            self.merge_paths(request, old)
        self.frontier.put(fp, (*better, queued[2]), request)
        self.stats.inc_value("focused/rescored")
        return True

    def _merged_into_queued(self, fp: bytes, request: Request) -> bool:
        """Fold what ``request``'s path adds (``merge_paths``) into the request queued under
        ``fp``, which keeps its key; whether it changed."""
        if not self._merges:
            return False
        if self._merges_in_redis:
            # Merged in Redis as the page's links are put, with whatever another process put
            # meanwhile (``focused/merged`` counted there).
            self.frontier.merge_path(fp, request)
            return False
        if (queued := self.frontier.request_of(fp)) is None:
            return False
        if not self.merge_paths(queued, request) or not self.frontier.replace(fp, queued):
            return False
        self.stats.inc_value("focused/merged")
        return True

    def merge_paths(self, kept: Request, other: Request) -> bool:
        """Fold into ``kept``'s meta what the path of ``other``, another discovery of its URL,
        adds to it (a strategy whose meta carries state down a path: shark's remaining depth);
        ``kept`` is the discovery with the better score, queued with its key. Returns whether
        ``kept`` changed. Default: nothing, and rediscovery reads no queued request."""
        return False

    def shared_merge(self) -> str | None:
        """``merge_paths`` for the shared frontier (``FOCUSED_FRONTIER``): Lua source of a
        function ``merge(kept, other)`` of two paths as ``shared_path`` writes them, returning
        the merged one. The frontier keeps each queued URL's path in Redis and merges there
        every discovery of it, by any process, in the step that puts it, so that none is lost
        to another process's put. None (the default): paths are not merged in Redis."""
        return None

    def shared_path(self, request: Request) -> str:
        """What ``merge_paths`` merges of ``request``'s meta, as text ("" for nothing: a seed);
        for a strategy that gives ``shared_merge``."""
        raise NotImplementedError

    def take_shared_path(self, request: Request, path: str) -> None:
        """Put ``path``, a merge of ``shared_path`` texts, back into ``request``'s meta."""
        raise NotImplementedError

    def links_to_seed(self, request: Request, fp: bytes) -> bool:
        """Whether ``request`` is a link found to a seed. A seed is level 0 whatever links to
        it: a link that outranked a queued seed (hillclimbing's climbing move) replaced it, and
        the seed was fetched and stored as that page's child, a level deeper."""
        return "parent_url" in request.meta and fp in self.seeds

    def evict(self, count: int) -> int:
        """Drop the ``count`` lowest-ranked requests (the frontier is full); returns how many.
        A strategy that keeps requests outside ``self.frontier`` overrides this."""
        evicted = self.frontier.evict_worst(count)
        self.evicted(evicted)
        return len(evicted)

    def evicted(self, fps: list[bytes]) -> None:
        """The queued requests with these fingerprints were evicted: a strategy that keeps its
        own record of what is queued forgets them here (default: nothing to do)."""

    def refetched(self, request: Request) -> None:
        """The scheduler hands out again, outside ``pop``, a request a crash left in flight with
        its response counted (``FocusedScheduler.refetches``): a strategy that marks its pops in
        their meta, for the pages they find, forgets the mark of a pop made before the crash
        here (default: nothing to do)."""

    def take_dropped(self) -> list[bytes]:
        """Fingerprints of the requests the strategy itself dropped since the last call (beam
        keeps only the k best of a generation). The scheduler forgets them in the dupefilter,
        so that a URL found again later is a candidate again (default: none)."""
        return []

    def close(self) -> dict[str, Any]:
        self.frontier.close()
        return {"strategy": self.name, "seq": self._seq, **self.state()}

    def __len__(self) -> int:
        return len(self.frontier)
