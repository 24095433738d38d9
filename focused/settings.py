"""Settings of the focused crawler. Each is documented with its default; override any with -s."""

BOT_NAME = "focused"
SPIDER_MODULES = ["spiders"]
NEWSPIDER_MODULE = "spiders"
COMMANDS_MODULE = "focused.commands"

# -- Politeness and fetching -----------------------------------------------------------------
ROBOTSTXT_OBEY = True
USER_AGENT = "focused/0.1 (+topical crawler; Scrapy)"
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 8
DOWNLOAD_TIMEOUT = 30
DOWNLOAD_MAXSIZE = 10 * 1024 * 1024  # a page larger than 10 MiB is not a topical page
DOWNLOAD_WARNSIZE = 2 * 1024 * 1024
REDIRECT_MAX_TIMES = 5
RETRY_TIMES = 2
COOKIES_ENABLED = False
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False  # no control port: a crawl listens on nothing
FEED_EXPORT_ENCODING = "utf-8"

# -- The frontier ----------------------------------------------------------------------------
# The scheduler adds rediscovery (a better parent raises a queued score). The priority queue is
# the strategy's queue; the spider replaces this default with the one named by -a strategy=.
SCHEDULER = "focused.scheduler.FocusedScheduler"
SCHEDULER_PRIORITY_QUEUE = "schedulers.bestfirst.BestFirstQueue"
DEPTH_PRIORITY = 0  # strategies order the frontier; depth must not skew Request.priority
DEPTH_STATS_VERBOSE = True  # request_depth_count/N: how many links were queued at each level

# -- Scoring ---------------------------------------------------------------------------------
SPIDER_MIDDLEWARES = {"focused.middlewares.RelevanceMiddleware": 800}
RELEVANCE_THRESHOLD = 0.15  # combined score at or above which a page is_relevant
RELEVANCE_LSI_WEIGHT = 0.5  # combined = (1 - w) * tfidf + w * lsi
RELEVANCE_NUM_TOPICS = 50  # LSI dimensions
RELEVANCE_REFIT_EVERY = 100  # pages between refits of dictionary, IDF and LSI (off the reactor)
RELEVANCE_MAX_DOCS = 2000  # most recent pages the model is refit on
LINK_CONTEXT_CHARS = 200  # characters of text kept on each side of a link as its context

# -- Storage ---------------------------------------------------------------------------------
ITEM_PIPELINES = {
    "pipelines.relevance.RelevancePipeline": 300,
    "pipelines.storage.StoragePipeline": 800,
}
MONGO_URI = None  # e.g. mongodb://127.0.0.1:27017; when unset pages go to FOCUSED_DB
MONGO_DATABASE = "focused"
MONGO_TIMEOUT_MS = 5000  # server selection timeout: an unreachable server fails fast
FOCUSED_DB = "focused.sqlite3"  # the embedded SQLite store, relative to the working directory
STORAGE_BATCH_SIZE = 50  # page records written per batch
STORAGE_RETRIES = 3  # retries of a failed write before the crawl stops (store_unreachable)
STORAGE_RETRY_DELAY = 1.0  # seconds before the first retry, doubled at each further one
STORE_MIN_RELEVANCE = None  # threshold crawl-and-store: pages below it are fetched, not stored

# -- Progress --------------------------------------------------------------------------------
EXTENSIONS = {"focused.extensions.ProgressLog": 500}
FOCUSED_LOGSTATS_INTERVAL = 30.0  # seconds between progress lines; 0 turns them off

# -- Evaluation (benchmarks/) ----------------------------------------------------------------
ORACLE_DISTANCES = None  # JSON {url: links to the nearest relevant page}; only the oracle reads it
