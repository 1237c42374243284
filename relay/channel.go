package relay

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/internal/wire"
)

// channel is what the Server holds for a channel in use (a stream, or a
// POST in progress): its subscribers, and the lock that orders its
// deliveries. The history itself is in the store. It is created on first
// use and forgotten when unused.
type channel struct {
	name string
	refs int // guarded by Server.mu: users holding the channel

	// appendMu orders this relay's appends to the channel: it is held
	// across a POST's Idempotency-Key check and append (the storage I/O),
	// and handed over to mu for the fan-out, so that deliveries are queued
	// in id order.
	appendMu sync.Mutex

	// mu guards what streams share, and is never held across storage I/O:
	// a slow disk or Redis delays this channel's POSTs, not its streams,
	// nor other channels. A joining stream reads the history without it,
	// then registers under it with the larger of the last id it read and
	// lastID (see join): deliveries up to there come from its replay, the
	// later ones through its queue (subscriber.after drops any that
	// arrive in both), so each comes exactly once.
	mu       sync.Mutex
	lastID   int64                    // the newest id queued for subscribers, or seen without any
	subs     map[*subscriber]struct{} // made by the first join
	linkers  map[string]*subscriber   // subscribers taking bodies by link, by token (see wire.StreamHeader)
	nsubs    atomic.Int32             // len(subs), for Stats without mu
	joins    int64                    // subscribers that joined so far
	catching bool                     // a catch-up (catchUpLater) is running
	again    bool                     // and must read the store once more when done
}

// subscriber is one open stream. Its queue is a slice that grows only while
// deliveries wait, so that an idle subscriber costs little.
type subscriber struct {
	after  int64 // the end of its replay: its queue takes later ids only
	format streamFormat
	ip     string        // the client's address (clientIP)
	joined int64         // the order it joined its channel in (channel.joins)
	since  time.Time     // when it joined, to find a client's oldest stream
	notify chan struct{} // capacity 1: pending has deliveries (see signal)
	kicked chan struct{} // closed when the subscriber is cut off
	pins   *atomic.Int64 // Server.pinned

	token string // names the stream in its links, when it takes large bodies by link

	live atomic.Pointer[liveWriter] // the stream's writer, once its goroutine runs

	mu           sync.Mutex
	pending      []*Entry
	pendingBytes int64            // of pending, for the queue's limit
	held         int64            // of the deliveries it holds: pending, being written, linked
	linked       map[int64]*Entry // written by link, kept for their fetch (see link)
	whole        map[int64]bool   // of linked, those written whole to a fetch (see fetchedWhole)
	out          streamOut        // not to be used once done
	done         bool
}

// offer queues d for the subscriber, or reports false when it is too far
// behind: maxCount deliveries, or maxBytes of them, already wait. The
// caller then has them written (write or signal).
func (sub *subscriber) offer(d *Entry, maxCount int, maxBytes int64) bool {
	if d.id <= sub.after {
		return true // its replay has it
	}
	sub.mu.Lock()
	if len(sub.pending) >= maxCount || (len(sub.pending) > 0 && sub.pendingBytes+d.size > maxBytes) {
		sub.mu.Unlock()
		return false
	}
	sub.pending = append(sub.pending, d)
	sub.pendingBytes += d.size
	sub.mu.Unlock()
	sub.hold(d)
	return true
}

// signal tells the stream's goroutine that deliveries wait.
func (sub *subscriber) signal() {
	select {
	case sub.notify <- struct{}{}:
	default:
	}
}

// write writes the waiting deliveries from the caller's goroutine if the
// stream's goroutine waits for news, and reports whether it did (see
// liveWriter.write); the caller signals it otherwise.
func (sub *subscriber) write() bool {
	lw := sub.live.Load()
	return lw != nil && lw.write()
}

// waiting returns the size of the deliveries waiting.
func (sub *subscriber) waiting() int64 {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.pendingBytes
}

