"""The settings of a crawl (``-s``, the project's, Scrapyd's ``-d setting=``) checked before
it starts: numbers in their ranges, booleans Scrapy can read, classes that import, the
files it writes (log, feeds) writable and not the store.

Every check raises :class:`focused.errors.ConfigError` with a one-line message. The
project's other commands (``recrawl``, ``restore``, ``forget``...) check their settings here
too.
"""

from __future__ import annotations

import ast
import codecs
import importlib.util
import ipaddress
import logging
import math
import os
import queue
import re
import socket
import sys
import tempfile
import threading
import time
import warnings
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit
from urllib.request import getproxies, proxy_bypass

from scrapy.core.downloader import _default_jitter, _slot_jitter
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.extensions.feedexport import apply_uri_params
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.conf import feed_complete_default_values_from_settings

from focused.errors import (
    ConfigError,
    cut,
    one_line,
    quoted,
    redact_uri,
    setting_options,
    spider_arguments,
)
from focused.render import BLOCKABLE_RESOURCES, blocked_resources
from focused.setting_names import check_setting_names, given_on_command_line
from focused.storage import DEFAULT_SQLITE_PATH

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from importlib.machinery import ModuleSpec

KIND_NAMES = {int: "an integer", float: "a number"}
# How long the start waits, in all, for the host names of DOWNLOAD_BIND_ADDRESS and the seeds to
# be looked up (_check_bind_address), and for how many seed names at most: a crawl of more
# is let be, its seeds that fail each saying why.
LOOKUP_S = 2.0
SEED_NAMES_LOOKED_UP = 16


HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110's token
LINE_BREAK = re.compile(r"[\r\n\0]")


