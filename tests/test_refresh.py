"""Refresh (``focused.refresh``, ``scrapy recrawl``): change detection, the refresh policies, the
page updates on both stores, the migration of old files, and a recrawl of a loopback site."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pymongo
import pytest
import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware as ScrapyOffsite
from scrapy.exceptions import IgnoreRequest
from scrapy.extensions.closespider import CloseSpider as ScrapyCloseSpider
from scrapy.http import HtmlResponse, Response
from scrapy.pipelines import ItemPipelineManager
from scrapy.settings import Settings
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure
from warcio.archiveiterator import ArchiveIterator

from focused import storage
from focused.arguments import CrawlConfig
from focused.commands import recrawl as recrawl_command
from focused.commands.recrawl import Command as RecrawlCommand
from focused.errors import ConfigError
from focused.hygiene import HeadCheckMiddleware, RedirectMiddleware, skip_reason
from focused.items import PageItem
from focused.jobchecks import check_store, crawl_lock_offset
from focused.mongostore import MongoStore
from focused.refresh import (
    OTHER_WHITESPACE,
    RECRAWL_TAKEN_OVER,
    OffsiteMiddleware,
    RecrawlSpider,
    RefreshPipeline,
    collapse_whitespace,
    content_hash,
    first_visit,
    plan_recrawl,
    revisit,
    select_pages,
)
from focused.relevance import RelevanceModel
from focused.report import describe_status, is_live, recrawl_is_live
from focused.sqlitestore import SqliteStore
from focused.stopping import PageBudget
from focused.storage import PAGE_FIELDS
from pipelines.storage import RECRAWL_UNDER_WAY, StoragePipeline
from tests.conftest import (
    REPO,
    Crawl,
    crawl_env,
    refused_start,
    run_crawl,
    run_scrapy,
    scrapy_command,
)
from tests.sites import FetchLog, Reply, Site, html
from tests.test_commands import (  # noqa: F401
    cli,
    no_traceback_of_ctrl_c,
    one_line_error,
    run_with_stderr_closed,
)
from tests.test_politeness import stop_once_said
from tests.test_storage import (  # noqa: F401
    FakeEngine,
    crawl_record,
    make_store,
    mongo_client,
    page,
    pipeline_crawler,
)

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


def at(hours_ago: float) -> str:
    return (NOW - timedelta(hours=hours_ago)).isoformat()


def stored(url: str, *, changes: int = 0, visits: int = 1, hours_ago: float = 1, **fields):
    return page(
        url,
        content_hash=content_hash("t", url),
        last_changed=at(hours_ago),
        changes=changes,
        visits=visits,
        fetched_at=at(hours_ago),
        **fields,
    )


@pytest.fixture(params=["sqlite", "mongo"])
def store(request, tmp_path, mongo_client):  # noqa: F811
    store = make_store(request.param, tmp_path, mongo_client)
    store.start_crawl(crawl_record())
    yield store
    store.close()


# -- change detection ------------------------------------------------------------------------


def test_the_hash_ignores_whitespace_and_normalisation_but_not_words():
    base = content_hash("Birds", "Albatrosses nest on islands.")
    assert content_hash("Birds", "  Albatrosses\n nest  on\tislands. ") == base
    assert content_hash("Birds", "Albatrosses nest on islands.".replace("on", "o\u0301n")) != base
    assert content_hash("Birds", "Albatrosse\u0301s") == content_hash("Birds", "Albatrossés")
    assert content_hash("Birds", "Albatrosses nest on cliffs.") != base
    assert content_hash("Birds!", "Albatrosses nest on islands.") != base


def test_whitespace_collapses_as_splitting_into_words_does():
    everywhere = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    assert set(OTHER_WHITESPACE) == {c for c in everywhere if c.isspace() and c != " "}
    texts = ["", " ", "\n", "a", "a b\nc", "Title\nline one\nline two", "a\n\nb", "a \nb"]
    texts += [" a", "a ", "\na", "a\n", "a  b", "caf\u00e9 \u2013 \u4e2d\u6587\nx"]
    texts += [f"a{space}b" for space in OTHER_WHITESPACE]
    for text in texts:
        assert collapse_whitespace(text) == " ".join(text.split()), repr(text)


def test_a_revisit_counts_a_change_only_when_the_content_differs():
    page_ = {"crawl_id": "c1", "url": "http://a/", "language": None}
    page_.update(first_visit("t", "old words", at(5)))
    same = revisit(page_, "t", " old  words ", at(0), 200)
    assert same == {
        "crawl_id": "c1",
        "url": "http://a/",
        "fetched_at": at(0),
        "status": 200,
        "visits": 2,
        "content_hash": page_["content_hash"],
        "changes": 0,
    }
    changed = revisit({**page_, **same}, "t", "new words", at(-1), 200)
    assert changed["changes"] == 1 and changed["last_changed"] == at(-1)
    assert (changed["text"], changed["visits"]) == ("new words", 3)


@pytest.mark.parametrize(
    ("declared", "expected"),
    [('<html lang="en">', "en"), ("<html>", "en"), ('<html lang="sk">', "sk")],
)
def test_a_changed_page_s_language_is_read_as_a_crawl_reads_it(declared, expected):
    """The recrawl took the stored language for the page's declaration, not the page's own
    (``<html lang>``, Content-Language): a page stored as Slovak and now an English one was kept
    Slovak (its text is ASCII, so the declaration stood), and rescored as Slovak."""
    crawler = get_crawler(RecrawlSpider)
    spider = RecrawlSpider.from_crawler(crawler, "c1", pages=[], policy="uniform")
    body = f"{declared}<title>Birds</title><p>The albatross nests on remote islands.</p></html>"
    request = scrapy.Request("http://a.test/x", meta={"stored": stored("http://a.test/x")})
    response = HtmlResponse(request.url, body=body.encode(), encoding="utf-8", request=request)
    [update] = spider.parse(response)
    assert stored("http://a.test/x")["language"] == "sk"
    assert (update["text"], update["language"]) == (
        "The albatross nests on remote islands.",
        expected,
    )


# -- conditional requests --------------------------------------------------------------------

ETAG = 'W/"nests-1"'
LAST_MODIFIED = "Sat, 01 Jun 2024 10:00:00 GMT"


def started(spider: RecrawlSpider) -> list[scrapy.Request | dict]:
    async def start() -> list[scrapy.Request | dict]:
        return [output async for output in spider.start()]

    return asyncio.run(start())


def test_a_page_s_validators_are_sent_back_and_a_304_is_a_visit_without_a_change():
    """A recrawl downloaded every page in full. A page stored with its ETag and Last-Modified is
    now asked for only if it changed; the 304 that says it did not is recorded as a visit, its
    status (the content's) and its validators left as stored."""
    crawler = get_crawler(RecrawlSpider)
    pages = [
        stored("http://a.test/both", etag=ETAG, last_modified=LAST_MODIFIED),
        stored("http://a.test/etag", etag=ETAG),
        stored("http://a.test/none"),
        # Edited by hand: a line break would end the header, a character above U+00FF no
        # header byte stands for.
        stored("http://a.test/odd", etag='"a"\r\nX-Evil: 1', last_modified="\u0100"),
    ]
    spider = RecrawlSpider.from_crawler(crawler, "c1", pages=pages, policy="uniform")
    crawler.stats.open_spider()
    requests = started(spider)
    sent = [
        (request.headers.get("If-None-Match"), request.headers.get("If-Modified-Since"))
        for request in requests
    ]
    assert sent == [
        (ETAG.encode(), LAST_MODIFIED.encode()),
        (ETAG.encode(), None),
        (None, None),
        (None, None),
    ]
    assert 304 in spider.handle_httpstatus_list  # else HttpErrorMiddleware drops it
    fetched_at = datetime.now(UTC).isoformat()
    [update] = spider.parse(Response(requests[0].url, status=304, request=requests[0]))
    assert update.pop("fetched_at") >= fetched_at
    assert update == {"crawl_id": "c1", "url": "http://a.test/both", "visits": 2}
    # Nothing asked (a server answering 304 to a request without validators): no answer.
    [update] = spider.parse(Response(requests[2].url, status=304, request=requests[2]))
    assert sorted(update) == ["crawl_id", "tried_at", "url"]
    stats = crawler.stats.get_stats()
    assert (stats["focused/refresh/not_modified"], stats["focused/refresh/unchanged"]) == (1, 1)
    assert stats["focused/skipped/http_304"] == 1


def test_a_304_freshens_the_validators_it_sends():
    """A 304 carries the validators a 200 would (RFC 9110 15.4.5): the stored ones were kept
    whatever it sent, and a page whose server moved to a new ETag (a new server, a new build)
    was asked with the old one for good. Those it sends are stored (RFC 9111 4.3.4,
    freshening), those it does not send stay."""
    crawler = get_crawler(RecrawlSpider)
    page_ = stored("http://a.test/x", etag=ETAG, last_modified=LAST_MODIFIED)
    spider = RecrawlSpider.from_crawler(crawler, "c1", pages=[page_], policy="uniform")
    crawler.stats.open_spider()
    [request] = started(spider)
    for headers, expected in [
        ({"ETag": '"new"'}, {"etag": '"new"'}),
        ({"Last-Modified": "Sun, 02 Jun 2024"}, {"last_modified": "Sun, 02 Jun 2024"}),
        ({}, {}),
    ]:
        response = Response(request.url, status=304, headers=headers, request=request)
        [update] = spider.parse(response)
        del update["fetched_at"]
        assert update == {"crawl_id": "c1", "url": request.url, "visits": 2, **expected}


@pytest.mark.parametrize(
    ("robots", "header", "refetched"),
    [
        (None, None, False),  # the 304 says nothing of it: as stored
        (None, "noindex", True),  # now noindex: its text must go
        (None, "otherbot: noindex", False),  # not ours
        ("noindex", "noindex", False),  # as stored
        ("noindex", None, False),  # says nothing: the stored noindex may be its meta's
        ("noindex", "nofollow", True),  # the stored noindex may have been the header's
        ("noindex,nofollow", "none", False),
    ],
)
def test_a_304_whose_x_robots_tag_differs_from_the_stored_robots_is_fetched_in_full(
    robots, header, refetched
):
    """A 304's X-Robots-Tag was ignored: a page that now said noindex by header kept its text.
    A 304 cannot tell what the page's meta tags say now (the stored ``robots`` combines both),
    so a 304 whose X-Robots-Tag asks for other directives than those stored is not taken as
    the answer: the page is requested again in full, without its validators, and judged by
    its 200 as any page fetched in full."""
    crawler = get_crawler(RecrawlSpider, {"ROBOTS_META_OBEY": True})
    page_ = stored("http://a.test/x", etag=ETAG, robots=robots)
    spider = RecrawlSpider.from_crawler(crawler, "c1", pages=[page_], policy="uniform")
    crawler.stats.open_spider()
    [request] = started(spider)
    headers = {"X-Robots-Tag": header} if header else {}
    response = Response(request.url, status=304, headers=headers, request=request)
    [output] = spider.parse(response)
    if refetched:
        assert isinstance(output, scrapy.Request)
        assert (output.url, output.meta["stored"]) == (request.url, page_)
        assert b"If-None-Match" not in output.headers
        assert crawler.stats.get_value("focused/refresh/refetched") == 1
    else:
        assert output["visits"] == 2
        assert crawler.stats.get_value("focused/refresh/not_modified") == 1


def test_head_check_sends_no_head_before_a_conditional_request():
    """HEAD_CHECK sent its HEAD, without the validators, before each GET of a recrawl: every
    unchanged page cost a full HEAD answer and then its 304, two requests where one does (and
    a HEAD asked with them would answer 304, without the Content-Type it checks). A
    conditional GET is its own check: unchanged, it brings no body."""

    class Engine:
        def __init__(self) -> None:
            self.downloads: list[scrapy.Request] = []

        async def download_async(self, request: scrapy.Request) -> Response:
            self.downloads.append(request)
            return Response(request.url, headers={"Content-Type": "text/html"})

    crawler = get_crawler(RecrawlSpider, {"HEAD_CHECK": True})
    crawler.engine = Engine()
    middleware = HeadCheckMiddleware.from_crawler(crawler)
    pages = [stored("http://a.test/x", etag=ETAG), stored("http://a.test/y")]
    spider = RecrawlSpider.from_crawler(crawler, "c1", pages=pages, policy="uniform")
    crawler.stats.open_spider()
    for request in started(spider):
        assert asyncio.run(middleware.process_request(request)) is None
    assert [head.url for head in crawler.engine.downloads] == ["http://a.test/y"]


@pytest.mark.parametrize("full", [False, True])
def test_recrawl_full_is_the_spider_s_conditional_false(full):
    class Process:  # the command's crawler process: the crawl is not run
        bootstrap_failed = False

        def crawl(self, spider_cls: type, **kwargs: object) -> None:
            crawler = get_crawler(spider_cls)
            crawler.stats.set_value("finish_reason", "finished")
            self.crawlers, self.kwargs = {crawler}, kwargs

        def start(self) -> None:
            pass

    command = RecrawlCommand()
    command.settings = Settings()
    parser = argparse.ArgumentParser()
    command.add_options(parser)
    opts = parser.parse_args(["--full"] if full else [])
    command.crawler_process, command.pages, command.model = Process(), [], None
    command.allowed_domains, command.restored, command.unused = None, {}, []
    command.run(["c1"], opts)
    assert command.crawler_process.kwargs["conditional"] is not full
    assert command.exitcode == 0


@pytest.mark.parametrize("options", [{"conditional": False}, {"render": "always"}])
def test_no_validators_are_sent_with_full_or_for_a_rendered_page(options):
    """--full asks for every page in full; a rendered page's text is also what its scripts
    fetch, which the HTML's validators say nothing of."""
    crawler = get_crawler(RecrawlSpider)
    pages = [stored("http://a.test/x", etag=ETAG, last_modified=LAST_MODIFIED)]
    spider = RecrawlSpider(crawl_id="c1", pages=pages, policy="uniform", **options)
    spider._set_crawler(crawler)
    [request] = started(spider)
    assert b"If-None-Match" not in request.headers
    assert b"If-Modified-Since" not in request.headers


def test_a_page_fetched_in_full_keeps_the_validators_of_what_it_stores():
    """Changed or not, a page fetched in full gets its response's validators (none when it sent
    none); a gone page loses them, so that a 304, were it back as it was, cannot leave the gone
    status in place."""
    crawler = get_crawler(RecrawlSpider)
    spider = RecrawlSpider.from_crawler(crawler, "c1", pages=[], policy="uniform")
    crawler.stats.open_spider()
    page_ = stored("http://a.test/x", etag=ETAG, last_modified=LAST_MODIFIED)
    request = scrapy.Request(page_["url"], meta={"stored": page_})
    body = b"<title>t</title><p>http://a.test/x</p>"  # the stored content: no change
    for headers, expected in [
        ({"ETag": '"2"', "Last-Modified": "Sun, 02 Jun 2024 10:00:00 GMT"}, ('"2"', "Sun, 02 Jun")),
        ({}, (None, None)),
    ]:
        response = HtmlResponse(page_["url"], body=body, headers=headers, request=request)
        [update] = spider.parse(response)
        assert (update["changes"], "text" in update) == (0, False)
        assert (update["etag"], (update["last_modified"] or "")[:11] or None) == expected
    [update] = spider.parse(
        HtmlResponse(page_["url"], status=404, headers=headers, request=request)
    )
    assert (update["status"], update["etag"], update["last_modified"]) == (404, None, None)
    # Fetched from where it redirects: the target's validators are no validators of the page.
    meta = {**request.meta, "redirect_urls": [page_["url"]]}
    redirected = request.replace(url="http://a.test/y", meta=meta)
    headers = {"ETag": '"3"', "Last-Modified": "Mon, 03 Jun 2024 10:00:00 GMT"}
    target = HtmlResponse(redirected.url, body=body, headers=headers, request=redirected)
    [update] = spider.parse(target)
    assert (update["etag"], update["last_modified"]) == (None, None)


def test_a_crawl_stores_the_validators_of_a_page_stored_under_the_url_it_was_fetched_at():
    """Not those of a page stored under its rel=canonical: a recrawl requests that URL, which
    they are no validators of."""
    from tests.test_robots_meta import response, topical_spider  # which imports this module

    spider = topical_spider()
    headers = {"ETag": ETAG, "Last-Modified": LAST_MODIFIED}
    canonical = '<link rel="canonical" href="/c">'
    for head, expected in [("", (ETAG, LAST_MODIFIED)), (canonical, (None, None))]:
        outputs = spider.parse(response(head, "<p>words</p>", headers))
        [item] = [output for output in outputs if isinstance(output, PageItem)]
        assert (item.get("etag"), item.get("last_modified")) == expected


def test_a_redirect_sends_its_target_none_of_the_validators_of_the_page_redirected_from():
    """The stored page's validators went to its redirect's target: one not modified since the
    stored page's Last-Modified answered 304, and the page was recorded unchanged, whatever the
    target holds."""
    crawler = get_crawler(RecrawlSpider)
    crawler.spider = RecrawlSpider.from_crawler(crawler, "c1", pages=[], policy="uniform")
    middleware = RedirectMiddleware.from_crawler(crawler)
    headers = {"If-None-Match": ETAG, "If-Modified-Since": LAST_MODIFIED, "Accept": "text/html"}
    request = scrapy.Request("http://a.test/old", headers=headers)
    for status in (301, 302, 303, 307, 308):
        moved = Response(request.url, status=status, headers={"Location": "/new"})
        redirected = middleware.process_response(request, moved)
        assert redirected.url == "http://a.test/new"
        assert set(redirected.headers) == {b"Accept"}


# -- allowed_domains -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("allowed", "filtered"),
    [(None, False), ([], False), (["a.test"], True), ([7, None, "a.test"], True)],
    ids=["before_the_field", "none", "a.test", "edited_by_hand"],
)
def test_a_recrawl_stays_within_the_crawl_s_allowed_domains(allowed, filtered):
    """Scrapy's offsite filter with the crawl's domains, at the send only: as the request is
    scheduled it dropped it with no errback, and its page was recorded nowhere. A crawl recorded
    before the field (None), or without allowed_domains, goes anywhere, as its crawl did."""
    crawler = get_crawler(RecrawlSpider)
    spider = RecrawlSpider.from_crawler(
        crawler, "c1", pages=[], policy="uniform", allowed_domains=allowed
    )
    middlewares = build_component_list(crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES"))
    loaded = [load_object(name) for name in middlewares]
    assert OffsiteMiddleware in loaded and ScrapyOffsite not in loaded
    crawler.spider = spider
    middleware = OffsiteMiddleware.from_crawler(crawler)
    crawler.stats.open_spider()
    middleware.spider_opened(spider)
    for url in ("http://a.test/", "http://www.a.test/x", "http://b.test/x"):
        request = scrapy.Request(url)
        scheduled = crawler.signals.send_catch_log(
            signals.request_scheduled, request=request, spider=spider
        )
        assert not any(isinstance(result, Failure) for _, result in scheduled)
        if filtered and "b.test" in url:
            with pytest.raises(IgnoreRequest) as caught:
                middleware.process_request(request)
            assert skip_reason(Failure(caught.value)) == "offsite"
        else:
            assert middleware.process_request(request) is None


def test_the_offsite_filter_is_swapped_beside_downloader_middlewares_given_with_s():
    """A recrawl given -s DOWNLOADER_MIDDLEWARES (a middleware of the user's) kept Scrapy's
    offsite filter: the spider's swap was set below the command line's priority, and lost."""
    settings = Settings()
    settings.setmodule("focused.settings")
    stats = "scrapy.downloadermiddlewares.stats.DownloaderStats"
    settings.set("DOWNLOADER_MIDDLEWARES", f'{{"{stats}": 851}}', "cmdline")
    RecrawlSpider.update_settings(settings)
    chain = settings.getwithbase("DOWNLOADER_MIDDLEWARES")
    loaded = [load_object(name) for name in build_component_list(chain)]
    assert OffsiteMiddleware in loaded and ScrapyOffsite not in loaded
    assert chain[stats] == 851  # the user's, as given


def test_a_recrawl_stops_at_scrapy_s_close_conditions():
    """-s CLOSESPIDER_TIMEOUT=3600 (a refresh of an hour at most) was ignored: the recrawl ran
    none of the project's extensions, and Scrapy's CloseSpider is off in them (PageBudget, a
    crawl's, takes its place). The pages it leaves are counted as skipped."""
    settings = Settings()
    settings.setmodule("focused.settings")
    settings.set("CLOSESPIDER_TIMEOUT", "3600", "cmdline")
    RecrawlSpider.update_settings(settings)
    chain = settings.getwithbase("EXTENSIONS")
    loaded = [load_object(name) for name in build_component_list(chain)]
    assert ScrapyCloseSpider in loaded
    assert PageBudget not in loaded  # the crawl's budget, counted over its JOBDIR runs


def test_the_model_option_takes_the_crawl_s_jobdir_or_its_relevance_folder(tmp_path):
    """--model JOBDIR was refused ('holds no saved relevance model (a crawl's
    JOBDIR/relevance)'): the folder the user has at hand is the JOBDIR, and the model is in
    it, where the crawl saved it."""
    model = RelevanceModel("birds nest eggs")
    model.save(tmp_path / "job" / "relevance")  # where a JOBDIR crawl saves it
    (tmp_path / "job" / "focused.json").write_text(json.dumps({"crawl_id": "c1"}))
    text = "birds lay eggs in a nest"
    for given in (tmp_path / "job", tmp_path / "job" / "relevance"):
        assert recrawl_command._load_model(str(given), "c1").score(text) == model.score(text)
    with pytest.raises(ConfigError, match="holds no saved relevance model"):
        recrawl_command._load_model(str(tmp_path), "c1")


def test_a_page_stored_before_hashes_gets_one_without_a_change():
    old = {"crawl_id": "c1", "url": "http://a/", "content_hash": None, "changes": None}
    update = revisit({**old, "visits": None, "last_changed": None}, "t", "words", at(0), 200)
    assert update["content_hash"] == content_hash("t", "words")
    assert (update["changes"], update["visits"]) == (0, 2)
    assert "last_changed" not in update


# -- the policies, on the stores -------------------------------------------------------------


def test_proportional_prefers_a_page_that_changed(store):
    store.save_pages(
        [
            stored("http://a.test/never", changes=0, visits=3),
            stored("http://a.test/changed", changes=1, visits=3),
            stored("http://a.test/dup", changes=5, visits=6, duplicate_of="http://a.test/never"),
        ]
    )
    chosen = plan_recrawl(store, "c1", "proportional", budget=1, now=NOW)
    assert [p["url"] for p in chosen] == ["http://a.test/changed"]
    # Time since the last visit weighs in: a page never seen changing but unvisited for
    # three times as long goes first (rates 1/4 vs 2/4, ages 3 h vs 1 h).
    store.save_pages([stored("http://a.test/never", changes=0, visits=3, hours_ago=3)])
    chosen = plan_recrawl(store, "c1", "proportional", budget=2, now=NOW)
    assert [p["url"] for p in chosen] == ["http://a.test/never", "http://a.test/changed"]


def test_uniform_takes_the_least_recently_fetched(store):
    store.save_pages(
        [stored(f"http://a.test/{n}", changes=n, hours_ago=n) for n in range(1, 6)]
        + [stored("http://a.test/dup", hours_ago=9, duplicate_of="http://a.test/1")]
    )
    every = plan_recrawl(store, "c1", "uniform", budget=None, now=NOW)
    assert [p["url"] for p in every] == [f"http://a.test/{n}" for n in (5, 4, 3, 2, 1)]
    assert [p["url"] for p in plan_recrawl(store, "c1", "uniform", 2)] == [
        "http://a.test/5",
        "http://a.test/4",
    ]


def test_uniform_budget_runs_go_round_every_page():
    pages = [stored(f"http://a.test/{n}", hours_ago=10 - n) for n in range(5)]
    seen = []
    for _run in range(5):  # each run fetches 2 pages, a second apart
        for chosen in select_pages(pages, "uniform", 2, NOW):
            seen.append(chosen["url"])
            chosen["fetched_at"] = (NOW + timedelta(seconds=len(seen))).isoformat()
    assert seen == [p["url"] for p in pages] * 2


@pytest.mark.parametrize("policy", ["uniform", "proportional"])
def test_pages_that_fail_run_after_run_do_not_take_every_budget(store, policy):
    """A failed fetch (robots.txt now disallowing the page, a 5xx, a timeout, a PDF now) left
    the record as it was, its fetched_at too: the page stayed the least recently fetched (and,
    proportional, the one with the most time to have changed), so every run with a budget of
    N spent it on the same N failing pages, and the others were never fetched again. A try
    now records ``tried_at``, and the policies take the later of the two times."""
    crawler = get_crawler(RecrawlSpider)
    failing = [stored(f"http://a.test/fail{n}", hours_ago=9) for n in range(2)]
    store.save_pages([*failing, stored("http://a.test/ok", hours_ago=5)])
    planned = plan_recrawl(store, "c1", policy, budget=2, now=NOW)
    assert [p["url"] for p in planned] == ["http://a.test/fail0", "http://a.test/fail1"]
    spider = RecrawlSpider.from_crawler(crawler, "c1", pages=planned, policy=policy)
    crawler.stats.open_spider()
    timeout = Failure(TimeoutError("took too long"))
    timeout.request = scrapy.Request(planned[0]["url"], meta={"stored": planned[0]})
    request = scrapy.Request(planned[1]["url"], meta={"stored": planned[1]})
    pdf = Response(request.url, body=b"%PDF-1.4", request=request)
    pdf.headers[b"Content-Type"] = b"application/pdf"
    updates = [*spider.skipped(timeout), *spider.parse(pdf)]
    assert [sorted(update) for update in updates] == [["crawl_id", "tried_at", "url"]] * 2
    for update in updates:
        update["tried_at"] = at(1)  # the run was an hour ago
    store.update_pages(updates)
    planned = plan_recrawl(store, "c1", policy, budget=1, now=NOW)
    assert [p["url"] for p in planned] == ["http://a.test/ok"]
    assert all(p["fetched_at"] == at(9) for p in store.pages("c1") if "fail" in p["url"])


@pytest.mark.parametrize("policy", ["uniform", "proportional"])
def test_a_fetch_time_or_url_edited_by_hand_is_no_traceback(store, policy):
    """A fetched_at that is no time was a ValueError, one without an offset a TypeError (naive
    and aware times compared), a url that is no text a TypeError from Scrapy's Request."""
    store.save_pages(
        [
            stored("http://a.test/new", hours_ago=1),
            {**stored("http://a.test/naive"), "fetched_at": "2024-06-01T09:00:00"},  # 3 h ago
            {**stored("http://a.test/garbled"), "fetched_at": "yesterday"},  # the longest ago
            stored("http://a.test/blob"),
        ]
    )
    if isinstance(store, SqliteStore):
        store._conn.execute("UPDATE pages SET url = x'00' WHERE url = 'http://a.test/blob'")
    else:
        store._pages.update_one({"url": "http://a.test/blob"}, {"$set": {"url": 0}})
    chosen = plan_recrawl(store, "c1", policy, budget=None, now=NOW)
    assert [p["url"] for p in chosen] == [
        "http://a.test/garbled",
        "http://a.test/naive",
        "http://a.test/new",
    ]


def test_only_http_urls_are_fetched_again():
    """A stored url is data (a restored file, a document another program wrote): one that was
    no URL raised in the spider's start, a traceback after which no later page was fetched, and
    a file: one had the recrawl read a local file into the store (a data: one, its own text)."""
    crawler = get_crawler(RecrawlSpider)
    urls = [
        "http://a.test/1",
        "no scheme here",
        "file:///etc/passwd",
        "data:text/html,<p>words</p>",
        "http://[::1",
        "https://a.test/2",
    ]
    pages = [stored(url) for url in urls]
    spider = RecrawlSpider.from_crawler(crawler, "c1", pages=pages, policy="uniform")
    crawler.stats.open_spider()

    async def start() -> list[scrapy.Request | dict]:
        return [output async for output in spider.start()]

    output = asyncio.run(start())
    requests = [request.url for request in output if isinstance(request, scrapy.Request)]
    assert requests == ["http://a.test/1", "https://a.test/2"]
    assert [update["url"] for update in output if isinstance(update, dict)] == urls[1:5]
    assert crawler.stats.get_value("focused/skipped/bad_url") == 4


def test_the_summary_counts_every_planned_page(caplog):
    """The pages a recrawl could not record (a server down, a page now a PDF, robots.txt, a stop
    before the end) were in no count: a recrawl of a site that was down ended in "3 pages: 0
    changed, 0 unchanged, 0 gone", exit status 0, as if nothing had been planned."""
    crawler = get_crawler(RecrawlSpider)
    pages = [stored(f"http://a.test/{n}") for n in range(5)]
    spider = RecrawlSpider.from_crawler(crawler, "c1", pages=pages, policy="uniform")
    crawler.stats.open_spider()
    for outcome in ("changed", "unchanged", "unchanged"):
        crawler.stats.inc_value(f"focused/refresh/{outcome}")
    with caplog.at_level("INFO", logger="focused.refresh"):
        spider.closed("finished")
    assert caplog.messages == [
        "Recrawl of crawl c1 (uniform, 5 pages): 1 changed, 2 unchanged, 0 gone, 2 skipped"
    ]


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({}, "give them again: -s HTTPAUTH_USER=... -s HTTPAUTH_PASS=... -s HTTPAUTH_DOMAIN="),
        ({"HTTPAUTH_USER": "u", "HTTPAUTH_PASS": "p"}, "check HTTPAUTH_USER, HTTPAUTH_PASS"),
    ],
)
def test_pages_that_ask_for_a_password_are_said_at_the_close(caplog, settings, said):
    """A crawl made with -s HTTPAUTH_USER/PASS/DOMAIN was recrawled without them (the crawl
    record keeps no password, nor the settings of the run): every page answered 401 and the
    recrawl ended with "N skipped", exit status 0, nothing saying why."""
    crawler = get_crawler(RecrawlSpider, {**settings, "HTTPAUTH_DOMAIN": "a.test"})
    pages = [stored(f"http://a.test/{n}") for n in range(3)]
    spider = RecrawlSpider.from_crawler(crawler, "c1", pages=pages, policy="uniform")
    crawler.stats.open_spider()
    crawler.stats.inc_value("focused/skipped/http_401", 3)
    with caplog.at_level("INFO", logger="focused.refresh"):
        spider.closed("finished")
    [warning] = [record for record in caplog.records if record.levelname == "WARNING"]
    assert warning.getMessage().startswith("3 pages answered 401 Unauthorized: ")
    assert said in warning.getMessage()


