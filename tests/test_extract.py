"""Extraction of title, visible text, and links with anchor text and context."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse

from focused.extract import BAD_URL, Link, _link_url, extract_page, is_followable
from focused.replayweb import render_article
from focused.text import tokenize
from spiders.topical import _link_request
from tests.conftest import run_crawl
from tests.sites import Reply, Site, html
from tests.test_canonical import stat

# Four sample articles as extracted by focused.extract before it was rewritten for speed
# (main at 069c639, one re.sub per text node), with the default context of 200 characters.
RECORDED = Path(__file__).parent / "data" / "extract_expected.json"

HTML = b"""<html><head><title> Albatross </title><style>.x{color:red}</style>
<script>var menu = "script text";</script></head>
<body>
<nav>Main page <a href="/wiki/Main_Page">Home</a></nav>
<h1>Albatross</h1>
<p>Albatrosses are large <a href="/wiki/Seabird#Flight">seabirds</a> related to the
<a href="petrel">petrels</a>. They nest on remote islands.</p>
<p>Photo: <a href="/img/albatross.jpg">picture</a>, <a href="mailto:x@y.z">mail</a>,
<a href="javascript:void(0)">js</a>, <a href="/wiki/Seabird">seabirds again</a>.</p>
<noscript>Enable JavaScript</noscript>
<footer>Copyright notice</footer>
</body></html>"""


def page(context_chars: int = 30):
    response = HtmlResponse("http://127.0.0.1/wiki/Albatross", body=HTML, encoding="utf-8")
    return extract_page(response, context_chars)


def test_title_and_visible_text_without_boilerplate():
    extracted = page()
    assert extracted.title == "Albatross"
    assert "Albatrosses are large seabirds related to the petrels." in extracted.text
    for hidden in ("script text", "color:red", "Main page", "Copyright", "Enable JavaScript"):
        assert hidden not in extracted.text


def words_and_links(body: str) -> tuple[list[str], list[tuple[str, str, str]]]:
    """The words of the page's text, and its links as (url, anchor, context)."""
    response = HtmlResponse("http://127.0.0.1/wiki/Albatross", body=body, encoding="utf-8")
    extracted = extract_page(response, context_chars=30)
    links = [(link.url, link.anchor, link.context) for link in extracted.links]
    return extracted.text.split(), links


def test_landmarks_named_by_their_aria_role_are_boilerplate_as_their_elements_are():
    """Wikipedia's navboxes are ``<div role="navigation">``, as are many sites' menus, headers
    and footers (``role="banner"``, ``"contentinfo"``): their text, hundreds of article names
    under every article, was page text where a ``<nav>``'s was not."""
    body = (
        "<html><body><div role=banner>Site banner</div><h1>Albatross</h1><p>Seabirds.</p>"
        '<div role="navigation" class="navbox">Procellariiformes <a href="/wiki/Petrel">Petrel'
        "</a></div><table role=Navigation><tr><td>Gannets</td></tr></table>"
        "<div role='complementary'>Sidebar</div><div role='contentinfo'>Copyright</div>"
        '<div role=region>Kept</div><div role=" ">too</div></body></html>'
    )
    # Its links are followed, as a <nav>'s are: with their anchor, without context.
    assert words_and_links(body) == (
        ["Albatross", "Seabirds.", "Kept", "too"],
        [("http://127.0.0.1/wiki/Petrel", "Petrel", "")],
    )


def test_an_element_with_the_hidden_attribute_is_not_text_unless_found_by_a_search():
    """A browser shows nothing of an element with ``hidden`` (a closed dialog, a menu a script
    opens), so it is no visible text; ``hidden="until-found"`` (MediaWiki's collapsed mobile
    sections) is text a reader's search shows."""
    body = (
        "<html><body><p>Seen</p><div hidden>Closed dialog <a href='/wiki/Gull'>Gull</a></div>"
        "<div HIDDEN=hidden>Menu</div><div hidden='until-found'>Collapsed section</div>"
        "</body></html>"
    )
    assert words_and_links(body) == (
        ["Seen", "Collapsed", "section"],
        [("http://127.0.0.1/wiki/Gull", "Gull", "")],
    )


def test_an_element_an_inline_style_hides_is_not_text():
    """``display: none`` in an element's own style (Wikipedia's table sort keys and hidden
    microformats) is no more shown than ``hidden``; the declaration that applies counts."""
    body = (
        "<html><body><p>Seen</p><span style='display:none'>!0000042</span>"
        "<div style='color: red; DISPLAY : None !important'>Closed <a href='/wiki/Gull'>Gull</a>"
        "</div><p style='display:none; display:block'>Shown again</p>"
        "<p style='display:none !important; display:block'>Not shown</p>"
        "<p style='display:inline-block'>Inline</p>"
        "<p style='background:url(display:none)'>Background</p></body></html>"
    )
    assert words_and_links(body) == (
        ["Seen", "Shown", "again", "Inline", "Background"],
        [("http://127.0.0.1/wiki/Gull", "Gull", "")],
    )


