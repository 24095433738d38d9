"""Many crawler processes, on one machine or many, sharing one crawl through Redis.

With ``-s FOCUSED_FRONTIER=redis://host:port/db`` and the same ``-a crawl_id=`` every
``scrapy crawl topical`` process joins the same crawl:

- ``SharedCrawl`` (``spider.shared``) holds the connection, the crawl's key names, its
  counters (fetch order, relevant pages, discovery order) and this process's worker id;
- ``schedulers.redis_frontier.RedisFrontier`` is the frontier, ``RedisDupeFilter`` the seen set
  (scrapy-redis's, keyed by crawl id and kept when a process closes);
- ``FrontierAck`` marks a popped request done once its page and links are queued and stored,
  or once it failed;
- ``DistributedCrawl`` beats a heartbeat, re-queues the requests of dead workers, keeps an idle
  process waiting while others may still add links, and closes it when the crawl is done.

The page budget (``CLOSESPIDER_PAGECOUNT``) is the crawl's total: a request takes a slot when it
is popped, atomically, so the processes together never fetch more (a retry or redirect takes
another slot). So are the pages per host (``MAX_PAGES_PER_HOST``, hash ``host_pages``), the trap
cap and query variants (``focused.traps.SharedCounts``), all taken with ``SharedCrawl.take`` and
given back with ``SharedCrawl.give_back``, and the duplicate checks
(``focused.dedup.SharedFetched``, ``focused.simhash.SharedSimHashIndex``), all through
``SharedCrawl.run``. So is a host's delay (``DOWNLOAD_DELAY``, a robots.txt Crawl-delay,
AutoThrottle's): before a delayed slot sends, ``focused.downloader.PoliteDownloader`` takes the
host's lease (``SharedCrawl.lease``, key ``polite:<slot>``, set if absent, expiring after the
delay) or waits for it, and a Retry-After pause is set on the same key (``SharedCrawl.pause``)
for every process to wait out. So is a host's concurrency (``CONCURRENT_REQUESTS_PER_DOMAIN``,
``_PER_IP``, ``DOWNLOAD_SLOTS``): in the same call each request takes one of the host's places
(key ``conc:<slot>``), given back as its download ends. So is a host's robots.txt: one process
downloads it and the others read what it read (``SharedCrawl.robots_txt``, key
``robots:<netloc>``). ``HOST_WINDOW`` stays per process.

Settings:
    FOCUSED_FRONTIER        Redis URL of the shared frontier; unset = one process (default None)
    FOCUSED_WORKER_TIMEOUT  seconds without a heartbeat after which a process counts as dead and
                            its popped requests go back to the frontier (default 10)

If Redis cannot be reached at start the crawl does not start (one line, exit 2); if it is lost
during the crawl the process logs one error and closes with reason ``frontier_unreachable``.
What was popped and not finished stays in Redis, so a restart resumes without losing it. So it
closes when Redis answers again without the crawl's keys (restarted without its data, flushed):
crawling on would start the crawl over from nothing.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import re
import socket
import ssl
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar
from urllib.parse import parse_qs, urlsplit

import redis
from scrapy import signals
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.utils.defer import deferred_from_coro
from scrapy_redis.dupefilter import RFPDupeFilter
from twisted.internet import task

from focused.downloader import NotSent
from focused.engine import wake_engine
from focused.errors import ConfigError, counted, cut, load_json, one_line, quoted, redact_uri
from focused.jobchecks import as_saved_now, describe_language, is_crawl_order
from focused.render import RENDER_AGAIN_META
from focused.report import describe_params
from focused.resume import connect_request_done, is_topic_record
from focused.robots import ROBOTS_TXT_LIFE
from focused.stopping import FRONTIER_UNREACHABLE
from schedulers.redis_frontier import INFLIGHT_META

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred

    from schedulers.redis_frontier import RedisFrontier

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
REDIS_SCHEMES = ("redis", "rediss", "unix")
SOCKET_TIMEOUT = 5.0  # seconds: a hung server stalls the reactor at most this long per call
TICK = 0.5  # seconds between heartbeats, and between looks at the frontier while idle
CONC_KEYS = ("conc", "conc-waiting", "conc-asked")  # a host's places, its waiting processes


def connect(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url, socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=SOCKET_TIMEOUT
    )


def check_frontier(
    url: str, crawl_id: str, order: Mapping[str, Any], budget: int, timeout: float
) -> BudgetMarks:
    """Raise ConfigError (one line) if ``url`` is not a Redis URL, the server does not answer
    or cannot hold a crawl (``_unfit``), or the crawl ``crawl_id`` on it orders its frontier
    otherwise than this process would: another strategy, other parameters or another topic.
    The first process records its order; every process of a shared crawl must score alike, or
    the frontier mixes orders. Its page budget (``budget``) must be the one the live processes
    run with, and not spent (``_check_budget``; ``timeout``: FOCUSED_WORKER_TIMEOUT). A crawl
    whose keys are there without its order lost them (Redis restarted without its data while a
    process ran, which wrote some again) and is refused. Returns the page budget marks it
    wrote, for a start refused later to put back (``take_back_budget``)."""
    shown = check_url(url)
    described = json.dumps(order, sort_keys=True)
    keys = (crawl_prefix(crawl_id) + "order", crawl_prefix(crawl_id) + "seen")

    def record_order(client: redis.Redis) -> tuple[str | None, bytes | None]:
        unfit = _unfit(client)
        # A server refused records nothing.
        return unfit, None if unfit else client.eval(RECORD_ORDER, len(keys), *keys, described)

    unfit, recorded = asked(url, record_order)
    if unfit:
        raise ConfigError(f"the Redis frontier at {cut(shown)} {unfit}")
    if recorded is None:
        raise ConfigError(
            f"crawl {crawl_id} on {shown} has keys but not its order: Redis lost the crawl "
            "(restarted without its data, or flushed, while a process ran), which cannot go on; "
            "give another crawl_id"
        )
    if recorded != described.encode():
        try:
            theirs = load_json(recorded)
        except ValueError:  # also text that is not UTF-8
            theirs = None
        if not is_crawl_order(theirs):
            held = quoted(recorded.decode(errors="replace"))
            raise ConfigError(
                f"crawl {crawl_id} on {shown} has an order no process of this crawler recorded "
                f"(key {crawl_prefix(crawl_id)}order: {held}), which it cannot be compared "
                "with; give another crawl_id"
            )
        _check_same_order(crawl_id, shown, as_saved_now(theirs, order), order)
    return _check_budget(url, crawl_id, shown, budget, timeout)


# The options of a rediss:// URL that name a file (or, ssl_ca_path, a folder) of TLS keys.
TLS_FILE_OPTIONS = ("ssl_ca_certs", "ssl_ca_path", "ssl_certfile", "ssl_keyfile")


def check_url(url: str) -> str:
    """``url`` as messages show it (no password); ConfigError (one line) if it is no Redis URL
    redis-py reads as it reads."""
    shown = redact_uri(url)  # a redis:// URL may hold a password
    scheme, _, rest = url.partition("://")
    if scheme not in REDIS_SCHEMES:
        raise ConfigError(f"setting FOCUSED_FRONTIER={quoted(shown)} is not a redis:// URL")
    # redis-py reads a database that is no number (redis://host/frontier) as database 0.
    database = urlsplit(f"//{rest}").path.strip("/") if scheme != "unix" else ""
    if database and not database.isdigit():
        raise ConfigError(
            f"setting FOCUSED_FRONTIER={quoted(shown)}: its database {quoted(database)} is no "
            "number (redis://host:6379/0)"
        )
    try:
        client = connect(url)  # parses it (a port that is no number), connects to nothing
        # redis-py hands the URL's other options (?ssl_cert_reqs= in a redis:// URL, which only
        # rediss:// takes; ?timeout=) to each connection it makes: a TypeError there was a
        # traceback at the first command. Made here, a connection connects to nothing either.
        client.connection_pool.make_connection()
        client.close()
    except ValueError as exc:
        raise ConfigError(f"setting FOCUSED_FRONTIER={quoted(shown)}: {one_line(exc)}") from None
    except TypeError as exc:
        raise ConfigError(
            f"setting FOCUSED_FRONTIER={quoted(shown)} has an option redis-py does not take in a"
            f" {scheme}:// URL ({one_line(exc)})"
        ) from None
    # redis-py reads the TLS files a rediss:// URL names only as it connects, and one missing
    # was "Error 2 connecting to HOST:PORT. No such file or directory.", as if of the server.
    options = client.connection_pool.connection_kwargs
    for option in TLS_FILE_OPTIONS:
        if (path := options.get(option)) is not None:
            try:
                os.stat(path)
            except OSError as exc:
                raise ConfigError(
                    f"setting FOCUSED_FRONTIER={quoted(shown)}: its {option} {quoted(path)}"
                    f" cannot be read: {exc.strerror}"
                ) from None
    try:
        _load_tls_files(options)
    except ssl.SSLError as exc:  # a file that holds no certificate or key, say
        raise ConfigError(
            f"setting FOCUSED_FRONTIER={quoted(shown)}: its TLS files cannot be used: {exc}"
        ) from None
    return shown


def _load_tls_files(options: Mapping[str, Any]) -> None:
    """Load the TLS files of a rediss:// URL as redis-py does as it connects: one it cannot use
    was an error of connecting, exit status 1, as if the server did not answer."""
    if not any(options.get(option) for option in TLS_FILE_OPTIONS):
        return
    context = ssl.create_default_context()
    if options.get("ssl_certfile"):
        # No password given: an empty one rather than OpenSSL asking for it on the terminal.
        password = options.get("ssl_password") or (lambda: b"")
        context.load_cert_chain(options["ssl_certfile"], options.get("ssl_keyfile"), password)
    if options.get("ssl_ca_certs") or options.get("ssl_ca_path"):
        context.load_verify_locations(options.get("ssl_ca_certs"), options.get("ssl_ca_path"))


def _check_same_order(
    crawl_id: str, shown: str, theirs: Mapping[str, Any], order: Mapping[str, Any]
) -> None:
    if theirs == order:
        return
    if theirs["topic"] != order["topic"]:
        difference = "another query or topic_file"
    elif theirs["language"] != order["language"]:
        difference = (
            f"its query with {describe_language(theirs['language'])}, this process "
            f"{describe_language(order['language'])}"
        )
    else:
        difference = f"strategy {_describe(theirs)}, this process {_describe(order)}"
    raise ConfigError(
        f"crawl {crawl_id} on {shown} runs {difference}: give every process of a shared crawl "
        "the same strategy, parameters and query, or another crawl_id"
    )


def _check_budget(url: str, crawl_id: str, shown: str, budget: int, timeout: float) -> BudgetMarks:
    """Record this process's page budget as the crawl's, unless a live process of the crawl
    runs another, or the budget is spent; both in one step (``RECORD_BUDGET``). Returns the
    marks it wrote, and those before them.

    Another budget: it is counted in each process's pops from Redis, so a process with a
    larger one, or none, took the crawl past the budget the others keep. Once none is alive
    (their heartbeats older than ``timeout``), a new budget is the crawl's: a finished crawl
    goes on to a larger one, as a JOBDIR crawl does. A process that recorded its budget less
    than ``timeout`` ago and does not beat yet (it beats once its spider opens) counts as
    live.

    Spent: the crawl has handed out its whole page budget, none of it under way (a request
    under way, even of a dead process, may give its slot back). Such a process closed at once,
    saying nothing of why, rewrote the crawl record's times and, with WARC_DIR, left a WARC file
    of no page. The crawl's budget is the live processes' where they run another: a process
    with a smaller one than theirs was told the crawl had spent its own, when the crawl had
    not and the budget was the thing to change."""
    prefix = crawl_prefix(crawl_id)
    keys = tuple(prefix + name for name in ("budget", "workers", "budget_at", "popped"))
    args = (RECORD_BUDGET, len(keys), *keys, budget, timeout, prefix + "inflight:")
    theirs, spent, *marks = asked(url, lambda client: client.eval(*args))
    if theirs:
        described = {0: "no page budget"}.get(budget, f"a page budget of {budget}")
        runs = (
            f"crawl {crawl_id} runs with CLOSESPIDER_PAGECOUNT={int(theirs)} in other processes"
            f" (or one starting), this one with {described}"
        )
        if spent:
            raise ConfigError(
                f"{runs}, and has spent its page budget: once those have closed, give every"
                " process a larger CLOSESPIDER_PAGECOUNT to go on"
            )
        raise ConfigError(f"{runs}: give every process of a shared crawl the same budget")
    if spent:
        raise ConfigError(
            f"crawl {crawl_id} on {shown} has spent its page budget (CLOSESPIDER_PAGECOUNT="
            f"{budget}): give every process a larger CLOSESPIDER_PAGECOUNT to go on"
        )
    mark, budget_before, mark_before = marks
    return BudgetMarks(url, crawl_id, mark, budget_before, mark_before, math.ceil(timeout))


class BudgetMarks(NamedTuple):
    """The page budget marks a process wrote as it started (``_check_budget``)."""

    url: str  # the frontier's
    crawl_id: str
    mark: bytes  # the one it left at budget_at: the time to the microsecond
    budget_before: bytes  # budget and budget_at before it (b'' for none)
    mark_before: bytes
    lasts: int  # how long a mark counts: FOCUSED_WORKER_TIMEOUT, whole seconds


def take_back_budget(marks: BudgetMarks) -> None:
    """Put back the page budget marks this process wrote (``_check_budget``), as they were
    before it: its start was refused by a later check. Left, they said for
    FOCUSED_WORKER_TIMEOUT seconds that a process ran with its budget, when none did, and a
    process with another was refused. Only if no process recorded its own since (one step,
    ``TAKE_BACK_BUDGET``)."""
    names = ("budget", "budget_at", "budget_at_taken_back")
    keys = tuple(crawl_prefix(marks.crawl_id) + name for name in names)
    args = (TAKE_BACK_BUDGET, len(keys), *keys, *marks[2:])
    asked(marks.url, lambda client: client.eval(*args))


class FrontierState(NamedTuple):
    """What the Redis frontier of a crawl says at start-up of the pages fetched."""

    pages: int  # the fetch order it gave last
    in_flight: int  # requests popped by its processes and not finished: fetched again


def frontier_state(url: str, crawl_id: str) -> FrontierState | None:
    """What the Redis frontier at ``url`` holds of crawl ``crawl_id``, or None if it holds no
    such crawl: no seen set, which the crawl's seeds start and nothing empties (its order,
    ``check_frontier`` records before a process starts, even one refused). ConfigError (one
    line) if Redis does not answer."""
    prefix = crawl_prefix(crawl_id)
    keys = (prefix + "seen", prefix + "counters", prefix + "workers")
    args = (FRONTIER_STATE, len(keys), *keys, prefix + "inflight:")
    held, pages, in_flight = asked(url, lambda client: client.eval(*args))
    return FrontierState(pages, in_flight) if held else None


def asked(url: str, ask: Callable[[redis.Redis], _T]) -> _T:
    """What ``ask`` gets from the Redis at ``url``, on a connection of its own for the start-up
    checks and ``scrapy forget``; ConfigError (one line) if Redis does not answer."""
    try:
        client = connect(url)
        try:
            return ask(client)
        finally:
            client.close()
    except (redis.RedisError, ValueError) as exc:
        why = one_line(exc)
        if isinstance(exc, redis.AuthenticationError) and not _gives_password(url):
            # redis-py's words for it name its HELLO handshake, not the password missing.
            why = "it asks for a password: give it in the URL (redis://:PASSWORD@host:6379/0)"
        raise ConfigError(
            f"cannot reach the Redis frontier at {cut(redact_uri(url))}: {why}"
        ) from None


def _gives_password(url: str) -> bool:
    """Whether a Redis URL gives a password, in its address or as ``?password=``."""
    parts = urlsplit(url)
    return bool(parts.password) or "password" in parse_qs(parts.query)


def _unfit(client: redis.Redis) -> str | None:
    """Why a shared crawl cannot run on this server, or None (also if INFO is denied: a
    managed Redis may rename it).

    - A maxmemory-policy that evicts any key when full (``allkeys-lru``...): a crawl on it
      loses queued requests, seen URLs and counters once Redis is full, silently. (A
      ``volatile-`` policy evicts only keys that expire: a host's lease, its robots.txt.)
    - A Redis Cluster node: the crawl's scripts take several of its keys at once, which a
      cluster refuses unless they hash to one slot (a traceback, or an error naming slots).
    """
    try:
        memory = client.info("memory")
    except redis.ResponseError:
        return None
    policy = str(memory.get("maxmemory_policy", ""))
    if memory.get("maxmemory") and policy.startswith("allkeys-"):
        return (
            f"evicts keys when full (maxmemory-policy {policy}), the crawl's frontier and seen "
            "set among them: set maxmemory-policy noeviction"
        )
    return CLUSTER_NODE if is_cluster_node(client) else None


CLUSTER_NODE = "is a Redis Cluster node: a shared crawl needs one Redis server, not a cluster"


def is_cluster_node(client: redis.Redis) -> bool:
    """Whether ``client``'s server is a Redis Cluster node (False if INFO is denied)."""
    try:
        return bool(client.info("cluster").get("cluster_enabled"))
    except redis.ResponseError:
        return False


def _describe(order: Mapping[str, Any]) -> str:
    params = describe_params(dict(sorted(order["params"].items())))
    return f"{order['strategy']} ({params})" if params else order["strategy"]


def crawl_prefix(crawl_id: str) -> str:
    """The prefix of a shared crawl's Redis keys; what follows it is one of ``KEY_NAMES``."""
    return f"focused:{crawl_id}:"


# Every key a shared crawl writes, after its prefix: a name added must be added here, or
# `scrapy forget` (focused.forget) leaves its keys behind. A crawl id may hold ":", so the keys
# of crawl "a:b" start with the prefix of crawl "a": only the names matched here are crawl a's
# (and none under the prefix of a crawl nested in it: focused.forget.crawl_keys).
KEY_NAMES = re.compile(
    rb"""(?xs)
    order | seen | budget | workers | counters | topic     # SharedCrawl, check_frontier
    | budget_at | budget_at_taken_back                     # _check_budget: a process starting
    | frontier | back | members | requests | seq | popped | paths  # RedisFrontier
    | left_out | left_out_past                             # RedisFrontier, links left out
    | host_pages | fetched | trap:queued | trap:variants   # the shared caps, duplicate checks
    | near:urls | near:\d+:[0-9a-f]+                       # SharedSimHashIndex
    | rank:links | rank:urls | rank:edges | rank:ranked_edges | rank:rekeyed  # SharedLinks
    | rank:ranked                                          # SharedLinks, before rank:edges
    | (?:inflight | polite | conc | conc-waiting | conc-asked | robots | robots-fetching):.+
    """
)


class Lease(NamedTuple):
    """What ``SharedCrawl.lease`` gave: seconds to wait before the host may be sent to, and the
    places taken at it."""

    wait: float
    places: list[str]


class SharedCrawl:
    """One crawl's state in Redis, seen from one process (a "worker")."""

    def __init__(
        self, crawler: Crawler, url: str, crawl_id: str, order_recorded: bool = False
    ) -> None:
        self.crawler = crawler
        self.location = redact_uri(url)  # the server, for messages: no password
        self.redis = connect(url)
        self.crawl_id = crawl_id
        self.prefix = crawl_prefix(crawl_id)
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.failed = False
        # The page budget is spent and other processes still have requests under way: this one
        # closes once they are done, which only a look at the frontier notices (DistributedCrawl).
        self.waiting_for_others = False
        # Each crawl-wide counter as Redis last gave it here; once Redis is lost, counted on by
        # this process from there: the pages still under way get fetch orders after the crawl's,
        # not again from 1, and the crawl record its pages as last known, not this process's.
        self._counts: Counter[str] = Counter()
        self.frontier: RedisFrontier  # set by the frontier itself, built by the scheduler
        self._closing: Deferred[None] | None = None
        self._topic_texts_seen = 0
        # The crawl's order is in Redis, seen there or recorded by this process's argument check
        # (check_frontier): gone later, Redis lost the crawl's keys (keys_kept).
        self._order_seen = order_recorded
        self._incr = self.redis.register_script(
            "return redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])"
        )
        self._take = self.redis.register_script(TAKE)
        self._give_back = self.redis.register_script(GIVE_BACK)
        self._lease = self.redis.register_script(LEASE)
        self._pause = self.redis.register_script(PAUSE)
        self._renew = self.redis.register_script(RENEW)
        self._robots_txt = self.redis.register_script(ROBOTS_TXT)
        self._share_robots_txt = self.redis.register_script(SHARE_ROBOTS_TXT)
        self._places = itertools.count()  # names this process's places at its hosts

    def key(self, name: str) -> str:
        return self.prefix + name

    def inflight_key(self, worker: str | None = None) -> str:
        return self.key(f"inflight:{worker or self.worker}")

    def run(self, call: Callable[..., _T], *args: Any, default: Any = None, **kwargs: Any) -> _T:
        """``call(*args, **kwargs)``; once Redis fails, ``default`` and the spider closes.

        After a failure nothing more is written, in particular no popped request is marked
        done, so that whatever this process was doing is redone after a restart.
        """
        if self.failed:
            return default
        try:
            return call(*args, **kwargs)
        except redis.RedisError as exc:
            self.lost(one_line(exc))
            return default

    def lost(self, why: str) -> None:
        """Redis is lost for this process: say why, write nothing more, close the spider."""
        self.failed = True
        logger.error(
            "Redis frontier at %s lost: %s; closing the spider (%s)",
            self.location,
            why,
            FRONTIER_UNREACHABLE,
        )
        self._close(FRONTIER_UNREACHABLE)

    def lose_keys(self) -> None:
        self.lost(
            f"the keys of crawl {self.crawl_id} are gone (Redis restarted without its data, or"
            " flushed, or evicting keys when full): the crawl cannot go on"
        )

    def keys_kept(self) -> bool:
        """False once the crawl's keys are gone from Redis: the order the crawl recorded before
        its first process started (``check_frontier``) was seen here, or recorded by this
        process's own argument check (``order_recorded``), and is there no more. Redis
        restarted without its data (or flushed, or evicting keys when full) answers on the same
        port, and a process that crawled on would start the crawl over from nothing, its seen
        set, page budget and fetch order gone (the page budget fetched twice, the crawl recorded
        as finished)."""
        recorded = bool(self.run(self.redis.exists, self.key("order"), default=True))
        if recorded:
            self._order_seen = True
        return recorded or not self._order_seen

    def incr(self, counter: str, amount: int = 1) -> int:
        """Add to a crawl-wide counter and return its new value; once Redis is lost (or found
        gone back in time, ``_counted``), its value last known here counted on, so that the
        pages still under way get numbers."""
        value = self.run(self._incr, keys=[self.key("counters")], args=[counter, amount])
        if value is None or not self._counted(counter, int(value) - amount):
            self._counts[counter] += amount
        else:
            self._counts[counter] = int(value)
        return self._counts[counter]

    def _counted(self, counter: str, value: int) -> bool:
        """Whether ``value``, what Redis holds of a crawl-wide counter, is at least its value
        last known here. Counters only grow: a smaller one is Redis gone back in time under
        the crawl (restarted from an older snapshot between two calls, a replica that lagged
        promoted), which kept its order (``keys_kept``), and a process that went on would give
        fetch orders again and fetch the pages since again. It stops as when Redis is lost."""
        known = self._counts[counter]
        if value >= known:
            return True
        if not self.keys_kept():  # a count from 0 again: flushed, not an older snapshot
            self.lose_keys()
            return False
        self.lost(
            f"the crawl-wide count {counter} of crawl {self.crawl_id} went back from {known} to"
            f" {value}: Redis lost writes (restarted from an older snapshot?), and the crawl"
            " cannot go on"
        )
        return False

    def take(self, hash_name: str, field: str, limit: int) -> bool:
        """Add one to ``field`` of the crawl's hash ``hash_name`` unless it is at ``limit``
        already; True if taken. Check and count are one step in Redis, so that processes
        taking the last slot at the same moment never pass the limit together. Once Redis is
        lost, False: the spider is closing."""
        taken = self.run(self._take, keys=[self.key(hash_name)], args=[field, limit], default=0)
        return taken > 0

    def give_back(self, hash_name: str, field: str) -> None:
        """Return a slot ``take`` gave: one less in ``field`` of the crawl's hash ``hash_name``,
        in one step, never below 0 (a count already at 0 stays there)."""
        self.run(self._give_back, keys=[self.key(hash_name)], args=[field])

    def lease(
        self,
        slot: str,
        delay: float,
        wanted: int = 0,
        concurrency: int = 0,
        expiry: float = 0,
        given_back: Sequence[str] = (),
    ) -> Lease:
        """Before sending to download slot ``slot`` (a host): give back the places
        ``given_back`` (downloads of this process that ended), then take the crawl's lease on
        the slot for ``delay`` seconds and up to ``wanted`` of its ``concurrency`` places, all
        in one Redis call.

        A place is one request of the whole crawl under way to the host (sorted set
        ``conc:<slot>``, scored by when it expires, ``expiry`` seconds from now unless ``renew``
        puts that off: a process that dies never gives its places back, and they lapse).
        ``Lease.places`` are those taken,
        each to be given back as its download ends (``given_back`` of the next call, or
        ``release``); none when the host has ``concurrency`` requests under way already. A
        process that found the host full waits in line (``conc-waiting:<slot>``): places coming
        free go first to those that found it full earlier, as long as they ask again within a
        second, so that none starves behind a process that always has a request for the host.
        ``Lease.wait`` is 0 if the host may be sent to, else the seconds until the lease or a
        pause of the host (``pause``) ends, in which no process sends to it and nothing is
        taken. With no ``delay`` no lease is taken, only a pause looked for. Once Redis is
        lost, no wait and every place wanted: what waits in the slot goes, as in one process,
        so that the closing spider is not kept waiting for it."""
        ms = max(1, round(delay * 1000)) if delay > 0 else 0
        places = [f"{self.worker}:{next(self._places)}" for _ in range(wanted)]
        keys = [self.polite_key(slot), *(self.key(f"{name}:{slot}") for name in CONC_KEYS)]
        args = [self.worker, ms, concurrency, round(expiry * 1000), len(given_back)]
        wait, taken = self.run(
            self._lease, keys=keys, args=[*args, *given_back, *places], default=(0, wanted)
        )
        return Lease(wait / 1000, places[:taken])

    def release(self, slot: str, places: Sequence[str]) -> None:
        """Give back places of download slot ``slot`` that ``lease`` took."""
        self.run(self.redis.zrem, self.key(f"conc:{slot}"), *places)

    def renew(self, places: Mapping[str, Sequence[str]], expiry: float) -> None:
        """The places ``lease`` took (by download slot) expire ``expiry`` seconds from now; a
        place that lapsed or was given back meanwhile is not taken again. One call for all."""
        keys = [self.key(f"conc:{slot}") for slot in places]
        args = [round(expiry * 1000)]
        for held in places.values():
            args += [len(held), *held]
        self.run(self._renew, keys=keys, args=args)

    def pause(self, slot: str, seconds: float) -> None:
        """No process of the crawl sends to download slot ``slot`` for ``seconds`` (a
        Retry-After), nor before a longer lease or pause already taken ends."""
        ms = max(1, round(seconds * 1000))
        self.run(self._pause, keys=[self.polite_key(slot)], args=[ms])

    def robots_txt(self, netloc: str) -> tuple[bytes | None, bool, float]:
        """What a process of the crawl read at ``netloc``'s robots.txt (``share_robots_txt``)
        and the seconds it is kept for yet, else None and whether this process is now the one
        to download it: no live process is downloading it (none is, or the one that was is
        silent for ``FOCUSED_WORKER_TIMEOUT`` or has left the crawl). Once Redis is lost,
        (None, True, 0): each process downloads."""
        keys = [self.key(f"robots:{netloc}"), self.key(f"robots-fetching:{netloc}")]
        timeout = self.crawler.settings.getfloat("FOCUSED_WORKER_TIMEOUT")
        args = [self.worker, timeout, ROBOTS_TXT_LIFE * 1000]
        outcome, ours, ms = self.run(
            self._robots_txt, keys=[*keys, self.key("workers")], args=args, default=(b"", 1, 0)
        )
        return outcome or None, bool(ours), max(0, ms) / 1000

    def share_robots_txt(self, netloc: str, outcome: bytes, life: float | None = None) -> None:
        """What this process read at ``netloc``'s robots.txt, for every process of the crawl,
        for ``life`` seconds (None: ``ROBOTS_TXT_LIFE``); with ``b""``, nothing to share: the
        download is left to the next process that asks."""
        keys = [self.key(f"robots:{netloc}"), self.key(f"robots-fetching:{netloc}")]
        ms = max(1, round(life * 1000)) if life is not None else ROBOTS_TXT_LIFE * 1000
        self.run(self._share_robots_txt, keys=keys, args=[outcome, ms])

    def polite_key(self, slot: str) -> str:
        return self.key(f"polite:{slot}")

    def counter(self, name: str) -> int:
        """A crawl-wide counter's value now; once Redis is lost, as ``incr`` counts on."""
        value = self.run(self.redis.hget, self.key("counters"), name)
        if value is not None and self._counted(name, int(value)):
            self._counts[name] = int(value)
        return self._counts[name]

    def other_workers(self) -> int:
        """How many other processes of the crawl are alive: their heartbeat is at most
        ``FOCUSED_WORKER_TIMEOUT`` old. Once Redis is lost, 0."""
        now = self.run(self.redis.time, default=(0, 0))[0]
        beats = self.run(self.redis.hgetall, self.key("workers"), default={})
        timeout = self.crawler.settings.getfloat("FOCUSED_WORKER_TIMEOUT")
        return sum(
            worker.decode() != self.worker and now - int(beat) <= timeout
            for worker, beat in beats.items()
        )

    def publish_topic_text(self, text: str, language: str | None) -> None:
        """A seed page joins the topic of every process of the crawl, not only this one's."""
        self.run(self.redis.rpush, self.key("topic"), json.dumps([text, language]))

    def new_topic_texts(self) -> list[tuple[str, str | None]]:
        """Topic texts published since the last call (by any process, this one included)."""
        fresh = self.run(self.redis.lrange, self.key("topic"), self._topic_texts_seen, -1)
        self._topic_texts_seen += len(fresh or ())
        texts = []
        for entry in fresh or ():
            try:
                record = load_json(entry)
            except ValueError:  # also text that is not UTF-8
                record = None
            if is_topic_record(record):
                texts.append((record[0], record[1]))
            else:  # no process wrote it: every process leaves it out, and scores alike
                held = quoted(entry.decode(errors="replace"))
                logger.warning(
                    "%s holds %s, no [text, language] record: left out", self.key("topic"), held
                )
        return texts

    def budget_spent(self) -> None:
        """The crawl's page budget is taken: finish what is under way, then close."""
        self._close("closespider_pagecount")

    def log_requeued(self, count: int, worker: str) -> None:
        logger.info("Re-queued %s of worker %s", counted(count, "unfinished request"), worker)

    def _close(self, reason: str) -> None:
        if self._closing is None and self.crawler.crawling:
            engine = self.crawler.engine
            self._closing = deferred_from_coro(engine.close_spider_async(reason=reason))


def shared_crawl(crawler: Crawler) -> SharedCrawl:
    shared = getattr(crawler.spider, "shared", None)
    if shared is None:
        raise NotConfigured  # FOCUSED_FRONTIER is not set (no message: no warning in the log)
    return shared


class RedisDupeFilter(RFPDupeFilter):
    """scrapy-redis's seen set, under the crawl's key, with Scrapy's request fingerprints.

    Unlike scrapy-redis's, closing leaves the set in place: the other processes still use it,
    and a restart resumes with it.
    """

    def __init__(self, shared: SharedCrawl, fingerprinter: Any, debug: bool = False) -> None:
        super().__init__(shared.redis, shared.key("seen"), debug)
        self.shared = shared
        self._fingerprinter = fingerprinter

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisDupeFilter:
        debug = crawler.settings.getbool("DUPEFILTER_DEBUG")
        return cls(shared_crawl(crawler), crawler.request_fingerprinter, debug)

    def request_fingerprint(self, request: Request) -> bytes:
        return self._fingerprinter.fingerprint(request)

    def request_seen(self, request: Request) -> bool:
        # Only a look: the frontier adds a URL to the seen set in the same script that queues
        # it (schedulers.redis_frontier.PUT), and until then it is seen if put here (buffered);
        # it remembers what it knows seen, so that a URL found again costs no round trip.
        return self.shared.frontier.seen(self.request_fingerprint(request))

    def seen(self, fingerprint: bytes) -> bool:
        """Whether the fingerprint is in the crawl's seen set (``RedisFrontier.seen``)."""
        return self.shared.frontier.seen(fingerprint)

    def close(self, reason: str = "") -> None:
        pass


class FrontierAck:
    """Marks each request popped from the shared frontier done, whatever its outcome.

    A request is done when its outcome is safe (``focused.resume.connect_request_done``, as for
    the JOBDIR scheduler): once its page has left the item pipelines, its links are in Redis
    (``FinishMiddleware`` hands them to the scheduler before the page, and Scrapy schedules a
    callback's output in its order). The end of the callback's output would be too early:
    Scrapy (2.13 and later) reads the output into a queue and schedules it from there, so a page
    could be marked done before its links were queued, and with Redis lost in between the links
    were lost for good. Done as well: a retry or redirect once its successor is queued (by the
    scheduler), and a request that ends without a response (this downloader
    middleware, outermost: order 10, sees the exception): a download that failed for good,
    robots.txt's refusal, an offsite drop. Such a request gives back the page-budget slot its
    pop took, as one process counts responses (``focused.stopping``): acked, a shared crawl
    with four seeds refused by robots.txt stored 16 pages of a budget of 20.
    """

    def __init__(self, shared: SharedCrawl) -> None:
        self.shared = shared

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierAck:
        middleware = cls(shared_crawl(crawler))
        crawler.signals.connect(middleware.request_scheduled, signal=signals.request_scheduled)
        connect_request_done(crawler, middleware._done)
        return middleware

    def _done(self, request: Request | None) -> None:
        member = request.meta.pop(INFLIGHT_META, None) if request is not None else None
        if member is not None:
            self.shared.frontier.ack(member)

    def _unpop(self, request: Request) -> None:
        """Done, and the budget slot its pop took given back (``RedisFrontier.unpop``)."""
        member = request.meta.pop(INFLIGHT_META, None)
        if member is not None:
            self.shared.frontier.unpop(member)

    def request_scheduled(self, request: Request, spider: Spider) -> None:
        # A page render=auto fetched plainly and sends back to be rendered: the plain response
        # is not the page and one process does not count it against the budget, so the slot
        # its pop took goes back (else each such page cost two, and the last one could be
        # fetched plainly, dropped, and never rendered).
        if request.meta.pop(RENDER_AGAIN_META, False):
            self._unpop(request)
        # A retry or redirect carries the member of the request it replaces: the scheduler acks
        # it once the successor is queued (FocusedScheduler._replaced_done).

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> None:
        # Not sent as this process closed: it stays in flight, and the scheduler's close gives
        # it back to the frontier (RedisFrontier.close).
        if not isinstance(exception, NotSent):
            self._unpop(request)


class DistributedCrawl:
    """Heartbeat, recovery of dead workers, and when a process of a shared crawl may close."""

    def __init__(self, crawler: Crawler, shared: SharedCrawl, timeout: float) -> None:
        self.crawler = crawler
        self.shared = shared
        self.timeout = timeout
        self._waiting = False  # idle, while other processes may still add links
        self._loop: task.LoopingCall | None = None
        self._pending = shared.redis.register_script(PENDING)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DistributedCrawl:
        shared = shared_crawl(crawler)
        extension = cls(crawler, shared, crawler.settings.getfloat("FOCUSED_WORKER_TIMEOUT"))
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self, spider: Spider) -> None:
        logger.info(
            "Worker %s joined crawl %s on %s",
            self.shared.worker,
            spider.crawl_id,
            self.shared.location,
        )
        self.tick()
        # Beating now: the mark of a process starting with the budget it recorded is no longer
        # needed (_check_budget), and left, it refused a new budget once the crawl ended.
        self.shared.run(self.shared.redis.delete, self.shared.key("budget_at"))
        self._loop = task.LoopingCall(self.tick)
        self._loop.start(TICK, now=False)

    def tick(self) -> None:
        """Heartbeat; re-queue the work of workers silent for longer than the timeout."""
        shared = self.shared
        if not shared.keys_kept():
            shared.lose_keys()
            return
        now = shared.run(shared.redis.time, default=(0, 0))[0]
        workers = shared.key("workers")
        shared.run(shared.redis.hset, workers, shared.worker, now)
        for worker, beat in (shared.run(shared.redis.hgetall, workers, default={})).items():
            name = worker.decode()
            if name != shared.worker and now - int(beat) > self.timeout:
                logger.warning(
                    "Worker %s is silent for %d s: taking its work", name, now - int(beat)
                )
                requeued = shared.frontier.requeue(name, silent_since=int(beat) + 1)
                if requeued:
                    shared.log_requeued(requeued, name)
        if self._waiting or shared.waiting_for_others:
            # The engine looks at the scheduler again only every 5 s when it has nothing under
            # way (idle, or the frontier queued but the budget spent): wake it up.
            wake_engine(self.crawler)

    def spider_idle(self, spider: Spider) -> None:
        shared = self.shared
        if shared.failed:
            return
        # Idle: nothing of ours is under way. Anything still in our in-flight set was missed
        # by FrontierAck; putting it back keeps the crawl from waiting on it forever.
        stray = shared.frontier.requeue(shared.worker)
        if stray:
            logger.warning(
                "%s never marked done; re-queued",
                counted(stray, "popped request was", "popped requests were"),
            )
        self.tick()
        args = [shared.key("inflight:")]
        keys = [shared.key("frontier"), shared.key("workers"), shared.key("back")]
        if shared.run(self._pending, keys=keys, args=args, default=0):
            self._waiting = True
            raise DontCloseSpider
        self._waiting = False

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        # The frontier left the crawl when the scheduler closed; a heartbeat since then must
        # not make this process look alive.
        self.shared.run(self.shared.redis.hdel, self.shared.key("workers"), self.shared.worker)


