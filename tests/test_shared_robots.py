"""A host's robots.txt in a crawl shared by several processes: downloaded once for the crawl."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from asyncio import CancelledError
from types import SimpleNamespace

import pytest
import redis
from scrapy import Request
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
    IgnoreRequest,
)
from scrapy.http import Response
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred

from focused.distributed import SharedCrawl
from focused.replayweb import ReplayServer
from focused.robots import FAILED, PARSED, RobotsTxtMiddleware
from tests.conftest import BIRD_SEED, run_crawl
from tests.queues import QueueSpider
from tests.sites import GATED_DOWNLOAD_TIMEOUT, FetchLog, Reply, Site, html
from tests.test_canonical import stat
from tests.test_politeness import crawl_in_background, stop_once_said
from tests.test_redis_frontier import (  # noqa: F401 (redis_server is a fixture)
    Joined,
    crawl_by_two_processes,
    redis_server,
    responses,
)
from tests.test_robots import (
    FAILED_AT_FIRST,
    crawl_past_a_failed_robots_txt,
    failing_robots_txt,
)

TIMEOUT = 5  # FOCUSED_WORKER_TIMEOUT of the processes below


def process(url: str) -> SharedCrawl:
    """One process's view of crawl ``t``, with a heartbeat, as ``DistributedCrawl`` beats it."""
    crawler = get_crawler(QueueSpider, {"FOCUSED_WORKER_TIMEOUT": TIMEOUT})
    shared = SharedCrawl(crawler, url, "t")
    beat(shared, 0)
    return shared


def beat(shared: SharedCrawl, age: int) -> None:
    now = shared.redis.time()[0]
    shared.redis.hset(shared.key("workers"), shared.worker, now - age)


def test_one_process_downloads_a_robots_txt_and_the_others_read_what_it_read(redis_server):  # noqa: F811
    first, second = process(redis_server.url), process(redis_server.url)
    assert first.robots_txt("a.example") == (None, True, 0)
    assert second.robots_txt("a.example") == (None, False, 0)  # wait: the first is downloading
    assert first.robots_txt("a.example") == (None, True, 0)  # still its own to download
    assert second.robots_txt("b.example") == (None, True, 0)  # another host is another download
    second.share_robots_txt("b.example", b"")  # gave up: not the host's failure, none to share
    assert first.robots_txt("b.example") == (None, True, 0)  # the next to ask downloads it
    first.share_robots_txt("a.example", b"+User-agent: *\nDisallow: /private/\n")
    outcome, ours, life = second.robots_txt("a.example")
    assert (outcome, ours) == (b"+User-agent: *\nDisallow: /private/\n", False)
    assert 23 * 3600 < life <= 24 * 3600  # RFC 9309: a cached copy serves 24 h
    assert first.robots_txt("a.example")[0] is not None


def test_a_robots_txt_download_goes_to_another_process_when_its_own_is_gone(redis_server):  # noqa: F811
    first, second, third = (process(redis_server.url) for _ in range(3))
    assert first.robots_txt("a.example") == (None, True, 0)
    beat(first, TIMEOUT + 2)  # silent for longer than the timeout: dead
    assert second.robots_txt("a.example") == (None, True, 0)
    assert third.robots_txt("a.example") == (None, False, 0)  # the second has it now
    second.redis.hdel(second.key("workers"), second.worker)  # closed, as spider_closed does
    assert third.robots_txt("a.example") == (None, True, 0)


