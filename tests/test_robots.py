"""robots.txt is checked for every request that waited for it (focused.robots)."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import pickle
import re
import sqlite3
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from itertools import pairwise
from types import SimpleNamespace

import pytest
from scrapy import Request
from scrapy.core import downloader as downloader_module
from scrapy.core.downloader import Slot
from scrapy.exceptions import CannotResolveHostError, DownloadTimeoutError, IgnoreRequest
from scrapy.extensions.throttle import AutoThrottle
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred

import focused.downloader
from focused import retryafter, robots
from focused import settings as project
from focused.downloader import PoliteDownloader
from focused.retryafter import RetryAfterMiddleware
from focused.robots import LINKED_URL, ROBOTS_TXT_LIFE, RobotsTxtMiddleware
from tests.conftest import run_crawl
from tests.queues import QueueSpider
from tests.sites import DROPPED, FetchLog, Reply, Site, html
from tests.test_canonical import stat
from tests.test_politeness import Timed, crawl_in_background

ROBOTS = "User-agent: *\nDisallow: /private/\n"


def site_with_private_pages(method: str, path: str) -> Reply:
    if path == "/robots.txt":
        return Reply(200, ROBOTS, "text/plain")
    return Reply(200, html(path, "<p>birds feathers nests</p>"))


def test_every_seed_waiting_for_robots_txt_is_checked(tmp_path):
    # Twelve seeds on one host all wait for its robots.txt at once; Scrapy 2.19's own
    # middleware checks only the first of them.
    private = [f"/private/{n}" for n in range(8)]
    public = [f"/public/{n}" for n in range(4)]
    with Site(site_with_private_pages, delay=0.2) as site:
        seeds = ",".join(site.url + path for path in private + public)
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": seeds},
            # The scheduler holds a host's requests while its robots.txt is read: handed out
            # all at once, as without the rule, they all wait for it in the middleware.
            {"CONCURRENT_REQUESTS": 16, "HELD_HOST_LOOKAHEAD": 0},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    fetched = sorted(path for _, path in site.log.gets())
    assert fetched == sorted(public)
    assert stat(crawl.result.stderr, "robotstxt/forbidden") == len(private)


def test_a_hosts_requests_held_for_its_robots_txt_go_as_soon_as_it_is_read(tmp_path):
    """The scheduler holds a host's requests while its robots.txt is being read (its
    Crawl-delay may send them one at a time); the engine, woken once it is read, hands them out
    at once, rather than after the first page's response."""
    latency = 1.0
    with Site(Timed(site_with_private_pages, latency)) as site:
        seeds = ",".join(f"{site.url}/public/{n}" for n in range(4))
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": seeds},
            {"CONCURRENT_REQUESTS": 16},
        )
        arrivals = site.log.get_times(site.host)
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert len(arrivals) == 4, site.log.gets()
    assert arrivals[-1] - arrivals[0] < latency / 2, [round(t - arrivals[0], 3) for t in arrivals]


@pytest.mark.parametrize(
    "robots",
    [
        Reply(200, "Disallow: /x\n" * 50_000, "text/plain"),  # over 500 KiB and DOWNLOAD_MAXSIZE
        Reply(200, b"\x1f\x8b\x08\x00", "text/plain", {"Content-Encoding": "gzip"}),
    ],
    ids=["too_large", "corrupt_gzip"],
)
def test_a_robots_txt_that_cannot_be_read_is_one_line_and_the_site_is_crawled(tmp_path, robots):
    """The server answered: every URL is allowed, as Scrapy does (not so for a host that
    cannot be reached); its error was logged with a traceback of some sixty lines."""

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return robots
        return Reply(200, html(path, "<p>birds feathers nests</p><a href='/next'>next</a>"))

    with Site(respond) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"},
            {"DOWNLOAD_MAXSIZE": 50_000, "RETRY_TIMES": 0},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert sorted(page["url"].removeprefix(site.url) for page in crawl.pages()) == ["/", "/next"]


