"""Setting names given on the command line that no component reads.

Scrapy keeps any ``-s NAME=VALUE`` and lets nothing read it, so ``-s CLOSESPIDER_PAGCOUNT=200``
is a crawl without a budget, and ``-s MONGO_URL=...`` one stored in the SQLite file. A name
given with ``-s`` (or Scrapyd's ``-d setting=``) is known when Scrapy defines it, the project
does (``focused.settings``), or it is scrapy-playwright's (``PLAYWRIGHT_*``). An unknown name
that is close to a known one is refused with the name it was probably meant to be; one far
from every known name is only warned about, as a component of the user's own may read it.
Names set in a settings module are not checked.
"""

from __future__ import annotations

import difflib
from functools import cache
from typing import Any

from scrapy.settings import SETTINGS_PRIORITIES

from focused.errors import ConfigError, quoted, setting_options

# Read by Scrapy without a default in scrapy.settings.default_settings.
SCRAPY_WITHOUT_DEFAULT = ("CONCURRENT_REQUESTS_PER_IP", "META_COPY_WARN_SKIP_KEYS")
PLAYWRIGHT_PREFIX = "PLAYWRIGHT_"
# difflib's ratio from which an unknown name is taken for a typo: MONGO_URL for MONGO_URI is
# 0.89, DEPTH_LIMITS for DEPTH_LIMIT 0.96.
TYPO_SIMILARITY = 0.85


@cache
def known_setting_names() -> frozenset[str]:
    from scrapy.settings import default_settings

    import focused.settings

    return frozenset(
        name
        for module in (default_settings, focused.settings)
        for name in vars(module)
        if name.isupper()
    ).union(SCRAPY_WITHOUT_DEFAULT)


def given_on_command_line(settings: Any, name: str) -> bool:
    """Set with ``-s`` (or Scrapyd's ``-d setting=``), not by the project or Scrapy."""
    return (settings.getpriority(name) or 0) >= SETTINGS_PRIORITIES["cmdline"]  # None: unset


def unknown_setting_names(settings: Any) -> list[str]:
    """The names given on the command line that no component reads, sorted."""
    known = known_setting_names()
    return sorted(
        name
        for name in settings
        if given_on_command_line(settings, name)
        and name not in known
        and not name.startswith(PLAYWRIGHT_PREFIX)
    )


def likely_meant(name: str) -> str | None:
    """The known setting an unknown name is probably a typo of, if any."""
    known = known_setting_names()
    if name.upper() in known:
        return name.upper()
    matches = difflib.get_close_matches(name.upper(), known, n=1, cutoff=TYPO_SIMILARITY)
    return matches[0] if matches else None


def check_setting_names(settings: Any, scrapyd: bool = False) -> None:
    """Refuse a setting given on the command line whose name is a typo of a known one, or
    that has no name (``-s =5``, ``-s ' =5'``), which nothing can read. ``scrapyd``: as
    ``focused.errors.spider_arguments`` takes it."""
    for name in unknown_setting_names(settings):
        if not name.strip():
            given = setting_options(f"{name}=...", scrapyd=scrapyd, where=False)
            wanted = setting_options("NAME=VALUE", scrapyd=scrapyd)
            raise ConfigError(f"{given} names no setting: give {wanted}")
        if meant := likely_meant(name):
            raise ConfigError(
                f"setting {quoted(name)} is not one Scrapy or focused reads: did you mean {meant}?"
            )


def unknown_settings_note(settings: Any) -> str | None:
    """A warning naming the settings given on the command line that nothing here reads."""
    unknown = unknown_setting_names(settings)
    if not unknown:
        return None
    names = ", ".join(quoted(name) for name in unknown)
    return (
        f"setting{'s' if len(unknown) > 1 else ''} {names} given but read by neither Scrapy,"
        " scrapy-playwright nor focused: ignored unless a component of your own reads it"
    )
