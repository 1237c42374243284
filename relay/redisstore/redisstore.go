package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/loglimit"
	"github.com/hookline/hookline/relay"
)

// Package redisstore is a storage engine for the relay (relay.Store and
// relay.SharedStore) that keeps every channel's history in Redis (7.0 or
// later), where every relay replica behind one URL reads and appends it: a
// delivery POSTed to one reaches the subscribers of all, and a client may
// resume (Last-Event-ID) on any of them. Every delivery is in Redis before
// its POST is answered; how durable that is, is Redis's configuration (see
// docs/DEPLOY.md).
//
//	srv, err := relay.New(relay.Options{Store: redisstore.Opener("redis://localhost:6379/0", redisstore.Options{})})
//
// go-redis logs to one process-wide logger; SetLogger routes it to an
// slog.Logger (hookline serve does); a program that keeps its own need not.
//
// The layout, with P the key prefix ("hookline:") and C a channel name: The layout,
// with P the key prefix ("hookline:") and C a channel name:
//
//	P{C}:s   stream: one entry per retained delivery, id "<n>-0" (n is the
//	         delivery's SSE id), one field "r": its relay.Entry.Record
//	P{C}:i   sorted set, the index: one member "<n> <size> <received ms> <key>"
//	         per retained delivery, scored n (sizes and keys without
//	         reading the records)
//	P{C}:m   hash: last (the last id given), bytes (retained size), vis
//	         (the last id readers may see: a delivery is held until
//	         replicas confirm it, see Options.MinReplicas), confirms (a
//	         counter written to confirm a held delivery again)
//	P{C}:k   hash: Idempotency-Key -> "<n> <sha256 hex>" of the newest
//	         retained delivery with that key
//	P{C}:h   presence: set (with a TTL) while a replica has subscribers
//	P{C}:o   hash: redelivery id -> the id of the delivery it repeats, for
//	         redeliveries stored as references (record format 2)
//	P{C}:c   hash: id -> how many references point to it
//	P{C}:held hash: id -> the record of a referenced delivery the history
//	         dropped, kept until its last reference goes
//	P{C}:a   string: the channel's relay.Access as JSON, for a private
//	         channel (the SHA-256 of its read token, never the token)
//	P:private the number of private channels (Limits.PrivateChannels)
//	P:fresh  sorted set: private channel -> ms it was made, while never used
//	P:used   sorted set: private channel -> ms of its last use (TouchAccess)
//	P:nets   hash: client network -> private channels it made
//	         (Limits.PrivatePerNetwork)
//	P:g      hash: bytes, retained (all channels), seq (append counter),
//	         epoch (random, set once: a relay that finds it changed or
//	         gone knows Redis lost its data)
//	P:lru    sorted set: channel -> seq of its last append
//	P:feed:C pub/sub: every append publishes "<n>" or "<n> <record>"
//
// In a Redis Cluster the braces are hash tags: a channel's keys are in one
// hash slot, so its scripts run on the one shard that holds it, and
// channels spread over the shards. What differs there:
//
//   - The keys all channels share are P{.}g, P{.}lru, P{.}private,
//     P{.}fresh, P{.}used and P{.}nets (one slot, no channel's: names have
//     no dot), and a private channel's record is P{.}a:C, with them, so
//     that the private-channel scripts touch one slot.
//   - The feed is on sharded pub/sub: each append SPUBLISHes on P{C}:feed,
//     in the channel's slot, and a replica SSUBSCRIBEs on the primary of
//     each shard that holds a channel it watches (see feed).
//   - The append script cannot reach P{.}g: it keeps the channel's own
//     limits, and the total limit is kept after it (keepTotal, not atomic
//     with the append; see there). The epoch is read from P{.}g then, so
//     a shard that loses its data without the one holding P{.}g is not
//     seen as a loss (gaps say "evicted", not "lost").
//   - An ack waits (WAIT) on the primary of the channel's shard, for that
//     shard's replicas; the default is one when every primary has one.
//
// The relay never follows a Cluster redirection itself (as it never
// retries): a POST that meets a slot moved gets 503, the client reloads
// the slots' owners, and the sender's retry goes to the new primary.
//
// Every append is one Lua script (appendScript), atomic in Redis: it takes
// the next id (one more than the larger of the channel's last id and the
// caller's), works out the evictions of the limits exactly as the ledger
// does (relay/store.go), applies them (XTRIM MINID on each stream, to the first id
// kept), XADDs the record with its explicit id, and PUBLISHes it. Ids
// therefore only grow per channel, whichever replica appends.
//
// Deliveries reach the other replicas through Redis pub/sub: each replica
// SUBSCRIBEs to P:feed:C while it has subscribers on channel C (and only
// then), and gets every append's id, with the record when it is small
// (inlineRecordBytes); a larger one, or any gap in the ids, is read from the
// stream. Pub/sub may drop messages (a connection that breaks, an output
// buffer over its limit), so the stream stays the truth: after every
// (re)subscription a replica reads the stream from the last id it delivered
// (relay's Server.fromFeed), and ids make that exact (no loss, no duplicate). Why not
// XREAD BLOCK on the streams of the channels with subscribers: one blocking
// call must name every stream and its id each time, so it costs O(channels)
// per wake-up and must be interrupted whenever a channel gains or loses its
// subscribers; per-channel blocking reads would take a Redis connection per
// channel. SUBSCRIBE and UNSUBSCRIBE change the set on the one live
// connection, and Redis sends each message only to the replicas that asked.

// redisKeyPrefix starts every key (and pub/sub channel) the relay uses.
const redisKeyPrefix = "hookline:"

// inlineRecordBytes is the largest record an append publishes with its id;
// larger ones are read from the stream by the replicas that want them, so
// that pub/sub output buffers (32 MiB by default) stay small.
const inlineRecordBytes = 64 << 10

// presenceTTL is how long a replica's presence on a channel (it has
// subscribers) outlives its last refresh: while present, a channel whose
// history is evicted keeps its last id, so that its ids never go back under
// a subscriber of another replica. Refreshed every presenceTTL/3.
const presenceTTL = 60 * time.Second

// redisTimeout bounds each call to Redis (dial, read, write) and the
// answer to a /healthz ping.
const redisTimeout = 3 * time.Second

// minRedisVersion is the oldest Redis the store runs on: scripts with a
// shebang (flags) came in 7.0.
const minRedisVersion = 7

// errUnavailable is what Redis not answering (refused, timed out, the
// connection broke) wraps; it is relay.ErrStoreUnavailable for errors.Is.
// Open wraps it at startup, and so do the errors a POST or a stream gets
// while Redis is away (answered 503).
var errUnavailable error = unavailable{}

type unavailable struct{}

func (unavailable) Error() string        { return "redis is unreachable" }
func (unavailable) Is(target error) bool { return target == relay.ErrStoreUnavailable }

var _ relay.SharedStore = (*Store)(nil)

