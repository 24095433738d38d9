"""The defining behaviour of the local-search strategies, on hand-built graphs.

Relevance is given in each request's meta as the scoring middleware would write it; random
strategies are seeded. Flights are simulated: a request is out until the test lands it.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
from collections import Counter, OrderedDict
from types import SimpleNamespace

import pytest
from scrapy import Request

from focused.traps import TRAP_META
from schedulers.base import SqliteFrontier
from schedulers.local import Flights
from tests.queues import drain, make_queue, req


@pytest.fixture(params=["memory", "disk"])
def key(request, tmp_path) -> str:
    return "" if request.param == "memory" else str(tmp_path / "requests.queue")


def child(name: str, parent: str, page: float, link: float, depth: int = 1, **meta):
    return req(
        name,
        parent_url=f"http://t/{parent}",
        parent_relevance=page,
        parent_is_relevant=page >= 0.15,
        link_relevance=link,
        depth=depth,
        **meta,
    )


def name(request) -> str:
    return request.url.rsplit("/", 1)[1]


def hold_flights(queue) -> set:
    """Make the queue's flights stay out until the test removes them from the returned set."""
    out: set = set()
    queue.flights.holds = lambda request: id(request) in out
    return out


# -- hill climbing -------------------------------------------------------------------------------


def test_hillclimbing_follows_the_best_improving_child_then_restarts(key):
    queue = make_queue("hillclimbing", key)
    queue.push(child("far", "other", page=0.6, link=0.35))  # pending: not above its page
    for leaf, link in [("a", 0.15), ("b", 0.5), ("c", 0.4)]:
        queue.push(child(leaf, "p", page=0.3, link=link))
    # b and c both improve on p (0.3); only the best one, b, is the climbing move.
    assert name(queue.pop()) == "b"
    # b's children are no better than b: none is followed; restart from the best pending.
    queue.push(child("b1", "b", page=0.7, link=0.3))
    queue.push(child("b2", "b", page=0.7, link=0.2))
    assert drain(queue) == ["c", "far", "b1", "b2", "a"]
    assert queue.stats.get_value("focused/hillclimbing/climbs") == 1
    assert queue.stats.get_value("focused/hillclimbing/restarts") == 5


def test_hillclimbing_a_better_child_arriving_later_takes_over_the_climb(key):
    queue = make_queue("hillclimbing", key)
    queue.push(child("good", "p", page=0.1, link=0.3))
    queue.push(child("pending", "q", page=0.9, link=0.8))
    queue.push(child("better", "p", page=0.1, link=0.6))
    # A link already queued, found again on p, is one of p's children too.
    assert queue.rediscover(child("pending", "p", page=0.1, link=0.7))
    assert len(queue) == 3
    assert drain(queue) == ["pending", "better", "good"]


@pytest.mark.parametrize("x_first", [True, False])
def test_hillclimbing_a_climbing_move_found_again_is_the_best_child_of_that_page_too(key, x_first):
    """x, already a's climbing move, is also b's best child: b's climb is x, not y. When x was
    found again on b, b's best child went unrecorded, so y, a worse child of b, was a climbing
    move as well (or stayed one), fetched before better pending links: two climbs from b."""
    queue = make_queue("hillclimbing", key)
    queue.push(child("x", "a", page=0.3, link=0.9))  # a's climbing move
    queue.push(child("z", "other", page=0.85, link=0.8))  # pending: not above its page
    b_links = [
        lambda: queue.rediscover(child("x", "b", page=0.5, link=0.9)),
        lambda: queue.push(child("y", "b", page=0.5, link=0.7)),  # improves on b, below x
    ]
    for found in b_links if x_first else reversed(b_links):
        found()
    assert drain(queue) == ["x", "z", "y"]


def test_hillclimbing_a_climbing_move_linked_again_on_its_page_still_climbs(key):
    """p links x twice (an image, then a text link with a better anchor): x stays p's climbing
    move, at the better link's value. It was demoted as p's old best child, then raised in the
    pending pool only, so that a pending link (z) was fetched before p's climb."""
    queue = make_queue("hillclimbing", key)
    queue.push(child("x", "p", page=0.3, link=0.5))  # p's climbing move: 0.5 > 0.3
    queue.push(child("z", "other", page=0.9, link=0.8))  # pending: not above its page
    assert queue.rediscover(child("x", "p", page=0.3, link=0.6))
    assert queue.frontier.key_of(queue._fingerprint(req("x")))[:2] == (-0.6 - 2, -0.3)
    assert not queue.rediscover(child("x", "p", page=0.3, link=0.55))  # no better: as it was
    assert drain(queue) == ["x", "z"]
    assert queue.stats.get_value("focused/hillclimbing/climbs") == 1


def test_hillclimbing_a_better_child_of_another_page_leaves_a_climbing_move_shared(key):
    """x is a's climbing move and, found again on b, b's best child too; w, a better child of b,
    took b's climb and sent x back to the pending pool, though it was still a's climb."""
    queue = make_queue("hillclimbing", key)
    queue.push(child("x", "a", page=0.3, link=0.9))  # a's climbing move
    queue.push(child("z", "other", page=0.97, link=0.93))  # pending, above x: not above its page
    queue.rediscover(child("x", "b", page=0.5, link=0.9))
    queue.push(child("w", "b", page=0.5, link=0.95))  # b's climb now
    assert drain(queue) == ["w", "x", "z"]


def fetched_again(request: Request, how: str) -> Request:
    """``request``, handed out, back in the queue with its meta: ``retried``, or the request
    its redirect to y made."""
    if how == "retried":
        return request.replace(dont_filter=True)
    again = request.replace(url="http://t/y")
    again.meta["redirect_urls"] = [request.url]
    return again


@pytest.mark.parametrize("sent_again", ["retried", "redirected"])
def test_hillclimbing_a_climbing_move_sent_again_goes_on_with_the_climb(key, sent_again):
    """x, p's climbing move, is fetched and comes back to the queue with its meta: retried, or
    redirected to y. It is the same move, still before every pending link; it went to the
    pending pool at x's value, and w, a better link of another page, was fetched first: the
    climb was broken by a redirect."""
    queue = make_queue("hillclimbing", key)
    queue.push(child("w", "other", page=0.9, link=0.85))  # pending: not above its page
    queue.push(child("x", "p", page=0.3, link=0.6))  # p's climbing move
    x = queue.pop()
    again = fetched_again(x, sent_again)
    queue.push(again)
    assert drain(queue) == [name(again), "w"]
    assert queue.stats.get_value("focused/hillclimbing/climbs") == 2


def test_hillclimbing_a_climbing_move_found_as_a_trap_leaves_the_url_in_front(key):
    """A pending URL found again on another page, as a trap family's request (its family
    exploded since), improves on that page: as its climbing move it was put at the back, behind
    every other request, where it was queued in front."""
    queue = make_queue("hillclimbing", key)
    queue.push(child("x", "a", page=0.9, link=0.5))  # pending: not above its page
    queue.push(child("y", "c", page=0.9, link=0.4))  # pending, below x
    assert not queue.rediscover(child("x", "b", page=0.1, link=0.6, **{TRAP_META: "t"}))
    assert drain(queue) == ["x", "y"]


# -- beam ----------------------------------------------------------------------------------------


