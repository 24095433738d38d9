"""``scrapy crawls``: the crawl runs in the store, newest first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from focused.report import (
    crawl_json,
    describe_params,
    describe_query,
    describe_status,
    describe_time,
    needs_pages_for_totals,
    totals,
)
from focused.storecommand import InspectError, StoreCommand, print_json, print_table, score

if TYPE_CHECKING:
    import argparse

    from focused.storage import Store


class Command(StoreCommand):
    def short_desc(self) -> str:
        return "List the crawl runs in the store: strategy, query, pages, harvest rate, status"

    def long_desc(self) -> str:
        return (
            "List the crawl runs in the store (MONGO_URI, else FOCUSED_DB), newest first: id,"
            " start time (UTC), status, strategy and parameters, pages fetched, relevant pages,"
            " harvest rate and query. A crawl still running is counted from its stored pages."
            " A crawl recorded as running whose heartbeat (FOCUSED_HEARTBEAT_INTERVAL) stopped"
            " for 3 of its intervals, or whose process on this machine is gone, is shown as"
            " 'stopped? (last seen TIME)': its process was"
            " killed or crashed; run it again with the same JOBDIR to continue it."
        )

    def show(self, store: Store, args: list[str], opts: argparse.Namespace) -> None:
        crawls = store.crawls()
        if not crawls:
            raise InspectError(f"no crawls in the {store.backend} store at {store.location}")
        counted = [
            totals(crawl, store.page_counts(crawl["crawl_id"]))
            # an id unknown (edited by hand) asks for no pages: MongoDB gave those without one
            if needs_pages_for_totals(crawl) and crawl["crawl_id"] is not None
            else totals(crawl)
            for crawl in crawls
        ]
        if opts.json:
            for crawl, total in zip(crawls, counted, strict=True):
                fields = {"pages": total.fetched, "relevant": total.relevant}
                print_json({**crawl_json(crawl), **fields, "harvest_rate": total.harvest_rate})
            return
        rows = [
            [
                crawl["crawl_id"],
                describe_time(crawl["started_at"]),
                describe_status(crawl),
                crawl["strategy"] or "-",
                describe_params(crawl["params"]) or "-",
                total.fetched,
                total.relevant,
                score(total.harvest_rate),
                describe_query(crawl),
            ]
            for crawl, total in zip(crawls, counted, strict=True)
        ]
        header = ["crawl", "started", "status", "strategy", "parameters"]
        header += ["pages", "relevant", "harvest", "query"]
        print_table(header, rows, align="lllllrrrl")
