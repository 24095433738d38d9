"""The bounded frontier (FRONTIER_MAX): eviction keeps the best, for every strategy."""

from __future__ import annotations

import logging
import pickle
import random
from collections import Counter

import pytest
import scrapy
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.test import get_crawler

from focused.resume import request_finished
from focused.scheduler import FocusedScheduler
from focused.strategies import STRATEGIES
from tests.conftest import run_crawl
from tests.queues import QueueSpider, drain, make_queue
from tests.sites import FetchLog, Reply, Site, html


def requests(count: int, seed: int = 7) -> list[scrapy.Request]:
    rng = random.Random(seed)
    return [
        scrapy.Request(
            f"http://t/u{i}",
            meta={
                "depth": rng.randint(0, 4),
                "discovery": i,
                "parent_relevance": round(rng.random(), 3),
                "link_relevance": round(rng.random(), 3),
                "path_cost": rng.random() * 3,
            },
        )
        for i in range(count)
    ]


@pytest.fixture(params=["memory", "disk"])
def key(request, tmp_path) -> str:
    return "" if request.param == "memory" else str(tmp_path / "requests.queue")


# The oracle (a benchmark reference) needs a distances file to start at all.
@pytest.mark.parametrize("strategy", sorted(set(STRATEGIES) - {"oracle"}))
def test_evict_drops_exactly_the_lowest_ranked(strategy, key, tmp_path):
    bounded = make_queue(strategy, key)
    for request in requests(60):
        bounded.push(request)
    # The rank is the frontier's order, not the pop order: a random strategy (bees) draws
    # among queued requests, and with fewer of them its draws differ.
    ranked = [
        request.url for _, _, request in sorted(bounded.frontier.entries(), key=lambda e: e[1])
    ]
    queued = len(bounded)
    assert bounded.evict(15) == 15
    assert len(bounded) == queued - 15
    kept = {f"http://t/{name}" for name in drain(bounded)}
    assert kept == set(ranked[: queued - 15])


def test_memory_eviction_survives_pops_and_rescoring():
    queue = make_queue("bestfirst")
    for i in range(3000):
        queue.push(scrapy.Request(f"http://t/u{i}", meta={"parent_relevance": (i % 100) / 100}))
        if i % 3 == 0:
            queue.pop()  # leaves stale items in the worst-first heap
    for i in range(0, 3000, 7):
        queue.rediscover(scrapy.Request(f"http://t/u{i}", meta={"parent_relevance": 0.999}))
    size = len(queue)
    assert queue.evict(size - 100) == size - 100
    kept = drain(queue)
    assert len(kept) == 100
    assert len(queue.frontier._worst) <= 2 * 3000 + 1024  # compacted, not unbounded


def make_scheduler(
    tmp_path, jobdir: bool, state: dict | None = None, params: dict | None = None, **settings
):
    """A scheduler opened on a fresh spider; ``state`` is the spider's (as SpiderState loads
    it on a JOBDIR resume), ``params`` the strategy's."""
    values = {"FRONTIER_MAX": 1000, "SCHEDULER_PRIORITY_QUEUE": STRATEGIES["bestfirst"]}
    values |= {"REQUEST_FINGERPRINTER_CLASS": "focused.canonical.CanonicalRequestFingerprinter"}
    if jobdir:
        values["JOBDIR"] = str(tmp_path / "job")
    values.update(settings)
    crawler = get_crawler(QueueSpider, values)
    spider = QueueSpider()
    spider.strategy_params, spider.state = params or {}, {} if state is None else state
    crawler.spider, spider.crawler = spider, crawler
    crawler.stats.open_spider()
    scheduler = FocusedScheduler.from_crawler(crawler)
    scheduler.open(spider)
    return scheduler, crawler


@pytest.mark.parametrize("jobdir", [False, True])
def test_full_frontier_evicts_the_worst_counts_and_logs_once_per_thousand(tmp_path, caplog, jobdir):
    scheduler, crawler = make_scheduler(tmp_path, jobdir)
    relevance = {f"http://t/u{i}": random.Random(i).random() for i in range(2600)}
    with caplog.at_level(logging.INFO, logger="focused.scheduler"):
        for url, score in relevance.items():
            assert scheduler.enqueue_request(
                scrapy.Request(url, meta={"parent_relevance": score, "depth": 1})
            )
            assert len(scheduler) <= 1000
    assert crawler.stats.get_value("focused/evicted") == 1600
    assert len([r for r in caplog.records if "evicted" in r.getMessage()]) == 1
    kept = set()
    while (request := scheduler.next_request()) is not None:
        kept.add(request.url)
    best = sorted(relevance, key=relevance.get, reverse=True)[:1000]
    assert kept == set(best)
    scheduler.close("finished")


