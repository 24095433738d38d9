"""Near-duplicate pages: SimHash over word shingles, its band index, and a crawl that stores a
near-duplicate once, with duplicate_of."""

from __future__ import annotations

import json
import random
import threading
from hashlib import blake2b
from html import escape

from scrapy.utils.test import get_crawler

from focused import simhash as simhash_module
from focused.dedup import SharedFetched
from focused.distributed import SharedCrawl
from focused.simhash import (
    MAX_DISTANCE,
    MIN_SHINGLES,
    SHINGLE,
    SharedSimHashIndex,
    SimHashIndex,
    distance,
    simhash,
)
from focused.text import tokenize
from tests.conftest import run_crawl
from tests.sites import Reply, Site, html
from tests.test_redis_frontier import redis_server  # noqa: F401 (fixture)

NOVEMBER = "Last updated on 30 November 2026 at 10:14."
DECEMBER = "Last updated on 1 December 2026 at 08:00."


def fingerprint(text: str) -> int | None:
    return simhash(tokenize(text))


def sample_texts(sample_graph) -> list[str]:
    return [sample_graph.text[name] for name in sorted(sample_graph.text)]


def test_a_changed_date_line_is_a_near_duplicate(sample_graph):
    article = sample_graph.text["Albatross"]
    before, after = fingerprint(f"{NOVEMBER}\n{article}"), fingerprint(f"{DECEMBER}\n{article}")
    assert distance(before, after) <= MAX_DISTANCE
    other = fingerprint(f"{NOVEMBER}\n{sample_graph.text['Penguin']}")
    assert distance(before, other) > 10


def test_over_the_sample_date_changes_are_found_and_articles_kept_apart(sample_graph):
    """Measured on every sample article: SimHash at 3 bits misses some changed pages (a
    fingerprint's bits near a tie flip), but never takes two different articles for one."""
    texts = sample_texts(sample_graph)
    changed = [
        distance(fingerprint(f"{NOVEMBER}\n{t}"), fingerprint(f"{DECEMBER}\n{t}")) for t in texts
    ]
    assert sum(d <= MAX_DISTANCE for d in changed) / len(changed) >= 0.8
    prints = [fingerprint(t) for t in texts]
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if texts[i] != texts[j]:  # the sample holds one article twice (Dove, Pigeon)
                assert distance(prints[i], prints[j]) > MAX_DISTANCE


def _simhash_by_shingle(tokens: list[str]) -> int | None:
    """The SimHash as its source defines it: each distinct shingle's hash, then a vote per bit."""
    shingles = {tuple(tokens[i : i + SHINGLE]) for i in range(len(tokens) - SHINGLE + 1)}
    hashes = set()
    for shingle in shingles:
        value = 0
        for place, token in enumerate(shingle):
            digest = int.from_bytes(blake2b(token.encode(), digest_size=8).digest(), "big")
            turn = 64 * place // SHINGLE
            value ^= ((digest << turn) | (digest >> (64 - turn))) & (2**64 - 1)
        hashes.add(value)
    if len(hashes) < MIN_SHINGLES:
        return None
    votes = [sum(value >> bit & 1 for value in hashes) for bit in range(64)]
    return sum(1 << bit for bit, vote in enumerate(votes) if vote * 2 > len(hashes))


def test_fingerprints_are_those_of_the_plain_definition(sample_graph):
    texts = [*sample_texts(sample_graph)[:60], "Bird events: none.", "a b c " * 30, "word " * 40]
    texts += [f"{NOVEMBER}\n{text}" for text in texts[:5]]
    assert sum(fingerprint(text) is None for text in texts) >= 2
    for text in texts:
        assert fingerprint(text) == _simhash_by_shingle(tokenize(text))


def test_the_token_hash_cache_stays_bounded_and_exact(sample_graph, monkeypatch):
    """Emptied when it outgrows its bound, between pages: the fingerprints do not change."""
    monkeypatch.setattr(simhash_module, "_MAX_CACHED_TOKENS", 50)
    monkeypatch.setattr(simhash_module, "_TOKEN_HASHES", simhash_module._TokenHashes())
    for text in sample_texts(sample_graph)[:20]:
        tokens = tokenize(text)
        assert simhash(tokens) == _simhash_by_shingle(tokens)
        assert len(simhash_module._TOKEN_HASHES) <= 50 + len(set(tokens))
    assert len(simhash_module._TOKEN_HASHES) > 0


