"""Canonical URLs: one spelling per page, so that deduplication sees through URL variants.

The rules follow the crawler literature (Pant, Srinivasan & Menczer, "Crawling the Web", 2004,
and the graph-traversal thesis, IJCA 106(11), 2014): lowercase the scheme and host, drop the
fragment and the default port, one spelling of percent-encoding (``%7e`` is ``~``), resolve
``.`` and ``..``, drop ``index.html``, plus four of ours for the real web: sort the query
parameters, drop tracking and session parameters (``CANONICAL_DROP_PARAMS``), drop ASP.NET's
cookieless session segments (``/(S(...))/``), and drop a host name's closing dot, as Nutch's
BasicURLNormalizer does.

Each rule is a function of ``SplitResult -> SplitResult`` so that it can be tested alone;
``canonicalize`` applies them all. ``CanonicalRequestFingerprinter``
(``REQUEST_FINGERPRINTER_CLASS``) makes Scrapy's dupefilter and the frontier key requests by
their canonical URL, so a redirect target or a seed spelled another way is still recognised.
"""

from __future__ import annotations

import posixpath
import re
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit
from weakref import WeakKeyDictionary

from scrapy.utils.request import fingerprint
from twisted.internet.abstract import isIPv6Address
from w3lib.url import safe_url_string

from focused import settings as default_settings
from focused.errors import load_json

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy import Request
    from scrapy.crawler import Crawler

DEFAULT_DROP_PARAMS: tuple[str, ...] = tuple(default_settings.CANONICAL_DROP_PARAMS)
MAX_ID_DIGITS = 9  # a sid of up to this many digits is a page's id, never a session's
DEFAULT_PORTS = {"http": 80, "https": 443}
INDEX_PAGES = ("index.html", "index.htm")
# URLs whose fingerprint is remembered (about 200 bytes each).
FINGERPRINT_CACHE_SIZE = 200_000
# RFC 3986 unreserved characters: percent-encoding them changes nothing, so they are decoded.
UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
# ASP.NET's cookieless state in a path segment of its own, before a "/" (as ASP.NET reads it):
# letter(value) pairs, S session, A anonymous id, F forms ticket, X cookie check, as in
# /(S(ab12cd34ef56gh78ij90kl12))/page.aspx; or ASP.NET 1.x's 24-character session id alone.
ASPNET_SESSION = re.compile(r"/\((?:(?:[A-Z]\([^()/]+\))+|[a-z0-9]{24})\)(?=/)")
# What Twisted's HTTP client sends: printable ASCII. A host with a space in it passes urlsplit
# and w3lib 2.5's safe_url_string (2.6 refuses it), and then fails in the downloader (its
# robots.txt with a traceback).
SENDABLE_URL = re.compile(r"[\x21-\x7e]+")
# The URL standard's forbidden domain code points: no host holds one once its escapes are
# decoded (exa%20mple.org). w3lib 2.6's safe_url_string raises ValueError for such a host.
FORBIDDEN_IN_HOST = re.compile(r"[\x00-\x20#%/:<>?@\[\\\]^|\x7f]")
# The host names Twisted connects to once IDNA-encoded (as safe_url_string leaves them; Scrapy
# lets the underscore through too), besides IPv6 addresses. Another one (``*.example.org``,
# ``a!b.org``) fails in the downloader the same way. Its labels are 1 to 63
# characters (a last dot ends the name): Python's IDNA codec refuses an empty or longer one
# (``a..b.org``, ``.org``) as the resolver encodes it, a traceback for each, and the request
# then hung until DOWNLOAD_TIMEOUT.
HOST_NAME = re.compile(r"([a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}\.?")


def drop_userinfo(parts: SplitResult) -> SplitResult:
    """A link's ``user:password@`` goes: Scrapy's HTTP client cannot send it (Twisted takes it
    for part of the host name), it would reach the log and the store, and the page is the same
    for any user name a link gives (credentials are settings: ``HTTPAUTH_USER``)."""
    return parts._replace(netloc=parts.netloc.rpartition("@")[2])


def host_as_read(host: str) -> str:
    """A host name (not an IPv6 literal) as browsers read it, by the URL standard: its escapes
    decoded, ``ex%41mple.org`` is ``example.org``, as w3lib 2.6 reads it; w3lib 2.5 left the
    escape, a host no resolver knows. ``ValueError`` for a host that then holds a character no
    host can have (``exa%20mple.org``, ``exa mple.org``), which w3lib 2.6 refuses too."""
    if "%" in host:
        host = unquote(host, errors="replace")
    if FORBIDDEN_IN_HOST.search(host):
        raise ValueError(f"host {host!r} has a character no host name can have")
    return host


