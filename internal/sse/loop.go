package sse

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/rest/backoff"
	"github.com/hookline/hookline/rest/header"
)

// Defaults for Options.
const (
	// DefaultMinBackoff is the first wait after a failed attempt.
	DefaultMinBackoff = 250 * time.Millisecond
	// DefaultMaxBackoff caps the wait between attempts.
	DefaultMaxBackoff = 30 * time.Second
	// DefaultStableAfter is how long a connection must last to count as
	// good when it delivered nothing.
	DefaultStableAfter = 10 * time.Second
)

// maxRetryAfter bounds how long a relay's Retry-After can hold the loop.
const maxRetryAfter = 10 * time.Minute

// Resume says when Subscribe sends Last-Event-ID on a reconnect.
type Resume int

// The resume modes.
const (
	// ResumeAuto sends Last-Event-ID once the relay's ids look durable: a
	// delivery came with an id, and no control event (ready, ping, …) ever
	// set a new one. smee.io numbers every event of a connection from 0,
	// ready included, so its ids are never sent back; gosmee with Redis
	// and hookline number only deliveries, so theirs are.
	ResumeAuto Resume = iota
	// ResumeAlways sends the last id seen, whatever the relay.
	ResumeAlways
	// ResumeNever never sends Last-Event-ID (Options.LastEventID
	// included).
	ResumeNever
)

// State is the state of a relay subscription.
type State int

// The subscription states, in the order a connection goes through them.
const (
	StateConnecting   State = iota + 1 // an attempt has started
	StateConnected                     // the relay answered with an event stream
	StateDisconnected                  // the attempt ended; the loop retries after RetryIn
	StateStopped                       // the loop returned; Err says why
	// StateReady follows StateConnected on a hookline relay, whose ready
	// event names its last id (RelayLast). On a resumed connection
	// (LastEventID set) Pending is how many deliveries it holds after
	// LastEventID, the ones kept while the client was away. Other relays
	// do not say; the state stays Connected.
	StateReady
)

