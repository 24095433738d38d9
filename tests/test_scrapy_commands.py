"""Scrapy's own commands in the project: a spider that is not the project's runs Scrapy's
components (focused.components.OtherSpiders), and a command that would replace the topical
spider's start is refused.

The commands run as the real CLI in a subprocess, in a folder of their own holding the
project's scrapy.cfg (as a user runs them from the repository), against a loopback site.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from scrapy import Spider
from scrapy.commands.bench import _BenchSpider
from scrapy.crawler import Crawler
from scrapy.settings import Settings
from scrapy.utils.conf import build_component_list
from scrapy.utils.spider import DefaultSpider

from focused.components import COMPONENT_CHAINS, SCRAPYS_SETTINGS, OtherSpiders
from focused.refresh import RecrawlSpider
from spiders.topical import TopicalSpider
from tests.conftest import REPO, crawl_env, scrapy_command
from tests.sites import Reply, Site, html

PAGE = html("Albatross", '<p>The albatross nests.</p><a href="/heron">heron</a>')
DATA = json.dumps({"birds": ["albatross", "heron"]})
MY_SPIDER = """
    import scrapy


    class MySpider(scrapy.Spider):
        name = "my"
        start_urls = [{url!r}]

        def parse(self, response):
            yield {{"title": response.css("title::text").get()}}
"""
TIMEOUT = 60
# A class (or function) of the project's named in a setting: module.path.Name.
PROJECT_CLASS = re.compile(r'"(focused|pipelines|schedulers|spiders)(\.\w+)+\.[A-Z]\w*"')


def respond(method: str, path: str) -> Reply:
    if path == "/data.json":  # no HTML: the crawl stops its download at its headers
        return Reply(body=DATA, content_type="application/json")
    return Reply(body=PAGE) if path == "/" else Reply(status=404, body="none")


@pytest.fixture
def site():
    with Site(respond) as site:
        yield site


@pytest.fixture
def project(tmp_path) -> Path:
    """A folder with the project's scrapy.cfg, where the commands run."""
    (tmp_path / "project").mkdir()
    shutil.copy(REPO / "scrapy.cfg", tmp_path / "project")
    return tmp_path / "project"


def scrapy(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        scrapy_command(*args),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**crawl_env(), **(env or {})},
    )


def left_behind(project: Path, *made: str) -> list[str]:
    """The files the command left in its folder, but scrapy.cfg and those it was to make."""
    return sorted(path.name for path in project.iterdir() if path.name not in {"scrapy.cfg", *made})


def test_fetch_prints_the_page_as_scrapy_does_and_leaves_no_store(project, site):
    """Each of these ran the project's components, built for the topical spider: 4-5
    tracebacks (its DefaultSpider has no state, no crawl_record), nothing printed, exit 1, and
    an empty store in the working directory."""
    result = scrapy(project, "fetch", "--nolog", f"{site.url}/")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == f"{PAGE}\n"  # Scrapy ends the body with a line break
    # Downloaded whole, as Scrapy does, where the crawl ends a page that is no HTML at its headers.
    result = scrapy(project, "fetch", "--nolog", f"{site.url}/data.json")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == f"{DATA}\n"
    assert left_behind(project) == []


