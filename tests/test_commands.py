"""``scrapy crawls``, ``scrapy pages`` and ``scrapy report`` on a store filled by real crawls.

Two crawls of the loopback sample go into one SQLite file, once for the module: ``cut`` is
stopped by Ctrl-C (interrupted), ``done`` then runs to its page budget (the latest crawl). On
SQLite the commands run as the real CLI in a subprocess; the same records are copied into
mongomock, where the commands run in-process (pymongo.MongoClient patched), and both must print
the same. Expected figures are computed here from the stored records, independently of
focused.report.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import sqlite3
import struct
import subprocess
import tempfile
import time
import unicodedata
import warnings
import weakref
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import import_module
from pathlib import Path

import pymongo
import pytest
from scrapy.cmdline import execute
from scrapy.commands import ScrapyCommand, ScrapyHelpFormatter
from scrapy.settings import Settings

from focused import storage, storecommand
from focused.commands import pages as pages_command
from focused.commands.report import print_report
from focused.errors import CommandLineParser, ConfigError, exit_on_config_error
from focused.mongostore import MongoStore
from focused.report import (
    CURVE_BUCKETS,
    being_recrawled,
    build_report,
    describe_status,
    describe_time,
    is_stale,
    page_json,
    report_json,
)
from focused.sqlitestore import SqliteStore
from focused.storage import CRAWL_FIELDS, FINISH_FIELDS, PAGE_FIELDS
from tests.conftest import (
    BIRD_QUERY,
    BIRD_SEED,
    REPO,
    crawl_args,
    crawl_env,
    run_crawl,
    run_scrapy,
    scrapy_command,
)
from tests.sites import GatedReplay, Hold
from tests.test_storage import (
    crawl_record,
    filled_sqlite,
    mongo_client,  # noqa: F401 - the patched mongomock fixture
    read_only,
)
from tests.test_storage import page as page_record

BUDGET = 60
MONGO_SETTINGS = {"MONGO_URI": "mongodb://mongomock", "MONGO_DATABASE": "focused"}
PNG_SIZE = (1100, 450)  # 11 x 4.5 inches at 100 dpi


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Stored:
    db: Path
    crawls: dict[str, dict]
    pages: dict[str, list[dict]]  # crawl id -> full page records in fetch order


@pytest.fixture(scope="module")
def stored(tmp_path_factory, sample_graph) -> Stored:
    tmp = tmp_path_factory.mktemp("commands")
    # The articles beyond the first 20 wait for the Ctrl-C: the crawl is cut however late it
    # comes (15 s were enough to finish the sample).
    server = GatedReplay(sample_graph, Hold(20), BIRD_SEED, delay=0.02).start()
    arguments = {
        "strategy": "bestfirst",
        "query": BIRD_QUERY,
        "seeds": f"{server.url}/wiki/{BIRD_SEED}",
    }
    db = tmp / "focused.sqlite3"
    try:
        interrupt_crawl(server, arguments, db, "cut")
        done = run_crawl(tmp, arguments, {"CLOSESPIDER_PAGECOUNT": BUDGET}, crawl_id="done")
        assert done.result.returncode == 0, done.result.stderr[-3000:]
    finally:
        server.stop()
    store = SqliteStore(db)
    try:
        crawls = {crawl["crawl_id"]: crawl for crawl in store.crawls()}
        pages = {crawl_id: store.pages(crawl_id, order="fetch_order") for crawl_id in crawls}
    finally:
        store.close()
    assert crawls["cut"]["status"] == "interrupted"
    assert crawls["done"]["status"] == "finished"
    assert len(pages["done"]) >= BUDGET and len(pages["cut"]) >= 10
    return Stored(db, crawls, pages)


def interrupt_crawl(server: GatedReplay, arguments: dict, db: Path, crawl_id: str) -> None:
    """Start a crawl and press Ctrl-C once it has fetched some pages, then let the server
    answer the pages it holds."""
    settings = {
        "FOCUSED_DB": db,
        "CONCURRENT_REQUESTS": 2,
        "FOCUSED_LOGSTATS_INTERVAL": 0,
        "LOG_FILE": db.with_name(f"{crawl_id}.log"),  # a pipe nobody reads would block the crawl
    }
    command = scrapy_command(*crawl_args({**arguments, "crawl_id": crawl_id}, settings))
    process = subprocess.Popen(command, cwd=REPO, env=crawl_env())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if sum(path.startswith("/wiki/") for path in server.fetched) >= 20:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    server.gate.release()
    assert process.wait(timeout=60) == 0, settings["LOG_FILE"].read_text()[-3000:]


# -- running the commands --------------------------------------------------------------------


def settings_args(settings: dict) -> list[str]:
    return [arg for name, value in settings.items() for arg in ("-s", f"{name}={value}")]


def run_cli(*args: str, settings: dict) -> Result:
    """The real command line, in a subprocess."""
    result = run_scrapy([*args, *settings_args(settings)], timeout=120)
    return Result(result.returncode, result.stdout, result.stderr)


@pytest.fixture
def cli(monkeypatch, capsys):
    """Run a command in this process, as ``scrapy`` would: it starts no crawler process, so
    there is no reactor to restart."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "focused.settings")

    def run(*args: str, settings: dict) -> Result:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit, no_traceback_of_ctrl_c():
            execute(["scrapy", *args, *settings_args(settings)])
        out, err = capsys.readouterr()
        return Result(exit.value.code or 0, out, err)

    return run


@contextmanager
def no_traceback_of_ctrl_c() -> Iterator[None]:
    """A KeyboardInterrupt a command lets out (a traceback) fails the test, not the session."""
    try:
        yield
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt: the command ended in a traceback")


@pytest.fixture
def sqlite(cli, stored):
    return lambda *args: cli(*args, settings={"FOCUSED_DB": stored.db})


@pytest.fixture
def mongo_copy(mongo_client, stored) -> MongoStore:  # noqa: F811
    """mongomock holding a copy of the SQLite records, written through the Store API."""
    copy = MongoStore(MONGO_SETTINGS["MONGO_URI"], "focused", client=mongo_client)
    for crawl_id, crawl in stored.crawls.items():
        copy.start_crawl(crawl)
        copy.finish_crawl(crawl_id, **{name: crawl[name] for name in FINISH_FIELDS})
        copy.save_pages(stored.pages[crawl_id])
    return copy


@pytest.fixture
def mongo(cli, monkeypatch, mongo_client, mongo_copy):  # noqa: F811
    monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)
    return lambda *args, **settings: cli(*args, settings={**MONGO_SETTINGS, **settings})


def ok(result: Result) -> str:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def one_line_error(result: Result, status: int, message: str) -> None:
    assert result.returncode == status, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and message in lines[0], lines[0]
    assert result.stdout == ""


# -- independent expectations ----------------------------------------------------------------


def best_first(pages: list[dict]) -> list[dict]:
    return sorted(pages, key=lambda page: (-page["relevance"], page["fetch_order"], page["url"]))


def rows(section: str) -> list[list[str]]:
    """The data rows of a printed table (header dropped), split on runs of 2+ spaces."""
    lines = section.strip("\n").splitlines()[1:]
    return [re.split(r"\s{2,}", line.strip()) for line in lines]


def report_sections(text: str) -> dict[str, str]:
    head, levels, deciles, top = text.split("\n\n")
    return {
        "head": head,
        "levels": levels.split("\n", 1)[1],
        "deciles": deciles.split("\n", 1)[1],
        "top": top.split("\n", 1)[1],
    }


def expected_levels(pages: list[dict]) -> list[list[str]]:
    by_level = defaultdict(list)
    for page in pages:
        by_level[page["level"]].append(page)
    return [
        [
            str(level),
            str(len(group)),
            str(relevant := sum(page["is_relevant"] for page in group)),
            f"{100 * relevant / len(group):.1f}",
            f"{sum(page['relevance'] for page in group) / len(group):.3f}",
        ]
        for level, group in sorted(by_level.items())
    ]


def expected_deciles(pages: list[dict], fetched: int) -> list[list[str]]:
    expected = []
    for tenth in range(1, 11):
        upto = math.ceil(tenth * fetched / 10)
        relevant = sum(page["is_relevant"] for page in pages if page["fetch_order"] <= upto)
        expected.append([f"{tenth * 10}%", str(upto), str(relevant), f"{relevant / upto:.3f}"])
    return expected


def check_report_text(text: str, crawl: dict, pages: list[dict]) -> None:
    sections = report_sections(text)
    head = dict(line.split(None, 1) for line in sections["head"].splitlines())
    assert head["crawl"] == crawl["crawl_id"]
    assert head["query"] == crawl["query"]
    assert head["strategy"] == "bestfirst"
    relevant = sum(page["is_relevant"] for page in pages)
    assert crawl["pages"] == len(pages) and crawl["relevant"] == relevant
    assert head["pages"] == (
        f"{len(pages)} fetched, {len(pages)} stored, {relevant} relevant,"
        f" harvest rate {relevant / len(pages):.3f}"
    )
    duplicates = sum(bool(page["duplicate_of"]) for page in pages)
    assert head["stored"] == (
        f"0 gone (404 or 410), 0 noindex (without text), {duplicates} duplicate (without text:"
        " see duplicate_of)"
    )
    assert rows(sections["levels"]) == expected_levels(pages)
    assert rows(sections["deciles"]) == expected_deciles(pages, crawl["pages"])
    top = [
        [
            f"{page['relevance']:.3f}",
            f"{page['tfidf']:.3f}",
            f"{page['lsi']:.3f}",
            str(page["level"]),
            "200",
            page["url"],
            page["title"],
        ]
        for page in best_first(pages)[:10]
    ]
    assert rows(sections["top"]) == top


# -- the report's figures on hand-made records --------------------------------------------


def record(fetch_order: int, relevant: bool, level: int = 1, relevance: float | None = 0.5):
    return {
        "fetch_order": fetch_order,
        "is_relevant": relevant,
        "level": level,
        "relevance": relevance,
    }


def test_figures_count_pages_fetched_but_not_stored():
    """With STORE_MIN_RELEVANCE only some pages are stored; fetch_order still counts them all."""
    pages = [record(1, True, 0, 0.9), record(4, True, 1, 0.6), record(9, False, 2, None)]
    crawl = {"crawl_id": "c", "pages": 20, "relevant": 2}
    built = build_report(crawl, pages, top=[])
    assert (built.totals.fetched, built.totals.relevant, built.stored) == (20, 2, 3)
    assert built.totals.harvest_rate == 0.1
    # after 2, 4, 6, ... 20 pages fetched: 1 relevant up to page 3, then 2
    assert [(p.fetched, p.relevant) for p in built.deciles] == [(2, 1)] + [
        (n, 2) for n in range(4, 21, 2)
    ]
    assert [(p.fetched, p.harvest_rate) for p in built.curve] == [(1, 1.0), (4, 0.5), (9, 2 / 9)]
    levels = [(r.level, r.pages, r.relevant, r.mean_relevance) for r in built.levels]
    assert levels == [(0, 1, 1, 0.9), (1, 1, 1, 0.6), (2, 1, 0, None)]
    assert built.relevant_not_stored == 0


