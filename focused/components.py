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
"""

from __future__ import annotations

from typing import Any

from scrapy.settings import SETTINGS_PRIORITIES

from focused.setting_names import given_on_command_line

COMPONENT_CHAINS = ("SPIDER_MIDDLEWARES", "DOWNLOADER_MIDDLEWARES", "ITEM_PIPELINES", "EXTENSIONS")


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
