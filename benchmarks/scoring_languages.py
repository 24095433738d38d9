"""CPU cost of scoring English pages before and after per-language tokenization, side by side.

    python benchmarks/scoring_languages.py [--baseline main] [--rounds 5]

The baseline revision is extracted with ``git archive`` into a temporary directory; each round
runs one measuring subprocess per checkout, alternating, so both see the same machine load. It
prints the least milliseconds of CPU per operation over all runs, and the ratio current /
baseline. English pages are scored as the crawler scores them: with ``language="en"`` where the
API takes one. The texts are the relevance tests' English sentences.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def measure() -> dict[str, float]:
    """Run inside a checkout (cwd on sys.path): ms of CPU per operation."""
    import random

    from focused.relevance import RelevanceModel
    from focused.text import tokenize
    from tests import test_relevance as t

    takes_language = "language" in inspect.signature(tokenize).parameters
    lang = {"language": "en"} if takes_language else {}
    rng = random.Random(4)
    sentences = t.BIRD_SENTENCES + t.RAILWAY_SENTENCES + t.COOKING_SENTENCES
    page = " ".join(rng.choices(sentences, k=80))[:5000]
    contexts = [" ".join(rng.choices(sentences, k=5))[:400] for _ in range(300)]
    model = RelevanceModel(t.QUERY, num_topics=50)
    for doc in t.crawl_buffer():
        model.observe(doc)
    model.refit()

    def cpu_ms(function, repeat: int) -> float:
        """The least CPU time of five runs: other processes on the machine only ever add."""
        best = float("inf")
        for _ in range(5):
            started = time.process_time()
            for _ in range(repeat):
                function()
            best = min(best, (time.process_time() - started) / repeat * 1000)
        return best

    runs = iter([[f"{c} {i}" for c in contexts] for i in range(5 * 30)])
    costs = {
        "tokenize 5 KB page": cpu_ms(lambda: tokenize(page, **lang), 100),
        "score 5 KB page (fitted)": cpu_ms(lambda: model.score(page, **lang), 100),
        "300 contexts, uncached": cpu_ms(lambda: model.score_texts(next(runs), **lang), 30),
    }
    if takes_language:  # the spider's part, which the baseline does not have
        from focused.languages import page_language

        costs["page language, declared"] = cpu_ms(lambda: page_language(["en"], page), 100)
        costs["page language, detected"] = cpu_ms(lambda: page_language([None], page), 100)
    return costs


def run(checkout: Path) -> dict[str, float]:
    code = f"import sys; sys.path.insert(0, {str(REPO / 'benchmarks')!r}); "
    code += "import json, scoring_languages as b; print(json.dumps(b.measure()))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=checkout, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    # Imported here: the baseline checkout imports this module, and its focused may be older.
    from benchmarks.runner import extract_revision
    from focused.errors import CommandLineParser, at_least_one

    parser = CommandLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--rounds", type=at_least_one, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # A revision git does not know: one line (CalledProcessError's traceback, before).
        baseline = extract_revision(args.baseline, Path(tmp, "baseline"))
        results: dict[str, list[dict[str, float]]] = {"baseline": [], "current": []}
        for _ in range(args.rounds):
            results["baseline"].append(run(baseline))
            results["current"].append(run(REPO))
    print(f"{'operation':<28} {'baseline ms':>12} {'current ms':>11} {'ratio':>6}")
    for name in results["current"][0]:
        current = min(r[name] for r in results["current"])
        if name not in results["baseline"][0]:
            print(f"{name:<28} {'-':>12} {current:>11.3f} {'-':>6}")
            continue
        base = min(r[name] for r in results["baseline"])
        print(f"{name:<28} {base:>12.3f} {current:>11.3f} {current / base:>6.2f}")


if __name__ == "__main__":
    from focused.errors import exit_on_config_error

    exit_on_config_error(main, "python -m benchmarks.scoring_languages")
