"""Crash-safe resume: kill -9 a JOBDIR crawl twice, start it again, nothing is lost.

Only the requests in flight at a kill (sent to the server, page not yet stored) may be fetched
twice; every fetched page is stored once; the crawl completes the part of the sample reachable
from the seed.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from datetime import date, timedelta
from xml.etree import ElementTree

import pytest

from focused.replayweb import ReplayServer
from focused.report import describe_time
from focused.resume import COUNTERS_FILE
from tests.conftest import (
    BIRD_QUERY,
    BIRD_SEED,
    REPO,
    Crawl,
    crawl_args,
    crawl_env,
    page_name,
    scrapy_command,
)
from tests.sites import GatedReplay, Hold, Reply, Site, html
from tests.test_crash_counts import jobdir_crawl, start_quietly, stored_pages
from tests.test_redis_frontier import free_port
from tests.test_resume import _crawl_id_of, _reachable

CONCURRENT = 4


def stored_names(db, crawl_id: str) -> set[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT url FROM pages WHERE crawl_id = ?", (crawl_id,)).fetchall()
    return {page_name(url) for (url,) in rows}


def in_flight_names(jobdir, counted: bool = False) -> set[str]:
    """The pages whose requests the frontier file records as in flight; with ``counted``, only
    those whose response the page budget counted."""
    with sqlite3.connect(jobdir / "requests.queue" / "frontier.sqlite3") as conn:
        where = " WHERE counted" if counted else ""
        blobs = conn.execute(f"SELECT request FROM inflight{where}").fetchall()
    return {page_name(pickle.loads(blob)["url"]) for (blob,) in blobs}


def job_command(tmp_path, server, strategy: str, **settings) -> list[str]:
    """The command of a bird crawl of the sample with JOBDIR ``tmp_path/job`` and the store
    ``tmp_path/focused.sqlite3``, run again unchanged to resume."""
    arguments = {
        "strategy": strategy,
        "query": BIRD_QUERY,
        "seeds": f"{server.url}/wiki/{BIRD_SEED}",
    }
    base = {
        "FOCUSED_DB": tmp_path / "focused.sqlite3",
        "JOBDIR": tmp_path / "job",
        "CONCURRENT_REQUESTS": CONCURRENT,
        "FOCUSED_LOGSTATS_INTERVAL": 0,
        "LOG_LEVEL": "INFO",
    }
    return scrapy_command(*crawl_args(arguments, base | settings))


def start_until_fetched(command, server, count: int, stderr=subprocess.DEVNULL) -> subprocess.Popen:
    """Start the crawl; return it once the server has answered ``count`` requests."""
    run = subprocess.Popen(
        command, cwd=REPO, env=crawl_env(), stdout=subprocess.DEVNULL, stderr=stderr
    )
    deadline = time.monotonic() + 90
    while len(server.fetched) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(server.fetched) >= count, "the crawl did not get going"
    return run


def kill_9_once_fetched(command, server, count: int) -> None:
    """Start the crawl and kill it with SIGKILL once the server has answered ``count``
    requests."""
    run = start_until_fetched(command, server, count)
    os.kill(run.pid, signal.SIGKILL)
    run.wait(timeout=30)


def run_to_the_end(command) -> subprocess.CompletedProcess:
    """Run the crawl (a resume) to its end, its log captured."""
    return subprocess.run(
        command, cwd=REPO, env=crawl_env(), capture_output=True, text=True, timeout=300
    )


def test_kill_9_twice_then_resume_loses_nothing(tmp_path, sample_graph):
    server = ReplayServer(sample_graph, delay=0.03).start()
    db = tmp_path / "focused.sqlite3"
    jobdir = tmp_path / "job"
    # SCRAPER_SLOT_MAX_ACTIVE_SIZE=1: no request is popped while a response waits for the
    # spider, so that at most CONCURRENT_REQUESTS + 1 requests are in flight at any time
    # (by default Scrapy lets up to 5 MB of responses wait).
    command = job_command(
        tmp_path, server, "bestfirst", RELEVANCE_REFIT_EVERY=30, SCRAPER_SLOT_MAX_ACTIVE_SIZE=1
    )
    in_flight_at_kills: list[set[str]] = []
    try:
        for kill_after in (40, 110):
            kill_9_once_fetched(command, server, kill_after)
            crawl_id = json.loads((jobdir / "focused.json").read_text())["crawl_id"]
            requested = {page_name(p) for p in server.fetched if p.startswith("/wiki/")}
            in_flight = in_flight_names(jobdir)
            # Nothing requested is lost: stored, or still in flight (to be fetched again).
            assert requested - stored_names(db, crawl_id) <= in_flight
            in_flight_at_kills.append(in_flight)
        final = run_to_the_end(command)
        assert final.returncode == 0, final.stderr[-3000:]
    finally:
        server.stop()

    assert all(len(in_flight) <= CONCURRENT + 1 for in_flight in in_flight_at_kills), (
        in_flight_at_kills
    )
    counts = Counter(page_name(p) for p in server.fetched if p.startswith("/wiki/"))
    refetched = {name for name, n in counts.items() if n > 1}
    assert max(counts.values()) <= 2, counts.most_common(3)
    assert refetched <= set().union(*in_flight_at_kills), refetched

    crawl = Crawl(final, db, crawl_id)
    pages = crawl.pages()
    names = [page_name(p["url"]) for p in pages]
    assert len(names) == len(set(names))  # one record per (crawl_id, url)
    assert set(names) == set(counts)  # every fetched page is stored
    orders = [p["fetch_order"] for p in pages]
    assert len(orders) == len(set(orders)) and None not in orders
    assert set(names) == _reachable(sample_graph, BIRD_SEED)  # the crawl completed
    record = crawl.crawl_record()
    assert record["status"] == "finished"
    assert "recovered_inflight" in final.stderr or not in_flight_at_kills[-1], final.stderr[-3000:]


def test_store_locked_mid_crawl_stops_with_an_error_and_resume_loses_nothing(
    tmp_path, sample_graph
):
    """Another process takes the SQLite store's write lock mid-crawl: the writes are retried,
    the crawl stops (store_unreachable, exit status 1) with the error in its log; resumed once
    the store is free, it stores every page it fetched."""
    # The articles beyond the first 30 wait for the lock: the crawl still has pages to store
    # however late the lock comes (30 s were enough to finish the sample).
    server = GatedReplay(sample_graph, Hold(30), BIRD_SEED, delay=0.03).start()
    db = tmp_path / "focused.sqlite3"
    jobdir = tmp_path / "job"
    # Each write waits out the lock for FOCUSED_DB_TIMEOUT before it fails: 0.5 s, not 5.
    command = job_command(
        tmp_path,
        server,
        "bfs",
        STORAGE_RETRIES=1,
        STORAGE_RETRY_DELAY=0.1,
        FOCUSED_DB_TIMEOUT=0.5,
    )
    try:
        run = start_until_fetched(command, server, 30, stderr=subprocess.PIPE)
        locker = sqlite3.connect(db, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")  # a real writer holding the lock: writes time out
        server.gate.release()
        try:
            _, stderr = run.communicate(timeout=120)
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        crawl_id = json.loads((jobdir / "focused.json").read_text())["crawl_id"]
        stopped_at = len(stored_names(db, crawl_id))
        resumed = run_to_the_end(command)
    finally:
        server.stop()

    stderr = stderr.decode()
    assert run.returncode == 1, stderr[-3000:]
    assert "database is locked; retry 1 of 1" in stderr
    assert "closing the spider (store_unreachable)" in stderr
    # never silent, however many were buffered (one: "1 page record of crawl ... was not")
    assert re.search(r"page records? of crawl \S+ (was|were) not stored", stderr), stderr[-3000:]
    assert "store_unreachable" in stderr
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    counts = Counter(page_name(p) for p in server.fetched if p.startswith("/wiki/"))
    pages = Crawl(resumed, db, crawl_id).pages()
    assert stopped_at < len(pages)
    assert (
        {page_name(p["url"]) for p in pages} == set(counts) == _reachable(sample_graph, BIRD_SEED)
    )
    assert Crawl(resumed, db, crawl_id).crawl_record()["status"] == "finished"


def test_kill_9_then_resume_stops_at_the_crawls_page_budget(tmp_path, sample_graph):
    """The budget is the crawl's: after kill -9 its count comes back from the store."""
    server = ReplayServer(sample_graph, delay=0.03).start()
    budget = 45
    command = job_command(
        tmp_path,
        server,
        "bestfirst",
        CLOSESPIDER_PAGECOUNT=budget,
        SCRAPER_SLOT_MAX_ACTIVE_SIZE=1,  # at most CONCURRENT + 1 in flight, as above
    )
    try:
        kill_9_once_fetched(command, server, 25)
        final = run_to_the_end(command)
        assert final.returncode == 0, final.stderr[-3000:]
    finally:
        server.stop()
    assert "closespider_pagecount" in final.stderr, final.stderr[-3000:]
    pages = {page_name(p) for p in server.fetched if p.startswith("/wiki/")}
    # Every response is counted once, one fetched again after the kill too, but for a kill
    # between its count's write and its mark's (focused.stopping). Pages served at the kill
    # whose responses never reached the crawl may stay queued when the budget is spent: at
    # most CONCURRENT - 1 beyond it. Counted per run, the crawl would fetch `budget` more.
    assert budget - 1 <= len(pages) <= budget + CONCURRENT - 1, len(pages)