// hold and release count a delivery the subscriber holds (queued, being
// written, or in its replay) in its held bytes and in Server.pinned (see
// Entry.refs).
func (sub *subscriber) hold(d *Entry) {
	sub.mu.Lock()
	sub.held += d.size
	sub.mu.Unlock()
	if d.refs.Add(1) == 1 {
		sub.pins.Add(d.size)
	}
}

func (sub *subscriber) release(d *Entry) {
	sub.mu.Lock()
	sub.held -= d.size
	sub.mu.Unlock()
	if d.refs.Add(-1) == 0 {
		sub.pins.Add(-d.size)
	}
}

// take returns the waiting deliveries, giving the subscriber buf (emptied)
// as its next queue. The caller releases each once written.
func (sub *subscriber) take(buf []*Entry) []*Entry {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	out := sub.pending
	sub.pending = buf[:0]
	sub.pendingBytes = 0
	return out
}

// link keeps d, just written by link, for its fetch (the subscriber goes on
// holding it: see hold).
func (sub *subscriber) link(d *Entry) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.linked == nil {
		sub.linked = map[int64]*Entry{}
	}
	sub.linked[d.id] = d // each delivery is written once (see channel.mu)
}

// fetch returns the linked delivery id (nil if none), and takes those
// linked before it, which the caller releases: the client fetches in
// order, so it has them. A delivery is kept after its own fetch, so that a
// fetch cut off midway can be made again, until a later one or the end of
// the stream.
func (sub *subscriber) fetch(id int64) (d *Entry, before []*Entry) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	d = sub.linked[id]
	if d == nil {
		return nil, nil
	}
	for k, o := range sub.linked {
		if k < id {
			before = append(before, o)
			delete(sub.linked, k)
		}
	}
	return d, before
}

// fetchedWhole marks linked delivery id as written whole to a fetch: the
// stream keeps it for a fetch made again (the client may not have read
// what the socket took), but shed lets it go before it cuts any stream.
func (sub *subscriber) fetchedWhole(id int64) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if _, ok := sub.linked[id]; ok {
		if sub.whole == nil {
			sub.whole = map[int64]bool{}
		}
		sub.whole[id] = true
	}
}

// dropWhole lets go of the linked deliveries written whole (see
// fetchedWhole) and returns them, for the caller to release.
func (sub *subscriber) dropWhole() []*Entry {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	var out []*Entry
	for id := range sub.whole {
		if d := sub.linked[id]; d != nil {
			out = append(out, d)
			delete(sub.linked, id)
		}
	}
	sub.whole = nil
	return out
}

// unlinkAll takes every linked delivery: the stream has ended.
func (sub *subscriber) unlinkAll() []*Entry {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	ds := make([]*Entry, 0, len(sub.linked))
	for _, d := range sub.linked {
		ds = append(ds, d)
	}
	sub.linked = nil
	return ds
}

// setOut makes out the stream's destination, once its connection is
// hijacked.
func (sub *subscriber) setOut(out streamOut) {
	sub.mu.Lock()
	sub.out = out
	sub.mu.Unlock()
}

// cut ends a slow subscriber's stream: the handler sees kicked before its
// next write, and a write already blocked fails at once. What waited in its
// queue is let go.
func (sub *subscriber) cut() {
	close(sub.kicked)
	sub.mu.Lock()
	pending := sub.pending
	sub.pending = nil
	if !sub.done {
		sub.out.SetWriteDeadline(time.Now()) // ErrNotSupported: the handler still sees kicked
	}
	sub.mu.Unlock()
	for _, d := range pending {
		sub.release(d)
	}
}

// acquire returns the channel called name, created if needed, for the
// caller to use until it calls release. A stream (stream set) is refused
// with errClosing once the relay closes.
func (s *Server) acquire(name string, stream bool) (*channel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stream && s.closed {
		return nil, errClosing
	}
	c := s.channels[name]
	if c == nil {
		c = &channel{name: name}
		s.channels[name] = c
	}
	c.refs++
	return c, nil
}

// release ends a use of c, forgetting it after the last one.
func (s *Server) release(c *channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.refs--; c.refs == 0 {
		delete(s.channels, c.name)
	}
}

