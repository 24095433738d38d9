"""The frontier of a crawl shared by many processes, in Redis (``-s FOCUSED_FRONTIER=redis://...``).

A drop-in for ``MemoryFrontier``/``SqliteFrontier`` (same methods), so every strategy whose
order is ``score()`` and ``tiebreak()`` runs distributed unchanged. Keys, under
``focused:<crawl_id>:``:

- ``frontier``: sorted set; the score is the strategy's float score, the member is
  ``tiebreak (8 bytes) + sequence (15 digits) + fingerprint``, so that members of equal score
  sort by tiebreak, then by discovery order (both encoded to sort as bytes), as the local
  frontiers do. ``ZPOPMAX`` pops the best.
- ``back``: the same for requests of a trap family (``focused.traps``), popped only when
  ``frontier`` is empty. A dead worker's in-flight requests go back to ``frontier``.
- ``members``: hash fingerprint -> its member, to find a queued URL again (rediscovery).
- ``requests``: hash fingerprint -> the request's host, a newline and the pickled request,
  kept until the request is done; ``ranked`` reads the hosts alone (a request stored by an
  older version, the pickle alone, is unpickled for its host).
- ``inflight:<worker>``: sorted set of what one worker popped and has not finished; it goes
  back to the frontier when the worker closes, or is found dead (``requeue``).
- ``seq`` (discovery order) and ``popped`` (requests handed out: the shared page budget).
- ``paths``: hash fingerprint -> the path of a queued request of a strategy that merges the
  paths of a URL's discoveries (shark: ``StrategyQueue.shared_merge``), merged in Redis as each
  discovery is put, whichever process found it; a popped request takes it into its meta.
- ``left_out`` (set) and ``left_out_past`` (flag): the links the strategy left out by its
  parameter in any process, at most ``LEFT_OUT_KEPT`` and none seen, and whether there were more
  (``leave_out``, sent with an ack; ``count_left_out``, at the close: ``focused.scheduler``).

``FRONTIER_MAX`` bounds it as it bounds the local frontiers: ``evict_worst`` pops the
lowest-ranked members (``ZPOPMIN``) and drops their stored requests, in one script.

Every change is one Lua script, so concurrent processes never see half of one. Requests are
pickled: the Redis server must be as trusted as the crawl's own JOBDIR.

``put`` only buffers: a page's links reach Redis in one script call (``flush``), not one round
trip each. Everything else that reads or changes the frontier flushes first (``key_of`` only
when the URL asked for is buffered: nothing else changes its key), ``ack`` among them, so a
page is marked done only once its links are in Redis (a process killed with links buffered has
its page put back by the others); so does a buffer of ``FLUSH_EVERY`` requests. A URL buffered
counts as seen in this process (``RedisDupeFilter``), so a page's second link to it is a
rediscovery, as it is once in Redis. While links are buffered, ``len()`` adds them to what
Redis held when this process last looked, so that the scheduler's look after each link queued
costs no round trip.

Most links of a page lead to URLs found before, and this process answers for most of them
without Redis (``seen``, ``key_to_beat``). The seen set only grows (a shared crawl forgets no
URL: ``StrategyQueue.runs_distributed``), so a URL once known seen here stays seen. And a queued
request's key only gets better (PUT raises, never lowers; a request in ``frontier`` never moves
to ``back``), so a key this process put, or found queued in ``frontier``, bounds the key queued
now. A URL this process took out is not queued: only the process that took it out queues it
again (a retry, a page sent back to be rendered: ``dont_filter``, put here with its key), or
the others when they take this process for dead. A rediscovery no better than the bound known
is refused without KEY_OF, as it would be with it; of a strategy that merges paths, it is sent
with the page's links for its path alone (``merge_path``), unless its URL was taken out. A
strategy that re-keys queued requests (``StrategyQueue.rekeys``) has only the URLs taken out
as bounds.
"""

from __future__ import annotations

import logging
import math
import struct
from typing import TYPE_CHECKING

from focused.errors import one_line
from schedulers.base import (
    DAMAGED_STAT,
    RANKED_CHUNK,
    at_back,
    dump_request,
    host_of,
    load_request,
)

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from scrapy import Request

    from focused.distributed import SharedCrawl
    from schedulers.base import Key, StrategyQueue

INFLIGHT_META = "focused_inflight"  # meta key: the frontier member of a popped request
TIEBREAK_BYTES = 8
SEQ_DIGITS = 15  # discovery order as 999999999999999 - seq: earlier sorts higher
FP_START = TIEBREAK_BYTES + SEQ_DIGITS  # where the fingerprint starts in a member
BUDGET_SPENT = b"budget"
DROPPED = object()  # what _take_one gives for a request it dropped (_drop)
FLUSH_EVERY = 500  # at most this many requests wait in put's buffer (a page has 25-100 links)
PUT_ARGS = 7  # PUT's arguments per request
HOST_END = b"\n"  # ends the host that starts a stored request (no host name holds one)
PICKLE_START = b"\x80"  # how a pickle of protocol 2 or later starts: a request stored hostless
RANKED_CHUNK_MAX = 1024  # the most requests ranked() reads in one call
# Fingerprints known here as seen, with their bounds (about 200 bytes each): past this many the
# record starts again, and what is met again is asked of Redis again.
KNOWN_MAX = 200_000
# (-score, -tiebreak) bounds of a URL seen: a rediscovery raises the URL only if its own is less.
SEEN_ONLY = (math.inf, math.inf)  # no bound known: ask Redis (KEY_OF)
TAKEN_OUT = (-math.inf, -math.inf)  # not queued: no rediscovery raises it