# A chain of pages, each linking to the next: the first DRIFT_BIRDS about birds, the rest not.
DRIFT_BIRDS = 5


def drifting_chain(hold: Hold, canonical: int = 0) -> Callable[[str, str], Reply]:
    """``/`` (page 1) links to ``/p/2``, which links to ``/p/3``...; the GETs beyond the
    ``hold``'s free ones wait for its release. Page ``canonical`` (none: 0) names ``/c/N`` its
    rel=canonical, a URL nothing links to."""

    def respond(method: str, path: str) -> Reply:
        found = re.fullmatch(r"/(?:p/(\d+))?", path)
        if found is None:
            return Reply(status=404, body="not found")
        if method == "GET":
            hold.wait()
        n = int(found[1] or 1)
        if n <= DRIFT_BIRDS:
            text = f"Birds {n}: the nesting birds of the marsh, their feathers, wings and eggs."
        else:
            text = f"Ledger {n}: quarterly tax invoices, spreadsheet totals and payroll audits."
        head = f'<link rel="canonical" href="/c/{n}">' if n == canonical else ""
        body = f'<p>{text}</p><a href="/p/{n + 1}">next</a>'
        return Reply(body=html(f"Page {n}", body, head))

    return respond


def counter(jobdir, name: str) -> int:
    """The crawl counter ``name`` written through to the JOBDIR (0 before the crawl made it)."""
    if not (jobdir / COUNTERS_FILE).exists():
        return 0
    with contextlib.closing(sqlite3.connect(jobdir / COUNTERS_FILE)) as conn:
        try:
            row = conn.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()
        except sqlite3.OperationalError:  # no table yet
            return 0
    return row[0] if row else 0


