"""The replay web: a recorded, labelled link graph served as HTML on loopback.

Crawl strategies can only be compared fairly on the same web, and harvest rates can only be
measured when every page has a known topic. This module serves a graph in the Wikispeedia format
(articles, links, plain text, editor-assigned categories) as a small website, so a crawl runs
offline, repeatably, and is scored afterwards against the categories. The categories are ground
truth only: they are never rendered into a page, so a crawler cannot read its own answer key.

    python -m focused.replayweb --corpus tests/data/wikisample --port 8000
"""

from __future__ import annotations

import functools
import html
import ipaddress
import os
import re
import shutil
import socket
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO
from urllib.parse import unquote, urlsplit

from focused.errors import CommandLineParser, ConfigError, cut, port, quoted, say, seconds

GRAPH_DIR = "wikispeedia_paths-and-graph"
TEXT_DIR = "plaintext_articles"
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "focused" / "replayweb"
WIKI_PREFIX = "/wiki/"
ROBOTS_TXT = "User-agent: *\nDisallow: /private/\n"

# Boilerplate shared by every page, like a real site's chrome: extraction must cope with it.
NAV = "<nav>Wikipedia for Schools — navigation · Main page · Subjects · About · Help</nav>"
FOOTER = (
    "<footer>Text from the 2007 Wikipedia Selection for Schools (Wikispeedia, Stanford SNAP), "
    "CC BY-SA 3.0 / GFDL. Replayed offline by focused.</footer>"
)


@dataclass
class Graph:
    """Articles in articles.tsv order, their out-links, body text and (ground-truth) categories."""

    names: list[str]
    links: dict[str, list[str]]
    text: dict[str, str]
    categories: dict[str, list[str]]
    root: Path | None = None

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.links


def title(name: str) -> str:
    """The human title of an article: its URL-decoded NAME with underscores as spaces."""
    return unquote(name).replace("_", " ")


def url_for(name: str) -> str:
    """The path of an article. NAME is already URL-encoded in the corpus, so it is kept as is."""
    return WIKI_PREFIX + name


def name_from_path(path: str) -> str | None:
    """The NAME segment of an article path (query and fragment ignored), or None."""
    path = urlsplit(path).path
    if not path.startswith(WIKI_PREFIX):
        return None
    name = path[len(WIKI_PREFIX) :]
    return name if name and "/" not in name else None


def relevant_set(graph: Graph, category: str) -> set[str]:
    """Articles labelled with `category` or a category below it (prefix match on a dot)."""
    below = category + "."
    return {
        name
        for name, cats in graph.categories.items()
        if any(c == category or c.startswith(below) for c in cats)
    }


# --- loading -------------------------------------------------------------------------------------


