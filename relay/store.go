package relay

import (
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// store keeps the history of every channel: the deliveries it retains, and
// the ids it gives them. It is the seam between the streaming code (which
// never sees how deliveries are kept) and a storage engine: ledgerStore (in
// memory, lost on restart, or with a bbolt file behind it for
// Options.DataDir, see bolt.go), and redisStore
// (Options.RedisURL), shared by several relays, which also implements
// sharedStore (see redis.go).
//
// The Server calls append and the first since of a stream while it holds
// the channel's lock, so that a joining stream gets every delivery exactly
// once; a store needs no lock of its own for that, only for its own data.
// Every method is safe for concurrent use. A context bounds the calls that
// may wait on a server (Redis); the in-process stores only check that it has
// not ended.
type store interface {
	// append records d as the next delivery of channel: it sets d.id to one
	// more than the larger of after and the channel's last id, and returns
	// only once d is stored as durably as the store promises (for
	// a data directory: fsynced). It then drops what the history limits require.
	// On error, d is not stored and d.id is unchanged.
	append(ctx context.Context, channel string, d *delivery, after int64) error

	// since returns the retained deliveries of channel with an id above
	// after, oldest first, stopping once they reach maxBytes of size (but
	// at least one, if any), together with the id of the oldest retained
	// delivery (last+1 if none) and the channel's last id (0 for a channel
	// the store does not know).
	since(ctx context.Context, channel string, after, maxBytes int64) (page []*delivery, first, last int64, err error)

	// get returns delivery id of channel, or nil if it is not retained.
	get(ctx context.Context, channel string, id int64) (*delivery, error)

	// findKey returns the newest retained delivery of channel whose
	// Idempotency-Key header is key, and the SHA-256 of its body.
	findKey(ctx context.Context, channel, key string) (id int64, sum [sha256.Size]byte, ok bool, err error)

	// missing counts the channels that have no retained deliveries (all of
	// them when the store cannot tell).
	missing(ctx context.Context, channels []string) int

	// persistent reports whether the history outlives the process (and
	// close must be called to release it).
	persistent() bool

	// stats returns the store's counters (zero when the store cannot tell).
	stats(ctx context.Context) storeStats

	// close releases the store; later calls fail with errStoreClosed.
	close() error
}

// sharedStore is a store that other relays append to as well (redisStore):
// deliveries they append must reach this relay's subscribers, so the Server
// watches the channels it has subscribers on and is told of their
// deliveries.
type sharedStore interface {
	store

	// startFeed starts reporting every delivery appended to a watched
	// channel, by any relay (this one included), to handle: with the
	// delivery, or with nil when the Server is to read what is new from
	// the store (after a subscription or a reconnection, which may have
	// missed some, or for a large delivery). Deliveries of one channel are
	// reported in id order, possibly again or with gaps; the Server sorts
	// that out by id. Called once, before any watch.
	startFeed(handle func(channel string, d *delivery))

	// watch sets whether channel is watched. It does not wait.
	watch(channel string, on bool)

	// ping reports whether the store's server answers.
	ping(ctx context.Context) error

	// lost returns when the store last found that its server lost data
	// (zero if never).
	lost() time.Time
}

// storeStats are the counters a store reports for Server.Stats.
type storeStats struct {
	channels int   // channels with retained deliveries
	retained int   // deliveries retained
	bytes    int64 // their size as the limits count it
}

// errStoreClosed is returned by a store after close.
var errStoreClosed = errors.New("relay: the history store is closed")

// limits bound the history (see Options).
type limits struct {
	chanCount  int           // deliveries per channel
	chanBytes  int64         // bytes per channel (the newest delivery is kept even if larger)
	totalBytes int64         // bytes of all channels
	age        time.Duration // at an append, the channel drops deliveries received this long before the new one; 0: no limit
}

// ledger is the bookkeeping every store shares: which deliveries each
// channel retains (ids and sizes), in which order channels were last
// appended to, and what the limits evict, with the deliveries themselves
// (ledgerStore); redisStore's append script does the same bookkeeping in
// Redis. It is not safe for concurrent use.
type ledger struct {
	limits
	chans    map[string]*ledgerChan
	lru      *list.List // of *ledgerChan, least recently appended to first
	bytes    int64
	retained int
}

// ledgerChan is one channel with at least one retained delivery.
type ledgerChan struct {
	name    string
	last    int64   // the last id given; entries end with it
	entries []entry // oldest first, ids increasing
	bytes   int64
	elem    *list.Element
}

// entry is one retained delivery.
type entry struct {
	id       int64
	size     int64
	received int64        // UnixNano, for limits.age
	key      *idempotency // nil without an Idempotency-Key header
	of       int64        // for a redelivery: the id of the delivery it repeats (delivery.of)
	d        *delivery    // ledgerStore's
}

// idempotency is a delivery's Idempotency-Key and the SHA-256 of its body.
type idempotency struct {
	key string
	sum [sha256.Size]byte
}

// idempotencyHeader is the message key of the Idempotency-Key header.
const idempotencyHeader = "idempotency-key"

func newLedger(l limits) *ledger {
	return &ledger{limits: l, chans: map[string]*ledgerChan{}, lru: list.New()}
}

// newEntry returns d's entry (d itself kept only if keep).
func newEntry(d *delivery, keep bool) entry {
	e := entry{id: d.id, size: d.size, received: d.received.UnixNano(), of: d.of}
	if k := headerValue(d.header, idempotencyHeader); k != "" {
		e.key = &idempotency{key: k, sum: sha256.Sum256(d.body)}
	}
	if keep {
		e.d = d
	}
	return e
}

// plan is an append worked out but not yet done: the id it gives and what
// it evicts. A store carries it out, then commits it to the ledger.
type plan struct {
	name  string
	c     *ledgerChan // nil for a channel the ledger does not hold
	id    int64
	e     entry
	drops []drop
}

// drop evicts the n oldest entries of c.
type drop struct {
	c *ledgerChan
	n int
}

// prepare works out the append of e to channel name (see store.append)
// without changing the ledger: the channel's own limits first (age, then
// count and bytes), then the total, taken from the channels appended to
// least recently (the appended channel counts as the most recent, and
// keeps at least e). redisStore's append script (redis.go) does the same in
// Redis; the two must stay in step.
func (l *ledger) prepare(name string, e entry, after int64) plan {
	c := l.chans[name]
	p := plan{name: name, c: c, id: after + 1, e: e}
	var entries []entry
	var cbytes int64
	if c != nil {
		p.id = max(after, c.last) + 1
		entries, cbytes = c.entries, c.bytes
	}
	p.e.id = p.id
	n, k := len(entries)+1, 0 // entries after the append, and those dropped
	cbytes += e.size
	if l.age > 0 {
		cutoff := e.received - int64(l.age)
		for k < len(entries) && entries[k].received < cutoff {
			cbytes -= entries[k].size
			k++
		}
	}
	for n-k > l.chanCount || (cbytes > l.chanBytes && n-k > 1) {
		cbytes -= entries[k].size
		k++
	}
	total := l.bytes - (c.bytesOf(k)) + e.size
	for el := l.lru.Front(); el != nil && total > l.totalBytes; el = el.Next() {
		oc := el.Value.(*ledgerChan)
		if oc == c {
			continue
		}
		j := 0
		for j < len(oc.entries) && total > l.totalBytes {
			total -= oc.entries[j].size
			j++
		}
		if j > 0 {
			p.drops = append(p.drops, drop{oc, j})
		}
	}
	for total > l.totalBytes && n-k > 1 {
		total -= entries[k].size
		k++
	}
	if k > 0 {
		p.drops = append(p.drops, drop{c, k})
	}
	return p
}

// bytesOf returns the size of c's k oldest entries (0 for a nil c).
func (c *ledgerChan) bytesOf(k int) int64 {
	var n int64
	if c != nil {
		for _, e := range c.entries[:k] {
			n += e.size
		}
	}
	return n
}

// commit applies a prepared plan: the drops, then the append.
func (l *ledger) commit(p plan) {
	for _, dr := range p.drops {
		l.evict(dr.c, dr.n, dr.c != p.c)
	}
	c := p.c
	if c == nil {
		c = &ledgerChan{name: p.name}
		c.elem = l.lru.PushBack(c)
		l.chans[p.name] = c
	} else {
		l.lru.MoveToBack(c.elem)
	}
	c.entries = append(c.entries, p.e)
	c.last = p.id
	c.bytes += p.e.size
	l.bytes += p.e.size
	l.retained++
}

// evict drops c's n oldest entries, and forgets c if that empties it and
// forget is set.
func (l *ledger) evict(c *ledgerChan, n int, forget bool) {
	dropped := c.bytesOf(n)
	c.bytes -= dropped
	l.bytes -= dropped
	l.retained -= n
	clear(c.entries[:n]) // let go of the deliveries
	c.entries = c.entries[n:]
	if len(c.entries) == 0 {
		c.entries = nil
		if forget {
			delete(l.chans, c.name)
			l.lru.Remove(c.elem)
		}
	}
}

// trim evicts what the limits require without an append (after they were
// lowered between two runs) and returns what it evicted.
func (l *ledger) trim() []removal {
	var out []removal
	var last *ledgerChan
	if el := l.lru.Back(); el != nil {
		last = el.Value.(*ledgerChan)
	}
	evict := func(c *ledgerChan, k int) {
		out = append(out, drop{c, k}.removal(""))
		l.evict(c, k, true)
	}
	for _, c := range l.chans {
		k := 0
		for n, b := len(c.entries), c.bytes; n-k > l.chanCount || (b > l.chanBytes && n-k > 1); k++ {
			b -= c.entries[k].size
		}
		if k > 0 {
			evict(c, k)
		}
	}
	for el := l.lru.Front(); el != nil && l.bytes > l.totalBytes; {
		c, next := el.Value.(*ledgerChan), el.Next()
		k := 0
		for total := l.bytes; k < len(c.entries) && total > l.totalBytes && (c != last || len(c.entries)-k > 1); k++ {
			total -= c.entries[k].size
		}
		if k > 0 {
			evict(c, k)
		}
		el = next
	}
	return out
}

// removal is what a drop removes from a store that keeps deliveries
// outside the ledger: ids of channel name, or the whole channel (all).
type removal struct {
	name    string
	entries []entry
	all     bool
}

// removal returns what dr removes, before it is committed; the channel
// keep (appended to) is never removed whole.
func (dr drop) removal(keep string) removal {
	r := removal{name: dr.c.name, all: dr.n == len(dr.c.entries) && dr.c.name != keep}
	r.entries = slices.Clone(dr.c.entries[:dr.n])
	return r
}

// window returns c's entries with an id above after, up to maxBytes (at
// least one), and the ids of its oldest and last entries.
func (l *ledger) window(name string, after, maxBytes int64) (page []entry, first, last int64) {
	c := l.chans[name]
	if c == nil {
		return nil, 1, 0
	}
	first, last = c.last+1, c.last
	if len(c.entries) > 0 {
		first = c.entries[0].id
	}
	i, _ := slices.BinarySearchFunc(c.entries, nextID(after), func(e entry, id int64) int { return cmpInt(e.id, id) })
	var n int64
	j := i
	for j < len(c.entries) && (j == i || n+c.entries[j].size <= maxBytes) {
		n += c.entries[j].size
		j++
	}
	return c.entries[i:j], first, last
}

// find returns the entry of channel name with the given id.
func (l *ledger) find(name string, id int64) (entry, bool) {
	c := l.chans[name]
	if c == nil {
		return entry{}, false
	}
	i, ok := slices.BinarySearchFunc(c.entries, id, func(e entry, id int64) int { return cmpInt(e.id, id) })
	if !ok {
		return entry{}, false
	}
	return c.entries[i], true
}

// findKey returns the newest entry of channel name with Idempotency-Key key.
func (l *ledger) findKey(name, key string) (entry, bool) {
	if c := l.chans[name]; c != nil {
		for i := len(c.entries) - 1; i >= 0; i-- {
			if k := c.entries[i].key; k != nil && k.key == key {
				return c.entries[i], true
			}
		}
	}
	return entry{}, false
}

// missing counts the channels the ledger holds no entry of.
func (l *ledger) missing(channels []string) int {
	n := 0
	for _, name := range channels {
		if l.chans[name] == nil {
			n++
		}
	}
	return n
}

func (l *ledger) stats() storeStats {
	return storeStats{channels: len(l.chans), retained: l.retained, bytes: l.bytes}
}

// nextID returns id+1, or id for the largest id.
func nextID(id int64) int64 {
	if id == math.MaxInt64 {
		return id
	}
	return id + 1
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ledgerStore keeps the history in memory, in its ledger: the deliveries
// themselves, their ids, sizes and Idempotency-Keys. Without a file it is
// the default store, lost when the process ends, whose append never fails
// (until close). With a file (Options.DataDir, openBolt) every append is
// committed to the file before it counts, and the file is read back into
// the ledger when the relay starts; reads never touch the disk.
type ledgerStore struct {
	mu     sync.Mutex // guards l and the file's refs; held across each write
	l      *ledger
	closed bool
	pinned *atomic.Int64 // Server.pinned: evicted deliveries subscribers hold count there
	file   *historyFile  // nil: memory only
}

func newMemStore(l limits, pinned *atomic.Int64) *ledgerStore {
	return &ledgerStore{l: newLedger(l), pinned: pinned}
}

func (m *ledgerStore) persistent() bool { return m.file != nil }

func (m *ledgerStore) append(ctx context.Context, channel string, d *delivery, after int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p := m.l.prepare(channel, newEntry(d, true), after)
	if m.file != nil {
		rs := make([]removal, len(p.drops))
		for i, dr := range p.drops {
			rs[i] = dr.removal(channel)
		}
		referred, err := m.file.write(channel, d, p, rs)
		if err != nil {
			return err
		}
		if !referred {
			d.of, p.e.of = 0, 0 // a copy: it refers to nothing
		}
	}
	d.id = p.id
	for _, dr := range p.drops {
		for _, e := range dr.c.entries[:dr.n] {
			if e.d.refs.Add(-1) > 0 {
				m.pinned.Add(e.d.size) // a subscriber still holds it
			}
		}
	}
	d.refs.Add(1) // before any subscriber: no change to pinned
	m.l.commit(p)
	return nil
}

func (m *ledgerStore) since(_ context.Context, channel string, after, maxBytes int64) ([]*delivery, int64, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, 0, 0, errStoreClosed
	}
	entries, first, last := m.l.window(channel, after, maxBytes)
	page := make([]*delivery, len(entries))
	for i, e := range entries {
		page[i] = e.d
	}
	return page, first, last, nil
}

func (m *ledgerStore) get(_ context.Context, channel string, id int64) (*delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errStoreClosed
	}
	e, _ := m.l.find(channel, id)
	return e.d, nil
}

func (m *ledgerStore) findKey(_ context.Context, channel, key string) (int64, [sha256.Size]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.l.findKey(channel, key)
	if !ok {
		return 0, [sha256.Size]byte{}, false, nil
	}
	return e.id, e.key.sum, true, nil
}

func (m *ledgerStore) missing(_ context.Context, channels []string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.l.missing(channels)
}

func (m *ledgerStore) stats(context.Context) storeStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.l.stats()
}

// close waits for a write in progress, then closes the file, if any
// (releasing its lock).
func (m *ledgerStore) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.file != nil {
		return m.file.db.Close()
	}
	return nil
}
