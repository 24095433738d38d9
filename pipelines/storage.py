"""Write the crawl record when the spider opens, each page record before its item leaves the
pipeline, and the crawl's outcome when it closes.

A page is written before ``process_item`` returns, so that a crawl killed with ``kill -9``
loses no page it has finished (``focused.resume``): records that arrive while a write is under
way (MongoDB, in a worker thread) wait for it and go together in the next write (group commit),
up to STORAGE_BATCH_SIZE at a time. SQLite writes each page alone; in WAL mode with
``synchronous=NORMAL`` a commit costs no fsync (see BENCHMARKS.md for the measured cost).

Settings:
    STORAGE_BATCH_SIZE   most page records per write (default 50)
    STORAGE_RETRIES      retries of a failed write before giving up (default 3)
    STORAGE_RETRY_DELAY  seconds before the first retry, doubled for each next one up to
                         RETRY_WAIT_MAX, 5 minutes (default 1.0)
    FOCUSED_HEARTBEAT_INTERVAL  seconds between refreshes of the crawl record's ``seen_at``
                         (default 30)
    FOCUSED_UNSTORED_DIR where the records the store could not take at the close are kept
                         (default: the folder of FOCUSED_DB; ``focused.unstored``)
plus the settings of ``focused.storage.open_store`` (MONGO_URI, MONGO_DATABASE,
MONGO_TIMEOUT_MS, FOCUSED_DB).

Stats: ``focused/stored`` (page records written), ``focused/unstored`` (page records that could
not be written at the close: the crawl then ends as ``store_unreachable``, whatever closed the
spider, such as its page budget reached while the store was being retried),
``focused/unstored_spilled`` (of which kept in the file of unstored records),
``focused/refused`` (page records the store refused for a value it cannot hold).

Threads: a store that says it is ``threadsafe`` (MongoDB) is called in worker threads, so that a
round trip to the server never stalls the reactor; SQLite is fast and its connection belongs to
the thread that opened it, so it is called inline. Either way batches are written one at a time
and in order, by a single writer (``_drain``).

Heartbeat: a crawl killed outright (``kill -9``, a power cut, the OOM killer) cannot record how
it ended, and its record would say ``running`` for good. So while the spider is open the
record's ``seen_at`` is refreshed every FOCUSED_HEARTBEAT_INTERVAL seconds (one small update,
whatever the pages), and ``scrapy crawls`` shows a ``running`` record silent for longer than
``focused.report.STALE_BEATS`` intervals as stopped. Each process of a shared crawl refreshes
the same record.

A second Ctrl-C stops the reactor without closing the spider: no ``close_spider``, no
``spider_closed``. A reactor ``before shutdown`` trigger then records the crawl as
``interrupted`` with reason ``forced_shutdown`` and its counts so far, one try, no retries.
Scrapy's own shutdown trigger keeps the reactor running until its engine stops: a page stored
meanwhile updates those counts. Once the reactor has stopped (``after shutdown``), no write
starts any more, and the records no write stored (a write being retried) go to the file of
unstored records, as at a close. A batch a worker thread is writing then is waited for, up to
FORCED_STOP_WAIT seconds: kept in the file only if the store refused it, or, said so, if it
did not answer by then (stored or not; ``scrapy restore`` leaves a page stored since as it is).

While a write is retried the engine is paused: no new request is sent, so no page is fetched
only to wait in memory for a store that may not come back. The first write that succeeds
unpauses it.

If a write still fails after the retries, the spider is closed with reason
``store_unreachable`` (the crawl record then says ``interrupted``) and ``process_item`` raises
the ``StoreError``, so the page is not counted as done (``item_error``; under JOBDIR its
request stays in flight and is fetched again on resume); the records not written get one more
try at close. Those that fail it too are not lost: they are written to a file of unstored
records (``focused.unstored``, in FOCUSED_UNSTORED_DIR), as is the crawl record's outcome if the
store cannot take that either, and ``scrapy restore FILE`` loads them into the store. Only a
file that cannot be written either (a read-only folder, a full disk) leaves them lost, said in
the log, with how many it took before the disk filled up. Scrapy's scraper logs each page not
stored with its record and the traceback, a hundred lines a page: that is the error's one line
here, which names the page.

A crawl record the store cannot take as the spider opens (its retries spent) closes the spider
alike, ``store_unreachable``, in one line, before anything is fetched: nothing to keep.

A record the store refuses for a value it cannot hold (``RecordRefused``: an integer over 64
bits, text that is no UTF-8), where the store itself is fine, fails no other: its batch is
written again one record at a time, and the record refused is kept in a file of its own
(``refused-*.jsonl``: ``scrapy restore`` checks a file whole, and its line, until mended, would
hold back the records of the file of unstored records), said in one warning line; its item is
dropped, the crawl goes on. Retrying it would fail alike, and it blocked every record after it.

A page is not stored once its JOBDIR can no longer be written, nor once a shared crawl lost
Redis (``focused.distributed``): its request stays in flight there, and the page is fetched
again, and stored then, when the crawl resumes.

Under JOBDIR the pipeline also brings ``spider.state`` up to the stored pages when the spider
opens (``focused.resume.recover_state``): Scrapy saves that state only on a clean close.
"""

