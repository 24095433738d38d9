"""robots.txt is checked for every request that waited for it (focused.robots)."""

from __future__ import annotations

from tests.conftest import run_crawl
from tests.sites import Reply, Site, html
from tests.test_canonical import stat

ROBOTS = "User-agent: *\nDisallow: /private/\n"


def site_with_private_pages(method: str, path: str) -> Reply:
    if path == "/robots.txt":
        return Reply(200, ROBOTS, "text/plain")
    return Reply(200, html(path, "<p>birds feathers nests</p>"))


def test_every_seed_waiting_for_robots_txt_is_checked(tmp_path):
    # Twelve seeds on one host all wait for its robots.txt at once; Scrapy 2.19's own
    # middleware checks only the first of them.
    private = [f"/private/{n}" for n in range(8)]
    public = [f"/public/{n}" for n in range(4)]
    with Site(site_with_private_pages, delay=0.2) as site:
        seeds = ",".join(site.url + path for path in private + public)
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": seeds},
            {"CONCURRENT_REQUESTS": 16},
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    fetched = sorted(path for _, path in site.log.gets())
    assert fetched == sorted(public)
    assert stat(crawl.result.stderr, "robotstxt/forbidden") == len(private)
