"""The stores (SQLite, and MongoDB through mongomock or a real server) and the two pipelines.

Set FOCUSED_TEST_MONGO_URI (e.g. mongodb://127.0.0.1:27017) to also run against a real MongoDB;
each such test uses a database of its own and drops it afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import multiprocessing.synchronize
import os
import sqlite3
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import bson
import mongomock
import pymongo
import pytest
import scrapy
from scrapy import signals
from scrapy.exceptions import DropItem, ScrapyDeprecationWarning
from scrapy.pipelines import ItemPipelineManager
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from focused import sqlitestore, storage
from focused.arguments import CrawlConfig
from focused.errors import ConfigError
from focused.items import PageItem
from focused.jobchecks import check_store, starts_unlocked
from focused.mongostore import MongoStore
from focused.report import REPORT_FIELDS, TOP_FIELDS
from focused.resume import RECOVER_FIELDS
from focused.sqlitestore import SqliteStore
from focused.storage import (
    COUNT_FIELDS,
    CRAWL_FIELDS,
    PAGE_FIELDS,
    PageCounts,
    Store,
    StoreError,
    StoreSettingError,
    open_store,
)
from pipelines.relevance import NotStored, RelevancePipeline
from pipelines.storage import CRAWL_RUNNING, STORE_UNREACHABLE, StoragePipeline, crawl_status
from tests.conftest import REPO, refused_start

if TYPE_CHECKING:
    from collections.abc import Iterator

REAL_MONGO_URI = os.environ.get("FOCUSED_TEST_MONGO_URI")


@dataclass(frozen=True)
class Scores:
    """Stand-in for focused.relevance.Scores (which needs gensim)."""

    tfidf: float
    lsi: float
    combined: float


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture
def mongo_client(monkeypatch: pytest.MonkeyPatch) -> mongomock.MongoClient:
    """A fresh in-memory MongoDB.

    mongomock 4.3 predates pymongo 4.20, whose ReplaceOne and UpdateOne pass ``sort`` to the
    bulk builder; mongomock's builder does not take it, so accept and check it here.
    """
    builder = mongomock.collection.BulkOperationBuilder
    add_replace = builder.add_replace
    add_update = builder.add_update

    def add_replace_with_sort(self, selector, doc, upsert, collation=None, hint=None, sort=None):
        assert sort is None
        return add_replace(self, selector, doc, upsert, collation=collation, hint=hint)

    def add_update_with_sort(self, *args, sort=None, **kwargs):
        assert sort is None
        return add_update(self, *args, **kwargs)

    monkeypatch.setattr(builder, "add_replace", add_replace_with_sort)
    monkeypatch.setattr(builder, "add_update", add_update_with_sort)
    return mongomock.MongoClient()


def make_store(backend: str, tmp_path, mongo_client) -> Store:
    if backend == "sqlite":
        return SqliteStore(tmp_path / "new" / "dir" / "test.sqlite3")
    return MongoStore("mongodb://mongomock", "focused_test", client=mongo_client)


@pytest.fixture(params=["sqlite", "mongo"])
def store(request, tmp_path, mongo_client):
    store = make_store(request.param, tmp_path, mongo_client)
    yield store
    store.close()


def crawl_record(crawl_id: str = "c1", started_at: str = "2024-05-01T10:00:00+00:00") -> dict:
    return {
        "crawl_id": crawl_id,
        "query": "birds nest eggs",
        "strategy": "bestfirst",
        "params": {"max_depth": 5, "weights": [0.5, 0.5], "nested": {"a": None}},
        "seeds": ["http://a.test/", "http://b.test/"],
        "started_at": started_at,
    }


def page(url: str, crawl_id: str = "c1", **fields: Any) -> dict:
    record = {
        "crawl_id": crawl_id,
        "url": url,
        "title": f"title of {url}",
        "text": "some words",
        "level": 1,
        "parent_url": "http://a.test/",
        "anchor": "a link",
        "link_relevance": 0.25,
        "tfidf": 0.5,
        "lsi": 0.25,
        "relevance": 0.375,
        "is_relevant": True,
        "strategy": "bestfirst",
        "fetch_order": 1,
        "fetched_at": "2024-05-01T10:00:01+00:00",
        "status": 200,
        "duplicate_of": None,
        "language": "sk",
        "content_hash": "9a0364b9e99bb480dd25e1f0284c8555c5a5ef0e",
        "last_changed": "2024-05-01T10:00:01+00:00",
        "changes": 0,
        "visits": 1,
        "robots": None,
        "tried_at": None,
        "etag": None,
        "last_modified": None,
        "requested_url": None,
    }
    record.update(fields)
    return record


# -- the checks, shared by the mongomock/SQLite tests and the real-MongoDB ones ----------------


def check_page_counts(store: Store) -> None:
    """A crawl's pages counted by the store: the other crawl's left out, a page of unknown
    fetch order or verdict counted as stored, the highest fetch order past the pages stored
    (fetched, not stored)."""
    verdicts = {1: True, 2: False, 4: None, 9: True, None: True}
    store.save_pages(
        page(f"http://t/{order}", fetch_order=order, is_relevant=relevant)
        for order, relevant in verdicts.items()
    )
    store.save_pages([page("http://t/other", "c2", fetch_order=50, is_relevant=True)])
    assert store.page_counts("c1") == PageCounts(stored=5, relevant=3, last_fetch_order=9)
    assert store.page_counts("c2") == PageCounts(stored=1, relevant=1, last_fetch_order=50)
    assert store.page_counts("none") == PageCounts()
    assert not store.unreadable


# Where a write of MongoStore.update_pages that moves verdicts can fail: the method of the
# collection, the collection, and whether the server had applied it ("part": the first of a
# bulk write's operations) before the error came back (a connection lost on its reply).
MOVE_FAILURES = [
    (method, collection, applied)
    for method, collection in [
        ("find_one_and_update", "crawls"),  # the token made pending
        ("bulk_write", "pages"),
        ("update_one", "crawls"),  # the moves counted
        ("update_many", "pages"),  # the marks taken off
    ]
    for applied in ("no", "part", "yes")
    if applied != "part" or method == "bulk_write"
]


def fail_once(monkeypatch, collection_class: type, method: str, name: str, applied: str) -> list:
    """Make the first call of ``method`` on the collection ``name`` fail as a lost connection
    does; returns the list that holds it once it has."""
    original = getattr(collection_class, method)
    failed: list[str] = []

    def failing(self, *args, **kwargs):
        if failed or self.name != name:
            return original(self, *args, **kwargs)
        failed.append(method)
        if applied == "yes":
            original(self, *args, **kwargs)
        elif applied == "part":
            original(self, args[0][:1], *args[1:], **kwargs)
        raise pymongo.errors.AutoReconnect("connection reset by peer")

    monkeypatch.setattr(collection_class, method, failing)
    return failed


def check_moves_counted_once_after_a_failure(
    store: Store, reopen, monkeypatch, collection_class: type, failure: tuple[str, str, str]
) -> None:
    """A recrawl's --model moves stored verdicts: the crawl record counts them
    (``rescored_now_relevant``, ``rescored_no_longer_relevant``) true to the pages after any
    one write fails, whether the batch is retried (the storage pipeline) or the next run
    writes other updates of the crawl (``reopen()``: a store as a run opens it)."""
    store.start_crawl(crawl_record())
    verdicts = {"a": True, "b": False, "c": True, "d": False}
    store.save_pages([page(f"http://a.test/{n}", is_relevant=v) for n, v in verdicts.items()])
    moves = {"a": False, "b": True, "c": False}
    batch = [
        {"crawl_id": "c1", "url": f"http://a.test/{n}", "is_relevant": v} for n, v in moves.items()
    ]

    def counted(reader: Store) -> tuple[int, int]:
        crawl = reader.get_crawl("c1")
        return crawl["rescored_now_relevant"], crawl["rescored_no_longer_relevant"]

    def moved_so_far(reader: Store) -> tuple[int, int]:
        now = {p["url"].rsplit("/", 1)[1]: p["is_relevant"] for p in reader.pages("c1")}
        became = sum(now[n] and not was for n, was in verdicts.items())
        return became, sum(was and not now[n] for n, was in verdicts.items())

    failed = fail_once(monkeypatch, collection_class, *failure)
    with pytest.raises(StoreError, match="connection reset"):
        store.update_pages(batch)
    assert failed  # and no other call fails
    # Read before the crawl's next update (the recrawl stopped there, a Ctrl-C keeping its
    # batch in a file): the report, and a run of the crawl resumed, read the moves the pages
    # hold, not those counted before the failure.
    reader = reopen()
    try:
        assert counted(reader) == moved_so_far(reader)
    finally:
        reader.close()
    # The next run writes the visits of pages whose verdicts it does not move.
    later = reopen()
    try:
        later.update_pages([{"crawl_id": "c1", "url": "http://a.test/d", "visits": 2}])
        assert counted(later) == moved_so_far(later)
    finally:
        later.close()
    store.update_pages(batch)  # the batch retried
    assert counted(store) == moved_so_far(store) == (1, 2)
    store.update_pages(batch)  # and once more: nothing moves
    assert counted(store) == (1, 2)


def check_round_trip(store: Store) -> None:
    record = {
        **crawl_record(),
        "allowed_domains": ["a.test", "xn--mller-kva.example"],
        "render": "auto",
        "fetch_settings": {"USER_AGENT": "birdwatch/2.0", "HTTPERROR_ALLOWED_CODES": [403]},
        "topic_file": "topics/birds.txt",
        "run_by": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0:pid:[4026531836]/4242/1695675",
    }
    store.start_crawl(record)
    started = store.get_crawl("c1")
    assert started == {
        **record,
        "finished_at": None,
        "status": "running",
        "finish_reason": None,
        "pages": None,
        "relevant": None,
        "harvest_rate": None,
        "resumed_at": None,
        "seen_at": started["seen_at"],
        "heartbeat_interval": None,  # given by the storage pipeline
        "recrawl_seen_at": None,
        "recrawl_heartbeat_interval": None,
        "recrawl_claim": None,
        # The verdicts recrawls moved: none yet.
        "rescored_now_relevant": 0,
        "rescored_no_longer_relevant": 0,
    }
    assert started["seen_at"] > crawl_record()["started_at"]  # now
    assert list(started) == list(CRAWL_FIELDS)

    seed = page(
        "http://a.test/", level=0, parent_url=None, anchor=None, link_relevance=None, fetch_order=0
    )
    pages = [seed, page("http://a.test/x", fetch_order=2), page("http://b.test/y", fetch_order=3)]
    store.save_pages(pages)
    store.finish_crawl(
        "c1",
        finished_at="2024-05-01T11:00:00+00:00",
        status="finished",
        finish_reason="closespider_pagecount",
        pages=3,
        relevant=3,
        harvest_rate=1.0,
    )

    finished = store.get_crawl("c1")
    assert finished == {
        **record,
        "finished_at": "2024-05-01T11:00:00+00:00",
        "status": "finished",
        "finish_reason": "closespider_pagecount",
        "pages": 3,
        "relevant": 3,
        "harvest_rate": 1.0,
        "resumed_at": None,
        "seen_at": started["seen_at"],
        "heartbeat_interval": None,  # given by the storage pipeline
        "recrawl_seen_at": None,
        "recrawl_heartbeat_interval": None,
        "recrawl_claim": None,
        # The verdicts recrawls moved: none yet.
        "rescored_now_relevant": 0,
        "rescored_no_longer_relevant": 0,
    }
    stored = store.pages("c1", order="fetch_order")
    assert stored == pages
    assert all(list(record) == list(PAGE_FIELDS) for record in stored)
    assert store.get_crawl("nope") is None
    assert store.pages("nope") == []


def check_upsert_idempotent(store: Store) -> None:
    store.save_pages([page("http://a.test/x", title="old", relevance=0.1, is_relevant=False)])
    store.save_pages([page("http://a.test/x", title="old", relevance=0.1, is_relevant=False)])
    store.save_pages([page("http://a.test/x", title="new", relevance=0.9, is_relevant=True)])
    # the same page twice in one batch: the later one wins
    store.save_pages(
        [page("http://a.test/y", title="first"), page("http://a.test/y", title="last")]
    )
    # the same url in another crawl is another page
    store.save_pages([page("http://a.test/x", crawl_id="c2", title="other crawl")])

    assert [(p["url"], p["title"]) for p in store.pages("c1", order="fetch_order")] == [
        ("http://a.test/x", "new"),
        ("http://a.test/y", "last"),
    ]
    assert store.pages("c1", relevant_only=True, order="fetch_order")[0]["relevance"] == 0.9
    assert [p["title"] for p in store.pages("c2")] == ["other crawl"]


def check_crawls_newest_first(store: Store) -> None:
    assert store.crawls() == []
    assert store.latest_crawl_id() is None
    store.start_crawl(crawl_record("middle", "2024-05-02T00:00:00+00:00"))
    store.start_crawl(crawl_record("newest", "2024-05-03T00:00:00+00:00"))
    store.start_crawl(crawl_record("oldest", "2024-05-01T00:00:00+00:00"))
    assert [c["crawl_id"] for c in store.crawls()] == ["newest", "middle", "oldest"]
    assert store.latest_crawl_id() == "newest"
    # starting a crawl again (a resumed JOBDIR crawl) replaces its record: one record, running,
    # still started when it first started, and the latest crawl (its last run started last)
    store.finish_crawl("middle", status="interrupted", finish_reason="shutdown", pages=7)
    store.start_crawl(crawl_record("middle", "2024-05-04T00:00:00+00:00"))
    assert [c["crawl_id"] for c in store.crawls()] == ["newest", "middle", "oldest"]
    assert store.latest_crawl_id() == "middle"
    again = store.get_crawl("middle")
    assert (again["status"], again["finish_reason"], again["pages"]) == ("running", None, None)
    assert again["started_at"] == "2024-05-02T00:00:00+00:00"
    assert again["resumed_at"] == "2024-05-04T00:00:00+00:00"
    assert store.get_crawl("newest")["resumed_at"] is None


def test_the_latest_crawl_is_told_by_its_times_not_their_text(store):
    """The latest crawl (`scrapy pages`, `scrapy report` without an id) was the greatest start
    time as text: a start edited into no time (shown as `-`) was the latest of all, and one
    written with another offset than UTC's (by hand, another program) was compared by its
    digits. It is the one whose latest run started last in time; an unknown time, never."""
    store.start_crawl(crawl_record("utc", "2024-05-01T08:00:00+00:00"))
    store.start_crawl(crawl_record("east", "2024-05-01T12:00:00+05:00"))  # 07:00 UTC
    store.start_crawl(crawl_record("edited", "2024-04-01T00:00:00+00:00"))
    if isinstance(store, SqliteStore):
        store._conn.execute("UPDATE crawls SET started_at = 'soon' WHERE crawl_id = 'edited'")
    else:
        store._crawls.update_one({"crawl_id": "edited"}, {"$set": {"started_at": "soon"}})
    assert store.latest_crawl_id() == "utc"
    assert [crawl["crawl_id"] for crawl in store.crawls()] == ["utc", "east", "edited"]


# -- both backends ---------------------------------------------------------------------------


def test_round_trip(store):
    check_round_trip(store)


def test_upsert_is_idempotent(store):
    check_upsert_idempotent(store)


def test_a_heartbeat_sets_seen_at_and_nothing_else(store, monkeypatch):
    monkeypatch.setattr(storage, "_utc_now", lambda: "2024-05-01T10:00:05+00:00")
    store.start_crawl(crawl_record())
    started = store.get_crawl("c1")
    assert started["seen_at"] == "2024-05-01T10:00:05+00:00"
    monkeypatch.setattr(storage, "_utc_now", lambda: "2024-05-01T10:01:05+00:00")
    store.heartbeat("c1")
    store.heartbeat("nope")  # a crawl without a record is left alone
    assert store.get_crawl("c1") == {**started, "seen_at": "2024-05-01T10:01:05+00:00"}
    assert store.crawls() == [store.get_crawl("c1")]


def test_crawls_newest_first_and_latest(store):
    check_crawls_newest_first(store)


def test_page_filters_and_orders(store):
    store.save_pages(
        [
            page("http://t/1", relevance=0.9, is_relevant=True, level=0, fetch_order=3),
            page("http://t/2", relevance=0.1, is_relevant=False, level=1, fetch_order=1),
            page("http://t/3", relevance=0.5, is_relevant=True, level=1, fetch_order=2),
            page("http://t/4", relevance=0.5, is_relevant=True, level=2, fetch_order=0),
            page("http://t/5", relevance=None, is_relevant=None, level=2, fetch_order=4),
            page("http://t/other", crawl_id="c2", relevance=1.0),
        ]
    )

    def urls(**filters: Any) -> list[str]:
        return [p["url"].rsplit("/", 1)[1] for p in store.pages("c1", **filters)]

    # ties on relevance go by fetch order; unscored pages come last
    assert urls() == ["1", "4", "3", "2", "5"]
    assert urls(order="fetch_order") == ["4", "2", "3", "1", "5"]
    assert urls(order="latest", limit=3) == ["5", "1", "3"]  # a crash resume relearns these
    assert urls(min_relevance=0.5) == ["1", "4", "3"]
    assert urls(level=1) == ["3", "2"]
    assert urls(level=0) == ["1"]
    assert urls(relevant_only=True) == ["1", "4", "3"]
    assert urls(relevant_only=True, level=2, order="fetch_order") == ["4"]
    assert urls(limit=2) == ["1", "4"]
    assert urls(min_relevance=0.2, limit=1, order="fetch_order") == ["4"]
    assert urls(min_relevance=0.95) == []
    with pytest.raises(ValueError, match="order"):
        store.pages("c1", order="random")
    with pytest.raises(ValueError, match="limit"):
        store.pages("c1", limit=0)


def test_a_relevance_of_another_type_passes_no_min_relevance(store):
    """A relevance edited by hand into text is unknown: SQLite, where text compares above any
    number, listed it among the pages above every --min-relevance, and MongoDB did not."""
    store.save_pages([page("http://t/1", relevance=0.9), page("http://t/2", relevance=0.2)])
    if isinstance(store, SqliteStore):
        store._conn.execute("UPDATE pages SET relevance = 'high' WHERE url = 'http://t/2'")
    else:
        store._pages.update_one({"url": "http://t/2"}, {"$set": {"relevance": "high"}})
    assert [p["url"] for p in store.pages("c1", min_relevance=0.5)] == ["http://t/1"]


def test_a_relevance_read_as_unknown_comes_last(store):
    """A relevance edited by hand into text, or into a number that is no figure, is read as
    unknown (shown as -) but was sorted as the most relevant, first in `scrapy pages` and the
    report's top pages, by both backends (text and infinity sort above every score). It comes
    last now, as a page without a score does, in fetch order."""
    store.save_pages(
        [
            page("http://t/text", relevance=0.3, fetch_order=1),
            page("http://t/high", relevance=0.9, fetch_order=2),
            page("http://t/none", relevance=None, fetch_order=3),
            page("http://t/inf", relevance=0.4, fetch_order=4),
            page("http://t/low", relevance=0.1, fetch_order=5),
        ]
    )
    edits = {"http://t/text": "high", "http://t/inf": float("inf")}
    for url, value in edits.items():
        if isinstance(store, SqliteStore):
            store._conn.execute("UPDATE pages SET relevance = ? WHERE url = ?", (value, url))
        else:
            store._pages.update_one({"url": url}, {"$set": {"relevance": value}})

    def urls(**filters: Any) -> list[str]:
        return [p["url"].rsplit("/", 1)[1] for p in store.pages("c1", fields=["url"], **filters)]

    assert urls() == ["high", "low", "text", "none", "inf"]
    assert urls(limit=1) == ["high"]
    assert urls(limit=3) == ["high", "low", "text"]
    assert urls(min_relevance=0.0) == ["high", "low"]
    assert urls(order="fetch_order") == ["text", "high", "none", "inf", "low"]


@pytest.fixture
def bson_booleans(monkeypatch) -> None:
    """mongomock matches ``{"field": True}`` with Python's ``==``, where ``True == 1``; MongoDB
    matches a boolean to booleans only (a BSON boolean is no number). Make mongomock do so for
    a boolean given as a field's value, so that a filter that relies on it fails here too."""
    applies = mongomock.collection.filter_applies

    def typed(search: dict, document: dict) -> bool:
        for name, wanted in search.items():
            if isinstance(wanted, bool) and not isinstance(document.get(name), bool):
                return False
        return applies(search, document)

    monkeypatch.setattr(mongomock.collection, "filter_applies", typed)


