"""The cost of crash safety: writing each page and each frontier change in its own commit.

Compares, side by side in one run, the per-page SQLite store write against batches of 50, and
per-change frontier commits against changes grouped 500 to a transaction (the old behaviour).
Prints ratios (higher = slower). Run: python -m benchmarks.crash_safety
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import scrapy

from focused.errors import CommandLineParser
from focused.sqlitestore import SqliteStore
from schedulers.base import SqliteFrontier

PAGES = 3000


def page(n: int) -> dict:
    return {
        "crawl_id": "bench",
        "url": f"http://bench.test/{n}",
        "title": f"page {n}",
        "text": "word " * 500,
        "level": 2,
        "relevance": 0.5,
        "fetch_order": n,
    }


def store_seconds(folder: Path, batch: int) -> float:
    store = SqliteStore(folder / f"store-{batch}.sqlite3")
    started = time.perf_counter()
    for first in range(0, PAGES, batch):
        store.save_pages([page(n) for n in range(first, first + batch)])
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def frontier_seconds(folder: Path, group: int) -> float:
    spider = scrapy.Spider("bench")
    frontier = SqliteFrontier(folder / f"frontier-{group}.sqlite3", spider)
    requests = [scrapy.Request(f"http://bench.test/{n}") for n in range(PAGES)]
    started = time.perf_counter()
    for first in range(0, PAGES, group):
        with frontier.transaction():
            for n in range(first, first + group):
                frontier.put(n.to_bytes(4, "big"), (-n / PAGES, 0.0, n), requests[n])
    for _ in range(0, PAGES, group):
        with frontier.transaction():
            for _ in range(group):
                frontier.pop()
    elapsed = time.perf_counter() - started
    frontier.close()
    return elapsed


def main(argv: Sequence[str] | None = None) -> None:
    # No options, but --help says what it measures and a stray argument is refused, not ignored.
    parser = CommandLineParser(
        prog="python -m benchmarks.crash_safety", description=__doc__.splitlines()[0]
    )
    parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for _ in range(3):
            single, batched = store_seconds(folder, 1), store_seconds(folder, 50)
            each, grouped = frontier_seconds(folder, 1), frontier_seconds(folder, 500)
            print(
                f"store: {PAGES / single:,.0f} pages/s one per commit, {PAGES / batched:,.0f}"
                f" in batches of 50 (ratio {single / batched:.2f}); frontier: {PAGES / each:,.0f}"
                f" put+pop/s one per commit, {PAGES / grouped:,.0f} by 500 (ratio"
                f" {each / grouped:.2f})"
            )
            for path in folder.iterdir():
                path.unlink()


if __name__ == "__main__":
    main()