// appendScript appends a delivery (see Store.Append and the layout above).
//
//	KEYS: m s i k h, and on one Redis g lru (in a Cluster, the total limit
//	      is kept by keepTotal after the append, not here)
//	ARGV: 1 channel, 2 prefix, 3 after, 4 size, 5 received ms, 6 key ("" if
//	      none), 7 body SHA-256 hex, 8 record, 9 chanCount, 10 chanBytes,
//	      11 totalBytes, 12 age in ms (0: none), 13 1 to publish the record
//	      with the id, 14 a new epoch, set if P:g has none, 15 for a
//	      redelivery: the id it repeats (else 0), 16 its reference record,
//	      stored instead of the record while that id is stored, 17 1 for a
//	      POST (an Idempotency-Key stored meanwhile is not appended
//	      again), 18 1 to hold the delivery (see revealScript), 19 the feed
//	      channel, 20 the command that publishes on it
//
// It returns {id, epoch, bytes retained more, deliveries retained more}
// (epoch "" without P:g), or {0, epoch, the key's entry, the visible id}.
// The evictions are worked out before the first write, and the shebang
// makes Redis refuse the whole script when it is out of memory (maxmemory
// with noeviction), so a failed append writes nothing.
var appendScript = redis.NewScript(`#!lua` + revealLua + dropLua + `
local M, S, I, K, H, G, LRU = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local name, prefix = ARGV[1], ARGV[2]
local after, size, recv = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local key, sum, rec = ARGV[6], ARGV[7], ARGV[8]
local maxCount, maxBytes, maxTotal, age = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
if maxCount <= 0 then maxCount = math.huge end -- no count limit: the bytes bound the history
local function epoch()
  if G then return redis.call('HGET', G, 'epoch') or '' end
  return ''
end

-- For a POST (ARGV[17]): an Idempotency-Key another relay stored since
-- this one looked it up (two replicas, one POST retried on the other):
-- nothing is appended.
if key ~= '' and ARGV[17] == '1' then
  local prev = redis.call('HGET', K, key)
  if prev then return {0, epoch(), prev, tonumber(redis.call('HGET', M, 'vis') or 0)} end
end

local last = tonumber(redis.call('HGET', M, 'last') or 0)
local id = math.max(after, last) + 1
local cbytes = tonumber(redis.call('HGET', M, 'bytes') or 0) + size
local old = redis.call('ZCARD', I)
local n = old + 1

-- This channel: age, then count and bytes (ledger.prepare).
local own = {}
local function ownAt(k)
  if own[k + 1] == nil then
    local m = redis.call('ZRANGE', I, k, k)[1]
    local mid, msz, mrv, mkey = parse(m)
    own[k + 1] = {m = m, id = mid, size = msz, recv = mrv, key = mkey}
  end
  return own[k + 1]
end
local k = 0
if age > 0 then
  while k < old and ownAt(k).recv < recv - age do
    cbytes = cbytes - ownAt(k).size
    k = k + 1
  end
end
while n - k > maxCount or (cbytes > maxBytes and n - k > 1) do
  cbytes = cbytes - ownAt(k).size
  k = k + 1
end
local ownDropped = 0
for j = 1, k do ownDropped = ownDropped + own[j].size end

-- The total: channels appended to least recently first (on one Redis;
-- keepTotal does it in a Cluster).
local total = 0
if G then total = tonumber(redis.call('HGET', G, 'bytes') or 0) - ownDropped + size end
local others = {}
local from = 0
while G and total > maxTotal do
  local names = redis.call('ZRANGE', LRU, from, from + 99)
  if #names == 0 then break end
  from = from + #names
  for _, oc in ipairs(names) do
    if total <= maxTotal then break end
    if oc ~= name then
      local oi = prefix .. '{' .. oc .. '}:i'
      local d = pick(oc, redis.call('ZRANGE', oi, 0, -1), total - maxTotal, 0)
      total = total - d.bytes
      if #d.members > 0 then others[#others + 1] = d end
    end
  end
end
while G and total > maxTotal and n - k > 1 do
  total = total - ownAt(k).size
  ownDropped = ownDropped + ownAt(k).size
  cbytes = cbytes - ownAt(k).size
  k = k + 1
end

local firstKept = id
if k < old then firstKept = ownAt(k).id end

-- Writes.
-- A redelivery refers to the delivery it repeats while that is stored
-- (record.go): counted first, so that an eviction by this very append
-- holds it.
local of = tonumber(ARGV[15])
local base0 = prefix .. '{' .. name .. '}:'
if of > 0 and (#redis.call('XRANGE', S, fmt(of) .. '-0', fmt(of) .. '-0') > 0 or redis.call('HEXISTS', base0 .. 'held', of) == 1) then
  rec = ARGV[16]
  redis.call('HINCRBY', base0 .. 'c', of, 1)
  redis.call('HSET', base0 .. 'o', id, of)
end
local droppedCount = k
local droppedBytes = ownDropped
for _, d in ipairs(others) do
  droppedCount = droppedCount + #d.members
  droppedBytes = droppedBytes + d.bytes
  drop(prefix, d)
  if d.all then redis.call('ZREM', LRU, d.name) end
end
if k > 0 then
  -- The new delivery stays: never all of the channel (M's bytes are set below).
  local d = {name = name, members = {}, bytes = 0, all = false, first = firstKept}
  for j = 1, k do
    d.members[j] = own[j]
    d.bytes = d.bytes + own[j].size
  end
  drop(prefix, d)
end
redis.call('XADD', S, fmt(id) .. '-0', 'r', rec)
redis.call('ZADD', I, id, fmt(id) .. ' ' .. fmt(size) .. ' ' .. fmt(recv) .. ' ' .. key)
if key ~= '' then redis.call('HSET', K, key, fmt(id) .. ' ' .. sum) end
redis.call('HSET', M, 'last', id, 'bytes', cbytes)
if G then
  redis.call('HINCRBY', G, 'bytes', size - droppedBytes)
  redis.call('HINCRBY', G, 'retained', 1 - droppedCount)
  redis.call('ZADD', LRU, redis.call('HINCRBY', G, 'seq', 1), name)
  redis.call('HSETNX', G, 'epoch', ARGV[14])
end
-- Held (ARGV[18]): invisible to readers and not published until the
-- caller has Redis's replicas confirm it (revealScript).
if ARGV[18] ~= '1' then
  local inlined
  if ARGV[13] == '1' then inlined = rec end
  reveal(M, ARGV[20], ARGV[19], id, inlined)
end
return {id, epoch(), size - droppedBytes, 1 - droppedCount}
`)

// dropLua drops the oldest deliveries of a channel (d: name, members, the
// oldest first, each {m, id, key}; bytes, their size; all, whether they
// are all it has; first, the first id kept when not): its Idempotency-Keys
// and references go with them, and a delivery references still need is
// held. pick chooses them, parse reads an index member, fmt writes a
// number.
const dropLua = `
-- Numbers are Lua doubles: written as integers, never as 1e+15.
local function fmt(x) return string.format('%d', x) end

local function parse(m)
  local id, sz, rv, k = string.match(m, '^(%d+) (%d+) (%-?%d+) (.*)$')
  return tonumber(id), tonumber(sz), tonumber(rv), k
end

-- pick chooses the oldest deliveries of channel name (ms: its index, the
-- oldest first) to drop to free want bytes, keeping its newest keep: a d
-- for drop.
local function pick(name, ms, want, keep)
  local d = {name = name, members = {}, bytes = 0}
  for _, m in ipairs(ms) do
    if d.bytes >= want or #ms - #d.members <= keep then break end
    local mid, msz, mrv, mkey = parse(m)
    d.members[#d.members + 1] = {m = m, id = mid, key = mkey}
    d.bytes = d.bytes + msz
  end
  d.all = #d.members == #ms
  if not d.all then d.first = parse(ms[#d.members + 1]) end
  return d
end

-- Dropped references let go of what they refer to; dropped deliveries
-- that references still need are held.
local function unref(base, members)
  for _, e in ipairs(members) do
    local root = redis.call('HGET', base .. 'o', e.id)
    if root then
      redis.call('HDEL', base .. 'o', e.id)
      if redis.call('HINCRBY', base .. 'c', root, -1) <= 0 then
        redis.call('HDEL', base .. 'c', root)
        redis.call('HDEL', base .. 'held', root)
      end
    end
  end
  for _, e in ipairs(members) do
    if tonumber(redis.call('HGET', base .. 'c', e.id) or 0) > 0 then
      local entry = redis.call('XRANGE', base .. 's', fmt(e.id) .. '-0', fmt(e.id) .. '-0')[1]
      if entry then redis.call('HSET', base .. 'held', e.id, entry[2][2]) end
    end
  end
end
local function forgetKeys(kh, members)
  for _, e in ipairs(members) do
    if e.key ~= '' then
      local v = redis.call('HGET', kh, e.key)
      if v and tonumber(string.match(v, '^(%d+)')) == e.id then
        redis.call('HDEL', kh, e.key)
      end
    end
  end
end
local function drop(prefix, d)
  local base = prefix .. '{' .. d.name .. '}:'
  if d.all then
    redis.call('DEL', base .. 's', base .. 'i', base .. 'k', base .. 'o', base .. 'c', base .. 'held')
    if redis.call('EXISTS', base .. 'h') == 1 then
      redis.call('HSET', base .. 'm', 'bytes', 0)
    else
      redis.call('DEL', base .. 'm')
    end
  else
    forgetKeys(base .. 'k', d.members)
    unref(base, d.members)
    redis.call('ZREMRANGEBYRANK', base .. 'i', 0, #d.members - 1)
    redis.call('XTRIM', base .. 's', 'MINID', fmt(d.first) .. '-0')
    redis.call('HINCRBY', base .. 'm', 'bytes', fmt(-d.bytes))
  end
end
`