@pytest.mark.usefixtures("bson_booleans")
def test_relevant_only_takes_is_relevant_stored_as_a_number(store):
    """``is_relevant`` stored as 1 (another program, a document written by hand; SQLite keeps
    every boolean so) is read as True, but MongoDB's --relevant-only missed the page: true
    matches no number there. mongosh writes 1 as a double, 1.0: read as True too."""
    urls = ["http://t/true", "http://t/int", "http://t/double", "http://t/zero", "http://t/no"]
    store.save_pages(
        page(url, is_relevant=None, fetch_order=order) for order, url in enumerate(urls, 1)
    )
    for url, value in zip(urls, [True, 1, 1.0, 0, False], strict=True):
        if isinstance(store, SqliteStore):
            store._conn.execute("UPDATE pages SET is_relevant = ? WHERE url = ?", (value, url))
        else:
            store._pages.update_one({"url": url}, {"$set": {"is_relevant": value}})
    relevant = store.pages("c1", relevant_only=True, order="fetch_order")
    assert [(p["url"], p["is_relevant"]) for p in relevant] == [(url, True) for url in urls[:3]]
    assert [p["is_relevant"] for p in store.pages("c1", order="fetch_order")] == [
        True,
        True,
        True,
        False,
        False,
    ]
    assert not store.unreadable


def test_a_fetch_order_read_as_unknown_comes_last(store):
    """A fetch order missing (a page restored without it) or edited by hand into text, a
    negative number or infinity is read as unknown, but sorted by what it held: first in
    fetch order (none sorts below every number), or first of the latest pages (text and
    infinity sort above every number), where the crawl's resume read its latest fetch orders.
    It comes last now, in url order, as an unknown relevance comes after the scored pages."""
    orders = {"d": 3, "z": None, "b": "x", "a": 1, "y": float("inf"), "c": 2, "x": -3}
    store.save_pages(page(f"http://t/{name}", relevance=0.5) for name in orders)
    for name, value in orders.items():
        if isinstance(store, SqliteStore):
            store._conn.execute(
                "UPDATE pages SET fetch_order = ? WHERE url = ?", (value, f"http://t/{name}")
            )
        else:
            store._pages.update_one({"url": f"http://t/{name}"}, {"$set": {"fetch_order": value}})

    def names(**options: Any) -> list[str]:
        return [p["url"][-1] for p in store.pages("c1", fields=["url"], **options)]

    unknown = ["b", "x", "y", "z"]
    assert names(order="fetch_order") == ["a", "c", "d", *unknown]
    assert names(order="latest") == ["d", "c", "a", *unknown]
    assert names(order="latest", limit=2) == ["d", "c"]
    assert names(order="latest", limit=5) == ["d", "c", "a", "b", "x"]
    assert names(min_relevance=0.5, order="latest") == ["d", "c", "a", *unknown]


def test_page_counts(store):
    check_page_counts(store)


@pytest.mark.parametrize("failure", MOVE_FAILURES, ids="-".join)
def test_verdicts_moved_are_counted_once_whatever_mongo_write_fails(
    mongo_client, monkeypatch, failure
):
    """Counted after the pages were written, the moves of a write whose count failed were
    lost: the retry, and any later run, found the verdicts moved already (a count of 0 where
    the pages moved 3)."""
    store = make_store("mongo", None, mongo_client)

    def reopen() -> Store:
        return make_store("mongo", None, mongo_client)

    collection = mongomock.collection.Collection
    check_moves_counted_once_after_a_failure(store, reopen, monkeypatch, collection, failure)
    raw = mongo_client["focused_test"]
    assert not raw.crawls.find_one({"crawl_id": "c1"}).get("rescored_pending")
    assert not raw.pages.count_documents({"rescored_by": {"$exists": True}})


def test_page_counts_read_no_page_record(store, monkeypatch):
    """The store counts the pages itself: none is read into Python (a crawl of 200,000 pages
    took SQLite 15 s to read past their texts, and Python 120 MB to hold them)."""
    store.save_pages(page(f"http://t/{order}", fetch_order=order) for order in range(1, 30))

    def read(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a page record was read")

    monkeypatch.setattr(store, "_find_pages", read)
    monkeypatch.setattr(store, "iter_pages", read)
    assert store.page_counts("c1") == PageCounts(stored=29, relevant=29, last_fetch_order=29)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("fetch_order", "x"),
        ("fetch_order", -3),
        ("fetch_order", 12.5),
        ("fetch_order", float("inf")),
        ("fetch_order", 12.0),  # mongosh writes numbers as doubles: read as 12
        ("is_relevant", 1),  # SQLite's true, or mongosh's: read as true
        ("is_relevant", 1.0),
        ("is_relevant", "yes"),
        ("is_relevant", 2),
    ],
)
def test_page_counts_read_a_value_no_crawl_writes_as_pages_reads_it(store, name, value):
    """A value edited by hand is counted as ``pages`` reads it (known or not), and said."""
    store.save_pages(
        page(f"http://t/{order}", fetch_order=order, is_relevant=order % 2 == 1)
        for order in range(1, 6)
    )
    if isinstance(store, SqliteStore):
        store._conn.execute(f"UPDATE pages SET {name} = ? WHERE url = 'http://t/2'", (value,))
    else:
        store._pages.update_one({"url": "http://t/2"}, {"$set": {name: value}})
    expected = PageCounts()
    for record in store.pages("c1", fields=COUNT_FIELDS):
        expected.add(record)
    read_as_unknown = store.unreadable
    store.unreadable = ""
    assert store.page_counts("c1") == expected
    assert store.unreadable == read_as_unknown


