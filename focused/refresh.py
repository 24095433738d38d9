"""Refresh: fetch the stored pages of a crawl again and record which of them changed.

The refresh policies of the sources (Cho & Garcia-Molina, "Synchronizing a database to improve
freshness", SIGMOD 2000): ``uniform`` revisits every page at the same rate, ``proportional``
revisits a page more often the more often it was seen to change (see ``select_pages``).

Change detection. A page's ``content_hash`` is the SHA-1 of its extracted title and visible text
(``focused.extract``: no markup, scripts, styles or navigation), Unicode NFC, whitespace runs
collapsed. So an ad served by a script, a new session token in a link or a re-indented
template is no change, while any edit of the words a reader sees is, a visible date included.

Each page record carries (``focused.storage``):
    content_hash  the hash of the content last fetched
    last_changed  when a fetch first saw the current content (the crawl's fetch at first)
    changes       how many revisits found a new hash (0 after the crawl)
    visits        fetches of the page, the crawl's included (1 after the crawl)
    etag, last_modified
                  the ETag and Last-Modified header values, as sent, of the response whose
                  content is stored when it answered the page's own URL (None when it sent
                  none, or answered another: a redirect's target, or the URL of a page the
                  crawl stored under its rel=canonical)
A page stored before these fields existed gets its first hash on its first revisit, with no
change counted (there is nothing to compare with) and ``last_changed`` left unknown (None).

Conditional requests. A page stored with validators is requested with them, as
``If-None-Match`` and ``If-Modified-Since`` (RFC 9110 13.1), so that a server that keeps them
answers ``304 Not Modified`` for an unchanged page instead of sending it again. A 304 is
recorded as a visit without a change: ``fetched_at`` and ``visits`` + 1; the content, its hash,
its ``status`` (the content's, as stored: 200 mostly; the 304 is counted in
``focused/refresh/not_modified``) and its ``robots`` stay. Its validators are freshened: an
ETag or Last-Modified the 304 sends replaces the stored one (RFC 9111 4.3.4; a 304 carries the
validators a 200 would), one it does not send stays. A 304 whose ``X-Robots-Tag`` asks for
other directives than the stored ``robots`` (``ROBOTS_META_OBEY``) is not taken as the answer:
``robots`` combines the page's meta tags, which a 304 says nothing of, with that header, so a
page now noindex by header, or no longer, can be told only from the page; it is requested
again in full, without validators (``focused/refresh/refetched``), and recorded from that
fetch. A 304 without the header (RFC 9110 15.4.5 asks servers to send little more than the
validators) leaves ``robots`` as stored, until a fetch in full. A server that ignores them
answers 200 and the page is compared by its hash, as without them. They are not sent
- with ``--full`` (``conditional=False``): a 304 is trusted without a look at the page, so a
  server whose validators do not follow its content (a Last-Modified of the template file on
  pages built from a database, an ETag a cache in front keeps for an old copy) would hide
  every change for as long as they stay; ``--full`` fetches every page and stores the
  validators the server now gives;
- when pages are rendered (``--render always|auto``): the validators are the HTML's, and say
  nothing of what its scripts fetch and write into the text;
- to a redirect's target (``focused.hygiene``): they are the stored page's, not the target's.
A 304 to a request that carried none (a broken server) says nothing of the page: it is skipped
as ``http_304``.

What a recrawl does:
- it fetches only stored pages (duplicates, stored with ``duplicate_of``, are not fetched): a
  refresh keeps a collection fresh, it does not grow it, so new outlinks are not followed (a
  JOBDIR crawl resumed with the same ``crawl_id`` grows it);
- a changed page gets its new title, text and hash, ``changes`` + 1 and ``last_changed``; an
  unchanged one only its ``fetched_at``, ``status`` and ``visits``; either, fetched in full,
  the validators of its response (none if it sent none);
- a page whose robots meta or ``X-Robots-Tag`` now says ``noindex`` (``ROBOTS_META_OBEY``) has
  its stored text removed (one change; its hash is that of its title alone, as the crawl stores
  such a page), and gets it back, as another change, once it no longer says so; every revisit
  records the page's ``robots``;
- a page now gone (404, 410) keeps its last text and hash and records the status: nothing is
  deleted. A page that comes back with other content counts one change. Its validators are
  cleared, so that its next fetch is a full one (a 304 would leave the gone status in place);
- a page that now redirects is recorded with what the redirect leads to, under its own URL, as
  a reader of that URL gets it (another stored page included: the target is fetched for each),
  without validators (the target's are no validators of the page); a redirect outside the
  crawl's ``allowed_domains`` (kept in its crawl record) is not followed, as the crawl would
  not have followed it: the page is skipped as ``offsite`` (Scrapy's offsite filter, the
  crawl's test, applied as the request is sent: ``OffsiteMiddleware``). A crawl made without
  ``allowed_domains``, or recorded before the field, may be left for any host, as its crawl
  could;
- it fetches as the crawl did: the crawl record keeps the crawl's ``-a render`` and the
  ``-s`` settings of how to fetch it was given (``focused.fetchsettings``), which the recrawl
  command gives again unless its own command line says otherwise; no password is kept:
  ``HTTPAUTH_USER``, ``HTTPAUTH_PASS`` and ``HTTPAUTH_DOMAIN`` are given again, or each page
  behind the password is skipped as ``http_401`` (the closing lines say so);
- other failures (timeouts, 5xx, robots.txt now disallowing the page, a redirect loop or off
  the crawl's domains) leave the record as it was but for ``tried_at``, the time of the try,
  and are counted as ``focused/skipped/<reason>``, as is a stored url that is no http(s) URL
  (``bad_url``: a ``file:`` one is not read); the policies order by the later of
  ``fetched_at`` and ``tried_at``, so that pages failing run after run do not take every
  run's budget;
- relevance scores stay the crawl's, unless ``--model DIR`` names the relevance model a JOBDIR
  crawl saved (``JOBDIR/relevance``): a changed page is then rescored with it (unchanged pages
  keep the score they got during the crawl). The crawl record's ``relevant`` and
  ``harvest_rate`` stay the crawl's measure (``scrapy report``'s totals); the verdicts the
  rescoring moved are counted in the record as each batch is stored
  (``Store.update_pages``: ``rescored_now_relevant``, ``rescored_no_longer_relevant``), and
  a line after the summary says how many it moved.
While it runs, the crawl's record says so (``recrawl_seen_at``, a heartbeat refreshed every
FOCUSED_HEARTBEAT_INTERVAL seconds by ``RefreshPipeline``, set and cleared by the recrawl
command; the crawl's own status and heartbeat stay): another recrawl of the crawl, or a run of
it, is refused meanwhile, on MongoDB too, where no lock file tells. A recrawl killed outright
leaves the mark, which lapses after 3 of its intervals (into SQLite, the lock tells at once).
It runs with the project's politeness settings (robots.txt, per-domain concurrency, delays,
AutoThrottle), those the crawl was given, and its store. Pages are rendered as the crawl
rendered them, or as ``--render`` says: a crawl made with ``-a render=always`` or ``auto`` and
recrawled plainly would have the text its scripts wrote missing from every page, each counted
as a change. Stats: ``focused/refresh/changed``, ``unchanged`` (of which ``not_modified``:
304s), ``gone``, ``rescored`` (of which ``now_relevant`` and ``no_longer_relevant``: the
verdicts that moved), ``refetched`` (304s asked again in full). The closing summary
counts every planned page: the pages in none of the first three are ``skipped`` (left as they
were).
"""

