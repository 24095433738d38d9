"""robots.txt for every request that waits for it, not only the first.

Scrapy 2.19's ``RobotsTxtMiddleware`` keeps one Deferred per host while that host's robots.txt
is downloading, and each waiting request awaits it through ``maybe_deferred_to_future``. Under
the asyncio reactor that adds a callback which consumes the result: the first waiter gets the
parser, every later one gets ``None`` and is let through unchecked. A crawl that starts from
several URLs on one host (or a recrawl of stored pages) would fetch disallowed pages.

Here each later waiter gets a Deferred of its own, chained to the host's, which passes the parser
on to the next one.

A robots.txt answered with a server error (5xx, after Scrapy's retries) or 429 forbids the
whole host, as RFC 9309 asks (Scrapy parsed the error page, which allows everything); one
warning line names the host. So does a robots.txt that cannot be downloaded for a network
reason, after Scrapy's retries (refused, reset, cut short, timed out, not resolved): RFC 9309
(2.3.1.4) reads it as complete disallow, where Scrapy let every URL of the host through (and
logged its error with the whole traceback, some sixty lines); the host's pages are refused
with the reason (``Forbidden by robots.txt, which could not be fetched: ...``), so that a seed
on a host that is down says why in the seeds' line. Either verdict holds for now only (RFC 9309
has a crawler assume complete disallow while the robots.txt is unreachable; Google and Nutch
fetch it again later): after ``ROBOTS_RETRY_FAILED_AFTER`` seconds the next request to the host
downloads it again (``focused/robots/failed_retried``). Kept for the life of the process, a
brief outage as the robots.txt was asked for refused every later link to the host for the rest
of a crawl of hours. Meanwhile the host's requests are held, not refused (Nutch defers them so
after a 503 robots.txt): refused, a crawl lost every page it found on the host in those minutes,
its seeds too. ``process_request`` hands each back to the scheduler (``HOLD_FOR_ROBOTS``), which
keeps it popped, out of the frontier, and hands it out again once the robots.txt may be fetched
again (``holding_until``; ``FocusedScheduler._release_held``): one goes first and fetches it, the
others follow once it is read, to be crawled or refused as it says, or held again if it fails
again; past ``ROBOTS_HOLD_RETRIES`` failures in a row they are refused (counted in
``spider.state``, which a JOBDIR pause keeps, with when it may be fetched again: the resumed
run fails it again until then, ``_resume_failure``; written through as they change,
``focused.resume.CrawlCounters``, so that ``kill -9`` keeps them too; a download of it that the
crawl's stop leaves unsent, ``NotSent``, ends no run: the crawl that goes on counted from 0
again; one answered unreadable, ``UNREADABLE``, ends it as a read does, at a stop too: the
server answered (kept, the crawl that went on counted on from it)). Not the requests of a
host that is not there (``NOT_THERE``: not resolved, connection refused), refused at once, so
that a mistyped seed says so in seconds. A robots.txt downloaded but unreadable (over
``DOWNLOAD_MAXSIZE``, a gzip cut short) allows everything, as Scrapy has it (see
``UNREADABLE``), in the one line of Scrapy's message. Its size limit is never below the 500
KiB RFC 9309 asks a crawler to parse (``ROBOTS_TXT_MIN_SIZE``): a ``DOWNLOAD_MAXSIZE`` set
lower for pages cancelled a larger robots.txt, and its host was crawled as if it had none.

Scrapy ignores a robots.txt's ``Crawl-delay``; here a host that asks for one is fetched at most
once every that many seconds (a ``Request-rate`` counts as the Crawl-delay it implies: ``1/5``
is 5 s; the longer of the two holds): its downloader slot's delay is set to it (at least
``DOWNLOAD_DELAY``; of a slot several netlocs share, two ports of a host or hosts on one address,
the largest they ask), without Scrapy's random jitter, which would make half the intervals
shorter. Each fresh download of the robots.txt sets it anew (``_pace``): one read again after
24 hours that asks for less, or none (the slot as Scrapy makes it again), is paced so (under
AutoThrottle the slot keeps the delay it has, AutoThrottle's to lower from its next response:
it went to the new Crawl-delay, or to ``AUTOTHROTTLE_START_DELAY``); parsed
again from its kept text, or failing, the host keeps the delay it had. Scrapy counts the delay
between sends, so a page slower than it would overlap the next
ones (``CONCURRENT_REQUESTS_PER_DOMAIN`` of them): the slot also sends one request at a time, as
Nutch (``fetcher.threads.per.queue``) and Heritrix do, unless ``DOWNLOAD_SLOTS`` gives the host a
concurrency (the user's choice for that host, as a ``DOWNLOAD_SLOTS`` delay above the
Crawl-delay is kept), and the delay runs from the end of one download to the start of the next
(``PoliteDownloader.paced_from_end``). The slot keeps both if AutoThrottle would lower the
delay (it never changes the concurrency), and if Scrapy drops the idle slot (a minute past its
delay) and makes a new one: what paced it goes with it, for a crawl to keep it only for the
hosts it is crawling (kept for every host met, it grew with the crawl), and the request that
makes the slot again paces it from its host's robots.txt (``pace_slot``; ``DOWNLOAD_SLOTS`` is
where a new slot takes its pace from). A host that asks
for more than ``ROBOTS_CRAWL_DELAY_MAX`` seconds is skipped, as Nutch does
(``fetcher.max.crawl.delay``): fetching it faster than it asked would ignore its robots.txt, and
a request waiting in a host's slot counts against ``CONCURRENT_REQUESTS``, so that a few such
hosts would hold most of the crawl's downloads for minutes each.

A link is fetched under its canonical URL (``focused.canonical``: its query sorted, session and
tracking parameters dropped), but a site's rules are written for its URLs as it links them:
``Disallow: /*?sort=`` is for ``/list?sort=price&cat=5``, which sorted is
``/list?cat=5&sort=price``.
So a request whose link (or seed) named another spelling of its URL carries that spelling in
``meta[LINKED_URL]``, and it must be allowed as well as the URL sent. A redirect's target is
checked as the server named it: the spelling of the link it came from names another URL and
no longer applies. Once the host's robots.txt is read, the scheduler asks before its dupefilter
(``refuses_as_linked``): refused only at download, the URL was seen, and a spelling the site
allows (``/story`` where ``/story?sid=...`` is disallowed), linked later, was a duplicate.

A crawl that meets many hosts keeps the robots.txt of the ``ROBOTS_PARSERS_MAX`` hosts used last
parsed, not of every host it ever met (Scrapy keeps them all: a parser is some 16 times its
robots.txt, 50 KB for one of 3 KB, 50 GB for a crawl that meets a million such hosts;
``benchmarks/many_hosts.py``), and a parser forgotten is freed at once, not at the next full
collection of the cyclic garbage collector (``_without_cycles``). The text of the
``ROBOTS_TEXTS_MAX`` hosts used last is kept as well, compressed (some 0.7 KB for one of 3 KB):
a host whose parser was forgotten (``focused/robots/forgotten``) has it parsed again from there
when one of its URLs comes up (``focused/robots/reparsed``, a fraction of a millisecond), and
only a host whose text was forgotten too has its robots.txt downloaded again. A robots.txt
read more than ``ROBOTS_TXT_LIFE`` ago (24 hours, the longest RFC 9309 has a crawler use a
cached robots.txt) is downloaded again as its host's next URL comes up, its parser kept or
not, as Nutch's and Heritrix's robots caches expire (``focused/robots/expired``; a host in
constant use kept its first for the whole crawl): its requests wait for it as for a first
one, and if it fails (a 5xx, 429, unreachable) the rules read before hold, rather than
complete disallow, until it is fetched again ``ROBOTS_RETRY_FAILED_AFTER`` later
(``focused/robots/kept_past_failure``): RFC 9309 (2.4) allows a cached robots.txt past its 24
hours while it cannot be fetched (and again, parsed from their text if their parser was
forgotten since, while ``ROBOTS_TEXTS_MAX`` keeps it). A failed robots.txt keeps no text: it is
downloaded again after ``ROBOTS_RETRY_FAILED_AFTER``, its parser kept until then (and while its
requests are held), past ``ROBOTS_PARSERS_MAX`` if need be, and its failures in a row
(``_failures``) until it is read. Either way the host's Crawl-delay holds meanwhile: its slot's
delay and concurrency (``DOWNLOAD_SLOTS``), and whether it is skipped, are kept apart.

In a crawl shared by several processes (``FOCUSED_FRONTIER``) a host's robots.txt is downloaded
once for the crawl: the first process to need it downloads it and puts what it read in Redis,
and the others wait for that and parse the same body (``SharedCrawl.robots_txt``), so each
also learns the Crawl-delay. A process that dies downloading it is replaced once it counts as
dead. A failure is shared with whether the host is there (``FAILED``, ``ABSENT``), and each
process holds its own requests of a host that failed, counting the failures it read: they stay
in its in-flight set in Redis meanwhile, so the crawl waits for them, and go back to the
frontier with the rest of that set if the process closes or dies.
"""

