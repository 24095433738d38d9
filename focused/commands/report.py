"""``scrapy report [CRAWL_ID]``: what a crawl found, per level and over time, and its best
pages; ``--png FILE`` plots it. The figures come from ``focused.report``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from focused.errors import ConfigError, counted, cut, quoted, say
from focused.fetchsettings import describe_fetch
from focused.report import (
    DECILES,
    REPORT_FIELDS,
    TOP_FIELDS,
    TOP_PAGES,
    Report,
    build_report,
    describe_page_status,
    describe_params,
    describe_query,
    describe_status,
    describe_time,
    draw_png,
    report_json,
)
from focused.settingchecks import check_output_file
from focused.storecommand import (
    NOT_FOUND,
    InspectError,
    StoreCommand,
    fail,
    find_crawl,
    print_json,
    print_table,
    printable,
    printing,
    score,
)

if TYPE_CHECKING:
    import argparse

    from focused.storage import Store


class Command(StoreCommand):
    def syntax(self) -> str:
        return "[options] [CRAWL_ID]"

    def short_desc(self) -> str:
        return "Report on a crawl: pages per level, harvest rate over time, best pages"

    def long_desc(self) -> str:
        return (
            "Report on a crawl (the latest unless CRAWL_ID is given): pages, relevant pages and"
            " mean relevance at each level, the harvest rate after each tenth of the pages"
            f" fetched, and the {TOP_PAGES} most relevant pages with their status (as `scrapy"
            " pages` shows it: 'gone' when a recrawl found the page no longer there, 404 or"
            " 410; 'noindex' when it is stored without its text; 'duplicate' when it is stored"
            " without its text as a copy of another page), and how many stored pages are gone,"
            " noindex and duplicates. --png FILE also plots the harvest-rate curve and the"
            " relevant pages per level."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--png", metavar="FILE", help="also draw the harvest curve and the levels into FILE"
        )

    def check_options(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) > 1:
            raise ConfigError(f"give at most one crawl id, not {len(args)}: {cut(' '.join(args))}")
        if opts.png:  # a bad option (exit 2), as an unwritable -O file is for `scrapy crawl`
            check_output_file(Path(opts.png), f"--png {quoted(opts.png)}", settings=self.settings)

    def show(self, store: Store, args: list[str], opts: argparse.Namespace) -> None:
        crawl = find_crawl(store, args[0] if args else None)
        top = store.pages(crawl["crawl_id"], limit=TOP_PAGES, fields=TOP_FIELDS)
        pages = store.iter_pages(crawl["crawl_id"], order="fetch_order", fields=REPORT_FIELDS)
        report = build_report(crawl, pages, top)
        if not report.stored:
            raise InspectError(f"crawl {crawl['crawl_id']} has no stored pages")
        with printing():
            if opts.json:
                print_json(report_json(report))
            else:
                print_report(report)
        if opts.png:
            try:
                missing = draw_png(report, opts.png)
            except ImportError:
                fail("--png needs matplotlib: pip install 'matplotlib>=3.7'", NOT_FOUND)
            except OSError as exc:  # checked writable, yet failed: a full disk...
                fail(f"cannot write {cut(opts.png)}: {exc.strerror or exc}", NOT_FOUND)
            if missing:
                named = repr(missing[:10]) + (
                    f" and {len(missing) - 10} more" if len(missing) > 10 else ""
                )
                say(f"warning: the plot's font has no glyph for {named}: drawn as boxes")
            say(f"plot written to {opts.png}")


def print_report(report: Report) -> None:
    crawl, total = report.crawl, report.totals

    # Each line through printable: no crawl writes a control character in its record, but a
    # store edited by hand, or a document another program wrote, may.
    def out(line: str) -> None:
        sys.stdout.write(printable(line) + "\n")

    out(f"crawl      {crawl['crawl_id']}")
    out(f"query      {describe_query(crawl)}")
    params = describe_params(crawl["params"])
    out(f"strategy   {crawl['strategy']}{f' ({params})' if params else ''}")
    if fetched_as := describe_fetch(crawl["render"], crawl["fetch_settings"]):
        out(f"fetch      {fetched_as}")  # which its recrawl fetches with too
    out(f"started    {describe_time(crawl['started_at'])}")
    out(f"finished   {describe_time(crawl['finished_at'])}")
    out(f"status     {describe_status(crawl)}")
    out(
        f"pages      {total.fetched} fetched, {report.stored} stored, {total.relevant} relevant,"
        f" harvest rate {score(total.harvest_rate)}"
    )
    out(
        f"stored     {report.gone} gone (404 or 410), {report.noindex} noindex (without text),"
        f" {report.duplicates} duplicate (without text: see duplicate_of)"
    )
    if moved := report.relevant_rescored:
        # The summary is the crawl's measure; without this line its relevant pages and those of
        # the levels and deciles below disagreed for no reason given.
        now = "now relevant" if moved > 0 else "no longer relevant"
        out(
            f"rescored   {counted(abs(moved), 'page')} {now} since the crawl (scrapy recrawl"
            " --model): the figures above are the crawl's, those below the pages' verdicts now"
        )

    sys.stdout.write("\nPages per level\n")
    rows = [
        [
            row.level,
            row.pages,
            row.relevant,
            f"{row.percent_relevant:.1f}",
            score(row.mean_relevance),
        ]
        for row in report.levels
    ]
    print_table(["level", "pages", "relevant", "% relevant", "mean relevance"], rows, "rrrrr")

    sys.stdout.write(f"\nHarvest rate after each {100 // DECILES}% of the pages fetched\n")
    rows = [
        [f"{100 * n // DECILES}%", point.fetched, point.relevant, score(point.harvest_rate)]
        for n, point in enumerate(report.deciles, 1)
    ]
    print_table(["fetched", "pages", "relevant", "harvest rate"], rows, "rrrr")
    if report.relevant_not_stored:
        out(
            "(relevant pages stored only:"
            f" {counted(report.relevant_not_stored, 'relevant page was', 'relevant pages were')}"
            " fetched but not stored, below STORE_MIN_RELEVANCE or left unstored)"
        )

    sys.stdout.write(f"\nTop {counted(len(report.top), 'page')}\n")
    rows = [
        [
            score(page["relevance"]),
            score(page["tfidf"]),
            score(page["lsi"]),
            page["level"],
            describe_page_status(page),
            page["url"],
            page["title"] or "-",
        ]
        for page in report.top
    ]
    header = ["relevance", "tfidf", "lsi", "level", "status", "url", "title"]
    print_table(header, rows, "rrrrlll")
