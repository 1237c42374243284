package relay

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/jsonscan"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/rest/header"
)

// maxHeaderBytes is the largest header block ingest accepts (see
// wire.MaxHeaderBytes), the host included.
const maxHeaderBytes = wire.MaxHeaderBytes

// entryOverhead is what one retained delivery costs beyond its bytes (the
// struct, slices, map entries), counted in the history limits so that many
// tiny deliveries are bounded too.
const entryOverhead = MinEntrySize

// MinEntrySize is the least an Entry's Size can be: what one retained
// delivery costs beyond its bytes, so that many tiny deliveries are bounded
// by the history limits too. A store reading a page of at most maxBytes
// needs no more than maxBytes/MinEntrySize+1 entries.
const MinEntrySize = 512

// Entry is one delivery of a channel as the relay keeps it: one POST (or a
// redelivery of one), its id in the channel, and its messages in each
// stream format, built once. It is immutable once stored, and shared by
// every subscriber and the history. A storage engine stores it as its
// Record (and RefRecord) and reads it back with DecodeEntry; the relay
// never sees how.
type Entry struct {
	id       int64 // set by publish
	received time.Time
	header   []wire.Header // sorted by name
	query    string        // the raw query string
	body     []byte
	size     int64 // what it counts against the history limits
	of       int64 // for a redelivery: the id of the first delivery of its content in the channel

	plain    *wire.Frame // its message for smee.io's subscribers
	hookline *wire.Frame // hookline's (bodyB in place of body), sharing the parts of the full smee.io frame
	// exact is hookline's for a JSON body in "body" (see
	// wire.StreamHeader), the full smee.io frame itself, when that holds
	// the body byte for byte; else nil.
	exact *wire.Frame

	// refs counts who holds the delivery: its history in memory (one,
	// taken by ledgerStore) and subscribers (subscriber.hold). Once no
	// history holds it, the delivery counts in Server.pinned while a
	// subscriber does.
	refs atomic.Int32
}

// NewEntry builds the entry of a request whose body has been read,
// received at now, as the relay does for a POST: the headers it relays
// (not hop-by-hop ones), the raw query, the exact body. Its ID is 0 until
// it is stored.
func NewEntry(r *http.Request, body []byte, now time.Time) *Entry {
	return makeDelivery(messageHeaders(r), r.URL.RawQuery, body, now)
}

// ID returns the entry's id in its channel (0 before it is stored).
func (d *Entry) ID() int64 { return d.id }

// Received returns when the delivery (or redelivery) was received.
func (d *Entry) Received() time.Time { return d.received }

// Body returns the exact body bytes; the caller must not change them.
func (d *Entry) Body() []byte { return d.body }

// Size returns what the entry counts against the history limits (Limits):
// its bytes, its messages and MinEntrySize.
func (d *Entry) Size() int64 { return d.size }

// Of returns, for a redelivery, the id of the first delivery of its
// content in the channel, and 0 otherwise. A store may keep a redelivery
// as a reference to that delivery's record (RefRecord), as this package's
// and redisstore do.
func (d *Entry) Of() int64 { return d.of }

// IdempotencyKey returns the delivery's Idempotency-Key header ("" if none).
func (d *Entry) IdempotencyKey() string { return headerValue(d.header, idempotencyHeader) }

// UniqueKey reports whether a shared store must not append the entry when
// another relay stored its IdempotencyKey since the relay looked it up
// (Append then returns a *KeyStoredError): every delivery but a
// redelivery, which repeats its original's key on purpose.
func (d *Entry) UniqueKey() bool { return d.of == 0 }

// Redelivery returns a new entry with d's headers, query and body, received
// at now, that repeats d (see Of), marked with wire.RedeliveryHeader.
func (d *Entry) Redelivery(now time.Time) *Entry {
	of := d.id
	if d.of != 0 {
		of = d.of
	}
	return redelivery(d.header, d.query, d.body, of, now)
}

// redelivery builds the entry of a redelivery of delivery of, whose
// headers (without the mark), query and body it repeats, received at now:
// the headers with wire.RedeliveryHeader set to of.
func redelivery(header []wire.Header, query string, body []byte, of int64, now time.Time) *Entry {
	nd := makeDelivery(mark(header, wire.RedeliveryHeader, strconv.FormatInt(of, 10)), query, body, now)
	nd.of = of
	return nd
}

// mark returns header (sorted by name) with the relay's own header name
// (wire.RelayHeader) set to value, in order.
func mark(header []wire.Header, name, value string) []wire.Header {
	name = strings.ToLower(name)
	marked := make([]wire.Header, 0, len(header)+1)
	for _, h := range header {
		if h.Name != name {
			marked = append(marked, h)
		}
	}
	marked = append(marked, wire.Header{Name: name, Value: value})
	slices.SortFunc(marked, func(a, b wire.Header) int { return strings.Compare(a.Name, b.Name) })
	return marked
}

// handshakeEntry returns the entry of a sender's handshake the relay answered
// (Server.answerHub, Server.ingest), received at now: its headers marked with
// wire.HandshakeHeader, its query without the hub's verify token (the
// channel's own), body.
func handshakeEntry(r *http.Request, body []byte, now time.Time) *Entry {
	q := r.URL.Query()
	q.Del("hub.verify_token")
	return makeDelivery(mark(messageHeaders(r), wire.HandshakeHeader, "answered"), q.Encode(), body, now)
}

