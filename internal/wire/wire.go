// Package wire is hookline's relay wire format, in one place: the names
// (stream header, query parameters, message keys, control events), the gap
// event's schema, and the encoding and decoding of a relay message. The
// relay writes it ([NewFrame], [Gap.Frame]); the relay client reads it
// ([Decode], [DecodeGap]). The format itself is described in
// docs/ARCHITECTURE.md, "The wire format".
//
// A message is one SSE event whose data is a JSON object: every request
// header under its lowercase name, then "body" (the body as JSON),
// "query" (an object) and "timestamp" (milliseconds since the epoch):
// smee.io's shape. Subscribers that ask with [StreamHeader] or
// [StreamQuery] get hookline's: a JSON body's exact bytes in "body" and
// "bodyB": null when "body" can hold them byte for byte, else "bodyB" (the
// exact body, base64) or "bodyLink" in place of "body". DecodeDelivery also reads smee.io's
// "rawdata" and gosmee's shape (string timestamp, bodyB, no body or query).
package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/jsonscan"
	"github.com/hookline/hookline/rest/header"
)

// Stream options a subscriber sends. Either StreamHeader or StreamQuery
// set to "1" (or "true") asks a hookline relay for hookline's messages:
// smee.io's shape with the exact body. A JSON body that the "body" key can
// hold byte for byte (valid JSON, no line break, no white space at either
// end: what GitHub sends) is written there once, as it is, with "bodyB":
// null ([CarriesExactly]), which spares both sides base64 and the stream a
// quarter of its bytes; any other body comes in "bodyB" (base64) in place
// of "body"; and, for a body of LinkMin bytes or
// more, "bodyLink" in place of "bodyB": a URL reference (relative to the
// stream's URL) that a GET answers with the body's exact bytes, read with
// one copy rather than through the SSE reader, base64 and JSON. The relay
// keeps a linked body for the stream until the client fetches a later link
// (a client fetches in order) or the stream ends, so that a fetch cut off
// midway can be made again. The query parameter is for clients that cannot
// set headers (a browser's EventSource). LastEventIDQuery stands in for the
// Last-Event-ID header for them too; the header wins when both are present.
const (
	StreamHeader     = "X-Hookline-Stream"
	StreamQuery      = "hookline"
	LastEventIDQuery = "lastEventId"
	LinkMin          = 1 << 20
)

// RedeliveryHeader marks a delivery a hookline relay published again on
// request (its page's Redeliver button, POST /<channel>/redeliver/<id>):
// its value is the id of the first delivery of that content in the
// channel. The relay sets it and drops it from what senders POST
// (RelayHeader), so a
// client can tell a redelivery someone asked for, which it forwards again,
// from a sender's own retry of the same delivery id, a duplicate. It is a
// request header like the sender's (every relay client passes it on).
const RedeliveryHeader = "X-Hookline-Redelivery-Of"

// HandshakeHeader, set to "answered", marks a sender's handshake (Slack's
// url_verification, a hub.challenge: webhooks/provider.HandshakeOf) that
// the hookline relay answered itself; the client shows it and does not
// forward it. The relay drops every X-Hookline- header from what senders
// POST (RelayHeader): only the relay sets them.
const HandshakeHeader = "X-Hookline-Handshake"

// RelayHeader reports whether name, in any case, is a header only a
// hookline relay sets on a message (RedeliveryHeader, HandshakeHeader).
func RelayHeader(name string) bool {
	return len(name) > len("x-hookline-") && strings.EqualFold(name[:len("x-hookline-")], "x-hookline-")
}

// TokenQuery carries a private channel's read token in a URL, for clients
// that cannot send "Authorization: Bearer <token>" (a browser, smee-client
// and gosmee given the URL). hookline's clients take it out of a channel
// URL (SplitToken) and send the header.
const TokenQuery = "token"

