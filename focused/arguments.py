"""The one place where spider arguments and strategy parameters are parsed and validated.

Every check raises :class:`focused.errors.ConfigError` with a one-line message, which the
``crawl`` command prints before any crawling starts. ``parse_arguments`` also runs the
checks of the crawl's settings (``focused.settingchecks``) and of its job: the JOBDIR it
resumes and the shared frontier it joins (``focused.jobchecks``).
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from w3lib.url import safe_url_string

from focused.canonical import canonicalize, drop_params_setting, is_sendable
from focused.errors import (
    ConfigError,
    cut,
    quoted,
    redact_uri,
    setting_options,
    spider_arguments,
)
from focused.jobchecks import (
    check_job_queue,
    check_jobdir,
    check_resumed_job,
    check_shared_frontier,
    crawl_order,
    job_record,
)
from focused.languages import known_languages, language_code, query_language
from focused.render import RENDER_MODES
from focused.setting_names import known_setting_names
from focused.settingchecks import (
    check_no_made_setting_given,
    check_output_folders,
    check_settings,
    is_text,
    read_number,
)
from focused.strategies import STRATEGIES, strategy_class

if TYPE_CHECKING:
    from focused.distributed import BudgetMarks

# Spider arguments every strategy accepts; the strategy's own parameters come on top.
GENERAL_ARGUMENTS = (
    "query",
    "topic_file",
    "seeds",
    "seeds_file",
    "strategy",
    "allowed_domains",
    "crawl_id",
    "render",
    "language",
)
# The spider argument in which the ``crawl`` command hands the spider's ``from_crawler`` the
# arguments its check read (``TopicalSpider.check_arguments``), so that they are read once a
# crawl: read again, a seeds_file or topic_file read from a pipe (-a seeds_file=/dev/stdin) was
# empty, and a shared crawl's page budget was recorded in Redis a second time. Its ``_``, as
# Scrapyd's ``_job``, keeps it out of the arguments read (``parse_arguments``); the spider takes
# it only as a ``CrawlConfig``, which no ``-a`` gives (``scrapy runspider -a _checked=x``).
CHECKED_ARGUMENTS = "_checked"
# semantic: the only strategy that reaches issue 7's harvest target (README "Semantic link
# scores"). Without its sentence encoder (the extra not installed, a query not in English) it
# runs as anchor would, below shark, the best strategy without the encoder (mean harvest@|rel|
# 0.291 against 0.357, BENCHMARKS "The default without the encoder"): a crawl that names no
# strategy then runs shark, and says so (``default_strategy``).
DEFAULT_STRATEGY = "semantic"
NO_ENCODER_STRATEGY = "shark"


# allowed_domains are names the offsite filter compares hosts with: no scheme, path or port.
DOMAIN = re.compile(r"[\w.-]+")
TRAILING_COMMENT = re.compile(r"\s#")
SEED_SEPARATORS = re.compile(r"[,\s]+")
# topic_file and seeds_file are read whole, before anything else: a device (/dev/zero,
# /dev/urandom) or a file of gigabytes filled the memory until the kernel killed the crawl.
# A pipe (-a seeds_file=<(...)) is still read, up to this many characters.
ARGUMENT_FILE_LIMIT = 50_000_000


@dataclass(frozen=True)
class Param:
    """A strategy parameter given as ``-a name=value``.

    The type is the default's type; ``low``/``high`` bound numbers (inclusive), ``choices``
    lists the allowed strings. ``works_with`` (another parameter, its value) is the only setting
    under which the parameter has an effect: given with another, it is refused rather than
    ignored.
    """

    default: float | int | str
    help: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    works_with: tuple[str, str] | None = None

    def parse(self, name: str, raw: str) -> float | int | str:
        kind = type(self.default)
        # Blanks around a value are the shell's quoting (-a then=" dfs"), as around a number,
        # which int() and float() take: a choice so given was refused. An empty one stays one.
        raw = raw.strip()
        if kind is str:
            if self.choices and raw not in self.choices:
                raise ConfigError(f"{name}={quoted(raw)} is not one of: {', '.join(self.choices)}")
            return raw
        value = read_number(name, raw, kind)
        if self.low is not None and value < self.low:
            raise ConfigError(f"{name}={cut(raw)} is below its minimum {self.low:g}")
        if self.high is not None and value > self.high:
            raise ConfigError(f"{name}={cut(raw)} is above its maximum {self.high:g}")
        return value


@dataclass(frozen=True)
class CrawlConfig:
    """Everything the spider was asked to do, validated."""

    query: str
    topic: str
    seeds: tuple[str, ...]
    strategy: str
    params: dict[str, Any]
    allowed_domains: tuple[str, ...] = ()
    crawl_id: str = field(default_factory=lambda: new_crawl_id())
    render: str = "never"
    language: str | None = None  # the query's, when given; else told from the query
    strategy_note: str | None = None  # why a crawl that names no strategy runs this one
    jobdir_note: str | None = None  # why its JOBDIR cannot be resumed: Scrapyd's, one per job
    topic_file: str | None = None  # the file its topic was read from, as given
    # What orders its frontier (crawl_order), which a resumed JOBDIR crawl must be given alike
    order: dict[str, Any] = field(kw_only=True)
    # The page budget a shared crawl's process recorded as the crawl's as its arguments were
    # read: put back if a later check refuses the start (take_back_shared_budget).
    budget_marks: BudgetMarks | None = field(default=None, kw_only=True, compare=False, repr=False)


# -a render=: a spider-level argument, parsed like a strategy parameter.
RENDER = Param(
    "never", "render pages in headless Chromium: never, always, or auto", choices=RENDER_MODES
)


MAX_CRAWL_ID = 100  # characters of a crawl's id


def check_crawl_id(crawl_id: str) -> None:
    """ConfigError (one line) unless ``crawl_id`` is an id a crawl may have: 1 to 100
    (``MAX_CRAWL_ID``) letters, with the marks written on them (Hindi's vowel signs and viramas:
    ``पक्षी``), digits and ``. _ : -``, not starting with ``-``, which the commands that take an
    id would read as an option (``scrapy report --json``)."""
    if crawl_id.startswith("-"):
        raise ConfigError(
            f"crawl_id={quoted(crawl_id)} may not start with '-': the commands would take it"
            " for an option"
        )
    if len(crawl_id) > MAX_CRAWL_ID:
        # Said apart: an id of letters alone was told it "may use only letters".
        raise ConfigError(f"crawl_id={quoted(crawl_id)} is longer than {MAX_CRAWL_ID} characters")
    if not (
        crawl_id
        and all(
            char.isalnum() or char in "._:-" or (index and unicodedata.category(char)[0] == "M")
            for index, char in enumerate(crawl_id)
        )
    ):
        raise ConfigError(f"crawl_id={quoted(crawl_id)} may use only letters, digits and . _ : -")


def new_crawl_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


def parse_arguments(kwargs: Mapping[str, Any], settings: Any = None) -> CrawlConfig:
    """Validate the ``-a`` arguments of the ``topical`` spider (and the settings it reads)."""
    args = {k: str(v) for k, v in kwargs.items() if not k.startswith("_")}  # _job: Scrapyd's
    scrapyd = bool(kwargs.get("_job"))  # Scrapyd gives every job its _job: told to use -d
    for name, value in args.items():
        if not is_text(value):
            raise ConfigError(f"{name}={quoted(value)} is not UTF-8 text")
    query = args.get("query", "").strip()
    topic_file = args.get("topic_file")
    topic = query
    if topic_file:
        topic = f"{query}\n{_read_text(topic_file, 'topic_file')}".strip()
        if not topic:
            # Said apart: the check of the topic's words below said "the query has no words to
            # match pages against: ''", of a query not given and a file it did not name.
            given = spider_arguments("query='some words'", scrapyd=scrapyd)
            raise ConfigError(
                f"topic_file {quoted(topic_file)} is empty: give the topic's words in it,"
                f" or {given}"
            )
    if not query and not topic_file:
        given = spider_arguments("query='some words'", "topic_file=PATH", scrapyd=scrapyd)
        raise ConfigError(f"missing query: give {given}")
    language = _parse_language(args.get("language"))
    topic_language = query_language(topic, language)
    from focused.text import tokenize  # its stop-word lists: only when asked for

    if not tokenize(topic, topic_language):
        # Stop words and numbers are not matched: such a topic would leave the crawl's topic to
        # its seed pages alone, a crawl about whatever the seeds are about.
        # Named as given: a topic file of stop words alone was told "the query" had none.
        whose = "the query has"
        if topic_file:
            named = f"topic_file {quoted(topic_file)}"
            whose = f"the query and {named} have" if query else f"{named} has"
        raise ConfigError(
            f"{whose} no words to match pages against: {quoted(topic)}"
            " (stop words, numbers and punctuation are not matched)"
        )
    job = job_record(settings)  # what a resumed JOBDIR crawl must reuse: read once
    given = args.pop("strategy", None)
    strategy_note = None
    if given is None:
        strategy, strategy_note = default_strategy(
            args, job.get("strategy"), topic, language, scrapyd
        )
    else:
        strategy = given.strip()
    if strategy not in STRATEGIES:
        raise ConfigError(
            f"unknown strategy {quoted(strategy)}; "
            f"valid strategies: {', '.join(sorted(STRATEGIES))}"
        )
    spec = strategy_class(strategy).params
    unknown = sorted(set(args) - set(GENERAL_ARGUMENTS) - set(spec))
    if unknown and unknown[0] in known_setting_names():
        # -d JOBDIR=... in a schedule.json call, where Scrapyd wants -d setting=JOBDIR=...: the
        # list of valid arguments did not say why a setting everyone knows was refused.
        name = unknown[0]
        raise ConfigError(
            f"{name} is a setting, not a spider argument: give it as"
            f" {setting_options(f'{name}=VALUE', scrapyd=scrapyd)}"
        )
    if unknown:
        valid = ", ".join([*GENERAL_ARGUMENTS, *spec])
        raise ConfigError(
            f"unknown argument {quoted(unknown[0])} for strategy {strategy}; valid: {valid}"
        )
    # A resumed JOBDIR crawl goes on with the parameters it was started with (its frontier was
    # ordered by them): those this run does not give are its own, not the defaults.
    given_params = {**_saved_params(job, strategy), **{n: args[n] for n in spec if n in args}}
    params = {
        name: param.parse(name, str(given_params[name])) if name in given_params else param.default
        for name, param in spec.items()
    }
    for name in sorted(spec.keys() & args.keys()):
        if spec[name].works_with is not None:
            other, needed = spec[name].works_with
            if params[other] != needed:
                raise ConfigError(
                    f"{name} works only with {other}={needed}, not {other}={params[other]}"
                )
    strategy_class(strategy).check_params(params)
    seeds = _parse_seeds(args, scrapyd)
    allowed = _parse_allowed_domains(args, seeds)
    if settings is not None:
        check_settings(settings, scrapyd=scrapyd, seeds=seeds)
        _check_seed_lengths(seeds, settings)
        check_no_made_setting_given(settings, scrapyd)
        strategy_class(strategy).check_settings(settings, scrapyd=scrapyd)
        check_jobdir(settings)
        check_output_folders(settings)
    if "crawl_id" in args and not args["crawl_id"].strip():
        # An unset shell variable (-a crawl_id=$ID): a crawl of a new id, or each process of a
        # shared crawl its own crawl, is not what was asked.
        raise ConfigError("crawl_id is empty: give an id, or no crawl_id for a new one")
    # A crawl resumed from JOBDIR keeps its id, so its pages stay one crawl in the store.
    crawl_id = args.get("crawl_id", "").strip() or job.get("crawl_id") or new_crawl_id()
    check_crawl_id(crawl_id)
    order = crawl_order(strategy, params, topic, topic_language)
    check_resumed_job(job, order, args.get("crawl_id", "").strip(), scrapyd)
    check_job_queue(settings, strategy)
    render = RENDER.parse("render", args["render"]) if "render" in args else RENDER.default
    budget_marks = check_shared_frontier(settings, order, args, scrapyd)
    return CrawlConfig(
        query,
        topic,
        seeds,
        strategy,
        _acting(spec, params),
        allowed,
        crawl_id,
        render,
        language,
        strategy_note,
        scrapyd_jobdir_note(settings, kwargs.get("_job")),
        topic_file or None,
        order=order,
        budget_marks=budget_marks,
    )


def _acting(spec: Mapping[str, Param], params: dict[str, Any]) -> dict[str, Any]:
    """``params`` but those that have no effect with the others (``works_with``), which the
    crawl record would show at their default: hybrid's max_depth=5 with then=bestfirst, a
    depth limit the crawl does not have. (The frontier's order keeps them all: a JOBDIR
    compares it with the order it saved.)"""
    return {
        name: value
        for name, value in params.items()
        if spec[name].works_with is None
        or params[spec[name].works_with[0]] == spec[name].works_with[1]
    }


def scrapyd_jobdir_note(settings: Any, job: Any) -> str | None:
    """Why the JOBDIR cannot be resumed, when it is Scrapyd's (``jobs_dir`` in scrapyd.conf),
    JOBS_DIR/PROJECT/topical/JOBID: Scrapyd puts it in place of the ``-d setting=JOBDIR=`` of
    the schedule.json call, so cancelling the job and scheduling it again did not resume it,
    and said nothing (or, with its crawl_id, that the crawl goes on only from its JOBDIR)."""
    jobdir = settings.get("JOBDIR") if settings is not None else None
    if not (jobdir and job) or Path(jobdir).parts[-2:] != ("topical", str(job)):
        return None
    return (
        f"JOBDIR {quoted(str(jobdir))} is Scrapyd's, one per job (jobs_dir in scrapyd.conf, "
        "which replaces a JOBDIR given with -d setting=): a job scheduled again gets another, "
        "so it cannot resume this one; to pause and resume a crawl, leave jobs_dir unset"
    )


def _saved_params(job: Mapping[str, Any], strategy: str) -> dict[str, Any]:
    """The parameters a JOBDIR's crawl of ``strategy`` was started with ({} for another)."""
    if job.get("strategy") != strategy:
        return {}
    return job.get("order", {}).get("params", {})