// errKeyReused is the answer to a POST whose Idempotency-Key names a
// retained delivery with a different body.
var errKeyReused = errors.New("relay: Idempotency-Key reused for a different body")

// published is the outcome of publish.
type published struct {
	id        int64 // the delivery's id (the first one's, for a duplicate)
	queued    int   // subscribers it was queued for
	duplicate bool  // its Idempotency-Key named a retained delivery: not published again
}

// publish stores d as the channel's next delivery and queues it for every
// subscriber, cutting off those whose queue is full. If d has an
// Idempotency-Key naming a retained delivery of the channel (and is not a
// redelivery, see Entry.UniqueKey), d is not published: the result names that delivery, or the error
// wraps errKeyReused when its body differs. A store error means d was not
// stored nor sent to anyone.
//
// The streams handed d get it before publish returns (so a POST is
// answered after its delivery is on its way). A channel's one stream
// that was quiet (quietGap) and whose goroutine waits for news is written
// here, on the caller's goroutine (liveWriter.write): no goroutine is
// woken, nor the processor it would run on. Other streams' goroutines are
// woken, and publish then yields once, last: a woken goroutine waits in
// this processor's next slot, where an idle processor's thread takes it
// only after a spin and a sleep, and would otherwise run once the caller
// parks, after the POST's answer and the request's end (about 0.06 ms on
// every delivery's way at a user's rate here, docs/PERFORMANCE.md).
func (s *Server) publish(ctx context.Context, name string, d *Entry) (p published, err error) {
	var queued [1]*subscriber // most channels have one stream
	woken := queued[:0]
	defer func() {
		// After every unlock below.
		if len(woken) == 1 && woken[0].write() {
			return
		}
		for _, sub := range woken {
			sub.signal()
		}
		if len(woken) > 0 {
			runtime.Gosched()
		}
	}()
	defer s.shed() // once c.mu is unlocked
	c, _ := s.acquire(name, false)
	defer s.release(c)
	c.appendMu.Lock()
	handedOver := false
	defer func() {
		if !handedOver {
			c.appendMu.Unlock()
		}
	}()
	if key := d.IdempotencyKey(); d.UniqueKey() && key != "" {
		id, sum, ok, err := s.store.FindKey(ctx, name, key)
		if err != nil {
			return published{}, err
		}
		if ok {
			if sum != sha256.Sum256(d.body) {
				return published{id: id}, fmt.Errorf("%w: delivery %d had it", errKeyReused, id)
			}
			return published{id: id, duplicate: true}, nil
		}
	}
	c.mu.Lock()
	after := c.lastID
	c.mu.Unlock()
	id, err := s.store.Append(ctx, name, d, after)
	var stored *KeyStoredError
	if errors.As(err, &stored) { // a shared store: another relay took the key meanwhile
		if stored.Sum != sha256.Sum256(d.body) {
			return published{id: stored.ID}, fmt.Errorf("%w: delivery %d had it", errKeyReused, stored.ID)
		}
		return published{id: stored.ID, duplicate: true}, nil
	}
	if err != nil {
		if !errors.Is(err, ErrStoreClosed) && !errors.Is(err, ErrStoreUnavailable) && ctx.Err() == nil {
			// /healthz says so (a shared store's server being away, its ping says).
			s.writeErr.Store(&writeFailure{err: err, at: time.Now()})
		}
		return published{}, err
	}
	if d.id != id {
		// A store whose readers get copies (Redis) leaves d's id to its
		// caller. The in-process store set it before d became visible
		// (under its lock): streams replaying the history may be reading
		// it already, so it is not written again (a data race, even with
		// the same value).
		d.id = id
	}
	s.writeErr.Store(nil)
	switch {
	case name == s.opts.CanaryChannel: // never "": a channel has a name
		s.canaryDeliveries.Add(1)
	case s.opts.CountPerChannel:
		s.counts.add(name)
		fallthrough
	default:
		s.deliveries.Add(1)
	}
	p = published{id: d.id}
	c.mu.Lock()
	c.appendMu.Unlock()
	handedOver = true
	defer c.mu.Unlock()
	switch {
	case len(c.subs) == 0:
		c.lastID = max(c.lastID, d.id)
	case d.id == c.lastID+1:
		c.lastID = d.id
		woken = s.fanOut(c, d, woken)
		p.queued = len(woken)
	case d.id > c.lastID+1:
		// Another relay appended deliveries this one's subscribers have
		// not had yet (a shared store): they go first, read from the
		// store, then d (stored: the sender gets 200 even if the store
		// does not answer the read at once).
		s.catchUpLater(c)
		p.queued = len(c.subs)
	}
	return p, nil
}

