"""The HTTP responses of a crawl kept as WARC (ISO 28500, WARC/1.1), for archives (``WARC_DIR``).

The store keeps each page's extracted text only; with ``WARC_DIR`` set, each run of a crawl
also writes one new file, ``WARC_DIR/<crawl_id>-<UTC start time>-<hostname>-<pid>.warc.gz``:
a resumed JOBDIR crawl and each process of a shared (Redis) crawl write their own, and a file
is never appended to. It holds a ``warcinfo`` record (the software, the crawl's id, strategy
and query), then, for each page stored with its text, as its item leaves the pipelines
(``item_scraped``):

- a ``response`` record (``application/http; msgtype=response``): the status line, the
  response's headers and its body, under ``WARC-Target-URI`` (the URL fetched: after
  redirects, before canonicalization; the store's ``url`` is its canonical form, or the
  page's rel=canonical), ``WARC-Date`` (the page's ``fetched_at``), ``WARC-IP-Address`` when
  the download handler knew it, and its block and payload digests (SHA-1);
- the ``request`` record of the request that got it, ``WARC-Concurrent-To`` the response.

The body is written as Scrapy has it, not as it came over the wire: ``HttpCompressionMiddleware``
has decompressed it, and Twisted has undone a chunked transfer. So the headers that described
the wire's bytes, ``Content-Encoding`` and ``Transfer-Encoding``, are left out, and
``Content-Length`` is the length of the body written: a reader (pywb, warcio) then reads the
payload as it is. The request's headers are Scrapy's, with the ``Host`` header the downloader
adds and without ``Authorization`` and ``Proxy-Authorization``: an archive is handed on, and
must not hand on the crawl's passwords. Header values that are not ASCII are percent-encoded
(warcio, RFC 8187; read as UTF-8, latin-1 if they are not), but a ``Location``, written as the
URL Scrapy follows (``safe_url_string``), so that a replay of a redirect leads where the crawl
went.

A page rendered by Chromium (``-a render=``, ``focused.render``) is not an HTTP payload: the
HTML is the browser's DOM after the page's scripts ran, and scrapy-playwright keeps neither the
bytes the server sent nor the request the browser made. It is written as a ``resource`` record
(``text/html``, the rendered HTML) under the URL, with no request record.

A page stored without its text gets no record: a duplicate (``duplicate_of``) is archived as the
page it duplicates, and a ``noindex`` page asked not to be kept. Nor do pages the crawl fetched
but did not store (``STORE_MIN_RELEVANCE``, a failed store), or robots.txt.

A redirect (a 3xx with a ``Location``, to a GET of a page) gets its ``response`` and
``request`` records as it is downloaded (``response_downloaded``), before ``RedirectMiddleware``
follows it: the page's records are under the URL redirected to, and a replay of the URL a link
named must find the redirect. Its body is as it came (dechunked, not decompressed: its
``Content-Encoding`` stays), and it is written whether or not the page it leads to is stored.
Not archived, and so not replayed (the page's ``requested_url`` names them in the store): a
page whose meta refresh Scrapy follows before the spider sees it (``MetaRefreshMiddleware``),
and the redirects Chromium follows for a rendered page (scrapy-playwright hands on the last
response only).

``scrapy recrawl`` with ``WARC_DIR`` writes a file of its own the same way (its ``warcinfo``
names the crawl and the recrawl's policy): the records of each page whose new text it stores, a
page that changed, and of the redirects it meets. A page unchanged (fetched in full or answered
304), gone, or now ``noindex`` gets none: its text in the store is the one a file of an earlier
run holds, or none.

Each record is its own gzip member, written whole and flushed as the page is stored: a crawl
killed (``kill -9``) leaves a file readable up to its last whole record. A write that fails (a
full disk) is one error line; the file is cut back to its last whole record and the spider
closed with reason ``warc_failed`` (the ``crawl`` command exits 1; the pages stored stay, a
JOBDIR resumes). The records are written once the page is stored, so the store may hold a page
whose records were not written (the crawl killed in between, the write that failed): a resumed
crawl does not fetch it again. A ``WARC_DIR`` that cannot be written is refused before the
crawl starts (``focused.settingchecks.check_output_folders``).

Stats: ``focused/warc/records``, ``focused/warc/bytes`` (compressed, as written).
"""

from __future__ import annotations

import io
import logging
import os
import re
import socket
from contextlib import suppress
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any

import scrapy
from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.httpobj import urlparse_cached
from w3lib.url import safe_url_string
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from focused.extract import is_rendered
from focused.robotsmeta import is_noindex
from focused.stopping import WARC_FAILED, close_spider_now

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.internet.defer import Deferred
    from warcio.recordloader import ArcWarcRecord

logger = logging.getLogger(__name__)

