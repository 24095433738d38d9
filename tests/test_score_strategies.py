"""The defining order of the score-ordered strategies, on hand-built requests.

ucs, astar, hybrid, shark and rank_semantic; each on the memory and the disk (JOBDIR) frontier.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from focused.relevance import Scores
from focused.strategies import STRATEGIES, strategy_class
from focused.traps import TRAP_META
from schedulers.rank_semantic import LinkGraph
from schedulers.shark import SharkSearchQueue
from tests.queues import drain, make_queue, rankings_after, req


def name_of(request) -> str:
    return request.url.rsplit("/", 1)[1]


@pytest.fixture(params=["memory", "disk"])
def key(request, tmp_path) -> str:
    return "" if request.param == "memory" else str(tmp_path / "requests.queue")


# -- ucs and astar -------------------------------------------------------------------------------


def test_ucs_pops_the_lowest_cumulative_cost(key):
    queue = make_queue("ucs", key)
    # A deep path through relevant pages is cheaper than one off-topic page.
    queue.push(req("off-topic-child", depth=1, path_cost=0.9))
    queue.push(req("deep-on-topic", depth=4, path_cost=0.1 + 0.2 + 0.1 + 0.05))
    queue.push(req("middling", depth=2, path_cost=0.5))
    queue.push(req("seed", depth=0, path_cost=0.0))
    queue.push(req("tie-later", depth=2, path_cost=0.5))
    assert drain(queue) == ["seed", "deep-on-topic", "middling", "tie-later", "off-topic-child"]


def test_astar_orders_by_path_cost_plus_link_heuristic(key):
    queue = make_queue("astar", key)
    # f = g + (1 - link_relevance): 0.2 + 0.7 = 0.9, 0.5 + 0.1 = 0.6, 0.3 + 0.4 = 0.7.
    queue.push(req("cheap-path-weak-link", path_cost=0.2, link_relevance=0.3))
    queue.push(req("dear-path-strong-link", path_cost=0.5, link_relevance=0.9))
    queue.push(req("between", path_cost=0.3, link_relevance=0.6))
    assert drain(queue) == ["dear-path-strong-link", "between", "cheap-path-weak-link"]


def test_astar_with_h_weight_0_is_ucs(key):
    queue = make_queue("astar", key, h_weight=0.0)
    queue.push(req("a", path_cost=0.5, link_relevance=0.9))
    queue.push(req("b", path_cost=0.2, link_relevance=0.1))
    assert drain(queue) == ["b", "a"]


def test_astar_h_weight_scales_the_heuristic(key):
    queue = make_queue("astar", key, h_weight=2.0)
    # f = g + 2 (1 - link): 0.2 + 1.0 = 1.2 against 0.5 + 0.6 = 1.1; at weight 1 the order
    # would be the other way round (0.7 against 0.8).
    queue.push(req("cheap-path-weak-link", path_cost=0.2, link_relevance=0.5))
    queue.push(req("dear-path-strong-link", path_cost=0.5, link_relevance=0.7))
    assert drain(queue) == ["dear-path-strong-link", "cheap-path-weak-link"]


# -- hybrid --------------------------------------------------------------------------------------


def _mixed_levels(queue) -> None:
    pushes = [
        ("deep-good", 3, 0.9),
        ("l2-a", 2, 0.1),
        ("deep-poor", 3, 0.2),
        ("l1-a", 1, 0.3),
        ("deeper-good", 4, 0.8),
        ("l2-b", 2, 0.9),
        ("l1-b", 1, 0.1),
    ]
    for discovery, (name, depth, parent_relevance) in enumerate(pushes, start=1):
        queue.push(req(name, depth=depth, parent_relevance=parent_relevance, discovery=discovery))


def test_hybrid_is_breadth_first_then_best_first(key):
    queue = make_queue("hybrid", key)
    _mixed_levels(queue)
    # Levels 1-2 in BFS order (whatever their scores), then by parent relevance.
    assert drain(queue) == ["l1-a", "l1-b", "l2-a", "l2-b", "deep-good", "deeper-good", "deep-poor"]


def test_hybrid_then_dfs_with_one_bfs_level_and_depth_limit(key):
    queue = make_queue("hybrid", key, bfs_levels=1, then="dfs", max_depth=3)
    _mixed_levels(queue)
    # Level 1 breadth-first, then the last discovered first; level 4 is beyond max_depth.
    assert drain(queue) == ["l1-a", "l1-b", "l2-b", "deep-poor", "l2-a", "deep-good"]


def test_hybrid_rediscovery_at_a_bfs_level_moves_a_link_into_the_bfs_part(key):
    queue = make_queue("hybrid", key, bfs_levels=1)
    queue.push(req("x", depth=2, parent_relevance=0.9))
    queue.push(req("y", depth=1))
    assert queue.rediscover(req("x", depth=1))
    assert drain(queue) == ["x", "y"]


# -- shark-search --------------------------------------------------------------------------------


def _child(parent_meta: dict, sim: float, relevant: bool, **link) -> dict:
    meta = SharkSearchQueue.child_meta(parent_meta, Scores(sim, sim, sim), relevant)
    return {**meta, **link}


def test_shark_inherited_and_neighbourhood_worked_by_hand():
    queue = make_queue("shark")  # delta 0.5, beta 0.8, gamma 0.8
    seed: dict = {}
    # The seed is relevant with sim 0.6: its children inherit 0.5 * 0.6 = 0.3.
    a = _child(seed, 0.6, True, anchor_relevance=0.5, context_relevance=0.1)
    assert queue.inherited(req("a", **a)) == pytest.approx(0.3)
    # The anchor is relevant (0.5 >= RELEVANCE_THRESHOLD, 0.15), so context counts as 1:
    # 0.8 * 0.5 + 0.2 * 1 = 0.6.
    assert queue.neighbourhood(req("a", **a)) == pytest.approx(0.6)
    # An anchor above 0 but below the threshold (LSI gives most anchors a little): the
    # context's own relevance, 0.8 * 0.1 + 0.2 * 0.4 = 0.16, not 0.8 * 0.1 + 0.2 = 0.28.
    weak = _child(seed, 0.6, True, anchor_relevance=0.1, context_relevance=0.4)
    assert queue.neighbourhood(req("weak", **weak)) == pytest.approx(0.16)
    assert queue.score(req("a", **a)) == pytest.approx(0.8 * 0.3 + 0.2 * 0.6)  # 0.36
    # No anchor evidence: the context's own relevance, 0.2 * 0.4 = 0.08.
    b = _child(seed, 0.6, True, anchor_relevance=0.0, context_relevance=0.4)
    assert queue.neighbourhood(req("b", **b)) == pytest.approx(0.08)
    assert queue.score(req("b", **b)) == pytest.approx(0.24 + 0.016)
    # a turns out irrelevant (sim 0.05): its child inherits 0.5 * inherited(a) = 0.15,
    # and the next irrelevant page's child 0.5 * 0.15 = 0.075.
    c = _child(a, 0.05, False, anchor_relevance=0.0, context_relevance=0.0)
    assert queue.inherited(req("c", **c)) == pytest.approx(0.15)
    d = _child(c, 0.02, False)
    assert queue.inherited(req("d", **d)) == pytest.approx(0.075)
    # A relevant page resets the chain: 0.5 * its own sim.
    e = _child(d, 0.7, True)
    assert queue.inherited(req("e", **e)) == pytest.approx(0.35)
    assert e["shark_run"] == 0


def test_shark_parameters_change_the_arithmetic():
    queue = make_queue("shark", delta=0.9, beta=0.5, gamma=0.25)
    meta = _child({}, 0.4, True, anchor_relevance=0.2, context_relevance=0.9)
    # inherited 0.36, neighbourhood 0.5 * 0.2 + 0.5 * 1 = 0.6
    assert queue.score(req("x", **meta)) == pytest.approx(0.25 * 0.36 + 0.75 * 0.6)


def test_shark_pops_by_score_seeds_first(key):
    queue = make_queue("shark", key)
    relevant = {"shark_sim": 0.6, "shark_run": 0}
    queue.push(req("weak", **relevant, anchor_relevance=0.0, context_relevance=0.1))
    queue.push(req("strong", **relevant, anchor_relevance=0.9))
    queue.push(req("seed", depth=0))
    queue.push(req("far", shark_sim=0.6, shark_run=2, anchor_relevance=0.0))
    assert drain(queue) == ["seed", "strong", "weak", "far"]


def test_shark_depth_cut_drops_a_chain_after_depth_irrelevant_pages(key):
    queue = make_queue("shark", key, depth=2)
    meta: dict = {}
    runs = []
    for name in ["p1", "p2", "p3"]:  # three irrelevant pages in a row from the seed
        meta = _child(meta, 0.0, False)
        runs.append(meta["shark_run"])
        queue.push(req(name, **meta))
    assert runs == [1, 2, 3]
    # Links found on the seed (1 irrelevant page) are followed; links found after 2 are not.
    assert drain(queue) == ["p1"]
    assert queue.stats.get_value("focused/depth_cut") == 2


# A URL found twice keeps the better score and the union of its paths (shark's docstring).
FAR = {"shark_sim": 0.8, "shark_run": 2, "anchor_relevance": 0.9}  # good anchor, 2 irrelevant
NEAR = {"shark_sim": 0.3, "shark_run": 0, "anchor_relevance": 0.0}  # on a relevant page


def _reopened(queue, key):
    """The queue as a resumed crawl finds it: closed and opened again from its JOBDIR."""
    if not key:
        return queue
    return make_queue("shark", key, queue.close())


def test_shark_rediscovery_on_a_relevant_page_gives_back_the_full_depth(key):
    queue = make_queue("shark", key)
    queue.push(req("x", **FAR))
    queue.push(req("between", shark_sim=0.5, shark_run=0, anchor_relevance=0.0))
    far = queue.score(req("x", **FAR))
    assert queue.score(req("x", **NEAR)) < far  # a poorer anchor: the score is not raised
    assert queue.rediscover(req("x", **NEAR))
    queue = _reopened(queue, key)
    x = queue.pop()
    assert name_of(x) == "x"  # still in its place, by its better score
    assert x.meta["shark_run"] == 0  # one link from a relevant page: the full depth again
    # An irrelevant x: its links are one irrelevant page from the relevant one, not three.
    child = _child(x.meta, 0.0, False)
    assert child["shark_run"] == 1 and queue.admit(req("c", **child))
    # Their inherited score is the better path's: delta^2 * 0.3 against delta^4 * 0.8.
    assert queue.inherited(req("c", **child)) == pytest.approx(0.5**2 * 0.3)
    assert drain(queue) == ["between"]


def test_shark_rediscovery_with_a_better_score_keeps_the_larger_depth(key):
    queue = make_queue("shark", key)
    queue.push(req("x", **NEAR))
    queue.push(req("between", shark_sim=0.5, shark_run=0, anchor_relevance=0.0))
    assert queue.rediscover(req("x", **FAR, parent_url="http://t/far"))  # raised
    queue = _reopened(queue, key)
    x = queue.pop()
    assert name_of(x) == "x" and x.meta["parent_url"] == "http://t/far"
    assert x.meta["shark_run"] == 0
    child = _child(x.meta, 0.0, False)
    assert queue.inherited(req("c", **child)) == pytest.approx(0.5**2 * 0.3)


def test_shark_rediscovery_keeps_the_better_inherited_score_of_a_longer_path(key):
    queue = make_queue("shark", key)
    queue.push(req("x", shark_sim=0.2, shark_run=0, anchor_relevance=0.9))
    # Found again one irrelevant page below a far more relevant one, with a poorer anchor.
    assert queue.rediscover(req("x", shark_sim=0.9, shark_run=1, anchor_relevance=0.0))
    x = _reopened(queue, key).pop()
    assert x.meta["shark_run"] == 0  # the shorter run
    # ... and, below x, the larger of delta^2 * 0.2 and delta^3 * 0.9.
    child = _child(x.meta, 0.0, False)
    assert queue.inherited(req("c", **child)) == pytest.approx(0.5**3 * 0.9)


def test_shark_rediscovery_adding_nothing_leaves_the_queued_request(key):
    queue = make_queue("shark", key)
    queue.push(req("x", **NEAR))
    assert not queue.rediscover(req("x", shark_sim=0.3, shark_run=1, anchor_relevance=0.0))
    x = _reopened(queue, key).pop()
    assert (x.meta["shark_sim"], x.meta["shark_run"]) == (0.3, 0)


# -- rank_semantic -------------------------------------------------------------------------------


def test_pagerank_of_a_small_graph_matches_the_closed_form():
    graph = LinkGraph()
    graph.add_edge("a", "b")
    graph.add_edge("b", "a")
    graph.add_edge("a", "c")
    graph.add_edge("a", "c")  # kept once
    rank = graph.pagerank()
    # c is dangling: its rank spreads evenly. Solve the 3x3 system by hand:
    # a = 0.05 + 0.85 (b + c/3), b = 0.05 + 0.85 (a/2 + c/3), c = 0.05 + 0.85 (a/2 + c/3)
    assert rank.sum() == pytest.approx(1.0)
    assert rank[1] == pytest.approx(rank[2])
    a, b, c = rank
    assert a == pytest.approx(0.05 + 0.85 * (b + c / 3))
    assert b == pytest.approx(0.05 + 0.85 * (a / 2 + c / 3))
    assert len(graph.edges) == 3


def _band_graph(queue) -> None:
    """Four fetched pages s1..s4 (not queued) link to: top (from all four), m1..m3 (one each
    from s1..s3) and low1..low3 (from s4, which has four out-links, so each gets a quarter).
    PageRank: s < low < m < top. Of 11 ranks, the 0.65 quantile falls between low and m and the
    0.9 quantile on m: the band holds m1..m3 only. m3's link is below T."""
    for parent in ["s1", "s2", "s3", "s4"]:
        link = req("top", parent_url=f"http://t/{parent}", link_relevance=0.9)
        if parent == "s1":
            queue.push(link)
        else:
            queue.rediscover(link)
    for parent, name, similarity in [
        ("s1", "m1", 0.5),
        ("s2", "m2", 0.7),
        ("s3", "m3", 0.01),
        ("s4", "low1", 0.95),
        ("s4", "low2", 0.2),
        ("s4", "low3", 0.3),
    ]:
        queue.push(req(name, parent_url=f"http://t/{parent}", link_relevance=similarity))
    queue.push(req("seed", depth=0))


