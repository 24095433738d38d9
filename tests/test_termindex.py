"""Term ids by hash (focused.termindex) against the dictionary's own lookups."""

from __future__ import annotations

import random
import string

from focused.termindex import UNKNOWN, TermIndex


def random_words(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(1, 9))) for _ in range(count)]


def test_ids_are_the_dictionarys() -> None:
    vocabulary = list(dict.fromkeys(random_words(20_000, seed=1)))
    token2id = {word: term_id for term_id, word in enumerate(reversed(vocabulary))}
    # Fresh string objects, as a tokenizer makes them; half the words are outside the dictionary.
    words = ["".join(list(word)) for word in vocabulary[::7]] + random_words(3_000, seed=2)
    assert TermIndex(token2id).ids(words).tolist() == [token2id.get(w, UNKNOWN) for w in words]


def test_empty_dictionary_and_empty_text() -> None:
    assert TermIndex({}).ids(["bird", "wing"]).tolist() == [UNKNOWN, UNKNOWN]
    assert TermIndex({"bird": 0}).ids([]).tolist() == []
    # A word hashing past every term's: its place is past the end of the sorted hashes.
    largest = max(("bird", "wing", "nest"), key=hash)
    assert TermIndex({w: i for i, w in enumerate(("bird", "wing", "nest")) if w != largest}).ids(
        [largest]
    ).tolist() == [UNKNOWN]


class SameHash(str):
    """A word whose hash every other one shares: two terms that one hash cannot tell apart."""

    def __hash__(self) -> int:
        return 12345


def test_terms_sharing_a_hash_are_told_apart_by_their_strings() -> None:
    token2id = {SameHash("bird"): 0, SameHash("wing"): 1, "nest": 2}
    words = [SameHash("wing"), SameHash("bird"), "nest", SameHash("egg")]
    assert TermIndex(token2id).ids(words).tolist() == [1, 0, 2, UNKNOWN]
