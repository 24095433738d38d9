"""``allowed_domains``: Scrapy's offsite filter where the crawl must stay within domains, and
only there."""

from __future__ import annotations

import re

import pytest
from scrapy.crawler import Crawler
from scrapy.settings import Settings

import focused.settings
from focused.arguments import parse_arguments
from spiders.topical import OFFSITE_MIDDLEWARE, TopicalSpider
from tests.conftest import crawl_env, run_crawl
from tests.sites import FetchLog, Reply, Site, html


def two_sites(log: FetchLog):
    """A seed site on 127.0.0.2 linking to a page of its own and to one on 127.0.0.3."""
    other = Site(
        lambda method, path: Reply(200, html("birds", "<p>birds nest</p>")), "127.0.0.3", log
    )

    def seed(method: str, path: str) -> Reply:
        links = f'<a href="/nest">birds nest</a> <a href="{other.url}/feathers">bird feathers</a>'
        return Reply(200, html("birds", f"<p>birds nest feathers</p>{links}"))

    return Site(seed, "127.0.0.2", log), other


@pytest.mark.parametrize(
    ("given", "recorded"),
    [
        ({}, []),
        ({"allowed_domains": "Müller.example, a.test"}, ["xn--mller-kva.example", "a.test"]),
    ],
)
def test_the_crawl_record_keeps_allowed_domains_for_the_recrawl(given, recorded):
    """The crawl record did not keep them, and a recrawl followed a page's redirect anywhere
    (focused.refresh reads them back); as requests name their hosts."""
    settings = Settings()
    settings.setmodule(focused.settings, priority="project")
    crawler = Crawler(TopicalSpider, settings)
    seeds = "http://xn--mller-kva.example/" if given else "http://a.test/"
    arguments = {"crawl_id": "c", "query": "birds", "seeds": seeds, "strategy": "bfs", **given}
    spider = TopicalSpider.from_crawler(crawler, **arguments)
    assert spider.crawl_record()["allowed_domains"] == recorded


def test_scrapy_s_filter_is_left_out_beside_downloader_middlewares_given_with_s():
    """Given -s DOWNLOADER_MIDDLEWARES (a middleware of the user's), a crawl without
    allowed_domains kept Scrapy's offsite filter: the spider's change was set below the
    command line's priority, and lost."""
    settings = Settings()
    settings.setmodule(focused.settings, priority="project")
    stats = "scrapy.downloadermiddlewares.stats.DownloaderStats"
    settings.set("DOWNLOADER_MIDDLEWARES", f'{{"{stats}": 851}}', "cmdline")
    crawler = Crawler(TopicalSpider, settings)
    arguments = {"crawl_id": "c", "query": "birds", "seeds": "http://a.test/", "strategy": "bfs"}
    TopicalSpider.from_crawler(crawler, **arguments)
    chain = crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES")
    assert chain[OFFSITE_MIDDLEWARE] is None and chain[stats] == 851


@pytest.mark.parametrize(
    "seed", ["http://www.example.org./", "http://ex%41mple.org/", "http://EXAMPLE.org:8080/"]
)
def test_a_seed_is_within_allowed_domains_by_the_host_it_is_fetched_from(seed):
    """A seed is fetched as its canonical URL (its host's closing dot dropped, its escapes
    decoded: focused.canonical), and the offsite filter sees that host. The check read the seed
    as given: example.org. and (with w3lib 2.5) ex%41mple.org were refused as outside
    allowed_domains=example.org, though the crawl would fetch example.org."""
    arguments = {"query": "birds", "seeds": seed, "strategy": "bfs"}
    config = parse_arguments({**arguments, "allowed_domains": "example.org"})
    assert config.allowed_domains == ("example.org",)


def enabled_downloader_middlewares(log: str) -> str:
    return re.search(r"Enabled downloader middlewares:\n(\[.*?\])", log, re.S).group(1)


@pytest.mark.parametrize("allowed", [None, "127.0.0.2"])
def test_links_leave_the_seed_site_unless_allowed_domains_keeps_them(tmp_path, allowed):
    """Without allowed_domains, Scrapy's offsite filter ran anyway, parsing every queued link's
    URL for nothing."""
    log = FetchLog()
    seed, other = two_sites(log)
    arguments = {"strategy": "bfs", "query": "birds nest", "seeds": f"{seed.url}/"}
    if allowed:
        arguments["allowed_domains"] = allowed
    with seed, other:
        crawl = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 10})
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    fetched = {(host, path) for host, path in log.gets()}
    assert ("127.0.0.2", "/nest") in fetched
    offsite = "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware"
    middlewares = enabled_downloader_middlewares(crawl.result.stderr)
    if allowed:
        assert ("127.0.0.3", "/feathers") not in fetched
        assert offsite in middlewares
        assert "'offsite/filtered': " in crawl.result.stderr  # found once a page
    else:
        assert ("127.0.0.3", "/feathers") in fetched
        assert offsite not in middlewares


def test_an_internationalized_domain_keeps_its_crawl_within_it(tmp_path):
    """Scrapy's offsite filter compares a request's host in its ASCII form (müller.example is
    xn--mller-kva.example): given as written, allowed_domains dropped every request, the seed
    first, and the crawl ended "finished" with nothing fetched. The site is reached through a
    proxy on loopback (the name resolves nowhere), which sees the URLs requested."""
    log = FetchLog()

    def proxy(method: str, url: str) -> Reply:
        links = '<a href="/nest">birds nest</a> <a href="http://other.example/">birds</a>'
        return Reply(200, html("birds", f"<p>birds nest feathers</p>{links}"))

    with Site(proxy, log=log) as site:
        env = {**crawl_env(), "http_proxy": site.url, "no_proxy": ""}
        crawl = run_crawl(
            tmp_path,
            {
                "strategy": "bfs",
                "query": "birds nest",
                "seeds": "http://müller.example/",
                "allowed_domains": "Müller.example",
            },
            {"CLOSESPIDER_PAGECOUNT": 5},
            env=env,
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert {page["url"] for page in crawl.pages()} == {
        "http://xn--mller-kva.example/",
        "http://xn--mller-kva.example/nest",
    }
    assert [url for _, url in log.gets() if not url.endswith("/robots.txt")] == [
        "http://xn--mller-kva.example/",
        "http://xn--mller-kva.example/nest",
    ]  # not other.example