// SplitToken returns channelURL without its TokenQuery parameter, and the
// token ("" without one). A URL that does not parse is returned as it is.
func SplitToken(channelURL string) (string, string) {
	u, err := url.Parse(channelURL)
	if err != nil || !u.Query().Has(TokenQuery) {
		return channelURL, ""
	}
	q := u.Query()
	token := q.Get(TokenQuery)
	q.Del(TokenQuery)
	u.RawQuery = q.Encode()
	return u.String(), token
}

// Event names. Deliveries are unnamed ("message") events.
const (
	EventReady     = "ready"        // sent on connect (smee.io, hookline)
	EventPing      = "ping"         // keepalive (smee.io, hookline)
	EventGap       = "hookline-gap" // hookline: deliveries lost before this point
	EventGosmeeGap = "gosmee-gap"   // gosmee: the same warning
)

// Message keys that are not request headers.
const (
	KeyBody      = "body"
	KeyBodyB     = "bodyB"
	KeyBodyLink  = "bodyLink"
	KeyRawData   = "rawdata"
	KeyQuery     = "query"
	KeyTimestamp = "timestamp"
	KeyMethod    = "method"
)

// Reserved reports whether name, in any case, is a message key that is not a
// request header. A request header with such a name is never part of a
// message: it would overwrite a key, or be mistaken for the body.
func Reserved(name string) bool {
	for _, k := range [...]string{KeyBody, KeyBodyB, KeyRawData, KeyQuery, KeyTimestamp, KeyMethod} {
		if strings.EqualFold(name, k) {
			return true
		}
	}
	return false
}

// PingFrame is the ping control frame. Control frames carry no id, so a
// client's Last-Event-ID always names a delivery.
var PingFrame = []byte("event: " + EventPing + "\ndata: {}\n\n")

// Ready is the data of hookline's ready event: the channel's last id when
// the stream joined (0 for none yet). A client with no id of its own
// resumes after it when the connection breaks, so that deliveries sent
// while it reconnects are replayed even before it has received one.
// smee.io's ready data is {}.
type Ready struct {
	Last int64 `json:"last"`
}

// Frame returns the ready event.
func (r Ready) Frame() []byte {
	return []byte("event: " + EventReady + "\ndata: {\"last\":" + strconv.FormatInt(r.Last, 10) + "}\n\n")
}

// DecodeReady reads a ready event's data; ok is false when it has no
// "last" (smee.io's {}) or is not a ready document.
func DecodeReady(data []byte) (r Ready, ok bool) {
	var v struct {
		Last *int64 `json:"last"`
	}
	if json.Unmarshal(data, &v) != nil || v.Last == nil || *v.Last < 0 {
		return Ready{}, false
	}
	return Ready{Last: *v.Last}, true
}

// Gap is the data of a hookline-gap event: deliveries From to To
// (inclusive) will not be replayed to a client that resumed after
// LastEventID.
type Gap struct {
	From        int64  `json:"from"`
	To          int64  `json:"to"`
	Reason      string `json:"reason"` // "expired", "unknown", or "lost" (the relay's Redis lost its data)
	LastEventID string `json:"lastEventId"`
	// Oldest is the oldest id the relay still has, when known: To+1 on a
	// hookline relay, gosmee's "oldest_id" (a Redis stream id). Not sent.
	Oldest string `json:"-"`
}

// Count returns how many deliveries the gap lost: To-From+1 when the relay
// said (a hookline relay), 0 when it did not (gosmee's, or unknown).
func (g Gap) Count() int64 {
	if g.From > 0 && g.To >= g.From {
		return g.To - g.From + 1
	}
	return 0
}

// Frame returns the complete SSE event for g.
func (g Gap) Frame() []byte {
	data, _ := json.Marshal(g) // cannot fail: plain fields
	b := append([]byte("event: "+EventGap+"\ndata: "), data...)
	return append(b, "\n\n"...)
}

