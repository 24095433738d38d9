"""Settings of the focused crawler. Each is documented with its default; override any with -s."""

from pathlib import Path

from scrapy.settings import default_settings

from focused import (
    ondemand,
    # The first module of the project that Scrapy loads: before its commands load itemadapter.
    without_pydantic,  # noqa: F401
)
from focused.errors import quiet_interrupts

# Scrapy imports this module before its commands: from here on, Ctrl-C ends one quietly.
quiet_interrupts()


def _scrapys_without(base: dict[str, int], component: str) -> dict[str, int]:
    """Scrapy's ``base`` setting without ``component``: Scrapy imports every component its
    _BASE settings name, one set to None too, and focused.ondemand builds it only when its
    setting is on."""
    return {path: order for path, order in base.items() if path != component}


BOT_NAME = "focused"
SPIDER_MODULES = ["spiders"]
NEWSPIDER_MODULE = "spiders"
COMMANDS_MODULE = "focused.commands"

# -- Politeness and fetching -----------------------------------------------------------------
ROBOTSTXT_OBEY = True
# A page's own <meta name="robots"> (or named after the robots token of ROBOTSTXT_USER_AGENT,
# else USER_AGENT: "focused") and X-Robots-Tag headers: nofollow, its links are not queued
# (focused/skipped/nofollow); noindex, it is stored without its text, its record's robots saying
# why; none, both. False: both ignored, every page stored and followed (focused.robotsmeta).
ROBOTS_META_OBEY = True
# A robots.txt Crawl-delay of N (or a Request-rate of one request in N seconds): at most one
# request to the host every N seconds, one at a time (Scrapy ignores both). A host asking for
# more than this many seconds is skipped, as Nutch does: fetching it faster would ignore its
# robots.txt, and its requests waiting would hold the crawl's CONCURRENT_REQUESTS
# (focused.robots). At most a day (86,400): a longer delay is no crawl of the host.
ROBOTS_CRAWL_DELAY_MAX = 30.0
# The robots.txt of this many hosts, those used last, are kept parsed (some 16 times the
# robots.txt: 50 KB for one of 3 KB); a host forgotten has its robots.txt parsed again from its
# kept text (ROBOTS_TEXTS_MAX) when one of its URLs comes up, its Crawl-delay kept meanwhile.
# A failed robots.txt's is kept until it may be fetched again (ROBOTS_RETRY_FAILED_AFTER), past
# this if need be. One read more than 24 hours ago (RFC 9309) is downloaded again, kept parsed or
# not; if that fails, the rules it gave before hold until it is fetched again
# ROBOTS_RETRY_FAILED_AFTER later, past this too if need be (focused.robots).
ROBOTS_PARSERS_MAX = 1_000
# The robots.txt of this many hosts, those used last, are kept as text, compressed (some 0.7 KB
# for one of 3 KB), to be parsed again for a host whose parser was forgotten; a host past it, or
# whose robots.txt was read more than 24 hours ago (RFC 9309), has it downloaded again. 0: none
# kept, a host whose parser was forgotten has its robots.txt downloaded again.
ROBOTS_TEXTS_MAX = 100_000
# A robots.txt that could not be fetched (a network error, or a 5xx or 429, after the retries)
# forbids its whole host (RFC 9309) for this many seconds (one read again after its 24 hours
# leaves the rules it gave before in force meanwhile, ROBOTS_PARSERS_MAX); then the next request
# to the host downloads it again (focused/robots/failed_retried). 5 minutes, as Nutch waits
# after a 503 robots.txt (http.robots.503.defer.visits.delay): a crawl of hours gets back a host
# that was down for a moment, for one robots.txt request every 5 minutes at most to a host that
# stays down. 0: kept for the whole crawl (24 hours in a shared crawl's Redis), its requests
# refused. In a shared crawl every process reads it again at the same time.
ROBOTS_RETRY_FAILED_AFTER = 300.0
# The host's requests that come up meanwhile are held, not refused, until its robots.txt is
# fetched again (focused/robots/held_requests); then crawled if it allows them, refused if it
# disallows them, and held again if it fails again, until it has failed this many more times in
# a row (3, as Nutch's http.robots.503.defer.visits.retries): then they are refused. The crawl
# does not end while requests are held (up to this many times ROBOTS_RETRY_FAILED_AFTER); a stop
# does not wait for them, and a JOBDIR pause (or kill -9) queues them again, the failures counted
# kept and when it may be fetched again (the resumed run holds them until then, this run's
# ROBOTS_RETRY_FAILED_AFTER at most, then fetches it again). Not for a host that is not there
# (its name does not resolve, or it refuses the connection: a mistyped seed), whose requests are
# refused at once. 0: refused at once, as RFC 9309 alone asks (focused.robots).
ROBOTS_HOLD_RETRIES = 3
# A 429 or 503 pauses its host before Scrapy retries as usual (RETRY_TIMES), at most this many
# seconds: with Retry-After, no request to that host before it says; without, see below. 0:
# no pause, retried at once, as Scrapy does (focused.retryafter). At most a day (86,400).
RETRY_AFTER_MAX = 60.0
# A 429 or 503 without Retry-After: no request to that host for this many seconds after its first
# such answer in a row, twice as long after each further one (1, 2, 4, ... up to
# RETRY_AFTER_MAX), until it answers anything else or is left alone a minute past its last pause
# (its slot dropped idle: the next starts from this again). 0: retried at once, as Scrapy does.
RETRY_BACKOFF_BASE = 1.0
USER_AGENT = "focused/0.1 (+topical crawler; Scrapy)"
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 8
# Scrapy's downloader, but a request counts against its host's concurrency as soon as its slot
# lets it go: Scrapy 2.19 counts it only once its download task has started, and sent twice the
# per-host limit at once under the asyncio reactor (focused.downloader).
DOWNLOADER = "focused.downloader.PoliteDownloader"
# Scrapy's default: its scraper processes a page's outputs with this many tasks at once. The
# fewer, the more often the event loop runs between two links of a page; the scheduler holds
# dispatch meanwhile (SCORE_BEFORE_DISPATCH), so harvest no longer depends on it (8: 0.472 and
# 0.474; before the hold, 0.444). 8 saves about 0.8 ms of CPU a page (session 40), but pages
# then reach the feed exports out of fetch order, and the plain spider gains more than the
# topical one (BENCHMARKS.md, sessions 24 and 40).
CONCURRENT_ITEMS = 100  # at most 10,000: Scrapy starts this many tasks for every page
DOWNLOAD_TIMEOUT = 30
# Scrapy's DOWNLOAD_DELAY (default 0), AUTOTHROTTLE_START_DELAY (5), AUTOTHROTTLE_MAX_DELAY (60)
# and a DOWNLOAD_SLOTS entry's "delay" take at most a day (86,400 s), and so does the longest
# delay DOWNLOAD_DELAY_JITTER draws, (1 + jitter) times the delay: a host's next request waits
# for it, and a longer one is a crawl that never ends.
# Scrapy's resolver that also answers with IPv6 addresses: hosts that have only one, and
# literal seeds such as http://[2001:db8::1]/. Scrapy's default asks for IPv4 alone, and such a
# host fails as a DNS error. This one has no timeout of its own (DNS_TIMEOUT does not apply):
# DOWNLOAD_TIMEOUT bounds a lookup with the rest of the request.
TWISTED_DNS_RESOLVER = "scrapy.resolver.CachingHostnameResolver"
DOWNLOAD_MAXSIZE = 10 * 1024 * 1024  # a page larger than 10 MiB is not a topical page
DOWNLOAD_WARNSIZE = 2 * 1024 * 1024
REDIRECT_MAX_TIMES = 5
RETRY_TIMES = 2
COOKIES_ENABLED = False
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False  # no control port: a crawl listens on nothing
FEED_EXPORT_ENCODING = "utf-8"
# The XML feed (-o pages.xml) writes a character XML cannot hold (a control character but tab
# and the line breaks, in a page's title or text) as U+FFFD: Scrapy's wrote it, and the file
# was no XML.
FEED_EXPORTERS = {"xml": "focused.feeds.XmlItemExporter"}