def is_text(value: str) -> bool:
    """Encodable as UTF-8. Bytes of the command line that are not UTF-8 reach Python as lone
    surrogates, which no store, log line or HTTP header can take: the crawl would fail on them
    with a traceback once started."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_number(label: str, raw: Any, kind: type) -> Any:
    """``raw`` read as ``kind`` (int or float), as the crawl will read it; ``label`` names it in
    the error."""
    try:
        value = kind(raw)
    except (TypeError, ValueError):  # also "": a setting given empty is no number
        raise ConfigError(f"{label}={quoted(raw)} is not {KIND_NAMES[kind]}") from None
    if not _finite(value):  # nan passes every bound
        raise ConfigError(f"{label}={quoted(raw)} is not a finite number")
    if kind is int:
        _check_size(f"{label}=", raw, value)
    return value


def _finite(value: float) -> bool:
    """Not nan or infinite. An int is always finite, and math.isfinite would overflow on one
    too large for a float (a setting of 400 digits)."""
    return isinstance(value, int) or math.isfinite(value)


# A delay or pause longer than a day is no crawl: the host's next request waited for it, and
# DOWNLOAD_DELAY=1e300 was a crawl that never fetched its second page and never ended.
DAY = 86_400
# SQLite's busy timeout is a C int of milliseconds: a longer FOCUSED_DB_TIMEOUT overflowed it,
# and a write failed at once on a lock ("database is locked") rather than wait.
SQLITE_TIMEOUT_MAX = (2**31 - 1) / 1000

# Numeric settings: name -> (type, low, high). Checked before the crawl starts.
NUMERIC_SETTINGS: dict[str, tuple[type, float | None, float | None]] = {
    "RELEVANCE_THRESHOLD": (float, 0.0, 1.0),
    "RELEVANCE_LSI_WEIGHT": (float, 0.0, 1.0),
    "RELEVANCE_NUM_TOPICS": (int, 1, 10_000),
    "RELEVANCE_REFIT_EVERY": (int, 1, None),
    "RELEVANCE_MAX_DOCS": (int, 3, None),
    "RELEVANCE_FIT_TOKENS": (int, 0, None),
    "LINK_CONTEXT_CHARS": (int, 0, 100_000),
    "MAX_LINKS_PER_PAGE": (int, 0, None),
    "STORAGE_BATCH_SIZE": (int, 1, None),
    "STORAGE_RETRIES": (int, 0, None),
    "STORAGE_RETRY_DELAY": (float, 0.0, DAY),
    # At most a day: a run refused by a crawl beating less often named the time its beat goes
    # stale (3 beats on) with a date, which 1e300 overflowed (a traceback); and a crawl killed
    # outright held its id for 3 beats.
    "FOCUSED_HEARTBEAT_INTERVAL": (float, 1.0, DAY),
    "STORE_MIN_RELEVANCE": (float, 0.0, 1.0),  # relevance is in [0, 1]: above 1 stores nothing
    "CLOSESPIDER_PAGECOUNT": (int, 0, None),
    "CONCURRENT_REQUESTS": (int, 1, None),
    "FOCUSED_LOGSTATS_INTERVAL": (float, 0.0, None),
    "MONGO_TIMEOUT_MS": (int, 1, None),
    "FOCUSED_DB_TIMEOUT": (float, 0.0, SQLITE_TIMEOUT_MAX),
    "CLOSESPIDER_RELEVANT": (int, 0, None),
    "DRIFT_WINDOW": (int, 0, None),
    "DRIFT_MIN_HARVEST": (float, 0.0, 1.0),
    "FRONTIER_MAX": (int, 0, None),
    "MAX_PAGES_PER_HOST": (int, 0, None),
    "HOST_WINDOW": (int, 0, None),
    "HOST_WINDOW_SCAN": (int, 1, None),
    "HELD_HOST_LOOKAHEAD": (int, 0, None),
    "FOCUSED_RENDER_AUTO_MIN_WORDS": (int, 0, None),
    "FOCUSED_RENDER_AUTO_MIN_LINKS": (int, 0, None),
    "FOCUSED_RENDER_SETTLE_MS": (int, 0, None),
    "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": (int, 1, None),
    "PLAYWRIGHT_MAX_CONTEXTS": (int, 1, None),
    # Node's timers hold at most 2**31 - 1 ms (24.8 days): Playwright took a longer navigation
    # timeout as 1 ms, and every page failed.
    "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": (float, 1.0, 2**31 - 1),
    "PLAYWRIGHT_DOWNLOAD_TIMEOUT": (int, 0, 2**31 - 1),
    # A week: Redis keeps its expiries in milliseconds, and about 9e15 s of them failed the
    # crawl once it started (frontier_unreachable).
    "FOCUSED_WORKER_TIMEOUT": (float, 1.0, 604_800),
    "TRAP_MAX_PER_FAMILY": (int, 0, None),
    "TRAP_QUERY_VARIANTS": (int, 1, None),
    "NEAR_DUPLICATE_DISTANCE": (int, -1, 3),
    "ENCODER_CACHE_SIZE": (int, 1, None),
    "ENCODER_WHOLE_SHARE": (float, 0.0, 1.0),
    "ENCODER_STORE_SIZE": (int, 0, None),
    "FOCUSED_GC_GEN0_THRESHOLD": (int, 0, 10_000_000),
    "ROBOTS_CRAWL_DELAY_MAX": (float, 0.0, DAY),
    "ROBOTS_PARSERS_MAX": (int, 1, None),
    "ROBOTS_TEXTS_MAX": (int, 0, None),
    # A week, as FOCUSED_WORKER_TIMEOUT: a shared crawl keeps it in Redis in milliseconds.
    "ROBOTS_RETRY_FAILED_AFTER": (float, 0.0, 604_800),
    "ROBOTS_HOLD_RETRIES": (int, 0, None),
    "RETRY_AFTER_MAX": (float, 0.0, DAY),
    "RETRY_BACKOFF_BASE": (float, 0.0, None),
    # Scrapy's own numbers are checked from their defaults (scrapy_setting_checks); these
    # have bounds of their own, or no default to be checked from.
    "CONCURRENT_REQUESTS_PER_DOMAIN": (int, 1, None),
    # 0: a pool without threads, where no host name is ever resolved: every request, the
    # seeds' too, timed out after DOWNLOAD_TIMEOUT, and the crawl ended "No seed could be
    # fetched".
    "REACTOR_THREADPOOL_MAXSIZE": (int, 1, None),
    # Scrapy's without a default, so not among those checked from their defaults: text was a
    # traceback as the crawl opened, and a negative number a crawl that never sent a request
    # and never ended (0: the per-domain concurrency, Scrapy's meaning).
    "CONCURRENT_REQUESTS_PER_IP": (int, 0, None),
    # Scrapy's memory check (MEMUSAGE_ENABLED, on by default) is a Twisted LoopingCall, which
    # refuses 0: a traceback as the engine started, and a crawl without its memory limits. Under
    # a second it would only spend CPU: as FOCUSED_HEARTBEAT_INTERVAL, at least 1.
    "MEMUSAGE_CHECK_INTERVAL_SECONDS": (float, 1.0, None),
    # 0: Scrapy scrapes the first page and stops. Scrapy starts this many tasks for each page's
    # outputs, however few they are: 100,000 cost 1.5 s a page, a million about a minute.
    "CONCURRENT_ITEMS": (int, 1, 10_000),
    # Scrapy's delays before a host's next request (AutoThrottle's first one, and the most it
    # may raise it to: latency over AUTOTHROTTLE_TARGET_CONCURRENCY, 1e-300 of it a hang too).
    "DOWNLOAD_DELAY": (float, 0.0, DAY),
    "AUTOTHROTTLE_START_DELAY": (float, 0.0, DAY),
    "AUTOTHROTTLE_MAX_DELAY": (float, 0.0, DAY),
}
# Numeric settings off by default (None): given empty (-s NAME=), they stay off. Any other
# number given empty is read as one once the crawl has started: a traceback.
EMPTY_MEANS_NONE = frozenset({"STORE_MIN_RELEVANCE"})


# Settings read with Settings.getbool, which raises on anything but 0/1, true/false.
BOOLEAN_SETTINGS = (
    "SCORE_BEFORE_DISPATCH",
    "RELEVANCE_REFIT_THREAD",
    "HEAD_CHECK",
    "ROBOTS_META_OBEY",
    "FOCUSED_GC_FREEZE",
    "PLAYWRIGHT_RESTART_DISCONNECTED_BROWSER",
)

# A dotted name of a module's attribute: the default of a setting that names what to import.
IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
# Scrapy's own settings whose getter is not that of their default's type (REFERRER_POLICY
# also takes a policy's name, "no-referrer").
SCRAPY_READS_AS = {
    "REFERRER_POLICY": object,
    "DNS_TIMEOUT": float,
    "DOWNLOAD_TIMEOUT": float,
    "TELNETCONSOLE_ENABLED": bool,
}


# Scrapy's settings that name a class or function though their default is no import path:
# Scrapy 2.19's context factory's is "SENTINEL", for its own (a path that cannot be imported
# failed every request, with a traceback each); the event loop's and the feeds' URI parameters'
# are None (a traceback as the crawler process was made; the feed not written, exit 0).
CLASS_SETTINGS = ("DOWNLOADER_CLIENTCONTEXTFACTORY", "ASYNCIO_EVENT_LOOP", "FEED_URI_PARAMS")


@cache
def scrapy_setting_checks() -> tuple[
    tuple[str, ...], dict[str, tuple[type, float | None, None]], tuple[str, ...]
]:
    """Scrapy's own boolean settings; its numeric ones, with the type each is read as: its
    default's (``SCRAPY_READS_AS`` where Scrapy reads it otherwise); and those that name a class
    or function to import (``DUPEFILTER_CLASS``, ``DOWNLOADER``). Given as text (``-s NAME=VALUE``,
    Scrapyd's ``-d setting=NAME=VALUE``), a value Scrapy cannot read or import is a traceback
    once the crawl has started, and a negative count or limit is taken as one (``DEPTH_LIMIT=-1``
    drops every link, ``URLLENGTH_LIMIT=-1`` every URL): only the ``*PRIORITY*`` adjustments may
    be negative."""
    from scrapy.settings import default_settings

    booleans, numbers, classes = [], {}, []
    for name, default in vars(default_settings).items():
        if not name.isupper() or name in NUMERIC_SETTINGS:
            continue
        kind = SCRAPY_READS_AS.get(name, type(default))
        if kind is bool:
            booleans.append(name)
        elif kind in (int, float):
            numbers[name] = (kind, None if "PRIORITY" in name else kind(0), None)
        elif name in CLASS_SETTINGS or (kind is str and IMPORT_PATH.fullmatch(default)):
            classes.append(name)
    return tuple(booleans), numbers, tuple(classes)


def check_settings(
    settings: Any, *, crawls: bool = True, scrapyd: bool = False, seeds: tuple[str, ...] = ()
) -> None:
    """Refuse, with ``ConfigError``, settings the command would fail on once running. Without
    ``crawls`` (the store's commands, restore, forget) the command makes no crawler process,
    fetches nothing and writes no feed: a project's SPIDER_MODULES, DOWNLOAD_BIND_ADDRESS and
    FEEDS, true of the machine that crawls, are let be on one that only reads the store.
    ``scrapyd``: as ``spider_arguments`` takes it. ``seeds``: the crawl's, which
    DOWNLOAD_BIND_ADDRESS must reach (``_check_bind_reaches_seeds``)."""
    check_setting_names(settings, scrapyd)
    scrapy_booleans, scrapy_numbers, scrapy_classes = scrapy_setting_checks()
    given_as_text = [name for name in scrapy_booleans if isinstance(settings[name], str)]
    for name in (*BOOLEAN_SETTINGS, *given_as_text):
        try:
            settings.getbool(name)
        except ValueError:
            raise ConfigError(
                f"setting {name}={quoted(settings.get(name))} is not true or false"
            ) from None
    for name, bounds in NUMERIC_SETTINGS.items():
        _check_number(name, settings.get(name), *bounds)
    for name, bounds in scrapy_numbers.items():
        if isinstance(raw := settings[name], str):
            _check_number(name, raw, *bounds)
    for name in scrapy_classes:  # those the project names are imported anyway
        if given_on_command_line(settings, name):
            check_import_setting(settings, name)
    if crawls:
        check_spider_loader(settings)
    _check_components(settings)
    _check_integer_lists(settings)
    _check_download_slots(settings)
    _check_jittered_delays(settings)
    _check_paths(settings)
    _check_logging(settings)
    _check_http_auth(settings, scrapyd)
    _check_tls(settings)
    if crawls:
        _check_feeds(settings)
    # Sent with every request, which Scrapy encodes as UTF-8: a traceback for each request.
    headers = settings.getdict("DEFAULT_REQUEST_HEADERS")
    for name, text in (
        ("USER_AGENT", settings.get("USER_AGENT")),
        ("DEFAULT_REQUEST_HEADERS", " ".join(str(part) for part in [*headers, *headers.values()])),
    ):
        if isinstance(text, str) and not is_text(text):
            raise ConfigError(f"setting {name} is not UTF-8 text: it is sent with every request")
    for header, value in headers.items():
        if not HEADER_NAME.fullmatch(str(header)) or LINE_BREAK.search(str(value)):
            raise ConfigError(
                f"setting DEFAULT_REQUEST_HEADERS: {quoted(str(header))}: {quoted(str(value))} "
                "is no HTTP header (a name of letters, digits and !#$%&'*+-.^_`|~, a value on "
                "one line): every request would fail"
            )
    # focused.render launches Chromium (FOCUSED_CHROMIUM) with its options: scrapy-playwright
    # would fail on another browser type with a traceback once the crawl renders.
    browser = settings.get("PLAYWRIGHT_BROWSER_TYPE")
    if browser and browser != "chromium":
        raise ConfigError(
            f"setting PLAYWRIGHT_BROWSER_TYPE={quoted(browser)}: pages render in chromium"
        )
    _check_playwright(settings)
    unblockable = sorted(blocked_resources(settings) - BLOCKABLE_RESOURCES)
    if unblockable:
        raise ConfigError(
            f"setting FOCUSED_RENDER_BLOCK: {quoted(unblockable[0])} is not one of:"
            f" {', '.join(sorted(BLOCKABLE_RESOURCES))}"
        )
    if crawls:
        # Last: its lookups may wait LOOKUP_S, which the checks above need not.
        _check_bind_address(settings, seeds)


# scrapy-playwright's settings read as JSON objects, and those naming what it imports: it reads
# them as its download handler loads, and a value it cannot read was a traceback there (the
# crawl then fetched nothing, exit status 1) or as the browser started (the crawl went on
# without the contexts asked for). The contexts' keywords are Playwright's, checked as
# focused.render.check_browser opens each once.
PLAYWRIGHT_OBJECTS = ("PLAYWRIGHT_CONTEXTS", "PLAYWRIGHT_CDP_KWARGS", "PLAYWRIGHT_CONNECT_KWARGS")
PLAYWRIGHT_IMPORTS = ("PLAYWRIGHT_BROWSER_PROVIDER", "PLAYWRIGHT_PROCESS_REQUEST_HEADERS")


def _check_playwright(settings: Any) -> None:
    for name in ("PLAYWRIGHT_CDP_URL", "PLAYWRIGHT_CONNECT_URL"):
        # The crawl renders in the Chromium it checks at start-up (FOCUSED_CHROMIUM, its flags);
        # with a remote one the check launched the local browser, and a remote that did not
        # answer showed only as "No seed could be fetched".
        if settings.get(name):
            raise ConfigError(
                f"setting {name}: a remote browser is not supported; the crawl renders in its "
                "own Chromium (FOCUSED_CHROMIUM)"
            )
    for name in PLAYWRIGHT_OBJECTS:
        try:
            settings.getdict(name)
        except (TypeError, ValueError):  # not JSON, or JSON but no object
            raise ConfigError(
                f"setting {name}={quoted(settings.get(name))} is no JSON object"
            ) from None
    for context, options in settings.getdict("PLAYWRIGHT_CONTEXTS").items():
        if not isinstance(options, dict):
            raise ConfigError(
                f"setting PLAYWRIGHT_CONTEXTS: {quoted(context)} has {quoted(options)}; give a"
                ' JSON object of Playwright\'s context options, such as {"locale": "en-GB"}'
            )
        if options.get("user_data_dir"):
            # scrapy-playwright launches a persistent context as a browser of its own, without
            # the launch options (FOCUSED_CHROMIUM, its flags): a traceback, and the crawl went
            # on in a fresh context. Its http and https browsers would also share the profile,
            # which Chromium locks to one.
            raise ConfigError(
                f"setting PLAYWRIGHT_CONTEXTS: {quoted(context)} has a user_data_dir; a persistent"
                " context cannot be used: give a logged-in session's cookies with storage_state"
                " (a file of Playwright's) instead"
            )
    for name in PLAYWRIGHT_IMPORTS:
        if given_on_command_line(settings, name):
            check_import_setting(settings, name)


def _check_bind_address(settings: Any, seeds: tuple[str, ...]) -> None:
    """``DOWNLOAD_BIND_ADDRESS``, the local address every connection is made from (Scrapy's
    ``host`` or ``[host, port]``): one this machine cannot bind failed every request, a
    traceback at each robots.txt, and the crawl fetched nothing. Each connection's socket, of
    its host's family, binds a host name to its address of that family: a name binds if one of
    its addresses does, of either family (bound as IPv4, a name of IPv6 addresses alone was
    refused). Then, of one family, it must reach the ``seeds`` (``_check_bind_reaches_seeds``).
    A name is looked up once for both checks, and the seeds' names within the same ``LOOKUP_S``
    (``_looked_up``): each check looked it up, a slow resolver holding the start for twice the
    bound. One not known by then is let be."""
    address = settings.get("DOWNLOAD_BIND_ADDRESS")
    if not address:
        return
    deadline = time.monotonic() + LOOKUP_S
    try:
        host, port = (address, 0) if isinstance(address, str) else address
        host, port = str(host), int(port)
        version = _ip_version(host)
        bound = {version: host} if version else None
        addresses = [host]
        if host and version is None:
            bound = dict(_looked_up([host], deadline)).get(host)
            if bound is None:
                return
            addresses = list(bound.values()) or addresses  # none: its bind says why
        for number, probed in enumerate(addresses, 1):
            try:
                with socket.socket(socket.AF_INET6 if ":" in probed else socket.AF_INET) as probe:
                    probe.bind((probed, port))
                break
            except OSError:
                if number == len(addresses):
                    raise
    except (OSError, TypeError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else one_line(exc)
        raise ConfigError(
            f"setting DOWNLOAD_BIND_ADDRESS={quoted(address)} cannot be bound here: {reason}"
        ) from None
    # Not known in time, or of both families (or of none, bound all the same): any seed's.
    if bound is not None and len(bound) == 1:
        _check_bind_reaches_seeds(
            settings, seeds, address=address, host=host, bound=bound, deadline=deadline
        )


def _check_bind_reaches_seeds(
    settings: Any,
    seeds: tuple[str, ...],
    *,
    address: Any,
    host: str,
    bound: dict[int, str],
    deadline: float,
) -> None:
    """Refuse a ``DOWNLOAD_BIND_ADDRESS`` (``address`` as given, of ``host``) of one address
    family (IPv6, ``::1``; ``bound``: its address, by version) when every seed is an address of
    the other (IPv4, ``127.0.0.1``): no connection from it reaches them, each request failed,
    with a traceback, and the crawl fetched nothing (not through a proxy, to which each
    connection is then made: ``_proxied``). A seed's host name has the families of its
    addresses: each is looked up, in a thread, until ``deadline`` (at most
    ``SEED_NAMES_LOOKED_UP`` seed names), so that a slow resolver holds the start no longer. A
    name that does not answer in time, or not at all, is let be, and so are the seeds when one
    can be reached: each that fails says why (``focused.hygiene.other_family``)."""
    if not seeds or _proxied(settings, seeds):
        return
    [(version, bound_ip)] = bound.items()
    names: dict[str, str] = {}  # each seed host name, and its first seed
    for seed in seeds:
        seed_host = urlsplit(seed).hostname or ""
        seed_version = _ip_version(seed_host)
        if seed_version == version:
            return
        if seed_version is None:
            names.setdefault(seed_host, seed)
    if len(names) > SEED_NAMES_LOOKED_UP:
        return
    answers = dict(_looked_up(names, deadline))
    if len(answers) < len(names) or any(not a or version in a for a in answers.values()):
        return  # one not known in time, none, or one of the bind address's family
    other = 4 if version == 6 else 6
    seed_ip = answers.get(urlsplit(seeds[0]).hostname or "", {}).get(other)
    raise ConfigError(
        f"setting DOWNLOAD_BIND_ADDRESS={quoted(address)} is an IPv{version} address"
        f"{'' if bound_ip == host else f' ({bound_ip})'}, and every seed an IPv{other} one"
        f" ({cut(seeds[0])}{f' at {seed_ip}' if seed_ip else ''}): no connection from one"
        f" family reaches the other; give an IPv{other} bind address, or none"
    )


def _proxied(settings: Any, seeds: tuple[str, ...]) -> bool:
    """Whether a seed is fetched through a proxy (Scrapy's HttpProxyMiddleware, from http_proxy
    or https_proxy in the environment, but for the hosts of no_proxy): each connection is then to
    the proxy, from the bind address, whatever the seeds' family."""
    if not settings.getbool("HTTPPROXY_ENABLED"):
        return False
    proxies = getproxies()
    return any(
        (parts := urlsplit(seed)).scheme in proxies and not proxy_bypass(parts.hostname or "")
        for seed in seeds
    )


def _looked_up(names: Iterable[str], deadline: float) -> Iterator[tuple[str, dict[int, str]]]:
    """Each name and its first address of each IP version (none: it does not resolve), as the
    lookups answer until ``deadline`` (``time.monotonic``). Each runs in a daemon thread: one
    that never answers holds neither the start nor the exit."""
    answers: queue.SimpleQueue[tuple[str, dict[int, str]]] = queue.SimpleQueue()
    names = list(names)
    for name in names:
        threading.Thread(
            target=_look_up, args=(name, answers), name="focused-lookup", daemon=True
        ).start()
    for _ in names:
        try:
            yield answers.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return


def _look_up(name: str, answers: queue.SimpleQueue[tuple[str, dict[int, str]]]) -> None:
    found: dict[int, str] = {}
    try:
        for family, _, _, _, sockaddr in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM):
            if family in (socket.AF_INET, socket.AF_INET6):
                found.setdefault(4 if family == socket.AF_INET else 6, str(sockaddr[0]))
    except (OSError, UnicodeError):
        pass
    answers.put((name, found))


def _ip_version(host: str) -> int | None:
    """4 or 6 for an IP address, None for a host name."""
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None


TLS_SETTINGS = (
    "DOWNLOAD_TLS_MIN_VERSION",
    "DOWNLOAD_TLS_MAX_VERSION",
    "DOWNLOADER_CLIENT_TLS_METHOD",
)


def _check_tls(settings: Any) -> None:
    """Scrapy's TLS settings given on the command line (its defaults are good), which its
    download handler looks up in its own tables as it loads: another value failed the handler
    of http: too, with a traceback, and the crawl fetched nothing (exit status 1)."""
    given = [name for name in TLS_SETTINGS if given_on_command_line(settings, name)]
    if not given:
        return  # pyOpenSSL, which the tables' module imports: not for every command
    from scrapy.core.downloader.tls import _TWISTED_VERSION_MAP, _openssl_methods

    for name in given:
        known = _openssl_methods if name == "DOWNLOADER_CLIENT_TLS_METHOD" else _TWISTED_VERSION_MAP
        value = settings.get(name)
        if value is not None and value not in known:
            raise ConfigError(f"setting {name}={quoted(value)} is not one of: {', '.join(known)}")


def _check_http_auth(settings: Any, scrapyd: bool) -> None:
    """Scrapy's HttpAuthMiddleware refuses credentials without the domain they are for, with a
    traceback as the crawl starts."""
    given = [name for name in ("HTTPAUTH_USER", "HTTPAUTH_PASS") if settings.get(name)]
    if given and settings.getpriority("HTTPAUTH_DOMAIN") <= SETTINGS_PRIORITIES["default"]:
        domain = setting_options("HTTPAUTH_DOMAIN=example.org", scrapyd=scrapyd)
        raise ConfigError(
            f"setting {given[0]} needs HTTPAUTH_DOMAIN, the host the credentials are sent to"
            f" ({domain}: that host and its subdomains)"
        )


def dns_timeout_note(settings: Any) -> str | None:
    """A warning when ``DNS_TIMEOUT`` is given but the crawl's resolver has no timeout: only
    Scrapy's IPv4-only ``CachingThreadedResolver`` reads it, and the project's resolver, which
    answers IPv6 too, bounds a lookup by ``DOWNLOAD_TIMEOUT``. None when it applies, or is not
    given."""
    from scrapy.resolver import CachingThreadedResolver
    from scrapy.utils.misc import load_object

    if not given_on_command_line(settings, "DNS_TIMEOUT"):
        return None
    # Scrapy's older name is still read when given, unless the new one is given higher.
    older = settings.getpriority("DNS_RESOLVER") or 0
    newer = settings.getpriority("TWISTED_DNS_RESOLVER") or 0
    name = "TWISTED_DNS_RESOLVER"
    if SETTINGS_PRIORITIES["default"] < older >= newer:
        name = "DNS_RESOLVER"
    if issubclass(load_object(settings[name]), CachingThreadedResolver):
        return None
    return (
        f"DNS_TIMEOUT={quoted(settings.get('DNS_TIMEOUT'))} has no effect: the resolver"
        f" ({name}={settings[name]}) has no timeout of its own; DOWNLOAD_TIMEOUT"
        f" ({settings.getfloat('DOWNLOAD_TIMEOUT'):g} s) bounds a lookup. Scrapy's"
        " scrapy.resolver.CachingThreadedResolver reads it, and resolves to IPv4 only"
    )


# Scrapy's settings that give the order of the classes they name (None: not loaded), and those
# that name a class for each scheme or format (None: none). Scrapy loads them as the crawl
# starts: a class that does not import, or an order that is no number, was a traceback.
COMPONENT_ORDERS = (
    "ADDONS",
    "DOWNLOADER_MIDDLEWARES",
    "EXTENSIONS",
    "ITEM_PIPELINES",
    "SPIDER_CONTRACTS",
    "SPIDER_MIDDLEWARES",
)
COMPONENTS_BY_NAME = ("DOWNLOAD_HANDLERS", "FEED_EXPORTERS", "FEED_STORAGES")
DUMMY_STATS = "scrapy.statscollectors.DummyStatsCollector"


def _check_components(settings: Any) -> None:
    for name in (*COMPONENT_ORDERS, *COMPONENTS_BY_NAME):
        if not given_on_command_line(settings, name):
            continue
        for key, value in settings.getdict(name).items():
            if value is None:  # not loaded
                continue
            _check_import(f"setting {name}: ", key if name in COMPONENT_ORDERS else value)
            if name in COMPONENT_ORDERS and not _is_number(value, float):
                raise ConfigError(
                    f"setting {name}: {quoted(key)} has order {quoted(value)}; give a number, "
                    "or null to turn it off"
                )
    handlers = settings.getwithbase("DOWNLOAD_HANDLERS")
    for scheme in ("http", "https"):
        if handlers.get(scheme) is None:  # every request failed, with a traceback each
            raise ConfigError(
                f"setting DOWNLOAD_HANDLERS turns off {scheme}:, which the crawl fetches with"
            )
    if settings.get("STATS_CLASS") == DUMMY_STATS:
        raise ConfigError(
            f"setting STATS_CLASS={DUMMY_STATS} keeps no stats, which the crawl reads (its page"
            " budget, its progress, its exit status: it exited 1 with no word)"
        )
    if given_on_command_line(settings, "RETRY_EXCEPTIONS"):
        for path in settings.getlist("RETRY_EXCEPTIONS"):
            _check_import("setting RETRY_EXCEPTIONS: ", path)


def check_import_setting(settings: Any, name: str) -> None:
    """The class setting ``name`` imports."""
    _check_import(f"setting {name}=", settings[name])


def check_spider_loader(settings: Any) -> None:
    """The settings of Scrapy's spider loader, which imports every module of ``SPIDER_MODULES``
    as a command's crawler process is made, before the command has run (recrawl) or as it
    looks up its spider (crawl): a module that does not import was a traceback."""
    check_import_setting(settings, "SPIDER_LOADER_CLASS")
    # With SPIDER_LOADER_WARN_ONLY the loader warns of a module that does not import and the
    # crawl goes on; a name that is empty or relative fails it all the same.
    warn_only = settings.getbool("SPIDER_LOADER_WARN_ONLY")
    for module in settings.getlist("SPIDER_MODULES"):
        if warn_only and module and not module.startswith("."):
            continue
        if isinstance(problem := _find_module(module), str):
            raise ConfigError(
                f"setting SPIDER_MODULES: {quoted(module)} cannot be imported: {problem}"
            )


def _check_import(label: str, path: Any) -> None:
    """A class (or function) named by its path imports; ``label`` starts the error."""
    if isinstance(path, str) and (problem := _import_problem(path)):
        raise ConfigError(f"{label}{quoted(path)} cannot be imported: {problem}")


# Scrapy's settings that list whole numbers (HTTP status codes, ports), which it reads with
# int() as the crawl starts (a traceback) or compares with a response's status (a code given
# as "abc" matched nothing, silently).
INTEGER_LISTS = (
    "HTTPCACHE_IGNORE_HTTP_CODES",
    "HTTPERROR_ALLOWED_CODES",
    "RETRY_HTTP_CODES",
    "TELNETCONSOLE_PORT",
)


def _check_integer_lists(settings: Any) -> None:
    for name in INTEGER_LISTS:
        for item in settings.getlist(name):
            try:
                number = int(item)
            except (TypeError, ValueError):
                raise ConfigError(
                    f"setting {name}: {quoted(item)} is not a whole number (give them separated by "
                    "commas: 500,502)"
                ) from None
            _check_size(f"setting {name}: ", item, number)


def _check_size(label: str, raw: Any, number: int) -> None:
    """At most 64 bits, as an index, a deque's length, an SQLite INTEGER, and a crawl record's
    fetch settings on MongoDB (``focused.fetchsettings``) take an integer: past that, an
    OverflowError once the crawl ran."""
    if abs(number) > sys.maxsize:
        raise ConfigError(f"{label}{cut(str(raw))} is too large: at most {sys.maxsize}")


def allow_status_codes_as_numbers(settings: Any) -> None:
    """HTTPERROR_ALLOWED_CODES as integers. Scrapy's HttpErrorMiddleware compares its items with
    each response's status as they are, and from ``-s HTTPERROR_ALLOWED_CODES=404`` they are
    strings: no response was ever let through. (Checked as whole numbers by check_settings.)"""
    name = "HTTPERROR_ALLOWED_CODES"
    codes = [int(code) for code in settings.getlist(name)]
    settings.set(name, codes, settings.getpriority(name) or "project")


# What Scrapy's downloader reads from a DOWNLOAD_SLOTS entry as it makes the host's slot, and
# the least and the most of each (a delay: at most a day, as DOWNLOAD_DELAY).
SLOT_NUMBERS: dict[str, tuple[type, float, float | None]] = {
    "concurrency": (int, 1, None),
    "delay": (float, 0.0, DAY),
    "jitter": (float, 0.0, None),
}


def _check_download_slots(settings: Any) -> None:
    """A value of another type was a traceback for each request to the host, a concurrency
    below 1 a crawl that never fetched from it."""
    for host, slot in settings.getdict("DOWNLOAD_SLOTS").items():
        if not isinstance(slot, dict):
            raise ConfigError(
                f"setting DOWNLOAD_SLOTS: {quoted(host)} has {quoted(slot)}; give a JSON object, "
                'such as {"concurrency": 2, "delay": 1.0}'
            )
        for key, (kind, low, high) in SLOT_NUMBERS.items():
            value = slot.get(key, low)
            if not _is_number(value, kind) or value < low or (high is not None and value > high):
                most = f" and at most {high:g}" if high is not None else ""
                raise ConfigError(
                    f"setting DOWNLOAD_SLOTS: {quoted(host)} has {key}={quoted(value)}; give "
                    f"{KIND_NAMES[kind]}, at least {low:g}{most}"
                )
            if kind is int:
                _check_size(f"setting DOWNLOAD_SLOTS: {quoted(host)} has {key}=", value, value)


def _check_jittered_delays(settings: Any) -> None:
    """Scrapy draws a host's delay up to (1 + jitter) times its own (a jitter above 1 reaches
    below 0, floored there): at most a day too. DOWNLOAD_DELAY=1 with DOWNLOAD_DELAY_JITTER=1e300
    never sent a host's second request, and the crawl never ended."""
    delay = settings.getfloat("DOWNLOAD_DELAY")
    slots: dict[str | None, dict] = {None: {}, **settings.getdict("DOWNLOAD_SLOTS")}
    # As Scrapy's downloader reads them: RANDOMIZE_DOWNLOAD_DELAY=False, or a slot's
    # "randomize_delay": false, is no jitter (taken for 0.5, a delay over 16 hours was refused).
    # Scrapy says they are deprecated as the crawl starts: not here as well.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScrapyDeprecationWarning)
        jitter = _default_jitter(settings)
        jitters = {host: _slot_jitter(slot, jitter) for host, slot in slots.items()}
    for host, slot in slots.items():
        slot_delay, slot_jit = slot.get("delay", delay), jitters[host]
        if (longest := slot_delay * (1 + slot_jit)) > DAY:
            given = (
                f"DOWNLOAD_DELAY={slot_delay:g} with DOWNLOAD_DELAY_JITTER={slot_jit:g}"
                if host is None
                else f"DOWNLOAD_SLOTS: {quoted(host)} has delay={slot_delay:g}, jitter={slot_jit:g}"
            )
            raise ConfigError(
                f"setting {given}: delays up to {longest:g} s are drawn; at most a day ({DAY})"
            )


def _is_number(value: Any, kind: type) -> bool:
    """A JSON number of ``kind`` (a float may be written as an int), finite; not a bool."""
    kinds = (int,) if kind is int else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool) and _finite(value)


