"""URL canonicalization: each rule alone, the whole chain, the fingerprint, and a real crawl."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.settings import Settings

from focused.canonical import (
    CanonicalRequestFingerprinter,
    canonicalize,
    decode_host,
    drop_default_port,
    drop_fragment,
    drop_index_page,
    drop_params,
    drop_params_setting,
    drop_session_segments,
    drop_trailing_dot,
    drop_userinfo,
    lowercase_scheme_and_host,
    normalise_percent_encoding,
    resolve_dot_segments,
    sort_query,
)
from focused.extract import extract_page
from tests.conftest import Crawl, run_crawl
from tests.sites import Reply, Site, html


def apply(rule, url: str, *args) -> str:
    return rule(urlsplit(url), *args).geturl()


@pytest.mark.parametrize(
    ("rule", "url", "expected"),
    [
        (lowercase_scheme_and_host, "HTTP://WWW.Example.COM/Path", "http://www.example.com/Path"),
        # A last capital sigma is the small one, as UTS #46 maps it (str.lower() made it final)
        (
            lowercase_scheme_and_host,
            "http://a.\u03a4\u0391\u03a3:8080/",
            "http://a.\u03c4\u03b1\u03c3:8080/",
        ),
        (drop_userinfo, "http://alice:s3cret@Host.ORG:8080/p", "http://Host.ORG:8080/p"),
        (drop_userinfo, "http://a@b@h/p", "http://h/p"),
        (drop_trailing_dot, "http://example.com./p", "http://example.com/p"),
        (drop_trailing_dot, "http://example.com.:8080/p", "http://example.com:8080/p"),
        (drop_trailing_dot, "http://example.com../p", "http://example.com../p"),
        (drop_trailing_dot, "http://[::1]:8080/p", "http://[::1]:8080/p"),
        (drop_trailing_dot, "http://./p", "http://./p"),
        (drop_fragment, "http://h/p?q=1#section", "http://h/p?q=1"),
        (drop_default_port, "http://h:80/p", "http://h/p"),
        (drop_default_port, "https://h:443/p", "https://h/p"),
        (drop_default_port, "http://h:8080/p", "http://h:8080/p"),
        (drop_default_port, "https://h:80/p", "https://h:80/p"),
        (normalise_percent_encoding, "http://h/%7euser/%7E", "http://h/~user/~"),
        (normalise_percent_encoding, "http://h/a%2fb?x=%3d", "http://h/a%2Fb?x=%3D"),
        (normalise_percent_encoding, "http://h/%41%62c", "http://h/Abc"),
        (normalise_percent_encoding, "http://h/a b/é", "http://h/a%20b/%C3%A9"),
        (resolve_dot_segments, "http://h/a/./b/../c", "http://h/a/c"),
        (resolve_dot_segments, "http://h/a/b/..", "http://h/a/"),
        (resolve_dot_segments, "http://h/../../x", "http://h/x"),
        (resolve_dot_segments, "http://h", "http://h/"),
        (resolve_dot_segments, "http://h/dir/", "http://h/dir/"),
        (drop_index_page, "http://h/a/index.html", "http://h/a/"),
        (drop_index_page, "http://h/INDEX.HTM", "http://h/"),
        (drop_index_page, "http://h/a/index.php", "http://h/a/index.php"),
        (sort_query, "http://h/p?b=2&a=1&a=0", "http://h/p?a=0&a=1&b=2"),
        (drop_session_segments, "http://h/(S(ab12cd34ef56gh78ij90kl12))/p.aspx", "http://h/p.aspx"),
        # A host's escapes, as browsers and w3lib 2.6 decode them (2.5 kept them: no host)
        (decode_host, "http://Ex%41mple.org:8080/%41", "http://ExAmple.org:8080/%41"),
        (decode_host, "http://%C3%A4.example/", "http://\u00e4.example/"),
        (decode_host, "http://exa%20mple.org/", "http://exa%20mple.org/"),  # left: no host
        (decode_host, "http://ex%2Fample.org/", "http://ex%2Fample.org/"),  # not ex/ample.org
        (decode_host, "http://[fe80::1%25eth0]:8080/", "http://[fe80::1%25eth0]:8080/"),
    ],
)
def test_each_rule(rule, url, expected):
    assert apply(rule, url) == expected


def test_drop_params_drops_tracking_and_session_ids_only():
    url = "http://h/p;jsessionid=AB12;v=2?utm_source=x&UTM_Medium=y&id=7&PHPSESSID=9f&sid=0123456789abcdef0123456789abcdef"
    assert apply(drop_params, url + "&gclid=z") == "http://h/p;v=2?id=7"
    assert apply(drop_params, "http://h/p?ref=a&keep=b", ("ref",)) == "http://h/p?keep=b"
    assert apply(drop_params, "http://h/p?sidebar=1") == "http://h/p?sidebar=1"  # sid is exact


def test_a_parameter_of_a_session_name_holding_a_plain_number_is_an_id_and_kept():
    """PHP-Nuke's stories are modules.php?name=News&file=article&sid=1234: with sid dropped,
    every story was one URL, fetched once (a 404), and the others never."""
    story = "http://h/modules.php?name=News&file=article&sid=1234"
    assert apply(drop_params, story) == story
    assert canonicalize(story) == "http://h/modules.php?file=article&name=News&sid=1234"
    forum = "http://h/viewtopic.php?t=5&sid=0123456789abcdef0123456789abcdef"  # a session: dropped
    assert apply(drop_params, forum) == "http://h/viewtopic.php?t=5"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h/(S(ab12cd34ef56gh78ij90kl12))/page.aspx", "http://h/page.aspx"),
        ("http://h/(A(Zm9v-YmFy_1))/page.aspx", "http://h/page.aspx"),
        ("http://h/(F(0A1B2C3D4E5F))/page.aspx?id=2", "http://h/page.aspx?id=2"),
        ("http://h/app/(X(1)S(fooooooooooooooooooooooo))/a/b.aspx", "http://h/app/a/b.aspx"),
        ("http://h/(ab12cd34ef56gh78ij90kl12)/page.aspx", "http://h/page.aspx"),  # ASP.NET 1.x
        ("http://h/(S(ab12cd34ef56gh78ij90kl12))/", "http://h/"),
        ("http://h/(S(ab12cd34ef56gh78ij90kl12))/index.html", "http://h/"),
        # Not ASP.NET's: parentheses in a page's name, or not a segment before a "/".
        ("http://h/wiki/Mercury_(planet)", "http://h/wiki/Mercury_(planet)"),
        ("http://h/wiki/(planet)/x", "http://h/wiki/(planet)/x"),
        ("http://h/(S(ab12cd34ef56gh78ij90kl12))", "http://h/(S(ab12cd34ef56gh78ij90kl12))"),
        ("http://h/(s(ab12cd34ef56gh78ij90kl12))/p", "http://h/(s(ab12cd34ef56gh78ij90kl12))/p"),
        ("http://h/(ab12cd34)/p", "http://h/(ab12cd34)/p"),  # not 24 characters
        ("http://h/(S())/p", "http://h/(S())/p"),
    ],
)
def test_aspnet_cookieless_session_segments_are_dropped(url, expected):
    """ASP.NET without cookies keeps the session in the path: each session id made every page
    a URL of its own, crawled again."""
    assert canonicalize(url) == expected


def test_aspnet_probe_for_cookies_is_dropped():
    """ASP.NET's AutoDetect mode redirects a first visit to ``?AspxAutoDetectCookieSupport=1``:
    the page was stored under its probe, and the same page linked without it fetched again."""
    url = "http://h/Default.aspx?AspxAutoDetectCookieSupport=1"
    assert canonicalize(url) == "http://h/Default.aspx"
    assert canonicalize("http://h/list.aspx?page=2&aspxautodetectcookiesupport=1") == (
        "http://h/list.aspx?page=2"
    )


def test_canonicalize_applies_every_rule():
    url = "HTTP://Example.COM.:80/a/./b/../%7eme/index.html?z=1&utm_campaign=q&a=2#top"
    assert canonicalize(url) == "http://example.com/a/~me/?a=2&z=1"
    assert canonicalize(canonicalize(url)) == canonicalize(url)  # idempotent
    assert canonicalize("mailto:a@b.c") == "mailto:a@b.c"  # other schemes untouched
    # The host as a browser reads it, with w3lib 2.5 or 2.6: escapes decoded, then IDNA
    assert canonicalize("http://EX%41MPLE.org/") == "http://example.org/"
    assert canonicalize("http://%C3%A4.example/") == "http://xn--4ca.example/"
    # The host a request for the link names (w3lib 2.6 kept lower()'s final sigma: xn--mxa8ae)
    assert canonicalize("http://a.\u03a4\u0391\u03a3/x") == "http://a.xn--mxa0bb/x"


def test_fingerprint_sees_variants_as_one_url():
    fingerprinter = CanonicalRequestFingerprinter()
    variants = [
        "http://h/~u/",
        "http://H:80/%7Eu/index.html",
        "http://h/~u/?utm_source=feed",
        "http://h/x/../~u/#frag",
    ]
    prints = {fingerprinter.fingerprint(Request(url)) for url in variants}
    assert len(prints) == 1
    assert fingerprinter.fingerprint(Request("http://h/~v/")) not in prints
    custom = CanonicalRequestFingerprinter(drop=["ref"])
    assert custom.fingerprint(Request("http://h/?ref=1")) == custom.fingerprint(
        Request("http://h/")
    )
    assert custom.fingerprint(Request("http://h/?sid=ab")) != custom.fingerprint(
        Request("http://h/")
    )


def response(url: str, head: str = "", body: str = "") -> HtmlResponse:
    return HtmlResponse(url, body=html("t", body, head).encode(), encoding="utf-8")


def test_extract_canonical_links_and_counts_skipped():
    page = extract_page(
        response(
            "http://h/dir/page",
            body='<a href="../A/index.html?utm_source=x#s">a</a> <a href="/a/">again</a>'
            ' <a href="javascript:void(0)">js</a> <a href="mailto:x@y">m</a>'
            ' <a href="file:///etc/passwd">f</a> <a href="data:text/html,hi">d</a>'
            ' <a href="/doc.pdf">pdf</a> <a href="HTTP://H/%7eme">me</a>',
        )
    )
    assert [link.url for link in page.links] == ["http://h/A/", "http://h/a/", "http://h/~me"]
    assert page.skipped == {"scheme": 4, "extension": 1}


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ('<link rel="canonical" href="/Main/index.html?utm_medium=x">', "http://h/Main/"),
        ('<link rel="Canonical Shortlink" href="http://h/m">', "http://h/m"),
        ('<link rel="canonical" href="http://elsewhere.org/m">', None),  # other host: ignored
        ('<link rel="canonical" href="http://h:8080/m">', None),  # other port: another site
        ('<link rel="canonical" href="http://h:80/m">', "http://h/m"),  # the default port
        ('<link rel="canonical" href="https://h/m">', "https://h/m"),  # http and https: one site
        ('<link rel="canonical" href="javascript:x">', None),
        ("", None),
    ],
)
def test_extract_rel_canonical_only_on_the_same_site(head, expected):
    assert extract_page(response("http://h/page?x=1", head=head)).canonical == expected


# -- a real crawl --------------------------------------------------------------------------

PAGES = {
    "/": '<a href="/a/index.html?utm_source=x">a</a> <a href="/%7euser/">u</a>'
    ' <a href="/b?y=2&x=1">b</a> <a href="/c">c</a> <a href="/d">d</a>'
    ' <a href="javascript:alert(1)">js</a> <a href="file:///etc/passwd">file</a>',
    "/a/": '<a href="/~user/#top">u</a> <a href="/b?x=1&y=2&sid=9a9b">b</a> <a href="/">home</a>',
    "/~user/": '<a href="/a/">a</a> <a href="/b?jsessionid=5F3A&x=1&y=2">b</a>',
    "/b?x=1&y=2": '<a href="/a/./">a</a>',
    # /c says it is the home page (already fetched): a duplicate. /d says its real URL is /e.
    "/c": '<a href="/a/">a</a>',
    "/d": '<a href="/e">e</a>',
    "/e": "the canonical page e",
}
HEADS = {"/c": '<link rel="canonical" href="/">', "/d": '<link rel="canonical" href="/e">'}


def canonical_site(method: str, path: str) -> Reply:
    if path not in PAGES:
        return Reply(404, html("no", "no such page"))
    body = f"<p>words about topic {path}</p>{PAGES[path]}"
    return Reply(200, html(path, body, HEADS.get(path, "")))


def stat(stderr: str, name: str) -> int:
    found = re.search(rf"'{re.escape(name)}': (\d+)", stderr)
    return int(found.group(1)) if found else 0


def crawl_one_request_at_a_time(tmp_path, seed: str) -> Crawl:
    crawl = run_crawl(
        tmp_path,
        {"strategy": "bfs", "query": "topic words", "seeds": seed},
        {"CONCURRENT_REQUESTS": 1},
    )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    return crawl


def test_crawl_fetches_each_page_once_under_its_canonical_url(tmp_path):
    with Site(canonical_site) as site:
        crawl = crawl_one_request_at_a_time(tmp_path, f"{site.url}/?utm_source=seed")
    fetched = [path for _, path in site.log.gets()]
    assert sorted(fetched) == sorted(["/", "/a/", "/~user/", "/b?x=1&y=2", "/c", "/d"]), fetched
    stored = {p["url"].removeprefix(site.url): p for p in crawl.pages()}
    assert set(stored) == {"/", "/a/", "/~user/", "/b?x=1&y=2", "/c", "/e"}
    assert stored["/c"]["duplicate_of"] == f"{site.url}/"
    assert stored["/c"]["text"] is None
    assert stored["/e"]["duplicate_of"] is None
    assert stored["/e"]["title"] == "/d"  # fetched as /d, stored under its canonical URL
    assert stored["/e"]["requested_url"] == f"{site.url}/d"  # the URL the link named
    assert [path for path, p in stored.items() if p["requested_url"]] == ["/e"]
    assert stat(crawl.result.stderr, "focused/skipped/scheme") == 2
    assert stat(crawl.result.stderr, "focused/duplicates/canonical") == 1
    # /e was stored as /d's canonical: the link to it is not followed again
    assert stat(crawl.result.stderr, "focused/skipped/already_fetched") >= 1


def test_an_aspnet_site_without_cookies_is_crawled_once_whatever_its_sessions(tmp_path):
    """ASP.NET's cookieless session state (``cookieless="UseUri"``): a request without a
    session id is redirected to a new session's, /(S(id))/page.aspx, whose relative links keep
    it; a link from the site's root starts another session. Each page was fetched once per
    session it was reached in, as a new URL."""
    sessions = iter(range(10**6))
    pages = {
        "home.aspx": '<a href="a.aspx">a</a> <a href="/b.aspx">b</a>'
        ' <a href="/wiki/Mercury_(planet)">Mercury</a>',
        "a.aspx": '<a href="b.aspx">b</a> <a href="/home.aspx">home</a>',
        "b.aspx": '<a href="a.aspx">a</a> <a href="/a.aspx">a</a>',
    }

    def respond(method: str, path: str) -> Reply:
        if path == "/wiki/Mercury_(planet)":
            return Reply(200, html("Mercury", "<p>words about topic Mercury</p>"))
        session = re.fullmatch(r"/\(S\(([a-z0-5]{24})\)\)/([\w.]+)", path)
        if session is None:
            if path.lstrip("/") not in pages:
                return Reply(404, html("no", "no such page"))
            new = f"{next(sessions):024d}".translate(str.maketrans("6789", "abcd"))
            return Reply(302, "", headers={"Location": f"/(S({new})){path}"})
        page = session.group(2)
        return Reply(200, html(page, f"<p>words about topic {page}</p>{pages[page]}"))

    with Site(respond) as site:
        crawl = crawl_one_request_at_a_time(tmp_path, f"{site.url}/home.aspx")
    fetched = [re.sub(r"^/\(S\(\w+\)\)", "", path) for _, path in site.log.gets()]
    # Each page twice: its request, redirected, then the page in a new session.
    assert sorted(fetched) == sorted(
        [*[f"/{page}" for page in pages for _ in "12"], "/wiki/Mercury_(planet)"]
    ), fetched
    stored = sorted(p["url"].removeprefix(site.url) for p in crawl.pages())
    assert stored == ["/a.aspx", "/b.aspx", "/home.aspx", "/wiki/Mercury_(planet)"]


def test_a_page_stored_under_another_url_keeps_the_one_its_link_named(tmp_path):
    """The stored link graph joins a page to the URL it is stored under; without the URL the
    link named (before a redirect, or a rel=canonical), the edge as the parent page has it
    was lost."""
    moved = {"/old": "/new", "/gone-home": "/copy-of-home", "/seed": "/"}
    canonical_of = {"/copy-of-home": "/", "/copy": "/", "/alias": "/real"}

    def respond(method: str, path: str) -> Reply:
        if path in moved:
            return Reply(302, "", headers={"Location": moved[path]})
        head = f'<link rel="canonical" href="{canonical_of[path]}">' if path in canonical_of else ""
        links = "".join(
            f'<a href="{link}">{link}</a>' for link in ("/old", "/gone-home", "/copy", "/alias")
        )
        body = f"<p>words about topic {path}</p>{links if path == '/' else ''}"
        return Reply(200, html(path, body, head))

    with Site(respond) as site:
        crawl = crawl_one_request_at_a_time(tmp_path, f"{site.url}/seed?utm_source=x")
    stored = {
        p["url"].removeprefix(site.url): (
            (p["requested_url"] or "").removeprefix(site.url) or None,
            (p["duplicate_of"] or "").removeprefix(site.url) or None,
        )
        for p in crawl.pages()
    }
    assert stored == {
        "/": ("/seed", None),  # a seed that redirected: its URL as canonicalized (no utm_)
        "/new": ("/old", None),  # a redirect's target
        "/real": ("/alias", None),  # stored under its rel=canonical
        # a copy of a stored page, kept under the URL it came from, reached by a redirect
        "/copy-of-home": ("/gone-home", "/"),
        "/copy": (None, "/"),  # the same, stored under the URL its link named
    }


@pytest.mark.parametrize(
    ("given", "patterns"),
    [
        (["utm_*", "sid"], ("utm_*", "sid")),
        ("utm_*, sid", ("utm_*", "sid")),  # -s NAME=a,b
        # Each matched nothing: a parameter's name is matched in lower case, and Scrapy's
        # getlist cut a JSON list at its commas, into '["utm_*"' and '"sid"]'.
        ("UTM_*,Sid", ("utm_*", "sid")),
        ('["utm_*", "sid"]', ("utm_*", "sid")),
        # Not a JSON list of names: patterns as Scrapy's getlist gives them ("a[" is a name).
        ("[x,a[", ("[x", "a[")),
        ("", ()),
    ],
)
def test_the_dropped_parameters_as_the_command_line_gives_them(given, patterns):
    settings = Settings({"CANONICAL_DROP_PARAMS": given})
    assert drop_params_setting(settings) == patterns
    url = "http://example.org/p?UTM_source=x&sid=f00d&keep=2"
    if "sid" in patterns:
        assert canonicalize(url, drop_params_setting(settings)) == "http://example.org/p?keep=2"


def test_credentials_are_never_logged_or_stored(tmp_path):
    """A user and password in a link, a redirect's Location or a meta refresh are dropped
    (Twisted took them for the host name, "invalid hostname", and they were logged), and
    Scrapy's line of overridden settings shows no password of the crawl's own (HTTPAUTH_*)."""
    with_user: dict[str, str] = {}  # path -> its URL with a user and password

    def pages(method: str, path: str) -> Reply:
        if path == "/":
            return Reply(
                200,
                html(
                    "home",
                    f'<p>topic words</p><a href="{with_user["/x"]}">x</a>'
                    ' <a href="/r">r</a> <a href="/m">m</a>',
                ),
            )
        if path == "/r":
            return Reply(302, "", headers={"Location": with_user["/y"]})
        if path == "/m":
            refresh = f'<meta http-equiv="refresh" content="0; url={with_user["/z"]}">'
            return Reply(200, html("m", "<p>topic words m</p>", refresh))
        if path in ("/x", "/y", "/z"):
            return Reply(200, html(path, f"<p>topic words {path}</p>"))
        return Reply(404, html("no", "no such page"))

    with Site(pages) as site:
        for path in ("/x", "/y", "/z"):
            with_user[path] = site.url.replace("//", f"//user{path[1]}:pass{path[1]}@") + path
        crawl = run_crawl(
            tmp_path,
            {"strategy": "bfs", "query": "topic words", "seeds": f"{site.url}/"},
            {
                "HTTPAUTH_USER": "alice",
                "HTTPAUTH_PASS": "s3cret words",
                "HTTPAUTH_DOMAIN": "127.0.0.1",
                "LOG_LEVEL": "DEBUG",
            },
        )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert sorted(path for _, path in site.log.gets()) == ["/", "/m", "/r", "/x", "/y", "/z"]
    stored = {p["url"].removeprefix(site.url) for p in crawl.pages()}
    assert {"/", "/x", "/y", "/z"} <= stored, stored
    assert "'HTTPAUTH_PASS': '***'" in crawl.result.stderr
    for secret in ("s3cret", "passx", "passy", "passz"):
        assert secret not in crawl.result.stderr
        assert secret not in str(crawl.pages())
