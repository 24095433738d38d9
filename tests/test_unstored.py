"""Records the store could not take: kept in a file at the close (``focused.unstored``), and
loaded back by ``scrapy restore``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import bson
import mongomock
import numpy
import pymongo
import pytest
from scrapy import signals
from scrapy.pipelines import ItemPipelineManager
from scrapy.utils.test import get_crawler

import pipelines.storage as storage_pipeline
from focused.mongostore import MongoStore
from focused.refresh import RecrawlSpider, revisit
from focused.sqlitestore import SqliteStore
from focused.storage import FINISH_FIELDS, StoreError
from focused.unstored import Unstored, read_unstored, restore
from pipelines.storage import STORE_UNREACHABLE, UNSTORED, UNSTORED_SPILLED, StoragePipeline
from tests.conftest import run_scrapy
from tests.test_commands import cli, one_crawl, one_line_error, unwritable_output  # noqa: F401
from tests.test_storage import (  # noqa: F401
    FakeEngine,
    FakeSpider,
    _stored_count,
    locked_store_crawl,
    make_store,
    mongo_client,
    page,
    pipeline_crawler,
    run_pipelines,
    scored_item,
)

ITEMS = 7


def items() -> list:
    """Pages with values JSON does not know, as a spider or a pipeline may hand them over."""
    pages = [scored_item(n) for n in range(ITEMS)]
    pages[1]["fetched_at"] = datetime(2024, 6, 1, 0, 0, 1, 250, tzinfo=UTC)
    pages[2]["link_relevance"] = numpy.float32(0.3)
    pages[3]["title"] = 'Ptáci \u2013 鳥 \u2028 "quoted"\n'
    return pages


def locked(*args, **kwargs) -> None:
    raise sqlite3.OperationalError("database is locked")


def store_down(monkeypatch, *, crawl_record_too: bool = False) -> None:
    """SQLite refuses every page write (and every crawl record update), as a locked file."""
    monkeypatch.setattr(SqliteStore, "_upsert_pages", locked)
    if crawl_record_too:
        monkeypatch.setattr(SqliteStore, "_update_crawl", locked)


def run(crawler, pages: list) -> None:
    asyncio.run(run_pipelines(crawler, pages, reason=STORE_UNREACHABLE))


def unstored_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("unstored-*.jsonl"))


def refused_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("refused-*.jsonl"))


def error_lines(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("backend", ["sqlite", "mongo"])
def test_pages_the_store_refused_are_kept_and_load_back_as_stored(
    tmp_path,
    monkeypatch,
    mongo_client,  # noqa: F811
    caplog,
    backend,
):
    settings = {"STORAGE_BATCH_SIZE": 3, "STORAGE_RETRIES": 1, "STORAGE_RETRY_DELAY": 0}
    # What a store that works keeps of the same pages.
    good = tmp_path / "good.sqlite3"
    run(pipeline_crawler(FOCUSED_DB=str(good), **settings), items())
    reference = SqliteStore(good)
    expected_pages = reference.pages("pipe", order="fetch_order")
    expected_crawl = reference.get_crawl("pipe")
    reference.close()

    spill = tmp_path / "spill"
    crawler = pipeline_crawler(
        FOCUSED_DB=str(tmp_path / "down.sqlite3"), FOCUSED_UNSTORED_DIR=str(spill), **settings
    )
    with monkeypatch.context() as patch, caplog.at_level(logging.ERROR):
        store_down(patch, crawl_record_too=True)
        closed_after = datetime.now(UTC).isoformat()
        run(crawler, items())
    [path] = unstored_files(spill)
    assert path.name.startswith("unstored-pipe-")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [line["kind"] for line in lines] == ["page"] * ITEMS + ["finish"]
    assert [line["record"]["url"] for line in lines[:-1]] == [f"http://t/{n}" for n in range(ITEMS)]
    assert crawler.stats.get_value(UNSTORED) == crawler.stats.get_value(UNSTORED_SPILLED) == ITEMS
    kept = [r.getMessage() for r in error_lines(caplog) if str(path) in r.getMessage()]
    assert len(kept) == 2, [r.getMessage() for r in error_lines(caplog)]
    assert kept[0].startswith(f"{ITEMS} page records of crawl pipe were not stored: ")
    hint = f"`scrapy restore {path} -s FOCUSED_DB={tmp_path / 'down.sqlite3'}`"
    assert f"kept in {path}: load into the store with {hint}" in kept[0]
    assert kept[1].startswith("crawl pipe could not be recorded as interrupted: ")
    assert all(r.exc_info is None for r in error_lines(caplog))

    second = make_store(backend, tmp_path, mongo_client)
    second.start_crawl(FakeSpider().crawl_record())
    unstored = read_unstored([str(path)])
    restore(second, unstored)
    assert second.pages("pipe", order="fetch_order") == expected_pages
    crawl = second.get_crawl("pipe")
    assert closed_after < crawl["finished_at"] < datetime.now(UTC).isoformat()
    outcome = [name for name in FINISH_FIELDS if name != "finished_at"]
    assert {name: crawl[name] for name in outcome} == {
        name: expected_crawl[name] for name in outcome
    }
    assert (crawl["status"], crawl["finish_reason"]) == ("interrupted", STORE_UNREACHABLE)
    restore(second, unstored)  # twice: the same records, no more
    assert second.pages("pipe", order="fetch_order") == expected_pages
    second.close()


def test_a_folder_that_cannot_take_the_file_leaves_one_line_saying_why(
    tmp_path, monkeypatch, caplog
):
    blocker = tmp_path / "a file"
    blocker.write_text("", encoding="utf-8")
    crawler = pipeline_crawler(
        FOCUSED_DB=str(tmp_path / "down.sqlite3"),
        FOCUSED_UNSTORED_DIR=str(blocker / "unstored"),
        STORAGE_RETRIES=0,
    )
    store_down(monkeypatch)
    with caplog.at_level(logging.ERROR):
        run(crawler, items())
    lost = [r for r in error_lines(caplog) if "page records" in r.getMessage()]
    assert len(lost) == 1
    message = lost[0].getMessage()
    assert message.startswith(f"{ITEMS} page records of crawl pipe were not stored: ")
    assert message.endswith(": Not a directory") and f"not kept in {blocker}/unstored/" in message
    assert lost[0].exc_info is None and "\n" not in message
    assert crawler.stats.get_value(UNSTORED) == ITEMS
    assert crawler.stats.get_value(UNSTORED_SPILLED) is None
    assert list(tmp_path.rglob("unstored-*")) == []


def test_a_forced_stop_keeps_the_pages_waiting_for_the_store(tmp_path, monkeypatch, caplog):
    """A second Ctrl-C while a write is retried: the reactor stops, the spider never closes."""
    db = tmp_path / "down.sqlite3"
    crawler = pipeline_crawler(FOCUSED_DB=str(db), STORAGE_RETRIES=3, STORAGE_RETRY_DELAY=600)
    store_down(monkeypatch)

    async def stop_while_retrying() -> None:
        manager = ItemPipelineManager.from_crawler(crawler)
        await manager.open_spider_async()
        [pipeline] = [p for p in manager.middlewares if isinstance(p, StoragePipeline)]
        waiting = [asyncio.ensure_future(manager.process_item_async(item)) for item in items()]
        while len(pipeline._buffer) < ITEMS:
            await asyncio.sleep(0.01)
        crawler.spider.state = {"pages": ITEMS, "relevant": 4}
        pipeline.forced_stop()
        pipeline.keep_unstored()  # the reactor stopped
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)

    with caplog.at_level(logging.ERROR):
        asyncio.run(stop_while_retrying())
    [path] = unstored_files(tmp_path)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [line["record"]["url"] for line in lines] == [f"http://t/{n}" for n in range(ITEMS)]
    [kept] = [r.getMessage() for r in error_lines(caplog)]
    assert kept.startswith(
        f"{ITEMS} page records of crawl pipe were not stored: the crawl was stopped"
        f" (forced_shutdown) while they waited; kept in {path}"
    )
    assert crawler.stats.get_value(UNSTORED_SPILLED) == ITEMS
    store = SqliteStore(db)
    try:
        crawl = store.get_crawl("pipe")
    finally:
        store.close()
    assert (crawl["status"], crawl["finish_reason"], crawl["pages"]) == (
        "interrupted",
        "forced_shutdown",
        ITEMS,
    )


@pytest.mark.usefixtures("bson_encoding")
@pytest.mark.parametrize("case", ["stored", "no answer", "refused"])
def test_a_forced_stop_keeps_only_the_pages_no_write_stored(
    tmp_path,
    monkeypatch,
    mongo_client,  # noqa: F811
    caplog,
    case,
):
    """A second Ctrl-C while a worker thread wrote a batch to MongoDB: the whole buffer went to
    the file of unstored records as the reactor began to stop, "not stored", the batch under
    way too and the pages the engine went on to store: all were in the store, and `scrapy
    restore` after a recrawl would have put their older versions back. Only the pages no write
    stored are kept now, once the reactor has stopped; a batch the store has not answered for
    by then is kept, said to be stored or not; a page of it the store refused, as it would be at
    any other time."""
    monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)
    monkeypatch.setattr(storage_pipeline, "FORCED_STOP_WAIT", 0.5, raising=False)
    crawler = pipeline_crawler(MONGO_URI="mongodb://db.test", FOCUSED_UNSTORED_DIR=str(tmp_path))
    writing, answer = threading.Event(), threading.Event()
    upsert = MongoStore._upsert_pages

    def slow(self, pages: list) -> None:
        if pages[0]["url"] == "http://t/1":
            writing.set()
            assert answer.wait(10)
        upsert(self, pages)

    monkeypatch.setattr(MongoStore, "_upsert_pages", slow)

    async def stop_while_writing() -> None:
        manager = ItemPipelineManager.from_crawler(crawler)
        await manager.open_spider_async()
        [pipeline] = [p for p in manager.middlewares if isinstance(p, StoragePipeline)]
        pages = items()
        if case == "refused":
            pages[1]["title"] = "lone \udc80 surrogate"
        crawler.spider.state = {"pages": ITEMS, "relevant": 4}
        await manager.process_item_async(pages[0])
        waiting = [asyncio.ensure_future(manager.process_item_async(item)) for item in pages[1:]]
        while not writing.is_set() or len(pipeline._buffer) < ITEMS - 1:
            await asyncio.sleep(0.01)
        pipeline.forced_stop()
        # The engine runs on until the reactor stops: nothing is known to be lost yet.
        assert unstored_files(tmp_path) == []
        if case != "no answer":
            threading.Timer(0.1, answer.set).start()
        pipeline.keep_unstored()  # the reactor stopped
        answer.set()
        await asyncio.gather(*waiting, return_exceptions=True)

    with caplog.at_level(logging.WARNING):
        asyncio.run(stop_while_writing())
    stored = MongoStore("mongodb://db.test", "focused", client=mongo_client)
    # The write of page 1 ended as the process did.
    assert [p["url"] for p in stored.pages("pipe", order="fetch_order", fields=["url"])] == [
        "http://t/0",
        *(["http://t/1"] if case != "refused" else []),
    ]
    [path] = unstored_files(tmp_path)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    # A page refused goes to a file of its own: restore checks a file whole, and its line would
    # hold back the others until mended.
    first_kept = 1 if case == "no answer" else 2
    if case == "refused":
        [refused] = refused_files(tmp_path)
        assert [json.loads(line)["record"]["url"] for line in refused.read_text().splitlines()] == [
            "http://t/1"
        ]
    else:
        assert refused_files(tmp_path) == []
    assert [line["record"]["url"] for line in lines] == [
        f"http://t/{n}" for n in range(first_kept, ITEMS)
    ]
    said = [r.getMessage() for r in caplog.records if r.name == "pipelines.storage"]
    waited = (
        f"{ITEMS - 2} page records of crawl pipe were not stored: the crawl was stopped"
        f" (forced_shutdown) while they waited; kept in {path}"
    )
    if case == "stored":
        assert [line.startswith(waited) for line in said] == [True]
    elif case == "refused":
        assert [line.startswith(waited) for line in said] == [False, True]
        assert said[0].startswith("page http://t/1 of crawl pipe was not stored: ")
        assert crawler.stats.get_value("focused/refused") == 1
    else:
        assert [line.startswith(waited) for line in said] == [False, True]
        assert said[0].startswith(
            "1 page record of crawl pipe may not have been stored: the crawl was stopped"
            " (forced_shutdown) while they were being written, and the store did not say"
            f" within 0.5 s whether it took them; kept in {path}"
        )
    assert crawler.stats.get_value(UNSTORED) == ITEMS - 2 + (case == "no answer")


@pytest.fixture
def bson_encoding(monkeypatch) -> None:
    """mongomock stores any Python value; pymongo encodes each document as BSON before it sends
    a bulk write, and raises bson's errors (no PyMongoError) for a value BSON cannot hold. Make
    mongomock do so."""
    bulk_write = mongomock.collection.Collection.bulk_write

    def encoding(self, requests, *args, **kwargs):
        for request in requests:
            bson.encode(request._doc)
        return bulk_write(self, requests, *args, **kwargs)

    monkeypatch.setattr(mongomock.collection.Collection, "bulk_write", encoding)


@pytest.mark.usefixtures("bson_encoding")
@pytest.mark.parametrize("backend", ["sqlite", "mongo"])
def test_a_page_the_store_cannot_hold_is_kept_and_the_others_are_stored(
    tmp_path,
    monkeypatch,
    mongo_client,  # noqa: F811
    caplog,
    backend,
):
    """A value the store cannot hold (text that is no UTF-8, an integer over 64 bits) failed its
    page with a traceback, and the page stayed first in line: every page after it failed too,
    and the crawl's outcome was never recorded. The page is now kept in the file of unstored
    records with one warning line, and the crawl goes on."""
    monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)
    where = {"MONGO_URI": "mongodb://db.test"} if backend == "mongo" else {}
    db = tmp_path / "crawl.sqlite3"
    crawler = pipeline_crawler(FOCUSED_DB=str(db), FOCUSED_UNSTORED_DIR=str(tmp_path), **where)
    pages = items()
    pages[2]["title"] = "lone \udc80 surrogate"
    pages[5]["level"] = 2**64

    async def crawl() -> list:
        manager = ItemPipelineManager.from_crawler(crawler)
        await manager.open_spider_async()
        await crawler.signals.send_catch_log_async(signals.spider_opened, spider=crawler.spider)
        # Together, as responses come in: MongoDB writes those waiting in one batch.
        done = await asyncio.gather(
            *(manager.process_item_async(item) for item in pages), return_exceptions=True
        )
        crawler.spider.state = {"pages": ITEMS, "relevant": 4}
        await manager.close_spider_async()
        await crawler.signals.send_catch_log_async(
            signals.spider_closed, spider=crawler.spider, reason="finished"
        )
        return done

    with caplog.at_level(logging.WARNING):
        done = asyncio.run(crawl())
    assert [type(result).__name__ for result in done] == [
        "DropItem" if n in (2, 5) else "PageItem" for n in range(ITEMS)
    ]
    store = (
        MongoStore("mongodb://db.test", "focused", client=mongo_client)
        if backend == "mongo"
        else SqliteStore(db)
    )
    try:
        stored = [p["url"] for p in store.pages("pipe", order="fetch_order", fields=["url"])]
        crawl_record = store.get_crawl("pipe")
    finally:
        store.close()
    assert stored == [f"http://t/{n}" for n in (0, 1, 3, 4, 6)]
    assert (crawl_record["status"], crawl_record["pages"]) == ("finished", ITEMS)
    assert unstored_files(tmp_path) == []
    [path] = refused_files(tmp_path)
    lines = [json.loads(line)["record"] for line in path.read_text(encoding="utf-8").splitlines()]
    assert [(line["url"], line["title"], line["level"]) for line in lines] == [
        ("http://t/2", pages[2]["title"], 2),
        ("http://t/5", "page 5", 2**64),
    ]
    said = [r for r in caplog.records if r.name == "pipelines.storage"]
    assert [r.levelno for r in said] == [logging.WARNING] * 2
    assert [r.getMessage() for r in caplog.records if r.exc_info or "\n" in r.getMessage()] == []
    assert said[0].getMessage().startswith("page http://t/2 of crawl pipe was not stored: ")
    assert "surrogates not allowed" in said[0].getMessage()
    assert said[1].getMessage().startswith("page http://t/5 of crawl pipe was not stored: ")
    store = "MONGO_URI=mongodb://db.test" if backend == "mongo" else f"FOCUSED_DB={db}"
    hint = f"`scrapy restore {path} -s {store}`"
    assert f"; kept in {path}: {hint} loads it once" in said[1].getMessage()
    assert crawler.stats.get_value("focused/refused") == 2
    assert crawler.stats.get_value("focused/stored") == ITEMS - 2
    assert crawler.stats.get_value(UNSTORED) is None


@pytest.fixture
def full_disk(tmp_path) -> Iterator[Path]:
    """A folder on a filesystem of 16 kB (tmpfs): a write past that fails with ENOSPC, as on a
    disk filling up. Mounting needs root (CI runs as root)."""
    folder = tmp_path / "small"
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small filesystem needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode:
        pytest.skip(f"cannot mount a small filesystem: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize("text", [4000, 20000], ids=["some fit", "none fits"])
def test_a_disk_filling_up_keeps_whole_records_and_says_how_many_not(
    full_disk, monkeypatch, caplog, tmp_path, text
):
    """The file held the records written before the disk filled up and one cut short, while the
    log said that none was kept; the crawl's outcome, written after, was glued to the cut one."""
    pages = items()
    for item in pages:
        item["text"] = "x" * text  # a 20 kB page fits on no 16 kB disk
    crawler = pipeline_crawler(
        FOCUSED_DB=str(tmp_path / "down.sqlite3"),
        FOCUSED_UNSTORED_DIR=str(full_disk),
        STORAGE_RETRIES=0,
    )
    with monkeypatch.context() as patch, caplog.at_level(logging.ERROR):
        store_down(patch, crawl_record_too=True)
        run(crawler, pages)
    [path] = unstored_files(full_disk)  # the crawl's outcome at least is small enough
    hint = f"`scrapy restore {path} -s FOCUSED_DB={tmp_path / 'down.sqlite3'}`"
    kinds = [json.loads(line)["kind"] for line in path.read_text(encoding="utf-8").splitlines()]
    kept = kinds.count("page")
    assert kinds == ["page"] * kept + ["finish"]  # whole lines only, in order
    assert read_unstored([str(path)]).cut_short == []
    [lost, outcome] = [r.getMessage() for r in error_lines(caplog) if str(path) in r.getMessage()]
    assert lost.startswith(f"{ITEMS} page records of crawl pipe were not stored: ")
    if text == 20000:
        assert kept == 0
        assert lost.endswith(f"; not kept in {path} either: No space left on device")
    else:
        assert 0 < kept < ITEMS
        assert lost.endswith(
            f"; {kept} kept in {path} (load into the store with {hint}), "
            f"the other {ITEMS - kept} not: No space left on device"
        )
    assert outcome.endswith(f"; kept in {path}: load into the store with {hint}")
    assert all(r.exc_info is None for r in error_lines(caplog))
    assert crawler.stats.get_value(UNSTORED) == ITEMS
    assert crawler.stats.get_value(UNSTORED_SPILLED) == (kept or None)