def _check_number(name: str, raw: Any, kind: type, low: float | None, high: float | None) -> None:
    if raw is None or (raw == "" and name in EMPTY_MEANS_NONE):
        return
    value = read_number(f"setting {name}", raw, kind)
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"[{low if low is not None else '-inf'}, {high if high is not None else 'inf'}]"
        raise ConfigError(f"setting {name}={cut(str(raw))} is outside {bounds}")


def _import_problem(path: str) -> str | None:
    """Why ``path`` (``module.attribute``) would not import; None if it would, or may. The
    module is found but not run: a module that imports Twisted's reactor would install the
    default one before Scrapy installs the crawl's (asyncio), and the crawl could not start.
    The attribute is looked for among the names its source binds anywhere (a module built
    otherwise, or one with a ``__getattr__`` or a star import, may have any)."""
    module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        return "give a full path, module.Name"
    spec = _find_module(module_name)
    if isinstance(spec, str):
        return spec
    if module_name in sys.modules:
        found = hasattr(sys.modules[module_name], attribute)
    elif spec.origin and spec.origin.endswith(".py"):
        names = _bound_names(Path(spec.origin))
        found = attribute in names or not names.isdisjoint({"*", "__getattr__"})
    else:
        found = True
    return None if found else f"module {quoted(module_name)} has no {quoted(attribute)}"


