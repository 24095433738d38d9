"""A crawl shared by several processes through Redis keeps the trap cap, the duplicate checks
and the pages per host crawl-wide: two processes crawl a loopback site with a trap and
duplicate pages."""

from __future__ import annotations

import re
import threading
from datetime import date, timedelta
from html import escape
from urllib.parse import urlsplit

import pytest
import redis
import scrapy

from focused.simhash import distance
from schedulers.redis_frontier import INFLIGHT_META
from tests.conftest import Crawl
from tests.sites import GATED_DOWNLOAD_TIMEOUT, Gate, Reply, Site, html
from tests.test_near_duplicates import DECEMBER, NOVEMBER, fingerprint
from tests.test_redis_frontier import (
    REDIS_SERVER,
    crawl_by_two_processes,
    redis_server,  # noqa: F401 (fixture)
)
from tests.test_traps import shared_scheduler

pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")


ARTICLES_HELD = 3  # more than one process's CONCURRENT_REQUESTS


def guarded_site(sample_graph, delay: float = 0.05) -> Site:
    """A home page linking to articles, each linking into an endless calendar (one trap
    family); pairs of near-duplicate pages (``/pair/K/a``, ``/pair/K/b``: one article, two date
    lines); pairs of pages declaring one canonical URL (``/alias/K/1``, ``/alias/K/2``). The
    two pages of a pair are linked next to each other, so that two processes fetch them at
    the same moment.

    The first articles are answered only once ``ARTICLES_HELD`` of them are asked for at
    once, which one process (2 requests at a time) cannot do alone: without that, a process
    that starts seconds late on a loaded machine finds the crawl already done, and the tests
    would check nothing shared."""
    texts = sorted({text for text in sample_graph.text.values() if len(text) > 2000})
    articles, aliased, paired = texts[:30], texts[30:38], []
    for text in texts[38:]:  # a date line changes these by at most a bit: found at any extraction
        near = [fingerprint(f"{line}\n{text}") for line in (NOVEMBER, DECEMBER)]
        if None not in near and distance(*near) <= 1:
            paired.append(text)
    paired = paired[:6]
    assert len(paired) == 6
    pages = {}
    for i, text in enumerate(articles):
        calendar = f'<a href="/cal/2026/11/{i % 28 + 1:02d}">bird events</a>'
        pages[f"/article/{i}"] = html(f"Article {i}", f"<p>{escape(text)}</p>{calendar}")
    for k, text in enumerate(paired):
        for name, line in (("a", NOVEMBER), ("b", DECEMBER)):
            pages[f"/pair/{k}/{name}"] = html("Pair", f"<p>{line}</p><p>{escape(text)}</p>")
    for k in range(4):
        head = f'<link rel="canonical" href="/canon/{k}">'
        for n in (1, 2):
            body = f"<p>{escape(aliased[2 * k + n - 1])}</p>"
            pages[f"/alias/{k}/{n}"] = html("Alias", body, head)
    pages["/"] = html("Birds", "".join(f'<a href="{path}">birds</a> ' for path in pages))
    both_processes_fetching = Gate(ARTICLES_HELD)

    def respond(method: str, path: str) -> Reply:
        if path.startswith("/article/"):
            both_processes_fetching.wait()
        if path.startswith("/cal/"):
            day = date(*map(int, path.split("/")[2:5]))
            links = "".join(
                f'<a href="/cal/{other:%Y/%m/%d}">bird events</a>'
                for other in (day - timedelta(1), day + timedelta(1))
            )
            return Reply(body=html("Calendar", f"<p>Bird events: none.</p>{links}"))
        if path not in pages:
            return Reply(status=404, body="not found")
        return Reply(body=pages[path])

    return Site(respond, delay=delay)


def crawl_home_by_two_processes(tmp_path, redis_url: str, site: Site, **settings) -> list[str]:
    """Crawl ``site`` from its home page (bfs) by two processes sharing one crawl; their logs,
    once both closed as finished."""
    settings = {
        "FOCUSED_FRONTIER": redis_url,
        "CONCURRENT_REQUESTS": 2,
        "DOWNLOAD_TIMEOUT": GATED_DOWNLOAD_TIMEOUT,
        **settings,
    }
    spider_args = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"}
    logs = crawl_by_two_processes(tmp_path, site, settings, **spider_args)
    for log in logs:
        assert "Spider closed (finished)" in log, log[-3000:]
    return logs


def stats(logs: list[str], name: str) -> list[int]:
    """The values of stat ``name`` in the final stats of each log that has it."""
    return [int(n) for log in logs for n in re.findall(rf"'{re.escape(name)}': (\d+)", log)]


