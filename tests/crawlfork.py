"""Crawls forked from a process that has already imported what every crawl imports.

A crawl still runs in a fresh process of its own (Twisted's reactor cannot be restarted), as
``python -m scrapy ARGS`` in the test's working directory and environment. But some 1.4 s of a
crawl's 2.1 s start on the CI machine is importing Scrapy, Twisted, numpy and gensim, and the
suite runs several hundred crawls. This server, one per test worker, imports
those modules once, never installs a reactor, reads no setting and builds no crawler, then forks
per crawl. The fork's parent, a waiter, tells the test the crawl's pid and its exit status.

What a fork cannot give a crawl is a start of its own: tests of what a command imports, or of
an environment the interpreter reads as it starts (``PYTHON*``, the locale), run a real subprocess
(:func:`tests.conftest.run_crawl` decides), as does every run with ``FOCUSED_TEST_NO_FORK=1``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

# Imported as a crawl imports them: pydantic kept out of itemadapter first, as the settings
# module does; gensim through the project's loader, which keeps scipy.stats and smart_open
# waiting. None of them installs a reactor (checked below). ONNX Runtime is not preloaded (0.07 s):
# its import leaves native threading state that a fork cannot use (the forked crawl aborted in
# C++ as it exited).
PRELOADED = (
    "focused.without_pydantic",
    "scrapy.cmdline",
    "scrapy.crawler",
    "scrapy.core.downloader.contextfactory",
    "scrapy.http",
    "scrapy.spiders",
    "numpy",
    "focused.gensim_api",
    "tokenizers",
)


def _serve(path: str) -> dict | None:
    """Fork a crawl per request until the test worker closes our stdin. Returns only in a
    forked crawl, with its request: the crawl then runs at the top of the module, so that its
    end is a plain interpreter exit (atexit handlers, threads joined) and nothing of the
    server's is still on the stack."""
    for name in PRELOADED:
        importlib.import_module(name)
    if "twisted.internet.reactor" in sys.modules:
        raise RuntimeError("a preloaded module installed Twisted's reactor")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the waiters are reaped by the kernel
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in ready:  # closed: the test worker is gone
            return None
        connection, _ = listener.accept()
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            listener.close()
            return _wait_for_crawl(connection)
        connection.close()


def _wait_for_crawl(connection: socket.socket) -> dict:
    """In the waiter: fork the crawl, send its pid, then its exit status as
    :attr:`subprocess.Popen.returncode` gives it (negative for a signal). Returns only in the
    crawl."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    with connection.makefile("rb") as lines:
        request = json.loads(lines.readline())
    pid = os.fork()
    if pid == 0:
        connection.close()
        return request
    connection.sendall(f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError):  # a test worker that is gone has no need of it
        connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    os._exit(0)


def _become_crawl(request: dict) -> None:
    """Turn the fork into ``python -m MODULE ARGS`` (Scrapy's command line) as
    ``subprocess.run`` starts it."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    with open(os.devnull, "rb") as nothing:
        os.dup2(nothing.fileno(), 0)
    for descriptor, name in ((1, "stdout"), (2, "stderr")):
        with open(request[name], "wb") as file:
            os.dup2(file.fileno(), descriptor)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # random reseeds itself in a fork; numpy's global generator does not (gensim's SVD reads it).
    sys.modules["numpy"].random.seed()
    sys.argv = [request["module"], *request["args"]]
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)


class CrawlForks:
    """The test worker's end: starts the server, and runs a crawl in a fork of it."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.cwd = cwd
        self.env = env
        self._dir = tempfile.TemporaryDirectory(prefix="focused-crawlfork-")
        self.path = os.path.join(self._dir.name, "socket")
        self.server = subprocess.Popen(
            [sys.executable, "-m", "tests.crawlfork", self.path],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        if self.server.stdout.readline() != b"ready\n":
            raise RuntimeError(f"the crawl fork server did not start ({self.server.wait()})")

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a crawl in ``env`` can be forked: the variables the interpreter reads as it
        starts (its own, the locale's) as the server's."""

        def interpreters(variables: dict[str, str]) -> dict[str, str]:
            return {
                name: value
                for name, value in variables.items()
                if name.startswith(("PYTHON", "LC_")) or name == "LANG"
            }

        return self.server.poll() is None and interpreters(env) == interpreters(self.env)

    def run(
        self, args: list[str], env: dict[str, str], timeout: float, module: str = "scrapy"
    ) -> subprocess.CompletedProcess:
        """``subprocess.run([python, -m, module, *args], capture_output=True, text=True)`` in
        the repository, with ``env``."""
        with tempfile.TemporaryDirectory(prefix="focused-crawl-") as scratch:
            outputs = {name: os.path.join(scratch, name) for name in ("stdout", "stderr")}
            request = {
                "module": module,
                "args": [str(arg) for arg in args],
                "cwd": str(self.cwd),
                "env": env,
                **outputs,
            }
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.connect(self.path)
                connection.sendall(json.dumps(request).encode() + b"\n")
                # Unbuffered: a status already read into a buffer would not wake select.
                with connection.makefile("rb", buffering=0) as replies:
                    pid = int(replies.readline())
                    if not select.select([connection], [], [], timeout)[0]:
                        os.kill(pid, signal.SIGKILL)
                        replies.readline()  # reaped
                        raise subprocess.TimeoutExpired(args, timeout)
                    status = int(replies.readline())
            texts = {name: Path(path).read_text() for name, path in outputs.items()}
        return subprocess.CompletedProcess(args, status, **texts)

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait(timeout=30)
        self._dir.cleanup()


if __name__ == "__main__":
    crawl = _serve(sys.argv[1])
    if crawl is not None:
        _become_crawl(crawl)