from __future__ import annotations

import hashlib
import logging
import unicodedata
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

import scrapy
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware as ScrapyOffsite

from focused.canonical import drop_params_setting
from focused.components import replace_components
from focused.downloader import NotSent
from focused.errors import counted, setting_options
from focused.extract import extract_page
from focused.hygiene import CONDITIONAL_HEADERS, page_skip_reason, skip_reason
from focused.jobchecks import holds_crawl_lock
from focused.languages import declared_languages, page_language
from focused.render import enable_rendering
from focused.report import is_live
from focused.robotsmeta import (
    NOINDEX,
    header_directives,
    honoured,
    obeyed_token,
    page_robots,
    stored_robots,
)
from focused.stopping import close_spider_now
from focused.storage import GONE, open_store, stored_time
from pipelines.relevance import score_fields
from pipelines.storage import StoragePipeline

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure

    from focused.relevance import RelevanceModel
    from focused.storage import Store

logger = logging.getLogger(__name__)

POLICIES = ("uniform", "proportional")
# The close reason of a recrawl whose mark of the crawl another recrawl took over (RefreshPipeline).
RECRAWL_TAKEN_OVER = "recrawl_taken_over"
NOT_MODIFIED = 304
UNAUTHORIZED = 401  # a page asking for the password the crawl was given (HTTPAUTH_*)
IF_NONE_MATCH, IF_MODIFIED_SINCE = CONDITIONAL_HEADERS  # which a redirect does not pass on
# The validators a page record keeps: field -> (the response header it is read from, the
# request header a recrawl sends it back in; RFC 9110 13.1.2 and 13.1.3).
VALIDATORS = {
    "etag": (b"ETag", IF_NONE_MATCH),
    "last_modified": (b"Last-Modified", IF_MODIFIED_SINCE),
}
# What a fetch of a stored page records (focused/refresh/<outcome>).
OUTCOMES = ("changed", "unchanged", "gone")
# What --model did to them (focused/refresh/<name>).
RESCORED = ("rescored", "now_relevant", "no_longer_relevant")
# What a recrawl needs to know of a stored page.
PLAN_FIELDS = (
    "crawl_id",
    "url",
    "fetched_at",
    "duplicate_of",
    "content_hash",
    "last_changed",
    "changes",
    "visits",
    "tried_at",
    "etag",
    "last_modified",
    "robots",
    "is_relevant",
)


