"""Rendering pages built by JavaScript in headless Chromium, through scrapy-playwright.

``-a render=`` chooses which pages are rendered:

- ``never`` (default): every page is fetched plainly; scrapy-playwright is not even loaded.
- ``always``: every page request of the spider is rendered (``meta["playwright"] = True``).
- ``auto``: every page is fetched plainly first; ``RenderMiddleware`` sends a page whose plain
  HTML looks script-built (``looks_script_built``) back to the scheduler to be rendered. The
  plain response never reaches the spider, so the page is scored, counted and stored once, from
  its rendered HTML, with the meta it was queued with (level, parent, scores).

Chromium follows redirects (HTTP and script ones) on its own; a rendered page that ended on
another URL is not taken: that URL is requested in turn (``RenderMiddleware._redirected``), as
Scrapy's ``RedirectMiddleware`` requests a plain page's target. A URL a script only shows
(``history.replaceState``) is no redirect: the page is taken at the URL its server sent it from.

A rendered page is held to what a plain fetch is: a body over ``DOWNLOAD_MAXSIZE`` once rendered
is ``too_large``, and a page whose server sent bytes that are no text (an image, a PDF served as
HTML) is handed on as those bytes, for the spider to skip as ``binary_body``. A page whose
headers make it ``not_html`` is stopped at them, as a plain fetch is (``PageResponse``).

Only the spider's own requests are rendered: the robots.txt requests of Scrapy's
``RobotsTxtMiddleware`` (``callback=NO_CALLBACK``) and ``HEAD_CHECK``'s HEAD requests stay plain.

The browser is the system's Chromium (``FOCUSED_CHROMIUM``). ``check_browser`` launches it once
before the crawl starts, so a missing browser is a one-line error; a browser that fails to
launch later, or Playwright's driver exiting during the crawl (killed, out of memory:
``focused.playwrightdriver.driver_exited``), closes the spider with reason
``browser_unavailable`` (the ``crawl`` command then exits with status 1); the pages it could not
render stay in a frontier kept, for the crawl that goes on, and are counted in the downloader's
"Not sent" line (``focused/closing/not_sent``); the page in its settle then is failed at
once (``_connection_closed``), not left to wait it out. The driver is not started again:
scrapy-playwright starts its provider once, and keeps the browser and contexts of the dead
connection. A Chromium that dies alone scrapy-playwright launches again
(``PLAYWRIGHT_RESTART_DISCONNECTED_BROWSER``), and renders the page again (a
``TargetClosedError`` is retried).
Playwright's driver runs out of the crawl's process group (``focused.playwrightdriver``): a
Ctrl-C in a terminal reaches the crawl only, which pauses.

Settings (defaults and meaning in ``focused/settings.py``): ``FOCUSED_CHROMIUM``,
``FOCUSED_RENDER_BLOCK``, ``FOCUSED_RENDER_SETTLE_MS``, ``FOCUSED_RENDER_AUTO_MIN_WORDS``,
``FOCUSED_RENDER_AUTO_MIN_LINKS``, and scrapy-playwright's own ``PLAYWRIGHT_*``. Scrapy builds
one download handler per URL scheme, so a crawl of both http and https pages runs two browsers,
each with its own ``PLAYWRIGHT_MAX_PAGES_PER_CONTEXT`` pages.

Stats: ``focused/rendered`` (responses rendered by the browser), ``focused/render_needed``
(``auto``: plain pages that looked script-built and were sent to the browser),
``focused/rendered_before_load`` (rendered pages taken before their load event, which did not
come within the navigation timeout: ``settle``), ``focused/not_html_stopped`` (as for a plain
fetch: pages stopped at headers that say not HTML; a cancelled download also counts in Scrapy's
``downloader/exception_count``, the failure scrapy-playwright makes of it).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import threading
import weakref
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy import Request
from scrapy.core.downloader import Downloader
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Headers, HtmlResponse, Response
from scrapy.http.request import NO_CALLBACK
from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.misc import load_object
from w3lib.http import basic_auth_header

from focused.canonical import canonicalize, drop_params_setting
from focused.downloader import NotSent, PoliteDownloader
from focused.errors import ConfigError
from focused.extract import extract_page
from focused.hygiene import REDIRECT_STATUSES, is_binary, stops_not_html
from focused.logformatter import add_log_filter
from focused.robots import RobotsTxtMiddleware
from focused.stopping import close_spider_now

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from playwright.async_api import Download, Page
    from playwright.async_api import Request as BrowserRequest
    from playwright.async_api import Response as BrowserResponse
    from scrapy.crawler import Crawler
    from scrapy.settings import Settings
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)
T = TypeVar("T")

RENDER_MODES = ("never", "always", "auto")
PLAYWRIGHT_HANDLER = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
# scrapy-playwright's default PLAYWRIGHT_PROCESS_REQUEST_HEADERS, and its default context's name
USE_SCRAPY_HEADERS = "scrapy_playwright.headers.use_scrapy_headers"
DEFAULT_CONTEXT = "default"
BROWSER_UNAVAILABLE = "browser_unavailable"  # the close reason when Chromium cannot launch
# meta key: a page ``auto`` fetched plainly and sends back to be rendered; that plain response is
# not the page, so a shared crawl gives its budget slot back (``focused.distributed.FrontierAck``)
RENDER_AGAIN_META = "focused_render_again"
# meta key: the redirects of a rendered request before the browser ran (RenderMiddleware)
REDIRECTS_META = "focused_redirects_before_render"
INSTALL_HINT = "install it with `sudo apt-get install chromium` or set FOCUSED_CHROMIUM to its path"
# Without the background-networking flags Chromium phones home at start, which a closed
# network refuses; the rest keep a headless browser lean. Certificates are not checked, as
# Scrapy does not check them on a plain fetch: a site with a self-signed certificate rendered
# nothing (ERR_CERT_AUTHORITY_INVALID) where its plain crawl went on.
CHROMIUM_FLAGS = (
    "--ignore-certificate-errors",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# Playwright's resource types a rendered page may be denied; "document" is the page itself.
BLOCKABLE_RESOURCES = frozenset(
    {"stylesheet", "image", "media", "font", "script", "texttrack", "xhr", "fetch",
     "eventsource", "websocket", "manifest", "other"}
)  # fmt: skip
# seconds a page's download waits for the page's response, which says whether to cancel it
DOWNLOAD_JUDGED_S = 10.0
MAX_RELOADS = 3  # times a rendered page may reload itself (settle)
# seconds a page that failed as its browser closed waits for asyncio to see the driver's exit
DRIVER_EXIT_SEEN_S = 2.0
# Playwright's connections to its drivers -> done once closed (``_connection_closed``)
_closed_connections: weakref.WeakKeyDictionary[Any, asyncio.Future[None]] = (
    weakref.WeakKeyDictionary()
)
# The page's HTML (page.content()) leaves out what its web components hold in their shadow
# roots: their links and text, which a reader sees and clicks, were lost. Each open shadow root's
# content is copied into its host, innermost first, where the page's HTML has it.
INLINE_SHADOW_ROOTS = """() => {
  const inline = (root) => {
    for (const host of root.querySelectorAll("*")) {
      if (host.shadowRoot) {
        inline(host.shadowRoot);
        host.insertAdjacentHTML("beforeend", host.shadowRoot.innerHTML);
      }
    }
  };
  inline(document);
}"""
APP_SHELL = (
    "//*[@id='root' or @id='app' or @id='__next' or @id='__nuxt' or @id='___gatsby']"
    "[not(normalize-space())] | //script[@id='__NEXT_DATA__'] | //app-root"
)


def launch_options(settings: Settings) -> dict[str, Any]:
    """``PLAYWRIGHT_LAUNCH_OPTIONS`` for the system's Chromium (``FOCUSED_CHROMIUM``)."""
    args = list(CHROMIUM_FLAGS)
    if os.geteuid() == 0:
        args.insert(0, "--no-sandbox")  # Chromium refuses to sandbox itself as root
    # Playwright turns Chromium's popup blocker off. On, a page's script cannot open windows
    # (window.open without a click): each such window fetched its page outside the crawl
    # (no robots.txt, no delay), and stayed open until the crawl ended.
    # Ctrl-C in a terminal reaches Playwright's driver too when it runs in the crawl's process
    # group (a PLAYWRIGHT_BROWSER_PROVIDER of one's own), which closed Chromium at once: the
    # pages being rendered were lost, not finished as the pause lets every request under way
    # finish. The crawl closes the browser as it stops.
    options: dict[str, Any] = {
        "headless": True,
        "args": args,
        "ignore_default_args": ["--disable-popup-blocking"],
        "handle_sigint": False,
    }
    if settings.get("FOCUSED_CHROMIUM"):
        options["executable_path"] = str(settings.get("FOCUSED_CHROMIUM"))
    return options


