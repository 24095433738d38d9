"""Scoring before dispatch (``SCORE_BEFORE_DISPATCH``): a request counts against
``CONCURRENT_REQUESTS`` until its page is scored, so a burst of responses does not refill the
download slots from a frontier that lacks the burst's links."""

from __future__ import annotations

from benchmarks.runner import parse_stats
from tests.conftest import BIRD_QUERY, BIRD_SEED, page_name, run_crawl

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
