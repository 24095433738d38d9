"""Scrapy's downloader, with each host's concurrency kept.

Scrapy 2.19 counts a request against its download slot's concurrency
(``CONCURRENT_REQUESTS_PER_DOMAIN``, ``CONCURRENT_REQUESTS_PER_IP``, ``DOWNLOAD_SLOTS``) from
the moment its download task starts: ``Slot.transferring`` gains it in ``Downloader._download``.
Under the asyncio reactor that task starts in a later turn of the event loop than the one in
which the slot let the request go, so every request that reached the slot in the same turn
found the slot free: as the engine handed out a burst, or several answers freed the slot at
once, all went on the wire (16 at once to a host whose limit was 4,
``tests/test_politeness.py``). Here a request counts from the moment the slot lets it go.

A host paced by its robots.txt's Crawl-delay (``focused.robots`` names its slot in
``paced_from_end``) waits that delay from the end of one download to the start of the next, as
Yandex defines Crawl-delay and as Nutch and Heritrix pace a host; Scrapy counts it from one send
to the next. The first download, the robots.txt that tells the delay, was sent unpaced: the
delay runs from its end too (``robots_txt_ended``). Counted from the send, the host saw two
requests less than the delay apart whenever the first was written late (the event loop busy
with a page for a few hundred milliseconds after the slot had let it go): 0.65 s apart for a
Crawl-delay of 1 s, on a loaded machine. A slot to which ``DOWNLOAD_SLOTS`` gives a concurrency
above 1 keeps Scrapy's count: the user asked for downloads that overlap.

With ``CONCURRENT_REQUESTS_PER_IP``, a slot is keyed by its host's first address: Scrapy's
resolver that answers IPv6 too caches a host's addresses as a list, which Scrapy 2.19 would
take as the key and fail on. Scrapy keys it by the host's name while the address is not in its
DNS cache yet, which only a download fills: the first request of each host (its robots.txt)
went in a slot of its own, so that the virtual hosts of one server each had one on the wire at
once, past the address's limit. Here the host is looked up before its request reaches a slot.

In a crawl shared by several processes (``focused.distributed``) a slot's delay
(``DOWNLOAD_DELAY``, a robots.txt Crawl-delay, AutoThrottle's) is the crawl's, not only this
process's: before a delayed slot sends, it takes its host's lease in Redis
(``SharedCrawl.lease``), which no process gets again until the delay has passed. Not taken, the
slot is held (``Slot.latercall``, as for its own delay) until the lease ends. A slot without a
delay only looks whether another process was asked to pause the host (Retry-After,
``focused.retryafter``).

A slot's concurrency (``CONCURRENT_REQUESTS_PER_DOMAIN``, ``_PER_IP``, ``DOWNLOAD_SLOTS``) is the
crawl's too: in the same Redis call, each request sent takes one of its host's places in the
crawl, and gives it back in the call after its download ends (Scrapy's ``_download`` calls
``_process_queue`` then), or alone when nothing waits to be sent. A place given back goes first
to a process that found the host full earlier, so that none starves behind one whose slot is
never empty. A host full crawl-wide holds the slot for ``FULL_HOST_FIRST_WAIT``, twice as long
at each look that finds it full again, up to ``FULL_HOST_WAIT``: a place another process gives
back is seen only when the slot asks again (a wake-up through Redis would need a
subscriber connection and its thread in every process), but one of this process's own downloads
ending there wakes the slot at once. A place lasts ``FOCUSED_WORKER_TIMEOUT`` and the process
renews the places it holds four times in that time (``SharedCrawl.renew``): a process that
dies, whose downloads never end, leaves its hosts' places taken no longer than it takes the
others to count it dead. One process alone (no ``FOCUSED_FRONTIER``) makes no call.

As the crawl is stopped (Ctrl-C, SIGTERM: the close reason ``shutdown``; or a time limit,
``CLOSESPIDER_TIMEOUT``, enough relevant pages...), Scrapy's engine waits for every request it
has handed out, those still waiting in a slot too: a request held by its host's Crawl-delay or a
Retry-After pause kept a stopped crawl waiting up to a minute, then went on the wire after the
stop. A request that its slot has not sent as the stop begins, or that reaches its slot after,
is not sent: it ends with ``NotSent``. One of a frontier that outlives the process (``JOBDIR``,
``FOCUSED_FRONTIER``) stays in flight there, and the resumed crawl (or another process of a
shared one) fetches it; without one it is dropped, as the rest of the frontier is. A robots.txt
or a ``HEAD_CHECK`` HEAD ends so too (its page with it): the crawl that goes on asks again. The
downloads on the wire end as before, and a crawl closing at its page budget sends what it
handed out: the budget has counted those requests (and handed out none beyond).

A JOBDIR crawl keeps, as it closes, when each host may next be sent a request (its slot's
delay, a Crawl-delay or a Retry-After pause, after its last request): ``PAUSED_HOSTS_FILE``.
The run that resumes it holds each of those hosts until then, its robots.txt too (read again
first, unpaced): resumed at once, it sent to a host with a Crawl-delay of 2 s a second after the
paused run's last request. A hold is at most as long as it was at the pause (a clock set back
since cannot hold a host longer), and one past is no hold. A robots.txt still held in its slot
as the crawl is stopped is not sent either (Scrapy waited out the hold, up to a minute, then
sent it), and a hold that has not ended is kept for the next run. The file is also written
every ``HOLDS_SAVED_EVERY`` seconds while the crawl runs and any host is held, so that a crawl
killed outright (``kill -9``, a crash), which writes nothing as it ends, leaves its holds too:
resumed, it sent to every host at once (a robots.txt 2 s after the killed run's last page, for
a Crawl-delay of 4 s). Any delayed host whose slot Scrapy keeps (a minute past its delay) may
have been sent one after that write, up to the next, idle or not (a link to it coming up past its
delay is sent at once): its hold so saved runs to its delay after the next write, which a
pause's own write, exact, replaces. A small file, nothing written while no host is held: no cost
a page.
"""