def test_a_frontier_max_lowered_at_a_resume_trims_the_frontier_as_it_opens(tmp_path, caplog):
    """Lowered at a resume, FRONTIER_MAX was kept to only as the next link was queued."""
    scheduler, _ = make_scheduler(tmp_path, True)
    relevance = {f"http://t/u{i}": random.Random(i).random() for i in range(120)}
    for url, score in relevance.items():
        scheduler.enqueue_request(scrapy.Request(url, meta={"parent_relevance": score, "depth": 1}))
    scheduler.close("shutdown")
    with caplog.at_level(logging.INFO, logger="focused.scheduler"):
        reopened, crawler = make_scheduler(tmp_path, True, FRONTIER_MAX=50)
    assert len(reopened) == 50
    assert crawler.stats.get_value("focused/evicted") == 70
    assert crawler.stats.get_value("focused/frontier") == 50
    lines = [r.getMessage() for r in caplog.records if "evicted" in r.getMessage()]
    assert lines == [
        "Frontier over FRONTIER_MAX=50 at the resume: 70 lowest-ranked requests evicted"
    ]
    best = sorted(relevance, key=relevance.get, reverse=True)[:50]
    assert {request.url for request in iter(reopened.next_request, None)} == set(best)
    reopened.close("finished")


def test_a_resume_that_evicts_nothing_says_nothing(tmp_path, caplog, monkeypatch):
    """Two processes of a shared crawl opening at once with a lowered FRONTIER_MAX both read the
    frontier over it; the one whose eviction found it cut already said it evicted 0."""
    scheduler, _ = make_scheduler(tmp_path, True)
    for i in range(60):
        scheduler.enqueue_request(scrapy.Request(f"http://t/u{i}", meta={"depth": 1}))
    scheduler.close("shutdown")
    monkeypatch.setattr("focused.scheduler.FocusedScheduler._evict", lambda self, count: 0)
    with caplog.at_level(logging.INFO, logger="focused.scheduler"):
        reopened, _ = make_scheduler(tmp_path, True, FRONTIER_MAX=50)
    assert not [r for r in caplog.records if "evicted" in r.getMessage()]
    reopened.close("shutdown")


@pytest.mark.parametrize("reason", ["finished", "closespider_pagecount"])
def test_a_crawl_that_ran_dry_after_evictions_says_so_at_its_close(tmp_path, caplog, reason):
    """Evicted links stay seen, so a small FRONTIER_MAX can end a crawl before its budget (a
    2,500-page crawl of the full graph with FRONTIER_MAX=300 closed "finished" at 1,728 pages).
    That end, and only that one, gets a warning naming the cause."""
    scheduler, _ = make_scheduler(tmp_path, False, FRONTIER_MAX=10)
    for i in range(25):
        scheduler.enqueue_request(scrapy.Request(f"http://t/u{i}", meta={"depth": 1}))
    while scheduler.next_request() is not None:
        pass
    with caplog.at_level(logging.WARNING, logger="focused.scheduler"):
        scheduler.close(reason)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if reason == "finished":
        assert warnings == [
            "The frontier ran empty after 15 requests were evicted (FRONTIER_MAX=10): evicted"
            " links are not queued again, so the crawl ends here; raise FRONTIER_MAX to go on"
        ]
    else:
        assert warnings == []


def test_a_crawl_that_ran_dry_after_one_eviction_says_so_in_the_singular(tmp_path, caplog):
    """It said "after 1 requests were evicted"."""
    scheduler, _ = make_scheduler(tmp_path, False, FRONTIER_MAX=10)
    for i in range(11):
        scheduler.enqueue_request(scrapy.Request(f"http://t/u{i}", meta={"depth": 1}))
    while scheduler.next_request() is not None:
        pass
    with caplog.at_level(logging.WARNING, logger="focused.scheduler"):
        scheduler.close("finished")
    assert [r.getMessage() for r in caplog.records] == [
        "The frontier ran empty after 1 request was evicted (FRONTIER_MAX=10): evicted"
        " links are not queued again, so the crawl ends here; raise FRONTIER_MAX to go on"
    ]


# -- per-host limits ---------------------------------------------------------------------------


