"""How long the reactor stalls while the relevance model refits, this checkout against a baseline
revision, side by side.

    python -m benchmarks.stall --corpus ../shared/corpora/wikispeedia.tar.xz --pages 500 1000 2000

A refit runs in a worker thread (``deferToThread``, as ``RelevanceMiddleware`` starts it), and
while that thread holds the GIL in one long C call, the reactor thread runs nothing: Python's
switch interval only preempts between bytecodes. Here, in alternating subprocesses, one per
checkout, a ``RelevanceModel`` observes the first N pages of ``benchmarks.refit``'s crawl, then a
Twisted ``LoopingCall`` ticks every 10 ms on the reactor while ``refit()`` runs in a thread. A
tick's lag is how much later than 10 ms after the previous tick it ran; the report gives the
largest lag and the 99th percentile over the refit, each the least over the rounds (other
processes on the machine only ever add), the same over a second of ticks without a refit just
before it (the noise floor), the longest pause of the garbage collector during the refit (it
holds the GIL in whichever thread triggered it) and the refit's wall time. A refit on 50 pages
runs first, unmeasured: the first refit in a process pays one-time costs. Then a checkout that
tunes the garbage collector once a crawl's start-up is done (``focused.collector``) does so.

``--holds`` also lists each checkout's longest calls into C in one fit (``holds``).
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.refit import page_texts
from benchmarks.runner import REPO

TICK = 0.010


def percentile(values: Sequence[float], share: float) -> float:
    """The value below which ``share`` of ``values`` lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(pages_file: str, query: str, sizes: Sequence[int]) -> dict[str, dict[str, float]]:
    """Run inside a checkout (cwd first on sys.path): reactor lag (ms) during a refit on N pages."""
    from twisted.internet import reactor, task
    from twisted.internet.defer import inlineCallbacks
    from twisted.internet.threads import deferToThread

    from focused.languages import query_language
    from focused.relevance import RelevanceModel

    pages = json.loads(Path(pages_file).read_text(encoding="utf-8"))
    results: dict[str, dict[str, float]] = {}

    def tune_start_up() -> None:
        """What a crawl does to the garbage collector once its start-up is done, in a checkout
        that does it (focused.collector)."""
        try:
            from focused import settings
            from focused.collector import tune_collector
        except ImportError:
            return
        tune_collector(settings.FOCUSED_GC_FREEZE, settings.FOCUSED_GC_GEN0_THRESHOLD)

    def model_of(size: int) -> RelevanceModel:
        model = RelevanceModel(query, max_docs=size, language=query_language(query))
        model.add_topic_text(pages[0]["text"], pages[0]["language"])
        for page in pages[:size]:
            model.observe(page["text"], page["language"])
        return model

    pauses: list[float] = []  # the cyclic garbage collector's, in either thread
    collecting_since = 0.0

    def on_collection(phase: str, info: dict) -> None:
        nonlocal collecting_since
        if phase == "start":
            collecting_since = time.perf_counter()
        else:
            pauses.append((time.perf_counter() - collecting_since) * 1000)

    gc.callbacks.append(on_collection)

    @inlineCallbacks
    def lags_during(work):
        """Lags of the 10 ms ticks while the deferred ``work()`` returns runs, and its wall time."""
        lags: list[float] = []
        last = time.perf_counter()

        def tick():
            nonlocal last
            now = time.perf_counter()
            lags.append(max(0.0, now - last - TICK) * 1000)
            last = now

        ticker = task.LoopingCall(tick)
        ticker.start(TICK, now=True)
        started = time.perf_counter()
        yield work()
        wall = time.perf_counter() - started
        ticker.stop()
        return lags, wall

    @inlineCallbacks
    def run_all():
        try:
            # The first refit in a process pays one-time costs (threadpoolctl's scan of the
            # loaded libraries, lazy imports): a crawl pays them on its first, small buffer.
            yield deferToThread(model_of(50).refit)
            tune_start_up()
            for size in sizes:
                model = model_of(size)
                # The same ticks for a second without a refit: the machine's own noise floor.
                idle, _ = yield lags_during(lambda: task.deferLater(reactor, 1.0, lambda: None))
                pauses.clear()
                lags, wall = yield lags_during(lambda model=model: deferToThread(model.refit))
                results[str(size)] = {
                    "max": max(lags),
                    "p99": percentile(lags, 0.99),
                    "idle max": max(idle),
                    "idle p99": percentile(idle, 0.99),
                    "gc max": max(pauses, default=0.0),
                    "ticks": len(lags),
                    "wall": wall * 1000,
                }
        finally:
            reactor.stop()

    reactor.callWhenRunning(run_all)
    reactor.run()
    return results


