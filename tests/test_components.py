"""A component setting given with -s adds to the project's chain (focused.components)."""

from __future__ import annotations

import json

import pytest
from scrapy.settings import Settings

import focused.settings
from focused.components import keep_project_components, project_components, replace_components
from focused.refresh import RecrawlSpider
from focused.sqlitestore import SqliteStore
from tests.conftest import crawl_env, run_crawl
from tests.sites import Reply, Site, html
from tests.test_offsite import enabled_downloader_middlewares
from tests.test_refresh import recrawl, stored
from tests.test_storage import crawl_record

USERS = "tests.user_components.CountingPipeline"
STORAGE = "pipelines.storage.StoragePipeline"
RELEVANCE = "pipelines.relevance.RelevancePipeline"
# Given with -s: the user's pipeline, and a downloader middleware of Scrapy's at another order.
GIVEN = {
    "ITEM_PIPELINES": json.dumps({USERS: 900}),
    "DOWNLOADER_MIDDLEWARES": json.dumps(
        {"scrapy.downloadermiddlewares.stats.DownloaderStats": 851}
    ),
}


def given_on_the_command_line(given: dict) -> Settings:
    """The project's settings with ``given`` applied as ``-s`` is, the project's chains kept."""
    settings = Settings()
    settings.setmodule("focused.settings")
    project = project_components(settings)
    settings.setdict(given, priority="cmdline")
    keep_project_components(settings, project)
    return settings


def test_a_chain_given_with_s_adds_to_the_project_s_and_null_turns_one_off():
    settings = given_on_the_command_line(
        {"ITEM_PIPELINES": json.dumps({USERS: 900, RELEVANCE: None})}
    )
    assert settings.getdict("ITEM_PIPELINES") == {USERS: 900, RELEVANCE: None, STORAGE: 800}
    assert settings.getdict("EXTENSIONS") == focused.settings.EXTENSIONS  # not given: as it was


def test_the_recrawl_s_chains_replace_the_project_s_beside_those_given_with_s():
    settings = given_on_the_command_line({"ITEM_PIPELINES": json.dumps({USERS: 900})})
    replace_components(settings, "ITEM_PIPELINES", {"focused.refresh.RefreshPipeline": 800})
    assert {name: order for name, order in settings.getdict("ITEM_PIPELINES").items() if order} == {
        USERS: 900,
        "focused.refresh.RefreshPipeline": 800,
    }
    # A second time (the spider's settings applied again): the same.
    RecrawlSpider.update_settings(settings)
    RecrawlSpider.update_settings(settings)
    assert {name for name, order in settings.getdict("ITEM_PIPELINES").items() if order} == {
        USERS,
        "focused.refresh.RefreshPipeline",
    }
    assert not any(settings.getdict("SPIDER_MIDDLEWARES").values())


def test_a_crawl_and_its_recrawl_given_a_pipeline_of_the_user_s_still_store_their_pages(tmp_path):
    """Scrapy's -s ITEM_PIPELINES replaced the project's chain whole: a crawl given a pipeline
    of the user's ran it alone and stored nothing, and a recrawl lost its own components (its
    spider's settings are below the command line's priority): it ran the crawl's pipelines,
    which failed on its spider, and recorded nothing."""
    pages = {
        "/": html("Birds", '<p>Birds nest.</p><a href="/a">albatross nests</a>'),
        "/a": html("Albatross", "<p>The albatross nests on islands.</p>"),
    }
    with Site(lambda method, path: Reply(body=pages.get(path, "none"))) as site:
        arguments = {"strategy": "bfs", "query": "birds nests", "seeds": f"{site.url}/"}
        crawl = run_crawl(tmp_path, arguments, GIVEN)
        assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
        assert "'test/items_seen': 2" in crawl.result.stderr, crawl.result.stderr[-3000:]
        assert {page["url"] for page in crawl.pages()} == {f"{site.url}/", f"{site.url}/a"}

        db = tmp_path / "recrawled.sqlite3"
        store = SqliteStore(db)
        store.start_crawl({**crawl_record(), "allowed_domains": [site.host]})
        store.save_pages([stored(f"{site.url}/a")])
        store.close()
        result = recrawl(db, "c1", settings=GIVEN)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "'test/items_seen': 1" in result.stderr, result.stderr[-3000:]
    summary = "Recrawl of crawl c1 (uniform, 1 page): 1 changed, 0 unchanged, 0 gone, 0 skipped\n"
    assert summary in result.stderr, result.stderr[-3000:]
    # The recrawl's offsite filter in place of Scrapy's, beside the middleware given.
    middlewares = enabled_downloader_middlewares(result.stderr)
    assert "focused.refresh.OffsiteMiddleware" in middlewares
    assert "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware" not in middlewares


