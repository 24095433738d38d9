"""Bad input ends a run with one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import fcntl
import json
import pickle
import re
import resource
import shutil
import socket
import sqlite3
import subprocess
import threading
import time
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from scrapy.settings import Settings
from w3lib.http import basic_auth_header

from focused.arguments import parse_arguments
from focused.errors import ConfigError, quoted
from focused.jobchecks import crawl_lock_offset, remember_job
from focused.replayweb import ReplayServer
from focused.setting_names import unknown_settings_note
from focused.settingchecks import (
    LOOKUP_S,
    check_feed_placeholders,
    check_settings,
)
from focused.storage import StoreSettingError, open_store
from focused.strategies import strategy_class
from tests.conftest import REPO, Crawl, crawl_args, crawl_env, run_crawl, run_scrapy, scrapy_command
from tests.sites import Reply, Site, html
from tests.test_commands import run_with_stderr_closed
from tests.test_storage import filled_sqlite, read_only

GOOD = {"query": "birds", "seeds": "http://127.0.0.1:9/wiki/Bird"}


def _ipv4_alone(name: str) -> bool:
    try:
        return {info[0] for info in socket.getaddrinfo(name, None)} == {socket.AF_INET}
    except OSError:
        return False


# The tests of a bind address or a seed by its host name: localhost with no IPv6 address, as in
# /etc/hosts here (Debian's names it ::1 too: then it has both families, and is let be).
LOCALHOST_IPV4_ALONE = pytest.mark.skipif(
    not _ipv4_alone("localhost"), reason="localhost has an IPv6 address here"
)


def run(arguments: dict[str, str], settings: dict[str, object] | None = None):
    return run_scrapy(crawl_args(arguments, settings or {}), timeout=60)


@pytest.mark.parametrize(
    ("arguments", "settings", "message"),
    [
        ({"seeds": GOOD["seeds"]}, {}, "missing query"),
        ({"query": "birds"}, {}, "missing seeds"),
        ({**GOOD, "seeds": "not a url"}, {}, "is not an http(s) URL"),
        ({**GOOD, "seeds": "ftp://example.org/"}, {}, "is not an http(s) URL"),
        (
            {**GOOD, "seeds": "http://alice:s3cret@127.0.0.1:9/"},
            {},
            "seed 'http://***@127.0.0.1:9/' has a user name or password in it: give them as"
            " -s HTTPAUTH_USER=... -s HTTPAUTH_PASS=... -s HTTPAUTH_DOMAIN=127.0.0.1:9",
        ),
        (GOOD, {"HTTPAUTH_PASS": "p"}, "setting HTTPAUTH_PASS needs HTTPAUTH_DOMAIN"),
        # A typo of a setting's name: Scrapy kept it, nothing read it, and the crawl had no
        # budget (or stored its pages in SQLite, not in MongoDB).
        (
            GOOD,
            {"CLOSESPIDER_PAGCOUNT": "5"},
            "setting 'CLOSESPIDER_PAGCOUNT' is not one Scrapy or focused reads: did you mean"
            " CLOSESPIDER_PAGECOUNT?",
        ),
        (GOOD, {"MONGO_URL": "mongodb://127.0.0.1:1"}, "did you mean MONGO_URI?"),
        (GOOD, {"closespider_pagecount": "5"}, "did you mean CLOSESPIDER_PAGECOUNT?"),
        ({**GOOD, "strategy": "nosuch"}, {}, "unknown strategy 'nosuch'; valid strategies: "),
        (
            {**GOOD, "strategy": "dfs", "max_depth": "deep"},
            {},
            "max_depth='deep' is not an integer",
        ),
        ({**GOOD, "strategy": "dfs", "max_depth": "-1"}, {}, "max_depth=-1 is below its minimum 0"),
        ({**GOOD, "beam_width": "3"}, {}, "unknown argument 'beam_width'"),
        # Scrapyd's -d JOBDIR=... for -d setting=JOBDIR=...: a setting given as an argument.
        (
            {**GOOD, "JOBDIR": "jobs/birds"},
            {},
            "JOBDIR is a setting, not a spider argument: give it as -s JOBDIR=VALUE",
        ),
        (GOOD, {"RELEVANCE_NUM_TOPICS": "1" + "0" * 400}, "RELEVANCE_NUM_TOPICS=1000"),
        (
            GOOD,
            {"FOCUSED_WORKER_TIMEOUT": "1e16"},
            "FOCUSED_WORKER_TIMEOUT=1e16 is outside [1.0, 604800]",
        ),
        (
            {**GOOD, "strategy": "hybrid", "max_depth": "3"},
            {},
            "max_depth works only with then=dfs, not then=bestfirst",
        ),
        (
            {**GOOD, "strategy": "annealing", "cooling": "linear", "factor": "0.9"},
            {"CLOSESPIDER_PAGECOUNT": 50},
            "factor works only with cooling=geometric, not cooling=linear",
        ),
        (
            {**GOOD, "strategy": "beam", "beam_width": "-2"},
            {},
            "beam_width=-2 is below its minimum 1",
        ),
        (
            {**GOOD, "strategy": "annealing", "cooling": "fast"},
            {},
            "cooling='fast' is not one of: geometric, linear",
        ),
        (
            {**GOOD, "strategy": "threshold", "factor": "1.5"},
            {},
            "factor=1.5 is above its maximum 1",
        ),
        ({**GOOD, "strategy": "pso", "particles": "3"}, {}, "particles=3 is below its minimum 5"),
        ({**GOOD, "strategy": "bees", "n_bees": "0"}, {}, "n_bees=0 is below its minimum 1"),
        ({**GOOD, "query": "   !!! "}, {}, "no words"),
        # Words the tokenizer drops leave the topic to the seeds alone.
        ({**GOOD, "query": "the and of"}, {}, "no words to match pages against: 'the and of'"),
        ({**GOOD, "query": "1984 2001"}, {}, "no words to match pages against: '1984 2001'"),
        ({**GOOD, "query": "و في", "language": "ar"}, {}, "no words to match pages against"),
        ({**GOOD, "topic_file": "/nonexistent/topic.txt"}, {}, "cannot read topic_file"),
        (GOOD, {"RELEVANCE_THRESHOLD": "high"}, "RELEVANCE_THRESHOLD='high' is not a number"),
        (GOOD, {"RELEVANCE_THRESHOLD": "2"}, "RELEVANCE_THRESHOLD=2 is outside"),
        (GOOD, {"RELEVANCE_FIT_TOKENS": "-1"}, "RELEVANCE_FIT_TOKENS=-1 is outside"),
        (GOOD, {"MAX_LINKS_PER_PAGE": "-1"}, "MAX_LINKS_PER_PAGE=-1 is outside"),
        (GOOD, {"CLOSESPIDER_PAGECOUNT": "-5"}, "CLOSESPIDER_PAGECOUNT=-5 is outside"),
        ({**GOOD, "strategy": "shark", "delta": "1.5"}, {}, "delta=1.5 is above its maximum 1"),
        ({**GOOD, "strategy": "shark", "gamma": "-0.1"}, {}, "gamma=-0.1 is below its minimum 0"),
        ({**GOOD, "strategy": "shark", "depth": "0"}, {}, "depth=0 is below its minimum 1"),
        (
            {**GOOD, "strategy": "hybrid", "then": "annealing"},
            {},
            "then='annealing' is not one of: bestfirst, dfs",
        ),
        ({**GOOD, "strategy": "hybrid", "bfs_levels": "-1"}, {}, "bfs_levels=-1 is below"),
        (
            {**GOOD, "strategy": "hybrid", "then": "dfs", "bfs_levels": "3", "max_depth": "1"},
            {},
            "max_depth=1 is below bfs_levels=3",
        ),
        ({**GOOD, "strategy": "astar", "h_weight": "-2"}, {}, "h_weight=-2 is below its minimum"),
        (
            {**GOOD, "strategy": "rank_semantic", "band_low": "0.8", "band_high": "0.2"},
            {},
            "band_low=0.8 is above band_high=0.2",
        ),
        ({**GOOD, "strategy": "rank_semantic", "rank_every": "0"}, {}, "rank_every=0 is below"),
        ({**GOOD, "strategy": "rank_semantic", "T": "x"}, {}, "T='x' is not a number"),
        (GOOD, {"CLOSESPIDER_RELEVANT": "-1"}, "CLOSESPIDER_RELEVANT=-1 is outside"),
        (GOOD, {"DRIFT_WINDOW": "ten"}, "DRIFT_WINDOW='ten' is not an integer"),
        (GOOD, {"DRIFT_MIN_HARVEST": "1.5"}, "DRIFT_MIN_HARVEST=1.5 is outside"),
        ({**GOOD, "render": "sometimes"}, {}, "render='sometimes' is not one of: never, always"),
        (
            {**GOOD, "render": "auto"},
            {"FOCUSED_CHROMIUM": "/nonexistent"},
            "Chromium not found at /nonexistent; install it with `sudo apt-get install chromium`",
        ),
        (GOOD, {"FOCUSED_RENDER_BLOCK": "image,document"}, "'document' is not one of"),
        (GOOD, {"PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": "0"}, "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT=0"),
        # Opened as the browser started: a traceback, and the crawl went on without it.
        (
            {**GOOD, "render": "always"},
            {"PLAYWRIGHT_CONTEXTS": '{"default": {"ignore_https_errors": "yes"}}'},
            "setting PLAYWRIGHT_CONTEXTS: 'default' cannot be opened: ignore_https_errors:",
        ),
        (  # the reason is on the message's second line: the error ended at the colon
            {**GOOD, "render": "always"},
            {"PLAYWRIGHT_CONTEXTS": '{"default": {"storage_state": "/nonexistent/state.json"}}'},
            "cannot be opened: Error reading storage state from /nonexistent/state.json: [Errno 2]",
        ),
        (GOOD, {"ENCODER_WHOLE_SHARE": "1.5"}, "ENCODER_WHOLE_SHARE=1.5 is outside"),
        # A traceback for every request (its default is no import path), or as the command
        # loaded the spider; a crawl without stats exited 1 with no word.
        (
            GOOD,
            {"DOWNLOADER_CLIENTCONTEXTFACTORY": "no.Such"},
            "setting DOWNLOADER_CLIENTCONTEXTFACTORY='no.Such' cannot be imported: no module",
        ),
        (GOOD, {"DOWNLOAD_HANDLERS": '{"http": null}'}, "DOWNLOAD_HANDLERS turns off http:,"),
        (GOOD, {"SPIDER_LOADER_CLASS": "no.Such"}, "setting SPIDER_LOADER_CLASS='no.Such' cannot"),
        # Imported as the crawler process was made: a traceback.
        (GOOD, {"ASYNCIO_EVENT_LOOP": "no.Such"}, "setting ASYNCIO_EVENT_LOOP='no.Such' cannot"),
        # Looked up as the download handler loaded: no page fetched, a traceback, exit 1.
        (
            GOOD,
            {"DOWNLOAD_TLS_MIN_VERSION": "TLS1.2"},
            "setting DOWNLOAD_TLS_MIN_VERSION='TLS1.2' is not one of: TLSv1.0, TLSv1.1, TLSv1.2,",
        ),
        (GOOD, {"DOWNLOAD_TLS_MAX_VERSION": ""}, "setting DOWNLOAD_TLS_MAX_VERSION='' is not"),
        (GOOD, {"DOWNLOADER_CLIENT_TLS_METHOD": "SSLv3"}, "DOWNLOADER_CLIENT_TLS_METHOD='SSLv3'"),
        # Every connection failed to bind: a traceback at each robots.txt, nothing fetched.
        (
            GOOD,
            {"DOWNLOAD_BIND_ADDRESS": "no-such-host.invalid"},
            "setting DOWNLOAD_BIND_ADDRESS='no-such-host.invalid' cannot be bound here: ",
        ),
        (GOOD, {"DOWNLOAD_BIND_ADDRESS": "192.0.2.1"}, "'192.0.2.1' cannot be bound here: Cannot"),
        # An address of one family, every seed an address of the other: each request failed
        # (a traceback at each robots.txt), and the crawl fetched nothing.
        (
            GOOD,
            {"DOWNLOAD_BIND_ADDRESS": "::1"},
            "setting DOWNLOAD_BIND_ADDRESS='::1' is an IPv6 address, and every seed an IPv4 one"
            " (http://127.0.0.1:9/wiki/Bird): no connection from one family reaches the other;"
            " give an IPv4 bind address, or none",
        ),
        (
            {**GOOD, "seeds": "http://[::1]:9/,http://[::1]:10/"},
            {"DOWNLOAD_BIND_ADDRESS": "127.0.0.1"},
            "setting DOWNLOAD_BIND_ADDRESS='127.0.0.1' is an IPv4 address, and every seed an IPv6",
        ),
        # A host name, the bind address's or a seed's, has the families of its addresses: it was
        # not looked up, and the crawl failed as above.
        pytest.param(
            {**GOOD, "seeds": "http://[::1]:9/"},
            {"DOWNLOAD_BIND_ADDRESS": "localhost"},
            "setting DOWNLOAD_BIND_ADDRESS='localhost' is an IPv4 address (127.0.0.1), and every"
            " seed an IPv6 one (http://[::1]:9/): no connection from one family reaches the"
            " other; give an IPv6 bind address, or none",
            marks=LOCALHOST_IPV4_ALONE,
        ),
        pytest.param(
            {**GOOD, "seeds": "http://localhost:9/wiki/Bird,http://127.0.0.1:9/"},
            {"DOWNLOAD_BIND_ADDRESS": "::1"},
            "setting DOWNLOAD_BIND_ADDRESS='::1' is an IPv6 address, and every seed an IPv4 one"
            " (http://localhost:9/wiki/Bird at 127.0.0.1): no connection from one family reaches",
            marks=LOCALHOST_IPV4_ALONE,
        ),
        # Imported by Scrapy's spider loader as the command looked up the spider: a traceback.
        (
            GOOD,
            {"SPIDER_MODULES": "spiders,no.such"},
            "setting SPIDER_MODULES: 'no.such' cannot be imported: No module named 'no'",
        ),
        (GOOD, {"SPIDER_MODULES": "spiders,"}, "setting SPIDER_MODULES: '' cannot be imported"),
        (
            GOOD,
            {"STATS_CLASS": "scrapy.statscollectors.DummyStatsCollector"},
            "setting STATS_CLASS=scrapy.statscollectors.DummyStatsCollector keeps no stats",
        ),
        (GOOD, {"ENCODER_STORE_SIZE": "-1"}, "ENCODER_STORE_SIZE=-1 is outside"),
        (GOOD, {"SCORE_BEFORE_DISPATCH": "maybe"}, "SCORE_BEFORE_DISPATCH='maybe' is not true"),
        (GOOD, {"HEAD_CHECK": "sometimes"}, "HEAD_CHECK='sometimes' is not true or false"),
        (GOOD, {"FOCUSED_GC_FREEZE": "maybe"}, "FOCUSED_GC_FREEZE='maybe' is not true"),
        (GOOD, {"RELEVANCE_REFIT_THREAD": "no"}, "RELEVANCE_REFIT_THREAD='no' is not true or"),
        (GOOD, {"FOCUSED_GC_GEN0_THRESHOLD": "-5"}, "FOCUSED_GC_GEN0_THRESHOLD=-5 is outside"),
        (GOOD, {"ROBOTS_CRAWL_DELAY_MAX": "-1"}, "ROBOTS_CRAWL_DELAY_MAX=-1 is outside"),
        (GOOD, {"ROBOTS_RETRY_FAILED_AFTER": "-1"}, "ROBOTS_RETRY_FAILED_AFTER=-1 is outside"),
        (GOOD, {"ROBOTS_TEXTS_MAX": "-1"}, "ROBOTS_TEXTS_MAX=-1 is outside [0, inf]"),
        # Kept in Redis in milliseconds: Redis refused the expiry, and a shared crawl stopped.
        (
            GOOD,
            {"ROBOTS_RETRY_FAILED_AFTER": "1e16"},
            "ROBOTS_RETRY_FAILED_AFTER=1e16 is outside [0.0, 604800]",
        ),
        (GOOD, {"ROBOTS_HOLD_RETRIES": "-1"}, "ROBOTS_HOLD_RETRIES=-1 is outside"),
        # A delay over a day: DOWNLOAD_DELAY=1e300 never sent a host's second request, and the
        # crawl never ended; so AutoThrottle's first delay, a slot's, or those the crawl obeys.
        (GOOD, {"DOWNLOAD_DELAY": "1e300"}, "DOWNLOAD_DELAY=1e300 is outside [0.0, 86400]"),
        (GOOD, {"AUTOTHROTTLE_START_DELAY": "86401"}, "AUTOTHROTTLE_START_DELAY=86401 is"),
        # With AUTOTHROTTLE_TARGET_CONCURRENCY=1e-300: a hang as well.
        (GOOD, {"AUTOTHROTTLE_MAX_DELAY": "1e300"}, "AUTOTHROTTLE_MAX_DELAY=1e300 is outside"),
        (
            GOOD,
            {"DOWNLOAD_DELAY": "1", "DOWNLOAD_DELAY_JITTER": "1e300"},
            "setting DOWNLOAD_DELAY=1 with DOWNLOAD_DELAY_JITTER=1e+300: delays up to 1e+300 s are"
            " drawn; at most a day (86400)",
        ),
        (
            GOOD,
            {"DOWNLOAD_SLOTS": '{"h": {"delay": 50000}}', "DOWNLOAD_DELAY_JITTER": "1"},
            "setting DOWNLOAD_SLOTS: 'h' has delay=50000, jitter=1: delays up to 100000 s are",
        ),
        (
            GOOD,
            {"DOWNLOAD_SLOTS": '{"h": {"delay": 1e300}}'},
            "setting DOWNLOAD_SLOTS: 'h' has delay=1e+300; give a number, at least 0 and at most",
        ),
        (GOOD, {"ROBOTS_CRAWL_DELAY_MAX": "1e300"}, "ROBOTS_CRAWL_DELAY_MAX=1e300 is outside"),
        (GOOD, {"RETRY_AFTER_MAX": "1e300"}, "RETRY_AFTER_MAX=1e300 is outside [0.0, 86400]"),
        (GOOD, {"STORAGE_RETRY_DELAY": "1e300"}, "STORAGE_RETRY_DELAY=1e300 is outside"),
        (GOOD, {"FOCUSED_HEARTBEAT_INTERVAL": "1e300"}, "FOCUSED_HEARTBEAT_INTERVAL=1e300 is"),
        # SQLite's busy timeout in milliseconds overflowed: a lock failed a write at once.
        (GOOD, {"FOCUSED_DB_TIMEOUT": "3e6"}, "FOCUSED_DB_TIMEOUT=3e6 is outside [0.0, 2147483"),
        (GOOD, {"ROBOTS_HOLD_RETRIES": "few"}, "ROBOTS_HOLD_RETRIES='few' is not a"),
        (GOOD, {"RETRY_AFTER_MAX": "soon"}, "RETRY_AFTER_MAX='soon' is not a number"),
        (GOOD, {"RETRY_BACKOFF_BASE": "-1"}, "RETRY_BACKOFF_BASE=-1 is outside"),
        # It meant the default file, focused.sqlite3 in the working directory.
        (GOOD, {"FOCUSED_DB": ""}, "setting FOCUSED_DB needs a file, not ''"),
        (GOOD, {"FOCUSED_DB": " "}, "setting FOCUSED_DB needs a file, not ' '"),  # made " "
        # pymongo took it for a host without a name, and said so after MONGO_TIMEOUT_MS.
        (GOOD, {"MONGO_URI": " "}, "setting MONGO_URI needs a mongodb:// URI, not ' '"),
        # URLs the downloader cannot send: each failed in the crawl, with a traceback.
        ({**GOOD, "seeds": "http://127.0.0.1:99999/wiki/Bird"}, {}, "is not a valid URL"),
        ({**GOOD, "seeds": "http://127.0.0.1:port/wiki/Bird"}, {}, "is not a valid URL"),
        ({**GOOD, "seeds": "http://[::1/wiki/Bird"}, {}, "is not a valid URL"),
        ({**GOOD, "seeds": "http://exa%20mple.org/wiki/Bird"}, {}, "is not a valid URL"),
        # A blank parts two seeds: the second is no URL.
        (
            {**GOOD, "seeds": "http://exa mple.org/wiki/Bird"},
            {},
            "seed 'mple.org/wiki/Bird' is not an http(s) URL",
        ),
        # A host Twisted does not connect to: a traceback at its robots.txt.
        ({**GOOD, "seeds": "http://*.example.org/wiki/Bird"}, {}, "is not a valid URL"),
        # A label empty or over 63 characters: the resolver's IDNA codec failed, a traceback.
        ({**GOOD, "seeds": "http://a..b.org/wiki/Bird"}, {}, "is not a valid URL"),
        # Scrapy's UrlLengthMiddleware dropped it: the crawl fetched nothing and exited 0.
        (
            {**GOOD, "seeds": "http://127.0.0.1:9/" + "a" * 3000},
            {},
            "characters long: Scrapy drops a URL longer than URLLENGTH_LIMIT (2083)",
        ),
        # A number given empty (also with Scrapyd's -d setting=NAME=): read once the crawl ran.
        (GOOD, {"RELEVANCE_THRESHOLD": ""}, "setting RELEVANCE_THRESHOLD='' is not a number"),
        (GOOD, {"DOWNLOAD_DELAY": ""}, "setting DOWNLOAD_DELAY='' is not a number"),
        # Seeds the offsite filter drops: the crawl fetched nothing and exited 0.
        ({**GOOD, "allowed_domains": "http://127.0.0.1:9/"}, {}, "is not a domain name"),
        ({**GOOD, "allowed_domains": "example.org"}, {}, "is outside allowed_domains"),
        (GOOD, {"RELEVANCE_THRESHOLD": "nan"}, "RELEVANCE_THRESHOLD='nan' is not a finite number"),
        (GOOD, {"STORE_MIN_RELEVANCE": "2"}, "STORE_MIN_RELEVANCE=2 is outside [0.0, 1.0]"),
        (GOOD, {"STORAGE_RETRIES": "x"}, "STORAGE_RETRIES='x' is not an integer"),
        (GOOD, {"STORAGE_RETRY_DELAY": "x"}, "STORAGE_RETRY_DELAY='x' is not a number"),
        (GOOD, {"FOCUSED_HEARTBEAT_INTERVAL": "0"}, "FOCUSED_HEARTBEAT_INTERVAL=0 is outside"),
        (GOOD, {"FOCUSED_DB_TIMEOUT": "-1"}, "FOCUSED_DB_TIMEOUT=-1 is outside"),
        # Found out only once the store failed and its pages had nowhere to go.
        (
            GOOD,
            {"FOCUSED_UNSTORED_DIR": "scrapy.cfg"},
            "cannot write FOCUSED_UNSTORED_DIR 'scrapy.cfg': scrapy.cfg is not a writable folder",
        ),
        # The WARC file (focused.warc) would fail at the crawl's first page.
        (
            GOOD,
            {"WARC_DIR": "scrapy.cfg"},
            "cannot write WARC_DIR 'scrapy.cfg': scrapy.cfg is not a writable folder",
        ),
        # Each crawl made the encoder's export again (40 s), with three warnings.
        (
            GOOD,
            {"ENCODER_EXPORT_DIR": "scrapy.cfg"},
            "cannot write ENCODER_EXPORT_DIR 'scrapy.cfg': scrapy.cfg is not a writable folder",
        ),
        (GOOD, {"ENCODER_STORE_DIR": "/proc/x"}, "cannot write ENCODER_STORE_DIR '/proc/x': "),
        (GOOD, {"DOWNLOAD_TIMEOUT": "x"}, "DOWNLOAD_TIMEOUT='x' is not a number"),
        (GOOD, {"DOWNLOAD_MAXSIZE": "10MB"}, "DOWNLOAD_MAXSIZE='10MB' is not an integer"),
        (GOOD, {"REDIRECT_MAX_TIMES": "x"}, "REDIRECT_MAX_TIMES='x' is not an integer"),
        (GOOD, {"CONCURRENT_REQUESTS_PER_DOMAIN": "0"}, "CONCURRENT_REQUESTS_PER_DOMAIN=0 is"),
        # Scrapy's own settings, checked from their defaults: each was a traceback, or a crawl
        # that silently did nothing (DEPTH_LIMIT=-1 dropped every link, CONCURRENT_ITEMS=0
        # scraped one page).
        (GOOD, {"ROBOTSTXT_OBEY": "perhaps"}, "ROBOTSTXT_OBEY='perhaps' is not true or false"),
        (GOOD, {"CLOSESPIDER_TIMEOUT": "1h"}, "CLOSESPIDER_TIMEOUT='1h' is not a number"),
        (GOOD, {"DEPTH_LIMIT": "-1"}, "DEPTH_LIMIT=-1 is outside [0, inf]"),
        (GOOD, {"CONCURRENT_ITEMS": "0"}, "CONCURRENT_ITEMS=0 is outside [1, 10000]"),
        (GOOD, {"LOG_LEVEL": "info"}, "LOG_LEVEL='info' is not a log level"),
        (GOOD, {"DUPEFILTER_CLASS": "dupes.Filter"}, "DUPEFILTER_CLASS='dupes.Filter' cannot be"),
        (GOOD, {"DOWNLOAD_SLOTS": "[2]"}, "Invalid -s value: a setting that holds a dict takes"),
        # It would order the crawl while the record and the scoring follow -a strategy.
        (
            GOOD,
            {"SCHEDULER_PRIORITY_QUEUE": "schedulers.bfs.BreadthFirstQueue"},
            "SCHEDULER_PRIORITY_QUEUE is the strategy's queue: choose the strategy with -a",
        ),
        # Replaced by the crawl's own as it renders.
        (
            GOOD,
            {"PLAYWRIGHT_LAUNCH_OPTIONS": '{"headless": false}'},
            "setting PLAYWRIGHT_LAUNCH_OPTIONS is made for the crawl's Chromium: choose it with",
        ),
        # A store that cannot be opened: the crawl started, then failed with a traceback.
        (GOOD, {"MONGO_URI": "mongo://127.0.0.1"}, "MongoDB URI 'mongo://127.0.0.1' is invalid"),
        # pymongo warned in two lines, then ignored the option (the crawl went on without it).
        (
            GOOD,
            {"MONGO_URI": "mongodb://127.0.0.1:1/?journal=maybe"},
            "MongoDB URI 'mongodb://127.0.0.1:1/?journal=maybe' is invalid: The value of journal",
        ),
        # A TLS file the URI names that cannot be read, or holds no certificate: a traceback.
        (
            GOOD,
            {"MONGO_URI": "mongodb://127.0.0.1:1/?tlsCAFile=/nonexistent/ca.pem"},
            "MongoDB URI 'mongodb://127.0.0.1:1/?tlsCAFile=/nonexistent/ca.pem' is invalid: [Err",
        ),
        (
            GOOD,
            {"MONGO_URI": "mongodb://127.0.0.1:1/?tlsCAFile=scrapy.cfg"},
            "MongoDB URI 'mongodb://127.0.0.1:1/?tlsCAFile=scrapy.cfg' is invalid: ",
        ),
        (
            GOOD,
            {"MONGO_URI": "mongodb://127.0.0.1:1", "MONGO_TIMEOUT_MS": "200"},
            "cannot reach the server within 200 ms",
        ),
        (
            GOOD,
            {"MONGO_URI": "mongodb://127.0.0.1:1", "MONGO_DATABASE": "a b"},
            "MongoDB database name 'a b' is invalid",
        ),
        # The default database, `focused`, was used.
        (
            GOOD,
            {"MONGO_URI": "mongodb://127.0.0.1:1", "MONGO_DATABASE": ""},
            "setting MONGO_DATABASE needs a database name, not ''",
        ),
    ],
)
def test_bad_input_gives_one_line_and_exit_2(arguments, settings, message):
    result = run(arguments, settings)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and message in lines[0], lines[0]
    assert "Traceback" not in result.stderr + result.stdout


def _httpauth_domain_told(seed: str) -> str:
    """The HTTPAUTH_DOMAIN the refusal of ``seed``, a seed with a user and password, says to
    give."""
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**GOOD, "seeds": seed})
    told = re.search(r"-s HTTPAUTH_DOMAIN=(\S+)$", str(refused.value))
    assert told, refused.value
    return told.group(1)


def test_a_seed_with_a_password_is_told_the_httpauth_domain_that_sends_it(tmp_path):
    """The refusal of a seed with ``user:password@`` in it names the settings to give instead.
    Its HTTPAUTH_DOMAIN was the seed's host alone, without the port: Scrapy sends the password
    to a request whose host and port are the domain's (docs/input-checks.md), so the crawl
    given what the line said was sent no password, its seed answered 401, and it crawled
    nothing (exit 1)."""
    password = basic_auth_header("u", "p").decode()
    with Site(
        lambda method, path: Reply(200, html("Birds", "<p>birds nest</p>")), password=password
    ) as site:
        domain = _httpauth_domain_told(site.url.replace("//", "//u:p@") + "/")
        auth = {"HTTPAUTH_USER": "u", "HTTPAUTH_PASS": "p", "HTTPAUTH_DOMAIN": domain}
        crawl = run_crawl(
            tmp_path, {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"}, auth
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert [page["url"] for page in crawl.pages()] == [f"{site.url}/"]


@pytest.mark.parametrize(
    ("seed", "domain"),
    [
        ("http://u:p@127.0.0.1:9/", "127.0.0.1:9"),
        ("http://u:p@[::1]:8080/", "[::1]:8080"),
        ("http://u:p@[::1]/", "[::1]"),  # a request names an IPv6 host in its brackets
        ("https://u:p@Example.org:443/", "example.org"),  # the scheme's port, which it drops
        ("http://u:p@bücher.example/", "xn--bcher-kva.example"),  # as a request names it
    ],
)
def test_the_httpauth_domain_told_is_the_seeds_host_as_requested(seed, domain):
    assert _httpauth_domain_told(seed) == domain


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"LOG_ENABLED": "nah"}, "setting LOG_ENABLED='nah' is not true or false"),
        ({"MEMUSAGE_LIMIT_MB": "2GB"}, "setting MEMUSAGE_LIMIT_MB='2GB' is not an integer"),
        ({"RETRY_TIMES": "1.5"}, "setting RETRY_TIMES='1.5' is not an integer"),
        ({"URLLENGTH_LIMIT": "-1"}, "setting URLLENGTH_LIMIT=-1 is outside [0, inf]"),
        ({"DOWNLOAD_DELAY": "-0.5"}, "setting DOWNLOAD_DELAY=-0.5 is outside [0.0, 86400]"),
        ({"LOG_LEVEL": "LOUD"}, "setting LOG_LEVEL='LOUD' is not a log level"),
        ({"LOG_ENCODING": "utf-9"}, "setting LOG_ENCODING='utf-9' is not an encoding"),
        ({"DOWNLOADER": "focused.Downloader"}, "setting DOWNLOADER='focused.Downloader' cannot"),
        ({"LOG_FORMATTER": "focused"}, "setting LOG_FORMATTER='focused' cannot be imported"),
        # Scrapy logged an error, exported nothing and the crawl exited 0.
        ({"FEEDS": '{"pages.nope": {}}'}, "the feed 'pages.nope' has format 'nope'; Scrapy"),
        ({"FEEDS": '{"pages.json": {"format": "js"}}'}, "the feed 'pages.json' has format 'js'"),
        ({"FEEDS": '{"pages.json": "json"}'}, "the feed 'pages.json' has options 'json'; give a"),
        (
            {"FEEDS": '{"s3://b/p.jsonl": {}}'},
            "the feed 's3://b/p.jsonl' needs boto3, which is not",
        ),
        ({"FEEDS": '{"http://h/p.jsonl": {}}'}, "the feed 'http://h/p.jsonl' names storage http:,"),
        ({"FEEDS": '{"p.jsonl": {"batch_item_count": 5}}'}, "the feed 'p.jsonl' is cut every 5"),
        (
            {"FEEDS": '{"p.jsonl": {"postprocessing": ["no.such.Plugin"]}}'},
            "the feed 'p.jsonl': postprocessing plugin 'no.such.Plugin' cannot be imported",
        ),
        (
            {"FEEDS": '{"p.jsonl": {"item_filter": "no.such.Filter"}}'},
            "the feed 'p.jsonl': item_filter 'no.such.Filter' cannot be imported",
        ),
        # A traceback for each page it could not write (every page: rot13, an unknown name),
        # left out of the feed, and the crawl exited 0.
        (
            {"FEEDS": '{"p.jsonl": {}}', "FEED_EXPORT_ENCODING": "latin-1"},
            "the feed 'p.jsonl' has encoding 'latin-1' (FEED_EXPORT_ENCODING or its encoding),"
            " which cannot write every character a page may hold",
        ),
        (
            {"FEEDS": '{"p.csv": {"encoding": "rot13"}}'},
            "the feed 'p.csv' has encoding 'rot13' (FEED_EXPORT_ENCODING or its encoding), which"
            " is no text encoding: give utf-8",
        ),
        ({"FEEDS": '{"p.xml": {}}', "FEED_EXPORT_ENCODING": ""}, "the feed 'p.xml' has encoding"),
        # Each made a folder (or file) named " " in the working directory, and wrote there.
        ({"JOBDIR": " "}, "setting JOBDIR needs a path, not ' '"),
        ({"WARC_DIR": "\t"}, "setting WARC_DIR needs a path, not '\\t'"),
        ({"LOG_FILE": "  "}, "setting LOG_FILE needs a path, not '  '"),
        ({"ENCODER_STORE_DIR": " "}, "setting ENCODER_STORE_DIR needs a path, not ' '"),
        # Quoted, or given to Scrapyd: the crawl wrote into a folder "~" in the working directory.
        ({"FOCUSED_DB": "~/pages.sqlite3"}, "setting FOCUSED_DB='~/pages.sqlite3' starts with a ~"),
        ({"JOBDIR": "~/jobs/birds"}, "setting JOBDIR='~/jobs/birds' starts with a ~ that no shell"),
        # Bytes that are not UTF-8 (or a JSON escape of a lone surrogate): a traceback a request.
        ({"USER_AGENT": "bot\udcff"}, "setting USER_AGENT is not UTF-8 text"),
        ({"DEFAULT_REQUEST_HEADERS": '{"X-A": "\\udcff"}'}, "setting DEFAULT_REQUEST_HEADERS is"),
        # Every request failed, with a traceback each.
        (
            {"DEFAULT_REQUEST_HEADERS": '{"X A": "v"}'},
            "setting DEFAULT_REQUEST_HEADERS: 'X A': 'v' is no",
        ),
        (
            {"DEFAULT_REQUEST_HEADERS": '{"X-A": "v\\r\\nX-B: w"}'},
            "setting DEFAULT_REQUEST_HEADERS: 'X-A'",
        ),
        # scrapy-playwright's: a traceback for each once the crawl renders.
        ({"PLAYWRIGHT_MAX_CONTEXTS": "-1"}, "setting PLAYWRIGHT_MAX_CONTEXTS=-1 is outside"),
        ({"PLAYWRIGHT_MAX_CONTEXTS": "two"}, "setting PLAYWRIGHT_MAX_CONTEXTS='two' is not an"),
        ({"PLAYWRIGHT_BROWSER_TYPE": "firefox"}, "setting PLAYWRIGHT_BROWSER_TYPE='firefox':"),
        # Read as its download handler loads: a traceback, and the crawl fetched nothing.
        ({"PLAYWRIGHT_DOWNLOAD_TIMEOUT": "1s"}, "setting PLAYWRIGHT_DOWNLOAD_TIMEOUT='1s' is not"),
        ({"PLAYWRIGHT_RESTART_DISCONNECTED_BROWSER": "maybe"}, "setting PLAYWRIGHT_RESTART_DIS"),
        ({"PLAYWRIGHT_CONTEXTS": "default"}, "setting PLAYWRIGHT_CONTEXTS='default' is no JSON"),
        ({"PLAYWRIGHT_CDP_KWARGS": "[1]"}, "setting PLAYWRIGHT_CDP_KWARGS='[1]' is no JSON object"),
        ({"PLAYWRIGHT_CONTEXTS": '{"default": 5}'}, "setting PLAYWRIGHT_CONTEXTS: 'default' has 5"),
        ({"PLAYWRIGHT_PROCESS_REQUEST_HEADERS": "no.f"}, "setting PLAYWRIGHT_PROCESS_REQUEST_HE"),
        ({"PLAYWRIGHT_BROWSER_PROVIDER": "no.P"}, "setting PLAYWRIGHT_BROWSER_PROVIDER='no.P' can"),
        # A remote browser: the check launched the local one, and a remote that did not answer
        # showed only as "No seed could be fetched".
        (
            {"PLAYWRIGHT_CDP_URL": "ws://127.0.0.1:1"},
            "setting PLAYWRIGHT_CDP_URL: a remote browser is not supported; the crawl renders in",
        ),
        ({"PLAYWRIGHT_CONNECT_URL": "ws://127.0.0.1:1"}, "setting PLAYWRIGHT_CONNECT_URL: a remo"),
        # A persistent context launched without the crawl's Chromium: a traceback, and the
        # crawl went on in a fresh context.
        (
            {"PLAYWRIGHT_CONTEXTS": '{"default": {"user_data_dir": "profile"}}'},
            "setting PLAYWRIGHT_CONTEXTS: 'default' has a user_data_dir; a persistent context",
        ),
        # Node took a longer timeout as 1 ms: every page failed.
        (
            {"PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": "1e30"},
            "setting PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT=1e30 is outside [1.0, 2147483647]",
        ),
        # Given empty, each was a traceback once read (STORE_MIN_RELEVANCE's none means off).
        ({"RELEVANCE_MAX_DOCS": ""}, "setting RELEVANCE_MAX_DOCS='' is not an integer"),
        ({"LINK_CONTEXT_CHARS": ""}, "setting LINK_CONTEXT_CHARS='' is not an integer"),
        ({"RETRY_TIMES": ""}, "setting RETRY_TIMES='' is not an integer"),
        # Past 64 bits: an OverflowError as the crawl opened (a deque's length).
        ({"DRIFT_WINDOW": "1" + "0" * 30}, "setting DRIFT_WINDOW=1000000000000000000000000000000"),
        ({"RELEVANCE_MAX_DOCS": "1" + "0" * 30}, "setting RELEVANCE_MAX_DOCS=100000000000000000"),
        # Scrapy made a million tasks for each page's outputs: about a minute a page.
        ({"CONCURRENT_ITEMS": "1000000"}, "setting CONCURRENT_ITEMS=1000000 is outside [1, 10000]"),
        # No thread resolved a host name: every request timed out, and "No seed could be fetched".
        ({"REACTOR_THREADPOOL_MAXSIZE": "0"}, "setting REACTOR_THREADPOOL_MAXSIZE=0 is outside"),
        # Scrapy's without a default: a traceback as the crawl opened, or a crawl that never
        # sent a request and never ended.
        ({"CONCURRENT_REQUESTS_PER_IP": "x"}, "setting CONCURRENT_REQUESTS_PER_IP='x' is not an"),
        ({"CONCURRENT_REQUESTS_PER_IP": "-1"}, "setting CONCURRENT_REQUESTS_PER_IP=-1 is outside"),
        # Twisted's LoopingCall refused it: a traceback, and no memory limit.
        (
            {"MEMUSAGE_CHECK_INTERVAL_SECONDS": "0"},
            "setting MEMUSAGE_CHECK_INTERVAL_SECONDS=0 is outside [1.0, inf]",
        ),
        # Read with int() as the crawl opened (a traceback), or compared with a status (never).
        ({"RETRY_HTTP_CODES": "500,5xx"}, "setting RETRY_HTTP_CODES: '5xx' is not a whole number"),
        ({"HTTPERROR_ALLOWED_CODES": "[404]"}, "setting HTTPERROR_ALLOWED_CODES: '[404]' is not"),
        # Classes Scrapy loads as the crawl opens: a traceback.
        (
            {"ITEM_PIPELINES": '{"pipelines.storage.StoragePipeline": 800, "pipelines.no.P": 9}'},
            "setting ITEM_PIPELINES: 'pipelines.no.P' cannot be imported: no module named",
        ),
        (
            {"EXTENSIONS": '{"focused.extensions.ProgressLog": "last"}'},
            "setting EXTENSIONS: 'focused.extensions.ProgressLog' has order 'last'; give a number",
        ),
        ({"DOWNLOAD_HANDLERS": '{"http": "handlers.Nope"}'}, "setting DOWNLOAD_HANDLERS: 'handl"),
        ({"RETRY_EXCEPTIONS": "builtins.OSError,no.Error"}, "setting RETRY_EXCEPTIONS: 'no.Error'"),
        # Read as the host's slot is made: a traceback for each request, or none ever sent.
        ({"DOWNLOAD_SLOTS": '{"127.0.0.1": 2}'}, "setting DOWNLOAD_SLOTS: '127.0.0.1' has 2; give"),
        (
            {"DOWNLOAD_SLOTS": '{"127.0.0.1": {"concurrency": 0}}'},
            "setting DOWNLOAD_SLOTS: '127.0.0.1' has concurrency=0; give an integer, at least 1",
        ),
        (
            {"DOWNLOAD_SLOTS": '{"127.0.0.1": {"delay": "1"}}'},
            "setting DOWNLOAD_SLOTS: '127.0.0.1' has delay='1'; give a number, at least 0",
        ),
        # Kept in the crawl record (focused.fetchsettings): MongoDB's integers are 64 bits, and
        # the crawl failed as it started there, with tracebacks, where SQLite's went on.
        (
            {"DOWNLOAD_SLOTS": '{"127.0.0.1": {"concurrency": 99999999999999999999}}'},
            "setting DOWNLOAD_SLOTS: '127.0.0.1' has concurrency=99999999999999999999 is too"
            " large: at most 9223372036854775807",
        ),
        (
            {"HTTPERROR_ALLOWED_CODES": "404,99999999999999999999"},
            "setting HTTPERROR_ALLOWED_CODES: 99999999999999999999 is too large: at most",
        ),
        # Every log line failed to format (an error report each, exit 0), or logging did not start.
        ({"LOG_FORMAT": "%(nosuch)s"}, "setting LOG_FORMAT='%(nosuch)s' cannot format a log line"),
        ({"LOG_FORMAT": "{message}"}, "setting LOG_FORMAT='{message}' cannot format a log line"),
    ],
)
def test_scrapy_settings_given_as_text_are_checked(settings, message):
    with pytest.raises(ConfigError) as refused:
        check_settings(Settings(settings, priority="cmdline"))
    assert str(refused.value).startswith(message), refused.value


# Each feed URI below holds a password, or a query parameter that names a secret.
SECRET_FEEDS = [
    '{"ftp://alice:s3cret@h/p.jsonl": {"format": "js"}}',
    '{"ftp://alice:s3cret@h/p.jsonl": "jsonlines"}',
    '{"nosuch://alice:s3cret@h/p.jsonl": {}}',
    '{"ftp://alice:s3cret@h/p.jsonl": {"batch_item_count": 5}}',
    '{"ftp://alice:s3cret@h/p.jsonl": {"encoding": "rot13"}}',
    '{"ftp://alice:s3cret@h/p.jsonl": {"item_filter": "no.such.Filter"}}',
    '{"ftp://h/p.jsonl?token=s3cret": {"postprocessing": ["no.such.Plugin"], "format": "jl"}}',
    '{"ftp://h/p.jsonl?token=s3cret": {}}',  # its format taken from its end, the token too
    '{"s3://AKIA:s3cret@b/p.jsonl": {}}',  # boto3 is not installed
]


@pytest.mark.parametrize("feeds", SECRET_FEEDS)
def test_a_feed_refused_is_named_without_its_password(feeds):
    """A Scrapyd job's log, served over HTTP, showed the feed's password in the error line."""
    with pytest.raises(ConfigError) as refused:
        check_settings(Settings({"FEEDS": feeds}, priority="cmdline"))
    assert str(refused.value).startswith("the feed '"), refused.value
    assert "s3cret" not in str(refused.value)
    assert "***" in str(refused.value)


def test_a_feed_of_a_name_scrapy_cannot_fill_is_named_without_its_password():
    feeds = {"ftp://alice:s3cret@h/%(nosuch)s.jsonl": {}}
    with pytest.raises(ConfigError) as refused:
        check_feed_placeholders(Settings({"FEEDS": feeds}), spider)
    assert str(refused.value).startswith("the feed 'ftp://***@h/"), refused.value
    assert "s3cret" not in str(refused.value)


@pytest.mark.parametrize("encoding", ["utf-8", "UTF-16", "utf_32", "gb18030", None])
def test_a_feed_in_an_encoding_of_every_character_is_taken(encoding):
    check_settings(
        Settings({"FEEDS": '{"p.jsonl": {}}', "FEED_EXPORT_ENCODING": encoding}, priority="cmdline")
    )


def test_spider_modules_that_do_not_import_pass_when_scrapy_only_warns():
    """With SPIDER_LOADER_WARN_ONLY, Scrapy's spider loader warns of a module that does not
    import and the crawl goes on: it was refused. An empty name fails the loader all the same
    (a ValueError traceback)."""
    given = {"SPIDER_MODULES": "spiders,no.such", "SPIDER_LOADER_WARN_ONLY": "True"}
    check_settings(Settings(given, priority="cmdline"))
    with pytest.raises(ConfigError, match=r"SPIDER_MODULES: 'no\.such' cannot be imported"):
        check_settings(Settings({**given, "SPIDER_LOADER_WARN_ONLY": "False"}, priority="cmdline"))
    with pytest.raises(ConfigError, match="SPIDER_MODULES: '' cannot be imported"):
        check_settings(Settings({**given, "SPIDER_MODULES": "spiders,"}, priority="cmdline"))


def test_scrapy_settings_given_as_text_are_taken_as_scrapy_reads_them(tmp_path):
    """Every boolean and numeric default of Scrapy's, given back as text, passes
    (TELNETCONSOLE_ENABLED's is 1 and is read as a boolean; DOWNLOAD_DELAY's is 0 and is read
    as a float), as do a priority below 0, a fraction of a second, a log file to be made and
    what imports."""
    from scrapy.settings import default_settings

    given = {
        name: str(value)
        for name, value in vars(default_settings).items()
        if name.isupper() and isinstance(value, (bool, int, float))
    }
    given |= {
        "TELNETCONSOLE_ENABLED": "False",
        "DEPTH_PRIORITY": "-1",
        "DOWNLOAD_DELAY": "0.25",
        "CLOSESPIDER_TIMEOUT": "1.5",
        "LOG_LEVEL": "WARNING",
        "LOG_FILE": str(tmp_path / "crawl.log"),
        "REFERRER_POLICY": "same-origin",  # a policy's name, or a class to import
        "DUPEFILTER_CLASS": "focused.resume.FrontierDupeFilter",
        "FEEDS": json.dumps({str(tmp_path / "pages.jsonl"): {}, "stdout:": {"format": "csv"}}),
        "STORE_MIN_RELEVANCE": "",  # none: every page stored
        "RETRY_HTTP_CODES": "500, 503",
        "ITEM_PIPELINES": '{"pipelines.storage.StoragePipeline": 800.5, "a.B": null}',
        "DOWNLOAD_HANDLERS": '{"ftp": null}',
        "DOWNLOAD_SLOTS": '{"127.0.0.1": {"concurrency": 2, "delay": 0, "jitter": 0.5}}',
        "LOG_FORMAT": "%(levelname)s %(name)s: %(message)s",
    }
    check_settings(Settings(given, priority="cmdline"))


@pytest.mark.parametrize(
    "settings",
    [
        {"DOWNLOAD_DELAY": "60000", "RANDOMIZE_DOWNLOAD_DELAY": "False"},
        {"DOWNLOAD_SLOTS": '{"h": {"delay": 60000, "randomize_delay": false}}'},
    ],
)
@pytest.mark.filterwarnings("ignore::scrapy.exceptions.ScrapyDeprecationWarning")
def test_a_delay_without_jitter_is_not_refused_for_one(settings):
    """A delay of Scrapy's deprecated RANDOMIZE_DOWNLOAD_DELAY=False (or a slot's
    "randomize_delay": false) is drawn without jitter, as Scrapy's downloader reads it: taken
    for DOWNLOAD_DELAY_JITTER's 0.5, any over 16 hours was refused as over a day."""
    check_settings(Settings(settings, priority="cmdline"))


