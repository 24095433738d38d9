"""The crawl fork server of the tests (tests/crawlfork.py): a forked command is what its
subprocess would be, in the test's environment and directory, with signals and a time limit
reported as ``subprocess.run`` reports them.

Run as a module (``python -m tests.test_crawlfork WHAT``), this file is the probe the server
forks: it reports what it was given, or ends as told.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, crawl_args, crawl_env, page_name, run_scrapy, scrapy_command
from tests.crawlfork import CrawlForks


@pytest.fixture(scope="module")
def forks():
    server = CrawlForks(REPO, crawl_env())
    yield server
    server.close()


def probe(forks: CrawlForks, *args: str, env: dict[str, str] | None = None, timeout: float = 60):
    return forks.run(list(args), env or crawl_env(), timeout, module="tests.test_crawlfork")


def alone(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        scrapy_command(*args), cwd=REPO, capture_output=True, text=True, env=crawl_env()
    )


def test_a_forked_crawl_is_what_its_subprocess_is(forks, tmp_path, site):
    """The same command, refused or crawling, forked and in a subprocess: the same status,
    output and pages."""
    refused = crawl_args({"query": "birds", "seeds": site.url, "strategy": "nosuch"}, {})
    alone_run = alone(refused)
    forked = forks.run(refused, crawl_env(), 60)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        alone_run.returncode,
        alone_run.stdout,
        alone_run.stderr,
    )
    assert forked.returncode == 2 and forked.stderr.count("\n") == 1
    urls = {}

    def forked_run(args: list[str]) -> subprocess.CompletedProcess:
        return forks.run(args, crawl_env(), 120)

    for how, run in (("alone", alone), ("forked", forked_run)):
        arguments = {"query": "birds nests", "seeds": f"{site.url}/wiki/Albatross"}
        settings = {
            "FOCUSED_DB": tmp_path / how / "focused.sqlite3",
            "CLOSESPIDER_PAGECOUNT": 5,
            "CONCURRENT_REQUESTS": 1,
            "ENCODER_STORE_DIR": tmp_path / how / "encodings",
        }
        feed = tmp_path / how / "pages.jsonl"
        args = [*crawl_args({"strategy": "bfs", **arguments}, settings), "-O", str(feed)]
        result = run(args)
        assert result.returncode == 0, result.stderr[-3000:]
        urls[how] = [page_name(json.loads(line)["url"]) for line in feed.read_text().splitlines()]
    assert urls["alone"] == urls["forked"] and len(urls["forked"]) == 5


def test_the_fork_runs_in_the_tests_environment_and_directory_with_signals_at_their_default(
    forks,
):
    first = json.loads(probe(forks, "report", "x y", env={**crawl_env(), "PROBE": "one"}).stdout)
    assert first["argv"] == ["x y"] and first["cwd"] == str(REPO)
    assert first["env"] == "one" and first["stdin"] == ""
    assert first["sigint"] == "default_int_handler" and first["sigchld"] == "SIG_DFL"
    assert first["reactor"] is False
    second = json.loads(probe(forks, "report").stdout)
    assert second["env"] is None  # the first one's variable was its own
    # Each fork draws its own random numbers, as a process of its own would.
    assert first["random"] != second["random"] and first["numpy"] != second["numpy"]


def test_a_fork_killed_or_out_of_time_is_reported_as_subprocess_reports_it(forks):
    ended = probe(forks, "exit", "3")
    assert (ended.returncode, ended.stdout, ended.stderr) == (3, "out\n", "err\n")
    assert probe(forks, "signal").returncode == -signal.SIGTERM
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        probe(forks, "sleep", timeout=1)
    assert time.monotonic() - started < 30


def test_an_environment_the_interpreter_reads_at_its_start_gets_a_real_subprocess(forks):
    assert forks.serves(crawl_env())
    assert not forks.serves({**crawl_env(), "PYTHONPROFILEIMPORTTIME": "1"})
    assert not forks.serves({**crawl_env(), "LC_ALL": "C"})
    # run_scrapy takes the subprocess then: Python's -X importtime lines are in its output.
    env = {**crawl_env(), "PYTHONPROFILEIMPORTTIME": "1"}
    result = run_scrapy(["version"], timeout=60, env=env)
    assert result.returncode == 0 and "import time:" in result.stderr


def test_a_crawl_runs_with_the_libraries_on_the_tests_own_pythonpath(tmp_path, monkeypatch):
    """A release tried beside the venv (``PYTHONPATH=/tmp/w3lib26 pytest``) is what the crawls
    import too: their PYTHONPATH was the repository alone, so a crawl ran the venv's w3lib
    while the test around it ran the one tried."""
    (tmp_path / "w3lib").mkdir()
    (tmp_path / "w3lib" / "__init__.py").write_text('__version__ = "tried"\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    env = crawl_env()
    assert env["PYTHONPATH"].split(os.pathsep) == [str(REPO), str(tmp_path)]
    command = [sys.executable, "-c", "import focused, w3lib; print(w3lib.__version__)"]
    result = subprocess.run(command, cwd=tmp_path.parent, capture_output=True, text=True, env=env)
    assert (result.returncode, result.stdout) == (0, "tried\n"), result.stderr[-3000:]


def _report() -> None:
    import numpy

    print(
        json.dumps(
            {
                "argv": sys.argv[1:],
                "cwd": os.getcwd(),
                "env": os.environ.get("PROBE"),
                "stdin": sys.stdin.read(),
                "sigint": signal.getsignal(signal.SIGINT).__name__,
                "sigchld": signal.Handlers(signal.getsignal(signal.SIGCHLD)).name,
                "reactor": "twisted.internet.reactor" in sys.modules,
                "random": random.random(),
                "numpy": numpy.random.random(),
            }
        )
    )


if __name__ == "__main__":
    what, *rest = sys.argv[1:]
    if what == "report":
        sys.argv[1:] = rest
        _report()
    elif what == "exit":
        print("out")
        print("err", file=sys.stderr)
        sys.exit(int(rest[0]))
    elif what == "signal":
        os.kill(os.getpid(), signal.SIGTERM)
    elif what == "sleep":
        time.sleep(600)
