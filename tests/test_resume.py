"""JOBDIR pause and resume: Ctrl-C, start again, nothing fetched twice, the crawl completes."""

from __future__ import annotations

import json
import pickle
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from collections import Counter, OrderedDict
from contextlib import closing
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest
from scrapy.settings import Settings

from focused.errors import ConfigError
from focused.jobchecks import check_feeds, check_store
from focused.resume import COUNTERS_FILE
from focused.sqlitestore import SqliteStore
from focused.storage import process_gone
from tests.conftest import (
    BIRD_QUERY,
    BIRD_SEED,
    REPO,
    Crawl,
    crawl_args,
    crawl_env,
    interrupt_when_logged,
    run_crawl,
    run_scrapy,
    scrapy_command,
)
from tests.sites import GatedReplay, Hold
from tests.test_refresh import stored_crawl


def test_ctrl_c_then_resume_fetches_nothing_twice(tmp_path, sample_graph):
    log = tmp_path / "access.log"
    # The articles beyond the first 40 wait for the Ctrl-C: the first run is cut however late
    # it comes (30 s were enough to finish the sample).
    server = GatedReplay(sample_graph, Hold(40), BIRD_SEED, delay=0.03, log_path=log).start()
    try:
        db = tmp_path / "focused.sqlite3"
        arguments = {
            "strategy": "bestfirst",
            "query": BIRD_QUERY,
            "seeds": f"{server.url}/wiki/{BIRD_SEED}",
        }
        settings = {
            "FOCUSED_DB": db,
            "JOBDIR": tmp_path / "job",
            "CONCURRENT_REQUESTS": 4,
            "FOCUSED_LOGSTATS_INTERVAL": 0,
            "LOG_LEVEL": "INFO",
        }
        command = scrapy_command(*crawl_args(arguments, settings))
        first = subprocess.Popen(
            command,
            cwd=REPO,
            env=crawl_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while len(server.fetched) < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.fetched) >= 40, "the first run did not get going"
        first.send_signal(signal.SIGINT)
        server.gate.release()
        _, stderr = first.communicate(timeout=60)
        assert first.returncode == 0, stderr[-3000:]
        assert "shutdown" in stderr
        fetched_first = [p for p in server.fetched if p.startswith("/wiki/")]
        crawl_id = _crawl_id_of(tmp_path / "job")
        paused = Crawl(None, db, crawl_id)
        paused_record = paused.crawl_record()
        assert paused_record["status"] == "interrupted"
        assert len(paused.pages()) == len(fetched_first)
        assert (tmp_path / "job" / "relevance" / "state.json").exists()  # the model it learnt

        second = subprocess.run(
            command, cwd=REPO, env=crawl_env(), capture_output=True, text=True, timeout=240
        )
        assert second.returncode == 0, second.stderr[-3000:]
        assert "Resuming crawl" in second.stderr
    finally:
        server.stop()

    fetched = [p for p in server.fetched if p.startswith("/wiki/")]
    assert len(fetched) > len(fetched_first)
    counts = Counter(fetched)
    assert max(counts.values()) == 1, [p for p, n in counts.items() if n > 1]
    resumed = Crawl(second, db, crawl_id)
    pages = resumed.pages()
    assert len(pages) == len(fetched)
    assert sorted(p["fetch_order"] for p in pages) == list(range(1, len(pages) + 1))
    record = resumed.crawl_record()
    assert record["status"] == "finished"
    assert record["pages"] == len(pages)
    # Started when the crawl began; the resume is on record beside it.
    assert record["started_at"] == paused_record["started_at"]
    assert record["resumed_at"] > paused_record["finished_at"]
    # The whole part of the sample reachable from the seed was crawled.
    assert len(pages) == len(_reachable(sample_graph, BIRD_SEED))


def _crawl_id_of(jobdir) -> str:
    import json

    return json.loads((jobdir / "focused.json").read_text())["crawl_id"]


