"""Crash-safe resume: after ``kill -9`` a JOBDIR crawl continues and loses nothing.

What a crash can cut off, and where it is kept instead:

- **The frontier** (``schedulers.base.SqliteFrontier``): every change is committed at once.
- **Requests in flight**: ``FocusedScheduler`` records each request it hands to the downloader
  in the frontier file's ``inflight`` table, in the transaction that pops it, and moves it to
  ``finished`` once its outcome is safe: its page left the item pipelines (``item_scraped``,
  ``item_dropped``), its response held no page, its download failed (``request_finished``,
  sent by ``FinishMiddleware`` and the spider's errback), the callback raised
  (``spider_error``), or a redirect or retry of it was queued. On restart the requests still
  in flight are queued again, but for those whose response the page budget counted (below),
  which are fetched again before any other: only they can be fetched twice.
- **Pages** (``pipelines.storage``): an item is written before it leaves the pipeline.
  ``FinishMiddleware`` hands a page's links to the scheduler before the page item, so a stored
  page always has its links queued. A page below STORE_MIN_RELEVANCE is counted, its URL
  kept and its verdict written in one commit of ``JOBDIR/counters.sqlite3`` as it leaves
  the pipelines (``CrawlCounters.page_dropped``). A page to be stored under its rel=canonical
  has the URL it was fetched at kept with that one before the store writes it
  (``CrawlCounters.stored_under_canonical``). Fetched again after a kill, a page stored or so
  counted is skipped as already fetched (``focused.dedup``): it is scored and counted once.
- **The seen set**: ``FrontierDupeFilter`` keeps no ``requests.seen`` file (Scrapy's is
  buffered, so a crash loses its tail); the seen fingerprints are those of the frontier file
  (queued, in flight, finished), which change in the same transactions as the queue.
- **Trap-family counts** (``focused.traps.SqliteCounts``): ``JOBDIR/trapfamilies.sqlite3``,
  every change committed at once.
- **Counters** in ``spider.state`` (Scrapy saves it only on a clean close; ``SpiderState``
  writes it whole or not at all, and reads one cut short as missing): ``recover_state``
  takes fetch order, relevant pages, canonical URLs and per-host counts back from the store.
  The counters the store cannot show, the page budget's ``responses`` (a response that gave
  no page leaves no record) and the discovery order ``discovered`` (the store holds no
  ``discovery``), are written through to ``JOBDIR/counters.sqlite3`` as they change
  (``CrawlCounters``), so that the budget counts every response fetched before the crash and
  links found after it are numbered after those queued before it. A request in flight whose
  response was counted is marked so in the ``inflight`` table (``response_counted``), so that
  fetched again after the crash it is not counted twice; it stays there, and the scheduler
  hands it out before any other request, the budget spent or not: queued again in the
  strategy's order, it could be passed over until the budget ran out, its page never stored.
- **Failed robots.txt** (``focused.robots``): each host's failures in a row and when it may be
  fetched again, in ``spider.state`` too, are written through to the ``robots_failures`` table
  of ``JOBDIR/counters.sqlite3`` as each changes (``CrawlCounters``; a row a host whose
  robots.txt is failing: nothing a page), so that the resumed run holds the host's requests
  until then and goes on counting, as after a pause: it asked the failing server again at
  once, and counted from 0 again, at each crash.
- **The topic-drift window** (DRIFT_WINDOW): the last pages' verdicts, in ``spider.state``
  too, are written through to the ``drift_window`` table of ``JOBDIR/counters.sqlite3``, each
  once its page has left the pipelines (``CrawlCounters``): rebuilt from the store, the window
  of a crawl that stores only its best pages (STORE_MIN_RELEVANCE) held only those, and drifted
  late. The fetch order goes on after the last verdict written (``recover_state``), the table
  keeps its last DRIFT_WINDOW rows whatever orders a crash left unused, and the row of a page
  the store refused names its request, which a kill before its finish leaves to be fetched
  and scored again: the window rebuilt leaves that row out, and the page's next verdict
  replaces it (``CrawlCounters.page_dropped``); until then it takes no place of the last rows.
- **The topic**: the relevance model is saved only on a clean close, and the seeds are not
  fetched again; their texts are appended to ``JOBDIR/topic.jsonl`` as they join the topic
  (``TopicJournal``) and rejoin it on restart. The pages stored after the model's save are
  read back from the store and learned again (``relearn``, at most ``RELEVANCE_MAX_DOCS``).

Stats: ``focused/resume/recovered_inflight`` (requests queued again after a crash),
``focused/resume/counted_refetched`` (requests fetched again first, their response counted),
``focused/resume/topic_texts_restored`` (seed texts back in the topic),
``focused/resume/pages_relearned`` (stored pages the relevance model learned again),
``focused/resume/damaged_requests`` (requests of the frontier file that could not be read
back, dropped: ``schedulers.base.SqliteFrontier``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import pickle
import sqlite3
from collections import Counter, OrderedDict, deque
from contextlib import closing, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.dupefilters import RFPDupeFilter
from scrapy.exceptions import NotConfigured
from scrapy.extensions.spiderstate import SpiderState as ScrapySpiderState

from focused.errors import JSONTooDeep, counted, load_json, one_line
from focused.items import PageItem, PageOutputMiddleware
from focused.jobdir import JobdirUnwritable, jobdir_writes, write_whole
from pipelines.relevance import NotStored
from schedulers.base import FRONTIER_FILE, QUEUE_DIR, connect_crash_safe

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from focused.jobdir import GuardedConnection, JobdirWrites
    from focused.relevance import RelevanceModel

# Signal: request_finished(request). The request's outcome is safe; it need not be fetched
# again after a crash.
request_finished = object()


# Signal: response_counted(request). The page budget counted the response to ``request``
# (focused.stopping.PageBudget); under JOBDIR the scheduler marks it so in the frontier file.
response_counted = object()


# Signal: counted_refetched(). The scheduler handed out the last of the requests a crash left in
# flight with their response counted (``SqliteFrontier.counted_inflight``), which it fetches
# again before any other: the page budget, if spent, can close the crawl now.
counted_refetched = object()


# Signal: links_yielded(page, links). FinishMiddleware hands the link requests of a page (its
# response's request; none for a page without links) to the scraper, which queues them one by
# one; once the last is queued the page is scored (focused.scheduler).
links_yielded = object()


# Signal: page_scored(is_relevant, relevant, fetch_order). The scoring middleware scored a page
# (focused.middlewares); ``relevant`` is the crawl's count of relevant pages with it (in a shared
# crawl, the crawl-wide one). The stop criteria (focused.stopping) read it.
page_scored = object()

# Signal: drift_verdict(is_relevant, fetch_order). A scored page joined the topic-drift window
# (``focused.stopping.StopCriteria``), which takes none once it has stopped the crawl: under
# JOBDIR ``CrawlCounters`` writes it through.
drift_verdict = object()


# Signal: stored_under_canonical(fetched_as, url). A page fetched at ``fetched_as`` (canonical)
# goes to the pipelines to be stored under ``url``, its rel=canonical (``focused.dedup``): under
# JOBDIR ``CrawlCounters`` keeps the pair before the store writes the page.
stored_under_canonical = object()


# Signal: counter_changed(name, value). A crawl counter of spider.state has a new value
# (``add_to_counter``).
counter_changed = object()
# Signal: robots_failure_changed(netloc, failures, retry). What spider.state keeps of a host's
# failed robots.txt has changed (``focused.robots``): its failures in a row and its retry, each
# None once it keeps none.
robots_failure_changed = object()
# Signal: host_pages_changed(host, pages). A host's count of requests that took one of its
# MAX_PAGES_PER_HOST slots has a new value (``focused.scheduler``).
host_pages_changed = object()

logger = logging.getLogger(__name__)

COUNTERS_FILE = "counters.sqlite3"  # under JOBDIR
TOPIC_FILE = "topic.jsonl"  # under JOBDIR
STATE_FILE = "spider.state"  # under JOBDIR: Scrapy's SpiderState.statefn
STATE_TEMP_FILE = f"{STATE_FILE}.tmp"  # under JOBDIR: SpiderState writes it, then renames it


class SpiderState(ScrapySpiderState):
    """Scrapy's ``JOBDIR/spider.state``, written to a temporary file and renamed: Scrapy wrote
    it in place, so a kill as a crawl closed left it cut short, and the resume logged a
    traceback. One that cannot be read (cut short so, or damaged), or that holds something else
    than the crawl's counters (``STATE_TYPES``), is taken as missing, as after a crash (whose
    counters come back from the store: ``recover_state``), in one warning."""

    def spider_closed(self, spider: Spider) -> None:
        if not self.jobdir:
            return
        written = Path(self.jobdir, STATE_TEMP_FILE)
        jobdir_writes(spider.crawler).save_at_pause(
            "the crawl's counters",
            written,
            lambda: write_whole(
                Path(self.statefn), written, lambda file: pickle.dump(spider.state, file, 4)
            ),
        )

    def spider_opened(self, spider: Spider) -> None:
        try:
            super().spider_opened(spider)
            reason = _state_problem(spider.state)
        except Exception as exc:  # unpickling damaged bytes raises about anything
            reason = one_line(exc)
        if reason is not None:
            logger.warning(
                "%s cannot be read (%s): the crawl resumes as after a crash", self.statefn, reason
            )
            spider.state = {}


# The key in ``spider.state`` of the topic-drift window (``focused.stopping.StopCriteria``):
# whether each of the last DRIFT_WINDOW pages scored was relevant, oldest first.
DRIFT_STATE = "drift_window"
# The key in ``spider.state`` of the failures in a row of each host whose robots.txt is failing
# (``focused.robots``), those that failed last last.
ROBOTS_FAILURES_STATE = "robots_failures"
# The key in ``spider.state`` of when each of those hosts may have its robots.txt fetched again:
# (its ``time.time()``, why it could not be fetched or None for a 5xx or 429, whether the host
# is there), so that a resumed run holds its requests until then (``focused.robots``).
ROBOTS_RETRY_STATE = "robots_retry"
# The key in ``spider.state`` of the fingerprints of the links the strategy left out by its
# parameter and no run has queued since (``focused.scheduler``), for a resume that runs dry.
LEFT_OUT_STATE = "links_left_out"
# The key in ``spider.state`` of whether a run left out more links than it kept
# (``focused.scheduler.LEFT_OUT_KEPT``): a resumed run that runs dry says "at least".
LEFT_OUT_PAST_KEPT_STATE = "links_left_out_past_kept"

# What spider.state holds that the crawl reads, by type: a valid pickle of another value (a
# list, a count of text) was a cascade of tracebacks and a crawl that never ended.
STATE_TYPES: dict[str, type] = {
    "pages": int,
    "responses": int,
    "relevant": int,
    "discovered": int,
    "not_stored": int,
    "not_stored_relevant": int,
    "fetched_urls": set,
    "host_pages": Counter,
    DRIFT_STATE: deque,
    ROBOTS_FAILURES_STATE: OrderedDict,
    ROBOTS_RETRY_STATE: OrderedDict,
    LEFT_OUT_STATE: set,
    LEFT_OUT_PAST_KEPT_STATE: bool,
}


def _state_problem(state: Any) -> str | None:
    """Why ``state``, unpickled from ``spider.state``, is not what a crawl saves (None: it is)."""
    if not isinstance(state, dict):
        return f"it holds a {type(state).__name__}, not a dict"
    for name, kind in STATE_TYPES.items():
        value = state.get(name)
        # True is an int too: no count.
        wrong = not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool)
        if value is not None and wrong:
            return f"its {name} is a {type(value).__name__}, not a {kind.__name__}"
    # What they hold: a count of text was a traceback at the host's next page.
    for url in state.get("fetched_urls", ()):
        if not isinstance(url, str):
            return f"its fetched_urls holds {url!r}, not a URL"
    for host, count in state.get("host_pages", {}).items():
        if not isinstance(host, str) or not _is_count(count):
            return f"its host_pages holds {host!r}: {count!r}, not a host and a count"
    for host, count in state.get(ROBOTS_FAILURES_STATE, {}).items():
        if not isinstance(host, str) or not _is_count(count):
            return f"its {ROBOTS_FAILURES_STATE} holds {host!r}: {count!r}, not a host and a count"
    for host, retry in state.get(ROBOTS_RETRY_STATE, {}).items():
        if not isinstance(host, str) or not _is_retry(retry):
            return f"its {ROBOTS_RETRY_STATE} holds {host!r}: {retry!r}, not a host and a retry"
    for relevant in state.get(DRIFT_STATE, ()):
        if not isinstance(relevant, bool):
            return f"its {DRIFT_STATE} holds {relevant!r}, not True or False"
    for fp in state.get(LEFT_OUT_STATE, ()):
        if not isinstance(fp, bytes):
            return f"its {LEFT_OUT_STATE} holds {fp!r}, not a fingerprint"
    return None


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_retry(value: object) -> bool:
    """Whether ``value`` is a retry of ``ROBOTS_RETRY_STATE``: (time, why or None, there)."""
    if not isinstance(value, tuple) or len(value) != 3:
        return False
    at, why, there = value
    return (
        isinstance(at, float)
        and math.isfinite(at)
        and (why is None or isinstance(why, str))
        and isinstance(there, bool)
    )


class TopicJournal:
    """The seed texts that joined the topic, in ``JOBDIR/topic.jsonl``, one JSON line each,
    synced as each joins. After ``kill -9`` there is no saved model and the seeds are not
    fetched again: a model rebuilt from the query alone would judge the rest of the crawl
    against a far weaker topic (on the test sample, 4-7 relevant pages after the resume
    against 17-19 after a clean pause)."""

    def __init__(self, jobdir: str | Path, writes: JobdirWrites | None = None) -> None:
        self.path = Path(jobdir, TOPIC_FILE)
        self.writes = writes

    def append(self, text: str, language: str | None) -> None:
        """Append a text; under a crawl's JOBDIR, one that cannot be written (a full disk)
        raises ``JobdirUnwritable`` and stops the crawl, a line cut short left as a crash
        leaves it (``texts`` skips it)."""
        if self.writes is not None:
            self.writes.check()
        line = json.dumps([text, language]).encode() + b"\n"
        try:
            with self.path.open("a+b") as file:  # appends go to the end, wherever it has read
                if file.seek(0, os.SEEK_END):
                    file.seek(-1, os.SEEK_END)
                    if file.read(1) != b"\n":  # a crash cut the last line: start a new one
                        line = b"\n" + line
                file.write(line)
                file.flush()
                os.fsync(file.fileno())
        except OSError as exc:
            if self.writes is None:
                raise
            raise self.writes.failed(self.path, exc) from None

    def texts(self) -> list[tuple[str, str | None]]:
        """The texts in the order they joined, without a line a crash cut off.

        Raises ``ValueError`` for a file ``append`` did not write (not UTF-8, or a line that
        is neither a record nor the start of one), ``OSError`` for one that cannot be read:
        the JOBDIR check (``focused.jobchecks``) refuses the JOBDIR then, in one line.
        """
        if not self.path.exists():
            return []
        try:
            content = self.path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("it is not UTF-8 text") from None
        texts = []
        for number, line in enumerate(content.splitlines(), 1):
            try:
                record = load_json(line)
            except ValueError as exc:
                # A record is one JSON array, so every line a crash cut short fails to parse;
                # so does junk, which does not start as a record does, or nests as none does.
                if isinstance(exc, JSONTooDeep) or (line and not line.startswith("[")):
                    raise ValueError(f"line {number} is not a [text, language] record") from None
                continue
            if not is_topic_record(record):
                raise ValueError(f"line {number} is not a [text, language] record")
            texts.append((record[0], record[1]))
        return texts

    def restore(self, model: RelevanceModel) -> int:
        """Add to ``model`` the texts it lacks (a model saved at a clean close holds those that
        joined before it); returns how many."""
        missing = self.texts()[model.topic_texts :]
        for text, language in missing:
            model.add_topic_text(text, language)
        return len(missing)


def is_topic_record(record: Any) -> bool:
    """What ``TopicJournal.append`` writes: ``[text, language or null]``."""
    return (
        isinstance(record, list)
        and len(record) == 2
        and isinstance(record[0], str)
        and (record[1] is None or isinstance(record[1], str))
    )


def add_to_counter(crawler: Crawler, name: str, amount: int = 1) -> int:
    """Add ``amount`` to the crawl counter ``spider.state[name]`` and return its new value;
    ``counter_changed`` tells ``CrawlCounters``, which writes it through under JOBDIR."""
    state = crawler.spider.state
    value = state[name] = state.get(name, 0) + amount
    crawler.signals.send_catch_log(counter_changed, name=name, value=value)
    return value


def crawl_counter(spider: Spider, name: str) -> int:
    """A crawl counter's value now: ``spider.state``'s, or in a crawl shared by several
    processes the crawl-wide one in Redis. A run resumed from JOBDIR has its counts before it
    fetches a page (its stats have none until then)."""
    shared = getattr(spider, "shared", None)
    return spider.state.get(name, 0) if shared is None else shared.counter(name)


class CrawlCounters:
    """Extension (JOBDIR only): the crawl counters that the store cannot give back after
    ``kill -9``, written through to the table ``counters`` (name, value) of
    ``JOBDIR/counters.sqlite3``, one commit per change (``connect_crash_safe``: no fsync).

    - ``responses``, the page budget's count (``focused.stopping.PageBudget``): a response that
      gave no page (an HTTP error, not HTML) leaves nothing in the store;
    - ``discovered``, the discovery order (``focused.middlewares.RelevanceMiddleware``): the
      store holds no ``discovery``, and the children queued before a crash must stay behind
      those found after it;
    - ``not_stored`` and ``not_stored_relevant``, the pages below STORE_MIN_RELEVANCE
      (``pipelines.relevance.NotStored``), counted here as each leaves the pipelines, in one
      commit with its URL (table ``not_stored``) and its verdict (``page_dropped``):
      ``recover_state`` adds them to the pages the store counts, and their URLs to those
      fetched;
    - the URL a page to be stored under its rel=canonical was fetched at, with that one (table
      ``stored_under``, ``stored_under_canonical``), written before the page reaches the
      pipelines, whether it is then stored or counted not stored:
      ``recover_state`` takes it as fetched where the store holds the page, so that a kill
      after the store's write and before the request's finish does not store the page twice.

    ``spider.state`` stays the counters' home (the spider, a clean pause and a resume read
    them there): when the spider opens, after Scrapy's ``SpiderState`` has loaded the state
    saved at the last clean close, each counter takes the larger of that value and the file's,
    and the file takes the result (so a JOBDIR written before this file existed carries its
    saved counts over once). ``focused.resume.recover_state`` may raise ``responses`` further
    from the store: counters only grow, so the largest value wins whatever the order.

    So are the failed robots.txt's ``ROBOTS_FAILURES_STATE`` and ``ROBOTS_RETRY_STATE``, a row a
    host in the table ``robots_failures`` (``robots_failure_changed``). They do not only grow:
    the file's, written at each change, replace the state's, saved at the last clean close
    (a file made before the table gives the state's to it).

    So is each host's count of the requests that took its MAX_PAGES_PER_HOST slots, a row a
    host in the table ``host_pages`` (``host_pages_changed``): a request takes its slot when it
    comes up, one whose response gives no page (a 404, not HTML) too, which the store cannot
    count. The scheduler takes it back less the slots of the requests a crash left in flight,
    which take theirs again (``written_host_pages``).

    So is the topic-drift window (DRIFT_WINDOW): each page's verdict as it joins the window
    (``drift_verdict``), once the page has left the pipelines (``item_scraped``,
    ``item_dropped``), a row (fetch order, relevant) in the table ``drift_window``, which keeps
    the last DRIFT_WINDOW; ``recover_state`` rebuilds the window from them
    (``journaled_window``). Rebuilt from the store, the window of a crawl keeping only its best
    pages (STORE_MIN_RELEVANCE) held only those, and its drift stop came late. The pages scored
    after the drift stop, as the crawl closes, are not in the window, nor written: written as
    scored, they made the resume's window one that had not drifted, and it fetched on. A run
    without DRIFT_WINDOW empties the table: its pages are not in it.

    A crawl shared through Redis counts in Redis (``focused.distributed``): nothing is written.
    """

    NAMES = ("responses", "discovered", "not_stored", "not_stored_relevant")

    def __init__(
        self,
        path: Path,
        writes: JobdirWrites | None = None,
        drift_window: int = 0,
    ) -> None:
        self.path = path
        self.writes = writes
        self.drift_window = drift_window
        self._db: GuardedConnection | None = None
        # fetch order -> verdict of the pages in the window not yet out of the pipelines
        self._undone: dict[int, bool] = {}
        # The requests of rows a crash left to be scored again (``journaled_window``), until
        # their pages' next verdicts replace them: no verdict, they take no place of the last
        # DRIFT_WINDOW rows.
        self._again: set[bytes] = set()
        self._spider: Spider | None = None  # its state counts the pages not stored

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlCounters:
        jobdir = crawler.settings.get("JOBDIR")
        if not jobdir:
            raise NotConfigured
        extension = cls(
            Path(jobdir, COUNTERS_FILE),
            jobdir_writes(crawler),
            crawler.settings.getint("DRIFT_WINDOW"),
        )
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.counter_changed, signal=counter_changed)
        crawler.signals.connect(extension.robots_failure_changed, signal=robots_failure_changed)
        crawler.signals.connect(extension.host_pages_changed, signal=host_pages_changed)
        # As connect_request_done, which the scheduler connects later: a page's outcome is
        # written before its request is finished, not after.
        crawler.signals.connect(extension.page_dropped, signal=signals.item_dropped)
        crawler.signals.connect(extension.stored_under_canonical, signal=stored_under_canonical)
        if extension.drift_window:
            crawler.signals.connect(extension.drift_verdict, signal=drift_verdict)
            crawler.signals.connect(extension.page_done, signal=signals.item_scraped)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self, spider: Spider) -> None:
        if getattr(spider, "shared", None) is not None:
            return
        self._spider = spider
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = connect_crash_safe(self.path, self.writes)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY,"
                " value INTEGER NOT NULL)"
            )
            state = spider.state
            for name, value in self._db.execute("SELECT name, value FROM counters"):
                state[name] = max(state.get(name, 0), value)
            self._db.execute("BEGIN")
            for name in self.NAMES:
                if name in state:
                    self._write(name, state[name])
            self._robots_failures(state)
            self._db.execute(NOT_STORED_TABLE)
            self._db.execute(STORED_UNDER_TABLE)
            self._db.execute(HOST_PAGES_TABLE)
            self._db.execute(DRIFT_WINDOW_TABLE)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(drift_window)")}
            if "fp" not in columns:  # a file written before the rows named their requests
                self._db.execute("ALTER TABLE drift_window ADD COLUMN fp BLOB")
            if not self.drift_window:
                self._db.execute("DELETE FROM drift_window")
            named = self._db.execute("SELECT fp FROM drift_window WHERE fp IS NOT NULL")
            self._again = _to_fetch_again(self.path.parent, [fp for (fp,) in named])
            self._db.execute("COMMIT")
        except JobdirUnwritable:  # the crawl stops (focused.jobdir)
            if self._db is not None:
                self._db.rollback_quietly()

    def counter_changed(self, name: str, value: int) -> None:
        if self._db is not None and name in self.NAMES:
            # A failure stops the crawl; the file keeps the last count written (focused.jobdir).
            with suppress(JobdirUnwritable):
                self._write(name, value)

    def stored_under_canonical(self, fetched_as: str, url: str) -> None:
        """Kept in one commit before the page reaches the store: a kill -9 after its write and
        before the scheduler finished its request left the request in flight, and the page,
        fetched again at ``fetched_as``, which the resume did not take as fetched, was taken
        for a duplicate of ``url``, itself, and stored twice."""
        if self._db is not None:
            # A failure stops the crawl, which stores no more pages (focused.jobdir).
            with suppress(JobdirUnwritable):
                self._db.execute(
                    "INSERT OR REPLACE INTO stored_under VALUES (?, ?)", (fetched_as, url)
                )

    def drift_verdict(self, is_relevant: bool, fetch_order: int) -> None:
        """Kept until the page has left the pipelines (``page_done``): written as it was scored,
        the verdict of a page in them at a kill -9, whose request is fetched and scored again,
        was twice in the window rebuilt. Those the window has let go are let go."""
        if self._db is None:
            return
        self._undone[fetch_order] = is_relevant
        if len(self._undone) > self.drift_window:
            oldest = fetch_order - self.drift_window
            self._undone = {order: kept for order, kept in self._undone.items() if order > oldest}

    def page_done(self, item: Any, response: Response | None = None) -> None:
        """The page's verdict, and the window's oldest let go, in one commit. A page stored
        the second time it is scored (the store refused it the first time) replaces the row
        its first verdict left (``page_dropped``)."""
        self._write_outcome(item, _inflight_fp(response))

    def page_dropped(
        self, item: Any, response: Response | None = None, exception: BaseException | None = None
    ) -> None:
        """A page below STORE_MIN_RELEVANCE (``NotStored``) is counted (``not_stored``,
        ``not_stored_relevant``) and its URL kept (table ``not_stored``), with its
        verdict, in one commit: a kill -9 after it and before the scheduler's commit, which
        finishes the request, leaves the request in flight, and the page, fetched again, is
        skipped as already fetched (``recover_state`` takes the URL as fetched,
        ``focused.dedup``), as a stored page is. Counted as it left the pipeline, the page was
        counted, and scored, twice: the crawl went a page past where one never killed stops.
        A page to be stored under its rel=canonical had the URL it was fetched at kept before
        (``stored_under_canonical``), which the resume takes as fetched with this one.

        A page the store refused (its write failed, the JOBDIR or Redis lost) is fetched and
        scored again after a kill. Its verdict's row names the fingerprint its request is in
        flight under (``INFLIGHT``): the window rebuilt leaves out the row of a request still
        to be fetched (``journaled_window``), and the page's next verdict replaces it."""
        if not isinstance(exception, NotStored):
            self._write_outcome(item, _inflight_fp(response), keep_fp=True)
            return
        self._write_outcome(item, _inflight_fp(response), not_stored=item.get("url"))

    def _write_outcome(
        self,
        item: Any,
        fp: bytes | None,
        *,
        not_stored: str | None = None,
        keep_fp: bool = False,
    ) -> None:
        """``fp``: the page's request's, whose earlier row goes; kept on the row of a page
        fetched again after a kill (``keep_fp``). ``not_stored``: the URL of a page below
        STORE_MIN_RELEVANCE, counted with it."""
        is_relevant = self._undone.pop(item.get("fetch_order"), None)
        if self._db is None or (is_relevant is None and not_stored is None):
            return
        try:
            self._db.execute("BEGIN")
            if not_stored is not None:
                self._count_not_stored(item, not_stored)
            if is_relevant is not None:
                self._write_verdict(item["fetch_order"], is_relevant, fp, keep_fp)
            self._db.execute("COMMIT")
        except JobdirUnwritable:  # the crawl stops (focused.jobdir)
            self._db.rollback_quietly()
            return
        self._again.discard(fp)

    def _count_not_stored(self, item: Any, url: str) -> None:
        assert self._db is not None and self._spider is not None
        state = self._spider.state
        relevant = item.get("is_relevant")
        for name in ("not_stored", "not_stored_relevant") if relevant else ("not_stored",):
            state[name] = state.get(name, 0) + 1
            self._write(name, state[name])
        self._db.execute("INSERT OR IGNORE INTO not_stored VALUES (?)", (url,))

    def _write_verdict(
        self, fetch_order: int, is_relevant: bool, fp: bytes | None, keep_fp: bool
    ) -> None:
        assert self._db is not None
        if fp is not None:
            self._db.execute("DELETE FROM drift_window WHERE fp = ?", (fp,))
        self._db.execute(
            "INSERT OR REPLACE INTO drift_window VALUES (?, ?, ?)",
            (fetch_order, is_relevant, fp if keep_fp else None),
        )
        # The last DRIFT_WINDOW rows, not the last DRIFT_WINDOW fetch orders: a page cut
        # off by a kill, or scored again after it, left its order unused, and the window
        # spans it. Cut by order, a row still in the window went, and the window rebuilt
        # after another kill lacked its verdict (or took it from the store: not a page
        # below STORE_MIN_RELEVANCE's). Besides those to be scored again, for the same.
        self._db.execute(
            "DELETE FROM drift_window WHERE fetch_order NOT IN"
            " (SELECT fetch_order FROM drift_window ORDER BY fetch_order DESC LIMIT ?)",
            (self.drift_window + len(self._again) - (fp in self._again),),
        )

    def _write(self, name: str, value: int) -> None:
        assert self._db is not None
        self._db.execute("INSERT OR REPLACE INTO counters VALUES (?, ?)", (name, value))

    def _robots_failures(self, state: dict[str, Any]) -> None:
        """The file's failed robots.txt in place of ``state``'s, or ``state``'s in a file made
        before its table."""
        assert self._db is not None
        made = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'robots_failures'"
        ).fetchone()
        if not made:
            self._db.execute(
                "CREATE TABLE robots_failures (netloc TEXT PRIMARY KEY, failures INTEGER NOT"
                " NULL, retry_at REAL, why TEXT, there INTEGER NOT NULL)"
            )
            failures = state.get(ROBOTS_FAILURES_STATE, {})
            retries = state.get(ROBOTS_RETRY_STATE, {})
            for netloc in {**failures, **retries}:
                self._write_failure(netloc, failures.get(netloc), retries.get(netloc))
            return
        failures, retries = OrderedDict(), OrderedDict()
        # The rowid orders them as they last changed (a row replaced is inserted anew), as
        # focused.robots keeps them, the last last.
        for netloc, count, at, why, there in self._db.execute(
            "SELECT netloc, failures, retry_at, why, there FROM robots_failures ORDER BY rowid"
        ):
            if count:
                failures[netloc] = count
            if at is not None:
                retries[netloc] = (float(at), why, bool(there))
        for key, kept in ((ROBOTS_FAILURES_STATE, failures), (ROBOTS_RETRY_STATE, retries)):
            if kept or key in state:
                state[key] = kept

    def robots_failure_changed(
        self, netloc: str, failures: int | None, retry: tuple[float, str | None, bool] | None
    ) -> None:
        if self._db is not None:
            with suppress(JobdirUnwritable):  # the crawl stops (focused.jobdir)
                self._write_failure(netloc, failures, retry)

    def _write_failure(
        self, netloc: str, failures: int | None, retry: tuple[float, str | None, bool] | None
    ) -> None:
        assert self._db is not None
        if failures is None and retry is None:
            self._db.execute("DELETE FROM robots_failures WHERE netloc = ?", (netloc,))
            return
        at, why, there = retry if retry is not None else (None, None, True)
        self._db.execute(
            "INSERT OR REPLACE INTO robots_failures VALUES (?, ?, ?, ?, ?)",
            (netloc, failures or 0, at, why, int(there)),
        )

    def host_pages_changed(self, host: str, pages: int) -> None:
        if self._db is not None:
            with suppress(JobdirUnwritable):  # the crawl stops (focused.jobdir)
                self._db.execute("INSERT OR REPLACE INTO host_pages VALUES (?, ?)", (host, pages))

    def spider_closed(self, spider: Spider) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def _inflight_fp(response: Response | None) -> bytes | None:
    """The fingerprint the response's request is in flight under (``INFLIGHT``), if any."""
    request = getattr(response, "request", None)
    return request.meta.get(INFLIGHT) if request is not None else None