from __future__ import annotations

import logging
import os
import shlex
import threading
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.core import scraper
from scrapy.exceptions import CloseSpider, DropItem
from scrapy.utils.asyncio import run_in_thread, sleep
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from scrapy.utils.reactor import is_reactor_installed
from twisted.internet import task
from twisted.internet.defer import Deferred

from focused.engine import wake_engine
from focused.errors import counted, cut, one_line, redact_uri
from focused.jobchecks import holds_crawl_lock
from focused.jobdir import JOBDIR_UNWRITABLE, jobdir_writes
from focused.logformatter import add_log_filter
from focused.resume import (
    RECOVER_FIELDS,
    crawl_counter,
    journaled_window,
    not_stored_urls,
    recover_state,
    relearn,
    stored_under_urls,
)
from focused.robotsmeta import is_noindex
from focused.stopping import (
    FORCED_SHUTDOWN,
    close_spider_now,
)
from focused.storage import (
    DEFAULT_MONGO_DATABASE,
    DEFAULT_SQLITE_PATH,
    PAGE_FIELDS,
    CrawlRunning,
    RecordRefused,
    RecrawlUnderWay,
    Store,
    StoreError,
    open_store,
    page_to_save,
    rescored,
    this_process,
)
from focused.unstored import PartlyKept, UnstoredFile, unstored_dir

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 50
DEFAULT_RETRIES = 3
DEFAULT_RETRY_DELAY = 1.0
# The longest wait between two retries of a write (unless STORAGE_RETRY_DELAY is longer), as
# RETRY_AFTER_MAX bounds a host's backoff: doubled without end, 40 retries waited up to 2**39 s
# (17,000 years) for the last, with the engine paused.
RETRY_WAIT_MAX = 300.0
DEFAULT_HEARTBEAT_INTERVAL = 30.0
# Seconds a forced stop waits for a batch a worker thread is writing: a server that answers does
# so in milliseconds, one gone away fails within MONGO_TIMEOUT_MS (5 s by default).
FORCED_STOP_WAIT = 5.0
STORE_UNREACHABLE = "store_unreachable"  # the close reason when the store cannot be written
# The close reason of a run of a crawl that a recrawl claimed as it started (nothing fetched).
RECRAWL_UNDER_WAY = "recrawl_under_way"
# Close reason of a run refused as it started: another process of its crawl is alive, where no
# lock tells it (focused.jobchecks.starts_unlocked).
CRAWL_RUNNING = "crawl_running"
UNSTORED = "focused/unstored"  # stat: page records the store could not take at the close
UNSTORED_SPILLED = "focused/unstored_spilled"  # stat: of which kept in the file for them
REFUSED = "focused/refused"  # stat: page records the store refused for their values
# stat: pages not stored once the JOBDIR could no longer be written (fetched again on resume)
JOBDIR_NOT_STORED = "focused/jobdir_unwritable/pages_not_stored"
# stat: pages not stored once a shared crawl lost Redis (fetched again when the crawl resumes)
FRONTIER_LOST_NOT_STORED = "focused/frontier_unreachable/pages_not_stored"

_T = TypeVar("_T")


def crawl_status(reason: str) -> str:
    """``finished`` when the crawl ended on its own or on a CLOSESPIDER_* limit."""
    return (
        "finished" if reason == "finished" or reason.startswith("closespider_") else "interrupted"
    )


