"""A page's own robots directives: <meta name="robots"> and X-Robots-Tag (focused.robotsmeta)."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Headers, HtmlResponse
from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector

import focused.settings
from focused.errors import ConfigError
from focused.items import PageItem
from focused.robotsmeta import directives, honoured, page_robots, robots_token, stored_robots
from focused.settingchecks import check_settings
from spiders.topical import TopicalSpider
from tests.conftest import Crawl, run_crawl
from tests.sites import Reply, Site, html
from tests.test_canonical import stat
from tests.test_redis_frontier import REDIS_SERVER, RedisServer
from tests.test_refresh import recrawl

URL = "http://127.0.0.1/page"


def response(head: str = "", body: str = "", headers=None, rendered: bool = False) -> HtmlResponse:
    html = f"<html><head><title>t</title>{head}</head><body><p>words</p>{body}</body></html>"
    request = Request(URL, meta={"playwright": True} if rendered else {})
    return HtmlResponse(
        URL, body=html, encoding="utf-8", headers=Headers(headers or {}), request=request
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("noindex", ("noindex",)),
        ("NoFollow", ("nofollow",)),
        ("  NOINDEX ,  nofollow  ", ("noindex", "nofollow")),
        ("none", ("noindex", "nofollow")),
        ("all", ()),
        ("all, noindex", ("noindex",)),  # the most restrictive wins
        ("index, follow", ()),
        ("noarchive, nosnippet, max-snippet:-1, whatever", ()),
        ("unavailable_after: 25 Jun 2010 15:00:00 PST", ()),
        ("unavailable_after: Friday, 25-Jun-10 15:00:00 PST, nofollow", ("nofollow",)),
        ("focused: noindex", ("noindex",)),
        ("FOCUSED : NoFollow", ("nofollow",)),
        ("otherbot: noindex, nofollow", ()),  # the prefix holds for what follows
        ("otherbot: noindex, focused: nofollow", ("nofollow",)),
        ("", ()),
    ],
)
def test_directives_of_one_value(value, expected):
    assert honoured(directives(value, "focused")) == expected


def test_the_robots_token_is_the_product_token_robots_txt_matches():
    assert robots_token(Settings({"USER_AGENT": "focused/0.1 (+topical crawler; Scrapy)"})) == (
        "focused"
    )
    given = Settings({"USER_AGENT": "Mozilla/5.0", "ROBOTSTXT_USER_AGENT": "MyBot"})
    assert robots_token(given) == "mybot"


def test_metas_by_name_in_head_and_body_combined():
    page = response(
        head='<meta name="ROBOTS" content="NoIndex">',
        body='<meta name="Focused" content="nofollow"><meta name="otherbot" content="none">',
    )
    assert page_robots(page, "focused") == ("noindex", "nofollow")
    assert page_robots(response(head='<meta name="otherbot" content="none">'), "focused") == ()
    assert page_robots(response(head='<meta name="description" content="none">'), "x") == ()


def test_every_x_robots_tag_header_and_its_prefix():
    headers = [("X-Robots-Tag", "otherbot: noindex"), ("x-robots-tag", "unavailable_after: 1")]
    page = response(headers=headers)
    assert page_robots(page, "focused") == ()
    # A prefix holds within its header only; every header counts.
    page = response(headers=[("X-Robots-Tag", "otherbot: noindex"), ("X-Robots-Tag", "NOFOLLOW")])
    assert page_robots(page, "focused") == ("nofollow",)
    page = response(headers=[("X-Robots-Tag", "nofollow"), ("X-Robots-Tag", "focused: noindex")])
    assert page_robots(page, "focused") == ("noindex", "nofollow")
    page = response(headers=[("X-Robots-Tag", "focused: none")])
    assert page_robots(page, "focused") == ("noindex", "nofollow")
    assert page_robots(page, "otherbot") == ()


def test_template_never_counts_and_noscript_only_unrendered():
    template = '<template><meta name="robots" content="noindex"></template>'
    assert page_robots(response(body=template), "focused") == ()
    noscript = '<noscript><meta name="robots" content="nofollow"></noscript>'
    assert page_robots(response(body=noscript), "focused") == ("nofollow",)
    assert page_robots(response(body=noscript, rendered=True), "focused") == ()


def test_stored_value():
    assert stored_robots(("noindex", "nofollow")) == "noindex,nofollow"
    assert stored_robots(()) is None


# -- a crawl and a recrawl of a loopback site ------------------------------------------------

TOPIC = (
    "<p>Seabirds such as the albatross glide for hours over the southern ocean and come ashore"
    " only to nest on remote windswept islands where each pair raises one chick a season."
    " Petrels shearwaters gannets boobies puffins terns skuas and frigatebirds feed at sea,"
    " diving plunging skimming or stealing fish squid krill from other seabirds in flight.</p>"
)  # enough words for a SimHash (focused.simhash.MIN_SHINGLES)


class RobotsSite:
    """A page for each form of directive; each page's child says whether its links were
    followed. /ni asks not to be indexed, names /plain as its canonical and has the text of
    /copy."""

    def __init__(self) -> None:
        paths = ("/nf", "/ni", "/hdr", "/none", "/other", "/copy", "/plain")
        self.pages = {"/": (" ".join(f'<a href="{p}">{p}</a>' for p in paths), "", {})}
        self.pages |= {
            "/nf": ("", '<meta name="ROBOTS" content="NoFollow">', {}),
            "/ni": (TOPIC, '<meta name="Focused" content="noindex">'
                    '<link rel="canonical" href="/plain">', {}),
            "/hdr": ("", "", {"X-Robots-Tag": ["otherbot: noindex", "focused: nofollow"]}),
            "/none": ("", "", {"X-Robots-Tag": ["NONE"]}),
            "/other": ("", '<meta name="otherbot" content="none">', {}),
            "/copy": (TOPIC, "", {}),
            "/plain": ("<p>plain page about seabirds</p>", "", {}),
        }  # fmt: skip

    def respond(self, method: str, path: str) -> Reply:
        if path not in self.pages:
            return Reply(404, "not found", "text/plain")
        body, head, headers = self.pages[path]
        child = f'<a href="{path}-child">child</a>' if path != "/" else ""
        text = body or f"<p>seabirds {path}</p>"  # /ni's and /copy's: the same words
        return Reply(body=html(path, f"{text}{child}", head), headers=headers)


def crawl_robots_site(tmp_path, site: Site, settings: dict | None = None) -> Crawl:
    """Crawl the site; check what each form of directive did; the stored pages by path."""
    crawl = run_crawl(
        tmp_path,
        {"strategy": "bfs", "query": "seabirds albatross", "seeds": f"{site.url}/"},
        {"CONCURRENT_REQUESTS": 1, **(settings or {})},
    )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    fetched = {path for _, path in site.log.gets()}
    stored = {p["url"].removeprefix(site.url): p for p in crawl.pages()}
    # Links not followed: those of the nofollow pages, not of the others.
    assert not {"/nf-child", "/hdr-child", "/none-child"} & fetched, fetched
    assert {"/ni-child", "/other-child", "/copy-child", "/plain-child"} <= fetched, fetched
    assert stat(crawl.result.stderr, "focused/skipped/nofollow") == 3
    robots = {path: page["robots"] for path, page in stored.items() if page["robots"]}
    assert robots == {
        "/nf": "nofollow",
        "/ni": "noindex",
        "/hdr": "nofollow",
        "/none": "noindex,nofollow",
    }
    for path in ("/ni", "/none"):  # fetched and scored, stored without text
        assert stored[path]["text"] is None and stored[path]["relevance"] is not None
    assert "seabirds" in stored["/nf"]["text"] and "seabirds" in stored["/hdr"]["text"]
    # /ni stands for neither the page it names as canonical nor the one it copies.
    assert stored["/ni"]["duplicate_of"] is None
    for path in ("/plain", "/copy"):
        assert stored[path]["duplicate_of"] is None and stored[path]["text"], path
    return crawl


def test_a_crawl_honours_each_form_and_a_recrawl_follows_the_change(tmp_path):
    content = RobotsSite()
    with Site(content.respond) as site:
        crawl = crawl_robots_site(tmp_path, site)
        # Recrawl: /plain now says noindex in a header, /ni no longer does.
        content.pages["/plain"] = (*content.pages["/plain"][:2], {"X-Robots-Tag": "noindex"})
        content.pages["/ni"] = (TOPIC, "", {})
        result = recrawl(crawl.db, "test")
        assert result.returncode == 0, result.stderr[-3000:]
    after = {p["url"].removeprefix(site.url): p for p in crawl.pages()}
    assert (after["/plain"]["text"], after["/plain"]["robots"]) == (None, "noindex")
    assert after["/plain"]["changes"] == 1
    assert "albatross" in after["/ni"]["text"] and after["/ni"]["robots"] is None
    assert after["/ni"]["changes"] == 1
    assert after["/nf"]["robots"] == "nofollow" and after["/nf"]["changes"] == 0


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
def test_a_crawl_shared_through_redis_honours_them_alike(tmp_path):
    """The canonical URLs and SimHashes are the crawl's, in Redis (focused.dedup)."""
    server = RedisServer(tmp_path).start()
    try:
        with Site(RobotsSite().respond) as site:
            crawl_robots_site(tmp_path, site, {"FOCUSED_FRONTIER": server.url})
    finally:
        server.stop()


