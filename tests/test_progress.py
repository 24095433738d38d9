"""The progress line of a crawl (focused.extensions.ProgressLog), without a crawl."""

from __future__ import annotations

import logging
import time
from collections import deque

import pytest
import scrapy

from focused.extensions import ProgressLog
from tests.test_frontier_limits import make_scheduler


@pytest.mark.parametrize("jobdir", [False, True])
def test_the_progress_line_counts_the_frontier_as_it_is_logged(tmp_path, caplog, jobdir):
    """The frontier stat is counted at most once a second as requests come and go: a line
    logged within a second of a page's links being queued showed the frontier without them
    (a crawl of a slow site logged frontier 0 with 28 queued, then 29 with 53, 54 with 98)."""
    scheduler, crawler = make_scheduler(tmp_path, jobdir)
    for i in range(30):
        request = scrapy.Request(f"http://t/u{i}", meta={"parent_relevance": 0.5, "depth": 1})
        assert scheduler.enqueue_request(request)
    with caplog.at_level(logging.INFO, logger="focused.extensions"):
        ProgressLog(crawler, 30.0).log()
    assert caplog.records[-1].getMessage().endswith("frontier 30 requests")
    scheduler.close("shutdown")


@pytest.mark.parametrize(
    ("count", "said"),
    [(1, "Focused: 1 page, 1 relevant (harvest rate 1.000), frontier 1 request"),
     (2, "Focused: 2 pages, 2 relevant (harvest rate 1.000), frontier 2 requests")],
)  # fmt: skip
def test_the_progress_line_counts_in_words(tmp_path, caplog, count, said):
    """The first line of a crawl said "Focused: 1 pages, ... frontier 1 requests"."""
    scheduler, crawler = make_scheduler(tmp_path, False)
    crawler.spider.state |= {"pages": count, "relevant": count}
    for i in range(count):
        assert scheduler.enqueue_request(scrapy.Request(f"http://t/u{i}", meta={"depth": 1}))
    with caplog.at_level(logging.INFO, logger="focused.extensions"):
        ProgressLog(crawler, 30.0).log()
    assert caplog.records[-1].getMessage() == said
    scheduler.close("shutdown")


class HoldingRobots:
    """focused.robots' middleware as the scheduler asks it: until when each host's requests
    are held (None: its robots.txt is being fetched again now)."""

    def __init__(self, until: dict[str, float | None]) -> None:
        self.until = until

    def holding_until(self, netloc: str) -> float | None:
        return self.until[netloc]


@pytest.mark.parametrize(
    ("until", "said"),
    [
        ({"a.t": None}, "held for the robots.txt of 1 host that failed: being fetched again"),
        ({"a.t": 30}, "held for the robots.txt of 1 host that failed: fetched again in 30 s"),
        (
            {"a.t": 30, "b.t": 60},
            "held for the robots.txt of 2 hosts that failed: the next fetched again in 30 s",
        ),
        (
            {"a.t": None, "b.t": 30},
            "held for the robots.txt of 2 hosts that failed: 1 being fetched again, the next in"
            " 30 s",
        ),
    ],
)
def test_the_progress_line_says_which_held_robots_txt_is_fetched_when(
    tmp_path, caplog, until, said
):
    """One host's robots.txt being fetched again while another's was due in 30 s: the line
    said "the next fetched again in 30 s", as if none were being fetched."""
    scheduler, crawler = make_scheduler(tmp_path, False)
    scheduler.robots = HoldingRobots(
        {
            host: None if wait is None else time.monotonic() + wait - 0.5
            for host, wait in until.items()
        }
    )
    for host in until:
        request = scrapy.Request(f"http://{host}/", meta={"depth": 1})
        scheduler.robots_held[host] = deque([request])
    with caplog.at_level(logging.INFO, logger="focused.extensions"):
        ProgressLog(crawler, 30.0).log()
    assert caplog.records[-1].getMessage().endswith(said), caplog.records[-1].getMessage()
    scheduler.close("shutdown")