def test_relevant_pages_fetched_but_not_stored_are_said_beside_the_deciles():
    """With STORE_MIN_RELEVANCE above the relevance threshold, relevant pages below it are
    counted in the totals but are on no curve: its deciles end below the relevant total."""
    pages = [record(1, True, 0, 0.9), record(4, True, 1, 0.6)]
    built = build_report({"crawl_id": "c", "pages": 10, "relevant": 5}, pages, top=[])
    assert built.relevant_not_stored == 3 and built.deciles[-1].relevant == 2
    assert report_json(built)["totals"]["relevant_not_stored"] == 3


@pytest.mark.parametrize(
    ("relevant", "said"), [(3, "1 relevant page was"), (4, "2 relevant pages were")]
)
def test_the_relevant_pages_not_stored_are_counted_in_words(capsys, relevant, said):
    """It said "1 relevant pages were fetched but not stored"."""
    pages = [record(1, True, 0, 0.9), record(4, True, 1, 0.6)]
    crawl = dict.fromkeys(CRAWL_FIELDS) | {"crawl_id": "c", "pages": 10, "relevant": relevant}
    print_report(build_report(crawl | {"params": {}, "status": "finished"}, pages, top=[]))
    out = capsys.readouterr().out
    assert f"(relevant pages stored only: {said} fetched but not stored," in out


def test_no_relevant_page_is_said_unstored_when_every_page_was_stored():
    """A recrawl given --model moved a stored verdict (relevant no longer) and left the crawl's
    count: the difference said one relevant page was fetched but not stored."""
    pages = [record(1, True, 0, 0.9), record(2, False, 1, 0.1), record(3, False, 1, 0.2)]
    built = build_report({"crawl_id": "c", "pages": 3, "relevant": 2}, pages, top=[])
    assert built.relevant_not_stored == 0
    assert built.relevant_rescored == -1  # said, beside the crawl's own count


def test_verdicts_a_recrawl_moved_are_told_apart_from_relevant_pages_not_stored():
    """The totals stay the crawl's; the levels and deciles read the verdicts now: the report
    says by how many these differ, but for the relevant pages it could not store."""
    pages = [record(1, True, 0, 0.9), record(2, True, 1, 0.6), record(3, True, 1, 0.7)]
    built = build_report({"crawl_id": "c", "pages": 3, "relevant": 2}, pages, top=[])
    assert (built.relevant_not_stored, built.relevant_rescored) == (0, 1)
    assert report_json(built)["totals"]["relevant_rescored"] == 1
    # 4 fetched, 3 stored: of the 4 relevant counted, one at most was not stored.
    pages[0] = record(1, False, 0, 0.1)
    built = build_report({"crawl_id": "c", "pages": 4, "relevant": 4}, pages, top=[])
    assert (built.relevant_not_stored, built.relevant_rescored) == (1, -1)
    running = build_report({"crawl_id": "c", "pages": None}, pages, top=[])
    assert running.relevant_rescored == 0  # its totals are its pages'


def test_the_verdicts_moved_are_read_from_the_crawl_record_where_it_counts_them():
    """4 relevant fetched, 2 of them and 1 irrelevant stored, and a recrawl made one of these
    irrelevant: the report, guessing, said 2 relevant pages not stored and none rescored. The
    crawl record counts the verdicts moved: the rest is what the crawl did not store."""
    pages = [record(1, True, 0, 0.9), record(2, False, 1, 0.1), record(4, True, 1, 0.6)]
    crawl = {"crawl_id": "c", "pages": 5, "relevant": 4}
    guessed = build_report(crawl, pages, top=[])
    assert (guessed.relevant_not_stored, guessed.relevant_rescored) == (2, 0)  # no counts
    one_lost = {"rescored_now_relevant": 0, "rescored_no_longer_relevant": 1}
    built = build_report(crawl | one_lost, pages, top=[])
    assert (built.relevant_not_stored, built.relevant_rescored) == (1, -1)
    assert report_json(built)["totals"]["relevant_rescored"] == -1
    both_ways = {"rescored_now_relevant": 2, "rescored_no_longer_relevant": 1}
    built = build_report({**crawl, "relevant": 2, **both_ways}, pages, top=[])
    assert (built.relevant_not_stored, built.relevant_rescored) == (1, 1)
    # Totals counted from the pages (a crawl killed, then recrawled): the crawl's verdicts are
    # the pages' less those the record counts moved.
    running = build_report({"crawl_id": "c", "pages": None, **one_lost}, pages, top=[])
    assert (running.totals.relevant, running.relevant_not_stored) == (3, 0)
    assert running.relevant_rescored == -1


def test_a_crawl_without_totals_counts_its_relevant_pages_as_it_found_them(cli, tmp_path):
    """A crawl killed before it recorded its totals is counted from its stored pages, and a
    --model recrawl of it moved their verdicts: its summary in ``crawls`` and ``report`` took
    the recrawl's verdicts for the crawl's, with no rescored line, though its record counts
    them; a run going on with the crawl counts on from its own (``recover_state``), and its
    report then said they had moved."""
    db = tmp_path / "focused.sqlite3"
    store = SqliteStore(db)
    try:
        store.start_crawl(crawl_record("c"))  # never finished: killed
        urls = [f"http://a.test/{n}" for n in range(3)]
        store.save_pages(
            page_record(url, "c", fetch_order=n, is_relevant=n <= 2)
            for n, url in enumerate(urls, 1)
        )
        store.update_pages([{"crawl_id": "c", "url": urls[0], "is_relevant": False}])
    finally:
        store.close()
    settings = {"FOCUSED_DB": db}
    listed = json.loads(ok(cli("crawls", "--json", settings=settings)))
    assert (listed["pages"], listed["relevant"]) == (3, 2)
    totals = json.loads(ok(cli("report", "c", "--json", settings=settings)))["totals"]
    assert (totals["relevant"], totals["relevant_rescored"], totals["relevant_not_stored"]) == (
        2,
        -1,
        0,
    )
    assert "rescored   1 page no longer relevant" in ok(cli("report", "c", settings=settings))


def test_figures_of_a_running_crawl_come_from_its_stored_pages():
    pages = [record(2, False), record(1, True), record(3, True)]
    built = build_report({"crawl_id": "c", "pages": None}, pages, top=[])
    assert (built.totals.fetched, built.totals.relevant) == (3, 2)
    # fewer pages than deciles: each decile rounds up to a whole page
    assert [p.fetched for p in built.deciles] == [1, 1, 1, 2, 2, 2, 3, 3, 3, 3]
    assert [p.relevant for p in built.deciles] == [1, 1, 1, 1, 1, 1, 2, 2, 2, 2]


class Record(dict):
    """A page record a weak reference can follow."""


def test_a_report_holds_no_page_record_once_it_counted_it():
    """`scrapy report` held every page's fields, 170 MB for 200,000 pages: it counts each page
    as it is read now, and lets it go."""
    held: list[weakref.ref] = []

    def pages() -> Iterator[Record]:
        for n in range(1, 101):
            # the report's loop may hold the page before, no other
            assert [ref for ref in held[:-1] if ref() is not None] == []
            page = Record(record(n, n % 4 == 0, level=n % 3), status=404 if n == 7 else 200)
            held.append(weakref.ref(page))
            yield page

    built = build_report({"crawl_id": "c", "pages": None}, pages(), top=[])
    assert (built.stored, built.totals.fetched, built.totals.relevant, built.gone) == (
        100,
        100,
        25,
        1,
    )
    assert [(row.level, row.pages, row.relevant) for row in built.levels] == [
        (0, 33, 8),
        (1, 34, 9),
        (2, 33, 8),
    ]
    assert [point.relevant for point in built.deciles] == [2, 5, 7, 10, 12, 15, 17, 20, 22, 25]
    assert len(built.curve) == 100


def test_the_plotted_harvest_curve_keeps_its_shape_in_a_few_thousand_points():
    """The plot drew a point per page. A long curve keeps, in each of CURVE_BUCKETS slices of
    its axis (each under a pixel), its first and last points and its least and greatest
    rates: the line through them looks the same."""
    rng = random.Random(5)
    fetched = 100_000
    # a page in 7 fetched but not stored; a dip to no relevant page from page 40,000 to 40,300
    pages = [
        record(n, not 40_000 < n < 40_300 and rng.random() < (0.3 if n < 60_000 else 0.7))
        for n in range(1, fetched + 1)
        if n % 7
    ]
    built = build_report({"crawl_id": "c", "pages": None}, pages, top=[])
    full, relevant = [], 0
    for page in pages:
        relevant += page["is_relevant"]
        full.append((page["fetch_order"], relevant))
    curve = [(point.fetched, point.relevant) for point in built.curve]
    assert len(curve) <= 4 * CURVE_BUCKETS
    assert curve[0] == full[0] and curve[-1] == full[-1]
    assert set(curve) <= set(full) and curve == sorted(curve)

    def extremes(points: list[tuple[int, int]]) -> dict[int, tuple[float, float]]:
        slices = defaultdict(list)
        for position, relevant in points:
            slices[min(position * CURVE_BUCKETS // fetched, CURVE_BUCKETS - 1)].append(
                relevant / position
            )
        return {bucket: (min(rates), max(rates)) for bucket, rates in slices.items()}

    assert extremes(curve) == extremes(full)
    # the deciles read the whole curve
    assert [point.relevant for point in built.deciles] == [
        max(relevant for position, relevant in full if position <= decile * fetched // 10)
        for decile in range(1, 11)
    ]


def test_a_refusal_by_a_heartbeat_too_slow_to_go_stale_is_one_line():
    """A recrawl's FOCUSED_HEARTBEAT_INTERVAL of 1e300, kept in its crawl's record: the time its
    beat would go stale overflowed a date, a traceback where the run was refused."""
    seen = datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC).isoformat()
    crawl = {"crawl_id": "c", "recrawl_seen_at": seen, "recrawl_heartbeat_interval": 1e300}
    assert being_recrawled(crawl) == (
        "crawl c is being recrawled in another process (last seen 2026-01-01 10:00:00 UTC):"
        " let that recrawl end, then run the crawl"
    )
    with_30 = being_recrawled({**crawl, "recrawl_heartbeat_interval": 30.0})
    assert with_30.endswith("if it was killed, it counts as stopped from 2026-01-01 10:01:30 UTC")


def test_a_running_crawl_is_stale_once_it_missed_three_heartbeats():
    now = datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC)

    def crawl(status: str, seconds_ago: float, interval: float | None = 30.0) -> dict:
        seen_at = (now - timedelta(seconds=seconds_ago)).isoformat()
        return {"status": status, "seen_at": seen_at, "heartbeat_interval": interval}

    assert not is_stale(crawl("running", 89), now)
    assert is_stale(crawl("running", 91), now)
    assert is_stale(crawl("running", 4, interval=1.0), now)
    assert not is_stale(crawl("running", 91, interval=100.0), now)  # each crawl by its own
    # Only a crawl that says it is running; a record written before heartbeats is believed.
    assert not is_stale(crawl("finished", 1000), now)
    assert not is_stale(crawl("interrupted", 1000), now)
    assert not is_stale(crawl("running", 1000, interval=None), now)
    assert not is_stale({"status": "running", "seen_at": None, "heartbeat_interval": 30}, now)
    assert not is_stale({"status": "running"}, now)
    stale = crawl("running", 91)
    assert describe_status(stale, now) == "stopped? (last seen 2026-01-01 09:58:29 UTC)"
    assert describe_status({**stale, "heartbeat_interval": 100.0}, now) == "running"


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("2026-01-01T10:00:00.123456+00:00", "2026-01-01 10:00:00 UTC"),  # as a crawl writes it
        ("2026-01-01T12:00:00+02:00", "2026-01-01 10:00:00 UTC"),  # was 12:00:00 UTC
        ("2026-01-01 10:00", "2026-01-01 10:00:00 UTC"),  # no offset: the store's UTC
        ("yesterday at noon", "-"),  # was "yesterday at noon UTC"
        (None, "-"),
    ],
)
def test_a_stored_time_is_told_in_utc(stored, shown):
    assert describe_time(stored) == shown


