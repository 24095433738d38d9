"""Stop criteria in real crawls: relevant-page budget, topic drift, threshold crawl-and-store."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from focused.sqlitestore import SqliteStore
from tests.conftest import BIRD_QUERY, BIRD_SEED, REPO, crawl_args, crawl_env, run_crawl, run_scrapy
from tests.test_redis_frontier import (
    REDIS_SERVER,
    redis_server,  # noqa: F401 (fixture)
)


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


def test_the_relevant_page_budget_stops_as_a_page_is_scored_not_as_it_is_stored(tmp_path, site):
    """Counted as pages left the pipelines, a slow store kept the crawl fetching: with 4
    requests at once and 0.3 s a page to store, 3 relevant pages asked gave 71 pages fetched,
    35 of them relevant. Counted as each page is scored, only the requests under way (3) come
    after the one that reached it."""
    settings = {
        "CLOSESPIDER_RELEVANT": 3,
        "CONCURRENT_REQUESTS": 4,
        "ITEM_PIPELINES": json.dumps({"tests.user_components.SlowPipeline": 900}),
    }
    crawl = bird_crawl(tmp_path, site, "bestfirst", settings)
    assert crawl.crawl_record()["finish_reason"] == "closespider_relevant"
    assert "Closing spider (closespider_relevant): 3 relevant pages" in crawl.result.stderr
    pages = crawl.pages()
    third = [page["fetch_order"] for page in pages if page["is_relevant"]][2]
    assert len(pages) <= third + 3, (len(pages), third)


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


def test_drift_watches_the_same_pages_across_a_pause(tmp_path, site):
    """The drift window began empty at each resume: a crawl that drifted at page 10 unpaused
    went on to page 16 paused at page 6, and one resumed after its drift stop fetched 10 more."""
    drift = {"DRIFT_WINDOW": 10, "DRIFT_MIN_HARVEST": 0.95, "CONCURRENT_REQUESTS": 1}
    (tmp_path / "unpaused").mkdir()
    unpaused = bird_crawl(tmp_path / "unpaused", site, "bestfirst", drift)
    assert unpaused.crawl_record()["finish_reason"] == "closespider_drift"
    stop = unpaused.crawl_record()["pages"]
    settings = {**drift, "JOBDIR": tmp_path / "job"}
    first = bird_crawl(tmp_path, site, "bestfirst", {**settings, "CLOSESPIDER_PAGECOUNT": 6})
    assert first.crawl_record()["finish_reason"] == "closespider_pagecount"
    again = bird_crawl(tmp_path, site, "bestfirst", settings)
    assert again.crawl_record()["finish_reason"] == "closespider_drift"
    assert again.crawl_record()["pages"] == stop
    # Resumed after its drift stop, it stops at once.
    served = len(fetched(site))
    third = bird_crawl(tmp_path, site, "bestfirst", settings)
    assert third.crawl_record()["finish_reason"] == "closespider_drift"
    assert len(fetched(site)) == served


def test_drift_turned_on_at_a_resume_watches_the_pages_before_it(tmp_path, site):
    """Settings may change at a resume, and the window of a crawl given DRIFT_WINDOW only as it
    resumed began empty: paused at page 6, it went on to page 16 where one never paused, with
    the drift stop from the start, stopped at page 10."""
    drift = {"DRIFT_WINDOW": 10, "DRIFT_MIN_HARVEST": 0.95, "CONCURRENT_REQUESTS": 1}
    (tmp_path / "unpaused").mkdir()
    unpaused = bird_crawl(tmp_path / "unpaused", site, "bestfirst", drift)
    assert unpaused.crawl_record()["finish_reason"] == "closespider_drift"
    settings = {"CONCURRENT_REQUESTS": 1, "JOBDIR": tmp_path / "job"}
    first = bird_crawl(tmp_path, site, "bestfirst", {**settings, "CLOSESPIDER_PAGECOUNT": 6})
    assert first.crawl_record()["finish_reason"] == "closespider_pagecount"
    again = bird_crawl(tmp_path, site, "bestfirst", {**settings, **drift})
    assert again.crawl_record()["finish_reason"] == "closespider_drift"
    assert again.crawl_record()["pages"] == unpaused.crawl_record()["pages"]


def test_drift_given_again_after_a_run_without_it_watches_that_run_s_pages(tmp_path, site):
    """A run resumed without DRIFT_WINDOW left the window of the run before it in the saved
    state, and a later resume given DRIFT_WINDOW again watched those older pages: the crawl had
    drifted in the run without it, and fetched on where one never paused stopped."""
    drift = {"DRIFT_WINDOW": 20, "DRIFT_MIN_HARVEST": 0.1, "CONCURRENT_REQUESTS": 1}
    (tmp_path / "unpaused").mkdir()
    unpaused = bird_crawl(tmp_path / "unpaused", site, "bestfirst", drift)
    assert unpaused.crawl_record()["finish_reason"] == "closespider_drift"
    stop = unpaused.crawl_record()["pages"]
    settings = {"CONCURRENT_REQUESTS": 1, "JOBDIR": tmp_path / "job"}
    first = bird_crawl(
        tmp_path, site, "bestfirst", {**settings, **drift, "CLOSESPIDER_PAGECOUNT": 30}
    )
    assert first.crawl_record()["finish_reason"] == "closespider_pagecount"
    # On without a drift stop, up to the page where the one never paused saw the crawl drift.
    second = bird_crawl(tmp_path, site, "bestfirst", {**settings, "CLOSESPIDER_PAGECOUNT": stop})
    assert second.crawl_record()["finish_reason"] == "closespider_pagecount"
    third = bird_crawl(tmp_path, site, "bestfirst", {**settings, **drift})
    assert third.crawl_record()["finish_reason"] == "closespider_drift"
    # It watches the last 20 pages stored, from its start on: it stops at the first page, from
    # the last of the run before it on, whose window drifted. (The paused crawl need not fetch
    # the pages of the one never paused in its order: a refit's timing moves scores.)
    relevant = [bool(page["is_relevant"]) for page in third.pages()]
    window = drift["DRIFT_WINDOW"]
    begun = second.crawl_record()["pages"]
    drifted = [
        n
        for n in range(max(begun, window), len(relevant) + 1)
        if sum(relevant[n - window : n]) / window < drift["DRIFT_MIN_HARVEST"]
    ]
    assert third.crawl_record()["pages"] == drifted[0], (begun, relevant[begun - window :])


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
def test_a_shared_crawl_that_drifted_stops_every_process(tmp_path, site, redis_server):  # noqa: F811
    """Each process of a shared crawl watches its own pages: one that saw the crawl drift
    stopped alone, and the others fetched on until each drifted in turn (46 pages more, with 2
    processes). A process joining the crawl once it has drifted fetches nothing."""
    settings = {
        "FOCUSED_FRONTIER": redis_server.url,
        "DRIFT_WINDOW": 10,
        "DRIFT_MIN_HARVEST": 0.95,
        "CONCURRENT_REQUESTS": 1,
    }
    first = bird_crawl(tmp_path, site, "bestfirst", settings)
    assert "Spider closed (closespider_drift)" in first.result.stderr
    served = len(fetched(site))
    joining = bird_crawl(tmp_path, site, "bestfirst", settings)
    assert len(fetched(site)) == served
    assert "another process of the crawl saw it drift" in joining.result.stderr
    assert "Spider closed (closespider_drift)" in joining.result.stderr


def test_threshold_crawl_and_store_fetches_all_stores_above(tmp_path, site):
    settings = {"STORE_MIN_RELEVANCE": 0.3, "CLOSESPIDER_PAGECOUNT": 30}
    crawl = bird_crawl(tmp_path, site, "bestfirst", settings)
    pages = crawl.pages()
    assert pages and all(page["relevance"] >= 0.3 for page in pages)
    record = crawl.crawl_record()
    assert record["status"] == "finished"
    # Every fetched page was scored and counted; only the ones above the threshold stored.
    assert record["pages"] == len(fetched(site)) > len(pages)
    assert f"'focused/not_stored': {record['pages'] - len(pages)}" in crawl.result.stderr
    # The report's deciles count the stored pages only, and say how many relevant ones are not.
    not_stored = record["relevant"] - sum(page["is_relevant"] for page in pages)
    assert not_stored > 0  # relevant (0.15) but below 0.3
    report = run_scrapy(["report", crawl.crawl_id, "-s", f"FOCUSED_DB={crawl.db}"], timeout=60)
    assert report.returncode == 0, report.stderr[-3000:]
    said = "1 relevant page was" if not_stored == 1 else f"{not_stored} relevant pages were"
    assert f"(relevant pages stored only: {said} fetched" in report.stdout


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


# A crawl whose check passes, then a recrawl claims it before its start is recorded.
CLAIMED_AFTER_THE_CHECK = """
import sys
import pipelines.storage
import spiders.topical
from focused.sqlitestore import SqliteStore
from scrapy.cmdline import execute