def test_beam_keeps_the_k_best_of_a_generation_and_drops_the_rest(key):
    queue = make_queue("beam", key, beam_width=2)
    queue.push(req("seed", depth=0))
    assert name(queue.pop()) == "seed"
    for leaf, link in [("a", 0.1), ("b", 0.7), ("c", 0.3), ("d", 0.9), ("e", 0.2)]:
        queue.push(child(leaf, "seed", page=0.5, link=link))
    assert len(queue) == 2
    assert queue.stats.get_value("focused/beam/dropped") == 3
    assert drain(queue) == ["d", "b"]


def test_beam_a_candidate_raised_by_rediscovery_is_no_longer_its_generations_worst(key):
    """The beam keeps each full generation's worst candidate between newcomers; one found
    again from a better page is no longer the worst, and a newcomer takes another's place."""
    queue = make_queue("beam", key, beam_width=2)
    queue.push(req("seed", depth=0))
    queue.pop()
    queue.push(child("a", "seed", page=0.5, link=0.1))
    queue.push(child("b", "seed", page=0.5, link=0.5))
    queue.push(child("c", "seed", page=0.5, link=0.05))  # loses to a, the worst: dropped
    assert queue.rediscover(child("a", "other", page=0.5, link=0.9))
    queue.push(child("e", "seed", page=0.5, link=0.6))  # beats b, the worst now
    assert queue.stats.get_value("focused/beam/dropped") == 2
    assert drain(queue) == ["a", "e"]


def test_beam_drops_a_trap_request_before_any_other_candidate(key):
    """A trap family's request is queued behind every other one (``at_back``): kept in the
    beam, it held a place of its generation while it waited behind the later ones, and a
    better-scored one took the place of an ordinary candidate."""
    queue = make_queue("beam", key, beam_width=2)
    queue.push(req("seed", depth=0))
    queue.pop()
    queue.push(child("trap", "seed", page=0.5, link=0.9, **{TRAP_META: "t"}))
    for leaf, link in [("b", 0.5), ("c", 0.4)]:
        queue.push(child(leaf, "seed", page=0.5, link=link))
    queue.push(child("trap2", "seed", page=0.5, link=0.95, **{TRAP_META: "t"}))
    assert queue.stats.get_value("focused/beam/dropped") == 2
    assert drain(queue) == ["b", "c"]


def test_beam_expands_a_kept_trap_request_within_its_generation(key):
    """A generation with room keeps a trap request, which the frontier queues behind every
    other: it waited behind the next generation, and its children, of a generation already
    chosen, were queued without the beam's limit."""
    queue = make_queue("beam", key, beam_width=2)
    out = hold_flights(queue)
    queue.push(req("seed", depth=0))
    out.add(id(queue.pop()))
    queue.push(child("a", "seed", page=0.5, link=0.5))
    queue.push(child("trap", "seed", page=0.5, link=0.9, **{TRAP_META: "t"}))
    out.clear()
    a = queue.pop()
    out.add(id(a))
    assert name(a) == "a"
    # a's children are queued before the trap request is asked for: it is then behind them.
    for leaf, link in [("a1", 0.5), ("a2", 0.4)]:
        queue.push(child(leaf, "a", page=0.5, link=link, depth=2))
    assert queue.pop() is None  # a is out
    out.clear()
    trap = queue.pop()
    out.add(id(trap))
    assert name(trap) == "trap" and trap.meta["depth"] == 1
    assert queue.pop() is None  # generation 2 waits for the trap page's children
    queue.push(child("t1", "trap", page=0.9, link=0.9, depth=2))
    out.clear()
    assert queue.stats.get_value("focused/beam/dropped") == 1  # a2: t1 took its place
    assert drain(queue) == ["t1", "a1"]


def test_beam_keeps_every_seed_however_many(key):
    """The seeds are generation 0, the starting states as given: the beam applies from 1."""
    queue = make_queue("beam", key, beam_width=2)
    for seed in ["s1", "s2", "s3", "s4"]:
        queue.push(req(seed, depth=0))
    assert len(queue) == 4 and not queue.stats.get_value("focused/beam/dropped")
    assert sorted(drain(queue)) == ["s1", "s2", "s3", "s4"]


def test_beam_frees_the_places_of_requests_the_frontier_evicted(key):
    """FRONTIER_MAX's evictions went unnoticed by the beam: their places stayed taken, and the
    generation kept fewer than k candidates, newcomers dropped however good."""
    queue = make_queue("beam", key, beam_width=3)
    queue.push(req("seed", depth=0))
    queue.pop()
    for leaf, link in [("a", 0.1), ("b", 0.2), ("c", 0.3)]:
        queue.push(child(leaf, "seed", page=0.5, link=link))
    assert queue.evict(2) == 2  # the frontier is full: a and b go
    for leaf, link in [("d", 0.05), ("e", 0.04), ("f", 0.03)]:
        queue.push(child(leaf, "seed", page=0.5, link=link))
    assert queue.stats.get_value("focused/beam/dropped") == 1  # f: the beam is full again
    assert drain(queue) == ["c", "d", "e"]


def test_beam_a_candidate_a_redirect_moves_into_the_current_generation_frees_its_place(key):
    """A page of the current generation that redirects to a candidate of the next one finds it
    again at its own level: the candidate is fetched now, and its place in the next generation
    is free. It stayed taken: that generation kept fewer than k, a newcomer with room dropped."""
    queue = make_queue("beam", key, beam_width=2)
    out = hold_flights(queue)
    queue.push(req("seed", depth=0))
    queue.pop()
    queue.push(child("a", "seed", page=0.5, link=0.9))
    queue.push(child("b", "seed", page=0.5, link=0.8))
    out.add(id(queue.pop()))  # a
    queue.push(child("x", "a", page=0.6, link=0.5, depth=2))
    queue.push(child("y", "a", page=0.6, link=0.4, depth=2))
    # a redirects to x: the redirected request keeps a's meta, level 1 with it.
    assert queue.rediscover(child("x", "seed", page=0.5, link=0.9))
    assert [name(queue.pop()), name(queue.pop())] == ["x", "b"]
    queue.push(child("z", "b", page=0.6, link=0.45, depth=2))  # generation 2 has room: y, z
    assert not queue.stats.get_value("focused/beam/dropped")
    out.clear()
    assert drain(queue) == ["z", "y"]


def test_beam_never_keeps_more_than_k_per_generation_and_waits_for_the_generation(key):
    width, rng = 3, random.Random(7)
    queue = make_queue("beam", key, beam_width=width)
    out = hold_flights(queue)
    queue.push(req("seed", depth=0))
    fetched: list = []
    serial = 0
    while len(queue):
        popped = []
        while (request := queue.pop()) is not None:
            out.add(id(request))
            popped.append(request)
        assert popped, "pop held back with no flight out"
        # The next generation is held back while one of this generation is out.
        assert len({r.meta["depth"] for r in popped}) == 1
        for request in popped:
            fetched.append(request)
            depth = request.meta["depth"]
            if depth < 4:
                for _ in range(rng.randrange(0, 8)):
                    serial += 1
                    page = rng.random()
                    queue.push(child(f"n{serial}", name(request), page, rng.random(), depth + 1))
            out.discard(id(request))
    per_generation = Counter(r.meta["depth"] for r in fetched)
    assert max(per_generation.values()) <= width
    assert set(per_generation) == {0, 1, 2, 3, 4}
    assert queue.stats.get_value("focused/beam/dropped") > 0