def test_rank_semantic_holds_back_top_and_bottom_bands_and_dissimilar_links(key):
    queue = make_queue("rank_semantic", key, band_low=0.65, band_high=0.9, T=0.1, rank_every=1000)
    _band_graph(queue)
    assert len(queue) == 8
    # Seed; the band by similarity; then what was held back, most similar first.
    assert drain(queue) == ["seed", "m2", "m1", "low1", "top", "low3", "low2", "m3"]
    assert queue.stats.get_value("focused/rankings") == 1


def test_rank_semantic_crawls_a_link_exactly_as_similar_as_t(key):
    """The paper crawls the URLs whose similarity is at least T: m1's is T."""
    queue = make_queue("rank_semantic", key, band_low=0.65, band_high=0.9, T=0.5, rank_every=1000)
    _band_graph(queue)
    assert drain(queue) == ["seed", "m2", "m1", "low1", "top", "low3", "low2", "m3"]


def test_rank_semantic_with_the_full_band_orders_by_similarity(key):
    queue = make_queue("rank_semantic", key, band_low=0.0, band_high=1.0, T=0.0)
    _band_graph(queue)
    assert drain(queue) == ["seed", "low1", "top", "m2", "m1", "low3", "low2", "m3"]


def test_rank_semantic_reranks_every_rank_every_links(key):
    queue = make_queue("rank_semantic", key, rank_every=3, rank_growth=0.0)
    for i in range(7):
        queue.push(req(f"u{i}", parent_url="http://t/p", link_relevance=0.5))
    assert queue.stats.get_value("focused/rankings") == 2
    queue.push(req("v", parent_url="http://t/u0", link_relevance=0.5))
    # v and u6 wait for a rank; popping would rank them first if nothing else were crawlable.
    popped = drain(queue)
    assert sorted(popped) == sorted([*(f"u{i}" for i in range(7)), "v"])