// String returns the state's name in lower case, as a trace shows it.
func (s State) String() string {
	switch s {
	case StateConnecting:
		return "connecting"
	case StateConnected:
		return "connected"
	case StateDisconnected:
		return "disconnected"
	case StateStopped:
		return "stopped"
	case StateReady:
		return "ready"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// StateChange reports one change of a subscription's state.
type StateChange struct {
	// State is the new state.
	State State
	// URL is the stream URL, credentials redacted.
	URL string
	// Attempt counts connection attempts since the last good connection,
	// from 1.
	Attempt int
	// LastEventID is the Last-Event-ID sent (Connecting), if any.
	LastEventID string
	// Err is why the connection ended (Disconnected) or the loop returned
	// (Stopped).
	Err error
	// RetryIn is the wait before the next attempt (Disconnected).
	RetryIn time.Duration
	// Pending is how many deliveries the relay holds after LastEventID
	// (Ready).
	Pending int64
	// RelayLast is the id of the newest delivery the relay has numbered
	// on the channel, from its ready event (Ready); 0: the channel has
	// never had one. On a first connection (no LastEventID) the loop
	// resumes after it from then on.
	RelayLast int64
}

// readyEvent decodes a hookline relay's ready event; ok is false for any
// other event, and for smee.io's ready, which names no id.
func readyEvent(ev Event) (wire.Ready, bool) {
	if ev.Event != wire.EventReady {
		return wire.Ready{}, false
	}
	return wire.DecodeReady(ev.Data)
}

// Options configures Subscribe.
type Options struct {
	// URL is the stream URL (see StreamURL). Required.
	URL string
	// Header holds extra request headers sent with every attempt.
	Header http.Header
	// LastEventID, if not empty, is sent on the first attempt, to resume
	// after an id saved by an earlier run; ids are then taken as durable.
	LastEventID string
	// Resume says when to send Last-Event-ID on reconnects. The zero value
	// is ResumeAuto.
	Resume Resume

	// MinBackoff and MaxBackoff bound the wait between attempts: the n-th
	// consecutive failure waits a random duration up to
	// min(MaxBackoff, MinBackoff·2ⁿ) ("full jitter"). If zero,
	// DefaultMinBackoff and DefaultMaxBackoff. A relay's Retry-After on a
	// 429 or 503 is honoured when longer (up to 10 minutes).
	MinBackoff, MaxBackoff time.Duration
	// StableAfter is how long a connection must stay up to count as good
	// when it delivered nothing; a good connection resets the backoff. A
	// connection that delivered a non-control event is good at once. If
	// zero, DefaultStableAfter.
	StableAfter time.Duration

	// OnState, if not nil, is called on every state change, synchronously
	// from Subscribe's goroutine.
	OnState func(StateChange)

	// Sleep and Jitter are how the loop waits and draws its jitter; nil
	// means backoff.Sleep and backoff.Jitter. Tests replace them so as not
	// to wait.
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func(max time.Duration) time.Duration
}

// Subscribe follows a relay stream until ctx ends: it opens a connection
// with t (nil means &HTTPTransport{}), passes every event to fn, and
// reconnects forever after EOF, network errors, idle streams and non-2xx
// answers, waiting a jittered exponential backoff between attempts (reset
// after a good connection). It tracks the last event id and sends it as
// Last-Event-ID when the relay's ids are durable (see Resume).
//
// fn gets each event with Kind and Durable set. It is called sequentially
// on Subscribe's goroutine; while it runs, no further event is read (and
// the idle clock is paused). When fn returns an error, the event is not
// taken: the connection ends (a failed attempt, with its backoff) and the
// next one resumes before the event (Last-Event-ID is the id before it),
// so that the relay sends it again.
//
// Subscribe returns ctx.Err() when ctx is done, promptly, even during a
// backoff wait. It returns early only for an error wrapping ErrPermanent (a
// 4xx other than 408 and 429, an invalid URL, a response that is not an
// event stream), after two remedies: if the first such answer came while
// Last-Event-ID was sent, it retries once without it (gosmee answers 400 to
// an id it does not know); if the URL answered with something that is not
// an event stream, it retries once at the gosmee stream URL (see StreamURL).
func Subscribe(ctx context.Context, t Transport, opts Options, fn func(Event) error) error {
	if t == nil {
		t = &HTTPTransport{}
	}
	l := loop{opts: opts, fn: fn, t: t}
	l.setDefaults()
	return l.run(ctx)
}

// durability is what the loop has learned about the relay's event ids.
type durability int

const (
	idsUnknown durability = iota
	idsDurable
	idsPerConnection
)

type loop struct {
	opts Options
	fn   func(Event) error
	t    Transport

	url      string
	lastID   string
	ids      durability
	failures int // consecutive attempts that were not good
}

func (l *loop) setDefaults() {
	o := &l.opts
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.StableAfter <= 0 {
		o.StableAfter = DefaultStableAfter
	}
	if o.Sleep == nil {
		o.Sleep = backoff.Sleep
	}
	if o.Jitter == nil {
		o.Jitter = backoff.Jitter
	}
	l.url = o.URL
	if o.LastEventID != "" && UsableEventID(o.LastEventID) {
		l.lastID, l.ids = o.LastEventID, idsDurable
	}
}

func (l *loop) notify(c StateChange) {
	if l.opts.OnState != nil {
		c.URL = httpx.RedactURL(l.url)
		l.opts.OnState(c)
	}
}

func (l *loop) stop(err error) error {
	l.notify(StateChange{State: StateStopped, Attempt: l.failures + 1, Err: err})
	return err
}

func (l *loop) run(ctx context.Context) error {
	triedGosmee, droppedID := false, false
	for {
		if err := ctx.Err(); err != nil {
			return l.stop(err)
		}
		sent := l.resumeID()
		attempt := l.failures + 1
		l.notify(StateChange{State: StateConnecting, Attempt: attempt, LastEventID: sent})

		var opened time.Time
		good := false
		prevID := "" // the id in force on this connection
		req := Request{URL: l.url, LastEventID: sent, Header: l.opts.Header, OnOpen: func() {
			opened = time.Now()
			l.notify(StateChange{State: StateConnected, Attempt: attempt, LastEventID: sent})
		}}
		// The attempt's own context: fn refusing an event ends the
		// attempt, and the next resumes before that event.
		actx, cancel := context.WithCancelCause(ctx)
		var refused error
		err := l.t.Subscribe(actx, req, func(ev Event) {
			if refused != nil {
				return // the transport may hand over one more event
			}
			if !UsableEventID(ev.ID) {
				// It could not be sent back as Last-Event-ID (net/http
				// refuses such a header, so every reconnect would fail):
				// the event has no usable id.
				ev.ID = ""
			}
			ev.Kind = Classify(ev)
			control := ev.Kind != wire.KindDelivery
			if ev.ID != "" && ev.ID != prevID { // this event set a new id
				switch {
				case control:
					l.ids = idsPerConnection
				case l.ids == idsUnknown:
					l.ids = idsDurable
				}
			}
			prevID = ev.ID
			if r, ok := readyEvent(ev); ok && control {
				if sent != "" {
					// Resumed: what the relay holds past the id sent is
					// what arrived while the client was away.
					if n, err := strconv.ParseInt(sent, 10, 64); err == nil && r.Last >= n {
						l.notify(StateChange{State: StateReady, Attempt: attempt, LastEventID: sent, Pending: r.Last - n, RelayLast: r.Last})
					}
				} else if ev.ID == "" && l.lastID == "" {
					// hookline's relay names the channel's last id: with
					// none of its own, the client resumes after it, so
					// deliveries sent before the first one arrives survive
					// a reconnect.
					l.lastID, l.ids = strconv.FormatInt(r.Last, 10), idsDurable
					l.notify(StateChange{State: StateReady, Attempt: attempt, RelayLast: r.Last})
				}
			}
			ev.Durable = l.durable()
			if err := l.fn(ev); err != nil {
				refused = fmt.Errorf("event %q not taken, reconnecting to have it again: %w", ev.ID, err)
				cancel(refused)
				return
			}
			if ev.ID != "" {
				l.lastID = ev.ID
			}
			if !control {
				good = true // a delivery taken: the connection is good
			}
		})
		cancel(nil)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return l.stop(ctxErr)
		}
		if refused != nil {
			err = refused
		}
		if err == nil { // a Transport that reports a clean end as nil
			err = errors.New("relay closed the stream")
		}
		if good || (!opened.IsZero() && time.Since(opened) >= l.opts.StableAfter) {
			l.failures = 0
		}

		if errors.Is(err, ErrPermanent) {
			if errors.Is(err, ErrNotEventStream) && !triedGosmee {
				// A gosmee channel URL serves a page; its stream is at
				// /events/<channel>. Probing is not a failure, and the id
				// to resume from goes along.
				triedGosmee = true
				if gs, gerr := StreamURL(l.url, delivery.FormatGosmee); gerr == nil && gs != l.url {
					l.url = gs
					continue
				}
			}
			if sent != "" && !droppedID {
				// The relay may reject an id it does not know (a stale one,
				// or one from another server; gosmee answers 400 to one it
				// cannot parse); try once without it.
				droppedID = true
				l.lastID, l.ids = "", idsUnknown
				l.notify(StateChange{State: StateDisconnected, Attempt: attempt, Err: err})
				continue
			}
			return l.stop(err)
		}

		delay := l.backoff()
		var se *StatusError
		if errors.As(err, &se) && se.RetryAfter > delay {
			delay = min(se.RetryAfter, maxRetryAfter)
		}
		l.failures++
		// Attempts since the last good connection, this one included: 1
		// when a good one has just ended, whatever failed before it.
		l.notify(StateChange{State: StateDisconnected, Attempt: l.failures, Err: err, RetryIn: delay})
		if err := l.opts.Sleep(ctx, delay); err != nil || ctx.Err() != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return l.stop(err)
		}
	}
}

