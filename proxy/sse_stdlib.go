package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StdlibTransport is a Transport with a small Server-Sent Events reader of
// its own on net/http, instead of github.com/r3labs/sse/v2. It behaves as
// SSETransport does (one attempt per call, the same errors, idle timeout,
// response checks, truncated and oversized events) and differs in cost
// only: it reads each event in one pass, appending a data line's bytes
// straight to the event's data, so an event costs about one copy of its
// size in time and memory. r3labs' reader keeps a buffer as large as the
// largest event for the rest of the connection, copies each event's data
// twice and splits it into lines rune by rune (see the package
// documentation for the figures). The zero value is ready to use; it is
// safe for concurrent use.
//
// SSETransport stays the default: Options.Transport selects this one.
type StdlibTransport struct {
	// Client makes the requests. If nil, a client using
	// http.DefaultTransport is used. Its Timeout is ignored (a stream has no
	// overall deadline: IdleTimeout and the context bound it).
	Client *http.Client
	// MaxEventSize is the largest event accepted, in bytes as sent. A
	// larger one is skipped: fn gets an event named OversizeEvent with its
	// id, and the stream goes on. If zero, DefaultMaxEventSize.
	MaxEventSize int
	// IdleTimeout ends an attempt with ErrIdle when no byte arrives for that
	// long, keepalive comments and pings included; the clock does not run
	// while fn handles an event. It also bounds the wait for the response
	// headers. If zero, DefaultIdleTimeout; if negative, no idle timeout.
	IdleTimeout time.Duration
}

// Subscribe implements Transport: it makes one connection attempt to
// req.URL and passes each event to fn until the stream ends. See Transport
// for the errors. fn owns ev.Data and must not panic.
func (t *StdlibTransport) Subscribe(ctx context.Context, req SubscribeRequest, fn func(SSEEvent)) error {
	a, err := beginAttempt(ctx, req, t.MaxEventSize, t.IdleTimeout)
	if err != nil {
		return err
	}
	defer a.end()
	shown, maxSize, idle, attemptCtx, w := a.shown, a.maxSize, a.idle, a.ctx, a.watch

	hreq, err := http.NewRequestWithContext(attemptCtx, http.MethodGet, req.URL, nil)
	if err != nil {
		return fmt.Errorf("%w: stream URL %q: %v", ErrPermanent, shown, err)
	}
	for k, vs := range req.Header {
		k = http.CanonicalHeaderKey(k)
		if k == "Accept" || k == "Last-Event-Id" || len(vs) == 0 {
			continue
		}
		hreq.Header.Set(k, strings.Join(vs, ", "))
	}
	hreq.Header.Set("Accept", "text/event-stream") // exactly this: smee.io serves HTML otherwise
	hreq.Header.Set("Cache-Control", "no-cache")
	if req.LastEventID != "" {
		hreq.Header.Set("Last-Event-ID", req.LastEventID)
	}
	var hc http.Client
	if t.Client != nil {
		hc = *t.Client
	}
	hc.Timeout = 0

	resp, err := hc.Do(hreq)
	if err == nil {
		w.touch()
		if err = checkResponse(resp, shown); err != nil {
			resp.Body.Close()
		}
	}
	if err == nil {
		defer resp.Body.Close()
		if req.OnOpen != nil {
			req.OnOpen()
		}
		r := newEventReader(resp.Body, maxSize, w.touch)
		for {
			var ev SSEEvent
			if ev, err = r.next(); err != nil {
				break
			}
			if ctx.Err() != nil {
				break
			}
			w.busy.Store(true)
			fn(ev)
			w.touch() // before clearing busy, so the idle check never sees neither
			w.busy.Store(false)
		}
	}

	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(context.Cause(attemptCtx), ErrIdle):
		return fmt.Errorf("%w: nothing received from %s for %v", ErrIdle, shown, idle)
	case errors.Is(err, errTruncated):
		return fmt.Errorf("relay closed the stream from %s in the middle of an event: %w", shown, io.ErrUnexpectedEOF)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("relay closed the stream from %s: %w", shown, io.EOF)
	default:
		return describeStreamError(err, shown, maxSize)
	}
}

