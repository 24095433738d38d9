"""Pop order, rediscovery, exact length and persistence of the strategy queues."""

from __future__ import annotations

import random

import pytest
from scrapy import Request

from focused.strategies import STRATEGIES
from schedulers.base import MemoryFrontier
from tests.queues import drain, make_queue, req


@pytest.fixture(params=["memory", "disk"])
def key(request, tmp_path) -> str:
    return "" if request.param == "memory" else str(tmp_path / "requests.queue")


def test_bfs_pops_level_by_level_in_discovery_order(key):
    queue = make_queue("bfs", key)
    for name, depth in [("a2", 2), ("b1", 1), ("c0", 0), ("d1", 1), ("e2", 2)]:
        queue.push(req(name, depth=depth))
    assert drain(queue) == ["c0", "b1", "d1", "a2", "e2"]


def test_dfs_pops_last_discovered_first_and_cuts_depth(key):
    queue = make_queue("dfs", key, max_depth=2)
    for discovery, (name, depth) in enumerate([("a", 1), ("b", 2), ("c", 3), ("d", 2)]):
        queue.push(req(name, depth=depth, discovery=discovery))
    assert len(queue) == 3
    assert drain(queue) == ["d", "b", "a"]


def test_dfs_pops_seeds_first_and_keeps_them_seeds_when_linked(key):
    # Seeds are numbered in discovery order too: a link found later, to a seed not yet
    # fetched, outscored it and put it on the stack as that page's child, a level deeper.
    queue = make_queue("dfs", key)
    queue.push(req("seed1", depth=0, discovery=1))
    queue.push(req("seed2", depth=0, discovery=2))
    queue.push(req("link", depth=1, discovery=3, parent_url="http://t/seed1"))
    assert not queue.rediscover(req("seed2", depth=1, discovery=4, parent_url="http://t/seed1"))
    popped = [queue.pop() for _ in range(3)]
    assert [(r.url.rsplit("/", 1)[1], r.meta["depth"]) for r in popped] == [
        ("seed1", 0),
        ("seed2", 0),
        ("link", 1),
    ]


def test_bestfirst_orders_by_parent_relevance_then_link_relevance(key):
    queue = make_queue("bestfirst", key)
    queue.push(req("low", parent_relevance=0.1, link_relevance=0.9))
    queue.push(req("high-weak-link", parent_relevance=0.8, link_relevance=0.1))
    queue.push(req("high-strong-link", parent_relevance=0.8, link_relevance=0.5))
    queue.push(req("seed"))
    assert drain(queue) == ["seed", "high-strong-link", "high-weak-link", "low"]


def test_bestfirst_pops_seeds_before_links_of_a_page_of_relevance_1(key):
    # Relevance is clipped to [0, 1]: a page that scores 1.0 tied with the seeds' default,
    # and its links' tiebreak (link relevance above 0) put them ahead of seeds not yet fetched.
    queue = make_queue("bestfirst", key)
    queue.push(req("seed"))
    queue.push(req("link", parent_relevance=1.0, link_relevance=0.5, parent_url="http://t/p"))
    assert drain(queue) == ["seed", "link"]


def test_rediscovery_from_a_better_parent_raises_the_queued_score(key):
    queue = make_queue("bestfirst", key)
    queue.push(req("x", parent_relevance=0.1, parent_url="http://t/poor"))
    queue.push(req("y", parent_relevance=0.5))
    assert queue.rediscover(req("x", parent_relevance=0.9, parent_url="http://t/rich"))
    assert len(queue) == 2
    first = queue.pop()
    assert first.url == "http://t/x"
    assert first.meta["parent_url"] == "http://t/rich"  # the better path replaces the old one


def test_rediscovery_never_lowers_a_score_nor_queues_a_fetched_url(key):
    queue = make_queue("bestfirst", key)
    queue.push(req("x", parent_relevance=0.6))
    queue.push(req("y", parent_relevance=0.5))
    assert not queue.rediscover(req("x", parent_relevance=0.2))
    assert not queue.rediscover(req("gone", parent_relevance=0.9))
    assert len(queue) == 2
    assert drain(queue) == ["x", "y"]


def test_len_is_exact_through_pushes_pops_and_rescoring(key):
    queue = make_queue("bestfirst", key)
    for i in range(50):
        queue.push(req(f"u{i}", parent_relevance=i / 100))
    for i in range(0, 50, 5):
        queue.rediscover(req(f"u{i}", parent_relevance=0.99))
    assert len(queue) == 50
    for expected in range(49, 0, -1):
        assert queue.pop() is not None
        assert len(queue) == expected
    assert queue.peek() is not None
    assert queue.pop() is not None
    assert len(queue) == 0
    assert queue.pop() is None
    assert queue.peek() is None