from __future__ import annotations

import copy
import logging
import math
import time
import weakref
import zlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from scrapy import exceptions, signals
from scrapy.core.downloader import _slot_jitter
from scrapy.downloadermiddlewares import robotstxt
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as ScrapyRobotsTxt
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.asyncio import sleep
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.python import to_unicode
from twisted.internet.defer import Deferred

from focused.engine import engine_scheduler, wake_engine
from focused.hygiene import BAD_COMPRESSION, error_message, other_family
from focused.logformatter import add_log_filter
from focused.resume import ROBOTS_FAILURES_STATE, ROBOTS_RETRY_STATE, robots_failure_changed
from focused.robotsmeta import robots_token

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.core.downloader import Downloader
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.robotstxt import RobotParser

    from focused.downloader import PoliteDownloader

logger = logging.getLogger(__name__)

# Request meta: the URL as its link or seed spelled it, where its canonical URL, the one
# requested, is another (spiders.topical).
LINKED_URL = "linked_url"
# Request meta, set as a request is handed back to the scheduler: it is to be held until its
# host's failed robots.txt is fetched again (FocusedScheduler takes it off).
HOLD_FOR_ROBOTS = "hold_for_robots"
# meta key: a request that was waiting for its host's robots.txt as the crawl stopped, which
# focused.downloader then does not send and says so
STOPPED_WAITING_META = "focused_stopped_waiting_for_robots_txt"
# What a process of a shared crawl read at a robots.txt: the body it parsed, or that the host
# could not be reached, followed by why (complete disallow, as for a 5xx: RFC 9309 2.3.1.4), or
# the same of a host where nothing answers (NOT_THERE: its requests are refused, not held), or
# that it answered with a server error or 429, followed by the status (complete disallow). The
# failures are kept in Redis for ROBOTS_RETRY_FAILED_AFTER only, and by each process reading
# them for what was left of that.
PARSED, FAILED, ABSENT, SERVER_ERROR = b"+", b"-", b"?", b"!"
# What a robots.txt answered with a server error (5xx), or unreachable for a network error
# (UNREACHABLE), is read as: RFC 9309 (2.3.1.4) has the crawler assume complete disallow. 429
# too, a server asking to be left alone for now, as Google reads it. Scrapy parses the error
# page's body, and lets every URL through when there is none: every URL is allowed.
DISALLOW_ALL = b"User-agent: *\nDisallow: /\n"
# Seconds before a process looks again whether the one downloading a robots.txt is done:
# first soon, then twice as long at each look, up to the most.
SHARED_FIRST_WAIT, SHARED_MAX_WAIT = 0.01, 0.5
# Seconds for which a robots.txt read is used, its parser kept or its kept text parsed again,
# rather than downloaded again, and, in a shared crawl, read by the other processes from Redis:
# RFC 9309 (2.4) has a crawler use a cached robots.txt for 24 hours at most, unless it cannot be
# fetched, when its rules hold until it is fetched again (ROBOTS_RETRY_FAILED_AFTER later). A
# failed one is used for ROBOTS_RETRY_FAILED_AFTER.
ROBOTS_TXT_LIFE = 24 * 3600
# The hosts whose failures in a row are counted (ROBOTS_HOLD_RETRIES), those that failed last:
# a count outlives its host's parser, forgotten past ROBOTS_PARSERS_MAX, until the robots.txt is
# read. Some 170 bytes each, and only a host whose robots.txt is failing has one.
FAILURES_KEPT = 100_000
# The hosts (slot keys) counted in focused/robots/crawl_delay_hosts, kept so as to count each
# once: a host came back with its slot and its robots.txt text forgotten, and was counted again.
# Some 60 bytes each (a hash), 6 MB at most; past them a host so forgotten counts again.
CRAWL_DELAY_HOSTS_KEPT = 100_000


# What a download of a site's robots.txt can fail with when the site is not there, or the
# network between: not a bug, and the host is read as forbidding everything (but UNREADABLE).
UNREACHABLE = (
    exceptions.CannotResolveHostError,
    exceptions.DownloadConnectionRefusedError,
    exceptions.DownloadFailedError,
    exceptions.DownloadTimeoutError,
    exceptions.ResponseDataLossError,
    OSError,
)
# Of those, what says that nothing answers at the host's name: it does not resolve, or refuses
# the connection (a mistyped host or port, a site gone). Its requests are refused at once, not
# held for the robots.txt to be fetched again: held, a crawl whose seeds name such a host would
# say so only after ROBOTS_HOLD_RETRIES times ROBOTS_RETRY_FAILED_AFTER, 15 minutes.
NOT_THERE = (exceptions.CannotResolveHostError, exceptions.DownloadConnectionRefusedError)


# What Twisted's HostnameEndpoint fails with for a host it cannot connect to, which seeds and
# links are checked for (focused.canonical.is_sendable) but a redirect (a Location header, a
# meta refresh) is not: http://*.example.org/.
INVALID_HOST = "invalid hostname: "
# What Twisted's HTTP client fails with, before the host is looked at, for a URL with a space
# or a control character in its host: http://exa mple.org/. Seeds, links and redirects are
# refused such a host before a request is made (focused.canonical.host_as_read; w3lib 2.6's
# safe_url_string too), so only a request made elsewhere (another component's) meets it.
INVALID_URI = "Invalid URI "


