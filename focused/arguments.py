"""The one place where spider arguments, strategy parameters and numeric settings are validated.

Every check raises :class:`focused.errors.ConfigError` with a one-line message, which the
``crawl`` command prints before any crawling starts.
"""

from __future__ import annotations

import ast
import codecs
import fcntl
import hashlib
import importlib.util
import json
import logging
import math
import os
import re
import sqlite3
import sys
import tempfile
import uuid
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.conf import feed_complete_default_values_from_settings
from w3lib.url import safe_url_string

from focused.canonical import canonicalize, drop_params_setting, is_sendable
from focused.dedup import INDEX_FILE as NEAR_DUPLICATES_FILE
from focused.encoder import STATE_FILE as ENCODER_STATE_FILE
from focused.encoder import STATE_TEMP_FILE as ENCODER_STATE_TEMP_FILE
from focused.errors import ConfigError, cut, one_line, quoted, redact_uri
from focused.languages import known_languages, language_code, query_language
from focused.render import BLOCKABLE_RESOURCES, RENDER_MODES, blocked_resources
from focused.report import (
    being_recrawled,
    describe_params,
    is_live,
    recrawl_is_live,
    running_elsewhere,
)
from focused.resume import COUNTERS_FILE, STATE_FILE, STATE_TEMP_FILE, TOPIC_FILE, TopicJournal
from focused.setting_names import check_setting_names, given_on_command_line, known_setting_names
from focused.storage import DEFAULT_SQLITE_PATH
from focused.strategies import STRATEGIES, strategy_class
from focused.text import tokenize
from focused.traps import COUNTS_FILE as TRAP_COUNTS_FILE
from schedulers.base import FRONTIER_FILE, FRONTIER_TABLES

# Spider arguments every strategy accepts; the strategy's own parameters come on top.
GENERAL_ARGUMENTS = (
    "query",
    "topic_file",
    "seeds",
    "seeds_file",
    "strategy",
    "allowed_domains",
    "crawl_id",
    "render",
    "language",
)
# semantic: the only strategy that reaches issue 7's harvest target (README "Semantic link
# scores"). Without its sentence encoder (the extra not installed, a query not in English) it
# runs as anchor would, below shark, the best strategy without the encoder (mean harvest@|rel|
# 0.291 against 0.357, BENCHMARKS "The default without the encoder"): a crawl that names no
# strategy then runs shark, and says so (``default_strategy``).
DEFAULT_STRATEGY = "semantic"
NO_ENCODER_STRATEGY = "shark"
KIND_NAMES = {int: "an integer", float: "a number"}
# allowed_domains are names the offsite filter compares hosts with: no scheme, path or port.
DOMAIN = re.compile(r"[\w.-]+")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110's token
LINE_BREAK = re.compile(r"[\r\n\0]")


@dataclass(frozen=True)
class Param:
    """A strategy parameter given as ``-a name=value``.

    The type is the default's type; ``low``/``high`` bound numbers (inclusive), ``choices``
    lists the allowed strings. ``works_with`` (another parameter, its value) is the only setting
    under which the parameter has an effect: given with another, it is refused rather than
    ignored.
    """

    default: float | int | str
    help: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    works_with: tuple[str, str] | None = None

    def parse(self, name: str, raw: str) -> float | int | str:
        kind = type(self.default)
        if kind is str:
            if self.choices and raw not in self.choices:
                raise ConfigError(f"{name}={quoted(raw)} is not one of: {', '.join(self.choices)}")
            return raw
        value = _read_number(name, raw, kind)
        if self.low is not None and value < self.low:
            raise ConfigError(f"{name}={cut(raw)} is below its minimum {self.low:g}")
        if self.high is not None and value > self.high:
            raise ConfigError(f"{name}={cut(raw)} is above its maximum {self.high:g}")
        return value