# The crawl's order as recorded, this process's recorded if none is, in one step; false if the
# crawl's seen set is there without its order: Redis lost the crawl's keys while a process ran,
# which wrote some again before it noticed (SharedCrawl.keys_kept). KEYS: order, seen. ARGV:
# this process's order.
RECORD_ORDER = """
local recorded = redis.call('GET', KEYS[1])
if recorded then return recorded end
if redis.call('EXISTS', KEYS[2]) == 1 then return false end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
"""

# Lua: the requests popped and not finished by every process of a crawl (its in-flight sets).
IN_FLIGHT = """
local function in_flight(workers, prefix)
  local n = 0
  for _, worker in ipairs(redis.call('HKEYS', workers)) do
    n = n + redis.call('ZCARD', prefix .. worker)
  end
  return n
end
"""

# Whether a crawl is held (its seen set), the fetch order it gave last and its requests in flight
# in all processes. KEYS: seen, counters, workers. ARGV: prefix of the in-flight keys.
FRONTIER_STATE = (
    IN_FLIGHT
    + """
local pages = tonumber(redis.call('HGET', KEYS[2], 'pages') or '0')
return {redis.call('EXISTS', KEYS[1]), pages, in_flight(KEYS[3], ARGV[1])}
"""
)

# This process's page budget recorded as the crawl's, unless a live process (its heartbeat at
# most ARGV[2] seconds old) runs with another, or one that recorded it as lately is starting
# (a process beats only once its spider opens, 0.2-0.3 s after this check, and clears the mark
# then: two started together with budgets 10 and 30 both ran), or the crawl's budget (theirs,
# else this one) is spent: the pages handed out reach it, none under way. Returns the other
# budget ('' for none) and 1 if spent; recorded, the mark it left (the time to the microsecond:
# its own, for TAKE_BACK_BUDGET) and the budget and mark before ('' for none). KEYS: budget,
# workers, when the budget was recorded by a process not beating yet, popped. ARGV: budget,
# timeout, prefix of the in-flight keys.
RECORD_BUDGET = (
    IN_FLIGHT
    + """
local recorded = redis.call('GET', KEYS[1])
local time = redis.call('TIME')
local now = tonumber(time[1])
local other = false
if recorded and recorded ~= ARGV[1] then
  other = now - tonumber(redis.call('GET', KEYS[3]) or '0') <= tonumber(ARGV[2])
  local beats = redis.call('HGETALL', KEYS[2])
  for i = 2, #beats, 2 do
    other = other or now - tonumber(beats[i]) <= tonumber(ARGV[2])
  end
end
local budget = tonumber(other and recorded or ARGV[1])
local popped = tonumber(redis.call('GET', KEYS[4]) or '0')
local spent = budget > 0 and popped >= budget and in_flight(KEYS[2], ARGV[3]) == 0
if other or spent then return {other and recorded or '', spent and 1 or 0} end
local mark = time[1] .. '.' .. string.format('%06d', tonumber(time[2]))
local before = redis.call('GET', KEYS[3])
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[3], mark)
return {'', 0, mark, recorded or '', before or ''}
"""
)

