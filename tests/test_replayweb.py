"""The replay web: loading the corpus, rendering pages, serving them, the access log and the CLI.

Everything goes over real HTTP on 127.0.0.1 (port 0), against the shipped sample and a tiny
hand-made graph whose expected HTML is known exactly.
"""

from __future__ import annotations

import io
import re
import signal
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import pytest

from focused.errors import ConfigError
from focused.replayweb import (
    Graph,
    ReplayServer,
    article_body,
    load_graph,
    name_from_path,
    relevant_set,
    title,
    url_for,
)
from tests.conftest import as_from_a_terminal

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "tests" / "data" / "wikisample"
META = SAMPLE / "wikispeedia_paths-and-graph"
BIRDS = "subject.Science.Biology.Birds"
RAILWAY = "subject.Design_and_Technology.Railway_transport"


def rows(path: Path) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.split("\t") for line in lines if line.strip() and not line.startswith("#")]


def get(url: str) -> tuple[int, str, str]:
    """(status, content type, body) of a GET, also for 4xx answers."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode("utf-8")


class Anchors(HTMLParser):
    """A page's anchors, as (href, text, under_see_also, start, end), and its paragraph text.

    start/end locate an in-text anchor in `text`, the paragraphs joined by newlines.
    """

    def __init__(self, page: str) -> None:
        super().__init__()
        self.anchors: list[tuple[str, str, bool, int, int]] = []
        self.text = ""
        self.see_also = False
        self._in_p = False
        self._h2: list[str] | None = None
        self._a: tuple[str, int, list[str]] | None = None
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "p":
            self._in_p = True
            self.text += "\n" if self.text else ""
        elif tag == "a":
            self._a = (dict(attrs)["href"] or "", len(self.text), [])
        elif tag == "h2":
            self._h2 = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "p":
            self._in_p = False
        elif tag == "a" and self._a is not None:
            href, start, parts = self._a
            self.anchors.append((href, "".join(parts), self.see_also, start, len(self.text)))
            self._a = None
        elif tag == "h2" and self._h2 is not None:
            self.see_also = self.see_also or "".join(self._h2) == "See also"
            self._h2 = None

    def handle_data(self, data: str) -> None:
        if self._a is not None:
            self._a[2].append(data)
        if self._h2 is not None:
            self._h2.append(data)
        if self._in_p:
            self.text += data


@pytest.fixture(scope="module")
def graph() -> Graph:
    return load_graph(SAMPLE)


@pytest.fixture
def server(graph: Graph, tmp_path: Path):
    srv = ReplayServer(graph, log_path=tmp_path / "access.log", start_pages=["Albatross"]).start()
    yield srv
    srv.stop()


# A tiny graph with a known rendering. The header block of Page's file carries a leftover
# category fragment ("Fish"), as about a quarter of the corpus files do.
TINY_TEXT = (
    "\nPage\n\nFish\n\n   Birds fly. A JayBird: Bird migration is long; a Bird\n   sings.\n\n"
    "   Rail & <b>Train</b> reach Åland and Cologne (city).\n"
)
TINY = Graph(
    names=["Page", "Bird", "Bird_migration", "Fish", "Rail", "Train", "%C3%85land", "X_%28y%29"],
    links={
        "Page": ["Bird_migration", "Bird", "Fish", "Rail", "Train", "%C3%85land", "X_%28y%29"],
        **{n: [] for n in ["Bird", "Bird_migration", "Fish", "Rail", "Train", "%C3%85land"]},
        "X_%28y%29": ["Page"],
    },
    text={
        "Page": article_body(TINY_TEXT),
        **{n: "   text\n" for n in ["Bird", "Bird_migration", "Fish", "Rail", "Train"]},
        "%C3%85land": "   text\n",
        "X_%28y%29": "",
    },
    categories={"Page": ["subject.Secret.Label"], "Bird": ["subject.Science.Biology.Birds.Owls"]},
)


def test_load_graph_matches_the_files(graph: Graph) -> None:
    names = [r[0] for r in rows(META / "articles.tsv")]
    assert graph.names == names
    assert 250 <= len(graph) <= 350
    links = rows(META / "links.tsv")
    assert sum(len(t) for t in graph.links.values()) == len({(s, t) for s, t in links})
    assert [(s, t) for s in graph.names for t in graph.links[s]] == [(s, t) for s, t in links]
    assert all(t in graph for targets in graph.links.values() for t in targets)
    categories: dict[str, list[str]] = {}
    for name, cat in rows(META / "categories.tsv"):
        categories.setdefault(name, []).append(cat)
    assert graph.categories == categories
    texts = sorted(p.name for p in (SAMPLE / "plaintext_articles").iterdir())
    assert texts == sorted(f"{n}.txt" for n in names)
    assert all(graph.text[n].strip() for n in names)
    # the title line is not part of the body
    assert not graph.text["Albatross"].lstrip().startswith("Albatross\n")


def test_load_graph_from_a_parent_dir_and_a_tarball(graph: Graph, tmp_path: Path) -> None:
    archive = tmp_path / "corpus.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(SAMPLE, arcname="top/wikisample")
    cache = tmp_path / "cache"
    for _ in range(2):  # the second load reuses the unpacked copy
        loaded = load_graph(archive, cache_dir=cache)
        assert loaded.names == graph.names and loaded.links == graph.links
        assert loaded.text == graph.text and loaded.categories == graph.categories
    assert [p.name for p in cache.iterdir()] == [loaded.root.parents[1].name]
    assert load_graph(loaded.root.parents[1]).names == graph.names
    ambiguous = tmp_path / "two"
    for copy in ("a", "b"):
        for sub in ("wikispeedia_paths-and-graph", "plaintext_articles"):
            (ambiguous / copy / sub).mkdir(parents=True)
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tarball")
    for bad in ("missing", "two", "cache/..", "junk.tar.gz"):
        with pytest.raises(ConfigError):
            load_graph(tmp_path / bad, cache_dir=cache)


def test_a_tarball_unpacks_only_its_folders_and_files_inside_the_cache(
    graph: Graph, tmp_path: Path
) -> None:
    """Python 3.11.2 (Debian 12's) has no extraction filter: extractall(filter=) was a
    TypeError there, and without a filter a member ../x is written outside the folder."""
    archive, cache = tmp_path / "corpus.tar.gz", tmp_path / "cache" / "deep"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(SAMPLE, arcname="wikisample")
        for name, kind in (
            ("../../outside.txt", tarfile.REGTYPE),
            ("wikisample/link", tarfile.SYMTYPE),
        ):
            member = tarfile.TarInfo(name)
            member.type, member.linkname = kind, "/etc/hostname"
            tar.addfile(member, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
    loaded = load_graph(archive, cache_dir=cache)
    assert loaded.names == graph.names and loaded.text == graph.text
    assert not (tmp_path / "cache" / "outside.txt").exists()  # ../../ from the unpacking folder
    assert not (loaded.root / "link").exists() and not (loaded.root / "link").is_symlink()


def test_load_graph_keeps_link_order_drops_duplicates_and_unknown_targets(tmp_path: Path) -> None:
    meta, texts = tmp_path / "wikispeedia_paths-and-graph", tmp_path / "plaintext_articles"
    meta.mkdir()
    texts.mkdir()
    (meta / "articles.tsv").write_text("# comment\n\nA\nB\nC\n")
    (meta / "links.tsv").write_text("# c\nA\tC\nA\tB\nA\tC\nA\tGone\nGone\tA\nB\tA\n")
    (meta / "categories.tsv").write_text("A\tsubject.X\nA\tsubject.Y.Z\nGone\tsubject.X\n")
    (texts / "A.txt").write_text("\nA\n\nZ\n\n   Body of A.\n")
    (texts / "B.txt").write_text("\nB\n\n   Body of B.\n")
    g = load_graph(tmp_path)
    assert g.names == ["A", "B", "C"]
    assert g.links == {"A": ["C", "B"], "B": ["A"], "C": []}
    assert g.categories == {"A": ["subject.X", "subject.Y.Z"]}
    assert g.text == {"A": "   Body of A.\n", "B": "   Body of B.\n", "C": ""}


def test_sample_is_reachable_from_the_seed_and_mixes_topics(graph: Graph) -> None:
    seen, frontier = {"Albatross"}, ["Albatross"]
    while frontier:
        frontier = [t for n in frontier for t in graph.links[n] if t not in seen]
        seen.update(frontier)
    assert seen == set(graph.names)
    targets = graph.links["Albatross"]
    birds = relevant_set(graph, BIRDS)
    assert 0 < sum(t in birds for t in targets) < len(targets) / 2


def test_relevant_set(graph: Graph) -> None:
    birds, rail = relevant_set(graph, BIRDS), relevant_set(graph, RAILWAY)
    expected = {n for n, c in rows(META / "categories.tsv") if c == BIRDS}
    assert birds == expected and len(birds) >= 100
    assert len(rail) >= 40 and not birds & rail
    assert relevant_set(graph, "subject.Science.Biology") >= birds
    assert relevant_set(graph, "subject.Science.Bio") == set()
    assert relevant_set(TINY, BIRDS) == {"Bird"}
    assert relevant_set(TINY, "subject.Science.Biology.Bird") == set()


def test_paths() -> None:
    assert url_for("%C3%85land") == "/wiki/%C3%85land"
    assert name_from_path("/wiki/%C3%85land?x=1") == "%C3%85land"
    assert name_from_path("/wiki/") is None and name_from_path("/other/A") is None
    assert title("X_%28y%29") == "X (y)"


def test_tiny_page_renders_anchors_in_text_and_the_rest_under_see_also() -> None:
    with ReplayServer(TINY).start() as srv:
        status, ctype, page = get(srv.base_url_for("Page"))
    assert status == 200 and ctype == "text/html; charset=utf-8"
    body = page.split("<h1>Page</h1>", 1)[1]
    assert body.startswith(
        '\n<p>Birds fly. A JayBird: <a href="/wiki/Bird_migration">Bird migration</a> is long; a '
        '<a href="/wiki/Bird">Bird</a> sings.</p>\n'
        '<p><a href="/wiki/Rail">Rail</a> &amp; &lt;b&gt;<a href="/wiki/Train">Train</a>'
        '&lt;/b&gt; reach <a href="/wiki/%C3%85land">Åland</a> and Cologne (city).</p>\n'
        '<h2>See also</h2><ul><li><a href="/wiki/Fish">Fish</a></li>'
        '<li><a href="/wiki/X_%28y%29">X (y)</a></li></ul>\n<footer>'
    )
    assert page.startswith('<!DOCTYPE html>\n<html lang="en"><head>')
    assert "<title>Page</title>" in page and "<nav>" in page
    assert "Secret" not in page


def test_a_title_inside_a_longer_linked_title_leaves_that_one_to_it() -> None:
    """links.tsv lists targets alphabetically, so "Africa" came before "South_Africa" and took
    the "Africa" of "South Africa": the text said South Africa, yet its link went under See
    also (227 links of the corpus, as on 20th_century and Algiers)."""
    names = ["Page", "Africa", "South_Africa", "Other"]
    graph = Graph(
        names=names,
        links={"Page": ["Africa", "South_Africa"], "Other": ["Africa", "South_Africa"]}
        | {n: [] for n in names[1:3]},
        text={
            "Page": "   Apartheid in South Africa. Trade across Africa.\n",
            "Other": "   Apartheid in South Africa.\n",
        }
        | {n: "   text\n" for n in names[1:3]},
        categories={},
    )
    with ReplayServer(graph).start() as srv:
        pages = {name: get(srv.base_url_for(name))[2] for name in ("Page", "Other")}
    both = pages["Page"].split("<h1>Page</h1>", 1)[1]
    assert both.startswith(
        '\n<p>Apartheid in <a href="/wiki/South_Africa">South Africa</a>. Trade across '
        '<a href="/wiki/Africa">Africa</a>.</p>\n<footer>'
    )
    # the one occurrence is South Africa's; Africa, found only inside it, is the rest
    once = pages["Other"].split("<h1>Other</h1>", 1)[1]
    assert once.startswith(
        '\n<p>Apartheid in <a href="/wiki/South_Africa">South Africa</a>.</p>\n'
        '<h2>See also</h2><ul><li><a href="/wiki/Africa">Africa</a></li></ul>\n<footer>'
    )


def test_sample_page_anchors(graph: Graph, server: ReplayServer) -> None:
    for name in ["Albatross", "Bird", "Rail_transport", "Amtrak"]:
        _, _, page = get(server.base_url_for(name))
        parsed = Anchors(page)
        anchors = parsed.anchors
        # every out-link exactly once, anchor text = the target's title
        assert sorted(a[0] for a in anchors) == sorted(url_for(t) for t in graph.links[name])
        assert all(text == title(name_from_path(href) or "") for href, text, *_ in anchors)
        in_text = [a for a in anchors if not a[2]]
        assert in_text and len(in_text) < len(anchors), name  # some of each on these pages
        assert parsed.text == "\n".join(
            " ".join(p.split()) for p in graph.text[name].split("\n\n") if p.strip()
        )
        spans = [(start, end) for *_, see_also, start, end in anchors if not see_also]
        for href, label, see_also, start, end in anchors:
            # the anchor sits at the first whole-word occurrence not taken by another anchor,
            # and a link goes under See also only when every occurrence is taken
            for m in re.finditer(r"(?<!\w)" + re.escape(label) + r"(?!\w)", parsed.text):
                if not see_also and m.start() >= start:
                    assert m.start() == start and parsed.text[start:end] == label, href
                    break
                assert any(m.start() < e and m.end() > s for s, e in spans if s != start), href
            else:
                assert see_also, href


def test_no_category_in_any_served_page(graph: Graph, server: ReplayServer) -> None:
    def check(name: str) -> None:
        status, _, page = get(server.base_url_for(name))
        assert status == 200
        assert "subject." not in page, name
        for cat in graph.categories.get(name, []):
            assert cat not in page, name

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(check, graph.names))
    assert len(server.fetched) == len(graph)


def test_robots_index_and_404(server: ReplayServer) -> None:
    status, ctype, robots = get(server.url + "/robots.txt")
    assert (status, robots) == (200, "User-agent: *\nDisallow: /private/\n")
    assert ctype.startswith("text/plain")
    status, _, index = get(server.url + "/")
    assert status == 200 and [a[0] for a in Anchors(index).anchors] == ["/wiki/Albatross"]
    for path in ["/wiki/No_such_article", "/private/x", "/wiki/", "/nothing"]:
        status, ctype, _ = get(server.url + path)
        assert status == 404 and ctype == "text/html; charset=utf-8", path


def test_robots_asks_for_the_crawl_delay_given(graph) -> None:
    with ReplayServer(graph, crawl_delay=1.5).start() as server:
        _, _, robots = get(server.url + "/robots.txt")
    assert robots == "User-agent: *\nDisallow: /private/\nCrawl-delay: 1.5\n"


def test_access_log_in_memory_and_file(server: ReplayServer, tmp_path: Path) -> None:
    paths = ["/robots.txt", "/wiki/Albatross", "/wiki/Nope", "/wiki/Bird", "/wiki/Albatross"]
    for path in paths:
        get(server.url + path)
    assert server.fetched == paths
    assert (tmp_path / "access.log").read_text().splitlines() == paths
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: get(f"{server.url}/wiki/Bird?{i}"), range(40)))
    assert len(server.fetched) == len(paths) + 40
    assert (tmp_path / "access.log").read_text().splitlines() == server.fetched


def test_re_encoded_path_and_delay() -> None:
    with ReplayServer(TINY, delay=0.2).start() as srv:
        start = time.monotonic()
        status, _, page = get(srv.url + "/wiki/X_(y)")
        assert time.monotonic() - start >= 0.2
    assert status == 200 and "<h1>X (y)</h1>" in page


def test_server_refuses_a_non_loopback_host() -> None:
    with pytest.raises(ConfigError):
        ReplayServer(TINY, host="0.0.0.0")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "focused.replayweb", *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(
    "args",
    [
        ["--corpus", str(SAMPLE), "--host", "0.0.0.0"],
        ["--corpus", str(SAMPLE), "--host", "192.168.1.1"],
        ["--corpus", "/nonexistent/corpus"],
        ["--corpus", "", "--port", "0"],  # served the test sample, found under the repository
        ["--corpus", str(SAMPLE), "--port", "http"],  # argparse's own checks, one line too
        ["--corpus", str(SAMPLE), "--port", "99999"],  # the socket's traceback, before
        ["--corpus", str(SAMPLE), "--port", "-1"],
        ["--port", "8000"],
        ["--corpus", str(SAMPLE), "--crawl-delay", "-1"],
        ["--corpus", str(SAMPLE), "--crawl-delay", "nan"],  # served as "Crawl-delay: nan"
        ["--corpus", str(SAMPLE), "--delay", "-1"],  # served with no delay
    ],
)
def test_cli_rejects_bad_input_with_one_line(args: list[str]) -> None:
    result = cli(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "error" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def sigint_state(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    return " ".join(line for line in status.splitlines() if line.startswith(("Sig", "Shd")))


def test_cli_serves_until_interrupted(tmp_path: Path) -> None:
    log = tmp_path / "cli.log"
    command = [*as_from_a_terminal("focused.replayweb"), "--corpus", str(SAMPLE), "--port", "0"]
    proc = subprocess.Popen(
        [*command, "--log", str(log)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()
        pattern = r"serving (\d+) articles at (http://127\.0\.0\.1:\d+)/wiki/\.\.\.\n"
        match = re.fullmatch(pattern, line)
        assert match and int(match[1]) == len(rows(META / "articles.tsv"))
        assert get(match[2] + "/wiki/Albatross")[0] == 200
        assert log.read_text() == "/wiki/Albatross\n"
        before = sigint_state(proc.pid)
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(timeout=30) == 0
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still serving 30 s after SIGINT; before it: {before}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