checked = spiders.topical.check_store

def check_store(settings, config):
    checked(settings, config)
    store = SqliteStore(settings["FOCUSED_DB"])
    store.claim_recrawl(config.crawl_id, None, 30.0)
    store.close()

spiders.topical.check_store = check_store
# A real recrawl into SQLite holds the crawl's lock as it claims it, and the crawl, which holds
# it now, takes a mark left in its record for a killed recrawl's: refused as where no lock
# tells (MongoDB, a shared crawl), the case this is about.
pipelines.storage.holds_crawl_lock = lambda settings, crawl_id: False
sys.argv[0] = "scrapy"
execute()
"""


def test_a_crawl_claimed_by_a_recrawl_as_it_starts_is_refused_in_one_line(tmp_path):
    """The storage pipeline refuses the crawl's start (a spider closed as it opens): the
    process hung, its stop waiting for the crawl to end, and the crawl to stop. It ends with
    the check's line and exit status, nothing fetched and the record left to the recrawl."""
    db = tmp_path / "focused.sqlite3"
    store = SqliteStore(db)
    store.start_crawl({"crawl_id": "c1", "query": "birds", "strategy": "bfs", "seeds": []})
    store.finish_crawl("c1")
    store.close()
    settings = {"FOCUSED_DB": db, "ENCODER_STORE_DIR": tmp_path / "encodings"}
    arguments = {"crawl_id": "c1", "query": "birds", "seeds": "http://127.0.0.1:9/"}
    command = [sys.executable, "-c", CLAIMED_AFTER_THE_CHECK, *crawl_args(arguments, settings)]
    result = subprocess.run(
        command, cwd=REPO, env=crawl_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr[-3000:]
    [line] = [line for line in result.stderr.splitlines() if " ERROR: " in line]
    assert ": let that recrawl end, then run the crawl; if it was killed, " in line
    assert "Traceback" not in result.stderr
    store = SqliteStore(db)
    crawl = store.get_crawl("c1")
    store.close()
    assert (crawl["status"], crawl["seen_at"] < crawl["recrawl_seen_at"]) == ("finished", True)