// fanOut queues d for every subscriber of c, cutting off those whose queue
// is full, and appends those it was queued for to queued, for the caller
// to have it written (see publish). The caller holds c.mu.
func (s *Server) fanOut(c *channel, d *Entry, queued []*subscriber) []*subscriber {
	for sub := range c.subs {
		if sub.offer(d, s.opts.SubscriberQueue, s.opts.HistoryBytes) {
			queued = append(queued, sub)
			continue
		}
		s.removeSub(c, sub)
		s.cutOff.Add(1)
		sub.cut()
		s.log.Warn("slow subscriber cut off; it can resume with Last-Event-ID", "channel", c.name)
	}
	return queued
}

// fanOutSignal is fanOut for a background goroutine (a catch-up, the
// shared store's feed): the streams' goroutines write d.
func (s *Server) fanOutSignal(c *channel, d *Entry) {
	var queued [1]*subscriber
	for _, sub := range s.fanOut(c, d, queued[:0]) {
		sub.signal()
	}
}

// shed cuts off the subscribers that hold the most while the deliveries
// only subscribers hold (Server.pinned: queued, or being written, but no
// longer in a history in memory) take more than Options.TotalHistoryBytes.
// They resume with Last-Event-ID. Without it, streams that do not read
// would keep evicted deliveries alive beyond every limit.
func (s *Server) shed() {
	excess := s.pinned.Load() - s.opts.TotalHistoryBytes
	if excess <= 0 || !s.shedding.TryLock() {
		return
	}
	defer s.shedding.Unlock()
	type holder struct {
		c    *channel
		sub  *subscriber
		held int64
	}
	chans := s.holdChannels()
	// First the bodies streams keep only in case a whole fetch must be
	// made again: no stream is cut for those.
	var whole []struct {
		sub *subscriber
		ds  []*Entry
	}
	for _, c := range chans {
		c.mu.Lock()
		for sub := range c.subs {
			if ds := sub.dropWhole(); len(ds) > 0 {
				whole = append(whole, struct {
					sub *subscriber
					ds  []*Entry
				}{sub, ds})
			}
		}
		c.mu.Unlock()
	}
	for _, w := range whole {
		for _, d := range w.ds {
			w.sub.release(d)
		}
	}
	excess = s.pinned.Load() - s.opts.TotalHistoryBytes
	var holders []holder
	for _, c := range chans {
		c.mu.Lock()
		for sub := range c.subs {
			sub.mu.Lock()
			if sub.held > 0 {
				holders = append(holders, holder{c, sub, sub.held})
			}
			sub.mu.Unlock()
		}
		c.mu.Unlock()
	}
	slices.SortFunc(holders, func(a, b holder) int { return cmpInt(b.held, a.held) })
	cut := 0
	for _, h := range holders {
		if excess <= 0 {
			break
		}
		h.c.mu.Lock()
		if _, ok := h.c.subs[h.sub]; ok {
			s.removeSub(h.c, h.sub)
			s.cutOff.Add(1)
			h.sub.cut()
			excess -= h.held
			cut++
		}
		h.c.mu.Unlock()
	}
	for _, c := range chans {
		s.release(c)
	}
	if cut > 0 {
		s.log.Warn("streams that fall behind hold more than the total history limit; those holding the most were cut off, to resume with Last-Event-ID", "cutOff", cut, "limit", s.opts.TotalHistoryBytes)
	}
}

