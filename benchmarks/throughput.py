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
as distant servers do; at 0 (default) the crawl is bound by its CPU alone. Several values
(``--delay 0 0.1 0.5``) measure each in turn and end the report with a table by latency: where
the download slots, not the CPU, set the pace, what focusing costs shrinks.

``--store cold`` (default): each topical run starts without the encoder vectors kept by earlier
crawls, as a first crawl of a site does. ``--store warm``: one unmeasured topical crawl first
fills a store that every measured run then reads, as the next crawl of the same site does.

``--baseline REV`` also runs ``topical`` on git revision REV's code in every round (topical,
baseline, plain, ...), with its own store, and reports this checkout against it: pages/s,
process CPU and the crawl's own scoring CPU per page. A change to a page's work is measured
this way, inside real crawls, where the CPU's caches hold what a whole crawl leaves in them.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.harvest import DEFAULT_OUT
from benchmarks.runner import (
    REPO,
    CrawlRun,
    check_topical_arguments,
    extract_revision,
    output_folder,
    report_head,
    run_scrapy,
)
from focused.arguments import DEFAULT_STRATEGY
from focused.errors import CommandLineParser, ConfigError, at_least_one, say, seconds
from focused.replayweb import ReplayServer, load_graph

PLAIN_SPIDER = REPO / "benchmarks" / "plain_spider.py"
QUERY = "birds species feathers nest eggs wings flight plumage"
TARGET_RATIO = 0.8  # issue 7: topical at least 0.8 x the plain spider's pages/s


def pages_per_second(run: CrawlRun) -> float:
    elapsed = run.stats.get("elapsed_time_seconds", 0.0)
    return run.stats.get("response_received_count", 0.0) / elapsed if elapsed else 0.0


@dataclass
class Usage:
    """The CPU milliseconds per response of one crawl: its process's, and this process's, which
    serves the replay web to it (the threads of ``ReplayServer``; the main thread only waits)."""

    crawl: float
    server: float


def responses(run: CrawlRun) -> float:
    """What a run's CPU is divided by: its responses, at least one."""
    return max(run.stats.get("response_received_count", 0.0), 1.0)


def crawl(*arguments: object, checkout: Path = REPO) -> tuple[CrawlRun, Usage]:
    """``run_scrapy(*arguments)`` and the CPU it cost. Crawls run one at a time here, so the
    children's usage grows by this one's alone."""
    before, served = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time()
    run = run_scrapy(*arguments, checkout=checkout)
    after, served = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time() - served
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return run, Usage(1000 * cpu / responses(run), 1000 * served / responses(run))


def scoring_cpu(run: CrawlRun) -> float:
    return run.stats.get("focused/scoring_cpu_ms_per_page", 0.0)


