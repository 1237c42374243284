package relay

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookline/hookline/internal/testutil/redistest"
	"github.com/hookline/hookline/internal/wire"
)

// storeKinds are the store implementations every contract test runs
// against. A new store is added here and must pass them all.
var storeKinds = []struct {
	name string
	open func(t *testing.T, l limits) store
}{
	{"memory", func(t *testing.T, l limits) store { return newMemStore(l, new(atomic.Int64)) }},
	{"bolt", func(t *testing.T, l limits) store { return openTestBolt(t, t.TempDir(), l) }},
	{"redis", func(t *testing.T, l limits) store { return openTestRedis(t, redistest.Start(t).URL(), l) }},
}

func openTestBolt(t *testing.T, dir string, l limits) *ledgerStore {
	t.Helper()
	s, err := openBolt(dir, l, new(atomic.Int64), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("openBolt(%s) = %v", dir, err)
	}
	t.Cleanup(func() { s.close() })
	return s
}

var roomy = limits{chanCount: 100, chanBytes: 1 << 20, totalBytes: 1 << 30}

// testDelivery is a delivery of the given body size with a seq header, as
// a request would make it.
func testDelivery(seq int, bodySize int, extra ...wire.Header) *delivery {
	h := append([]wire.Header{
		{Name: "content-type", Value: "application/json"},
		{Name: "x-github-event", Value: "push"},
		{Name: "x-seq", Value: fmt.Sprint(seq)},
	}, extra...)
	slices.SortFunc(h, func(a, b wire.Header) int { return strings.Compare(a.Name, b.Name) })
	body := fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, seq, strings.Repeat("x", max(bodySize-30, 0)))
	return makeDelivery(h, "a=1&b[c]=2", []byte(body), time.UnixMilli(1700000000000+int64(seq)))
}

func mustAppend(t *testing.T, s store, channel string, d *delivery, after int64) int64 {
	t.Helper()
	if err := s.append(t.Context(), channel, d, after); err != nil {
		t.Fatalf("append(%s) = %v", channel, err)
	}
	return d.id
}

// since returns the ids of every retained delivery after `after` (all
// pages), and first and last.
func sinceIDs(t *testing.T, s store, channel string, after int64) (ids []int64, first, last int64) {
	t.Helper()
	for {
		page, f, l, err := s.since(t.Context(), channel, after, 1<<20)
		if err != nil {
			t.Fatalf("since(%s, %d) = %v", channel, after, err)
		}
		if ids == nil {
			first, last = f, l
		}
		if len(page) == 0 {
			return ids, first, last
		}
		for _, d := range page {
			ids = append(ids, d.id)
		}
		after = page[len(page)-1].id
	}
}

