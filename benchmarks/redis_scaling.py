"""Pages per second of one crawl run by 1, 2 and 3 processes sharing a Redis frontier.

    python -m benchmarks.redis_scaling --corpus /work/shared/corpora/wikispeedia.tar.xz

The replay web is served from this process on 127.0.0.1 with a per-response delay (default
20 ms, a fast network), and a redis-server of its own runs on a free loopback port. Each run
is one crawl (bestfirst, the same seed, query and page budget) by N ``scrapy crawl``
processes with the same crawl id; the baseline is one process with the frontier in memory
(no Redis), run in the same session. Pages per second = distinct articles fetched / the
time from the first to the last article fetch, as seen by the server, so interpreter start-up
is not counted. With ``--count-calls``, also the calls the processes sent to Redis (round
trips, about) by command, a script call by the script's name, and how many of them were
script calls. CPU ms/page = the user and system CPU
time of the crawl's processes (start-up included) / distinct articles. Prints a Markdown table.
"""

from __future__ import annotations

import hashlib
import importlib
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import redis as redis_client

from focused.errors import (
    CommandLineParser,
    at_least_one,
    exit_on_config_error,
    say,
    seconds,
)
from focused.replayweb import ReplayServer, load_graph

REPO = Path(__file__).resolve().parent.parent
# The modules whose Lua scripts the crawl runs, named in the call counts by their constants.
SCRIPT_MODULES = (
    "schedulers.redis_frontier",
    "schedulers.rank_semantic",
    "focused.distributed",
    "focused.dedup",
    "focused.simhash",
)
QUERY = "birds species feathers nest eggs wings flight plumage"


class TimedReplayServer(ReplayServer):
    """The replay web, remembering when each path was fetched."""

    def record(self, path: str) -> None:
        super().record(path)
        self.times.append(time.monotonic())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def crawl_command(seed: str, crawl_id: str, settings: dict[str, object]) -> list[str]:
    command = [sys.executable, "-m", "scrapy", "crawl", "topical", "-a", "strategy=bestfirst"]
    command += ["-a", f"query={QUERY}", "-a", f"seeds={seed}", "-a", f"crawl_id={crawl_id}"]
    for name, value in settings.items():
        command += ["-s", f"{name}={value}"]
    return command


def script_names() -> dict[str, str]:
    """The SHA1 by which Redis knows each Lua script of the crawl -> its constant's name."""
    names = {}
    for module in map(importlib.import_module, SCRIPT_MODULES):
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str) and "redis.call" in value:
                names[hashlib.sha1(value.encode()).hexdigest()] = name
    return names


