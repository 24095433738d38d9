"""Page extraction: title, visible text, and each link with its anchor text and context.

One walk over the parsed tree collects the visible text and, for each link, its offsets in
that text, so the context window around a link comes from the same pass. Script, style and
navigation boilerplate contribute no text (a <header> or <footer> inside an article or section
is its own, not the site's); links inside navigation are kept (with no context),
since site navigation is still part of the link graph.
Boilerplate is also an element that says so by its attributes: an ARIA role of a boilerplate
landmark (Wikipedia's navboxes are ``<div role="navigation">``), or ``hidden`` or an inline
``display: none``, which a browser does not show (``hidden="until-found"`` excepted, text a
reader's search shows; a stylesheet's ``display: none`` is not read: no CSS is).

Links are ``<a href>`` and image maps' ``<area href>``, as Scrapy's LinkExtractor follows, and
``<frame src>`` and ``<iframe src>``: a frameset page has no other links, and an iframe embeds
another page. An ``<a>``'s anchor text is its visible text; the others have none, so theirs is
an attribute: an area's ``alt`` (else ``title``), a frame's ``title`` (else its ``name``, which
says what the frame holds, "menu", "main"), an iframe's ``title``. A link's context is the text
around where it sits, whether or not it has text of its own. A URL linked more than once keeps
its first link in the page's text that has words, else its first. An iframe's and a ``<noframes>``'s
content is fallback markup (raw text to libxml2, as to browsers), never page text or links.
A ``<noscript>``'s links are followed, as navigation's are (no text, no context), unless the page
was rendered: what a browser without scripts shows, and a fetch runs no script. Sites put their
pagination and menus there for crawlers and users without JavaScript; a browser with scripts
shows none of it, so a rendered page's ``<noscript>`` is hidden like a script.
``rel="nofollow"`` (of an ``<a>`` or ``<area>``) stops no link, as in Scrapy's LinkExtractor:
it asks search engines not to credit the target, not to leave it unvisited.

Link URLs come out canonical (``focused.canonical``), with the page's own spelling where it
differs (``Link.linked``, for robots.txt); links that are not followed are counted
by reason in ``Page.skipped`` (``scheme``: not http(s), ``extension``: names a binary file
(``SKIPPED_EXTENSIONS``),
``bad_url``: no valid URL can be made of it, ``url_too_long``: longer than ``URLLENGTH_LIMIT``,
``link_limit``: past ``MAX_LINKS_PER_PAGE``).
One bad link never costs its page or its other links: whatever makes a URL fail (a port out of
range, a malformed host or IPv6 literal, a query character the page's encoding lacks) only skips
that link.
A ``<link rel="canonical">`` on the same site (host and port) is returned as ``Page.canonical``.
A page nested deeper than libxml2 parses (2,048 elements, unclosed tags of a hostile or broken
page) keeps what came before that point and says it was cut short (``Page.cut_short``).
"""

from __future__ import annotations

import re
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from lxml import etree
from scrapy.linkextractors import IGNORED_EXTENSIONS
from scrapy.utils.response import _baseurl_cache, get_base_url
from w3lib.url import safe_url_string

from focused.canonical import DEFAULT_DROP_PARAMS, canonicalize, is_sendable, same_site

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy.http import TextResponse

