"""A host held by its delay or a pause is passed over (HELD_HOST_LOOKAHEAD): the scheduler looks
at the frontier's next requests without popping them (``ranked``) and takes the first whose
host can be fetched now."""

from __future__ import annotations

import random
from itertools import islice
from types import SimpleNamespace

import pytest
import scrapy
from scrapy.core.downloader import Slot
from scrapy.utils.httpobj import urlparse_cached

import focused.settings
from focused.traps import TRAP_META
from tests.queues import make_queue
from tests.test_frontier_limits import inflight, make_scheduler, queue_hosts


def ranked(queue, count: int) -> list[tuple[bytes, str]]:
    return list(islice(queue.ranked(), count))


@pytest.mark.parametrize("kind", ["memory", "disk"])
def test_ranked_lists_what_pop_hands_out_and_leaves_it_queued(tmp_path, kind):
    queue = make_queue("bestfirst", "" if kind == "memory" else str(tmp_path / "queue"))
    rng = random.Random(3)
    pushed = 0

    def push(count: int) -> None:
        nonlocal pushed
        for _ in range(count):
            # a few trap requests, which every frontier keeps behind the rest
            meta = {"parent_relevance": round(rng.random(), 2), TRAP_META: rng.random() < 0.1}
            queue.push(scrapy.Request(f"http://h{pushed % 7}.test/u{pushed}", meta=meta))
            pushed += 1

    # The memory frontier's three places: unsorted puts, a sorted run, a heap; rediscovery
    # leaves stale items in them.
    for count, pops in [(300, 20), (60, 30), (5, 0), (0, 400)]:
        push(count)
        for i in rng.sample(range(pushed), 15):
            queue.rediscover(
                scrapy.Request(f"http://h{i % 7}.test/u{i}", meta={"parent_relevance": 0.995})
            )
        size = len(queue)
        listed = ranked(queue, 40)
        assert len(queue) == size
        assert len(listed) == min(40, size)
        popped = [queue.pop() for _ in range(len(listed))]
        assert [host for _, host in listed] == [urlparse_cached(r).hostname for r in popped]
        assert [fp for fp, _ in listed] == [queue._fingerprint(r) for r in popped]
        for _ in range(pops):
            queue.pop()
    assert ranked(queue, 10) == []
    queue.close()


@pytest.mark.parametrize("kind", ["memory", "disk"])
def test_ranked_from_a_rank_on_lists_what_follows_it(tmp_path, kind):
    """A look past held hosts read in growing chunks read the frontier from its first request
    each time, skipping what it had read: a thousand-request look read some four thousand."""
    queue = make_queue("bestfirst", "" if kind == "memory" else str(tmp_path / "queue"))
    for i in range(90):
        meta = {"parent_relevance": (i % 13) / 13, TRAP_META: i % 10 == 0}  # 9 at the back
        queue.push(scrapy.Request(f"http://h{i % 5}.test/u{i}", meta=meta))
    every = list(queue.ranked())
    assert len(every) == 90
    for start in (0, 1, 40, 80, 81, 89, 90, 95):
        assert list(queue.ranked(start)) == every[start:]
    queue.close()


@pytest.mark.parametrize("kind", ["memory", "disk"])
def test_take_hands_out_one_listed_request_and_leaves_the_rest_in_order(tmp_path, kind):
    queue = make_queue("bestfirst", "" if kind == "memory" else str(tmp_path / "queue"))
    for i in range(6):
        queue.push(scrapy.Request(f"http://t/u{i}", meta={"parent_relevance": 1 - i / 10}))
    listed = ranked(queue, 4)
    assert queue.take(listed[2][0]).url == "http://t/u2"
    assert queue.take(listed[2][0]) is None  # gone
    assert [queue.pop().url for _ in range(5)] == [f"http://t/u{i}" for i in (0, 1, 3, 4, 5)]
    queue.close()


def test_a_frontier_file_written_before_the_host_column_reads_hosts_from_its_requests(tmp_path):
    queue = make_queue("bestfirst", str(tmp_path / "queue"))
    for i in range(3):
        queue.push(scrapy.Request(f"http://h{i}.test/", meta={"parent_relevance": 1 - i / 10}))
    queue.frontier._db.execute("UPDATE frontier SET host = NULL")  # as the column added later
    assert [host for _, host in ranked(queue, 3)] == ["h0.test", "h1.test", "h2.test"]
    queue.close()


