"""Scoring CPU per page: the scoring middleware's work on real pages, this checkout against a
baseline revision, side by side.

    python -m benchmarks.scoring --corpus ../shared/corpora/wikispeedia.tar.xz --pages 300
    python -m benchmarks.scoring --corpus ../shared/corpora/wikispeedia.tar.xz --strategy bestfirst

The pages are fetched once from the replay web (breadth-first from ``--seed``). Then, in
alternating subprocesses, one per checkout (the baseline is extracted with ``git archive``), each
page goes through the checkout's own ``topical`` spider (``parse``: text and link extraction)
and ``RelevanceMiddleware`` exactly as in a crawl, with ``--strategy`` (default: the crawl's):
page score, every link's anchor, context and anchor+context scores, the topic update and
``observe``. The model refits every
``RELEVANCE_REFIT_EVERY`` pages as in a crawl; the refit runs in a thread there, so its CPU is
reported apart. CPU is ``time.thread_time``, what ``focused/scoring_cpu_ms_per_page`` counts.
Each figure is the least over the rounds: other processes on the machine only ever add.

The encoder's vectors kept across crawls (``focused.encodings``) are in a fresh directory for
each run: ``--store cold`` (default) measures a first crawl of the pages; ``--store warm`` first
runs once, unmeasured, on the same directory, and measures the next crawl of the same pages.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from urllib.request import urlopen

from benchmarks.runner import REPO
from benchmarks.throughput import QUERY
from focused.arguments import DEFAULT_STRATEGY
from focused.replayweb import ReplayServer, load_graph

LINK = 'href="/wiki/'


def fetch_pages(corpus: str, seed: str, count: int) -> list[dict[str, object]]:
    """``count`` pages of the replay web in breadth-first order, with their depth."""
    graph = load_graph(corpus, seed=seed)
    server = ReplayServer(graph).start()
    try:
        base = server.base_url_for(seed).rsplit("/wiki/", 1)[0]
        queue, seen, pages = deque([(seed, 0)]), {seed}, []
        while queue and len(pages) < count:
            name, depth = queue.popleft()
            with urlopen(f"{base}/wiki/{name}") as response:
                html = response.read().decode("utf-8")
            pages.append({"url": f"{base}/wiki/{name}", "depth": depth, "html": html})
            for part in html.split(LINK)[1:]:
                target = part.split('"', 1)[0]
                if target not in seen:
                    seen.add(target)
                    queue.append((target, depth + 1))
        return pages
    finally:
        server.stop()


def measure(pages_file: str, query: str, strategy: str, store_dir: str) -> dict[str, float]:
    """Run inside a checkout (cwd first on sys.path): ms of CPU per page."""
    from scrapy import Request
    from scrapy.http import HtmlResponse
    from scrapy.utils.test import get_crawler

    import focused.settings
    from focused.middlewares import RelevanceMiddleware
    from spiders.topical import TopicalSpider

    pages = json.loads(Path(pages_file).read_text(encoding="utf-8"))
    settings = {k: v for k, v in vars(focused.settings).items() if k.isupper()}
    settings["ENCODER_STORE_DIR"] = store_dir
    crawler = get_crawler(TopicalSpider, settings)
    crawler.settings = crawler.settings.copy()
    crawler.settings.frozen = False  # the spider sets its strategy, as in a crawl
    spider = TopicalSpider.from_crawler(
        crawler, query=query, seeds=pages[0]["url"], strategy=strategy
    )
    crawler.spider = spider
    middleware = RelevanceMiddleware.from_crawler(crawler)
    middleware.spider_opened(spider)
    # The page's work is process_outputs since the middlewares share PageOutputMiddleware;
    # a baseline from before that names it _annotate.
    annotate = getattr(middleware, "process_outputs", None) or middleware._annotate
    model = spider.relevance
    refit_ms = extract_ms = score_ms = 0.0
    for page in pages:
        request = Request(page["url"], meta={"depth": page["depth"]})
        response = HtmlResponse(
            page["url"], body=page["html"].encode("utf-8"), encoding="utf-8", request=request
        )
        started = time.thread_time()
        outputs = list(spider.parse(response))
        extract_ms += (time.thread_time() - started) * 1000
        started = time.thread_time()
        annotate(response, outputs)
        score_ms += (time.thread_time() - started) * 1000
        if model.refit_due:  # in a thread in a crawl; here in line, timed apart
            started = time.thread_time()
            model.refit()
            refit_ms += (time.thread_time() - started) * 1000
    closed = getattr(middleware, "spider_closed", None)  # a baseline may keep nothing
    if closed is not None:
        closed(spider)
    n = len(pages)
    return {
        "scoring CPU ms/page": score_ms / n,
        "extraction CPU ms/page": extract_ms / n,
        "refit CPU ms/page (thread)": refit_ms / n,
        "stat focused/scoring_cpu_ms_per_page": crawler.stats.get_value(
            "focused/scoring_cpu_ms_per_page", 0.0
        ),
    }


def run(checkout: Path, pages_file: Path, query: str, strategy: str, store: str) -> dict:
    from benchmarks.runner import call_in_checkout  # see main

    arguments = (str(pages_file), query, strategy)
    with tempfile.TemporaryDirectory(prefix="focused-encodings-") as store_dir:
        if store == "warm":
            call_in_checkout(checkout, __file__, "measure", *arguments, store_dir)
        return call_in_checkout(checkout, __file__, "measure", *arguments, store_dir)


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here: this module also runs in the baseline checkout, whose runner may be older.
    from benchmarks.runner import check_topical_arguments, extract_revision
    from focused.errors import CommandLineParser, at_least_one

    parser = CommandLineParser(prog="python -m benchmarks.scoring")
    parser.add_argument("--corpus", required=True, help="Wikispeedia-format dir or .tar.xz")
    parser.add_argument("--seed", default="Albatross", help="start article (default Albatross)")
    parser.add_argument("--query", default=QUERY, help="the topic")
    parser.add_argument(
        "--pages", type=at_least_one, default=300, help="pages scored (default 300)"
    )
    parser.add_argument("--baseline", default="main", help="git revision to compare with")
    parser.add_argument("--rounds", type=at_least_one, default=3, help="runs of each checkout")
    parser.add_argument(
        "--strategy", default=DEFAULT_STRATEGY, help=f"strategy (default {DEFAULT_STRATEGY})"
    )
    parser.add_argument(
        "--store",
        choices=("cold", "warm"),
        default="cold",
        help="encoder vectors kept by an earlier crawl of the pages: none (cold, default) or all",
    )
    args = parser.parse_args(argv)
    check_topical_arguments(args.query, args.strategy)
    with tempfile.TemporaryDirectory(prefix="focused-scoring-") as tmp:
        pages_file = Path(tmp, "pages.json")
        pages_file.write_text(json.dumps(fetch_pages(args.corpus, args.seed, args.pages)))
        baseline = extract_revision(args.baseline, Path(tmp, "baseline"))
        results: dict[str, list[dict[str, float]]] = {"baseline": [], "current": []}
        for _ in range(args.rounds):
            for name, checkout in (("baseline", baseline), ("current", REPO)):
                results[name].append(
                    run(checkout, pages_file, args.query, args.strategy, args.store)
                )
    print(
        f"{args.pages} pages from {args.seed}, {args.strategy}, {args.store} encoder store; "
        f"least of {args.rounds} rounds"
    )
    print(f"{'per page':<38} {'baseline':>9} {'current':>9} {'ratio':>6}")
    for name in results["current"][0]:
        base = min(r[name] for r in results["baseline"])
        current = min(r[name] for r in results["current"])
        ratio = f"{current / base:>6.2f}" if base else f"{'-':>6}"  # no refit in a short run
        print(f"{name:<38} {base:>9.3f} {current:>9.3f} {ratio}")
    return 0


if __name__ == "__main__":
    # Here, not on top: a baseline checkout runs this file's code and may not have it.
    from focused.errors import exit_on_config_error

    exit_on_config_error(main, "python -m benchmarks.scoring")
