"""Pages built by JavaScript: ``-a render=never|always|auto`` with the system's Chromium.

A loopback site serves two seeds: ``/app.html``, whose links a script inserts after the load
event (from ``/api/links.json``), and ``/plain.html``, an ordinary page with ordinary links
(and an analytics-like script, which alone must not make it look script-built). Real crawls
run in a subprocess; the site's access log shows what was fetched, the log's stats dump how
many pages were rendered. Bad render arguments and a missing browser (one-line errors) are
tested with the other bad input in ``test_bad_input.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import ssl
import stat
import subprocess
import threading
import time
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler
from w3lib.http import basic_auth_header

from focused.playwrightdriver import driver_exited
from focused.render import (
    DRIVER_EXIT_SEEN_S,
    MAX_RELOADS,
    RenderMiddleware,
    contexts_with_password,
    looks_script_built,
)
from tests.conftest import REPO, Crawl, as_from_a_terminal, crawl_args, crawl_env, run_crawl
from tests.sites import self_signed_certificate
from tests.test_bad_input import closed_port

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"  # .ci/run installs it

BIRDS = ("albatross", "puffin", "penguin")
PLAIN = ("heron", "stork", "crane")
API_DELAY_S = 1.0  # the settle (FOCUSED_RENDER_SETTLE_MS) waits for it; without it, no links
STUCK_S = 5.0  # longer than the navigation timeout of the test that uses it
SLOW_CHUNK = 64 * 1024
SLOW_PAUSE_S = 0.05  # about 1.3 MiB/s: a body of 4 MiB takes 3 s to send
WORDS = "birds feathers wings nests eggs flight plumage beaks songs migration " * 8

APP = """<!doctype html><html><head><title>Bird app</title>
<script>
window.addEventListener("load", () => {
  fetch("/api/links.json").then((r) => r.json()).then((links) => {
    const list = document.getElementById("links");
    for (const link of links) {
      const a = document.createElement("a");
      a.href = link.href;
      a.textContent = link.text;
      const li = document.createElement("li");
      li.appendChild(a);
      list.appendChild(li);
    }
  });
});
</script></head>
<body><h1>Birds</h1><img src="/img/bird.png" alt=""><ul id="links"></ul></body></html>"""

PLAIN_PAGE = f"""<!doctype html><html><head><title>Wading birds</title>
<script>window.analytics = [];</script></head>
<body><h1>Wading birds</h1><p>{WORDS}</p><ul>
{"".join(f'<li><a href="/plain/{name}.html">{name} birds</a></li>' for name in PLAIN)}
</ul></body></html>"""


def target_page(name: str) -> str:
    return f"<html><head><title>{name}</title></head><body><p>The {name}: {WORDS}</p></body></html>"


class Site:
    """The pages on 127.0.0.1, on an ephemeral port; ``fetched`` lists each path requested."""

    def __init__(self) -> None:
        links = [{"href": f"/birds/{name}.html", "text": f"{name} birds"} for name in BIRDS]
        self.pages: dict[str, tuple[str, str | bytes]] = {
            "/app.html": ("text/html; charset=utf-8", APP),
            "/plain.html": ("text/html; charset=utf-8", PLAIN_PAGE),
            "/api/links.json": ("application/json", json.dumps(links)),
            **{
                f"/{folder}/{name}.html": ("text/html; charset=utf-8", target_page(name))
                for folder, names in (("birds", BIRDS), ("plain", PLAIN))
                for name in names
            },
        }
        self.redirects: dict[str, str] = {}  # path -> Location of a 302
        # path -> headers and size of a body sent slowly (SLOW_CHUNK, SLOW_PAUSE_S apart), with a
        # Content-Length if its headers have one; ``sent`` counts the bytes it was sent of it.
        self.slow: dict[str, tuple[dict[str, str], int]] = {}
        self.sent: dict[str, int] = {}
        self.fetched: list[str] = []
        # With ``password`` (an Authorization value), every path answers 401 without it.
        self.password: str | None = None
        self.authorized: list[str] = []  # each request's host and path sent with a password
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.fetched.append(self.path)
                if self.headers.get("Authorization"):
                    site.authorized.append(f"{self.headers['Host']}{self.path}")
                if site.password and self.headers.get("Authorization") != site.password:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="birds"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                path = self.path.split("?")[0]  # a page takes any query
                if path in site.redirects:
                    self.send_response(302)
                    self.send_header("Location", site.redirects[path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if path.startswith("/stuck/"):
                    time.sleep(STUCK_S)  # an answer that never comes (within the timeout)
                    self.send_error(504)
                    return
                if path in site.slow:
                    self.send_slowly(*site.slow[path])
                    return
                if path not in site.pages:
                    self.send_error(404)
                    return
                if path.startswith("/api/"):
                    time.sleep(API_DELAY_S)  # content arriving well after the load event
                content_type, body = site.pages[path]
                data = body if isinstance(body, bytes) else body.encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def send_slowly(self, headers: dict[str, str], size: int) -> None:
                self.send_response(200)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.close_connection = "Content-Length" not in headers
                self.end_headers()
                chunk = b"%PDF-1.4\n".ljust(SLOW_CHUNK, b"\0")
                site.sent.setdefault(self.path, 0)
                for _ in range(size // SLOW_CHUNK):
                    try:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    except OSError:  # the browser closed the connection
                        return
                    site.sent[self.path] += SLOW_CHUNK
                    time.sleep(SLOW_PAUSE_S)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def count(self, path: str) -> int:
        return self.fetched.count(path)


@pytest.fixture
def js_site():
    site = Site()
    site.thread.start()
    yield site
    site.server.shutdown()
    site.server.server_close()


def rendered(seeds: str, render: str = "always") -> dict[str, str]:
    """The spider arguments of a bfs crawl of ``seeds`` (comma-separated) about birds."""
    return {"query": "birds feathers wings", "seeds": seeds, "strategy": "bfs", "render": render}


def crawl(tmp_path, site: Site, render: str, **settings):
    arguments = rendered(f"{site.url}/app.html,{site.url}/plain.html", render)
    # The page goes quiet half a second after the API answers, and the settle ends then; the
    # default cap (2 s) left a loaded Chromium under a second for the fetch and the script.
    settle = {"FOCUSED_RENDER_SETTLE_MS": 30_000}
    result = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 20, **settle, **settings})
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    return result


def stat_value(log: str, name: str) -> int:
    """A counter from Scrapy's stats dump at the end of the log (0 when absent)."""
    found = re.search(rf"'{re.escape(name)}': (\d+)", log.rsplit("Dumping Scrapy stats", 1)[1])
    return int(found.group(1)) if found else 0


