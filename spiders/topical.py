"""The ``topical`` spider: a focused crawl from seed URLs toward a topic.

Arguments (``-a name=value``; validated in ``focused.arguments``):
    query           words describing the topic (required unless topic_file is given)
    topic_file      a UTF-8 text file describing the topic, added to the query
    seeds           seed URLs apart by commas or blanks (level 0), or
    seeds_file      a file of seed URLs, one or more a line
    strategy        traversal strategy (default ``semantic``, or ``shark`` where the sentence
                    encoder cannot score the links: ``focused.arguments.default_strategy``;
                    a JOBDIR crawl's own when resumed; see ``focused.strategies``)
    allowed_domains comma-separated domains to stay within (default: the crawl may leave them)
    language        the query's language, an ISO 639-1 code (default: told from the query's
                    letters, or unknown; see ``focused.languages``)
    crawl_id        the id pages are stored under (default: new, or the JOBDIR crawl's)
    render          never (default), always, or auto: render pages in headless Chromium
                    (see ``focused.render``)
plus the chosen strategy's own parameters.

The spider only extracts; scoring happens in ``focused.middlewares.RelevanceMiddleware``.
Seeds and links are canonical URLs (``focused.canonical``); a page is stored under its
``<link rel="canonical">`` when that stays on its site, host and port (``focused.dedup``
decides duplicates).
A page's own robots directives (``focused.robotsmeta``, ``ROBOTS_META_OBEY``): ``nofollow``,
its links are not followed; ``noindex``, it is stored under the URL it was fetched at, without
its text.
Skipped links and responses are counted as ``focused/skipped/<reason>``.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import scrapy
from scrapy import signals
from scrapy.downloadermiddlewares import retry, robotstxt
from scrapy.exceptions import CloseSpider
from scrapy.utils.url import url_is_from_any_domain
from w3lib.url import safe_url_string

from focused.arguments import CHECKED_ARGUMENTS, CrawlConfig, parse_arguments
from focused.canonical import canonicalize, drop_params_setting
from focused.downloader import NotSent
from focused.engine import wake_engine
from focused.errors import one_line
from focused.extract import Link, extract_page
from focused.fetchsettings import given_fetch_settings
from focused.hygiene import ErrorsSaid, error_message, page_skip_reason, skip_reason
from focused.items import PageItem, requested_url
from focused.jobchecks import (
    check_feeds,
    check_store,
    jobdir_holds,
    lock_crawl,
    lock_jobdir,
    remember_job,
    starts_unlocked,
    take_back_shared_budget,
)
from focused.jobdir import jobdir_writes
from focused.languages import declared_languages, page_language, query_language
from focused.logformatter import SettingsWithoutSecrets, add_log_filter
from focused.refresh import first_visit, validators
from focused.render import check_browser, enable_rendering
from focused.resume import request_finished
from focused.robots import LINKED_URL
from focused.robotsmeta import NOFOLLOW, NOINDEX, obeyed_token, page_robots, stored_robots
from focused.setting_names import unknown_settings_note
from focused.settingchecks import (
    allow_status_codes_as_numbers,
    check_feed_placeholders,
    dns_timeout_note,
)
from focused.stopping import NO_SEED_FETCHED
from focused.strategies import STRATEGIES

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

    from focused.distributed import SharedCrawl
    from focused.relevance import RelevanceModel

logger = logging.getLogger(__name__)

OFFSITE_MIDDLEWARE = "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware"


class TopicalSpider(scrapy.Spider):
    name = "topical"
    # It runs the project's components, and this command runs it (focused.components).
    focused_command: ClassVar[str] = "scrapy crawl topical -a query=WORDS -a seeds=URL"

    @classmethod
    def check_arguments(cls, kwargs: dict[str, Any], settings: Any) -> CrawlConfig:
        """Validate arguments before anything starts (used by the ``crawl`` command)."""
        config = parse_arguments(kwargs, settings)
        try:
            spider = partial(cls, config)  # made only where a check needs its attributes
            check_feed_placeholders(settings, spider)
            if config.render != "never":
                check_browser(settings)
            # Before the store check, which makes a new SQLite store: a crawl refused leaves
            # none.
            check_feeds(settings, config.crawl_id, spider)
            check_store(settings, config)
            # After the store check: its folder exists then. A run going on from its JOBDIR
            # can take no other id there (the JOBDIR's is the crawl's): another JOBDIR is the
            # way to a crawl of its own.
            resumed = jobdir_holds(settings, config.crawl_id)
            then = "or use another JOBDIR" if resumed else "or give another crawl_id"
            lock_crawl(settings, config.crawl_id, then=then)
            lock_jobdir(settings)  # last: a crawl refused for anything else leaves it free
        except BaseException:  # a refusal, or Ctrl-C as the store or a lock is waited for
            # Left, the page budget a shared crawl's process recorded as it read its arguments
            # refused, for FOCUSED_WORKER_TIMEOUT, a process with another when none ran.
            take_back_shared_budget(config)
            raise
        return config

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> TopicalSpider:
        # Read by the crawl command's check (check_arguments), else (a crawl started from a
        # script, scrapy runspider) here. Only a CrawlConfig is the check's: a -a _checked=x of
        # runspider was taken for one (a traceback), where a `_` argument is left out as
        # Scrapyd's _job is.
        checked = kwargs.pop(CHECKED_ARGUMENTS, None)
        if isinstance(checked, CrawlConfig):
            config = checked
        else:
            config = parse_arguments(kwargs, crawler.settings)
        try:
            return cls._made(crawler, config)
        except BaseException:  # Ctrl-C too, as the relevance model is built
            # As check_arguments does: a start refused here left the page budget a shared
            # crawl's process recorded as it read its arguments, which refused another budget
            # for FOCUSED_WORKER_TIMEOUT when no process ran.
            take_back_shared_budget(config)
            raise

    @classmethod
    def _made(cls, crawler: Crawler, config: CrawlConfig) -> TopicalSpider:
        """The spider of a crawl asked for ``config``, made for ``crawler``."""
        add_log_filter("scrapy.crawler", SettingsWithoutSecrets)  # before Scrapy logs them
        for failures_logger in (retry.__name__, robotstxt.__name__):
            add_log_filter(failures_logger, ErrorsSaid)
        allow_status_codes_as_numbers(crawler.settings)
        for config_note in (config.strategy_note, config.jobdir_note):
            if config_note:
                logger.warning(config_note)
        for note in (dns_timeout_note(crawler.settings), unknown_settings_note(crawler.settings)):
            if note:
                logger.warning(note)
        # The settings are not frozen yet: the strategy is the scheduler's priority queue.
        crawler.settings.set("SCHEDULER_PRIORITY_QUEUE", STRATEGIES[config.strategy], "spider")
        if config.render != "never":
            enable_rendering(crawler)
        if not config.allowed_domains:
            # Nothing to stay within: Scrapy's offsite filter would only parse the URL of every
            # link queued (its request_scheduled receiver), most of them never fetched. Set in
            # the chain alone: the whole setting at this priority is ignored once -s
            # DOWNLOADER_MIDDLEWARES gives it.
            crawler.settings["DOWNLOADER_MIDDLEWARES"].set(OFFSITE_MIDDLEWARE, None, "spider")
        spider = super().from_crawler(crawler, config=config)
        spider.relevance = _relevance_model(crawler, config)
        if crawler.settings.get("FOCUSED_FRONTIER"):
            from focused.distributed import SharedCrawl

            # The frontier and the seen set of the crawl live in Redis, shared by its processes.
            # Its order was recorded there as the arguments were read: lost from now on (Redis
            # restarted without its data while this process starts), it stops at its first tick.
            spider.shared = SharedCrawl(
                crawler, crawler.settings["FOCUSED_FRONTIER"], config.crawl_id, order_recorded=True
            )
            crawler.settings.set(
                "DUPEFILTER_CLASS", "focused.distributed.RedisDupeFilter", "spider"
            )
        # Before remember_job makes a new JOBDIR the crawl's (read by StoragePipeline's start).
        spider.starts_unlocked = starts_unlocked(crawler.settings, config.crawl_id)
        remember_job(crawler.settings, config, spider.started_at)
        # A seed whose redirect is dropped before it is sent (back to a URL already requested,
        # or outside allowed_domains) reaches no errback: said here, for the seeds' error line.
        crawler.signals.connect(spider.request_dropped, signal=signals.request_dropped)
        crawler.signals.connect(spider.idle, signal=signals.spider_idle)
        if config.allowed_domains:
            crawler.signals.connect(spider.request_scheduled, signal=signals.request_scheduled)
        return spider

    def __init__(self, config: CrawlConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config = config
        self.crawl_id = config.crawl_id
        self.strategy = config.strategy
        self.strategy_params = config.params
        self.render = config.render  # focused.render.RenderMiddleware reads it
        if config.allowed_domains:
            self.allowed_domains = list(config.allowed_domains)
        self.state: dict[str, Any] = {}  # replaced by the saved state when resuming a JOBDIR
        self.started_at = datetime.now(UTC).isoformat()
        self.relevance: RelevanceModel  # one model per crawl, built in from_crawler
        self.shared: SharedCrawl | None = None  # the crawl's Redis state when FOCUSED_FRONTIER
        self.failed_seeds: dict[str, str] = {}  # URL -> why, for the seeds this run could not get
        self.seeds_queued = False  # every seed is in the scheduler (FocusedScheduler waits)

    def crawl_record(self) -> dict[str, Any]:
        config = self.config
        return {
            "crawl_id": config.crawl_id,
            "query": config.query,
            "topic_file": config.topic_file,
            "strategy": config.strategy,
            "params": config.params,
            "seeds": list(config.seeds),
            "started_at": self.started_at,
            # for its recrawl
            "allowed_domains": list(config.allowed_domains),
            "render": config.render,
            "fetch_settings": given_fetch_settings(self.settings),
        }

    @cached_property
    def drop_params(self) -> tuple[str, ...]:
        """``CANONICAL_DROP_PARAMS``, read once: every page and link is canonicalized with it."""
        return drop_params_setting(self.settings)

    @cached_property
    def meta_robots_token(self) -> str | None:
        """``ROBOTS_META_OBEY``'s token (``obeyed_token``), read once."""
        return obeyed_token(self.settings)

    async def start(self) -> AsyncIterator[scrapy.Request]:
        # The engine queues each seed before it asks for the next, and may hand out requests in
        # between: the scheduler holds them all until the last seed is queued (and the engine is
        # woken here), so that the strategy orders the seeds with the links found on them.
        try:
            for seed in self.config.seeds:
                url = canonicalize(seed, self.drop_params)
                meta: dict[str, Any] = {"depth": 0}
                as_given = safe_url_string(seed.strip()).partition("#")[0]
                if as_given != url:  # robots.txt is checked on it too (focused.robots)
                    meta[LINKED_URL] = as_given
                yield scrapy.Request(url, meta=meta, errback=self.skipped)
        finally:
            self.seeds_queued = True
            wake_engine(self.crawler)

    def parse(self, response: Response) -> Iterator[Any]:
        stats = self.crawler.stats
        unusable = page_skip_reason(response)
        if unusable is not None:
            stats.inc_value(f"focused/skipped/{unusable}")
            if response.meta.get("depth") == 0:
                self.failed_seeds[_requested_url(response.request)] = NOT_A_PAGE[unusable]
            return
        if response.meta.get("depth") == 0:
            # A seed whose redirect the scheduler turned away as a duplicate, as it took the
            # place of the queued link to the same page (request_dropped): fetched after all.
            self.failed_seeds.pop(_requested_url(response.request), None)
        page = extract_page(
            response,
            self.settings.getint("LINK_CONTEXT_CHARS"),
            self.drop_params,
            self.settings.getint("URLLENGTH_LIMIT"),
            self.settings.getint("MAX_LINKS_PER_PAGE"),
        )
        for reason, count in page.skipped.items():
            stats.inc_value(f"focused/skipped/{reason}", count)
        if page.cut_short:
            stats.inc_value("focused/cut_short_pages")
            logger.warning(
                "%s is nested deeper than the HTML parser goes: its text and links after that "
                "point are lost (cut short)",
                response.url,
            )
        robots = page_robots(response, self.meta_robots_token)
        noindex = NOINDEX in robots
        meta = response.meta
        fetched_at = datetime.now(UTC).isoformat()
        fetched_url = canonicalize(response.url, self.drop_params)
        # A page that asks not to be indexed does not stand for the page it names.
        url = (not noindex and page.canonical) or fetched_url
        # Another URL than the one fetched only after a redirect, Scrapy's or the browser's.
        started = _requested_url(response.request)
        requested = (
            fetched_url if started == response.url else canonicalize(started, self.drop_params)
        )
        # A noindex page keeps its text until stored, for its score (it orders its children).
        yield PageItem(
            crawl_id=self.crawl_id,
            url=url,
            title=page.title,
            text=page.text,
            level=meta.get("depth", 0),
            parent_url=meta.get("parent_url"),
            # Where the page is stored under another URL than the one its link (or seed)
            # named: a redirect's target, or its rel=canonical.
            requested_url=requested_url(requested, url),
            anchor=meta.get("anchor"),
            link_relevance=meta.get("link_relevance"),
            strategy=self.strategy,
            fetched_at=fetched_at,
            status=response.status,
            language=page_language(declared_languages(response), page.text),
            robots=stored_robots(robots),
            # Hashed as stored, without its text: a recrawl that finds the page indexable again
            # sees a change and stores its text (focused.refresh).
            **first_visit(page.title, None if noindex else page.text, fetched_at),
            # What a recrawl sends back to fetch the page only if it changed: the validators
            # of the URL fetched, none for a page stored under another (its rel=canonical),
            # which a recrawl requests.
            **(validators(response) if url == fetched_url else {}),
        )
        if NOFOLLOW in robots:
            stats.inc_value("focused/skipped/nofollow", len(page.links))
            return
        for link in page.links:
            yield _link_request(link, self.skipped)

    def skipped(self, failure: Failure) -> None:
        """A request that came to nothing (HTTP error, too large, timeout, redirect loop...)."""
        if failure.check(NotSent):
            return  # the crawl stopped: in a frontier kept, the crawl that goes on fetches it
        reason = skip_reason(failure)
        self.crawler.stats.inc_value(f"focused/skipped/{reason}")
        if failure.request.meta.get("depth") == 0:  # a seed, or where a seed redirected
            self.failed_seeds[failure.request.url] = (
                reason if reason.startswith("http_") else error_message(failure.value)
            )
        self.crawler.signals.send_catch_log(request_finished, request=failure.request)

    def request_dropped(self, request: scrapy.Request) -> None:
        if request.meta.get("depth") == 0 and "redirect_urls" in request.meta:
            self.failed_seeds[_requested_url(request)] = (
                f"redirected to {request.url}, a URL already requested (a redirect loop)"
            )

    def request_scheduled(self, request: scrapy.Request) -> None:
        meta = request.meta
        if (
            meta.get("depth") == 0
            and "redirect_urls" in meta
            and not url_is_from_any_domain(request.url, self.allowed_domains)
        ):
            self.failed_seeds[_requested_url(request)] = (
                f"redirected to {request.url}, outside allowed_domains"
            )

    def idle(self) -> None:
        """A crawl with nothing left to fetch that fetched none of its seeds closes with its own
        reason, NO_SEED_FETCHED, where Scrapy would close it as ``finished``: a mistyped host or
        port must not pass for a topic with no pages (the crawl record, the exit status 1)."""
        # Pages scored, not items: STORE_MIN_RELEVANCE drops the items of pages fetched.
        if self.failed_seeds and not self.crawler.stats.get_value("focused/scored_pages"):
            raise CloseSpider(NO_SEED_FETCHED)

    def closed(self, reason: str) -> None:
        """The seeds that could not be fetched, named in one line: an error when none could be,
        else a warning (the mistyped seed showed only in a focused/skipped stat)."""
        if not self.failed_seeds:
            return
        named = "; ".join(f"{url} ({why})" for url, why in self.failed_seeds.items())
        if reason == NO_SEED_FETCHED:
            self.logger.error("No seed could be fetched, so nothing was crawled: %s", named)
        else:
            self.logger.warning("Seeds that could not be fetched: %s", named)


