"""Trap defence: URL families, trap requests at the back of every frontier, the per-family cap,
and a 500-page crawl of a loopback site with an endless calendar and session-id URLs."""

from __future__ import annotations

import logging
import pickle
import re
import threading
from collections import Counter
from datetime import date, datetime, timedelta
from html import escape
from urllib.parse import SplitResult, urlsplit

import pytest
import redis
import scrapy
from scrapy import signals
from scrapy.utils.test import get_crawler

from focused.distributed import SharedCrawl
from focused.scheduler import FocusedScheduler
from focused.strategies import STRATEGIES
from focused.traps import TRAP_META, VARIANT_META, family, trap_pattern
from tests.conftest import run_crawl
from tests.queues import QueueSpider, make_queue, req
from tests.sites import Reply, Site, html
from tests.test_frontier_limits import make_scheduler
from tests.test_redis_frontier import redis_server, shared_queue  # noqa: F401 (fixture)

# -- recognising families -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "pattern"),
    [
        ("http://h/a/b/a/b/a/", "repeated_path"),
        ("http://h/a/b/a/b", "repeated_path"),
        ("http://h/x/img/img/img/y.png", "repeated_path"),
        ("http://h/cal/2026/11/30", "calendar"),
        ("http://h/cal/2026/12/", "calendar"),
        ("http://h/archive/2026-11", "calendar"),
        ("http://h/events/2026-11-30.html", "calendar"),
        ("http://h/cal?month=2026-12", "calendar"),
        ("http://h/cal?day=20261130&view=list", "calendar"),
        ("http://h/cal?day=2026.11.30", "calendar"),  # dots, a whole date
        ("http://h/archive/2021-12/", "calendar"),  # a month, not a season
        ("http://h/p?visit=3f9a0c1b2d4e5f60718293a4", "session_id"),
        ("http://h/p?s=ab12cd34ef56ab78cd90&q=x", "session_id"),
        ("http://h/p?token=3f9a0c1b-2d4e-5f60-7182-93a4b5c6d7e8", "session_id"),
        ("http://h/shop?osCsid=ab12cd34ef56ab78cd90ab12", "session_id"),  # ends in sid
        ("http://h/shop?zenid=ab12cd34ef56ab78cd90ab12", "session_id"),
        ("http://h/p?sessid=ab12cd34ef56ab78cd90ab12", "session_id"),
    ],
)
def test_each_trap_pattern_is_recognised(url, pattern):
    assert trap_pattern(url) == pattern


@pytest.mark.parametrize(
    "url",
    [
        "http://h/",
        "http://h/wiki/Bird",
        "http://h/wiki/Bird_migration",
        "http://h/2026/11/30/a-dated-article",  # a date in the path, then the article
        "http://h/products/2000",  # a year alone could be any number
        "http://h/docs/api/docs/intro",  # a segment twice is not yet a loop
        "http://h/item?id=123",
        "http://h/search?q=birds&page=3",
        "http://h/p?ref=newsletterspring",  # long, but a word, not a token
        "http://h/p?article=bird-migration-2024",  # a slug
        "http://h/p?id=200512",  # an id, not a compact date
        "http://h/a/2026/11/11/b",
        # A page's own id, however random it looks: every article past the tenth was dropped.
        "http://h/article?id=3f9a0c1b-2d4e-5f60-7182-93a4b5c6d7e8",
        "http://h/commit?hash=3f9a0c1b2d4e5f60718293a4b5c6d7e8f9a0b1c2",
        "http://h/record?docId=a0B5g00000XyZabEAF",
        "http://h/playlist?list=PLx0sYbCqOb8TBPRdmBHs5Iftvv9TPboYG",
        # A season or a school year, a price, a version: no month.
        "http://h/season/2021-22/",
        "http://h/courses/2023-24",
        "http://h/shop?min_price=1999.99",
        "http://h/download?version=2021.3",
    ],
)
def test_ordinary_urls_are_not_flagged(url):
    assert trap_pattern(url) is None