def stored_paths(result) -> list[str]:
    return [page["url"].split("/", 3)[3] for page in result.pages()]


def page_warnings(log: str) -> list[str]:
    """The log's warning lines, but for the closing one that names the seeds not fetched."""
    return [
        line
        for line in log.splitlines()
        if "] WARNING: " in line and "Seeds that could not be fetched" not in line
    ]


def test_render_never_misses_script_built_links(tmp_path, js_site):
    result = crawl(tmp_path, js_site, "never")
    paths = stored_paths(result)
    assert sorted(paths) == sorted(["app.html", "plain.html", *(f"plain/{n}.html" for n in PLAIN)])
    assert not [path for path in js_site.fetched if path.startswith(("/birds/", "/api/"))]
    log = result.result.stderr
    assert stat_value(log, "focused/rendered") == 0
    assert "scrapy-playwright" not in log  # a plain crawl does not even load it


def test_render_always_discovers_and_crawls_script_built_links(tmp_path, js_site):
    result = crawl(tmp_path, js_site, "always")
    paths = stored_paths(result)
    for name in BIRDS:
        assert f"birds/{name}.html" in paths, paths
        assert js_site.count(f"/birds/{name}.html") == 1
    app = next(page for page in result.pages() if page["url"].endswith("/app.html"))
    assert "albatross birds" in app["text"]  # the rendered text is what gets scored and stored
    assert js_site.count("/api/links.json") == 1
    assert js_site.count("/img/bird.png") == 0  # images are not fetched unless asked for
    assert len(paths) == len(set(paths)) == 2 + len(BIRDS) + len(PLAIN)
    log = result.result.stderr
    assert stat_value(log, "focused/rendered") == len(paths)
    assert stat_value(log, "focused/pages") == len(paths)
    assert stat_value(log, "focused/rendered_before_load") == 0  # each page's load came


def test_render_auto_renders_only_the_script_built_page(tmp_path, js_site):
    result = crawl(tmp_path, js_site, "auto")
    pages = result.pages()
    paths = stored_paths(result)
    for name in BIRDS:
        assert f"birds/{name}.html" in paths, paths
    assert len(paths) == len(set(paths)) == 2 + len(BIRDS) + len(PLAIN)  # each stored once
    log = result.result.stderr
    assert stat_value(log, "focused/render_needed") == 1
    assert stat_value(log, "focused/rendered") == 1
    assert stat_value(log, "focused/pages") == len(paths)  # the app page counted once
    assert js_site.count("/app.html") == 2  # plainly, then in the browser
    assert js_site.count("/plain.html") == 1  # its script alone did not make it look built
    assert all(js_site.count(f"/plain/{name}.html") == 1 for name in PLAIN)
    app = next(page for page in pages if page["url"].endswith("/app.html"))
    assert app["level"] == 0 and "puffin birds" in app["text"]
    bird = next(page for page in pages if page["url"].endswith("/birds/puffin.html"))
    assert bird["level"] == 1 and bird["parent_url"] == app["url"]
    assert bird["anchor"] == "puffin birds"


@pytest.mark.parametrize(
    ("html", "built"),
    [
        (APP, True),  # no links, a script
        (PLAIN_PAGE, False),  # a script, but words and links enough
        (target_page("heron"), False),  # no links, but no script either
        ('<html><body><div id="root"></div><p>Loading</p></body></html>', True),  # app shell
        (
            f'<html><body><div id="__next"><p>{WORDS}</p>'
            + '<a href="/a">a</a> <a href="/b">b</a> <a href="/c">c</a></div>'
            + '<script id="__NEXT_DATA__" type="application/json">{}</script></body></html>',
            False,  # rendered on the server: nothing missing
        ),
    ],
)
def test_looks_script_built(html, built):
    response = HtmlResponse("http://127.0.0.1/page", body=html.encode(), encoding="utf-8")
    assert looks_script_built(response, min_words=50, min_links=3) is built


def test_a_redirect_the_browser_follows_is_judged_like_any_other(tmp_path, js_site):
    """Chromium follows redirects itself, HTTP and script ones: where it lands must pass
    robots.txt, allowed_domains and the seen URLs, as a plain redirect's target does."""
    offsite = f"http://localhost:{js_site.server.server_port}/birds/puffin.html"
    js_site.redirects.update(
        {
            "/moved/private": "/private/secret.html",
            "/moved/offsite": offsite,
            "/moved/heron": "/plain/heron.html",
        }
    )
    script_moved = f"<html><head><script>location.href = '{offsite}';</script></head></html>"
    links = ["/moved/private", "/moved/offsite", "/moved/heron", "/script-moved.html"]
    hub = "".join(f'<p><a href="{link}">{link} birds</a></p>' for link in links)
    js_site.pages.update(
        {
            "/robots.txt": ("text/plain", "User-agent: *\nDisallow: /private/\n"),
            "/private/secret.html": ("text/html", target_page("secret")),
            "/script-moved.html": ("text/html", script_moved),
            "/hub.html": ("text/html", f"<html><body><p>{WORDS}</p>{hub}</body></html>"),
        }
    )
    arguments = {**rendered(f"{js_site.url}/hub.html"), "allowed_domains": "127.0.0.1"}
    result = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 20})
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    urls = [page["url"] for page in result.pages()]
    assert sorted(stored_paths(result)) == ["hub.html", "plain/heron.html"], urls
    heron = next(page for page in result.pages() if page["url"].endswith("/plain/heron.html"))
    assert heron["level"] == 1 and heron["parent_url"] == f"{js_site.url}/hub.html"
    assert heron["anchor"] == "/moved/heron birds"
    assert heron["requested_url"] == f"{js_site.url}/moved/heron"  # where the link led it
    log = result.result.stderr
    assert stat_value(log, "robotstxt/forbidden") == 1
    assert stat_value(log, "offsite/filtered") == 2
    assert stat_value(log, "focused/rendered") == 2  # the pages stored; not the redirects


