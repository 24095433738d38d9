"""Errors that mean "the user asked for something wrong" and must end a run with one line."""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, NoReturn, TextIO

# The exit status of a command Ctrl-C ended, as a shell reports it.
INTERRUPTED = 128 + signal.SIGINT


def quiet_interrupts() -> None:
    """Make a Ctrl-C that no code of the process handles end it with status ``INTERRUPTED``
    and no traceback: it tells nothing the user does not know. The settings module calls it,
    the first project code a ``scrapy`` command runs: Ctrl-C in the time Scrapy then takes to
    import the commands and the project's modules, before a command's own handling of it
    (``focused.storecommand.interruptible``, Scrapy's handlers of a running crawl), printed a
    traceback of whatever was loading. Only an interrupt no ``except`` took reaches the hook:
    the graceful stop of a crawl and the cleanup of a command stay theirs."""
    previous = sys.excepthook

    def hook(
        kind: type[BaseException], value: BaseException, traceback: TracebackType | None
    ) -> None:
        if interrupted_by_ctrl_c(value):
            # CPython ends the process with a SystemExit raised by its excepthook, as with
            # sys.exit (atexit runs); returned from, it prints nothing and kills itself with
            # SIGINT, a status of 130 to a shell but not the 130 the commands exit with.
            exit_interrupted()
        previous(kind, value, traceback)

    sys.excepthook = hook
    resend_lost_interrupts()


def interrupted_by_ctrl_c(error: BaseException | None) -> bool:
    """Whether ``error`` is a Ctrl-C, or an error it caused: Python 3.11 wraps one that lands
    in a class's ``__set_name__`` (dataclasses' fields, as pymongo's modules load) in a
    RuntimeError, whose traceback then ended the command."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def resend_lost_interrupts() -> None:
    """Send Ctrl-C again if it has not ended the process a moment later: Python can lose it.
    A KeyboardInterrupt raised in Python code that C code calls and then clears every error
    of is gone without a word: Python 3.11's import does so as it reads ``__spec__`` of a
    module in ``sys.modules`` that is a proxy with a ``__getattribute__`` of its own (Twisted's
    ``twisted.python.compat``, at each ``from ... import`` of it). One raised in a weakref
    callback or a ``__del__`` (importlib runs one as each module finishes loading) is printed
    as "Exception ignored" and goes no further. Either way the command went on, to wait a
    minute for a store server that never answered (session 54's and 55's CI). Python's own
    handler gives way to one that raises the same KeyboardInterrupt and sends the signal again
    after ``INTERRUPT_AGAIN_AFTER`` seconds unless the process is ending by then
    (``exit_interrupted``): to the handler then in place, a running crawl's if it took over,
    as a user would press Ctrl-C again. A Ctrl-C ignored (``cmd &`` from a script) stays so."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not issubclass(unraisable.exc_type, KeyboardInterrupt):  # sent again: say nothing
            previous(unraisable)

    sys.unraisablehook = hook
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    ):
        signal.signal(signal.SIGINT, _interrupt)


# Seconds after a Ctrl-C until it is sent again if the process is not ending: a lost one is
# lost in microseconds, and a command's cleanup after one starts with exit_interrupted.
INTERRUPT_AGAIN_AFTER = 1.0
_ending = threading.Event()


def _interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    again = threading.Timer(INTERRUPT_AGAIN_AFTER, _interrupt_again)
    again.daemon = True
    with suppress(RuntimeError):  # the process is ending: no thread can start, none needed
        again.start()
    raise KeyboardInterrupt


def _interrupt_again() -> None:
    if not _ending.is_set():
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def exit_interrupted() -> NoReturn:
    """End the process that a Ctrl-C stopped: status ``INTERRUPTED``, and nothing more said.
    An object the interrupt left half built (pymongo's transaction, stopped in its __init__ as
    a command waited for its store) fails in its __del__ as the process ends, and Python
    printed that "Exception ignored" with its traceback."""
    _ending.set()
    sys.unraisablehook = lambda unraisable: None
    raise SystemExit(INTERRUPTED)


def say(line: str) -> None:
    """Write ``line`` and a newline on stderr, if stderr takes it. A stderr closed (``2>&-``:
    Python then has no ``sys.stderr``), full (``2>/dev/full``) or a pipe whose reader has left
    loses the line, and the command still exits with its own status: the failed write was a
    traceback no one saw (status 1, even for a bad option) or, the line kept in stderr's
    buffer, failed again at Python's last flush (status 120)."""
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        drop_output([sys.stderr])


