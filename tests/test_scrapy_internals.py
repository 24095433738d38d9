"""The private parts of Scrapy 2.19 that the crawler overrides or calls are there, in the shape
it uses them.

Scrapy has no public hook for what they do (a request counted against its host's concurrency
as its slot lets it go, and in a shared crawl given back crawl-wide as its download ends, a slot
held for a crawl-wide delay or a Retry-After pause, the engine woken early, a malformed
``<base href>`` ignored, an encoding declared told from one guessed, a meta refresh read as
browsers read it), so ``requirements.txt`` allows Scrapy 2.19.x only. A Scrapy upgrade starts
here: each failure names what moved, where the behaviour tests would fail further from the
cause, or pass while a politeness fix silently no longer runs.
"""

from __future__ import annotations

import inspect

import scrapy
from scrapy.core.downloader import Downloader, Slot
from scrapy.core.downloader.handlers import DownloadHandlers
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.core.engine import ExecutionEngine, _Slot
from scrapy.http import TextResponse
from scrapy.utils.defer import _schedule_coro
from scrapy.utils.response import _baseurl_cache, _metaref_cache, get_meta_refresh
from twisted.web._newclient import HTTP11ClientProtocol
from twisted.web.client import HTTPConnectionPool

from focused.hygiene import CharsetMiddleware


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_the_installed_scrapy_is_the_version_the_requirements_allow():
    assert scrapy.__version__.startswith("2.19."), scrapy.__version__


def test_the_downloader_methods_focused_overrides_or_calls():
    # focused.downloader.PoliteDownloader overrides the first two; focused.retryafter and
    # PoliteDownloader hold a slot with the third, as Scrapy does for its own delay.
    assert parameters(Downloader._wait_for_download) == ["self", "slot", "request", "queue_dfd"]
    assert parameters(Downloader._process_queue) == ["self", "slot"]
    assert parameters(Downloader._latercall) == ["self", "slot"]
    # PoliteDownloader turns the list of addresses it may return into one (CONCURRENT_REQUESTS_
    # PER_IP with CachingHostnameResolver); Scrapy's _get_slot and focused's callers go through it.
    assert parameters(Downloader.get_slot_key) == ["self", "request"]
    assert "self.get_slot_key(request)" in inspect.getsource(Downloader._get_slot)
    assert Downloader.DOWNLOAD_SLOT == "download_slot"
    # focused.robots paces a slot through per_slot_settings before Scrapy's _get_slot makes it
    # from them, and forgets that pace as _slot_gc drops the slot: PoliteDownloader's, Scrapy's
    # rule but for a slot held by a pause.
    assert "self.per_slot_settings.get(key" in inspect.getsource(Downloader._get_slot)
    assert parameters(Downloader._slot_gc) == ["self", "age"]
    source = inspect.getsource(Downloader._slot_gc)
    assert "if not slot.active and slot.lastseen + slot.delay <= mintime:" in source
    assert "self.slots.pop(key).close()" in source
    # PoliteDownloader looks a host up before Scrapy's _enqueue_request picks its slot, in the
    # cache that get_slot_key reads (CONCURRENT_REQUESTS_PER_IP).
    assert parameters(Downloader._enqueue_request) == ["self", "request"]
    assert "self._get_slot(request)" in inspect.getsource(Downloader._enqueue_request)
    assert "dnscache.get(key, key)" in inspect.getsource(Downloader.get_slot_key)
    # PoliteDownloader sends a leased request as Scrapy's _process_queue does.
    assert "_schedule_coro(self._wait_for_download(" in inspect.getsource(Downloader._process_queue)
    assert parameters(_schedule_coro) == ["coro"]
    # In a shared crawl, a request gives back its place at its host crawl-wide in the
    # _process_queue call that Scrapy's _download makes as the download ends (success, failure
    # or cancel), once the request has left the slot's transferring set.
    source = inspect.getsource(Downloader._download)
    finally_block = source[source.index("finally:") :]
    removed = finally_block.index("slot.transferring.remove(request)")
    assert removed < finally_block.index("self._process_queue(slot)")
    # focused.retryafter pauses the host on response_downloaded, which _download sends before
    # that _process_queue: the slot sends nothing more to a host whose 429 is in.
    assert source.index("signal=signals.response_downloaded") < source.index("finally:")


