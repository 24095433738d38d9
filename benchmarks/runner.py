"""Running real crawls for the benchmarks: each one a ``scrapy`` subprocess (the reactor cannot
restart), against a replay web served from this process on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

# Stats worth keeping from Scrapy's end-of-crawl dump (numbers only).
STAT_RE = re.compile(r"'([\w/]+)':\s*(-?[\d.]+(?:e-?\d+)?)[,}]")


@dataclass
class CrawlRun:
    """One finished crawl subprocess: exit status, wall time, the stats it dumped, its stderr."""

    returncode: int
    wall_seconds: float
    stats: dict[str, float] = field(default_factory=dict)
    stderr: str = ""

    @property
    def error(self) -> str:
        """The last line of stderr that says what went wrong ('' when the crawl succeeded)."""
        if self.returncode == 0:
            return ""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        hits = [line for line in lines if "error" in line.lower()]
        return (hits or lines or [f"exit status {self.returncode}"])[-1].strip()[:300]


def parse_stats(log: str) -> dict[str, float]:
    """Numeric stats from the 'Dumping Scrapy stats' block of a crawl's log."""
    _, _, dump = log.rpartition("Dumping Scrapy stats:")
    return {name: float(value) for name, value in STAT_RE.findall(dump.split("\n}", 1)[0] + "}")}


def option_args(arguments: Mapping[str, object], settings: Mapping[str, object]) -> list[str]:
    """``-a name=value`` for each spider argument, then ``-s NAME=value`` for each setting."""
    args: list[str] = []
    for name, value in arguments.items():
        args += ["-a", f"{name}={value}"]
    for name, value in settings.items():
        args += ["-s", f"{name}={value}"]
    return args


def scrapy_args(
    command: list[str], arguments: Mapping[str, object], settings: Mapping[str, object]
) -> list[str]:
    return [sys.executable, "-m", "scrapy", *command, *option_args(arguments, settings)]


def run_scrapy(
    command: list[str],
    arguments: Mapping[str, object] = {},
    settings: Mapping[str, object] = {},
    timeout: float = 1800,
    checkout: Path = REPO,
) -> CrawlRun:
    """Run ``scrapy COMMAND`` in the project directory with INFO logging (for the stats dump);
    ``checkout``: another copy of the project (a baseline revision, ``extract_revision``).

    Each run starts without the encoder vectors kept by earlier crawls (``focused.encodings``),
    as a first crawl of a site does, unless ``settings`` name an ``ENCODER_STORE_DIR``.
    """
    env = dict(os.environ, PYTHONPATH=str(checkout))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="focused-encodings-") as store:
        all_settings = {
            "LOG_LEVEL": "INFO",
            "FOCUSED_LOGSTATS_INTERVAL": 0,
            "ENCODER_STORE_DIR": store,
            **settings,
        }
        try:
            result = subprocess.run(
                scrapy_args(command, arguments, all_settings),
                cwd=checkout,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
            return CrawlRun(-1, time.monotonic() - started, {}, stderr + "\nerror: timed out")
    wall = time.monotonic() - started
    return CrawlRun(result.returncode, wall, parse_stats(result.stderr), result.stderr)


def report_head(title: str, module: str, argv: list[str] | None) -> list[str]:
    """A report's title and the exact command that produced it."""
    command = f"python -m {module} {shlex.join(argv if argv else sys.argv[1:])}".strip()
    return [f"# {title}", "", f"`{command}`", ""]


def output_folder(text: str) -> Path:
    """argparse type of ``--out``: a folder the reports can be written in (made if missing),
    checked before the benchmark runs; one that cannot be was a traceback once the run, of
    hours perhaps, was over. Given empty, it named the working directory."""
    from focused.errors import ConfigError, folder
    from focused.settingchecks import check_output_file

    out = folder(text)
    try:
        check_output_file(out / "report.md", f"reports in {text!r}", makes_folders=True)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return out


def check_topical_arguments(query: str, strategy: str | None = None) -> None:
    """The ``topical`` crawl's own check of a benchmark's ``--query`` and ``--strategy``, made
    before the benchmark starts: a bad one raises ``ConfigError`` (one line, exit 2), where it
    was a crawl failing after the set-up (exit 1), or a traceback in a baseline checkout."""
    from focused.arguments import parse_arguments

    arguments = {"query": query, "seeds": "http://127.0.0.1/"}  # the seed is checked apart
    if strategy is not None:
        arguments["strategy"] = strategy
    parse_arguments(arguments)


def extract_revision(revision: str, directory: Path) -> Path:
    """The files of git ``revision`` of this repository, written to a new ``directory``: the
    baseline a benchmark measures the working tree against."""
    from focused.errors import ConfigError  # here: a baseline checkout runs this module too

    directory.mkdir()
    archive = subprocess.run(["git", "archive", revision], cwd=REPO, capture_output=True)
    if archive.returncode != 0:  # a mistyped --baseline: CalledProcessError's traceback
        message = " ".join(archive.stderr.decode(errors="replace").split())
        raise ConfigError(f"--baseline {revision!r} is no revision of this repository: {message}")
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)
    return directory


def call_in_checkout(checkout: Path, script: str, function: str, *args: object) -> Any:
    """``function(*args)`` of the benchmark ``script``, run in a subprocess on ``checkout``'s
    code; its result goes through JSON.

    The script is this checkout's (the baseline may not have it); the code it measures is the
    checkout's own.
    """
    code = (
        f"import sys, json, runpy; sys.path.insert(0, {str(checkout)!r}); "
        f"function = runpy.run_path({script!r})[{function!r}]; "
        f"print(json.dumps(function(*json.loads({json.dumps(args)!r}))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=checkout, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"{checkout}: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