def test_rank_semantic_spaces_its_rankings_by_the_graphs_growth(key):
    queue = make_queue("rank_semantic", key, rank_every=3, rank_growth=0.5)
    # 3 links, then max(3, 0.5 x the links ranked last): 3, 3, 4.5, 7, 10.5 more.
    assert rankings_after(queue, 32) == [3, 6, 9, 14, 21, 32]
    fixed = make_queue("rank_semantic", rank_every=3, rank_growth=0.0)
    assert rankings_after(fixed, 12) == [3, 6, 9, 12]


def test_rank_semantic_ranks_before_fetching_an_unranked_url_ahead_of_a_trap(key):
    """A trap request waits behind every other one, however it is ranked: a crawlable trap
    request left is no reason to fetch a URL unranked."""
    queue = make_queue(
        "rank_semantic", key, band_low=0.0, band_high=1.0, T=0.0, rank_every=2, rank_growth=0.0
    )
    queue.push(req("trap", parent_url="http://t/p", link_relevance=0.5, **{TRAP_META: "t/#"}))
    queue.push(req("a", parent_url="http://t/p", link_relevance=0.5))  # 2 links: ranked
    assert queue.stats.get_value("focused/rankings") == 1
    assert name_of(queue.pop()) == "a"
    queue.push(req("b", parent_url="http://t/a", link_relevance=0.5))  # unranked
    assert name_of(queue.pop()) == "b"
    assert queue.stats.get_value("focused/rankings") == 2  # ranked before it left
    assert name_of(queue.pop()) == "trap"