func TestStoreContract(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Run("ids and replay", func(t *testing.T) {
				s := kind.open(t, roomy)
				for i := 1; i <= 3; i++ {
					if id := mustAppend(t, s, "a", testDelivery(i, 100), 0); id != int64(i) {
						t.Errorf("append #%d gave id %d", i, id)
					}
				}
				ids, first, last := sinceIDs(t, s, "a", 1)
				if !slices.Equal(ids, []int64{2, 3}) || first != 1 || last != 3 {
					t.Errorf("since(a, 1) = %v first %d last %d; want [2 3] 1 3", ids, first, last)
				}
				if ids, first, last := sinceIDs(t, s, "nope", 0); ids != nil || first != 1 || last != 0 {
					t.Errorf("since(unknown channel) = %v %d %d; want none, 1, 0", ids, first, last)
				}
				if ids, _, _ := sinceIDs(t, s, "a", 1<<62); ids != nil {
					t.Errorf("since(a, huge) = %v; want none", ids)
				}
				// after raises the next id (the Server's ids for a channel
				// the store forgot).
				if id := mustAppend(t, s, "a", testDelivery(4, 100), 10); id != 11 {
					t.Errorf("append after 10 gave %d, want 11", id)
				}
				if id := mustAppend(t, s, "a", testDelivery(5, 100), 2); id != 12 {
					t.Errorf("append after 2 (below the last) gave %d, want 12", id)
				}
				if ids, _, _ := sinceIDs(t, s, "a", 0); !slices.Equal(ids, []int64{1, 2, 3, 11, 12}) {
					t.Errorf("ids = %v, want [1 2 3 11 12]", ids)
				}
			})

			t.Run("byte exact", func(t *testing.T) {
				s := kind.open(t, roomy)
				d := makeDelivery([]wire.Header{{Name: "content-type", Value: "application/octet-stream"}, {Name: "x-bin", Value: "caf\xe9 \x7f"}}, "q=%FF&x", []byte("\x00\xff\r\n\xc3\x28 body"), time.Unix(1700000000, 123456789))
				want := [2][]byte{d.frame(formatSmee).Bytes(), d.frame(formatHookline).Bytes()}
				id := mustAppend(t, s, "a", d, 0)
				got, err := s.get(t.Context(), "a", id)
				if err != nil || got == nil {
					t.Fatalf("get = %v, %v", got, err)
				}
				page, _, _, _ := s.since(t.Context(), "a", 0, 1)
				for _, g := range []*delivery{got, page[0]} {
					if g.id != id || !bytes.Equal(g.frame(formatSmee).Bytes(), want[0]) || !bytes.Equal(g.frame(formatHookline).Bytes(), want[1]) || !bytes.Equal(g.body, d.body) {
						t.Errorf("read back:\n%s\nwant:\n%s", g.frame(formatHookline).Bytes(), want[1])
					}
				}
			})

			t.Run("get", func(t *testing.T) {
				s := kind.open(t, roomy)
				mustAppend(t, s, "a", testDelivery(1, 10), 0)
				for _, id := range []int64{0, -1, 2, 1 << 62} {
					if d, err := s.get(t.Context(), "a", id); d != nil || err != nil {
						t.Errorf("get(a, %d) = %v, %v; want nil, nil", id, d, err)
					}
				}
				if d, err := s.get(t.Context(), "b", 1); d != nil || err != nil {
					t.Errorf("get(b, 1) = %v, %v; want nil, nil", d, err)
				}
			})

			t.Run("count limit", func(t *testing.T) {
				s := kind.open(t, limits{chanCount: 3, chanBytes: 1 << 20, totalBytes: 1 << 30})
				for i := 1; i <= 5; i++ {
					mustAppend(t, s, "a", testDelivery(i, 10), 0)
				}
				if ids, first, last := sinceIDs(t, s, "a", 0); !slices.Equal(ids, []int64{3, 4, 5}) || first != 3 || last != 5 {
					t.Errorf("since = %v first %d last %d; want [3 4 5] 3 5", ids, first, last)
				}
				if st := s.stats(t.Context()); st.retained != 3 || st.channels != 1 {
					t.Errorf("stats = %+v, want 3 retained in 1 channel", st)
				}
			})

			t.Run("byte limit keeps the newest", func(t *testing.T) {
				s := kind.open(t, limits{chanCount: 100, chanBytes: 4000, totalBytes: 1 << 30})
				mustAppend(t, s, "a", testDelivery(1, 1000), 0)
				mustAppend(t, s, "a", testDelivery(2, 1000), 0)
				if ids, _, _ := sinceIDs(t, s, "a", 0); !slices.Equal(ids, []int64{1, 2}) {
					t.Errorf("two of ~1.5 KB: %v, want [1 2]", ids)
				}
				mustAppend(t, s, "a", testDelivery(3, 5000), 0)
				if ids, first, _ := sinceIDs(t, s, "a", 0); !slices.Equal(ids, []int64{3}) || first != 3 {
					t.Errorf("after one larger than the limit: %v (first %d), want [3]", ids, first)
				}
			})

			t.Run("total limit evicts least recent channels", func(t *testing.T) {
				one := testDelivery(0, 1000).size
				s := kind.open(t, limits{chanCount: 100, chanBytes: 1 << 20, totalBytes: 4 * one})
				mustAppend(t, s, "old", testDelivery(1, 1000), 0)
				mustAppend(t, s, "mid", testDelivery(2, 1000), 0)
				mustAppend(t, s, "old", testDelivery(3, 1000), 0) // old is now more recent than mid
				mustAppend(t, s, "new", testDelivery(4, 1000), 0)
				mustAppend(t, s, "new", testDelivery(5, 1000), 0) // over: mid goes first
				if s.missing(t.Context(), []string{"mid"}) == 0 {
					t.Error("mid (least recently appended to) still has history")
				}
				if ids, _, _ := sinceIDs(t, s, "old", 0); !slices.Equal(ids, []int64{1, 2}) {
					t.Errorf("old = %v, want [1 2]", ids)
				}
				mustAppend(t, s, "new", testDelivery(6, 1000), 0) // then old's oldest
				if ids, _, _ := sinceIDs(t, s, "old", 0); !slices.Equal(ids, []int64{2}) {
					t.Errorf("old = %v, want [2]", ids)
				}
				// A single delivery larger than the total stays.
				mustAppend(t, s, "huge", testDelivery(7, 10*1000), 0)
				if st := s.stats(t.Context()); st.channels != 1 || st.retained != 1 || !(s.missing(t.Context(), []string{"huge"}) == 0) {
					t.Errorf("stats = %+v, want only huge's delivery", st)
				}
				// A forgotten channel starts again at 1.
				if id := mustAppend(t, s, "mid", testDelivery(8, 10), 0); id != 1 {
					t.Errorf("first id of a forgotten channel = %d, want 1", id)
				}
			})

			t.Run("pages", func(t *testing.T) {
				s := kind.open(t, roomy)
				for i := 1; i <= 10; i++ {
					mustAppend(t, s, "a", testDelivery(i, 1000), 0)
				}
				one := testDelivery(0, 1000).size
				page, _, _, err := s.since(t.Context(), "a", 2, 3*one)
				if err != nil || len(page) != 3 || page[0].id != 3 {
					t.Errorf("since(a, 2, 3 deliveries' bytes) = %d deliveries from %v, %v; want 3 from 3", len(page), page, err)
				}
				if page, _, _, _ := s.since(t.Context(), "a", 2, 1); len(page) != 1 {
					t.Errorf("since with maxBytes 1 = %d deliveries, want 1 (at least one)", len(page))
				}
			})

			t.Run("idempotency keys", func(t *testing.T) {
				s := kind.open(t, roomy)
				key := func(k string) wire.Header { return wire.Header{Name: idempotencyHeader, Value: k} }
				d1 := testDelivery(1, 10, key("k1"))
				mustAppend(t, s, "a", d1, 0)
				mustAppend(t, s, "a", testDelivery(2, 10), 0)
				mustAppend(t, s, "a", testDelivery(3, 10, key("k1")), 0)
				id, sum, ok, err := s.findKey(t.Context(), "a", "k1")
				if err != nil || !ok || id != 3 || sum != sha256.Sum256(testDelivery(3, 10).body) {
					t.Errorf("findKey(a, k1) = %d %x %v %v; want 3, the body's SHA-256", id, sum, ok, err)
				}
				for _, c := range [][2]string{{"a", "k2"}, {"b", "k1"}} {
					if _, _, ok, err := s.findKey(t.Context(), c[0], c[1]); ok || err != nil {
						t.Errorf("findKey(%s, %s) found one (%v)", c[0], c[1], err)
					}
				}
			})

			t.Run("age limit", func(t *testing.T) {
				s := kind.open(t, limits{chanCount: 100, chanBytes: 1 << 20, totalBytes: 1 << 30, age: time.Minute})
				at := func(seq int, sec int) *delivery {
					d := testDelivery(seq, 10)
					return makeDelivery(d.header, d.query, d.body, time.Unix(1700000000+int64(sec), 0))
				}
				mustAppend(t, s, "a", at(1, 0), 0)
				mustAppend(t, s, "a", at(2, 30), 0)
				mustAppend(t, s, "b", at(3, 0), 0)
				mustAppend(t, s, "a", at(4, 60), 0) // 1 is exactly a minute old: kept
				if ids, _, _ := sinceIDs(t, s, "a", 0); !slices.Equal(ids, []int64{1, 2, 3}) {
					t.Errorf("a = %v, want [1 2 3]", ids)
				}
				mustAppend(t, s, "a", at(5, 91), 0) // 1 and 2 are older than a minute
				if ids, first, _ := sinceIDs(t, s, "a", 0); !slices.Equal(ids, []int64{3, 4}) || first != 3 {
					t.Errorf("a = %v (first %d), want [3 4]", ids, first)
				}
				mustAppend(t, s, "a", at(6, 1000), 0) // everything older: the new one stays
				if ids, _, _ := sinceIDs(t, s, "a", 0); !slices.Equal(ids, []int64{5}) {
					t.Errorf("a = %v, want [5]", ids)
				}
				// Only the channel appended to is trimmed.
				if ids, _, _ := sinceIDs(t, s, "b", 0); !slices.Equal(ids, []int64{1}) {
					t.Errorf("b = %v, want [1]", ids)
				}
				if st := s.stats(t.Context()); st.retained != 2 || st.channels != 2 {
					t.Errorf("stats = %+v, want 2 retained in 2 channels", st)
				}
			})

			t.Run("closed", func(t *testing.T) {
				s := kind.open(t, roomy)
				if err := s.close(); err != nil {
					t.Fatal(err)
				}
				if err := s.append(t.Context(), "a", testDelivery(1, 10), 0); !errors.Is(err, errStoreClosed) {
					t.Errorf("append after close = %v, want errStoreClosed", err)
				}
				if err := s.close(); err != nil {
					t.Errorf("second close = %v", err)
				}
			})
		})
	}
}