def test_a_feed_uri_params_function_that_does_not_import_gives_one_line(tmp_path):
    # Imported as the feed opened: a traceback, the feed not written, and exit 0.
    feed = tmp_path / "pages.json"
    result = run(
        GOOD, {"FEEDS": json.dumps({str(feed): {"format": "json"}}), "FEED_URI_PARAMS": "no.such"}
    )
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr
        == "error: setting FEED_URI_PARAMS='no.such' cannot be imported: no module named 'no'\n"
    )
    assert not feed.exists()


def test_a_log_file_that_cannot_be_written_gives_one_line(tmp_path):
    """Scrapy opens LOG_FILE as it sets up logging: a folder there was a traceback and no log."""
    result = run(GOOD, {"LOG_FILE": tmp_path})
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"error: cannot write LOG_FILE '{tmp_path}': it is a folder\n"


HUGE = "x" * 100_000


@pytest.mark.parametrize(
    ("arguments", "settings", "message"),
    [
        ({"strategy": HUGE}, {}, "error: unknown strategy 'xxx"),
        ({"allowed_domains": HUGE}, {}, "error: seed 'http://127.0.0.1:9/wiki/Bird' is outside"),
        ({}, {"CLOSESPIDER_TIMEOUT": HUGE}, "error: setting CLOSESPIDER_TIMEOUT='xxx"),
        ({}, {"MONGO_URI": f"mongodb://{HUGE}"}, "error: MongoDB store at mongodb://xxx"),
    ],
)
def test_a_huge_bad_argument_is_quoted_in_a_short_line(tmp_path, arguments, settings, message):
    """A 100 kB argument was echoed whole in its error line."""
    result = run({**GOOD, **arguments}, {"FOCUSED_DB": tmp_path / "pages.sqlite3", **settings})
    assert result.returncode == 2, result.stderr[:3000]
    assert result.stderr.startswith(message), result.stderr[:3000]
    assert result.stderr.count("\n") == 1 and len(result.stderr) < 600, result.stderr[:3000]
    assert re.search(r"\.\.\. \(1000\d\d characters\)", result.stderr), result.stderr


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("x" * 199, repr("x" * 199)),  # was cut, and counted as 202 characters with its quotes
        ("x" * 200, repr("x" * 200)),
        ("x" * 201, f"{'x' * 200!r}... (201 characters)"),
        ("\n" * 300, f"{chr(10) * 200!r}... (300 characters)"),  # counted before escaping
        (7, "7"),
    ],
)
def test_an_error_line_shows_a_value_by_its_own_characters(value, shown):
    assert quoted(value) == shown


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("FOCUSED_DB", "SQLite store at "),
        ("JOBDIR", "focused.json cannot be read (File name too long)"),
        ("LOG_FILE", "cannot write LOG_FILE"),
        ("FOCUSED_UNSTORED_DIR", "cannot write FOCUSED_UNSTORED_DIR"),
    ],
)
def test_a_file_name_too_long_for_the_file_system_gives_one_line(tmp_path, setting, message):
    """A name over 255 bytes: Path.exists() raises, and it was a traceback."""
    settings = {"FOCUSED_DB": tmp_path / "pages.sqlite3", setting: tmp_path / ("x" * 300)}
    result = run(GOOD, settings)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr[-3000:]
    assert "File name too long" in result.stderr


