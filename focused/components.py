"""The project's components (middlewares, pipelines, extensions) kept beside those given with
``-s``.

Scrapy's ``-s ITEM_PIPELINES='{"myproject.Export": 900}'`` replaces the whole setting of the
project's settings module: the crawl ran the user's pipeline alone, stored nothing, and said
nothing. Here a component setting given on the command line (``-s``, Scrapyd's ``-d
setting=``) adds to the project's: each component of the project's that it does not name is
kept, in its place, and one it names ``null`` is turned off. ``crawl`` and ``recrawl`` read the
project's chains before Scrapy applies the command line (``project_components``), and put them
back after (``keep_project_components``).

The recrawl spider runs its own chains in place of the crawl's (``replace_components``):
a spider's ``custom_settings`` is below the command line's priority too, and was ignored
whole beside a component setting given with ``-s``.

A spider that is not the project's runs Scrapy's components (``OtherSpiders``, an add-on:
``ADDONS``): those of ``scrapy fetch``, ``shell``, ``view``, ``bench``, ``check``, a spider
run with ``scrapy runspider FILE``, one the user adds to ``SPIDER_MODULES``. The project's
chains, frontier and the like are built for the topical crawl (its spider's state, crawl
record, seeds, store) and failed on any other spider with tracebacks, after making an empty
store in the working directory. Such a spider keeps the project's other settings
(``USER_AGENT``, ``ROBOTSTXT_OBEY``, concurrency, timeouts...), as in any Scrapy project, and
what the command line (``-s``) and its own ``custom_settings`` give. The project's spiders (the
topical spider, the recrawl's, and spiders made from them) say so with ``focused_command``,
the command that runs them, which Scrapy's commands that would replace their start name
instead (``focused.commands.fetch``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.settings import SETTINGS_PRIORITIES, default_settings

from focused.setting_names import given_on_command_line

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

COMPONENT_CHAINS = ("SPIDER_MIDDLEWARES", "DOWNLOADER_MIDDLEWARES", "ITEM_PIPELINES", "EXTENSIONS")
# The settings of Scrapy's other than the chains to which focused/settings.py gives classes of
# the project's (or, the _BASE ones, Scrapy's without one: focused.ondemand builds it in the
# chain), set back to Scrapy's for a spider that is not the project's.
SCRAPYS_SETTINGS = (
    "DOWNLOADER_MIDDLEWARES_BASE",
    "EXTENSIONS_BASE",
    "DOWNLOADER",
    "SCHEDULER",
    "SCHEDULER_PRIORITY_QUEUE",
    "DUPEFILTER_CLASS",
    "REQUEST_FINGERPRINTER_CLASS",
    "STATS_CLASS",
    "LOG_FORMATTER",
    "FEED_EXPORTERS",
)


def project_components(settings: Any) -> dict[str, dict[str, Any]]:
    """Each chain as the settings have it: read before the command line is applied."""
    return {name: settings.getdict(name) for name in COMPONENT_CHAINS}


def keep_project_components(settings: Any, project: dict[str, dict[str, Any]]) -> None:
    """Put back each component of ``project`` that a chain given on the command line does not
    name, below the command line's priority."""
    for name, components in project.items():
        if not given_on_command_line(settings, name):
            continue
        chain = settings[name]
        for component, order in components.items():
            if component not in chain:
                chain.set(component, order, "project")


def replace_components(settings: Any, name: str, components: dict[str, Any]) -> None:
    """The chain ``name`` becomes ``components`` and what the command line gives in it: each
    other component, of the project's, is turned off."""
    chain = settings[name]
    spider = SETTINGS_PRIORITIES["spider"]
    for component in list(chain):
        if chain.getpriority(component) <= spider:
            chain.set(component, None, "spider")
    for component, order in components.items():
        chain.set(component, order, "spider")


def is_project_spider(spidercls: type) -> bool:
    """Whether ``spidercls`` is one of the project's spiders, or made from one: it names the
    command that runs it (``focused_command``)."""
    return getattr(spidercls, "focused_command", None) is not None


class OtherSpiders:
    """The add-on (``ADDONS``) that gives a spider that is not the project's Scrapy's
    components. Scrapy builds it once the spider's own settings are in (``update_settings``,
    ``custom_settings``), and before it builds any component but the spider."""

    def __init__(self, spidercls: type) -> None:
        self.spidercls = spidercls

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> OtherSpiders:
        return cls(crawler.spidercls)

    def update_settings(self, settings: BaseSettings) -> None:
        if is_project_spider(self.spidercls):
            return
        # At the project's priority, so that what the command line or the spider gives stays.
        project = SETTINGS_PRIORITIES["project"]
        for name in COMPONENT_CHAINS:
            # Each component the project gives (or turns off: Scrapy's FeedExporter, its
            # CloseSpider...) goes, and the chain is Scrapy's base with the others.
            chain = settings[name]
            for component in list(chain):
                chain.delete(component, project)
        for name in SCRAPYS_SETTINGS:
            settings.set(name, getattr(default_settings, name), project)