def _find_module(name: str) -> ModuleSpec | str:
    """The spec of the module ``name``, found but not run, or why it would not import."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:  # a parent is no package, or cannot be imported
        return str(exc)
    return spec if spec is not None else f"no module named {quoted(name)}"


def _bound_names(source: Path) -> set[str]:
    """The names a module's source binds, at any depth ("*": a star import, which may bind
    any; a source that cannot be read or parsed may too)."""
    try:
        tree = ast.parse(source.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return {"*"}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


# Settings the crawl makes from its arguments and its own settings: given on the command line,
# one would order the crawl while its record and scoring follow -a strategy, or be replaced.
MADE_SETTINGS = {
    # {strategy}: how this run is given its strategy (spider_arguments)
    "SCHEDULER_PRIORITY_QUEUE": "the strategy's queue: choose the strategy with {strategy}",
    "PLAYWRIGHT_LAUNCH_OPTIONS": "made for the crawl's Chromium: choose it with FOCUSED_CHROMIUM",
    "PLAYWRIGHT_ABORT_REQUEST": "made from FOCUSED_RENDER_BLOCK: list the resource types there",
}


def check_no_made_setting_given(settings: Any, scrapyd: bool = False) -> None:
    """``scrapyd``: as ``spider_arguments`` takes it."""
    strategy = spider_arguments("strategy=NAME", scrapyd=scrapyd)
    for name, why in MADE_SETTINGS.items():
        if given_on_command_line(settings, name):
            raise ConfigError(f"setting {name} is {why.format(strategy=strategy)}")


# Settings naming a file or folder the crawl makes (FOCUSED_DB's check is the store's). Given
# as blanks, a shell variable that expanded to a space, each made one named " " in the working
# directory and wrote the crawl there, which nobody asked for.
PATH_SETTINGS = (
    "JOBDIR",
    "LOG_FILE",
    "FOCUSED_UNSTORED_DIR",
    "WARC_DIR",
    "ENCODER_EXPORT_DIR",
    "ENCODER_STORE_DIR",
)


def _check_paths(settings: Any) -> None:
    for name in PATH_SETTINGS:
        value = settings.get(name)
        if isinstance(value, str) and value and not value.strip():
            raise ConfigError(f"setting {name} needs a path, not {quoted(value)}")
    for name in (*PATH_SETTINGS, "FOCUSED_DB"):
        value = settings.get(name)
        # A ~ that no shell expanded (quoted, in a settings module, Scrapyd's -d setting=): the
        # crawl wrote into a folder named "~" in the working directory, not the home folder.
        if isinstance(value, str) and value.startswith("~"):
            raise ConfigError(
                f"setting {name}={quoted(value)} starts with a ~ that no shell expanded: give the"
                f" full path ({quoted(os.path.expanduser(value))}?)"
            )


def _check_logging(settings: Any) -> None:
    """LOG_LEVEL, LOG_FORMAT, LOG_ENCODING and LOG_FILE, which Scrapy uses as it sets up
    logging, before anything else: a mistake there is a traceback and no log."""
    level = settings.get("LOG_LEVEL")
    # Scrapy hands it to logging.Handler.setLevel as it is: a name, in capitals.
    if isinstance(level, str) and level not in logging.getLevelNamesMapping():
        raise ConfigError(
            f"setting LOG_LEVEL={quoted(level)} is not a log level: CRITICAL, ERROR, WARNING, INFO "
            "or DEBUG"
        )
    fmt, datefmt = settings.get("LOG_FORMAT"), settings.get("LOG_DATEFORMAT")
    try:  # a field no log record has fails on every line, each an error report of its own
        logging.Formatter(fmt, datefmt).format(logging.makeLogRecord({"msg": "a line"}))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"setting LOG_FORMAT={quoted(fmt)} cannot format a log line: {one_line(exc)}"
        ) from None
    encoding = settings.get("LOG_ENCODING")
    if encoding:
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ConfigError(
                f"setting LOG_ENCODING={quoted(encoding)} is not an encoding"
            ) from None
    log_file = settings.get("LOG_FILE")
    if log_file:
        check_output_file(Path(log_file), f"LOG_FILE {quoted(str(log_file))}", settings=settings)


def _check_feeds(settings: Any) -> None:
    """The feeds (-o/-O, FEEDS) have a format Scrapy exports (it would export nothing, after an
    error line, and the crawl would exit 0) and their local files can be written. Scrapy opens
    them at the first page; a path it cannot write fails then, with a traceback for every page,
    and the crawl exits 0."""
    formats = sorted(k for k, v in settings.getwithbase("FEED_EXPORTERS").items() if v)
    for uri, options in settings.getdict("FEEDS").items():
        uri = str(uri)
        if not isinstance(options, dict):
            raise ConfigError(
                f"{feed_named(uri)} has options {quoted(options)}; give a JSON object, "
                'such as {"format": "jsonlines"}'
            )
        # Without a format, Scrapy takes the file's extension; without an encoding, the setting's.
        completed = feed_complete_default_values_from_settings(options, settings, uri)
        kind = completed["format"]
        if kind not in formats:
            # A format taken from the URI's end holds its query, a token in it too.
            shown = redact_uri(kind) if isinstance(kind, str) else kind
            raise ConfigError(
                f"{feed_named(uri)} has format {quoted(shown)}; "
                f"Scrapy exports: {', '.join(formats)}"
            )
        _check_feed_batches(uri, options, settings)
        _check_feed_plugins(uri, options)
        _check_feed_encoding(uri, completed["encoding"])
        path = local_feed_path(uri)
        if path is None:
            _check_feed_storage(uri, urlsplit(uri).scheme, settings)
            continue
        # Scrapy makes the missing folders.
        check_output_file(path, feed_named(uri), makes_folders=True, settings=settings)


def feed_named(uri: Any) -> str:
    """How a message names a feed: its URI quoted, without its password (``redact_uri``), which
    a Scrapyd job's log, served over HTTP, showed; a local file's path as it is."""
    uri = str(uri)
    return f"the feed {quoted(uri if local_feed_path(uri) else redact_uri(uri))}"


def local_feed_path(uri: str) -> Path | None:
    """The file a feed's URI names on this machine; None for another storage (s3:, ftp:...)."""
    parts = urlsplit(uri)
    if len(parts.scheme) > 1 and parts.scheme != "file":  # c: is a drive
        return None
    return Path(unquote(parts.path) if parts.scheme == "file" else uri)