def _rows(path: Path) -> Iterator[list[str]]:
    """Tab-separated rows of a Wikispeedia .tsv file, without comments and blank lines."""
    with path.open(encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.strip() and not line.startswith("#"):
                yield line.split("\t")


def article_body(raw: str) -> str:
    """The article text without its header block.

    Body lines in the plain-text files are indented; the unindented lines before the first
    indented one are the title and, in about a quarter of the files, the leftover tail of the
    removed "Related subjects: ..." line, which names the category (e.g. "Fish"). Dropping the
    whole header keeps the answer key out of the served page.
    """
    lines = raw.split("\n")
    for i, line in enumerate(lines):
        if line.startswith((" ", "\t")) and line.strip():
            return "\n".join(lines[i:]).rstrip() + "\n"
    return ""


def _find_root(path: Path) -> Path:
    """The directory holding both corpus folders: `path` itself or the only one up to 3 below."""
    if (path / GRAPH_DIR).is_dir() and (path / TEXT_DIR).is_dir():
        return path
    found = [
        d.parent
        for pattern in ("*/", "*/*/", "*/*/*/")
        for d in path.glob(pattern + GRAPH_DIR)
        if d.is_dir() and (d.parent / TEXT_DIR).is_dir()
    ]
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise ConfigError(
            f"{cut(str(path))}: {what} Wikispeedia corpus found ({GRAPH_DIR}/ and {TEXT_DIR}/)"
        )
    return found[0]


# Python 3.11.4 and later also check what they unpack ("data" filter); Debian 12's Python 3.11.2
# has no filters, and extractall would write a member named ../x or /x outside the folder.
_DATA_FILTER = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


def _plain_members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """The folders and regular files of ``tar`` that unpack inside its destination: a corpus has
    nothing else, and links or a path leaving the folder are skipped on every Python."""
    for member in tar:
        path = Path(member.name)
        if (
            (member.isfile() or member.isdir())
            and not path.is_absolute()
            and ".." not in path.parts
        ):
            yield member


def _extract(archive: Path, cache_dir: Path) -> Path:
    """Unpack a tarball once into the cache, keyed by name, size and mtime; return the dir.

    Unpacking goes to a temporary dir renamed into place, so a concurrent or interrupted run never
    sees a half-written cache entry.
    """
    st = archive.stat()
    dest = cache_dir / f"{archive.name}-{st.st_size}-{st.st_mtime_ns}"
    if dest.is_dir():
        return dest
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=cache_dir))
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, members=_plain_members(tar), **_DATA_FILTER)
        os.rename(tmp, dest)
    except (OSError, tarfile.TarError) as exc:
        if not dest.is_dir():  # else another process unpacked it first: use theirs
            raise ConfigError(f"{cut(str(archive))}: cannot unpack ({exc})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def load_graph(
    path: str | os.PathLike[str], cache_dir: Path | None = None, *, seed: str | None = None
) -> Graph:
    """Load a Wikispeedia-format corpus from a directory or a .tar.xz / .tar.gz file.

    Links are kept in links.tsv order, deduplicated, and only between known articles, so every
    anchor on a served page leads to a page that exists. Raises ConfigError on a bad path, and
    on a ``seed`` (the article a crawl of it starts from) that is no article of it.
    """
    if not str(path).strip():
        # Path("") is the working directory: the replay web served whichever corpus lay up to
        # 3 folders below it (the repository's test sample), as if it had been asked for.
        raise ConfigError(f"{quoted(str(path))}: no such corpus directory or .tar.xz/.tar.gz file")
    path = Path(path).expanduser()
    if path.is_file() and path.name.endswith((".tar.xz", ".tar.gz", ".tgz", ".txz")):
        path = _extract(path, cache_dir or DEFAULT_CACHE_DIR)
    elif not path.is_dir():
        raise ConfigError(f"{cut(str(path))}: no such corpus directory or .tar.xz/.tar.gz file")
    root = _find_root(path)
    meta = root / GRAPH_DIR
    try:
        names = list(dict.fromkeys(row[0] for row in _rows(meta / "articles.tsv")))
        known = set(names)
        links: dict[str, list[str]] = {name: [] for name in names}
        for row in _rows(meta / "links.tsv"):
            if len(row) >= 2 and row[0] in known and row[1] in known:
                links[row[0]].append(row[1])
        categories: dict[str, list[str]] = {}
        if (meta / "categories.tsv").is_file():
            for row in _rows(meta / "categories.tsv"):
                if len(row) >= 2 and row[0] in known:
                    categories.setdefault(row[0], []).append(row[1])
        text = {}
        for name in names:
            file = root / TEXT_DIR / f"{name}.txt"
            text[name] = article_body(file.read_text(encoding="utf-8")) if file.is_file() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{cut(str(root))}: cannot read corpus ({exc})") from None
    if seed is not None and seed not in known:
        raise ConfigError(f"unknown seed article {quoted(seed)}")
    links = {name: list(dict.fromkeys(targets)) for name, targets in links.items()}
    return Graph(names=names, links=links, text=text, categories=categories, root=root)


# --- rendering -----------------------------------------------------------------------------------


def _page(heading: str, body: str) -> str:
    t = html.escape(heading)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{t}</title></head>'
        f"<body>\n{NAV}\n<h1>{t}</h1>\n{body}\n{FOOTER}\n</body></html>\n"
    )