def test_shell_and_view_see_the_page(tmp_path, project, site):
    result = scrapy(project, "shell", f"{site.url}/", "-c", "response.status")
    assert (result.returncode, result.stdout) == (0, "200\n"), result.stderr[-3000:]
    # The browser scrapy view opens: one that prints the file it is given.
    browser = tmp_path / "browser"
    browser.write_text('#!/bin/sh\ncat "${1#file://}"\n')
    browser.chmod(0o755)
    result = scrapy(project, "view", "--nolog", f"{site.url}/", env={"BROWSER": str(browser)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "The albatross nests." in result.stdout
    assert left_behind(project) == []


def test_a_spider_of_the_user_s_runs_with_scrapy_s_components(project, site):
    """``scrapy runspider FILE`` and ``scrapy crawl`` of a spider the user added to the
    project's spider modules write its items with Scrapy's feed exports, and store nothing."""
    (project / "my.py").write_text(textwrap.dedent(MY_SPIDER.format(url=f"{site.url}/")))
    result = scrapy(project, "runspider", "my.py", "-O", "out.json")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert json.loads((project / "out.json").read_text()) == [{"title": "Albatross"}]

    (project / "myspiders").mkdir()
    (project / "myspiders" / "__init__.py").touch()
    (project / "my.py").rename(project / "myspiders" / "my.py")
    modules = "SPIDER_MODULES=spiders,myspiders"
    result = scrapy(project, "crawl", "my", "-s", modules, "-O", "crawled.json")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert json.loads((project / "crawled.json").read_text()) == [{"title": "Albatross"}]
    assert left_behind(project, "out.json", "crawled.json", "myspiders", "__pycache__") == []


@pytest.mark.skipif(
    subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0
    if shutil.which("unshare")
    else True,
    reason="scrapy bench serves on port 8998: run in a network namespace of its own",
)
def test_bench_ends_at_its_time_limit(project):
    """Without a traceback, and no store left behind: Scrapy's CloseSpider ends it."""
    bench = " ".join(scrapy_command("bench", "-s", "CLOSESPIDER_TIMEOUT=2"))
    result = subprocess.run(
        ["unshare", "-rn", "sh", "-c", f"ip link set lo up && {bench}"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=crawl_env(),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "'finish_reason': 'closespider_timeout'" in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert left_behind(project) == []


@pytest.mark.parametrize(
    ("command", "spider", "instead"),
    [
        ("parse", "topical", "scrapy crawl topical"),
        ("parse", "recrawl", "scrapy recrawl"),
        ("fetch", "topical", "scrapy crawl topical"),
        ("shell", "topical", "scrapy crawl topical"),
    ],
)
def test_a_command_that_cannot_run_a_spider_of_the_project_s_is_refused(
    project, site, command, spider, instead
):
    """scrapy parse replaces the spider's start: the topical crawl waited for its seeds
    forever (FocusedScheduler), and recorded an interrupted crawl once killed. Its store is
    not made."""
    args = ["-a", "query=birds", "-a", f"seeds={site.url}/"] if command == "parse" else []
    result = scrapy(project, command, f"--spider={spider}", *args, f"{site.url}/")
    assert result.returncode == 2, result.stderr[-3000:]
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: scrapy {command} ") and instead in line, line
    # Scrapy's parse has no default spider to run without --spider.
    assert ("leave out --spider" in line) == (command != "parse"), line
    assert left_behind(project) == []


def project_crawler(spidercls: type[Spider], given: dict | None = None) -> Crawler:
    """A crawler of ``spidercls`` with the project's settings, ``given`` as with ``-s``, the
    add-on applied."""
    settings = Settings()
    settings.setmodule("focused.settings", priority="project")
    settings.setdict(given or {}, priority="cmdline")
    crawler = Crawler(spidercls, settings)
    OtherSpiders.from_crawler(crawler).update_settings(crawler.settings)
    return crawler


def components(settings: Settings) -> dict[str, list[str]]:
    chains = {name: build_component_list(settings.getwithbase(name)) for name in COMPONENT_CHAINS}
    return {**chains, **{name: settings[name] for name in SCRAPYS_SETTINGS}}


@pytest.mark.parametrize("spidercls", [DefaultSpider, _BenchSpider])
def test_a_spider_not_the_project_s_gets_scrapy_s_components_and_those_given(spidercls):
    scrapys = Settings()
    assert components(project_crawler(spidercls).settings) == components(scrapys)
    # Given with -s, or by the spider's custom_settings: kept, as in any Scrapy project.
    pipeline = {"tests.user_components.CountingPipeline": 900}
    dupefilter = "scrapy.dupefilters.BaseDupeFilter"
    given = {"ITEM_PIPELINES": pipeline, "DUPEFILTER_CLASS": dupefilter}
    crawler = project_crawler(spidercls, given)
    assert crawler.settings.getdict("ITEM_PIPELINES") == pipeline
    assert crawler.settings["DUPEFILTER_CLASS"] == dupefilter

    queue = "scrapy.pqueues.DownloaderAwarePriorityQueue"

    class Custom(spidercls):
        custom_settings = {"SCHEDULER_PRIORITY_QUEUE": queue}

    assert project_crawler(Custom).settings["SCHEDULER_PRIORITY_QUEUE"] == queue


@pytest.mark.parametrize("spidercls", [TopicalSpider, RecrawlSpider])
def test_the_project_s_spiders_keep_their_components(spidercls):
    settings = Settings()
    settings.setmodule("focused.settings", priority="project")
    crawler = Crawler(spidercls, settings)
    expected = components(crawler.settings)
    OtherSpiders.from_crawler(crawler).update_settings(crawler.settings)
    assert components(crawler.settings) == expected


def test_every_class_of_the_project_s_settings_is_scrapy_s_again():
    """A setting the project gives a class of its own that the add-on leaves (a new one in
    focused/settings.py) would run it for a spider that is not the project's."""
    settings = Settings()
    settings.setmodule("focused.settings", priority="project")
    Crawler(DefaultSpider, settings)
    values = json.dumps(settings.copy_to_dict(), default=str)
    own = {
        name
        for name, value in settings.copy_to_dict().items()
        if PROJECT_CLASS.search(json.dumps(value, default=str))
    }
    assert "FOCUSED_DB" not in own and "SCHEDULER" in own  # focused.sqlite3 is no class
    assert own - {"ADDONS", *COMPONENT_CHAINS, *SCRAPYS_SETTINGS} == set(), values