@pytest.mark.parametrize(("name", "value"), [("fetch_order", [50]), ("is_relevant", [True])])
def test_page_counts_read_an_array_as_pages_reads_it(mongo_client, name, value):
    """A MongoDB array of a counted field (a document another program wrote) is read as
    unknown, and said: MongoDB's $type "number" and $nin look into an array, so [50] passed
    for a fetch order that $max then took, an array, and ``crawls`` failed comparing it."""
    store = MongoStore("mongodb://mongomock", "focused_test", client=mongo_client)
    store.save_pages(
        page(f"http://t/{order}", fetch_order=order, is_relevant=order % 2 == 1)
        for order in range(1, 6)
    )
    store._pages.update_one({"url": "http://t/2"}, {"$set": {name: value}})
    assert store.page_counts("c1") == PageCounts(stored=5, relevant=3, last_fetch_order=5)
    assert store.unreadable == f"pages.{name} = {value!r}"


def test_values_are_coerced_to_the_record_types(store):
    """An int score, a numpy-like float or a tuple of seeds come back as float, float, list."""

    class Float(float):
        pass

    record = crawl_record()
    record["seeds"] = ("http://a.test/",)
    store.start_crawl(record)
    store.save_pages([page("http://a.test/", relevance=1, tfidf=Float(0.5), is_relevant=1)])
    store.finish_crawl("c1", pages=1, relevant=1, harvest_rate=1)
    crawl = store.get_crawl("c1")
    assert crawl["seeds"] == ["http://a.test/"]
    assert type(crawl["harvest_rate"]) is float
    assert crawl["finished_at"] and crawl["status"] == "finished"  # the defaults
    [stored] = store.pages("c1")
    assert type(stored["relevance"]) is float and stored["relevance"] == 1.0
    assert type(stored["tfidf"]) is float
    assert stored["is_relevant"] is True


def test_two_processes_joining_a_crawl_at_once_both_add_their_seeds(store, monkeypatch):
    """The seeds recorded were read, then written with the run's own: a process of a shared
    crawl that started between the two wrote its seeds, and they were written over."""
    store.start_crawl({**crawl_record(), "seeds": ["http://a.test/"]})
    read = store._find_crawls
    joined = []

    def read_then_joined(crawl_id, *, limit):
        found = read(crawl_id, limit=limit)
        if not joined:  # the first read only: the other process starts after it
            joined.append(True)
            store.start_crawl({**crawl_record(), "seeds": ["http://c.test/"]})
        return found

    monkeypatch.setattr(store, "_find_crawls", read_then_joined)
    store.start_crawl({**crawl_record(), "seeds": ["http://b.test/"]})
    monkeypatch.undo()
    seeds = store.get_crawl("c1")["seeds"]
    assert seeds == ["http://a.test/", "http://c.test/", "http://b.test/"]


def test_bad_records_and_fields_are_refused(store):
    with pytest.raises(ValueError, match="url"):
        store.save_pages([page("")])
    with pytest.raises(ValueError, match="crawl_id"):
        store.start_crawl({"query": "no id"})
    with pytest.raises(TypeError, match="query"):
        store.finish_crawl("c1", query="not a finish field")
    with pytest.raises(ValueError, match="status"):
        store.finish_crawl("c1", status="done")
    store.save_pages([])  # nothing to do is fine


def test_both_backends_give_identical_records(tmp_path, mongo_client, monkeypatch):
    monkeypatch.setattr(storage, "_utc_now", lambda: "2024-05-01T10:00:05+00:00")  # seen_at
    records = {}
    for backend in ("sqlite", "mongo"):
        store = make_store(backend, tmp_path, mongo_client)
        store.start_crawl(crawl_record())
        store.save_pages([page("http://a.test/", parent_url=None, relevance=1), page("http://b/")])
        store.finish_crawl("c1", finished_at="2024-05-02T00:00:00+00:00", pages=2, relevant=1)
        records[backend] = (store.crawls(), store.pages("c1"), store.latest_crawl_id())
        store.close()

    def shape(value: Any) -> Any:
        if isinstance(value, dict):
            return [(key, shape(item)) for key, item in value.items()]
        if isinstance(value, (list, tuple)):
            return [shape(item) for item in value]
        return type(value).__name__

    assert records["sqlite"] == records["mongo"]
    assert shape(records["sqlite"]) == shape(records["mongo"])
    assert "_id" not in records["mongo"][1][0]


# MongoDB's largest document (BSON), which the server holds to each write of a bulk write.
MONGO_MAX_DOCUMENT = 16 * 1024 * 1024


@pytest.fixture
def mongo_document_limit(monkeypatch) -> None:
    """mongomock takes a document of any size; MongoDB refuses one over 16 MiB with a write
    error, after it ran the other writes of an unordered bulk write. Make mongomock do so."""
    bulk_write = mongomock.collection.Collection.bulk_write

    def refusing(self, requests, ordered=True, **kwargs):
        too_large = [
            index
            for index, request in enumerate(requests)
            if len(bson.encode(request._doc)) > MONGO_MAX_DOCUMENT
        ]
        fitting = [request for index, request in enumerate(requests) if index not in too_large]
        if fitting:
            bulk_write(self, fitting, ordered=ordered, **kwargs)
        if too_large:
            errors = [
                {"index": index, "code": 10334, "errmsg": "BSONObjectTooLarge"}
                for index in too_large
            ]
            raise pymongo.errors.BulkWriteError({"writeErrors": errors})

    monkeypatch.setattr(mongomock.collection.Collection, "bulk_write", refusing)


@pytest.mark.usefixtures("mongo_document_limit")
def test_a_page_too_large_for_mongodb_is_stored_alike_in_both(tmp_path, mongo_client, caplog):
    """A page whose text is over 16 MiB in UTF-8 (a 10 MiB page of Cyrillic in windows-1251
    is twice that) was stored whole on SQLite, and refused by MongoDB: the crawl's writes failed
    until it stopped as store_unreachable. Both stores now keep it with its text cut to fit,
    the same text, and a recrawl's new text alike."""
    text = "перо и крыло " * 1_500_000  # 34.5 MB in UTF-8
    pages, updated = {}, {}
    for backend in ("sqlite", "mongo"):
        store = make_store(backend, tmp_path, mongo_client)
        store.save_pages([page("http://a.test/big", text=text), page("http://a.test/small")])
        pages[backend] = store.pages("c1", order="fetch_order")
        store.update_pages([{"crawl_id": "c1", "url": "http://a.test/big", "text": text[1:]}])
        updated[backend] = store.pages("c1", fields=["url", "text"], limit=1)[0]["text"]
        store.close()
    assert pages["sqlite"] == pages["mongo"]
    [big, small] = pages["sqlite"]
    assert small["text"] == "some words"
    assert text.startswith(big["text"])
    assert storage.PAGE_MAX_BYTES - 1000 < len(big["text"].encode()) <= storage.PAGE_MAX_BYTES
    assert updated["sqlite"] == updated["mongo"]
    assert text[1:].startswith(updated["sqlite"])
    assert len(updated["sqlite"].encode()) <= storage.PAGE_MAX_BYTES
    assert "Page http://a.test/big: its text (34500000 bytes in UTF-8) is stored cut" in caplog.text


def test_pages_fields_projection(store):
    store.save_pages(
        [page("http://t/1", relevance=0.2, fetch_order=2), page("http://t/2", fetch_order=1)]
    )
    assert store.pages("c1", fields=["url", "level", "relevance"]) == [
        {"url": "http://t/2", "level": 1, "relevance": 0.375},
        {"url": "http://t/1", "level": 1, "relevance": 0.2},
    ]
    # the record keeps PAGE_FIELDS order whatever the order asked; sorting needs no field
    assert [list(p) for p in store.pages("c1", order="fetch_order", fields=("title", "url"))] == [
        ["url", "title"],
        ["url", "title"],
    ]
    assert store.pages("c1", limit=1, relevant_only=True, fields=["text"]) == [
        {"text": "some words"}
    ]
    with pytest.raises(ValueError, match="page fields"):
        store.pages("c1", fields=["url", "body"])
    with pytest.raises(ValueError, match="page fields"):
        store.pages("c1", fields=[])


def test_a_reader_creates_nothing(tmp_path, mongo_client):
    missing = tmp_path / "no" / "focused.sqlite3"
    with pytest.raises(StoreError, match=r"no such file"):
        open_store({"FOCUSED_DB": str(missing)}, create=False)
    assert not missing.parent.exists()
    SqliteStore(missing).close()
    open_store({"FOCUSED_DB": str(missing)}, create=False).close()  # an existing file is fine
    reader = MongoStore("mongodb://mongomock", "focused_test", client=mongo_client, create=False)
    assert reader.crawls() == [] and reader.pages("c1") == []
    assert mongo_client.list_database_names() == []


# -- SQLite specifics ------------------------------------------------------------------------


# The columns of the SQLite store's fetch-order index: it covers the counts, a report, a resume.
FETCH_ORDER_INDEX = ("crawl_id", "fetch_order", "url", "is_relevant", "level", "relevance")
FETCH_ORDER_INDEX += ("status", "robots", "duplicate_of")


def test_sqlite_schema(tmp_path):
    path = tmp_path / "deep" / "er" / "focused.sqlite3"
    SqliteStore(path).close()
    SqliteStore(path).close()  # opening an existing file again is fine
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        columns = {
            table: [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            for table in ("pages", "crawls")
        }
        indexes = {
            row[1]: [col[2] for col in conn.execute(f"PRAGMA index_info({row[1]})")]
            for row in conn.execute("PRAGMA index_list(pages)")
        }
    finally:
        conn.close()
    # The text last in a page's row: test_sqlite_reads_no_page_text_but_for_the_text.
    pages_columns = [name for name in PAGE_FIELDS if name != "text"] + ["text"]
    assert columns == {"pages": pages_columns, "crawls": list(CRAWL_FIELDS)}
    assert sorted(indexes.values()) == [
        list(FETCH_ORDER_INDEX),
        ["crawl_id", "level"],
        ["crawl_id", "relevance"],
        ["crawl_id", "url"],
    ]


@pytest.mark.parametrize(
    "read",
    [
        pytest.param(lambda store: store.page_counts("c1").stored, id="counts"),
        pytest.param(
            lambda store: len(store.pages("c1", order="fetch_order", fields=REPORT_FIELDS)),
            id="report",
        ),
        pytest.param(
            lambda store: len(store.pages("c1", order="fetch_order", fields=RECOVER_FIELDS)),
            id="resume",
        ),
    ],
)
def test_sqlite_reads_a_whole_crawl_from_an_index_without_reading_its_rows(tmp_path, read):
    """Every statement that counts a crawl's pages, or reads them all for a report or a
    resume, reads an index that covers it: the rows lie between the overflow pages holding
    the texts, and the OS reading ahead of each row read the whole file from disk."""
    store = SqliteStore(tmp_path / "f.sqlite3")
    store.save_pages(page(f"http://t/{n}", fetch_order=n, text="x" * 20_000) for n in range(50))
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        assert read(store) == 50
    finally:
        store._conn.set_trace_callback(None)
    assert statements
    for statement in statements:
        plan = store._conn.execute(f"EXPLAIN QUERY PLAN {statement}").fetchall()
        reads = [step[3] for step in plan if not step[3].startswith("USE TEMP B-TREE")]
        covering = "SEARCH pages USING COVERING INDEX pages_crawl_fetch_order (crawl_id=?"
        assert len(reads) == 1 and reads[0].startswith(covering), (statement, reads)
    store.close()


def _bytes_read() -> int:
    """What this process has read from files so far, page cache or not (Linux)."""
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="counts reads through /proc")
def test_sqlite_reads_no_page_text_but_for_the_text(tmp_path):
    """A report, its best pages, a resume and a count read the other fields of every page
    without the overflow pages holding its text: a column after the text was read by walking
    them, a report of 200,000 pages reading 3.5 GB."""
    path = tmp_path / "f.sqlite3"
    store = SqliteStore(path)
    store.save_pages(page(f"http://t/{n}", fetch_order=n, text="x" * 100_000) for n in range(50))
    store.close()
    texts = 50 * 100_000
    resume_fields = ("url", "is_relevant", "fetch_order", "duplicate_of")
    for fields in (REPORT_FIELDS, TOP_FIELDS, resume_fields, ("text",)):
        reader = SqliteStore(path, read_only=True)  # its page cache empty
        before = _bytes_read()
        pages = reader.pages("c1", order="fetch_order", fields=fields)
        assert reader.page_counts("c1").stored == len(pages) == 50
        read = _bytes_read() - before
        reader.close()
        if fields == ("text",):
            assert read > texts and pages[0]["text"] == "x" * 100_000
        else:
            assert read < texts / 20, fields


@pytest.mark.parametrize(
    "fields", [pytest.param(REPORT_FIELDS, id="report"), pytest.param(RECOVER_FIELDS, id="resume")]
)
def test_sqlite_reads_a_crawl_in_fetch_order_from_its_index(tmp_path, fields):
    """A report and a resume find a crawl's pages from the fetch-order index, those of an
    unknown fetch order too (read last, by URL): SQLite read those in the order of the key's
    index, every row of the crawl, each page's text walked in a store that has it before
    fetch_order."""
    store = SqliteStore(tmp_path / "f.sqlite3")
    store.save_pages(page(f"http://t/{n}", fetch_order=n or None) for n in range(50))
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        assert len(store.pages("c1", order="fetch_order", fields=fields)) == 50
    finally:
        store._conn.set_trace_callback(None)
    assert len(statements) == 2  # the pages of a known fetch order, then the others
    for statement in statements:
        plan = store._conn.execute(f"EXPLAIN QUERY PLAN {statement}").fetchall()
        reads = [step[3] for step in plan if not step[3].startswith("USE TEMP B-TREE")]
        assert len(reads) == 1, statement
        assert "INDEX pages_crawl_fetch_order (crawl_id=?" in reads[0], (statement, reads)
    store.close()