def test_rank_semantic_classes_a_redirects_target_as_the_url_redirected(key):
    """u0, the most similar link, redirects to y, a URL no ranking has ranked yet: y is u0's
    page, classed by u0's rank until a ranking ranks it, and fetched first. Unranked, it waited
    for the next ranking behind every crawlable URL, less similar ones too."""
    queue = make_queue(
        "rank_semantic", key, band_low=0.0, band_high=1.0, T=0.0, rank_every=3, rank_growth=0.0
    )
    for i, similarity in enumerate([0.5, 0.4, 0.3]):
        queue.push(req(f"u{i}", parent_url="http://t/p", link_relevance=similarity))
    assert queue.stats.get_value("focused/rankings") == 1
    u0 = queue.pop()
    assert name_of(u0) == "u0"
    y = u0.replace(url="http://t/y")
    y.meta["redirect_urls"] = [u0.url]
    queue.push(y)
    assert drain(queue) == ["y", "u1", "u2"]


def test_rank_semantic_counts_each_link_once_toward_its_next_ranking(key):
    """A retry queues its request again, a page may name a link twice: neither is a link the
    graph lacked, yet each counted toward ``rank_every`` and brought the next ranking forward."""
    queue = make_queue("rank_semantic", key, T=0.0, rank_every=3, rank_growth=0.0)
    for name in ("u0", "u1", "u2"):
        queue.push(req(name, parent_url="http://t/p", link_relevance=0.5))
    assert queue.stats.get_value("focused/rankings") == 1
    u0 = queue.pop()
    queue.push(u0.replace(dont_filter=True))  # a retry
    queue.rediscover(req("u1", parent_url="http://t/p", link_relevance=0.5))  # named again
    queue.rediscover(req("u2", parent_url="http://t/p", link_relevance=0.5))
    rankings = []
    for name in ("v0", "v1", "v2"):  # a push ranks once the links found reach rank_every
        queue.push(req(name, parent_url="http://t/u1", link_relevance=0.5))
        rankings.append(queue.stats.get_value("focused/rankings"))
    assert rankings == [1, 1, 2]


