package redisstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/redistest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/relay/storetest"
)

// The Redis store passes the contract every engine passes, redeliveries
// kept as references included.
func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Engine{
		Open: func(t *testing.T, l relay.Limits) (relay.Store, func() relay.Store) {
			url := redistest.Start(t).URL()
			return openTestRedis(t, url, l), func() relay.Store { return openTestRedis(t, url, l) }
		},
		Stored: func(t *testing.T, s relay.Store, channel string) (int, int) {
			return storedBytes(t, s.(*Store), channel)
		},
	})
}

// In a Redis Cluster (three primaries, real redis-server processes) the
// store passes the same contract: a channel's keys and feed are in its
// shard, the total limit is kept after each append (keepTotal), and a
// private channel's record is with the keys all channels share.
func TestContractCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	storetest.Run(t, storetest.Engine{
		Open: func(t *testing.T, l relay.Limits) (relay.Store, func() relay.Store) {
			c.Flush()
			s := openTestRedis(t, c.URL(), l)
			if s.String() != "Redis Cluster" {
				t.Fatalf("the store on %s is a %s, want a Redis Cluster", c.URL(), s)
			}
			return s, func() relay.Store { return openTestRedis(t, c.URL(), l) }
		},
		Stored: func(t *testing.T, s relay.Store, channel string) (int, int) {
			return storedBytes(t, s.(*Store), channel)
		},
	})
}

// Given the address of one node, the store finds the Cluster and its other
// nodes; the channels' keys spread over the shards.
func TestClusterFromOneNode(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	s := openTestRedis(t, c.Nodes[1].URL(), storetest.Roomy)
	if s.String() != "Redis Cluster" {
		t.Fatalf("the store on %s is a %s, want a Redis Cluster", c.Nodes[1].URL(), s)
	}
	nodes := map[string]bool{}
	for i := range 30 {
		name := fmt.Sprintf("c%d", i)
		storetest.MustAppend(t, s, name, storetest.Delivery(i, 10), 0)
		m, _, _, _, _ := s.keys(name)
		nodes[c.PrimaryOf(m).Addr()] = true
		if ids, _, _ := storetest.IDs(t, s, name, 0); !slices.Equal(ids, []int64{1}) {
			t.Errorf("channel %s holds %v, want [1]", name, ids)
		}
	}
	if len(nodes) != 3 {
		t.Errorf("30 channels are on %d primaries, want all 3", len(nodes))
	}
	if st := s.Stats(t.Context()); st.Channels != 30 || st.Retained != 30 {
		t.Errorf("stats = %+v, want 30 deliveries in 30 channels", st)
	}
}