// MaxEventIDLen bounds the event ids the loop keeps and sends back. Relays'
// ids are short (hookline's are decimal integers, gosmee's Redis stream ids
// such as "1700000000000-0").
const MaxEventIDLen = 256

// UsableEventID reports whether id can be sent back as Last-Event-ID: at
// most MaxEventIDLen bytes, with no control characters (the SSE
// specification ignores an id holding NUL; net/http refuses to send the
// others).
func UsableEventID(id string) bool {
	return len(id) <= MaxEventIDLen && header.IsValue(id)
}

// durable reports whether the relay's ids may be sent back, stored and
// compared across connections, under the Resume rule.
func (l *loop) durable() bool {
	switch l.opts.Resume {
	case ResumeAlways:
		return true
	case ResumeNever:
		return false
	}
	return l.ids == idsDurable
}

// resumeID returns the Last-Event-ID to send on the next attempt.
func (l *loop) resumeID() string {
	if l.durable() {
		return l.lastID
	}
	return ""
}

// backoff returns the wait after l.failures consecutive failures.
func (l *loop) backoff() time.Duration {
	ceiling := backoff.Ceiling(l.opts.MinBackoff, l.opts.MaxBackoff, l.failures)
	d := l.opts.Jitter(ceiling)
	return max(0, min(d, ceiling))
}

// Classify says what ev is: wire.Classify, except that an OversizeEvent
// takes the slot of the delivery it stands for. Subscribe sets Event.Kind
// with it; nothing else classifies events.
func Classify(ev Event) wire.Kind {
	if ev.Event == OversizeEvent {
		return wire.KindDelivery
	}
	return wire.Classify(ev.Event, ev.Data)
}