def test_a_strategy_that_decides_as_it_pops_lists_nothing():
    queue = make_queue("annealing")
    queue.push(scrapy.Request("http://t/a", meta={"parent_relevance": 0.5}))
    assert ranked(queue, 10) == []


class Downloader:
    """What the scheduler reads of Scrapy's downloader: its requests and slots (real ``Slot``)."""

    def __init__(self) -> None:
        self.active: set[scrapy.Request] = set()
        self.slots: dict[str, Slot] = {}
        self.middleware = SimpleNamespace(middlewares=[])  # no robots.txt middleware
        self.per_slot_settings: dict[str, dict] = {}
        self.domain_concurrency, self.ip_concurrency = 8, 0

    def get_slot_key(self, request: scrapy.Request) -> str:
        return urlparse_cached(request).hostname or ""

    def hand_to(self, request: scrapy.Request, delay: float = 0.0) -> None:
        """``request`` handed out by the scheduler, waiting for its slot."""
        self.active.add(request)
        self.slots.setdefault(self.get_slot_key(request), Slot(8, delay, 0.0))


def held_scheduler(tmp_path, urls: list[str], jobdir: bool = False, **settings):
    """A scheduler with ``urls`` queued best first, and a downloader of its own."""
    settings = {"HELD_HOST_LOOKAHEAD": focused.settings.HELD_HOST_LOOKAHEAD} | settings
    scheduler, crawler = make_scheduler(tmp_path, jobdir, **settings)
    crawler.engine = SimpleNamespace(downloader=Downloader(), scraper=SimpleNamespace(slot=None))
    queue_hosts(scheduler, urls)
    return scheduler, crawler, crawler.engine.downloader


def hand_out(scheduler, downloader: Downloader, delay: float = 0.0) -> str | None:
    request = scheduler.next_request()
    if request is None:
        return None
    downloader.hand_to(request, delay)
    return request.url.removeprefix("http://")


A_THEN_B = [f"http://a.test/{i}" for i in range(3)] + ["http://b.test/0", "http://b.test/1"]


@pytest.mark.parametrize("jobdir", [False, True])
def test_a_held_host_is_passed_over_while_other_hosts_have_requests(tmp_path, jobdir):
    scheduler, crawler, downloader = held_scheduler(tmp_path, A_THEN_B, jobdir)
    assert hand_out(scheduler, downloader, delay=1.0) == "a.test/0"  # waits for its delay
    # a.test/1 and /2 would only wait behind it: b.test goes meanwhile.
    assert hand_out(scheduler, downloader) == "b.test/0"
    assert hand_out(scheduler, downloader) == "b.test/1"
    assert crawler.stats.get_value("focused/held_host/passed_over") == 2
    assert crawler.stats.get_value("scheduler/dequeued") == 3
    if jobdir:  # taken past the first, a request is in flight in the frontier file as a pop's
        assert inflight(scheduler) == 3
    # Only held hosts left: the best request goes, as without the rule.
    assert hand_out(scheduler, downloader) == "a.test/1"
    downloader.active.clear()
    assert hand_out(scheduler, downloader) == "a.test/2"
    assert hand_out(scheduler, downloader) is None
    scheduler.close("finished")


@pytest.mark.parametrize("hold", ["none", "sent", "pause", "full"])
def test_a_host_is_held_only_with_a_delay_pause_or_full_slot_and_a_request_waiting(tmp_path, hold):
    scheduler, crawler, downloader = held_scheduler(tmp_path, A_THEN_B)
    first = scheduler.next_request()
    downloader.hand_to(first)  # a slot without delay, with room: not held, whatever waits in it
    slot = downloader.slots["a.test"]
    if hold == "sent":  # delayed, but its one request is on the wire: the next waits for nothing
        slot.delay = 1.0
        slot.transferring.add(first)
    elif hold == "pause":  # a Retry-After pause (focused.retryafter) holds a slot without delay
        slot.latercall = object()
    elif hold == "full":  # a slow host: as many requests on the wire as its concurrency
        slot.concurrency = 1
        slot.transferring.add(first)
    urls = [hand_out(scheduler, downloader) for _ in range(2)]
    # "sent", "full": a.test/1 goes, and then waits in the slot, so a.test/2 is passed over.
    expected = {"none": ["a.test/1", "a.test/2"], "pause": ["b.test/0", "b.test/1"]}
    assert urls == expected.get(hold, ["a.test/1", "b.test/0"])
    passed_over = crawler.stats.get_value("focused/held_host/passed_over", 0)
    assert passed_over == {"none": 0, "pause": 2}.get(hold, 1)
    slot.latercall = None
    scheduler.close("finished")