def default_strategy(
    args: Mapping[str, str],
    saved: str | None,
    topic: str,
    language: str | None,
    scrapyd: bool = False,
) -> tuple[str, str | None]:
    """The strategy of a crawl that names none, and why it is not ``DEFAULT_STRATEGY`` (None
    when it is). A resumed JOBDIR crawl goes on with its own, ``saved``; arguments that tune
    ``DEFAULT_STRATEGY`` mean it; otherwise ``NO_ENCODER_STRATEGY`` when the sentence encoder
    cannot score this crawl's links."""
    if saved in STRATEGIES:
        return saved, None
    if strategy_class(DEFAULT_STRATEGY).params.keys() & args.keys():
        return DEFAULT_STRATEGY, None
    from focused.encoder import unavailable  # numpy: only when asked for

    reason = unavailable(query_language(topic, language), topic)
    if reason is None:
        return DEFAULT_STRATEGY, None
    return NO_ENCODER_STRATEGY, (
        f"No strategy given and the sentence encoder {DEFAULT_STRATEGY} needs is unavailable "
        f"({reason}): the crawl runs {NO_ENCODER_STRATEGY}, the best strategy without it "
        f"({spider_arguments(f'strategy={DEFAULT_STRATEGY}', scrapyd=scrapyd)} runs "
        f"{DEFAULT_STRATEGY} anyway)"
    )