def test_two_processes_share_the_trap_cap_and_the_duplicate_checks(
    tmp_path,
    sample_graph,
    redis_server,  # noqa: F811
):
    cap = 3
    with guarded_site(sample_graph) as site:
        logs = crawl_home_by_two_processes(
            tmp_path, redis_server.url, site, TRAP_MAX_PER_FAMILY=cap
        )
        paths = [path for _, path in site.log.gets()]

    def stat(name: str) -> list[int]:
        return stats(logs, f"focused/{name}")

    # The cap is the crawl's: both processes found calendar links, and queued three in all.
    assert sum(stat("trap/penalised")) <= cap
    assert len(stat("trap/dropped")) == 2, "a process never met the trap: nothing is shown"
    assert 1 <= sum(path.startswith("/cal/") for path in paths) <= cap
    pages = {
        urlsplit(page["url"]).path: page
        for page in Crawl(None, tmp_path / "focused.sqlite3", "shared").pages()
    }
    assert sum(path.startswith("/article/") for path in pages) == 30
    for k in range(6):
        pair = [pages[f"/pair/{k}/a"], pages[f"/pair/{k}/b"]]
        originals = [page for page in pair if page["duplicate_of"] is None]
        assert len(originals) == 1, f"pair {k} stored twice"
        copy = pair[1 - pair.index(originals[0])]
        assert copy["duplicate_of"] == originals[0]["url"] and copy["text"] is None
    assert sum(stat("duplicates/near")) == 6
    for k in range(4):
        assert pages[f"/canon/{k}"]["duplicate_of"] is None
        copies = [pages.get(f"/alias/{k}/{n}") for n in (1, 2)]
        assert [copy["duplicate_of"] for copy in copies if copy] == [f"{site.url}/canon/{k}"]