@pytest.mark.parametrize("lookahead", [0, 3, 100])
def test_a_crawl_of_one_delayed_host_keeps_the_strategys_order(tmp_path, lookahead):
    urls = [f"http://a.test/{i}" for i in range(8)]
    scheduler, crawler, downloader = held_scheduler(tmp_path, urls, HELD_HOST_LOOKAHEAD=lookahead)
    handed_out = [hand_out(scheduler, downloader, delay=1.0) for _ in range(9)]
    assert handed_out == [url.removeprefix("http://") for url in urls] + [None]
    assert crawler.stats.get_value("focused/held_host/passed_over") is None
    scheduler.close("finished")


@pytest.mark.parametrize("lookahead", [0, 2, 3])
def test_the_lookahead_bounds_how_far_the_scheduler_looks(tmp_path, lookahead):
    scheduler, _, downloader = held_scheduler(tmp_path, A_THEN_B, HELD_HOST_LOOKAHEAD=lookahead)
    hand_out(scheduler, downloader, delay=1.0)
    # b.test/0 is the third request left in the frontier: reached with a lookahead of 3
    expected = "b.test/0" if lookahead >= 3 else "a.test/1"
    assert hand_out(scheduler, downloader) == expected
    scheduler.close("finished")


def test_a_strategy_that_decides_as_it_pops_is_taken_as_it_comes(tmp_path):
    from focused.strategies import STRATEGIES

    scheduler, crawler, downloader = held_scheduler(
        tmp_path, A_THEN_B, SCHEDULER_PRIORITY_QUEUE=STRATEGIES["hillclimbing"]
    )
    assert hand_out(scheduler, downloader, delay=1.0) == "a.test/0"
    assert hand_out(scheduler, downloader) == "a.test/1"
    assert crawler.stats.get_value("focused/held_host/passed_over") is None
    scheduler.close("finished")


def test_the_host_window_and_a_held_host_work_together(tmp_path):
    urls = [*A_THEN_B, "http://c.test/0"]
    scheduler, _, downloader = held_scheduler(tmp_path, urls, HOST_WINDOW=3)
    assert hand_out(scheduler, downloader) == "a.test/0"  # no delay: a.test is not held
    downloader.slots["b.test"] = Slot(8, 1.0, 0.0)
    assert hand_out(scheduler, downloader) == "b.test/0"  # a.test is in the window: parked
    # a.test is in the window and b.test is held, with b.test/0 waiting: c.test goes.
    assert hand_out(scheduler, downloader) == "c.test/0"
    scheduler.close("finished")


def test_a_held_host_whose_slot_is_full_gets_nothing_more_until_a_request_leaves(tmp_path):
    urls = [f"http://a.test/{i}" for i in range(3)]
    scheduler, _, downloader = held_scheduler(tmp_path, urls)
    first = scheduler.next_request()
    downloader.hand_to(first, delay=1.0)
    downloader.slots["a.test"].concurrency = 1  # a robots.txt Crawl-delay: one at a time
    # a.test/1 would only wait behind a.test/0, and hold a download meanwhile
    assert scheduler.next_request() is None
    downloader.active.clear()  # a.test/0 was fetched
    assert hand_out(scheduler, downloader) == "a.test/1"
    scheduler.close("finished")