// trimScript drops a channel's oldest deliveries until bytes are freed, for
// the total limit in a Cluster (keepTotal), keeping its newest keep ones.
//
//	KEYS: i
//	ARGV: 1 channel, 2 prefix, 3 bytes to free, 4 newest to keep
//
// It returns {bytes freed, deliveries dropped, 1 if the channel has none
// left}.
var trimScript = redis.NewScript(`#!lua` + dropLua + `
local d = pick(ARGV[1], redis.call('ZRANGE', KEYS[1], 0, -1), tonumber(ARGV[3]), tonumber(ARGV[4]))
if #d.members > 0 then drop(ARGV[2], d) end
if d.all then return {d.bytes, #d.members, 1} end
return {d.bytes, #d.members, 0}
`)

// accountScript counts a change of a channel's history in the totals of a
// Cluster (keepTotal), where the append script cannot reach P:g and P:lru.
//
//	KEYS: g lru
//	ARGV: 1 channel, 2 bytes retained more, 3 deliveries retained more, 4
//	      "append" (the channel was appended to now), "empty" (it has no
//	      delivery left) or "", 5 totalBytes, 6 a new epoch, set if P:g has
//	      none
//
// It returns {epoch, total bytes}, and when that is over totalBytes the
// channels appended to least recently, the least first (up to 100).
var accountScript = redis.NewScript(`#!lua
local G, LRU, name = KEYS[1], KEYS[2], ARGV[1]
redis.call('HINCRBY', G, 'retained', ARGV[3])
local total = redis.call('HINCRBY', G, 'bytes', ARGV[2])
if ARGV[4] == 'append' then
  redis.call('ZADD', LRU, redis.call('HINCRBY', G, 'seq', 1), name)
  redis.call('HSETNX', G, 'epoch', ARGV[6])
elseif ARGV[4] == 'empty' then
  redis.call('ZREM', LRU, name)
end
local epoch = redis.call('HGET', G, 'epoch') or ''
if total <= tonumber(ARGV[5]) then return {epoch, total} end
return {epoch, total, redis.call('ZRANGE', LRU, 0, 99)}
`)

// revealLua makes delivery id of the channel whose hash is M visible to
// readers (its "vis" id, where reads stop) and publishes it on feed with
// publish (PUBLISH, or SPUBLISH in a Cluster): "<id> <record>" when rec is
// given, else "<id>" (the record is read from the stream).
const revealLua = `
local function reveal(M, publish, feed, id, rec)
  id = tonumber(id)
  if id > tonumber(redis.call('HGET', M, 'vis') or 0) then
    redis.call('HSET', M, 'vis', id)
  end
  local msg = string.format('%d', id)
  if rec then msg = msg .. ' ' .. rec end
  redis.call(publish, feed, msg)
end
`

// revealScript makes a held delivery (and those before it) visible and
// publishes it, once replicas confirmed it (Store.confirm).
//
//	KEYS: m s
//	ARGV: 1 id, 2 the feed channel, 3 1 to publish the record with the id,
//	      4 the command that publishes
var revealScript = redis.NewScript(`#!lua` + revealLua + `
local rec
if ARGV[3] == '1' then
  local e = redis.call('XRANGE', KEYS[2], ARGV[1] .. '-0', ARGV[1] .. '-0')[1]
  if e then rec = e[2][2] end
end
reveal(KEYS[1], ARGV[4], ARGV[2], ARGV[1], rec)
return 1
`)

// sinceScript reads a page of a channel's history (see Store.Since).
//
//	KEYS: m s i, and on one Redis g
//	ARGV: 1 after, 2 maxBytes, 3 most deliveries to read
//
// It returns {first, last, epoch} or {first, last, epoch, XRANGE entries},
// from one atomic view (epoch "" when P:g has none or is not given).
var sinceScript = redis.NewScript(`#!lua flags=no-writes
local M, S, I = KEYS[1], KEYS[2], KEYS[3]
local epoch = ''
if KEYS[4] then epoch = redis.call('HGET', KEYS[4], 'epoch') or '' end
local maxBytes = tonumber(ARGV[2])
local last = tonumber(redis.call('HGET', M, 'last') or 0)
-- Held deliveries (not confirmed by replicas yet) are not read.
local vis = redis.call('HGET', M, 'vis')
local upto = '+inf'
if vis then
  last = math.min(last, tonumber(vis))
  upto = vis
end
local first = last + 1
local head = redis.call('ZRANGE', I, 0, 0)[1]
if head then first = math.min(first, tonumber(string.match(head, '^(%d+)'))) end
local ms = redis.call('ZRANGE', I, '(' .. ARGV[1], upto, 'BYSCORE', 'LIMIT', 0, ARGV[3])
local n, cnt, lastId = 0, 0, nil
for _, m in ipairs(ms) do
  local id, sz = string.match(m, '^(%d+) (%d+) ')
  sz = tonumber(sz)
  if cnt > 0 and n + sz > maxBytes then break end
  n = n + sz
  cnt = cnt + 1
  lastId = id
end
if cnt == 0 then return {first, last, epoch} end
local firstId = string.match(ms[1], '^(%d+)')
local entries = redis.call('XRANGE', S, firstId .. '-0', lastId .. '-0')
-- A redelivery stored as a reference comes with the record it repeats,
-- as field "o".
local base = string.sub(M, 1, -2)
for _, e in ipairs(entries) do
  local rec = e[2][2]
  if string.byte(rec, 1) == 2 then
    local root = redis.call('HGET', base .. 'o', string.match(e[1], '^(%d+)'))
    if root then
      local orig = redis.call('XRANGE', S, root .. '-0', root .. '-0')[1]
      local o = orig and orig[2][2] or redis.call('HGET', base .. 'held', root)
      if o then
        e[2][3] = 'o'
        e[2][4] = o
      end
    end
  end
end
return {first, last, epoch, entries}
`)

// SetLogger routes go-redis's log lines (its own dial failures and pool
// warnings) to l at debug level. go-redis has one logger per process, so
// Open never sets it by itself: the program calls this (hookline serve
// does) or keeps its own.
func SetLogger(l *slog.Logger) { redis.SetLogger(redisLog{l}) }