# Lua: whether tiebreak bytes a sort above b (bytewise: Lua's < on strings follows the server's
# locale).
GREATER = """
local function greater(a, b)
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return false
end
"""

# Insert requests, or raise the place (score, then tiebreak) of one queued: a rediscovery never
# lowers a URL. A new URL joins the seen set in the same step, so that a URL can never be seen
# without being queued (Redis lost between the two would lose it for good); one another process
# saw meanwhile is not queued again, unless the request is dont_filter (a retry). A request at
# the back (at_back = '1') goes to the back set; moving from the back to the front raises a URL,
# the other way lowers it. The requests are put in their order, each as if alone (a page's
# links in one call: RedisFrontier.flush).
# The path of a strategy that merges paths (``StrategyQueue.shared_path``; '' for none) is kept
# in ``paths`` beside a queued request, merged in the same step with the path of every other
# discovery of its URL by the strategy's Lua ``merge(kept, other)`` (kept: the discovery with
# the better score), so that a discovery by any process, raising the URL or not (blob '': a
# discovery known not to raise it, sent for its path only), adds its path to what is queued.
# Returns how many requests both sets hold then, and how many paths a discovery not raising
# its URL changed. KEYS: frontier, members, requests, seq, seen, back, paths.
# ARGV: per request seven: fp, score, tiebreak, blob, dont_filter, at_back, path.
PUT_BODY = """
local merged = 0
-- The path of the URL queued under fp once a discovery of path ``path`` is put: kept as the
-- request's own if it is ``new`` (added, or raising the URL), else merged into the queued one.
local function fold(fp, path, new, added)
  local queued = not added and redis.call('HGET', KEYS[7], fp)
  if new then
    if path == '' then
      if queued then redis.call('HDEL', KEYS[7], fp) end
    else
      redis.call('HSET', KEYS[7], fp, queued and merge(path, queued) or path)
    end
  elseif queued and path ~= '' then
    local folded = merge(queued, path)
    if folded ~= queued then
      redis.call('HSET', KEYS[7], fp, folded)
      merged = merged + 1
    end
  end
end
local function put(fp, score_arg, tiebreak, blob, dont_filter, at_back, path)
  local score = tonumber(score_arg)
  local queue = at_back == '1' and KEYS[6] or KEYS[1]
  local old = redis.call('HGET', KEYS[2], fp)
  local old_queue = KEYS[1]
  local seq
  if old then
    if blob == '' then return fold(fp, path, false) end
    local old_score = redis.call('ZSCORE', KEYS[1], old)
    if not old_score then
      old_queue = KEYS[6]
      old_score = redis.call('ZSCORE', KEYS[6], old)
    end
    old_score = tonumber(old_score)
    if queue ~= old_queue then
      if queue == KEYS[6] then return fold(fp, path, false) end
    elseif score < old_score then return fold(fp, path, false)
    elseif score == old_score then
      if not greater(tiebreak, string.sub(old, 1, 8)) then return fold(fp, path, false) end
    end
    seq = string.sub(old, 9, 23)
  else
    if blob == '' then return end
    if redis.call('SADD', KEYS[5], fp) == 0 and dont_filter ~= '1' then return end
    seq = string.format('%015d', 999999999999999 - redis.call('INCR', KEYS[4]))
  end
  local member = tiebreak .. seq .. fp
  if member == old and queue == old_queue then
    redis.call('ZADD', queue, 'GT', score_arg, member)
  else
    if old then redis.call('ZREM', old_queue, old) end
    redis.call('ZADD', queue, score_arg, member)
    redis.call('HSET', KEYS[2], fp, member)
  end
  redis.call('HSET', KEYS[3], fp, blob)
  fold(fp, path, true, not old)
end
for i = 1, #ARGV, 7 do
  put(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6])
end
return {redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[6]), merged}
"""
# The merge of a strategy that merges no paths (its paths are all '').
KEEP_PATH = "local function merge(kept, other) return kept end\n"


def put_script(merge: str = KEEP_PATH) -> str:
    """PUT with the strategy's Lua ``merge`` (``StrategyQueue.shared_merge``)."""
    return GREATER + merge + PUT_BODY


PUT = put_script()