def test_processes_taking_pages_of_one_host_at_once_get_exactly_the_cap(redis_server):  # noqa: F811
    cap = 7
    schedulers = [shared_scheduler(redis_server.url, MAX_PAGES_PER_HOST=cap) for _ in range(4)]
    first = schedulers[0][0]
    for i in range(120):  # the frontier is the crawl's: every process pops from it
        first.enqueue_request(scrapy.Request(f"http://h.test/{i}", meta={"depth": 1}))
    handed_out: list[list[str]] = [[] for _ in schedulers]

    def fetch(scheduler, urls):
        while (request := scheduler.next_request()) is not None:
            urls.append(request.url)

    threads = [
        threading.Thread(target=fetch, args=(scheduler, urls))
        for (scheduler, _), urls in zip(schedulers, handed_out, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(len(urls) for urls in handed_out) == cap
    skipped = [
        crawler.stats.get_value("focused/skipped/host_limit", 0) for _, crawler in schedulers
    ]
    assert sum(skipped) == 120 - cap
    counts = redis.Redis(port=redis_server.port).hgetall("focused:t:host_pages")
    assert counts == {b"h.test": str(cap).encode()}
    for scheduler, _ in schedulers:
        scheduler.close("finished")


def test_a_request_dropped_at_the_host_cap_takes_no_slot_of_the_page_budget(redis_server):  # noqa: F811
    one, _ = shared_scheduler(redis_server.url, MAX_PAGES_PER_HOST=2, CLOSESPIDER_PAGECOUNT=5)
    urls = [f"http://a.test/{i}" for i in range(10)] + ["http://b.test/0", "http://b.test/1"]
    for url in urls:
        one.enqueue_request(scrapy.Request(url, meta={"depth": 1}))
    handed_out = []
    while (request := one.next_request()) is not None:
        handed_out.append(request.url)
    # a.test/2 to /9 are dropped, never fetched: the budget counts pages fetched, so b.test's
    # pages are still handed out (before, the drops spent the budget: a.test/0 and /1 only).
    assert handed_out == urls[:2] + urls[-2:]
    assert redis.Redis(port=redis_server.port).get("focused:t:popped") == b"4"
    one.close("finished")


def test_two_processes_share_the_pages_per_host(
    tmp_path,
    sample_graph,
    redis_server,  # noqa: F811
):
    cap = 8
    # One host, over 40 pages, slow enough that both processes fetch before the cap is met.
    with guarded_site(sample_graph, delay=0.5) as site:
        logs = crawl_home_by_two_processes(tmp_path, redis_server.url, site, MAX_PAGES_PER_HOST=cap)
        paths = [path for _, path in site.log.gets()]  # robots.txt is not logged
    for log in logs:
        # A request dropped at the cap is done with: no process re-queues it when idle.
        assert "never marked done" not in log, log[-3000:]
    stored = stats(logs, "item_scraped_count")
    assert len(stored) == 2, "a process stored nothing: the cap was never shared"
    assert len(paths) <= cap
    assert sum(stats(logs, "focused/skipped/host_limit")) >= 40 - cap
    pages = Crawl(None, tmp_path / "focused.sqlite3", "shared").pages()
    assert 1 <= len(pages) <= cap


def test_a_request_parked_when_its_process_closes_gives_its_host_slot_back(redis_server):  # noqa: F811
    cap = 3
    one, _ = shared_scheduler(redis_server.url, MAX_PAGES_PER_HOST=cap, HOST_WINDOW=100)
    for path in ("a.test/0", "a.test/1", "b.test/0", "a.test/2", "a.test/3"):
        one.enqueue_request(scrapy.Request(f"http://{path}", meta={"depth": 1}))
    fetched = [one.next_request(), one.next_request()]
    for request in fetched:  # done with, as FrontierAck marks a fetched page
        one.shared.frontier.ack(request.meta[INFLIGHT_META])
    handed_out = [request.url for request in fetched]
    # a.test/1 came up while a.test was in the window: parked, holding a.test's second slot.
    assert handed_out == ["http://a.test/0", "http://b.test/0"]
    assert [request.url for request in one.parked] == ["http://a.test/1"]
    one.close("shutdown")  # a.test/1 goes back to the crawl's frontier, and its slot with it
    client = redis.Redis(port=redis_server.port)
    assert client.hget("focused:t:host_pages", "a.test") == b"1"
    two, _ = shared_scheduler(redis_server.url, MAX_PAGES_PER_HOST=cap)
    while (request := two.next_request()) is not None:
        handed_out.append(request.url)
    # The crawl fetches a.test exactly the cap, a.test/1 included (it was never fetched).
    assert sorted(url for url in handed_out if "a.test" in url) == [
        "http://a.test/0",
        "http://a.test/1",
        "http://a.test/2",
    ]
    assert client.hget("focused:t:host_pages", "a.test") == str(cap).encode()
    two.close("finished")


def test_requests_of_a_process_taken_for_dead_give_their_host_slots_back(redis_server):  # noqa: F811
    # A process killed with requests under way held their host slots for good: the others
    # fetched them again on slots of their own, and the crawl stored that many pages fewer than
    # MAX_PAGES_PER_HOST (146 for a cap of 150, kill -9 of one of three processes).
    cap = 4
    killed, _ = shared_scheduler(redis_server.url, MAX_PAGES_PER_HOST=cap)
    live, _ = shared_scheduler(redis_server.url, MAX_PAGES_PER_HOST=cap)
    for i in range(6):
        live.enqueue_request(scrapy.Request(f"http://a.test/{i}", meta={"depth": 1}))
    live.shared.frontier.flush()  # the page's links reach Redis
    held = [killed.next_request(), killed.next_request()]
    client = redis.Redis(port=redis_server.port)
    assert client.hget("focused:t:host_pages", "a.test") == b"2"
    assert live.shared.frontier.requeue(killed.shared.worker) == 2  # taken for dead
    assert client.hget("focused:t:host_pages", "a.test") == b"0"
    handed_out = []
    while (request := live.next_request()) is not None:
        handed_out.append(request)
    assert [request.url for request in handed_out[:2]] == [request.url for request in held]
    assert len(handed_out) == cap  # a.test/0 to /3, each once
    # Alive after all, the process finishes a request put back and not popped again: it is
    # taken out of the frontier, and counts against its host's pages again.
    one_more, _ = shared_scheduler(redis_server.url, MAX_PAGES_PER_HOST=cap + 1)
    one_more.enqueue_request(scrapy.Request("http://a.test/9", meta={"depth": 0}))
    late = one_more.next_request()
    one_more.shared.frontier.requeue(one_more.shared.worker)
    one_more.shared.frontier.ack(late.meta[INFLIGHT_META])
    assert client.hget("focused:t:host_pages", "a.test") == str(cap + 1).encode()
    assert one_more.next_request() is None
    for scheduler in (killed, live, one_more):
        scheduler.close("finished")


def test_slots_given_back_at_once_never_take_a_count_below_zero(redis_server):  # noqa: F811
    schedulers = [shared_scheduler(redis_server.url)[0] for _ in range(4)]
    shared = schedulers[0].shared
    for _ in range(5):
        assert shared.take("host_pages", "a.test", 5)

    def give_back(scheduler):  # twenty returns of five slots, from four processes at once
        for _ in range(5):
            scheduler.shared.give_back("host_pages", "a.test")

    threads = [threading.Thread(target=give_back, args=(scheduler,)) for scheduler in schedulers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    shared.give_back("host_pages", "b.test")  # never taken
    client = redis.Redis(port=redis_server.port)
    assert client.hgetall("focused:t:host_pages") == {b"a.test": b"0"}
    assert shared.take("host_pages", "a.test", 1) and not shared.take("host_pages", "a.test", 1)
    for scheduler in schedulers:
        scheduler.close("finished")