def test_the_title_is_the_pages_first_title_not_an_svg_icons():
    """Inline SVG icons carry a <title> of their own (their tooltip), and a hostile page can
    have thousands of <title>s: each was added to the page's title."""
    body = (
        "<html><head><title> Albatross </title></head><body>"
        "<svg><title>Search</title></svg><p>Seabirds</p>" + "<title>spam</title>" * 1000
    ) + "</body></html>"
    response = HtmlResponse("http://127.0.0.1/wiki/Albatross", body=body, encoding="utf-8")
    assert extract_page(response).title == "Albatross"
    icon_first = b"<html><body><svg><title>Menu</title></svg><title>Gull</title></body></html>"
    response = HtmlResponse("http://127.0.0.1/wiki/Gull", body=icon_first, encoding="utf-8")
    assert extract_page(response).title == "Gull"


def test_comments_and_processing_instructions_are_not_text():
    body = (
        b"<html><body><p>Before<!-- an editor's note --> after "
        b'<a href="/wiki/Tern">terns<!-- hidden -->.</a><?php echo 1; ?> end</p></body></html>'
    )
    response = HtmlResponse("http://127.0.0.1/wiki/Gull", body=body, encoding="utf-8")
    extracted = extract_page(response, context_chars=30)
    assert extracted.text == "Before after terns. end"
    assert [(link.anchor, link.context) for link in extracted.links] == [
        ("terns.", "Before after terns. end")
    ]


def test_text_laid_out_in_blocks_is_not_run_together():
    """A minified page has no whitespace between its tags: the text of elements a browser lays
    out as blocks (and of what boilerplate stands between) was run into one word with the
    text beside it ("QuestionAnswer", "textMore")."""
    body = (
        "<html><body><div>Albatross<hr>Petrel</div><details><summary>Where do they nest"
        "</summary>On islands</details><div>Intro text<aside>Related</aside>More text</div>"
        "<address>Wellington</address><dl><dt>Wingspan</dt><dd>3 m</dd></dl></body></html>"
    )
    response = HtmlResponse("http://127.0.0.1/wiki/Albatross", body=body, encoding="utf-8")
    assert extract_page(response).text.split("\n") == [
        "Albatross", "Petrel", "Where do they nest", "On islands", "Intro text", "More text",
        "Wellington", "Wingspan", "3 m",
    ]  # fmt: skip


def test_soft_hyphens_do_not_cut_words():
    """A soft hyphen (&shy;) shows only where a browser breaks the word at it: kept, it cut
    German compounds into words that no query of the whole word matched."""
    body = (
        "<html><head><title>Donau&shy;dampf&shy;schiff</title></head><body>"
        "<p>Die Donau&shy;dampf&shy;schiff&shy;fahrt <a href='/wiki/BRD'>Bundes&shy;republik</a>"
        "<span>&shy;</span>.</p><p>Wien</p></body></html>"
    )
    response = HtmlResponse("http://127.0.0.1/wiki/Donau", body=body, encoding="utf-8")
    extracted = extract_page(response, context_chars=30)
    assert extracted.title == "Donaudampfschiff"
    assert extracted.text == "Die Donaudampfschifffahrt Bundesrepublik.\nWien"
    assert [(link.anchor, link.context) for link in extracted.links] == [
        ("Bundesrepublik", "Die Donaudampfschifffahrt Bundesrepublik. Wien")
    ]
    assert tokenize(extracted.text, "de") == ["donaudampfschifffahrt", "bundesrepublik", "wien"]


def test_links_resolved_deduplicated_and_filtered():
    urls = [link.url for link in page().links]
    assert urls == [
        "http://127.0.0.1/wiki/Main_Page",
        "http://127.0.0.1/wiki/Seabird",
        "http://127.0.0.1/wiki/petrel",
    ]


def test_anchor_and_context_window():
    links = {link.url.rsplit("/", 1)[1]: link for link in page(context_chars=30).links}
    seabird = links["Seabird"]
    assert seabird.anchor == "seabirds"
    assert "Albatrosses are large seabirds related to the" in seabird.context
    assert len(seabird.context) <= len("seabirds") + 2 * 30
    assert links["Main_Page"].context == ""  # navigation links carry no context
    assert page(context_chars=0).links[1].context == ""