def test_bad_input_is_also_the_log_file_s_one_line(tmp_path):
    # A Scrapyd job runs with -s LOG_FILE=logs/PROJECT/SPIDER/JOB.log and keeps its stderr only
    # in the daemon's own log: the job's log, the one a user is told to read, must say why.
    log_file = tmp_path / "job.log"
    result = run({**GOOD, "strategy": "nosuch"}, {"LOG_FILE": log_file})
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: unknown strategy 'nosuch'")
    assert log_file.read_text() == result.stderr


@pytest.mark.parametrize("setting", ["JOBDIR", "LOG_FILE", "WARC_DIR"])
def test_a_path_of_blanks_makes_nothing_in_the_working_directory(tmp_path, setting):
    # A shell variable that expanded to a space: the crawl ran, in a folder (or with a log
    # file) named " ", and the error line of bad input went into a file " " too.
    work = tmp_path / "work"
    work.mkdir()
    settings = {setting: " ", "FOCUSED_DB": tmp_path / "db.sqlite3"}
    result = subprocess.run(
        scrapy_command(*crawl_args(GOOD, settings)),
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        env={**crawl_env(), "SCRAPY_SETTINGS_MODULE": "focused.settings"},
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"error: setting {setting} needs a path, not ' '\n"
    assert not list(work.iterdir())


@pytest.mark.parametrize(
    ("db", "message"),
    [
        # The crawl ran, and its pages were gone as it ended.
        (":memory:", "setting FOCUSED_DB needs a file, not ':memory:', SQLite's database in"),
        # SQLite's own URI, or a URL as SQLAlchemy writes one: the store went into folders
        # sqlite:/... made in the working directory.
        ("file:pages.sqlite3", "setting FOCUSED_DB needs the path of a file, not a URI: 'file:"),
        (
            "sqlite:///pages.sqlite3",
            "needs the path of a file, not a URI: 'sqlite:///pages.sqlite3'",
        ),
    ],
)
def test_a_store_named_as_sqlite_names_no_file_is_refused(tmp_path, monkeypatch, db, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreSettingError) as refused:
        open_store({"FOCUSED_DB": db})
    assert message in str(refused.value)
    assert not list(tmp_path.iterdir())


def test_bad_input_loses_nothing_already_crawled(tmp_path, site):
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    first = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 5}, crawl_id="kept")
    assert first.result.returncode == 0, first.result.stderr[-2000:]
    stored = len(first.pages())
    assert stored >= 5
    bad = run_crawl(tmp_path, {**arguments, "strategy": "nosuch"}, crawl_id="kept")
    assert bad.result.returncode == 2
    assert len(first.pages()) == stored
    assert first.crawl_record()["status"] == "finished"


def test_a_crawl_id_with_pages_stored_goes_on_only_from_its_jobdir(tmp_path, site):
    """A second run under the id of a crawl with pages stored began its fetch order and counts
    again over them: its report said 10 pages fetched and 30 stored, 2 relevant of 10."""
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    job = {"JOBDIR": tmp_path / "job", "CLOSESPIDER_PAGECOUNT": 10}
    first = run_crawl(tmp_path, arguments, job, crawl_id="again")
    assert first.result.returncode == 0, first.result.stderr[-2000:]
    stored = first.pages()
    refused = "has pages in the store already: a crawl goes on only from its JOBDIR"
    for settings in ({"CLOSESPIDER_PAGECOUNT": 30}, {**job, "JOBDIR": tmp_path / "other"}):
        again = run_crawl(tmp_path, arguments, settings, crawl_id="again")
        assert again.result.returncode == 2, again.result.stderr[-2000:]
        assert again.result.stderr == (
            f"error: crawl again {refused} (or its shared frontier); give another crawl_id\n"
        )
    assert first.pages() == stored
    resumed = run_crawl(tmp_path, arguments, {**job, "CLOSESPIDER_PAGECOUNT": 20}, crawl_id="again")
    assert resumed.result.returncode == 0, resumed.result.stderr[-2000:]
    assert len(resumed.pages()) == 20
    # A crawl that stored no page (its seeds unreachable) may be run again under its id.
    unreachable = {**arguments, "seeds": f"http://127.0.0.1:{closed_port()}/"}
    assert run_crawl(tmp_path, unreachable, crawl_id="retried").result.returncode == 1
    retried = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 5}, crawl_id="retried")
    assert retried.result.returncode == 0, retried.result.stderr[-2000:]


def closed_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    ("bound", "other", "same"),
    [
        ("::1", "127.0.0.1", "[::1]"),
        ("127.0.0.1", "[::1]", "127.0.0.1"),
        pytest.param("::1", "localhost", "[::1]", marks=LOCALHOST_IPV4_ALONE),
        # A bind address by its name, which has no IPv6 address: "Couldn't bind: -2: Name or
        # service not known.", after a traceback.
        pytest.param("localhost", "[::1]", "127.0.0.1", marks=LOCALHOST_IPV4_ALONE),
    ],
)
def test_a_seed_of_the_bind_address_other_family_says_why_it_failed(tmp_path, bound, other, same):
    """A seed the bind address cannot reach, its address of the other family, beside one it
    can (the start refuses only seeds all of the other family): Scrapy said only Python's or
    Twisted's words ("AF_INET address must be a pair (host, port)", "Couldn't bind: -9: Address
    family for hostname not supported."), the first after a traceback at its robots.txt."""
    port = closed_port()
    unreachable = f"http://{other}:{port}/wiki/Albatross"
    seeds = f"{unreachable},http://{same}:{port}/wiki/Albatross"  # a seed of its family: taken
    crawl = run_crawl(
        tmp_path, {"query": "birds", "seeds": seeds}, {"DOWNLOAD_BIND_ADDRESS": bound}
    )
    log = crawl.result.stderr
    assert crawl.result.returncode == 1, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    [error] = [line for line in log.splitlines() if "No seed could be fetched" in line]
    assert (
        f"{unreachable} (DOWNLOAD_BIND_ADDRESS is of another address family than the host's"
        " address (IPv4, IPv6): no connection from it reaches the host)"
    ) in error


def bind_check(bound: str, seeds: tuple[str, ...]) -> ConfigError | None:
    """What the settings' check says of these seeds from this bind address."""
    try:
        check_settings(Settings({"DOWNLOAD_BIND_ADDRESS": bound}, priority="cmdline"), seeds=seeds)
    except ConfigError as error:
        return error
    return None


@LOCALHOST_IPV4_ALONE
def test_a_seed_name_looked_up_slowly_holds_the_start_for_a_bounded_time(monkeypatch):
    """A resolver that does not answer (here, for one name) holds the start ``LOOKUP_S`` at
    most, and the seeds are let be: the name may be of the bind address's family."""
    answer = threading.Event()
    resolve = socket.getaddrinfo

    def slow(host: str, *args, **kwargs):
        if host == "slow.test":
            answer.wait(30)
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    monkeypatch.setattr("focused.settingchecks.LOOKUP_S", 0.5)
    begun = time.monotonic()
    try:
        assert bind_check("::1", ("http://localhost:9/", "http://slow.test/")) is None
        assert time.monotonic() - begun < 10  # LOOKUP_S 0.5 against 30: room for a busy machine
    finally:
        answer.set()
    # The same seeds all answered: refused, as no seed can be reached.
    error = bind_check("::1", ("http://localhost:9/",))
    assert error is not None and "every seed an IPv4 one (http://localhost:9/ at 127.0.0.1)" in (
        str(error)
    )


