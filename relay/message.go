package relay

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hookline/hookline/internal/jsonscan"
)

// maxHeaderBytes is the largest header block ingest accepts: the sum over
// every field of name, value and 4 bytes (": " and CRLF), plus the host. It
// is Node's default limit, which smee.io and most webhook targets run with:
// smee-client turns every header of a message into a request header, so a
// larger block would only fail at the target with 431.
const maxHeaderBytes = 16 << 10

// entryOverhead is what one retained delivery costs beyond its bytes (the
// struct, slices, map entries), counted in the history limits so that many
// tiny deliveries are bounded too.
const entryOverhead = 512

// hopHeaders are never part of a message: they describe the connection to
// the relay, not the delivery, and undici's fetch (smee-client) refuses to
// send keep-alive, transfer-encoding, upgrade and expect.
var hopHeaders = map[string]bool{
	"connection":          true,
	"keep-alive":          true,
	"proxy-connection":    true,
	"proxy-authenticate":  true,
	"proxy-authorization": true,
	"te":                  true,
	"trailer":             true,
	"transfer-encoding":   true,
	"upgrade":             true,
	"expect":              true,
}

// reservedKeys are message keys that are not headers. A request header with
// one of these names is dropped: it would be overwritten (body, query,
// timestamp, as smee.io does) or mistaken for the body by clients that read
// bodyB or rawdata.
var reservedKeys = map[string]bool{
	"body":      true,
	"query":     true,
	"timestamp": true,
	"bodyb":     true,
	"rawdata":   true,
}

// headerField is one request header as a message key: a lowercase name and
// the values joined the way Node joins them in req.headers.
type headerField struct{ name, value string }

// delivery is one POST to a channel. It is immutable once published and
// shared by every subscriber and the history.
type delivery struct {
	id       int64 // set by publish
	received time.Time
	header   []headerField // sorted by name
	query    string        // the raw query string
	body     []byte
	size     int64 // what it counts against the history limits

	bodyJSON  []byte // the value of the "body" key
	queryJSON []byte // the value of the "query" key

	plainOnce, extOnce sync.Once
	plain, ext         []byte // SSE "data:" lines and the closing blank line
}

// newDelivery builds the delivery for a request whose body has been read.
func newDelivery(r *http.Request, body []byte, now time.Time) *delivery {
	return makeDelivery(messageHeaders(r), r.URL.RawQuery, body, now)
}

func makeDelivery(header []headerField, query string, body []byte, now time.Time) *delivery {
	d := &delivery{received: now, header: header, query: query, body: body}
	d.size = int64(len(body)+len(query)) + entryOverhead
	contentType := ""
	for _, h := range header {
		d.size += int64(len(h.name) + len(h.value))
		if h.name == "content-type" {
			contentType = h.value
		}
	}
	d.bodyJSON = bodyValue(contentType, body)
	d.queryJSON = appendQSJSON(nil, parseQS(query, queryOptions))
	return d
}

// redelivery returns a new delivery with d's headers, query and body.
func (d *delivery) redelivery(now time.Time) *delivery {
	return makeDelivery(d.header, d.query, d.body, now)
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
func messageHeaders(r *http.Request) []headerField {
	drop := map[string]bool{}
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if tok = strings.ToLower(strings.TrimSpace(tok)); tok != "" {
				drop[tok] = true
			}
		}
	}
	fields := make([]headerField, 0, len(r.Header)+1)
	if r.Host != "" {
		fields = append(fields, headerField{"host", r.Host})
	}
	for k, vs := range r.Header {
		name := strings.ToLower(k)
		if hopHeaders[name] || reservedKeys[name] || drop[name] || name == "host" || !validToken(name) {
			continue
		}
		sep := ", "
		if name == "cookie" {
			sep = "; "
		}
		fields = append(fields, headerField{name, strings.Join(vs, sep)})
	}
	slices.SortFunc(fields, func(a, b headerField) int { return strings.Compare(a.name, b.name) })
	return fields
}

