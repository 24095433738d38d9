"""What Python's cyclic garbage collector costs a crawl: ``topical`` crawls of the replay web with
a probe extension (``GcProbe``) that times every collection through ``gc.callbacks``.

    python -m benchmarks.collector --corpus ../shared/corpora/wikispeedia.tar.xz --pages 1000 \\
        --variant "FOCUSED_GC_FREEZE=False" --variant "FOCUSED_GC_FREEZE=True"

Each ``--variant`` is a space-separated list of ``NAME=VALUE`` settings; the variants' crawls
alternate, ``--rounds`` times (a noisy machine slows them alike). Per crawl: pages per second
(responses / Scrapy's elapsed time), the collections of each generation from the engine's start
to the spider's close, their total and longest time, that total as a share of the elapsed time,
the objects frozen by ``gc.freeze()`` and the process's max RSS.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy import signals

from benchmarks.runner import CrawlRun, report_head, run_scrapy
from benchmarks.throughput import QUERY, pages_per_second
from focused.errors import (
    CommandLineParser,
    at_least_one,
    exit_on_config_error,
    quoted,
    say,
)

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

PROBE = "benchmarks.collector.GcProbe"


class GcProbe:
    """Times each collection of the cyclic garbage collector from ``engine_started`` (start-up
    done) to ``spider_closed``; writes ``gc/*`` stats at the close."""

    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats
        self.counting = False
        self.started = 0.0
        self.collections = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.longest = 0.0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> GcProbe:
        probe = cls(crawler)
        crawler.signals.connect(probe.engine_started, signal=signals.engine_started)
        crawler.signals.connect(probe.spider_closed, signal=signals.spider_closed)
        gc.callbacks.append(probe.on_collection)
        return probe

    def engine_started(self) -> None:
        self.counting = True

    def on_collection(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        elif self.counting:
            seconds = time.perf_counter() - self.started
            self.collections[info["generation"]] += 1
            self.seconds[info["generation"]] += seconds
            self.longest = max(self.longest, seconds)

    def spider_closed(self, spider: Spider) -> None:
        self.counting = False
        for generation in range(3):
            self.stats.set_value(f"gc/collections/gen{generation}", self.collections[generation])
            self.stats.set_value(f"gc/ms/gen{generation}", self.seconds[generation] * 1000)
        self.stats.set_value("gc/ms", sum(self.seconds) * 1000)
        self.stats.set_value("gc/max_ms", self.longest * 1000)
        self.stats.set_value("gc/frozen", gc.get_freeze_count())
        self.stats.set_value(
            "gc/max_rss_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        )


def probe_extensions() -> str:
    """The project's EXTENSIONS with the probe added (``-s EXTENSIONS=`` replaces the dict)."""
    from focused import settings

    return json.dumps({**settings.EXTENSIONS, PROBE: 1000})


def row(name: str, run: CrawlRun) -> str:
    stat = run.stats.get
    elapsed = stat("elapsed_time_seconds", 0.0)
    counts = "/".join(f"{stat(f'gc/collections/gen{g}', 0):.0f}" for g in range(3))
    times = "/".join(f"{stat(f'gc/ms/gen{g}', 0):.0f}" for g in range(3))
    share = stat("gc/ms", 0.0) / 1000 / elapsed if elapsed else 0.0
    return (
        f"| {name} | {pages_per_second(run):.1f} | {elapsed:.1f} | {counts} | {times} "
        f"| {stat('gc/ms', 0):.0f} | {share:.1%} | {stat('gc/max_ms', 0):.1f} "
        f"| {stat('gc/frozen', 0):.0f} | {stat('gc/max_rss_mb', 0):.0f} |"
    )


def variant_settings(text: str) -> str:
    """argparse type of ``--variant``: ``NAME=VALUE`` settings separated by spaces. An item
    without its ``=`` was a traceback once the replay web had started."""
    if any(item.find("=") < 1 for item in text.split()):
        raise argparse.ArgumentTypeError(
            f"give settings as NAME=VALUE separated by spaces, not {quoted(text)}"
        )
    return text


def main(argv: Sequence[str] | None = None) -> int:
    from focused.replayweb import ReplayServer, load_graph

    parser = CommandLineParser(prog="python -m benchmarks.collector")
    parser.add_argument("--corpus", required=True, help="Wikispeedia-format dir or .tar.xz")
    parser.add_argument("--seed", default="Albatross", help="start article (default Albatross)")
    parser.add_argument(
        "--pages", type=at_least_one, default=1000, help="page budget of each crawl"
    )
    parser.add_argument("--rounds", type=at_least_one, default=1, help="crawls of each variant")
    parser.add_argument(
        "--variant",
        type=variant_settings,
        action="append",
        default=[],
        help='settings of one variant, "NAME=VALUE NAME=VALUE" (repeatable; default: none)',
    )
    args = parser.parse_args(argv)
    variants = args.variant or [""]
    graph = load_graph(args.corpus, seed=args.seed)  # an unknown seed failed the first crawl
    server = ReplayServer(graph).start()
    header = [
        "| variant | pages/s | elapsed s | collections gen0/1/2 | ms gen0/1/2 | GC ms "
        "| GC / elapsed | longest ms | frozen objects | max RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="focused-collector-") as tmp:
            for round_ in range(args.rounds):
                for number, variant in enumerate(variants):
                    settings = dict(item.split("=", 1) for item in variant.split())
                    run = run_scrapy(
                        ["crawl", "topical"],
                        {"query": QUERY, "seeds": server.base_url_for(args.seed)},
                        {
                            "CLOSESPIDER_PAGECOUNT": args.pages,
                            "EXTENSIONS": probe_extensions(),
                            "FOCUSED_DB": Path(tmp, f"{round_}-{number}.sqlite3"),
                            **settings,
                        },
                    )
                    if run.returncode != 0:
                        say(f"collector: error: crawl failed: {run.error}")
                        return 1
                    rows.append(row(variant or "(project settings)", run))
                    print(rows[-1], flush=True)
    finally:
        server.stop()
    print("\n".join([*report_head("Garbage collector", "benchmarks.collector", argv), *header]))
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    exit_on_config_error(main, "python -m benchmarks.collector")
