package relay

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/wire"

	"github.com/hookline/hookline/internal/testutil/redistest"
)

// openTestRedis opens a Redis store on url, closed at the end of the test.
func openTestRedis(t *testing.T, url string, l limits) *redisStore {
	t.Helper()
	s, err := openRedis(url, l, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("openRedis(%s) = %v", url, err)
	}
	t.Cleanup(func() { s.close() })
	return s
}

// Two stores on one Redis (two relays) share the ids: each append takes
// the next one, whichever store makes it, and each reads the other's.
func TestRedisStoresShareIDs(t *testing.T) {
	url := redistest.Start(t).URL()
	a, b := openTestRedis(t, url, roomy), openTestRedis(t, url, roomy)
	for i := 1; i <= 6; i++ {
		s := a
		if i%2 == 0 {
			s = b
		}
		if id := mustAppend(t, s, "c", testDelivery(i, 100), 0); id != int64(i) {
			t.Errorf("append #%d gave id %d, want %d", i, id, i)
		}
	}
	for _, s := range []*redisStore{a, b} {
		if ids, first, last := sinceIDs(t, s, "c", 2); !slices.Equal(ids, []int64{3, 4, 5, 6}) || first != 1 || last != 6 {
			t.Errorf("since(c, 2) = %v %d %d, want [3 4 5 6] 1 6", ids, first, last)
		}
	}
	if st := a.stats(t.Context()); st.retained != 6 || st.channels != 1 {
		t.Errorf("stats = %+v, want 6 retained in 1 channel", st)
	}
}

// A channel whose history the total limit evicts keeps its last id while a
// relay has subscribers on it (its presence key), so that ids never go
// back under those subscribers; without one it starts again at 1.
func TestRedisPresenceKeepsIDs(t *testing.T) {
	one := testDelivery(0, 1000).size
	s := openTestRedis(t, redistest.Start(t).URL(), limits{chanCount: 100, chanBytes: 1 << 20, totalBytes: 2 * one})
	s.startFeed(func(string, *delivery) {})
	mustAppend(t, s, "held", testDelivery(1, 1000), 0)
	mustAppend(t, s, "free", testDelivery(2, 1000), 0)
	s.watch("held", true)
	_, _, _, _, h := s.keys("held")
	waitUntil(t, "the presence key", func() bool { return s.rdb.Exists(s.ctx, h).Val() == 1 })
	mustAppend(t, s, "other", testDelivery(3, 1000), 0)
	mustAppend(t, s, "other", testDelivery(4, 1000), 0) // evicts held, then free
	if (s.missing(t.Context(), []string{"held"}) == 0) || (s.missing(t.Context(), []string{"free"}) == 0) {
		t.Fatalf("held %v, free %v: want both evicted", (s.missing(t.Context(), []string{"held"}) == 0), (s.missing(t.Context(), []string{"free"}) == 0))
	}
	if id := mustAppend(t, s, "held", testDelivery(5, 10), 0); id != 2 {
		t.Errorf("next id of the held channel = %d, want 2", id)
	}
	if id := mustAppend(t, s, "free", testDelivery(6, 10), 0); id != 1 {
		t.Errorf("next id of the free channel = %d, want 1", id)
	}
}

// The feed reports each append of a watched channel, whichever store made
// it: small ones with the delivery, large ones by id (nil, to read), and
// after each subscription a nil (to catch up).
func TestRedisFeed(t *testing.T) {
	url := redistest.Start(t).URL()
	a, b := openTestRedis(t, url, roomy), openTestRedis(t, url, roomy)
	type report struct {
		channel string
		id      int64 // 0 for nil
	}
	got := make(chan report, 100)
	b.startFeed(func(c string, d *delivery) {
		r := report{channel: c}
		if d != nil {
			r.id = d.id
		}
		got <- r
	})
	b.watch("w", true)
	next := func() report {
		t.Helper()
		select {
		case r := <-got:
			return r
		case <-time.After(20 * time.Second):
			t.Fatal("nothing reported")
			return report{}
		}
	}
	if r := next(); r != (report{"w", 0}) {
		t.Errorf("after watch: %+v, want a catch-up of w", r)
	}
	mustAppend(t, a, "unwatched", testDelivery(1, 10), 0)
	mustAppend(t, a, "w", testDelivery(2, 10), 0)
	if r := next(); r != (report{"w", 1}) {
		t.Errorf("after a small append: %+v, want w 1", r)
	}
	mustAppend(t, a, "w", testDelivery(3, inlineRecordBytes+1), 0)
	if r := next(); r != (report{"w", 0}) {
		t.Errorf("after a large append: %+v, want a catch-up of w", r)
	}
	b.watch("w", false)
	b.watch("w2", true)
	if r := next(); r != (report{"w2", 0}) {
		t.Errorf("after watch w2: %+v, want a catch-up of w2", r)
	}
	mustAppend(t, a, "w", testDelivery(4, 10), 0)
	mustAppend(t, a, "w2", testDelivery(5, 10), 0)
	if r := next(); r != (report{"w2", 1}) {
		t.Errorf("after unwatch w: %+v, want only w2 1", r)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not the case after 20s", what)
		}
		time.Sleep(5 * time.Millisecond) // polls the real redis-server
	}
}

// An Idempotency-Key that another relay stored after this one looked it up
// (TestRedisReplicaKilledMidStream's race: a POST retried on the other
// replica while the first one's append was still on its way to Redis) is
// found by the append itself: nothing is appended, and publish answers
// with the first delivery. Before, the append stored the delivery again
// under a new id.
func TestRedisAppendFindsAKeyStoredMeanwhile(t *testing.T) {
	url := redistest.Start(t).URL()
	a, b := openTestRedis(t, url, roomy), openTestRedis(t, url, roomy)
	ctx := context.Background()
	key := wire.Header{Name: idempotencyHeader, Value: "seq-61"}
	first := testDelivery(61, 0, key)
	mustAppend(t, a, "c", first, 0)
	// b looked the key up before a's append: it appends straight away.
	again := testDelivery(61, 0, key)
	again.uniqueKey = true // as publish sets it for a POST
	err := b.append(ctx, "c", again, 0)
	var stored *keyStoredError
	if !errors.As(err, &stored) || stored.id != first.id || stored.sum != sha256.Sum256(first.body) {
		t.Fatalf("second append with the same key = %v, want a keyStoredError naming delivery %d", err, first.id)
	}
	if d, err := b.get(ctx, "c", first.id+1); err != nil || d != nil {
		t.Errorf("a delivery %d exists (%v, %v): the retried POST was stored twice", first.id+1, d, err)
	}
	// A redelivery keeps its key and is appended.
	if err := b.append(ctx, "c", first.redelivery(time.Unix(5, 0)), 0); err != nil {
		t.Errorf("redelivery: %v", err)
	}
}
