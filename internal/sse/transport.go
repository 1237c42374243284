package sse

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/wire"
)

// Event is one Server-Sent Event as received from a relay.
type Event struct {
	// ID is the event's last event ID: the value of its "id:" field, or, as
	// the SSE specification says, the most recent one set earlier on the same
	// connection. Empty when the server sent none.
	ID string
	// Event is the event name ("event:" field); empty for unnamed events,
	// which EventSource calls "message".
	Event string
	// Data is the event's data: its "data:" lines joined with "\n". The
	// receiver owns it.
	Data []byte

	// Set by Subscribe (the loop), not by a Transport: what the event is
	// (wire.Classify; an OversizeEvent counts as a delivery, whose slot it
	// takes), and whether the relay's ids are durable as far as the loop
	// knows after this event (see Resume): only then may an id be stored
	// or compared across connections.
	Kind    wire.Kind
	Durable bool
}

// Request describes one connection attempt to a relay's stream.
type Request struct {
	// URL is the stream URL (see StreamURL).
	URL string
	// LastEventID, when not empty, is sent as the Last-Event-ID header so a
	// relay with durable ids resumes after it.
	LastEventID string
	// Header holds extra request headers (for example Authorization for a
	// private relay). Accept and Last-Event-ID are always set by the
	// transport and cannot be overridden here.
	Header http.Header
	// OnOpen, if not nil, is called once the relay has answered with a
	// 2xx event stream, before the first event, on the goroutine that
	// calls the event callback.
	OnOpen func()
}

// Transport opens SSE connections. Each Subscribe call is exactly one
// connection attempt and never retries on its own: reconnecting is the job
// of the caller (see Subscribe, the package function).
//
// Subscribe calls fn for each event, sequentially, on the calling goroutine,
// and returns when the stream ends:
//   - with ctx.Err() as soon as ctx is done;
//   - with an error wrapping io.EOF when the relay closed the stream cleanly;
//   - with an error wrapping io.ErrUnexpectedEOF when it closed it in the
//     middle of an event (that partial event is not passed to fn);
//   - with an error wrapping ErrIdle when nothing arrived for the idle timeout;
//   - with an error wrapping ErrPermanent when retrying cannot help (a 4xx
//     other than 408 and 429, a response that is not an event stream);
//   - with another error (network failure, 5xx: see *StatusError) otherwise.
//
// Every error but ctx.Err() names the URL with credentials redacted.
type Transport interface {
	Subscribe(ctx context.Context, req Request, fn func(Event)) error
}

var (
	// ErrPermanent is wrapped by errors that reconnecting cannot fix, such
	// as a relay answering 404 for an unknown channel. Subscribe (the loop)
	// stops on them.
	ErrPermanent = errors.New("permanent relay error")

	// ErrIdle is wrapped by the error of a connection that received no byte
	// (not even a keepalive comment) for the idle timeout. It is retryable.
	ErrIdle = errors.New("relay stream idle")

	// ErrNotEventStream is wrapped by the error of a 2xx response whose
	// Content-Type is not text/event-stream, typically the HTML page that a
	// gosmee server shows at the channel URL. It wraps ErrPermanent too.
	ErrNotEventStream = fmt.Errorf("%w: response is not an event stream", ErrPermanent)
)

// StatusError is the error for a relay that answered a connection attempt
// with a non-2xx status. It wraps ErrPermanent for 4xx statuses other than
// 408 and 429.
type StatusError struct {
	// StatusCode is the HTTP status the relay answered.
	StatusCode int
	// URL is the stream URL with credentials redacted.
	URL string
	// Message is a short excerpt of the response body, if it had text.
	Message string
	// RetryAfter is the delay the relay asked for in Retry-After, if any.
	RetryAfter time.Duration
}

// Permanent reports whether retrying the same request cannot succeed.
func (e *StatusError) Permanent() bool {
	return e.StatusCode >= 400 && e.StatusCode < 500 &&
		e.StatusCode != http.StatusRequestTimeout && e.StatusCode != http.StatusTooManyRequests
}

