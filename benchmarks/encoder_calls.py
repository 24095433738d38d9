"""CPU per call of the sentence encoder's model, this checkout against a baseline revision.

    python -m benchmarks.encoder_calls --baseline main --rounds 5

A crawl sends the model a few short texts at a time (a page's new anchors, or the words outside
the vocabulary), so a call's fixed cost weighs as much as its cost per text. Each round runs, in
alternating subprocesses, each checkout's own ``load_model()`` (default backend and export) on
``--batches`` texts of Wikipedia titles, one thread; CPU is ``time.thread_time``. Each figure is
the least over the rounds: other processes on the machine only ever add.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ANCHORS = [
    "Wandering Albatross",
    "Class 37",
    "Iguanodon",
    "United States",
    "Isaac Newton",
    "Sea otter",
    "Battle of Hastings",
    "Mount Everest",
    "Great Barrier Reef",
    "Claude Monet",
    "Black hole",
    "World War II",
    "Giant panda",
    "Amazon River",
    "Leonardo da Vinci",
    "Seabird",
]


def measure(batches: list[int], calls: int) -> dict[str, float]:
    """Run inside a checkout (cwd first on sys.path): CPU ms per call, by batch size."""
    from focused.encoder import load_model

    encode = load_model()
    texts = [ANCHORS[i % len(ANCHORS)] for i in range(max(batches))]
    encode(texts[:8])  # the runtime's first call allocates its buffers
    result = {}
    for batch in batches:
        repeats = max(5, calls // batch)
        started = time.thread_time()
        for _ in range(repeats):
            encode(texts[:batch])
        result[str(batch)] = (time.thread_time() - started) * 1000 / repeats
    return result


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here: this module also runs in the baseline checkout, whose runner may be older.
    from benchmarks.runner import REPO, call_in_checkout, extract_revision
    from focused.errors import CommandLineParser, at_least_one, counts

    parser = CommandLineParser(prog="python -m benchmarks.encoder_calls")
    parser.add_argument("--baseline", default="main", help="git revision to compare with")
    parser.add_argument("--rounds", type=at_least_one, default=5, help="runs of each checkout")
    parser.add_argument(
        "--batches",
        type=counts,
        default="1,2,4,8,32",
        help="texts per call, comma-separated",
    )
    parser.add_argument("--calls", type=at_least_one, default=200, help="texts encoded per size")
    args = parser.parse_args(argv)
    batches = args.batches
    best: dict[str, dict[str, float]] = {"baseline": {}, "current": {}}
    with tempfile.TemporaryDirectory(prefix="focused-encoder-calls-") as tmp:
        baseline = extract_revision(args.baseline, Path(tmp, "baseline"))
        for _ in range(args.rounds):
            for name, checkout in (("baseline", baseline), ("current", REPO)):
                run = call_in_checkout(checkout, __file__, "measure", batches, args.calls)
                for batch, ms in run.items():
                    best[name][batch] = min(best[name].get(batch, ms), ms)
    print(f"CPU ms per encode() call, least of {args.rounds} rounds, one thread")
    print(f"{'texts':>5} {'baseline':>9} {'current':>9} {'ratio':>6}")
    for batch in map(str, batches):
        base, current = best["baseline"][batch], best["current"][batch]
        print(f"{batch:>5} {base:>9.3f} {current:>9.3f} {current / base:>6.2f}")
    return 0


if __name__ == "__main__":
    # Here, not on top: a baseline checkout runs this file's code and may not have it.
    from focused.errors import exit_on_config_error

    exit_on_config_error(main, "python -m benchmarks.encoder_calls")