// holdChannels returns the channels in use, each held (see channel.refs)
// until the caller releases it.
func (s *Server) holdChannels() []*channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	chans := make([]*channel, 0, len(s.channels))
	for _, c := range s.channels {
		c.refs++
		chans = append(chans, c)
	}
	return chans
}

// removeSub unregisters sub from c, and stops watching c in a shared store
// after its last subscriber. The caller holds c.mu.
func (s *Server) removeSub(c *channel, sub *subscriber) {
	if _, ok := c.subs[sub]; !ok {
		return
	}
	delete(c.subs, sub)
	delete(c.linkers, sub.token)
	c.nsubs.Add(-1)
	s.subscribers.Add(-1)
	if len(c.subs) == 0 && s.shared != nil {
		s.shared.Watch(c.name, false)
	}
}

// catchUp queues for c's subscribers the deliveries after c.lastID, read
// from the store without holding c.mu: those another relay appended to a
// shared store. If some left the history before this relay could read
// them, the subscribers are cut off instead: they resume with Last-Event-ID
// and are told of the gap.
func (s *Server) catchUp(ctx context.Context, c *channel) error {
	for {
		c.mu.Lock()
		from, n := c.lastID, len(c.subs)
		c.mu.Unlock()
		if n == 0 {
			return nil
		}
		page, _, last, err := s.store.Since(ctx, c.name, from, replayPageBytes)
		if err != nil {
			return err
		}
		c.mu.Lock()
		if c.lastID != from {
			c.mu.Unlock()
			continue // queued meanwhile (a publish, the feed): read on from there
		}
		if len(page) == 0 && last <= from {
			c.mu.Unlock()
			return nil // nothing new
		}
		if len(page) == 0 || page[0].id != from+1 {
			for sub := range c.subs {
				s.removeSub(c, sub)
				s.cutOff.Add(1)
				sub.cut()
			}
			s.log.Warn("deliveries left the history before this relay could relay them; subscribers cut off, to resume with Last-Event-ID", "channel", c.name, "after", from)
			c.lastID = max(c.lastID, last)
			c.mu.Unlock()
			return nil
		}
		for _, d := range page {
			c.lastID = d.id
			s.fanOutSignal(c, d)
		}
		done := c.lastID >= last
		c.mu.Unlock()
		if done {
			return nil // caught up with the store as it was when read
		}
	}
}

// catchUpLater runs catchUp for c in its own goroutine, unless one runs
// already (that one then reads the store once more) or the storage is
// closing (CloseStorage ends and waits for them), so that neither the
// caller nor the shared store's feed, which serves every channel, waits
// for the store. After an error it tries again in a moment.
func (s *Server) catchUpLater(c *channel) {
	// The caller holds c.mu.
	if c.catching {
		c.again = true
		return
	}
	ctx := s.backgroundCtx
	s.mu.Lock()
	if ctx.Err() != nil { // CloseStorage
		s.mu.Unlock()
		return
	}
	c.refs++
	s.background.Add(1)
	s.mu.Unlock()
	c.catching = true
	go func() {
		defer s.background.Done()
		defer s.release(c)
		for {
			err := s.catchUp(ctx, c)
			c.mu.Lock()
			again := c.again && err == nil
			c.again = false
			c.catching = again
			c.mu.Unlock()
			if err != nil {
				s.retryFeed(c.name, err)
			}
			if !again {
				return
			}
		}
	}()
}

// fromFeed handles what a shared store's feed reports (see
// SharedStore.StartFeed): d, a delivery of channel name that any relay
// appended, or nil to read what is new from the store. Deliveries this
// relay's subscribers already have (by id) are skipped; the store is read
// in the background (catchUpLater).
func (s *Server) fromFeed(name string, d *Entry) {
	s.mu.Lock()
	c := s.channels[name]
	if c != nil {
		c.refs++
	}
	s.mu.Unlock()
	if c == nil {
		return
	}
	defer s.release(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case len(c.subs) == 0 || (d != nil && d.id <= c.lastID):
	case d != nil && d.id == c.lastID+1:
		c.lastID = d.id
		s.fanOutSignal(c, d)
	default:
		s.catchUpLater(c)
	}
}