// The bolt store gives back after a reopen what it had: the same ids, the
// same bytes, the next id, the same eviction order, the same keys.
func TestBoltReopen(t *testing.T) {
	dir := t.TempDir()
	l := limits{chanCount: 100, chanBytes: 1 << 20, totalBytes: 1 << 30}
	s := openTestBolt(t, dir, l)
	var frames [][]byte
	for i := 1; i <= 5; i++ {
		d := testDelivery(i, 100*i, wire.Header{Name: idempotencyHeader, Value: fmt.Sprint("key", i)})
		mustAppend(t, s, "a", d, 0)
		frames = append(frames, d.frame(formatHookline).Bytes())
	}
	mustAppend(t, s, "b", testDelivery(5, 10), 0) // received before a's next one
	if err := s.close(); err != nil {
		t.Fatal(err)
	}

	s = openTestBolt(t, dir, l)
	page, first, last, err := s.since(t.Context(), "a", 0, 1<<20)
	if err != nil || len(page) != 5 || first != 1 || last != 5 {
		t.Fatalf("after reopen: since = %d deliveries, %d, %d, %v; want 5, 1, 5", len(page), first, last, err)
	}
	for i, d := range page {
		if !bytes.Equal(d.frame(formatHookline).Bytes(), frames[i]) {
			t.Errorf("delivery %d after reopen:\n%s\nwant\n%s", d.id, d.frame(formatHookline).Bytes(), frames[i])
		}
	}
	if id := mustAppend(t, s, "a", testDelivery(6, 10), 0); id != 6 {
		t.Errorf("next id after reopen = %d, want 6", id)
	}
	if id, _, ok, _ := s.findKey(t.Context(), "a", "key3"); !ok || id != 3 {
		t.Errorf("findKey after reopen = %d %v, want 3", id, ok)
	}
	if st := s.stats(t.Context()); st.channels != 2 || st.retained != 7 {
		t.Errorf("stats after reopen = %+v, want 7 in 2 channels", st)
	}
	s.close()

	// Lower limits at the next start: trimmed at once, the channel posted
	// to least recently (b, by its newest delivery's time) first.
	one := testDelivery(0, 10).size
	s = openTestBolt(t, dir, limits{chanCount: 2, chanBytes: 1 << 20, totalBytes: 2*one + 600})
	if ids, _, _ := sinceIDs(t, s, "a", 0); !slices.Equal(ids, []int64{5, 6}) {
		t.Errorf("a after a reopen with 2 per channel = %v, want [5 6]", ids)
	}
	if s.missing(t.Context(), []string{"b"}) == 0 {
		t.Error("b (least recent) kept after the total limit was lowered")
	}
	s.close()
	s = openTestBolt(t, dir, l)
	if ids, _, _ := sinceIDs(t, s, "a", 0); !slices.Equal(ids, []int64{5, 6}) || (s.missing(t.Context(), []string{"b"}) == 0) {
		t.Errorf("the trim at open was not stored: a = %v, b kept %v", ids, (s.missing(t.Context(), []string{"b"}) == 0))
	}
}