class CallCounter(threading.Thread):
    """Counts the commands clients send to Redis (``MONITOR``), by name: a script call counts
    once, not the commands it runs, and so one round trip is one call (a pipeline sends its
    calls in one). MONITOR slows the server down: pages/s of a counted run are not comparable."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.client = redis_client.Redis.from_url(url, socket_timeout=None)  # idle at times
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.scripts = script_names()

    def run(self) -> None:
        try:
            with self.client.monitor() as monitor:
                for entry in monitor.listen():
                    if entry.get("client_type") != "lua":
                        words = entry["command"].split(" ", 2)
                        name = words[0].lower()
                        if name == "evalsha":
                            name += ":" + self.scripts.get(words[1], words[1][:8])
                        with self.lock:
                            self.calls[name] += 1
        except redis_client.ConnectionError:
            pass  # the server stopped: the benchmark is over

    def take(self) -> Counter[str]:
        """The calls counted since the last take."""
        with self.lock:
            calls, self.calls = self.calls, Counter()
        return calls


def run(
    server: TimedReplayServer,
    processes: int,
    counter: CallCounter | None,
    frontier: str | None,
    args,
    work: Path,
):
    server.fetched.clear()
    server.times.clear()
    crawl_id = f"bench-{processes}-{'redis' if frontier else 'local'}-{time.time_ns()}"
    settings: dict[str, object] = {
        "CLOSESPIDER_PAGECOUNT": args.pages,
        "FOCUSED_DB": work / f"{crawl_id}.sqlite3",
        "FOCUSED_LOGSTATS_INTERVAL": 0,
        "LOG_LEVEL": "WARNING",
    }
    if frontier:
        settings["FOCUSED_FRONTIER"] = frontier
    seed = server.base_url_for(args.seed)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers = [
        subprocess.Popen(crawl_command(seed, crawl_id, settings), cwd=REPO)
        for _ in range(processes)
    ]
    for worker in workers:
        worker.wait(timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    calls: Counter[str] = Counter()
    if counter is not None:
        time.sleep(0.2)  # MONITOR's last lines come in
        calls = counter.take()
    fetches = [(t, p) for t, p in zip(server.times, server.fetched, strict=True) if "/wiki/" in p]
    pages = len({path for _, path in fetches})
    elapsed = fetches[-1][0] - fetches[0][0] if len(fetches) > 1 else 0.0
    print(f"{processes} processes ({crawl_id}): {pages} pages in {elapsed:.1f} s", flush=True)
    if calls:
        counts = ", ".join(f"{name} {n}" for name, n in calls.most_common())
        print(f"  Redis calls: {counts}", flush=True)
    scripts = sum(n for name, n in calls.items() if name.split(":")[0] in ("evalsha", "eval"))
    return pages, len(fetches) - pages, elapsed, cpu, calls.total(), scripts


def main() -> int:
    parser = CommandLineParser(prog="python -m benchmarks.redis_scaling")
    parser.add_argument("--corpus", required=True, help="Wikispeedia-format dir or .tar.xz")
    parser.add_argument("--seed", default="Bird", help="start article (default Bird)")
    parser.add_argument("--pages", type=at_least_one, default=600, help="page budget of each crawl")
    parser.add_argument("--delay", type=seconds, default=0.02, help="seconds per response")
    parser.add_argument(
        "--count-calls",
        action="store_true",
        help="count the calls to Redis (MONITOR: slower, pages/s not comparable)",
    )
    args = parser.parse_args()
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        say("redis_scaling: error: redis-server is not installed")
        return 2
    graph = load_graph(args.corpus, seed=args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        port = free_port()
        options = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp]
        redis = subprocess.Popen(
            [redis_server, "--port", str(port), *options],
            stdout=subprocess.DEVNULL,
        )
        server = TimedReplayServer(graph, delay=args.delay)
        server.times = []
        server.start()
        try:
            time.sleep(0.5)
            frontier = f"redis://127.0.0.1:{port}/0"
            counter = CallCounter(frontier) if args.count_calls else None
            if counter is not None:
                counter.start()
            rows = [("1, frontier in memory (baseline)", *run(server, 1, None, None, args, work))]
            for processes in (1, 2, 3):
                result = run(server, processes, counter, frontier, args, work)
                rows.append((f"{processes}, Redis frontier", *result))
        finally:
            server.stop()
            redis.terminate()
            redis.wait()
    baseline = rows[0][1] / rows[0][3]
    print(
        f"\n{len(graph)} articles, budget {args.pages}, {args.delay * 1000:.0f} ms per response\n"
    )
    calls = " | Redis calls | of them scripts" if args.count_calls else ""
    print(
        "| processes | pages | fetched twice | seconds | pages/s | vs baseline "
        f"| CPU ms/page{calls} |"
    )
    print("|---|---|---|---|---|---|---|" + "---|---|" * args.count_calls)
    for name, pages, twice, elapsed, cpu, total, scripts in rows:
        rate = pages / elapsed if elapsed else 0.0
        counted = f" | {total} | {scripts}" if args.count_calls else ""
        print(
            f"| {name} | {pages} | {twice} | {elapsed:.1f} | {rate:.1f} | {rate / baseline:.2f}"
            f" | {cpu / pages * 1000:.1f}{counted} |"
        )
    return 0


if __name__ == "__main__":
    exit_on_config_error(main, "python -m benchmarks.redis_scaling")