def test_update_pages_sets_only_the_given_fields_and_creates_nothing(store):
    store.save_pages([stored("http://a.test/x", title="old", relevance=0.5)])
    store.update_pages(
        [
            {"crawl_id": "c1", "url": "http://a.test/x", "title": "new", "changes": 1},
            {"crawl_id": "c1", "url": "http://a.test/absent", "title": "nothing"},
        ]
    )
    [record] = store.pages("c1")
    assert record == {**stored("http://a.test/x", relevance=0.5), "title": "new", "changes": 1}
    with pytest.raises(ValueError, match="page fields must be"):
        store.update_pages([{"crawl_id": "c1", "url": "http://a.test/x", "rank": 1}])


def moved(store, crawl_id: str = "c1") -> tuple[int | None, int | None]:
    """The verdicts the crawl record counts moved: now relevant, no longer relevant."""
    crawl = store.get_crawl(crawl_id)
    return crawl["rescored_now_relevant"], crawl["rescored_no_longer_relevant"]


def test_the_verdicts_updates_move_are_counted_in_the_crawl_record(store):
    """A recrawl's --model moved stored verdicts and the store kept no count of them: a report
    could not tell them from relevant pages the crawl did not store. Each batch of updates now
    adds those it moves, against the verdicts stored, to the crawl record."""
    assert moved(store) == (0, 0)  # a new crawl's
    verdicts = {"a": True, "b": False, "c": True, "d": None}
    store.save_pages([stored(f"http://a.test/{n}", is_relevant=v) for n, v in verdicts.items()])
    store.update_pages(
        [
            {"crawl_id": "c1", "url": "http://a.test/a", "is_relevant": False},
            {"crawl_id": "c1", "url": "http://a.test/b", "is_relevant": True},
            {"crawl_id": "c1", "url": "http://a.test/c", "is_relevant": True},  # as it was
            {"crawl_id": "c1", "url": "http://a.test/c", "title": "no verdict"},
            {"crawl_id": "c1", "url": "http://a.test/d", "is_relevant": True},  # None: moved
            {"crawl_id": "c1", "url": "http://a.test/absent", "is_relevant": True},  # none
        ]
    )
    assert moved(store) == (2, 1)
    store.update_pages([{"crawl_id": "c1", "url": "http://a.test/a", "is_relevant": True}])
    assert moved(store) == (3, 1)  # back: the net change is the pages' now
    assert store.page_counts("c1").relevant == 2 + 3 - 1
    store.start_crawl(crawl_record())  # a later run of the crawl keeps its pages, and the count
    assert moved(store) == (3, 1)