def kill_9_once_not_stored(command, jobdir, hold: Hold, count: int) -> None:
    """Start the crawl, kill it with SIGKILL once ``count`` pages below STORE_MIN_RELEVANCE
    were counted (every page the site served scored, and its outcome safe: stored, or counted
    apart), then let the page ``hold`` keeps waiting go."""
    run = start_quietly(command)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if counter(jobdir, "not_stored") == count:
            break
        time.sleep(0.01)
    os.kill(run.pid, signal.SIGKILL)
    run.wait(timeout=30)
    hold.release()
    assert counter(jobdir, "not_stored") == count


def test_kill_9_then_resume_watches_the_pages_not_stored_for_drift(tmp_path):
    """A crawl keeping only its relevant pages (STORE_MIN_RELEVANCE) has only those in the
    store: after kill -9 the drift window, rebuilt from it, held only relevant pages, and the
    crawl that had all but drifted at the kill fetched 7 pages more than one never killed."""
    window, kill_after = 10, 12
    # Pages 1-5 relevant, 6-12 not: 3 in the last 10 at the kill, 2 once page 13 comes.
    hold = Hold(kill_after)
    with Site(drifting_chain(hold)) as site:
        command = jobdir_crawl(
            site,
            tmp_path,
            0,
            CONCURRENT_REQUESTS=1,
            DRIFT_WINDOW=window,
            DRIFT_MIN_HARVEST=0.3,
            STORE_MIN_RELEVANCE=0.15,  # RELEVANCE_THRESHOLD: the relevant pages stored only
        )
        jobdir = tmp_path / "job"
        kill_9_once_not_stored(command, jobdir, hold, kill_after - DRIFT_BIRDS)
        resumed = run_to_the_end(command)
    crawl_id = json.loads((jobdir / "focused.json").read_text())["crawl_id"]
    crawl = Crawl(resumed, tmp_path / "focused.sqlite3", crawl_id)
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert [page["fetch_order"] for page in crawl.pages()] == list(range(1, DRIFT_BIRDS + 1))
    record = crawl.crawl_record()
    # It stops where a crawl never killed does: at the first page whose last 10 drifted.
    assert (record["finish_reason"], record["pages"]) == ("closespider_drift", kill_after + 1)
    assert "harvest rate 0.200 over the last 10 pages" in crawl.result.stderr


def test_kill_9_then_resume_counts_the_pages_not_stored_against_their_host_s_cap(tmp_path):
    """A crawl keeping only its relevant pages (STORE_MIN_RELEVANCE) took its host's pages
    back from the store after kill -9, which lacks the pages below it: the host got as many
    pages again past MAX_PAGES_PER_HOST (14 of a cap of 10 here). A crawl never killed
    fetches pages 1 to 10 of the chain and runs dry."""
    cap, kill_after = 10, 9
    hold = Hold(kill_after)  # page 10 waits for the kill
    with Site(drifting_chain(hold)) as site:
        command = jobdir_crawl(
            site,
            tmp_path,
            0,
            CONCURRENT_REQUESTS=1,
            MAX_PAGES_PER_HOST=cap,
            STORE_MIN_RELEVANCE=0.15,  # RELEVANCE_THRESHOLD: the relevant pages stored only
        )
        jobdir = tmp_path / "job"
        kill_9_once_not_stored(command, jobdir, hold, kill_after - DRIFT_BIRDS)
        resumed = run_to_the_end(command)
        served = {path for _, path in site.log.gets()} - {"/robots.txt"}
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert served == {"/"} | {f"/p/{n}" for n in range(2, cap + 1)}, sorted(served)
    crawl_id = json.loads((jobdir / "focused.json").read_text())["crawl_id"]
    record = Crawl(resumed, tmp_path / "focused.sqlite3", crawl_id).crawl_record()
    assert record["pages"] == cap


def late_birds(method: str, path: str) -> Reply:
    """``/`` (birds) links first to two slow bird pages, then to ledger pages: the ledger
    pages drift the crawl while the bird pages are still coming."""
    if path == "/":
        links = "".join(f'<a href="/{name}">{name}</a>' for name in LATE_BIRDS_LINKS)
        return Reply(body=html("Birds", f"<p>{BIRD_TEXT}</p>{links}"))
    name = path.lstrip("/")
    if name not in LATE_BIRDS_LINKS:
        return Reply(status=404, body="not found")
    if name.startswith("bird"):
        if method == "GET":
            time.sleep(3)  # scored after the drift stop, as the crawl closes
        return Reply(body=html(name, f"<p>{BIRD_TEXT}</p>"))
    return Reply(body=html(name, "<p>Ledger: quarterly tax invoices, payroll audits.</p>"))


BIRD_TEXT = "Birds: the nesting birds of the marsh, their feathers, wings and eggs."
LATE_BIRDS_LINKS = ("bird1", "bird2", "l1", "l2", "l3", "l4", "l5", "l6")


