"""Response hygiene: what a crawl of the open web must not fetch, or must give up on.

Most of it is Scrapy's, set in ``focused/settings.py``: ``DOWNLOAD_MAXSIZE`` (10 MiB) and
``DOWNLOAD_TIMEOUT`` (30 s) cancel huge or stalled downloads, ``REDIRECT_MAX_TIMES`` (5) cuts
redirect chains (a loop back to a fetched URL is already cut by the dupefilter), and Scrapy's
redirect middleware never follows a redirect to another scheme than http(s). Links are
filtered by ``focused.extract.unfollowable_reason`` (scheme, binary extension) before they are
queued, and TextResponse decodes a wrong or missing charset with replacement characters.

This module adds:

- ``page_skip_reason(response)``: why a response is no page to extract, ``not_html`` (its
  Content-Type), or ``binary_body``: an image, a PDF, an archive or other binary served as
  HTML, told by its first bytes (a signature, or a NUL byte in its first KB), which lxml
  would have made a page of text (and links) out of.
- ``NotHtmlStopMiddleware``: a page whose Content-Type makes it ``not_html`` (``says_not_html``,
  the rule ``page_skip_reason`` reads) is downloaded no further than its headers, where Scrapy
  downloaded it whole, up to ``DOWNLOAD_MAXSIZE``, for the spider to skip it: an extensionless
  link to a PDF or a ``.js`` link. The spider still gets the response (its body empty) and
  counts it. Spared: robots.txt (text, read by its middleware), a redirect (the WARC export
  keeps its body as it came), a body that says it is no longer than 64 KiB (a stop closes the
  connection), and one over ``DOWNLOAD_MAXSIZE`` (Scrapy cancels it, ``too_large``). A rendered
  page, of which scrapy-playwright sends no ``headers_received``, is stopped in the browser by
  ``focused.render.PageResponse`` by the same rule (``stops_not_html``).
- ``skip_reason(failure)``: the reason a request came to nothing, for the spider's errback,
  which counts it as ``focused/skipped/<reason>``; a compressed body that inflates past
  ``DOWNLOAD_MAXSIZE`` is ``too_large`` too, and one its Content-Encoding cannot undo is
  ``bad_compression``.
- ``MetaRefreshMiddleware`` (replaces Scrapy's): a page whose meta refresh names a URL no
  request can be made of, or the page itself, is kept rather than lost.
- Both redirect middlewares drop a target's ``user:password@``, as the canonical URLs of links
  do (``focused.canonical.drop_userinfo``), and the validators a recrawl sent for the page
  redirected from (``If-None-Match``, ``If-Modified-Since``: ``focused.refresh``), and its
  downloader slot, so that a target on another host is paced as its own host's.
- ``RedirectMiddleware`` (replaces Scrapy's): a 3xx whose Location leads nowhere (empty, no
  URL a request can be made of, a space in its host among them, another scheme than http(s))
  is ``bad_redirect``, where Scrapy's made it a ``download_error``, an ``http_3xx`` or a
  request to itself, dropped without a count.
- ``CharsetMiddleware``: a page that declares no encoding (no BOM, no charset in its
  Content-Type or a ``<meta>``) whose bytes read as Japanese in Shift_JIS or EUC-JP (a share
  of hiragana) and not as Korean is decoded as Japanese; other pages as Scrapy decodes them
  (ASCII, UTF-8, else charset_normalizer's best guess), which took short Japanese pages for
  Korean or Chinese: their bytes are valid CP949 and Big5 too. A ``<meta>`` saying UTF-16 or
  UTF-32 means UTF-8, as in browsers (Scrapy decoded such a page into garbage). A charset of
  a codec that decodes no page (``charset=base64``, ``zlib``, ``idna``) is ignored: Scrapy
  raised, and the page was lost with a traceback.
- ``WEB_ENCODING_LABELS``: the encoding labels browsers read that Python does not know
  (``iso-8859-8-i``, ``windows-949``, ``x-cp1251``...), made known to Python's codecs as this
  module loads, so that Scrapy decodes a page declaring one as declared rather than guessing.
- ``HeadCheckMiddleware`` (downloader middleware, on with ``HEAD_CHECK = True``): sends a HEAD
  first and skips the GET when the Content-Type is not HTML or the Content-Length exceeds
  ``DOWNLOAD_MAXSIZE``. It costs one more round trip per page, and the HEAD counts against
  the per-host politeness delay too, so crawl throughput roughly halves; it saves little since
  ``NotHtmlStopMiddleware`` ends such a GET at its headers (and Scrapy one over
  ``DOWNLOAD_MAXSIZE`` by its Content-Length): a closed connection, or a body under 64 KiB.
  Servers that refuse HEAD (405/501) get the GET as usual, and so do those whose HEAD fails (a
  dropped connection, a timeout; not retried: ``focused/head_check_failures``). A recrawl's
  conditional GET (``If-None-Match``, ``If-Modified-Since``: ``focused.refresh``) gets no HEAD:
  an unchanged page answers it 304 without a body, one request where a HEAD made two.
"""

