"""Make tests/data/wikisample/: a small, deterministic, labelled web cut from Wikispeedia.

Tests and benchmarks need a web that is small enough to ship and crawl in seconds, yet forces a
crawler to choose: from a bird seed, on-topic and off-topic links must both be on offer. The
selection, all deterministic (ties broken by articles.tsv order):

1. topic articles: every article labelled subject.Science.Biology.Birds (or below) and every one
   labelled subject.Design_and_Technology.Railway_transport (a clearly different topic);
2. bridges: the BIRD_BRIDGES non-topic articles with the most links to or from Birds articles,
   and the RAIL_BRIDGES with the most links to or from railway articles (hubs such as Animal,
   Europe, United States: the off-topic links a crawler must learn to put off);
3. only what the seed (Albatross) reaches through links inside the selection is kept, so every
   page in the sample can be found by a crawl (about 35 Birds articles have no in-link at all).

Only links among the kept articles are written. Each text keeps its title line, loses the
leftover of the removed "Related subjects" line (it names the category), and is truncated to at
most MAX_CHARS characters at a paragraph boundary to keep the repository small.

    python tests/data/make_wikisample.py /work/shared/corpora/wikispeedia.tar.xz
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import Counter, deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `focused`

from focused.replayweb import (
    GRAPH_DIR,
    TEXT_DIR,
    Graph,
    load_graph,
    relevant_set,
    title,
)

BIRDS = "subject.Science.Biology.Birds"
RAILWAY = "subject.Design_and_Technology.Railway_transport"
SEED = "Albatross"
BIRD_BRIDGES = 50
RAIL_BRIDGES = 100
MAX_CHARS = 5000
CITATION = """\
# Subset of the Wikispeedia data set made by tests/data/make_wikisample.py (see README.md).
# Wikipedia content, CC BY-SA 3.0 / GFDL. When publishing on this data set, please cite:
# (1) Robert West and Jure Leskovec: Human Wayfinding in Information Networks. WWW 2012.
# (2) Robert West, Joelle Pineau, and Doina Precup: Wikispeedia: An Online Game for Inferring
#     Semantic Distances between Concepts. IJCAI 2009.
"""


def bfs_order(graph: Graph, seed: str, limit: int | None = None) -> list[str]:
    """Pages in the order a plain breadth-first crawl from `seed` fetches them."""
    seen, queue, order = {seed}, deque([seed]), []
    while queue and (limit is None or len(order) < limit):
        name = queue.popleft()
        order.append(name)
        for target in graph.links[name]:
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return order


def bridges(graph: Graph, topic: set[str], exclude: set[str], k: int) -> list[str]:
    """The k articles outside `exclude` with the most links to or from `topic` articles."""
    count: Counter[str] = Counter()
    for source, targets in graph.links.items():
        for target in targets:
            if source in topic:
                count[target] += 1
            if target in topic:
                count[source] += 1
    rank = {name: i for i, name in enumerate(graph.names)}
    ranked = sorted((n for n in count if n not in exclude), key=lambda n: (-count[n], rank[n]))
    return ranked[:k]


def subgraph(graph: Graph, keep: set[str]) -> Graph:
    """The graph restricted to `keep` (order kept, links only among kept articles)."""
    names = [n for n in graph.names if n in keep]
    return Graph(
        names=names,
        links={n: [t for t in graph.links[n] if t in keep] for n in names},
        text={n: graph.text[n] for n in names},
        categories={n: graph.categories[n] for n in names if n in graph.categories},
    )


def truncate(body: str, limit: int = MAX_CHARS) -> str:
    """The longest run of whole paragraphs within `limit` characters (whole lines at least)."""
    out: list[str] = []
    size = 0
    for para in (p for p in body.split("\n\n") if p.strip()):
        para = para.strip("\n")
        if size + len(para) + 2 > limit:
            if not out:  # one huge first paragraph: keep whole lines of it
                for line in para.split("\n"):
                    if size + len(line) + 1 > limit:
                        break
                    out.append(line)
                    size += len(line) + 1
            break
        out.append(para)
        size += len(para) + 2
    return "\n\n".join(out) + "\n"


def select(graph: Graph) -> Graph:
    """Apply the selection described in the module docstring."""
    birds, rail = relevant_set(graph, BIRDS), relevant_set(graph, RAILWAY)
    topics = birds | rail
    keep = topics | set(bridges(graph, birds, topics, BIRD_BRIDGES))
    keep |= set(bridges(graph, rail, topics, RAIL_BRIDGES))
    reachable = set(bfs_order(subgraph(graph, keep), SEED))
    sample = subgraph(graph, reachable)
    sample.text = {n: truncate(t) for n, t in sample.text.items()}
    return sample


def write(sample: Graph, out: Path) -> None:
    """Write the sample in the Wikispeedia layout, replacing an older one in `out`."""
    for sub in (GRAPH_DIR, TEXT_DIR):
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).mkdir(parents=True)
    meta = out / GRAPH_DIR
    (meta / "articles.tsv").write_text(
        CITATION + "# FORMAT: article\n" + "".join(f"{n}\n" for n in sample.names)
    )
    (meta / "links.tsv").write_text(
        CITATION
        + "# FORMAT: linkSource linkTarget\n"
        + "".join(f"{n}\t{t}\n" for n in sample.names for t in sample.links[n])
    )
    (meta / "categories.tsv").write_text(
        CITATION
        + "# FORMAT: article category (ground truth for evaluation only)\n"
        + "".join(f"{n}\t{c}\n" for n in sample.names for c in sample.categories.get(n, []))
    )
    for name in sample.names:
        text = f"\n{title(name)}\n\n{sample.text[name]}"
        (out / TEXT_DIR / f"{name}.txt").write_text(text, encoding="utf-8")


def stats(sample: Graph, out: Path) -> dict[str, object]:
    """The figures quoted in README.md."""
    birds, rail = relevant_set(sample, BIRDS), relevant_set(sample, RAILWAY)
    first60 = bfs_order(sample, SEED, 60)
    return {
        "articles": len(sample),
        "links": sum(len(t) for t in sample.links.values()),
        "birds": len(birds),
        "railway": len(rail),
        "seed": SEED,
        "seed_out_degree": len(sample.links[SEED]),
        "bfs60_birds_fraction": round(sum(n in birds for n in first60) / len(first60), 3),
        "bytes": sum(f.stat().st_size for f in out.rglob("*") if f.is_file()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", help="wikispeedia.tar.xz or its extracted directory")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "wikisample"))
    args = parser.parse_args()
    sample = select(load_graph(args.corpus))
    out = Path(args.out)
    write(sample, out)
    for key, value in stats(sample, out).items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
