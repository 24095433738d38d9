"""Response hygiene against a loopback site of bad responses: every skip is counted."""

from __future__ import annotations

import gzip
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler

import pytest
from scrapy import Request
from scrapy.exceptions import StopDownload
from scrapy.http import Headers, HtmlResponse
from scrapy.responsetypes import responsetypes
from scrapy.utils.project import get_project_settings
from scrapy.utils.test import get_crawler

from focused.extract import extract_page
from focused.hygiene import CharsetMiddleware, NotHtmlStopMiddleware, page_skip_reason
from focused.settingchecks import dns_timeout_note
from tests.conftest import REPO, crawl_env, run_crawl
from tests.sites import DROPPED, Reply, Site, ThreadedServer, html
from tests.test_canonical import stat
from tests.test_refresh import recrawl, stored_crawl

WORDS = "oiseaux plumes birds feathers"
HE_TEXT = "ציפורים נודדות"  # "migrating birds"
JA_TITLE, JA_TEXT = "渡り鳥", "鳥の渡りについて" * 5  # "migratory birds", "on bird migration"
# Every page but /slow must answer within it on a loaded machine (at 1 s, a crawl that fell a
# second behind timed out robots.txt and every page); /slow answers well after it.
TIMEOUT = 10
LINKS = [
    "/big", "/slow", "/wrong-charset", "/bogus-charset", "/no-charset", "/no-type",
    "/no-charset-shift-jis", "/no-charset-euc-jp", "/meta-utf-16", "/iso-8859-8-i",
    "/charset-base64",
    "/loop1", "/chain?n=0", "/paper.pdf", "/download?id=1", "/missing", "/bomb", "/bad-gzip",
    "javascript:alert(1)", "file:///etc/passwd", "data:text/html,x", "mailto:a@b.c",
]  # fmt: skip


def bad_site(method: str, path: str) -> Reply:
    if path == "/":
        links = " ".join(f'<a href="{link}">{link}</a>' for link in LINKS)
        return Reply(200, html("home", f"<p>{WORDS}</p>{links}"))
    if path == "/big":
        return Reply(200, html("big", "<p>" + "feathers " * 5000 + "</p>"))
    if path == "/slow":
        time.sleep(TIMEOUT + 5)
        return Reply(200, html("slow", WORDS))
    if path == "/wrong-charset":  # says UTF-8, is Latin-1
        return Reply(200, html("wrong", f"<p>caf\xe9 {WORDS}</p>").encode("latin-1"))
    if path == "/bogus-charset":
        return Reply(200, html("bogus", f"<p>café {WORDS}</p>"), "text/html; charset=x-klingon")
    if path == "/no-charset":
        return Reply(200, html("none", f"<p>café {WORDS}</p>").encode("cp1252"), "text/html")
    if path == "/meta-utf-16":  # UTF-8, whose <meta> says UTF-16: browsers read it as UTF-8
        head = '<meta charset="utf-16">'
        return Reply(200, html("mislabelled", f"<p>café {WORDS}</p>", head), "text/html")
    if path == "/iso-8859-8-i":  # a label of browsers' that Python does not know
        body = html("he", f"<p>{HE_TEXT} {WORDS}</p>").encode("iso-8859-8")
        return Reply(200, body, "text/html; charset=iso-8859-8-i")
    if path == "/charset-base64":  # a codec Python finds, that decodes no text
        return Reply(200, html("base64", f"<p>café {WORDS}</p>"), "text/html; charset=base64")
    if path == "/no-type":
        return Reply(200, html("untyped", f"<p>{WORDS}</p>"), None)
    if path.startswith("/no-charset-"):  # Japanese, its bytes valid CP949 (Korean) too
        encoding = path.removeprefix("/no-charset-")
        return Reply(200, html(JA_TITLE, f"<p>{JA_TEXT}</p>").encode(encoding), "text/html")
    if path in ("/loop1", "/loop2"):
        other = "/loop2" if path == "/loop1" else "/loop1"
        return Reply(302, "", headers={"Location": other})
    if path.startswith("/chain?n="):
        n = int(path.rsplit("=", 1)[1])
        return Reply(302, "", headers={"Location": f"/chain?n={n + 1}"})
    if path == "/bomb":  # 1 kB on the wire, 50 times DOWNLOAD_MAXSIZE once inflated
        return Reply(200, gzip.compress(b" " * 1_000_000), headers={"Content-Encoding": "gzip"})
    if path == "/bad-gzip":  # cut short in its header
        return Reply(200, b"\x1f\x8b\x08\x00", headers={"Content-Encoding": "gzip"})
    if path.startswith("/download"):
        return Reply(200, b"%PDF-1.4 not a page", "application/pdf")
    return Reply(404, html("missing", "no such page"))


