"""Reads of a large SQLite store: ``scrapy report``, ``scrapy crawls`` of a running crawl, and
a resume's read of the stored pages (the storage pipeline's ``recover_state``).

    python -m benchmarks.store_reads --pages 200000 --baseline a0f891e

A store of ``--pages`` pages (5-30 KB of text each, as a crawl of Wikipedia stores; every other
field as a crawl writes it) is written with each checkout's own ``SqliteStore.save_pages``, its
crawl left running, so that ``crawls`` counts its pages. Each read runs in a fresh process on a
checkout's code: cold (the store's pages dropped from the OS cache first, ``posix_fadvise``, that
file only) and warm (the best of two runs), with the process's peak RSS. With ``--baseline
REV``: REV's code on REV's store, this checkout's code on REV's store (a store already on a
user's disk meets the new code so), and this checkout's code on its own store; without it, only
the last. The stores are written in ``--dir`` (a temporary folder by default: 3.5 GB each at
200,000 pages) and removed at the end. The table is printed and written as ``store_reads.md``
under ``--out``.
"""

from __future__ import annotations

import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CRAWL = "bench"
BATCH = 500
READS = ("report", "crawls", "resume read")


def page_records(count: int, schema: set[str]) -> Any:
    """``count`` page records of crawl ``CRAWL``, in fetch order, with the fields of
    ``schema`` (a checkout's ``PAGE_SCHEMA``), the same for every checkout."""
    rng = random.Random(1)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(2, 11))) for _ in range(5000)]
    pool = " ".join(rng.choices(words, k=10_000))  # ~70 KB, each page's text cut from it
    for n in range(1, count + 1):
        size = rng.randint(5_000, 30_000)
        start = rng.randint(0, len(pool) - size)
        host = f"site{n % 997}.example.org"
        relevance = rng.random()
        record = {
            "crawl_id": CRAWL,
            "url": f"https://{host}/wiki/Page_{n}_{rng.randint(0, 10**9)}",
            "title": f"Page {n} about {rng.choice(words)} {rng.choice(words)}",
            "text": pool[start : start + size],
            "level": min(n.bit_length() // 2, 12),
            "parent_url": f"https://{host}/wiki/Page_{n // 7}",
            "anchor": f"{rng.choice(words)} {rng.choice(words)}",
            "link_relevance": rng.random(),
            "tfidf": relevance,
            "lsi": relevance,
            "relevance": relevance,
            "is_relevant": relevance >= 0.5,
            "strategy": "bestfirst",
            "fetch_order": n,
            "fetched_at": "2026-12-07T10:00:00.123456+00:00",
            "status": 200,
            "duplicate_of": f"https://{host}/wiki/Page_{n - 1}" if n % 50 == 0 else None,
            "language": "en",
            "content_hash": f"{rng.getrandbits(160):040x}",
            "last_changed": "2026-12-07T10:00:00.123456+00:00",
            "changes": 0,
            "visits": 1,
            "robots": "noindex" if n % 97 == 0 else None,
            "etag": f'"{rng.getrandbits(64):016x}"',
            "last_modified": "Mon, 07 Dec 2026 09:00:00 GMT",
        }
        yield {name: value for name, value in record.items() if name in schema}


def build(path: str, count: int) -> float:
    """Write a store of ``count`` pages at ``path`` with this process's checkout; seconds."""
    from focused.sqlitestore import SqliteStore
    from focused.storage import PAGE_SCHEMA

    started = time.perf_counter()
    store = SqliteStore(path)
    store.start_crawl(
        {
            "crawl_id": CRAWL,
            "query": "birds feathers nesting",
            "strategy": "bestfirst",
            "params": {},
            "seeds": ["https://en.wikipedia.org/wiki/Bird"],
        }
    )
    batch = []
    for record in page_records(count, set(PAGE_SCHEMA)):
        batch.append(record)
        if len(batch) == BATCH:
            store.save_pages(batch)
            batch = []
    store.save_pages(batch)
    store.close()
    return time.perf_counter() - started


def read(path: str, what: str) -> tuple[float, float]:
    """One read of the store at ``path`` in this process: seconds, and peak RSS in MB."""
    from focused.sqlitestore import SqliteStore

    started = time.perf_counter()
    store = SqliteStore(path, read_only=True)
    if what == "report":
        from focused.report import REPORT_FIELDS, TOP_FIELDS, TOP_PAGES, build_report
        from focused.storecommand import find_crawl

        crawl = find_crawl(store, None)
        top = store.pages(crawl["crawl_id"], limit=TOP_PAGES, fields=TOP_FIELDS)
        pages = store.iter_pages(crawl["crawl_id"], order="fetch_order", fields=REPORT_FIELDS)
        if not build_report(crawl, pages, top).stored:
            raise RuntimeError("the report counted no page")
    elif what == "crawls":
        from focused.report import totals

        for crawl in store.crawls():
            totals(crawl, store.page_counts(crawl["crawl_id"]))
    else:  # the storage pipeline's own read, as a JOBDIR crawl's open runs it
        from types import SimpleNamespace

        from scrapy.settings import Settings

        from pipelines.storage import StoragePipeline

        pipeline = StoragePipeline.__new__(StoragePipeline)
        pipeline.store, pipeline.crawl_id = store, CRAWL
        # A JOBDIR with no counters file: the window is read from the store, as for a JOBDIR
        # written before its verdicts were (the read this benchmark times).
        jobdir = str(Path(path).with_suffix(".no-jobdir"))
        settings = Settings({"DRIFT_WINDOW": 1000, "JOBDIR": jobdir})
        pipeline.crawler = SimpleNamespace(settings=settings)
        pipeline._said_unreadable = False
        spider = SimpleNamespace(state={}, relevance=None)
        pipeline.recover_state(spider)
        if not spider.state.get("pages"):
            raise RuntimeError("the resume read no page")
    store.close()
    seconds = time.perf_counter() - started
    return seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def drop_from_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def measure(checkout: Path, store: Path, what: str) -> str:
    """A table cell: ``what`` read by ``checkout``'s code from ``store``, cold then warm."""
    from benchmarks.runner import call_in_checkout

    drop_from_cache(store)
    cold, cold_rss = call_in_checkout(checkout, __file__, "read", str(store), what)
    warm = [call_in_checkout(checkout, __file__, "read", str(store), what) for _ in range(2)]
    rss = max(cold_rss, *(run[1] for run in warm))
    return f"{cold:.2f} s cold, {min(run[0] for run in warm):.2f} s warm, {rss:.0f} MB"


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.runner import call_in_checkout, extract_revision, output_folder, report_head
    from focused.errors import CommandLineParser, ConfigError, at_least_one, folder, say

    parser = CommandLineParser(prog="python -m benchmarks.store_reads")
    parser.add_argument("--pages", type=at_least_one, default=200_000, help="pages of a store")
    parser.add_argument("--baseline", metavar="REV", help="also REV's store and code")
    parser.add_argument("--dir", type=folder, help="where the stores are written")
    parser.add_argument("--out", type=output_folder, default=Path("store_reads"))
    args = parser.parse_args(argv)
    work = tempfile.TemporaryDirectory(prefix="focused-store-reads-", dir=args.dir)
    tmp = Path(work.name)
    try:
        checkouts = {"this checkout": REPO}
        if args.baseline:
            checkouts = {args.baseline: extract_revision(args.baseline, tmp / "baseline")}
            checkouts["this checkout"] = REPO
        stores = {}
        for name, checkout in checkouts.items():
            stores[name] = tmp / f"{len(stores)}.sqlite3"
            seconds = call_in_checkout(checkout, __file__, "build", str(stores[name]), args.pages)
            size = stores[name].stat().st_size / 2**30
            print(f"{name}'s store: {args.pages:,} pages, {size:.2f} GiB in {seconds:.0f} s")
        # (whose code, its checkout, whose store)
        columns = [(name, checkout, name) for name, checkout in checkouts.items()]
        if args.baseline:
            columns.insert(1, ("this checkout", REPO, args.baseline))
        lines = report_head("Reads of a large SQLite store", "benchmarks.store_reads", argv)
        header = [f"{code}'s code, {store}'s store" for code, _, store in columns]
        lines += [f"| read | {' | '.join(header)} |", "|---" * (len(header) + 1) + "|"]
        for what in READS:
            cells = [measure(checkout, stores[store], what) for _, checkout, store in columns]
            lines.append(f"| {what} | {' | '.join(cells)} |")
            print(lines[-1], flush=True)
    except (ConfigError, OSError) as exc:
        say(f"{parser.prog}: error: {exc}")
        return 2
    except RuntimeError as exc:  # a checkout's build or read failed: its traceback's end
        say(f"{parser.prog}: error: {exc}")
        return 1
    finally:
        work.cleanup()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "store_reads.md").write_text("\n".join([*lines, ""]), encoding="utf-8")
    print(f"report in {args.out / 'store_reads.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