def restore_command(path: Path, settings: Any) -> str:
    """The command that loads the file of unstored records ``path`` into the crawl's store,
    which it names: run without the crawl's store settings (a Scrapyd job's FOCUSED_DB is
    relative to Scrapyd's folder, the command runs in the repository), it looked in another
    store. A MongoDB URI with its user and password hidden: the log is no place for them."""
    words = ["scrapy", "restore", str(path)]
    uri = settings.get("MONGO_URI")
    if uri:
        words += ["-s", f"MONGO_URI={redact_uri(uri)}"]
        database = settings.get("MONGO_DATABASE")
        if database and database != DEFAULT_MONGO_DATABASE:
            words += ["-s", f"MONGO_DATABASE={database}"]
    else:
        db = os.path.abspath(settings.get("FOCUSED_DB") or DEFAULT_SQLITE_PATH)
        words += ["-s", f"FOCUSED_DB={db}"]
    return shlex.join(words)


class _UnstoredInOneLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], StoreError):
            record.msg, record.args = str(record.exc_info[1]), None
            record.exc_info = record.exc_text = None
        return True


class _Write:
    """One call of ``write``, as the thread that makes it sees it: whether it ended, and
    stored its batch of ``size`` records."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.ended = threading.Event()
        self.stored = False
        self.refused: list[tuple[dict[str, Any], RecordRefused]] = []  # the others stored


class StoragePipeline:
    unstored_kind = "page"  # what ``write`` is given, for the file of unstored records
    run_name = "crawl"  # for messages

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.batch_size = max(1, settings.getint("STORAGE_BATCH_SIZE", DEFAULT_BATCH_SIZE))
        self.retries = max(0, settings.getint("STORAGE_RETRIES", DEFAULT_RETRIES))
        self.retry_delay = settings.getfloat("STORAGE_RETRY_DELAY", DEFAULT_RETRY_DELAY)
        self.heartbeat_interval = settings.getfloat(
            "FOCUSED_HEARTBEAT_INTERVAL", DEFAULT_HEARTBEAT_INTERVAL
        )
        self.store: Store
        self.crawl_id: str
        self._buffer: list[dict[str, Any]] = []  # page records not yet written, oldest first
        self._added = 0  # page records ever buffered
        self._written = 0  # of which written
        self._writing = False  # a _drain is running
        self._waiting: list[Deferred[None]] = []  # process_item calls waiting for a _drain
        self._failed = False  # gave up on the store: no more retries, spider closing
        self._holding = False  # the engine is paused while the store is retried
        self._closing_spider: Deferred[None] | None = None  # keeps the close task referenced
        self._forced_stop_trigger: Any = None  # the reactor trigger of a forced stop
        self._stopped_forcibly = False  # a forced stop was recorded: later writes update it
        self._lock = threading.Lock()  # between the writing thread and the forced stop's end
        self._ended = False  # the reactor stopped (a forced stop): no write starts any more
        self._under_way: _Write | None = None  # the latest write of the batch first in _buffer
        self._refused_records: set[int] = set()  # id() of the records refused, for their items
        self._heartbeat: task.LoopingCall | None = None
        self._heartbeat_stopped: Deferred[Any] | None = None  # fires once a stopped loop is idle
        # The run's files of records kept, by prefix: "unstored" (the store refused them for
        # good) and "refused" (for their values); each made at its first record.
        self._kept_files: dict[str, UnstoredFile] = {}
        self._said_unreadable = False  # the store's first value read as unknown was logged
        # The crawl's start refused (a recrawl under way) or failed: nothing recorded.
        self._refused = False
        add_log_filter(scraper.__name__, _UnstoredInOneLine)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StoragePipeline:
        pipeline = cls(crawler)
        # The close reason reaches signal handlers only, not close_spider().
        crawler.signals.connect(pipeline.spider_closed, signal=signals.spider_closed)
        if crawler.settings.get("JOBDIR"):
            # After SpiderState (an extension, connected earlier) has loaded spider.state.
            crawler.signals.connect(pipeline.recover_state, signal=signals.spider_opened)
        return pipeline

    def recover_state(self, spider: Any) -> None:
        # The relevance model is saved with spider.state, at a clean close: it has learned the
        # pages up to this fetch order. One made anew (none saved, or one that could not be
        # read) has learned none.
        model = getattr(spider, "relevance", None)
        learned = spider.state.get("pages", 0) if model is not None and model.restored else 0
        # Read as they come: a list of the records held 80 MB for 200,000 pages. A read that
        # fails half way leaves spider.state as it was: recover_state sets it at the end.
        pages = self.store.iter_pages(self.crawl_id, order="fetch_order", fields=RECOVER_FIELDS)
        window = self.crawler.settings.getint("DRIFT_WINDOW")
        # The window's verdicts written through: the store lacks pages below STORE_MIN_RELEVANCE.
        jobdir = self.crawler.settings["JOBDIR"]
        verdicts = journaled_window(jobdir) if window and jobdir else ()
        fetched_not_stored = not_stored_urls(jobdir) if jobdir else ()
        # The URLs the pages stored under their rel=canonical were fetched at.
        fetched_as = stored_under_urls(jobdir) if jobdir else ()
        try:
            # The stored verdicts a --model recrawl moved are not the crawl's (unknown, taken
            # as none, in a record written before their count).
            moved = rescored(self.store.get_crawl(self.crawl_id) or {}) or 0
            recover_state(
                spider.state, pages, window, verdicts, moved, fetched_not_stored, fetched_as
            )
        except StoreError as exc:
            logger.warning("Cannot recover the crawl's counters from the store: %s", exc)
            return
        if model is not None and spider.state["pages"] > learned:
            self._relearn(model, learned, spider.state["pages"])
        self._say_unreadable()

    def _say_unreadable(self) -> None:
        """A value no crawl writes (a cell edited by hand, a record restored without it) was
        read as unknown: the crawl goes on without it, and says which, once, for whoever
        fixes it (the store names the first)."""
        if self.store.unreadable and not self._said_unreadable:
            logger.warning("%s", self.store.unreadable_warning("read"))
            self._said_unreadable = True

    def _relearn(self, model: Any, learned: int, last: int) -> None:
        """After a crash: the model learns the pages stored after ``learned`` (fetch order),
        at most the ``max_docs`` it keeps."""
        fields = ("fetch_order", "text", "language")
        limit = min(last - learned, model.max_docs)
        try:
            newest = self.store.pages(self.crawl_id, order="latest", limit=limit, fields=fields)
        except StoreError as exc:
            logger.warning("Cannot give the relevance model the stored pages: %s", exc)
            return
        # A page of unknown fetch order may have been learned already: it is left out.
        missing = [
            page
            for page in reversed(newest)
            if page["fetch_order"] is not None and page["fetch_order"] > learned
        ]
        relearned = relearn(model, missing)
        self.stats.set_value("focused/resume/pages_relearned", relearned)
        logger.info(
            "Relevance model: learned the %s stored since its last save (a crash)",
            counted(relearned, "page"),
        )

    async def open_spider(self) -> None:
        self.store = open_store(self.crawler.settings)
        record = self.crawler.spider.crawl_record() | {
            "heartbeat_interval": self.heartbeat_interval,
            # A shared crawl's processes beat in turn: one gone tells nothing of the others.
            "run_by": None if self.crawler.settings.get("FOCUSED_FRONTIER") else this_process(),
        }
        self.crawl_id = record["crawl_id"]
        refuse_live = getattr(self.crawler.spider, "starts_unlocked", False)
        locked = holds_crawl_lock(self.crawler.settings, self.crawl_id)
        try:
            await self._retrying(
                self.store.start_crawl, record, refuse_live=refuse_live, locked=locked
            )
        except RecrawlUnderWay as exc:
            # A recrawl claimed the crawl after focused.jobchecks.check_store read its record:
            # refused as there, and the spider closed before it fetches anything.
            from focused.report import being_recrawled

            logger.error("%s", being_recrawled(exc.crawl))
            self._refused = True
            raise CloseSpider(RECRAWL_UNDER_WAY) from None
        except CrawlRunning as exc:
            # Another run started since check_store read the record: refused alike.
            from focused.report import running_elsewhere

            logger.error("%s", running_elsewhere(exc.crawl["crawl_id"], exc.crawl))
            self._refused = True
            raise CloseSpider(CRAWL_RUNNING) from None
        except StoreError as exc:
            # The store failed its retries (a file another process keeps locked, a server that
            # takes no write): nothing was fetched, and the store holds no record of this run
            # to finish. One line and the close reason of a store that fails, where the error
            # went on as a traceback and the close wrote an outcome to the closed store.
            logger.error("%s; the crawl cannot start (%s)", exc, STORE_UNREACHABLE)
            self._refused = True
            raise CloseSpider(STORE_UNREACHABLE) from None
        self._say_unreadable()  # the record's first started_at, kept
        # The id scrapy report and -a crawl_id take, and the store a JOBDIR resume must be
        # given again (FOCUSED_DB is relative to the working directory).
        logger.info(
            "Crawl %s (%s): its pages go to the %s store at %s",
            self.crawl_id,
            record["strategy"],
            self.store.backend,
            self.store.location,
        )
        self._watch_forced_stop()
        self._start_heartbeat()

    def _watch_forced_stop(self) -> None:
        """Call ``forced_stop`` if the reactor stops with the spider open. Only under a reactor
        (not in a test driving the pipeline on asyncio alone): importing the reactor module
        would install Twisted's default one."""
        if is_reactor_installed():
            from twisted.internet import reactor

            self._forced_stop_trigger = reactor.addSystemEventTrigger(
                "before", "shutdown", self.forced_stop
            )

    def _unwatch_forced_stop(self) -> None:
        """The spider closed cleanly: its close records what ``forced_stop`` would have."""
        if self._forced_stop_trigger is not None:
            from twisted.internet import reactor

            reactor.removeSystemEventTrigger(self._forced_stop_trigger)
            self._forced_stop_trigger = None

    def _start_heartbeat(self) -> None:
        """Beat every ``heartbeat_interval`` seconds from now on. Only under a reactor (not in
        a test driving the pipeline on asyncio alone)."""
        if is_reactor_installed():
            self._heartbeat = task.LoopingCall(lambda: deferred_from_coro(self.beat()))
            self._heartbeat_stopped = self._heartbeat.start(self.heartbeat_interval, now=False)

    async def beat(self) -> None:
        """Say in the store that the crawl is alive (``heartbeat``). A failure is only logged:
        the next beat tries again (a LoopingCall would stop at an exception), and page writes
        have their retries."""
        try:
            await self._call(self.heartbeat)
        except StoreError as exc:
            logger.warning("%s", exc)

    def heartbeat(self) -> None:
        """Refresh the crawl record's ``seen_at``."""
        self.store.heartbeat(self.crawl_id)

    async def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None and self._heartbeat.running:
            self._heartbeat.stop()
            await maybe_deferred_to_future(self._heartbeat_stopped)  # a beat under way ends

    def forced_stop(self) -> None:
        """The reactor is stopping with the spider still open (a second Ctrl-C): record the
        crawl as interrupted rather than leave it ``running``. Records no write stored by the
        time the reactor has stopped (the user stopped a crawl stuck retrying the store) are
        then kept in the file of unstored records, as at a close (``keep_unstored``)."""
        self._keep_at_forced_stop()
        if self._crawl_goes_on("interrupted"):
            return
        self._stopped_forcibly = True
        outcome = self._forced_stop_outcome()
        try:
            self.store.finish_crawl(self.crawl_id, **outcome)
        except StoreError as exc:
            self._keep_outcome(outcome, exc)

    def _keep_at_forced_stop(self) -> None:
        """What a forced stop of any run does: no more beats, and once the reactor has stopped,
        the records no write stored kept in the file of unstored records (``keep_unstored``).
        Only under a reactor (not in a test driving the pipeline on asyncio alone)."""
        self._forced_stop_trigger = None
        if self._heartbeat is not None and self._heartbeat.running:
            self._heartbeat.stop()
        if is_reactor_installed():
            from twisted.internet import reactor

            reactor.addSystemEventTrigger("after", "shutdown", self.keep_unstored)

    def keep_unstored(self) -> None:
        """The reactor has stopped after a forced stop: keep in the file of unstored records
        the records no write stored. Until then the engine ran on, and they could still be
        written; from now on no write starts (``_write_batch``). A batch a worker thread is
        writing (MongoDB) is waited for, up to FORCED_STOP_WAIT seconds: the process ends once
        it does. Stored, it is not kept; still under way, it is kept, said to be stored or not,
        so that whoever restores it knows the store may hold it (then ``scrapy restore`` leaves
        it as stored)."""
        with self._lock:
            self._ended = True
            under_way = self._under_way
        stopped = f"the {self.run_name} was stopped ({FORCED_SHUTDOWN})"
        left = self._buffer
        if under_way is not None:
            if not under_way.ended.wait(FORCED_STOP_WAIT):
                self._keep_unwritten(
                    f"{stopped} while they were being written, and the store did not say"
                    f" within {FORCED_STOP_WAIT:g} s whether it took them",
                    left[: under_way.size],
                    certain=False,
                )
                left = left[under_way.size :]
            elif under_way.stored:  # a page it refused is kept as at any time, once
                refused, under_way.refused = under_way.refused, []
                for record, exc in refused:
                    self._keep_refused(record, exc)
                left = left[under_way.size :]
        if left:
            self._keep_unwritten(f"{stopped} while they waited", left)

    def _recount_forced_stop(self) -> None:
        """Pages stored after the forced stop was recorded: Scrapy's own shutdown trigger keeps
        the reactor running until its engine stops, and a page scored meanwhile is stored then.
        The record's counts take them in, or it said fewer pages than the store held. One try:
        the record already says how the crawl ended."""
        with suppress(StoreError):
            self.store.finish_crawl(self.crawl_id, **self._forced_stop_outcome())

    def _forced_stop_outcome(self) -> dict[str, Any]:
        return {"status": "interrupted", "finish_reason": FORCED_SHUTDOWN, **self._totals()}

    def page_record(self, item: Any) -> dict[str, Any]:
        """What ``write`` stores for an item."""
        adapter = ItemAdapter(item)
        record = {name: adapter.get(name) for name in PAGE_FIELDS}
        if record["duplicate_of"]:
            record["text"] = None  # stored once, with the page it duplicates
        elif is_noindex(record):
            record["text"] = None  # the page asked not to be indexed (focused.robotsmeta)
        # As the store keeps it (typed, its text cut to fit), so that the item leaves as stored.
        return page_to_save(record)

    def write(self, records: list[dict[str, Any]]) -> None:
        """Write a batch of page records (``focused.refresh`` updates pages instead)."""
        self.store.save_pages(records)

    async def process_item(self, item: Any) -> Any:
        jobdir = jobdir_writes(self.crawler)
        if jobdir is not None and jobdir.failure is not None:
            # The JOBDIR stays as kill -9 at its failure would have left it; the page's links
            # may not have reached its frontier. Its request is still in flight there: fetched
            # again on resume, and stored then (focused.jobdir).
            self.stats.inc_value(JOBDIR_NOT_STORED)
            raise DropItem("not stored: the JOBDIR can no longer be written", log_level="DEBUG")
        shared = getattr(self.crawler.spider, "shared", None)
        if shared is not None and shared.failed:
            # Its request stays in flight in Redis and is fetched again when the crawl resumes,
            # with a budget slot of its own; stored now as well, it stood beside the pages of
            # that slot, past the page budget, under a fetch order Redis gives again.
            self.stats.inc_value(FRONTIER_LOST_NOT_STORED)
            raise DropItem("not stored: the shared frontier's Redis is lost", log_level="DEBUG")
        record = self.page_record(item)
        # The item leaves as the record it is stored as, so that a feed (-O) gets the same
        # records: every field, and a duplicate without its text.
        ItemAdapter(item).update(record)
        self._buffer.append(record)
        self._added += 1
        position = self._added
        while self._written < position and not self._failed and not self._ended:
            if self._writing:  # ours goes with the next write
                waiting: Deferred[None] = Deferred()
                self._waiting.append(waiting)
                await maybe_deferred_to_future(waiting)
                continue
            try:
                await self._drain()
            except StoreError as exc:
                self._give_up(exc)
        if id(record) in self._refused_records:  # kept in the file of unstored records
            self._refused_records.discard(id(record))
            raise DropItem("not stored: the store refused it", log_level="DEBUG")
        if self._written < position and self._ended:  # in the file of unstored records
            raise DropItem(f"not stored: the {self.run_name} was stopped", log_level="DEBUG")
        if self._written < position:
            raise StoreError(f"page {record['url']} not stored yet: the store is unreachable")
        return item

    async def close_spider(self) -> None:
        # Every process_item has returned by now, so no _drain is running.
        try:
            await self._drain()
        except StoreError as exc:
            self._failed = True
            self._keep_unwritten(str(exc))

    async def spider_closed(self, reason: str) -> None:
        self._unwatch_forced_stop()
        await self._stop_heartbeat()  # before the store is closed
        if self._refused:  # no outcome of a run that never began (the record may be another's)
            self.store.close()
            return
        jobdir = jobdir_writes(self.crawler)
        if self._failed:
            # Pages were lost, whatever closed the spider (its budget may be reached while the
            # store is being retried): the crawl is recorded as the store's failure.
            reason = STORE_UNREACHABLE
        elif jobdir is not None and jobdir.broken:
            # A JOBDIR file could not be written, during the crawl or as it closed (a pause not
            # saved whole): the crawl resumes as after kill -9 (focused.jobdir).
            reason = JOBDIR_UNWRITABLE
            self.stats.set_value("finish_reason", reason)
        status = crawl_status(reason)
        if self._crawl_goes_on(status):
            self.store.close()
            return
        outcome = {"status": status, "finish_reason": reason, **self._totals()}
        try:
            await self._retrying(self.store.finish_crawl, self.crawl_id, **outcome)
        except StoreError as exc:
            self._keep_outcome(outcome, exc)
        finally:
            self.store.close()

    def _crawl_goes_on(self, status: str) -> bool:
        """Whether this process of a shared crawl stopped on its own (Ctrl-C, its store or
        browser failing) while others go on with the crawl: the record is then left to them,
        not marked interrupted under them. A crawl-wide end (``finished``: nothing pending
        anywhere, the budget spent) is always recorded: a process killed a moment before may
        still look alive."""
        shared = getattr(self.crawler.spider, "shared", None)
        if shared is None or status != "interrupted":
            return False
        others = shared.other_workers()
        if others:
            logger.info(
                "Crawl %s goes on in %s, where its end will be recorded",
                self.crawl_id,
                counted(others, "other process", "other processes"),
            )
        return bool(others)

    def _totals(self) -> dict[str, Any]:
        """The crawl's page counts for its record: the crawl's counters (a run resumed from
        JOBDIR may fetch no page, and its stats then hold none; in a crawl shared by several
        processes any process may close last: the counters are the crawl-wide ones)."""
        spider = self.crawler.spider
        pages, relevant = crawl_counter(spider, "pages"), crawl_counter(spider, "relevant")
        return {
            "pages": pages,
            "relevant": relevant,
            "harvest_rate": round(relevant / pages, 4) if pages else None,
        }

    async def _drain(self) -> None:
        """Write everything buffered, oldest first, up to ``batch_size`` records a write.

        The only writer (callers check ``_writing``), so batches never overlap or reorder. A
        batch leaves the buffer only once written; the callers waiting are woken after each.
        """
        self._writing = True
        try:
            while self._buffer:
                batch = self._buffer[: self.batch_size]
                if not await self._retrying(self._write_batch, batch):
                    break  # the reactor stopped: the batch is in the file of unstored records
                refused = self._under_way.refused if self._under_way else []
                self._under_way = None  # its batch leaves the buffer
                del self._buffer[: len(batch)]  # only appended to meanwhile
                self._written += len(batch)
                self.stats.inc_value("focused/stored", len(batch) - len(refused))
                for record, exc in refused:
                    self._keep_refused(record, exc)
                if self._stopped_forcibly:
                    self._recount_forced_stop()
        finally:
            self._writing = False
            waiting, self._waiting = self._waiting, []
            for waiter in waiting:
                waiter.callback(None)

    def _write_batch(self, batch: list[dict[str, Any]]) -> bool:
        """``write`` the batch, in the store's thread, and say whether it stored it
        (``_under_way``) to a forced stop ending meanwhile; False, writing nothing, once it
        ended: the batch is in the file of unstored records then."""
        with self._lock:
            if self._ended:
                return False
            self._under_way = under_way = _Write(len(batch))
        try:
            try:
                self.write(batch)
            except RecordRefused:
                under_way.refused = self._write_alone(batch)
            under_way.stored = True
        finally:
            under_way.ended.set()
        return True

    def _write_alone(
        self, batch: list[dict[str, Any]]
    ) -> list[tuple[dict[str, Any], RecordRefused]]:
        """Write each record of a batch the store refused for a value of one of them: the
        others are stored; the records refused, with why. The store failing meanwhile raises
        its StoreError, and the whole batch is retried (writes by (crawl_id, url): the same)."""
        refused = []
        for record in batch:
            try:
                self.write([record])
            except RecordRefused as exc:
                refused.append((record, exc))
        return refused

    def _keep_refused(self, record: dict[str, Any], exc: RecordRefused) -> None:
        """Keep a record the store refused in the file of refused records, said in a warning:
        the crawl goes on, the store being fine. Loaded back as it is, it would be refused
        again: ``scrapy restore`` refuses it until its line is mended."""
        self.stats.inc_value(REFUSED)
        self._refused_records.add(id(record))
        self._keep(
            self.unstored_kind,
            [record],
            f"page {cut(record['url'])} of crawl {self.crawl_id} was not stored: {exc}",
            refused=True,
        )

    def _keep_unwritten(
        self, why: str, records: list[dict[str, Any]] | None = None, *, certain: bool = True
    ) -> None:
        """Keep the records (by default every one buffered) in the file of unstored records;
        ``certain``: the store did not take them, rather than did not say whether it did."""
        records = self._buffer if records is None else records
        count = len(records)
        self.stats.inc_value(UNSTORED, count)
        records_of = "page record" if count == 1 else "page records"
        verb = ("was not" if count == 1 else "were not") if certain else "may not have been"
        failure = f"{count} {records_of} of crawl {self.crawl_id} {verb} stored: {why}"
        kept = self._keep(self.unstored_kind, records, failure)
        if kept:
            self.stats.inc_value(UNSTORED_SPILLED, kept)

    def _keep_outcome(self, outcome: dict[str, Any], exc: StoreError) -> None:
        failure = f"crawl {self.crawl_id} could not be recorded as {outcome['status']}: {exc}"
        self._keep("finish", [{"crawl_id": self.crawl_id, **outcome}], failure)

    def _keep(
        self, kind: str, records: list[dict[str, Any]], failure: str, *, refused: bool = False
    ) -> int:
        """Write records the store refused for good to the run's file of unstored records,
        and say so, with the store's failure, in one line; how many the file took (those it
        did not are lost: the disk full, the folder not writable...). ``refused``: for a value
        the store cannot hold, to the run's file of refused records, and a warning (the crawl
        goes on), which says the line needs mending."""
        # Refused records in a file of their own: restore checks a file whole (focused.unstored).
        prefix = "refused" if refused else "unstored"
        file = self._kept_files.get(prefix)
        if file is None:
            folder = unstored_dir(self.crawler.settings)
            file = self._kept_files[prefix] = UnstoredFile(folder, self.crawl_id, prefix=prefix)
        path = file.path
        command = f"`{restore_command(path, self.crawler.settings)}`"
        restore = (
            f"{command} loads it once its line is mended"
            if refused
            else f"load into the store with {command}"
        )
        try:
            file.add(kind, records)
        except (OSError, ValueError, TypeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else one_line(exc)
            kept = exc.kept if isinstance(exc, PartlyKept) else 0
            if kept:
                logger.error(
                    "%s; %d kept in %s (%s), the other %d not: %s",
                    failure,
                    kept,
                    path,
                    restore,
                    len(records) - kept,
                    reason,
                )
            else:
                logger.error("%s; not kept in %s either: %s", failure, path, reason)
            return kept
        level = logging.WARNING if refused else logging.ERROR
        logger.log(level, "%s; kept in %s: %s", failure, path, restore)
        return len(records)

    def _give_up(self, exc: StoreError) -> None:
        """Close the spider: crawling on would only pile up records that cannot be written."""
        self._failed = True
        logger.error("%s; closing the spider (%s)", exc, STORE_UNREACHABLE)
        self._closing_spider = close_spider_now(self.crawler, STORE_UNREACHABLE)

    async def _retrying(self, method: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Call a store method, retrying a StoreError after doubling delays, up to
        ``RETRY_WAIT_MAX`` (a server failing over, a locked file); once the store was given up
        on, try only once. While it is retried no new request is sent (``_hold_requests``)."""
        retries = 0 if self._failed else self.retries
        delay = self.retry_delay
        for attempt in range(1, retries + 1):
            try:
                result = await self._call(method, *args, **kwargs)
            except RecordRefused:
                raise  # the values: the same call fails again
            except StoreError as exc:
                logger.warning("%s; retry %d of %d in %.1f s", exc, attempt, retries, delay)
                self._hold_requests()
            else:
                self._release_requests()
                return result
            await sleep(delay)
            delay = min(2 * delay, max(RETRY_WAIT_MAX, self.retry_delay))
        result = await self._call(method, *args, **kwargs)
        self._release_requests()
        return result

    def _hold_requests(self) -> None:
        """Pause the engine: each page fetched while the store fails would wait in memory for a
        write that may never come, and be lost if the store is given up on (without JOBDIR,
        for good). Left as it is if something else paused it (a close, the telnet console)."""
        engine = self.crawler.engine
        if engine is None or engine.paused or self._holding:
            return
        engine.pause()
        self._holding = True
        logger.warning("The store is failing: no new request is sent until it answers")

    def _release_requests(self) -> None:
        if not self._holding or self._failed:  # given up on: the spider is closing
            return
        self._holding = False
        self.crawler.engine.unpause()
        wake_engine(self.crawler)  # rather than at the engine's next 5-second heartbeat
        logger.info("The store answers again: sending requests again")

    async def _call(self, method: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        if self.store.threadsafe:
            return await run_in_thread(method, *args, **kwargs)
        return method(*args, **kwargs)