def test_host_window_parks_requests_and_hands_them_out_later(tmp_path):
    scheduler, crawler = make_scheduler(tmp_path, False, HOST_WINDOW=3)
    # best first: a1 a2 a3 b1 b2 c1 (one host's links all rank above the next host's)
    for url, score in [("a1", 0.9), ("a2", 0.89), ("a3", 0.88), ("b1", 0.7), ("b2", 0.69)]:
        scheduler.enqueue_request(
            scrapy.Request(f"http://{url[0]}.test/{url}", meta={"parent_relevance": score})
        )
    scheduler.enqueue_request(scrapy.Request("http://c.test/c1", meta={"parent_relevance": 0.5}))
    assert len(scheduler) == 6
    order = []
    while (request := scheduler.next_request()) is not None:
        order.append(request.url.rsplit("/", 1)[1])
    assert len(order) == 6  # nothing lost
    assert order[:3] == ["a1", "b1", "c1"]
    hosts = [name[0] for name in order]
    windows = [hosts[i : i + 3] for i in range(len(hosts) - 2)]
    strict = [w for w in windows if len(set(w)) == len(w)]
    relaxed = crawler.stats.get_value("focused/host_window/relaxed", 0)
    assert relaxed >= 1  # a2, a3, b2 left with only two hosts: the window must give way
    assert len(windows) - len(strict) <= relaxed * 2
    # A host out of the window is no longer counted (a key per host ever fetched, before).
    assert set(scheduler.in_window) == set(scheduler.recent_hosts)


def test_parked_requests_go_back_to_the_queue_on_close(tmp_path):
    scheduler, crawler = make_scheduler(tmp_path, True, HOST_WINDOW=5)
    for i in range(4):
        scheduler.enqueue_request(
            scrapy.Request(f"http://a.test/{i}", meta={"parent_relevance": 1 - i / 10})
        )
    scheduler.enqueue_request(scrapy.Request("http://b.test/0", meta={"parent_relevance": 0.1}))
    handed_out = [scheduler.next_request(), scheduler.next_request()]
    assert [r.url for r in handed_out] == ["http://a.test/0", "http://b.test/0"]  # 1..3 parked
    assert len(scheduler) == 3
    for request in handed_out:  # their responses were processed (else they come back too)
        crawler.signals.send_catch_log(request_finished, request=request)
    scheduler.close("shutdown")
    reopened, crawler = make_scheduler(tmp_path, True)
    assert len(reopened) == 3
    # Queued again, not in flight: else the resume took them for requests a crash cut short
    # and queued them a second time, last among their ties.
    assert inflight(reopened) == 0
    assert crawler.stats.get_value("focused/resume/recovered_inflight") is None
    order = [reopened.next_request().url for _ in range(3)]
    assert order == [f"http://a.test/{i}" for i in (1, 2, 3)]
    reopened.close("finished")


def multi_host_site(hosts: list[str]):
    def respond(method: str, path: str) -> Reply:
        if not path.startswith("/p"):
            return Reply(404, "")
        page = int(path[2:])
        links = [f"/p{page + 1}", f"/p{page + 2}"] if page < 30 else []
        links += [f"http://{host}/p0" for host in hosts]
        anchors = " ".join(f'<a href="{link}">birds {link}</a>' for link in links)
        return Reply(200, html(f"birds {page}", f"<p>birds nest feathers {page}</p>{anchors}"))

    return respond


def test_crawl_respects_the_host_window_and_the_page_cap(tmp_path):
    log = FetchLog()
    addresses = [f"127.0.0.{i}" for i in range(2, 14)]
    sites = []
    hosts: list[str] = []
    respond = multi_host_site(hosts)
    for address in addresses:
        sites.append(Site(respond, address, log).__enter__())
        hosts.append(sites[-1].url.removeprefix("http://"))
    try:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bestfirst", "query": "birds", "seeds": f"http://{hosts[0]}/p0"},
            {
                "HOST_WINDOW": 4,
                "MAX_PAGES_PER_HOST": 3,
                "CONCURRENT_REQUESTS": 1,
                "CLOSESPIDER_PAGECOUNT": 30,  # robots.txt responses do not count
            },
        )
    finally:
        for site in sites:
            site.__exit__()
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    fetched = [host for host, _ in log.gets()]
    assert len(fetched) >= 30  # one more may be in flight when the budget closes the spider
    for i in range(len(fetched) - 3):
        assert len(set(fetched[i : i + 4])) == 4, fetched[i : i + 4]
    assert max(Counter(fetched).values()) <= 3


