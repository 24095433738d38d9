"""Errors that mean "the user asked for something wrong" and must end a run with one line."""

from __future__ import annotations

import argparse
from typing import NoReturn


class ConfigError(ValueError):
    """A bad spider argument, strategy parameter or setting.

    Its message is shown to the user as it is, on one line, with no traceback.
    """


class CommandLineParser(argparse.ArgumentParser):
    """argparse for the project's commands (``focused.replayweb``, ``benchmarks.*``): a mistake
    in the arguments ends with one line, ``PROG: error: MESSAGE``, and exit status 2. argparse
    would print the usage first, which ``--help`` gives."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def at_least_one(text: str) -> int:
    """argparse type of a count (pages, rounds, crawls at once): a whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def counts(text: str) -> list[int]:
    """argparse type of a comma-separated list of counts, e.g. ``100000,1000000``."""
    return [at_least_one(part.strip()) for part in text.split(",")]