def _reachable(graph, seed: str) -> set[str]:
    seen, todo = {seed}, [seed]
    while todo:
        for target in graph.links[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_topic_journal_survives_a_cut_line_and_restores_only_what_a_model_lacks(tmp_path):
    from focused.relevance import RelevanceModel
    from focused.resume import TopicJournal

    journal = TopicJournal(tmp_path)
    journal.append("albatross seabird wings", "en")
    with journal.path.open("ab") as file:
        file.write(b'["petrel nesting bur')  # a crash in the middle of a write
    journal.append("penguin colony eggs", None)
    assert journal.texts() == [("albatross seabird wings", "en"), ("penguin colony eggs", None)]

    saved = RelevanceModel("birds")  # as saved at a clean close after the first seed joined
    saved.add_topic_text("albatross seabird wings", "en")
    assert journal.restore(saved) == 1
    assert saved.topic_texts == 2
    fresh = RelevanceModel("birds")  # no model saved before the crash
    assert journal.restore(fresh) == 2
    assert (
        fresh.score("penguin colony eggs").combined
        > RelevanceModel("birds").score("penguin colony eggs").combined
    )


def _state_with(saved: bytes, name: str, value: object) -> bytes:
    return pickle.dumps({**pickle.loads(saved), name: value})


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda saved: saved[:20], "pickle data was truncated"),
        # Valid pickles of another value: 52 tracebacks, then a crawl that never ended.
        (lambda saved: pickle.dumps([1, 2]), "it holds a list, not a dict"),
        (
            lambda saved: pickle.dumps({**pickle.loads(saved), "host_pages": {}}),
            "its host_pages is a dict, not a Counter",
        ),
        # What they hold: a count of text was a traceback at the host's next page.
        (
            lambda saved: _state_with(saved, "host_pages", Counter({"example.org": "9"})),
            "its host_pages holds 'example.org': '9', not a host and a count",
        ),
        (
            lambda saved: _state_with(saved, "fetched_urls", {"http://example.org/", 7}),
            "its fetched_urls holds 7, not a URL",
        ),
        (
            lambda saved: _state_with(saved, "robots_failures", OrderedDict({"example.org": -1})),
            "its robots_failures holds 'example.org': -1, not a host and a count",
        ),
        (
            lambda saved: _state_with(
                saved, "robots_retry", OrderedDict({"example.org": (1e9, None, "yes")})
            ),
            "its robots_retry holds 'example.org': (1000000000.0, None, 'yes'), not a host and a "
            "retry",
        ),
        (
            lambda saved: _state_with(saved, "links_left_out", {"http://example.org/"}),
            "its links_left_out holds 'http://example.org/', not a fingerprint",
        ),
    ],
)
def test_a_spider_state_cut_short_resumes_as_after_a_crash(tmp_path, site, damage, reason):
    """Scrapy wrote JOBDIR/spider.state in place as the crawl closed: a kill then left it cut
    short, and the resume logged a traceback. One that is not what a crawl saves, alike."""
    arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/wiki/{BIRD_SEED}"}
    settings = {"JOBDIR": tmp_path / "job", "CLOSESPIDER_PAGECOUNT": 10}
    first = run_crawl(tmp_path, arguments, settings)
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    assert not (tmp_path / "job" / "spider.state.tmp").exists()  # written, then renamed
    stored = len(first.pages())
    state = tmp_path / "job" / "spider.state"
    state.write_bytes(damage(state.read_bytes()))
    resumed = run_crawl(tmp_path, arguments, {**settings, "CLOSESPIDER_PAGECOUNT": 40})
    log = resumed.result.stderr
    assert resumed.result.returncode == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    warnings = [line for line in log.splitlines() if "spider.state cannot be read" in line]
    assert len(warnings) == 1 and warnings[0].endswith("the crawl resumes as after a crash")
    assert f"({reason})" in warnings[0], warnings[0]
    pages = [page["url"] for page in resumed.pages()]
    assert len(pages) == len(set(pages)) > stored
    fetched = [path for path in site.fetched if path.startswith("/wiki/")]
    assert len(fetched) == len(set(fetched))  # nothing fetched twice