def test_a_robots_txt_over_download_maxsize_is_read_up_to_500_kib(tmp_path):
    """RFC 9309 (2.5): a crawler's parsing limit is at least 500 KiB. A DOWNLOAD_MAXSIZE set
    lower for pages cancelled a larger robots.txt, and every URL of its host was fetched."""
    robots = ROBOTS + "# a comment to make it long\n" * 4_000  # some 110 KB

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(200, robots, "text/plain")
        return Reply(200, html(path, "<p>birds feathers nests</p>"))

    with Site(respond) as site:
        seeds = f"{site.url}/private/1,{site.url}/public/1"
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": seeds},
            {"DOWNLOAD_MAXSIZE": 50_000, "RETRY_TIMES": 0},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert [path for _, path in site.log.gets()] == ["/public/1"]


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_robots_txt_answered_with_a_server_error_forbids_the_host(tmp_path, status):
    """RFC 9309: a robots.txt the server cannot give means complete disallow; Scrapy parsed the
    error page and fetched everything. The other host of the crawl goes on."""

    def failing(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(status, "unavailable", "text/plain", {"Retry-After": "1"})
        return Reply(200, html(path, "<p>birds feathers nests</p><a href='/private/x'>x</a>"))

    with Site(failing) as down, Site(site_with_private_pages) as up:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{down.url}/,{up.url}/"},
            # Refused at once: held, they would wait ROBOTS_RETRY_FAILED_AFTER (see below).
            {"RETRY_TIMES": 0, "CLOSESPIDER_PAGECOUNT": 3, "ROBOTS_HOLD_RETRIES": 0},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert down.log.gets() == []  # nothing but its robots.txt
    assert [page["url"] for page in crawl.pages()][:1] == [f"{up.url}/"]
    netloc = down.url.removeprefix("http://")
    assert f"{netloc}: robots.txt answered {status} (after retries)" in log
    assert stat(log, "focused/robots/server_error_hosts") == 1


UNREACHABLE_ROBOTS = {
    # Never answered: DownloadTimeoutError.
    "timeout": (Reply(200, "User-agent: *\nDisallow:\n", "text/plain"), "took longer than"),
    # The connection closed with no response: DownloadFailedError.
    "dropped": (Reply(DROPPED), "Connection was closed cleanly"),
    # The body cut short of its Content-Length: ResponseDataLossError.
    "data_loss": (Reply(200, "User-agent: *\n", "text/plain", length=1000), "ended before"),
}


@pytest.mark.parametrize("failure", UNREACHABLE_ROBOTS)
def test_a_robots_txt_unreachable_for_a_network_error_forbids_the_host(tmp_path, failure):
    """RFC 9309 (2.3.1.4): a robots.txt unreachable for a server or network error means complete
    disallow. A robots.txt that timed out, or whose connection or body was cut, let every URL
    of its host through, as Scrapy does. The other host of the crawl goes on."""
    robots, why = UNREACHABLE_ROBOTS[failure]
    unanswered = threading.Event()

    def failing(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            if failure == "timeout":
                unanswered.wait(30)
            return robots
        return Reply(200, html(path, "<p>birds feathers nests</p><a href='/more'>more</a>"))

    with Site(failing) as down, Site(site_with_private_pages, "127.0.0.2") as up:
        try:
            crawl = run_crawl(
                tmp_path,
                {"strategy": "bfs", "query": "birds", "seeds": f"{down.url}/page,{up.url}/"},
                # The other host's robots.txt answers within it on a loaded machine. Refused at
                # once: held, they would wait ROBOTS_RETRY_FAILED_AFTER (see below).
                {"RETRY_TIMES": 0, "DOWNLOAD_TIMEOUT": 5, "ROBOTS_HOLD_RETRIES": 0},
            )
        finally:
            unanswered.set()
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert down.log.gets() == []  # nothing but its robots.txt
    assert [page["url"] for page in crawl.pages()] == [f"{up.url}/"]
    netloc = down.url.removeprefix("http://")
    (warned,) = [line for line in log.splitlines() if "robots.txt could not be fetched" in line]
    assert (
        "WARNING" in warned
        and f"{netloc}: robots.txt could not be fetched (after retries: " in warned
    )
    assert why in warned, warned
    assert "robotstxt] ERROR" not in log and "Traceback" not in log, log[-3000:]
    assert stat(log, "focused/robots/unreachable_hosts") == 1
    assert stat(log, "robotstxt/forbidden") == 1
    assert stat(log, "robotstxt/request_count") == 2
    assert "\"robotstxt/exception_count/<class 'scrapy.exceptions." in log
    # The seed it refused is named with why.
    (named,) = [line for line in log.splitlines() if "Seeds that could not be fetched" in line]
    assert f"{down.url}/page (Forbidden by robots.txt, which could not be fetched: " in named


FAILED_AT_FIRST = [Reply(503, "unavailable", "text/plain"), Reply(DROPPED)]
ALLOW_ALL = "User-agent: *\nAllow: /\n"


def failing_robots_txt(
    asked: list[float],
    *,
    failures: int = 1,
    failure: Reply = FAILED_AT_FIRST[0],
    then: str = ALLOW_ALL,
    links: str = "",
) -> Callable[[str, str], Reply]:
    """A site's responder whose robots.txt answers ``failure`` (a 503) to its first
    ``failures`` requests, then ``then`` (allow all), each request's time added to ``asked``;
    its pages, on birds, hold ``links``."""

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            asked.append(time.monotonic())
            return failure if len(asked) <= failures else Reply(200, then, "text/plain")
        return Reply(200, html(path, f"<p>birds feathers nests</p>{links}"))

    return respond


def crawl_past_a_failed_robots_txt(
    tmp_path,
    failure: Reply = FAILED_AT_FIRST[0],
    settings: dict | None = None,
    *,
    others: str = "",
    slow: float = 3,
):
    """A crawl from a seed on one host that links another, whose robots.txt fails at first
    (``failure``) and then allows all, once to a page there at once (``/early``: asked while
    it fails, held) and once ``slow`` s later (``/late``: by default after
    ROBOTS_RETRY_FAILED_AFTER, 1 s); the seed's links ``others`` come between the two.
    Returns the crawl, the other host's site and the robots.txt requests it had."""
    robots_asked: list[float] = []
    with Site(failing_robots_txt(robots_asked, failure=failure)) as down:

        def linking(method: str, path: str) -> Reply:
            if path == "/":
                links = f"<a href='{down.url}/early'>early</a>{others}<a href='/slow'>slow</a>"
            elif path == "/slow":
                time.sleep(slow)
                links = f"<a href='{down.url}/late'>late</a>"
            else:
                links = ""
            return Reply(200, html(path, f"<p>birds feathers nests</p>{links}"))

        with Site(linking, "127.0.0.2") as up:
            crawl = run_crawl(
                tmp_path,
                {"strategy": "bfs", "query": "birds", "seeds": f"{up.url}/"},
                {"RETRY_TIMES": 0, "ROBOTS_RETRY_FAILED_AFTER": 1, **(settings or {})},
            )
    return crawl, down, robots_asked


@pytest.mark.parametrize("failure", FAILED_AT_FIRST, ids=["server_error", "dropped"])
def test_a_failed_robots_txt_is_fetched_again_after_robots_retry_failed_after(tmp_path, failure):
    """A robots.txt that failed (a 503, or a network error) forbade its host for the rest of the
    crawl: a host down for a moment as its robots.txt was asked for lost every page linked to
    it later. After ROBOTS_RETRY_FAILED_AFTER the next request to the host reads it again, and
    the page asked for before then, held meanwhile, is fetched too."""
    crawl, down, robots_asked = crawl_past_a_failed_robots_txt(tmp_path, failure)
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert sorted(down.log.gets()) == [(down.host, "/early"), (down.host, "/late")], log[-3000:]
    assert len(robots_asked) == 2
    assert stat(log, "focused/robots/failed_retried") == 1
    assert stat(log, "focused/robots/held_requests") == 1  # /early, asked while it was failed
    assert stat(log, "robotstxt/forbidden") == 0
    stored = [page["url"] for page in crawl.pages()]
    assert len(stored) == 4 and f"{down.url}/early" in stored, stored  # and the other's two


def test_requests_held_for_a_failed_robots_txt_go_as_soon_as_its_time_is_up(tmp_path):
    """A crawl whose only work was held for a failed robots.txt sent it at the engine's next
    5-second heartbeat, up to 5 s after its time was up. The scheduler wakes the engine at the
    earliest time a held host may go: each host's robots.txt, failed at its own time (one
    answers late), is fetched again ROBOTS_RETRY_FAILED_AFTER (1 s) after its failure."""
    failed: dict[str, list[float]] = {}  # host -> when its robots.txt was answered, each time

    def responder(host: str, late: float):
        def respond(method: str, path: str) -> Reply:
            if path != "/robots.txt":
                return Reply(200, html(path, "<p>birds feathers nests</p>"))
            answers = failed.setdefault(host, [])
            if not answers:
                time.sleep(late)
                answers.append(time.monotonic())
                return Reply(503, "unavailable", "text/plain")
            answers.append(time.monotonic())
            return Reply(200, ALLOW_ALL, "text/plain")

        return respond

    hosts = {"127.0.0.1": 0, "127.0.0.2": 0.4, "127.0.0.3": 0.8}
    sites = [Site(responder(host, late), host) for host, late in hosts.items()]
    with sites[0], sites[1], sites[2]:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": ",".join(f"{s.url}/a" for s in sites)},
            {"RETRY_TIMES": 0, "ROBOTS_RETRY_FAILED_AFTER": 1},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert stat(log, "focused/robots/held_requests") == 3, log[-3000:]
    for host, answers in failed.items():
        assert len(answers) == 2, (host, log[-3000:])
        # 1 s, and the time a busy test machine takes to run the crawl's next turn
        assert 1 <= answers[1] - answers[0] < 2.5, (host, answers, log[-3000:])
    assert sorted(page["url"] for page in crawl.pages()) == sorted(f"{s.url}/a" for s in sites)


def test_held_requests_go_on_time_while_another_held_host_waits_in_its_slot(tmp_path):
    """The scheduler set no wake-up while a host whose held requests may go was held in its
    slot (its robots.txt, read again, asks a Crawl-delay of 10 s): the other hosts held for
    their failed robots.txt went at the engine's next 5-second heartbeat, up to 5 s late. Their
    robots.txt fail 1.25 s apart, before any of their times is up (ROBOTS_RETRY_FAILED_AFTER,
    4 s), so that one of their times is up at least 3.75 s before a heartbeat."""
    retry = 4.0
    asked: dict[str, list[float]] = {}  # host -> when its robots.txt was answered, each time

    def responder(host: str, late: float, then: str):
        def respond(method: str, path: str) -> Reply:
            if path != "/robots.txt":
                return Reply(200, html(path, "<p>birds feathers nests</p>"))
            answers = asked.setdefault(host, [])
            if not answers:
                time.sleep(late)
                answers.append(time.monotonic())
                return Reply(503, "unavailable", "text/plain")
            answers.append(time.monotonic())
            return Reply(200, then, "text/plain")

        return respond

    slow = Site(responder("127.0.0.2", 0, "User-agent: *\nCrawl-delay: 10\n"), "127.0.0.2")
    late = {f"127.0.0.{3 + n}": 0.5 + 1.25 * n for n in range(4)}
    sites = [Site(responder(host, seconds, ALLOW_ALL), host) for host, seconds in late.items()]
    with slow, sites[0], sites[1], sites[2], sites[3]:
        seeds = [f"{slow.url}/a1", f"{slow.url}/a2", *(f"{site.url}/b" for site in sites)]
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": ",".join(seeds)},
            {"RETRY_TIMES": 0, "ROBOTS_RETRY_FAILED_AFTER": retry},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert sorted(page["url"] for page in crawl.pages()) == sorted(seeds), log[-3000:]
    for host in late:
        answers = asked[host]
        assert len(answers) == 2, (host, log[-3000:])
        # its time, and the time a busy test machine takes to run the crawl's next turn
        assert retry <= answers[1] - answers[0] < retry + 1.5, (host, answers, log[-3000:])


def robots_failing_at_first(failures: int, then: str):
    """A site whose robots.txt answers 503 to its first ``failures`` requests, then ``then``,
    its pages linking three pages; with the times of the robots.txt requests it had."""
    robots_asked: list[float] = []
    links = "".join(f"<a href='/public/{n}'>{n}</a>" for n in range(3))
    respond = failing_robots_txt(robots_asked, failures=failures, then=then, links=links)
    return Site(respond), robots_asked


@pytest.mark.parametrize("then", [ALLOW_ALL, ROBOTS], ids=["allow", "disallow"])
def test_requests_held_while_robots_txt_fails_are_crawled_once_it_is_read(tmp_path, then):
    """A robots.txt that failed refused every request of its host that came up meanwhile, the
    seeds too, for good: a crawl of a site whose robots.txt was down for a moment as it started
    fetched nothing. They are held until it is fetched again (ROBOTS_RETRY_FAILED_AFTER), held
    again while it fails, and then crawled as it allows, or refused as it disallows."""
    site, robots_asked = robots_failing_at_first(2, then)
    with site:
        seeds = f"{site.url}/public/a,{site.url}/private/a"
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": seeds},
            {"RETRY_TIMES": 0, "ROBOTS_RETRY_FAILED_AFTER": 1},
        )
    log = crawl.result.stderr
    assert len(robots_asked) == 3, log[-3000:]
    assert robots_asked[2] - robots_asked[0] >= 2  # each fetched again once its time was up
    fetched = sorted(path for _, path in site.log.gets())
    public = ["/public/0", "/public/1", "/public/2", "/public/a"]
    assert crawl.result.returncode == 0, log[-3000:]
    # Both seeds as it first failed, and the one that went to fetch it again as it failed again.
    assert stat(log, "focused/robots/held_requests") == 3
    warned = [line for line in log.splitlines() if "robots.txt answered 503" in line]
    assert len(warned) == 2, log[-3000:]
    assert all(
        line.endswith("; its requests wait until it is fetched again in 1 s") for line in warned
    )
    if then == ROBOTS:
        assert fetched == public, log[-3000:]
        assert stat(log, "robotstxt/forbidden") == 1  # once robots.txt was read
        (named,) = [line for line in log.splitlines() if "Seeds that could not be fetched" in line]
        assert named.endswith(f": {site.url}/private/a (Forbidden by robots.txt)"), named
    else:
        assert fetched == sorted([*public, "/private/a"]), log[-3000:]
        assert stat(log, "robotstxt/forbidden") == 0
        assert "Seeds that could not be fetched" not in log, log[-3000:]


def test_requests_held_for_a_robots_txt_that_keeps_failing_are_refused_after_the_retries(
    tmp_path,
):
    """Held at most ROBOTS_HOLD_RETRIES times, then refused as RFC 9309 asks, saying why."""
    site, robots_asked = robots_failing_at_first(10, "")
    with site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/public/a"},
            {"RETRY_TIMES": 0, "ROBOTS_RETRY_FAILED_AFTER": 1, "ROBOTS_HOLD_RETRIES": 2},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 1, log[-3000:]
    assert site.log.gets() == []
    assert len(robots_asked) == 3  # the first time, and again for each of the 2 holds
    assert stat(log, "focused/robots/held_requests") == 2
    assert stat(log, "robotstxt/forbidden") == 1
    (named,) = [line for line in log.splitlines() if "No seed could be fetched" in line]
    assert f"{site.url}/public/a (Forbidden by robots.txt)" in named, named


def test_the_progress_line_says_how_many_requests_wait_for_a_failed_robots_txt(tmp_path):
    """A crawl left with requests held for a failed robots.txt alone waits for them, up to
    ROBOTS_HOLD_RETRIES times ROBOTS_RETRY_FAILED_AFTER (15 minutes by default), and its
    progress line said only that its frontier held them: it looked stuck. The line says how
    many are held, of how many hosts, and when the robots.txt is fetched again."""
    site, robots_asked = robots_failing_at_first(1, ALLOW_ALL)
    with site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/a,{site.url}/b"},
            {"RETRY_TIMES": 0, "ROBOTS_RETRY_FAILED_AFTER": 4, "FOCUSED_LOGSTATS_INTERVAL": 1},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert len(robots_asked) == 2, log[-3000:]
    lines = [line for line in log.splitlines() if "[focused.extensions] INFO: Focused:" in line]
    held = [
        int(found.group(1))
        for line in lines
        if (
            found := re.search(
                r"frontier 2 requests, 2 of them held for the robots.txt of 1 host that failed:"
                r" fetched again in (\d+) s$",
                line,
            )
        )
    ]
    assert held and all(0 <= seconds <= 4 for seconds in held), lines
    assert held == sorted(held, reverse=True), lines  # counting down to the next fetch
    assert "held" not in lines[-1], lines  # the last, at the close: none left
    assert stat(log, "focused/robots/holding_requests") == 0


def _pausing_seed(down: Site):
    """A seed page linking ``down``'s ``/early`` and six pages of its own host, each 0.3 s
    slow, so that a page budget of 3 pauses the crawl with ``/early`` held, not yet fetched."""

    def linking(method: str, path: str) -> Reply:
        if path != "/":
            time.sleep(0.3)
            return Reply(200, html(path, "<p>birds feathers nests</p>"))
        links = f"<a href='{down.url}/early'>early</a>"
        links += "".join(f"<a href='/{n}'>{n}</a>" for n in range(6))
        return Reply(200, html(path, f"<p>birds feathers nests</p>{links}"))

    return linking


def _paused_then_resumed(tmp_path, robots_site, settings, paused, resumed, between=None):
    """A JOBDIR crawl from ``_pausing_seed`` paused by a page budget of 3 while ``/early`` waits
    for the robots.txt of its host (``robots_site``: that host's answers), then resumed with a
    budget of 20: ``settings``, then ``paused``'s and ``resumed``'s for each run, and
    ``between(paused_run)`` run before the resume. Returns both runs and the host's site."""
    arguments = {"strategy": "bfs", "query": "birds"}
    settings = {"RETRY_TIMES": 0, "JOBDIR": tmp_path / "job", "CONCURRENT_REQUESTS": 2, **settings}
    with Site(robots_site) as down, Site(_pausing_seed(down), "127.0.0.2") as up:
        arguments["seeds"] = f"{up.url}/"
        first = run_crawl(tmp_path, arguments, {**settings, "CLOSESPIDER_PAGECOUNT": 3, **paused})
        log = first.result.stderr
        assert first.result.returncode == 0, log[-3000:]
        assert "closespider_pagecount" in log and down.log.gets() == [], log[-3000:]
        if between is not None:
            between(first)
        second = run_crawl(
            tmp_path, arguments, {**settings, "CLOSESPIDER_PAGECOUNT": 20, **resumed}
        )
    assert second.result.returncode == 0, second.result.stderr[-3000:]
    return first, second, down


def test_requests_held_for_a_failed_robots_txt_are_kept_over_a_jobdir_pause(tmp_path):
    """A crawl paused (its page budget spent) while a request waits for its host's robots.txt
    to be fetched again queues it again: the resumed crawl fetches it."""
    answer = {"robots": Reply(503, "unavailable", "text/plain")}

    def held(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return answer["robots"]
        return Reply(200, html(path, "<p>birds feathers nests</p>"))

    def recovered(paused) -> None:
        log = paused.result.stderr
        assert stat(log, "focused/robots/held_requests") == 1, log[-3000:]
        answer["robots"] = Reply(200, ALLOW_ALL, "text/plain")

    # Held until the failure's time is up, 1 s in the resumed run (see below).
    _, resumed, down = _paused_then_resumed(
        tmp_path, held, {}, {}, {"ROBOTS_RETRY_FAILED_AFTER": 1}, recovered
    )
    log = resumed.result.stderr
    assert down.log.gets() == [(down.host, "/early")], log[-3000:]
    assert f"{down.url}/early" in [page["url"] for page in resumed.pages()]


def test_a_jobdir_resume_goes_on_counting_a_failed_robots_txts_failures(tmp_path):
    """A crawl paused while a host's robots.txt failed, its requests held, counted that host's
    failures in a row from 0 again once resumed: ROBOTS_HOLD_RETRIES more holds of its
    requests at each resume. They are kept with the crawl's state (spider.state)."""
    robots_asked: list[float] = []

    def failed_once(paused) -> None:
        log = paused.result.stderr
        assert len(robots_asked) == 1, log[-3000:]
        assert stat(log, "focused/robots/held_requests") == 1, log[-3000:]

    _, resumed, down = _paused_then_resumed(
        tmp_path,
        failing_robots_txt(robots_asked, failures=100),
        {"ROBOTS_HOLD_RETRIES": 2},
        {"ROBOTS_RETRY_FAILED_AFTER": 60},  # not fetched again before the pause
        {"ROBOTS_RETRY_FAILED_AFTER": 1},
        failed_once,
    )
    log = resumed.result.stderr
    # Held until its first failure's time is up (now 1 s); its second failure holds the
    # request once more; its third, past the 2 retries, refuses it.
    assert len(robots_asked) == 3, log[-3000:]
    assert stat(log, "focused/robots/held_requests") == 2, log[-3000:]
    assert stat(log, "robotstxt/forbidden") == 1, log[-3000:]
    assert down.log.gets() == [], log[-3000:]


def test_a_jobdir_resume_waits_out_a_failed_robots_txts_time(tmp_path):
    """A crawl paused while a host's robots.txt failed, its requests held, downloaded it again
    as soon as the resumed run came to them: a quick pause and resume asked a failing server
    again at once, and used up one of ROBOTS_HOLD_RETRIES. When it may be fetched again is
    kept with the crawl's state (as wall-clock time), and its requests held until then."""
    retry = 10
    robots_asked: list[float] = []

    def in_time(paused) -> None:
        log = paused.result.stderr
        assert len(robots_asked) == 1, log[-3000:]
        assert time.monotonic() - robots_asked[0] < retry / 2, log[-3000:]  # resumed in time

    _, resumed, down = _paused_then_resumed(
        tmp_path,
        failing_robots_txt(robots_asked),
        {"ROBOTS_RETRY_FAILED_AFTER": retry},
        {},
        {},
        in_time,
    )
    log = resumed.result.stderr
    assert len(robots_asked) == 2, log[-3000:]
    assert robots_asked[1] - robots_asked[0] >= retry, log[-3000:]
    assert stat(log, "focused/robots/held_requests") == 1, log[-3000:]
    assert down.log.gets() == [(down.host, "/early")], log[-3000:]


def test_a_crawl_resumed_after_kill_9_waits_out_a_failed_robots_txts_time(tmp_path):
    """A crawl killed outright while a host's robots.txt failed kept neither its failures in a
    row nor when it may be fetched again (``spider.state`` is written at a pause only): the
    resumed run asked the failing server again at once, and counted its failures from 0 again,
    at each crash. They are written through to the JOBDIR as each changes."""
    retry = 6
    robots_asked: list[float] = []
    with Site(failing_robots_txt(robots_asked)) as site:
        arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/a"}
        settings = {"JOBDIR": tmp_path / "job", "RETRY_TIMES": 0}
        settings["ROBOTS_RETRY_FAILED_AFTER"] = retry
        process = crawl_in_background(tmp_path, arguments, settings)
        try:
            for line in process.stderr:  # the seed is held once the failure is said
                if "robots.txt answered 503" in line:
                    break
            time.sleep(0.5)
            process.kill()
            process.wait(timeout=120)
        finally:
            process.kill()
        assert len(robots_asked) == 1, robots_asked
        resumed = run_crawl(tmp_path, arguments, settings)
    log = resumed.result.stderr
    assert resumed.result.returncode == 0, log[-3000:]
    assert len(robots_asked) == 2, log[-3000:]
    assert robots_asked[1] - robots_asked[0] >= retry, log[-3000:]
    assert "robots.txt failed before the crawl stopped: fetched again in " in log, log[-3000:]
    assert stat(log, "focused/robots/held_requests") == 1, log[-3000:]
    assert site.log.gets() == [(site.host, "/a")], log[-3000:]


def _stopped_then_resumed(tmp_path, site: Site, settings: dict, stop_after: float, stopped):
    """A JOBDIR crawl of ``site``'s ``/a`` stopped cleanly by ``CLOSESPIDER_TIMEOUT``
    ``stop_after``, then resumed, with ``settings`` (no retries, ``ROBOTS_HOLD_RETRIES`` 1 but
    where they say otherwise); ``stopped(log, kept)`` is called before the resume with the
    stopped run's log and the failures in a row its JOBDIR kept (``robots_failures``: netloc,
    count). Returns the resumed run."""
    arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/a"}
    settings = {"JOBDIR": tmp_path / "job", "RETRY_TIMES": 0, "ROBOTS_HOLD_RETRIES": 1, **settings}
    run = run_crawl(tmp_path, arguments, {**settings, "CLOSESPIDER_TIMEOUT": stop_after})
    log = run.result.stderr
    assert run.result.returncode == 0, log[-3000:]
    assert "closespider_timeout" in log, log[-3000:]
    with closing(sqlite3.connect(tmp_path / "job" / "counters.sqlite3")) as counters:
        stopped(log, counters.execute("SELECT netloc, failures FROM robots_failures").fetchall())
    return run_crawl(tmp_path, arguments, settings)


def test_a_stop_that_cancels_a_failed_robots_txts_next_read_keeps_its_failures(tmp_path):
    """A clean stop (here CLOSESPIDER_TIMEOUT) ended the robots.txt download of a host whose
    robots.txt had failed, waiting in its slot (a 503's backoff pause), with NotSent: taken as
    read, it reset the host's failures in a row, in the JOBDIR too, and the resumed crawl
    held the host's requests ROBOTS_HOLD_RETRIES times more, asking the failing server again.
    Not sent, it tells nothing of the host: its failure is kept."""
    robots_asked: list[float] = []
    with Site(failing_robots_txt(robots_asked, failures=100)) as site:
        # The 503 pauses the host 4 s; its robots.txt is asked for again after 0.5 s, and
        # waits in its slot for the pause as the crawl stops, at 2.5 s.
        settings = {"RETRY_BACKOFF_BASE": 4, "ROBOTS_RETRY_FAILED_AFTER": 0.5}

        def failure_kept(log: str, kept: list) -> None:
            assert len(robots_asked) == 1, log[-3000:]
            assert stat(log, "focused/robots/failed_retried") == 1, log[-3000:]
            assert kept == [(f"{site.host}:{site.server_address[1]}", 1)], log[-3000:]

        resumed = _stopped_then_resumed(tmp_path, site, settings, 2.5, failure_kept)
    log = resumed.result.stderr
    assert resumed.result.returncode == 1, log[-3000:]  # its only seed refused
    # Its second failure in a row is past ROBOTS_HOLD_RETRIES: its seed refused, not held.
    assert len(robots_asked) == 2, log[-3000:]
    assert stat(log, "focused/robots/held_requests") == 0, log[-3000:]
    assert site.log.gets() == [], log[-3000:]


def test_a_robots_txt_answered_unreadable_at_a_stop_ends_its_failures(tmp_path):
    """A host's robots.txt that failed (a 503), then was answered unreadable (a gzip cut short)
    as the crawl stopped, kept its failure in a row, in the JOBDIR too: no parser, it was taken
    for a download the stop left unsent. The server answered, every URL allowed: the resumed
    crawl counted its next 503 as the second in a row, past ROBOTS_HOLD_RETRIES, and refused
    the host's pages rather than hold them for the robots.txt to be fetched again."""
    robots_asked: list[float] = []

    def respond(method: str, path: str) -> Reply:
        if path != "/robots.txt":
            return Reply(200, html(path, "<p>birds feathers nests</p>"))
        robots_asked.append(time.monotonic())
        if len(robots_asked) == 2:
            time.sleep(3)  # answered once the crawl is stopping
            return Reply(200, b"\x1f\x8b\x08\x00", "text/plain", {"Content-Encoding": "gzip"})
        if len(robots_asked) in (1, 3):
            return FAILED_AT_FIRST[0]
        return Reply(200, ALLOW_ALL, "text/plain")

    with Site(respond) as site:
        # The 503 pauses the host 1 s (RETRY_BACKOFF_BASE); its robots.txt is asked for again
        # then, and answered after the stop, at 2 s.
        settings = {"ROBOTS_RETRY_FAILED_AFTER": 0.5}

        def failure_ended(log: str, kept: list) -> None:
            assert len(robots_asked) == 2, log[-3000:]
            assert robots_asked[1] - robots_asked[0] < 2, log[-3000:]  # asked before the stop
            assert kept == [], log[-3000:]

        resumed = _stopped_then_resumed(tmp_path, site, settings, 2, failure_ended)
    log = resumed.result.stderr
    assert resumed.result.returncode == 0, log[-3000:]
    # Its 503 is the first in a row: the seed held, and fetched once the robots.txt allows it.
    assert len(robots_asked) == 4, log[-3000:]
    assert stat(log, "focused/robots/held_requests") == 1, log[-3000:]
    assert site.log.gets() == [(site.host, "/a")], log[-3000:]


def test_robots_txt_groups_are_matched_against_the_crawlers_product_token(tmp_path):
    """The whole user agent, "focused/0.1 (+topical crawler; Scrapy)", was matched against the
    groups: "crawler" and "Scrapy" were taken for groups of ours, over "*", and a host that
    disallowed them was skipped whole."""
    groups = "User-agent: *\nAllow: /\n\nUser-agent: crawler\nUser-agent: scrapy\nDisallow: /\n"
    groups += "\nUser-agent: focused\nDisallow: /private/\n"

    def site(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(200, groups, "text/plain")
        return Reply(200, html(path, "<p>birds feathers nests</p>"))

    with Site(site) as host:
        seeds = f"{host.url}/public/1,{host.url}/private/1"
        crawl = run_crawl(tmp_path, {"strategy": "bfs", "query": "birds", "seeds": seeds})
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert [path for _, path in host.log.gets()] == ["/public/1"]  # focused's own group


def test_robots_txt_rules_are_matched_against_the_url_as_linked(tmp_path):
    """A link is fetched under its canonical URL (query sorted, session parameters dropped),
    but the site's rules are written for its URLs as it links them: ``/*?sort=`` was matched
    against ``/list?cat=5&sort=price`` and let ``/list?sort=price&cat=5`` through, and
    ``/*sid=`` a link that only its session id made disallowed."""
    rules = "User-agent: *\nDisallow: /*?sort=\nDisallow: /*sid=\n"
    links = [
        "/list?sort=price&cat=5",  # disallowed as linked, not once sorted
        "/story?sid=0123456789abcdef",  # disallowed as linked, not once its sid is dropped
        "/list?cat=7&sort=name",  # allowed as linked
        "/go",  # allowed, and redirects to a disallowed spelling: checked as the server named it
    ]

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(200, rules, "text/plain")
        if path == "/go":
            return Reply(301, headers={"Location": "/list?sort=size&cat=9"})
        anchors = "".join(f"<a href='{link}'>birds {n}</a>" for n, link in enumerate(links))
        return Reply(200, html(path, f"<p>birds feathers nests</p>{anchors}"))

    with Site(respond) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/,{site.url}/?sort=new&c=1"},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    # A seed is checked as the user gave it.
    fetched = sorted(path for _, path in site.log.gets())
    assert fetched == ["/", "/go", "/list?cat=7&sort=name"]
    # The seed and the redirect's target, at download; the links, as each page links them,
    # before they are queued (the host's robots.txt is read by then).
    assert stat(log, "robotstxt/forbidden") == 2
    assert stat(log, "focused/skipped/robots_txt") == 4


def test_a_url_refused_as_one_page_spelled_it_is_fetched_as_another_spells_it(tmp_path):
    """``/story`` linked with a session id (disallowed) from the seed, and without (allowed)
    from ``/a``: refused as first spelled, it was seen, and dropped as a duplicate when found
    as allowed."""
    rules = "User-agent: *\nDisallow: /*sid=\n"
    pages = {"/": ["/story?sid=0123456789abcdef", "/a"], "/a": ["/story"]}

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(200, rules, "text/plain")
        anchors = "".join(f"<a href='{link}'>birds</a>" for link in pages.get(path, []))
        return Reply(200, html(path, f"<p>birds feathers nests</p>{anchors}"))

    with Site(respond) as site:
        crawl = run_crawl(tmp_path, {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"})
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert [path for _, path in site.log.gets()] == ["/", "/a", "/story"]
    assert stat(log, "focused/skipped/robots_txt") == 1


class RobotsTxtWeb:
    """The engine a robots.txt middleware downloads through, in process: each host's robots.txt
    disallows ``/private/``; ``downloads`` counts them by host."""

    def __init__(self) -> None:
        self.downloads: Counter[str] = Counter()
        self.downloader = SimpleNamespace(
            get_slot_key=lambda request: urlparse_cached(request).netloc,
            robots_txt_ended=lambda key: None,
        )

    async def download_async(self, request: Request) -> Response:
        self.downloads[urlparse_cached(request).netloc] += 1
        body = b"User-agent: *\nDisallow: /private/\n" + b"Disallow: /tmp/\n" * 50
        return Response(request.url, body=body, request=request)


def robots_middleware(**settings: object) -> tuple[RobotsTxtMiddleware, RobotsTxtWeb]:
    defaults = {name: getattr(project, name) for name in ("ROBOTS_PARSERS_MAX", "ROBOTS_TEXTS_MAX")}
    crawler = get_crawler(QueueSpider, {"ROBOTSTXT_OBEY": True, **defaults, **settings})
    web = crawler.engine = RobotsTxtWeb()
    return RobotsTxtMiddleware(crawler), web


def private_page_allowed(middleware: RobotsTxtMiddleware, host: str) -> bool:
    page = Request(f"http://{host}/private/1")
    parser = asyncio.run(middleware.robot_parser(page))
    return parser.allowed(page.url, middleware._useragent(page))


def test_a_forgotten_robots_txt_is_parsed_again_from_its_kept_text():
    """A parser is some 16 times its robots.txt (50 KB for 3 KB): ROBOTS_PARSERS_MAX, 10,000 by
    default, held 500 MB of them, and a host whose parser was forgotten had its robots.txt
    downloaded again. Its text, compressed, is kept and parsed again; past ROBOTS_TEXTS_MAX it
    is downloaded again."""
    middleware, web = robots_middleware(ROBOTS_PARSERS_MAX=2, ROBOTS_TEXTS_MAX=3)
    hosts = [f"h{i}.example" for i in range(4)]
    for host in hosts:
        assert not private_page_allowed(middleware, host)
    assert len(middleware._parsers) == 2
    assert len(middleware._texts) == 3  # h1, h2, h3
    assert not private_page_allowed(middleware, "h1.example")  # forgotten, parsed again
    assert middleware._stats.get_value("focused/robots/reparsed") == 1
    assert not private_page_allowed(middleware, "h0.example")  # text forgotten too
    assert web.downloads == Counter(
        {"h0.example": 2, "h1.example": 1, "h2.example": 1, "h3.example": 1}
    )
    assert len(middleware._parsers) == 2 and len(middleware._texts) == 3


def test_a_kept_robots_txt_read_over_24_hours_ago_is_downloaded_again(monkeypatch):
    """RFC 9309 (2.4): a cached robots.txt is used for 24 hours at most."""
    middleware, web = robots_middleware(ROBOTS_PARSERS_MAX=1)
    for host in ("a.example", "b.example", "a.example"):
        assert not private_page_allowed(middleware, host)
    assert web.downloads == Counter({"a.example": 1, "b.example": 1})
    now = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: now + ROBOTS_TXT_LIFE + 1)
    assert not private_page_allowed(middleware, "b.example")
    assert web.downloads == Counter({"a.example": 1, "b.example": 2})


class AnsweringWeb(RobotsTxtWeb):
    """Each host's robots.txt answers as ``answers`` say, one a download in turn, the last for
    every later one: 200 (disallows ``/private/``), another status (the same body), or an
    exception, raised as a download fails."""

    def __init__(self, *answers: int | Exception) -> None:
        super().__init__()
        self.answers = answers

    async def download_async(self, request: Request) -> Response:
        response = await super().download_async(request)
        answer = self.answers[
            min(self.downloads[urlparse_cached(request).netloc], len(self.answers)) - 1
        ]
        if isinstance(answer, Exception):
            raise answer
        return response.replace(status=answer)


def answering_middleware(*answers: int | Exception, **settings: object):
    """The middleware of a crawl whose scheduler holds requests for a failed robots.txt (as
    FocusedScheduler does), each host's robots.txt answering ``answers`` in turn; with its web
    and a clock to move on (``clock.now``)."""
    held = {
        name: getattr(project, name)
        for name in ("ROBOTS_HOLD_RETRIES", "ROBOTS_RETRY_FAILED_AFTER")
    }
    middleware, _ = robots_middleware(**{**held, **settings})
    web = middleware.crawler.engine = AnsweringWeb(*answers)
    web._slot = SimpleNamespace(
        scheduler=SimpleNamespace(holds_for_robots=True),
        nextcall=SimpleNamespace(schedule=lambda: None),
    )
    return middleware, web


def goes(middleware: RobotsTxtMiddleware, url: str) -> str:
    """What becomes of a request for ``url``: "sent", "held" (handed back to the scheduler) or
    "refused" (and why)."""
    try:
        held = asyncio.run(middleware.process_request(Request(url)))
    except IgnoreRequest as refused:
        return f"refused: {refused}"
    return "held" if held is not None else "sent"


@pytest.fixture
def clock(monkeypatch):
    """time.monotonic() as the test moves it on: ``clock.now += seconds``."""
    clock = SimpleNamespace(now=time.monotonic())
    monkeypatch.setattr(time, "monotonic", lambda: clock.now)
    return clock


@pytest.mark.parametrize(
    "failure", [503, DownloadTimeoutError("timed out")], ids=["server_error", "unreachable"]
)
def test_a_robots_txt_in_constant_use_is_read_again_after_24_hours(clock, failure):
    """RFC 9309 (2.4): a robots.txt is used for 24 hours at most, unless it cannot be fetched
    again. A host whose parser was in constant use kept its first robots.txt for the whole
    crawl: only a forgotten parser's text was checked for age. Read again, a robots.txt that
    fails leaves the rules read before in force (not complete disallow, its requests not held),
    until it is fetched again ROBOTS_RETRY_FAILED_AFTER later."""
    middleware, web = answering_middleware(200, failure, 200, ROBOTS_RETRY_FAILED_AFTER=60)
    for step in (ROBOTS_TXT_LIFE / 2, ROBOTS_TXT_LIFE / 2 + 1):
        assert goes(middleware, "http://a.example/private/1") == "refused: Forbidden by robots.txt"
        assert goes(middleware, "http://a.example/public/1") == "sent"
        clock.now += step
    assert web.downloads == Counter({"a.example": 1})
    # Over 24 hours old: read again as the host's next request comes up, which the scheduler
    # holds the host for; a link is checked as it spelled it then. It fails: the rules read
    # before hold, for 60 s.
    linked = Request("http://a.example/public/9", meta={LINKED_URL: "http://a.example/private/9"})
    assert middleware.waits_for_robots(linked) and not middleware.refuses_as_linked(linked)
    assert goes(middleware, "http://a.example/private/2") == "refused: Forbidden by robots.txt"
    assert goes(middleware, "http://a.example/public/2") == "sent"
    assert web.downloads == Counter({"a.example": 2})
    assert middleware._stats.get_value("focused/robots/expired") == 1
    clock.now += 59
    assert goes(middleware, "http://a.example/public/3") == "sent"
    assert web.downloads == Counter({"a.example": 2})
    clock.now += 2
    assert goes(middleware, "http://a.example/public/4") == "sent"
    assert web.downloads == Counter({"a.example": 3})
    assert middleware._stats.get_value("focused/robots/held_requests") is None


class CrawlDelayDroppedWeb(RobotsTxtWeb):
    """Each host's robots.txt asks for a Crawl-delay of 60 s at its first download only."""

    async def download_async(self, request: Request) -> Response:
        response = await super().download_async(request)
        if self.downloads[urlparse_cached(request).netloc] > 1:
            return response
        return response.replace(body=b"User-agent: *\nCrawl-delay: 60\n" + response.body)


def test_a_host_skipped_for_its_crawl_delay_is_crawled_once_it_no_longer_asks_it(clock):
    """A robots.txt read again after its 24 hours (RFC 9309) that no longer asks for a
    Crawl-delay above ROBOTS_CRAWL_DELAY_MAX lets the host's pages be fetched: they stayed
    skipped for the whole crawl, and the robots.txt was downloaded again every day for
    nothing."""
    middleware, _ = robots_middleware(ROBOTS_CRAWL_DELAY_MAX=30)
    web = middleware.crawler.engine = CrawlDelayDroppedWeb()
    web._slot = SimpleNamespace(nextcall=SimpleNamespace(schedule=lambda: None))
    assert goes(middleware, "http://a.example/public/1").startswith(
        "refused: robots.txt Crawl-delay 60 s is above ROBOTS_CRAWL_DELAY_MAX"
    )
    clock.now += ROBOTS_TXT_LIFE + 1
    assert goes(middleware, "http://a.example/public/2") == "sent"
    assert goes(middleware, "http://a.example/private/2") == "refused: Forbidden by robots.txt"
    assert web.downloads == Counter({"a.example": 2})


def test_hosts_skipped_for_their_crawl_delay_are_remembered_as_their_robots_txt_is(caplog):
    """Each host whose robots.txt asked for a Crawl-delay above ROBOTS_CRAWL_DELAY_MAX was kept
    for the whole crawl, however many a wide crawl met: it is remembered while its parser or
    its text is kept, refused and said once meanwhile, and learnt again with its robots.txt."""
    caplog.set_level(logging.INFO, logger=robots.__name__)
    middleware, _ = robots_middleware(
        ROBOTS_CRAWL_DELAY_MAX=30, ROBOTS_PARSERS_MAX=2, ROBOTS_TEXTS_MAX=3
    )
    hosts = [f"h{n}.example" for n in range(10)]
    web = middleware.crawler.engine = CrawlDelayWeb(dict.fromkeys(hosts, (60,)))
    web._slot = SimpleNamespace(nextcall=SimpleNamespace(schedule=lambda: None))
    skipped = "refused: robots.txt Crawl-delay 60 s is above ROBOTS_CRAWL_DELAY_MAX (30 s)"
    for host in hosts:
        assert goes(middleware, f"http://{host}/1") == skipped
    assert sorted(middleware._skipped) == ["h7.example", "h8.example", "h9.example"]
    # h7.example's parser was forgotten, its text kept: parsed again, skipped, not said again.
    assert goes(middleware, "http://h7.example/2") == skipped
    assert middleware._stats.get_value("focused/robots/reparsed") == 1
    # h0.example was forgotten whole: its robots.txt is downloaded again, and says so again.
    assert goes(middleware, "http://h0.example/2") == skipped
    assert web.downloads == Counter({**dict.fromkeys(hosts, 1), "h0.example": 2})
    assert len(middleware._skipped) == 3
    said = Counter(
        line.split(":")[0] for line in caplog.messages if "above ROBOTS_CRAWL_DELAY_MAX" in line
    )
    assert said == Counter({**dict.fromkeys(hosts, 1), "h0.example": 2})


class CrawlDelayWeb(RobotsTxtWeb):
    """Each netloc's robots.txt asks for the Crawl-delays ``delays`` gives it, one a download in
    turn, the last for every later one (None: none; SERVER_ERROR: answered 503)."""

    def __init__(self, delays: dict[str, tuple[float | str | None, ...]]) -> None:
        super().__init__()
        self.delays = delays

    async def download_async(self, request: Request) -> Response:
        response = await super().download_async(request)
        netloc = urlparse_cached(request).netloc
        delays = self.delays[netloc]
        delay = delays[min(self.downloads[netloc], len(delays)) - 1]
        if delay == SERVER_ERROR:
            return response.replace(status=503)
        if delay is None:
            return response
        return response.replace(body=f"User-agent: *\nCrawl-delay: {delay:g}\n".encode())


SERVER_ERROR = "503"


def test_a_request_that_waited_for_a_skipped_hosts_robots_txt_is_refused_once_it_is_forgotten():
    """A host skipped for its Crawl-delay is remembered while its robots.txt is kept: the
    requests that waited for its download, handed its parser, went on after another host's
    read had forgotten it (ROBOTS_PARSERS_MAX; ROBOTS_TEXTS_MAX 0, no text kept), found it no
    longer skipped, and were sent to a host that asked to be fetched once a minute."""
    middleware, _ = robots_middleware(
        ROBOTS_CRAWL_DELAY_MAX=30, ROBOTS_PARSERS_MAX=1, ROBOTS_TEXTS_MAX=0
    )
    web = middleware.crawler.engine = GatedCrawlDelayWeb(
        {"slow.example": (60,), "other.example": (None,)}
    )
    web._slot = SimpleNamespace(nextcall=SimpleNamespace(schedule=lambda: None))

    async def goes_on(url: str) -> str:
        try:
            await middleware.process_request(Request(url))
        except IgnoreRequest as refused:
            return f"refused: {refused}"
        return "sent"

    async def crawl() -> list[str]:
        first = asyncio.ensure_future(goes_on("http://slow.example/1"))
        await asyncio.sleep(0)  # its robots.txt downloading
        other = asyncio.ensure_future(goes_on("http://other.example/1"))
        waiting = asyncio.ensure_future(goes_on("http://slow.example/2"))
        await asyncio.sleep(0)
        web.gate.set()  # both read at once: slow.example's, then other.example's
        return await asyncio.gather(first, waiting, other)

    skipped = "refused: robots.txt Crawl-delay 60 s is above ROBOTS_CRAWL_DELAY_MAX (30 s)"
    assert asyncio.run(crawl()) == [skipped, skipped, "sent"]
    assert web.downloads == Counter({"slow.example": 1, "other.example": 1})


class GatedCrawlDelayWeb(CrawlDelayWeb):
    """``CrawlDelayWeb``, whose robots.txt are answered only once ``gate`` is set."""

    def __init__(self, delays: dict[str, tuple[float | str | None, ...]]) -> None:
        super().__init__(delays)
        self.gate = asyncio.Event()

    async def download_async(self, request: Request) -> Response:
        await self.gate.wait()
        return await super().download_async(request)


def paced_slot(delays: dict[str, tuple[float | str | None, ...]], **settings: object):
    """A middleware whose robots.txt ask for ``delays`` (``CrawlDelayWeb``), over a downloader
    (``PoliteDownloader``) with the slot of ``a.example`` made as Scrapy makes it."""
    middleware, _ = robots_middleware(
        ROBOTS_CRAWL_DELAY_MAX=project.ROBOTS_CRAWL_DELAY_MAX, **settings
    )
    web = middleware.crawler.engine = CrawlDelayWeb(delays)
    web._slot = SimpleNamespace(nextcall=SimpleNamespace(schedule=lambda: None))
    downloader = web.downloader = PoliteDownloader(middleware.crawler)
    user = downloader.per_slot_settings.get("a.example", {})
    downloader.slots["a.example"] = Slot(
        user.get("concurrency", downloader.domain_concurrency),
        user.get("delay", downloader._delay),
        downloader._jitter,
    )
    return middleware, web, downloader


def test_a_robots_txt_read_again_sets_its_hosts_crawl_delay_anew(clock):
    """A robots.txt read again (after its 24 hours) that lowered or dropped its Crawl-delay left
    the old, longer one in force for the whole crawl: the larger of the two was kept."""
    middleware, web, downloader = paced_slot({"a.example": (10, 2, None)})
    slot = downloader.slots["a.example"]
    assert goes(middleware, "http://a.example/1") == "sent"
    assert (slot.delay, slot.concurrency, slot.jitter) == (10, 1, 0)
    clock.now += ROBOTS_TXT_LIFE + 1
    assert goes(middleware, "http://a.example/2") == "sent"
    assert slot.delay == 2 and downloader.per_slot_settings["a.example"]["delay"] == 2
    assert "a.example" in downloader.paced_from_end
    clock.now += ROBOTS_TXT_LIFE + 1
    # No Crawl-delay: the slot is as Scrapy makes it again.
    assert goes(middleware, "http://a.example/3") == "sent"
    assert (slot.delay, slot.concurrency, slot.jitter) == (0, 8, 0.5)
    assert "a.example" not in downloader.per_slot_settings
    assert "a.example" not in downloader.paced_from_end
    assert web.downloads == Counter({"a.example": 3})
    assert middleware._stats.get_value("focused/robots/crawl_delay_hosts") == 1


def test_a_failed_read_keeps_its_hosts_crawl_delay():
    """A robots.txt downloaded again (its text forgotten) that fails is no robots.txt asking for
    no Crawl-delay: the one read before holds."""
    middleware, _, downloader = paced_slot(
        {"a.example": (10, SERVER_ERROR), "b.example": (None,)},
        ROBOTS_PARSERS_MAX=1,
        ROBOTS_TEXTS_MAX=0,
    )
    assert goes(middleware, "http://a.example/1") == "sent"
    assert goes(middleware, "http://b.example/1") == "sent"  # a.example forgotten
    assert goes(middleware, "http://a.example/2") == "refused: Forbidden by robots.txt"
    slot = downloader.slots["a.example"]
    assert (slot.delay, slot.concurrency, slot.jitter) == (10, 1, 0)


def test_a_slots_crawl_delay_is_the_largest_its_hosts_ask_now(clock):
    """Two ports of one host share its slot: its delay is the larger of what each asks as each
    is read again, and never below a delay of the user's (DOWNLOAD_SLOTS)."""
    middleware, _, downloader = paced_slot(
        {"a.example": (10, 1), "a.example:8080": (5, None)},
        DOWNLOAD_SLOTS={"a.example": {"delay": 3, "concurrency": 2}},
    )
    slot = downloader.slots["a.example"]
    assert goes(middleware, "http://a.example/1") == "sent"
    assert goes(middleware, "http://a.example:8080/1") == "sent"
    assert (slot.delay, slot.concurrency) == (10, 2)  # the user's concurrency kept
    clock.now += ROBOTS_TXT_LIFE + 1
    assert goes(middleware, "http://a.example/2") == "sent"
    assert slot.delay == 5  # a.example:8080 asks for 5 s still
    clock.now += ROBOTS_TXT_LIFE + 1
    assert goes(middleware, "http://a.example:8080/2") == "sent"
    assert (slot.delay, slot.concurrency) == (3, 2)
    # A new slot, after Scrapy dropped this one idle, is made so too.
    assert downloader.per_slot_settings["a.example"] == {"delay": 3, "concurrency": 2, "jitter": 0}


class SlottedWeb(CrawlDelayWeb):
    """``CrawlDelayWeb``, each robots.txt reaching its slot in the downloader as it is sent;
    ``robots_delays`` has that slot's delay then, by netloc, one a download in turn."""

    def __init__(self, delays: dict[str, tuple[float | str | None, ...]]) -> None:
        super().__init__(delays)
        self.robots_delays: dict[str, list[float]] = {}

    async def download_async(self, request: Request) -> Response:
        slot = self.downloader._get_slot(request)[1]
        self.robots_delays.setdefault(urlparse_cached(request).netloc, []).append(slot.delay)
        return await super().download_async(request)


def slotted(delays: dict[str, tuple[float | str | None, ...]], **settings: object):
    """The robots.txt middleware of a downloader (``PoliteDownloader``) that makes each slot as
    a request reaches it (``_get_slot``) and drops those idle as Scrapy does (``_slot_gc``), the
    robots.txt asking for ``delays`` (``SlottedWeb``); with its web and downloader."""
    crawler = get_crawler(
        QueueSpider,
        {
            "ROBOTSTXT_OBEY": True,
            "DOWNLOADER_MIDDLEWARES_BASE": {"focused.robots.RobotsTxtMiddleware": 100},
            **{name: getattr(project, name) for name in ("ROBOTS_PARSERS_MAX", "ROBOTS_TEXTS_MAX")},
            "ROBOTS_CRAWL_DELAY_MAX": project.ROBOTS_CRAWL_DELAY_MAX,
            **settings,
        },
    )
    web = crawler.engine = SlottedWeb(delays)
    web._slot = SimpleNamespace(nextcall=SimpleNamespace(schedule=lambda: None))
    downloader = web.downloader = PoliteDownloader(crawler)
    downloader._start_slot_gc = lambda: None  # the test drops idle slots itself: _slot_gc()
    [middleware] = [
        mw for mw in downloader.middleware.middlewares if isinstance(mw, RobotsTxtMiddleware)
    ]
    return middleware, web, downloader


def sent(middleware: RobotsTxtMiddleware, downloader: PoliteDownloader, url: str) -> Slot:
    """The slot a request for ``url`` reaches once the middleware lets it go."""
    assert goes(middleware, url) == "sent"
    return downloader._get_slot(Request(url))[1]


@pytest.fixture
def slot_clock(clock, monkeypatch):
    """``clock``, read by the downloader's slots and Retry-After pauses too."""
    for module in (downloader_module, retryafter, focused.downloader):
        monkeypatch.setattr(module, "monotonic", lambda: clock.now)
    return clock


def test_a_crawl_delay_goes_with_its_slot_and_holds_when_it_is_made_again(slot_clock, caplog):
    """Scrapy drops a slot idle for a minute past its delay. What paced it (the Crawl-delay each
    of its netlocs asks, the settings a new slot takes) was kept for every host the crawl ever
    met that asked for one, some 300 bytes each, however few hosts it crawled at a time. It goes
    with the slot, and the slot made again is paced as before: by its netloc's robots.txt,
    parsed again from its text if need be (or, read again after 24 hours, the rules read
    before, its robots.txt too), and by each netloc of the slot as it comes up."""
    caplog.set_level(logging.INFO, logger=robots.__name__)
    hosts = [f"h{n}.example" for n in range(20)]
    middleware, web, downloader = slotted(
        {**dict.fromkeys(hosts, (2,)), "h0.example:8080": (5,)}, ROBOTS_PARSERS_MAX=5
    )
    for host in hosts:
        slot = sent(middleware, downloader, f"http://{host}/1")
        assert (slot.delay, slot.concurrency, slot.jitter) == (2, 1, 0)
    assert sent(middleware, downloader, "http://h0.example:8080/1").delay == 5
    slot_clock.now += 65  # a minute past the last robots.txt read and its delay: all idle
    downloader._slot_gc()
    assert not downloader.slots
    kept = [middleware._slot_asks, middleware._slot_delays]
    kept += [downloader.per_slot_settings, downloader.paced_from_end]
    assert [len(entries) for entries in kept] == [0, 0, 0, 0]
    # h0.example's parser was forgotten (ROBOTS_PARSERS_MAX): parsed again from its text.
    slot = sent(middleware, downloader, "http://h0.example/2")
    assert middleware._stats.get_value("focused/robots/reparsed") >= 1
    assert (slot.delay, slot.concurrency, slot.jitter) == (2, 1, 0)
    assert "h0.example" in downloader.paced_from_end
    assert sent(middleware, downloader, "http://h0.example:8080/2") is slot
    assert slot.delay == 5
    slot_clock.now += ROBOTS_TXT_LIFE
    downloader._slot_gc()
    assert sent(middleware, downloader, "http://h1.example/2").delay == 2
    assert web.robots_delays["h1.example"] == [downloader._delay, 2]
    # Neither counted nor said again.
    assert middleware._stats.get_value("focused/robots/crawl_delay_hosts") == len(hosts)
    said = [line for line in caplog.messages if line.startswith("h1.example: robots.txt asks")]
    assert len(said) == 1, said


@pytest.mark.parametrize("kept", [None, 2])
def test_crawl_delay_hosts_counts_a_host_once_however_often_it_is_forgotten(
    slot_clock, monkeypatch, kept
):
    """focused/robots/crawl_delay_hosts counted a host again each time it came back with both
    its slot (dropped idle) and its robots.txt text (ROBOTS_TEXTS_MAX) forgotten, and its
    robots.txt downloaded again. The hosts counted are kept, up to CRAWL_DELAY_HOSTS_KEPT (past
    them, one coming back so counts again)."""
    if kept is not None:
        monkeypatch.setattr(robots, "CRAWL_DELAY_HOSTS_KEPT", kept)
    hosts = [f"h{n}.example" for n in range(4)]
    middleware, web, downloader = slotted(
        dict.fromkeys(hosts, (2,)), ROBOTS_PARSERS_MAX=1, ROBOTS_TEXTS_MAX=1
    )
    for turn in range(3):
        for host in hosts:
            assert sent(middleware, downloader, f"http://{host}/{turn}").delay == 2
        slot_clock.now += 65
        downloader._slot_gc()
        assert not downloader.slots
    assert web.downloads == Counter(dict.fromkeys(hosts, 3))  # forgotten whole each time
    counted = middleware._stats.get_value("focused/robots/crawl_delay_hosts")
    if kept is None:
        assert counted == len(hosts)
    else:  # h0.example and h1.example kept; the others counted at each of their 3 reads
        assert counted == 2 + 2 * 3
        assert len(middleware._crawl_delay_hosts) == 2


def test_a_slot_whose_robots_txt_fails_keeps_its_crawl_delay_until_it_is_read(slot_clock):
    """A robots.txt that fails keeps the Crawl-delay read before: so does its slot, dropped
    idle meanwhile (its requests refused or held), until it is read again, paced by it."""
    middleware, web, downloader = slotted(
        {"a.example": (2, SERVER_ERROR, 2), "b.example": (None,)},
        ROBOTS_PARSERS_MAX=1,
        ROBOTS_TEXTS_MAX=0,
        ROBOTS_RETRY_FAILED_AFTER=300,
    )
    assert sent(middleware, downloader, "http://a.example/1").delay == 2
    sent(middleware, downloader, "http://b.example/1")  # a.example forgotten
    assert goes(middleware, "http://a.example/2") == "refused: Forbidden by robots.txt"
    slot_clock.now += 65
    downloader._slot_gc()
    assert not downloader.slots and downloader.per_slot_settings["a.example"]["delay"] == 2
    slot_clock.now += 300
    assert sent(middleware, downloader, "http://a.example/3").delay == 2
    assert web.robots_delays["a.example"] == [0, 2, 2]
    assert middleware._stats.get_value("focused/robots/crawl_delay_hosts") == 1
    slot_clock.now += 65
    downloader._slot_gc()  # read: forgotten with its slot
    assert "a.example" not in downloader.per_slot_settings


def test_a_crawl_delay_lowered_or_dropped_leaves_autothrottle_its_delay(clock):
    """Under AutoThrottle a slot's delay is AutoThrottle's, raised to the Crawl-delay (after
    each response): a robots.txt read again that lowered its Crawl-delay set the slot to it,
    and one that dropped it to AUTOTHROTTLE_START_DELAY, whatever AutoThrottle had found the
    host to need, until its next response. The delay is AutoThrottle's to lower, as it lowers
    any."""
    middleware, _, downloader = slotted(
        {"a.example": (10, 2, None)},
        AUTOTHROTTLE_ENABLED=True,
        AUTOTHROTTLE_START_DELAY=5,
    )
    throttle = AutoThrottle(middleware.crawler)
    throttle._spider_opened(None)  # new slots start at 5 s
    slot = sent(middleware, downloader, "http://a.example/1")

    def answered(latency: float) -> None:  # as the downloader signals a response
        page = Request("http://a.example/", meta={"download_slot": "a.example"})
        page.meta["download_latency"] = latency
        response = Response(page.url, request=page)
        throttle._response_downloaded(response, page, None)
        middleware._keep_crawl_delay(response, page)

    answered(8)  # a slow host: AutoThrottle's 9 s, raised to the Crawl-delay
    assert slot.delay == 10
    clock.now += ROBOTS_TXT_LIFE + 1
    assert sent(middleware, downloader, "http://a.example/2") is slot  # it asks for 2 s now
    assert slot.delay == 10
    answered(8)
    assert slot.delay == 9
    clock.now += ROBOTS_TXT_LIFE + 1
    assert sent(middleware, downloader, "http://a.example/3") is slot  # and none
    assert (slot.delay, slot.concurrency, slot.jitter) == (9, 8, 0.5)


def test_a_retry_after_pause_outlasts_a_crawl_delay_lowered_meanwhile(slot_clock):
    """A Retry-After pause keeps its idle slot from Scrapy's clean-up by the slot's delay (a
    slot goes a minute past its last send and its delay): a Crawl-delay lowered meanwhile, by
    a robots.txt read again whose download overlapped the page answered 429 or 503
    (DOWNLOAD_SLOTS gives the host a concurrency of 2), had the slot dropped before the pause
    ended, and the hold with it; the host's next request, in a new slot, went at once."""
    middleware, _, downloader = slotted(
        {"a.example": (100, 1)},
        ROBOTS_CRAWL_DELAY_MAX=120,
        RETRY_AFTER_MAX=600,
        DOWNLOAD_SLOTS={"a.example": {"concurrency": 2}},
    )
    slot = sent(middleware, downloader, "http://a.example/1")
    assert (slot.delay, slot.concurrency) == (100, 2)
    slot.lastseen = slot_clock.now
    slot_clock.now += ROBOTS_TXT_LIFE + 1  # its robots.txt is read again as the next page...
    pauses = RetryAfterMiddleware.from_crawler(middleware.crawler)
    page = Request("http://a.example/2", meta={"download_slot": "a.example"})
    answer = Response(page.url, status=503, headers={"Retry-After": "300"}, request=page)

    async def answered() -> None:  # a pause is a call later: in an event loop
        pauses.response_downloaded(answer, page)

    asyncio.run(answered())  # ...is answered 503: no request to the host for 300 s
    assert slot.latercall is not None
    assert goes(middleware, "http://a.example/3") == "sent"  # it asks for 1 s now
    assert slot.delay == 1
    slot_clock.now += 270
    downloader._slot_gc()
    assert downloader._get_slot(Request("http://a.example/3"))[1] is slot
    assert slot.latercall is not None  # still held


def test_a_pause_kept_at_a_jobdir_pause_outlasts_a_crawl_delay_lowered_meanwhile(
    slot_clock, tmp_path
):
    """A JOBDIR pause keeps when each host may next be sent a request: its slot's last send
    and delay, which a Retry-After pause stretches over the pause. A Crawl-delay lowered
    meanwhile (a robots.txt read again, its download overlapping the page answered 429 or 503)
    cut that short: the resumed crawl sent to the host before the pause it was asked for
    ended, by as much as the delay went down."""
    middleware, _, downloader = slotted(
        {"a.example": (100, 1)},
        ROBOTS_CRAWL_DELAY_MAX=120,
        RETRY_AFTER_MAX=600,
        DOWNLOAD_SLOTS={"a.example": {"concurrency": 2}},
        JOBDIR=str(tmp_path),
        DOWNLOADER_MIDDLEWARES_BASE={
            "focused.robots.RobotsTxtMiddleware": 100,
            "focused.retryafter.RetryAfterMiddleware": 555,
        },
    )
    slot = sent(middleware, downloader, "http://a.example/1")
    slot.lastseen = slot_clock.now
    slot_clock.now += ROBOTS_TXT_LIFE + 1  # its robots.txt is read again as the next page...
    [pauses] = [mw for mw in downloader.middleware.middlewares if mw is not middleware]
    page = Request("http://a.example/2", meta={"download_slot": "a.example"})
    answer = Response(page.url, status=503, headers={"Retry-After": "300"}, request=page)

    async def answered() -> None:  # a pause is a call later: in an event loop
        pauses.response_downloaded(answer, page)

    asyncio.run(answered())  # ...is answered 503: no request to the host for 300 s
    assert goes(middleware, "http://a.example/3") == "sent"  # it asks for 1 s now
    assert slot.delay == 1
    slot_clock.now += 100  # the crawl is paused 200 s before the pause ends
    saved = tmp_path / focused.downloader.PAUSED_HOSTS_FILE
    downloader._save_paused_hosts(saved)
    [(_, seconds)] = json.loads(saved.read_text()).values()
    assert seconds == pytest.approx(200)


def test_rules_kept_past_a_failure_outlive_other_hosts_parsers(clock):
    """The rules that hold past a failure to read a robots.txt again after its 24 hours hold
    until it is fetched again, whatever other hosts come up meanwhile: forgotten past
    ROBOTS_PARSERS_MAX (their text went as they were set aside), the host's next request
    downloaded its robots.txt again at once, and that failure disallowed and held the host."""
    middleware, web = answering_middleware(
        200, 503, ROBOTS_RETRY_FAILED_AFTER=60, ROBOTS_PARSERS_MAX=2
    )
    assert goes(middleware, "http://a.example/public/1") == "sent"
    clock.now += ROBOTS_TXT_LIFE + 1
    assert goes(middleware, "http://a.example/public/2") == "sent"  # the old rules hold
    for host in "bcd":
        assert goes(middleware, f"http://{host}.example/public/1") == "sent"
    clock.now += 30
    assert goes(middleware, "http://a.example/public/3") == "sent"
    assert goes(middleware, "http://a.example/private/3") == "refused: Forbidden by robots.txt"
    assert web.downloads["a.example"] == 2
    # Once its time is up it is read again (and fails again: the old rules hold once more).
    clock.now += 31
    assert goes(middleware, "http://a.example/public/4") == "sent"
    assert web.downloads["a.example"] == 3
    assert middleware._stats.get_value("focused/robots/held_requests") is None


def test_rules_kept_past_a_failure_hold_again_once_their_parser_is_forgotten(clock):
    """Once the rules kept past a failed read reached their time to be fetched again, their
    parser could be forgotten among ROBOTS_PARSERS_MAX others before the host's next request:
    that read, failing again, had no rules to keep, and disallowed and held the whole host.
    Their text is kept (ROBOTS_TEXTS_MAX), parsed again as the host comes up."""
    middleware, web = answering_middleware(
        200, 503, ROBOTS_RETRY_FAILED_AFTER=60, ROBOTS_PARSERS_MAX=2
    )
    assert goes(middleware, "http://a.example/public/1") == "sent"
    clock.now += ROBOTS_TXT_LIFE + 1
    assert goes(middleware, "http://a.example/public/2") == "sent"  # the old rules hold
    clock.now += 61
    for host in "bcd":
        assert goes(middleware, f"http://{host}.example/public/1") == "sent"
    assert "a.example" not in middleware._parsers
    assert goes(middleware, "http://a.example/public/3") == "sent"  # and hold again
    assert goes(middleware, "http://a.example/private/3") == "refused: Forbidden by robots.txt"
    assert web.downloads["a.example"] == 3
    assert middleware._stats.get_value("focused/robots/kept_past_failure") == 2
    assert middleware._stats.get_value("focused/robots/held_requests") is None


def test_a_robots_txt_being_read_is_not_set_aside_as_old_rules(clock):
    """A robots.txt read from another process of a shared crawl, with moments of its life left
    in Redis, could expire while its waiters were let go: the next request set the download
    under way aside as the host's old rules, to be handed out as a parser if the next read
    failed."""
    middleware, _ = answering_middleware(200)
    reading: Deferred = Deferred()
    middleware._parsers["a.example"] = reading
    middleware._expires_at["a.example"] = clock.now - 1
    middleware._set_aside_if_expired("a.example")
    assert "a.example" not in middleware._old_rules
    assert middleware._parsers["a.example"] is reading


def test_a_failed_hosts_failures_in_a_row_outlive_its_forgotten_parser(clock):
    """A host past ROBOTS_HOLD_RETRIES has its requests refused; once its failure's time was
    up, its parser could be forgotten among ROBOTS_PARSERS_MAX others before its next request,
    its failures with it, and that request, its robots.txt failing again, was held again (up
    to ROBOTS_HOLD_RETRIES times ROBOTS_RETRY_FAILED_AFTER, 15 minutes)."""
    middleware, web = answering_middleware(
        503, ROBOTS_PARSERS_MAX=1, ROBOTS_HOLD_RETRIES=1, ROBOTS_RETRY_FAILED_AFTER=10
    )
    assert goes(middleware, "http://down.example/1") == "held"
    clock.now += 11
    assert goes(middleware, "http://down.example/1") == "refused: Forbidden by robots.txt"
    clock.now += 11
    web.answers = (200,)
    assert goes(middleware, "http://up.example/1") == "sent"  # down.example's parser forgotten
    assert "down.example" not in middleware._parsers
    web.answers = (503,)
    assert goes(middleware, "http://down.example/1") == "refused: Forbidden by robots.txt"
    assert web.downloads["down.example"] == 3
    assert middleware._stats.get_value("focused/robots/held_requests") == 1


def test_a_failure_saved_at_a_jobdir_pause_holds_in_the_resumed_run(clock, monkeypatch):
    """What a resumed run needs of each failed robots.txt is in spider.state: when it may be
    fetched again (wall-clock time: a new process has a monotonic clock of its own), why, and
    whether the host is there; its requests are held, or refused, until then, as before the
    pause, and it is fetched again no sooner."""
    wall = SimpleNamespace(now=time.time())
    monkeypatch.setattr(time, "time", lambda: wall.now)
    state: dict = {}
    paused, web = answering_middleware(ROBOTS_RETRY_FAILED_AFTER=60)
    paused.crawler.spider = SimpleNamespace(state=state)
    failures = {
        "down.example": 503,
        "slow.example": DownloadTimeoutError("timed out"),
        "gone.example": CannotResolveHostError("gone.example"),
    }
    for host, failure in failures.items():
        web.answers = (failure,)
        assert goes(paused, f"http://{host}/1") == (
            "refused: Forbidden by robots.txt, which could not be fetched: gone.example"
            if host == "gone.example"
            else "held"
        )
    resumed, web = answering_middleware(200, ROBOTS_RETRY_FAILED_AFTER=60)
    resumed.crawler.spider = SimpleNamespace(state=pickle.loads(pickle.dumps(state)))
    clock.now += 1000
    wall.now += 30
    assert goes(resumed, "http://down.example/2") == "held"
    assert goes(resumed, "http://slow.example/2") == "held"
    assert resumed.holding_until("slow.example") == clock.now + 30
    assert goes(resumed, "http://gone.example/2") == (
        "refused: Forbidden by robots.txt, which could not be fetched: gone.example"
    )
    assert not web.downloads
    clock.now += 31
    wall.now += 31
    for host in failures:
        assert goes(resumed, f"http://{host}/3") == "sent"
    assert web.downloads == Counter(dict.fromkeys(failures, 1))
    assert not resumed.crawler.spider.state["robots_retry"]  # read: none to restore again


def test_failure_records_are_bounded_and_cleared_once_robots_txt_is_read(clock, monkeypatch):
    monkeypatch.setattr(robots, "FAILURES_KEPT", 3)
    middleware, _ = answering_middleware(503, 200, ROBOTS_RETRY_FAILED_AFTER=10)
    for n in range(5):
        assert goes(middleware, f"http://h{n}.example/1") == "held"
    assert list(middleware._failures) == ["h2.example", "h3.example", "h4.example"]
    clock.now += 11
    assert goes(middleware, "http://h4.example/1") == "sent"
    assert list(middleware._failures) == ["h2.example", "h3.example"]


def test_no_robots_txt_text_is_kept_with_robots_texts_max_0():
    middleware, web = robots_middleware(ROBOTS_PARSERS_MAX=1, ROBOTS_TEXTS_MAX=0)
    for host in ("a.example", "b.example", "a.example"):
        assert not private_page_allowed(middleware, host)
    assert web.downloads == Counter({"a.example": 2, "b.example": 1})
    assert not middleware._texts


def test_a_forgotten_robots_txt_parser_is_freed_without_the_cyclic_collector():
    """Protego's rule sets point back at their parser: a parser forgotten was garbage that only
    a full collection freed (49 KB for a robots.txt of 3 KB), and a crawl's are rare, so that
    ROBOTS_PARSERS_MAX bounded the parsers kept but not their memory."""
    middleware, _ = robots_middleware(ROBOTS_PARSERS_MAX=1)
    gc.disable()
    try:
        assert not private_page_allowed(middleware, "a.example")
        forgotten = weakref.ref(middleware._parsers["a.example"].rp)
        assert not private_page_allowed(middleware, "b.example")
        assert "a.example" not in middleware._parsers
        assert forgotten() is None
    finally:
        gc.enable()
    assert not private_page_allowed(middleware, "a.example")  # parsed again, rules and all


def test_a_failed_robots_txt_is_not_fetched_again_sooner_for_its_parser_being_forgotten(tmp_path):
    """A failed robots.txt is fetched again after ROBOTS_RETRY_FAILED_AFTER, not before: a host
    whose parser, used last as it failed (its requests held meanwhile, not checked), was
    forgotten among ROBOTS_PARSERS_MAX others lost its failure, and its next link had the
    robots.txt of a server just answering 503 fetched again at once, its failures in a row
    counted from 0 again (held past ROBOTS_HOLD_RETRIES while hosts kept coming)."""

    def plain(method: str, path: str) -> Reply:
        return Reply(200, html(path, "<p>birds feathers nests</p>"))

    with Site(plain) as one, Site(plain) as two, Site(plain) as three:
        crawl, down, robots_asked = crawl_past_a_failed_robots_txt(
            tmp_path,
            settings={"ROBOTS_RETRY_FAILED_AFTER": 4, "ROBOTS_PARSERS_MAX": 2},
            others="".join(f"<a href='{site.url}/'>other</a>" for site in (one, two, three)),
            slow=1.5,  # its other hosts read meanwhile, the failure's time not up
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert stat(log, "focused/robots/forgotten") >= 2, log[-3000:]
    assert len(robots_asked) == 2, log[-3000:]
    assert robots_asked[1] - robots_asked[0] >= 4, log[-3000:]
    assert sorted(down.log.gets()) == [(down.host, "/early"), (down.host, "/late")], log[-3000:]
    assert stat(log, "focused/robots/failed_retried") == 1


class NotFoundWeb(RobotsTxtWeb):
    """Each host answers its robots.txt with a 404 page of 30 KB, as sites without one do."""

    async def download_async(self, request: Request) -> Response:
        netloc = urlparse_cached(request).netloc
        self.downloads[netloc] += 1
        words = " ".join(f"{netloc}-{n * 7919 % 100_003}" for n in range(2000))
        body = f"<html><body><h1>Page not found</h1><p>{words}</p></body></html>".encode()
        return Response(request.url, status=404, body=body, request=request)


def test_a_robots_txt_without_rules_keeps_no_text_of_its_page():
    """A host without a robots.txt answers with its 404 page (or redirects to its home page),
    as many do: some 10 KB compressed, kept whole for each of ROBOTS_TEXTS_MAX hosts (1 GB for
    100,000), for rules it has none of. Parsed again, such a host allows every URL still."""
    middleware, _ = robots_middleware(ROBOTS_PARSERS_MAX=1)
    web = middleware.crawler.engine = NotFoundWeb()
    hosts = [f"h{i}.example" for i in range(20)]
    for host in hosts:
        assert private_page_allowed(middleware, host)
    kept = sum(len(text) for _, text in middleware._texts.values())
    assert len(middleware._texts) == 20 and kept < 20 * 100, kept
    assert private_page_allowed(middleware, "h0.example")  # parsed again
    assert middleware._stats.get_value("focused/robots/reparsed") == 1
    assert web.downloads["h0.example"] == 1


def test_requests_held_for_a_failed_robots_txt_go_within_the_host_window(tmp_path):
    """HOST_WINDOW 2, one request at a time: the four pages of a host asked for while its
    robots.txt failed, held meanwhile, went back to back once it was read, each handed out
    again past the window while pages of other hosts were queued."""
    log = FetchLog()
    robots_asked: list[float] = []
    with (
        Site(failing_robots_txt(robots_asked), "127.0.0.2", log) as down,
        Site(None, "127.0.0.3", log) as other,
    ):

        def linking(method: str, path: str) -> Reply:
            links = ""
            if path == "/":
                links = "".join(f"<a href='{down.url}/{n}'>down</a>" for n in range(4))
                links += f"<a href='{other.url}/'>other</a>"
            if path in ("/", "/home"):
                links += "".join(f"<a href='/{n}'>page</a>" for n in range(12))
            time.sleep(0.15)
            return Reply(200, html(path, f"<p>birds feathers nests</p>{links}"))

        other.respond = lambda method, path: linking(method, "/home" if path == "/" else path)
        with Site(linking, "127.0.0.4", log) as up:
            crawl = run_crawl(
                tmp_path,
                {"strategy": "bfs", "query": "birds", "seeds": f"{up.url}/"},
                {
                    "RETRY_TIMES": 0,
                    "ROBOTS_RETRY_FAILED_AFTER": 1.5,
                    "HOST_WINDOW": 2,
                    "CONCURRENT_REQUESTS": 1,
                },
            )
    log_text = crawl.result.stderr
    assert crawl.result.returncode == 0, log_text[-3000:]
    assert stat(log_text, "focused/robots/held_requests") == 4, log_text[-3000:]
    fetched = [host for host, _ in log.gets()]
    assert fetched.count(down.host) == 4, fetched
    # Not two of its pages one after the other (the other hosts' may be: a hold takes a turn).
    assert (down.host, down.host) not in set(pairwise(fetched)), fetched


class GatedWeb(RobotsTxtWeb):
    """``RobotsTxtWeb``, the robots.txt of ``slow`` answered only once ``gate`` is set."""

    def __init__(self, slow: str) -> None:
        super().__init__()
        self.slow = slow
        self.gate = asyncio.Event()

    async def download_async(self, request: Request) -> Response:
        if urlparse_cached(request).netloc == self.slow:
            await self.gate.wait()
        return await super().download_async(request)


def test_a_robots_txt_parsed_again_is_not_forgotten_before_its_request_uses_it():
    """ROBOTS_PARSERS_MAX 1, one host's robots.txt still downloading: another host's parser,
    parsed again from its kept text as a link to it came up, was forgotten at once (the only
    one that could go past the bound), and its robots.txt was downloaded again. A crawl of a
    slow host and a fast one fetched the fast one's twice on a loaded machine
    (tests/test_politeness.py)."""
    middleware, _ = robots_middleware(ROBOTS_PARSERS_MAX=1)
    web = middleware.crawler.engine = GatedWeb("slow.example")

    async def crawl() -> None:
        for host in ("fast.example", "other.example"):  # fast.example's parser forgotten
            await middleware.robot_parser(Request(f"http://{host}/"))
        slow = asyncio.ensure_future(middleware.robot_parser(Request("http://slow.example/")))
        await asyncio.sleep(0)  # its robots.txt downloading
        for page in ("/1", "/private/1", "/2"):
            request = Request(f"http://fast.example{page}")
            parser = await middleware.robot_parser(request)
            allowed = parser.allowed(request.url, middleware._useragent(request))
            assert allowed == (page != "/private/1")
        web.gate.set()
        await slow

    asyncio.run(crawl())
    assert web.downloads == Counter(
        dict.fromkeys(("fast.example", "other.example", "slow.example"), 1)
    )
    assert middleware._stats.get_value("focused/robots/reparsed") == 1
    assert list(middleware._parsers) == ["slow.example"]  # within the bound once it is read