def test_a_slow_hosts_full_slot_still_takes_the_first_when_no_other_host_is_in_reach(tmp_path):
    """One host without delay, its slot's concurrency on the wire and one more waiting: passed
    over while another host is in reach, but alone it gets the frontier's first, so that a
    request waits to be sent as soon as each transfer ends (held back until the reactor asked
    again, a crawl of one host at 0.1 s a response went at 0.8 x its pace); no more than one a
    transfer, which would only wait (and keep a closing crawl fetching)."""
    urls = [f"http://a.test/{i}" for i in range(6)]
    scheduler, crawler, downloader = held_scheduler(tmp_path, urls)
    for expected in ("a.test/0", "a.test/1", "a.test/2"):
        assert hand_out(scheduler, downloader) == expected
    slot = downloader.slots["a.test"]
    slot.concurrency = 2
    on_the_wire = [r for r in downloader.active if r.url.endswith(("/0", "/1"))]
    slot.transferring.update(on_the_wire)
    assert hand_out(scheduler, downloader) == "a.test/3"
    scheduler.enqueue_request(scrapy.Request("http://b.test/0", meta={"parent_relevance": 0.01}))
    assert hand_out(scheduler, downloader) == "b.test/0"
    assert scheduler.next_request() is None  # a.test/2 and /3 wait, one for each transfer
    downloader.active.remove(on_the_wire[0])  # fetched: a.test/2 goes on the wire
    slot.transferring.remove(on_the_wire[0])
    assert hand_out(scheduler, downloader) == "a.test/4"
    assert crawler.stats.get_value("focused/held_host/passed_over") == 1
    scheduler.close("finished")


def test_a_slow_host_gets_no_more_than_its_slot_can_send_while_its_requests_reach_it(tmp_path):
    """The engine asks for requests one after another in one go, and those handed out reach
    their slot only after the downloader middlewares: its ``transferring`` set is still empty.
    Past its concurrency and one more, the host's requests would only wait in its slot (in a
    crawl of a fast and a slow host, 16 of the slow host's were handed out at once)."""
    urls = [f"http://a.test/{i}" for i in range(5)] + ["http://b.test/0"]
    scheduler, crawler, downloader = held_scheduler(tmp_path, urls)
    assert hand_out(scheduler, downloader) == "a.test/0"
    downloader.slots["a.test"].concurrency = 2
    handed_out = [hand_out(scheduler, downloader) for _ in range(3)]
    # a.test/0 and /1 will go on the wire, /2 wait for one of them: b.test/0 goes meanwhile.
    assert handed_out == ["a.test/1", "a.test/2", "b.test/0"]
    assert crawler.stats.get_value("focused/held_host/passed_over") == 1
    # Alone in the look, it goes on as without the rule.
    assert hand_out(scheduler, downloader) == "a.test/3"
    scheduler.close("finished")


def test_a_shared_crawl_looks_again_once_a_request_is_done(tmp_path):
    """In a crawl shared through Redis the other processes queue into the frontier without this
    scheduler seeing it: a look that found only held hosts, cached until this process queues a
    link of another host, hid their requests for as long as the held host ranked first."""
    from focused.resume import request_finished

    urls = [f"http://a.test/{i}" for i in range(6)]
    scheduler, crawler, downloader = held_scheduler(tmp_path, urls)
    scheduler.shared = SimpleNamespace()  # a shared crawl's (only tested for None here)
    assert hand_out(scheduler, downloader) == "a.test/0"
    downloader.slots["a.test"].concurrency = 2
    assert [hand_out(scheduler, downloader) for _ in range(2)] == ["a.test/1", "a.test/2"]
    # a.test is held, and only a.test is in the look: its first goes.
    assert hand_out(scheduler, downloader) == "a.test/3"
    # another process queues a request of b.test, and a request of this one is done
    scheduler.mqs.push(scrapy.Request("http://b.test/0", meta={"parent_relevance": 0.01}))
    fetched = next(r for r in downloader.active if r.url.endswith("/0"))
    downloader.active.remove(fetched)
    crawler.signals.send_catch_log(request_finished, request=fetched)
    assert hand_out(scheduler, downloader) == "b.test/0"
    scheduler.shared = None
    scheduler.close("finished")