# -- annealing and threshold acceptance ----------------------------------------------------------


def random_walk(queue, rng: random.Random, pops: int, prefix: str = "n") -> list[str]:
    """Pop ``pops`` pages; each pushes 8 children with random link relevance."""
    popped, serial = [], 0
    if prefix == "n":
        queue.push(req("seed", depth=0))
    for _ in range(pops):
        request = queue.pop()
        if request is None:
            break
        popped.append(name(request))
        depth = request.meta.get("depth", 0) + 1
        for _ in range(8):
            serial += 1
            link = rng.random()
            queue.push(child(f"{prefix}{serial}", name(request), 0.5, link, depth=depth))
    return popped


def test_annealing_accepts_fewer_worse_moves_as_it_cools_and_loses_nothing(key):
    queue = make_queue("annealing", key, factor=0.97, seed=3)
    stats = queue.stats

    def worse_moves() -> tuple[int, int]:
        return (
            stats.get_value("focused/annealing/accepted_worse", 0),
            stats.get_value("focused/annealing/rejected", 0),
        )

    popped = random_walk(queue, random.Random(1), 30)
    early_accepted, early_rejected = worse_moves()
    popped += random_walk(queue, random.Random(2), 60, prefix="m")  # going on
    late_accepted, late_rejected = (
        a - b for a, b in zip(worse_moves(), (early_accepted, early_rejected), strict=True)
    )
    early = early_accepted / (early_accepted + early_rejected)
    late = late_accepted / (late_accepted + late_rejected)
    assert early > 0.5 > late, (early, late)
    # Derived T0: exp(-mean |Δ| / T0) = 0.8 over the first 30 candidates' worse moves.
    sample = queue._worse_sample
    assert queue._t0 == pytest.approx(sum(sample) / len(sample) / math.log(1.25))
    # Rejected candidates stay queued: everything pushed is fetched exactly once.
    pushed = 1 + 8 * 30 + 8 * 60
    popped += drain(queue)
    assert len(popped) == len(set(popped)) == pushed
    assert len(queue) == 0


@pytest.mark.parametrize("strategy", ["annealing", "threshold"])
def test_a_rejected_candidate_found_again_is_raised_only_by_a_better_discovery(key, strategy):
    """A rejected candidate ranks REJECTED (2) below its value: a discovery is compared with the
    value, or any, however poor, beat the rank and replaced the request's better path."""
    queue = make_queue(strategy, key, t0=1e-9)  # cold: every worse move is refused
    queue.push(req("seed", depth=0))
    queue.pop()
    queue.push(child("x", "seed", page=0.6, link=0.5))
    queue.push(child("y", "seed", page=0.6, link=0.3))
    fp = queue._fingerprint(req("x"))
    queue._fresh = OrderedDict([("http://t/seed", [(fp, 0.5 - 0.6)])])
    assert name(queue.pop()) == "y"  # x drawn (Δ = -0.1) and refused; then the best queued
    assert queue.frontier.key_of(fp)[:2] == (pytest.approx(-0.5 + 2), -0.6)
    assert not queue.rediscover(child("x", "poor", page=0.05, link=0.1))
    kept = queue.frontier.request_of(fp)
    assert (kept.meta["parent_url"], kept.meta["link_relevance"]) == ("http://t/seed", 0.5)
    assert queue.frontier.key_of(fp)[:2] == (pytest.approx(-0.5 + 2), -0.6)
    assert queue.stats.get_value("focused/rescored") is None
    queue.push(child("w", "seed", page=0.6, link=0.2))
    assert queue.rediscover(child("x", "good", page=0.8, link=0.7))
    assert queue.frontier.key_of(fp)[:2] == (-0.7, -0.8)
    queue._fresh.clear()
    assert [name(queue.pop()), name(queue.pop())] == ["x", "w"]


@pytest.mark.parametrize("strategy", ["annealing", "threshold"])
def test_a_candidate_drawn_from_two_pages_and_refused_twice_is_ranked_below_once(key, strategy):
    """Rejected candidates rank by value below the others: a URL found on two current pages is
    drawn from both, and a second penalty put it below a rejected candidate of lower value."""
    queue = make_queue(strategy, key, t0=1e-9)  # cold: every worse move is refused
    queue.push(req("seed", depth=0))
    queue.pop()
    queue.push(child("x", "a", page=0.6, link=0.5))
    queue.push(child("y", "a", page=0.6, link=0.3))
    assert not queue.rediscover(child("x", "b", page=0.6, link=0.5))  # a candidate from b too
    # Three draws, three refusals (Δ = -0.1, -0.3, -0.1); then the best queued: x, of value 0.5.
    assert name(queue.pop()) == "x"
    assert queue.stats.get_value(f"focused/{strategy}/rejected") == 3
    assert name(queue.pop()) == "y"


@pytest.mark.parametrize("strategy", ["annealing", "threshold"])
def test_a_url_found_again_on_a_current_page_is_a_move_from_that_page(key, strategy):
    """x, queued from a (relevance 0.6) with a link of 0.5, is found again on b (0.1) with a link
    of 0.5, which does not raise it. As a candidate of b the move is Δ = 0.5 - 0.1 = +0.4, an
    improving one, not a's Δ = 0.5 - 0.6 = -0.1, which a cold queue refuses."""
    queue = make_queue(strategy, key, t0=1e-9)
    queue.push(req("seed", depth=0))
    queue.pop()
    queue.push(child("x", "a", page=0.6, link=0.5))
    queue._fresh.clear()  # a is no longer a current page
    assert not queue.rediscover(child("x", "b", page=0.1, link=0.5))
    assert name(queue.pop()) == "x"
    assert queue.stats.get_value(f"focused/{strategy}/improving") == 1
    assert queue.stats.get_value(f"focused/{strategy}/rejected") is None
    if not key:
        return  # a memory queue keeps nothing on close
    # Saved and resumed, a candidate keeps its move's Δ.
    queue.push(child("y", "a", page=0.6, link=0.5))
    queue._fresh.clear()
    assert not queue.rediscover(child("y", "b", page=0.1, link=0.5))
    state = json.loads(json.dumps(queue.close()))
    type(queue).check_state(state)
    resumed = make_queue(strategy, key, state=state, t0=1e-9)
    assert name(resumed.pop()) == "y"
    assert resumed.stats.get_value(f"focused/{strategy}/improving") == 1


@pytest.mark.parametrize("sent_again", ["retried", "redirected"])
@pytest.mark.parametrize("strategy", ["annealing", "threshold"])
def test_annealing_a_move_sent_again_is_fetched_not_judged_again(key, strategy, sent_again):
    """x, a worse move accepted at T0, comes back with its meta: retried, or redirected to y.
    The move was made: it is fetched next, before w, p's other child, is drawn. It was a fresh
    candidate again, rejected once T had fallen, and fetched after w, the better of the two."""
    cooling = {"t0": 100.0, "factor": 1e-5}  # T: 100, then 0.001 (exp(-0.3 / 100) > 0.99)
    queue = make_queue(strategy, key, **cooling)
    queue.push(child("x", "p", page=0.6, link=0.3))
    x = queue.pop()
    assert queue.stats.get_value(f"focused/{strategy}/accepted_worse") == 1
    queue.push(child("w", "p", page=0.6, link=0.5))
    again = fetched_again(x, sent_again)
    queue.push(again)
    if key:  # the request sent again is still first after a pause
        state = json.loads(json.dumps(queue.close()))
        type(queue).check_state(state)
        queue = make_queue(strategy, key, state=state, **cooling)
    assert drain(queue) == [name(again), "w"]