def blocked_resources(settings: Settings) -> frozenset[str]:
    """``FOCUSED_RENDER_BLOCK`` as a set (``-s FOCUSED_RENDER_BLOCK=`` is the empty set)."""
    return frozenset(t.strip() for t in settings.getlist("FOCUSED_RENDER_BLOCK") if t.strip())


class ResourceBlocker:
    """``PLAYWRIGHT_ABORT_REQUEST``: what the browser does not fetch for the pages it renders:
    the resource types of ``FOCUSED_RENDER_BLOCK``, and with ``ROBOTSTXT_OBEY`` a URL its
    host's robots.txt disallows (``focused/robots/render_disallowed``), read by the crawl's
    ``RobotsTxtMiddleware`` as for a page (a host's robots.txt not read yet is downloaded
    first). The browser fetched a page's scripts and the data they asked for (``/api/``) with
    the crawl's user agent where robots.txt forbade them.

    A page's own navigation is the crawl's to judge: robots.txt allowed the page before it was
    sent, and a URL a script or redirect moves it to is requested in turn (``RenderMiddleware``).
    """

    def __init__(self, crawler: Crawler, blocked: frozenset[str]) -> None:
        self.crawler = crawler
        self.blocked = blocked
        self.obey = crawler.settings.getbool("ROBOTSTXT_OBEY")

    async def __call__(self, request: BrowserRequest) -> bool:
        if request.resource_type in self.blocked:
            return True
        if (
            not self.obey
            or not request.url.startswith(("http://", "https://"))
            or (request.is_navigation_request() and request.frame.parent_frame is None)
        ):
            return False
        robots = self.crawler.get_downloader_middleware(RobotsTxtMiddleware)
        if robots is None:
            return False
        asked = Request(request.url)
        parser = await robots.robot_parser(asked)
        if parser is None or parser.allowed(request.url, robots._useragent(asked)):
            return False
        self.crawler.stats.inc_value("focused/robots/render_disallowed")
        logger.debug("Not fetched for a rendered page, forbidden by robots.txt: %s", request.url)
        return True


