package sse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/hookline/hookline/internal/wire"
)

// OversizeEvent is the name HTTPTransport gives to an event larger than its
// MaxEventSize. The event's bytes are dropped, and fn gets an event of this
// name carrying the dropped event's id (when the id came before the data,
// as every relay sends it) and data {"limit":N}. The client reports it
// (OversizeError) as a delivery it skipped, and the stream goes on with the
// next event: one oversized event never costs the deliveries after it. Its
// id counts as handled, so a reconnect resumes after it instead of
// receiving it again (and again).
const OversizeEvent = "hookline-oversize-event"

// limiterSlack is the room r3labs' buffer has beyond the limit: the marker
// naming a cut-off event, and the start of the next event read with it.
const limiterSlack = 64 << 10

// eventLimiter passes an event stream through unchanged, except that an
// event that grows past max bytes is cut: the bytes already passed are
// followed by a line naming the event OversizeEvent and a blank line (r3labs
// then dispatches the fragment under that name), and the rest of the event
// is discarded up to its blank line.
//
// Event boundaries are r3labs' (blankLines). Bytes are scanned a line at a
// time, and nothing is copied until an event is cut.
type eventLimiter struct {
	rc    io.ReadCloser
	max   int
	touch func() // reports activity while an oversized event is discarded

	size    int        // bytes of the current event passed on so far
	ends    blankLines // where the current event ends
	discard bool       // inside an oversized event, after the cut
	pending []byte     // marker bytes still to return
	left    []byte     // bytes read but not yet scanned (after a cut)
	err     error      // the read error to return once pending and left are drained
}

func newEventLimiter(rc io.ReadCloser, max int, touch func()) *eventLimiter {
	return &eventLimiter{rc: rc, max: max, touch: touch}
}

// Close closes the underlying body.
func (l *eventLimiter) Close() error { return l.rc.Close() }

func (l *eventLimiter) Read(p []byte) (int, error) {
	for {
		if len(l.pending) > 0 {
			n := copy(p, l.pending)
			l.pending = l.pending[n:]
			return n, nil
		}
		var n int
		if len(l.left) > 0 {
			n = copy(p, l.left)
			l.left = l.left[n:]
		} else {
			if l.err != nil {
				return 0, l.err
			}
			n, l.err = l.rc.Read(p)
		}
		kept, stop := l.scan(p[:n])
		if stop < n {
			l.left = append(bytes.Clone(p[stop:n]), l.left...) // p belongs to the caller
		}
		if kept > 0 {
			return kept, nil
		}
		if len(l.pending) == 0 && len(l.left) == 0 && l.err != nil {
			return 0, l.err
		}
		// Everything read so far was discarded: read on rather than return
		// (0, nil), which bufio.Scanner tolerates only 100 times in a row.
		if n > 0 && l.touch != nil {
			l.touch()
		}
	}
}

// scan processes b in place: the bytes passed on are moved to b[:kept]. It
// stops early, at stop, when it cuts an event (the marker is then pending
// and b[stop:] is scanned after it); otherwise stop is len(b).
func (l *eventLimiter) scan(b []byte) (kept, stop int) {
	w, i := 0, 0
	for i < len(b) {
		end := len(b)
		body := end - i // bytes before the line break
		if j := wire.IndexLineBreak(b[i:]); j >= 0 {
			end, body = i+j+1, j
		}
		// Only content grows an event: a line break never cuts it (so an
		// event of exactly max bytes is not cut at its blank line).
		if !l.discard && body > 0 && l.size+body > l.max {
			keep := max(0, l.max-l.size)
			copy(b[w:], b[i:i+keep]) // may overlap: b[i:] is not read again
			w += keep
			l.cut(keep > 0)
			if keep > 0 {
				l.ends.scan(b[w-keep : w]) // content, no line break
			}
			return w, i + keep
		}
		seg := b[i:end]
		ended := l.ends.scan(seg) // before the copy, which may overlap seg
		if !l.discard {
			copy(b[w:], seg)
			w += len(seg)
			l.size += len(seg)
		}
		if ended {
			l.discard, l.size = false, 0
		}
		i = end
	}
	return w, len(b)
}

// cut queues the marker that ends the current event under the name
// OversizeEvent and starts discarding. keptNow says bytes of the current
// line were just passed on, so the marker must start a new line.
func (l *eventLimiter) cut(keptNow bool) {
	marker := "event: " + OversizeEvent + "\n\n"
	lastIsBreak := !keptNow && (l.ends.t2 == '\n' || l.ends.t2 == '\r')
	if (keptNow || l.size > 0) && !lastIsBreak {
		marker = "\n" + marker
	}
	l.pending = append(l.pending[:0], marker...)
	l.discard = true
}

// oversizeData is the data of an OversizeEvent.
func oversizeData(limit int) []byte {
	return []byte(`{"limit":` + strconv.Itoa(limit) + `}`)
}

// OversizeError says what an OversizeEvent stands for, wrapping
// bufio.ErrTooLong.
func OversizeError(ev Event) error {
	var v struct {
		Limit int `json:"limit"`
	}
	limit := "the size limit"
	if json.Unmarshal(ev.Data, &v) == nil && v.Limit > 0 {
		limit = "the " + strconv.Itoa(v.Limit) + "-byte limit"
	}
	id := ""
	if ev.ID != "" {
		id = " (id " + strconv.Quote(ev.ID) + ")"
	}
	return fmt.Errorf("an event%s is larger than %s and was skipped (%w); the relay still has it",
		id, limit, bufio.ErrTooLong)
}