def test_a_site_that_asks_for_a_password_is_rendered_and_keeps_it(tmp_path, js_site):
    """The browser gets in with HTTPAUTH_USER's password where HTTPAUTH_DOMAIN says, and sends
    it nowhere else: not to a link's host, nor where a redirect, which Chromium follows on its
    own, leads (Chromium kept the headers Scrapy gave it across that redirect)."""
    port = js_site.server.server_port
    elsewhere = f"http://localhost:{port}"  # the same server, another origin
    js_site.password = basic_auth_header("u", "p").decode()
    js_site.redirects["/away.html"] = f"{elsewhere}/plain/heron.html"
    links = ["/app.html", "/away.html", f"{elsewhere}/plain/stork.html"]
    hub = "".join(f'<p><a href="{link}">{link} birds</a></p>' for link in links)
    js_site.pages["/hub.html"] = ("text/html", f"<html><body><p>{WORDS}</p>{hub}</body></html>")
    auth = {"HTTPAUTH_USER": "u", "HTTPAUTH_PASS": "p", "HTTPAUTH_DOMAIN": f"127.0.0.1:{port}"}
    settle = {"FOCUSED_RENDER_SETTLE_MS": 30_000}  # as crawl(): the app's links come late
    result = run_crawl(
        tmp_path,
        rendered(f"{js_site.url}/hub.html"),
        {"CLOSESPIDER_PAGECOUNT": 20, **auth, **settle},
    )
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    paths = stored_paths(result)
    # the app page and the links its script fetched with the password, behind it
    assert sorted(paths) == sorted(["hub.html", "app.html", *(f"birds/{n}.html" for n in BIRDS)])
    assert f"127.0.0.1:{port}/api/links.json" in js_site.authorized
    assert [sent for sent in js_site.authorized if not sent.startswith("127.0.0.1")] == []
    assert js_site.count("/plain/heron.html") >= 1 and js_site.count("/plain/stork.html") >= 1


def test_the_password_joins_the_default_context_s_own_options():
    own = {"username": "v", "password": "q", "origin": "http://other.org"}
    settings = Settings(
        {
            "HTTPAUTH_DOMAIN": "Example.org:8080",
            "PLAYWRIGHT_CONTEXTS": {"default": {"locale": "fr-FR", "http_credentials": own}},
        }
    )
    default = contexts_with_password(settings, "u", "p")["default"]
    assert default == {
        "locale": "fr-FR",
        "http_credentials": [
            {"username": "u", "password": "p", "origin": "http://example.org:8080"},
            {"username": "u", "password": "p", "origin": "https://example.org:8080"},
            own,
        ],
    }
    # An empty HTTPAUTH_DOMAIN: Scrapy sends the password to every host, and so does the browser
    everywhere = contexts_with_password(Settings({"HTTPAUTH_DOMAIN": ""}), "u", "p")
    assert everywhere == {"default": {"http_credentials": [{"username": "u", "password": "p"}]}}


def test_a_page_a_script_moves_on_and_on_is_a_redirect_loop(tmp_path, js_site):
    """A script that moves the page to itself with a new query, or two pages that move to each
    other: each move is a redirect, requested in turn, until REDIRECT_MAX_TIMES or the URLs
    already seen cut it. The browser goes no further than the first move: left to go on, it
    fetched hundreds of pages from the host in a second, and the page was a download error."""
    script = "<html><head><script>location.href = {};</script></head><body>Moving</body></html>"
    js_site.pages.update(
        {
            "/loop.html": ("text/html", script.format("'/loop.html?n=' + Math.random()")),
            "/ping.html": ("text/html", script.format("'/pong.html'")),
            "/pong.html": ("text/html", script.format("'/ping.html'")),
        }
    )
    arguments = rendered(
        f"{js_site.url}/loop.html,{js_site.url}/ping.html,{js_site.url}/plain.html"
    )
    result = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 10})
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    log = result.result.stderr
    assert page_warnings(log) == []
    # Each of the 6 renders of the loop (the seed, 5 redirects) fetched two pages more at most:
    # a move may come before the browser is watched, as the page methods start.
    loops = [path for path in js_site.fetched if path.startswith("/loop.html")]
    assert len(loops) <= 3 * 6, len(loops)
    assert js_site.count("/ping.html") + js_site.count("/pong.html") <= 6, js_site.fetched
    assert stat_value(log, "focused/skipped/redirect_loop") == 1
    assert stat_value(log, "focused/skipped/download_error") == 0
    assert sorted(stored_paths(result)) == sorted(
        ["plain.html", *(f"plain/{name}.html" for name in PLAIN)]
    )


def test_a_page_that_reloads_on_and_on_is_skipped(tmp_path, js_site):
    """A page may reload itself a few times (to set a cookie); one that goes on had the browser
    fetch it some 700 times a second until the settle ended, and then failed anyway."""
    js_site.pages["/reload.html"] = ("text/html", "<script>location.reload();</script>")
    arguments = rendered(f"{js_site.url}/reload.html,{js_site.url}/plain.html")
    result = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 5})
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    log = result.result.stderr
    assert js_site.count("/reload.html") <= 2 + MAX_RELOADS, js_site.count("/reload.html")
    warnings = page_warnings(log)
    assert len(warnings) == 1 and "/reload.html" in warnings[0], warnings
    assert f"the page reloaded itself {MAX_RELOADS + 1} times" in warnings[0]
    assert stat_value(log, "focused/skipped/download_error") == 1
    assert "plain.html" in stored_paths(result)


# A page whose load never ends: the script at its end is never answered (see the site's
# /stuck/), so neither its DOMContentLoaded nor its load event comes; the rest was rendered.
STUCK_PAGE = (
    "text/html",
    f"""<html><head><title>Stuck birds</title></head><body><h1>Stuck birds</h1>
<p>{WORDS}</p><p id="made"></p>
{"".join(f'<a href="/plain/{name}.html">{name} birds</a> ' for name in PLAIN)}
<script>document.getElementById("made").textContent = "written by a script";</script>
<script src="/stuck/app.js"></script></body></html>""",
)


