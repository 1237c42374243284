package proxy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookline/hookline/internal/sse"
)

func TestCheckpointWatermark(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	var writeErr error
	c := newCheckpoint(path, "http://relay.test/chan", func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) },
		func(err error) { writeErr = err })
	c.start("10")
	read := func() stateDoc {
		t.Helper()
		c.flush() // the state is written in the background
		doc, err := readState(path, "http://relay.test/chan")
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	// Deliveries read in order 11, 12, (one without an id), 14; they
	// finish out of order.
	c.finish(1, "12", true)
	if doc := read(); doc.LastEventID != "10" || strings.Join(doc.DoneAfter, ",") != "12" {
		t.Errorf("after 12: %+v, want 10 with 12 done after", doc)
	}
	c.finish(3, "14", true)
	c.finish(0, "11", true)
	if doc := read(); doc.LastEventID != "12" || strings.Join(doc.DoneAfter, ",") != "14" {
		t.Errorf("after 11: %+v, want 12 with 14 done after", doc)
	}
	c.finish(2, "", true)
	if doc := read(); doc.LastEventID != "14" || len(doc.DoneAfter) != 0 || doc.Channel != "http://relay.test/chan" || !doc.UpdatedAt.Equal(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("at the end: %+v", doc)
	}
	if c.Mark() != "14" || writeErr != nil {
		t.Errorf("Mark = %q, write error %v", c.Mark(), writeErr)
	}
	// Not stored when the ids are not durable.
	c.finish(4, "15", false)
	if doc := read(); doc.LastEventID != "14" {
		t.Errorf("stored %q for ids that are not durable", doc.LastEventID)
	}
	// A write that fails is reported, and nothing torn is left.
	os.Chmod(dir, 0o500)
	defer os.Chmod(dir, 0o700)
	if os.Geteuid() != 0 { // root writes anyway
		c.finish(5, "16", true)
		c.flush()
		if writeErr == nil {
			t.Error("a failed write was not reported")
		}
	}
	os.Chmod(dir, 0o700)
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*.tmp"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left: %q", leftovers)
	}
}

func TestReadStateRefusals(t *testing.T) {
	dir := t.TempDir()
	const stream = "http://relay.test/chan"
	write := func(s string) string {
		p := filepath.Join(dir, "s.json")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if doc, err := readState(filepath.Join(dir, "missing.json"), stream); err != nil || doc.LastEventID != "" {
		t.Errorf("a missing file: %+v, %v; want no state and no error", doc, err)
	}
	tests := []struct{ name, content, want string }{
		{"not JSON", "{", "not a hookline state file"},
		{"version 2", `{"version":2}`, "state file version 2"},
		{"a NUL in the id", `{"version":1,"last_event_id":"a\u0000"}`, "not a usable event id"},
		{"an id too long", `{"version":1,"last_event_id":"` + strings.Repeat("1", 300) + `"}`, "not a usable event id"},
		{"an empty done id", `{"version":1,"last_event_id":"1","done_after":[""]}`, "done_after"},
		{"another channel", `{"version":1,"channel":"x","channel_sha256":"abc","last_event_id":"1"}`, "another channel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readState(write(tt.content), stream)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("readState = %v, want an error saying %q", err, tt.want)
			}
		})
	}
	_, err := readState(write(`{"version":1,"channel":"x","channel_sha256":"abc"}`), stream)
	if !errors.Is(err, errStateOtherChannel) {
		t.Errorf("readState = %v, want errStateOtherChannel", err)
	}
}

// FuzzParseState: any bytes in a state file give a document with usable
// ids or an error, never a panic.
//
//	go test ./proxy -run '^$' -fuzz FuzzParseState -fuzztime 1m
func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"version":1,"channel":"http://relay.test/chan","channel_sha256":"00","last_event_id":"41","done_after":["43","44"],"updated_at":"2026-11-22T10:00:00Z"}`))
	f.Add([]byte(`{"version":1,"last_event_id":"\u0000"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := parseState(data)
		if err != nil {
			return
		}
		if !sse.UsableEventID(doc.LastEventID) {
			t.Errorf("accepted last_event_id %q", doc.LastEventID)
		}
		for _, id := range doc.DoneAfter {
			if id == "" || !sse.UsableEventID(id) {
				t.Errorf("accepted done_after id %q", id)
			}
		}
		if _, err := json.Marshal(doc); err != nil {
			t.Errorf("cannot write back: %v", err)
		}
	})
}

// Deliveries that finish while the state file's writer pauses
// (stateWriteInterval) share its next write, and a flush (forward's exit)
// writes them at once instead of waiting the pause out. Simulated time.
func TestCheckpointFlushEndsThePause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.json")
		c := newCheckpoint(path, "http://relay.test/chan", time.Now, func(error) {})
		c.finish(0, "1", true) // written at once: the first after a quiet spell
		synctest.Wait()
		if doc, err := readState(path, "http://relay.test/chan"); err != nil || doc.LastEventID != "1" {
			t.Fatalf("the first delivery's state: %+v, %v", doc, err)
		}
		c.finish(1, "2", true)
		c.finish(2, "3", true)
		synctest.Wait()
		if doc, _ := readState(path, "http://relay.test/chan"); doc.LastEventID != "1" {
			t.Errorf("written during the pause: %q", doc.LastEventID)
		}
		start := time.Now()
		c.flush()
		if waited := time.Since(start); waited != 0 {
			t.Errorf("flush waited %v for the writer's pause", waited)
		}
		if doc, _ := readState(path, "http://relay.test/chan"); doc.LastEventID != "3" {
			t.Errorf("after flush: %q, want 3", doc.LastEventID)
		}
	})
}

// At a user's rate (a delivery a second) the state file is written once
// every stateWriteInterval, not once per delivery: each write costs more
// CPU than the rest of a delivery. Simulated time.
func TestCheckpointWritesNotPerDeliveryAtOneASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.json")
		var writes atomic.Int32
		now := func() time.Time { writes.Add(1); return time.Now() } // once per write (UpdatedAt)
		c := newCheckpoint(path, "http://relay.test/chan", now, func(error) {})
		const deliveries = 30
		for i := range deliveries {
			c.finish(uint64(i), strconv.Itoa(i+1), true)
			time.Sleep(time.Second) // simulated: the next delivery
		}
		c.flush()
		if doc, err := readState(path, "http://relay.test/chan"); err != nil || doc.LastEventID != strconv.Itoa(deliveries) {
			t.Fatalf("after flush: %+v, %v; want last_event_id %d", doc, err, deliveries)
		}
		// At most one write for four deliveries, and the flush's (a fixed
		// bound: one computed from stateWriteInterval would pass whatever
		// it is).
		if got, most := writes.Load(), int32(deliveries/4+1); got > most {
			t.Errorf("%d writes for %d deliveries a second apart, want at most %d", got, deliveries, most)
		}
	})
}