RECORDS_STAT = "focused/warc/records"
BYTES_STAT = "focused/warc/bytes"
# What described the bytes on the wire, not the body Scrapy hands over (decompressed, dechunked).
WIRE_HEADERS = ("Content-Encoding", "Transfer-Encoding", "Content-Length")
# A redirect's body is as it came, but dechunked: it is written before any middleware reads it.
DOWNLOADED_HEADERS = ("Transfer-Encoding", "Content-Length")
# Credentials (HTTPAUTH_*, a proxy's user): an archive is read by others; said in the docstring.
SECRET_HEADERS = ("Authorization", "Proxy-Authorization")


def warc_path(folder: Path, crawl_id: str, started: datetime) -> Path:
    """The file of one run: per crawl, start time, host and process, so that no run shares one."""
    name = re.sub(r"[^\w.-]", "_", crawl_id)  # a crawl id may hold ':'
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    host = re.sub(r"[^\w.-]", "_", socket.gethostname())
    return folder.absolute() / f"{name}-{stamp}-{host}-{os.getpid()}.warc.gz"


def warc_date(when: datetime) -> str:
    return datetime_to_iso_date(when.astimezone(UTC).replace(tzinfo=None), use_micros=True)


def _header_lines(headers: Any, leave_out: Iterable[str] = ()) -> list[tuple[str, str]]:
    """Scrapy's headers (bytes, a list of values per name) as warcio's lines, one per value."""
    left_out = {name.lower() for name in leave_out}
    return [
        (name.decode("latin-1"), _header_value(name, value))
        for name, values in headers.items()
        if name.decode("latin-1").lower() not in left_out
        for value in values
    ]


def _header_value(name: bytes, value: bytes) -> str:
    """A ``Location`` as the URL RedirectMiddleware follows (ASCII, percent-encoded UTF-8), so
    that a replay of the redirect leads to the URL the page is archived under; any other value
    read as UTF-8 if it is (latin-1 if not), for warcio to percent-encode once."""
    if name.lower() == b"location":
        return safe_url_string(value)
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def _status_line(response: Response) -> tuple[str, str]:
    """(protocol, "status reason") of the response; HTTP/2 (``h2``) written ``HTTP/2``, an
    unknown protocol ``HTTP/1.1``."""
    protocol = response.protocol or ""
    if protocol == "h2":
        protocol = "HTTP/2"
    elif not protocol.startswith("HTTP/"):
        protocol = "HTTP/1.1"
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = ""
    return protocol, f"{response.status} {reason}".rstrip()


def _request_block(request: Request) -> StatusAndHeaders:
    parsed = urlparse_cached(request)
    target = parsed.path or "/"
    if parsed.query:
        target += "?" + parsed.query
    lines = _header_lines(request.headers, SECRET_HEADERS)
    if not any(name.lower() == "host" for name, _ in lines):
        host = parsed.netloc.rpartition("@")[2]  # without user:password
        lines.insert(0, ("Host", host))
    return StatusAndHeaders(f"{request.method} {target} HTTP/1.1", lines, is_http_request=True)


def page_records(
    writer: WARCWriter, response: Response, fetched_at: datetime
) -> list[ArcWarcRecord]:
    """The records of a page: its response and request, or the resource of a rendered page."""
    if not is_rendered(response):
        return exchange_records(writer, response, response.request, fetched_at, WIRE_HEADERS)
    # The page as the browser held it, in UTF-8: scrapy-playwright encodes it in the page's
    # charset under Python's name for it (cp932 for a Shift_JIS page), which a WARC reader does
    # not know as a charset.
    body = response.text.encode("utf-8")
    return [
        writer.create_warc_record(
            response.url,
            "resource",
            payload=io.BytesIO(body),
            length=len(body),
            warc_content_type="text/html; charset=utf-8",
            warc_headers_dict={"WARC-Date": warc_date(fetched_at)},
        )
    ]


def exchange_records(
    writer: WARCWriter,
    response: Response,
    request: Request | None,
    fetched_at: datetime,
    undone: Iterable[str],
) -> list[ArcWarcRecord]:
    """A ``response`` record and the ``request`` record of the request that got it (none for a
    response made by hand). ``undone``: the headers that described what Scrapy has undone of
    the wire's bytes, left out; ``Content-Length`` is written for the body as it is."""
    uri = response.url
    date = warc_date(fetched_at)
    body = response.body
    warc_headers = {"WARC-Date": date}
    if response.ip_address is not None:
        warc_headers["WARC-IP-Address"] = str(response.ip_address)
    protocol, status = _status_line(response)
    lines = _header_lines(response.headers, undone)
    lines.append(("Content-Length", str(len(body))))
    answer = writer.create_warc_record(
        uri,
        "response",
        payload=io.BytesIO(body),
        length=len(body),
        warc_headers_dict=warc_headers,
        http_headers=StatusAndHeaders(status, lines, protocol=protocol),
    )
    if request is None:
        return [answer]
    body = request.body
    asked = writer.create_warc_record(
        uri,
        "request",
        payload=io.BytesIO(body),
        length=len(body),
        warc_headers_dict={"WARC-Date": date},
        http_headers=_request_block(request),
    )
    asked.rec_headers.add_header("WARC-Concurrent-To", answer.rec_headers["WARC-Record-ID"])
    return [answer, asked]