class SlowRobots(ReplayServer):
    """The replay web whose robots.txt is answered once both processes of crawl ``shared``
    have joined, a second later, and whose other articles than the seed wait for both too:
    the second process asks for robots.txt while the first is downloading it, and both fetch."""

    def __init__(self, *args, joined: Joined, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.joined = joined

    def respond(self, path: str) -> tuple[int, str, str]:
        if path == "/robots.txt":
            self.joined.wait()
            time.sleep(1.0)
        elif path != f"/wiki/{BIRD_SEED}":
            self.joined.wait()
        return super().respond(path)


def test_processes_of_a_crawl_download_a_hosts_robots_txt_once_and_all_obey_it(
    tmp_path,
    sample_graph,
    redis_server,  # noqa: F811
):
    """Each process downloaded the host's robots.txt itself: two GETs of it for one crawl."""
    server = SlowRobots(sample_graph, joined=Joined(redis_server.url), crawl_delay=0.2).start()
    try:
        settings = {
            "FOCUSED_FRONTIER": redis_server.url,
            "CLOSESPIDER_PAGECOUNT": 12,
            "DOWNLOAD_TIMEOUT": GATED_DOWNLOAD_TIMEOUT,
        }
        logs = crawl_by_two_processes(tmp_path, server, settings)
    finally:
        server.stop()
    assert server.fetched.count("/robots.txt") == 1, server.fetched
    for log in logs:
        assert responses(log) >= 1, log[-3000:]  # each fetched articles
        # Each learnt the Crawl-delay, so each parsed the robots.txt.
        assert "robots.txt asks for a Crawl-delay of 0.2 s" in log, log[-3000:]
    stats = [re.findall(r"'focused/robots/read_by_another_process': (\d+)", log) for log in logs]
    assert sorted(stats) == [[], ["1"]], stats  # the other read it from the first
    client = redis.Redis.from_url(redis_server.url)
    assert client.keys("focused:shared:robots-fetching:*") == []
    (kept,) = client.keys("focused:shared:robots:*")
    assert 23 * 3600 < client.ttl(kept) <= 24 * 3600  # RFC 9309: a cached copy serves 24 h


def process_middleware(url: str, settings: dict[str, object]) -> RobotsTxtMiddleware:
    """The robots.txt middleware of a new process of the shared crawl on the Redis at ``url``."""
    crawler = get_crawler(QueueSpider, settings)
    crawler.spider = QueueSpider()
    crawler.spider.shared = process(url)
    return RobotsTxtMiddleware(crawler)


def test_only_a_host_that_cannot_be_reached_is_shared_as_a_failed_robots_txt(redis_server):  # noqa: F811
    """A download that failed for any reason was shared as the host's: a process stopping while
    it downloaded a robots.txt let every process of the crawl through every URL of the host. A
    host that cannot be reached forbids everything (RFC 9309 2.3.1.4) in every process: each
    let every URL of it through."""
    page = Request("http://down.example/page")
    settings = {"ROBOTSTXT_OBEY": True, "FOCUSED_WORKER_TIMEOUT": TIMEOUT}

    downloader = process_middleware(redis_server.url, settings)
    for netloc, error in [
        ("down.example", DownloadTimeoutError()),
        ("mine.example", CancelledError()),
    ]:
        assert downloader.crawler.spider.shared.robots_txt(netloc) == (None, True, 0)
        downloader._parsers[netloc] = Deferred()  # as while it downloads
        downloader._robots_error(error, netloc)
    assert downloader._parsers["mine.example"] is None  # this process lets its URLs through
    other = process_middleware(redis_server.url, settings)
    outcome, ours, _ = other.crawler.spider.shared.robots_txt("down.example")
    assert outcome == FAILED + b"DownloadTimeoutError" and not ours
    assert other.crawler.spider.shared.robots_txt("mine.example") == (None, True, 0)  # to download
    reader = process_middleware(redis_server.url, settings)
    parser = asyncio.run(reader._read_by_the_crawl(page, "down.example"))
    for each, rp in [(downloader, downloader._parsers["down.example"]), (reader, parser)]:
        assert not rp.allowed(page.url, each._useragent(page))
        with pytest.raises(IgnoreRequest, match=r"could not be fetched: DownloadTimeoutError$"):
            each.process_request_2(rp, page)


def test_the_requests_of_a_host_that_is_not_there_are_refused_in_every_process(redis_server):  # noqa: F811
    """A host whose robots.txt timed out has its requests held until it is fetched again
    (ROBOTS_HOLD_RETRIES); one that refused the connection (a mistyped port) or does not
    resolve, refused at once, as the process that downloaded it shares."""
    settings = {
        "ROBOTSTXT_OBEY": True,
        "FOCUSED_WORKER_TIMEOUT": TIMEOUT,
        "ROBOTS_RETRY_FAILED_AFTER": 300,
        "ROBOTS_HOLD_RETRIES": 3,
    }
    failures = {
        "slow.example": DownloadTimeoutError(),
        "closed.example": DownloadConnectionRefusedError(),
        "unnamed.example": CannotResolveHostError(),
    }
    # Each crawl's scheduler, which keeps the requests held (FocusedScheduler).
    engine = SimpleNamespace(
        _slot=SimpleNamespace(scheduler=SimpleNamespace(holds_for_robots=True))
    )
    downloader = process_middleware(redis_server.url, settings)
    downloader.crawler.engine = engine
    for netloc, error in failures.items():
        assert downloader.crawler.spider.shared.robots_txt(netloc)[1]  # this one downloads it
        downloader._parsers[netloc] = Deferred()  # as while it downloads
        downloader._robots_error(error, netloc)
    reader = process_middleware(redis_server.url, settings)
    reader.crawler.engine = engine
    for netloc in failures:
        asyncio.run(reader._read_by_the_crawl(Request(f"http://{netloc}/"), netloc))
    for each in (downloader, reader):
        assert each.holding_until("slow.example") is not None
        assert each.holding_until("closed.example") is None
        assert each.holding_until("unnamed.example") is None


def test_the_process_that_shares_a_failed_robots_txt_waits_for_its_time_in_redis(
    redis_server,  # noqa: F811
    monkeypatch,
):
    """The process whose robots.txt download failed ran the failure's time from before it
    shared it: on a loaded machine, where the share came late, its time ended before Redis's,
    and the host's next request read the crawl's failure, not expired yet, as a new one: a
    failure more in a row (towards ROBOTS_HOLD_RETRIES) and its retry counted twice (seen in
    test_a_shared_crawl_fetches_a_failed_robots_txt_again_once_it_expires, under load)."""
    netloc, retry, late = "down.example", 1.0, 0.3
    settings = {
        "ROBOTSTXT_OBEY": True,
        "FOCUSED_WORKER_TIMEOUT": TIMEOUT,
        "ROBOTS_RETRY_FAILED_AFTER": retry,
    }
    downloader = process_middleware(redis_server.url, settings)
    shared = downloader.crawler.spider.shared
    share = shared.share_robots_txt

    def shared_late(*args, **kwargs):
        time.sleep(late)  # the event loop busy with a page meanwhile
        share(*args, **kwargs)

    monkeypatch.setattr(shared, "share_robots_txt", shared_late)
    assert shared.robots_txt(netloc)[1]  # this one downloads it
    downloader._parsers[netloc] = Deferred()  # as while it downloads
    downloader._robots_error(DownloadTimeoutError(), netloc)
    page = Request(f"http://{netloc}/page")
    while netloc in downloader._retry_at:  # its time here: forgotten once up
        downloader.waits_for_robots(page)
        time.sleep(0.005)
    # Up no earlier than in Redis: the host's next request downloads it, in this process.
    assert shared.robots_txt(netloc) == (None, True, 0)


@pytest.mark.parametrize("failure", ["unreachable", "server_error"])
def test_a_failed_robots_txt_is_read_again_by_every_process_after_its_time(
    redis_server,  # noqa: F811
    failure,
):
    """A robots.txt that failed (a network error, a 503) was kept 24 h in Redis and for good by
    each process that read it: a host down for a moment was refused by every process for the
    rest of the crawl. It is kept ROBOTS_RETRY_FAILED_AFTER in Redis, and by each process for
    what was left of that when it read it; then the next process to ask downloads it again."""
    netloc, retry = "down.example", 2.0
    page = Request(f"http://{netloc}/page")
    settings = {
        "ROBOTSTXT_OBEY": True,
        "FOCUSED_WORKER_TIMEOUT": TIMEOUT,
        "ROBOTS_RETRY_FAILED_AFTER": retry,
    }

    downloader = process_middleware(redis_server.url, settings)
    assert downloader.crawler.spider.shared.robots_txt(netloc)[1]  # this one downloads it
    downloader._parsers[netloc] = Deferred()  # as while it downloads
    if failure == "unreachable":
        downloader._robots_error(DownloadTimeoutError(), netloc)
    else:
        # The downloader's slot, which the robots.txt's Crawl-delay would pace, is not at issue.
        downloader.crawler.engine = SimpleNamespace(
            downloader=SimpleNamespace(
                get_slot_key=lambda request: netloc, robots_txt_ended=lambda key: None
            )
        )
        answer = Response(f"http://{netloc}/robots.txt", status=503, body=b"unavailable")
        asyncio.run(downloader._parse_robots(answer, netloc, page))
    client = redis.Redis.from_url(redis_server.url)
    assert 0 < client.pttl(f"focused:t:robots:{netloc}") <= retry * 1000
    reader = process_middleware(redis_server.url, settings)
    parser = asyncio.run(reader._read_by_the_crawl(page, netloc))
    assert not parser.allowed(page.url, reader._useragent(page))
    for each in (downloader, reader):
        assert not each.waits_for_robots(page)  # read: the host is refused for now
    time.sleep(retry + 0.1)
    for each in (downloader, reader):
        assert each.waits_for_robots(page)  # to be read again, the host held meanwhile
        assert each.crawler.stats.get_value("focused/robots/failed_retried") == 1
    assert client.get(f"focused:t:robots:{netloc}") is None
    assert reader.crawler.spider.shared.robots_txt(netloc) == (None, True, 0)  # to download


@pytest.mark.parametrize("failure", FAILED_AT_FIRST, ids=["server_error", "dropped"])
def test_a_shared_crawl_fetches_a_failed_robots_txt_again_once_it_expires(
    tmp_path,
    redis_server,  # noqa: F811
    failure,
):
    """The failed robots.txt was kept 24 h in Redis: the host's later links were refused. The
    link asked for while it failed is held, in flight in Redis, and fetched once it is read."""
    settings = {"FOCUSED_FRONTIER": redis_server.url}
    crawl, down, robots_asked = crawl_past_a_failed_robots_txt(tmp_path, failure, settings)
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert sorted(down.log.gets()) == [(down.host, "/early"), (down.host, "/late")], log[-3000:]
    assert len(robots_asked) == 2
    assert stat(log, "focused/robots/failed_retried") == 1
    assert stat(log, "focused/robots/held_requests") == 1
    client = redis.Redis.from_url(redis_server.url)
    kept = f"focused:test:robots:{down.url.removeprefix('http://')}"
    assert client.get(kept) == b"+User-agent: *\nAllow: /\n"
    assert client.ttl(kept) > 23 * 3600  # what was read is kept as long as ever


def test_a_shared_crawl_checks_robots_txt_against_the_url_as_linked(tmp_path, redis_server):  # noqa: F811
    """Links to a host whose robots.txt no process has read are queued in Redis and checked
    by whichever process fetches them: each still against the URL as the page spelled it
    (``/*?sort=`` was matched against the sorted query, and let every one through)."""
    gate = Joined(redis_server.url)

    def other(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(200, "User-agent: *\nDisallow: /*?sort=\n", "text/plain")
        return Reply(200, html(path, "<p>birds feathers nests</p>"))

    with Site(other, "127.0.0.3") as target:
        links = [f"{target.url}/list?sort=price&cat={n}" for n in range(6)]
        links += [f"{target.url}/ok{n}" for n in range(6)]

        def seed(method: str, path: str) -> Reply:
            if path == "/robots.txt":
                return Reply(200, "User-agent: *\nDisallow:\n", "text/plain")
            gate.wait()  # both processes are in the crawl before there is anything to share
            anchors = "".join(f"<a href='{link}'>birds</a>" for link in links)
            return Reply(200, html(path, f"<p>birds feathers nests</p>{anchors}"))

        with Site(seed, "127.0.0.2") as site:
            settings = {
                "FOCUSED_FRONTIER": redis_server.url,
                "DOWNLOAD_TIMEOUT": GATED_DOWNLOAD_TIMEOUT,
            }
            spider_args = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"}
            logs = crawl_by_two_processes(tmp_path, site, settings, **spider_args)
    assert sorted(path for _, path in target.log.gets()) == [f"/ok{n}" for n in range(6)]
    assert sum(stat(log, "robotstxt/forbidden") for log in logs) == 6


def test_a_robots_txt_read_from_the_crawl_is_kept_no_longer_than_it_lives_there(
    redis_server,  # noqa: F811
    monkeypatch,
):
    """Read from Redis with an hour of its 24 left, a robots.txt's text was kept 24 hours more,
    to be parsed again after its parser was forgotten: used up to 48 hours after its download
    (RFC 9309 2.4: 24 at most)."""
    netloc, life = "a.example", 3600
    page = Request(f"http://{netloc}/private/1")
    process(redis_server.url).share_robots_txt(
        netloc, PARSED + b"User-agent: *\nDisallow: /private/\n", life
    )
    reader = process_middleware(
        redis_server.url, {"ROBOTSTXT_OBEY": True, "ROBOTS_TEXTS_MAX": 10, "ROBOTS_PARSERS_MAX": 1}
    )
    parser = asyncio.run(reader._read_by_the_crawl(page, netloc))
    assert not parser.allowed(page.url, reader._useragent(page))
    assert reader._has_fresh_text(netloc) and not reader._expired(netloc)
    now = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: now + life + 1)
    # Downloaded again, as by every process: parsed again from its text, or its parser kept.
    assert not reader._has_fresh_text(netloc) and reader._expired(netloc)


def test_a_robots_txt_another_process_fails_to_read_again_keeps_its_old_rules(
    redis_server,  # noqa: F811
    monkeypatch,
):
    """A robots.txt read again after its 24 hours, which another process of the crawl failed
    to download, leaves the rules read before in force (RFC 9309 2.4), as in the process that
    failed, for as long as the failure is kept in Redis: not complete disallow, nor held."""
    netloc, life = "a.example", 3600
    private, public = Request(f"http://{netloc}/private/1"), Request(f"http://{netloc}/public/1")
    other = process(redis_server.url)
    other.share_robots_txt(netloc, PARSED + b"User-agent: *\nDisallow: /private/\n", life)
    reader = process_middleware(redis_server.url, {"ROBOTSTXT_OBEY": True, "ROBOTS_PARSERS_MAX": 9})
    reader.crawler.engine = SimpleNamespace()  # no crawl to wake as it is read
    asyncio.run(reader.robot_parser(public))
    now = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: now + life + 1)
    other.share_robots_txt(netloc, FAILED + b"timed out", 60)  # its read expired, then failed
    parser = asyncio.run(reader.robot_parser(public))
    assert parser.allowed(public.url, reader._useragent(public))
    assert not parser.allowed(private.url, reader._useragent(private))
    assert not reader._holding and reader._stats.get_value("focused/robots/expired") == 1
    assert now + life + 1 + 55 < reader._expires_at[netloc] <= now + life + 1 + 60


