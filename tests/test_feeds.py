"""The crawl's feed export (``-o``/``-O``, FEEDS; ``focused.feeds``), without a crawl."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import xml.etree.ElementTree as ET
from contextlib import suppress
from io import BytesIO
from tempfile import TemporaryFile
from typing import IO, ClassVar

import pytest
from scrapy import Spider, signals
from scrapy.exporters import CsvItemExporter
from scrapy.extensions.feedexport import BlockingFeedStorage
from scrapy.settings import Settings
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler

from focused.errors import redact_uri
from focused.feeds import UPLOAD_WAIT_S, FeedExporter
from focused.items import PageItem
from focused.storage import PAGE_FIELDS


def csv_header(feed: dict) -> list[str]:
    """The header line of a CSV feed with these options, as Scrapy's exporter writes it."""
    output = BytesIO()
    exporter = CsvItemExporter(output, fields_to_export=feed["fields"])
    exporter.start_exporting()
    exporter.export_item(PageItem(url="http://a.test/", title="A"))
    exporter.finish_exporting()
    return output.getvalue().decode().splitlines()[0].split(",")


def test_a_csv_feed_has_the_columns_of_a_page_record(tmp_path):
    """A CSV feed's columns were the item's declared fields, the transient ``scores`` too:
    every -O pages.csv ended with an empty column that no page record has."""
    uri = str(tmp_path / "pages.csv")
    crawler = get_crawler(settings_dict={"FEEDS": {uri: {"format": "csv"}}})
    assert csv_header(FeedExporter(crawler).feeds[uri]) == list(PAGE_FIELDS)


def test_a_feed_given_its_fields_keeps_them(tmp_path):
    uri = str(tmp_path / "pages.csv")
    feeds = {uri: {"format": "csv", "fields": ["url", "relevance"]}}
    crawler = get_crawler(settings_dict={"FEEDS": feeds, "FEED_EXPORT_FIELDS": ["title"]})
    assert csv_header(FeedExporter(crawler).feeds[uri]) == ["url", "relevance"]
    crawler = get_crawler(settings_dict={"FEEDS": {uri: {}}, "FEED_EXPORT_FIELDS": ["title"]})
    assert csv_header(FeedExporter(crawler).feeds[uri]) == ["title"]


def test_an_xml_feed_of_a_page_with_control_characters_is_xml():
    """A page's control characters (an escape, a vertical tab, which browsers show as nothing)
    went into the XML feed as they came, and no XML parser read the file past the first: each
    character XML cannot hold is written as U+FFFD, the others as they are."""
    settings = Settings()
    settings.setmodule("focused.settings")
    exporter_class = load_object(settings.getwithbase("FEED_EXPORTERS")["xml"])
    output = BytesIO()
    exporter = exporter_class(output, fields_to_export=list(PAGE_FIELDS))
    exporter.start_exporting()
    title, text = "Birds\x0bnest\x01", "Feathers \x1b[1m and twigs\tin\nnests \U0001f426\x85"
    exporter.export_item(PageItem(url="http://a.test/", title=title, text=text, level=1))
    exporter.finish_exporting()
    [item] = ET.fromstring(output.getvalue())
    assert item.findtext("title") == "Birds\ufffdnest\ufffd"
    assert item.findtext("text") == "Feathers \ufffd[1m and twigs\tin\nnests \U0001f426\x85"
    assert (item.findtext("url"), item.findtext("level")) == ("http://a.test/", "1")


def forced_stop(caplog, feeds: dict, pages: int = 0) -> tuple[dict, list[str]]:
    """The stats and log lines of a forced stop (a second Ctrl-C) once the feeds got
    ``pages`` pages: no upload is tried, nothing leaves this machine."""
    crawler = get_crawler(Spider, {"FEEDS": feeds})
    crawler.spider = spider = crawler._create_spider("pages")
    crawler.stats.open_spider()
    exporter = FeedExporter(crawler)
    exporter.open_spider(spider)
    for number in range(pages):
        exporter.item_scraped(PageItem(url=f"http://a.test/{number}", title="A"), spider)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="focused.feeds"):
        exporter._end_at_forced_stop()
    lines = [record.getMessage() for record in caplog.records if record.name == "focused.feeds"]
    return crawler.stats.get_stats(), lines