def test_a_recrawl_keeps_its_page_updates(tmp_path, monkeypatch):
    db = tmp_path / "crawl.sqlite3"
    store = SqliteStore(db)
    store.start_crawl(FakeSpider().crawl_record())
    store.save_pages([page("http://t/1", "pipe")])
    [before] = store.pages("pipe")
    update = revisit(before, "t", "changed", "2024-06-02T00:00:00+00:00", 200)
    crawler = get_crawler(RecrawlSpider, {"FOCUSED_DB": str(db), "STORAGE_RETRIES": 0})
    crawler.spider = RecrawlSpider.from_crawler(crawler, "pipe", pages=[], policy="uniform")
    crawler.engine = FakeEngine()

    async def recrawl() -> None:
        manager = ItemPipelineManager.from_crawler(crawler)
        await manager.open_spider_async()
        with contextlib.suppress(StoreError):  # not stored: the store is down
            await manager.process_item_async(update)
        await manager.close_spider_async()

    with monkeypatch.context() as patch:
        patch.setattr(SqliteStore, "_update_pages", locked)
        asyncio.run(recrawl())
    [path] = unstored_files(tmp_path)
    assert [json.loads(line)["kind"] for line in path.read_text().splitlines()] == ["update"]
    assert store.pages("pipe") == [before]
    restore(store, read_unstored([str(path)]))
    [after] = store.pages("pipe")
    assert (after["text"], after["changes"], after["fetched_at"]) == (
        "changed",
        1,
        "2024-06-02T00:00:00+00:00",
    )
    store.close()


