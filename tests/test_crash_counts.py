"""The crawl counters the store cannot give back survive ``kill -9`` (``focused.resume.
CrawlCounters``): the page budget's count of responses, and the discovery order.

A crawl of a site where half the links are 404s is killed mid-crawl, then resumed with the
same command. A 404 leaves no page in the store, so a count brought back from the store alone
would miss every 404 fetched before the kill, and the crawl would fetch that many pages beyond
its budget; and with the discovery order restarting from the last clean save (none here), the
children found after the kill would be numbered below those queued before it.
"""

from __future__ import annotations

import logging
import os
import pickle
import random
import re
import signal
import sqlite3
import subprocess
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from contextlib import closing
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import pytest
from scrapy import signals
from scrapy.exceptions import DropItem, NotConfigured
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler

from focused import resume
from focused.resume import (
    COUNTERS_FILE,
    DRIFT_STATE,
    INFLIGHT,
    ROBOTS_FAILURES_STATE,
    ROBOTS_RETRY_STATE,
    CrawlCounters,
    add_to_counter,
    counted_refetched,
    drift_verdict,
    journaled_window,
    not_stored_urls,
    recover_state,
    response_counted,
    robots_failure_changed,
    stored_under_canonical,
    stored_under_urls,
)
from focused.scheduler import FocusedScheduler
from focused.stopping import PageBudget
from focused.strategies import STRATEGIES
from pipelines.relevance import NotStored
from schedulers.base import FRONTIER_FILE, RESPONSE_COUNTED, SqliteFrontier
from tests.conftest import REPO, crawl_args, crawl_env, scrapy_command
from tests.queues import QueueSpider, make_queue, req
from tests.sites import Hold, Reply, Site, html
from tests.test_frontier_limits import make_scheduler

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


def jobdir_crawl(site: Site, tmp_path, budget: int, **settings) -> list[str]:
    """The command of a ``bfs`` crawl of ``site`` with a JOBDIR (``tmp_path / "job"``), its
    store ``tmp_path / "focused.sqlite3"``, and a page budget."""
    arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"}
    settings = {
        "FOCUSED_DB": tmp_path / "focused.sqlite3",
        "JOBDIR": tmp_path / "job",
        "CONCURRENT_REQUESTS": CONCURRENT,
        "CLOSESPIDER_PAGECOUNT": budget,
        "ENCODER_STORE_DIR": tmp_path / "encodings",
        "FOCUSED_LOGSTATS_INTERVAL": 0,
        "LOG_LEVEL": "INFO",
        **settings,
    }
    return scrapy_command(*crawl_args(arguments, settings))


