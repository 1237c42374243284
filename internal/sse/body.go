package sse

import (
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/hookline/hookline/internal/wire"
)

// blankLines finds the ends of events in a stream read piece by piece: a
// blank line, "\n\n", "\r\r" or "\n\r\n" (which cover r3labs' five forms,
// "\r\n\n" and "\r\n\r\n" included; see containsDoubleNewline in its
// reader). It is the one boundary detector of the transport.
type blankLines struct {
	t1, t2 byte // the last two bytes of the current event (0: none), newest in t2
	open   bool // content has come since the last blank line
}

// scan feeds b and reports whether it ends an event.
func (s *blankLines) scan(b []byte) bool {
	found := false
	for len(b) > 0 {
		i := wire.IndexLineBreak(b)
		if i < 0 {
			s.content(b)
			return found
		}
		if i > 0 {
			s.content(b[:i])
		}
		c := b[i]
		if (s.t2 == '\n' && c == '\n') || (s.t2 == '\r' && c == '\r') || (s.t1 == '\n' && s.t2 == '\r' && c == '\n') {
			// r3labs looks for the next blank line after this one.
			found, s.open, s.t1, s.t2 = true, false, 0, 0
		} else {
			s.t1, s.t2 = s.t2, c
		}
		b = b[i+1:]
	}
	return found
}

// content records line content (no line breaks).
func (s *blankLines) content(b []byte) {
	s.open = true
	if len(b) >= 2 {
		s.t1, s.t2 = b[len(b)-2], b[len(b)-1]
	} else {
		s.t1, s.t2 = s.t2, b[0]
	}
}

// streamBody is the body of an event stream as r3labs reads it.
//
// It fills each Read with as many bytes as arrive until an event is
// complete, rather than returning whatever one socket read gave: r3labs'
// EventStreamReader (a bufio.Scanner) searches everything it has buffered
// for a blank line after every Read, which fed a large event 64 KiB at a
// time is quadratic (1.6 s for a 33 MiB event, see
// BenchmarkR3labsEventStreamReader); filled reads make the buffer double
// between searches. Waiting never delays an event: a Read returns as soon
// as its bytes hold a blank line, and pings and comments end with one.
//
// Every underlying read resets the idle clock (touch). When the stream ends
// (EOF or error) in the middle of an event, it first returns a line naming
// the event truncatedEvent, so that r3labs, which would dispatch the partial
// event, hands it over with a name Subscribe drops.
type streamBody struct {
	rc      io.ReadCloser
	touch   func() // nil: no idle clock
	ends    blankLines
	pending []byte // the truncation marker still to return
	err     error  // the error to return once pending is drained

	truncated atomic.Bool // set by the reading goroutine
	closeOnce sync.Once
	ended     bool // the last Read returned the end of an event
}

func (b *streamBody) Read(p []byte) (int, error) {
	if len(b.pending) > 0 {
		n := copy(p, b.pending)
		b.pending = b.pending[n:]
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.ended {
		// The event the last Read ended is on its way to the handler:
		// r3labs hands it over a channel and comes straight back here for
		// more. Let the handler run first, so that the delivery is sent
		// before this goroutine's read (which finds nothing at a user's
		// rate) and park, not after: with one processor, as forward runs
		// in order, the sender of a channel runs on until it blocks.
		b.ended = false
		runtime.Gosched()
	}
	n := 0
	for {
		m, err := b.rc.Read(p[n:])
		if m > 0 && b.touch != nil {
			b.touch()
		}
		end := b.ends.scan(p[n : n+m])
		n += m
		if err != nil && b.ends.open {
			b.truncated.Store(true)
			b.err = err
			marker := "event: " + truncatedEvent + "\n\n"
			if b.ends.t2 != '\n' && b.ends.t2 != '\r' {
				marker = "\n" + marker
			}
			b.pending = []byte(marker)
			return n, nil
		}
		if end || err != nil || n == len(p) {
			b.ended = end
			return n, err
		}
	}
}

func (b *streamBody) Close() error {
	var err error
	b.closeOnce.Do(func() { err = b.rc.Close() })
	return err
}