def is_text(value: str) -> bool:
    """Encodable as UTF-8. Bytes of the command line that are not UTF-8 reach Python as lone
    surrogates, which no store, log line or HTTP header can take: the crawl would fail on them
    with a traceback once started."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _read_number(label: str, raw: Any, kind: type) -> Any:
    """``raw`` read as ``kind`` (int or float), as the crawl will read it; ``label`` names it in
    the error."""
    try:
        value = kind(raw)
    except (TypeError, ValueError):  # also "": a setting given empty is no number
        raise ConfigError(f"{label}={quoted(raw)} is not {KIND_NAMES[kind]}") from None
    if not _finite(value):  # nan passes every bound
        raise ConfigError(f"{label}={quoted(raw)} is not a finite number")
    # An index, a seed, a deque's length, an SQLite INTEGER: an OverflowError once the crawl ran.
    if kind is int and abs(value) > sys.maxsize:
        raise ConfigError(f"{label}={cut(str(raw))} is too large: at most {sys.maxsize}")
    return value


def _finite(value: float) -> bool:
    """Not nan or infinite. An int is always finite, and math.isfinite would overflow on one
    too large for a float (a setting of 400 digits)."""
    return isinstance(value, int) or math.isfinite(value)


@dataclass(frozen=True)
class CrawlConfig:
    """Everything the spider was asked to do, validated."""

    query: str
    topic: str
    seeds: tuple[str, ...]
    strategy: str
    params: dict[str, Any]
    allowed_domains: tuple[str, ...] = ()
    crawl_id: str = field(default_factory=lambda: new_crawl_id())
    render: str = "never"
    language: str | None = None  # the query's, when given; else told from the query
    strategy_note: str | None = None  # why a crawl that names no strategy runs this one
    jobdir_note: str | None = None  # why its JOBDIR cannot be resumed: Scrapyd's, one per job
    # What orders its frontier (crawl_order), which a resumed JOBDIR crawl must be given alike
    order: dict[str, Any] = field(kw_only=True)


# -a render=: a spider-level argument, parsed like a strategy parameter.
RENDER = Param(
    "never", "render pages in headless Chromium: never, always, or auto", choices=RENDER_MODES
)


def check_crawl_id(crawl_id: str) -> None:
    """ConfigError (one line) unless ``crawl_id`` is an id a crawl may have."""
    if not re.fullmatch(r"[\w.:-]{1,100}", crawl_id):
        raise ConfigError(f"crawl_id={quoted(crawl_id)} may use only letters, digits and . _ : -")


def new_crawl_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


def parse_arguments(kwargs: Mapping[str, Any], settings: Any = None) -> CrawlConfig:
    """Validate the ``-a`` arguments of the ``topical`` spider (and the settings it reads)."""
    args = {k: str(v) for k, v in kwargs.items() if not k.startswith("_")}  # _job: Scrapyd's
    for name, value in args.items():
        if not is_text(value):
            raise ConfigError(f"{name}={quoted(value)} is not UTF-8 text")
    query = args.get("query", "").strip()
    topic_file = args.get("topic_file")
    topic = query
    if topic_file:
        topic = f"{query}\n{_read_text(topic_file, 'topic_file')}".strip()
    if not query and not topic_file:
        raise ConfigError("missing query: give -a query='some words' or -a topic_file=PATH")
    language = _parse_language(args.get("language"))
    topic_language = query_language(topic, language)
    if not tokenize(topic, topic_language):
        # Stop words and numbers are not matched: such a topic would leave the crawl's topic to
        # its seed pages alone, a crawl about whatever the seeds are about.
        raise ConfigError(
            f"the query has no words to match pages against: {quoted(topic)}"
            " (stop words, numbers and punctuation are not matched)"
        )
    job = _job_record(settings)  # what a resumed JOBDIR crawl must reuse: read once
    given = args.pop("strategy", None)
    strategy_note = None
    if given is None:
        strategy, strategy_note = default_strategy(args, job.get("strategy"), topic, language)
    else:
        strategy = given.strip()
    if strategy not in STRATEGIES:
        raise ConfigError(
            f"unknown strategy {quoted(strategy)}; "
            f"valid strategies: {', '.join(sorted(STRATEGIES))}"
        )
    spec = strategy_class(strategy).params
    unknown = sorted(set(args) - set(GENERAL_ARGUMENTS) - set(spec))
    if unknown and unknown[0] in known_setting_names():
        # -d JOBDIR=... in a schedule.json call, where Scrapyd wants -d setting=JOBDIR=...: the
        # list of valid arguments did not say why a setting everyone knows was refused.
        name = unknown[0]
        raise ConfigError(
            f"{name} is a setting, not a spider argument: give it as -s {name}=VALUE "
            f"(to Scrapyd's schedule.json, -d setting={name}=VALUE)"
        )
    if unknown:
        valid = ", ".join([*GENERAL_ARGUMENTS, *spec])
        raise ConfigError(
            f"unknown argument {quoted(unknown[0])} for strategy {strategy}; valid: {valid}"
        )
    params = {
        name: param.parse(name, args[name]) if name in args else param.default
        for name, param in spec.items()
    }
    for name in sorted(spec.keys() & args.keys()):
        if spec[name].works_with is not None:
            other, needed = spec[name].works_with
            if params[other] != needed:
                raise ConfigError(
                    f"{name} works only with {other}={needed}, not {other}={params[other]}"
                )
    strategy_class(strategy).check_params(params)
    seeds = _parse_seeds(args)
    allowed = _parse_allowed_domains(args, seeds)
    if settings is not None:
        check_settings(settings)
        _check_seed_lengths(seeds, settings)
        _check_no_made_setting_given(settings)
        strategy_class(strategy).check_settings(settings)
        _check_jobdir(settings)
        check_unstored_dir(settings)
    # A crawl resumed from JOBDIR keeps its id, so its pages stay one crawl in the store.
    crawl_id = args.get("crawl_id", "").strip() or job.get("crawl_id") or new_crawl_id()
    check_crawl_id(crawl_id)
    order = crawl_order(strategy, params, topic, topic_language)
    _check_resumed_job(job, order, args.get("crawl_id", "").strip())
    _check_job_queue(settings, strategy)
    render = RENDER.parse("render", args["render"].strip()) if "render" in args else RENDER.default
    _check_shared_frontier(settings, order, args)
    return CrawlConfig(
        query,
        topic,
        seeds,
        strategy,
        _acting(spec, params),
        allowed,
        crawl_id,
        render,
        language,
        strategy_note,
        scrapyd_jobdir_note(settings, kwargs.get("_job")),
        order=order,
    )


def _acting(spec: Mapping[str, Param], params: dict[str, Any]) -> dict[str, Any]:
    """``params`` but those that have no effect with the others (``works_with``), which the
    crawl record would show at their default: hybrid's max_depth=5 with then=bestfirst, a
    depth limit the crawl does not have. (The frontier's order keeps them all: a JOBDIR
    compares it with the order it saved.)"""
    return {
        name: value
        for name, value in params.items()
        if spec[name].works_with is None
        or params[spec[name].works_with[0]] == spec[name].works_with[1]
    }


def scrapyd_jobdir_note(settings: Any, job: Any) -> str | None:
    """Why the JOBDIR cannot be resumed, when it is Scrapyd's (``jobs_dir`` in scrapyd.conf),
    JOBS_DIR/PROJECT/topical/JOBID: Scrapyd puts it in place of the ``-d setting=JOBDIR=`` of
    the schedule.json call, so cancelling the job and scheduling it again did not resume it,
    and said nothing (or, with its crawl_id, that the crawl goes on only from its JOBDIR)."""
    jobdir = settings.get("JOBDIR") if settings is not None else None
    if not (jobdir and job) or Path(jobdir).parts[-2:] != ("topical", str(job)):
        return None
    return (
        f"JOBDIR {quoted(str(jobdir))} is Scrapyd's, one per job (jobs_dir in scrapyd.conf, "
        "which replaces a JOBDIR given with -d setting=): a job scheduled again gets another, "
        "so it cannot resume this one; to pause and resume a crawl, leave jobs_dir unset"
    )


def default_strategy(
    args: Mapping[str, str], saved: str | None, topic: str, language: str | None
) -> tuple[str, str | None]:
    """The strategy of a crawl that names none, and why it is not ``DEFAULT_STRATEGY`` (None
    when it is). A resumed JOBDIR crawl goes on with its own, ``saved``; arguments that tune
    ``DEFAULT_STRATEGY`` mean it; otherwise ``NO_ENCODER_STRATEGY`` when the sentence encoder
    cannot score this crawl's links."""
    if saved in STRATEGIES:
        return saved, None
    if strategy_class(DEFAULT_STRATEGY).params.keys() & args.keys():
        return DEFAULT_STRATEGY, None
    from focused.encoder import unavailable  # numpy: only when asked for

    reason = unavailable(query_language(topic, language), topic)
    if reason is None:
        return DEFAULT_STRATEGY, None
    return NO_ENCODER_STRATEGY, (
        f"No strategy given and the sentence encoder {DEFAULT_STRATEGY} needs is unavailable "
        f"({reason}): the crawl runs {NO_ENCODER_STRATEGY}, the best strategy without it "
        f"(-a strategy={DEFAULT_STRATEGY} runs {DEFAULT_STRATEGY} anyway)"
    )