def test_the_setting_is_checked_as_a_boolean():
    settings = Settings()
    settings.setmodule("focused.settings", priority="project")
    settings.set("ROBOTS_META_OBEY", "perhaps", priority="cmdline")
    with pytest.raises(ConfigError, match=r"^setting ROBOTS_META_OBEY='perhaps' is not true or"):
        check_settings(settings)


def test_a_rendered_page_is_judged_by_the_dom_its_scripts_built(tmp_path):
    """The script adds nofollow; the <noscript>'s noindex is no part of a rendered page."""
    script = (
        "<script>document.head.insertAdjacentHTML("
        "'beforeend', '<meta name=\"robots\" content=\"nofollow\">')</script>"
    )
    pages = {
        "/": html("seabirds", f'<p>seabirds</p><a href="/child">child</a>{script}',
                  '<noscript><meta name="robots" content="noindex"></noscript>'),
        "/child": html("child", "<p>seabirds child</p>"),
    }  # fmt: skip

    def respond(method: str, path: str) -> Reply:
        return Reply(body=pages[path]) if path in pages else Reply(404, "", "text/plain")

    with Site(respond) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "seabirds", "seeds": f"{site.url}/", "render": "always"},
        )
        fetched = {path for _, path in site.log.gets()}
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert "/child" not in fetched, fetched
    [page] = crawl.pages()
    assert (page["robots"], page["text"]) == ("nofollow", "seabirds\nchild")


