"""Near-duplicate pages: a 64-bit SimHash over word shingles, and an index to find close ones.

Source: M. Charikar, "Similarity estimation techniques from rounding algorithms", STOC 2002
(SimHash); G. S. Manku, A. Jain and A. Das Sarma, "Detecting near-duplicates for web
crawling", WWW 2007 (64-bit fingerprints, near-duplicates within 3 bits, found through
exactly-matching blocks of bits).

Each distinct shingle (``SHINGLE`` consecutive tokens of ``focused.text.tokenize``) hashes to
64 bits; bit i of the fingerprint is set when most shingles have bit i set. Pages that share
most shingles get fingerprints a few bits apart: a changed date line moves a handful of the
hundreds of shingles of an article, another article moves nearly all of them.

``SimHashIndex`` cuts a fingerprint into ``BANDS`` blocks of 16 bits. Two fingerprints at most
3 bits apart differ in at most 3 blocks, so they agree on at least one of the 4: a lookup
compares a fingerprint only with those sharing one of its blocks, not with every page.
"""

from __future__ import annotations

from functools import lru_cache
from hashlib import blake2b
from pathlib import Path

import numpy as np

from schedulers.base import connect_crash_safe

SHINGLE = 3  # tokens per shingle
MIN_SHINGLES = 20  # fewer distinct shingles than this: too little text for a fingerprint
BANDS = 4
BAND_BITS = 64 // BANDS
MAX_DISTANCE = BANDS - 1  # the most bits apart the index is sure to find


def simhash(tokens: list[str]) -> int | None:
    """The 64-bit SimHash of a token list, or None when it has too few shingles."""
    count = len(tokens) - SHINGLE + 1
    if count < MIN_SHINGLES:
        return None
    # A shingle's hash combines its tokens' hashes, each rotated by its place: one hash per
    # distinct token (cached) instead of one per shingle, and the rest in numpy.
    hashes = np.fromiter(map(_hash, tokens), dtype=np.uint64, count=len(tokens))
    shingles = np.zeros(count, dtype=np.uint64)
    for place in range(SHINGLE):
        shingles ^= _rotate(hashes[place : place + count], 64 * place // SHINGLE)
    shingles = np.unique(shingles)
    if len(shingles) < MIN_SHINGLES:
        return None
    bits = np.unpackbits(shingles.astype(">u8").view(np.uint8).reshape(-1, 8), axis=1)
    majority = bits.sum(axis=0) * 2 > len(shingles)  # one column per bit, most significant first
    return int.from_bytes(np.packbits(majority).tobytes(), "big")


@lru_cache(maxsize=1 << 17)  # a site's vocabulary repeats from page to page
def _hash(token: str) -> int:
    return int.from_bytes(blake2b(token.encode(), digest_size=8).digest(), "big")


def _rotate(values: np.ndarray, bits: int) -> np.ndarray:
    if not bits:
        return values
    return (values << np.uint64(bits)) | (values >> np.uint64(64 - bits))


def distance(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def bands(fingerprint: int) -> list[tuple[int, int]]:
    mask = (1 << BAND_BITS) - 1
    return [(band, fingerprint >> (band * BAND_BITS) & mask) for band in range(BANDS)]


class SimHashIndex:
    """Fingerprints of the pages stored so far, by band, in SQLite: in memory, or in a file
    under JOBDIR where each page is committed at once, so that a crawl resumed after a pause
    or a ``kill -9`` still knows them (WAL, as the frontier file)."""

    def __init__(self, max_distance: int, path: Path | str = ":memory:") -> None:
        self.max_distance = max_distance
        self._db = connect_crash_safe(path)
        self._db.executescript(
            "CREATE TABLE IF NOT EXISTS bands (band INTEGER, value INTEGER, fingerprint BLOB,"
            " url TEXT);"
            "CREATE INDEX IF NOT EXISTS bands_value ON bands (band, value);"
        )

    def find(self, fingerprint: int) -> str | None:
        """The URL of a page at most ``max_distance`` bits away, or None."""
        for band in bands(fingerprint):
            rows = self._db.execute(
                "SELECT fingerprint, url FROM bands WHERE band = ? AND value = ?", band
            )
            for other, url in rows:
                if distance(fingerprint, int.from_bytes(other, "big")) <= self.max_distance:
                    return url
        return None

    def add(self, fingerprint: int, url: str) -> None:
        blob = fingerprint.to_bytes(8, "big")  # SQLite integers are signed
        rows = ", ".join(["(?, ?, ?, ?)"] * BANDS)  # one statement: all bands or none
        values = [value for band in bands(fingerprint) for value in (*band, blob, url)]
        self._db.execute(f"INSERT INTO bands VALUES {rows}", values)

    def close(self) -> None:
        self._db.close()
