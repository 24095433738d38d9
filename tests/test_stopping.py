"""Stop criteria in real crawls: relevant-page budget, topic drift, threshold crawl-and-store."""

from __future__ import annotations

from tests.conftest import BIRD_QUERY, BIRD_SEED, run_crawl


def bird_crawl(tmp_path, site, strategy: str, settings: dict):
    arguments = {"strategy": strategy, "query": BIRD_QUERY, "seeds": f"{site.url}/wiki/{BIRD_SEED}"}
    crawl = run_crawl(tmp_path, arguments, settings, crawl_id=strategy)
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    return crawl


def fetched(site) -> list[str]:
    return [path for path in site.fetched if path.startswith("/wiki/")]


def test_relevant_page_budget_stops_the_crawl_as_finished(tmp_path, site):
    settings = {"CLOSESPIDER_RELEVANT": 8, "CONCURRENT_REQUESTS": 1, "CLOSESPIDER_PAGECOUNT": 200}
    crawl = bird_crawl(tmp_path, site, "bestfirst", settings)
    record = crawl.crawl_record()
    assert record["finish_reason"] == "closespider_relevant"
    assert record["status"] == "finished"
    pages = crawl.pages()
    relevant = [page["fetch_order"] for page in pages if page["is_relevant"]]
    assert len(relevant) >= 8 and record["relevant"] == len(relevant)
    # It stopped at the 8th relevant page, give or take the request under way.
    assert len(pages) <= relevant[7] + 2, (len(pages), relevant)


def test_drift_stop_when_recent_harvest_falls(tmp_path, site):
    # Best-first from a bird page harvests well, then runs out of bird pages and drifts.
    settings = {
        "DRIFT_WINDOW": 20,
        "DRIFT_MIN_HARVEST": 0.1,
        "CONCURRENT_REQUESTS": 1,
        "CLOSESPIDER_PAGECOUNT": 280,
    }
    crawl = bird_crawl(tmp_path, site, "bestfirst", settings)
    record = crawl.crawl_record()
    assert record["finish_reason"] == "closespider_drift", record
    assert record["status"] == "finished"
    relevant = [page["is_relevant"] for page in crawl.pages()]
    assert len(relevant) > 60  # not at the start: after the on-topic stretch
    windows = [sum(relevant[i - 20 : i]) / 20 for i in range(20, len(relevant) + 1)]
    # The stop came at the first window below 0.1, give or take the page under way.
    first_low = next(i for i, harvest in enumerate(windows) if harvest < 0.1)
    assert len(windows) - 1 - first_low <= 2, windows
    assert "harvest rate" in crawl.result.stderr


def test_drift_window_not_reached_does_not_stop(tmp_path, site):
    settings = {"DRIFT_WINDOW": 100, "DRIFT_MIN_HARVEST": 1.0, "CLOSESPIDER_PAGECOUNT": 30}
    crawl = bird_crawl(tmp_path, site, "bfs", settings)
    assert crawl.crawl_record()["finish_reason"] == "closespider_pagecount"


def test_threshold_crawl_and_store_fetches_all_stores_above(tmp_path, site):
    settings = {"STORE_MIN_RELEVANCE": 0.2, "CLOSESPIDER_PAGECOUNT": 30}
    crawl = bird_crawl(tmp_path, site, "bestfirst", settings)
    pages = crawl.pages()
    assert pages and all(page["relevance"] >= 0.2 for page in pages)
    record = crawl.crawl_record()
    assert record["status"] == "finished"
    # Every fetched page was scored and counted; only the ones above the threshold stored.
    assert record["pages"] == len(fetched(site)) > len(pages)
    assert f"'focused/not_stored': {record['pages'] - len(pages)}" in crawl.result.stderr


def test_a_relevant_budget_already_reached_fetches_nothing_more(tmp_path, site):
    """A crawl resumed from its JOBDIR, or a process joining a shared crawl, once the crawl has
    its CLOSESPIDER_RELEVANT pages: the count was checked only after each page, so each run
    fetched pages beyond it until one more page came."""
    settings = {"CLOSESPIDER_RELEVANT": 4, "CONCURRENT_REQUESTS": 1, "JOBDIR": tmp_path / "job"}
    first = bird_crawl(tmp_path, site, "bestfirst", settings)
    assert first.crawl_record()["finish_reason"] == "closespider_relevant"
    served = len(fetched(site))
    again = bird_crawl(tmp_path, site, "bestfirst", settings)
    assert len(fetched(site)) == served
    assert "Closing spider (closespider_relevant): 4 relevant pages" in again.result.stderr
    assert again.crawl_record()["finish_reason"] == "closespider_relevant"