def store_before_the_index(path: Path, pages) -> None:
    """A SQLite store at ``path`` holding ``pages``, as written before the fetch-order index."""
    store = SqliteStore(path)
    store.save_pages(pages)
    store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("DROP INDEX pages_crawl_fetch_order")


def index_names(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return [row[1] for row in conn.execute("PRAGMA index_list(pages)")]


def test_an_older_sqlite_store_is_counted_and_gains_the_index_at_a_writers_open(tmp_path):
    """A store written before the counting index: a reader (which writes nothing) counts its
    pages all the same, and a crawl's open gives it the index."""
    path = tmp_path / "old.sqlite3"
    store_before_the_index(
        path, (page(f"http://t/{n}", fetch_order=n, is_relevant=n < 3) for n in (1, 2, 5))
    )
    reader = SqliteStore(path, read_only=True)
    assert reader.page_counts("c1") == PageCounts(stored=3, relevant=2, last_fetch_order=5)
    reader.close()
    SqliteStore(path).close()
    assert "pages_crawl_fetch_order" in index_names(path)


def test_a_writers_open_leaves_an_index_it_cannot_make_within_its_share_of_the_timeout(
    tmp_path, caplog
):
    """The fetch-order index of a large store written before it took the open reading every
    page, past its text, under the write lock, as long as that took: another process of the
    crawl opening the store meanwhile waited FOCUSED_DB_TIMEOUT for the lock, then failed.
    Made within INDEX_BUILD_SHARE of FOCUSED_DB_TIMEOUT, or left for a later open."""
    path = tmp_path / "old.sqlite3"
    store_before_the_index(
        path, (page(f"http://t/{n}", fetch_order=n, is_relevant=n < 3) for n in range(2000))
    )

    with caplog.at_level(logging.WARNING, logger="focused.sqlitestore"):
        store = SqliteStore(path, timeout=1e-6)
    try:
        assert "pages_crawl_fetch_order" not in index_names(path)
        [said] = [record.getMessage() for record in caplog.records]
        assert said.startswith(f"SQLite store at {path}: its index of the pages' fetch order")
        assert "a run of its own with a larger FOCUSED_DB_TIMEOUT makes it" in said
        store.save_pages([page("http://t/new", fetch_order=2000, is_relevant=False)])  # unlocked
        counts = PageCounts(stored=2001, relevant=3, last_fetch_order=2000)
        assert store.page_counts("c1") == counts
    finally:
        store.close()
    SqliteStore(path).close()  # FOCUSED_DB_TIMEOUT's default: time enough
    assert "pages_crawl_fetch_order" in index_names(path)


def test_a_writers_open_does_not_wait_for_the_write_lock_to_make_the_index(tmp_path, caplog):
    """The open of a store written before the fetch-order index waited for the write lock to
    make it, behind the builds of the processes ahead of it, and opens arriving later could
    be let in first: a process of a shared crawl failed to open ("database is locked") where
    the same store with the index opened at once. It makes the index only where the lock is
    free at once; else it waits no longer than a build may take, and another open makes it."""
    path = tmp_path / "old.sqlite3"
    store_before_the_index(path, (page(f"http://t/{n}", fetch_order=n) for n in range(1, 50)))

    other = sqlite3.connect(path, isolation_level=None)  # another process, writing
    other.execute("BEGIN IMMEDIATE")
    try:
        with caplog.at_level(logging.WARNING, logger="focused.sqlitestore"):
            store = SqliteStore(path, timeout=0.2)
        [said] = [record.getMessage() for record in caplog.records]
        assert said.startswith(f"SQLite store at {path}: its index of the pages' fetch order")
        assert "another process held the write lock it is made under for over 0.1 s" in said
        assert said.endswith("whichever open finds the lock free makes it")
        other.execute("COMMIT")
        # Its writes wait FOCUSED_DB_TIMEOUT for the lock, as ever.
        (waits,) = store._conn.execute("PRAGMA busy_timeout").fetchone()
        assert waits == 200
        store.save_pages([page("http://t/new", fetch_order=50)])
        assert store.page_counts("c1") == PageCounts(stored=50, relevant=50, last_fetch_order=50)
        store.close()
    finally:
        other.close()
    assert "pages_crawl_fetch_order" not in index_names(path)
    SqliteStore(path).close()  # the lock free
    assert "pages_crawl_fetch_order" in index_names(path)


def _open_an_old_store(path: str, building: multiprocessing.synchronize.Event, said) -> None:
    """A crawl's process opening the store once another holds its write lock, making the
    index: what it warns goes to ``said``."""
    warnings_said: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warnings_said.append(record.getMessage())  # type: ignore
    logging.getLogger("focused.sqlitestore").addHandler(handler)
    building.wait(10)
    SqliteStore(path).close()
    said.put(warnings_said)


def test_processes_opening_an_old_store_together_say_nothing_of_the_index_one_made(
    tmp_path, monkeypatch, caplog
):
    """Two processes of a crawl opening a store written before the fetch-order index: the one
    finding the write lock held while the other made the index warned that it was not made
    ("a run of its own makes it"), though it was there a moment later."""
    path = tmp_path / "old.sqlite3"
    store_before_the_index(path, (page(f"http://t/{n}", fetch_order=n) for n in range(2000)))
    context = multiprocessing.get_context("fork")
    building, said = context.Event(), context.Queue()
    other = context.Process(target=_open_an_old_store, args=(str(path), building, said))
    other.start()
    started = None

    def monotonic() -> float:  # the deadline's, then the build's progress handler's
        nonlocal started
        if started is None:
            started = time.monotonic()
        else:
            # Mid-build, the write lock held: the other process opens now, and finds it so.
            building.set()
            while time.monotonic() < started + 0.5:
                time.sleep(0.01)
        return time.monotonic()

    monkeypatch.setattr(sqlitestore, "time", SimpleNamespace(monotonic=monotonic, sleep=time.sleep))
    try:
        with caplog.at_level(logging.WARNING, logger="focused.sqlitestore"):
            SqliteStore(path).close()
        monkeypatch.undo()
        assert building.is_set()
        assert "pages_crawl_fetch_order" in index_names(path)
        assert said.get(timeout=10) == []
        assert not caplog.records
    finally:
        other.join(10)
        if other.is_alive():
            other.kill()
    assert other.exitcode == 0


def test_an_open_waiting_for_a_writer_says_the_index_is_left_to_a_later_open(tmp_path, caplog):
    """The write lock held by a process writing, not making the index: the open that waited
    for it says that the index was not made, and by which open it will be."""
    path = tmp_path / "old.sqlite3"
    store_before_the_index(path, (page(f"http://t/{n}", fetch_order=n) for n in range(1, 50)))
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.2, other.execute, ["COMMIT"])
    release.start()
    try:
        with caplog.at_level(logging.WARNING, logger="focused.sqlitestore"):
            SqliteStore(path).close()
        release.join()
    finally:
        release.cancel()
        other.close()
    [said] = [record.getMessage() for record in caplog.records]
    assert "another process held the write lock it is made under, writing or giving up" in said
    assert said.endswith("the next open that finds the lock free makes it")
    assert "pages_crawl_fetch_order" not in index_names(path)


def test_the_processes_opening_a_new_store_together_wait_to_make_its_index(tmp_path, caplog):
    """A new store has no pages to index: the processes of a crawl opening it together each
    wait for the lock to make it (as a write does), as only one found it free at once."""
    path = tmp_path / "new.sqlite3"
    SqliteStore(path).close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("DROP INDEX pages_crawl_fetch_order")  # made by none yet
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process making the tables
    release = threading.Timer(0.2, other.execute, ["COMMIT"])
    release.start()
    try:
        with caplog.at_level(logging.WARNING, logger="focused.sqlitestore"):
            store = SqliteStore(path)
        release.join()
    finally:
        release.cancel()
        other.close()
    assert not caplog.records
    assert "pages_crawl_fetch_order" in [
        row[1] for row in store._conn.execute("PRAGMA index_list(pages)")
    ]
    store.close()


def test_a_crawls_start_tries_to_make_the_index_once(tmp_path, caplog):
    """A crawl's checks (``check_store``) open the store, then its storage pipeline does: each
    tried to make the fetch-order index of a large store written before it, for half of
    FOCUSED_DB_TIMEOUT, and said it could not, the crawl's start waiting the whole timeout."""
    path = tmp_path / "old.sqlite3"
    store_before_the_index(path, (page(f"http://t/{n}", fetch_order=n) for n in range(1, 2000)))
    settings = Settings({"FOCUSED_DB": str(path), "FOCUSED_DB_TIMEOUT": 1e-6})
    with caplog.at_level(logging.WARNING, logger="focused.sqlitestore"):
        check_store(settings, SimpleNamespace(crawl_id="new", jobdir_note=""))
        storage.open_store(settings).close()  # the pipeline's
    [said] = [record.getMessage() for record in caplog.records]
    assert "its index of the pages' fetch order" in said


def test_a_ctrl_c_while_an_older_store_gains_its_index_stops_the_open(
    tmp_path, monkeypatch, caplog
):
    """Python runs a Ctrl-C's handler where it runs Python code: during the index's build,
    in the progress handler, whose exception sqlite3 drops, interrupting the statement. The
    open went on as if the index took too long (saying so), and `scrapy restore` with it."""
    path = tmp_path / "old.sqlite3"
    store_before_the_index(path, (page(f"http://t/{n}", fetch_order=n) for n in range(2000)))
    calls = 0

    def monotonic() -> float:  # the deadline's, then the progress handler's
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt  # as Python's SIGINT handler raises it there
        return time.monotonic()

    monkeypatch.setattr(sqlitestore, "time", SimpleNamespace(monotonic=monotonic, sleep=time.sleep))
    with (
        caplog.at_level(logging.WARNING, logger="focused.sqlitestore"),
        pytest.raises(KeyboardInterrupt),
    ):
        SqliteStore(path)
    assert calls == 2
    assert not caplog.records
    monkeypatch.undo()
    SqliteStore(path).close()  # the build rolled back: made whole by the next open
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert "pages_crawl_fetch_order" in [
            row[1] for row in conn.execute("PRAGMA index_list(pages)")
        ]


# Crawl fields an older version's file lacks.
NEWER_CRAWL_FIELDS = (
    *("resumed_at", "seen_at", "heartbeat_interval", "allowed_domains"),
    *("recrawl_seen_at", "recrawl_heartbeat_interval", "render", "fetch_settings"),
    *("recrawl_claim", "topic_file", "run_by", "rescored_now_relevant"),
    "rescored_no_longer_relevant",
)


def older_sqlite_file(path: Path, *, with_pages: bool = False) -> Path:
    """A store as an older version wrote it: crawl c1 without NEWER_CRAWL_FIELDS, and with
    ``with_pages`` a page of c1 without the last four page fields."""
    conn = sqlite3.connect(path)
    columns = ", ".join(name for name in CRAWL_FIELDS if name not in NEWER_CRAWL_FIELDS)
    conn.execute(f"CREATE TABLE crawls ({columns}, UNIQUE (crawl_id))")
    conn.execute("INSERT INTO crawls (crawl_id, started_at) VALUES ('c1', '2024-05-01')")
    if with_pages:
        conn.execute(f"CREATE TABLE pages ({', '.join(PAGE_FIELDS[:-4])})")
        conn.execute(
            "INSERT INTO pages (crawl_id, url, relevance) VALUES ('c1', 'http://a.test/', 1)"
        )
    conn.commit()
    conn.close()
    return path


def test_an_older_sqlite_file_gains_the_newer_crawl_fields(tmp_path):
    store = SqliteStore(older_sqlite_file(tmp_path / "old.sqlite3"))
    try:
        old = store.get_crawl("c1")
        assert [old[name] for name in NEWER_CRAWL_FIELDS] == [None] * len(NEWER_CRAWL_FIELDS)
        store.start_crawl(crawl_record("c1", "2024-05-02") | {"heartbeat_interval": 30.0})
        crawl = store.get_crawl("c1")
    finally:
        store.close()
    assert (crawl["started_at"], crawl["resumed_at"]) == ("2024-05-01", "2024-05-02")
    assert crawl["seen_at"] > "2024-05-02"
    assert crawl["heartbeat_interval"] == 30.0
    # Its recrawls' moved verdicts went uncounted: a report guesses them, as before the counts.
    assert (crawl["rescored_now_relevant"], crawl["rescored_no_longer_relevant"]) == (None, None)


def _open_at_once(path: str, start: multiprocessing.synchronize.Barrier, results) -> None:
    start.wait()
    try:
        SqliteStore(path).close()
        results.put("ok")
    except StoreError as exc:
        results.put(str(exc))


