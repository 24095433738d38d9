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
import pickle
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.utils.request import request_from_dict

from focused.traps import TRAP_META

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

    from focused.arguments import Param
    from focused.relevance import Scores
    from schedulers.redis_frontier import RedisFrontier

# (-score, -tiebreak, seq): the smallest key pops first.
Key = tuple[float, float, int]
# How a frontier orders its entries: (back, *key). Requests of a trap family (marked by the
# scheduler, see focused.traps) are at the back, behind every other request, whatever their
# key: the penalty is the frontier's, so every strategy's keys stay its own.
Order = tuple[int, float, float, int]
# A memory frontier's item: (back, *key, fp).
Item = tuple[int, float, float, int, bytes]


def at_back(request: Request) -> int:
    return 1 if request.meta.get(TRAP_META) else 0


def negated(order: Sequence[float]) -> tuple:
    return tuple(-value for value in order)


def dump_request(request: Request, spider: Spider) -> bytes:
    """A request as bytes, for a frontier kept outside the process (may raise ValueError)."""
    return pickle.dumps(request.to_dict(spider=spider), protocol=pickle.HIGHEST_PROTOCOL)


def load_request(blob: bytes, spider: Spider) -> Request:
    return request_from_dict(pickle.loads(blob), spider=spider)


class MemoryFrontier:
    """Entries by fingerprint, and their items ``(back, *key, fp)`` in three places that
    together order them (``back`` first: trap requests come after every other one):

    - ``_pending``, items pushed since the last pop, unsorted (a push is a list append);
    - ``_run``, items sorted worst first, so the best is popped from its end;
    - ``_heap``, a best-first heap.

    A pop first moves the pending items in: onto the heap when they are few, or, when they
    outnumber the rest (a crawl's start, a resumed or benchmarked queue), by sorting everything
    into a new run, which is much cheaper in C than a heap operation per item. An item that a
    pop, a rescoring or an eviction made stale is skipped when it comes up: an entry holds the
    very tuple that was queued, so an item is current exactly when it *is* its entry's item.
    The worst-first heap of ``evict_worst`` is built on the first eviction: crawls that never
    reach ``FRONTIER_MAX`` never pay for it.
    """

    def __init__(self) -> None:
        self._pending: list[Item] = []
        self._run: list[Item] = []
        self._heap: list[Item] = []
        self._worst: list[Item] | None = None  # negated orders
        self._entries: dict[bytes, tuple[Item, Request]] = {}

    def put(self, fp: bytes, key: Key, request: Request) -> None:
        item = (at_back(request), *key, fp)
        self._entries[fp] = (item, request)
        self._pending.append(item)
        worst = self._worst
        if worst is None:
            return
        heapq.heappush(worst, (*negated(item[:4]), fp))
        if len(worst) > 2 * len(self._entries) + 1024:
            # Popped and rescored entries leave stale items behind: rebuild, O(n) once per
            # n puts, so that the worst-first heap stays proportional to the frontier.
            self._build_worst()

    def _build_worst(self) -> None:
        self._worst = [(*negated(item[:4]), fp) for fp, (item, _) in self._entries.items()]
        heapq.heapify(self._worst)

    def evict_worst(self, count: int) -> list[bytes]:
        """Remove up to ``count`` entries with the largest orders; returns their fingerprints."""
        if self._worst is None:
            self._build_worst()
        worst, entries = self._worst, self._entries
        evicted: list[bytes] = []
        while worst and len(evicted) < count:
            *order, fp = heapq.heappop(worst)
            entry = entries.get(fp)
            if entry is not None and entry[0][:4] == negated(order):
                del entries[fp]  # its item in the best-first structures is now stale
                evicted.append(fp)
        return evicted

    def _take_pending(self) -> None:
        pending, heap = self._pending, self._heap
        self._pending = []
        if len(pending) > len(heap) + len(self._run):
            pending += heap
            pending += self._run
            pending.sort(reverse=True)
            self._run, self._heap = pending, []
        else:
            for item in pending:
                heapq.heappush(heap, item)

    def _best(self, remove: bool) -> tuple[Item, Request] | None:
        """The current entry with the smallest item, stale items dropped on the way."""
        if self._pending:
            self._take_pending()
        heap, run, entries = self._heap, self._run, self._entries
        while heap or run:
            from_heap = bool(heap) and (not run or heap[0] < run[-1])
            item = heap[0] if from_heap else run[-1]
            entry = entries.get(item[4])
            current = entry is not None and entry[0] is item
            if current and not remove:
                return entry
            if from_heap:
                heapq.heappop(heap)
            else:
                run.pop()
            if current:
                del entries[item[4]]
                return entry
        return None

    def peek(self) -> Request | None:
        entry = self._best(remove=False)
        return entry[1] if entry else None

    def pop(self) -> Request | None:
        entry = self._best(remove=True)
        return entry[1] if entry else None

    def key_of(self, fp: bytes) -> Key | None:
        entry = self._entries.get(fp)
        return entry[0][1:4] if entry else None

    def remove(self, fp: bytes) -> Request | None:
        entry = self._entries.pop(fp, None)
        return entry[1] if entry else None

    def entries(self) -> Iterator[tuple[bytes, Key, Request]]:
        for fp, (item, request) in self._entries.items():
            yield fp, item[1:4], request

    def max_seq(self) -> int:
        return max((item[3] for item, _ in self._entries.values()), default=0)

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        self._pending, self._run, self._heap, self._worst = [], [], [], None
        self._entries.clear()


