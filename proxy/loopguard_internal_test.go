package proxy

import (
	"fmt"
	"testing"
	"time"
)

// A burst of distinct deliveries (more than it remembers, all within the
// loop window) keeps the guard's memory bounded, and a loop among them is
// still seen: its ids come back round and round.
func TestLoopGuardBoundedAndStillSeesLoops(t *testing.T) {
	var g loopGuard
	now := time.Unix(1700000000, 0)
	for i := range 3 * loopRemember {
		g.forwarding(fmt.Sprint("d-", i), fmt.Sprint(i), now)
	}
	if n := len(g.sent); n > loopRemember {
		t.Errorf("remembers %d deliveries after a burst, want at most %d", n, loopRemember)
	}
	if len(g.order)-g.head != len(g.sent) {
		t.Errorf("order holds %d live ids for %d remembered", len(g.order)-g.head, len(g.sent))
	}
	// The newest are remembered: one comes back as a new event, twice.
	id := fmt.Sprint("d-", 3*loopRemember-1)
	if n := g.cameBack(id, "new-1", now.Add(time.Second)); n != 1 {
		t.Errorf("cameBack = %d, want 1", n)
	}
	g.forwarding(id, "new-1", now.Add(time.Second))
	if n := g.cameBack(id, "new-2", now.Add(2*time.Second)); n != 2 {
		t.Errorf("cameBack = %d, want 2", n)
	}
	// The oldest are forgotten.
	if n := g.cameBack("d-0", "again", now.Add(time.Second)); n != 0 {
		t.Errorf("cameBack of a forgotten delivery = %d, want 0", n)
	}
}