def test_the_connection_pool_parts_the_downloader_tidies():
    # PoliteDownloader._forget_closed_connections reaches each download handler's Twisted
    # pool through Scrapy's private attributes, and takes out of it, as Twisted's getConnection
    # does (its timeout cancelled), the connections their servers closed, then the keys left
    # with none.
    source = inspect.getsource(DownloadHandlers.__init__)
    assert "self._handlers: dict[str, DownloadHandlerProtocol] = {}" in source
    assert "self._pool: HTTPConnectionPool = HTTPConnectionPool(" in inspect.getsource(
        HTTP11DownloadHandler.__init__
    )
    assert "self._connections = {}" in inspect.getsource(HTTPConnectionPool.__init__)
    assert "self._timeouts = {}" in inspect.getsource(HTTPConnectionPool.__init__)
    assert "self._timeouts[connection].cancel()" in inspect.getsource(
        HTTPConnectionPool.getConnection
    )
    # A pooled connection's timeout is its only entry in _timeouts, set as it is pooled.
    put = inspect.getsource(HTTPConnectionPool._putConnection)
    assert "self._removeConnection, key, connection" in put
    assert "self._timeouts[connection] = cid" in put
    # A key's list is read with get() and made again with setdefault(): one deleted is safe.
    assert "self._connections.get(key)" in inspect.getsource(HTTPConnectionPool.getConnection)
    assert "self._connections.setdefault(key, [])" in inspect.getsource(
        HTTPConnectionPool._putConnection
    )
    assert 'self._state = "CONNECTION_LOST"' in inspect.getsource(HTTP11ClientProtocol)


def test_the_engine_close_the_downloader_learns_of_first():
    # PoliteDownloader wraps the engine's close_spider_async (the only way in: Scrapy says
    # nothing as the close begins) to end the requests waiting in their slots, which
    # the close would otherwise wait for; a stop (Ctrl-C) closes through the engine's attribute.
    assert parameters(ExecutionEngine.close_spider_async) == ["self", "reason"]
    assert 'self.close_spider_async(reason="shutdown")' in inspect.getsource(
        ExecutionEngine.stop_async
    )
    # A slot's queue holds each request with the Deferred that _enqueue_request awaits.
    assert "slot.queue.append((request, d))" in inspect.getsource(Downloader._enqueue_request)
    assert "await maybe_deferred_to_future(d)" in inspect.getsource(Downloader._enqueue_request)


def test_a_download_slot_has_what_the_scheduler_and_downloader_read():
    slot = Slot(concurrency=2, delay=0.5, jitter=0.0)
    assert slot.latercall is None and not slot.queue and slot.transferring == set()
    assert slot.free_transfer_slots() == 2 and slot.download_delay() == 0.5
    assert slot.lastseen == 0  # monotonic() seconds of the last send


def test_the_engine_can_be_woken_and_a_base_url_overridden():
    # focused.distributed wakes an idle engine through its slot's nextcall (Scrapy otherwise
    # looks again only every 5 s); focused.extract gives a page a base URL through the cache.
    # schedulers.local reads the scheduler's scored pages through the slot's scheduler.
    assert "nextcall" in parameters(_Slot.__init__)
    assert "scheduler" in parameters(_Slot.__init__)
    # focused.jobdir reads whether the spider is closing already through the slot's closing.
    assert "self.closing" in inspect.getsource(_Slot.__init__)
    assert hasattr(_baseurl_cache, "__setitem__")
    # focused.hygiene.MetaRefreshMiddleware gives Scrapy's its reading of a page's refresh
    # through get_meta_refresh's cache, which get_meta_refresh reads before it parses.
    response = TextResponse("http://127.0.0.1/", body=b"<meta http-equiv=refresh content=0>")
    _metaref_cache[response] = (0.0, "http://127.0.0.1/next")
    assert get_meta_refresh(response) == (0.0, "http://127.0.0.1/next")