def decode_host(parts: SplitResult) -> SplitResult:
    """The host's escapes decoded (``host_as_read``), so that a link or seed spelled with them
    is the page a browser fetches, with either w3lib. A host that decodes to no host is left
    as it is, for ``is_sendable`` to refuse. No userinfo (``drop_userinfo`` first)."""
    host, colon, port = parts.netloc.partition(":")
    if "%" not in host or host.startswith("["):  # an IPv6 literal keeps its zone's %
        return parts
    try:
        host = host_as_read(host)
    except ValueError:
        return parts
    return parts._replace(netloc=host + colon + port)


def lowercase_scheme_and_host(parts: SplitResult) -> SplitResult:
    """A capital sigma (U+03A3) is the small one (U+03C3), as UTS #46 (browsers, w3lib 2.6)
    maps it: ``str.lower()`` made a label's last capital sigma the final one (U+03C2), which
    w3lib 2.6 keeps (a deviation character), so ``http://a.\u03a4\u0391\u03a3/`` was another
    host, ``xn--mxa8ae``, than the one a request for it names, ``xn--mxa0bb``."""
    netloc = parts.netloc
    if not netloc.isascii():
        netloc = netloc.replace("\u03a3", "\u03c3")
    return parts._replace(scheme=parts.scheme.lower(), netloc=netloc.lower())


def drop_trailing_dot(parts: SplitResult) -> SplitResult:
    """``example.com.`` is ``example.com`` to DNS, and its server's page the same: a link
    spelled with the root's dot made a second copy of each page, under another robots.txt and
    host slot. One dot only: ``example.com..`` and ``.`` name no host, and are left to fail as
    they are."""
    host, colon, port = parts.netloc.partition(":")  # no userinfo; an IPv6 literal ends in ]
    if host.endswith(".") and not host.endswith("..") and host != ".":
        return parts._replace(netloc=host[:-1] + colon + port)
    return parts


def drop_fragment(parts: SplitResult) -> SplitResult:
    return parts._replace(fragment="")


def drop_default_port(parts: SplitResult) -> SplitResult:
    try:
        port = parts.port
    except ValueError:  # a non-numeric port: leave it for the fetcher to reject
        return parts
    if port is not None and DEFAULT_PORTS.get(parts.scheme) == port:
        return parts._replace(netloc=parts.netloc.rsplit(":", 1)[0])
    return parts