def drop_output(streams: list[TextIO]) -> None:
    """Send what is still to be written to ``streams`` (files that failed a write) to
    /dev/null, their buffered text with it: Python's last flush at exit then does not fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in streams:
            with suppress(OSError, ValueError):  # no file (a test's capture): nothing to flush
                os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)


def one_line(exc: BaseException, cut: re.Pattern[str] | None = None) -> str:
    """An exception's message on one line, or its type's name if it has none; with ``cut``,
    only what comes before its first match (a library's dump appended to the message)."""
    text = str(exc) if cut is None else cut.split(str(exc), maxsplit=1)[0]
    return " ".join(text.split()) or type(exc).__name__


# How much of one value given by the user an error line shows: a 100 kB argument was echoed
# whole, a line no terminal or log shows readably.
QUOTE_LIMIT = 200


def cut(text: str) -> str:
    """``text`` as an error line quotes it: its first ``QUOTE_LIMIT`` characters and its length
    when it is longer."""
    if len(text) <= QUOTE_LIMIT:
        return text
    return f"{text[:QUOTE_LIMIT]}... ({len(text)} characters)"


def quoted(value: object) -> str:
    """``repr(value)`` cut as ``cut`` cuts it (a string's first characters within quotes): how
    an error line shows user input."""
    if isinstance(value, str):
        # Cut and counted by the string's own characters: its repr's quotes and escapes would
        # cut a string of 199 characters and count 202.
        if len(value) <= QUOTE_LIMIT:
            return repr(value)
        return f"{value[:QUOTE_LIMIT]!r}... ({len(value)} characters)"
    return cut(repr(value))


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, in the plural but for one: how a message counts things ("1 page",
    "2 pages"; ``plural``, when not the noun and an s: "2 processes")."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def spider_arguments(*given: str, scrapyd: bool) -> str:
    """How a message tells to give the spider arguments ``given`` ("name=value", each one way
    to do it): ``-a`` to ``scrapy crawl``, but ``-d`` to schedule.json for a Scrapyd job
    (``scrapyd``: the spider was given Scrapyd's ``_job`` argument), which takes no ``-a``."""
    flag, to = ("-d", " to schedule.json") if scrapyd else ("-a", "")
    return " or ".join(f"{flag} {argument}" for argument in given) + to


def setting_options(*given: str, scrapyd: bool, where: bool = True) -> str:
    """How a message tells to give the settings ``given`` ("NAME=VALUE", all of them): ``-s``
    to ``scrapy crawl``, but ``-d setting=`` to schedule.json for a Scrapyd job (``scrapyd``, as
    ``spider_arguments`` takes it), which takes no ``-s``; ``where``: saying "to
    schedule.json" (not of settings that were given)."""
    flag, to = ("-d setting=", " to schedule.json") if scrapyd else ("-s ", "")
    return " ".join(f"{flag}{setting}" for setting in given) + (to if where else "")


# A URI's user and password: up to the last @ before its host (a password may hold an @, which
# urllib, and so Scrapy's FTP feeds and redis-py, read up to the host's).
USER_INFO = re.compile(r"(?<=//)[^/?#\s'\"]*@")


def _secret_name(other: str) -> str:
    """A pattern of a name of characters but ``other`` (a character class's) that names a
    secret."""
    part = f"[^{other}]"
    return (
        f"{part}*?(?:password|passwd|secret|token|signature|credential){part}*"
        f"|{part}*?(?:key|key_?id|sig|pwd|pass)"
    )


# A query parameter that names a secret: a password (``redis://...?password=``, which redis-py
# reads), a token, a key, a signature (a signed S3 or GCS URL, Azure's sig) in a custom feed
# storage's URI. Not a file of keys (``ssl_keyfile``): the messages about one name it.
SECRET_PARAMETER = re.compile(
    r"(?<=[?&])(" + _secret_name(r"=&#\s") + r")=[^&#\s'\"]+", re.IGNORECASE
)
# A MongoDB URI's authMechanismProperties=NAME:VALUE,NAME:VALUE, whose AWS_SESSION_TOKEN is a
# credential; its ':' and ',' may be written %3A and %2C.
AUTH_PROPERTIES = re.compile(r"(?<=[?&])authMechanismProperties=[^&#\s'\"]+", re.IGNORECASE)
SECRET_PROPERTY = re.compile(
    r"((?:=|,|%2C)(?:" + _secret_name(r":,%=&#\s") + r")(?::|%3A))(?:(?!%2C)[^,])+",
    re.IGNORECASE,
)


def redact_uri(text: str) -> str:
    """``text`` with the user and password of each URI in it hidden, a query parameter that
    names a secret (``SECRET_PARAMETER``), and a secret one of a MongoDB URI's
    ``authMechanismProperties`` (``SECRET_PROPERTY``): fit for logs."""
    text = SECRET_PARAMETER.sub(r"\1=***", USER_INFO.sub("***@", text))
    return AUTH_PROPERTIES.sub(lambda found: SECRET_PROPERTY.sub(r"\1***", found[0]), text)


# How deep JSON read as input (a setting given as JSON, a JOBDIR's files, a file to restore, a
# stored value) may nest; what the crawler writes nests a few levels. Python's parser raised a
# RecursionError, a traceback, at about 1,000 levels, and Scrapy's copy of its settings
# (deepcopy) at about 330.
JSON_DEPTH_LIMIT = 100


class JSONTooDeep(ValueError):
    """JSON nested more than ``JSON_DEPTH_LIMIT`` levels: no JSON the project reads, as text
    that is no JSON."""

    def __init__(self) -> None:
        super().__init__(f"JSON nested more than {JSON_DEPTH_LIMIT} levels deep")


def load_json(text: str | bytes) -> Any:
    """``json.loads(text)``, the one way the project reads JSON it is given: JSON nested more
    than ``JSON_DEPTH_LIMIT`` levels raises ``JSONTooDeep``, a ``ValueError`` as JSON that
    cannot be parsed does, which each reader turns into its one line."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JSONTooDeep from None
    # A value nests no deeper than its text has brackets: most are read without the walk.
    brackets = (b"[", b"{") if isinstance(text, bytes) else ("[", "{")
    if sum(text.count(bracket) for bracket in brackets) > JSON_DEPTH_LIMIT:
        _check_depth(value)
    return value


def _check_depth(value: Any) -> None:
    """``JSONTooDeep`` if ``value`` nests more than ``JSON_DEPTH_LIMIT`` lists and objects
    (walked without recursion, which is what fails on them)."""
    left = [(value, 1)]
    while left:
        item, depth = left.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        if depth > JSON_DEPTH_LIMIT:
            raise JSONTooDeep
        left.extend((child, depth + 1) for child in item)


class ConfigError(ValueError):
    """A bad spider argument, strategy parameter or setting.

    Its message is shown to the user as it is, on one line, with no traceback.
    """


# In argparse's own messages, a value it quotes (``repr``: ``invalid choice: 'x'``) or, in the
# others (``unrecognized arguments: x``), a word.
_ARGPARSE_VALUE = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\S+""")
_UNKNOWN_ARGUMENTS = "unrecognized arguments: "  # argparse's, before their list