# What str.split() splits on besides the space (all of it is below U+3001).
OTHER_WHITESPACE = tuple(c for c in map(chr, range(0x3001)) if c.isspace() and c != " ")


def content_hash(title: str | None, text: str | None) -> str:
    """SHA-1 (hex) of the title and text, NFC, with whitespace runs collapsed."""
    content = unicodedata.normalize("NFC", f"{title or ''}\n{text or ''}")
    return hashlib.sha1(collapse_whitespace(content).encode("utf-8")).hexdigest()


def collapse_whitespace(content: str) -> str:
    """``" ".join(content.split())``. An extracted page's text already has single spaces and
    line breaks alone (``focused.extract``): then replacing its line breaks is all it takes,
    and the scans that tell so cost less than half of splitting a page into words."""
    flat = content.replace("\n", " ")
    if (
        "  " in flat
        or flat[:1] == " "
        or flat[-1:] == " "
        or any(space in flat for space in OTHER_WHITESPACE)
    ):
        return " ".join(content.split())
    return flat


def first_visit(title: str | None, text: str | None, fetched_at: str) -> dict[str, Any]:
    """The refresh fields of a page fetched by a crawl."""
    return {
        "content_hash": content_hash(title, text),
        "last_changed": fetched_at,
        "changes": 0,
        "visits": 1,
    }


def validators(response: Response) -> dict[str, str | None]:
    """The response's ETag and Last-Modified, as a page record keeps them (None: not sent).
    Kept as sent, bytes for characters (latin-1), to be sent back as they came: a server
    compares an If-None-Match with its ETag as strings, and RFC 9110 asks a client to send
    the Last-Modified it got as its If-Modified-Since, unparsed."""
    found = {}
    for field, (header, _) in VALIDATORS.items():
        value = response.headers.get(header)
        found[field] = value.decode("latin-1") if value else None
    return found


def conditional_headers(page: dict[str, Any]) -> dict[bytes, bytes]:
    """The request headers that ask for the stored page only if it changed: its validators,
    those a header can carry (a value edited by hand into one with a line break, or a character
    no header byte stands for, is not sent)."""
    headers = {}
    for field, (_, header) in VALIDATORS.items():
        try:
            value = (page[field] or "").encode("latin-1")
        except UnicodeEncodeError:
            continue
        if value and not any(byte in value for byte in b"\r\n\0"):
            headers[header] = value
    return headers


