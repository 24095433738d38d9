"""Harvest benchmark: every strategy on every topic, as real crawls of a labelled replay web.

    python -m benchmarks.harvest --corpus ../shared/corpora/wikispeedia.tar.xz \\
        --topics ../shared/benchmarks/topics.json --strategies all

Each (strategy, topic) pair is a ``scrapy crawl topical`` subprocess against the corpus served
by ``focused.replayweb`` on 127.0.0.1, with a page budget of |rel| (the topic's number of
relevant pages; ``--budget`` caps it). The pages are read back from the crawl's SQLite store in
fetch order and scored against the categories, which no crawl sees. The ``oracle`` reference
gets the true distances to the relevant set in a file (``ORACLE_DISTANCES``).

A strategy may be given with parameters, as ``-a`` gives them to a crawl, so that settings of
one strategy are compared in one run: ``--strategies rank_semantic,rank_semantic:rank_every=50``
(``name:param=value:param=value``; the whole spec names its row and curve).

Written under ``--out`` (default benchmarks/results/): ``harvest.md`` (harvest@|rel| per strategy
and topic with the mean, and the other measures), ``levels.md`` (per-level relevance per seed),
``harvest-<topic>.png`` (harvest curves, all strategies on one plot per topic) and
``harvest.json`` (every figure, for later analysis).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from benchmarks import metrics
from benchmarks.runner import (
    REPO,
    check_topical_arguments,
    output_folder,
    report_head,
    run_scrapy,
)
from focused.arguments import DEFAULT_STRATEGY
from focused.errors import (
    CommandLineParser,
    ConfigError,
    at_least_one,
    folder,
    quoted,
    say,
    seconds,
)
from focused.replayweb import Graph, ReplayServer, load_graph, name_from_path, relevant_set
from focused.settingchecks import check_output_folders
from focused.sqlitestore import SqliteStore
from focused.storage import StoreError
from focused.strategies import STRATEGIES, strategy_class

DEFAULT_OUT = REPO / "benchmarks" / "results"


@dataclass(frozen=True)
class Topic:
    category: str
    query: str
    seeds: tuple[str, ...]
    relevant: frozenset[str]
    budget: int
    short: str  # its name in tables, files and crawl ids (unique_names)


def unique_names(categories: list[str]) -> list[str]:
    """Each topic's short name: its category's last part, with as many parts before it as tell
    it from the others' (``subject.Art.Artists`` and ``subject.People.Artists`` are
    ``Art.Artists`` and ``People.Artists``), and ``-2``, ``-3``... for a category listed again.
    Named by the last part alone, two such topics shared their store, crawl ids, distances and
    plot: the second crawl was refused, or read the other's distances."""
    parts = [category.split(".") for category in categories]
    names, taken = [], Counter()
    for own in parts:
        length = 1
        while length < len(own) and any(
            other != own and other[-length:] == own[-length:] for other in parts
        ):
            length += 1
        name = ".".join(own[-length:])
        taken[name] += 1
        names.append(name if taken[name] == 1 else f"{name}-{taken[name]}")
    return names