def test_only_http_urls_to_non_binary_files_are_followed():
    assert is_followable("https://example.org/a/b.html")
    assert not is_followable("ftp://example.org/file")
    assert not is_followable("http://example.org/report.PDF")
    assert not is_followable("http://example.org/clip.mp4")
    # Names that end like a text format or a country domain: the Content-Type tells.
    assert is_followable("https://en.wikipedia.org/wiki/Node.js")
    assert is_followable("https://en.wikipedia.org/wiki/Character.ai")
    assert not is_followable("data:text/html,hi")


def test_whitespace_collapses_within_each_text_node_and_blocks_break_lines():
    html = (
        "<html><head><title>T</title></head><body>"
        '<div>one  two <b> three</b>\tfour<a href="/x">link\n  text</a>\xa0five</div>\n'
        '<ul><li>six</li><li><a href="y">seven <i>eight</i></a></li></ul>'
        '<nav>nine <a href="/z">ten</a> eleven</nav><script>no</script> twelve</body></html>'
    )
    response = HtmlResponse("http://h/dir/page", body=html.encode(), encoding="utf-8")
    extracted = extract_page(response, context_chars=8)
    assert extracted.text == "one two three fourlink text five\nsix\nseven eight\ntwelve"
    # The windows are cut from "\none two  three fourlink text five\n \n\nsix...": "two " and
    # " three" are two text nodes, so their spaces stay two until the window is cleaned; the
    # <nav> is a block, so "eight" and " twelve" are four line breaks apart.
    assert [(link.url, link.anchor, link.context) for link in extracted.links] == [
        ("http://h/x", "link text", "ree fourlink text five"),
        ("http://h/dir/y", "seven eight", "six seven eight twe"),
        ("http://h/z", "ten", ""),
    ]


def test_sample_pages_extract_as_recorded(sample_graph):
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    for name, expected in recorded.items():
        body = render_article(sample_graph, name).encode("utf-8")
        response = HtmlResponse(f"http://127.0.0.1:8000/wiki/{name}", body=body, encoding="utf-8")
        page = extract_page(response)
        assert page.title == expected["title"]
        assert page.text == expected["text"]
        assert [[link.url, link.anchor, link.context] for link in page.links] == expected["links"]
        assert (page.canonical, dict(page.skipped)) == (expected["canonical"], expected["skipped"])


def test_links_from_the_root_resolve_against_each_pages_own_host():
    # Such links share a cache entry per scheme and host: another host or <base> must not reuse it.
    def urls(url: str, head: str = "") -> list[str]:
        html = f'<html><head>{head}</head><body><a href="/wiki/A?b=1&amp;a=2">A</a></body></html>'
        response = HtmlResponse(url, body=html.encode(), encoding="utf-8")
        return [link.url for link in extract_page(response).links]

    assert urls("http://one.example/x/y") == ["http://one.example/wiki/A?a=2&b=1"]
    assert urls("https://two.example:8443/z") == ["https://two.example:8443/wiki/A?a=2&b=1"]
    base = '<base href="http://three.example/dir/">'
    assert urls("http://one.example/x/y", base) == ["http://three.example/wiki/A?a=2&b=1"]


AWKWARD_LINKS = """<html><body><p>
<a href="../\u00dc\u00f1\u00ef c\u00f6d\u00e9/?q=\u00e4 \u00f6#frag">umlaut</a>
<a href="http://EXAMPLE.com:80/%7euser/%2fx/index.html">escapes</a>
<a href="//b\u00fccher.example/Path;jsessionid=1?b=2&amp;a=1">idn</a>
<a href=" /wiki/Sp ace\t">space</a> <a href="/x%zz/%">bad escape</a>
<a href="http://h/[x]{y}|^`">brackets</a> <a href="http://h/a'b\\&quot;c&lt;d&gt;">quotes</a>
<a href="http://user:pw@H.example:8080/p?q=%E4&amp;r=%C3%A4">userinfo</a>
<a href="http://h/%E2%82%AC/\u20ac">euro</a> <a href="http://[::1]:81/v6">ipv6</a>
</p></body></html>"""


def test_link_requests_are_the_requests_scrapy_builds(sample_graph):
    # A link's request takes its URL verbatim when escaping it again would not change it: it
    # must be the request Scrapy builds, escaping the URL itself.
    responses = [
        HtmlResponse(f"http://127.0.0.1:8000/wiki/{name}", body=body, encoding="utf-8")
        for name, body in [
            *((n, render_article(sample_graph, n).encode()) for n in list(sample_graph.links)[:20]),
            ("Awkward", AWKWARD_LINKS.encode()),
        ]
    ]
    links = [link for response in responses for link in extract_page(response).links]
    assert len(links) > 100
    assert {link.escaped for link in links} == {True}
    # A URL that escaping changes (none comes out of extraction) is escaped by the request.
    links.append(Link("http://h/a b/\u00e9", "anchor", "context", escaped=False))

    def errback(failure):
        pass

    for link in links:
        request = _link_request(link, errback)
        meta = {"anchor": link.anchor, "link_context": link.context}
        if link.linked is not None:  # for robots.txt (focused.robots)
            meta["linked_url"] = link.linked
        expected = Request(link.url, meta=meta, errback=errback)
        assert (request.url, request.meta, request.errback) == (expected.url, meta, errback)
    assert request.url == "http://h/a%20b/%C3%A9"