# Pop the best request (from the back set when the frontier is empty), or the queued request of
# fingerprint ARGV[2] if one is given (one a look ahead chose), into this worker's in-flight
# set, unless the page budget is spent. A member whose stored request is gone is dropped, and
# the next one popped: a retry queued by a worker taken for dead, of a request that the worker
# which took its work fetched meanwhile (its ACK dropped the request stored under their one
# fingerprint; nothing is left to fetch), or a key evicted by Redis. Returns the member, the
# stored request and its merged path (PUT), if any.
# KEYS: frontier, members, requests, popped, inflight, back, paths.
# ARGV: budget (0 = none), fp or ''.
POP = """
local budget = tonumber(ARGV[1])
if budget > 0 and tonumber(redis.call('GET', KEYS[4]) or '0') >= budget then
  return {'budget'}
end
while true do
  local member, score
  if ARGV[2] == '' then
    local top = redis.call('ZPOPMAX', KEYS[1])
    if #top == 0 then top = redis.call('ZPOPMAX', KEYS[6]) end
    if #top == 0 then return {} end
    member, score = top[1], top[2]
  else
    member = redis.call('HGET', KEYS[2], ARGV[2])
    if not member then return {} end
    for _, queue in ipairs({KEYS[1], KEYS[6]}) do
      score = redis.call('ZSCORE', queue, member)
      if score then
        redis.call('ZREM', queue, member)
        break
      end
    end
    if not score then return {} end
  end
  local fp = string.sub(member, 24)
  redis.call('HDEL', KEYS[2], fp)
  local stored = redis.call('HGET', KEYS[3], fp)
  if stored then
    redis.call('ZADD', KEYS[5], score, member)
    redis.call('INCR', KEYS[4])
    return {member, stored, redis.call('HGET', KEYS[7], fp)}
  end
  if ARGV[2] ~= '' then return {} end
end
"""

# Lua: the host a stored request starts with (nil for one stored without it, or none).
HOST_OF = """
local function host_of(stored)
  if not stored or string.byte(stored, 1) == 128 then return nil end
  local host_end = string.find(stored, '\\n', 1, true)
  return host_end and string.sub(stored, 1, host_end - 1)
end
"""

# Lua: the links the strategy left out by its parameter (FocusedScheduler.left_out), ARGV[i + 2]
# on, into the crawl's set of them, but not one seen (queued, or fetched: most are the deepest
# pages' links back home) and no more than ARGV[i] in all (LEFT_OUT_KEPT); one past those, or
# ARGV[i + 1] = '1' (a process past those it kept), sets the flag that more were left out.
LEAVE_OUT = """
local function leave_out(left_out, past, seen, i)
  if ARGV[i + 1] == '1' then redis.call('SET', past, '1') end
  local kept = tonumber(ARGV[i])
  for j = i + 2, #ARGV do
    local fp = ARGV[j]
    if redis.call('SISMEMBER', seen, fp) == 0 and redis.call('SISMEMBER', left_out, fp) == 0 then
      if redis.call('SCARD', left_out) < kept then
        redis.call('SADD', left_out, fp)
      else
        redis.call('SET', past, '1')
      end
    end
  end
end
"""

# A popped request is done. If a worker took this one for dead and put the request back, it
# is taken out again unless another worker popped it meanwhile, and counts against the budget
# again, and with MAX_PAGES_PER_HOST (ARGV[2] = '1') against its host's pages again. The path
# merged for it (PUT) goes with it, and so do the links left out since the last ack, if any
# (LEAVE_OUT): a page's, before it is done. KEYS: inflight, requests, members, frontier,
# popped, host_pages, paths, left_out, left_out_past, seen. ARGV: member, host cap on, and
# with links left out LEAVE_OUT's: most kept, past those kept, their fingerprints.
ACK = (
    HOST_OF
    + LEAVE_OUT
    + """
if #ARGV > 2 then leave_out(KEYS[8], KEYS[9], KEYS[10], 3) end
local fp = string.sub(ARGV[1], 24)
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[2], fp)
  redis.call('HDEL', KEYS[7], fp)
elseif redis.call('HGET', KEYS[3], fp) == ARGV[1] then
  local host = ARGV[2] == '1' and host_of(redis.call('HGET', KEYS[2], fp))
  if host then redis.call('HINCRBY', KEYS[6], host, 1) end
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[3], fp)
  redis.call('HDEL', KEYS[2], fp)
  redis.call('HDEL', KEYS[7], fp)
  redis.call('INCR', KEYS[5])
end
"""
)

# The links left out by the crawl's strategy that are not seen, counted at a close that ran
# dry, once LEAVE_OUT has added this process's last (ARGV as LEAVE_OUT's from 1); those seen
# since leave the set: the seen set only grows. Returns that count and 1 if more were left out
# than the set kept. KEYS: left_out, left_out_past, seen.
LEFT_OUT = (
    LEAVE_OUT
    + """
leave_out(KEYS[1], KEYS[2], KEYS[3], 1)
local unseen = 0
for _, fp in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('SISMEMBER', KEYS[3], fp) == 1 then
    redis.call('SREM', KEYS[1], fp)
  else
    unseen = unseen + 1
  end
end
return {unseen, redis.call('EXISTS', KEYS[2])}
"""
)