def read_topics(path: str) -> list[dict[str, Any]]:
    """The entries of a topics.json file, each checked to have a category, a query and seeds of
    the right types (a wrong one was a traceback, or a crawl's failure)."""
    try:
        topics = json.loads(Path(path).read_text(encoding="utf-8"))["topics"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a topics file ({exc.__class__.__name__})") from None
    if not isinstance(topics, list):
        raise ConfigError(f"{path}: not a topics file: its topics are no list")
    if not topics:
        raise ConfigError(f"{path}: not a topics file: it has no topics")
    for number, entry in enumerate(topics, start=1):
        if not isinstance(entry, dict) or not {"category", "query", "seeds"} <= entry.keys():
            raise ConfigError(f"{path}: topic {number} needs category, query and seeds")
        category, query, seeds = entry["category"], entry["query"], entry["seeds"]
        if not isinstance(category, str) or not category:
            raise ConfigError(
                f"{path}: topic {number}: category {quoted(category)} is not a category"
            )
        if not isinstance(query, str):
            raise ConfigError(f"{path}: topic {number}: query {quoted(query)} is not text")
        if not isinstance(seeds, list) or not seeds or not all(isinstance(s, str) for s in seeds):
            raise ConfigError(
                f"{path}: topic {number}: seeds {quoted(seeds)} are not a list of article names"
            )
    return topics


def load_topics(path: str, graph: Graph, limit: int | None, cap: int | None) -> list[Topic]:
    """The topics of a topics.json file, checked against the graph."""
    found: list[tuple[str, str, tuple[str, ...], frozenset[str], int]] = []
    for entry in read_topics(path)[:limit]:
        category, query, seeds = entry["category"], entry["query"], tuple(entry["seeds"])
        missing = [seed for seed in seeds if seed not in graph]
        if missing:
            raise ConfigError(f"topic {category}: seed {missing[:1]} not in the corpus")
        relevant = frozenset(relevant_set(graph, category))
        if not relevant:
            raise ConfigError(f"topic {category}: no page of the corpus has this category")
        budget = min(len(relevant), cap) if cap else len(relevant)
        found.append((category, query, seeds, relevant, budget))
    names = unique_names([category for category, *_ in found])
    for number, ((_, query, *_), name) in enumerate(zip(found, names, strict=True), start=1):
        try:
            # The crawl's own check of a query, which failed each crawl of the topic; "bfs",
            # which needs nothing more (the strategies are checked by select_strategies).
            check_topical_arguments(query, "bfs")
        except ConfigError as exc:
            raise ConfigError(f"{path}: topic {number} ({name}): {exc}") from None
    return [Topic(*topic, name) for topic, name in zip(found, names, strict=True)]


def select_strategies(spec: str) -> list[str]:
    """The strategies ``--strategies`` names, each checked with its parameters."""
    if spec == "all":
        return list(STRATEGIES)
    names = [name.strip() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name.split(":", 1)[0] not in STRATEGIES]
    if unknown or not names:
        valid = ", ".join(["all", *STRATEGIES])
        raise ConfigError(f"unknown strategy {unknown[:1] or spec!r}; valid: {valid}")
    twice = [name for name in names if names.count(name) > 1]
    if twice:
        # Its two crawls would share a crawl id and store: one is refused, and both report it.
        raise ConfigError(f"strategy {twice[0]!r} given twice")
    for name in names:
        strategy, given = strategy_arguments(name)
        known = strategy_class(strategy).params
        params = {key: param.default for key, param in known.items()}
        for param, raw in given.items():
            if param not in known:
                valid = ", ".join(known) or "none"
                raise ConfigError(f"{strategy} has no parameter {param!r}; valid: {valid}")
            params[param] = known[param].parse(param, raw)
        strategy_class(strategy).check_params(params)
    return names


def strategy_arguments(spec: str) -> tuple[str, dict[str, str]]:
    """``name:param=value:...`` as the strategy's name and its ``-a`` parameters."""
    name, *given = spec.split(":")
    pairs = [item.partition("=") for item in given]
    bad = [key for key, sign, _ in pairs if not sign or not key]
    if bad or len({key for key, _, _ in pairs}) < len(pairs):
        raise ConfigError(f"{spec!r}: give parameters as {name}:name=value:name=value")
    return name, {key: value for key, _, value in pairs}


class Resolver:
    """Article name of a crawled URL (crawlers may re-encode a path, e.g. %28 as '(')."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.decoded = {unquote(name): name for name in graph.names}

    def __call__(self, url: str) -> str:
        name = name_from_path(urlsplit(url).path)
        if name is None:
            return url
        return name if name in self.graph else self.decoded.get(unquote(name), name)


def write_distances(path: Path, graph: Graph, topic: Topic, base_url: str) -> None:
    distances = metrics.distances_to_relevant(graph.links, set(topic.relevant))
    by_url = {f"{base_url}/wiki/{name}": d for name, d in distances.items()}
    path.write_text(json.dumps(by_url), encoding="utf-8")


def evaluate(
    pages: Sequence[dict[str, Any]], topic: Topic, resolve: Resolver, stats: dict[str, float]
) -> dict[str, Any]:
    """Every measure of one crawl, over its first ``topic.budget`` pages in fetch order."""
    pages = sorted(pages, key=lambda page: page["fetch_order"])[: topic.budget]
    names = [resolve(page["url"]) for page in pages]
    labels = [name in topic.relevant for name in names]
    parents = {page["url"]: page["parent_url"] for page in pages}
    seeds = metrics.seed_of(parents)
    levels = metrics.level_table(
        ((page["url"], page["level"], label) for page, label in zip(pages, labels, strict=True)),
        seeds,
    )
    pk, kn = metrics.top_quality(
        (page["relevance"], label) for page, label in zip(pages, labels, strict=True)
    )
    precision, recall = metrics.precision_recall([p["is_relevant"] for p in pages], labels)
    elapsed = stats.get("elapsed_time_seconds", 0.0)
    return {
        "fetched": len(pages),
        "harvest": metrics.harvest_at(labels, topic.budget),
        "target_recall": metrics.target_recall(names, set(topic.relevant), topic.budget),
        "curve": metrics.harvest_curve(labels),
        "levels": [
            {"seed": resolve(r.seed), "level": r.level, "pages": r.pages, "relevant": r.relevant}
            for r in levels
        ],
        "pk": pk,
        "kn": kn,
        "precision": precision,
        "recall": recall,
        "pages_per_second": metrics.pages_per_second(int(stats.get("focused/pages", 0)), elapsed),
        "scoring_cpu_ms_per_page": stats.get("focused/scoring_cpu_ms_per_page"),
    }


def run_one(
    strategy: str,
    topic: Topic,
    server: ReplayServer,
    workdir: Path,
    graph: Graph,
    timeout: float,
    encoder_store: str | None = None,
) -> dict[str, Any]:
    name, params = strategy_arguments(strategy)
    slug = re.sub(r"[^\w.-]", "-", f"{strategy}-{topic.short}")
    db = workdir / f"{slug}.sqlite3"
    settings: dict[str, object] = {
        "FOCUSED_DB": db,
        # The measures use the first `budget` pages in fetch order, as a longer crawl fetches
        # them: with requests under way at once, a page started among the last `budget` may
        # be scored after one started later.
        "CLOSESPIDER_PAGECOUNT": topic.budget + 2,
    }
    if name == "oracle":
        distances = workdir / f"distances-{topic.short}.json"
        write_distances(distances, graph, topic, server.url)
        settings["ORACLE_DISTANCES"] = distances
    if encoder_store:
        settings["ENCODER_STORE_DIR"] = encoder_store
    arguments = {
        **params,
        "strategy": name,
        "query": topic.query,
        "seeds": ",".join(server.base_url_for(seed) for seed in topic.seeds),
        "crawl_id": slug,
    }
    run = run_scrapy(["crawl", "topical"], arguments, settings, timeout=timeout)
    result: dict[str, Any] = {
        "strategy": strategy,
        "topic": topic.category,
        "wall": run.wall_seconds,
    }
    if run.returncode != 0:
        return result | {"error": run.error}
    try:
        store = SqliteStore(db)
        try:
            pages = store.pages(slug, order="fetch_order")
        finally:
            store.close()
    except StoreError as exc:
        return result | {"error": str(exc)}
    return result | evaluate(pages, topic, Resolver(graph), run.stats)


# -- reports --------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def harvest_table(results: dict, strategies: list[str], topics: list[Topic]) -> list[str]:
    head = " | ".join(f"{t.short} ({t.budget})" for t in topics)
    lines = [f"| strategy | {head} | mean |", "|---" * (len(topics) + 2) + "|"]
    stranded = False  # a crawl fetched less than its budget
    for strategy in strategies:
        runs = [results[strategy, t.short] for t in topics]
        cells = [run.get("harvest") for run in runs]
        texts = []
        for run, topic in zip(runs, topics, strict=True):
            if run.get("harvest") is None:
                texts.append("failed")
                continue
            ended = run["fetched"] < topic.budget
            stranded = stranded or ended
            texts.append(_fmt(run["harvest"]) + (f" ({run['fetched']} fetched)" if ended else ""))
        mean = _fmt(_mean(cells)) if all(c is not None for c in cells) else "-"
        lines.append(f"| `{strategy}` | {' | '.join(texts)} | **{mean}** |")
    if stranded:
        lines += [
            "",
            "(N fetched): the crawl's frontier ran empty before its budget; the fetches it did"
            " not make count as no relevant page.",
        ]
    return lines


MEASURES = (
    ("target recall", "target_recall", 3),
    ("PK (top 10)", "pk", 1),
    ("KN", "kn", 3),
    ("is_relevant precision", "precision", 3),
    ("is_relevant recall", "recall", 3),
    ("pages/s", "pages_per_second", 1),
    ("scoring CPU ms/page", "scoring_cpu_ms_per_page", 2),
)


def measures_table(results: dict, strategies: list[str], topics: list[Topic]) -> list[str]:
    head = " | ".join(name for name, _, _ in MEASURES)
    lines = [f"| strategy | {head} |", "|---" * (len(MEASURES) + 1) + "|"]
    for strategy in strategies:
        runs = [results[strategy, t.short] for t in topics]
        cells = [_fmt(_mean([r.get(key) for r in runs]), d) for _, key, d in MEASURES]
        lines.append(f"| `{strategy}` | {' | '.join(cells)} |")
    return lines


def level_tables(results: dict, strategies: list[str], topics: list[Topic]) -> list[str]:
    lines = []
    for topic in topics:
        runs = {s: results[s, topic.short] for s in strategies}
        depth = max((row["level"] for r in runs.values() for row in r.get("levels", [])), default=0)
        lines += [f"### {topic.category} (budget {topic.budget})", ""]
        lines += [
            "| strategy | seed | " + " | ".join(f"level {i}" for i in range(depth + 1)) + " |"
        ]
        lines.append("|---" * (depth + 3) + "|")
        for strategy, run in runs.items():
            by_seed: dict[str, dict[int, dict]] = {}
            for row in run.get("levels", []):
                by_seed.setdefault(row["seed"], {})[row["level"]] = row
            for seed, rows in by_seed.items():
                cells = []
                for level in range(depth + 1):
                    row = rows.get(level)
                    pct = 100 * row["relevant"] / row["pages"] if row else 0
                    cells.append(f"{row['pages']} ({pct:.0f}%)" if row else "")
                lines.append(f"| `{strategy}` | {seed} | {' | '.join(cells)} |")
        lines.append("")
    return lines


def plot_curves(results: dict, strategies: list[str], topic: Topic, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    # Twenty colours, so that no two of the strategies share one (the default cycle has ten);
    # the references dashed, the default strategy drawn thicker.
    colours = plt.get_cmap("tab20").colors
    for index, strategy in enumerate(strategies):
        curve = results[strategy, topic.short].get("curve")
        if curve:
            style = "--" if strategy in ("oracle", "bfs") else "-"
            width = 2.4 if strategy == DEFAULT_STRATEGY else 1.2
            colour = colours[index % len(colours)]
            ax.plot(range(1, len(curve) + 1), curve, style, color=colour, label=strategy, lw=width)
    ax.set_xlabel("pages fetched")
    ax.set_ylabel("harvest rate (relevant / fetched)")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{topic.category} (|rel| = {len(topic.relevant)})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_reports(
    results: dict, strategies: list[str], topics: list[Topic], out: Path, header: list[str]
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    failures = [
        f"- `{s}` on {t.short}: {results[s, t.short]['error']}"
        for s in strategies
        for t in topics
        if "error" in results[s, t.short]
    ]
    report = [
        *header,
        "",
        "## harvest@|rel| (column: topic (budget))",
        "",
        *harvest_table(results, strategies, topics),
        "",
        "## Other measures (mean over topics, first budget pages)",
        "",
        *measures_table(results, strategies, topics),
        "",
    ]
    if failures:
        report += ["## Failed crawls", "", *failures, ""]
    (out / "harvest.md").write_text("\n".join(report), encoding="utf-8")
    levels = [*header, "", "Pages fetched at each level, and the percent relevant.", ""]
    (out / "levels.md").write_text(
        "\n".join(levels + level_tables(results, strategies, topics)), encoding="utf-8"
    )
    for topic in topics:
        plot_curves(results, strategies, topic, out / f"harvest-{topic.short}.png")
    raw = [results[s, t.short] for s in strategies for t in topics]
    (out / "harvest.json").write_text(json.dumps(raw, indent=1), encoding="utf-8")


# -- command line ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = CommandLineParser(
        prog="python -m benchmarks.harvest", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--corpus", required=True, help="Wikispeedia-format dir or .tar.xz")
    parser.add_argument("--topics", required=True, help="topics.json (category, query, seeds)")
    parser.add_argument("--strategies", default="all", help="'all' or a comma-separated list")
    parser.add_argument("--topics-limit", type=at_least_one, help="only the first N topics")
    parser.add_argument("--budget", type=at_least_one, help="cap the page budget (default |rel|)")
    parser.add_argument(
        "--jobs", type=at_least_one, default=2, help="crawls at once (default 2: cores)"
    )
    parser.add_argument("--out", type=output_folder, default=str(DEFAULT_OUT), help="output dir")
    parser.add_argument("--timeout", type=seconds, default=1800, help="seconds per crawl")
    parser.add_argument(
        "--encoder-store",
        type=encoder_store,
        help="keep the sentence encoder's vectors in this directory across the crawls "
        "(default: each crawl starts without any, as a first crawl does)",
    )
    return parser.parse_args(argv)


def encoder_store(text: str) -> str:
    """argparse type of ``--encoder-store``: a folder the crawls can keep their vectors in, as
    each crawl checks its ENCODER_STORE_DIR. One they cannot was found by every crawl, each
    refused once the benchmark was set up; given empty, it meant none."""
    try:
        check_output_folders({"ENCODER_STORE_DIR": str(folder(text))})
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        strategies = select_strategies(args.strategies)
        graph = load_graph(args.corpus)
        topics = load_topics(args.topics, graph, args.topics_limit, args.budget)
        server = ReplayServer(graph).start()
    except (ConfigError, OSError) as exc:
        say(f"harvest: error: {exc}")
        return 2
    started = time.monotonic()
    pairs = [(s, t) for t in topics for s in strategies]
    width = max(map(len, strategies))
    results: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        with (
            tempfile.TemporaryDirectory(prefix="focused-harvest-") as tmp,
            ThreadPoolExecutor(args.jobs) as pool,
        ):
            futures = {
                pool.submit(
                    run_one, s, t, server, Path(tmp), graph, args.timeout, args.encoder_store
                ): (s, t)
                for s, t in pairs
            }
            for future, (strategy, topic) in futures.items():
                result = results[strategy, topic.short] = future.result()
                status = result.get("error") or f"harvest@|rel| {result['harvest']:.3f}"
                print(f"{strategy:>{width}} {topic.short:<28} {result['wall']:6.1f}s  {status}")
    finally:
        server.stop()
    minutes = (time.monotonic() - started) / 60
    header = [
        *report_head("Harvest benchmark", "benchmarks.harvest", argv),
        f"{len(pairs)} crawls ({len(strategies)} strategies x {len(topics)} topics), "
        f"{args.jobs} at a time, in {minutes:.1f} min on {datetime.now(UTC):%Y-%m-%d}. "
        "Budget = |rel| of each topic"
        + (f", capped at {args.budget}" if args.budget else "")
        + "; Scrapy's default concurrency (16). Measures over the first budget pages in fetch"
        " order, labels = the corpus categories (never seen by a crawl).",
    ]
    write_reports(results, strategies, topics, Path(args.out), header)
    print(f"{len(pairs)} crawls in {minutes:.1f} min; reports in {args.out}")
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
