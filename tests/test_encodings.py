"""The store of encoder vectors kept across crawls (focused.encodings), with a stand-in model."""

from __future__ import annotations

import logging
import sqlite3

import numpy as np

from focused.encoder import open_store
from focused.encodings import FLUSH_EVERY, EncodingStore

DIMENSIONS = 8


class CountingModel:
    """A deterministic encode function that records every text it is given."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, texts):
        self.seen.extend(texts)
        rows = [
            np.random.default_rng(abs(hash(text)) % 2**32).normal(size=DIMENSIONS) for text in texts
        ]
        rows = np.array(rows, dtype=np.float32).reshape(len(texts), DIMENSIONS)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_text_is_encoded_once_across_crawls(tmp_path) -> None:
    path = tmp_path / "texts.sqlite3"
    model = CountingModel()
    first = EncodingStore(path, 1000, DIMENSIONS)
    vectors = first.wrap(model)(["Albatross", "Petrel", "Albatross"[::-1]])
    assert model.seen == ["Albatross", "Petrel", "ssortablA"]
    assert (first.hits, first.added) == (0, 3)
    first.close()

    model.seen.clear()
    second = EncodingStore(path, 1000, DIMENSIONS)
    again = second.wrap(model)(["Petrel", "Gull", "Albatross"])
    assert model.seen == ["Gull"]  # only the new text reaches the model, in one batch
    assert (second.hits, second.added) == (2, 1)
    # float16 on disk: each unit vector comes back within about 1e-3
    np.testing.assert_allclose(again[[2, 0]], vectors[[0, 1]], atol=2e-3)
    np.testing.assert_allclose(again[1], model(["Gull"])[0])
    second.close()


def test_vectors_are_written_in_batches_and_read_before_they_are(tmp_path) -> None:
    path = tmp_path / "texts.sqlite3"
    model = CountingModel()
    store = EncodingStore(path, 10_000, DIMENSIONS)
    encode = store.wrap(model)
    encode([f"anchor {i}" for i in range(FLUSH_EVERY - 1)])
    with sqlite3.connect(path) as reader:
        assert reader.execute("SELECT count(*) FROM vectors").fetchone() == (0,)
        encode(["anchor 0", "one more"])  # the pending batch answers too; now it is full
        assert model.seen.count("anchor 0") == 1
        assert reader.execute("SELECT count(*) FROM vectors").fetchone() == (FLUSH_EVERY,)
    store.close()


def test_the_store_keeps_the_most_recently_used_texts(tmp_path) -> None:
    path = tmp_path / "texts.sqlite3"
    model = CountingModel()
    for batch in (["a", "b", "c"], ["d", "e"], ["b", "f"]):  # the third crawl reads b again
        store = EncodingStore(path, 4, DIMENSIONS)
        store.wrap(model)(batch)
        store.close()
    with sqlite3.connect(path) as reader:
        kept = [text for (text,) in reader.execute("SELECT text FROM vectors ORDER BY rowid")]
        (vector,) = reader.execute("SELECT vector FROM vectors WHERE text = 'b'").fetchone()
    assert kept == ["d", "e", "f", "b"]  # a and c, the least recently used, are gone
    np.testing.assert_allclose(np.frombuffer(vector, np.float16), model(["b"])[0], atol=2e-3)


def test_crawls_side_by_side_keep_both_their_texts(tmp_path) -> None:
    path = tmp_path / "texts.sqlite3"
    model = CountingModel()
    one, other = EncodingStore(path, 100, DIMENSIONS), EncodingStore(path, 100, DIMENSIONS)
    one.wrap(model)(["shared", "mine"])
    other.wrap(model)(["shared", "yours"])
    one.close()
    other.close()
    with sqlite3.connect(path) as reader:
        kept = sorted(text for (text,) in reader.execute("SELECT text FROM vectors"))
    assert kept == ["mine", "shared", "yours"]


def test_a_store_that_fails_mid_crawl_warns_once_and_encodes_on(tmp_path, caplog) -> None:
    model = CountingModel()
    store = EncodingStore(tmp_path / "texts.sqlite3", 100, DIMENSIONS)
    encode = store.wrap(model)
    store._db.close()  # as a vanished file or a broken disk would leave it
    with caplog.at_level(logging.WARNING, logger="focused.encodings"):
        first = encode(["Albatross"])
        second = encode(["Petrel"])
        store.close()
    np.testing.assert_allclose(np.vstack([first, second]), model(["Albatross", "Petrel"]))
    assert len(caplog.records) == 1
    assert "this crawl encodes without them" in caplog.records[0].getMessage()


def test_a_damaged_store_file_is_ignored_with_one_warning(tmp_path, caplog) -> None:
    model = CountingModel()
    with caplog.at_level(logging.WARNING, logger="focused.encoder"):
        store = open_store(model, tmp_path, 100)
        store.close()
        (damaged,) = tmp_path.glob("texts-*.sqlite3")
        damaged.write_bytes(b"not a database" * 100)
        assert open_store(model, tmp_path, 100) is None
        assert open_store(model, tmp_path, 0) is None  # off: not even opened
    assert [record.getMessage()[:40] for record in caplog.records] == [
        "The encoder's vectors cannot be kept in "
    ]


def test_a_damaged_vector_is_encoded_again(tmp_path) -> None:
    """A vector stored as text, or of another size: a traceback as the spider opened."""
    path = tmp_path / "texts.sqlite3"
    model = CountingModel()
    first = EncodingStore(path, 1000, DIMENSIONS)
    vectors = first.wrap(model)(["Albatross", "Petrel", "Gull"])
    first.close()
    with sqlite3.connect(path) as database:
        database.execute("UPDATE vectors SET vector = 'abc' WHERE text = 'Albatross'")
        database.execute("UPDATE vectors SET vector = x'0011' WHERE text = 'Petrel'")
    database.close()
    model.seen.clear()
    second = EncodingStore(path, 1000, DIMENSIONS)
    again = second.wrap(model)(["Albatross", "Petrel", "Gull"])
    assert model.seen == ["Albatross", "Petrel"]
    np.testing.assert_allclose(again, vectors, atol=2e-3)
    second.close()
    # Kept in their place: the damaged rows stayed, and every crawl encoded them again.
    model.seen.clear()
    third = EncodingStore(path, 1000, DIMENSIONS)
    np.testing.assert_allclose(third.wrap(model)(["Albatross", "Petrel"]), vectors[:2], atol=2e-3)
    assert model.seen == []
    third.close()