// redisLog routes go-redis's log lines to an slog.Logger at debug level.
type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.l.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// Store keeps the history in Redis, shared by every relay that uses the
// same Redis (see the layout above): a relay.SharedStore. It keeps nothing
// in memory but the set of channels it watches for its subscribers.
type Store struct {
	rdb     redis.UniversalClient
	cluster *redis.ClusterClient // rdb, when Redis is a Cluster; else nil
	l       layout               // the names that depend on which
	where   string               // the URL without its password, for messages
	kind    string               // "Redis", "Redis Sentinel (primary NAME)" or "Redis Cluster"
	prefix  string
	lim     relay.Limits
	log     *slog.Logger

	acks         int           // replicas each append waits for (WAIT); 0: none
	ackTimeout   time.Duration // how long it waits
	unreplicated atomic.Int64  // appends the primary took that too few replicas confirmed
	connected    atomic.Int64  // replicas the primary had at the last look
	ackRefusals  loglimit.Limit
	totalErrors  loglimit.Limit // keepTotal's failures (a Cluster)

	mu     sync.Mutex
	closed bool
	ctx    context.Context // canceled by close
	cancel context.CancelFunc

	feed *feed // nil until startFeed

	epoch  string    // P:g's epoch when last seen (guarded by mu)
	lostAt time.Time // when a change of epoch showed that Redis lost its data (guarded by mu)
}

// newEpoch returns a random epoch for P:g.
func newEpoch() string { return rand.Text() }

// sawEpoch notes the epoch Redis answered with: a change from the one seen
// before (or its absence) means Redis lost its data since, as when it
// restarts without persistence. Deliveries it held are gone; gaps reported
// for a while after that say "lost" (see Server.gapReason).
func (s *Store) sawEpoch(epoch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch == s.epoch {
		return
	}
	if s.epoch != "" {
		s.lostAt = time.Now()
		s.log.Error("Redis lost its data (it restarted without persistence, or was flushed): deliveries it held and not yet relayed are gone; enable appendonly in Redis (see docs/DEPLOY.md)", "redis", s.where)
	}
	s.epoch = epoch
}

// Lost returns when Redis was last seen to have lost its data (zero if
// never).
func (s *Store) Lost() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lostAt
}

// Options are how appends are acknowledged.
type Options struct {
	// MinReplicas is how many of the primary's replicas must confirm a
	// delivery (Redis's WAIT) before its POST is answered 2xx: 0 means one
	// when the primary has a replica when the store opens, none when it
	// has none; NoReplicas never waits. A delivery too few replicas
	// confirmed within AckTimeout is answered 503 (it may be lost if the
	// primary fails: the sender retries) and is neither read nor relayed
	// until a later one is confirmed (it is then, after it).
	MinReplicas int
	// AckTimeout bounds the wait (default DefaultAckTimeout).
	AckTimeout time.Duration
}

// NoReplicas is Options.MinReplicas for appends that wait for no replica.
const NoReplicas = -1

// DefaultAckTimeout is Options.AckTimeout's default.
const DefaultAckTimeout = 2 * time.Second

// Opener returns the relay.OpenStore of the Redis at rawURL with o, for
// relay.Options.Store.
func Opener(rawURL string, o Options) relay.OpenStore {
	return func(lim relay.Limits, log *slog.Logger) (relay.Store, error) {
		s, err := Open(rawURL, o, lim, log)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// urlForms is how a Redis URL is written, for messages.
const urlForms = "redis://[user:password@]host:port[/db], rediss:// for TLS, unix:///path/to/redis.sock, for Redis Sentinel redis://[user:password@]sentinel:port[/db]?master_name=NAME&addr=sentinel2:port, or for Redis Cluster redis://[user:password@]node:port?addr=node2:port"

// Open connects to the Redis at rawURL, checks that it answers and is
// recent enough, and returns the store applying lim at every append and o
// to its acknowledgements; log gets its warnings (nil: none). rawURL is
// redis://[user:password@]host:port[/db], rediss:// for TLS, or
// unix:///path/to/socket; or, for a primary that Redis Sentinel watches
// (the relay follows its failovers), go-redis's failover form: the
// Sentinels' addresses (host:port, then ?addr= for each other one) and
// ?master_name= the name they watch; the user and password are the
// Sentinels' and, unless ?password= is given, the primary's too. A Redis
// Cluster is found by itself from the address of any of its nodes (INFO
// says cluster_enabled), or named by several (?addr= for each other one,
// go-redis's cluster form); see the package doc for what changes in a
// Cluster. A Redis that does not answer gives an error wrapping
// relay.ErrStoreUnavailable. The connections stay open until Close.
func Open(rawURL string, o Options, lim relay.Limits, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("relay: the Redis URL %q is not valid (%v); write it as %s", httpx.RedactURL(rawURL), err, urlForms)
	}
	clusterURL := u.Query().Has("addr") && !u.Query().Has("master_name")
	rdb, kind, err := newClient(rawURL, clusterURL)
	if err != nil {
		return nil, fmt.Errorf("relay: the Redis URL %q is not valid (%v); write it as %s", httpx.RedactURL(rawURL), err, urlForms)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		rdb:         rdb,
		where:       httpx.RedactURL(rawURL),
		kind:        kind,
		prefix:      redisKeyPrefix,
		lim:         lim,
		log:         log,
		ctx:         ctx,
		cancel:      cancel,
		ackTimeout:  cmp.Or(o.AckTimeout, DefaultAckTimeout),
		ackRefusals: loglimit.Limit{Burst: 1, Window: 10 * time.Second},
		totalErrors: loglimit.Limit{Burst: 1, Window: 10 * time.Second},
	}
	clustered, err := s.checkServer()
	if err == nil && clustered && !clusterURL {
		// The address of one node of a Cluster: the others are found
		// from it.
		s.rdb.Close()
		if s.rdb, s.kind, err = newClient(rawURL, true); err != nil {
			cancel()
			return nil, fmt.Errorf("relay: the Redis URL %q is not valid for a Redis Cluster (%v); write it as %s", httpx.RedactURL(rawURL), err, urlForms)
		}
		_, err = s.checkServer()
	}
	if err != nil {
		s.rdb.Close()
		cancel()
		return nil, err
	}
	s.cluster, _ = s.rdb.(*redis.ClusterClient)
	s.l = newLayout(s.prefix, s.cluster != nil)
	switch connected := s.replicas(); {
	case o.MinReplicas > 0:
		s.acks = o.MinReplicas
		if connected < int64(s.acks) {
			log.Warn("Redis has fewer replicas connected than each acknowledgement waits for: POSTs get 503 until they connect", "redis", s.where, "replicas", connected, "minReplicas", s.acks)
		}
	case o.MinReplicas == 0 && connected > 0:
		s.acks = 1
	}
	ectx, ecancel := context.WithTimeout(ctx, redisTimeout)
	defer ecancel()
	g := s.global("g")
	if err := s.rdb.HSetNX(ectx, g, "epoch", newEpoch()).Err(); err != nil {
		s.rdb.Close()
		cancel()
		return nil, s.wrap("connecting to", err)
	}
	epoch, err := s.rdb.HGet(ectx, g, "epoch").Result()
	if err != nil {
		s.rdb.Close()
		cancel()
		return nil, s.wrap("connecting to", err)
	}
	s.epoch = epoch
	return s, nil
}

// newClient returns the client of rawURL: one Redis, the primary that the
// Sentinels of a URL with ?master_name= name, or (cluster) a Redis
// Cluster; and what it is, for messages.
func newClient(rawURL string, cluster bool) (redis.UniversalClient, string, error) {
	// The relay never retries a command itself: a retried append could be
	// stored twice. A POST that fails gets 503 and the sender retries.
	// Every call fails fast (the caller answers 503) and is bounded by its
	// context (/healthz: 2 s). In a Cluster that holds for redirections
	// too: go-redis retries a command that failed on the connection with
	// them, so none is followed; the client reloads the slots' owners and
	// the sender's retry goes to the new one.
	tune := func(maxRetries, dialerRetries, protocol *int, timeouts []*time.Duration, clientName *string) {
		*maxRetries = -1
		if *dialerRetries == 0 {
			*dialerRetries = 1
		}
		for _, d := range timeouts {
			if *d == 0 { // not set in the URL (?dial_timeout=5s...)
				*d = redisTimeout
			}
		}
		if *protocol == 0 {
			*protocol = 2 // RESP2: nothing of RESP3 is needed, and proxies speak it
		}
		if *clientName == "" {
			*clientName = "hookline-relay"
		}
	}
	if cluster {
		co, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, "", err
		}
		tune(&co.MaxRetries, &co.DialerRetries, &co.Protocol, []*time.Duration{&co.DialTimeout, &co.ReadTimeout, &co.WriteTimeout}, &co.ClientName)
		co.MaxRedirects = -1
		co.DisableIdentity, co.ContextTimeoutEnabled = true, true
		return redis.NewClusterClient(co), "Redis Cluster", nil
	}
	if u, err := url.Parse(rawURL); err == nil && u.Query().Has("master_name") {
		fo, err := redis.ParseFailoverURL(rawURL)
		if err != nil {
			return nil, "", err
		}
		if fo.Password == "" && fo.Username == "" {
			fo.Username, fo.Password = fo.SentinelUsername, fo.SentinelPassword
		}
		tune(&fo.MaxRetries, &fo.DialerRetries, &fo.Protocol, []*time.Duration{&fo.DialTimeout, &fo.ReadTimeout, &fo.WriteTimeout}, &fo.ClientName)
		fo.DisableIdentity, fo.ContextTimeoutEnabled = true, true
		return redis.NewFailoverClient(fo), "Redis Sentinel (primary " + fo.MasterName + ")", nil
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, "", err
	}
	tune(&opt.MaxRetries, &opt.DialerRetries, &opt.Protocol, []*time.Duration{&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout}, &opt.ClientName)
	opt.DisableIdentity, opt.ContextTimeoutEnabled = true, true
	return redis.NewClient(opt), "Redis", nil
}