// errTruncated is eventReader's error for a stream that ended in the middle
// of an event.
var errTruncated = errors.New("stream ended in the middle of an event")

// readBufferSize is eventReader's read buffer: lines longer than that are
// read in pieces, data lines straight into the event's data.
const readBufferSize = 64 << 10

// eventReader parses an event stream as the WHATWG HTML specification's
// EventSource does: lines end with CRLF, LF or CR; a blank line dispatches
// the event; "data" lines are joined with "\n"; "id" sets the connection's
// last event id (unless it holds NUL); "event" names the event; "retry",
// comments (lines starting with ':') and unknown fields are ignored; an
// event whose data is empty is not dispatched; a leading byte order mark is
// skipped.
type eventReader struct {
	rd    io.Reader
	touch func() // called after every read that returned bytes
	max   int

	buf        []byte
	start, end int   // unread bytes are buf[start:end]
	err        error // the read error, once buf is drained
	skipLF     bool  // the last line ended with CR: a following LF is part of it
	started    bool  // past the byte order mark

	lastID string
	// The event being read.
	data     []byte
	hasData  bool // a data line was read
	name     string
	size     int  // bytes of the event as sent
	dirty    bool // a line of the event has been (partly) read
	oversize bool // the event passed max: its lines are discarded
}

func newEventReader(rd io.Reader, max int, touch func()) *eventReader {
	return &eventReader{rd: rd, touch: touch, max: max, buf: make([]byte, readBufferSize)}
}