def enable_rendering(crawler: Crawler) -> None:
    """Turn on scrapy-playwright and ``RenderMiddleware`` (before the settings freeze).

    Only a crawl that renders pays for it: scrapy-playwright is not loaded otherwise.
    """
    settings = crawler.settings
    spider_priority = SETTINGS_PRIORITIES["spider"]

    def put(name: str, value: Any) -> None:
        settings.set(name, value, max(settings.getpriority(name) or 0, spider_priority))

    handlers = settings.getdict("DOWNLOAD_HANDLERS")
    handlers.update(http=PLAYWRIGHT_HANDLER, https=PLAYWRIGHT_HANDLER)
    put("DOWNLOAD_HANDLERS", handlers)
    put("PLAYWRIGHT_LAUNCH_OPTIONS", launch_options(settings))
    if not settings.get("PLAYWRIGHT_BROWSER_PROVIDER"):  # a provider of one's own is left as is
        put("PLAYWRIGHT_BROWSER_PROVIDER", "focused.playwrightdriver.DriverInItsOwnSession")
    put("PLAYWRIGHT_ABORT_REQUEST", ResourceBlocker(crawler, blocked_resources(settings)))
    user, password = settings.get("HTTPAUTH_USER", ""), settings.get("HTTPAUTH_PASS", "")
    if user or password:
        put("PLAYWRIGHT_CONTEXTS", contexts_with_password(settings, user, password))
        headers = settings.get("PLAYWRIGHT_PROCESS_REQUEST_HEADERS", USE_SCRAPY_HEADERS)
        if headers is not None:  # None: the browser's own headers, which hold no password
            sent = basic_auth_header(user, password).decode("latin-1")  # as HttpAuthMiddleware's
            put("PLAYWRIGHT_PROCESS_REQUEST_HEADERS", HeadersWithoutPassword(headers, sent))
    settings.setdefault_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", RenderMiddleware, 50)


def contexts_with_password(settings: Settings, user: str, password: str) -> dict[str, Any]:
    """``PLAYWRIGHT_CONTEXTS`` with ``HTTPAUTH_USER``'s password in the default context, for the
    origins of ``HTTPAUTH_DOMAIN`` alone.

    The browser answers a server's 401 with it only where the origin matches (Playwright's
    ``http_credentials``), so a redirect to another host, which Chromium follows on its own,
    gets no password, as Scrapy's redirects drop it. An origin is one scheme, host and port:
    the domain's subdomains, which a plain fetch also sends it to, get none from the browser. An
    empty ``HTTPAUTH_DOMAIN`` sends it everywhere, in Scrapy and here."""
    domain = str(settings.get("HTTPAUTH_DOMAIN") or "").lower()
    password_for = {"username": user, "password": password}
    credentials = (
        [{**password_for, "origin": f"{scheme}://{domain}"} for scheme in ("http", "https")]
        if domain
        else [password_for]
    )
    contexts = settings.getdict("PLAYWRIGHT_CONTEXTS")
    default = dict(contexts.get(DEFAULT_CONTEXT, {}))
    own = default.get("http_credentials") or []  # the user's own, after the domain's
    default["http_credentials"] = credentials + (own if isinstance(own, list) else [own])
    return {**contexts, DEFAULT_CONTEXT: default}