# Why a seed's response is no page, for the seeds' error line (focused.hygiene.page_skip_reason).
NOT_A_PAGE = {"not_html": "not an HTML page", "binary_body": "a binary body, not text"}


def _requested_url(request: scrapy.Request) -> str:
    """The URL a request started from, before any redirect: the link's, or the seed's."""
    return request.meta.get("redirect_urls", [request.url])[0]


def _relevance_model(crawler: Crawler, config: CrawlConfig) -> RelevanceModel:
    """One model per crawl; a crawl resumed from JOBDIR gets back the model it had learnt."""
    from focused.relevance import JOBDIR_MODEL_DIR, RelevanceModel  # gensim: not at import time

    language = query_language(config.topic, config.language)
    jobdir = crawler.settings.get("JOBDIR")
    if not jobdir:
        return RelevanceModel.from_settings(config.topic, crawler.settings, language)
    saved = Path(jobdir, JOBDIR_MODEL_DIR)
    model = None
    if saved.exists():
        try:
            model = RelevanceModel.load(saved, crawler.settings)
        except Exception as exc:  # gensim's files are pickles: damaged, they raise anything
            logger.warning(
                "%s cannot be read (%s): the relevance model learns again from the stored pages",
                saved,
                one_line(exc),
            )
    if model is None:
        model = RelevanceModel.from_settings(config.topic, crawler.settings, language)
    crawler.signals.connect(
        lambda: _save_model(crawler, model, saved), signal=signals.spider_closed, weak=False
    )
    return model


def _save_model(crawler: Crawler, model: RelevanceModel, saved: Path) -> None:
    """Save the relevance model at the close, unless the JOBDIR failed during the crawl (it is
    then left as ``kill -9`` would leave it); a model that cannot be written is one error line
    (``focused.jobdir``), the model saved before kept whole."""
    jobdir_writes(crawler).save_at_pause("the relevance model", saved, lambda: model.save(saved))


def _link_request(link: Link, errback: Callable[[Failure], Any]) -> scrapy.Request:
    """The request for a link. A Request escapes its URL (w3lib's safe_url_string, about 12 µs,
    60 links a page) unless its meta says ``verbatim_url``; a link's URL that escaping leaves
    as it is (``Link.escaped``, known once per URL) is taken verbatim, and the key is removed
    so that the request is the one it would have been."""
    meta = {"anchor": link.anchor, "link_context": link.context}
    if link.linked is not None:
        meta[LINKED_URL] = link.linked
    if link.escaped:
        meta["verbatim_url"] = True
    request = scrapy.Request(link.url, meta=meta, errback=errback)
    request.meta.pop("verbatim_url", None)
    return request