def test_a_crawl_record_without_the_counts_of_verdicts_moved_is_left_without(store):
    """Recrawls before the counts moved verdicts no one counted: starting them at this
    recrawl's would make a report take a part for the whole."""
    store.save_pages([stored("http://a.test/a", is_relevant=True)])
    store._update_crawl("c1", dict.fromkeys(storage.RESCORED))  # as written before them
    store.update_pages([{"crawl_id": "c1", "url": "http://a.test/a", "is_relevant": False}])
    assert moved(store) == (None, None)
    assert store.pages("c1")[0]["is_relevant"] is False
    store.start_crawl(crawl_record())
    assert moved(store) == (None, None)


def test_the_verdicts_moved_are_counted_with_the_pages_or_not_at_all(tmp_path):
    """Into SQLite, the pages' updates and the count they add to are one transaction: a write
    that fails leaves neither, so that the count stays true to the pages."""
    store = SqliteStore(tmp_path / "focused.sqlite3")
    try:
        store.start_crawl(crawl_record())
        store.save_pages([stored("http://a.test/a", is_relevant=True)])
        store._conn.execute(
            "CREATE TRIGGER no_count BEFORE UPDATE OF rescored_no_longer_relevant ON crawls"
            " BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
        update = {"crawl_id": "c1", "url": "http://a.test/a", "is_relevant": False}
        with pytest.raises(storage.StoreError, match="disk full"):
            store.update_pages([update])
        assert store.pages("c1")[0]["is_relevant"] is True
        store._conn.execute("DROP TRIGGER no_count")
        store.update_pages([update])  # the batch retried
        assert (moved(store), store.pages("c1")[0]["is_relevant"]) == ((0, 1), False)
    finally:
        store.close()


def test_refresh_pipeline_updates_mongo(monkeypatch, mongo_client):  # noqa: F811
    monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: mongo_client)
    reader = MongoStore("mongodb://db.test", "focused", client=mongo_client)
    reader.start_crawl(crawl_record())
    reader.save_pages([stored("http://a.test/x")])
    crawler = get_crawler(RecrawlSpider, {"MONGO_URI": "mongodb://db.test"})
    crawler.spider = RecrawlSpider.from_crawler(crawler, "c1", pages=[], policy="uniform")
    [before] = reader.pages("c1")
    update = revisit(before, "t", "changed", NOW.isoformat(), 200)

    async def run() -> None:
        manager = ItemPipelineManager.from_crawler(crawler)
        await manager.open_spider_async()
        await manager.process_item_async(update)
        await manager.close_spider_async()

    asyncio.run(run())
    [after] = reader.pages("c1")
    assert (after["changes"], after["last_changed"], after["text"]) == (
        1,
        NOW.isoformat(),
        "changed",
    )
    assert reader.get_crawl("c1")["status"] == "running"  # the crawl record is left alone


# -- migration -------------------------------------------------------------------------------

NEW_FIELDS = ("content_hash", "last_changed", "changes", "visits")


def test_an_older_sqlite_file_gains_the_refresh_columns(tmp_path):
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    columns = ", ".join(name for name in PAGE_FIELDS if name not in NEW_FIELDS)
    conn.execute(f"CREATE TABLE pages ({columns}, UNIQUE (crawl_id, url))")
    conn.execute(
        "INSERT INTO pages (crawl_id, url, title, text, fetched_at)"
        f" VALUES ('c1', 'http://a/', 't', 'words', '{at(2)}')"
    )
    conn.commit()
    conn.close()
    store = SqliteStore(path)
    try:
        [old] = plan_recrawl(store, "c1", "proportional", budget=5, now=NOW)
        assert {name: old[name] for name in NEW_FIELDS} == dict.fromkeys(NEW_FIELDS)
        store.update_pages([revisit(old, "t", "words", NOW.isoformat(), 200)])
        [record] = store.pages("c1")
    finally:
        store.close()
    assert record["content_hash"] == content_hash("t", "words")
    assert (record["changes"], record["visits"], record["last_changed"]) == (0, 2, None)


