package proxy

import (
	"io"

	"github.com/hookline/hookline/internal/wire"
)

// eventFiller is the body r3labs reads: it fills each Read with as many
// bytes as arrive until an event is complete, rather than returning
// whatever one socket read gave.
//
// r3labs' EventStreamReader (a bufio.Scanner) searches everything it has
// buffered for a blank line after every Read; fed a large event 64 KiB at a
// time, that is quadratic (1.6 s for a 33 MiB event, see
// BenchmarkR3labsEventStreamReader). Filled reads make the buffer double
// between searches, so the searches add up to a few times the event's size.
//
// Waiting for more bytes never delays an event: a Read returns as soon as
// the bytes read so far hold a blank line, the end of the event r3labs is
// waiting for (and until then it could not dispatch anything). The bytes it
// had before the Read hold no blank line, or it would not have read; one
// that straddles two reads is found from the last two bytes returned.
// Pings and comments end with a blank line too, so they return at once and
// keep the idle clock honest, as does every underlying read.
type eventFiller struct {
	rc     io.ReadCloser
	t1, t2 byte // the last two bytes returned, newest in t2
}

func (f *eventFiller) Read(p []byte) (int, error) {
	n := 0
	for {
		m, err := f.rc.Read(p[n:])
		end := f.scan(p[n : n+m])
		n += m
		if end || err != nil || n == len(p) {
			return n, err
		}
	}
}

func (f *eventFiller) Close() error { return f.rc.Close() }

// scan feeds b to the blank-line detector and reports whether b, after the
// bytes already seen, holds a blank line: "\n\n", "\r\r" or "\n\r\n" (which
// cover r3labs' five forms, "\r\n\n" and "\r\n\r\n" included).
func (f *eventFiller) scan(b []byte) bool {
	found := false
	for len(b) > 0 {
		i := wire.IndexLineBreak(b)
		if i < 0 {
			f.push(b)
			return found
		}
		if i > 0 {
			f.push(b[:i])
		}
		c := b[i]
		if (f.t2 == '\n' && c == '\n') || (f.t2 == '\r' && c == '\r') || (f.t1 == '\n' && f.t2 == '\r' && c == '\n') {
			found = true
		}
		f.t1, f.t2 = f.t2, c
		b = b[i+1:]
	}
	return found
}

// push records line content (no line breaks) as the newest bytes.
func (f *eventFiller) push(b []byte) {
	if len(b) >= 2 {
		f.t1, f.t2 = b[len(b)-2], b[len(b)-1]
	} else if len(b) == 1 {
		f.t1, f.t2 = f.t2, b[0]
	}
}