def test_a_family_gathers_the_urls_a_trap_generates():
    assert family("http://h/cal/2026/11/30") == family("http://h/cal/2027/1/2") == "h/cal/#"
    assert family("http://h/cal/2026/12") == "h/cal/#"  # days and months: one family
    assert family("http://h/cal?month=2026-12") == family("http://h/cal?month=1999-01")
    assert family("http://h/a/b/a/b") == family("http://h/a/b/a/b/a/b/a") == "h/a/b/..."
    assert family("http://h/p?sid=x&b=1") == family("http://h/p?b=2&sid=y") == "h/p?b&sid"
    assert family("http://h/wiki/Bird") != family("http://h/wiki/Owl")
    assert family("http://h/p?q=1") != family("http://h/other?q=1")


# -- the back of the frontier, for every strategy --------------------------------------------


def trap_requests() -> list[scrapy.Request]:
    """Twelve links, the six best of them into a trap family."""
    requests = []
    for i in range(12):
        request = req(
            f"u{i}",
            depth=1,
            parent_url="http://t/",
            parent_relevance=1 - i / 20,
            link_relevance=1 - i / 20,
            anchor_relevance=1 - i / 20,
            context_relevance=1 - i / 20,
            path_cost=i / 20,
            discovery=i,
        )
        if i < 6:
            request.meta[TRAP_META] = "t/cal/#"
        requests.append(request)
    return requests


@pytest.fixture(params=["memory", "disk"])
def key(request, tmp_path) -> str:
    return "" if request.param == "memory" else str(tmp_path / "requests.queue")


@pytest.mark.parametrize("strategy", sorted(set(STRATEGIES) - {"oracle"}))
def test_trap_requests_pop_after_all_others_for_every_strategy(strategy, key):
    # A beam keeps beam_width candidates per generation: room for all twelve.
    queue = make_queue(strategy, key, **({"beam_width": 12} if strategy == "beam" else {}))
    for request in trap_requests():
        queue.push(request)
    popped = []
    while (request := queue.pop()) is not None:
        popped.append(request)
    assert len(popped) == 12
    assert [TRAP_META in r.meta for r in popped] == [False] * 6 + [True] * 6
    queue.close()


@pytest.mark.parametrize("strategy", ["annealing", "threshold"])
def test_a_warm_local_search_draws_no_trap_request(strategy, key):
    """Annealing and threshold acceptance draw among the current pages' children and accept a
    Δ = 0 move at any T > 0: trap requests were drawn and fetched before the others."""
    queue = make_queue(strategy, key, t0=1.0, factor=1.0)  # warm, and staying so
    for request in trap_requests():
        queue.push(request)
    popped = [queue.pop() for _ in range(12)]
    assert [TRAP_META in r.meta for r in popped] == [False] * 6 + [True] * 6
    queue.close()


@pytest.mark.parametrize("strategy", ["bestfirst", "rank_semantic"])
def test_trap_requests_are_evicted_first(strategy, key):
    queue = make_queue(strategy, key)
    for request in trap_requests():
        queue.push(request)
    assert queue.evict(6) == 6
    assert all(TRAP_META not in r.meta for _, _, r in queue.frontier.entries())
    queue.close()


def test_a_disk_frontier_written_before_the_back_column_is_upgraded(tmp_path):
    import sqlite3

    path = tmp_path / "requests.queue"
    path.mkdir()
    with sqlite3.connect(path / "frontier.sqlite3") as db:
        db.execute(
            "CREATE TABLE frontier (fp BLOB PRIMARY KEY, neg_score REAL, neg_tiebreak REAL,"
            " seq INTEGER, request BLOB)"
        )
    queue = make_queue("bestfirst", str(path))
    for request in trap_requests():
        queue.push(request)
    assert [TRAP_META in queue.pop().meta for _ in range(12)] == [False] * 6 + [True] * 6
    queue.close()


