"""The settings of how a crawl fetched its pages, kept in its crawl record for its recrawl.

A crawl made with ``-s USER_AGENT=... -s DOWNLOAD_DELAY=2`` was recrawled with the project's
user agent and no delay: the recrawl is another command, and the crawl record kept its
arguments, not its ``-s``. The crawl now records those of ``FETCH_SETTINGS`` that its latest
run was given on the command line (``-s``, or Scrapyd's ``-d setting=``) as
``fetch_settings``, and ``scrapy recrawl`` (``focused.commands.recrawl``) gives each of them
again unless its own command line gives it. Settings of the project's settings module are not
recorded: the recrawl reads that module too.

Kept: what decides which responses a site sends and how politely they are asked for. Not kept:
anything that can hold a secret (``HTTPAUTH_USER``, ``HTTPAUTH_PASS``, and
``DEFAULT_REQUEST_HEADERS``, which may carry an ``Authorization`` or ``Cookie`` header: a
store is no place for them, and a recrawl is given them again; ``HTTPAUTH_DOMAIN`` with them,
since the recrawl command checks that its credentials name their host before it reads the
record), where the crawl wrote
(``FOCUSED_DB``, ``MONGO_URI``: the recrawl is told where the crawl is), what a recrawl refuses
or does not do (``JOBDIR``, ``FOCUSED_FRONTIER``, budgets, the strategy's settings), and paths of
one machine (``FOCUSED_CHROMIUM``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from scrapy.settings import BaseSettings

from focused.setting_names import given_on_command_line

FETCH_SETTINGS: tuple[str, ...] = (
    # who asks, and whether it obeys
    "USER_AGENT",
    "ROBOTSTXT_OBEY",
    "ROBOTSTXT_USER_AGENT",
    "ROBOTS_META_OBEY",
    "ROBOTS_CRAWL_DELAY_MAX",
    "ROBOTS_RETRY_FAILED_AFTER",
    "RETRY_AFTER_MAX",
    "RETRY_BACKOFF_BASE",
    # how fast
    "CONCURRENT_REQUESTS",
    "CONCURRENT_REQUESTS_PER_DOMAIN",
    "CONCURRENT_REQUESTS_PER_IP",
    "DOWNLOAD_DELAY",
    "DOWNLOAD_DELAY_JITTER",
    "RANDOMIZE_DOWNLOAD_DELAY",  # Scrapy 2.19 deprecates it for DOWNLOAD_DELAY_JITTER
    "DOWNLOAD_SLOTS",
    "AUTOTHROTTLE_ENABLED",
    "AUTOTHROTTLE_START_DELAY",
    "AUTOTHROTTLE_MAX_DELAY",
    "AUTOTHROTTLE_TARGET_CONCURRENCY",
    # which answers are taken
    "DOWNLOAD_TIMEOUT",
    "DNS_TIMEOUT",
    "DOWNLOAD_MAXSIZE",
    "DOWNLOAD_WARNSIZE",
    "RETRY_ENABLED",
    "RETRY_TIMES",
    "RETRY_HTTP_CODES",
    "REDIRECT_ENABLED",
    "REDIRECT_MAX_TIMES",
    "METAREFRESH_ENABLED",
    "HTTPERROR_ALLOWED_CODES",
    "COOKIES_ENABLED",
    "HEAD_CHECK",
    "CANONICAL_DROP_PARAMS",
    "RELEVANCE_THRESHOLD",  # is_relevant of a page rescored with --model
    # how pages are rendered (-a render=always|auto)
    "FOCUSED_RENDER_BLOCK",
    "FOCUSED_RENDER_SETTLE_MS",
    "FOCUSED_RENDER_AUTO_MIN_WORDS",
    "FOCUSED_RENDER_AUTO_MIN_LINKS",
    "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT",
    "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT",
)


def given_fetch_settings(settings: Any) -> dict[str, Any]:
    """The ``FETCH_SETTINGS`` given on the command line, as the crawl ran with them, as JSON (a
    value JSON cannot hold, set by a component, is kept as text, and one holding an integer no
    store's record can, as its JSON text)."""
    return {
        name: _as_json(settings[name])
        for name in FETCH_SETTINGS
        if given_on_command_line(settings, name)
    }


def restore_fetch_settings(settings: Any, recorded: Mapping[str, Any] | None) -> dict[str, Any]:
    """Give ``settings`` each recorded fetch setting its own command line does not give, at the
    command line's priority (as if given with ``-s``); the ones given, by name. A name no
    longer kept (a record edited by hand, or of another version) is left out."""
    restored = {
        name: value
        for name, value in (recorded or {}).items()
        if name in FETCH_SETTINGS and not given_on_command_line(settings, name)
    }
    settings.setdict(restored, priority="cmdline")
    return restored


def describe_fetch(render: Any, fetch_settings: Mapping[str, Any] | None) -> str:
    """How a crawl fetched beyond the project's settings, as the recrawl's log and ``scrapy
    report`` say it: ``render='always', USER_AGENT='birdwatch/2.0'``; empty for plain fetches
    with the project's settings."""
    fetched = {"render": render} if render not in (None, "never") else {}
    fetched.update(fetch_settings or {})
    return ", ".join(f"{name}={value!r}" for name, value in fetched.items())


def _as_json(value: Any) -> Any:
    if isinstance(value, BaseSettings):  # a dict setting: Scrapy keeps each key's priority
        value = value.copy_to_dict()
    try:
        kept = json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return str(value)
    # A MongoDB record holds integers of 64 bits: one larger (in a DOWNLOAD_SLOTS key that no
    # check reads, focused.settingchecks) failed the crawl's start there alone. As text, a
    # recrawl gives it to Scrapy as -s did.
    return json.dumps(kept) if _too_large(kept) else kept


def _too_large(value: Any) -> bool:
    if isinstance(value, dict):
        return any(map(_too_large, value.values()))
    if isinstance(value, list):
        return any(map(_too_large, value))
    return isinstance(value, int) and abs(value) > sys.maxsize