def test_a_seed_name_that_does_not_resolve_is_let_be():
    """Its DNS error says why it failed; the bind address's family is no reason."""
    assert bind_check("::1", ("http://localhost:9/", "http://no-such-host.invalid/")) is None


@LOCALHOST_IPV4_ALONE
def test_seed_names_past_those_looked_up_are_let_be(monkeypatch):
    """A crawl of many seed names starts without their lookups (each that fails says why)."""
    looked_up: list[str] = []
    resolve = socket.getaddrinfo

    def counted(host: str, *args, **kwargs):
        looked_up.append(host)
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", counted)
    monkeypatch.setattr("focused.settingchecks.SEED_NAMES_LOOKED_UP", 0)
    assert bind_check("::1", ("http://localhost:9/",)) is None
    assert looked_up == []
    monkeypatch.setattr("focused.settingchecks.SEED_NAMES_LOOKED_UP", 1)
    assert bind_check("::1", ("http://localhost:9/",)) is not None
    assert looked_up == ["localhost"]


def test_seeds_fetched_through_a_proxy_are_let_be(monkeypatch):
    """Through a proxy (Scrapy's HttpProxyMiddleware, from http_proxy in the environment), each
    connection is to the proxy, from the bind address: the seeds' family is no reason to refuse
    the crawl, which fetched them all. One the proxy is not for (no_proxy) is taken as it is."""
    for name in ("no_proxy", "NO_PROXY", "https_proxy", "HTTPS_PROXY", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:3128")
    assert bind_check("127.0.0.1", ("http://[::1]:9/",)) is None
    assert bind_check("127.0.0.1", ("https://[::1]:9/",)) is not None
    monkeypatch.setenv("no_proxy", "::1")
    assert bind_check("127.0.0.1", ("http://[::1]:9/",)) is not None


def resolver_with(monkeypatch, name: str, address: str) -> threading.Event:
    """The machine's resolver, and ``name`` at ``address`` alone (an IPv6 address: a name of no
    IPv4 one, as an interface's of IPv6 alone); ``slow.test`` answers once the event returned is
    set."""
    resolve = socket.getaddrinfo
    answer = threading.Event()

    def resolver(host, port, *args, **kwargs):
        if host == name:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            sockaddr = (address, port or 0, 0, 0) if ":" in address else (address, port or 0)
            return [(family, socket.SOCK_STREAM, 6, "", sockaddr)]
        if host == "slow.test":
            answer.wait(30)
        return resolve(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    monkeypatch.setattr("focused.settingchecks.LOOKUP_S", 0.5)
    return answer


def test_a_bind_address_by_a_name_of_ipv6_alone_is_taken(monkeypatch):
    """Each connection's socket, of the host's family, binds the name to its address of that
    family: one of IPv6 addresses alone binds for IPv6 hosts. The start bound it as IPv4 alone,
    and refused it ('cannot be bound here: Name or service not known'); so the seeds' check of
    its family never saw it."""
    resolver_with(monkeypatch, "v6.test", "::1")
    check_settings(Settings({"DOWNLOAD_BIND_ADDRESS": "v6.test"}, priority="cmdline"))
    error = bind_check("v6.test", ("http://127.0.0.1:9/",))
    assert error is not None and str(error).startswith(
        "setting DOWNLOAD_BIND_ADDRESS='v6.test' is an IPv6 address (::1), and every seed an"
        " IPv4 one (http://127.0.0.1:9/)"
    )
    assert bind_check("v6.test", ("http://[::1]:9/",)) is None
    # Its address, as the name's own, is bound: one this machine has not is refused.
    resolver_with(monkeypatch, "v4.test", "192.0.2.1")
    with pytest.raises(ConfigError, match=r"'v4\.test' cannot be bound here: Cannot assign"):
        check_settings(Settings({"DOWNLOAD_BIND_ADDRESS": "v4.test"}, priority="cmdline"))


def test_a_bind_address_by_a_name_looked_up_slowly_holds_the_start_for_a_bounded_time(
    monkeypatch,
):
    """As the seeds' names, LOOKUP_S at most: its bind at the start looked it up for as long as
    the resolver took."""
    answer = resolver_with(monkeypatch, "v6.test", "::1")
    begun = time.monotonic()
    try:
        check_settings(Settings({"DOWNLOAD_BIND_ADDRESS": "slow.test"}, priority="cmdline"))
        assert time.monotonic() - begun < 10  # LOOKUP_S 0.5 against 30: room for a busy machine
    finally:
        answer.set()


def test_a_bind_address_by_a_name_is_looked_up_once_as_a_crawl_starts(monkeypatch):
    """Its bind and its family against the seeds' each looked it up, each waiting up to
    LOOKUP_S: a slow resolver held the start for twice the bound. One lookup serves both, and
    the seeds' names wait what is left of LOOKUP_S. The resolver here is a fake one, on a fake
    clock: each answer takes half of LOOKUP_S, and slow.test's never comes."""
    known = {"v4.test": {4: "127.0.0.1"}, "v6.test": {6: "::1"}}
    clock = 0.0
    asked: list[str] = []

    def looked_up(names, deadline):
        nonlocal clock
        names = list(names)
        asked.extend(names)  # each is asked at once, in a thread of its own
        answers = []
        for name in names:
            if name not in known or clock + LOOKUP_S / 2 > deadline:
                clock = max(clock, deadline)
                break
            clock += LOOKUP_S / 2
            answers.append((name, known[name]))
        return iter(answers)

    monkeypatch.setattr("focused.settingchecks._looked_up", looked_up)
    monkeypatch.setattr("focused.settingchecks.time", SimpleNamespace(monotonic=lambda: clock))
    settings = Settings({"DOWNLOAD_BIND_ADDRESS": "v4.test"}, priority="cmdline")
    parse_arguments({**GOOD, "seeds": "http://slow.test/"}, settings)
    assert asked == ["v4.test", "slow.test"]
    assert clock == LOOKUP_S
    # Seeds all of the other family are refused, from the one answer.
    clock, asked[:] = 0.0, []
    with pytest.raises(ConfigError, match=r"IPv4 address \(127\.0\.0\.1\), and every seed an IPv6"):
        parse_arguments({**GOOD, "seeds": "http://v6.test/"}, settings)
    assert asked == ["v4.test", "v6.test"]


def test_a_crawl_that_can_fetch_no_seed_says_so_in_one_line_and_exits_1(tmp_path, site):
    refused = f"http://127.0.0.1:{closed_port()}/wiki/Albatross"
    missing = f"{site.url}/wiki/No_such_article"
    crawl = run_crawl(tmp_path, {"query": "birds", "seeds": f"{refused},{missing}"})
    log = crawl.result.stderr
    assert crawl.result.returncode == 1, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    errors = [line for line in log.splitlines() if "No seed could be fetched" in line]
    assert len(errors) == 1, log[-3000:]
    # Its robots.txt could not be fetched, so the seed is refused (RFC 9309), saying why.
    assert (
        f"{refused} (Forbidden by robots.txt, which could not be fetched: Connection was "
        in (errors[0])
    )
    assert f"{missing} (http_404)" in errors[0]
    assert crawl.pages() == []
    # Closed with that reason, said before Scrapy's last lines, not as "finished" before it.
    assert "Spider closed (seeds_unreachable)" in log, log[-3000:]
    assert log.index(errors[0]) < log.index("Spider closed (seeds_unreachable)")
    assert "'finish_reason': 'seeds_unreachable'" in log and "(finished)" not in log
    # `scrapy crawls` must not list it as a crawl that finished with nothing to find.
    record = crawl.crawl_record()
    assert (record["status"], record["finish_reason"]) == ("interrupted", "seeds_unreachable")


def test_a_jobdir_in_use_by_another_crawl_is_refused_in_one_line(tmp_path, site):
    # Two crawls in one JOBDIR popped the same frontier: pages fetched twice, fetch orders
    # repeated, the budget passed (233 pages stored for 150). The other crawl here is this
    # process holding the lock as a crawl does (flock, gone with its process).
    jobdir = tmp_path / "job"
    jobdir.mkdir()
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    settings = {"JOBDIR": jobdir, "CLOSESPIDER_PAGECOUNT": 3}
    with open(jobdir / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        refused = run_crawl(tmp_path, arguments, settings)
    assert refused.result.returncode == 2, refused.result.stderr[-3000:]
    assert refused.result.stderr.strip() == (
        f"error: JOBDIR '{jobdir}' is in use by another crawl: let it end (Ctrl-C pauses it), or "
        "use another JOBDIR"
    )
    assert refused.pages() == []
    crawl = run_crawl(tmp_path, arguments, settings)  # the lock is free again
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert len(crawl.pages()) == 3


def test_a_crawl_id_running_in_another_process_is_refused_in_one_line(tmp_path, site):
    # Two Scrapyd jobs of one crawl id scheduled together both found no page stored under it
    # and both crawled: every page fetched twice, each overwriting the other's. The other crawl
    # here is this process holding the crawl's lock as a crawl does (lockf, gone with it).
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    settings = {"CLOSESPIDER_PAGECOUNT": 3}
    with open(tmp_path / "focused.sqlite3.lock", "w") as held:
        fcntl.lockf(held, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, crawl_lock_offset("twice"))
        refused = run_crawl(tmp_path, arguments, settings, crawl_id="twice")
        other = run_crawl(tmp_path, arguments, settings, crawl_id="other")  # its own byte
    assert refused.result.returncode == 2, refused.result.stderr[-3000:]
    assert refused.result.stderr == (
        "error: crawl twice is running in another process: let it end (Ctrl-C pauses it), or "
        "give another crawl_id\n"
    )
    assert refused.pages() == []
    assert other.result.returncode == 0, other.result.stderr[-3000:]
    crawl = run_crawl(tmp_path, arguments, settings, crawl_id="twice")  # the lock is free again
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert len(crawl.pages()) == 3


def test_a_crawl_id_running_with_pages_stored_is_refused_as_running(tmp_path, site):
    # The same command run again while the crawl runs (a Scrapyd job scheduled twice) was
    # told the crawl "has pages in the store already ... give another crawl_id", as for a
    # crawl long ended, once the first had stored a page; before that, that it was running.
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    settings = {"CLOSESPIDER_PAGECOUNT": 3}
    first = run_crawl(tmp_path, arguments, settings, crawl_id="twice")
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    with open(tmp_path / "focused.sqlite3.lock", "w") as held:
        fcntl.lockf(held, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, crawl_lock_offset("twice"))
        refused = run_crawl(tmp_path, arguments, settings, crawl_id="twice")
        in_jobdir = {**settings, "JOBDIR": tmp_path / "job"}
        jobdir = run_crawl(tmp_path, arguments, in_jobdir, crawl_id="twice")
    running = (
        "error: crawl twice is running in another process: let it end (Ctrl-C pauses it), or "
        "give another crawl_id\n"
    )
    for result in (refused, jobdir):
        assert result.result.returncode == 2, result.result.stderr[-3000:]
        assert result.result.stderr == running
    assert len(first.pages()) == 3
    # Once it has ended, its pages are what refuses the same command.
    ended = run_crawl(tmp_path, arguments, settings, crawl_id="twice")
    assert ended.result.returncode == 2, ended.result.stderr[-3000:]
    assert "has pages in the store already" in ended.result.stderr


def test_a_jobdir_crawl_resumed_while_it_runs_is_told_to_use_another_jobdir(tmp_path, site):
    """The same JOBDIR command run again while its crawl runs was told to "give another
    crawl_id", which a JOBDIR that holds the crawl refuses in turn ("JOBDIR holds crawl ...;
    resume it with -a crawl_id=..."): the crawl's lock, taken before the JOBDIR's, spoke for
    the JOBDIR's crawl as for a crawl started anew under its id. The other run here is this
    process holding both locks as a running crawl does."""
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    settings = {"CLOSESPIDER_PAGECOUNT": 3, "JOBDIR": tmp_path / "job"}
    first = run_crawl(tmp_path, arguments, settings, crawl_id="twice")
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    with (
        open(tmp_path / "focused.sqlite3.lock", "w") as crawl_lock,
        open(tmp_path / "job" / "lock", "w") as jobdir_lock,
    ):
        fcntl.lockf(crawl_lock, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, crawl_lock_offset("twice"))
        fcntl.flock(jobdir_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        resumed = {**settings, "CLOSESPIDER_PAGECOUNT": 6}
        refused = run_crawl(tmp_path, arguments, resumed, crawl_id="twice")
        # What the line says to do: another JOBDIR, a crawl of its own.
        elsewhere = {**settings, "JOBDIR": tmp_path / "job2"}
        other = run_crawl(tmp_path, arguments, elsewhere, crawl_id="other")
    assert refused.result.returncode == 2, refused.result.stderr[-3000:]
    assert refused.result.stderr == (
        "error: crawl twice is running in another process: let it end (Ctrl-C pauses it), or "
        "use another JOBDIR\n"
    )
    assert len(first.pages()) == 3
    assert other.result.returncode == 0, other.result.stderr[-3000:]


def test_a_jobdir_of_scrapyd_s_own_says_it_cannot_be_resumed(tmp_path, site):
    # Scrapyd's jobs_dir puts JOBS_DIR/PROJECT/topical/JOBID in place of the JOBDIR given to
    # schedule.json: the job scheduled again got a new one and crawled anew, saying nothing,
    # or was refused as "a crawl goes on only from its JOBDIR", the very one it was given.
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    jobs = tmp_path / "jobs" / "focused" / "topical"
    note = (
        "JOBDIR '{}' is Scrapyd's, one per job (jobs_dir in scrapyd.conf, which replaces a "
        "JOBDIR given with -d setting=): a job scheduled again gets another, so it cannot "
        "resume this one; to pause and resume a crawl, leave jobs_dir unset"
    )
    first = run_crawl(
        tmp_path,
        {**arguments, "_job": "first"},
        {"JOBDIR": jobs / "first", "CLOSESPIDER_PAGECOUNT": 3},
        crawl_id="birds",
    )
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    warned = [line for line in first.result.stderr.splitlines() if "WARNING" in line]
    assert warned[0].endswith(note.format(jobs / "first")), warned
    again = run_crawl(
        tmp_path,
        {**arguments, "_job": "again"},
        {"JOBDIR": jobs / "again", "CLOSESPIDER_PAGECOUNT": 6},
        crawl_id="birds",
    )
    assert again.result.returncode == 2, again.result.stderr[-3000:]
    assert again.result.stderr == (
        "error: crawl birds has pages in the store already: a crawl goes on only from its "
        "JOBDIR (or its shared frontier); give another crawl_id "
        f"({note.format(jobs / 'again')})\n"
    )
    # A JOBDIR of one's own, in a folder named like the job, is not Scrapyd's.
    own = run_crawl(
        tmp_path,
        {**arguments, "_job": "first"},
        {"JOBDIR": tmp_path / "first", "CLOSESPIDER_PAGECOUNT": 3},
        crawl_id="own",
    )
    assert own.result.returncode == 0, own.result.stderr[-3000:]
    assert "Scrapyd's" not in own.result.stderr


def test_seeds_lost_without_an_error_of_scrapy_s_are_named_with_why(tmp_path):
    # Each of these ended a crawl as "finished" with nothing stored and exit 0 (a seed that is no
    # page, a redirect dropped before it is sent), or named it with an empty reason.
    page = html("Birds", "<p>birds feathers nesting</p>")
    replies = {
        "/plain": Reply(body="birds", content_type="text/plain"),
        "/self": Reply(status=302, headers={"Location": "/self"}),
        "/away": Reply(status=301, headers={"Location": "http://127.0.0.2:9/elsewhere"}),
        "/streamed": Reply(body=page + "<p>birds</p>" * 100_000, length=None),
        "/cut": Reply(body=page, length=len(page) + 100),
    }
    with Site(lambda method, path: replies.get(path, Reply(status=404))) as site:
        seeds = ",".join(f"{site.url}{path}" for path in replies)
        crawl = run_crawl(
            tmp_path,
            {"query": "birds", "seeds": seeds, "allowed_domains": "127.0.0.1"},
            {"DOWNLOAD_MAXSIZE": 1_000_000, "RETRY_TIMES": 0},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 1, log[-3000:]
    (line,) = [line for line in log.splitlines() if "No seed could be fetched" in line]
    assert f"{site.url}/plain (not an HTML page)" in line
    assert f"{site.url}/self (redirected to {site.url}/self, a URL already requested" in line
    assert f"{site.url}/away (redirected to http://127.0.0.2:9/elsewhere, outside allowed" in line
    assert f"{site.url}/streamed (the response grew past DOWNLOAD_MAXSIZE as it arrived)" in line
    assert f"{site.url}/cut (the response ended before the length it announced" in line
    assert "'focused/skipped/too_large': 1" in log and "Traceback" not in log
    # Scrapy's own error line for it ended with nothing after the colon.
    assert f"Gave up retrying <GET {site.url}/cut> (failed 1 times): the response ended" in log
    record = crawl.crawl_record()
    assert (record["status"], record["finish_reason"]) == ("interrupted", "seeds_unreachable")


def test_a_crawl_goes_on_from_the_seeds_it_can_fetch(tmp_path, site):
    refused = f"http://127.0.0.1:{closed_port()}/wiki/Albatross"
    missing = f"{site.url}/wiki/No_such_article"
    seeds = f"{refused},{missing},{site.url}/wiki/Albatross"
    crawl = run_crawl(tmp_path, {"query": "birds", "seeds": seeds}, {"CLOSESPIDER_PAGECOUNT": 5})
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert len(crawl.pages()) >= 4  # the budget counts responses: the 404 is one
    assert "No seed could be fetched" not in log
    # The seeds that failed are named (they were only counted in a stat), in one warning line.
    (named,) = [line for line in log.splitlines() if "Seeds that could not be fetched" in line]
    assert "] WARNING: " in named
    assert f"{missing} (http_404)" in named and f"{refused} (" in named, named
    # The unreachable host's robots.txt: one warning line naming the host, no traceback.
    robots = [line for line in log.splitlines() if "robots.txt could not be fetched (" in line]
    assert len(robots) == 1 and "] WARNING: " in robots[0], log[-3000:]
    assert robots[0].split("] WARNING: ")[1].startswith(f"{urlsplit(refused).netloc}: ")
    assert "robotstxt] ERROR" not in log and "Traceback" not in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]


def test_seeds_fetched_but_not_stored_are_no_seeds_that_could_not_be_fetched(tmp_path):
    """The crawl took no item stored for no seed fetched: one seed refused and the other's page
    below STORE_MIN_RELEVANCE ended in 'No seed could be fetched', exit status 1."""
    refused = f"http://127.0.0.1:{closed_port()}/birds"
    page = html("Cars", "<p>Cars need engines and fuel.</p>")  # no link: the crawl finishes
    with Site(lambda method, path: Reply(body=page)) as site:
        seeds = f"{refused},{site.url}/cars"
        settings = {"STORE_MIN_RELEVANCE": 0.99}
        crawl = run_crawl(tmp_path, {"query": "birds", "seeds": seeds}, settings)
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert "Spider closed (finished)" in log, log[-3000:]
    assert crawl.pages() == [] and "'focused/not_stored': 1" in log, log[-3000:]
    assert "No seed could be fetched" not in log
    (named,) = [line for line in log.splitlines() if "Seeds that could not be fetched" in line]
    assert f"{refused} (" in named and "/cars" not in named, named


def test_a_seed_redirected_to_a_page_linked_before_is_no_seed_that_could_not_be_fetched(tmp_path):
    """Seed /old redirects to /home, which the other seed's page linked to first: the redirect
    took the queued link's place, and /home was fetched and stored as the seed's page, level 0
    (requested_url /old). The crawl said all the same that /old could not be fetched, "a URL
    already requested (a redirect loop)": the scheduler turns the redirect away as a duplicate
    even as it takes its place."""
    pages = {
        "/first": html("Birds", '<p>birds feathers</p><a href="/home">birds home</a>'),
        "/home": html("Home", "<p>birds feathers nesting</p>"),
    }

    def reply(method: str, path: str) -> Reply:
        if path == "/old":
            return Reply(301, headers={"Location": "/home"})
        return Reply(body=pages[path]) if path in pages else Reply(404, "")

    with Site(reply) as site:
        seeds = f"{site.url}/first,{site.url}/old"
        arguments = {"strategy": "bfs", "query": "birds", "seeds": seeds}
        crawl = run_crawl(tmp_path, arguments, {"CONCURRENT_REQUESTS": 1})
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    stored = {page["url"]: page for page in crawl.pages()}
    home = stored[f"{site.url}/home"]
    assert (home["level"], home["parent_url"]) == (0, None)
    assert home["requested_url"] == f"{site.url}/old"
    assert "Seeds that could not be fetched" not in log, log[-3000:]


def redirect_to_a_host_no_one_can_reach(method: str, path: str) -> Reply:
    if path == "/robots.txt":
        return Reply(404, "")
    if path == "/moved":
        return Reply(301, headers={"Location": "http://*.example.org/birds"})
    if path == "/refresh":
        return Reply(200, html("t", "", '<meta http-equiv="refresh" content="0; url=http://a!b/">'))
    return Reply(
        200, html("Birds", '<p>birds nests</p><a href="/moved">m</a> <a href="/refresh">r</a>')
    )


def test_a_redirect_to_a_host_the_downloader_cannot_connect_to_is_one_line(tmp_path):
    """Seeds and links are checked for such a host, a redirect's target is not: its robots.txt
    failed with a traceback."""
    with Site(redirect_to_a_host_no_one_can_reach) as site:
        crawl = run_crawl(tmp_path, {"strategy": "bfs", "query": "birds", "seeds": site.url})
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    robots = [line for line in log.splitlines() if "robotstxt] ERROR" in line]
    hosts = sorted(line.rpartition("invalid hostname: ")[2] for line in robots)
    assert hosts == ["*.example.org", "a!b"], log[-3000:]
    assert [page["url"] for page in crawl.pages()] == [f"{site.url}/"]


def test_a_redirect_to_a_host_no_resolver_can_look_up_is_one_line(tmp_path):
    """A label empty or over 63 characters: the resolver's IDNA encoding failed with six
    tracebacks, and the request hung until DOWNLOAD_TIMEOUT."""
    long_label = "a" * 64

    def respond(method: str, path: str) -> Reply:
        if path == "/moved":
            return Reply(301, headers={"Location": "http://a..b.org/birds"})
        if path == "/refresh":
            refresh = f'<meta http-equiv="refresh" content="0; url=http://{long_label}.org/">'
            return Reply(200, html("t", "<p>birds</p>", refresh))
        return Reply(
            200, html("Birds", '<p>birds nests</p><a href="/moved">m</a> <a href="/refresh">r</a>')
        )

    with Site(respond) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": site.url},
            {"DOWNLOAD_TIMEOUT": 20},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert "Traceback" not in log and "CRITICAL" not in log, log[-3000:]
    assert "'focused/skipped/bad_redirect': 1," in log, log[-3000:]
    assert "'focused/skipped/bad_url': 1," in log, log[-3000:]  # the refresh
    # The page whose refresh leads nowhere is kept, as a browser shows it.
    stored = sorted(page["url"] for page in crawl.pages())
    assert stored == [f"{site.url}/", f"{site.url}/refresh"], log[-3000:]


def test_a_redirect_to_a_host_with_a_space_is_a_bad_redirect_said_in_one_line(tmp_path):
    """No request can be made of such a target, with either w3lib: 2.5 let it through and
    Twisted refused it ("Invalid URI") once its robots.txt had failed (an error line, a
    download_error); 2.6 refuses it as Scrapy reads the Location (a ValueError). It is a
    ``bad_redirect`` now, and a seed redirected there is named with the host in the seeds' line.
    A host whose escapes decode to a name (``loc%61lhost``) is the host a browser fetches."""

    def respond(method: str, path: str) -> Reply:
        targets = {
            "/moved": "http://exa mple.org/birds",
            "/escaped": "http://exa%20mple.org/birds",
            "/decoded": f"http://loc%61lhost:{site.server_address[1]}/found",
        }
        if path in targets:
            return Reply(302, headers={"Location": targets[path]})
        if path == "/found":
            return Reply(200, html("Found", "<p>birds nests found</p>"))
        links = '<a href="/escaped">e</a> <a href="/decoded">d</a>'
        return Reply(200, html("Birds", f"<p>birds nests</p>{links}"))

    with Site(respond) as site:
        seeds = f"{site.url}/,{site.url}/moved"
        crawl = run_crawl(tmp_path, {"strategy": "bfs", "query": "birds", "seeds": seeds})
        port = site.server_address[1]
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert "Traceback" not in log and "robotstxt] ERROR" not in log, log[-3000:]
    assert "'focused/skipped/bad_redirect': 2," in log, log[-3000:]
    [seeds_line] = [line for line in log.splitlines() if "Seeds that could not be fetched" in line]
    assert f"{site.url}/moved (302 to a URL no request can be made of: " in seeds_line
    assert "'exa mple.org'" in seeds_line, seeds_line
    stored = sorted(page["url"] for page in crawl.pages())
    assert stored == [f"{site.url}/", f"http://localhost:{port}/found"], log[-3000:]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        # It said "unable to open database file".
        ("FOCUSED_DB", "SQLite store at {unusable}: it is a folder, not a file"),
        ("JOBDIR", "is not a job directory"),  # a JOBDIR whose focused.json is not JSON
    ],
)
def test_a_store_or_jobdir_that_cannot_be_used_gives_one_line(tmp_path, setting, message):
    unusable = tmp_path / "unusable"
    unusable.mkdir()
    (unusable / "focused.json").write_text("{not json", encoding="utf-8")
    settings = {"FOCUSED_DB": tmp_path / "pages.sqlite3", setting: unusable}
    result = run(GOOD, settings)
    message = message.format(unusable=unusable)
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize("immutable", ["folder", "file"])
def test_a_store_on_read_only_media_gives_one_line(tmp_path, immutable):
    """A crawl into a store it cannot write: SQLite said "unable to open database file" for a
    read-only folder, and took a read-only file for reading without a word (the crawl then
    wrote into the -wal file until a checkpoint failed)."""
    db = tmp_path / "media" / "focused.sqlite3"
    filled_sqlite(db)
    what = f"its folder {db.parent}" if immutable == "folder" else "the file"
    with read_only(db.parent if immutable == "folder" else db):
        result = run(GOOD, {"FOCUSED_DB": db})
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr == f"error: SQLite store at {db} is read-only: {what} cannot be written\n"


def test_a_jobdir_that_is_a_file_gives_one_line(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine", encoding="utf-8")
    for jobdir in (a_file, a_file / "job"):
        result = run(GOOD, {"FOCUSED_DB": tmp_path / "pages.sqlite3", "JOBDIR": jobdir})
        assert result.returncode == 2, result.stderr[-3000:]
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: cannot use JOBDIR"), lines
    assert a_file.read_text(encoding="utf-8") == "mine"


def test_an_indented_comment_in_a_seeds_file_is_a_comment(tmp_path):
    seeds_file = tmp_path / "seeds.txt"
    seeds_file.write_text(
        "# birds\nhttp://127.0.0.1:9/wiki/Bird\n  # the sea birds, indented\n"
        "http://127.0.0.1:9/wiki/Gull\t# at the end of a line: the seed was kept with it\n",
        encoding="utf-8",
    )
    config = parse_arguments({"query": "birds", "seeds_file": str(seeds_file)})
    assert config.seeds == ("http://127.0.0.1:9/wiki/Bird", "http://127.0.0.1:9/wiki/Gull")


@pytest.mark.parametrize(
    ("crawl_id", "message"),
    [
        ("", "crawl_id is empty: give an id, or no crawl_id for a new one"),  # -a crawl_id=$UNSET
        (" ", "crawl_id is empty"),
        ("--json", "crawl_id='--json' may not start with '-': the commands would take it for"),
        ("a b", "crawl_id='a b' may use only letters, digits and . _ : -"),
        ("\u094d", "may use only letters"),  # a mark on no letter
        # Was "may use only letters, digits and . _ : -", which it did.
        ("b" * 101, f"crawl_id='{'b' * 101}' is longer than 100 characters"),
    ],
)
def test_a_crawl_id_that_no_command_could_name_is_refused(crawl_id, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_arguments({**GOOD, "crawl_id": crawl_id})


@pytest.mark.parametrize(
    "crawl_id", ["birds-2026.12:a_b", "鳥類", "пташки", "पक्षी", "পাখি", "นก", "b" * 100]
)
def test_a_crawl_id_in_any_letters_with_their_marks_is_taken(crawl_id):
    """Hindi, Bengali and Thai words have vowel signs and viramas, which are marks, not letters:
    such an id was refused as one of other characters than letters and digits."""
    assert parse_arguments({**GOOD, "crawl_id": crawl_id}).crawl_id == crawl_id


def test_a_seeds_or_topic_file_may_begin_with_a_byte_order_mark(tmp_path):
    """As Notepad saves UTF-8: its first seed was refused as no http(s) URL."""
    seeds_file, topic_file = tmp_path / "seeds.txt", tmp_path / "topic.txt"
    seeds_file.write_text("http://127.0.0.1:9/wiki/Bird\n", encoding="utf-8-sig")
    topic_file.write_text("sea birds", encoding="utf-8-sig")
    arguments = {"topic_file": str(topic_file), "seeds_file": str(seeds_file)}
    config = parse_arguments(arguments)
    assert (config.seeds, config.topic) == (("http://127.0.0.1:9/wiki/Bird",), "sea birds")
    assert (config.query, config.topic_file) == ("", str(topic_file))  # for the crawl record


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-a", "query"], "error: Invalid -a value, use -a NAME=VALUE"),
        (["-s", "CLOSESPIDER_PAGECOUNT"], "error: Invalid -s value, use -s NAME=VALUE"),
        (["-O", "pages.xyz"], "error: Unrecognized output format 'xyz'"),
        (["topical"], "error: give one spider"),
        (["--bogus"], "error: unknown option --bogus"),  # was: give one spider, not 2
        (["--logfile", ""], "error: --logfile needs a value, not ''"),  # was: logged to stderr
        (["-s"], "error: argument -s/--set: expected one argument (--help lists the options)"),
        (["-s", "=5"], "error: -s =... names no setting: give -s NAME=VALUE"),  # was a warning
        # A TypeError traceback from Scrapy's own -s handling.
        (["-s", "FEEDS=[1]"], "error: Invalid -s value: a setting that holds a dict takes a JSON"),
        # Was Scrapy's "use -s NAME=VALUE", which it was.
        (["-s", "FEEDS=notjson"], "error: Invalid -s value: a setting that holds a dict takes"),
        (["-s", "ITEM_PIPELINES=x"], "error: Invalid -s value: a setting that holds a dict takes"),
        # A RecursionError traceback as Scrapy read it; nested less, as it copied the settings.
        (["-s", "FEEDS=" + "[" * 5000], "error: setting FEEDS: JSON nested more than 100 levels"),
        (
            ["-s", 'DOWNLOAD_SLOTS={"h": {"x": ' + "[" * 900 + "]" * 900 + "}}"],
            "error: setting DOWNLOAD_SLOTS: JSON nested more than 100 levels deep",
        ),
        (["-s", "PLAYWRIGHT_CONTEXTS=" + "[" * 5000], "error: setting PLAYWRIGHT_CONTEXTS: JSON"),
    ],
)
def test_a_malformed_option_gives_one_line(extra, message):
    """Scrapy's usage errors printed its usage first (four lines); a second spider name came
    after logging had started."""
    result = run_scrapy([*crawl_args(GOOD, {}), *extra], timeout=60)
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), lines


def test_an_output_file_that_cannot_be_written_gives_one_line(tmp_path):
    """-O under a file: each page's export failed with a traceback, and the crawl exited 0."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine", encoding="utf-8")
    output = a_file / "pages.jsonl"
    result = run_scrapy(
        [*crawl_args(GOOD, {"FOCUSED_DB": tmp_path / "db"}), "-O", output], timeout=60
    )
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot write the feed"), lines
    assert a_file.read_text(encoding="utf-8") == "mine"


def run_writing(
    target: Path, option: str, tmp_path: Path
) -> tuple[subprocess.CompletedProcess, str]:
    """A crawl of GOOD with ``target`` as its -O file or its LOG_FILE, and what the error line
    calls it."""
    settings: dict[str, object] = {"FOCUSED_DB": tmp_path / "db"}
    extra = ("-O", target) if option == "-O" else ()
    if option == "LOG_FILE":
        settings["LOG_FILE"] = target
    result = run_scrapy([*crawl_args(GOOD, settings), *extra], timeout=60)
    return result, f"the feed '{target}'" if option == "-O" else f"LOG_FILE '{target}'"


@pytest.mark.parametrize("option", ["-O", "LOG_FILE"])
def test_a_file_in_a_folder_that_takes_no_new_file_gives_one_line(tmp_path, option):
    """/proc takes no new file, not even from root, whom its mode lets write there: -O failed
    at the first page (a traceback a page, exit 0), LOG_FILE with a traceback at the start."""
    result, what = run_writing(Path("/proc/focused-test.jsonl"), option, tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot write {what}: "), lines


@pytest.mark.parametrize("option", ["-O", "LOG_FILE"])
def test_an_existing_file_that_cannot_be_written_gives_one_line(tmp_path, option):
    """Its folder is writable, the file is not (another user's, read-only, immutable): -O
    failed with a traceback for each page and exited 0, LOG_FILE with a traceback and 1."""
    taken = tmp_path / "taken.jsonl"
    taken.write_text("mine", encoding="utf-8")
    with read_only(taken):
        result, what = run_writing(taken, option, tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr == f"error: cannot write {what}: the file cannot be written\n"
    assert taken.read_text(encoding="utf-8") == "mine"


def test_a_class_given_is_looked_for_without_running_its_module(tmp_path, monkeypatch):
    """Imported to be checked, a module that imports Twisted's reactor installed the default
    one before Scrapy could install the crawl's, and the crawl could not start."""
    module = tmp_path / "probe_module.py"
    module.write_text("open(__file__ + '.ran', 'w').close()\n\n\nclass Filter:\n    pass\n")
    monkeypatch.syspath_prepend(tmp_path)
    check_settings(Settings({"DUPEFILTER_CLASS": "probe_module.Filter"}, priority="cmdline"))
    assert not (tmp_path / "probe_module.py.ran").exists()
    with pytest.raises(ConfigError, match="module 'probe_module' has no 'Filtre'"):
        check_settings(Settings({"DUPEFILTER_CLASS": "probe_module.Filtre"}, priority="cmdline"))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        # Bytes of the command line that are not UTF-8 become lone surrogates: the crawl
        # started, then failed with tracebacks as the store wrote its record.
        ({"query": "bird\udcff"}, "query='bird\\udcff' is not UTF-8 text"),
        # Integers past 64 bits: OverflowError once the crawl started (a deque's maxlen, a list
        # of bees)...
        ({"strategy": "pso", "epoch": "1" + "0" * 20}, "epoch=100000000000000000000 is too large"),
        ({"strategy": "bees", "n_bees": "1" + "0" * 20}, "n_bees=100000000000000000000 is too"),
        ({"strategy": "bees", "seed": "-" + "9" * 20}, "seed=-99999999999999999999 is too large"),
        # Python's generator takes a negative seed as its absolute value: seed=-1 crawled as 1.
        ({"strategy": "annealing", "seed": "-1"}, "seed=-1 is below its minimum 0"),
        # ... and below it, a swarm that filled the memory (the OOM killer ended the crawl), or
        # bees that a pop looked over one by one.
        ({"strategy": "pso", "particles": "1000000000"}, "particles=1000000000 is above its max"),
        ({"strategy": "bees", "n_bees": "10000000"}, "n_bees=10000000 is above its maximum 1000"),
        # Not from a shell, whose arguments end at a NUL, but from a program that starts crawls.
        ({"topic_file": "/topic\x00.txt"}, "cannot read topic_file '/topic\\x00.txt': ValueError"),
        # Read whole: the memory filled until the kernel killed the crawl.
        ({"topic_file": "/dev/zero"}, "topic_file '/dev/zero' holds more than 50,000,000 char"),
        ({"seeds_file": "/dev/zero"}, "seeds_file '/dev/zero' holds more than 50,000,000 char"),
        ({"seeds_file": "/dev/urandom"}, "cannot read seeds_file '/dev/urandom': UnicodeDecodeE"),
    ],
)
def test_odd_argument_values_are_refused(arguments, message):
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**GOOD, "strategy": "bestfirst", **arguments})
    assert str(refused.value).startswith(message), refused.value