def test_a_responses_declared_encodings_are_what_focused_reads():
    # focused.hygiene.CharsetMiddleware tells where a page's encoding comes from (the encoding
    # given, the BOM's, the Content-Type's, the <meta>'s) through TextResponse's methods, to
    # guess the encoding of a page that declares none in place of Scrapy (_auto_detect_fun),
    # and to read a <meta> saying UTF-16 as UTF-8.
    body = b'<meta charset="windows-1251">'
    response = TextResponse("http://127.0.0.1/", body=body, headers={"Content-Type": "text/html"})
    assert response._encoding is None and response._bom_encoding() is None
    assert response._headers_encoding() is None
    assert response._body_declared_encoding() == "cp1251"  # Python's name for the <meta>'s
    assert TextResponse("http://127.0.0.1/", body=b"<p>x</p>")._body_declared_encoding() is None
    assert TextResponse("http://127.0.0.1/", body=b"\xef\xbb\xbf")._bom_encoding() == "utf-8"
    assert parameters(TextResponse._auto_detect_fun) == ["self", "text"]
    # A <meta> saying UTF-16 is read as UTF-8: by w3lib 2.6 itself, as the HTML standard asks
    # (the declaration it gives is utf-8), and by CharsetMiddleware from 2.5's utf-16.
    utf_16 = TextResponse("http://127.0.0.1/", body=b'<meta charset="utf-16"><p>caf\xc3\xa9</p>')
    read = CharsetMiddleware().process_response(scrapy.Request(utf_16.url), utf_16)
    assert (read.encoding, read.text) == ("utf-8", '<meta charset="utf-16"><p>caf\u00e9</p>')


def test_the_redirect_request_builder_focused_overrides():
    # focused.hygiene drops a redirect target's user and password where both of Scrapy's
    # redirect middlewares build the request, before they log it.
    from scrapy.downloadermiddlewares.redirect import (
        BaseRedirectMiddleware,
        MetaRefreshMiddleware,
        RedirectMiddleware,
    )

    build = BaseRedirectMiddleware._build_redirect_request
    assert parameters(build) == ["self", "source_request", "response", "url", "kwargs"]
    for middleware in (RedirectMiddleware, MetaRefreshMiddleware):
        source = inspect.getsource(middleware)
        assert "self._build_redirect_request(" in source or "_redirect_request_using_get" in source
    get_source = inspect.getsource(BaseRedirectMiddleware._redirect_request_using_get)
    assert "self._build_redirect_request(" in get_source


def test_a_crawler_stop_before_the_engine_runs_is_what_focused_waits_out():
    # focused.stopping.stop_once_started reads the engine before the crawl starts by its private
    # name, and replaces a stop that does nothing until the engine runs.
    from scrapy import Spider
    from scrapy.crawler import Crawler

    assert Crawler(Spider)._engine is None
    assert "if self.engine.running:" in inspect.getsource(Crawler.stop_async)
    # It reads the engine's private _starting too: set before the engine_started handlers run,
    # running only once they are all done.
    from scrapy.core.engine import ExecutionEngine

    start = inspect.getsource(ExecutionEngine.start_async)
    started = start.index("signal=signals.engine_started")
    assert start.index("self._starting = True") < started < start.index("self.running = True")
    # And it tells a spider closed before the engine ran (the engine then asks for the stop
    # itself) by the engine's spider, gone before the engine's close callback.
    close = inspect.getsource(ExecutionEngine.close_spider_async)
    assert close.index("self.spider = None") < close.index("self._spider_closed_callback(")