func TestBoltUnusable(t *testing.T) {
	lg := slog.New(slog.DiscardHandler)
	t.Run("locked by another", func(t *testing.T) {
		dir := t.TempDir()
		openTestBolt(t, dir, roomy)
		start := time.Now()
		_, err := openBolt(dir, roomy, new(atomic.Int64), lg)
		if !errors.Is(err, ErrDataDirInUse) {
			t.Errorf("second open = %v, want ErrDataDirInUse", err)
		}
		if d := time.Since(start); d > 10*lockTimeout {
			t.Errorf("second open took %s", d)
		}
	})
	t.Run("a file, not a directory", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		os.WriteFile(f, []byte("x"), 0o600)
		if _, err := openBolt(f, roomy, new(atomic.Int64), lg); err == nil || !strings.Contains(err.Error(), "cannot create the data directory") {
			t.Errorf("open on a file = %v, want cannot create the data directory", err)
		}
	})
	t.Run("not a bolt file", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, DataFile), bytes.Repeat([]byte("garbage!"), 4096), 0o600)
		if _, err := openBolt(dir, roomy, new(atomic.Int64), lg); !errors.Is(err, ErrDataDirDamaged) {
			t.Errorf("open on garbage = %v, want ErrDataDirDamaged", err)
		}
	})
	t.Run("another program's bolt file", func(t *testing.T) {
		dir := t.TempDir()
		db, err := bolt.Open(filepath.Join(dir, DataFile), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		db.Update(func(tx *bolt.Tx) error {
			b, _ := tx.CreateBucket(metaBucket)
			return b.Put(formatKey, []byte("someone-else-7"))
		})
		db.Close()
		if _, err := openBolt(dir, roomy, new(atomic.Int64), lg); !errors.Is(err, ErrDataDirDamaged) || !strings.Contains(err.Error(), "someone-else-7") {
			t.Errorf("open on another format = %v, want ErrDataDirDamaged naming it", err)
		}
	})
	t.Run("no permission", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root bypasses file permissions; this case runs as an ordinary user (CI)")
		}
		dir := t.TempDir()
		os.Chmod(dir, 0o500)
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		if _, err := openBolt(dir, roomy, new(atomic.Int64), lg); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("open in a read-only directory = %v, want fs.ErrPermission", err)
		}
	})
}