def test_a_damaged_relevance_model_is_learned_again_from_the_store(tmp_path, site):
    """JOBDIR/relevance that cannot be read (a disk error, a kill as it was written by an older
    version) was a gensim traceback and exit 1: the crawl could not be resumed."""
    arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/wiki/{BIRD_SEED}"}
    settings = {"JOBDIR": tmp_path / "job", "CLOSESPIDER_PAGECOUNT": 10}
    first = run_crawl(tmp_path, arguments, settings)
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    stored = len(first.pages())
    (tmp_path / "job" / "relevance" / "dictionary").write_bytes(b"not a pickle")
    # A budget above the pages already fetched, however far the first run overshot its own.
    budget = {"CLOSESPIDER_PAGECOUNT": stored + 10}
    resumed = run_crawl(tmp_path, arguments, {**settings, **budget})
    log = resumed.result.stderr
    assert resumed.result.returncode == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    warnings = [line for line in log.splitlines() if "relevance cannot be read" in line]
    assert len(warnings) == 1, log[-3000:]
    assert warnings[0].endswith("the relevance model learns again from the stored pages")
    # every page stored before, not only those after the saved state's count
    assert f"'focused/resume/pages_relearned': {stored}," in log, log[-3000:]
    assert len(resumed.pages()) > stored


def test_a_recrawl_killed_outright_holds_up_neither_the_resume_nor_the_next_recrawl(tmp_path, site):
    """A recrawl killed with kill -9 (or with its terminal, SIGHUP) leaves its mark in the
    crawl's record, fresh for 3 heartbeats: the crawl's JOBDIR resume and the next recrawl were
    refused for 90 s, as beside a recrawl "in another process". Into an SQLite store every
    recrawl holds the crawl's lock while it runs, and the kernel drops it with its process: a
    lock this run can take tells that the mark is a dead recrawl's."""
    arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/wiki/{BIRD_SEED}"}
    settings = {"JOBDIR": tmp_path / "job", "CLOSESPIDER_PAGECOUNT": 5}
    first = run_crawl(tmp_path, arguments, settings)
    assert first.result.returncode == 0, first.result.stderr[-3000:]

    def killed_recrawl() -> None:  # its mark, as a recrawl killed a moment ago leaves it
        store = SqliteStore(first.db)
        try:
            assert store.claim_recrawl(first.crawl_id, None, 30.0)
        finally:
            store.close()

    killed_recrawl()
    resumed = run_crawl(tmp_path, arguments, {**settings, "CLOSESPIDER_PAGECOUNT": 10})
    assert resumed.result.returncode == 0, resumed.result.stderr[-3000:]
    assert len(resumed.pages()) == 10
    assert resumed.crawl_record()["recrawl_seen_at"] is None  # the dead recrawl's mark is gone
    killed_recrawl()
    recrawl = run_scrapy(
        ["recrawl", first.crawl_id, "-s", f"FOCUSED_DB={first.db}", "-s", "LOG_LEVEL=INFO"],
        timeout=120,
    )
    assert recrawl.returncode == 0, recrawl.stderr[-3000:]
    assert f"Recrawl of crawl {first.crawl_id} (uniform, 10 pages)" in recrawl.stderr


def test_a_crawl_killed_outright_holds_up_no_recrawl_of_its_sqlite_store(tmp_path, site):
    """A crawl killed with kill -9 leaves its record ``running`` with a fresh heartbeat: its
    recrawl was refused for 90 s as beside a crawl "running in another process" (let it end,
    Ctrl-C pauses it: there was nothing to end), and a recrawl started within them stopped at
    its first heartbeat, taking the crawl for one started meanwhile. Into an SQLite store every
    process of a crawl holds the crawl's lock: a lock the recrawl holds tells that it is dead."""
    arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/wiki/{BIRD_SEED}"}
    first = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 10})
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    # Its record names its process, ended (as on MongoDB, where no lock tells).
    assert process_gone(first.crawl_record()["run_by"])
    store = SqliteStore(first.db)
    try:  # the record as the crawl killed a moment ago leaves it
        record = first.crawl_record()
        store.start_crawl({name: value for name, value in record.items() if name != "seen_at"})
    finally:
        store.close()
    settings = {"FOCUSED_DB": first.db, "LOG_LEVEL": "INFO", "DOWNLOAD_DELAY": 0.3}
    # Beating each second through its 3 s of fetches, the killed crawl's heartbeat fresh still.
    settings["FOCUSED_HEARTBEAT_INTERVAL"] = 1
    options = [arg for name, value in settings.items() for arg in ("-s", f"{name}={value}")]
    recrawl = run_scrapy(["recrawl", first.crawl_id, *options], timeout=120)
    assert recrawl.returncode == 0, recrawl.stderr[-3000:]
    assert f"Recrawl of crawl {first.crawl_id} (uniform, 10 pages)" in recrawl.stderr
    assert "10 unchanged" in recrawl.stderr, recrawl.stderr[-3000:]


