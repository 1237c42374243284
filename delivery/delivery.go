// Package delivery holds the one type hookline passes around for a webhook
// delivery: the relay client decodes a relay's message into a [Delivery],
// the proxy pipeline verifies, filters, dispatches and forwards it, and a
// capture file stores it. It imports only the standard library.
//
// A Delivery is the request a sender made (method, headers, query, exact
// body bytes) plus what hookline knows about how it arrived: when, from
// which relay format, and how faithful its body is ([BodySource]).
package delivery

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"time"

	"github.com/hookline/hookline/webhooks/provider"
)

// Delivery is one webhook delivery.
type Delivery struct {
	// ID is the delivery id: X-GitHub-Delivery, or X-Request-Id when that
	// is absent; empty when neither is present (see Identify).
	ID string
	// Event is the event name from X-GitHub-Event; empty when absent.
	Event string
	// Method is the HTTP method; empty means POST, the only one smee.io
	// relays.
	Method string
	// Headers are the request headers in canonical form, without a relay's
	// own fields. A relay message's names that are not valid header names
	// and values with control characters are left out.
	Headers http.Header
	// Query is the request's raw query string, without '?'.
	Query string
	// Body is the request body, and BodySource where its bytes came from.
	Body       []byte
	BodySource BodySource
	// ReceivedAt is when the delivery was first received: by the relay (its
	// message's "timestamp"), by hookline, or as a capture file recorded.
	// Zero when unknown.
	ReceivedAt time.Time

	// EventID is the relay's SSE event id for the delivery. It is durable
	// (unique in the channel, usable with Last-Event-ID) only on relays with
	// durable ids: hookline, gosmee with Redis. smee.io numbers events per
	// connection from 0.
	EventID string
	// Format is the relay message shape the delivery came in; empty when it
	// did not come from a relay.
	Format Format
	// Link is where to fetch the body of a delivery a hookline relay sent
	// by link (BodySource BodyLinked, Body nil until fetched): a URL
	// reference relative to the stream's URL.
	Link string
}

// NewID returns a new random delivery id in GitHub's shape: a version 4
// UUID, as in X-GitHub-Delivery.
func NewID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand.Read crashes the program instead)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Identify sets ID and Event from the headers when they are empty: ID is
// the sender's id (provider.DeliveryID: X-GitHub-Delivery, webhook-id,
// Stripe's event id...), else a proxy's X-Request-Id.
func (d *Delivery) Identify() {
	if d.ID == "" {
		d.ID = provider.DeliveryID(d.Headers, d.Body)
	}
	if d.ID == "" {
		d.ID = d.Headers.Get("X-Request-Id")
	}
	if d.Event == "" {
		d.Event = d.Headers.Get("X-Github-Event")
	}
}

// ContentType returns the Content-Type header.
func (d *Delivery) ContentType() string { return d.Headers.Get("Content-Type") }

// BodySource says where a delivery's body bytes came from, from the most to
// the least faithful. A relay source is the name of its message field.
type BodySource string

// The body sources.
const (
	// BodyBase64 is "bodyB": the exact bytes, base64-encoded by gosmee and
	// hookline. Signatures always verify.
	BodyBase64 BodySource = "bodyB"
	// BodyJSONExact is "body" with "bodyB": null: a hookline relay wrote a
	// JSON body's exact bytes once rather than in base64.
	BodyJSONExact BodySource = "body-exact"
	// BodyLinked is "bodyLink": a hookline relay sent a large body by link
	// and the client fetched its exact bytes.
	BodyLinked BodySource = "bodyLink"
	// BodyCapture is a capture file's body: the bytes that were saved.
	BodyCapture BodySource = "capture"
	// BodyEdited is a body edited by hand in the inspector and replayed,
	// its signature made again with the run's secret.
	BodyEdited BodySource = "edited"
	// BodyRaw is "rawdata": the exact body as a JSON string (some smee.io
	// versions). Signatures verify unless the body was not valid UTF-8.
	BodyRaw BodySource = "rawdata"
	// BodyJSON is "body": the JSON text of the body as the relay
	// re-serialised it (smee.io parses the body and writes it back with
	// JSON.stringify). hookline uses that text exactly as it appears in the
	// message, never re-encoding it, so a signature verifies when the
	// sender's JSON was already compact with no escapes that JSON.stringify
	// rewrites (GitHub's usually is); when it does not, this is why.
	BodyJSON BodySource = "body"
	// BodyText is "body" holding a JSON string for a request whose
	// Content-Type is not JSON (a text body parsed as a string): the body
	// is the string's UTF-8 bytes.
	BodyText BodySource = "body-text"
	// BodyNone means the message had no body field (or a null one): the
	// body is empty.
	BodyNone BodySource = ""
)

// Exact reports whether the body bytes are exactly those sent on (bodyB,
// hookline's exact "body", rawdata, a link, a capture file, an edit) rather
// than a relay's re-serialisation.
func (s BodySource) Exact() bool {
	return s == BodyBase64 || s == BodyJSONExact || s == BodyRaw || s == BodyLinked || s == BodyCapture || s == BodyEdited
}

// Format names a relay's message shape.
type Format string

// The relay formats hookline reads.
const (
	FormatSmee     Format = "smee"     // smee.io and smee-compatible servers
	FormatGosmee   Format = "gosmee"   // a gosmee server
	FormatHookline Format = "hookline" // hookline serve
)
