"""Ctrl-C while a command checks what it needs before it starts (a store server that keeps it
waiting): exit status 130, as a shell reports a command Ctrl-C ended, and no traceback."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

import pytest

from tests.conftest import (
    BIRD_QUERY,
    BIRD_SEED,
    REPO,
    as_from_a_terminal,
    crawl_args,
    crawl_env,
    interrupt_when_logged,
    scrapy_command,
)
from tests.test_unstored import spilled


@pytest.fixture
def silent_server():
    """A loopback port that takes connections and never answers: a MongoDB that keeps its
    client waiting. Yields the URI, and a function that waits for the first connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(60)
    held = []

    def connected() -> None:
        held.append(listener.accept()[0])

    yield f"mongodb://127.0.0.1:{listener.getsockname()[1]}", connected
    for connection in held:
        connection.close()
    listener.close()


def start_waiting_for(uri: str, args: Sequence[str], first: str = "") -> subprocess.Popen:
    """``scrapy ARGS`` as from a terminal (``first``: as_from_a_terminal's), its store the
    silent server at ``uri``, which it waits for a minute."""
    store = ["-s", f"MONGO_URI={uri}", "-s", "MONGO_TIMEOUT_MS=60000"]
    return subprocess.Popen(
        [*as_from_a_terminal("scrapy", first=first), *args, *store],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=crawl_env(),
    )


@pytest.mark.parametrize(
    "command",
    [
        ("crawl", "topical", "-a", "query=birds", "-a", "seeds=http://127.0.0.1:9/"),
        ("recrawl", "c1"),
        ("pages",),
    ],
    ids=["crawl", "recrawl", "pages"],
)
def test_ctrl_c_while_the_store_keeps_the_command_waiting_is_status_130(silent_server, command):
    uri, connected = silent_server
    # Python's own Ctrl-C handler ends these commands (Scrapy's are not in place yet), and a
    # process started with SIGINT ignored has none: a test run started so (`cmd &` from a
    # script) had each command wait on for its server (the 3 failed so, session 48).
    process = start_waiting_for(uri, command)
    try:
        connected()  # the command is past its imports, waiting for the server
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert process.returncode == 130, stderr[-3000:]
    assert stdout == ""


# The project's settings loaded as Scrapy loads them (scrapy.cfg), after Scrapy's own modules;
# then a line on stderr for the test to wait for, before Scrapy runs the command.
_SETTINGS_LOADED = (
    "import scrapy.cmdline, sys; from scrapy.utils.project import get_project_settings; "
    "get_project_settings(); print('settings loaded', file=sys.stderr, flush=True); "
)


@pytest.mark.parametrize(
    "command",
    [
        ("crawl", "topical", "-a", "query=birds", "-a", "seeds=http://127.0.0.1:9/"),
        ("recrawl", "c1"),
        ("pages",),
        ("report",),
        ("crawls",),
        ("restore", "{spilled}"),
        ("forget", "c1", "-s", "FOCUSED_FRONTIER={redis}"),
    ],
    ids=["crawl", "recrawl", "pages", "report", "crawls", "restore", "forget"],
)
def test_ctrl_c_as_the_command_loads_is_status_130_without_a_traceback(
    silent_server, tmp_path, command
):
    """Ctrl-C in the time Scrapy takes to import the commands and the project's modules, once
    it has loaded the project's settings (the first project code a command runs) and before
    the command handles Ctrl-C itself, printed a traceback of whatever was loading. At each of
    these moments, the command now ends with status 130 and says nothing: the later ones find
    it waiting for its server (a MongoDB store, a Redis frontier that never answers)."""
    uri, _ = silent_server
    filled = {"spilled": str(spilled(tmp_path)), "redis": uri.replace("mongodb:", "redis:") + "/0"}
    args = [arg.format(**filled) for arg in command]
    for delay in (0, 0.05, 0.15, 0.4):
        process = start_waiting_for(uri, args, first=_SETTINGS_LOADED)
        try:
            assert process.stderr.readline() == "settings loaded\n"
            time.sleep(delay)
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=60)
        finally:
            process.kill()
        assert "Traceback" not in stderr, (delay, stderr[-3000:])
        assert (process.returncode, stdout, stderr) == (130, "", ""), delay