from __future__ import annotations

import json
import logging
from contextlib import suppress
from pathlib import Path
from time import monotonic, time
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy import signals
from scrapy.core.downloader import Downloader
from scrapy.exceptions import IgnoreRequest
from scrapy.resolver import dnscache
from scrapy.utils.asyncio import call_later, create_looping_call
from scrapy.utils.defer import _schedule_coro, maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.python.failure import Failure
from twisted.web.client import HTTPConnectionPool

from focused.errors import counted, load_json
from focused.jobdir import jobdir_writes, write_whole
from focused.retryafter import RetryAfterMiddleware
from focused.robots import STOPPED_WAITING_META, RobotsTxtMiddleware, is_robots_txt

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from scrapy import Request
    from scrapy.core.downloader import Slot
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.utils.asyncio import AsyncioLoopingCall, CallLaterResult
    from twisted.internet.defer import Deferred
    from twisted.internet.task import LoopingCall

    from focused.distributed import SharedCrawl

logger = logging.getLogger(__name__)

# Seconds before a host full crawl-wide is looked at again: first soon, since a fast host's
# places come back within milliseconds, then twice as long at each look, up to the most.
FULL_HOST_FIRST_WAIT = 0.01
FULL_HOST_WAIT = 0.1
# Under JOBDIR: {slot key: [the wall-clock time before which the host gets no request, how many
# seconds that was away]}, written as the crawl closes, read as it resumes.
PAUSED_HOSTS_FILE = "paused_hosts.json"
PAUSED_HOSTS_TEMP_FILE = f"{PAUSED_HOSTS_FILE}.tmp"  # written whole, then renamed
HOLDS_SAVED_EVERY = 1.0  # seconds between two writes of it while the crawl runs, for a crash