# -- The frontier ----------------------------------------------------------------------------
# The scheduler adds rediscovery (a better parent raises a queued score). The priority queue is
# the strategy's queue; the spider replaces this default with the one named by -a strategy=.
SCHEDULER = "focused.scheduler.FocusedScheduler"
SCHEDULER_PRIORITY_QUEUE = "schedulers.bestfirst.BestFirstQueue"
DEPTH_PRIORITY = 0  # strategies order the frontier; depth must not skew Request.priority
DEPTH_STATS_VERBOSE = True  # request_depth_count/N: links found at each level, duplicates included
# A request counts against CONCURRENT_REQUESTS until its page is scored, not only until it is
# downloaded (focused.scheduler): when a burst of responses arrives, Scrapy would otherwise fill
# every freed download slot from the frontier before scoring any of them, with requests that
# miss the links the burst is about to queue. Nor does a request leave while a page's links are
# being queued: Scrapy lets the event loop run between them. False: Scrapy's behaviour.
# BENCHMARKS.md, "Scoring before dispatch".
SCORE_BEFORE_DISPATCH = True

# -- Components -------------------------------------------------------------------------------
# Spider middlewares, outermost (lowest number) first. FinishMiddleware queues a page's links
# before its item (crash-safe resume; FrontierAck of a shared crawl counts on it too);
# RelevanceMiddleware scores a page before its links are queued (Scrapy's DepthMiddleware, 900,
# has set their depth by then); DuplicateMiddleware stores a page whose rel=canonical URL was
# already fetched once, as a duplicate.
SPIDER_MIDDLEWARES = {
    "focused.resume.FinishMiddleware": 15,
    "focused.middlewares.RelevanceMiddleware": 800,
    "focused.dedup.DuplicateMiddleware": 850,
}
DOWNLOADER_MIDDLEWARES = {
    "focused.ondemand.FrontierAck": 10,  # requests that failed for good are done too
    # Scrapy's checks only the first request waiting for a host's robots.txt (focused.robots).
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "focused.robots.RobotsTxtMiddleware": 100,
    # Pauses a host whose 429/503 is in as its download ends (a signal handler), before its slot
    # sends the next request waiting there and Scrapy's RetryMiddleware (550) retries it.
    "focused.retryafter.RetryAfterMiddleware": 555,
    "focused.hygiene.HeadCheckMiddleware": 560,  # only with HEAD_CHECK
    # Ends a non-HTML page's download at its headers (a signal handler: its order is none's).
    "focused.hygiene.NotHtmlStopMiddleware": 565,
    # A page that declares no encoding, guessed as Scrapy guesses but for Japanese taken for
    # Korean: after HttpCompressionMiddleware (590) inflates it, before the meta refresh is read.
    "focused.hygiene.CharsetMiddleware": 585,
    # Scrapy's loses a page whose meta refresh leads nowhere (focused.hygiene).
    "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware": None,
    "focused.hygiene.MetaRefreshMiddleware": 580,
    # Scrapy's counts a redirect whose Location leads nowhere as anything but that.
    "scrapy.downloadermiddlewares.redirect.RedirectMiddleware": None,
    "focused.hygiene.RedirectMiddleware": 600,
    "focused.ondemand.CookiesMiddleware": 700,  # in place of Scrapy's: see below
}
# Scrapy's, but for its CookiesMiddleware, whose module imports tldextract at every start-up
# (focused.ondemand imports it only with COOKIES_ENABLED, off here).
DOWNLOADER_MIDDLEWARES_BASE = _scrapys_without(
    default_settings.DOWNLOADER_MIDDLEWARES_BASE, ondemand.CookiesMiddleware.component
)
EXTENSIONS = {
    "scrapy.extensions.feedexport.FeedExporter": None,  # replaced by the one below
    "focused.feeds.FeedExporter": 0,  # a feed that cannot be written stops the crawl
    "scrapy.extensions.closespider.CloseSpider": None,  # replaced by the one below
    "focused.stopping.PageBudget": 0,  # CLOSESPIDER_PAGECOUNT counts the crawl's pages
    "scrapy.extensions.spiderstate.SpiderState": None,  # replaced by the one below
    "focused.resume.SpiderState": 0,  # JOBDIR/spider.state written whole, or read as missing
    "focused.resume.CrawlCounters": 1,  # JOBDIR: after SpiderState (0) loads the state
    "focused.extensions.ProgressLog": 500,
    "focused.stopping.StopCriteria": 510,
    "focused.ondemand.DistributedCrawl": 520,  # only with FOCUSED_FRONTIER
    "focused.collector.GarbageCollector": 530,  # FOCUSED_GC_FREEZE, FOCUSED_GC_GEN0_THRESHOLD
    "focused.ondemand.WarcExport": 540,  # only with WARC_DIR
    "focused.ondemand.RemoteControl": 0,  # in place of Scrapy's: see EXTENSIONS_BASE
}
# Scrapy's, but for its RemoteControl, whose module imports aiohttp's web server at every
# start-up (focused.ondemand imports it only with REMOTE_CONTROL_ENABLED).
EXTENSIONS_BASE = _scrapys_without(
    default_settings.EXTENSIONS_BASE, ondemand.RemoteControl.component
)