# Where Python loses or garbles a Ctrl-C, each met as the load test above was run again
# hundreds of times (session 55); each script then waits as a command waits for its server.
_LOST_CTRL_C = {
    # Printed as "Exception ignored" and gone: importlib runs such a callback as each module
    # finishes loading (session 54's CI). The next code to run is another callback.
    "dropped in a callback": """
import weakref
class Module: pass
first, second = Module(), Module()
watches = [
    weakref.ref(first, lambda ref: signal.raise_signal(signal.SIGINT)),
    weakref.ref(second, lambda ref: None),
]
del first, second
""",
    # Gone without a word: Python 3.11's import reads __spec__ of a module proxy (Twisted's
    # twisted.python.compat) and clears whatever its __getattribute__ raised.
    "swallowed by an import": """
class Proxy:
    interrupted = False
    def __getattribute__(self, name):
        if name == "__spec__" and not Proxy.interrupted:
            Proxy.interrupted = True
            signal.raise_signal(signal.SIGINT)
        return 1
sys.modules["proxied"] = Proxy()
from proxied import thing
""",
    # Wrapped in "RuntimeError: Error calling __set_name__" (dataclasses' fields, as pymongo
    # loads), whose traceback ended the command with status 1.
    "wrapped in another error": """
class Field:
    def __set_name__(self, owner, name):
        signal.raise_signal(signal.SIGINT)
class Properties:
    callback = Field()
""",
}


@pytest.mark.parametrize("where", list(_LOST_CTRL_C))
def test_ctrl_c_that_python_loses_still_ends_the_command_quietly(where):
    script = (
        "import signal, sys, time\n"
        "from focused.errors import quiet_interrupts\n"
        "quiet_interrupts()\n"
        f"{_LOST_CTRL_C[where]}"
        "time.sleep(30)\n"
        "print('went on', file=sys.stderr)\n"
    )
    started = time.monotonic()
    process = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert (process.returncode, process.stdout, process.stderr) == (130, "", "")
    assert time.monotonic() - started < 20  # the wait was interrupted, not waited out


def test_ctrl_c_while_the_engine_starts_pauses_the_crawl(tmp_path, site):
    """A stop asked while the engine_started handlers ran (the engine starting, not yet
    running) waited for an engine_started that had come already: the crawl went on to its end
    as if Ctrl-C had never been pressed."""
    settings = {
        "FOCUSED_DB": tmp_path / "focused.sqlite3",
        "CLOSESPIDER_PAGECOUNT": 30,
        "FOCUSED_LOGSTATS_INTERVAL": 0,
        "LOG_LEVEL": "INFO",
        "EXTENSIONS": json.dumps({"tests.user_components.SlowEngineStart": 900}),
    }
    arguments = {"strategy": "bfs", "query": BIRD_QUERY, "seeds": f"{site.url}/wiki/{BIRD_SEED}"}
    command = scrapy_command(*crawl_args(arguments, settings))
    process = subprocess.Popen(
        command, cwd=REPO, env=crawl_env(), stderr=subprocess.PIPE, text=True
    )
    try:
        stderr = interrupt_when_logged(process, "test: engine starting")
        assert process.wait(timeout=60) == 0, stderr[-3000:]
    finally:
        process.kill()
    assert "Closing spider (shutdown)" in stderr, stderr[-3000:]  # not at its 30 pages


HALF_BUILT = """
import sys
sys.path.insert(0, {repo!r})
from focused.storecommand import interruptible


class HalfBuilt:
    # pymongo's _Transaction, interrupted in its __init__: its __del__ reads what was never set.
    def __init__(self):
        raise KeyboardInterrupt

    def __del__(self):
        self.never_set


class Holder:
    pass


def build():
    holder = Holder()
    holder.cycle = holder  # freed by the collector, as the process ends
    holder.half = HalfBuilt.__new__(HalfBuilt)
    holder.half.__init__()


with interruptible():
    build()
"""


def test_an_object_a_ctrl_c_left_half_built_prints_nothing_as_it_goes(tmp_path):
    """Ctrl-C in the middle of pymongo building a session (the command waiting for its store)
    left a half-built transaction whose __del__ failed as the process ended: Python printed
    "Exception ignored in ... Traceback" (tests/test_interrupt.py's recrawl case, at times).
    Once a Ctrl-C ends the process, it says nothing."""
    script = tmp_path / "half_built.py"
    script.write_text(HALF_BUILT.format(repo=str(REPO)), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stdout, result.stderr) == (130, "", "")