def holds(pages_file: str, query: str, size: int, count: int = 15) -> list[tuple[str, float]]:
    """Run inside a checkout: the lines of one fit on ``size`` pages after which the longest
    time passed before the next trace event, i.e. the longest calls into C, with their ms.

    Under ``sys.settrace`` the fit's Python code runs slower, but a call into C takes as long as
    ever. Whether a call holds the GIL meanwhile is not seen here: the lag above is.
    """
    from threadpoolctl import threadpool_limits

    from focused.languages import query_language
    from focused.relevance import RelevanceModel, _fit

    pages = json.loads(Path(pages_file).read_text(encoding="utf-8"))
    model = RelevanceModel(query, max_docs=size, language=query_language(query))
    model.add_topic_text(pages[0]["text"], pages[0]["language"])
    for page in pages[:size]:
        model.observe(page["text"], page["language"])
    docs, topic = list(model._buffer), [list(part) for part in model._topic]
    longest: dict[str, float] = {}
    where, since = "", time.perf_counter()

    def trace(frame, event, arg):
        nonlocal where, since
        elapsed = time.perf_counter() - since
        longest[where] = max(longest.get(where, 0.0), elapsed)
        code = frame.f_code
        where = f"{code.co_filename.rsplit('/', 2)[-1]}:{frame.f_lineno} {code.co_name}"
        since = time.perf_counter()
        return trace

    with threadpool_limits(limits=1, user_api="blas"):
        sys.settrace(trace)
        _fit(docs, topic, model.num_topics)
        sys.settrace(None)
    ranked = sorted(longest.items(), key=lambda item: -item[1])[:count]
    return [(line, seconds * 1000) for line, seconds in ranked]


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here: this module also runs in the baseline checkout, whose benchmarks may be older.
    from benchmarks.refit import buffer_parser
    from benchmarks.runner import call_in_checkout, extract_revision

    parser = buffer_parser("benchmarks.stall", rounds=2)
    parser.add_argument(
        "--holds", action="store_true", help="also list each checkout's longest calls into C"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="focused-stall-") as tmp:
        pages_file = Path(tmp, "pages.json")
        pages_file.write_text(json.dumps(page_texts(args.corpus, args.seed, max(args.pages))))
        baseline = extract_revision(args.baseline, Path(tmp, "baseline"))
        results: dict[str, list[dict[str, dict[str, float]]]] = {"baseline": [], "current": []}
        for _ in range(args.rounds):
            for name, checkout in (("baseline", baseline), ("current", REPO)):
                results[name].append(
                    call_in_checkout(
                        checkout, __file__, "measure", str(pages_file), args.query, args.pages
                    )
                )
        if args.holds:
            for name, checkout in (("baseline", baseline), ("current", REPO)):
                calls = call_in_checkout(
                    checkout, __file__, "holds", str(pages_file), args.query, max(args.pages)
                )
                print(f"{name}: longest calls into C in a fit on {max(args.pages)} pages (ms)")
                for line, ms in calls:
                    print(f"{ms:9.1f}  {line}")
    print(f"reactor lag (ms) beyond a {TICK * 1000:.0f} ms tick during a refit, from {args.seed};")
    print(f"least of {args.rounds} rounds (idle: the same ticks for 1 s without a refit)")
    stats = ("max", "p99", "idle max", "idle p99", "gc max", "wall")
    print(f"{'pages':>6} " + " ".join(f"{'base ' + s:>13} {'cur ' + s:>12}" for s in stats))
    for size in args.pages:
        row = [f"{size:>6}"]
        for stat in stats:
            base = min(r[str(size)][stat] for r in results["baseline"])
            current = min(r[str(size)][stat] for r in results["current"])
            row.append(f"{base:>13.1f} {current:>12.1f}")
        print(" ".join(row))
    for name, rounds in results.items():
        for size in args.pages:
            each = ", ".join(f"{r[str(size)]['max']:.1f}" for r in rounds)
            print(f"{name} max lag of each round, {size} pages: {each}")
    return 0


if __name__ == "__main__":
    # Here, not on top: a baseline checkout runs this file's code and may not have it.
    from focused.errors import exit_on_config_error

    exit_on_config_error(main, "python -m benchmarks.stall")
