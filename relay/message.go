package relay

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

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
const entryOverhead = 512

// delivery is one POST to a channel. It is immutable once published and
// shared by every subscriber and the history.
type delivery struct {
	id       int64 // set by publish
	received time.Time
	header   []wire.Header // sorted by name
	query    string        // the raw query string
	body     []byte
	size     int64 // what it counts against the history limits
	of       int64 // for a redelivery: the id of the first delivery of its content in the channel
	// uniqueKey, set by publish before the append, asks a shared store not
	// to append when another relay stored the Idempotency-Key meanwhile.
	uniqueKey bool

	plain    *wire.Frame // its message for smee.io's subscribers
	hookline *wire.Frame // hookline's (bodyB in place of body), sharing the parts of the full smee.io frame

	// refs counts who holds the delivery: its history in memory (one,
	// taken by ledgerStore) and subscribers (subscriber.hold). Once no
	// history holds it, the delivery counts in Server.pinned while a
	// subscriber does.
	refs atomic.Int32
}

// newDelivery builds the delivery for a request whose body has been read.
func newDelivery(r *http.Request, body []byte, now time.Time) *delivery {
	return makeDelivery(messageHeaders(r), r.URL.RawQuery, body, now)
}

func makeDelivery(header []wire.Header, query string, body []byte, now time.Time) *delivery {
	d := &delivery{received: now, header: header, query: query, body: body}
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

// redelivery returns a new delivery with d's headers, query and body.
func (d *delivery) redelivery(now time.Time) *delivery {
	nd := makeDelivery(d.header, d.query, d.body, now)
	nd.of = d.id
	if d.of != 0 {
		nd.of = d.of
	}
	return nd
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
		if httpx.IsHopByHop(name) || wire.Reserved(name) || drop[name] || name == "host" || !header.IsToken(name) {
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
// is written), so that deliveries hold no third frame.
func (d *delivery) frame(format streamFormat) *wire.Frame {
	switch format {
	case formatHookline:
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