def test_a_forced_stop_says_a_feed_not_uploaded_without_its_password(caplog):
    """An FTP password may hold an @ (Scrapy reads the user name and password up to the host's
    @): the line hid it up to its first @ alone, ftp://***@cret@127.0.0.1/..."""
    feeds = {"ftp://alice:s3@cret@127.0.0.1:21/pages.jsonl": {}}
    stats, lines = forced_stop(caplog, feeds, pages=2)
    assert lines == [
        "the feed ftp://***@127.0.0.1:21/pages.jsonl was not uploaded at the forced stop, nor"
        " the 2 pages it got"
    ]
    assert stats["feedexport/failed_count/FTPFeedStorage"] == 1


def test_a_forced_stop_fails_no_feed_a_close_would_not_have_stored(caplog):
    """A feed of no page with store_empty off is stored by no close (nor a batch past the
    first: Scrapy's _close_slot): the forced stop said it was not uploaded, and counted it
    failed."""
    feeds = {
        "ftp://alice:s3cret@127.0.0.1:21/empty.jsonl": {"store_empty": False},
        "ftp://alice:s3cret@127.0.0.1:21/kept.jsonl": {"store_empty": True},
    }
    stats, lines = forced_stop(caplog, feeds)
    assert lines == [
        "the feed ftp://***@127.0.0.1:21/kept.jsonl was not uploaded at the forced stop, nor"
        " the 0 pages it got"
    ]
    assert stats["feedexport/failed_count/FTPFeedStorage"] == 1


class BlockingStorage:
    """A feed storage whose upload starts and never ends (a server that stopped answering)."""

    def __init__(self, uri: str, *, feed_options: dict | None = None) -> None:
        self.started = asyncio.Event()

    def open(self, spider: Spider) -> IO[bytes]:
        return TemporaryFile()

    async def store(self, file: IO[bytes]) -> None:
        self.started.set()
        await asyncio.Event().wait()


class ThreadStorage(BlockingFeedStorage):
    """A feed storage that uploads in a thread, as S3's and FTP's, to a bucket of its own: the
    upload takes ``upload_s`` (a slow server), then stores the feed, or fails with ``error``."""

    bucket: ClassVar[dict[str, bytes]] = {}
    upload_s = 0.3
    error: OSError | None = None

    def __init__(self, uri: str, *, feed_options: dict | None = None) -> None:
        self.uri = uri
        self.started = threading.Event()

    def _store_in_thread(self, file: IO[bytes]) -> None:
        self.started.set()
        time.sleep(self.upload_s)
        if self.error is not None:
            raise self.error
        file.seek(0)
        self.bucket[self.uri] = file.read()


async def forced_stop_in_upload(
    caplog, batch_item_count: int, close: bool, storage: type = BlockingStorage, at: str = ""
) -> tuple[list[str], dict[str, int]]:
    """The log lines of a forced stop once a feed's upload began: a full batch's, or, with
    ``close``, the close's; and the counts of its storage's feeds stored, failed, unconfirmed.
    The upload (``storage``'s) never ends but in a thread. The stop comes ``at`` another time:
    ``close begun``, as soon as the batch's close began (its upload handed over, not begun);
    ``slot closed``, once Scrapy's close has stored the feed and awaits a ``feed_slot_closed``
    handler (one that never ends)."""
    uri = "blocking://alice:s3@cret@127.0.0.1/p-%(batch_id)d.jsonl"
    feeds = {uri: {"format": "jsonlines", "batch_item_count": batch_item_count}}
    settings = {"FEEDS": feeds, "FEED_STORAGES": {"blocking": storage}}
    crawler = get_crawler(Spider, settings)
    crawler.spider = spider = crawler._create_spider("pages")
    crawler.stats.open_spider()
    slot_closed = asyncio.Event()

    async def handler(slot) -> None:
        slot_closed.set()
        await asyncio.Event().wait()

    if at == "slot closed":
        crawler.signals.connect(handler, signal=signals.feed_slot_closed)
    exporter = FeedExporter(crawler)
    exporter.open_spider(spider)
    [first] = exporter.slots
    for number in range(2):
        exporter.item_scraped(PageItem(url=f"http://a.test/{number}", title="A"), spider)
    closing = asyncio.create_task(exporter.close_spider(spider)) if close else None
    started = first.storage.started
    if at == "close begun":
        await asyncio.sleep(0)  # the loop's turn that begins the close task, and no other
        assert exporter._uploading == [first]
    elif at == "slot closed":
        await asyncio.wait_for(slot_closed.wait(), 5)
    elif isinstance(started, threading.Event):
        assert await asyncio.to_thread(started.wait, 5)
    else:
        await asyncio.wait_for(started.wait(), 5)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="focused.feeds"):
        exporter._end_at_forced_stop()
    # Counted now: the reactor's loop runs no more after a forced stop, this one does.
    stats = crawler.stats.get_stats()
    kinds = ("success_count", "failed_count", "unconfirmed_count")
    counts = {kind: stats.get(f"feedexport/{kind}/{storage.__name__}", 0) for kind in kinds}
    if closing is not None:
        closing.cancel()
        with suppress(asyncio.CancelledError):
            await closing
    lines = [record.getMessage() for record in caplog.records if record.name == "focused.feeds"]
    return lines, counts