def _parse_language(raw: str | None) -> str | None:
    if raw is None or not raw.strip():
        return None
    code = language_code(raw)
    known = known_languages()
    if code not in known:
        raise ConfigError(
            f"language={quoted(raw)} is not a language the tokenizer knows; "
            f"give an ISO 639-1 code: {', '.join(sorted(known))}"
        )
    return code


def _read_text(path: str, what: str) -> str:
    try:
        # utf-8-sig: a file saved with a byte-order mark (Notepad's) began its first seed with it.
        return Path(path).read_text(encoding="utf-8-sig")
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8, or a NUL in the path
        raise ConfigError(f"cannot read {what} {quoted(path)}: {exc.__class__.__name__}") from None


def _parse_seeds(args: Mapping[str, str]) -> tuple[str, ...]:
    raw = args.get("seeds", "").split(",")
    if args.get("seeds_file"):
        raw += _read_text(args["seeds_file"], "seeds_file").splitlines()
    stripped = (s.strip() for s in raw)
    seeds = tuple(dict.fromkeys(s for s in stripped if s and not s.startswith("#")))
    if not seeds:
        raise ConfigError("missing seeds: give -a seeds=URL[,URL...] or -a seeds_file=PATH")
    for seed in seeds:
        _check_seed(seed)
    return seeds


def _check_seed(seed: str) -> None:
    """A seed the downloader can fetch: http(s), a host, a port in range, printable once
    escaped (what the spider's start does to it). Otherwise the crawl would fail on it with a
    traceback after starting."""
    try:
        parts = urlsplit(seed)
        parts.port  # noqa: B018 -- raises on a port out of range or not a number
        sendable = is_sendable(safe_url_string(canonicalize(seed)))
    except ValueError:  # also UnicodeError, from IDNA
        sendable = None
    else:
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"seed {quoted(seed)} is not an http(s) URL")
        if "@" in parts.netloc:
            # Twisted would take user:password@host for the host name, and the password would
            # reach the log and the store; Scrapy sends credentials from its settings.
            raise ConfigError(
                f"seed {quoted(redact_uri(seed))} has a user name or password in it: give them"
                " as -s HTTPAUTH_USER=... -s HTTPAUTH_PASS=..."
                f" -s HTTPAUTH_DOMAIN={parts.hostname}"
            )
    if not sendable:
        raise ConfigError(f"seed {quoted(seed)} is not a valid URL")


def _check_seed_lengths(seeds: tuple[str, ...], settings: Any) -> None:
    """Scrapy's UrlLengthMiddleware drops a request whose URL, as sent, is longer than
    ``URLLENGTH_LIMIT`` (0: no limit), a seed too: a DEBUG line, and a crawl of nothing that
    exits 0."""
    limit = settings.getint("URLLENGTH_LIMIT")
    drop = drop_params_setting(settings)
    for seed in seeds:
        url = safe_url_string(canonicalize(seed, drop))
        if limit and len(url) > limit:
            raise ConfigError(
                f"seed {url[:60]}... is {len(url)} characters long: Scrapy drops a URL longer "
                f"than URLLENGTH_LIMIT ({limit})"
            )


def _parse_allowed_domains(args: Mapping[str, str], seeds: tuple[str, ...]) -> tuple[str, ...]:
    """Domains the offsite filter keeps the crawl within. A seed outside them would be dropped
    before it is fetched (a DEBUG line, and a crawl of nothing that exits 0)."""
    raw = args.get("allowed_domains", "").split(",")
    given = [d.strip().lower() for d in raw if d.strip()]
    for domain in given:
        if not DOMAIN.fullmatch(domain):
            raise ConfigError(
                f"allowed_domains: {quoted(domain)} is not a domain name (give example.org, "
                "without scheme, port or path)"
            )
    # As requests name their hosts: Scrapy's offsite filter compares müller.example's requests
    # as xn--mller-kva.example, and dropped every one of them, seeds included, for the name.
    allowed = tuple(dict.fromkeys(_request_host(f"http://{domain}/") for domain in given))
    for seed in seeds:
        host = _request_host(seed)
        if allowed and not any(host == d or host.endswith(f".{d}") for d in allowed):
            raise ConfigError(
                f"seed {quoted(seed)} is outside allowed_domains {cut(','.join(allowed))}"
            )
    return allowed


def _request_host(url: str) -> str:
    """The host of ``url`` as a request for it names it: internationalized names in their
    ASCII (punycode) form."""
    return urlsplit(safe_url_string(url)).hostname or ""


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
    "STORAGE_RETRY_DELAY": (float, 0.0, None),
    "FOCUSED_HEARTBEAT_INTERVAL": (float, 1.0, None),
    "STORE_MIN_RELEVANCE": (float, 0.0, 1.0),  # relevance is in [0, 1]: above 1 stores nothing
    "CLOSESPIDER_PAGECOUNT": (int, 0, None),
    "CONCURRENT_REQUESTS": (int, 1, None),
    "FOCUSED_LOGSTATS_INTERVAL": (float, 0.0, None),
    "MONGO_TIMEOUT_MS": (int, 1, None),
    "FOCUSED_DB_TIMEOUT": (float, 0.0, None),
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
    "ROBOTS_CRAWL_DELAY_MAX": (float, 0.0, None),
    "RETRY_AFTER_MAX": (float, 0.0, None),
    # Scrapy's own numbers are checked from their defaults (scrapy_setting_checks); these
    # two must also be at least 1.
    "CONCURRENT_REQUESTS_PER_DOMAIN": (int, 1, None),
    # 0: Scrapy scrapes the first page and stops. Scrapy starts this many tasks for each page's
    # outputs, however few they are: 100,000 cost 1.5 s a page, a million about a minute.
    "CONCURRENT_ITEMS": (int, 1, 10_000),
}
# Numeric settings off by default (None): given empty (-s NAME=), they stay off. Any other
# number given empty is read as one once the crawl has started: a traceback.
EMPTY_MEANS_NONE = frozenset({"STORE_MIN_RELEVANCE"})


