// Package storetest is the contract every relay storage engine
// (relay.Store) passes: ids, replay pages, byte-exact records, the history
// limits, Idempotency-Keys, close, and redeliveries kept as references. The
// engines of package relay (memory, bbolt) and relay/redisstore run it; a
// new engine runs it from its own tests:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, storetest.Engine{Open: func(t *testing.T, lim relay.Limits) (relay.Store, func() relay.Store) {
//			s := openMine(t, lim)
//			return s, nil // nil: the history does not survive a reopen
//		}})
//	}
package storetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/relay"
)

// Engine is a storage engine under test.
type Engine struct {
	// Open opens an empty store that applies lim, closed at the end of
	// the test, and how to open its history again (closing s first): nil
	// when the history does not outlive the store.
	Open func(t *testing.T, lim relay.Limits) (s relay.Store, reopen func() relay.Store)

	// Stored, if not nil, returns the bytes that channel's records take
	// in s, and those it holds for redeliveries that refer to a record
	// the history dropped: the engine keeps a redelivery as a reference
	// (relay.Entry.RefRecord), which the contract then checks.
	Stored func(t *testing.T, s relay.Store, channel string) (records, held int)
}

// Roomy are limits no contract test reaches unless it means to.
var Roomy = relay.Limits{ChanCount: 100, ChanBytes: 1 << 20, TotalBytes: 1 << 30}

// Delivery returns a delivery of about bodySize bytes of JSON body, number
// seq, received at a time that grows with seq, as a POST with the given
// extra headers ("Name: value") makes it.
func Delivery(seq, bodySize int, header ...string) *relay.Entry {
	return DeliveryAt(seq, bodySize, time.UnixMilli(1700000000000+int64(seq)), header...)
}

// DeliveryAt is Delivery received at the given time.
func DeliveryAt(seq, bodySize int, received time.Time, header ...string) *relay.Entry {
	body := fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, seq, strings.Repeat("x", max(bodySize-30, 0)))
	r := httptest.NewRequest("POST", "/c?a=1&b[c]=2", nil)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-GitHub-Event", "push")
	r.Header.Set("X-Seq", fmt.Sprint(seq))
	for _, h := range header {
		name, value, _ := strings.Cut(h, ":")
		r.Header.Set(name, strings.TrimSpace(value))
	}
	return relay.NewEntry(r, []byte(body), received)
}

// MustAppend appends e to channel and returns its id.
func MustAppend(t testing.TB, s relay.Store, channel string, e *relay.Entry, after int64) int64 {
	t.Helper()
	id, err := s.Append(t.Context(), channel, e, after)
	if err != nil {
		t.Fatalf("Append(%s) = %v", channel, err)
	}
	return id
}

// IDs returns the ids of every retained delivery of channel after `after`,
// reading every page, and the first and last ids of the first page.
func IDs(t testing.TB, s relay.Store, channel string, after int64) (ids []int64, first, last int64) {
	t.Helper()
	for {
		page, f, l, err := s.Since(t.Context(), channel, after, 1<<20)
		if err != nil {
			t.Fatalf("Since(%s, %d) = %v", channel, after, err)
		}
		if ids == nil {
			first, last = f, l
		}
		if len(page) == 0 {
			return ids, first, last
		}
		for _, d := range page {
			ids = append(ids, d.ID())
		}
		after = page[len(page)-1].ID()
	}
}