# What a feed storage needs installed (Scrapy disables the feed at the start without it).
_STORAGE_PACKAGES = {"s3": "boto3", "gs": "google.cloud.storage"}


def _check_feed_storage(uri: str, scheme: str, settings: Any) -> None:
    """Scrapy stores the feed by this scheme (FEED_STORAGES) with what is installed: else it
    logs an error, exports nothing, and the crawl exits 0 (``-O http://...``, ``-O s3://...``
    without boto3)."""
    storages = sorted(name for name, path in settings.getwithbase("FEED_STORAGES").items() if path)
    if scheme not in storages:
        raise ConfigError(
            f"{feed_named(uri)} names storage {scheme}:, which Scrapy has not; it has:"
            f" {', '.join(name + ':' for name in storages if name)} and files"
        )
    package = _STORAGE_PACKAGES.get(scheme)
    if package and _not_installed(package):
        raise ConfigError(
            f"{feed_named(uri)} needs {package}, which is not installed"
            f" (pip install {package.replace('.', '-')})"
        )


def _check_feed_batches(uri: str, options: dict, settings: Any) -> None:
    """A feed cut in batches names each file by its batch, else Scrapy exports nothing."""
    count = options.get("batch_item_count", settings.getint("FEED_EXPORT_BATCH_ITEM_COUNT"))
    if count and not re.search(r"%\(batch_time\)s|%\(batch_id\)", uri):
        raise ConfigError(
            f"{feed_named(uri)} is cut every {count} items (FEED_EXPORT_BATCH_ITEM_COUNT or"
            " its batch_item_count): its name needs %(batch_time)s or %(batch_id)d"
        )


