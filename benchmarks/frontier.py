"""Frontier cost: push+pop speed and memory per queued request, each strategy's queue against
Scrapy's ``ScrapyPriorityQueue``, in memory and on disk (the JOBDIR queues).

    python -m benchmarks.frontier

Speed: N requests (``--ops``, default 100,000) with the meta the scoring middleware writes are
pushed, then all popped; ops/s = 2N / seconds of CPU (``time.thread_time``: on a shared machine
wall time mostly measures the other jobs). Disk queues are also timed on the wall clock, since
their cost is partly the wait for the disk (each frontier change of a JOBDIR crawl is committed,
for crash safety), which CPU time leaves out; read that column on a quiet machine. The
requests' fingerprints are computed first by the crawl's fingerprinter, as the scheduler's
dupefilter does before a push. Each strategy and the Scrapy baseline run in the same process,
one after another, on the same requests; the ratio to the baseline of the same kind (memory or
disk) is what to read on a noisy machine. A second table gives the floor of any such queue in
Python (``floor_table``): the requests' positions sorted once by their float scores in plain
loops, with and without the fingerprint index that a rediscovery needs.

Memory: each (queue, kind, size) case runs in a fresh subprocess, which pushes ``size``
requests built one by one (nothing else holds them) and reports the growth of its resident set
(RSS, so SQLite's own memory counts) per request, and for disk queues the bytes on disk per
request. At 1,000,000 requests only the Scrapy baseline and the default strategy are measured
(``--large-strategies``), since every StrategyQueue shares the same frontier code.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import scrapy
from scrapy.pqueues import ScrapyPriorityQueue
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler

from benchmarks.harvest import DEFAULT_OUT
from benchmarks.runner import REPO, output_folder, report_head
from focused import settings as crawl_settings
from focused.arguments import DEFAULT_STRATEGY
from focused.errors import CommandLineParser, at_least_one, counts, say
from focused.strategies import STRATEGIES, strategy_class

BASELINE = "scrapy"
# The crawl's fingerprinter, which the strategy queues call on every push.
FINGERPRINTER = crawl_settings.REQUEST_FINGERPRINTER_CLASS
# The crawl's stats collector: several queues count their moves in stats, and Scrapy's own
# collector makes every call a dozen times dearer than a crawl's (focused.stats).
STATS_CLASS = crawl_settings.STATS_CLASS
KINDS = ("memory", "disk")


class BenchSpider(scrapy.Spider):
    name = "frontier-bench"


def make_requests(n: int, seed: int = 0) -> Iterator[scrapy.Request]:
    """Requests as the crawl queues them: level, parent, anchor, context and scores in meta."""
    rng = random.Random(seed)
    context = "word " * 80  # two 200-character context windows, as LINK_CONTEXT_CHARS gives
    for i in range(n):
        depth = rng.randint(1, 5)  # within dfs's default max_depth: every queue keeps all
        yield scrapy.Request(
            f"http://127.0.0.1:8000/wiki/Article_{i}",
            priority=-depth,
            meta={
                "depth": depth,
                "anchor": f"Article {i}",
                "link_context": context,
                "parent_url": f"http://127.0.0.1:8000/wiki/Parent_{i // 50}",
                "parent_relevance": rng.random(),
                "parent_is_relevant": rng.random() < 0.3,
                "anchor_relevance": rng.random(),
                "context_relevance": rng.random(),
                "link_relevance": rng.random(),
                "path_cost": rng.random() * depth,
                "discovery": i,
            },
        )


def make_queue(name: str, kind: str, workdir: Path, fingerprinter: Any = None) -> Any:
    """A strategy's queue or Scrapy's, built as Scrapy's scheduler builds them; with
    ``fingerprinter``, the crawl's fingerprinter that the dupefilter already asked."""
    distances = workdir / "distances.json"
    distances.write_text("{}", encoding="utf-8")  # the oracle refuses to start without a file
    settings = {
        "ORACLE_DISTANCES": str(distances),
        "REQUEST_FINGERPRINTER_CLASS": FINGERPRINTER,
        "STATS_CLASS": STATS_CLASS,
    }
    crawler = get_crawler(BenchSpider, settings)
    if fingerprinter is not None:
        crawler.request_fingerprinter = fingerprinter
    spider = BenchSpider()
    spider.strategy_params, spider.state = {}, {}
    crawler.spider, spider.crawler = spider, crawler
    key = str(workdir / f"{name}-{kind}") if kind == "disk" else ""
    if name == BASELINE:
        setting = "SCHEDULER_DISK_QUEUE" if kind == "disk" else "SCHEDULER_MEMORY_QUEUE"
        downstream = load_object(crawler.settings[setting])
        return ScrapyPriorityQueue.from_crawler(crawler, downstream, key)
    return strategy_class(name).from_crawler(crawler, None, key, ())