# A popped request replaced by another (a retry, a redirect) that is queued already: out of
# flight, and its stored request gone unless its URL is queued again (the retry's is stored under
# the same fingerprint), and its merged path (PUT) with it.
# KEYS: inflight, requests, members, paths. ARGV: member.
ACK_REPLACED = """
local fp = string.sub(ARGV[1], 24)
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 and not redis.call('HGET', KEYS[3], fp) then
  redis.call('HDEL', KEYS[2], fp)
  redis.call('HDEL', KEYS[4], fp)
end
"""

# A popped request goes back to the frontier as another (a page sent back to be rendered): it is
# done, and the budget slot its pop took is given back, never below 0; its merged path (PUT)
# goes with it. KEYS: inflight, requests, popped, paths. ARGV: member.
UNPOP = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[2], string.sub(ARGV[1], 24))
  redis.call('HDEL', KEYS[4], string.sub(ARGV[1], 24))
  if tonumber(redis.call('GET', KEYS[3]) or '0') > 0 then redis.call('DECR', KEYS[3]) end
end
"""

# Put a worker's in-flight requests back and forget the worker; their budget is given back,
# and with MAX_PAGES_PER_HOST (ARGV[2] = '1') their hosts' slots (each popped request took one:
# FocusedScheduler._host_full), never below 0, so that another process fetches them within
# the cap. A request whose URL its worker queued again before it was taken for dead (a retry,
# a page sent back to be rendered, queued before the one it replaces is out of flight) is not
# put back beside it: two members of one fingerprint were both popped, the page fetched twice.
# A worker whose heartbeat is at or after ARGV[3] (if given) beat since it was found silent:
# it is alive, and nothing is taken from it.
# KEYS: frontier, members, popped, inflight, workers, requests, host_pages.
# ARGV: worker, host cap on, least live heartbeat or ''.
REQUEUE = (
    HOST_OF
    + """
if ARGV[3] ~= '' then
  local beat = redis.call('HGET', KEYS[5], ARGV[1])
  if beat and tonumber(beat) >= tonumber(ARGV[3]) then return 0 end
end
local entries = redis.call('ZRANGE', KEYS[4], 0, -1, 'WITHSCORES')
for i = 1, #entries, 2 do
  local member = entries[i]
  local fp = string.sub(member, 24)
  if not redis.call('HGET', KEYS[2], fp) then
    redis.call('ZADD', KEYS[1], entries[i + 1], member)
    redis.call('HSET', KEYS[2], fp, member)
  end
  local host = ARGV[2] == '1' and host_of(redis.call('HGET', KEYS[6], fp))
  if host and tonumber(redis.call('HGET', KEYS[7], host) or '0') > 0 then
    redis.call('HINCRBY', KEYS[7], host, -1)
  end
end
redis.call('DEL', KEYS[4])
redis.call('HDEL', KEYS[5], ARGV[1])
local n = #entries / 2
if n > 0 then redis.call('DECRBY', KEYS[3], n) end
return n
"""
)

# Evict the lowest-ranked queued requests (the frontier is full), the back set's (traps) first,
# at most ARGV[1] of them and never below ARGV[2] queued in both sets (0 = no floor): processes
# that find the frontier too large at the same time evict once between them. Evicted URLs stay
# in the seen set, as in SqliteFrontier.
# KEYS: frontier, members, requests, back, paths. ARGV: count, floor. Returns the evicted
# fingerprints.
EVICT = """
local n = tonumber(ARGV[1])
local floor = tonumber(ARGV[2])
if floor > 0 then
  n = math.min(n, redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[4]) - floor)
