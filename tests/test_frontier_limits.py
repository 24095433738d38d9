"""The bounded frontier (FRONTIER_MAX): eviction keeps the best, for every strategy."""

from __future__ import annotations

import logging
import random

import pytest
import scrapy
from scrapy.utils.test import get_crawler

from focused.scheduler import FocusedScheduler
from focused.strategies import STRATEGIES
from tests.queues import QueueSpider, drain, make_queue


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


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_evict_drops_exactly_the_lowest_ranked(strategy, key, tmp_path):
    unbounded = make_queue(strategy)
    for request in requests(60):
        unbounded.push(request)
    order = drain(unbounded)

    bounded = make_queue(strategy, key)
    for request in requests(60):
        bounded.push(request)
    assert bounded.evict(15) == 15
    assert len(bounded) == len(order) - 15
    assert set(drain(bounded)) == set(order[: len(order) - 15])


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


def make_scheduler(tmp_path, jobdir: bool, **settings):
    values = {"FRONTIER_MAX": 1000, "SCHEDULER_PRIORITY_QUEUE": STRATEGIES["bestfirst"]}
    values |= {"REQUEST_FINGERPRINTER_CLASS": "focused.canonical.CanonicalRequestFingerprinter"}
    if jobdir:
        values["JOBDIR"] = str(tmp_path / "job")
    values.update(settings)
    crawler = get_crawler(QueueSpider, values)
    spider = QueueSpider()
    spider.strategy_params, spider.state = {}, {}
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