# Settings read with Settings.getbool, which raises on anything but 0/1, true/false.
BOOLEAN_SETTINGS = (
    "SCORE_BEFORE_DISPATCH",
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
    "DOWNLOAD_DELAY": float,
    "DOWNLOAD_TIMEOUT": float,
    "TELNETCONSOLE_ENABLED": bool,
}


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
        elif kind is str and IMPORT_PATH.fullmatch(default):
            classes.append(name)
    return tuple(booleans), numbers, tuple(classes)


def check_settings(settings: Any) -> None:
    check_setting_names(settings)
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
            _check_import(f"setting {name}=", settings[name])
    _check_components(settings)
    _check_integer_lists(settings)
    _check_download_slots(settings)
    _check_logging(settings)
    _check_feeds(settings)
    _check_http_auth(settings)
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
            _check_import(f"setting {name}=", settings[name])


def _check_http_auth(settings: Any) -> None:
    """Scrapy's HttpAuthMiddleware refuses credentials without the domain they are for, with a
    traceback as the crawl starts."""
    given = [name for name in ("HTTPAUTH_USER", "HTTPAUTH_PASS") if settings.get(name)]
    if given and settings.getpriority("HTTPAUTH_DOMAIN") <= SETTINGS_PRIORITIES["default"]:
        raise ConfigError(
            f"setting {given[0]} needs HTTPAUTH_DOMAIN, the host the credentials are sent to"
            " (-s HTTPAUTH_DOMAIN=example.org: that host and its subdomains)"
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
    if given_on_command_line(settings, "RETRY_EXCEPTIONS"):
        for path in settings.getlist("RETRY_EXCEPTIONS"):
            _check_import("setting RETRY_EXCEPTIONS: ", path)


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
                int(item)
            except (TypeError, ValueError):
                raise ConfigError(
                    f"setting {name}: {quoted(item)} is not a whole number (give them separated by "
                    "commas: 500,502)"
                ) from None


def allow_status_codes_as_numbers(settings: Any) -> None:
    """HTTPERROR_ALLOWED_CODES as integers. Scrapy's HttpErrorMiddleware compares its items with
    each response's status as they are, and from ``-s HTTPERROR_ALLOWED_CODES=404`` they are
    strings: no response was ever let through. (Checked as whole numbers by check_settings.)"""
    name = "HTTPERROR_ALLOWED_CODES"
    codes = [int(code) for code in settings.getlist(name)]
    settings.set(name, codes, settings.getpriority(name) or "project")


# What Scrapy's downloader reads from a DOWNLOAD_SLOTS entry as it makes the host's slot, and
# the least of each.
SLOT_NUMBERS: dict[str, tuple[type, float]] = {
    "concurrency": (int, 1),
    "delay": (float, 0.0),
    "jitter": (float, 0.0),
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
        for key, (kind, low) in SLOT_NUMBERS.items():
            value = slot.get(key, low)
            if not _is_number(value, kind) or value < low:
                raise ConfigError(
                    f"setting DOWNLOAD_SLOTS: {quoted(host)} has {key}={quoted(value)}; give "
                    f"{KIND_NAMES[kind]}, at least {low:g}"
                )


def _is_number(value: Any, kind: type) -> bool:
    """A JSON number of ``kind`` (a float may be written as an int), finite; not a bool."""
    kinds = (int,) if kind is int else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool) and _finite(value)


def _check_number(name: str, raw: Any, kind: type, low: float | None, high: float | None) -> None:
    if raw is None or (raw == "" and name in EMPTY_MEANS_NONE):
        return
    value = _read_number(f"setting {name}", raw, kind)
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
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError) as exc:  # a parent is no package, or cannot be imported
        return str(exc)
    if spec is None:
        return f"no module named {quoted(module_name)}"
    if module_name in sys.modules:
        found = hasattr(sys.modules[module_name], attribute)
    elif spec.origin and spec.origin.endswith(".py"):
        names = _bound_names(Path(spec.origin))
        found = attribute in names or not names.isdisjoint({"*", "__getattr__"})
    else:
        found = True
    return None if found else f"module {quoted(module_name)} has no {quoted(attribute)}"


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
    "SCHEDULER_PRIORITY_QUEUE": "the strategy's queue: choose the strategy with -a strategy=NAME",
    "PLAYWRIGHT_LAUNCH_OPTIONS": "made for the crawl's Chromium: choose it with FOCUSED_CHROMIUM",
    "PLAYWRIGHT_ABORT_REQUEST": "made from FOCUSED_RENDER_BLOCK: list the resource types there",
}


def _check_no_made_setting_given(settings: Any) -> None:
    for name, why in MADE_SETTINGS.items():
        if given_on_command_line(settings, name):
            raise ConfigError(f"setting {name} is {why}")


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
                f"the feed {quoted(uri)} has options {quoted(options)}; give a JSON object, "
                'such as {"format": "jsonlines"}'
            )
        # Without a format, Scrapy takes the file's extension.
        kind = feed_complete_default_values_from_settings(options, settings, uri)["format"]
        if kind not in formats:
            raise ConfigError(
                f"the feed {quoted(uri)} has format {quoted(kind)}; "
                f"Scrapy exports: {', '.join(formats)}"
            )
        parts = urlsplit(uri)
        if len(parts.scheme) > 1 and parts.scheme != "file":  # s3:, ftp:... (c: is a drive)
            continue
        path = Path(unquote(parts.path) if parts.scheme == "file" else uri)
        # Scrapy makes the missing folders.
        check_output_file(path, f"the feed {quoted(uri)}", makes_folders=True, settings=settings)


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


def _job_file(settings: Any, name: str) -> Path | None:
    jobdir = settings.get("JOBDIR") if settings is not None else None
    return Path(jobdir, name) if jobdir else None