# What a robots.txt that was downloaded but cannot be read fails with: over its size limit
# (cancelled), or a body its Content-Encoding cannot undo (gzip's BadGzipFile is an OSError).
# The server's doing, so one line too; not shared as unreachable: a cancel may be this
# process's own, as it stops. Every URL is allowed, as Scrapy has it: the server answered, so
# the file is not "unreachable" (RFC 9309 2.3.1.4), and what it gave holds no rule that can be
# read: RFC 9309 has a crawler use the rules it can parse (2.2) and lets it stop parsing at
# its limit (2.5, ROBOTS_TXT_MIN_SIZE), and such a body is in practice an error page or a
# stream served for any path, not a robots.txt.
UNREADABLE = (exceptions.DownloadCancelledError, *BAD_COMPRESSION)
# RFC 9309 (2.5): a crawler's parsing limit is at least 500 KiB. A robots.txt is downloaded up
# to DOWNLOAD_MAXSIZE (10 MiB), or up to this where it was set lower, for pages.
ROBOTS_TXT_MIN_SIZE = 500 * 1024


def _unreachable(exc: BaseException | None) -> bool:
    return _network_failure(exc) or (
        isinstance(exc, ValueError) and str(exc).startswith((INVALID_HOST, INVALID_URI))
    )


def _network_failure(exc: BaseException | None) -> bool:
    """``exc`` says that the host's robots.txt could not be downloaded for a server or network
    reason: complete disallow."""
    return isinstance(exc, UNREACHABLE) and not isinstance(exc, UNREADABLE)


def is_robots_txt(request: Request) -> bool:
    """Whether ``request`` is the download of a robots.txt that Scrapy's ``robot_parser``
    makes (no callback, not itself checked against robots.txt)."""
    return request.callback is NO_CALLBACK and bool(request.meta.get("dont_obey_robotstxt"))


def _linked(request: Request) -> str | None:
    """The URL as the request's link or seed spelled it, where its canonical URL is another;
    None after a redirect (Scrapy's, a meta refresh's, the browser's: each sets
    ``redirect_urls``), whose target is checked as the server named it."""
    return None if "redirect_urls" in request.meta else request.meta.get(LINKED_URL)


def asked_delay(parser: RobotParser, useragent: str | bytes) -> float | None:
    """The seconds between requests a robots.txt asks of ``useragent``: its Crawl-delay, or
    the interval its Request-rate implies (``1/5``: one request every 5 s), whichever is longer.
    Scrapy's parsers give only the Crawl-delay; the Request-rate is read from the parser's own
    (Protego's, urllib's: ``rp``), where it has one. Its visit-time window is not read: the
    rate holds all day, the polite reading."""
    delay = parser.crawl_delay(useragent) or 0.0
    request_rate = getattr(getattr(parser, "rp", None), "request_rate", None)
    rate = request_rate(to_unicode(useragent)) if request_rate is not None else None
    if rate is not None and rate.requests > 0:
        delay = max(delay, rate.seconds / rate.requests)
    return delay or None


def _protego_groups(parser: RobotParser | None) -> dict[str, Any] | None:
    """The rule sets, by user agent, of a Protego parser (Scrapy's default); None for another
    parser. The one place that reads Protego's insides."""
    return getattr(getattr(parser, "rp", None), "_user_agents", None)


def _without_cycles(parser: RobotParser | None) -> None:
    """Protego's rule sets point back at their parser (``_parser_instance``, read as it parses):
    a parser forgotten was garbage that only a full collection frees (49 KB for a robots.txt of
    3 KB), and a crawl's are rare (``focused.collector``), so that ``ROBOTS_PARSERS_MAX`` bounded
    the parsers kept but not their memory. A weak reference in its place frees a parser as it is
    forgotten."""
    rp = getattr(parser, "rp", None)
    for rule_set in (_protego_groups(parser) or {}).values():
        if getattr(rule_set, "_parser_instance", None) is rp:
            rule_set._parser_instance = weakref.proxy(rp)


def _keep_last(kept: OrderedDict[str, Any], netloc: str, value: Any) -> str | None:
    """Set ``netloc``'s ``value`` in ``kept`` as the last, the first going past
    ``FAILURES_KEPT``; returns the netloc that went, if one did."""
    kept[netloc] = value
    kept.move_to_end(netloc)
    if len(kept) > FAILURES_KEPT:
        return kept.popitem(last=False)[0]
    return None


class _UnreachableInOneLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if _network_failure(error):
            return False  # said in the warning of _robots_error, which names the host
        # A bind address of the other family: its one line (error_message) says it all.
        if _unreachable(error) or isinstance(error, UNREADABLE) or other_family(error):
            record.exc_info = record.exc_text = None
        return True


class _Held(Exception):
    """A request of a host whose robots.txt failed for now, handed back to the scheduler."""


