"""Records the store could not take, kept in a file and loaded back later (``scrapy restore``).

When the store stays unreachable the storage pipeline gives up on it (``store_unreachable``),
and the records it still holds at the close get one last try. Rather than lose those that
fail it too, the pipeline writes them to ``unstored-<crawl_id>-<UTC time>.jsonl`` in
FOCUSED_UNSTORED_DIR (default: the folder of FOCUSED_DB), with the crawl record's outcome if
that could not be written either; ``scrapy restore FILE`` writes them into the store. A record
the store refused for a value it cannot hold (``focused.storage.RecordRefused``) goes to a file
of its own, ``refused-<crawl_id>-<UTC time>.jsonl``: loading checks a file whole, and such a
line, until mended, would hold back every other record of the file.

Each line is one JSON object, ``{"kind": KIND, "record": {...}}``:

    page     a page record, as ``Store.save_pages`` takes it
    update   the fields a recrawl sets on a stored page, as ``Store.update_pages`` takes them
    finish   ``crawl_id`` and the outcome fields of its crawl record (``Store.finish_crawl``)

A record is written as the store's own conversion makes it (``focused.storage.page_to_save``
and the like: every value of the store's type, a numpy float a float), so it loads back as
the store would have kept it, and loading is checked by the same functions. A page line must
have the fields a page record has had from the first version (``PAGE_REQUIRED``); those added
since (``duplicate_of``, ``language``, the refresh fields, any added later) may be missing, in
the file of a version before them, and load as null, as the store reads a page it kept from
before them.

Loading writes pages by (crawl_id, url) as the crawl does, but leaves as it is a page the store
holds in the same version or a later one (``VERSION_FIELDS``): a record kept by a forced stop
may have been stored after all, and the page fetched again since, by a recrawl or a resumed
run. A file whose every record was written is renamed ``<name>.restored`` (``mark_restored``),
so that it is not loaded again by mistake.

Each line is flushed as it is written: a crash while writing leaves every line but the last
whole, and loading leaves out a last line cut short (with a warning) rather than the file. A
write that fails (the disk full) leaves no line cut short: the file is cut back to its last
whole line (``PartlyKept`` says how many records it took), so that a record added later is not
glued to it.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from focused.errors import ConfigError, counted, cut, load_json, quoted
from focused.settingchecks import is_text
from focused.storage import (
    CRAWL_SCHEMA,
    DEFAULT_SQLITE_PATH,
    FINISH_FIELDS,
    PAGE_SCHEMA,
    Store,
    crawl_finish,
    page_to_save,
    page_update,
    stored_time,
    wrong_kind,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from io import FileIO

    from scrapy.settings import Settings


def _crawl_outcome(record: Mapping[str, Any]) -> dict[str, Any]:
    crawl_id = record.get("crawl_id")
    if not isinstance(crawl_id, str) or not crawl_id:
        raise ValueError("a crawl's outcome needs a non-empty 'crawl_id'")
    return {
        "crawl_id": crawl_id,
        **crawl_finish({k: v for k, v in record.items() if k != "crawl_id"}),
    }


def _finish_crawls(store: Store, records: list[dict[str, Any]]) -> None:
    for record in records:
        store.finish_crawl(**record)


@dataclass(frozen=True)
class Kind:
    convert: Callable[[Mapping[str, Any]], dict[str, Any]]  # the store's own check and types
    required: tuple[str, ...]  # fields a line must have
    schema: Mapping[str, type]  # the type of each field
    write: Callable[[Store, list[dict[str, Any]]], None]
    noun: str  # for the summary


# The fields of a page record from the first version on: a page line without one of them is
# refused. The fields of focused.storage.PAGE_FIELDS added since may be missing (null).
PAGE_REQUIRED = (
    "crawl_id",
    "url",
    "title",
    "text",
    "level",
    "parent_url",
    "anchor",
    "link_relevance",
    "tfidf",
    "lsi",
    "relevance",
    "is_relevant",
    "strategy",
    "fetch_order",
    "fetched_at",
    "status",
)
RESTORED_SUFFIX = ".restored"  # a file whose records were all written
# The times that tell a page record's version: when it was fetched, or tried in vain by a
# recrawl, which records nothing else (focused.refresh).
VERSION_FIELDS = ("fetched_at", "tried_at")

# In the order they are written back: a recrawl's updates apply to the pages saved before them.
KINDS: dict[str, Kind] = {
    "page": Kind(page_to_save, PAGE_REQUIRED, PAGE_SCHEMA, Store.save_pages, "page"),
    "update": Kind(
        page_update, ("crawl_id", "url"), PAGE_SCHEMA, Store.update_pages, "page update"
    ),
    "finish": Kind(
        _crawl_outcome,
        ("crawl_id", *FINISH_FIELDS),
        CRAWL_SCHEMA,
        _finish_crawls,
        "crawl outcome",
    ),
}


def unstored_dir(settings: Settings | Mapping[str, Any]) -> Path:
    """FOCUSED_UNSTORED_DIR, by default the folder of FOCUSED_DB (the working directory unless
    FOCUSED_DB names another): beside the store the records are for."""
    given = settings.get("FOCUSED_UNSTORED_DIR")
    return Path(given) if given else Path(settings.get("FOCUSED_DB") or DEFAULT_SQLITE_PATH).parent


class PartlyKept(OSError):
    """The file took only the first ``kept`` records of an ``add`` (the disk is full...): they
    are in it whole, the others are not."""

    def __init__(self, kept: int, cause: OSError) -> None:
        super().__init__(*cause.args)  # its errno and strerror, or its message
        self.kept = kept


class UnstoredFile:
    """The file of one run of a crawl, made at its first record: the pipeline may add the
    crawl's outcome after its pages. Raises PartlyKept when it cannot be written (with
    ``kept`` 0 when the folder or file cannot be made), ValueError or TypeError for a record
    the store would refuse as well."""

    def __init__(self, folder: Path, crawl_id: str, prefix: str = "unstored") -> None:
        # To the microsecond: the processes of a shared crawl may close in the same second.
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        name = re.sub(r"[^\w.-]", "_", crawl_id)  # an id from the store may hold a slash
        self.path = folder.absolute() / f"{prefix}-{name}-{stamp}.jsonl"  # for a log read later
        self._made = False

    def add(self, kind: str, records: Iterable[Mapping[str, Any]]) -> None:
        convert = KINDS[kind].convert
        # ASCII (json's default escapes): any text, a lone surrogate too, loads back as it was.
        lines = [
            json.dumps({"kind": kind, "record": convert(record)}).encode() + b"\n"
            for record in records
        ]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # "x": never into another's file. Unbuffered: what a failed write leaves is known.
            file = self.path.open("ab" if self._made else "xb", buffering=0)
        except OSError as exc:
            raise PartlyKept(0, exc) from exc
        made_now, self._made = not self._made, True
        with file:
            start = whole = file.seek(0, os.SEEK_END)  # whole: the end of the last whole line
            kept = 0
            try:
                for line in lines:
                    view = memoryview(line)
                    while view:  # a write cut short by a full disk fails at the next
                        view = view[file.write(view) :]
                    whole += len(line)
                    kept += 1
            except OSError as exc:
                self._cut(file, whole, made_now)
                raise PartlyKept(kept, exc) from exc
            try:
                os.fsync(file.fileno())  # on disk before the log says the records are kept
            except OSError as exc:  # any of them may be lost
                self._cut(file, start, made_now)
                raise PartlyKept(0, exc) from exc

    def _cut(self, file: FileIO, size: int, made_now: bool) -> None:
        """Leave only the whole lines, the first ``size`` bytes: a line cut short would be left
        out by `scrapy restore`, and a record added later (the crawl's outcome) glued to it."""
        file.truncate(size)
        if made_now and not size:  # nothing kept: no file to mislead
            self.path.unlink()
            self._made = False


@dataclass
class Unstored:
    """The records of the files given to ``scrapy restore``, checked, by kind in file order."""

    records: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {kind: [] for kind in KINDS}
    )
    cut_short: list[str] = field(default_factory=list)  # files whose last line was left out

    def crawl_ids(self) -> list[str]:
        return sorted(
            {record["crawl_id"] for records in self.records.values() for record in records}
        )

    def summary(self) -> str:
        """What the records are, e.g. ``12 pages, 1 crawl outcome of crawl c1``."""
        counts = [
            counted(len(records), KINDS[kind].noun)
            for kind, records in self.records.items()
            if records
        ]
        crawls = self.crawl_ids()
        return f"{', '.join(counts)} of crawl{'s' * (len(crawls) > 1)} {', '.join(crawls)}"


