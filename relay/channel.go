package relay

import (
	"container/list"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// channel is one relay channel: its history and its subscribers. All fields
// are guarded by Server.mu.
type channel struct {
	name    string
	lastID  int64       // the id of the newest delivery; ids start at 1
	history []*delivery // ids lastID-len+1 .. lastID, oldest first
	bytes   int64
	subs    map[*subscriber]struct{}
	elem    *list.Element // in Server.lru
}

// subscriber is one open stream. Its queue is a slice that grows only while
// deliveries wait, so that an idle subscriber costs little.
type subscriber struct {
	ext    bool
	notify chan struct{} // capacity 1: pending has deliveries
	kicked chan struct{} // closed when the subscriber is cut off

	mu           sync.Mutex
	pending      []*delivery
	pendingBytes int64
	rc           *http.ResponseController // not to be used once done
	done         bool
}

// offer queues d for the subscriber, or reports false when it is too far
// behind: maxCount deliveries, or maxBytes of them, already wait.
func (sub *subscriber) offer(d *delivery, maxCount int, maxBytes int64) bool {
	sub.mu.Lock()
	if len(sub.pending) >= maxCount || (len(sub.pending) > 0 && sub.pendingBytes+d.size > maxBytes) {
		sub.mu.Unlock()
		return false
	}
	sub.pending = append(sub.pending, d)
	sub.pendingBytes += d.size
	sub.mu.Unlock()
	select {
	case sub.notify <- struct{}{}:
	default:
	}
	return true
}

// take returns the waiting deliveries, giving the subscriber buf (emptied)
// as its next queue.
func (sub *subscriber) take(buf []*delivery) []*delivery {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	out := sub.pending
	sub.pending = buf[:0]
	sub.pendingBytes = 0
	return out
}

// cut ends a slow subscriber's stream: the handler sees kicked before its
// next write, and a write already blocked fails at once.
func (sub *subscriber) cut() {
	close(sub.kicked)
	sub.mu.Lock()
	defer sub.mu.Unlock()
	clear(sub.pending)
	sub.pending = nil
	if !sub.done {
		sub.rc.SetWriteDeadline(time.Now()) // ErrNotSupported: the handler still sees kicked
	}
}

// channelLocked returns the channel called name, creating it if needed.
func (s *Server) channelLocked(name string) *channel {
	c := s.channels[name]
	if c == nil {
		c = &channel{name: name, subs: map[*subscriber]struct{}{}}
		c.elem = s.lru.PushBack(c)
		s.channels[name] = c
	}
	return c
}

// dropIfEmptyLocked forgets c once it has neither subscribers nor history.
// Its ids start again at 1 if it is used later.
func (s *Server) dropIfEmptyLocked(c *channel) {
	if len(c.subs) == 0 && len(c.history) == 0 && s.channels[c.name] == c {
		delete(s.channels, c.name)
		s.lru.Remove(c.elem)
	}
}

// evictOldestLocked drops c's oldest delivery from its history, and c itself
// if that leaves it empty.
func (s *Server) evictOldestLocked(c *channel) {
	d := c.history[0]
	c.history[0] = nil
	c.history = c.history[1:]
	c.bytes -= d.size
	s.bytes -= d.size
	s.retained--
	if len(c.history) == 0 {
		c.history = nil
		s.dropIfEmptyLocked(c)
	}
}

// publish gives d the channel's next id, records it in the history (evicting
// what the limits require) and queues it for every subscriber, cutting off
// those whose queue is full. It returns the id and the number of subscribers
// it was queued for.
func (s *Server) publish(name string, d *delivery) (id int64, queued int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channelLocked(name)
	c.lastID++
	d.id = c.lastID
	c.history = append(c.history, d)
	c.bytes += d.size
	s.bytes += d.size
	s.retained++
	s.lru.MoveToBack(c.elem)
	for len(c.history) > s.opts.HistoryCount || (c.bytes > s.opts.HistoryBytes && len(c.history) > 1) {
		s.evictOldestLocked(c)
	}
	for e := s.lru.Front(); e != nil && s.bytes > s.opts.TotalHistoryBytes; {
		oc, next := e.Value.(*channel), e.Next()
		if oc == c && len(c.history) <= 1 {
			break // c is the most recent: everything else is gone already
		}
		if len(oc.history) > 0 {
			s.evictOldestLocked(oc) // may forget oc, and unlink e
		}
		if len(oc.history) == 0 {
			e = next
		}
	}
	for sub := range c.subs {
		if sub.offer(d, s.opts.SubscriberQueue, s.opts.HistoryBytes) {
			queued++
			continue
		}
		delete(c.subs, sub)
		s.subscribers--
		s.cutOff.Add(1)
		sub.cut()
		s.log.Warn("slow subscriber cut off; it can resume with Last-Event-ID", "channel", name)
	}
	s.deliveries.Add(1)
	return d.id, queued
}

// lookup returns delivery id of channel name if it is still in the history.
func (s *Server) lookup(name string, id int64) *delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[name]
	if c == nil || len(c.history) == 0 {
		return nil
	}
	i := id - c.history[0].id
	if i < 0 || i >= int64(len(c.history)) {
		return nil
	}
	return c.history[i]
}

// since returns the deliveries a client that last saw lastEventID should be
// sent, and the gap to announce before them (nil if none). ok is false when
// the client sent no Last-Event-ID: it gets neither replay nor gap.
//
// A lastEventID that is not a decimal integer between 0 and the channel's
// last id (garbage, or an id from before the relay restarted) is treated as
// 0, and always announced as a gap with reason "unknown".
func (c *channel) since(lastEventID string) (replay []*delivery, gap *gapEvent) {
	after, err := strconv.ParseInt(strings.TrimSpace(lastEventID), 10, 64)
	unknown := err != nil || after < 0 || after > c.lastID
	if unknown {
		after = 0
	}
	first := c.lastID + 1 // the oldest id still in the history
	if len(c.history) > 0 {
		first = c.history[0].id
	}
	switch {
	case unknown:
		gap = &gapEvent{From: 1, To: first - 1, Reason: "unknown"}
	case after+1 < first:
		gap = &gapEvent{From: after + 1, To: first - 1, Reason: "expired"}
	}
	if gap != nil {
		gap.LastEventID = truncate(lastEventID, 64)
	}
	skip := max(after+1-first, 0)
	if skip < int64(len(c.history)) {
		replay = append([]*delivery(nil), c.history[skip:]...)
	}
	return replay, gap
}