def test_a_crawl_that_drifted_resumed_after_its_pages_in_flight_came_closes_at_once(tmp_path):
    """The pages under way at a drift stop are scored as the crawl closes, after the stop,
    outside its window: written through all the same, they made the window of the resume, one
    that had not drifted (2 of the last 4 relevant), and the crawl fetched on."""
    with Site(late_birds) as site:
        command = jobdir_crawl(
            site, tmp_path, 0, CONCURRENT_REQUESTS=3, DRIFT_WINDOW=4, DRIFT_MIN_HARVEST=0.5
        )
        first = run_to_the_end(command)
        assert first.returncode == 0, first.stderr[-3000:]
        assert "Closing spider (closespider_drift)" in first.stderr, first.stderr[-3000:]
        served = [path for _, path in site.log.gets()]
        assert {"/bird1", "/bird2"} <= set(served), served
        resumed = run_to_the_end(command)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Spider closed (closespider_drift)" in resumed.stderr, resumed.stderr[-3000:]
    assert [path for _, path in site.log.gets()] == served


KILL_AT_PAGE = "tests.user_components.KillAtPageDone"


def start_killed_at_page(site: Site, tmp_path, path: str, **settings) -> subprocess.Popen:
    """Start a ``jobdir_crawl`` of ``site`` that kills itself as the page whose URL ends with
    ``path`` has left the item pipelines, its verdict written through and its request not
    yet finished."""
    command = jobdir_crawl(
        site,
        tmp_path,
        0,
        **settings,
        EXTENSIONS=json.dumps({KILL_AT_PAGE: 900}),  # after focused.resume.CrawlCounters
        TEST_KILL_AT_PAGE=path,
    )
    return start_quietly(command)


def killed_at_page(site: Site, tmp_path, path: str, **settings) -> None:
    run = start_killed_at_page(site, tmp_path, path, **settings)
    assert run.wait(timeout=90) == -signal.SIGKILL


@pytest.mark.parametrize("canonical", [0, 7], ids=["own-url", "rel-canonical"])
def test_kill_9_between_a_page_s_verdict_and_its_request_s_finish_counts_the_page_once(
    tmp_path, canonical
):
    """A crawl keeping its relevant pages only (STORE_MIN_RELEVANCE), killed after page 7's
    outcome was written through (counted not stored, its verdict) and before its request was
    finished: page 7, fetched again after the resume, was scored and counted again. Its
    verdict was twice in the window (3 of the last 4 off the topic where 2 of 4 pages were),
    or, counted again after the window rebuilt, the fetch order went a page past where a crawl
    never killed stops: at page 8, 1 of its last 4 relevant. Now it is skipped as fetched."""
    window = {
        "CONCURRENT_REQUESTS": 1,
        "DRIFT_WINDOW": 4,
        "DRIFT_MIN_HARVEST": 0.5,
        "STORE_MIN_RELEVANCE": 0.15,  # RELEVANCE_THRESHOLD: the relevant pages stored only
    }
    hold = Hold(7)  # page 8 waits for the kill
    with Site(drifting_chain(hold, canonical)) as site:
        killed_at_page(site, tmp_path, "/c/7" if canonical else "/p/7", **window)
        assert counter(tmp_path / "job", "not_stored") == 2  # pages 6 and 7
        hold.release()
        resumed = run_to_the_end(jobdir_crawl(site, tmp_path, 0, **window))
        served = [path for _, path in site.log.gets()]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Closing spider (closespider_drift)" in resumed.stderr, resumed.stderr[-3000:]
    assert served.count("/p/7") == 2 and "/p/8" in served, served
    # Pages 5 to 8, each once, under the fetch orders of a crawl never killed.
    with contextlib.closing(sqlite3.connect(tmp_path / "job" / COUNTERS_FILE)) as conn:
        rows = conn.execute("SELECT fetch_order, relevant FROM drift_window ORDER BY fetch_order")
        assert rows.fetchall() == [(5, 1), (6, 0), (7, 0), (8, 0)]
    assert counter(tmp_path / "job", "not_stored") == 3  # pages 6, 7 and 8
    crawl_id = json.loads((tmp_path / "job" / "focused.json").read_text())["crawl_id"]
    record = Crawl(resumed, tmp_path / "focused.sqlite3", crawl_id).crawl_record()
    assert record["pages"] == 8


def test_kill_9_between_a_stored_page_s_write_and_its_request_s_finish_stores_it_once(tmp_path):
    """Page 3, stored under its rel=canonical /c/3, killed after it left the pipelines and
    before its request was finished: fetched again at /p/3 after the resume, it was taken for
    a duplicate of /c/3, itself, and stored a second time (the store gave back the URL it is
    stored under, not the one it was fetched at). The pair is kept before the store's write
    (``focused.resume.stored_under_canonical``): /p/3 is skipped as fetched."""
    settings = {"CONCURRENT_REQUESTS": 1, "CLOSESPIDER_PAGECOUNT": 6}
    hold = Hold(3)  # page 4 waits for the kill
    with Site(drifting_chain(hold, canonical=3)) as site:
        killed_at_page(site, tmp_path, "/c/3", **settings)
        hold.release()
        resumed = run_to_the_end(jobdir_crawl(site, tmp_path, 6, **settings))
        served = [path for _, path in site.log.gets()]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert served.count("/p/3") == 2, served
    crawl_id = json.loads((tmp_path / "job" / "focused.json").read_text())["crawl_id"]
    pages = Crawl(resumed, tmp_path / "focused.sqlite3", crawl_id).pages()
    stored = [(page["url"].removeprefix(site.url), page["duplicate_of"]) for page in pages]
    assert stored == [
        ("/", None),
        ("/p/2", None),
        ("/c/3", None),
        ("/p/4", None),
        ("/p/5", None),
        ("/p/6", None),
    ]