// replicas returns how many replicas the primary has connected (0 when
// it cannot tell), and keeps it for Stats.
// In a Cluster, the fewest any primary has.
func (s *Store) replicas() int64 {
	ctx, cancel := context.WithTimeout(s.ctx, redisTimeout)
	defer cancel()
	count := func(c *redis.Client) (int64, error) {
		info, err := c.Info(ctx, "replication").Result()
		var n int64
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
				n, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		return n, err
	}
	var n int64
	var err error
	if s.cluster != nil {
		var mu sync.Mutex
		n = math.MaxInt64
		err = s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			m, err := count(c)
			mu.Lock()
			n = min(n, m)
			mu.Unlock()
			return err
		})
	} else {
		n, err = count(s.rdb.(*redis.Client))
	}
	if err != nil {
		return s.connected.Load()
	}
	s.connected.Store(n)
	return n
}

// checkServer pings Redis, checks its version and reports whether it is
// a node of a Cluster.
func (s *Store) checkServer() (cluster bool, err error) {
	ctx, cancel := context.WithTimeout(s.ctx, 2*redisTimeout)
	defer cancel()
	info, err := s.rdb.Info(ctx, "server", "cluster").Result()
	if err != nil {
		return false, s.wrap("connecting to", err)
	}
	version := ""
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			version = v
		}
		cluster = cluster || line == "cluster_enabled:1"
	}
	major, _, _ := strings.Cut(version, ".")
	if n, err := strconv.Atoi(major); err != nil || n < minRedisVersion {
		return false, fmt.Errorf("relay: the Redis at %s is version %q; the relay needs Redis %d.0 or later", s.where, version, minRedisVersion)
	}
	return cluster, nil
}

// wrap makes a Redis error a relay error: relay.ErrStoreClosed after close,
// errUnavailable (with the cause) for a connection that failed.
func (s *Store) wrap(doing string, err error) error {
	if errors.Is(err, redis.ErrClosed) || s.isClosed() {
		return relay.ErrStoreClosed
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := err.Error()
		code, _, _ := strings.Cut(msg, " ")
		switch code {
		case "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "MOVED", "ASK":
			// Redis is starting (loading its data) or busy, or a failover
			// is under way (the old primary is a replica now, or another
			// node serves the channel's slot): it will answer.
			s.reloadSlots()
		case "OOM":
			return fmt.Errorf("relay: %s Redis at %s: Redis is full (it reached maxmemory; raise it or lower the history limits): %w", doing, s.where, err)
		default:
			// Redis refused: a read-only replica, a script error.
			return fmt.Errorf("relay: %s Redis at %s: %w", doing, s.where, err)
		}
	}
	s.reloadSlots() // a node of a Cluster may be down: which serves its slots now?
	return fmt.Errorf("relay: %s Redis at %s: %w: %w", doing, s.where, errUnavailable, err)
}