# -- scrapy crawls ---------------------------------------------------------------------------


def test_crawls_lists_both_crawls_newest_first(stored, sqlite, mongo):
    out = ok(sqlite("crawls"))
    listed = rows(out)
    assert [row[0] for row in listed] == ["done", "cut"]
    for row in listed:
        crawl = stored.crawls[row[0]]
        pages = stored.pages[row[0]]
        relevant = sum(page["is_relevant"] for page in pages)
        assert row[1] == crawl["started_at"][:19].replace("T", " ") + " UTC"
        assert row[3:] == [
            "bestfirst",
            "-",
            str(len(pages)),
            str(relevant),
            f"{relevant / len(pages):.3f}",
            BIRD_QUERY,
        ]
    assert listed[0][2] == "finished"
    assert listed[1][2] == "interrupted (shutdown)"
    assert ok(mongo("crawls")) == out


def test_a_crawl_of_a_topic_file_names_it_where_a_crawl_names_its_query(cli, tmp_path):
    """A crawl given -a topic_file (and no query) was listed with the query '-', and reported
    as 'query' and nothing: nothing said what its topic was."""
    db = tmp_path / "focused.sqlite3"
    store = SqliteStore(db)
    for crawl_id, query, topic_file in (
        ("file", "", "topics/birds.txt"),
        ("both", "eggs", "t.txt"),
    ):
        store.start_crawl({**crawl_record(crawl_id), "query": query, "topic_file": topic_file})
        store.save_pages([page_record("http://a.test/", crawl_id, fetch_order=1)])
    store.close()
    listed = {row[0]: row[-1] for row in rows(ok(cli("crawls", settings={"FOCUSED_DB": db})))}
    assert listed == {"file": "topic_file topics/birds.txt", "both": "eggs + topic_file t.txt"}
    report = ok(cli("report", "file", settings={"FOCUSED_DB": db}))
    assert "query      topic_file topics/birds.txt\n" in report
    [line] = ok(cli("crawls", "--json", settings={"FOCUSED_DB": db})).splitlines()[:1]
    assert json.loads(line)["topic_file"] in ("topics/birds.txt", "t.txt")


def test_crawls_json(stored, sqlite, mongo):
    out = ok(sqlite("crawls", "--json"))
    records = [json.loads(line) for line in out.splitlines()]
    assert [record["crawl_id"] for record in records] == ["done", "cut"]
    for record in records:
        crawl = stored.crawls[record["crawl_id"]]
        assert record["status"] == crawl["status"] and record["pages"] == crawl["pages"]
        assert record["harvest_rate"] == pytest.approx(crawl["relevant"] / crawl["pages"])
    assert ok(mongo("crawls", "--json")) == out


def test_crawls_counts_a_running_crawl_from_its_stored_pages(stored, mongo, mongo_copy):
    """A crawl record gets its counts when the crawl ends; until then, count what is stored."""
    live = [{**page, "crawl_id": "live"} for page in stored.pages["done"][:25]]
    started = {name: stored.crawls["done"][name] for name in ("query", "strategy", "seeds")}
    mongo_copy.start_crawl(
        {**started, "crawl_id": "live", "started_at": "3000-01-01T00:00:00+00:00"}
    )
    mongo_copy.save_pages(live)
    first = rows(ok(mongo("crawls")))[0]
    relevant = sum(page["is_relevant"] for page in live)
    assert first[0] == "live" and first[2] == "running"
    assert first[5:8] == ["25", str(relevant), f"{relevant / 25:.3f}"]


@pytest.mark.parametrize("backend", ["sqlite", "mongo"])
def test_crawls_counts_a_running_crawl_without_reading_its_pages(
    cli,
    tmp_path,
    monkeypatch,
    mongo_client,  # noqa: F811
    backend,
):
    """The store counts a running crawl's pages: `scrapy crawls` read each one, past its text,
    into Python, 15 s and 120 MB for a crawl of 200,000 pages."""
    if backend == "sqlite":
        settings: dict = {"FOCUSED_DB": tmp_path / "f.sqlite3"}
        store: storage.Store = SqliteStore(settings["FOCUSED_DB"])
    else:
        monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)
        settings = MONGO_SETTINGS
        store = MongoStore(MONGO_SETTINGS["MONGO_URI"], "focused", client=mongo_client)
    store.start_crawl({"crawl_id": "live", "query": "birds", "strategy": "bfs", "seeds": []})
    # pages 1 to 40 fetched, every fourth not stored, every third relevant
    store.save_pages(
        page_record(f"http://t/{n}", "live", fetch_order=n, is_relevant=n % 3 == 0)
        for n in range(1, 41)
        if n % 4
    )
    store.close()

    def read(*args, **kwargs):
        raise AssertionError("pages read one by one")

    monkeypatch.setattr(storage.Store, "iter_pages", read)
    # fetched: the highest fetch order stored, 39; relevant: 3, 6, 9, ... 39 but 12, 24, 36
    assert rows(ok(cli("crawls", settings=settings)))[0][2:8] == [
        *("running", "bfs", "-"),
        *("39", "10", "0.256"),
    ]
    [listed] = strict_json_lines(ok(cli("crawls", "--json", settings=settings)))
    assert (listed["pages"], listed["relevant"]) == (39, 10)


def kill_a_crawl(stored: Stored, mongo_copy: MongoStore, monkeypatch) -> None:
    """Record crawl ``killed`` as kill -9 leaves it: ``running``, with 5 pages and a last
    heartbeat at 2026-01-01 10:00:30 UTC, long older than 3 of its 30 s intervals."""
    started = {name: stored.crawls["done"][name] for name in ("query", "strategy", "seeds")}
    now = storage._utc_now
    started |= {
        "crawl_id": "killed",
        "started_at": "3000-01-01T00:00:00+00:00",  # the newest, first in the list
        "seen_at": "2026-01-01T10:00:00+00:00",
        "heartbeat_interval": 30.0,
    }
    mongo_copy.start_crawl(started)
    monkeypatch.setattr(storage, "_utc_now", lambda: "2026-01-01T10:00:30+00:00")
    mongo_copy.heartbeat("killed")  # its last beat, then kill -9
    monkeypatch.setattr(storage, "_utc_now", now)
    mongo_copy.save_pages([{**page, "crawl_id": "killed"} for page in stored.pages["done"][:5]])


def test_a_crawl_whose_heartbeat_stopped_is_shown_as_stopped(
    stored, mongo, mongo_copy, monkeypatch
):
    """A crawl killed outright (kill -9) stays ``running`` in the store. Its heartbeat, once
    older than 3 FOCUSED_HEARTBEAT_INTERVALs, shows it as stopped, with the time it was last
    seen, in ``crawls``, ``pages`` and ``report``; a live crawl's keeps it running."""
    kill_a_crawl(stored, mongo_copy, monkeypatch)
    stopped = "stopped? (last seen 2026-01-01 10:00:30 UTC)"

    first = rows(ok(mongo("crawls")))[0]
    assert first[:3] == ["killed", "3000-01-01 00:00:00 UTC", stopped]
    assert mongo_copy.get_crawl("killed")["status"] == "running"  # as stored
    assert f"status     {stopped}\n" in ok(mongo("report", "killed"))
    assert f"crawl killed is {stopped}:" in mongo("pages", "--crawl", "killed").stderr

    mongo_copy.heartbeat("killed")  # alive after all (a process of a shared crawl)
    assert rows(ok(mongo("crawls")))[0][2] == "running"


def test_json_says_whether_a_crawl_recorded_running_has_stopped(
    stored, mongo, mongo_copy, monkeypatch
):
    """``crawls --json`` and ``report --json`` print the stored status (``running``) and
    ``stale``, true exactly when the text shows ``stopped?``: a script need not repeat the
    heartbeat rule."""
    kill_a_crawl(stored, mongo_copy, monkeypatch)

    def judged() -> list[tuple[str, str, bool]]:
        listed = [json.loads(line) for line in ok(mongo("crawls", "--json")).splitlines()]
        shown = {row[0]: row[2] for row in rows(ok(mongo("crawls")))}
        for record in listed:
            assert record["stale"] == shown[record["crawl_id"]].startswith("stopped?")
        reported = json.loads(ok(mongo("report", "killed", "--json")))["crawl"]
        assert reported["stale"] == listed[0]["stale"]
        return [(record["crawl_id"], record["status"], record["stale"]) for record in listed]

    assert judged() == [
        ("killed", "running", True),
        ("done", "finished", False),
        ("cut", "interrupted", False),
    ]
    mongo_copy.heartbeat("killed")  # alive after all
    assert judged()[0] == ("killed", "running", False)


# -- scrapy pages ----------------------------------------------------------------------------


def page_rows(pages: list[dict]) -> list[list[str]]:
    """The rows ``scrapy pages`` prints for them (as ``rows`` splits them)."""
    # a crawl stores the pages it could fetch, so no page is gone; the sample has no noindex
    assert {(page["status"], page["robots"]) for page in pages} == {(200, None)}
    return [
        [
            f"{page['relevance']:.3f}",
            str(page["level"]),
            "200 duplicate" if page["duplicate_of"] else "200",
            page["url"],
            page["title"],
        ]
        for page in pages
    ]


@pytest.mark.parametrize(
    ("options", "select"),
    [
        ((), lambda pages: pages),
        (("--top", "7"), lambda pages: pages[:7]),
        (("--level", "2"), lambda pages: [p for p in pages if p["level"] == 2]),
        (("--relevant-only",), lambda pages: [p for p in pages if p["is_relevant"]]),
        (
            ("--min-relevance", "0.2", "--level", "1", "--top", "3"),
            lambda pages: [p for p in pages if p["relevance"] >= 0.2 and p["level"] == 1][:3],
        ),
    ],
)
def test_pages_best_first_with_filters(stored, sqlite, mongo, options, select):
    out = ok(sqlite("pages", *options))
    expected = select(best_first(stored.pages["done"]))
    assert expected, "a filter that selects nothing tests nothing"
    assert rows(out) == page_rows(expected)
    assert ok(mongo("pages", *options)) == out