end
local fps = {}
for _, queue in ipairs({KEYS[4], KEYS[1]}) do
  if n <= 0 then break end
  local worst = redis.call('ZPOPMIN', queue, n)
  for i = 1, #worst, 2 do
    local fp = string.sub(worst[i], 24)
    redis.call('HDEL', KEYS[2], fp)
    redis.call('HDEL', KEYS[3], fp)
    redis.call('HDEL', KEYS[5], fp)
    fps[#fps + 1] = fp
  end
  n = n - #worst / 2
end
return fps
"""

# The member and score of a queued request, if it is queued, and 1 if it is in the back set.
# KEYS: frontier, members, back. ARGV: fp.
KEY_OF = """
local member = redis.call('HGET', KEYS[2], ARGV[1])
if not member then return false end
local score = redis.call('ZSCORE', KEYS[1], member)
if score then return {member, score, 0} end
score = redis.call('ZSCORE', KEYS[3], member)
if not score then return false end
return {member, score, 1}
"""

# The fingerprint and host of each request in ranks ARGV[1] to ARGV[2] of a queue, best first,
# in one call: {fp, host, fp, host, ...}; for a request stored without its host, its pickle in
# place of the host. KEYS: the queue (frontier or back), requests.
RANKED = """
local listed = {}
for _, member in ipairs(redis.call('ZREVRANGE', KEYS[1], ARGV[1], ARGV[2])) do
  local fp = string.sub(member, 24)
  local stored = redis.call('HGET', KEYS[2], fp)
  if stored then
    local host_end = string.byte(stored, 1) ~= 128 and string.find(stored, '\\n', 1, true)
    listed[#listed + 1] = fp
    listed[#listed + 1] = host_end and string.sub(stored, 1, host_end - 1) or stored
  end
end
return listed
"""

# Take a queued request out. KEYS: frontier, members, requests, back, paths. ARGV: fp.
REMOVE = """
local member = redis.call('HGET', KEYS[2], ARGV[1])
if not member then return false end
redis.call('ZREM', KEYS[1], member)
redis.call('ZREM', KEYS[4], member)
redis.call('HDEL', KEYS[2], ARGV[1])
local blob = redis.call('HGET', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
return blob
"""


def encode_tiebreak(value: float) -> bytes:
    """8 bytes whose byte order is the numeric order of ``value`` (IEEE 754, sign-folded)."""
    (bits,) = struct.unpack(">Q", struct.pack(">d", value))
    bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | 1 << 63
    return struct.pack(">Q", bits)


def decode_tiebreak(data: bytes) -> float:
    (bits,) = struct.unpack(">Q", data)
    bits = bits & ~(1 << 63) if bits >> 63 else bits ^ 0xFFFFFFFFFFFFFFFF
    return struct.unpack(">d", struct.pack(">Q", bits))[0]


def decode_member(member: bytes, score: float) -> tuple[bytes, Key]:
    """(fingerprint, the local frontiers' key) of a member and its score."""
    tiebreak = decode_tiebreak(member[:TIEBREAK_BYTES])
    seq = 10**SEQ_DIGITS - 1 - int(member[TIEBREAK_BYTES:FP_START])
    return member[FP_START:], (-score, -tiebreak, seq)


class RedisFrontier:
    """The frontier entries of one crawl, in Redis, shared by every process of the crawl."""

    def __init__(
        self, shared: SharedCrawl, keys_only_rise: bool = True, paths: StrategyQueue | None = None
    ) -> None:
        """``paths``: the strategy whose paths the frontier merges (``shared_path``), if any."""
        self.shared = shared
        self.redis = shared.redis
        self._spider = shared.crawler.spider
        self._budget = shared.crawler.settings.getint("CLOSESPIDER_PAGECOUNT")
        self._max = shared.crawler.settings.getint("FRONTIER_MAX")
        # With a host cap each popped request takes its host's slot (FocusedScheduler._host_full):
        # one put back gives it back.
        self._host_cap = "1" if shared.crawler.settings.getint("MAX_PAGES_PER_HOST") > 0 else "0"
        self._keys = [shared.key(name) for name in ("frontier", "members", "requests")]
        self._back = shared.key("back")
        self._paths_key = shared.key("paths")
        self._paths = paths
        self._put = self.redis.register_script(
            put_script(paths.shared_merge()) if paths is not None else PUT
        )
        self._pop = self.redis.register_script(POP)
        self._ack = self.redis.register_script(ACK)
        self._ack_replaced = self.redis.register_script(ACK_REPLACED)
        self._unpop = self.redis.register_script(UNPOP)
        self._requeue = self.redis.register_script(REQUEUE)
        self._remove = self.redis.register_script(REMOVE)
        self._key_of = self.redis.register_script(KEY_OF)
        self._ranked = self.redis.register_script(RANKED)
        self._evict = self.redis.register_script(EVICT)
        self._left_out = self.redis.register_script(LEFT_OUT)
        self._seen = shared.key("seen")
        self._left_out_keys = [shared.key("left_out"), shared.key("left_out_past"), self._seen]
        # LEAVE_OUT's arguments for the links left out since the last ack (leave_out)
        self._leaving_out: list[bytes | int | str] = []
        self._put_keys = [*self._keys, shared.key("seq"), self._seen, self._back, self._paths_key]
        self._buffer: list[bytes | str] = []  # PUT's arguments of the requests put, in order
        self._buffered: set[bytes] = set()  # their fingerprints
        self._adding: set[bytes] = set()  # those that may add a request: not rediscoveries
        self._found: bytes | None = None  # what key_of found queued: put next, it adds none
        # Requests in both sets when this process last looked, the buffer aside (None: to be
        # looked at again): len() needs no round trip while a page's links are put.
        self._size: int | None = None
        # Fingerprints known to be in the seen set, each with its bound (see the module's
        # docstring); puts and keys found are bounds only if nothing lowers a queued key.
        self._known: dict[bytes, tuple[float, float]] = {}
        self._keys_only_rise = keys_only_rise
        # Whether this process keeps popped requests back, not under way (the scheduler's, held
        # for their host's failed robots.txt or parked): set by the scheduler.
        self.keeps_popped: Callable[[], bool] = lambda: False
        shared.frontier = self

    def put(self, fp: bytes, key: Key, request: Request) -> None:
        request.meta.pop(INFLIGHT_META, None)
        stored = dump_request(request, self._spider)  # may raise ValueError, as SqliteFrontier
        back = at_back(request)
        # Whether it adds the URL or raises it, its key in Redis is this one or better, unless
        # it goes to the back set, which leaves a request queued in front where it is.
        self._know(fp, key[:2] if self._keys_only_rise and not back else SEEN_ONLY)
        self._buffer += [
            fp,
            repr(float(-key[0])),
            encode_tiebreak(float(-key[1])),
            host_of(request).encode() + HOST_END + stored,
            "1" if request.dont_filter else "0",
            str(back),
            self._paths.shared_path(request) if self._paths is not None else "",
        ]
        self._buffered.add(fp)
        if fp != self._found:
            self._adding.add(fp)
        if len(self._buffer) >= PUT_ARGS * FLUSH_EVERY:
            self.flush()

    def merge_path(self, fp: bytes, request: Request) -> None:
        """Merge the path of ``request``, a discovery that does not raise its URL, into the
        request queued under ``fp``, if it is queued, as the request is put: in Redis, where
        every process's discoveries of the URL meet (``PUT``). ``focused/merged`` counts the
        paths it changed."""
        path = self._paths.shared_path(request)
        if not path:
            return  # nothing to merge (a seed's request)
        self._buffer += [fp, "0", b"", b"", "0", "0", path]
        self._buffered.add(fp)
        if len(self._buffer) >= PUT_ARGS * FLUSH_EVERY:
            self.flush()

    def seen(self, fp: bytes) -> bool:
        """Whether ``fp`` is in the crawl's seen set, or was put here and is not in Redis yet;
        Redis is asked only about a fingerprint not known here. Once Redis is lost, every one
        is seen: it could not be queued anyway."""
        if fp in self._known or fp in self._buffered:
            return True
        if not self.shared.run(self.redis.sismember, self._seen, fp, default=True):
            return False
        self._know(fp, SEEN_ONLY)
        return True

    def _know(self, fp: bytes, bound: tuple[float, float]) -> None:
        known = self._known
        if len(known) >= KNOWN_MAX and fp not in known:
            known.clear()  # bounded: what is met again is asked of Redis again
        known[fp] = bound

    def flush(self) -> None:
        """Send the requests put since the last flush to Redis, in one call."""
        self._found = None
        if not self._buffer:
            return
        args, self._buffer = self._buffer, []
        self._buffered.clear()
        self._adding.clear()
        self._size, merged = self.shared.run(
            self._put, keys=self._put_keys, args=args, default=(None, 0)
        )
        if merged:
            self.shared.crawler.stats.inc_value("focused/merged", merged)

    def _changing(self) -> None:
        """Flush before a change other than put, after which the size is to be looked at."""
        self.flush()
        self._size = None

    def pop(self) -> Request | None:
        return self.take(b"")

    def take(self, fp: bytes) -> Request | None:
        """Pop the queued request of fingerprint ``fp`` (one ``ranked`` listed; None if another
        process popped it meanwhile, or it cannot be read), or with ``b""`` the best one that
        can be read."""
        while (taken := self._take_one(fp)) is DROPPED and not fp:
            pass
        return None if taken is DROPPED else taken

    def _take_one(self, fp: bytes) -> Request | object | None:
        self._changing()
        keys = [*self._keys, self.shared.key("popped"), self.shared.inflight_key(), self._back]
        keys.append(self._paths_key)
        popped = self.shared.run(self._pop, keys=keys, args=[self._budget, fp], default=[])
        if popped == [BUDGET_SPENT]:
            # Another process's unfinished requests hold slots of the budget, and a process
            # killed with some gives them back once it is taken for dead: closing now would end
            # the crawl short of its budget with those requests still queued. Wait for them,
            # and for this one's kept back, which are fetched or give their slots back.
            if not self._others_in_flight() and not self.keeps_popped():
                self.shared.budget_spent()
            else:
                self.shared.waiting_for_others = True
            return None
        if not popped:
            return None
        member, stored, path = popped
        self._know(member[FP_START:], TAKEN_OUT)
        try:
            request = self._load(stored, path)
        except Exception as exc:  # unpickling damaged bytes raises about anything
            self._drop(member, one_line(exc))
            return DROPPED
        request.meta[INFLIGHT_META] = member
        return request

    def _drop(self, member: bytes, reason: str) -> None:
        """Drop the popped request whose bytes cannot be read back (written by another program,
        or by hand), as the JOBDIR frontier drops one (``SqliteFrontier._loaded``): done, its
        URL left seen, its budget slot given back. Before, each turn of the engine logged a
        traceback, popping it again, and the crawl fetched nothing more."""
        self.unpop(member)
        logger.warning(
            "%s: a request cannot be read (%s): dropped, its URL not fetched", self._keys[2], reason
        )
        crawler = getattr(self._spider, "crawler", None)
        if crawler is not None and crawler.stats is not None:
            crawler.stats.inc_value(DAMAGED_STAT)

    def _others_in_flight(self) -> bool:
        """Whether another process of the crawl has popped requests it has not finished."""
        shared = self.shared
        workers = shared.run(self.redis.hkeys, shared.key("workers"), default=[]) or []
        return any(
            shared.run(self.redis.zcard, shared.inflight_key(name), default=0)
            for name in (worker.decode() for worker in workers)
            if name != shared.worker
        )

    def ack(self, member: bytes) -> None:
        """The popped request whose member this is has been handled (its links are queued)."""
        self._changing()  # its links are in Redis before it is done
        frontier, members, requests = self._keys
        shared = self.shared
        keys = [shared.inflight_key(), requests, members, frontier, shared.key("popped")]
        keys += [shared.key("host_pages"), self._paths_key, *self._left_out_keys]
        args, self._leaving_out = [member, self._host_cap, *self._leaving_out], []
        shared.run(self._ack, keys=keys, args=args)

    def leave_out(self, fps: list[bytes], past_kept: bool, kept: int) -> None:
        """Links the strategy left out by its parameter (``fps``; ``past_kept``: and more than
        this process keeps), for the crawl's set of them, of at most ``kept``: sent with the
        next ack, a page's before it is done, so that no process counts them
        (``count_left_out``) without them, at no round trip of their own."""
        if not self._leaving_out:
            self._leaving_out = [kept, "0"]
        if past_kept:
            self._leaving_out[1] = "1"
        self._leaving_out += fps

    def count_left_out(self, past_kept: bool, kept: int) -> tuple[int, bool]:
        """How many links the crawl's strategy left out, in any process and any run of the
        crawl, are not seen, the last of this process's added (``leave_out``), in one call;
        and whether more were left out than the crawl's set of them keeps."""
        args = [kept, "1" if past_kept else "0", *self._leaving_out[2:]]
        self._leaving_out = []
        unseen, past = self.shared.run(
            self._left_out, keys=self._left_out_keys, args=args, default=(0, 0)
        )
        return unseen, bool(past)

    def ack_replaced(self, member: bytes) -> None:
        """The popped request whose member this is was replaced by a retry or a redirect, which
        the caller has queued: done once that is in Redis (a kill between the two lost the URL
        for good), without counting it again."""
        self._changing()  # the successor is in Redis before its predecessor is done
        keys = [self.shared.inflight_key(), self._keys[2], self._keys[1], self._paths_key]
        self.shared.run(self._ack_replaced, keys=keys, args=[member])

    def unpop(self, member: bytes) -> None:
        """The popped request whose member this is comes back as another request (queued by
        the caller), or ended without a response: done, and its budget slot given back."""
        self._changing()
        keys = [self.shared.inflight_key(), self._keys[2], self.shared.key("popped")]
        keys.append(self._paths_key)
        self.shared.run(self._unpop, keys=keys, args=[member])

    def requeue(self, worker: str, silent_since: int | None = None) -> int:
        """Put back what ``worker`` popped and did not finish; returns how many requests.
        ``silent_since`` (Redis time, s): only if the worker has not beaten since, checked in
        the same step (a worker found silent may beat before it is taken for dead)."""
        self._changing()
        frontier, members, requests = self._keys
        keys = [
            frontier,
            members,
            self.shared.key("popped"),
            self.shared.inflight_key(worker),
            self.shared.key("workers"),
            requests,
            self.shared.key("host_pages"),
        ]
        args = [worker, self._host_cap, "" if silent_since is None else silent_since]
        requeued = self.shared.run(self._requeue, keys=keys, args=args, default=0)
        if requeued and worker == self.shared.worker:
            self._known.clear()  # some taken out are queued again (rare: see spider_idle)
        return requeued

    def peek(self) -> Request | None:
        self.flush()
        for queue in (self._keys[0], self._back):
            top = self.shared.run(self.redis.zrange, queue, 0, 0, desc=True, default=[])
            if top:
                break
        else:
            return None
        pipe = self.redis.pipeline(transaction=True)
        pipe.hget(self._keys[2], top[0][FP_START:]).hget(self._paths_key, top[0][FP_START:])
        stored, path = self.shared.run(pipe.execute, default=[None, None])
        return self._load(stored, path) if stored else None

    def _load(self, stored: bytes, path: bytes | None = None) -> Request:
        """The request stored, with the path merged for it (``PUT``) if there is one."""
        if not stored.startswith(PICKLE_START):
            stored = stored.partition(HOST_END)[2]
        request = load_request(stored, self._spider)
        if path and self._paths is not None:
            self._paths.take_shared_path(request, path.decode())
        return request

    def _host(self, stored: bytes) -> str:
        """The host ``_RANKED`` gives for a request: none for one whose bytes cannot be read,
        which ``take`` drops."""
        try:
            if stored.startswith(PICKLE_START):  # stored by an older version
                return host_of(self._load(stored))
            return stored.decode()
        except Exception:  # unpickling damaged bytes raises about anything
            return ""

    def ranked(self, start: int = 0) -> Iterator[tuple[bytes, str]]:
        """As ``MemoryFrontier.ranked``, read from Redis as the caller reads on, in chunks
        twice as large each time: a look past a host held in a crawl of one host reads a
        thousand. Other processes pop meanwhile: a request listed may be gone when taken."""
        self.flush()
        chunk = RANKED_CHUNK
        for queue in (self._keys[0], self._back):
            if start:  # the back set's ranks follow the frontier's
                size = self.shared.run(self.redis.zcard, queue, default=0)
                if start >= size:
                    start -= size
                    continue
            while listed := self.shared.run(
                self._ranked,
                keys=[queue, self._keys[2]],
                args=[start, start + chunk - 1],
                default=[],
            ):
                for fp, host in zip(listed[::2], listed[1::2], strict=True):
                    yield fp, self._host(host)
                if len(listed) < 2 * chunk:
                    break  # the end of this set
                start += chunk
                chunk = min(2 * chunk, RANKED_CHUNK_MAX)
            start = 0

    def top_score(self) -> float | None:
        """The score of the best queued request (None: the frontier is empty)."""
        self.flush()
        top = self.shared.run(
            self.redis.zrange, self._keys[0], 0, 0, desc=True, withscores=True, default=[]
        )
        return top[0][1] if top else None

    def evict_worst(self, count: int) -> list[bytes]:
        """Remove up to ``count`` of the lowest-ranked requests, keeping at least FRONTIER_MAX
        queued; returns their fingerprints."""
        self._changing()
        args = [count, self._max]
        keys = [*self._keys, self._back, self._paths_key]
        evicted = self.shared.run(self._evict, keys=keys, args=args, default=[])
        for fp in evicted:
            self._know(fp, TAKEN_OUT)
        return evicted

    def key_of(self, fp: bytes) -> Key | None:
        # Only a put of fp itself changes its key: the buffer stays unless it holds one.
        if fp in self._buffered:
            self.flush()
        found = self.shared.run(self._key_of, keys=[*self._keys[:2], self._back], args=[fp])
        self._found = fp if found else None
        if not found:
            return None
        key = decode_member(found[0], float(found[1]))[1]
        if self._keys_only_rise and not found[2]:
            self._know(fp, key[:2])
        return key

    def key_to_beat(self, fp: bytes, better: tuple[float, float]) -> Key | None:
        """``key_of(fp)``, or None without a round trip if a rediscovery of ``better``
        (-score, -tiebreak) cannot raise ``fp``: its bound known here is no worse. For a
        strategy that merges paths, that bound, unless ``fp`` was taken out, as a key no better
        than the URL's, whose discovery ``merge_path`` then sends for its path."""
        bound = self._known.get(fp, SEEN_ONLY)
        if better >= bound:
            return (*bound, 0) if self._paths is not None and bound != TAKEN_OUT else None
        return self.key_of(fp)

    def request_of(self, fp: bytes) -> Request | None:
        """The request queued under ``fp`` (None if there is none): the one a rediscovery
        raising it replaces, for the strategy's ``merge_paths``."""
        if fp in self._buffered:
            self.flush()
        pipe = self.redis.pipeline(transaction=True)
        pipe.hexists(self._keys[1], fp).hget(self._keys[2], fp).hget(self._paths_key, fp)
        queued, stored, path = self.shared.run(pipe.execute, default=[False, None, None])
        # A request in flight is not queued, though stored until it is done.
        return self._load(stored, path) if queued and stored is not None else None

    def in_front(self, fp: bytes) -> bool:
        """False without a round trip: the put itself leaves a URL queued in front where it
        is when the request put is at the back (``PUT``)."""
        return False

    def remove(self, fp: bytes) -> Request | None:
        self._changing()
        keys = [*self._keys, self._back, self._paths_key]
        stored = self.shared.run(self._remove, keys=keys, args=[fp])
        self._know(fp, TAKEN_OUT)
        return self._load(stored) if stored else None

    def entries(self) -> Iterator[tuple[bytes, Key, Request]]:
        self.flush()
        for queue in (self._keys[0], self._back):
            for member, score in self.redis.zscan_iter(queue):
                fp, key = decode_member(member, score)
                stored = self.redis.hget(self._keys[2], fp)
                if stored is not None:
                    yield fp, key, self._load(stored, self.redis.hget(self._paths_key, fp))

    def max_seq(self) -> int:
        self.flush()
        return int(self.shared.run(self.redis.get, self.shared.key("seq")) or 0)

    def __len__(self) -> int:
        """Requests queued, counting each one buffered (a rediscovery among them adds none).
        While requests are buffered, as this process last saw Redis (no round trip per link
        put): another process's changes since are counted once they are flushed."""
        if self._size is None or not self._buffer:
            pipe = self.redis.pipeline(transaction=False)
            pipe.zcard(self._keys[0]).zcard(self._back)
            self._size = sum(self.shared.run(pipe.execute, default=[0, 0]))
        return self._size + len(self._adding)

    def close(self) -> None:
        """Give back what this process popped and did not finish, and leave the crawl."""
        requeued = self.requeue(self.shared.worker)
        if requeued:
            self.shared.log_requeued(requeued, self.shared.worker)
