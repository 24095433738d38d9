"""CPU per page of the steps around the scoring model, this checkout against a baseline revision,
side by side, and whether both give the same output:

    python -m benchmarks.pagecpu --corpus ../shared/corpora/wikispeedia.tar.xz --pages 200

The pages are fetched once from the replay web (as ``benchmarks.scoring`` does) and their text
and links extracted once. Then, in alternating subprocesses, one per checkout, each checkout's
own code runs on every page: ``tokenize`` of the page text, the page's SimHash from those
tokens, and ``WordMeans`` on the page's anchors (the sentence encoder's word vectors; a first
unmeasured pass encodes the words outside its vocabulary, so that only what surrounds the model
is timed). CPU is ``time.thread_time``, the least over the rounds. Each step's output is hashed,
so the table also says whether the two checkouts agree to the bit.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.runner import REPO


def extract(pages: list[dict[str, object]]) -> list[dict[str, object]]:
    """Each page's text, language and anchors, as the spider extracts them."""
    from scrapy.http import HtmlResponse

    from focused.extract import extract_page
    from focused.languages import page_language

    texts = []
    for page in pages:
        response = HtmlResponse(str(page["url"]), body=str(page["html"]).encode(), encoding="utf-8")
        extracted = extract_page(response)
        declared = [response.xpath("/html/@lang").get()]
        texts.append(
            {
                "text": extracted.text,
                "language": page_language(declared, extracted.text),
                "anchors": [link.anchor for link in extracted.links],
            }
        )
    return texts


def measure(texts_file: str) -> dict[str, list[object]]:
    """Run inside a checkout (cwd first on sys.path): [ms of CPU per page, output digest]."""
    from focused.encoder import WordMeans, load_model
    from focused.simhash import simhash
    from focused.text import tokenize

    texts = json.loads(Path(texts_file).read_text(encoding="utf-8"))
    results: dict[str, list[object]] = {}

    def timed(name: str, step, inputs) -> list:
        started = time.thread_time()
        outputs = [step(item) for item in inputs]
        elapsed = (time.thread_time() - started) * 1000 / len(inputs)
        digest = hashlib.sha256(repr(outputs).encode()).hexdigest()[:12]
        results[name] = [elapsed, digest]
        return outputs

    tokens = timed("tokenize (page text)", lambda t: tokenize(t["text"], t["language"]), texts)
    timed("simhash (page tokens)", simhash, tokens)
    word_means = WordMeans(load_model())
    anchors = [t["anchors"] for t in texts]
    for page_anchors in anchors:  # encode the words outside the vocabulary, unmeasured
        word_means(page_anchors)
    timed("WordMeans (page anchors)", lambda a: word_means(a).tobytes(), anchors)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.runner import call_in_checkout, extract_revision
    from benchmarks.scoring import fetch_pages
    from focused.errors import CommandLineParser, at_least_one

    parser = CommandLineParser(prog="python -m benchmarks.pagecpu")
    parser.add_argument("--corpus", required=True, help="Wikispeedia-format dir or .tar.xz")
    parser.add_argument("--seed", default="Albatross", help="start article (default Albatross)")
    parser.add_argument("--pages", type=at_least_one, default=200, help="pages (default 200)")
    parser.add_argument("--baseline", default="main", help="git revision to compare with")
    parser.add_argument("--rounds", type=at_least_one, default=3, help="runs of each checkout")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="focused-pagecpu-") as tmp:
        texts_file = Path(tmp, "texts.json")
        texts_file.write_text(json.dumps(extract(fetch_pages(args.corpus, args.seed, args.pages))))
        baseline = extract_revision(args.baseline, Path(tmp, "baseline"))
        results: dict[str, list[dict[str, list[object]]]] = {"baseline": [], "current": []}
        for _ in range(args.rounds):
            for name, checkout in (("baseline", baseline), ("current", REPO)):
                results[name].append(
                    call_in_checkout(checkout, __file__, "measure", str(texts_file))
                )
    print(f"{args.pages} pages from {args.seed}; CPU ms per page, least of {args.rounds} rounds")
    print(f"{'step':<26} {'baseline':>9} {'current':>9} {'ratio':>6}  same output")
    for step in results["current"][0]:
        base = min(r[step][0] for r in results["baseline"])
        current = min(r[step][0] for r in results["current"])
        digests = {r[step][1] for rounds in results.values() for r in rounds}
        same = "yes" if len(digests) == 1 else "NO"
        print(f"{step:<26} {base:>9.3f} {current:>9.3f} {current / base:>6.2f}  {same}")
    return 0


if __name__ == "__main__":
    # Here, not on top: a baseline checkout runs this file's code and may not have it.
    from focused.errors import exit_on_config_error

    exit_on_config_error(main, "python -m benchmarks.pagecpu")