# A spider that is not the project's (scrapy fetch, shell, view, bench, runspider FILE, one of
# the user's in SPIDER_MODULES) runs Scrapy's components, in place of the project's above and
# below, which the topical crawl's spider and store need (focused.components.OtherSpiders).
ADDONS = {"focused.components.OtherSpiders": 0}

# Scrapy's in-memory stats, a call 20 x cheaper (focused.stats).
STATS_CLASS = "focused.stats.StatsCollector"

# -- Scoring ---------------------------------------------------------------------------------
RELEVANCE_THRESHOLD = 0.15  # combined score at or above which a page is_relevant
RELEVANCE_LSI_WEIGHT = 0.5  # combined = (1 - w) * tfidf + w * lsi
RELEVANCE_NUM_TOPICS = 50  # LSI dimensions
# Pages between refits of dictionary, IDF and LSI (off the reactor): at least this many, and at
# least half the pages the refit learns from, whose number bounds the cost of a refit.
RELEVANCE_REFIT_EVERY = 100
# Refits run in a worker thread while the crawl goes on (True), so the page a refit's model first
# scores depends on timing. False: on the reactor thread, the crawl waiting for each refit (a
# pause of up to seconds at RELEVANCE_MAX_DOCS pages), so that a crawl of one request at a time
# (CONCURRENT_REQUESTS=1) of a site that does not change fetches the same pages in the same order.
RELEVANCE_REFIT_THREAD = True
RELEVANCE_MAX_DOCS = 2000  # most recent pages the model is refit on
RELEVANCE_FIT_TOKENS = 1000  # the refits learn a page from its first this many tokens; 0 = all
LINK_CONTEXT_CHARS = 200  # characters of text kept on each side of a link as its context
# Links followed from one page at most (the first in the page), 0 = all: scoring a link costs
# about 0.5 ms on the reactor thread, and a page of 100,000 links held every download a minute.
MAX_LINKS_PER_PAGE = 1000