// openTestRedis opens a Redis store on url, closed at the end of the test.
func openTestRedis(t *testing.T, url string, l relay.Limits) *Store {
	t.Helper()
	s, err := Open(url, Options{}, l, nil)
	if err != nil {
		t.Fatalf("Open(%s) = %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// storedBytes returns the bytes of channel's stream records in Redis, and
// of those held for references.
func storedBytes(t *testing.T, s *Store, channel string) (records, held int) {
	t.Helper()
	m, st, _, _, _ := s.keys(channel)
	msgs, err := s.rdb.XRange(context.Background(), st, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range msgs {
		r, _ := msg.Values["r"].(string)
		records += len(r)
	}
	vals, err := s.rdb.HVals(context.Background(), strings.TrimSuffix(m, "m")+"held").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vals {
		held += len(v)
	}
	return records, held
}

// Two stores on one Redis (two relays) share the ids: each append takes
// the next one, whichever store makes it, and each reads the other's.
func TestRedisStoresShareIDs(t *testing.T) {
	url := redistest.Start(t).URL()
	a, b := openTestRedis(t, url, storetest.Roomy), openTestRedis(t, url, storetest.Roomy)
	for i := 1; i <= 6; i++ {
		s := a
		if i%2 == 0 {
			s = b
		}
		if id := storetest.MustAppend(t, s, "c", storetest.Delivery(i, 100), 0); id != int64(i) {
			t.Errorf("append #%d gave id %d, want %d", i, id, i)
		}
	}
	for _, s := range []*Store{a, b} {
		if ids, first, last := storetest.IDs(t, s, "c", 2); !slices.Equal(ids, []int64{3, 4, 5, 6}) || first != 1 || last != 6 {
			t.Errorf("since(c, 2) = %v %d %d, want [3 4 5 6] 1 6", ids, first, last)
		}
	}
	if st := a.Stats(t.Context()); st.Retained != 6 || st.Channels != 1 {
		t.Errorf("stats = %+v, want 6 retained in 1 channel", st)
	}
}

// A channel whose history the total limit evicts keeps its last id while a
// relay has subscribers on it (its presence key), so that ids never go
// back under those subscribers; without one it starts again at 1.
func TestRedisPresenceKeepsIDs(t *testing.T) {
	one := storetest.Delivery(0, 1000).Size()
	s := openTestRedis(t, redistest.Start(t).URL(), relay.Limits{ChanCount: 100, ChanBytes: 1 << 20, TotalBytes: 2 * one})
	s.StartFeed(func(string, *relay.Entry) {})
	storetest.MustAppend(t, s, "held", storetest.Delivery(1, 1000), 0)
	storetest.MustAppend(t, s, "free", storetest.Delivery(2, 1000), 0)
	s.Watch("held", true)
	_, _, _, _, h := s.keys("held")
	waitUntil(t, "the presence key", func() bool { return s.rdb.Exists(s.ctx, h).Val() == 1 })
	storetest.MustAppend(t, s, "other", storetest.Delivery(3, 1000), 0)
	storetest.MustAppend(t, s, "other", storetest.Delivery(4, 1000), 0) // evicts held, then free
	if (s.Missing(t.Context(), []string{"held"}) == 0) || (s.Missing(t.Context(), []string{"free"}) == 0) {
		t.Fatalf("held %v, free %v: want both evicted", (s.Missing(t.Context(), []string{"held"}) == 0), (s.Missing(t.Context(), []string{"free"}) == 0))
	}
	if id := storetest.MustAppend(t, s, "held", storetest.Delivery(5, 10), 0); id != 2 {
		t.Errorf("next id of the held channel = %d, want 2", id)
	}
	if id := storetest.MustAppend(t, s, "free", storetest.Delivery(6, 10), 0); id != 1 {
		t.Errorf("next id of the free channel = %d, want 1", id)
	}
}

// The feed reports each append of a watched channel, whichever store made
// it: small ones with the delivery, large ones by id (nil, to read), and
// after each subscription a nil (to catch up).
func TestRedisFeed(t *testing.T) {
	t.Run("one Redis", func(t *testing.T) { testFeed(t, redistest.Start(t).URL()) })
	// In a Cluster, on sharded pub/sub: one connection per primary that
	// holds a watched channel.
	t.Run("Cluster", func(t *testing.T) { testFeed(t, redistest.StartCluster(t, 3, 0).URL()) })
}

func testFeed(t *testing.T, url string) {
	a, b := openTestRedis(t, url, storetest.Roomy), openTestRedis(t, url, storetest.Roomy)
	type report struct {
		channel string
		id      int64 // 0 for nil
	}
	got := make(chan report, 100)
	b.StartFeed(func(c string, d *relay.Entry) {
		r := report{channel: c}
		if d != nil {
			r.id = d.ID()
		}
		got <- r
	})
	b.Watch("w", true)
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
	storetest.MustAppend(t, a, "unwatched", storetest.Delivery(1, 10), 0)
	storetest.MustAppend(t, a, "w", storetest.Delivery(2, 10), 0)
	if r := next(); r != (report{"w", 1}) {
		t.Errorf("after a small append: %+v, want w 1", r)
	}
	storetest.MustAppend(t, a, "w", storetest.Delivery(3, inlineRecordBytes+1), 0)
	if r := next(); r != (report{"w", 0}) {
		t.Errorf("after a large append: %+v, want a catch-up of w", r)
	}
	b.Watch("w", false)
	b.Watch("w2", true)
	if r := next(); r != (report{"w2", 0}) {
		t.Errorf("after watch w2: %+v, want a catch-up of w2", r)
	}
	storetest.MustAppend(t, a, "w", storetest.Delivery(4, 10), 0)
	storetest.MustAppend(t, a, "w2", storetest.Delivery(5, 10), 0)
	if r := next(); r != (report{"w2", 1}) {
		t.Errorf("after unwatch w: %+v, want only w2 1", r)
	}
}

// waitUntil waits until cond (what the real redis-server holds) is true.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Poll(t, what, 5*time.Millisecond, cond)
}

// An Idempotency-Key that another relay stored after this one looked it up
// (TestRedisReplicaKilledMidStream's race: a POST retried on the other
// replica while the first one's append was still on its way to Redis) is
// found by the append itself: nothing is appended, and publish answers
// with the first delivery. Before, the append stored the delivery again
// under a new id.
func TestRedisAppendFindsAKeyStoredMeanwhile(t *testing.T) {
	url := redistest.Start(t).URL()
	a, b := openTestRedis(t, url, storetest.Roomy), openTestRedis(t, url, storetest.Roomy)
	ctx := context.Background()
	const key = "Idempotency-Key: seq-61"
	first := storetest.Delivery(61, 0, key)
	firstID := storetest.MustAppend(t, a, "c", first, 0)
	// b looked the key up before a's append: it appends straight away.
	_, err := b.Append(ctx, "c", storetest.Delivery(61, 0, key), 0)
	var stored *relay.KeyStoredError
	if !errors.As(err, &stored) || stored.ID != firstID || stored.Sum != sha256.Sum256(first.Body()) {
		t.Fatalf("second append with the same key = %v, want a KeyStoredError naming delivery %d", err, firstID)
	}
	if d, err := b.Get(ctx, "c", firstID+1); err != nil || d != nil {
		t.Errorf("a delivery %d exists (%v, %v): the retried POST was stored twice", firstID+1, d, err)
	}
	// A redelivery keeps its key and is appended.
	orig, err := b.Get(ctx, "c", firstID)
	if err != nil || orig == nil {
		t.Fatalf("Get(%d) = %v, %v", firstID, orig, err)
	}
	if _, err := b.Append(ctx, "c", orig.Redelivery(time.Unix(5, 0)), 0); err != nil {
		t.Errorf("redelivery: %v", err)
	}
}
