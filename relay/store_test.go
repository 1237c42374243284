package relay_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/relay/storetest"
)

// This package's engines pass the contract, in memory and in a file
// (redisstore's tests run it for Redis).
func TestStoreContract(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		storetest.Run(t, storetest.Engine{Open: func(t *testing.T, l relay.Limits) (relay.Store, func() relay.Store) {
			s := relay.OpenMemory(l)
			t.Cleanup(func() { s.Close() })
			return s, nil
		}})
	})
	t.Run("bolt", func(t *testing.T) {
		storetest.Run(t, storetest.Engine{
			Open: func(t *testing.T, l relay.Limits) (relay.Store, func() relay.Store) {
				dir := t.TempDir()
				s := openTestFile(t, dir, l)
				return s, func() relay.Store { s.Close(); return openTestFile(t, dir, l) }
			},
			Stored: func(t *testing.T, s relay.Store, channel string) (int, int) {
				records, held, err := relay.FileStored(s, channel)
				if err != nil {
					t.Fatal(err)
				}
				return records, held
			},
		})
	})
}

func openTestFile(t *testing.T, dir string, l relay.Limits) relay.Store {
	t.Helper()
	s, err := relay.OpenFile(dir, l)
	if err != nil {
		t.Fatalf("OpenFile(%s) = %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The bolt store gives back after a reopen what it had: the same ids, the
// same bytes, the next id, the same eviction order, the same keys.
func TestBoltReopen(t *testing.T) {
	dir := t.TempDir()
	l := relay.Limits{ChanCount: 100, ChanBytes: 1 << 20, TotalBytes: 1 << 30}
	s := openTestFile(t, dir, l)
	var frames [][]byte
	for i := 1; i <= 5; i++ {
		d := storetest.Delivery(i, 100*i, fmt.Sprint("Idempotency-Key: key", i))
		storetest.MustAppend(t, s, "a", d, 0)
		frames = append(frames, d.Record())
	}
	storetest.MustAppend(t, s, "b", storetest.Delivery(5, 10), 0) // received before a's next one
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTestFile(t, dir, l)
	page, first, last, err := s.Since(t.Context(), "a", 0, 1<<20)
	if err != nil || len(page) != 5 || first != 1 || last != 5 {
		t.Fatalf("after reopen: since = %d deliveries, %d, %d, %v; want 5, 1, 5", len(page), first, last, err)
	}
	for i, d := range page {
		if !bytes.Equal(d.Record(), frames[i]) {
			t.Errorf("delivery %d after reopen:\n%q\nwant\n%q", d.ID(), d.Record(), frames[i])
		}
	}
	if id := storetest.MustAppend(t, s, "a", storetest.Delivery(6, 10), 0); id != 6 {
		t.Errorf("next id after reopen = %d, want 6", id)
	}
	if id, _, ok, _ := s.FindKey(t.Context(), "a", "key3"); !ok || id != 3 {
		t.Errorf("findKey after reopen = %d %v, want 3", id, ok)
	}
	if st := s.Stats(t.Context()); st.Channels != 2 || st.Retained != 7 {
		t.Errorf("stats after reopen = %+v, want 7 in 2 channels", st)
	}
	s.Close()

	// Lower limits at the next start: trimmed at once, the channel posted
	// to least recently (b, by its newest delivery's time) first.
	one := storetest.Delivery(0, 10).Size()
	s = openTestFile(t, dir, relay.Limits{ChanCount: 2, ChanBytes: 1 << 20, TotalBytes: 2*one + 600})
	if ids, _, _ := storetest.IDs(t, s, "a", 0); !slices.Equal(ids, []int64{5, 6}) {
		t.Errorf("a after a reopen with 2 per channel = %v, want [5 6]", ids)
	}
	if s.Missing(t.Context(), []string{"b"}) == 0 {
		t.Error("b (least recent) kept after the total limit was lowered")
	}
	s.Close()
	s = openTestFile(t, dir, l)
	if ids, _, _ := storetest.IDs(t, s, "a", 0); !slices.Equal(ids, []int64{5, 6}) || (s.Missing(t.Context(), []string{"b"}) == 0) {
		t.Errorf("the trim at open was not stored: a = %v, b kept %v", ids, (s.Missing(t.Context(), []string{"b"}) == 0))
	}
}

func TestBoltUnusable(t *testing.T) {
	t.Run("locked by another", func(t *testing.T) {
		dir := t.TempDir()
		openTestFile(t, dir, storetest.Roomy)
		start := time.Now()
		_, err := relay.OpenFile(dir, storetest.Roomy)
		if !errors.Is(err, relay.ErrDataDirInUse) {
			t.Errorf("second open = %v, want relay.ErrDataDirInUse", err)
		}
		if d := time.Since(start); d > 10*relay.LockTimeout {
			t.Errorf("second open took %s", d)
		}
	})
	t.Run("a file, not a directory", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		os.WriteFile(f, []byte("x"), 0o600)
		if _, err := relay.OpenFile(f, storetest.Roomy); err == nil || !strings.Contains(err.Error(), "cannot create the data directory") {
			t.Errorf("open on a file = %v, want cannot create the data directory", err)
		}
	})
	t.Run("not a bolt file", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, relay.DataFile), bytes.Repeat([]byte("garbage!"), 4096), 0o600)
		if _, err := relay.OpenFile(dir, storetest.Roomy); !errors.Is(err, relay.ErrDataDirDamaged) {
			t.Errorf("open on garbage = %v, want relay.ErrDataDirDamaged", err)
		}
	})
	t.Run("another program's bolt file", func(t *testing.T) {
		dir := t.TempDir()
		db, err := bolt.Open(filepath.Join(dir, relay.DataFile), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		db.Update(func(tx *bolt.Tx) error {
			b, _ := tx.CreateBucket(relay.MetaBucket)
			return b.Put(relay.FormatKey, []byte("someone-else-7"))
		})
		db.Close()
		if _, err := relay.OpenFile(dir, storetest.Roomy); !errors.Is(err, relay.ErrDataDirDamaged) || !strings.Contains(err.Error(), "someone-else-7") {
			t.Errorf("open on another format = %v, want relay.ErrDataDirDamaged naming it", err)
		}
	})
	t.Run("no permission", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root bypasses file permissions; this case runs as an ordinary user (CI)")
		}
		dir := t.TempDir()
		os.Chmod(dir, 0o500)
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		if _, err := relay.OpenFile(dir, storetest.Roomy); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("open in a read-only directory = %v, want fs.ErrPermission", err)
		}
	})
}