def _normalise_escape(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in UNRESERVED else f"%{match.group(1).upper()}"


def normalise_percent_encoding(parts: SplitResult) -> SplitResult:
    """Decode escapes of unreserved characters (``%7e`` -> ``~``), uppercase the others'
    hex digits (``%2f`` -> ``%2F``), and escape what must be escaped (spaces, non-ASCII)."""
    url = safe_url_string(urlunsplit(parts))  # escapes what needs it, leaves escapes alone
    parts = urlsplit(url)
    return parts._replace(
        path=PERCENT.sub(_normalise_escape, parts.path),
        query=PERCENT.sub(_normalise_escape, parts.query),
    )


def resolve_dot_segments(parts: SplitResult) -> SplitResult:
    path = parts.path
    if not path:
        return parts._replace(path="/")
    if "." not in path and "//" not in path:
        return parts
    resolved = posixpath.normpath(path)
    resolved = "/" + resolved.lstrip("/")  # normpath keeps a leading '//'
    if path.endswith(("/", "/.", "/..")) and resolved != "/":
        resolved += "/"  # still a directory
    return parts._replace(path=resolved)


def drop_index_page(parts: SplitResult) -> SplitResult:
    head, _, last = parts.path.rpartition("/")
    if last.lower() in INDEX_PAGES:
        return parts._replace(path=f"{head}/")
    return parts


def drop_session_segments(parts: SplitResult) -> SplitResult:
    """Drop ASP.NET's cookieless session segments (``ASPNET_SESSION``): its server takes the
    page without one (it redirects to one of a new session, which the redirect middleware lets
    past the dupefilter, ``focused.hygiene``), and with it each session was a page of its own.
    Parentheses of another shape (``/wiki/Mercury_(planet)``) are part of the page's name."""
    if "/(" not in parts.path:
        return parts
    return parts._replace(path=ASPNET_SESSION.sub("", parts.path))


def drop_params(parts: SplitResult, patterns: Iterable[str] = DEFAULT_DROP_PARAMS) -> SplitResult:
    """Drop query parameters (and ``;name=value`` path parameters such as ``;jsessionid=``)
    whose lowercased name matches one of the glob ``patterns``. A ``sid`` of a few digits alone
    is kept: no session id is one, and it is a page's id (PHP-Nuke's stories are
    ``modules.php?name=News&file=article&sid=1234``: dropped, every story was one URL)."""
    patterns = tuple(p.lower() for p in patterns)

    def dropped(pair: str) -> bool:
        name, _, value = pair.partition("=")
        name = name.lower()
        if name == "sid" and value.isascii() and value.isdigit() and len(value) <= MAX_ID_DIGITS:
            return False
        return any(fnmatchcase(name, pattern) for pattern in patterns)

    path = parts.path
    if ";" in path:
        segments = []
        for segment in path.split("/"):
            head, *params = segment.split(";")
            kept = [p for p in params if not dropped(p)]
            segments.append(";".join([head, *kept]))
        path = "/".join(segments)
    query = parts.query
    if query:
        pairs = query.split("&")
        query = "&".join(p for p in pairs if p and not dropped(p))
    return parts._replace(path=path, query=query)


def sort_query(parts: SplitResult) -> SplitResult:
    if "&" not in parts.query:
        return parts
    return parts._replace(query="&".join(sorted(parts.query.split("&"))))


def canonicalize(url: str, drop: Iterable[str] = DEFAULT_DROP_PARAMS) -> str:
    """The canonical form of an absolute URL; other schemes than http(s) are returned as they
    are (they are never followed, see ``focused.extract.is_followable``)."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in DEFAULT_PORTS:
        return url
    parts = drop_userinfo(parts)
    parts = decode_host(parts)
    parts = lowercase_scheme_and_host(parts)
    parts = drop_trailing_dot(parts)
    parts = drop_fragment(parts)
    parts = drop_default_port(parts)
    parts = normalise_percent_encoding(parts)
    parts = resolve_dot_segments(parts)
    parts = drop_session_segments(parts)
    parts = drop_index_page(parts)
    parts = drop_params(parts, drop)
    parts = sort_query(parts)
    return urlunsplit(parts)


def is_sendable(url: str) -> bool:
    """``url`` (made safe: ``safe_url_string``) can be sent by the downloader: printable ASCII,
    and its host, if it has one, is one Twisted connects to."""
    if not SENDABLE_URL.fullmatch(url):
        return False
    host = urlsplit(url).hostname
    return host is None or HOST_NAME.fullmatch(host) is not None or isIPv6Address(host)


def same_site(url: str, other: str) -> bool:
    """Same host and same port, a scheme's default port counting as none: one site, as
    robots.txt is one per host and port (``focused.robots``). Another port of a host may be
    another server (a development copy, another user's): a page there is not this one's
    canonical. http and https on their default ports are the same site."""
    return _site(urlsplit(url)) == _site(urlsplit(other))


def _site(parts: SplitResult) -> tuple[str | None, int | None]:
    port = parts.port
    return parts.hostname, None if port == DEFAULT_PORTS.get(parts.scheme) else port


def drop_params_setting(settings) -> tuple[str, ...]:
    """``CANONICAL_DROP_PARAMS`` as a tuple of lowercase globs: a list, a comma-separated string
    from -s, or a JSON list from -s.

    Parameter names are matched in lower case (``drop_params``), so a pattern is lowered too:
    ``UTM_*`` matched nothing. Scrapy's ``getlist`` cuts a JSON list at its commas, into
    patterns such as ``["utm_*"`` that matched nothing either, silently.
    """
    raw = settings.get("CANONICAL_DROP_PARAMS")
    patterns = settings.getlist("CANONICAL_DROP_PARAMS")
    if isinstance(raw, str) and raw.lstrip().startswith("["):
        try:
            given = load_json(raw)
        except ValueError:
            given = None  # a name such as "[x" is a pattern of its own
        if isinstance(given, list) and all(isinstance(pattern, str) for pattern in given):
            patterns = given
    return tuple(p.strip().lower() for p in patterns if p.strip())


class CanonicalRequestFingerprinter:
    """Scrapy's request fingerprint, computed on the canonical URL."""

    def __init__(self, drop: Iterable[str] = DEFAULT_DROP_PARAMS) -> None:
        self.drop = tuple(drop)
        self._cache: WeakKeyDictionary[Request, bytes] = WeakKeyDictionary()
        # A GET request without a body is fingerprinted by its URL alone. The dupefilter, the
        # frontier and the scheduler each ask for every request's fingerprint, and a URL is
        # found again from many pages: a dict by URL answers several times faster than a
        # WeakKeyDictionary, and spares canonicalizing the URL again.
        self._by_url: dict[str, bytes] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CanonicalRequestFingerprinter:
        return cls(drop_params_setting(crawler.settings))

    def fingerprint(self, request: Request) -> bytes:
        if request.method == "GET" and not request.body:
            url = request.url
            cached = self._by_url.get(url)
            if cached is None:
                if len(self._by_url) >= FINGERPRINT_CACHE_SIZE:
                    self._by_url.clear()  # bounded; the next lookups fill it again
                cached = self._by_url[url] = self._compute(request)
            return cached
        cached = self._cache.get(request)
        if cached is None:
            cached = self._cache[request] = self._compute(request)
        return cached

    def _compute(self, request: Request) -> bytes:
        canonical = canonicalize(request.url, self.drop)
        keyed = request if canonical == request.url else request.replace(url=canonical)
        return fingerprint(keyed)