def test_processes_opening_a_new_sqlite_file_at_once_all_open_it(tmp_path):
    """Two processes of a shared crawl starting together: one in a few dozen got "database is
    locked" at once from its switch of the new file to WAL, and the crawl did not start."""
    context = multiprocessing.get_context("fork")
    outcomes = []
    for attempt in range(60):
        path, start, results = (
            str(tmp_path / f"{attempt}.sqlite3"),
            context.Barrier(3),
            context.Queue(),
        )
        openers = [
            context.Process(target=_open_at_once, args=(path, start, results)) for _ in "abc"
        ]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join()
        outcomes += [results.get() for _ in openers]
    assert [outcome for outcome in outcomes if outcome != "ok"] == []


@pytest.mark.parametrize("timeout", [0.2, 1.0])
def test_a_write_to_a_locked_sqlite_file_waits_focused_db_timeout(tmp_path, timeout):
    """Another process's write lock: the write waits FOCUSED_DB_TIMEOUT for it, then fails."""
    store = open_store({"FOCUSED_DB": str(tmp_path / "f.sqlite3"), "FOCUSED_DB_TIMEOUT": timeout})
    locker = sqlite3.connect(tmp_path / "f.sqlite3", isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match="database is locked"):
            store.start_crawl(crawl_record())
        waited = time.monotonic() - started
    finally:
        locker.execute("ROLLBACK")
        locker.close()
        store.close()
    assert timeout <= waited < timeout + 1.0


@pytest.mark.parametrize(("count", "pages"), [(1, "1 page"), (2, "2 pages")])
def test_a_write_refused_by_a_lock_counts_its_pages_in_words(tmp_path, count, pages):
    """It said "cannot save 1 pages" ("cannot update 1 pages" for a recrawl's)."""
    store = open_store({"FOCUSED_DB": str(tmp_path / "f.sqlite3"), "FOCUSED_DB_TIMEOUT": 0.1})
    store.start_crawl(crawl_record())
    records = [page(f"http://t/{n}") for n in range(count)]
    store.save_pages(records)
    locker = sqlite3.connect(tmp_path / "f.sqlite3", isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match=f"cannot save {pages}: database is locked"):
            store.save_pages(records)
        updates = [{"crawl_id": "c1", "url": record["url"], "status": 200} for record in records]
        with pytest.raises(StoreError, match=f"cannot update {pages}: database is locked"):
            store.update_pages(updates)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
        store.close()


def test_a_read_of_a_locked_sqlite_file_waits_focused_db_timeout(tmp_path):
    """A reading command waited sqlite3's own 5 s, whatever FOCUSED_DB_TIMEOUT said."""
    path = tmp_path / "f.sqlite3"
    open_store({"FOCUSED_DB": str(path)}).close()
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("PRAGMA locking_mode=EXCLUSIVE")  # readers too are kept out, even in WAL
    locker.execute("BEGIN EXCLUSIVE")
    locker.execute("COMMIT")  # the lock stays until the connection closes
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match="database is locked"):
            open_store({"FOCUSED_DB": str(path), "FOCUSED_DB_TIMEOUT": 0.3}, read_only=True)
        waited = time.monotonic() - started
    finally:
        locker.close()
    assert 0.3 <= waited < 1.3