# -- Storage ---------------------------------------------------------------------------------
ITEM_PIPELINES = {
    "pipelines.relevance.RelevancePipeline": 300,
    "pipelines.storage.StoragePipeline": 800,
}
MONGO_URI = None  # e.g. mongodb://127.0.0.1:27017; when unset pages go to FOCUSED_DB
MONGO_DATABASE = "focused"  # empty, or a name MongoDB refuses (/\."$, space, > 63 bytes): refused
MONGO_TIMEOUT_MS = 5000  # server selection timeout: an unreachable server fails fast
FOCUSED_DB = "focused.sqlite3"  # the embedded SQLite store, relative to the working directory
# Seconds a write to FOCUSED_DB (or a read, by the inspection commands) waits for another
# process's lock on the file before it fails (then STORAGE_RETRIES applies to a write). A
# crawl's open makes the fetch-order index a store written before it lacks if it can within
# half of it, holding the lock, free at once (focused.sqlitestore.INDEX_BUILD_SHARE), else says
# so. At most 2,147,483.647 (SQLite keeps it in milliseconds in a 32-bit int, which a longer
# one overflows).
FOCUSED_DB_TIMEOUT = 5.0
STORAGE_BATCH_SIZE = 50  # most page records per write (each page is written before it leaves)
STORAGE_RETRIES = 3  # retries of a failed write before the crawl stops (store_unreachable)
# Seconds before the first retry, doubled at each further one up to 5 minutes; <= a day.
STORAGE_RETRY_DELAY = 1.0
# The records the store could not take at the close of a crawl that gave up on it
# (store_unreachable) are kept in a file here, unstored-<crawl_id>-<UTC time>.jsonl, for
# `scrapy restore FILE` to load (focused.unstored); made when needed. None: the folder of
# FOCUSED_DB (the working directory unless FOCUSED_DB names another).
FOCUSED_UNSTORED_DIR = None
# A folder where each run of a crawl writes its HTTP responses as a new WARC file (WARC/1.1,
# <crawl_id>-<UTC start>-<host>-<pid>.warc.gz; focused.warc): the pages stored with their text.
# None: no WARC.
WARC_DIR = None
STORE_MIN_RELEVANCE = None  # threshold crawl-and-store: pages below it are fetched, not stored
# Seconds between refreshes of the crawl record's seen_at while the crawl runs (one small update);
# `scrapy crawls` shows a `running` crawl silent for 3 of them as stopped (killed, crashed).
# A recrawl refreshes the record's recrawl_seen_at so: silent for 3, it no longer holds the crawl.
# At least 1, at most a day (86,400).
FOCUSED_HEARTBEAT_INTERVAL = 30.0