def test_a_page_whose_load_never_ends_is_kept_as_rendered(tmp_path, js_site):
    """Its load event does not come within the navigation timeout: the page is taken as it
    was rendered by then, stored, and its links followed; no warning, one page counted."""
    js_site.pages["/stuck.html"] = STUCK_PAGE
    arguments = rendered(f"{js_site.url}/stuck.html")
    # Every page's navigation has this timeout: at 1 s, two of the three linked pages, opened
    # at once by a loaded machine (a CI run), once missed it.
    settings = {"CLOSESPIDER_PAGECOUNT": 10, "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": 3000}
    result = run_crawl(tmp_path, arguments, settings)
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    log = result.result.stderr
    assert js_site.count("/stuck/app.js") == 1
    stuck = next(page for page in result.pages() if page["url"].endswith("/stuck.html"))
    assert stuck["url"] == f"{js_site.url}/stuck.html" and stuck["status"] == 200
    assert stuck["title"] == "Stuck birds"
    assert "migration" in stuck["text"] and "written by a script" in stuck["text"]
    assert sorted(stored_paths(result)) == sorted(
        ["stuck.html", *(f"plain/{name}.html" for name in PLAIN)]
    ), page_warnings(log)
    heron = next(page for page in result.pages() if page["url"].endswith("/plain/heron.html"))
    assert heron["level"] == 1 and heron["parent_url"] == stuck["url"]
    assert heron["anchor"] == "heron birds"
    assert page_warnings(log) == []
    assert stat_value(log, "focused/rendered_before_load") == 1
    assert stat_value(log, "focused/rendered") == stat_value(log, "focused/pages") == 4
    assert stat_value(log, "focused/skipped/download_error") == 0


def test_a_page_the_browser_cannot_load_is_one_log_line(tmp_path, js_site):
    """A page whose server does not answer within the navigation timeout, or refuses the
    connection, is skipped with one warning line, not a traceback and Playwright's call log;
    the crawl goes on."""
    refused = f"http://127.0.0.1:{closed_port()}/refused.html"
    arguments = rendered(f"{js_site.url}/stuck/page.html,{refused},{js_site.url}/plain.html")
    settings = {"CLOSESPIDER_PAGECOUNT": 5, "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": 3000}
    # Obeyed, the refused host's robots.txt, unreachable, refuses its page before the browser
    # tries it (RFC 9309).
    settings["ROBOTSTXT_OBEY"] = False
    result = run_crawl(tmp_path, arguments, settings)
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    log = result.result.stderr
    assert "Traceback" not in log and "Call log" not in log, log[-3000:]
    warnings = page_warnings(log)
    assert len(warnings) == 2, warnings
    timeout = next(line for line in warnings if "/stuck/page.html" in line)
    assert "Timeout" in timeout
    assert "ERR_CONNECTION_REFUSED" in next(line for line in warnings if refused in line)
    (named,) = [line for line in log.splitlines() if "Seeds that could not be fetched" in line]
    assert f"{js_site.url}/stuck/page.html (" in named and f"{refused} (" in named, named
    assert stat_value(log, "focused/skipped/download_error") == 2
    assert stat_value(log, "focused/rendered_before_load") == 0
    assert "plain.html" in stored_paths(result)


def test_a_page_whose_script_never_ends_is_skipped(tmp_path, js_site):
    """A script that never yields, before the load event or after it: Playwright waited for the
    page's HTML without end, and the crawl never ended (not even on Ctrl-C). The page is
    given the navigation timeout to answer, then skipped in one warning line."""
    endless = "<html><head><title>Busy</title></head><body><p>{}</p><script>{}</script></body>"
    js_site.pages.update(
        {
            "/busy.html": ("text/html", endless.format(WORDS, "while (true) {}")),
            "/busy-after-load.html": (
                "text/html",
                endless.format(WORDS, "addEventListener('load', () => { while (true) {} });"),
            ),
        }
    )
    busy = [f"{js_site.url}/busy.html", f"{js_site.url}/busy-after-load.html"]
    arguments = rendered(",".join([*busy, f"{js_site.url}/plain.html"]))
    # The timeout is every page's, and the busy pages' scripts keep the browser busy until it
    # ends: at 1 s, the plain pages rendered beside them on a loaded machine timed out too.
    settings = {"CLOSESPIDER_PAGECOUNT": 10, "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": 3000}
    result = run_crawl(tmp_path, arguments, settings, timeout=120)
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    log = result.result.stderr
    assert "Traceback" not in log, log[-3000:]
    warnings = page_warnings(log)
    assert len(warnings) == 2, warnings
    for url in busy:
        line = next(line for line in warnings if f"<GET {url}>" in line)
        assert "the page did not answer within 3000 ms" in line
    assert stat_value(log, "focused/skipped/download_error") == 2
    assert sorted(stored_paths(result)) == sorted(
        ["plain.html", *(f"plain/{name}.html" for name in PLAIN)]
    )


def test_a_page_s_script_opens_no_windows(tmp_path, js_site):
    """Playwright turns Chromium's popup blocker off: each window a page's script opened
    fetched its page outside the crawl (no robots.txt, no delay, no dupefilter) and stayed open
    until the crawl ended, beyond PLAYWRIGHT_MAX_PAGES_PER_CONTEXT."""
    opens = "".join(f"window.open('/birds/{name}.html');" for name in BIRDS)
    js_site.pages["/popups.html"] = (
        "text/html",
        f"<html><head><script>{opens}</script></head><body><p>{WORDS}</p></body></html>",
    )
    arguments = rendered(f"{js_site.url}/popups.html")
    result = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 5})
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    assert stored_paths(result) == ["popups.html"]
    assert [path for path in js_site.fetched if path.startswith("/birds/")] == []
    assert stat_value(result.result.stderr, "playwright/page_count/max_concurrent") == 1


def test_a_seed_the_browser_cannot_load_is_named_in_one_line(tmp_path, js_site):
    arguments = {
        "query": "birds",
        "seeds": f"{js_site.url}/stuck/page.html",
        "strategy": "bfs",
        "render": "always",
    }
    result = run_crawl(tmp_path, arguments, {"PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": 1000})
    assert result.result.returncode == 1, result.result.stderr[-3000:]
    log = result.result.stderr.splitlines()
    at = next(i for i, line in enumerate(log) if "No seed could be fetched" in line)
    assert log[at].endswith(f"{js_site.url}/stuck/page.html (Page.goto: Timeout 1000ms exceeded.)")
    assert log[at + 1].startswith("20"), log[at : at + 4]  # the next is a line of its own


