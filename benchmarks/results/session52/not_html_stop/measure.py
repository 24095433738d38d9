"""Bytes and time a crawl spends on links that are no HTML, with the download stopped at the
headers (``focused.hygiene.NotHtmlStopMiddleware``, session 52) and without it, alternately.

    python benchmarks/results/session52/not_html_stop/measure.py [PAUSE [RENDER]]

A loopback site of 20 HTML pages on 127.0.0.1:22450; each page links the next, an
extensionless 4 MiB PDF (with Content-Length), an extensionless 2 MiB binary without
Content-Length and a 44 KB script. Bodies go out in 64 KiB chunks, PAUSE seconds apart
(default 0.05). `bfs`, so that both crawls fetch the same pages. With RENDER (`always`), the
pages are rendered (`-a render=RENDER`), and each round crawls once with the checkout the script
lies in: run it from two checkouts to compare them (the browser's stop has no setting).
"""

import re
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
PORT = 22450
PAGES = 20
PAUSE = float(sys.argv[1]) if len(sys.argv) > 1 else 0.05
RENDER = sys.argv[2] if len(sys.argv) > 2 else None
CHUNK = 64 * 1024
WORDS = "birds feathers nesting migration"
sent = {"bytes": 0}
lock = threading.Lock()


def body_for(path: str) -> tuple[str, bytes, bool]:
    """Content-Type, body, and whether a Content-Length is sent."""
    if path == "/robots.txt":
        return "text/plain", b"User-agent: *\nAllow: /\n", True
    if path.startswith("/page/"):
        n = int(path.rsplit("/", 1)[1])
        targets = (f"/page/{(n + 1) % PAGES}", f"/doc/{n}", f"/data/{n}", f"/static/{n}.js")
        links = "".join(f"<a href='{target}'>{WORDS}</a>" for target in targets)
        page = f"<html><title>p{n}</title><body><p>{WORDS * 30}</p>{links}</body></html>"
        return "text/html", page.encode(), True
    if path.startswith("/doc/"):
        return "application/pdf", b"%PDF-1.4\n" + b"x" * (4 * 1024 * 1024), True
    if path.startswith("/data/"):
        return "application/octet-stream", b"\0" * (2 * 1024 * 1024), False
    if path.startswith("/static/"):
        return "application/javascript", b"var a = 1;\n" * 4000, True
    return "text/html", b"<html>missing</html>", True


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        kind, body, length = body_for(self.path)
        self.send_response(200)
        self.send_header("Content-Type", kind)
        if length:
            self.send_header("Content-Length", str(len(body)))
        else:
            self.close_connection = True
        self.end_headers()
        for start in range(0, len(body), CHUNK):
            chunk = body[start : start + CHUNK]
            try:
                self.wfile.write(chunk)
                self.wfile.flush()
            except OSError:  # the crawl closed the connection: what is measured
                return
            with lock:
                sent["bytes"] += len(chunk)
            if len(body) > CHUNK:
                time.sleep(PAUSE)

    def log_message(self, *args: object) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, *args: object) -> None:
        pass


def crawl(tag: str, extra: list[str], scratch: str) -> None:
    sent["bytes"] = 0
    started = time.monotonic()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "scrapy", "crawl", "topical", "-a", "strategy=bfs"),
            *("-a", f"query={WORDS}", "-a", f"seeds=http://127.0.0.1:{PORT}/page/0"),
            *("-s", f"FOCUSED_DB={scratch}/{tag}-{time.time_ns()}.sqlite3"),
            *("-s", "LOG_LEVEL=INFO", *extra),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    took = time.monotonic() - started

    def stat(name: str) -> int:
        found = re.search(rf"'{re.escape(name)}': (\d+)", done.stderr)
        return int(found.group(1)) if found else 0

    print(
        f"{tag:14} exit={done.returncode} wall={took:5.1f}s"
        f" server_sent={sent['bytes'] / 2**20:6.1f} MiB"
        f" response_bytes={stat('downloader/response_bytes') / 2**20:6.1f} MiB"
        f" not_html={stat('focused/skipped/not_html')}"
        f" stopped={stat('focused/not_html_stopped')}"
        f" pages={stat('item_scraped_count')} responses={stat('response_received_count')}",
        flush=True,
    )


def main() -> None:
    server = Server(("127.0.0.1", PORT), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    off = ["-s", 'DOWNLOADER_MIDDLEWARES={"focused.hygiene.NotHtmlStopMiddleware": null}']
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(2):
            if RENDER is not None:
                crawl(f"render={RENDER}", ["-a", f"render={RENDER}"], scratch)
                continue
            crawl("whole", off, scratch)
            crawl("stopped", [], scratch)
    server.shutdown()


if __name__ == "__main__":
    main()