// DecodeGap reads the data of a gap event named name (EventGap or
// EventGosmeeGap), at best effort: the warning matters, not its details,
// so data that does not parse gives a Gap with nothing known.
func DecodeGap(name string, data []byte) Gap {
	if name == EventGosmeeGap {
		var g struct {
			RequestedID string `json:"requested_id"`
			OldestID    string `json:"oldest_id"`
		}
		_ = json.Unmarshal(data, &g)
		return Gap{LastEventID: g.RequestedID, Oldest: g.OldestID}
	}
	var g Gap
	if json.Unmarshal(data, &g) != nil {
		return Gap{}
	}
	g.Oldest = strconv.FormatInt(g.To+1, 10)
	return g
}

// Header is one request header as a message key: a lowercase name and the
// values joined the way Node joins them in req.headers.
type Header struct{ Name, Value string }

// Message is what [NewFrame] and [NewGosmeeFrame] encode.
type Message struct {
	Header    []Header // written in this order
	Body      []byte   // the JSON text of "body"; its line breaks start new data lines
	Query     []byte   // the JSON text of "query"
	Timestamp time.Time
	// BodyB is the exact body, written as "bodyB" in base64 (gosmee's
	// frame; hookline's is Frame.Hookline).
	BodyB []byte
}

// Frame is a message encoded as SSE data lines, ready to be written to any
// number of streams. Only the parts around the body are encoded: Body is
// written from the Message's own bytes (copied only when it has line
// breaks) and BodyB is base64-encoded as it is written, so that a frame
// holds little memory beyond the delivery it encodes, however large.
type Frame struct {
	head  []byte // data: {headers,"body":
	body  []byte // Body, continuation lines inserted
	tail  []byte // ,"query":...,"timestamp":N
	bodyB []byte
	// copied: body is a copy of Message.Body
	copied bool
	// exact: "bodyB":null follows the tail (a JSON body in "body": see StreamHeader)
	exact bool
}

// NewFrame encodes m as smee.io does: every header, then body, query and
// timestamp. m.BodyB is not written (see Frame.Hookline).
func NewFrame(m Message) *Frame {
	n := 64
	for _, h := range m.Header {
		n += len(h.Name) + len(h.Value) + 8
	}
	head := appendHeaders(make([]byte, 0, n), m.Header)
	head = append(head, `"`+KeyBody+`":`...)
	body, copied := m.Body, false
	if IndexLineBreak(body) >= 0 {
		body, copied = appendDataLines(nil, body), true
	}
	tail := make([]byte, 0, len(m.Query)+48)
	tail = append(tail, `,"`+KeyQuery+`":`...)
	tail = appendDataLines(tail, m.Query)
	tail = append(tail, `,"`+KeyTimestamp+`":`...)
	tail = strconv.AppendInt(tail, m.Timestamp.UnixMilli(), 10)
	return &Frame{head: head, body: body, tail: tail, copied: copied}
}

// appendHeaders appends the start of a message's data line: `data: {` and
// each header as a key, each followed by a comma.
func appendHeaders(b []byte, hs []Header) []byte {
	b = append(b, "data: {"...)
	for _, h := range hs {
		b = AppendJSONString(b, h.Name)
		b = append(b, ':')
		b = AppendJSONString(b, h.Value)
		b = append(b, ',')
	}
	return b
}

// NewGosmeeFrame encodes m as a gosmee server does (chmouel/gosmee's
// handleWebhookPost, v0.32): every header (gosmee keeps the first value;
// these are joined as for NewFrame), "timestamp" as a string of Unix
// milliseconds, and "bodyB"; no "body" and no "query". m.BodyB must not be
// nil.
func NewGosmeeFrame(m Message) *Frame {
	head := appendHeaders(make([]byte, 0, 96), m.Header)
	head = append(head, `"`+KeyTimestamp+`":"`...)
	head = strconv.AppendInt(head, m.Timestamp.UnixMilli(), 10)
	head = append(head, '"')
	bodyB := m.BodyB
	if bodyB == nil {
		bodyB = []byte{}
	}
	return &Frame{head: head, bodyB: bodyB}
}

