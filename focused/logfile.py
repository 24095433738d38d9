"""A ``LOG_FILE`` whose disk fills up: one line on stderr, and the crawl goes on.

Scrapy writes ``LOG_FILE`` through a ``logging.FileHandler``, which it makes anew three times
in a crawl (for the crawler process, the crawler, then the spider's settings), closing the one
before. Once a write to the file failed (a full disk, a quota), logging printed a traceback of
its own on stderr for every line, and closing the handler raised: the crawl died with a
traceback before fetching anything. The log is the crawl's diary, not its data, which goes to
the store: so the crawl goes on, says once on stderr that its log lines are being lost, and
writes them again once the disk takes them.

Scrapy has no hook for its handler, so ``guard_log_files`` wraps the root logger's
``addHandler``: each file handler's stream is a ``GuardedStream`` before its first line.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import TextIO

from focused.errors import quoted, say


def guard_log_files() -> None:
    """From now on, a log file that cannot be written is said once on stderr, never raised."""
    add_handler = logging.root.addHandler
    said: list[str] = []  # the file said, across the handlers Scrapy makes for it

    def add_guarded(handler: logging.Handler) -> None:
        if isinstance(handler, logging.FileHandler) and handler.stream is not None:
            handler.stream = GuardedStream(handler.stream, handler.baseFilename, said)
        add_handler(handler)

    logging.root.addHandler = add_guarded  # type: ignore[method-assign]


def null_closed_stderr() -> None:
    """A closed stderr (``2>&-``: Python then has no ``sys.stderr``) made /dev/null, before
    Scrapy makes its log handler: the handler failed as it was made (an AttributeError), so
    the run ended with status 1 before fetching anything, and a recrawl left its mark on the
    crawl's record. The log is lost, as the command line asked; the exit status still tells
    how the run ended."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the rest of the process


class GuardedStream:
    """A log file's stream whose failed writes are said once on stderr instead of raised."""

    def __init__(self, stream: TextIO, path: str, said: list[str]) -> None:
        self.stream = stream
        self.name = path
        self.said = said

    def write(self, text: str) -> None:
        self._call(self.stream.write, text)

    def flush(self) -> None:
        self._call(self.stream.flush)

    def close(self) -> None:
        self._call(self.stream.close)

    def _call(self, method: Callable[..., object], *args: str) -> None:
        try:
            method(*args)
        except OSError as error:
            if not self.said:
                self.said.append(self.name)
                say(
                    f"error: LOG_FILE {quoted(self.name)} cannot be written: "
                    f"{error.strerror or error}; the crawl goes on, and its log lines are lost "
                    "until the file takes them"
                )