# The budget and its mark put back as they were before a process recorded them, if the mark is
# still its own (no process recorded since, nor one beating removed it). Not its own, what was
# before it is kept (KEYS[3], for as long as a mark counts): a later process put back holds its
# mark as its own before, and puts back what was before that, not a refused process's mark
# (two started together, refused in that order, left the first's budget live). KEYS: budget,
# its mark, the marks taken back under a later one. ARGV: the mark the process left, the budget
# and the mark before ('' for none), how long a mark counts (seconds).
TAKE_BACK_BUDGET = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[2] .. ' ' .. ARGV[3])
  redis.call('EXPIRE', KEYS[3], ARGV[4])
  return 0
end
local before = {ARGV[2], ARGV[3]}
for _ = 1, redis.call('HLEN', KEYS[3]) do
  local taken_back = before[2] ~= '' and redis.call('HGET', KEYS[3], before[2])
  if not taken_back then break end
  before = {string.match(taken_back, '^(%S*) (%S*)$')}
end
for i = 1, 2 do
  if before[i] == '' then redis.call('DEL', KEYS[i])
  else redis.call('SET', KEYS[i], before[i]) end
end
return 1
"""

# Take a slot of a hash field unless it is full, in one step. KEYS: the hash. ARGV: field, limit.
TAKE = """
local taken = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if taken >= tonumber(ARGV[2]) then return -1 end
return redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
"""

# Give a slot back, never below 0, in one step. KEYS: the hash. ARGV: field.
GIVE_BACK = """
if tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') <= 0 then return 0 end
return redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
"""

# The crawl-wide delay and concurrency of a download slot. KEYS: the slot's polite key, its
# places (sorted set: place -> ms at which it expires), its waiting processes (worker -> ms at
# which it first found the slot full, made later than the last in line's so that two in one ms
# keep their order), when each waiting process last asked (worker -> ms).
# ARGV: worker, delay in ms (0: none, only a Retry-After pause holds), concurrency, ms a place
# lasts, the number n of places given back, those n places, then the places wanted. Returns
# {ms to wait, places taken}: {0, 0} when the slot has its concurrency under way, or the places
# free go to processes that waited longer; the first places wanted are those taken. A waiting
# process asks again at least every 0.1 s (focused.downloader.FULL_HOST_WAIT): one that
# has not asked for 1 s (closed, dead) no longer waits.
LEASE = """
local back = tonumber(ARGV[5])
if back > 0 then redis.call('ZREM', KEYS[2], unpack(ARGV, 6, 5 + back)) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 and (ARGV[2] ~= '0' or redis.call('GET', KEYS[1]) == 'retry-after') then
  return {ttl, 0}