def test_rank_semantic_ranks_once_a_link_found_again_on_a_new_page_reaches_rank_every(key):
    """A URL found again on another page is a new edge of the graph: it counted toward
    ``rank_every``, but only a push ranked, so the ranking came a push later."""
    queue = make_queue("rank_semantic", key, T=0.0, rank_every=3, rank_growth=0.0)
    for name in ("u0", "u1"):
        queue.push(req(name, parent_url="http://t/p", link_relevance=0.5))
    queue.rediscover(req("u0", parent_url="http://t/q", link_relevance=0.5))
    assert queue.stats.get_value("focused/rankings") == 1


def _redirected(request, url: str):
    target = request.replace(url=f"http://t/{url}")
    target.meta["redirect_urls"] = [*request.meta.get("redirect_urls", []), request.url]
    return target


def test_rank_semantic_counts_no_new_link_for_a_redirect(key):
    """A redirect queues its target with its parent's meta: the link was its start's, counted
    once, and is not a new link to a new page."""
    queue = make_queue("rank_semantic", key, T=0.0, rank_every=2, rank_growth=0.0)
    for name in ("u0", "u1"):
        queue.push(req(name, parent_url="http://t/p", link_relevance=0.5))
    assert queue.stats.get_value("focused/rankings") == 1
    queue.push(_redirected(queue.pop(), "y"))
    queue.push(req("v0", parent_url="http://t/u1", link_relevance=0.5))
    assert queue.stats.get_value("focused/rankings") == 1