def start_quietly(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        command, cwd=REPO, env=crawl_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def queued_discoveries(jobdir) -> dict[bytes, int]:
    """The discovery number of each request the frontier file holds (queued or in flight)."""
    with sqlite3.connect(jobdir / "requests.queue" / "frontier.sqlite3") as conn:
        rows = conn.execute(
            "SELECT fp, request FROM frontier UNION SELECT fp, request FROM inflight"
        )
        return {fp: pickle.loads(blob)["meta"]["discovery"] for fp, blob in rows.fetchall()}


def held_until_killed(until_killed: Hold) -> Callable[[str, str], Reply]:
    """The tree site, its GETs beyond KILL_AFTER waiting for the kill: however late it comes,
    the killed run has left most of the budget to the resumed one (once 3 s were enough to
    spend it all)."""

    def respond(method: str, path: str) -> Reply:
        if method == "GET" and path != "/robots.txt":
            until_killed.wait()
        return tree_site(method, path)

    return respond


def kill_once_served(site: Site, command: list[str], until_killed: Hold) -> None:
    """Run ``command`` until ``site`` has served KILL_AFTER GETs, kill -9 it, then let the
    site answer again."""
    run = start_quietly(command)
    deadline = time.monotonic() + 90
    while len(site.log.gets()) < KILL_AFTER and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(run.pid, signal.SIGKILL)
    run.wait(timeout=30)
    until_killed.release()


def kill_then_resume(tmp_path):
    """Kill -9 a JOBDIR crawl with a page budget once the site has served KILL_AFTER GETs,
    then resume it; returns the paths served (before the kill, in all), the discovery numbers
    queued at the kill and those queued when the resumed run stopped, and its result."""
    jobdir = tmp_path / "job"
    until_killed = Hold(KILL_AFTER)
    with Site(held_until_killed(until_killed), delay=0.05) as site:
        # At most CONCURRENT + 1 requests in flight at the kill (tests/test_crash_resume.py).
        command = jobdir_crawl(site, tmp_path, BUDGET, SCRAPER_SLOT_MAX_ACTIVE_SIZE=1)
        kill_once_served(site, command, until_killed)
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


def cut_off_paths(jobdir) -> set[str]:
    """The paths of the requests a kill left in flight whose response was not counted: their
    responses never reached the crawl, and they are queued again."""
    with closing(sqlite3.connect(jobdir / "requests.queue" / "frontier.sqlite3")) as conn:
        rows = conn.execute("SELECT request FROM inflight WHERE counted = 0").fetchall()
    return {urlsplit(pickle.loads(blob)["url"]).path for (blob,) in rows}


def test_kill_9_then_resume_counts_the_404s_against_their_host_s_cap(tmp_path):
    """A request takes its host's slot (MAX_PAGES_PER_HOST) when it comes up, a 404 too, but
    after kill -9 the count came back from the store alone, which holds no 404: the host got as
    many requests again past its cap (48 of 40). A crawl never killed stops at 40."""
    cap = 40
    until_killed = Hold(KILL_AFTER)
    with Site(held_until_killed(until_killed), delay=0.05) as site:
        command = jobdir_crawl(
            site, tmp_path, 0, MAX_PAGES_PER_HOST=cap, SCRAPER_SLOT_MAX_ACTIVE_SIZE=1
        )
        kill_once_served(site, command, until_killed)
        before_kill = [path for _, path in site.log.gets()]
        cut_off = cut_off_paths(tmp_path / "job")
        resumed = subprocess.run(
            command, cwd=REPO, env=crawl_env(), capture_output=True, text=True, timeout=300
        )
        after_kill = {path for _, path in site.log.gets()[len(before_kill) :]}
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # Fewer would not tell the store's count from the written-through one.
    assert len({path for path in before_kill if path.startswith("/gone/")}) >= CONCURRENT
    # The requests whose responses reached the crawl: not those cut off and not sent again.
    answered = (set(before_kill) - (cut_off - after_kill)) | after_kill
    answered.discard("/robots.txt")
    # A page whose response was counted before the kill is fetched again, with a slot of its
    # own (at most CONCURRENT + 1 in flight); the others cut off take theirs once.
    assert cap - CONCURRENT - 1 <= len(answered) <= cap, sorted(answered)


def counters_extension(tmp_path, state: dict, **settings):
    crawler = get_crawler(settings_dict={"JOBDIR": str(tmp_path / "job"), **settings})
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


def test_failed_robots_txts_are_written_through_and_replace_the_saved_state(tmp_path):
    """A failed robots.txt's failures and retry, sent as they change, are in the file; a run
    after a crash takes the file's in place of the state saved at the last clean close (which
    a read since the pause may have ended), and a file made before its table takes the state's.
    """
    saved = {
        ROBOTS_FAILURES_STATE: OrderedDict(old=1, read=2),
        ROBOTS_RETRY_STATE: OrderedDict(old=(time.time() + 60, None, True)),
    }
    crawler, extension = counters_extension(tmp_path, dict(saved))  # a file made before
    retry = (time.time() + 30, "timed out", True)
    for netloc, failures, at in (("down", 1, retry), ("read", None, None), ("down", 2, retry)):
        crawler.signals.send_catch_log(
            robots_failure_changed, netloc=netloc, failures=failures, retry=at
        )
    extension.spider_closed(crawler.spider)
    crawler, _ = counters_extension(tmp_path, dict(saved))  # as after a crash: the pause's
    state = crawler.spider.state
    assert list(state[ROBOTS_FAILURES_STATE].items()) == [("old", 1), ("down", 2)]
    assert list(state[ROBOTS_RETRY_STATE]) == ["old", "down"]
    assert state[ROBOTS_RETRY_STATE]["down"] == retry


def test_the_drift_window_s_verdicts_are_written_through_the_window_long(tmp_path):
    """Each page's verdict as it joins the window, the last DRIFT_WINDOW kept; a run without
    DRIFT_WINDOW empties them, as its pages are not among them."""
    crawler, extension = counters_extension(tmp_path, {}, DRIFT_WINDOW=3)
    for order, relevant in enumerate([True, False, True, True, False], 1):
        crawler.signals.send_catch_log(drift_verdict, is_relevant=relevant, fetch_order=order)
        page_left_the_pipelines(crawler, order)
    # A page scored after a crash under a fetch order scored before it: its verdict replaces.
    crawler.signals.send_catch_log(drift_verdict, is_relevant=True, fetch_order=5)
    page_left_the_pipelines(crawler, 5)
    extension.spider_closed(crawler.spider)
    jobdir = tmp_path / "job"
    assert journaled_window(jobdir) == [(3, True), (4, True), (5, True)]
    _, extension = counters_extension(tmp_path, {})
    extension.spider_closed(crawler.spider)
    assert journaled_window(jobdir) == []


def test_the_drift_window_keeps_its_last_rows_across_a_fetch_order_left_unused(tmp_path):
    """Page 4 was cut off in the pipelines by a kill, and fetched again under a later order
    after the resume: the window of 3 spans orders 2 to 5. Its rows were cut by order (at or
    below 5 - 3): page 2's went, and a window rebuilt after a second kill lacked it (2 rows
    for a window of 3, page 2 not stored: below STORE_MIN_RELEVANCE)."""
    crawler, extension = counters_extension(tmp_path, {}, DRIFT_WINDOW=3)
    for order, relevant in [(1, True), (2, False), (3, True), (5, True)]:
        crawler.signals.send_catch_log(drift_verdict, is_relevant=relevant, fetch_order=order)
        page_left_the_pipelines(crawler, order)
    extension.spider_closed(crawler.spider)
    assert journaled_window(tmp_path / "job") == [(2, False), (3, True), (5, True)]


def page_left_the_pipelines(
    crawler,
    fetch_order: int,
    stored: bool = True,
    response: Response | None = None,
    refused: bool = False,
    **fields: Any,
) -> None:
    """The page of ``fetch_order`` left the pipelines: stored, or else dropped below
    STORE_MIN_RELEVANCE, or with ``refused`` refused by the store."""
    item = {"fetch_order": fetch_order, **fields}
    sent = {"item": item, "response": response, "spider": crawler.spider}
    if stored:
        crawler.signals.send_catch_log(signals.item_scraped, **sent)
    else:
        dropped = DropItem("not stored: the store refused it") if refused else NotStored("below")
        crawler.signals.send_catch_log(signals.item_dropped, exception=dropped, **sent)


def test_a_page_s_verdict_is_written_through_once_its_outcome_is_safe(tmp_path):
    """A page scored but still in the pipelines at a kill -9 is fetched and scored again after
    it, under a later fetch order: written as it was scored, its verdict counted twice in the
    window rebuilt from them (here 4 of 5 verdicts relevant, where 3 of 4 pages were)."""
    crawler, extension = counters_extension(tmp_path, {}, DRIFT_WINDOW=10)
    for order, relevant in enumerate([False, True, True, True, True], 1):
        crawler.signals.send_catch_log(drift_verdict, is_relevant=relevant, fetch_order=order)
    page_left_the_pipelines(crawler, 1)
    page_left_the_pipelines(crawler, 2, stored=False)
    page_left_the_pipelines(crawler, 3)
    page_left_the_pipelines(crawler, 5)
    # Killed with page 4 in the pipelines: its request is in flight, fetched again.
    assert journaled_window(tmp_path / "job") == [(1, False), (2, True), (3, True), (5, True)]
    extension.spider_closed(crawler.spider)


def pages_stored(orders) -> list[dict]:
    """Stored pages as ``recover_state`` reads them: fetch orders ``orders``, all relevant."""
    return [
        {"url": f"http://a/{i}", "is_relevant": True, "fetch_order": i, "duplicate_of": None}
        for i in orders
    ]


def test_the_fetch_order_goes_on_after_the_verdicts_written_through(tmp_path):
    """Killed with page 4 in the pipelines (its store write slow) and page 5, below
    STORE_MIN_RELEVANCE, out of them: its verdict written, no page stored. The fetch order
    went on from 4 (3 stored, 1 not), so the resume's first page took 5 and its row replaced
    page 5's verdict: killed again, the window rebuilt lacked it (4 verdicts for 5 pages)."""
    crawler, extension = counters_extension(tmp_path, {}, DRIFT_WINDOW=10)
    for order in (1, 2, 3, 4, 5):
        crawler.signals.send_catch_log(drift_verdict, is_relevant=order != 5, fetch_order=order)
    for order in (1, 2, 3):
        page_left_the_pipelines(crawler, order)
    page_left_the_pipelines(crawler, 5, stored=False)
    extension.spider_closed(crawler.spider)  # kill -9: all it wrote is committed
    state = {"not_stored": 1}
    recover_state(state, pages_stored([1, 2, 3]), 10, journaled_window(tmp_path / "job"))
    assert list(state[DRIFT_STATE]) == [True, True, True, False]
    crawler, extension = counters_extension(tmp_path, state, DRIFT_WINDOW=10)
    order = add_to_counter(crawler, "pages")  # page 4's request, fetched again first
    crawler.signals.send_catch_log(drift_verdict, is_relevant=True, fetch_order=order)
    page_left_the_pipelines(crawler, order)
    extension.spider_closed(crawler.spider)  # killed again
    assert journaled_window(tmp_path / "job") == [
        (1, True),
        (2, True),
        (3, True),
        (5, False),
        (6, True),
    ]


def counter_values(tmp_path) -> dict[str, int]:
    """The counters written through to ``tmp_path/job``."""
    with closing(sqlite3.connect(tmp_path / "job" / COUNTERS_FILE)) as conn:
        return dict(conn.execute("SELECT name, value FROM counters"))


def killed_after_page_3_dropped(tmp_path, refused: bool) -> SqliteFrontier:
    """Pages 1 and 2 stored and page 3 dropped (below STORE_MIN_RELEVANCE, or ``refused`` by
    the store), each as FocusedScheduler hands its request out, with DRIFT_WINDOW 10; killed
    after page 3's outcome was written, the requests of pages 2 and 3 not yet finished (as a
    kill at either would). Each page fetched at http://t/NAME names http://a/NAME its
    rel=canonical, which ``focused.dedup`` says before the page reaches the pipelines.
    Returns the frontier file left."""
    jobdir = tmp_path / "job"
    frontier = SqliteFrontier(jobdir / "requests.queue" / FRONTIER_FILE, QueueSpider())
    crawler, extension = counters_extension(tmp_path, {}, DRIFT_WINDOW=10)
    for order, name in enumerate(("one", "two", "three"), 1):
        request = req(name)
        frontier.start_inflight(name.encode(), request)
        request.meta[INFLIGHT] = name.encode()
        response = HtmlResponse(request.url, request=request)
        stored = name != "three"
        crawler.signals.send_catch_log(drift_verdict, is_relevant=stored, fetch_order=order)
        pair = {"fetched_as": f"http://t/{name}", "url": f"http://a/{name}"}
        crawler.signals.send_catch_log(stored_under_canonical, **pair)
        page = {"url": f"http://a/{name}", "is_relevant": stored}
        page_left_the_pipelines(crawler, order, stored, response, refused, **page)
    frontier.finish(b"one")
    extension.spider_closed(crawler.spider)
    return frontier


def test_a_page_below_store_min_relevance_is_counted_with_its_verdict_and_taken_as_fetched(
    tmp_path,
):
    """Killed after page 3's outcome was written and before its request was finished (the
    next handler of item_dropped): page 3, below STORE_MIN_RELEVANCE, is not in the store, and
    was fetched, scored and counted again after the resume. Counted in the pipeline, a kill
    before its verdict's commit counted it without a verdict. Its count, its URLs and its
    verdict are one commit: the resume takes it as fetched, as a stored page is. Both URLs, the
    one it was fetched at from its ``stored_under`` pair: its rel=canonical's alone, the page
    fetched again at its own was a duplicate of itself (``focused.dedup``), scored and counted
    again."""
    jobdir = tmp_path / "job"
    killed_after_page_3_dropped(tmp_path, refused=False)
    assert counter_values(tmp_path) == {"not_stored": 1}
    assert not_stored_urls(jobdir) == ["http://a/three"]
    journaled = journaled_window(jobdir)
    assert journaled == [(1, True), (2, True), (3, False)]
    state: dict = {"not_stored": 1}
    not_stored, stored_under = not_stored_urls(jobdir), stored_under_urls(jobdir)
    recover_state(state, pages_stored([1, 2]), 10, journaled, 0, not_stored, stored_under)
    assert list(state[DRIFT_STATE]) == [True, True, False]
    assert state["pages"] == 3
    assert state["fetched_urls"] == {"http://a/1", "http://a/2", "http://a/three", "http://t/three"}


@pytest.mark.parametrize("store", ["page", "none", "duplicate"])
def test_the_url_a_page_stored_under_its_rel_canonical_was_fetched_at_is_taken_if_stored(
    tmp_path, store
):
    """Page 3, fetched at http://t/3 and to be stored under its rel=canonical http://a/3, has
    the pair written before the store's write. Killed after that write and before its request
    was finished, the page fetched again at http://t/3 was a duplicate of itself, and stored
    twice: the resume takes the URL as fetched. Killed before the write, it does not, the
    store lacking the page, or holding http://a/3 only as the original of a later page's
    duplicate: taken as fetched there, with http://a/3, the page fetched again was skipped
    (``focused.dedup``), and never stored."""
    crawler, extension = counters_extension(tmp_path, {})
    sent = {"fetched_as": "http://t/3", "url": "http://a/3"}
    crawler.signals.send_catch_log(stored_under_canonical, **sent)
    extension.spider_closed(crawler.spider)  # kill -9: all it wrote is committed
    jobdir = tmp_path / "job"
    assert stored_under_urls(jobdir) == [("http://t/3", "http://a/3")]
    pages = pages_stored([1, 2, 3] if store == "page" else [1, 2])
    if store == "duplicate":
        pages.append({**pages_stored([4])[0], "duplicate_of": "http://a/3"})
    state: dict = {}
    recover_state(state, pages, stored_under=stored_under_urls(jobdir))
    assert ("http://a/3" in state["fetched_urls"]) is (store != "none")
    assert ("http://t/3" in state["fetched_urls"]) is (store == "page")


def test_a_relevant_page_below_store_min_relevance_counts_as_relevant_too(tmp_path):
    """STORE_MIN_RELEVANCE above RELEVANCE_THRESHOLD: a relevant page not stored counts in
    ``not_stored_relevant`` as well, in the same commit; without DRIFT_WINDOW too."""
    crawler, extension = counters_extension(tmp_path, {"not_stored": 4})
    page_left_the_pipelines(crawler, 7, stored=False, url="http://a/7", is_relevant=True)
    page_left_the_pipelines(crawler, 8, stored=False, refused=True, url="http://a/8")
    extension.spider_closed(crawler.spider)
    assert crawler.spider.state == {"not_stored": 5, "not_stored_relevant": 1}
    assert counter_values(tmp_path) == {"not_stored": 5, "not_stored_relevant": 1}
    assert not_stored_urls(tmp_path / "job") == ["http://a/7"]


@pytest.mark.parametrize("stored_again", [False, True], ids=["refused-again", "stored-again"])
def test_a_page_the_store_refused_whose_request_a_kill_left_in_flight_has_one_verdict(
    tmp_path, stored_again
):
    """Killed after page 3's verdict was written and before its request was finished (the
    next handler of item_dropped): page 3, refused by the store, is not in it, so its request,
    still in flight, is fetched and scored again after the resume, under fetch order 4. Both
    rows counted: the window rebuilt held page 3 twice (4 verdicts for 3 pages). Scored again,
    page 3 may be stored: its first row went only where it was dropped again, and stayed
    beside the second."""
    jobdir = tmp_path / "job"
    frontier = killed_after_page_3_dropped(tmp_path, refused=True)
    assert counter_values(tmp_path) == {}  # refused: no page below STORE_MIN_RELEVANCE
    journaled = journaled_window(jobdir)
    assert journaled == [(1, True), (2, True), (3, None)]  # page 3's to be scored again
    state: dict = {}
    not_stored, stored_under = not_stored_urls(jobdir), stored_under_urls(jobdir)
    recover_state(state, pages_stored([1, 2]), 10, journaled, 0, not_stored, stored_under)
    assert list(state[DRIFT_STATE]) == [True, True]
    assert state["fetched_urls"] == {"http://a/1", "http://a/2"}  # page 3 to be stored yet
    crawler, extension = counters_extension(tmp_path, state, DRIFT_WINDOW=10)
    fp, again = b"three", {fp: r for fp, r, _ in frontier.recover_inflight()}[b"three"]
    again.meta[INFLIGHT] = fp  # queued again, and fetched again
    order = add_to_counter(crawler, "pages")
    crawler.signals.send_catch_log(drift_verdict, is_relevant=False, fetch_order=order)
    response = HtmlResponse(again.url, request=again)
    page_left_the_pipelines(crawler, order, stored_again, response, refused=True)
    frontier.finish(fp)
    extension.spider_closed(crawler.spider)
    assert journaled_window(jobdir) == [(1, True), (2, True), (4, False)]


def test_a_row_to_be_scored_again_takes_no_place_of_the_window_s_last_rows(tmp_path):
    """Killed with page 3 (refused by the store) between its verdict and its request's finish,
    in a window of 3: its row is no verdict at the resume until the page is scored again.
    Page 4 came first, and the table kept its last 3 rows, page 3's among them: page 1's
    verdict went (below STORE_MIN_RELEVANCE, the store cannot give it back), and the window
    rebuilt after a second kill held 2 verdicts where 3 pages had theirs (a drift stop a page
    late)."""
    jobdir = tmp_path / "job"
    frontier = SqliteFrontier(jobdir / "requests.queue" / FRONTIER_FILE, QueueSpider())

    def page_scored(crawler, order: int, name: str, relevant: bool, finished: bool) -> None:
        request = req(name)  # as FocusedScheduler hands it out
        frontier.start_inflight(name.encode(), request)
        request.meta[INFLIGHT] = name.encode()
        crawler.signals.send_catch_log(drift_verdict, is_relevant=relevant, fetch_order=order)
        response = HtmlResponse(request.url, request=request)
        page_left_the_pipelines(crawler, order, relevant, response, refused=not finished)
        if finished:
            frontier.finish(name.encode())

    crawler, extension = counters_extension(tmp_path, {}, DRIFT_WINDOW=3)
    page_scored(crawler, 1, "one", relevant=False, finished=True)
    page_scored(crawler, 2, "two", relevant=True, finished=True)
    page_scored(crawler, 3, "three", relevant=False, finished=False)  # the kill
    extension.spider_closed(crawler.spider)
    state: dict = {"not_stored": 1}
    recover_state(state, pages_stored([2]), 3, journaled_window(jobdir))
    assert list(state[DRIFT_STATE]) == [False, True]
    crawler, extension = counters_extension(tmp_path, state, DRIFT_WINDOW=3)
    page_scored(crawler, add_to_counter(crawler, "pages"), "four", relevant=True, finished=True)
    extension.spider_closed(crawler.spider)  # killed again, page 3 still queued
    assert journaled_window(jobdir) == [(1, False), (2, True), (3, None), (4, True)]
    state = {"not_stored": 1}
    recover_state(state, pages_stored([2, 4]), 3, journaled_window(jobdir))
    assert list(state[DRIFT_STATE]) == [False, True, True]


def test_a_drift_window_written_before_its_rows_named_requests_is_read_and_goes_on(tmp_path):
    """A JOBDIR whose drift_window table has no fp column: read as it is, then given one."""
    (tmp_path / "job").mkdir()
    with closing(sqlite3.connect(tmp_path / "job" / COUNTERS_FILE)) as conn, conn:
        conn.execute(
            "CREATE TABLE drift_window (fetch_order INTEGER PRIMARY KEY, relevant INTEGER NOT NULL)"
        )
        conn.execute("INSERT INTO drift_window VALUES (1, 1)")
    assert journaled_window(tmp_path / "job") == [(1, True)]
    crawler, extension = counters_extension(tmp_path, {}, DRIFT_WINDOW=3)
    crawler.signals.send_catch_log(drift_verdict, is_relevant=False, fetch_order=2)
    request = req("two", **{INFLIGHT: b"two"})
    response = HtmlResponse(request.url, request=request)
    page_left_the_pipelines(crawler, 2, stored=False, response=response, refused=True)
    extension.spider_closed(crawler.spider)
    assert journaled_window(tmp_path / "job") == [(1, True), (2, False)]


def test_kill_9_then_resume_rebuilds_the_drift_window_from_the_verdicts_written_through(caplog):
    """The store lacks the pages below STORE_MIN_RELEVANCE: the window is the verdicts written
    through, the stored pages' only before them (a window widened at the resume)."""
    stored = [
        {"url": f"http://a/{i}", "is_relevant": True, "fetch_order": i, "duplicate_of": None}
        for i in (1, 2, 3, 6)
    ]
    verdicts = [(4, False), (5, False), (6, True), (7, False)]
    state = {"pages": 2, "not_stored": 3}
    with caplog.at_level(logging.WARNING, logger="focused.resume"):
        recover_state(state, stored, drift_window=4, journaled=verdicts)
    assert state["pages"] == 7
    assert list(state[DRIFT_STATE]) == [False, False, True, False]
    assert not caplog.records  # the window is the file's
    # Widened to 6: the 2 pages before the file's first come from the store, and it says so.
    state = {"pages": 2, "not_stored": 3}
    with caplog.at_level(logging.WARNING, logger="focused.resume"):
        recover_state(state, stored, drift_window=6, journaled=verdicts)
    assert list(state[DRIFT_STATE]) == [True, True, False, False, True, False]
    [said] = [record.getMessage() for record in caplog.records]
    assert said == (
        "The topic-drift window takes 2 pages' verdicts from the store, which lacks the"
        " crawl's 3 pages below STORE_MIN_RELEVANCE: it may look more relevant than the crawl"
        " was, and a drift stop come late"
    )
    # None written (a window given only at this resume): the store's, said so.
    caplog.clear()
    state = {"pages": 2, "not_stored": 3}
    with caplog.at_level(logging.WARNING, logger="focused.resume"):
        recover_state(state, stored, drift_window=4)
    assert list(state[DRIFT_STATE]) == [True, True, True, True]
    assert "takes 4 pages' verdicts from the store" in caplog.records[0].getMessage()


def test_without_jobdir_nothing_is_written(tmp_path):
    with pytest.raises(NotConfigured):
        CrawlCounters.from_crawler(get_crawler())


def test_a_request_whose_response_was_counted_stays_in_flight_marked_after_a_crash(tmp_path):
    """Two requests in flight at a crash, the response to one counted: the other is queued
    again; the counted one stays in flight, marked so that the page budget does not count it
    twice, to be fetched again first, and so after a second crash too."""
    path, spider = tmp_path / FRONTIER_FILE, QueueSpider()
    frontier = SqliteFrontier(path, spider)
    for name in ("first", "counted", "downloading", "last"):
        frontier.start_inflight(name.encode(), req(name))
    for name in ("last", "counted"):
        frontier.mark_counted(name.encode())
    # The process dies: nothing is finished or closed.
    for _ in range(2):
        frontier = SqliteFrontier(path, spider)
        recovered = {fp: request for fp, request, _ in frontier.recover_inflight()}
        counted = frontier.counted_inflight()
    assert recovered == {}  # queued again by the first run
    assert [fp for fp, _ in counted] == [b"counted", b"last"]  # in the order handed out
    assert all(request.meta[RESPONSE_COUNTED] is True for _, request in counted)
    assert set(frontier.fingerprints()) == {b"counted", b"last"}  # the dupefilter's seen


def test_a_queued_request_counted_before_a_crash_keeps_its_mark_when_found_from_a_better_page(
    tmp_path,
):
    """A request fetched again after a crash whose download fails is queued again, marked, as
    its retry (and, in a file of before the requests counted stayed in flight, each one was):
    the resumed crawl may find the URL on a better page, and the better request replaced the
    queued one without its mark: fetched again, its response was counted twice, and the crawl
    stopped that many pages short of its budget (7 of 150 after a kill -9)."""
    queue = make_queue("bestfirst", str(tmp_path / "requests.queue"))
    poor = {"parent_relevance": 0.1, "parent_url": "http://t/poor", RESPONSE_COUNTED: True}
    queue.push(req("x", **poor))
    assert queue.rediscover(req("x", parent_relevance=0.9, parent_url="http://t/rich"))
    again = queue.pop()
    assert again.meta["parent_url"] == "http://t/rich"  # the better path, as ever
    assert again.meta.get(RESPONSE_COUNTED) is True
    # In flight, it keeps the mark: after a crash it is fetched again first, not counted.
    fp = queue.crawler.request_fingerprinter.fingerprint(again)
    queue.frontier.start_inflight(fp, again)
    assert [found for found, _ in queue.frontier.counted_inflight()] == [fp]


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
    recovered = {fp: request for fp, request, _ in frontier.recover_inflight()}
    assert list(recovered) == [b"old"] and RESPONSE_COUNTED not in recovered[b"old"].meta
    assert [fp for fp, _ in frontier.counted_inflight()] == [b"new"]


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


def stored_pages(store) -> int:
    """The pages in the store; 0 while the crawl starting has not made their table yet."""
    with closing(sqlite3.connect(store)) as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'pages'").fetchone() is None:
            return 0
        return conn.execute("SELECT COUNT(*) FROM pages").fetchone()[0]


@pytest.mark.parametrize("left", [1, CONCURRENT], ids=["one-page-left", "pages-left"])
def test_pages_counted_but_not_stored_at_a_kill_at_the_budgets_end_are_fetched_again(
    tmp_path, left
):
    """A crawl killed as its page budget's last responses are counted, their pages not stored
    yet (the store busy). Resumed, it fetches those pages again, uncounted, and stores its whole
    budget: it had closed at once, the budget spent, and those pages were never stored."""
    budget, store, jobdir = 8, tmp_path / "focused.sqlite3", tmp_path / "job"
    stored_before = budget - left
    held = Hold(stored_before)

    def respond(method: str, path: str) -> Reply:
        if method == "GET" and path != "/robots.txt":
            held.wait()
        return tree_site(method, path.replace("/gone/", "/a/"))

    with Site(respond) as site:
        command = jobdir_crawl(site, tmp_path, budget)
        run = start_quietly(command)
        deadline = time.monotonic() + 90
        while not (store.exists() and stored_pages(store) == stored_before):
            assert time.monotonic() < deadline and run.poll() is None, site.log.gets()
            time.sleep(0.05)
        busy = sqlite3.connect(store, isolation_level=None, timeout=30)
        busy.execute("BEGIN EXCLUSIVE")  # the next page's write waits
        held.release()
        with closing(
            sqlite3.connect(jobdir / "requests.queue" / FRONTIER_FILE, timeout=30)
        ) as file:
            # Killed once every response counted is marked: a kill between a count's write and
            # its mark's counts that response twice (focused.stopping), and the crawl stored
            # 7 of its 8 pages, which is not what this test is about.
            while (
                not (owed := counted_in_flight(file)) or responses(jobdir) != stored_before + owed
            ):
                assert time.monotonic() < deadline and run.poll() is None, site.log.gets()
                time.sleep(0.01)
            os.kill(run.pid, signal.SIGKILL)
            run.wait(timeout=30)
            owed = counted_in_flight(file)
        busy.execute("ROLLBACK")
        busy.close()
        assert stored_pages(store) == stored_before
        resumed = subprocess.run(
            command, cwd=REPO, env=crawl_env(), capture_output=True, text=True, timeout=300
        )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert stored_pages(store) == budget, resumed.stderr[-3000:]
    assert f"'focused/resume/counted_refetched': {owed}," in resumed.stderr
    assert responses(jobdir) == budget  # the refetched counted once, and nothing beyond it


def responses(jobdir) -> int:
    """The page budget's count of responses, as written through to the JOBDIR."""
    with closing(sqlite3.connect(jobdir / COUNTERS_FILE, timeout=30)) as counters:
        row = counters.execute("SELECT value FROM counters WHERE name = 'responses'").fetchone()
    return 0 if row is None else row[0]


def counted_in_flight(frontier_file) -> int:
    return frontier_file.execute("SELECT COUNT(*) FROM inflight WHERE counted = 1").fetchone()[0]


def test_requests_counted_before_a_crash_are_handed_out_before_any_other(tmp_path):
    """Queued again in their strategy's order, the requests a crash left in flight with their
    response counted could be passed over until the budget ran out (``bees``, which picks at
    random, stored 118 pages of a budget of 120 after a kill -9): the budget had paid for
    them. They are handed out first, in the order they were before the crash."""
    scheduler, _ = make_scheduler(tmp_path, jobdir=True)
    for name, relevance in (("best", 0.9), ("good", 0.5), ("fair", 0.3), ("poor", 0.1)):
        scheduler.enqueue_request(req(name, parent_relevance=relevance, parent_url="http://t/"))
    out = [scheduler.next_request() for _ in range(3)]
    for request in (out[2], out[0]):
        scheduler._response_counted(request)
    # The process dies; the crawl resumes.
    resumed, crawler = make_scheduler(tmp_path, jobdir=True)
    said = []
    crawler.signals.connect(lambda: said.append(len(resumed)), signal=counted_refetched, weak=False)
    assert len(resumed) == 4
    again = [resumed.next_request() for _ in range(4)]
    assert [request.url for request in again] == [
        f"http://t/{n}" for n in ("best", "fair", "good", "poor")
    ]
    assert [request.meta.get(RESPONSE_COUNTED, False) for request in again] == [
        True,
        True,
        False,
        False,
    ]
    assert said == [2]  # once, as the last of them went
    assert crawler.stats.get_value("focused/resume/counted_refetched") == 2


@pytest.mark.parametrize("strategy", ["bfs", "ucs"])
def test_requests_a_crash_cut_off_keep_their_place_among_equal_scores(tmp_path, strategy):
    """A request in flight at a kill -9 was queued again behind every request of its score:
    bfs fetches the links of a level in discovery order, but fetched those cut off last of
    all, so that a crawl resumed to its budget missed pages an uninterrupted one fetched (a
    kill at page 10 of 30: Bird_migration, the 11th, never fetched). They keep their place."""
    settings = {"SCHEDULER_PRIORITY_QUEUE": STRATEGIES[strategy]}

    def crawl(scheduler, name: str) -> None:  # links of one page: one level, one path cost
        meta = {"depth": 1, "path_cost": 0.5, "parent_url": "http://t/"}
        scheduler.enqueue_request(req(name, **meta))

    def fetch(scheduler, count: int) -> list[str]:
        return [scheduler.next_request().url for _ in range(count)]

    uncut, _ = make_scheduler(tmp_path / "uncut", jobdir=True, **settings)
    killed, _ = make_scheduler(tmp_path, jobdir=True, **settings)
    for scheduler in (uncut, killed):
        for number in range(6):
            crawl(scheduler, f"u{number}")
    in_flight = fetch(killed, 2)
    assert fetch(uncut, 2) == in_flight
    # The process dies with those two in flight; the crawl resumes.
    resumed, crawler = make_scheduler(tmp_path, jobdir=True, **settings)
    assert crawler.stats.get_value("focused/resume/recovered_inflight") == 2
    for scheduler in (uncut, resumed):
        crawl(scheduler, "found_after")
    assert fetch(resumed, 7) == in_flight + fetch(uncut, 5)


def test_a_bees_flight_cut_off_by_a_crash_is_fetched_again_by_no_bee(tmp_path):
    """Fetched again outside the bees' pops, the page is no bee's find: its links would join
    the find of the bee that flew there before the crash, out on another flight by now."""
    scheduler, _ = make_scheduler(
        tmp_path, jobdir=True, SCHEDULER_PRIORITY_QUEUE=STRATEGIES["bees"]
    )
    scheduler.enqueue_request(req("seed"))
    flown = scheduler.next_request()
    assert flown.meta["bee"] == 0
    scheduler._response_counted(flown)
    resumed, _ = make_scheduler(tmp_path, jobdir=True, SCHEDULER_PRIORITY_QUEUE=STRATEGIES["bees"])
    again = resumed.next_request()
    assert again.url == flown.url and "bee" not in again.meta


def test_kill_9_then_resume_watches_the_last_pages_stored_for_drift():
    """After ``kill -9`` the drift window saved at the last clean close is of older pages: the
    stored ones after it are the last scored."""
    state = {"pages": 3, DRIFT_STATE: deque([True, True, True], maxlen=3)}
    relevant = [True, True, True, False, True, False, False]
    pages = [
        {"url": f"http://a/{i}", "is_relevant": r, "fetch_order": i, "duplicate_of": None}
        for i, r in enumerate(relevant, 1)
    ]
    recover_state(state, pages, drift_window=4)
    assert list(state[DRIFT_STATE]) == [False, True, False, False]
    # After a clean pause the saved window is the crawl's: the store adds nothing to it.
    saved = deque([True, False], maxlen=2)
    state = {"pages": 7, DRIFT_STATE: saved}
    recover_state(state, pages, drift_window=2)
    assert state[DRIFT_STATE] is saved
    # Unless the run that saved it watched fewer pages (DRIFT_WINDOW given, or raised, only as
    # the crawl resumes): the store's last pages fill the wider window.
    for state in ({"pages": 7}, {"pages": 7, DRIFT_STATE: saved}):
        recover_state(state, pages, drift_window=4)
        assert list(state[DRIFT_STATE]) == [False, True, False, False]


# Stored URLs, and the host each is counted for (MAX_PAGES_PER_HOST), as the scheduler counts
# its requests (schedulers.base.host_of: the host urlsplit reads).
HOSTS_OF_URLS = [
    ("http://example.org/a", "example.org"),
    ("http://example.org", "example.org"),  # no path
    ("https://EXAMPLE.org:8443/b?c=d#e", "example.org"),  # upper case, a port
    ("http://user:pass@Example.org:80/", "example.org"),  # userinfo
    ("http://u@x.test@y.test/", "y.test"),  # the last @ ends the userinfo
    ("http://[::1]:8080/x", "::1"),  # IPv6 literal
    ("http://[FE80::1%25eTh0]/", "fe80::1%25eTh0"),  # its zone keeps its case
    ("http://münchen.de/", "münchen.de"),  # IDNA, as written
    ("http://xn--mnchen-3ya.DE/", "xn--mnchen-3ya.de"),
    ("http://example.org?q=http://other.test/", "example.org"),  # a query, no path
    ("http://example.org#http://other.test/", "example.org"),  # a fragment, no path
    ("http://example.org/?to=https://other.test/", "example.org"),
    ("HTTP://Example.org./", "example.org."),
    ("  http://Lead.test/", "lead.test"),  # blanks before
    ("http://ta\tb.test/", "tab.test"),  # a tab, which urlsplit drops
    ("//Scheme.relative/x", "scheme.relative"),
    ("http:///only/path", ""),
    ("mailto:a@b.test", ""),
    ("a:b://c.test/d", ""),  # a scheme without //
    ("?x=http://q.test/", ""),
]


def test_kill_9_then_resume_counts_each_hosts_pages_for_the_host_the_crawl_does():
    """A host's stored pages count against MAX_PAGES_PER_HOST for the host its requests are
    counted for: a URL's parse, for each distinct scheme and authority, not each page."""
    pages = [
        {"url": url, "is_relevant": False, "fetch_order": number, "duplicate_of": None}
        for number, (url, _) in enumerate(HOSTS_OF_URLS, 1)
    ]
    state: dict = {}
    recover_state(state, pages)
    assert state["host_pages"] == Counter(host for _, host in HOSTS_OF_URLS)
    assert state["host_pages"] == Counter(urlsplit(url).hostname or "" for url, _ in HOSTS_OF_URLS)


def test_a_resume_counts_the_pages_not_stored_for_their_hosts():
    """The pages below STORE_MIN_RELEVANCE count against MAX_PAGES_PER_HOST as the stored
    ones do, each once."""
    pages = [{"url": "http://a.test/1", "is_relevant": True, "fetch_order": 1}]
    pages[0]["duplicate_of"] = None
    not_stored = ["http://a.test/2", "http://b.test/3", "http://a.test/1"]
    state: dict = {"not_stored": 2}
    recover_state(state, pages, not_stored=not_stored)
    assert state["host_pages"] == Counter({"a.test": 2, "b.test": 1})


def test_kill_9_then_resume_recovers_the_counts_past_a_url_urlsplit_rejects():
    """A stored URL edited by hand into one urlsplit rejects ("http://[x/...") stopped the
    resume's recovery with a traceback, and the crawl went on with its counters as they were
    saved (none after a kill -9): its fetch order counted from 1 again over the stored pages.
    Such a URL is counted for no host: no request has it."""
    urls = ["http://a.test/1", "http://[a.test/2", "http://a.test/3"]
    pages = [
        {"url": url, "is_relevant": True, "fetch_order": number, "duplicate_of": None}
        for number, url in enumerate(urls, 1)
    ]
    state: dict = {}
    recover_state(state, pages)
    assert (state["pages"], state["relevant"]) == (3, 3)
    assert state["fetched_urls"] == set(urls)
    assert state["host_pages"] == Counter({"a.test": 2})


@pytest.mark.parametrize(("rescored", "relevant"), [(0, 2), (-1, 3), (2, 0), (5, 0)])
def test_a_resume_counts_the_crawls_verdicts_not_those_a_recrawl_moved(rescored, relevant):
    """After a kill -9 the relevant pages came back from the stored verdicts, those a --model
    recrawl moved since (the crawl record's count, ``rescored``) taken for the crawl's."""
    pages = [
        {"url": f"http://a.test/{n}", "is_relevant": n < 2, "fetch_order": n + 1}
        | {"duplicate_of": None}
        for n in range(4)
    ]
    state: dict = {}
    recover_state(state, pages, rescored=rescored)
    assert (state["pages"], state["relevant"]) == (4, relevant)


def test_a_resume_counts_the_host_of_any_url_as_urlsplit_reads_it():
    """Whatever a URL holds (edited into the store by hand), its page counts for the host
    urlsplit reads from it, or for none where urlsplit fails on it."""
    pieces = ["http", "HTTPS", "a", ":", "/", "//", "://", "?", "#", "@", "[", "]", "::1", "%"]
    pieces += ["\t", "\n", " ", "\x00", "Host", "ex.COM", "ü", "\u2100", ":80", "+", "a:b"]
    rng = random.Random(7)
    for _ in range(20_000):
        url = "".join(rng.choices(pieces, k=rng.randint(1, 9)))
        pages = [{"url": url, "is_relevant": False, "fetch_order": 1, "duplicate_of": None}]
        try:
            hosts = Counter({urlsplit(url).hostname or "": 1})
        except ValueError:
            hosts = Counter()
        state: dict = {}
        recover_state(state, pages)
        assert state["host_pages"] == hosts, url


def test_a_resume_parses_the_urls_of_a_host_once(monkeypatch):
    """Parsing each stored URL was 40% of a warm resume's read of the store."""
    parsed = []

    def counted(url: str):
        parsed.append(url)
        return urlsplit(url)

    monkeypatch.setattr(resume, "urlsplit", counted)
    pages = [
        {"url": f"http://h{n % 3}.test/p{n}", "is_relevant": False, "fetch_order": n}
        | {"duplicate_of": None}
        for n in range(1, 1001)
    ]
    state: dict = {}
    recover_state(state, pages)
    assert state["host_pages"] == Counter({"h0.test": 333, "h1.test": 334, "h2.test": 333})
    assert len(parsed) == 3


def test_kill_9_then_resume_counts_the_pages_kept_from_the_store(tmp_path):
    """A crawl that stores only its best pages (STORE_MIN_RELEVANCE) has few in the store to
    count from after ``kill -9``: its page and relevant counts started again from what the
    store held, so CLOSESPIDER_RELEVANT let it fetch that many relevant pages again."""
    wanted = 30
    until_killed = Hold(KILL_AFTER)
    with Site(held_until_killed(until_killed), delay=0.05) as site:
        command = jobdir_crawl(
            site,
            tmp_path,
            0,
            STORE_MIN_RELEVANCE=0.999,
            CLOSESPIDER_RELEVANT=wanted,
            SCRAPER_SLOT_MAX_ACTIVE_SIZE=1,
        )
        kill_once_served(site, command, until_killed)
        articles_before_kill = {path for _, path in site.log.gets() if not path.startswith("/g")}
        assert len(articles_before_kill) >= CONCURRENT, articles_before_kill
        resumed = subprocess.run(
            command, cwd=REPO, env=crawl_env(), capture_output=True, text=True, timeout=300
        )
        articles = {path for _, path in site.log.gets() if not path.startswith("/g")}
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Closing spider (closespider_relevant)" in resumed.stderr, resumed.stderr[-3000:]
    relevant = int(re.findall(r"'focused/relevant': (\d+)", resumed.stderr)[-1])
    assert wanted <= relevant <= wanted + CONCURRENT, relevant
    # Every article is relevant: the crawl fetched its 30, give or take the requests under way
    # at the kill (fetched again) and at the stop.
    assert wanted <= len(articles - {"/robots.txt"}) <= wanted + 2 * CONCURRENT, len(articles)
