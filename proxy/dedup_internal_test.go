package proxy

import (
	"testing"
	"time"
)

func TestDedupWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	d := newDedup(time.Hour)
	steps := []struct {
		id, eventID string
		at          time.Duration
		durable     bool
		dup, redel  bool
	}{
		{"a", "1", 0, true, false, false},
		{"a", "1", 59 * time.Minute, true, true, false},              // within the hour
		{"a", "7", 59 * time.Minute, true, false, true},              // a new event id: redelivery
		{"a", "7", 60 * time.Minute, true, true, false},              // the redelivery repeated
		{"a", "9", 60 * time.Minute, false, true, false},             // ids not durable: the delivery id decides
		{"a", "7", 59*time.Minute + 2*time.Hour, true, false, false}, // forgotten after the window
	}
	for i, s := range steps {
		dup, redel := d.check(s.id, s.eventID, s.durable, t0.Add(s.at))
		if dup != s.dup || redel != s.redel {
			t.Errorf("step %d: check(%q, %q) = %v, %v; want %v, %v", i, s.id, s.eventID, dup, redel, s.dup, s.redel)
		}
	}
	if newDedup(-1) != nil {
		t.Error("a negative window or size should disable the check")
	}
	var off *dedup
	if dup, _ := off.check("a", "1", true, t0); dup {
		t.Error("a disabled check reported a duplicate")
	}
}

// The memory stays bounded by size however many ids pass.
func TestDedupBounded(t *testing.T) {
	d := newDedup(time.Hour)
	d.size = 100
	t0 := time.Now()
	for i := range 100000 {
		d.check(string(rune('a'+i%26))+string(rune(i)), "", false, t0)
	}
	if len(d.seen) > 100 || len(d.fifo)-d.head > 100 || cap(d.fifo) > 4096 {
		t.Errorf("after 100,000 ids: %d remembered, fifo %d live of cap %d", len(d.seen), len(d.fifo)-d.head, cap(d.fifo))
	}
}
