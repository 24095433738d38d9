"""Offline check of topic expansion (session 7, not merged): precision at |rel| and ROC AUC of
every corpus title against each public topic, with the query's vector alone and expanded with
the mean of the N vocabulary words nearest it at weight beta (the patch's WordMeans.expand).

    PYTHONPATH=. python benchmarks/results/session7/topic-expansion/qe.py \
        ../shared/corpora/wikispeedia.tar.xz ../shared/benchmarks/topics.json
"""

import json
import sys
from pathlib import Path

import numpy as np

from benchmarks.anchor_auc import roc_auc
from focused.encoder import WordMeans, load_model
from focused.replayweb import load_graph, relevant_set, title

WORDS, BETAS = (20, 50, 100, 200), (0.3, 0.5, 0.7)


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def precision(scores: np.ndarray, labels: np.ndarray, k: int) -> float:
    return float(labels[np.argsort(-scores)[:k]].mean())


graph = load_graph(sys.argv[1])
topics = json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))["topics"]
encode = load_model()
table = unit(np.asarray(WordMeans(encode)._table, dtype=np.float32))
titles = [title(name) for name in graph.names]
vectors = unit(np.concatenate([encode(titles[i : i + 64]) for i in range(0, len(titles), 64)]))
rows = []
for topic in topics:
    relevant = relevant_set(graph, topic["category"])
    labels = np.array([name in relevant for name in graph.names])
    query = unit(encode([topic["query"]])[0])
    row = [precision(vectors @ query, labels, int(labels.sum())), roc_auc(vectors @ query, labels)]
    for words in WORDS:
        nearest = np.argsort(-(table @ query))[:words]
        for beta in BETAS:
            expanded = unit(query + beta * table[nearest].mean(axis=0))
            scores = vectors @ expanded
            row += [precision(scores, labels, int(labels.sum())), roc_auc(scores, labels)]
    rows.append(row)
    print(topic["category"].rsplit(".", 1)[-1], " ".join(f"{x:.3f}" for x in row), flush=True)
print("columns: query alone, then (words, beta) for words in", WORDS, "and beta in", BETAS)
print("mean", " ".join(f"{x:.3f}" for x in np.mean(rows, axis=0)))