def test_kill_9_between_a_stored_page_s_write_and_its_request_s_finish_takes_one_host_slot(
    tmp_path,
):
    """Page 3, stored, killed before its request was finished: fetched again after the resume
    and skipped, it took its host's slot (MAX_PAGES_PER_HOST) twice, once in the store's count
    and once as fetched again, and the crawl stopped at page 5 where one never killed fetches
    6 pages of its cap of 6."""
    settings = {"CONCURRENT_REQUESTS": 1, "MAX_PAGES_PER_HOST": 6}
    hold = Hold(3)  # page 4 waits for the kill
    with Site(drifting_chain(hold)) as site:
        killed_at_page(site, tmp_path, "/p/3", **settings)
        hold.release()
        resumed = run_to_the_end(jobdir_crawl(site, tmp_path, 0, **settings))
        served = [path for _, path in site.log.gets() if path != "/robots.txt"]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert served.count("/p/3") == 2, served
    assert set(served) == {"/"} | {f"/p/{n}" for n in range(2, 7)}, served


def test_a_second_kill_after_fetch_orders_were_reused_loses_no_verdict(tmp_path):
    """Killed with page 5 held in the pipelines (a slow store) and page 6, below
    STORE_MIN_RELEVANCE, out of them, its verdict written under order 6: the resume's fetch
    order went on from 5 (4 pages stored, 1 not), page 5 fetched again took order 6, and its
    row replaced page 6's. Killed again, the window rebuilt lacked page 6's verdict, and the
    crawl fetched page 14 before it drifted, where one never killed stops at page 13 (2 of
    its last 10 relevant)."""
    window = {
        "CONCURRENT_REQUESTS": 1,
        "DRIFT_WINDOW": 10,
        "DRIFT_MIN_HARVEST": 0.3,
        "STORE_MIN_RELEVANCE": 0.15,  # RELEVANCE_THRESHOLD: the relevant pages stored only
        "TEST_KILL_ONCE_DONE": True,  # each killed page's request finished: none scored again
    }
    slow = {
        "ITEM_PIPELINES": json.dumps(
            {
                "pipelines.relevance.RelevancePipeline": 300,
                "tests.user_components.SlowPagePipeline": 500,
                "pipelines.storage.StoragePipeline": 800,
            }
        ),
        "TEST_SLOW_PAGE": "/p/5",
    }
    with Site(drifting_chain(Hold(1000))) as site:
        killed_at_page(site, tmp_path, "/p/6", **window, **slow)
        assert stored_pages(tmp_path / "focused.sqlite3") == 4
        assert counter(tmp_path / "job", "not_stored") == 1  # page 6
        killed_at_page(site, tmp_path, "/p/7", **window)  # page 5 fetched again, then 7
        resumed = run_to_the_end(jobdir_crawl(site, tmp_path, 0, **window))
        served = [path for _, path in site.log.gets()]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "harvest rate 0.200 over the last 10 pages" in resumed.stderr, resumed.stderr[-3000:]
    assert "/p/13" in served and "/p/14" not in served, served


def test_kill_9_with_pages_counted_but_not_stored_then_resume_stores_the_whole_budget(
    tmp_path, sample_graph
):
    """Pages whose responses the budget counted wait for the store (another process holds its
    write lock) when the crawl is killed; fetched again after the resume, they are not counted
    again, and the crawl stores exactly its budget. Counted twice, it stopped that many pages
    short of it."""
    server = ReplayServer(sample_graph, delay=0.03).start()
    budget = 40
    db, jobdir = tmp_path / "focused.sqlite3", tmp_path / "job"
    # The store's writes wait out the lock (SQLite is written on the reactor thread).
    command = job_command(
        tmp_path, server, "bfs", CLOSESPIDER_PAGECOUNT=budget, FOCUSED_DB_TIMEOUT=60
    )
    try:
        run = start_until_fetched(command, server, 12)
        locker = sqlite3.connect(db, isolation_level=None, timeout=30)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            time.sleep(1.5)  # the crawl's next write now waits for the lock
            os.kill(run.pid, signal.SIGKILL)
            run.wait(timeout=30)
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        # All read after the kill, when nothing changes them any more: the count read before
        # it could miss a response counted just before the kill. A page stored just before the
        # lock can still be in flight, marked (its request finishes after the store's write):
        # only the marked pages not stored are counted responses that the store lacks.
        crawl_id = json.loads((jobdir / "focused.json").read_text())["crawl_id"]
        stored_at_kill = stored_names(db, crawl_id)
        stored = len(stored_at_kill)
        with sqlite3.connect(jobdir / COUNTERS_FILE) as counters:
            (counted,) = counters.execute(
                "SELECT value FROM counters WHERE name = 'responses'"
            ).fetchone()
        marked = len(in_flight_names(jobdir, counted=True) - stored_at_kill)
        final = run_to_the_end(command)
    finally:
        server.stop()
    assert final.returncode == 0, final.stderr[-3000:]
    assert "closespider_pagecount" in final.stderr, final.stderr[-3000:]
    # The case this is about: responses counted whose pages were not stored at the kill.
    assert counted > stored and marked == counted - stored, (counted, stored, marked)
    assert stored < budget
    assert len(stored_names(db, crawl_id)) == budget