# Characters of several scripts and of the astral planes, such as pages hold (an en dash, in
# nearly every Wikipedia page; Cyrillic, Chinese, a bird emoji).
UNICODE_SAMPLE = "\u00e9 \u2013 \u0436 \u4e2d \U0001f426"


def _check_feed_encoding(uri: str, encoding: Any) -> None:
    """The feed's encoding (its ``encoding``, else FEED_EXPORT_ENCODING; None: Scrapy's own)
    writes every character a page may hold. Another failed the export of each page it could not
    write (``ascii``, ``latin-1``), or of every page (a name no codec has, ``rot13``), each with
    a traceback, and the crawl exited 0."""
    if encoding is None:
        return
    try:
        UNICODE_SAMPLE.encode(encoding)
    except (LookupError, TypeError):
        why = "is no text encoding"
    except UnicodeEncodeError:
        why = "cannot write every character a page may hold"
    else:
        return
    raise ConfigError(
        f"{feed_named(uri)} has encoding {quoted(encoding)} (FEED_EXPORT_ENCODING or its"
        f" encoding), which {why}: give utf-8"
    )


def _check_feed_plugins(uri: str, options: dict) -> None:
    """The feed's ``item_filter`` and ``postprocessing`` classes, given by their import path,
    can be imported: else the feed failed as it opened, with a traceback, and exported
    nothing."""
    _check_import(f"{feed_named(uri)}: item_filter ", options.get("item_filter"))
    for plugin in options.get("postprocessing") or ():
        _check_import(f"{feed_named(uri)}: postprocessing plugin ", plugin)