# -- Progress --------------------------------------------------------------------------------
FOCUSED_LOGSTATS_INTERVAL = 30.0  # seconds between progress lines; 0 turns them off
# Scrapy's log lines, but a page scraped or dropped is logged (at DEBUG) without its text, which
# is in the store: whole, it made 25 KB of log and cost 1-2 ms of CPU a page (focused.logformatter).
LOG_FORMATTER = "focused.logformatter.PageLogFormatter"

# -- Stop criteria (focused.stopping) --------------------------------------------------------
# The page budget is Scrapy's CLOSESPIDER_PAGECOUNT (default 0, off), the crawl's: a resumed JOBDIR
# crawl stops at its total (focused.stopping.PageBudget); threshold crawl-and-store
# is STORE_MIN_RELEVANCE above. Crawls stopped by any of these are recorded as finished.
CLOSESPIDER_RELEVANT = 0  # stop after this many relevant pages (the crawl's count); 0 = off
DRIFT_WINDOW = 0  # topic drift: the last pages (across resumes) whose harvest is watched; 0 = off
DRIFT_MIN_HARVEST = 0.1  # stop when the harvest rate of the last DRIFT_WINDOW pages is below this

# -- Hardening for the real web (issue 8; README "Hardening") ----------------------------------
# URL canonicalization: the dupefilter and the frontier key requests by canonical URL.
REQUEST_FINGERPRINTER_CLASS = "focused.canonical.CanonicalRequestFingerprinter"
# Query (and ;path) parameters dropped from URLs, as lowercase globs: tracking tags, session ids.
CANONICAL_DROP_PARAMS = [
    "utm_*", "jsessionid", "phpsessid", "sid", "sessionid", "session_id", "aspsessionid*",
    "fbclid", "gclid", "msclkid", "aspxautodetectcookiesupport",
]  # fmt: skip
# Response hygiene (focused.hygiene). DOWNLOAD_MAXSIZE, DOWNLOAD_TIMEOUT and REDIRECT_MAX_TIMES
# are set above. HEAD_CHECK: a HEAD before each GET skips non-HTML and oversized bodies the URL
# does not reveal; it costs a round trip per page (about half the throughput), so it is off:
# a GET whose headers say it is not HTML is ended there anyway (NotHtmlStopMiddleware).
HEAD_CHECK = False
# The frontier bound (the sources' MAX_BUFFER): when full, the lowest-ranked requests are
# evicted, for every strategy, in memory, under JOBDIR and in Redis. 0 = unbounded.
FRONTIER_MAX = 1_000_000
# Per-host limits (focused.scheduler). MAX_PAGES_PER_HOST: pages fetched per host, 0 = no cap.
# HOST_WINDOW k: at most one request per host among any k consecutive fetches (the sources use
# k = 100); 0 = off. Turn it on for crawls over many hosts (hundreds), where a best-first order
# would otherwise hammer one good site; with few hosts it only reorders (see README).
MAX_PAGES_PER_HOST = 0
HOST_WINDOW = 0
HOST_WINDOW_SCAN = 1000  # queued requests looked at per fetch to find one outside the window
# A host held by its delay (DOWNLOAD_DELAY, a robots.txt Crawl-delay, AutoThrottle), a 429/503
# pause (Retry-After or backoff) or a full slot (slow), with a request already waiting (or a
# host with a request waiting for its robots.txt, whose Crawl-delay is not known yet), is passed
# over for the first of the next HELD_HOST_LOOKAHEAD queued requests whose host is not held; 0 =
# off (requests go strictly in the strategy's order, and one slow host ranked first paces the
# whole crawl).
HELD_HOST_LOOKAHEAD = 1000

