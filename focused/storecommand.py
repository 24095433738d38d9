"""The base of the commands that read the store (``crawls``, ``pages``, ``report``).

They read the crawl's own settings (``MONGO_URI``/``MONGO_DATABASE``, else ``FOCUSED_DB``), start
no crawler process (so no reactor and no logging), write nothing (a store on read-only media
can be read), and end any failure with one line on stderr: exit status 2 for a bad option or
setting (as ``scrapy crawl``; a folder as ``FOCUSED_DB``), 1 when the store is unreachable or
empty or the crawl unknown. This module lives outside ``focused.commands`` because Scrapy would
take every command class found there for a command of its own.
"""

from __future__ import annotations

import json
import os
import sys
import unicodedata
from abc import abstractmethod
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, NoReturn

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from focused.arguments import Param
from focused.errors import (
    ConfigError,
    JSONTooDeep,
    cut,
    drop_output,
    exit_interrupted,
    load_json,
    quoted,
    say,
)
from focused.settingchecks import check_settings, is_text
from focused.storage import Store, StoreError, StoreSettingError, open_store

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterator, Sequence

USAGE_ERROR = 2
NOT_FOUND = 1


class InspectError(Exception):
    """What was asked for is not in the store; the message is one line for the user."""


class StoreCommand(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        one_line_errors(parser)
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        try:
            scrapy_options(super().process_options, args, opts)
            check_settings(self.settings, crawls=False)
            self.check_options(args, opts)
        except ConfigError as exc:
            fail(str(exc), USAGE_ERROR)

    def check_options(self, args: list[str], opts: argparse.Namespace) -> None:
        """Validate (and convert) the options in place; raise ``ConfigError``."""
        if args:
            raise ConfigError(f"unexpected arguments: {cut(' '.join(args))}")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        # Ctrl-C: the user has seen enough of a long listing, or waited enough for a server.
        with interruptible():
            store = open_or_fail(self.settings, read_only=True)  # a server may keep it waiting
            try:
                with printing():
                    self.show(store, args, opts)
                say_unreadable(store, "shown")
            except (StoreError, InspectError) as exc:
                fail(str(exc), NOT_FOUND)
            finally:
                store.close()

    @abstractmethod
    def show(self, store: Store, args: list[str], opts: argparse.Namespace) -> None: ...


@contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C ends the command with status 130, as a shell reports it, and no traceback: it
    tells nothing the user does not know. For what a command does before Scrapy's own handlers
    (a crawl's) take Ctrl-C over: waiting for a server, launching Chromium, reading a store."""
    try:
        yield
    except KeyboardInterrupt:
        interrupted()


def interrupted(left: str | None = None) -> NoReturn:
    """End a command Ctrl-C stopped as ``interruptible`` does; from a command that writes,
    with one line saying what it ``left`` half done and how to finish it."""
    if left is not None:
        say(f"interrupted: {printable(left)}")
    exit_interrupted()


@contextmanager
def printing() -> Iterator[None]:
    """Print to a reader that may have read enough (``scrapy pages | head``): once it closes
    the pipe, the rest of the output goes to /dev/null, as Python's documentation advises (so
    that its last flush at exit does not complain either), and the command goes on to its end:
    exit status 0, as for the other tools of a pipeline that ``head`` ends, and ``report
    --png`` still draws its plot. Its warnings go the same way when stderr is the same pipe
    (``2>&1 | head``), and reach a terminal when it is one. An output that cannot be written
    (``--json > pages.jsonl`` on a full disk), or none (``>&-``: Python then has no
    ``sys.stdout``), ends the command in one line, status 1."""
    need_output()
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        gone = os.fstat(sys.stdout.fileno())
        streams = [sys.stdout]
        # A stderr that is no file (closed: None) has no reader to lose.
        with suppress(OSError, ValueError, AttributeError):
            if os.path.samestat(os.fstat(sys.stderr.fileno()), gone):
                streams.append(sys.stderr)
        drop_output(streams)
    except OSError as exc:  # the store's own failures are StoreError: this is the output's
        drop_output([sys.stdout])
        fail(f"cannot write the output: {exc.strerror or exc}", NOT_FOUND)


def need_output() -> None:
    """End the command in one line, status 1, if it has no output (``>&-``): a writing command
    asks before it writes anything, as ``printing`` asks before it prints."""
    if sys.stdout is None:
        fail("cannot write the output: standard output is closed", NOT_FOUND)


def say_unreadable(store: Store, read: str) -> None:
    """What a crawl never writes (a cell edited by hand, a document another program wrote) is
    read as unknown: one line says so, for whoever fixes it."""
    if store.unreadable:
        say(f"warning: {store.unreadable_warning(read)}")


def one_line_errors(parser: argparse.ArgumentParser) -> None:
    """argparse's own mistakes (an option without its value: ``scrapy pages --top``) end in one
    line and exit 2, as the command's others do: Scrapy's parser printed its usage first."""

    def error(message: str) -> NoReturn:
        fail(f"{message} (--help lists the options)", USAGE_ERROR)

    parser.error = error  # type: ignore[method-assign]


def fail(message: str, status: int) -> NoReturn:
    # One line whatever it quotes: a crawl id or a path from the store or the command line.
    say(f"error: {printable(message)}")
    sys.exit(status)


def open_or_fail(settings: Any, **options: bool) -> Store:
    """``open_store(settings, **options)``, or the end of the command in one line: exit status
    2 for a setting that names no usable store (a folder, read-only media for a writer), 1 for
    a store that cannot be reached or is missing."""
    try:
        return open_store(settings, **options)
    except StoreSettingError as exc:
        fail(str(exc), USAGE_ERROR)
    except StoreError as exc:
        fail(str(exc), NOT_FOUND)


_NO_EQUALS_SIGN = "Invalid -s value, use -s NAME=VALUE"  # Scrapy's message
_DICT_SETTING = "Invalid -s value: a setting that holds a dict takes a JSON object, -s NAME='{...}'"


def scrapy_options(
    process: Callable[[list[str], argparse.Namespace], None],
    args: list[str],
    opts: argparse.Namespace,
) -> None:
    """Scrapy's own handling of the options (``-s``, ``-a``, ``-L``...), its mistakes raised as
    ``ConfigError``: Scrapy prints its usage before the message of a ``UsageError`` (four
    lines), and a setting that holds a dict given JSON that is no object (``-s FEEDS='[1]'``)
    is a ``TypeError`` traceback. Scrapy leaves the options it does not know among the
    arguments: a mistyped one (``scrapy report --jsno``) would be taken for a crawl id. A
    setting given as JSON nested too deeply (``focused.errors.load_json``) is refused before
    Scrapy reads it: its own reading and copying of the settings recursed past Python's limit,
    a traceback."""
    for item in opts.set:
        name, _, value = item.partition("=")
        try:
            load_json(value)
        except JSONTooDeep as exc:
            raise ConfigError(f"setting {cut(name)}: {exc}") from None
        except ValueError:  # no JSON: text, or refused as Scrapy reads it
            pass
    try:
        process(args, opts)
    except UsageError as exc:
        if str(exc) == _NO_EQUALS_SIGN and all("=" in item for item in opts.set):
            # Scrapy says "use -s NAME=VALUE" also of -s FEEDS=notjson: JSON it cannot read.
            raise ConfigError(_DICT_SETTING) from None
        raise ConfigError(str(exc)) from None
    except TypeError:
        raise ConfigError(_DICT_SETTING) from None
    unknown = [arg for arg in args if arg.startswith("-")]
    if unknown:
        raise ConfigError(f"unknown option {cut(unknown[0])} (--help lists the options)")
    # Scrapy's options and the commands' own test their values for truth: an empty one would
    # be taken for one not given (`--png ''` drawing nothing, `--logfile ''` logging to stderr).
    for name, value in vars(opts).items():
        if value == "":
            raise ConfigError(f"--{name.replace('_', '-')} needs a value, not ''")


def parse_number(opts: argparse.Namespace, option: str, param: Param) -> None:
    """Turn the string value of ``--option`` into a number checked by ``param``."""
    name = option.lstrip("-").replace("-", "_")
    raw = getattr(opts, name)
    if raw is not None:
        setattr(opts, name, param.parse(option, raw))


def find_crawl(store: Store, crawl_id: str | None) -> dict[str, Any]:
    """The record of ``crawl_id``, or of the latest crawl when it is None."""
    where = f"the {store.backend} store at {store.location}"
    if crawl_id is not None and not is_text(crawl_id):  # no store can be asked for it
        raise InspectError(f"no crawl {quoted(crawl_id)} in {where}: crawl ids are UTF-8 text")
    if crawl_id is None:
        crawl_id = store.latest_crawl_id()
        if crawl_id is None:
            raise InspectError(f"no crawls in {where}")
    crawl = store.get_crawl(crawl_id)
    if crawl is None:
        raise InspectError(f"no crawl {quoted(crawl_id)} in {where} (`scrapy crawls` lists them)")
    return crawl


def print_json(record: Any) -> None:
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")


# C0 and C1 control characters and DEL, and the bidirectional controls (the Arabic letter mark,
# the left-to-right and right-to-left marks, embeddings, overrides and isolates), each shown as
# its escape. A page's title comes from the web and a query from whoever started the crawl: an
# escape sequence in one would drive the reader's terminal (colours, a cleared screen, a line
# rewritten), a newline break a table, and a right-to-left override show the rest of a row
# reversed in a terminal that does bidi.
_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))} | {
    code: f"\\u{code:04x}"
    for code in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
}


def printable(text: str) -> str:
    """``text`` with its control characters escaped, for a terminal."""
    return text.translate(_CONTROLS)


def print_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str) -> None:
    """Columns padded to their widest cell, ``align`` giving ``l`` or ``r`` for each; the last
    column is not padded (it holds free text: a query, a title). None, unknown, is ``-``."""
    cells = [
        ["-" if cell is None else printable(str(cell)) for cell in row] for row in [header, *rows]
    ]
    widths = [max(columns(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        padded = [
            pad(cell, width, right=side == "r")
            for cell, width, side in zip(row[:-1], widths, align, strict=False)
        ]
        sys.stdout.write("  ".join([*padded, row[-1]]).rstrip() + "\n")


def columns(text: str) -> int:
    """The terminal columns ``text`` takes: two for a wide character (CJK, most emoji), none
    for a combining mark. A crawl id may be any letters: ``len`` put the columns after a
    Chinese one out of line."""
    return sum(
        0 if unicodedata.combining(char) else 2 if unicodedata.east_asian_width(char) in "WF" else 1
        for char in text
    )


def pad(cell: str, width: int, right: bool) -> str:
    spaces = " " * (width - columns(cell))
    return spaces + cell if right else cell + spaces


def score(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
