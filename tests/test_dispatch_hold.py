"""Scoring before dispatch (``SCORE_BEFORE_DISPATCH``): a request counts against
``CONCURRENT_REQUESTS`` until its page is scored, so a burst of responses does not refill the
download slots from a frontier that lacks the burst's links; no request leaves while a page's
links are still being queued; and a scored page waiting for its store holds no slot."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

from benchmarks.runner import parse_stats
from focused.replayweb import name_from_path, render_article
from focused.settings import ITEM_PIPELINES, SPIDER_MIDDLEWARES
from tests.conftest import BIRD_QUERY, BIRD_SEED, page_name, run_crawl
from tests.dispatch_probe import LEAVES_HELD
from tests.sites import FetchLog, Reply, Site, html
from tests.test_replayweb import Anchors

CONCURRENCY = 16
PROBE = {
    "SCHEDULER": "tests.dispatch_probe.OutstandingProbeScheduler",
    "CLOSESPIDER_PAGECOUNT": 60,
    "CONCURRENT_REQUESTS": CONCURRENCY,
    "CONCURRENT_REQUESTS_PER_DOMAIN": CONCURRENCY,
}


def crawl(tmp_path, site, **settings):
    arguments = {"query": BIRD_QUERY, "seeds": f"{site.url}/wiki/{BIRD_SEED}"}
    done = run_crawl(tmp_path, {**arguments, "strategy": "bestfirst"}, {**PROBE, **settings})
    assert done.result.returncode == 0, done.result.stderr[-3000:]
    return done, parse_stats(done.result.stderr)


def test_a_request_is_under_way_until_its_page_is_scored(tmp_path, site):
    held, stats = crawl(tmp_path / "held", site)
    assert stats["probe/dispatched"] >= 60
    # Each request left with fewer than CONCURRENT_REQUESTS others downloading or unscored...
    assert stats["probe/max_outstanding_at_dispatch"] < CONCURRENCY
    # ...and the slots were used: the hold does not serialise the crawl.
    assert stats["probe/max_outstanding_at_dispatch"] >= CONCURRENCY // 2
    # Scrapy's own accounting frees a slot when the response is in and refills it before the
    # burst is scored: the probe sees that, so the first check can fail.
    scrapy, stats = crawl(tmp_path / "scrapy", site, SCORE_BEFORE_DISPATCH=False)
    assert stats["probe/max_outstanding_at_dispatch"] >= CONCURRENCY
    assert len(held.pages()) >= 60 and len(scrapy.pages()) >= 60
    assert page_name(held.pages()[0]["url"]) == BIRD_SEED


def link_order(graph, name: str) -> list[str]:
    """The pages ``name`` links to, in the order of its HTML (a page's links are queued so)."""
    order: list[str] = []
    for href, *_ in Anchors(render_article(graph, name)).anchors:
        target = name_from_path(href)
        if target is not None and target not in order:
            order.append(target)
    return order


def test_no_request_leaves_while_a_pages_links_are_being_queued(tmp_path, site, sample_graph):
    """With ``CONCURRENT_ITEMS`` 1 Scrapy lets the event loop run between each of a page's
    links. Depth-first pops the newest link, so requests handed out meanwhile would be the
    seed's first links; with the hold, the first four fetched after it are its last four."""
    settings = {"CONCURRENT_ITEMS": 1, "CONCURRENT_REQUESTS": 4, "CLOSESPIDER_PAGECOUNT": 5}
    arguments = {"query": BIRD_QUERY, "seeds": f"{site.url}/wiki/{BIRD_SEED}", "strategy": "dfs"}
    done = run_crawl(tmp_path, arguments, settings)
    assert done.result.returncode == 0, done.result.stderr[-3000:]
    fetched = [page_name(page["url"]) for page in done.pages()]
    assert fetched[0] == BIRD_SEED
    assert set(fetched[1:5]) == set(link_order(sample_graph, BIRD_SEED)[-4:])


def test_a_page_whose_links_were_cut_short_holds_nothing(tmp_path, site):
    """The hold ends with the page's scrape: an error that stops its output does not stall."""
    settings = {
        "SPIDER_MIDDLEWARES": json.dumps(
            {**SPIDER_MIDDLEWARES, "tests.dispatch_probe.CutShortMiddleware": 5}
        ),
        "CLOSESPIDER_PAGECOUNT": 3,
    }
    arguments = {"query": BIRD_QUERY, "seeds": f"{site.url}/wiki/{BIRD_SEED}", "strategy": "dfs"}
    done = run_crawl(tmp_path, arguments, settings, timeout=90)
    assert done.result.returncode == 0, done.result.stderr[-3000:]
    assert "output cut short" in done.result.stderr
    assert parse_stats(done.result.stderr)["focused/pages"] == 3


@pytest.mark.parametrize("seed_links", ["kept", "dropped"])
def test_a_page_waiting_for_its_store_holds_no_download_slot(tmp_path, site, seed_links):
    """One download slot; the first page's item stays in the pipelines until another response
    comes in, as it would during a slow write. The page is scored once its links are queued
    (at once if it has none), before its item leaves, so the next request goes out meanwhile.
    Counting the page until it had been stored, the crawl waited for the time limit instead."""
    pipelines = {**ITEM_PIPELINES, "tests.dispatch_probe.FirstItemWaitsForAResponse": 900}
    settings = {
        "ITEM_PIPELINES": json.dumps(pipelines),
        "CONCURRENT_REQUESTS": 1,
        "CLOSESPIDER_PAGECOUNT": 3,
    }
    seeds = [f"{site.url}/wiki/{BIRD_SEED}"]
    if seed_links == "dropped":  # two seeds without links: the second is the other response
        middlewares = {**SPIDER_MIDDLEWARES, "tests.dispatch_probe.DropSeedLinksMiddleware": 500}
        settings["SPIDER_MIDDLEWARES"] = json.dumps(middlewares)
        seeds.append(f"{site.url}/wiki/Penguin")
    arguments = {"query": BIRD_QUERY, "seeds": ",".join(seeds)}
    done = run_crawl(tmp_path, arguments, settings)
    assert done.result.returncode == 0, done.result.stderr[-3000:]
    stats = parse_stats(done.result.stderr)
    assert stats.get("probe/first_item_released_by/response") == 1, stats
    fetched = [page_name(page["url"]) for page in done.pages()]
    assert fetched[0] == BIRD_SEED
    assert len(fetched) == (2 if seed_links == "dropped" else 3), fetched


PAGES_OF_A = 6
LEAF_LAST = [("127.0.0.2", 0.0), ("127.0.0.3", 0.3)]  # hosts A and B, B answering slower


def site_of_two_hosts(hosts: list[str]):
    """Host A's pages each link to A's next and to a page of host B without links (a leaf)."""

    def respond(method: str, path: str) -> Reply:
        if path.startswith("/p"):
            page = int(path[2:])
            links = [f"/p{page + 1}"] if page + 1 < PAGES_OF_A else []
            links.append(f"http://{hosts[1]}/leaf{page}")
        elif path.startswith("/leaf"):
            links = []
        else:
            return Reply(404, "")
        anchors = " ".join(f'<a href="{link}">birds {link}</a>' for link in links)
        return Reply(200, html(f"birds {path}", f"<p>birds nest feathers {path}</p>{anchors}"))

    return respond


@pytest.mark.parametrize(("strategy", "concurrency"), [("bestfirst", 1), ("beam", 2)])
def test_a_page_scored_without_links_wakes_the_engine(tmp_path, strategy, concurrency):
    """HOST_WINDOW 2 over two hosts: the next of A's pages waits outside the window while a
    leaf of B is fetched. The leaf is scored without a link, and its item waits in the
    pipelines as a slow store's would. The request parked for A could go then, but no link
    queued asked the engine again, which waited for its 5-second heartbeat (a gap of up to 5 s
    between two fetches, each leaf). Woken as the leaf is scored, it fetches A's next at once.
    Best-first, one request at a time, waits for the leaf under SCORE_BEFORE_DISPATCH; beam,
    two at a time, for its generation's last flight, the leaf, in the scheduler's wait for the
    work under way before the window gives way."""
    log = FetchLog()
    hosts: list[str] = []
    # B's leaves come in after A's page fetched with them: each is the last of its generation.
    sites = [Site(site_of_two_hosts(hosts), address, log, delay) for address, delay in LEAF_LAST]
    for each in sites:
        each.__enter__()
        hosts.append(each.url.removeprefix("http://"))
    pipelines = {**ITEM_PIPELINES, "tests.dispatch_probe.LeafItemsWaitForAResponse": 900}
    settings = {
        "ITEM_PIPELINES": json.dumps(pipelines),
        "HOST_WINDOW": 2,
        "CONCURRENT_REQUESTS": concurrency,
    }
    try:
        done = run_crawl(
            tmp_path,
            {"strategy": strategy, "query": "birds", "seeds": f"http://{hosts[0]}/p0"},
            settings,
        )
    finally:
        for each in sites:
            each.__exit__()
    assert done.result.returncode == 0, done.result.stderr[-3000:]
    fetches = list(zip(log.times, log.gets(), strict=True))
    assert len(fetches) == 2 * PAGES_OF_A, fetches
    gaps = [(round(later - earlier, 2), path) for (earlier, _), (later, path) in pairwise(fetches)]
    assert max(gap for gap, _ in gaps) < 3.0, gaps  # the 5-second heartbeat left 4.9 s
    stats = parse_stats(done.result.stderr)
    assert stats["probe/leaf_item_released_by/response"] == LEAVES_HELD, stats


def test_a_link_dropped_as_offsite_holds_nothing(tmp_path):
    """allowed_domains A: every page of A links to a leaf of B, which Scrapy's offsite filter
    drops as the engine schedules it, before it reaches the scheduler. The page counted as
    having a link still to queue until its scrape ended: no request left while its item waited
    in the pipelines (a slow store), the first page's until the time limit."""
    log = FetchLog()
    hosts: list[str] = []
    sites = [Site(site_of_two_hosts(hosts), address, log) for address, _ in LEAF_LAST]
    for each in sites:
        each.__enter__()
        hosts.append(each.url.removeprefix("http://"))
    pipelines = {**ITEM_PIPELINES, "tests.dispatch_probe.FirstItemWaitsForAResponse": 900}
    arguments = {"query": "birds", "seeds": f"http://{hosts[0]}/p0"}
    try:
        done = run_crawl(
            tmp_path,
            {**arguments, "strategy": "bestfirst", "allowed_domains": LEAF_LAST[0][0]},
            {"ITEM_PIPELINES": json.dumps(pipelines), "CONCURRENT_REQUESTS": 1},
        )
    finally:
        for each in sites:
            each.__exit__()
    assert done.result.returncode == 0, done.result.stderr[-3000:]
    assert log.gets() == [(LEAF_LAST[0][0], f"/p{page}") for page in range(PAGES_OF_A)]
    stats = parse_stats(done.result.stderr)
    assert stats["offsite/filtered"] == PAGES_OF_A
    assert stats.get("probe/first_item_released_by/response") == 1, stats