def _redirect_graph(queue) -> None:
    """a redirects to a2, whose page links to c; b redirects to c, a URL already linked."""
    for name, similarity in [("a", 0.6), ("b", 0.5)]:
        queue.push(req(name, parent_url="http://t/p", link_relevance=similarity))
    a = queue.pop()
    assert name_of(a) == "a"
    queue.push(_redirected(a, "a2"))
    assert name_of(queue.pop()) == "a2"
    queue.push(
        req("c", parent_url="http://t/a", parent_fetched_url="http://t/a2", link_relevance=0.5)
    )
    b = queue.pop()
    assert name_of(b) == "b"
    queue.rediscover(_redirected(b, "c"))


def assert_ranked_as_one_page_each(graph) -> None:
    """The ranks of ``_redirect_graph``'s: two pages linked from p, a (a2) linking to c (b)."""
    one_page = LinkGraph()
    for src, dst in [("p", "a"), ("p", "c"), ("a", "c")]:
        one_page.add_edge(f"http://t/{src}", f"http://t/{dst}")
    expected = one_page.pagerank()
    rank = graph.pagerank()
    for url, page in [("a", "a"), ("a2", "a"), ("b", "c"), ("c", "c"), ("p", "p")]:
        assert rank[graph.ids[f"http://t/{url}"]] == pytest.approx(
            expected[one_page.ids[f"http://t/{page}"]]
        ), url


def test_rank_semantic_ranks_a_redirect_and_its_target_as_one_page(key):
    """PageRank sees a URL redirected and the URL it led to as one page, linked from the links
    to either and linking out by the page's links. The redirect's start was a node of its own
    with no out-links (its rank spread over the whole graph), and p's rank went half to it,
    half to a2 as to two pages."""
    queue = make_queue("rank_semantic", key, band_low=0.0, band_high=1.0, T=0.0, rank_every=1000)
    _redirect_graph(queue)
    assert_ranked_as_one_page_each(queue.graph)


