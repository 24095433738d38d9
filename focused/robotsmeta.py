"""A page's own robots directives: ``<meta name="robots">`` and the ``X-Robots-Tag`` header.

robots.txt (``focused.robots``) says which URLs may be fetched; a fetched page may further ask
not to be indexed (``noindex``) or not to have its links followed (``nofollow``; ``none`` is
both), as Googlebot, Bingbot, Nutch and Heritrix honour. With ``ROBOTS_META_OBEY`` (default on):

- ``nofollow``: none of the page's links is queued (counted as ``focused/skipped/nofollow``);
  the page itself is stored. A redirect, a meta refresh included, is no link: it is followed,
  as Google follows it (Scrapy's redirect middlewares act before the page reaches the spider).
- ``noindex``: the page is still fetched and scored (its score orders its children), and stored
  without its text, like a duplicate, with ``robots`` saying why (``pipelines.storage``). It is
  stored under the URL it was fetched at, not its ``rel=canonical``, and takes no part in the
  near-duplicate index (``focused.dedup``): a page that asks not to be indexed must not stand
  in the store for the page it names or resembles, which would then be stored without text too.

Where the directives come from, all of them combined (the most restrictive wins, as for Google):

- every ``<meta>`` whose ``name`` is ``robots`` or the crawler's own robots token
  (``robots_token``), names and contents in any case, in ``<head>`` or ``<body>`` (browsers
  and Google read both). Not inside ``<template>``: its content is inert, never part of the
  document. Inside ``<noscript>`` only when the page was not rendered: a fetch runs no script,
  so it is what a client without scripts sees (as ``focused.extract`` follows a ``<noscript>``'s
  links then), while a rendered page's ``<noscript>`` holds nothing a browser shows;
- every ``X-Robots-Tag`` header: comma-separated directives; ``token: ...`` limits the
  directives after it, in that header, to that crawler (applied when it is ours). Directives
  with a value (``unavailable_after: DATE``, ``max-snippet: N``...) and unknown ones are ignored.

A rendered page's meta elements are those of the DOM Chromium built (the response's body), and
its headers those of the page's own response.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from focused.extract import is_rendered

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from scrapy.http import Response, TextResponse
    from scrapy.settings import BaseSettings

NOINDEX, NOFOLLOW = "noindex", "nofollow"
HONOURED = (NOINDEX, NOFOLLOW)  # the order they are stored in
# Directives that stand for others; "all" (no restriction, the default) stands for none.
MEANS = {"none": HONOURED, "all": ()}
# Directives written "name: value": their colon names no crawler.
VALUED = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})
# A robots.txt product token (RFC 9309): letters, "_" and "-". "focused/0.1 (...)" is "focused".
PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]+")
# The meta elements that count; a <noscript>'s only when the page was not rendered.
METAS = "//meta[@name][not(ancestor::template)]"
RENDERED_METAS = "//meta[@name][not(ancestor::template)][not(ancestor::noscript)]"


def robots_token(settings: BaseSettings) -> str:
    """The crawler's robots token, lowercased: the product token of ``ROBOTSTXT_USER_AGENT``,
    else of ``USER_AGENT``, as robots.txt groups are matched against (``focused.robots``)."""
    agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or ""
    found = PRODUCT_TOKEN.match(str(agent).strip())
    return found.group().lower() if found else ""


def obeyed_token(settings: BaseSettings) -> str | None:
    """The name a page's robots metas may address this crawler by (``robots_token``); None when
    ``ROBOTS_META_OBEY`` is off, for ``page_robots`` to read no directive."""
    return robots_token(settings) if settings.getbool("ROBOTS_META_OBEY") else None


def directives(value: str, token: str) -> set[str]:
    """The directives of one meta content or ``X-Robots-Tag`` value that apply to ``token``,
    lowercased; a ``name:`` prefix gives the directives after it to that crawler."""
    found: set[str] = set()
    ours = True
    for part in value.split(","):
        directive = part.strip().lower()
        name, colon, rest = directive.partition(":")
        name = name.strip()
        # A crawler's name is a product token: the colon of a date's time names none.
        if colon and name not in VALUED and PRODUCT_TOKEN.fullmatch(name):
            ours = name == token
            directive = rest.strip()
        if ours and directive:
            found.add(directive)
    return found


def honoured(found: Iterable[str]) -> tuple[str, ...]:
    """Which of ``noindex`` and ``nofollow`` the directives ask for, in ``HONOURED`` order."""
    asked = set()
    for directive in found:
        asked.update(MEANS.get(directive, (directive,)))
    return tuple(name for name in HONOURED if name in asked)


def page_robots(response: TextResponse, token: str | None) -> tuple[str, ...]:
    """What the page's metas and ``X-Robots-Tag`` headers ask of this crawler: some of
    ``noindex``, ``nofollow``; none when ``token`` is None (``obeyed_token``: not obeyed)."""
    if token is None:
        return ()
    names = {"robots", token} - {""}  # no token: "robots" alone
    found: set[str] = set()
    for meta in response.xpath(RENDERED_METAS if is_rendered(response) else METAS):
        if meta.attrib.get("name", "").strip().lower() in names:
            found |= directives(meta.attrib.get("content", ""), token)
    return honoured(found | header_directives(response, token))


def header_directives(response: Response, token: str) -> set[str]:
    """The directives of the response's ``X-Robots-Tag`` headers that apply to ``token``."""
    found: set[str] = set()
    for header in response.headers.getlist(b"X-Robots-Tag"):
        found |= directives(header.decode("latin-1"), token)
    return found


def stored_robots(asked: tuple[str, ...]) -> str | None:
    """The page record's ``robots``: ``noindex``, ``nofollow``, ``noindex,nofollow`` or None."""
    return ",".join(asked) or None


def is_noindex(record: Mapping[str, Any]) -> bool:
    """Whether a page record or item asked not to be indexed (it is stored without its text)."""
    return NOINDEX in (record.get("robots") or "").split(",")