def _cut_value(match: re.Match[str]) -> str:
    text = match[0]
    if text[0] in "'\"":
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):  # quotes that are not a repr's
            value = None
        if isinstance(value, str):  # the length of the value, not of its repr, as ``quoted``
            return text if len(value) <= QUOTE_LIMIT else quoted(value)
    return cut(text)


class CommandLineParser(argparse.ArgumentParser):
    """argparse for the project's commands (``focused.replayweb``, ``benchmarks.*``): a mistake
    in the arguments ends with one line, ``PROG: error: MESSAGE``, and exit status 2. argparse
    would print the usage first, which ``--help`` gives."""

    def error(self, message: str) -> NoReturn:
        # argparse quotes a value whole (a 100 kB bad choice, a 100 kB line): each is shown as
        # every other error line shows one (``quoted``, ``cut``). Unknown arguments are listed
        # joined by spaces, 50,000 short ones as long a line as one huge one: cut as one value.
        if message.startswith(_UNKNOWN_ARGUMENTS):
            message = _UNKNOWN_ARGUMENTS + cut(message.removeprefix(_UNKNOWN_ARGUMENTS))
        else:
            message = _ARGPARSE_VALUE.sub(_cut_value, message)
        say(f"{self.prog}: error: {message}")
        self.exit(2)


def at_least_one(text: str) -> int:
    """argparse type of a count (pages, rounds, crawls at once): a whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {quoted(text)}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def folder(text: str) -> Path:
    """argparse type of a folder to keep files in: given empty, it named the working directory
    (``--export-dir ''`` wrote the encoder's 23 MB export into it, after minutes of work)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"needs a folder, not {quoted(text)}")
    return Path(text)


def port(text: str) -> int:
    """argparse type of a TCP port: 0 (any free port) to 65535. The socket would refuse
    another with a traceback."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, not {quoted(text)}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {value}")
    return value


# The longest wait poll() takes, 2**31 - 1 ms (24.8 days), in whole seconds: a subprocess's
# timeout with its output captured (a benchmark's crawl) failed past it with an OverflowError,
# once the crawl ran.
MAX_SECONDS = (2**31 - 1) // 1000


def seconds(text: str) -> float:
    """argparse type of a duration in seconds: at least 0, and at most ``MAX_SECONDS`` (nan
    passes every comparison, and a timeout or a sleep of inf, or 1e300, fails with a
    traceback)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds, not {quoted(text)}"
        ) from None
    if not 0 <= value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"must be at least 0 and at most {MAX_SECONDS} (24.8 days), not {cut(text)}"
        )
    return value


def counts(text: str) -> list[int]:
    """argparse type of a comma-separated list of counts, e.g. ``100000,1000000``."""
    return [at_least_one(part.strip()) for part in text.split(",")]


def exit_on_config_error(main: Callable[[], int | None], prog: str) -> NoReturn:
    """Run a command's ``main`` and exit with its status. Input found bad only once it is read
    (``--corpus`` naming no corpus, for every benchmark that loads one) ends with one line,
    ``PROG: error: MESSAGE``, and exit status 2, as argparse's own checks do."""
    try:
        status = main()
    except ConfigError as exc:
        say(f"{prog}: error: {exc}")
        status = 2
    sys.exit(status)
