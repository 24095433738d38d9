"""Real crawls of the loopback sample with each score-ordered strategy, non-default parameters."""

from __future__ import annotations

import sqlite3
from collections import Counter
from itertools import pairwise

import pytest

from tests.conftest import BIRD_QUERY, BIRD_SEED, run_crawl
from tests.sites import Reply, Site, html

BUDGET = 40


def strategy_crawl(tmp_path, site, strategy: str, params: dict[str, str], **settings):
    arguments = {
        "strategy": strategy,
        "query": BIRD_QUERY,
        "seeds": f"{site.url}/wiki/{BIRD_SEED}",
        **params,
    }
    crawl = run_crawl(
        tmp_path,
        arguments,
        {"CLOSESPIDER_PAGECOUNT": BUDGET, "CONCURRENT_REQUESTS": 1, **settings},
        crawl_id=strategy,
    )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    pages = crawl.pages()
    assert len(pages) >= BUDGET - 1  # robots.txt is one of Scrapy's pages
    assert pages[0]["level"] == 0
    for page in pages:
        assert isinstance(page["level"], int) and page["strategy"] == strategy
        assert 0.0 <= page["relevance"] <= 1.0 and isinstance(page["is_relevant"], bool)
    record = crawl.crawl_record()
    assert record["status"] == "finished" and record["finish_reason"] == "closespider_pagecount"
    assert record["params"] == {**record["params"], **_typed(params)}
    assert max(Counter(p for p in site.fetched if p.startswith("/wiki/")).values()) == 1
    return crawl, pages


def _typed(params: dict[str, str]) -> dict:
    def parse(value: str):
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                pass
        return value

    return {name: parse(value) for name, value in params.items()}


def _by_url(pages: list[dict]) -> dict[str, dict]:
    return {page["url"]: page for page in pages}


def test_ucs_fetches_in_nondecreasing_path_cost(tmp_path, site):
    _, pages = strategy_crawl(tmp_path, site, "ucs", {}, RELEVANCE_THRESHOLD=0.2)
    by_url = _by_url(pages)
    cost: dict[str, float] = {}
    for page in pages:  # fetch order: a page's parent was fetched before it
        parent = by_url.get(page["parent_url"])
        cost[page["url"]] = 0.0 if parent is None else cost[parent["url"]] + 1 - parent["relevance"]
    costs = [cost[page["url"]] for page in pages]
    assert all(later >= earlier - 1e-6 for earlier, later in pairwise(costs)), costs
    assert max(page["level"] for page in pages) >= 2


def test_astar_fetches_the_seeds_best_link_first(tmp_path, site):
    _, pages = strategy_crawl(tmp_path, site, "astar", {"h_weight": "0.5"})
    seed_url = pages[0]["url"]
    from_seed = [page["link_relevance"] for page in pages if page["parent_url"] == seed_url]
    # Every link of the seed has the same g: the strongest link decides.
    assert pages[1]["parent_url"] == seed_url
    assert pages[1]["link_relevance"] == max(from_seed)


def test_hybrid_crawls_level_1_breadth_first_then_depth_first(tmp_path, site):
    params = {"bfs_levels": "1", "then": "dfs", "max_depth": "4"}
    _, pages = strategy_crawl(tmp_path, site, "hybrid", params)
    levels = [page["level"] for page in pages]
    first_deep = next(i for i, level in enumerate(levels) if level >= 2)
    assert set(levels[1:first_deep]) == {1}
    assert all(level >= 2 for level in levels[first_deep:]), levels
    assert first_deep >= 20  # the seed's links (32) before any deeper page
    assert max(levels) == 4, levels  # depth first down to max_depth