class HeadersWithoutPassword:
    """``PLAYWRIGHT_PROCESS_REQUEST_HEADERS`` of a crawl with a password: the headers the
    browser would send (the configured function's), without the ``Authorization`` that Scrapy's
    ``HttpAuthMiddleware`` put on the request. Chromium keeps a request's headers across its own
    redirects, to any host: the password is left to the context's origin-bound credentials
    (``contexts_with_password``)."""

    def __init__(self, headers: Any, password_header: str) -> None:
        self.headers = load_object(headers)
        self.password_header = password_header

    async def __call__(self, **request: Any) -> dict[str, str]:
        headers = self.headers(**request)
        if inspect.isawaitable(headers):
            headers = await headers
        return {
            name: value
            for name, value in headers.items()
            if name.lower() != "authorization" or value != self.password_header
        }


def check_browser(settings: Settings, timeout_s: float = 60.0) -> None:
    """Launch Chromium once, as the crawl will, and open each of the contexts
    ``PLAYWRIGHT_CONTEXTS`` asks for in it; raise ``ConfigError`` if it cannot start or a
    context cannot open (an option Playwright does not know, or of another type: the crawl
    went on without the context, after a traceback).

    Runs in its own thread and event loop, so the crawl's reactor is left untouched.
    """
    executable = settings.get("FOCUSED_CHROMIUM")
    if executable and not Path(executable).is_file():
        raise ConfigError(f"Chromium not found at {executable}; {INSTALL_HINT}")
    options = launch_options(settings)
    contexts = settings.getdict("PLAYWRIGHT_CONTEXTS")
    failure: list[ConfigError] = []

    async def launch() -> None:
        from playwright.async_api import async_playwright

        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**options, timeout=timeout_s * 1000)
            for name, context in contexts.items():
                try:
                    await (await browser.new_context(**context)).close()
                except Exception as exc:
                    raise ConfigError(
                        f"setting PLAYWRIGHT_CONTEXTS: {name!r} cannot be opened: "
                        f"{_first_line(exc)}"
                    ) from None
            await browser.close()

    def run() -> None:
        try:
            asyncio.run(launch())
        except ConfigError as exc:
            failure.append(exc)
        except Exception as exc:
            failure.append(launch_failure(_first_line(exc)))

    thread = threading.Thread(target=run, name="focused-browser-check", daemon=True)
    thread.start()
    thread.join(timeout_s + 10)
    if thread.is_alive():
        failure.append(launch_failure(f"no answer within {timeout_s:g} s"))
    if failure:
        raise failure[0]


def launch_failure(reason: str) -> ConfigError:
    return ConfigError(f"cannot launch Chromium ({reason}); {INSTALL_HINT}")


def _first_line(exc: BaseException) -> str:
    """The message's first line, and the next where the first ends with a colon: Playwright
    puts the reason there ("Error reading storage state from PATH:", then "[Errno 2] ...")."""
    lines = [line.strip() for line in str(exc).strip().splitlines()]
    if not lines:
        return exc.__class__.__name__
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"
    return lines[0]


def looks_script_built(response: HtmlResponse, min_words: int, min_links: int) -> bool:
    """Little visible text or few links, and script tags or a known app-shell pattern."""
    page = extract_page(response, context_chars=0)
    sparse = len(page.text.split()) < min_words or len(page.links) < min_links
    return sparse and bool(response.xpath("//script") or response.xpath(APP_SHELL))


