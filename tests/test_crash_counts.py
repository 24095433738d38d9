"""The crawl counters the store cannot give back survive ``kill -9`` (``focused.resume.
CrawlCounters``): the page budget's count of responses, and the discovery order.

A crawl of a site where half the links are 404s is killed mid-crawl, then resumed with the
same command. A 404 leaves no page in the store, so a count brought back from the store alone
would miss every 404 fetched before the kill, and the crawl would fetch that many pages beyond
its budget; and with the discovery order restarting from the last clean save (none here), the
children found after the kill would be numbered below those queued before it.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import sqlite3
import subprocess
import time
from types import SimpleNamespace

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from focused.resume import COUNTERS_FILE, CrawlCounters, add_to_counter, response_counted
from focused.scheduler import FocusedScheduler
from focused.stopping import PageBudget
from schedulers.base import FRONTIER_FILE, RESPONSE_COUNTED, SqliteFrontier
from tests.conftest import REPO, crawl_args, crawl_env, scrapy_command
from tests.queues import QueueSpider, make_queue, req
from tests.sites import Hold, Reply, Site, html

BUDGET = 40
CONCURRENT = 4
KILL_AFTER = 20  # GETs served before the kill -9


def tree_site(method: str, path: str) -> Reply:
    """An endless tree of bird articles: each links to two more and to two missing pages."""
    if path == "/" or re.fullmatch(r"/a/[\d-]+", path):
        node = path.rstrip("/").removeprefix("/a/") or "0"
        links = "".join(
            f'<a href="/a/{node}-{k}">birds {node}-{k}</a> '
            f'<a href="/gone/{node}-{k}">bird nests {node}-{k}</a> '
            for k in range(2)
        )
        text = f"<p>Birds {node}: the nesting birds of the marsh, feathers and eggs.</p>"
        return Reply(body=html(f"Birds {node}", text + links))
    return Reply(status=404, body="not found")


def queued_discoveries(jobdir) -> dict[bytes, int]:
    """The discovery number of each request the frontier file holds (queued or in flight)."""
    with sqlite3.connect(jobdir / "requests.queue" / "frontier.sqlite3") as conn:
        rows = conn.execute(
            "SELECT fp, request FROM frontier UNION SELECT fp, request FROM inflight"
        )
        return {fp: pickle.loads(blob)["meta"]["discovery"] for fp, blob in rows.fetchall()}


def kill_then_resume(tmp_path):
    """Kill -9 a JOBDIR crawl with a page budget once the site has served KILL_AFTER GETs,
    then resume it; returns the paths served (before the kill, in all), the discovery numbers
    queued at the kill and those queued when the resumed run stopped, and its result."""
    jobdir = tmp_path / "job"
    until_killed = Hold(KILL_AFTER)

    def respond(method: str, path: str) -> Reply:
        # GETs beyond KILL_AFTER wait for the kill: however late it comes, the killed run has
        # left most of the budget to the resumed one (once 3 s were enough to spend it all).
        if method == "GET" and path != "/robots.txt":
            until_killed.wait()
        return tree_site(method, path)

    with Site(respond, delay=0.05) as site:
        arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"}
        settings = {
            "FOCUSED_DB": tmp_path / "focused.sqlite3",
            "JOBDIR": jobdir,
            "CONCURRENT_REQUESTS": CONCURRENT,
            "CLOSESPIDER_PAGECOUNT": BUDGET,
            # At most CONCURRENT + 1 requests in flight at the kill (tests/test_crash_resume.py).
            "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 1,
            "ENCODER_STORE_DIR": tmp_path / "encodings",
            "FOCUSED_LOGSTATS_INTERVAL": 0,
            "LOG_LEVEL": "INFO",
        }
        command = scrapy_command(*crawl_args(arguments, settings))
        run = subprocess.Popen(
            command, cwd=REPO, env=crawl_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 90
        while len(site.log.gets()) < KILL_AFTER and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
        until_killed.release()
        before_kill = [path for _, path in site.log.gets()]
        assert len(before_kill) >= KILL_AFTER, "the crawl did not get going"
        at_kill = queued_discoveries(jobdir)
        resumed = subprocess.run(
            command, cwd=REPO, env=crawl_env(), capture_output=True, text=True, timeout=300
        )
        served = [path for _, path in site.log.gets()]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "closespider_pagecount" in resumed.stderr, resumed.stderr[-3000:]
    return before_kill, served, at_kill, queued_discoveries(jobdir), resumed


def test_kill_9_then_resume_counts_the_404s_in_the_budget(tmp_path):
    before_kill, served, _, _, _ = kill_then_resume(tmp_path)
    missing_before_kill = {path for path in before_kill if path.startswith("/gone/")}
    # Fewer would not tell the stores' count from the written-through one.
    assert len(missing_before_kill) >= CONCURRENT, before_kill
    # A page served twice was in flight at the kill, fetched again, and counted once (but for a
    # kill between its count's write and its mark's, focused.stopping). Counting from the store
    # alone, the crawl would fetch len(missing_before_kill) more pages than the budget.
    fetched = set(served)
    assert BUDGET - 1 <= len(fetched) <= BUDGET + CONCURRENT - 1, len(fetched)


def test_kill_9_then_resume_numbers_discoveries_on(tmp_path):
    _, _, at_kill, at_stop, _ = kill_then_resume(tmp_path)
    found_after_kill = [number for fp, number in at_stop.items() if fp not in at_kill]
    assert found_after_kill, "no link queued after the kill: the test would prove nothing"
    assert min(found_after_kill) > max(at_kill.values()), (
        sorted(found_after_kill)[:5],
        max(at_kill.values()),
    )


def counters_extension(tmp_path, state: dict):
    crawler = get_crawler(settings_dict={"JOBDIR": str(tmp_path / "job")})
    crawler.spider = SimpleNamespace(state=state, shared=None)
    extension = CrawlCounters.from_crawler(crawler)
    extension.spider_opened(crawler.spider)
    return crawler, extension


def test_counters_take_the_larger_of_the_file_and_the_saved_state(tmp_path):
    """A JOBDIR's saved spider.state (written before the file existed, or at a clean close) and
    the file: each counter takes the larger value, and the file keeps it."""
    crawler, extension = counters_extension(tmp_path, {"responses": 5})
    add_to_counter(crawler, "discovered", 12)
    add_to_counter(crawler, "pages")  # the store gives it back: not written
    extension.spider_closed(crawler.spider)
    crawler, _ = counters_extension(tmp_path, {"responses": 3, "discovered": 20})
    assert crawler.spider.state == {"responses": 5, "discovered": 20}
    with sqlite3.connect(tmp_path / "job" / COUNTERS_FILE) as conn:
        assert dict(conn.execute("SELECT name, value FROM counters")) == {
            "responses": 5,
            "discovered": 20,
        }


def test_without_jobdir_nothing_is_written(tmp_path):
    with pytest.raises(NotConfigured):
        CrawlCounters.from_crawler(get_crawler())


def test_a_request_whose_response_was_counted_comes_back_marked_after_a_crash(tmp_path):
    """Two requests in flight at a crash, the response to one counted: both are queued again,
    and only that one is marked, so that the page budget does not count it twice."""
    path, spider = tmp_path / FRONTIER_FILE, QueueSpider()
    frontier = SqliteFrontier(path, spider)
    for name in ("counted", "downloading"):
        frontier.start_inflight(name.encode(), req(name))
    frontier.mark_counted(b"counted")
    # The process dies: nothing is finished or closed.
    recovered = dict(SqliteFrontier(path, spider).recover_inflight())
    assert recovered[b"counted"].meta.get(RESPONSE_COUNTED) is True
    assert RESPONSE_COUNTED not in recovered[b"downloading"].meta


def test_a_request_counted_before_a_crash_keeps_its_mark_when_found_again_from_a_better_page(
    tmp_path,
):
    """After a crash, the requests in flight are queued again, most of them links of the first
    pages; the resumed crawl soon finds the same URLs on better pages, and the better request
    replaced the queued one without its mark: fetched again, its response was counted twice,
    and the crawl stopped that many pages short of its budget (7 of 150 after a kill -9)."""
    key = str(tmp_path / "requests.queue")
    queue = make_queue("bestfirst", key)
    queue.push(req("x", parent_relevance=0.1, parent_url="http://t/poor"))
    request = queue.pop()
    fp = queue.crawler.request_fingerprinter.fingerprint(request)
    queue.frontier.start_inflight(fp, request)
    queue.frontier.mark_counted(fp)
    # The process dies with the response counted and its page not stored; the crawl resumes.
    resumed = make_queue("bestfirst", key)
    assert resumed.rediscover(req("x", parent_relevance=0.9, parent_url="http://t/rich"))
    again = resumed.pop()
    assert again.meta["parent_url"] == "http://t/rich"  # the better path, as ever
    assert again.meta.get(RESPONSE_COUNTED) is True


def test_an_older_frontier_file_gets_the_counted_mark(tmp_path):
    """A JOBDIR whose in-flight table was made before the mark existed is resumed."""
    path, spider = tmp_path / FRONTIER_FILE, QueueSpider()
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE inflight (fp BLOB PRIMARY KEY, request BLOB)")
        blob = pickle.dumps(req("old").to_dict(spider=spider))
        conn.execute("INSERT INTO inflight VALUES (?, ?)", (b"old", blob))
    frontier = SqliteFrontier(path, spider)
    frontier.start_inflight(b"new", req("new"))
    frontier.mark_counted(b"new")
    recovered = dict(frontier.recover_inflight())
    assert RESPONSE_COUNTED not in recovered[b"old"].meta
    assert recovered[b"new"].meta[RESPONSE_COUNTED] is True


def test_a_request_an_older_frontier_file_queued_marked_keeps_its_mark(tmp_path):
    """Before the frontier table kept the mark in a column of its own, a request queued again
    after a crash carried it in its meta only: read back from such a file, it is still marked,
    and the file takes the column."""
    path, spider = tmp_path / FRONTIER_FILE, QueueSpider()
    marked = req("old", **{RESPONSE_COUNTED: True})
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE frontier (fp BLOB PRIMARY KEY, neg_score REAL, neg_tiebreak REAL,"
            " seq INTEGER, request BLOB)"
        )
        blob = pickle.dumps(marked.to_dict(spider=spider))
        conn.execute("INSERT INTO frontier VALUES (?, ?, ?, ?, ?)", (b"old", -0.5, 0.0, 1, blob))
    frontier = SqliteFrontier(path, spider)
    frontier.put(b"new", (-0.9, 0.0, 2), req("new", **{RESPONSE_COUNTED: True}))
    assert [frontier.pop().meta.get(RESPONSE_COUNTED) for _ in range(2)] == [True, True]


def test_the_budget_counts_a_response_once_and_says_so(tmp_path):
    crawler = get_crawler(settings_dict={"CLOSESPIDER_PAGECOUNT": 10})
    crawler.spider = SimpleNamespace(state={}, shared=None)
    budget = PageBudget(crawler)
    said: list = []

    def heard(request):
        said.append(request)

    crawler.signals.connect(heard, signal=response_counted)
    fresh, again = req("fresh"), req("again", **{RESPONSE_COUNTED: True})
    for request in (fresh, again):
        budget.budget_count(None, request, crawler.spider)
    assert crawler.spider.state["responses"] == 1
    assert said == [fresh]


def test_a_request_counted_before_a_crash_holds_no_place_in_the_budget_when_fetched_again():
    """The scheduler starts no request that those downloading could make beyond the budget; a
    request whose response was counted before a crash makes none."""
    crawler = get_crawler(settings_dict={"CLOSESPIDER_PAGECOUNT": 10})
    crawler.spider = SimpleNamespace(state={"responses": 8}, shared=None)
    scheduler = FocusedScheduler.from_crawler(crawler)
    again = [req(f"again{n}", **{RESPONSE_COUNTED: True}) for n in range(2)]
    crawler.engine = SimpleNamespace(downloader=SimpleNamespace(active=set(again)))
    assert not scheduler._budget_under_way()
    crawler.engine.downloader.active.add(req("new"))
    assert not scheduler._budget_under_way()
    crawler.engine.downloader.active.add(req("newer"))
    assert scheduler._budget_under_way()
