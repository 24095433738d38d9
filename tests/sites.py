"""Programmable loopback web sites for the hardening tests.

A ``Site`` serves whatever its ``respond(method, path)`` returns, on one 127.x.y.z address,
and logs every request (method, host, path) in order, across all sites sharing a log. With
``validators=True`` it answers a conditional request as a server does (``not_modified``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from focused.replayweb import WIKI_PREFIX, Graph, ReplayServer, check_loopback, url_for

BODY = -1  # Reply.length: the body's own
DROPPED = 0  # a Reply status: no response, the connection just closes


@dataclass
class Reply:
    status: int = 200  # DROPPED: the connection closes with no response at all
    body: bytes | str = b""
    content_type: str | None = "text/html; charset=utf-8"  # None: no Content-Type header
    headers: dict[str, str | list[str]] = field(default_factory=dict)
    # Content-Length: the body's (BODY), another (a body cut short), or None: no header, the body
    # ends as the connection closes.
    length: int | None = BODY


def html(title: str, body: str, head: str = "") -> str:
    return f"<html><head><title>{title}</title>{head}</head><body>{body}</body></html>"


def not_modified(reply: Reply, request_headers: Mapping[str, str]) -> bool:
    """The 200 ``reply`` matches the request's validators (RFC 9110 13.1.2, 13.1.3): its ETag is
    one of If-None-Match's (weak comparison), or, without If-None-Match, its Last-Modified is
    no later than If-Modified-Since."""
    if reply.status != 200:
        return False
    etag, modified = reply.headers.get("ETag"), reply.headers.get("Last-Modified")
    if_none_match = request_headers.get("If-None-Match")
    if if_none_match is not None:
        tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
        return isinstance(etag, str) and etag.removeprefix("W/") in tags
    since = request_headers.get("If-Modified-Since")
    if since is None or not isinstance(modified, str):
        return False
    return parsedate_to_datetime(modified) <= parsedate_to_datetime(since)


class FetchLog:
    def __init__(self) -> None:
        self.entries: list[tuple[str, str, str]] = []  # (method, host, path)
        self.times: list[float] = []  # time.monotonic() of each entry's arrival
        self._lock = threading.Lock()

    def add(self, method: str, host: str, path: str) -> None:
        with self._lock:
            self.entries.append((method, host, path))
            self.times.append(time.monotonic())

    def get_times(self, host: str) -> list[float]:
        """When each GET to ``host`` arrived, in order."""
        return [
            when
            for (method, entry_host, _), when in zip(self.entries, self.times, strict=True)
            if method == "GET" and entry_host == host
        ]

    def gets(self) -> list[tuple[str, str]]:
        return [(host, path) for method, host, path in self.entries if method == "GET"]


HOLD_TIMEOUT = 120  # s: a process starting this late fails the test's own checks
# DOWNLOAD_TIMEOUT of a crawl behind a Gate: a held request is not a timed-out one.
GATED_DOWNLOAD_TIMEOUT = HOLD_TIMEOUT + 30


class Gate:
    """Holds each request that passes it until ``count`` are waiting at once, then lets every
    request through. A test site holds the first pages of a crawl shared by several processes
    with ``count`` above one process's CONCURRENT_REQUESTS, so that every process is fetching
    before any can go on alone: one that starts seconds late on a loaded machine would
    otherwise find the crawl done. After ``timeout`` seconds a request goes on anyway, and the
    test's own checks fail (a crawl needs DOWNLOAD_TIMEOUT above ``timeout``)."""

    def __init__(self, count: int, timeout: float = HOLD_TIMEOUT) -> None:
        self.count = count
        self.timeout = timeout
        self._arrived = 0
        self._condition = threading.Condition()

    def wait(self) -> None:
        with self._condition:
            self._arrived += 1
            self._condition.notify_all()
            self._condition.wait_for(lambda: self._arrived >= self.count, timeout=self.timeout)


class Hold:
    """Lets the first ``free`` requests that pass it through and holds the later ones until
    ``release()``. A test that stops a crawl (kill -9, Ctrl-C, Redis gone) once the site has
    served ``free`` pages releases after the stop: the crawl cannot go on meanwhile, however
    late the stop comes on a loaded machine. After ``timeout`` seconds a request goes on."""

    def __init__(self, free: int = 0, timeout: float = HOLD_TIMEOUT) -> None:
        self.free = free
        self.timeout = timeout
        self._passed = 0
        self._lock = threading.Lock()
        self._released = threading.Event()

    def wait(self) -> None:
        with self._lock:
            self._passed += 1
            held = self._passed > self.free
        if held:
            self._released.wait(self.timeout)

    def release(self) -> None:
        self._released.set()