@pytest.mark.parametrize("close", [False, True])
def test_a_forced_stop_in_an_upload_on_the_reactor_says_it_is_not_confirmed(caplog, close):
    """An upload under way (a full batch's, out of Scrapy's feed slots, or the close's) was cut
    short without a word; then it was said and counted failed, which no one knew: its last
    bytes may have been sent."""
    lines, counts = asyncio.run(forced_stop_in_upload(caplog, 0 if close else 2, close))
    assert lines == [
        "the feed blocking://***@127.0.0.1/p-1.jsonl was being uploaded at the forced stop, with"
        " the 2 pages it got: not confirmed, it may be stored or not"
    ]
    assert counts == {"success_count": 0, "failed_count": 0, "unconfirmed_count": 1}


@pytest.mark.parametrize("close", [False, True])
def test_a_forced_stop_waits_for_an_upload_in_a_thread(caplog, close):
    """An upload in a thread (S3, FTP) was said and counted failed at the forced stop, and the
    feed was in the bucket all the same: the thread went on, and the process waited for it as
    it exited. It is waited for, and said stored."""
    ThreadStorage.bucket.clear()
    begun = time.monotonic()
    lines, counts = asyncio.run(
        forced_stop_in_upload(caplog, 0 if close else 2, close, ThreadStorage)
    )
    assert time.monotonic() - begun < UPLOAD_WAIT_S
    assert lines == [
        "the forced stop waits up to 10 s for 1 feed upload under way",
        "the feed blocking://***@127.0.0.1/p-1.jsonl was uploaded at the forced stop, with its"
        " 2 pages",
    ]
    assert counts == {"success_count": 1, "failed_count": 0, "unconfirmed_count": 0}
    [(uri, body)] = ThreadStorage.bucket.items()
    assert uri.endswith("/p-1.jsonl") and len(body.splitlines()) == 2


def test_a_forced_stop_says_an_upload_in_a_thread_that_failed(caplog, monkeypatch):
    """Its thread's error is the reason, and it counts as failed, as at a close."""
    monkeypatch.setattr(ThreadStorage, "error", PermissionError(13, "Access Denied"))
    ThreadStorage.bucket.clear()
    lines, counts = asyncio.run(forced_stop_in_upload(caplog, 2, False, ThreadStorage))
    assert lines == [
        "the forced stop waits up to 10 s for 1 feed upload under way",
        "the feed blocking://***@127.0.0.1/p-1.jsonl could not be uploaded at the forced stop:"
        " [Errno 13] Access Denied",
    ]
    assert counts == {"success_count": 0, "failed_count": 1, "unconfirmed_count": 0}
    assert not ThreadStorage.bucket