@pytest.mark.parametrize("strategy", ["annealing", "threshold"])
def test_annealing_a_trap_request_retried_still_waits_behind_the_others(strategy):
    queue = make_queue(strategy)
    queue.push(child("trap", "p", page=0.6, link=0.9, **{TRAP_META: "t"}))
    trap = queue.pop()
    queue.push(child("w", "p", page=0.6, link=0.1))
    queue.push(trap.replace(dont_filter=True))
    assert drain(queue) == ["w", "trap"]


def test_annealing_resumes_the_fresh_candidates_of_a_state_saved_before_their_moves():
    queue = make_queue("annealing", "", state={"fresh": [["http://t/a", ["ab12"]]]})
    assert queue._fresh == {"http://t/a": [(bytes.fromhex("ab12"), None)]}


def test_annealing_is_reproducible_with_a_seed():
    orders = [random_walk(make_queue("annealing", seed=5), random.Random(1), 40) for _ in range(2)]
    assert orders[0] == orders[1]
    assert random_walk(make_queue("annealing", seed=6), random.Random(1), 40) != orders[0]


def test_annealing_accepts_a_worse_move_with_probability_exp_delta_over_t():
    queue = make_queue("annealing")
    odds = math.exp(-0.1 / 0.5)  # Δ = -0.1 at T = 0.5: 0.8187
    for draw, accepted in [(odds - 1e-9, True), (odds + 1e-9, False)]:
        queue._random = SimpleNamespace(random=lambda draw=draw: draw)
        assert queue.accepts(-0.1, 0.5) is accepted


def test_geometric_cooling_multiplies_t0_by_factor_per_move():
    queue = make_queue("annealing", t0=0.4, factor=0.5)
    queue._moves = 3
    assert queue.temperature() == pytest.approx(0.4 * 0.5**3)


def test_linear_cooling_reaches_zero_at_the_page_budget():
    queue = make_queue("annealing", t0=0.4, cooling="linear")
    queue._budget = 10  # CLOSESPIDER_PAGECOUNT
    queue._moves = 5
    assert queue.temperature() == pytest.approx(0.2)
    queue._moves = 10
    assert queue.temperature() == 0.0


def test_annealing_frozen_still_takes_a_sideways_move():
    """exp(Δ/T) is 1 for Δ = 0 at every T > 0; at T = 0 such a move was refused, so a crawl
    cooled to 0 (linear cooling at its budget) ranked an equal candidate below all others."""
    queue = make_queue("annealing", t0=0.4, cooling="linear")
    assert queue.accepts(0.0, 0.0) and queue.accepts(0.0, 1e-9)
    assert not queue.accepts(-1e-9, 0.0) and queue.accepts(1e-9, 0.0)


@pytest.mark.parametrize("strategy", ["annealing", "threshold"])
def test_cooling_resumed_after_a_crash_goes_on_from_the_crawls_fetches(key, strategy):
    """The moves are saved only on a clean pause; after kill -9 the queue came back with none,
    while the page budget's count (``responses``) and the fetch order (``pages``) survive: the
    resumed crawl cooled from T0 again and reached its budget hot (0.1 · (1 - 128/150) after a
    kill at 23 responses, instead of 0)."""
    queue = make_queue(strategy, key, t0=0.4, cooling="linear")
    queue._budget = 10  # CLOSESPIDER_PAGECOUNT
    # Loaded and recovered when the spider opens, after the scheduler (focused.resume).
    queue.crawler.spider.state.update(responses=6, pages=5)
    assert queue.temperature() == pytest.approx(0.4 * (1 - 6 / 10))
    queue.push(req("seed", depth=0))
    queue.pop()
    assert queue.state()["moves"] == 7  # saved at the next pause, from the crawl's count on
    assert queue.stats.get_value(f"focused/{strategy}/temperature") == pytest.approx(0.12)
    queue.crawler.spider.state["responses"] = 10
    assert queue.temperature() == 0.0


@pytest.mark.parametrize("strategy", ["annealing", "threshold"])
def test_t0_is_derived_from_worse_moves_only_not_sideways_ones(strategy):
    """A sideways move (Δ = 0: an off-topic page's off-topic links) is no worse move: it is
    always accepted. Counted in the sample with |Δ| = 0, it pulled T0 down, and when the first
    30 candidates were all sideways T0 came out 0 and stayed there: the whole crawl refused
    every worse move, a hill climb instead of an annealing."""
    queue = make_queue(strategy, factor=1.0)  # no cooling: T is T0
    queue.push(req("seed", depth=0))
    queue.pop()
    for serial in range(30):
        queue.push(child(f"flat{serial}", "seed", page=0.0, link=0.0))
    assert queue.temperature() == 0.0  # no worse move seen yet
    worse = [0.25, 0.125, 0.375]
    for serial, drop in enumerate(worse):
        queue.push(child(f"worse{serial}", "seed", page=0.5, link=0.5 - drop))
    # T0 comes from the first worse move, as when none of the first 30 candidates is worse.
    assert queue.temperature() == pytest.approx(queue.initial_temperature(worse[:1]))
    mixed = make_queue(strategy, factor=1.0)
    for serial, drop in enumerate([0.0, *worse, 0.0]):
        mixed.push(child(f"m{serial}", "seed", page=0.5, link=0.5 - drop))
    assert mixed.temperature() == pytest.approx(mixed.initial_temperature(worse))
    # A JOBDIR paused with sideways moves in its sample (saved so before) resumes without them.
    saved = {"moves": 1, "t0": 0.0, "worse_sample": [0.0] * 30, "seen": 30}
    resumed = make_queue(strategy, state=saved, factor=1.0)
    resumed.push(child("worse", "seed", page=0.5, link=0.25))
    assert resumed.temperature() == pytest.approx(resumed.initial_temperature([0.25]))


def test_threshold_accepts_exactly_when_delta_is_above_minus_t(key):
    queue = make_queue("threshold", key, t0=0.125, factor=1.0)  # T stays 0.125
    assert queue.accepts(-0.124, 0.125) and not queue.accepts(-0.125, 0.125)
    queue.push(req("seed", depth=0))
    queue.pop()
    for leaf, link in [("up", 0.5625), ("near", 0.4375), ("edge", 0.375), ("far", 0.25)]:
        queue.push(child(leaf, "seed", page=0.5, link=link))
    accepted = [name(queue.pop()) for _ in range(2)]
    assert sorted(accepted) == ["near", "up"]
    assert drain(queue) == ["edge", "far"]  # rejected, not lost: fetched after the rest
    stats = queue.stats
    assert stats.get_value("focused/threshold/rejected") == 2  # edge (Δ = -T) and far
    assert stats.get_value("focused/threshold/accepted_worse") == 1  # near


