"""The crawl's WARC file (``WARC_DIR``, ``focused.warc``): its records, written and read back
with warcio, and one small crawl of the replay web."""

from __future__ import annotations

import base64
import errno
import gzip
import hashlib
import io
import ipaddress
import json
import logging
import os
import signal
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse, Request, Response
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.test import get_crawler
from warcio.archiveiterator import ArchiveIterator

from focused import warc
from focused.commands.crawl import run_failed
from focused.items import PageItem
from focused.replayweb import ReplayServer
from focused.warc import (
    WarcExport,
    WarcFile,
    page_records,
    warc_date,
    warc_path,
    warcinfo_record,
)
from tests.conftest import BIRD_QUERY, BIRD_SEED, Crawl, run_crawl
from tests.sites import Reply, Site, html
from tests.test_crash_resume import job_command, run_to_the_end, start_until_fetched

FETCHED_AT = datetime(2026, 12, 5, 3, 4, 5, 678901, tzinfo=UTC)
BODY = "<html><title>Albatross</title><p>wings and feathers é</p></html>".encode()


def sha1(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def page_response(url: str = "http://127.0.0.1:25501/wiki/Albatross", **meta) -> HtmlResponse:
    headers = {"User-Agent": "focused-test", "Authorization": "Basic YWxpY2U6czNjcmV0"}
    request = Request(url, headers=headers, meta=meta)
    return HtmlResponse(
        url,
        status=200,
        # As HttpCompressionMiddleware leaves them: the body decompressed, these describe the
        # bytes on the wire.
        headers={
            "Content-Type": "text/html; charset=utf-8",
            "Content-Encoding": "gzip",
            "Transfer-Encoding": "chunked",
            "Content-Length": "12",
            "Set-Cookie": ["a=1", "b=2"],
        },
        body=BODY,
        request=request,
        ip_address=ipaddress.ip_address("127.0.0.1"),
        protocol="HTTP/1.1",
    )


def records(data: bytes) -> list[tuple]:
    """(type, WARC headers, HTTP headers, payload) of each record, digests checked."""
    return [
        (
            record.rec_type,
            dict(record.rec_headers.headers),
            record.http_headers,
            record.content_stream().read(),
        )
        for record in ArchiveIterator(io.BytesIO(data), check_digests="raise")
    ]


def test_a_page_is_a_response_record_and_its_request(tmp_path):
    path = tmp_path / "crawl.warc.gz"
    file = WarcFile(path)
    info = {"crawl_id": "c1", "strategy": "bfs", "query": "birds"}
    file.write([warcinfo_record(file.writer, path, info)])
    file.write(page_records(file.writer, page_response(), FETCHED_AT))
    file.close()
    (info_type, info_headers, _, info_body), response, request = records(path.read_bytes())

    assert (info_type, info_headers["WARC-Filename"]) == ("warcinfo", "crawl.warc.gz")
    fields = dict(line.split(": ", 1) for line in info_body.decode().splitlines())
    assert fields["software"].startswith("focused (Scrapy 2.")
    assert fields["format"] == "WARC File Format 1.1"
    assert (fields["crawl_id"], fields["strategy"], fields["query"]) == ("c1", "bfs", "birds")

    kind, headers, http, payload = response
    assert kind == "response"
    assert headers["Content-Type"] == "application/http; msgtype=response"
    assert headers["WARC-Target-URI"] == "http://127.0.0.1:25501/wiki/Albatross"
    assert headers["WARC-Date"] == "2026-12-05T03:04:05.678901Z"
    assert headers["WARC-IP-Address"] == "127.0.0.1"
    assert headers["WARC-Payload-Digest"] == sha1(BODY)
    # The block: the status line and headers, then the body (its digest checked on reading).
    assert (http.protocol, http.statusline) == ("HTTP/1.1", "200 OK")
    assert payload == BODY
    # The body as Scrapy has it: decompressed, dechunked, its length.
    assert http.get_header("Content-Encoding") is None
    assert http.get_header("Transfer-Encoding") is None
    assert http.get_header("Content-Length") == str(len(BODY))
    assert [v for name, v in http.headers if name == "Set-Cookie"] == ["a=1", "b=2"]

    kind, req_headers, req_http, _ = request
    assert kind == "request"
    assert req_headers["WARC-Concurrent-To"] == headers["WARC-Record-ID"]
    assert req_headers["WARC-Target-URI"] == headers["WARC-Target-URI"]
    assert req_headers["WARC-Date"] == headers["WARC-Date"]
    assert (req_http.protocol, req_http.statusline) == ("GET", "/wiki/Albatross HTTP/1.1")
    assert req_http.get_header("Host") == "127.0.0.1:25501"
    assert req_http.get_header("User-Agent") == "focused-test"
    assert req_http.get_header("Authorization") is None  # no password in the archive


def test_a_rendered_page_is_a_resource_record(tmp_path):
    path = tmp_path / "crawl.warc.gz"
    file = WarcFile(path)
    file.write(page_records(file.writer, page_response(playwright=True), FETCHED_AT))
    file.close()
    [(kind, headers, http, payload)] = records(path.read_bytes())
    assert kind == "resource"
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["WARC-Target-URI"] == "http://127.0.0.1:25501/wiki/Albatross"
    assert http is None and payload == BODY


def test_a_rendered_page_in_another_charset_is_a_resource_record_in_utf_8(tmp_path):
    """scrapy-playwright encodes a rendered page in its charset under Python's name for it: the
    record said charset=cp932, which no WARC reader knows (Shift_JIS is the IANA name)."""
    text = "<html><title>鳥</title><p>羽と巣 birds</p></html>"
    url = "http://127.0.0.1:25501/wiki/Tori"
    rendered = HtmlResponse(
        url,
        body=text.encode("cp932"),
        encoding="cp932",
        request=Request(url, meta={"playwright": True}),
    )
    path = tmp_path / "crawl.warc.gz"
    file = WarcFile(path)
    file.write(page_records(file.writer, rendered, FETCHED_AT))
    file.close()
    [(kind, headers, _, payload)] = records(path.read_bytes())
    assert kind == "resource"
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert payload.decode("utf-8") == text


def test_each_record_is_its_own_gzip_member_and_a_cut_file_reads_to_its_last_whole_record(
    tmp_path,
):
    """As ``kill -9`` leaves a file: every record before the one cut short is read."""
    path = tmp_path / "crawl.warc.gz"
    file = WarcFile(path)
    ends = []
    for number in range(3):
        url = f"http://127.0.0.1:25501/wiki/P{number}"
        file.write(page_records(file.writer, page_response(url), FETCHED_AT))
        ends.append(file.size)
        assert path.stat().st_size == file.size  # in the file as written, not in a buffer
    file.close()
    data = path.read_bytes()
    # Each page's two records end where the file ended after it: separate members.
    assert len(gzip.decompress(data[: ends[0]])) > 0
    assert len(gzip.decompress(data[ends[0] : ends[1]])) > 0
    cut = data[: ends[1] + 30]  # within the third response record
    read = [(kind, headers["WARC-Target-URI"]) for kind, headers, _, _ in records(cut)]
    assert read == [
        ("response", "http://127.0.0.1:25501/wiki/P0"),
        ("request", "http://127.0.0.1:25501/wiki/P0"),
        ("response", "http://127.0.0.1:25501/wiki/P1"),
        ("request", "http://127.0.0.1:25501/wiki/P1"),
    ]


def test_no_warc_dir_no_extension():
    with pytest.raises(NotConfigured):
        WarcExport.from_crawler(get_crawler())


def test_a_file_is_never_written_twice(tmp_path):
    path = warc_path(tmp_path, "20261205T030405-abc:1", FETCHED_AT)
    assert path.name.startswith("20261205T030405-abc_1-20261205T030405Z-")
    assert path.name.endswith(".warc.gz")
    WarcFile(path).close()
    with pytest.raises(FileExistsError):
        WarcFile(path)


class FullDisk:
    """A file that takes ``room`` bytes, then fails as a full disk does."""

    def __init__(self, file, room: int) -> None:
        self.file, self.room = file, room

    def write(self, data) -> int:
        if not self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        taken = self.file.write(data[: self.room])
        self.room -= taken
        return taken

    def __getattr__(self, name):
        return getattr(self.file, name)


def opened_export(tmp_path, monkeypatch) -> tuple[WarcExport, list[str]]:
    crawler = get_crawler(settings_dict={"WARC_DIR": str(tmp_path / "warc")})
    closed: list[str] = []
    monkeypatch.setattr(warc, "close_spider_now", lambda crawler, reason: closed.append(reason))
    export = WarcExport.from_crawler(crawler)
    spider = crawler._create_spider("topical_test")
    spider.crawl_id = "c1"
    export.spider_opened(spider)
    return export, closed


def stored_page(url: str, **fields) -> PageItem:
    return PageItem(**{"url": url, "fetched_at": FETCHED_AT.isoformat(), "text": "wings", **fields})


def test_a_write_that_fails_stops_the_crawl_and_leaves_whole_records(tmp_path, monkeypatch, caplog):
    export, closed = opened_export(tmp_path, monkeypatch)
    file = export.file
    export.item_scraped(stored_page("u"), page_response(), None)
    whole = file.size
    file._file = FullDisk(file._file, room=100)  # a record cut short, then the disk full
    with caplog.at_level(logging.ERROR, logger="focused.warc"):
        export.item_scraped(stored_page("u"), page_response(), None)
        export.item_scraped(stored_page("u"), page_response(), None)  # nothing more written
    assert closed == ["warc_failed"]
    errors = [r.getMessage() for r in caplog.records]
    assert len(errors) == 1 and errors[0].endswith("cannot be written: No space left on device")
    assert file.path.stat().st_size == whole
    assert [kind for kind, *_ in records(file.path.read_bytes())] == [
        "warcinfo",
        "response",
        "request",
    ]
    stats = export.crawler.stats
    assert stats.get_value("focused/warc/records") == 3
    assert stats.get_value("focused/warc/bytes") == whole
    assert run_failed(_Stats({"finish_reason": "warc_failed"}))


class _Stats:
    def __init__(self, values: dict) -> None:
        self.values = values

    def get_value(self, name, default=None):
        return self.values.get(name, default)

    def get_stats(self) -> dict:
        return self.values


def test_pages_stored_without_their_text_get_no_record(tmp_path, monkeypatch):
    export, _ = opened_export(tmp_path, monkeypatch)
    export.item_scraped(stored_page("a", duplicate_of="b", text=None), page_response(), None)
    export.item_scraped(
        stored_page("a", robots="noindex,nofollow", text=None), page_response(), None
    )
    export.item_scraped(stored_page("a", robots="nofollow"), page_response(), None)
    export.spider_closed(None)
    [path] = (tmp_path / "warc").iterdir()
    assert [kind for kind, *_ in records(path.read_bytes())] == ["warcinfo", "response", "request"]


def test_a_redirect_is_kept_as_it_came_before_it_is_followed(tmp_path, monkeypatch):
    """A redirect's records are written as it is downloaded: its body as it came (still
    compressed, so its Content-Encoding stays; dechunked, so Transfer-Encoding goes)."""
    export, _ = opened_export(tmp_path, monkeypatch)
    url = "http://127.0.0.1:25501/wiki/Old_name"
    moved = gzip.compress(b"<a href='/wiki/New_name'>moved</a>")
    headers = {
        "Location": "/wiki/New_name",
        "Content-Encoding": "gzip",
        "Transfer-Encoding": "chunked",
        "Content-Type": "text/html",
    }
    export.response_downloaded(
        Response(url, status=301, headers=headers, body=moved), Request(url), None
    )
    # Not a redirect, or not one a page's link led to: nothing.
    export.response_downloaded(Response(url, status=200, body=b"x"), Request(url), None)
    export.response_downloaded(Response(url, status=304), Request(url), None)
    export.response_downloaded(
        Response(url, status=301, headers=headers), Request(url, method="HEAD"), None
    )
    # robots.txt and each of its redirects (Scrapy's robots requests have no callback)
    for robots in ("http://127.0.0.1:25501/robots.txt", "http://127.0.0.1:25501/r1"):
        redirect = Response(robots, status=301, headers=headers)
        export.response_downloaded(redirect, Request(robots, callback=NO_CALLBACK), None)
    # A Location of raw UTF-8 bytes, as the URL RedirectMiddleware follows: warcio escaped the
    # value read as latin-1 (http%3A//...caf%C3%83%C2%A9), a URL the page is not archived under.
    other = "http://127.0.0.1:25501/wiki/Cafe"
    raw = {"Location": "http://127.0.0.1:25501/wiki/Café".encode(), "X-Name": "café".encode()}
    export.response_downloaded(Response(other, status=302, headers=raw), Request(other), None)
    export.spider_closed(None)
    [path] = (tmp_path / "warc").iterdir()
    read = records(path.read_bytes())
    assert [(kind, headers.get("WARC-Target-URI")) for kind, headers, _, _ in read] == [
        ("warcinfo", None),
        ("response", url),
        ("request", url),
        ("response", other),
        ("request", other),
    ]
    assert read[3][2].get_header("Location") == "http://127.0.0.1:25501/wiki/Caf%C3%A9"
    assert "caf%C3%A9" in read[3][2].get_header("X-Name")  # UTF-8, encoded once
    _, _, http, payload = read[1]
    # warcio undoes the Content-Encoding as it reads: the bytes kept were gzip.
    assert http.statusline == "301 Moved Permanently" and payload == gzip.decompress(moved)
    assert http.get_header("Location") == "/wiki/New_name"
    assert http.get_header("Content-Encoding") == "gzip"
    assert http.get_header("Transfer-Encoding") is None
    assert http.get_header("Content-Length") == str(len(moved))
    assert (read[2][2].protocol, read[2][2].statusline) == ("GET", "/wiki/Old_name HTTP/1.1")


def test_a_crawl_keeps_a_redirect_and_the_page_it_led_to(tmp_path):
    """A replay of the URL the link named finds the redirect, then the page under the URL it
    redirected to."""

    def respond(method: str, path: str) -> Reply:
        if path == "/moved":
            return Reply(301, "", headers={"Location": "/target"})
        links = '<a href="/moved">albatross feathers</a>' if path == "/" else ""
        return Reply(200, html(path, f"<p>albatross feathers and nests</p>{links}"))

    with Site(respond) as site:
        arguments = {"query": "albatross feathers", "seeds": f"{site.url}/", "strategy": "bfs"}
        crawl = run_crawl(tmp_path, arguments, {"WARC_DIR": tmp_path / "warc"})
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    [path] = (tmp_path / "warc").iterdir()
    read = [
        (kind, headers["WARC-Target-URI"].removeprefix(site.url), http.protocol, http.statusline)
        for kind, headers, http, _ in records(path.read_bytes())[1:]
    ]
    assert read == [
        ("response", "/", "HTTP/1.0", "200 OK"),  # as the test server answers
        ("request", "/", "GET", "/ HTTP/1.1"),
        ("response", "/moved", "HTTP/1.0", "301 Moved Permanently"),
        ("request", "/moved", "GET", "/moved HTTP/1.1"),
        ("response", "/target", "HTTP/1.0", "200 OK"),
        ("request", "/target", "GET", "/target HTTP/1.1"),
    ]


def test_a_crawl_keeps_each_page_stored_with_text_as_served(tmp_path, site):
    """One small crawl of the replay web: one response record per page stored with its text,
    under the URL stored, its payload the page the site served."""
    arguments = {"query": BIRD_QUERY, "seeds": f"{site.url}/wiki/{BIRD_SEED}", "strategy": "bfs"}
    settings = {"CLOSESPIDER_PAGECOUNT": 25, "WARC_DIR": tmp_path / "warc"}
    crawl = run_crawl(tmp_path, arguments, settings)
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    [path] = (tmp_path / "warc").iterdir()
    assert f"writing the crawl's WARC records to {path}" in crawl.result.stderr
    assert path.name.startswith("test-")
    stored = {page["url"] for page in crawl.pages() if page["text"] is not None}
    assert len(stored) >= 20
    read = records(path.read_bytes())
    assert read[0][0] == "warcinfo"
    responses = [headers for kind, headers, _, _ in read if kind == "response"]
    requests = [headers for kind, headers, _, _ in read if kind == "request"]
    assert sorted(h["WARC-Target-URI"] for h in responses) == sorted(stored)
    assert [h["WARC-Concurrent-To"] for h in requests] == [h["WARC-Record-ID"] for h in responses]
    fetched_at = {page["url"]: page["fetched_at"] for page in crawl.pages()}
    for kind, headers, http, payload in read:
        if kind != "response":
            continue
        url = headers["WARC-Target-URI"]
        assert payload == site.respond(urlsplit(url).path)[2].encode(), url
        assert http.statusline == "200 OK" and headers["WARC-IP-Address"] == "127.0.0.1"
        assert headers["WARC-Date"] == warc_date(datetime.fromisoformat(fetched_at[url]))


def test_kill_9_leaves_whole_records_and_a_resume_writes_its_own_file(tmp_path, sample_graph):
    server = ReplayServer(sample_graph, delay=0.02).start()
    folder = tmp_path / "warc"
    command = job_command(tmp_path, server, "bfs", WARC_DIR=folder, CLOSESPIDER_PAGECOUNT=25)
    try:
        run = start_until_fetched(command, server, 12)
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
        [killed] = folder.iterdir()
        left = killed.read_bytes()
        first = {h["WARC-Target-URI"] for kind, h, _, _ in records(left) if kind == "response"}
        final = run_to_the_end(command)
        assert final.returncode == 0, final.stderr[-3000:]
    finally:
        server.stop()
    assert killed.read_bytes() == left  # never appended to
    [resumed] = set(folder.iterdir()) - {killed}
    second = [
        h["WARC-Target-URI"]
        for kind, h, _, _ in records(resumed.read_bytes())
        if kind == "response"
    ]
    crawl_id = json.loads((tmp_path / "job" / "focused.json").read_text())["crawl_id"]
    crawl = Crawl(final, tmp_path / "focused.sqlite3", crawl_id)
    stored = {page["url"] for page in crawl.pages() if page["text"] is not None}
    assert first and second and not first & set(second)
    assert first | set(second) <= stored
    # A page stored as the kill came, before its records were written (focused.warc).
    assert len(stored - first - set(second)) <= 1