def topical_spider(**settings_given) -> TopicalSpider:
    settings = Settings()
    settings.setmodule(focused.settings, priority="project")
    settings.setdict(settings_given, priority="cmdline")
    crawler = Crawler(TopicalSpider, settings)
    crawler.stats = MemoryStatsCollector(crawler)
    return TopicalSpider.from_crawler(
        crawler, crawl_id="c", query="seabirds", seeds=f"{URL}/", strategy="bfs"
    )


@pytest.mark.parametrize("obey", [True, False])
def test_the_spider_obeys_them_unless_told_not_to(obey):
    spider = topical_spider(ROBOTS_META_OBEY=obey)
    head = '<meta name="robots" content="none"><link rel="canonical" href="/canonical">'
    outputs = list(spider.parse(response(head=head, body='<a href="/a">a</a>')))
    [item] = [output for output in outputs if isinstance(output, PageItem)]
    links = [output.url for output in outputs if isinstance(output, Request)]
    skipped = spider.crawler.stats.get_value("focused/skipped/nofollow")
    if obey:
        # Stored under the URL it was fetched at; its text goes as far as the storage pipeline.
        assert (item["url"], item["robots"], item["text"]) == (URL, "noindex,nofollow", "words\na")
        assert (links, skipped) == ([], 1)
    else:  # as before the setting
        assert (item["url"], item["robots"]) == ("http://127.0.0.1/canonical", None)
        assert (links, skipped) == (["http://127.0.0.1/a"], None)