def _anchor(name: str, text: str) -> str:
    return f'<a href="{html.escape(url_for(name))}">{html.escape(text)}</a>'


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _free_occurrence(text: str, label: str, taken: list[tuple[int, int, str]]) -> int:
    """Offset of the first whole-word, case-sensitive `label` in `text` clear of `taken`, or -1.

    A plain str.find loop: a regex with a leading look-behind scans every position and made
    rendering ten times slower on the full corpus.
    """
    start = text.find(label) if label else -1
    while start >= 0:
        end = start + len(label)
        if (
            (start == 0 or not _is_word_char(text[start - 1]))
            and (end == len(text) or not _is_word_char(text[end]))
            and all(end <= s or start >= e for s, e, _ in taken)
        ):
            return start
        start = text.find(label, start + 1)
    return -1


def render_article(graph: Graph, name: str) -> str:
    """One article as HTML: anchors where the target's title first occurs, the rest in See also.

    Paragraphs are blank-line separated with their line wrapping undone, so a title broken across
    two lines of the plain text is still found. Longer titles are placed first: in links.tsv's
    alphabetical order "Africa" took the "Africa" of "South Africa", whose link then went under
    See also although the text names it.
    """
    paragraphs = re.split(r"\n\s*\n", graph.text[name])
    text = "\n".join(" ".join(p.split()) for p in paragraphs if p.strip())
    placed: list[tuple[int, int, str]] = []
    for target in sorted(graph.links[name], key=lambda target: -len(title(target))):
        label = title(target)
        start = _free_occurrence(text, label, placed)
        if start >= 0:
            placed.append((start, start + len(label), target))
    in_text = {target for _, _, target in placed}
    see_also = [target for target in graph.links[name] if target not in in_text]
    out, pos = [], 0
    for start, end, target in sorted(placed):
        out += [html.escape(text[pos:start]), _anchor(target, text[start:end])]
        pos = end
    out.append(html.escape(text[pos:]))
    parts = [f"<p>{para}</p>" for para in "".join(out).split("\n") if para]
    if see_also:
        items = "".join(f"<li>{_anchor(t, title(t))}</li>" for t in see_also)
        parts.append(f"<h2>See also</h2><ul>{items}</ul>")
    return _page(title(name), "\n".join(parts))


def render_index(start_pages: Sequence[str]) -> str:
    """The front page: links to the start articles, so a crawl can also begin at `/`."""
    items = "".join(f"<li>{_anchor(n, title(n))}</li>" for n in start_pages)
    return _page("Replay web", f"<ul>{items}</ul>" if items else "<p>No start pages.</p>")


# --- serving -------------------------------------------------------------------------------------


def check_loopback(host: str) -> str:
    """Return `host` if it is a loopback address, else raise ConfigError: never serve outward."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        pass
    raise ConfigError(f"host {quoted(host)} is not a loopback address (127.0.0.0/8 or ::1)")


class _Handler(BaseHTTPRequestHandler):
    server: ReplayServer

    def do_GET(self) -> None:
        self.server.record(self.path)
        self._respond(body=True)

    def do_HEAD(self) -> None:
        self._respond(body=False)

    def _respond(self, body: bool) -> None:
        if self.server.delay > 0:
            time.sleep(self.server.delay)
        status, ctype, payload = self.server.respond(self.path)
        data = payload.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Silenced: the access log is `ReplayServer.fetched` / `log_path`, not stderr."""