def test_threshold_takes_a_sideways_move_before_a_worse_move_derives_t0(key):
    """Until the first worse move is seen a derived T0 is unknown and T is 0, and Δ > -0
    refused every sideways move (an off-topic page's off-topic links), each ranked below every
    candidate not yet refused, where the source's starting T, at which about 80% of worse
    moves pass, accepts it, and annealing took it: Δ > -T holds for Δ = 0 at every T > 0."""
    queue = make_queue("threshold", key)
    queue.push(req("seed", depth=0))
    queue.pop()
    for leaf in ["a", "b", "c"]:
        queue.push(child(leaf, "seed", page=0.5, link=0.5))
    assert queue.temperature() == 0.0  # no worse move seen yet
    assert sorted(name(queue.pop()) for _ in range(3)) == ["a", "b", "c"]
    stats = queue.stats
    assert stats.get_value("focused/threshold/rejected") is None
    assert stats.get_value("focused/threshold/best_queued") == 1  # the seed: the rest drawn
    # Frozen, only worse moves are refused, as in annealing.
    assert queue.accepts(0.0, 0.0) and not queue.accepts(-1e-9, 0.0)


@pytest.mark.parametrize("strategy", ["annealing", "threshold"])
def test_a_sideways_move_is_counted_apart_from_worse_moves(key, strategy):
    """A sideways move (Δ = 0: an off-topic page's off-topic links) was counted in
    accepted_worse: a crawl of only sideways moves said it had accepted that many worse ones."""
    queue = make_queue(strategy, key, t0=0.25, factor=1.0)
    queue.push(req("seed", depth=0))
    queue.pop()
    for leaf, link in [("a", 0.5), ("b", 0.5), ("worse", 0.375)]:
        queue.push(child(leaf, "seed", page=0.5, link=link))
    popped = [name(queue.pop()) for _ in range(3)]
    stats = queue.stats
    assert stats.get_value(f"focused/{strategy}/sideways") == 2, popped
    accepted_worse = stats.get_value(f"focused/{strategy}/accepted_worse", 0)
    assert accepted_worse + stats.get_value(f"focused/{strategy}/rejected", 0) == 1


def test_threshold_derives_t0_from_the_80th_percentile_of_worse_moves():
    queue = make_queue("threshold")
    worse = [0.01 * i for i in range(1, 11)]
    t0 = queue.initial_temperature(worse)
    assert sum(d < t0 for d in worse) == 8  # 80% of these worse moves accepted at first


@pytest.mark.parametrize(
    ("worse", "accepted"),
    [
        ([0.25] * 10, 10),  # all tied: T0 = 0.25 accepted none of them
        ([0.0625, 0.125, *[0.25] * 8], 10),  # tied at the percentile: 2 of 10 were accepted
        ([0.0625] * 5 + [0.125] * 3 + [0.25] * 2, 8),  # tied below it: exactly 80% as before
    ],
)
def test_threshold_t0_accepts_at_least_80_percent_of_worse_moves_tied_or_not(worse, accepted):
    """A move is accepted when |Δ| < T, strictly: T0 = the 80th percentile's |Δ| refused every
    move tied with it, and worse moves tie (links no more relevant than 0 on one page all have
    Δ = -relevance(page)), so a crawl could start refusing every worse move. T0 is now the
    smallest sample value with 80% of the moves below it, or just above them all."""
    queue = make_queue("threshold")
    t0 = queue.initial_temperature(worse)
    assert sum(queue.accepts(-d, t0) for d in worse) == accepted
    assert t0 == min(d for d in [*worse, math.nextafter(max(worse), 1.0)] if d > worse[7])


@pytest.mark.parametrize("size", [1, 2, 3, 4, 6, 30])
def test_threshold_t0_accepts_80_percent_of_a_small_sample_too(size):
    """With one worse move in the sample (a crawl whose first candidates all tie or climb), T0
    was that move's own |Δ|, which refused it: the 80 % were rounded down."""
    queue = make_queue("threshold")
    worse = [0.05 * i for i in range(1, size + 1)]
    t0 = queue.initial_temperature(worse)
    assert sum(queue.accepts(-d, t0) for d in worse) == math.ceil(0.8 * size - 1e-9)


# -- particle swarm ------------------------------------------------------------------------------


def test_pso_link_value_is_alpha_immediate_plus_beta_future():
    queue = make_queue("pso")
    queue.credit(["nest", "bird"])  # nest 1.0, bird 0.5: M("bird") = 0.5 / 1.0
    queue.swarm["x"][queue._active] = [0.2, 0.7]
    link = req("x", link_relevance=0.4, anchor="bird")
    assert queue.score(link) == pytest.approx(0.2 * 0.4 + 0.7 * 0.5)


def test_pso_credits_path_words_with_a_discount_and_normalises_m():
    queue = make_queue("pso", discount=0.5)
    queue.credit(["bird nest", "wings", "ocean"])  # the link into the page first
    assert queue.word_value == {"bird": 1.0, "nest": 1.0, "wings": 0.5, "ocean": 0.25}
    assert queue.future_value("bird ocean") == pytest.approx((1.0 + 0.25) / (2 * 1.0))
    assert queue.future_value("unknown words") == 0.0
    # A relevant page's outcome arrives with its first child: its path is credited once more.
    queue.push(req("seed", depth=0))
    seed = queue.pop()
    inherited = queue.child_meta({**seed.meta, "anchor": "wings", "pso_path": ["bird"]}, None, True)
    assert inherited == {"pso_path": ["wings", "bird"]}
    queue.push(child("x", name(seed), page=0.9, link=0.2, parent_fetched_url=seed.url, **inherited))
    assert queue.word_value["wings"] == 1.5 and queue.word_value["bird"] == 1.5
    assert list(queue._outcomes[0]) == [True]


def test_pso_flies_the_particle_with_the_smallest_slct():
    queue = make_queue("pso", particles=5)
    swarm = queue.swarm
    swarm["f"] = [0.2, 0.5, 0.1, 0.3, 0.4]
    swarm["best_f"] = list(swarm["f"])
    swarm["best_x"] = [list(x) for x in swarm["x"]]
    swarm["momentum"] = [0.5, 0.1, 0.3, 0.05, 0.2]
    swarm["activity"] = [3, 2, 1, 4, 1]
    # slct = Σ|p| + log(a): 0.5+1.099=1.599, 0.1+0.693=0.793, 0.3+0=0.3, 0.05+1.386=1.436, 0.2
    assert [round(queue.slct(i), 3) for i in range(5)] == [1.599, 0.793, 0.3, 1.436, 0.2]
    queue._active = 0
    # Particle 4 is judged at the position it leaves, on the fetches it made there: fitness
    # 0.25, momentum 0.2 + |0.25 - 0.4|. Particle 0, whose turn ends, is judged later, once
    # the outcomes of its turn are back.
    queue._outcomes[0].extend([True, True])
    queue._outcomes[4].extend([True, False, False, False])
    queue.end_turn()
    assert queue._active == 4 and swarm["activity"][4] == 2
    assert swarm["momentum"][4] == pytest.approx(0.35)
    assert swarm["f"][4] == 0.25 and swarm["best_f"][4] == 0.4
    assert swarm["momentum"][0] == 0.5 and swarm["f"][0] == 0.2