def test_too_little_text_has_no_fingerprint():
    assert fingerprint("Bird events: none.") is None


def test_the_band_index_finds_exactly_what_a_full_scan_finds():
    rng = random.Random(3)
    stored = [rng.getrandbits(64) for _ in range(2000)]
    index = SimHashIndex(MAX_DISTANCE)
    for i, value in enumerate(stored):
        index.add(value, f"u{i}")
    for _ in range(300):
        base = rng.choice(stored)
        probe = base
        for bit in rng.sample(range(64), rng.randint(0, 5)):
            probe ^= 1 << bit
        expected = {f"u{i}" for i, v in enumerate(stored) if distance(v, probe) <= MAX_DISTANCE}
        found = index.find(probe)
        assert (found is None) == (not expected)
        assert found is None or found in expected


def test_the_index_file_survives_a_kill(tmp_path):
    """Each page is committed when it is added: a process killed without closing the file
    leaves every fingerprint behind for the resumed crawl."""
    path = tmp_path / "nearduplicates.sqlite3"
    index = SimHashIndex(MAX_DISTANCE, path)
    index.add(0xF0F0_0000_FFFF_1234, "http://h/a")
    survivor = SimHashIndex(MAX_DISTANCE, path)  # opened while the first is still open
    assert survivor.find(0xF0F0_0000_FFFF_1234 ^ 0b101) == "http://h/a"
    assert survivor.find(0x0F0F_FFFF_0000_EDCB) is None
    index.close()
    survivor.close()


def test_a_crawl_stores_a_near_duplicate_once_with_duplicate_of(tmp_path, sample_graph):
    pages = {
        "/": ("Birds", '<a href="/a">albatross</a> <a href="/b">albatross again</a>'),
        "/a": ("Albatross", f"<p>{NOVEMBER}</p><p>{escape(sample_graph.text['Albatross'])}</p>"),
        "/b": ("Albatross", f"<p>{DECEMBER}</p><p>{escape(sample_graph.text['Albatross'])}</p>"),
    }
    pages["/"] = ("Birds", pages["/"][1] + ' <a href="/c">penguin</a>')
    pages["/c"] = ("Penguin", f"<p>{escape(sample_graph.text['Penguin'])}</p>")

    def respond(method: str, path: str) -> Reply:
        if path not in pages:
            return Reply(status=404, body="not found")
        return Reply(body=html(*pages[path]))

    feed = tmp_path / "pages.jsonl"
    with Site(respond) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/"},
            {"CONCURRENT_REQUESTS": 1},
            extra=["-O", str(feed)],
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    stored = {page["url"].removeprefix(site.url): page for page in crawl.pages()}
    assert set(stored) == {"/", "/a", "/b", "/c"}
    # -O writes the same records: the duplicate without its text, every page with duplicate_of
    # (its feed record kept the text, and the others had no duplicate_of at all).
    exported = [json.loads(line) for line in feed.read_text().splitlines()]
    assert exported == crawl.pages()
    assert stored["/b"]["duplicate_of"] == f"{site.url}/a"
    assert stored["/b"]["text"] is None  # stored once, with the page it repeats
    assert stored["/a"]["duplicate_of"] is None and stored["/a"]["text"]
    assert stored["/c"]["duplicate_of"] is None
    assert "'focused/duplicates/near': 1" in crawl.result.stderr


def test_a_page_is_tokenized_once_for_its_fingerprint_score_and_training(monkeypatch):
    from scrapy.utils.test import get_crawler

    import focused.dedup
    import focused.relevance
    from focused.dedup import DuplicateMiddleware
    from focused.items import PageItem
    from focused.relevance import RelevanceModel

    calls = []

    def counted(text, language=None):
        calls.append(text)
        return tokenize(text, language)

    monkeypatch.setattr(focused.relevance, "tokenize", counted)
    monkeypatch.setattr(focused.dedup, "tokenize", counted)
    text = " ".join(["Albatrosses are large seabirds that nest on remote islands."] * 10)
    crawler = get_crawler(settings_dict={"NEAR_DUPLICATE_DISTANCE": MAX_DISTANCE})
    crawler.spider = type("Spider", (), {"state": {}, "relevance": RelevanceModel("seabirds")})()
    middleware = DuplicateMiddleware(crawler)
    page = PageItem(url="http://127.0.0.1/wiki/Albatross", text=text, language="en")
    middleware._check_near_duplicate(page, middleware.near_index)
    crawler.spider.relevance.score(text, "en")
    crawler.spider.relevance.observe(text, "en")
    assert calls.count(text) == 1
    # Tokenized for the score, so counted as scoring CPU even though the dedup check asked first.
    assert crawler.stats.get_value("focused/scoring_cpu_ms") > 0