def test_a_frontier_lost_after_kill_9_is_refused_not_crawled_from_nothing(tmp_path, sample_graph):
    """No pause had saved the queue's state, the only sign the frontier file was looked for
    by: with it deleted, the resume began an empty frontier whose seeds the store knew as
    fetched, and ended "finished" at once, the crawl's queued requests lost without a word."""
    server = ReplayServer(sample_graph, delay=0.03).start()
    command = job_command(tmp_path, server, "bestfirst", CLOSESPIDER_PAGECOUNT=200)
    try:
        kill_9_once_fetched(command, server, 10)
        queue = tmp_path / "job" / "requests.queue"
        for path in queue.glob("frontier.sqlite3*"):
            path.unlink()
        final = run_to_the_end(command)
    finally:
        server.stop()
    assert final.returncode == 2, final.stderr[-3000:]
    assert final.stderr.endswith(
        "requests.queue/frontier.sqlite3 cannot be read (it is missing); use a new JOBDIR\n"
    ), final.stderr[-3000:]


def test_kill_9_then_resume_keeps_the_seeds_in_the_topic(tmp_path, sample_graph):
    """A seed page's text joins the topic. After kill -9 no model was saved and the seed is not
    fetched again: its text comes back from JOBDIR/topic.jsonl, and the model the resumed run
    saves at its close holds it. (Without it the topic was the query alone, and the resumed
    crawl found a third of the relevant pages a clean pause gives.)"""
    from focused.relevance import RelevanceModel

    server = ReplayServer(sample_graph, delay=0.03).start()
    command = job_command(tmp_path, server, "bfs", CLOSESPIDER_PAGECOUNT=30)
    try:
        kill_9_once_fetched(command, server, 15)
        assert not (tmp_path / "job" / "relevance").exists()  # nothing saved by the kill
        final = run_to_the_end(command)
        assert final.returncode == 0, final.stderr[-3000:]
    finally:
        server.stop()
    seed = f"/wiki/{BIRD_SEED}"
    assert server.fetched.count(seed) == 1, "the seed is fetched by the killed run only"
    assert "'focused/resume/topic_texts_restored': 1" in final.stderr, final.stderr[-3000:]
    model = RelevanceModel.load(tmp_path / "job" / "relevance")
    assert model.topic_texts == 1
    # The seed was scored before it joined the topic; in the topic, it is far closer to it.
    with sqlite3.connect(tmp_path / "focused.sqlite3") as conn:
        (text, relevance), *_ = conn.execute(
            "SELECT text, relevance FROM pages WHERE level = 0"
        ).fetchall()
    assert model.score(text).combined > relevance + 0.2, relevance


def test_kill_9_then_resume_relearns_the_pages_stored_before_the_kill(tmp_path, sample_graph):
    """The relevance model is saved only on a clean close. After kill -9 the resumed run must
    learn from the pages stored before the kill, as the crawl's model had: refit on the pages
    after the resume alone, its LSI space was that of wherever the crawl had drifted (a
    2,000-page bird crawl of the full graph judged 34 pages relevant after the resume, most of
    them herbs and spices, against 7 after a clean pause)."""
    from focused.relevance import RelevanceModel

    server = ReplayServer(sample_graph, delay=0.03).start()
    command = job_command(tmp_path, server, "bfs", CLOSESPIDER_PAGECOUNT=70)
    try:
        kill_9_once_fetched(command, server, 40)
        assert not (tmp_path / "job" / "relevance").exists()  # nothing saved by the kill
        with sqlite3.connect(tmp_path / "focused.sqlite3") as conn:
            before = conn.execute("SELECT text, language FROM pages WHERE text != ''").fetchall()
        final = run_to_the_end(command)
        assert final.returncode == 0, final.stderr[-3000:]
    finally:
        server.stop()
    assert len(before) >= 30, len(before)
    assert f"'focused/resume/pages_relearned': {len(before)}" in final.stderr, final.stderr[-3000:]
    model = RelevanceModel.load(tmp_path / "job" / "relevance")
    learned = set(model._buffer)
    for text, language in before:
        tokens = model.page_tokens(text, language)
        assert " ".join(tokens[: model.fit_tokens]) in learned


TRAP_CAP = 3
ARTICLES = 30


def calendar_site(method: str, path: str) -> Reply:
    """Articles about birds, each linking to a day of an endless calendar (one trap family,
    ``/cal/#``), whose days link to the next and the previous day."""
    if path == "/":
        links = "".join(f'<a href="/article/{i}">birds {i}</a> ' for i in range(ARTICLES))
        return Reply(body=html("Birds", f"<p>Birds of the marsh.</p>{links}"))
    if match := re.fullmatch(r"/article/(\d+)", path):
        i = int(match[1])
        text = f"<p>Birds: article {i} on the nesting birds of the marsh.</p>"
        day = f'<a href="/cal/2026/11/{i % 28 + 1:02d}">bird events</a>'
        return Reply(body=html(f"Article {i}", text + day))
    if match := re.fullmatch(r"/cal/(\d+)/(\d+)/(\d+)", path):
        day = date(*map(int, match.groups()))
        links = "".join(
            f'<a href="/cal/{other:%Y/%m/%d}">bird events</a>'
            for other in (day + timedelta(1), day - timedelta(1))
        )
        return Reply(body=html("Calendar", f"<p>Bird events: none.</p>{links}"))
    return Reply(status=404, body="not found")