class PageResponse:
    """``playwright_page_event_handlers``' ``response`` handler: keeps the page's own response
    (the main frame's last navigation response, after any HTTP redirect), for ``settle`` to
    read the bytes its server sent (``body``).

    A page whose headers make it ``not_html`` and whose body is not short enough to keep
    (``focused.hygiene.stops_not_html``, as ``NotHtmlStopMiddleware`` stops a plain fetch's) is
    ``stopped``: Chromium downloaded it whole (an extensionless link to a PDF, a binary), and
    the spider skipped it for its headers. A download (a type Chromium does not show, or
    ``Content-Disposition: attachment``) is cancelled here (``download``, its handler), a
    document Chromium shows (a PDF, text) by ``settle``; ``RenderMiddleware`` hands on its
    headers with no body.

    A request sent back to the scheduler (a retry, a redirect) may be pickled by a JOBDIR queue:
    it keeps neither the browser's response nor the bytes."""

    def __init__(self) -> None:
        self.response: BrowserResponse | None = None
        self.body: bytes | None = None
        self.stopped = False
        # The download of a navigation comes before its response (and its headers), or after
        self._judged = asyncio.Event()

    def __call__(self, response: BrowserResponse) -> None:
        # A navigation's first: a worker's request has no frame, and asking raises. Once
        # stopped, Chromium's PDF viewer asks for the page again (no headers): not the page.
        if (
            self.stopped
            or not response.request.is_navigation_request()
            or response.frame.parent_frame is not None
        ):
            return
        self.response = response
        headers = Headers(response.headers)
        length = headers.get(b"Content-Length", b"")
        self.stopped = stops_not_html(headers, int(length) if length.isdigit() else None)
        if response.status not in REDIRECT_STATUSES:
            self._judged.set()

    async def download(self, download: Download) -> None:
        """``playwright_page_event_handlers``' ``download`` handler."""
        from playwright.async_api import Error as BrowserError

        with suppress(TimeoutError):  # no page's response: not the page's download
            await asyncio.wait_for(self._judged.wait(), DOWNLOAD_JUDGED_S)
        if self.stopped:
            with suppress(BrowserError):  # a page closed meanwhile: nothing left to cancel
                await download.cancel()

    def stopped_response(self, request: Request) -> Response | None:
        """The response of a ``stopped`` page, its body empty (None if it was not stopped)."""
        if not self.stopped or self.response is None:
            return None
        headers = Headers(self.response.headers)
        headers.pop(b"Content-Encoding", None)  # of a body no longer there
        return Response(
            url=self.response.url,
            status=self.response.status,
            headers=headers,
            request=request,
            flags=["playwright"],
        )

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    async def read(self, answer_ms: float) -> None:
        from playwright.async_api import Error as BrowserError

        if self.response is not None:
            with suppress(BrowserError):  # a body the browser no longer has: not sniffed
                self.body = await _answered(self.response.body(), answer_ms)