def test_rank_semantic_keeps_a_redirect_as_one_page_over_a_pause_and_a_crash(tmp_path):
    key = str(tmp_path / "requests.queue")
    queue = make_queue("rank_semantic", key, rank_every=1000)
    _redirect_graph(queue)
    state = queue.close()
    resumed = make_queue("rank_semantic", key, state, rank_every=1000)
    assert_ranked_as_one_page_each(resumed.graph)
    resumed.frontier.close()  # a crash: the graph file is the pause's
    assert_ranked_as_one_page_each(make_queue("rank_semantic", key, state).graph)


def test_rank_semantic_graph_and_order_survive_close_and_reopen(tmp_path):
    params = {"band_low": 0.65, "band_high": 0.9, "T": 0.1, "rank_every": 1000}
    key = str(tmp_path / "requests.queue")
    queue = make_queue("rank_semantic", key, **params)
    _band_graph(queue)
    assert [queue.pop().url for _ in range(2)] == ["http://t/seed", "http://t/m2"]
    nodes, edges = len(queue.graph.ids), set(queue.graph.edges)
    state = queue.close()

    reopened = make_queue("rank_semantic", key, state, **params)
    assert len(reopened) == 6
    assert len(reopened.graph.ids) == nodes and reopened.graph.edges == edges
    # A rediscovery after the resume still counts as an in-link.
    reopened.rediscover(req("m1", parent_url="http://t/s2", link_relevance=0.5))
    assert len(reopened.graph.edges) == len(edges) + 1
    assert drain(reopened) == ["m1", "low1", "top", "low3", "low2", "m3"]


def test_rank_semantic_rebuilds_its_graph_from_the_frontier_after_a_crash(tmp_path):
    key = str(tmp_path / "requests.queue")
    queue = make_queue("rank_semantic", key)
    _band_graph(queue)
    queue.frontier.close()  # a crash: no graph file, no saved state
    reopened = make_queue("rank_semantic", key)
    assert len(reopened) == 8
    # Every queued link is known again from its parent (top's three rediscoveries are lost).
    assert len(reopened.graph.edges) == 7
    assert len(drain(reopened)) == 8


def _links_and_pops(count: int) -> list[tuple]:
    """A crawl's queue traffic: new links from any page found so far, links found again (queued
    or not), pops."""
    rng = random.Random(3)
    operations = []
    for i in range(1, count + 1):
        parent = f"u{rng.randrange(i)}"
        operations.append(("push", f"u{i}", parent, rng.random()))
        if rng.random() < 0.5:
            operations.append(("rediscover", f"u{rng.randrange(1, i + 1)}", parent, rng.random()))
        if rng.random() < 0.4:
            operations.append(("pop",))
    return operations


def _play(queue, operations: list[tuple]) -> list[str]:
    popped = []
    for name, *link in operations:
        if name == "pop":
            popped.append(queue.pop().url)
        else:
            url, parent, similarity = link
            request = req(url, parent_url=f"http://t/{parent}", link_relevance=similarity)
            getattr(queue, name)(request)
    return popped


def test_rank_semantic_goes_on_after_a_pause_as_if_it_had_never_stopped(tmp_path):
    """The pause keeps the graph, the ranks and the band, and when the next ranking is due: a
    ranking at the resume would re-class the frontier where an unpaused crawl does not."""
    params = {"band_low": 0.2, "band_high": 0.8, "T": 0.2, "rank_every": 10, "rank_growth": 0.5}
    operations = _links_and_pops(150)
    pause = len(operations) // 2
    whole = make_queue("rank_semantic", str(tmp_path / "whole"), **params)
    expected = _play(whole, operations)
    paused = make_queue("rank_semantic", str(tmp_path / "paused"), **params)
    before = _play(paused, operations[:pause])
    rankings = paused.stats.get_value("focused/rankings")
    state = json.loads(json.dumps(paused.close()))  # as Scrapy keeps it, in active.json
    resumed = make_queue("rank_semantic", str(tmp_path / "paused"), state, **params)
    after = _play(resumed, operations[pause:])
    assert before + after + drain(resumed) == expected + drain(whole)
    assert rankings + resumed.stats.get_value("focused/rankings") == whole.stats.get_value(
        "focused/rankings"
    )