def test_browser_failing_during_the_crawl_stops_it_with_exit_1(tmp_path, js_site):
    """Chromium launches for the check before the crawl, then no more: the crawl stops."""
    marker = tmp_path / "launched-once"
    browser = tmp_path / "chromium-once"
    browser.write_text(
        f'#!/bin/sh\n[ -e "{marker}" ] && exit 1\ntouch "{marker}"\nexec {CHROMIUM} "$@"\n'
    )
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    arguments = {
        "strategy": "bfs",
        "query": "birds",
        "seeds": f"{js_site.url}/app.html",
        "render": "always",
    }
    result = run_crawl(tmp_path, arguments, {"FOCUSED_CHROMIUM": browser})
    assert result.result.returncode == 1, result.result.stderr[-3000:]
    log = result.result.stderr
    errors = [line for line in log.splitlines() if "cannot launch Chromium" in line]
    assert len(errors) == 1 and "apt-get install chromium" in errors[0], errors
    assert "Traceback" not in log
    assert result.crawl_record()["finish_reason"] == "browser_unavailable"
    assert result.crawl_record()["status"] == "interrupted"
    assert result.pages() == []


def test_a_browser_redirect_counts_once_against_redirect_max_times():
    """scrapy-playwright records the browser's HTTP redirects in the meta; a script redirect
    it does not see. Each counts once, so that REDIRECT_MAX_TIMES means what it says."""
    crawler = get_crawler(settings_dict={"REDIRECT_MAX_TIMES": 2})
    middleware = RenderMiddleware(crawler, "always")
    page = "http://127.0.0.1/a.html"
    landed = HtmlResponse("http://127.0.0.1/b.html", body=b"<html></html>")

    def render(request: Request, response: HtmlResponse, *, http_redirect: bool) -> Request:
        middleware.process_request(request)
        if http_redirect:  # what scrapy-playwright writes when the browser followed a 302
            request.meta.update(redirect_urls=[request.url], redirect_times=1)
        return middleware.process_response(request, response)

    for http_redirect in (True, False):
        followed = render(Request(page), landed, http_redirect=http_redirect)
        assert isinstance(followed, Request) and followed.url == landed.url
        assert followed.meta["redirect_urls"] == [page] and followed.meta["redirect_times"] == 1
        assert not followed.dont_filter
        back = HtmlResponse(page, body=b"<html></html>")
        again = render(followed, back, http_redirect=http_redirect)
        assert again.meta["redirect_urls"] == [page, landed.url]
        assert again.meta["redirect_times"] == 2
        with pytest.raises(IgnoreRequest, match="max redirections"):
            render(again, landed, http_redirect=http_redirect)
    same = HtmlResponse(f"{page}#top", body=b"<html></html>")  # the same page: taken
    assert middleware.process_response(Request(page, meta={"playwright": True}), same) is same


def test_a_browser_redirect_to_another_host_is_sent_in_that_hosts_slot():
    """The request for where the browser landed carried the downloader slot of the page it
    left (``download_slot``, which the downloader reads before the URL): a page on another host
    went past that host's Crawl-delay and concurrency, as a plain redirect's target did
    (``tests/test_politeness.py``)."""
    middleware = RenderMiddleware(get_crawler(), "always")
    request = Request("http://127.0.0.1/a.html", meta={"download_slot": "127.0.0.1"})
    middleware.process_request(request)
    landed = HtmlResponse("http://127.0.0.2/b.html", body=b"<html></html>")
    followed = middleware.process_response(request, landed)
    assert isinstance(followed, Request) and followed.url == landed.url
    assert "download_slot" not in followed.meta


@pytest.mark.parametrize("mode", ["always", "auto"])
def test_head_check_requests_are_not_rendered(mode):
    """HEAD_CHECK's HEAD before each GET: Chromium would navigate to the page (a whole GET,
    each page rendered twice) and fail on a server that refuses HEAD, losing the page."""
    thresholds = {"FOCUSED_RENDER_AUTO_MIN_WORDS": 50, "FOCUSED_RENDER_AUTO_MIN_LINKS": 3}
    middleware = RenderMiddleware(get_crawler(settings_dict=thresholds), mode)
    head = Request("http://127.0.0.1/a.html", method="HEAD")
    middleware.process_request(head)
    assert "playwright" not in head.meta
    app = HtmlResponse(head.url, body=APP.encode(), encoding="utf-8")  # looks script-built
    assert middleware.process_response(head, app) is app


def test_a_rendered_page_over_download_maxsize_is_skipped(tmp_path, js_site):
    """The browser knows no DOWNLOAD_MAXSIZE: a page served larger than it, or grown past it
    by a script, is skipped as too_large, as a plain fetch of it would be, not scored and
    stored."""
    maxsize = 20_000
    grown = "document.body.innerHTML += '<p>' + 'birds feathers '.repeat(3000) + '</p>';"
    js_site.pages.update(
        {
            "/big.html": ("text/html", target_page("big") + "<p>feathers</p>" * 2000),
            "/grown.html": ("text/html", f"<html><body><script>{grown}</script></body></html>"),
        }
    )
    arguments = rendered(
        f"{js_site.url}/big.html,{js_site.url}/grown.html,{js_site.url}/plain.html"
    )
    result = run_crawl(tmp_path, arguments, {"DOWNLOAD_MAXSIZE": maxsize})
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    assert len(js_site.pages["/big.html"][1]) > maxsize > len(js_site.pages["/grown.html"][1])
    paths = stored_paths(result)
    assert "big.html" not in paths and "grown.html" not in paths, paths
    assert "plain.html" in paths
    log = result.result.stderr
    assert stat_value(log, "focused/skipped/too_large") == 2
    warnings = page_warnings(log)
    assert len(warnings) == 2 and all("DOWNLOAD_MAXSIZE" in line for line in warnings), warnings


def test_a_site_with_a_self_signed_certificate_is_rendered(tmp_path):
    """Scrapy does not check certificates; the browser must not either, or a site a plain
    crawl fetches renders nothing (ERR_CERT_AUTHORITY_INVALID)."""
    site = Site()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*self_signed_certificate(tmp_path))
    site.server.socket = context.wrap_socket(site.server.socket, server_side=True)
    site.thread.start()
    try:
        arguments = rendered(f"https://127.0.0.1:{site.server.server_port}/plain.html")
        result = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 10})
    finally:
        site.server.shutdown()
        site.server.server_close()
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    assert sorted(stored_paths(result)) == sorted(
        ["plain.html", *(f"plain/{name}.html" for name in PLAIN)]
    )
    assert stat_value(result.result.stderr, "focused/rendered") == 1 + len(PLAIN)


