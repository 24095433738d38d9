"""``scrapy restore FILE [FILE ...]``: write into the store the records a crawl could not store
(``focused.unstored``).

Every record of every file is checked before the store is opened, so a bad file writes
nothing: it ends the run with one line on stderr and exit status 2, as does a store it cannot
write (read-only media); an unreachable store, or one without the files' crawls (the settings
name another store than the crawl's), with exit status 1, as for the other store commands
(``focused.storecommand``). Once every record is written, each file is renamed
``FILE.restored`` (``focused.unstored.mark_restored``), so that it is not loaded again by
mistake. Refused (exit status 2) while a recrawl of a file's crawl is under way
(``focused.report.recrawl_is_live``), which writes the same pages. A page the store holds in
the same or a later version is left as it is (``focused.unstored.restore``): a record may have
been stored after all, and the page fetched again since.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand

from focused.errors import ConfigError, say
from focused.report import being_recrawled, recrawl_is_live
from focused.settingchecks import check_settings
from focused.storage import StoreError
from focused.storecommand import (
    NOT_FOUND,
    USAGE_ERROR,
    InspectError,
    fail,
    find_crawl,
    interrupted,
    interruptible,
    need_output,
    one_line_errors,
    open_or_fail,
    printing,
    scrapy_options,
)
from focused.unstored import RESTORED_SUFFIX, mark_restored, read_unstored, restore

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        one_line_errors(parser)

    def syntax(self) -> str:
        return "[options] FILE [FILE ...]"

    def short_desc(self) -> str:
        return "Write into the store the records a crawl could not store (unstored-*.jsonl)"

    def long_desc(self) -> str:
        return (
            "Write into the store (MONGO_URI, else FOCUSED_DB) the records a crawl kept in a file"
            " when its store failed (unstored-CRAWL-TIME.jsonl, named in the crawl's log): its"
            " pages, a recrawl's page updates, the crawl record's outcome; a page the store holds"
            " in the same or a later version (fetched again since) is left as it is. Once its"
            " records are written, a file is renamed FILE.restored."
        )

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        try:
            scrapy_options(super().process_options, args, opts)
            check_settings(self.settings, crawls=False)
            if not args:
                raise ConfigError("give the files of unstored records to load (unstored-*.jsonl)")
            # A file named twice (or as dir//file) is read and renamed once: read twice, its
            # records were counted twice in what restore said it did.
            named: dict[str, str] = {}
            for path in args:
                named.setdefault(os.path.realpath(path), path)
            self.paths = list(named.values())
            with interruptible():  # reading the files: nothing written
                self.unstored = read_unstored(self.paths)
        except ConfigError as exc:
            fail(str(exc), USAGE_ERROR)
        for path in self.unstored.cut_short:
            say(f"{path}: its last line was cut short (a crash as it was written): left out")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        need_output()  # before anything is written
        paths = self.paths
        left: list[str] = []  # the files being restored, not renamed yet
        try:
            store = open_or_fail(self.settings, create=False)  # checked writable: it is written
            try:
                now = datetime.now(UTC)
                for crawl_id in self.unstored.crawl_ids():
                    crawl = find_crawl(store, crawl_id)  # pages of no crawl are listed nowhere
                    # A recrawl counts the verdicts it moves from a batch it marks pending in
                    # the crawl's record (focused.mongostore): a restore writing the crawl's
                    # updates beside it could settle that batch before its pages were written.
                    if recrawl_is_live(crawl, now):
                        raise ConfigError(being_recrawled(crawl, "then restore the file again"))
                left = paths.copy()
                left_out = restore(store, self.unstored)
            except (StoreError, InspectError) as exc:
                fail(str(exc), NOT_FOUND)
            except ConfigError as exc:
                fail(str(exc), USAGE_ERROR)
            finally:
                store.close()
            held = (
                f" ({left_out} of them not written: the store holds the same or a later version)"
                if left_out
                else ""
            )
            done = [
                f"restored {self.unstored.summary()} into the {store.backend} store at"
                f" {store.location}{held}"
            ]
            while left:
                done += _mark_restored(left[0])
                left.pop(0)
        except KeyboardInterrupt:
            # The records of a file not renamed were written in part or whole: writing them
            # again now puts back the same (a store's upserts), and renames the file.
            its, them = ("its", "it") if len(left) == 1 else ("their", "them")
            interrupted(
                f"{', '.join(left)} not marked restored ({its} records may be written in part):"
                f" restore {them} again"
                if left
                else None
            )
        # Printed once every file is renamed: a reader gone (`| head`) ends no renaming.
        with printing():
            sys.stdout.write("".join(f"{line}\n" for line in done))


def _mark_restored(path: str) -> list[str]:
    """Rename ``path``, whose records are written; the line saying so, if any."""
    try:
        renamed = mark_restored(path)
    except OSError as exc:  # the records are written: a warning, not a failure
        say(
            f"{path}: restored, but it cannot be renamed {Path(path).name}"
            f"{RESTORED_SUFFIX} ({exc.strerror or exc}): do not restore it again"
        )
        return []
    return [f"{path} is now {renamed.name}"] if renamed != Path(path) else []