end
local wanted = #ARGV - 5 - back
local taken = 0
if wanted > 0 then
  local clock = redis.call('TIME')
  local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now - 1000)
  if #gone > 0 then
    redis.call('ZREM', KEYS[3], unpack(gone))
    redis.call('ZREM', KEYS[4], unpack(gone))
  end
  local since = redis.call('ZSCORE', KEYS[3], ARGV[1])
  local ahead = since and redis.call('ZCOUNT', KEYS[3], '-inf', '(' .. since)
    or redis.call('ZCARD', KEYS[3])
  local free = tonumber(ARGV[3]) - redis.call('ZCARD', KEYS[2]) - ahead
  taken = math.max(0, math.min(wanted, free))
  if taken < wanted then
    if not since then  -- in line after every process already waiting, even in the same ms
      local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2]
      redis.call('ZADD', KEYS[3], math.max(now, last and tonumber(last) + 1 or now), ARGV[1])
    end
    redis.call('ZADD', KEYS[4], now, ARGV[1])
    redis.call('PEXPIRE', KEYS[3], 1000)
    redis.call('PEXPIRE', KEYS[4], 1000)
  elseif since then
    redis.call('ZREM', KEYS[3], ARGV[1])
    redis.call('ZREM', KEYS[4], ARGV[1])
  end
  if taken == 0 then return {0, 0} end
  for i = 6 + back, 5 + back + taken do
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[i])
  end
  if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[4]) then
    redis.call('PEXPIRE', KEYS[2], ARGV[4])  -- never before a place taken earlier expires
  end