def read_unstored(paths: Sequence[str]) -> Unstored:
    """Every record of the files, checked before any is written: a file that is not one of
    unstored records, or a record the store would refuse, is a ``ConfigError`` naming its line."""
    unstored = Unstored()
    for path in paths:
        name = cut(path)  # for messages
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{name} is not a file of unstored records: not UTF-8 text") from None
        except OSError as exc:
            raise ConfigError(f"cannot read {name}: {exc.strerror or exc}") from None
        lines = text.split("\n")
        last = lines.pop()  # "" after the newline that ends a whole file
        for number, line in enumerate(lines, 1):
            try:
                entry = load_json(line)
            except ValueError as exc:
                raise ConfigError(f"{name}, line {number}: not a JSON record ({exc})") from None
            _add(unstored, f"{name}, line {number}", entry)
        if last:
            try:
                entry = load_json(last)
            except ValueError:
                unstored.cut_short.append(path)  # the write a crash cut short
            else:
                _add(unstored, f"{name}, line {len(lines) + 1}", entry)
                lines.append(last)
        if not lines:
            raise ConfigError(f"{name} holds no unstored records")
    return unstored


def _add(unstored: Unstored, where: str, entry: Any) -> None:
    if not isinstance(entry, dict) or set(entry) != {"kind", "record"}:
        raise ConfigError(f'{where}: not an unstored record ({{"kind": ..., "record": ...}})')
    kind, record = entry["kind"], entry["record"]
    if not isinstance(kind, str) or kind not in KINDS:
        raise ConfigError(f"{where}: unknown kind {quoted(kind)}; known: {', '.join(KINDS)}")
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: its record is not a JSON object")
    missing = [name for name in KINDS[kind].required if name not in record]
    if missing:
        raise ConfigError(f"{where}: a {kind} record without {', '.join(missing)}")
    if problem := wrong_kind(KINDS[kind].schema, record):
        raise ConfigError(f"{where}: {problem}")
    try:
        converted = KINDS[kind].convert(record)
    except (ValueError, TypeError, OverflowError) as exc:  # int(1e400): overflow
        raise ConfigError(f"{where}: {cut(str(exc))}") from None  # float() quotes it whole
    # What the store would refuse only once writing, with a traceback: more than 64 bits
    # (SQLite, BSON), text that is not UTF-8 (a lone surrogate, from a JSON escape); and a
    # score no crawl gives (NaN, infinity), which would sort and compare as no score does.
    for name, value in converted.items():
        if isinstance(value, int) and abs(value) > sys.maxsize:
            raise ConfigError(f"{where}: {name}={value} is too large: at most {sys.maxsize}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}: {name}={value} is not a finite number")
        if isinstance(value, str) and not is_text(value):
            raise ConfigError(f"{where}: {name} is not UTF-8 text")
    unstored.records[kind].append(converted)


