package relay

import (
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Store keeps the history of every channel: the deliveries it retains, and
// the ids it gives them. It is the seam between the relay (which never sees
// how deliveries are kept) and a storage engine, in the manner of
// litestream's ReplicaClient: the engine in this package keeps them in
// memory, with a bbolt file behind it for Options.DataDir (bolt.go);
// package relay/redisstore keeps them in Redis, shared by several relays,
// and also implements SharedStore. Options.Store opens another engine;
// package relay/storetest is the contract every engine passes.
//
// The Server calls Append and the first Since of a stream while it holds
// the channel's lock, so that a joining stream gets every delivery exactly
// once; a store needs no lock of its own for that, only for its own data.
// Every method is safe for concurrent use. A context bounds the calls that
// may wait on a server (Redis); the in-process store only checks that it
// has not ended. Entries a store returns are shared with every subscriber:
// they are never changed.
type Store interface {
	// Append records e as the next delivery of channel and returns its id:
	// one more than the larger of after and the channel's last id. It
	// returns only once e is stored as durably as the store promises (for
	// a data directory: fsynced), then drops what the history limits
	// require. On error, e is not stored. A shared store returns a
	// *KeyStoredError when e.UniqueKey() is set and another relay stored
	// e's Idempotency-Key meanwhile.
	Append(ctx context.Context, channel string, e *Entry, after int64) (id int64, err error)

	// Since returns the retained deliveries of channel with an id above
	// after, oldest first, stopping once they reach maxBytes of size (but
	// at least one, if any), together with the id of the oldest retained
	// delivery (last+1 if none) and the channel's last id (0 for a channel
	// the store does not know).
	Since(ctx context.Context, channel string, after, maxBytes int64) (page []*Entry, first, last int64, err error)

	// Get returns delivery id of channel, or nil if it is not retained.
	Get(ctx context.Context, channel string, id int64) (*Entry, error)

	// FindKey returns the newest retained delivery of channel whose
	// Idempotency-Key header is key, and the SHA-256 of its body.
	FindKey(ctx context.Context, channel, key string) (id int64, sum [sha256.Size]byte, ok bool, err error)

	// Access returns what the store keeps of private channel channel (see
	// Access), or nil for a channel that is not private.
	Access(ctx context.Context, channel string) (*Access, error)

	// PutAccess records a for channel. With create, channel becomes
	// private: it fails with ErrChannelExists if it is private already,
	// and with ErrNetworkShare when a.Network holds
	// Limits.PrivatePerNetwork; when the store holds
	// Limits.PrivateChannels, the oldest channel never used (see
	// TouchAccess) is removed to make room, and it fails with
	// ErrTooManyPrivate if every one was used. Without create, it
	// replaces a private channel's record (its last use stays). It
	// returns once a is stored as durably as a delivery.
	PutAccess(ctx context.Context, channel string, a Access, create bool) error

	// TouchAccess records that private channel channel was used at at (it
	// received a delivery, or had a reader): Access.Used. It does nothing
	// for a channel that is not private.
	TouchAccess(ctx context.Context, channel string, at time.Time) error

	// ExpireAccess removes the private channels last used (or, never
	// used, made) before idle, and returns their names: they are unknown
	// from then on (404), as a private channel the store lost is.
	ExpireAccess(ctx context.Context, idle time.Time) ([]string, error)

	// Missing counts the channels that have no retained deliveries (all of
	// them when the store cannot tell).
	Missing(ctx context.Context, channels []string) int

	// Persistent reports whether the history outlives the process (and
	// Close must be called to release it).
	Persistent() bool

	// Stats returns the store's counters (zero when the store cannot tell).
	Stats(ctx context.Context) StoreStats

	// Close releases the store; later calls fail with ErrStoreClosed.
	Close() error
}

// SharedStore is a Store that other relays append to as well: deliveries
// they append must reach this relay's subscribers, so the Server watches
// the channels it has subscribers on and is told of their deliveries.
type SharedStore interface {
	Store

	// StartFeed starts reporting every delivery appended to a watched
	// channel, by any relay (this one included), to handle: with the
	// delivery, or with nil when the Server is to read what is new from
	// the store (after a subscription or a reconnection, which may have
	// missed some, or for a large delivery). Deliveries of one channel are
	// reported in id order, possibly again or with gaps; the Server sorts
	// that out by id. Called once, before any Watch.
	StartFeed(handle func(channel string, e *Entry))

	// Watch sets whether channel is watched. It does not wait.
	Watch(channel string, on bool)

	// Ping reports whether the store's server answers.
	Ping(ctx context.Context) error

	// Lost returns when the store last found that its server lost data
	// (zero if never).
	Lost() time.Time

	// String names the store's server in the relay's messages and in
	// /healthz's status ("Redis": "the relay's Redis does not answer",
	// "redis unreachable").
	String() string
}

// OpenStore opens a storage engine with the history limits the relay
// derived from its Options, and the relay's logger (see Options.Store).
type OpenStore func(Limits, *slog.Logger) (Store, error)

// StoreStats are the counters a store reports for Server.Stats.
type StoreStats struct {
	Channels int   // channels with retained deliveries
	Retained int   // deliveries retained
	Bytes    int64 // their size as the limits count it (Entry.Size)
	// For a store whose server has replicas (Redis): how many replicas
	// each append waits for (0: none), how many the primary had connected
	// at the last look, and the appends the primary took but too few
	// replicas confirmed in time (answered 503).
	AckReplicas, Replicas int
	Unreplicated          int64
}

// Errors a store returns.
var (
	// ErrStoreClosed is returned by a store after Close.
	ErrStoreClosed = errors.New("relay: the history store is closed")

	// ErrStoreUnavailable: the store's server did not answer (refused,
	// timed out, the connection broke). A store wraps it with the cause;
	// the relay answers 503 and tells a stream to reconnect, and New
	// fails with it when a store cannot be opened for it.
	ErrStoreUnavailable = errors.New("the history store is unreachable")

	// ErrStoreUncertain marks an append whose connection broke after the
	// request was sent: it may have been stored.
	ErrStoreUncertain = errors.New("the delivery may or may not have been stored")

	// ErrStoreNotReplicated marks an append the store's primary took but
	// too few of its replicas confirmed in time: it is not relayed, and
	// could be lost if the primary failed. It is ErrStoreUncertain too.
	ErrStoreNotReplicated = errors.New("the delivery was stored but too few replicas confirmed it")
)

// KeyStoredError is what a shared store's Append returns when the
// delivery's Idempotency-Key was stored by another relay after the relay
// looked it up: the delivery it names, and its body's SHA-256.
type KeyStoredError struct {
	ID  int64
	Sum [sha256.Size]byte
}

func (e *KeyStoredError) Error() string {
	return fmt.Sprintf("relay: the Idempotency-Key names delivery %d", e.ID)
}

// Limits bound the history; a store applies them at every append (see
// Options.HistoryCount, HistoryBytes, TotalHistoryBytes and HistoryAge).
// Sizes are Entry.Size.
type Limits struct {
	ChanCount  int           // deliveries per channel; 0 (or less): no count limit
	ChanBytes  int64         // bytes per channel (the newest delivery is kept even if larger)
	TotalBytes int64         // bytes of all channels
	Age        time.Duration // at an append, the channel drops deliveries received this long before the new one; 0: no limit

	PrivateChannels   int // private channels the store keeps (Store.PutAccess)
	PrivatePerNetwork int // of them, made by one client network (Access.Network); 0: no limit
}

// ledger is the bookkeeping of this package's store: which deliveries each
// channel retains (ids and sizes), in which order channels were last
// appended to, and what the limits evict, with the deliveries themselves
// (ledgerStore); redisstore's append script does the same bookkeeping in
// Redis. It is not safe for concurrent use.
type ledger struct {
	Limits
	chans    map[string]*ledgerChan
	lru      *list.List // of *ledgerChan, least recently appended to first
	bytes    int64
	retained int
}

// ledgerChan is one channel with at least one retained delivery.
type ledgerChan struct {
	name    string
	last    int64         // the last id given; entries end with it
	entries []ledgerEntry // oldest first, ids increasing
	bytes   int64
	elem    *list.Element
}

// entry is one retained delivery.
type ledgerEntry struct {
	id       int64
	size     int64
	received int64        // UnixNano, for Limits.Age
	key      *idempotency // nil without an Idempotency-Key header
	of       int64        // for a redelivery: the id of the delivery it repeats (Entry.of)
	d        *Entry       // ledgerStore's
}

// idempotency is a delivery's Idempotency-Key and the SHA-256 of its body.
type idempotency struct {
	key string
	sum [sha256.Size]byte
}

// idempotencyHeader is the message key of the Idempotency-Key header.
const idempotencyHeader = "idempotency-key"

func newLedger(l Limits) *ledger {
	if l.ChanCount <= 0 {
		l.ChanCount = math.MaxInt // no count limit: the bytes bound the history
	}
	return &ledger{Limits: l, chans: map[string]*ledgerChan{}, lru: list.New()}
}

// newLedgerEntry returns d's ledger entry (d itself kept only if keep).
func newLedgerEntry(d *Entry, keep bool) ledgerEntry {
	e := ledgerEntry{id: d.id, size: d.size, received: d.received.UnixNano(), of: d.of}
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
	e     ledgerEntry
	drops []drop
}

// drop evicts the n oldest entries of c.
type drop struct {
	c *ledgerChan
	n int
}

// prepare works out the append of e to channel name (see Store.Append)
// without changing the ledger: the channel's own limits first (age, then
// count and bytes), then the total, taken from the channels appended to
// least recently (the appended channel counts as the most recent, and
// keeps at least e). redisstore's append script does the same in Redis;
// the two must stay in step (relay/storetest checks both).
func (l *ledger) prepare(name string, e ledgerEntry, after int64) plan {
	c := l.chans[name]
	p := plan{name: name, c: c, id: after + 1, e: e}
	var entries []ledgerEntry
	var cbytes int64
	if c != nil {
		p.id = max(after, c.last) + 1
		entries, cbytes = c.entries, c.bytes
	}
	p.e.id = p.id
	n, k := len(entries)+1, 0 // entries after the append, and those dropped
	cbytes += e.size
	if l.Age > 0 {
		cutoff := e.received - int64(l.Age)
		for k < len(entries) && entries[k].received < cutoff {
			cbytes -= entries[k].size
			k++
		}
	}
	for n-k > l.ChanCount || (cbytes > l.ChanBytes && n-k > 1) {
		cbytes -= entries[k].size
		k++
	}
	total := l.bytes - (c.bytesOf(k)) + e.size
	for el := l.lru.Front(); el != nil && total > l.TotalBytes; el = el.Next() {
		oc := el.Value.(*ledgerChan)
		if oc == c {
			continue
		}
		j := 0
		for j < len(oc.entries) && total > l.TotalBytes {
			total -= oc.entries[j].size
			j++
		}
		if j > 0 {
			p.drops = append(p.drops, drop{oc, j})
		}
	}
	for total > l.TotalBytes && n-k > 1 {
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
		for n, b := len(c.entries), c.bytes; n-k > l.ChanCount || (b > l.ChanBytes && n-k > 1); k++ {
			b -= c.entries[k].size
		}
		if k > 0 {
			evict(c, k)
		}
	}
	for el := l.lru.Front(); el != nil && l.bytes > l.TotalBytes; {
		c, next := el.Value.(*ledgerChan), el.Next()
		k := 0
		for total := l.bytes; k < len(c.entries) && total > l.TotalBytes && (c != last || len(c.entries)-k > 1); k++ {
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
	entries []ledgerEntry
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
func (l *ledger) window(name string, after, maxBytes int64) (page []ledgerEntry, first, last int64) {
	c := l.chans[name]
	if c == nil {
		return nil, 1, 0
	}
	first, last = c.last+1, c.last
	if len(c.entries) > 0 {
		first = c.entries[0].id
	}
	i, _ := slices.BinarySearchFunc(c.entries, nextID(after), func(e ledgerEntry, id int64) int { return cmpInt(e.id, id) })
	var n int64
	j := i
	for j < len(c.entries) && (j == i || n+c.entries[j].size <= maxBytes) {
		n += c.entries[j].size
		j++
	}
	return c.entries[i:j], first, last
}

// find returns the entry of channel name with the given id.
func (l *ledger) find(name string, id int64) (ledgerEntry, bool) {
	c := l.chans[name]
	if c == nil {
		return ledgerEntry{}, false
	}
	i, ok := slices.BinarySearchFunc(c.entries, id, func(e ledgerEntry, id int64) int { return cmpInt(e.id, id) })
	if !ok {
		return ledgerEntry{}, false
	}
	return c.entries[i], true
}

// findKey returns the newest entry of channel name with Idempotency-Key key.
func (l *ledger) findKey(name, key string) (ledgerEntry, bool) {
	if c := l.chans[name]; c != nil {
		for i := len(c.entries) - 1; i >= 0; i-- {
			if k := c.entries[i].key; k != nil && k.key == key {
				return c.entries[i], true
			}
		}
	}
	return ledgerEntry{}, false
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

func (l *ledger) stats() StoreStats {
	return StoreStats{Channels: len(l.chans), Retained: l.retained, Bytes: l.bytes}
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

	access   map[string]Access // the private channels
	networks map[string]int    // how many of them each Access.Network made
}

func newMemStore(l Limits, pinned *atomic.Int64) *ledgerStore {
	return &ledgerStore{l: newLedger(l), pinned: pinned, access: map[string]Access{}, networks: map[string]int{}}
}

func (m *ledgerStore) Access(_ context.Context, channel string) (*Access, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrStoreClosed
	}
	a, ok := m.access[channel]
	if !ok {
		return nil, nil
	}
	return &a, nil
}

func (m *ledgerStore) PutAccess(ctx context.Context, channel string, a Access, create bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	old, exists := m.access[channel]
	switch {
	case create && exists:
		return ErrChannelExists
	case create && a.Network != "" && m.l.PrivatePerNetwork > 0 && m.networks[a.Network] >= m.l.PrivatePerNetwork:
		return ErrNetworkShare
	case create && len(m.access) >= m.l.PrivateChannels:
		oldest, found := "", false
		for name, o := range m.access {
			if o.Used.IsZero() && (!found || o.Created.Before(m.access[oldest].Created)) {
				oldest, found = name, true
			}
		}
		if !found {
			return ErrTooManyPrivate
		}
		if err := m.removeAccess(oldest); err != nil {
			return err
		}
	case !create && !exists:
		return fmt.Errorf("relay: channel %s is not private", channel)
	}
	if !create {
		a.Used, a.Network = old.Used, old.Network
	}
	return m.setAccess(channel, a)
}

// setAccess stores channel's record, in the file first.
func (m *ledgerStore) setAccess(channel string, a Access) error {
	if m.file != nil {
		if err := m.file.putAccess(channel, &a); err != nil {
			return err
		}
	}
	if _, ok := m.access[channel]; !ok {
		m.networks[a.Network]++
	}
	m.access[channel] = a
	return nil
}

// removeAccess removes channel's record, from the file first.
func (m *ledgerStore) removeAccess(channel string) error {
	if m.file != nil {
		if err := m.file.putAccess(channel, nil); err != nil {
			return err
		}
	}
	if n := m.networks[m.access[channel].Network] - 1; n > 0 {
		m.networks[m.access[channel].Network] = n
	} else {
		delete(m.networks, m.access[channel].Network)
	}
	delete(m.access, channel)
	return nil
}

func (m *ledgerStore) TouchAccess(ctx context.Context, channel string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrStoreClosed
	}
	a, ok := m.access[channel]
	if !ok || !at.After(a.Used) {
		return ctx.Err()
	}
	a.Used = at
	return m.setAccess(channel, a)
}

func (m *ledgerStore) ExpireAccess(ctx context.Context, idle time.Time) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrStoreClosed
	}
	var gone []string
	for name, a := range m.access {
		if err := ctx.Err(); err != nil {
			return gone, err
		}
		if a.lastUse().Before(idle) {
			if err := m.removeAccess(name); err != nil {
				return gone, err
			}
			gone = append(gone, name)
		}
	}
	return gone, nil
}

func (m *ledgerStore) Persistent() bool { return m.file != nil }

func (m *ledgerStore) Append(ctx context.Context, channel string, d *Entry, after int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	p := m.l.prepare(channel, newLedgerEntry(d, true), after)
	if m.file != nil {
		rs := make([]removal, len(p.drops))
		for i, dr := range p.drops {
			rs[i] = dr.removal(channel)
		}
		referred, err := m.file.write(channel, d, p, rs)
		if err != nil {
			return 0, err
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
	return p.id, nil
}

func (m *ledgerStore) Since(_ context.Context, channel string, after, maxBytes int64) ([]*Entry, int64, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, 0, 0, ErrStoreClosed
	}
	entries, first, last := m.l.window(channel, after, maxBytes)
	page := make([]*Entry, len(entries))
	for i, e := range entries {
		page[i] = e.d
	}
	return page, first, last, nil
}

func (m *ledgerStore) Get(_ context.Context, channel string, id int64) (*Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrStoreClosed
	}
	e, _ := m.l.find(channel, id)
	return e.d, nil
}

func (m *ledgerStore) FindKey(_ context.Context, channel, key string) (int64, [sha256.Size]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.l.findKey(channel, key)
	if !ok {
		return 0, [sha256.Size]byte{}, false, nil
	}
	return e.id, e.key.sum, true, nil
}

func (m *ledgerStore) Missing(_ context.Context, channels []string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.l.missing(channels)
}

func (m *ledgerStore) Stats(context.Context) StoreStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.l.stats()
}

// close waits for a write in progress, then closes the file, if any
// (releasing its lock).
func (m *ledgerStore) Close() error {
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