def test_pso_flight_is_the_velocity_update_worked_by_hand():
    queue = make_queue("pso", particles=7)
    swarm = queue.swarm
    swarm["best_f"] = [0.1, 0.6, 0.2, 0.3, 0.9, 0.0, 0.4]
    swarm["best_x"] = [[0.0, 0.0] for _ in range(7)]
    swarm["best_x"][1], swarm["best_x"][4] = [0.8, 0.2], [0.3, 0.9]
    swarm["x"][0], swarm["v"][0] = [0.5, 0.5], [0.1, -0.2]
    draws = iter([0.5, 0.25, 0.75, 0.5])  # r1, r2 of each dimension
    queue._random = SimpleNamespace(random=lambda: next(draws))
    queue.fly(0)
    # lbest: the best of particles 5, 6, 0, 1, 2 (the ring of 5 around 0) is 1; gbest is 4.
    # v0 = 0.7298·0.1 + 1.496·0.5·(0.8 - 0.5) + 1.496·0.25·(0.3 - 0.5) = 0.22258
    # v1 = 0.7298·(-0.2) + 1.496·0.75·(0.2 - 0.5) + 1.496·0.5·(0.9 - 0.5) = -0.18336
    assert swarm["v"][0] == pytest.approx([0.22258, -0.18336])
    assert swarm["x"][0] == pytest.approx([0.72258, 0.31664])
    # Out of the unit square: clipped, and that component of v zeroed.
    swarm["x"][6], swarm["v"][6] = [0.9, 0.1], [0.5, 0.0]
    queue._random = SimpleNamespace(random=lambda: 0.0)
    queue.fly(6)
    assert swarm["x"][6] == pytest.approx([1.0, 0.1]) and swarm["v"][6] == [0.0, 0.0]


def test_pso_flies_toward_no_best_that_no_outcome_judged():
    """Before any outcome has come back, no particle has a best: the swarm keeps its weights
    (at rest, it stays), and is not pulled to the placeholder (0, 0), where every link's value
    is 0 and the crawl would be in the order of discovery."""
    queue = make_queue("pso", particles=7)
    swarm = queue.swarm
    swarm["x"][0], swarm["v"][0] = [0.5, 0.5], [0.1, -0.2]
    queue.fly(0)
    assert swarm["v"][0] == pytest.approx([0.07298, -0.14596])  # ω·v: inertia alone
    assert swarm["x"][0] == pytest.approx([0.57298, 0.35404])
    # One judged particle outside the ring of 0 (4, at best fitness 0): gbest, but no lbest.
    swarm["best_f"][4], swarm["best_x"][4] = 0.0, [0.3, 0.9]
    swarm["x"][0], swarm["v"][0] = [0.5, 0.5], [0.0, 0.0]
    queue._random = SimpleNamespace(random=lambda: 0.5)
    queue.fly(0)
    # v = 1.496·0.5·(gbest - x); the lbest term is 0.
    assert swarm["v"][0] == pytest.approx([0.748 * -0.2, 0.748 * 0.4])


def _swarm_of_five(queue, momentum: list[float]) -> None:
    """Every particle has had its first turn (fitness 0.5, best position (0.9, 0.9)); particle 0
    is at (0.1, 0.1), at rest."""
    swarm = queue.swarm
    swarm["activity"] = [1] * 5
    swarm["f"], swarm["best_f"] = [0.5] * 5, [0.5] * 5
    swarm["best_x"] = [[0.9, 0.9] for _ in range(5)]
    swarm["momentum"] = momentum
    swarm["x"][0], swarm["v"][0] = [0.1, 0.1], [0.0, 0.0]


def _pso_child(queue, page, relevance: float, parent: str | None = None):
    """The first child of a page popped by the pso queue, with the meta the middleware writes:
    ``parent_url`` (the page as stored: ``parent`` when given), ``parent_fetched_url`` (the URL
    popped), and what ``child_meta`` adds."""
    inherited = queue.child_meta(page.meta, None, relevance >= 0.15)
    return child(
        f"{name(page)}-child",
        parent or name(page),
        page=relevance,
        link=0.5,
        parent_fetched_url=page.url,
        **inherited,
    )


def _relevant(queue, pages) -> None:
    """The pages' outcomes come back, with a first child each: relevant."""
    for page in pages:
        queue.push(_pso_child(queue, page, 0.9))


def test_pso_credits_a_position_with_the_harvest_of_the_fetches_made_there():
    """A page's outcome comes back after its fetch, often after the turn that fetched it ended:
    the harvest a particle made at one position must not be credited to the next one."""
    queue = make_queue("pso", particles=5, epoch=2)
    _swarm_of_five(queue, [0.3, 0.0, 9.0, 9.0, 9.0])  # slct: 0.3, 0, 9, 9, 9
    for i in range(12):
        queue.push(req(f"s{i}", depth=0))
    made_at_p0 = [queue.pop(), queue.pop()]  # particle 0's turn at (0.1, 0.1); then 1 flies
    assert queue._active == 1
    _relevant(queue, made_at_p0)
    queue.pop(), queue.pop()  # particle 1's turn; slct 0.3 < 0 + log 2: particle 0 flies
    swarm = queue.swarm
    assert queue._active == 0
    # Judged as it leaves (0.1, 0.1), on the two relevant fetches made there.
    assert swarm["f"][0] == 1.0 and swarm["momentum"][0] == pytest.approx(0.8)
    assert swarm["best_f"][0] == 1.0 and swarm["best_x"][0] == [0.1, 0.1]
    # Now the swarm's best: lbest = gbest = x, and v was 0, so it stays.
    assert swarm["x"][0] == [0.1, 0.1]


def test_pso_first_flight_flies_toward_the_best_first_turn():
    """Every particle's first turn is judged before the first flies (but the last, whose
    outcomes are not back yet): the first flight has the swarm's best to fly toward."""
    queue = make_queue("pso", particles=5, epoch=1, seed=2)
    start = [list(x) for x in queue.swarm["x"]]
    for i in range(10):
        queue.push(req(f"s{i}", depth=0))
    first_turns = [queue.pop() for _ in range(4)]  # particles 0 to 3, a fetch each
    _relevant(queue, first_turns[2:3])  # particle 2's page was relevant
    for page in first_turns[:2] + first_turns[3:]:
        queue.push(_pso_child(queue, page, 0.0))
    queue.pop()  # particle 4's turn: then particle 0 flies
    swarm = queue.swarm
    assert swarm["f"][:4] == [0.0, 0.0, 1.0, 0.0] and swarm["f"][4] is None
    assert swarm["best_x"][2] == start[2]
    assert queue._active == 0 and swarm["x"][0] != start[0]  # toward particle 2's position


def test_pso_credits_no_position_with_the_harvest_of_the_one_before():
    queue = make_queue("pso", particles=5, epoch=2)
    _swarm_of_five(queue, [0.0, 9.0, 9.0, 9.0, 9.0])  # particle 0 flies at every turn's end
    for i in range(12):
        queue.push(req(f"s{i}", depth=0))
    made_at_p0 = [queue.pop(), queue.pop()]  # at (0.1, 0.1); then particle 0 flies
    swarm = queue.swarm
    assert queue._active == 0 and swarm["x"][0] != [0.1, 0.1]
    _relevant(queue, made_at_p0)  # back once it has left (0.1, 0.1)
    queue.pop(), queue.pop()  # its turn at the new position ends, no outcome of it back yet
    # Nothing was measured at the new position: it is not credited with those two fetches.
    assert swarm["f"][0] == 0.5 and swarm["momentum"][0] == 0.0
    assert swarm["best_f"][0] == 0.5 and swarm["best_x"][0] == [0.9, 0.9]