def push_pop_rate(
    name: str, kind: str, requests: list[scrapy.Request], fingerprinter: Any = None
) -> tuple[float, float]:
    """(push all, then pop all) operations per second of CPU, and of the wall clock. A queue
    that drops requests by design (``beam`` keeps the k best of each level) pops fewer: its
    operations are the pushes and the pops it made, and every request must be popped or
    dropped."""
    with tempfile.TemporaryDirectory(prefix="focused-frontier-") as tmp:
        queue = make_queue(name, kind, Path(tmp), fingerprinter)
        # CPU time: on a machine shared with other jobs, wall time mostly measures their load.
        started, wall_started = time.thread_time(), time.perf_counter()
        for request in requests:
            queue.push(request)
        popped = 0
        while queue.pop() is not None:
            popped += 1
        seconds, wall_seconds = time.thread_time() - started, time.perf_counter() - wall_started
        dropped = len(queue.take_dropped()) if name != BASELINE else 0
        queue.close()
    if popped + dropped != len(requests):
        raise RuntimeError(
            f"{name} ({kind}) popped {popped} and dropped {dropped} of {len(requests)} requests"
        )
    operations = len(requests) + popped
    return operations / seconds, operations / wall_seconds


def _rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_case(name: str, kind: str, size: int) -> dict[str, float]:
    """Run in a fresh process: RSS growth and disk bytes per queued request."""
    with tempfile.TemporaryDirectory(prefix="focused-frontier-") as tmp:
        queue = make_queue(name, kind, Path(tmp))
        before = _rss_bytes()
        for request in make_requests(size):
            queue.push(request)
        rss = _rss_bytes() - before
        disk = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
        queue.close()
    return {"rss_per_request": rss / size, "disk_per_request": disk / size}


