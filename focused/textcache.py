"""Scores of short texts remembered by text in a bounded LRU; the rest computed in one batch.

Anchors and link contexts repeat across the pages of a crawl (menus, footers, "United States"),
and scoring them one at a time costs far more than one batched call. Used by the relevance model
(``focused.relevance``) and the sentence encoder (``focused.encoder``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence


def cached_scores(
    cache: OrderedDict[str, float],
    texts: Sequence[str],
    score_batch: Callable[[list[str]], list[float]],
    max_size: int,
) -> list[float]:
    """The score of each text, in order: cached ones from ``cache``, the distinct uncached ones
    from a single ``score_batch`` call (then cached); the least recently used beyond
    ``max_size`` are forgotten. Not thread-safe: call it from one thread."""
    results = [0.0] * len(texts)
    missing: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        cached = cache.get(text)
        if cached is None:
            missing.setdefault(text, []).append(i)
        else:
            cache.move_to_end(text)
            results[i] = cached
    if missing:
        for (text, positions), value in zip(
            missing.items(), score_batch(list(missing)), strict=True
        ):
            cache[text] = value
            for i in positions:
                results[i] = value
        while len(cache) > max_size:
            cache.popitem(last=False)
    return results
