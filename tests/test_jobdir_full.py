"""A JOBDIR whose disk fills up while the store still takes writes.

The crawl stops at the first JOBDIR write that fails, in one error line, exit status 1, no
traceback and no hang; the JOBDIR is left as ``kill -9`` at that moment would have left it, so
that the crawl, resumed once there is room, loses nothing a ``kill -9`` would not.

A full disk is made without a mount: the crawl runs under a launcher (``LAUNCHER``) that caps
every JOBDIR SQLite file at a few pages (SQLite's ``PRAGMA max_page_count``, the same
``SQLITE_FULL``, "database or disk is full", as a full disk), or a JOBDIR file written at the
close is a link to ``/dev/full`` (every write fails with ENOSPC, as on a full disk).
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import signal
import sqlite3
import subprocess
import sys
from collections import Counter

import pytest

from focused.replayweb import ReplayServer
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
from tests.test_crash_resume import in_flight_names, start_until_fetched, stored_names

CONCURRENT = 4

# Runs `scrapy` with every SQLite file opened by schedulers.base.connect_crash_safe (the JOBDIR
# files) capped at argv[1] pages of 4 KB: the first write past it fails with SQLITE_FULL.
LAUNCHER = """
import sqlite3, sys
import schedulers.base as base
connect, limit = base.connect_crash_safe, int(sys.argv.pop(1))
def capped(path, *args, **kwargs):
    db = connect(path, *args, **kwargs)
    if str(path) != ":memory:":
        sqlite3.Connection.execute(db, f"PRAGMA max_page_count = {limit}")
    return db
base.connect_crash_safe = capped  # before focused.resume, focused.simhash import it
from scrapy.cmdline import execute
execute(["scrapy", *sys.argv[1:]])
"""


def job_command(tmp_path, server, *, pages: int | None = None, **settings) -> list[str]:
    """A bird crawl of the sample with JOBDIR ``tmp_path/job``, the store beside it; with
    ``pages``, its JOBDIR files capped at that many pages."""
    arguments = {
        "strategy": "bestfirst",
        "query": BIRD_QUERY,
        "seeds": f"{server.url}/wiki/{BIRD_SEED}",
    }
    base = {
        "FOCUSED_DB": tmp_path / "focused.sqlite3",
        "JOBDIR": tmp_path / "job",
        "CONCURRENT_REQUESTS": CONCURRENT,
        "FOCUSED_LOGSTATS_INTERVAL": 0,
        "LOG_LEVEL": "INFO",
        # At most CONCURRENT + 1 requests in flight (see tests/test_crash_resume.py).
        "SCRAPER_SLOT_MAX_ACTIVE_SIZE": 1,
    }
    args = crawl_args(arguments, base | settings)
    if pages is None:
        return [sys.executable, "-m", "scrapy", *args]
    return [sys.executable, "-c", LAUNCHER, str(pages), *args]


def queued_names(jobdir) -> set[str]:
    """The pages whose requests the frontier file holds queued."""
    with sqlite3.connect(jobdir / "requests.queue" / "frontier.sqlite3") as conn:
        blobs = conn.execute("SELECT request FROM frontier").fetchall()
    return {page_name(pickle.loads(blob)["url"]) for (blob,) in blobs}


def run(command, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, cwd=REPO, env=crawl_env(), capture_output=True, text=True, timeout=timeout
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "] ERROR: " in line]


def test_a_full_jobdir_stops_the_crawl_in_one_line_and_the_resume_loses_nothing(
    tmp_path, sample_graph
):
    server = ReplayServer(sample_graph, delay=0.03).start()
    jobdir, db = tmp_path / "job", tmp_path / "focused.sqlite3"
    budget = 60
    try:
        # 40 pages of frontier file: full after about 20 pages fetched. Before the fix the
        # crawl never ended (the engine asked the broken frontier for requests in a loop).
        full = run(job_command(tmp_path, server, pages=40, CLOSESPIDER_PAGECOUNT=budget), 90)
        crawl_id = json.loads((jobdir / "focused.json").read_text())["crawl_id"]
        requested = {page_name(p) for p in server.fetched if p.startswith("/wiki/")}
        stored_at_stop = stored_names(db, crawl_id)
        in_flight = in_flight_names(jobdir)
        record_at_stop = Crawl(full, db, crawl_id).crawl_record()
        with sqlite3.connect(jobdir / "counters.sqlite3") as counters:
            counted = dict(counters.execute("SELECT name, value FROM counters"))["responses"]
        # Resumed with room: the cap lifted.
        resumed = run(job_command(tmp_path, server, CLOSESPIDER_PAGECOUNT=budget))
    finally:
        server.stop()

    assert full.returncode == 1, full.stderr[-3000:]
    assert "Traceback" not in full.stderr, full.stderr[-5000:]
    errors = error_lines(full.stderr)
    assert len(errors) == 1, errors
    assert f"JOBDIR {jobdir} can no longer be written" in errors[0]
    assert "database or disk is full" in errors[0] and ".sqlite3" in errors[0]
    assert "free space and run it again to resume" in errors[0]
    assert "Spider closed (jobdir_unwritable)" in full.stderr
    assert record_at_stop["status"] == "interrupted"
    assert record_at_stop["finish_reason"] == "jobdir_unwritable"
    assert 0 < len(stored_at_stop) < budget
    # As after kill -9: every page requested is stored, or in flight in the frontier file.
    assert requested - stored_at_stop <= in_flight
    assert len(in_flight) <= CONCURRENT + 1, in_flight
    # The budget's count is at most what was fetched, and spends no more than a kill -9 would:
    # the pages counted but not stored are those in flight.
    assert counted <= len(stored_at_stop) + len(in_flight)

    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr, resumed.stderr[-5000:]
    assert "closespider_pagecount" in resumed.stderr
    counts = Counter(page_name(p) for p in server.fetched if p.startswith("/wiki/"))
    refetched = {name for name, n in counts.items() if n > 1}
    assert refetched <= in_flight, refetched
    crawl = Crawl(resumed, db, crawl_id)
    pages = crawl.pages()
    names = [page_name(p["url"]) for p in pages]
    assert len(names) == len(set(names))
    # Every page fetched is stored, or queued again: one in flight at the stop counted against
    # the budget, as after a kill -9, and the resume may reach the budget before fetching it
    # again (seen under load).
    assert set(names) <= set(counts)
    assert set(counts) - set(names) <= queued_names(jobdir), set(counts) - set(names)
    assert [p["fetch_order"] for p in pages] == list(range(1, len(pages) + 1))
    # The budget lost at most the pages in flight at the stop, as a kill -9's.
    assert budget - (CONCURRENT + 1) <= len(pages) <= budget + CONCURRENT - 1, len(pages)
    assert crawl.crawl_record()["status"] == "finished"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_pause_on_a_full_disk_says_so_in_one_line_each_and_resumes_as_after_a_crash(
    tmp_path, sample_graph
):
    """Ctrl-C with the files written at the pause on a full disk (each a link to /dev/full):
    one error line per file, no traceback, the close reason jobdir_unwritable, exit 1; the
    resume loses nothing."""
    server = ReplayServer(sample_graph, delay=0.05).start()
    jobdir, db = tmp_path / "job", tmp_path / "focused.sqlite3"
    command = job_command(tmp_path, server, CLOSESPIDER_PAGECOUNT=60)
    try:
        crawl = start_until_fetched(command, server, 20, stderr=subprocess.PIPE)
        # Made once the crawl has started: the JOBDIR check refuses a JOBDIR with them.
        for name in ("spider.state.tmp", "requests.queue/active.json.tmp"):
            (jobdir / name).symlink_to("/dev/full")
        crawl.send_signal(signal.SIGINT)
        stderr = crawl.communicate(timeout=90)[1].decode()
        crawl_id = json.loads((jobdir / "focused.json").read_text())["crawl_id"]
        record = Crawl(None, db, crawl_id).crawl_record()
        stored_at_pause = stored_names(db, crawl_id)
        # Not saved, and no file cut short in their place: the resume reads them as missing.
        saved = [
            name
            for name in ("spider.state", "spider.state.tmp", "requests.queue/active.json")
            if os.path.lexists(jobdir / name)
        ]
        resumed = run(command)
    finally:
        server.stop()

    assert crawl.returncode == 1, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-5000:]
    errors = error_lines(stderr)
    assert len(errors) == 2, errors
    assert any("spider.state.tmp: No space left on device" in line for line in errors), errors
    assert any("active.json: No space left on device" in line for line in errors), errors
    assert all("the pause is not saved whole" in line for line in errors), errors
    assert record["status"] == "interrupted"
    assert record["finish_reason"] == "jobdir_unwritable"
    assert saved == []

    assert resumed.returncode == 0, resumed.stderr[-3000:]
    counts = Counter(page_name(p) for p in server.fetched if p.startswith("/wiki/"))
    pages = Crawl(resumed, db, crawl_id).pages()
    names = {page_name(p["url"]) for p in pages}
    assert stored_at_pause < names
    assert names == set(counts)
    assert [p["fetch_order"] for p in pages] == list(range(1, len(pages) + 1))


def _full_disk() -> None:
    """In the child: every write past 0 bytes fails with EFBIG, as on a full disk."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))