@pytest.mark.parametrize("jobdir", [False, True])
def test_crawl_of_few_hosts_with_a_wide_window_keeps_the_page_cap(tmp_path, jobdir):
    """Two hosts and a window of 100: nearly every request is parked, and the window gives way
    again and again (``relaxed``); the parked requests must not pass the cap."""
    log = FetchLog()
    hosts: list[str] = []
    sites = [Site(multi_host_site(hosts), address, log) for address in ("127.0.0.2", "127.0.0.3")]
    for site in sites:
        site.__enter__()
        hosts.append(site.url.removeprefix("http://"))
    settings = {"HOST_WINDOW": 100, "MAX_PAGES_PER_HOST": 2, "CONCURRENT_REQUESTS": 1}
    if jobdir:
        settings["JOBDIR"] = str(tmp_path / "job")
    try:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bestfirst", "query": "birds", "seeds": f"http://{hosts[0]}/p0"},
            settings,
        )
    finally:
        for site in sites:
            site.__exit__()
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert Counter(host for host, _ in log.gets()) == {"127.0.0.2": 2, "127.0.0.3": 2}
    assert "'focused/host_window/relaxed'" in crawl.result.stderr  # the window gave way


def test_max_pages_per_host_drops_the_rest_of_a_host(tmp_path, caplog):
    """Also: a crawl that ran dry so says why at its close. A crawl of one site with the cap
    ended 'finished' at the cap, its log silent on the links it left (the stats alone)."""
    scheduler, crawler = make_scheduler(tmp_path, True, MAX_PAGES_PER_HOST=3)
    for i in range(10):
        scheduler.enqueue_request(scrapy.Request(f"http://a.test/{i}", meta={"depth": 1}))
    scheduler.enqueue_request(scrapy.Request("http://b.test/0", meta={"parent_relevance": 0.0}))
    handed_out = []
    while (request := scheduler.next_request()) is not None:
        handed_out.append(request.url)
    assert sum("a.test" in url for url in handed_out) == 3
    assert "http://b.test/0" in handed_out
    assert crawler.stats.get_value("focused/skipped/host_limit") == 7
    with caplog.at_level(logging.INFO, logger="focused.scheduler"):
        scheduler.close("finished")
    assert [r.getMessage() for r in caplog.records if "MAX_PAGES_PER_HOST" in r.getMessage()] == [
        "The frontier ran empty after 7 requests were dropped at hosts that had their"
        " MAX_PAGES_PER_HOST=3 pages"
    ]


LINKS_LEFT_OUT = (
    "The frontier ran empty after 2 links were left out of pages past their first"
    " MAX_LINKS_PER_PAGE=1 link: raise MAX_LINKS_PER_PAGE (0: every link) to go on"
)


@pytest.mark.parametrize("reason", ["finished", "closespider_pagecount"])
def test_a_crawl_that_ran_dry_after_links_past_max_links_per_page_says_so(tmp_path, caplog, reason):
    """A crawl with MAX_LINKS_PER_PAGE=1 ended 'finished' after a few pages, its log silent on
    the links it had not looked at (the stats alone), where the other limits say theirs."""
    scheduler, crawler = make_scheduler(tmp_path, False, MAX_LINKS_PER_PAGE=1)
    scheduler.enqueue_request(scrapy.Request("http://t/a", meta={"depth": 1}))
    crawler.stats.inc_value("focused/skipped/link_limit", 2)  # as the spider counts them
    while scheduler.next_request() is not None:
        pass
    with caplog.at_level(logging.INFO, logger="focused.scheduler"):
        scheduler.close(reason)
    said = [r.getMessage() for r in caplog.records if "MAX_LINKS_PER_PAGE" in r.getMessage()]
    assert said == ([LINKS_LEFT_OUT] if reason == "finished" else [])


def test_a_crawl_cut_by_max_links_per_page_says_so_in_its_log(tmp_path):
    """The same, from the spider's count to the log: a home page of three links, one followed."""

    def respond(method: str, path: str) -> Reply:
        links = "".join(f'<a href="/{name}">birds {name}</a>' for name in "abc")
        return Reply(200, html("birds", f"<p>birds nest</p>{links if path == '/' else ''}"))

    with Site(respond) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"},
            {"MAX_LINKS_PER_PAGE": 1},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert "'finish_reason': 'finished'" in crawl.result.stderr
    assert LINKS_LEFT_OUT in crawl.result.stderr