def crawl_site(tmp_path, site: Site, settings: dict[str, object] | None = None):
    """A ``bfs`` crawl of ``site`` from its root page, on the words its pages hold."""
    return run_crawl(
        tmp_path, {"strategy": "bfs", "query": WORDS, "seeds": f"{site.url}/"}, settings
    )


def stored_paths(crawl, site: Site) -> list[str]:
    return sorted(page["url"].removeprefix(site.url) for page in crawl.pages())


@pytest.fixture(scope="module")
def default_crawl(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("hygiene")
    with Site(bad_site) as site:
        crawl = crawl_site(
            tmp_path,
            site,
            {"DOWNLOAD_MAXSIZE": 20_000, "DOWNLOAD_TIMEOUT": TIMEOUT, "RETRY_TIMES": 0},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    return crawl, [path for _, path in site.log.gets()]


def test_bad_encodings_are_decoded_without_crashing(default_crawl):
    crawl, _ = default_crawl
    assert "Traceback" not in crawl.result.stderr
    pages = {p["url"].rsplit("/", 1)[1]: p for p in crawl.pages()}
    names = ("wrong-charset", "bogus-charset", "no-charset", "no-type", "meta-utf-16")
    for name in (*names, "charset-base64"):
        assert "oiseaux plumes" in pages[name]["text"], name
    assert "café" in pages["no-charset"]["text"]  # detected, not guessed as UTF-8
    assert pages["iso-8859-8-i"]["text"] == f"{HE_TEXT} {WORDS}"  # was guessed: mojibake
    # its <meta> says UTF-16, which an ASCII <meta> cannot be: decoded as UTF-8, as browsers do
    assert (pages["meta-utf-16"]["title"], pages["meta-utf-16"]["text"]) == (
        "mislabelled",
        f"café {WORDS}",
    )
    assert "caf\ufffd" in pages["wrong-charset"]["text"]  # the one bad byte is replaced


def test_japanese_pages_that_declare_no_charset_are_japanese_not_korean(default_crawl):
    """Shift_JIS and EUC-JP bytes are valid CP949 too, and Scrapy's guess (charset_normalizer)
    took these pages for Korean: their text was stored as hangul, their language as ko."""
    crawl, _ = default_crawl
    pages = {p["url"].rsplit("/", 1)[1]: p for p in crawl.pages()}
    for name in ("no-charset-shift-jis", "no-charset-euc-jp"):
        assert (pages[name]["title"], pages[name]["text"]) == (JA_TITLE, JA_TEXT), name
        assert pages[name]["language"] == "ja", name


@pytest.mark.parametrize(
    ("label", "text", "encoding"),
    [
        ("iso-8859-8-i", "ציפורים נודדות", "iso-8859-8"),
        ("ISO-8859-8-I", "ציפורים נודדות", "iso-8859-8"),
        ("windows-949", "새", "cp949"),
        ("x-cp1251", "Птицы", "cp1251"),
        ("koi8", "Москва столица", "koi8-r"),
        ("x-gbk", "候鸟迁徙", "gbk"),
        ("sun_eu_greek", "Ελληνικά", "iso-8859-7"),
        ("x-mac-roman", "Oiseaux migrateurs, fin d'été", "mac-roman"),
    ],
)
def test_the_encoding_labels_of_browsers_are_read(label, text, encoding):
    """Python and w3lib know none of these labels of the WHATWG Encoding Standard: Scrapy
    ignored the declaration and guessed (a Hebrew page came out as Vietnamese mojibake)."""
    body = html("", f"<p>{text}</p>").encode(encoding)
    header = HtmlResponse(
        "http://127.0.0.1/", body=body, headers={"Content-Type": f"text/html; charset={label}"}
    )
    assert extract_page(header).text == text
    meta = html("", f"<p>{text}</p>", f'<meta charset="{label}">').encode(encoding)
    assert extract_page(HtmlResponse("http://127.0.0.1/", body=meta)).text == text


@pytest.mark.parametrize(
    ("header", "meta"),
    [("base64", None), ("zlib", "utf-8"), ("utf-8", "rot13"), (None, "idna"), ("punycode", None)],
)
def test_a_charset_of_a_codec_that_decodes_no_page_is_ignored(header, meta):
    """Python finds codecs by these names, and Scrapy decoded the page with them: it raised,
    and the page was lost with a traceback."""
    content_type = "text/html" if header is None else f"text/html; charset={header}"
    head = "" if meta is None else f'<meta charset="{meta}">'
    body = html("Café", "<p>café <a href='/x'>x</a></p>", head).encode("utf-8")
    response = HtmlResponse("http://127.0.0.1/", body=body, headers={"Content-Type": content_type})
    decoded = CharsetMiddleware().process_response(Request(response.url), response)
    assert (extract_page(decoded).title, extract_page(decoded).text) == ("Café", "café x")


@pytest.mark.parametrize(
    ("label", "encoding", "byte_order_marked"),
    [
        ("utf-16", "utf-16-le", False),  # Scrapy read big-endian: CJK-looking garbage
        ("UTF-32", "utf-32-le", False),
        ("utf-16be", "utf-16-be", False),  # a byte order given is taken
        ("utf-16", "utf-16", True),  # the BOM tells it
    ],
)
def test_utf_16_without_a_byte_order_is_little_endian(label, encoding, byte_order_marked):
    body = html("Café", "<p>café birds</p>").encode(encoding)
    headers = {"Content-Type": f"text/html; charset={label}"}
    response = HtmlResponse("http://127.0.0.1/", body=body, headers=headers)
    decoded = CharsetMiddleware().process_response(Request(response.url), response)
    assert (extract_page(decoded).title, extract_page(decoded).text) == ("Café", "café birds")
    assert body.startswith((b"\xff\xfe", b"\xfe\xff")) is byte_order_marked


@pytest.mark.parametrize(
    ("text", "encoding", "guess"),
    [
        (JA_TEXT, "shift_jis", "cp932"),
        (JA_TEXT, "euc_jp", "euc_jp"),
        ("日本の鳥類 ツバメは渡り鳥です。", "shift_jis", "cp932"),
        # Korean stays Korean, its rare syllables and the jamo of a laugh (EUC-JP's hiragana) too
        ("서울은 대한민국의 수도이다. 똠방각하 햏자", "cp949", "cp949"),
        ("정치, 경제, 문화의 중심지이다. ㅋㅋㅋ 진짜 재밌다", "euc_kr", "cp949"),
        ("Москва столица России", "cp1251", "cp1251"),
    ],
)
def test_a_page_that_declares_no_charset_is_japanese_only_when_it_reads_so(text, encoding, guess):
    body = html("", f"<p>{text}</p>").encode(encoding)
    response = HtmlResponse("http://127.0.0.1/", body=body, headers={"Content-Type": "text/html"})
    decoded = CharsetMiddleware().process_response(Request(response.url), response)
    assert decoded.encoding == guess
    assert extract_page(decoded).text == text
    declared = response.replace(headers={"Content-Type": "text/html; charset=cp949"})
    assert CharsetMiddleware().process_response(Request(response.url), declared) is declared


def test_every_skip_is_counted(default_crawl):
    crawl, fetched = default_crawl
    stderr = crawl.result.stderr
    assert stat(stderr, "focused/skipped/scheme") == 4  # javascript:, file:, data:, mailto:
    assert stat(stderr, "focused/skipped/extension") == 1
    assert "/paper.pdf" not in fetched
    assert stat(stderr, "focused/skipped/too_large") == 2  # /big, and /bomb as it inflates
    assert stat(stderr, "focused/skipped/bad_compression") == 1  # /bad-gzip
    assert stat(stderr, "focused/skipped/timeout") == 1
    assert stat(stderr, "focused/skipped/http_404") == 1
    assert stat(stderr, "focused/skipped/not_html") == 1  # /download: no HEAD check by default
    assert stat(stderr, "focused/skipped/redirect_loop") == 1


def test_redirect_loops_are_cut(default_crawl):
    _, fetched = default_crawl
    assert fetched.count("/loop1") == 1 and fetched.count("/loop2") == 1
    chain = [path for path in fetched if path.startswith("/chain")]
    assert len(chain) == 6  # the first request and REDIRECT_MAX_TIMES = 5 redirects


def test_head_check_skips_non_html_before_the_get(tmp_path):
    def quick_site(method: str, path: str) -> Reply:
        # /slow would cost its HEAD's and its GET's timeouts: 20 s of waiting that tests nothing
        return (
            Reply(404, html("missing", "no such page"))
            if path == "/slow"
            else bad_site(method, path)
        )

    with Site(quick_site) as site:
        crawl = crawl_site(
            tmp_path, site, {"HEAD_CHECK": True, "DOWNLOAD_TIMEOUT": TIMEOUT, "RETRY_TIMES": 0}
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    requests = site.log.entries
    assert ("HEAD", site.host, "/download?id=1") in requests
    assert ("GET", site.host, "/download?id=1") not in requests
    assert ("GET", site.host, "/no-type") in requests  # HTML (or unknown) is fetched
    assert stat(crawl.result.stderr, "focused/skipped/head_not_html") == 1


def test_status_codes_allowed_on_the_command_line_let_their_pages_through(tmp_path):
    """Scrapy compared -s HTTPERROR_ALLOWED_CODES=404's items, strings, with each response's
    integer status: the page was dropped as if the setting were not given."""

    def site(method: str, path: str) -> Reply:
        if path == "/":
            return Reply(200, html("birds", "birds nest <a href='/gone'>gone birds</a>"))
        return Reply(404, html("gone", "birds nest here no more"))

    with Site(site) as server:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds nest", "seeds": f"{server.url}/"},
            {"HTTPERROR_ALLOWED_CODES": "404,410"},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    statuses = {page["url"].removeprefix(server.url): page["status"] for page in crawl.pages()}
    assert statuses == {"/": 200, "/gone": 404}


REFRESHES = {
    "/js": "0; url=javascript:void(0)",
    "/port": "0; url=http://127.0.0.1:99999/",
    "/reload": "0",
    "/self": "1; url=/self",
    "/away": "0; url=/target",
}


def refreshing_site(method: str, path: str) -> Reply:
    links = "".join(f'<a href="{link}">{link}</a>' for link in REFRESHES)
    refresh = REFRESHES.get(path)
    head = f'<meta http-equiv="refresh" content="{refresh}">' if refresh else ""
    return Reply(200, html(path, f"<p>{WORDS}</p>{links if path == '/' else ''}", head))


def test_a_page_whose_meta_refresh_leads_nowhere_is_kept(tmp_path):
    """A browser shows such a page. Scrapy's MetaRefreshMiddleware raised for a URL it cannot
    request (the page lost as a download error, without a line), and its redirect of a page to
    itself was dropped by the dupefilter."""
    with Site(refreshing_site) as site:
        crawl = crawl_site(tmp_path, site, {"RETRY_TIMES": 0})
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    stored = stored_paths(crawl, site)
    assert stored == ["/", "/js", "/port", "/reload", "/self", "/target"]  # /away is a redirect
    assert stat(log, "focused/skipped/bad_url") == 2
    assert stat(log, "focused/skipped/download_error") == 0


# Refreshes browsers follow and w3lib misread: as one of the page to itself (the quotes of its
# URL decoded before the attributes were split), or as none.
REFRESHES_AS_BROWSERS = {
    "/quoted": "0; url=&quot;/to-quoted&quot;",
    "/bare": "0;/to-bare",
    "/spaced": "0 ; URL = /to-spaced",
}


def test_a_meta_refresh_is_read_as_browsers_read_it(tmp_path):
    def respond(method: str, path: str) -> Reply:
        links = "".join(f'<a href="{link}">{link}</a>' for link in REFRESHES_AS_BROWSERS)
        refresh = REFRESHES_AS_BROWSERS.get(path)
        head = f'<meta http-equiv="refresh" content="{refresh}">' if refresh else ""
        return Reply(200, html(path, f"<p>{WORDS}</p>{links if path == '/' else ''}", head))

    with Site(respond) as site:
        crawl = crawl_site(tmp_path, site, {"RETRY_TIMES": 0})
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    # each refreshing page is a redirect, to the page its refresh names
    assert stored_paths(crawl, site) == ["/", "/to-bare", "/to-quoted", "/to-spaced"]


BAD_LOCATIONS = {
    "/empty": "",
    "/js": "javascript:alert(1)",
    "/ftp": "ftp://example.org/birds",
    "/port": "http://127.0.0.1:99999/birds",
    "/ipv6": "http://[::1/birds",
}


def test_a_redirect_whose_location_leads_nowhere_is_a_bad_redirect(tmp_path):
    """Scrapy's RedirectMiddleware raised for a Location no request can be made of (a
    download_error), handed on the 302 of one to another scheme (http_302), and redirected an
    empty one to the page itself, which the dupefilter dropped without a count."""

    def respond(method: str, path: str) -> Reply:
        if path in BAD_LOCATIONS:
            return Reply(302, "", headers={"Location": BAD_LOCATIONS[path]})
        links = "".join(f'<a href="{link}">{link}</a>' for link in [*BAD_LOCATIONS, "/moved"])
        if path == "/moved":  # a redirect that leads somewhere is followed as before
            return Reply(301, "", headers={"Location": "/target"})
        return Reply(200, html(path, f"<p>{WORDS}</p>{links if path == '/' else ''}"))

    with Site(respond) as site:
        crawl = crawl_site(tmp_path, site, {"RETRY_TIMES": 0})
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert stat(log, "focused/skipped/bad_redirect") == len(BAD_LOCATIONS)
    assert stat(log, "focused/skipped/download_error") == 0
    assert stat(log, "focused/skipped/http_302") == 0
    stored = stored_paths(crawl, site)
    assert stored == ["/", "/target"]


@pytest.mark.parametrize("jobdir", [False, True])
def test_a_redirect_to_the_servers_own_spelling_of_the_url_is_followed(tmp_path, jobdir):
    """A link is requested under its canonical URL; a server that redirects that to its own
    spelling (its query in its order, its index.html) named a URL of the same canonical form,
    which the dupefilter dropped as the request itself: the page was lost, counted nowhere."""
    spellings = {"/list?cat=5&sort=price": "/list?sort=price&cat=5", "/dir/": "/dir/index.html"}
    links = "".join(f"<a href='{link}'>{WORDS}</a>" for link in [*spellings.values(), "/loop"])

    def respond(method: str, path: str) -> Reply:
        if path in spellings:
            return Reply(301, "", headers={"Location": spellings[path]})
        if path.startswith("/loop"):  # between two spellings of one URL, for ever
            return Reply(
                302,
                "",
                headers={"Location": "/loop?b=1&a=2" if "a=2&" in path else "/loop?a=2&b=1"},
            )
        return Reply(200, html(path, f"<p>{WORDS}</p>{links if path == '/' else ''}"))

    settings: dict[str, object] = {"JOBDIR": tmp_path / "job"} if jobdir else {}
    with Site(respond) as site:
        crawl = crawl_site(tmp_path, site, settings)
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert stored_paths(crawl, site) == ["/", "/dir/", "/list?cat=5&sort=price"]
    fetched = [path for _, path in site.log.gets()]
    assert {"/list?sort=price&cat=5", "/dir/index.html"} <= set(fetched)
    assert stat(log, "focused/skipped/redirect_loop") == 1  # cut at REDIRECT_MAX_TIMES
    assert fetched.count("/loop?a=2&b=1") + fetched.count("/loop?b=1&a=2") <= 6


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
# Each served as text/html, with text and a link lxml would find among the bytes.
BINARY_BODIES = {
    "/png": PNG,
    "/gif": b"GIF89a\x01\x00\x01\x00",
    "/jpeg": b"\xff\xd8\xff\xe0\x00\x10JFIF",
    "/pdf": b"%PDF-1.7\n",
    "/zip": b"PK\x03\x04\x14\x00",
    "/gzip": gzip.compress(b"<p>zipped</p>"),
    "/nul": b"<html><body>\x00\x00\x00\x01",
}


def test_a_binary_body_served_as_html_is_skipped(tmp_path):
    """lxml made a page of the bytes of a PNG (or a PDF, a zip...) served as text/html: stored
    as text, its stray anchors followed."""

    def respond(method: str, path: str) -> Reply:
        if path in BINARY_BODIES:
            body = BINARY_BODIES[path] + f"<p>{WORDS}</p><a href='{path}-link'>x</a>".encode()
            return Reply(200, body, "text/html")
        if path == "/utf16":  # NUL bytes, but text
            page = html("utf16", f"<p>{WORDS}</p><a href='/utf16-link'>x</a>")
            return Reply(200, page.encode("utf-16"), "text/html; charset=utf-16")
        links = "".join(f'<a href="{link}">{link}</a>' for link in [*BINARY_BODIES, "/utf16"])
        return Reply(200, html(path, f"<p>{WORDS}</p>{links if path == '/' else ''}"))

    with Site(respond) as site:
        crawl = crawl_site(tmp_path, site)
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert stat(log, "focused/skipped/binary_body") == len(BINARY_BODIES)
    stored = stored_paths(crawl, site)
    assert stored == ["/", "/utf16", "/utf16-link"]
    fetched = [path for _, path in site.log.gets()]
    assert not [path for path in fetched if path.endswith("-link") and path != "/utf16-link"]


RESOLVE = """
import sys
from scrapy.crawler import Crawler
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.project import get_project_settings
from scrapy.utils.reactor import install_reactor
from twisted.internet.interfaces import IResolutionReceiver
from zope.interface import implementer

settings = get_project_settings()
install_reactor(settings["TWISTED_REACTOR"])
from twisted.internet import reactor
from spiders.topical import TopicalSpider

resolver = load_object(settings["TWISTED_DNS_RESOLVER"])
build_from_crawler(resolver, Crawler(TopicalSpider, settings), reactor=reactor).install_on_reactor()
found = []

@implementer(IResolutionReceiver)
class Receiver:
    def resolutionBegan(self, resolution): pass
    def addressResolved(self, address): found.append(f"{type(address).__name__} {address.host}")
    def resolutionComplete(self): reactor.stop()

reactor.callWhenRunning(reactor.nameResolver.resolveHostName, Receiver(), sys.argv[1], 80)
reactor.run()
print(sorted(set(found)))
"""


def test_host_names_resolve_to_ipv6_addresses_too():
    """A host with only an IPv6 address, or a seed like http://[2001:db8::1]/, failed as a DNS
    error: Scrapy's default resolver asks for IPv4 alone. Resolved here by the crawl's resolver,
    as the downloader asks it, without connecting anywhere."""

    def resolve(host: str) -> str:
        out = subprocess.run(
            [sys.executable, "-c", RESOLVE, host],
            cwd=REPO,
            env=crawl_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout.strip()

    assert resolve("2001:db8::1") == "['IPv6Address 2001:db8::1']"
    assert resolve("127.0.0.1") == "['IPv4Address 127.0.0.1']"


def test_a_dns_timeout_the_resolver_does_not_read_is_a_warning(tmp_path):
    with Site(lambda method, path: Reply(200, html("t", f"<p>{WORDS}</p>"))) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"},
            {"DNS_TIMEOUT": 5, "CLOSESPIDER_PAGECOUNT": 1, "MY_STORE_PATH": "x"},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    [line] = [line for line in log.splitlines() if "WARNING: DNS_TIMEOUT" in line]
    assert "WARNING: DNS_TIMEOUT='5' has no effect" in line
    assert "DOWNLOAD_TIMEOUT (30 s) bounds a lookup" in line
    # A name far from every setting's is only warned about: a component of the user's may read it.
    [line] = [line for line in log.splitlines() if "WARNING: setting" in line]
    assert line.endswith(
        "WARNING: setting 'MY_STORE_PATH' given but read by neither Scrapy, scrapy-playwright nor"
        " focused: ignored unless a component of your own reads it"
    )
    # Not given, or read by the resolver the crawl runs: nothing to say.
    settings = get_project_settings()
    assert dns_timeout_note(settings) is None
    settings.set("DNS_TIMEOUT", "5", "cmdline")
    assert "has no effect" in dns_timeout_note(settings)
    for name in ("TWISTED_DNS_RESOLVER", "DNS_RESOLVER"):  # the new name, and Scrapy's older one
        given = settings.copy()
        given.set(name, "scrapy.resolver.CachingThreadedResolver", "cmdline")
        assert dns_timeout_note(given) is None


def test_a_failed_head_leaves_the_page_to_its_get(tmp_path):
    """A server that drops HEAD requests lost the page: the HEAD's failure, once retried,
    failed the GET before it was sent."""

    def site(method: str, path: str) -> Reply:
        if method == "HEAD":
            return Reply(DROPPED)
        return Reply(200, html("birds", "<p>birds nest feathers</p>"))

    with Site(site) as served:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds nest", "seeds": f"{served.url}/"},
            {"HEAD_CHECK": True},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert [page["url"] for page in crawl.pages()] == [f"{served.url}/"]
    heads = [entry for entry in served.log.entries if entry[0] == "HEAD"]
    assert len(heads) == 1  # not retried: the GET has its own retries
    assert stat(crawl.result.stderr, "focused/head_check_failures") == 1


def test_a_page_named_like_a_text_file_is_fetched_and_a_binary_file_is_not(tmp_path):
    """Links were dropped for every extension of Scrapy's IGNORED_EXTENSIONS, so that the HTML
    pages ``/wiki/Node.js`` and ``/wiki/Character.ai`` were never fetched. Only binary formats
    are skipped by their URL; the Content-Type tells a page from a script."""
    pages = ["/wiki/Node.js", "/wiki/Character.ai", "/wiki/News.com.au", "/wiki/Setup.py"]
    binaries = ["/files/photo.JPG", "/files/report.pdf", "/files/clip.mp4", "/files/setup.exe"]

    def respond(method: str, path: str) -> Reply:
        if path == "/static/app.js":
            return Reply(200, "var birds = 1;", "application/javascript")
        links = "".join(f"<a href='{link}'>{WORDS}</a>" for link in [*pages, *binaries])
        links += "<a href='/static/app.js'>script</a>"
        return Reply(200, html(path, f"<p>{WORDS}</p>{links if path == '/' else ''}"))

    with Site(respond) as site:
        crawl = crawl_site(tmp_path, site)
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert stored_paths(crawl, site) == sorted(["/", *pages])
    fetched = [path for _, path in site.log.gets()]
    assert not set(binaries) & set(fetched), fetched
    assert stat(log, "focused/skipped/extension") == len(binaries)
    assert stat(log, "focused/skipped/not_html") == 1  # the script, by its Content-Type


class _Streamed(BaseHTTPRequestHandler):
    """Serves ``server.bodies[path]`` (Content-Type, body, whether to send its length, the
    Location of a redirect) in
    chunks, a pause between them, as a large file comes over a slow link; counts in
    ``server.sent`` what each write handed the connection, and in ``server.cut`` the paths whose
    connection the client closed before the body's end."""

    server: _StreamedSite

    def do_GET(self) -> None:
        site = self.server
        site.fetched.append(self.path)
        missing = ("text/html", html("missing", "no such page").encode(), True, None)
        content_type, body, with_length, location = site.bodies.get(self.path, missing)
        self.send_response(404 if self.path not in site.bodies else 302 if location else 200)
        self.send_header("Content-Type", content_type)
        if location:
            self.send_header("Location", location)
        if with_length:
            self.send_header("Content-Length", str(len(body)))
        else:
            self.close_connection = True  # the body ends as the connection closes
        self.end_headers()
        for start in range(0, len(body), STREAMED_CHUNK):
            chunk = body[start : start + STREAMED_CHUNK]
            try:
                self.wfile.write(chunk)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                site.cut.append(self.path)
                return
            site.sent[self.path] = site.sent.get(self.path, 0) + len(chunk)
            if len(body) > STREAMED_CHUNK:
                time.sleep(STREAMED_PAUSE)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _StreamedSite(ThreadedServer):
    def __init__(self, bodies: dict[str, tuple[str, bytes, bool, str | None]]) -> None:
        self.bodies = bodies
        self.fetched: list[str] = []
        self.sent: dict[str, int] = {}
        self.cut: list[str] = []
        super().__init__(("127.0.0.1", 0), _Streamed)

    def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
        pass  # a connection the crawl closed: what the test counts


STREAMED_CHUNK = 64 * 1024
STREAMED_PAUSE = 0.05  # 8 MiB in some 6.5 s; a stop ends the writes within two
LARGE = 8 * 1024 * 1024  # under DOWNLOAD_MAXSIZE


@pytest.mark.parametrize("with_length", [True, False], ids=["content-length", "no-length"])
def test_a_large_non_html_body_is_not_downloaded_whole(tmp_path, with_length):
    """A link that names no binary file by its extension (``/report``) to a PDF was downloaded
    whole, up to DOWNLOAD_MAXSIZE, before the spider skipped it for its Content-Type. Its
    download now ends at its headers; robots.txt (text too) and a redirect (whose body the WARC
    export keeps) are read whole."""
    paths = ["/report", "/app.js", "/moved", "/private"]
    links = "".join(f"<a href='{path}'>{WORDS}</a>" for path in paths)
    page = html("home", f"<p>{WORDS}</p>{links}")
    robots = b"# padding\n" * 20_000 + b"User-agent: *\nDisallow: /private\n"
    bodies = {
        "/": ("text/html", page.encode(), True, None),
        "/report": ("application/pdf", b"%PDF-1.4\n" + b"\0" * LARGE, with_length, None),
        "/robots.txt": ("text/plain", robots, False, None),
        # Small, its length said: cheaper whole than a new connection after a stop.
        "/app.js": ("application/javascript", b"var birds = 1;\n" * 4000, True, None),
        "/moved": ("text/plain", b"moved to /page\n" * 20_000, False, "/page"),
        "/page": ("text/html", html("page", f"<p>{WORDS}</p>").encode(), True, None),
    }
    with _StreamedSite(bodies) as site:
        url = site.url
        crawl = run_crawl(tmp_path, {"strategy": "bfs", "query": WORDS, "seeds": f"{url}/"})
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert site.sent["/report"] < LARGE // 4, site.sent  # not 8 MiB: 1.6 s of slack
    assert stat(log, "downloader/response_bytes") < LARGE // 4
    assert stat(log, "focused/skipped/not_html") == 2  # counted as before, /app.js too
    assert stat(log, "focused/not_html_stopped") == 1
    assert site.sent["/robots.txt"] >= len(robots) and "/private" not in site.fetched
    assert site.cut == ["/report"]  # the script's and the redirect's bodies came whole
    assert sorted(page["url"] for page in crawl.pages()) == [f"{url}/", f"{url}/page"]


def test_a_recrawl_stops_a_large_non_html_body_at_its_headers_too(tmp_path):
    """A stored page now served as a PDF was downloaded whole by the recrawl, which skips it
    as the crawl does (``not_html``, its visit only tried)."""
    db = tmp_path / "focused.sqlite3"
    body = b"%PDF-1.4\n" + b"\0" * LARGE
    with _StreamedSite({"/a": ("application/pdf", body, True, None)}) as site:
        stored_crawl(db, [f"{site.url}/a"])
        result = recrawl(db, "c1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert site.sent["/a"] < LARGE // 4, site.sent
    assert stat(result.stderr, "focused/skipped/not_html") == 1
    assert stat(result.stderr, "focused/not_html_stopped") == 1


@pytest.mark.parametrize(
    "content_type",
    [None, "", "text/html", "TEXT/HTML", "text/html;;charset=x-klingon", "application/xhtml+xml",
     "text/plain", "application/pdf", "application/octet-stream", "image/png"],
)  # fmt: skip
def test_a_download_is_stopped_only_when_the_spider_would_skip_its_page_whatever_its_body(
    content_type,
):
    """The stop reads the headers as page_skip_reason does: a page it stops is ``not_html``
    whatever body came, and one it lets through may be read."""
    headers = Headers({} if content_type is None else {"Content-Type": content_type})
    crawler = get_crawler(settings_dict={"DOWNLOAD_MAXSIZE": 10 * 1024 * 1024})
    stop = NotHtmlStopMiddleware.from_crawler(crawler)
    request = Request("http://127.0.0.1/download")
    try:
        stop.headers_received(headers, None, request)
    except StopDownload as stopped:
        assert not stopped.fail  # the response goes to the callback, which counts it
        stopped_here = True
    else:
        stopped_here = False
    body = html("page", f"<p>{WORDS}</p>").encode()
    response = responsetypes.from_args(headers=headers, url=request.url, body=body)(
        url=request.url, headers=headers, body=body, request=request
    )
    assert stopped_here == (page_skip_reason(response) == "not_html")