def _not_installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is None
    except ImportError:  # a parent package missing (google, for google.cloud.storage)
        return True


def check_feed_placeholders(settings: Any, spider: Callable[[], object]) -> None:
    """The ``%(name)s`` of each feed's URI are what Scrapy fills: the attributes of the spider
    (made by ``spider``, only when there is a feed), and ``time``, ``batch_time``,
    ``batch_id``. Another name, or a malformed one, failed as the feed opened, with a
    traceback, and the crawl exported nothing and exited 0. Filled as Scrapy fills them: a %
    that starts no name is the URI's own (``100%.jsonl``, ``my%20pages.jsonl``). A feed with a
    ``uri_params`` function (FEED_URI_PARAMS) has the names it fills."""
    feeds = settings.getdict("FEEDS")
    if not feeds:
        return
    names = dict.fromkeys([*dir(spider()), "time", "batch_time", "batch_id"], 1)
    for uri, options in feeds.items():
        if options.get("uri_params", settings.get("FEED_URI_PARAMS")):
            continue
        try:
            apply_uri_params(str(uri), names)
        except KeyError as exc:
            raise ConfigError(
                f"{feed_named(uri)} names %({exc.args[0]})s, which Scrapy cannot fill:"
                " it fills %(time)s, %(batch_time)s, %(batch_id)d and the spider's attributes,"
                " such as %(name)s and %(crawl_id)s"
            ) from None
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"{feed_named(uri)} is no name Scrapy can fill: {one_line(exc)}"
            ) from None