@dataclass
class Measured:
    """The runs of each spider at one latency: "topical", "plain" and perhaps "baseline"."""

    delay: float
    runs: dict[str, list[CrawlRun]]
    usage: dict[str, list[Usage]]
    start_up_ms: dict[str, float]  # the CPU of a one-page crawl's process, "topical" and "plain"

    def speed(self, name: str) -> float:
        return statistics.median(map(pages_per_second, self.runs[name]))

    def process_cpu(self, name: str) -> float:
        return statistics.median(usage.crawl for usage in self.usage[name])

    def working_cpu(self, name: str, start_up_ms: float) -> float:
        """The median CPU ms per response of a spider's crawls, less its process's start-up."""
        return statistics.median(
            usage.crawl - start_up_ms / responses(run)
            for run, usage in zip(self.runs[name], self.usage[name], strict=True)
        )

    def server_cpu(self, name: str) -> float:
        return statistics.median(usage.server for usage in self.usage[name])

    @property
    def ratio(self) -> float:
        return self.speed("topical") / self.speed("plain")

    @property
    def cpu_ratio(self) -> float:
        return self.process_cpu("plain") / self.process_cpu("topical")

    def cpu_at_target(self, cores: int) -> list[str]:
        """Whether the machine has the CPU for the target at all: at 0.8 x the plain spider's
        pages/s, a topical page has 1 / (0.8 x plain pages/s) of wall clock, so ``cores`` times
        that of CPU even with its work spread over every core at no cost; what it needs is its
        crawl's CPU beyond start-up and the replay web's, which shares the machine."""
        wall_ms = 1000 / (TARGET_RATIO * self.speed("plain"))
        start_up_ms = self.start_up_ms
        topical, plain = (self.working_cpu(name, start_up_ms[name]) for name in start_up_ms)
        needed = topical + self.server_cpu("topical")
        verdict = "within" if needed <= cores * wall_ms else "**over**"
        return [
            f"CPU at the target: at {TARGET_RATIO} x the plain spider's pages/s a topical page "
            f"has {wall_ms:.2f} ms of wall clock, so this machine's {cores} cores give it at most "
            f"{cores * wall_ms:.2f} ms of CPU. It takes {topical:.2f} ms (its crawl's process "
            f"beyond start-up; the plain spider's {plain:.2f}) and {self.server_cpu('topical'):.2f}"
            f" ms of the replay web serving it (medians): {needed:.2f} ms, {verdict} that bound, "
            "which assumes every core busy with no cost for splitting the work. Start-up: a "
            f"one-page crawl's process, {start_up_ms['topical']:.0f} ms topical, "
            f"{start_up_ms['plain']:.0f} ms plain.",
            "",
        ]

    def scoring(self, name: str) -> float:
        return statistics.median(map(scoring_cpu, self.runs[name]))

    def topical_row(self, name: str, label: str) -> str:
        runs = self.runs[name]
        per_run = " / ".join(f"{pages_per_second(r):.1f}" for r in runs)
        vectors = " / ".join(
            f"{r.stats.get('focused/encoder/vectors_from_store', 0):.0f} read, "
            f"{r.stats.get('focused/encoder/vectors_to_store', 0):.0f} encoded"
            for r in runs
        )
        return (
            f"| {label} | {self.speed(name):.1f} | {per_run} | {self.process_cpu(name):.2f} "
            f"| {self.scoring(name):.2f} ({' / '.join(f'{scoring_cpu(r):.2f}' for r in runs)}) "
            f"| {vectors} |"
        )

    def against_baseline(self, revision: str) -> list[str]:
        if "baseline" not in self.runs:
            return []
        return [
            f"This checkout against `topical` at {revision}, medians: pages/s "
            f"{self.speed('topical') / self.speed('baseline'):.2f} x, process CPU per page "
            f"{self.process_cpu('topical') / self.process_cpu('baseline'):.2f} x, scoring CPU "
            f"per page {self.scoring('topical') / self.scoring('baseline'):.2f} x.",
            "",
        ]

    def report(self, args: argparse.Namespace) -> list[str]:
        per_plain = " / ".join(f"{pages_per_second(r):.1f}" for r in self.runs["plain"])
        baseline_row = (
            [self.topical_row("baseline", f"`topical` at {args.baseline}")]
            if "baseline" in self.runs
            else []
        )
        return [
            f"## {self.delay:g} s latency per response",
            "",
            f"{args.repeats} alternating runs of each, {args.pages} pages each, seed {args.seed}, "
            f"{args.store} encoder store, {self.delay:g} s latency per response, "
            f"on {datetime.now(UTC):%Y-%m-%d}; "
            "pages/s = responses / Scrapy's elapsed_time_seconds.",
            "",
            "| spider | pages/s (median) | runs | process CPU ms/page (median) "
            "| scoring CPU ms/page (median, runs) | encoder store, per run |",
            "|---|---|---|---|---|---|",
            self.topical_row("topical", f"`topical` -a strategy={args.strategy}"),
            *baseline_row,
            f"| plain Scrapy spider | {self.speed('plain'):.1f} | {per_plain} "
            f"| {self.process_cpu('plain'):.2f} | - | - |",
            "",
            f"**Ratio topical / plain: {self.ratio:.2f}** (target >= {TARGET_RATIO}).",
            "",
            f"Process CPU per page, plain / topical: {self.cpu_ratio:.2f} (start-up included; "
            "the refits' thread counts too).",
            "",
            *self.cpu_at_target(os.cpu_count() or 1),
            *self.against_baseline(args.baseline),
        ]