// A record damaged on disk is dropped at the next start, with the rest
// kept; until then the relay serves the history from memory, whole.
func TestBoltDamagedRecord(t *testing.T) {
	dir := t.TempDir()
	s := openTestBolt(t, dir, roomy)
	for i := 1; i <= 3; i++ {
		mustAppend(t, s, "a", testDelivery(i, 10), 0)
	}
	err := s.file.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(channelsBucket).Bucket([]byte("a"))
		v := slices.Clone(b.Get(idKey(2)))
		v[len(v)/2] ^= 0xff
		return b.Put(idKey(2), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	if ids, _, _ := sinceIDs(t, s, "a", 0); !slices.Equal(ids, []int64{1, 2, 3}) {
		t.Errorf("since with 2 damaged on disk = %v, want [1 2 3] from memory", ids)
	}
	s.close()
	s = openTestBolt(t, dir, roomy)
	if ids, _, _ := sinceIDs(t, s, "a", 0); !slices.Equal(ids, []int64{1, 3}) || s.stats(t.Context()).retained != 2 {
		t.Errorf("after reopen = %v (%d retained), want [1 3]", ids, s.stats(t.Context()).retained)
	}
}

func TestRecordRejects(t *testing.T) {
	good := encodeRecord(testDelivery(1, 50))
	reseal := func(b []byte) []byte { // recompute the checksum of a changed record
		p := slices.Clone(b[:len(b)-4])
		return appendCRC(p)
	}
	tests := []struct {
		name string
		rec  []byte
	}{
		{"empty", nil},
		{"short", []byte{1, 2, 3}},
		{"future format", reseal(append([]byte{2}, good[1:]...))},
		{"checksum", append(slices.Clone(good[:len(good)-1]), good[len(good)-1]^1)},
		{"truncated", reseal(good[:len(good)/2+4])},
		{"trailing bytes", reseal(append(slices.Clone(good[:len(good)-4]), 'x', 0, 0, 0, 0))},
		{"huge header count", appendCRC([]byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})},
		{"huge field", appendCRC([]byte{1, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a'})},
		{"uppercase name", appendCRC([]byte{1, 0, 1, 1, 'A', 0, 0, 0})},
		{"name not a token", appendCRC([]byte{1, 0, 1, 1, ' ', 0, 0, 0})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d, err := decodeRecord(tt.rec); !errors.Is(err, errBadRecord) {
				t.Errorf("decodeRecord(%q) = %v, %v; want errBadRecord", tt.rec, d, err)
			}
		})
	}
}

// A replay is read a page at a time; deliveries that leave the history
// between two pages are announced with a gap event, and the replay stops
// at the channel's last id when the stream joined (later ones come live).
func TestReplayAnnouncesEvictionsBetweenPages(t *testing.T) {
	for _, kind := range []string{"memory", "bolt", "redis"} {
		t.Run(kind, func(t *testing.T) {
			opts := Options{HistoryCount: 10}
			switch kind {
			case "bolt":
				opts.DataDir = t.TempDir()
			case "redis":
				opts.RedisURL = redistest.Start(t).URL()
			}
			s, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.CloseStorage() })
			big := func(i int) *delivery {
				return makeDelivery(nil, "", bytes.Repeat([]byte{byte('a' + i)}, 1<<20), time.Now())
			}
			for i := 1; i <= 10; i++ {
				if _, err := s.publish(t.Context(), "c", big(i), false); err != nil {
					t.Fatal(err)
				}
			}
			sub := &subscriber{notify: make(chan struct{}, 1), kicked: make(chan struct{}), pins: s.pinned}
			c, rp, err := s.join(t.Context(), "c", sub, "0", true)
			if err != nil {
				t.Fatal(err)
			}
			defer s.leave(c, sub)

			var got []string
			read := func() bool {
				gap, page, done, err := rp.next(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if gap != nil {
					got = append(got, fmt.Sprintf("gap %d-%d %s", gap.From, gap.To, gap.Reason))
				}
				for _, d := range page {
					got = append(got, fmt.Sprint(d.id))
				}
				return !done
			}
			read() // the first page: 1 to 3 (4 MiB)
			for i := 11; i <= 15; i++ {
				s.publish(t.Context(), "c", big(i), false) // evicts 1 to 5
			}
			for read() {
			}
			want := []string{"1", "2", "3", "gap 4-5 expired", "6", "7", "8", "9", "10"}
			if !slices.Equal(got, want) {
				t.Errorf("replay = %v, want %v", got, want)
			}
			if n := len(sub.take(nil)); n != 5 {
				t.Errorf("%d deliveries queued live, want 5 (11 to 15)", n)
			}
		})
	}
}