@pytest.mark.parametrize(
    ("arguments", "read"),
    [
        ({"strategy": "hybrid", "then": " dfs"}, {"then": "dfs"}),
        ({"strategy": "annealing", "cooling": "linear\n"}, {"cooling": "linear"}),
        ({"strategy": "beam", "beam_width": " 5 "}, {"beam_width": 5}),
        ({"strategy": "shark", "delta": "\t0.25"}, {"delta": 0.25}),
        ({"strategy": " hybrid ", "then": "dfs "}, {"then": "dfs"}),
        ({"strategy": "bfs", "render": " auto"}, {"render": "auto"}),
        ({"strategy": "bfs", "language": " de "}, {"language": "de"}),
        ({"strategy": "bfs", "crawl_id": " c1 "}, {"crawl_id": "c1"}),
        ({"strategy": "bfs", "query": " birds "}, {"query": "birds"}),
        ({"strategy": "bfs", "seeds": f" {GOOD['seeds']} "}, {"seeds": (GOOD["seeds"],)}),
        (
            {"strategy": "bfs", "allowed_domains": " 127.0.0.1 "},
            {"allowed_domains": ("127.0.0.1",)},
        ),
    ],
)
def test_blanks_around_an_argument_are_the_shells_quoting(arguments, read):
    """``-a beam_width=" 5"`` was read as 5, ``-a then=" dfs"`` refused: 'not one of:
    bestfirst, dfs'. Every argument is read without the blanks around it (but the paths of
    topic_file and seeds_file: a file's name may hold them)."""
    config = parse_arguments({**GOOD, **arguments})
    assert {name: config.params.get(name, getattr(config, name, None)) for name in read} == read


