"""How anchors are encoded: whole, as the mean of their words, or in two stages (the default).

Offline, like ``benchmarks/anchor_auc.py``: every article title of the corpus (the anchor text
the replay web gives each link) is scored against each public topic's query by a fresh
``focused.encoder.LinkEncoder`` per configuration, in pages of ``--batch`` new titles, in one
shuffled order (the two-stage encoder judges "the best share" on the scores seen so far). For
each configuration: the ROC AUC of the scores against the topic's ground truth, precision at
|rel| (the share of relevant titles among the |rel| best scored: the top is what a crawl
fetches), the CPU per title and the share of titles encoded whole. Each page of titles goes
through every configuration in turn, so the machine's load weighs on all alike.

    python -m benchmarks.anchor_stages --corpus ../shared/corpora/wikispeedia.tar.xz \\
        --topics ../shared/benchmarks/topics.json
"""

from __future__ import annotations

import random
import time

import numpy as np

from benchmarks.anchor_auc import roc_auc
from benchmarks.harvest import read_topics
from focused.encoder import LinkEncoder, WordMeans, load_model
from focused.errors import CommandLineParser, at_least_one, exit_on_config_error
from focused.replayweb import load_graph, relevant_set, title

# name -> share of the anchors encoded whole (1.0: all, without word scores).
CONFIGURATIONS = {
    "whole": 1.0,
    "words only": 0.0,
    "two stages, best 0.1 whole": 0.1,
    "two stages, best 0.25 whole (default)": 0.25,
}


def main(argv: list[str] | None = None) -> None:
    parser = CommandLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--topics", required=True)
    parser.add_argument(
        "--batch", type=at_least_one, default=20, help="new titles a page, per call"
    )
    parser.add_argument("--seed", type=int, default=1, help="of the shuffled title order")
    options = parser.parse_args(argv)

    graph = load_graph(options.corpus)
    topics = read_topics(options.topics)
    names = sorted(graph.names)
    random.Random(options.seed).shuffle(names)
    titles = [title(name) for name in names]
    encode = load_model()
    WordMeans(encode)  # the vocabulary's table, made once per install: not what is measured

    rows: dict[str, dict[str, list[float]]] = {
        name: {"auc": [], "precision": [], "cpu": [], "whole": []} for name in CONFIGURATIONS
    }
    for topic in topics:
        relevant = relevant_set(graph, topic["category"])
        labels = np.array([name in relevant for name in names])
        encoders = {
            name: LinkEncoder(
                topic["query"],
                encode,
                words=None if share >= 1 else WordMeans(encode),
                whole_share=share,
            )
            for name, share in CONFIGURATIONS.items()
        }
        scores: dict[str, list[float]] = {name: [] for name in encoders}
        cpu = dict.fromkeys(encoders, 0.0)
        for start in range(0, len(titles), options.batch):
            page = titles[start : start + options.batch]
            for name, encoder in encoders.items():
                started = time.thread_time()
                scores[name].extend(encoder.score_texts(page))
                cpu[name] += time.thread_time() - started
        for name, encoder in encoders.items():
            values = np.array(scores[name])
            best = np.argsort(-values, kind="stable")[: int(labels.sum())]
            rows[name]["auc"].append(roc_auc(values, labels))
            rows[name]["precision"].append(float(labels[best].mean()))
            rows[name]["cpu"].append(cpu[name] * 1000 / len(titles))
            rows[name]["whole"].append(encoder.encoded_whole / len(titles))

    shorts = [t["category"].rsplit(".", 1)[-1] for t in topics]
    print(f"{len(titles)} titles, pages of {options.batch}; cells: precision at |rel|\n")
    header = ["anchors", *shorts, "mean precision", "mean ROC AUC", "CPU ms/title", "whole"]
    print("| " + " | ".join(header) + " |")
    print("|---" * (len(shorts) + 5) + "|")
    for name, row in rows.items():
        cells = " | ".join(f"{p:.3f}" for p in row["precision"])
        print(
            f"| {name} | {cells} | **{np.mean(row['precision']):.3f}** | {np.mean(row['auc']):.3f} "
            f"| {np.mean(row['cpu']):.2f} | {np.mean(row['whole']):.2f} |"
        )


if __name__ == "__main__":
    exit_on_config_error(main, "python -m benchmarks.anchor_stages")
