"""The page budget over JOBDIR pauses: every page fetched is counted, saved and stored.

The crawl's count, the pages the server served and the pages stored agree at every pause, and
each run fetches exactly what is left of the budget: the scheduler starts no request that the
ones downloading could make beyond it, and none once the budget is reached.
"""

from __future__ import annotations

import json
import pickle
import re
import time
from collections import Counter

import focused.settings
from tests.conftest import run_crawl
from tests.sites import Reply, Site, html

ARTICLES = 80
SLOW = 0.5  # seconds: every third article is still under way when a budget is reached
WORDS = ["heron", "plover", "tern", "gull", "wren", "finch", "lark", "swift", "crane"]


def bird_site(method: str, path: str) -> Reply:
    """A hub linking to ARTICLES articles, each a page on its own bird."""
    if path == "/":
        links = "".join(f'<a href="/article/{i}">birds {i}</a> ' for i in range(ARTICLES))
        return Reply(body=html("Birds", f"<p>Birds of the marsh: nests and eggs.</p>{links}"))
    if match := re.fullmatch(r"/article/(\d+)", path):
        i = int(match[1])
        if i % 3 == 1:
            time.sleep(SLOW)
        bird = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(5))
        text = f"<p>Article {i}: the {bird} birds, their feathers, nests and eggs.</p>"
        return Reply(body=html(f"Article {i}", text))
    return Reply(status=404, body="not found")


def run(tmp_path, site, budget: int, concurrency: int, **settings):
    arguments = {"strategy": "bfs", "query": "birds feathers nests eggs", "seeds": site.url}
    crawl = run_crawl(
        tmp_path,
        arguments,
        {
            "JOBDIR": tmp_path / "job",
            "CONCURRENT_REQUESTS": concurrency,
            "CLOSESPIDER_PAGECOUNT": budget,
            **settings,
        },
        crawl_id="budget",
    )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    return crawl


def saved_state(tmp_path) -> dict:
    return pickle.loads((tmp_path / "job" / "spider.state").read_bytes())


def test_pauses_count_every_page_fetched(tmp_path):
    concurrency = 4
    budgets = (8, 16, 24)
    with Site(bird_site) as site:
        for budget in budgets:
            crawl = run(tmp_path, site, budget, concurrency)
            assert "closespider_pagecount" in crawl.result.stderr
            served = len(site.log.gets())
            state, stored = saved_state(tmp_path), crawl.pages()
            # The saved counts, the pages served and the pages stored agree at every pause.
            assert state["responses"] == state["pages"] == served == len(stored)
            assert state["relevant"] == sum(page["is_relevant"] for page in stored)
            assert served == budget, (budget, served)
        # A budget already spent: the next run closes at once and fetches nothing.
        again = run(tmp_path, site, budgets[-1], concurrency, FOCUSED_LOGSTATS_INTERVAL=60)
        assert "already spent" in again.result.stderr
        # Its progress line (logged at close) gives the crawl's counts, not the run's none.
        progress = f"Focused: {state['pages']} pages, {state['relevant']} relevant"
        assert progress in again.result.stderr, again.result.stderr[-3000:]
        # And so do its final stats, as the crawl's record does: they had no harvest figures.
        assert f"'focused/pages': {state['pages']}," in again.result.stderr
        assert f"'focused/relevant': {state['relevant']}," in again.result.stderr
        assert "Traceback" not in again.result.stderr, again.result.stderr[-3000:]
        assert len(site.log.gets()) == served
        paths = [path for _, path in site.log.gets()]
    assert max(Counter(paths).values()) == 1
    pages = again.pages()
    assert [page["fetch_order"] for page in pages] == list(range(1, served + 1))
    assert again.crawl_record()["pages"] == served


def test_no_request_starts_once_the_budget_is_reached(tmp_path):
    """With one request at a time nothing is under way when the budget is reached, so each run
    fetches exactly its budget, even when the engine's next-request call falls due in the turn
    that counts the budget's last response (``tests.budget_probe``)."""
    extensions = {**focused.settings.EXTENSIONS, "tests.budget_probe.NextCallAtBudget": 900}
    with Site(bird_site) as site:
        for budget in (5, 10):
            crawl = run(tmp_path, site, budget, 1, EXTENSIONS=json.dumps(extensions))
            assert len(site.log.gets()) == budget
            assert saved_state(tmp_path)["responses"] == budget
            assert len(crawl.pages()) == budget
