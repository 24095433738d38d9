"""The MongoDB store (``focused.storage.Store``): several crawls (under Scrapyd, a shared
crawl's processes) write to one database. Opened by ``open_store`` when ``MONGO_URI`` is set,
the only module that imports pymongo: a crawl into SQLite, and every command, starts without
it."""

from __future__ import annotations

import math
import secrets
import warnings
from typing import TYPE_CHECKING, Any

import pymongo
from bson.errors import BSONError
from pymongo.errors import DuplicateKeyError, PyMongoError

from focused.errors import cut, quoted, redact_uri
from focused.storage import (
    CRAWL_SCHEMA,
    CRAWL_SORT,
    DEFAULT_MONGO_DATABASE,
    DEFAULT_MONGO_TIMEOUT_MS,
    LEAST_KNOWN,
    PAGE_SCHEMA,
    RESCORED,
    PageCounts,
    PageQuery,
    SortSpec,
    Store,
    StoreError,
    StoreSettingError,
    error_summary,
    rescoring,
    verdicts_moved,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from pymongo.collection import Collection


# A page holding a value of these a crawl does not write (a document edited in mongosh, which
# writes every number as a double) makes _count_pages leave the count to Store.page_counts.
# $nin and $type "number" look into an array: [50] passed them, and $max took it.
_UNWRITTEN = [
    {"is_relevant": {"$nin": [True, False, None]}},
    {"is_relevant": {"$type": "array"}},
    {"fetch_order": {"$type": "array"}},
    {"fetch_order": {"$ne": None, "$not": {"$type": "number"}}},
    {"fetch_order": {"$type": "double"}},
    {"fetch_order": {"$type": "decimal"}},
    {"fetch_order": {"$lt": 0}},
]


# The marks of the verdicts a batch of ``Store.update_pages`` moves, until they are counted:
# on each page moved, the batch's token and the page's moves (``RESCORED``'s order); in the
# crawl record, the tokens of the batches not yet counted. Neither is a field of a record.
MOVED_BY = "rescored_by"
PENDING = "rescored_pending"


def _page_moves(
    updates: list[dict[str, Any]], stored: Mapping[tuple[str, str], Any]
) -> dict[tuple[str, str], tuple[int, int]]:
    """``verdicts_moved`` per page (crawl_id, url) of those it moves."""
    per_page: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for update in updates:
        per_page.setdefault((update["crawl_id"], update["url"]), []).append(update)
    return {
        key: moved[key[0]]
        for key, its in per_page.items()
        if (moved := verdicts_moved(its, stored))
    }


def _location(uri: str, database: str) -> str:
    """The URI, without its password, with the database used (``MONGO_DATABASE``) where a
    MongoDB URI names one: after the hosts, before the options. Appended, it came after them
    (``mongodb://host/?tls=true/focused``). The URI is not parsed: an invalid one is shown too,
    in the error that says so."""
    address, mark, options = redact_uri(uri).partition("?")
    scheme, separator, rest = address.partition("://")
    hosts = rest.partition("/")[0]
    return f"{scheme}{separator}{hosts}/{database}{mark}{options}"


class MongoStore(Store):
    """A MongoDB database: several crawls (e.g. under Scrapyd) can write to one place.

    ``client`` injects a ready client (e.g. ``mongomock.MongoClient()`` in tests); the store then
    leaves closing it to the caller. ``create=False`` (a reader) leaves the database as it is:
    no indexes, so no database, are created.
    """

    backend = "MongoDB"
    errors = (PyMongoError,)
    # bson's own (a value of no BSON type, a document too large), none a PyMongoError.
    refusals = (BSONError, *Store.refusals)
    threadsafe = True

    def __init__(
        self,
        uri: str,
        database: str = DEFAULT_MONGO_DATABASE,
        client: Any = None,
        *,
        timeout_ms: int = DEFAULT_MONGO_TIMEOUT_MS,
        create: bool = True,
    ) -> None:
        self.location = cut(_location(uri, database))  # for messages
        self._owns_client = client is None
        if client is None:
            try:
                with warnings.catch_warnings():
                    # pymongo warns of an option whose value it cannot read, and ignores it.
                    warnings.simplefilter("error", UserWarning)
                    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=timeout_ms)
            # What the client raises as it is made is about the URI and its options: malformed
            # (ValueError), or naming a TLS file that cannot be read (OSError) or holds no PEM
            # certificate (pyOpenSSL's Error, no OSError): each was a traceback. A bad setting,
            # as the crawl takes it (exit status 2): the reading commands said 1, as of a
            # server that does not answer.
            except Exception as exc:
                raise StoreSettingError(
                    f"MongoDB URI {quoted(redact_uri(uri))} is invalid: {error_summary(exc)}"
                ) from exc
        self._client = client
        db = client[database]  # a name open_store checked: pymongo refuses none of them
        self._pages: Collection = db["pages"]
        self._crawls: Collection = db["crawls"]
        try:
            with self._failing(f"reach the server within {timeout_ms} ms"):
                db.command("ping")
            if create:
                with self._failing("create indexes"):
                    self._pages.create_index([("crawl_id", 1), ("url", 1)], unique=True)
                    self._pages.create_index([("crawl_id", 1), ("relevance", 1)])
                    self._pages.create_index([("crawl_id", 1), ("level", 1)])
                    # Covers _count_pages: the counted fields read from it, not from pages.
                    self._pages.create_index(
                        [("crawl_id", 1), ("fetch_order", 1), ("is_relevant", 1)]
                    )
                    # The pages of a batch whose count is pending (``_marked_moves``), read
                    # by every crawl record read until it is counted (a recrawl's heartbeat
                    # meets one each time it beats during a batch): a scan of the crawl's
                    # pages each time without it. Sparse: only the pages marked are in it.
                    self._pages.create_index([(f"{MOVED_BY}.token", 1)], sparse=True)
                    self._crawls.create_index("crawl_id", unique=True)
        except StoreError:
            self.close()
            raise

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    @staticmethod
    def _decode(schema: Mapping[str, type], document: Mapping[str, Any]) -> dict[str, Any]:
        return {name: document.get(name) for name in schema}

    def _find(
        self,
        collection: Collection,
        schema: Mapping[str, type],
        where: dict[str, Any],
        sort: SortSpec,
        limit: int | None,
        marks: tuple[str, ...] = (),
    ) -> Iterator[dict[str, Any]]:
        """The documents matching ``where``, read as they are taken (a batch at a time), with
        the ``marks`` (no field of a record) they have."""
        projection = {"_id": 0, **dict.fromkeys(schema, 1), **dict.fromkeys(marks, 1)}
        cursor = collection.find(where, projection).sort(list(sort))
        if limit is not None:
            cursor = cursor.limit(limit)
        for document in cursor:
            found = {name: document[name] for name in marks if name in document}
            yield {**self._decode(schema, document), **found}

    def _insert_crawl(self, crawl: dict[str, Any]) -> bool:
        try:
            # A copy: pymongo adds the document's _id to the dict it is given.
            self._crawls.insert_one(dict(crawl))
        except DuplicateKeyError:  # the unique index on crawl_id
            return False
        return True

    def _upsert_pages(self, pages: list[dict[str, Any]]) -> None:
        self._pages.bulk_write(
            [
                pymongo.ReplaceOne(
                    {"crawl_id": page["crawl_id"], "url": page["url"]}, page, upsert=True
                )
                for page in pages
            ],
            ordered=False,
        )

    def _update_pages(self, updates: list[dict[str, Any]]) -> None:
        # Counted with no transaction (a server without a replica set has none): each page
        # whose verdict moves carries its moves and the batch's token (``MOVED_BY``) in the
        # write that moves it, and the token waits in its crawl record (``PENDING``) from
        # before the pages are written until the one update that adds their moves takes it
        # out. A write failing anywhere between leaves the token there: the next batch, the
        # retry's or a later run's, counts the moves the pages carry, once. Counted after the
        # pages alone, those of a failed count were lost: the retry found the verdicts moved.
        urls: dict[str, list[str]] = {}
        for crawl_id, url in rescoring(updates):
            urls.setdefault(crawl_id, []).append(url)
        verdict = {"_id": 0, "url": 1, "is_relevant": 1}
        stored = {
            (crawl_id, page["url"]): page.get("is_relevant")
            for crawl_id, among in urls.items()
            for page in self._pages.find({"crawl_id": crawl_id, "url": {"$in": among}}, verdict)
        }
        # A page's updates as one, the later's fields over the earlier's: an unordered bulk
        # write runs them in no fixed order.
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        for update in updates:
            key = (update["crawl_id"], update["url"])
            merged[key] = {**merged.get(key, {}), **update}
        moves = _page_moves(updates, stored)
        token = secrets.token_hex(8)
        moving = {crawl_id for crawl_id, _ in moves}
        counting = [
            crawl_id
            for crawl_id in dict.fromkeys(crawl_id for crawl_id, _ in merged)
            if self._settle(crawl_id, token if crawl_id in moving else None)
        ]
        marks = {
            key: {MOVED_BY: {"token": token, "moved": list(moved)}}
            for key, moved in moves.items()
            if key[0] in counting
        }
        # A page not moved loses a mark a failure left on it, of a batch counted already.
        unmarked = {"$unset": {MOVED_BY: ""}}
        self._pages.bulk_write(
            [
                pymongo.UpdateOne(
                    {"crawl_id": key[0], "url": key[1]},
                    {"$set": {**update, **marks[key]}}
                    if key in marks
                    else {"$set": update, **unmarked},
                )
                for key, update in merged.items()
            ],
            ordered=False,
        )
        for crawl_id in counting:
            its = {url: moved for (among, url), moved in moves.items() if among == crawl_id}
            became = sum(now for now, _ in its.values())
            lost = sum(no_longer for _, no_longer in its.values())
            self._count_moves(crawl_id, token, (became, lost), list(its))

    def _settle(self, crawl_id: str, token: str | None) -> bool:
        """Count the moves of the batches whose count a failure cut off (their tokens still in
        the crawl record's ``PENDING``), and make ``token`` pending: whether it is, the record
        counting moves. A record without the counts (written before them) is left without:
        $inc would start them at the verdicts of this recrawl only."""
        where = {"crawl_id": crawl_id, **{name: {"$type": "number"} for name in RESCORED}}
        if token is None:
            record = self._crawls.find_one(where)
        else:
            record = self._crawls.find_one_and_update(where, {"$push": {PENDING: token}})
        if record is None:
            return False
        for earlier in record.get(PENDING) or []:
            self._count_moves(crawl_id, earlier)
        return token is not None

    def _count_moves(
        self,
        crawl_id: str,
        token: str,
        moved: tuple[int, int] | None = None,
        urls: list[str] | None = None,
    ) -> None:
        """Add the moves of batch ``token`` to the crawl record's counts, if it is pending
        there, and take the marks off its pages. ``moved`` and ``urls``: the moves, and the
        pages that carry them, of a batch whose pages were all written; else they are read
        from the pages (``_marked_moves``, after a failure only)."""
        marked: dict[str, Any] = {"crawl_id": crawl_id, f"{MOVED_BY}.token": token}
        if moved is None:
            moved = self._marked_moves(crawl_id, token)
        counts = dict(zip(RESCORED, moved, strict=True))
        self._crawls.update_one(
            {"crawl_id": crawl_id, PENDING: token}, {"$inc": counts, "$pull": {PENDING: token}}
        )
        if urls is not None:
            marked["url"] = {"$in": urls}
        # A mark a failure leaves here is of a token no longer pending: never counted again,
        # and taken off as its page is next updated.
        self._pages.update_many(marked, {"$unset": {MOVED_BY: ""}})

    def _marked_moves(self, crawl_id: str, token: str) -> tuple[int, int]:
        """The moves the crawl's pages carry of batch ``token`` (``RESCORED``'s order), the
        marked pages read through their index."""
        became = lost = 0
        marked = {"crawl_id": crawl_id, f"{MOVED_BY}.token": token}
        for page in self._pages.find(marked, {"_id": 0, MOVED_BY: 1}):
            now, no_longer = page[MOVED_BY]["moved"]
            became, lost = became + now, lost + no_longer
        return became, lost

    def _update_crawl(
        self, crawl_id: str, fields: dict[str, Any], where: dict[str, Any] | None = None
    ) -> bool:
        # A condition on None matches a field null or missing (a document written before it).
        found = self._crawls.update_one({**(where or {}), "crawl_id": crawl_id}, {"$set": fields})
        return found.matched_count > 0

    def _find_crawls(self, crawl_id: str | None, *, limit: int | None) -> list[dict[str, Any]]:
        where = {} if crawl_id is None else {"crawl_id": crawl_id}
        found = list(self._find(self._crawls, CRAWL_SCHEMA, where, CRAWL_SORT, limit, (PENDING,)))
        for crawl in found:
            # The moves of a batch whose count a failure cut off, that the crawl's next update
            # counts (``_settle``): read with those counted, as SQLite counts them in the
            # pages' write. Read without, they were lost to the report, and to a run resumed
            # before that update, which took them for relevant pages it found
            # (``focused.resume.recover_state``). Counted and taken out in one update, a token
            # is never in both the counts and PENDING.
            for token in crawl.pop(PENDING, None) or []:
                moved = self._marked_moves(crawl["crawl_id"], token)
                for name, more in zip(RESCORED, moved, strict=True):
                    if isinstance(crawl[name], int | float) and not isinstance(crawl[name], bool):
                        crawl[name] += more
        return found

    def _find_pages(self, query: PageQuery) -> Iterator[dict[str, Any]]:
        where: dict[str, Any] = {"crawl_id": query.crawl_id}
        unknown = []
        for name, known in query.known.items():
            # NaN sorts and compares below -infinity in MongoDB.
            number = {
                "$type": "number",
                "$gt": -math.inf,
                "$lt": math.inf,
                "$gte": LEAST_KNOWN[name],
            }
            if known:
                where[name] = number
            else:
                unknown.append({name: number})
        if unknown:
            where["$nor"] = unknown  # none of them known
        if query.min_relevance is not None:
            where["relevance"] = {**where["relevance"], "$gte": query.min_relevance}
        if query.level is not None:
            where["level"] = query.level
        if query.relevant_only:
            # As SQLite's `is_relevant = 1` and _read_as take it: true matches no number here, and
            # 1 matches the int and the double (mongosh's) 1.
            where["is_relevant"] = {"$in": [True, 1]}
        schema = {name: PAGE_SCHEMA[name] for name in query.fields}
        return self._find(self._pages, schema, where, query.sort, query.limit)

    def _count_pages(self, crawl_id: str) -> PageCounts | None:
        if self._pages.count_documents({"crawl_id": crawl_id, "$or": _UNWRITTEN}, limit=1):
            return None
        relevant = {"$cond": [{"$eq": ["$is_relevant", True]}, 1, 0]}
        counts = {"stored": {"$sum": 1}, "relevant": {"$sum": relevant}}
        group = {"_id": None, **counts, "last": {"$max": "$fetch_order"}}
        found = list(self._pages.aggregate([{"$match": {"crawl_id": crawl_id}}, {"$group": group}]))
        if not found:  # no page: no group
            return PageCounts()
        return PageCounts(found[0]["stored"], found[0]["relevant"], found[0]["last"] or 0)