# Each strategy that leaves links out by a parameter of its own, that parameter, the stat that
# counts them, and three links of which it leaves out two: deeper than dfs's max_depth, at the
# end of shark's chain of irrelevant pages, past beam's width in their level.
LEFT_OUT = {
    "dfs": ({"max_depth": 2}, "focused/depth_cut", [{"depth": d} for d in (1, 3, 4)]),
    "hybrid": (
        {"then": "dfs", "max_depth": 2},
        "focused/depth_cut",
        [{"depth": d} for d in (1, 3, 4)],
    ),
    "shark": ({"depth": 2}, "focused/depth_cut", [{"shark_run": r} for r in (0, 2, 2)]),
    "beam": ({"beam_width": 1}, "focused/beam/dropped", [{}] * 3),
}


@pytest.mark.parametrize("strategy", sorted(LEFT_OUT))
@pytest.mark.parametrize("reason", ["finished", "closespider_pagecount"])
def test_a_crawl_that_ran_dry_after_its_strategy_left_links_out_says_so(
    tmp_path, caplog, strategy, reason
):
    """A dfs crawl of the sample with a budget of 297 pages ended 'finished' at 214 and a shark
    crawl at 266, each with "frontier 0 requests", its log silent on the links the strategy had
    left out (the stats alone), which would have kept it going."""
    params, stat, metas = LEFT_OUT[strategy]
    scheduler, _ = make_scheduler(
        tmp_path, False, params=params, SCHEDULER_PRIORITY_QUEUE=STRATEGIES[strategy]
    )
    for i, meta in enumerate(metas):
        meta = {"depth": 1, "discovery": i, "shark_sim": 0.1} | meta
        scheduler.enqueue_request(scrapy.Request(f"http://t/u{i}", meta=meta))
    while scheduler.next_request() is not None:
        pass
    with caplog.at_level(logging.INFO, logger="focused.scheduler"):
        scheduler.close(reason)
    said = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    if reason == "finished":
        (param,) = set(params) - {"then"}
        assert said == [
            f"The frontier ran empty after 2 links were left out by {strategy}'s"
            f" {param}={params[param]} ({stat}): raise {param} to go on"
        ]
    else:
        assert said == []


def dfs_cut_at_depth_1(tmp_path, jobdir: bool, state: dict | None = None, resumed=False):
    """A dfs scheduler with max_depth=1 and the crawl's dupefilter, its home page fetched
    unless ``resumed``."""
    scheduler, crawler = make_scheduler(
        tmp_path,
        jobdir,
        state,
        {"max_depth": 1},
        SCHEDULER_PRIORITY_QUEUE=STRATEGIES["dfs"],
        DUPEFILTER_CLASS="focused.resume.FrontierDupeFilter",
    )
    if not resumed:
        scheduler.enqueue_request(scrapy.Request("http://t/", meta={"depth": 0}))
        assert scheduler.next_request() is not None
    return scheduler, crawler


def find(scheduler, url: str, depth: int, discovery: int) -> None:
    """A link to ``url`` found on the home page's descendant at ``depth`` - 1."""
    meta = {"depth": depth, "discovery": discovery, "parent_url": "http://t/"}
    scheduler.enqueue_request(scrapy.Request(url, meta=meta))


def left_out_said(scheduler, caplog) -> list[str]:
    """What the crawl says of the links left out as it runs dry."""
    while scheduler.next_request() is not None:
        pass
    with caplog.at_level(logging.INFO, logger="focused.scheduler"):
        scheduler.close("finished")
    return [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]


def left_out_by_max_depth_1(how_many: str) -> str:
    return (
        f"The frontier ran empty after {how_many} left out by dfs's max_depth=1"
        " (focused/depth_cut): raise max_depth to go on"
    )