def test_a_forced_stop_waits_a_bounded_time_for_an_upload_in_a_thread(caplog, monkeypatch):
    """An upload slower than the wait is said not confirmed, not failed: it may yet be stored,
    as here, once the forced stop has said so."""
    monkeypatch.setattr("focused.feeds.UPLOAD_WAIT_S", 0.2)
    monkeypatch.setattr(ThreadStorage, "upload_s", 1.0)
    ThreadStorage.bucket.clear()
    begun = time.monotonic()
    lines, counts = asyncio.run(forced_stop_in_upload(caplog, 2, False, ThreadStorage))
    assert lines == [
        "the forced stop waits up to 0.2 s for 1 feed upload under way",
        "the feed blocking://***@127.0.0.1/p-1.jsonl was being uploaded at the forced stop, with"
        " the 2 pages it got: not confirmed, it may be stored or not",
    ]
    assert counts == {"success_count": 0, "failed_count": 0, "unconfirmed_count": 1}
    # asyncio.run waited for the upload's thread as it ended, as the process does as it exits.
    assert time.monotonic() - begun >= 1.0
    [body] = ThreadStorage.bucket.values()
    assert len(body.splitlines()) == 2


def test_a_forced_stop_waits_for_no_thread_that_never_began(caplog, monkeypatch):
    """Scrapy hands a thread its upload in a task of its own, begun at the loop's next turn: a
    forced stop just before that turn waited UPLOAD_WAIT_S for a thread that never began, and
    said the feed not confirmed. The thread has its upload as the close begins."""
    monkeypatch.setattr("focused.feeds.UPLOAD_WAIT_S", 3.0)
    ThreadStorage.bucket.clear()
    begun = time.monotonic()
    lines, counts = asyncio.run(
        forced_stop_in_upload(caplog, 2, False, ThreadStorage, at="close begun")
    )
    assert lines == [
        "the forced stop waits up to 3 s for 1 feed upload under way",
        "the feed blocking://***@127.0.0.1/p-1.jsonl was uploaded at the forced stop, with its"
        " 2 pages",
    ]
    assert time.monotonic() - begun < 3.0
    assert counts == {"success_count": 1, "failed_count": 0, "unconfirmed_count": 0}
    [body] = ThreadStorage.bucket.values()
    assert len(body.splitlines()) == 2


@pytest.mark.parametrize("close", [False, True])
def test_a_forced_stop_leaves_be_an_upload_scrapy_counted(caplog, close):
    """Scrapy counts an upload as it ends, then awaits the ``feed_slot_closed`` handlers: a
    forced stop while one ran said the feed uploaded, and counted it a second time in
    ``feedexport/success_count``."""
    ThreadStorage.bucket.clear()
    lines, counts = asyncio.run(
        forced_stop_in_upload(caplog, 0 if close else 2, close, ThreadStorage, at="slot closed")
    )
    assert lines == []
    assert counts == {"success_count": 1, "failed_count": 0, "unconfirmed_count": 0}


def test_a_page_after_the_forced_stop_is_in_no_feed_and_no_traceback(caplog, tmp_path):
    """A page that leaves the pipelines in the loop turn the reactor stopped in, after the
    forced stop ended the feeds: written to a closed file, it was a ValueError traceback."""
    feed = tmp_path / "pages.json"
    crawler = get_crawler(Spider, {"FEEDS": {str(feed): {"format": "json"}}})
    crawler.spider = spider = crawler._create_spider("pages")
    crawler.stats.open_spider()
    exporter = FeedExporter(crawler)
    exporter.open_spider(spider)
    exporter.item_scraped(PageItem(url="http://a.test/1", title="A"), spider)
    exporter._end_at_forced_stop()
    with caplog.at_level(logging.INFO, logger="focused.feeds"):
        for number in (2, 3):
            exporter.item_scraped(PageItem(url=f"http://a.test/{number}", title="A"), spider)
    assert [page["url"] for page in json.loads(feed.read_text())] == ["http://a.test/1"]
    lines = [record.getMessage() for record in caplog.records if record.name == "focused.feeds"]
    assert lines == ["a page came after the forced stop ended the feeds: not in them"]


def test_a_forced_stop_ends_a_full_local_batch_whose_close_had_not_begun(caplog, tmp_path):
    """A full batch's close is a task the loop runs at its next turn: a forced stop before it
    left the batch's file without its end (a JSON feed without its closing bracket), and said
    nothing."""
    uri = str(tmp_path / "p-%(batch_id)d.json")

    async def stop() -> tuple[dict, list[str]]:
        return forced_stop(caplog, {uri: {"format": "json", "batch_item_count": 2}}, pages=3)

    stats, lines = asyncio.run(stop())
    assert lines == [
        f"the feed {tmp_path}/p-1.json was ended at the forced stop, with its 2 pages",
        f"the feed {tmp_path}/p-2.json was ended at the forced stop, with its 1 page",
    ]
    first, second = (json.loads((tmp_path / f"p-{n}.json").read_text()) for n in (1, 2))
    assert [page["url"] for page in first + second] == [f"http://a.test/{n}" for n in range(3)]
    assert not [key for key in stats if key.startswith("feedexport/failed_count/")]