def revisit(
    stored: dict[str, Any], title: str, text: str | None, fetched_at: str, status: int
) -> dict[str, Any]:
    """The fields to update on a stored page fetched again with this content."""
    new_hash = content_hash(title, text)
    old_hash = stored["content_hash"]
    changes = stored["changes"] or 0
    update = {
        **_visit(stored, fetched_at),
        "status": status,
        "content_hash": new_hash,
        "changes": changes,
    }
    if new_hash != old_hash:
        update.update(title=title, text=text)
        if old_hash is not None:  # a page stored before hashes gets one, with no change
            update.update(changes=changes + 1, last_changed=fetched_at)
    return update


def not_modified(
    stored: dict[str, Any], fetched_at: str, fresh: dict[str, str | None]
) -> dict[str, Any]:
    """The fields to update on a stored page the server says is as stored (a 304 to its
    validators): a visit, no change. Its ``status`` stays that of the response its content
    came from (the 304 is no status of the page's content). Its validators are freshened
    (RFC 9111 4.3.4): those the 304 sends (``fresh``, as ``validators`` reads them) replace the
    stored ones, since a 304 carries the validators a 200 would (RFC 9110 15.4.5); those it
    does not send stay."""
    sent = {field: value for field, value in fresh.items() if value is not None}
    return {**_visit(stored, fetched_at), **sent}


def gone(stored: dict[str, Any], fetched_at: str, status: int) -> dict[str, Any]:
    """The fields to update on a stored page that is no longer there. Its validators go: the
    page keeps its last content but records the gone status, which a 304 to them, were the page
    back as it was, would leave in place; its next fetch is a full one."""
    return {**_visit(stored, fetched_at), "status": status, "etag": None, "last_modified": None}


def tried(stored: dict[str, Any]) -> dict[str, Any]:
    """The field to update on a stored page requested in vain: the rest of its record stays."""
    return {
        "crawl_id": stored["crawl_id"],
        "url": stored["url"],
        "tried_at": datetime.now(UTC).isoformat(),
    }


def _visit(stored: dict[str, Any], fetched_at: str) -> dict[str, Any]:
    return {
        "crawl_id": stored["crawl_id"],
        "url": stored["url"],
        "fetched_at": fetched_at,
        "visits": (stored["visits"] or 1) + 1,
    }


# -- which pages to fetch again ----------------------------------------------------------------


def change_rate(page: dict[str, Any]) -> float:
    """The share of visits that found a change, smoothed so that a page seen once is 1/2:
    (changes + 1) / (visits + 1)."""
    return ((page["changes"] or 0) + 1) / ((page["visits"] or 1) + 1)


def priority(page: dict[str, Any], now: datetime) -> float:
    """``proportional``: change rate times the seconds since the last request (at least 1), i.e.
    how many changes the page has probably missed. Under a fixed budget per run, a page's
    revisits then grow in proportion to how often it changes."""
    return change_rate(page) * max(1.0, (now - _requested(page)).total_seconds())