def test_shark_never_follows_a_chain_past_depth_irrelevant_pages(tmp_path, site):
    params = {"delta": "0.7", "beta": "0.6", "gamma": "0.5", "depth": "2"}
    crawl, pages = strategy_crawl(tmp_path, site, "shark", params, RELEVANCE_THRESHOLD=0.2)
    by_url = _by_url(pages)
    run: dict[str, int] = {}
    for page in pages:
        parent = by_url.get(page["parent_url"])
        if parent is None:
            run[page["url"]] = 0
        else:
            run[page["url"]] = 0 if parent["is_relevant"] else run[parent["url"]] + 1
    assert max(run.values()) == 1, run  # depth 2: never a link found after 2 irrelevant pages
    assert any(not page["is_relevant"] for page in pages)
    assert "'focused/depth_cut'" in crawl.result.stderr


def test_rank_semantic_crawl_ranks_the_graph(tmp_path, site):
    params = {"band_low": "0.05", "band_high": "0.95", "T": "0.08", "rank_every": "50"}
    crawl, pages = strategy_crawl(tmp_path, site, "rank_semantic", params)
    assert "'focused/rankings'" in crawl.result.stderr
    # Links below T are held back while any link above it is crawlable.
    weak = [i for i, page in enumerate(pages[1:], 1) if page["link_relevance"] < 0.08]
    strong = [i for i, page in enumerate(pages[1:], 1) if page["link_relevance"] >= 0.08]
    assert strong and (not weak or min(weak) > min(strong))


def _graph(jobdir) -> tuple[int, set[int]]:
    db = sqlite3.connect(jobdir / "requests.queue" / "linkgraph.sqlite3")
    try:
        nodes = {url: i for i, url in db.execute("SELECT id, url FROM nodes")}
        edges = {
            (src, dst)
            for (pair,) in db.execute("SELECT pair FROM edges")
            for src, dst in [(pair >> 32, pair & 0xFFFFFFFF)]
        }
        names = {i: url for url, i in nodes.items()}
        return len(nodes), {(names[s], names[d]) for s, d in edges}
    finally:
        db.close()


def test_rank_semantic_graph_has_a_page_stored_under_its_rel_canonical_as_one_node(tmp_path):
    """A page fetched at /alias and stored under its rel=canonical /real: its links come from
    the node its own link reached, /alias. Named by the stored URL, they came from a node
    no link leads to, and /alias was a dead end to PageRank."""
    links = {"/": ["/alias", "/plain"], "/alias": ["/leaf1"], "/plain": ["/leaf2"]}

    def respond(method: str, path: str) -> Reply:
        head = '<link rel="canonical" href="/real">' if path == "/alias" else ""
        anchors = "".join(f'<a href="{link}">{link}</a>' for link in links.get(path, []))
        return Reply(200, html(path, f"<p>words about topic {path}</p>{anchors}", head))

    with Site(respond) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "rank_semantic", "query": "topic words", "seeds": f"{site.url}/"},
            {"CONCURRENT_REQUESTS": 1, "JOBDIR": tmp_path / "job"},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    stored = {p["url"].removeprefix(site.url) for p in crawl.pages()}
    assert stored == {"/", "/real", "/plain", "/leaf1", "/leaf2"}
    nodes, edges = _graph(tmp_path / "job")
    as_paths = {(src.removeprefix(site.url), dst.removeprefix(site.url)) for src, dst in edges}
    assert as_paths == {(page, link) for page, targets in links.items() for link in targets}
    assert nodes == 5


