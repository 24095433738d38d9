"""Memory a crawl keeps per host it meets: a loopback web of many hosts, crawled to its end.

    python -m benchmarks.many_hosts --hosts 3000
    python -m benchmarks.many_hosts --hosts 3000 --runs topical --tracemalloc
    python -m benchmarks.many_hosts --hosts 3000 --runs topical --checkout /tmp/before

The web is served by one asyncio child process on ``--port`` (18400) of each of ``--hosts``
loopback addresses, 127.0.1.1 on (250 a /24). Each host has a robots.txt of 1 to 5 KB (the
rules of a shop or a CMS: ``Disallow`` lines, a group for another crawler, ``Sitemap`` lines;
every 10th asks a ``Crawl-delay`` of 0.2 s, every 97th one above ``ROBOTS_CRAWL_DELAY_MAX``, so
that its pages are skipped), a front page and an about page, and a disallowed page linked from
the front page. The front page of host ``i`` links to the front pages of hosts ``i + W`` and
``i + 2W`` (``W``, ``--width``: the crawl starts from hosts ``0 .. W - 1``) and to three hosts met
already; the about page to two more. So the crawl meets new hosts at a steady pace until it
runs out of them, with a frontier of a few hundred requests: what grows is what the crawl keeps
per host (and per page: two pages a host). The server closes a connection idle for 5 s, as a
web server does.

Each run is a ``scrapy`` subprocess with a probe extension (this file, copied beside the run so
that a ``--checkout`` without it loads it too) that samples the process's resident memory and
the hosts met (a response from the host, its robots.txt's too) every second, and at the close
counts the per-host records of the crawl's components and the cyclic garbage that waited for a
full collection (which a crawl runs rarely: ``focused.collector``). ``RSS/host`` is the
least-squares slope of the RSS over the hosts met, from a quarter of the hosts on (past the
start-up's allocations). ``--tracemalloc`` traces the run's allocations from its start (slower,
so the RSS is not compared) and lists the source lines whose live memory grew most per host met
between a third of the hosts and the close.

``--runs``: ``topical`` (``scrapy crawl topical``, ``--strategy``, by default ``bestfirst``) and
``plain`` (``benchmarks/plain_spider.py`` on Scrapy's own downloader and middlewares, its
``RobotsTxtMiddleware`` included, ``ROBOTSTXT_OBEY`` on: Scrapy's per-host cost). ``--setting
NAME=VALUE`` is given to the topical runs (``-s``); ``--checkout DIR`` runs the topical crawl
from another copy of the project (a baseline). The table is printed and written as
``many_hosts.md`` under ``--out``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import multiprocessing
import os
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scrapy import signals

REPO = Path(__file__).resolve().parent.parent
PROBE_ENV = "MANY_HOSTS_PROBE"  # JSON {"out": path, "hosts": N, "tracemalloc": bool}
PROBE_MODULE = "many_hosts_probe"
SAMPLE_EVERY = 1.0  # seconds
# What the crawl counts of its robots.txt files, and of all its responses, reported.
STATS = (
    "response_received_count",
    "robotstxt/request_count",
    "focused/robots/forgotten",
    "focused/robots/reparsed",
)
IDLE_CLOSE = 5.0  # seconds a connection stays open without a request
WORDS = ["birds", "feathers", "nesting", "eggs", "flight", "wings", "songbird", "beak", "plumage"]
# Paths a site's robots.txt disallows, of shops and CMSs, drawn from to make one of 1-5 KB.
RULE_PATHS = [
    "/wp-admin/", "/wp-includes/", "/cgi-bin/", "/search", "/*?sort=", "/*?filter=", "/cart/",
    "/checkout/", "/account/", "/login", "/register", "/*?sessionid=", "/tag/*/page/", "/print/",
    "/api/", "/tmp/", "/admin/", "/*.pdf$", "/*?ref=", "/compare/", "/wishlist/", "/feed/",
    "/trackback/", "/comments/feed/", "/calendar/*?month=", "/*/amp/", "/static/private/",
]  # fmt: skip


def host_address(i: int) -> str:
    return f"127.0.{1 + i // 250}.{1 + i % 250}"


def robots_txt(i: int) -> str:
    draw = random.Random(i)
    lines = [f"# robots.txt of site {i}", "User-agent: *", "Disallow: /private/"]
    if i % 10 == 0:
        lines.append("Crawl-delay: 0.2")
    elif i % 97 == 0:
        lines.append("Crawl-delay: 9999")
    size = draw.randrange(1000, 5000)
    group = 0
    while sum(map(len, lines)) + len(lines) < size:
        if draw.random() < 0.04:
            group += 1
            lines += ["", f"User-agent: otherbot{group}"]
        path = draw.choice(RULE_PATHS).replace("/*", f"/section-{draw.randrange(400)}/*", 1)
        kind = "Allow" if draw.random() < 0.1 else "Disallow"
        lines.append(f"{kind}: {path}{draw.randrange(100) if path.endswith('/') else ''}")
    lines += ["", f"Sitemap: http://{host_address(i)}/sitemap.xml"]
    return "\n".join(lines) + "\n"


class Web:
    """The pages of ``hosts`` hosts on ``port``, ``width`` chains of new hosts."""

    def __init__(self, hosts: int, port: int, width: int) -> None:
        self.hosts, self.port, self.width = hosts, port, width
        self._robots = [robots_txt(i).encode() for i in range(hosts)]

    def url(self, i: int, path: str = "/") -> str:
        return f"http://{host_address(i)}:{self.port}{path}"

    def page(self, i: int, path: str) -> tuple[str, str] | None:
        if path == "/robots.txt":
            return "text/plain", self._robots[i].decode()
        draw = random.Random(f"{i}{path}")
        met = [draw.randrange(i + self.width) for _ in range(3)]
        if path == "/":
            links = ["/about", "/private/log"]
            links += [self.url(j) for j in (i + self.width, i + 2 * self.width) if j < self.hosts]
            links += [self.url(j % self.hosts) for j in met]
        elif path == "/about":
            links = ["/", *(self.url(j % self.hosts, "/about") for j in met[:2])]
        elif path == "/private/log":
            links = ["/"]
        else:
            return None
        text = " ".join(draw.choice(WORDS) for _ in range(80))
        anchors = " ".join(f'<a href="{url}">{draw.choice(WORDS)} site</a>' for url in links)
        title = f"{WORDS[i % len(WORDS)]} site {i}{path}"
        html = (
            f"<html><head><title>{title}</title></head><body><p>{text}</p>{anchors}</body></html>"
        )
        return "text/html; charset=utf-8", html

    async def _answer(
        self, i: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while line := await asyncio.wait_for(reader.readline(), IDLE_CLOSE):
                path = line.split()[1].decode() if len(line.split()) > 1 else "/"
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                found = self.page(i, path)
                kind, body = found if found else ("text/plain", "not found")
                data = body.encode()
                status = "200 OK" if found else "404 Not Found"
                head = f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(data)}"
                writer.write(f"{head}\r\n\r\n".encode() + data)
                await writer.drain()
        except (TimeoutError, OSError, IndexError):
            pass  # idle, or a connection the crawl dropped
        finally:
            writer.close()

    async def _serve(self, told: Any) -> None:
        try:
            for i in range(self.hosts):
                await asyncio.start_server(
                    lambda r, w, i=i: self._answer(i, r, w), host_address(i), self.port
                )
        except OSError as exc:  # a port taken: said by the parent, in one line
            told.put(f"{host_address(i)}:{self.port}: {exc.strerror or exc}")
            return
        told.put("")
        await asyncio.Event().wait()

    def serve(self, told: Any) -> None:
        asyncio.run(self._serve(told))


def rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


class Probe:
    """Extension of the measured crawl (``PROBE_ENV``): RSS and hosts met every second; the
    per-host records of the crawl's components and the tracemalloc growth at the close."""

    def __init__(self, crawler: Any, config: dict[str, Any]) -> None:
        self.crawler = crawler
        self.config = config
        self.hosts: set[str] = set()
        self.samples: list[tuple[float, int, int]] = []  # seconds, hosts met, RSS in KB
        self.started = time.monotonic()
        self.snapshot: Any = None
        self.loop: Any = None
        self.scheduler: Any = None  # the engine's, gone from it once the spider closes
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        crawler.signals.connect(self.response_received, signal=signals.response_received)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Any) -> Probe:
        return cls(crawler, json.loads(os.environ[PROBE_ENV]))

    def engine_started(self) -> None:
        from scrapy.utils.asyncio import create_looping_call

        if self.config["tracemalloc"]:
            import tracemalloc

            tracemalloc.start(1)
        self.started = time.monotonic()
        self.loop = create_looping_call(self.sample)
        self.loop.start(SAMPLE_EVERY, now=True)

    def response_received(self, response: Any, request: Any) -> None:
        from scrapy.utils.httpobj import urlparse_cached

        self.hosts.add(urlparse_cached(request).netloc)

    def sample(self) -> None:
        self.scheduler = self.crawler.engine.scheduler or self.scheduler
        self.samples.append((time.monotonic() - self.started, len(self.hosts), rss_kb()))
        if (
            self.config["tracemalloc"]
            and self.snapshot is None
            and len(self.hosts) >= self.config["hosts"] // 3
        ):
            import tracemalloc

            self.snapshot = (len(self.hosts), tracemalloc.take_snapshot())

    def spider_closed(self, spider: Any) -> None:
        if self.loop is not None and self.loop.running:
            self.loop.stop()
        self.sample()
        stats = self.crawler.stats.get_stats()
        result = {
            "samples": self.samples,
            "records": self.records(spider),
            "stats": {name: stats.get(name, 0) for name in STATS},
        }
        if self.snapshot is not None:
            import tracemalloc

            hosts_then, before = self.snapshot
            after = tracemalloc.take_snapshot()
            tracemalloc.stop()
            met = max(1, len(self.hosts) - hosts_then)
            top = after.compare_to(before, "lineno")[:25]
            result["growth"] = [
                [str(stat.traceback[0]), stat.size_diff / met, stat.count_diff / met]
                for stat in top
            ]
        # Held until a full collection, which a crawl runs rarely (focused.collector): a
        # structure bounded in entries but dropping cycles is not bounded in memory.
        result["records"]["cyclic garbage at the close (objects gc.collect() frees)"] = gc.collect()
        Path(self.config["out"]).write_text(json.dumps(result))

    def records(self, spider: Any) -> dict[str, int]:
        """How many entries the per-host structures of the crawl's components hold."""
        crawler = self.crawler
        downloader = crawler.engine.downloader
        counts = {
            "hosts met": len(self.hosts),
            "downloader slots (Scrapy drops one idle 60 s)": len(downloader.slots),
            "downloader per_slot_settings": len(downloader.per_slot_settings),
            "stats keys": len(crawler.stats.get_stats()),
        }
        # Twisted's HTTP connection pool keeps a (scheme, host, port) key for every host it
        # connected to, its list empty once the connections are closed.
        handler = getattr(downloader.handlers, "_handlers", {}).get("http")
        pool = getattr(handler, "_pool", None)
        if pool is not None:
            counts["HTTP connection pool keys"] = len(pool._connections)
        for owner, names in (
            (downloader, ("paced_from_end", "_on_wire", "_held_since_pause", "_places")),
            (
                self._component("RobotsTxtMiddleware"),
                ("_parsers", "_slot_delays", "_slot_asks", "_skipped"),
            ),
            (self._component("RobotsTxtMiddleware"), ("_unreachable", "_retry_at")),
            (self._component("RobotsTxtMiddleware"), ("_expires_at", "_old_rules")),
            (self._component("RobotsTxtMiddleware"), ("_kept_past_failure",)),
            (self._component("RetryAfterMiddleware"), ("_paused_until", "_answers")),
            (self.scheduler, ("in_window", "recent_hosts")),
        ):
            for name in names:
                kept = getattr(owner, name, None)
                if kept is not None:
                    counts[f"{type(owner).__name__}.{name}"] = len(kept)
        for key, kept in getattr(spider, "state", {}).items():
            if hasattr(kept, "__len__"):
                counts[f"spider.state[{key!r}]"] = len(kept)
        return counts

    def _component(self, name: str) -> Any:
        middlewares = self.crawler.engine.downloader.middleware.middlewares
        return next((mw for mw in middlewares if type(mw).__name__ == name), None)