def test_the_restore_command_a_crawl_gives_names_its_store(tmp_path, monkeypatch, caplog):
    """A Scrapyd job's FOCUSED_DB is relative to Scrapyd's folder, and `scrapy restore`, a
    project command, runs in the repository: the command the crawl's error line gave, `scrapy
    restore FILE`, looked in the repository's store (no such crawl there, or, under the same
    crawl id, another crawl's) and not in the one the records were for."""
    scrapyd = tmp_path / "scrapyd"
    scrapyd.mkdir()
    crawler = pipeline_crawler(FOCUSED_DB="focused.sqlite3", STORAGE_RETRIES=0)
    with monkeypatch.context() as patch, caplog.at_level(logging.ERROR):
        patch.chdir(scrapyd)
        store_down(patch)
        run(crawler, items())
    [said] = [r.getMessage() for r in error_lines(caplog) if "scrapy restore" in r.getMessage()]
    command = shlex.split(said.split("`")[-2])
    assert command[:2] == ["scrapy", "restore"], said
    restored = run_scrapy(command[1:], timeout=120)  # in the repository
    assert restored.returncode == 0, restored.stderr
    store = SqliteStore(scrapyd / "focused.sqlite3", create=False)
    try:
        assert len(store.pages("pipe", order="fetch_order", fields=["url"])) == ITEMS
    finally:
        store.close()


