package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookline/hookline/internal/jsonscan"
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
}

// BodySource says which field of the relay message the body bytes came
// from, from the most to the least faithful.
type BodySource string

// The body sources.
const (
	// BodyBase64 is "bodyB": the exact bytes, base64-encoded by gosmee and
	// hookline. Signatures always verify.
	BodyBase64 BodySource = "bodyB"
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

// Exact reports whether the body bytes are the sender's bytes (bodyB,
// rawdata, a capture file) rather than a relay's re-serialisation.
func (s BodySource) Exact() bool { return s == BodyBase64 || s == BodyRaw || s == BodyCapture }

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
}

// relayFields are the keys of a relay message that are not request headers.
var relayFields = map[string]bool{
	"body": true, "bodyB": true, "rawdata": true, "query": true, "timestamp": true, "method": true,
}

// Decode reads one relay event. Control events (smee's "ready" and "ping",
// gosmee's {"message":"connected"} and {"message":"ready"}, any event name
// other than "message") come back as KindControl and gosmee's "gosmee-gap"
// as KindGap, never as errors. Everything else must be a delivery; when it
// cannot be read as one the error wraps ErrMalformedMessage. Decode never
// panics and is safe for concurrent use. The Delivery's Body may share
// memory with ev.Data (it is not copied when it needs no decoding), so
// ev.Data must not be modified while the Delivery is in use.
func Decode(ev SSEEvent) (Message, error) {
	switch ev.Event {
	case "", "message":
	case "gosmee-gap":
		return Message{Kind: KindGap, Name: ev.Event, Gap: decodeGap(ev.Data)}, nil
	case "hookline-gap":
		return Message{Kind: KindGap, Name: ev.Event, Gap: decodeHooklineGap(ev.Data)}, nil
	case OversizeEvent:
		return Message{}, oversizeError(ev)
	default:
		// smee.io's and hookline's "ready" and "ping", and names this
		// client does not know: EventSource clients ignore those too.
		return Message{Kind: KindControl, Name: ev.Event}, nil
	}
	if string(ev.Data) == "ready" {
		// gosmee before the /events/ endpoint (r3labs' server) sent a bare word.
		return Message{Kind: KindControl, Name: "ready"}, nil
	}
	obj, ok := objectMembers(ev.Data)
	if !ok {
		return Message{}, malformed(ev, "data is not a JSON object")
	}
	if name, ok := controlObject(obj); ok {
		return Message{Kind: KindControl, Name: name}, nil
	}
	d, err := decodeDelivery(obj)
	if err != nil {
		return Message{}, malformed(ev, err.Error())
	}
	d.EventID = ev.ID
	return Message{Kind: KindDelivery, Delivery: d}, nil
}

func malformed(ev SSEEvent, reason string) error {
	if ev.ID != "" {
		return fmt.Errorf("%w (event id %q): %s", ErrMalformedMessage, ev.ID, reason)
	}
	return fmt.Errorf("%w: %s", ErrMalformedMessage, reason)
}