# A form's lists of choices (a <select> of 200 countries) are no text of the page either.
INVISIBLE = frozenset(
    {"script", "style", "template", "svg", "head", "iframe", "noframes", "select", "datalist"}
)
# Not <form>: ASP.NET WebForms pages hold their whole body in one, and came out without text.
BOILERPLATE = frozenset({"nav", "header", "footer", "aside", "menu"})
# The ARIA landmark roles of those elements (and an application menu's), which sites give a
# <div> or <table> instead: Wikipedia's navboxes are <div role="navigation">.
BOILERPLATE_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "menu", "menubar"}
)
# A <header> or <footer> inside these is the section's own (an article's headline and byline),
# not the site's banner or footer: HTML makes only the others landmarks.
SECTIONING = ("article", "section", "main")
# An inline style's display declarations: (value, "!important" or ""); the last important one
# applies, else the last one.
DISPLAY = re.compile(r"(?:^|;)\s*display\s*:\s*([^;!\s]*)\s*(!\s*important)?", re.IGNORECASE)
# Elements a browser lays out as blocks (the HTML standard's rendering rules): their text is
# not run together with the text around them ("<details><summary>Q</summary>A" is "Q", "A").
BLOCKS = frozenset(
    {"p", "div", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "td", "th", "br",
     "section", "article", "main", "blockquote", "pre", "table", "dd", "dt", "figcaption",
     "hr", "address", "details", "summary", "dl", "fieldset", "legend", "caption", "center",
     "dialog", "hgroup", "figure", "search", "thead", "tbody", "tfoot", "form"}
)  # fmt: skip
# Scrapy's IGNORED_EXTENSIONS, which a link is skipped for (``extension``), but for those a page's
# name ends in as well as a file's, left to the response's Content-Type (``not_html``). Text
# formats (a script, a stylesheet, source code, a feed) are small and their Content-Type says
# what they are, so a wrong guess costs one short download, where a name cost the page:
# /wiki/Node.js, /wiki/Setup.py. So are two country domains, which end the names of sites and
# of the pages about them (/wiki/Character.ai, /wiki/News.com.au), whose files (Illustrator
# drawings, Sun audio) are seldom linked. Binary formats stay skipped: images, audio, video,
# archives, office documents, executables, PDF and PostScript (.ps: a Palestinian domain too,
# but large papers on the academic sites a topical crawl visits). Wikipedia's file pages
# (/wiki/File:Map.png) are HTML too, but they describe a file in a few words.
FOLLOWED_EXTENSIONS = frozenset({"js", "css", "py", "rb", "sh", "bat", "hta", "rss", "ai", "au"})
SKIPPED_EXTENSIONS = tuple(  # for one str.endswith
    f".{ext}" for ext in IGNORED_EXTENSIONS if ext not in FOLLOWED_EXTENSIONS
)
# A link's tag: the attribute of its URL, and those its anchor text comes from (an <a>'s
# anchor is its text).
LINK_TAGS = {
    "a": ("href", ()),
    "area": ("href", ("alt", "title")),
    "frame": ("src", ("title", "name")),
    "iframe": ("src", ("title",)),  # its name is often a script's ("google_ads_iframe_...")
}
# What each tag means to the text walk, as bit flags, so that one dict lookup classifies it.
HIDDEN, BOILERPLATE_KIND, BLOCK, LINK = 1, 2, 4, 8
KINDS: dict[object, int] = {
    **dict.fromkeys(INVISIBLE, HIDDEN),
    # lxml gives comments and processing instructions these functions as their tag. What they
    # hold is not text of the page; the text after them is (their tail, read by the parent).
    etree.Comment: HIDDEN,
    etree.ProcessingInstruction: HIDDEN,
    # Boilerplate is laid out as blocks too: the text before and after it are not one word.
    **dict.fromkeys(BOILERPLATE, BOILERPLATE_KIND | BLOCK),
    **dict.fromkeys(BLOCKS, BLOCK),
    **dict.fromkeys(LINK_TAGS, LINK),
    "iframe": HIDDEN | LINK,  # its src is a link; what it holds is fallback markup
    "noscript": BOILERPLATE_KIND,  # inline: "a<noscript>..</noscript>b" reads "ab"
}
# A rendered page is what a browser with scripts shows: nothing of its <noscript>.
RENDERED_KINDS = {**KINDS, "noscript": HIDDEN}
NUL = "\0"
# A soft hyphen (&shy;) marks where a browser may break a long word, and shows only there: kept,
# it cut "Donau&shy;dampf&shy;schiff" into three words for the tokenizer and the encoder.
SOFT_HYPHEN = "\xad"
FIRST_TITLE = "(//title[not(ancestor::svg)])[1]//text()"
BAD_URL = "bad_url"  # the skip reason of a link no valid URL can be made of
URL_TOO_LONG = "url_too_long"  # the skip reason of a link longer than URLLENGTH_LIMIT
LINK_LIMIT = "link_limit"  # the skip reason of the links of a page past MAX_LINKS_PER_PAGE
_BEST_RANK = 3  # a link in the page's text, with words: no later link of its URL replaces it
# libxml2 stops parsing a document at an element nested this deep (with huge_tree, as parsel
# asks for it): the rest of the page is not in the tree.
LIBXML2_MAX_DEPTH = 2048