from __future__ import annotations

import codecs
import gzip
import logging
import re
import socket
import sys
import zlib
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import brotli
from charset_normalizer import from_bytes
from scrapy import Request, signals
from scrapy.core.downloader import Downloader
from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware as ScrapyMetaRefresh
from scrapy.downloadermiddlewares.redirect import RedirectMiddleware as ScrapyRedirect
from scrapy.exceptions import (
    DownloadCancelledError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    NotConfigured,
    ResponseDataLossError,
    StopDownload,
)
from scrapy.http import HtmlResponse, TextResponse
from scrapy.http.request import NO_CALLBACK
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.response import _metaref_cache, get_base_url
from twisted.internet.error import ConnectBindError
from twisted.python.reflect import safe_str
from twisted.web.client import ResponseFailed
from w3lib.encoding import resolve_encoding
from w3lib.url import safe_url_string

from focused.canonical import decode_host, drop_userinfo, host_as_read

if sys.version_info >= (3, 14):
    from compression.zstd import ZstdError
else:
    from backports.zstd import ZstdError  # Scrapy 2.19 requires it before Python 3.14

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Headers, Response
    from twisted.python.failure import Failure

HTML_TYPES = ("text/html", "application/xhtml+xml")
# The first bytes of the binary formats most often served under a wrong Content-Type: PNG,
# GIF, JPEG, PDF, ZIP (and its Office and EPUB kin), gzip, RIFF (WebP, WAV, AVI).
BINARY_SIGNATURES = (
    b"\x89PNG\r\n\x1a\n",
    b"GIF87a",
    b"GIF89a",
    b"\xff\xd8\xff",
    b"%PDF-",
    b"PK\x03\x04",
    b"PK\x05\x06",
    b"\x1f\x8b",
    b"RIFF",
)
# A non-HTML body that says it is no longer than this is downloaded rather than stopped: a stop
# closes the connection, and a new one (a TLS handshake) costs more round trips than 64 KiB.
NOT_HTML_KEPT_SIZE = 64 * 1024
SNIFFED_BYTES = 1024  # a NUL among them: no text in an 8-bit or UTF-8 encoding has one
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})  # those Scrapy's redirect follows
# What Scrapy's HttpCompressionMiddleware raises, as it is, for a body that its Content-Encoding
# cannot undo (cut short, or not compressed as said): the server's fault, not a bug.
BAD_COMPRESSION = (EOFError, gzip.BadGzipFile, zlib.error, brotli.error, ZstdError)
# getaddrinfo's errors as a socket of one family binds DOWNLOAD_BIND_ADDRESS, an address (or a
# host name) of the other (other_family).
NO_ADDRESS_OF_FAMILY = frozenset(
    getattr(socket, name)
    for name in ("EAI_ADDRFAMILY", "EAI_NONAME", "EAI_NODATA")
    if hasattr(socket, name)
)
# The labels of the WHATWG Encoding Standard, which browsers read in a Content-Type or a
# <meta>, that Python and w3lib do not know (as codecs.lookup passes them: lower case, "-" as
# "_"), each with the codec that decodes it. Scrapy ignored such a declaration and guessed:
# a Hebrew page declared iso-8859-8-i came out as Vietnamese (cp1258) mojibake.
WEB_ENCODING_LABELS = {
    **dict.fromkeys(("iso_8859_8_i", "csiso88598i", "logical"), "iso8859_8"),
    **dict.fromkeys(("iso_8859_8_e", "csiso88598e", "visual", "iso88598"), "iso8859_8"),
    **dict.fromkeys(("iso_8859_6_i", "iso_8859_6_e", "csiso88596i", "csiso88596e"), "iso8859_6"),
    **{f"iso8859{n}": f"iso8859_{n}" for n in (2, 3, 4, 5, 6, 7, 10, 13, 14, 15)},
    "iso88591": "cp1252",
    "iso88599": "cp1254",
    "iso885911": "cp874",
    "dos_874": "cp874",
    "csisolatin9": "iso8859_15",
    "sun_eu_greek": "iso8859_7",
    **{f"x_cp125{n}": f"cp125{n}" for n in range(9)},
    **dict.fromkeys(("koi", "koi8"), "koi8_r"),
    **dict.fromkeys(("mac", "csmacintosh", "x_mac_roman"), "mac_roman"),
    **dict.fromkeys(("x_mac_cyrillic", "x_mac_ukrainian"), "mac_cyrillic"),
    **dict.fromkeys(("gb_2312", "csgb2312", "x_gbk"), "gb18030"),
    **dict.fromkeys(("cn_big5", "x_x_big5"), "big5hkscs"),
    **dict.fromkeys(("x_euc_jp", "cseucpkdfmtjapanese"), "euc_jp"),
    **dict.fromkeys(
        ("windows_949", "ks_c_5601_1989", "ksc_5601", "cseuckr", "csksc56011987", "iso_ir_149"),
        "cp949",
    ),
    "unicode_1_1_utf_8": "utf_8",
}


