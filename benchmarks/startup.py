"""Start-up of the project's commands, this checkout against a baseline revision.

    python -m benchmarks.startup --baseline main --rounds 10

A user meets a command's start-up at every run: a crawl refused for bad input, a listing of the
store, a report. Each round runs every command once in each checkout, alternating, as a fresh
``python -m scrapy`` process in the checkout's folder (its scrapy.cfg, its code). Wall is the
process's, CPU its user + system time. Each figure is the least over the rounds, as other
processes on the machine only ever add; ``scrapy version`` is Scrapy's own start-up with the
project's settings, the floor under the others.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

# What a user runs -> the arguments of `python -m scrapy`, with {tmp} a folder of the checkout's
# own and {site} the replay web of the test sample. Each but the last ends in its first second:
# a refusal for bad input, or no store to list. The last is a whole crawl of one page with the
# default strategy: Scrapy's engine, the extensions and the encoder built, then closed.
COMMANDS = {
    "scrapy version": ["version"],
    "scrapy crawl topical, no query": ["crawl", "topical", "-a", "seeds=http://127.0.0.1:9/"],
    "scrapy crawls, no store": ["crawls", "-s", "FOCUSED_DB={tmp}/missing.sqlite3"],
    "scrapy pages, no store": ["pages", "-s", "FOCUSED_DB={tmp}/missing.sqlite3"],
    "scrapy crawl topical, one page": [
        *("crawl", "topical", "-a", "query=birds", "-a", "seeds={site}/wiki/Albatross"),
        *("-s", "CLOSESPIDER_PAGECOUNT=1", "-s", "FOCUSED_DB={tmp}/crawl.sqlite3"),
    ],
}


def run_once(checkout: Path, arguments: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``python -m scrapy ARGUMENTS`` in ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    # A user's modules load from their bytecode caches: with this set (some shells and CI
    # images set it), each run compiled the project's ~70 modules again, 0.2 s of CPU.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "scrapy", *arguments], cwd=checkout, env=env, capture_output=True
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.runner import REPO, extract_revision, report_head
    from focused.errors import CommandLineParser, at_least_one
    from focused.replayweb import ReplayServer, load_graph

    parser = CommandLineParser(prog="python -m benchmarks.startup")
    parser.add_argument("--baseline", default="main", help="git revision to compare with")
    parser.add_argument("--rounds", type=at_least_one, default=10, help="runs of each command")
    args = parser.parse_args(argv)
    best: dict[tuple[str, str], tuple[float, float]] = {}
    server = ReplayServer(load_graph(REPO / "tests" / "data" / "wikisample")).start()
    try:
        with tempfile.TemporaryDirectory(prefix="focused-startup-") as tmp:
            baseline = extract_revision(args.baseline, Path(tmp, "baseline"))
            checkouts = {"baseline": baseline, "current": REPO}
            for name in checkouts:
                Path(tmp, f"{name}-files").mkdir()
            for _ in range(args.rounds):
                for command, arguments in COMMANDS.items():
                    for name, checkout in checkouts.items():
                        own = {"tmp": Path(tmp, f"{name}-files"), "site": server.url}
                        wall, cpu = run_once(checkout, [part.format(**own) for part in arguments])
                        least = best.get((command, name), (wall, cpu))
                        best[command, name] = (min(least[0], wall), min(least[1], cpu))
    finally:
        server.stop()
    print("\n".join(report_head("Start-up of the commands", "benchmarks.startup", argv)))
    print(f"Seconds to run each command, least of {args.rounds} rounds", end=" ")
    print(f"(baseline {args.baseline})\n")
    header = ("command", "base wall", "wall", "ratio", "base CPU", "CPU", "ratio")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for command in COMMANDS:
        (base_wall, base_cpu), (wall, cpu) = best[command, "baseline"], best[command, "current"]
        print(
            f"| `{command}` | {base_wall:.2f} | {wall:.2f} | {wall / base_wall:.2f}"
            f" | {base_cpu:.2f} | {cpu:.2f} | {cpu / base_cpu:.2f} |"
        )
    return 0


if __name__ == "__main__":
    from focused.errors import exit_on_config_error

    exit_on_config_error(main, "python -m benchmarks.startup")