class ReplayServer(ThreadingHTTPServer):
    """A threaded loopback HTTP server for a Graph, with an access log for evaluation."""

    daemon_threads = True
    # socketserver's default backlog of 5 drops SYNs under a crawler's concurrency, and each drop
    # costs a 1 s retransmit: 40 parallel fetches took 1 s instead of 0.1 s.
    request_queue_size = 128

    def __init__(
        self,
        graph: Graph,
        host: str = "127.0.0.1",
        port: int = 0,
        delay: float = 0.0,
        log_path: str | os.PathLike[str] | None = None,
        start_pages: Sequence[str] = (),
        crawl_delay: float = 0.0,
    ) -> None:
        host = check_loopback(host)
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.graph = graph
        self.delay = delay
        self.start_pages = list(start_pages)
        # A polite crawler then fetches this host at most once every crawl_delay seconds.
        self.robots_txt = ROBOTS_TXT + (f"Crawl-delay: {crawl_delay:g}\n" if crawl_delay else "")
        self.fetched: list[str] = []
        self._lock = threading.Lock()
        # Lazy: rendering the full corpus (4,598 articles) up front takes seconds. Bounded: a full
        # crawl would otherwise keep every page (~150 MB) although each is usually fetched once.
        self._render = functools.lru_cache(maxsize=2048)(functools.partial(render_article, graph))
        # Crawlers may re-encode a path (e.g. %28 as "("); the decoded form finds the article too.
        self._decoded = {unquote(n): n for n in graph.names}
        self._thread: threading.Thread | None = None
        self._log: IO[str] | None = None
        super().__init__((host, port), _Handler)
        if log_path is not None:
            try:
                self._log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 (closed in stop)
            except OSError:
                self.server_close()
                raise

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:8000 (no trailing slash)."""
        host, port = self.server_address[:2]
        return f"http://[{host}]:{port}" if ":" in str(host) else f"http://{host}:{port}"

    def base_url_for(self, name: str) -> str:
        """Absolute URL of an article."""
        return self.url + url_for(name)

    def start(self) -> ReplayServer:
        """Serve in a daemon thread; returns self so `ReplayServer(g).start()` reads well.

        The short poll interval makes stop() quick (the default 0.5 s adds up over many tests).
        """
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, name="replayweb", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and the log file."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
            self._thread = None
        self.server_close()
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def record(self, path: str) -> None:
        """Append a GET to the access log; the file is flushed per line for other processes."""
        with self._lock:
            self.fetched.append(path)
            if self._log is not None:
                self._log.write(path + "\n")
                self._log.flush()

    def respond(self, path: str) -> tuple[int, str, str]:
        """(status, content type, body) for a request path."""
        html_type = "text/html; charset=utf-8"
        plain = urlsplit(path).path
        if plain == "/robots.txt":
            return 200, "text/plain; charset=utf-8", self.robots_txt
        if plain == "/":
            return 200, html_type, render_index(self.start_pages)
        name = name_from_path(plain)
        if name is not None and name not in self.graph:
            name = self._decoded.get(unquote(name))
        if name is None:
            return 404, html_type, _page("Not found", "<p>No such page.</p>")
        return 200, html_type, self._render(name)


# --- command line --------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a corpus until Ctrl-C. Bad input ends with one line on stderr and exit status 2."""
    parser = CommandLineParser(
        prog="python -m focused.replayweb", description="Serve a Wikispeedia-format graph as HTML."
    )
    parser.add_argument("--corpus", required=True, help="corpus directory or .tar.xz/.tar.gz")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address (default 127.0.0.1)")
    parser.add_argument("--port", type=port, default=8000, help="port (default 8000; 0 = any)")
    parser.add_argument("--log", help="append each fetched path to this file, one per line")
    parser.add_argument(
        "--delay", type=seconds, default=0.0, help="seconds of latency per response"
    )
    parser.add_argument("--start", action="append", default=[], help="article linked from /")
    parser.add_argument(
        "--crawl-delay", type=seconds, default=0.0, help="Crawl-delay asked by robots.txt, seconds"
    )
    args = parser.parse_args(argv)
    try:
        check_loopback(args.host)
        graph = load_graph(args.corpus)
        unknown = [n for n in args.start if n not in graph]
        if unknown:
            raise ConfigError(f"unknown start article {quoted(unknown[0])}")
        server = ReplayServer(
            graph, args.host, args.port, args.delay, args.log, args.start, args.crawl_delay
        )
    except ConfigError as exc:
        say(f"replayweb: error: {exc}")
        return 2
    except OSError as exc:  # port in use, unwritable log file
        say(f"replayweb: error: {exc}")
        return 2
    print(f"serving {len(graph)} articles at {server.url}{WIKI_PREFIX}...", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