// Gosmee's control frames: what a gosmee server writes when a stream
// starts, its keepalive comment, and its history gap (Redis; the client
// logs it and goes on).
var (
	GosmeeConnectedFrame = []byte("data: {\"message\":\"connected\"}\n\n")
	GosmeeReadyFrame     = []byte("data: {\"message\":\"ready\"}\n\n")
	GosmeeKeepaliveFrame = []byte(": keepalive\n\n")
)

// GosmeeID is how a gosmee stream names relay id n: a Redis stream id,
// "0-<n>", the only shape gosmee's client keeps, stores (its
// --resume-state-file) and sends back as Last-Event-ID; it grows with n.
// ParseEventID reads it back.
func GosmeeID(n int64) string { return "0-" + strconv.FormatInt(n, 10) }

// ParseEventID reads a Last-Event-ID a relay stream gave out: a decimal id,
// or a gosmee stream's GosmeeID.
func ParseEventID(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if seq, ok := strings.CutPrefix(s, "0-"); ok {
		s = seq
	}
	return strconv.ParseInt(s, 10, 64)
}

// GosmeeGapFrame is gap g as gosmee writes it: "requested_id" the id the
// client resumed after, "oldest_id" the oldest one still there.
func GosmeeGapFrame(g Gap) []byte {
	data, _ := json.Marshal(map[string]string{
		"error": "missed_history", "requested_id": g.LastEventID, "oldest_id": GosmeeID(g.To + 1),
	})
	b := append([]byte("event: "+EventGosmeeGap+"\ndata: "), data...)
	return append(b, "\n\n"...)
}

const bodyBKey = `,"` + KeyBodyB + `":"`

// Len returns the number of bytes WriteTo writes.
func (f *Frame) Len() int {
	n := len(f.head) + len(f.body) + len(f.tail) + len("}\n\n")
	if f.exact {
		n += len(exactKey)
	}
	if f.bodyB != nil {
		n += len(bodyBKey) + base64.StdEncoding.EncodedLen(len(f.bodyB)) + 1
	}
	return n
}

// Overhead returns the memory f holds of its own: the encoded parts around
// the body, and the body when it had to be copied. Message.Body and
// Message.BodyB are not counted: they are the caller's.
func (f *Frame) Overhead() int {
	n := cap(f.head) + cap(f.tail)
	if f.copied {
		n += cap(f.body)
	}
	return n
}

// Hookline returns hookline's message for the smee.io frame f (see
// StreamHeader), sharing its parts: the headers, query and timestamp, and
// body, the exact body, in "bodyB" in place of "body".
func (f *Frame) Hookline(body []byte) *Frame {
	head := f.head[:len(f.head)-len(`"`+KeyBody+`":`)] // "data: {" and the headers, each with its comma
	tail := f.tail[1:]                                 // the comma before "query"
	if body == nil {
		body = []byte{}
	}
	return &Frame{head: head, tail: tail, bodyB: body}
}

// ExactJSON returns hookline's message for the smee.io frame f whose
// Message.Body was the exact body (see StreamHeader): f itself, with
// "bodyB": null. The caller checks that "body" holds the body byte for byte
// ([CarriesExactly]).
func (f *Frame) ExactJSON() *Frame {
	return &Frame{head: f.head, body: f.body, tail: f.tail, exact: true}
}

// CarriesExactly reports whether a message's "body" written from jsonText
// holds body byte for byte, as ExactJSON promises: jsonText is body itself
// (valid JSON with no line break: see the relay's body value), and body has
// no white space at either end, which a reader of the JSON would not keep.
func CarriesExactly(jsonText, body []byte) bool {
	if len(body) == 0 || len(jsonText) != len(body) || &jsonText[0] != &body[0] {
		return false
	}
	return !isSpace(body[0]) && !isSpace(body[len(body)-1])
}

// isSpace reports whether c is JSON white space.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

const exactKey = `,"` + KeyBodyB + `":null`