end
if ARGV[2] ~= '0' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
return {0, taken}
"""

# Places at download slots (SharedCrawl.renew) expire later. KEYS: the slots' place keys. ARGV:
# ms from now, then for each key the number of its places and those places.
RENEW = """
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
local ms = tonumber(ARGV[1])
local i = 2
for _, key in ipairs(KEYS) do
  local n = tonumber(ARGV[i])
  for j = i + 1, i + n do redis.call('ZADD', key, 'XX', now + ms, ARGV[j]) end
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
  i = i + n + 1
end
"""

# A Retry-After pause of a download slot, never shortening a lease or pause that ends later.
# KEYS: the slot's key. ARGV: the pause in ms.
PAUSE = """
local ms = math.max(tonumber(ARGV[1]), redis.call('PTTL', KEYS[1]))
redis.call('SET', KEYS[1], 'retry-after', 'PX', ms)
"""

# A host's robots.txt as the crawl read it, or the download of it taken by this process unless
# a live one has it. KEYS: the host's robots key (its outcome), its robots-fetching key (the
# worker downloading it), workers (worker -> heartbeat, s). ARGV: worker, seconds of silence
# that make a worker dead, ms a claim lasts at most. Returns {outcome or '', 1 if this worker
# downloads it, ms the outcome is kept for yet (0 without one)}.
ROBOTS_TXT = """
local outcome = redis.call('GET', KEYS[1])
if outcome then return {outcome, 0, redis.call('PTTL', KEYS[1])} end
local fetcher = redis.call('GET', KEYS[2])
if fetcher and fetcher ~= ARGV[1] then
  local beat = redis.call('HGET', KEYS[3], fetcher)
  if beat and tonumber(redis.call('TIME')[1]) - tonumber(beat) <= tonumber(ARGV[2]) then
    return {'', 0, 0}
  end
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
return {'', 1, 0}
"""

# KEYS: a host's robots key, its robots-fetching key. ARGV: the outcome ('' = none), ms it is
# kept.
SHARE_ROBOTS_TXT = """
if ARGV[1] ~= '' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
redis.call('DEL', KEYS[2])
"""

# Requests queued or under way anywhere in the crawl. KEYS: frontier, workers, back. ARGV:
# prefix of the in-flight keys.
PENDING = (
    IN_FLIGHT
    + """
return redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[3]) + in_flight(KEYS[2], ARGV[1])
"""
)
