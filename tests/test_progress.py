"""The progress line of a crawl (focused.extensions.ProgressLog), without a crawl."""

from __future__ import annotations

import logging

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