// reloadSlots has the Cluster client ask again, in the background, which
// primaries serve which slots (go-redis asks at most every 200 ms): after a
// failover, the commands sent to a primary of its own (WAIT's connection,
// the feed's) go to the new one. go-redis asks by itself only every ten
// seconds, or when a command it routes is redirected. Nothing on one Redis.
func (s *Store) reloadSlots() {
	if s.cluster != nil {
		s.cluster.ReloadState(s.ctx)
	}
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// keys returns the keys of channel name: m s i k h.
func (s *Store) keys(name string) (m, st, i, k, h string) {
	base := s.prefix + "{" + name + "}:"
	return base + "m", base + "s", base + "i", base + "k", base + "h"
}

// layout is how the store names what is not a channel's own key: the keys
// all channels share, a channel's feed and the command that publishes on
// it, a private channel's record. One Redis's and a Cluster's differ only
// in these strings (see the package doc); Open sets it.
type layout struct {
	global               string // before the name of a key all channels share (g, lru, private, fresh, used, nets)
	feedPre, feedSuf     string // around a channel's name in its feed's name
	publish              string // the command that publishes on a feed
	accessPre, accessSuf string // around a channel's name in its private record's key
}

// newLayout returns the layout under prefix P: on one Redis P+name, P:feed:C
// with PUBLISH, P{C}:a; in a Cluster P{.}name (one hash slot, which a
// script touching several may need and no channel shares: channel names
// have no dot), the shard channel P{C}:feed in the slot of the channel's
// keys with SPUBLISH (it reaches only that shard's nodes), and P{.}a:C,
// with the keys the private-channel scripts touch with it.
func newLayout(prefix string, cluster bool) layout {
	if cluster {
		return layout{global: prefix + "{.}", feedPre: prefix + "{", feedSuf: "}:feed", publish: "SPUBLISH", accessPre: prefix + "{.}a:"}
	}
	return layout{global: prefix, feedPre: prefix + "feed:", publish: "PUBLISH", accessPre: prefix + "{", accessSuf: "}:a"}
}

// global returns the key of name, one of the keys all channels share.
func (s *Store) global(name string) string { return s.l.global + name }

// feedChannel returns channel name's pub/sub channel.
func (s *Store) feedChannel(name string) string { return s.l.feedPre + name + s.l.feedSuf }

// channelOf returns the channel of a pub/sub channel feedChannel made.
func (s *Store) channelOf(feed string) (string, bool) {
	name, ok := strings.CutPrefix(feed, s.l.feedPre)
	name, ok2 := strings.CutSuffix(name, s.l.feedSuf)
	return name, ok && ok2
}

// String names the store's server in the relay's messages: "Redis",
// "Redis Sentinel (primary NAME)" or "Redis Cluster".
func (s *Store) String() string { return s.kind }

// Append stores d (see relay.Store).
func (s *Store) Append(ctx context.Context, channel string, d *relay.Entry, after int64) (int64, error) {
	if s.isClosed() {
		return 0, relay.ErrStoreClosed
	}
	rec, ref := d.Record(), d.RefRecord()
	key := d.IdempotencyKey()
	sum := sha256.Sum256(d.Body())
	m, st, i, k, h := s.keys(channel)
	dedup := "0"
	if d.UniqueKey() {
		dedup = "1"
	}
	inline := "0"
	if len(rec) <= inlineRecordBytes && ref == nil {
		inline = "1" // a reference is read from the stream, with what it refers to
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout+time.Duration(len(rec)>>20)*time.Second+s.ackTimeout)
	defer cancel()
	// With acks, the append and the WAIT share one connection (to the
	// primary of the channel's shard in a Cluster): WAIT counts the
	// replicas that have this connection's writes.
	var c redis.Scripter = s.rdb
	hold := "0"
	if s.acks > 0 {
		primary, err := s.primary(ctx, m)
		if err != nil {
			return 0, s.wrap("storing the delivery in", err)
		}
		conn := primary.Conn()
		defer conn.Close()
		c, hold = conn, "1"
	}
	keys := []string{m, st, i, k, h, s.global("g"), s.global("lru")}
	if s.cluster != nil {
		keys = keys[:5] // the total: keepTotal, after
	}
	v, err := appendScript.Run(ctx, c, keys,
		channel, s.prefix, after, d.Size(), d.Received().UnixMilli(), key, hex.EncodeToString(sum[:]), rec,
		s.lim.ChanCount, s.lim.ChanBytes, s.lim.TotalBytes, s.lim.Age.Milliseconds(), inline, newEpoch(),
		d.Of(), ref, dedup, hold, s.feedChannel(channel), s.l.publish,
	).Slice()
	var id, more, moreCount int64
	if err == nil && len(v) != 4 {
		err = fmt.Errorf("an answer of %d values", len(v))
	}
	if err == nil {
		id, _ = v[0].(int64)
	}
	switch {
	case err == nil && id == 0: // the key was stored meanwhile
		entry, _ := v[2].(string)
		id, sum, perr := parseKeyEntry(entry)
		if perr != nil {
			return 0, fmt.Errorf("relay: Redis at %s: the Idempotency-Key entry %.100q of channel %s is damaged", s.where, entry, channel)
		}
		if vis, _ := v[3].(int64); s.acks > 0 && id > vis {
			// Stored, but not confirmed yet (its POST got 503): this
			// retry is answered once replicas have it.
			if err := s.confirm(ctx, c.(*redis.Conn), channel, id, "0", true); err != nil {
				return 0, err
			}
		}
		return 0, &relay.KeyStoredError{ID: id, Sum: sum}
	case err == nil:
		more, _ = v[2].(int64)
		moreCount, _ = v[3].(int64)
		if epoch, _ := v[1].(string); s.cluster == nil {
			s.sawEpoch(epoch)
		}
	}
	if err != nil {
		err = s.wrap("storing the delivery in", err)
		if errors.Is(err, errUnavailable) && !isDialError(err) {
			err = fmt.Errorf("%w (%w)", err, relay.ErrStoreUncertain)
		}
		return 0, err
	}
	if s.acks > 0 {
		if err := s.confirm(ctx, c.(*redis.Conn), channel, id, inline, false); err != nil {
			return 0, err
		}
	}
	if s.cluster != nil {
		s.keepTotal(ctx, channel, more, moreCount)
	}
	return id, nil
}

// primary returns the client of the primary that holds key: the one
// Redis, or in a Cluster the primary of key's shard.
func (s *Store) primary(ctx context.Context, key string) (*redis.Client, error) {
	if s.cluster != nil {
		return s.cluster.MasterForKey(ctx, key)
	}
	return s.rdb.(*redis.Client), nil
}

// keepTotal keeps the total limit in a Cluster, after an append to
// channel that retained more bytes and moreCount deliveries more: it counts
// them in P:g (accountScript), then drops the oldest deliveries of the
// channels appended to least recently, as the append script does on one
// Redis, and the oldest of channel itself last (its newest stays). A
// channel's keys and P:g are on different shards, so this is not atomic
// with the append: two relays over the limit at once may both drop some,
// and a relay that stops between the two leaves the total counted short
// of what the append added (Stats and the limit are off by that much until
// the channel's deliveries go). The POST is answered either way: the
// delivery is stored.
func (s *Store) keepTotal(ctx context.Context, channel string, more, moreCount int64) {
	g := []string{s.global("g"), s.global("lru")}
	account := func(name string, more, count int64, what string) (int64, []string, error) {
		v, err := accountScript.Run(ctx, s.rdb, g, name, more, count, what, s.lim.TotalBytes, newEpoch()).Slice()
		if err == nil && len(v) < 2 {
			err = fmt.Errorf("an answer of %d values", len(v))
		}
		if err != nil {
			return 0, nil, err
		}
		epoch, _ := v[0].(string)
		s.sawEpoch(epoch)
		total, _ := v[1].(int64)
		var names []string
		if len(v) > 2 {
			list, _ := v[2].([]any)
			for _, n := range list {
				if n, ok := n.(string); ok && n != channel {
					names = append(names, n)
				}
			}
		}
		return total, names, nil
	}
	total, names, err := account(channel, more, moreCount, "append")
	// Each round drops from one channel; a channel left with nothing
	// leaves the list, so rounds are bounded by the channels it names.
	for round := 0; err == nil && total > s.lim.TotalBytes && round < 1000; round++ {
		victim, keep := channel, 1
		if len(names) > 0 {
			victim, keep = names[0], 0
		}
		_, _, i, _, _ := s.keys(victim)
		var v []int64
		v, err = trimScript.Run(ctx, s.rdb, []string{i}, victim, s.prefix, total-s.lim.TotalBytes, keep).Int64Slice()
		if err == nil && len(v) != 3 {
			err = fmt.Errorf("an answer of %d values", len(v))
		}
		if err != nil {
			break
		}
		what := ""
		if v[2] == 1 {
			what = "empty"
		} else if v[1] == 0 {
			break // channel itself, down to its newest
		}
		total, names, err = account(victim, -v[0], -v[1], what)
	}
	if err != nil {
		if ok, hidden := s.totalErrors.Allow(time.Now()); ok {
			s.log.Warn("could not keep the total history limit in the Redis Cluster after an append (the delivery is stored); the next append tries again", "redis", s.where, "channel", channel, "err", s.wrap("counting the history in", err), "alikeNotLogged", hidden)
		}
	}
}

// confirm waits until s.acks replicas have conn's writes (WAIT), then
// makes delivery id of channel visible and publishes it (revealScript),
// with its record when inline is "1" (as the append script does). touch
// first writes on conn, for a delivery an earlier connection stored.
func (s *Store) confirm(ctx context.Context, conn *redis.Conn, channel string, id int64, inline string, touch bool) error {
	m, st, _, _, _ := s.keys(channel)
	if touch {
		if err := conn.HIncrBy(ctx, m, "confirms", 1).Err(); err != nil {
			return fmt.Errorf("%w (%w)", s.wrap("confirming the delivery in", err), relay.ErrStoreUncertain)
		}
	}
	n, err := conn.Wait(ctx, s.acks, s.ackTimeout).Result()
	if err != nil {
		return fmt.Errorf("%w (%w)", s.wrap("waiting for the replicas of", err), relay.ErrStoreUncertain)
	}
	if n < int64(s.acks) {
		s.unreplicated.Add(1)
		connected := s.replicas()
		if ok, hidden := s.ackRefusals.Allow(time.Now()); ok {
			s.log.Error("Redis replicas did not confirm a delivery in time: its POST is answered 503 and the sender should retry", "redis", s.where, "confirmed", n, "minReplicas", s.acks, "replicasConnected", connected, "ackTimeout", s.ackTimeout, "alikeNotLogged", hidden)
		}
		return &notReplicated{confirmed: n, want: s.acks, connected: connected, timeout: s.ackTimeout}
	}
	if err := revealScript.Run(ctx, conn, []string{m, st}, id, s.feedChannel(channel), inline, s.l.publish).Err(); err != nil {
		return fmt.Errorf("%w (%w)", s.wrap("publishing the delivery in", err), relay.ErrStoreUncertain)
	}
	return nil
}

// notReplicated is an append too few replicas confirmed in time.
type notReplicated struct {
	confirmed int64
	want      int
	connected int64
	timeout   time.Duration
}

func (e *notReplicated) Error() string {
	return fmt.Sprintf("relay: Redis stored the delivery but %d of the %d replicas it waits for confirmed it within %s (%d connected); it could be lost if the primary failed now", e.confirmed, e.want, e.timeout, e.connected)
}

func (e *notReplicated) Is(target error) bool {
	return target == relay.ErrStoreUncertain || target == relay.ErrStoreNotReplicated
}

// isDialError reports whether err is a failure to connect (so nothing was
// sent).
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Since reads a page of channel's history (see relay.Store).
func (s *Store) Since(ctx context.Context, channel string, after, maxBytes int64) ([]*relay.Entry, int64, int64, error) {
	if s.isClosed() {
		return nil, 0, 0, relay.ErrStoreClosed
	}
	m, st, i, _, _ := s.keys(channel)
	most := maxBytes/relay.MinEntrySize + 1 // every delivery counts at least that
	ctx, cancel := context.WithTimeout(ctx, redisTimeout+time.Duration(maxBytes>>20)*time.Second)
	defer cancel()
	keys := []string{m, st, i, s.global("g")}
	if s.cluster != nil {
		keys = keys[:3] // P:g is on another shard: Append sees its epoch
	}
	v, err := sinceScript.Run(ctx, s.rdb, keys, after, maxBytes, most).Slice()
	if err != nil {
		return nil, 0, 0, s.wrap("reading the history from", err)
	}
	if len(v) < 3 {
		return nil, 0, 0, fmt.Errorf("relay: reading the history from Redis at %s: an answer of %d values", s.where, len(v))
	}
	first, _ := v[0].(int64)
	last, _ := v[1].(int64)
	if epoch, _ := v[2].(string); s.cluster == nil {
		s.sawEpoch(epoch)
	}
	if len(v) == 3 {
		return nil, first, last, nil
	}
	entries, _ := v[3].([]any)
	page := make([]*relay.Entry, 0, len(entries))
	for _, e := range entries {
		d, err := s.decodeEntry(channel, e)
		if err != nil {
			// Left out: the reader sees a gap, as with a damaged record
			// in the bbolt file.
			s.log.Warn("skipping an unreadable delivery in Redis", "channel", channel, "err", err)
			continue
		}
		page = append(page, d)
	}
	return page, first, last, nil
}

// decodeEntry decodes one XRANGE entry, [id, [field, value...]], as the Lua
// script returns it (go-redis gives []any of strings).
func (s *Store) decodeEntry(channel string, e any) (*relay.Entry, error) {
	pair, _ := e.([]any)
	if len(pair) != 2 {
		return nil, fmt.Errorf("%w: not a stream entry", relay.ErrBadRecord)
	}
	sid, _ := pair[0].(string)
	fields, _ := pair[1].([]any)
	var rec, orig string
	for j := 0; j+1 < len(fields); j += 2 {
		switch f, _ := fields[j].(string); f {
		case "r":
			rec, _ = fields[j+1].(string)
		case "o":
			orig, _ = fields[j+1].(string)
		}
	}
	return decodeStreamRecord(sid, rec, orig)
}

// decodeStreamRecord decodes the record of stream entry sid ("<n>-0"), with
// orig, the record a reference refers to.
func decodeStreamRecord(sid, rec, orig string) (*relay.Entry, error) {
	n, seq, ok := strings.Cut(sid, "-")
	id, err := strconv.ParseInt(n, 10, 64)
	if !ok || seq != "0" || err != nil || id <= 0 {
		return nil, fmt.Errorf("%w: stream entry id %.40q", relay.ErrBadRecord, sid)
	}
	var o []byte
	if orig != "" {
		o = []byte(orig)
	}
	return relay.DecodeEntry(id, []byte(rec), o)
}

// Get returns delivery id of channel (see relay.Store).
func (s *Store) Get(ctx context.Context, channel string, id int64) (*relay.Entry, error) {
	if id <= 0 {
		return nil, nil
	}
	// One delivery from id on, with what it refers to when it is a
	// reference.
	page, _, _, err := s.Since(ctx, channel, id-1, 1)
	if err != nil || len(page) == 0 || page[0].ID() != id {
		return nil, err
	}
	return page[0], nil
}

// FindKey looks up an Idempotency-Key (see relay.Store).
func (s *Store) FindKey(ctx context.Context, channel, key string) (int64, [sha256.Size]byte, bool, error) {
	var sum [sha256.Size]byte
	if s.isClosed() {
		return 0, sum, false, relay.ErrStoreClosed
	}
	m, _, _, k, _ := s.keys(channel)
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	var entry, vis *redis.StringCmd
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { // each command's error is read below
		entry, vis = p.HGet(ctx, k, key), p.HGet(ctx, m, "vis")
		return nil
	})
	v, err := entry.Result()
	if errors.Is(err, redis.Nil) {
		return 0, sum, false, nil
	}
	if err != nil {
		return 0, sum, false, s.wrap("reading an Idempotency-Key from", err)
	}
	id, sum, err := parseKeyEntry(v)
	if err != nil {
		return 0, sum, false, fmt.Errorf("relay: Redis at %s: the Idempotency-Key entry %.100q of channel %s is damaged", s.where, v, channel)
	}
	if visible, _ := vis.Int64(); s.acks > 0 && id > visible {
		// Held, not confirmed by the replicas yet (its POST got 503):
		// Append confirms it before this retry is answered.
		return 0, sum, false, nil
	}
	return id, sum, true, nil
}