def test_a_forced_stop_says_a_full_batch_to_upload_whose_close_had_not_begun(caplog):
    """Its upload, a task the loop had not begun, never begins: it was said to be under way, and
    "may not be stored"."""
    uri = "ftp://alice:s3cret@127.0.0.1:21/p-%(batch_id)d.jsonl"

    async def stop() -> tuple[dict, list[str]]:
        return forced_stop(caplog, {uri: {"batch_item_count": 2}}, pages=2)

    stats, lines = asyncio.run(stop())
    assert lines == [
        "the feed ftp://***@127.0.0.1:21/p-1.jsonl was not uploaded at the forced stop, nor the"
        " 2 pages it got"
    ]
    assert stats["feedexport/failed_count/FTPFeedStorage"] == 1


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("ftp://alice:s3cret@host/pages.jsonl", "ftp://***@host/pages.jsonl"),
        ("ftp://alice:s3@cr@t@host:21/p.jsonl", "ftp://***@host:21/p.jsonl"),
        ("redis://:hush@hush@127.0.0.1:6379/0", "redis://***@127.0.0.1:6379/0"),
        ("redis://127.0.0.1:6379/0?password=hush", "redis://127.0.0.1:6379/0?password=***"),
        # A custom feed storage's credentials in the query: a signed S3 or GCS URL, Azure's
        # SAS, keys and tokens.
        (
            "s3://bucket/p.jsonl?X-Amz-Credential=AKIA&X-Amz-Signature=ab12&X-Amz-Date=2026",
            "s3://bucket/p.jsonl?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Date=2026",
        ),
        (
            "s3://bucket/p.jsonl?aws_access_key_id=AKIA&aws_secret_access_key=wJal",
            "s3://bucket/p.jsonl?aws_access_key_id=***&aws_secret_access_key=***",
        ),
        ("azure://acct/c/p.jsonl?sv=2024&sig=Zm9v", "azure://acct/c/p.jsonl?sv=2024&sig=***"),
        ("https://h/p?access_token=t0k&api_key=k3y", "https://h/p?access_token=***&api_key=***"),
        # A MongoDB URI's AWS session token, among properties that name no secret.
        (
            "mongodb://h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:"
            "FwoG%2Fab%3D%3D",
            "mongodb://h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:***",
        ),
        (
            "mongodb://h/?authMechanismProperties=SERVICE_NAME:mongo,AWS_SESSION_TOKEN:t0k,"
            "CANONICALIZE_HOST_NAME:true&tls=true",
            "mongodb://h/?authMechanismProperties=SERVICE_NAME:mongo,AWS_SESSION_TOKEN:***,"
            "CANONICALIZE_HOST_NAME:true&tls=true",
        ),
        (
            "{'MONGO_URI': 'mongodb://h/?authmechanismproperties=AWS_SESSION_TOKEN%3At0k%2C"
            "SERVICE_NAME%3Amongo', 'X': 'a,b'}",
            "{'MONGO_URI': 'mongodb://h/?authmechanismproperties=AWS_SESSION_TOKEN%3A***%2C"
            "SERVICE_NAME%3Amongo', 'X': 'a,b'}",
        ),
        # What names no secret stays, a file of keys too: the messages about it name it.
        (
            "rediss://h:6379/0?ssl_keyfile=/etc/k.pem&db=1",
            "rediss://h:6379/0?ssl_keyfile=/etc/k.pem&db=1",
        ),
        ("two: ftp://a:b@h1/x and ftp://c@h2/y", "two: ftp://***@h1/x and ftp://***@h2/y"),
        ("{'ftp://a:b@h1': 1, 'x@y': 2}", "{'ftp://***@h1': 1, 'x@y': 2}"),
    ],
)
def test_a_uri_is_shown_without_its_credentials(uri, shown):
    assert redact_uri(uri) == shown