// validToken reports whether name is an HTTP token: what a server's parser
// allows as a header name, checked again for handlers mounted elsewhere, as
// fetch would throw on anything else.
func validToken(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// plainSafe reports whether smee-client can forward the header: it passes
// sec-fetch-mode to fetch as the request mode, which throws for anything but
// cors, no-cors and same-origin (a browser form sends "navigate").
func plainSafe(h headerField) bool {
	if h.name != "sec-fetch-mode" {
		return true
	}
	switch h.value {
	case "cors", "no-cors", "same-origin":
		return true
	}
	return false
}

// bodyValue returns the JSON for a message's "body" key, as smee.io's
// Express body parsers produce it: a JSON body (application/json or any
// +json type) exactly as sent, a form body parsed like qs, anything else
// (and JSON that does not parse) an empty object.
func bodyValue(contentType string, body []byte) []byte {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return []byte("{}")
	}
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		if jsonscan.Valid(body) { // encoding/json's verdict, several times faster
			return body
		}
	case mt == "application/x-www-form-urlencoded":
		return appendQSJSON(nil, parseQS(string(body), formOptions))
	}
	return []byte("{}")
}

// frame returns the SSE data lines of d's message for a plain (smee.io
// shape) or an extended (plus bodyB) subscriber. Frames are built once, on
// first use, and shared.
func (d *delivery) frame(ext bool) []byte {
	if ext {
		d.extOnce.Do(func() { d.ext = d.encode(true) })
		return d.ext
	}
	d.plainOnce.Do(func() { d.plain = d.encode(false) })
	return d.plain
}

// encode writes the message JSON as SSE data lines: every header, then
// body, query, timestamp (smee.io's order) and, for ext, bodyB. Only the raw
// JSON of the body can hold line breaks (as JSON whitespace); each starts a
// new data line, which the client joins back with "\n".
func (d *delivery) encode(ext bool) []byte {
	n := len(d.bodyJSON) + len(d.queryJSON) + 256
	for _, h := range d.header {
		n += len(h.name) + len(h.value) + 8
	}
	if ext {
		n += base64.StdEncoding.EncodedLen(len(d.body)) + 16
	}
	b := make([]byte, 0, n)
	b = append(b, "data: {"...)
	for _, h := range d.header {
		if !ext && !plainSafe(h) {
			continue
		}
		b = appendJSONString(b, h.name)
		b = append(b, ':')
		b = appendJSONString(b, h.value)
		b = append(b, ',')
	}
	b = append(b, `"body":`...)
	b = appendDataLines(b, d.bodyJSON)
	b = append(b, `,"query":`...)
	b = append(b, d.queryJSON...)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, d.received.UnixMilli(), 10)
	if ext {
		b = append(b, `,"bodyB":"`...)
		b = base64.StdEncoding.AppendEncode(b, d.body)
		b = append(b, '"')
	}
	return append(b, "}\n\n"...)
}

// appendDataLines appends s, starting a new "data: " line at each line break
// (CRLF, CR or LF, which SSE all treat as one).
func appendDataLines(b, s []byte) []byte {
	for {
		i := indexLineBreak(s)
		if i < 0 {
			return append(b, s...)
		}
		b = append(b, s[:i]...)
		b = append(b, "\ndata: "...)
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
}

// indexLineBreak returns the index of the first '\n' or '\r' in s, or -1.
// It looks for '\r' only before the first '\n', so that finding every line
// break of s costs time linear in its size.
func indexLineBreak(s []byte) int {
	i := bytes.IndexByte(s, '\n')
	if i < 0 {
		i = len(s)
	}
	if j := bytes.IndexByte(s[:i], '\r'); j >= 0 {
		return j
	}
	if i == len(s) {
		return -1
	}
	return i
}

// appendJSONString appends s as a JSON string the way JSON.stringify writes
// it (no HTML escaping); invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Control events. Neither carries an id, so a client's Last-Event-ID always
// names a delivery.
var (
	readyEvent = []byte("event: ready\ndata: {}\n\n")
	pingEvent  = []byte("event: ping\ndata: {}\n\n")
)

// gapEvent is the data of a hookline-gap event: deliveries From to To
// (inclusive) will not be replayed.
type gapEvent struct {
	From        int64  `json:"from"`
	To          int64  `json:"to"`
	Reason      string `json:"reason"`
	LastEventID string `json:"lastEventId"`
}

func (g gapEvent) frame() []byte {
	data, _ := json.Marshal(g) // cannot fail: plain fields
	b := append([]byte("event: hookline-gap\ndata: "), data...)
	return append(b, "\n\n"...)
}