def test_a_shared_crawl_waits_for_its_held_requests_before_its_budget_closes_it(
    tmp_path,
    redis_server,  # noqa: F811
):
    """A request held for its host's failed robots.txt keeps the slot of the page budget its
    pop took: once the others were taken, the process closed as if the budget were spent,
    short of it, the held requests left queued. It waits for them as for another process's."""
    robots_asked: list[float] = []
    with Site(failing_robots_txt(robots_asked)) as down:

        def linking(method: str, path: str) -> Reply:
            links = ""
            if path == "/":
                links = "".join(f"<a href='{down.url}/{n}'>down</a>" for n in range(2))
                links += "".join(f"<a href='/{n}'>up</a>" for n in range(6))
            return Reply(200, html(path, f"<p>birds feathers nests</p>{links}"))

        with Site(linking, "127.0.0.2") as up:
            crawl = run_crawl(
                tmp_path,
                {"strategy": "bfs", "query": "birds", "seeds": f"{up.url}/"},
                {
                    "FOCUSED_FRONTIER": redis_server.url,
                    "RETRY_TIMES": 0,
                    "ROBOTS_RETRY_FAILED_AFTER": 1.5,
                    "CLOSESPIDER_PAGECOUNT": 5,
                    "CONCURRENT_REQUESTS": 1,
                },
            )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert stat(log, "focused/robots/held_requests") == 2, log[-3000:]
    assert len(crawl.pages()) == 5, log[-3000:]