# Links no valid URL can be made of, in any encoding: ports out of range or not numbers,
# malformed hosts and IPv6 literals (in absolute and scheme-relative links).
BAD_HREFS = [
    "http://h:99999/", "http://h:65536/", "http://h:-1/", "http://h:abc/", "http://h:80:80/",
    "http://h:99999999999999999999/", "http://[::1/", "http://[zz]/", "http://[::1]:99999/",
    "http://]/", "http://h]/", "http://[::1]x/", "http://::1/", "//[::1/", "http://\u2100/",
    "http://exa mple.org/", "http://exa%20mple.org/",  # a space in the host: no URL, no host
    "http://*.example.org/", "http://a!b.example/",  # the downloader cannot connect to
    "http://a..b.example/", "http://.example/", f"http://{'a' * 64}.example/",  # nor resolve
]  # fmt: skip
# Links bad in the pages' encodings that lack one of their characters (w3lib escapes a query in
# the page's encoding): the page holds them as character references. The same characters in a
# fragment do no harm: it is dropped first.
QUERY_CHARS = ["\u00e4", "\u0416", "\u20ac", "\u4e2d"]
GOOD_HREFS = {
    "/wiki/A": "http://127.0.0.1/wiki/A",
    "b?x=1": "http://127.0.0.1/dir/b?x=1",
    "http://Other.example/c": "http://other.example/c",
    # A host's escapes are decoded, as browsers (and w3lib 2.6) read them; w3lib 2.5 left the
    # escape, a host no resolver knows, and the link was lost as bad_url.
    "http://ex%41mple.org/": "http://example.org/",
}


def hostile_page(encoding: str) -> HtmlResponse:
    hrefs = [
        *BAD_HREFS,
        *(f"/q?x={char}" for char in QUERY_CHARS),
        *(f"/f#{char}" for char in QUERY_CHARS),
        "javascript:alert('\u00e4')",
        *GOOD_HREFS,
    ]
    anchors = "".join(f'<p><a href="{escape(href)}">link</a></p>' for href in hrefs)
    body = f"<html><head><title>t</title></head><body>{anchors}</body></html>"
    return HtmlResponse(
        "http://127.0.0.1/dir/page",
        body=body.encode(encoding, "xmlcharrefreplace"),
        encoding=encoding,
    )


@pytest.mark.parametrize("encoding", ["utf-8", "cp1251", "latin-1", "shift_jis"])
def test_bad_links_are_skipped_and_the_rest_of_the_page_kept(encoding):
    page = extract_page(hostile_page(encoding))
    lacking = [char for char in QUERY_CHARS if char.encode(encoding, "ignore") == b""]
    assert page.skipped == {BAD_URL: len(BAD_HREFS) + len(lacking), "scheme": 1}
    expected = {
        *GOOD_HREFS.values(),
        "http://127.0.0.1/f",  # from every /f#char: the fragments are dropped
        *(
            Request(f"http://127.0.0.1/q?x={char}", encoding=encoding).url
            for char in QUERY_CHARS
            if char not in lacking
        ),
    }
    assert {link.url for link in page.links} == expected
    assert page.title == "t"

    def errback(failure):
        pass

    for link in page.links:  # whatever passes extraction makes a Request, Scrapy's own
        assert _link_request(link, errback).url == Request(link.url).url == link.url


def test_a_bad_link_is_a_cached_result():
    # A bad link in a site's template is on every page: only its first sight costs anything.
    _link_url.cache_clear()
    extract_page(hostile_page("cp1251"))
    first = _link_url.cache_info()
    page = extract_page(hostile_page("cp1251"))
    again = _link_url.cache_info()
    assert again.misses == first.misses
    assert again.hits - first.hits == first.misses
    assert page.skipped[BAD_URL] == len(BAD_HREFS) + 2  # ä and 中 are not in cp1251