def select_pages(
    pages: Iterable[dict[str, Any]], policy: str, budget: int | None, now: datetime
) -> list[dict[str, Any]]:
    """The pages a recrawl fetches, in order, at most ``budget`` (None: all).

    ``uniform``: least recently fetched first, so that runs with a budget of N go round the
    whole crawl N pages at a time and every page is revisited at the same rate.
    ``proportional``: highest ``priority`` first.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r} is not one of {POLICIES}")
    # A page whose url is unknown (not text: a cell edited by hand) cannot be requested.
    candidates = [page for page in pages if page["url"] and not page["duplicate_of"]]
    if policy == "uniform":
        candidates.sort(key=lambda page: (_requested(page), page["url"]))
    else:
        candidates.sort(key=lambda page: (-priority(page, now), page["url"]))
    return candidates[:budget]


def plan_recrawl(
    store: Store, crawl_id: str, policy: str, budget: int | None, now: datetime | None = None
) -> list[dict[str, Any]]:
    pages = store.pages(crawl_id, fields=PLAN_FIELDS)
    return select_pages(pages, policy, budget, now or datetime.now(UTC))


def _requested(page: dict[str, Any]) -> datetime:
    """When the page was last requested: fetched, or tried in vain (``tried_at``), so that pages
    failing run after run do not take every run's budget; a time unknown (or no time) as long
    ago as can be."""
    times = [stored_time(page[name]) for name in ("fetched_at", "tried_at")]
    return max((time for time in times if time), default=datetime.min.replace(tzinfo=UTC))


# -- the crawl ---------------------------------------------------------------------------------


class RecrawlSpider(scrapy.Spider):
    """Fetches the pages ``scrapy recrawl`` selected; started by that command only."""

    name = "recrawl"
    # It runs its own components (below), and this command runs it (focused.components).
    focused_command: ClassVar[str] = "scrapy recrawl CRAWL_ID"
    handle_httpstatus_list = [*GONE, NOT_MODIFIED]
    # The topical crawl's frontier, scoring and storage components do not apply: the pages are
    # known and in order, and records are updated, not inserted.
    custom_settings = {
        "SCHEDULER": "scrapy.core.scheduler.Scheduler",
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",  # in the policy's order
        # Each stored page is requested once by construction; a page now redirecting to another
        # stored page must reach it, not be dropped as that page's duplicate (so recorded and
        # counted nowhere). A redirect loop is cut by REDIRECT_MAX_TIMES (redirect_loop).
        "DUPEFILTER_CLASS": "scrapy.dupefilters.BaseDupeFilter",
    }
    # In place of the project's (focused.components: beside those given with -s).
    components: ClassVar[dict[str, dict[str, Any]]] = {
        "SPIDER_MIDDLEWARES": {},
        # Scrapy's, which the project turns off for PageBudget: CLOSESPIDER_TIMEOUT and the
        # others end a recrawl too (its page budget is --budget: the command refuses Scrapy's).
        "EXTENSIONS": {
            "scrapy.extensions.closespider.CloseSpider": 0,
            "focused.ondemand.WarcExport": 540,  # only with WARC_DIR
            "focused.ondemand.RemoteControl": 0,  # only with REMOTE_CONTROL_ENABLED
        },
        "ITEM_PIPELINES": {f"{__name__}.RefreshPipeline": 800},
    }

    def __init__(
        self,
        crawl_id: str,
        pages: list[dict[str, Any]],
        policy: str,
        model: RelevanceModel | None = None,
        render: str = "never",
        conditional: bool = True,
        allowed_domains: Iterable[Any] | None = None,
        claim: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.crawl_id = crawl_id
        # The recrawl command's claim of the crawl's record (``Store.claim_recrawl``), which
        # RefreshPipeline's heartbeat refreshes; None: no mark to keep (a test's recrawl).
        self.claim = claim
        # The crawl's (its record's), for Scrapy's offsite filter: a redirect leaves them no
        # more than the crawl's did. A value of no domain (a record edited by hand) is none.
        self.allowed_domains = [name for name in allowed_domains or () if isinstance(name, str)]
        self.pages = pages
        self.policy = policy
        self.model = model  # rescores changed pages when given
        self.render = render  # as the crawl rendered (focused.render.RenderMiddleware reads it)
        # A page's validators are sent back (``conditional_headers``) unless --full, and never
        # for a rendered page: they are the HTML's, and say nothing of the text its scripts
        # fetch and write.
        self.conditional = conditional and render == "never"

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        # Scrapy's offsite filter replaced by ours, in its place (named as its base setting
        # names it, or it stays). Set in the chain one middleware at a time: the whole setting
        # at the spider's priority is ignored once -s DOWNLOADER_MIDDLEWARES gives it, and the
        # swap with it.
        scrapys = f"{ScrapyOffsite.__module__}.{ScrapyOffsite.__name__}"
        order = settings.getdict("DOWNLOADER_MIDDLEWARES_BASE")[scrapys]
        chain = settings["DOWNLOADER_MIDDLEWARES"]
        chain.set(scrapys, None, "spider")
        chain.set(f"{__name__}.{OffsiteMiddleware.__name__}", order, "spider")
        for name, components in cls.components.items():
            replace_components(settings, name, components)

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> RecrawlSpider:
        if kwargs.get("render", "never") != "never":
            enable_rendering(crawler)  # before the settings freeze
        spider = super().from_crawler(crawler, *args, **kwargs)
        # Scrapy's HttpErrorMiddleware reads a spider's handle_httpstatus_list in place of
        # HTTPERROR_ALLOWED_CODES: without them here, a page of an allowed status was skipped.
        # (Numbers: the recrawl command makes them so, focused.settingchecks.) A 304 is the answer
        # to a page's validators, which HttpErrorMiddleware would drop as an error.
        allowed = crawler.settings.getlist("HTTPERROR_ALLOWED_CODES")
        spider.handle_httpstatus_list = [*GONE, NOT_MODIFIED, *allowed]
        return spider

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for page in self.pages:
            request = self._request(page)
            if request is None:
                self.crawler.stats.inc_value("focused/skipped/bad_url")
                yield tried(page)
                continue
            yield request

    @cached_property
    def meta_robots_token(self) -> str | None:
        """``ROBOTS_META_OBEY``'s token (``obeyed_token``), read once, as the crawl reads it."""
        return obeyed_token(self.settings)

    def _request(self, page: dict[str, Any], *, conditional: bool = True) -> scrapy.Request | None:
        """The request of a stored page, with its validators if ``conditional`` and the
        recrawl sends them; None when its url is no http(s) URL. A stored url is
        data (a restored file, a document another program wrote): one that is no URL would end
        the start, the pages after it unfetched, and a file: one read a local file into the
        store. A crawl stores http(s) pages only."""
        headers = conditional_headers(page) if conditional and self.conditional else None
        try:
            request = scrapy.Request(
                page["url"], headers=headers, meta={"stored": page}, errback=self.skipped
            )
            scheme = urlsplit(request.url).scheme
        except ValueError:  # also UnicodeError, from IDNA
            return None
        return request if scheme in ("http", "https") else None

    def parse(self, response: Response) -> Iterator[dict[str, Any]]:
        stored = response.meta["stored"]
        fetched_at = datetime.now(UTC).isoformat()
        stats = self.crawler.stats
        if response.status in GONE:
            stats.inc_value("focused/refresh/gone")
            yield gone(stored, fetched_at, response.status)
            return
        if response.status == NOT_MODIFIED:
            yield from self._not_modified(response, stored, fetched_at)
            return
        unusable = page_skip_reason(response)
        if unusable is not None:
            stats.inc_value(f"focused/skipped/{unusable}")
            yield tried(stored)
            return
        settings = self.settings
        page = extract_page(
            response,
            settings.getint("LINK_CONTEXT_CHARS"),
            drop_params_setting(settings),
            settings.getint("URLLENGTH_LIMIT"),
            settings.getint("MAX_LINKS_PER_PAGE"),
        )
        robots = page_robots(response, self.meta_robots_token)
        # A page now noindex is a change: its stored text is removed (focused.robotsmeta).
        text = None if NOINDEX in robots else page.text
        update = revisit(stored, page.title, text, fetched_at, response.status)
        update["robots"] = stored_robots(robots)
        # Whether or not the content changed: the validators of what is now stored, if they
        # are the page's own, not those of a redirect's target (which, sent to the page once it
        # no longer redirects, could have it answer 304 for the target's content).
        redirected = "redirect_urls" in response.meta
        update.update(dict.fromkeys(VALIDATORS) if redirected else validators(response))
        if "text" in update:
            # Read as the crawl reads it: the new text may be in another language.
            update["language"] = page_language(declared_languages(response), page.text)
            if self.model is not None:
                scores = self.model.score(page.text, update["language"])
                update.update(score_fields(scores, self.settings.getfloat("RELEVANCE_THRESHOLD")))
                stats.inc_value("focused/refresh/rescored")
                if update["is_relevant"] != bool(stored["is_relevant"]):
                    verdict = "now_relevant" if update["is_relevant"] else "no_longer_relevant"
                    stats.inc_value(f"focused/refresh/{verdict}")
        stats.inc_value(f"focused/refresh/{'changed' if 'last_changed' in update else 'unchanged'}")
        yield update

    def _not_modified(
        self, response: Response, stored: dict[str, Any], fetched_at: str
    ) -> Iterator[dict[str, Any]]:
        stats = self.crawler.stats
        if not any(header in response.request.headers for header in CONDITIONAL_HEADERS):
            # Nothing was asked of it (--full, a rendered page, a redirect's target, which the
            # redirect middlewares send without them): no answer about the stored page.
            stats.inc_value(f"focused/skipped/http_{NOT_MODIFIED}")
            yield tried(stored)
            return
        if self._robots_header_differs(response, stored):
            # What the page asks of crawlers may have changed, which a 304 cannot tell whole:
            # the page is judged by its 200, as any page fetched in full.
            stats.inc_value("focused/refresh/refetched")
            yield self._request(stored, conditional=False)
            return
        stats.inc_value("focused/refresh/not_modified")
        stats.inc_value("focused/refresh/unchanged")
        yield not_modified(stored, fetched_at, validators(response))

    def _robots_header_differs(self, response: Response, stored: dict[str, Any]) -> bool:
        """Whether a 304 carries an ``X-Robots-Tag`` asking for other directives than the
        stored ``robots`` (``ROBOTS_META_OBEY``). Those came from the page's meta tags and its
        header together, and a 304 tells nothing of the metas: a directive the header adds (a
        page now noindex must lose its text) or lacks (the stored one may have been the
        header's) cannot be judged from it. A 304 without the header tells nothing (RFC 9110
        15.4.5 asks a server to send no more than the validators and caching fields): the
        stored ``robots`` stays, until a fetch in full (``--full``) reads it again."""
        token = self.meta_robots_token
        if token is None or b"X-Robots-Tag" not in response.headers:
            return False
        asked = honoured(header_directives(response, token))
        return set(asked) != set((stored["robots"] or "").split(",")) - {""}

    def skipped(self, failure: Failure) -> Iterator[dict[str, Any]]:
        if failure.check(NotSent):
            return  # held in its slot as the recrawl was stopped: not tried
        self.crawler.stats.inc_value(f"focused/skipped/{skip_reason(failure)}")
        yield tried(failure.request.meta["stored"])

    def closed(self, reason: str) -> None:
        count = self.crawler.stats.get_value
        recorded = [count(f"focused/refresh/{outcome}", 0) for outcome in OUTCOMES]
        # Every planned page is in one count: the rest were left as they were (a failure, an
        # unusable response, robots.txt: focused/skipped/<reason>; or a stop before them).
        logger.info(
            "Recrawl of crawl %s (%s, %s): %d changed, %d unchanged, %d gone, %d skipped",
            self.crawl_id,
            self.policy,
            counted(len(self.pages), "page"),
            *recorded,
            len(self.pages) - sum(recorded),
        )
        if self.model is not None:
            # The crawl record's relevant pages and harvest rate stay the crawl's measure; the
            # pages' verdicts that moved are told here.
            rescored, now, no_longer = (count(f"focused/refresh/{name}", 0) for name in RESCORED)
            logger.info(
                "Rescored %s with the crawl's model: %d now relevant, %d no longer",
                counted(rescored, "changed page"),
                now,
                no_longer,
            )
        unauthorized = count(f"focused/skipped/http_{UNAUTHORIZED}", 0)
        if unauthorized:
            # The crawl record keeps no password (focused.fetchsettings): a crawl made with one
            # is recrawled with it given again.
            given = self.settings.get("HTTPAUTH_USER")
            logger.warning(
                "%s answered %d Unauthorized: %s",
                counted(unauthorized, "page"),
                UNAUTHORIZED,
                "the password given was refused: check HTTPAUTH_USER, HTTPAUTH_PASS and"
                " HTTPAUTH_DOMAIN"
                if given
                # A recrawl is a command of its own, never a Scrapyd job.
                else "a crawl made with a password is recrawled with it; give them again: "
                + setting_options(
                    "HTTPAUTH_USER=...", "HTTPAUTH_PASS=...", "HTTPAUTH_DOMAIN=HOST", scrapyd=False
                ),
            )