@dataclass(frozen=True, slots=True)
class Link:
    url: str
    anchor: str
    context: str
    # The URL is as Scrapy's Request escapes its URL (w3lib's safe_url_string), so a Request
    # for it can take it verbatim (spiders.topical): checked once per URL, in _link_url's cache.
    escaped: bool = field(default=False, compare=False, repr=False)
    # The URL as the page spelled it (resolved, escaped, without its fragment), where its
    # canonical URL is another: robots.txt rules are the site's, for its own spellings
    # (focused.robots.LINKED_URL).
    linked: str | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Page:
    title: str
    text: str
    links: list[Link]
    canonical: str | None = None  # the page's rel=canonical URL, when on the same site
    skipped: Counter[str] = field(default_factory=Counter)  # links not followed, by reason
    cut_short: bool = False  # nested as deep as libxml2 parses: what came after is lost


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
    max_url_length: int = 0,
    max_links: int = 0,
) -> Page:
    """The page's title, text and links. A link longer than ``max_url_length`` (Scrapy's
    ``URLLENGTH_LIMIT``; 0: no limit) is skipped before it is resolved (``url_too_long``): Scrapy
    would drop its request, and resolving, escaping and caching a hostile page's 100 kB links
    cost milliseconds and megabytes each. Past ``max_links`` links to follow
    (``MAX_LINKS_PER_PAGE``; 0: no limit), the page's other links are not looked at
    (``link_limit``): a page of 100,000 links held the reactor for a minute of scoring."""
    _ignore_malformed_base(response)
    # The first <title>, as browsers show: an inline SVG icon's <title> is its tooltip, and a
    # page of a thousand <title>s made a title of them all.
    title = _without_soft_hyphens(" ".join(response.xpath(FIRST_TITLE).getall()).strip())
    pieces: list[str] = []  # text nodes as they are; "" where a block starts or ends
    # URL, element, first and end piece (None: no context, the link is not in the page's text)
    raw_links: list[tuple[str, Any, int, int | None]] = []
    # A frameset page has a <frameset> where others have their <body>.
    kinds = RENDERED_KINDS if is_rendered(response) else KINDS
    for part in response.selector.root.iterchildren("body", "frameset"):
        _walk(part, pieces, raw_links, kinds)
    # Whitespace runs collapse within each text node, not across nodes (so a link's context
    # window is cut from the same text as before): the nodes are joined with NUL, which libxml2
    # never leaves in a text node (its strings end at NUL), so that one split() and join() in C
    # do what a regular expression per node did. A collapsed text node is never empty, so the
    # empty pieces are exactly the block breaks.
    joined = NUL + NUL.join(pieces) + NUL  # NUL ends: a node's first or last space stays
    collapsed = " ".join(joined.split()).split(NUL)[1:-1]
    collapsed = [piece or "\n" for piece in collapsed]
    if SOFT_HYPHEN in joined:  # after the block breaks are told: a node of one may be empty now
        collapsed = [piece.replace(SOFT_HYPHEN, "") for piece in collapsed]
    offsets = [0, *accumulate(map(len, collapsed))]
    text = "".join(collapsed)  # its only whitespace: spaces, and a line break per block edge
    # The base is the first <base href> resolved against the page's own URL, as browsers have
    # it. (Resolved against Scrapy's base, which is that base already, a relative one counted
    # twice: <base href="sub/"> made links of .../sub/sub/x, and the page's canonical URL too.)
    base = response.url
    base_href = response.xpath("//base/@href").get()
    if base_href:
        with suppress(ValueError):  # a malformed <base href> is ignored, as browsers do
            resolved = urljoin(response.url, base_href.strip())
            safe_url_string(resolved)  # raises for a port out of range, a malformed host
            # Browsers ignore a data: or javascript: base too: every relative link was lost.
            if urlsplit(resolved).scheme.lower() not in ("data", "javascript"):
                base = resolved
    # A path from the root ("/wiki/X", not "//host") resolves against the base's scheme and
    # host alone (RFC 3986, 5.2.2), so such links share one cache entry across a site's pages
    # without resolving each; other links are resolved first, then looked up.
    parts = urlsplit(base)
    root = f"{parts.scheme}://{parts.netloc}/" if parts.scheme and parts.netloc else base
    links: dict[str, Link] = {}
    ranks: dict[str, int] = {}  # of each link kept: 2 if in the page's text, + 1 if it has words
    skipped: Counter[str] = Counter()
    drop = tuple(drop_params)  # hashable, for _link_url's cache
    encoding = response.encoding
    for index, (href, element, first, end) in enumerate(raw_links):
        if max_links and len(links) == max_links:
            skipped[LINK_LIMIT] += len(raw_links) - index
            break
        href = href.strip()
        if "\\" in href:
            href = _backslashes_as_slashes(href)
        if (
            max_url_length
            and len(href) > max_url_length
            and len(href.partition("#")[0]) > max_url_length  # a fragment is dropped
        ):
            skipped[URL_TOO_LONG] += 1
            continue
        if href[:1] == "/" and href[1:2] not in "/\t\r\n":  # urlsplit drops \t\r\n
            url, reason, escaped, linked = _link_url(root, href, encoding, drop)
        else:  # cached by its absolute URL (which urljoin returns as it is on an empty base)
            try:
                absolute = urljoin(base, href)
            except ValueError:  # a malformed host ("//[::1/"): one failed split, no cache
                skipped[BAD_URL] += 1
                continue
            url, reason, escaped, linked = _link_url("", absolute, encoding, drop)
        if reason is not None:
            skipped[reason] += 1
            continue
        # A URL linked twice keeps its first link in the page's text that has words, else its
        # first link: a thumbnail's empty <a><img></a> before its caption's, or a menu's "Home"
        # before the article's own words, would hide what the page says of the target.
        kept = ranks.get(url)
        if kept == _BEST_RANK:
            continue
        if end is not None and element.tag == "a":  # its text is the page's, read already
            anchor = " ".join("".join(collapsed[first:end]).split())
        else:
            anchor = _anchor(element, kinds)
        rank = (end is not None) * 2 + bool(anchor)
        if kept is not None and rank <= kept:
            continue
        context = ""
        if end is not None and context_chars:
            window = text[max(0, offsets[first] - context_chars) : offsets[end] + context_chars]
            context = _squeeze(window.replace("\n", " ")).strip()
        links[url] = Link(url, anchor, context, escaped, linked)
        ranks[url] = rank
    clean_text = "\n".join(filter(None, map(str.strip, _squeeze(text).split("\n"))))
    if not title:
        title = _without_soft_hyphens(
            " ".join(" ".join(response.xpath("//h1//text()").getall()).split())
        )
    return Page(
        title,
        clean_text,
        list(links.values()),
        _canonical(response, base, drop_params),
        skipped,
        _cut_short(response.selector.root),
    )