@pytest.mark.parametrize(("given", "language"), [("nb", "no"), ("nn-NO", "no"), ("mo", "ro")])
def test_a_language_is_taken_by_any_of_its_codes(given, language):
    """-a language=nb, Norwegian Bokmål as most Norwegian pages declare it, was refused as not a
    language the tokenizer knows, while no (and iw for he) was taken."""
    assert parse_arguments({**GOOD, "language": given}).language == language


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"strategy": "hybrid", "then": " "}, "then='' is not one of: bestfirst, dfs"),
        ({"strategy": "beam", "beam_width": " "}, "beam_width='' is not an integer"),
        ({"strategy": "bfs", "render": "\t"}, "render='' is not one of: never, always, auto"),
        ({"strategy": " "}, "unknown strategy ''"),
        ({"strategy": "bfs", "crawl_id": " "}, "crawl_id is empty"),
        ({"strategy": "bfs", "query": " "}, "missing query"),
        ({"strategy": "bfs", "seeds": " "}, "missing seeds"),
        # -a allowed_domains=$UNSET: the crawl went anywhere the links led, as with none given.
        (
            {"strategy": "bfs", "allowed_domains": " "},
            "allowed_domains is empty: give a domain, or no allowed_domains to crawl any site",
        ),
        ({"strategy": "bfs", "allowed_domains": ", "}, "allowed_domains is empty"),
        # -a language=$UNSET: told from the query, as with none given.
        (
            {"strategy": "bfs", "language": ""},
            "language is empty: give an ISO 639-1 code, or no language to tell it from the query",
        ),
    ],
)
def test_an_argument_of_blanks_alone_is_refused(arguments, message):
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**GOOD, **arguments})
    assert str(refused.value).startswith(message), refused.value


@pytest.mark.parametrize("argument", ["topic_file", "seeds_file"])
def test_a_file_not_found_says_where_it_was_looked_for(argument, tmp_path, monkeypatch):
    """A Scrapyd job reads a relative topic_file or seeds_file in the directory Scrapyd was
    started in: its log said only FileNotFoundError, of a file that is there in the user's."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**GOOD, argument: "topics/birds.txt"})
    assert str(refused.value) == (
        f"cannot read {argument} 'topics/birds.txt' (relative to '{tmp_path}'): "
        "No such file or directory"
    )


@pytest.mark.parametrize(
    ("query", "whose"),
    [("", "topic_file {file} has"), ("the", "the query and topic_file {file} have")],
)
def test_a_topic_file_of_stop_words_is_named_in_its_refusal(tmp_path, query, whose):
    """A topic file of stop words alone was refused as "the query has no words", of a query
    not given, or given and not alone to blame."""
    topic_file = tmp_path / "birds and bees.txt"  # " and " in its name: still one file
    topic_file.write_text("of the\nand\n")
    arguments = {"seeds": GOOD["seeds"], "topic_file": str(topic_file), "query": query}
    with pytest.raises(ConfigError) as refused:
        parse_arguments(arguments)
    topic = f"{query}\nof the\nand".strip()
    assert str(refused.value) == (
        f"{whose.format(file=quoted(str(topic_file)))} no words to match pages against:"
        f" {quoted(topic)} (stop words, numbers and punctuation are not matched)"
    )


@pytest.mark.parametrize("content", ["", "\n \t\n"])
def test_an_empty_topic_file_is_said_to_be_empty(tmp_path, content):
    """An empty topic_file and no query were refused as "the query has no words to match pages
    against: ''", which named neither the file nor what was wrong with it."""
    topic_file = tmp_path / "topic.txt"
    topic_file.write_text(content)
    with pytest.raises(ConfigError) as refused:
        parse_arguments({"seeds": GOOD["seeds"], "topic_file": str(topic_file)})
    assert str(refused.value) == (
        f"topic_file {quoted(str(topic_file))} is empty: give the topic's words in it,"
        " or -a query='some words'"
    )


@pytest.mark.parametrize(
    ("arguments", "recorded"),
    [
        ({"strategy": "hybrid"}, {"bfs_levels": 2, "then": "bestfirst"}),
        ({"strategy": "hybrid", "then": "dfs"}, {"bfs_levels": 2, "then": "dfs", "max_depth": 5}),
        (
            {"strategy": "annealing", "cooling": "linear"},
            {"t0": 0.0, "cooling": "linear", "seed": 0},
        ),
        ({"strategy": "threshold"}, {"t0": 0.0, "cooling": "geometric", "factor": 0.99, "seed": 0}),
    ],
)
def test_a_crawl_records_only_the_parameters_that_act(arguments, recorded):
    """A parameter that has no effect with the others (works_with) was recorded at its
    default: `scrapy crawls` showed a hybrid crawl, then=bestfirst, with max_depth=5, a depth
    limit it did not have (and -a max_depth there is refused as having no effect)."""
    config = parse_arguments({**GOOD, **arguments})
    assert config.params == recorded
    # The frontier's order, which a JOBDIR resume compares, still names every parameter.
    assert config.order["params"].keys() >= {"max_depth", "factor"} & (
        strategy_class(arguments["strategy"]).params.keys()
    )


def test_a_jobdir_of_an_older_version_resumes_without_the_parameters_added_since(tmp_path):
    """rank_growth came after rank_semantic's first JOBDIRs: their order does not name it, and
    the resume was refused for "other parameters" that no -a could make the same."""
    settings = Settings({"JOBDIR": str(tmp_path / "job")}, priority="cmdline")
    arguments = {**GOOD, "strategy": "rank_semantic", "crawl_id": "first"}
    remember_job(settings, parse_arguments(arguments, settings))
    record_file = tmp_path / "job" / "focused.json"
    record = json.loads(record_file.read_text())
    del record["order"]["params"]["rank_growth"]
    record_file.write_text(json.dumps(record))
    assert parse_arguments(arguments, settings).params["rank_growth"] == 0.1
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**arguments, "rank_growth": "0.5"}, settings)
    assert str(refused.value).startswith("JOBDIR holds a rank_semantic crawl with band_low=0.1")


def test_a_jobdir_resumes_with_the_parameters_it_was_started_with(tmp_path):
    """The README: a resumed crawl's strategy is "a resumed JOBDIR crawl's own". Its
    parameters fell back to their defaults, and the resume was refused as another crawl's."""
    settings = Settings({"JOBDIR": str(tmp_path / "job")}, priority="cmdline")
    started = {**GOOD, "strategy": "shark", "delta": "0.3", "depth": "5"}
    remember_job(settings, parse_arguments(started, settings))
    for resumed in [GOOD, {**GOOD, "strategy": "shark"}, {**GOOD, "depth": "5"}]:
        config = parse_arguments(dict(resumed), settings)
        assert config.strategy == "shark"
        assert config.params == {"delta": 0.3, "beta": 0.8, "gamma": 0.8, "depth": 5}
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**GOOD, "delta": "0.4"}, settings)
    assert str(refused.value).startswith("JOBDIR holds a shark crawl with delta=0.3")


def test_a_jobdir_resumes_only_in_the_language_its_query_was_tokenized_in(tmp_path):
    """The language decides the topic's words (its stemmer, its stop words), and so every score
    in the frontier: another -a language went on ordering that frontier by other scores."""
    settings = Settings({"JOBDIR": str(tmp_path / "job")}, priority="cmdline")
    arguments = {**GOOD, "query": "steam locomotives", "crawl_id": "first"}
    remember_job(settings, parse_arguments(arguments, settings))
    # Told from the query as English: naming it is the same crawl.
    assert parse_arguments({**arguments, "language": "en"}, settings).crawl_id == "first"
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**arguments, "language": "fr"}, settings)
    assert str(refused.value).startswith(
        "JOBDIR holds a crawl whose query has language=en, this run language=fr;"
    )
    # A JOBDIR from before the order named its language resumes as before.
    record_file = tmp_path / "job" / "focused.json"
    record = json.loads(record_file.read_text())
    del record["order"]["language"]
    record_file.write_text(json.dumps(record))
    assert parse_arguments({**arguments, "language": "fr"}, settings).crawl_id == "first"


@pytest.mark.parametrize(
    "record",
    [
        {"crawl_id": 5, "strategy": "shark"},
        {"crawl_id": "first", "strategy": ["shark"]},
        {"crawl_id": "first", "strategy": "shark", "order": {"params": {}}},
        {"crawl_id": "first", "strategy": "shark", "order": {"topic": "ab", "params": [1]}},
        {
            "crawl_id": "first",
            "strategy": "shark",
            "order": {"topic": "ab", "params": {}, "language": 7},
        },
    ],
)
def test_a_job_record_of_another_shape_is_refused_in_one_line(tmp_path, record):
    """A focused.json that is JSON but not what a crawl writes: a traceback as the resume
    compared it (or a strategy shown as ['shark'])."""
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "focused.json").write_text(json.dumps(record))
    settings = Settings({"JOBDIR": str(tmp_path / "job")}, priority="cmdline")
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**GOOD, "strategy": "shark"}, settings)
    assert "is not a job directory of this crawler: focused.json cannot be read" in str(
        refused.value
    )


def test_a_job_record_nested_too_deep_is_refused_in_one_line(tmp_path):
    """Python's parser recursed past its limit on it: a RecursionError traceback."""
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "focused.json").write_text("[" * 5000)
    settings = Settings({"JOBDIR": str(tmp_path / "job")}, priority="cmdline")
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**GOOD, "strategy": "shark"}, settings)
    assert "is not a job directory of this crawler: focused.json cannot be read" in str(
        refused.value
    )


@pytest.mark.parametrize(
    "damaged", ["counters.sqlite3", "trapfamilies.sqlite3", "requests.queue/frontier.sqlite3"]
)
def test_a_job_database_that_is_no_database_is_refused_in_one_line(tmp_path, damaged):
    """Damaged, or another program's: a traceback as the component owning it opened it (the
    counters' and the trap families' with the crawl going on without them)."""
    job = tmp_path / "job"
    (job / damaged).parent.mkdir(parents=True)
    (job / damaged).write_bytes(b"not a database, whatever its name says" * 4)
    settings = Settings({"JOBDIR": str(job)}, priority="cmdline")
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**GOOD, "strategy": "shark"}, settings)
    assert str(refused.value) == (
        f"JOBDIR {str(job)!r} is not a job directory of this crawler: {damaged} cannot be read "
        "(file is not a database); use a new JOBDIR"
    )


def _refused_jobdir(job: Path, arguments: dict[str, str]) -> str:
    settings = Settings({"JOBDIR": str(job)}, priority="cmdline")
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**GOOD, **arguments}, settings)
    return str(refused.value)


def _not_a_job_directory(job: Path, name: str, reason: str) -> str:
    return (
        f"JOBDIR {str(job)!r} is not a job directory of this crawler: {name} cannot be read "
        f"({reason}); use a new JOBDIR"
    )


_SWARM = {
    "x": [[0.5, 0.5]] * 5,
    "v": [[0.0, 0.0]] * 5,
    "best_x": [[0.0, 0.0]] * 5,
    "best_f": [-1.0] * 5,
    "f": [None] * 5,
    "momentum": [0.0] * 5,
    "activity": [1] * 5,
}


@pytest.mark.parametrize(
    ("strategy", "content", "reason"),
    [
        ("bestfirst", b'{"strat', "it is not JSON"),  # cut short
        ("bestfirst", None, "it is not a file"),
        ("bestfirst", bytes(range(256)), "it is not UTF-8 text"),
        ("bestfirst", b"[1, 2]", "it is not a JSON object"),
        ("bestfirst", b"[" * 5000, "it is JSON nested more than 100 levels deep"),  # a traceback
        (
            "bestfirst",
            b'{"strategy": "bestfirst", "seq": "x"}',
            "its seq is not what the bestfirst",
        ),
        ("bestfirst", b'{"seq": -1}', "its seq is not what the bestfirst strategy saves"),
        ("bestfirst", b'{"seq": 9223372036854775808}', "its seq is not what the bestfirst"),
        ("bestfirst", b'{"strategy": 5}', "its strategy is not what the bestfirst strategy saves"),
        ("bees", b'{"found": {"0": {"q": "high", "relevant": true, "links": []}}}', "its found"),
        ("bees", b'{"found": {"x": {"q": 0.5, "relevant": true, "links": []}}}', "its found"),
        ("bees", b'{"dances": [{"q": 0.5, "until": 3, "links": ["zz"]}]}', "its dances"),
        ("bees", b'{"target": [5]}', "its target is not what the bees strategy saves"),
        ("bees", b'{"out": ["0"]}', "its out is not what the bees strategy saves"),
        (
            "bees",
            b'{"random": [3, [1, 2], null]}',
            "its random is not what the bees strategy saves",
        ),
        ("annealing", b'{"worse_sample": [NaN]}', "its worse_sample is not what the annealing"),
        ("threshold", b'{"fresh": [["http://t/", "ab"]]}', "its fresh is not what the threshold"),
        ("beam", b'{"kept": {"one": 1}}', "its kept is not what the beam strategy saves"),
        ("hillclimbing", b'{"best_child": [["http://t/", "ab"]]}', "its best_child is not"),
        ("pso", b'{"swarm": {"x": [[0.5, 0.5]]}}', "its swarm is not what the pso strategy saves"),
        (
            "pso",
            json.dumps({"swarm": {**_SWARM, "f": [None] * 4}}).encode(),
            "its swarm is not what the pso strategy saves",
        ),
        (
            "pso",
            json.dumps({"swarm": _SWARM, "flying": [["http://t/", 5]]}).encode(),
            "its particles are not those of its swarm",
        ),
        ("rank_semantic", b'{"ranked_links": 3}', "its ranking is not what the rank_semantic"),
        (
            "rank_semantic",
            b'{"band": [0.1]}',
            "its band is not what the rank_semantic strategy saves",
        ),
    ],
)
def test_a_queue_state_the_crawl_did_not_write_is_refused_in_one_line(
    tmp_path, strategy, content, reason
):
    """requests.queue/active.json, what the strategy queue's close() returned, read back by
    Scrapy and the strategy's restore as the scheduler opened: cut short, a folder or a value of
    another type was a cascade of tracebacks ('FocusedScheduler' object has no attribute 'dqs',
    'StoragePipeline' object has no attribute 'store'...) and exit 1, on every resume."""
    job = tmp_path / "job"
    state = job / "requests.queue" / "active.json"
    state.parent.mkdir(parents=True)
    if content is None:
        state.mkdir()
    else:
        state.write_bytes(content)
    refused = _refused_jobdir(job, {"strategy": strategy})
    assert refused.startswith(
        f"JOBDIR {str(job)!r} is not a job directory of this crawler: requests.queue/active.json"
        f" cannot be read ({reason}"
    ), refused
    assert refused.endswith("); use a new JOBDIR"), refused


FRONTIER = "requests.queue/frontier.sqlite3"


def _tables(path: Path, script: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path)) as database:
        database.executescript(script)


@pytest.mark.parametrize(
    ("name", "script", "reason"),
    [
        # Another program's database (here the store): a frontier made anew beside its tables,
        # the crawl's queued requests lost without a word.
        (FRONTIER, "CREATE TABLE pages (url);", "it has no table frontier"),
        (FRONTIER, "CREATE VIEW frontier AS SELECT 1;", "it has no table frontier"),
        (
            FRONTIER,
            "CREATE TABLE frontier (a, b);",  # 8 tracebacks and exit 1
            "its table frontier has no column fp",
        ),
        (
            FRONTIER,
            "CREATE TABLE frontier (fp, neg_score, neg_tiebreak, seq, request);"
            "CREATE TABLE inflight (fp);",
            "its table inflight has no column request",
        ),
        ("counters.sqlite3", "CREATE TABLE counters (a, b);", "its table counters has no column"),
        ("counters.sqlite3", "CREATE TABLE frontier (fp);", "it has no table counters"),
        # Written as the crawl runs: an insert that failed stopped it, as a full disk does.
        (
            "counters.sqlite3",
            "CREATE TABLE counters (name, value); CREATE TABLE stored_under (url);",
            "its table stored_under has no column fetched",
        ),
        (
            "counters.sqlite3",
            "CREATE TABLE counters (name, value); CREATE TABLE not_stored (fetched);",
            "its table not_stored has no column url",
        ),
        ("trapfamilies.sqlite3", "CREATE TABLE counts (family);", "its table counts has no colu"),
        ("nearduplicates.sqlite3", "CREATE TABLE other (band);", "it has no table bands"),
        (
            "requests.queue/linkgraph.sqlite3",
            "CREATE TABLE nodes (id, url);",
            "it has no table edges",
        ),
    ],
)
def test_a_job_database_of_other_tables_is_refused_in_one_line(tmp_path, name, script, reason):
    job = tmp_path / "job"
    _tables(job / name, script)
    refused = _refused_jobdir(job, {"strategy": "shark"})
    assert refused.startswith(f"JOBDIR {str(job)!r} is not a job directory of this crawler: ")
    assert f"{name} cannot be read ({reason}" in refused, refused


def _empty_frontier(job: Path) -> None:
    (job / "requests.queue").mkdir(parents=True, exist_ok=True)
    (job / "requests.queue" / "frontier.sqlite3").write_bytes(b"")


def _queue_state(job: Path, seq: int) -> None:
    (job / "requests.queue").mkdir(parents=True, exist_ok=True)
    state = {"strategy": "shark", "seq": seq}
    (job / "requests.queue" / "active.json").write_text(json.dumps(state))


