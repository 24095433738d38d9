"""Scrapy's feed export (``-o``/``-O``, FEEDS), with a feed that cannot be written told in one
line.

Scrapy opens a feed's file at the first page and writes each page as it leaves the pipelines.
When the disk fills (or the file cannot be made at all: ``/proc`` for root), each page's write
failed with a traceback, the crawl went on writing nothing to the feed and exited 0; a failure
that only showed as the buffered end of the file (or of a batch) was written, as it closed, was
a traceback too. Here the first failure of a feed is one error line, ``the feed URI cannot be
written: REASON``, the feed is dropped (its file closed as it is: what was written stays; with
batches, the batches to come too) and the spider is closed with reason ``feed_failed``, so the
crawl stops as it does when its store fails: the pages already stored stay, the crawl record
says ``interrupted (feed_failed)``, a JOBDIR resumes. A feed that fails as the crawl closes is
the same line, under the crawl's own close reason.

A second Ctrl-C stops the reactor without closing the spider, and Scrapy left each feed as it
was: a JSON feed without its closing bracket, an XML one without its root's end tag, neither
readable. Once the reactor has stopped, each feed in a local file (or on stdout) gets its end
written then, with the pages it got, in one line each, a full batch whose close Scrapy had
scheduled and not begun too; a feed to be uploaded (S3, FTP) cannot be, with no reactor left to
upload it: one line each says so (``was not uploaded at the forced stop``), and it counts as
failed. An upload under way (a full batch's, or one the close began) in a thread (S3's, FTP's,
GCS's: ``BlockingFeedStorage``) goes on as the reactor stops, and the process waits for it as it
exits: it is waited for here, ``UPLOAD_WAIT_S`` in all, and its end said (``was uploaded at the
forced stop``, counted stored; ``could not be uploaded``, counted failed). One that has not ended
by then, or that runs on the reactor (a storage's own), may be stored or not: one line says it
is ``not confirmed``, and it counts in ``feedexport/unconfirmed_count/<storage>``, not failed.
A page that leaves the pipelines after that, in the loop turn the reactor stopped in, is in no
feed, said in one line.

A feed that cannot be written, or is not uploaded at a forced stop, counts in Scrapy's stat
``feedexport/failed_count/<storage>``, as a feed Scrapy failed to store (an upload to S3,
FTP...) does, and the ``crawl`` command exits with status 1 when any feed failed. Scrapy logs
such a failure, at the close, with its traceback (an upload refused, a compressed feed's last
block that cannot be written): one line here too, with the reason. Its lines name the feed's
URI without its user and password.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from contextlib import suppress
from typing import IO, TYPE_CHECKING, Any

from scrapy.exporters import XmlItemExporter as ScrapyXmlItemExporter
from scrapy.extensions.feedexport import (
    BlockingFeedStorage,
    FileFeedStorage,
    StdoutFeedStorage,
)
from scrapy.extensions.feedexport import FeedExporter as ScrapyFeedExporter
from scrapy.extensions.postprocessing import PostProcessingManager
from scrapy.utils.asyncio import run_in_thread
from scrapy.utils.defer import ensure_awaitable
from scrapy.utils.reactor import is_reactor_installed

from focused.errors import counted, one_line, redact_uri
from focused.logformatter import add_log_filter
from focused.stopping import close_spider_now
from focused.storage import PAGE_FIELDS

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.extensions.feedexport import FeedSlot
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

FEED_FAILED = "feed_failed"  # the close reason when a feed cannot be written
FAILED_STAT = "feedexport/failed_count/"  # Scrapy's, followed by the storage's class name
STORED_STAT = "feedexport/success_count/"  # Scrapy's too
# A feed whose upload a forced stop cut off, neither seen to end nor to fail.
UNCONFIRMED_STAT = "feedexport/unconfirmed_count/"
# How long a forced stop waits, in all, for the uploads under way in a thread: the process waits
# for them anyway as it exits (Python joins the asyncio loop's executor threads), but a line
# written before then is what the log says of them.
UPLOAD_WAIT_S = 10.0
# The characters XML 1.0 cannot hold, not even as a character reference: the C0 controls but
# tab and the line breaks, the surrogates, U+FFFE and U+FFFF.
NOT_IN_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def feeds_failed(stats: StatsCollector) -> int:
    """How many feeds of the crawl could not be written or stored."""
    return sum(v for k, v in stats.get_stats().items() if k.startswith(FAILED_STAT))


class _StoringInOneLine(logging.Filter):
    """Scrapy's lines on storing a feed: a failure without its traceback, no URI's password."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in ("Error storing %s", "Stored %s"):
            record.args = tuple(redact_uri(str(arg)) for arg in record.args or ())
            if record.exc_info and record.exc_info[1] is not None:
                record.msg += ": %s"
                record.args += (one_line(record.exc_info[1]),)
                record.exc_info = record.exc_text = None
        return True


