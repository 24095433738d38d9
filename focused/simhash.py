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
``SharedSimHashIndex`` is the same index in Redis, for a crawl shared by several processes.
"""

from __future__ import annotations

from hashlib import blake2b
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from schedulers.base import connect_crash_safe

if TYPE_CHECKING:
    from focused.distributed import SharedCrawl
    from focused.jobdir import JobdirWrites

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
    if len(_TOKEN_HASHES) > _MAX_CACHED_TOKENS:
        _TOKEN_HASHES.clear()
    hashes = np.array(list(map(_TOKEN_HASHES.__getitem__, tokens)), dtype=np.uint64)
    shingles = np.zeros(count, dtype=np.uint64)
    for place in range(SHINGLE):
        shingles ^= _rotate(hashes[place : place + count], 64 * place // SHINGLE)
    # The distinct shingles: sorted and compared with their neighbours, ten times faster than
    # np.unique's hash table on a page's few thousand.
    shingles.sort()
    shingles = shingles[np.concatenate(([True], shingles[1:] != shingles[:-1]))]
    if len(shingles) < MIN_SHINGLES:
        return None
    bits = np.unpackbits(shingles.astype(">u8").view(np.uint8).reshape(-1, 8), axis=1)
    # One column per bit, most significant first; int32 counts sum faster than uint8's default
    # of uint64, and a page has far fewer than 2**31 shingles.
    majority = bits.sum(axis=0, dtype=np.int32) * 2 > len(shingles)
    return int.from_bytes(np.packbits(majority).tobytes(), "big")


def _hash(token: str) -> int:
    return int.from_bytes(blake2b(token.encode(), digest_size=8).digest(), "big")


class _TokenHashes(dict[str, int]):
    """Each token's hash, computed on its first lookup. A dict rather than ``lru_cache``: a hit
    is a plain dict lookup in C, without the LRU bookkeeping that cost more than the lookup
    (0.5 against 0.28 ms for a page of 2,400 tokens); the bound is kept by emptying it."""

    def __missing__(self, token: str) -> int:
        value = self[token] = _hash(token)
        return value


_TOKEN_HASHES = _TokenHashes()
_MAX_CACHED_TOKENS = 1 << 17  # a site's vocabulary repeats from page to page


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

    def __init__(
        self, max_distance: int, path: Path | str = ":memory:", writes: JobdirWrites | None = None
    ) -> None:
        self.max_distance = max_distance
        self._db = connect_crash_safe(path, writes)
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

    def find_or_add(self, fingerprint: int, url: str, add: bool = True) -> str | None:
        """The URL of a page at most ``max_distance`` bits away; if there is none, ``url`` is
        added (unless not ``add``) and the answer is None."""
        original = self.find(fingerprint)
        if original is None and add:
            self.add(fingerprint, url)
        return original

    def close(self) -> None:
        self._db.close()


# Find a fingerprint close to ARGV[1] among those sharing one of its bands, or add it: one
# step, so that of two processes adding near-duplicates at the same moment one finds the
# other's. Fingerprints are 16 hex digits; the distance is counted 16 bits at a time (Lua
# numbers are doubles, exact to 2^53). KEYS: urls hash, then one set per band.
# ARGV: fingerprint, url, max distance, "1" to add it when none is close (else only find).
FIND_OR_ADD = """
local function bits(x)
  local n = 0
  while x ~= 0 do
    n = n + bit.band(x, 1)
    x = bit.rshift(x, 1)
  end
  return n
end
local function distance(a, b)
  local d = 0
  for i = 1, 13, 4 do
    local x = tonumber(string.sub(a, i, i + 3), 16)
    local y = tonumber(string.sub(b, i, i + 3), 16)
    d = d + bits(bit.bxor(x, y))
  end
  return d
end
local fingerprint, limit = ARGV[1], tonumber(ARGV[3])
for i = 2, #KEYS do
  for _, other in ipairs(redis.call('SMEMBERS', KEYS[i])) do
    if distance(fingerprint, other) <= limit then return redis.call('HGET', KEYS[1], other) end
  end
end
if ARGV[4] ~= '1' then return false end
for i = 2, #KEYS do redis.call('SADD', KEYS[i], fingerprint) end
redis.call('HSET', KEYS[1], fingerprint, ARGV[2])
return false
"""


class SharedSimHashIndex:
    """The index of a crawl shared through Redis (``spider.shared``): a set per band value,
    ``near:<band>:<value>``, of the fingerprints (hex) that have it, and the hash
    ``near:urls``, fingerprint -> URL, under the crawl's prefix. Every process of the crawl
    finds the pages the others stored. Once Redis is lost (``SharedCrawl.run``) nothing is
    found: the spider is closing."""

    def __init__(self, max_distance: int, shared: SharedCrawl) -> None:
        self.max_distance = max_distance
        self.shared = shared
        self._find_or_add = shared.redis.register_script(FIND_OR_ADD)

    def find_or_add(self, fingerprint: int, url: str, add: bool = True) -> str | None:
        """As ``SimHashIndex.find_or_add``, atomically across the processes."""
        keys = [self.shared.key("near:urls")]
        keys += [self.shared.key(f"near:{band}:{value:04x}") for band, value in bands(fingerprint)]
        args = [f"{fingerprint:016x}", url, self.max_distance, int(add)]
        original = self.shared.run(self._find_or_add, keys=keys, args=args)
        return None if original is None else original.decode()