# The URLs of the pages below STORE_MIN_RELEVANCE, in ``JOBDIR/counters.sqlite3``, each the
# one it was to be stored under (``CrawlCounters.page_dropped``): taken as fetched at a resume,
# as the stored pages' are.
NOT_STORED_TABLE = "CREATE TABLE IF NOT EXISTS not_stored (url TEXT PRIMARY KEY)"


def not_stored_urls(jobdir: str | os.PathLike[str]) -> list[str]:
    """The canonical URLs of the crawl's pages below STORE_MIN_RELEVANCE that ``CrawlCounters``
    wrote to ``jobdir``'s counters file; none for a JOBDIR written before them."""
    return _read_counters(
        jobdir,
        "not_stored",
        lambda db: [url for (url,) in db.execute("SELECT url FROM not_stored")],
        "the pages not stored",
    )


# The pages to be stored under a rel=canonical other than the URL they were fetched at, in
# ``JOBDIR/counters.sqlite3``: the URL fetched (canonical) and the one stored under
# (``CrawlCounters.stored_under_canonical``). One row a such page, kept for the crawl's life as
# the store keeps the page: a row cannot go once the page's request is finished, as that commit
# is the frontier file's; and such pages are rare (a page naming another URL as its own).
STORED_UNDER_TABLE = (
    "CREATE TABLE IF NOT EXISTS stored_under (fetched TEXT PRIMARY KEY, url TEXT NOT NULL)"
)