def latency_table(measured: list[Measured]) -> list[str]:
    """One row per latency: where a crawl stops being bound by its CPU, focusing costs less."""
    rows = [
        f"| {m.delay:g} | {m.speed('topical'):.1f} | {m.speed('plain'):.1f} | **{m.ratio:.2f}** "
        f"| {m.cpu_ratio:.2f} |"
        for m in measured
    ]
    return [
        "## By latency",
        "",
        "| latency per response (s) | topical pages/s | plain pages/s | topical / plain "
        "| process CPU per page, plain / topical |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]


class Spiders:
    """Both spiders' crawls of the replay web from one seed, with the same page budget."""

    def __init__(
        self, args: argparse.Namespace, seed: str, tmp: Path, baseline: Path | None = None
    ) -> None:
        self.args, self.seed, self.tmp = args, seed, tmp
        self.topical_arguments = {"strategy": args.strategy, "query": args.query, "seeds": seed}
        self.settings: dict[str, object] = {"CLOSESPIDER_PAGECOUNT": args.pages}
        # Each topical spider's code, and its settings (its own encoder store when warm).
        self.checkouts = {"topical": REPO} | ({"baseline": baseline} if baseline else {})
        self.topical_settings = {name: dict(self.settings) for name in self.checkouts}
        self.crawls = 0
        self.start_up_ms: dict[str, float] = {}

    def measure_start_up(self) -> bool:
        """The CPU of each spider's process in a one-page crawl: what a crawl costs before and
        after its pages, which ``Measured.cpu_at_target`` leaves out."""
        one_page = {**self.topical_settings["topical"], "CLOSESPIDER_PAGECOUNT": 1}
        for name, command, arguments, settings in (
            ("topical", ["crawl", "topical"], self.topical_arguments, one_page),
            ("plain", ["runspider", str(PLAIN_SPIDER)], {"seeds": self.seed}, one_page),
        ):
            db = {"FOCUSED_DB": self.tmp / "start-up.sqlite3"} if name == "topical" else {}
            run, usage = crawl(command, arguments, {**settings, **db})
            if run.returncode != 0:
                say(f"throughput: error: {name} crawl failed: {run.error}")
                return False
            self.start_up_ms[name] = usage.crawl * responses(run)
        return True

    def fill_store(self) -> bool:
        """The warm store: one unmeasured topical crawl fills what every measured one reads."""
        for name, checkout in self.checkouts.items():
            settings = self.topical_settings[name]
            settings["ENCODER_STORE_DIR"] = self.tmp / f"encodings-{name}"
            fill = run_scrapy(
                ["crawl", "topical"],
                self.topical_arguments,
                {**settings, "FOCUSED_DB": self.tmp / f"fill-{name}.sqlite3"},
                checkout=checkout,
            )
            if fill.returncode != 0:
                say(f"throughput: error: filling the store failed: {fill.error}")
                return False
        return True

    def measure(self, delay: float) -> Measured | None:
        """``repeats`` alternating runs of each spider; None (after one error line) if one fails."""
        names = [*self.checkouts, "plain"]
        result = Measured(
            delay, {name: [] for name in names}, {name: [] for name in names}, self.start_up_ms
        )
        for i in range(self.args.repeats):
            runs = []
            for name, checkout in self.checkouts.items():
                self.crawls += 1
                db = self.tmp / f"run-{self.crawls}.sqlite3"
                settings = {**self.topical_settings[name], "FOCUSED_DB": db}
                runs.append(
                    (
                        name,
                        crawl(
                            ["crawl", "topical"],
                            self.topical_arguments,
                            settings,
                            checkout=checkout,
                        ),
                    )
                )
            plain = crawl(["runspider", str(PLAIN_SPIDER)], {"seeds": self.seed}, self.settings)
            for name, (run, usage) in [*runs, ("plain", plain)]:
                if run.returncode != 0:
                    say(f"throughput: error: {name} crawl failed: {run.error}")
                    return None
                result.runs[name].append(run)
                result.usage[name].append(usage)
                print(
                    f"{delay:g} s latency, run {i + 1} {name:>8}: "
                    f"{pages_per_second(run):7.1f} pages/s, {usage.crawl:6.2f} CPU ms/page"
                )
        return result


def crawl_arguments(prog: str, pages: int, repeats: int, runs_of: str) -> CommandLineParser:
    """A benchmark's parser with the options of its crawls of the replay web."""
    parser = CommandLineParser(prog=prog)
    parser.add_argument("--corpus", required=True, help="Wikispeedia-format dir or .tar.xz")
    parser.add_argument("--seed", default="Albatross", help="start article (default Albatross)")
    parser.add_argument("--query", default=QUERY, help="topic of the topical crawl")
    parser.add_argument("--strategy", default=DEFAULT_STRATEGY, help="topical's strategy")
    parser.add_argument("--pages", type=at_least_one, default=pages, help="page budget of each run")
    parser.add_argument("--repeats", type=at_least_one, default=repeats, help=f"runs of {runs_of}")
    parser.add_argument("--out", type=output_folder, default=str(DEFAULT_OUT), help="output dir")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = crawl_arguments("python -m benchmarks.throughput", 1000, 3, "each spider")
    parser.add_argument(
        "--store",
        choices=("cold", "warm"),
        default="cold",
        help="encoder vectors kept by an earlier crawl: none (cold, default) or all (warm)",
    )
    parser.add_argument(
        "--delay",
        type=seconds,
        nargs="+",
        default=[0.0],
        metavar="S",
        help="seconds the replay web waits before each response, as a distant server would "
        "(responses are served concurrently; default 0); several values measure each in turn",
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also crawl with topical at this git revision in every round, and compare",
    )
    args = parser.parse_args(argv)
    tmp = tempfile.TemporaryDirectory(prefix="focused-throughput-")
    try:
        check_topical_arguments(args.query, args.strategy)
        baseline = args.baseline and extract_revision(args.baseline, Path(tmp.name, "baseline"))
        graph = load_graph(args.corpus, seed=args.seed)
        server = ReplayServer(graph).start()
    except (ConfigError, OSError) as exc:
        tmp.cleanup()
        say(f"{parser.prog}: error: {exc}")
        return 2
    measured: list[Measured] = []
    try:
        spiders = Spiders(args, server.base_url_for(args.seed), Path(tmp.name), baseline or None)
        if args.store == "warm" and not spiders.fill_store():
            return 1
        if not spiders.measure_start_up():
            return 1
        for delay in args.delay:
            server.delay = delay  # read by each request the server answers
            result = spiders.measure(delay)
            if result is None:
                return 1
            measured.append(result)
    finally:
        server.stop()
        tmp.cleanup()
    report = report_head("Throughput benchmark", "benchmarks.throughput", argv)
    for result in measured:
        report += result.report(args)
    if len(measured) > 1:
        report += latency_table(measured)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "throughput.md").write_text("\n".join(report), encoding="utf-8")
    for result in measured:
        print(
            f"{result.delay:g} s latency: topical/plain = {result.ratio:.2f} "
            f"(process CPU per page, plain/topical {result.cpu_ratio:.2f})"
        )
        for line in result.against_baseline(args.baseline)[:1]:
            print(line)
    print(f"report in {out / 'throughput.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
