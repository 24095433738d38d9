"""Vectors the sentence encoder computed, kept across crawls (setting ENCODER_STORE_SIZE).

The encoder is most of the default strategy's scoring CPU, and a text's vector does not depend
on the crawl: an anchor found again by the next crawl of the same sites, for the same topic or
another, need not go through the model again. ``EncodingStore`` keeps the vectors of the texts
a crawl encoded (whole anchors and the words outside the model's vocabulary) in a SQLite file in
``ENCODER_STORE_DIR`` (by default beside the ONNX export), one file per model (named after what
the model computes, as the vocabulary table is), and ``EncodingStore.wrap`` puts it in front of
an encode function: texts found in the store are read, only the others are encoded, in one
batch, and are stored.

- Vectors are stored as float16 (768 bytes a text): the unit vectors lose about 1e-3 of each
  cosine, a tenth of what the int8 model itself moves a score with its batch-mates.
- New vectors are written in batches (``FLUSH_EVERY``) and when the crawl closes; a crawl killed
  before that loses only what it would have stored.
- The store keeps the ``max_texts`` most recently used texts: when a crawl closes, the texts it
  read count as new again, and the oldest beyond ``max_texts`` are deleted.
- Crawls running side by side share the file: SQLite's write-ahead log lets them read while one
  writes, and a text two crawls add at once is stored once. A vector of another type or size
  (the file damaged) is read as missing: its text is encoded again, and the row replaced.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from schedulers.base import connect_crash_safe

logger = logging.getLogger(__name__)

# Encodes texts into unit vectors (one row each).
Encode = Callable[[Sequence[str]], np.ndarray]

FLUSH_EVERY = 256  # new vectors held in memory before they are written
_LOOKUP_CHUNK = 500  # texts per SELECT, below SQLite's limit on bound parameters
_BUSY_TIMEOUT_MS = 30_000  # to wait for another crawl's write


class EncodingStore:
    """A SQLite table ``vectors(text, vector)`` of unit vectors. ``hits`` counts the texts read
    from it, ``added`` those encoded and added."""

    def __init__(self, path: Path, max_texts: int, dimensions: int) -> None:
        self.path = path
        self.max_texts = max_texts
        self.dimensions = dimensions
        self.hits = 0
        self.added = 0
        self._pending: dict[str, bytes] = {}
        self._read: set[str] = set()  # texts this crawl read from the file
        self._failed = False
        path.parent.mkdir(parents=True, exist_ok=True)
        # The frontier's settings (WAL, no fsync per commit): a lost write costs an encoding at
        # the next crawl, not data.
        self._db = connect_crash_safe(path)
        self._db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (text TEXT PRIMARY KEY, vector BLOB NOT NULL)"
        )

    def wrap(self, encode: Encode) -> Encode:
        """``encode`` with this store in front of it. Should the file fail during the crawl (a
        full disk, a lock held too long), one warning, and ``encode`` alone from then on."""

        def stored_encode(texts: Sequence[str]) -> np.ndarray:
            if self._failed:
                return encode(texts)
            try:
                known = self._lookup(texts)
            except sqlite3.Error as exc:
                self._fail(exc)
                return encode(texts)
            missing = [i for i, text in enumerate(texts) if text not in known]
            self.hits += len(texts) - len(missing)
            vectors = np.empty((len(texts), self.dimensions), dtype=np.float32)
            for i, text in enumerate(texts):
                if text in known:
                    vectors[i] = known[text]
            if missing:
                self.added += len(missing)
                encoded = encode([texts[i] for i in missing])
                vectors[missing] = encoded
                for i, vector in zip(missing, encoded, strict=True):
                    self._pending[texts[i]] = vector.astype(np.float16).tobytes()
                if len(self._pending) >= FLUSH_EVERY:
                    try:
                        self.flush()
                    except sqlite3.Error as exc:
                        self._fail(exc)
            return vectors

        return stored_encode

    def _fail(self, exc: sqlite3.Error) -> None:
        logger.warning(
            "The encoder's vectors cannot be kept in %s (%s): this crawl encodes without them",
            self.path,
            exc,
        )
        self._failed = True
        self._pending.clear()

    def _lookup(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        found = {text: self._pending[text] for text in texts if text in self._pending}
        wanted = list(dict.fromkeys(text for text in texts if text not in found))
        # A vector of another size or type (the file damaged, or written by another program)
        # failed the spider's opening with a traceback: read as missing, it is encoded again.
        size = 2 * self.dimensions  # float16
        for chunk in _chunks(wanted):
            marks = ",".join("?" * len(chunk))
            read = dict(
                self._db.execute(
                    f"SELECT text, vector FROM vectors WHERE text IN ({marks})"
                    " AND typeof(vector) = 'blob' AND length(vector) = ?",
                    (*chunk, size),
                )
            )
            self._read.update(read)
            found.update(read)
        return {text: np.frombuffer(blob, dtype=np.float16) for text, blob in found.items()}

    def flush(self) -> None:
        """Write the vectors added since the last flush, in one transaction. A text is pending
        only where the file had no whole vector of it: a damaged row (``_lookup``) is replaced,
        where kept it was encoded again at every crawl; one another crawl stored meanwhile gets
        the same vector."""
        if not self._pending:
            return
        with self._db:
            self._db.execute("BEGIN")
            # REPLACE: a row of the text is one _lookup could not read (damaged), which IGNORE
            # kept, to be encoded again by every crawl; else another crawl's, of one vector.
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (text, vector) VALUES (?, ?)", self._pending.items()
            )
        self._pending.clear()

    def close(self) -> None:
        """Flush, make the texts read the newest, keep only the ``max_texts`` newest, close."""
        try:
            if not self._failed:
                self.flush()
                with self._db:
                    self._db.execute("BEGIN")
                    for chunk in _chunks(list(self._read)):
                        # REPLACE deletes the row and inserts it again, with the newest rowid.
                        marks = ",".join("?" * len(chunk))
                        self._db.execute(
                            "INSERT OR REPLACE INTO vectors (text, vector) SELECT text, vector "
                            f"FROM vectors WHERE text IN ({marks}) ORDER BY rowid",
                            chunk,
                        )
                    self._db.execute(
                        "DELETE FROM vectors WHERE rowid <= "
                        "(SELECT rowid FROM vectors ORDER BY rowid DESC LIMIT 1 OFFSET ?)",
                        (self.max_texts,),
                    )
        except sqlite3.Error as exc:
            self._fail(exc)
        finally:
            self._db.close()


def _chunks(texts: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(texts), _LOOKUP_CHUNK):
        yield texts[start : start + _LOOKUP_CHUNK]
