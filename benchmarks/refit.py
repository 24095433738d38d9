"""CPU of one relevance-model refit on a crawl's buffer, this checkout against a baseline
revision, side by side.

    python -m benchmarks.refit --corpus ../shared/corpora/wikispeedia.tar.xz --pages 500 1000 2000

The pages are fetched once from the replay web (breadth-first from ``--seed``, as
``benchmarks.scoring`` does) and their text extracted as the ``topical`` spider does. In
alternating subprocesses, one per checkout (the baseline is extracted with ``git archive``), a
``RelevanceModel`` takes the first page as its seed and observes the first N pages, then
``refit()`` is timed (``time.thread_time``: the refit thread's CPU in a crawl, held GIL and BLAS
alike). Each figure is the least over the rounds: other processes on the machine only ever add.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.runner import REPO
from benchmarks.scoring import fetch_pages
from benchmarks.throughput import QUERY


def page_texts(corpus: str, seed: str, count: int) -> list[dict[str, str | None]]:
    """Text and language of ``count`` pages, as the spider extracts them."""
    from scrapy.http import HtmlResponse

    from focused.extract import extract_page
    from focused.languages import declared_languages, page_language

    texts = []
    for page in fetch_pages(corpus, seed, count):
        response = HtmlResponse(page["url"], body=page["html"].encode("utf-8"), encoding="utf-8")
        text = extract_page(response).text
        texts.append({"text": text, "language": page_language(declared_languages(response), text)})
    return texts


def measure(pages_file: str, query: str, sizes: Sequence[int]) -> dict[str, float]:
    """Run inside a checkout (cwd first on sys.path): ms of CPU of a refit on N pages."""
    from focused.languages import query_language
    from focused.relevance import RelevanceModel

    pages = json.loads(Path(pages_file).read_text(encoding="utf-8"))
    results = {}
    for size in sizes:
        model = RelevanceModel(query, max_docs=size, language=query_language(query))
        model.add_topic_text(pages[0]["text"], pages[0]["language"])
        for page in pages[:size]:
            model.observe(page["text"], page["language"])
        started = time.thread_time()
        model.refit()
        results[str(size)] = (time.thread_time() - started) * 1000
    return results


def buffer_parser(module: str, rounds: int) -> argparse.ArgumentParser:
    """The arguments of a benchmark of refits on a crawl's first pages against a baseline."""
    # Imported here: this module also runs in the baseline checkout, whose code may be older.
    from focused.errors import CommandLineParser, at_least_one

    parser = CommandLineParser(prog=f"python -m {module}")
    parser.add_argument("--corpus", required=True, help="Wikispeedia-format dir or .tar.xz")
    parser.add_argument("--seed", default="Albatross", help="start article (default Albatross)")
    parser.add_argument("--query", default=QUERY, help="the topic")
    parser.add_argument(
        "--pages", type=at_least_one, nargs="+", default=[500, 1000, 2000], help="buffer sizes"
    )
    parser.add_argument("--baseline", default="main", help="git revision to compare with")
    parser.add_argument("--rounds", type=at_least_one, default=rounds, help="runs of each checkout")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here: this module also runs in the baseline checkout, whose runner may be older.
    from benchmarks.runner import call_in_checkout, check_topical_arguments, extract_revision

    args = buffer_parser("benchmarks.refit", rounds=3).parse_args(argv)
    check_topical_arguments(args.query)
    with tempfile.TemporaryDirectory(prefix="focused-refit-") as tmp:
        pages_file = Path(tmp, "pages.json")
        pages_file.write_text(json.dumps(page_texts(args.corpus, args.seed, max(args.pages))))
        baseline = extract_revision(args.baseline, Path(tmp, "baseline"))
        results: dict[str, list[dict[str, float]]] = {"baseline": [], "current": []}
        for _ in range(args.rounds):
            for name, checkout in (("baseline", baseline), ("current", REPO)):
                results[name].append(
                    call_in_checkout(
                        checkout, __file__, "measure", str(pages_file), args.query, args.pages
                    )
                )
    print(f"refit CPU (ms) from {args.seed}; least of {args.rounds} rounds")
    print(f"{'pages':>6} {'baseline':>9} {'current':>9} {'ratio':>6} {'current ms/page':>16}")
    for size in args.pages:
        base = min(r[str(size)] for r in results["baseline"])
        current = min(r[str(size)] for r in results["current"])
        ratio, per_page = current / base, current / size
        print(f"{size:>6} {base:>9.1f} {current:>9.1f} {ratio:>6.2f} {per_page:>16.2f}")
    return 0


if __name__ == "__main__":
    # Here, not on top: a baseline checkout runs this file's code and may not have it.
    from focused.errors import exit_on_config_error

    exit_on_config_error(main, "python -m benchmarks.refit")