def _backslashes_as_slashes(href: str) -> str:
    """The href with the backslashes before its query or fragment made slashes, as browsers read
    an http(s) URL (pages written on Windows have them): resolved as they were, ``\\wiki\\X``
    was a path under the page's folder (``/dir/wiki/X``), ``http:\\\\host\\x`` one under the
    page's own host."""
    end = min(i for i in (href.find("?"), href.find("#"), len(href)) if i >= 0)
    return href[:end].replace("\\", "/") + href[end:]


def _anchor(element: Any, kinds: dict[object, int]) -> str:
    """A link's anchor text: an <a>'s visible text, or the first attribute of the others that
    has some (``LINK_TAGS``).

    An <a>'s text is read as the page's is (``_walk``): a block inside it is set apart by a
    space, and what a reader does not see is left out. Its ``text_content()`` ran the text of
    a card link's heading and summary together ("AlbatrossSeabird of ...", one word no topic
    has) and took in an icon's SVG title or a script. The link's own attributes do not hide its
    text: a menu that a script opens holds links hidden until then, named by their words."""
    names = LINK_TAGS[element.tag][1]
    if not names:
        if not len(element):  # most anchors: one text node
            return _without_soft_hyphens(" ".join((element.text or "").split()))
        pieces = [element.text] if element.text else []
        for child in element:
            _walk(child, pieces, [], kinds)
            if child.tail:
                pieces.append(child.tail)
        text = "".join(piece or " " for piece in pieces)  # "": a block's edge
        return _without_soft_hyphens(" ".join(text.split()))
    for name in names:
        text = _without_soft_hyphens(" ".join(element.get(name, "").split()))
        if text:
            return text
    return ""