def test_a_look_that_found_only_held_hosts_is_made_again_for_a_request_of_another_host(tmp_path):
    urls = [f"http://a.test/{i}" for i in range(4)]
    scheduler, _, downloader = held_scheduler(tmp_path, urls)
    read = count_reads(scheduler.mqs)
    assert hand_out(scheduler, downloader, delay=1.0) == "a.test/0"  # nothing held yet
    assert hand_out(scheduler, downloader) == "a.test/1"  # looked at a.test/1, /2 and /3
    looked_at = len(read)
    assert hand_out(scheduler, downloader) == "a.test/2"
    assert len(read) == looked_at + 1  # the first only
    for i in range(4, 40):  # a page of the held host, its links found
        link = scrapy.Request(f"http://a.test/{i}", meta={"parent_relevance": 1})
        scheduler.enqueue_request(link)
    assert hand_out(scheduler, downloader) == "a.test/4"
    assert len(read) == looked_at + 2  # the first only: links of the held host leave the look
    # queued, a request of another host is looked at
    scheduler.enqueue_request(scrapy.Request("http://b.test/0", meta={"parent_relevance": 0.01}))
    assert hand_out(scheduler, downloader) == "b.test/0"
    scheduler.close("finished")


@pytest.mark.parametrize("jobdir", [False, True])
def test_a_look_cut_short_by_the_lookahead_is_made_again_as_requests_are_popped(tmp_path, jobdir):
    """A delayed host's 150 requests, then another host's: with a look-ahead of 100 the other
    host's request comes into reach as the first ones go, and is found no later than
    ``POPS_PER_LOOK`` pops after that (before, only a request queued made the look again)."""
    from focused.scheduler import POPS_PER_LOOK

    urls = [f"http://a.test/{i}" for i in range(150)] + ["http://b.test/0"]
    scheduler, _, downloader = held_scheduler(tmp_path, urls, jobdir, HELD_HOST_LOOKAHEAD=100)
    handed_out = []
    while "b.test/0" not in handed_out and len(handed_out) < len(urls):
        url = hand_out(scheduler, downloader, delay=1.0)
        if url is None:  # the slot is full: its requests were fetched
            downloader.active.clear()
        else:
            handed_out.append(url)
    assert handed_out[-1] == "b.test/0"
    assert 50 <= len(handed_out) - 1 <= 50 + POPS_PER_LOOK
    scheduler.close("finished")


def count_reads(queue) -> list[tuple[bytes, str]]:
    """Every entry read from ``queue``'s frontier by ``ranked`` from now on."""
    read: list[tuple[bytes, str]] = []
    frontier = queue.frontier
    ranked_entries = frontier.ranked

    def counted(start: int = 0):
        for entry in ranked_entries(start):
            read.append(entry)
            yield entry

    frontier.ranked = counted
    return read


@pytest.mark.parametrize("jobdir", [False, True])
def test_the_look_past_a_capped_held_host_reads_its_requests_a_few_times_at_most(tmp_path, jobdir):
    """A delayed host at its MAX_PAGES_PER_HOST with a request waiting, 500 of its requests
    ahead of another host's. Reading ahead at each pop of the scan read 100 requests per
    request dropped (under JOBDIR, 14 s for 2,900 drops); one next_request now reads the
    frontier in growing chunks and hands out the other host's request. Each chunk was read from
    the frontier's first request on, skipping those read already: 1.5 to 2 times the look."""
    urls = [f"http://a.test/{i}" for i in range(500)] + ["http://b.test/0"]
    scheduler, _, downloader = held_scheduler(tmp_path, urls, jobdir, MAX_PAGES_PER_HOST=1)
    assert hand_out(scheduler, downloader, delay=1.0) == "a.test/0"  # its one page, waiting
    read = count_reads(scheduler.dqs if jobdir else scheduler.mqs)
    assert hand_out(scheduler, downloader) == "b.test/0"
    assert len(read) <= len(urls)  # each read once: a later chunk starts where one ended
    if jobdir:  # a.test/0 and b.test/0 are in flight
        assert inflight(scheduler) == 2
    scheduler.close("finished")