def test_a_noindex_copy_is_a_duplicate_but_never_an_original(sample_graph):
    """A noindex page is stored without text: it stands for no later copy, but a copy of a page
    stored before it is a duplicate as any other, and its links are not followed (they were
    followed, from the stored page, whatever the noindex page's were)."""
    import scrapy
    from scrapy.http import HtmlResponse

    from focused.dedup import DuplicateMiddleware
    from focused.items import PageItem

    crawler = get_crawler(settings_dict={"NEAR_DUPLICATE_DISTANCE": MAX_DISTANCE})
    crawler.spider = type("Spider", (), {"state": {}})()
    middleware = DuplicateMiddleware(crawler)
    text, other = sample_texts(sample_graph)[:2]

    def outputs(path: str, page_text: str, robots: str | None = None) -> list:
        url = f"http://127.0.0.1/{path}"
        page = PageItem(url=url, text=page_text, language="en", robots=robots)
        child = scrapy.Request(f"{url}/child")
        response = HtmlResponse(url, body=b"<html></html>")
        return middleware.process_outputs(response, [page, child])

    assert len(outputs("stored", text)) == 2
    copy, *children = outputs("noindex-copy", f"{text} {DECEMBER}", robots="noindex")
    assert copy["duplicate_of"] == "http://127.0.0.1/stored" and children == []
    # Unlike an indexed page, a noindex one is not in the index: its copies are stored.
    assert len(outputs("noindex", other, robots="noindex")) == 2
    original, *children = outputs("copy-of-noindex", f"{other} {DECEMBER}")
    assert original.get("duplicate_of") is None and len(children) == 1


def test_a_page_fetched_again_at_its_own_url_is_no_duplicate_of_its_canonical():
    """A page fetched at /f and stored under its rel=canonical /c, or dropped below
    STORE_MIN_RELEVANCE, both URLs taken as fetched: a kill -9 before its request's finish
    leaves it in flight, and fetched again it was a duplicate of itself (of /c), scored and
    counted twice. It is skipped as fetched; a page fetched at another URL naming /c is still
    a duplicate of it."""
    import scrapy
    from scrapy.http import HtmlResponse

    from focused.dedup import DuplicateMiddleware
    from focused.items import PageItem

    crawler = get_crawler(settings_dict={"NEAR_DUPLICATE_DISTANCE": -1})
    crawler.spider = type("Spider", (), {"state": {}})()
    middleware = DuplicateMiddleware(crawler)

    def outputs(path: str) -> list:
        response = HtmlResponse(f"http://127.0.0.1/{path}", body=b"<html></html>")
        page = PageItem(url="http://127.0.0.1/c", text="Birds", language="en")
        return middleware.process_outputs(response, [page, scrapy.Request(f"{response.url}/n")])

    first, _ = outputs("f")
    assert first["url"] == "http://127.0.0.1/c" and first.get("duplicate_of") is None
    assert outputs("f") == []
    assert crawler.stats.get_value("focused/skipped/already_fetched") == 1
    assert [page["duplicate_of"] for page in outputs("g")] == ["http://127.0.0.1/c"]


def test_a_page_to_be_stored_under_its_rel_canonical_names_the_url_it_was_fetched_at():
    """Sent before the page reaches the pipelines (``CrawlCounters`` keeps the pair under
    JOBDIR), for a page stored under another URL than it was fetched at only: not for one
    stored under its own, nor for a duplicate, stored under the URL it was fetched at."""
    from scrapy.http import HtmlResponse

    from focused.dedup import DuplicateMiddleware
    from focused.items import PageItem
    from focused.resume import stored_under_canonical

    crawler = get_crawler(settings_dict={"NEAR_DUPLICATE_DISTANCE": -1})
    crawler.spider = type("Spider", (), {"state": {}})()
    middleware = DuplicateMiddleware(crawler)
    sent: list[tuple[str, str]] = []

    def kept(fetched_as: str, url: str) -> None:
        sent.append((fetched_as, url))

    crawler.signals.connect(kept, signal=stored_under_canonical)
    for path, canonical in (("own", "own"), ("f", "c"), ("g", "c")):
        response = HtmlResponse(f"http://127.0.0.1/{path}", body=b"<html></html>")
        page = PageItem(url=f"http://127.0.0.1/{canonical}", text="Birds", language="en")
        middleware.process_outputs(response, [page])
    assert sent == [("http://127.0.0.1/f", "http://127.0.0.1/c")]