def is_rendered(response: TextResponse) -> bool:
    request = response.request  # None for a response made by hand
    return request is not None and bool(request.meta.get("playwright"))


def _without_soft_hyphens(text: str) -> str:
    return text.replace(SOFT_HYPHEN, "")


def _cut_short(root: Any) -> bool:
    """Whether libxml2 stopped parsing the page at its depth limit. The element it stopped at
    is the last one parsed, at the end of the path of last children: a few steps on a page."""
    depth = 1
    while len(root):
        root = root[-1]
        depth += 1
    return depth >= LIBXML2_MAX_DEPTH


def _ignore_malformed_base(response: TextResponse) -> None:
    """Scrapy resolves a page's ``<base href>`` for its selector and ``urljoin`` and raises for a
    malformed one (``http://[::1/``), which would lose the page: such a base is ignored, as
    browsers do, by giving Scrapy's base cache (the only way in) the page's own URL."""
    try:
        get_base_url(response)
    except ValueError:
        _baseurl_cache[response] = response.url


def _squeeze(text: str) -> str:
    """Runs of spaces as one space, without splitting the text into words as ``str.split``
    does (for a text whose only whitespace is spaces and line breaks)."""
    while "  " in text:
        text = text.replace("  ", " ")
    return text


# What _walk does with an element taken from its stack.
_ENTER, _TAIL, _LEAVE = 0, 1, 2


def _walk(root: Any, pieces: list[str], links: list[Any], kinds: dict[object, int]) -> None:
    """Append the visible text nodes under ``root`` to ``pieces`` in document order, and its
    links to ``links`` (a link after the links inside it) with the span of pieces they cover
    (no end when it is not in the page's text: in navigation boilerplate).

    A loop over a stack of steps rather than a call per element: a page nested a thousand
    elements deep (unclosed tags that libxml2 nests, a hostile page) went past Python's
    recursion limit, and the page was lost with a traceback. Each step is (action, element,
    visible, first piece of the element); an element's children and their tails are pushed in
    reverse, so that they pop in document order before the element is left.
    """
    steps = [(_ENTER, root, True, 0)]
    pop, push = steps.pop, steps.append
    while steps:
        action, element, visible, first = pop()
        if action == _TAIL:  # a visible element's text after a child, in its parent's flow
            tail = element.tail
            if tail:
                pieces.append(tail)
            continue
        kind = kinds.get(element.tag, 0)
        if action == _LEAVE:
            if kind & LINK:
                url = element.get(LINK_TAGS[element.tag][0])
                if url:
                    links.append((url, element, first, len(pieces) if visible else None))
            if kind & BLOCK:
                pieces.append("")
            continue
        if kind & HIDDEN:
            if kind & LINK:  # an iframe: its src is a link, where it sits; its content is not
                push((_LEAVE, element, visible, len(pieces)))
            continue
        if (kind & BOILERPLATE_KIND and not _sections_own(element)) or (
            visible and _unseen(element)
        ):
            visible = False
        if kind & BLOCK:
            pieces.append("")
        first = len(pieces)
        if visible:
            text = element.text
            if text:
                pieces.append(text)
        push((_LEAVE, element, visible, first))
        if visible:
            for child in reversed(element):
                push((_TAIL, child, True, 0))
                push((_ENTER, child, True, 0))
        else:
            for child in reversed(element):
                push((_ENTER, child, False, 0))