def test_pages_json_is_one_record_a_line_without_text(stored, sqlite, mongo):
    out = ok(sqlite("pages", "--crawl", "cut", "--json"))
    printed = [json.loads(line) for line in out.splitlines()]
    expected = best_first(stored.pages["cut"])
    assert printed == [
        {
            **{k: v for k, v in page.items() if k != "text"},
            **{"gone": False, "noindex": False, "duplicate": bool(page["duplicate_of"])},
        }
        for page in expected
    ]
    assert ok(mongo("pages", "--crawl", "cut", "--json")) == out


def test_pages_json_with_text_gives_each_page_whole(stored, sqlite, mongo):
    """A corpus built from a crawl needs the pages' texts: ``--text`` adds each one."""
    out = ok(sqlite("pages", "--crawl", "cut", "--json", "--text"))
    printed = [json.loads(line) for line in out.splitlines()]
    expected = best_first(stored.pages["cut"])
    assert any(page["text"] for page in expected), "pages without text test nothing"
    assert printed == [
        {**page, "gone": False, "noindex": False, "duplicate": bool(page["duplicate_of"])}
        for page in expected
    ]
    assert ok(mongo("pages", "--crawl", "cut", "--json", "--text")) == out


@pytest.mark.parametrize("backend", ["sqlite", "mongo"])
def test_pages_json_prints_each_page_as_it_is_read(
    cli,
    tmp_path,
    monkeypatch,
    mongo_client,  # noqa: F811
    backend,
):
    """`scrapy pages --json > pages.jsonl`, the export of a crawl: every page was read into
    one list before the first line was printed, 2 KB a page without its text (430 MB for 200,000
    pages, gigabytes for a crawl of millions, and `| head` waited for it all). Each line is now
    printed once its page is read."""
    if backend == "sqlite":
        settings: dict = {"FOCUSED_DB": tmp_path / "focused.sqlite3"}
        store: storage.Store = SqliteStore(settings["FOCUSED_DB"])
        backend_class: type = SqliteStore
    else:
        monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)
        settings = MONGO_SETTINGS
        store = MongoStore(MONGO_SETTINGS["MONGO_URI"], "focused", client=mongo_client)
        backend_class = MongoStore
    store.start_crawl(crawl_record())
    urls = [f"http://a.test/{n:02}" for n in range(30)]
    store.save_pages(page_record(url, fetch_order=n + 1) for n, url in enumerate(urls))
    store.finish_crawl("c1")
    store.close()
    read: list[str] = []
    decode = backend_class._decode

    def reading(schema, row):
        record = decode(schema, row)
        if "url" in schema:  # a page, not the crawl record
            read.append(record["url"])
        return record

    monkeypatch.setattr(backend_class, "_decode", staticmethod(reading))
    read_at_print: list[int] = []
    print_json = pages_command.print_json

    def printing(record):
        read_at_print.append(len(read))
        print_json(record)

    monkeypatch.setattr(pages_command, "print_json", printing)
    out = ok(cli("pages", "--json", settings=settings))
    assert [json.loads(line)["url"] for line in out.splitlines()] == urls
    assert read == urls
    assert read_at_print == list(range(1, 31)), "pages read whenever a line was printed"


def test_pages_of_an_interrupted_crawl_say_so(sqlite, mongo):
    result = sqlite("pages", "--crawl", "cut", "--top", "3")
    assert len(ok(result).splitlines()) == 4
    assert result.stderr.strip() == (
        "crawl cut is interrupted (shutdown): these are the pages it stored so far"
    )
    assert mongo("pages", "--crawl", "cut", "--top", "3") == result


# -- scrapy report ---------------------------------------------------------------------------


def test_report_of_the_latest_crawl(stored, sqlite, mongo):
    out = ok(sqlite("report"))
    check_report_text(out, stored.crawls["done"], stored.pages["done"])
    assert "status     finished\n" in out
    assert ok(mongo("report")) == out


def test_report_of_an_interrupted_crawl_reports_its_pages_and_status(stored, sqlite, mongo):
    out = ok(sqlite("report", "cut"))
    check_report_text(out, stored.crawls["cut"], stored.pages["cut"])
    assert "status     interrupted (shutdown)\n" in out
    assert ok(mongo("report", "cut")) == out


def test_report_json(stored, sqlite, mongo):
    out = ok(sqlite("report", "done", "--json"))
    report = json.loads(out)
    pages = stored.pages["done"]
    assert report["crawl"] == {**stored.crawls["done"], "stale": False, "recrawling": False}
    assert report["totals"]["stored"] == len(pages)
    assert [
        [str(row["level"]), str(row["pages"]), str(row["relevant"])] for row in report["levels"]
    ] == [row[:3] for row in expected_levels(pages)]
    deciles = expected_deciles(pages, len(pages))
    assert [
        [f"{d['percent']}%", str(d["fetched"]), str(d["relevant"])]
        for d in report["harvest_deciles"]
    ] == [row[:3] for row in deciles]
    assert [page["url"] for page in report["top"]] == [p["url"] for p in best_first(pages)[:10]]
    assert ok(mongo("report", "done", "--json")) == out


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    assert data[12:16] == b"IHDR"
    assert data[-8:-4] == b"IEND"
    return struct.unpack(">II", data[16:24])


def test_report_png(stored, sqlite, mongo, tmp_path):
    result = sqlite("report", "--png", str(tmp_path / "sqlite.png"))
    check_report_text(ok(result), stored.crawls["done"], stored.pages["done"])
    assert png_size(tmp_path / "sqlite.png") == PNG_SIZE
    assert ok(mongo("report", "--json", "--png", str(tmp_path / "mongo.png")))
    assert png_size(tmp_path / "mongo.png") == PNG_SIZE


def test_report_png_of_a_query_with_dollars_and_letters_its_font_lacks(stored, cli, tmp_path):
    """A query's "$^$" was a formula matplotlib could not parse (a traceback), "$5 to $10" one it
    drew; a crawl id in Chinese letters printed two warnings a letter, with a source line."""
    db = tmp_path / "copy.sqlite3"
    copy = SqliteStore(db)
    crawl = {
        **stored.crawls["done"],
        "crawl_id": "鳥類",
        "query": "bird feeders from $5 to $10 $^$",
    }
    copy.start_crawl(crawl)
    copy.finish_crawl("鳥類", **{name: crawl[name] for name in FINISH_FIELDS})
    copy.save_pages([{**page, "crawl_id": "鳥類"} for page in stored.pages["done"]])
    copy.close()
    png = tmp_path / "r.png"
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        result = cli("report", "鳥類", "--png", str(png), settings={"FOCUSED_DB": db})
    ok(result)
    assert png_size(png) == PNG_SIZE
    assert [str(warning.message) for warning in escaped] == []
    assert result.stderr.splitlines() == [
        "warning: the plot's font has no glyph for '鳥類': drawn as boxes",
        f"plot written to {png}",
    ]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no/such/r.png", "no/such is not a writable folder"),
        ("a_file/r.png", "a_file is not a writable folder"),
        (".", "it is a folder"),
    ],
)
def test_report_png_that_cannot_be_written_is_a_bad_option(
    stored, sqlite, tmp_path, target, message
):
    """Refused before the report, with exit status 2 as an unwritable -O file is for a crawl:
    it printed the report, then exited 1 as if the store had failed."""
    (tmp_path / "a_file").write_text("mine", encoding="utf-8")
    png = tmp_path / target
    one_line_error(sqlite("report", "--png", str(png)), 2, f"cannot write --png '{png}': ")
    assert sqlite("report", "--png", str(png)).stderr.rstrip().endswith(message)
    assert (tmp_path / "a_file").read_text(encoding="utf-8") == "mine"


def test_report_png_over_a_file_that_cannot_be_written_is_a_bad_option(stored, sqlite, tmp_path):
    """A writable folder, a file in it that is not: the report was printed, then exit status 1."""
    png = tmp_path / "kept.png"
    png.write_bytes(b"mine")
    with read_only(png):
        result = sqlite("report", "--png", str(png))
    one_line_error(result, 2, f"cannot write --png '{png}': the file cannot be written")
    assert png.read_bytes() == b"mine"


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args", [("report", "nosuch"), ("pages", "--crawl", "nosuch"), ("report", "--json", "nosuch")]
)
def test_unknown_crawl_id(stored, sqlite, mongo, args):
    one_line_error(sqlite(*args), 1, "no crawl 'nosuch' in the SQLite store at ")
    one_line_error(mongo(*args), 1, "no crawl 'nosuch' in the MongoDB store at ")


@pytest.mark.parametrize("command", ["crawls", "pages", "report"])
def test_empty_store(tmp_path, cli, monkeypatch, mongo_client, command):  # noqa: F811
    db = tmp_path / "empty.sqlite3"
    SqliteStore(db).close()
    one_line_error(cli(command, settings={"FOCUSED_DB": db}), 1, "no crawls in the SQLite store")
    monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)
    one_line_error(cli(command, settings=MONGO_SETTINGS), 1, "no crawls in the MongoDB store")
    assert mongo_client.list_database_names() == [], "a reader created a database"


def test_missing_sqlite_file_is_not_created(tmp_path, cli):
    db = tmp_path / "typo.sqlite3"
    one_line_error(cli("crawls", settings={"FOCUSED_DB": db}), 1, f"{db}: no such file")
    assert not db.exists()


def test_crawl_without_stored_pages(mongo, mongo_copy):
    mongo_copy.start_crawl(
        {"crawl_id": "nothing", "started_at": "3000-01-01T00:00:00+00:00", "query": "birds"}
    )
    one_line_error(mongo("report"), 1, "crawl nothing has no stored pages")
    listed = mongo("pages")
    assert ok(listed).splitlines() == ["relevance  level  status  url  title"]
    assert listed.stderr == "crawl nothing is running: it has stored no pages yet\n"


def test_pages_of_a_crawl_that_fetched_no_seed_say_it_stored_none(cli, tmp_path):
    """A crawl none of whose seeds could be fetched was listed with "these are the pages it
    stored so far" over an empty table, as if it had pages to come."""
    db = tmp_path / "focused.sqlite3"
    store = SqliteStore(db)
    store.start_crawl(crawl_record("dead"))
    store.finish_crawl("dead", status="interrupted", finish_reason="seeds_unreachable")
    store.close()
    listed = cli("pages", settings={"FOCUSED_DB": db})
    assert ok(listed).splitlines() == ["relevance  level  status  url  title"]
    assert listed.stderr == "crawl dead is interrupted (seeds_unreachable): it stored no pages\n"
    assert cli("pages", "--level", "3", settings={"FOCUSED_DB": db}) == listed


UNREACHABLE_MONGO = {"MONGO_URI": "mongodb://127.0.0.1:1", "MONGO_TIMEOUT_MS": 300}