// A record damaged on disk is dropped at the next start, with the rest
// kept; until then the relay serves the history from memory, whole.
func TestBoltDamagedRecord(t *testing.T) {
	dir := t.TempDir()
	s := openTestFile(t, dir, storetest.Roomy)
	for i := 1; i <= 3; i++ {
		storetest.MustAppend(t, s, "a", storetest.Delivery(i, 10), 0)
	}
	if err := relay.DamageFileRecord(s, "a", 2); err != nil {
		t.Fatal(err)
	}
	if ids, _, _ := storetest.IDs(t, s, "a", 0); !slices.Equal(ids, []int64{1, 2, 3}) {
		t.Errorf("since with 2 damaged on disk = %v, want [1 2 3] from memory", ids)
	}
	s.Close()
	s = openTestFile(t, dir, storetest.Roomy)
	if ids, _, _ := storetest.IDs(t, s, "a", 0); !slices.Equal(ids, []int64{1, 3}) || s.Stats(t.Context()).Retained != 2 {
		t.Errorf("after reopen = %v (%d retained), want [1 3]", ids, s.Stats(t.Context()).Retained)
	}
}

func TestRecordRejects(t *testing.T) {
	good := storetest.Delivery(1, 50).Record()
	reseal := func(b []byte) []byte { // recompute the checksum of a changed record
		p := slices.Clone(b[:len(b)-4])
		return relay.AppendCRC(p)
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
		{"huge header count", relay.AppendCRC([]byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})},
		{"huge field", relay.AppendCRC([]byte{1, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a'})},
		{"uppercase name", relay.AppendCRC([]byte{1, 0, 1, 1, 'A', 0, 0, 0})},
		{"name not a token", relay.AppendCRC([]byte{1, 0, 1, 1, ' ', 0, 0, 0})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d, err := relay.DecodeEntry(1, tt.rec, nil); !errors.Is(err, relay.ErrBadRecord) {
				t.Errorf("DecodeEntry(%q) = %v, %v; want ErrBadRecord", tt.rec, d, err)
			}
		})
	}
}