class OffsiteMiddleware(ScrapyOffsite):
    """Scrapy's offsite filter (``allowed_domains``, the crawl's test), applied as a request is
    sent only. Scrapy's also drops an offsite request as it is scheduled, where it reaches no
    errback: a stored page redirecting off the crawl's domains was neither fetched nor recorded
    anywhere. Sent, it fails to the spider's errback: ``focused/skipped/offsite``, and the page
    records ``tried_at``."""

    def request_scheduled(self, request: scrapy.Request, spider: scrapy.Spider) -> None:
        """Nothing as the request is scheduled: ``process_request`` judges it as it is sent."""


# What a recrawl that finds its mark went stale says happened since, and what it does.
TAKEN_OVER = "another recrawl took the crawl over: this one stops, and leaves the mark to it"
CRAWL_STARTED = "a run of the crawl started: this recrawl stops"


def taken_over(crawl_id: str, since: str = TAKEN_OVER) -> str:
    """What a recrawl says as it finds its mark of the crawl's record lost (``since``)."""
    return (
        f"Crawl {crawl_id}: this recrawl's mark went stale (no heartbeat for 3 intervals) and"
        f" {since}"
    )


class RefreshPipeline(StoragePipeline):
    """Writes a recrawl's updates with the storage pipeline's batching and retries; the crawl
    record stays as the crawl left it, but for the recrawl's heartbeat: ``recrawl_seen_at``,
    which the recrawl command set as it started (``Store.claim_recrawl``) and clears as it
    ends, is refreshed every FOCUSED_HEARTBEAT_INTERVAL seconds, so that another recrawl or a
    run of the crawl is refused meanwhile, where no lock file tells (MongoDB).

    A recrawl that stalled so long that its mark went stale, and another recrawl took the
    crawl over, finds at its next beat that the mark is no longer its own: it leaves it, says
    so in one line and stops (close reason ``recrawl_taken_over``, exit status 1). So does one
    that finds the crawl running (its ``seen_at`` fresh): a run of it started over the stale
    mark, which ``Store.start_crawl`` keeps. Going on without a heartbeat would fetch the pages
    the other fetches, each visit counted twice, which is what the mark is there to prevent;
    the updates written so far are whole visits, and stay."""

    unstored_kind = "update"
    run_name = "recrawl"
    _taken_over = ""  # why the recrawl stops: the heartbeat found the crawl another's

    async def open_spider(self) -> None:
        self.store = open_store(self.crawler.settings)
        self.crawl_id = self.crawler.spider.crawl_id
        self.claim = self.crawler.spider.claim
        self._watch_forced_stop()
        self._start_heartbeat()

    def forced_stop(self) -> None:
        """A second Ctrl-C (the reactor stops with the spider open): the page updates no write
        stored are kept in the file of unstored records once it has stopped, as a crawl's pages
        are, where they were lost without a word. The crawl's record is left as it is (a
        recrawl records no outcome), its mark going stale."""
        self._keep_at_forced_stop()

    def heartbeat(self) -> None:
        if self.claim is None or self._taken_over:
            return
        if not self.store.recrawl_heartbeat(self.crawl_id, self.claim, self.heartbeat_interval):
            self._taken_over = taken_over(self.crawl_id)
        # The recrawl claimed the crawl only while no run of it was live (the command's
        # _plan): one live now started while this recrawl's mark was stale. Into SQLite, no
        # run starts while this recrawl holds the crawl's lock: a fresh heartbeat there is
        # that of a run killed just before the recrawl began.
        elif (
            not holds_crawl_lock(self.crawler.settings, self.crawl_id)
            and (crawl := self.store.get_crawl(self.crawl_id))
            and is_live(crawl, datetime.now(UTC))
        ):
            self._taken_over = taken_over(self.crawl_id, CRAWL_STARTED)

    async def beat(self) -> None:
        await super().beat()
        if self._taken_over and self._closing_spider is None:
            logger.warning("%s", self._taken_over)
            self._closing_spider = close_spider_now(self.crawler, RECRAWL_TAKEN_OVER)

    def page_record(self, item: Any) -> dict[str, Any]:
        return dict(item)

    def write(self, records: list[dict[str, Any]]) -> None:
        self.store.update_pages(records)

    async def spider_closed(self, reason: str) -> None:
        self._unwatch_forced_stop()
        await self._stop_heartbeat()  # before the store is closed
        self.store.close()
