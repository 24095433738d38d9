"""Real crawls of the loopback sample with each local-search strategy, paused and resumed."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from benchmarks.runner import parse_stats
from tests.conftest import BIRD_QUERY, BIRD_SEED, run_crawl
from tests.sites import Reply, Site, html

# Non-default parameters, and a check on the second run's stats that shows the strategy at work
# after the resume. The annealing and threshold checks read the temperature rather than a
# rejection: whether any of some twenty draws is a worse move is chance (CI once drew none),
# while the temperature follows from the move count alone, and reaches these values only if the
# first run's moves were restored (without them the second run makes about 20 moves).
THRESHOLD_T0, THRESHOLD_FACTOR = 0.05, 0.9
STRATEGIES = {
    "hillclimbing": ({}, lambda stats: stats.get("focused/hillclimbing/climbs", 0) > 0),
    "beam": ({"beam_width": "4"}, lambda stats: stats.get("focused/beam/dropped", 0) > 0),
    # Linear cooling reaches 0 at the page budget, the crawl's total of 30 moves.
    "annealing": (
        {"cooling": "linear", "seed": "3"},
        lambda stats: stats.get("focused/annealing/temperature") == 0.0,
    ),
    # Geometric cooling: at least 28 moves made over the two runs.
    "threshold": (
        {"factor": str(THRESHOLD_FACTOR), "t0": str(THRESHOLD_T0), "seed": "2"},
        lambda stats: (
            stats.get("focused/threshold/temperature", 1.0) <= THRESHOLD_T0 * THRESHOLD_FACTOR**28
        ),
    ),
    "pso": (
        {"particles": "6", "epoch": "4", "discount": "0.7"},
        lambda stats: stats.get("focused/pso/turns", 0) > 0,
    ),
    "bees": (
        {"n_bees": "4", "dance_time": "20", "seed": "5"},
        lambda stats: stats.get("focused/bees/follows", 0) > 0,
    ),
}
FIRST_BUDGET, SECOND_BUDGET = 12, 30  # the crawl's totals: the second run adds about 18
# The saved counter of moves (one per fetch) of the strategies that keep one.
MOVES = {"annealing": "moves", "threshold": "moves", "bees": "flights_made"}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_crawl_pause_and_resume(tmp_path, site, strategy):
    params, at_work = STRATEGIES[strategy]
    arguments = {
        "strategy": strategy,
        "query": BIRD_QUERY,
        "seeds": f"{site.url}/wiki/{BIRD_SEED}",
        **params,
    }
    jobdir = tmp_path / "job"
    settings = {"JOBDIR": jobdir, "CONCURRENT_REQUESTS": 4}

    first = run_crawl(tmp_path, arguments, {**settings, "CLOSESPIDER_PAGECOUNT": FIRST_BUDGET})
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    saved = json.loads((jobdir / "requests.queue" / "active.json").read_text())
    assert saved["strategy"] == strategy
    assert len(saved) > 2, saved  # the strategy's own state, beyond strategy and seq
    fetched_first = len(first.pages())
    assert fetched_first >= FIRST_BUDGET

    second = run_crawl(tmp_path, arguments, {**settings, "CLOSESPIDER_PAGECOUNT": SECOND_BUDGET})
    assert second.result.returncode == 0, second.result.stderr[-3000:]
    assert "Resuming crawl" in second.result.stderr
    stats = parse_stats(second.result.stderr)
    assert at_work(stats), second.result.stderr[-3000:]

    fetched = [path for path in site.fetched if path.startswith("/wiki/")]
    assert max(Counter(fetched).values()) == 1  # nothing fetched twice across the pause
    pages = second.pages()
    assert len(pages) == len(fetched) > fetched_first
    assert [page["fetch_order"] for page in pages] == list(range(1, len(pages) + 1))
    assert pages[0]["level"] == 0 and pages[0]["url"].endswith(f"/wiki/{BIRD_SEED}")
    by_url = {page["url"]: page for page in pages}
    for page in pages[1:]:
        assert 0.0 <= page["relevance"] <= 1.0 and page["strategy"] == strategy
        assert page["level"] == by_url[page["parent_url"]]["level"] + 1
    record = second.crawl_record()
    assert record["pages"] == len(pages)
    assert {name: str(record["params"][name]) for name in params} == params
    # The state was restored, not rebuilt: the move counters carry on across the pause.
    resumed = json.loads((jobdir / "requests.queue" / "active.json").read_text())
    if strategy in MOVES:
        moves = MOVES[strategy]
        assert resumed[moves] >= saved[moves] + len(pages) - fetched_first, (saved, resumed)


def test_a_seed_linked_from_another_stays_a_seed(tmp_path, site):
    # Ostrich is Bird's best link, and better than Bird: hill climbing's climbing move from Bird.
    # It replaced the seed Ostrich, still queued, which was then fetched as Bird's link, level 1.
    arguments = {
        "strategy": "hillclimbing",
        "query": BIRD_QUERY,
        "seeds": f"{site.url}/wiki/Bird,{site.url}/wiki/Ostrich",
    }
    settings = {"CLOSESPIDER_PAGECOUNT": 6, "CONCURRENT_REQUESTS": 1}
    crawl = run_crawl(tmp_path, arguments, settings)
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    levels = {
        page["url"].rsplit("/", 1)[1]: (page["level"], page["parent_url"]) for page in crawl.pages()
    }
    assert levels["Bird"] == levels["Ostrich"] == (0, None), levels
    assert parse_stats(crawl.result.stderr).get("focused/hillclimbing/climbs", 0) > 0


def test_beam_a_redirect_to_a_candidate_leaves_its_generation_room(tmp_path):
    """/a (level 1) redirects to /x, which /b (level 1, fetched first) linked: /x is fetched at
    level 1, and its place among level 2's two is free for /z, /x's link. It stayed taken, and
    /z was dropped with level 2 holding /y alone."""
    text = "<p>birds feathers nest eggs wings</p>"
    pages = {
        "/": "<a href='/a'>birds</a> <a href='/b'>birds feathers nest eggs</a>",
        "/b": "<a href='/x'>birds</a> <a href='/y'>feathers</a>",
        "/x": "<a href='/z'>nest</a>",
        "/y": "",
        "/z": "",
    }

    def respond(method: str, path: str) -> Reply:
        if path == "/a":
            return Reply(status=301, headers={"Location": "/x"})
        if path in pages:
            return Reply(body=html(path, text + pages[path]))
        return Reply(status=404)

    with Site(respond) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "beam", "beam_width": "2", "query": BIRD_QUERY, "seeds": f"{site.url}/"},
            {"CONCURRENT_REQUESTS": 1, "ROBOTSTXT_OBEY": False},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    levels = {page["url"].removeprefix(site.url): page["level"] for page in crawl.pages()}
    assert levels == {"/": 0, "/b": 1, "/x": 1, "/y": 2, "/z": 2}


def test_hillclimbing_a_redirected_climbing_move_goes_on_with_the_climb(tmp_path):
    """/s1's best link, /x, improves on it: the climb fetches it before the second seed. /x
    redirects to /y, which is that move: it was queued as a pending link, and the second seed,
    worth more, was fetched before it, a restart in the middle of the climb."""
    off_topic = "railway station platform ticket timetable locomotive carriage signal " * 5
    pages = {
        "/s1": f"<p>{off_topic}</p><div><a href='/x'>birds feathers nest eggs wings</a></div>",
        "/s2": f"<p>{off_topic} birds</p>",
        "/y": "<p>birds feathers</p>",
    }

    def respond(method: str, path: str) -> Reply:
        if path == "/x":
            return Reply(status=301, headers={"Location": "/y"})
        if path in pages:
            return Reply(body=html(path, pages[path]))
        return Reply(status=404)

    with Site(respond) as site:
        crawl = run_crawl(
            tmp_path,
            {
                "strategy": "hillclimbing",
                "query": BIRD_QUERY,
                "seeds": f"{site.url}/s1,{site.url}/s2",
            },
            {"CONCURRENT_REQUESTS": 1, "ROBOTSTXT_OBEY": False},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert [page["url"].removeprefix(site.url) for page in crawl.pages()] == ["/s1", "/y", "/s2"]
    assert "focused/hillclimbing/restarts" not in parse_stats(crawl.result.stderr)