@pytest.mark.parametrize("command", ["crawls", "pages", "report"])
def test_unreachable_mongo(cli, command):
    one_line_error(
        cli(command, settings=UNREACHABLE_MONGO),
        1,
        "MongoDB store at mongodb://127.0.0.1:1/focused: cannot reach the server within 300 ms",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("pages", "--top", "0"), "--top=0 is below its minimum 1"),
        (("pages", "--top", "many"), "--top='many' is not an integer"),
        (("pages", "--level", "-1"), "--level=-1 is below its minimum 0"),
        (("pages", "--min-relevance", "2"), "--min-relevance=2 is above its maximum 1"),
        (("pages", "extra"), "unexpected arguments: extra"),
        (("pages", "--text"), "--text needs --json: a table has no room for the pages' texts"),
        (("crawls", "--bogus"), "unknown option --bogus (--help lists the options)"),
        (("report", "a", "b"), "give at most one crawl id, not 2: a b"),
        (("report", "-s", "MONGO_TIMEOUT_MS=soon"), "MONGO_TIMEOUT_MS='soon' is not an integer"),
        (("pages", "-s", "FOCUSED_DBB=other.sqlite3"), "did you mean FOCUSED_DB?"),
    ],
)
def test_bad_options(mongo, args, message):
    one_line_error(mongo(*args), 2, message)


@pytest.mark.parametrize(
    ("args", "uri", "reason"),
    [
        (("crawls",), "mongo://127.0.0.1", "Invalid URI scheme"),
        (("pages",), "mongodb://127.0.0.1:1/?journal=maybe", "The value of journal"),
        (("report",), "mongodb://127.0.0.1:notaport", "Port contains non-digit characters"),
        (("recrawl", "one"), "mongodb://127.0.0.1:1/?tlsCAFile=/nonexistent/ca.pem", "[Errno 2]"),
        (("crawls",), "mongodb://127.0.0.1:1/?tlsCAFile=scrapy.cfg", "certificate"),
    ],
)
def test_an_invalid_mongo_uri_is_a_bad_setting(cli, args, uri, reason):
    """Exit status 2, as from `scrapy crawl`: the reading commands and recrawl said 1, as of a
    server that does not answer."""
    result = cli(*args, settings={"MONGO_URI": uri})
    one_line_error(result, 2, f"MongoDB URI {uri!r} is invalid: ")
    assert reason in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("command", "database", "message"),
    [
        # Read as the default database, `focused`: another crawl's store perhaps.
        ("crawls", "", "setting MONGO_DATABASE needs a database name, not ''"),
        # Names MongoDB refuses: in the store's own words once it was reached, or never
        # (mongomock takes any), status 1.
        ("pages", "a.b", "database name 'a.b' is invalid: it holds '.'"),
        ("report", "é" * 32, "is invalid: it is 64 bytes long, and MongoDB takes at most 63"),
    ],
)
def test_a_database_name_mongodb_would_refuse_is_a_bad_setting(mongo, command, database, message):
    one_line_error(mongo(command, MONGO_DATABASE=database), 2, message)


@pytest.fixture
def one_crawl(tmp_path) -> dict:
    """The settings of an SQLite store holding one crawl, ``one``, and no page."""
    db = tmp_path / "one.sqlite3"
    store = SqliteStore(db)
    store.start_crawl({"crawl_id": "one", "query": "birds"})
    store.close()
    return {"FOCUSED_DB": db}


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        # Each was a traceback: SQLite takes no integer above 2**63 - 1, nor a lone surrogate
        # (what Python makes of command-line bytes that are not UTF-8).
        (("pages", "--top", "1" + "0" * 20), 2, "--top=100000000000000000000 is too large"),
        (("pages", "--level", "1" + "0" * 20), 2, "--level=100000000000000000000 is too large"),
        (("report", "one\udcff"), 1, "no crawl 'one\\udcff' in the SQLite store at "),
        (("pages", "--crawl", "one\udcff"), 1, "no crawl 'one\\udcff' in the SQLite store at "),
        (("recrawl", "one\udcff"), 1, "no crawl 'one\\udcff' in the SQLite store at "),
        # A mistyped option was taken for a crawl id (status 1, "no crawl '--jsno'").
        (("report", "--jsno"), 2, "unknown option --jsno (--help lists the options)"),
        (("recrawl", "--polcy", "one"), 2, "unknown option --polcy"),
        # Scrapy's usage and then its message (four lines); a TypeError traceback.
        (("crawls", "-s", "FOCUSED_DB"), 2, "Invalid -s value, use -s NAME=VALUE"),
        (("pages", "--top"), 2, "argument --top: expected one argument (--help lists the"),
        (("report", "--png"), 2, "argument --png: expected one argument"),
        (("recrawl", "--budget"), 2, "argument --budget: expected one argument"),
        (("restore", "-L"), 2, "argument -L/--loglevel: expected one argument"),
        (("recrawl", "one", "-s", "FEEDS=[1]"), 2, "Invalid -s value: a setting that holds a"),
        (("crawls", "-s", "FEEDS=" + "[" * 5000), 2, "setting FEEDS: JSON nested more than 100"),
        # Scrapy's spider loader imported it as the crawler process was made: a traceback.
        (
            ("recrawl", "one", "-s", "SPIDER_MODULES=spiders,no.such"),
            2,
            "setting SPIDER_MODULES: 'no.such' cannot be imported: No module named 'no'",
        ),
        # Its WARC file (focused.warc) would fail at the first page that changed.
        (
            ("recrawl", "one", "-s", "WARC_DIR=scrapy.cfg"),
            2,
            "cannot write WARC_DIR 'scrapy.cfg': scrapy.cfg is not a writable folder",
        ),
    ],
)
def test_odd_command_lines_give_one_line(cli, one_crawl, args, status, message):
    one_line_error(cli(*args, settings=one_crawl), status, message)


@pytest.mark.parametrize("args", [("crawls",), ("pages", "--crawl", "one")])
@pytest.mark.parametrize(
    "setting",
    [
        {"DOWNLOAD_BIND_ADDRESS": "192.0.2.1"},
        {"SPIDER_MODULES": "spiders,elsewhere"},
        {"FEEDS": '{"/proc/nowhere/pages.jsonl": {"format": "jsonlines"}}'},
    ],
)
def test_the_store_commands_let_the_crawl_machine_settings_be(cli, one_crawl, args, setting):
    """A project's settings for the machine that crawls (an address only it has, a spider
    module only installed there, a feed in a folder only it has) refused every store command on
    another, which reads the store and neither fetches, loads a spider nor writes a feed."""
    result = cli(*args, settings={**one_crawl, **setting})
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("command", ["crawls", "pages", "report"])
def test_a_database_of_another_program_is_left_as_it_was(tmp_path, cli, command):
    """The reading commands write nothing: they gave another program's SQLite file (or an
    empty file) the crawler's tables, and then said it held no crawls."""
    db = tmp_path / "other.sqlite3"
    with sqlite3.connect(db) as other:
        other.execute("CREATE TABLE notes (text)")
    other.close()
    before = db.read_bytes()
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    for path in (db, empty):
        one_line_error(
            cli(command, settings={"FOCUSED_DB": path}), 1, "not a store of this crawler"
        )
    assert db.read_bytes() == before and empty.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite3", "other.sqlite3"]


@pytest.fixture
def media(stored, tmp_path) -> Path:
    """A copy of the stored crawls in a folder of its own, to be made read-only."""
    db = tmp_path / "media" / stored.db.name
    db.parent.mkdir()
    db.write_bytes(stored.db.read_bytes())  # a store in WAL mode, its log merged
    return db


def test_a_store_on_read_only_media_can_be_read(sqlite, cli, media):
    """It could not be opened ("unable to open database file"): a reader opened it to write,
    and a store in WAL mode needs a -shm file made next to it."""
    with read_only(media.parent):
        for args in (("crawls",), ("pages", "--json"), ("report", "cut", "--json")):
            assert ok(cli(*args, settings={"FOCUSED_DB": media})) == ok(sqlite(*args))


def test_a_store_on_a_read_only_mount_can_be_read(sqlite, media):
    """As from a CD: the folder mounted read-only (in a mount namespace of the command's own)."""
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespace can be made here")
    folder = str(media.parent)
    mounted = ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', folder]
    for args in (("crawls",), ("report", "--json")):
        command = [*mounted, *scrapy_command(*args, "-s", f"FOCUSED_DB={media}")]
        result = subprocess.run(
            command, cwd=REPO, capture_output=True, text=True, timeout=120, env=crawl_env()
        )
        assert ok(Result(result.returncode, result.stdout, result.stderr)) == ok(sqlite(*args))
    assert sorted(path.name for path in media.parent.iterdir()) == [media.name]