def test_what_a_crawl_does_not_use_is_not_imported(tmp_path):
    """Scrapy imports every extension EXTENSIONS_BASE names, and lets it turn itself off: its
    remote control's module brought aiohttp's web server into every crawl's start-up, and the
    shared crawl's extension redis and scrapy-redis, the WARC export warcio (focused.ondemand);
    gensim's package __init__ modules all its models and indexes, and those scipy.stats and
    smart_open (focused.gensim_api); itemadapter pydantic (focused.without_pydantic); Scrapy's
    cookies middleware tldextract. A crawl that refits its model imports none."""
    links = "".join(f'<a href="/{name}">{name}</a> ' for name in ("heron", "stork", "crane"))
    pages = {
        "/": html("Birds", f"<p>Birds nest.</p>{links}"),
        **{f"/{name}": html(name, f"<p>The {name} nests.</p>") for name in ("heron", "stork")},
    }
    listening = "[scrapy.extensions.remote_control] INFO: Remote control HTTP server listening"
    with Site(lambda method, path: Reply(body=pages.get(path, "none"))) as site:
        arguments = {"strategy": "bfs", "query": "birds nests", "seeds": f"{site.url}/"}
        # Python's -X importtime: one stderr line per module imported.
        imports = {**crawl_env(), "PYTHONPROFILEIMPORTTIME": "1"}
        refits = {"RELEVANCE_REFIT_EVERY": 1, "RELEVANCE_REFIT_THREAD": False}
        crawl = run_crawl(tmp_path / "off", arguments, refits, env=imports)
        assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
        log = crawl.result.stderr.splitlines()
        imported = {line.rsplit("|", 1)[1].strip() for line in log if line.startswith("import ")}
        assert {"scrapy.core.engine", "gensim.models.lsimodel"} <= imported  # the lines are there
        assert "focused/refits" in crawl.result.stderr  # the model was fitted again
        unused = (
            *("aiohttp.", "redis.", "scrapy_redis.", "scipy.stats.", "warcio."),
            *("gensim.similarities.", "gensim.models.word2vec.", "gensim.models.ldamodel."),
            # pydantic's own attempts are logged too, failed: its core is what a real one loads.
            *("smart_open.", "pydantic_core.", "tldextract."),
        )
        assert not [name for name in imported if f"{name}.".startswith(unused)]
        # Turned on, Scrapy's is built in the project's place for it, by crawl and recrawl.
        crawl = run_crawl(tmp_path, arguments, {"REMOTE_CONTROL_ENABLED": "True"})
        assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
        assert listening in crawl.result.stderr, crawl.result.stderr[-3000:]
        result = recrawl(crawl.db, "test", settings={"REMOTE_CONTROL_ENABLED": "True"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert listening in result.stderr, result.stderr[-3000:]


@pytest.mark.parametrize("enabled", [False, True])
def test_cookies_are_sent_back_only_with_cookies_enabled(tmp_path, enabled):
    """Scrapy's cookies middleware is built only with COOKIES_ENABLED (focused.ondemand)."""
    seed = html("Birds", '<p>Birds nest.</p><a href="/nests">bird nests</a>')
    pages = {
        "/": Reply(body=seed, headers={"Set-Cookie": "visitor=1; Path=/"}),
        "/nests": Reply(body=html("Nests", "<p>Birds nest in reeds.</p>")),
    }
    with Site(lambda method, path: pages.get(path, Reply(status=404, body="none"))) as site:
        arguments = {"strategy": "bfs", "query": "birds nests", "seeds": f"{site.url}/"}
        crawl = run_crawl(tmp_path, arguments, {"COOKIES_ENABLED": str(enabled)})
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert "/nests" in site.cookies
    assert site.cookies["/nests"] == ("visitor=1" if enabled else None)
