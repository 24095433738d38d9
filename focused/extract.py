"""Page extraction: title, visible text, and each link with its anchor text and context.

One walk over the parsed tree collects the visible text and, for each link, its offsets in
that text, so the context window around a link comes from the same pass. Script, style and
navigation boilerplate contribute no text; links inside navigation are kept (with no context),
since site navigation is still part of the link graph.

Link URLs come out canonical (``focused.canonical``); links that are not followed are counted
by reason in ``Page.skipped`` (``scheme``: not http(s), ``extension``: names a binary file).
A ``<link rel="canonical">`` on the same host is returned as ``Page.canonical``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from scrapy.linkextractors import IGNORED_EXTENSIONS
from w3lib.url import safe_url_string

from focused.canonical import DEFAULT_DROP_PARAMS, canonicalize, same_host

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy.http import TextResponse

INVISIBLE = frozenset({"script", "style", "noscript", "template", "svg", "head", "iframe"})
BOILERPLATE = frozenset({"nav", "header", "footer", "aside", "form", "menu"})
BLOCKS = frozenset(
    {"p", "div", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "td", "th", "br",
     "section", "article", "main", "blockquote", "pre", "table", "dd", "dt", "figcaption"}
)  # fmt: skip
SKIPPED_EXTENSIONS = tuple(f".{ext}" for ext in IGNORED_EXTENSIONS)  # for one str.endswith
SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Link:
    url: str
    anchor: str
    context: str


@dataclass(frozen=True, slots=True)
class Page:
    title: str
    text: str
    links: list[Link]
    canonical: str | None = None  # the page's rel=canonical URL, when on the same host
    skipped: Counter[str] = field(default_factory=Counter)  # links not followed, by reason


def unfollowable_reason(url: str) -> str | None:
    """Why a URL is not followed: ``scheme`` (only http(s): never file:, javascript:, data:,
    mailto:) or ``extension`` (it names a binary file); None when it is followed."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "scheme"
    path = parts.path.lower()
    if path.endswith(SKIPPED_EXTENSIONS):
        return "extension"
    return None


def is_followable(url: str) -> bool:
    """Only http(s) URLs that do not name a binary file by their extension."""
    return unfollowable_reason(url) is None


def extract_page(
    response: TextResponse,
    context_chars: int = 200,
    drop_params: Iterable[str] = DEFAULT_DROP_PARAMS,
) -> Page:
    root = response.selector.root
    title = " ".join(response.xpath("//title//text()").getall()).strip()
    body = root.find("body")
    chunks: list[str] = []
    raw_links: list[tuple[str, str, int, int]] = []  # href, anchor, start, end in text
    size = 0

    def add(text: str | None) -> None:
        nonlocal size
        if text:
            chunks.append(text)
            size += len(text)

    def add_text(text: str | None) -> None:
        # Line breaks in the HTML source are layout, not text: only blocks break lines.
        if text:
            add(SPACES.sub(" ", text))

    def walk(element, visible: bool) -> None:
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag in INVISIBLE:
            return
        visible = visible and tag not in BOILERPLATE
        if tag in BLOCKS:
            add("\n")
        start = size
        if visible:
            add_text(element.text)
        for child in element:
            walk(child, visible)
            if visible:
                add_text(child.tail)
        if tag == "a" and element.get("href"):
            anchor = SPACES.sub(" ", element.text_content()).strip()
            raw_links.append((element.get("href"), anchor, start, size if visible else start))
        if tag in BLOCKS:
            add("\n")

    if body is not None:
        walk(body, True)
    text = "".join(chunks)
    base = response.urljoin("")
    base_href = response.xpath("//base/@href").get()
    if base_href:
        base = urljoin(base, base_href.strip())
    links: dict[str, Link] = {}
    skipped: Counter[str] = Counter()
    drop = tuple(drop_params)  # hashable, for _link_url's cache
    for href, anchor, start, end in raw_links:
        url = _link_url(urljoin(base, href.strip()), response.encoding, drop)
        if url in links:
            continue
        reason = unfollowable_reason(url)
        if reason is not None:
            skipped[reason] += 1
            continue
        context = ""
        if end > start and context_chars:
            context = text[max(0, start - context_chars) : end + context_chars]
        links[url] = Link(url, anchor, SPACES.sub(" ", context).strip())
    clean_text = "\n".join(
        line for line in (SPACES.sub(" ", part).strip() for part in text.split("\n")) if line
    )
    if not title:
        title = SPACES.sub(" ", " ".join(response.xpath("//h1//text()").getall())).strip()
    return Page(
        title, clean_text, list(links.values()), _canonical(response, base, drop_params), skipped
    )


@lru_cache(maxsize=1 << 16)
def _link_url(url: str, encoding: str, drop_params: tuple[str, ...]) -> str:
    """A link's absolute URL, made safe and canonical: cached, since most links of a site point
    to pages that other pages link to as well."""
    return canonicalize(safe_url_string(url, encoding=encoding), drop_params)


def _canonical(response: TextResponse, base: str, drop_params: Iterable[str]) -> str | None:
    """The page's ``<link rel="canonical">``, canonicalized, if it stays on the page's host
    (a canonical pointing to another host is as likely a hijack as a mirror)."""
    for link in response.xpath("//link[@rel and @href]"):
        if "canonical" in link.attrib["rel"].lower().split():
            url = canonicalize(urljoin(base, link.attrib["href"].strip()), drop_params)
            if is_followable(url) and same_host(url, response.url):
                return url
            return None
    return None
