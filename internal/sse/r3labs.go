package sse

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	r3 "github.com/r3labs/sse/v2"
	"gopkg.in/cenkalti/backoff.v1"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/rest/header"
)

// DefaultMaxEventSize is the largest event HTTPTransport accepts when
// MaxEventSize is zero: 64 MiB, counted as sent (field names and newlines
// included).
//
// The largest delivery is 25 MiB (26,214,400 bytes). In "bodyB" it takes
// 4/3 of that in base64: 34,952,536 bytes (33.3 MiB). hookline's relay may
// send the body twice, as "body" JSON text (about 25 MiB more) and as
// "bodyB", which makes 58.3 MiB, plus the request headers (at most 1 MiB in
// net/http servers) and the JSON punctuation: 59.4 MiB in the worst case.
// 64 MiB covers that with room to spare. The buffer grows by doubling from
// 4 KiB as an event needs it, so small events never allocate it.
const DefaultMaxEventSize = 64 << 20

// DefaultIdleTimeout is HTTPTransport's idle timeout when IdleTimeout is
// zero: three missed 30-second keepalives (smee.io, gosmee and hookline all
// send one every 30 s).
const DefaultIdleTimeout = 90 * time.Second

// truncatedEvent is the event name that streamBody gives to an event cut
// off by the end of the stream, so that it is recognised and dropped.
const truncatedEvent = "hookline-truncated-event"

// HTTPTransport is the Transport built on github.com/r3labs/sse/v2. The zero
// value is ready to use. It is safe for concurrent use; every Subscribe call
// uses its own sse.Client.
//
// It neutralises r3labs' defects (see the package documentation): each call
// is one attempt (no retries inside r3labs), a clean EOF, an idle stream and
// a cancelled context come back as distinct results, a 64 KiB event is not
// dropped, a response that is not an event stream is refused, and an event
// cut off by the end of the stream is dropped rather than passed on.
type HTTPTransport struct {
	// Client makes the requests. If nil, a client using
	// http.DefaultTransport is used. Its Timeout is ignored (a stream has no
	// overall deadline: IdleTimeout and the context bound it) and its
	// Transport is wrapped to watch the stream.
	Client *http.Client
	// MaxEventSize is the largest event accepted, in bytes as sent. A larger
	// one is skipped: fn gets an event named OversizeEvent with its id, and
	// the stream goes on. If zero, DefaultMaxEventSize.
	MaxEventSize int
	// IdleTimeout ends an attempt with ErrIdle when no byte arrives for that
	// long, keepalive comments and pings included; the clock does not run
	// while fn handles an event. It also bounds the wait for the response
	// headers. If zero, DefaultIdleTimeout; if negative, no idle timeout.
	IdleTimeout time.Duration
}

// Subscribe implements Transport: it makes one connection attempt to
// req.URL and passes each event to fn until the stream ends. See Transport
// for the errors. fn must not retain ev.Data beyond what it owns (it owns
// it) and must not panic.
func (t *HTTPTransport) Subscribe(ctx context.Context, req Request, fn func(Event)) error {
	a, err := beginAttempt(ctx, req, t.MaxEventSize, t.IdleTimeout)
	if err != nil {
		return err
	}
	defer a.end()
	shown, maxSize, idle, attemptCtx, w := a.shown, a.maxSize, a.idle, a.ctx, a.watch

	// The limiter cuts events over maxSize (see OversizeEvent); r3labs'
	// buffer has room for the cut fragment and the marker.
	c := r3.NewClient(req.URL, r3.ClientMaxBufferSize(maxSize+limiterSlack))
	w.maxEvent = maxSize
	c.Connection = t.httpClient(w)
	// One attempt per call: the caller's loop owns retries, and r3labs'
	// default backoff gives up after 15 minutes and ignores cancellation.
	c.ReconnectStrategy = &backoff.StopBackOff{}
	for k, vs := range req.Header {
		k = http.CanonicalHeaderKey(k)
		if k == "Accept" || k == "Last-Event-Id" || len(vs) == 0 {
			continue
		}
		c.Headers[k] = strings.Join(vs, ", ")
	}
	c.Headers["Accept"] = "text/event-stream" // exactly this: smee.io serves HTML otherwise
	if req.LastEventID != "" {
		c.Headers["Last-Event-Id"] = req.LastEventID
	}
	c.ResponseValidator = func(_ *r3.Client, resp *http.Response) error {
		if err := checkResponse(resp, shown); err != nil {
			resp.Body.Close() // r3labs leaves the body open when a validator fails
			return err
		}
		if req.OnOpen != nil {
			req.OnOpen()
		}
		return nil
	}

	err = c.SubscribeRawWithContext(attemptCtx, func(m *r3.Event) {
		if ctx.Err() != nil {
			return // the caller has gone; r3labs may still hand over one event
		}
		name := string(m.Event)
		if name == OversizeEvent {
			// Cut by the limiter: pass on its id, never its fragment.
			w.busy.Store(true)
			fn(Event{ID: string(m.ID), Event: OversizeEvent, Data: oversizeData(maxSize)})
			w.touch()
			w.busy.Store(false)
			return
		}
		if name == truncatedEvent || len(m.Data) == 0 {
			// A cut-off event, or one without data (only an id, a name or
			// a retry field): the SSE specification dispatches neither.
			return
		}
		w.busy.Store(true)
		fn(Event{ID: string(m.ID), Event: name, Data: m.Data})
		w.touch() // before clearing busy, so the idle check never sees neither
		w.busy.Store(false)
	})

	// r3labs returns nil for a clean EOF and for a cancelled context alike;
	// tell them apart here.
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(context.Cause(attemptCtx), ErrIdle):
		return fmt.Errorf("%w: nothing received from %s for %v", ErrIdle, shown, idle)
	case err != nil:
		return describeStreamError(err, shown, maxSize)
	case w.body != nil && w.body.truncated.Load():
		return fmt.Errorf("relay closed the stream from %s in the middle of an event: %w", shown, io.ErrUnexpectedEOF)
	default:
		return fmt.Errorf("relay closed the stream from %s: %w", shown, io.EOF)
	}
}

