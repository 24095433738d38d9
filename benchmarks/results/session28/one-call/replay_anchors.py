"""One-off A/B (session 28): a crawl's anchors through each checkout's LinkEncoder, as the crawl
sends them (each page's link titles in fetch order, a fresh encoder, no store).

    python benchmarks/results/session28/one-call/replay_anchors.py ORDER CHECKOUT...

ORDER: the article names of a crawl, one a line, in fetch order (``crawl-order.txt``: the
1,008 pages of a 1,000-page `semantic` crawl from Albatross on the replay web). Prints, for each
checkout in turn, the thread CPU per page of ``score_texts`` and the pages by model calls.
"""

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

CORPUS = "/work/shared/corpora/wikispeedia.tar.xz"
QUERY = "birds species feathers nest eggs wings flight plumage"


def measure(order_file: str) -> dict:
    from focused.encoder import LinkEncoder, WordMeans, load_model
    from focused.replayweb import load_graph, title

    graph = load_graph(CORPUS)
    order = []
    for line in Path(order_file).read_text().splitlines():
        name = line.strip()
        order.append(
            name if name in graph.links else unquote(name).replace("(", "%28").replace(")", "%29")
        )
    encode = load_model()
    calls = [0]

    def counting(texts):
        calls[0] += 1
        return encode(texts)

    try:  # the baseline's WordMeans takes the function its new words go through
        words = WordMeans(encode, None, counting)
    except TypeError:
        words = WordMeans(encode)
    link_encoder = LinkEncoder(QUERY, counting, words=words)
    by_calls: Counter = Counter()
    started = time.thread_time()
    for name in order:
        before = calls[0]
        link_encoder.score_texts([title(target) for target in graph.links.get(name, [])])
        by_calls[calls[0] - before] += 1
    cpu = time.thread_time() - started
    return {"ms_per_page": round(cpu * 1000 / len(order), 3), "pages_by_calls": dict(by_calls)}


if __name__ == "__main__":
    order_file, *checkouts = map(os.path.abspath, sys.argv[1:])
    for checkout in checkouts:
        code = (
            f"import sys, json, runpy; sys.path.insert(0, {checkout!r}); "
            f"print(json.dumps(runpy.run_path({__file__!r})['measure']({order_file!r})))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=checkout, capture_output=True, text=True, check=True
        )
        print(checkout, out.stdout.strip().splitlines()[-1], flush=True)
