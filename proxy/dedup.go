package proxy

import (
	"sync"
	"time"
)

// The duplicate window (Options.DedupWindow) and how many ids it holds.
const (
	defaultDedupWindow = time.Hour
	defaultDedupSize   = 10000
)

// dedup remembers the delivery ids read in the last window (at most size of
// them) and says whether a delivery repeats one.
//
// A repeat is a duplicate unless it may be a redelivery someone asked for
// (the relay's event ids are durable, and the repeat is marked by the
// hookline relay or comes from a sender that never resends on its own:
// see asked) and came with a different event id than the first copy: that
// is a deliberate redelivery (hookline's relay page, GitHub's Redeliver
// button through a relay with durable ids), which keeps its delivery id
// and is forwarded again. A relay that sends the same event twice (at
// least once delivery, a replay after reconnecting) repeats its event id
// too; a sender's own retry is a new event with the same delivery id.
//
// It is safe for concurrent use (Client.Handle).
type dedup struct {
	mu     sync.Mutex
	window time.Duration
	size   int
	seen   map[string]seenID
	fifo   []fifoEntry // in read order; head is the oldest
	head   int
}

type seenID struct {
	eventID string
	at      time.Time
}

type fifoEntry struct {
	id string
	at time.Time
}

func newDedup(window time.Duration) *dedup {
	if window < 0 {
		return nil // disabled
	}
	if window == 0 {
		window = defaultDedupWindow
	}
	return &dedup{window: window, size: defaultDedupSize, seen: map[string]seenID{}}
}

// check records the delivery id (with the event id it came with) and
// reports whether it is a duplicate, or a redelivery of an id seen before
// (only when redeliverable). An empty id is never a duplicate. A nil
// *dedup reports nothing.
func (d *dedup) check(id, eventID string, redeliverable bool, now time.Time) (duplicate, redelivery bool) {
	if d == nil || id == "" {
		return false, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire(now)
	if prev, ok := d.seen[id]; ok {
		if redeliverable && eventID != "" && prev.eventID != "" && eventID != prev.eventID {
			d.add(id, eventID, now)
			return false, true
		}
		return true, false
	}
	d.add(id, eventID, now)
	return false, false
}

func (d *dedup) add(id, eventID string, now time.Time) {
	d.seen[id] = seenID{eventID: eventID, at: now}
	d.fifo = append(d.fifo, fifoEntry{id: id, at: now})
	d.expire(now)
}

// expire forgets ids older than the window, and the oldest while more than
// size are remembered.
func (d *dedup) expire(now time.Time) {
	for d.head < len(d.fifo) {
		e := d.fifo[d.head]
		if len(d.seen) <= d.size && now.Sub(e.at) < d.window {
			break
		}
		if s, ok := d.seen[e.id]; ok && s.at.Equal(e.at) {
			delete(d.seen, e.id)
		}
		d.fifo[d.head] = fifoEntry{}
		d.head++
	}
	if d.head > 1024 && d.head*2 > len(d.fifo) {
		d.fifo = append(d.fifo[:0:0], d.fifo[d.head:]...)
		d.head = 0
	}
}
