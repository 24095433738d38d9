"""Scrapy's scheduler, plus rediscovery: a URL seen again may raise its queued score.

The dupefilter marks a URL as seen when it is first queued, so Scrapy drops every later
discovery of it. A focused crawl must not lose that evidence: the same URL found from a more
relevant parent deserves a higher place in the frontier. Requests the dupefilter rejects are
offered to the strategy queue's ``rediscover``, which raises the score if the URL is still
queued and the new discovery scores higher.

It also keeps the ``focused/frontier`` stat (the number of queued requests) current for the
progress log.

Frontier-wide limits live here, so that every strategy gets them:

- ``FRONTIER_MAX`` (default 1,000,000; 0 = unbounded): when a push makes the frontier larger,
  the lowest-ranked requests are evicted (the sources' MAX_BUFFER). Stat ``focused/evicted``;
  a log line every 1,000 evictions, and a warning if the frontier then runs empty (evicted
  links stay seen, so a small bound can end a crawl before its page budget). A frontier resumed
  over a bound lowered since is cut to it as the scheduler opens, with a log line.
- ``MAX_PAGES_PER_HOST`` (default 0 = off): a request takes one of its host's slots when it
  comes up, check and count in one step; once the host's slots are taken, its requests are
  dropped when they come up (``focused/skipped/host_limit``; a crawl that then runs dry says so in
  an INFO line at its close). A request parked by
  ``HOST_WINDOW`` holds its slot, so parked requests never pass the cap; one still parked on
  close gives its slot back and goes back to the queue, and takes a slot again when it comes
  up after a resume. Counts survive a JOBDIR pause (``spider.state``). In a crawl shared
  through Redis the count is the crawl's, in the hash ``host_pages`` (``SharedCrawl.take``,
  ``SharedCrawl.give_back``), so the processes together fetch at most the cap per host; a
  parked request goes back to the crawl's frontier when its process closes, and the requests
  a killed process had under way when the others take it for dead, each with its host's slot
  given back (``RedisFrontier.requeue``).
- ``HOST_WINDOW`` k (default 0 = off): at most one request per host among any k consecutive
  dequeued requests (the sources' window rule, k = 100). A request whose host is in the window
  is parked, not lost, and handed out as soon as its host leaves the window; parked requests
  count in ``len()`` and go back to the queue on close. Up to ``HOST_WINDOW_SCAN`` (1,000)
  requests are looked at per dequeue; when none of them is allowed, the parked request whose
  host was fetched longest ago goes anyway (``focused/host_window/relaxed``), because the
  window counts fetches and would otherwise never move. The window is each process's own,
  also in a shared crawl.
- ``HELD_HOST_LOOKAHEAD`` k (default 1,000; 0 = off): Scrapy counts a request waiting in its
  download slot against ``CONCURRENT_REQUESTS``, so the best-ranked requests of a host held by
  its delay (``DOWNLOAD_DELAY``, a robots.txt Crawl-delay, AutoThrottle), a 429/503 pause or a
  full slot (a slow host) would fill the downloader and pace the whole crawl (Scrapy's
  ``DownloaderAwarePriorityQueue``, which the strategy queues replace, hands out by slot for
  this reason). While such a host has a request waiting and the frontier's next request is of
  it, the first of the next k whose host is not held goes instead: the strategy queue lists
  hosts in its order without popping (``ranked``) and hands out the one chosen (``take``), so
  nothing is parked and the rest keep their order (``focused/held_host/passed_over``); a host
  in the ``HOST_WINDOW`` is passed over too (the window would only park its request). When all
  k are held, the first goes while its slot has fewer requests handed out than its concurrency
  (so a crawl of one delayed host hands out the frontier's first, with its concurrency), or
  while a merely full slot has fewer than twice its concurrency (a request waits to be sent as
  soon as each transfer ends), and nothing goes past that. A host with a request waiting for
  its robots.txt is held the same way (focused.robots ``waits_for_robots``), and nothing more of
  it goes until the robots.txt is read, when focused.robots wakes the engine. A strategy that
  decides as it pops lists nothing and is taken as it comes.
- A request of a host whose robots.txt failed for now (a 5xx, 429 or network error) comes back
  from focused.robots to be held (``ROBOTS_HOLD_RETRIES``): kept here, popped and in flight as
  a parked request, counted in ``len()`` (the crawl does not end while it waits), and handed
  out before the frontier once the robots.txt may be fetched again (the engine woken then,
  not at its 5-second heartbeat: ``_wake_at``), one first and the others once it is read,
  each while its host is not held as above, and parked while it is in the ``HOST_WINDOW``
  (``_release_held``). A stop does not wait for it; on close it goes back to
  the queue as a parked request does.

- Trap defence (``focused.traps``, default on): a request whose URL shows a trap pattern, or
  whose family is a query-parameter explosion, is marked with its family and queued behind
  every other request (the frontiers order by ``(back, key)``, so each strategy's keys stay its
  own); once ``TRAP_MAX_PER_FAMILY`` (10; 0 = off) requests of one trap family were queued,
  the rest are dropped. Stats ``focused/trap/penalised``, ``focused/trap/dropped``; a log line
  per family dropped; under JOBDIR the counts survive a pause and ``kill -9``, and in a crawl
  shared through Redis they are the crawl's (``focused.traps.trap_counts``). Seeds are never
  taken for traps.

A crawl that runs out of requests says at its close what left links out: the limits above, the
strategy's parameter (``StrategyQueue.links_left_out``) and ``MAX_LINKS_PER_PAGE``, past which
the spider does not look at a page's links (``focused/skipped/link_limit``).

The host limits act on what the scheduler hands to the downloader; Scrapy's per-domain concurrency
(``CONCURRENT_REQUESTS_PER_DOMAIN``, ``DOWNLOAD_DELAY``) and AutoThrottle then pace the
fetches of each host as usual.

Under JOBDIR the scheduler keeps the requests in flight in the frontier file until their
outcome is safe, and fills the dupefilter from that file (``focused.resume``), so that a
crawl killed with ``kill -9`` resumes without losing or refetching pages.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import time
from collections import Counter, deque
from contextlib import closing, suppress
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.core.scheduler import Scheduler
from scrapy.utils.asyncio import call_later
from scrapy.utils.httpobj import urlparse_cached

from focused.engine import wake_engine
from focused.errors import counted
from focused.extensions import (
    HOLDING_FETCHING,
    HOLDING_HOSTS,
    HOLDING_REQUESTS,
    HOLDING_UNTIL,
    frontier_count_wanted,
)
from focused.extract import LINK_LIMIT
from focused.jobdir import JobdirUnwritable, failure_reason, jobdir_writes, write_whole
from focused.resume import (
    INFLIGHT,
    LEFT_OUT_PAST_KEPT_STATE,
    LEFT_OUT_STATE,
    connect_request_done,
    counted_refetched,
    crawl_counter,
    host_pages_changed,
    links_yielded,
    request_finished,
    response_counted,
    written_host_pages,
)
from focused.robots import HOLD_FOR_ROBOTS, LINKED_URL, RobotsTxtMiddleware
from focused.traps import TrapFamilies, trap_counts
from schedulers.base import RESPONSE_COUNTED, SqliteFrontier, host_of
from schedulers.redis_frontier import INFLIGHT_META

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.utils.asyncio import CallLaterResult

    from schedulers.base import StrategyQueue

logger = logging.getLogger(__name__)

EVICTION_LOG_EVERY = 1000
AHEAD_CHUNK = 64  # the least number of queued requests read at a time past held hosts
POPS_PER_LOOK = 64  # pops after which a look past held hosts cut short by the lookahead is redone
FRONTIER_STAT_EVERY = 1.0  # seconds between two counts of the frontier for the progress log
# The most links left out by the strategy's parameter kept, to tell at the close which were never
# queued: a deep dfs cut refuses a link to every page past it, and each kept costs a URL and a
# fingerprint in memory, and in spider.state. Past it the close line says "at least".
LEFT_OUT_KEPT = 10_000
# The spider's count of the links of pages past MAX_LINKS_PER_PAGE (focused.extract).
LINK_LIMIT_STAT = f"focused/skipped/{LINK_LIMIT}"


class FocusedScheduler(Scheduler):
    # focused.robots hands back a request of a host whose robots.txt failed for now, to be kept
    # here until it is fetched again (_hold_for_robots)
    holds_for_robots = True

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FocusedScheduler:
        scheduler = super().from_crawler(crawler)
        settings = crawler.settings
        scheduler.frontier_max = settings.getint("FRONTIER_MAX")
        scheduler.max_per_host = settings.getint("MAX_PAGES_PER_HOST")
        scheduler.max_links = settings.getint("MAX_LINKS_PER_PAGE")  # for its close line alone
        # Per host, the requests a crash left in flight, each with the slot it took (set on open)
        scheduler.cut_off_slots = Counter()
        if scheduler.max_per_host:
            crawler.signals.connect(scheduler._recover_host_slots, signal=signals.spider_opened)
        scheduler.window = max(0, settings.getint("HOST_WINDOW") - 1)  # earlier fetches checked
        scheduler.window_scan = settings.getint("HOST_WINDOW_SCAN", 1000)
        scheduler.recent_hosts = deque()
        scheduler.in_window = Counter()
        scheduler.parked = []
        scheduler.lookahead = settings.getint("HELD_HOST_LOOKAHEAD")
        # This next_request's look past held hosts; the hosts of the last look that found none
        # other, and the pops it stays good for (see _first_not_held)
        scheduler.ahead: list[tuple[bytes, str]] = []
        scheduler.blocked_ahead = None
        scheduler.pops_until_look = 0
        scheduler.robots = None  # focused.robots' middleware, found on first use (False: none)
        # Requests held for their host's failed robots.txt, by netloc (robots.txt is per
        # netloc), and when the first failure's time is up (_release_held)
        scheduler.robots_held: dict[str, deque[Request]] = {}
        scheduler.robots_look_at = 0.0
        # The engine's wake-up for then (_wake_at), and its time.monotonic()
        scheduler.robots_wake: CallLaterResult | None = None
        scheduler.robots_wake_at = math.inf
        scheduler.trap_max = settings.getint("TRAP_MAX_PER_FAMILY")
        scheduler.trap_variants = settings.getint("TRAP_QUERY_VARIANTS")
        scheduler.traps = None  # TrapFamilies, built on open (its counts are the spider's)
        scheduler.shared = None  # SharedCrawl of a crawl shared through Redis, set on open
        scheduler.closed = False
        scheduler.jobdir = None  # the crawl's JobdirWrites under JOBDIR (focused.jobdir)
        scheduler.page_budget = settings.getint("CLOSESPIDER_PAGECOUNT")
        scheduler._frontier_counted_at = -math.inf
        scheduler.outstanding_max = (
            settings.getint("CONCURRENT_REQUESTS")
            if settings.getbool("SCORE_BEFORE_DISPATCH")
            else 0
        )
        # Pages whose links are on their way to the frontier: their request -> links not queued yet
        scheduler.links_to_queue: dict[Request, set[Request]] = {}
        # Pages still in the scraper whose links have all reached the frontier
        scheduler.scored_pages: set[Request] = set()
        # Fingerprints of the seeds and of where they redirect, shared with the strategy queues
        # (StrategyQueue.seeds): a link found to a seed must not replace it
        scheduler.seeds: set[bytes] = set()
        # Fingerprints of the links the strategy left out by its parameter (links_left_out):
        # those still unseen at a close that ran dry are the links it says were left out
        scheduler.left_out: set[bytes] = set()
        # The URLs of those the strategy's admit refused: most are found again and again (the
        # deepest pages' links back home), and a fingerprint costs as much as a whole enqueue
        scheduler.left_out_urls: set[str] = set()
        scheduler.left_out_past_kept = False  # some were not kept (LEFT_OUT_KEPT)
        # Requests a crash left in flight with their response counted (fingerprint, request)
        scheduler.refetches: deque[tuple[bytes, Request]] = deque()
        if scheduler.outstanding_max:
            crawler.signals.connect(scheduler._links_yielded, signal=links_yielded)
            crawler.signals.connect(scheduler._link_reached, signal=signals.request_scheduled)
        connect_request_done(crawler, scheduler._finished)
        crawler.signals.connect(scheduler._response_counted, signal=response_counted)
        crawler.signals.connect(scheduler._count_wanted, signal=frontier_count_wanted)
        return scheduler

    def open(self, spider):
        self.shared = getattr(spider, "shared", None)
        self.jobdir = jobdir_writes(self.crawler)
        try:
            if self.trap_max:
                counts = trap_counts(spider)
                self.traps = TrapFamilies(self.trap_max, self.trap_variants, counts, self.stats)
            opened = super().open(spider)
            if self.shared is not None:
                # They hold slots of the crawl's page budget (RedisFrontier.take)
                self.shared.frontier.keeps_popped = lambda: bool(self.robots_held or self.parked)
            for queue in (self.mqs, self.dqs):
                if queue is not None:
                    queue.seeds = self.seeds
            frontier = self._durable_frontier()
            if frontier is not None:
                if hasattr(self.df, "remember"):
                    self.df.remember(frontier.fingerprints())
                self.refetches.extend(frontier.counted_inflight())
                if self.refetches:
                    self.stats.set_value("focused/resume/counted_refetched", len(self.refetches))
                self.cut_off_slots = frontier.recovered_hosts + Counter(
                    self._host(request) for _, request in self.refetches
                )
            self._trim_to_frontier_max()
        except JobdirUnwritable:
            return None  # the crawl stops at once, and hands out nothing (focused.jobdir)
        return opened

    def _trim_to_frontier_max(self) -> None:
        """A frontier resumed (a JOBDIR's, a shared crawl's) over a FRONTIER_MAX lowered since
        is cut to it at once, not only as the next link is queued."""
        over = len(self) - self.frontier_max if self.frontier_max else 0
        # Another process of a shared crawl may have cut it since its length was read.
        if over > 0 and (evicted := self._evict(over)):
            logger.info(
                "Frontier over FRONTIER_MAX=%d at the resume: %s evicted",
                self.frontier_max,
                counted(evicted, "lowest-ranked request"),
            )
            self._count_frontier(now=True)

    def _jobdir_failed(self) -> bool:
        """Whether a JOBDIR write failed: the crawl is stopping, and nothing more goes to the
        frontier file or comes from it (``focused.jobdir``)."""
        return self.jobdir is not None and self.jobdir.failure is not None

    def has_pending_requests(self) -> bool:
        return not self._jobdir_failed() and super().has_pending_requests()

    def _write_dqs_state(self, dqdir: str, state) -> None:
        """Scrapy's, written whole or not at all (a temporary file, renamed): Scrapy wrote it in
        place, and a full disk left it empty, a JOBDIR that could not be resumed."""
        path = Path(dqdir, "active.json")
        self.jobdir.save_at_pause(
            "the frontier's state",
            path,
            lambda: write_whole(
                path,
                path.with_name("active.json.tmp"),
                lambda file: file.write(json.dumps(state).encode()),
            ),
        )

    def _durable_frontier(self) -> SqliteFrontier | None:
        frontier = getattr(self.dqs, "frontier", None)
        return frontier if isinstance(frontier, SqliteFrontier) else None

    def _dqpop(self) -> Request | None:
        return self._in_flight(super()._dqpop)

    def _in_flight(self, pop: Callable[[], Request | None]) -> Request | None:
        """``pop()`` from the disk queue; under JOBDIR the request moves to the frontier file's
        in-flight table in the same transaction."""
        frontier = self._durable_frontier()
        if frontier is None:
            return pop()
        with frontier.transaction():
            request = pop()
            if request is not None:
                fp = self.crawler.request_fingerprinter.fingerprint(request)
                frontier.start_inflight(fp, request)
                request.meta[INFLIGHT] = fp
        return request

    def _finished(self, request: Request | None) -> None:
        """The outcome of a request handed out is safe: it is no longer in flight."""
        # A failure stops the crawl; the request stays in flight in the file (focused.jobdir).
        with suppress(JobdirUnwritable):
            self._finish(request.meta.pop(INFLIGHT, None) if request is not None else None)
        if self.shared is not None:
            # The other processes queue links of any host without this scheduler seeing it:
            # a look past held hosts holds for one page, as when every link queued redid it.
            self.blocked_ahead = None

    def _response_counted(self, request: Request) -> None:
        """Mark a request in flight whose response the page budget counted: fetched again after
        a crash, it is not counted twice (``focused.stopping.PageBudget``)."""
        frontier = self._durable_frontier()
        fp = request.meta.get(INFLIGHT)
        if frontier is not None and fp is not None:
            with suppress(JobdirUnwritable):  # the crawl stops (focused.jobdir)
                frontier.mark_counted(fp)

    def _replaced_done(self, fp: bytes | None, member: bytes | None) -> None:
        """The request a redirect or retry replaces is done, its successor queued: under JOBDIR
        it leaves the frontier file's in-flight table; in a shared crawl it leaves flight once
        the successor is in Redis. Acked as the successor was scheduled, before it was queued,
        a kill between lost the URL for good."""
        self._finish(fp)
        if member is not None and self.shared is not None:
            self.shared.frontier.ack_replaced(member)

    def _finish(self, fp: bytes | None) -> None:
        frontier = self._durable_frontier()
        if fp is not None and frontier is not None:
            frontier.finish(fp)

    def enqueue_request(self, request: Request) -> bool:
        if self.closed or self._jobdir_failed():
            # The engine can still hand over a start request once the spider closes at open (a
            # resumed crawl whose page budget is spent), and the frontier file is closed by then.
            # Dropped: the seeds are yielded again by the next run. After a JOBDIR write failed
            # the file is left as it is: the page whose link this is is not stored either.
            return False
        if request.meta.pop(HOLD_FOR_ROBOTS, False):
            self._hold_for_robots(request)
            return True
        try:
            return self._enqueue(request)
        except JobdirUnwritable:
            return False  # the crawl stops (focused.jobdir)

    def _enqueue(self, request: Request) -> bool:
        # A redirect or retry of a request in flight carries its mark (in a shared crawl, its
        # member in Redis): once the new request is queued (or filtered), the old one is done.
        replaced = request.meta.pop(INFLIGHT, None), request.meta.pop(INFLIGHT_META, None)
        if (
            LINKED_URL in request.meta
            and (robots := self._robots())
            and robots.refuses_as_linked(request)
        ):
            # Refused before the dupefilter sees it: the URL may be linked again in a spelling
            # robots.txt allows (without the session id that made this one disallowed).
            self.stats.inc_value("focused/skipped/robots_txt")
            self._replaced_done(*replaced)
            return False
        if not self.mqs.admit(request):
            # Refused before the dupefilter sees it (a depth limit, shark's chain cut): marked
            # seen, the URL would be dropped as a duplicate when found again on a path the
            # strategy admits (a shallower level, a chain through relevant pages).
            if request.url not in self.left_out_urls:
                if len(self.left_out) < LEFT_OUT_KEPT:
                    self.left_out_urls.add(request.url)
                    self._keep_left_out([self.crawler.request_fingerprinter.fingerprint(request)])
                else:
                    self._keep_left_out([], past_kept=True)
            self._replaced_done(*replaced)
            return False
        if self._is_trap_dropped(request):
            self._replaced_done(*replaced)
            return False
        queued = super().enqueue_request(request)
        if "parent_url" not in request.meta:  # a seed (or its redirect), queued or seen before
            self.seeds.add(self.crawler.request_fingerprinter.fingerprint(request))
        if queued:
            self._came_into_reach(request)
        if self.traps is not None:
            if queued:
                self.traps.count(request)
            else:
                self.traps.release(request)
        if not queued and not request.dont_filter:
            # Only the dupefilter makes Scheduler.enqueue_request return False.
            for queue in (self.dqs, self.mqs):
                if queue is not None and queue.rediscover(request):
                    self._came_into_reach(request)
                    break
        self._forget_dropped()
        if queued and self.frontier_max and len(self) > self.frontier_max:
            self._evict(len(self) - self.frontier_max)
        self._replaced_done(*replaced)
        self._count_frontier()
        return queued

    def _came_into_reach(self, request: Request) -> None:
        """``request`` was queued or raised, perhaps into the next ``HELD_HOST_LOOKAHEAD``: a
        look that found only blocked hosts is made again if it is of another host. (Links of
        the blocked hosts, a single host's crawl's all, leave the look as good as it was.)"""
        if self.blocked_ahead is not None and self._host(request) not in self.blocked_ahead:
            self.blocked_ahead = None

    def _forget_dropped(self) -> None:
        """Unmark the URLs the strategy dropped (``take_dropped``): found again, they compete
        again. (A FRONTIER_MAX eviction stays seen: the sources drop those links for good.)"""
        forget = getattr(self.df, "forget", None)
        for queue in (self.dqs, self.mqs):
            if queue is not None and (dropped := queue.take_dropped()):
                self._keep_left_out(dropped)
                if forget is not None:
                    forget(dropped)

    def _keep_left_out(self, fps: list[bytes], past_kept: bool = False) -> None:
        """Keep the links the strategy left out by its parameter, up to ``LEFT_OUT_KEPT``
        (``past_kept``: one more, not kept); in a shared crawl for the crawl's count too
        (``RedisFrontier.leave_out``)."""
        room = max(0, LEFT_OUT_KEPT - len(self.left_out))
        kept = fps[:room]
        past_kept |= len(fps) > room
        self.left_out.update(kept)
        self.left_out_past_kept |= past_kept
        if self.shared is not None:
            self.shared.frontier.leave_out(kept, past_kept, LEFT_OUT_KEPT)

    def _is_trap_dropped(self, request: Request) -> bool:
        """Mark a trap request for the back of the frontier; True if its family is full.
        Seeds (no parent) and retries (``dont_filter``) are taken as they are."""
        if self.traps is None or request.dont_filter or "parent_url" not in request.meta:
            return False
        return not self.traps.admit(request)

    def _evict(self, count: int) -> int:
        # The disk queue holds what could be serialized, i.e. nearly everything under JOBDIR.
        queue = self.dqs if self.dqs is not None and len(self.dqs) else self.mqs
        evicted = queue.evict(count)
        assert self.stats is not None
        before = self.stats.get_value("focused/evicted", 0)
        self.stats.inc_value("focused/evicted", evicted)
        if (before + evicted) // EVICTION_LOG_EVERY > before // EVICTION_LOG_EVERY:
            logger.info(
                "Frontier full (FRONTIER_MAX=%d): %d lowest-ranked requests evicted so far",
                self.frontier_max,
                before + evicted,
            )
        return evicted

    def next_request(self) -> Request | None:
        if self._jobdir_failed():
            return None  # the crawl is stopping: nothing more is handed out
        try:
            return self._next_request()
        except JobdirUnwritable:
            return None  # the crawl stops (focused.jobdir)

    def _next_request(self) -> Request | None:
        if not getattr(self.crawler.spider, "seeds_queued", True):
            # Scrapy reads the seeds one at a time and asks for a request in between: the links
            # of the first seeds fetched went ahead of the seeds not read yet (with more seeds
            # than CONCURRENT_REQUESTS, dfs fetched links before seeds, and a seed found on
            # another was fetched as its link, a level deeper). The spider wakes the engine.
            return None
        if self.outstanding_max and (
            self._outstanding() >= self.outstanding_max or self._links_pending()
        ):
            # The engine asks again when a page is scored or a link queued (SCORE_BEFORE_DISPATCH)
            return None
        if self.refetches:
            return self._refetch()
        if self._budget_under_way():
            return None  # a response or a failed request asks again
        if (
            self.robots_held
            and time.monotonic() >= self.robots_look_at
            and (request := self._release_held()) is not None
        ):
            # Popped in its order before its host's robots.txt failed: it goes first. The
            # engine is woken when the next may go (_wake_at).
            return request
        self.ahead = []
        request = self._next_allowed() if self.window or self.max_per_host else self._pop()
        self._count_frontier()
        return request

    def _hold_for_robots(self, request: Request) -> None:
        """Keep ``request``, handed back by focused.robots, until its host's failed robots.txt is
        fetched again. It stays popped: in flight in the frontier file under JOBDIR and in
        Redis in a shared crawl, its host's slot (``MAX_PAGES_PER_HOST``) and its pop's share of
        a shared page budget taken; it counts in ``len()``, so the crawl does not end meanwhile.
        """
        self.robots_held.setdefault(urlparse_cached(request).netloc, deque()).append(request)
        self.robots_look_at = 0.0

    def _release_held(self) -> Request | None:
        """A request held for its host's failed robots.txt that may go now: once the failure's
        time is up, the first to go downloads the robots.txt again (and is held again if it
        fails again), and the others follow once it is read; once it failed more than
        ``ROBOTS_HOLD_RETRIES`` times, all go, to be refused. As a host of the frontier, each
        goes only while its host is not held (``HELD_HOST_LOOKAHEAD``): waiting for its
        robots.txt, or in its slot. Those of a host in the ``HOST_WINDOW`` are parked, to go
        as it moves (``_next_allowed``): handed out at once, they went back to back, up to
        ``ROBOTS_RETRY_FAILED_AFTER`` worth of the host's pages, at a host just recovering."""
        robots = self._robots()
        now, look_at, wake_at = time.monotonic(), math.inf, math.inf
        held_hosts = None
        for netloc, requests in list(self.robots_held.items()):
            held_until = robots.holding_until(netloc)
            if held_until is not None:
                wake_at = min(wake_at, held_until)
                continue
            if held_hosts is None:
                held_hosts = self._held_hosts() if self.lookahead else {}
            host = self._host(requests[0])
            if host in held_hosts:
                look_at = now  # the engine asks again as its robots.txt is read
                continue
            if self.in_window[host]:
                del self.robots_held[netloc]
                self.parked.extend(requests)
                continue
            request = requests.popleft()
            if not requests:
                del self.robots_held[netloc]
            self.robots_look_at = now
            return self._take(request)
        self.robots_look_at = min(look_at, wake_at)
        # Set whatever the others wait for: a host held in its slot meanwhile (a Crawl-delay)
        # wakes the engine only as its download ends, and the others went at the heartbeat.
        if now < wake_at < math.inf:
            self._wake_at(wake_at)
        return None

    def _wake_at(self, when: float) -> None:
        """Have the engine ask for requests at ``when`` (``time.monotonic()``), when a host's
        held requests may go: with nothing else under way it asks only at its 5-second
        heartbeat, and a crawl left with held requests alone sent them up to 5 s late."""
        if self.robots_wake is not None:
            if self.robots_wake_at <= when:
                return  # that look sets the next wake-up
            self.robots_wake.cancel()
        self.robots_wake_at = when
        self.robots_wake = call_later(max(0.0, when - time.monotonic()), self._woken)

    def _woken(self) -> None:
        self.robots_wake, self.robots_wake_at = None, math.inf
        # Looked at whatever the clock says: the reactor's may fire a little early, and a look
        # put off by it would wait for the heartbeat again.
        self.robots_look_at = 0.0
        wake_engine(self.crawler)

    def _refetch(self) -> Request:
        """The next request a crash left in flight with its response counted, before any other.
        The page budget paid for its page, which the crash kept from the store: queued again
        behind the others, it was not fetched once they spent the budget (a crawl killed at its
        budget's end closed at once, its last pages never stored). It was chosen by the
        strategy, and its host's slot taken, before the crash; its response is not counted
        again (``RESPONSE_COUNTED``), and it is in flight in the frontier file until done."""
        fp, request = self.refetches.popleft()
        request.meta[INFLIGHT] = fp
        self.dqs.refetched(request)
        if self.max_per_host:
            # Its slot before the crash was given back (_recover_host_slots).
            self._count_host_slots(self._host(request), 1)
        self.stats.inc_value("scheduler/dequeued/disk")
        self.stats.inc_value("scheduler/dequeued")
        if not self.refetches:
            self.crawler.signals.send_catch_log(counted_refetched)
        return self._take(request)

    def _pop(self) -> Request | None:
        """The frontier's next request, unless its host is held (``HELD_HOST_LOOKAHEAD``)."""
        held = self._held_hosts() if self.lookahead else {}
        if not held:
            return self._pop_first()
        # Without JOBDIR the memory queue, empty or not: a shared crawl's len() asks Redis.
        queue = self.dqs if self.dqs is not None and not len(self.mqs) else self.mqs
        if not self.ahead:
            self._read_ahead(queue, 1)
        if not self.ahead or (first := self.ahead[0][1]) not in held:
            return self._pop_first()
        index = self._first_not_held(queue, held)
        if index is not None and (request := self._take_queued(queue, index)) is not None:
            return request
        # Every request looked at is of a held host. The first goes while its slot can still
        # take it, as it would without the rule, so that a crawl of one host hands out its order
        # with its concurrency; past that it would only wait in the slot, holding a download
        # that a link found meanwhile could use. Nothing goes: a response or a new link asks again.
        return self._pop_first() if held[first] else None

    def _pop_first(self) -> Request | None:
        request = super().next_request()
        self.pops_until_look -= 1
        if self.ahead:
            fingerprint = self.crawler.request_fingerprinter.fingerprint
            if request is not None and fingerprint(request) == self.ahead[0][0]:
                del self.ahead[0]
            else:  # another process of a shared crawl popped from the frontier meanwhile
                self.ahead.clear()
        return request

    def _first_not_held(self, queue: StrategyQueue, held: dict[str, bool]) -> int | None:
        """The index in ``ahead`` of the first request among the frontier's next
        ``HELD_HOST_LOOKAHEAD`` whose host is neither held nor in the ``HOST_WINDOW`` (which
        would only park it); None if there is none. The frontier is read in growing chunks,
        once per ``next_request``: ``ahead`` lists what was read and is still queued, in order,
        for the pops of a window or host-cap scan. A look that found none is not made again
        until a request of another host is queued (in a shared crawl, until a page is done: the
        other processes queue unseen) or one of those hosts may go: the engine asks for
        requests one after another, and in a crawl of one held host the look reads the whole
        prefix. Pops bring requests from beyond a look cut short by
        ``HELD_HOST_LOOKAHEAD`` into reach: such a look is made again after ``POPS_PER_LOOK``."""
        blocked = held.keys() | {host for host, count in self.in_window.items() if count}
        if (
            self.blocked_ahead is not None
            and self.blocked_ahead <= blocked
            and self.pops_until_look > 0
        ):
            return None
        ahead, read = self.ahead, 0
        while True:
            for index in range(read, len(ahead)):
                if ahead[index][1] not in blocked:
                    return index
            read = len(ahead)
            if not self._read_ahead(queue, max(AHEAD_CHUNK, read)):
                break
        self.blocked_ahead = frozenset(host for _, host in ahead)
        self.pops_until_look = POPS_PER_LOOK if len(ahead) >= self.lookahead else math.inf
        return None

    def _read_ahead(self, queue: StrategyQueue, count: int) -> int:
        """Append to ``ahead`` up to ``count`` more of the frontier's next
        ``HELD_HOST_LOOKAHEAD`` requests (fingerprint, host); returns how many."""
        start = len(self.ahead)
        with closing(queue.ranked(start)) as ranked:
            entries = list(islice(ranked, max(0, min(count, self.lookahead - start))))
        self.ahead += entries
        return len(entries)

    def _take_queued(self, queue: StrategyQueue, index: int) -> Request | None:
        """Hand out the queued request ``ahead[index]`` in place of the frontier's first."""
        fp, _ = self.ahead.pop(index)
        if queue is self.mqs:
            request, kind = queue.take(fp), "memory"
        else:
            request, kind = self._in_flight(lambda: queue.take(fp)), "disk"
        if request is None:  # another process of a shared crawl popped it
            self.ahead.clear()
            return None
        self.stats.inc_value(f"scheduler/dequeued/{kind}")
        self.stats.inc_value("scheduler/dequeued")
        self.stats.inc_value("focused/held_host/passed_over")
        return request

    def _held_hosts(self) -> dict[str, bool]:
        """The hosts whose download slot is held by a delay (``DOWNLOAD_DELAY``, a robots.txt
        Crawl-delay, AutoThrottle's) or a 429/503 pause (focused.retryafter), or full (a slow host:
        more requests handed out than its concurrency), and already has a request waiting: another
        would only wait there too, counted against ``CONCURRENT_REQUESTS``. Each with whether its
        slot can still take one when no other host is in reach: a delayed slot while fewer are
        handed out than its concurrency, a full one than twice that. A request handed out is in
        ``downloader.active`` at once, before the downloader middlewares let it reach its slot;
        sent, it is in the slot's ``transferring``. A Crawl-delay's slot sends one at a time
        (focused.robots): one waiting behind the one in flight holds it, and it has room for no
        other.

        A host with a request waiting for its robots.txt is held too, with no room: its requests
        would wait with it, each counted against ``CONCURRENT_REQUESTS`` (up to
        ``DOWNLOAD_TIMEOUT`` for a slow host), and then go to a slot whose Crawl-delay, not known
        yet, may send them one at a time. Once the robots.txt is read, focused.robots wakes the
        engine, which asks again at once (it would otherwise wait for a response, or for its
        5-second heartbeat)."""
        engine = getattr(self.crawler, "engine", None)
        if engine is None:
            return {}
        downloader = engine.downloader
        slot_keys = {request: downloader.get_slot_key(request) for request in downloader.active}
        room: dict[str, bool] = {}
        reading_robots = set()
        if robots := self._robots():
            reading_robots = {key for r, key in slot_keys.items() if robots.waits_for_robots(r)}
        for key, count in Counter(slot_keys.values()).items():
            if key in reading_robots:
                room[key] = False  # focused.robots wakes the engine once the robots.txt is read
                continue
            slot = downloader.slots.get(key)
            if slot is None or count <= len(slot.transferring):
                continue  # nothing waits in it
            if slot.delay > 0 or slot.latercall is not None:
                room[key] = count < slot.concurrency
            elif count > slot.concurrency:
                # A slow host: more handed out than its slot sends at once, so one waits (not
                # its transferring set: the engine hands out a burst of requests before any of
                # them reaches the slot, past the downloader middlewares). When no other host is
                # in reach its next requests still go, up to one waiting for each transfer: each
                # is sent the moment a transfer ends, rather than when the reactor, busy scoring
                # pages, asks again (holding them back took a crawl of one host at 0.1 s a
                # response to 0.8 x), and no more, which only wait, chosen early, and keep a
                # closing crawl fetching (Ctrl-C took 15 s instead of 3 at concurrency 2).
                room[key] = count < 2 * slot.concurrency
        return {self._host(request): room[key] for request, key in slot_keys.items() if key in room}

    def _robots(self) -> RobotsTxtMiddleware | None:
        """focused.robots' middleware, None without it (``ROBOTSTXT_OBEY`` off)."""
        if self.robots is None:
            self.robots = self.crawler.get_downloader_middleware(RobotsTxtMiddleware) or False
        return self.robots or None

    def _budget_under_way(self) -> bool:
        """Whether the requests downloading will spend what is left of the page budget
        (CLOSESPIDER_PAGECOUNT, counted by ``focused.stopping.PageBudget``).

        Scrapy's count stops the crawl only as the budget's last response comes in, and every
        download slot freed before then starts one more request: a crawl went up to
        CONCURRENT_REQUESTS - 1 pages past its budget (55 for 40). Every request downloading
        counts here, robots.txt too, but one fetched again after a crash whose response was
        counted before it (``RESPONSE_COUNTED``), and a request that ends without a response (a
        failure, a redirect, a retry) gives its place back. A shared crawl takes a budget slot
        with each pop from Redis instead."""
        if not self.page_budget or self.shared is not None:
            return False
        active = self.crawler.engine.downloader.active
        downloading = sum(1 for request in active if not request.meta.get(RESPONSE_COUNTED))
        return crawl_counter(self.crawler.spider, "responses") + downloading >= self.page_budget

    def _outstanding(self) -> int:
        """Requests downloading, plus downloaded pages not yet scored (SCORE_BEFORE_DISPATCH).

        Scrapy frees a download slot as soon as the response is in, and fills it from the
        frontier at once. When a burst of responses arrives, every freed slot was then filled
        before any of them was scored, by requests that never saw the links the burst was
        about to queue (a 33-page crawl of Storms fetched all 32 other links of its seed before
        any of the hurricane pages that one of those responses linked to). Counting a request
        until its page is scored makes each new request wait for one page's links, and keeps
        as many requests under way as before.

        A page counts until its links are queued, not until its item has been stored: Scrapy
        keeps it in the scraper until the item pipelines are done, which can be long after,
        while the reactor scores other pages and a store a round trip away (MongoDB, written
        in a thread) writes it. Counting that time held download slots for nothing."""
        engine = self.crawler.engine
        scraper = engine.scraper.slot
        if scraper is None:
            return len(engine.downloader.active)
        if self.scored_pages:
            self.scored_pages &= scraper.active  # forget the pages whose scrape has ended
        unscored = len(scraper.active) - len(self.scored_pages)
        return len(engine.downloader.active) + len(scraper.queue) + unscored

    def _under_way(self) -> bool:
        """Whether the engine is downloading or scoring pages: it asks for requests again as
        each ends. False for a scheduler used outside a crawl (tests), which has no engine."""
        try:
            return self._outstanding() > 0
        except RuntimeError:  # Crawler.engine is not set
            return False

    def _links_yielded(self, page: Request, links: list[Request]) -> None:
        if links:
            self.links_to_queue[page] = set(links)
        else:
            self.scored_pages.add(page)
            # Its hold ends now, and no link of it reaching the frontier makes the engine ask
            # again: it asked once the page's item had left the pipelines (a slow store's
            # write), or at its 5-second heartbeat, and a crawl whose next request waited for
            # the page (SCORE_BEFORE_DISPATCH, a strategy's flight) stood still meanwhile.
            wake_engine(self.crawler)

    def _link_reached(self, request: Request) -> None:
        """``request`` is being scheduled (``request_scheduled``): it is queued, or dropped as a
        duplicate or trap, before the engine does anything else. Not only as it reaches the
        frontier: Scrapy's offsite filter drops a link as the signal goes (``allowed_domains``),
        and its page held every request back until its item had been stored."""
        if not self.links_to_queue:
            return
        for page, links in self.links_to_queue.items():
            if request in links:
                links.remove(request)
                if not links:
                    del self.links_to_queue[page]
                    self.scored_pages.add(page)
                return

    def _links_pending(self) -> bool:
        """True while a page's links are still being queued (SCORE_BEFORE_DISPATCH).

        Scrapy queues a page's links one at a time and may let the event loop run in between,
        the more often the lower ``CONCURRENT_ITEMS``. A request handed out then would be chosen
        from a frontier that lacks the page's later links: the frontier's order would depend on
        the event loop's timing. A page whose scrape ended before all its links came (an error
        cut its output short) holds nothing."""
        if self.links_to_queue:
            slot = self.crawler.engine.scraper.slot
            scraping = slot.active if slot is not None else ()
            for page in [page for page in self.links_to_queue if page not in scraping]:
                del self.links_to_queue[page]
        return bool(self.links_to_queue)

    def __len__(self) -> int:
        held = sum(map(len, self.robots_held.values()))  # a few hosts at most, usually none
        return super().__len__() + len(self.parked) + len(self.refetches) + held

    def close(self, reason: str):
        self.closed = True
        if self.robots_wake is not None:
            self.robots_wake.cancel()
            self.robots_wake = None
        if self._jobdir_failed():
            # Left as kill -9 at the failure would have left it: nothing more is written, the
            # strategy's state neither (focused.jobdir).
            for queue in (self.dqs, self.mqs):
                frontier = getattr(queue, "frontier", None)
                if isinstance(frontier, SqliteFrontier):
                    frontier.close()
            if self.traps is not None:
                self.traps.close()
            return self.df.close(reason)
        try:
            return self._close(reason)
        except (JobdirUnwritable, sqlite3.Error, OSError) as exc:
            if self.jobdir is None or failure_reason(exc) is None:
                raise
            if not self.jobdir.unsaved:
                self.jobdir.not_saved("the frontier's state", self.dqdir or "", exc)
            return self.df.close(reason)

    def _close(self, reason: str):
        self._count_frontier(now=True)  # the crawl's last word on it
        self._count_held()  # and on what a stop left held, which goes back to the queue
        held = (request for requests in self.robots_held.values() for request in requests)
        for request in [*self.parked, *held]:  # back to the queue, so a paused crawl keeps them
            # In a shared crawl, popped from the crawl's frontier, it goes back with this
            # process's unfinished requests, and its host's slot with it (below).
            if self.shared is not None:
                continue
            if self.max_per_host:  # it takes its host's slot again when it comes up
                self._give_back_host_slot(self._host(request))
            self._park_in_queue(request)
        self.parked.clear()
        self.robots_held.clear()
        if self.shared is not None:
            # Scrapy's Scheduler.close closes only a JOBDIR queue: the Redis frontier (the
            # memory queue's) puts back what this process popped and did not finish.
            self.mqs.close()
        if self.traps is not None:
            self.traps.close()
        if reason == "finished" and self.stats:
            self._say_limits_run_into()
        self._say_links_left_out(reason)
        return super().close(reason)

    def _say_limits_run_into(self) -> None:
        """A crawl that ran out of requests, not of budget, says which of the frontier's limits
        it ran into, each in a line: as asked, but a crawl that ends 'finished' before its
        budget should say why in its log, not in its stats alone."""
        assert self.stats is not None
        limits = (
            # Evicted links stay seen, so they are not queued again: a warning.
            (
                "focused/evicted",
                logging.WARNING,
                "The frontier ran empty after %s evicted (FRONTIER_MAX=%s): evicted links are"
                " not queued again, so the crawl ends here; raise FRONTIER_MAX to go on",
                ("request was", "requests were"),
                self.frontier_max,
            ),
            (
                "focused/skipped/host_limit",
                logging.INFO,
                "The frontier ran empty after %s dropped at hosts that had their"
                " MAX_PAGES_PER_HOST=%s",
                ("request was", "requests were"),
                counted(self.max_per_host, "page"),
            ),
            # The spider does not look at a page's links past its first MAX_LINKS_PER_PAGE.
            (
                LINK_LIMIT_STAT,
                logging.INFO,
                "The frontier ran empty after %s left out of pages past their first"
                " MAX_LINKS_PER_PAGE=%s: raise MAX_LINKS_PER_PAGE (0: every link) to go on",
                ("link was", "links were"),
                counted(self.max_links, "link"),
            ),
        )
        for stat, level, line, nouns, limit in limits:
            count = self.stats.get_value(stat, 0)
            if count:
                logger.log(level, line, counted(count, *nouns), limit)

    def _say_links_left_out(self, reason: str) -> None:
        """A crawl that ran out of requests after its strategy left links out by a parameter
        (``StrategyQueue.links_left_out``): as asked, but without this line its log shows a
        crawl of all it could reach (a dfs crawl of the sample ended at 214 of its 297 pages).
        Those still left out are kept in ``spider.state`` (saved at a JOBDIR pause): a resumed
        run that found none of its own said nothing of the earlier runs'. A shared crawl keeps
        them in Redis, every process's: each process counted its own alone."""
        left_out = self.mqs.links_left_out()
        if left_out is None:
            return
        stat, param = left_out
        if self.shared is not None:
            # The crawl's: each process's links left out meet in Redis, and there they are
            # counted against the crawl's seen set in one call (one call per link had been up
            # to LEFT_OUT_KEPT round trips), with those of the crawl's earlier runs.
            unseen, past_kept = self.shared.frontier.count_left_out(
                self.left_out_past_kept, LEFT_OUT_KEPT
            )
        else:
            unseen, past_kept = self._left_out_unseen()
        # A run that kept LEFT_OUT_KEPT of them (this one, or one before it) left more out.
        past_kept |= unseen >= LEFT_OUT_KEPT
        count = min(unseen, LEFT_OUT_KEPT)
        if reason != "finished" or not (count or past_kept):
            return
        if not count:
            # Every link kept was queued since, but not those past them: not known one by one,
            # they may not have been (silent, the log showed a crawl of all it could reach).
            how_many = f"links past the {LEFT_OUT_KEPT:,} counted were"
        else:
            how_many = counted(count, "link was", "links were")
            how_many = f"at least {how_many}" if past_kept else how_many
        logger.info(
            "The frontier ran empty after %s left out by %s's %s=%s (%s): raise %s to go on",
            how_many,
            self.mqs.name,
            param,
            self.mqs.params[param],
            stat,
            param,
        )

    def _left_out_unseen(self) -> tuple[int, bool]:
        """How many links this crawl's strategy left out are still unseen, this run's and the
        earlier runs' of its JOBDIR (``spider.state``, where they are kept for the next), and
        whether more were left out than were kept."""
        # Only the links never queued: the stat counts each finding of one, and most are of
        # pages fetched all the same (the deepest pages' links back to the home page, a link
        # cut deep and then found on a shallower page), which no raise of the parameter adds.
        seen = getattr(self.df, "seen", None)
        state = getattr(self.crawler.spider, "state", None)
        earlier = state.get(LEFT_OUT_STATE, set()) if state is not None else set()
        unseen = {fp for fp in self.left_out | earlier if seen is None or not seen(fp)}
        past_kept = self.left_out_past_kept or len(unseen) >= LEFT_OUT_KEPT
        # Saved with those kept, which may be fewer, found since: the resumed run says "at
        # least" all the same.
        past_kept |= state is not None and bool(state.get(LEFT_OUT_PAST_KEPT_STATE))
        if state is not None:
            state[LEFT_OUT_STATE] = set(islice(unseen, LEFT_OUT_KEPT))
            state[LEFT_OUT_PAST_KEPT_STATE] = past_kept
        return len(unseen), past_kept

    def _park_in_queue(self, request: Request) -> None:
        """Queue again a request handed out and parked, never sent. Under JOBDIR it leaves the
        frontier file's in-flight table in the same transaction: left there, the resumed crawl
        took it for one a crash cut short and queued it a second time."""
        frontier, fp = self._durable_frontier(), request.meta.pop(INFLIGHT, None)
        if frontier is None or fp is None:
            if not self._dqpush(request):
                self._mqpush(request)
            return
        with frontier.transaction():
            self._dqpush(request)  # it went in flight from this queue: it can go back
            frontier.leave_inflight(fp)

    _host = staticmethod(host_of)

    def _next_allowed(self) -> Request | None:
        for index, request in enumerate(self.parked):
            if not self.in_window[self._host(request)]:
                del self.parked[index]
                return self._take(request)
        for _ in range(self.window_scan):
            request = self._pop()
            if request is None:
                if super().__len__() and self._under_way():
                    # Queued requests wait for a held host's slot or a strategy's flights, and
                    # one of them may be outside the window: the engine asks again as the work
                    # under way ends, and the window moves without being broken.
                    return None
                break
            host = self._host(request)
            if self.max_per_host and self._host_full(host):
                self.stats.inc_value("focused/skipped/host_limit")
                if self.shared is not None and (member := request.meta.pop(INFLIGHT_META, None)):
                    # Never fetched: the slot of the crawl's page budget its pop took goes back
                    # (else a capped host's dropped requests spent the budget of the others).
                    self.shared.frontier.unpop(member)
                # Done with: under JOBDIR out of the frontier file, in a shared crawl out of
                # this process's in-flight set (else it would be re-queued when idle).
                self.crawler.signals.send_catch_log(request_finished, request=request)
                continue
            if self.in_window[host]:
                self.parked.append(request)
                continue
            return self._take(request)
        if not self.parked:
            return None
        # Nothing allowed and nothing under way: the window would never move. The host fetched
        # longest ago goes.
        order = {host: age for age, host in enumerate(self.recent_hosts)}
        index = min(
            range(len(self.parked)), key=lambda i: order.get(self._host(self.parked[i]), -1)
        )
        self.stats.inc_value("focused/host_window/relaxed")
        return self._take(self.parked.pop(index))

    def _recover_host_slots(self, spider: Spider) -> None:
        """After a crash, each host's count of slots taken comes back as written through
        (``focused.resume.written_host_pages``), less the slots of the requests the crash left
        in flight, which take theirs again as they come up (``_refetch`` too), in place of the
        count ``recover_state`` took from the store. From the store, a request whose response
        gave no page (a 404, not HTML) was not counted, and the host got as many requests again
        past its cap; and a page stored whose request a kill left in flight was counted twice,
        stored and fetched again. A kill between a request's pop and its slot's write leaves
        that slot uncounted: one request more."""
        jobdir = self.crawler.settings.get("JOBDIR")
        if self.shared is not None or not jobdir:
            return
        host_pages = self._host_pages
        for host, pages in written_host_pages(jobdir):
            host_pages[host] = max(0, pages - self.cut_off_slots[host])

    def _count_host_slots(self, host: str, taken: int) -> None:
        """``taken`` slots more (or fewer) taken at ``host``, in this process's count, written
        through under JOBDIR (``focused.resume.CrawlCounters``: see ``_recover_host_slots``)."""
        host_pages = self._host_pages
        host_pages[host] += taken
        self.crawler.signals.send_catch_log(host_pages_changed, host=host, pages=host_pages[host])

    @property
    def _host_pages(self) -> Counter[str]:
        state = self.spider.state  # pickled by Scrapy's SpiderState on a JOBDIR pause
        if "host_pages" not in state:
            state["host_pages"] = Counter()
        return state["host_pages"]

    def _host_full(self, host: str) -> bool:
        """True if ``host`` had its ``MAX_PAGES_PER_HOST``; a False takes one of its slots,
        check and count in one step (in a shared crawl the crawl's count, in Redis). The
        request holds the slot while it is parked, so parked requests never pass the cap."""
        if self.shared is not None:
            return not self.shared.take("host_pages", host, self.max_per_host)
        if self._host_pages[host] >= self.max_per_host:
            return True
        self._count_host_slots(host, 1)
        return False

    def _give_back_host_slot(self, host: str) -> None:
        if self.shared is not None:
            self.shared.give_back("host_pages", host)
        else:
            self._count_host_slots(host, -1)

    def _take(self, request: Request) -> Request:
        host = self._host(request)
        if self.window:
            self.recent_hosts.append(host)
            self.in_window[host] += 1
            if len(self.recent_hosts) > self.window:
                oldest = self.recent_hosts.popleft()
                self.in_window[oldest] -= 1
                if not self.in_window[oldest]:  # else a key per host ever fetched
                    del self.in_window[oldest]
        return request

    def _count_wanted(self) -> None:
        """The progress log's line is due: the stats it shows are counted now (a closed
        scheduler's were, as it closed)."""
        if not self.closed:
            self._count_frontier(now=True)
            self._count_held()

    def _count_held(self) -> None:
        """The stats of the requests held for a failed robots.txt now, of how many hosts' are
        being fetched again now, and of when the next other host's is: a crawl left with them
        alone waits up to ``ROBOTS_HOLD_RETRIES`` times ``ROBOTS_RETRY_FAILED_AFTER``, and its
        progress line said only that its frontier held them. Counted as each line is due and as
        the crawl closes, once any was held."""
        requests = sum(map(len, self.robots_held.values()))
        if not requests and self.stats.get_value(HOLDING_REQUESTS) is None:
            return
        robots, now = self._robots(), time.monotonic()
        until = [robots.holding_until(netloc) for netloc in self.robots_held] if robots else []
        first = min((when for when in until if when is not None), default=None)
        self.stats.set_value(HOLDING_REQUESTS, requests)
        self.stats.set_value(HOLDING_HOSTS, len(self.robots_held))
        self.stats.set_value(HOLDING_FETCHING, until.count(None))
        self.stats.set_value(
            HOLDING_UNTIL,
            None if first is None else datetime.now(UTC) + timedelta(seconds=first - now),
        )

    def _count_frontier(self, now: bool = False) -> None:
        """The ``focused/frontier`` stat of the progress log, at most every
        FRONTIER_STAT_EVERY seconds: in a shared crawl each look is a round trip to Redis."""
        assert self.stats is not None
        clock = time.monotonic()
        if now or clock >= self._frontier_counted_at + FRONTIER_STAT_EVERY:
            self._frontier_counted_at = clock
            self.stats.set_value("focused/frontier", len(self))