# -- Rendering JavaScript pages (-a render=always|auto; focused.render) ----------------------
# With render=never (the default) none of this is used and scrapy-playwright is not loaded. With
# render=always|auto the spider switches DOWNLOAD_HANDLERS (http, https) to scrapy-playwright's
# handler, sets PLAYWRIGHT_LAUNCH_OPTIONS (FOCUSED_CHROMIUM, headless, --no-sandbox as root) and
# PLAYWRIGHT_ABORT_REQUEST (FOCUSED_RENDER_BLOCK, and robots.txt for what the pages fetch), and
# enables focused.render.RenderMiddleware.
FOCUSED_CHROMIUM = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
# ^ the Chromium executable; default /usr/bin/chromium when present (apt-get install chromium),
#   else None: Playwright's own downloaded browser
FOCUSED_RENDER_BLOCK = ["image", "font", "media"]  # resource types rendered pages do not fetch;
# ^ empty (-s FOCUSED_RENDER_BLOCK=) lets the browser fetch everything robots.txt allows
FOCUSED_RENDER_SETTLE_MS = 2000  # after load, at most this many ms for the network to go quiet
# ^ (Playwright's networkidle: 500 ms without requests), for content fetched after load; 0 = none
FOCUSED_RENDER_AUTO_MIN_WORDS = 50  # render=auto: fewer visible words than this is little text
FOCUSED_RENDER_AUTO_MIN_LINKS = 3  # render=auto: fewer followable links than this is few links
# ^ auto renders a page with little text or few links that has a script or an app shell
PLAYWRIGHT_BROWSER_TYPE = "chromium"
PLAYWRIGHT_MAX_CONTEXTS = 1  # one browser context: PLAYWRIGHT_MAX_PAGES_PER_CONTEXT bounds all
PLAYWRIGHT_MAX_PAGES_PER_CONTEXT = 4  # pages rendered at once (per scheme: http, https)
PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT = 30_000  # ms for a page's answer (else it fails), then
# ^ for its load event (else it is taken as rendered so far: focused.render.settle)

