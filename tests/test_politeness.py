"""A robots.txt Crawl-delay paces its host (focused.robots); a 429/503 pauses its host before
the retry, as long as its Retry-After asks, else longer at each in a row (focused.retryafter).
Scrapy ignores all three."""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import ExitStack, closing
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from types import SimpleNamespace

import pytest
from scrapy import Request
from scrapy.core.downloader import Slot
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from focused.downloader import PAUSED_HOSTS_FILE, PoliteDownloader
from focused.errors import counted
from focused.retryafter import RetryAfterMiddleware, backoff_seconds, retry_after_seconds
from tests.conftest import REPO, Crawl, crawl_args, crawl_env, run_crawl, scrapy_command
from tests.sites import FetchLog, Gate, KeepAliveSite, Reply, Site, html
from tests.test_canonical import stat

PAGES = [f"/p{n}" for n in range(1, 5)]


def pages_site(robots: str):
    """A seed page / linking to four pages, behind the given robots.txt."""

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(200, robots, "text/plain")
        links = " ".join(f'<a href="{page}">birds {page}</a>' for page in PAGES)
        if path != "/":
            links = ""
        return Reply(200, html(f"birds {path}", f"<p>birds nest feathers</p>{links}"))

    return respond


def gaps(times: list[float]) -> list[float]:
    return [later - earlier for earlier, later in pairwise(times)]


@pytest.mark.parametrize("autothrottle", [False, True])
def test_crawl_delay_paces_its_host_and_no_other(tmp_path, autothrottle):
    log = FetchLog()
    slow_robots = "User-agent: *\nCrawl-delay: 1\nDisallow: /private/\n"
    with (
        Site(pages_site(slow_robots), "127.0.0.2", log) as slow,
        Site(pages_site("User-agent: *\nDisallow: /private/\n"), "127.0.0.3", log) as fast,
    ):
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{slow.url}/,{fast.url}/"},
            # AutoThrottle, from a short start delay, would take the slot's delay down to the
            # latency of a loopback server after the first response.
            {"AUTOTHROTTLE_ENABLED": True, "AUTOTHROTTLE_START_DELAY": 0.1} if autothrottle else {},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    slow_times, fast_times = log.get_times(slow.host), log.get_times(fast.host)
    assert len(slow_times) == len(fast_times) == 1 + len(PAGES)
    # The downloader sends each request a second after the last one's download ended, so no
    # lag of a send can bring two closer. Scrapy's jitter would draw 0.5-1.5 s.
    assert min(gaps(slow_times)) >= 0.85, gaps(slow_times)
    # The other host's pages go together once its seed has been parsed.
    assert max(gaps(fast_times[1:])) < 0.5, gaps(fast_times)
    assert stat(crawl.result.stderr, "focused/robots/crawl_delay_hosts") == 1
    assert f"{slow.host}:{slow.server_address[1]}: robots.txt asks for a Crawl-delay of 1 s" in (
        crawl.result.stderr
    )


