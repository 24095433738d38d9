"""The shared frontier on a real redis-server: the queue, then crawls by several processes."""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

import numpy
import pytest
import redis
import scrapy
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

import focused.settings
from focused.arguments import CHECKED_ARGUMENTS, parse_arguments
from focused.distributed import (
    DistributedCrawl,
    FrontierAck,
    SharedCrawl,
    _check_budget,
    crawl_prefix,
    take_back_budget,
)
from focused.errors import ConfigError
from focused.jobchecks import check_store
from focused.render import RenderMiddleware
from focused.scheduler import FocusedScheduler
from focused.sqlitestore import SqliteStore
from focused.strategies import STRATEGIES, strategy_class
from focused.traps import TRAP_META
from schedulers import redis_frontier
from schedulers.base import RANKED_CHUNK, StrategyQueue, host_of, load_request
from schedulers.rank_semantic import CRAWLABLE, HELD_BACK, UNRANKED, LinkGraph
from schedulers.redis_frontier import INFLIGHT_META, decode_tiebreak, encode_tiebreak
from spiders import topical
from spiders.topical import TopicalSpider
from tests.conftest import (
    BIRD_QUERY,
    BIRD_SEED,
    REPO,
    Crawl,
    crawl_args,
    crawl_env,
    page_name,
    run_crawl,
    scrapy_command,
)
from tests.queues import QueueSpider, make_queue, rankings_after, req
from tests.sites import (
    GATED_DOWNLOAD_TIMEOUT,
    HOLD_TIMEOUT,
    FetchLog,
    Gate,
    GatedReplay,
    Hold,
    Reply,
    Site,
    html,
)
from tests.test_frontier_limits import find, left_out_by_max_depth_1, left_out_said
from tests.test_politeness import (
    Timed,
    assert_left_unsent_and_fetched_on_resume,
    ctrl_c_while_a_retry_waits,
    many_pages_site,
)
from tests.test_resume import _reachable as reachable
from tests.test_score_strategies import _band_graph, _redirect_graph, assert_ranked_as_one_page_each
from tests.test_storage import page as page_record