def test_pso_credits_a_page_stored_under_another_url_to_the_particle_that_fetched_it():
    """A page stored under its rel=canonical gives its children a ``parent_url`` the queue
    never popped: its outcome still reaches the particle that fetched it, by the URL it was
    popped at (``parent_fetched_url``, which the scoring middleware writes)."""
    queue = make_queue("pso", particles=5, epoch=2)
    queue.push(req("s0", depth=0))
    page = queue.pop()
    queue.push(_pso_child(queue, page, 0.9, parent="canonical-s0"))
    assert list(queue._outcomes[0]) == [True]


def test_pso_weights_stay_in_the_unit_square_and_the_frontier_is_rekeyed(key):
    queue = make_queue("pso", key, epoch=3, seed=11)
    rng = random.Random(4)
    queue.push(req("seed", depth=0))
    serial = 0
    for _ in range(200):
        request = queue.pop()
        relevant = rng.random() < 0.4
        for _ in range(4):
            serial += 1
            queue.push(
                child(
                    f"n{serial}",
                    name(request),
                    page=0.6 if relevant else 0.05,
                    link=rng.random(),
                    anchor=rng.choice(["bird nest", "ocean ship", "wings eggs", "city map"]),
                    parent_fetched_url=request.url,
                    **queue.child_meta(request.meta, None, relevant),
                )
            )
        for x in queue.swarm["x"]:
            assert 0.0 <= x[0] <= 1.0 and 0.0 <= x[1] <= 1.0
    assert queue.stats.get_value("focused/pso/turns") >= 60
    assert queue.stats.get_value("focused/pso/rekeyed") > 0
    assert len(set(map(tuple, queue.swarm["x"]))) > 1
    # The popped request is the best under the current weights among those re-keyed.
    assert len(queue) == 1 + 4 * 200 - 200


def test_pso_a_url_found_again_is_compared_with_its_value_under_the_current_weights(key):
    """The frontier is re-keyed lazily: a queued key may be of older weights. A discovery worth
    more now than the queued request (but less than its stale key) must still raise it."""
    queue = make_queue("pso", key)
    queue.swarm["x"][queue._active] = [0.9, 0.1]
    queue.push(req("x", parent_url="http://t/a", link_relevance=0.9, anchor="click here"))
    queue.push(req("z", parent_url="http://t/a", link_relevance=0.3, anchor="more"))
    queue.credit(["bird", "nest"])  # bird 1.0, nest 0.5: M("nest") = 0.5
    queue.swarm["x"][queue._active] = [0.1, 0.9]  # the swarm flies: new weights
    queue._version += 1
    # Now x (0.1·0.9 + 0.9·0 = 0.09) and z (0.03) are below the new discovery of x:
    # 0.1·0.5 + 0.9·0.5 = 0.5, which is below x's stale key (0.9·0.9 = 0.81).
    assert queue.rediscover(req("x", parent_url="http://t/b", link_relevance=0.5, anchor="nest"))
    popped = queue.pop()
    assert (name(popped), popped.meta["anchor"]) == ("x", "nest")
    assert queue.score(popped) == pytest.approx(0.5)
    # A discovery worth less now than the queued request raises nothing.
    queue.swarm["x"][queue._active] = [0.9, 0.1]
    queue._version += 1
    assert not queue.rediscover(req("z", parent_url="http://t/c", link_relevance=0.2, anchor="x"))
    assert name(queue.pop()) == "z" and len(queue) == 0


def test_pso_a_url_found_again_is_compared_with_its_value_under_the_current_word_values(key):
    """A queued link's M is as of its scoring: a word credited since raises what it is worth.
    A discovery worth more than the stale key, but less than the queued link now, replaced it."""
    queue = make_queue("pso", key)
    queue.swarm["x"][queue._active] = [0.5, 0.5]
    queue.push(req("x", parent_url="http://t/a", link_relevance=0.4, anchor="nest"))  # 0.2
    queue.credit(["nest"])  # M("nest") = 1: x is worth 0.5·0.4 + 0.5·1 = 0.7 now
    queue.push(req("z", parent_url="http://t/a", link_relevance=0.9, anchor="more"))  # 0.45
    # 0.5·0.6 + 0.5·0 = 0.3: above x's key (0.2), below what x is worth (0.7)
    assert not queue.rediscover(req("x", parent_url="http://t/b", link_relevance=0.6, anchor="a"))
    popped = queue.pop()
    assert (name(popped), popped.meta["anchor"]) == ("x", "nest")
    assert name(queue.pop()) == "z"


# -- flights -------------------------------------------------------------------------------------


def test_a_flight_lands_once_its_pages_links_are_queued_not_once_its_page_is_stored():
    """A page whose links are all queued may still be in the scraper, its item on its way to
    the store: its flight has landed all the same (the next pop must not depend on the store's
    speed). A page still being parsed, or downloading, is out."""
    stored, parsed, downloading = req("stored"), req("parsed"), req("downloading")
    engine = SimpleNamespace(
        downloader=SimpleNamespace(active={downloading}),
        scraper=SimpleNamespace(slot=SimpleNamespace(active={stored, parsed}, queue=[])),
        _slot=SimpleNamespace(scheduler=SimpleNamespace(scored_pages={stored})),
    )
    flights = Flights(SimpleNamespace(engine=engine))
    for request in (stored, parsed, downloading):
        flights.launch(request, name(request))
    assert flights.land() == ["stored"]
    assert sorted(flights.payloads()) == ["downloading", "parsed"]


# -- bees ----------------------------------------------------------------------------------------


def test_bees_never_have_more_than_n_bees_flights_out(key):
    queue = make_queue("bees", key, n_bees=3, seed=1)
    out = hold_flights(queue)
    queue.push(req("seed", depth=0))
    seed = queue.pop()
    for i in range(10):
        queue.push(child(f"c{i}", "seed", page=0.5, link=0.5, found_by_bee=seed.meta["bee"]))
    out.discard(id(seed))
    flying = []
    while (request := queue.pop()) is not None:
        out.add(id(request))
        flying.append(request)
    assert len(flying) == 3 and len(queue) == 7  # held back, not lost
    assert len({r.meta["bee"] for r in flying}) == 3
    out.discard(id(flying[0]))
    again = queue.pop()  # a bee landed: it may fly again
    assert again is not None and again.meta["bee"] == flying[0].meta["bee"]
    out.add(id(again))
    assert queue.pop() is None


def test_bees_pick_dancing_sources_in_proportion_to_quality():
    queue = make_queue("bees", seed=2)
    queue.dances = [
        {"q": 0.6, "until": 10**9, "links": ["00"]},
        {"q": 0.3, "until": 10**9, "links": ["00"]},
        {"q": 0.1, "until": 10**9, "links": ["00"]},
    ]
    picks = Counter(queue.choose_dance()["q"] for _ in range(20_000))
    for quality in (0.6, 0.3, 0.1):
        assert picks[quality] / 20_000 == pytest.approx(quality, abs=0.015)