def test_kill_9_after_the_trap_cap_then_resume_keeps_the_cap(tmp_path):
    """The trap-family counts are written through under JOBDIR: a crawl killed once its trap
    family is full, then resumed, queues no more of the family than TRAP_MAX_PER_FAMILY in all
    (with the counts of the last clean close, the resumed run would take the cap again from
    the links of the calendar pages it fetches)."""
    log = tmp_path / "killed.log"
    until_killed = Hold()

    def respond(method: str, path: str) -> Reply:
        # The killed run's calendar pages wait for the kill, so the resumed run fetches the
        # calendar however late the kill comes after the cap (once 3 s were enough to fetch it).
        if path.startswith("/cal/"):
            until_killed.wait()
        return calendar_site(method, path)

    with Site(respond, delay=0.05) as site:
        arguments = {"strategy": "bestfirst", "query": "birds", "seeds": f"{site.url}/"}
        settings = {
            "FOCUSED_DB": tmp_path / "focused.sqlite3",
            "JOBDIR": tmp_path / "job",
            "CONCURRENT_REQUESTS": 2,
            "TRAP_MAX_PER_FAMILY": TRAP_CAP,
            "CLOSESPIDER_PAGECOUNT": 200,  # a bound, should the cap not hold
            "FOCUSED_LOGSTATS_INTERVAL": 0,
            "LOG_LEVEL": "INFO",
        }
        command = scrapy_command(*crawl_args(arguments, settings))
        with log.open("wb") as stderr:
            run = subprocess.Popen(
                command, cwd=REPO, env=crawl_env(), stdout=subprocess.DEVNULL, stderr=stderr
            )
            deadline = time.monotonic() + 90
            while b"Trap family" not in log.read_bytes() and time.monotonic() < deadline:
                time.sleep(0.01)
            os.kill(run.pid, signal.SIGKILL)
            run.wait(timeout=30)
            until_killed.release()
        assert b"Trap family" in log.read_bytes(), "the cap was never reached"
        before_kill = len(site.log.gets())
        final = run_to_the_end(command)
        paths = [path for _, path in site.log.gets()]
    assert final.returncode == 0, final.stderr[-3000:]
    calendar = {path for path in paths if path.startswith("/cal/")}
    resumed_calendar = {path for path in paths[before_kill:] if path.startswith("/cal/")}
    # The resumed run fetched calendar pages, so their links to other days were offered to it.
    assert resumed_calendar, "no calendar page after the kill: the test would prove nothing"
    assert {p for p in paths if p.startswith("/article/")} == {
        f"/article/{i}" for i in range(ARTICLES)
    }
    assert len(calendar) <= TRAP_CAP, sorted(calendar)
    assert "focused/trap/dropped" in final.stderr


def test_a_forced_stop_exits_non_zero_is_recorded_and_resumes(tmp_path, sample_graph):
    """A second Ctrl-C stops the crawl uncleanly (Scrapy stops the reactor without closing the
    spider): it exited 0, as if the crawl had ended, and its record stayed ``running``. It is a
    crash, resumed like one."""
    server = ReplayServer(sample_graph, delay=0.2).start()
    command = job_command(tmp_path, server, "bfs", CLOSESPIDER_PAGECOUNT=30)
    try:
        run = start_until_fetched(command, server, 8, stderr=subprocess.PIPE)
        run.send_signal(signal.SIGINT)
        time.sleep(0.05)
        run.send_signal(signal.SIGINT)
        _, stderr = run.communicate(timeout=120)
        assert b"forcing unclean shutdown" in stderr, stderr[-3000:]
        assert run.returncode == 1, stderr[-3000:]
        stopped = Crawl(None, tmp_path / "focused.sqlite3", _crawl_id_of(tmp_path / "job"))
        record = stopped.crawl_record()
        assert (record["status"], record["finish_reason"]) == ("interrupted", "forced_shutdown")
        # Its counts so far: a page scored at the stop may not be stored yet.
        stored = len(stopped.pages())
        assert stored > 0
        assert stored <= record["pages"] <= stored + CONCURRENT
        assert record["finished_at"] > record["started_at"]
        resumed = run_to_the_end(command)
    finally:
        server.stop()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resuming crawl" in resumed.stderr


def stopped_by_a_second_ctrl_c(command, server, count: int) -> bytes:
    """The crawl's stderr, stopped by a second Ctrl-C once the server has answered ``count``
    requests (the server stopped then too)."""
    try:
        run = start_until_fetched(command, server, count, stderr=subprocess.PIPE)
        run.send_signal(signal.SIGINT)
        time.sleep(0.05)
        run.send_signal(signal.SIGINT)
        _, stderr = run.communicate(timeout=120)
    finally:
        server.stop()
    assert b"forcing unclean shutdown" in stderr, stderr[-3000:]
    return stderr