def test_ctrl_c_while_the_spider_opens_pauses_the_crawl_cleanly(tmp_path, site):
    """The sentence encoder and the store load as the spider opens, before Scrapy's engine
    runs: a Ctrl-C then was taken as a second one (the reactor stopped under the opening
    spider: exit 1, ``forced_shutdown``, resumed as after a crash). It pauses, as later on."""
    settings = {
        "FOCUSED_DB": tmp_path / "focused.sqlite3",
        "JOBDIR": tmp_path / "job",
        "CLOSESPIDER_PAGECOUNT": 20,
        "FOCUSED_LOGSTATS_INTERVAL": 0,
        "LOG_LEVEL": "INFO",
    }
    arguments = {"query": BIRD_QUERY, "seeds": f"{site.url}/wiki/{BIRD_SEED}"}  # semantic
    command = scrapy_command(*crawl_args(arguments, settings))
    first = subprocess.Popen(command, cwd=REPO, env=crawl_env(), stderr=subprocess.PIPE, text=True)
    stderr = interrupt_when_logged(first, "Spider opened")
    assert first.wait(timeout=60) == 0, stderr[-3000:]
    assert "Closing spider (shutdown)" in stderr
    paused = Crawl(None, settings["FOCUSED_DB"], _crawl_id_of(tmp_path / "job"))
    record = paused.crawl_record()
    assert (record["status"], record["finish_reason"]) == ("interrupted", "shutdown")

    second = subprocess.run(
        command, cwd=REPO, env=crawl_env(), capture_output=True, text=True, timeout=240
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert paused.crawl_record()["status"] == "finished"
    assert len(paused.pages()) == 20
    fetched = [path for path in site.fetched if path.startswith("/wiki/")]
    assert max(Counter(fetched).values()) == 1


def _job_that_ran(jobdir, crawl_id: str) -> None:
    """A JOBDIR whose crawl ``crawl_id`` has counted responses (focused.resume.CrawlCounters)."""
    jobdir.mkdir()
    (jobdir / "focused.json").write_text(json.dumps({"crawl_id": crawl_id, "strategy": "bfs"}))
    with closing(sqlite3.connect(jobdir / COUNTERS_FILE)) as database, database:
        database.execute("CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER)")
        database.execute("INSERT INTO counters VALUES ('responses', 10)")


def test_a_jobdir_resumed_into_another_store_is_refused(tmp_path):
    """A JOBDIR crawl resumed with another store (FOCUSED_DB, relative to the working directory,
    run from elsewhere; MONGO_URI forgotten) went on in it: its pages split between two stores,
    the second's report 20 fetched, 10 stored, the pages before the pause missing. Its refusal
    left the other store made, an empty file where the resume was run."""
    jobdir, first = tmp_path / "job", tmp_path / "first.sqlite3"
    _job_that_ran(jobdir, "c1")
    stored_crawl(first, ["http://a.test/"])  # crawl c1, with its page
    config = SimpleNamespace(crawl_id="c1", jobdir_note="")
    check_store(Settings({"FOCUSED_DB": first, "JOBDIR": jobdir}), config)
    other = tmp_path / "other.sqlite3"
    refused = (
        f"JOBDIR holds crawl c1, which the SQLite store at {other} does not hold: resume it"
        " with the store its pages went to (FOCUSED_DB, or MONGO_URI), or use a new JOBDIR"
    )
    with pytest.raises(ConfigError, match=re.escape(refused)):
        check_store(Settings({"FOCUSED_DB": other, "JOBDIR": jobdir}), config)
    # Opened to be checked, then refused: no empty store left in the wrong place.
    assert not other.exists()
    # A JOBDIR whose crawl never got to fetch (its store failed as it started) may go on.
    (jobdir / COUNTERS_FILE).unlink()
    check_store(Settings({"FOCUSED_DB": other, "JOBDIR": jobdir}), config)


def test_a_resumed_crawl_keeps_the_feed_of_its_earlier_runs(tmp_path, site):
    """The README's -O pages.jsonl and its resume with the same command: -O opened the file
    anew, and the pages the crawl's first run exported were gone from it without a word (the
    store kept them). Refused in one line, the file as it was; -o adds the resumed run's pages."""
    arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/wiki/{BIRD_SEED}"}
    settings = {"JOBDIR": tmp_path / "job", "CLOSESPIDER_PAGECOUNT": 5}
    feed = tmp_path / "pages.jsonl"
    first = run_crawl(tmp_path, arguments, settings, extra=["-O", str(feed)])
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    exported = feed.read_text(encoding="utf-8")
    assert len(exported.splitlines()) == len(first.pages()) > 0
    resume = {**settings, "CLOSESPIDER_PAGECOUNT": 10}
    refused = run_crawl(tmp_path, arguments, resume, extra=["-O", str(feed)])
    assert refused.result.returncode == 2, refused.result.stderr[-3000:]
    assert refused.result.stderr == (
        f"error: the feed '{feed}' (-O) would be written anew, losing what the earlier runs of"
        " crawl test exported to it: give it with -o to add to it, or name another file\n"
    )
    assert feed.read_text(encoding="utf-8") == exported
    resumed = run_crawl(tmp_path, arguments, resume, extra=["-o", str(feed)])
    assert resumed.result.returncode == 0, resumed.result.stderr[-3000:]
    urls = [json.loads(line)["url"] for line in feed.read_text(encoding="utf-8").splitlines()]
    assert sorted(urls) == sorted(page["url"] for page in resumed.pages())
    # A new JOBDIR's crawl may start its file anew.
    new = run_crawl(
        tmp_path,
        arguments,
        {**settings, "JOBDIR": tmp_path / "job2"},
        crawl_id="other",
        extra=["-O", str(feed)],
    )
    assert new.result.returncode == 0, new.result.stderr[-3000:]


def test_a_copy_of_a_jobdir_the_crawl_went_on_without_is_refused(tmp_path, site):
    """A JOBDIR copied (a backup, a copy to a roomy disk) and then resumed after the crawl went
    on from the other copy went on from where the copy was: it fetched again every page stored
    since, counted them in the page budget, stored none of them (already fetched) and never
    queued their links: a budget of 30 ended at 20 pages. It is refused, the other copy still
    resumes, and so does a JOBDIR whose last run never reached the store."""
    arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/wiki/{BIRD_SEED}"}
    settings = {"JOBDIR": tmp_path / "job", "CLOSESPIDER_PAGECOUNT": 10}
    first = run_crawl(tmp_path, arguments, settings)
    assert first.result.returncode == 0, first.result.stderr[-3000:]
    shutil.copytree(tmp_path / "job", tmp_path / "copy")
    went_on = run_crawl(tmp_path, arguments, {**settings, "CLOSESPIDER_PAGECOUNT": 20})
    assert went_on.result.returncode == 0, went_on.result.stderr[-3000:]
    fetched = len(site.fetched)
    copy = {**settings, "JOBDIR": tmp_path / "copy", "CLOSESPIDER_PAGECOUNT": 30}
    refused = run_crawl(tmp_path, arguments, copy)
    assert refused.result.returncode == 2, refused.result.stderr[-3000:]
    latest = went_on.crawl_record()["resumed_at"]
    assert refused.result.stderr.strip().splitlines() == [
        f"error: JOBDIR '{tmp_path / 'copy'}' is behind crawl test: a run of the crawl started at"
        f" {latest}, after this JOBDIR's last, went on from another copy of it (going on from"
        " this one would fetch again the pages stored since); resume the crawl from that copy,"
        " or use a new JOBDIR"
    ]
    assert len(site.fetched) == fetched  # nothing fetched
    assert len(went_on.pages()) == 20
    # The JOBDIR the crawl went on from resumes, and so it does when the store holds an earlier
    # run of it as its latest (its last run's start never reached the store: a store that
    # failed, a kill).
    record = {name: value for name, value in went_on.crawl_record().items() if name != "seen_at"}
    store = SqliteStore(went_on.db)
    try:
        store.start_crawl(record)  # the first run's start, as the latest
        store.finish_crawl("test", status="interrupted", finish_reason="shutdown")
    finally:
        store.close()
    assert went_on.crawl_record()["resumed_at"] == record["started_at"]
    resumed = run_crawl(tmp_path, arguments, {**settings, "CLOSESPIDER_PAGECOUNT": 30})
    assert resumed.result.returncode == 0, resumed.result.stderr[-3000:]
    assert len(resumed.pages()) == 30


def _files_of(*places) -> dict[str, bytes]:
    """Every file under ``places`` (folders or files), by path, with its bytes."""
    files = [path for place in places for path in [place, *place.rglob("*")] if path.is_file()]
    return {str(path): path.read_bytes() for path in files}


def test_a_resumed_crawl_refuses_to_add_a_second_document_to_its_feed(tmp_path, sample_graph):
    """`-o pages.json`, Ctrl-C, the same command again: Scrapy wrote a second JSON array after
    the first (a second header line in a CSV feed, a second root in an XML one), and the file
    was no JSON (CSV, XML) any more. Refused in one line, nothing touched; a JSON lines feed
    takes the resumed run's pages, and a name Scrapy makes anew each run (%(time)s) is new."""
    server = GatedReplay(sample_graph, Hold(10), BIRD_SEED).start()
    try:
        arguments = {"strategy": "bfs", "query": "birds", "seeds": f"{server.url}/wiki/{BIRD_SEED}"}
        settings = {"JOBDIR": tmp_path / "job", "CLOSESPIDER_PAGECOUNT": 30}
        named = f"{tmp_path}/pages-%(crawl_id)s.json"  # the same file each run
        feeds = [*(tmp_path / f"pages.{kind}" for kind in ("json", "csv", "xml", "jsonl")), named]
        first_settings = {
            "FOCUSED_DB": tmp_path / "focused.sqlite3",
            "LOG_LEVEL": "INFO",
            "FOCUSED_LOGSTATS_INTERVAL": 0,
            **settings,
        }
        command = scrapy_command(
            *crawl_args({"crawl_id": "test", **arguments}, first_settings),
            *(arg for feed in feeds for arg in ("-o", str(feed))),
        )
        first = subprocess.Popen(
            command, cwd=REPO, env=crawl_env(), stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        while len(server.fetched) < 12 and time.monotonic() < deadline:
            time.sleep(0.05)
        first.send_signal(signal.SIGINT)
        server.gate.release()
        _, stderr = first.communicate(timeout=60)
        assert first.returncode == 0, stderr[-3000:]
        assert "'finish_reason': 'shutdown'" in stderr, stderr[-3000:]
        kept = _files_of(tmp_path / "job", tmp_path / "focused.sqlite3", *feeds[:-1])
        kept.update(_files_of(tmp_path / "pages-test.json"))
        assert all(kept[str(feed)] for feed in feeds[:-1])  # each holds the first run's pages
        earlier = "what the earlier runs of crawl test exported to it"
        refusals = [
            (["-o", feeds[0]], "a second JSON array"),
            (["-o", feeds[1]], "a second header line"),
            (["-o", feeds[2]], "a second XML root"),
            (["-o", f"{feeds[3]}:json"], "a second JSON array"),
            (["-o", named], "a second JSON array"),
        ]
        for extra, second in refusals:
            refused = run_crawl(tmp_path, arguments, settings, extra=[str(arg) for arg in extra])
            uri = str(extra[1]).removesuffix(":json")
            assert refused.result.returncode == 2, refused.result.stderr[-3000:]
            assert refused.result.stderr == (
                f"error: the feed '{uri}' holds {earlier}, and -o would add {second} after it:"
                " name another file, or use a .jsonl feed, which -o adds to (-O would write it"
                " anew, losing what it holds)\n"
            )
        for feed in (feeds[0], named):
            refused = run_crawl(tmp_path, arguments, settings, extra=["-O", str(feed)])
            assert refused.result.returncode == 2, refused.result.stderr[-3000:]
            assert refused.result.stderr == (
                f"error: the feed '{feed}' (-O) would be written anew, losing {earlier}: name"
                " another file (-o would add a second JSON array to it), or use a .jsonl feed\n"
            )
        assert _files_of(*map(Path, kept)) == kept  # neither the store, JOBDIR nor a feed
        stamped = f"{tmp_path}/stamped/pages-%(time)s.json"
        resumed = run_crawl(
            tmp_path, arguments, settings, extra=["-o", str(feeds[3]), "-o", stamped]
        )
        assert resumed.result.returncode == 0, resumed.result.stderr[-3000:]
        assert resumed.crawl_record()["finish_reason"] == "closespider_pagecount"
        lines = feeds[3].read_text(encoding="utf-8").splitlines()
        urls = sorted(page["url"] for page in resumed.pages())
        assert sorted(json.loads(line)["url"] for line in lines) == urls
        [new] = (tmp_path / "stamped").iterdir()
        assert len(json.loads(new.read_text(encoding="utf-8"))) < len(urls)  # this run's
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("name", "options", "second"),
    [
        ("pages.json", {}, "a second JSON array"),
        ("pages.data", {"format": "csv"}, "a second header line"),
        ("pages.xml", {}, "a second XML root"),
        ("pages-%(batch_id)d.json", {"batch_item_count": 5}, "a second JSON array"),
        ("pages-%(name)s.xml", {}, "a second XML root"),
        ("pages.jsonl", {}, None),
        ("pages.jl", {}, None),
        ("pages.pickle", {}, None),
        ("pages.marshal", {}, None),
        ("pages.csv", {"item_export_kwargs": {"include_headers_line": False}}, None),
        ("pages-%(time)s.json", {}, None),
        ("pages-%(batch_time)s.json", {"batch_item_count": 5}, None),
    ],
)
def test_which_feeds_a_crawl_adds_to(tmp_path, name, options, second):
    """A -o feed whose file (as Scrapy names it this run) holds anything is refused where its
    format is one document (JSON, XML, CSV with its header line), for a resumed JOBDIR crawl
    and a new one: the run would write a second one after it. A format of records one after
    the other takes them, and a name with the time in it is a new file."""
    jobdir = tmp_path / "job"
    _job_that_ran(jobdir, "c1")
    filled = name.replace("%(batch_id)d", "1").replace("%(name)s", "topical")
    (tmp_path / filled).write_bytes(b"records of the first run")
    settings = Settings({"JOBDIR": jobdir, "FEEDS": {f"{tmp_path}/{name}": options}})
    spider = partial(SimpleNamespace, name="topical", crawl_id="c1")
    if second is None:
        check_feeds(settings, "c1", spider)
        check_feeds(settings, "c2", spider)
        return
    with pytest.raises(ConfigError, match=re.escape(f"-o would add {second} after it:")):
        check_feeds(settings, "c1", spider)
    # A JOBDIR whose crawl never ran, or another crawl's, starts a new crawl: the run would
    # write its document after what the file holds all the same.
    new_crawl = f"-o would add {second} after what it holds: give it with -O to write it anew"
    with pytest.raises(ConfigError, match=re.escape(new_crawl)):
        check_feeds(settings, "c2", spider)
    # -O writes it anew, which a new crawl means to do; an empty file holds no document.
    overwrite = {**options, "overwrite": True}
    check_feeds(Settings({"FEEDS": {f"{tmp_path}/{name}": overwrite}}), "c2", spider)
    (tmp_path / filled).write_bytes(b"")
    check_feeds(settings, "c2", spider)