def test_redis_frontier_pops_trap_requests_last(redis_server):  # noqa: F811
    queue = shared_queue(redis_server.url)
    for request in trap_requests():
        queue.push(request)
    assert len(queue) == 12
    assert TRAP_META not in queue.peek().meta
    raised = trap_requests()[5]  # the last trap request, found again from a better parent
    raised.meta["parent_relevance"] = 0.99
    assert queue.rediscover(raised)
    popped = [queue.pop() for _ in range(12)]
    assert [TRAP_META in r.meta for r in popped] == [False] * 6 + [True] * 6
    # Raised from last to second of the trap requests, and still behind every other one.
    assert [r.url.rsplit("/", 1)[1] for r in popped[6:8]] == ["u0", "u5"]
    assert queue.pop() is None


def test_redis_frontier_evicts_trap_requests_first(redis_server):  # noqa: F811
    queue = shared_queue(redis_server.url, frontier_max=6)
    for request in trap_requests():
        queue.push(request)
    assert queue.evict(10) == 6  # never below FRONTIER_MAX
    assert [TRAP_META in queue.pop().meta for _ in range(6)] == [False] * 6
    assert queue.pop() is None


# -- the cap per family ----------------------------------------------------------------------


@pytest.mark.parametrize("jobdir", [False, True])
def test_a_trap_family_is_capped_counted_and_logged_once(tmp_path, caplog, jobdir):
    scheduler, crawler = make_scheduler(
        tmp_path, jobdir, TRAP_MAX_PER_FAMILY=3, TRAP_QUERY_VARIANTS=100
    )
    link = {"depth": 1, "parent_url": "http://h/", "parent_relevance": 0.5}
    with caplog.at_level(logging.INFO, logger="focused.traps"):
        for day in range(1, 29):
            scheduler.enqueue_request(scrapy.Request(f"http://h/cal/2026/2/{day}", meta=link))
        for i in range(5):
            scheduler.enqueue_request(
                scrapy.Request(f"http://h/wiki/P{i}", meta={**link, "parent_relevance": 0.1})
            )
    stats = crawler.stats
    assert stats.get_value("focused/trap/penalised") == 3
    assert stats.get_value("focused/trap/dropped") == 25
    assert len([r for r in caplog.records if "h/cal/#" in r.getMessage()]) == 1
    order = []
    while (request := scheduler.next_request()) is not None:
        order.append(urlsplit(request.url).path)
    # The ordinary pages first, though their parents scored lower; three calendar days last.
    assert order[:5] == [f"/wiki/P{i}" for i in range(5)]
    assert order[5:] == ["/cal/2026/2/1", "/cal/2026/2/2", "/cal/2026/2/3"]
    scheduler.close("finished")


def test_a_query_explosion_becomes_a_trap_family(tmp_path):
    scheduler, crawler = make_scheduler(
        tmp_path, False, TRAP_MAX_PER_FAMILY=2, TRAP_QUERY_VARIANTS=4
    )
    link = {"depth": 1, "parent_url": "http://h/"}
    for i in range(10):
        scheduler.enqueue_request(scrapy.Request(f"http://h/list?sort=a&offset={i}", meta=link))
    assert len(scheduler) == 4 + 2  # four ordinary variants, two penalised, the rest dropped
    assert crawler.stats.get_value("focused/trap/dropped") == 4
    seed = scrapy.Request("http://h/cal/2026/11/30", meta={"depth": 0})
    assert scheduler.enqueue_request(seed)  # a seed is the user's choice, never a trap
    assert TRAP_META not in seed.meta
    scheduler.close("finished")


@pytest.mark.parametrize("store", ["memory", "jobdir", "redis"])
def test_a_variant_seen_before_gives_its_slot_back(tmp_path, request, store):
    settings = {"TRAP_MAX_PER_FAMILY": 2, "TRAP_QUERY_VARIANTS": 2}
    if store == "redis":
        scheduler, _ = shared_scheduler(request.getfixturevalue("redis_server").url, **settings)
    else:
        scheduler, _ = make_scheduler(tmp_path, store == "jobdir", **settings)
    link = {"depth": 1, "parent_url": "http://h/"}
    first = scrapy.Request("http://h/list?offset=1", meta=link)
    assert scheduler.enqueue_request(first)
    for _ in range(3):  # found again: not queued, and no variant of its own
        assert not scheduler.enqueue_request(scrapy.Request(first.url, meta=link))
    assert scheduler.traps.counts.query_variants("h/list?offset") == 1
    second = scrapy.Request("http://h/list?offset=2", meta=link)
    assert scheduler.enqueue_request(second)
    third = scrapy.Request("http://h/list?offset=3", meta=link)
    assert scheduler.enqueue_request(third)
    assert [TRAP_META in r.meta for r in (first, second, third)] == [False, False, True]
    assert VARIANT_META not in first.meta  # the slot is used for good
    scheduler.close("finished")