def test_sqlite_unopenable_path_is_a_store_error(tmp_path):
    (tmp_path / "a_file").write_text("not a directory")
    with pytest.raises(StoreError) as caught:
        SqliteStore(tmp_path / "a_file" / "focused.sqlite3")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"SQLite store at {tmp_path / 'a_file'}")


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` made immutable (``chattr +i``): a file that cannot be written, a folder where
    nothing can be made, as on read-only media. Permissions would not do: the tests run as root,
    which ignores them."""
    made = subprocess.run(["chattr", "+i", path], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not permitted here: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", path], check=True)


def filled_sqlite(path: Path) -> Path:
    """A store as a crawl leaves it: in WAL mode, its -wal and -shm files gone with the last
    connection."""
    store = SqliteStore(path)
    store.start_crawl(crawl_record())
    store.save_pages([page("http://a.test/1")])
    store.close()
    assert not list(path.parent.glob(f"{path.name}-*"))
    return path


@pytest.mark.parametrize("immutable", ["folder", "file"])
def test_a_sqlite_store_on_read_only_media_can_be_read(tmp_path, immutable):
    """A crawl copied from a CD, a read-only mount, another user's folder: a reader opened it
    for writing (and made it WAL, and added columns), and SQLite could not open it at all."""
    db = filled_sqlite(tmp_path / "media" / "focused.sqlite3")
    with read_only(db.parent if immutable == "folder" else db):
        store = SqliteStore(db, read_only=True)
        try:
            assert store.get_crawl("c1")["query"] == "birds nest eggs"
            assert [p["url"] for p in store.pages("c1")] == ["http://a.test/1"]
        finally:
            store.close()


@pytest.mark.parametrize("immutable", ["folder", "file"])
@pytest.mark.parametrize("create", [True, False])
def test_a_sqlite_store_on_read_only_media_is_refused_for_writing(tmp_path, immutable, create):
    """Refused as it is opened: SQLite would open a read-only file for reading without a word
    and, in WAL mode, take writes into its -wal file until a checkpoint failed."""
    db = filled_sqlite(tmp_path / "media" / "focused.sqlite3")
    what = f"its folder {db.parent}" if immutable == "folder" else "the file"
    immutable_path = db.parent if immutable == "folder" else db
    with read_only(immutable_path), pytest.raises(StoreSettingError) as caught:
        SqliteStore(db, create=create)
    assert str(caught.value) == f"SQLite store at {db} is read-only: {what} cannot be written"


def test_a_reader_leaves_an_older_sqlite_file_as_it_is(tmp_path):
    """The fields it lacks read as None; the file is not given them (nor made WAL)."""
    db = older_sqlite_file(tmp_path / "old.sqlite3", with_pages=True)
    before = db.read_bytes()
    store = SqliteStore(db, read_only=True)
    try:
        crawl = store.get_crawl("c1")
        assert [crawl[name] for name in NEWER_CRAWL_FIELDS] == [None] * len(NEWER_CRAWL_FIELDS)
        assert store.pages("c1")[0]["visits"] is None
    finally:
        store.close()
    assert db.read_bytes() == before


def test_an_older_sqlite_store_with_its_text_before_other_fields_keeps_its_pages(tmp_path):
    """A store written before the text was last in a page's row keeps that order, and its
    fetch-order index on three columns (made anew at a crawl's open, it would hold the write
    lock as long as reading every text): a crawl writes it and updates it, and every reader
    gets every field, the text too."""
    db = tmp_path / "old.sqlite3"
    narrow = "CREATE INDEX pages_crawl_fetch_order ON pages (crawl_id, fetch_order, is_relevant)"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        # The table as those versions made it: PAGE_SCHEMA's order.
        conn.execute(sqlitestore._table_sql("pages", storage.PAGE_SCHEMA, ("crawl_id", "url")))
        conn.execute(narrow)
        assert [row[1] for row in conn.execute("PRAGMA table_info(pages)")][3] == "text"
    store = SqliteStore(db)
    saved = [page(f"http://t/{n}", text="x" * 20_000, fetch_order=n, etag='"e"') for n in (1, 2)]
    store.save_pages(saved)
    store.update_pages([{"crawl_id": "c1", "url": "http://t/2", "visits": 3, "text": "new"}])
    store.close()
    reader = SqliteStore(db, read_only=True)
    try:
        expected = [saved[0], saved[1] | {"visits": 3, "text": "new"}]
        assert reader.pages("c1", order="fetch_order") == expected
        assert reader.pages("c1", order="fetch_order", fields=REPORT_FIELDS)[0]["level"] == 1
        assert reader.page_counts("c1") == PageCounts(stored=2, relevant=2, last_fetch_order=2)
    finally:
        reader.close()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        [made] = conn.execute("SELECT sql FROM sqlite_master WHERE name LIKE '%fetch_order'")
    assert made == (narrow,)


def test_a_write_ahead_log_left_on_read_only_media_is_not_ignored(tmp_path):
    """A crawl killed before its last checkpoint, copied with its -wal file but not its -shm:
    opened as immutable, the store would be read without the pages the log holds."""
    media = tmp_path / "media"
    media.mkdir()
    db = filled_sqlite(tmp_path / "focused.sqlite3")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    with conn:
        conn.execute("INSERT INTO crawls (crawl_id) VALUES ('c2')")
    for name in (db.name, f"{db.name}-wal"):  # while open: the log is not merged
        (media / name).write_bytes((tmp_path / name).read_bytes())
    conn.close()
    assert (media / f"{db.name}-wal").stat().st_size > 0
    with read_only(media), pytest.raises(StoreError) as caught:
        SqliteStore(media / db.name, read_only=True)
    assert f"its write-ahead log {media / db.name}-wal cannot be read" in str(caught.value)


@pytest.mark.parametrize(("create", "read"), [(True, False), (False, False), (False, True)])
def test_a_folder_given_as_the_sqlite_file_is_a_bad_setting(tmp_path, create, read):
    """It said "no such file" to a reader, and "unable to open database file" to a crawl."""
    with pytest.raises(StoreSettingError) as caught:
        SqliteStore(tmp_path, create=create, read_only=read)
    assert str(caught.value) == f"SQLite store at {tmp_path}: it is a folder, not a file"


@pytest.mark.parametrize("below", ["pages.sqlite3", "sub/pages.sqlite3"])
def test_a_sqlite_file_below_a_file_is_a_bad_setting(tmp_path, below):
    """`-s FOCUSED_DB=notes.txt/pages.sqlite3`: a crawl said "cannot open the database: [Errno
    17] File exists" of the file in the place of the store's folder."""
    notes = tmp_path / "notes.txt"
    notes.write_text("mine", encoding="utf-8")
    with pytest.raises(StoreSettingError) as caught:
        SqliteStore(notes / below)
    assert str(caught.value) == f"SQLite store at {notes / below}: {notes} is not a folder"
    assert notes.read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize(("create", "read"), [(True, False), (False, False), (False, True)])
def test_a_device_or_a_pipe_given_as_the_sqlite_file_is_a_bad_setting(tmp_path, create, read):
    """`-s FOCUSED_DB=/dev/null` (to store nothing) made a crawl write /dev/null-journal beside
    the device, then fail on "disk I/O error"; a reader said "no such file"."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(StoreSettingError) as caught:
        SqliteStore(fifo, create=create, read_only=read)
    assert str(caught.value) == f"SQLite store at {fifo}: it is not a regular file"
    assert [path.name for path in tmp_path.iterdir()] == ["fifo"]


# -- MongoDB specifics -----------------------------------------------------------------------


def test_mongo_indexes(mongo_client):
    MongoStore("mongodb://mongomock", "focused_idx", client=mongo_client).close()
    db = mongo_client["focused_idx"]
    pages = {
        tuple(index["key"].items()): index.get("unique", False) for index in db.pages.list_indexes()
    }
    crawls = {
        tuple(index["key"].items()): index.get("unique", False)
        for index in db.crawls.list_indexes()
    }
    assert pages[(("crawl_id", 1), ("url", 1))] is True
    assert (("crawl_id", 1), ("relevance", 1)) in pages
    assert (("crawl_id", 1), ("level", 1)) in pages
    assert crawls[(("crawl_id", 1),)] is True
    # The pages a recrawl's batch marked (rescored_by), found without a scan of the crawl's:
    # a crawl record read while a batch is pending (a recrawl's heartbeat, any write) reads
    # them. Sparse: it holds the marked pages only.
    marks = [i for i in db.pages.list_indexes() if list(i["key"]) == ["rescored_by.token"]]
    assert [index.get("sparse") for index in marks] == [True]


def test_unreachable_mongo_fails_fast_with_one_line(tmp_path):
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        open_store({"MONGO_URI": "mongodb://focused:s3cret@127.0.0.1:1", "MONGO_TIMEOUT_MS": 200})
    assert time.monotonic() - started < 3
    message = str(caught.value)
    assert "\n" not in message and len(message) < 300, message
    assert "127.0.0.1:1" in message and "200 ms" in message
    assert "s3cret" not in message


def test_malformed_mongo_uri_is_a_store_error():
    with pytest.raises(StoreError, match="invalid"):
        MongoStore("mongodb://user:p@ss@host:port", "focused", timeout_ms=200)


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("mongodb://h:27017", "mongodb://h:27017/focused"),
        # It came after the options: mongodb://h/?tls=true/focused.
        ("mongodb://h/?tls=true", "mongodb://h/focused?tls=true"),
        # The URI's own database is not the one used: MONGO_DATABASE is.
        ("mongodb://u:s3cret@h1,h2/other?replicaSet=r", "mongodb://***@h1,h2/focused?replicaSet=r"),
    ],
)
def test_a_mongo_store_names_its_database_where_a_uri_does(mongo_client, uri, shown):
    assert MongoStore(uri, "focused", client=mongo_client).location == shown


# -- open_store ------------------------------------------------------------------------------


def test_open_store_picks_mongo_when_mongo_uri_is_set(monkeypatch, mongo_client):
    calls = []

    def fake_client(uri: str, **options: Any) -> mongomock.MongoClient:
        calls.append((uri, options))
        return mongo_client

    monkeypatch.setattr(pymongo, "MongoClient", fake_client)
    settings = Settings({"MONGO_URI": "mongodb://db.test:27017", "MONGO_TIMEOUT_MS": "1234"})
    store = open_store(settings)
    assert isinstance(store, MongoStore)
    assert calls == [("mongodb://db.test:27017", {"serverSelectionTimeoutMS": 1234})]
    store.start_crawl(crawl_record())
    assert mongo_client["focused"]["crawls"].count_documents({}) == 1  # the default database
    store.close()

    store = open_store({"MONGO_URI": "mongodb://db.test", "MONGO_DATABASE": "other"})
    store.start_crawl(crawl_record())
    assert mongo_client["other"]["crawls"].count_documents({}) == 1
    assert calls[-1][1] == {"serverSelectionTimeoutMS": 5000}
    store.close()


@pytest.mark.parametrize("settings", [{}, {"MONGO_URI": None}, {"MONGO_URI": ""}])
def test_open_store_picks_sqlite_otherwise(tmp_path, monkeypatch, settings):
    monkeypatch.chdir(tmp_path)
    store = open_store(settings)
    assert isinstance(store, SqliteStore)
    store.close()
    assert (tmp_path / "focused.sqlite3").exists()

    store = open_store(Settings({**settings, "FOCUSED_DB": str(tmp_path / "sub" / "x.db")}))
    assert isinstance(store, SqliteStore)
    store.close()
    assert (tmp_path / "sub" / "x.db").exists()


# -- RelevancePipeline -----------------------------------------------------------------------


def relevance_pipeline(**settings: Any) -> tuple[RelevancePipeline, Any]:
    crawler = get_crawler(settings_dict=settings)
    crawler.spider = FakeSpider()
    return RelevancePipeline.from_crawler(crawler), crawler.stats


def test_relevance_pipeline_records_scores():
    pipeline, _ = relevance_pipeline(RELEVANCE_THRESHOLD=0.5)
    item = PageItem(url="http://a.test/", scores=Scores(tfidf=0.2, lsi=0.9, combined=0.55))
    assert pipeline.process_item(item) is item
    assert dict(item) == {
        "url": "http://a.test/",
        "tfidf": 0.2,
        "lsi": 0.9,
        "relevance": 0.55,
        "is_relevant": True,
    }

    item = PageItem(url="http://b.test/", scores=Scores(0.1234567891, 0.3, 0.4999999))
    pipeline.process_item(item)
    assert item["tfidf"] == 0.123457 and item["relevance"] == 0.5
    assert item["is_relevant"] is False  # decided on the unrounded score
    assert "scores" not in item


def test_relevance_pipeline_default_threshold():
    pipeline, _ = relevance_pipeline()
    item = pipeline.process_item(PageItem(url="u", scores=Scores(0.15, 0.15, 0.15)))
    assert item["is_relevant"] is True
    item = pipeline.process_item(PageItem(url="u", scores=Scores(0.1, 0.1, 0.149)))
    assert item["is_relevant"] is False


def test_relevance_pipeline_store_min_relevance_drops_and_counts():
    pipeline, stats = relevance_pipeline(STORE_MIN_RELEVANCE="0.3")
    kept = pipeline.process_item(PageItem(url="u", scores=Scores(0.3, 0.3, 0.3)))
    assert kept["relevance"] == 0.3
    for combined in (0.29, 0.1):  # relevant (RELEVANCE_THRESHOLD 0.15), then not
        # NotStored: under JOBDIR the crawl counts them as they leave the pipelines
        # (focused.resume.CrawlCounters): the store cannot give them back after a crash.
        with pytest.raises(NotStored, match="STORE_MIN_RELEVANCE"):
            pipeline.process_item(PageItem(url="u", scores=Scores(0.1, 0.1, combined)))
    assert stats.get_value("focused/not_stored") == 2


def test_relevance_pipeline_needs_scores():
    pipeline, _ = relevance_pipeline()
    with pytest.raises(ValueError, match="RelevanceMiddleware"):
        pipeline.process_item(PageItem(url="http://a.test/"))


# -- StoragePipeline -------------------------------------------------------------------------


class FakeSpider(scrapy.Spider):
    name = "fake"

    def __init__(self) -> None:
        super().__init__()
        self.state: dict[str, Any] = {}

    def crawl_record(self) -> dict:
        return crawl_record("pipe", "2024-06-01T00:00:00+00:00")


class FakeEngine:
    def __init__(self) -> None:
        self.close_reasons: list[str] = []
        self.paused = False

    def pause(self) -> None:
        self.paused = True

    def unpause(self) -> None:
        self.paused = False

    async def close_spider_async(self, *, reason: str) -> None:
        self.close_reasons.append(reason)


def pipeline_crawler(**settings: Any):
    crawler = get_crawler(
        FakeSpider,
        {
            "ITEM_PIPELINES": {
                "pipelines.relevance.RelevancePipeline": 300,
                "pipelines.storage.StoragePipeline": 800,
            },
            **settings,
        },
    )
    crawler.spider = FakeSpider.from_crawler(crawler)
    crawler.engine = FakeEngine()
    return crawler


def scored_item(n: int) -> PageItem:
    combined = n / 10
    return PageItem(
        crawl_id="pipe",
        url=f"http://t/{n}",
        title=f"page {n}",
        text="text",
        level=n % 3,
        parent_url=None if n == 0 else "http://t/0",
        anchor=None,
        link_relevance=None,
        strategy="bestfirst",
        fetch_order=n,
        fetched_at="2024-06-01T00:00:01+00:00",
        status=200,
        language="sk",
        content_hash="9a0364b9e99bb480dd25e1f0284c8555c5a5ef0e",
        last_changed="2024-06-01T00:00:01+00:00",
        changes=0,
        visits=1,
        scores=Scores(combined, combined, combined),
    )


async def run_pipelines(
    crawler, items: list[PageItem], reason: str = "finished", between: Any = None
) -> ItemPipelineManager:
    """Drive the pipelines the way Scrapy 2.19's scraper and engine do."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScrapyDeprecationWarning)  # current signatures only
        manager = ItemPipelineManager.from_crawler(crawler)
        await manager.open_spider_async()
        await crawler.signals.send_catch_log_async(signals.spider_opened, spider=crawler.spider)
        for item in items:
            with contextlib.suppress(DropItem, StoreError):  # StoreError: the store is down
                await manager.process_item_async(item)
        if between is not None:
            between()
        # The crawl's counters, kept by the scoring middleware (focused.middlewares).
        crawler.spider.state = {"pages": len(items), "relevant": 4}
        await manager.close_spider_async()
        await crawler.signals.send_catch_log_async(
            signals.spider_closed, spider=crawler.spider, reason=reason
        )
    return manager


def check_pipeline_run(crawler, reader: Store, items: int = 10) -> None:
    """Every page is written before it leaves the pipeline (crash safety), none at close."""
    stored_before_close = []

    def before_close() -> None:
        stored_before_close.append(len(reader.pages("pipe")))

    asyncio.run(
        run_pipelines(crawler, [scored_item(n) for n in range(items)], between=before_close)
    )
    assert stored_before_close == [items]
    assert crawler.stats.get_value("focused/stored") == items

    pages = reader.pages("pipe", order="fetch_order")
    assert [p["url"] for p in pages] == [f"http://t/{n}" for n in range(items)]
    assert pages[7] == {
        **page("http://t/7", "pipe", title="page 7", text="text", level=1, anchor=None),
        "fetched_at": "2024-06-01T00:00:01+00:00",
        "last_changed": "2024-06-01T00:00:01+00:00",
        "parent_url": "http://t/0",
        "link_relevance": None,
        "tfidf": 0.7,
        "lsi": 0.7,
        "relevance": 0.7,
        "is_relevant": True,
        "fetch_order": 7,
    }
    assert [p["is_relevant"] for p in pages] == [False] * 5 + [True] * 5  # threshold 0.5
    crawl = reader.get_crawl("pipe")
    assert crawl["query"] == "birds nest eggs" and crawl["seeds"] == crawl_record()["seeds"]
    assert crawl["started_at"] == "2024-06-01T00:00:00+00:00"
    assert crawl["finished_at"] > crawl["started_at"]
    assert (crawl["status"], crawl["finish_reason"]) == ("finished", "finished")
    assert (crawl["pages"], crawl["relevant"], crawl["harvest_rate"]) == (items, 4, 0.4)


PIPELINE_SETTINGS = {"STORAGE_BATCH_SIZE": 4, "RELEVANCE_THRESHOLD": 0.5}


def test_storage_pipeline_writes_to_sqlite(tmp_path):
    db = tmp_path / "crawl.sqlite3"
    crawler = pipeline_crawler(FOCUSED_DB=str(db), **PIPELINE_SETTINGS)
    reader = SqliteStore(db)
    try:
        check_pipeline_run(crawler, reader)
    finally:
        reader.close()


def test_a_page_cut_to_fit_the_store_leaves_the_pipeline_as_stored(tmp_path):
    """The item leaves the storage pipeline as the record stored, so that a feed (-O) gets the
    same records: a page's text cut to fit the store (``PAGE_MAX_BYTES``) left it whole."""
    db = tmp_path / "crawl.sqlite3"
    crawler = pipeline_crawler(FOCUSED_DB=str(db))
    item = scored_item(1)
    item["text"] = "перо " * 2_000_000  # 18 MB in UTF-8

    async def store_one() -> dict[str, Any]:
        manager = ItemPipelineManager.from_crawler(crawler)
        await manager.open_spider_async()
        left = await manager.process_item_async(item)
        crawler.spider.state = {"pages": 1, "relevant": 0}
        await manager.close_spider_async()
        await crawler.signals.send_catch_log_async(
            signals.spider_closed, spider=crawler.spider, reason="finished"
        )
        return dict(left)

    left = asyncio.run(store_one())
    reader = SqliteStore(db)
    try:
        [stored] = reader.pages("pipe", fields=["text"])
    finally:
        reader.close()
    assert len(stored["text"].encode()) <= storage.PAGE_MAX_BYTES
    assert left["text"] == stored["text"]


def test_pages_stored_after_a_forced_stop_is_recorded_are_counted_in_the_record(tmp_path):
    """A second Ctrl-C: the forced stop is recorded as the reactor begins to stop, and Scrapy's
    own stop keeps it running a moment longer, long enough for a page scored then to be stored.
    The record said 21 pages for a crawl with 22 stored."""
    db = tmp_path / "crawl.sqlite3"
    crawler = pipeline_crawler(FOCUSED_DB=str(db))
    pages = [scored_item(n) for n in range(1, 4)]

    async def stop_with_a_page_under_way() -> None:
        manager = ItemPipelineManager.from_crawler(crawler)
        await manager.open_spider_async()
        [pipeline] = [p for p in manager.middlewares if isinstance(p, StoragePipeline)]
        for stored, item in enumerate(pages[:2], 1):
            crawler.spider.state = {"pages": stored, "relevant": stored}
            await manager.process_item_async(item)
        pipeline.forced_stop()
        crawler.spider.state = {"pages": 3, "relevant": 3}  # the page scored as it stopped
        await manager.process_item_async(pages[2])

    asyncio.run(stop_with_a_page_under_way())
    store = SqliteStore(db)
    try:
        crawl = store.get_crawl("pipe")
        stored = store.pages("pipe")
    finally:
        store.close()
    assert len(stored) == 3
    assert (crawl["status"], crawl["finish_reason"]) == ("interrupted", "forced_shutdown")
    assert (crawl["pages"], crawl["relevant"]) == (3, 3)


class LearningModel:
    """What a resume asks of the relevance model (``pipelines.relevance``): none saved."""

    restored = False
    max_docs = 100
    refit_due = False

    def __init__(self) -> None:
        self.learned: list[str] = []

    def observe(self, text: str, language: str | None) -> None:
        self.learned.append(text)


def test_a_resume_reads_a_store_value_of_another_type_as_unknown_and_says_so(tmp_path, caplog):
    """A crawl resumed after a crash over pages edited by hand (or restored without their fetch
    order): one page of unknown fetch order ended its recovery in a TypeError, and values read
    as unknown went without a word."""
    db = tmp_path / "crawl.sqlite3"
    store = SqliteStore(db)
    store.start_crawl(crawl_record("pipe"))
    # fetch orders 1, 2 and 4 (the third page was not stored), then one of unknown order
    store.save_pages(
        [
            page("http://t/1", "pipe", fetch_order=1, text="one"),
            page("http://t/2", "pipe", fetch_order=2, text="two"),
            page("http://t/4", "pipe", fetch_order=4, text="four", is_relevant=False),
            page("http://t/x", "pipe", fetch_order=None, text="unknown"),
            page("http://t/y", "pipe", fetch_order=5, text="edited"),
        ]
    )
    store.close()
    with sqlite3.connect(db) as edit:
        edit.execute("UPDATE pages SET fetch_order = 'five' WHERE url = 'http://t/y'")
        edit.execute("UPDATE pages SET url = x'02' WHERE url = 'http://t/2'")
    edit.close()
    crawler = pipeline_crawler(FOCUSED_DB=str(db))
    pipeline = StoragePipeline.from_crawler(crawler)
    spider = crawler.spider
    spider.state, spider.relevance = {}, LearningModel()
    with caplog.at_level(logging.INFO, logger="pipelines.storage"):
        asyncio.run(pipeline.open_spider())
        try:
            pipeline.recover_state(spider)
        finally:
            pipeline.store.close()
    assert spider.state["pages"] == 4 and spider.state["relevant"] == 4
    assert spider.state["fetched_urls"] == {f"http://t/{name}" for name in "14xy"}
    # in fetch order, the page of unknown order left out
    assert spider.relevance.learned == ["one", "two", "four"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"the SQLite store at {db} holds values of another type than their field's, read as"
        " unknown: pages.url = b'\\x02'"
    ]


def test_a_resume_reads_the_stored_pages_as_they_come(tmp_path):
    """A resume holds what it recovers (the URLs fetched), not every page's record besides:
    a list of them took 80 MB for 200,000 pages."""
    db = tmp_path / "crawl.sqlite3"
    store = SqliteStore(db)
    store.start_crawl(crawl_record("pipe"))
    store.save_pages(page(f"http://t/{n}", "pipe", fetch_order=n) for n in range(1, 20_001))
    store.close()
    crawler = pipeline_crawler(FOCUSED_DB=str(db))
    pipeline = StoragePipeline.from_crawler(crawler)
    spider = crawler.spider
    spider.state, spider.relevance = {}, None
    asyncio.run(pipeline.open_spider())
    tracemalloc.start()
    try:
        pipeline.recover_state(spider)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        pipeline.store.close()
    assert spider.state["pages"] == len(spider.state["fetched_urls"]) == 20_000
    # Held at once, the records took 5 MB more (250 bytes a page); read as they come, 0.5 MB
    # (the set of URLs growing).
    assert peak - held < 2_000_000


def test_a_resume_whose_read_of_the_store_fails_half_way_keeps_its_state(tmp_path, caplog):
    """The pages read as they come, a store that fails after some of them (a disk error)
    leaves spider.state as it was, with a warning, as a read failing at once did."""
    db = tmp_path / "crawl.sqlite3"
    crawler = pipeline_crawler(FOCUSED_DB=str(db))
    pipeline = StoragePipeline.from_crawler(crawler)
    spider = crawler.spider
    spider.state, spider.relevance = {"pages": 1}, None
    asyncio.run(pipeline.open_spider())
    pipeline.store.save_pages(page(f"http://t/{n}", "pipe", fetch_order=n) for n in (1, 2, 3))
    read = pipeline.store._find_pages

    def failing(query):
        pages = read(query)
        yield next(pages)
        raise sqlite3.DatabaseError("disk I/O error")

    pipeline.store._find_pages = failing
    with caplog.at_level(logging.WARNING, logger="pipelines.storage"):
        try:
            pipeline.recover_state(spider)
        finally:
            pipeline.store.close()
    assert spider.state == {"pages": 1}
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"Cannot recover the crawl's counters from the store: SQLite store at {db}: cannot read"
        " pages of crawl pipe: disk I/O error"
    ]


def test_a_crawl_run_again_says_its_record_held_a_value_of_another_type(tmp_path, caplog):
    """A crawl run again under its id (another process of a shared crawl, a resume) keeps its
    record's first started_at: one edited by hand was taken for none, without a word."""
    db = tmp_path / "crawl.sqlite3"
    store = SqliteStore(db)
    store.start_crawl(crawl_record("pipe"))
    store.close()
    with sqlite3.connect(db) as edit:
        edit.execute("UPDATE crawls SET started_at = x'01'")
    edit.close()
    pipeline = StoragePipeline.from_crawler(pipeline_crawler(FOCUSED_DB=str(db)))
    pipeline.crawler.spider.state = {}

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]

    said = [
        f"the SQLite store at {db} holds values of another type than their field's, read as"
        " unknown: crawls.started_at = b'\\x01'"
    ]
    with caplog.at_level(logging.INFO, logger="pipelines.storage"):
        asyncio.run(pipeline.open_spider())  # without JOBDIR: no recover_state
        assert warnings() == said
        pipeline.recover_state(pipeline.crawler.spider)  # under JOBDIR: not said again
        pipeline.store.close()
    assert warnings() == said


def test_the_crawl_says_its_id_and_where_its_pages_go_as_it_starts(tmp_path, caplog):
    """Nothing in the log of a crawl named it at INFO, nor the store its pages went to: the id
    that scrapy report ID and -a crawl_id take, and the store a JOBDIR resume must be given
    again, were to be found with scrapy crawls, in the right working directory."""
    db = tmp_path / "crawl.sqlite3"
    pipeline = StoragePipeline.from_crawler(pipeline_crawler(FOCUSED_DB=str(db)))
    pipeline.crawler.spider.state = {}
    with caplog.at_level(logging.INFO, logger="pipelines.storage"):
        asyncio.run(pipeline.open_spider())
        pipeline.store.close()
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert said == [f"Crawl pipe (bestfirst): its pages go to the SQLite store at {db}"]


def test_storage_pipeline_writes_to_mongo(monkeypatch, mongo_client):
    writers = []

    def fake_client(uri: str, **options: Any) -> mongomock.MongoClient:
        writers.append(uri)
        return mongo_client

    monkeypatch.setattr(pymongo, "MongoClient", fake_client)
    crawler = pipeline_crawler(
        MONGO_URI="mongodb://db.test", MONGO_DATABASE="pipe_db", **PIPELINE_SETTINGS
    )
    check_pipeline_run(crawler, MongoStore("mongodb://db.test", "pipe_db", client=mongo_client))
    assert writers == ["mongodb://db.test"]


def starting(settings: dict[str, Any]) -> StoragePipeline:
    """The storage pipeline of a run that starts crawl ``pipe`` with nothing to go on from (no
    JOBDIR that holds it, no shared frontier): ``spiders.topical`` tells so."""
    crawler = pipeline_crawler(**settings)
    crawler.spider.starts_unlocked = starts_unlocked(crawler.settings, "pipe")
    return StoragePipeline.from_crawler(crawler)


@pytest.mark.parametrize("killed", [False, True], ids=["running", "killed"])
def test_a_crawl_started_twice_at_once_on_mongodb_runs_once(
    monkeypatch, mongo_client, caplog, killed
):
    """MongoDB takes no lock (``lock_crawl`` locks SQLite's): two runs of a new crawl id started
    together (a Scrapyd job scheduled twice, a colleague's machine) both found no page stored
    (``check_store``) and both crawled, every page fetched, numbered and counted twice. The start
    of the second now finds the first's record live: one error line, the spider closed before
    it fetches anything (exit status 2) and the record left to the first. A first run killed
    (its heartbeat stale) is no refusal: its id is run again."""
    monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)
    settings = {"MONGO_URI": "mongodb://db.test"}
    store = MongoStore("mongodb://db.test", "focused", client=mongo_client)
    asyncio.run(starting(settings).open_spider())
    if killed:
        store._update_crawl("pipe", {"seen_at": "2024-06-01T00:00:00+00:00"})
    first = store.get_crawl("pipe")
    config = CrawlConfig("q", "q", (), "bfs", {}, crawl_id="pipe", order={})
    second = starting(settings)
    if killed:
        check_store(second.crawler.settings, config)
        asyncio.run(second.open_spider())
        assert store.get_crawl("pipe")["seen_at"] != first["seen_at"]
        return
    with pytest.raises(ConfigError) as refused:  # the first had recorded its start
        check_store(second.crawler.settings, config)
    assert str(refused.value).startswith("crawl pipe is running in another process (last seen ")
    reason, [line] = refused_start(second, caplog)  # both had checked
    assert reason == CRAWL_RUNNING
    assert line == str(refused.value)
    assert ": let it end (Ctrl-C pauses it), or give another crawl_id; if it was killed, " in line
    assert store.get_crawl("pipe") == first


@pytest.mark.parametrize(
    ("settings", "job", "unlocked"),
    [
        ({"MONGO_URI": "mongodb://db.test"}, None, True),
        ({"MONGO_URI": "mongodb://db.test"}, "pipe", False),  # resumed: the JOBDIR's lock
        ({"MONGO_URI": "mongodb://db.test"}, "other", True),  # a JOBDIR of another crawl
        ({"MONGO_URI": "mongodb://db.test", "FOCUSED_FRONTIER": "redis://r/0"}, None, False),
        ({"FOCUSED_DB": "x.sqlite3"}, None, False),  # lock_crawl's
    ],
    ids=["mongo", "jobdir", "other_jobdir", "shared", "sqlite"],
)
def test_a_run_starts_a_crawl_unlocked_only_on_mongodb_with_nothing_to_go_on_from(
    tmp_path, settings, job, unlocked
):
    if job is not None:
        settings = {**settings, "JOBDIR": str(tmp_path)}
        (tmp_path / "focused.json").write_text(f'{{"crawl_id": "{job}", "order": {{}}}}')
    assert starts_unlocked(Settings(settings), "pipe") is unlocked


def test_storage_pipeline_concurrent_items_one_writer(monkeypatch, mongo_client):
    """Items arriving while a (threaded) MongoDB write runs are neither lost nor written by a
    second, overlapping writer: they wait and go together in the next write (group commit),
    at most STORAGE_BATCH_SIZE at a time, and each leaves the pipeline only once written."""
    monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)
    upsert = MongoStore._upsert_pages
    active: list[int] = []
    batches: list[int] = []

    def slow_upsert(self, pages):
        active.append(1)
        assert len(active) == 1, "two writes at once"
        time.sleep(0.02)  # in a worker thread: other items get processed meanwhile
        batches.append(len(pages))
        upsert(self, pages)
        active.pop()

    monkeypatch.setattr(MongoStore, "_upsert_pages", slow_upsert)
    crawler = pipeline_crawler(MONGO_URI="mongodb://db.test", STORAGE_BATCH_SIZE=4)
    items = [scored_item(n) for n in range(23)]

    reader = MongoStore("mongodb://db.test", "focused", client=mongo_client)
    unwritten_on_return: list[str] = []

    async def process(manager, item) -> None:
        await manager.process_item_async(item)
        if not reader.pages("pipe", fields=["url"]) or item["url"] not in {
            p["url"] for p in reader.pages("pipe", fields=["url"])
        }:
            unwritten_on_return.append(item["url"])

    async def crawl() -> None:
        manager = ItemPipelineManager.from_crawler(crawler)
        await manager.open_spider_async()
        await asyncio.gather(*(process(manager, item) for item in items))
        await manager.close_spider_async()

    asyncio.run(crawl())
    assert unwritten_on_return == []
    assert batches[0] == 1 and max(batches) == 4 and sum(batches) == 23
    assert crawler.stats.get_value("focused/stored") == 23
    stored = reader.pages("pipe", order="fetch_order")
    assert [p["url"] for p in stored] == [f"http://t/{n}" for n in range(23)]


def test_storage_pipeline_drops_below_store_min_relevance(tmp_path):
    db = tmp_path / "crawl.sqlite3"
    crawler = pipeline_crawler(FOCUSED_DB=str(db), STORE_MIN_RELEVANCE=0.35)
    asyncio.run(run_pipelines(crawler, [scored_item(n) for n in range(6)]))
    reader = SqliteStore(db)
    try:
        assert [p["url"] for p in reader.pages("pipe")] == ["http://t/5", "http://t/4"]
    finally:
        reader.close()
    assert crawler.stats.get_value("focused/not_stored") == 4
    assert crawler.stats.get_value("focused/stored") == 2


@pytest.mark.parametrize(
    ("reason", "status"),
    [
        ("finished", "finished"),
        ("closespider_pagecount", "finished"),
        ("closespider_timeout", "finished"),
        ("shutdown", "interrupted"),
        ("cancelled", "interrupted"),
        (STORE_UNREACHABLE, "interrupted"),
    ],
)
def test_close_reason_sets_the_crawl_status(tmp_path, reason, status):
    assert crawl_status(reason) == status
    db = tmp_path / "crawl.sqlite3"
    crawler = pipeline_crawler(FOCUSED_DB=str(db))
    asyncio.run(run_pipelines(crawler, [scored_item(1)], reason=reason))
    reader = SqliteStore(db)
    try:
        crawl = reader.get_crawl("pipe")
    finally:
        reader.close()
    assert (crawl["status"], crawl["finish_reason"]) == (status, reason)


def failing_writes(monkeypatch, failures: int) -> list[int]:
    """Make SQLite page writes fail ``failures`` times (as a locked database would)."""
    attempts: list[int] = []
    upsert = SqliteStore._upsert_pages

    def flaky(self, pages):
        attempts.append(len(pages))
        if len(attempts) <= failures:
            raise sqlite3.OperationalError("database is locked")
        return upsert(self, pages)

    monkeypatch.setattr(SqliteStore, "_upsert_pages", flaky)
    return attempts


def test_storage_pipeline_retries_a_failed_write(tmp_path, monkeypatch):
    attempts = failing_writes(monkeypatch, failures=2)
    db = tmp_path / "crawl.sqlite3"
    crawler = pipeline_crawler(
        FOCUSED_DB=str(db), STORAGE_BATCH_SIZE=3, STORAGE_RETRIES=2, STORAGE_RETRY_DELAY=0
    )
    asyncio.run(run_pipelines(crawler, [scored_item(n) for n in range(4)]))
    assert attempts == [1, 1, 1, 1, 1, 1]  # page 0 twice refused, then each page alone
    assert crawler.engine.close_reasons == []
    assert not crawler.engine.paused
    assert crawler.stats.get_value("focused/stored") == 4
    reader = SqliteStore(db)
    try:
        assert len(reader.pages("pipe")) == 4
        assert reader.get_crawl("pipe")["status"] == "finished"
    finally:
        reader.close()


def test_no_request_is_sent_while_a_failed_write_is_retried(tmp_path, monkeypatch):
    """Pages fetched while the store fails would wait for a write that may never come."""
    failing_writes(monkeypatch, failures=2)
    crawler = pipeline_crawler(
        FOCUSED_DB=str(tmp_path / "crawl.sqlite3"), STORAGE_RETRIES=2, STORAGE_RETRY_DELAY=0
    )
    paused_at_attempts: list[bool] = []
    flaky = SqliteStore._upsert_pages

    def watched(self, pages):
        paused_at_attempts.append(crawler.engine.paused)
        return flaky(self, pages)

    monkeypatch.setattr(SqliteStore, "_upsert_pages", watched)
    asyncio.run(run_pipelines(crawler, [scored_item(0), scored_item(1)]))
    assert paused_at_attempts == [False, True, True, False]
    assert not crawler.engine.paused


def test_a_pause_made_by_another_is_left_to_it(tmp_path, monkeypatch):
    failing_writes(monkeypatch, failures=1)
    crawler = pipeline_crawler(
        FOCUSED_DB=str(tmp_path / "crawl.sqlite3"), STORAGE_RETRIES=1, STORAGE_RETRY_DELAY=0
    )
    crawler.engine.pause()  # the telnet console's engine.pause(), or a close under way
    asyncio.run(run_pipelines(crawler, [scored_item(0)]))
    assert crawler.engine.paused


def test_storage_pipeline_closes_the_spider_when_the_store_stays_down(
    tmp_path, monkeypatch, caplog
):
    attempts = failing_writes(monkeypatch, failures=1000)
    db = tmp_path / "crawl.sqlite3"
    crawler = pipeline_crawler(
        FOCUSED_DB=str(db), STORAGE_BATCH_SIZE=2, STORAGE_RETRIES=2, STORAGE_RETRY_DELAY=0
    )
    with caplog.at_level(logging.WARNING, logger="pipelines.storage"):
        asyncio.run(
            run_pipelines(crawler, [scored_item(n) for n in range(5)], reason=STORE_UNREACHABLE)
        )
    # 3 attempts for the first page, the others refused at once, one last try (a batch of
    # STORAGE_BATCH_SIZE) at close
    assert attempts == [1, 1, 1, 2]
    assert crawler.engine.close_reasons == [STORE_UNREACHABLE]
    assert crawler.engine.paused  # no new page is fetched that could not be stored
    assert crawler.stats.get_value("focused/stored") is None
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 2, errors
    assert "closing the spider" in errors[0] and "database is locked" in errors[0]
    assert "\n" not in errors[0]
    assert errors[1].startswith("5 page records of crawl pipe were not stored")
    reader = SqliteStore(db)
    try:
        crawl = reader.get_crawl("pipe")  # the crawl record still gets its outcome
    finally:
        reader.close()
    assert (crawl["status"], crawl["finish_reason"]) == ("interrupted", STORE_UNREACHABLE)


@pytest.mark.parametrize("backend", ["sqlite", "mongo"])
def test_a_crawl_whose_store_fails_its_start_closes_in_one_line(
    tmp_path, monkeypatch, mongo_client, caplog, backend
):
    """The store opened (the crawl's checks read it) but its first write failed for good: the
    SQLite file locked by another process's write, a MongoDB that takes no insert. The error
    went on as a traceback, the close retried the crawl's outcome on the closed store and kept
    it in a file of unstored records, for a crawl the store has no record of."""
    if backend == "sqlite":
        db = tmp_path / "crawl.sqlite3"
        SqliteStore(db).close()
        settings: dict[str, Any] = {"FOCUSED_DB": str(db), "FOCUSED_DB_TIMEOUT": 0.1}
        locker = sqlite3.connect(db, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")
        cause = "database is locked"
    else:
        monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)

        def refusing(self, document, *args, **kwargs):
            raise pymongo.errors.OperationFailure("not authorized on focused to execute insert")

        monkeypatch.setattr(mongomock.collection.Collection, "insert_one", refusing)
        settings = {"MONGO_URI": "mongodb://db.test", "FOCUSED_UNSTORED_DIR": str(tmp_path)}
        cause = "not authorized"
    crawler = pipeline_crawler(**settings, STORAGE_RETRIES=1, STORAGE_RETRY_DELAY=0)
    reason, lines = refused_start(StoragePipeline.from_crawler(crawler), caplog)
    assert reason == STORE_UNREACHABLE
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, lines
    assert cause in errors[0] and errors[0].endswith("the crawl cannot start (store_unreachable)")
    assert not list(tmp_path.glob("unstored-*")), lines  # nothing to keep: nothing was fetched


def test_storage_pipeline_open_fails_on_unreachable_mongo():
    crawler = pipeline_crawler(MONGO_URI="mongodb://127.0.0.1:1", MONGO_TIMEOUT_MS=200)
    pipeline = StoragePipeline.from_crawler(crawler)
    with pytest.raises(StoreError, match="cannot reach the server"):
        asyncio.run(pipeline.open_spider())


# -- a real MongoDB --------------------------------------------------------------------------


@pytest.mark.skipif(not REAL_MONGO_URI, reason="set FOCUSED_TEST_MONGO_URI to test a real MongoDB")
class TestRealMongo:
    @pytest.fixture
    def database(self):
        name = f"focused_test_{uuid.uuid4().hex[:12]}"
        yield name
        client = pymongo.MongoClient(REAL_MONGO_URI, serverSelectionTimeoutMS=3000)
        try:
            client.drop_database(name)
        finally:
            client.close()

    @pytest.fixture
    def store(self, database):
        store = MongoStore(REAL_MONGO_URI, database, timeout_ms=3000)
        yield store
        store.close()

    def test_round_trip(self, store):
        check_round_trip(store)

    def test_upsert_is_idempotent(self, store):
        check_upsert_idempotent(store)

    def test_crawls_newest_first_and_latest(self, store):
        check_crawls_newest_first(store)

    def test_page_counts(self, store):
        check_page_counts(store)

    @pytest.mark.parametrize("failure", MOVE_FAILURES, ids="-".join)
    def test_verdicts_moved_are_counted_once_whatever_write_fails(
        self, store, database, monkeypatch, failure
    ):
        def reopen() -> Store:
            return MongoStore(REAL_MONGO_URI, database, timeout_ms=3000)

        collection = pymongo.collection.Collection
        check_moves_counted_once_after_a_failure(store, reopen, monkeypatch, collection, failure)

    def test_unique_page_index(self, store, database):
        store.save_pages([page("http://a.test/")])
        client = pymongo.MongoClient(REAL_MONGO_URI, serverSelectionTimeoutMS=3000)
        try:
            with pytest.raises(pymongo.errors.DuplicateKeyError):
                client[database].pages.insert_one(page("http://a.test/"))
        finally:
            client.close()

    def test_storage_pipeline(self, store, database):
        crawler = pipeline_crawler(
            MONGO_URI=REAL_MONGO_URI, MONGO_DATABASE=database, **PIPELINE_SETTINGS
        )
        check_pipeline_run(crawler, store)


def test_a_crawl_fetches_nothing_new_while_its_store_is_locked_and_goes_on_after(tmp_path, site):
    """Another process holds the SQLite file's write lock for a while (a long write, a backup):
    the crawl's writes fail and are retried. Before, the crawl fetched page after page meanwhile,
    each kept in memory for a write that, had the store not come back, would never be made."""
    db, concurrency, budget = tmp_path / "focused.sqlite3", 4, 120
    settings = {
        "FOCUSED_DB": db,
        "CONCURRENT_REQUESTS": concurrency,
        "CLOSESPIDER_PAGECOUNT": budget,
        "STORAGE_RETRY_DELAY": 3,
    }
    log: list[str] = []
    with locked_store_crawl(tmp_path, site, settings) as (crawl, locker):
        for line in crawl.stderr:
            log.append(line)
            if "retry 1 of" in line:
                break
        fetched_at_failure = len(site.fetched)
        time.sleep(2)  # within the first retry's delay of 3 s
        fetched_while_locked = len(site.fetched) - fetched_at_failure
        locker.execute("ROLLBACK")
        log += crawl.stderr.readlines()
        crawl.wait(timeout=120)
    # Only the requests already handed to the downloader may still arrive.
    assert fetched_while_locked <= concurrency, "".join(log[-40:])
    assert crawl.returncode == 0, "".join(log[-40:])
    assert any("The store answers again" in line for line in log)
    stored = SqliteStore(db)
    try:
        pages = stored.pages("locked")
        assert stored.get_crawl("locked")["status"] == "finished"
    finally:
        stored.close()
    fetched = {path for path in site.fetched if path.startswith("/wiki/")}
    assert len(pages) == len(fetched) >= budget  # every page fetched was stored


@contextlib.contextmanager
def locked_store_crawl(
    tmp_path: Path, site: Any, settings: dict[str, Any]
) -> Iterator[tuple[subprocess.Popen[str], sqlite3.Connection]]:
    """A ``bfs`` crawl ``locked`` of ``site`` with ``settings`` (FOCUSED_DB among them), whose
    SQLite file another process locks for writing (``BEGIN IMMEDIATE``) once 10 pages are
    stored. Yields the crawl, its log on a pipe, and the locking connection: the caller ends
    the lock (``ROLLBACK``) when it wants; the crawl is killed on the way out."""
    from tests.conftest import REPO, crawl_args, crawl_env, scrapy_command

    db = Path(settings["FOCUSED_DB"])
    settings = {
        "LOG_LEVEL": "INFO",
        "ENCODER_STORE_DIR": tmp_path / "encodings",
        # A write to the locked file fails after 0.5 s, not after SQLite's default 5 s.
        "FOCUSED_DB_TIMEOUT": 0.5,
        **settings,
    }
    arguments = {"query": "birds", "seeds": f"{site.url}/wiki/Albatross", "strategy": "bfs"}
    crawl = subprocess.Popen(
        scrapy_command(*crawl_args({**arguments, "crawl_id": "locked"}, settings)),
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
        env=crawl_env(),
    )
    try:
        while not db.exists():  # created by the crawl, in WAL mode
            assert crawl.poll() is None, crawl.stderr.read()[-3000:]
            time.sleep(0.05)
        locker = sqlite3.connect(db, isolation_level=None, timeout=30)
        try:
            while _stored_count(locker) < 10:
                assert crawl.poll() is None, crawl.stderr.read()[-3000:]
                time.sleep(0.05)
            locker.execute("BEGIN IMMEDIATE")
            yield crawl, locker
        finally:
            locker.close()
    finally:
        crawl.kill()


def _stored_count(connection: sqlite3.Connection) -> int:
    try:
        return connection.execute("SELECT COUNT(*) FROM pages").fetchone()[0]
    except sqlite3.OperationalError:  # the crawl has not made its tables yet
        return 0


@pytest.mark.parametrize("tables", [["foo (x)"], ["pages (x)", "crawls (y)"]])
def test_a_crawl_leaves_another_programs_database_as_it_was(tmp_path, tables):
    """FOCUSED_DB naming another program's SQLite file by mistake: the crawl was refused, or not,
    after switching the file to WAL and giving it the crawler's tables."""
    path = tmp_path / "theirs.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for table in tables:
            conn.execute(f"CREATE TABLE {table}")
        conn.commit()
    before = path.read_bytes()
    with pytest.raises(storage.StoreError, match=r"another program's database .* nothing was"):
        SqliteStore(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.db"]  # no -wal, no -shm


def test_a_crawl_takes_an_empty_database(tmp_path):
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    SqliteStore(path).close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"crawls", "pages"} <= names


def test_a_process_killed_but_not_yet_waited_for_is_gone():
    """A crawl killed outright whose parent is gone is a zombie until the machine's init reaps
    it, and a container's first process (or a sandbox's) may never do so: its pid still named
    it, with its start time, so `scrapy crawls` showed it `running` for 3 heartbeats where it
    says `stopped?` at once, and a MongoDB crawl id stayed refused as long."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from focused.storage import this_process; print(this_process(), flush=True); "
            "import time; time.sleep(60)",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        process = child.stdout.readline().strip()
        assert process and not storage.process_gone(process)
        child.kill()
        # Not waited for: a zombie, as it stays where nothing reaps it.
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert storage.process_gone(process)
    finally:
        child.kill()
        child.wait()
        child.stdout.close()


def test_the_wait_between_two_retries_of_a_write_is_at_most_five_minutes(tmp_path, monkeypatch):
    """Doubled without end, STORAGE_RETRIES=40 waited up to 2**39 s for its last retry, the
    engine paused meanwhile."""
    failing_writes(monkeypatch, failures=12)
    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("pipelines.storage.sleep", no_wait)
    crawler = pipeline_crawler(FOCUSED_DB=str(tmp_path / "crawl.sqlite3"), STORAGE_RETRIES=12)
    asyncio.run(run_pipelines(crawler, [scored_item(0)]))
    assert waits == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
    assert crawler.stats.get_value("focused/stored") == 1