def test_a_malformed_base_or_canonical_is_ignored():
    for bad in ("http://[::1/", "http://h:99999/", "//[zz]/"):
        head = f'<base href="{bad}"><link rel="canonical" href="{bad}">'
        body = f"<html><head>{head}</head><body><a href='/a'>a</a> <a href='b'>b</a></body></html>"
        response = HtmlResponse("http://127.0.0.1/dir/page", body=body.encode(), encoding="utf-8")
        page = extract_page(response)
        links = [link.url for link in page.links]
        assert links == ["http://127.0.0.1/a", "http://127.0.0.1/dir/b"], bad
        assert page.canonical is None


@pytest.mark.parametrize(
    ("base", "folder"),
    [
        ("sub/", "http://127.0.0.1/a/b/sub/"),  # was .../sub/sub/
        ("../", "http://127.0.0.1/a/"),  # was http://127.0.0.1/
        ("/c/", "http://127.0.0.1/c/"),
        # browsers ignore these: every relative link was lost (a javascript: or data: URL)
        ("javascript:void(0)", "http://127.0.0.1/a/b/"),
        ("data:text/html,x", "http://127.0.0.1/a/b/"),
    ],
)
def test_a_relative_base_is_resolved_against_the_page_once(base, folder):
    """A relative <base href> was resolved against Scrapy's base URL of the page, which is that
    base already: counted twice, it invented links and the page's canonical URL."""
    head = f'<base href="{base}"><link rel="canonical" href="page">'
    body = f"<html><head>{head}</head><body><a href='x'>x</a> <a href='/y'>y</a></body></html>"
    response = HtmlResponse("http://127.0.0.1/a/b/page", body=body.encode(), encoding="utf-8")
    page = extract_page(response)
    assert [link.url for link in page.links] == [f"{folder}x", "http://127.0.0.1/y"]
    assert page.canonical == f"{folder}page"


def too_deep_page(depth: int) -> str:
    """Text and a link, then ``depth`` unclosed tags, then more text and a link."""
    return (
        "<html><head><title>deep</title></head><body><p>birds nest <a href='/a'>a</a></p>"
        + "<b>" * depth
        + "eggs <a href='/b'>b</a></body></html>"
    )


# Deeper than Python's recursion limit, within what libxml2 parses (it gives up at 2,048).
DEEP = 1500


def test_a_page_nested_deeper_than_the_recursion_limit_is_extracted():
    """Its walk was a call per element: a RecursionError, and the page lost."""
    response = HtmlResponse(
        "http://127.0.0.1/deep", body=too_deep_page(DEEP).encode(), encoding="utf-8"
    )
    extracted = extract_page(response)
    assert extracted.text == "birds nest a\neggs b"
    assert [(link.url, link.anchor) for link in extracted.links] == [
        ("http://127.0.0.1/a", "a"),
        ("http://127.0.0.1/b", "b"),
    ]


def test_a_crawl_stores_and_follows_deeply_nested_pages(tmp_path):
    def deep_site(method: str, path: str) -> Reply:
        return Reply(200, too_deep_page(DEEP))

    with Site(deep_site) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds nest", "seeds": f"{site.url}/deep"},
            {"CLOSESPIDER_PAGECOUNT": 3, "CONCURRENT_REQUESTS": 1},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert "Traceback" not in log and "RecursionError" not in log, log[-3000:]
    stored = sorted(page["url"].removeprefix(site.url) for page in crawl.pages())
    assert stored == ["/a", "/b", "/deep"]


def test_a_page_nested_deeper_than_libxml2_parses_says_it_was_cut_short():
    """libxml2 stops parsing at an element nested 2,048 deep (with huge_tree): the rest of the
    page was lost without a word."""
    response = HtmlResponse(
        "http://127.0.0.1/deep", body=too_deep_page(3000).encode(), encoding="utf-8"
    )
    extracted = extract_page(response)
    assert extracted.cut_short
    assert extracted.title == "deep"
    assert extracted.text == "birds nest a"  # what came before is kept
    assert [link.url for link in extracted.links] == ["http://127.0.0.1/a"]
    response = HtmlResponse(
        "http://127.0.0.1/deep", body=too_deep_page(2000).encode(), encoding="utf-8"
    )
    extracted = extract_page(response)
    assert not extracted.cut_short
    assert [link.url for link in extracted.links] == ["http://127.0.0.1/a", "http://127.0.0.1/b"]


def test_a_crawl_counts_and_names_the_pages_cut_short(tmp_path):
    def respond(method: str, path: str) -> Reply:
        return Reply(200, too_deep_page(3000 if path == "/deep" else 0))

    with Site(respond) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds nest", "seeds": f"{site.url}/deep"},
            {"CLOSESPIDER_PAGECOUNT": 2, "CONCURRENT_REQUESTS": 1},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert sorted(page["url"].removeprefix(site.url) for page in crawl.pages()) == ["/a", "/deep"]
    assert stat(log, "focused/cut_short_pages") == 1
    [line] = [line for line in log.splitlines() if "cut short" in line]
    assert f"{site.url}/deep" in line and "WARNING" in line, line


