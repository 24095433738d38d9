"""Shared fixtures: the loopback replay of the Wikispeedia sample, and crawls in a subprocess.

Full crawls run in a subprocess because Twisted's reactor cannot be restarted in one process.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from scrapy.exceptions import CloseSpider

from benchmarks.runner import option_args
from focused.replayweb import ReplayServer, load_graph, relevant_set
from focused.sqlitestore import SqliteStore
from tests.crawlfork import CrawlForks

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "tests" / "data" / "wikisample"
BIRDS = "subject.Science.Biology.Birds"
BIRD_QUERY = "birds species feathers nest eggs wings flight plumage"
BIRD_SEED = "Albatross"


@pytest.fixture(scope="session")
def sample_graph():
    return load_graph(SAMPLE)


@pytest.fixture(scope="session")
def bird_pages(sample_graph) -> set[str]:
    return relevant_set(sample_graph, BIRDS)


@pytest.fixture
def site(sample_graph, tmp_path):
    """The sample served on 127.0.0.1; its access log file lists every fetched path."""
    server = ReplayServer(sample_graph, log_path=tmp_path / "access.log").start()
    yield server
    server.stop()


@dataclass
class Crawl:
    result: subprocess.CompletedProcess
    db: Path
    crawl_id: str

    def pages(self, **filters) -> list[dict]:
        store = SqliteStore(self.db)
        try:
            return store.pages(self.crawl_id, order="fetch_order", **filters)
        finally:
            store.close()

    def crawl_record(self) -> dict | None:
        store = SqliteStore(self.db)
        try:
            return store.get_crawl(self.crawl_id)
        finally:
            store.close()


def scrapy_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "scrapy", *args]


def crawl_args(arguments: dict[str, str], settings: dict[str, object]) -> list[str]:
    return ["crawl", "topical", *option_args(arguments, settings)]


def run_crawl(
    tmp_path: Path,
    arguments: dict[str, str],
    settings: dict[str, object] | None = None,
    *,
    crawl_id: str = "test",
    extra: list[str] | None = None,
    timeout: float = 240,
    env: dict[str, str] | None = None,
) -> Crawl:
    db = tmp_path / "focused.sqlite3"
    all_settings = {
        "FOCUSED_DB": db,
        "LOG_LEVEL": "INFO",
        "FOCUSED_LOGSTATS_INTERVAL": 0,
        # Each crawl starts without the encoder vectors kept by earlier crawls (tests and users').
        "ENCODER_STORE_DIR": tmp_path / "encodings",
        **(settings or {}),
    }
    args = [*crawl_args({"crawl_id": crawl_id, **arguments}, all_settings), *(extra or [])]
    return Crawl(run_scrapy(args, timeout=timeout, env=env), db, crawl_id)


def run_scrapy(
    args: list[str], *, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python -m scrapy ARGS`` in the repository, its output captured as text: forked from
    the test worker's :class:`tests.crawlfork.CrawlForks` where it can be, else a subprocess."""
    env = env or crawl_env()
    if os.environ.get("FOCUSED_TEST_NO_FORK") != "1" and _crawl_forks().serves(env):
        return _crawl_forks().run(args, env, timeout)
    return subprocess.run(
        scrapy_command(*args), cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env
    )


@functools.cache
def _crawl_forks() -> CrawlForks:
    """The test worker's fork server, started at its first crawl and stopped as it exits."""
    forks = CrawlForks(REPO, crawl_env())
    atexit.register(forks.close)
    return forks


def as_from_a_terminal(module: str, first: str = "") -> list[str]:
    """The command that runs ``python -m MODULE`` as a terminal starts it: Ctrl-C (SIGINT) at its
    default and not blocked. A child inherits an ignored or blocked SIGINT from its parent, and
    in a full run the test worker's state is not ours to know: a run started with ``&`` from a
    script ignores SIGINT throughout (a replay web test failed in 2 of 3 full runs of session
    7, never alone; three store commands in a run of session 48). ``first``: Python statements
    (each ending with ``;``) run before the module, Ctrl-C already at its default."""
    start = (
        "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT]); "
        f"{first}"
        # alter_sys: __main__ is the module, as with -m, where a spawned worker finds its names.
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    return [sys.executable, "-c", start]


def interrupt_when_logged(process: subprocess.Popen, text: str) -> str:
    """Send ``process`` a SIGINT (Ctrl-C) as its stderr logs a line holding ``text``; the rest
    of its stderr, once it ended."""
    for line in process.stderr:
        if text in line:
            process.send_signal(signal.SIGINT)
            break
    return process.stderr.read()


def refused_start(pipeline, caplog) -> tuple[str, list[str]]:
    """The close reason of a storage pipeline whose start is refused, run as the engine runs it
    (open, close, spider closed), and the lines it logged."""
    with caplog.at_level(logging.INFO, logger="pipelines.storage"):
        with pytest.raises(CloseSpider) as closed:
            asyncio.run(pipeline.open_spider())
        asyncio.run(pipeline.close_spider())
        asyncio.run(pipeline.spider_closed(closed.value.reason))
    return closed.value.reason, [record.getMessage() for record in caplog.records]


def crawl_env() -> dict[str, str]:
    env = dict(os.environ)
    # The tests' own PYTHONPATH after the repository: a crawl runs with the libraries its test
    # runs with (a release tried beside the venv, PYTHONPATH=/tmp/w3lib26), not the venv's alone.
    inherited = os.environ.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), inherited] if inherited else [str(REPO)])
    return env


def page_name(url: str) -> str:
    return url.rsplit("/wiki/", 1)[1]