def _counters(job: Path, value: int) -> None:
    """What focused.resume.CrawlCounters writes as the crawl runs, pause or crash."""
    with closing(sqlite3.connect(job / "counters.sqlite3")) as database, database:
        database.execute("CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
        database.execute("INSERT INTO counters VALUES ('responses', ?)", (value,))


def _remembered(job: Path) -> None:
    settings = Settings({"JOBDIR": str(job)}, priority="cmdline")
    remember_job(settings, parse_arguments({**GOOD, "strategy": "shark"}, settings))


@pytest.mark.parametrize(
    ("made", "reason"),
    [
        # Emptied (a disk error, a truncation): the crawl resumed an empty frontier and ended
        # "finished" at half its budget, 116 queued requests lost without a word.
        ((_remembered, _empty_frontier), "it is empty"),
        ((lambda job: _queue_state(job, 127), _empty_frontier), "it is empty"),
        ((lambda job: _queue_state(job, 127),), "it is missing"),
        # A crash before any pause leaves no queue state: the counters know it queued.
        ((_remembered, lambda job: _counters(job, 12)), "it is missing"),
        ((_remembered, lambda job: _counters(job, 0)), None),
        # What a job that queued nothing, or a job made before it queued, may hold.
        ((_empty_frontier,), None),
        ((lambda job: _queue_state(job, 0), _empty_frontier), None),
        ((_remembered,), None),  # the first run stopped before its scheduler opened
        (
            # A frontier file of a crawl from before the crash-safe resume's tables.
            (
                _remembered,
                lambda job: _queue_state(job, 3),
                lambda job: _tables(
                    job / "requests.queue" / "frontier.sqlite3",
                    "CREATE TABLE frontier (fp, neg_score, neg_tiebreak, seq, request);",
                ),
            ),
            None,
        ),
    ],
)
def test_a_frontier_emptied_of_the_requests_the_crawl_queued_is_refused(tmp_path, made, reason):
    job = tmp_path / "job"
    job.mkdir()
    for make in made:
        make(job)
    settings = Settings({"JOBDIR": str(job)}, priority="cmdline")
    if reason is None:
        assert parse_arguments({**GOOD, "strategy": "shark"}, settings).strategy == "shark"
    else:
        refused = _refused_jobdir(job, {"strategy": "shark"})
        name = "requests.queue/frontier.sqlite3"
        assert refused == _not_a_job_directory(job, name, reason)


def _pause_a_crawl(folder: Path, server: ReplayServer, strategy: str) -> tuple[Path, dict]:
    arguments = {"strategy": strategy, "query": "birds", "seeds": f"{server.url}/wiki/Albatross"}
    crawl = run_crawl(folder, arguments, {"JOBDIR": folder / "job", "CLOSESPIDER_PAGECOUNT": 15})
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert (folder / "job" / "requests.queue" / "active.json").exists()
    return folder, {**arguments, "crawl_id": crawl.crawl_id}


@pytest.fixture(scope="module")
def paused_job(tmp_path_factory, sample_graph) -> tuple[Path, dict[str, str]]:
    """A paused 15-page crawl: its folder, which holds its JOBDIR (job) and its store
    (focused.sqlite3) to copy, and its arguments."""
    server = ReplayServer(sample_graph).start()
    try:
        return _pause_a_crawl(tmp_path_factory.mktemp("paused"), server, "bestfirst")
    finally:
        server.stop()


@pytest.fixture(scope="module")
def paused_rank_job(tmp_path_factory, sample_graph) -> tuple[Path, dict[str, str]]:
    """``paused_job`` of rank_semantic, whose JOBDIR holds its link graph too."""
    server = ReplayServer(sample_graph).start()
    try:
        return _pause_a_crawl(tmp_path_factory.mktemp("paused_rank"), server, "rank_semantic")
    finally:
        server.stop()


@pytest.fixture(scope="module")
def served_pauses(tmp_path_factory, sample_graph):
    """``paused_job`` of a strategy (made as it is first asked for), its site still served: a
    resumed crawl fetches from it."""
    server = ReplayServer(sample_graph).start()
    pauses: dict[str, tuple[Path, dict]] = {}

    def paused(strategy: str) -> tuple[Path, dict]:
        if strategy not in pauses:
            folder = tmp_path_factory.mktemp(f"served_{strategy}")
            pauses[strategy] = _pause_a_crawl(folder, server, strategy)
        return pauses[strategy]

    try:
        yield paused
    finally:
        server.stop()


def _copy_of_the_store(job: Path, name: str) -> None:
    shutil.copyfile(job.parent / "focused.sqlite3", job / name)


@pytest.mark.parametrize(
    ("damage", "name"),
    [
        (lambda job: (job / "requests.queue/active.json").write_text('{"strat'), "active.json"),
        (lambda job: (job / "requests.queue/active.json").write_text('{"seq": "x"}'), "active"),
        (lambda job: (job / "requests.queue/frontier.sqlite3").write_bytes(b""), "frontier"),
        (lambda job: _copy_of_the_store(job, "requests.queue/frontier.sqlite3"), "frontier"),
        (lambda job: _copy_of_the_store(job, "counters.sqlite3"), "counters.sqlite3"),
    ],
)
def test_a_damaged_jobdir_is_refused_before_the_crawl_touches_anything(
    tmp_path, paused_job, damage, name
):
    """Each was a cascade of tracebacks and exit 1, or (the frontier emptied or another's) a
    resume from an empty frontier that ended the crawl "finished" at half its budget."""
    job, db = tmp_path / "job", tmp_path / "focused.sqlite3"
    paused, arguments = paused_job
    shutil.copytree(paused / "job", job)
    shutil.copyfile(paused / "focused.sqlite3", db)
    damage(job)
    files = {path: path.read_bytes() for path in [db, *job.rglob("*")] if path.is_file()}
    resumed = run(arguments, {"FOCUSED_DB": db, "JOBDIR": job, "CLOSESPIDER_PAGECOUNT": 30})
    assert resumed.returncode == 2, resumed.stderr[-3000:]
    [line] = resumed.stderr.splitlines()
    assert line.startswith(f"error: JOBDIR {str(job)!r} is not a job directory of this crawler: ")
    assert name in line and line.endswith("; use a new JOBDIR"), line
    # Nothing written: the store, the frontier, the counters are as they were.
    assert {path: path.read_bytes() for path in files} == files


# The first request the resumed frontier hands out, and a row of it as a crash leaves it in
# flight (its request popped and not finished).
_TOP = "(SELECT fp FROM frontier ORDER BY back, neg_score, neg_tiebreak, seq LIMIT 1)"
_LAST = "rowid = (SELECT max(rowid) FROM frontier)"
GRAPH = "requests.queue/linkgraph.sqlite3"
_IN_FLIGHT = (
    f"INSERT INTO inflight SELECT fp, request, 0, seq FROM frontier WHERE fp = {_TOP};"
    "DELETE FROM frontier WHERE fp IN (SELECT fp FROM inflight);"
)


@pytest.mark.parametrize(
    ("name", "damage", "reason"),
    [
        # A request's bytes replaced: the crawl logged a traceback every 5 seconds, never ended.
        (FRONTIER, f"UPDATE frontier SET request = x'deadbeef' WHERE fp = {_TOP}", "in request"),
        (FRONTIER, f"UPDATE frontier SET request = 'junk' WHERE fp = {_TOP}", "in request"),
        (FRONTIER, f"UPDATE frontier SET request = NULL WHERE fp = {_TOP}", "in request"),
        # Read as the scheduler opens: a cascade of tracebacks, exit 1.
        (FRONTIER, f"UPDATE frontier SET seq = 'x' WHERE {_LAST}", "'x' in seq, not a whole"),
        (FRONTIER, _IN_FLIGHT + "UPDATE inflight SET request = x'00'", "in request, not a pic"),
        (FRONTIER, _IN_FLIGHT + "UPDATE inflight SET counted = 1, request = x'00'", "in request"),
        (FRONTIER, _IN_FLIGHT + "UPDATE inflight SET seq = 'x'", "inflight has 'x' in seq"),
        # Text or NULL sorts before or after every number, and fails a rediscovery's comparison.
        (FRONTIER, f"UPDATE frontier SET neg_score = 'x' WHERE {_LAST}", "'x' in neg_score"),
        (FRONTIER, f"UPDATE frontier SET neg_score = NULL WHERE {_LAST}", "None in neg_score"),
        (FRONTIER, f"UPDATE frontier SET neg_tiebreak = x'00' WHERE {_LAST}", "in neg_tiebreak"),
        (FRONTIER, f"UPDATE frontier SET back = 'x' WHERE {_LAST}", "'x' in back, not 0 or 1"),
        # A NULL fingerprint: its pop deleted no row (fp = NULL matches none), queued for good.
        (FRONTIER, f"UPDATE frontier SET fp = NULL WHERE {_LAST}", "None in fp, not a finger"),
        (FRONTIER, "INSERT INTO finished VALUES (5)", "table finished has 5 in fp"),
        # Text whose bytes are no UTF-8: a traceback each time the scheduler read the row.
        (
            FRONTIER,
            f"UPDATE frontier SET host = CAST(x'ff0a41' AS TEXT) WHERE fp = {_TOP}",
            "has '\ufffd\\nA' in host, not UTF-8 text or null",
        ),
        (
            "trapfamilies.sqlite3",
            "INSERT INTO counts VALUES (CAST(x'c3' AS TEXT), 'queued', 1)",
            "has '\ufffd' in family, not UTF-8 text",
        ),
        # A traceback as the counters were read, and the crawl counted from 0 again.
        ("counters.sqlite3", "UPDATE counters SET value = 'x'", "'x' in value, not a count"),
        ("counters.sqlite3", "UPDATE counters SET value = -3", "-3 in value, not a count"),
        ("counters.sqlite3", "INSERT INTO counters VALUES ('fetched_urls', 3)", "in name, not"),
        # A failed robots.txt's, read into spider.state: a traceback as its host came up.
        (
            "counters.sqlite3",
            "INSERT INTO robots_failures VALUES ('h:1', 1, 'x', NULL, 1)",
            "'x' in retry_at, not a number or null",
        ),
        (
            "counters.sqlite3",
            "INSERT INTO robots_failures VALUES ('h:1', -1, NULL, NULL, 1)",
            "-1 in failures, not a count",
        ),
        # The topic-drift window's verdicts, rebuilt into it after a crash.
        (
            "counters.sqlite3",
            "INSERT INTO drift_window (fetch_order, relevant) VALUES (3, 'x')",
            "'x' in relevant, not 0 or 1",
        ),
        (
            "counters.sqlite3",
            "INSERT INTO drift_window VALUES (3, 1, 'x')",
            "'x' in fp, not a fingerprint (bytes) or null",
        ),
        # The URL a page stored under its rel=canonical was fetched at: the table unread.
        (
            "counters.sqlite3",
            "INSERT INTO stored_under VALUES (CAST(x'ff' AS TEXT), 'http://a/')",
            "has '\ufffd' in fetched, not UTF-8 text",
        ),
        # A host's MAX_PAGES_PER_HOST slots taken, read into its count after a crash.
        (
            "counters.sqlite3",
            "INSERT INTO host_pages VALUES ('h', 'x')",
            "'x' in pages, not a count",
        ),
        ("trapfamilies.sqlite3", "INSERT INTO counts VALUES ('f', 'queued', 'x')", "in count"),
        ("trapfamilies.sqlite3", "INSERT INTO counts VALUES ('f', 'other', 1)", "in kind"),
        ("nearduplicates.sqlite3", "UPDATE bands SET fingerprint = 'x'", "in fingerprint"),
        ("nearduplicates.sqlite3", "UPDATE bands SET value = NULL", "None in value"),
        # rank_semantic's link graph, read as its queue opens: a cascade of tracebacks, exit 1.
        (GRAPH, "UPDATE edges SET pair = 'x' WHERE rowid = 3", "'x' in pair, not a whole"),
        (GRAPH, "UPDATE ranking SET rank = x'0011'", "in rank, not an array of ranks"),
    ],
)
def test_a_value_damaged_in_a_jobdir_row_is_refused_in_one_line(
    tmp_path, request, name, damage, reason
):
    """A value damaged inside a row of a JOBDIR file (text for a number, NULL, a request that
    is no pickle): tracebacks as the resume read it, or a crawl that never ended."""
    job, db = tmp_path / "job", tmp_path / "focused.sqlite3"
    paused, arguments = request.getfixturevalue(
        "paused_rank_job" if name == GRAPH else "paused_job"
    )
    shutil.copytree(paused / "job", job)
    shutil.copyfile(paused / "focused.sqlite3", db)
    with closing(sqlite3.connect(job / name)) as database:
        database.executescript(damage)
    files = {path: path.read_bytes() for path in [db, *job.rglob("*")] if path.is_file()}
    resumed = run(arguments, {"FOCUSED_DB": db, "JOBDIR": job, "CLOSESPIDER_PAGECOUNT": 30})
    assert resumed.returncode == 2, resumed.stderr[-3000:]
    [line] = resumed.stderr.splitlines()
    assert line.startswith(f"error: JOBDIR {str(job)!r} is damaged: {name} cannot be read (row ")
    assert reason in line and line.endswith("; mend or delete that row, or use a new JOBDIR")
    assert {path: path.read_bytes() for path in files} == files


@pytest.mark.parametrize(
    "pickled", [pickle.dumps([1, 2]), pickle.dumps({"url": 5}), pickle.dumps({"url": "x"})[:-3]]
)
@pytest.mark.parametrize(
    ("strategy", "counted"),
    [("bestfirst", None), ("bestfirst", 0), ("bestfirst", 1), ("rank_semantic", None)],
)
def test_a_request_damaged_past_the_jobdir_check_is_dropped_with_a_warning(
    tmp_path, served_pauses, pickled, strategy, counted
):
    """A pickle of another value, or cut short, which the JOBDIR check does not unpickle: queued
    (``counted`` None), the crawl logged a traceback each time the engine asked for a request,
    and never ended; in flight as a crash leaves it (its response counted or not), a cascade of
    tracebacks as the scheduler opened, as it was in rank_semantic's frontier, which reads its
    requests back as its queue opens. It is dropped as it is read, its URL left seen, and the
    crawl goes on."""
    job, db = tmp_path / "job", tmp_path / "focused.sqlite3"
    paused, arguments = served_pauses(strategy)
    shutil.copytree(paused / "job", job)
    shutil.copyfile(paused / "focused.sqlite3", db)
    with closing(sqlite3.connect(job / FRONTIER)) as database, database:
        (fp,) = database.execute(_TOP[1:-1]).fetchone()
        database.execute("UPDATE frontier SET request = ? WHERE fp = ?", (pickled, fp))
        if counted is not None:
            database.execute(
                "INSERT INTO inflight SELECT fp, request, ?, seq FROM frontier WHERE fp = ?",
                (counted, fp),
            )
            database.execute("DELETE FROM frontier WHERE fp = ?", (fp,))
    settings = {"FOCUSED_DB": db, "JOBDIR": job, "CLOSESPIDER_PAGECOUNT": 20, "LOG_LEVEL": "INFO"}
    resumed = run(arguments, settings)
    log = resumed.stderr
    assert resumed.returncode == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    [warning] = [line for line in log.splitlines() if " WARNING: " in line]
    assert warning.endswith("dropped, its URL not fetched"), warning
    assert f"{job / FRONTIER}: a request cannot be read (" in warning
    assert "'focused/resume/damaged_requests': 1," in log
    assert "Spider closed (closespider_pagecount)" in log
    with closing(sqlite3.connect(job / FRONTIER)) as database:
        for table in ("frontier", "inflight"):
            row = database.execute(f"SELECT 1 FROM {table} WHERE fp = ?", (fp,)).fetchone()
            assert row is None, table
        assert database.execute("SELECT 1 FROM finished WHERE fp = ?", (fp,)).fetchone()


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("topic.jsonl", b"not JSON at all\n", "line 1 is not a [text, language] record"),
        ("topic.jsonl", b'["albatross", "en"]\n5\n', "line 2 is not a [text, language] record"),
        ("topic.jsonl", b"[5, null]\n", "line 1 is not a [text, language] record"),
        # A RecursionError traceback; no line a crash cut short nests so.
        (
            "topic.jsonl",
            b'["albatross", "en"]\n' + b"[" * 5000,
            "line 2 is not a [text, language] record",
        ),
        (
            "topic.jsonl",
            b'{"text": "x", "language": "en"}',
            "line 1 is not a [text, language] record",
        ),
        ("topic.jsonl", bytes(range(256)), "it is not UTF-8 text"),
        ("topic.jsonl", None, "it is not a file"),
        ("spider.state", None, "it is not a file"),
        ("spider.state.tmp", None, "it is not a file"),
        ("link_encoder.pickle", None, "it is not a file"),
        ("link_encoder.pickle.tmp", None, "it is not a file"),
        # The crawl ran, and its pause failed as it closed, exit 1.
        ("paused_hosts.json", None, "it is not a file"),
        ("paused_hosts.json.tmp", None, "it is not a file"),
    ],
)
def test_a_job_file_the_crawl_did_not_write_is_refused_in_one_line(tmp_path, name, content, reason):
    """Read only once the crawl had started: junk in topic.jsonl was a traceback as the spider
    opened, a folder where spider.state, the encoder's state or their temporary files go one as
    the crawl closed (its state lost). None: a folder of that name."""
    job = tmp_path / "job"
    job.mkdir()
    if content is None:
        (job / name).mkdir()
    else:
        (job / name).write_bytes(content)
    settings = Settings({"JOBDIR": str(job)}, priority="cmdline")
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**GOOD, "strategy": "shark"}, settings)
    assert str(refused.value) == (
        f"JOBDIR {str(job)!r} is not a job directory of this crawler: {name} cannot be read "
        f"({reason}); use a new JOBDIR"
    )


def test_a_topic_journal_cut_by_a_crash_is_no_junk(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "topic.jsonl").write_bytes(b'["albatross", "en"]\n["petrel nest\n["penguin", null]\n[')
    settings = Settings({"JOBDIR": str(job)}, priority="cmdline")
    assert parse_arguments({**GOOD, "strategy": "shark"}, settings).strategy == "shark"


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        ({"query": "fish"}, "JOBDIR holds a crawl of another query or topic_file; resume it"),
        ({"delta": "0.3"}, "JOBDIR holds a shark crawl with delta=0.5, beta=0.8, gamma=0.8, dep"),
        ({"crawl_id": "other"}, "JOBDIR holds crawl first; resume it with -a crawl_id=first"),
        ({"strategy": "bfs"}, "JOBDIR holds a shark crawl; resume it with -a strategy=shark"),
        (
            {"language": "de"},
            "JOBDIR holds a crawl whose query has no language (none given, none told), this "
            "run language=de; resume it with the same -a language or use a new JOBDIR",
        ),
    ],
)
def test_a_jobdir_resumes_only_the_crawl_it_holds(tmp_path, changed, message):
    """Only its strategy was compared: resumed with another query, other parameters or another
    crawl id, the frontier ordered for the first went on under the second's record."""
    settings = Settings({"JOBDIR": str(tmp_path / "job")}, priority="cmdline")
    arguments = {**GOOD, "strategy": "shark", "crawl_id": "first"}
    remember_job(settings, parse_arguments(arguments, settings))
    assert parse_arguments({**GOOD, "strategy": "shark"}, settings).crawl_id == "first"
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**arguments, **changed}, settings)
    assert str(refused.value).startswith(message), refused.value


def _one_feed_error(log: str, uri: str) -> None:
    """The feed's failure is the crawl's one error line, without a traceback."""
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, log[-3000:]
    assert errors[0].endswith(f"the feed {uri} cannot be written: No space left on device")
    assert "Traceback" not in log and "Exception ignored" not in log, log[-3000:]


@pytest.mark.parametrize(
    ("option", "uri"),
    [("-O", "/dev/full:jsonl"), ("-o", "file:///dev/full:jsonl")],
)
def test_a_feed_that_fails_mid_crawl_stops_it_in_one_line(tmp_path, site, option, uri):
    """A full disk (/dev/full answers every write so): each page's export was a traceback, the
    crawl went on to its budget writing nothing to the feed, and exited 0."""
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    budget = 60
    crawl = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": budget}, extra=[option, uri])
    log = crawl.result.stderr
    assert crawl.result.returncode == 1, log[-3000:]
    _one_feed_error(log, uri.removesuffix(":jsonl"))
    assert "Spider closed (feed_failed)" in log
    # Stopped at the first page's export: only the requests under way were completed.
    pages = crawl.pages()
    assert 1 <= len(pages) < budget
    record = crawl.crawl_record()
    assert (record["status"], record["finish_reason"]) == ("interrupted", "feed_failed")
    assert record["pages"] == len(pages)


def test_a_log_file_on_a_full_disk_is_one_line_and_the_crawl_goes_on(tmp_path, site):
    """Each log line was a traceback of logging's own on stderr, and Scrapy, closing its
    handler to make the crawler's, raised: the crawl died before fetching a page, exit 1."""
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    crawl = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 20, "LOG_FILE": "/dev/full"})
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert crawl.result.stderr == (
        "error: LOG_FILE '/dev/full' cannot be written: No space left on device; the crawl goes "
        "on, and its log lines are lost until the file takes them\n"
    )
    assert len(crawl.pages()) == 20
    assert crawl.crawl_record()["finish_reason"] == "closespider_pagecount"


def test_a_crawl_with_stderr_closed_runs(tmp_path):
    """`scrapy crawl topical ... 2>&-`: Scrapy's log handler for a stderr Python does not have
    failed as it was made (an AttributeError no one saw): exit status 1, nothing crawled. The
    crawl runs, its log lost, and its exit status tells how it ended: 1 here, its one seed
    refusing."""
    db = tmp_path / "focused.sqlite3"
    arguments = {"crawl_id": "c", "query": "birds", "seeds": "http://127.0.0.1:9/"}
    settings = {"FOCUSED_DB": db, "ENCODER_STORE_DIR": tmp_path / "encodings"}
    closed = run_with_stderr_closed(scrapy_command(*crawl_args(arguments, settings)))
    assert closed.returncode == 1
    record = Crawl(closed, db, "c").crawl_record()
    assert (record["status"], record["finish_reason"]) == ("interrupted", "seeds_unreachable")