REDIS_SERVER = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A redis-server of our own on a free loopback port; ``persistent`` keeps data in ``dir``."""

    def __init__(
        self,
        directory: Path,
        persistent: bool = False,
        password: str | None = None,
        options: list[str] | None = None,
    ) -> None:
        self.dir = directory
        self.port = free_port()
        self.persistent = persistent
        self.password = password
        self.options = options or []  # more of redis-server's options
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        login = f":{self.password}@" if self.password else ""
        return f"redis://{login}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"]
        if not self.persistent:
            persistence = ["--appendonly", "no"]
        address = ["--port", str(self.port), "--bind", "127.0.0.1"]
        login = ["--requirepass", self.password] if self.password else []
        files = ["--save", "", *persistence, "--dir", str(self.dir)]
        self.process = subprocess.Popen(
            [REDIS_SERVER, *address, *login, *files, *self.options],
            stdout=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, password=self.password)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: redis-server saves what it must, then exits
            self.process.wait(timeout=20)
        self.process = None


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


def shared_queue(
    url: str,
    strategy: str = "bestfirst",
    budget: int = 0,
    crawl_id: str = "t",
    frontier_max: int = 0,
    **params,
):
    """A strategy queue on the Redis frontier, as one process of a crawl would build it."""
    settings = {"CLOSESPIDER_PAGECOUNT": budget, "FRONTIER_MAX": frontier_max}
    crawler = get_crawler(QueueSpider, settings)
    spider = QueueSpider()
    spider.strategy_params, spider.state = params, {}
    crawler.spider, spider.crawler = spider, crawler
    spider.shared = SharedCrawl(crawler, url, crawl_id)
    return strategy_class(strategy).from_crawler(crawler, None, "", ())


def urls(requests) -> list[str]:
    return [r.url.rsplit("/", 1)[1] for r in requests]


def drain(queue) -> list[str]:
    popped = []
    while (request := queue.pop()) is not None:
        popped.append(request)
    return urls(popped)


# -- the queue -----------------------------------------------------------------------------------


def sample_requests():
    rng = random.Random(5)
    return [
        req(
            f"p{i}",
            parent_relevance=rng.choice([0.1, 0.25, 0.5, 0.9]),  # many ties, broken by tiebreak
            link_relevance=rng.choice([0.0, 0.3, 0.3, 0.7]),  # some ties, broken by push order
            depth=rng.randint(0, 4),
        )
        for i in range(60)
    ]


@pytest.mark.parametrize("strategy", ["bestfirst", "bfs"])
def test_pops_in_the_same_order_as_the_memory_frontier(redis_server, strategy):
    shared, local = shared_queue(redis_server.url, strategy), make_queue(strategy)
    for request in sample_requests():
        shared.push(request)
        local.push(request.copy())
    assert len(shared) == len(local) == 60
    assert urls([shared.peek()]) == urls([local.peek()])
    assert drain(shared) == drain(local)
    assert len(shared) == 0


def test_ranked_lists_the_pop_order_and_take_pops_one_into_flight(redis_server):
    one = shared_queue(redis_server.url, budget=4)
    two = shared_queue(redis_server.url, budget=4)
    requests = [req(f"p{i}", parent_relevance=1 - i / 100) for i in range(RANKED_CHUNK + 8)]
    for request in requests:
        one.push(request)
    one.push(req("trap", parent_relevance=1.0, **{TRAP_META: "calendar"}))  # at the back
    listed = list(one.ranked())  # read in chunks: more than one of them
    assert len(one) == len(listed) == len(requests) + 1
    assert [fp for fp, _ in listed] == [one._fingerprint(r) for r in [*requests, req("trap")]]
    assert {host for _, host in listed} == {"t"}
    taken = two.take(listed[2][0])  # another process: into its flight, on its budget
    assert urls([taken]) == ["p2"]
    assert two.frontier.redis.zscore(two.frontier.shared.inflight_key(), taken.meta[INFLIGHT_META])
    assert one.take(listed[2][0]) is None  # popped meanwhile
    assert urls([one.pop(), one.pop(), one.pop()]) == ["p0", "p1", "p3"]
    assert one.take(listed[4][0]) is None  # four popped: the budget is spent
    assert len(one) == len(requests) - 3


def test_a_request_that_cannot_be_read_is_dropped_with_a_warning(redis_server, caplog):
    """A request whose bytes in Redis are no request (another program's, written by hand) was
    a traceback at each turn of the engine, popped again each time: the crawl fetched nothing
    more. It is dropped as the JOBDIR frontier drops one, and the next is handed out."""
    queue = shared_queue(redis_server.url, budget=3)
    for i in range(6):
        queue.push(req(f"p{i}", parent_relevance=1 - i / 10))
    queue.frontier.flush()
    client, stored = redis.Redis.from_url(redis_server.url), "focused:t:requests"
    for i, junk in ((0, b"junk"), (1, b"\x80\x04junk"), (3, b"\xff\n\x80junk")):
        client.hset(stored, queue._fingerprint(req(f"p{i}")), junk)
    listed = list(queue.ranked())  # listed all the same: take drops them
    assert len(listed) == 6 and queue.take(listed[1][0]) is None
    assert urls([queue.pop(), queue.pop(), queue.pop()]) == ["p2", "p4", "p5"]
    assert queue.pop() is None  # the budget, three: the dropped took none of it
    assert caplog.text.count(f"{stored}: a request cannot be read (") == 3
    assert queue.frontier._spider.crawler.stats.get_value("focused/resume/damaged_requests") == 3


def test_ranked_reads_each_hosts_without_unpickling_a_request(redis_server, monkeypatch):
    """A look past held hosts unpickled every request it listed to learn its host: 17.6 of 45 s
    of a profiled 500-page crawl by one process on Redis (session 21)."""
    queue = shared_queue(redis_server.url)
    requests = [
        scrapy.Request(f"http://h{i % 3}.example/p{i}", meta={"parent_relevance": 1 - i / 100})
        for i in range(RANKED_CHUNK + 8)
    ]
    requests.append(scrapy.Request("data:,no-host", meta={"parent_relevance": 0.0}))
    for request in requests:
        queue.push(request)
    unpickled = []
    monkeypatch.setattr(
        redis_frontier, "load_request", lambda *args: unpickled.append(args) or load_request(*args)
    )
    listed = list(queue.ranked())
    assert [host for _, host in listed] == [host_of(request) for request in requests]
    assert listed[-1][1] == ""
    assert unpickled == []
    assert urls([queue.pop()]) == ["p0"]  # the host before the pickle is not the request's


def test_ranked_from_a_rank_on_reads_from_there(redis_server):
    queue = shared_queue(redis_server.url)
    count = 3 * RANKED_CHUNK + 5
    for i in range(count):
        meta = {"parent_relevance": (i % 13) / 13, TRAP_META: "family" if i % 10 == 0 else None}
        queue.push(req(f"p{i}", **{k: v for k, v in meta.items() if v is not None}))
    every = list(queue.ranked())
    assert len(every) == count
    back = count - sum(1 for i in range(count) if i % 10)  # the trap requests, ranked last
    for start in (0, 1, RANKED_CHUNK, 2 * RANKED_CHUNK + 1, count - back, count - 1, count + 3):
        assert list(queue.ranked(start)) == every[start:]


def test_requests_stored_by_an_older_version_are_ranked_and_popped(redis_server):
    """A crawl begun before hosts were stored with requests (their pickle alone) goes on."""
    queue = shared_queue(redis_server.url)
    for i in range(3):
        queue.push(req(f"p{i}", parent_relevance=1 - i / 10))
    frontier = queue.frontier
    frontier.flush()
    stored_key = frontier._keys[2]
    for fp, stored in frontier.redis.hgetall(stored_key).items():
        frontier.redis.hset(stored_key, fp, stored.partition(redis_frontier.HOST_END)[2])
    assert [host for _, host in queue.ranked()] == ["t", "t", "t"]
    assert drain(queue) == ["p0", "p1", "p2"]


def test_tiebreak_bytes_sort_as_the_numbers():
    rng = random.Random(1)
    values = [0.0, -0.0, 1.0, -1.0, 1e-300, -1e300, 0.5] + [rng.uniform(-5, 5) for _ in range(200)]
    encoded = sorted(values, key=encode_tiebreak)
    assert [round(v, 12) for v in encoded] == [round(v, 12) for v in sorted(values)]
    assert all(decode_tiebreak(encode_tiebreak(v)) == v for v in values)


def test_rediscovery_only_raises_a_score(redis_server):
    queue = shared_queue(redis_server.url)
    queue.push(req("a", parent_relevance=0.5, link_relevance=0.1))
    queue.push(req("b", parent_relevance=0.6))
    assert not queue.rediscover(req("a", parent_relevance=0.2))  # worse: ignored
    assert queue.rediscover(req("a", parent_relevance=0.5, link_relevance=0.4))  # tiebreak
    assert queue.rediscover(req("a", parent_relevance=0.8, link_relevance=0.0))
    assert len(queue) == 2  # raised in place, not added
    first = queue.pop()
    assert urls([first]) == ["a"] and first.meta["parent_relevance"] == 0.8
    assert urls([queue.pop()]) == ["b"]


def test_shark_rediscovery_raising_a_url_keeps_its_larger_remaining_depth(redis_server):
    """A better score found through irrelevant pages (by another process) takes the queued
    request's shorter run along; one that does not raise the URL gives it its own shorter run
    (``RedisFrontier.merge_path``)."""
    one, two = (shared_queue(redis_server.url, "shark") for _ in range(2))
    near = {"shark_sim": 0.3, "shark_run": 0, "anchor_relevance": 0.0}
    far = {"shark_sim": 0.8, "shark_run": 2, "anchor_relevance": 0.9}
    one.push(req("x", **near, parent_url="http://t/near"))
    one.push(req("z", **far))
    one.frontier.flush()
    assert two.rediscover(req("x", **far, parent_url="http://t/far"))
    assert not two.rediscover(req("z", **near))  # not raised, but merged in Redis
    two.frontier.flush()
    x, z = one.pop(), one.pop()
    assert x.meta["parent_url"] == "http://t/far" and x.meta["shark_run"] == 0
    assert z.meta["shark_run"] == 0 and z.meta["anchor_relevance"] == 0.9
    assert two.stats.get_value("focused/merged") == 1


def test_shark_rediscovery_not_raising_a_url_merges_its_path_as_one_process(redis_server):
    """Found again on a relevant page through a poorer anchor, a URL queued at the end of a
    run of irrelevant pages gets its full depth back (shark's docstring): on the shared
    frontier too, found by this process or another, and its links are then not cut."""
    far = {"shark_sim": 0.9, "shark_run": 2, "anchor_relevance": 0.9, "parent_url": "http://t/f"}
    near = {"shark_sim": 0.3, "shark_run": 0, "anchor_relevance": 0.0, "parent_url": "http://t/n"}
    alone = make_queue("shark")
    one, two = (shared_queue(redis_server.url, "shark") for _ in range(2))
    for queue, finder in [(alone, alone), (one, one), (one, two)]:
        queue.push(req(f"x{id(finder)}", **far))
        queue.push(req(f"y{id(finder)}", **near))
        for found in [req(f"x{id(finder)}", **near), req(f"y{id(finder)}", **far)]:
            if queue is one:
                one.frontier.flush()  # as the page is done
            finder.rediscover(found)
        if finder is not alone:
            finder.frontier.flush()
        x, y = queue.pop(), queue.pop()  # x still first: not raised, not lowered
        assert [x.url, y.url] == [f"http://t/x{id(finder)}", f"http://t/y{id(finder)}"]
        assert x.meta["parent_url"] == "http://t/f"  # the better discovery's link
        assert (x.meta["shark_run"], x.meta["shark_sim"]) == (0, 0.3)  # the relevant page's
        assert (y.meta["shark_run"], y.meta["shark_sim"]) == (0, 0.3)  # its own, the better


def test_shark_paths_go_with_a_request_replaced_or_never_fetched(redis_server):
    """A popped request whose redirect to another URL was queued (``ack_replaced``), or that
    ends unfetched (``unpop``: its host full), takes its merged path out of Redis with it."""
    queue = shared_queue(redis_server.url, "shark")
    for name in ("redirected", "capped"):
        queue.push(req(name, shark_sim=0.5, shark_run=1))
    queue.frontier.flush()
    paths = queue.frontier._paths_key
    assert queue.frontier.redis.hlen(paths) == 2
    redirected, capped = queue.pop(), queue.pop()
    queue.push(req("target", shark_sim=0.5, shark_run=1))  # the redirect's target
    queue.frontier.ack_replaced(redirected.meta[INFLIGHT_META])
    queue.frontier.unpop(capped.meta[INFLIGHT_META])
    target = queue._fingerprint(req("target"))
    assert queue.frontier.redis.hkeys(paths) == [target]


@pytest.mark.parametrize("delta", [0.0, 0.3, 0.5, 1.0])
def test_shark_merges_paths_in_redis_as_in_python(redis_server, delta):
    queue = make_queue("shark", delta=delta)
    merge = redis.Redis.from_url(redis_server.url).register_script(
        queue.shared_merge() + "return merge(ARGV[1], ARGV[2])"
    )
    rng = random.Random(delta)
    sims = [0.0, 0.1, 0.3, 0.6, 0.9, 1.0]
    for _ in range(300):
        kept, other = (
            req("x", shark_run=rng.randint(0, 4), shark_sim=rng.choice([*sims, rng.random()]))
            for _ in range(2)
        )
        texts = [queue.shared_path(request) for request in (kept, other)]
        queue.merge_paths(kept, other)
        queue.take_shared_path(other, merge(args=texts).decode())
        assert (other.meta["shark_run"], other.meta["shark_sim"]) == (
            kept.meta["shark_run"],
            kept.meta["shark_sim"],
        ), texts


def test_a_lower_score_from_another_process_never_wins(redis_server):
    """The GT rule holds in Redis, not only in the process that checked first."""
    one, two = shared_queue(redis_server.url), shared_queue(redis_server.url)
    one.push(req("a", parent_relevance=0.3))
    one.frontier.flush()  # as its page is done
    fp = one._fingerprint(req("a"))
    two.frontier.put(fp, (-0.9, 0.0, 0), req("a", parent_relevance=0.9))
    two.frontier.flush()
    one.frontier.put(fp, (-0.5, 0.0, 0), req("a", parent_relevance=0.5))  # stale decision
    assert one.frontier.key_of(fp)[0] == -0.9
    assert one.pop().meta["parent_relevance"] == 0.9


def test_concurrent_pops_hand_out_each_request_once(redis_server):
    filler = shared_queue(redis_server.url, "bfs")
    for i in range(400):
        filler.push(req(f"p{i}", depth=i % 7))
    filler.frontier.flush()
    workers = [shared_queue(redis_server.url, "bfs") for _ in range(4)]
    results: list[list[str]] = [[] for _ in workers]

    def work(queue, out):
        while (request := queue.pop()) is not None:
            out.append(request.url)

    pairs = zip(workers, results, strict=True)
    threads = [threading.Thread(target=work, args=pair) for pair in pairs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    popped = [url for result in results for url in result]
    assert len(popped) == len(set(popped)) == 400
    assert all(results), "every client got some"


def test_budget_is_shared_and_unfinished_requests_go_back(redis_server):
    one = shared_queue(redis_server.url, budget=5)
    two = shared_queue(redis_server.url, budget=5)
    for i in range(10):
        one.push(req(f"p{i}", parent_relevance=i / 10))
    taken = [one.pop(), two.pop(), one.pop(), two.pop(), two.pop()]
    assert None not in taken
    assert two.pop() is None and one.pop() is None  # 5 popped in all: the budget is spent
    assert len(one) == 5
    one.frontier.ack(taken[0].meta[INFLIGHT_META])
    assert two.frontier.requeue(two.frontier.shared.worker) == 3  # two's, not finished
    assert len(one) == 8
    # Their budget came back, and they pop again in score order.
    assert urls([one.pop(), one.pop(), two.pop()]) == urls([taken[1], taken[3], taken[4]])
    assert one.pop() is None


def test_a_retry_by_a_process_taken_for_dead_of_a_page_fetched_meanwhile_is_dropped(
    redis_server,
):
    # A process stalled past FOCUSED_WORKER_TIMEOUT, whose download then failed, queued its
    # retry (dont_filter) while the process that took its work fetched the page: that one's
    # ACK dropped the request stored under their one fingerprint, and each pop of the retry
    # raised AttributeError in the engine, put back when idle and popped again, without end.
    slow, other = shared_queue(redis_server.url), shared_queue(redis_server.url)
    slow.push(req("p0", parent_relevance=0.5))
    slow.push(req("p1", parent_relevance=0.1))
    slow.frontier.flush()
    first = slow.pop()
    other.frontier.requeue(slow.frontier.shared.worker)  # silent too long: taken for dead
    taken = other.pop()
    assert urls([taken]) == ["p0"]
    slow.frontier.ack(first.meta[INFLIGHT_META])  # FrontierAck, as the retry is scheduled
    slow.push(first.replace(dont_filter=True))  # the retry
    slow.frontier.flush()
    other.frontier.ack(taken.meta[INFLIGHT_META])  # p0 fetched
    assert urls([other.pop()]) == ["p1"]  # the retry of p0 is dropped: p0 was fetched
    assert other.pop() is None and len(other) == 0
    assert other.frontier.redis.get("focused:t:popped") == b"2"


def test_a_retry_queued_before_its_process_is_taken_for_dead_is_fetched_once(redis_server):
    # The scheduler takes a request out of flight only once its retry is queued (ack_replaced).
    # A process taken for dead between the two had the request put back beside its retry: two
    # members of one fingerprint in the frontier, both popped, the page fetched twice at once.
    slow, other = shared_queue(redis_server.url), shared_queue(redis_server.url)
    slow.push(req("p0", parent_relevance=0.5))
    slow.push(req("p1", parent_relevance=0.1))
    slow.frontier.flush()
    first = slow.pop()
    slow.push(first.replace(dont_filter=True))  # the retry
    slow.frontier.flush()
    assert other.frontier.requeue(slow.frontier.shared.worker) == 1  # silent too long
    assert len(other) == 2
    assert drain(other) == ["p0", "p1"]
    assert other.frontier.redis.get("focused:t:popped") == b"2"
    slow.frontier.ack_replaced(first.meta[INFLIGHT_META])  # the slow process goes on: no change
    assert len(other) == 0


def test_a_process_that_beats_after_it_was_found_silent_keeps_its_requests(redis_server):
    # A tick reads the heartbeats, then takes the work of each silent process. One that beat
    # in between (it was only slow) lost its requests all the same: fetched twice.
    slow, other = shared_queue(redis_server.url), shared_queue(redis_server.url)
    for i in range(2):
        slow.push(req(f"p{i}", parent_relevance=i / 10))
    slow.frontier.flush()
    assert slow.pop() is not None
    shared, redis_client = other.frontier.shared, other.frontier.redis
    workers, silent = shared.key("workers"), slow.frontier.shared.worker
    now = int(redis_client.time()[0])
    redis_client.hset(workers, silent, now - 100)
    run = shared.run

    def beat_after_the_read(function, *args, **kwargs):
        result = run(function, *args, **kwargs)
        if function == redis_client.hgetall:
            redis_client.hset(workers, silent, now)  # the slow process beats just then
        return result

    shared.run = beat_after_the_read
    shared.crawler.engine = SimpleNamespace(_slot=None)
    DistributedCrawl(shared.crawler, shared, timeout=10).tick()
    assert len(other) == 1  # p0 is still the slow process's
    assert redis_client.zcard(shared.inflight_key(silent)) == 1
    shared.run = run
    redis_client.hset(workers, silent, now - 100)
    DistributedCrawl(shared.crawler, shared, timeout=10).tick()  # silent still: taken now
    assert len(other) == 2 and redis_client.zcard(shared.inflight_key(silent)) == 0


def test_a_spent_budget_waits_for_the_requests_a_killed_process_holds(redis_server):
    # A process killed with requests popped holds their budget slots until another takes it
    # for dead and puts them back; closing on the spent budget before then ended the crawl
    # short of its budget, with those requests still queued.
    killed = shared_queue(redis_server.url, budget=4)
    live = shared_queue(redis_server.url, budget=4)
    closes = []
    live.frontier.shared.budget_spent = lambda: closes.append("closespider_pagecount")
    workers = live.frontier.shared.key("workers")
    for queue in (killed, live):  # their heartbeats, as DistributedCrawl beats them
        live.frontier.redis.hset(workers, queue.frontier.shared.worker, int(time.time()))
    for i in range(8):
        live.push(req(f"p{i}", parent_relevance=i / 10))
    live.frontier.flush()
    held = [killed.pop(), killed.pop()]
    for request in (live.pop(), live.pop()):
        live.frontier.ack(request.meta[INFLIGHT_META])
    assert live.pop() is None  # the budget is spent for now...
    assert closes == []  # ...but the killed process's two slots may come back
    assert live.frontier.requeue(killed.frontier.shared.worker) == 2
    assert urls([live.pop(), live.pop()]) == urls(held)
    assert live.pop() is None
    assert closes == ["closespider_pagecount"]  # nothing is held elsewhere: spent for good


def test_a_spent_budget_with_others_under_way_is_looked_at_each_tick(redis_server):
    # With nothing of its own under way, a process whose pop found the budget spent while
    # another process still had requests was asked for requests again only by the engine's
    # 5-s heartbeat (its frontier is not empty, so it is not idle): it closed up to 5 s after
    # the crawl's last page.
    waiting = shared_queue(redis_server.url, budget=2)
    other = shared_queue(redis_server.url, budget=2)
    shared = waiting.frontier.shared
    shared.budget_spent = lambda: None
    for queue in (waiting, other):
        shared.redis.hset(shared.key("workers"), queue.frontier.shared.worker, int(time.time()))
    for i in range(4):
        waiting.push(req(f"p{i}", parent_relevance=i / 10))
    waiting.frontier.flush()
    assert other.pop() is not None and other.pop() is not None
    woken = []
    nextcall = SimpleNamespace(schedule=lambda: woken.append("next_request"))
    shared.crawler.engine = SimpleNamespace(_slot=SimpleNamespace(nextcall=nextcall))
    extension = DistributedCrawl(shared.crawler, shared, timeout=10)
    extension.tick()
    assert woken == []  # the budget was not looked at yet
    assert waiting.pop() is None
    extension.tick()
    assert woken == ["next_request"]  # the engine asks the frontier again, 0.5 s later


def test_counters_go_on_from_the_crawls_once_redis_is_lost(redis_server):
    # Once Redis was lost, a process numbered its pages still under way, and recorded the
    # crawl's pages, from its own count: fetch orders the crawl had given already, and an
    # interrupted crawl of 84 pages stored recorded with 27, those of the process closing last.
    crawler = get_crawler(QueueSpider)
    one, other = (SharedCrawl(crawler, redis_server.url, "t") for _ in "12")
    for _ in range(5):
        other.incr("pages")
    assert one.incr("pages") == 6 and one.counter("pages") == 6
    other.incr("pages")
    assert one.counter("pages") == 7
    redis_server.stop()
    assert one.incr("pages") == 8  # after the crawl's 7, not this process's 2nd
    assert one.counter("pages") == 8 and one.failed


def test_a_topic_text_no_process_published_is_left_out(redis_server, caplog):
    # Junk in the crawl's topic list (no process writes it so) was a traceback at each page
    # that read it, and the page was lost.
    crawler = get_crawler(QueueSpider)
    one = SharedCrawl(crawler, redis_server.url, "t")
    one.publish_topic_text("birds nest", "en")
    client = redis.Redis.from_url(redis_server.url)
    for junk in (b"junk", b"[" * 5000 + b"]" * 5000, b"\xff", b'["text"]', b"[1, null]"):
        client.rpush("focused:t:topic", junk)
    one.publish_topic_text("feathers", None)
    assert one.new_topic_texts() == [("birds nest", "en"), ("feathers", None)]
    assert "focused:t:topic holds 'junk', no [text, language] record: left out" in caplog.text
    assert one.new_topic_texts() == []


def test_counters_going_back_stop_the_process(redis_server, caplog):
    # A Redis that went back in time under a running crawl (restarted from an older snapshot
    # between two calls, a lagging replica promoted) kept the crawl's order, so the process
    # crawled on: fetch orders given again, and the pages since the snapshot fetched again.
    crawler = get_crawler(QueueSpider)
    one, other = (SharedCrawl(crawler, redis_server.url, "t") for _ in "12")
    for _ in range(5):
        one.incr("pages")
    assert other.counter("pages") == 5 and not other.failed
    redis.Redis.from_url(redis_server.url).hset("focused:t:counters", "pages", 2)
    assert one.incr("pages") == 6  # this process's count goes on: the crawl's is lost
    assert other.counter("pages") == 5
    assert one.failed and other.failed
    assert (
        "the crawl-wide count pages of crawl t went back from 5 to 2: Redis lost writes (restarted"
        " from an older snapshot?), and the crawl cannot go on"
    ) in caplog.text


def test_a_page_sent_back_to_be_rendered_takes_one_budget_slot(redis_server):
    # render=auto fetches a page plainly, then sends it back to be rendered; one process counts
    # the page once. In a shared crawl both pops took a slot: with a budget of 2, the second
    # page was never fetched.
    queue = shared_queue(redis_server.url, budget=2)
    shared = queue.frontier.shared
    render = RenderMiddleware(shared.crawler, "auto")
    render.min_words, render.min_links = 50, 3
    ack = FrontierAck(shared)
    for i in range(3):
        queue.push(req(f"p{i}", parent_relevance=i / 10))
    plain = queue.pop()
    shell = b"<html><body><div id='root'></div><script>build()</script></body></html>"
    again = render.process_response(plain, HtmlResponse(plain.url, body=shell))
    assert again.meta["playwright"]
    ack.request_scheduled(again, shared.crawler.spider)  # as the engine schedules it
    queue.push(again)
    assert urls([queue.pop(), queue.pop()]) == ["p2", "p1"]  # rendered, then the next page
    assert queue.pop() is None  # the budget is spent


def test_a_request_that_ends_without_a_response_takes_no_budget_slot(redis_server):
    """One process counts responses against its page budget. In a shared crawl a request
    refused by robots.txt, dropped offsite or failed for good was acked, its slot spent: four
    seeds refused by robots.txt left 16 pages stored of a budget of 20."""
    queue = shared_queue(redis_server.url, budget=2)
    shared = queue.frontier.shared
    ack = FrontierAck(shared)
    for i in range(3):
        queue.push(req(f"p{i}", parent_relevance=i / 10))
    refused = queue.pop()
    ack.process_exception(refused, IgnoreRequest("Forbidden by robots.txt"), None)
    assert urls([queue.pop(), queue.pop()]) == ["p1", "p0"]  # the budget's two pages
    assert queue.pop() is None


def test_eviction_drops_the_lowest_ranked_as_the_memory_frontier(redis_server):
    shared, local = shared_queue(redis_server.url), make_queue("bestfirst")
    for request in sample_requests():
        shared.push(request)
        local.push(request.copy())
    assert shared.evict(25) == local.evict(25) == 25
    client, key = redis.Redis(port=redis_server.port), "focused:t:"
    assert client.hlen(key + "members") == client.hlen(key + "requests") == len(shared) == 35
    assert client.scard(key + "seen") == 60  # evicted URLs stay seen: not queued again
    shared.push(sample_requests()[0])
    assert drain(shared) == drain(local)


def test_processes_evicting_at_once_keep_frontier_max(redis_server):
    one, two = (shared_queue(redis_server.url, frontier_max=20) for _ in range(2))
    for i in range(30):
        one.push(req(f"p{i}", parent_relevance=i / 100))
    # Both found 30 queued and evict 10: the second eviction finds the frontier at its bound.
    assert one.evict(10) + two.evict(10) == 10
    assert sorted(drain(two)) == sorted(f"p{i}" for i in range(10, 30))


def shared_scheduler(
    url: str, frontier_max: int = 0, strategy: str = "bestfirst", **params
) -> FocusedScheduler:
    """The scheduler of one process of a crawl shared on ``url``, with the shared seen set;
    ``params``: the strategy's."""
    crawler = get_crawler(
        QueueSpider,
        {
            "FRONTIER_MAX": frontier_max,
            "SCHEDULER_PRIORITY_QUEUE": STRATEGIES[strategy],
            "DUPEFILTER_CLASS": "focused.distributed.RedisDupeFilter",
            "REQUEST_FINGERPRINTER_CLASS": "focused.canonical.CanonicalRequestFingerprinter",
        },
    )
    spider = QueueSpider()
    spider.strategy_params, spider.state = params, {}
    crawler.spider, spider.crawler = spider, crawler
    spider.shared = SharedCrawl(crawler, url, "t")
    crawler.stats.open_spider()
    scheduler = FocusedScheduler.from_crawler(crawler)
    scheduler.open(spider)
    return scheduler


def script_calls(client: redis.Redis) -> int:
    """Script calls the server ran so far (each one round trip), not counting the first call
    of a script not loaded yet, which fails and is sent again once it is."""
    stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return stats.get("calls", 0) - stats.get("failed_calls", 0)


def test_a_pages_links_reach_redis_in_one_call_when_it_is_done(redis_server):
    # One script call per link was one loopback round trip each: a page's links, 25 to 100,
    # took most of a shared crawl's time at 150 pages/s.
    scheduler = shared_scheduler(redis_server.url)
    shared = scheduler.spider.shared
    client, key = redis.Redis(port=redis_server.port), "focused:t:"
    assert scheduler.enqueue_request(req("page", parent_relevance=1.0))
    page = scheduler.next_request()
    before = script_calls(client)
    for i in range(60):
        assert scheduler.enqueue_request(req(f"p{i}", parent_relevance=0.5))
    assert len(scheduler) == 60
    assert client.zcard(key + "frontier") == 0  # not in Redis before the page is done...
    shared.frontier.ack(page.meta[INFLIGHT_META])
    assert script_calls(client) - before == 2  # ...then in one call, and the ack in another
    assert client.zcard(key + "frontier") == client.scard(key + "seen") - 1 == 60
    assert client.zcard(shared.inflight_key()) == 0
    popped = [scheduler.next_request() for _ in range(61)]
    assert sorted(urls(popped[:60])) == sorted(f"p{i}" for i in range(60))
    assert popped[60] is None


def test_a_retry_leaves_flight_only_once_it_is_in_redis(redis_server):
    """Scrapy signals request_scheduled before the scheduler queues the request, and the ack
    came with the signal: between them the original was done and its retry in no more than
    this process's buffer, and a kill there lost the URL for good (no process requeued it)."""
    scheduler = shared_scheduler(redis_server.url)
    shared = scheduler.spider.shared
    client, key = redis.Redis(port=redis_server.port), "focused:t:"
    assert scheduler.enqueue_request(req("p0", parent_relevance=0.9))
    original = scheduler.next_request()
    retry = original.copy()  # as RetryMiddleware.get_retry_request makes it
    retry.dont_filter = True
    FrontierAck(shared).request_scheduled(retry, scheduler.spider)
    assert client.zcard(shared.inflight_key()) == 1  # a kill now: requeued by another process
    assert scheduler.enqueue_request(retry)
    assert client.zcard(shared.inflight_key()) == 0  # acked with its retry in Redis
    assert client.zcard(key + "frontier") == 1
    assert urls([scheduler.next_request()]) == ["p0"]


def test_a_url_twice_on_a_page_is_queued_once_at_its_better_place(redis_server):
    scheduler = shared_scheduler(redis_server.url)
    assert scheduler.enqueue_request(req("a", parent_relevance=0.2))
    assert scheduler.enqueue_request(req("b", parent_relevance=0.5))
    # Found again before the first reaches Redis: seen all the same, and raised.
    assert not scheduler.enqueue_request(req("a", parent_relevance=0.9))
    assert not scheduler.enqueue_request(req("a", parent_relevance=0.1))
    assert len(scheduler) == 2
    popped = [scheduler.next_request() for _ in range(3)]
    assert urls(popped[:2]) == ["a", "b"] and popped[0].meta["parent_relevance"] == 0.9
    assert popped[2] is None


def command_calls(client: redis.Redis, command: str) -> int:
    stats = client.info("commandstats").get(f"cmdstat_{command}", {})
    return stats.get("calls", 0) - stats.get("failed_calls", 0)


def test_the_progress_logs_frontier_count_asks_redis_at_most_once_a_second(redis_server):
    # Counted after every request queued or popped, the stat cost a ZCARD round trip each time
    # nothing was buffered: some 3.5 a page, the most frequent call of a shared crawl.
    scheduler = shared_scheduler(redis_server.url)
    client = redis.Redis(port=redis_server.port)
    assert scheduler.enqueue_request(req("page", parent_relevance=1.0))
    page = scheduler.next_request()
    for i in range(40):
        assert scheduler.enqueue_request(req(f"p{i}", parent_relevance=0.5))
    scheduler.spider.shared.frontier.ack(page.meta[INFLIGHT_META])
    before, started = command_calls(client, "zcard"), time.monotonic()
    popped = [scheduler.next_request() for _ in range(30)]
    seconds = time.monotonic() - started
    assert None not in popped
    # Two ZCARDs a count (the front and back sets), one count a second; 60 for 30 pops before.
    assert command_calls(client, "zcard") - before <= 2 * (1 + int(seconds)), seconds
    scheduler.close("finished")  # the last count is exact
    assert scheduler.stats.get_value("focused/frontier") == 10


def key_of_calls(frontier, monkeypatch) -> list[bytes]:
    """The fingerprints whose key ``frontier`` asks Redis for (KEY_OF), from now on."""
    asked: list[bytes] = []
    script = frontier._key_of

    def counted(**kwargs):
        asked.append(kwargs["args"][0])
        return script(**kwargs)

    monkeypatch.setattr(frontier, "_key_of", counted)
    return asked


def test_links_found_again_ask_redis_only_what_this_process_cannot_know(redis_server):
    # Most links of a page lead to URLs found before: a SISMEMBER each, and a KEY_OF each for
    # one seen, were about a third of a shared crawl's reactor thread.
    scheduler = shared_scheduler(redis_server.url)
    shared, stats = scheduler.spider.shared, scheduler.crawler.stats
    client = redis.Redis(port=redis_server.port)
    assert scheduler.enqueue_request(req("page", parent_relevance=1.0))
    page = scheduler.next_request()
    for i in range(20):
        assert scheduler.enqueue_request(req(f"p{i}", parent_relevance=0.5))
    shared.frontier.ack(page.meta[INFLIGHT_META])
    assert urls([scheduler.next_request()]) == ["p0"]
    calls = command_calls(client, "sismember"), script_calls(client)
    # Another page links to them all again, none from a better page, and to the first page.
    for i in range(20):
        assert not scheduler.enqueue_request(req(f"p{i}", parent_relevance=0.5))
    assert not scheduler.enqueue_request(req("page", parent_relevance=1.0))
    assert not scheduler.enqueue_request(req("p0", parent_relevance=0.9))  # fetched already
    assert (command_calls(client, "sismember"), script_calls(client)) == calls
    # Better than the key this process put: Redis is asked for the key queued, and it is raised.
    assert not scheduler.enqueue_request(req("p7", parent_relevance=0.9))
    assert script_calls(client) == calls[1] + 1
    assert stats.get_value("focused/rescored") == 1
    assert urls([scheduler.next_request() for _ in range(2)]) == ["p7", "p1"]


def test_a_url_another_process_queued_or_raised_is_raised_by_a_better_discovery(
    redis_server, monkeypatch
):
    one, two = shared_scheduler(redis_server.url), shared_scheduler(redis_server.url)
    first, second = (scheduler.spider.shared.frontier for scheduler in (one, two))
    asked = key_of_calls(first, monkeypatch)
    assert two.enqueue_request(req("a", parent_relevance=0.3))
    second.flush()  # as each page is done
    assert not one.enqueue_request(req("a", parent_relevance=0.5))  # seen, and raised
    first.flush()
    assert not two.enqueue_request(req("a", parent_relevance=0.6))  # better than 0.5 in Redis
    second.flush()
    assert len(asked) == 1
    assert not one.enqueue_request(req("a", parent_relevance=0.55))  # not better than 0.6
    assert len(asked) == 2
    assert not one.enqueue_request(req("a", parent_relevance=0.4))  # not better than its own
    assert len(asked) == 2
    for scheduler in (one, two):
        assert scheduler.crawler.stats.get_value("focused/rescored") == 1
    popped = one.next_request()
    assert urls([popped]) == ["a"] and popped.meta["parent_relevance"] == 0.6
    assert one.next_request() is None and two.next_request() is None


def test_a_url_found_again_into_the_back_still_leaves_it_to_be_raised(redis_server, monkeypatch):
    # A trap request goes to the back set, and a request queued in front stays there: the key
    # put is no bound of the key queued.
    queue = shared_queue(redis_server.url)
    asked = key_of_calls(queue.frontier, monkeypatch)
    queue.push(req("a", parent_relevance=0.5))
    assert queue.rediscover(req("a", parent_relevance=0.9, **{TRAP_META: "t"}))  # left as is
    assert queue.rediscover(req("a", parent_relevance=0.7))
    assert not queue.rediscover(req("a", parent_relevance=0.6))
    assert len(asked) == 2
    popped = queue.pop()
    assert popped.meta["parent_relevance"] == 0.7 and TRAP_META not in popped.meta


def test_rank_semantic_takes_no_key_put_as_a_bound_a_ranking_may_lower(redis_server, monkeypatch):
    queue = shared_queue(redis_server.url, "rank_semantic", rank_every=1000)
    asked = key_of_calls(queue.frontier, monkeypatch)
    link = {"parent_url": "http://t/p", "link_relevance": 0.9}
    for name in ("a", "b"):
        queue.push(req(name, **link))
    assert classes(queue, ["a"]) == {"a": UNRANKED}
    # Another process's ranking holds the URL back; found again unranked, it is raised.
    client, key = redis.Redis(port=redis_server.port), "focused:t:"
    client.zadd(key + "frontier", {client.hget(key + "members", queue._fingerprint(req("a"))): 0})
    assert queue.rediscover(req("a", **link))
    assert urls([queue.pop()]) == ["a"]
    del asked[:]
    assert not queue.rediscover(req("a", **link))  # taken out: not queued
    assert asked == []


def test_rediscoveries_raise_as_in_the_memory_frontier_with_fewer_round_trips(
    redis_server, monkeypatch
):
    shared, local = shared_queue(redis_server.url), make_queue("bestfirst")
    asked = key_of_calls(shared.frontier, monkeypatch)
    rng = random.Random(7)
    found, popped, rediscoveries = [], [], 0
    for step in range(600):
        choice = rng.random()
        if choice < 0.25 or not found:
            name = f"p{step}"
            found.append(name)
            request = req(name, parent_relevance=rng.choice([0.2, 0.4, 0.6]))
            shared.push(request)
            local.push(request.copy())
        elif choice < 0.9:
            relevance = {"parent_relevance": rng.choice([0.2, 0.4, 0.6, 0.8])}
            request = req(rng.choice(found), link_relevance=rng.random() / 2, **relevance)
            assert shared.rediscover(request) == local.rediscover(request.copy())
            rediscoveries += 1
        else:
            popped.append((urls([shared.pop()]), urls([local.pop()])))
    assert all(one == other for one, other in popped)
    assert drain(shared) == drain(local)
    rescored = [queue.stats.get_value("focused/rescored") for queue in (shared, local)]
    assert rescored[0] == rescored[1] > 0
    assert len(asked) < rediscoveries / 2


def test_what_a_process_knows_seen_is_bounded(redis_server, monkeypatch):
    monkeypatch.setattr(redis_frontier, "KNOWN_MAX", 5)
    scheduler = shared_scheduler(redis_server.url)
    frontier = scheduler.spider.shared.frontier
    client = redis.Redis(port=redis_server.port)
    for i in range(12):
        assert scheduler.enqueue_request(req(f"p{i}", parent_relevance=0.5))
    frontier.flush()
    assert len(frontier._known) <= 5
    calls = command_calls(client, "sismember")
    for i in range(12):  # seen all the same, asked again where forgotten
        assert not scheduler.enqueue_request(req(f"p{i}", parent_relevance=0.5))
    assert command_calls(client, "sismember") > calls
    assert len(frontier._known) <= 5 and len(scheduler) == 12


def test_a_process_killed_before_its_links_reach_redis_loses_nothing(redis_server):
    killed, other = shared_queue(redis_server.url), shared_queue(redis_server.url)
    killed.push(req("page", parent_relevance=1.0))
    page = killed.pop()
    for i in range(5):
        killed.push(req(f"p{i}", parent_relevance=0.5))
    client, key = redis.Redis(port=redis_server.port), "focused:t:"
    assert client.zcard(key + "frontier") == client.scard(key + "seen") - 1 == 0
    # Killed now: its links never reach Redis, and its page was never done. Taken for dead,
    # it gives the page back, to be fetched again, and its links found again.
    worker = killed.frontier.shared.worker
    del killed
    assert other.frontier.requeue(worker) == 1
    again = other.pop()
    assert urls([again]) == ["page"] and again.url == page.url
    for i in range(5):
        other.push(req(f"p{i}", parent_relevance=0.5))
    other.frontier.ack(again.meta[INFLIGHT_META])
    assert sorted(drain(other)) == [f"p{i}" for i in range(5)]


def test_links_that_fail_to_reach_redis_leave_their_page_not_done(redis_server, caplog):
    queue = shared_queue(redis_server.url)
    shared = queue.frontier.shared
    queue.push(req("page", parent_relevance=1.0))
    page = queue.pop()
    client, key = redis.Redis(port=redis_server.port), "focused:t:"
    client.delete(key + "seen")
    client.set(key + "seen", "not a set")  # every put of a new URL fails
    for i in range(5):
        queue.push(req(f"p{i}", parent_relevance=0.5))
    assert not shared.failed  # buffered: nothing sent yet
    queue.frontier.ack(page.meta[INFLIGHT_META])
    assert shared.failed
    assert "Redis frontier at" in caplog.text and "lost" in caplog.text
    # As after any loss of Redis: the page is still in flight, to be fetched again.
    assert client.zcard(shared.inflight_key()) == 1
    assert client.zcard(key + "frontier") == 0


def test_a_full_shared_frontier_evicts_through_the_scheduler_and_counts(redis_server):
    scheduler = shared_scheduler(redis_server.url, frontier_max=40)
    crawler = scheduler.crawler
    for i in range(100):
        assert scheduler.enqueue_request(req(f"p{i}", parent_relevance=(i * 37 % 100) / 100))
        assert len(scheduler) <= 40
    assert crawler.stats.get_value("focused/evicted") == 60
    popped = []
    while (request := scheduler.next_request()) is not None:
        popped.append(request)
    assert sorted(r.meta["parent_relevance"] for r in popped) == [i / 100 for i in range(60, 100)]


def fetch_all(scheduler: FocusedScheduler) -> None:
    """Pop each request the shared frontier hands this process, each one done at once."""
    while (request := scheduler.next_request()) is not None:
        scheduler.spider.shared.frontier.ack(request.meta[INFLIGHT_META])


def round_trips(monkeypatch) -> list[int]:
    """A count of the commands and pipelines sent to Redis from now on, by every client."""
    sent = [0]
    send = redis.connection.AbstractConnection.send_packed_command

    def counted(connection, *args, **kwargs):
        sent[0] += 1
        return send(connection, *args, **kwargs)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
    return sent


def test_processes_of_a_shared_crawl_that_runs_dry_say_the_links_the_crawl_left_out(
    redis_server, caplog, monkeypatch
):
    """Each process of a shared crawl said only the links it had left out itself, asking Redis
    whether each one was seen, one round trip a link; a later run of the crawl said nothing of
    the earlier runs'. Every process says the crawl's, counted in one call."""
    url, client = redis_server.url, redis.Redis(port=redis_server.port)
    one, two = (shared_scheduler(url, strategy="dfs", max_depth=1) for _ in range(2))
    one.enqueue_request(scrapy.Request("http://t/", meta={"depth": 0}))
    home = one.next_request()
    for i in range(20):  # beyond max_depth, found by one process alone
        find(one, f"http://t/deep{i}", 2, i + 1)
    find(one, "http://t/later", 2, 21)  # the other process queues it later
    one.spider.shared.frontier.ack(home.meta[INFLIGHT_META])
    fetch_all(one)
    find(two, "http://t/later", 1, 22)
    find(two, "http://t/deep0", 2, 23)  # left out by both: once
    find(two, "http://t/beyond", 2, 24)
    fetch_all(two)
    for script in (redis_frontier.REQUEUE, redis_frontier.LEFT_OUT):
        client.script_load(script)  # else the first process to close loads them
    sent = round_trips(monkeypatch)
    assert left_out_said(one, caplog) == [left_out_by_max_depth_1("21 links were")]
    closing_one, sent[0] = sent[0], 0
    caplog.clear()
    assert left_out_said(two, caplog) == [left_out_by_max_depth_1("21 links were")]
    assert sent[0] == closing_one  # whatever the number of links it left out: 21 and 2
    caplog.clear()
    later_run = shared_scheduler(url, strategy="dfs", max_depth=1)
    assert left_out_said(later_run, caplog) == [left_out_by_max_depth_1("21 links were")]


def test_links_a_shared_crawl_left_out_past_those_kept_are_said_as_at_least(
    redis_server, caplog, monkeypatch
):
    """The crawl keeps at most LEFT_OUT_KEPT of them in Redis, whichever processes left them
    out; past them, the close says "at least"."""
    monkeypatch.setattr("focused.scheduler.LEFT_OUT_KEPT", 3)
    url = redis_server.url
    one, two = (shared_scheduler(url, strategy="dfs", max_depth=1) for _ in range(2))
    one.enqueue_request(scrapy.Request("http://t/", meta={"depth": 0}))
    one.enqueue_request(scrapy.Request("http://t/other", meta={"depth": 0}))
    for process, numbers in ((one, (0, 1)), (two, (2, 3))):
        page = process.next_request()
        for i in numbers:
            find(process, f"http://t/deep{i}", 2, i + 1)
        process.spider.shared.frontier.ack(page.meta[INFLIGHT_META])
    for process in (one, two):
        caplog.clear()
        assert left_out_said(process, caplog) == [left_out_by_max_depth_1("at least 3 links were")]
    assert redis.Redis(port=redis_server.port).scard("focused:t:left_out") == 3


def test_stateful_strategies_do_not_run_distributed():
    class OwnOrder(StrategyQueue):
        name = "own"

        def pop(self):
            return None

    assert strategy_class("bestfirst").runs_distributed()
    assert strategy_class("dfs").runs_distributed()
    assert not OwnOrder.runs_distributed()
    assert strategy_class("rank_semantic").runs_distributed()  # its state is in Redis
    assert not strategy_class("beam").runs_distributed()


def test_a_redis_password_never_reaches_the_log(tmp_path, site):
    """A shared crawl's log named its Redis server by the URL given, password included."""
    server = RedisServer(tmp_path, password="hush-hush").start()
    try:
        settings = {"FOCUSED_FRONTIER": server.url, "CLOSESPIDER_PAGECOUNT": 5}
        crawl = run_crawl(tmp_path, arguments(site), settings, crawl_id="c")
    finally:
        server.stop()
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert f"joined crawl c on redis://***@127.0.0.1:{server.port}/0" in log
    assert "hush-hush" not in log
    assert len(crawl.pages()) >= 5


def test_a_redis_password_given_as_a_query_parameter_never_reaches_the_log(tmp_path, site):
    # redis-py reads redis://host:6379/0?password=...: the log named the server with it.
    server = RedisServer(tmp_path, password="hush-hush").start()
    url = f"redis://127.0.0.1:{server.port}/0?password="
    try:
        settings = {"FOCUSED_FRONTIER": url + "hush-hush", "CLOSESPIDER_PAGECOUNT": 3}
        crawl = run_crawl(tmp_path, arguments(site), settings, crawl_id="c")
        wrong = run_crawl(tmp_path, arguments(site), {"FOCUSED_FRONTIER": url + "not-it"})
    finally:
        server.stop()
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert f"joined crawl c on {url}***" in crawl.result.stderr
    assert "hush-hush" not in crawl.result.stderr
    assert wrong.result.returncode == 2
    assert wrong.result.stderr.startswith(f"error: cannot reach the Redis frontier at {url}***: ")
    assert "not-it" not in wrong.result.stderr


def test_a_redis_password_not_given_is_asked_for_in_one_line(tmp_path, site):
    # The line said "HELLO must be called with the client already authenticated, otherwise the
    # HELLO AUTH <user> <pass> option can be used...": redis-py's handshake, not the password.
    server = RedisServer(tmp_path, password="hush-hush").start()
    url = f"redis://127.0.0.1:{server.port}/0"
    try:
        crawl = run_crawl(tmp_path, arguments(site), {"FOCUSED_FRONTIER": url})
        wrong = run_crawl(tmp_path, arguments(site), {"FOCUSED_FRONTIER": f"{url}?password=no"})
    finally:
        server.stop()
    assert crawl.result.returncode == 2
    assert crawl.result.stderr.strip() == (
        f"error: cannot reach the Redis frontier at {url}: it asks for a password: give it in "
        "the URL (redis://:PASSWORD@host:6379/0)"
    )
    assert wrong.result.returncode == 2  # a wrong one is named as Redis names it
    assert "invalid username-password pair" in wrong.result.stderr
    assert not site.fetched


def test_a_strategy_that_runs_in_one_process_is_refused_in_one_line(tmp_path, site, redis_server):
    settings = {"FOCUSED_FRONTIER": redis_server.url}
    crawl = run_crawl(tmp_path, arguments(site, "beam"), settings, crawl_id="c")
    assert crawl.result.returncode == 2
    assert crawl.result.stderr.strip() == (
        "error: strategy beam keeps its order in one process: it cannot use FOCUSED_FRONTIER"
    )
    assert not site.fetched


def test_a_process_that_would_order_the_crawl_otherwise_is_refused_in_one_line(
    tmp_path, site, redis_server
):
    settings = Settings({"FOCUSED_FRONTIER": redis_server.url})
    first = {**arguments(site, "semantic"), "crawl_id": "c", "link_weight": "0.5"}
    parse_arguments(first, settings)  # the first process records the crawl's order
    parse_arguments(first, settings)  # the same command again joins it
    with pytest.raises(ConfigError, match=r"runs strategy semantic \(link_weight=0.5\), this "):
        parse_arguments({**first, "link_weight": "0.7"}, settings)
    with pytest.raises(ConfigError, match="runs another query or topic_file"):
        parse_arguments({**first, "query": "steam locomotives"}, settings)
    with pytest.raises(
        ConfigError, match="runs its query with language=en, this process language=de"
    ):
        parse_arguments({**first, "language": "de"}, settings)
    # A crawl whose first process came before the order named its language is joined.
    client = redis.Redis.from_url(redis_server.url)
    key = crawl_prefix("older") + "order"
    older = json.loads(client.get(crawl_prefix("c") + "order"))
    del older["language"]
    client.set(key, json.dumps(older))
    parse_arguments({**first, "crawl_id": "older"}, settings)
    with pytest.raises(ConfigError, match="runs strategy semantic"):
        parse_arguments({**first, "crawl_id": "older", "link_weight": "0.7"}, settings)
    parse_arguments({**arguments(site, "bfs"), "crawl_id": "d"}, settings)  # another crawl
    frontier = {"FOCUSED_FRONTIER": redis_server.url}
    crawl = run_crawl(tmp_path, arguments(site, "bestfirst"), frontier, crawl_id="c")
    assert crawl.result.returncode == 2
    assert crawl.result.stderr == (
        f"error: crawl c on {redis_server.url} runs strategy semantic (link_weight=0.5), this "
        "process bestfirst: give every process of a shared crawl the same strategy, parameters "
        "and query, or another crawl_id\n"
    )
    assert not site.fetched


@pytest.mark.parametrize(
    "held", [b"junk", b"[" * 5000 + b"]" * 5000, b"\xff", b"[1]", b'{"strategy": "bfs"}']
)
def test_an_order_no_process_recorded_is_refused_in_one_line(tmp_path, site, redis_server, held):
    """A crawl's order in Redis that is no order (damaged, another program's key): a
    traceback (JSONDecodeError, RecursionError, KeyError) as it was compared with this
    process's, where it must be refused as a crawl ordered otherwise is."""
    client = redis.Redis.from_url(redis_server.url)
    client.set(crawl_prefix("c") + "order", held)
    frontier = {"FOCUSED_FRONTIER": redis_server.url}
    crawl = run_crawl(tmp_path, arguments(site), frontier, crawl_id="c")
    assert crawl.result.returncode == 2, crawl.result.stderr
    assert crawl.result.stderr.startswith(
        f"error: crawl c on {redis_server.url} has an order no process of this crawler recorded"
        " (key focused:c:order: "
    ), crawl.result.stderr
    assert crawl.result.stderr.endswith("give another crawl_id\n"), crawl.result.stderr
    assert not site.fetched


def test_a_crawl_whose_keys_are_left_without_its_order_is_refused_in_one_line(
    tmp_path, site, redis_server
):
    # Redis restarted without its data while a process ran: before that process noticed, it
    # wrote a few of the crawl's keys again (its seen set among them), not the order. The same
    # command run again then started the crawl over from those, over its pages stored.
    settings = Settings({"FOCUSED_FRONTIER": redis_server.url})
    crawl = {**arguments(site), "crawl_id": "c"}
    parse_arguments(crawl, settings)
    client = redis.Redis.from_url(redis_server.url)
    client.flushdb()
    client.sadd(crawl_prefix("c") + "seen", b"fingerprint")  # written again before the tick
    with pytest.raises(ConfigError) as refused:
        parse_arguments(crawl, settings)
    assert str(refused.value) == (
        f"crawl c on {redis_server.url} has keys but not its order: Redis lost the crawl "
        "(restarted without its data, or flushed, while a process ran), which cannot go on; "
        "give another crawl_id"
    )
    assert client.get(crawl_prefix("c") + "order") is None  # refused again the next time
    parse_arguments({**crawl, "crawl_id": "d"}, settings)  # another crawl starts


# -- rank_semantic on the shared frontier --------------------------------------------------------

BAND = {"band_low": 0.65, "band_high": 0.9, "T": 0.1, "rank_every": 1000}


def classes(queue, names: list[str]) -> dict[str, float]:
    """The score (class) of each queued URL, read from Redis."""
    return {name: queue.frontier.key_of(queue._fingerprint(req(name)))[0] * -1 for name in names}


def test_rank_semantic_processes_rank_one_graph_and_rekey_the_frontier(redis_server):
    one = shared_queue(redis_server.url, "rank_semantic", **BAND)
    two = shared_queue(redis_server.url, "rank_semantic", **BAND)
    _band_graph(one)  # every link found by the first process
    assert two.graph.edges == set()
    assert urls([one.pop()]) == ["seed"]
    # The best left is unranked: the second process ranks the graph it reads from Redis.
    assert urls([two.pop()]) == ["m2"]
    assert len(two.graph.edges) == 10 and two.stats.get_value("focused/rankings") == 1
    held = ["low1", "top", "low3", "low2", "m3"]
    assert classes(one, ["m1", *held]) == {"m1": CRAWLABLE} | dict.fromkeys(held, HELD_BACK)
    # The same order as one process (test_score_strategies), popped by both.
    assert [urls([queue.pop()])[0] for queue in [one, two, one, two, one, two]] == [
        "m1",
        *held,
    ]
    assert one.pop() is None and one.stats.get_value("focused/rankings") is None


def test_rank_semantic_processes_rank_a_redirect_and_its_target_as_one_page(redis_server):
    one = shared_queue(redis_server.url, "rank_semantic", band_low=0.0, band_high=1.0, T=0.0)
    two = shared_queue(redis_server.url, "rank_semantic")
    _redirect_graph(one)
    two.links.sync(two.graph)  # the graph as the first process logged it
    assert_ranked_as_one_page_each(two.graph)


def test_rank_semantic_rekey_never_goes_back_to_an_older_graph(redis_server):
    queue = shared_queue(redis_server.url, "rank_semantic", **BAND)
    _band_graph(queue)
    queue.pop()  # the seed
    queue.pop()  # ranks the 10 links, then pops m2
    low1 = queue._fingerprint(req("low1"))
    assert queue.links.rekey(9, 0.1, {low1: True}) == 0  # older than the ranking applied
    assert classes(queue, ["low1"]) == {"low1": HELD_BACK}
    m3 = queue._fingerprint(req("m3"))  # similarity 0.01 < T: held back even in the band
    assert queue.links.rekey(10, 0.1, {low1: True, m3: True}) == 1
    assert classes(queue, ["low1", "m3"]) == {"low1": CRAWLABLE, "m3": HELD_BACK}


def test_rank_semantic_processes_space_their_rankings_by_the_graphs_growth(redis_server):
    queue = shared_queue(redis_server.url, "rank_semantic", rank_every=3, rank_growth=0.5)
    # As one process (test_score_strategies): the links counted are the crawl's, in Redis.
    assert rankings_after(queue, 32) == [3, 6, 9, 14, 21, 32]


def rankings_of(queues, links) -> list[int]:
    """Give ``links`` (parent, page) to ``queues`` in turn, each pushed if none of them queued
    it yet, else found again: after which of them (counted from 1) a PageRank was computed."""
    points, queued = [], set()
    for count, (parent, page) in enumerate(links, 1):
        queue = queues[count % len(queues)]
        request = req(page, parent_url=f"http://t/{parent}", link_relevance=0.5)
        if page in queued:
            queue.rediscover(request)
        else:
            queued.add(page)
            queue.push(request)
        if sum(q.stats.get_value("focused/rankings", 0) for q in queues) > len(points):
            points.append(count)
    return points


def test_rank_semantic_processes_count_a_link_found_again_once_as_one_process(redis_server):
    # A link found again (named twice on a page, found before by another process, a retry's)
    # counted as new in Redis: the crawl ranked about twice as often as one process would.
    links = []
    for i in range(1, 60):  # each link new as its page is, then found again, twice
        links += [(f"s{i % 3}", f"u{i}"), (f"s{i % 3}", f"u{i}"), (f"s{(i - 1) % 3}", f"u{i - 1}")]
    params = {"rank_every": 5, "rank_growth": 0.3}
    alone = rankings_of([make_queue("rank_semantic", **params)], links)
    shared = [shared_queue(redis_server.url, "rank_semantic", **params) for _ in range(2)]
    assert rankings_of(shared, links) == alone
    assert len(alone) >= 3  # the links found again were many, the rankings few
    # A redirect's link found again still merges its URLs: the graph is the one process's.
    one = shared_queue(redis_server.url, "rank_semantic", crawl_id="r")
    _redirect_graph(one)
    graph = LinkGraph()
    shared_queue(redis_server.url, "rank_semantic", crawl_id="r").links.sync(graph)
    assert_ranked_as_one_page_each(graph)


def test_rank_semantic_concurrent_rankings_leave_a_consistent_frontier(redis_server):
    rng = random.Random(3)
    pages = [f"p{i}" for i in range(120)]
    links = [(rng.choice(pages[: i + 1]), page) for i, page in enumerate(pages[1:])]
    links += [(rng.choice(pages), rng.choice(pages)) for _ in range(200)]
    params = {**BAND, "rank_every": 7, "rank_growth": 0.0, "T": 0.0}
    queues = [shared_queue(redis_server.url, "rank_semantic", **params) for _ in range(3)]

    def discover(queue, share):
        for parent, page in share:
            request = req(page, parent_url=f"http://t/{parent}", link_relevance=rng.random())
            if queue.frontier.key_of(queue._fingerprint(request)) is None:
                queue.push(request)
            else:
                queue.rediscover(request)

    threads = [
        threading.Thread(target=discover, args=(queue, links[i::3]))
        for i, queue in enumerate(queues)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rankings = sum(queue.stats.get_value("focused/rankings", 0) for queue in queues)
    assert rankings == len(set(links)) // 7  # one elected per 7 links, not three, each once
    queued = sorted({page for _, page in links})
    assert len(queues[0]) == len(queued)  # nothing lost or queued twice
    # A last ranking, by a process that read every link from Redis: each queued URL is in the
    # class its rank in the whole graph gives.
    queues[1]._rerank_shared()
    graph = LinkGraph()
    for parent, page in links:
        graph.add_edge(f"http://t/{parent}", f"http://t/{page}")
    rank = graph.pagerank()
    low, high = numpy.quantile(rank, [BAND["band_low"], BAND["band_high"]])
    expected = {
        page: CRAWLABLE if low <= rank[graph.ids[f"http://t/{page}"]] <= high else HELD_BACK
        for page in queued
    }
    assert classes(queues[0], queued) == expected


# -- crawls by several processes ----------------------------------------------------------------

BUDGET = 100  # large enough that one crawl's harvest varies by a few points, not ten


def arguments(site, strategy: str = "bestfirst") -> dict[str, str]:
    return {"strategy": strategy, "query": BIRD_QUERY, "seeds": f"{site.url}/wiki/{BIRD_SEED}"}


def start_worker(
    tmp_path: Path, site, settings: dict, name: str, crawl_id: str = "shared", **spider_args
):
    all_settings = {
        "FOCUSED_DB": tmp_path / "focused.sqlite3",
        "FOCUSED_LOGSTATS_INTERVAL": 0,
        "LOG_LEVEL": "INFO",
        "FOCUSED_WORKER_TIMEOUT": 5,
        **settings,
    }
    args = crawl_args({"crawl_id": crawl_id, **arguments(site), **spider_args}, all_settings)
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 (closed by finish)
    process = subprocess.Popen(
        scrapy_command(*args), cwd=REPO, env=crawl_env(), stdout=log, stderr=log, text=True
    )
    process.log_file = log
    return process


def finish(process, timeout: float = 240) -> str:
    try:
        process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.log_file.close()
    return Path(process.log_file.name).read_text()


def crawl_by_two_processes(tmp_path: Path, site, settings: dict, **spider_args) -> list[str]:
    """Crawl ``site`` by two processes sharing one crawl; their logs, once both exited 0."""
    workers = [start_worker(tmp_path, site, settings, f"w{i}", **spider_args) for i in "12"]
    logs = [finish(worker) for worker in workers]
    for worker, log in zip(workers, logs, strict=True):
        assert worker.returncode == 0, log[-3000:]
    return logs


def wiki_fetches(server) -> list[str]:
    return [path for path in server.fetched if path.startswith("/wiki/")]


def harvest(names: list[str], bird_pages: set[str]) -> float:
    return sum(name in bird_pages for name in names) / len(names)


def test_three_processes_share_one_crawl(tmp_path, site, redis_server, bird_pages):
    # The same total concurrency as the single process below: at this budget, 3 x 16 requests
    # under way would fetch most of the first pages before any score could order them.
    settings = {
        "FOCUSED_FRONTIER": redis_server.url,
        "CLOSESPIDER_PAGECOUNT": BUDGET,
        "CONCURRENT_REQUESTS": 4,
    }
    workers = [start_worker(tmp_path, site, settings, f"w{i}") for i in range(3)]
    logs = [finish(worker) for worker in workers]
    for worker, log in zip(workers, logs, strict=True):
        assert worker.returncode == 0, log[-3000:]
        assert "Spider closed (closespider_pagecount)" in log, log[-3000:]
    fetched = wiki_fetches(site)
    counts = Counter(fetched)
    assert max(counts.values()) == 1, [p for p, n in counts.items() if n > 1]
    assert len(fetched) == BUDGET  # the budget is reserved at pop time: no overshoot at all
    assert sum("Worker" in log and "joined crawl shared" in log for log in logs) == 3
    crawl = Crawl(None, tmp_path / "focused.sqlite3", "shared")
    pages = crawl.pages()
    assert len(pages) == BUDGET
    assert sorted(page["fetch_order"] for page in pages) == list(range(1, BUDGET + 1))
    assert crawl.crawl_record()["pages"] == BUDGET

    single = run_crawl(
        tmp_path / "single",
        arguments(site),
        {"CLOSESPIDER_PAGECOUNT": BUDGET, "CONCURRENT_REQUESTS": 12},
        crawl_id="one",
    )
    assert single.result.returncode == 0, single.result.stderr[-3000:]
    alone = [page_name(page["url"]) for page in single.pages()][:BUDGET]
    together = [page_name(page["url"]) for page in pages]
    assert abs(harvest(together, bird_pages) - harvest(alone, bird_pages)) <= 0.1


def two_gated_workers(tmp_path, sample_graph, redis_url: str, budget: int, **spider_args):
    """Two processes crawling the sample graph on one shared frontier, to a page budget of
    ``budget``; returns their logs, each checked to have ended well, and the site. A process
    starting late would find the budget spent: the first articles wait until more are asked for
    than one process fetches at a time (4)."""
    settings = {
        "FOCUSED_FRONTIER": redis_url,
        "CLOSESPIDER_PAGECOUNT": budget,
        "CONCURRENT_REQUESTS": 4,
        "LOGSTATS_INTERVAL": 0,
        "DOWNLOAD_TIMEOUT": GATED_DOWNLOAD_TIMEOUT,
    }
    with GatedReplay(sample_graph, Gate(5), BIRD_SEED).start() as site:
        workers = [start_worker(tmp_path, site, settings, f"w{i}", **spider_args) for i in "01"]
        logs = [finish(worker) for worker in workers]
    for worker, log in zip(workers, logs, strict=True):
        assert worker.returncode == 0, log[-3000:]
        assert "Spider closed (closespider_pagecount)" in log, log[-3000:]
    return logs, site


def test_two_processes_share_a_rank_semantic_crawl(tmp_path, sample_graph, redis_server):
    budget = 60
    logs, site = two_gated_workers(
        tmp_path, sample_graph, redis_server.url, budget, strategy="rank_semantic", rank_every="40"
    )
    fetched = wiki_fetches(site)
    assert max(Counter(fetched).values()) == 1
    assert len(fetched) == budget
    crawl = Crawl(None, tmp_path / "focused.sqlite3", "shared")
    pages = crawl.pages()
    assert len(pages) == budget and {page["strategy"] for page in pages} == {"rank_semantic"}
    # Both ranked the shared graph: the process whose link completes rank_every ranks.
    rankings = [int(m) for log in logs for m in re.findall(r"'focused/rankings': (\d+)", log)]
    assert len(rankings) == 2 and min(rankings) >= 1, rankings


def test_two_processes_share_a_shark_crawl_merging_its_paths(tmp_path, sample_graph, redis_server):
    budget = 40
    _, site = two_gated_workers(tmp_path, sample_graph, redis_server.url, budget, strategy="shark")
    fetched = wiki_fetches(site)
    assert max(Counter(fetched).values()) == 1 and len(fetched) == budget
    # Each queued URL's path is merged in Redis (test_shark_rediscovery_not_raising_...); the
    # paths of the URLs fetched went with them: those left are the queued URLs'.
    client = redis.Redis.from_url(redis_server.url)
    paths = client.hkeys("focused:shared:paths")
    assert paths and set(paths) <= set(client.hkeys("focused:shared:members"))


def in_flight(redis_url: str, process: subprocess.Popen) -> int:
    """How many requests the crawl process ``process`` has popped and not finished."""
    client = redis.Redis.from_url(redis_url)
    keys = client.keys(f"focused:shared:inflight:*:{process.pid}:*")  # host:pid:random
    return sum(client.zcard(key) for key in keys)


class Joined:
    """Holds each request that passes it (``wait()``) until ``workers`` processes have joined
    crawl ``shared``, or ``HOLD_TIMEOUT`` has passed. A site holds the first pages of a shared
    crawl so: a process that starts seconds late on a loaded machine would otherwise find the
    crawl done, and a test would check nothing shared. (``Gate`` waits for more requests at once
    than one process sends, which a host's concurrency, crawl-wide, may not allow.)

    The crawl's workers are watched from the start, not only while a request waits: a process
    killed before any request reached the site has still joined, although the others remove it
    from the crawl's workers once it counts as dead."""

    def __init__(self, redis_url: str, workers: int = 2) -> None:
        self.client = redis.Redis.from_url(redis_url)
        self.workers = workers
        self.seen: set[bytes] = set()
        self.opened = threading.Event()  # for good: a process that leaves later has joined
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        deadline = time.monotonic() + HOLD_TIMEOUT
        while time.monotonic() < deadline:
            try:
                self.seen.update(self.client.hkeys("focused:shared:workers"))
            except redis.ConnectionError:  # the test is over and its server stopped
                return
            if len(self.seen) >= self.workers:
                self.opened.set()
                return
            time.sleep(0.05)

    def wait(self) -> None:
        self.opened.wait(timeout=HOLD_TIMEOUT)


def test_the_others_finish_when_one_process_is_killed(tmp_path, sample_graph, redis_server):
    # The first articles wait until all three processes have joined, and the kill waits until
    # the process has work under way: the others then wait for that work, and take it, however
    # late any of them started.
    server = GatedReplay(sample_graph, Joined(redis_server.url, 3), BIRD_SEED, delay=0.03).start()
    try:
        settings = {
            "FOCUSED_FRONTIER": redis_server.url,
            "CONCURRENT_REQUESTS": 4,
            "DOWNLOAD_TIMEOUT": GATED_DOWNLOAD_TIMEOUT,
        }
        workers = [start_worker(tmp_path, server, settings, f"w{i}") for i in range(3)]
        deadline = time.monotonic() + HOLD_TIMEOUT + 90
        while time.monotonic() < deadline and (
            len(wiki_fetches(server)) < 40 or not in_flight(redis_server.url, workers[0])
        ):
            time.sleep(0.05)
        assert len(wiki_fetches(server)) >= 40, "the crawl did not get going"
        assert in_flight(redis_server.url, workers[0]), "the process to kill had no work"
        workers[0].send_signal(signal.SIGKILL)
        finish(workers[0])
        logs = [finish(worker) for worker in workers[1:]]
    finally:
        server.stop()
    for worker, log in zip(workers[1:], logs, strict=True):
        assert worker.returncode == 0, log[-3000:]
        assert "Spider closed (finished)" in log, log[-3000:]
    assert any("taking its work" in log for log in logs)
    fetched = Counter(name for name in map(page_name, wiki_fetches(server)))
    assert set(fetched) == reachable(sample_graph, BIRD_SEED)  # the whole crawl was done
    # Only what the killed process had popped and not finished can have been fetched twice:
    # its 4 downloads, and responses it had not parsed yet.
    assert sum(n - 1 for n in fetched.values()) <= 8


def test_one_process_stopped_leaves_the_crawl_record_to_those_going_on(
    tmp_path, sample_graph, redis_server
):
    """Ctrl-C on one process of a shared crawl recorded the whole crawl as interrupted
    (shutdown) while the other process crawled on; the last process to close records it."""
    budget = 40
    # The first articles wait until both processes have joined; the one going on is slow, so
    # that it is still crawling when the other has stopped (its last 20 pages take 6 s; the
    # stop, 0.1 s here).
    server = GatedReplay(sample_graph, Gate(3), BIRD_SEED, delay=0.03).start()
    db = tmp_path / "focused.sqlite3"
    try:
        settings = {
            "FOCUSED_FRONTIER": redis_server.url,
            "CLOSESPIDER_PAGECOUNT": budget,
            "CONCURRENT_REQUESTS": 2,
            "DOWNLOAD_TIMEOUT": GATED_DOWNLOAD_TIMEOUT,
        }
        stopped = start_worker(tmp_path, server, settings, "stopped")
        going_on = start_worker(tmp_path, server, {**settings, "DOWNLOAD_DELAY": 0.3}, "going_on")
        deadline = time.monotonic() + HOLD_TIMEOUT + 90
        while time.monotonic() < deadline and len(wiki_fetches(server)) < 20:
            time.sleep(0.05)
        assert len(wiki_fetches(server)) >= 20, "the crawl did not get going"
        stopped.send_signal(signal.SIGINT)
        log = finish(stopped, timeout=60)
        assert stopped.returncode == 0 and "Spider closed (shutdown)" in log, log[-3000:]
        record = Crawl(None, db, "shared").crawl_record()
        assert going_on.poll() is None, "the other process ended first: this proves nothing"
        assert (record["status"], record["finish_reason"]) == ("running", None)
        assert "Crawl shared goes on in 1 other process" in log
        other_log = finish(going_on)
    finally:
        server.stop()
    assert going_on.returncode == 0, other_log[-3000:]
    record = Crawl(None, db, "shared").crawl_record()
    assert (record["status"], record["finish_reason"]) == ("finished", "closespider_pagecount")
    assert record["pages"] == budget


def test_the_crawl_record_names_the_seeds_of_every_process(tmp_path, site, redis_server):
    """A process joining a shared crawl with a seed of its own fetches it (level 0), and the
    crawl record named that process's seeds alone, not those the crawl started from."""
    settings = {"FOCUSED_FRONTIER": redis_server.url, "CLOSESPIDER_PAGECOUNT": 5}
    first = start_worker(tmp_path, site, settings, "first")
    log = finish(first)
    assert first.returncode == 0, log[-3000:]
    # A larger budget: the crawl goes on, from its frontier and the new seed, which no page
    # about birds links to.
    settings["CLOSESPIDER_PAGECOUNT"] = 30
    joining = start_worker(tmp_path, site, settings, "joining", seeds=f"{site.url}/wiki/Amtrak")
    log = finish(joining)
    assert joining.returncode == 0, log[-3000:]
    crawl = Crawl(None, tmp_path / "focused.sqlite3", "shared")
    seeds = [f"{site.url}/wiki/{BIRD_SEED}", f"{site.url}/wiki/Amtrak"]
    assert sorted(page["url"] for page in crawl.pages() if page["level"] == 0) == seeds
    assert crawl.crawl_record()["seeds"] == seeds


def test_a_page_is_done_only_after_its_links_are_queued(tmp_path, site, redis_server):
    # Were a page marked done before its links reach Redis, losing Redis in between would
    # lose the links for good: the page is not fetched again (the test below once lost
    # Sparrowhawk, reachable only through Hawk, that way).
    record = tmp_path / "frontier.json"
    extensions = {**focused.settings.EXTENSIONS, "tests.ack_recorder.FrontierRecorder": 900}
    settings = {
        "FOCUSED_FRONTIER": redis_server.url,
        "CLOSESPIDER_PAGECOUNT": 30,
        "EXTENSIONS": json.dumps(extensions),
        "FRONTIER_RECORD": record,
    }
    log = finish(start_worker(tmp_path, site, settings, "recorded"))
    assert "Spider closed" in log, log[-3000:]
    events = json.loads(record.read_text())
    done_at = {event[1]: i for i, event in enumerate(events) if event[0] == "done"}
    links = [(i, parent) for i, (kind, _, *parent) in enumerate(events) if kind == "put"]
    late = [(i, parent[0]) for i, parent in links if parent and done_at.get(parent[0], i) < i]
    assert len(done_at) >= 20 and len(links) > 100
    assert not late, late[:5]


def test_restart_resumes_after_redis_comes_back(tmp_path, sample_graph):
    data = tmp_path / "redis"
    data.mkdir()
    redis_server = RedisServer(data, persistent=True).start()
    # The articles beyond the first 30 wait until Redis is gone: the first run cannot finish
    # the crawl first, however late that comes (10 s were enough).
    server = GatedReplay(sample_graph, Hold(30), BIRD_SEED, delay=0.03).start()
    try:
        settings = {"FOCUSED_FRONTIER": redis_server.url, "CONCURRENT_REQUESTS": 4}
        first = start_worker(tmp_path, server, settings, "first")
        deadline = time.monotonic() + 90
        while len(wiki_fetches(server)) < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
        redis_server.stop()
        server.gate.release()
        log = finish(first)
        assert "Redis frontier at" in log and "lost" in log, log[-3000:]
        assert "Spider closed (frontier_unreachable)" in log, log[-3000:]
        assert first.returncode == 1  # was 0: a supervisor would not have started it again
        before = len(wiki_fetches(server))
        crawl = Crawl(None, tmp_path / "focused.sqlite3", "shared")
        assert crawl.crawl_record()["status"] == "interrupted"

        redis_server.start()  # same port, same directory: the data is back
        # The pages under way when Redis went away are not stored: their requests are still in
        # flight there. Stored, they stood beside the pages of their new budget slots, numbered
        # past Redis's count, which the next process numbered again.
        counted = redis.Redis.from_url(redis_server.url).hget("focused:shared:counters", "pages")
        assert max(page["fetch_order"] for page in crawl.pages()) <= int(counted)
        assert "focused/frontier_unreachable/pages_not_stored" in log
        second = start_worker(tmp_path, server, settings, "second")
        log = finish(second)
        assert second.returncode == 0, log[-3000:]
        assert "Spider closed (finished)" in log, log[-3000:]
    finally:
        server.stop()
        redis_server.stop()
    fetched = Counter(map(page_name, wiki_fetches(server)))
    assert len(wiki_fetches(server)) > before
    assert set(fetched) == reachable(sample_graph, BIRD_SEED)
    # Requests under way when Redis went away are fetched again (as in the test above).
    assert sum(n - 1 for n in fetched.values()) <= 8
    assert crawl.crawl_record()["status"] == "finished"
    assert {page_name(p["url"]) for p in crawl.pages()} == set(fetched)


def test_a_process_stops_when_redis_comes_back_without_the_crawls_keys(
    tmp_path, sample_graph, redis_server
):
    # Redis restarted without its data (or flushed) answers on the same port: the process
    # crawled on from nothing, its seen set and page budget gone, fetching its pages again past
    # the budget, and exited 0 with the crawl recorded as finished.
    budget = 60
    server = GatedReplay(sample_graph, Hold(30), BIRD_SEED, delay=0.03).start()
    try:
        settings = {
            "FOCUSED_FRONTIER": redis_server.url,
            "CONCURRENT_REQUESTS": 4,
            "CLOSESPIDER_PAGECOUNT": budget,
            "DOWNLOAD_TIMEOUT": GATED_DOWNLOAD_TIMEOUT,
        }
        worker = start_worker(tmp_path, server, settings, "worker")
        deadline = time.monotonic() + 90
        while len(wiki_fetches(server)) < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
        redis.Redis.from_url(redis_server.url).flushdb()
        time.sleep(3 * 0.5)  # three heartbeats, its requests held meanwhile
        server.gate.release()
        log = finish(worker)
    finally:
        server.stop()
    assert worker.returncode == 1, log[-3000:]
    assert "the keys of crawl shared are gone" in log, log[-3000:]
    assert "Spider closed (frontier_unreachable)" in log, log[-3000:]
    # The seed (never held), the 30 let through, and the requests held when the keys went.
    assert len(wiki_fetches(server)) <= 1 + 30 + 4
    crawl = Crawl(None, tmp_path / "focused.sqlite3", "shared")
    assert crawl.crawl_record()["status"] == "interrupted"


def test_a_shared_crawl_goes_on_with_pages_stored_only_if_its_frontier_holds_it(
    tmp_path, site, redis_server
):
    # Under the id of a crawl with pages stored, a shared crawl whose Redis did not hold that
    # crawl (a crawl of one process, or Redis restarted without its data) started it again from
    # nothing, its fetch order and page budget from 0 over the pages stored: 31 pages stored
    # with 30 fetch orders, for a budget of 30 after 20.
    refused = (
        "has pages in the store already: a crawl goes on only from its JOBDIR (or its shared "
        "frontier); give another crawl_id\n"
    )
    alone = run_crawl(tmp_path, arguments(site), {"CLOSESPIDER_PAGECOUNT": 5}, crawl_id="one")
    assert alone.result.returncode == 0, alone.result.stderr[-3000:]
    settings = {"FOCUSED_FRONTIER": redis_server.url, "CLOSESPIDER_PAGECOUNT": 10}
    shared = run_crawl(tmp_path, arguments(site), settings, crawl_id="one")
    assert shared.result.returncode == 2, shared.result.stderr[-3000:]
    assert shared.result.stderr == f"error: crawl one {refused}"
    # A shared crawl goes on with the frontier that holds it, as long as it holds it.
    first = {**settings, "CLOSESPIDER_PAGECOUNT": 5}
    assert run_crawl(tmp_path, arguments(site), first, crawl_id="two").result.returncode == 0
    more = run_crawl(tmp_path, arguments(site), settings, crawl_id="two")
    assert more.result.returncode == 0, more.result.stderr[-3000:]
    assert len(more.pages()) == 10
    redis.Redis.from_url(redis_server.url).flushdb()
    lost = run_crawl(tmp_path, arguments(site), settings, crawl_id="two")
    assert lost.result.returncode == 2, lost.result.stderr[-3000:]
    assert lost.result.stderr == f"error: crawl two {refused}"
    assert len(more.pages()) == 10


def test_a_shared_crawl_that_goes_on_keeps_what_its_feed_holds(tmp_path, site, redis_server):
    """A shared crawl that goes on (to a larger page budget, or resumed) with the command it
    started with: -O opened its feed anew, and the pages its earlier run exported were gone
    from it without a word. Refused in one line, as for a JOBDIR crawl, and so is -o of a JSON
    feed, which would get a second array; a new shared crawl writes its -O feed anew."""
    feed = tmp_path / "pages.json"
    settings = {"FOCUSED_FRONTIER": redis_server.url, "CLOSESPIDER_PAGECOUNT": 5}
    first = run_crawl(tmp_path, arguments(site), settings, crawl_id="two", extra=["-O", str(feed)])
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    exported = feed.read_bytes()
    assert len(json.loads(exported)) == len(first.pages()) == 5
    earlier = "what the processes of crawl two exported to it"
    more = {**settings, "CLOSESPIDER_PAGECOUNT": 10}
    for option, refusal in (
        ("-O", f"(-O) would be written anew, losing {earlier}: name another file (-o would add"),
        ("-o", f"holds {earlier}, and -o would add a second JSON array after it: name another"),
    ):
        refused = run_crawl(
            tmp_path, arguments(site), more, crawl_id="two", extra=[option, str(feed)]
        )
        assert refused.result.returncode == 2, refused.result.stderr[-3000:]
        assert refused.result.stderr.startswith(f"error: the feed '{feed}' {refusal}")
        assert refused.result.stderr.count("\n") == 1, refused.result.stderr[-3000:]
    assert feed.read_bytes() == exported
    assert len(first.pages()) == 5
    new = run_crawl(tmp_path, arguments(site), settings, crawl_id="three", extra=["-O", str(feed)])
    assert new.result.returncode == 0, new.result.stderr[-3000:]
    assert len(json.loads(feed.read_bytes())) == 5


def test_a_frontier_behind_the_store_is_refused_in_one_line(tmp_path, redis_server):
    # Redis restarted from an older snapshot (RDB) held the crawl, with fewer pages numbered
    # than the store holds: the crawl went on, fetching the pages since again and numbering
    # them again over fetch orders stored, past its page budget.
    db = tmp_path / "focused.sqlite3"
    store = SqliteStore(db)
    store.start_crawl({"crawl_id": "c", "query": "birds"})
    store.save_pages([page_record(f"http://a.test/{n}", "c", fetch_order=n) for n in range(1, 7)])
    store.close()
    client = redis.Redis.from_url(redis_server.url)
    client.sadd("focused:c:seen", "fp")
    client.hset("focused:c:counters", "pages", 3)
    settings = Settings({"FOCUSED_DB": db, "FOCUSED_FRONTIER": redis_server.url})
    config = SimpleNamespace(crawl_id="c", jobdir_note="")
    behind = (
        f"crawl c on {redis_server.url} is behind its store: Redis numbered 3 pages fetched, the"
        " store holds pages numbered up to 6, more of them past 3 than the 0 requests its"
        " processes left under way (Redis restarted from an older snapshot?)"
    )
    with pytest.raises(ConfigError, match=re.escape(behind)):
        check_store(settings, config)
    # Redis lost in the middle of a crawl, its data kept: each process numbered its pages under
    # way on from its last count, and their requests stay in flight, to be fetched again.
    client.hset("focused:c:workers", "w", 0)
    client.zadd("focused:c:inflight:w", {"m1": 1, "m2": 2, "m3": 3})
    check_store(settings, config)
    client.zrem("focused:c:inflight:w", "m3")
    with pytest.raises(ConfigError, match="is behind its store"):
        check_store(settings, config)
    client.hset("focused:c:counters", "pages", 6)
    check_store(settings, config)


def test_a_process_whose_crawl_lost_its_keys_as_it_started_stops_at_its_first_heartbeat(
    site, redis_server
):
    # Redis restarted without its data after the process's arguments were read (the order
    # recorded) and before its spider opened (seconds: the sentence encoder loads): its first
    # heartbeat found no order, had never seen one, and the process crawled on from nothing.
    settings = Settings()
    settings.setmodule(focused.settings, priority="project")
    settings.set("FOCUSED_FRONTIER", redis_server.url, priority="cmdline")
    crawler = Crawler(TopicalSpider, settings)
    spider = TopicalSpider.from_crawler(crawler, crawl_id="c", **arguments(site))
    redis.Redis.from_url(redis_server.url).flushdb()
    DistributedCrawl(crawler, spider.shared, timeout=10).tick()
    assert spider.shared.failed


def test_unreachable_redis_is_one_line_before_the_crawl(tmp_path, site):
    url = f"redis://:secret@127.0.0.1:{free_port()}/0"
    crawl = run_crawl(tmp_path, arguments(site), {"FOCUSED_FRONTIER": url})
    assert crawl.result.returncode == 2
    lines = crawl.result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: cannot reach the Redis frontier at redis://***@127.0.0.1:")
    assert "secret" not in lines[0]  # the password stays out of logs
    assert not site.fetched


def test_a_redis_database_that_is_no_number_is_one_line(tmp_path, site):
    # redis-py took redis://host/frontier for database 0, where another crawl may live.
    url = f"redis://127.0.0.1:{free_port()}/frontier"
    crawl = run_crawl(tmp_path, arguments(site), {"FOCUSED_FRONTIER": url})
    assert crawl.result.returncode == 2
    assert crawl.result.stderr.strip() == (
        f"error: setting FOCUSED_FRONTIER='{url}': its database 'frontier' is no number "
        "(redis://host:6379/0)"
    )


def test_a_redis_url_option_redis_py_does_not_take_is_one_line(tmp_path, site):
    # A TLS option in a redis:// URL (only rediss:// takes it), or one of no connection: redis-py
    # raised a TypeError as it made its first connection, a traceback before the crawl started.
    for option in ("ssl_cert_reqs=none", "timeout=5"):
        url = f"redis://127.0.0.1:{free_port()}/0?{option}"
        crawl = run_crawl(tmp_path, arguments(site), {"FOCUSED_FRONTIER": url})
        assert crawl.result.returncode == 2
        name = option.partition("=")[0]
        assert crawl.result.stderr.strip() == (
            f"error: setting FOCUSED_FRONTIER='{url}' has an option redis-py does not take in a"
            " redis:// URL (AbstractConnection.__init__() got an unexpected keyword argument"
            f" '{name}')"
        )
        assert not site.fetched


def test_a_tls_file_of_a_rediss_url_that_is_missing_is_one_line(tmp_path, site, redis_server):
    # Read by redis-py only as it connected: "Error 2 connecting to 127.0.0.1:PORT. No such file
    # or directory.", as if of the server.
    url = f"rediss://127.0.0.1:{redis_server.port}/0?ssl_ca_certs=/nonexistent/ca.pem"
    crawl = run_crawl(tmp_path, arguments(site), {"FOCUSED_FRONTIER": url})
    assert crawl.result.returncode == 2
    assert crawl.result.stderr.strip() == (
        f"error: setting FOCUSED_FRONTIER='{url}': its ssl_ca_certs '/nonexistent/ca.pem'"
        " cannot be read: No such file or directory"
    )
    assert not site.fetched


def test_a_redis_that_evicts_any_key_when_full_is_refused_in_one_line(tmp_path, site, redis_server):
    # Full, it evicted the crawl's stored requests, seen URLs and counters: the crawl went on
    # with a traceback at each pop of a request gone, and ended "finished", exit 0, with a
    # third of the site fetched.
    client = redis.Redis.from_url(redis_server.url)
    client.config_set("maxmemory", "100mb")
    client.config_set("maxmemory-policy", "allkeys-lru")
    crawl = run_crawl(tmp_path, arguments(site), {"FOCUSED_FRONTIER": redis_server.url})
    assert crawl.result.returncode == 2
    assert crawl.result.stderr.strip() == (
        f"error: the Redis frontier at {redis_server.url} evicts keys when full "
        "(maxmemory-policy allkeys-lru), the crawl's frontier and seen set among them: set "
        "maxmemory-policy noeviction"
    )
    assert not site.fetched and not client.keys("focused:*")
    # A volatile- policy evicts only keys that expire (a host's lease, its robots.txt).
    client.config_set("maxmemory-policy", "volatile-lru")
    settings = {"FOCUSED_FRONTIER": redis_server.url, "CLOSESPIDER_PAGECOUNT": 3}
    crawl = run_crawl(tmp_path, arguments(site), settings)
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]


def test_a_redis_cluster_node_is_refused_in_one_line(tmp_path, site):
    # The crawl's scripts take several of its keys at once: a cluster node refused them with an
    # error naming hash slots, or a traceback once the crawl ran.
    # The cluster bus's port is the server's + 10,000 unless given: past 65,535 for some.
    cluster = ["--cluster-enabled", "yes", "--cluster-port", str(free_port())]
    server = RedisServer(tmp_path, options=cluster).start()
    try:
        crawl = run_crawl(tmp_path, arguments(site), {"FOCUSED_FRONTIER": server.url})
    finally:
        server.stop()
    assert crawl.result.returncode == 2
    assert crawl.result.stderr.strip() == (
        f"error: the Redis frontier at {server.url} is a Redis Cluster node: a shared crawl "
        "needs one Redis server, not a cluster"
    )
    assert not site.fetched


# -- politeness across processes ----------------------------------------------------------------


def test_a_host_lease_spaces_every_process_and_a_pause_holds_them_all(redis_server):
    crawler = get_crawler(QueueSpider)
    one, other = (SharedCrawl(crawler, redis_server.url, "t") for _ in "12")
    assert one.lease("a", 0.3).wait == 0  # taken
    assert 0 < other.lease("a", 0.3).wait <= 0.3  # held: what is left of it
    assert 0 < one.lease("a", 0.3).wait <= 0.3  # its holder waits too, when it asks again
    assert other.lease("b", 0.3).wait == 0  # another host is not held
    assert other.lease("a", 0).wait == 0  # a slot without a delay is not held by one
    time.sleep(0.35)
    assert other.lease("a", 0.3).wait == 0  # expired: nothing stays behind a process that died
    client = redis.Redis.from_url(redis_server.url)
    assert 0 < client.pttl("focused:t:polite:a") <= 300
    # A Retry-After pause holds the host for every process, with or without a delay...
    one.pause("a", 2)
    assert 1 < other.lease("a", 0).wait <= 2 and 1 < other.lease("a", 0.3).wait <= 2
    # ...and a shorter one never shortens it.
    other.pause("a", 0.5)
    assert 1 < one.lease("a", 0).wait <= 2
    # Redis lost: one error, the spider closing, and the slot sends as in one process.
    redis_server.stop()
    assert other.lease("c", 0.3).wait == 0 and other.failed
    other.pause("c", 1)


def test_a_host_has_its_concurrency_in_places_of_the_whole_crawl(redis_server):
    crawler = get_crawler(QueueSpider)
    one, other, third = (SharedCrawl(crawler, redis_server.url, "t") for _ in "123")

    def take(shared: SharedCrawl, expiry: float = 30, **kwargs) -> list[str]:
        return shared.lease("a", 0, concurrency=2, expiry=expiry, **kwargs).places

    first = take(one, wanted=2, expiry=0.3)
    assert len(first) == 2  # the host's two places
    assert take(other, wanted=1) == []  # full: it waits
    assert len(other.lease("b", 0, wanted=1, concurrency=2, expiry=30).places) == 1
    # A place given back goes to the process that waited longest, not to the one giving it back
    # (in the call that asks for the next), which waits too, after the first...
    assert take(one, wanted=1, given_back=first[:1]) == []
    assert take(third, wanted=1) == []
    assert len(take(other, wanted=1)) == 1
    # ...or given back alone.
    one.release("a", first[1:2])
    assert take(third, wanted=1) == []
    assert len(take(one, wanted=1, expiry=0.3)) == 1
    # A full host takes no delay lease: another process may send once a place comes back.
    assert one.lease("a", 0.3, wanted=1, concurrency=2, expiry=30).places == []
    assert one.lease("a", 0.3).wait == 0
    client = redis.Redis.from_url(redis_server.url)
    client.delete("focused:t:polite:a")
    # A place never given back (its process died) expires.
    time.sleep(0.35)
    lasting = take(third, wanted=1)
    assert len(lasting) == 1
    assert client.zcard("focused:t:conc:a") == 2
    assert 29_000 < client.pttl("focused:t:conc:a") <= 30_000  # gone once all could have lapsed
    # A waiting process that no longer asks (closed, dead) is passed over after a second.
    assert take(one, wanted=1) == []
    assert 0 < client.pttl("focused:t:conc-waiting:a") <= 1000
    third.release("a", lasting)
    time.sleep(1.1)
    assert len(take(other, wanted=1)) == 1
    # A pause holds the host and takes no place.
    one.pause("b", 2)
    assert one.lease("b", 0, wanted=1, concurrency=2, expiry=30) == (pytest.approx(2, 0.1), [])
    # Redis lost: every place wanted, as in one process.
    redis_server.stop()
    assert len(take(other, wanted=3)) == 3 and other.failed
    other.release("a", ["x"])


def test_places_renewed_outlast_their_expiry_and_only_they(redis_server):
    crawler = get_crawler(QueueSpider)
    one, other = (SharedCrawl(crawler, redis_server.url, "t") for _ in "12")

    def take(shared: SharedCrawl, slot: str, wanted: int) -> list[str]:
        return shared.lease(slot, 0, wanted, concurrency=2, expiry=1.0).places

    a, b = take(one, "a", 2), take(one, "b", 1)
    one.release("a", a[1:])
    time.sleep(0.6)
    one.renew({"a": a, "b": b}, 1.0)  # one call for every slot
    time.sleep(0.6)
    # Past their first expiry, the renewed places are held, and the one given back was not taken
    # again by the renewal: each host has one place free.
    assert len(take(other, "a", 2)) == 1 and len(take(other, "b", 2)) == 1
    time.sleep(1.0)
    assert len(take(other, "b", 2)) == 2  # no renewal since: lapsed


class TimedReplay(GatedReplay):
    """The gated replay web, with when each article arrived (before the gate holds it)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.arrivals: list[float] = []

    def record(self, path: str) -> None:
        if path.startswith("/wiki/"):
            with self._lock:
                self.arrivals.append(time.monotonic())
        super().record(path)


def responses(log: str) -> int:
    return int(re.findall(r"'downloader/response_count': (\d+)", log)[-1])


def arrival_gaps_of_two_processes(
    tmp_path, sample_graph, redis_server, budget: int, **replay: float
) -> tuple[list[str], list[float]]:
    """Two processes crawl ``budget`` articles of the replay web (``replay``: its options) in
    one shared crawl; their logs, and the gaps between the articles' arrivals. The first
    articles wait until both processes have joined, so that both fetch, however late the
    second starts."""
    server = TimedReplay(sample_graph, Joined(redis_server.url), BIRD_SEED, **replay).start()
    try:
        settings = {
            "FOCUSED_FRONTIER": redis_server.url,
            "CLOSESPIDER_PAGECOUNT": budget,
            "DOWNLOAD_TIMEOUT": GATED_DOWNLOAD_TIMEOUT,
        }
        logs = crawl_by_two_processes(tmp_path, server, settings)
    finally:
        server.stop()
    assert len(server.arrivals) == budget
    return logs, [later - earlier for earlier, later in pairwise(server.arrivals)]


def test_a_crawl_delay_holds_across_the_processes_of_a_crawl(tmp_path, sample_graph, redis_server):
    """Two processes each kept the host's robots.txt Crawl-delay on their own: together they
    sent twice as often as it asks, every other request half a delay after the last."""
    delay, budget = 0.5, 20
    logs, gaps = arrival_gaps_of_two_processes(
        tmp_path, sample_graph, redis_server, budget, crawl_delay=delay
    )
    for log in logs:
        assert responses(log) >= 3, log[-3000:]  # its robots.txt and articles
    # Two processes each keeping the delay alone leave one gap of every two at most half of it.
    # Arrival may lag a send on a loaded machine (0.19 s once in a run of the whole suite, more
    # under a heavier load): a gap or two may come short.
    short = [gap for gap in gaps if gap < delay - 0.2]
    assert len(short) <= 2, [round(gap, 3) for gap in gaps]


def test_a_crawl_delay_runs_from_the_end_of_a_download_in_every_process(
    tmp_path, sample_graph, redis_server
):
    """A process whose download of a Crawl-delay host ends holds the host for the delay from
    then on, for the crawl: counted from the send, the other process sent to a host slow to
    answer as soon as the delay after the last send had passed."""
    delay, latency, budget = 0.5, 0.4, 16
    logs, gaps = arrival_gaps_of_two_processes(
        tmp_path, sample_graph, redis_server, budget, crawl_delay=delay, delay=latency
    )
    for log in logs:
        assert responses(log) >= 1, log[-3000:]  # both fetch (the host held by either's ends)
    # Each arrival comes at least the latency and the delay after the one before; the gate
    # holds the first articles until both processes have joined, and the second process's
    # first may come before the first download has ended.
    short = [gap for gap in gaps if gap < delay + latency - 0.1]
    assert len(short) <= 2, [round(gap, 3) for gap in gaps]


def test_a_crawl_delay_runs_from_the_end_of_the_robots_txt_in_every_process(tmp_path, redis_server):
    """The robots.txt that tells the Crawl-delay is sent unpaced: the delay ran from its send in
    the process that downloaded it, and not at all in the other, whose page went as soon as it
    read the robots.txt from Redis. Each process here has one of the two seeds waiting for it
    (the robots.txt is answered once both have joined)."""
    log, joined = FetchLog(), Joined(redis_server.url)
    robots_answered: list[float] = []

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            joined.wait()
            robots_answered.append(time.monotonic())
            return Reply(200, "User-agent: *\nCrawl-delay: 1\n", "text/plain")
        return Reply(200, html(f"birds {path}", "<p>birds nest feathers</p>"))

    with Site(respond, "127.0.0.2", log) as site:
        settings = {
            "FOCUSED_FRONTIER": redis_server.url,
            "CONCURRENT_REQUESTS": 1,  # each process pops one seed
            "DOWNLOAD_TIMEOUT": GATED_DOWNLOAD_TIMEOUT,
        }
        spider_args = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/a,{site.url}/b"}
        crawl_by_two_processes(tmp_path, site, settings, **spider_args)
    times = log.get_times(site.host)
    assert len(times) == 2 and len(robots_answered) == 1, log.gets()
    assert times[0] - robots_answered[0] >= 0.9, times[0] - robots_answered[0]
    assert times[1] - times[0] >= 0.9, times[1] - times[0]


class BusyOnce:
    """A seed page / linking to ``count`` pages, each answered ``latency`` seconds after it
    arrives; the ``busy``-th page to arrive is answered 429 with ``Retry-After: pause``. Pages
    wait at ``gate`` first."""

    def __init__(self, count: int, gate: Joined, busy: int, pause: int, latency: float) -> None:
        self.count, self.gate, self.busy = count, gate, busy
        self.pause, self.latency = pause, latency
        self.arrived = 0
        self.busy_at: float | None = None  # when the page answered 429 arrived
        self._lock = threading.Lock()

    def __call__(self, method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(200, "User-agent: *\nDisallow:\n", "text/plain")
        if path == "/":
            links = " ".join(f'<a href="/p{n}">birds {n}</a>' for n in range(self.count))
            return Reply(200, html("birds", f"<p>birds nest feathers</p>{links}"))
        arrival = time.monotonic()
        with self._lock:
            self.arrived += 1
            busy = self.arrived == self.busy
        self.gate.wait()
        time.sleep(self.latency)
        if busy:
            self.busy_at = arrival
            return Reply(429, "slow down", "text/plain", {"Retry-After": str(self.pause)})
        return Reply(200, html(f"birds {path}", "<p>birds nest feathers</p>"))


def test_a_retry_after_pauses_the_host_for_every_process_of_a_crawl(tmp_path, redis_server):
    """A 429 with Retry-After paused its host in the process that got it only: the others went
    on sending to the host throughout the pause."""
    log, latency, pause = FetchLog(), 0.2, 2
    # The first pages wait until both processes have joined.
    respond = BusyOnce(60, Joined(redis_server.url), busy=8, pause=pause, latency=latency)
    with Site(respond, "127.0.0.2", log) as site:
        settings = {
            "FOCUSED_FRONTIER": redis_server.url,
            "CLOSESPIDER_PAGECOUNT": 40,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
            "DOWNLOAD_TIMEOUT": GATED_DOWNLOAD_TIMEOUT,
        }
        spider_args = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"}
        logs = crawl_by_two_processes(tmp_path, site, settings, **spider_args)
    for text in logs:
        assert responses(text) >= 3, text[-3000:]
    assert respond.busy_at is not None
    assert sum("with Retry-After 2: no request to it for 2 s" in text for text in logs) == 1
    # The pause starts when the 429 is answered; a request another process sent just before
    # its crawler read the answer may still arrive.
    start, end = respond.busy_at + latency + 0.3, respond.busy_at + latency + pause - 0.1
    during = [when - respond.busy_at for when in log.get_times(site.host) if start < when < end]
    assert not during, during


def test_ctrl_c_gives_a_request_held_by_a_pause_back_to_the_shared_frontier(tmp_path, redis_server):
    """A process of a shared crawl stopped with Ctrl-C while a retry waited for its host's
    Retry-After waited out the pause, then sent it. Not sent, it goes back to the frontier
    as the process leaves (not marked done: lost), and the next process fetches it."""
    run = ctrl_c_while_a_retry_waits(tmp_path, {"FOCUSED_FRONTIER": redis_server.url})
    assert_left_unsent_and_fetched_on_resume(run)


def test_a_host_keeps_its_concurrency_crawl_wide_through_downloads_longer_than_a_places_life(
    tmp_path, redis_server
):
    """A place lasted the download timeout, so that a process that died held its host's places
    for three minutes; now it lasts FOCUSED_WORKER_TIMEOUT and is renewed while its download
    goes on, here longer than that."""
    respond, gate = many_pages_site(4), Joined(redis_server.url)

    def gated(method: str, path: str) -> Reply:
        gate.wait()
        return respond(method, path)

    site = Timed(gated, latency=4)
    with Site(site, "127.0.0.2") as slow:
        settings = {
            "FOCUSED_FRONTIER": redis_server.url,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
            "FOCUSED_WORKER_TIMEOUT": 3,
        }
        spider_args = {"strategy": "bfs", "query": "birds", "seeds": f"{slow.url}/"}
        crawl_by_two_processes(tmp_path, slow, settings, **spider_args)
    assert len(site.spans) == 5
    assert site.most_at_once() == 2, sorted(site.spans)


def test_a_dead_processs_places_at_a_host_lapse_as_it_counts_dead(tmp_path, redis_server):
    """A place lasted the download timeout and the worker timeout: a process killed while it had
    requests under way kept its host's places from the others for over a minute here (three
    minutes by default)."""
    # 16 pages: about 8 are left for the survivor once the dead process's places have lapsed.
    respond, gate = many_pages_site(16), Joined(redis_server.url)

    def gated(method: str, path: str) -> Reply:
        gate.wait()
        return respond(method, path)

    site, life = Timed(gated, latency=1), 3
    client = redis.Redis.from_url(redis_server.url)
    with Site(site, "127.0.0.2") as slow:
        settings = {
            "FOCUSED_FRONTIER": redis_server.url,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
            "FOCUSED_WORKER_TIMEOUT": life,
            "DOWNLOAD_TIMEOUT": 60,
        }
        spider_args = {"strategy": "bfs", "query": "birds", "seeds": f"{slow.url}/"}
        workers = [start_worker(tmp_path, slow, settings, f"w{i}", **spider_args) for i in "01"]
        mark = f":{workers[0].pid}:"  # in the worker's name, host:pid:random
        deadline = time.monotonic() + HOLD_TIMEOUT + 60
        while time.monotonic() < deadline and not any(
            mark in place.decode()
            for place in client.zrange("focused:shared:conc:127.0.0.2", 0, -1)
        ):
            time.sleep(0.05)
        assert len(site.spans) < 20, (
            "the crawl went too far before the process to kill held a place"
        )
        workers[0].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        finish(workers[0])
        log = finish(workers[1])
    assert workers[1].returncode == 0, log[-3000:]
    # Within the worker timeout, and a look at the host after, the survivor has both places.
    later = Timed(None, 0)
    later.spans = [span for span in site.spans if span[0] > killed + life + 1]
    assert len(later.spans) >= 4, sorted(site.spans)
    assert later.most_at_once() == 2, sorted(site.spans)


@pytest.mark.parametrize("setting", ["CONCURRENT_REQUESTS_PER_DOMAIN", "DOWNLOAD_SLOTS"])
def test_a_host_gets_no_more_requests_at_once_than_its_concurrency_crawl_wide(
    tmp_path,
    redis_server,
    setting,
):
    """Each process kept a host's concurrency on its own: two processes had twice as many
    requests under way to it."""
    respond, gate = many_pages_site(12), Joined(redis_server.url)

    def gated(method: str, path: str) -> Reply:
        gate.wait()
        return respond(method, path)

    site = Timed(gated, latency=0.5)
    limit = {"CONCURRENT_REQUESTS_PER_DOMAIN": 2}
    if setting == "DOWNLOAD_SLOTS":
        limit = {"DOWNLOAD_SLOTS": json.dumps({"127.0.0.2": {"concurrency": 2}})}
    with Site(site, "127.0.0.2") as slow:
        settings = {"FOCUSED_FRONTIER": redis_server.url, **limit}
        spider_args = {"strategy": "bfs", "query": "birds", "seeds": f"{slow.url}/"}
        logs = crawl_by_two_processes(tmp_path, slow, settings, **spider_args)
    for log in logs:
        assert responses(log) >= 3, log[-3000:]  # its robots.txt and pages
    assert len(site.spans) == 13
    assert site.most_at_once() == 2, sorted(site.spans)


def test_a_process_joining_after_the_relevant_budget_fetches_nothing(tmp_path, site, redis_server):
    # It counted only after each of its own pages, and fetched on until one was relevant.
    settings = {
        "FOCUSED_FRONTIER": redis_server.url,
        "CLOSESPIDER_RELEVANT": 4,
        "CONCURRENT_REQUESTS": 1,
    }
    first = run_crawl(tmp_path, arguments(site), settings, crawl_id="relevant")
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    served = len(site.fetched)
    late = run_crawl(tmp_path, arguments(site), settings, crawl_id="relevant")
    assert late.result.returncode == 0, late.result.stderr[-3000:]
    assert "Closing spider (closespider_relevant): 4 relevant pages" in late.result.stderr
    assert len(site.fetched) == served


def test_two_processes_starting_together_with_other_budgets_are_not_both_taken(redis_server):
    """A process beats only once its spider opens, 0.2-0.3 s after it records its budget: two
    started together with budgets 10 and 30 both ran, the second's budget recorded over the
    first's. A budget recorded by a process not beating yet counts as live."""
    _check_budget(redis_server.url, "starting", "", 10, 10.0)
    with pytest.raises(ConfigError, match="CLOSESPIDER_PAGECOUNT=10 in other processes"):
        _check_budget(redis_server.url, "starting", "", 30, 10.0)
    _check_budget(redis_server.url, "starting", "", 10, 10.0)  # the same budget: taken
    # Once the first beats, the mark goes (DistributedCrawl.spider_opened); once none beats,
    # a new budget is the crawl's, as before.
    redis.Redis.from_url(redis_server.url).delete("focused:starting:budget_at")
    _check_budget(redis_server.url, "starting", "", 30, 10.0)


def test_a_process_refused_after_recording_its_budget_takes_its_marks_back(tmp_path, redis_server):
    """A process refused by a check after the frontier's (here: its crawl has pages in the
    store that the frontier does not hold) left its budget and its mark: for
    FOCUSED_WORKER_TIMEOUT, a process with another budget was told one ran with it."""
    db = tmp_path / "focused.sqlite3"
    store = SqliteStore(db)
    store.start_crawl({"crawl_id": "c", "query": "birds"})
    store.save_pages([page_record("http://a.test/1", "c", fetch_order=1)])
    store.close()
    args = {"query": "birds", "seeds": "http://a.test/", "crawl_id": "c"}
    settings = {"FOCUSED_DB": db, "FOCUSED_FRONTIER": redis_server.url}
    client = redis.Redis.from_url(redis_server.url)
    for budget in (10, 30, 0):
        with pytest.raises(ConfigError, match="has pages in the store already"):
            TopicalSpider.check_arguments(
                dict(args), Settings({**settings, "CLOSESPIDER_PAGECOUNT": budget})
            )
        assert client.mget("focused:c:budget", "focused:c:budget_at") == [None, None]
    # A live process's budget, and a starting one's mark, are put back as they were.
    client.set("focused:c:budget", 30)
    client.set("focused:c:budget_at", 5)
    client.hset("focused:c:workers", "w", int(client.time()[0]))
    with pytest.raises(ConfigError, match="has pages in the store already"):
        TopicalSpider.check_arguments(
            dict(args), Settings({**settings, "CLOSESPIDER_PAGECOUNT": 30})
        )
    assert client.mget("focused:c:budget", "focused:c:budget_at") == [b"30", b"5"]


def test_a_crawl_reads_its_arguments_once(tmp_path, site, redis_server):
    """The crawl command read the arguments as it checked them, and the spider read them again
    as it was made: a seeds_file piped in (/dev/stdin) was empty the second time, and the
    start, refused then (a traceback, exit 1), left the page budget its check had recorded in
    Redis: for FOCUSED_WORKER_TIMEOUT, a start with another budget was told one ran with it."""
    db = tmp_path / "focused.sqlite3"
    settings = {
        "FOCUSED_DB": db,
        "FOCUSED_FRONTIER": redis_server.url,
        "CLOSESPIDER_PAGECOUNT": 3,
        "LOG_LEVEL": "INFO",
        "ENCODER_STORE_DIR": tmp_path / "encodings",
    }
    piped = {"strategy": "bestfirst", "query": BIRD_QUERY, "seeds_file": "/dev/stdin"}
    result = subprocess.run(
        scrapy_command(*crawl_args({**piped, "crawl_id": "piped"}, settings)),
        input=f"{site.url}/wiki/{BIRD_SEED}\n",
        cwd=REPO,
        env=crawl_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(Crawl(result, db, "piped").pages()) == 3
    # None of its processes runs: another budget is the crawl's.
    more = run_crawl(
        tmp_path, arguments(site), {**settings, "CLOSESPIDER_PAGECOUNT": 6}, crawl_id="piped"
    )
    assert more.result.returncode == 0, more.result.stderr[-3000:]
    assert len(more.pages()) == 6


def test_a_ctrl_c_in_the_checks_after_the_budget_takes_its_marks_back(
    tmp_path, redis_server, monkeypatch
):
    """A Ctrl-C in the checks that follow the frontier's (the store's here, which may wait on
    a slow disk or a MongoDB) left the process's budget and its mark, as a refusal did."""
    args = {"query": "birds", "seeds": "http://a.test/", "crawl_id": "c"}
    settings = Settings(
        {
            "FOCUSED_DB": tmp_path / "focused.sqlite3",
            "FOCUSED_FRONTIER": redis_server.url,
            "CLOSESPIDER_PAGECOUNT": 10,
        }
    )

    def interrupted(settings, config):
        raise KeyboardInterrupt

    monkeypatch.setattr(topical, "check_store", interrupted)
    with pytest.raises(KeyboardInterrupt):
        TopicalSpider.check_arguments(dict(args), settings)
    client = redis.Redis.from_url(redis_server.url)
    assert client.mget("focused:c:budget", "focused:c:budget_at") == [None, None]


@pytest.mark.parametrize("failure", [MemoryError, KeyboardInterrupt])
def test_a_start_that_fails_as_its_spider_is_made_takes_its_marks_back(
    tmp_path, redis_server, monkeypatch, failure
):
    """A start that failed in the spider's from_crawler, after the crawl command's check had
    recorded its page budget, left it (as a check's refusal did before: see above); so did a
    Ctrl-C there, as the relevance model is built."""
    args = {"strategy": "bfs", "query": "birds", "seeds": "http://a.test/", "crawl_id": "c"}
    settings = Settings()
    settings.setmodule(focused.settings, priority="project")
    settings.setdict(
        {
            "FOCUSED_DB": tmp_path / "focused.sqlite3",
            "FOCUSED_FRONTIER": redis_server.url,
            "CLOSESPIDER_PAGECOUNT": 10,
        },
        priority="cmdline",
    )
    config = TopicalSpider.check_arguments(dict(args), settings)
    client = redis.Redis.from_url(redis_server.url)
    assert client.get("focused:c:budget") == b"10"

    def fails(crawler, config):
        raise failure

    monkeypatch.setattr(topical, "_relevance_model", fails)
    with pytest.raises(failure):
        TopicalSpider.from_crawler(
            Crawler(TopicalSpider, settings), **args, **{CHECKED_ARGUMENTS: config}
        )
    assert client.mget("focused:c:budget", "focused:c:budget_at") == [None, None]


def test_a_checked_argument_given_by_hand_is_ignored_as_other_underscored_ones():
    """-a _checked=x, given to scrapy runspider (or to a crawl started from a script, which no
    check runs before), was taken for the arguments the crawl command's check hands the
    spider: a traceback ('str' object has no attribute ...). Its ``_`` leaves it out of the
    arguments read, as Scrapyd's _job: the crawl reads the others."""
    args = {"strategy": "bfs", "query": "birds", "seeds": "http://a.test/", "crawl_id": "c"}
    settings = Settings()
    settings.setmodule(focused.settings, priority="project")
    spider = TopicalSpider.from_crawler(
        Crawler(TopicalSpider, settings), **args, **{CHECKED_ARGUMENTS: "x"}
    )
    assert (spider.config.crawl_id, spider.config.query, spider.config.seeds) == (
        "c",
        "birds",
        ("http://a.test/",),
    )


def test_two_processes_refused_in_the_order_they_started_leave_no_mark(redis_server):
    """Two processes started together with the same budget, both refused by a later check (a
    feed each, the store), the first taken back first: its mark was no longer the last (its
    take-back did nothing), and the second's put the first's back as it was before it. Left,
    it refused for FOCUSED_WORKER_TIMEOUT a process with another budget when none ran."""
    marks = [_check_budget(redis_server.url, "together", "", 10, 10.0) for _ in range(2)]
    for taken in marks:
        take_back_budget(taken)
    client = redis.Redis.from_url(redis_server.url)
    assert client.get("focused:together:budget_at") is None
    _check_budget(redis_server.url, "together", "", 30, 10.0)  # none runs: another budget


def test_a_process_with_another_page_budget_than_the_live_ones_is_refused(
    tmp_path, site, redis_server
):
    # The budget is counted in each process's pops: one with a larger budget, or none, took the
    # crawl past the budget the others kept.
    settings = {"FOCUSED_FRONTIER": redis_server.url, "CLOSESPIDER_PAGECOUNT": 4}
    first = run_crawl(tmp_path, arguments(site), settings, crawl_id="budgets")
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    # None of the crawl's processes alive: a larger budget is the crawl's from now on.
    more = run_crawl(
        tmp_path, arguments(site), {**settings, "CLOSESPIDER_PAGECOUNT": 8}, crawl_id="budgets"
    )
    assert more.result.returncode == 0, more.result.stderr[-3000:]
    assert len(more.pages()) == 8
    # A process of the crawl alive (its heartbeat now, and a timeout no slow start-up outlasts),
    # with that budget, spent:
    client = redis.Redis.from_url(redis_server.url)
    served = len(site.fetched)
    for budget, described in ((12, "a page budget of 12"), (0, "no page budget")):
        client.hset("focused:budgets:workers", "elsewhere:1:abc", client.time()[0])
        other = run_crawl(
            tmp_path,
            arguments(site),
            {**settings, "CLOSESPIDER_PAGECOUNT": budget, "FOCUSED_WORKER_TIMEOUT": 120},
            crawl_id="budgets",
        )
        assert other.result.returncode == 2, other.result.stderr[-3000:]
        assert other.result.stderr == (
            "error: crawl budgets runs with CLOSESPIDER_PAGECOUNT=8 in other processes (or one"
            f" starting), this one with {described}, and has spent its page budget: once those"
            " have closed, give every process a larger CLOSESPIDER_PAGECOUNT to go on\n"
        )
    assert len(site.fetched) == served


def test_joining_a_crawl_whose_budget_is_spent_says_so_and_changes_nothing(
    tmp_path, site, redis_server
):
    """The same command run again once the shared crawl had spent its page budget closed at
    once (closespider_pagecount) saying nothing of why, rewrote the crawl record's
    resumed_at and finished_at, and with WARC_DIR wrote a WARC file holding only warcinfo."""
    warcs = tmp_path / "warc"
    settings = {
        "FOCUSED_FRONTIER": redis_server.url,
        "CLOSESPIDER_PAGECOUNT": 5,
        "WARC_DIR": warcs,
    }
    log = finish(start_worker(tmp_path, site, settings, "first"))
    crawl = Crawl(None, tmp_path / "focused.sqlite3", "shared")
    record, written = crawl.crawl_record(), sorted(warcs.iterdir())
    assert record["finish_reason"] == "closespider_pagecount", log[-3000:]
    again = start_worker(tmp_path, site, settings, "again")
    log = finish(again)
    assert again.returncode == 2, log[-3000:]
    assert log.splitlines() == [
        f"error: crawl shared on {redis_server.url} has spent its page budget"
        " (CLOSESPIDER_PAGECOUNT=5): give every process a larger CLOSESPIDER_PAGECOUNT to go on"
    ]
    assert crawl.crawl_record() == record
    assert sorted(warcs.iterdir()) == written


def test_joining_a_spent_crawl_with_another_budget_than_its_live_processes_says_both(
    tmp_path, site, redis_server
):
    """A process with another page budget than the crawl's live processes was told that the
    crawl had spent its budget, naming its own, as soon as the crawl had handed out that many
    pages: the check of the spent budget came first, and compared them with this process's
    budget. It runs with another budget than the crawl's; and the crawl's may be spent too."""
    settings = {"FOCUSED_FRONTIER": redis_server.url, "CLOSESPIDER_PAGECOUNT": 5}
    first = run_crawl(tmp_path, arguments(site), settings, crawl_id="spent")
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    client, served = redis.Redis.from_url(redis_server.url), len(site.fetched)

    def joined(budget: int) -> str:
        # A process of the crawl alive, and a timeout no slow start-up outlasts.
        client.hset("focused:spent:workers", "elsewhere:1:abc", client.time()[0])
        more = {"CLOSESPIDER_PAGECOUNT": budget, "FOCUSED_WORKER_TIMEOUT": 120}
        other = run_crawl(tmp_path, arguments(site), settings | more, crawl_id="spent")
        assert other.result.returncode == 2, other.result.stderr[-3000:]
        return other.result.stderr

    for budget, described in ((3, "a page budget of 3"), (8, "a page budget of 8")):
        assert joined(budget) == (
            "error: crawl spent runs with CLOSESPIDER_PAGECOUNT=5 in other processes (or one"
            f" starting), this one with {described}, and has spent its page budget: once those"
            " have closed, give every process a larger CLOSESPIDER_PAGECOUNT to go on\n"
        )
    # Live processes with a budget of 10, 5 pages handed out: nothing is spent but this
    # process's budget of 4, which is not the crawl's.
    client.set("focused:spent:budget", 10)
    assert joined(4) == (
        "error: crawl spent runs with CLOSESPIDER_PAGECOUNT=10 in other processes (or one"
        " starting), this one with a page budget of 4: give every process of a shared crawl"
        " the same budget\n"
    )
    assert client.get("focused:spent:budget") == b"10"
    assert len(site.fetched) == served
