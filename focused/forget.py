"""Removing a shared crawl's keys from its Redis (``scrapy forget``).

A crawl shared over Redis (``FOCUSED_FRONTIER``) leaves its keys there when it ends, on
purpose: an interrupted crawl's frontier is what a restart goes on from, and a finished crawl's
what it goes on from with a larger page budget. Once a crawl is done with, ``forget`` removes:

- only the crawl's own keys: those under its prefix whose names are in ``KEY_NAMES``, and none
  under the prefix of a crawl nested in it (a crawl id may hold ":": crawl ``a:b``'s keys
  start with crawl ``a``'s prefix);
- found with SCAN, never KEYS (which blocks a big Redis while it walks every key), removed
  with UNLINK (freed in Redis's background thread), ``BATCH`` keys a call;
- the crawl's ``order`` first, in the same step that checks that no process of the crawl is
  alive (``REMOVE_ORDER``): a process looks for it at each heartbeat and stops without it
  (``SharedCrawl.keys_kept``), and a process starting is refused while the crawl's seen set is
  there without it (``RECORD_ORDER``), so none crawls on in keys half removed.
"""

from __future__ import annotations

from typing import NamedTuple

import redis

from focused.distributed import KEY_NAMES, crawl_prefix
from focused.errors import load_json

SCAN_COUNT = 1000  # keys SCAN looks at a call: one round trip per thousand keys of the server
BATCH = 500  # keys a call of UNLINK removes


class Forgotten(NamedTuple):
    """What ``remove`` did: the keys removed, and the processes of the crawl alive then."""

    removed: int
    live: int


def crawl_keys(client: redis.Redis, crawl_id: str) -> list[bytes]:
    """The keys of crawl ``crawl_id`` now, found with SCAN."""
    prefix = crawl_prefix(crawl_id).encode()
    keys = list(client.scan_iter(match=_glob_escape(prefix) + b"*", count=SCAN_COUNT))
    # Another crawl nested in this one is told by its order, a JSON object (check_frontier): a
    # key of this crawl ending in ":order" (a host named "order") holds no such thing.
    nested = [
        key.removesuffix(b"order")
        for key in keys
        if key.endswith(b":order") and key != prefix + b"order" and _is_order(client, key)
    ]
    return [
        key
        for key in keys
        if KEY_NAMES.fullmatch(key.removeprefix(prefix))
        and not any(key.startswith(other) for other in nested)
    ]


def queued_requests(client: redis.Redis, crawl_id: str, keys: list[bytes]) -> int:
    """The requests crawl ``crawl_id`` has queued or under way (``keys``: its keys)."""
    prefix = crawl_prefix(crawl_id).encode()
    queues = [prefix + b"frontier", prefix + b"back"]
    queues += [key for key in keys if key.startswith(prefix + b"inflight:")]
    pipe = client.pipeline(transaction=False)
    for key in queues:
        pipe.zcard(key)
    return sum(pipe.execute())


def live_workers(client: redis.Redis, crawl_id: str, timeout: float) -> int:
    """The processes of crawl ``crawl_id`` alive: a heartbeat at most ``timeout`` seconds old."""
    return _remove_order(client, crawl_id, timeout, "count")[0]


def remove(
    client: redis.Redis, crawl_id: str, keys: list[bytes], timeout: float, force: bool
) -> Forgotten | None:
    """Remove ``keys``, the keys of crawl ``crawl_id``: None, having removed nothing, if a
    process of the crawl is alive (a heartbeat at most ``timeout`` seconds old) and not
    ``force``."""
    live, removed = _remove_order(client, crawl_id, timeout, "force" if force else "unless-live")
    if removed < 0:
        return None
    for start in range(0, len(keys), BATCH):
        removed += client.unlink(*keys[start : start + BATCH])
    return Forgotten(removed, live)


def _remove_order(client: redis.Redis, crawl_id: str, timeout: float, mode: str) -> list[int]:
    keys = [crawl_prefix(crawl_id) + "workers", crawl_prefix(crawl_id) + "order"]
    return client.eval(REMOVE_ORDER, len(keys), *keys, timeout, mode)


def _is_order(client: redis.Redis, key: bytes) -> bool:
    """Whether ``key`` holds a crawl's order (a JSON object naming its strategy)."""
    try:
        order = load_json(client.get(key) or b"")
    except (redis.ResponseError, ValueError):  # no string: a host's places (conc:order)
        return False
    return isinstance(order, dict) and "strategy" in order


def _glob_escape(text: bytes) -> bytes:
    """``text`` matched literally by a SCAN MATCH pattern."""
    for special in (b"\\", b"*", b"?", b"[", b"]"):
        text = text.replace(special, b"\\" + special)
    return text


# The live processes of a crawl (a heartbeat at most ARGV[1] seconds old), and the crawl's order
# removed in the same step: unless one is alive (ARGV[2] 'unless-live'), whatever (ARGV[2]
# 'force'), or never ('count'). KEYS: workers, order. Returns {live, 1 if the order was removed,
# 0 if there was none, -1 if it was left}.
REMOVE_ORDER = """
local now = tonumber(redis.call('TIME')[1])
local live = 0
local beats = redis.call('HGETALL', KEYS[1])
for i = 2, #beats, 2 do
  if now - tonumber(beats[i]) <= tonumber(ARGV[1]) then live = live + 1 end
end
if ARGV[2] == 'force' or (ARGV[2] == 'unless-live' and live == 0) then
  return {live, redis.call('DEL', KEYS[2])}
end
return {live, -1}
"""