// parseKeyEntry reads an Idempotency-Key entry: "<id> <sha256 hex>".
func parseKeyEntry(v string) (int64, [sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	idText, hexSum, _ := strings.Cut(v, " ")
	id, err := strconv.ParseInt(idText, 10, 64)
	b, herr := hex.DecodeString(hexSum)
	if err != nil || herr != nil || len(b) != sha256.Size {
		return 0, sum, errors.New("damaged")
	}
	copy(sum[:], b)
	return id, sum, nil
}

// removeAccessLua removes private channel name (the keys P:private,
// P:fresh, P:used, P:nets given, and the record's key pre .. name .. suf)
// in a script: its record, its place in the sorted sets and its network's
// count.
const removeAccessLua = `
local function removeAccess(pre, suf, private, fresh, used, nets, name)
  local key = pre .. name .. suf
  local rec = redis.call('GET', key)
  if rec then
    local ok, a = pcall(cjson.decode, rec)
    local net = (ok and type(a) == 'table' and type(a.network) == 'string') and a.network or ''
    if redis.call('HINCRBY', nets, net, -1) <= 0 then redis.call('HDEL', nets, net) end
    redis.call('DEL', key)
    redis.call('DECR', private)
  end
  redis.call('ZREM', fresh, name)
  redis.call('ZREM', used, name)
end
`

// createAccessScript makes a channel private: KEYS 1 its record's key
// (accessKey), 2 P:private, 3 P:fresh, 4 P:used, 5 P:nets; ARGV 1 the
// record, 2 the limit, 3 the limit per network (0: none), 4 the network, 5
// ms made, 6 C, 7 and 8 what comes before and after a channel's name in
// its record's key. When the limit is reached, the channel made first of those
// never used goes. It returns 0 (made), 1 (the channel is private
// already), 2 (the limit is reached, every channel used) or 3 (the
// network's share is).
var createAccessScript = redis.NewScript(`#!lua` + removeAccessLua + `
if redis.call('EXISTS', KEYS[1]) == 1 then return 1 end
local net = ARGV[4]
if net ~= '' and tonumber(ARGV[3]) > 0 and tonumber(redis.call('HGET', KEYS[5], net) or '0') >= tonumber(ARGV[3]) then return 3 end
if tonumber(redis.call('GET', KEYS[2]) or '0') >= tonumber(ARGV[2]) then
  local oldest = redis.call('ZRANGE', KEYS[3], 0, 0)
  if #oldest == 0 then return 2 end
  removeAccess(ARGV[7], ARGV[8], KEYS[2], KEYS[3], KEYS[4], KEYS[5], oldest[1])
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[6])
redis.call('HINCRBY', KEYS[5], net, 1)
return 0
`)

// replaceAccessScript replaces a private channel's record, keeping its
// network: KEYS 1 accessKey; ARGV 1 the record. It returns 0 when the channel
// is not private.
var replaceAccessScript = redis.NewScript(`#!lua
local old = redis.call('GET', KEYS[1])
if not old then return 0 end
local ok, o = pcall(cjson.decode, old)
local n = cjson.decode(ARGV[1])
if ok and type(o) == 'table' then n.network = o.network end
redis.call('SET', KEYS[1], cjson.encode(n))
return 1
`)

// touchAccessScript records a use: KEYS 1 accessKey, 2 P:fresh, 3 P:used;
// ARGV 1 ms, 2 C.
var touchAccessScript = redis.NewScript(`#!lua
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[3], 'GT', ARGV[1], ARGV[2])
return 1
`)

// expireAccessScript removes up to ARGV 3 private channels last used (or
// made, never used) before ARGV 1 ms: KEYS 1 P:private, 2 P:fresh, 3
// P:used, 4 P:nets; ARGV 2 and 4 what comes before and after a channel's
// name in its record's key. It returns their names.
var expireAccessScript = redis.NewScript(`#!lua` + removeAccessLua + `
local gone = {}
for _, z in ipairs({KEYS[2], KEYS[3]}) do
  for _, name in ipairs(redis.call('ZRANGEBYSCORE', z, '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]) - #gone)) do
    removeAccess(ARGV[2], ARGV[4], KEYS[1], KEYS[2], KEYS[3], KEYS[4], name)
    table.insert(gone, name)
  end
end
return gone
`)

// accessKey returns the key of a private channel's record (see layout).
func (s *Store) accessKey(channel string) string { return s.l.accessPre + channel + s.l.accessSuf }

// Access returns a private channel's record (see relay.Store), with its
// last use, in one round trip.
func (s *Store) Access(ctx context.Context, channel string) (*relay.Access, error) {
	if s.isClosed() {
		return nil, relay.ErrStoreClosed
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	var rec *redis.StringCmd
	var used *redis.FloatCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		rec = p.Get(ctx, s.accessKey(channel))
		used = p.ZScore(ctx, s.global("used"), channel)
		return nil
	})
	v, gerr := rec.Bytes()
	if errors.Is(gerr, redis.Nil) {
		return nil, nil
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.wrap("reading a private channel from", err)
	}
	a := new(relay.Access)
	if err := json.Unmarshal(v, a); err != nil {
		// Refusing every read is safer than serving the channel to all.
		return nil, fmt.Errorf("relay: Redis at %s: the record of private channel %s is damaged (%v); delete the key %s to make the channel anew", s.where, channel, err, s.accessKey(channel))
	}
	a.Used = time.Time{}
	if ms, err := used.Result(); err == nil {
		a.Used = time.UnixMilli(int64(ms))
	}
	return a, nil
}