def mark_restored(path: str) -> Path:
    """Rename the file ``path``, whose records were all written, to ``<name>.restored`` (a name
    that already ends so stays) and return its new path: ``unstored-*.jsonl`` no longer names
    it, and a second restore would write its older records over what changed since. Raises
    OSError (``FileExistsError`` rather than replace another file; ``EINVAL`` for what is no
    regular file)."""
    source = Path(path)
    if source.name.endswith(RESTORED_SUFFIX):
        return source
    if not stat.S_ISREG(source.lstat().st_mode):
        # A link (/dev/stdin, the system's, for `restore /dev/stdin < FILE`) would be renamed
        # and not its file; a pipe or a device has no records left to restore again.
        raise OSError(errno.EINVAL, "not a regular file", str(source))
    target = source.with_name(source.name + RESTORED_SUFFIX)
    if target.exists():
        raise FileExistsError(errno.EEXIST, "the file exists", str(target))
    source.rename(target)
    return target


def restore(store: Store, unstored: Unstored) -> int:
    """Write the records into the store: pages by (crawl_id, url), as the crawl does, but for
    those whose page the store holds in the same or a later version (``_not_stored``). How
    many were left out so."""
    left_out = 0
    for kind, spec in KINDS.items():
        records = unstored.records[kind]
        if kind != "finish":
            records = _not_stored(store, records)
            left_out += len(unstored.records[kind]) - len(records)
        if records:
            spec.write(store, records)
    return left_out


def _not_stored(store: Store, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The page records (or updates) but those whose page the store holds with each of the
    ``VERSION_FIELDS`` times the record has at least as late: the record itself, stored after
    all, or a later fetch of the page, which the record must not put back to an older one."""
    held: dict[tuple[str, str], dict[str, Any]] = {}
    for crawl_id in {record["crawl_id"] for record in records}:
        for page in store.pages(crawl_id, fields=("url", *VERSION_FIELDS)):
            held[crawl_id, page["url"]] = page
    return [
        record
        for record in records
        if not _as_late(held.get((record["crawl_id"], record["url"])), record)
    ]


def _as_late(page: Mapping[str, Any] | None, record: Mapping[str, Any]) -> bool:
    times = [
        (stored_time(page[name]), stored_time(record[name]))
        for name in VERSION_FIELDS
        if page is not None and record.get(name) is not None
    ]
    return bool(times) and all(
        stored is not None and given is not None and stored >= given for stored, given in times
    )