# -- a crawl shared by several processes: one index and one set of stored URLs in Redis -------


def shared_crawl(url: str) -> SharedCrawl:
    """The Redis state of one process of crawl ``t``."""
    return SharedCrawl(get_crawler(), url, "t")


def run_together(work, count: int) -> list:
    """``work(i)`` in ``count`` threads started at once; their answers in thread order."""
    answers = [None] * count
    start = threading.Barrier(count)

    def run(i):
        start.wait()
        answers[i] = work(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_the_shared_index_finds_what_a_full_scan_finds_across_processes(redis_server):  # noqa: F811
    rng = random.Random(4)
    one, two = (SharedSimHashIndex(MAX_DISTANCE, shared_crawl(redis_server.url)) for _ in "12")
    stored = {f"u{i}": rng.getrandbits(64) for i in range(500)}
    for i, (url, value) in enumerate(stored.items()):
        assert (one if i % 2 else two).find_or_add(value, url) is None
    for i in range(300):
        probe = rng.choice(list(stored.values()))
        for bit in rng.sample(range(64), rng.randint(0, 5)):
            probe ^= 1 << bit
        expected = {url for url, v in stored.items() if distance(v, probe) <= MAX_DISTANCE}
        found = (one if i % 2 else two).find_or_add(probe, f"p{i}")
        assert (found is None) == (not expected)
        if found is None:
            stored[f"p{i}"] = probe  # added, for every process
        else:
            assert found in expected


def test_the_shared_index_finds_without_adding_when_asked(redis_server):  # noqa: F811
    index = SharedSimHashIndex(MAX_DISTANCE, shared_crawl(redis_server.url))
    assert index.find_or_add(0xF0F0_0000_FFFF_1234, "http://h/noindex", add=False) is None
    assert index.find_or_add(0xF0F0_0000_FFFF_1234 ^ 0b1, "http://h/a") is None  # not there
    assert index.find_or_add(0xF0F0_0000_FFFF_1234, "http://h/b", add=False) == "http://h/a"


def test_near_duplicates_added_at_once_by_many_processes_are_stored_once(redis_server):  # noqa: F811
    indexes = [SharedSimHashIndex(MAX_DISTANCE, shared_crawl(redis_server.url)) for _ in range(6)]
    for round_ in range(20):
        base = random.Random(round_).getrandbits(64)
        # Six versions of one page, a bit or two apart from each other, in six processes.
        versions = [base ^ (1 << (i * 9 % 64)) for i in range(6)]
        answers = run_together(
            lambda i, v=versions, r=round_: indexes[i].find_or_add(v[i], f"r{r}/{i}"), 6
        )
        stored = [i for i, original in enumerate(answers) if original is None]
        assert len(stored) == 1, answers
        assert set(answers) == {None, f"r{round_}/{stored[0]}"}


def test_a_url_is_claimed_once_across_processes(redis_server):  # noqa: F811
    processes = [SharedFetched(shared_crawl(redis_server.url)) for _ in range(6)]
    for round_ in range(20):
        canonical = f"http://h/c{round_}"
        taken = run_together(lambda i, c=canonical: processes[i].claim(c, f"{c}?from={i}"), 6)
        assert taken.count(False) == 1  # one page stored under it, five duplicates of it
    one, two = processes[:2]
    assert not one.claim("http://h/a", "http://h/x")  # /x stored under its canonical /a
    assert two.claim("http://h/a", "http://h/a")  # so /a itself is stored already
    assert not two.claim("http://h/a", "http://h/x")  # /x again: not a copy of itself
    assert two.taken(["http://h/a", "http://h/x", "http://h/new"]) == [True, True, False]