def _web_encoding(label: str) -> codecs.CodecInfo | None:
    """A codec search function (``codecs.register``) for ``WEB_ENCODING_LABELS``: registered
    as this module loads, before a crawl reads any response, it makes Scrapy and w3lib read
    these labels wherever a page declares them."""
    codec = WEB_ENCODING_LABELS.get(label)
    return codecs.lookup(codec) if codec else None


codecs.register(_web_encoding)


def skip_reason(failure: Failure) -> str:
    """A short name for why a request failed, used in ``focused/skipped/<reason>``."""
    error = failure.value
    message = str(error)
    if isinstance(error, HttpError):
        return f"http_{error.response.status}"
    if isinstance(error, BadRedirect):
        return "bad_redirect"
    if isinstance(error, IgnoreRequest):
        if "max redirections" in message:
            return "redirect_loop"
        if "exceeded DOWNLOAD_MAXSIZE" in message:  # a compression bomb, as it is inflated
            return "too_large"
        if message.startswith("Filtered offsite request"):  # Scrapy's OffsiteMiddleware
            return "offsite"
        return "ignored"  # robots.txt, HEAD check: each counts its own detail
    if isinstance(error, DownloadCancelledError) and ("max size" in message or not message):
        return "too_large"  # DOWNLOAD_MAXSIZE, told by Content-Length or hit as it arrived
    if isinstance(error, DownloadTimeoutError):
        return "timeout"
    if isinstance(error, BAD_COMPRESSION):
        return "bad_compression"
    return "download_error"


def error_message(error: BaseException) -> str:
    """One line saying why a request failed, for the seeds' error line and Scrapy's retry and
    robots.txt error lines (``ErrorsSaid``): Scrapy's message, its first line (a browser's
    error goes on with its call log), or what happened where Scrapy says nothing (a download
    cancelled as it grew past DOWNLOAD_MAXSIZE, a body cut short) or only the repr of Twisted's
    failures (a connection lost)."""
    if isinstance(error, DownloadCancelledError) and not str(error):
        return "the response grew past DOWNLOAD_MAXSIZE as it arrived"
    if other_family(error) or other_family(error.__cause__):
        return (
            "DOWNLOAD_BIND_ADDRESS is of another address family than the host's address (IPv4,"
            " IPv6): no connection from it reaches the host"
        )
    cause = error.__cause__
    if isinstance(error, DownloadFailedError) and isinstance(cause, ResponseFailed):
        return "; ".join(reason.getErrorMessage() for reason in cause.reasons)
    message = safe_str(error).strip().split("\n", 1)[0]
    if not message and isinstance(error, ResponseDataLossError):
        return "the response ended before the length it announced (data loss)"
    return message or type(error).__name__


def other_family(error: BaseException | None) -> bool:
    """Whether ``error`` is Twisted's failure to connect from DOWNLOAD_BIND_ADDRESS to a host
    of the other address family: an IPv6 bind address and an IPv4 host (Python's socket
    refuses the bind address: a TypeError), an IPv4 one and an IPv6 host (no address of the
    host's family for the bind address, EAI_ADDRFAMILY), a host name with addresses of one
    family alone (its lookup in the other finds none, EAI_NONAME or EAI_NODATA: the start
    checked that it binds). Scrapy said only those words, the last after a traceback."""
    if isinstance(error, TypeError):
        return str(error).startswith("AF_INET address must be")
    return isinstance(error, ConnectBindError) and error.osError in NO_ADDRESS_OF_FAMILY


