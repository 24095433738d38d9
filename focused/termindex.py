"""Term ids of a text's words, looked up by the words' hashes rather than in a dict of strings.

A page has some 800-1,400 distinct words, and scoring it looks each one up in the relevance
model's dictionary (``token2id``, up to 50,000 terms). Python's dict compares a found key's
characters with the word's, and the dictionary's key strings lie all over the heap: within a
crawl, where the rest of a page's work has pushed them out of the CPU's caches, those lookups
cost about 0.5 ms a page, a quarter of its scoring. A word's hash is already computed (the
page's ``Counter`` of terms cached it in the string), so a sorted array of the dictionary's
hashes finds the same ids with ``numpy.searchsorted`` without reading any key string.

Two words with one 64-bit hash are the price: if two of the dictionary's terms share one (a
chance of about 1 in 10^10 at 50,000 terms), the index falls back to the dict for good; a word
outside the dictionary whose hash equals a term's would be scored as that term (about 1 in
10^14 a word). Python salts ``str`` hashes per process, so an index is built where it is used
and never saved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat

import numpy as np

UNKNOWN = -1  # the id of a word outside the dictionary


class TermIndex:
    """``token2id`` for whole batches of words, read-only."""

    __slots__ = ("_hashes", "_ids", "_token2id")

    def __init__(self, token2id: Mapping[str, int]) -> None:
        hashes = np.fromiter(map(hash, token2id), np.int64, len(token2id))
        order = np.argsort(hashes)
        self._hashes = hashes[order]
        self._ids = np.fromiter(token2id.values(), np.int64, len(token2id))[order]
        # Kept only when two terms share a hash: then their strings must decide.
        self._token2id = token2id if (np.diff(self._hashes) == 0).any() else None

    def ids(self, words: Sequence[str]) -> np.ndarray:
        """Each word's term id, ``UNKNOWN`` for a word outside the dictionary."""
        if self._token2id is not None:
            return np.fromiter(
                map(self._token2id.get, words, repeat(UNKNOWN, len(words))), np.int64, len(words)
            )
        hashes = np.fromiter(map(hash, words), np.int64, len(words))
        if not len(self._hashes):
            return np.full(len(words), UNKNOWN, np.int64)
        places = np.searchsorted(self._hashes, hashes)
        np.minimum(places, len(self._hashes) - 1, out=places)
        return np.where(self._hashes[places] == hashes, self._ids[places], UNKNOWN)