def as_nobody(*args: str, db: Path) -> Result:
    """The real command line run by the unprivileged user ``nobody``, who may write neither
    the store nor its folder unless they allow all. It keeps the right to read any file
    (CAP_DAC_READ_SEARCH, no right to write): the interpreter may be in root's home, as in
    this project's environment, which ``nobody`` could not run else."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("running a command as another user needs root and setpriv")
    command = [
        "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
        "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search",
        *scrapy_command(*args, "-s", f"FOCUSED_DB={db}"),
    ]  # fmt: skip
    result = subprocess.run(
        command,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**crawl_env(), "PYTHONDONTWRITEBYTECODE": "1"},
    )
    if "setpriv:" in result.stderr:  # no capabilities to hand over here
        pytest.skip(result.stderr.strip())
    return Result(result.returncode, result.stdout, result.stderr)


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder every user can reach, as the store's folder would be for a real reader
    (pytest's are root's own, 0700): beneath one, SQLite would not open a crawl's -shm file
    for reading for ``nobody``, whose right to read any file it does not go by."""
    folder = Path(tempfile.mkdtemp(prefix="focused-test-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("folder", ["read-only folder", "shared folder", "crawl running"])
def test_a_user_who_may_not_write_the_store_reads_it(open_folder, folder):
    """The store root's, readable by all (0644). In a folder the user may not write, SQLite
    cannot make the -shm file of a store in WAL mode; in a shared one (1777, as /tmp) it made
    it, and an empty -wal, as the reader's: the store's owner, unless root, could then write
    it no more ("attempt to write a readonly database"). While a crawl writes it, the reader
    uses the crawl's -shm file and sees what the crawl's -wal holds."""
    db = filled_sqlite(open_folder / "store" / "focused.sqlite3")
    db.parent.chmod(0o1777 if folder == "shared folder" else 0o755)
    db.chmod(0o644)
    crawl = sqlite3.connect(db)
    try:
        if folder == "crawl running":
            crawl.execute("PRAGMA wal_autocheckpoint=0")  # the change only in the -wal file
            with crawl:
                crawl.execute("UPDATE crawls SET query = 'changed'")
        else:
            crawl.close()
        files = sorted(db.parent.iterdir())
        crawls = [
            json.loads(line) for line in ok(as_nobody("crawls", "--json", db=db)).splitlines()
        ]
        pages = ok(as_nobody("pages", "--json", db=db)).splitlines()
        report = json.loads(ok(as_nobody("report", "--json", db=db)))
        assert sorted(db.parent.iterdir()) == files  # nothing made beside the store
    finally:
        crawl.close()
    query = "changed" if folder == "crawl running" else "birds nest eggs"
    assert [(crawl["crawl_id"], crawl["query"]) for crawl in crawls] == [("c1", query)]
    assert [json.loads(line)["url"] for line in pages] == ["http://a.test/1"]
    assert report["crawl"]["crawl_id"] == "c1" and report["crawl"]["query"] == query


def test_a_write_ahead_log_another_user_left_is_one_line(open_folder):
    """A crawl of root's killed before its last checkpoint, its -shm file gone: the reader
    would make one of its own, which root's next crawl could not write if it were not root."""
    db = filled_sqlite(open_folder / "store" / "focused.sqlite3")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    with conn:
        conn.execute("INSERT INTO crawls (crawl_id) VALUES ('c2')")
    wal = db.with_name(f"{db.name}-wal")
    kept = wal.read_bytes()
    conn.close()
    wal.write_bytes(kept)  # as the kill left it, without its -shm
    db.parent.chmod(0o1777)
    result = as_nobody("crawls", db=db)
    one_line_error(result, 1, f"its write-ahead log {wal} cannot be read without making")
    assert sorted(path.name for path in db.parent.iterdir()) == [db.name, wal.name]


@pytest.mark.parametrize("immutable", ["folder", "file"])
def test_recrawl_refuses_a_store_on_read_only_media(cli, media, immutable):
    """Planned from the store, the recrawl would then have failed on its first write."""
    what = f"its folder {media.parent}" if immutable == "folder" else "the file"
    with read_only(media.parent if immutable == "folder" else media):
        result = cli("recrawl", "done", settings={"FOCUSED_DB": media})
    one_line_error(result, 2, f"SQLite store at {media} is read-only: {what} cannot be written")


@pytest.mark.parametrize("command", [("crawls",), ("pages",), ("report",), ("recrawl", "one")])
def test_a_folder_given_as_the_store_is_a_bad_setting(cli, tmp_path, command):
    """It said "no such file" (status 1)."""
    result = cli(*command, settings={"FOCUSED_DB": tmp_path})
    one_line_error(result, 2, f"SQLite store at {tmp_path}: it is a folder, not a file")


@pytest.mark.parametrize("command", [("crawls",), ("pages",), ("report",), ("recrawl", "one")])
def test_a_store_below_a_file_is_a_bad_setting(cli, tmp_path, command):
    """`-s FOCUSED_DB=notes.txt/x.sqlite3`: "no such file" (status 1), where a crawl said "not a
    folder" (status 2)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("mine", encoding="utf-8")
    result = cli(*command, settings={"FOCUSED_DB": notes / "x.sqlite3"})
    one_line_error(result, 2, f"SQLite store at {notes / 'x.sqlite3'}: {notes} is not a folder")
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("command", [("crawls",), ("pages",), ("report",), ("recrawl", "one")])
def test_an_empty_store_file_is_a_bad_setting(cli, command):
    """It meant the default file, focused.sqlite3 in the working directory."""
    result = cli(*command, settings={"FOCUSED_DB": ""})
    one_line_error(result, 2, "setting FOCUSED_DB needs a file, not ''")


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("report", "--png", ""), "--png"),  # drew nothing
        (("recrawl", "one", "--model", ""), "--model"),  # kept the crawl's scores
        (("pages", "--crawl", ""), "--crawl"),  # "no crawl ''", status 1
        (("recrawl", "one", "--policy", ""), "--policy"),
        (("crawls", "--logfile", ""), "--logfile"),  # Scrapy's own: ignored
        (("report", "-L", ""), "--loglevel"),
        (("pages", "--pidfile", ""), "--pidfile"),
    ],
)
def test_an_empty_option_value_is_a_bad_option(cli, one_crawl, args, option):
    one_line_error(cli(*args, settings=one_crawl), 2, f"{option} needs a value, not ''")


# -- the real command line -------------------------------------------------------------------


def test_the_command_line_prints_the_same(stored, sqlite, tmp_path):
    """The commands above ran in-process; ``scrapy`` itself prints the same."""
    settings = {"FOCUSED_DB": stored.db}
    for args in (("crawls",), ("pages", "--top", "5", "--json")):
        assert ok(run_cli(*args, settings=settings)) == ok(sqlite(*args))
    png = tmp_path / "cli.png"
    result = run_cli("report", "cut", "--png", png, settings=settings)
    assert ok(result) == ok(sqlite("report", "cut"))
    assert png_size(png) == PNG_SIZE
    assert result.stderr == f"plot written to {png}\n"


def test_errors_on_the_command_line():
    one_line_error(run_cli("pages", "--top", "0", settings={}), 2, "--top=0 is below its minimum 1")
    one_line_error(run_cli("report", settings=UNREACHABLE_MONGO), 1, "cannot reach the server")


# -- --help ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["crawls", "pages", "report", "recrawl", "forget"])
def test_help_prints_each_option_as_written(name):
    """Scrapy's help formatter takes a line of an option's help ending in ":" for a heading and
    title-cases it: "--model" read "Jobdir Crawl Saved In Dir (Jobdir/Relevance); Default" in
    a terminal of 80 columns."""
    command = import_module(f"focused.commands.{name}").Command()
    command.settings = Settings()
    scrapys = argparse.ArgumentParser()
    ScrapyCommand.add_options(command, scrapys)
    for width in range(40, 121):
        parser = argparse.ArgumentParser(
            formatter_class=lambda prog, width=width: ScrapyHelpFormatter(prog, width=width)
        )
        command.add_options(parser)
        printed = " ".join(parser.format_help().split())
        ours = {action.help for action in parser._actions} - {a.help for a in scrapys._actions}
        for text in ours - {None}:
            assert " ".join(text.split()) in printed, width


@pytest.mark.parametrize("name", ["pages", "report"])
def test_help_names_every_mark_a_page_status_may_carry(name):
    """The help said a status is followed by 'gone' or 'noindex' (and --json adds those two),
    not by 'duplicate', which a near-duplicate or rel=canonical copy carries."""
    marks = page_json({}).keys()
    assert marks, "page_json adds its marks to a page"
    described = " ".join(import_module(f"focused.commands.{name}").Command().long_desc().split())
    for mark in marks:
        assert f"'{mark}'" in described, mark


def test_a_title_or_query_never_drives_the_terminal(cli, tmp_path):
    """A page's title comes from the web: its escape sequences (a cleared screen, a window
    title, colours) and newlines were printed as they were."""
    db = tmp_path / "hostile.sqlite3"
    store = SqliteStore(db)
    hostile = "\x1b[2J\x1b]0;owned\x07birds\nfake row\x9b31m"
    shown = "\\x1b[2J\\x1b]0;owned\\x07birds\\x0afake row\\x9b31m"
    # No crawl writes the others so, but a store edited by hand or a document another
    # program wrote may: the report printed them as they were.
    crawl = {"crawl_id": f"c1{hostile}", "query": hostile, "strategy": hostile, "seeds": []}
    store.start_crawl({**crawl, "params": {hostile: hostile}})
    store.finish_crawl(crawl["crawl_id"], status="interrupted", finish_reason=hostile)
    page = {name: None for name in PAGE_FIELDS}
    page |= {"crawl_id": crawl["crawl_id"], "url": "http://a.test/", "title": hostile, "level": 0}
    store.save_pages([{**page, "relevance": 0.5, "is_relevant": True, "fetch_order": 1}])
    store.close()
    for command in (["crawls"], ["pages"], ["report"]):
        result = cli(*command, settings={"FOCUSED_DB": str(db)})
        out = ok(result)
        for text in (out, result.stderr):
            assert not any((ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0 for c in text), (
                text
            )
        assert shown in out, (command, out)


def test_a_title_never_turns_the_line_around():
    """Bidirectional controls (an RTL override, an isolate, a mark) were printed as they were:
    a terminal that does bidi showed the rest of the row, or a URL in it, reversed ("Trojan
    Source"). Right-to-left letters are text, and stay."""
    assert storecommand.printable("a\u202eb\u2067c\u200fd\u061ce\u202c") == (
        "a\\u202eb\\u2067c\\u200fd\\u061ce\\u202c"
    )
    assert storecommand.printable("עברית عربي") == "עברית عربي"


def test_columns_after_a_wide_crawl_id_line_up(cli, tmp_path):
    """A crawl id may be any letters; a Chinese one takes two terminal columns a character, and
    the columns after it were out of line by as many."""
    db = tmp_path / "wide.sqlite3"
    store = SqliteStore(db)
    for crawl_id in ("鸟类", "birds"):
        store.start_crawl({"crawl_id": crawl_id, "query": "birds", "strategy": "bfs", "seeds": []})
    store.close()
    lines = ok(cli("crawls", settings={"FOCUSED_DB": str(db)})).splitlines()
    # where "bfs" starts on screen: each wide character before it takes one more column
    starts = [
        len(before) + sum(unicodedata.east_asian_width(char) == "W" for char in before)
        for before in (line[: line.index("bfs")] for line in lines[1:])
    ]
    assert len(starts) == 2 and starts[0] == starts[1], lines
    assert storecommand.columns("鸟类e\u0301") == 5  # two wide, one narrow, one combining mark


# -- values no crawl writes ------------------------------------------------------------------

READERS = [
    ("crawls",),
    ("crawls", "--json"),
    ("pages",),
    ("pages", "--json"),
    ("report",),
    ("report", "--json"),
]


TWO_URLS = ("http://a.test/", "http://a.test/b")


def two_pages(store: storage.Store) -> None:
    """A finished crawl ``c1`` with two pages."""
    store.start_crawl({"crawl_id": "c1", "query": "birds", "strategy": "bfs", "seeds": []})
    store.finish_crawl("c1", pages=2, relevant=1, harvest_rate=0.5)
    page = {name: None for name in PAGE_FIELDS} | {"crawl_id": "c1", "level": 0}
    store.save_pages(
        [
            {**page, "url": "http://a.test/", "relevance": 0.9, "is_relevant": True},
            {**page, "url": "http://a.test/b", "relevance": 0.1, "is_relevant": False},
        ]
    )
    for order, url in enumerate(TWO_URLS, 1):
        store.update_pages([{"crawl_id": "c1", "url": url, "fetch_order": order}])


def strict_json_lines(text: str) -> list:
    """Each line of ``text`` as JSON, which has no NaN nor Infinity (Python's json reads them)."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is no JSON: {text}")

    return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]


@pytest.mark.parametrize(
    ("sql", "shown"),
    [
        # Each was a traceback in some or all of the reading commands.
        ("UPDATE crawls SET params = 'max_depth=5'", "crawls.params = 'max_depth=5'"),
        ("UPDATE crawls SET params = '[5]'", "crawls.params = [5]"),
        ("UPDATE crawls SET params = '" + "[" * 5000 + "'", "crawls.params = '[[["),
        ("UPDATE crawls SET seeds = 'http://a.test/'", "crawls.seeds = 'http://a.test/'"),
        ("UPDATE crawls SET started_at = x'01'", "crawls.started_at = b'\\x01'"),
        ("UPDATE crawls SET pages = 'two'", "crawls.pages = 'two'"),
        ("UPDATE crawls SET pages = -2", "crawls.pages = -2"),
        ("UPDATE crawls SET relevant = 'one'", "crawls.relevant = 'one'"),
        (
            "UPDATE crawls SET status = 'running', seen_at = '2020-01-01',"
            " heartbeat_interval = 'often'",
            "crawls.heartbeat_interval = 'often'",
        ),
        ("UPDATE pages SET relevance = 'high'", "pages.relevance = 'high'"),
        ("UPDATE pages SET level = 'top'", "pages.level = 'top'"),
        # A number but no figure: --json printed Infinity, which is no JSON.
        ("UPDATE pages SET relevance = 9e999", "pages.relevance = inf"),
        ("UPDATE crawls SET harvest_rate = -9e999", "crawls.harvest_rate = -inf"),
    ],
)
def test_a_value_of_another_type_is_shown_as_unknown(cli, tmp_path, sql, shown):
    """A cell edited by hand: the commands list what they can read, and say what they could
    not in one line."""
    db = tmp_path / "edited.sqlite3"
    store = SqliteStore(db)
    two_pages(store)
    store.close()
    with sqlite3.connect(db) as edit:
        edit.execute(sql)
    edit.close()
    # `scrapy crawls` reads no page of a finished crawl
    for args in READERS if sql.startswith("UPDATE crawls") else READERS[2:]:
        result = cli(*args, settings={"FOCUSED_DB": db})
        assert "http://a.test/" in ok(result) or args[0] == "crawls", (args, result.stdout)
        if "--json" in args:
            strict_json_lines(result.stdout)
        warning = f"warning: the SQLite store at {db} holds values of another type than"
        # one line (`pages` of a crawl still running says so in another)
        assert [line for line in result.stderr.splitlines() if "warning" in line] == [
            result.stderr.splitlines()[-1]
        ], result.stderr
        assert result.stderr.splitlines()[-1].startswith(warning), (args, result.stderr)
        assert shown in result.stderr, result.stderr


def test_a_recrawl_says_what_it_read_as_unknown(tmp_path):
    """recrawl plans with the values it can read: one line says which it could not."""
    db = tmp_path / "edited.sqlite3"
    store = SqliteStore(db)
    two_pages(store)
    store.close()
    with sqlite3.connect(db) as edit:
        edit.execute("UPDATE pages SET fetched_at = x'07'")
    edit.close()
    # It crawls (in a process of its own): the pages' host, a.test, resolves to nothing.
    result = run_cli("recrawl", "c1", settings={"FOCUSED_DB": db, "RETRY_ENABLED": False})
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: the SQLite store at {db} holds values of another type than their field's,"
        " planned as unknown: pages.fetched_at = b'\\x07'"
    ], result.stderr[-3000:]


@pytest.mark.parametrize("args", READERS)
def test_a_document_another_program_wrote_is_shown_as_unknown(
    cli,
    monkeypatch,
    mongo_client,  # noqa: F811
    args,
):
    """mongosh writes dates as BSON dates and numbers as doubles: a BSON date was a
    traceback; a whole double is read as the number it is."""
    two_pages(MongoStore(MONGO_SETTINGS["MONGO_URI"], "focused", client=mongo_client))
    edited = {"started_at": datetime(2026, 1, 1), "pages": 2.0, "relevant": "1"}
    mongo_client["focused"]["crawls"].update_one({"crawl_id": "c1"}, {"$set": edited})
    # NaN, which --json printed as no JSON reads it
    nan = {"level": 1.0, "relevance": float("nan")}
    mongo_client["focused"]["pages"].update_many({}, {"$set": nan})
    monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)
    result = cli(*args, settings=MONGO_SETTINGS)
    out = ok(result)
    assert "crawls.started_at = datetime.datetime(2026, 1, 1, 0, 0)" in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    if args == ("crawls",):
        assert rows(out) == [["c1", "-", "finished", "bfs", "-", "2", "1", "0.500", "birds"]]
    if args == ("pages", "--json"):
        assert [page["level"] for page in strict_json_lines(out)] == [1, 1]
    if "--json" in args:
        strict_json_lines(out)


def test_the_latest_crawl_is_the_latest_whose_id_can_be_read(cli, tmp_path):
    """A crawl record whose id was edited into no text, the newest: `scrapy pages` and
    `scrapy report` said there were no crawls in the store, which held one to show."""
    db = tmp_path / "edited.sqlite3"
    store = SqliteStore(db)
    two_pages(store)
    store.start_crawl({"crawl_id": "c2", "query": "birds", "strategy": "bfs", "seeds": []})
    store.close()
    with sqlite3.connect(db) as edit:
        edit.execute("UPDATE crawls SET crawl_id = x'02' WHERE crawl_id = 'c2'")
    edit.close()
    for args in (("pages",), ("report", "--json")):
        result = cli(*args, settings={"FOCUSED_DB": db})
        assert "http://a.test/b" in ok(result), (args, result.stderr)
        assert "crawls.crawl_id = b'\\x02'" in result.stderr


def test_a_crawl_of_unknown_id_is_counted_from_no_pages(
    cli,
    monkeypatch,
    mongo_client,  # noqa: F811
):
    """A running crawl's figures come from its pages: one whose id another program wrote as a
    number (unknown) was counted from the pages of no crawl id, MongoDB's answer to null."""
    crawls = mongo_client["focused"]["crawls"]
    crawls.insert_one({"crawl_id": 7, "status": "running", "started_at": "2026-01-01T00:00:00"})
    page = {"url": "http://a.test/", "is_relevant": True, "fetch_order": 5}
    mongo_client["focused"]["pages"].insert_one(page)  # of no crawl
    monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)
    result = cli("crawls", settings=MONGO_SETTINGS)
    assert rows(ok(result)) == [
        ["-", "2026-01-01 00:00:00 UTC", "running", "-", "-", "0", "0", "-", "-"]
    ]
    assert "crawls.crawl_id = 7" in result.stderr


def test_a_page_restored_without_level_or_fetch_order_is_reported(cli, tmp_path):
    """`scrapy restore` takes a page line whose level and fetch_order are null (it needs the
    fields, not their values): `scrapy report` then ended in a traceback, and `scrapy pages`
    printed its level as None."""
    db = tmp_path / "restored.sqlite3"
    store = SqliteStore(db)
    two_pages(store)
    store.close()
    page = {name: None for name in PAGE_FIELDS} | {"crawl_id": "c1", "url": "http://a.test/c"}
    unstored = tmp_path / "unstored-c1.jsonl"
    unstored.write_text(json.dumps({"kind": "page", "record": {**page, "relevance": 0.5}}) + "\n")
    settings = {"FOCUSED_DB": db}
    assert "restored 1 page" in ok(cli("restore", str(unstored), settings=settings))
    assert rows(ok(cli("pages", settings=settings)))[1] == [
        "0.500",
        "-",
        "-",
        "http://a.test/c",
        "-",
    ]
    png = tmp_path / "report.png"
    sections = report_sections(ok(cli("report", "--png", str(png), settings=settings)))
    assert rows(sections["levels"]) == [
        ["0", "2", "1", "50.0", "0.500"],
        ["-", "1", "0", "0.0", "0.500"],  # last: a level unknown
    ]
    # its place in fetch order unknown, it is left off the harvest curve
    assert rows(sections["deciles"])[-1] == ["100%", "2", "1", "0.500"]
    assert png_size(png) == PNG_SIZE
    report = json.loads(ok(cli("report", "--json", settings=settings)))
    assert report["totals"] == {
        **{"fetched": 2, "relevant": 1, "stored": 3, "relevant_not_stored": 0, "gone": 0},
        **{"relevant_rescored": 0, "noindex": 0, "duplicates": 0},
        "harvest_rate": 0.5,
    }
    assert report["levels"][-1]["level"] is None


def test_a_png_that_is_the_store_is_a_bad_option(cli, media):
    """`--png` overwrote the store with the plot, when a reading command writes nothing."""
    before = media.read_bytes()
    result = cli("report", "--png", str(media), settings={"FOCUSED_DB": media})
    one_line_error(result, 2, f"cannot write --png '{media}': it is the store, FOCUSED_DB")
    assert media.read_bytes() == before


# -- a reader that stops reading -------------------------------------------------------------


@contextmanager
def closed_pipe(monkeypatch) -> Iterator[None]:
    """stdout a pipe whose reader has left, as ``scrapy pages | head`` leaves it: the first
    write that reaches it fails with a broken pipe. Set in the test itself, since pytest
    puts its capture back between a fixture's setup and the test."""
    read, write = os.pipe()
    os.close(read)
    with open(write, "w") as out, monkeypatch.context() as patch:
        patch.setattr("sys.stdout", out)
        yield


@contextmanager
def unwritable_output(monkeypatch, output: str) -> Iterator[None]:
    """stdout a pipe whose reader has left (``gone``), a full disk (``full``: /dev/full) or
    closed (``closed``: Python then has no ``sys.stdout``)."""
    if output == "gone":
        with closed_pipe(monkeypatch):
            yield
        return
    with contextlib.ExitStack() as stack:
        patch = stack.enter_context(monkeypatch.context())
        full = stack.enter_context(open("/dev/full", "w")) if output == "full" else None
        patch.setattr("sys.stdout", full)
        yield


@pytest.mark.parametrize("args", READERS)
def test_a_reader_that_stops_reading_ends_the_command_quietly(cli, tmp_path, monkeypatch, args):
    """`scrapy pages | head`: a reader that has read enough is no failure; the command exited
    with status 1, which `set -o pipefail` takes for one."""
    db = tmp_path / "two.sqlite3"
    store = SqliteStore(db)
    two_pages(store)
    store.close()
    with closed_pipe(monkeypatch):
        result = cli(*args, settings={"FOCUSED_DB": db})
    assert (result.returncode, result.stderr) == (0, "")


def test_a_report_piped_to_head_still_draws_its_png(cli, tmp_path, monkeypatch):
    """The plot asked for was not drawn once the reader of the report had left."""
    db = tmp_path / "two.sqlite3"
    store = SqliteStore(db)
    two_pages(store)
    # titles longer than stdout's buffer: the pipe breaks while the report is printed
    titles = [{"crawl_id": "c1", "url": url, "title": "birds " * 2000} for url in TWO_URLS]
    store.update_pages(titles)
    store.close()
    png = tmp_path / "report.png"
    with closed_pipe(monkeypatch):
        result = cli("report", "--png", str(png), settings={"FOCUSED_DB": db})
    assert (result.returncode, result.stderr) == (0, f"plot written to {png}\n")
    assert png_size(png) == PNG_SIZE


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("args", READERS)
def test_output_that_cannot_be_written_is_one_line(cli, tmp_path, monkeypatch, args):
    """`scrapy pages --json > pages.jsonl` on a full disk ended in an OSError traceback."""
    db = tmp_path / "two.sqlite3"
    store = SqliteStore(db)
    two_pages(store)
    store.close()
    with open("/dev/full", "w") as full, monkeypatch.context() as patch:
        patch.setattr("sys.stdout", full)
        result = cli(*args, settings={"FOCUSED_DB": db})
    assert result == Result(1, "", "error: cannot write the output: No space left on device\n")


@pytest.mark.parametrize("args", READERS)
def test_a_closed_output_is_one_line(cli, tmp_path, monkeypatch, args):
    """`scrapy pages >&-`: Python has no sys.stdout, and the first line printed was an
    AttributeError traceback."""
    db = tmp_path / "two.sqlite3"
    store = SqliteStore(db)
    two_pages(store)
    store.close()
    with monkeypatch.context() as patch:
        patch.setattr("sys.stdout", None)
        result = cli(*args, settings={"FOCUSED_DB": db})
    assert result == Result(1, "", "error: cannot write the output: standard output is closed\n")


@pytest.mark.parametrize("args", [("pages",), ("report",), ("crawls",)])
def test_ctrl_c_ends_a_command_without_a_traceback(cli, tmp_path, monkeypatch, args):
    """Ctrl-C while a long listing is printed (or read) ended in a KeyboardInterrupt
    traceback; it ends the command with status 130, as a shell reports a command it
    interrupted."""
    db = tmp_path / "two.sqlite3"
    store = SqliteStore(db)
    two_pages(store)
    store.close()

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(SqliteStore, "pages", interrupted)
    monkeypatch.setattr(SqliteStore, "iter_pages", interrupted)
    monkeypatch.setattr(SqliteStore, "crawls", interrupted)
    assert cli(*args, settings={"FOCUSED_DB": db}) == Result(130, "", "")


@contextmanager
def unwritable_stderr(monkeypatch, how: str) -> Iterator[None]:
    """stderr closed (``2>&-``: Python has no ``sys.stderr``) or full (``2>/dev/full``). The
    full one is buffered, as Python's own is without PYTHONUNBUFFERED: closing it flushes
    again, and fails as Python's last flush at exit did (status 120), if the line is still
    in its buffer."""
    with monkeypatch.context() as patch:
        if how == "closed":
            patch.setattr("sys.stderr", None)
            yield
        else:
            with open("/dev/full", "w") as full:
                patch.setattr("sys.stderr", full)
                yield


def run_with_stderr_closed(command: list[str]) -> subprocess.CompletedProcess:
    """``command`` run as ``COMMAND 2>&-`` runs it: no file descriptor 2 at all."""
    return subprocess.run(
        ["sh", "-c", 'exec "$@" 2>&-', "sh", *command],
        cwd=REPO,
        env=crawl_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


UNWRITABLE = [
    "closed",
    pytest.param(
        "full", marks=pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
    ),
]


@pytest.mark.parametrize("how", UNWRITABLE)
@pytest.mark.parametrize(
    ("args", "status"), [(("pages", "--min-relevance", "7"), 2), (("pages", "--crawl", "x"), 1)]
)
def test_an_error_stderr_cannot_take_still_sets_the_exit_status(
    cli, tmp_path, monkeypatch, how, args, status
):
    """`scrapy pages --min-relevance 7 2>&-`: the error line, which cannot be printed, was an
    AttributeError (an OSError for 2>/dev/full) no one saw, and the command exited with status
    1 for a bad option too; or 120, its line left in stderr's buffer."""
    db = tmp_path / "two.sqlite3"
    store = SqliteStore(db)
    two_pages(store)
    store.close()
    with unwritable_stderr(monkeypatch, how):
        result = cli(*args, settings={"FOCUSED_DB": db})
    assert result == Result(status, "", "")


@pytest.mark.parametrize("how", UNWRITABLE)
def test_a_project_command_line_error_stderr_cannot_take_exits_2(monkeypatch, how):
    """The project's own commands (focused.replayweb, the benchmarks) likewise: argparse
    dropped the line, but left it in a full stderr's buffer (status 120 at exit), and a
    ConfigError found once reading was an AttributeError or OSError traceback, status 1."""

    def bad() -> None:
        raise ConfigError("--corpus 'x' names no corpus")

    with unwritable_stderr(monkeypatch, how):
        with pytest.raises(SystemExit) as parsed:
            CommandLineParser(prog="replayweb").parse_args(["--nope"])
        with pytest.raises(SystemExit) as checked:
            exit_on_config_error(bad, "replayweb")
    assert (parsed.value.code, checked.value.code) == (2, 2)


def test_a_reader_that_stops_reading_with_stderr_closed_is_no_failure(cli, tmp_path, monkeypatch):
    """`scrapy pages 2>&- | head -1` exited with status 1: the look for stderr in the same
    pipe was an AttributeError."""
    db = tmp_path / "two.sqlite3"
    store = SqliteStore(db)
    two_pages(store)
    store.close()
    with closed_pipe(monkeypatch), unwritable_stderr(monkeypatch, "closed"):
        result = cli("pages", settings={"FOCUSED_DB": db})
    assert result == Result(0, "", "")


def test_scrapy_pages_piped_to_head_exits_0(tmp_path):
    """The real command line, its warnings in the same pipe (`2>&1 | head`): Python flushes
    stdout once more as it exits, and the warnings come after the pages."""
    db = tmp_path / "many.sqlite3"
    store = SqliteStore(db)
    store.start_crawl({"crawl_id": "c1", "query": "birds", "strategy": "bfs", "seeds": []})
    page = {name: None for name in PAGE_FIELDS} | {"crawl_id": "c1", "level": 1}
    # more than a pipe holds (64 KiB), so that the command is still writing when head leaves
    store.save_pages(
        [{**page, "url": f"http://a.test/{n:05}", "relevance": 0.5} for n in range(3000)]
    )
    store.close()
    with sqlite3.connect(db) as edit:  # for a warning after the pages
        edit.execute("UPDATE pages SET level = 'top' WHERE url = 'http://a.test/00007'")
    edit.close()
    command = scrapy_command("pages", *settings_args({"FOCUSED_DB": db}))
    pages = subprocess.Popen(
        command, cwd=REPO, env=crawl_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert pages.stdout.readline() == b"crawl c1 is running: these are the pages it stored so far\n"
    pages.stdout.close()
    assert pages.wait(timeout=60) == 0


# -- pages gone, pages without text ----------------------------------------------------------


def marked_pages(store: storage.Store) -> None:
    """A finished crawl ``c1`` whose pages a recrawl found gone (404, 410), that asked not to
    be indexed (stored without text), both, or neither (a record without a status)."""
    fetched = {
        "render": "auto",
        "fetch_settings": {"USER_AGENT": "birdwatch/2.0", "RETRY_TIMES": 5},
    }
    store.start_crawl(
        {"crawl_id": "c1", "query": "birds", "strategy": "bfs", "seeds": [], **fetched}
    )
    store.finish_crawl("c1", pages=6, relevant=4, harvest_rate=4 / 6)
    page = {name: None for name in PAGE_FIELDS} | {"crawl_id": "c1", "level": 1, "text": "t"}
    marks = [  # url, status, robots, relevance, relevant
        ("a", 200, None, 0.9, True),
        ("b", 404, None, 0.8, True),
        ("c", 200, "noindex,nofollow", 0.7, True),
        ("d", 410, "noindex", 0.6, True),
        ("e", 410, None, 0.2, False),
        ("f", None, "nofollow", 0.1, False),
    ]
    store.save_pages(
        {
            **page,
            "url": f"http://a.test/{url}",
            "title": url.upper(),
            "status": status,
            "robots": robots,
            "text": None if robots and "noindex" in robots else "t",
            "relevance": relevance,
            "is_relevant": relevant,
            "fetch_order": order,
        }
        for order, (url, status, robots, relevance, relevant) in enumerate(marks, 1)
    )
    # A copy of page a, stored without text as the crawl stores one.
    copy = {"url": "http://a.test/g", "title": "G", "duplicate_of": "http://a.test/a"}
    store.save_pages([{**page, **copy, "status": 200, "text": None, "relevance": 0.05}])


MARKED_ROWS = [  # relevance, level, status, url, title
    ["0.900", "1", "200", "http://a.test/a", "A"],
    ["0.800", "1", "404 gone", "http://a.test/b", "B"],
    ["0.700", "1", "200 noindex", "http://a.test/c", "C"],
    ["0.600", "1", "410 gone noindex", "http://a.test/d", "D"],
    ["0.200", "1", "410 gone", "http://a.test/e", "E"],
    ["0.100", "1", "-", "http://a.test/f", "F"],
    ["0.050", "1", "200 duplicate", "http://a.test/g", "G"],
]


@pytest.fixture(params=["sqlite", "mongo"])
def marked(request, cli, tmp_path, monkeypatch, mongo_client):  # noqa: F811
    """``marked_pages`` in either store, and the commands run on it."""
    if request.param == "sqlite":
        db = tmp_path / "marked.sqlite3"
        store = SqliteStore(db)
        marked_pages(store)
        store.close()
        settings = {"FOCUSED_DB": db}
    else:
        marked_pages(MongoStore(MONGO_SETTINGS["MONGO_URI"], "focused", client=mongo_client))
        monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)
        settings = MONGO_SETTINGS
    return lambda *args: cli(*args, settings=settings)


def test_pages_shows_which_pages_are_gone_or_stored_without_text(marked):
    """A page a recrawl found gone (404, 410) or stored without its text (noindex) was listed
    as any other: a user picking relevant pages took them for pages to read."""
    assert rows(ok(marked("pages"))) == MARKED_ROWS
    assert rows(ok(marked("pages", "--relevant-only", "--top", "3")))[1:] == MARKED_ROWS[1:3]
    printed = [json.loads(line) for line in ok(marked("pages", "--json")).splitlines()]
    marks = [
        (page["url"][-1], page["gone"], page["noindex"], page["duplicate"]) for page in printed
    ]
    assert marks == [
        ("a", False, False, False),
        ("b", True, False, False),
        ("c", False, True, False),
        ("d", True, True, False),
        ("e", True, False, False),
        ("f", False, False, False),
        ("g", False, False, True),
    ]


def test_report_counts_the_pages_gone_or_stored_without_text(marked):
    """Also: how the crawl fetched beyond the project's settings, which its recrawl does too
    (focused.fetchsettings), was nowhere but in the crawl record."""
    sections = report_sections(ok(marked("report")))
    head = dict(line.split(None, 1) for line in sections["head"].splitlines())
    assert head["fetch"] == "render='auto', USER_AGENT='birdwatch/2.0', RETRY_TIMES=5"
    assert head["stored"] == (
        "3 gone (404 or 410), 2 noindex (without text), 1 duplicate (without text: see"
        " duplicate_of)"
    )
    assert rows(sections["top"]) == [
        [relevance, "-", "-", level, status, url, title]
        for relevance, level, status, url, title in MARKED_ROWS
    ]
    report = json.loads(ok(marked("report", "--json")))
    totals = report["totals"]
    assert (totals["gone"], totals["noindex"], totals["duplicates"]) == (3, 2, 1)
    assert [page["duplicate"] for page in report["top"]] == [False] * 6 + [True]
    assert [(page["gone"], page["noindex"]) for page in report["top"][:4]] == [
        (False, False),
        (True, False),
        (False, True),
        (True, True),
    ]