# -- scrapy restore --------------------------------------------------------------------------


def spilled(tmp_path: Path, crawl_id: str = "one") -> Path:
    path = tmp_path / "unstored-one.jsonl"
    lines = [{"kind": "page", "record": page(f"http://t/{n}", crawl_id)} for n in range(3)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def stored_urls(settings: dict) -> list[str]:
    store = SqliteStore(settings["FOCUSED_DB"], create=False)
    try:
        return [p["url"] for p in store.pages("one", order="fetch_order", fields=["url"])]
    finally:
        store.close()


def test_restore_writes_the_file_into_the_store(cli, one_crawl, tmp_path):  # noqa: F811
    path = spilled(tmp_path)
    result = cli("restore", str(path), settings=one_crawl)
    assert result.returncode == 0 and result.stderr == "", result
    assert result.stdout == (
        f"restored 3 pages of crawl one into the SQLite store at {one_crawl['FOCUSED_DB']}\n"
        f"{path} is now unstored-one.jsonl.restored\n"
    )
    assert stored_urls(one_crawl) == ["http://t/0", "http://t/1", "http://t/2"]


def test_restore_is_refused_while_a_recrawl_of_the_crawl_is_under_way(cli, one_crawl, tmp_path):  # noqa: F811
    """A recrawl counts the verdicts it moves from a batch it marks pending in the crawl record
    (``focused.mongostore``): a restore writing the crawl's updates beside it could settle that
    batch before its pages were written, and its moves were lost. Refused, nothing written."""
    store = SqliteStore(one_crawl["FOCUSED_DB"], create=False)
    try:
        assert store.claim_recrawl("one", None, 30.0)
    finally:
        store.close()
    path = spilled(tmp_path)
    result = cli("restore", str(path), settings=one_crawl)
    one_line_error(result, 2, "crawl one is being recrawled in another process (last seen")
    assert "let that recrawl end, then restore the file again" in result.stderr
    assert stored_urls(one_crawl) == [] and path.exists()


@pytest.mark.parametrize("backend", ["sqlite", "mongo"])
def test_restore_leaves_a_page_the_store_holds_as_new_or_newer(
    tmp_path,
    mongo_client,  # noqa: F811
    backend,
):
    """A record a forced stop kept may have been stored after all (a batch MongoDB had not
    answered for), and the page fetched again since: restore put the older record back over
    the newer page, and a recrawl's older update over its later visit."""
    store = make_store(backend, tmp_path, mongo_client)
    store.start_crawl(FakeSpider().crawl_record())
    early, late = "2024-06-01T00:00:01+00:00", "2024-06-05T00:00:00+00:00"
    store.save_pages(
        [
            page("http://t/new", "pipe", fetched_at=late, title="fetched again"),
            page("http://t/same", "pipe", fetched_at=early, title="kept then"),
            page("http://t/old", "pipe", fetched_at=early, title="before the record"),
            page("http://t/tried", "pipe", fetched_at=early, tried_at=late, title="tried"),
        ]
    )
    path = tmp_path / "unstored-pipe.jsonl"
    middle = "2024-06-03T00:00:00+00:00"
    lines = [
        {"kind": "page", "record": page("http://t/new", "pipe", fetched_at=early)},
        {"kind": "page", "record": page("http://t/same", "pipe", fetched_at=early)},
        {"kind": "page", "record": page("http://t/none", "pipe", fetched_at=early)},
        {"kind": "update", "record": {"crawl_id": "pipe", "url": "http://t/new", "title": "x"}},
        {
            "kind": "update",
            "record": {"crawl_id": "pipe", "url": "http://t/old", "fetched_at": middle},
        },
        {
            "kind": "update",
            "record": {"crawl_id": "pipe", "url": "http://t/tried", "tried_at": middle},
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    left_out = restore(store, read_unstored([str(path)]))
    pages = {
        p["url"]: (p["title"], p["fetched_at"], p["tried_at"])
        for p in store.pages("pipe", fields=["url", "title", "fetched_at", "tried_at"])
    }
    store.close()
    assert pages == {
        "http://t/new": ("x", late, None),  # an update that tells no version: written
        "http://t/same": ("kept then", early, None),  # the same version: as it was
        "http://t/none": ("title of http://t/none", early, None),
        "http://t/old": ("before the record", middle, None),
        "http://t/tried": ("tried", early, late),
    }
    assert left_out == 3


def test_a_restored_file_is_renamed_so_that_it_is_not_restored_again(cli, one_crawl, tmp_path):  # noqa: F811
    """It stayed, and restoring it again (unstored-*.jsonl) after a recrawl put the older
    records back over the newer: restore is not idempotent."""
    path = spilled(tmp_path)
    content = path.read_bytes()
    twice = cli("restore", str(path), f"{tmp_path}//{path.name}", settings=one_crawl)
    assert twice.returncode == 0 and twice.stderr == "", twice  # named twice: read once
    assert twice.stdout.startswith("restored 3 pages of crawl one ")
    assert not path.exists()
    assert (tmp_path / "unstored-one.jsonl.restored").read_bytes() == content
    one_line_error(cli("restore", str(path), settings=one_crawl), 2, "No such file or directory")


def test_a_restored_file_that_cannot_be_renamed_says_so(cli, one_crawl, tmp_path):  # noqa: F811
    path = spilled(tmp_path)
    taken = tmp_path / "unstored-one.jsonl.restored"
    taken.write_text("another file", encoding="utf-8")
    result = cli("restore", str(path), settings=one_crawl)
    assert result.returncode == 0, result  # every record is written
    assert result.stderr == (
        f"{path}: restored, but it cannot be renamed unstored-one.jsonl.restored (the file "
        "exists): do not restore it again\n"
    )
    assert path.exists() and taken.read_text(encoding="utf-8") == "another file"
    assert stored_urls(one_crawl) == ["http://t/0", "http://t/1", "http://t/2"]


@pytest.mark.parametrize("output", ["gone", "full", "closed"])
def test_an_output_restore_cannot_print_to_leaves_no_file_to_restore_twice(
    cli,  # noqa: F811
    one_crawl,  # noqa: F811
    tmp_path,
    monkeypatch,
    output,
):
    """`scrapy restore FILE | head -1`, `> /dev/full`, `>&-`: the line saying the records were
    written was a traceback (BrokenPipeError, OSError, AttributeError) once they were, before
    the file was renamed, so a later restore put its older records back. A reader gone is no
    failure; an output full is one line once every file is renamed; none (`>&-`) one line
    before anything is written."""
    path = spilled(tmp_path)
    with unwritable_output(monkeypatch, output):
        result = cli("restore", str(path), settings=one_crawl)
    if output == "closed":
        one_line_error(result, 1, "cannot write the output: standard output is closed")
        assert path.exists() and stored_urls(one_crawl) == []
        return
    if output == "full":
        one_line_error(result, 1, "cannot write the output: No space left on device")
    else:
        assert (result.returncode, result.stderr) == (0, "")
    assert not path.exists() and (tmp_path / "unstored-one.jsonl.restored").exists()
    assert stored_urls(one_crawl) == ["http://t/0", "http://t/1", "http://t/2"]


def test_ctrl_c_as_restore_writes_says_which_files_to_restore_again(
    cli,  # noqa: F811
    one_crawl,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """Ctrl-C as the records were written was a KeyboardInterrupt traceback: it ends with
    status 130 and one line naming the files not renamed, which a restore run again writes
    whole."""
    path = spilled(tmp_path)

    def interrupted(store: SqliteStore, unstored: Unstored) -> None:
        store.save_pages(unstored.records["page"][:1])
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr("focused.commands.restore.restore", interrupted)
        result = cli("restore", str(path), settings=one_crawl)
    assert (result.returncode, result.stdout) == (130, "")
    assert result.stderr == (
        f"interrupted: {path} not marked restored (its records may be written in part):"
        " restore it again\n"
    )
    assert path.exists()
    assert cli("restore", str(path), settings=one_crawl).returncode == 0
    assert stored_urls(one_crawl) == ["http://t/0", "http://t/1", "http://t/2"]


def test_a_link_or_a_pipe_given_as_the_file_is_not_renamed(cli, one_crawl, tmp_path):  # noqa: F811
    """`scrapy restore /dev/stdin < FILE` renamed /dev/stdin, the system's link, to
    /dev/stdin.restored, and left the file as it was; a link of one's own the same."""
    path = spilled(tmp_path)
    link = tmp_path / "stdin"
    link.symlink_to(path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    feeding = threading.Thread(target=lambda: fifo.write_bytes(path.read_bytes()))
    feeding.start()
    result = cli("restore", str(link), str(fifo), settings=one_crawl)
    feeding.join()
    assert result.returncode == 0, result  # every record is written
    assert result.stderr == "".join(
        f"{given}: restored, but it cannot be renamed {given.name}.restored (not a regular"
        " file): do not restore it again\n"
        for given in (link, fifo)
    )
    assert link.is_symlink() and path.exists() and fifo.exists()
    assert not list(tmp_path.glob("*.restored"))


def test_a_page_line_of_a_version_before_the_later_fields_is_restored(cli, one_crawl, tmp_path):  # noqa: F811
    """Every field of today's page record was required: a file of a version with fewer was
    refused whole. The fields added since the first version load as null."""
    record = page("http://t/old", "one")
    later = [
        "duplicate_of",
        "language",
        "content_hash",
        "last_changed",
        "changes",
        "visits",
        "robots",
        "tried_at",
        "etag",
        "last_modified",
        "requested_url",
    ]
    for name in later:
        del record[name]
    path = tmp_path / "unstored-old.jsonl"
    path.write_text(json.dumps({"kind": "page", "record": record}) + "\n", encoding="utf-8")
    result = cli("restore", str(path), settings=one_crawl)
    assert result.returncode == 0, result
    store = SqliteStore(one_crawl["FOCUSED_DB"], create=False)
    try:
        [stored] = store.pages("one")
    finally:
        store.close()
    assert stored["url"] == "http://t/old" and stored["title"] == record["title"]
    assert [stored[name] for name in later] == [None] * len(later)


def test_restore_leaves_out_a_last_line_cut_short(cli, one_crawl, tmp_path):  # noqa: F811
    path = spilled(tmp_path)
    whole = path.read_text(encoding="utf-8")
    path.write_text(whole[: whole.rindex("\n", 0, -1) + 40], encoding="utf-8")
    result = cli("restore", str(path), settings=one_crawl)
    assert result.returncode == 0, result
    assert result.stderr == (
        f"{path}: its last line was cut short (a crash as it was written): left out\n"
    )
    assert result.stdout.startswith("restored 2 pages of crawl one")
    assert stored_urls(one_crawl) == ["http://t/0", "http://t/1"]


def line(kind: str = "page", **record) -> str:
    return json.dumps({"kind": kind, "record": {**page("http://t/9", "one"), **record}})


# A crawl's outcome, as the storage pipeline keeps it.
FINISH = {
    "crawl_id": "one",
    "finished_at": "2026-01-02T03:04:05+00:00",
    "status": "finished",
    "finish_reason": "finished",
    "pages": 3,
    "relevant": 1,
    "harvest_rate": 0.25,
}


def without(name: str) -> str:
    record = page("http://t/9", "one")
    del record[name]
    return json.dumps({"kind": "page", "record": record})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read {path}: No such file or directory"),
        ("folder", "cannot read {path}: Is a directory"),
        (b"", "{path} holds no unstored records"),
        (b"\xff\xfe\x00", "{path} is not a file of unstored records: not UTF-8 text"),
        (b"url,title\nhttp://t/1,a\n", "{path}, line 1: not a JSON record (Expecting value"),
        (b"[1, 2]\n", '{path}, line 1: not an unstored record ({"kind": ..., "record": ...})'),
        # A RecursionError traceback.
        ("[" * 5000, "{path}, line 2: not a JSON record (JSON nested more than 100 levels deep)"),
        (line("pages"), "{path}, line 2: unknown kind 'pages'; known: page, update, finish"),
        (
            json.dumps({"kind": ["page"], "record": {}}),
            "{path}, line 2: unknown kind ['page']; known: page, update, finish",
        ),
        (
            json.dumps({"kind": "page", "record": None}),
            "{path}, line 2: its record is not a JSON object",
        ),
        (without("title"), "{path}, line 2: a page record without title"),
        (line(level="deep"), "{path}, line 2: level='deep' is not a whole number, at least 0"),
        # Of another kind than the crawl writes: stored as its text (language '7', title
        # "['a']"), a time no reading command could read, "false" stored as true.
        (line(fetched_at="yesterday"), "{path}, line 2: fetched_at='yesterday' is not an ISO"),
        (line(language=7), "{path}, line 2: language=7 is not text"),
        (line(title=["a"]), "{path}, line 2: title=['a'] is not text"),
        (line(duplicate_of=7), "{path}, line 2: duplicate_of=7 is not text"),
        (line(is_relevant="false"), "{path}, line 2: is_relevant='false' is not true or false"),
        (line(level=-1), "{path}, line 2: level=-1 is not a whole number, at least 0"),
        (line("update", tried_at="now"), "{path}, line 2: tried_at='now' is not an ISO 8601"),
        (line(url=""), "{path}, line 2: a record needs a non-empty 'url'"),
        (line(visits=2**63), "{path}, line 2: visits=9223372036854775808 is too large: at most"),
        (line(title="\udc80"), "{path}, line 2: title is not UTF-8 text"),
        (line(level=float("inf")), "{path}, line 2: level=inf is not a whole number"),
        (line(relevance=float("nan")), "{path}, line 2: relevance=nan is not a finite number"),
        (line("update", rank=1), "{path}, line 2: page fields must be some of"),
        (
            json.dumps({"kind": "finish", "record": {"crawl_id": "one", "status": "done"}}),
            "{path}, line 2: a finish record without finished_at, finish_reason, pages",
        ),
        (
            json.dumps({"kind": "finish", "record": {**FINISH, "pages": "5"}}),
            "{path}, line 2: pages='5' is not a whole number, at least 0",
        ),
    ],
)
def test_a_bad_file_is_one_line_and_writes_nothing(cli, one_crawl, tmp_path, content, message):  # noqa: F811
    good = spilled(tmp_path)
    path = tmp_path / "bad.jsonl"
    if content == "folder":
        path.mkdir()
    elif isinstance(content, str):  # after a good line: nothing is written before the check
        path.write_text(f"{line()}\n{content}\n", encoding="utf-8")
    elif content is not None:
        path.write_bytes(content)
    result = cli("restore", str(good), str(path), settings=one_crawl)
    one_line_error(result, 2, message.replace("{path}", str(path)))
    assert stored_urls(one_crawl) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["restore", "{file}"], "line 2: relevance='xxx"),
        (["report", "x" * 100_000], "no crawl 'xxx"),
        (["recrawl", "a", "x" * 100_000], "give one crawl id, not 2: a xxx"),
    ],
)
def test_a_huge_value_is_quoted_in_a_short_line(cli, one_crawl, tmp_path, args, message):  # noqa: F811
    """float() quotes its input whole, as the commands' own messages did."""
    path = tmp_path / "huge.jsonl"
    path.write_text(f"{line()}\n{line(relevance='x' * 100_000)}\n", encoding="utf-8")
    result = cli(*[arg.replace("{file}", str(path)) for arg in args], settings=one_crawl)
    one_line_error(result, 2 if args[0] != "report" else 1, message)
    assert len(result.stderr) < 600 and "... (100" in result.stderr, result.stderr[:1000]