// fill reads more bytes, moving the unread ones to the front of buf first.
// It reports false once there is nothing more to read (r.err is set).
func (r *eventReader) fill() bool {
	if r.err != nil {
		return false
	}
	if r.start > 0 {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
	}
	for {
		n, err := r.rd.Read(r.buf[r.end:])
		r.end += n
		if n > 0 && r.touch != nil {
			r.touch()
		}
		if err != nil {
			r.err = err
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
}

// next returns the next event to dispatch, or the error that ended the
// stream: errTruncated when it ended in the middle of an event, io.EOF when
// it ended cleanly, or the read error.
func (r *eventReader) next() (SSEEvent, error) {
	for {
		if r.start == r.end && !r.fill() {
			return SSEEvent{}, r.endError()
		}
		if r.skipLF {
			r.skipLF = false
			if r.buf[r.start] == '\n' {
				r.start++
				r.size++
				continue
			}
		}
		if !r.started {
			if r.end-r.start < 3 && bytes.HasPrefix([]byte("\xef\xbb\xbf"), r.buf[r.start:r.end]) && r.fill() {
				continue // not enough bytes to tell yet
			}
			r.started = true
			if bytes.HasPrefix(r.buf[r.start:r.end], []byte("\xef\xbb\xbf")) {
				r.start += 3
				continue
			}
		}
		if c := r.buf[r.start]; c == '\n' || c == '\r' { // a blank line
			r.start++
			r.skipLF = c == '\r'
			if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		r.dirty = true
		if err := r.line(); err != nil {
			return SSEEvent{}, err
		}
	}
}

// endError is next's error once the bytes have run out.
func (r *eventReader) endError() error {
	if !errors.Is(r.err, io.EOF) {
		return r.err
	}
	if r.dirty {
		return errTruncated
	}
	return io.EOF
}

// line reads one non-blank line, up to and including its line break.
func (r *eventReader) line() error {
	// The field name ends at the colon or the line break. Names longer than
	// the buffer are no field SSE knows: such a line is skipped.
	var name []byte
	for scanned := 0; ; {
		rest := r.buf[r.start:r.end]
		if i := bytes.IndexAny(rest[scanned:], ":\r\n"); i >= 0 {
			name = rest[:scanned+i]
			break
		}
		scanned = len(rest)
		if scanned == len(r.buf) {
			return r.skipLine()
		}
		if !r.fill() {
			return r.endError()
		}
	}
	field := string(name)
	known := field == "data" || field == "id" || field == "event"
	r.consume(len(name))
	hasValue := r.buf[r.start] == ':'
	if hasValue {
		r.consume(1)
		if r.start == r.end && !r.fill() {
			return r.endError()
		}
		if r.buf[r.start] == ' ' {
			r.consume(1)
		}
	}
	switch {
	case field == "" && !r.oversize && r.data == nil:
		return r.comment()
	case r.oversize || !known:
		return r.skipLine()
	case field == "data":
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		r.hasData = true
		return r.value(&r.data)
	default:
		var v []byte
		if err := r.value(&v); err != nil || r.oversize {
			return err
		}
		if field == "event" {
			r.name = string(v)
		} else if bytes.IndexByte(v, 0) < 0 {
			r.lastID = string(v)
		}
		return nil
	}
}

// comment reads a comment line. ": hookline-size N", which hookline serve
// sends before events of 64 KiB or more, sizes the event's data buffer
// (up to the size limit): the event is then read without copies.
func (r *eventReader) comment() error {
	rest := r.buf[r.start:r.end]
	if i := nextLineBreak(rest); i > 0 && i <= 64 {
		if n, ok := bytes.CutPrefix(rest[:i], []byte(sizeHint+" ")); ok {
			if size, err := strconv.Atoi(string(n)); err == nil && size > 0 {
				r.data = make([]byte, 0, min(size, r.max))
			}
		}
	}
	return r.skipLine()
}

// sizeHint is relay.SizeHint (the relay package is not imported here).
const sizeHint = "hookline-size"

// consume counts n bytes of the event as read.
func (r *eventReader) consume(n int) {
	r.start += n
	r.size += n
}

// value appends the rest of the line to *dst and reads its line break. When
// the event grows past max, it drops the event's data and skips the rest.
func (r *eventReader) value(dst *[]byte) error {
	for {
		rest := r.buf[r.start:r.end]
		i := nextLineBreak(rest)
		chunk := rest
		if i >= 0 {
			chunk = rest[:i]
		}
		if r.size+len(chunk) > r.max {
			r.cutOversize()
			return r.skipLine()
		}
		*dst = appendGrow(*dst, chunk)
		r.consume(len(chunk))
		if i >= 0 {
			r.lineBreak()
			return nil
		}
		if !r.fill() {
			return r.endError()
		}
	}
}

// skipLine discards the rest of the line and its line break.
func (r *eventReader) skipLine() error {
	for {
		i := nextLineBreak(r.buf[r.start:r.end])
		if i >= 0 {
			r.consume(i)
			r.lineBreak()
			return nil
		}
		r.consume(r.end - r.start)
		if !r.fill() {
			return r.endError()
		}
	}
}

// lineBreak reads the CR or LF at r.start (a CR's LF may come later).
func (r *eventReader) lineBreak() {
	r.skipLF = r.buf[r.start] == '\r'
	r.consume(1)
}

// cutOversize marks the event as too large and releases its data.
func (r *eventReader) cutOversize() {
	r.oversize = true
	r.data, r.hasData = nil, false
}

// dispatch ends the event at a blank line and reports whether it is to be
// passed on.
func (r *eventReader) dispatch() (SSEEvent, bool) {
	ev := SSEEvent{ID: r.lastID, Event: r.name, Data: r.data}
	ok := len(r.data) > 0
	if r.oversize {
		ev.Event, ev.Data, ok = OversizeEvent, oversizeData(r.max), true
	}
	r.data, r.hasData, r.name, r.size, r.dirty, r.oversize = nil, false, "", 0, false, false
	return ev, ok
}

// appendGrow appends b to dst, doubling dst's capacity when it must grow:
// a large event then costs one copy of itself in all, where append's
// smaller steps for large slices copy it about four times.
func appendGrow(dst, b []byte) []byte {
	if need := len(dst) + len(b); need > cap(dst) {
		grown := make([]byte, len(dst), max(need, 2*cap(dst), 512))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, b...)
}
