"""``scrapy recrawl CRAWL_ID --policy uniform|proportional [--budget N]``: fetch the stored
pages of a crawl again and record which changed (``focused.refresh``).

The options, the store and the crawl are checked before the crawler process starts, so a
mistake ends the run with one line on stderr: exit status 2 for a bad option, a store it
cannot write (read-only media) or a crawl id another process is crawling or recrawling (the
crawl's lock, ``focused.jobchecks.lock_crawl``; or, on MongoDB, where no lock is taken, a
crawl recorded ``running`` whose heartbeat is fresh, ``focused.report.is_live``, or
being recrawled, its ``recrawl_seen_at`` fresh, ``recrawl_is_live``: the recrawl marks the
crawl's record so, ``Store.claim_recrawl``, and clears the mark as it ends), 1
for an unknown crawl or an unreachable store (as the reading commands,
``focused.storecommand``). A recrawl that had to stop (its store gone: ``store_unreachable``;
Chromium no longer launching: ``browser_unavailable``), whose updates the store could not take
at the close, or stopped uncleanly by a second Ctrl-C exits with status 1, as a crawl does
(``focused.commands.crawl.run_failed``); so does one that stalled so long that another recrawl
took the crawl over (``recrawl_taken_over``, ``focused.refresh.RefreshPipeline``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.commands import ScrapyCommand

from focused.arguments import RENDER, Param
from focused.commands.crawl import run_failed
from focused.components import keep_project_components, project_components
from focused.errors import ConfigError, cut
from focused.fetchsettings import describe_fetch, restore_fetch_settings
from focused.jobchecks import holds_crawl_lock, job_record, lock_crawl
from focused.logfile import guard_log_files, null_closed_stderr
from focused.refresh import (
    POLICIES,
    RECRAWL_TAKEN_OVER,
    RecrawlSpider,
    plan_recrawl,
    taken_over,
)
from focused.render import check_browser
from focused.report import (
    being_recrawled,
    is_live,
    recrawl_is_live,
    running_elsewhere,
)
from focused.setting_names import given_on_command_line
from focused.settingchecks import (
    allow_status_codes_as_numbers,
    check_output_folders,
    check_settings,
)
from focused.storage import StoreError, open_store
from focused.storecommand import (
    NOT_FOUND,
    USAGE_ERROR,
    InspectError,
    fail,
    find_crawl,
    interrupted,
    interruptible,
    one_line_errors,
    open_or_fail,
    parse_number,
    say_unreadable,
    scrapy_options,
)

if TYPE_CHECKING:
    import argparse

    from focused.relevance import RelevanceModel


logger = logging.getLogger(__name__)

# How a refusal beside a running crawl ends.
THEN = "then recrawl it"
# The settings a recrawl cannot take, and why. Each is given when set (a folder, a URL), but
# the flags, given when true, and the counts, when not 0 (read as Scrapy reads them: checked
# so by check_settings).
NOT_TAKEN_FLAGS = ("HTTPCACHE_ENABLED",)
NOT_TAKEN_COUNTS = ("CLOSESPIDER_PAGECOUNT",)
NOT_TAKEN = {
    "JOBDIR": "it fetches a fixed list of pages",
    "FOCUSED_FRONTIER": "it fetches a fixed list of pages",
    # Either policy answers from its copies without asking the site (all of them, or those
    # still fresh), and each such page passed for fetched and unchanged.
    "HTTPCACHE_ENABLED": "Scrapy's HTTP cache would answer for the sites, from the copies it kept",
    # Scrapy's CloseSpider runs in a recrawl (CLOSESPIDER_TIMEOUT...), whose count would take
    # robots.txt and the requests under way past the budget: --budget plans exactly N pages.
    "CLOSESPIDER_PAGECOUNT": "its page budget is --budget N",
}


class Command(ScrapyCommand):
    requires_project = True
    # The crawl's record marked as being recrawled by this process: the claim's identity
    # (``Store.claim_recrawl``), set by _plan.
    claim: str | None = None
    rendered_as_the_crawl: str | None = None  # the crawl's render mode, taken without --render

    def syntax(self) -> str:
        return "[options] CRAWL_ID"

    def short_desc(self) -> str:
        return "Fetch the stored pages of a crawl again and record which changed"

    def long_desc(self) -> str:
        return (
            "Fetch the stored pages of a crawl again (new links are not followed) and record"
            " each page's content hash, visits and, when its content changed, last_changed and"
            " its number of changes. --policy uniform (default) fetches the least recently"
            " fetched pages first, all of them unless --budget; --policy proportional fetches"
            " the --budget pages with the highest (changes + 1) / (visits + 1) times the time"
            " since their last fetch. A page stored with an ETag or Last-Modified is asked for"
            " only if it changed (If-None-Match, If-Modified-Since); a 304 Not Modified is"
            " recorded as unchanged (--full: every page in full). Pages are fetched as the"
            " crawl fetched them: rendered as its -a render said, with the -s settings of how"
            " to fetch it was given (user agent, delays, concurrency, robots, timeouts...), each"
            " unless given here. No password is kept: give HTTPAUTH_USER and HTTPAUTH_PASS again"
            " for a site behind one."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        one_line_errors(parser)
        parser.add_argument(
            "--policy", default="uniform", help=f"one of {', '.join(POLICIES)} (default uniform)"
        )
        parser.add_argument("--budget", metavar="N", help="fetch at most N pages")
        parser.add_argument(
            "--model",
            metavar="DIR",
            help="rescore changed pages with the relevance model a JOBDIR crawl saved, in DIR, its"
            " JOBDIR (or JOBDIR/relevance); without it the crawl's scores are kept",
        )
        parser.add_argument(
            "--render",
            metavar="MODE",
            help="render pages in headless Chromium, never, always or auto; by default as the"
            " crawl rendered them (its -a render)",
        )
        parser.add_argument(
            "--full",
            action="store_true",
            help="fetch every page in full, sending none of its stored validators (for servers"
            " whose 304 Not Modified cannot be trusted)",
        )

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        # The checks may wait for a server or a browser: until the crawler process takes it
        # over, Ctrl-C ends the command, and takes back the crawl's mark if it was set.
        try:
            with interruptible():
                self._check(args, opts)
        except SystemExit:
            if self.claim:  # interrupted once the plan was made
                self._end_claim(args[0])
            raise

    def _check(self, args: list[str], opts: argparse.Namespace) -> None:
        project = project_components(self.settings)
        try:
            scrapy_options(super().process_options, args, opts)
            keep_project_components(self.settings, project)
            check_settings(self.settings)
            allow_status_codes_as_numbers(self.settings)
            check_output_folders(self.settings)
            self.unused = self._refuse_or_leave_out(NOT_TAKEN)
            if not args:
                raise ConfigError("give the id of a crawl to recrawl (`scrapy crawls` lists them)")
            if len(args) > 1:
                raise ConfigError(f"give one crawl id, not {len(args)}: {cut(' '.join(args))}")
            opts.policy = Param("uniform", choices=POLICIES).parse("--policy", opts.policy)
            parse_number(opts, "--budget", Param(1, low=1))
            if opts.policy == "proportional" and opts.budget is None:
                raise ConfigError("--policy proportional needs --budget N (pages per run)")
            self.model = _load_model(opts.model, args[0]) if opts.model else None
            if opts.render is not None:
                opts.render = RENDER.parse("--render", opts.render)
        except ConfigError as exc:
            fail(str(exc), USAGE_ERROR)
        guard_log_files()  # before Scrapy makes its log handler
        null_closed_stderr()
        self.pages = self._plan(args[0], opts)

    def _refuse_or_leave_out(self, not_taken: dict[str, str]) -> list[str]:
        """Refuse each setting of ``not_taken`` the command line gives; turn off those the
        project's settings module gives (a deployment that names its shared frontier there
        recrawls its crawls too), and return their names."""
        left_out = []
        for name, why in not_taken.items():
            value_of = self.settings.get
            if name in NOT_TAKEN_FLAGS:
                value_of = self.settings.getbool
            elif name in NOT_TAKEN_COUNTS:
                value_of = self.settings.getint
            if not value_of(name):
                continue
            if given_on_command_line(self.settings, name):
                raise ConfigError(f"recrawl takes no {name}: {why}")
            self.settings.set(name, 0 if name in NOT_TAKEN_COUNTS else None, "cmdline")
            left_out.append(name)
        return left_out

    def _plan(self, crawl_id: str, opts: argparse.Namespace) -> list[dict[str, Any]]:
        # Checked writable: it is written. The fetch-order index is left to its pipeline
        # (RefreshPipeline), as a crawl's checks leave it: each open tried to make it in turn.
        store = open_or_fail(self.settings, create=False, make_index=False)
        try:
            crawl = find_crawl(store, crawl_id)
            # As a crawl does (held until this process ends): beside a running crawl or
            # recrawl of the id, every page would be fetched twice, each visit counted twice.
            # Before the plan, which then sees the other's last writes.
            lock_crawl(self.settings, crawl_id, then=THEN)
            # Into an SQLite store, the lock just taken tells that no process of the crawl and
            # no recrawl runs: a heartbeat or a mark left fresh is a killed one's, which held
            # the recrawl off for 90 s (focused.jobchecks.holds_crawl_lock). The processes of a
            # crawl into MongoDB take no lock: their heartbeat tells that they are crawling.
            locked = holds_crawl_lock(self.settings, crawl_id)
            now = datetime.now(UTC)
            if not locked and is_live(crawl, now):
                raise ConfigError(running_elsewhere(crawl["crawl_id"], crawl, THEN))
            if not locked and recrawl_is_live(crawl, now):
                raise ConfigError(being_recrawled(crawl, THEN))
            self.allowed_domains = crawl["allowed_domains"]  # None: a crawl recorded before it
            self._fetch_as_the_crawl(crawl, opts)
            pages = plan_recrawl(store, crawl_id, opts.policy, opts.budget)
            say_unreadable(store, "planned")
            if not pages:
                raise InspectError(f"crawl {crawl_id} has no stored pages to fetch again")
            # Marked in the crawl's record (refreshed by RefreshPipeline, cleared by ``run``),
            # so that a recrawl or a run of the crawl started meanwhile is refused where no
            # lock tells (MongoDB, a shared crawl). Unless another recrawl marked it since the
            # record was read: one of two started together goes on.
            interval = self.settings.getfloat("FOCUSED_HEARTBEAT_INTERVAL")
            self.claim = store.claim_recrawl(crawl_id, crawl["recrawl_seen_at"], interval)
            if self.claim is None:
                raise ConfigError(being_recrawled(store.get_crawl(crawl_id), THEN))
            # Read again once marked: a run of the crawl recorded as started since the first
            # read (while the plan was made) is seen now. One that records its start after the
            # mark is refused by its start (``Store.start_crawl``).
            crawl = store.get_crawl(crawl_id)
            if not locked and crawl is not None and is_live(crawl, datetime.now(UTC)):
                store.end_recrawl(crawl_id, self.claim)
                self.claim = None
                raise ConfigError(running_elsewhere(crawl["crawl_id"], crawl, THEN))
            return pages
        except (StoreError, InspectError) as exc:
            fail(str(exc), NOT_FOUND)
        except ConfigError as exc:
            fail(str(exc), USAGE_ERROR)
        finally:
            store.close()

    def _fetch_as_the_crawl(self, crawl: dict[str, Any], opts: argparse.Namespace) -> None:
        """The crawl's render mode, unless ``--render`` is given, and its fetch settings, each
        unless ``-s`` gives it (``focused.fetchsettings``); checked as the command line's are,
        since a record may have been edited, and before the crawl is marked."""
        self.restored = restore_fetch_settings(self.settings, crawl["fetch_settings"])
        try:
            if self.restored:  # the command line's own were checked already
                check_settings(self.settings)
                allow_status_codes_as_numbers(self.settings)
            if opts.render is None:
                # None: recorded before the field, and recrawled plainly, as then.
                opts.render = RENDER.parse("render", crawl["render"] or RENDER.default)
                self.rendered_as_the_crawl = opts.render
        except ConfigError as exc:
            raise ConfigError(f"the settings crawl {crawl['crawl_id']} recorded: {exc}") from None
        if opts.render == "never":
            return
        try:
            check_browser(self.settings)  # a missing browser is one line, as for a crawl
        except ConfigError as exc:
            if self.rendered_as_the_crawl is None:
                raise
            raise ConfigError(
                f"{exc} (crawl {crawl['crawl_id']} rendered its pages: --render never fetches"
                " them without a browser)"
            ) from None

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.crawler_process is not None
        if self.unused:
            unused = ", ".join(self.unused)
            logger.info("Not used by a recrawl: %s (set in the project's settings)", unused)
        if fetched_as := describe_fetch(self.rendered_as_the_crawl, self.restored):
            logger.info("Fetching as crawl %s did: %s", args[0], fetched_as)
        crawler = None
        try:
            # Made from the class: a crawler made first has the process's settings applied to it
            # again as it is run, each chain set whole over the spider's changes to it.
            self.crawler_process.crawl(
                RecrawlSpider,
                crawl_id=args[0],
                pages=self.pages,
                policy=opts.policy,
                model=self.model,
                render=opts.render,
                conditional=not opts.full,
                allowed_domains=self.allowed_domains,
                claim=self.claim,
            )
            [crawler] = self.crawler_process.crawlers
            self.crawler_process.start()
        except KeyboardInterrupt:  # before the crawl handles Ctrl-C (loading the model...)
            interrupted()
        finally:
            # Its pipeline said it, if it stopped so (RefreshPipeline).
            taken = (
                crawler is not None
                and crawler.stats.get_value("finish_reason") == RECRAWL_TAKEN_OVER
            )
            self._end_claim(args[0], said=taken)
        # Taken over: its plan not fetched whole.
        if self.crawler_process.bootstrap_failed or run_failed(crawler.stats) or taken:
            self.exitcode = 1

    def _end_claim(self, crawl_id: str, *, said: bool = False) -> None:
        """Clear the crawl record's mark of this recrawl, however it ended (a second Ctrl-C
        closes no pipeline), unless another recrawl took it over (this one stalled past its
        staleness): that one's is left to it. A store that cannot take it leaves the mark to
        lapse: the crawl can be recrawled once it is stale (3 heartbeat intervals)."""
        if not self.claim:
            return
        try:
            store = open_store(self.settings, create=False, make_index=False)
            try:
                own = store.end_recrawl(crawl_id, self.claim)
            finally:
                store.close()
        except StoreError as exc:
            logger.warning("%s", exc)
            return
        if not own and not said:
            logger.warning("%s", taken_over(crawl_id))


def _load_model(directory: str, crawl_id: str) -> RelevanceModel:
    from focused.relevance import JOBDIR_MODEL_DIR, RelevanceModel  # gensim: when asked for

    saved = Path(directory)
    if (saved / JOBDIR_MODEL_DIR).is_dir():  # the crawl's JOBDIR, the folder a user has at hand
        saved = saved / JOBDIR_MODEL_DIR
    # In its JOBDIR, the model's crawl is known: another crawl's would rescore the pages
    # against that crawl's topic. A model copied out of its JOBDIR cannot be checked.
    if saved.name == JOBDIR_MODEL_DIR:
        owner = job_record({"JOBDIR": saved.parent}).get("crawl_id")
        if owner and owner != crawl_id:
            raise ConfigError(
                f"--model {cut(directory)} is the model of crawl {owner}, not of {crawl_id}:"
                " it would rescore the pages against that crawl's topic"
            )
    try:
        return RelevanceModel.load(saved)
    # gensim's files are pickles, and state.json is JSON of any shape: damaged, they raise
    # anything (a list for the object: a TypeError, and a traceback), as a resumed crawl finds.
    except Exception as exc:
        raise ConfigError(
            f"--model {cut(directory)} holds no saved relevance model (a crawl's JOBDIR/relevance):"
            f" {type(exc).__name__}"
        ) from None