def test_rank_semantic_ranks_again_after_a_crash_that_followed_a_resume(tmp_path):
    """The graph file outlives a crash, but its ranks are those of the pause before it: the
    resume reads them once, and a resume after the crash ranks the frontier afresh."""
    key = str(tmp_path / "requests.queue")
    queue = make_queue("rank_semantic", key)
    _band_graph(queue)
    state = queue.close()
    resumed = make_queue("rank_semantic", key, state)
    assert resumed.stats.get_value("focused/rankings") is None
    resumed.frontier.close()  # a crash: the graph file and the state are those of the pause
    recovered = make_queue("rank_semantic", key, state)
    assert recovered.stats.get_value("focused/rankings") == 1
    assert len(drain(recovered)) == 8


def test_rank_semantic_resumes_a_jobdir_saved_without_its_ranking(tmp_path):
    key = str(tmp_path / "requests.queue")
    queue = make_queue("rank_semantic", key)
    _band_graph(queue)
    state = queue.close()
    db = sqlite3.connect(Path(key, "linkgraph.sqlite3"))
    db.execute("DROP TABLE ranking")  # as saved before the ranks were
    db.close()
    old = {name: value for name, value in state.items() if name in ("strategy", "seq")}
    resumed = make_queue("rank_semantic", key, old)
    assert resumed.stats.get_value("focused/rankings") == 1
    assert len(drain(resumed)) == 8


def _orders_without_link_scores(name: str, **params: Any) -> tuple[list[str], list[str]]:
    """Pop order of one set of requests, then of the same with other link scores."""
    orders = []
    for link_seed in (1, 2):
        rng, link_rng = random.Random(7), random.Random(link_seed)
        queue = make_queue(name, **params)
        for i in range(40):
            queue.push(
                req(
                    f"p{i}",
                    depth=rng.randint(1, 4),
                    discovery=i + 1,
                    parent_url="http://t/seed",
                    parent_relevance=rng.random(),
                    parent_is_relevant=rng.random() < 0.5,
                    path_cost=rng.random() * 3,
                    anchor_semantic=rng.random(),
                    anchor_relevance=link_rng.random(),
                    context_relevance=link_rng.random(),
                    link_relevance=link_rng.random(),
                )
            )
        orders.append(drain(queue))
    return orders[0], orders[1]


def test_strategies_that_skip_link_scores_do_not_read_them():
    # The scoring middleware does not score links for these (reads_link_scores False): their
    # order must not depend on link scores. The oracle orders by graph distance alone.
    skipping = {name for name in STRATEGIES if not strategy_class(name).reads_link_scores}
    assert skipping == {"bees", "bfs", "dfs", "oracle", "semantic", "ucs"}
    for name in sorted(skipping - {"oracle"}):
        first, second = _orders_without_link_scores(name)
        assert first == second, name
    # The check can fail: a strategy that reads them pops in another order.
    first, second = _orders_without_link_scores("astar")
    assert first != second


def test_hybrid_reads_link_scores_only_as_its_second_order_does() -> None:
    hybrid = strategy_class("hybrid")
    params = {"bfs_levels": 1, "then": "bestfirst", "max_depth": 5}
    assert hybrid.reads_link_scores_with(params)  # best-first breaks its ties with them
    params["then"] = "dfs"
    assert not hybrid.reads_link_scores_with(params)
    first, second = _orders_without_link_scores("hybrid", **params)
    assert first == second


def test_astar_reads_link_scores_only_with_a_heuristic() -> None:
    astar = strategy_class("astar")
    assert astar.reads_link_scores_with({"h_weight": 1.0})
    assert not astar.reads_link_scores_with({"h_weight": 0.0})
    first, second = _orders_without_link_scores("astar", h_weight=0.0)
    assert first == second