def _parse_language(raw: str | None) -> str | None:
    if raw is None:
        return None
    if not raw.strip():
        # An unset shell variable (-a language=$LANG_CODE), as crawl_id's: the language told
        # from the query is not what was asked.
        raise ConfigError(
            "language is empty: give an ISO 639-1 code, or no language to tell it from the query"
        )
    code = language_code(raw)
    known = known_languages()
    if code not in known:
        raise ConfigError(
            f"language={quoted(raw)} is not a language the tokenizer knows; "
            f"give an ISO 639-1 code: {', '.join(sorted(known))}"
        )
    return code


def _read_text(path: str, what: str) -> str:
    try:
        # utf-8-sig: a file saved with a byte-order mark (Notepad's) began its first seed with it.
        with open(path, encoding="utf-8-sig") as file:
            text = file.read(ARGUMENT_FILE_LIMIT + 1)
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8, or a NUL in the path
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        # A Scrapyd job reads it in the directory Scrapyd was started in, not the user's.
        where = "" if Path(path).is_absolute() else f" (relative to {quoted(str(Path.cwd()))})"
        raise ConfigError(f"cannot read {what} {quoted(path)}{where}: {why}") from None
    if len(text) > ARGUMENT_FILE_LIMIT:
        raise ConfigError(
            f"{what} {quoted(path)} holds more than {ARGUMENT_FILE_LIMIT:,} characters"
        )
    return text


