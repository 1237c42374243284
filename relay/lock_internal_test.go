package relay

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowStore is a store whose reads of one channel wait until released, as
// a slow disk or a frozen Redis would.
type slowStore struct {
	Store
	channel string
	entered chan struct{} // a read of channel has started
	release chan struct{} // closed by open to let reads of channel go on
	once    sync.Once
	opened  sync.Once
}

func (s *slowStore) open() { s.opened.Do(func() { close(s.release) }) }

func (s *slowStore) Since(ctx context.Context, channel string, after, maxBytes int64) ([]*Entry, int64, int64, error) {
	if channel == s.channel {
		s.once.Do(func() { close(s.entered) })
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, 0, 0, ctx.Err()
		}
	}
	return s.Store.Since(ctx, channel, after, maxBytes)
}

func newSub(s *Server) *subscriber {
	return &subscriber{notify: make(chan struct{}, 1), kicked: make(chan struct{}), pins: s.pinned}
}

// got waits for n deliveries in sub's queue and returns their ids.
func got(t *testing.T, sub *subscriber, n int) []int64 {
	t.Helper()
	var ids []int64
	deadline := time.After(20 * time.Second)
	for len(ids) < n {
		select {
		case <-sub.notify:
			for _, d := range sub.take(nil) {
				ids = append(ids, d.id)
				sub.release(d)
			}
		case <-deadline:
			t.Fatalf("got %v, want %d deliveries", ids, n)
		}
	}
	return ids
}

