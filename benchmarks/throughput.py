"""Throughput: ``topical`` with the default strategy against a plain Scrapy spider.

    python -m benchmarks.throughput --corpus ../shared/corpora/wikispeedia.tar.xz

Both crawl the same replay web (served from this process on 127.0.0.1) from the same seed, with
the same page budget and the project's settings; the plain spider (benchmarks/plain_spider.py)
has no scoring, no pipelines and Scrapy's default scheduler. Runs alternate (topical, plain,
topical, ...) and one runs at a time, so a noisy machine slows both alike; the medians and their
ratio go to ``throughput.md`` under ``--out``. Pages per second = responses received / the
crawl's own elapsed time (Scrapy's stats), so interpreter start-up is not counted.

Pages per second move with whatever else the machine runs (the plain spider alone has ranged
73-114 pages/s within one session), so the report also gives each crawl process's CPU time per
page (user + system, every thread, start-up included), which other processes disturb much less;
its ratio plain / topical is what the pages/s ratio would be if both were bound by one core.

``--delay S`` makes the replay web wait S seconds before each response (served concurrently),
as distant servers do; at 0 (default) the crawl is bound by its CPU alone.

``--store cold`` (default): each topical run starts without the encoder vectors kept by earlier
crawls, as a first crawl of a site does. ``--store warm``: one unmeasured topical crawl first
fills a store that every measured run then reads, as the next crawl of the same site does.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.harvest import DEFAULT_OUT
from benchmarks.runner import REPO, CrawlRun, report_head, run_scrapy
from focused.arguments import DEFAULT_STRATEGY
from focused.errors import ConfigError
from focused.replayweb import ReplayServer, load_graph

PLAIN_SPIDER = REPO / "benchmarks" / "plain_spider.py"
QUERY = "birds species feathers nest eggs wings flight plumage"


def pages_per_second(run: CrawlRun) -> float:
    elapsed = run.stats.get("elapsed_time_seconds", 0.0)
    return run.stats.get("response_received_count", 0.0) / elapsed if elapsed else 0.0


def crawl(*arguments: object) -> tuple[CrawlRun, float]:
    """``run_scrapy(*arguments)`` and the CPU milliseconds per response its process spent.
    Crawls run one at a time here, so the children's usage grows by this one's alone."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = run_scrapy(*arguments)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return run, 1000 * cpu / max(run.stats.get("response_received_count", 0.0), 1.0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.throughput")
    parser.add_argument("--corpus", required=True, help="Wikispeedia-format dir or .tar.xz")
    parser.add_argument("--seed", default="Albatross", help="start article (default Albatross)")
    parser.add_argument("--query", default=QUERY, help="topic of the topical crawl")
    parser.add_argument("--strategy", default=DEFAULT_STRATEGY, help="topical's strategy")
    parser.add_argument("--pages", type=int, default=1000, help="page budget of each run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each spider")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="output dir")
    parser.add_argument(
        "--store",
        choices=("cold", "warm"),
        default="cold",
        help="encoder vectors kept by an earlier crawl: none (cold, default) or all (warm)",
    )
    parser.add_argument(
        "--delay",
        type=float,
        default=0.0,
        help="seconds the replay web waits before each response, as a distant server would "
        "(responses are served concurrently; default 0)",
    )
    args = parser.parse_args(argv)
    try:
        if args.delay < 0:
            raise ConfigError(f"--delay must be at least 0, not {args.delay:g}")
        graph = load_graph(args.corpus)
        if args.seed not in graph:
            raise ConfigError(f"unknown seed article {args.seed!r}")
        server = ReplayServer(graph, delay=args.delay).start()
    except (ConfigError, OSError) as exc:
        print(f"throughput: error: {exc}", file=sys.stderr)
        return 2
    seed = server.base_url_for(args.seed)
    settings = {"CLOSESPIDER_PAGECOUNT": args.pages}
    runs: dict[str, list[CrawlRun]] = {"topical": [], "plain": []}
    cpu_per_page: dict[str, list[float]] = {"topical": [], "plain": []}
    tmp = tempfile.TemporaryDirectory(prefix="focused-throughput-")
    topical_arguments = {"strategy": args.strategy, "query": args.query, "seeds": seed}
    topical_settings: dict[str, object] = dict(settings)
    try:
        if args.store == "warm":
            topical_settings["ENCODER_STORE_DIR"] = Path(tmp.name, "encodings")
            fill = run_scrapy(
                ["crawl", "topical"],
                topical_arguments,
                {**topical_settings, "FOCUSED_DB": Path(tmp.name, "fill.sqlite3")},
            )
            if fill.returncode != 0:
                print(f"throughput: error: filling the store failed: {fill.error}", file=sys.stderr)
                return 1
        for i in range(args.repeats):
            db = Path(tmp.name, f"run-{i}.sqlite3")
            topical = crawl(
                ["crawl", "topical"], topical_arguments, {**topical_settings, "FOCUSED_DB": db}
            )
            plain = crawl(
                ["runspider", str(REPO / "benchmarks" / "plain_spider.py")],
                {"seeds": seed},
                settings,
            )
            for name, (run, cpu_ms) in (("topical", topical), ("plain", plain)):
                if run.returncode != 0:
                    print(f"throughput: error: {name} crawl failed: {run.error}", file=sys.stderr)
                    return 1
                runs[name].append(run)
                cpu_per_page[name].append(cpu_ms)
                print(
                    f"run {i + 1} {name:>8}: {pages_per_second(run):7.1f} pages/s, "
                    f"{cpu_ms:6.2f} CPU ms/page"
                )
    finally:
        server.stop()
        tmp.cleanup()
    speed = {name: statistics.median(map(pages_per_second, rs)) for name, rs in runs.items()}
    cpu = statistics.median(
        r.stats.get("focused/scoring_cpu_ms_per_page", 0.0) for r in runs["topical"]
    )
    ratio = speed["topical"] / speed["plain"]
    process_cpu = {name: statistics.median(values) for name, values in cpu_per_page.items()}
    cpu_ratio = process_cpu["plain"] / process_cpu["topical"]
    per_run = " / ".join(f"{pages_per_second(r):.1f}" for r in runs["topical"])
    per_plain = " / ".join(f"{pages_per_second(r):.1f}" for r in runs["plain"])
    vectors = " / ".join(
        f"{r.stats.get('focused/encoder/vectors_from_store', 0):.0f} read, "
        f"{r.stats.get('focused/encoder/vectors_to_store', 0):.0f} encoded"
        for r in runs["topical"]
    )
    report = [
        *report_head("Throughput benchmark", "benchmarks.throughput", argv),
        f"{args.repeats} alternating runs of each, {args.pages} pages each, seed {args.seed}, "
        f"{args.store} encoder store, {args.delay:g} s latency per response, "
        f"on {datetime.now(UTC):%Y-%m-%d}; "
        "pages/s = responses / Scrapy's elapsed_time_seconds.",
        "",
        "| spider | pages/s (median) | runs | process CPU ms/page (median) "
        "| scoring CPU ms/page | encoder store, per run |",
        "|---|---|---|---|---|---|",
        f"| `topical` -a strategy={args.strategy} | {speed['topical']:.1f} | {per_run} "
        f"| {process_cpu['topical']:.2f} | {cpu:.2f} | {vectors} |",
        f"| plain Scrapy spider | {speed['plain']:.1f} | {per_plain} "
        f"| {process_cpu['plain']:.2f} | - | - |",
        "",
        f"**Ratio topical / plain: {ratio:.2f}** (target >= 0.8).",
        "",
        f"Process CPU per page, plain / topical: {cpu_ratio:.2f} (start-up included; "
        "the refits' thread counts too).",
        "",
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "throughput.md").write_text("\n".join(report), encoding="utf-8")
    print(
        f"topical/plain = {ratio:.2f} (CPU per page {cpu_ratio:.2f}); "
        f"report in {out / 'throughput.md'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
