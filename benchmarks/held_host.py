"""A crawl of two hosts, one held by its robots.txt Crawl-delay or by its slow responses:
passing it over (``HELD_HOST_LOOKAHEAD``, the default) against handing requests out strictly in
the strategy's order (``HELD_HOST_LOOKAHEAD=0``).

    python -m benchmarks.held_host --corpus ../shared/corpora/wikispeedia.tar.xz
    python -m benchmarks.held_host --corpus ../shared/corpora/wikispeedia.tar.xz --latency 1

The same corpus is served twice, on 127.0.0.2 with a Crawl-delay (``--crawl-delay``, 0.5 s) or,
with ``--latency S``, answering each request after S seconds instead, and on 127.0.0.3 without
either, and each crawl starts from the seed article on both, with the same page budget. A third
run of each round holds neither host: the pace the crawl would have if no host held it. Both
hosts serve the same articles, so the near-duplicate check is off (else every page of the
second host would be dropped as a copy). Runs alternate, one at a time, so a noisy machine
slows all alike; ``held_host.md`` under ``--out`` gives each run's pages per second (Scrapy's
elapsed time), how many fetches each host served, and the ratios of the medians.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.runner import check_topical_arguments, report_head, run_scrapy
from benchmarks.throughput import crawl_arguments, pages_per_second
from focused.errors import ConfigError, say, seconds
from focused.replayweb import ReplayServer, load_graph

# name: (settings, whether 127.0.0.2 is held)
RULES = {
    "passed over (default)": ({}, True),
    "strict order": ({"HELD_HOST_LOOKAHEAD": 0}, True),
    "not held (reference)": ({}, False),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = crawl_arguments("python -m benchmarks.held_host", 200, 2, "each rule")
    parser.add_argument("--crawl-delay", type=seconds, default=0.5, help="the held host's, s")
    parser.add_argument(
        "--latency",
        type=seconds,
        default=0.0,
        help="hold it by this latency a response, s, instead",
    )
    args = parser.parse_args(argv)
    try:
        check_topical_arguments(args.query, args.strategy)
        if args.crawl_delay <= 0:
            raise ConfigError(f"--crawl-delay must be above 0, not {args.crawl_delay:g}")
        graph = load_graph(args.corpus, seed=args.seed)
        crawl_delay = 0.0 if args.latency else args.crawl_delay
        held = ReplayServer(graph, "127.0.0.2", crawl_delay=crawl_delay).start()
        free = ReplayServer(graph, "127.0.0.3").start()
    except (ConfigError, OSError) as exc:
        say(f"{parser.prog}: error: {exc}")
        return 2
    delayed_robots = held.robots_txt
    seeds = f"{held.base_url_for(args.seed)},{free.base_url_for(args.seed)}"
    arguments = {"strategy": args.strategy, "query": args.query, "seeds": seeds}
    rows: dict[str, list[tuple[float, int, int]]] = {rule: [] for rule in RULES}
    try:
        with tempfile.TemporaryDirectory(prefix="focused-held-host-") as tmp:
            for i in range(args.repeats):
                for rule, (settings, holds) in RULES.items():
                    held.robots_txt = delayed_robots if holds else free.robots_txt
                    held.delay = args.latency if holds else 0.0
                    held.fetched.clear()
                    free.fetched.clear()
                    run = run_scrapy(
                        ["crawl", "topical"],
                        arguments,
                        {
                            "CLOSESPIDER_PAGECOUNT": args.pages,
                            "NEAR_DUPLICATE_DISTANCE": -1,
                            "FOCUSED_DB": Path(tmp, f"run-{i}-{len(rows[rule])}.sqlite3"),
                            **settings,
                        },
                    )
                    if run.returncode != 0:
                        say(f"held_host: error: a crawl failed: {run.error}")
                        return 1
                    row = (pages_per_second(run), len(held.fetched), len(free.fetched))
                    rows[rule].append(row)
                    print(
                        f"run {i + 1} {rule:>26}: {row[0]:6.1f} pages/s,"
                        f" fetches held/free host {row[1]}/{row[2]}"
                    )
    finally:
        held.stop()
        free.stop()
    hold = f"latency {args.latency:g} s" if args.latency else f"Crawl-delay {crawl_delay:g} s"
    report = report_head(f"A host held by its {hold.split()[0]}", "benchmarks.held_host", argv)
    report += [
        f"{args.pages} pages from {args.seed} on both hosts, `{args.strategy}`, {hold} on"
        " 127.0.0.2.",
        "",
        "| rule | run | pages/s | fetches from the held host | from the other |",
        "|---|---|---|---|---|",
    ]
    for rule, runs in rows.items():
        for i, (speed, held_fetches, free_fetches) in enumerate(runs, 1):
            report.append(f"| {rule} | {i} | {speed:.1f} | {held_fetches} | {free_fetches} |")
    medians = {rule: statistics.median(row[0] for row in runs) for rule, runs in rows.items()}
    on, off, reference = medians.values()
    report += [
        "",
        f"Median pages/s, passed over ÷ strict order: **{on / off:.2f}**; passed over ÷ not"
        f" held: **{on / reference:.2f}**",
        "",
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "held_host.md").write_text("\n".join(report), encoding="utf-8")
    print(f"passed over / strict order = {on / off:.2f}; report in {out / 'held_host.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