def test_disk_queue_survives_close_and_reopen(tmp_path):
    key = str(tmp_path / "requests.queue")
    queue = make_queue("bestfirst", key)
    for i in range(10):
        queue.push(req(f"u{i}", parent_relevance=i / 10, depth=i, anchor=f"anchor {i}"))
    assert queue.pop().url == "http://t/u9"
    state = queue.close()
    assert state["strategy"] == "bestfirst"

    reopened = make_queue("bestfirst", key, state)
    assert len(reopened) == 9
    first = reopened.pop()
    assert first.url == "http://t/u8"
    assert first.meta["anchor"] == "anchor 8"
    assert drain(reopened) == [f"u{i}" for i in range(7, -1, -1)]


def test_disk_queue_keeps_fifo_ties_across_reopen(tmp_path):
    key = str(tmp_path / "requests.queue")
    queue = make_queue("bfs", key)
    for name in ["a", "b"]:
        queue.push(req(name, depth=1))
    state = queue.close()
    reopened = make_queue("bfs", key, state)
    reopened.push(req("c", depth=1))
    assert drain(reopened) == ["a", "b", "c"]


def test_memory_frontier_orders_bulk_and_trickled_pushes_alike():
    """A pop sorts a large batch of pushes into a run and heaps a small one; interleaved with
    pops, peeks, rescoring and removal, the order is always that of the keys."""
    rng = random.Random(7)
    frontier, live, seq = MemoryFrontier(), {}, 0

    def put(fp: bytes, score: float) -> None:
        nonlocal seq
        seq += 1
        live[fp] = (-score, 0.0, seq)
        frontier.put(fp, live[fp], Request(f"http://example.com/{fp.decode()}"))

    def url(request: Request | None) -> str | None:
        return request and request.url.rsplit("/", 1)[1]

    def pop() -> bytes:
        best = min(live, key=live.get)
        assert url(frontier.peek()) == best.decode()
        assert url(frontier.pop()) == best.decode()
        del live[best]
        return best

    for i in range(500):  # bulk: sorted into a run
        put(b"b%d" % i, rng.random())
    for _ in range(100):
        pop()
    for i in range(40):  # trickle: onto the heap, competing with the run
        put(b"t%d" % i, rng.random())
        pop()
    for fp in rng.sample(sorted(live), 30):  # rescoring leaves stale keys in both
        put(fp, 2.0 + rng.random())
    for fp in rng.sample(sorted(live), 20):
        assert url(frontier.remove(fp)) == fp.decode()
        del live[fp]
    assert len(frontier.evict_worst(10)) == 10
    for fp in sorted(live, key=live.get)[-10:]:
        del live[fp]
    while live:
        pop()
    assert frontier.pop() is None and frontier.peek() is None and len(frontier) == 0


# oracle, a benchmark reference, needs a distances file to open.
@pytest.mark.parametrize("strategy", sorted(set(STRATEGIES) - {"oracle"}))
def test_a_request_in_flight_at_a_crash_is_queued_again_on_reopening(tmp_path, strategy):
    """kill -9 while a request is in flight: the reopened queue takes it back from the frontier
    file's in-flight table. hybrid's open failed there (AttributeError), and so did every
    resume of that JOBDIR."""
    key = str(tmp_path / "requests.queue")
    queue = make_queue(strategy, key)
    queue.push(req("seed", depth=0, path_cost=0.0, discovery=1))
    frontier = queue.frontier
    with frontier.transaction():
        request = queue.pop()
        frontier.start_inflight(queue._fingerprint(request), request)
    # The process dies: nothing is closed.
    reopened = make_queue(strategy, key)
    assert reopened.stats.get_value("focused/resume/recovered_inflight") == 1
    assert drain(reopened) == ["seed"]


def test_a_memory_frontier_kept_at_its_bound_holds_no_more_than_its_entries_and_some():
    """Evicted entries are the worst, so their items never came up in a pop to be dropped: a
    frontier kept at FRONTIER_MAX held an item per link it ever evicted (20,000 here)."""
    frontier, rng = MemoryFrontier(), random.Random(0)
    keys = {}
    for i in range(20_000):
        keys[f"http://t/u{i}"] = key = (-rng.random(), 0.0, i)
        frontier.put(f"{i}".encode(), key, req(f"u{i}"))
        if len(frontier) > 1000:
            frontier.evict_worst(len(frontier) - 1000)
    tiers = (frontier._front, frontier._back)
    held = sum(len(tier.heap) + len(tier.run) + len(tier.pending) for tier in tiers)
    assert len(frontier) == 1000 and held <= 2 * 1000 + 1024
    popped = [keys[frontier.pop().url] for _ in range(1000)]
    assert popped == sorted(keys.values())[:1000]  # the best, best first
    assert frontier.pop() is None