def stored_under_urls(jobdir: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """The (URL fetched, URL stored under) of the crawl's pages to be stored under their
    rel=canonical that ``CrawlCounters`` wrote to ``jobdir``'s counters file, stored or not
    (a kill before the store's write); none for a JOBDIR written before them."""
    return _read_counters(
        jobdir,
        "stored_under",
        lambda db: db.execute("SELECT fetched, url FROM stored_under").fetchall(),
        "the URLs pages were fetched at",
    )


# Each host's count of the requests that took its MAX_PAGES_PER_HOST slots, in
# ``JOBDIR/counters.sqlite3`` (``CrawlCounters.host_pages_changed``).
HOST_PAGES_TABLE = (
    "CREATE TABLE IF NOT EXISTS host_pages (host TEXT PRIMARY KEY, pages INTEGER NOT NULL)"
)


def written_host_pages(jobdir: str | os.PathLike[str]) -> list[tuple[str, int]]:
    """Each host's count of the requests that took its MAX_PAGES_PER_HOST slots, as
    ``CrawlCounters`` wrote it to ``jobdir``'s counters file, the requests in flight at a crash
    with them; none for a JOBDIR written before them."""
    return _read_counters(
        jobdir,
        "host_pages",
        lambda db: db.execute("SELECT host, pages FROM host_pages").fetchall(),
        "the pages per host",
    )


def _read_counters(
    jobdir: str | os.PathLike[str],
    table: str,
    read: Callable[[sqlite3.Connection], list[Any]],
    what: str,
) -> list[Any]:
    """``read`` from ``jobdir``'s counters file; nothing without the file or its ``table`` (a
    JOBDIR written before them), or where it cannot be read (said in a warning)."""
    path = Path(jobdir, COUNTERS_FILE)
    if not path.is_file():
        return []
    try:
        with closing(sqlite3.connect(path)) as db:
            made = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            return read(db) if made else []
    except sqlite3.Error as exc:
        logger.warning("Cannot read %s from %s: %s", what, path, exc)
        return []


# The topic-drift window's verdicts in ``JOBDIR/counters.sqlite3`` (``CrawlCounters``).
# ``fp``: the fingerprint the request of a page the store refused was in flight under (null
# for the others, and before it was kept).
DRIFT_WINDOW_TABLE = (
    "CREATE TABLE IF NOT EXISTS drift_window (fetch_order INTEGER PRIMARY KEY,"
    " relevant INTEGER NOT NULL, fp BLOB)"
)


def journaled_window(jobdir: str | os.PathLike[str]) -> list[tuple[int, bool | None]]:
    """The topic-drift window's verdicts that ``CrawlCounters`` wrote to ``jobdir``'s counters
    file, (fetch order, relevant) oldest first; none for a JOBDIR written before them. The
    verdict is None for a page the store refused whose request the frontier file holds, in
    flight or queued again (a kill -9 between the verdict's write and the request's finish,
    ``CrawlCounters.page_dropped``): the page is fetched and scored again, and its verdict
    then written anew."""

    def read(db: sqlite3.Connection) -> list[tuple[int, int, bytes | None]]:
        columns = {row[1] for row in db.execute("PRAGMA table_info(drift_window)")}
        fp = "fp" if "fp" in columns else "NULL"
        query = f"SELECT fetch_order, relevant, {fp} FROM drift_window ORDER BY fetch_order"
        return db.execute(query).fetchall()

    rows = _read_counters(jobdir, "drift_window", read, "the topic-drift window")
    again = _to_fetch_again(jobdir, [fp for _, _, fp in rows if fp is not None])
    return [(order, None if fp in again else bool(relevant)) for order, relevant, fp in rows]


def _to_fetch_again(jobdir: str | os.PathLike[str], fps: list[bytes]) -> set[bytes]:
    """Those of ``fps`` that the JOBDIR's frontier file holds in flight or queued."""
    path = Path(jobdir, QUEUE_DIR, FRONTIER_FILE)
    if not fps or not path.is_file():
        return set()
    found: set[bytes] = set()
    try:
        with closing(sqlite3.connect(path)) as db:
            for start in range(0, len(fps), 500):  # within SQLite's variables a statement
                some = fps[start : start + 500]
                marks = ", ".join("?" * len(some))
                found.update(
                    fp
                    for (fp,) in db.execute(
                        f"SELECT fp FROM inflight WHERE fp IN ({marks})"
                        f" UNION SELECT fp FROM frontier WHERE fp IN ({marks})",
                        [*some, *some],
                    )
                )
        return found
    except sqlite3.Error as exc:
        logger.warning("Cannot read the requests in flight from %s: %s", path, exc)
        return set()


def connect_request_done(crawler: Crawler, done: Callable[[Request | None], None]) -> None:
    """Call ``done(request)`` when a request's outcome is safe: its page left the item pipelines
    (``item_scraped``, ``item_dropped``; ``FinishMiddleware`` hands the page's links to the
    scheduler before the page), its callback raised (``spider_error``), or ``request_finished``
    (a response without a page, a failed download)."""

    def response_done(response: Response | None = None, **kwargs: Any) -> None:
        done(getattr(response, "request", None))

    for signal in (signals.item_scraped, signals.item_dropped, signals.spider_error):
        # The closure would be collected at once if held weakly.
        crawler.signals.connect(response_done, signal=signal, weak=False)
    crawler.signals.connect(done, signal=request_finished)


# Request meta: the fingerprint under which a popped request is recorded as in flight.
INFLIGHT = "focused_jobdir_inflight"  # not schedulers.redis_frontier.INFLIGHT_META


class FrontierDupeFilter(RFPDupeFilter):
    """Scrapy's dupefilter without its ``requests.seen`` file: under JOBDIR the scheduler fills
    it from the frontier file (``remember``), which a crash cannot leave behind the queue."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierDupeFilter:
        return cls(
            None,
            crawler.settings.getbool("DUPEFILTER_DEBUG"),
            fingerprinter=crawler.request_fingerprinter,
        )

    def remember(self, fingerprints: Iterable[bytes]) -> None:
        self._fingerprints.update(fingerprints)

    def forget(self, fingerprints: Iterable[bytes]) -> None:
        self._fingerprints.difference_update(fingerprints)

    def seen(self, fingerprint: bytes) -> bool:
        """Whether the fingerprint is seen, without marking it so."""
        return fingerprint in self._fingerprints


class FinishMiddleware(PageOutputMiddleware):
    """Spider middleware (order 15: the closest to the engine, after every other's output).

    It yields a page's link requests before its page item, so that the links are queued before
    the page is stored, and sends ``request_finished`` for a response that produced no page
    (not HTML, already fetched): nothing of it waits in the pipelines. Before the links leave,
    it sends ``links_yielded`` for every page, with or without links, so that the scheduler can
    tell when the last one is queued.
    """

    def process_outputs(self, response: Response, outputs: list[Any]) -> list[Any]:
        pages = [o for o in outputs if isinstance(o, PageItem)]
        if not pages:
            self.crawler.signals.send_catch_log(request_finished, request=response.request)
            return outputs
        others = [o for o in outputs if not isinstance(o, PageItem)]
        links = [o for o in others if isinstance(o, Request)]
        self.crawler.signals.send_catch_log(links_yielded, page=response.request, links=links)
        return others + pages


def relearn(model: RelevanceModel, pages: Iterable[dict[str, Any]]) -> int:
    """Give ``model`` the stored pages it lacks (``text`` and ``language``, oldest first), and
    refit it if that makes a refit due; returns how many pages it learned.

    The model is saved only on a clean close, with ``spider.state``: after a crash it lacks the
    pages stored since. Refit on the pages after the resume alone, its LSI space was that of
    wherever the crawl had drifted by then, and it took off-topic pages for relevant ones (a
    2,000-page bird crawl of the full graph, killed at 1,000: 34 relevant pages after the
    resume, most of them herbs and spices, against 7 after a clean pause). The refit runs
    before the first page is fetched, so that every page after the resume is scored by it.
    """
    learned = 0
    for page in pages:
        if page["text"]:  # a duplicate is stored without its text
            model.observe(page["text"], page["language"])
            learned += 1
    if learned and model.refit_due:
        model.refit()
    return learned


def _authority(url: str) -> str:
    """``url`` cut at its first "/" after its first "://" (whole without one): few of them
    for a crawl's pages, and ``urlsplit`` reads the same host from each as from the URL, that
    "/" ending its authority or coming after its end, wherever a "?", "#" or "://" is. Parsing
    every URL was 40% of a warm resume's read of the store."""
    start = url.find("://")
    end = url.find("/", start + 3) if start >= 0 else -1
    return url if end < 0 else url[:end]


# The page fields recover_state reads.
RECOVER_FIELDS = ("url", "is_relevant", "fetch_order", "duplicate_of")


def recover_state(
    state: dict[str, Any],
    pages: Iterable[dict[str, Any]],
    drift_window: int = 0,
    journaled: Iterable[tuple[int, bool | None]] = (),
    rescored: int = 0,
    not_stored: Iterable[str] = (),
    stored_under: Iterable[tuple[str, str]] = (),
) -> None:
    """Bring the counters of ``spider.state`` up to what the stored pages show.

    After a crash ``spider.state`` is the one saved at the last clean close (or empty), behind
    the store. Counters only grow, so the larger value wins: fetch order (``pages``) continues
    after the highest stored, and the highest of the topic-drift window's verdicts written
    through (``journaled``: a page below STORE_MIN_RELEVANCE is not stored), ``relevant`` is at
    least the relevant pages stored, each host has at least its pages stored and not stored
    (``MAX_PAGES_PER_HOST``), and the page budget's ``responses`` (written through,
    ``CrawlCounters``) is at least the fetch order. The canonical URLs taken as fetched
    (``focused.dedup``) are those stored and those of the pages below STORE_MIN_RELEVANCE
    (``not_stored``, ``not_stored_urls``), whose requests a kill may have left in flight:
    fetched again, such a page is skipped, not scored and counted twice; so are the URLs pages
    to be stored under their rel=canonical were fetched at (``stored_under``, (URL fetched, URL
    stored under), ``stored_under_urls``), each where the store holds a page under the URL it
    names, or counts one not stored there (not as the original of a duplicate only). A page
    seen but never stored (its write failed, or a kill came before it) must not be taken for
    a duplicate of itself when its request is fetched again.

    The topic-drift window (``drift_window`` pages, given in fetch order) is the verdicts
    written through (``journaled``, ``journaled_window``: of the pages that had left the
    pipelines, whose requests are not fetched again); before the first of them, or without
    them (a JOBDIR written before them, a window turned on or widened at a resume), the last
    pages stored, when the store is ahead of the saved state (the one saved is of older pages),
    or holds more of them than the saved window (saved by a run given a smaller
    ``DRIFT_WINDOW``, or none), with a warning where the store lacks the pages below
    STORE_MIN_RELEVANCE; without ``drift_window`` no window is kept. ``pages``: the stored pages
    with ``RECOVER_FIELDS``, in fetch order, read once as they come; ``state`` is set once they
    are all read, so that a read failing half way leaves it as it was. ``rescored``: the
    relevant pages the crawl's recrawls added to its stored ones by moving their verdicts
    (``focused.report.rescored``, negative for fewer; 0 where the record cannot tell), which are
    not the crawl's: the stored pages' verdicts less these are.
    """
    last = relevant = stored = 0
    urls: set[str] = set()  # the URLs the store holds pages under
    originals: set[str] = set()  # the URLs the store's duplicates repeat
    authorities: Counter[str] = Counter()
    recent: deque[tuple[int | None, bool]] = deque(maxlen=drift_window)
    for page in pages:
        last = max(last, page["fetch_order"] or 0)
        stored += page["fetch_order"] is not None  # not a record edited by hand
        relevant += bool(page["is_relevant"])
        recent.append((page["fetch_order"], bool(page["is_relevant"])))
        if page["url"] is None:  # unknown (edited by hand): no URL, no host to count it for
            continue
        urls.add(page["url"])
        if page["duplicate_of"]:
            originals.add(page["duplicate_of"])
        authorities[_authority(page["url"])] += 1
    # A page below STORE_MIN_RELEVANCE took its host's slot as a stored one did: counted from
    # the store alone, a host got as many pages again past MAX_PAGES_PER_HOST after a kill.
    not_stored = [url for url in not_stored if url not in urls]
    for url in not_stored:
        authorities[_authority(url)] += 1
    hosts: Counter[str] = Counter()
    for authority, count in authorities.items():
        try:
            host = urlsplit(authority).hostname or ""
        except ValueError:  # edited by hand ("http://[x/"): no request has it, nor its host
            continue
        hosts[host] += count
    saved_pages = state.get("pages", 0)
    journaled = list(journaled)
    # The pages below STORE_MIN_RELEVANCE are not in the store: counted apart
    # (``pipelines.relevance``), written through. Without them a crawl keeping its best pages
    # counted from 0 again after a kill, so its CLOSESPIDER_RELEVANT let it fetch on. Their
    # count is no fetch order (a page cut off by an earlier kill left its order unused): the
    # order goes on after the verdicts written through too, or a page's row replaced that of
    # one not stored, and the window rebuilt after the next kill lacked its verdict.
    state["pages"] = max(
        saved_pages,
        last,
        stored + state.get("not_stored", 0),
        max((order for order, _ in journaled), default=0),
    )
    if drift_window:
        _recover_drift_window(state, recent, journaled, last > saved_pages)
    else:
        # A run without DRIFT_WINDOW does not keep the window: saved on with its state, it was
        # of the pages before this run, and a resume given DRIFT_WINDOW again watched those
        # (its pages drifted, it fetched on 19 pages where one never paused stopped).
        state.pop(DRIFT_STATE, None)
    # The page budget's count (focused.stopping.PageBudget): each page fetched was a response.
    state["responses"] = max(state.get("responses", 0), state["pages"])
    # A --model recrawl moved stored verdicts: taken for the crawl's, a run going on with the
    # crawl recorded the recrawl's moves as relevant pages it found (and its report, which
    # takes them off the pages' verdicts, said as many relevant pages were not stored).
    crawl_relevant = max(0, relevant - rescored)
    state["relevant"] = max(
        state.get("relevant", 0), crawl_relevant + state.get("not_stored_relevant", 0)
    )
    urls.update(not_stored)
    # A pair whose page the store lacks, nor counts not stored, was written before a kill cut
    # off the page's outcome: its request, in flight, is fetched again, and the page kept then.
    urls.update([fetched for fetched, url in stored_under if url in urls])
    urls.update(originals)
    state["fetched_urls"] = urls
    host_pages = state.setdefault("host_pages", Counter())
    for host, count in hosts.items():
        host_pages[host] = max(host_pages[host], count)


def _recover_drift_window(
    state: dict[str, Any],
    stored: deque[tuple[int | None, bool]],
    journaled: Iterable[tuple[int, bool | None]],
    store_ahead: bool,
) -> None:
    """``recover_state``'s topic-drift window: the verdicts written through, the ``stored``
    pages' (the last, with their fetch order) before them or without them."""
    window = stored.maxlen
    assert window
    # Each a page's whose request is done (CrawlCounters.page_done), none scored again: one
    # whose request is to be fetched again has none (its page's next verdict is written).
    journaled = list(journaled)
    verdicts = [relevant for _, relevant in journaled if relevant is not None]
    if journaled:
        first = journaled[0][0]
        older = [relevant for order, relevant in stored if order is not None and order < first]
        from_store = max(0, min(len(older), window - len(verdicts)))
        state[DRIFT_STATE] = deque([*older, *verdicts], maxlen=window)
    elif store_ahead or len(state.get(DRIFT_STATE, ())) < len(stored):
        # The saved window is of older pages than the store's (a crash), or shorter than the
        # store's last pages give: begun with it, a crawl given DRIFT_WINDOW (or a larger one)
        # only as it resumed fetched that many pages more before drift could stop it.
        from_store = len(stored)
        state[DRIFT_STATE] = deque((relevant for _, relevant in stored), maxlen=window)
    else:
        return
    not_stored = state.get("not_stored", 0)
    if from_store and not_stored:
        logger.warning(
            "The topic-drift window takes %s from the store, which lacks the crawl's %s below"
            " STORE_MIN_RELEVANCE: it may look more relevant than the crawl was, and a drift"
            " stop come late",
            counted(from_store, "page's verdict", "pages' verdicts"),
            counted(not_stored, "page"),
        )
