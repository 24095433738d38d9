"""Every strategy's pop order is the one recorded from main's queues before they were sped up.

The workload is the frontier benchmark's requests (``benchmarks.frontier.make_requests``) with
what a crawl adds interleaved: rediscoveries from a better parent, trap requests queued at the
back, evictions of the worst entries, and pops between pushes. The events of a run (each popped
URL, each count evicted) are hashed; ``tests/data/queue_orders.json`` holds the hashes that
main's code gave (session 7, main at e57d249, before the queues were made faster), written by
copying this file into that checkout's tests/ and running there

    PYTHONPATH=. python -m tests.test_queue_order > tests/data/queue_orders.json

The recording is the same under another PYTHONHASHSEED. A change to any queue's order makes
its hash differ. Some were recorded again since, for fixes that changed their order on purpose:
``beam/memory`` (session 33, ``9c0a873``: a candidate the frontier evicts frees its place in
its generation; the orders are the same up to the first eviction, then more candidates kept),
``annealing`` and ``threshold`` (session 35: a trap request is no longer a candidate their
random draws may take, so it waits behind the others, as in every other strategy),
``pso/memory`` (fidelity-2: a particle is judged as it leaves its position, on the outcomes of
the fetches made there, not on those back when its turn ends) and ``rank_semantic``
(fidelity-2: it ranks before handing out an unranked URL ahead of a crawlable trap request,
where it fetched the URL unranked), and ``threshold/memory`` again (session 41: its T0 accepts
80 % of a small sample of worse moves, rounded up, where one worse move refused itself),
and ``beam/memory`` again (review-fidelity: a trap request ranks last in its generation's beam,
so it is the first dropped, where it could take the place of an ordinary candidate), and
``pso/memory`` again (session 44: a best no outcome judged pulls no particle, where the
placeholder (0, 0) pulled the swarm to weights that value every link at 0), and
``pso/memory`` again (literature review: a URL found again is compared with its queued request
re-scored under the current weights, where a stale key refused discoveries worth more now),
and ``annealing`` and ``threshold`` (literature review: a candidate drawn from two current pages
and refused twice is lowered once, where it fell below rejected candidates of lower value), and
again (literature review: a candidate is judged on the move from the page it was found on, where
a URL found again was judged on the link and page of the discovery its queue kept), and
``hillclimbing`` (literature review: a climbing move found again as the best child of a page
is raised among the climbing moves, where a page that linked it twice sent it to the pending
pool).
A parameter added since the recording runs at the value that keeps the recorded behaviour
(``RECORDED_PARAMS``); its other values are tested where it is.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import pytest
from scrapy.utils.misc import load_object

from benchmarks.frontier import FINGERPRINTER, make_queue, make_requests
from focused.strategies import STRATEGIES
from focused.traps import TRAP_META

RECORDED = Path(__file__).parent / "data" / "queue_orders.json"
REQUESTS = 3000
# (strategy, kind) pairs run on disk too: the JOBDIR frontier must keep its order as well.
DISK = ("bfs", "bestfirst", "semantic", "rank_semantic", "hillclimbing", "annealing")
# rank_growth (session 20) spaces rank_semantic's rankings by the graph's growth; 0 ranks every
# rank_every links, as when the orders were recorded.
RECORDED_PARAMS = {"rank_semantic": {"rank_growth": 0.0}}


def pop_events(strategy: str, kind: str, n: int = REQUESTS) -> list[str]:
    """Push the benchmark's requests with rediscoveries, traps, evictions and pops between."""
    requests = list(make_requests(n, seed=1))
    fingerprinter = load_object(FINGERPRINTER)()
    events: list[str] = []
    with tempfile.TemporaryDirectory(prefix="focused-order-") as tmp:
        queue = make_queue(strategy, kind, Path(tmp), fingerprinter)
        queue.params.update(RECORDED_PARAMS.get(strategy, {}))

        def pop(count: int) -> None:
            for _ in range(count):
                request = queue.pop()
                events.append(request.url.rsplit("/", 1)[1] if request else "-")

        for i, request in enumerate(requests):
            if i % 37 == 5:
                request.meta[TRAP_META] = "trap-family"
            queue.push(request)
            if i % 7 == 3 and i > 40:
                # the URL of an earlier request found again from a better parent
                earlier = requests[i - 1 - (i * 13) % 40]
                better = {
                    key: min(1.0, value + 0.3) if key.endswith("relevance") else value
                    for key, value in earlier.meta.items()
                }
                better["parent_url"] = f"http://127.0.0.1:8000/wiki/Better_{i}"
                better["discovery"] = n + i
                events.append(f"r{int(queue.rediscover(earlier.replace(meta=better)))}")
            if i % 10 == 9:
                pop(3)
            if i % 250 == 249:
                events.append(f"e{queue.evict(20)}")
        pop(len(queue) + 1)
        queue.close()
    return events


def digest(events: list[str]) -> str:
    return hashlib.sha256("\n".join(events).encode()).hexdigest()


def cases() -> list[tuple[str, str]]:
    return [(name, "memory") for name in STRATEGIES] + [(name, "disk") for name in DISK]


@pytest.mark.parametrize(("strategy", "kind"), cases())
def test_pop_order_is_mains(strategy: str, kind: str) -> None:
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    assert digest(pop_events(strategy, kind)) == recorded[f"{strategy}/{kind}"]


if __name__ == "__main__":
    print(json.dumps({f"{s}/{k}": digest(pop_events(s, k)) for s, k in cases()}, indent=1))
