"""``scrapy crawl``, with bad arguments and settings reported in one line before anything runs.

The check runs in ``process_options``, before Scrapy creates the crawler process (which starts
logging), so a mistake prints exactly one line on stderr and exits with status 2. When the
crawl was to log to a file (``LOG_FILE``, as every Scrapyd job does), the same line is written
there too: Scrapyd keeps a job's stderr only in its own daemon log, and a job that never
started logging would otherwise have no log at all.

A crawl that had to stop because something it needs failed under it (Chromium no longer
launching: close reason ``browser_unavailable``; the store no longer writable:
``store_unreachable``; a feed, ``-o``/``-O``, no longer writable: ``feed_failed``; the Redis of
a shared crawl lost: ``frontier_unreachable``; its JOBDIR no longer writable:
``jobdir_unwritable``, also when it fails as the crawl pauses) exits with
status 1, as do a crawl whose feed failed as it closed, one whose store could not take its last
pages at the close (whatever closed it), a crawl that could fetch none of its seeds and one
stopped uncleanly by a second Ctrl-C. A crawl whose start finds another process of it under
way since the checks (``Store.start_crawl``: a recrawl that claimed it, close reason
``recrawl_under_way``; on MongoDB, a run started at the same moment, ``crawl_running``; nothing
fetched) exits with status 2, as the checks' refusal of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.spiderloader import get_spider_loader

from focused.arguments import CHECKED_ARGUMENTS
from focused.components import keep_project_components, project_components
from focused.errors import ConfigError, cut, quoted
from focused.feeds import FEED_FAILED, feeds_failed
from focused.jobdir import JOBDIR_UNWRITABLE, UNWRITABLE_STAT
from focused.logfile import guard_log_files, null_closed_stderr
from focused.render import BROWSER_UNAVAILABLE
from focused.settingchecks import check_spider_loader, is_the_store
from focused.stopping import (
    FRONTIER_UNREACHABLE,
    NO_SEED_FETCHED,
    WARC_FAILED,
    stop_once_started,
)
from focused.storecommand import (
    USAGE_ERROR,
    fail,
    interruptible,
    one_line_errors,
    scrapy_options,
)
from pipelines.storage import CRAWL_RUNNING, RECRAWL_UNDER_WAY, STORE_UNREACHABLE, UNSTORED

if TYPE_CHECKING:
    import argparse

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

FAILED_CLOSE_REASONS = frozenset(
    {
        BROWSER_UNAVAILABLE,
        FEED_FAILED,
        FRONTIER_UNREACHABLE,
        JOBDIR_UNWRITABLE,
        NO_SEED_FETCHED,
        STORE_UNREACHABLE,
        WARC_FAILED,
    }
)


def run_failed(stats: StatsCollector) -> bool:
    """Whether a run (a crawl, a recrawl) ended in a way its exit status must tell (1)."""
    reason = stats.get_value("finish_reason")
    # No reason: the spider never closed, i.e. a second Ctrl-C stopped the reactor (an unclean
    # stop, resumed like a crash; recorded as FORCED_SHUTDOWN by the storage pipeline), which
    # Scrapy ends with status 0.
    return bool(
        reason is None
        or reason in FAILED_CLOSE_REASONS
        or stats.get_value(UNSTORED)  # records not stored, whatever closed the spider
        or stats.get_value(UNWRITABLE_STAT)  # a pause not saved whole
        or feeds_failed(stats)
    )


class Command(ScrapyCrawlCommand):
    crawler: Crawler | None = None

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        one_line_errors(parser)

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        # The checks may wait for a server or a browser: until the crawler process takes it
        # over, Ctrl-C ends the command.
        with interruptible():
            self._check(args, opts)

    def _check(self, args: list[str], opts: argparse.Namespace) -> None:
        project = project_components(self.settings)
        try:
            scrapy_options(super().process_options, args, opts)
        except ConfigError as exc:
            self._fail(str(exc))
        keep_project_components(self.settings, project)
        guard_log_files()  # before Scrapy makes its log handler
        null_closed_stderr()
        if not args:
            return  # Scrapy's usage follows: `scrapy crawl` alone asks for help
        if len(args) > 1:  # Scrapy would say so only once logging has started
            self._fail(f"give one spider to crawl, not {len(args)}: {cut(' '.join(args))}")
        try:
            check_spider_loader(self.settings)  # loaded first
            spidercls = get_spider_loader(self.settings).load(args[0])
        except ConfigError as exc:
            self._fail(str(exc))
        except KeyError:
            self._fail(f"no spider named {quoted(args[0])}")
        check = getattr(spidercls, "check_arguments", None)
        if check is not None:
            try:
                checked = check(opts.spargs, self.settings)
            except ConfigError as exc:
                self._fail(str(exc))
            # For the spider's from_crawler, which would otherwise read them again.
            opts.spargs[CHECKED_ARGUMENTS] = checked

    def _create_crawler(self, spidercls: type[Spider] | str) -> Crawler:
        self.crawler = super()._create_crawler(spidercls)
        stop_once_started(self.crawler, self.crawler_process.join)
        return self.crawler

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        super().run(args, opts)
        if self.crawler is None or self.exitcode != 0:
            return
        if self.crawler.stats.get_value("finish_reason") in (RECRAWL_UNDER_WAY, CRAWL_RUNNING):
            # Refused as it started, as focused.jobchecks.check_store refuses it before.
            self.exitcode = USAGE_ERROR
        elif run_failed(self.crawler.stats):
            self.exitcode = 1

    def _fail(self, message: str) -> NoReturn:
        log_file = self.settings.get("LOG_FILE")
        # A LOG_FILE that is the store, or blanks, is refused, not written.
        if str(log_file or "").strip() and not is_the_store(Path(log_file), self.settings):
            try:
                encoding = self.settings.get("LOG_ENCODING") or "utf-8"
                with open(log_file, "a", encoding=encoding) as log:
                    log.write(f"error: {message}\n")
            except OSError:
                pass  # stderr has the line; an unwritable log is no reason for a traceback
        fail(message, USAGE_ERROR)