def test_a_binary_served_as_html_is_skipped_when_rendered(tmp_path, js_site):
    """A plain fetch sniffs a body served as HTML and skips a binary one (binary_body); the
    browser parses it into a DOM of garbage, which was stored and scored as a page. A UTF-16
    page with its BOM and no charset, whose bytes hold NULs, is text and is stored."""
    garbage = bytes((i * 7919 + 13) % 256 for i in range(5000))
    utf16 = "\ufeff" + target_page("utf16")
    js_site.pages.update(
        {
            "/image.html": ("text/html", b"\x89PNG\r\n\x1a\n" + garbage),
            "/download": ("text/html; charset=utf-8", garbage),
            "/utf16.html": ("text/html", utf16.encode("utf-16-le")),
        }
    )
    seeds = ",".join(f"{js_site.url}/{path}" for path in ("image.html", "download", "utf16.html"))
    result = run_crawl(tmp_path, rendered(f"{seeds},{js_site.url}/plain.html"))
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    paths = stored_paths(result)
    assert "image.html" not in paths and "download" not in paths, paths
    assert "utf16.html" in paths and "plain.html" in paths, paths
    log = result.result.stderr
    assert stat_value(log, "focused/skipped/binary_body") == 2
    assert "a binary body, not text" in log  # the seeds' warning line says why


def test_a_page_whose_script_changes_the_url_it_shows_is_kept_where_fetched(tmp_path, js_site):
    """history.replaceState and pushState change the URL a page shows, not the page: it was
    requested again at that URL as after a redirect, and lost where its server does not serve
    it (404), or fetched six times and cut as a redirect loop where the script adds a new
    query each time."""

    def showing(title: str, script: str) -> str:
        link = '<a href="/plain/heron.html">heron birds</a>'
        return (
            f"<html><head><title>{title}</title><script>{script}</script></head>"
            f"<body><p>{WORDS}</p>{link}</body></html>"
        )

    js_site.pages.update(
        {
            "/stamped.html": (
                "text/html",
                showing("stamped", "history.replaceState(null, '', '?v=' + Date.now());"),
            ),
            "/folder": (
                "text/html",
                showing("folder", "history.pushState(null, '', location.pathname + '/');"),
            ),
        }
    )
    seeds = f"{js_site.url}/stamped.html,{js_site.url}/folder"
    result = run_crawl(tmp_path, rendered(seeds), {"CLOSESPIDER_PAGECOUNT": 10})
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    assert sorted(stored_paths(result)) == ["folder", "plain/heron.html", "stamped.html"]
    assert js_site.count("/folder/") == 0
    assert len([path for path in js_site.fetched if path.startswith("/stamped.html")]) == 1
    assert not page_warnings(result.result.stderr)


def test_the_browser_fetches_nothing_robots_txt_disallows(tmp_path, js_site):
    """robots.txt covers what a rendered page's scripts fetch, not only the pages: the browser
    fetched the app's data (/api/links.json) with the crawl's user agent where robots.txt
    forbade it."""
    js_site.pages["/robots.txt"] = ("text/plain", "User-agent: *\nDisallow: /api/\n")
    result = crawl(tmp_path, js_site, "always")
    assert js_site.count("/api/links.json") == 0
    assert stat_value(result.result.stderr, "focused/robots/render_disallowed") == 1
    assert sorted(stored_paths(result)) == sorted(
        ["app.html", "plain.html", *(f"plain/{name}.html" for name in PLAIN)]
    )
    # Without ROBOTSTXT_OBEY the browser fetches it, and the app's links are crawled.
    js_site.fetched.clear()
    unbound = crawl(tmp_path / "unbound", js_site, "always", ROBOTSTXT_OBEY=False)
    assert js_site.count("/api/links.json") == 1
    assert {f"birds/{name}.html" for name in BIRDS} <= set(stored_paths(unbound))


def test_links_in_a_web_component_s_shadow_root_are_followed(tmp_path, js_site):
    """A web component's links live in its shadow root, which the page's HTML leaves out: a
    reader sees and follows them, the crawl did not."""
    links = "".join(f'<a href="/birds/{name}.html">{name} birds</a>' for name in BIRDS[:2])
    inner = f'<a href="/birds/{BIRDS[2]}.html">{BIRDS[2]} birds</a>'
    define = (
        "customElements.define('%s', class extends HTMLElement { connectedCallback() {"
        " this.attachShadow({mode: 'open'}).innerHTML = '%s'; } });"
    )
    script = define % ("bird-links", f"{links}<bird-more></bird-more>") + define % (
        "bird-more",
        inner,
    )
    js_site.pages["/components.html"] = (
        "text/html",
        f"<html><head><title>Birds</title></head><body><p>{WORDS}</p>"
        f"<bird-links></bird-links><script>{script}</script></body></html>",
    )
    result = run_crawl(tmp_path, rendered(f"{js_site.url}/components.html"))
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    assert sorted(stored_paths(result)) == sorted(
        ["components.html", *(f"birds/{name}.html" for name in BIRDS)]
    )


def test_a_rendered_link_that_is_not_html_is_stopped_at_its_headers(tmp_path, js_site):
    """Chromium downloaded whole a link whose headers say it is no HTML page, for the spider to
    skip it as not_html: an extensionless PDF (shown by Chromium's PDF viewer), a binary without
    Content-Length and an attachment (downloads, not navigations). Each is stopped, as a plain
    fetch stops it (NotHtmlStopMiddleware), and skipped as before, without a retry or a
    warning; a short one is kept whole, and a redirect to a PDF is followed, then stopped."""
    size = 4 * 1024 * 1024
    js_site.slow.update(
        {
            "/doc": ({"Content-Type": "application/pdf", "Content-Length": str(size)}, size),
            "/data": ({"Content-Type": "application/octet-stream"}, size),
            "/attached": (
                {
                    "Content-Type": "application/zip",
                    "Content-Disposition": "attachment; filename=birds.zip",
                    "Content-Length": str(size),
                },
                size,
            ),
            "/short": ({"Content-Type": "application/pdf", "Content-Length": "65536"}, 65536),
        }
    )
    js_site.slow["/report"] = js_site.slow["/doc"]
    js_site.redirects["/moved"] = "/report"
    paths = ("doc", "data", "attached", "short", "moved", "plain.html")
    result = run_crawl(
        tmp_path, rendered(",".join(f"{js_site.url}/{path}" for path in paths)), {"DEPTH_LIMIT": 0}
    )
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    log = result.result.stderr
    assert stat_value(log, "focused/skipped/not_html") == 5, log[-3000:]
    assert stat_value(log, "focused/not_html_stopped") == 4, log[-3000:]
    assert stat_value(log, "retry/count") == 0
    assert page_warnings(log) == [] and "Traceback" not in log, page_warnings(log)
    assert js_site.count("/doc") == 1 and js_site.count("/data") == 1, js_site.fetched
    for path in ("/doc", "/data", "/attached", "/report"):
        assert js_site.sent[path] < size / 2, js_site.sent
    assert js_site.sent["/short"] == 65536
    assert "plain.html" in stored_paths(result)