// Linked returns hookline's frame f with "bodyLink" set to link in place
// of "bodyB" (see StreamHeader). f must be a Hookline frame.
func (f *Frame) Linked(link string) *Frame {
	tail := make([]byte, 0, len(f.tail)+len(link)+len(KeyBodyLink)+8)
	tail = append(tail, f.tail...)
	tail = append(tail, `,"`+KeyBodyLink+`":`...)
	tail = AppendJSONString(tail, link)
	return &Frame{head: f.head, tail: tail}
}

// WriteTo writes the frame to w.
func (f *Frame) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, part := range [...][]byte{f.head, f.body, f.tail} {
		k, err := w.Write(part)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	if f.exact {
		k, err := io.WriteString(w, exactKey)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	if f.bodyB != nil {
		k, err := io.WriteString(w, bodyBKey)
		n += int64(k)
		if err != nil {
			return n, err
		}
		cw := &countWriter{w: w}
		enc := base64.NewEncoder(base64.StdEncoding, cw)
		_, err = enc.Write(f.bodyB)
		if err == nil {
			err = enc.Close()
		}
		n += cw.n
		if err != nil {
			return n, err
		}
		k, err = io.WriteString(w, `"`)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	k, err := io.WriteString(w, "}\n\n")
	return n + int64(k), err
}

// Bytes returns the frame as WriteTo writes it.
func (f *Frame) Bytes() []byte {
	var b bytes.Buffer
	b.Grow(f.Len())
	f.WriteTo(&b)
	return b.Bytes()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// AppendQuery appends q as the JSON object of "query": a key's one value as
// a string, several as an array of strings, keys sorted.
func AppendQuery(b []byte, q url.Values) []byte {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, k)
		b = append(b, ':')
		vs := q[k]
		if len(vs) == 1 {
			b = AppendJSONString(b, vs[0])
			continue
		}
		b = append(b, '[')
		for j, v := range vs {
			if j > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendDataLines appends s, starting a new "data: " line at each line break
// (CRLF, CR or LF, which SSE all treat as one).
func appendDataLines(b, s []byte) []byte {
	for {
		i := IndexLineBreak(s)
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

// IndexLineBreak returns the index of the first '\n' or '\r' in s, or -1.
// It looks for '\r' only before the first '\n', so that finding every line
// break of s costs time linear in its size.
func IndexLineBreak(s []byte) int {
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

// AppendJSONString appends s as a JSON string the way JSON.stringify writes
// it (no HTML escaping); invalid UTF-8 becomes U+FFFD.
func AppendJSONString(b []byte, s string) []byte {
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

// Kind says what a relay event is; [Classify] decides it, once per event.
type Kind int

// The kinds of relay event.
const (
	// KindDelivery is a relayed webhook delivery: [DecodeDelivery] reads it.
	KindDelivery Kind = iota + 1
	// KindControl is about the connection (ready, ping, gosmee's
	// {"message":"connected"}, or an event name a client does not know):
	// nothing to deliver.
	KindControl
	// KindGap is a relay's warning that deliveries were lost before this
	// point (hookline-gap, gosmee-gap): [DecodeGap] reads it.
	KindGap
)

// Classify says what an event named name (empty for an unnamed one) with
// this data is. Unnamed events are deliveries unless their data is one of
// gosmee's control messages: an object whose only member is a string
// "message" ({"message":"connected"}, {"message":"ready"}), or the bare word
// "ready" of old gosmee servers. Named events other than gaps are control
// events: EventSource clients ignore names they do not know too.
func Classify(name string, data []byte) Kind {
	switch name {
	case "", "message":
	case EventGap, EventGosmeeGap:
		return KindGap
	default:
		return KindControl
	}
	if string(data) == "ready" {
		return KindControl
	}
	if len(data) > 256 { // a control object is tiny; deliveries are not
		return KindDelivery
	}
	if m, ok := split(data); ok && m.control() {
		return KindControl
	}
	return KindDelivery
}

// control reports whether m is a control object: its only member (repeated
// or not) is "message", a string.
func (m *message) control() bool {
	for _, k := range m.keys() {
		if *k.value != nil {
			return false
		}
	}
	if len(m.headers) != 1 || m.headers[0].name != "message" {
		return false
	}
	_, err := jsonString(m.headers[0].value)
	return err == nil
}

// DecodeDelivery reads the data of an event [Classify] calls a delivery,
// and says what is wrong when it cannot. It never panics; the Delivery's
// Body may alias data. data must be the caller's to change: "bodyB" is
// decoded over its own base64 text, so that a 25 MiB delivery does not
// take another 25 MiB. ID and Event are set from the headers.
func DecodeDelivery(data []byte) (*delivery.Delivery, error) {
	m, ok := split(data)
	if !ok {
		return nil, errors.New("data is not a JSON object")
	}
	return decodeDelivery(&m)
}

// message is a relay message's JSON object split into its members as
// json.Unmarshal into a map would read them (the last of repeated names
// wins), but in one pass and with values that alias the data: "bodyB" alone
// may be 33 MiB. A message key's value is nil when the key is absent (a
// value is never empty).
type message struct {
	body, bodyB, bodyLink, rawData, query, timestamp, method []byte
	headers                                                  []member // every other member, sorted by name
}

// member is a message member that is not a message key: a request header.
type member struct {
	name  string // decoded
	value []byte // JSON text
}

// keyRef is a message key and where its value goes.
type keyRef struct {
	name  string
	value *[]byte
}

// keys returns m's message keys.
func (m *message) keys() [7]keyRef {
	return [...]keyRef{
		{KeyBody, &m.body}, {KeyBodyB, &m.bodyB}, {KeyBodyLink, &m.bodyLink}, {KeyRawData, &m.rawData},
		{KeyQuery, &m.query}, {KeyTimestamp, &m.timestamp}, {KeyMethod, &m.method},
	}
}

// split reads data, a JSON object, into a message.
func split(data []byte) (message, bool) {
	m := message{headers: make([]member, 0, 16)}
	keys := m.keys()
	ok := jsonscan.Members(data, func(jm jsonscan.Member) {
		name, _ := jsonscan.String(jm.Key) // decoded once; aliases data unless escaped
		for _, k := range keys {
			if string(name) == k.name {
				*k.value = jm.Value
				return
			}
		}
		m.headers = append(m.headers, member{name: string(name), value: jm.Value})
	})
	if !ok {
		return message{}, false
	}
	// Sorted names make the order of repeated canonical names (such as
	// "x-a" and "X-A") deterministic; a relay writes them sorted already.
	// Of repeated names, the last one is kept.
	slices.SortStableFunc(m.headers, func(a, b member) int { return strings.Compare(a.name, b.name) })
	kept := m.headers[:0]
	for i, h := range m.headers {
		if i+1 == len(m.headers) || m.headers[i+1].name != h.name {
			kept = append(kept, h)
		}
	}
	m.headers = kept
	return m, true
}

// SendUserAgent is the User-Agent of deliveries made by `hookline send`
// (GitHub's own is GitHub-Hookshot/<id>): the client names the command
// when such a delivery is not signed.
const SendUserAgent = "GitHub-Hookshot/hookline"

// MaxHeaderBytes bounds a delivery's header block: the sum over every
// field of name, value and 4 bytes (": " and CRLF). It is Node's default
// limit, which smee.io and most webhook targets run with: the relay refuses
// a larger request (431), and a client refuses a message whose headers
// exceed it, since it would turn each into a request header.
const MaxHeaderBytes = 16 << 10

func decodeDelivery(m *message) (*delivery.Delivery, error) {
	d := &delivery.Delivery{Headers: make(http.Header, len(m.headers))}
	size := 0
	for _, h := range m.headers {
		if !header.IsToken(h.name) {
			continue
		}
		for _, v := range headerValues(h.value) {
			if header.IsValue(v) {
				if size += len(h.name) + len(v) + 4; size > MaxHeaderBytes {
					return nil, fmt.Errorf("the message's headers take more than %d bytes, more than any relay accepts", MaxHeaderBytes)
				}
				d.Headers.Add(h.name, v)
			}
		}
	}
	if len(d.Headers) == 0 {
		return nil, errors.New("no request headers in the message")
	}
	d.ReceivedAt = decodeTimestamp(m.timestamp)
	if m.query != nil {
		d.Query = decodeQuery(m.query).Encode()
	}
	if err := decodeBody(d, m); err != nil {
		return nil, err
	}
	stringTime := len(m.timestamp) > 0 && m.timestamp[0] == '"'
	switch {
	case m.bodyLink != nil || m.bodyB != nil && (m.body != nil || m.query != nil):
		d.Format = delivery.FormatHookline
	case m.bodyB != nil || stringTime:
		d.Format = delivery.FormatGosmee
	default:
		d.Format = delivery.FormatSmee
	}
	if d.Format == delivery.FormatGosmee {
		d.Method = decodeMethod(m.method)
	}
	d.Identify()
	return d, nil
}

// decodeMethod returns a gosmee message's "method" when it is one a
// webhook sender uses (GET, POST, PUT, PATCH, DELETE), else "" (POST).
// smee.io and hookline's relay define no method: for them a "method" key is
// a sender's header, never a method to replay with.
func decodeMethod(raw []byte) string {
	m, err := jsonString(raw)
	if err != nil {
		return ""
	}
	switch s := string(m); s {
	case "GET", "POST", "PUT", "PATCH", "DELETE":
		return s
	}
	return ""
}

// decodeBody picks the body by fidelity: bodyLink (to fetch), bodyB,
// rawdata, body.
func decodeBody(d *delivery.Delivery, m *message) error {
	if raw := m.bodyLink; raw != nil && !isNull(raw) {
		link, err := jsonString(raw)
		if err != nil || len(link) == 0 {
			return errors.New(`"bodyLink" is not a URL reference`)
		}
		d.Link, d.BodySource = string(link), delivery.BodyLinked
		return nil
	}
	if m.bodyB != nil && isNull(m.bodyB) && m.body != nil && !isNull(m.body) {
		// A hookline relay's JSON body written once (see StreamHeader).
		d.Body, d.BodySource = m.body, delivery.BodyJSONExact
		return nil
	}
	if raw := m.bodyB; raw != nil && !isNull(raw) {
		s, err := jsonString(raw)
		if err != nil {
			return errors.New(`"bodyB" is not a string`)
		}
		body, err := decodeBase64InPlace(s)
		if err != nil {
			return fmt.Errorf(`"bodyB" is not valid base64: %v`, err)
		}
		d.Body, d.BodySource = body, delivery.BodyBase64
		return nil
	}
	if raw := m.rawData; raw != nil && !isNull(raw) {
		s, err := jsonString(raw)
		if err != nil {
			return errors.New(`"rawdata" is not a string`)
		}
		d.Body, d.BodySource = s, delivery.BodyRaw
		return nil
	}
	raw := m.body
	if raw == nil || isNull(raw) {
		d.BodySource = delivery.BodyNone
		return nil
	}
	if raw[0] == '"' && !isJSONMediaType(d.ContentType()) {
		// A text body that the relay parsed as a string: its bytes are the
		// string, not the JSON literal around it.
		s, err := jsonString(raw)
		if err != nil {
			return errors.New(`"body" is not valid JSON`)
		}
		d.Body, d.BodySource = s, delivery.BodyText
		return nil
	}
	d.Body, d.BodySource = raw, delivery.BodyJSON
	return nil
}

// decodeBase64InPlace decodes standard base64 s over s itself, a block at a
// time through a buffer: a block's output (3 bytes for every 4) lands before
// the next block's input, and Decode never sees its input and output
// overlap. Text with line breaks (which Decode skips, so blocks would not
// hold whole quanta; no relay sends them) is decoded into a new slice.
func decodeBase64InPlace(s []byte) ([]byte, error) {
	if bytes.ContainsAny(s, "\r\n") {
		out := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
		n, err := base64.StdEncoding.Decode(out, s)
		return out[:n], err
	}
	const block = 16 << 10 // of text, a multiple of 4
	var buf [block / 4 * 3]byte
	n := 0
	for i := 0; i < len(s); i += block {
		text := s[i:min(i+block, len(s))]
		k, err := base64.StdEncoding.Decode(buf[:], text)
		if e, ok := err.(base64.CorruptInputError); ok {
			return nil, base64.CorruptInputError(int64(i) + int64(e))
		}
		if err != nil {
			return nil, err
		}
		if i+block < len(s) && k < len(buf) {
			// Padding ended a block that is not the last.
			return nil, base64.CorruptInputError(int64(i + block - 1))
		}
		n += copy(s[n:], buf[:k])
	}
	return s[:n], nil
}

// jsonString returns the value of a JSON string literal (jsonscan.String),
// with an error for anything else.
func jsonString(raw []byte) ([]byte, error) {
	v, ok := jsonscan.String(raw)
	if !ok {
		return nil, errors.New("not a JSON string")
	}
	return v, nil
}

func isNull(raw []byte) bool { return string(raw) == "null" }

// headerValues reads a header's value: a string, an array of strings (Node
// keeps repeated set-cookie headers so), or a number or boolean (their JSON
// text). Anything else has no value.
func headerValues(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		if s, err := jsonString(raw); err == nil {
			return []string{string(s)}
		}
	case '[':
		var vs []json.RawMessage
		if json.Unmarshal(raw, &vs) != nil {
			return nil
		}
		var out []string
		for _, v := range vs {
			if s, err := jsonString(v); err == nil {
				out = append(out, string(s))
			}
		}
		return out
	case '{', 'n':
		return nil
	default: // numbers, true, false
		return []string{string(raw)}
	}
	return nil
}

// isJSONMediaType reports whether ct is application/json or a +json type.
func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// decodeTimestamp reads milliseconds since the epoch from a JSON number or
// numeric string.
func decodeTimestamp(raw json.RawMessage) time.Time {
	if len(raw) == 0 {
		return time.Time{}
	}
	s := string(raw)
	if raw[0] == '"' {
		b, err := jsonString(raw)
		if err != nil {
			return time.Time{}
		}
		s = string(b)
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC()
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && math.Abs(f) < 1e15 {
		return time.UnixMilli(int64(f)).UTC()
	}
	return time.Time{}
}

// decodeQuery reads "query": an object whose values are strings, arrays, or
// (from smee.io's qs parser) nested objects, which are flattened back to
// "a[b]=c"; a string is parsed as a raw query.
func decodeQuery(raw json.RawMessage) url.Values {
	if len(raw) > 0 && raw[0] == '"' {
		s, err := jsonString(raw)
		if err != nil {
			return nil
		}
		q, _ := url.ParseQuery(strings.TrimPrefix(string(s), "?"))
		return q
	}
	if string(raw) == "{}" { // no query: what nearly every message has
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return nil
	}
	q := url.Values{}
	addQuery(q, "", obj, 0)
	return q
}

func addQuery(q url.Values, prefix string, obj map[string]json.RawMessage, depth int) {
	if depth > 8 {
		return
	}
	for k, v := range obj {
		name := k
		if prefix != "" {
			name = prefix + "[" + k + "]"
		}
		addQueryValue(q, name, v, depth)
	}
}

func addQueryValue(q url.Values, name string, v json.RawMessage, depth int) {
	if len(v) == 0 {
		return
	}
	switch v[0] {
	case '"':
		if s, err := jsonString(v); err == nil {
			q.Add(name, string(s))
		}
	case '[':
		var vs []json.RawMessage
		if json.Unmarshal(v, &vs) == nil {
			for _, e := range vs {
				addQueryValue(q, name, e, depth+1)
			}
		}
	case '{':
		var sub map[string]json.RawMessage
		if json.Unmarshal(v, &sub) == nil {
			addQuery(q, name, sub, depth+1)
		}
	case 'n':
	default:
		q.Add(name, string(v))
	}
}