def test_an_older_mongo_document_is_refreshed(mongo_client):  # noqa: F811
    store = MongoStore("mongodb://mongomock", "focused_old", client=mongo_client)
    old = {"crawl_id": "c1", "url": "http://a/", "text": "words", "fetched_at": at(2)}
    mongo_client["focused_old"]["pages"].insert_one(dict(old))
    [planned] = plan_recrawl(store, "c1", "uniform", budget=None, now=NOW)
    store.update_pages([revisit(planned, "t", "words", NOW.isoformat(), 200)])
    [record] = store.pages("c1")
    assert (record["changes"], record["visits"]) == (0, 2)
    assert record["content_hash"] == content_hash("t", "words")


# -- a recrawl of a loopback site ------------------------------------------------------------


def stored_crawl(db: Path, urls: Iterable[str], *, finished: bool = False, **fields) -> None:
    """Crawl c1 in the SQLite file ``db``, recorded with ``fields`` (finished, if so) and its
    pages at ``urls`` stored (``stored``)."""
    store = SqliteStore(db)
    try:
        store.start_crawl({**crawl_record(), **fields})
        if finished:
            store.finish_crawl("c1", status="finished", finish_reason="finished")
        store.save_pages([stored(url) for url in urls])
    finally:
        store.close()


class ChangingSite:
    """A small site whose pages the test edits between the crawl and the recrawl. Each page has
    an ETag, the hash of its body, but for /e, which has a Last-Modified (served by a ``Site``
    with ``validators=True``, which answers 304 when they match)."""

    E_MODIFIED = "Sat, 01 Jun 2024 10:00:00 GMT"

    def __init__(self) -> None:
        self.e_robots: str | None = None  # the X-Robots-Tag of /e
        self.pages = {
            "/": html("Home", " ".join(f'<a href="/{name}">{name}</a>' for name in "abcde")),
            "/a": html("Albatross", "<p>The albatross nests on remote islands.</p>"),
            "/b": html("Birds", "<p>Birds lay eggs in nests.</p>"),
            "/c": html("Cormorant", "<p>Cormorants dive for fish.</p>"),
            "/d": html("Dove", "<p>Doves coo.</p>"),
            "/e": html("Eagle", "<p>Eagles nest on cliffs.</p>"),
        }

    def respond(self, method: str, path: str) -> Reply:
        body = self.pages.get(path)
        if body is None:
            return Reply(404, "not found", "text/plain")
        if path == "/e":
            robots = {"X-Robots-Tag": self.e_robots} if self.e_robots else {}
            return Reply(body=body, headers={"Last-Modified": self.E_MODIFIED, **robots})
        return Reply(body=body, headers={"ETag": f'"{content_hash(body, None)[:12]}"'})


def stored_by_path(crawl, site: Site) -> dict[str, dict]:
    """The stored pages by path."""
    return {p["url"].removeprefix(site.url): p for p in crawl.pages()}


BIRDS = "<p>Birds build nests of twigs and lay eggs; birds feed chicks in nests.</p>"
CARS = "<p>Cars need engines, fuel, tyres and roads; drivers park cars in garages.</p>"


def three_pages() -> dict[str, str]:
    """The body of each path of a site about birds' nests: / and /one about them, /two and
    /three not, for a test to edit between the crawl and the recrawl."""
    links = '<a href="/one">one</a> <a href="/two">two</a> <a href="/three">three</a>'
    return {"/": BIRDS + links, "/one": BIRDS, "/two": CARS, "/three": CARS}


def serving(pages: dict[str, str]) -> Callable[[str, str], Reply]:
    """A ``Site``'s answers: each path of ``pages`` as it is when asked for, 404 for others."""

    def respond(method: str, path: str) -> Reply:
        return Reply(200, html(path, pages[path])) if path in pages else Reply(404, "")

    return respond


def crawl_with_model(tmp_path: Path, site: Site, settings: dict | None = None) -> Crawl:
    """A crawl of ``site`` about birds' nests (BIRDS is relevant, CARS not), its relevance
    model saved in ``tmp_path/job`` for a recrawl's --model."""
    crawl = run_crawl(
        tmp_path,
        {"strategy": "bfs", "query": "birds nests", "seeds": f"{site.url}/"},
        {"JOBDIR": tmp_path / "job", **(settings or {})},
    )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    return crawl


def test_a_rescoring_recrawl_says_which_verdicts_moved(tmp_path):
    """The crawl record's relevant pages stay the crawl's measure (what ``scrapy report``'s
    totals show), while a --model recrawl rescores the pages it finds changed: which verdicts
    it moved was said nowhere."""
    pages = three_pages()
    with Site(serving(pages)) as site:
        crawl = crawl_with_model(tmp_path, site)
        before = {path: p["is_relevant"] for path, p in stored_by_path(crawl, site).items()}
        assert before == {"/": True, "/one": True, "/two": False, "/three": False}
        pages["/one"], pages["/two"] = CARS, BIRDS  # one verdict each way; /three: no change
        pages["/three"] = CARS + "<p>Garages.</p>"
        result = recrawl(crawl.db, "test", "--model", str(tmp_path / "job" / "relevance"))
    assert result.returncode == 0, result.stderr[-3000:]
    after = {path: p["is_relevant"] for path, p in stored_by_path(crawl, site).items()}
    assert after == {"/": True, "/one": False, "/two": True, "/three": False}
    line = "Rescored 3 changed pages with the crawl's model: 1 now relevant, 1 no longer\n"
    assert line in result.stderr, result.stderr[-3000:]
    assert crawl.crawl_record()["relevant"] == 2  # the crawl's measure