def a_terminals_job(args: list[str]) -> subprocess.Popen:
    """``scrapy ARGS`` in a process group of its own, as a terminal's foreground job, which a
    Ctrl-C signals whole (``os.killpg``); its stderr piped, as text."""
    return subprocess.Popen(
        [*as_from_a_terminal("scrapy"), *args],
        cwd=REPO,
        env=crawl_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_ctrl_c_from_a_terminal_lets_the_pages_being_rendered_finish(tmp_path, js_site):
    """Ctrl-C in a terminal signals the whole process group, Playwright's driver too, which
    closed Chromium at once (its handleSIGINT): the page being rendered was skipped as a
    download error, after an error line saying to install Chromium, and a resumed JOBDIR crawl
    never fetched it. The pause lets the requests under way finish, rendered ones too."""
    settings = {
        "FOCUSED_DB": tmp_path / "focused.sqlite3",
        "JOBDIR": tmp_path / "job",
        "LOG_LEVEL": "INFO",
        "FOCUSED_RENDER_SETTLE_MS": 30_000,
        "CLOSESPIDER_PAGECOUNT": 20,
    }
    args = crawl_args({"crawl_id": "test", **rendered(f"{js_site.url}/app.html")}, settings)
    process = a_terminals_job(args)
    try:
        # The browser is rendering the page once its script asks for the links (answered
        # API_DELAY_S later).
        deadline = time.monotonic() + 120
        while "/api/links.json" not in js_site.fetched and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "/api/links.json" in js_site.fetched, "the page was not rendered"
        os.killpg(process.pid, signal.SIGINT)
        log = process.communicate(timeout=120)[1]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, log[-3000:]
    assert "Spider closed (shutdown)" in log, log[-3000:]
    assert "cannot launch Chromium" not in log, log[-3000:]
    assert stat_value(log, "focused/skipped/download_error") == 0, log[-3000:]
    pages = Crawl(None, tmp_path / "focused.sqlite3", "test").pages()
    assert [page["url"] for page in pages] == [f"{js_site.url}/app.html"]


def test_ctrl_c_as_the_browser_starts_pauses_the_crawl(tmp_path, js_site):
    """Ctrl-C in a terminal signals the whole process group. Playwright's driver (Node) died of
    it until it had set its own handler, 0.1-0.3 s after the download handler started: two
    tracebacks ("Connection closed while reading from the driver"), no browser, the seed failed
    or stayed unsent. The driver starts in a session of its own: the crawl pauses as asked, and
    a resumed crawl renders the seed."""
    settings = {
        "FOCUSED_DB": tmp_path / "focused.sqlite3",
        "JOBDIR": tmp_path / "job",
        "LOG_LEVEL": "INFO",
        "CLOSESPIDER_PAGECOUNT": 1,
    }
    args = crawl_args({"crawl_id": "test", **rendered(f"{js_site.url}/app.html")}, settings)
    process = a_terminals_job(args)
    try:
        lines = []
        for line in process.stderr:
            lines.append(line)
            if "Starting download handler" in line:
                time.sleep(0.1)  # the driver is loading its code: no SIGINT handler yet
                os.killpg(process.pid, signal.SIGINT)
                break
        log = "".join(lines) + process.communicate(timeout=120)[1]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert "Spider closed (shutdown)" in log, log[-3000:]
    resumed = run_crawl(tmp_path, rendered(f"{js_site.url}/app.html"), settings)
    assert resumed.result.returncode == 0, resumed.result.stderr[-3000:]
    assert stored_paths(resumed) == ["app.html"], resumed.result.stderr[-3000:]


def test_a_page_the_browser_failed_to_launch_for_is_fetched_on_resume(tmp_path, js_site):
    """A crawl whose browser could not launch (browser_unavailable) failed its pages for good:
    the JOBDIR crawl resumed with a browser that launches ended with no page, its seed lost."""
    arguments = {**rendered(f"{js_site.url}/app.html"), "crawl_id": "test"}
    settings = {"JOBDIR": tmp_path / "job", "CLOSESPIDER_PAGECOUNT": 1}
    browser = chromium_launching_once(tmp_path)
    failed = run_crawl(tmp_path, arguments, {**settings, "FOCUSED_CHROMIUM": browser})
    assert failed.crawl_record()["finish_reason"] == "browser_unavailable"
    assert (
        "Not sent as the crawl stopped: 1 request no browser launched to render; in flight in"
        " the frontier still" in failed.result.stderr
    ), failed.result.stderr[-3000:]
    resumed = run_crawl(tmp_path, arguments, settings)
    assert resumed.result.returncode == 0, resumed.result.stderr[-3000:]
    assert stored_paths(resumed) == ["app.html"], resumed.result.stderr[-3000:]


def chromium_launching_once(tmp_path) -> Path:
    """A Chromium that launches once (for ``check_browser``), then fails to: the crawl's own
    launch fails (``browser_unavailable``)."""
    marker = tmp_path / "launched-once"
    browser = tmp_path / "chromium-once"
    browser.write_text(
        f'#!/bin/sh\n[ -e "{marker}" ] && exit 1\ntouch "{marker}"\nexec {CHROMIUM} "$@"\n'
    )
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    return browser


def test_a_page_the_browser_failed_to_launch_for_is_said_dropped(tmp_path, js_site):
    """Without a frontier kept, the pages no browser launched for (NotSent, to be kept by one)
    were dropped without a word: neither among the seeds not fetched nor the requests not
    sent. The crawl still closes browser_unavailable, exit 1."""
    browser = chromium_launching_once(tmp_path)
    failed = run_crawl(tmp_path, rendered(f"{js_site.url}/app.html"), {"FOCUSED_CHROMIUM": browser})
    log = failed.result.stderr
    assert failed.result.returncode == 1, log[-3000:]
    assert failed.crawl_record()["finish_reason"] == "browser_unavailable"
    assert "cannot launch Chromium" in log, log[-3000:]
    assert (
        "Not sent as the crawl stopped: 1 request no browser launched to render; dropped with"
        " the frontier" in log
    ), log[-3000:]
    assert stat_value(log, "focused/closing/not_sent") == 1, log[-3000:]


def children(pid: int) -> list[tuple[int, str]]:
    """The processes whose parent is ``pid``: their ids and command lines."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The parent follows the state, after the command's name (in parentheses).
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):  # ended meanwhile
            continue
        if parent == pid:
            found.append((int(entry.name), command))
    return found


def kill_while_rendering(js_site, settings: dict, browser_too: bool) -> str:
    """Run a JOBDIR crawl of the app page, then the plain one, and once the browser renders the
    app page kill -9 Playwright's driver that runs Chromium (``browser_too``: Chromium only, the
    driver left); returns the crawl's log."""
    seeds = f"{js_site.url}/app.html,{js_site.url}/plain.html"
    process = a_terminals_job(crawl_args({"crawl_id": "test", **rendered(seeds)}, settings))
    try:
        deadline = time.monotonic() + 120
        while "/api/links.json" not in js_site.fetched and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "/api/links.json" in js_site.fetched, "the page was not rendered"
        # The http and https download handlers each start a driver: the http one runs Chromium.
        [(driver, _)] = [
            (pid, command)
            for pid, command in children(process.pid)
            if "run-driver" in command and children(pid)
        ]
        if browser_too:
            for pid, _ in children(driver):
                os.kill(pid, signal.SIGKILL)
        else:
            os.kill(driver, signal.SIGKILL)
        return process.communicate(timeout=120)[1]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def driver_settings(tmp_path) -> dict:
    return {
        "FOCUSED_DB": tmp_path / "focused.sqlite3",
        "JOBDIR": tmp_path / "job",
        "LOG_LEVEL": "INFO",
        "FOCUSED_LOGSTATS_INTERVAL": 0,
        "FOCUSED_RENDER_SETTLE_MS": 5_000,
        "CONCURRENT_REQUESTS": 1,  # the app page first, the plain one after it
        "CLOSESPIDER_PAGECOUNT": 20,
    }


