"""A paused crawl goes on as if it had never stopped.

A JOBDIR crawl that stops at its page budget and is resumed with a larger one fetches the pages
one uninterrupted crawl of that budget fetches, in the same order, with the same scores: the
strategy's state, and whatever else decides the order, survived the pause whole. Both crawls
fetch one request at a time (at 16, the order also depends on which download lands first), and
the relevance model is not refit: a refit runs in a worker thread, and the page at which it
lands depends on the machine's load, paused or not.
"""

from __future__ import annotations

import pytest

from tests.conftest import BIRD_QUERY, BIRD_SEED, run_crawl

PAUSE_AT, BUDGET = 40, 100
ONE_AT_A_TIME = {"CONCURRENT_REQUESTS": 1, "RELEVANCE_REFIT_EVERY": 1_000_000}
# The strategies that keep state of their own beyond each request's score, and semantic, whose
# sentence encoder keeps some (the default strategy).
STRATEGIES = ["annealing", "bees", "beam", "pso", "rank_semantic", "semantic"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_paused_crawl_fetches_what_an_uninterrupted_one_does(tmp_path, site, strategy):
    arguments = {
        "strategy": strategy,
        "query": BIRD_QUERY,
        "seeds": f"{site.url}/wiki/{BIRD_SEED}",
    }
    whole = run_crawl(
        tmp_path / "whole",
        arguments,
        {**ONE_AT_A_TIME, "JOBDIR": tmp_path / "whole" / "job", "CLOSESPIDER_PAGECOUNT": BUDGET},
    )
    assert whole.result.returncode == 0, whole.result.stderr[-3000:]
    for budget in (PAUSE_AT, BUDGET):
        settings = {**ONE_AT_A_TIME, "CLOSESPIDER_PAGECOUNT": budget}
        paused = run_crawl(tmp_path / "paused", arguments, {**settings, "JOBDIR": tmp_path / "job"})
        assert paused.result.returncode == 0, paused.result.stderr[-3000:]
    assert "Resuming crawl" in paused.result.stderr
    assert _fetched(paused) == _fetched(whole)


def _fetched(crawl) -> list[tuple[str, float]]:
    """Each page in fetch order, with its relevance."""
    return [(page["url"], round(page["relevance"], 9)) for page in crawl.pages()]