# -- Shared frontier on Redis (focused.distributed) ------------------------------------------
# With FOCUSED_FRONTIER, every `scrapy crawl topical` process given the same -a crawl_id shares
# one frontier, seen set and page budget in Redis. The components below switch themselves off
# when it is unset.
FOCUSED_FRONTIER = None  # e.g. redis://127.0.0.1:6379/0; None = the frontier is in this process
FOCUSED_WORKER_TIMEOUT = 10.0  # seconds without a heartbeat before a process counts as dead

# -- Evaluation (benchmarks/) ----------------------------------------------------------------
ORACLE_DISTANCES = None  # JSON {url: links to the nearest relevant page}; only the oracle reads it

# -- Crash-safe resume (issue 8; focused.resume, docs/hardening.md) --------------------------
# Under JOBDIR the seen set comes from the frontier file, not from Scrapy's buffered
# requests.seen; FinishMiddleware queues a page's links before its item and tells the scheduler
# when a response that produced no page is done, so that only requests in flight at a kill -9
# are fetched again.
DUPEFILTER_CLASS = "focused.resume.FrontierDupeFilter"

# -- Trap defence (issue 8; focused.traps, focused.simhash, README "Trap defence") ------------
# URL families that keep producing new URLs (nested paths, calendars, session ids, query
# parameter explosions) are queued behind every other request; once TRAP_MAX_PER_FAMILY
# requests of one such family were queued, the rest are dropped. 0 turns the URL part off.
TRAP_MAX_PER_FAMILY = 10
# A path whose URLs with one set of query parameters pass this many is a query explosion.
TRAP_QUERY_VARIANTS = 100
# Near-duplicate pages: a 64-bit SimHash over word shingles; a page within this many bits of
# one stored earlier is stored once, as a duplicate of it (duplicate_of). -1 = off; at most 3.
NEAR_DUPLICATE_DISTANCE = 3

# -- Semantic link scores (the `semantic` strategy; focused.encoder, README "Semantic") ------
# Used only by strategies that ask for the sentence encoder (pip install -r
# requirements-encoder.txt); other strategies never load it.
ENCODER_CACHE_SIZE = 50_000  # distinct anchor texts whose encoder score is remembered (LRU)
# Every anchor is first scored by the mean of its words' vectors (each word encoded alone, once;
# the vocabulary's once per install, in ENCODER_EXPORT_DIR); the best this share of anchors, by
# that score among those seen so far, is then encoded whole. 1.0: every anchor whole (1.5 times
# the scoring CPU); 0.0: words only (cheapest, lower harvest). BENCHMARKS.md, "Anchors".
ENCODER_WHOLE_SHARE = 0.25
# Texts (whole anchors, words outside the vocabulary) whose vectors are kept across crawls in
# ENCODER_STORE_DIR, so that the next crawl of the same sites reads them instead of running the
# model (focused.encodings; 768 bytes a text); the least recently used go first. 0: none kept.
ENCODER_STORE_SIZE = 100_000
ENCODER_STORE_DIR = None  # None: ENCODER_EXPORT_DIR

# -- ONNX Runtime sentence encoder (focused.encoder, README "Semantic") ----------------------
# The encoder runs as an int8 ONNX model with onnxruntime (PyTorch, slower, when onnxruntime is
# missing). The model is exported once per install and kept here, with the vectors of its
# vocabulary's words (ENCODER_WHOLE_SHARE); None: ~/.cache/focused/encoder.
ENCODER_EXPORT_DIR = None

# -- The garbage collector (focused.collector, BENCHMARKS.md "The garbage collector") ---------
# Once the engine has started (model and encoder loaded), collect once and move every object
# left into the garbage collector's permanent generation (gc.freeze()), so that its full
# collections no longer walk the start-up's libraries and tables. False: Python's behaviour.
FOCUSED_GC_FREEZE = True
# From then on, a young-generation collection every this many allocations (net of
# deallocations) instead of Python's 700: ~30 collections a 1,000-page crawl instead of ~1,100.
# 0: Python's threshold.
FOCUSED_GC_GEN0_THRESHOLD = 10_000