// feedRetry is how long the Server waits before it reads a shared store
// again after a failed catch-up.
const feedRetry = time.Second

// retryFeed reads what is new for channel name again in a moment, after
// err; subscribers stay connected meanwhile.
func (s *Server) retryFeed(name string, err error) {
	if errors.Is(err, ErrStoreClosed) || s.backgroundCtx.Err() != nil {
		return
	}
	s.log.Warn("could not read new deliveries from the history store; retrying", "channel", name, "err", err)
	time.AfterFunc(feedRetry, func() { s.fromFeed(name, nil) })
}

// replayPageBytes bounds the deliveries a stream reads from the store at
// once while it replays.
const replayPageBytes = 4 << 20

// join registers sub as a subscriber of channel name and returns the
// channel (to leave when done) and the stream's replay.
//
// With resume set, the replay holds every retained delivery after
// lastEventID up to the channel's last id at the moment of joining; every
// later one reaches sub through its queue. A lastEventID that is not a
// decimal integer between 0 and the channel's last id (garbage, or an id
// from a history that has been forgotten) is treated as 0, and always
// announced as a gap with reason "unknown". Without resume the replay is
// empty.
func (s *Server) join(ctx context.Context, name string, sub *subscriber, lastEventID string, resume bool) (*channel, *replay, error) {
	c, err := s.acquire(name, true)
	if err != nil {
		return nil, nil, err
	}
	rp := &replay{s: s, name: name}
	after, perr := wire.ParseEventID(lastEventID) // a decimal id, or a gosmee stream's "0-<id>"
	unknown := perr != nil || after < 0
	if !resume || unknown {
		after = 0
	}
	if !resume {
		after = math.MaxInt64 // only the channel's last id is wanted
	}
	// The history is read without c.mu (see channel.mu).
	page, first, last, err := s.store.Since(ctx, name, after, replayPageBytes)
	if err == nil && resume && !unknown && after > last {
		c.mu.Lock()
		known := c.lastID
		c.mu.Unlock()
		if after > known {
			unknown, after = true, 0
			page, first, last, err = s.store.Since(ctx, name, 0, replayPageBytes)
		}
	}
	if err != nil {
		s.release(c)
		return nil, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// One client address holds at most MaxSubscribersPerIP of the channel's
	// streams, and the channel MaxSubscribers: beyond either, the oldest
	// stream (of that address) makes room. Its client resumes with
	// Last-Event-ID; strangers who hold the channel's streams cannot lock
	// its owner out.
	var oldest, oldestOfIP *subscriber
	ofIP := 0
	for o := range c.subs {
		if oldest == nil || o.joined < oldest.joined {
			oldest = o
		}
		if o.ip == sub.ip {
			ofIP++
			if oldestOfIP == nil || o.joined < oldestOfIP.joined {
				oldestOfIP = o
			}
		}
	}
	var evict *subscriber
	switch {
	case ofIP >= s.opts.MaxSubscribersPerIP:
		evict = oldestOfIP
		s.log.Warn("client holds the most streams of a channel it may: its oldest was cut off to make room; it can resume with Last-Event-ID", "channel", name, "client", sub.ip, "maxSubscribersPerIP", s.opts.MaxSubscribersPerIP)
	case len(c.subs) >= s.opts.MaxSubscribers:
		evict = oldest
		s.log.Warn("channel full: its oldest subscriber was cut off to make room; it can resume with Last-Event-ID", "channel", name, "maxSubscribers", s.opts.MaxSubscribers)
	}
	if evict != nil {
		s.removeSub(c, evict)
		s.cutOff.Add(1)
		evict.cut()
	}
	c.joins++
	sub.joined = c.joins
	// The replay ends at the last id the read saw or that was queued since
	// (those it reads from the store too); later ones come through the
	// queue.
	end := max(last, c.lastID)
	if last > c.lastID && len(c.subs) > 0 {
		// Another relay appended deliveries that this one's subscribers
		// have not had yet (a shared store): they get them from the store,
		// in the background.
		s.catchUpLater(c)
	} else {
		c.lastID = end
	}
	sub.after = end
	if c.subs == nil {
		c.subs = map[*subscriber]struct{}{}
	}
	c.subs[sub] = struct{}{}
	if sub.token != "" {
		if c.linkers == nil {
			c.linkers = map[string]*subscriber{}
		}
		c.linkers[sub.token] = sub
	}
	c.nsubs.Add(1)
	s.subscribers.Add(1)
	if len(c.subs) == 1 && s.shared != nil {
		// From now on, deliveries other relays append reach this one;
		// those appended since the read above are read again once the
		// watch is in place (fromFeed with nil).
		s.shared.Watch(name, true)
	}
	if !resume {
		rp.cursor, rp.end = end, end
		return c, rp, nil
	}
	rp.lastEventID = truncate(lastEventID, 64)
	rp.cursor, rp.end, rp.page = after, end, page
	switch {
	case unknown:
		rp.gap = &wire.Gap{From: 1, To: first - 1, Reason: s.gapReason("unknown")}
	case after+1 < first:
		rp.gap = &wire.Gap{From: after + 1, To: first - 1, Reason: s.gapReason("expired")}
	}
	if rp.gap != nil {
		rp.gap.LastEventID = rp.lastEventID
		rp.cursor = max(rp.cursor, first-1)
	}
	return c, rp, nil
}

// lostWindow is how long after Redis lost its data the relay reports gaps
// as "lost": the ids it then misses are likely those Redis lost, not ones
// the limits dropped.
const lostWindow = 24 * time.Hour

// gapReason returns the reason of a gap the history explains by reason
// ("expired", "unknown"): "lost" instead, for a while after the shared
// store found that Redis lost its data.
func (s *Server) gapReason(reason string) string {
	if s.shared != nil {
		if at := s.shared.Lost(); !at.IsZero() && time.Since(at) < lostWindow {
			return "lost"
		}
	}
	return reason
}

// leave unregisters sub from c (unless it was cut off) and releases c.
func (s *Server) leave(c *channel, sub *subscriber) {
	c.mu.Lock()
	s.removeSub(c, sub)
	c.mu.Unlock()
	s.release(c)
}

// replay is what a joining stream replays: the retained deliveries after
// its Last-Event-ID up to the channel's last id when it joined, read from
// the store a page at a time, with gap events for those that left the
// history before they could be read.
type replay struct {
	s           *Server
	name        string
	lastEventID string // the client's, for gap events
	cursor      int64  // the last id replayed or announced lost
	end         int64  // the channel's last id at join; later ones come live
	gap         *wire.Gap
	page        []*Entry
}

// next returns the next gap to announce (or nil) and deliveries to send,
// and done once the replay is over.
func (rp *replay) next(ctx context.Context) (gap *wire.Gap, page []*Entry, done bool, err error) {
	if rp.gap == nil && len(rp.page) == 0 {
		if rp.cursor >= rp.end {
			return nil, nil, true, nil
		}
		rp.page, _, _, err = rp.s.store.Since(ctx, rp.name, rp.cursor, replayPageBytes)
		if err != nil {
			return nil, nil, false, err
		}
	}
	gap, page = rp.gap, rp.page
	rp.gap, rp.page = nil, nil
	for i, d := range page {
		if d.id > rp.end {
			page = page[:i]
			break
		}
	}
	if gap == nil && (len(page) == 0 || page[0].id > rp.cursor+1) {
		// Evicted since the stream joined.
		to := rp.end
		if len(page) > 0 {
			to = page[0].id - 1
		}
		gap = &wire.Gap{From: rp.cursor + 1, To: to, Reason: rp.s.gapReason("expired"), LastEventID: rp.lastEventID}
	}
	if gap != nil {
		rp.cursor = max(rp.cursor, gap.To)
	}
	if len(page) > 0 {
		rp.cursor = page[len(page)-1].id
	}
	return gap, page, false, nil
}