def test_a_store_without_the_crawl_is_one_line(cli, tmp_path):  # noqa: F811
    other = {"FOCUSED_DB": tmp_path / "other.sqlite3"}
    SqliteStore(other["FOCUSED_DB"]).close()
    path = spilled(tmp_path)
    message = f"no crawl 'one' in the SQLite store at {other['FOCUSED_DB']}"
    one_line_error(cli("restore", str(path), settings=other), 1, message)
    missing = {"FOCUSED_DB": tmp_path / "missing.sqlite3"}
    one_line_error(cli("restore", str(path), settings=missing), 1, "no such file")
    assert not missing["FOCUSED_DB"].exists()


def test_an_invalid_mongo_uri_is_a_bad_setting(cli, tmp_path):  # noqa: F811
    """Exit status 2, as from `scrapy crawl` (it was 1, as of a server that does not answer);
    the file is left to restore."""
    path = spilled(tmp_path)
    result = cli("restore", str(path), settings={"MONGO_URI": "mongo://127.0.0.1"})
    one_line_error(result, 2, "MongoDB URI 'mongo://127.0.0.1' is invalid: Invalid URI scheme")
    assert path.exists()


def test_restore_without_a_file_is_one_line(cli, one_crawl):  # noqa: F811
    message = "give the files of unstored records to load (unstored-*.jsonl)"
    one_line_error(cli("restore", settings=one_crawl), 2, message)
    one_line_error(cli("restore", "--bogus", settings=one_crawl), 2, "unknown option --bogus")