@pytest.mark.parametrize("jobdir", [False, True])
def test_links_left_out_that_were_fetched_anyway_are_not_said_to_be_left_out(
    tmp_path, caplog, jobdir
):
    """A dfs crawl that had fetched every page it could reach said it ran empty after links
    were left out by max_depth, to raise it to go on: its deepest pages' links back to the home
    page, fetched at depth 0, counted once per page that had them, as did a link cut deep and
    fetched from a shallower page. A link left out counts once, and only if never queued."""
    scheduler, crawler = dfs_cut_at_depth_1(tmp_path, jobdir)
    find(scheduler, "http://t/a", 1, 1)
    find(scheduler, "http://t/b", 1, 2)
    while scheduler.next_request() is not None:
        pass
    for _ in "ab":  # both pages link back home, and on to a page linked from home as well
        find(scheduler, "http://t/", 2, 3)
        find(scheduler, "http://t/c", 2, 4)
    find(scheduler, "http://t/c", 1, 5)
    assert left_out_said(scheduler, caplog) == []
    assert crawler.stats.get_value("focused/depth_cut") == 4  # each link found, as before

    scheduler, _ = dfs_cut_at_depth_1(tmp_path / "2", jobdir)
    for discovery in range(3):  # three pages link to one page beyond max_depth
        find(scheduler, "http://t/deep", 2, discovery)
    assert left_out_said(scheduler, caplog) == [left_out_by_max_depth_1("1 link was")]


def test_a_resumed_crawl_that_runs_dry_says_what_earlier_runs_left_out(tmp_path, caplog):
    """A JOBDIR run that left links out by max_depth and paused kept no trace of them: the
    resumed run ran dry saying nothing, as a crawl of all it could reach."""
    state: dict = {}
    scheduler, _ = dfs_cut_at_depth_1(tmp_path, True, state)
    for url, depth in [("http://t/a", 1), ("http://t/deep", 2), ("http://t/gone", 2)]:
        find(scheduler, url, depth, 1)
    scheduler.close("shutdown")  # a pause, with http://t/a still queued
    scheduler, _ = dfs_cut_at_depth_1(tmp_path, True, state, resumed=True)
    # The resumed run finds http://t/gone on a shallower page: no longer left out.
    find(scheduler, "http://t/gone", 1, 2)
    assert left_out_said(scheduler, caplog) == [left_out_by_max_depth_1("1 link was")]


@pytest.mark.parametrize("jobdir", [False, True])
def test_links_left_out_past_those_kept_are_said_as_at_least(tmp_path, caplog, jobdir, monkeypatch):
    """Each link left out was kept, its URL and fingerprint, in memory and in spider.state: a
    deep cut over a large site refuses a link to every page past it. Past ``LEFT_OUT_KEPT``
    none is kept, and the close says "at least"."""
    monkeypatch.setattr("focused.scheduler.LEFT_OUT_KEPT", 3)
    state: dict = {}
    scheduler, _ = dfs_cut_at_depth_1(tmp_path, jobdir, state)
    for i in range(5):
        find(scheduler, f"http://t/deep{i}", 2, i + 1)
    assert len(scheduler.left_out) == len(scheduler.left_out_urls) == 3
    said = left_out_said(scheduler, caplog)
    assert said == [left_out_by_max_depth_1("at least 3 links were")]
    assert len(state["links_left_out"]) == 3


def test_a_resumed_crawl_says_at_least_for_links_left_out_past_those_kept_before(
    tmp_path, caplog, monkeypatch
):
    """A run that left out more links than it kept, then paused, saved those kept and not
    queued since; the resumed run counted them alone, without "at least", as if no other
    link had been left out."""
    monkeypatch.setattr("focused.scheduler.LEFT_OUT_KEPT", 3)
    state: dict = {}
    scheduler, _ = dfs_cut_at_depth_1(tmp_path, True, state)
    for i in range(5):  # deep3 and deep4 past those kept
        find(scheduler, f"http://t/deep{i}", 2, i + 1)
    find(scheduler, "http://t/deep0", 1, 6)  # found on a shallower page: no longer left out
    scheduler.close("shutdown")
    assert len(state["links_left_out"]) == 2
    scheduler, _ = dfs_cut_at_depth_1(tmp_path, True, state, resumed=True)
    said = left_out_said(scheduler, caplog)
    assert said == [left_out_by_max_depth_1("at least 2 links were")]


def test_links_left_out_past_those_kept_are_said_when_those_kept_were_queued(
    tmp_path, caplog, monkeypatch
):
    """Every link kept was found again on a shallower page and queued; those past them, never
    queued, were not known one by one: the close said nothing, as for a crawl of all it could
    reach."""
    monkeypatch.setattr("focused.scheduler.LEFT_OUT_KEPT", 3)
    scheduler, _ = dfs_cut_at_depth_1(tmp_path, False)
    for depth, numbers in ((2, range(5)), (1, range(3))):  # deep3 and deep4 never queued
        for i in numbers:
            find(scheduler, f"http://t/deep{i}", depth, 10 * depth + i)
    said = left_out_said(scheduler, caplog)
    assert said == [left_out_by_max_depth_1("links past the 3 counted were")]