// Item: the channel lock is not held across storage I/O. While a stream's
// join waits on a read of the history, POSTs to the same channel are
// stored and reach its other stream, and the joining stream then gets
// each delivery exactly once (replay or queue).
func TestStorageReadDoesNotHoldTheChannel(t *testing.T) {
	s := mustNewServer(t)
	slow := &slowStore{Store: s.store, channel: "c", entered: make(chan struct{}), release: make(chan struct{})}
	ctx := context.Background()
	first := newSub(s)
	c, _, err := s.join(ctx, "c", first, "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.leave(c, first)
	s.store = slow
	defer slow.open() // before the leave above, on a failure

	second := newSub(s)
	type joined struct {
		c   *channel
		rp  *replay
		err error
	}
	done := make(chan joined, 1)
	go func() {
		c, rp, err := s.join(ctx, "c", second, "0", true)
		done <- joined{c, rp, err}
	}()
	<-slow.entered
	posted := make(chan error, 1)
	go func() {
		for i := range 3 {
			if _, err := s.publish(ctx, "c", lockTestDelivery(i+1)); err != nil {
				posted <- err
				return
			}
		}
		posted <- nil
	}()
	select {
	case err := <-posted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("POSTs wait for a stream's read of the history")
	}
	if ids := got(t, first, 3); len(ids) != 3 || ids[0] != 1 || ids[2] != 3 {
		t.Errorf("the first stream got %v, want 1 2 3", ids)
	}
	slow.open()
	j := <-done
	if j.err != nil {
		t.Fatal(j.err)
	}
	defer s.leave(j.c, second)
	var ids []int64
	for {
		_, page, end, err := j.rp.next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if end {
			break
		}
		for _, d := range page {
			ids = append(ids, d.id)
		}
	}
	if _, err := s.publish(ctx, "c", lockTestDelivery(4)); err != nil {
		t.Fatal(err)
	}
	for _, d := range second.take(nil) {
		ids = append(ids, d.id)
	}
	if len(ids) != 4 || ids[0] != 1 || ids[3] != 4 {
		t.Errorf("the joining stream got %v (replay, then queue), want 1 2 3 4 exactly once", ids)
	}
}

// Item: the shared store's feed does not make one channel wait for
// another. The feed asks the relay to read channel a's new deliveries
// from a store that does not answer; channel b's next delivery, reported
// by the feed right after, reaches b's stream at once.
func TestFeedDoesNotWaitForAnotherChannel(t *testing.T) {
	s := mustNewServer(t)
	ctx := context.Background()
	subA, subB := newSub(s), newSub(s)
	for name, sub := range map[string]*subscriber{"a": subA, "b": subB} {
		c, _, err := s.join(ctx, name, sub, "", false)
		if err != nil {
			t.Fatal(err)
		}
		defer s.leave(c, sub)
	}
	slow := &slowStore{Store: s.store, channel: "a", entered: make(chan struct{}), release: make(chan struct{})}
	s.store = slow
	defer slow.open()
	d := lockTestDelivery(1)
	if _, err := slow.Store.Append(ctx, "b", d, 0); err != nil {
		t.Fatal(err)
	}
	fed := make(chan struct{})
	go func() { // the feed: one goroutine for every channel
		s.fromFeed("a", nil)
		s.fromFeed("b", d)
		close(fed)
	}()
	select {
	case <-fed:
	case <-time.After(20 * time.Second):
		t.Fatal("the feed waits for another channel's read of the store")
	}
	if ids := got(t, subB, 1); ids[0] != 1 {
		t.Errorf("channel b got %v, want 1", ids)
	}
}

func mustNewServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// lockTestDelivery is a small delivery whose body carries seq.
func lockTestDelivery(seq int) *Entry {
	return makeDelivery(nil, "", []byte(fmt.Sprintf(`{"seq":%d}`, seq)), time.Now())
}

// sharedSlowStore is a slowStore shared with other relays (as Redis is),
// whose Close notes whether a read was still running: a store closed under
// a read is what the race detector found in go-redis (its pool closed with
// a connection in use) when a catch-up outlived the relay.
type sharedSlowStore struct {
	*slowStore
	reading            atomic.Int32
	closedWhileReading atomic.Bool
}

func (f *sharedSlowStore) Since(ctx context.Context, channel string, after, maxBytes int64) ([]*Entry, int64, int64, error) {
	f.reading.Add(1)
	defer f.reading.Add(-1)
	return f.slowStore.Since(ctx, channel, after, maxBytes)
}

func (f *sharedSlowStore) Persistent() bool { return true }
func (f *sharedSlowStore) Close() error {
	if f.reading.Load() > 0 {
		f.closedWhileReading.Store(true)
	}
	return nil
}
func (f *sharedSlowStore) StartFeed(func(string, *Entry)) {}
func (f *sharedSlowStore) Watch(string, bool)             {}
func (f *sharedSlowStore) Ping(context.Context) error     { return nil }
func (f *sharedSlowStore) Lost() time.Time                { return time.Time{} }
func (f *sharedSlowStore) String() string                 { return "the fake" }

// The catch-ups a shared store's feed starts in the background
// (catchUpLater) end before CloseStorage closes the store, and none starts
// after: a read still running then uses a closed client.
func TestCloseStorageEndsCatchUpsFirst(t *testing.T) {
	s := mustNewServer(t)
	sub := newSub(s)
	c, _, err := s.join(context.Background(), "c", sub, "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.leave(c, sub)
	fake := &sharedSlowStore{slowStore: &slowStore{Store: s.store, channel: "c", entered: make(chan struct{}), release: make(chan struct{})}}
	defer fake.open()
	s.store, s.shared = fake, fake

	s.fromFeed("c", nil) // as the feed does after a (re)subscription
	<-fake.entered
	closed := make(chan error, 1)
	go func() { closed <- s.CloseStorage() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("CloseStorage did not return while a catch-up read the store")
	}
	if fake.closedWhileReading.Load() {
		t.Error("CloseStorage closed the store while a catch-up was reading it")
	}
	s.fromFeed("c", nil) // the feed's last message, or a retry's timer
	c.mu.Lock()
	started := c.catching
	c.mu.Unlock()
	if started {
		t.Error("a catch-up started after CloseStorage")
	}
}