// accessKeys are the keys every private channel's script shares: P:private,
// P:fresh, P:used, P:nets.
func (s *Store) accessKeys() []string {
	return []string{s.global("private"), s.global("fresh"), s.global("used"), s.global("nets")}
}

// PutAccess stores a private channel's record (see relay.Store).
func (s *Store) PutAccess(ctx context.Context, channel string, a relay.Access, create bool) error {
	if s.isClosed() {
		return relay.ErrStoreClosed
	}
	a.Used = time.Time{} // kept in P:used
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if !create {
		n, err := replaceAccessScript.Run(ctx, s.rdb, []string{s.accessKey(channel)}, v).Int()
		switch {
		case err != nil:
			return s.wrap("storing a private channel in", err)
		case n == 0:
			return fmt.Errorf("relay: channel %s is not private", channel)
		}
		return nil
	}
	keys := append([]string{s.accessKey(channel)}, s.accessKeys()...)
	n, err := createAccessScript.Run(ctx, s.rdb, keys, v, s.lim.PrivateChannels, s.lim.PrivatePerNetwork, a.Network, a.Created.UnixMilli(), channel, s.l.accessPre, s.l.accessSuf).Int()
	switch {
	case err != nil:
		return s.wrap("storing a private channel in", err)
	case n == 1:
		return relay.ErrChannelExists
	case n == 2:
		return relay.ErrTooManyPrivate
	case n == 3:
		return relay.ErrNetworkShare
	}
	return nil
}

// TouchAccess records a private channel's use (see relay.Store).
func (s *Store) TouchAccess(ctx context.Context, channel string, at time.Time) error {
	if s.isClosed() {
		return relay.ErrStoreClosed
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	k := s.accessKeys()
	if err := touchAccessScript.Run(ctx, s.rdb, []string{s.accessKey(channel), k[1], k[2]}, at.UnixMilli(), channel).Err(); err != nil {
		return s.wrap("recording a private channel's use in", err)
	}
	return nil
}

// expireBatch is how many private channels one script removes.
const expireBatch = 500

// ExpireAccess removes the private channels unused since idle (see
// relay.Store), expireBatch at a time.
func (s *Store) ExpireAccess(ctx context.Context, idle time.Time) ([]string, error) {
	var gone []string
	for {
		if s.isClosed() {
			return gone, relay.ErrStoreClosed
		}
		tctx, cancel := context.WithTimeout(ctx, redisTimeout)
		names, err := expireAccessScript.Run(tctx, s.rdb, s.accessKeys(), idle.UnixMilli(), s.l.accessPre, expireBatch, s.l.accessSuf).StringSlice()
		cancel()
		if err != nil {
			return gone, s.wrap("removing unused private channels from", err)
		}
		gone = append(gone, names...)
		if len(names) < expireBatch {
			return gone, nil
		}
	}
}

// Persistent reports true: the history is in Redis.
func (s *Store) Persistent() bool { return true }

// Missing returns how many of channels have no retained delivery (all of
// them if Redis does not answer), in one round trip.
func (s *Store) Missing(ctx context.Context, channels []string) int {
	if len(channels) == 0 {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	cmds := make([]*redis.IntCmd, len(channels))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, c := range channels {
			_, _, i, _, _ := s.keys(c)
			cmds[j] = p.Exists(ctx, i)
		}
		return nil
	})
	if err != nil {
		return len(channels)
	}
	n := 0
	for _, c := range cmds {
		if c.Val() == 0 {
			n++
		}
	}
	return n
}

// Stats returns the counters kept in Redis (zero if Redis does not answer:
// /healthz says so on its own).
func (s *Store) Stats(ctx context.Context) relay.StoreStats {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	var g *redis.SliceCmd
	var n *redis.IntCmd
	acks := relay.StoreStats{AckReplicas: s.acks, Replicas: int(s.connected.Load()), Unreplicated: s.unreplicated.Load()}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		g = p.HMGet(ctx, s.global("g"), "retained", "bytes")
		n = p.ZCard(ctx, s.global("lru"))
		return nil
	})
	if err != nil {
		return acks
	}
	num := func(v any) int64 {
		str, _ := v.(string)
		x, _ := strconv.ParseInt(str, 10, 64)
		return x
	}
	vals := g.Val()
	acks.Channels, acks.Retained, acks.Bytes = int(n.Val()), int(num(vals[0])), num(vals[1])
	return acks
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return s.wrap("pinging", err)
	}
	return nil
}

// Close stops the feed and closes the connections; later calls fail with
// relay.ErrStoreClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	f := s.feed
	s.mu.Unlock()
	if f != nil {
		f.stop()
	}
	s.cancel()
	return s.rdb.Close()
}