def test_trap_counts_survive_a_crash_of_a_jobdir_crawl(tmp_path):
    """Counts written through by one scheduler are those of the next one on the same JOBDIR,
    though the first was never closed (as after ``kill -9``: no spider.state was saved)."""
    settings = {"TRAP_MAX_PER_FAMILY": 3, "TRAP_QUERY_VARIANTS": 100}
    link = {"depth": 1, "parent_url": "http://h/"}
    crashed, _ = make_scheduler(tmp_path, True, **settings)
    for day in (1, 2):
        crashed.enqueue_request(scrapy.Request(f"http://h/cal/2026/2/{day}", meta=link))
    crashed.enqueue_request(scrapy.Request("http://h/list?offset=1", meta=link))
    scheduler, crawler = make_scheduler(tmp_path, True, **settings)  # a new, empty spider.state
    assert scheduler.traps.counts.query_variants("h/list?offset") == 1
    for day in range(3, 10):
        scheduler.enqueue_request(scrapy.Request(f"http://h/cal/2026/2/{day}", meta=link))
    assert crawler.stats.get_value("focused/trap/penalised") == 1  # day 3 only
    assert crawler.stats.get_value("focused/trap/dropped") == 6
    assert scheduler.traps.counts.queued_count("h/cal/#") == 3
    scheduler.close("finished")


def test_counts_of_an_older_jobdir_are_carried_over_from_spider_state(tmp_path):
    """A JOBDIR whose counts are in spider.state (the previous version): the larger count of
    each family is kept, and spider.state no longer holds them."""
    settings = {"TRAP_MAX_PER_FAMILY": 3, "TRAP_QUERY_VARIANTS": 100, "LOGSTATS_INTERVAL": 0}
    link = {"depth": 1, "parent_url": "http://h/"}
    scheduler, crawler = make_scheduler(tmp_path, True, **settings)
    scheduler.enqueue_request(scrapy.Request("http://h/cal/2026/2/1", meta=link))
    for i in range(3):
        scheduler.enqueue_request(scrapy.Request(f"http://h/a/{i}/a/b/a/b/", meta=link))
    saved = {
        "queued": Counter({"h/cal/#": 2, "h/a/#/...": 1, "h/x/#": 3}),
        "variants": Counter({"h/list?offset": 7}),
    }
    # The state file an older version saved on a pause; Scrapy's SpiderState loads it when the
    # spider opens, after the scheduler has opened.
    with (tmp_path / "job" / "spider.state").open("wb") as state:
        pickle.dump({"trap_families": saved, "responses": 5}, state)
    crawler.signals.send_catch_log(signals.spider_opened, spider=crawler.spider)
    assert crawler.spider.state == {"responses": 5}
    counts = scheduler.traps.counts
    assert counts.queued_count("h/cal/#") == 2  # the saved count was larger
    assert counts.queued_count("h/a/#/...") == 3  # the file's count was larger
    assert counts.queued_count("h/x/#") == 3
    assert counts.query_variants("h/list?offset") == 7
    scheduler.close("shutdown")
    scheduler, _ = make_scheduler(tmp_path, True, **settings)  # and they are in the file
    assert scheduler.traps.counts.queued_count("h/x/#") == 3
    assert not scheduler.enqueue_request(scrapy.Request("http://h/x/2026/1/5", meta=link))
    scheduler.close("finished")