def test_a_link_longer_than_the_url_length_limit_is_skipped_before_it_is_resolved():
    """Scrapy's UrlLengthMiddleware dropped it only after it was resolved, escaped and
    canonicalized (milliseconds for 100 kB), with an INFO line each, and it stayed in
    _link_url's cache: a site of pages of long links grew a crawl by gigabytes."""
    long = "/a" + "x" * 3000
    body = (
        f"<html><body><p>birds</p><a href='{long}'>long</a><a href='{long}#top'>again</a>"
        f"<a href='/b#{'y' * 3000}'>a long fragment</a><a href='/c'>short</a></body></html>"
    )
    response = HtmlResponse("http://127.0.0.1/", body=body, encoding="utf-8")
    _link_url.cache_clear()
    extracted = extract_page(response, max_url_length=2083)
    assert [link.url for link in extracted.links] == ["http://127.0.0.1/b", "http://127.0.0.1/c"]
    assert extracted.skipped == {"url_too_long": 2}
    assert _link_url.cache_info().currsize == 2
    assert len(extract_page(response).links) == 3  # 0: no limit, as URLLENGTH_LIMIT


def test_a_crawl_counts_links_too_long_without_a_line_each(tmp_path):
    def respond(method: str, path: str) -> Reply:
        links = "".join(f"<a href='/{n}{'x' * 3000}'>long</a>" for n in range(5))
        return Reply(200, f"<html><body><p>birds</p>{links}<a href='/b'>b</a></body></html>")

    with Site(respond) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds", "seeds": f"{site.url}/a"},
            {"CLOSESPIDER_PAGECOUNT": 2, "CONCURRENT_REQUESTS": 1},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert "Ignoring link" not in log, log[-3000:]
    assert stat(log, "focused/skipped/url_too_long") >= 5


def test_links_past_the_limit_of_a_page_are_not_looked_at():
    """A page of 100,000 links took 65 s of a crawl, 49 s of it scoring them on the reactor
    thread, where every other download waited."""
    links = "".join(f'<a href="/{n % 5}">{n}</a><a href="mailto:x">m</a>' for n in range(20))
    body = f"<html><body><p>birds</p>{links}</body></html>"
    response = HtmlResponse("http://127.0.0.1/", body=body, encoding="utf-8")
    extracted = extract_page(response, max_links=3)
    assert [link.url for link in extracted.links] == [f"http://127.0.0.1/{n}" for n in range(3)]
    assert extracted.skipped == {"scheme": 2, "link_limit": 35}  # 40 less the 5 looked at
    assert len(extract_page(response).links) == 5  # 0: no limit


def links_of(body: str, head: str = "", context_chars: int = 30) -> tuple[list[tuple], dict]:
    """(URL, anchor, context) of each link of a page at http://127.0.0.1/dir/page, and the
    links skipped by reason."""
    document = f"<html><head><title>t</title>{head}</head>{body}</html>"
    response = HtmlResponse("http://127.0.0.1/dir/page", body=document, encoding="utf-8")
    extracted = extract_page(response, context_chars)
    links = [(link.url, link.anchor, link.context) for link in extracted.links]
    return links, dict(extracted.skipped)


def test_backslashes_in_a_links_path_are_slashes_as_browsers_read_them():
    """Pages written on Windows have backslashes in their links, which browsers read as slashes
    in an http(s) URL's host and path: a leading one was taken for a path under the page's own
    folder, and a scheme's two for a path under the page's own host."""
    links, _ = links_of(
        r'<a href="\wiki\Gull">a</a> <a href="\\127.0.0.2\wiki\Tern">b</a>'
        r' <a href="http:\\127.0.0.3\wiki\Auk">c</a> <a href="wiki\Skua">d</a>'
        r' <a href="\wiki\Search?q=a\b#x\y">e</a>'
    )
    assert [url for url, _, _ in links] == [
        "http://127.0.0.1/wiki/Gull",
        "http://127.0.0.2/wiki/Tern",
        "http://127.0.0.3/wiki/Auk",
        "http://127.0.0.1/dir/wiki/Skua",
        "http://127.0.0.1/wiki/Search?q=a%5Cb",  # a query's backslash stays (escaped)
    ]