# -- a real crawl ----------------------------------------------------------------------------


def test_a_crawl_whose_store_stays_locked_keeps_its_pages_for_restore(tmp_path, site):
    """Another process holds the SQLite file's write lock until the crawl has given up on it
    and ended: every page fetched and not stored is in the file, and `scrapy restore` stores
    it once the lock is gone."""
    db, spill = tmp_path / "focused.sqlite3", tmp_path / "unstored"
    settings = {
        "FOCUSED_DB": db,
        "FOCUSED_UNSTORED_DIR": spill,
        "CONCURRENT_REQUESTS": 4,
        "CLOSESPIDER_PAGECOUNT": 120,
        "STORAGE_RETRIES": 0,  # each try waits out the lock for FOCUSED_DB_TIMEOUT
    }
    with locked_store_crawl(tmp_path, site, settings) as (crawl, locker):
        stored_before = _stored_count(locker)
        _, log = crawl.communicate(timeout=180)  # the lock held until the crawl has ended
        locker.execute("ROLLBACK")
    assert crawl.returncode == 1, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    [path] = unstored_files(spill)
    kept = [line for line in log.splitlines() if f"kept in {path}" in line]
    assert len(kept) == 2 and " ERROR: " in kept[0], log[-3000:]
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    pages = [line["record"] for line in lines if line["kind"] == "page"]
    assert lines[-1]["kind"] == "finish" and 0 < len(pages) == len(lines) - 1
    # However few pages came before the lock (one, on a loaded machine), said as many.
    records = (
        "page record of crawl locked was"
        if len(pages) == 1
        else "page records of crawl locked were"
    )
    assert f"{len(pages)} {records} not stored" in kept[0]
    fetched = {f"{site.url}{path}" for path in site.fetched if path.startswith("/wiki/")}
    store = SqliteStore(db)
    try:
        before = {p["url"] for p in store.pages("locked", fields=["url"])}
        assert len(before) == stored_before
        assert {p["url"] for p in pages} == fetched - before  # fetched, not stored: all kept
        assert store.get_crawl("locked")["status"] == "running"
    finally:
        store.close()

    restored = run_scrapy(["restore", str(path), "-s", f"FOCUSED_DB={db}"], timeout=60)
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout == (
        f"restored {len(pages)} page{'' if len(pages) == 1 else 's'}, 1 crawl outcome of crawl"
        " locked into the SQLite store"
        f" at {db}\n{path} is now {path.name}.restored\n"
    )
    listed = run_scrapy(
        ["pages", "--crawl", "locked", "--json", "-s", f"FOCUSED_DB={db}"], timeout=60
    )
    assert {json.loads(line)["url"] for line in listed.stdout.splitlines()} == fetched
    store = SqliteStore(db)
    try:
        crawl_record = store.get_crawl("locked")
    finally:
        store.close()
    assert (crawl_record["status"], crawl_record["finish_reason"]) == (
        "interrupted",
        STORE_UNREACHABLE,
    )
    assert crawl_record["pages"] == len(fetched)