class GatedReplay(ReplayServer):
    """The replay web, whose articles other than ``seed`` pass ``gate`` (a ``Gate`` or a
    ``Hold``) before they are answered: the product's server, held from the test."""

    def __init__(self, graph: Graph, gate: Gate | Hold, seed: str, **kwargs: Any) -> None:
        super().__init__(graph, **kwargs)
        self.gate = gate
        self.seed_path = url_for(seed)

    def respond(self, path: str) -> tuple[int, str, str]:
        if path.startswith(WIKI_PREFIX) and path != self.seed_path:
            self.gate.wait()
        return super().respond(path)


class _Handler(BaseHTTPRequestHandler):
    server: Site

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def _serve(self, method: str) -> None:
        site = self.server
        if site.delay:
            time.sleep(site.delay)
        if self.path != "/robots.txt":
            site.log.add(method, site.host, self.path)
            site.user_agents.add(self.headers.get("User-Agent"))
            site.cookies[self.path] = self.headers.get("Cookie")
        if site.password and self.headers.get("Authorization") != site.password:
            reply = Reply(401, "", headers={"WWW-Authenticate": 'Basic realm="site"'})
        else:
            reply = site.respond(method, self.path)
        if reply.status == DROPPED:
            return
        if site.validators and not_modified(reply, self.headers):
            site.not_modified.append(self.path)
            # As nginx's add_header does, an X-Robots-Tag goes with the 304 too.
            names = ("ETag", "Last-Modified", "X-Robots-Tag")
            validators = {name: reply.headers[name] for name in names if name in reply.headers}
            reply = Reply(304, b"", None, validators, length=None)
        body = reply.body.encode("utf-8") if isinstance(reply.body, str) else reply.body
        self.send_response(reply.status)
        if reply.content_type is not None:
            self.send_header("Content-Type", reply.content_type)
        length = len(body) if reply.length == BODY else reply.length
        if length is not None:
            self.send_header("Content-Length", str(length))
        for name, value in reply.headers.items():
            for each in [value] if isinstance(value, str) else value:  # a list: one line each
                self.send_header(name, each)
        self.end_headers()
        if method == "GET":
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _KeepAliveHandler(_Handler):
    """HTTP/1.1: a connection stays open between requests, and the server closes it after
    ``timeout`` seconds idle, as a web server does."""

    protocol_version = "HTTP/1.1"
    timeout = 0.3

    def log_error(self, format: str, *args: object) -> None:
        pass  # the idle timeout, said by http.server as an error


class ThreadedServer(ThreadingHTTPServer):
    """An HTTP server on loopback, served by a thread of its own while its ``with`` lasts."""

    daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://{self.server_address[0]}:{self.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self._thread.join()
        self.server_close()


class Site(ThreadedServer):
    request_queue_size = 128
    handler: type[BaseHTTPRequestHandler] = _Handler

    def __init__(
        self,
        respond: Callable[[str, str], Reply],
        host: str = "127.0.0.1",
        log: FetchLog | None = None,
        delay: float = 0.0,
        validators: bool = False,
        password: str | None = None,
    ) -> None:
        self.host = check_loopback(host)
        self.respond = respond
        self.log = log or FetchLog()
        self.delay = delay
        self.validators = validators  # answer a request its reply's validators match with a 304
        # An Authorization value: a request without it is answered 401, as behind a password.
        self.password = password
        self.not_modified: list[str] = []  # the paths answered so, in order
        self.user_agents: set[str | None] = set()  # of the requests but for robots.txt
        self.cookies: dict[str, str | None] = {}  # each path's last request's Cookie header
        super().__init__((self.host, 0), self.handler)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.server_address[1]}"  # the host as given: a name too

    def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
        # A crawl killed on purpose (the kill -9 tests) drops its connections mid-response:
        # not the site's failure, and its traceback would only be noise in the test log.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class KeepAliveSite(Site):
    handler = _KeepAliveHandler


def self_signed_certificate(folder) -> tuple[str, str]:
    """A certificate for 127.0.0.1 that no authority signed, and its key (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_file), str(key_file)