def test_image_map_areas_are_links_named_by_their_alt_else_their_title():
    """Scrapy's LinkExtractor follows <area href> as it does <a href>: a page whose navigation
    is an image map had no links."""
    body = (
        "<body><p>Where the birds nest:</p><img usemap='#m' src='map.png'><map name='m'>"
        "<area href='north' alt=' North  coast ' title='ignored'><area href='/south' title='South'>"
        "<area href='east'><area href='javascript:zoom()' alt='zoom'>"
        "<area href='mailto:x@y.z' alt='mail'><area nohref alt='sea'></map></body>"
    )
    links, skipped = links_of(body, head="<base href='http://other.example/maps/'>")
    assert links == [
        ("http://other.example/maps/north", "North coast", "Where the birds nest:"),
        ("http://other.example/south", "South", "Where the birds nest:"),
        ("http://other.example/maps/east", "", "Where the birds nest:"),
    ]
    assert skipped == {"scheme": 2}


def test_a_frameset_pages_frames_are_its_links():
    """A frameset page has no <body>: it gave no text and no links, and a crawl stopped there."""
    body = (
        "<frameset cols='20%,80%'><frame src='menu.html' name='menu'>"
        "<frameset rows='50%,50%'><frame src='/main' title='Main  page' name='main'>"
        "<frame src='about:blank'><frame src='javascript:void(0)'><frame src='data:text/html,hi'>"
        "<frame src=''><frame src='menu.html' title='again'></frameset>"
        "<noframes><body><p>Your browser lacks frames: <a href='/noframes'>here</a></p></body>"
        "</noframes></frameset>"
    )
    links, skipped = links_of(body)
    assert links == [
        ("http://127.0.0.1/dir/menu.html", "menu", ""),
        ("http://127.0.0.1/main", "Main page", ""),
    ]
    assert skipped == {"scheme": 3}
    response = HtmlResponse("http://127.0.0.1/", body=f"<html>{body}</html>", encoding="utf-8")
    assert extract_page(response).text == ""  # <noframes> holds markup, as raw text


def test_an_iframes_src_is_a_link_where_it_sits_and_its_content_is_not_text():
    body = (
        "<body><p>Nesting sites on the map <iframe src='/map?birds=1' title='Nest  map'>"
        "Your browser lacks iframes: <a href='/fallback'>the map</a></iframe> by region.</p>"
        "<iframe src='about:blank' title='ad'></iframe><iframe src='javascript:false'></iframe>"
        "<iframe src='data:text/html,hi'></iframe><iframe src='video' name='x'></iframe>"
        "<iframe srcdoc='<a href=/doc>d</a>'></iframe>"
        "<footer><iframe src='/share' title='Share'></iframe></footer>"
        "<noframes><a href='/noframes'>no frames</a></noframes></body>"
    )
    links, skipped = links_of(body, context_chars=60)
    assert links == [
        ("http://127.0.0.1/map?birds=1", "Nest map", "Nesting sites on the map by region."),
        ("http://127.0.0.1/dir/video", "", "Nesting sites on the map by region."),
        ("http://127.0.0.1/share", "Share", ""),  # in boilerplate: no context, as an <a>'s
    ]
    assert skipped == {"scheme": 3}
    response = HtmlResponse(
        "http://127.0.0.1/", body=f"<html><body>{body}</body></html>", encoding="utf-8"
    )
    assert extract_page(response).text == "Nesting sites on the map by region."


def test_a_link_without_text_of_its_own_has_the_text_around_it_as_context():
    """An image link, as an area or a frame, is scored by where it sits: it had no context."""
    body = "<body><p>Albatross chicks <a href='/chick'><img src='chick.jpg'></a> fledge.</p></body>"
    links, _ = links_of(body)
    assert links == [("http://127.0.0.1/chick", "", "Albatross chicks fledge.")]


def test_a_crawl_gets_past_a_frameset_page(tmp_path):
    """The seed is a frameset: its frames, and their links, are crawled."""
    pages = {
        "/": "<html><head><title>Birds</title></head><frameset cols='20%,80%'>"
        "<frame src='/menu' name='menu'><frame src='/main' title='Bird nests'></frameset></html>",
        "/menu": html("Menu", "<ul><li><a href='/eggs'>bird eggs</a></li></ul>"),
        "/main": html(
            "Nests",
            "<p>Birds build nests for their eggs.</p><img usemap='#m' src='m.png'>"
            "<map name='m'><area href='/colony' alt='nesting colony'></map>",
        ),
        "/eggs": html("Eggs", "<p>Birds lay eggs in nests.</p>"),
        "/colony": html("Colony", "<p>Birds nest in colonies.</p>"),
    }

    def respond(method: str, path: str) -> Reply:
        return Reply(200, pages[path]) if path in pages else Reply(404, "")

    with Site(respond) as site:
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "birds nests eggs", "seeds": f"{site.url}/"},
            {"CONCURRENT_REQUESTS": 1},
        )
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    stored = {page["url"].removeprefix(site.url): page for page in crawl.pages()}
    assert sorted(stored) == ["/", "/colony", "/eggs", "/main", "/menu"]
    assert stored["/menu"]["anchor"] == "menu"
    assert stored["/main"]["anchor"] == "Bird nests"
    assert stored["/colony"]["anchor"] == "nesting colony"


