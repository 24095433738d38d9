"""``scrapy pages``: the stored pages of a crawl, most relevant first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from focused.arguments import Param
from focused.errors import ConfigError, say
from focused.report import describe_page_status, describe_status, page_json
from focused.storage import PAGE_FIELDS
from focused.storecommand import (
    StoreCommand,
    find_crawl,
    parse_number,
    print_json,
    print_table,
    printable,
    score,
)

if TYPE_CHECKING:
    import argparse

    from focused.storage import Store

# --json prints every field but the page text (tens of KB a page), unless --text asks for it:
# a corpus built from the crawl needs the texts, a look at what was crawled does not.
JSON_FIELDS = tuple(name for name in PAGE_FIELDS if name != "text")
TABLE_FIELDS = ("url", "title", "level", "relevance", "status", "robots", "duplicate_of")


class Command(StoreCommand):
    def syntax(self) -> str:
        return "[options]"

    def short_desc(self) -> str:
        return "Print the stored pages of a crawl, most relevant first"

    def long_desc(self) -> str:
        return (
            "Print the stored pages of a crawl (the latest unless --crawl), most relevant first:"
            " relevance, level, status, url and title. The status is the HTTP status of the"
            " page's latest fetch, followed by 'gone' when a recrawl found the page no longer"
            " there (404, 410; its last text is kept), by 'noindex' when the page asked not"
            " to be indexed (stored without its text) and by 'duplicate' when it is a copy of"
            " another page (stored without its text; duplicate_of names that page): '200',"
            " '404 gone', '200 noindex', '200 duplicate'. With --json one JSON object a line,"
            " every field but the page text (with --text, the text too), with 'gone', 'noindex'"
            " and 'duplicate' true or false."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--crawl", metavar="ID", help="crawl id (by default the latest crawl)")
        parser.add_argument(
            "--min-relevance", metavar="X", help="only pages with relevance >= X (0 to 1)"
        )
        parser.add_argument("--level", metavar="N", help="only pages at level N (seeds are 0)")
        parser.add_argument(
            "--relevant-only", action="store_true", help="only pages judged relevant"
        )
        parser.add_argument("--top", metavar="K", help="only the K most relevant pages")
        parser.add_argument("--text", action="store_true", help="with --json: each page's text too")

    def check_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().check_options(args, opts)
        parse_number(opts, "--min-relevance", Param(0.0, low=0.0, high=1.0))
        parse_number(opts, "--level", Param(0, low=0))
        parse_number(opts, "--top", Param(1, low=1))
        if opts.text and not opts.json:
            raise ConfigError("--text needs --json: a table has no room for the pages' texts")

    def show(self, store: Store, args: list[str], opts: argparse.Namespace) -> None:
        crawl = find_crawl(store, opts.crawl)
        if crawl["status"] != "finished":
            if store.pages(crawl["crawl_id"], limit=1, fields=["url"]):
                which = "these are the pages it stored so far"
            elif crawl["status"] == "running":
                which = "it has stored no pages yet"
            else:  # e.g. interrupted (seeds_unreachable): no page is coming
                which = "it stored no pages"
            say(printable(f"crawl {crawl['crawl_id']} is {describe_status(crawl)}:") + f" {which}")
        # Read as printed: the JSON lines of a crawl of a million pages, one at a time (a list
        # held them all, gigabytes, before the first line); a table needs its widths first.
        pages = store.iter_pages(
            crawl["crawl_id"],
            min_relevance=opts.min_relevance,
            level=opts.level,
            relevant_only=opts.relevant_only,
            limit=opts.top,
            fields=(PAGE_FIELDS if opts.text else JSON_FIELDS) if opts.json else TABLE_FIELDS,
        )
        if opts.json:
            for page in pages:
                print_json(page_json(page))
            return
        rows = [
            [
                score(page["relevance"]),
                page["level"],
                describe_page_status(page),
                page["url"],
                page["title"] or "-",
            ]
            for page in pages
        ]
        print_table(["relevance", "level", "status", "url", "title"], rows, align="rrlll")