def test_a_crawl_whose_unstored_records_fill_the_disk_says_what_it_lost(tmp_path, site, full_disk):
    """The store locked as above, and FOCUSED_UNSTORED_DIR on a disk too small for them all:
    the log says in one line how many page records are kept where and how many are lost, and
    the file holds those whole."""
    settings = {
        "FOCUSED_DB": tmp_path / "focused.sqlite3",
        "FOCUSED_UNSTORED_DIR": full_disk,
        # The pages under way when the store fails are the unstored ones: at 4, a loaded
        # machine left 2, which the 16 kB took whole; at 16 there are 13-16.
        "CONCURRENT_REQUESTS": 16,
        "CLOSESPIDER_PAGECOUNT": 60,
        "STORAGE_RETRIES": 0,
    }
    with locked_store_crawl(tmp_path, site, settings) as (crawl, locker):
        _, log = crawl.communicate(timeout=180)
        locker.execute("ROLLBACK")
    assert crawl.returncode == 1, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    [path] = unstored_files(full_disk)  # the crawl's outcome at least is small enough
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    kept = sum(line["kind"] == "page" for line in lines)
    [lost] = [line for line in log.splitlines() if re.search("page records? of crawl locked", line)]
    unstored = int(lost.split(" ERROR: ", 1)[1].split()[0])
    assert " ERROR: " in lost and kept < unstored, lost
    if kept:
        assert lost.endswith(
            f"; {kept} kept in {path} (load into the store with `scrapy restore {path} -s "
            f"FOCUSED_DB={settings['FOCUSED_DB']}`), the other {unstored - kept} not: No space "
            "left on device"
        ), lost
    else:
        assert lost.endswith(f"; not kept in {path} either: No space left on device"), lost
    assert read_unstored([str(path)]).cut_short == []