def queue_hosts(scheduler, urls: list[str]) -> None:
    """Queue ``urls`` best first, in the order given."""
    for rank, url in enumerate(urls):
        scheduler.enqueue_request(
            scrapy.Request(url, meta={"parent_relevance": 1 - rank / (len(urls) + 1)})
        )


def inflight(scheduler) -> int:
    return scheduler._durable_frontier()._db.execute("SELECT COUNT(*) FROM inflight").fetchone()[0]


@pytest.mark.parametrize("jobdir", [False, True])
def test_requests_parked_by_the_window_never_pass_the_host_cap(tmp_path, jobdir):
    scheduler, crawler = make_scheduler(tmp_path, jobdir, MAX_PAGES_PER_HOST=2, HOST_WINDOW=100)
    queue_hosts(scheduler, [f"http://a.test/{i}" for i in range(4)] + ["http://b.test/0"])
    handed_out = []
    while (request := scheduler.next_request()) is not None:
        handed_out.append(request.url)
        crawler.signals.send_catch_log(request_finished, request=request)
    # a.test/1 waits for the window while a.test/0 is the only page of a.test fetched; the cap
    # must still stop a.test/2 and a.test/3, whatever comes out of the window later.
    assert handed_out == ["http://a.test/0", "http://b.test/0", "http://a.test/1"]
    assert crawler.stats.get_value("focused/skipped/host_limit") == 2
    assert scheduler.spider.state["host_pages"] == {"a.test": 2, "b.test": 1}
    if jobdir:  # the requests dropped at the cap are finished, as every other drop at the cap
        assert inflight(scheduler) == 0
    scheduler.close("finished")