// Error says what the relay answered, for which URL, and what to check.
func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "relay answered %d %s for %s", e.StatusCode, http.StatusText(e.StatusCode), e.URL)
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	switch {
	case e.StatusCode == http.StatusNotFound || e.StatusCode == http.StatusGone:
		b.WriteString("; check the channel URL")
	case (e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden) && e.Message != "":
		// The relay said what it wants (hookline's names the read
		// token and where forward keeps it): said once, not twice.
	case e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden:
		b.WriteString("; check the channel URL and its read token (a private channel's: hookline forward --new --private keeps it in its state directory; elsewhere set HOOKLINE_CHANNEL_TOKEN or add ?token= to the URL)")
	case e.StatusCode == http.StatusBadRequest:
		b.WriteString("; check the channel URL (a gosmee server streams from /events/<channel>)")
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrPermanent) true for permanent statuses.
func (e *StatusError) Unwrap() error {
	if e.Permanent() {
		return ErrPermanent
	}
	return nil
}

// StreamURL returns the URL to subscribe to for the channel URL that users
// paste (the one webhooks are POSTed to).
//
// smee.io and hookline stream at the channel URL itself; it is returned with
// a trailing slash removed (as smee-client does). A gosmee server streams at
// <scheme>://<host>/events/<channel>; a URL already in that form is returned
// unchanged. An empty format means the channel URL itself; Subscribe also
// switches to the gosmee form by itself when the channel URL answers with a
// page instead of an event stream.
//
// The URL must be absolute http or https with a host and a channel path.
func StreamURL(channelURL string, f delivery.Format) (string, error) {
	u, err := parseChannelURL(channelURL)
	if err != nil {
		return "", err
	}
	switch f {
	case "", delivery.FormatSmee, delivery.FormatHookline:
		return u.String(), nil
	case delivery.FormatGosmee:
		if !strings.HasPrefix(u.Path, "/events/") {
			u.Path = "/events" + u.Path
			u.RawPath = ""
		}
		return u.String(), nil
	default:
		return "", fmt.Errorf("unknown relay format %q (want %s, %s or %s)", f, delivery.FormatSmee, delivery.FormatGosmee, delivery.FormatHookline)
	}
}

// parseChannelURL validates a channel URL and trims a trailing slash.
func parseChannelURL(s string) (*url.URL, error) {
	u, err := httpx.ParseHTTPURL(s)
	if err != nil {
		return nil, fmt.Errorf("channel URL %v", err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	if u.Path == "" {
		return nil, fmt.Errorf("channel URL %q has no channel (GET /new on a relay makes one)", httpx.RedactURL(s))
	}
	u.Fragment = ""
	return u, nil
}

// attempt is what both SSE transports set up for one connection attempt.
type attempt struct {
	ctx     context.Context // the attempt's context; the idle watch cancels it with ErrIdle
	cancel  context.CancelCauseFunc
	watch   *streamWatch
	shown   string        // the stream URL with credentials redacted, for messages
	maxSize int           // the effective MaxEventSize
	idle    time.Duration // the effective IdleTimeout
}

// beginAttempt checks ctx and req.URL and sets up one attempt with the
// effective limits (zero means DefaultMaxEventSize and DefaultIdleTimeout).
// The caller must call end when the attempt is over.
func beginAttempt(ctx context.Context, req Request, maxEventSize int, idleTimeout time.Duration) (*attempt, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	shown := httpx.RedactURL(req.URL)
	if u, err := url.Parse(req.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: stream URL %q is not an absolute http or https URL", ErrPermanent, shown)
	}
	if maxEventSize <= 0 {
		maxEventSize = DefaultMaxEventSize
	}
	if idleTimeout == 0 {
		idleTimeout = DefaultIdleTimeout
	}
	actx, cancel := context.WithCancelCause(ctx)
	return &attempt{ctx: actx, cancel: cancel, watch: newStreamWatch(idleTimeout, cancel), shown: shown, maxSize: maxEventSize, idle: idleTimeout}, nil
}

// end stops the idle watch and releases the attempt's context.
func (a *attempt) end() {
	a.watch.stop()
	a.cancel(nil)
}
