package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hookline/hookline/webhooks"

	"github.com/hookline/hookline/internal/wire"
)

// ErrMalformedMessage is wrapped by Decode's error for an event that should
// carry a delivery but cannot be read as one: data that is not a JSON
// object, an object without headers, a body field of the wrong type, or
// invalid base64 in "bodyB".
var ErrMalformedMessage = errors.New("malformed relay message")

// Kind says what a relay message is.
type Kind int

// The kinds of relay message.
const (
	// KindDelivery is a relayed webhook delivery; Message.Delivery is set.
	KindDelivery Kind = iota + 1
	// KindControl is a message about the connection (ready, ping,
	// connected, or an event name the client does not know): nothing to
	// deliver. Message.Name says which.
	KindControl
	// KindGap is a relay's warning that deliveries were lost before this
	// point (gosmee's event "gosmee-gap", hookline's "hookline-gap");
	// Message.Gap says what it reported.
	KindGap
)

// String returns the kind's name in lower case.
func (k Kind) String() string {
	switch k {
	case KindDelivery:
		return "delivery"
	case KindControl:
		return "control"
	case KindGap:
		return "gap"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Message is one decoded relay event.
type Message struct {
	// Kind says which of the other fields are set.
	Kind Kind
	// Name is the control message's name ("ready", "ping", "connected", or
	// the unknown event's name) or the gap event's name; empty for a
	// delivery.
	Name string
	// Delivery is the delivery, for KindDelivery; nil otherwise.
	Delivery *Delivery
	// Gap is what a gap event reported, for KindGap; nil otherwise.
	Gap *Gap
}

// Gap is what a gosmee server reports when a reconnecting client's
// Last-Event-ID is older than the history it keeps: the deliveries between
// RequestedID and OldestID are lost. Both are empty when the event's data
// could not be read.
type Gap struct {
	RequestedID string // the Last-Event-ID the client sent
	OldestID    string // the oldest event the relay still has
	// Reason is a hookline relay's: "expired" (its limits dropped them),
	// "lost" (its Redis lost its data), or "unknown" (it never had the id
	// asked for: it restarted with a new history, in memory).
	Reason string
}

// BodySource says which field of the relay message the body bytes came
// from, from the most to the least faithful.
type BodySource string

// The body sources.
const (
	// BodyBase64 is "bodyB": the exact bytes, base64-encoded by gosmee and
	// hookline. Signatures always verify.
	BodyBase64 BodySource = wire.SourceBodyB
	// BodyRaw is "rawdata": the exact body as a JSON string (some smee.io
	// versions). Signatures verify unless the body was not valid UTF-8.
	BodyRaw BodySource = wire.SourceRawData
	// BodyJSON is "body": the JSON text of the body as the relay
	// re-serialised it (smee.io parses the body and writes it back with
	// JSON.stringify). hookline uses that text exactly as it appears in the
	// message, never re-encoding it, so a signature verifies when the
	// sender's JSON was already compact with no escapes that JSON.stringify
	// rewrites (GitHub's usually is); when it does not, this is why.
	BodyJSON BodySource = wire.SourceBody
	// BodyText is "body" holding a JSON string for a request whose
	// Content-Type is not JSON (a text body parsed as a string): the body
	// is the string's UTF-8 bytes.
	BodyText BodySource = wire.SourceText
	// BodyNone means the message had no body field (or a null one): the
	// body is empty.
	BodyNone BodySource = wire.SourceNone
	// BodyLinked is "bodyLink": hookline's relay sent a large body by link
	// (to a Client, which asks for it) and the Client fetched its exact
	// bytes. A Delivery from Decode has no Body yet.
	BodyLinked BodySource = wire.SourceLink
)

// Exact reports whether the body bytes are the sender's bytes (bodyB,
// rawdata, a link, a capture file) rather than a relay's re-serialisation.
func (s BodySource) Exact() bool {
	return s == BodyBase64 || s == BodyRaw || s == BodyLinked || s == BodyCapture
}

// Delivery is a webhook delivery as a relay passed it on.
type Delivery struct {
	// EventID is the SSE event id the delivery came with. It is durable
	// (unique in the channel, usable with Last-Event-ID) only on relays with
	// durable ids: hookline, gosmee with Redis. smee.io numbers events per
	// connection from 0.
	EventID string
	// Format is the relay format recognised: FormatGosmee when the message
	// has "bodyB" but none of smee's "body" and "query" fields (or a string
	// timestamp), FormatHookline when it has "bodyB" and smee's fields,
	// FormatSmee otherwise.
	Format Format

	// ID is the delivery id: X-GitHub-Delivery, or X-Request-Id when that
	// is absent; empty when neither is present.
	ID string
	// Event is the event name from X-GitHub-Event; empty when absent.
	Event string
	// Signature is X-Hub-Signature-256, or, when that is absent,
	// X-Hub-Signature (an HMAC-SHA1 from a legacy server), in which case
	// SignatureSHA1 is true and the caller should warn.
	Signature     string
	SignatureSHA1 bool

	// Method is the HTTP method when the relay recorded one ("method"
	// field); empty means POST, the only method smee.io and gosmee relay.
	Method string
	// ContentType is the Content-Type header, if any.
	ContentType string
	// Headers are the original request headers in canonical form, without
	// the relay's own fields (body, bodyB, rawdata, query, timestamp,
	// method). Names that are not valid header names and values with
	// control characters are left out.
	Headers http.Header
	// Query is the original request's query ("query" field), nil if none.
	Query url.Values
	// Body is the request body, and BodySource the field it came from.
	Body       []byte
	BodySource BodySource
	// Timestamp is when the relay received the delivery ("timestamp", in
	// milliseconds since the epoch as a number or a string); zero when the
	// message has none or it is not a number.
	Timestamp time.Time

	link string // "bodyLink" (BodyLinked), until Client fetches the body
}

// Decode reads one relay event. Control events (smee's "ready" and "ping",
// gosmee's {"message":"connected"} and {"message":"ready"}, any event name
// other than "message") come back as KindControl and gosmee's "gosmee-gap"
// as KindGap, never as errors. Everything else must be a delivery; when it
// cannot be read as one the error wraps ErrMalformedMessage. Decode never
// panics and is safe for concurrent use. The Delivery's Body may share
// memory with ev.Data (it is not copied: "bodyB" is decoded over its own
// base64 text, which changes ev.Data), so ev.Data must be the caller's and
// must not be modified while the Delivery is in use.
func Decode(ev SSEEvent) (Message, error) {
	switch ev.Event {
	case "", "message":
	case wire.EventGosmeeGap:
		var g struct {
			RequestedID string `json:"requested_id"`
			OldestID    string `json:"oldest_id"`
		}
		_ = json.Unmarshal(ev.Data, &g) // best effort: the warning matters, not its details
		return Message{Kind: KindGap, Name: ev.Event, Gap: &Gap{RequestedID: g.RequestedID, OldestID: g.OldestID}}, nil
	case wire.EventGap:
		gap := &Gap{}
		if g, ok := wire.DecodeGap(ev.Data); ok {
			gap = &Gap{RequestedID: g.LastEventID, OldestID: strconv.FormatInt(g.To+1, 10), Reason: g.Reason}
		}
		return Message{Kind: KindGap, Name: ev.Event, Gap: gap}, nil
	case oversizeEvent:
		return Message{}, oversizeError(ev)
	default:
		// smee.io's and hookline's "ready" and "ping", and names this
		// client does not know: EventSource clients ignore those too.
		return Message{Kind: KindControl, Name: ev.Event}, nil
	}
	wd, name, err := wire.Decode(ev.Data)
	switch {
	case err != nil:
		if ev.ID != "" {
			return Message{}, fmt.Errorf("%w (event id %q): %v", ErrMalformedMessage, ev.ID, err)
		}
		return Message{}, fmt.Errorf("%w: %v", ErrMalformedMessage, err)
	case wd == nil:
		return Message{Kind: KindControl, Name: name}, nil
	}
	d := &Delivery{
		EventID: ev.ID, Format: Format(wd.Format), Method: wd.Method,
		ContentType: wd.Header.Get("Content-Type"), Headers: wd.Header, Query: wd.Query,
		Body: wd.Body, BodySource: BodySource(wd.BodySource), Timestamp: wd.Timestamp,
		link: wd.Link,
	}
	d.identify()
	return Message{Kind: KindDelivery, Delivery: d}, nil
}

// identify sets ID, Event and Signature from the headers.
func (d *Delivery) identify() {
	if d.ID == "" {
		d.ID = d.Headers.Get("X-Github-Delivery")
	}
	if d.ID == "" {
		d.ID = d.Headers.Get("X-Request-Id")
	}
	if d.Event == "" {
		d.Event = d.Headers.Get("X-Github-Event")
	}
	if d.Signature = d.Headers.Get(webhooks.HeaderSignature256); d.Signature == "" {
		if d.Signature = d.Headers.Get(webhooks.HeaderSignature); d.Signature != "" {
			d.SignatureSHA1 = true
		}
	}
}

// isControlEvent reports whether ev is certainly not a delivery, cheaply:
// the stream loop uses it for every event.
func isControlEvent(ev SSEEvent) bool {
	if ev.Event == oversizeEvent {
		return false // a delivery's slot: its id is the delivery's
	}
	if ev.Event != "" && ev.Event != "message" {
		return true
	}
	_, ok := wire.IsControl(ev.Data)
	return ok
}