def _parse_seeds(args: Mapping[str, str], scrapyd: bool = False) -> tuple[str, ...]:
    # A URL has no blank, so one between two is a separator: seeds given as "URL URL" were one
    # seed with %20 in it, a 404 that took a page of the budget.
    raw = SEED_SEPARATORS.split(args.get("seeds", ""))
    if args.get("seeds_file"):
        for line in _read_text(args["seeds_file"], "seeds_file").splitlines():
            # A comment may also end a line ("http://x/ # the sea birds").
            line = TRAILING_COMMENT.split(line, maxsplit=1)[0].strip()
            if not line.startswith("#"):
                raw += line.split()
    seeds = tuple(dict.fromkeys(s for s in raw if s))
    if not seeds:
        given = spider_arguments("seeds=URL[,URL...]", "seeds_file=PATH", scrapyd=scrapyd)
        raise ConfigError(f"missing seeds: give {given}")
    for seed in seeds:
        _check_seed(seed, scrapyd)
    return seeds


def _check_seed(seed: str, scrapyd: bool = False) -> None:
    """A seed the downloader can fetch: http(s), a host, a port in range, printable once
    escaped (what the spider's start does to it). Otherwise the crawl would fail on it with a
    traceback after starting. ``scrapyd``: as ``spider_arguments`` takes it."""
    try:
        parts = urlsplit(seed)
        parts.port  # noqa: B018 -- raises on a port out of range or not a number
        requested = safe_url_string(canonicalize(seed))  # as the spider requests it
        sendable = is_sendable(requested)
    except ValueError:  # also UnicodeError, from IDNA
        sendable = None
    else:
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"seed {quoted(seed)} is not an http(s) URL")
        if "@" in parts.netloc:
            # Twisted would take user:password@host for the host name, and the password would
            # reach the log and the store; Scrapy sends credentials from its settings. It sends
            # them to a request whose host and port, as the request names them, are
            # HTTPAUTH_DOMAIN's: the canonical URL's, without the user (a port other than the
            # scheme's, an IPv6 host in brackets, a name in punycode), or they were never sent.
            domain = urlsplit(requested).netloc
            given = ("HTTPAUTH_USER=...", "HTTPAUTH_PASS=...", f"HTTPAUTH_DOMAIN={domain}")
            raise ConfigError(
                f"seed {quoted(redact_uri(seed))} has a user name or password in it: give them"
                f" as {setting_options(*given, scrapyd=scrapyd)}"
            )
    if not sendable:
        raise ConfigError(f"seed {quoted(seed)} is not a valid URL")


