"""CPU of one call of the sentence encoder's int8 ONNX model, by texts a call (session 56).

    python benchmarks/results/session56/scoring/calls.py   # from the repository root

Anchor-like texts of 1-4 words; least of 5 rounds of 40 calls, ``time.thread_time``.
"""

import random
import sys
import time

sys.path.insert(0, ".")
from focused.encoder import load_model

encode = load_model()
words = [
    "the",
    "bird",
    "flies",
    "over",
    "the",
    "sea",
    "albatross",
    "wings",
    "feathers",
    "ocean",
    "nest",
    "egg",
    "species",
    "southern",
    "hemisphere",
    "railway",
    "station",
    "train",
    "locomotive",
]
rng = random.Random(0)


def text() -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(1, 4))).title()


for _ in range(20):
    encode([text()])
for n in (1, 2, 4, 8, 16, 32):
    best = float("inf")
    for _ in range(5):
        batches = [[text() for _ in range(n)] for _ in range(40)]
        started = time.thread_time()
        for batch in batches:
            encode(batch)
        best = min(best, (time.thread_time() - started) / 40 * 1000)
    print(f"{n:2} texts a call: {best:.3f} ms a call, {best / n:.3f} ms a text")