class RobotsTxtMiddleware(ScrapyRobotsTxt):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        # robots.txt groups are matched against the crawler's product token (RFC 9309), not its
        # whole user agent: given "focused/0.1 (+topical crawler; Scrapy)", Protego took a
        # group for "crawler" or "Scrapy" for ours, over "*" (a host that disallowed "crawler"
        # was skipped whole).
        self._robotstxt_useragent = robots_token(crawler.settings) or self._robotstxt_useragent
        add_log_filter(robotstxt.__name__, _UnreachableInOneLine)
        self._crawl_delay_max = crawler.settings.getfloat("ROBOTS_CRAWL_DELAY_MAX")
        self._download_delay = crawler.settings.getfloat("DOWNLOAD_DELAY")
        self._parsers_max = crawler.settings.getint("ROBOTS_PARSERS_MAX")
        # The robots.txt read of the ROBOTS_TEXTS_MAX hosts used last, the least used first:
        # (its time.monotonic() when read, its body compressed), parsed again for a host whose
        # parser was forgotten (_reparse).
        self._texts_max = crawler.settings.getint("ROBOTS_TEXTS_MAX")
        self._texts: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        maxsize = crawler.settings.getint("DOWNLOAD_MAXSIZE")  # 0: no limit
        self._robots_maxsize = ROBOTS_TXT_MIN_SIZE if 0 < maxsize < ROBOTS_TXT_MIN_SIZE else None
        # In the order of last use, the least used first (_forget_least_used).
        self._parsers: OrderedDict[str, RobotParser | Deferred[RobotParser | None] | None] = (
            OrderedDict()
        )
        # Hosts whose robots.txt could not be downloaded (their parser forbids everything), with
        # why; forgotten with their parser.
        self._unreachable: dict[str, str] = {}
        # Hosts whose robots.txt was read, with the time.monotonic() at which it is downloaded
        # again (_set_aside_if_expired): ROBOTS_TXT_LIFE after it was read; forgotten with their
        # parser. While it is, the parser read before is kept aside (_old_rules), to hold if it
        # fails; the hosts whose old rules so hold until it is fetched again (_keeps) are kept
        # past ROBOTS_PARSERS_MAX meanwhile, as a failed one is.
        self._expires_at: dict[str, float] = {}
        self._old_rules: dict[str, RobotParser | None] = {}
        self._kept_past_failure: set[str] = set()
        # Hosts whose robots.txt failed (unreachable, a 5xx or 429), with the time.monotonic()
        # at which it is downloaded again (_retry_if_due); forgotten with their parser.
        self._retry_failed_after = crawler.settings.getfloat("ROBOTS_RETRY_FAILED_AFTER")
        self._retry_at: dict[str, float] = {}
        # Of those, the hosts whose requests are held until then, not refused: neither not there
        # (NOT_THERE) nor failed more than ROBOTS_HOLD_RETRIES times in a row since it was
        # first asked for (_failures). Forgotten with their parser.
        self._holding: set[str] = set()
        self._hold_retries = crawler.settings.getint("ROBOTS_HOLD_RETRIES")
        self._failures_here: OrderedDict[str, int] = OrderedDict()  # see _failures
        # Hosts whose robots.txt was just answered but cannot be read (UNREADABLE), until
        # robot_parser ends their failures in a row: the server's answer, as a read is.
        self._answered_unreadable: set[str] = set()
        self._retries_here: OrderedDict[str, tuple[float, str | None, bool]] = OrderedDict()
        # Hosts (netloc: robots.txt is per netloc) whose Crawl-delay is above the cap, each
        # while its robots.txt is kept, parsed or as text (_forget_skip): kept for every host
        # met that asked for one, a wide crawl held them all.
        self._skipped: dict[str, float] = {}
        # The least delay of each downloader slot (keyed as the downloader keys them: by
        # hostname, or address) that a robots.txt asked for: the largest its netlocs (two ports
        # of one host, or hosts on one address) ask as each was read last (_slot_asks). Kept
        # while the slot lives (forget_dropped_slots, pace_slot).
        self._slot_delays: dict[str, float] = {}
        self._slot_asks: dict[str, dict[str, float]] = {}
        self._crawl_delay_hosts: set[int] = set()  # see CRAWL_DELAY_HOSTS_KEPT
        # The user's own DOWNLOAD_SLOTS, which a slot goes back to once no netloc asks a delay.
        self._user_slots = copy.deepcopy(crawler.settings.getdict("DOWNLOAD_SLOTS"))
        crawler.signals.connect(self._robots_parsed, signal=signals.robots_parsed)
        self._autothrottle = crawler.settings.getbool("AUTOTHROTTLE_ENABLED")
        if self._autothrottle:
            # AutoThrottle sets a slot's delay after each response, no lower than DOWNLOAD_DELAY
            # only. This receiver, connected after it (extensions are built before the
            # downloader's middlewares), raises it back before the slot sends its next request.
            crawler.signals.connect(self._keep_crawl_delay, signal=signals.response_downloaded)

    async def process_request(self, request: Request) -> Request | None:
        if self._robots_maxsize is not None and is_robots_txt(request):
            request.meta.setdefault("download_maxsize", self._robots_maxsize)
        stopped_before = self._stopping()
        try:
            await super().process_request(request)
        except _Held:
            return request  # to the scheduler, which keeps it (FocusedScheduler)
        if not stopped_before and self._stopping():
            request.meta[STOPPED_WAITING_META] = True
        return None

    async def robot_parser(self, request: Request) -> RobotParser | None:
        netloc = urlparse_cached(request).netloc
        self._retry_if_due(netloc)
        if netloc in self._texts:
            self._texts.move_to_end(netloc)
            if netloc not in self._parsers:
                self._reparse(netloc)
        self._set_aside_if_expired(netloc)
        pending = self._parsers.get(netloc)
        if not isinstance(pending, Deferred):
            downloads_it = netloc not in self._parsers  # else read already
            if not downloads_it:
                self._parsers.move_to_end(netloc)
            try:
                if downloads_it and getattr(self.crawler.spider, "shared", None) is not None:
                    return await self._read_by_the_crawl(request, netloc)
                return await super().robot_parser(request)
            finally:
                if downloads_it:
                    self._old_rules.pop(netloc, None)
                    # Read, answered unreadable (the server's answer, whose every URL is
                    # allowed), or failed for good: its failures in a row end. Not one the
                    # crawl's stop left unsent (focused.downloader.NotSent), which tells nothing
                    # of the host: taken as read, it reset the count kept for the crawl that
                    # goes on (JOBDIR), which asked the failing server again, counting from 0.
                    answered = netloc in self._answered_unreadable
                    self._answered_unreadable.discard(netloc)
                    read = answered or self._parsers.get(netloc) is not None
                    read = read or not self._stopping()
                    ended = read and netloc not in self._retry_at
                    if ended and self._failures.pop(netloc, None):
                        self._failure_changed(netloc)
                    if netloc in self._parsers:  # read now, however long its download took
                        self._parsers.move_to_end(netloc)
                    self._forget_least_used(netloc)
                    wake_engine(self.crawler)  # the scheduler held the host's other requests
        mine: Deferred[RobotParser | None] = Deferred()

        def hand_on(parser: RobotParser | None) -> RobotParser | None:
            mine.callback(parser)
            return parser

        pending.addCallback(hand_on)
        return await maybe_deferred_to_future(mine)

    def _stopping(self) -> bool:
        """Whether the crawl is closing, and sends nothing that waits in a slot any more."""
        return getattr(self.crawler.engine.downloader, "stopping", False)

    def _forget_least_used(self, using: str | None = None) -> None:
        """Forget the parsers used longest ago, past ``ROBOTS_PARSERS_MAX``, but that of
        ``using``, the host whose request is being checked: with the others all downloading or
        failed, the parser just parsed again for it from its text was the one forgotten, and its
        robots.txt was downloaded again (the bound is kept again at the next call). A
        robots.txt still downloading is kept (its waiters chain on it), and so is a failed one
        until it may be fetched again, or while its requests are held (the scheduler asks
        ``holding_until``):
        forgotten, as its held requests left it used longest ago, its failure was, and its next
        request fetched it again at once. A failure's parser is small (1.4 KB), and kept for
        ``ROBOTS_RETRY_FAILED_AFTER`` only; its failures in a row are kept apart (_failures).
        So are the rules that hold past a failure to read them again (``_keeps``) until it is
        fetched again: forgotten, they were parsed again from their text, over 24 hours old,
        and the host's next request fetched it again at once. Forgotten after, their text
        (``ROBOTS_TEXTS_MAX``) gives them again for its next read to keep if it fails."""
        excess = len(self._parsers) - self._parsers_max
        if excess <= 0:
            return
        forget, now = [], time.monotonic()
        for netloc, parser in self._parsers.items():
            if len(forget) == excess:
                break
            failed = netloc in self._holding or self._retry_at.get(netloc, -math.inf) > now
            failed = failed or (netloc in self._kept_past_failure and not self._expired(netloc))
            if not isinstance(parser, Deferred) and not failed and netloc != using:
                forget.append(netloc)
        for netloc in forget:
            self._forget(netloc)
        self._stats.inc_value("focused/robots/forgotten", len(forget))

    def _forget(self, netloc: str) -> None:
        del self._parsers[netloc]
        self._expires_at.pop(netloc, None)
        self._kept_past_failure.discard(netloc)
        self._unreachable.pop(netloc, None)
        if self._retry_at.pop(netloc, None) is not None:
            self._retries.pop(netloc, None)  # its time is up: not to be failed again on resume
            self._failure_changed(netloc)
        self._holding.discard(netloc)
        self._forget_skip(netloc)

    def _forget_skip(self, netloc: str) -> None:
        """Forget that ``netloc`` asks for a Crawl-delay above the cap once nothing of its
        robots.txt is kept (parser, text, rules set aside while it is read again): its next
        request downloads it again, which tells it again. Kept as long as either, it is not
        said again as its parser is parsed again from its text."""
        if not any(netloc in kept for kept in (self._parsers, self._texts, self._old_rules)):
            self._skipped.pop(netloc, None)

    def _keep_text(self, netloc: str, body: bytes, parser: RobotParser, age: float = 0.0) -> None:
        """Keep the robots.txt ``body`` just parsed for ``netloc`` into ``parser``, downloaded
        ``age`` seconds ago, to parse it again if its parser is forgotten; the text used longest
        ago goes past ``ROBOTS_TEXTS_MAX``. A body in which Protego found no group (of a host
        without a robots.txt, its 404 page or, redirected, its home page: 10 KB compressed, not
        0.7) is kept empty, which parses the same: every URL allowed, no Crawl-delay. Either
        way it expires ``ROBOTS_TXT_LIFE`` after it was downloaded."""
        self._expires_at[netloc] = time.monotonic() - age + ROBOTS_TXT_LIFE
        if self._texts_max <= 0:
            return
        if _protego_groups(parser) == {}:
            body = b""
        self._texts[netloc] = (time.monotonic() - age, zlib.compress(body))
        self._texts.move_to_end(netloc)
        if len(self._texts) > self._texts_max:
            self._forget_skip(self._texts.popitem(last=False)[0])

    def _has_fresh_text(self, netloc: str) -> bool:
        """Whether ``netloc``'s robots.txt is kept as text, read less than ``ROBOTS_TXT_LIFE``
        ago."""
        kept = self._texts.get(netloc)
        return kept is not None and time.monotonic() - kept[0] <= ROBOTS_TXT_LIFE

    def _reparse(self, netloc: str) -> None:
        """Parse ``netloc``'s kept robots.txt again, its parser forgotten, rather than download
        it again (one older than ``ROBOTS_TXT_LIFE`` is set aside at once, and downloaded
        again). No ``robots_parsed`` signal: its Crawl-delay is kept apart already."""
        read_at, text = self._texts[netloc]
        self._parsers[netloc] = self._build(zlib.decompress(text))
        self._expires_at[netloc] = read_at + ROBOTS_TXT_LIFE
        self._stats.inc_value("focused/robots/reparsed")
        self._forget_least_used(netloc)

    def _expired(self, netloc: str) -> bool:
        """Whether ``netloc``'s kept parser was read more than ``ROBOTS_TXT_LIFE`` ago (or the
        rules it kept past a failure are due to be fetched again)."""
        return self._expires_at.get(netloc, math.inf) < time.monotonic()

    def _set_aside_if_expired(self, netloc: str) -> None:
        """Have ``netloc``'s robots.txt downloaded again, as one not read (its requests wait
        for it), once its parser is ``_expired``: RFC 9309 (2.4) has a crawler use a cached
        robots.txt for 24 hours at most. A host in constant use kept its first for the whole
        crawl. The parser is set aside meanwhile, to hold if the download fails (``_keeps``)."""
        # Not while it is being read: one read from another process (``_read_by_the_crawl``)
        # with moments of its life left in Redis expires while its waiters are let go.
        if not self._expired(netloc) or isinstance(self._parsers.get(netloc), Deferred):
            return
        self._old_rules[netloc] = self._parsers[netloc]
        self._forget(netloc)
        # Its text is kept, as old as its parser (not fresh: its next use downloads it again),
        # for the rules to hold again if the download fails and their parser is forgotten once
        # their time is up (``_keeps``): else that read, failing again, had no rules to keep.
        self._stats.inc_value("focused/robots/expired")

    def _keeps(self, netloc: str, seconds: float, failure: str) -> bool:
        """Whether ``netloc``'s robots.txt, downloaded again for its age and failed as
        ``failure`` says (a 5xx or 429, unreachable), keeps the rules read before: RFC 9309
        (2.4) lets a crawler use a cached robots.txt past its 24 hours while it cannot be
        fetched. They hold, rather than complete disallow (its requests neither held nor
        refused, no failure counted), until it is downloaded again ``seconds`` later (0:
        ``ROBOTS_TXT_LIFE``)."""
        if netloc not in self._old_rules:
            return False
        self._expires_at[netloc] = time.monotonic() + (seconds or ROBOTS_TXT_LIFE)
        self._kept_past_failure.add(netloc)
        self._stats.inc_value("focused/robots/kept_past_failure")
        logger.warning(
            "%s: robots.txt %s as it was fetched again: the rules it gave before hold until it "
            "is fetched again in %g s, as RFC 9309 allows of a robots.txt that cannot be fetched",
            netloc,
            failure,
            seconds or ROBOTS_TXT_LIFE,
        )
        return True

    def _retry_if_due(self, netloc: str) -> None:
        """Forget ``netloc``'s failed robots.txt once ``ROBOTS_RETRY_FAILED_AFTER`` has passed,
        so that its next request downloads it again."""
        if netloc not in self._parsers:
            self._resume_failure(netloc)
        retry_at = self._retry_at.get(netloc)
        if retry_at is not None and retry_at <= time.monotonic():
            self._forget(netloc)
            self._stats.inc_value("focused/robots/failed_retried")

    def _resume_failure(self, netloc: str) -> None:
        """Fail ``netloc``'s robots.txt again until it may be fetched again, where a run before
        a JOBDIR pause saw it fail (``_retries``): the resumed run downloaded it again as soon
        as the host's held requests came up, and each quick pause and resume used up one of
        ``ROBOTS_HOLD_RETRIES``. No longer than this run's ``ROBOTS_RETRY_FAILED_AFTER``."""
        saved = self._retries.get(netloc)
        if saved is None:
            return
        retry_at, why, there = saved
        seconds = min(retry_at - time.time(), self._retry_failed_after)
        if seconds <= 0:
            del self._retries[netloc]
            self._failure_changed(netloc)
            return
        self._parsers[netloc] = self._disallow_all(netloc, why)
        self._fail_for(netloc, seconds, there)
        logger.info(
            "%s: robots.txt failed before the crawl stopped: fetched again in %g s%s",
            netloc,
            seconds,
            "; its requests wait until then" if netloc in self._holding else "",
        )
        self._forget_least_used()

    @property
    def _failures(self) -> OrderedDict[str, int]:
        """The failures in a row of each host whose robots.txt is failing, those that failed
        last last, ``FAILURES_KEPT`` of them, each kept until it is read. In ``spider.state``
        (read at each use: a resumed JOBDIR crawl replaces it as the spider opens), so that a
        JOBDIR pause keeps them: a resumed crawl counted them from 0 again, and held a host's
        requests past ``ROBOTS_HOLD_RETRIES`` once more. Here for a spider without one (the
        recrawl's)."""
        return self._in_state(ROBOTS_FAILURES_STATE, self._failures_here)

    @property
    def _retries(self) -> OrderedDict[str, tuple[float, str | None, bool]]:
        """When each host whose robots.txt failed may have it fetched again, as
        ``time.time()`` (``time.monotonic()`` does not outlive the process), with why it could
        not be fetched (None: a 5xx or 429) and whether the host is there (``NOT_THERE``), kept
        as its failures are, until its time is up: a resumed run fails it again until then
        (``_resume_failure``)."""
        return self._in_state(ROBOTS_RETRY_STATE, self._retries_here)

    def _in_state(self, key: str, here: OrderedDict[str, Any]) -> OrderedDict[str, Any]:
        """``spider.state[key]``, or ``here`` for a spider without a state (the recrawl's)."""
        state = getattr(self.crawler.spider, "state", None)
        return here if state is None else state.setdefault(key, OrderedDict())

    def _failed_for(self, netloc: str, seconds: float, there: bool = True) -> None:
        """``netloc``'s robots.txt failed: its complete disallow holds ``seconds`` (0: for
        good), its requests held meanwhile unless it is not ``there`` (``NOT_THERE``) or failed
        more than ``ROBOTS_HOLD_RETRIES`` times in a row."""
        if seconds > 0:
            retry = (time.time() + seconds, self._unreachable.get(netloc), there)
            gone = (
                _keep_last(self._failures, netloc, self._failures.pop(netloc, 0) + 1),
                _keep_last(self._retries, netloc, retry),
            )
            for changed in {netloc, *gone} - {None}:  # those gone past FAILURES_KEPT too
                self._failure_changed(changed)
            self._fail_for(netloc, seconds, there)

    def _failure_changed(self, netloc: str) -> None:
        """What ``_failures`` and ``_retries`` keep of ``netloc`` has changed: under JOBDIR
        ``focused.resume.CrawlCounters`` writes it through, so that a crawl killed outright
        keeps it as a pause does (``spider.state``). A robots.txt's failure or read after one:
        nothing a page."""
        self.crawler.signals.send_catch_log(
            robots_failure_changed,
            netloc=netloc,
            failures=self._failures.get(netloc),
            retry=self._retries.get(netloc),
        )

    def _fail_for(self, netloc: str, seconds: float, there: bool) -> None:
        """Hold ``netloc``'s complete disallow for ``seconds``, its requests with it unless it
        is not ``there`` or failed more than ``ROBOTS_HOLD_RETRIES`` times in a row."""
        self._retry_at[netloc] = time.monotonic() + seconds
        # Only a scheduler that keeps them meanwhile holds them (FocusedScheduler): Scrapy's,
        # the recrawl's, would hand them out again at once.
        holds = getattr(engine_scheduler(self.crawler), "holds_for_robots", False)
        if there and self._failures.get(netloc, 0) <= self._hold_retries and holds:
            self._holding.add(netloc)

    def _held_note(self, netloc: str) -> str:
        """What the warning of ``netloc``'s failed robots.txt says of its requests if held."""
        if netloc not in self._holding:
            return ""
        return f"; its requests wait until it is fetched again in {self._retry_failed_after:g} s"

    def holding_until(self, netloc: str) -> float | None:
        """The ``time.monotonic()`` until which ``netloc``'s requests are held for its failed
        robots.txt; None once they are not: its time is up (its next request downloads it
        again), or it failed too often (they are refused)."""
        self._retry_if_due(netloc)
        return self._retry_at[netloc] if netloc in self._holding else None

    def _holds(self, request: Request) -> bool:
        """Whether ``request``, of a host whose robots.txt failed for now, is held until it is
        fetched again rather than refused."""
        if urlparse_cached(request).netloc not in self._holding:
            return False
        request.meta[HOLD_FOR_ROBOTS] = True
        self._stats.inc_value("focused/robots/held_requests")
        return True

    async def _read_by_the_crawl(self, request: Request, netloc: str) -> RobotParser | None:
        """``netloc``'s robots.txt as another process of the crawl read it, waited for while
        that process downloads it, or downloaded by this one, which then shares it."""
        shared = self.crawler.spider.shared
        waiting: Deferred[RobotParser | None] = Deferred()
        self._parsers[netloc] = waiting  # the scheduler holds the host; later requests chain
        wait = SHARED_FIRST_WAIT
        outcome, ours, life = shared.robots_txt(netloc)
        while outcome is None and not ours:
            downloader: PoliteDownloader = self.crawler.engine.downloader
            if downloader.stopping:
                # Not waited for: a stop waited as long as the other process's download took (a
                # Ctrl-C hung while it went on). No parser, none kept: the host's requests go on
                # to their slot, which sends nothing now (focused.downloader.NotSent).
                del self._parsers[netloc]
                waiting.callback(None)
                return None
            await sleep(wait)
            wait = min(2 * wait, SHARED_MAX_WAIT)
            outcome, ours, life = shared.robots_txt(netloc)
        if outcome is None:
            del self._parsers[netloc]  # for Scrapy's download, which shares it when done
            parser = await super().robot_parser(request)
        else:
            if outcome.startswith(PARSED):
                parser = self._build(outcome[1:])
                # Downloaded by another process, as long ago as its life in Redis has run.
                self._keep_text(netloc, outcome[1:], parser, ROBOTS_TXT_LIFE - life)
                await self.crawler.signals.send_catch_log_async(
                    signal=signals.robots_parsed, robotparser=parser, request=request
                )
            elif self._keeps(netloc, life, "failed in another process of the crawl"):
                parser = self._old_rules[netloc]
            else:
                if outcome.startswith(SERVER_ERROR):  # said in the log of the process that got it
                    parser = self._disallow_all(netloc)
                else:  # FAILED, ABSENT: the process that downloaded it said why in its log
                    why = outcome[len(FAILED) :].decode("utf-8", "replace") or "unreachable"
                    parser = self._disallow_all(netloc, why)
                if self._retry_failed_after > 0:
                    # Until it expires in Redis, as for every process of the crawl.
                    self._failed_for(netloc, life, there=not outcome.startswith(ABSENT))
            self._parsers[netloc] = parser
            self._stats.inc_value("focused/robots/read_by_another_process")
        waiting.callback(parser)
        return parser

    async def _parse_robots(self, response: Response, netloc: str, request: Request) -> None:
        outcome = PARSED + response.body
        if response.status >= 500 or response.status == 429:
            outcome = SERVER_ERROR + str(response.status).encode()
            self._stats.inc_value("focused/robots/server_error_hosts")
            failure = f"answered {response.status} (after retries)"
            if self._keeps(netloc, self._retry_failed_after, failure):
                parser = self._old_rules[netloc]
            else:
                # Before the requests waiting for it are let go: they are held.
                self._failed_for(netloc, self._retry_failed_after)
                logger.warning(
                    "%s: robots.txt %s: nothing on the host is fetched, as RFC 9309 asks of a "
                    "robots.txt the server cannot give%s",
                    netloc,
                    failure,
                    self._held_note(netloc),
                )
                parser = self._disallow_all(netloc)
            # As Scrapy's _parse_robots counts it; no robots_parsed signal: the host's
            # Crawl-delay holds (_robots_parsed would take the failure for one asking none).
            self._stats.inc_value("robotstxt/response_count")
            self._stats.inc_value(f"robotstxt/response_status_count/{response.status}")
            self._hand_over(netloc, parser)
        else:
            await super()._parse_robots(response, netloc, request)
            self._keep_text(netloc, response.body, self._parsers[netloc])
        # Its Crawl-delay, set now, runs from the end of this download, before the crawl's
        # other processes read it.
        downloader: PoliteDownloader = self.crawler.engine.downloader
        downloader.robots_txt_ended(downloader.get_slot_key(request))
        self._share(netloc, outcome)

    def _robots_error(self, exc: Exception, netloc: str) -> None:
        if not _network_failure(exc):
            super()._robots_error(exc, netloc)  # every URL allowed
            if isinstance(exc, UNREADABLE):
                self._answered_unreadable.add(netloc)
            self._expires_at[netloc] = time.monotonic() + ROBOTS_TXT_LIFE
            # Any other failure (the download cancelled as this process stops, the request
            # ignored here) is this process's: another downloads it.
            self._share(netloc, b"")
            return
        why = error_message(exc)
        self._stats.inc_value(f"robotstxt/exception_count/{type(exc)}")  # as Scrapy counts it
        self._stats.inc_value("focused/robots/unreachable_hosts")
        there = not isinstance(exc, NOT_THERE)
        failure = f"could not be fetched (after retries: {why})"
        if self._keeps(netloc, self._retry_failed_after, failure):
            self._hand_over(netloc, self._old_rules[netloc])
        else:
            parser = self._disallow_all(netloc, why)  # why kept before the failure is (_retries)
            self._failed_for(netloc, self._retry_failed_after, there)
            logger.warning(
                "%s: robots.txt %s: nothing on the host is fetched, as RFC 9309 asks of an "
                "unreachable robots.txt%s",
                netloc,
                failure,
                self._held_note(netloc),
            )
            self._hand_over(netloc, parser)
        # A host that cannot be reached fails every process alike.
        self._share(netloc, (FAILED if there else ABSENT) + why.encode())

    def _hand_over(self, netloc: str, parser: RobotParser | None) -> None:
        """``parser`` for ``netloc`` in place of its robots.txt's download, handed to every
        request waiting for it."""
        downloading = self._parsers[netloc]
        self._parsers[netloc] = parser
        downloading.callback(parser)

    def _disallow_all(self, netloc: str, unreachable: str | None = None) -> RobotParser:
        """The parser of a host whose robots.txt failed: answered a server error, or could not
        be downloaded, for why ``unreachable`` says (which a page refused says too)."""
        if unreachable is not None:
            self._unreachable[netloc] = unreachable
        return self._build(DISALLOW_ALL)

    def _build(self, body: bytes) -> RobotParser:
        parser = build_from_crawler(self._parserimpl, self.crawler, body)
        _without_cycles(parser)
        return parser

    def _share(self, netloc: str, outcome: bytes) -> None:
        shared = getattr(self.crawler.spider, "shared", None)
        if shared is not None:
            failed = outcome[:1] in (FAILED, ABSENT, SERVER_ERROR) and self._retry_failed_after > 0
            shared.share_robots_txt(netloc, outcome, self._retry_failed_after if failed else None)
            if failed and netloc in self._retry_at:
                # Its time here runs from now, as in Redis: run from the failure, before the
                # share, it ended first, and this process read the crawl's failure, not expired
                # yet, as a failure of its own: a failure more in a row, a retry counted twice.
                self._retry_at[netloc] = time.monotonic() + self._retry_failed_after

    def waits_for_robots(self, request: Request) -> bool:
        """True if ``request`` waits (or, handed out, would wait) in this middleware for its
        host's robots.txt: not asked for yet, or downloading. The scheduler holds such a host
        (``HELD_HOST_LOOKAHEAD``): its requests would each hold one of ``CONCURRENT_REQUESTS``
        meanwhile, and its Crawl-delay, which sends them one at a time, is not known yet; the
        engine is woken once it is read (``robot_parser``)."""
        if request.meta.get("dont_obey_robotstxt") or request.url.startswith(("data:", "file:")):
            return False
        netloc = urlparse_cached(request).netloc
        self._retry_if_due(netloc)
        parser = self._parsers.get(netloc, self)  # self: not asked
        if parser is self:
            return not self._has_fresh_text(netloc)  # else parsed again as it comes up
        return isinstance(parser, Deferred) or self._expired(netloc)

    def refuses_as_linked(self, request: Request) -> bool:
        """Whether the host's robots.txt, read already, refuses ``request`` as its link spelled
        it (False while it is not read: the request is checked at download)."""
        linked = _linked(request)
        if linked is None or request.meta.get("dont_obey_robotstxt"):
            return False
        netloc = urlparse_cached(request).netloc
        self._retry_if_due(netloc)  # a failed robots.txt past its time is read again
        parser = self._parsers.get(netloc)
        if parser is None or isinstance(parser, Deferred) or netloc in self._holding:
            return False  # a failure holding the host: checked as it is read again
        if self._expired(netloc):
            return False  # checked as it is read again
        return not parser.allowed(linked, self._useragent(request))

    def process_request_2(self, rp: RobotParser | None, request: Request) -> None:
        if rp is not None and self._holds(request):
            raise _Held
        why = self._unreachable.get(urlparse_cached(request).netloc)
        if rp is not None and why is not None:
            # Said with why: "Forbidden by robots.txt" alone, in the seeds' line, would hide
            # that the host is down.
            self._stats.inc_value("robotstxt/forbidden")
            raise exceptions.IgnoreRequest(
                f"Forbidden by robots.txt, which could not be fetched: {why}"
            )
        linked = _linked(request)
        if rp is not None and linked is not None:
            super().process_request_2(rp, request.replace(url=linked))
        super().process_request_2(rp, request)
        netloc = urlparse_cached(request).netloc
        delay = self._skipped.get(netloc)
        if delay is None and rp is not None and self._parsers.get(netloc) is not rp:
            # Its parser, handed to it as it waited for the robots.txt, was forgotten since (by
            # another host's read), and with it whether the host is skipped (_forget_skip): a
            # request that went on after was sent to a host it skips.
            delay = asked_delay(rp, self._useragent(request))
            delay = delay if self._skips(delay) else None
        if delay is not None:
            self._stats.inc_value("focused/robots/crawl_delay_skipped")
            raise exceptions.IgnoreRequest(
                f"robots.txt Crawl-delay {delay:g} s is above "
                f"ROBOTS_CRAWL_DELAY_MAX ({self._crawl_delay_max:g} s)"
            )

    def _skips(self, delay: float | None) -> bool:
        """Whether a host whose robots.txt asks ``delay`` seconds between requests
        (``asked_delay``) is skipped: above ``ROBOTS_CRAWL_DELAY_MAX``."""
        return delay is not None and delay > self._crawl_delay_max

    def _useragent(self, request: Request) -> str | bytes:
        # The user agent Scrapy's process_request_2 checks allowed() for.
        return self._robotstxt_useragent or request.headers.get(
            b"User-Agent", self._default_useragent
        )

    def _robots_parsed(self, robotparser: RobotParser, request: Request) -> None:
        _without_cycles(robotparser)  # built by Scrapy's _parse_robots
        # Sent before the requests waiting for this robots.txt go on: none is sent sooner.
        delay = asked_delay(robotparser, self._useragent(request))
        netloc = urlparse_cached(request).netloc
        downloader: PoliteDownloader = self.crawler.engine.downloader
        key = downloader.get_slot_key(request)
        # A fresh read (the first, after 24 hours, after its text was forgotten) says what the
        # netloc asks now, lower or none too: the larger of old and new was kept, and a
        # robots.txt that lowered or dropped its Crawl-delay had the old one for the whole crawl.
        asks = self._slot_asks.setdefault(key, {})
        asks.pop(netloc, None)
        if self._skips(delay):
            if self._skipped.get(netloc) != delay:  # else read again: said already
                self._skipped[netloc] = delay
                logger.info(
                    "%s: robots.txt asks for a Crawl-delay of %g s, above "
                    "ROBOTS_CRAWL_DELAY_MAX (%g s): its pages are skipped",
                    netloc,
                    delay,
                    self._crawl_delay_max,
                )
        else:
            # Read again (after its 24 hours) without the delay that had its pages skipped.
            self._skipped.pop(netloc, None)
            if delay is not None and delay > 0:
                asks[netloc] = delay
        if not asks:
            del self._slot_asks[key]
        self._pace(key, netloc, delay)

    def pace_slot(self, key: str, request: Request) -> None:
        """Pace slot ``key``, which ``request`` reaches now (``PoliteDownloader._get_slot``), by
        the Crawl-delay its netloc asks, where the slot does not have it: made again after
        Scrapy dropped it idle, its pace forgotten with it (``forget_dropped_slots``), or made
        for another of its netlocs (two ports of a host, hosts on one address). Read from the
        parser the request was just checked against (parsed again from its text if it had been
        forgotten); a robots.txt being read again is paced by the rules read before, and one
        read for the first time by none, paced once it is read (``_robots_parsed``)."""
        netloc = urlparse_cached(request).netloc
        if netloc in self._slot_asks.get(key, ()):
            return
        parser = self._parsers.get(netloc)
        if isinstance(parser, Deferred):
            parser = self._old_rules.get(netloc)
        if parser is None:
            return
        delay = asked_delay(parser, self._useragent(request))
        if delay is None or self._skips(delay):
            return  # none, or its pages are skipped
        self._slot_asks.setdefault(key, {})[netloc] = delay
        self._pace(key, netloc, delay, again=True)

    def forget_dropped_slots(self) -> None:
        """Forget how each slot that Scrapy dropped (idle a minute past its delay) was paced,
        set again as a request makes it anew (``pace_slot``): kept, a crawl held it for every
        host it ever met that asked for a Crawl-delay, some 300 bytes each, however few it was
        crawling at a time. Not while one of its netlocs' robots.txt is failing: a failure
        keeps the Crawl-delay read before (``_parse_robots``), which paces its next read too."""
        slots = self.crawler.engine.downloader.slots
        for key in [key for key in self._slot_delays if key not in slots]:
            if not any(netloc in self._retry_at for netloc in self._slot_asks.get(key, ())):
                self._slot_asks.pop(key, None)
                self._unpace(key)

    def _pace(self, key: str, netloc: str, delay: float | None, again: bool = False) -> None:
        """Set slot ``key``'s delay to the largest its netlocs ask (``_slot_asks``), just read
        again for ``netloc``, which asked ``delay``: never below ``DOWNLOAD_DELAY`` or a
        ``DOWNLOAD_SLOTS`` delay, without Scrapy's jitter, one request at a time unless
        ``DOWNLOAD_SLOTS`` gives a concurrency; as Scrapy makes a slot once none asks one.
        ``again``: set again on a slot made anew (``pace_slot``), counted and said already."""
        downloader: PoliteDownloader = self.crawler.engine.downloader
        known = self._slot_delays.get(key)
        asks = self._slot_asks.get(key)
        said = netloc in self._skipped  # in the line that skips its pages
        if not asks:
            if known is not None:
                self._unpace(key)
                if not said:
                    logger.info(
                        "%s: robots.txt asks for no Crawl-delay now: its host is paced as any",
                        netloc,
                    )
            return
        floor = max(max(asks.values()), self._download_delay)
        self._slot_delays[key] = floor
        # A slot made later (the first, or a new one after Scrapy dropped this one when idle
        # for a minute) takes its delay from here; a DOWNLOAD_SLOTS delay is never lowered.
        user = self._user_slots.get(key, {})
        slot_settings = downloader.per_slot_settings.setdefault(key, {})
        slot_settings["delay"] = max(floor, float(user.get("delay", 0.0)))
        slot_settings["jitter"] = 0.0
        # Scrapy's delay is between sends: a page slower than it would overlap the next. One
        # request at a time, unless DOWNLOAD_SLOTS gives the host a concurrency of its own.
        slot_settings["concurrency"] = user.get("concurrency", 1)
        downloader.paced_from_end.add(key)
        slot = downloader.slots.get(key)
        if slot is not None:
            # Raised, AutoThrottle's longer delay is kept (it sets it after each response), and
            # lowered, AutoThrottle's delay is kept too, for it to lower from the next response.
            lowered = known is not None and floor < known and not self._autothrottle
            slot.delay = slot_settings["delay"] if lowered else max(floor, slot.delay)
            slot.jitter = 0.0
            slot.concurrency = slot_settings["concurrency"]
        if known == floor or again:
            # Read again as before (its text forgotten, or another netloc of the slot asked
            # the same): the slot is paced so already, counted and said.
            return
        if known is None and hash(key) not in self._crawl_delay_hosts:
            if len(self._crawl_delay_hosts) < CRAWL_DELAY_HOSTS_KEPT:
                self._crawl_delay_hosts.add(hash(key))
            self._stats.inc_value("focused/robots/crawl_delay_hosts")
        if not said:
            logger.info(
                "%s: robots.txt asks for %s: one request every %g s",
                netloc,
                f"a Crawl-delay of {delay:g} s" if netloc in asks else "no Crawl-delay now",
                slot_settings["delay"],
            )

    def _unpace(self, key: str) -> None:
        """Slot ``key`` as Scrapy makes one (``Downloader._get_slot``), none of its netlocs
        asking a delay any more."""
        downloader: PoliteDownloader = self.crawler.engine.downloader
        del self._slot_delays[key]
        downloader.paced_from_end.discard(key)
        user = self._user_slots.get(key)
        if user is None:
            downloader.per_slot_settings.pop(key, None)
        else:
            downloader.per_slot_settings[key] = dict(user)
        slot = downloader.slots.get(key)
        if slot is not None:
            user = user or {}
            concurrency = downloader.ip_concurrency or downloader.domain_concurrency
            slot.concurrency = user.get("concurrency", concurrency)
            if not self._autothrottle:  # its delay, for it to lower from the next response
                slot.delay = user.get("delay", downloader._delay)
            slot.jitter = _slot_jitter(user, downloader._jitter)

    def _keep_crawl_delay(self, response: Response, request: Request) -> None:
        downloader: Downloader = self.crawler.engine.downloader
        key = request.meta.get(downloader.DOWNLOAD_SLOT)
        floor = self._slot_delays.get(key) if key is not None else None
        if floor is None:
            return
        slot = downloader.slots.get(key)
        if slot is not None and slot.delay < floor:
            slot.delay = floor