def test_a_noscript_s_links_are_followed_unless_the_page_was_rendered():
    """A fetch runs no script, so a page's <noscript> is what it shows: sites put pagination and
    menus there for crawlers. Its links were lost. A browser running scripts shows none of it."""
    body = (
        "<html><head><noscript><link rel='stylesheet' href='/nojs.css'></noscript></head><body>"
        "<p>Seabirds <noscript><a href='/page2'>Next page</a> Enable JavaScript</noscript>"
        "nest on islands.</p></body></html>"
    )
    url = "http://127.0.0.1/wiki/Albatross"
    fetched = extract_page(HtmlResponse(url, body=body, encoding="utf-8", request=Request(url)))
    assert [(link.url, link.anchor, link.context) for link in fetched.links] == [
        ("http://127.0.0.1/page2", "Next page", "")  # no context: not in the page's text
    ]
    assert fetched.text == "Seabirds nest on islands."
    rendered = Request(url, meta={"playwright": True})
    shown = extract_page(HtmlResponse(url, body=body, encoding="utf-8", request=rendered))
    assert shown.links == [] and shown.text == fetched.text


def test_an_anchor_is_its_visible_text_with_blocks_set_apart():
    """text_content() ran a card link's heading and summary together ("AlbatrossSeabird") and
    took in an icon's SVG title, a script and hidden text: words no topic has."""
    _, links = words_and_links(
        '<p>Read: <a href="/card"><h3>Albatross</h3><p>Seabird of the southern ocean</p></a>'
        '<a href="/br">Wandering<br>albatross</a> <a href="/in">Wan<b>der</b>ing</a>'
        '<a href="/svg"><svg><title>arrow-right</title></svg>Petrel</a>'
        '<a href="/hid">Puffin<span style="display:none">tracking label</span></a>'
        '<a href="/js">Gannet<script>var x = "click";</script></a></p>'
        '<div hidden><a href="/menu" style="display:none">Skuas <i>and</i> jaegers</a></div>'
    )
    assert [(url.rsplit("/", 1)[1], anchor) for url, anchor, _ in links] == [
        ("card", "Albatross Seabird of the southern ocean"),
        ("br", "Wandering albatross"),
        ("in", "Wandering"),
        ("svg", "Petrel"),
        ("hid", "Puffin"),
        ("js", "Gannet"),
        ("menu", "Skuas and jaegers"),  # a hidden link's own words: a menu a script opens
    ]


def test_a_url_linked_twice_keeps_its_first_link_in_the_text_that_has_words():
    _, links = words_and_links(
        '<nav><a href="/wiki/Nesting">Home</a></nav>'
        '<p><a href="/wiki/Gull"><img src="g.png"></a> The <a href="/wiki/Gull">gull</a> and '
        'the <a href="/wiki/Tern">tern</a> share <a href="/wiki/Nesting">nesting sites</a>.</p>'
        '<nav><a href="/wiki/Tern">Terns</a> <a href="/wiki/Gull">Gulls</a></nav>'
    )
    assert [(url.rsplit("/", 1)[1], anchor, bool(context)) for url, anchor, context in links] == [
        ("Nesting", "nesting sites", True),  # the article's words, not the menu's
        ("Gull", "gull", True),  # the caption's, not the thumbnail's empty link
        ("Tern", "tern", True),
    ]


def test_a_form_holds_page_text_and_an_articles_header_is_the_articles():
    """ASP.NET WebForms pages hold their whole body in a <form>, which was boilerplate: they came
    out without text. A <header> in an <article> (its headline, its byline) was dropped as the
    site's banner is."""
    words, links = words_and_links(
        '<form id="form1" action="/page.aspx"><header><a href="/home">Home</a> Sitename</header>'
        "<article><header><h1>Albatross nesting</h1><p>By A. Writer</p></header>"
        "<p>Albatrosses nest on islands.</p><footer>Filed under seabirds</footer></article>"
        '<select name="country"><option>Afghanistan</option><option>Albania</option></select>'
        "<p>Search <button>Go</button></p><footer>Copyright Sitename</footer></form>"
    )
    assert words == [
        "Albatross", "nesting", "By", "A.", "Writer", "Albatrosses", "nest", "on", "islands.",
        "Filed", "under", "seabirds", "Search", "Go",
    ]  # fmt: skip
    assert [(url.rsplit("/", 1)[1], anchor) for url, anchor, _ in links] == [("home", "Home")]