def _check_jobdir(settings: Any) -> None:
    """JOBDIR is a directory the crawl can write (Scrapy would create it, with a traceback when
    a file is in the way)."""
    jobdir = settings.get("JOBDIR")
    if not jobdir:
        return
    try:
        if Path(jobdir).exists() and not Path(jobdir).is_dir():
            raise ConfigError(f"cannot use JOBDIR {quoted(jobdir)}: it is a file, not a directory")
        Path(jobdir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # exists() too: a name longer than the file system takes
        raise ConfigError(f"cannot use JOBDIR {quoted(jobdir)}: {exc.strerror}") from None
    if not os.access(jobdir, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot use JOBDIR {quoted(jobdir)}: it is not writable")
    _check_job_databases(Path(jobdir))
    _check_job_tables(Path(jobdir))
    _check_job_files(Path(jobdir))


# The lock of a job directory (lock_jobdir), in it; the descriptors this process holds.
JOBDIR_LOCK = "lock"
_held_jobdir_locks: dict[str, int] = {}


def lock_jobdir(settings: Any) -> None:
    """One crawl at a time in a job directory: two would pop the same frontier and number their
    pages alike, fetching pages twice and past the budget. The lock is the kernel's (flock), so
    it goes with the process that held it, ``kill -9`` included. Held until this process ends."""
    jobdir = settings.get("JOBDIR")
    held = str(Path(jobdir).resolve()) if jobdir else None
    if held is None or held in _held_jobdir_locks:
        return
    try:
        descriptor = os.open(Path(jobdir, JOBDIR_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ConfigError(f"cannot use JOBDIR {quoted(jobdir)}: {exc.strerror}") from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        raise ConfigError(
            f"JOBDIR {quoted(jobdir)} is in use by another crawl: let it end (Ctrl-C pauses "
            "it), or use another JOBDIR"
        ) from None
    _held_jobdir_locks[held] = descriptor


# The lock of the crawls of an SQLite store (lock_crawl), beside it; the descriptor this
# process holds for each such file (one: closing any descriptor of a file drops all of this
# process's POSIX locks on it).
CRAWL_LOCK_SUFFIX = ".lock"
_held_crawl_locks: dict[str, int] = {}


def crawl_lock_offset(crawl_id: str) -> int:
    """The byte of the store's lock file that stands for the crawl id."""
    return int.from_bytes(hashlib.sha256(crawl_id.encode()).digest()[:6], "big")


def lock_crawl(settings: Any, crawl_id: str, then: str) -> None:
    """One process at a time runs a crawl id into an SQLite store, a crawl or a recrawl (``then``
    ends the refusal: what to do instead). ``check_store`` refuses a run under the id of a crawl
    with pages stored, but two runs started together (a Scrapyd job scheduled twice) both found
    none, and both crawled: every page fetched twice, each run's pages overwriting the other's.
    The lock is the kernel's (a POSIX lock on one byte of ``FOCUSED_DB.lock``, at an offset
    hashed from the crawl id), so it goes with the process that held it, ``kill -9`` included.
    Held until this process ends. The processes of a shared frontier run one crawl id by design;
    a MongoDB server is no file to lock."""
    if settings.get("FOCUSED_FRONTIER") or settings.get("MONGO_URI"):
        return
    path = str(Path(settings.get("FOCUSED_DB") or DEFAULT_SQLITE_PATH).resolve())
    path += CRAWL_LOCK_SUFFIX
    descriptor = _held_crawl_locks.get(path)
    if descriptor is None:
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(f"cannot lock crawl {crawl_id}: {path}: {exc.strerror}") from None
        _held_crawl_locks[path] = descriptor
    offset = crawl_lock_offset(crawl_id)
    try:
        # A lock this process holds already is taken again: a POSIX lock never conflicts
        # with its own process.
        fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except OSError:
        raise ConfigError(running_elsewhere(crawl_id, then=then)) from None


def _not_a_job_directory(jobdir: Path, name: str | Path, reason: str | None = None) -> ConfigError:
    because = f" ({reason})" if reason else ""
    return ConfigError(
        f"JOBDIR {quoted(str(jobdir))} is not a job directory of this crawler: "
        f"{name} cannot be read{because}; use a new JOBDIR"
    )


def _check_job_databases(jobdir: Path) -> None:
    """Every SQLite file of a job directory (the frontier, the counters, the trap families...)
    is a database: one that is not (damaged, or another program's) failed with a traceback as
    the component that owns it opened, and the crawl went on without it or stopped."""
    for path in sorted(jobdir.rglob("*.sqlite3")):
        try:
            with closing(sqlite3.connect(path)) as database:
                database.execute("PRAGMA schema_version")
        except sqlite3.Error as exc:
            name = path.relative_to(jobdir)
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _DISK_FAILURES:
                # Its disk failed or is full (reading a file in WAL mode writes its index):
                # the job is likely whole, and resumes once there is room.
                raise ConfigError(
                    f"cannot use JOBDIR {quoted(str(jobdir))}: {name} cannot be read ({exc}):"
                    " free space on its disk (or copy the JOBDIR to another) and run the"
                    " crawl again"
                ) from None
            raise _not_a_job_directory(jobdir, name, str(exc)) from None


# SQLite's primary result codes of a file that could not be read because of its disk, not its
# content: SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN.
_DISK_FAILURES = frozenset({10, 13, 14})


# Scrapy's folder of the JOBDIR queue (``Scheduler._dqdir``), and in it the state the queue's
# close() returned, which Scrapy reads back as the scheduler opens (``_read_dqs_state``).
QUEUE_DIR = "requests.queue"
QUEUE_STATE_FILE = f"{QUEUE_DIR}/active.json"
JOB_FRONTIER_FILE = f"{QUEUE_DIR}/{FRONTIER_FILE}"

# The tables of a job directory's SQLite files and the columns the crawl reads from them, by
# file: {table: (columns, whether a file of the crawl's may lack it)}. A table the file lacks
# is made, as in a new file; a file that has tables but not the first is another's.
_JOB_TABLES: dict[str, dict[str, tuple[tuple[str, ...], bool]]] = {
    # schedulers.base.SqliteFrontier: inflight and finished came with the crash-safe resume.
    JOB_FRONTIER_FILE: {
        table: (columns, table != "frontier") for table, columns in FRONTIER_TABLES.items()
    },
    COUNTERS_FILE: {"counters": (("name", "value"), False)},  # focused.resume.CrawlCounters
    TRAP_COUNTS_FILE: {"counts": (("family", "kind", "count"), False)},  # focused.traps
    NEAR_DUPLICATES_FILE: {  # focused.simhash.SimHashIndex
        "bands": (("band", "value", "fingerprint", "url"), False)
    },
    # schedulers.rank_semantic.LinkGraph (GRAPH_FILE), saved whole; its ranking read once.
    f"{QUEUE_DIR}/linkgraph.sqlite3": {
        "nodes": (("id", "url"), False),
        "edges": (("pair",), False),
        "ranking": (("rank",), True),
    },
}


def _check_job_tables(jobdir: Path) -> None:
    """The SQLite files of a job directory hold the tables their code reads, with its columns:
    a database of another program, or a table of another shape, under the name of one was a
    cascade of tracebacks as the crawl opened it (a frontier table without its columns), or a
    frontier made anew beside the other's tables, its requests lost without a word. An empty
    file is let be (its code makes the tables); ``_check_job_queue`` refuses an empty frontier
    of a crawl that had queued requests."""
    for name, tables in _JOB_TABLES.items():
        path = jobdir / name
        if not path.is_file():
            continue
        try:
            reason = _missing_table(path, tables)
        except sqlite3.Error as exc:
            reason = str(exc)
        if reason:
            raise _not_a_job_directory(jobdir, name, reason)


def _missing_table(path: Path, tables: dict[str, tuple[tuple[str, ...], bool]]) -> str | None:
    """What ``path`` lacks of ``tables`` (None: nothing, or it is empty)."""
    with closing(sqlite3.connect(path)) as database:
        if not _has_tables(database):
            return None
        for table, (columns, may_lack) in tables.items():
            kind = database.execute(
                "SELECT type FROM sqlite_master WHERE name = ?", (table,)
            ).fetchone()
            if kind is None and may_lack:
                continue
            if kind != ("table",):
                return f"it has no table {table}"
            found = {row[1] for row in database.execute(f"PRAGMA table_info({table})")}
            missing = [column for column in columns if column not in found]
            if missing:
                return f"its table {table} has no column {missing[0]}"
    return None


def _has_tables(database: sqlite3.Connection) -> bool:
    return database.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None


def _check_job_queue(settings: Any, strategy: str) -> None:
    """The JOBDIR queue a resumed crawl goes on with (``requests.queue``): its saved state is
    what the strategy's ``close()`` writes, for Scrapy and the strategy's ``restore`` read it
    as the scheduler opens (a file cut short, a folder, a value of another type: a cascade of
    tracebacks, on every resume); and its frontier file holds the requests the crawl queued
    (one emptied would resume an empty frontier and end the crawl early without a word).
    A missing state is let be: it is what a crash leaves (the frontier file knows the rest,
    and the crawl's counters whether there should be one)."""
    jobdir = settings.get("JOBDIR") if settings is not None else None
    if not jobdir:
        return
    jobdir = Path(jobdir)
    if (jobdir / QUEUE_DIR).exists() and not (jobdir / QUEUE_DIR).is_dir():
        raise _not_a_job_directory(jobdir, QUEUE_DIR, "it is not a folder")
    state = _queue_state(jobdir)
    if state is not None:
        try:
            strategy_class(strategy).check_state(state)
        except ValueError as exc:
            raise _not_a_job_directory(jobdir, QUEUE_STATE_FILE, str(exc)) from None
    queued = (state is not None and state.get("seq", 0) > 0) or _counted(jobdir)
    frontier = jobdir / JOB_FRONTIER_FILE
    if not frontier.exists():
        if queued:
            raise _not_a_job_directory(jobdir, JOB_FRONTIER_FILE, "it is missing")
        return
    # focused.json is written before the frontier file is made (and the frontier's tables
    # with it): a job that has both has queued into it.
    if queued or (jobdir / "focused.json").exists():
        try:
            with closing(sqlite3.connect(frontier)) as database:
                empty = not _has_tables(database)
        except sqlite3.Error as exc:
            raise _not_a_job_directory(jobdir, JOB_FRONTIER_FILE, str(exc)) from None
        if empty:
            raise _not_a_job_directory(jobdir, JOB_FRONTIER_FILE, "it is empty")


def _counted(jobdir: Path) -> bool:
    """Whether the crawl's counters (``focused.resume.CrawlCounters``) counted anything: a
    response or a link, which came after its seeds were queued, so its frontier file was made.
    They are written as they change, where the queue's state waits for a pause: after a crash
    they alone tell a frontier file deleted from one never made."""
    path = jobdir / COUNTERS_FILE
    if not path.is_file():
        return False
    try:
        with closing(sqlite3.connect(path)) as database:
            if not _has_tables(database):
                return False
            query = "SELECT 1 FROM counters WHERE value > 0 LIMIT 1"
            return database.execute(query).fetchone() is not None
    except sqlite3.Error as exc:
        raise _not_a_job_directory(jobdir, COUNTERS_FILE, str(exc)) from None


def _queue_state(jobdir: Path) -> Any:
    """The JOBDIR queue's saved state as JSON gives it back (None when there is none)."""
    path = jobdir / QUEUE_STATE_FILE
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        reason = "it is not a file"
    except OSError as exc:
        reason = exc.strerror or one_line(exc)
    except UnicodeDecodeError:
        reason = "it is not UTF-8 text"
    except ValueError:
        reason = "it is not JSON"
    raise _not_a_job_directory(jobdir, QUEUE_STATE_FILE, reason)


def _check_job_files(jobdir: Path) -> None:
    """The files the resume reads once the crawl has started: a folder where ``spider.state``,
    the sentence encoder's state or their temporary files are written (a traceback as the
    crawl closed, its state lost), or a ``topic.jsonl`` that ``focused.resume.TopicJournal``
    did not write (junk, binary: a traceback as the spider opened) is refused now. A
    ``spider.state`` that cannot be unpickled, or is not what a crawl saves, is read as missing
    (``focused.resume.SpiderState``), as after a crash, and so is the encoder's state."""
    kept = (STATE_FILE, STATE_TEMP_FILE, ENCODER_STATE_FILE, ENCODER_STATE_TEMP_FILE, TOPIC_FILE)
    for name in kept:
        path = jobdir / name
        if path.exists() and not path.is_file():
            raise _not_a_job_directory(jobdir, name, "it is not a file")
    try:
        TopicJournal(jobdir).texts()
    except (OSError, ValueError) as exc:
        raise _not_a_job_directory(jobdir, TOPIC_FILE, one_line(exc)) from None


def check_unstored_dir(settings: Any) -> None:
    """FOCUSED_UNSTORED_DIR, when given, is a folder the crawl can make its file in: found out
    now rather than once the store has failed and the records have nowhere else to go. Its
    default, the folder of FOCUSED_DB, is checked with the store."""
    folder = settings.get("FOCUSED_UNSTORED_DIR")
    if folder:
        check_output_file(
            Path(folder, "unstored.jsonl"),
            f"FOCUSED_UNSTORED_DIR {quoted(folder)}",
            makes_folders=True,
        )


def _job_record(settings: Any) -> dict[str, Any]:
    """``JOBDIR/focused.json``: what a resumed crawl must reuse ({} for a new JOBDIR)."""
    path = _job_file(settings, "focused.json")
    if path is None:
        return {}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return {}  # a new JOBDIR (one that is a file is refused by _check_jobdir)
    except OSError as exc:  # a folder, no permission, a JOBDIR name too long...
        raise _not_a_job_directory(path.parent, path.name, exc.strerror) from None
    except ValueError:  # also JSON and UTF-8 errors
        record = None
    if not _is_job_record(record):
        raise _not_a_job_directory(path.parent, path.name)
    return record


def _is_job_record(record: Any) -> bool:
    """What ``remember_job`` writes: another value was a traceback as the resume compared it
    (a crawl id of 5, an order without its topic)."""
    if not isinstance(record, dict):
        return False
    if not all(isinstance(record.get(name, ""), str) for name in ("crawl_id", "strategy")):
        return False
    order = record.get("order", {})
    return isinstance(order, dict) and (
        not order
        or (
            isinstance(order.get("topic"), str)
            and isinstance(order.get("params"), dict)
            and isinstance(order.get("language"), str | None)
        )
    )


def crawl_order(
    strategy: str, params: Mapping[str, Any], topic: str, language: str | None
) -> dict[str, Any]:
    """What orders a crawl's frontier, which a resumed JOBDIR crawl and every process of a
    shared crawl must be given alike: the topic hashed (it may be a whole file), the parameters
    as JSON gives them back, and the language the topic is tokenized in (None: unknown)."""
    return {
        "strategy": strategy,
        "params": json.loads(json.dumps(dict(params))),
        "topic": hashlib.sha256(topic.encode()).hexdigest()[:16],
        "language": language,
    }


def as_saved_now(saved: Mapping[str, Any], order: Mapping[str, Any]) -> dict[str, Any]:
    """An order ``saved`` by an earlier run (a JOBDIR's, a shared crawl's first process's) as
    this version saves it: one saved before orders named their language (session 33) is taken
    to tokenize its topic as ``order`` does."""
    return {"language": order["language"], **saved}


def describe_language(language: str | None) -> str:
    return f"language={language}" if language else "no language (none given, none told)"


def _check_resumed_job(job: Mapping[str, Any], order: Mapping[str, Any], crawl_id: str) -> None:
    """A JOBDIR goes on only with the crawl it holds: its frontier was ordered by its strategy,
    parameters and topic, and its pages are stored under its crawl id. (A job directory
    written before session 19 has no order: only its strategy is compared.)"""
    saved = job.get("strategy")
    if saved and saved != order["strategy"]:
        raise ConfigError(
            f"JOBDIR holds a {saved} crawl; resume it with -a strategy={saved} or use a new JOBDIR"
        )
    saved_order = job.get("order") and as_saved_now(job["order"], order)
    if saved_order and saved_order["topic"] != order["topic"]:
        raise ConfigError(
            "JOBDIR holds a crawl of another query or topic_file; resume it with the same, or "
            "use a new JOBDIR"
        )
    if saved_order and saved_order["language"] != order["language"]:
        # Its frontier's scores came from the topic's words in that language's tokenizer.
        raise ConfigError(
            f"JOBDIR holds a crawl whose query has {describe_language(saved_order['language'])}"
            f", this run {describe_language(order['language'])}; resume it with the same -a "
            "language or use a new JOBDIR"
        )
    if saved_order and saved_order["params"] != _asked_of_older_job(saved_order, order):
        raise ConfigError(
            f"JOBDIR holds a {saved} crawl with {describe_params(saved_order['params'])}; resume "
            "it with the same parameters or use a new JOBDIR"
        )
    saved_id = job.get("crawl_id")
    if crawl_id and saved_id and crawl_id != saved_id:
        raise ConfigError(
            f"JOBDIR holds crawl {saved_id}; resume it with -a crawl_id={saved_id} (or none), or "
            "use a new JOBDIR"
        )


def _asked_of_older_job(saved: Mapping[str, Any], order: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters ``order`` asks of a job whose ``saved`` order may be older than a
    parameter: one it does not name counts only when given another value than its default."""
    defaults = {
        name: param.default for name, param in strategy_class(order["strategy"]).params.items()
    }
    return {
        name: value
        for name, value in order["params"].items()
        if name in saved["params"] or value != defaults[name]
    }


def _check_shared_frontier(
    settings: Any, order: Mapping[str, Any], args: Mapping[str, str]
) -> None:
    url = settings.get("FOCUSED_FRONTIER") if settings is not None else None
    if not url:
        return
    strategy = order["strategy"]
    if not strategy_class(strategy).runs_distributed():
        raise ConfigError(
            f"strategy {strategy} keeps its order in one process: it cannot use FOCUSED_FRONTIER"
        )
    if not args.get("crawl_id", "").strip():
        raise ConfigError("FOCUSED_FRONTIER needs -a crawl_id=ID, the same for every process")
    if settings.get("JOBDIR"):
        raise ConfigError("FOCUSED_FRONTIER and JOBDIR exclude each other: Redis keeps the crawl")
    from focused.distributed import check_frontier  # imports redis: only when asked for

    budget, timeout = (
        settings.getint("CLOSESPIDER_PAGECOUNT"),
        settings.getfloat("FOCUSED_WORKER_TIMEOUT"),
    )
    check_frontier(str(url), args["crawl_id"].strip(), order, budget, timeout)


def check_store(settings: Any, config: CrawlConfig) -> None:
    """The store opens: an SQLite file that can be made, a MongoDB server that answers. Run
    once before the crawl starts; a store that fails later stops the crawl
    (``store_unreachable``). And the crawl's id holds no pages but its own: a crawl goes on
    only from its JOBDIR or its shared frontier, and a run of its own under the id of another
    began its fetch order and counts again over the pages stored (a report of 10 pages
    fetched and 30 stored, 2 relevant where 10 were)."""
    from focused.storage import StoreError, open_store  # pymongo: only when asked for

    url = settings.get("FOCUSED_FRONTIER")
    try:
        store = open_store(settings)
        try:
            crawl = store.get_crawl(config.crawl_id)
            # A recrawl of it under way (its mark in the record, focused.refresh) would fetch
            # the pages this run fetches, each visit counted twice.
            # Checked again as the crawl records its start (Store.start_crawl): a recrawl
            # may claim it meanwhile.
            if crawl is not None and recrawl_is_live(crawl, datetime.now(UTC)):
                raise ConfigError(being_recrawled(crawl))
            # Checked again as the crawl records its start: two runs started together both
            # pass here (Store.start_crawl).
            unlocked = starts_unlocked(settings, config.crawl_id)
            if crawl is not None and unlocked and is_live(crawl, datetime.now(UTC)):
                raise ConfigError(running_elsewhere(crawl["crawl_id"], crawl["seen_at"]))
            if crawl is None and not url and _job_has_run(settings, config.crawl_id):
                # Recorded as it started, before its first request: this store is not the
                # one it ran with (a FOCUSED_DB relative to another working directory, a
                # MONGO_URI not given again), where it went on, its pages split between two.
                raise ConfigError(
                    f"JOBDIR holds crawl {config.crawl_id}, which the {store.backend} store at"
                    f" {store.location} does not hold: resume it with the store its pages went"
                    " to (FOCUSED_DB, or MONGO_URI), or use a new JOBDIR"
                )
            stored = crawl is not None and store.pages(
                config.crawl_id, order="latest", limit=1, fields=("fetch_order",)
            )
            # Only a frontier that holds the crawl goes on with it: one that lost it (Redis
            # restarted without its data) or never had it (the id of a crawl of one process)
            # would start it again from nothing, its fetch order and budget from 0 over the
            # pages stored.
            goes_on = bool(stored) and (
                _frontier_goes_on(store, str(url), config.crawl_id)
                if url
                else _job_record(settings).get("crawl_id") == config.crawl_id
            )
        finally:
            store.close()
    except StoreError as exc:
        raise ConfigError(str(exc)) from None
    if stored and not goes_on:
        raise ConfigError(
            f"crawl {config.crawl_id} has pages in the store already: a crawl goes on only from "
            "its JOBDIR (or its shared frontier); give another crawl_id"
            + (f" ({config.jobdir_note})" if config.jobdir_note else "")
        )


def _job_has_run(settings: Any, crawl_id: str) -> bool:
    """Whether JOBDIR holds crawl ``crawl_id`` and it ran: its counters counted a queued seed
    or a response, which come once its store has recorded it."""
    jobdir = settings.get("JOBDIR")
    return (
        bool(jobdir)
        and _job_record(settings).get("crawl_id") == crawl_id
        and _counted(Path(jobdir))
    )


def starts_unlocked(settings: Any, crawl_id: str) -> bool:
    """Whether this run starts crawl ``crawl_id`` where no lock keeps it to one process: into
    MongoDB (``lock_crawl`` locks an SQLite store's crawls), not shared (the processes of a
    shared frontier run one crawl by design), and not going on from a JOBDIR that holds it (the
    kernel's lock on it, ``lock_jobdir``). Two such runs started together (a Scrapyd job
    scheduled twice) both found no page stored, and both crawled: every page fetched, numbered
    and counted twice. The later is refused while the other's record is live
    (``focused.report.is_live``): a run killed before it stored a page is one for 3 heartbeats.
    Read before the crawl writes its JOBDIR's record (``remember_job``)."""
    return (
        bool(settings.get("MONGO_URI"))
        and not settings.get("FOCUSED_FRONTIER")
        and _job_record(settings).get("crawl_id") != crawl_id
    )


def _frontier_goes_on(store: Any, url: str, crawl_id: str) -> bool:
    """Whether the Redis frontier at ``url`` holds crawl ``crawl_id``, whose pages ``store``
    holds; ConfigError if it holds it behind the store. Redis restarted from an older snapshot
    (RDB, a replica that lagged) holds the crawl as it was: going on would fetch the pages
    stored since again, numbered again over fetch orders stored, past the page budget. Every
    fetch order stored was given by Redis, except those of the pages a process had under way
    when it lost Redis, numbered on from its last count: their requests stay in flight in Redis
    (to be fetched again), so no more pages than those may be numbered past Redis's count."""
    from focused.distributed import frontier_state  # imports redis: only when asked for

    state = frontier_state(url, crawl_id)
    if state is None:
        return False
    latest = store.pages(
        crawl_id, order="latest", limit=state.in_flight + 1, fields=("fetch_order",)
    )
    past = [page["fetch_order"] for page in latest if (page["fetch_order"] or 0) > state.pages]
    if len(past) > state.in_flight:
        raise ConfigError(
            f"crawl {crawl_id} on {redact_uri(url)} is behind its store: Redis numbered"
            f" {state.pages} pages fetched, the store holds pages numbered up to {past[0]}, more"
            f" of them past {state.pages} than the {state.in_flight} requests its processes left"
            " under way (Redis restarted from an older snapshot?): going on would fetch them"
            " again, past the page budget; give another crawl_id"
        )
    return True


def remember_job(settings: Any, config: CrawlConfig) -> None:
    """Write what a resume must reuse into JOBDIR."""
    path = _job_file(settings, "focused.json")
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "crawl_id": config.crawl_id,
        "strategy": config.strategy,
        "order": config.order,
    }
    path.write_text(json.dumps(record), encoding="utf-8")
