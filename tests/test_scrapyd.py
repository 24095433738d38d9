"""Deploy the project to a real Scrapyd on loopback and run a crawl through its JSON API."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import BIRD_QUERY, BIRD_SEED, REPO, Crawl
from tests.sites import GatedReplay, Hold
from tests.test_redis_frontier import wiki_fetches

SCRAPYD = Path(sys.executable).with_name("scrapyd")
DEPLOY = Path(sys.executable).with_name("scrapyd-deploy")
pytestmark = pytest.mark.skipif(
    not (SCRAPYD.exists() and DEPLOY.exists()), reason="scrapyd and scrapyd-client not installed"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def api(base: str, endpoint: str, data: list[tuple[str, str]] | None = None) -> dict:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with urllib.request.urlopen(f"{base}/{endpoint}", data=body, timeout=10) as response:
        return json.load(response)


def clean_env() -> dict[str, str]:
    """The environment without the repository on the path: the job must run from the egg."""
    hidden = ("PYTHONPATH", "SCRAPY_SETTINGS_MODULE")
    return {k: v for k, v in os.environ.items() if k not in hidden}


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture
def scrapyd(tmp_path):
    home = tmp_path / "scrapyd"  # outside the repository: a local spiders/ would shadow the egg
    home.mkdir()
    port = free_port()
    (home / "scrapyd.conf").write_text(
        "[scrapyd]\n"
        "bind_address = 127.0.0.1\n"
        f"http_port = {port}\n"
        "eggs_dir = eggs\nlogs_dir = logs\ndbs_dir = dbs\nitems_dir =\n"
        "poll_interval = 0.2\n"
    )
    server = subprocess.Popen(
        [str(SCRAPYD)],
        cwd=home,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its job processes too are killed with the group
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def up():
            try:
                return api(base, "daemonstatus.json")["status"] == "ok"
            except OSError:
                return False

        wait_for(up, 30, "scrapyd to start")
        yield base, home
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def deploy(base: str) -> None:
    deployed = subprocess.run(
        [str(DEPLOY), "env", "-v", "1"],
        cwd=REPO,
        env={**clean_env(), "SCRAPYD_URL": base + "/"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert deployed.returncode == 0, deployed.stderr[-2000:]
    assert json.loads(deployed.stdout)["spiders"] == 1, deployed.stdout


def job_state(base: str, jobid: str) -> str | None:
    """pending, running or finished."""
    jobs = api(base, "listjobs.json?project=focused")
    return next((state for state in jobs if any(j["id"] == jobid for j in jobs[state])), None)


def job_log(home: Path, jobid: str) -> str:
    return (home / "logs" / "focused" / "topical" / f"{jobid}.log").read_text()


def test_deploy_schedule_and_store_through_scrapyd(scrapyd, site, tmp_path):
    base, home = scrapyd
    deploy(base)
    db = tmp_path / "scrapyd.sqlite3"
    job = api(
        base,
        "schedule.json",
        [
            ("project", "focused"),
            ("spider", "topical"),
            ("strategy", "dfs"),
            ("max_depth", "2"),
            ("query", BIRD_QUERY),
            ("seeds", f"{site.url}/wiki/{BIRD_SEED}"),
            ("crawl_id", "via-scrapyd"),
            ("setting", f"FOCUSED_DB={db}"),
            ("setting", "CLOSESPIDER_PAGECOUNT=15"),
            ("setting", "CONCURRENT_REQUESTS=2"),
        ],
    )
    assert job["status"] == "ok", job

    wait_for(lambda: job_state(base, job["jobid"]) == "finished", 150, "the job to finish")
    log = job_log(home, job["jobid"])
    assert "Spider closed (closespider_pagecount)" in log, log[-3000:]

    crawl = Crawl(None, db, "via-scrapyd")
    pages = crawl.pages()
    assert len(pages) >= 15
    assert {page["strategy"] for page in pages} == {"dfs"}
    assert max(page["level"] for page in pages) <= 2  # the strategy parameter reached the queue
    record = crawl.crawl_record()
    assert record["strategy"] == "dfs" and record["params"] == {"max_depth": 2}
    assert record["status"] == "finished"
    assert len(wiki_fetches(site)) == len(pages)


def test_cancel_and_resume_a_jobdir_crawl_through_scrapyd(scrapyd, sample_graph, tmp_path):
    """README step 5: cancel.json stops a JOBDIR crawl cleanly, scheduling it again resumes it."""
    base, home = scrapyd
    deploy(base)
    # The articles beyond the first 8 wait until the job has taken the cancel: it is cut midway
    # however late the cancel comes (5 s were enough to spend the budget).
    server = GatedReplay(sample_graph, Hold(8), BIRD_SEED, delay=0.05).start()
    db, budget = tmp_path / "scrapyd.sqlite3", 30
    schedule = [
        ("project", "focused"),
        ("spider", "topical"),
        ("strategy", "bestfirst"),
        ("query", BIRD_QUERY),
        ("seeds", f"{server.url}/wiki/{BIRD_SEED}"),
        ("crawl_id", "resumed"),
        ("setting", f"FOCUSED_DB={db}"),
        ("setting", f"JOBDIR={tmp_path / 'job'}"),
        ("setting", f"CLOSESPIDER_PAGECOUNT={budget}"),
        ("setting", "CONCURRENT_REQUESTS=2"),
    ]
    try:
        first = api(base, "schedule.json", schedule)["jobid"]
        wait_for(lambda: len(wiki_fetches(server)) >= 8, 150, "the first run to fetch pages")
        assert api(base, "cancel.json", [("project", "focused"), ("job", first)])["status"] == "ok"
        wait_for(lambda: "shutting down gracefully" in job_log(home, first), 60, "the cancel")
        server.gate.release()
        wait_for(lambda: job_state(base, first) == "finished", 60, "the cancelled job to end")
        log = job_log(home, first)
        assert "Spider closed (shutdown)" in log, log[-3000:]
        paused = Crawl(None, db, "resumed")
        fetched_first = wiki_fetches(server)
        assert len(fetched_first) < budget
        assert len(paused.pages()) == len(fetched_first)  # every page fetched was stored
        assert paused.crawl_record()["status"] == "interrupted"

        second = api(base, "schedule.json", schedule)["jobid"]
        wait_for(lambda: job_state(base, second) == "finished", 150, "the resumed job to end")
        log = job_log(home, second)
        assert "Resuming crawl" in log and "Spider closed (closespider_pagecount)" in log
    finally:
        server.stop()
    fetched = wiki_fetches(server)
    counts = Counter(fetched)
    assert max(counts.values()) == 1, [path for path, n in counts.items() if n > 1]
    # The page budget is the crawl's: the resumed run stops when the total reaches it.
    assert len(fetched) == budget
    pages = paused.pages()
    assert len(pages) == len(fetched)
    assert sorted(page["fetch_order"] for page in pages) == list(range(1, len(pages) + 1))
    assert paused.crawl_record()["status"] == "finished"


def test_a_scrapyd_job_is_told_to_give_settings_as_schedule_json_takes_them(scrapyd, tmp_path):
    """A job refused for a setting it lacked was told to give ``-s NAME=VALUE``, which
    schedule.json does not take: it takes ``-d setting=NAME=VALUE``."""
    base, home = scrapyd
    deploy(base)
    job = [
        ("project", "focused"),
        ("spider", "topical"),
        ("strategy", "bfs"),
        ("query", BIRD_QUERY),
        ("setting", f"FOCUSED_DB={tmp_path / 'scrapyd.sqlite3'}"),
    ]
    with_password = [*job, ("seeds", "http://alice:s3cret@127.0.0.1:9/")]
    without_domain = [*job, ("seeds", "http://127.0.0.1:9/"), ("setting", "HTTPAUTH_PASS=p")]
    said = {
        api(base, "schedule.json", with_password)["jobid"]: (
            "error: seed 'http://***@127.0.0.1:9/' has a user name or password in it: give them"
            " as -d setting=HTTPAUTH_USER=... -d setting=HTTPAUTH_PASS=..."
            " -d setting=HTTPAUTH_DOMAIN=127.0.0.1:9 to schedule.json"
        ),
        api(base, "schedule.json", without_domain)["jobid"]: (
            "error: setting HTTPAUTH_PASS needs HTTPAUTH_DOMAIN, the host the credentials are"
            " sent to (-d setting=HTTPAUTH_DOMAIN=example.org to schedule.json: that host and its"
            " subdomains)"
        ),
    }
    for jobid, line in said.items():
        wait_for(lambda jobid=jobid: job_state(base, jobid) == "finished", 120, "the job to end")
        assert job_log(home, jobid).splitlines() == [line]