// Run runs the contract against e, one subtest a rule.
func Run(t *testing.T, e Engine) {
	open := func(t *testing.T, lim relay.Limits) relay.Store {
		s, _ := e.Open(t, lim)
		return s
	}
	t.Run("ids and replay", func(t *testing.T) {
		s := open(t, Roomy)
		for i := 1; i <= 3; i++ {
			if id := MustAppend(t, s, "a", Delivery(i, 100), 0); id != int64(i) {
				t.Errorf("append #%d gave id %d", i, id)
			}
		}
		ids, first, last := IDs(t, s, "a", 1)
		if !slices.Equal(ids, []int64{2, 3}) || first != 1 || last != 3 {
			t.Errorf("since(a, 1) = %v first %d last %d; want [2 3] 1 3", ids, first, last)
		}
		if ids, first, last := IDs(t, s, "nope", 0); ids != nil || first != 1 || last != 0 {
			t.Errorf("since(unknown channel) = %v %d %d; want none, 1, 0", ids, first, last)
		}
		if ids, _, _ := IDs(t, s, "a", 1<<62); ids != nil {
			t.Errorf("since(a, huge) = %v; want none", ids)
		}
		// after raises the next id (the Server's ids for a channel the
		// store forgot).
		if id := MustAppend(t, s, "a", Delivery(4, 100), 10); id != 11 {
			t.Errorf("append after 10 gave %d, want 11", id)
		}
		if id := MustAppend(t, s, "a", Delivery(5, 100), 2); id != 12 {
			t.Errorf("append after 2 (below the last) gave %d, want 12", id)
		}
		if ids, _, _ := IDs(t, s, "a", 0); !slices.Equal(ids, []int64{1, 2, 3, 11, 12}) {
			t.Errorf("ids = %v, want [1 2 3 11 12]", ids)
		}
	})

	t.Run("byte exact", func(t *testing.T) {
		s := open(t, Roomy)
		r := httptest.NewRequest("POST", "/a?q=%FF&x", nil)
		r.Header.Set("Content-Type", "application/octet-stream")
		r.Header["X-Bin"] = []string{"caf\xe9 \x7f"}
		d := relay.NewEntry(r, []byte("\x00\xff\r\n\xc3\x28 body"), time.Unix(1700000000, 123456789))
		want := d.Record()
		id := MustAppend(t, s, "a", d, 0)
		got, err := s.Get(t.Context(), "a", id)
		if err != nil || got == nil {
			t.Fatalf("Get = %v, %v", got, err)
		}
		page, _, _, _ := s.Since(t.Context(), "a", 0, 1)
		for _, g := range []*relay.Entry{got, page[0]} {
			if g.ID() != id || !bytes.Equal(g.Record(), want) || !g.Received().Equal(d.Received()) || g.Size() != d.Size() {
				t.Errorf("read back %d (size %d):\n%q\nwant %d (size %d):\n%q", g.ID(), g.Size(), g.Record(), id, d.Size(), want)
			}
		}
	})

	t.Run("get", func(t *testing.T) {
		s := open(t, Roomy)
		MustAppend(t, s, "a", Delivery(1, 10), 0)
		for _, id := range []int64{0, -1, 2, 1 << 62} {
			if d, err := s.Get(t.Context(), "a", id); d != nil || err != nil {
				t.Errorf("Get(a, %d) = %v, %v; want nil, nil", id, d, err)
			}
		}
		if d, err := s.Get(t.Context(), "b", 1); d != nil || err != nil {
			t.Errorf("Get(b, 1) = %v, %v; want nil, nil", d, err)
		}
	})

	t.Run("count limit", func(t *testing.T) {
		s := open(t, relay.Limits{ChanCount: 3, ChanBytes: 1 << 20, TotalBytes: 1 << 30})
		for i := 1; i <= 5; i++ {
			MustAppend(t, s, "a", Delivery(i, 10), 0)
		}
		if ids, first, last := IDs(t, s, "a", 0); !slices.Equal(ids, []int64{3, 4, 5}) || first != 3 || last != 5 {
			t.Errorf("since = %v first %d last %d; want [3 4 5] 3 5", ids, first, last)
		}
		if st := s.Stats(t.Context()); st.Retained != 3 || st.Channels != 1 {
			t.Errorf("stats = %+v, want 3 retained in 1 channel", st)
		}
	})

	t.Run("byte limit keeps the newest", func(t *testing.T) {
		s := open(t, relay.Limits{ChanCount: 100, ChanBytes: 4000, TotalBytes: 1 << 30})
		MustAppend(t, s, "a", Delivery(1, 1000), 0)
		MustAppend(t, s, "a", Delivery(2, 1000), 0)
		if ids, _, _ := IDs(t, s, "a", 0); !slices.Equal(ids, []int64{1, 2}) {
			t.Errorf("two of ~1.5 KB: %v, want [1 2]", ids)
		}
		MustAppend(t, s, "a", Delivery(3, 5000), 0)
		if ids, first, _ := IDs(t, s, "a", 0); !slices.Equal(ids, []int64{3}) || first != 3 {
			t.Errorf("after one larger than the limit: %v (first %d), want [3]", ids, first)
		}
	})

	t.Run("total limit evicts least recent channels", func(t *testing.T) {
		one := Delivery(0, 1000).Size()
		s := open(t, relay.Limits{ChanCount: 100, ChanBytes: 1 << 20, TotalBytes: 4 * one})
		MustAppend(t, s, "old", Delivery(1, 1000), 0)
		MustAppend(t, s, "mid", Delivery(2, 1000), 0)
		MustAppend(t, s, "old", Delivery(3, 1000), 0) // old is now more recent than mid
		MustAppend(t, s, "new", Delivery(4, 1000), 0)
		MustAppend(t, s, "new", Delivery(5, 1000), 0) // over: mid goes first
		if s.Missing(t.Context(), []string{"mid"}) == 0 {
			t.Error("mid (least recently appended to) still has history")
		}
		if ids, _, _ := IDs(t, s, "old", 0); !slices.Equal(ids, []int64{1, 2}) {
			t.Errorf("old = %v, want [1 2]", ids)
		}
		MustAppend(t, s, "new", Delivery(6, 1000), 0) // then old's oldest
		if ids, _, _ := IDs(t, s, "old", 0); !slices.Equal(ids, []int64{2}) {
			t.Errorf("old = %v, want [2]", ids)
		}
		// A single delivery larger than the total stays.
		MustAppend(t, s, "huge", Delivery(7, 10*1000), 0)
		if st := s.Stats(t.Context()); st.Channels != 1 || st.Retained != 1 || s.Missing(t.Context(), []string{"huge"}) != 0 {
			t.Errorf("stats = %+v, want only huge's delivery", st)
		}
		// A forgotten channel starts again at 1.
		if id := MustAppend(t, s, "mid", Delivery(8, 10), 0); id != 1 {
			t.Errorf("first id of a forgotten channel = %d, want 1", id)
		}
	})

	t.Run("pages", func(t *testing.T) {
		s := open(t, Roomy)
		for i := 1; i <= 10; i++ {
			MustAppend(t, s, "a", Delivery(i, 1000), 0)
		}
		one := Delivery(0, 1000).Size()
		page, _, _, err := s.Since(t.Context(), "a", 2, 3*one)
		if err != nil || len(page) != 3 || page[0].ID() != 3 {
			t.Errorf("Since(a, 2, 3 deliveries' bytes) = %d deliveries, %v; want 3 from 3", len(page), err)
		}
		if page, _, _, _ := s.Since(t.Context(), "a", 2, 1); len(page) != 1 {
			t.Errorf("Since with maxBytes 1 = %d deliveries, want 1 (at least one)", len(page))
		}
	})

	t.Run("idempotency keys", func(t *testing.T) {
		s := open(t, Roomy)
		first := Delivery(1, 10, "Idempotency-Key: k1")
		MustAppend(t, s, "a", first, 0)
		MustAppend(t, s, "a", Delivery(2, 10), 0)
		// A redelivery repeats the key (the relay looks a key up before it
		// appends a POST, so only a redelivery stores one twice).
		orig, err := s.Get(t.Context(), "a", 1)
		if err != nil || orig == nil {
			t.Fatalf("Get(a, 1) = %v, %v", orig, err)
		}
		MustAppend(t, s, "a", orig.Redelivery(time.Unix(1700000001, 0)), 0)
		id, sum, ok, err := s.FindKey(t.Context(), "a", "k1")
		if err != nil || !ok || id != 3 || sum != sha256.Sum256(first.Body()) {
			t.Errorf("FindKey(a, k1) = %d %x %v %v; want 3, the body's SHA-256", id, sum, ok, err)
		}
		for _, c := range [][2]string{{"a", "k2"}, {"b", "k1"}} {
			if _, _, ok, err := s.FindKey(t.Context(), c[0], c[1]); ok || err != nil {
				t.Errorf("FindKey(%s, %s) found one (%v)", c[0], c[1], err)
			}
		}
	})

	t.Run("age limit", func(t *testing.T) {
		s := open(t, relay.Limits{ChanCount: 100, ChanBytes: 1 << 20, TotalBytes: 1 << 30, Age: time.Minute})
		at := func(seq int, sec int) *relay.Entry {
			return DeliveryAt(seq, 10, time.Unix(1700000000+int64(sec), 0))
		}
		MustAppend(t, s, "a", at(1, 0), 0)
		MustAppend(t, s, "a", at(2, 30), 0)
		MustAppend(t, s, "b", at(3, 0), 0)
		MustAppend(t, s, "a", at(4, 60), 0) // 1 is exactly a minute old: kept
		if ids, _, _ := IDs(t, s, "a", 0); !slices.Equal(ids, []int64{1, 2, 3}) {
			t.Errorf("a = %v, want [1 2 3]", ids)
		}
		MustAppend(t, s, "a", at(5, 91), 0) // 1 and 2 are older than a minute
		if ids, first, _ := IDs(t, s, "a", 0); !slices.Equal(ids, []int64{3, 4}) || first != 3 {
			t.Errorf("a = %v (first %d), want [3 4]", ids, first)
		}
		MustAppend(t, s, "a", at(6, 1000), 0) // everything older: the new one stays
		if ids, _, _ := IDs(t, s, "a", 0); !slices.Equal(ids, []int64{5}) {
			t.Errorf("a = %v, want [5]", ids)
		}
		// Only the channel appended to is trimmed.
		if ids, _, _ := IDs(t, s, "b", 0); !slices.Equal(ids, []int64{1}) {
			t.Errorf("b = %v, want [1]", ids)
		}
		if st := s.Stats(t.Context()); st.Retained != 2 || st.Channels != 2 {
			t.Errorf("stats = %+v, want 2 retained in 2 channels", st)
		}
	})

	t.Run("closed", func(t *testing.T) {
		s := open(t, Roomy)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(t.Context(), "a", Delivery(1, 10), 0); !errors.Is(err, relay.ErrStoreClosed) {
			t.Errorf("Append after Close = %v, want ErrStoreClosed", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
	})

	t.Run("private channels", func(t *testing.T) { testPrivate(t, e) })

	if e.Stored != nil {
		t.Run("redeliveries are references", func(t *testing.T) { testReferences(t, e) })
	}
}

// testReferences: a redelivery is stored as a reference to the record it
// repeats: chained redeliveries of a large delivery write a few bytes
// each, read back as the whole delivery (by Since and Get), outlive the
// original in the history (its record is held while they refer to it,
// across a reopen), and the held record goes with the last of them.
func testReferences(t *testing.T, e Engine) {
	ctx := t.Context()
	s, reopen := e.Open(t, relay.Limits{ChanCount: 5, ChanBytes: 1 << 30, TotalBytes: 1 << 30})
	body := bytes.Repeat([]byte("x"), 4<<20)
	orig := relay.NewEntry(httptest.NewRequest("POST", "/c", nil), body, time.Unix(1, 0))
	origID := MustAppend(t, s, "c", orig, 0)
	prev, err := s.Get(ctx, "c", origID)
	if err != nil || prev == nil {
		t.Fatalf("Get(%d) = %v, %v", origID, prev, err)
	}
	for i := range 4 { // each a redelivery of the one before, as read back
		id := MustAppend(t, s, "c", prev.Redelivery(time.Unix(int64(2+i), 0)), 0)
		got, err := s.Get(ctx, "c", id)
		if err != nil || got == nil || got.Of() != origID {
			t.Fatalf("redelivery %d reads back as %v, %v; want one referring to %d", id, got, err, origID)
		}
		prev = got
	}
	if rec, held := e.Stored(t, s, "c"); rec > len(body)+4096 || held != 0 {
		t.Errorf("five deliveries of one %d-byte body take %d bytes (+%d held); want one copy", len(body), rec, held)
	}
	// Two more deliveries evict the original and the first redelivery.
	for i := range 2 {
		MustAppend(t, s, "c", Delivery(10+i, 10), 0)
	}
	if reopen != nil {
		s = reopen() // the references survive a restart, or another relay
	}
	page, first, _, err := s.Since(ctx, "c", 0, 1<<30)
	if err != nil || first != 3 || len(page) != 5 {
		t.Fatalf("Since = %d deliveries from %d, %v; want 5 from 3", len(page), first, err)
	}
	for _, d := range page[:3] {
		if !bytes.Equal(d.Body(), body) || !d.Received().Equal(time.Unix(d.ID(), 0)) {
			t.Errorf("redelivery %d reads back %d bytes received %v, want the original's body, its own time", d.ID(), len(d.Body()), d.Received())
		}
	}
	if _, held := e.Stored(t, s, "c"); held < len(body) {
		t.Errorf("the original is not held for the redeliveries that refer to it (%d bytes held)", held)
	}
	for i := range 3 {
		MustAppend(t, s, "c", Delivery(20+i, 10), 0)
	}
	if rec, held := e.Stored(t, s, "c"); held != 0 || rec > 4096 {
		t.Errorf("once no redelivery refers to it, %d bytes are still held (%d in records)", held, rec)
	}
}

// testPrivate: private channels' records, their uses, the limit (the
// oldest never used makes room), the share of a network, and their
// expiry, across a reopen. Times are whole milliseconds (Redis keeps
// those).
func testPrivate(t *testing.T, e Engine) {
	lim := Roomy
	lim.PrivateChannels, lim.PrivatePerNetwork = 2, 1
	s, reopen := e.Open(t, lim)
	ctx := t.Context()
	if a, err := s.Access(ctx, "p1"); a != nil || err != nil {
		t.Fatalf("Access of a public channel = %v, %v; want nil, nil", a, err)
	}
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	mk := func(name string, created time.Time, network string) error {
		return s.PutAccess(ctx, name, relay.Access{TokenSum: sha256.Sum256([]byte(name)), Created: created, Network: network}, true)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	exists := func(names ...string) {
		t.Helper()
		for _, name := range names {
			want := !strings.HasPrefix(name, "-")
			name = strings.TrimPrefix(name, "-")
			if a, err := s.Access(ctx, name); err != nil || (a != nil) != want {
				t.Errorf("Access(%s) = %+v, %v; want it to exist: %v", name, a, err, want)
			}
		}
	}
	a1 := relay.Access{TokenSum: sha256.Sum256([]byte("token one")), Created: t0, Network: "192.0.2.1"}
	must(s.PutAccess(ctx, "p1", a1, true))
	if err := s.PutAccess(ctx, "p1", relay.Access{TokenSum: sha256.Sum256([]byte("other")), Created: t0}, true); !errors.Is(err, relay.ErrChannelExists) {
		t.Errorf("making a private channel again = %v, want ErrChannelExists", err)
	}
	if err := s.PutAccess(ctx, "nope", relay.Access{Secret: "s"}, false); err == nil {
		t.Error("replacing the record of a public channel succeeded")
	}
	if err := mk("q", at(1), "192.0.2.1"); !errors.Is(err, relay.ErrNetworkShare) {
		t.Errorf("a second channel of a network whose share is 1 = %v, want ErrNetworkShare", err)
	}
	must(s.TouchAccess(ctx, "p1", at(5)))
	must(s.TouchAccess(ctx, "p1", at(4))) // an older use changes nothing
	must(s.TouchAccess(ctx, "nope", at(5)))
	a1.Secret = "It's a Secret to Everybody"
	replaced := a1
	replaced.Network, replaced.Used = "198.51.100.7", at(1) // neither is the caller's to change
	must(s.PutAccess(ctx, "p1", replaced, false))
	a1.Used = at(5)
	exists("-nope")

	// Full: the oldest never used makes room, until every one is used.
	must(mk("p2", at(10), "198.51.100.2"))
	must(mk("p3", at(11), "198.51.100.3"))
	exists("p1", "-p2", "p3")
	must(s.TouchAccess(ctx, "p3", at(12)))
	if err := mk("p4", at(13), "198.51.100.4"); !errors.Is(err, relay.ErrTooManyPrivate) {
		t.Errorf("a third private channel, both held used, with a limit of 2 = %v, want ErrTooManyPrivate", err)
	}

	// Expiry: p1 (last used at 5) goes, p3 (at 12) stays, and its network
	// may make one again.
	gone, err := s.ExpireAccess(ctx, at(12))
	if err != nil || !slices.Equal(gone, []string{"p1"}) {
		t.Errorf("ExpireAccess(12 ms) = %v, %v; want [p1]", gone, err)
	}
	exists("-p1", "p3")
	must(mk("p5", at(20), "192.0.2.1"))
	if gone, err := s.ExpireAccess(ctx, at(20)); err != nil || len(gone) != 1 || gone[0] != "p3" {
		t.Errorf("ExpireAccess(20 ms) = %v, %v; want [p3] (p5, made at 20, never used, stays)", gone, err)
	}
	check := func(s relay.Store, when string) {
		got, err := s.Access(ctx, "p5")
		if err != nil || got == nil || got.Network != "192.0.2.1" || !got.Created.Equal(at(20)) || !got.Used.IsZero() {
			t.Errorf("%s: Access(p5) = %+v, %v; want network 192.0.2.1, made at 20 ms, never used", when, got, err)
		}
	}
	check(s, "stored")
	must(mk("p6", at(21), "198.51.100.6"))
	must(s.TouchAccess(ctx, "p6", at(30)))
	must(s.PutAccess(ctx, "p6", relay.Access{TokenSum: sha256.Sum256([]byte("p6")), Created: at(21), Secret: a1.Secret}, false))
	if reopen != nil {
		s = reopen()
		check(s, "reopened")
	}
	got, err := s.Access(ctx, "p6")
	if err != nil || got == nil || got.Secret != a1.Secret || got.Network != "198.51.100.6" || !got.Used.Equal(at(30)) {
		t.Errorf("Access(p6) = %+v, %v; want its secret, network 198.51.100.6, used at 30 ms", got, err)
	}
}
