"""``scrapy forget CRAWL_ID``: remove a shared crawl's keys from its Redis frontier
(``FOCUSED_FRONTIER``, read from the settings as ``scrapy crawl`` reads it; ``focused.forget``).

Refused, in one line and exit status 1, while a process of the crawl is alive, and for a crawl
the store (``MONGO_URI``, else ``FOCUSED_DB``) does not record as finished: its frontier is what
running it again goes on from (unless its order is gone: it cannot go on). ``--force`` removes
them anyway. A bad crawl id, no or a bad ``FOCUSED_FRONTIER``, or a Redis Cluster node end it
with exit status 2; a Redis that does not answer (or takes no password given, or another), a
crawl with no keys there, or a store it cannot read, with exit status 1, as for the store
commands (``focused.storecommand``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from scrapy.commands import ScrapyCommand

from focused.arguments import check_crawl_id
from focused.errors import ConfigError, counted, cut, say
from focused.report import describe_status
from focused.settingchecks import check_settings
from focused.storage import StoreError
from focused.storecommand import (
    NOT_FOUND,
    USAGE_ERROR,
    fail,
    interrupted,
    need_output,
    one_line_errors,
    open_or_fail,
    printing,
    scrapy_options,
)

if TYPE_CHECKING:
    import argparse

    import redis

    from focused.forget import Forgotten


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    removing = False  # the crawl's keys being removed (``remove``): Ctrl-C leaves some

    def syntax(self) -> str:
        return "[options] CRAWL_ID"

    def short_desc(self) -> str:
        return "Remove a shared crawl's keys from its Redis frontier (FOCUSED_FRONTIER)"

    def long_desc(self) -> str:
        return (
            "Remove the keys of a crawl shared over Redis (-s FOCUSED_FRONTIER=redis://..., as"
            " given to the crawl) from that Redis: its frontier, seen set, counters, page budget,"
            " trap counts, duplicate fingerprints, host slots and worker records. Its pages stay"
            " in the store; the crawl cannot go on afterwards (not even to a larger page budget)."
            " Refused while a process of the crawl is alive, and for a crawl the store (MONGO_URI,"
            " else FOCUSED_DB) does not record as finished, whose queue would be lost: --force"
            " removes them anyway."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        one_line_errors(parser)
        parser.add_argument(
            "--force",
            action="store_true",
            help="remove the keys even while processes of the crawl are alive (they stop) or"
            " when the store does not record the crawl as finished (its queue is lost)",
        )

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        from focused.distributed import check_url  # imports redis: only when asked for

        try:
            scrapy_options(super().process_options, args, opts)
            check_settings(self.settings, crawls=False)
            if not args:
                raise ConfigError(
                    "give the id of the shared crawl whose keys to remove (`scrapy crawls`"
                    " lists the crawls)"
                )
            if len(args) > 1:
                raise ConfigError(f"give one crawl id, not {len(args)}: {cut(' '.join(args))}")
            check_crawl_id(args[0])
            url = self.settings.get("FOCUSED_FRONTIER")
            if not url:
                raise ConfigError(
                    "give the crawl's Redis frontier, as the crawl was given it:"
                    " -s FOCUSED_FRONTIER=redis://host:6379/0"
                )
            self.shown = check_url(str(url))
        except ConfigError as exc:
            fail(str(exc), USAGE_ERROR)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from focused.distributed import asked  # imports redis: only when asked for

        need_output()  # before any key is removed
        crawl_id = args[0]
        try:
            forgotten = asked(
                str(self.settings["FOCUSED_FRONTIER"]),
                lambda client: self._forget(client, crawl_id, opts.force),
            )
        except ConfigError as exc:
            fail(str(exc), NOT_FOUND)
        except KeyboardInterrupt:
            # The crawl's order goes first (it cannot go on), the rest in batches: what is
            # left, the same command removes.
            interrupted(
                f"some keys of crawl {crawl_id} may be left on {self.shown}: run the command"
                " again to remove them"
                if self.removing
                else None
            )
        if forgotten.live:
            which = "which stops at its" if forgotten.live == 1 else "which stop at their"
            writes = "it writes as it stops" if forgotten.live == 1 else "they write as they stop"
            stopped = "it has" if forgotten.live == 1 else "they have"
            say(
                f"warning: crawl {crawl_id} had {counted(forgotten.live, 'process', 'processes')}"
                f" alive, {which} next"
                f" heartbeat: the keys of the crawl are gone, but for those {writes} (its pages"
                f" under way), which `scrapy forget {crawl_id}` removes once {stopped} stopped"
            )
        removed = f"removed {counted(forgotten.removed, 'key')} of crawl {crawl_id}"
        with printing():
            sys.stdout.write(f"{removed} from {self.shown}\n")

    def _forget(self, client: redis.Redis, crawl_id: str, force: bool) -> Forgotten:
        from focused.distributed import CLUSTER_NODE, crawl_prefix, is_cluster_node
        from focused.forget import crawl_keys, live_workers, queued_requests, remove

        if is_cluster_node(client):  # no shared crawl runs there (focused.distributed._unfit)
            fail(f"the Redis frontier at {cut(self.shown)} {CLUSTER_NODE}", USAGE_ERROR)
        keys = crawl_keys(client, crawl_id)
        if not keys:
            fail(
                f"no keys of crawl {crawl_id} on {self.shown}: nothing to remove (`scrapy crawls`"
                " lists the crawls in the store)",
                NOT_FOUND,
            )
        timeout = self.settings.getfloat("FOCUSED_WORKER_TIMEOUT")
        if not force:
            _refuse_live(live_workers(client, crawl_id, timeout), crawl_id, self.shown, timeout)
            # Without its order the crawl cannot go on (its command is refused): what is left
            # (written by a process stopping after a forced forget, or by a forget cut short)
            # holds no queue to lose.
            if client.exists(crawl_prefix(crawl_id) + "order"):
                self._refuse_unfinished(crawl_id, queued_requests(client, crawl_id, keys))
        self.removing = True
        forgotten = remove(client, crawl_id, keys, timeout, force)
        if forgotten is None:  # a process joined the crawl since the look above
            _refuse_live(live_workers(client, crawl_id, timeout), crawl_id, self.shown, timeout)
            fail(f"a process joined crawl {crawl_id} on {self.shown}: nothing removed", NOT_FOUND)
        return forgotten

    def _refuse_unfinished(self, crawl_id: str, queued: int) -> None:
        """End the command unless the store records crawl ``crawl_id`` as finished: an
        interrupted crawl goes on from its frontier in Redis (``queued`` requests)."""
        store = open_or_fail(self.settings, read_only=True)
        try:
            crawl = store.get_crawl(crawl_id)
        except StoreError as exc:
            fail(str(exc), NOT_FOUND)
        finally:
            store.close()
        where = f"the {store.backend} store at {store.location}"
        if crawl is None:
            fail(
                f"crawl {crawl_id} is not in {where}, so nothing tells that it finished: give the"
                " crawl's store (-s MONGO_URI=... or -s FOCUSED_DB=...), or --force to remove its"
                " keys anyway",
                NOT_FOUND,
            )
        if crawl.get("status") != "finished":
            fail(
                f"crawl {crawl_id} is {describe_status(crawl)} in {where}, not finished: running"
                f" it again goes on from its {counted(queued, 'request')} queued in Redis, which"
                " removing its keys loses; give --force to remove them anyway",
                NOT_FOUND,
            )


def _refuse_live(live: int, crawl_id: str, shown: str, timeout: float) -> None:
    if live:
        fail(
            f"crawl {crawl_id} has {counted(live, 'process', 'processes')} alive on {shown} (a"
            " heartbeat within"
            f" FOCUSED_WORKER_TIMEOUT={timeout:g} s): stop them first (Ctrl-C), or give --force"
            " to remove its keys under them, which stops them",
            NOT_FOUND,
        )