async def settle(
    page: Page,
    timeout_ms: int,
    drop_params: tuple[str, ...],
    answer_ms: float,
    sent: PageResponse,
) -> tuple[str, str | None] | None:
    """Wait for the page's load event, then up to ``timeout_ms`` for its network to go quiet:
    many pages fetch their content after the load event. A page that never goes quiet keeps
    what it has.

    The browser is only asked to wait for the page's response (``wait_until="commit"``), so a
    page whose load event never comes (a script or stylesheet its server never finishes
    sending) is not lost: once ``PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT`` has passed (the page's
    navigation timeout, which ``wait_for_load_state`` uses), it is taken as rendered so far and
    its URL and HTML are returned, for ``RenderMiddleware`` to put back in the response.

    A script that sends the page to another URL meanwhile (``location.href = ...``) ends the
    wait: that URL is returned with no HTML, for ``RenderMiddleware`` to request in turn, and
    the browser goes no further. Left to go on, a page whose script moves it on and on (to
    itself with a new query, or between two pages) had the browser fetch some 500 pages a
    second from its host until the settle ended, and was then lost as a download error.

    A page whose script never yields (``while (true) {}``) answers nothing, and Playwright waits
    for its HTML without end: the crawl never ended, not even on Ctrl-C. Once the waits are
    over, the page must answer within ``answer_ms`` (the navigation timeout), or it fails with
    a ``TimeoutError`` (scrapy-playwright then closes it: the page is a download error).

    A page that loaded has the bytes its server sent read into ``sent``, for ``RenderMiddleware``
    to sniff as a plain fetch's are. A page ``sent`` stopped (not HTML) is left at once.
    """
    from playwright.async_api import Error as BrowserError

    if sent.stopped:
        await page.goto("about:blank")  # stops the download of a page Chromium shows (a PDF)
        return None
    moved: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    reloads = 0

    def on_request(request: BrowserRequest) -> None:
        nonlocal reloads
        # A new navigation of the page (not an HTTP redirect)
        if (
            moved.done()
            or not request.is_navigation_request()
            or request.frame != page.main_frame
            or request.redirected_from is not None
        ):
            return
        if canonicalize(request.url, drop_params) != canonicalize(page.url, drop_params):
            moved.set_result(request.url)
            return
        # The page reloading itself: once or twice is a page setting a cookie; on and on, the
        # browser fetched it some 700 times a second until the settle ended.
        reloads += 1
        if reloads > MAX_RELOADS:
            moved.set_exception(BrowserError(f"the page reloaded itself {reloads} times"))

    page.on("request", on_request)
    loading = asyncio.ensure_future(_load(page, timeout_ms, answer_ms))
    closed = _connection_closed(page)
    try:
        await asyncio.wait(
            (loading, moved, *([closed] if closed else [])), return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        page.remove_listener("request", on_request)
    if closed and closed.done():
        from playwright._impl._errors import TargetClosedError

        loading.cancel()
        raise TargetClosedError()
    if not moved.done():
        taken = loading.result()
        if taken is None:
            await sent.read(answer_ms)
        return taken
    loading.cancel()
    await page.goto("about:blank")  # stops the navigation; see _load on the blank page
    return moved.result(), None  # raises for a page that reloads on and on


def _connection_closed(page: Page) -> asyncio.Future[None] | None:
    """Done once Playwright's connection to its driver (``page``'s) has closed: the driver
    exited (killed, out of memory). Playwright then fails the calls in flight, not the waits
    for an event of the page: the page in its settle waited it out (FOCUSED_RENDER_SETTLE_MS,
    or the navigation timeout for its load event) before the crawl could close. One listener a
    connection, not one a page: over ten, Playwright warns of a leak on stderr."""
    connection = getattr(getattr(page, "_impl_obj", None), "_connection", None)
    if connection is None:
        return None
    closed = _closed_connections.get(connection)
    if closed is None:
        closed = asyncio.get_running_loop().create_future()
        if getattr(connection, "_closed_error", None) is not None:
            closed.set_result(None)
        else:
            connection.once("close", lambda: closed.done() or closed.set_result(None))
        _closed_connections[connection] = closed
    return closed


async def _load(page: Page, timeout_ms: int, answer_ms: float) -> tuple[str, str] | None:
    """``settle``'s waits: the URL and HTML of a page whose load event did not come, else None."""
    from playwright.async_api import TimeoutError as BrowserTimeout

    try:
        await page.wait_for_load_state("load")
    except BrowserTimeout:
        url, html = page.url, await _answered(page.content(), answer_ms)
        # scrapy-playwright waits for the load event after each page method and fails the page
        # without it; a blank page has it at once.
        await page.goto("about:blank")
        return url, html
    if timeout_ms:
        with suppress(BrowserTimeout):
            await page.wait_for_load_state("networkidle", timeout=timeout_ms)
    # Before scrapy-playwright reads the page, which also tells whether it still answers.
    await _answered(page.evaluate(INLINE_SHADOW_ROOTS), answer_ms)
    return None


async def _answered(call: Awaitable[T], timeout_ms: float) -> T:
    """What the page answers to ``call``; a ``TimeoutError`` if it has not within ``timeout_ms``
    (Playwright sets no time limit on reading a page)."""
    from playwright.async_api import TimeoutError as BrowserTimeout

    try:
        return await asyncio.wait_for(call, timeout_ms / 1000)
    except TimeoutError:
        raise BrowserTimeout(
            f"the page did not answer within {timeout_ms:g} ms (a script that never ends?)"
        ) from None


def _settled(request: Request) -> Any:
    """``settle``'s page method of a rendered request (None if it has none)."""
    for method in request.meta.get("playwright_page_methods") or ():
        if getattr(method, "method", None) is settle:
            return method
    return None


def _taken_before_load(request: Request) -> tuple[str, str | None] | None:
    """The URL and HTML ``settle`` kept of a page whose load event did not come, if it did, or
    the URL a script sent the page to (no HTML)."""
    return getattr(_settled(request), "result", None)


def _sent(request: Request) -> PageResponse | None:
    """What the browser received of a rendered request's page (``PageResponse``)."""
    return getattr(_settled(request), "kwargs", {}).get("sent")


def _at_fetched_url(request: Request, response: Response) -> Response:
    """The rendered page under the URL its server sent it from. A script may change the URL
    the page shows without leaving it (``history.replaceState``, ``pushState``): that URL was
    taken for a redirect and requested in turn, and the page was lost where the server does not
    serve it (a 404), or fetched six times and cut as a redirect loop where the script adds a
    new query each time (``?v=`` and the time). Its links are read against the URL fetched,
    as a plain fetch reads them."""
    sent = _sent(request)
    fetched = sent.response.url if sent is not None and sent.response is not None else None
    return response.replace(url=fetched) if fetched and fetched != response.url else response


def _stopped(request: Request) -> Response | None:
    """The response, with no body, of a rendered request whose page was not HTML and was
    stopped (``PageResponse``), else None."""
    sent = _sent(request)
    return sent.stopped_response(request) if sent is not None else None


def _sent_binary(request: Request, response: Response) -> Response | None:
    """The server's own response, where its bytes are no text (``focused.hygiene.is_binary``,
    read as a plain fetch reads them: its BOM, Content-Type, ``<meta>``): the spider skips it
    as ``binary_body``. The DOM Chromium parses out of a PNG or PDF served as HTML is a page
    of garbage, and was stored and scored as one."""
    sent = _sent(request)
    if sent is None or sent.body is None or not isinstance(response, HtmlResponse):
        return None
    plain = response.replace(body=sent.body, encoding=None)
    return plain if is_binary(plain.body, plain.encoding) else None


class _PageFailureInOneLine(logging.Filter):
    """scrapy-playwright logs each page the browser could not load (a timeout, a refused
    connection) with its traceback and Playwright's call log, some forty lines for one page
    skipped (``focused/skipped/download_error``). Here it is the first line, which names the
    request and the error."""

    def filter(self, record: logging.LogRecord) -> bool:
        # The download of a page that is not HTML, cancelled (PageResponse): no failure.
        request = record.args[0] if isinstance(record.args, tuple) and record.args else None
        if isinstance(request, Request) and _stopped(request) is not None:
            return False
        if record.exc_info and _is_browser_error(record.exc_info[1]):
            record.msg, record.args = record.getMessage().splitlines()[0], None
            record.exc_info = record.exc_text = None
        return True


def _is_browser_error(exception: BaseException | None) -> bool:
    from playwright.async_api import Error as BrowserError

    return isinstance(exception, BrowserError)


class RenderMiddleware:
    """Decides which requests the browser renders (downloader middleware; the spider, topical
    or recrawl, enables it when its ``render`` is not ``never``)."""

    def __init__(self, crawler: Crawler, mode: str) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.mode = mode
        self.min_words = settings.getint("FOCUSED_RENDER_AUTO_MIN_WORDS")
        self.min_links = settings.getint("FOCUSED_RENDER_AUTO_MIN_LINKS")
        self.settle_ms = settings.getint("FOCUSED_RENDER_SETTLE_MS")
        self.navigation_timeout_ms = settings.getfloat("PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT")
        self.max_redirects = settings.getint("REDIRECT_MAX_TIMES")
        self.maxsize = settings.getint("DOWNLOAD_MAXSIZE")
        self.drop_params = drop_params_setting(settings)
        self._closing: Deferred[None] | None = None  # keeps the close task referenced
        add_log_filter("scrapy-playwright", _PageFailureInOneLine)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RenderMiddleware:
        return cls(crawler, crawler.spider.render)

    def process_request(self, request: Request) -> None:
        # A browser renders pages: not robots.txt, nor HEAD_CHECK's HEAD (which Chromium would
        # fetch as a whole GET, and lose the page on a server that refuses HEAD).
        if request.callback is NO_CALLBACK or request.method != "GET":
            return
        if self.mode == "always":
            request.meta["playwright"] = True
        if request.meta.get("playwright"):
            from scrapy_playwright.page import PageMethod

            # scrapy-playwright overwrites these with the browser's HTTP redirects, if any
            request.meta[REDIRECTS_META] = (
                request.meta.get("redirect_times", 0),
                request.meta.get("redirect_urls", []),
            )
            # The response is enough for the navigation to succeed; settle waits for the rest.
            request.meta.setdefault("playwright_page_goto_kwargs", {"wait_until": "commit"})
            # Each render its own: a redirected or retried request carries its last one's.
            sent = PageResponse()
            request.meta["playwright_page_event_handlers"] = {
                "response": sent,
                "download": sent.download,
            }
            request.meta["playwright_page_methods"] = [
                PageMethod(
                    settle,
                    timeout_ms=self.settle_ms,
                    drop_params=self.drop_params,
                    answer_ms=self.navigation_timeout_ms,
                    sent=sent,
                )
            ]

    def process_response(self, request: Request, response: Response) -> Request | Response:
        if request.meta.get("playwright"):
            stopped = _stopped(request)
            response = stopped or response
            taken = _taken_before_load(request)
            if taken:  # the response is settle's blank page
                url, html = taken
                if html is None:  # a script sent the page there
                    return self._redirected(request, url)
                response = response.replace(
                    cls=HtmlResponse, url=url, body=html.encode("utf-8"), encoding="utf-8"
                )
            response = _at_fetched_url(request, response)
            # The browser's spelling of the URL may differ: the dupefilter's key decides.
            if canonicalize(response.url, self.drop_params) != canonicalize(
                request.url, self.drop_params
            ):
                return self._redirected(request, response.url)
            self._check_size(request, response)
            self.stats.inc_value("focused/rendered")
            if stopped is not None:
                self.stats.inc_value("focused/not_html_stopped")
            response = _sent_binary(request, response) or response
            if taken:
                self.stats.inc_value("focused/rendered_before_load")
                logger.debug(
                    "Rendered %s as far as it loaded: its load event did not come in time", url
                )
            return response
        if (
            self.mode == "auto"
            and request.callback is not NO_CALLBACK
            and request.method == "GET"
            and 200 <= response.status < 300
            and isinstance(response, HtmlResponse)
            and looks_script_built(response, self.min_words, self.min_links)
        ):
            self.stats.inc_value("focused/render_needed")
            logger.debug("Rendering %s: its plain HTML looks script-built", request.url)
            meta = {**request.meta, "playwright": True, RENDER_AGAIN_META: True}
            return request.replace(meta=meta, dont_filter=True)
        return response

    def _check_size(self, request: Request, response: Response) -> None:
        """A rendered page over ``DOWNLOAD_MAXSIZE`` is skipped as ``too_large``, as a plain one
        is: the browser knows no such limit, fetches a page whole, and a script may grow it past
        any size (a page of 35 MB was scored and stored)."""
        maxsize = request.meta.get("download_maxsize", self.maxsize)
        if maxsize and len(response.body) > maxsize:
            # the words focused.hygiene.skip_reason reads as too_large
            message = (
                f"Ignored rendered page {response.url}: its HTML ({len(response.body)} B)"
                f" exceeded DOWNLOAD_MAXSIZE ({maxsize} B)"
            )
            logger.warning(message)
            raise IgnoreRequest(message)

    def _redirected(self, request: Request, url: str) -> Request:
        """The browser followed a redirect (HTTP or script) and rendered another URL: that URL
        is requested in turn, as Scrapy's RedirectMiddleware requests a plain page's, so that
        robots.txt, ``allowed_domains`` and the URLs already seen judge it. Taking the page as
        it came would store a page robots.txt forbids, off the allowed domains, or twice."""
        # One navigation, however many HTTP redirects the browser followed in it, counts one.
        times, urls = request.meta.get(REDIRECTS_META, (0, []))
        if times + 1 > self.max_redirects:
            raise IgnoreRequest("max redirections reached")
        meta = {**request.meta, "redirect_times": times + 1, "redirect_urls": [*urls, request.url]}
        meta.pop(RENDER_AGAIN_META, None)  # this is a request of its own
        # Sent in its own host's downloader slot, as focused.hygiene's redirects are.
        meta.pop(Downloader.DOWNLOAD_SLOT, None)
        logger.debug("Rendering %s: the browser was redirected there from %s", url, request.url)
        # Never dont_filter: auto's second request of a page is, to pass its own URL again.
        return request.replace(url=url, meta=meta, dont_filter=False)

    async def process_exception(self, request: Request, exception: Exception) -> Response | None:
        if not request.meta.get("playwright"):
            return None
        stopped = _stopped(request)
        if stopped is not None:  # its download cancelled: scrapy-playwright's failure
            return stopped
        if _is_launch_failure(exception):
            why = f"cannot launch Chromium ({_first_line(exception)}); {INSTALL_HINT}"
        elif await _driver_exited(exception):
            why = (
                "Playwright's driver exited during the crawl, and its Chromium with it: no"
                " browser renders the pages left"
            )
        else:
            return None
        if self._closing is None:
            logger.error("%s", why)
            self._closing = close_spider_now(self.crawler, BROWSER_UNAVAILABLE)
        # Not fetched, not failed: a frontier kept (JOBDIR, FOCUSED_FRONTIER) keeps it in flight
        # for the crawl that goes on with a browser. Failed, a resumed crawl lost it (its seed).
        if isinstance(downloader := self.crawler.engine.downloader, PoliteDownloader):
            downloader.not_rendered()
        raise NotSent(f"no browser to render {request.url}")


async def _driver_exited(exception: Exception) -> bool:
    """Whether a page failed as the driver of ``focused.playwrightdriver`` exited (killed, out
    of memory): each page after it failed too, the crawl's pages made download errors. A page
    closed on its own fails so too ("Target page, context or browser has been closed"), and
    Chromium dying alone is scrapy-playwright's to relaunch: only the driver's exit tells."""
    from playwright._impl._errors import TargetClosedError

    from focused.playwrightdriver import driver_exited

    return isinstance(exception, TargetClosedError) and await driver_exited(DRIVER_EXIT_SEEN_S)


def _is_launch_failure(exception: Exception) -> bool:
    # Playwright prefixes each error with the call that failed.
    return _is_browser_error(exception) and str(exception).startswith("BrowserType.launch")