@pytest.mark.parametrize("store_min", [None, 0.5])
def test_a_report_after_a_rescoring_recrawl_says_why_its_figures_differ(tmp_path, store_min):
    """After a --model recrawl made a relevant page irrelevant, the report's summary (the
    crawl's measure) said one relevant page more than its levels and its 100% decile (the pages'
    verdicts now), and said nothing of why. With STORE_MIN_RELEVANCE (a relevant page and an
    irrelevant one fetched, not stored) it said two relevant pages were not stored and none
    rescored: the store kept no count of the verdicts a recrawl moved. The crawl record counts
    them now, as the recrawl stores them."""
    some = "<p>Cars need engines, fuel and roads; a bird nests in one garage.</p>"  # ~0.23
    links = " ".join(f'<a href="/{name}">{name}</a>' for name in ("one", "two", "three", "four"))
    pages = {"/": BIRDS + links, "/one": BIRDS, "/two": some, "/three": CARS, "/four": BIRDS + CARS}
    settings: dict[str, object] = {}
    if store_min is not None:
        settings["STORE_MIN_RELEVANCE"] = store_min  # /two relevant, /three not: neither stored
    with Site(serving(pages)) as site:
        crawl = crawl_with_model(tmp_path, site, settings)
        relevant = {path: p["is_relevant"] for path, p in stored_by_path(crawl, site).items()}
        fetched = {"/": True, "/one": True, "/two": True, "/three": False, "/four": True}
        kept = {path: True for path in ("/", "/one", "/four")} if store_min else fetched
        assert relevant == kept
        pages["/one"] = CARS
        result = recrawl(crawl.db, "test", "--model", str(tmp_path / "job"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert crawl.crawl_record()["relevant"] == 4  # the crawl's measure
    report = run_scrapy(["report", "test", "-s", f"FOCUSED_DB={crawl.db}"], timeout=60)
    assert report.returncode == 0, report.stderr[-3000:]
    lines = report.stdout.splitlines()
    stored = 5 if store_min is None else 3
    assert f"pages      5 fetched, {stored} stored, 4 relevant, harvest rate 0.800" in lines
    assert (
        "rescored   1 page no longer relevant since the crawl (scrapy recrawl --model): the"
        " figures above are the crawl's, those below the pages' verdicts now"
    ) in lines, report.stdout
    not_stored = (
        "(relevant pages stored only: 1 relevant page was fetched but not stored, below"
        " STORE_MIN_RELEVANCE or left unstored)"
    )
    assert (not_stored in lines) == (store_min is not None), report.stdout
    relevant_now = 3 if store_min is None else 2
    decile = ["100%", "5", str(relevant_now), f"{relevant_now / 5:.3f}"]
    assert decile in [line.split() for line in lines], report.stdout
    as_json = run_scrapy(["report", "test", "--json", "-s", f"FOCUSED_DB={crawl.db}"], timeout=60)
    totals = json.loads(as_json.stdout)["totals"]
    figures = (totals["relevant"], totals["relevant_rescored"], totals["relevant_not_stored"])
    assert figures == (4, -1, 0 if store_min is None else 1)
    assert json.loads(as_json.stdout)["harvest_deciles"][-1]["relevant"] == relevant_now
    record = crawl.crawl_record()  # the verdicts moved, as the recrawl counted them
    assert (record["rescored_now_relevant"], record["rescored_no_longer_relevant"]) == (0, 1)


def test_a_crawl_run_again_after_a_rescoring_recrawl_keeps_its_own_relevant_count(tmp_path):
    """A JOBDIR crawl run again (to go on with it) brings its counters up to its stored pages:
    it took the verdicts a --model recrawl had moved there for its own, and recorded 3 relevant
    pages where it had found 2. Its report then said the recrawl's page twice, as rescored and
    as "1 relevant page was fetched but not stored", though it stored every page."""
    pages = three_pages()
    with Site(serving(pages)) as site:
        crawl = crawl_with_model(tmp_path, site)
        assert crawl.crawl_record()["relevant"] == 2
        pages["/two"] = BIRDS
        result = recrawl(crawl.db, "test", "--model", str(tmp_path / "job" / "relevance"))
        assert result.returncode == 0, result.stderr[-3000:]
        assert crawl.crawl_record()["rescored_now_relevant"] == 1
        crawl_with_model(tmp_path, site)  # its JOBDIR again
    assert crawl.crawl_record()["relevant"] == 2  # the crawl's measure still
    report = run_scrapy(["report", "test", "-s", f"FOCUSED_DB={crawl.db}"], timeout=60)
    assert report.returncode == 0, report.stderr[-3000:]
    assert "pages      4 fetched, 4 stored, 2 relevant, harvest rate 0.500" in report.stdout
    assert "rescored   1 page now relevant since the crawl" in report.stdout
    assert "fetched but not stored" not in report.stdout, report.stdout


def test_a_rescoring_recrawl_killed_half_way_has_counted_the_verdicts_it_stored(tmp_path):
    """The verdicts a recrawl moved are counted with each batch it stores, not as it ends: one
    killed outright has counted those of the pages it stored, and no other."""
    names = [f"p{n}" for n in range(6)]
    pages = {"/": BIRDS + " ".join(f'<a href="/{name}">{name}</a>' for name in names)}
    pages |= {f"/{name}": BIRDS for name in names}
    served = []
    hold = threading.Event()

    def respond(method: str, path: str) -> Reply:
        if hold.is_set() and len(served) >= 3:
            time.sleep(30)  # the recrawl is killed meanwhile
        served.append(path)
        return Reply(200, html(path, pages[path])) if path in pages else Reply(404, "")

    with Site(respond) as site:
        crawl = crawl_with_model(tmp_path, site)
        assert crawl.crawl_record()["relevant"] == 7
        pages.update((path, CARS) for path in list(pages))
        served.clear()
        hold.set()
        # Little logged: its stderr is read once it is killed.
        settings = {"CONCURRENT_REQUESTS": 1, "ROBOTSTXT_OBEY": False, "LOG_LEVEL": "WARNING"}
        process = start_recrawl(
            crawl.db, "test", "--model", str(tmp_path / "job"), settings=settings
        )
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                stored_now = stored_by_path(crawl, site).values()
                if sum(not p["is_relevant"] for p in stored_now) == 3:
                    break
                time.sleep(0.2)
            time.sleep(0.5)  # a page stored past the three would be counted with it
        finally:
            process.kill()
            stderr = process.communicate(timeout=60)[1]
    relevant = sum(p["is_relevant"] for p in stored_by_path(crawl, site).values())
    assert relevant == 4, (served, stderr[-3000:])
    record = crawl.crawl_record()
    assert (record["rescored_now_relevant"], record["rescored_no_longer_relevant"]) == (0, 3)


def recrawl_options(db: Path, settings: dict | None = None) -> list[str]:
    settings = {"FOCUSED_DB": db, "LOG_LEVEL": "INFO", **(settings or {})}
    return [arg for name, value in settings.items() for arg in ("-s", f"{name}={value}")]


def recrawl(db: Path, *args: str, settings: dict | None = None) -> subprocess.CompletedProcess:
    return run_scrapy(["recrawl", *args, *recrawl_options(db, settings)], timeout=120)


def start_recrawl(db: Path, *args: str, settings: dict | None = None) -> subprocess.Popen:
    """``scrapy recrawl ARGS`` (default: ``c1``) of ``db`` under way, its log read from its
    ``stderr``."""
    return subprocess.Popen(
        scrapy_command("recrawl", *(args or ("c1",)), *recrawl_options(db, settings)),
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
        env=crawl_env(),
    )


def test_recrawl_records_the_changed_page_and_leaves_the_unchanged_alone(tmp_path):
    """Also: a recrawl downloaded every page in full. The crawl stores each page's validators,
    and the recrawl sends them back: a page the server says is not modified (304) is recorded
    unchanged without its body sent again; a page fetched in full gets its new validators. A
    304 whose X-Robots-Tag now says noindex has the page fetched again in full, and stored
    without its text.

    Also: the recrawl fetched with the project's settings, not the crawl's -s. The crawl record
    keeps those of how to fetch (focused.fetchsettings), which the recrawl gives again."""
    content = ChangingSite()
    agent = "birdwatch/2.0 (+http://127.0.0.1/)"
    with Site(content.respond, validators=True) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds nests", "seeds": f"{site.url}/"},
            # JOBDIR saves the relevance model, for --model
            {"JOBDIR": tmp_path / "job", "USER_AGENT": agent},
        )
        assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
        record = crawl.crawl_record()
        assert (record["render"], record["fetch_settings"]) == ("never", {"USER_AGENT": agent})
        before = stored_by_path(crawl, site)
        assert set(before) == {"/", "/a", "/b", "/c", "/d", "/e"}
        assert site.not_modified == []  # a crawl asks for every page in full
        assert all(p["etag"].startswith('"') for path, p in before.items() if path != "/e")
        assert (before["/e"]["etag"], before["/e"]["last_modified"]) == (None, content.E_MODIFIED)
        assert all(p["changes"] == 0 and p["visits"] == 1 for p in before.values())
        assert all(p["last_changed"] == p["fetched_at"] for p in before.values())

        content.pages["/a"] = content.pages["/a"].replace("<p>", '<p class="ad-42">  ')
        content.pages["/b"] = html(
            "Birds", '<p>Birds lay eggs in nests of twigs.</p><a href="/new">new page</a>'
        )
        content.pages["/new"] = html("New", "<p>Never stored.</p>")
        del content.pages["/c"]
        content.pages["/d"] = html("Dove", "<p>Doves coo loudly.</p>")
        content.pages["/robots.txt"] = "User-agent: *\nDisallow: /d\n"
        content.e_robots = "noindex"
        site.log.entries.clear()
        site.user_agents.clear()
        model = tmp_path / "job" / "relevance"
        warcs = tmp_path / "warc"
        result = recrawl(crawl.db, "test", "--model", str(model), settings={"WARC_DIR": warcs})
        assert result.returncode == 0, result.stderr[-3000:]
        # /d is skipped: robots.txt now disallows it
        summary = "crawl test (uniform, 6 pages): 2 changed, 2 unchanged, 1 gone, 1 skipped\n"
        assert summary in result.stderr, result.stderr[-3000:]
        assert "'focused/refresh/not_modified': 1" in result.stderr, result.stderr[-3000:]
        assert "'focused/refresh/refetched': 1" in result.stderr, result.stderr[-3000:]
        assert f"Fetching as crawl test did: USER_AGENT='{agent}'\n" in result.stderr
        assert site.user_agents == {agent}
        fetched = sorted(path for _, path in site.log.gets())
        # Unchanged: by If-None-Match (/) and If-Modified-Since (/e), no body sent; /e again
        # in full, its 304 now noindex.
        assert sorted(site.not_modified) == ["/", "/e"]
    # Stored pages only (/new is not followed), as robots.txt allows (/d is now disallowed).
    assert fetched == ["/", "/a", "/b", "/c", "/e", "/e"]
    after = stored_by_path(crawl, site)
    assert set(after) == set(before)
    # Left as it was, but for when it was tried: a later run with a budget takes the others first.
    assert before["/d"].pop("tried_at") is None
    assert after["/d"].pop("tried_at") > before["/d"]["fetched_at"]
    assert after["/d"] == before["/d"]
    b = after["/b"]
    assert (b["changes"], b["visits"]) == (1, 2)
    assert b["last_changed"] > before["/b"]["last_changed"]
    assert b["text"] == "Birds lay eggs in nests of twigs.\nnew page"
    assert b["content_hash"] != before["/b"]["content_hash"]
    for path in ("/", "/a"):  # the markup of /a changed, not its text
        page_ = after[path]
        assert (page_["changes"], page_["visits"], page_["status"]) == (0, 2, 200)
        assert page_["last_changed"] == before[path]["last_changed"]
        assert page_["content_hash"] == before[path]["content_hash"]
        assert page_["fetched_at"] > before[path]["fetched_at"]
    e = after["/e"]
    assert (e["robots"], e["text"], e["changes"], e["visits"]) == ("noindex", None, 1, 2)
    # The validators of what is stored: the 304's as they were, those of /a's and /b's new body.
    for path in ("/", "/e"):
        validators = ("etag", "last_modified")
        assert [after[path][name] for name in validators] == [
            before[path][name] for name in validators
        ]
    for path in ("/a", "/b"):
        assert after[path]["etag"] == f'"{content_hash(content.pages[path], None)[:12]}"'
        assert after[path]["etag"] != before[path]["etag"]
    c = after["/c"]  # gone: recorded, not deleted
    assert (c["status"], c["visits"], c["changes"]) == (404, 2, 0)
    assert c["text"] == before["/c"]["text"]
    assert (c["etag"], c["last_modified"]) == (None, None)  # its next fetch is a full one
    # The changed page is rescored with the crawl's model; the others keep the crawl's scores.
    scores = RelevanceModel.load(model).score(b["text"], b["language"])
    assert b["relevance"] == round(scores.combined, 6) != before["/b"]["relevance"]
    for path in ("/", "/a", "/c"):
        assert after[path]["relevance"] == before[path]["relevance"]
    assert all(after[path]["fetch_order"] == before[path]["fetch_order"] for path in before)
    # WARC_DIR: the recrawl's own file, with the records of the page whose new text it stored;
    # not those unchanged, gone, or now noindex (/e).
    [warc_file] = warcs.iterdir()
    with warc_file.open("rb") as stream:
        kept = [
            (r.rec_type, r.rec_headers.get_header("WARC-Target-URI"), r.content_stream().read())
            for r in ArchiveIterator(stream)
        ]
    assert [kind_and_url[:2] for kind_and_url in kept] == [
        ("warcinfo", None),
        ("response", b["url"]),
        ("request", b["url"]),
    ]
    assert b"crawl_id: test\r\n" in kept[0][2] and b"recrawl_policy: uniform\r\n" in kept[0][2]
    assert kept[1][2] == content.pages["/b"].encode()

    record = crawl.crawl_record()
    assert record["status"] == "finished" and record["pages"] == 6
    # The recrawl's mark, set as it started, is cleared as it ends: the crawl may be recrawled.
    assert (record["recrawl_seen_at"], record["recrawl_heartbeat_interval"]) == (None, None)


def test_status_codes_allowed_on_the_recrawl_command_line_let_their_pages_through(tmp_path):
    """-s HTTPERROR_ALLOWED_CODES=403 reaches Scrapy as strings, which it compared with each
    response's integer status: the page was skipped as http_403, its visit not recorded."""

    def respond(method: str, path: str) -> Reply:
        return Reply(403, html("Birds", "<p>Birds nest behind a login now.</p>"))

    db = tmp_path / "focused.sqlite3"
    with Site(respond) as site:
        stored_crawl(db, [f"{site.url}/a"])
        result = recrawl(db, "c1", settings={"HTTPERROR_ALLOWED_CODES": "403,451"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "focused/skipped/http_403" not in result.stderr, result.stderr[-3000:]
    store = SqliteStore(db, create=False)
    try:
        [page_] = store.pages("c1")
    finally:
        store.close()
    assert (page_["status"], page_["visits"], page_["changes"]) == (403, 2, 1)
    assert page_["text"] == "Birds nest behind a login now."


def test_a_recrawl_whose_log_file_is_on_a_full_disk_goes_on(tmp_path):
    """Scrapy, closing the log handler of a LOG_FILE that could not be written, raised: a
    traceback, and nothing recorded. As for a crawl (focused.logfile): one line, and on."""
    db = tmp_path / "focused.sqlite3"
    with Site(lambda method, path: Reply(body=html("Birds", "<p>Birds nest.</p>"))) as site:
        stored_crawl(db, [f"{site.url}/a"])
        result = recrawl(db, "c1", settings={"LOG_FILE": "/dev/full"})
    assert result.returncode == 0, result.stderr[-3000:]
    [line] = result.stderr.splitlines()
    assert line.startswith("error: LOG_FILE '/dev/full' cannot be written: "), line
    store = SqliteStore(db, create=False)
    try:
        [page_] = store.pages("c1")
    finally:
        store.close()
    assert page_["visits"] == 2


def test_a_page_now_redirecting_to_another_stored_page_is_recorded(tmp_path):
    """The recrawl's dupefilter dropped the redirect of /old to /new, a page it had requested
    already (or /new's own request, had the redirect come first): /old was fetched and then
    recorded and counted nowhere. Each stored page is requested once anyway; a redirect loop
    is still cut, by REDIRECT_MAX_TIMES.

    Also: a redirect off the crawl's allowed_domains was followed (the crawl record did not keep
    them), and the other site's page stored under the crawl's URL. The record keeps them now:
    such a redirect is refused (focused/skipped/offsite), the page left as it was but for
    ``tried_at``."""
    log = FetchLog()
    elsewhere = Site(lambda method, path: Reply(body=html("Else", "<p>Off.</p>")), "127.0.0.2", log)

    def respond(method: str, path: str) -> Reply:
        moved = {"/old": "/new", "/loop": "/loop2", "/loop2": "/loop", "/away": elsewhere.url}
        if path in moved:
            return Reply(301, headers={"Location": moved[path]})
        return Reply(body=html("New", "<p>Moved here.</p>"))

    db = tmp_path / "focused.sqlite3"
    with Site(respond, log=log) as site, elsewhere:
        # /new first: its own request is in flight before /old's redirect to it comes.
        paths = ("/new", "/old", "/loop", "/away")
        stored_crawl(db, [f"{site.url}{path}" for path in paths], allowed_domains=[site.host])
        result = recrawl(db, "c1", settings={"CONCURRENT_REQUESTS": 1, "REDIRECT_MAX_TIMES": 2})
    assert result.returncode == 0, result.stderr[-3000:]
    summary = "Recrawl of crawl c1 (uniform, 4 pages): 2 changed, 0 unchanged, 0 gone, 2 skipped\n"
    assert summary in result.stderr, result.stderr[-3000:]
    assert "'focused/skipped/redirect_loop': 1" in result.stderr, result.stderr[-3000:]
    assert "'focused/skipped/offsite': 1" in result.stderr, result.stderr[-3000:]
    assert {host for host, _ in log.gets()} == {site.host}  # nothing asked of the other site
    store = SqliteStore(db, create=False)
    try:
        after = {p["url"].removeprefix(site.url): p for p in store.pages("c1")}
    finally:
        store.close()
    # /old now shows what a reader of it gets: /new's page.
    assert [(after[path]["text"], after[path]["visits"]) for path in ("/new", "/old")] == [
        ("Moved here.", 2),
        ("Moved here.", 2),
    ]
    assert after["/loop"]["visits"] == 1
    away = after["/away"]
    assert (away["visits"], away["text"]) == (1, "some words")
    assert away["tried_at"] > away["fetched_at"]


def test_a_rendered_crawl_is_recrawled_rendered(tmp_path):
    """A recrawl fetched every page plainly: the pages of a crawl made with -a render=always
    (or auto) whose text a script writes came back without it, each counted as a change and
    stored with its text gone. The crawl record keeps the mode, and the recrawl renders as
    the crawl did (``--render`` says otherwise)."""
    script = "document.getElementById('t').textContent = 'Birds nest on cliffs.'"
    body = html("Birds", f'<p id="t"></p><script>{script}</script>')
    db = tmp_path / "focused.sqlite3"
    with Site(lambda method, path: Reply(body=body)) as site:
        store = SqliteStore(db)
        store.start_crawl({**crawl_record(), "render": "always"})
        rendered = {"title": "Birds", "text": "Birds nest on cliffs."}  # as the crawl stored it
        before = {**stored(f"{site.url}/app"), **rendered, "content_hash": content_hash(**rendered)}
        store.save_pages([before])
        store.close()
        result = recrawl(db, "c1")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = "Recrawl of crawl c1 (uniform, 1 page): 0 changed, 1 unchanged, 0 gone, 0 skipped\n"
    assert summary in result.stderr, result.stderr[-3000:]
    assert "'focused/rendered': 1" in result.stderr, result.stderr[-3000:]
    store = SqliteStore(db, create=False)
    try:
        [after] = store.pages("c1")
    finally:
        store.close()
    assert (after["text"], after["changes"], after["visits"]) == ("Birds nest on cliffs.", 0, 2)


def test_a_recrawl_stopped_by_a_second_ctrl_c_exits_with_status_1(tmp_path):
    """Stopped uncleanly (a second Ctrl-C: the spider never closes, its requests under way are
    dropped), a recrawl exited with status 0, as if it had ended; a crawl exits with 1."""
    fetching = threading.Event()

    def respond(method: str, path: str) -> Reply:
        fetching.set()
        time.sleep(3)  # the requests are still under way at the second Ctrl-C
        return Reply(body=html("Birds", "<p>Birds nest.</p>"))

    db = tmp_path / "focused.sqlite3"
    with Site(respond) as site:
        stored_crawl(db, [f"{site.url}/{n}" for n in range(4)])
        process = start_recrawl(db)
        assert fetching.wait(60)
        process.send_signal(signal.SIGINT)
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        stderr = process.communicate(timeout=60)[1]
    assert "forcing unclean shutdown" in stderr, stderr[-3000:]
    assert process.returncode == 1, stderr[-3000:]


def test_ctrl_c_of_a_recrawl_neither_sends_nor_marks_a_page_its_crawl_delay_holds(tmp_path):
    """Ctrl-C of a recrawl whose host asked for a Crawl-delay: Scrapy's close waited out the
    delay for the page held in its slot and fetched it after the stop. Not sent now, it is not
    recorded as tried either (``tried_at``): it was not, and the next run takes it first."""
    log = FetchLog()

    def respond(method: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(200, "User-agent: *\nCrawl-delay: 30\n", "text/plain")
        return Reply(body=html("Birds", "<p>Birds nest.</p>"))

    db = tmp_path / "focused.sqlite3"
    with Site(respond, log=log) as site:
        stored_crawl(db, [f"{site.url}/1"])
        # The page waits in its host's slot: 2 s.
        said = "asks for a Crawl-delay of 30 s"
        process = start_recrawl(db)
        stderr, stopped = stop_once_said(process, said, 2, timeout=90)
    assert process.returncode == 0, stderr[-3000:]
    assert stopped < 10, stderr[-3000:]  # it waited out the delay: 28 s
    assert log.entries == [], log.entries
    assert "'focused/closing/not_sent': 1" in stderr, stderr[-3000:]
    assert "focused/skipped/" not in stderr, stderr[-3000:]
    store = SqliteStore(db, create=False)
    try:
        [after] = store.pages("c1")
    finally:
        store.close()
    assert after["tried_at"] is None


# -- bad input -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("refresh") / "focused.sqlite3"
    store = SqliteStore(db)
    store.start_crawl(crawl_record())
    store.save_pages([stored("http://127.0.0.1:9/a")])
    store.start_crawl(crawl_record("empty"))
    store.close()
    return db


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (("nosuch",), 1, "no crawl 'nosuch' in the SQLite store"),
        (("empty",), 1, "crawl empty has no stored pages to fetch again"),
        ((), 2, "give the id of a crawl to recrawl (`scrapy crawls` lists them)"),
        (("c1", "c2"), 2, "give one crawl id, not 2: c1 c2"),
        (("c1", "--policy", "random"), 2, "--policy='random' is not one of: uniform, proportional"),
        (("c1", "--budget", "0"), 2, "--budget=0 is below its minimum 1"),
        (("c1", "--budget", "many"), 2, "--budget='many' is not an integer"),
        (("c1", "--policy", "proportional"), 2, "--policy proportional needs --budget N"),
        (("c1", "--model", "/nonexistent"), 2, "--model /nonexistent holds no saved relevance"),
        (("c1", "-s", "JOBDIR=jobs/x"), 2, "recrawl takes no JOBDIR"),
        (("c1", "-s", "JOBDIR=0"), 2, "recrawl takes no JOBDIR"),  # a folder named 0
        (("c1", "-s", "HTTPCACHE_ENABLED=1"), 2, "recrawl takes no HTTPCACHE_ENABLED: Scrapy's"),
        (("c1", "--render", "sometimes"), 2, "--render='sometimes' is not one of: never, always"),
        (("c1", "--render", ""), 2, "--render"),
        (
            ("c1", "--render", "auto", "-s", "FOCUSED_CHROMIUM=/nonexistent"),
            2,
            "Chromium not found at /nonexistent",
        ),
        # Found out only once the store failed and its updates had nowhere to go.
        (
            ("c1", "-s", "FOCUSED_UNSTORED_DIR=scrapy.cfg"),
            2,
            "cannot write FOCUSED_UNSTORED_DIR 'scrapy.cfg': scrapy.cfg is not a writable folder",
        ),
    ],
)
def test_bad_input_is_one_line(cli, small_store, args, status, message):  # noqa: F811
    # In-process (the checks run before the crawler process starts); the CLI below.
    one_line_error(cli("recrawl", *args, settings={"FOCUSED_DB": small_store}), status, message)


def test_the_model_of_another_crawl_s_jobdir_is_refused(cli, small_store, tmp_path):  # noqa: F811
    """It loaded, and rescored c1's changed pages against the other crawl's topic."""
    job = tmp_path / "job"
    (job / "relevance").mkdir(parents=True)
    (job / "focused.json").write_text(json.dumps({"crawl_id": "other", "strategy": "bfs"}))
    for given in (job, job / "relevance"):
        result = cli("recrawl", "c1", "--model", str(given), settings={"FOCUSED_DB": small_store})
        one_line_error(result, 2, f"--model {given} is the model of crawl other, not of c1:")


@pytest.mark.parametrize("state", ["[]", "null", '{"params": []}'])
def test_a_model_whose_state_is_json_of_another_shape_is_one_line(
    cli,  # noqa: F811
    small_store,
    tmp_path,
    state,
):
    """A state.json of valid JSON but no object of the model's: a traceback (TypeError)."""
    saved = tmp_path / "relevance"
    RelevanceModel("birds nest eggs").save(saved)
    (saved / "state.json").write_text(state)
    result = cli("recrawl", "c1", "--model", str(saved), settings={"FOCUSED_DB": small_store})
    one_line_error(result, 2, f"--model {saved} holds no saved relevance model")


def test_a_crawl_running_in_another_process_is_not_recrawled(cli, tmp_path):  # noqa: F811
    """A recrawl took no lock: run while the crawl (a resumed JOBDIR crawl) or another recrawl
    of the same id ran, it fetched every page again beside it, each visit counted twice and
    each process overwriting the other's records. The other process here holds the crawl's
    lock as a crawl does (lockf on FOCUSED_DB.lock, gone with its process)."""
    db = tmp_path / "focused.sqlite3"
    stored_crawl(db, ["http://127.0.0.1:9/a"])
    hold = (
        "import fcntl, sys\n"
        f"held = open({f'{db}.lock'!r}, 'w')\n"
        f"fcntl.lockf(held, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, {crawl_lock_offset('c1')})\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"  # until the test closes its stdin
    )
    with subprocess.Popen(
        [sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout.readline() == "held\n"
        result = cli("recrawl", "c1", settings={"FOCUSED_DB": db})
        holder.stdin.close()
    one_line_error(result, 2, "crawl c1 is running in another process: let it end")
    assert result.stderr.rstrip().endswith("(Ctrl-C pauses it), then recrawl it")
    store = SqliteStore(db, create=False)
    try:
        assert store.pages("c1") == [stored("http://127.0.0.1:9/a")]
    finally:
        store.close()


def test_a_process_of_a_shared_crawl_holds_off_a_recrawl_of_its_sqlite_store(cli, tmp_path):  # noqa: F811
    """The processes of a shared crawl (FOCUSED_FRONTIER) into SQLite take the crawl's lock
    shared, two at once: a recrawl, which takes it whole, is refused beside any of them. And
    one that takes it knows them all dead, whatever their record's heartbeat says."""
    db = tmp_path / "focused.sqlite3"
    stored_crawl(db, ["http://127.0.0.1:9/a"])
    settings = {"FOCUSED_DB": str(db), "FOCUSED_FRONTIER": "redis://127.0.0.1:9/0"}
    hold = (
        "import sys\n"
        "from focused.jobchecks import lock_crawl\n"
        f"lock_crawl({settings!r}, 'c1', then='')\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"  # until the test closes its stdin
    )
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", hold],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        assert [holder.stdout.readline() for holder in holders] == ["held\n", "held\n"]
        result = cli("recrawl", "c1", settings={"FOCUSED_DB": db})
    finally:
        for holder in holders:
            holder.stdin.close()
            holder.wait(timeout=60)
    one_line_error(result, 2, "crawl c1 is running in another process: let it end")


def test_a_crawl_whose_heartbeat_is_fresh_is_not_recrawled(
    monkeypatch,
    mongo_client,  # noqa: F811
    capsys,
):
    """The processes of a crawl into MongoDB take no lock: a recrawl beside them fetched every
    page again as they crawled. Its record shows it: ``running``, with a heartbeat
    (``seen_at``) that is not stale. A crawl killed outright is recrawled once its heartbeat
    is stale, as ``scrapy crawls`` shows it ``stopped?``."""
    settings, store = finished_mongo_crawl(monkeypatch, mongo_client)
    beating = {"heartbeat_interval": 30.0}
    store.start_crawl({**crawl_record(), **beating})  # seen now
    store.start_crawl({**crawl_record("killed"), **beating, "seen_at": at(1)})
    store.start_crawl(crawl_record("old"))  # no heartbeat: written before there were any
    live = {name: is_live(store.get_crawl(name), datetime.now(UTC)) for name in ("c1", "killed")}
    assert live == {"c1": True, "killed": False}
    assert not is_live(store.get_crawl("old"), datetime.now(UTC))
    line = refused_plan(settings, capsys)
    assert line.startswith("error: crawl c1 is running in another process (last seen ")
    # What to do if it was killed, when no one can let it end: wait for its heartbeat to go
    # stale (3 of its 30 s intervals), which the line had the user work out.
    seen = datetime.fromisoformat(store.get_crawl("c1")["seen_at"])
    stale = (seen + timedelta(seconds=90)).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert line.endswith(
        "let it end (Ctrl-C pauses it), then recrawl it; if it was killed, it counts as stopped"
        f" from {stale}"
    )


def test_a_crawl_killed_outright_on_mongodb_is_recrawled_at_once(
    monkeypatch,
    mongo_client,  # noqa: F811
    capsys,
):
    """A crawl into MongoDB killed with kill -9 leaves its record ``running``, its heartbeat
    fresh: its recrawl and a run of it were refused for 90 s, as beside a live crawl, and
    `scrapy crawls` showed it running. The record names the run's process: one of this
    machine that is gone, or whose pid another process has taken since, holds up neither, and
    is shown ``stopped?``; a live one still holds them up."""
    settings, store = finished_mongo_crawl(monkeypatch, mongo_client)
    made = [sys.executable, "-c", "from focused.storage import this_process; print(this_process())"]
    gone = subprocess.run(made, cwd=REPO, capture_output=True, text=True, check=True).stdout
    alive = storage.this_process()
    kernel, pid, start = alive.split("/")
    reused = "/".join([kernel, pid, str(int(start) - 1)])  # this pid, another process
    beating = {**crawl_record(), "heartbeat_interval": 30.0}
    for process in (gone.strip(), reused):
        store.start_crawl({**beating, "run_by": process})  # seen now
        assert describe_status(store.get_crawl("c1")).startswith("stopped? (last seen ")
        command = planned(settings)  # the recrawl goes on
        assert command.pages
        command._end_claim("c1")
        store.start_crawl({**beating, "run_by": None}, refuse_live=True)  # and so does a run
    store.start_crawl({**beating, "run_by": alive})
    assert describe_status(store.get_crawl("c1")) == "running"
    line = refused_plan(settings, capsys)
    assert line.startswith("error: crawl c1 is running in another process (last seen ")


def test_a_recrawl_claims_the_crawl_s_record_with_compare_and_set(store):
    """Two recrawls started together each read no recrawl under way: one only marks it."""
    assert store.claim_recrawl("c1", None, 30.0)
    seen = store.get_crawl("c1")["recrawl_seen_at"]
    assert not store.claim_recrawl("c1", None, 30.0)
    claim = store.claim_recrawl("c1", seen, 30.0)  # a stale mark read is taken over
    assert store.end_recrawl("c1", claim)
    ended = store.get_crawl("c1")
    assert (ended["recrawl_seen_at"], ended["recrawl_heartbeat_interval"]) == (None, None)
    assert store.claim_recrawl("c1", None, 30.0)


def stale_claim(store, monkeypatch, seen: str | None = None) -> str:
    """A recrawl's claim of crawl c1 written 1 hour ago at 30 s heartbeats: stalled, stale."""
    with monkeypatch.context() as patched:
        patched.setattr(storage, "_utc_now", lambda: at(1))
        claim = store.claim_recrawl("c1", seen, 30.0)
    assert claim and not recrawl_is_live(store.get_crawl("c1"), datetime.now(UTC))
    return claim


def test_a_run_of_the_crawl_does_not_start_over_a_live_recrawl_mark(store, monkeypatch):
    """The crawl read its record (no recrawl under way, ``check_store``), a recrawl claimed
    it, then the crawl wrote its start over it: both fetched every page. The start now refuses
    a live mark, and writes nothing."""
    assert store.claim_recrawl("c1", None, 30.0)
    marked = store.get_crawl("c1")
    with pytest.raises(storage.RecrawlUnderWay) as refused:
        store.start_crawl({**crawl_record(), "heartbeat_interval": 30.0})
    assert refused.value.crawl == marked
    assert store.get_crawl("c1") == marked  # not started: the record as the recrawl left it


def test_a_run_of_the_crawl_that_starts_keeps_a_recrawl_s_mark(store, monkeypatch):
    """The start replaced the whole record: a recrawl's mark went with it, and a third process
    no longer saw that recrawl. A start is refused over a live mark; a stale one is kept as it
    was, for its recrawl to clear, or another to take over."""
    stale = stale_claim(store, monkeypatch)
    store.start_crawl({**crawl_record(), "heartbeat_interval": 30.0})
    started = store.get_crawl("c1")
    assert is_live(started, datetime.now(UTC))
    mark = ("recrawl_seen_at", "recrawl_heartbeat_interval", "recrawl_claim")
    assert [started[name] for name in mark] == [at(1), 30.0, stale]


def test_a_recrawl_claiming_the_crawl_as_it_starts_is_seen(store, monkeypatch):
    """The check and the write of the crawl's start are one compare and set: a recrawl that
    claims the crawl between them is seen, on either backend."""
    read = store._find_crawls
    claims = []

    def read_then_claimed(crawl_id, *, limit):
        found = read(crawl_id, limit=limit)
        if not claims:  # the first read only
            claims.append(store.claim_recrawl("c1", None, 30.0))
        return found

    monkeypatch.setattr(store, "_find_crawls", read_then_claimed)
    with pytest.raises(storage.RecrawlUnderWay):
        store.start_crawl({**crawl_record(), "heartbeat_interval": 30.0})
    monkeypatch.undo()
    record = store.get_crawl("c1")
    assert record["heartbeat_interval"] is None  # the start refused wrote nothing
    assert record["recrawl_claim"] == claims[0]


def test_a_stalled_recrawl_whose_mark_was_taken_over_leaves_the_new_one_alone(store, monkeypatch):
    """Recrawl A stalled past 3 heartbeats, B took its stale mark over, then A woke: its
    heartbeat and its end wrote over B's mark or cleared it, and a third recrawl or the crawl
    could start beside B. Each claim has its identity; only its own mark is refreshed or
    cleared."""
    first = stale_claim(store, monkeypatch)
    taken = store.get_crawl("c1")
    second = store.claim_recrawl("c1", taken["recrawl_seen_at"], 30.0)
    assert second and second != first
    marked = store.get_crawl("c1")
    assert not store.recrawl_heartbeat("c1", first, 30.0)
    assert not store.end_recrawl("c1", first)
    assert store.get_crawl("c1") == marked
    assert store.recrawl_heartbeat("c1", second, 30.0)
    assert store.end_recrawl("c1", second)
    ended = store.get_crawl("c1")
    mark = ("recrawl_seen_at", "recrawl_heartbeat_interval", "recrawl_claim")
    assert [ended[name] for name in mark] == [None, None, None]


def planned(settings: dict, *options: str, project: dict | None = None) -> RecrawlCommand:
    """The recrawl command's checks and plan of crawl c1 (its crawl is not run), given
    ``settings`` with -s, in a project whose settings module also sets ``project``."""
    command = RecrawlCommand()
    command.settings = Settings()
    command.settings.setmodule("focused.settings")
    command.settings.setdict(project or {}, priority="project")
    command.settings.setdict(settings, priority="cmdline")
    parser = argparse.ArgumentParser()
    command.add_options(parser)
    command.process_options(["c1"], parser.parse_args(options))
    return command


def refused_plan(settings: dict, capsys, *options: str) -> str:
    """The one line on stderr of the recrawl command refusing to plan crawl c1 (exit 2)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        planned(settings, *options)
    assert refused.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    return line


def finished_mongo_crawl(monkeypatch, client) -> tuple[dict[str, str], MongoStore]:
    """Crawl c1 finished, with one page, in a MongoDB (mongomock) the commands open: their
    settings, and the store."""
    monkeypatch.setattr(pymongo, "MongoClient", lambda uri, **options: client)
    settings = {"MONGO_URI": "mongodb://db.test"}
    store = MongoStore("mongodb://db.test", "focused", client=client)
    store.start_crawl({**crawl_record(), "heartbeat_interval": 30.0, "seen_at": at(2)})
    store.finish_crawl("c1", status="finished", finish_reason="finished")
    store.save_pages([stored("http://127.0.0.1:9/a")])
    return settings, store


def test_a_recrawl_killed_outright_on_mongodb_holds_up_nothing(
    monkeypatch,
    mongo_client,  # noqa: F811
    capsys,
):
    """A recrawl killed with kill -9 leaves its mark in the crawl's record, fresh for 3
    heartbeats: on MongoDB, where no lock tells, the next recrawl and a run of the crawl were
    refused for 90 s, told to let a recrawl "in another process" end that had ended. The mark
    names the recrawl's process: one of this machine that is gone, or whose pid another
    process has taken since, holds up neither; a live one still does."""
    settings, store = finished_mongo_crawl(monkeypatch, mongo_client)
    made = [sys.executable, "-c", "from focused.storage import new_claim; print(new_claim())"]
    gone = subprocess.run(made, cwd=REPO, capture_output=True, text=True, check=True).stdout
    alive = storage.new_claim()
    token, kernel, pid, start = alive.split("/")
    reused = "/".join([token, kernel, pid, str(int(start) - 1)])  # this pid, another process
    for claim in (gone.strip(), reused):
        with monkeypatch.context() as patch:
            patch.setattr(storage, "new_claim", lambda claim=claim: claim)
            assert store.claim_recrawl("c1", None, 30.0)
        # As a run of the crawl and `scrapy crawls` see it: no recrawl under way.
        assert not recrawl_is_live(store.get_crawl("c1"), datetime.now(UTC))
        command = planned(settings)  # a recrawl goes on, and takes the mark over
        assert command.pages and command.claim != claim
        command._end_claim("c1")
    assert store.claim_recrawl("c1", None, 30.0)  # by this process, alive
    line = refused_plan(settings, capsys)
    assert line.startswith("error: crawl c1 is being recrawled in another process")


def test_a_recrawl_under_way_on_mongodb_refuses_another_and_a_run_of_the_crawl(
    monkeypatch,
    mongo_client,  # noqa: F811
    capsys,
):
    """On MongoDB no lock is taken, and a recrawl wrote no heartbeat: a second recrawl of the
    crawl, or the crawl resumed, while one ran fetched every page again beside it. The recrawl
    now marks the crawl's record (``recrawl_seen_at``, refreshed by its pipeline, cleared as
    it ends), and leaves the crawl's own status and heartbeat alone."""
    settings, store = finished_mongo_crawl(monkeypatch, mongo_client)
    before = store.get_crawl("c1")
    first = planned(settings)
    marked = store.get_crawl("c1")
    assert recrawl_is_live(marked, datetime.now(UTC))
    assert describe_status(marked) == "finished, recrawling"
    recrawl_fields = {"recrawl_seen_at", "recrawl_heartbeat_interval", "recrawl_claim"}
    assert {name: value for name, value in marked.items() if name not in recrawl_fields} == {
        name: value for name, value in before.items() if name not in recrawl_fields
    }
    line = refused_plan(settings, capsys)
    assert line.startswith("error: crawl c1 is being recrawled in another process (last seen ")
    assert "let that recrawl end, then recrawl it; if it was killed, it counts as stopped" in line
    config = CrawlConfig("q", "q", (), "bfs", {}, crawl_id="c1", order={})
    with pytest.raises(
        ConfigError,
        match=r"crawl c1 is being recrawled in another process .*: let that recrawl end, then run",
    ):
        check_store(Settings(settings), config)
    # Its pipeline's heartbeat keeps the mark fresh.
    crawler = get_crawler(RecrawlSpider, settings)
    crawler.spider = RecrawlSpider.from_crawler(
        crawler, "c1", pages=[], policy="uniform", claim=first.claim
    )
    pipeline = RefreshPipeline.from_crawler(crawler)
    asyncio.run(pipeline.open_spider())
    utc_now = storage._utc_now
    monkeypatch.setattr(storage, "_utc_now", lambda: "3000-01-01T00:00:00+00:00")
    asyncio.run(pipeline.beat())
    assert store.get_crawl("c1")["recrawl_seen_at"] == "3000-01-01T00:00:00+00:00"
    monkeypatch.setattr(storage, "_utc_now", utc_now)
    asyncio.run(pipeline.spider_closed("finished"))
    # Ended, it clears the mark: the crawl may be recrawled again.
    first._end_claim("c1")
    assert store.get_crawl("c1")["recrawl_seen_at"] is None
    assert planned(settings).pages


def test_a_run_of_the_crawl_started_while_the_recrawl_plans_is_seen(
    monkeypatch,
    mongo_client,  # noqa: F811
    capsys,
):
    """The crawl record was read once, before the plan: a run of the crawl (MongoDB, no lock)
    recorded as started while the pages were read was missed, and both fetched every page. The
    record is read again once the recrawl marked it; the mark is then taken back."""
    settings, store = finished_mongo_crawl(monkeypatch, mongo_client)

    def planned_as_the_crawl_starts(*args, **kwargs):
        store.start_crawl({**crawl_record(), "heartbeat_interval": 30.0})  # seen now
        return plan_recrawl(*args, **kwargs)

    monkeypatch.setattr(recrawl_command, "plan_recrawl", planned_as_the_crawl_starts)
    line = refused_plan(settings, capsys)
    assert line.startswith("error: crawl c1 is running in another process (last seen ")
    assert store.get_crawl("c1")["recrawl_seen_at"] is None


def crawl_recorded(tmp_path: Path, **fields) -> dict[str, str]:
    """Crawl c1, finished with one page, recorded with ``fields``: the recrawl's settings."""
    db = tmp_path / "focused.sqlite3"
    stored_crawl(db, ["http://127.0.0.1:9/a"], finished=True, **fields)
    return {"FOCUSED_DB": str(db)}


def recrawl_mark(settings: dict[str, str]) -> str | None:
    store = SqliteStore(settings["FOCUSED_DB"], create=False)
    try:
        return store.get_crawl("c1")["recrawl_seen_at"]
    finally:
        store.close()


class Interrupted:
    """A crawler process Ctrl-C stops as the recrawl's crawler is made (its model loaded...)."""

    def crawl(self, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt


@pytest.mark.parametrize("when", ["marked", "starting"])
def test_ctrl_c_before_the_recrawl_fetches_leaves_no_mark(tmp_path, monkeypatch, capsys, when):
    """Ctrl-C once the crawl's record was marked as being recrawled, as the record was read
    again or before the recrawl's crawl took Ctrl-C over (its crawler made, its model loaded),
    left the mark (the first, a KeyboardInterrupt traceback too): a recrawl run again was
    refused as one under way elsewhere until the mark lapsed (3 heartbeat intervals). Both end
    with status 130, as the reading commands, and take the mark back."""
    settings = crawl_recorded(tmp_path)
    get_crawl = SqliteStore.get_crawl

    def interrupted(store: SqliteStore, crawl_id: str) -> dict | None:
        crawl = get_crawl(store, crawl_id)
        if crawl is not None and crawl["recrawl_seen_at"] is not None:  # read again, marked
            raise KeyboardInterrupt
        return crawl

    capsys.readouterr()
    with pytest.raises(SystemExit) as ended, no_traceback_of_ctrl_c():
        if when == "marked":
            with monkeypatch.context() as patch:
                patch.setattr(SqliteStore, "get_crawl", interrupted)
                planned(settings)
        else:
            command = planned(settings)
            assert recrawl_mark(settings) is not None
            command.crawler_process = Interrupted()
            command.run(["c1"], argparse.Namespace(policy="uniform", render="never", full=False))
    assert ended.value.code == 130
    assert capsys.readouterr() == ("", "")
    assert recrawl_mark(settings) is None
    assert planned(settings).pages


def test_a_recrawl_with_stderr_closed_runs_and_takes_its_mark_back(tmp_path):
    """`scrapy recrawl c1 2>&-`: Scrapy's log handler for a stderr Python does not have failed
    as it was made (an AttributeError no one saw), after the crawl's record was marked as being
    recrawled: exit status 1, nothing fetched, and a recrawl run again refused until the mark
    lapsed. The recrawl now runs, its log lost, and ends as it would."""
    settings = crawl_recorded(tmp_path)
    command = scrapy_command("recrawl", "c1", "-s", f"FOCUSED_DB={settings['FOCUSED_DB']}")
    assert run_with_stderr_closed(command).returncode == 0
    assert recrawl_mark(settings) is None
    store = SqliteStore(settings["FOCUSED_DB"], create=False)
    try:
        [page] = store.pages("c1", fields=["url", "tried_at"])
    finally:
        store.close()
    assert page["tried_at"] is not None  # fetched again (its server, port 9, refuses)


def test_the_recrawl_s_own_settings_and_render_mode_win_over_the_crawl_s(tmp_path):
    recorded = {"USER_AGENT": "birdwatch/2.0", "DOWNLOAD_DELAY": "2"}
    settings = crawl_recorded(tmp_path, fetch_settings=recorded, render="always")
    command = planned({**settings, "USER_AGENT": "mine/1.0"}, "--render", "never")
    assert command.restored == {"DOWNLOAD_DELAY": "2"}
    assert (command.settings["USER_AGENT"], command.settings.getfloat("DOWNLOAD_DELAY")) == (
        "mine/1.0",
        2.0,
    )


def test_a_crawl_recorded_with_a_bad_setting_or_rendered_without_a_browser_is_one_line(
    tmp_path, capsys
):
    """What the crawl record says is checked as the command line is, before the crawl is marked
    as being recrawled: a record edited by hand, or a browser gone since the crawl."""
    settings = crawl_recorded(tmp_path, fetch_settings={"DOWNLOAD_DELAY": "soon"})
    line = refused_plan(settings, capsys)
    assert line.startswith("error: the settings crawl c1 recorded: setting DOWNLOAD_DELAY=")

    settings = crawl_recorded(tmp_path, render="sometimes")
    assert refused_plan(settings, capsys).startswith("error: the settings crawl c1 recorded: ")

    settings = crawl_recorded(tmp_path, render="always")
    line = refused_plan({**settings, "FOCUSED_CHROMIUM": str(tmp_path / "chromium")}, capsys)
    assert line.startswith(f"error: Chromium not found at {tmp_path / 'chromium'}; ")
    assert line.endswith(
        " (crawl c1 rendered its pages: --render never fetches them without a browser)"
    )
    store = SqliteStore(tmp_path / "focused.sqlite3", create=False)
    try:
        assert store.get_crawl("c1")["recrawl_seen_at"] is None
    finally:
        store.close()


def test_what_a_recrawl_cannot_take_is_left_out_when_the_project_s_settings_give_it(tmp_path):
    """A deployment naming its shared frontier (or an HTTP cache) in its settings module could
    not recrawl its crawls: each was refused, as if given with -s, where -s is refused."""
    project = {"FOCUSED_FRONTIER": "redis://127.0.0.1:9/0", "HTTPCACHE_ENABLED": "True"}
    command = planned(crawl_recorded(tmp_path), project=project)
    assert command.unused == ["FOCUSED_FRONTIER", "HTTPCACHE_ENABLED"]
    assert command.settings["FOCUSED_FRONTIER"] is None
    assert not command.settings.getbool("HTTPCACHE_ENABLED")


def test_a_recrawl_s_page_budget_is_its_budget_option(tmp_path, capsys):
    """-s CLOSESPIDER_PAGECOUNT=5 was ignored: the recrawl fetched every page. Its budget is
    --budget N (exactly N pages; Scrapy's count would take robots.txt and the requests under
    way beyond it); one given in the project's settings module is a crawl's, left out."""
    settings = crawl_recorded(tmp_path)
    line = refused_plan({**settings, "CLOSESPIDER_PAGECOUNT": "5"}, capsys)
    assert line == "error: recrawl takes no CLOSESPIDER_PAGECOUNT: its page budget is --budget N"
    assert planned({**settings, "CLOSESPIDER_PAGECOUNT": "0"}).unused == []  # off: no budget
    # Each plan below marks its own crawl as being recrawled.
    settings = crawl_recorded(tmp_path / "project")
    command = planned(settings, project={"CLOSESPIDER_PAGECOUNT": 1000})
    assert command.unused == ["CLOSESPIDER_PAGECOUNT"]
    assert command.settings.getint("CLOSESPIDER_PAGECOUNT") == 0


def test_a_missing_store_is_one_line_on_the_command_line(tmp_path):
    result = recrawl(tmp_path / "none.sqlite3", "c1")
    one_line_error(result, 1, f"SQLite store at {tmp_path / 'none.sqlite3'}: no such file")
    assert not (tmp_path / "none.sqlite3").exists()


def test_a_run_of_the_crawl_claimed_as_it_starts_closes_before_fetching(tmp_path, caplog):
    """A recrawl that claims the crawl after the crawl's checks (``check_store``) was not seen:
    the crawl's start wrote over the mark and both fetched every page. The storage pipeline's
    start is now refused: one error line, as the check's, the spider closed before it fetched
    anything (``recrawl_under_way``; exit status 2, tests/test_stopping.py), and the record
    left to the recrawl."""
    db = tmp_path / "focused.sqlite3"
    store = SqliteStore(db)
    store.start_crawl(crawl_record("pipe"))
    store.finish_crawl("pipe", status="finished", finish_reason="finished")
    store.claim_recrawl("pipe", None, 30.0)
    marked = store.get_crawl("pipe")
    crawler = pipeline_crawler(FOCUSED_DB=str(db))
    pipeline = StoragePipeline.from_crawler(crawler)
    reason, [line] = refused_start(pipeline, caplog)
    assert reason == RECRAWL_UNDER_WAY
    assert line.startswith("crawl pipe is being recrawled in another process (last seen ")
    assert ": let that recrawl end, then run the crawl; if it was killed, " in line
    assert store.get_crawl("pipe") == marked
    store.close()


def beating(store, claim: str) -> tuple[Crawler, RefreshPipeline]:
    """The pipeline of recrawl ``claim`` of crawl c1 on ``store``, whose heartbeat a test
    calls (``beat``), and its crawler, whose engine records the spider's closes."""
    crawler = get_crawler(RecrawlSpider)
    crawler.spider = RecrawlSpider.from_crawler(
        crawler, "c1", pages=[], policy="uniform", claim=claim
    )
    crawler.engine = FakeEngine()
    pipeline = RefreshPipeline.from_crawler(crawler)
    pipeline.store, pipeline.crawl_id, pipeline.claim = store, "c1", claim
    return crawler, pipeline


def test_a_recrawl_whose_mark_was_taken_over_stops_with_one_warning(
    store,
    monkeypatch,
    caplog,
):
    """A recrawl that stalled past its mark's staleness, the crawl since claimed by another,
    wrote its heartbeat over the other's mark and went on fetching beside it. Its heartbeat now
    finds the mark another's: it leaves it, says so once and stops."""
    first = stale_claim(store, monkeypatch)
    second = store.claim_recrawl("c1", store.get_crawl("c1")["recrawl_seen_at"], 30.0)
    marked = store.get_crawl("c1")
    crawler, pipeline = beating(store, first)
    with caplog.at_level(logging.INFO, logger="focused.refresh"):
        asyncio.run(pipeline.beat())
        asyncio.run(pipeline.beat())
    assert crawler.engine.close_reasons == [RECRAWL_TAKEN_OVER]
    [line] = [record.getMessage() for record in caplog.records]
    assert line == (
        "Crawl c1: this recrawl's mark went stale (no heartbeat for 3 intervals) and another"
        " recrawl took the crawl over: this one stops, and leaves the mark to it"
    )
    assert store.get_crawl("c1") == marked
    assert marked["recrawl_claim"] == second


def test_a_recrawl_that_wakes_beside_a_run_of_the_crawl_stops(store, monkeypatch, caplog):
    """A run of the crawl started over the stale mark of a stalled recrawl (and kept it): the
    recrawl woke, its heartbeat still its own, and fetched every page beside the crawl. It now
    sees the crawl running at its next beat, and stops."""
    claim = stale_claim(store, monkeypatch)
    store.start_crawl({**crawl_record(), "heartbeat_interval": 30.0})
    crawler, pipeline = beating(store, claim)
    with caplog.at_level(logging.INFO, logger="focused.refresh"):
        asyncio.run(pipeline.beat())
    assert crawler.engine.close_reasons == [RECRAWL_TAKEN_OVER]
    [line] = [record.getMessage() for record in caplog.records]
    assert line.endswith("and a run of the crawl started: this recrawl stops")
    assert store.end_recrawl("c1", claim)  # its own mark, cleared as it ends


def test_a_forced_stop_of_a_recrawl_keeps_its_updates_waiting_for_the_store(tmp_path, monkeypatch):
    """A second Ctrl-C while the store refused the updates: the crawl's pipeline keeps its
    pages in the file of unstored records, the recrawl's lost them without a word (no trigger
    of its own; the crawl's would have recorded the crawl interrupted)."""
    settings = {**crawl_recorded(tmp_path), "STORAGE_RETRIES": 3, "STORAGE_RETRY_DELAY": 600}
    crawler = get_crawler(RecrawlSpider, {**settings, "FOCUSED_UNSTORED_DIR": str(tmp_path)})
    crawler.spider = RecrawlSpider.from_crawler(crawler, "c1", pages=[], policy="uniform")

    def locked(*args, **kwargs) -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(SqliteStore, "_update_pages", locked)
    update = {"crawl_id": "c1", "url": "http://127.0.0.1:9/a", "fetched_at": "2030-01-01"}

    async def stop_while_retrying() -> None:
        pipeline = RefreshPipeline.from_crawler(crawler)
        await pipeline.open_spider()
        waiting = asyncio.ensure_future(pipeline.process_item(dict(update)))
        while not pipeline._buffer:
            await asyncio.sleep(0.01)
        pipeline.forced_stop()
        pipeline.keep_unstored()  # the reactor stopped
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)

    asyncio.run(stop_while_retrying())
    [path] = sorted(tmp_path.glob("unstored-*.jsonl"))
    [line] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert (line["kind"], line["record"]["url"]) == ("update", update["url"])
    store = SqliteStore(settings["FOCUSED_DB"], create=False)
    try:
        assert store.get_crawl("c1")["status"] == "finished"  # a recrawl records no outcome
    finally:
        store.close()


def test_a_recrawl_tries_to_make_the_fetch_order_index_once(tmp_path, caplog):
    """A recrawl opens the store as a writer three times: its plan, its pipeline
    (``RefreshPipeline``), the end of its claim. Each tried to make the fetch-order index of a
    large store written before it, for half of FOCUSED_DB_TIMEOUT, and said it could not: the
    recrawl waited the timeout and a half, and warned three times. Its pipeline makes it, as a
    crawl's does."""
    db = tmp_path / "focused.sqlite3"
    stored_crawl(db, [f"http://127.0.0.1:9/{n}" for n in range(2000)], finished=True)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP INDEX pages_crawl_fetch_order")
    settings = {"FOCUSED_DB": str(db), "FOCUSED_DB_TIMEOUT": 1e-6}
    with caplog.at_level(logging.WARNING, logger="focused.sqlitestore"):
        command = planned(settings)
        storage.open_store(command.settings).close()  # the pipeline's
        command._end_claim("c1")
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 1, said
    assert "its index of the pages' fetch order" in said[0]