def test_a_crawl_delay_runs_from_the_end_of_a_download_to_the_next(tmp_path):
    """Yandex defines Crawl-delay from the end of one download to the start of the next, as
    Nutch and Heritrix pace a host. Counted from one send to the next (Scrapy's), a request
    written late, the crawl's event loop busy with a page, came less than the delay after the
    one before it (0.65 s for 1 s, on a loaded machine); a host that takes 0.4 s to answer got
    its requests 1 s apart, where 1.4 s is what it asked."""
    log = FetchLog()
    robots = "User-agent: *\nCrawl-delay: 1\n"
    with Site(pages_site(robots), "127.0.0.2", log, delay=0.4) as site:
        crawl = run_crawl(tmp_path, {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"})
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    times = log.get_times(site.host)  # each as it was answered, 0.4 s after it arrived
    assert len(times) == 1 + len(PAGES)
    assert min(gaps(times)) >= 1.3, gaps(times)


def test_a_crawl_delay_runs_from_the_end_of_the_robots_txt_download_too(tmp_path):
    """The robots.txt that says Crawl-delay is the host's first download: its first page came
    the delay after the robots.txt was sent, 0.6 s after its answer for a delay of 1 s and a
    host that takes 0.4 s to answer."""
    log = FetchLog()
    robots_answered: list[float] = []
    pages = pages_site("User-agent: *\nCrawl-delay: 1\n")

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            robots_answered.append(time.monotonic())  # after the site's delay: as it answers
        return pages(method, path)

    with Site(respond, "127.0.0.2", log, delay=0.4) as site:
        crawl = run_crawl(tmp_path, {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"})
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    seed_arrived = log.get_times(site.host)[0] - 0.4  # logged as it is answered
    assert seed_arrived - robots_answered[0] >= 0.9, seed_arrived - robots_answered[0]


def test_a_crawl_delay_above_the_cap_skips_its_host(tmp_path):
    log = FetchLog()
    with Site(pages_site("User-agent: *\nCrawl-delay: 5\n"), "127.0.0.2", log) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"},
            {"ROBOTS_CRAWL_DELAY_MAX": 2},
        )
    assert log.gets() == []
    # Its only seed skipped: the crawl fetched nothing, and says why.
    assert crawl.result.returncode == 1, crawl.result.stderr[-3000:]
    assert "Crawl-delay 5 s is above ROBOTS_CRAWL_DELAY_MAX (2 s)" in crawl.result.stderr
    assert stat(crawl.result.stderr, "focused/robots/crawl_delay_skipped") == 1


def busy_once(retry_after: str):
    """A seed page answered 429 with ``Retry-After`` the first time, then 200."""
    answered: list[str] = []

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(404, "")
        if path == "/" and not answered:
            answered.append(path)
            return Reply(429, "slow down", "text/plain", {"Retry-After": retry_after})
        return Reply(200, html("birds", "<p>birds nest feathers</p>"))

    return respond


@pytest.mark.parametrize(
    ("retry_after", "settings", "least", "most"),
    [("2", {}, 2.0, 10.0), ("120", {"RETRY_AFTER_MAX": 1}, 1.0, 10.0)],
    ids=["retry_after", "capped"],
)
def test_retry_after_pauses_the_host_before_the_retry(tmp_path, retry_after, settings, least, most):
    log = FetchLog()
    with Site(busy_once(retry_after), "127.0.0.2", log) as site:
        crawl = run_crawl(
            tmp_path, {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"}, settings
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    times = log.get_times(site.host)
    assert len(times) == 2, log.entries
    assert least <= times[1] - times[0] < most
    assert [page["url"] for page in crawl.pages()] == [f"{site.url}/"]
    assert stat(crawl.result.stderr, "focused/retry_after/pauses") == 1


def test_no_request_waiting_in_the_slot_goes_between_a_429_and_its_pause(tmp_path):
    """The slot sent the next request waiting in it as the 429's download ended, before the
    middleware that pauses the host saw the answer: the host had a request at once after
    asking for 3 s without any."""
    log = FetchLog()
    pages = [f"/p{n}" for n in range(1, 7)]
    lock, gate = threading.Lock(), Gate(2)  # both on the wire before the 429 is answered
    arrived: list[str] = []
    busy_at: list[float] = []

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(404, "")
        links = " ".join(f'<a href="{page}">birds {page}</a>' for page in pages)
        if path == "/":
            return Reply(200, html("birds", f"<p>birds nest feathers</p>{links}"))
        with lock:
            turn = len(arrived)
            arrived.append(path)
        if turn < 2:
            gate.wait()
        if turn == 0:
            busy_at.append(time.monotonic())
            return Reply(429, "slow down", "text/plain", {"Retry-After": "3"})
        time.sleep(0.3)  # the other one on the wire ends during the pause
        return Reply(200, html(f"birds {path}", "<p>birds nest feathers</p>"))

    with Site(respond, "127.0.0.2", log) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"},
            {"CONCURRENT_REQUESTS_PER_DOMAIN": 2},  # more wait in the slot than are on the wire
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert len(crawl.pages()) == 1 + len(pages)
    # The request on the wire with the 429 arrived before it was answered: any after it was
    # sent once the 429 had come back.
    during = [when - busy_at[0] for when in log.get_times(site.host) if when > busy_at[0]]
    assert min(during) >= 2.9, during


def test_retry_after_is_seconds_or_an_http_date():
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds(b"120", now) == 120.0
    assert retry_after_seconds(b"Thu, 01 Jan 2026 12:00:30 GMT", now) == 30.0
    assert retry_after_seconds(b"Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0  # past
    assert retry_after_seconds(b"-5", now) is None
    assert retry_after_seconds(b"soon", now) is None
    assert retry_after_seconds("²".encode("latin-1"), now) is None  # was a ValueError
    assert retry_after_seconds(None, now) is None


def unavailable(answers: dict[str, list[int]], links: dict[str, list[str]], gate=None):
    """Pages about birds, ``links[path]`` the links of the page at ``path``; the page at
    ``path`` answers the statuses ``answers[path]`` first, in turn, without Retry-After, then
    200. A request for a page with ``answers`` waits at ``gate`` first, if given."""
    answered: dict[str, int] = {}
    lock = threading.Lock()

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(404, "")
        if gate is not None and path in answers:
            gate.wait()
        with lock:
            turn = answered[path] = answered.get(path, 0) + 1
        if turn <= len(answers.get(path, [])):
            return Reply(answers[path][turn - 1], "busy", "text/plain")
        anchors = " ".join(f'<a href="{link}">birds {link}</a>' for link in links.get(path, []))
        return Reply(200, html(f"birds {path}", f"<p>birds nest feathers</p>{anchors}"))

    return respond


def test_a_busy_host_without_retry_after_is_paused_longer_at_each_answer_in_a_row(tmp_path):
    """Scrapy retried a 503 or 429 without Retry-After at once, and went on sending the host's
    other requests. Here the seed answers 503 twice (paused 1 s, then 2 s), then links to a page
    that answers 429 once: the 200 in between ended the run, so that pause is 1 s again. The
    other host is not held meanwhile."""
    log = FetchLog()
    fast_pages = [f"/b{n}" for n in range(1, 5)]
    with (
        Site(linking_site("User-agent: *\n", {"/": fast_pages}), "127.0.0.3", log) as fast,
        Site(unavailable({"/": [503, 503], "/a": [429]}, {"/": ["/a"]}), "127.0.0.2", log) as busy,
    ):
        crawl = run_crawl(
            tmp_path, {"strategy": "bfs", "query": "birds", "seeds": f"{busy.url}/,{fast.url}/"}
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    busy_gets = [path for host, path in log.gets() if host == busy.host]
    assert busy_gets == ["/", "/", "/", "/a", "/a"], busy_gets
    busy_times, fast_times = log.get_times(busy.host), log.get_times(fast.host)
    # Lower bounds only: a loaded machine may send late, never early (arrival may lag a send a
    # little, shortening the gap after it by as much).
    first, second, _, again = gaps(busy_times)
    assert first >= 0.85, gaps(busy_times)
    assert second >= 1.85, gaps(busy_times)
    assert again >= 0.85, gaps(busy_times)
    assert len(fast_times) == 1 + len(fast_pages), log.gets()
    # The other host's pages went while the busy one was paused, not after.
    assert fast_times[-1] < busy_times[2], (busy_times, fast_times)
    stderr = crawl.result.stderr
    key = busy.host
    assert f"{key} answered 503 without Retry-After, 1 in a row: no request to it for 1 s" in stderr
    assert f"{key} answered 503 without Retry-After, 2 in a row: no request to it for 2 s" in stderr
    assert f"{key} answered 429 without Retry-After, 1 in a row: no request to it for 1 s" in stderr
    assert stat(stderr, "focused/retry_backoff/pauses") == 3
    assert stat(stderr, "focused/retry_after/pauses") == 0
    assert {page["url"] for page in crawl.pages()} == {
        f"{busy.url}/",
        f"{busy.url}/a",
        f"{fast.url}/",
        *(f"{fast.url}{page}" for page in fast_pages),
    }


def test_the_503s_of_requests_on_the_wire_together_pause_their_host_once(tmp_path):
    """A host going down answers every request it has on the wire 503: those answers arrive
    while the first one's pause holds the host, were sent before it, and do not lengthen it."""
    log = FetchLog()
    pages = [f"/p{n}" for n in range(1, 5)]
    # The four requests are answered together, once all four are on the wire.
    site = unavailable({page: [503] for page in pages}, {"/": pages}, Gate(len(pages)))
    with Site(site, "127.0.0.2", log) as busy:
        crawl = run_crawl(tmp_path, {"strategy": "bfs", "query": "birds", "seeds": f"{busy.url}/"})
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert sorted(path for _, path in log.gets()) == ["/", *sorted(pages * 2)], log.gets()
    assert stat(crawl.result.stderr, "focused/retry_backoff/pauses") == 1
    assert "without Retry-After, 1 in a row: no request to it for 1 s" in crawl.result.stderr
    assert len(crawl.pages()) == 1 + len(pages)


def test_the_slow_503s_of_requests_sent_before_a_pause_do_not_lengthen_the_next(tmp_path):
    """A host going down behind a proxy answers 503 as each request times out there: the
    answers to requests on the wire as the first 503 paused the host come in after that pause
    ended, and were counted as further answers in a row (2 in a row, 2 s) although every one of
    them was sent before the pause."""
    log = FetchLog()
    pages = [f"/p{n}" for n in range(1, 5)]
    lock = threading.Lock()
    arrived: list[str] = []

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(404, "")
        links = " ".join(f'<a href="{page}">birds {page}</a>' for page in pages)
        if path == "/":
            return Reply(200, html("birds", f"<p>birds nest feathers</p>{links}"))
        with lock:
            first = not arrived
            again = path in arrived
            arrived.append(path)
        if again:
            time.sleep(2.5)  # the first retry ends the run only once the others have answered
            return Reply(200, html(f"birds {path}", "<p>birds nest feathers</p>"))
        if not first:
            time.sleep(1.8)  # past the first one's pause of 1 s
        return Reply(503, "busy", "text/plain")

    with Site(respond, "127.0.0.2", log) as busy:
        crawl = run_crawl(tmp_path, {"strategy": "bfs", "query": "birds", "seeds": f"{busy.url}/"})
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert sorted(path for _, path in log.gets()) == ["/", *sorted(pages * 2)], log.gets()
    stderr = crawl.result.stderr
    assert "2 in a row" not in stderr, stderr[-3000:]
    assert stat(stderr, "focused/retry_backoff/pauses") == 1
    assert len(crawl.pages()) == 1 + len(pages)


def test_the_backoff_doubles_from_its_base_up_to_the_cap():
    assert [backoff_seconds(answers, 1.0, 60.0) for answers in range(1, 9)] == [
        1, 2, 4, 8, 16, 32, 60, 60
    ]  # fmt: skip
    assert backoff_seconds(3, 0.25, 60.0) == 1.0
    assert backoff_seconds(1, 5.0, 2.0) == 2.0  # a base above the cap is cut to it
    # A host that answers 503 for days: 2.0 ** 10_000 would overflow.
    assert backoff_seconds(10_000, 1.0, 60.0) == 60.0
    assert backoff_seconds(10_000, 1e300, 60.0) == 60.0


def test_a_hosts_pause_keeps_no_record_of_requests_once_none_is_unanswered():
    """A pause records the host's requests sent before it, to tell their answers from those to
    the requests sent after: an empty record was kept for good, and a record whose requests
    failed too, some 1 KB for every host ever paused."""
    crawler = get_crawler(settings_dict={"RETRY_AFTER_MAX": 60})
    slots: dict[str, Slot] = {}
    crawler.engine = SimpleNamespace(downloader=SimpleNamespace(slots=slots, _latercall=print))
    pauses = RetryAfterMiddleware.from_crawler(crawler)

    def page(host: str, path: str, sent: bool = False) -> Request:
        """A request for ``path`` on ``host``; ``sent``: on the wire, in its slot."""
        request = Request(f"http://{host}{path}", meta={"download_slot": host})
        if sent:
            slots.setdefault(host, Slot(4, 0, 0)).active.add(request)
        return request

    def answer(request: Request, status: int) -> None:  # as the downloader signals a response
        headers = {"Retry-After": "5"} if status == 503 else {}
        response = Response(request.url, status=status, headers=headers, request=request)
        pauses.response_downloaded(response, request)

    async def crawl() -> Request:  # a pause is a call later: in an event loop
        for n in range(20):  # each answers 503 to its one request in flight, then 200
            answer(page(f"h{n}.example", "/", sent=True), 503)
            answer(page(f"h{n}.example", "/again", sent=True), 200)
        # Two on the wire as the host is paused: one answered, one that fails (forgotten).
        answered, failed = page("a.example", "/1", True), page("a.example", "/2", True)
        answer(page("a.example", "/", sent=True), 503)
        slots["a.example"].active.clear()
        answer(answered, 200)
        del failed
        gc.collect()
        unanswered = page("b.example", "/1", True)
        answer(page("b.example", "/", sent=True), 503)
        return unanswered

    unanswered = asyncio.run(crawl())
    assert pauses.stats.get_value("focused/retry_after/pauses") == 22
    assert set(pauses._sent_before) == {"b.example"}  # its request sent before, unanswered
    assert unanswered in pauses._sent_before["b.example"]


def test_a_pause_past_is_forgotten_at_the_next_pause(monkeypatch):
    """A host whose last answer was a 429 or 503 kept its pause's end for good, though past it
    holds nothing: the next pause drops those past. Its run of answers is kept."""
    crawler = get_crawler(settings_dict={"RETRY_AFTER_MAX": 60})
    slots: dict[str, Slot] = {}
    crawler.engine = SimpleNamespace(downloader=SimpleNamespace(slots=slots, _latercall=print))
    pauses = RetryAfterMiddleware.from_crawler(crawler)
    clock = [1000.0]
    monkeypatch.setattr("focused.retryafter.monotonic", lambda: clock[0])

    def answer_503(host: str, retry_after: str) -> None:
        request = Request(f"http://{host}/", meta={"download_slot": host})
        slots.setdefault(host, Slot(4, 0, 0)).active.add(request)
        response = Response(request.url, status=503, headers={"Retry-After": retry_after})
        pauses.response_downloaded(response, request)

    async def crawl() -> None:  # a pause is a call later: in an event loop
        for n in range(20):
            answer_503(f"h{n}.example", "5")
        answer_503("long.example", "30")
        clock[0] += 10  # the 5 s pauses are over, the 30 s one is not
        answer_503("new.example", "5")

    asyncio.run(crawl())
    assert set(pauses.paused_until) == {"long.example", "new.example"}
    assert pauses.paused_until["new.example"] == 1015.0
    assert pauses._answers["h0.example"] == 1  # still in a run: a backoff would double


def test_a_hosts_run_of_answers_goes_with_its_dropped_slot_and_doubles_while_it_lives(
    monkeypatch,
):
    """A host whose last answer was a 429 or 503 kept its run of answers for good: one entry
    for every such host a wide crawl ever met. It goes once Scrapy drops the host's slot, idle
    a minute past its pause (no pause pending: kept until then); a host that keeps answering
    429 meanwhile has its pause doubled each time, whatever the slots dropped around it."""
    crawler = get_crawler(
        settings_dict={
            "RETRY_AFTER_MAX": 60,
            "RETRY_BACKOFF_BASE": 1,
            "DOWNLOADER_MIDDLEWARES_BASE": {"focused.retryafter.RetryAfterMiddleware": 555},
        }
    )
    crawler.engine = SimpleNamespace(downloader=PoliteDownloader(crawler))
    downloader = crawler.engine.downloader
    [pauses] = [
        mw for mw in downloader.middleware.middlewares if isinstance(mw, RetryAfterMiddleware)
    ]
    clock = [1000.0]
    for module in ("focused.retryafter", "focused.downloader", "scrapy.core.downloader"):
        monkeypatch.setattr(f"{module}.monotonic", lambda: clock[0])

    def answer_429(host: str) -> float:
        """Its pause's seconds, the host answering 429 without Retry-After to a request."""
        request = Request(f"http://{host}/", meta={"download_slot": host})
        slot = downloader.slots.setdefault(host, Slot(1, 0, 0))
        slot.lastseen = clock[0]
        pauses.response_downloaded(Response(request.url, status=429), request)
        return pauses.paused_until[host] - clock[0]

    async def crawl() -> list[float]:  # a pause is a call later: in an event loop
        for n in range(20):
            answer_429(f"h{n}.example")
        doubled = []
        for _ in range(4):
            doubled.append(answer_429("busy.example"))
            clock[0] += doubled[-1]  # its pause over, its slot held till then
            downloader._slot_gc()
        # Past their pauses and a minute idle: Scrapy drops their slots.
        for slot in downloader.slots.values():
            slot.latercall.cancel()
            slot.latercall = None
        clock[0] += 61
        answer_429("busy.example")  # its slot lives: in a run still
        downloader._slot_gc()
        return doubled

    assert asyncio.run(crawl()) == [1, 2, 4, 8]
    assert list(downloader.slots) == ["busy.example"]
    assert pauses._answers == {"busy.example": 5}
    assert set(pauses.paused_until) == {"busy.example"}


def linking_site(robots: str, links: dict[str, list[str]]):
    """Pages about birds; ``links[path]``: the links of the page at ``path``."""

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(200, robots, "text/plain")
        anchors = " ".join(f'<a href="{link}">birds {link}</a>' for link in links.get(path, []))
        return Reply(200, html(f"birds {path}", f"<p>birds nest feathers</p>{anchors}"))

    return respond


@pytest.mark.parametrize("jobdir", [False, True])
def test_a_host_held_by_its_crawl_delay_does_not_hold_the_crawl(tmp_path, jobdir):
    """Host A's pages come first in the frontier (bfs: A's seed links to eight of them, then to
    B's seed, whose pages are a level deeper), more of them than CONCURRENT_REQUESTS. Scrapy
    counts a request waiting for its host's delay against CONCURRENT_REQUESTS: handed out in the
    frontier's order, A's would fill the downloader, and B would wait for them, one a second.
    The scheduler passes over A while one of its requests waits (HELD_HOST_LOOKAHEAD); under
    JOBDIR the request it takes instead comes out of the frontier file."""
    log = FetchLog()
    slow_pages = [f"/a{n}" for n in range(1, 9)]
    fast_pages = [f"/b{n}" for n in range(1, 9)]
    with (
        Site(linking_site("User-agent: *\n", {"/": fast_pages}), "127.0.0.3", log) as fast,
        Site(
            linking_site("User-agent: *\nCrawl-delay: 1\n", {"/": [*slow_pages, f"{fast.url}/"]}),
            "127.0.0.2",
            log,
        ) as slow,
    ):
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{slow.url}/"},
            {"CONCURRENT_REQUESTS": 4, **({"JOBDIR": str(tmp_path / "job")} if jobdir else {})},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    slow_times, fast_times = log.get_times(slow.host), log.get_times(fast.host)
    assert len(slow_times) == 1 + len(slow_pages), log.gets()
    assert len(fast_times) == 1 + len(fast_pages), log.gets()
    # A's spacing is kept: a second a request, on the whole and for each. Times are taken as
    # requests arrive, and an arrival may lag its send, shortening the next gap by as much
    # (0.19 s once in a clean clone's CI, the gap before it 1.19 s).
    assert slow_times[-1] - slow_times[0] >= 0.95 * len(slow_pages), gaps(slow_times)
    assert min(gaps(slow_times)) >= 0.75, gaps(slow_times)
    # ...and B is crawled meanwhile, not at A's pace: all of it within A's first pages.
    assert fast_times[-1] - slow_times[0] < 0.3 * (slow_times[-1] - slow_times[0]), (
        gaps(slow_times),
        [when - slow_times[0] for when in fast_times],
    )
    assert stat(crawl.result.stderr, "focused/held_host/passed_over") >= len(fast_pages)


@dataclass
class StoppedWhilePaused:
    gets: list[str]  # the paths the site was asked for, in order, by both runs
    gets_before_resume: list[str]
    stopped: float  # seconds from the Ctrl-C to the end of the first run
    stderr: str  # the first run's
    resumed: Crawl
    site_url: str


# The pause /p1 asks for below: the crawl resumed after the stop waits out the rest of it.
RETRY_AFTER = 20


def crawl_in_background(tmp_path, arguments: dict[str, str], settings: dict[str, object]):
    """The crawl of ``arguments`` (given ``settings``) started in a subprocess whose stderr, at
    INFO, the test reads as it goes; ``run_crawl(tmp_path, arguments, settings)`` runs it again
    as it was started."""
    first = {
        "FOCUSED_DB": tmp_path / "focused.sqlite3",
        "ENCODER_STORE_DIR": tmp_path / "encodings",
        "FOCUSED_LOGSTATS_INTERVAL": 0,
        "LOG_LEVEL": "INFO",
        **settings,
    }
    command = scrapy_command(*crawl_args({"crawl_id": "test", **arguments}, first))
    return subprocess.Popen(command, cwd=REPO, env=crawl_env(), stderr=subprocess.PIPE, text=True)


def stop_once_said(
    process: subprocess.Popen, said: str, settle: float, stop: int = signal.SIGINT, timeout=120
) -> tuple[str, float]:
    """Send ``stop`` to a crawl's ``process`` (its stderr read as it goes, as from
    ``crawl_in_background``) ``settle`` seconds after its log says ``said``; its log from there
    on, and the seconds it took to end. It is killed if anything fails on the way."""
    try:
        for line in process.stderr:
            if said in line:
                break
        time.sleep(settle)
        stopping = time.monotonic()
        process.send_signal(stop)
        stderr = process.stderr.read()
        process.wait(timeout=timeout)
        return stderr, time.monotonic() - stopping
    finally:
        process.kill()


def ctrl_c_while_a_retry_waits(tmp_path, settings: dict[str, object]) -> StoppedWhilePaused:
    """A crawl (given ``settings``) of a seed linking to /p1, which answers 429 with
    Retry-After: RETRY_AFTER the first time: Ctrl-C as the retry waits for the pause, then the
    crawl run again as it was started."""
    log = FetchLog()
    answered: list[str] = []

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(404, "")
        if path == "/p1" and not answered:
            answered.append(path)
            return Reply(429, "slow down", "text/plain", {"Retry-After": str(RETRY_AFTER)})
        links = '<a href="/p1">birds</a>' if path == "/" else ""
        return Reply(200, html(f"birds {path}", f"<p>birds nest feathers</p>{links}"))

    with Site(respond, "127.0.0.2", log) as site:
        arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"}
        process = crawl_in_background(tmp_path, arguments, settings)
        # The retry is handed out, to wait in its host's slot (ms, unloaded): 3 s.
        stderr, stopped = stop_once_said(process, f"answered 429 with Retry-After {RETRY_AFTER}", 3)
        assert process.returncode == 0, stderr[-3000:]
        before = [path for _, path in log.gets()]
        resumed = run_crawl(tmp_path, arguments, settings)
    gets = [path for _, path in log.gets()]
    return StoppedWhilePaused(gets, before, stopped, stderr, resumed, site.url)


def test_ctrl_c_leaves_a_request_held_by_a_pause_to_the_resumed_crawl(tmp_path):
    """Scrapy's engine waits, as it closes, for every request it handed out: a JOBDIR crawl
    paused with Ctrl-C while a retry waited for its host's Retry-After (or Crawl-delay) waited
    out the pause, a minute, then sent it after the stop. It now stays in flight in the
    frontier file, and the resumed crawl fetches it."""
    run = ctrl_c_while_a_retry_waits(tmp_path, {"JOBDIR": tmp_path / "job"})
    assert_left_unsent_and_fetched_on_resume(run)
    assert stat(run.resumed.result.stderr, "focused/resume/recovered_inflight") == 1


def test_ctrl_c_names_a_free_connection_as_what_an_unsent_request_waited_for(tmp_path):
    """A request also waits in its host's slot for a connection of the host's
    (CONCURRENT_REQUESTS_PER_DOMAIN), and the stop leaves it unsent as well: said to be held by
    its host's delay or pause, on a host with neither, the line named a cause that was not."""
    log = FetchLog()

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(404, "")
        if path != "/":
            time.sleep(3)  # a slow page: the next ones wait for its connection
        links = "".join(f'<a href="/p{i}">birds {i}</a>' for i in range(1, 4))
        return Reply(200, html(f"birds {path}", f"<p>birds nest feathers</p>{links}"))

    settings = {"JOBDIR": tmp_path / "job", "CONCURRENT_REQUESTS_PER_DOMAIN": 1}
    with Site(respond, "127.0.0.2", log) as site:
        arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"}
        process = crawl_in_background(tmp_path, arguments, {**settings, "LOG_LEVEL": "DEBUG"})
        stderr, _ = stop_once_said(process, f"Scraped from <200 {site.url}/>", 1)
    assert process.returncode == 0, stderr[-3000:]
    unsent = stat(stderr, "focused/closing/not_sent")
    assert unsent, stderr[-3000:]
    assert (
        f"Not sent as the crawl stopped: {counted(unsent, 'request')} waiting in their host's"
        " download"
        " slot (for its delay, a pause or a free connection); in flight in the frontier still,"
        " fetched when it goes on"
    ) in stderr


def assert_left_unsent_and_fetched_on_resume(run: StoppedWhilePaused) -> None:
    """The retry of /p1 was not sent after the stop, and the run after it fetched it once."""
    assert run.gets_before_resume == ["/", "/p1"]  # nothing sent after the stop
    assert run.stopped < RETRY_AFTER / 2, run.stderr[-3000:]  # it waited out the pause
    assert stat(run.stderr, "focused/closing/not_sent") == 1
    resumed = run.resumed.result
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert run.gets == ["/", "/p1", "/p1"]
    assert sorted(page["url"] for page in run.resumed.pages()) == [
        f"{run.site_url}/",
        f"{run.site_url}/p1",
    ]


# The Crawl-delay of the site below, the most a host may ask (ROBOTS_CRAWL_DELAY_MAX): its
# seed waits that long after its robots.txt.
CRAWL_DELAY = 30


def crawl_delay_site():
    """A seed linking to /p1, on a host asking for a Crawl-delay of CRAWL_DELAY."""

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(200, f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n", "text/plain")
        return Reply(200, html("birds", '<p>birds nest feathers</p><a href="/p1">birds</a>'))

    return respond


@pytest.mark.parametrize(
    ("settings", "stop"),
    [
        ({}, signal.SIGINT),
        ({}, signal.SIGTERM),
        ({"HEAD_CHECK": True}, signal.SIGINT),
        ({"HEAD_CHECK": True, "JOBDIR": "job"}, signal.SIGINT),
    ],
    ids=["plain", "sigterm", "head_check", "head_check_jobdir"],
)
def test_ctrl_c_sends_nothing_a_crawl_delay_holds(tmp_path, settings, stop):
    """Ctrl-C (or SIGTERM) of a crawl whose host asked for a Crawl-delay: Scrapy's close waited
    for the request handed out and held in its host's slot, up to the delay, and sent it after
    the stop (without JOBDIR the page; with HEAD_CHECK its HEAD, then the GET another delay
    later, or under JOBDIR left unsent). The stop ends at once now, and the host gets nothing
    after it: without JOBDIR the page is dropped, under it the resumed crawl fetches it."""
    log = FetchLog()
    if "JOBDIR" in settings:
        settings = {**settings, "JOBDIR": tmp_path / settings["JOBDIR"]}
    with Site(crawl_delay_site(), "127.0.0.2", log) as site:
        arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"}
        process = crawl_in_background(tmp_path, arguments, settings)
        # The seed (its HEAD) is handed out, to wait in its slot (ms, unloaded): 2 s.
        said = f"asks for a Crawl-delay of {CRAWL_DELAY} s"
        stderr, stopped = stop_once_said(process, said, 2, stop, timeout=3 * CRAWL_DELAY)
    assert process.returncode == 0, stderr[-3000:]
    assert stopped < CRAWL_DELAY / 3, stderr[-3000:]  # it waited out the delay: 28 s
    assert log.entries == [], log.entries  # robots.txt is not logged
    assert stat(stderr, "focused/closing/not_sent") == 1
    kept = "in flight in the frontier still" in stderr
    assert kept == ("JOBDIR" in settings), stderr[-3000:]
    assert stat(stderr, "focused/head_check_failures") == 0
    if "JOBDIR" in settings:  # the GET its HEAD stood for, for the resumed crawl
        frontier = settings["JOBDIR"] / "requests.queue" / "frontier.sqlite3"
        with closing(sqlite3.connect(frontier)) as connection:
            assert connection.execute("SELECT COUNT(*) FROM inflight").fetchone() == (1,)


def test_a_time_limit_sends_nothing_a_crawl_delay_holds(tmp_path):
    """A crawl closed by its time limit (CLOSESPIDER_TIMEOUT; CLOSESPIDER_RELEVANT and the
    others close the same way) waited out the Crawl-delay of the request held in its host's
    slot, and sent it: 31 s for a limit of 3 s. It ends as a stop does now."""
    log = FetchLog()
    with Site(crawl_delay_site(), "127.0.0.2", log) as site:
        started = time.monotonic()
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"},
            {"CLOSESPIDER_TIMEOUT": 3},
        )
        took = time.monotonic() - started
    stderr = crawl.result.stderr
    assert crawl.result.returncode == 0, stderr[-3000:]
    assert "Closing spider (closespider_timeout)" in stderr, stderr[-3000:]
    assert took < 3 + CRAWL_DELAY / 2, stderr[-3000:]  # it waited out the delay: 31 s
    assert log.entries == [], log.entries  # the seed is not sent, robots.txt is not logged
    assert stat(stderr, "focused/closing/not_sent") == 1


class Timed:
    """A site's pages, each answered ``latency`` seconds after it arrives; when each arrived and
    was answered, on the server's side (robots.txt is answered at once, and not recorded)."""

    def __init__(self, respond, latency: float) -> None:
        self.respond = respond
        self.latency = latency
        self.spans: list[tuple[float, float]] = []
        self._lock = threading.Lock()

    def __call__(self, method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return self.respond(method, path)
        arrived = time.monotonic()
        time.sleep(self.latency)
        reply = self.respond(method, path)
        with self._lock:
            self.spans.append((arrived, time.monotonic()))
        return reply

    def most_at_once(self) -> int:
        """The most requests the site was answering at one time."""
        events = sorted(
            [(start, 1) for start, _ in self.spans] + [(end, -1) for _, end in self.spans]
        )
        at_once = most = 0
        for _, change in events:  # at a tie, an answer (-1) sorts before an arrival
            at_once += change
            most = max(most, at_once)
        return most


@pytest.mark.parametrize(
    ("settings", "most"),
    [
        ({}, {1}),
        # AutoThrottle aiming at four requests at once would set the delay to latency / 4, below
        # the Crawl-delay (kept), and does not change the slot's concurrency.
        (
            {
                "AUTOTHROTTLE_ENABLED": True,
                "AUTOTHROTTLE_START_DELAY": 0.1,
                "AUTOTHROTTLE_TARGET_CONCURRENCY": 4,
            },
            {1},
        ),
        # The user's concurrency for the host (DOWNLOAD_SLOTS) is kept: sent 0.2 s apart, three
        # 0.6 s pages overlap (two on a machine so loaded that sends lag).
        ({"DOWNLOAD_SLOTS": json.dumps({"127.0.0.2": {"concurrency": 3}})}, {2, 3}),
    ],
    ids=["plain", "autothrottle", "download_slots"],
)
def test_a_host_with_a_crawl_delay_gets_one_request_at_a_time(tmp_path, settings, most: set[int]):
    """Scrapy's slot delay is counted between sends: pages slower than the Crawl-delay would
    overlap, CONCURRENT_REQUESTS_PER_DOMAIN (8) of them at once, on a host that asked to be left
    alone."""
    site = Timed(pages_site("User-agent: *\nCrawl-delay: 0.2\n"), latency=0.6)
    with Site(site, "127.0.0.2") as slow:
        crawl = run_crawl(
            tmp_path, {"strategy": "bfs", "query": "birds", "seeds": f"{slow.url}/"}, settings
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert len(site.spans) == 1 + len(PAGES)
    assert site.most_at_once() in most, sorted(site.spans)


def many_pages_site(count: int):
    """A seed page / linking to ``count`` pages."""

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(200, "User-agent: *\nDisallow:\n", "text/plain")
        links = (
            "" if path != "/" else " ".join(f'<a href="/p{n}">birds {n}</a>' for n in range(count))
        )
        return Reply(200, html(f"birds {path}", f"<p>birds nest feathers</p>{links}"))

    return respond


@pytest.mark.parametrize(
    "setting", ["CONCURRENT_REQUESTS_PER_DOMAIN", "CONCURRENT_REQUESTS_PER_IP"]
)
def test_a_host_gets_no_more_requests_at_once_than_its_concurrency(tmp_path, setting):
    """Scrapy 2.19 under the asyncio reactor counts a request against its slot's concurrency only
    once the download task has started: requests reaching a slot in one turn of the event loop
    all went on the wire (12 at once to a host whose limit was 4)."""
    site = Timed(many_pages_site(24), latency=0.5)
    with Site(site, "127.0.0.2") as slow:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{slow.url}/"},
            {setting: 4, "CONCURRENT_REQUESTS": 16},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert len(site.spans) == 25
    assert site.most_at_once() == 4, sorted(site.spans)


@pytest.mark.parametrize("texts", [None, 1])
def test_a_forgotten_robots_txt_is_read_again_and_its_crawl_delay_holds(tmp_path, texts):
    """With ROBOTS_PARSERS_MAX=1 only the robots.txt of the host used last is kept parsed: a
    crawl that meets many hosts kept every one (some 16 times its text each). Each turn from
    one host to the other parses the other's again from its kept text (downloaded again with
    ROBOTS_TEXTS_MAX=1, the other's text forgotten too), its rules apply, and its Crawl-delay
    paces it throughout. A page of the slow host links back to the fast one, so that the crawl
    turns back to a host forgotten whatever the order in which their robots.txt are read (with
    the slow one's read last, a loaded machine's, the fast host's pages could all go before)."""
    log = FetchLog()
    robots_reads = {"slow": 0, "fast": 0}
    slow_robots = "User-agent: *\nCrawl-delay: 1\nDisallow: /private/\n"
    slow_links = {"/": [*PAGES, "/private/1"]}
    fast_links = {"/": PAGES}

    def counted(name: str, respond):
        def counting(method: str, path: str) -> Reply:
            if path == "/robots.txt":
                robots_reads[name] += 1
            return respond(method, path)

        return counting

    with (
        Site(counted("slow", linking_site(slow_robots, slow_links)), "127.0.0.2", log) as slow,
        Site(
            counted("fast", linking_site("User-agent: *\n", fast_links)), "127.0.0.3", log
        ) as fast,
    ):
        slow_links[PAGES[0]] = [f"{fast.url}/back"]
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{slow.url}/,{fast.url}/"},
            {"ROBOTS_PARSERS_MAX": 1, **({} if texts is None else {"ROBOTS_TEXTS_MAX": texts})},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert stat(crawl.result.stderr, "focused/robots/forgotten") >= 1
    if texts is None:  # parsed again from its text, downloaded once
        assert stat(crawl.result.stderr, "focused/robots/reparsed") >= 1
        assert robots_reads == {"slow": 1, "fast": 1}, robots_reads
    else:
        assert robots_reads["slow"] >= 2, robots_reads
    slow_times = log.get_times(slow.host)
    assert sorted(path for host, path in log.gets() if host == slow.host) == ["/", *PAGES]
    assert min(gaps(slow_times)) >= 0.85, gaps(slow_times)
    # Counted and said once, however often it is read.
    assert stat(crawl.result.stderr, "focused/robots/crawl_delay_hosts") == 1
    assert crawl.result.stderr.count("robots.txt asks for a Crawl-delay of 1 s") == 1


def test_a_redirect_to_another_host_is_paced_by_that_hosts_crawl_delay(tmp_path):
    """Scrapy's redirect keeps the request's ``download_slot``: the page a seed on host A
    redirects to on host B (``example.org`` to ``www.example.org``) was downloaded in A's slot,
    and B's robots.txt, read for it, set its Crawl-delay on A's slot: B's own pages went
    together, at B's full concurrency."""
    log = FetchLog()
    with Site(pages_site("User-agent: *\nCrawl-delay: 1\n"), "127.0.0.3", log) as target:

        def moved(method: str, path: str) -> Reply:
            if path == "/robots.txt":
                return Reply(200, "User-agent: *\n", "text/plain")
            return Reply(301, "", headers={"Location": f"{target.url}{path}"})

        with Site(moved, "127.0.0.2", log) as source:
            crawl = run_crawl(
                tmp_path, {"strategy": "bfs", "query": "birds", "seeds": f"{source.url}/"}
            )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    times = log.get_times(target.host)
    assert len(times) == 1 + len(PAGES), log.gets()
    assert min(gaps(times)) >= 0.85, gaps(times)


def test_a_request_rate_paces_its_host_as_a_crawl_delay(tmp_path):
    """``Request-rate: 1/1`` (one request a second) was ignored: only the Crawl-delay was read."""
    log = FetchLog()
    with Site(pages_site("User-agent: *\nRequest-rate: 1/1\n"), "127.0.0.2", log) as site:
        crawl = run_crawl(tmp_path, {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"})
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    times = log.get_times(site.host)
    assert len(times) == 1 + len(PAGES), log.gets()
    assert min(gaps(times)) >= 0.85, gaps(times)
    assert stat(crawl.result.stderr, "focused/robots/crawl_delay_hosts") == 1


def test_hosts_on_one_address_share_its_concurrency_from_their_first_request(tmp_path):
    """With CONCURRENT_REQUESTS_PER_IP a slot is keyed by its host's address, which Scrapy
    knows only once a download has resolved the host: each host's first request (its
    robots.txt; here, robots.txt not read, its seed) went in a slot of the host's name, past
    the address's limit, so that the virtual hosts of one server each got theirs at once."""
    if socket.getaddrinfo("localhost", None)[0][4][0] != "127.0.0.1":
        pytest.skip("localhost is not first 127.0.0.1 here")
    site = Timed(many_pages_site(4), latency=0.5)
    with Site(site, "127.0.0.1") as server:
        port = server.server_address[1]
        crawl = run_crawl(
            tmp_path,
            {
                "strategy": "bfs",
                "query": "birds",
                "seeds": f"{server.url}/,http://localhost:{port}/",
            },
            {"CONCURRENT_REQUESTS_PER_IP": 1, "ROBOTSTXT_OBEY": False},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert len(site.spans) == 2 * 5
    assert site.most_at_once() == 1, sorted(site.spans)


def stop_once_fetched(process, arrivals: list[tuple[float, str]], path: str, stop) -> str:
    """Wait for ``path`` to be the crawl's last arrival, then ``stop(process)`` (a SIGINT, a
    kill) and wait for it to end; its stderr."""
    try:
        while [arrived for _, arrived in arrivals][-1:] != [path]:
            assert process.poll() is None, process.stderr.read()[-3000:]
            time.sleep(0.01)
        stop(process)
        stderr = process.stderr.read()
        process.wait(timeout=120)
    finally:
        process.kill()
    return stderr


def test_a_resumed_crawl_waits_out_the_crawl_delay_of_the_paused_run(tmp_path):
    """A JOBDIR crawl paused with Ctrl-C and resumed at once sent its first request to the host
    (its robots.txt, read again) as soon as it started: a second after the paused run's last
    request, for a Crawl-delay of 2 s. At 4 s here, the stop and the start take well below it."""
    delay = 4.0
    arrivals: list[tuple[float, str]] = []  # robots.txt too
    site_pages = linking_site(f"User-agent: *\nCrawl-delay: {delay:g}\n", {"/": ["/p1", "/p2"]})

    def respond(method: str, path: str) -> Reply:
        arrivals.append((time.monotonic(), path))
        return site_pages(method, path)

    with Site(respond, "127.0.0.2") as site:
        arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"}
        settings = {"JOBDIR": tmp_path / "job"}
        process = crawl_in_background(tmp_path, arguments, settings)
        # /p2 waits for the delay: not sent
        stderr = stop_once_fetched(process, arrivals, "/p1", lambda p: p.send_signal(signal.SIGINT))
        assert process.returncode == 0, stderr[-3000:]
        paused = len(arrivals)
        resumed = run_crawl(tmp_path, arguments, settings)
    assert resumed.result.returncode == 0, resumed.result.stderr[-3000:]
    paths = [path for _, path in arrivals]
    assert paths == ["/robots.txt", "/", "/p1", "/robots.txt", "/p2"], paths
    times = [when for when, _ in arrivals]
    # An arrival may lag its send, shortening the next gap by as much (see above).
    assert times[paused] - times[paused - 1] >= 0.9 * delay, gaps(times)
    assert min(gaps(times)) >= 0.9 * delay, gaps(times)


def test_a_crawl_resumed_after_kill_9_waits_out_the_crawl_delay_of_the_killed_run(tmp_path):
    """A crawl killed outright wrote no holds as it ended: resumed at once, it sent the host its
    robots.txt 2 s after the killed run's last page, for a Crawl-delay of 4 s. The holds are
    written as the crawl runs too (HOLDS_SAVED_EVERY), for as long as a request may have been
    sent since."""
    delay = 4.0
    arrivals: list[tuple[float, str]] = []  # robots.txt too
    site_pages = linking_site(f"User-agent: *\nCrawl-delay: {delay:g}\n", {"/": ["/p1", "/p2"]})

    def respond(method: str, path: str) -> Reply:
        arrivals.append((time.monotonic(), path))
        return site_pages(method, path)

    with Site(respond, "127.0.0.2") as site:
        arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"}
        settings = {"JOBDIR": tmp_path / "job"}
        process = crawl_in_background(tmp_path, arguments, settings)
        stop_once_fetched(process, arrivals, "/p1", lambda p: p.kill())  # /p2 waits the delay
        killed = len(arrivals)
        resumed = run_crawl(tmp_path, arguments, settings)
    assert resumed.result.returncode == 0, resumed.result.stderr[-3000:]
    paths = [path for _, path in arrivals]
    assert paths[:killed] == ["/robots.txt", "/", "/p1"], paths
    assert paths[killed] == "/robots.txt" and paths[-1] == "/p2", paths
    times = [when for when, _ in arrivals]
    # Not much past a write's interval and the delay: the killed run wrote while /p1 waited.
    assert 0.9 * delay <= times[killed] - times[killed - 1] < 3 * delay, gaps(times)
    assert min(gaps(times)) >= 0.9 * delay, gaps(times)


def test_a_crawl_killed_just_after_it_sent_to_an_idle_host_waits_out_its_crawl_delay(tmp_path):
    """Only a host with requests under way was held as if sent one at the next write: one idle
    past its delay as a link to it came up (from another host's slow page) was sent it at once,
    and a crawl killed before the next write left no hold for it. Resumed, it sent the host its
    robots.txt a few seconds after the killed run's last request, for a Crawl-delay of 6 s."""
    delay = 6.0
    arrivals: list[tuple[float, str]] = []  # of the delayed host, robots.txt too
    # Fetched before the kill or not, /late leaves the resumed run a request to the host.
    delayed_pages = linking_site(f"User-agent: *\nCrawl-delay: {delay:g}\n", {"/late": ["/next"]})

    def respond(method: str, path: str) -> Reply:
        arrivals.append((time.monotonic(), path))
        return delayed_pages(method, path)

    with Site(respond, "127.0.0.2") as delayed:
        late = f"{delayed.url}/late"

        def slow(method: str, path: str) -> Reply:
            if path == "/slow":
                time.sleep(2 * delay + 1)  # the delayed host idle past its delay meanwhile
            return linking_site("User-agent: *\n", {"/slow": [late]})(method, path)

        with Site(slow, "127.0.0.3") as other:
            seeds = f"{delayed.url}/,{other.url}/slow"
            arguments = {"strategy": "bfs", "query": "birds", "seeds": seeds}
            settings = {"JOBDIR": tmp_path / "job"}
            process = crawl_in_background(tmp_path, arguments, settings)
            stop_once_fetched(process, arrivals, "/late", lambda p: p.kill())
            killed = len(arrivals)
            resumed = run_crawl(tmp_path, arguments, settings)
    assert resumed.result.returncode == 0, resumed.result.stderr[-3000:]
    paths = [path for _, path in arrivals]
    assert paths[:killed] == ["/robots.txt", "/", "/late"], paths
    assert paths[killed] == "/robots.txt" and paths[-1] == "/next", paths
    times = [when for when, _ in arrivals]
    assert min(gaps(times)) >= 0.9 * delay, (paths, gaps(times))


def test_a_hold_left_by_a_pause_is_at_most_as_long_as_it_was(tmp_path):
    """The file a pause left is read as wall-clock times: a clock set back since must not hold
    a host for longer than the pause asked, and an entry that cannot be read holds nothing."""
    now = time.time()
    holds = {"set-back": [now + 3600, 2], "past": [now - 1, 5], "junk": "x", "short": [now]}
    (tmp_path / PAUSED_HOSTS_FILE).write_text(json.dumps(holds))
    # No download handler: none is needed to read the file.
    settings = {"JOBDIR": str(tmp_path), "DOWNLOAD_HANDLERS": {"http": None, "https": None}}
    downloader = PoliteDownloader(get_crawler(settings_dict=settings))
    (held,) = downloader._held_since_pause.items()
    assert held[0] == "set-back" and 1.5 < held[1] - time.monotonic() <= 2, held
    (tmp_path / PAUSED_HOSTS_FILE).write_bytes(b"\x00not json")
    assert PoliteDownloader(get_crawler(settings_dict=settings))._held_since_pause == {}
    # JSON nested too deep for Python's parser was a RecursionError, a traceback as the crawl
    # started: no hold either.
    (tmp_path / PAUSED_HOSTS_FILE).write_text("[" * 5000 + "]" * 5000)
    assert PoliteDownloader(get_crawler(settings_dict=settings))._held_since_pause == {}


def test_ctrl_c_while_a_resumed_crawl_holds_a_host_sends_nothing_after_the_stop(tmp_path):
    """The resumed run holds a host until the pause the paused run left ends, its robots.txt
    first. Stopped meanwhile, Scrapy waited for that robots.txt, held in its slot, and sent it
    after the stop; the run stops at once now, and the hold is kept for the next run."""
    robots: list[float] = []  # when the site was asked for robots.txt
    answered: list[str] = []

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            robots.append(time.monotonic())
            return Reply(404, "")
        if path == "/p1" and not answered:
            answered.append(path)
            return Reply(429, "slow down", "text/plain", {"Retry-After": "30"})
        links = '<a href="/p1">birds</a>' if path == "/" else ""
        return Reply(200, html(f"birds {path}", f"<p>birds nest feathers</p>{links}"))

    settings = {
        "FOCUSED_DB": tmp_path / "focused.sqlite3",
        "ENCODER_STORE_DIR": tmp_path / "encodings",
        "FOCUSED_LOGSTATS_INTERVAL": 0,
        "LOG_LEVEL": "INFO",
        "JOBDIR": tmp_path / "job",
    }
    with Site(respond, "127.0.0.2") as site:
        arguments = {"crawl_id": "test", "strategy": "bfs", "query": "birds"}
        command = scrapy_command(*crawl_args({**arguments, "seeds": f"{site.url}/"}, settings))
        for started in ("answered 429 with Retry-After 30", "Spider opened"):
            process = subprocess.Popen(
                command, cwd=REPO, env=crawl_env(), stderr=subprocess.PIPE, text=True
            )
            # The retry (the robots.txt, resumed) waits in its host's slot: 3 s.
            stderr, stopped = stop_once_said(process, started, 3)
            assert process.returncode == 0, stderr[-3000:]
    assert stopped < 10, stderr[-3000:]  # the resumed run waited out the pause: 24 s
    assert len(robots) == 1, robots  # the first run's: none sent after the resumed run's stop
    ((until, _),) = json.loads((tmp_path / "job" / PAUSED_HOSTS_FILE).read_text()).values()
    assert until - time.time() > 10  # the pause still holds the host for the next run


def test_connections_the_servers_closed_and_their_hosts_keys_leave_the_pool(tmp_path):
    """Twisted's connection pool kept a connection its server closed until its own 240 s
    timeout, and then the (scheme, host, port) key of its host, for the rest of the crawl: a
    wide crawl kept one for every host it ever met. Both go with the idle slots."""
    hosts = [f"127.0.0.{n}" for n in range(2, 6)]
    log = FetchLog()
    with ExitStack() as serving:
        robots = "User-agent: *\nAllow: /\n"
        sites = [
            serving.enter_context(KeepAliveSite(pages_site(robots), host, log)) for host in hosts
        ]
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": ",".join(f"{s.url}/" for s in sites)},
            {"EXTENSIONS": json.dumps({"tests.pool_probe.PoolProbe": 0})},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert len(log.gets()) == len(hosts) * (1 + len(PAGES))
    # Each host's connection went back to the pool between its downloads...
    assert stat(crawl.result.stderr, "probe/pool_keys_before") == len(hosts)
    # ...and neither it, closed by its server, nor its host's key is kept past the idle slots.
    assert stat(crawl.result.stderr, "probe/pooled_connections") == 0
    assert stat(crawl.result.stderr, "probe/pool_keys") == 0
    # Nor Twisted's timeout of a connection so taken out: fired 240 s on, it failed with a
    # traceback (KeyError: its key gone; ValueError: pooled again, without it).
    assert stat(crawl.result.stderr, "probe/orphan_pool_timeouts") == 0


def test_the_http2_handlers_pool_is_left_to_itself():
    """Scrapy's HTTP/2 handler (DOWNLOAD_HANDLERS https: H2DownloadHandler, with the h2
    package) has a pool of its own, one connection a host, which it empties as each is lost:
    taken for Twisted's, its connection was iterated as a list, and Scrapy's minute-long
    idle-slot loop failed (TypeError) at its first turn with one open, and stopped for the rest
    of the crawl: no slot dropped again, nor what focused.robots and focused.retryafter keep
    with them. In a process of its own: the handler needs Twisted's reactor installed."""
    pytest.importorskip("h2")
    probe = """
from scrapy.utils.reactor import install_reactor
install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
from scrapy.core._http2.protocol import H2ClientProtocol
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred
from twisted.web.client import URI
from focused.downloader import PoliteDownloader
handler = "scrapy.core.downloader.handlers.http2.H2DownloadHandler"
crawler = get_crawler(settings_dict={"DOWNLOAD_HANDLERS": {"https": handler}})
downloader = PoliteDownloader(crawler)
pool = downloader.handlers._get_handler("https")._pool
connection = H2ClientProtocol(URI.fromBytes(b"https://127.0.0.1:18220/"), crawler, Deferred())
pool.put_connection(connection, (b"https", b"127.0.0.1", 18220))
downloader._forget_closed_connections()
assert list(pool._connections.values()) == [connection]
print("kept")
"""
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.stdout == "kept\n", result.stderr[-3000:]