def serve_web(hosts: int, port: int, width: int) -> multiprocessing.Process:
    """The web, served by a child process once it listens on every host; ``OSError`` if it
    cannot."""
    told: multiprocessing.Queue[str] = multiprocessing.Queue()
    server = multiprocessing.Process(target=Web(hosts, port, width).serve, args=(told,))
    server.start()
    try:
        error = told.get(timeout=300)
    except queue.Empty:
        error = "the web did not start in 300 s"
    if error:
        server.terminate()
        server.join()
        raise OSError(error)
    return server


def crawl(
    kind: str, args: Any, checkout: Path, probe_dir: Path, out: Path, settings: list[str]
) -> tuple[dict[str, Any], float, int]:
    """One crawl of the web to its end: what its probe wrote, the wall time, the exit status."""
    from focused.settings import EXTENSIONS

    web = Web(args.hosts, args.port, args.width)
    seeds = ",".join(web.url(i) for i in range(args.width))
    probe = f"{PROBE_MODULE}.Probe"
    common = ["-s", "LOG_LEVEL=WARNING", "-s", "FOCUSED_LOGSTATS_INTERVAL=0"]
    if kind == "plain":
        command = [
            "runspider",
            str(REPO / "benchmarks" / "plain_spider.py"),
            "-a",
            f"seeds={seeds}",
        ]
        gc_extension = "focused.collector.GarbageCollector"
        extensions = {gc_extension: EXTENSIONS[gc_extension], probe: 900}
        common += [
            "-s", "DOWNLOADER=scrapy.core.downloader.Downloader",
            "-s", "DOWNLOADER_MIDDLEWARES={}",
        ]  # fmt: skip
    else:
        command = ["crawl", "topical", "-a", f"seeds={seeds}", "-a", f"strategy={args.strategy}"]
        command += ["-a", "query=birds feathers nesting"]
        command += ["-s", f"FOCUSED_DB={out.with_suffix('.sqlite3')}"]
        extensions = {**EXTENSIONS, probe: 900}
        for setting in settings:
            command += ["-s", setting]
    command += ["-s", f"EXTENSIONS={json.dumps(extensions)}", *common]
    config = {"out": str(out), "hosts": args.hosts, "tracemalloc": args.tracemalloc}
    env = dict(
        os.environ,
        PYTHONPATH=f"{checkout}{os.pathsep}{probe_dir}{os.pathsep}{REPO}",
        **{PROBE_ENV: json.dumps(config)},
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "scrapy", *command], cwd=checkout, env=env, capture_output=True
    )
    wall = time.monotonic() - started
    if done.returncode != 0 or not out.exists():
        sys.stderr.write(done.stderr.decode(errors="replace")[-3000:])
        return {}, wall, done.returncode or 1
    return json.loads(out.read_text()), wall, 0