class _ThreadUpload:
    """The end of a feed's upload in a thread (BlockingFeedStorage's ``_store_in_thread``), seen
    from outside the reactor: a forced stop waits for it there."""

    def __init__(self, storage: BlockingFeedStorage) -> None:
        self.ended = threading.Event()
        self.error: BaseException | None = None
        store = storage._store_in_thread

        def store_seen(file: IO[bytes]) -> None:
            try:
                store(file)
            except BaseException as exc:
                self.error = exc
                raise
            finally:
                self.ended.set()

        storage._store_in_thread = store_seen  # type: ignore[method-assign]


class FeedExporter(ScrapyFeedExporter):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        add_log_filter(ScrapyFeedExporter.__module__, _StoringInOneLine)
        for options in self.feeds.values():
            if options["fields"] is None:
                # A page record's fields: without them a CSV feed's columns were the item's
                # declared fields, its transient scores too, a column always empty.
                options["fields"] = list(PAGE_FIELDS)
        self._failed: set[str] = set()  # the URIs (templates, for batches) of the feeds given up
        self._spider_closed = False
        self._closing_spider: Deferred[None] | None = None  # keeps the close task referenced
        # The feeds (batches) whose close is scheduled and not begun (a full batch's: an asyncio
        # task, run at the loop's next turn), out of self.slots: a forced stop before that turn
        # left a local batch without its end, and said nothing.
        self._closing: list[FeedSlot] = []
        # The feeds (batches) to be uploaded whose close has begun and whose upload has not
        # ended (Scrapy counts it then): out of self.slots, unseen by a forced stop, which cut
        # their upload short without a word.
        self._uploading: list[FeedSlot] = []
        # The uploads run in a thread (BlockingFeedStorage's: S3, FTP, GCS), whose end a forced
        # stop can see without the reactor.
        self._threads: dict[FeedSlot, _ThreadUpload] = {}
        self._ended_at_forced_stop = False
        self._said_late_page = False

    def item_scraped(self, item: Any, spider: Spider) -> None:
        if self._ended_at_forced_stop:
            # Its feeds' files are ended, closed: written to, each page was a ValueError
            # traceback. A page left the pipelines in the loop turn the reactor stopped in.
            if not self._said_late_page:
                logger.warning("a page came after the forced stop ended the feeds: not in them")
                self._said_late_page = True
            return
        # Scrapy's export, handed one feed at a time, so that the one that fails is known and
        # the others still get the page.
        kept: list[FeedSlot] = []
        for slot in self.slots:
            if slot.uri_template in self._failed:  # the batch before this one failed to close
                self._discard(slot)
                continue
            self.slots = [slot]
            try:
                super().item_scraped(item, spider)
            except OSError as exc:
                self._give_up(slot, exc)
                continue
            kept.extend(self.slots)  # the slot, or the next batch's that replaced it
        self.slots = kept

    def open_spider(self, spider: Spider) -> None:
        super().open_spider(spider)
        # Only under a reactor (not in a test driving the exporter on asyncio alone):
        # importing the reactor module would install Twisted's default one.
        if is_reactor_installed():
            from twisted.internet import reactor

            reactor.addSystemEventTrigger("after", "shutdown", self._end_at_forced_stop)

    def _end_at_forced_stop(self) -> None:
        """The reactor has stopped with the spider still open (a second Ctrl-C): no page comes
        any more, and the feeds whose storage is a write of their own (a local file, stdout)
        get their end, as at a close, a full batch whose close had not begun too. The others
        (S3, FTP) are not uploaded, each said in a line and counted as failed: only the docs
        said so, and the log nothing. An upload under way (a full batch's, or one the close
        began) is waited for a while where it runs in a thread, which goes on as the reactor
        stops: its end is said (uploaded, or failed), else that it is not confirmed."""
        left = self._closing + ([] if self._spider_closed else self.slots)
        self._closing = []  # a close begun after this one finds its slot ended or said
        self._ended_at_forced_stop = True
        self._spider_closed = True  # for good: a feed that fails below closes no spider
        uploads, self._uploading = self._uploading, []
        for slot in left:
            if slot.uri_template in self._failed or not self._stored_at_close(slot):
                continue
            if not self._written_here(slot):
                # Its upload would run in a task of the reactor's, which has stopped.
                logger.warning(
                    "the feed %s was not uploaded at the forced stop, nor the %s it got",
                    redact_uri(slot.uri),
                    counted(slot.itemcount, "page"),
                )
                self._count_failed(slot)
                self._discard(slot)
                continue
            if not slot.itemcount:
                continue
            try:
                slot.finish_exporting()
                slot.storage.store(self._get_file(slot))
            except OSError as exc:
                self._give_up(slot, exc)
                continue
            logger.info(
                "the feed %s was ended at the forced stop, with its %s",
                redact_uri(slot.uri),
                counted(slot.itemcount, "page"),
            )
        self._confirm_uploads(uploads)

    def _confirm_uploads(self, uploads: list[FeedSlot]) -> None:
        """Said "failed", an upload in a thread was often stored all the same: the thread goes
        on as the reactor stops, and the process waits for it as it exits. Each is waited for,
        UPLOAD_WAIT_S in all, and what is known said: uploaded, failed, or not confirmed (one
        on the reactor, or a thread still running), which is counted apart."""
        running = [s for s in uploads if s in self._threads and not self._threads[s].ended.is_set()]
        if running:  # else the wait after the second Ctrl-C would be silent
            logger.info(
                "the forced stop waits up to %g s for %s under way",
                UPLOAD_WAIT_S,
                counted(len(running), "feed upload"),
            )
        deadline = time.monotonic() + UPLOAD_WAIT_S
        for slot in uploads:
            thread = self._threads.get(slot)
            storage = type(slot.storage).__name__
            if thread is not None and thread.ended.wait(max(0.0, deadline - time.monotonic())):
                if thread.error is None:
                    logger.info(
                        "the feed %s was uploaded at the forced stop, with its %s",
                        redact_uri(slot.uri),
                        counted(slot.itemcount, "page"),
                    )
                    self.crawler.stats.inc_value(f"{STORED_STAT}{storage}")
                else:
                    logger.error(
                        "the feed %s could not be uploaded at the forced stop: %s",
                        redact_uri(slot.uri),
                        one_line(thread.error),
                    )
                    self._count_failed(slot)
                continue
            logger.warning(
                "the feed %s was being uploaded at the forced stop, with the %s it got: not"
                " confirmed, it may be stored or not",
                redact_uri(slot.uri),
                counted(slot.itemcount, "page"),
            )
            self.crawler.stats.inc_value(f"{UNCONFIRMED_STAT}{storage}")

    async def close_spider(self, spider: Spider) -> None:
        self._spider_closed = True
        await super().close_spider(spider)

    def _start_new_batch(self, *args: Any, **kwargs: Any) -> FeedSlot:
        slot = super()._start_new_batch(*args, **kwargs)
        if isinstance(slot.storage, BlockingFeedStorage):
            self._threads[slot] = _ThreadUpload(slot.storage)
        return slot

    def _schedule_slot_close(self, slot: FeedSlot, spider: Spider) -> Any:
        # From here the slot is out of self.slots: a forced stop finds it here, then (once its
        # close has begun) in self._uploading.
        self._closing.append(slot)
        return super()._schedule_slot_close(slot, spider)

    async def _close_slot(self, slot: FeedSlot, spider: Spider) -> None:
        try:
            self._closing.remove(slot)
        except ValueError:  # a forced stop ended it, or said it, already
            return
        failed = slot.uri_template in self._failed
        if not failed and self._stored_at_close(slot) and not self._written_here(slot):
            self._uploading.append(slot)
            self._watch_upload(slot)
        try:
            await self._end_slot(slot, spider)
        finally:
            with suppress(ValueError):  # not an upload, or one a forced stop said already
                self._uploading.remove(slot)
            self._threads.pop(slot, None)

    def _watch_upload(self, slot: FeedSlot) -> None:
        """The feed's upload, as Scrapy's close awaits it, ends its time in self._uploading: Scrapy
        counts it then, in the same step, and goes on to the ``feed_slot_closed`` handlers, a
        forced stop in which counted it a second time. One in a thread is handed to it at once:
        Scrapy's BlockingFeedStorage.store hands it over in a task of its own, begun at the
        loop's next turn, which a forced stop may never let come (it then waited UPLOAD_WAIT_S
        for a thread that never began)."""
        storage = slot.storage
        store = storage.store
        in_thread = type(storage).store is BlockingFeedStorage.store

        async def upload(file: IO[bytes]) -> None:
            try:
                if in_thread:
                    await run_in_thread(storage._store_in_thread, file)
                else:
                    await ensure_awaitable(store(file))
            finally:
                with suppress(ValueError):  # one a forced stop said already
                    self._uploading.remove(slot)

        storage.store = upload

    @staticmethod
    def _stored_at_close(slot: FeedSlot) -> bool:
        """Whether a close stores the feed (Scrapy's _close_slot): not one of no page with
        store_empty off, nor the batch begun after a full one."""
        return bool(slot.itemcount) or (slot.store_empty and slot.batch_id == 1)

    @staticmethod
    def _written_here(slot: FeedSlot) -> bool:
        """Whether the feed's storage is a write of its own, done as it is stored: a local file,
        stdout; not an upload (S3, FTP), run in a thread or on the reactor."""
        return isinstance(slot.storage, FileFeedStorage | StdoutFeedStorage)

    async def _end_slot(self, slot: FeedSlot, spider: Spider) -> None:
        if slot.uri_template in self._failed:
            self._discard(slot)
            return
        # The end of the feed (or batch) is written here, where a failure is one line: Scrapy
        # would write it as it stores the file, and log a failure there with its traceback.
        if slot.itemcount:
            try:
                slot.finish_exporting()
                self._target(slot).flush()
            except OSError as exc:
                self._give_up(slot, exc)
                return
        await super()._close_slot(slot, spider)

    def _give_up(self, slot: FeedSlot, exc: OSError) -> None:
        self._failed.add(slot.uri_template)
        logger.error("the feed %s cannot be written: %s", redact_uri(slot.uri), exc.strerror or exc)
        self._count_failed(slot)
        self._discard(slot)
        if not self._spider_closed and self._closing_spider is None:
            self._closing_spider = close_spider_now(self.crawler, FEED_FAILED)

    def _count_failed(self, slot: FeedSlot) -> None:
        """In Scrapy's stat of the feeds of its storage that it failed to store."""
        self.crawler.stats.inc_value(f"{FAILED_STAT}{type(slot.storage).__name__}")

    @classmethod
    def _discard(cls, slot: FeedSlot) -> None:
        """Close the feed's file as it is: its unwritten buffer would otherwise fail again,
        unhandled, when the file is collected."""
        if slot.file is None:
            return
        for file in (slot.file, cls._target(slot)):
            with suppress(OSError):
                file.close()

    @staticmethod
    def _target(slot: FeedSlot) -> Any:
        """The file the feed's bytes go to, under its compression (``postprocessing``), if any."""
        file = slot.file
        return file.file if isinstance(file, PostProcessingManager) else file


class XmlItemExporter(ScrapyXmlItemExporter):
    """Scrapy's XML feed (``FEED_EXPORTERS``), each character XML cannot hold written as U+FFFD.
    Scrapy wrote a page's control characters as they came (an escape or a vertical tab in its
    title or text, which browsers show as nothing), and no XML parser read the file past the
    first of them."""

    def serialize_field(self, field: Mapping[str, Any], name: str, value: Any) -> Any:
        value = super().serialize_field(field, name, value)
        # A page record's fields are flat: text, numbers, truth values or none.
        return NOT_IN_XML.sub("\ufffd", value) if isinstance(value, str) else value