func makeDelivery(header []wire.Header, query string, body []byte, now time.Time) *Entry {
	d := &Entry{received: now, header: header, query: query, body: body}
	contentType := ""
	for _, h := range header {
		d.size += int64(len(h.Name) + len(h.Value))
		if h.Name == "content-type" {
			contentType = h.Value
		}
	}
	q, _ := url.ParseQuery(query) // keeps the pairs that parse
	m := wire.Message{Header: header, Body: bodyValue(contentType, body), Query: wire.AppendQuery(nil, q), Timestamp: now}
	full := wire.NewFrame(m)
	d.plain = full
	d.hookline = full.Hookline(body)
	if wire.CarriesExactly(m.Body, body) {
		d.exact = full.ExactJSON()
	}
	if slices.ContainsFunc(header, unsafeForSmee) {
		m.Header = slices.DeleteFunc(slices.Clone(header), unsafeForSmee)
		d.plain = wire.NewFrame(m)
		d.size += int64(d.plain.Overhead())
	}
	// The size counts everything the delivery holds: its fields, its
	// frames (the body is written from d.body, bodyB encoded as it is
	// written), and the "body" JSON when it is not d.body itself.
	d.size += int64(len(body)+len(query)+full.Overhead()) + entryOverhead
	if !sameBytes(m.Body, body) {
		d.size += int64(cap(m.Body))
	}
	return d
}

// sameBytes reports whether a and b are the same memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// notUTF8Header returns the name of the first header of h whose value is
// not valid UTF-8, or "". Such a value cannot cross the stream as it is:
// every stream format carries header values as JSON strings, which would
// replace each invalid byte with U+FFFD, so the relay refuses it (400)
// rather than change it silently.
func notUTF8Header(h http.Header) string {
	for name, vs := range h {
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return name
			}
		}
	}
	return ""
}

// headerBytes returns the size of r's header block as maxHeaderBytes counts it.
func headerBytes(r *http.Request) int {
	n := len(r.Host) + len("host: \r\n")
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// messageHeaders returns r's headers as message keys: lowercase names, the
// host added, hop-by-hop headers (and those Connection names) and reserved
// names removed, repeated fields joined with ", " ("; " for cookie), sorted
// by name.
func messageHeaders(r *http.Request) []wire.Header {
	drop := map[string]bool{}
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if tok = strings.ToLower(strings.TrimSpace(tok)); tok != "" {
				drop[tok] = true
			}
		}
	}
	fields := make([]wire.Header, 0, len(r.Header)+1)
	if r.Host != "" {
		fields = append(fields, wire.Header{Name: "host", Value: r.Host})
	}
	for k, vs := range r.Header {
		name := strings.ToLower(k)
		if httpx.IsHopByHop(name) || wire.Reserved(name) || drop[name] || name == "host" || !header.IsToken(name) ||
			wire.RelayHeader(name) { // the relay's own marks (Entry.Redelivery, a handshake)
			continue
		}
		sep := ", "
		if name == "cookie" {
			sep = "; "
		}
		fields = append(fields, wire.Header{Name: name, Value: strings.Join(vs, sep)})
	}
	slices.SortFunc(fields, func(a, b wire.Header) int { return strings.Compare(a.Name, b.Name) })
	return fields
}

// unsafeForSmee reports whether smee-client cannot forward the header: it
// passes sec-fetch-mode to fetch as the request mode, which throws for
// anything but cors, no-cors and same-origin (a browser form sends
// "navigate"). Such a header is left out of smee-shaped messages.
func unsafeForSmee(h wire.Header) bool {
	if h.Name != "sec-fetch-mode" {
		return false
	}
	switch h.Value {
	case "cors", "no-cors", "same-origin":
		return false
	}
	return true
}

// bodyValue returns the JSON for a message's "body" key, as smee.io's
// Express body parsers produce it: a JSON body (application/json or any
// +json type) as sent, compacted when it has line breaks (smee.io writes
// it with JSON.stringify, compact too; every line break would otherwise
// become a new "data:" line, a pretty-printed 20 MiB body a 60 MiB event),
// a form body as url.ParseQuery reads it (wire.AppendQuery; smee.io nests
// qs-style keys, see docs/RELAY.md), anything else (and JSON that does not
// parse) an empty object. bodyB keeps the exact bytes.
func bodyValue(contentType string, body []byte) []byte {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return []byte("{}")
	}
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		if !jsonscan.Valid(body) { // encoding/json's verdict, several times faster
			break
		}
		if wire.IndexLineBreak(body) < 0 {
			return body // GitHub's bodies are compact: no copy
		}
		var compact bytes.Buffer
		compact.Grow(len(body))
		if json.Compact(&compact, body) == nil {
			return compact.Bytes()
		}
	case mt == "application/x-www-form-urlencoded":
		form, _ := url.ParseQuery(string(body)) // keeps the pairs that parse
		return wire.AppendQuery(nil, form)
	}
	return []byte("{}")
}

// frame returns d's message for a subscriber of format. A gosmee one is
// encoded for each write (its headers and timestamp; bodyB is encoded as it
// is written), so that deliveries hold no frame of their own for it.
func (d *Entry) frame(format streamFormat) *wire.Frame {
	switch format {
	case formatHookline:
		if d.exact != nil {
			return d.exact
		}
		return d.hookline
	case formatGosmee:
		header := d.header
		if i := slices.IndexFunc(header, func(h wire.Header) bool { return h.Name == "host" }); i >= 0 {
			// gosmee's server sends the request's headers, which in Go
			// hold no Host.
			header = slices.Delete(slices.Clone(header), i, i+1)
		}
		return wire.NewGosmeeFrame(wire.Message{Header: header, Timestamp: d.received, BodyB: d.body})
	}
	return d.plain
}