def per_host(samples: list[list[float]], hosts: int) -> float:
    """KB of RSS per host met: the slope over the samples from a quarter of the hosts on."""
    points = [(met, rss) for _, met, rss in samples if met >= hosts // 4]
    if len(points) < 2 or points[0][0] == points[-1][0]:
        return float("nan")
    xs, ys = zip(*points, strict=True)
    return statistics.linear_regression(xs, ys).slope


def report(name: str, result: dict[str, Any], wall: float, hosts: int) -> list[str]:
    samples = result["samples"]
    lines = [
        f"## {name}",
        "",
        f"hosts met {samples[-1][1]:,}; RSS at the start {samples[0][2] / 1024:.0f} MB, at the "
        f"close {samples[-1][2] / 1024:.0f} MB; **RSS/host {per_host(samples, hosts):.1f} KB**; "
        f"wall clock {wall:.0f} s",
        "",
        "| per-host structure, or stat, at the close | entries |",
        "|---|---|",
    ]
    lines += [f"| {key} | {count:,} |" for key, count in result["records"].items()]
    lines += [f"| stat `{name}` | {count:,} |" for name, count in result["stats"].items()]
    if "growth" in result:
        lines += [
            "",
            "| source line (tracemalloc) | bytes/host | blocks/host |",
            "|---|---|---|",
        ]
        lines += [
            f"| {where} | {size:,.0f} | {count:.1f} |" for where, size, count in result["growth"]
        ]
    return [*lines, ""]


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.runner import check_topical_arguments, output_folder, report_head
    from focused.errors import CommandLineParser, ConfigError, at_least_one, port, quoted, say

    parser = CommandLineParser(prog="python -m benchmarks.many_hosts")
    parser.add_argument("--hosts", type=at_least_one, default=3000, help="hosts of the web")
    parser.add_argument("--width", type=at_least_one, default=32, help="chains of new hosts")
    parser.add_argument("--port", type=port, default=18400, help="port of every host")
    parser.add_argument(
        "--runs", nargs="+", choices=("topical", "plain"), default=["topical", "plain"]
    )
    parser.add_argument("--strategy", default="bestfirst")
    parser.add_argument("--setting", action="append", default=[], help="NAME=VALUE, topical")
    parser.add_argument("--checkout", type=Path, default=REPO, help="project copy, topical")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--out", type=output_folder, default=Path("many_hosts"))
    args = parser.parse_args(argv)
    if args.width >= args.hosts:
        parser.error(f"--width must be below --hosts ({args.hosts}), not {args.width}")
    if not (args.checkout / "scrapy.cfg").is_file():
        parser.error(f"--checkout {quoted(str(args.checkout))} is no copy of the project")
    try:
        check_topical_arguments("birds", args.strategy)
        server = serve_web(args.hosts, args.port, args.width)
    except (ConfigError, OSError) as exc:
        say(f"{parser.prog}: error: {exc}")
        return 2
    lines = report_head("Memory per host met", "benchmarks.many_hosts", argv)
    try:
        with tempfile.TemporaryDirectory(prefix="focused-many-hosts-") as tmp:
            shutil.copy(__file__, Path(tmp, f"{PROBE_MODULE}.py"))
            for kind in args.runs:
                checkout = args.checkout if kind == "topical" else REPO
                out = Path(tmp, f"{kind}.json")
                result, wall, status = crawl(kind, args, checkout, Path(tmp), out, args.setting)
                if status:
                    say(f"{parser.prog}: error: the {kind} crawl failed")
                    return 1
                name = f"{kind} ({checkout})" if kind == "topical" else "plain Scrapy spider"
                part = report(name, result, wall, args.hosts)
                print("\n".join(part))
                lines += part
    finally:
        server.terminate()
        server.join()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "many_hosts.md").write_text("\n".join(lines), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