def check_output_file(
    path: Path, what: str, *, makes_folders: bool = False, settings: Any = None
) -> None:
    """A file the command will write (a feed, ``scrapy report --png``) can be written into its
    folder: refused before anything runs rather than failing once the work is done. With
    ``makes_folders`` the missing folders are made by the writer: the nearest existing
    ancestor counts. With the command's ``settings``, it must not be their SQLite store
    (``FOCUSED_DB``), which writing it would destroy (a name completed with the Tab key)."""
    try:
        _check_output_file(path, what, makes_folders)
        if settings is not None and is_the_store(path, settings):
            raise ConfigError(f"cannot write {what}: it is the store, FOCUSED_DB")
    except OSError as exc:  # exists() and is_dir() raise it for a name too long
        raise ConfigError(f"cannot write {what}: {exc.strerror or one_line(exc)}") from None


def is_the_store(path: Path, settings: Any) -> bool:
    """Whether ``path`` names the SQLite store the settings name."""
    if settings.get("MONGO_URI"):
        return False
    store = settings.get("FOCUSED_DB") or DEFAULT_SQLITE_PATH
    try:
        return os.path.samefile(path, store)  # a link to it too
    except OSError:  # either is still to be made (or no name a file can have): by name then
        return os.path.realpath(path) == os.path.realpath(store)


def _check_output_file(path: Path, what: str, makes_folders: bool) -> None:
    folder = path.parent
    while makes_folders and not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if path.is_dir():
        raise ConfigError(f"cannot write {what}: it is a folder")
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write {what}: {cut(str(folder))} is not a writable folder")
    if path.exists():
        # A writable folder does not make its files writable (another user's, read-only,
        # immutable).
        if not os.access(path, os.W_OK):
            raise ConfigError(f"cannot write {what}: the file cannot be written")
    else:
        # Root may write any folder by its mode, but not /proc or /sys: a file is made to know.
        try:
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as exc:
            raise ConfigError(
                f"cannot write {what}: no file can be made in {cut(str(folder))} ({exc.strerror})"
            ) from None


# The folders a crawl writes into that a setting names, each with a file the crawl makes there:
# FOCUSED_UNSTORED_DIR once the store has failed (its default, the folder of FOCUSED_DB, is
# checked with the store), WARC_DIR at the first page (focused.warc), the encoder's as it opens
# (an export there that cannot be kept is made again by every crawl, 40 s and three warnings).
OUTPUT_FOLDERS = {
    "FOCUSED_UNSTORED_DIR": "unstored.jsonl",
    "WARC_DIR": "crawl.warc.gz",
    "ENCODER_EXPORT_DIR": "all-MiniLM-L6-v2.onnx",
    "ENCODER_STORE_DIR": "vectors.sqlite3",
}


def check_output_folders(settings: Any) -> None:
    """Each folder of ``OUTPUT_FOLDERS`` that is given is one the crawl can make its file in:
    found out before the crawl starts rather than when it needs the folder."""
    for name, file_name in OUTPUT_FOLDERS.items():
        folder = settings.get(name)
        if folder:
            check_output_file(
                Path(folder, file_name), f"{name} {quoted(folder)}", makes_folders=True
            )