def warcinfo_record(writer: WARCWriter, path: Path, info: Mapping[str, Any]) -> ArcWarcRecord:
    fields = {
        "software": f"focused (Scrapy {scrapy.__version__})",
        "format": "WARC File Format 1.1",
        "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        "hostname": socket.gethostname(),
        **info,
    }
    return writer.create_warcinfo_record(path.name, fields)


class WarcFile:
    """One WARC file, made new (``x``: never another's, never appended to). Each record is a
    gzip member, written whole and flushed; a write that fails leaves the file cut back to its
    last whole record, and raises the OSError."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # Unbuffered: what a failed write leaves is known, and what was written is in the file.
        self._file = path.open("xb", buffering=0)
        self._writer = WARCWriter(None, gzip=True, warc_version="1.1")
        self.size = 0  # the end of the last whole record

    @property
    def writer(self) -> WARCWriter:
        """The record builder (its records' ids, digests)."""
        return self._writer

    def write(self, records: Iterable[ArcWarcRecord]) -> int:
        """Write the records, each a gzip member; return the bytes written."""
        buffer = self._writer.out = io.BytesIO()  # whole, before any byte reaches the file
        for record in records:
            self._writer.write_record(record)
        view = memoryview(buffer.getbuffer())
        written = len(view)
        try:
            while view:  # a write cut short by a full disk fails at the next
                view = view[self._file.write(view) :]
        except OSError:
            with suppress(OSError):
                self._file.truncate(self.size)
            raise
        self.size += written
        return written

    def close(self) -> None:
        with suppress(OSError):
            self._file.close()


class WarcExport:
    """Writes the WARC file of a crawl's run (``WARC_DIR``); see the module's docstring."""

    def __init__(self, crawler: Crawler, folder: Path) -> None:
        self.crawler = crawler
        self.folder = folder
        self.file: WarcFile | None = None
        self._closing: Deferred[None] | None = None  # keeps the close task referenced

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WarcExport:
        folder = crawler.settings.get("WARC_DIR")
        if not folder:
            raise NotConfigured  # WARC_DIR is not set (no message: no warning in the log)
        export = cls(crawler, Path(folder))
        crawler.signals.connect(export.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(export.item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(export.response_downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(export.spider_closed, signal=signals.spider_closed)
        return export

    def spider_opened(self, spider: Spider) -> None:
        crawl_id = getattr(spider, "crawl_id", spider.name)
        path = warc_path(self.folder, crawl_id, datetime.now(UTC))
        config = getattr(spider, "config", None)
        info = {
            "crawl_id": crawl_id,
            "strategy": getattr(config, "strategy", None),
            "query": getattr(config, "query", None),
            "recrawl_policy": getattr(spider, "policy", None),  # RecrawlSpider's
        }
        info = {name: value for name, value in info.items() if value is not None}
        try:
            self.file = WarcFile(path)
        except OSError as exc:
            self._give_up(path, exc)
            return
        logger.info("writing the crawl's WARC records to %s", path)
        self._write([warcinfo_record(self.file.writer, path, info)])

    def item_scraped(self, item: Any, response: Response, spider: Spider) -> None:
        if self.file is None:
            return
        page = ItemAdapter(item)
        # A recrawl's update holds "text" only when the page changed (and its items with no
        # response, pages it could not request, none).
        if page.get("text") is None or page.get("duplicate_of") or is_noindex(page):
            return  # stored without its text: see the module's docstring
        fetched_at = datetime.fromisoformat(page["fetched_at"])
        self._write(page_records(self.file.writer, response, fetched_at))

    def response_downloaded(self, response: Response, request: Request, spider: Spider) -> None:
        """A redirect the run was answered (a 3xx with a Location, to a GET of a page): written
        as it comes, before RedirectMiddleware follows it, so that a replay of the URL a link
        named leads to the page stored under the URL it redirected to."""
        if (
            self.file is None
            or not 300 <= response.status < 400
            or b"Location" not in response.headers
            or request.method != "GET"  # HEAD_CHECK's HEAD: the GET that follows is archived
            or request.callback is NO_CALLBACK  # robots.txt, and each of its redirects
        ):
            return
        now = datetime.now(UTC)
        self._write(exchange_records(self.file.writer, response, request, now, DOWNLOADED_HEADERS))

    def _write(self, records: list[ArcWarcRecord]) -> None:
        assert self.file is not None
        try:
            written = self.file.write(records)
        except OSError as exc:
            self.file.close()
            path, self.file = self.file.path, None
            self._give_up(path, exc)
            return
        stats = self.crawler.stats
        stats.inc_value(RECORDS_STAT, len(records))
        stats.inc_value(BYTES_STAT, written)

    def _give_up(self, path: Path, exc: OSError) -> None:
        logger.error("the WARC file %s cannot be written: %s", path, exc.strerror or exc)
        if self._closing is None:
            self._closing = close_spider_now(self.crawler, WARC_FAILED)

    def spider_closed(self, spider: Spider) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