def _check_seed_lengths(seeds: tuple[str, ...], settings: Any) -> None:
    """Scrapy's UrlLengthMiddleware drops a request whose URL, as sent, is longer than
    ``URLLENGTH_LIMIT`` (0: no limit), a seed too: a DEBUG line, and a crawl of nothing that
    exits 0."""
    limit = settings.getint("URLLENGTH_LIMIT")
    drop = drop_params_setting(settings)
    for seed in seeds:
        url = safe_url_string(canonicalize(seed, drop))
        if limit and len(url) > limit:
            raise ConfigError(
                f"seed {url[:60]}... is {len(url)} characters long: Scrapy drops a URL longer "
                f"than URLLENGTH_LIMIT ({limit})"
            )


def _parse_allowed_domains(args: Mapping[str, str], seeds: tuple[str, ...]) -> tuple[str, ...]:
    """Domains the offsite filter keeps the crawl within. A seed outside them would be dropped
    before it is fetched (a DEBUG line, and a crawl of nothing that exits 0)."""
    raw = args.get("allowed_domains", "").split(",")
    given = [d.strip().lower() for d in raw if d.strip()]
    if "allowed_domains" in args and not given:
        # An unset shell variable (-a allowed_domains=$DOMAINS): the crawl went anywhere its
        # links led, as with none given, where it was to stay within some.
        raise ConfigError(
            "allowed_domains is empty: give a domain, or no allowed_domains to crawl any site"
        )
    for domain in given:
        if not DOMAIN.fullmatch(domain):
            raise ConfigError(
                f"allowed_domains: {quoted(domain)} is not a domain name (give example.org, "
                "without scheme, port or path)"
            )
    # As requests name their hosts: Scrapy's offsite filter compares müller.example's requests
    # as xn--mller-kva.example, and dropped every one of them, seeds included, for the name.
    allowed = tuple(dict.fromkeys(_request_host(f"http://{domain}/") for domain in given))
    for seed in seeds:
        # As the seed is requested, canonical (spiders/topical.py): its host's closing dot
        # dropped and escapes decoded, or example.org. was outside allowed_domains=example.org.
        host = _request_host(canonicalize(seed))
        if allowed and not any(host == d or host.endswith(f".{d}") for d in allowed):
            raise ConfigError(
                f"seed {quoted(seed)} is outside allowed_domains {cut(','.join(allowed))}"
            )
    return allowed


def _request_host(url: str) -> str:
    """The host of ``url`` as a request for it names it: internationalized names in their
    ASCII (punycode) form."""
    return urlsplit(safe_url_string(url)).hostname or ""
