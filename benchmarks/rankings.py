"""Ranking cost of ``rank_semantic`` as a crawl's link graph grows: ``rank_growth`` settings
side by side, on the real queue.

    python -m benchmarks.rankings --links 25000,50000,100000,200000 --growth 0,0.1

A crawl-like link graph is discovered link by link: each link's source is a page found earlier
(an already queued URL, picked with a bias toward the most recent, as a crawl fetches what it
found lately), and one link in three points to a URL found before (a rediscovery, which adds an
in-link), the rest to a new URL. Every link goes through the queue's ``push`` or ``rediscover``,
which rank the graph when the ranking interval says so; a pop follows every ``--pops-every``
links, as a crawl fetches between its discoveries. Reported for each size and setting: the
rankings made, and the CPU (``time.thread_time``) of the queue's work (pushes, rediscoveries,
pops and the rankings they make; the requests are built and fingerprinted beforehand, as the
spider and the dupefilter do). The settings run one after another in one process, on the same
links. Keep the URLs below the fingerprinter's cache (``FINGERPRINT_CACHE_SIZE``, 200,000):
beyond it every fingerprint is computed again, in a crawl as here.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import scrapy
from scrapy.utils.misc import load_object

from benchmarks.frontier import FINGERPRINTER, make_queue
from benchmarks.runner import report_head
from focused.errors import CommandLineParser, at_least_one, counts

BASE = "http://127.0.0.1:8000/wiki/"


def crawl_links(count: int, seed: int = 0) -> list[tuple[int, int]]:
    """``count`` links (source page, target page), numbered in order of discovery."""
    rng = random.Random(seed)
    links, found = [], 1  # page 0 is the seed
    for _ in range(count):
        source = max(0, found - 1 - int(rng.expovariate(1 / 200)))
        if found > 1 and rng.random() < 1 / 3:
            target = rng.randrange(found)
        else:
            target, found = found, found + 1
        links.append((source, target))
    return links


def growths(text: str) -> list[float]:
    """argparse type of the ``rank_growth`` values, comma-separated: numbers of at least 0."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers, not {text!r}") from None
    if any(not value >= 0 for value in values):  # nan too
        raise argparse.ArgumentTypeError(f"must be at least 0: {text!r}")
    return values


def run(links: list[tuple[int, int]], growth: float, pops_every: int) -> dict[str, float]:
    """The links pushed (or rediscovered) in order; their requests are built and fingerprinted
    first, as the spider and the dupefilter do before the queue sees them."""
    fingerprinter = load_object(FINGERPRINTER)()
    found: set[int] = set()
    requests = []
    for source, target in links:
        request = scrapy.Request(
            f"{BASE}P{target}",
            meta={"parent_url": f"{BASE}P{source}", "link_relevance": (target % 97) / 97},
        )
        fingerprinter.fingerprint(request)
        requests.append((request, target in found))
        found.add(target)
    with tempfile.TemporaryDirectory(prefix="focused-rankings-") as tmp:
        queue = make_queue("rank_semantic", "memory", Path(tmp), fingerprinter)
        queue.params["rank_growth"] = growth
        started = time.thread_time()
        for number, (request, seen) in enumerate(requests, 1):
            if seen:
                queue.rediscover(request)
            else:
                queue.push(request)
            if number % pops_every == 0:
                queue.pop()
        cpu = time.thread_time() - started
        rankings = queue.stats.get_value("focused/rankings", 0)
        queue.close()
    return {"rankings": rankings, "cpu": cpu}


def main(argv: Sequence[str] | None = None) -> int:
    parser = CommandLineParser(prog="python -m benchmarks.rankings")
    parser.add_argument(
        "--links", type=counts, default=[25_000, 50_000, 100_000, 200_000], help="graph sizes"
    )
    parser.add_argument(
        "--growth",
        type=growths,
        default=[0.0, 0.1],
        help="rank_growth values (default 0,0.1: a fixed interval, and the default)",
    )
    parser.add_argument(
        "--pops-every", type=at_least_one, default=25, help="links found per page fetched"
    )
    args = parser.parse_args(argv)
    lines = [
        *report_head("rank_semantic rankings", "benchmarks.rankings", argv),
        "| links | rank_growth | rankings | CPU s | CPU ÷ first | CPU µs a link |",
        "|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for size in args.links:
        links = crawl_links(size)
        first = None
        for growth in args.growth:
            result = run(links, growth, args.pops_every)
            first = first or result["cpu"]
            lines.append(
                f"| {size:,} | {growth:g} | {result['rankings']} | {result['cpu']:.2f} "
                f"| {result['cpu'] / first:.2f} | {result['cpu'] / size * 1e6:.0f} |"
            )
            print(lines[-1], flush=True)
    return 0


if __name__ == "__main__":
    from focused.errors import exit_on_config_error

    exit_on_config_error(main, "python -m benchmarks.rankings")