def test_the_other_feeds_get_every_page_stored_after_one_fails(tmp_path, site):
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    kept = tmp_path / "pages.jsonl"
    feeds = json.dumps({"/dev/full": {"format": "jsonl"}, str(kept): {"format": "jsonl"}})
    crawl = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 60, "FEEDS": feeds})
    assert crawl.result.returncode == 1, crawl.result.stderr[-3000:]
    _one_feed_error(crawl.result.stderr, "/dev/full")
    exported = [json.loads(line)["url"] for line in kept.read_text().splitlines()]
    assert exported == [page["url"] for page in crawl.pages()]


def test_a_feed_that_fails_as_the_crawl_closes_says_so_in_one_line(tmp_path, site):
    """A feed of small records is buffered: a full disk showed only as Scrapy stored the file
    at the close, a traceback, and the crawl exited 0."""
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    feeds = json.dumps({"/dev/full": {"format": "json", "fields": ["url"]}})
    crawl = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 5, "FEEDS": feeds})
    log = crawl.result.stderr
    assert crawl.result.returncode == 1, log[-3000:]
    _one_feed_error(log, "/dev/full")
    record = crawl.crawl_record()  # the crawl itself ended on its budget
    assert (record["status"], record["finish_reason"]) == ("finished", "closespider_pagecount")
    assert record["pages"] == len(crawl.pages()) >= 5


def test_a_new_crawl_refuses_to_add_a_second_document_to_a_feed(tmp_path, site):
    """`-o pages.json` to a file an earlier crawl exported to: Scrapy wrote a second JSON array
    after the first (a second header line in a CSV feed, a second root in an XML one), and the
    file was no JSON (CSV, XML) any more. Refused in one line, nothing touched, no store made;
    -O writes it anew, and -o adds to a JSON lines feed and to an empty file."""
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    held = {
        "pages.json": ("a second JSON array", '[\n{"url": "http://a.test/"}\n]'),
        "pages.csv": ("a second header line", "url\r\nhttp://a.test/\r\n"),
        "pages.xml": ("a second XML root", "<?xml version='1.0'?>\n<items></items>"),
        "pages.jsonl": (None, '{"url": "http://a.test/"}\n'),
        "empty.json": (None, ""),
    }
    for name, (_, text) in held.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    for name, (second, text) in held.items():
        if second is None:
            continue
        feed = tmp_path / name
        refused = run_crawl(
            tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 5}, extra=["-o", str(feed)]
        )
        assert refused.result.returncode == 2, refused.result.stderr[-3000:]
        assert refused.result.stderr == (
            f"error: the feed {quoted(str(feed))} is not empty, and -o would add {second} after"
            " what it holds: give it with -O to write it anew, name another file, or use a"
            " .jsonl feed, which -o adds to\n"
        )
        assert feed.read_bytes() == text.encode()
        assert not (tmp_path / "focused.sqlite3").exists()
    # -O and -o, which Scrapy's command line takes only apart.
    feeds = {str(tmp_path / "pages.json"): {"overwrite": True}}
    feeds |= {str(tmp_path / name): {} for name in ("pages.jsonl", "empty.json")}
    settings = {"CLOSESPIDER_PAGECOUNT": 5, "FEEDS": json.dumps(feeds)}
    crawl = run_crawl(tmp_path, arguments, settings)
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    urls = [page["url"] for page in crawl.pages()]
    for name in ("pages.json", "empty.json"):
        exported = json.loads((tmp_path / name).read_text(encoding="utf-8"))
        assert sorted(page["url"] for page in exported) == sorted(urls)
    lines = (tmp_path / "pages.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["url"] == "http://a.test/"
    assert sorted(json.loads(line)["url"] for line in lines[1:]) == sorted(urls)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens there once closed


def test_a_feed_scrapy_cannot_store_at_the_close_is_one_line(tmp_path, site):
    """An upload refused (FTP here; S3 and a compressed feed's last block fail at the same
    step) as Scrapy stores the feed at the close: it was a traceback, and the line named the
    feed with its password."""
    uri = f"ftp://crawler:secret@127.0.0.1:{_closed_port()}/pages.jsonl"
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    crawl = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 5}, extra=["-o", uri])
    log = crawl.result.stderr
    assert crawl.result.returncode == 1, log[-3000:]
    assert "Traceback" not in log and "secret" not in log, log[-3000:]
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, log[-3000:]
    shown = r"ftp://\*\*\*@127\.0\.0\.1:\d+/pages\.jsonl"
    reason = r"\[Errno 111\] Connection refused"
    assert re.search(
        rf"ERROR: Error storing jsonl feed \(\d+ items\) in: {shown}: {reason}$", errors[0]
    )
    record = crawl.crawl_record()  # the crawl itself ended on its budget, its pages stored
    assert (record["status"], record["finish_reason"]) == ("finished", "closespider_pagecount")
    assert record["pages"] == len(crawl.pages()) >= 5


def test_a_feed_whose_batches_fail_as_they_close_stops_the_crawl_in_one_line(tmp_path, site):
    """A batch of a few small records is written as it closes: each batch failed there with a
    traceback, and the crawl went on to its budget."""
    for batch in range(1, 100):  # a full disk for each batch's file
        (tmp_path / f"feed-{batch}.json").symlink_to("/dev/full")
    uri = str(tmp_path / "feed-%(batch_id)d.json")
    feeds = json.dumps({uri: {"format": "json", "fields": ["url"], "batch_item_count": 2}})
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    budget = 60
    crawl = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": budget, "FEEDS": feeds})
    log = crawl.result.stderr
    assert crawl.result.returncode == 1, log[-3000:]
    _one_feed_error(log, str(tmp_path / "feed-1.json"))
    record = crawl.crawl_record()
    assert (record["status"], record["finish_reason"]) == ("interrupted", "feed_failed")
    assert record["pages"] == len(crawl.pages()) < budget


def test_a_crawl_stopped_by_its_feed_resumes_from_its_jobdir(tmp_path, site):
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    settings = {"CLOSESPIDER_PAGECOUNT": 20, "JOBDIR": tmp_path / "job"}
    stopped = run_crawl(tmp_path, arguments, settings, extra=["-O", "/dev/full:jsonl"])
    assert stopped.result.returncode == 1, stopped.result.stderr[-3000:]
    first = {page["url"] for page in stopped.pages()}
    feed = tmp_path / "pages.jsonl"
    resumed = run_crawl(tmp_path, arguments, settings, extra=["-O", str(feed)])
    assert resumed.result.returncode == 0, resumed.result.stderr[-3000:]
    assert "Resuming crawl" in resumed.result.stderr
    pages = [page["url"] for page in resumed.pages()]
    fetched = [path for path in site.fetched if path.startswith("/wiki/")]
    assert len(pages) == len(fetched) == len(set(fetched)) >= 20  # nothing fetched twice
    exported = [json.loads(line)["url"] for line in feed.read_text().splitlines()]
    assert sorted(exported) == sorted(set(pages) - first)
    assert resumed.crawl_record()["status"] == "finished"


# The store given up on before the page budget is reached (retried for 0.7 s), or the budget
# reached while the store is retried (for 7 s), by the pages already under way when the crawl
# stopped sending requests (26-28 here): a crawl that reached its budget first exited 0, its
# pages lost.
@pytest.mark.parametrize(("budget", "retry_delay"), [(150, 0.1), (20, 1.0)])
def test_a_store_that_fills_up_mid_crawl_stops_it_without_a_traceback(
    tmp_path, site, budget, retry_delay
):
    """The SQLite file may grow no further (a file-size limit: a full disk without mounting
    one; SQLite says "disk I/O error" here, "database or disk is full" on a full disk, the same
    StoreError): the crawl stopped (store_unreachable), then Scrapy logged each page still
    under way with its whole record and traceback, some 17,000 lines for 140 pages."""
    db = tmp_path / "focused.sqlite3"
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    settings = {
        "FOCUSED_DB": db,
        "CLOSESPIDER_PAGECOUNT": budget,
        "STORAGE_RETRY_DELAY": retry_delay,
        "ENCODER_STORE_DIR": tmp_path / "encodings",
    }
    limit = 300_000  # bytes: the store takes about a dozen pages (stderr is a pipe, not limited)
    result = subprocess.run(
        scrapy_command(*crawl_args({**arguments, "crawl_id": "full"}, settings)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env=crawl_env(),
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
    )
    log = result.stderr
    assert result.returncode == 1, log[-3000:]
    assert "Traceback" not in log and "Error processing" not in log, log[-3000:]
    closing = [line for line in log.splitlines() if "closing the spider" in line]
    assert len(closing) == 1 and closing[0].endswith("(store_unreachable)"), closing
    unstored = re.findall(r"ERROR: page (\S+) not stored yet: the store is unreachable$", log, re.M)
    stored = {page["url"] for page in Crawl(result, db, "full").pages()}
    assert stored and unstored and not stored & set(unstored)


def test_only_setting_names_given_on_the_command_line_are_checked():
    settings = Settings({"CLOSESPIDER_PAGCOUNT": 5, "MY_OWN": 1}, priority="project")
    check_settings(settings)  # a settings module of the user's own may name anything
    assert unknown_settings_note(settings) is None
    settings.setdict({"PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": 2, "DEPTH_LIMIT": 3}, "cmdline")
    check_settings(settings)  # scrapy-playwright's and Scrapy's own
    assert unknown_settings_note(settings) is None
    settings.setdict({"SQLITE_PATH": "a", "MY_OWN": 2}, "cmdline")
    assert unknown_settings_note(settings) == (
        "settings 'MY_OWN', 'SQLITE_PATH' given but read by neither Scrapy, scrapy-playwright nor"
        " focused: ignored unless a component of your own reads it"
    )
    settings.set("DEPTH_LIMITS", 3, "cmdline")
    with pytest.raises(ConfigError, match=r"did you mean DEPTH_LIMIT\?"):
        check_settings(settings)


@pytest.mark.parametrize(
    ("settings", "option", "message"),
    [
        ({"LOG_FILE": "{db}"}, (), "cannot write LOG_FILE '{db}': it is the store, FOCUSED_DB"),
        ({}, ("-O", "{db}:jsonl"), "cannot write the feed '{db}': it is the store, FOCUSED_DB"),
        ({}, ("-o", "{link}:csv"), "cannot write the feed '{link}': it is the store, FOCUSED_DB"),
    ],
)
def test_an_output_file_that_is_the_store_is_refused(tmp_path, settings, option, message):
    """`-O` truncated the store under the crawl (a database disk image malformed), LOG_FILE
    wrote the log into it: a name completed with the Tab key is easily the store's."""
    db = filled_sqlite(tmp_path / "focused.sqlite3")
    before = db.read_bytes()
    link = tmp_path / "pages.csv"
    link.symlink_to(db)
    names = {"db": db, "link": link}
    given = {name: value.format(**names) for name, value in settings.items()}
    args = [*crawl_args(GOOD, {"FOCUSED_DB": db, **given}), *(o.format(**names) for o in option)]
    result = run_scrapy(args, timeout=60)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr == f"error: {message.format(**names)}\n"
    assert db.read_bytes() == before


def spider():
    from spiders.topical import TopicalSpider

    return TopicalSpider(parse_arguments(GOOD))


def test_a_feed_may_name_what_scrapy_fills():
    feeds = {"%(name)s-%(crawl_id)s-%(strategy)s-%(time)s-%(batch_id)03d.jsonl": {}}
    check_feed_placeholders(Settings({"FEEDS": feeds}), spider)


@pytest.mark.parametrize(
    "settings",
    [
        # Scrapy 2.19 leaves a % that starts no name as it is: refused ("unsupported format
        # character"), with advice (%%) that named another file, 100%%.jsonl.
        {"FEEDS": {"100%.jsonl": {}, "file:///tmp/my%20pages.jsonl": {}}},
        # The names a uri_params function adds were refused as names Scrapy cannot fill.
        {"FEEDS": {"%(site)s.jsonl": {"uri_params": "tests.user_components.site_params"}}},
        {"FEEDS": {"%(site)s.jsonl": {}}, "FEED_URI_PARAMS": "tests.user_components.site_params"},
    ],
)
def test_a_feed_uri_scrapy_takes_is_taken(settings):
    check_feed_placeholders(Settings(settings), spider)


def test_a_crawl_exports_to_the_feed_uris_scrapy_takes(tmp_path, site):
    """Each was refused before the crawl (exit 2); Scrapy names them as they are given, the
    uri_params function's name filled."""
    arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/wiki/Albatross"}
    settings = {"CLOSESPIDER_PAGECOUNT": 3, "FEED_URI_PARAMS": "tests.user_components.site_params"}
    feeds = ["-o", f"{tmp_path}/100%.jsonl", "-o", f"file://{tmp_path}/my%20pages.jsonl"]
    crawl = run_crawl(
        tmp_path, arguments, settings, extra=[*feeds, "-o", f"{tmp_path}/%(site)s.jl"]
    )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    for name in ("100%.jsonl", "my pages.jsonl", "birds.jl"):
        lines = (tmp_path / name).read_text(encoding="utf-8").splitlines()
        assert len(lines) == len(crawl.pages()) == 3


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("%(nosuch)s.jsonl", "names %(nosuch)s, which Scrapy cannot fill: it fills %(time)s,"),
        ("%(name)*s.jsonl", "the feed '%(name)*s.jsonl' is no name Scrapy can fill: not enough"),
    ],
)
def test_a_feed_naming_what_scrapy_cannot_fill_is_refused(uri, message):
    """A traceback as the feed opened: the crawl exported nothing and exited 0."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_feed_placeholders(Settings({"FEEDS": {uri: {}}}), spider)


def test_seeds_apart_by_blanks_are_seeds(tmp_path):
    """Two seeds given "URL URL", the way a shell lists them, were one seed with %20 in it: a
    404 that took a page of the budget, and a crawl that ended seeds_unreachable."""
    bird, gull = "http://127.0.0.1:9/wiki/Bird", "http://127.0.0.1:9/wiki/Gull"
    config = parse_arguments({"query": "birds", "seeds": f"{bird} {gull},\t{bird}"})
    assert config.seeds == (bird, gull)
    seeds_file = tmp_path / "seeds.txt"
    seeds_file.write_text(f"# two a line\n{bird}  {gull} # the rest\n", encoding="utf-8")
    assert parse_arguments({"query": "birds", "seeds_file": str(seeds_file)}).seeds == (bird, gull)


@pytest.mark.parametrize(
    ("job", "given"), [({}, "-a crawl_id=ID"), ({"_job": "j1"}, "-d crawl_id=ID to schedule.json")]
)
def test_a_shared_crawl_without_its_id_says_how_to_give_it(job, given):
    """A Scrapyd job (its ``_job`` argument) is given spider arguments with ``-d``: its log told
    it to give ``-a crawl_id=ID``, which schedule.json does not take."""
    settings = Settings({"FOCUSED_FRONTIER": "redis://127.0.0.1:9/0"}, priority="cmdline")
    message = f"FOCUSED_FRONTIER needs {given}, the same for every process"
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_arguments({**GOOD, "strategy": "bfs", **job}, settings)


SCRAPYD_JOB = {"_job": "j1"}  # Scrapyd passes every job its id as _job


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"seeds": GOOD["seeds"]},
            "missing query: give -d query='some words' or -d topic_file=PATH to schedule.json",
        ),
        (
            {"query": "birds"},
            "missing seeds: give -d seeds=URL[,URL...] or -d seeds_file=PATH to schedule.json",
        ),
    ],
)
def test_a_scrapyd_job_is_told_to_give_arguments_with_d(arguments, message):
    """Scrapyd's schedule.json takes spider arguments as ``-d NAME=VALUE``: a job's log told it to
    give ``-a query=...``, which it has no way to. Outside Scrapyd, ``-a`` it stays."""
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_arguments({**arguments, **SCRAPYD_JOB})
    outside = message.replace("-d", "-a").removesuffix(" to schedule.json")
    with pytest.raises(ConfigError, match=f"^{re.escape(outside)}$"):
        parse_arguments(arguments)


@pytest.mark.parametrize(
    ("changed", "given"),
    [
        ({"crawl_id": "other"}, "-d crawl_id=first to schedule.json (or none)"),
        ({"strategy": "bfs"}, "-d strategy=shark to schedule.json or use"),
        ({"language": "de"}, "the same -d language to schedule.json or use"),
    ],
)
def test_a_resumed_scrapyd_job_is_told_to_give_arguments_with_d(tmp_path, changed, given):
    """A job resuming a JOBDIR of another crawl was told to resume it with ``-a ...``."""
    settings = Settings({"JOBDIR": str(tmp_path / "job")}, priority="cmdline")
    arguments = {**GOOD, "strategy": "shark", "crawl_id": "first", **SCRAPYD_JOB}
    remember_job(settings, parse_arguments(arguments, settings))
    with pytest.raises(ConfigError) as refused:
        parse_arguments({**arguments, **changed}, settings)
    assert given in str(refused.value), refused.value


def test_a_scrapyd_job_giving_the_queue_is_told_to_give_its_strategy_with_d():
    settings = Settings(
        {"SCHEDULER_PRIORITY_QUEUE": "schedulers.bfs.BreadthFirstQueue"}, priority="cmdline"
    )
    message = (
        "setting SCHEDULER_PRIORITY_QUEUE is the strategy's queue: choose the strategy with "
        "-d strategy=NAME to schedule.json"
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_arguments({**GOOD, **SCRAPYD_JOB}, settings)


@pytest.mark.parametrize(
    ("arguments", "settings", "message"),
    [
        (
            {**GOOD, "seeds": "http://alice:s3cret@127.0.0.1:9/"},
            {},
            "seed 'http://***@127.0.0.1:9/' has a user name or password in it: give them as"
            " -d setting=HTTPAUTH_USER=... -d setting=HTTPAUTH_PASS=..."
            " -d setting=HTTPAUTH_DOMAIN=127.0.0.1:9 to schedule.json",
        ),
        (
            GOOD,
            {"HTTPAUTH_PASS": "p"},
            "setting HTTPAUTH_PASS needs HTTPAUTH_DOMAIN, the host the credentials are sent to"
            " (-d setting=HTTPAUTH_DOMAIN=example.org to schedule.json: that host and its"
            " subdomains)",
        ),
        (
            {**GOOD, "JOBDIR": "jobs/birds"},
            {},
            "JOBDIR is a setting, not a spider argument: give it as -d setting=JOBDIR=VALUE to"
            " schedule.json",
        ),
        (
            GOOD,
            {"": "5"},
            "-d setting==... names no setting: give -d setting=NAME=VALUE to schedule.json",
        ),
        (
            {**GOOD, "strategy": "oracle"},
            {},
            "strategy oracle is a benchmark reference: it needs"
            " -d setting=ORACLE_DISTANCES=FILE to schedule.json (written by python -m"
            " benchmarks.harvest)",
        ),
    ],
)
def test_a_scrapyd_job_is_told_to_give_settings_with_d_setting(arguments, settings, message):
    """Scrapyd's schedule.json takes settings as ``-d setting=NAME=VALUE``: a job's log told it
    to give ``-s HTTPAUTH_USER=...``, which it has no way to. Outside Scrapyd, ``-s`` it stays."""
    given = Settings(settings, priority="cmdline")
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        parse_arguments({**arguments, **SCRAPYD_JOB}, given)
    outside = message.replace("-d setting=", "-s ").replace(" to schedule.json", "")
    with pytest.raises(ConfigError, match=f"^{re.escape(outside)}$"):
        parse_arguments(arguments, given)