@pytest.mark.parametrize("jobdir", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_host_cap_holds_whatever_the_order_of_parking_and_handing_out(tmp_path, jobdir, seed):
    rng = random.Random(seed)
    cap, hosts = rng.randint(1, 4), [f"h{i}.test" for i in range(rng.randint(2, 5))]
    scheduler, crawler = make_scheduler(
        tmp_path, jobdir, MAX_PAGES_PER_HOST=cap, HOST_WINDOW=rng.randint(2, 8)
    )
    queued, handed_out = 0, Counter()
    for step in range(300):
        if rng.random() < 0.6:
            url = f"http://{rng.choice(hosts)}/{step}"
            meta = {"parent_relevance": rng.random()}
            queued += scheduler.enqueue_request(scrapy.Request(url, meta=meta))
        elif (request := scheduler.next_request()) is not None:
            handed_out[urlparse_cached(request).hostname] += 1
    while (request := scheduler.next_request()) is not None:
        handed_out[urlparse_cached(request).hostname] += 1
    assert max(handed_out.values()) <= cap
    assert scheduler.spider.state["host_pages"] == handed_out
    skipped = crawler.stats.get_value("focused/skipped/host_limit", 0)
    assert sum(handed_out.values()) + skipped == queued  # nothing lost, nothing twice
    scheduler.close("finished")


def test_a_resumed_crawl_keeps_the_host_cap_of_requests_parked_at_the_pause(tmp_path):
    settings = {"MAX_PAGES_PER_HOST": 2, "HOST_WINDOW": 100}
    scheduler, crawler = make_scheduler(tmp_path, True, **settings)
    queue_hosts(scheduler, [f"http://a.test/{i}" for i in range(4)] + ["http://b.test/0"])
    handed_out = [scheduler.next_request(), scheduler.next_request()]
    assert [r.url for r in handed_out] == ["http://a.test/0", "http://b.test/0"]
    for request in handed_out:
        crawler.signals.send_catch_log(request_finished, request=request)
    assert len(scheduler) == 1  # a.test/1 parked; a.test/2 and a.test/3 dropped at the cap
    scheduler.close("shutdown")
    # SpiderState pickles the state after the scheduler closed: the parked request's slot is back.
    state = pickle.loads(pickle.dumps(scheduler.spider.state))
    assert state["host_pages"] == {"a.test": 1, "b.test": 1}
    reopened, crawler = make_scheduler(tmp_path, True, state=state, **settings)
    # Found after the resume, ranked below a.test/1: the cap leaves no slot for it.
    reopened.enqueue_request(scrapy.Request("http://a.test/9", meta={"parent_relevance": 0.0}))
    assert [r.url for r in iter(reopened.next_request, None)] == ["http://a.test/1"]
    assert crawler.stats.get_value("focused/skipped/host_limit") == 1
    assert state["host_pages"] == {"a.test": 2, "b.test": 1}
    reopened.close("finished")


def test_rank_semantic_ranks_after_evictions(key):
    """rank_semantic keeps its own record of queued URLs; an eviction must update it, or the
    next ranking re-keys URLs that are gone."""
    queue = make_queue("rank_semantic", key, band_low=0.3, band_high=0.7, T=0.1, rank_every=4)
    rng = random.Random(3)
    for i in range(60):
        parent = f"http://t/u{rng.randrange(i)}" if i else "http://t/seed"
        queue.push(
            scrapy.Request(
                f"http://t/u{i}", meta={"parent_url": parent, "link_relevance": rng.random()}
            )
        )
        if len(queue) > 10:
            assert queue.evict(len(queue) - 10) >= 1
    assert queue.stats.get_value("focused/rankings") >= 10
    assert len(queue) == 10 == sum(map(sum, queue._count))
    assert set(queue._queued) == {fp for fp, _, _ in queue.frontier.entries()}
    queue.push(scrapy.Request("http://t/late", meta={"parent_url": "http://t/u1"}))
    queue._rerank()  # a ranking with the evicted URLs' classes changing
    assert len(drain(queue)) == 11


# -- depth limits --------------------------------------------------------------------------------


@pytest.mark.parametrize("jobdir", [False, True])
@pytest.mark.parametrize(
    ("strategy", "refused", "admitted"),
    [
        ("dfs", {"depth": 6}, {"depth": 2}),  # beyond the default max_depth 5, then within it
        ("shark", {"shark_run": 3, "shark_sim": 0.0}, {"shark_run": 0, "shark_sim": 0.5}),
    ],
)
def test_a_url_refused_by_the_strategy_is_queued_when_found_on_an_admitted_path(
    tmp_path, jobdir, strategy, refused, admitted
):
    """A URL first found past a depth limit (or at the end of shark's cut chain), then on a
    path the strategy admits, is fetched: the refusal did not mark it seen."""
    settings = {"SCHEDULER_PRIORITY_QUEUE": STRATEGIES[strategy]}
    scheduler, crawler = make_scheduler(tmp_path, jobdir, **settings)
    meta = {"parent_url": "http://t/p", "parent_relevance": 0.5, "link_relevance": 0.5}
    scheduler.enqueue_request(scrapy.Request("http://t/x", meta=meta | refused))
    assert crawler.stats.get_value("focused/depth_cut") == 1
    assert len(scheduler) == 0
    assert scheduler.enqueue_request(scrapy.Request("http://t/x", meta=meta | admitted))
    request = scheduler.next_request()
    assert request is not None and request.url == "http://t/x"
    assert {name: request.meta[name] for name in admitted} == admitted
    scheduler.close("finished")


@pytest.mark.parametrize("jobdir", [False, True])
def test_a_candidate_the_beam_dropped_competes_again_when_found_again(tmp_path, jobdir):
    """Beam keeps the k best of a generation; a URL it dropped stays unseen, so that found again
    it is a candidate again (else a narrow beam ends its crawl with unfetched neighbours)."""
    settings = {"SCHEDULER_PRIORITY_QUEUE": STRATEGIES["beam"]}
    settings["DUPEFILTER_CLASS"] = "focused.resume.FrontierDupeFilter"  # the crawl's
    scheduler, crawler = make_scheduler(tmp_path, jobdir, **settings)
    for queue in (scheduler.mqs, scheduler.dqs):
        if queue is not None:
            queue.params["beam_width"] = 1
    meta = {"depth": 1, "parent_url": "http://t/p", "parent_relevance": 0.5}
    assert scheduler.enqueue_request(
        scrapy.Request("http://t/a", meta=meta | {"link_relevance": 0.9})
    )
    scheduler.enqueue_request(scrapy.Request("http://t/b", meta=meta | {"link_relevance": 0.5}))
    assert crawler.stats.get_value("focused/beam/dropped") == 1  # b: the beam holds one
    found_again = meta | {"parent_url": "http://t/q", "link_relevance": 0.95}
    assert scheduler.enqueue_request(scrapy.Request("http://t/b", meta=found_again))
    assert crawler.stats.get_value("focused/beam/dropped") == 2  # a, now the worse one
    assert [scheduler.next_request().url, scheduler.next_request()] == ["http://t/b", None]
    scheduler.close("finished")