class ErrorsSaid(logging.Filter):
    """Scrapy's error lines of a request that failed (``Gave up retrying <GET ...> (failed 3
    times): ...``, ``Error downloading <GET .../robots.txt>: ...``) with the error said as
    :func:`error_message` says it: Scrapy's lines ended with nothing for a body cut short, and
    with the repr of Twisted's failures for a lost connection."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, dict):
            record.args = {
                name: error_message(value) if isinstance(value, Exception) else value
                for name, value in record.args.items()
            }
        return True


def page_skip_reason(response: Response) -> str | None:
    """Why ``response`` is no page to extract (``focused/skipped/<reason>``), or None."""
    if not isinstance(response, TextResponse) or says_not_html(response.headers):
        return "not_html"
    if is_binary(response.body, response.encoding):
        return "binary_body"
    return None


def is_binary(body: bytes, encoding: str) -> bool:
    """``body``, decoded as ``encoding``, is no text: it starts as a binary format does, or has
    a NUL in its first bytes (as UTF-16 and UTF-32 text has, which is why those are spared)."""
    head = body[:SNIFFED_BYTES]
    if head.startswith(BINARY_SIGNATURES):
        return True
    return b"\0" in head and not encoding.lower().replace("_", "-").startswith(("utf-16", "utf-32"))


def says_not_html(headers: Headers) -> bool:
    """``headers`` make their response ``not_html`` whatever its body: a Content-Type that names
    no HTML. (Without one, the body is sniffed for the response's class.)"""
    return not is_html_type(headers.get(b"Content-Type", b"").decode("latin-1"))


def stops_not_html(headers: Headers, body_length: Any) -> bool:
    """A response with ``headers``, whose body is ``body_length`` bytes long, is to be downloaded
    no further than its headers: they make it ``not_html``, it is no redirect (a 3xx's body is
    archived as it came, ``WARC_DIR``; the headers carry no status, so ``Location`` tells), and
    its body is not short enough to be kept (``NOT_HTML_KEPT_SIZE``). An unknown length is
    None, -1 or Twisted's UNKNOWN_LENGTH (Scrapy's download handler), or a Content-Length no
    number (the browser)."""
    if b"Location" in headers or not says_not_html(headers):
        return False
    return not (isinstance(body_length, int) and 0 <= body_length <= NOT_HTML_KEPT_SIZE)


def is_html_type(content_type: str) -> bool:
    content_type = content_type.lower()
    return not content_type or any(kind in content_type for kind in HTML_TYPES)


# The encodings of Japanese pages, tried on a page that declares none before a guess is made.
JAPANESE_ENCODINGS = ("cp932", "euc_jp")  # Shift_JIS (as Windows writes it), EUC-JP
# Hiragana are the particles and endings of every Japanese sentence: a text decoded from another
# language's bytes has few or none, but for Korean's lone jamo (EUC-JP reads "ㅋㅋ" as "せせ").
JAPANESE_MIN_HIRAGANA = 0.1  # of the letters beyond ASCII
# Characters of a decoded page whose letters are counted: a page's share of hiragana or hangul
# shows in its first pages' worth, and counting a few megabytes took a tenth of a second.
SCRIPT_SAMPLE_CHARS = 100_000
_HIRAGANA = re.compile("[\u3041-\u309f]")
_LETTER_BEYOND_ASCII = re.compile(r"[^\W\d_\x00-\x7f]")


def _ks_x_1001_hangul() -> str:
    """The 2,350 hangul syllables of KS X 1001 (EUC-KR's rows 0xB0 to 0xC8), those Korean is
    written with; CP949 adds the other 8,822, which are what Shift_JIS reads as."""
    return "".join(
        bytes((row, cell)).decode("euc_kr")
        for row in range(0xB0, 0xC9)
        for cell in range(0xA1, 0xFF)
    )


_KOREAN_SYLLABLE = re.compile(f"[{_ks_x_1001_hangul()}]")


class CharsetMiddleware:
    """Decodes a page as Scrapy's TextResponse does, but in three cases where Scrapy's encoding
    is wrong:

    - a page that declares no encoding (no BOM, no charset in its Content-Type or a ``<meta>``):
      as Japanese when its bytes read as Japanese in Shift_JIS or EUC-JP and not as Korean in
      CP949 (``guess_encoding``). Scrapy takes ASCII, UTF-8 or charset_normalizer's best guess,
      which took short Japanese pages for Korean or Chinese (their bytes are valid CP949 and
      Big5 too): their text was stored as Korean syllables or Chinese characters, and their
      language as Korean or Chinese;
    - a page whose ``<meta>`` (its only declaration) says UTF-16 or UTF-32: as UTF-8, as the
      HTML standard asks and browsers do, since a declaration read as ASCII is no UTF-16 text.
      Scrapy decoded the page as UTF-16, and stored a page of CJK-looking garbage with no title
      and no link. (w3lib 2.6 gives such a ``<meta>`` as UTF-8 itself, and UTF-32, which the
      Encoding Standard does not know, as none: the page is then guessed, as UTF-8 here);
    - a page whose Content-Type or ``<meta>`` names a codec that decodes no page
      (``decodes_pages``: ``charset=base64``): that declaration is ignored;
    - a page whose Content-Type says UTF-16 or UTF-32 with no byte order, and that has no BOM:
      as little-endian, as browsers read it.
    """

    def process_response(self, request: Request, response: Response) -> Response:
        if not isinstance(response, TextResponse):
            return response
        encoding = _encoding_in_place_of_scrapys(response)
        return response if encoding is None else response.replace(encoding=encoding)


def _encoding_in_place_of_scrapys(response: TextResponse) -> str | None:
    if response._encoding or response._bom_encoding():
        return None  # the encoding given, the BOM's: taken as they are
    header = response._headers_encoding()
    if header in ("utf-16", "utf-32"):
        # No byte order, and no BOM to tell it: browsers read the label as little-endian, as
        # Windows writes it; Scrapy read big-endian, and stored a page of CJK-looking garbage.
        return f"{header}-le"
    if header is not None and decodes_pages(header):
        return None  # the Content-Type's: taken as it is
    in_body = response._body_declared_encoding()
    if in_body is not None and decodes_pages(in_body):
        if in_body.startswith(("utf-16", "utf-32")):  # Python's names: utf-16, utf-16-le, ...
            return "utf-8"
        return None if header is None else in_body  # Scrapy would take the header's
    return guess_encoding(response.body)


@cache
def decodes_pages(encoding: str) -> bool:
    """Python's codec of that name decodes bytes into text with replacement characters: for a
    charset of base64, zlib, rot13, hex, idna, punycode or undefined (codecs Python finds by
    those names) Scrapy raised, and the page was lost with a traceback. Such a declaration is
    ignored, as browsers ignore a label they do not know."""
    try:
        b"caf\xc3\xa9 \x80\xff-\xff".decode(encoding, "replace")
    except (LookupError, UnicodeError):
        return False
    return True


def guess_encoding(body: bytes) -> str | None:
    """The encoding of a body that declares none: ASCII, UTF-8, a Japanese encoding its bytes
    read as Japanese in, else charset_normalizer's best guess (None when it has none: Scrapy
    then decodes as ASCII, with replacement characters)."""
    for encoding in ("ascii", "utf-8"):
        if _decoded(body, encoding) is not None:
            return resolve_encoding(encoding)
    for encoding in JAPANESE_ENCODINGS:
        text = _decoded(body, encoding)
        if text is not None and _reads_as_japanese(text):
            if _reads_as_korean(body):  # whichever Japanese encoding read it
                break
            return encoding
    best = from_bytes(body).best()
    return resolve_encoding(best.encoding) if best else None


def _decoded(body: bytes, encoding: str) -> str | None:
    try:
        return body.decode(encoding)
    except UnicodeError:
        return None


def _reads_as_japanese(text: str) -> bool:
    """At least ``JAPANESE_MIN_HIRAGANA`` of the text's letters beyond ASCII are hiragana."""
    text = text[:SCRIPT_SAMPLE_CHARS]
    hiragana = len(_HIRAGANA.findall(text))
    return hiragana > 0 and hiragana >= JAPANESE_MIN_HIRAGANA * _letters_beyond_ascii(text)


def _reads_as_korean(body: bytes) -> bool:
    """The body decodes as CP949, and half its letters beyond ASCII or more are KS X 1001 hangul
    (a text with as many jamo as syllables, "ㅋㅋ 진짜", is still Korean)."""
    text = _decoded(body, "cp949")
    if text is None:
        return False
    text = text[:SCRIPT_SAMPLE_CHARS]
    return 2 * len(_KOREAN_SYLLABLE.findall(text)) >= _letters_beyond_ascii(text)


def _letters_beyond_ascii(text: str) -> int:
    return len(_LETTER_BEYOND_ASCII.findall(text))


class HeadCheckMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.maxsize = crawler.settings.getint("DOWNLOAD_MAXSIZE")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> HeadCheckMiddleware:
        if not crawler.settings.getbool("HEAD_CHECK"):
            raise NotConfigured
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        # robots.txt fetches carry dont_obey_robotstxt: a HEAD for them would wait for itself.
        # A recrawl's conditional GET (CONDITIONAL_HEADERS) is its own check: an unchanged page
        # answers 304 without a body, and a HEAD before it doubled the requests of a recrawl
        # (without the validators its full answer told nothing the 304 does not; with them, a
        # 304 carries no Content-Type to check).
        if (
            request.method != "GET"
            or request.meta.get("dont_obey_robotstxt")
            or any(header in request.headers for header in CONDITIONAL_HEADERS)
        ):
            return
        head = Request(
            request.url,
            method="HEAD",
            # The GET has passed the robots.txt check already.
            meta={
                "dont_obey_robotstxt": True,
                "dont_redirect": True,
                "dont_retry": True,  # the GET has its retries
                "handle_httpstatus_all": True,
            },
            dont_filter=True,
        )
        self.stats.inc_value("focused/head_checks")
        # Here: focused.downloader imports focused.robots, which imports this module.
        from focused.downloader import NotSent
        from focused.robots import STOPPED_WAITING_META

        # The GET waited for its host's robots.txt as the crawl stopped: the HEAD, which its
        # slot does not send in the GET's stead, is counted as having waited so.
        if request.meta.pop(STOPPED_WAITING_META, False):
            head.meta[STOPPED_WAITING_META] = True
        try:
            response = await self.crawler.engine.download_async(head)
        except NotSent:
            raise  # held in its slot as the crawl was stopped: the GET is not sent either
        except Exception:  # whatever broke the HEAD (a server that drops them) may spare the GET
            self.stats.inc_value("focused/head_check_failures")
            return  # the GET will tell
        if response.status >= 400:
            return  # the GET will tell
        content_type = response.headers.get(b"Content-Type", b"").decode("latin-1")
        if not is_html_type(content_type):
            self.stats.inc_value("focused/skipped/head_not_html")
            raise IgnoreRequest(f"HEAD says {content_type}: not HTML")
        length = response.headers.get(b"Content-Length")
        if self.maxsize and length and length.isdigit() and int(length) > self.maxsize:
            self.stats.inc_value("focused/skipped/head_too_large")
            raise IgnoreRequest(f"HEAD says {int(length)} bytes: over DOWNLOAD_MAXSIZE")


class NotHtmlStopMiddleware:
    """Ends the download of a page whose headers make it ``not_html`` (``says_not_html``), with
    the body received so far (none): the spider skips it for its headers alone, and Scrapy
    downloaded it whole, up to ``DOWNLOAD_MAXSIZE``, first. The response still reaches the
    spider, which counts it as before (``focused/skipped/not_html``, a response of the page
    budget); ``focused/not_html_stopped`` counts the downloads ended so."""

    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats
        self.maxsize = crawler.settings.getint("DOWNLOAD_MAXSIZE")
        crawler.signals.connect(self.headers_received, signal=signals.headers_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NotHtmlStopMiddleware:
        return cls(crawler)

    def headers_received(self, headers: Headers, body_length: Any, request: Request) -> None:
        if (
            request.method != "GET"  # HEAD_CHECK's HEAD has no body to spare
            or request.callback is NO_CALLBACK  # robots.txt: read by its middleware, as text
            or not stops_not_html(headers, body_length)
        ):
            return
        maxsize = request.meta.get("download_maxsize", self.maxsize)
        if maxsize and isinstance(body_length, int) and body_length > maxsize:
            return  # Scrapy cancels it unread, as too_large
        self.stats.inc_value("focused/not_html_stopped")
        raise StopDownload(fail=False)


class BadRedirect(IgnoreRequest):
    """A 3xx whose Location leads nowhere."""


# The request headers of a recrawl's conditional request (focused.refresh.VALIDATORS), whose
# values belong to the page they were sent for.
CONDITIONAL_HEADERS = (b"If-None-Match", b"If-Modified-Since")


class _RedirectTarget:
    """A redirect's request: its target without its ``user:password@`` (Twisted took it for part
    of the host name, "invalid hostname", and Scrapy logged the password in its redirect line),
    and without the validators of the page redirected from, which are no validators of the
    target: a target not modified since the date a recrawl sent would have answered 304, and
    the page been recorded unchanged whatever the target holds. Nor the downloader slot of the
    page redirected from (Scrapy's kept it): a target on another host was sent in that slot,
    past its own host's Crawl-delay and concurrency.

    A target whose host name no resolver can look up (a label empty or over 63 characters:
    ``a..b.org``) raises ``ValueError``, as one no request can be made of: the resolver's IDNA
    encoding failed with six tracebacks, and the request hung until DOWNLOAD_TIMEOUT. Seeds and
    links are checked for it as they are made (``focused.canonical.is_sendable``). So does one
    whose host holds a character no host can have (``exa mple.org``, ``exa%20mple.org``:
    ``focused.canonical.host_as_read``), which w3lib 2.6 refuses as Scrapy reads the Location,
    and 2.5 let through to fail in the downloader ("Invalid URI", its robots.txt's error line);
    its escapes are decoded (``ex%41mple.org`` is ``example.org``), as by 2.6 and browsers."""

    def _build_redirect_request(
        self, source_request: Request, response: Response, *, url: str, **kwargs: Any
    ) -> Request:
        parts = decode_host(drop_userinfo(urlsplit(url)))
        if parts.hostname and not parts.netloc.startswith("["):  # an IPv6 literal: no name
            host_as_read(parts.hostname)  # ValueError for a host decode_host left: no host
        try:
            (parts.hostname or "").encode("idna")
        except UnicodeError as exc:
            raise ValueError(f"host {parts.hostname} cannot be looked up ({exc})") from None
        url = urlunsplit(parts)
        request = super()._build_redirect_request(source_request, response, url=url, **kwargs)
        for header in CONDITIONAL_HEADERS:
            request.headers.pop(header, None)
        # The downloader keys the target's slot by its own host (or address): the target is
        # paced, held by Retry-After and counted as its host's, not as the host redirected from.
        request.meta.pop(Downloader.DOWNLOAD_SLOT, None)
        return request


class RedirectMiddleware(_RedirectTarget, ScrapyRedirect):
    """Scrapy's, except that a redirect whose Location leads nowhere raises ``BadRedirect``
    (``focused/skipped/bad_redirect``, the request's errback): an empty Location, which Scrapy
    took for the request's own URL (then dropped by the dupefilter, counted nowhere), one no
    request can be made of (``javascript:``, a port out of range: Scrapy's ``ValueError``, a
    ``download_error``), and one to another scheme than http(s) (``ftp:``, ``data:``: Scrapy
    handed on the 3xx, an ``http_302``). A redirect to another spelling of the URL requested
    (the server's order of the query, its ``index.html``) is let past the dupefilter, which
    dropped it as the request itself."""

    def process_response(self, request: Request, response: Response) -> Request | Response:
        if not self._follows(request, response):
            return response
        location = response.headers[b"Location"].strip()
        if not location:
            raise BadRedirect(f"{response.status} with an empty Location")
        try:
            result = super().process_response(request, response)
        except ValueError as exc:
            raise BadRedirect(
                f"{response.status} to a URL no request can be made of: {exc}"
            ) from None
        if result is response:  # it follows only http(s)
            raise BadRedirect(f"{response.status} to a URL of another scheme than http(s)")
        if result.url != request.url and self._same_url(result, request):
            # The server's own spelling of the canonical URL requested (its query in its order,
            # its index.html): the dupefilter took it for the request itself, and the page was
            # lost. Let through as a retry is; a loop between spellings ends at
            # REDIRECT_MAX_TIMES (redirect_loop).
            result.dont_filter = True
        return result

    def _same_url(self, request: Request, other: Request) -> bool:
        fingerprint = self.crawler.request_fingerprinter.fingerprint
        return fingerprint(request) == fingerprint(other)

    def _follows(self, request: Request, response: Response) -> bool:
        """A redirect that Scrapy's middleware acts on, by its own test: one the request (or
        the spider) did not ask to see as it is."""
        if response.status not in REDIRECT_STATUSES or b"Location" not in response.headers:
            return False
        meta = request.meta
        asked = (
            meta.get("handle_httpstatus_list", ()),
            getattr(self.crawler.spider, "handle_httpstatus_list", ()),
        )
        return not (
            meta.get("dont_redirect")
            or meta.get("handle_httpstatus_all")
            or any(response.status in statuses for statuses in asked)
        )


class MetaRefreshMiddleware(_RedirectTarget, ScrapyMetaRefresh):
    """Scrapy's, except that a page whose meta refresh leads nowhere is kept, as a browser shows
    it: one naming a URL no request can be made of (``javascript:``, a port out of range), for
    which Scrapy's raised and the page was lost as a bare download error, counted as
    ``focused/skipped/bad_url`` like such a link; and one refreshing to itself, whose redirect
    the dupefilter dropped.

    The refresh is read as browsers read it (``refresh_of``), from the page's parsed
    ``<meta http-equiv="refresh">``, and given to Scrapy's through its cache (the only way in).
    w3lib read ``content="0; url=&quot;/next&quot;"`` as a refresh of the page to itself (it
    decoded the quotes before it split the attributes), and none in ``content="0; /next"`` or
    ``content="0; URL = /next"``: the page it led to was lost."""

    def process_response(self, request: Request, response: Response) -> Request | Response:
        try:
            if isinstance(response, HtmlResponse):
                _metaref_cache[response] = self._refresh(response)
            result = super().process_response(request, response)
        except ValueError:
            self.crawler.stats.inc_value("focused/skipped/bad_url")
            return response
        if isinstance(result, Request):
            fingerprint = self.crawler.request_fingerprinter.fingerprint
            if fingerprint(result) == fingerprint(request):
                return response
        return result

    def _refresh(self, response: HtmlResponse) -> tuple[None, None] | tuple[float, str]:
        """The first refresh the page declares outside ``METAREFRESH_IGNORE_TAGS``, as Scrapy's
        ``get_meta_refresh`` gives it: (seconds, absolute URL), or (None, None)."""
        tags = filter(_TAG_NAME.fullmatch, self._ignore_tags)  # names, not XPath
        outside = "".join(f"[not(ancestor::{tag})]" for tag in tags)
        equiv = "translate(@http-equiv, 'REFSH', 'refsh')"
        for content in response.xpath(f"//meta[{equiv}='refresh']{outside}/@content").getall():
            refresh = refresh_of(content)
            if refresh is not None:
                seconds, url = refresh
                url = url.strip(_C0_OR_SPACE)  # as the URL parser strips it
                url = safe_url_string(url, response.encoding) if url else ""
                return float(seconds), urljoin(get_base_url(response), url)
        return None, None


_ASCII_WHITESPACE = "\t\n\f\r "
_C0_OR_SPACE = "".join(map(chr, range(0x21)))
_TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]*")


def refresh_of(content: str) -> tuple[int, str] | None:
    """The seconds and the URL ("": the page itself) of a ``<meta http-equiv="refresh">``'s
    content, read by the HTML standard's shared declarative refresh steps; None when it
    declares no refresh (no number first)."""
    rest = content.lstrip(_ASCII_WHITESPACE)
    after_digits = rest.lstrip("0123456789")
    if after_digits == rest and not rest.startswith("."):
        return None
    seconds = int(rest[: len(rest) - len(after_digits)] or 0)
    rest = after_digits.lstrip("0123456789.")
    if rest:
        if rest[0] not in ";," + _ASCII_WHITESPACE:
            return None
        rest = rest.lstrip(_ASCII_WHITESPACE)
        rest = rest[1:] if rest[:1] in (";", ",") else rest
        rest = rest.lstrip(_ASCII_WHITESPACE)
    if rest[:1] in ("u", "U"):
        # "url=" and the spaces around its "=" go; a word that only starts with u is the URL
        after_url = rest[3:].lstrip(_ASCII_WHITESPACE)
        if rest[1:3].lower() != "rl" or not after_url.startswith("="):
            return seconds, rest
        rest = after_url[1:].lstrip(_ASCII_WHITESPACE)
    if rest[:1] in ("'", '"'):
        return seconds, rest[1:].partition(rest[0])[0]
    return seconds, rest