def shared_scheduler(redis_url: str, **settings):
    """A scheduler of one process of a crawl shared through Redis (crawl id ``t``)."""
    values = {
        "SCHEDULER_PRIORITY_QUEUE": STRATEGIES["bestfirst"],
        "DUPEFILTER_CLASS": "focused.distributed.RedisDupeFilter",
        "REQUEST_FINGERPRINTER_CLASS": "focused.canonical.CanonicalRequestFingerprinter",
        **settings,
    }
    crawler = get_crawler(QueueSpider, values)
    spider = QueueSpider()
    spider.strategy_params, spider.state = {}, {}
    crawler.spider, spider.crawler = spider, crawler
    spider.shared = SharedCrawl(crawler, redis_url, "t")
    crawler.stats.open_spider()
    scheduler = FocusedScheduler.from_crawler(crawler)
    scheduler.open(spider)
    return scheduler, crawler


def test_the_cap_holds_across_the_processes_of_a_shared_crawl(redis_server):  # noqa: F811
    schedulers = [shared_scheduler(redis_server.url, TRAP_MAX_PER_FAMILY=5) for _ in range(2)]
    link = {"depth": 1, "parent_url": "http://h/", "parent_relevance": 0.5}

    def discover(scheduler, month):
        for day in range(1, 29):
            scheduler.enqueue_request(scrapy.Request(f"http://h/cal/2026/{month}/{day}", meta=link))

    threads = [
        threading.Thread(target=discover, args=(scheduler, month))
        for (scheduler, _), month in zip(schedulers, (2, 3), strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for scheduler, _ in schedulers:
        scheduler.mqs.frontier.flush()  # their pages done: the links they queued are in Redis
    penalised = [crawler.stats.get_value("focused/trap/penalised", 0) for _, crawler in schedulers]
    dropped = [crawler.stats.get_value("focused/trap/dropped", 0) for _, crawler in schedulers]
    assert sum(penalised) == 5 and sum(dropped) == 2 * 28 - 5
    one = schedulers[0][0]
    popped = []
    while (request := one.next_request()) is not None:
        popped.append(request)
    assert len(popped) == 5  # the frontier is the crawl's: all five, whoever queued them
    # A URL seen before is not queued, and gives its slot back: the family stays full.
    assert not one.enqueue_request(scrapy.Request(popped[0].url, meta=link))
    counts = redis.Redis(port=redis_server.port).hgetall("focused:t:trap:queued")
    assert counts == {b"h/cal/#": b"5"}
    for scheduler, _ in schedulers:
        scheduler.close("finished")


def test_slots_taken_at_the_same_moment_never_pass_the_cap(redis_server):  # noqa: F811
    schedulers = [shared_scheduler(redis_server.url, TRAP_MAX_PER_FAMILY=10) for _ in range(4)]
    admitted = []

    def admit(traps, worker):
        days = (f"http://h/cal/{2000 + worker}/1/{day}" for day in range(1, 51))
        admitted.extend(traps.admit(scrapy.Request(url)) for url in days)

    threads = [
        threading.Thread(target=admit, args=(scheduler.traps, worker))
        for worker, (scheduler, _) in enumerate(schedulers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(admitted) == 10


def test_a_query_explosion_is_counted_across_processes(redis_server):  # noqa: F811
    (one, _), (two, crawler) = (
        shared_scheduler(redis_server.url, TRAP_MAX_PER_FAMILY=2, TRAP_QUERY_VARIANTS=4)
        for _ in range(2)
    )
    link = {"depth": 1, "parent_url": "http://h/"}
    for i in range(2):
        one.enqueue_request(scrapy.Request(f"http://h/list?sort=a&offset={i}", meta=link))
    for i in range(2, 10):
        two.enqueue_request(scrapy.Request(f"http://h/list?sort=a&offset={i}", meta=link))
    for scheduler in (one, two):
        scheduler.mqs.frontier.flush()  # their pages done: the links they queued are in Redis
    assert len(one) == 4 + 2  # the crawl's frontier: four ordinary variants, two penalised
    assert crawler.stats.get_value("focused/trap/dropped") == 4
    one.close("finished")
    two.close("finished")


def test_variants_counted_at_the_same_moment_never_pass_the_limit(redis_server):  # noqa: F811
    limit, families = 3, [f"/list/{letter}" for letter in "abcdefghijklmnopqrst"]
    settings = {"TRAP_MAX_PER_FAMILY": 1000, "TRAP_QUERY_VARIANTS": limit}
    schedulers = [shared_scheduler(redis_server.url, **settings)[0] for _ in range(4)]
    link = {"depth": 1, "parent_url": "http://h/"}
    ordinary: list[Counter[str]] = [Counter() for _ in schedulers]
    meet = threading.Barrier(len(schedulers))

    def discover(scheduler, worker):
        for path in families:
            meet.wait()  # every process finds the family at the same moment
            for i in range(limit):
                request = scrapy.Request(f"http://h{path}?offset={worker}x{i}", meta=link)
                if scheduler.enqueue_request(request) and TRAP_META not in request.meta:
                    ordinary[worker][path] += 1

    threads = [
        threading.Thread(target=discover, args=(scheduler, worker))
        for worker, scheduler in enumerate(schedulers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # The limit is the crawl's: the rest of each family went to the back as a query explosion.
    assert sum(ordinary, Counter()) == dict.fromkeys(families, limit)
    counts = redis.Redis(port=redis_server.port).hgetall("focused:t:trap:variants")
    assert counts == {f"h{path}?offset".encode(): str(limit).encode() for path in families}
    for scheduler in schedulers:
        scheduler.close("finished")


# -- a crawl of a site full of traps ---------------------------------------------------------

ARTICLES = 280
BUDGET = 500
TRAP_PATH = re.compile(r"^/cal|[?&](visit|sid)=")


def trap_site(texts: list[str]):
    """Articles (the home page links to all of them); each links to five others, into an
    endless calendar, and to itself with a fresh session id, twice (``sid``, a name the
    canonical URL drops, and ``visit``, one it does not know)."""
    tokens = iter(range(10**9))

    def session() -> str:
        return f"{next(tokens) * 7919 + 10**20:x}ab"

    def respond(method: str, path: str) -> Reply:
        parts = urlsplit(path)
        if parts.path == "/":
            links = "".join(f'<a href="/article/{i}">article {i}</a> ' for i in range(ARTICLES))
            return Reply(body=html("Birds", f"<p>birds</p>{links}"))
        if parts.path.startswith("/article/"):
            i = int(parts.path.rsplit("/", 1)[1])
            others = "".join(
                f'<a href="/article/{(i * 7 + k) % ARTICLES}">more birds</a> ' for k in range(5)
            )
            traps = (
                f'<a href="/cal/2026/11/{i % 28 + 1:02d}">bird events calendar</a>'
                f'<a href="/article/{i}?sid={session()}">birds</a>'
                f'<a href="/article/{i}?visit={session()}">birds</a>'
            )
            return Reply(body=html(f"Article {i}", f"<p>{escape(texts[i])}</p>{others}{traps}"))
        if parts.path.startswith("/cal"):
            day = calendar_day(parts)
            month = (day.replace(day=1) + timedelta(days=31)).replace(day=1)
            links = (
                f'<a href="/cal/{day + timedelta(1):%Y/%m/%d}">next day: bird events</a>'
                f'<a href="/cal/{day - timedelta(1):%Y/%m/%d}">previous day</a>'
                f'<a href="/cal/{month:%Y/%m}">next month: birds</a>'
                f'<a href="/cal?month={month:%Y-%m}">birds in the next month</a>'
            )
            return Reply(body=html("Calendar", f"<p>Bird events: none.</p>{links}"))
        return Reply(status=404, body="not found")

    return respond


def calendar_day(parts: SplitResult) -> date:
    """The day a calendar URL shows: /cal/Y/M/D, /cal/Y/M or /cal?month=Y-M."""
    if parts.query:
        return datetime.strptime(parts.query.split("=")[1], "%Y-%m").date()
    numbers = [int(n) for n in parts.path.split("/")[2:]]
    return date(*numbers, *[1] * (3 - len(numbers)))


def crawl_trap_site(tmp_path, texts, settings):
    with Site(trap_site(texts)) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bestfirst", "query": "birds", "seeds": f"{site.url}/"},
            {"CLOSESPIDER_PAGECOUNT": BUDGET, **settings},
            timeout=400,
        )
        paths = [path for _, path in site.log.gets()]
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    return crawl, paths


def trap_families(paths: list[str]) -> Counter[str]:
    return Counter(family(f"http://h{path}") for path in paths if TRAP_PATH.search(path))


def test_a_500_page_crawl_spends_only_a_handful_of_fetches_in_the_traps(tmp_path, sample_graph):
    texts = [sample_graph.text[name] for name in sorted(sample_graph.text)][:ARTICLES]
    crawl, paths = crawl_trap_site(tmp_path / "on", texts, {})
    articles = [p for p in paths if re.fullmatch(r"/article/\d+", p)]
    assert len(set(articles)) == ARTICLES  # every article was reached
    families = trap_families(paths)
    assert families, "the traps were never entered: the test would prove nothing"
    assert max(families.values()) <= 10  # TRAP_MAX_PER_FAMILY, by default
    assert sum(families.values()) <= 30
    # At the back of the frontier: the trap waited until the articles were nearly all fetched.
    first_trap = next(i for i, p in enumerate(paths) if TRAP_PATH.search(p))
    assert first_trap >= ARTICLES - 20
    # The crawl ran out of links well within its budget.
    assert len(paths) < BUDGET - 100
    assert "focused/trap/dropped" in crawl.result.stderr

    # The same crawl without the defences: the trap eats the rest of the budget.
    _, unguarded = crawl_trap_site(
        tmp_path / "off", texts, {"TRAP_MAX_PER_FAMILY": 0, "NEAR_DUPLICATE_DISTANCE": -1}
    )
    assert sum(trap_families(unguarded).values()) >= BUDGET - ARTICLES - 20


@pytest.mark.parametrize("jobdir", [False, True])
def test_a_variant_found_again_once_its_family_exploded_stays_in_front(tmp_path, jobdir):
    # The first variant of a query family is queued in front. Found again from a better parent
    # once the family has exploded, the new request is marked a trap: the rediscovery must not
    # move the URL behind every other request, which lowers it (a shared frontier leaves it).
    settings = {"TRAP_MAX_PER_FAMILY": 5, "TRAP_QUERY_VARIANTS": 2}
    scheduler, crawler = make_scheduler(tmp_path, jobdir, **settings)
    link = {"depth": 1, "parent_url": "http://h/", "parent_relevance": 0.2}
    for url in ["http://h/list?offset=1", "http://h/list?offset=2", "http://h/list?offset=3"]:
        assert scheduler.enqueue_request(scrapy.Request(url, meta=link))
    assert scheduler.enqueue_request(
        scrapy.Request("http://h/page", meta={**link, "parent_relevance": 0.1})
    )
    better = {**link, "parent_relevance": 0.9, "parent_url": "http://h/rich"}
    scheduler.enqueue_request(scrapy.Request("http://h/list?offset=1", meta=better))
    order = []
    while (request := scheduler.next_request()) is not None:
        order.append(request.url.rsplit("/", 1)[1])
    # offset=3 is the family's trap request, behind the others; offset=1 never joins it.
    assert order.index("list?offset=1") < order.index("page") < order.index("list?offset=3")
    assert crawler.stats.get_value("focused/rescored") is None
    scheduler.close("finished")


def test_a_queue_rediscovery_into_the_back_leaves_a_url_queued_in_front(key_of_store):
    queue = make_queue("bestfirst", key_of_store)
    queue.push(req("a", parent_relevance=0.5))
    queue.push(req("b", parent_relevance=0.4))
    assert not queue.rediscover(req("a", parent_relevance=0.9, **{TRAP_META: "t"}))
    assert queue.rediscover(req("a", parent_relevance=0.7))  # raised in front as before
    popped = [queue.pop() for _ in range(2)]
    assert [r.url.rsplit("/", 1)[1] for r in popped] == ["a", "b"]
    assert popped[0].meta["parent_relevance"] == 0.7 and TRAP_META not in popped[0].meta


@pytest.fixture(params=["memory", "disk"])
def key_of_store(request, tmp_path) -> str:
    return "" if request.param == "memory" else str(tmp_path / "requests.queue")