def run_memory_case(name: str, kind: str, size: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.frontier", "--memory-case", name, kind, str(size)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    case = {"queue": name, "kind": kind, "size": size, "seconds": time.monotonic() - started}
    if done.returncode != 0:
        return case | {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return case | json.loads(done.stdout.strip().splitlines()[-1])


def fingerprinted_requests(n: int) -> tuple[list[scrapy.Request], Any]:
    """``n`` requests and the crawl's fingerprinter, which has already fingerprinted each, as
    the dupefilter does before any push."""
    requests = list(make_requests(n))
    fingerprinter = load_object(FINGERPRINTER)()
    for request in requests:
        fingerprinter.fingerprint(request)
    return requests, fingerprinter


def speed_table(
    strategies: list[str],
    requests: list[scrapy.Request],
    fingerprinter: Any,
    kinds: Sequence[str] = KINDS,
) -> list[str]:
    base = {kind: push_pop_rate(BASELINE, kind, requests, fingerprinter) for kind in kinds}
    lines = [
        "| queue | memory ops/s | x ScrapyPriorityQueue | disk ops/s | x ScrapyPriorityQueue "
        "| disk ops/s, wall clock | x ScrapyPriorityQueue |",
        "|---|---|---|---|---|---|---|",
        f"| `ScrapyPriorityQueue` | {' | '.join(_speed_cells(base, base, kinds))} |",
    ]
    for name in strategies:
        try:
            rates = {kind: push_pop_rate(name, kind, requests, fingerprinter) for kind in kinds}
            cells = _speed_cells(rates, base, kinds)
        except Exception as exc:  # a strategy that cannot run here is reported, not fatal
            cells = [f"error: {exc.__class__.__name__}", *["-"] * 5]
        lines.append(f"| `{name}` | {' | '.join(cells)} |")
        print(lines[-1], flush=True)
    return lines


def levels_table(
    levels: Sequence[int], requests: list[scrapy.Request], fingerprinter: Any
) -> list[str]:
    """Scrapy's memory queue ordering the requests by a score, as a Scrapy user would: the
    score (here ``link_relevance``, in [0, 1]) made an integer ``Request.priority`` at
    ``levels`` steps. The queue keeps a FIFO per priority and, each time one empties, scans
    all the others for the next (``_update_curprio``): the cost of a pop grows with the
    number of distinct priorities, which a float score at full resolution makes as many as the
    requests. The default strategy's memory queue runs first, in the same process, on the same
    requests (it orders by its own score and ignores ``Request.priority``)."""
    default_rate, _ = push_pop_rate(DEFAULT_STRATEGY, "memory", requests, fingerprinter)
    lines = [
        f"| `ScrapyPriorityQueue` (memory) ordering by | ops/s | `{DEFAULT_STRATEGY}` ÷ it |",
        "|---|---|---|",
    ]
    for count in levels:
        by_score = [
            request.replace(priority=round(request.meta["link_relevance"] * count))
            for request in requests
        ]
        rate, _ = push_pop_rate(BASELINE, "memory", by_score, fingerprinter)
        lines.append(f"| a score in {count:,} levels | {rate:,.0f} | {default_rate / rate:.2f} |")
        print(lines[-1], flush=True)
    lines.append(f"| (`{DEFAULT_STRATEGY}`, a float score) | {default_rate:,.0f} | 1.00 |")
    return lines


def _sorted_list_rate(requests: list[scrapy.Request], fingerprinter: Any = None) -> float:
    """Push+pop ops/s of CPU of the cheapest order by a float score written in Python: each
    request and its score appended to two lists, the positions sorted once by score (in C, keyed
    by the scores' ``__getitem__``: no tuple is made, and the collector has nothing new to
    walk), and popped from the end, in loops with no call of a queue's method. With
    ``fingerprinter``, the same with what a rediscovery needs (``StrategyQueue.rediscover``):
    each queued request found by its URL's fingerprint, a dict holding its position, checked
    and deleted at its pop."""
    gc.collect()  # as floor_table does before each of its rows
    started = time.thread_time()
    scores: list[float] = []
    queued: list[scrapy.Request] = []
    if fingerprinter is None:
        for request in requests:
            scores.append(-request.meta.get("link_relevance", 0.0))
            queued.append(request)
        order = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
        while order:
            queued[order.pop()]  # the request handed out
    else:
        fingerprint, fingerprints, current = fingerprinter.fingerprint, [], {}
        for position, request in enumerate(requests):
            fp = fingerprint(request)
            scores.append(-request.meta.get("link_relevance", 0.0))
            queued.append(request)
            fingerprints.append(fp)
            current[fp] = position
        order = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
        while order:
            position = order.pop()
            fp = fingerprints[position]
            if current.get(fp) == position:
                del current[fp]
                queued[position]
    return 2 * len(requests) / (time.thread_time() - started)


def floor_table(requests: list[scrapy.Request], fingerprinter: Any) -> list[str]:
    """Where the cheapest Python order by a float stands against Scrapy's queue at the job of
    the speed table (a FIFO per depth: a dict lookup and a ``deque`` append or pop a request),
    and the default strategy's queue, all in this process on the same requests. Each row starts
    from a collected heap: the lists' tuples hold their requests, so the collections a row's
    allocations set off walk the requests still young, as many as the rows before it left."""
    gc.collect()
    base, _ = push_pop_rate(BASELINE, "memory", requests, fingerprinter)
    gc.collect()
    default, _ = push_pop_rate(DEFAULT_STRATEGY, "memory", requests, fingerprinter)
    rows = [
        ("`ScrapyPriorityQueue`, five priorities (-depth)", base),
        ("the requests' positions sorted once by score, in loops", _sorted_list_rate(requests)),
        (
            "the same, each position also found by fingerprint (rediscovery)",
            _sorted_list_rate(requests, fingerprinter),
        ),
        (f"`{DEFAULT_STRATEGY}`", default),
    ]
    lines = ["| memory, push then pop | ops/s | x ScrapyPriorityQueue |", "|---|---|---|"]
    for label, rate in rows:
        lines.append(f"| {label} | {rate:,.0f} | {rate / base:.2f} |")
        print(lines[-1], flush=True)
    return lines


def _speed_cells(
    rates: dict[str, tuple[float, float]],
    base: dict[str, tuple[float, float]],
    kinds: Sequence[str],
) -> list[str]:
    """Memory and disk ops/s of CPU, then disk ops/s of the wall clock, each with its ratio."""
    cells = []
    for kind, clock in (("memory", 0), ("disk", 0), ("disk", 1)):
        if kind in kinds:
            cells += [f"{rates[kind][clock]:,.0f}", f"{rates[kind][clock] / base[kind][clock]:.2f}"]
        else:
            cells += ["-", "-"]
    return cells


def memory_table(cases: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| queue | kind | requests | RSS bytes/request | disk bytes/request | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for case in cases:
        label = "ScrapyPriorityQueue" if case["queue"] == BASELINE else case["queue"]
        if "error" in case:
            lines.append(
                f"| `{label}` | {case['kind']} | {case['size']:,} | error: {case['error']} | | |"
            )
            continue
        disk = f"{case['disk_per_request']:.0f}" if case["kind"] == "disk" else "-"
        lines.append(
            f"| `{label}` | {case['kind']} | {case['size']:,} | {case['rss_per_request']:.0f} "
            f"| {disk} | {case['seconds']:.0f} |"
        )
    return lines


def queue_kinds(text: str) -> list[str]:
    """argparse type of ``--kinds``: some of ``KINDS``, comma-separated (another was measured
    as a memory queue, under its own name)."""
    chosen = [kind.strip() for kind in text.split(",")]
    unknown = [kind for kind in chosen if kind not in KINDS]
    if unknown:
        raise argparse.ArgumentTypeError(f"no queue kind {unknown[0]!r}: give {','.join(KINDS)}")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = CommandLineParser(prog="python -m benchmarks.frontier")
    parser.add_argument("--strategies", default="all", help="'all' or a comma-separated list")
    parser.add_argument(
        "--ops", type=at_least_one, default=100_000, help="requests in the speed test"
    )
    parser.add_argument(
        "--sizes", type=counts, default=[100_000, 1_000_000], help="queue sizes for memory"
    )
    parser.add_argument(
        "--large-strategies", default=DEFAULT_STRATEGY, help="strategies measured above 100k"
    )
    parser.add_argument("--jobs", type=at_least_one, default=2, help="memory cases at once")
    parser.add_argument(
        "--kinds", type=queue_kinds, default=",".join(KINDS), help="speed of: memory,disk"
    )
    parser.add_argument("--no-memory-cases", action="store_true", help="speed table only")
    parser.add_argument(
        "--score-levels",
        type=lambda text: [] if text == "none" else counts(text),
        default=[100, 1_000, 10_000],
        help="Scrapy's queue ordering by a score made an integer at these many levels "
        "(comma-separated; 'none' to skip)",
    )
    parser.add_argument("--out", type=output_folder, default=str(DEFAULT_OUT), help="output dir")
    parser.add_argument("--memory-case", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_case:
        name, kind, size = args.memory_case
        print(json.dumps(memory_case(name, kind, int(size))))
        return 0
    strategies = list(STRATEGIES) if args.strategies == "all" else args.strategies.split(",")
    large = args.large_strategies.split(",")
    # --large-strategies too: measured last, a name no strategy has was a row of errors in a
    # report made over many minutes, and exit status 0.
    unknown = [s for s in [*strategies, *large] if s not in STRATEGIES]
    if unknown:
        say(f"frontier: error: unknown strategy {unknown[0]!r}")
        return 2
    started = time.monotonic()
    requests, fingerprinter = fingerprinted_requests(args.ops)
    speed = speed_table(strategies, requests, fingerprinter, args.kinds)
    floor = floor_table(requests, fingerprinter) if "memory" in args.kinds else []
    levels = args.score_levels
    by_levels = levels_table(levels, requests, fingerprinter) if levels else []
    cases = [
        (name, kind, size)
        for size in ([] if args.no_memory_cases else args.sizes)
        for name in [BASELINE, *(strategies if size <= 100_000 else large)]
        for kind in KINDS
    ]
    with ThreadPoolExecutor(args.jobs) as pool:
        measured = list(pool.map(lambda case: run_memory_case(*case), cases))
    minutes = (time.monotonic() - started) / 60
    report = [
        *report_head("Frontier benchmark", "benchmarks.frontier", argv),
        f"On {datetime.now(UTC):%Y-%m-%d}, {minutes:.1f} min. Speed: {args.ops:,} pushes then "
        f"{args.ops:,} pops, ops/s = (pushes + pops) / seconds of CPU (disk also of the wall "
        "clock), every queue in one process on the same requests. `beam` drops all but the "
        "k best of each level, so it pops only those.",
        "",
        *speed,
        "",
        *(
            [
                "The floor of a memory queue ordered by a float score in Python, against "
                "Scrapy's at the speed table's job: no queue object, the order's whole work "
                "one sort in C (a strategy queue's entries are also kept in two tiers, for "
                "trap requests, and in a heap once pops and pushes interleave, as in a crawl).",
                "",
                *floor,
                "",
            ]
            if floor
            else []
        ),
        *(
            [
                "Scrapy's queue given the order of a score: `Request.priority` = round(score x "
                "levels), the score being each request's `link_relevance`.",
                "",
                *by_levels,
                "",
            ]
            if by_levels
            else []
        ),
        "Memory: RSS growth of a fresh process per queued request (the Request object and its",
        "meta included for memory queues), and file bytes per request for disk queues.",
        "",
        *memory_table(measured),
        "",
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "frontier.md").write_text("\n".join(report), encoding="utf-8")
    print("\n".join(memory_table(measured)))
    print(f"report in {out / 'frontier.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