def test_rank_semantic_pauses_and_resumes_from_jobdir(tmp_path, site):
    arguments = {
        "strategy": "rank_semantic",
        "query": BIRD_QUERY,
        "seeds": f"{site.url}/wiki/{BIRD_SEED}",
        "rank_every": "30",
    }
    settings = {"JOBDIR": tmp_path / "job", "CONCURRENT_REQUESTS": 2}
    first = run_crawl(tmp_path, arguments, {**settings, "CLOSESPIDER_PAGECOUNT": 15}, crawl_id="rs")
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    fetched_first = [p for p in site.fetched if p.startswith("/wiki/")]
    nodes_first, edges_first = _graph(tmp_path / "job")
    assert nodes_first > len(fetched_first) and edges_first

    # The budget is the crawl's: the second run stops when both runs together reach 45.
    second = run_crawl(
        tmp_path, arguments, {**settings, "CLOSESPIDER_PAGECOUNT": 45}, crawl_id="rs"
    )
    assert second.result.returncode == 0, second.result.stderr[-3000:]
    assert "Resuming crawl" in second.result.stderr
    fetched = [p for p in site.fetched if p.startswith("/wiki/")]
    # The first run's pages are all counted, and the second run starts no request beyond what is
    # left of the budget. A budget counted per run would fetch 60.
    assert len(fetched) == 45
    assert max(Counter(fetched).values()) == 1
    nodes, edges = _graph(tmp_path / "job")
    assert nodes > nodes_first and edges > edges_first  # the graph grew from the saved one

    pages = second.pages()
    assert len(pages) == len(fetched)
    assert sorted(p["fetch_order"] for p in pages) == list(range(1, len(pages) + 1))
    assert second.crawl_record()["status"] == "finished"


def _bird_page(title: str, links: str) -> str:
    text = " ".join(["Birds build nests of twigs and line them with soft feathers."] * 4)
    return html(title, f"<p>{text}</p><p>{links}</p>")


def _engine_page(title: str, links: str) -> str:
    text = " ".join(["The engine turns its crankshaft as pistons fire in the cylinders."] * 4)
    return html(title, f"<p>{text}</p><p>{links}</p>")


@pytest.mark.parametrize("paused", [False, True])
def test_shark_a_url_found_again_on_a_relevant_page_gets_the_full_depth_back(tmp_path, paused):
    """x is queued from the irrelevant i (one irrelevant page: at depth 2 its own links are
    cut), then found on the relevant r through a poorer anchor, which does not raise it. One
    link from a relevant page, x may lead to one more page: its link y is fetched. So too in a
    JOBDIR crawl paused as r is stored, before x is fetched."""
    strong = "birds feathers nest"
    pages = {
        "/": _bird_page("seed", f'<a href="/i">{strong}</a> <a href="/r">{strong}</a>'),
        "/i": _engine_page("i", f'<a href="/x">{strong}</a>'),
        "/r": _bird_page("r", '<a href="/x">next</a>'),
        "/x": _engine_page("x", '<a href="/y">gearbox</a>'),
        "/y": _engine_page("y", ""),
    }
    replies = {path: Reply(body=body) for path, body in pages.items()}
    # The anchor counts most (gamma 0.2): x's strong anchor outscores its poor one on r.
    arguments = {"strategy": "shark", "query": BIRD_QUERY, "depth": "2", "gamma": "0.2"}
    settings = {"CONCURRENT_REQUESTS": 1, "ROBOTSTXT_OBEY": False}
    if paused:
        settings["JOBDIR"] = tmp_path / "job"
    with Site(lambda method, path: replies.get(path, Reply(status=404))) as site:
        arguments["seeds"] = f"{site.url}/"
        if paused:
            first = run_crawl(
                tmp_path, arguments, {**settings, "CLOSESPIDER_PAGECOUNT": 3}, crawl_id="shark"
            )
            assert first.result.returncode == 0, first.result.stderr[-3000:]
            assert "/x" not in [path for _, path in site.log.gets()]
        crawl = run_crawl(tmp_path, arguments, settings, crawl_id="shark")
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    stored = {page["url"].removeprefix(site.url): page for page in crawl.pages()}
    order = list(stored)
    assert [stored[path]["is_relevant"] for path in ("/", "/i", "/r", "/x")] == [
        True,
        False,
        True,
        False,
    ]
    assert order.index("/r") < order.index("/x")  # found again before it was fetched
    assert stored["/x"]["parent_url"] == f"{site.url}/i"  # by its better score: not raised
    assert "/y" in stored, order
    fetched = [path for _, path in site.log.gets()]
    assert sorted(fetched) == sorted(set(fetched))  # r's link to x came through the pause