def connect_crash_safe(path: Path | str) -> sqlite3.Connection:
    """An SQLite file where every statement outside ``BEGIN`` is its own transaction, and a
    commit survives ``kill -9`` (WAL, ``synchronous=NORMAL``: written to the OS, no fsync)."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
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
    them back to be queued again.
    """

    def __init__(self, path: Path, spider: Spider) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._spider = spider
        self._db = connect_crash_safe(path)
        self._db.executescript(
            "CREATE TABLE IF NOT EXISTS frontier (fp BLOB PRIMARY KEY, neg_score REAL,"
            " neg_tiebreak REAL, seq INTEGER, request BLOB, back INTEGER NOT NULL DEFAULT 0);"
            "CREATE TABLE IF NOT EXISTS inflight (fp BLOB PRIMARY KEY, request BLOB);"
            "CREATE TABLE IF NOT EXISTS finished (fp BLOB PRIMARY KEY);"
        )
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(frontier)")}
        if "back" not in columns:  # a file written before trap requests went to the back
            self._db.execute("ALTER TABLE frontier ADD COLUMN back INTEGER NOT NULL DEFAULT 0")
        self._db.executescript(
            "DROP INDEX IF EXISTS frontier_order;"
            "CREATE INDEX IF NOT EXISTS frontier_rank"
            " ON frontier (back, neg_score, neg_tiebreak, seq);"
        )
        self._len = self._db.execute("SELECT COUNT(*) FROM frontier").fetchone()[0]

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around several changes (e.g. popping requests and recording them as
        in flight), so that a crash leaves each request queued or in flight, never neither.
        Nested uses join the outer transaction."""
        if self._db.in_transaction:
            yield
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def start_inflight(self, fp: bytes, request: Request) -> None:
        self._db.execute("INSERT OR REPLACE INTO inflight VALUES (?, ?)", (fp, self._dump(request)))

    def finish(self, fp: bytes) -> None:
        with self.transaction():
            self._db.execute("DELETE FROM inflight WHERE fp = ?", (fp,))
            self._db.execute("INSERT OR IGNORE INTO finished VALUES (?)", (fp,))

    def recover_inflight(self) -> list[tuple[bytes, Request]]:
        """The requests a crash left in flight, removed from ``inflight``: queue them again."""
        rows = self._db.execute("DELETE FROM inflight RETURNING fp, request").fetchall()
        return [(fp, self._load(blob)) for fp, blob in rows]

    def fingerprints(self) -> Iterator[bytes]:
        """Every fingerprint queued, in flight or finished: what the dupefilter has seen."""
        for table in ("frontier", "inflight", "finished"):
            for (fp,) in self._db.execute(f"SELECT fp FROM {table}"):
                yield fp

    def _dump(self, request: Request) -> bytes:
        return dump_request(request, self._spider)

    def _load(self, blob: bytes) -> Request:
        return load_request(blob, self._spider)

    def put(self, fp: bytes, key: Key, request: Request) -> None:
        blob = self._dump(request)  # may raise ValueError: Scrapy then keeps it in memory
        back = at_back(request)
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO frontier VALUES (?, ?, ?, ?, ?, ?)", (fp, *key, blob, back)
        )
        if cursor.rowcount:
            self._len += 1
        else:
            self._db.execute(
                "UPDATE frontier SET neg_score = ?, neg_tiebreak = ?, seq = ?, request = ?,"
                " back = ? WHERE fp = ?",
                (*key, blob, back, fp),
            )

    def _first(self) -> tuple[bytes, bytes] | None:
        return self._db.execute(
            "SELECT fp, request FROM frontier ORDER BY back, neg_score, neg_tiebreak, seq LIMIT 1"
        ).fetchone()

    def peek(self) -> Request | None:
        row = self._first()
        return self._load(row[1]) if row else None

    def pop(self) -> Request | None:
        row = self._first()
        if row is None:
            return None
        self._db.execute("DELETE FROM frontier WHERE fp = ?", (row[0],))
        self._len -= 1
        return self._load(row[1])

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

    def remove(self, fp: bytes) -> Request | None:
        row = self._db.execute("DELETE FROM frontier WHERE fp = ? RETURNING request", (fp,))
        row = row.fetchone()
        if row is None:
            return None
        self._len -= 1
        return self._load(row[0])

    def entries(self) -> Iterator[tuple[bytes, Key, Request]]:
        rows = self._db.execute(
            "SELECT fp, neg_score, neg_tiebreak, seq, request FROM frontier"
        ).fetchall()
        for fp, neg_score, neg_tiebreak, seq, blob in rows:
            yield fp, (neg_score, neg_tiebreak, seq), self._load(blob)

    def max_seq(self) -> int:
        return self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM frontier").fetchone()[0]

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
        spider = crawler.spider
        self.params: dict[str, Any] = {
            name: param.default for name, param in type(self).params.items()
        } | dict(getattr(spider, "strategy_params", {}))
        self._fingerprint = crawler.request_fingerprinter.fingerprint
        self.frontier: MemoryFrontier | SqliteFrontier | RedisFrontier
        shared = getattr(spider, "shared", None)  # the crawl's Redis state, FOCUSED_FRONTIER
        if shared is not None:
            from schedulers.redis_frontier import RedisFrontier

            self.frontier = RedisFrontier(shared)
        elif key:
            self.frontier = SqliteFrontier(Path(key, "frontier.sqlite3"), spider)
        else:
            self.frontier = MemoryFrontier()
        state = state or {}
        # After a crash there is no saved state; the table still knows the last sequence number.
        self._seq: int = max(state.get("seq", 0), self.frontier.max_seq())
        self.restore(state)
        if isinstance(self.frontier, SqliteFrontier):
            with self.frontier.transaction():
                recovered = self.frontier.recover_inflight()
                for _, request in recovered:
                    self.push(request)
            if recovered:
                self.stats.inc_value("focused/resume/recovered_inflight", len(recovered))

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
    def check_settings(cls, settings: Any) -> None:
        """Refuse settings this strategy cannot run with (raise ConfigError); default: none."""

    def admit(self, request: Request) -> bool:
        """Whether the strategy queues this request at all (e.g. a depth limit)."""
        return True

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        """Check the parameters against each other (``Param`` checks each one alone); raise
        ``focused.errors.ConfigError``. Called by ``focused.arguments`` before the crawl."""

    @classmethod
    def child_meta(
        cls, parent_meta: dict[str, Any], scores: Scores, is_relevant: bool
    ) -> dict[str, Any]:
        """Strategy state a child inherits from the page it was found on (default: none)."""
        return {}

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state beyond the entries themselves, saved on pause."""
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        """Take back what ``state()`` returned."""

    # -- the queue contract ------------------------------------------------------------------

    def key(self, request: Request) -> Key:
        self._seq += 1
        return (-self.score(request), -self.tiebreak(request), self._seq)

    def push(self, request: Request) -> None:
        if self.admit(request):
            self.frontier.put(self._fingerprint(request), self.key(request), request)

    def pop(self) -> Request | None:
        return self.frontier.pop()

    def peek(self) -> Request | None:
        return self.frontier.peek()

    def rediscover(self, request: Request) -> bool:
        """Raise the queued score of ``request``'s URL if this discovery scores higher.

        The better request replaces the queued one, so its meta (parent, level, path cost)
        describes the better path. Returns whether anything changed.
        """
        fp = self._fingerprint(request)
        queued = self.frontier.key_of(fp)
        if queued is None or not self.admit(request):
            return False
        better = (-self.score(request), -self.tiebreak(request))
        if better >= queued[:2]:
            return False
        self.frontier.put(fp, (*better, queued[2]), request)
        self.stats.inc_value("focused/rescored")
        return True

    def evict(self, count: int) -> int:
        """Drop the ``count`` lowest-ranked requests (the frontier is full); returns how many.
        A strategy that keeps requests outside ``self.frontier`` overrides this."""
        evicted = self.frontier.evict_worst(count)
        self.evicted(evicted)
        return len(evicted)

    def evicted(self, fps: list[bytes]) -> None:
        """The queued requests with these fingerprints were evicted: a strategy that keeps its
        own record of what is queued forgets them here (default: nothing to do)."""

    def close(self) -> dict[str, Any]:
        self.frontier.close()
        return {"strategy": self.name, "seq": self._seq, **self.state()}

    def __len__(self) -> int:
        return len(self.frontier)
