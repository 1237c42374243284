package relay

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookline/hookline/internal/testutil/redistest"
)

// storedBytes returns the bytes of the records of channel, and of those
// held for references.
func storedBytes(t *testing.T, s *ledgerStore, channel string) (records, held int) {
	t.Helper()
	err := s.file.db.View(func(tx *bolt.Tx) error {
		count := func(b *bolt.Bucket, n *int) error {
			if b == nil {
				return nil
			}
			return b.ForEach(func(_, v []byte) error { *n += len(v); return nil })
		}
		if err := count(tx.Bucket(channelsBucket).Bucket([]byte(channel)), &records); err != nil {
			return err
		}
		return count(tx.Bucket(heldBucket).Bucket([]byte(channel)), &held)
	})
	if err != nil {
		t.Fatal(err)
	}
	return records, held
}

// redisStoredBytes returns the bytes of channel's stream records in Redis,
// and of those held for references.
func redisStoredBytes(t *testing.T, s *redisStore, channel string) (records, held int) {
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

// A redelivery is stored as a reference to the record it repeats, by the
// bbolt and the Redis store: chained redeliveries of a large delivery
// write a few bytes each, read back as the whole delivery (by since and
// get), outlive the original in the history (its record is held while they
// refer to it, across a restart or another relay), and the held record
// goes with the last of them.
func TestRedeliveryIsAReference(t *testing.T) {
	l := limits{chanCount: 5, chanBytes: 1 << 30, totalBytes: 1 << 30}
	kinds := []struct {
		name   string
		open   func(t *testing.T) (store, func() store)                   // a store, and how to open it again
		stored func(t *testing.T, s store, ch string) (records, held int) // bytes stored
	}{
		{"bolt", func(t *testing.T) (store, func() store) {
			dir := t.TempDir()
			s := openTestBolt(t, dir, l)
			return s, func() store { s.close(); return openTestBolt(t, dir, l) }
		}, func(t *testing.T, s store, ch string) (int, int) { return storedBytes(t, s.(*ledgerStore), ch) }},
		{"redis", func(t *testing.T) (store, func() store) {
			url := redistest.Start(t).URL()
			return openTestRedis(t, url, l), func() store { return openTestRedis(t, url, l) }
		}, func(t *testing.T, s store, ch string) (int, int) { return redisStoredBytes(t, s.(*redisStore), ch) }},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			s, reopen := kind.open(t)
			body := bytes.Repeat([]byte("x"), 4<<20)
			orig := testDelivery(1, 0)
			orig = makeDelivery(orig.header, "", body, time.Unix(1, 0))
			if err := s.append(ctx, "c", orig, 0); err != nil {
				t.Fatal(err)
			}
			prev := orig
			for i := range 4 { // each a redelivery of the one before, as read back
				d := prev.redelivery(time.Unix(int64(2+i), 0))
				if err := s.append(ctx, "c", d, 0); err != nil {
					t.Fatal(err)
				}
				got, err := s.get(ctx, "c", d.id)
				if err != nil || got == nil || got.of != orig.id {
					t.Fatalf("redelivery %d reads back as %+v, %v; want one referring to %d", d.id, got, err, orig.id)
				}
				prev = got
			}
			if rec, held := kind.stored(t, s, "c"); rec > len(body)+4096 || held != 0 {
				t.Errorf("five deliveries of one %d-byte body take %d bytes (+%d held); want one copy", len(body), rec, held)
			}
			// Two more deliveries evict the original and the first redelivery.
			for i := range 2 {
				if err := s.append(ctx, "c", testDelivery(10+i, 10), 0); err != nil {
					t.Fatal(err)
				}
			}
			s = reopen() // the references survive a restart, or another relay
			page, first, _, err := s.since(ctx, "c", 0, 1<<30)
			if err != nil || first != 3 || len(page) != 5 {
				t.Fatalf("since = %d deliveries from %d, %v; want 5 from 3", len(page), first, err)
			}
			for _, d := range page[:3] {
				if !bytes.Equal(d.body, body) || !d.received.Equal(time.Unix(d.id, 0)) {
					t.Errorf("redelivery %d reads back %d bytes received %v, want the original's body, its own time", d.id, len(d.body), d.received)
				}
			}
			if _, held := kind.stored(t, s, "c"); held < len(body) {
				t.Errorf("the original is not held for the redeliveries that refer to it (%d bytes held)", held)
			}
			for i := range 3 {
				if err := s.append(ctx, "c", testDelivery(20+i, 10), 0); err != nil {
					t.Fatal(err)
				}
			}
			if rec, held := kind.stored(t, s, "c"); held != 0 || rec > 4096 {
				t.Errorf("once no redelivery refers to it, %d bytes are still held (%d in records)", held, rec)
			}
		})
	}
}