def test_bees_return_with_probability_q_and_dance_ceil_q_dance_time_flights():
    queue = make_queue("bees", n_bees=1, dance_time=4)
    queue.push(req("seed", depth=0))
    seed = queue.pop()
    for i in range(3):
        link = child(f"c{i}", "seed", page=0.3, link=0.1, found_by_bee=seed.meta["bee"])
        queue.push(link)
    draws = iter([0.29, 0.0])  # below q = 0.3: home; then the dance's pick
    queue._random = SimpleNamespace(random=lambda: next(draws), randrange=lambda n: 0)
    queue.pop()
    assert queue.stats.get_value("focused/bees/returns") == 1
    assert queue.dances[0]["until"] == 1 + math.ceil(0.3 * 4)  # 1 flight made, then 2 more
    queue = make_queue("bees", n_bees=1, dance_time=4)
    queue.push(req("seed", depth=0))
    seed = queue.pop()
    queue.push(child("c", "seed", page=0.3, link=0.1, found_by_bee=seed.meta["bee"]))
    queue._random = SimpleNamespace(random=lambda: 0.3, randrange=lambda n: 0)  # not below q
    assert name(queue.pop()) == "c" and queue.stats.get_value("focused/bees/follows") == 1


def test_bees_return_and_dance_for_good_pages_and_the_dance_ends(key):
    queue = make_queue("bees", key, n_bees=1, dance_time=4, seed=0)
    queue.push(req("seed", depth=0))
    seed = queue.pop()
    bee = seed.meta["bee"]
    # A page of quality 1 always sends the bee home, and it dances for 4 flights.
    for i in range(6):
        queue.push(child(f"c{i}", "seed", page=1.0, link=0.1, found_by_bee=bee))
    first = queue.pop()
    assert queue.stats.get_value("focused/bees/dances") == 1
    assert queue.dances[0]["until"] == 1 + 4
    picks = [first] + [queue.pop() for _ in range(3)]
    assert all(name(r).startswith("c") for r in picks)
    assert queue.choose_dance() is None  # 5 flights made: the dance is over
    assert len(queue) == 2


def two_bees_out(queue) -> tuple[set, dict]:
    """Seed pages a and b queued and both of a two-bee hive's first flights out (until the
    test lands them): the ids held out, and each flight by its page's name."""
    out = hold_flights(queue)
    for seed in ("a", "b"):
        queue.push(req(seed, depth=0))
    flights = {}
    for _ in range(2):
        request = queue.pop()
        out.add(id(request))
        flights[name(request)] = request
    return out, flights


def test_bees_leaving_the_hive_pick_a_seed_page_at_random_then_one_of_its_links():
    """The dispatch room's start pages are picked at random, not their links pooled: a seed
    page with one link is left by as many bees as one with nine."""
    firsts = []
    for trial in range(100):
        queue = make_queue("bees", n_bees=2, seed=trial)
        out, flights = two_bees_out(queue)
        links = [("a", "a1")] + [("b", f"b{i}") for i in range(9)]
        for page, link in links:
            # Quality 1: the bees return home; not relevant: no dance.
            meta = {"parent_relevance": 1.0, "parent_is_relevant": False}
            bee = flights[page].meta["bee"]
            queue.push(req(link, parent_url=f"http://t/{page}", depth=1, found_by_bee=bee, **meta))
        out.clear()  # both flights land
        firsts.append(name(queue.pop()))
        assert queue.stats.get_value("focused/bees/from_dispatch") == 3  # a, b, then this
    assert 0.35 < firsts.count("a1") / len(firsts) < 0.65  # 0.1 if the links were pooled


@pytest.mark.parametrize("resent", ["redirected", "retried"])
def test_a_bees_flight_sent_again_goes_on_with_its_bee(key, resent):
    """A flight redirected (or retried, or rendered again) is queued again with its meta: it
    is no link found on the page of the bee that found it (whose next landing would take that
    page's quality), but its own bee's flight going on."""
    queue = make_queue("bees", key, n_bees=2, seed=4)
    out, flights = two_bees_out(queue)
    finder = flights["a"].meta["bee"]
    for i in range(3):  # quality 1: the finder returns and dances for these
        queue.push(child(f"c{i}", "a", page=1.0, link=0.5, found_by_bee=finder))
    out.discard(id(flights["a"]))
    out.add(id(queue.pop()))  # the finder flies to one of them, and is out
    out.discard(id(flights["b"]))  # the other bee lands (b has no links)...
    flight = queue.pop()  # ... and flies to another danced link
    out.add(id(flight))
    assert flight.meta["bee"] != finder and flight.meta["found_by_bee"] == finder
    if resent == "redirected":
        meta = {**flight.meta, "redirect_urls": [flight.url], "redirect_times": 1}
        again = flight.replace(url="http://t/moved", meta=meta)
    else:
        again = flight.replace(meta={**flight.meta, "retry_times": 1}, dont_filter=True)
    queue.push(again)
    assert finder not in queue._found  # not a find of the finder's, on its way elsewhere
    out.discard(id(flight))  # the flight lands, with no page
    going_on = queue.pop()
    assert going_on.url == again.url and going_on.meta["bee"] == flight.meta["bee"]


def test_bees_resume_the_seed_links_of_an_older_jobdir_as_one_seed_page(tmp_path):
    key = str(tmp_path / "requests.queue")
    queue = make_queue("bees", key)
    queue.push(req("a1", parent_url="http://t/a", depth=1))
    fp = queue._fingerprint(req("a1")).hex()
    state = {k: v for k, v in queue.close().items() if k != "seed_pages"}
    reopened = make_queue("bees", key, {**state, "seed_links": [fp]})
    assert reopened._seed_pages == [[fp]]
    assert name(reopened.pop()) == "a1"
    assert reopened.stats.get_value("focused/bees/from_dispatch") == 1


# -- persistence ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "strategy", ["hillclimbing", "beam", "annealing", "threshold", "pso", "bees"]
)
def test_state_survives_close_and_reopen(tmp_path, strategy):
    key = str(tmp_path / "requests.queue")
    queue = make_queue(strategy, key)
    random_walk(queue, random.Random(1), 12)
    before = len(queue)
    state = queue.close()
    assert state["strategy"] == strategy
    # What Scrapy writes to active.json, and the JOBDIR check reads back, passes that check.
    type(queue).check_state(json.loads(json.dumps(state)))
    reopened = make_queue(strategy, key, state)
    assert len(reopened) == before
    assert reopened.state() == {k: v for k, v in state.items() if k not in ("strategy", "seq")}
    assert len(drain(reopened)) == before


def test_hillclimbing_a_demotion_killed_midway_leaves_the_request_queued(tmp_path, monkeypatch):
    """A better child of the same page sends the old climbing move back to the pending pool. It
    was a remove and a put, two commits of the frontier file: a kill -9 between them (here the
    put dies) lost the request from the file. It is one update now."""
    key = str(tmp_path / "requests.queue")
    queue = make_queue("hillclimbing", key)
    queue.push(child("good", "p", page=0.1, link=0.3))
    good = queue._fingerprint(child("good", "p", page=0.1, link=0.3))
    real_put = SqliteFrontier.put

    def dies_putting_good_back(self, fp, *args):
        if fp == good:
            raise KeyboardInterrupt  # the process dies here
        return real_put(self, fp, *args)

    monkeypatch.setattr(SqliteFrontier, "put", dies_putting_good_back)
    with contextlib.suppress(KeyboardInterrupt):
        queue.push(child("better", "p", page=0.1, link=0.6))
    monkeypatch.undo()
    assert "good" in drain(make_queue("hillclimbing", key))  # reopened as after the kill