@pytest.mark.parametrize("jobdir", [False, True])
def test_requests_the_host_window_would_park_are_not_taken_past_a_held_host(tmp_path, jobdir):
    """b.test in the HOST_WINDOW, a.test held: taking b.test's requests past a.test only
    parked them, 1,000 in one next_request (HOST_WINDOW_SCAN). A host in the window is passed
    over like a held one, and with nothing else in reach a.test's next goes, as without the
    rule."""
    urls = ["http://a.test/0", "http://a.test/1"] + [f"http://b.test/{i}" for i in range(1500)]
    scheduler, _, downloader = held_scheduler(tmp_path, urls, jobdir, HOST_WINDOW=2)
    assert hand_out(scheduler, downloader, delay=1.0) == "a.test/0"
    assert hand_out(scheduler, downloader) == "b.test/0"  # a.test held, b.test not in the window
    read = count_reads(scheduler.dqs if jobdir else scheduler.mqs)
    assert hand_out(scheduler, downloader) == "a.test/1"
    assert scheduler.parked == []
    assert len(read) <= 1000  # HELD_HOST_LOOKAHEAD, each read once
    scheduler.close("finished")


@pytest.mark.parametrize("robots", ["unread", "reading", "read", "off"])
def test_a_host_whose_robots_txt_is_not_read_yet_is_passed_over(tmp_path, robots):
    """Its requests wait in the downloader middlewares for its robots.txt, each holding one of
    ``CONCURRENT_REQUESTS``, and then go to a slot whose Crawl-delay may send one at a time: a
    shared crawl had 15 of its 16 downloads waiting on such a host for 7 s."""
    from twisted.internet.defer import Deferred

    from focused.robots import RobotsTxtMiddleware

    scheduler, crawler, downloader = held_scheduler(tmp_path, A_THEN_B, ROBOTSTXT_OBEY=True)
    middleware = RobotsTxtMiddleware(crawler)
    middleware._parsers["b.test"] = None  # read: b.test's requests go on to its slot
    if robots != "off":  # ROBOTSTXT_OBEY on: focused.robots is among the downloader's
        downloader.middleware = SimpleNamespace(middlewares=[middleware])
    assert hand_out(scheduler, downloader) == "a.test/0"  # waits in the middleware: no slot
    del downloader.slots["a.test"]
    pending = middleware._parsers["a.test"] = Deferred()  # robots.txt downloading
    if robots == "unread":  # a.test/0 has not reached the middleware yet
        del middleware._parsers["a.test"]
    elif robots == "read":
        middleware._parsers["a.test"] = None
    if robots in ("unread", "reading"):
        assert hand_out(scheduler, downloader) == "b.test/0"
        assert hand_out(scheduler, downloader) == "b.test/1"
        assert crawler.stats.get_value("focused/held_host/passed_over") == 2
        # Only a.test left: nothing more goes before its robots.txt is read (the Crawl-delay
        # it may ask for would send them one at a time), however many its slot could take.
        downloader.per_slot_settings["a.test"] = {"concurrency": 8}
        assert scheduler.next_request() is None
        middleware._parsers["a.test"] = None  # read, no Crawl-delay: a.test/0 goes on
    assert hand_out(scheduler, downloader) == "a.test/1"
    assert hand_out(scheduler, downloader) == "a.test/2"
    pending.callback(None)
    scheduler.close("finished")


def test_the_host_window_waits_for_a_held_host_outside_it_rather_than_give_way(tmp_path):
    """HOST_WINDOW=3: a.test/1 is parked (a.test is in the window) while the only other queued
    host, d.test, is outside the window but held by its delay. It gave way at once
    (focused/host_window/relaxed) and a.test went twice in three fetches; now the parked request
    waits for the held host's request to go, which moves the window."""
    urls = ["http://d.test/0", "http://a.test/0", "http://a.test/1", "http://b.test/0"]
    urls += ["http://d.test/1", "http://d.test/2"]
    scheduler, crawler, downloader = held_scheduler(tmp_path, urls, HOST_WINDOW=3)
    handed_out = [hand_out(scheduler, downloader, delay=10.0)]  # d.test/0 waits for its delay
    downloader.slots["d.test"].concurrency = 1  # one at a time: d.test is held
    handed_out += [hand_out(scheduler, downloader) for _ in range(3)]
    assert handed_out == ["d.test/0", "a.test/0", "b.test/0", None]
    downloader.active.clear()  # d.test/0 sent, the rest done
    handed_out += [hand_out(scheduler, downloader) for _ in range(2)]
    assert handed_out[4:] == ["d.test/1", "a.test/1"]  # a.test once in any three
    assert crawler.stats.get_value("focused/host_window/relaxed") is None