// httpClient returns a copy of t.Client whose transport reports the stream's
// activity to w.
func (t *HTTPTransport) httpClient(w *streamWatch) *http.Client {
	var hc http.Client
	if t.Client != nil {
		hc = *t.Client
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &watchTransport{base: base, w: w}
	hc.Timeout = 0
	return &hc
}

// checkResponse classifies a relay's response to a subscription.
func checkResponse(resp *http.Response, shown string) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		ct := resp.Header.Get("Content-Type")
		if ct == "" {
			return nil // some minimal servers omit it; the content decides
		}
		if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "text/event-stream" {
			return nil
		}
		hint := "check the channel URL"
		if gs, err := StreamURL(shown, delivery.FormatGosmee); err == nil && gs != shown {
			hint = fmt.Sprintf("a gosmee server streams from %s", gs)
		}
		return fmt.Errorf("%w: %s answered %d with Content-Type %q; %s", ErrNotEventStream, shown, resp.StatusCode, ct, hint)
	}
	e := &StatusError{StatusCode: resp.StatusCode, URL: shown}
	e.RetryAfter, _ = header.RetryAfter(resp.Header.Get("Retry-After"), time.Now())
	// A relay's message is worth reading whole when it says what to do
	// (hookline's 401 names the read token and where forward keeps it:
	// about 200 characters); 320 is still one short paragraph.
	if b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024)); len(b) > 0 {
		e.Message = excerpt(relayMessage(b), 320)
	}
	return e
}

// relayMessage returns the message of a relay's JSON error body
// ({"error": "..."} as hookline serve and most relays send, or
// {"message": "..."}), or b itself when it is not one.
func relayMessage(b []byte) []byte {
	var v struct{ Error, Message string }
	if json.Unmarshal(b, &v) == nil {
		if v.Error != "" {
			return []byte(v.Error)
		}
		if v.Message != "" {
			return []byte(v.Message)
		}
	}
	return b
}

// excerpt returns the start of b as one line of printable text, or "" when
// b does not look like text.
func excerpt(b []byte, max int) string {
	s := strings.ToValidUTF8(string(b), "")
	s = strings.Join(strings.Fields(s), " ")
	if strings.HasPrefix(s, "<") { // an HTML page says nothing in one line
		return ""
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, s)
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return s
}

// describeStreamError turns what r3labs returned into an error that names
// the (redacted) URL and keeps the cause for errors.Is.
func describeStreamError(err error, shown string, maxSize int) error {
	var se *StatusError
	if errors.As(err, &se) || errors.Is(err, ErrPermanent) {
		return err // from checkResponse, already described
	}
	if cause := httpx.CertError(err); cause != nil {
		// Retrying cannot fix a certificate, and reconnecting forever
		// would hide the problem.
		return fmt.Errorf("%w: %s: the relay's TLS certificate cannot be verified: %w", ErrPermanent, shown, cause)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// net/http names the URL with its query; name it redacted instead.
		return fmt.Errorf("connect to %s: %w", shown, ue.Err)
	}
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("an event from %s is larger than the %d-byte limit: %w", shown, maxSize, err)
	}
	return fmt.Errorf("stream from %s broke: %w", shown, err)
}

// streamWatch follows one connection attempt: it cancels the attempt with
// ErrIdle when no byte arrives for idle (unless an event is being handled),
// and holds the stream's body, which knows whether the stream ended in the
// middle of an event.
//
// Activity is a timestamp stored on every read (cheap); the timer checks it
// when it fires and re-arms itself for the rest of the idle period.
type streamWatch struct {
	idle     time.Duration
	maxEvent int          // the event size limit (see eventLimiter)
	start    time.Time    // for monotonic offsets
	last     atomic.Int64 // time.Since(start) at the last activity
	timer    *time.Timer  // nil without an idle timeout
	busy     atomic.Bool  // fn is handling an event
	body     *streamBody  // the stream's body, once it answered
}

func newStreamWatch(idle time.Duration, cancel context.CancelCauseFunc) *streamWatch {
	w := &streamWatch{idle: idle, start: time.Now()}
	if idle > 0 {
		w.timer = time.AfterFunc(idle, func() {
			if w.busy.Load() {
				w.timer.Reset(w.idle) // a slow handler is not an idle stream
				return
			}
			if quiet := time.Since(w.start) - time.Duration(w.last.Load()); quiet < w.idle {
				w.timer.Reset(w.idle - quiet)
				return
			}
			cancel(ErrIdle)
		})
	}
	return w
}

// touch records activity now.
func (w *streamWatch) touch() {
	w.last.Store(int64(time.Since(w.start)))
}

func (w *streamWatch) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// watchTransport wraps every event stream's body: the size limit, then a
// streamBody that reports activity to w.
type watchTransport struct {
	base http.RoundTripper
	w    *streamWatch
}

func (t *watchTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	t.w.touch()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, nil
	}
	body := resp.Body
	if t.w.maxEvent > 0 {
		body = newEventLimiter(body, t.w.maxEvent, t.w.touch)
	}
	t.w.body = &streamBody{rc: body, touch: t.w.touch}
	resp.Body = t.w.body
	return resp, nil
}
