"""``scrapy fetch``, with ``--spider`` naming a spider of the project's refused in one line.

Scrapy's ``fetch``, ``view`` and ``parse`` replace the start of the spider given with
``--spider``, and ``shell`` makes it with no arguments: the topical spider waited forever for
seeds that never came (``FocusedScheduler``) and recorded an interrupted crawl once killed, or
failed for want of a query with a traceback. The recrawl's spider is made by ``scrapy recrawl``
alone. Each of these commands refuses a spider of the project's (``focused.components``) before
anything runs, exit status 2, with the command that runs it. Any other spider, Scrapy's default
one too, runs with Scrapy's components (``focused.components.OtherSpiders``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands.fetch import Command as ScrapyFetchCommand
from scrapy.spiderloader import get_spider_loader

from focused.components import is_project_spider
from focused.errors import ConfigError, quoted
from focused.refresh import RecrawlSpider
from focused.settingchecks import check_spider_loader
from focused.storecommand import USAGE_ERROR, fail

if TYPE_CHECKING:
    import argparse


def refuse_project_spider(
    command: str, settings: Any, name: str | None, *, default_spider: bool = True
) -> None:
    """End ``scrapy COMMAND --spider=NAME`` in one line when NAME is a spider of the
    project's. ``default_spider``: the command runs Scrapy's default spider without
    ``--spider`` (``parse`` runs none)."""
    if not name:
        return  # Scrapy's default spider, or the one whose domain the URL is in
    try:
        check_spider_loader(settings)
        spidercls = get_spider_loader(settings).load(name)
    except ConfigError as exc:
        fail(str(exc), USAGE_ERROR)
    except KeyError:
        if name != RecrawlSpider.name:
            return  # Scrapy says it finds no such spider
        spidercls = RecrawlSpider  # in no spider module: scrapy recrawl makes it
    if is_project_spider(spidercls):
        alone = ", or leave out --spider for Scrapy's default spider" if default_spider else ""
        fail(
            f"scrapy {command} cannot run the project's spider {quoted(name)}: use"
            f" {spidercls.focused_command}{alone}",
            USAGE_ERROR,
        )


class RefusesProjectSpiders:
    """Mixed in before one of Scrapy's commands that takes ``--spider``."""

    settings: Any
    default_spider: ClassVar[bool] = True  # without --spider, Scrapy's DefaultSpider runs

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)  # type: ignore[misc]
        # The command's name, as Scrapy names it: its module's.
        command = type(self).__module__.rpartition(".")[2]
        refuse_project_spider(
            command, self.settings, opts.spider, default_spider=self.default_spider
        )


class Command(RefusesProjectSpiders, ScrapyFetchCommand):
    pass