def test_a_driver_that_dies_mid_crawl_closes_it_browser_unavailable(tmp_path, js_site):
    """Playwright's driver killed mid-crawl (not by Ctrl-C): the page being rendered and every
    page after it failed ("Target page, context or browser has been closed"), skipped as
    download errors, and the crawl closed seeds_unreachable, its JOBDIR holding nothing to
    render them again. It closes as a browser that does not launch does, the pages kept."""
    settings = driver_settings(tmp_path)
    log = kill_while_rendering(js_site, settings, browser_too=False)
    assert "Spider closed (browser_unavailable)" in log, log[-3000:]
    errors = [line for line in log.splitlines() if "] ERROR: " in line]
    assert len(errors) == 1 and "Playwright's driver exited during the crawl" in errors[0], errors
    assert (
        "Not sent as the crawl stopped: 1 request no browser launched to render; in flight in"
        " the frontier still" in log
    ), log[-3000:]
    assert stat_value(log, "focused/skipped/download_error") == 0, log[-3000:]
    assert "could not be fetched" not in log, log[-3000:]
    assert Crawl(None, tmp_path / "focused.sqlite3", "test").pages() == []
    resumed = run_crawl(
        tmp_path, rendered(f"{js_site.url}/app.html,{js_site.url}/plain.html"), settings
    )
    assert resumed.result.returncode == 0, resumed.result.stderr[-3000:]
    assert {"app.html", "plain.html"} <= set(stored_paths(resumed)), resumed.result.stderr[-3000:]


def logged_at(log: str, said: str) -> datetime:
    """When the crawl's log first says ``said`` (to the second)."""
    line = next(line for line in log.splitlines() if said in line)
    return datetime.strptime(line[:19], "%Y-%m-%d %H:%M:%S")


def test_a_page_rendering_as_its_driver_dies_does_not_wait_out_its_settle(tmp_path, js_site):
    """The page in its settle as the driver was killed waited for its network to go quiet,
    which nothing could tell any more, FOCUSED_RENDER_SETTLE_MS (30 s here): the crawl closed
    30 s after the kill. The settle ends as Playwright's connection to the driver closes."""
    settings = {**driver_settings(tmp_path), "FOCUSED_RENDER_SETTLE_MS": 30_000}
    log = kill_while_rendering(js_site, settings, browser_too=False)
    assert "Spider closed (browser_unavailable)" in log, log[-3000:]
    # The kill comes as the page's script fetches its links, some 1 s after the launch.
    waited = logged_at(log, "Closing spider (browser_unavailable)") - logged_at(
        log, "Browser chromium launched"
    )
    assert waited < timedelta(seconds=15), log[-3000:]
    assert (
        "Not sent as the crawl stopped: 1 request no browser launched to render; in flight in"
        " the frontier still" in log
    ), log[-3000:]


def test_a_chromium_that_dies_mid_crawl_is_launched_again(tmp_path, js_site):
    """Chromium killed, its driver left: scrapy-playwright launches another and renders the
    page again (PLAYWRIGHT_RESTART_DISCONNECTED_BROWSER), and the crawl goes on, whole."""
    log = kill_while_rendering(js_site, driver_settings(tmp_path), browser_too=True)
    assert "Spider closed (finished)" in log, log[-3000:]
    assert "ERROR" not in log and "browser_unavailable" not in log, log[-3000:]
    assert stat_value(log, "focused/skipped/download_error") == 0, log[-3000:]
    stored = Crawl(None, tmp_path / "focused.sqlite3", "test").pages()
    assert {"app.html", "plain.html"} <= {page["url"].split("/", 3)[3] for page in stored}


def test_with_no_driver_of_its_own_to_watch_a_failed_page_waits_for_none():
    """A PLAYWRIGHT_BROWSER_PROVIDER of the user's runs no driver DriverInItsOwnSession keeps:
    each page failing with "Target page, context or browser has been closed" waited
    DRIVER_EXIT_SEEN_S (2 s) for a driver's exit that no look could see."""
    started = time.monotonic()
    assert asyncio.run(driver_exited(DRIVER_EXIT_SEEN_S)) is False
    assert time.monotonic() - started < DRIVER_EXIT_SEEN_S / 4