@pytest.mark.parametrize("head_check", [False, True])
def test_ctrl_c_does_not_wait_for_a_robots_txt_another_process_downloads(
    tmp_path,
    redis_server,  # noqa: F811
    head_check,
):
    """Ctrl-C of a process of a shared crawl whose seed waits for its host's robots.txt, which
    another process (alive, here 30 s) is downloading: the stop waited as long as that download
    took, 35 s here. It ends at once now, sends nothing, and gives the seed back to the
    frontier. Its close line said the seed was held by its host's delay or pause (with
    HEAD_CHECK still after the robots.txt line was added: the HEAD, not the seed, was counted)."""
    log = FetchLog()
    robots: list[str] = []

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            robots.append(path)
            return Reply(200, "User-agent: *\n", "text/plain")
        return Reply(200, html("birds", "<p>birds nest feathers</p>"))

    downloading, gone = process(redis_server.url), threading.Event()

    def alive_for(seconds: float) -> None:
        end = time.monotonic() + seconds
        while not gone.wait(1) and time.monotonic() < end:
            beat(downloading, 0)

    with Site(respond, "127.0.0.2", log) as site:
        assert downloading.robots_txt(site.url.split("//", 1)[1])[1]  # its download
        threading.Thread(target=alive_for, args=(30,), daemon=True).start()
        arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/", "crawl_id": "t"}
        crawl = crawl_in_background(
            tmp_path, arguments, {"FOCUSED_FRONTIER": redis_server.url, "HEAD_CHECK": head_check}
        )
        try:  # the seed waits for the robots.txt: 3 s
            stderr, stopped = stop_once_said(crawl, "joined crawl t", 3, timeout=60)
        finally:
            gone.set()
    assert crawl.returncode == 0, stderr[-3000:]
    assert stopped < 10, stderr[-3000:]
    assert (robots, log.entries) == ([], [])
    assert stat(stderr, "focused/closing/not_sent") == 1
    # It waited for the robots.txt, not for its host's delay, a pause or a connection.
    assert (
        "Not sent as the crawl stopped: 1 request waiting for their host's robots.txt; in"
        " flight in the frontier still, fetched when it goes on"
    ) in stderr, stderr[-3000:]
    assert "Re-queued 1 unfinished request of worker" in stderr, stderr[-3000:]
