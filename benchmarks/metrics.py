"""Evaluation measures of a focused crawl against ground-truth labels (pure functions).

The labels (editors' categories) are read only here and by the benchmark runner, never by a
crawl. Every function takes plain Python values so it can be checked by hand on a tiny graph.

Measures, as the literature defines them (see /work/shared/literature.md, "Common evaluation
measures"):

- harvest-rate curve: relevant pages fetched / pages fetched, after each fetch;
- harvest@N: the harvest rate after N fetches (N = |rel| gives harvest@|rel|);
- target recall after N fetches: the share of the relevant set fetched so far;
- per-level relevance per seed (the level tables of the combined BFS/DFS study);
- PK / KN top-10 quality (the bee-crawler study);
- pages per second;
- precision and recall of the crawler's own ``is_relevant`` against the labels.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


def harvest_curve(relevant: Sequence[bool]) -> list[float]:
    """Harvest rate after each fetch: element i is (relevant among the first i+1) / (i+1)."""
    curve, hits = [], 0
    for fetched, is_relevant in enumerate(relevant, start=1):
        hits += bool(is_relevant)
        curve.append(hits / fetched)
    return curve


def harvest_at(relevant: Sequence[bool], n: int) -> float:
    """Harvest rate after ``n`` fetches: relevant among the first ``n``, over ``n``. A crawl
    that ended before ``n`` fetches (its frontier ran empty) counts the fetches it did not make
    as no relevant page: judged on what it fetched, a crawl stranded after one relevant page
    had the best score there is, 1.0. ``n`` must be positive.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, not {n}")
    return sum(map(bool, relevant[:n])) / n


def target_recall(fetched: Sequence[str], targets: set[str], n: int) -> float:
    """Share of ``targets`` among the first ``n`` fetched pages (each page counted once)."""
    if not targets:
        return 0.0
    return len(set(fetched[:n]) & targets) / len(targets)


def seed_of(parents: Mapping[str, str | None]) -> dict[str, str]:
    """The seed each page descends from, following ``parents`` (page -> page it was found on).

    A page whose parent is missing from ``parents`` (or None) is its own seed.
    """
    seeds: dict[str, str] = {}
    for page in parents:
        path, node = [], page
        while node not in seeds:
            parent = parents.get(node)
            path.append(node)
            if parent is None or parent not in parents or parent in path:
                seeds[node] = node
                break
            node = parent
        root = seeds[node]
        for visited in path:
            seeds[visited] = root
    return seeds


@dataclass(frozen=True)
class LevelRow:
    seed: str
    level: int
    pages: int
    relevant: int

    @property
    def percent(self) -> float:
        return 100.0 * self.relevant / self.pages if self.pages else 0.0


def level_table(pages: Iterable[tuple[str, int, bool]], seeds: Mapping[str, str]) -> list[LevelRow]:
    """Pages fetched and relevant at each (seed, level), sorted by seed then level.

    ``pages`` are (page, level, is_relevant by the labels); ``seeds`` maps page -> seed.
    """
    counts: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for page, level, is_relevant in pages:
        row = counts[seeds.get(page, page), level]
        row[0] += 1
        row[1] += bool(is_relevant)
    return [LevelRow(seed, level, n, rel) for (seed, level), (n, rel) in sorted(counts.items())]


def top_quality(scored: Iterable[tuple[float, bool]], k: int = 10) -> tuple[int, float]:
    """(PK, KN) of the bee-crawler study over (crawler's score, relevant by the labels) pairs.

    PK = labelled-relevant pages among the ``k`` best-scored; KN = the best score (0 if none).
    Ties keep the input (fetch) order.
    """
    best = sorted(scored, key=lambda pair: -pair[0])[:k]
    return sum(bool(rel) for _, rel in best), (best[0][0] if best else 0.0)


def pages_per_second(pages: int, seconds: float) -> float:
    return pages / seconds if seconds > 0 else 0.0


def precision_recall(predicted: Sequence[bool], actual: Sequence[bool]) -> tuple[float, float]:
    """Precision and recall of ``predicted`` (the crawler's is_relevant) against ``actual``.

    Over the pages the crawler fetched: recall is about those pages, not the whole graph.
    Precision is 0 when nothing is predicted, recall 0 when nothing is actually relevant.
    """
    both = sum(p and a for p, a in zip(predicted, actual, strict=True))
    said, true = sum(map(bool, predicted)), sum(map(bool, actual))
    return (both / said if said else 0.0), (both / true if true else 0.0)


def distances_to_relevant(links: Mapping[str, Sequence[str]], relevant: set[str]) -> dict[str, int]:
    """Fewest links from each page to a relevant one (0 for a relevant page).

    A breadth-first search backwards from the relevant set; pages that reach none are absent.
    """
    backlinks: dict[str, list[str]] = defaultdict(list)
    for source, targets in links.items():
        for target in targets:
            backlinks[target].append(source)
    distance = {page: 0 for page in relevant}
    frontier = deque(relevant)
    while frontier:
        page = frontier.popleft()
        for source in backlinks.get(page, ()):
            if source not in distance:
                distance[source] = distance[page] + 1
                frontier.append(source)
    return distance
