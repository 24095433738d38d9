"""The cost of writing the crawl counters through under JOBDIR (``focused.resume.CrawlCounters``).

Side by side in one run: ``add_to_counter`` with the counters written through to
``JOBDIR/counters.sqlite3`` (one commit per change), against the same calls without JOBDIR (a
``spider.state`` update and the signal only). A page costs two such calls (its response, its
children's discovery numbers). Prints microseconds per call and the ratio, and what a response
costs besides: its request marked as counted in the frontier file's in-flight table
(``SqliteFrontier.mark_counted``, one commit), among CONCURRENT_REQUESTS requests in flight;
and a better rediscovery's put into the frontier file, which keeps a queued request's mark
(20,000 URLs queued, each replaced once, in one transaction as the scheduler's are); and a
request handed out, recorded in the in-flight table with its mark (``start_inflight``; 20,000
requests, each in a transaction of its own as the scheduler's pops are).
Run: python -m benchmarks.crash_counts
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace

from scrapy.utils.test import get_crawler

from benchmarks.frontier import BenchSpider, make_requests
from focused.errors import CommandLineParser
from focused.resume import CrawlCounters, add_to_counter
from schedulers.base import FRONTIER_FILE, SqliteFrontier

CALLS = 5000
ROUNDS = 3


def seconds_per_call(jobdir: Path | None) -> float:
    crawler = get_crawler(settings_dict={"JOBDIR": str(jobdir)} if jobdir else {})
    crawler.spider = SimpleNamespace(state={}, shared=None)
    counters = CrawlCounters.from_crawler(crawler) if jobdir else None
    if counters is not None:
        counters.spider_opened(crawler.spider)
    started = time.perf_counter()
    for n in range(CALLS):
        add_to_counter(crawler, "responses")
        add_to_counter(crawler, "discovered", n % 20)
    elapsed = (time.perf_counter() - started) / (2 * CALLS)
    if counters is not None:
        counters.spider_closed(crawler.spider)
    return elapsed


def seconds_per_mark(folder: Path, in_flight: int = 16) -> float:
    frontier = SqliteFrontier(folder / FRONTIER_FILE, BenchSpider())
    for n, request in enumerate(make_requests(in_flight)):
        frontier.start_inflight(str(n).encode(), request)
    started = time.perf_counter()
    for n in range(CALLS):
        frontier.mark_counted(str(n % in_flight).encode())
    elapsed = (time.perf_counter() - started) / CALLS
    frontier.close()
    return elapsed


def seconds_per_rediscovery(folder: Path, queued: int = 20_000) -> float:
    frontier = SqliteFrontier(folder / FRONTIER_FILE, BenchSpider())
    requests = list(make_requests(queued))
    with frontier.transaction():
        for n, request in enumerate(requests):
            frontier.put(str(n).encode(), (-0.5, 0.0, n), request)
    started = time.perf_counter()
    with frontier.transaction():
        for n, request in enumerate(requests):
            frontier.put(str(n).encode(), (-0.9, 0.0, queued + n), request)
    elapsed = (time.perf_counter() - started) / queued
    frontier.close()
    return elapsed


def seconds_per_handout(folder: Path, handed_out: int = 20_000) -> float:
    frontier = SqliteFrontier(folder / FRONTIER_FILE, BenchSpider())
    requests = list(make_requests(handed_out))
    started = time.perf_counter()
    for n, request in enumerate(requests):
        with frontier.transaction():
            frontier.start_inflight(str(n).encode(), request)
    elapsed = (time.perf_counter() - started) / handed_out
    frontier.close()
    return elapsed


def main(argv: Sequence[str] | None = None) -> None:
    # No options, but --help says what it measures and a stray argument is refused, not ignored.
    parser = CommandLineParser(
        prog="python -m benchmarks.crash_counts", description=__doc__.splitlines()[0]
    )
    parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(ROUNDS):
            written = seconds_per_call(Path(folder, f"job-{round_}"))
            memory = seconds_per_call(None)
            print(
                f"round {round_ + 1}: written through {written * 1e6:.1f} us/call,"
                f" spider.state only {memory * 1e6:.1f} us/call,"
                f" ratio {written / memory:.1f}, extra per page (2 calls)"
                f" {2 * (written - memory) * 1e3:.3f} ms"
            )
        for round_ in range(ROUNDS):
            mark = seconds_per_mark(Path(folder))
            print(f"round {round_ + 1}: a response marked as counted {mark * 1e6:.1f} us")
        print_rounds(
            Path(folder, "rediscovery"), seconds_per_rediscovery, "a better rediscovery's put"
        )
        print_rounds(Path(folder, "handout"), seconds_per_handout, "a request recorded in flight")


def print_rounds(folder: Path, measure: Callable[[Path], float], what: str) -> None:
    """Print ``what`` took in each of ROUNDS runs of ``measure``, each on a frontier file of
    its own under ``folder``."""
    for round_ in range(ROUNDS):
        folder_of_round = Path(f"{folder}-{round_}")
        folder_of_round.mkdir()
        print(f"round {round_ + 1}: {what} {measure(folder_of_round) * 1e6:.1f} us")


if __name__ == "__main__":
    main()