_M = TypeVar("_M")  # a downloader middleware's class (PoliteDownloader._middleware)


class NotSent(IgnoreRequest):
    """A request that its slot had not sent as the crawl was stopped (or, rendered, that no
    browser could launch for: ``focused.render``): one of a frontier that outlives the process
    stays in flight there, to be fetched when the crawl goes on."""


class PoliteDownloader(Downloader):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        # In a shared crawl: the crawl-wide place at its host that each request under way holds.
        self._places: dict[Slot, dict[Request, str]] = {}
        # Slots held because their host is full crawl-wide, by that hold: a download of this
        # process ending there gives a place back, and the slot looks again at once.
        self._full: dict[Slot, CallLaterResult] = {}
        self._next_full_wait: dict[Slot, float] = {}  # of slots found full at their last look
        # Places last as long as a silent process counts as alive, renewed while this one lives.
        self._place_life = crawler.settings.getfloat("FOCUSED_WORKER_TIMEOUT")
        self._renewal: AsyncioLoopingCall | LoopingCall | None = None
        self._stopping = False  # the crawl is closing: nothing waiting in a slot is sent any more
        self._not_sent = 0  # the crawl's requests so ended (not its robots.txt)
        self._not_sent_for_robots = 0  # of them, those that waited for their host's robots.txt
        self._not_rendered = 0  # of them, those no browser launched for (focused.render)
        # The slots whose delay runs from the end of a download (by key), and the downloads under
        # way in each, whose end starts the delay.
        self.paced_from_end: set[str] = set()
        self._on_wire: dict[Slot, set[Request]] = {}
        jobdir = crawler.settings.get("JOBDIR")
        self._paused_hosts = Path(jobdir, PAUSED_HOSTS_FILE) if jobdir else None
        # The monotonic time before which each host (slot key) the paused run sent to last gets
        # nothing; taken as its slot is made.
        self._held_since_pause = self._read_paused_hosts()
        # focused.robots' middleware (none with ROBOTSTXT_OBEY off), which paces the slot of a
        # host whose robots.txt asks for a Crawl-delay.
        self._robots = self._middleware(RobotsTxtMiddleware)
        self._holds_saver: AsyncioLoopingCall | LoopingCall | None = None
        self._holds_written = False  # the last write while running held a host
        # focused.retryafter's middleware (none with RETRY_AFTER_MAX 0), whose pauses a JOBDIR
        # pause keeps.
        self._pauses = self._middleware(RetryAfterMiddleware)
        crawler.signals.connect(self._engine_started, signal=signals.engine_started)

    def _middleware(self, kind: type[_M]) -> _M | None:
        """This downloader's middleware of class ``kind``, None without it: what
        ``Crawler.get_downloader_middleware`` gives, which the engine, not made yet, cannot."""
        return next((mw for mw in self.middleware.middlewares if isinstance(mw, kind)), None)

    def _engine_started(self) -> None:
        # Scrapy says nothing as its engine starts to close, and only closes the downloader once
        # every request handed out has ended: its close is wrapped to learn it first.
        engine = self.crawler.engine
        close = engine.close_spider_async

        async def close_spider_async(*, reason: str = "cancelled") -> None:
            # Any stop (Ctrl-C, a time limit, enough relevant pages) but the page budget's, which
            # counted what it handed out (a shared crawl with its pops) and sends it.
            if reason != "closespider_pagecount":
                self._stopping = True
                for slot in list(self.slots.values()):
                    self._unsend(slot)
            await close(reason=reason)

        engine.close_spider_async = close_spider_async
        if self._paused_hosts is not None:
            self._holds_saver = create_looping_call(self._save_holds_for_a_crash)
            self._holds_saver.start(HOLDS_SAVED_EVERY, now=False)

    @property
    def stopping(self) -> bool:
        """Whether the crawl is closing, and sends nothing that waits in a slot any more."""
        return self._stopping

    def _unsend(self, slot: Slot) -> None:
        """Ends every request waiting in the slot with ``NotSent``. A robots.txt (held by a
        pause this run took over) is not counted: the pages waiting for it reach their slot
        after, and end there. A ``HEAD_CHECK`` HEAD counts for its page, which ends with it
        (``focused.hygiene.HeadCheckMiddleware``)."""
        waiting = list(slot.queue)
        slot.queue.clear()
        for _, queue_dfd in waiting:
            queue_dfd.errback(Failure(NotSent()))
        if unsent := [request for request, _ in waiting if not is_robots_txt(request)]:
            self._not_sent += len(unsent)
            # Popped: a request kept in the frontier goes back with its meta.
            self._not_sent_for_robots += sum(
                r.meta.pop(STOPPED_WAITING_META, False) for r in unsent
            )
            self.crawler.stats.inc_value("focused/closing/not_sent", len(unsent))

    def not_rendered(self) -> None:
        """A request ended with ``NotSent`` as no browser could launch to render it
        (``focused.render``): said with those not sent, else a crawl without a frontier kept
        dropped its pages (its seed) without a word."""
        self._not_sent += 1
        self._not_rendered += 1
        self.crawler.stats.inc_value("focused/closing/not_sent")

    def _read_paused_hosts(self) -> dict[str, float]:
        """The holds the paused (or killed) run left (``PAUSED_HOSTS_FILE``), each at most as
        long as it was then; none from a file that cannot be read."""
        if self._paused_hosts is None:
            return {}
        try:
            saved = load_json(self._paused_hosts.read_bytes())
        except (OSError, ValueError):  # JSONTooDeep too, where json.loads raised RecursionError
            return {}
        now, wall = monotonic(), time()
        holds = {}
        for key, hold in saved.items() if isinstance(saved, dict) else ():
            with suppress(TypeError, ValueError):
                until, seconds = (float(value) for value in hold)
                if until > wall:
                    holds[key] = now + min(until - wall, seconds)
        return holds

    def _holds(self, sent_within: float = 0.0) -> dict[str, list[float]]:
        """When each host may next be sent a request, for the run that resumes the crawl: its
        slot's last request (the end of its download, if paced so) and its delay or pause, or
        the hold this run was given, if it ends later; as ``PAUSED_HOSTS_FILE`` keeps them. A
        delayed host may be sent one within ``sent_within`` seconds from now, unseen by a run
        killed before its next write: held its delay past that. Not only one with requests
        under way: an idle one is sent a request that reaches it past its delay at once."""
        now, wall = monotonic(), time()
        ends = dict(self._held_since_pause)
        for key, slot in self.slots.items():
            end = slot.lastseen + slot.delay
            if sent_within and slot.delay:
                end = max(end, now + sent_within + slot.delay)
            ends[key] = max(ends.get(key, 0.0), end)
        if self._pauses is not None:
            # A Retry-After pause stretches its slot's last send over it, less the delay: a delay
            # lowered meanwhile (a Crawl-delay read again, AutoThrottle) cut it short.
            for key, until in self._pauses.paused_until.items():
                ends[key] = max(ends.get(key, 0.0), until)
        return {key: [wall + end - now, end - now] for key, end in ends.items() if end > now}

    def _write_holds(self, path: Path, holds: dict[str, list[float]]) -> None:
        write_whole(
            path,
            path.with_name(PAUSED_HOSTS_TEMP_FILE),
            lambda file: file.write(json.dumps(holds).encode()),
        )

    def _save_paused_hosts(self, path: Path) -> None:
        """Write the hosts' holds as the crawl closes, every download ended: exact."""
        holds = self._holds()
        jobdir_writes(self.crawler).save_at_pause(
            "when each host may next be sent a request",
            path,
            lambda: self._write_holds(path, holds),
        )

    def _save_holds_for_a_crash(self) -> None:
        """Write the hosts' holds while the crawl runs, for a resume after ``kill -9``; once
        none is held, once more (the last may run past the end of the host's hold), then not
        until one is."""
        writes = jobdir_writes(self.crawler)
        holds = self._holds(sent_within=HOLDS_SAVED_EVERY)
        if not (holds or self._holds_written) or writes.failure is not None:
            return
        try:
            self._write_holds(self._paused_hosts, holds)
        except OSError as exc:
            writes.failed(self._paused_hosts, exc)  # the crawl stops, as at any JOBDIR write
            return
        self._holds_written = bool(holds)

    def _get_slot(self, request: Request) -> tuple[str, Slot]:  # type: ignore[override]
        if self._robots is not None:
            # Before Scrapy makes the slot, which takes its Crawl-delay from per_slot_settings.
            self._robots.pace_slot(self.get_slot_key(request), request)
        key, slot = super()._get_slot(request)
        until = self._held_since_pause.get(key) if self._held_since_pause else None
        if until is not None:
            wait = until - monotonic()
            if wait <= 0:
                del self._held_since_pause[key]
            elif slot.latercall is None:
                # Its first request of this run: held as a Retry-After pause holds a slot
                # (focused.retryafter). Kept until it ends, for a pause before then.
                slot.latercall = call_later(wait, self._latercall, slot)
        return key, slot

    def _slot_gc(self, age: float = 60) -> None:
        # Scrapy's, but a slot held by a pause (focused.retryafter's, or the resumed crawl's
        # hold) is kept until the pause ends: dropped, the hold went with it (Slot.close cancels
        # it), and the host's next request, in a new slot, went at once. Scrapy keeps an idle
        # slot a minute past its last send and its delay, which focused.retryafter stretches
        # over the pause, but a delay lowered meanwhile (a Crawl-delay read again) cut it short.
        mintime = monotonic() - age
        for key, slot in list(self.slots.items()):
            if not slot.active and slot.latercall is None and slot.lastseen + slot.delay <= mintime:
                self.slots.pop(key).close()
        if self._robots is not None:
            self._robots.forget_dropped_slots()
        if self._pauses is not None:
            self._pauses.forget_dropped_slots()
        self._forget_closed_connections()

    def _forget_closed_connections(self) -> None:
        # Twisted's connection pool, which Scrapy's HTTP/1.1 handler (and scrapy-playwright's, for
        # what it does not render) keeps per scheme, holds a connection the server closed until
        # its own timeout (240 s), and the (scheme, host, port) key of every host it ever pooled
        # a connection for, its list empty, for the rest of the crawl: some 190 bytes a host
        # met (BENCHMARKS.md, session 59). Both go here, with the idle slots.
        for handler in getattr(self.handlers, "_handlers", {}).values():
            pool = getattr(handler, "_pool", None)
            # Scrapy's HTTP/2 handler has a pool of its own (a connection a host, not a list),
            # which drops each connection as it is lost.
            if not isinstance(pool, HTTPConnectionPool) or not pool._connections:
                continue
            pooled = pool._connections
            for key, connections in list(pooled.items()):
                for connection in [c for c in connections if c.state == "CONNECTION_LOST"]:
                    # Its timeout cancelled, as Twisted's getConnection does: _removeConnection
                    # is that timeout's call and leaves it set, to fire 240 s on and fail with a
                    # traceback (its key gone, or the connection not in its list).
                    pool._timeouts.pop(connection).cancel()
                    connections.remove(connection)
                if not connections:
                    del pooled[key]

    def get_slot_key(self, request: Request) -> str:
        key = super().get_slot_key(request)
        # With CONCURRENT_REQUESTS_PER_IP Scrapy keys a slot by its host's cached address, and
        # the resolver that answers IPv6 too (TWISTED_DNS_RESOLVER) caches a list of addresses:
        # no key. The first, as the IPv4-only resolver's one address was.
        return key[0].host if isinstance(key, list) else key

    async def _enqueue_request(self, request: Request) -> Response:
        # DNSCACHE_ENABLED off (a cache of none): Scrapy keys by name throughout.
        if self.ip_concurrency and dnscache.limit != 0 and self.DOWNLOAD_SLOT not in request.meta:
            host = urlparse_cached(request).hostname
            if host and host not in dnscache:
                from twisted.internet import reactor  # the installed one

                # Fills the cache that get_slot_key reads; a host that cannot be looked up
                # fails in its download, counted and said there as before.
                with suppress(Exception):
                    await maybe_deferred_to_future(reactor.resolve(host))
        return await super()._enqueue_request(request)

    def _wait_for_download(
        self, slot: Slot, request: Request, queue_dfd: Deferred
    ) -> Coroutine[Any, Any, None]:
        # Called as the slot lets the request go, before the task that downloads it is started:
        # counted now, the next request reaching the slot in this turn finds one place fewer.
        # Scrapy's _download adds it again (a set) and removes it when the download ends.
        slot.transferring.add(request)
        if self._paced_from_end(request.meta.get(self.DOWNLOAD_SLOT), slot):
            self._on_wire.setdefault(slot, set()).add(request)
        return super()._wait_for_download(slot, request, queue_dfd)

    def _paced_from_end(self, key: str | None, slot: Slot) -> bool:
        return slot.concurrency == 1 and key in self.paced_from_end

    def robots_txt_ended(self, key: str) -> None:
        """The host's robots.txt, downloaded through slot ``key`` before its Crawl-delay was
        known, has just ended: the delay runs from now, as from the end of any download of the
        host (else its first page followed it by the delay less the robots.txt's download
        time, and in a shared crawl another process's at once)."""
        slot = self.slots.get(key)
        if slot is not None and self._paced_from_end(key, slot):
            self._delay_from_now(key, slot)

    def _download_ended(self, slot: Slot) -> None:
        """If a download of a slot paced from the end of its downloads just ended (Scrapy's
        _download calls _process_queue as each ends), the slot's delay runs from now."""
        on_wire = self._on_wire.get(slot)
        if not on_wire or on_wire <= slot.transferring:
            return
        key = next(iter(on_wire - slot.transferring)).meta[self.DOWNLOAD_SLOT]
        on_wire &= slot.transferring
        if not on_wire:
            del self._on_wire[slot]
        self._delay_from_now(key, slot)

    def _delay_from_now(self, key: str, slot: Slot) -> None:
        slot.lastseen = max(slot.lastseen, monotonic())
        if (shared := getattr(self.crawler.spider, "shared", None)) is not None:
            shared.pause(key, slot.delay)  # no process of the crawl sends to the host before

    def _process_queue(self, slot: Slot) -> None:
        if self._stopping:
            self._unsend(slot)  # one reaching its slot late (its robots.txt read meanwhile)
        self._download_ended(slot)
        shared = getattr(self.crawler.spider, "shared", None)
        if shared is None:
            super()._process_queue(slot)  # one process
            return
        ended = self._ended(slot)
        if slot.latercall is None:
            self._full.pop(slot, None)
        elif ended and self._full.get(slot) is slot.latercall:
            slot.latercall.cancel()
            slot.latercall = None
            del self._full[slot]
        if slot.latercall or not slot.queue or slot.free_transfer_slots() <= 0:
            self._release(shared, ended)
            super()._process_queue(slot)  # nothing to send now
            return
        # Drawn once: Scrapy draws a jittered delay at each look, and the lease must last the
        # delay the send below is spaced by.
        delay = slot.download_delay()
        wait = delay - (monotonic() - slot.lastseen)  # this process's own delay comes first
        if wait > 0:
            self._release(shared, ended)
            slot.latercall = call_later(wait, self._latercall, slot)
            return
        # A delayed slot sends one request per lease; the look after it holds the slot for the
        # delay before the next.
        wanted = 1 if delay else min(len(slot.queue), slot.free_transfer_slots())
        lease = shared.lease(
            slot.queue[0][0].meta[self.DOWNLOAD_SLOT],  # set as the request reached the slot
            delay,
            wanted,
            slot.concurrency,
            self._place_life,
            list(ended.values()),
        )
        if lease.wait > 0:
            slot.latercall = call_later(lease.wait, self._latercall, slot)
            return
        if lease.places:
            slot.lastseen = monotonic()
            self._next_full_wait.pop(slot, None)
            held = self._places.setdefault(slot, {})
            for place in lease.places:
                request, queue_dfd = slot.queue.popleft()
                _schedule_coro(self._wait_for_download(slot, request, queue_dfd))
                held[request] = place
            if self._renewal is None:
                self._renewal = create_looping_call(self._renew, shared)
                self._renewal.start(self._place_life / 4, now=False)
        if delay and lease.places:
            self._process_queue(slot)  # holds the slot for the delay before the next
        elif len(lease.places) < wanted:
            # The other processes have the host's concurrency under way, and none of them tells
            # this one when a place comes back: it looks again shortly.
            wait = self._next_full_wait.get(slot, FULL_HOST_FIRST_WAIT)
            self._next_full_wait[slot] = min(2 * wait, FULL_HOST_WAIT)
            slot.latercall = call_later(wait, self._latercall, slot)
            self._full[slot] = slot.latercall

    def _ended(self, slot: Slot) -> dict[Request, str]:
        """The places of the slot's requests whose download ended, no longer held. Scrapy's
        _download calls _process_queue as each download ends, success, failure or cancel, right
        after it left ``slot.transferring``."""
        held = self._places.get(slot)
        if not held:
            return {}
        ended = {
            request: place for request, place in held.items() if request not in slot.transferring
        }
        for request in ended:
            del held[request]
        if not held:
            del self._places[slot]
        return ended

    def _renew(self, shared: SharedCrawl) -> None:
        held = {
            next(iter(places)).meta[self.DOWNLOAD_SLOT]: list(places.values())
            for places in self._places.values()
        }
        if held:
            shared.renew(held, self._place_life)

    def close(self) -> None:
        if self._renewal is not None:
            self._renewal.stop()
            self._renewal = None
        if self._holds_saver is not None and self._holds_saver.running:
            self._holds_saver.stop()
        super().close()
        if self._not_sent:  # said once every request has ended: the late ones counted too
            kept = self._paused_hosts is not None or getattr(self.crawler.spider, "shared", None)
            # Those that waited for their host's robots.txt (which another process of a shared
            # crawl may have been downloading) waited for no delay, pause or connection.
            for_robots, not_rendered = self._not_sent_for_robots, self._not_rendered
            waited = []
            if in_slot := self._not_sent - for_robots - not_rendered:
                waited.append(
                    f"{counted(in_slot, 'request')} waiting in their host's download slot (for"
                    " its delay, a pause or a free connection)"
                )
            if for_robots:
                waited.append(
                    f"{counted(for_robots, 'request')} waiting for their host's robots.txt"
                )
            if not_rendered:
                waited.append(f"{counted(not_rendered, 'request')} no browser launched to render")
            logger.info(
                "Not sent as the crawl stopped: %s; %s",
                ", ".join(waited),
                "in flight in the frontier still, fetched when it goes on"
                if kept
                else "dropped with the frontier, which a crawl without JOBDIR does not keep",
            )
        if self._paused_hosts is not None:  # every download has ended: the last are known
            self._save_paused_hosts(self._paused_hosts)

    def _release(self, shared: SharedCrawl, ended: dict[Request, str]) -> None:
        if ended:
            shared.release(next(iter(ended)).meta[self.DOWNLOAD_SLOT], list(ended.values()))