def _sections_own(element: Any) -> bool:
    """Whether a boilerplate element is a <header> or <footer> of an article or section."""
    return element.tag in ("header", "footer") and any(
        True for _ in element.iterancestors(*SECTIONING)
    )


def _unseen(element: Any) -> bool:
    """Whether the element is boilerplate by its attributes: its ARIA role (the first token of
    its ``role``) is one of ``BOILERPLATE_ROLES``, or it has ``hidden`` or an inline style whose
    last ``display`` is ``none``, which a browser does not show (its links are followed, as a
    menu's a script opens), but for ``hidden="until-found"``, text a reader's search shows."""
    hidden = element.get("hidden")
    if hidden is not None and hidden.strip().lower() != "until-found":
        return True
    style = element.get("style")
    if style and "display" in style.lower():
        displays = DISPLAY.findall(style)
        applies = [value for value, important in displays if important] or [
            value for value, _ in displays
        ]
        if applies and applies[-1].lower() == "none":
            return True
    tokens = (element.get("role") or "").split(maxsplit=1)
    return bool(tokens) and tokens[0].lower() in BOILERPLATE_ROLES


@lru_cache(maxsize=1 << 16)
def _link_url(
    base: str, href: str, encoding: str, drop_params: tuple[str, ...]
) -> tuple[str, str | None, bool, str | None]:
    """A link's absolute URL, made safe and canonical, why it is not followed (None when it
    is), whether a Request would leave the URL as it is (``Link.escaped``) and the URL as
    linked where the canonical one is another (``Link.linked``): cached, since most links of a
    site point to pages that other pages link to.

    A URL that cannot be made safe is ``bad_url``: a result, so that it is cached too (an
    exception would not be, and a bad link in a site's template would fail on every page).
    A followed URL has been through what a Request does to its URL (``safe_url_string`` with
    Scrapy's default encoding, and it has a scheme and a host), so its Request cannot fail."""
    # The fragment goes first: canonical URLs drop it anyway, and escaped in an encoding that
    # lacks one of its characters it would make a good link bad.
    joined = urljoin(base, href).partition("#")[0]
    try:
        linked = safe_url_string(joined, encoding=encoding)
        url = canonicalize(linked, drop_params)
        escaped = safe_url_string(url) == url
    except ValueError:  # also UnicodeError: from the page's encoding, or IDNA
        return href, BAD_URL, False, None
    if not is_sendable(url):  # a space in the host: escaping leaves it there
        return href, BAD_URL, False, None
    return url, unfollowable_reason(url), escaped, None if linked == url else linked


def _canonical(response: TextResponse, base: str, drop_params: Iterable[str]) -> str | None:
    """The page's ``<link rel="canonical">``, canonicalized, if it stays on the page's site,
    its host and port (``same_site``: a canonical pointing elsewhere is as likely a hijack as
    a mirror)."""
    for link in response.xpath("//link[@rel and @href]"):
        if "canonical" in link.attrib["rel"].lower().split():
            try:
                url = canonicalize(urljoin(base, link.attrib["href"].strip()), drop_params)
            except ValueError:  # a malformed URL names no page
                return None
            if is_followable(url) and same_site(url, response.url):
                return url
            return None
    return None