def test_a_forced_stop_ends_the_feeds_it_was_writing(tmp_path, sample_graph):
    """A second Ctrl-C left a JSON feed without its closing bracket and an XML one without its
    root's end tag, neither readable, and said nothing: each now ends with the pages it got. A
    feed to upload (FTP, S3) cannot be, and was skipped in silence: each is said."""
    server = ReplayServer(sample_graph, delay=0.2).start()
    feeds = {"json": tmp_path / "pages.json", "xml": tmp_path / "pages.xml"}
    uris = {str(path): {"format": name} for name, path in feeds.items()}
    # Uploaded only as the crawl closes: nothing needs to listen there.
    ftp = f"ftp://alice:s3cret@127.0.0.1:{free_port()}/pages.jsonl"
    uris[ftp] = {"format": "jsonlines"}
    command = job_command(tmp_path, server, "bfs", CLOSESPIDER_PAGECOUNT=30, FEEDS=json.dumps(uris))
    stderr = stopped_by_a_second_ctrl_c(command, server, 8)
    stored = Crawl(None, tmp_path / "focused.sqlite3", _crawl_id_of(tmp_path / "job")).pages()
    exported = [page["url"] for page in json.loads(feeds["json"].read_text())]
    assert exported and set(exported) <= {page["url"] for page in stored}
    items = ElementTree.parse(feeds["xml"]).getroot().findall("item")
    assert [item.findtext("url") for item in items] == exported
    for path in feeds.values():
        assert f"the feed {path} was ended at the forced stop".encode() in stderr
    not_uploaded = re.findall(
        rb"the feed (\S+) was not uploaded at the forced stop, nor the", stderr
    )
    assert not_uploaded == [ftp.replace("alice:s3cret@", "***@").encode()], stderr[-3000:]
    assert b"s3cret" not in stderr


def test_a_forced_stop_waits_for_the_uploads_under_way_in_a_thread(tmp_path, sample_graph):
    """An upload in a thread (S3, FTP) under way at a second Ctrl-C was said failed, and
    counted so, and the feed was stored all the same as the process exited: each is waited
    for, and said stored."""
    server = ReplayServer(sample_graph, delay=0.2).start()
    uri = f"slowfile://{tmp_path}/p-%(batch_id)d.jsonl"
    feeds = {uri: {"format": "jsonlines", "batch_item_count": 2}}
    storages = {"slowfile": "tests.user_components.SlowFileFeedStorage"}
    command = job_command(
        tmp_path,
        server,
        "bfs",
        CLOSESPIDER_PAGECOUNT=30,
        FEEDS=json.dumps(feeds),
        FEED_STORAGES=json.dumps(storages),
    )
    stderr = stopped_by_a_second_ctrl_c(command, server, 12)
    uploaded = re.findall(
        rb"the feed slowfile://\S+/(p-\d+\.jsonl) was uploaded at the forced stop, with its 2"
        rb" pages",
        stderr,
    )
    assert uploaded, stderr[-3000:]
    assert b"not confirmed" not in stderr
    for name in uploaded:
        assert len((tmp_path / name.decode()).read_bytes().splitlines()) == 2


def crawls_status(db, crawl_id: str) -> str:
    """The status column of the crawl's row in ``scrapy crawls`` (the real command line, with
    the default FOCUSED_HEARTBEAT_INTERVAL: the crawl's own is in its record)."""
    listed = subprocess.run(
        scrapy_command("crawls", "-s", f"FOCUSED_DB={db}"),
        cwd=REPO,
        env=crawl_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr[-3000:]
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith(crawl_id)]
    return re.split(r"\s{2,}", row)[2]  # crawl, started, status, ...


def test_kill_9_shows_the_crawl_as_stopped_not_running(tmp_path, sample_graph):
    """A crawl killed with kill -9 cannot record how it ended: its record says ``running``.
    While it lives its heartbeat keeps it ``running`` in ``scrapy crawls``; once killed, its
    heartbeat ages and it is listed as stopped, with when it was last seen; resumed, it is
    running again and finishes."""
    interval = 1.0
    # The articles beyond the first 10 wait for the kill: the crawl is alive, and busy with
    # nothing, as long as the test needs.
    server = GatedReplay(sample_graph, Hold(10), BIRD_SEED, delay=0.03).start()
    db = tmp_path / "focused.sqlite3"
    command = job_command(
        tmp_path, server, "bfs", CLOSESPIDER_PAGECOUNT=30, FOCUSED_HEARTBEAT_INTERVAL=interval
    )
    try:
        run = start_until_fetched(command, server, 10)
        crawl_id = _crawl_id_of(tmp_path / "job")
        # Longer than the 3 intervals after which a heartbeat is stale: only its refreshes
        # keep the crawl running.
        time.sleep(4 * interval)
        alive = crawls_status(db, crawl_id)
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
        server.gate.release()
        time.sleep(4 * interval)
        killed = crawls_status(db, crawl_id)
        stored = Crawl(None, db, crawl_id).crawl_record()
        final = run_to_the_end(command)
    finally:
        server.stop()
    assert alive == "running"
    assert killed.startswith("stopped?"), killed
    assert stored["status"] == "running"  # the stored status is left as it was
    assert stored["heartbeat_interval"] == interval
    assert killed == f"stopped? (last seen {describe_time(stored['seen_at'])})"
    assert final.returncode == 0, final.stderr[-3000:]
    assert crawls_status(db, crawl_id) == "finished"