def test_a_job_file_that_a_full_disk_keeps_from_being_read_is_not_called_damaged(tmp_path):
    """A JOBDIR left by kill -9 (a write-ahead log without its index) on a full disk: reading
    it writes the index, which fails with "disk I/O error". The job is whole: the error says
    to free space, not to throw the crawl away; a file that is no database keeps that advice."""
    job = tmp_path / "job"
    job.mkdir()
    make = (
        "import os, sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "db.execute('PRAGMA journal_mode=WAL')\n"
        "db.execute('CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)')\n"
        "db.execute(\"INSERT INTO counters VALUES ('responses', 3)\")\n"
        "os._exit(0)  # as kill -9: the log stays\n"
    )
    subprocess.run([sys.executable, "-c", make, str(job / "counters.sqlite3")], check=True)
    (job / "counters.sqlite3-shm").unlink()
    command = [
        *scrapy_command("crawl", "topical"),
        *("-a", f"query={BIRD_QUERY}", "-a", "seeds=http://127.0.0.1:9/wiki/Albatross"),
        *("-s", f"JOBDIR={job}", "-s", f"FOCUSED_DB={tmp_path / 'focused.sqlite3'}"),
    ]
    full = subprocess.run(
        command,
        cwd=REPO,
        env=crawl_env(),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_full_disk,
    )
    assert full.returncode == 2, full.stderr[-3000:]
    assert full.stderr == (
        f"error: cannot use JOBDIR {str(job)!r}: counters.sqlite3 cannot be read (disk I/O"
        " error): free space on its disk (or copy the JOBDIR to another) and run the crawl"
        " again\n"
    )
    assert "use a new JOBDIR" not in full.stderr
    # With room, the same JOBDIR is read: the job was whole.
    with sqlite3.connect(job / "counters.sqlite3") as counters:
        assert counters.execute("SELECT value FROM counters").fetchone() == (3,)