// controlObject reports whether obj is a gosmee control message: an object
// whose only member is "message" with a string value, such as
// {"message":"connected"} and {"message":"ready"}. It returns the string.
func controlObject(obj map[string]json.RawMessage) (string, bool) {
	raw, ok := obj["message"]
	if !ok || len(obj) != 1 {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// isControlEvent reports whether ev is certainly not a delivery, cheaply:
// the stream loop uses it for every event.
func isControlEvent(ev SSEEvent) bool {
	if ev.Event == OversizeEvent {
		return false // a delivery's slot: its id is the delivery's
	}
	if ev.Event != "" && ev.Event != "message" {
		return true
	}
	if len(ev.Data) > 256 { // a control object is tiny; deliveries are not
		return false
	}
	if string(ev.Data) == "ready" {
		return true
	}
	obj, ok := objectMembers(ev.Data)
	if !ok {
		return false
	}
	_, ok = controlObject(obj)
	return ok
}

// objectMembers reads a JSON object as json.Unmarshal into a
// map[string]json.RawMessage would (the last of repeated keys wins), but
// the values alias data instead of being copied, and the check runs
// several times faster: "bodyB" alone may be 33 MiB. It reports false when
// data is not a valid JSON object.
func objectMembers(data []byte) (map[string]json.RawMessage, bool) {
	members, ok := jsonscan.Object(data)
	if !ok {
		return nil, false
	}
	obj := make(map[string]json.RawMessage, len(members))
	for _, m := range members {
		obj[jsonKey(m.Key)] = json.RawMessage(m.Value)
	}
	return obj, true
}

// jsonKey decodes a valid JSON string literal as encoding/json does
// (invalid UTF-8 becomes U+FFFD), without its cost in the usual case.
func jsonKey(raw []byte) string {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(raw, &s) // cannot fail: jsonscan checked the literal
	return s
}

// decodeHooklineGap reads hookline's gap event:
// {"from":3,"to":9,"reason":"expired","lastEventId":"2"} says deliveries 3
// to 9 are no longer in the relay's history.
func decodeHooklineGap(data []byte) *Gap {
	var g struct {
		To          int64  `json:"to"`
		LastEventID string `json:"lastEventId"`
	}
	if json.Unmarshal(data, &g) != nil {
		return &Gap{}
	}
	return &Gap{RequestedID: g.LastEventID, OldestID: strconv.FormatInt(g.To+1, 10)}
}

func decodeGap(data []byte) *Gap {
	var g struct {
		RequestedID string `json:"requested_id"`
		OldestID    string `json:"oldest_id"`
	}
	_ = json.Unmarshal(data, &g) // best effort: the warning matters, not its details
	return &Gap{RequestedID: g.RequestedID, OldestID: g.OldestID}
}

func decodeDelivery(obj map[string]json.RawMessage) (*Delivery, error) {
	d := &Delivery{Headers: make(http.Header, len(obj))}
	// Sorted names make the order of repeated canonical names (such as
	// "x-a" and "X-A") deterministic.
	names := make([]string, 0, len(obj))
	for k := range obj {
		if !relayFields[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		if !validHeaderName(k) {
			continue
		}
		for _, v := range headerValues(obj[k]) {
			if validHeaderValue(v) {
				d.Headers.Add(k, v)
			}
		}
	}
	if len(d.Headers) == 0 {
		return nil, errors.New("no request headers in the message")
	}

	d.ID = d.Headers.Get("X-Github-Delivery")
	if d.ID == "" {
		d.ID = d.Headers.Get("X-Request-Id")
	}
	d.Event = d.Headers.Get("X-Github-Event")
	if d.Signature = d.Headers.Get("X-Hub-Signature-256"); d.Signature == "" {
		if d.Signature = d.Headers.Get("X-Hub-Signature"); d.Signature != "" {
			d.SignatureSHA1 = true
		}
	}
	d.ContentType = d.Headers.Get("Content-Type")
	if raw, ok := obj["method"]; ok {
		if m, err := jsonString(raw); err == nil && validHeaderName(string(m)) {
			d.Method = string(m)
		}
	}
	d.Timestamp = decodeTimestamp(obj["timestamp"])
	if raw, ok := obj["query"]; ok {
		d.Query = decodeQuery(raw)
	}

	if err := d.decodeBody(obj); err != nil {
		return nil, err
	}

	_, hasBody := obj["body"]
	_, hasQuery := obj["query"]
	_, hasBodyB := obj["bodyB"]
	stringTime := len(obj["timestamp"]) > 0 && obj["timestamp"][0] == '"'
	switch {
	case hasBodyB && (hasBody || hasQuery):
		d.Format = FormatHookline
	case hasBodyB || stringTime:
		d.Format = FormatGosmee
	default:
		d.Format = FormatSmee
	}
	return d, nil
}

// decodeBody picks the body by fidelity: bodyB, then rawdata, then body.
func (d *Delivery) decodeBody(obj map[string]json.RawMessage) error {
	if raw, ok := obj["bodyB"]; ok && !isNull(raw) {
		s, err := jsonString(raw)
		if err != nil {
			return errors.New(`"bodyB" is not a string`)
		}
		body := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
		n, err := base64.StdEncoding.Decode(body, s)
		if err != nil {
			return fmt.Errorf(`"bodyB" is not valid base64: %v`, err)
		}
		d.Body, d.BodySource = body[:n], BodyBase64
		return nil
	}
	if raw, ok := obj["rawdata"]; ok && !isNull(raw) {
		s, err := jsonString(raw)
		if err != nil {
			return errors.New(`"rawdata" is not a string`)
		}
		d.Body, d.BodySource = s, BodyRaw
		return nil
	}
	raw, ok := obj["body"]
	if !ok || isNull(raw) {
		d.BodySource = BodyNone
		return nil
	}
	if raw[0] == '"' && !isJSONMediaType(d.ContentType) {
		// A text body that the relay parsed as a string: its bytes are the
		// string, not the JSON literal around it.
		s, err := jsonString(raw)
		if err != nil {
			return errors.New(`"body" is not valid JSON`)
		}
		d.Body, d.BodySource = s, BodyText
		return nil
	}
	d.Body, d.BodySource = []byte(raw), BodyJSON
	return nil
}

// jsonString returns the value of a JSON string. When it holds no escapes
// the result aliases raw (no copy: bodyB may be tens of megabytes).
func jsonString(raw json.RawMessage) ([]byte, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, errors.New("not a JSON string")
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner, nil // already validated with the whole message
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

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

// validHeaderName reports whether s is an HTTP token (RFC 9110).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue rejects values that could not be sent (or would split a
// header): CR, LF, NUL and other control characters except tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
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

// decodeQuery reads smee's "query": an object whose values are strings,
// arrays, or (from qs-style parsers) nested objects, which are flattened
// back to "a[b]=c"; a string is parsed as a raw query.
func decodeQuery(raw json.RawMessage) url.Values {
	if len(raw) > 0 && raw[0] == '"' {
		s, err := jsonString(raw)
		if err != nil {
			return nil
		}
		q, _ := url.ParseQuery(strings.TrimPrefix(string(s), "?"))
		return q
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
