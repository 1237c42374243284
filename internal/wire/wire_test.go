package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/delivery"
)

// data joins an event's data lines the way an SSE client does.
func data(t *testing.T, frame []byte) []byte {
	t.Helper()
	if !bytes.HasSuffix(frame, []byte("\n\n")) {
		t.Fatalf("frame %q does not end with a blank line", frame)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(frame), "\n\n"), "\n") {
		v, ok := strings.CutPrefix(l, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", l)
		}
		lines = append(lines, v)
	}
	return []byte(strings.Join(lines, "\n"))
}

// A message the relay encodes decodes to the same delivery: headers, the
// exact body through bodyB, the query and the time.
func TestEncodeDecode(t *testing.T) {
	body := []byte("{\"a\":\r\n 1,\n\"b\":\"\\u00e9\"}")
	m := Message{
		Header: []Header{
			{Name: "content-type", Value: "application/json"},
			{Name: "x-github-event", Value: "push"},
			{Name: "x-quote", Value: "say \"hi\"\t\x01"},
		},
		Body:      body,
		Query:     AppendQuery(nil, url.Values{"a": {"1", "2"}, "b": {"x"}}),
		Timestamp: time.UnixMilli(1700000000123),
	}
	frame := NewFrame(m).Hookline(body).Bytes()
	if got, want := string(m.Query), `{"a":["1","2"],"b":"x"}`; got != want {
		t.Errorf("AppendQuery = %s, want %s", got, want)
	}
	d, err := DecodeDelivery(data(t, frame))
	if err != nil || d == nil {
		t.Fatalf("DecodeDelivery(NewFrame) = %v, %v", d, err)
	}
	wantHeader := http.Header{"Content-Type": {"application/json"}, "X-Github-Event": {"push"}}
	if !reflect.DeepEqual(d.Headers, wantHeader) { // x-quote has a control character: left out
		t.Errorf("Header = %v, want %v", d.Headers, wantHeader)
	}
	if !bytes.Equal(d.Body, body) || d.BodySource != delivery.BodyBase64 || d.Format != delivery.FormatHookline {
		t.Errorf("Body = %q from %q (%s), want %q from bodyB (hookline)", d.Body, d.BodySource, d.Format, body)
	}
	if want := "a=1&a=2&b=x"; d.Query != want {
		t.Errorf("Query = %v, want %v", d.Query, want)
	}
	if !d.ReceivedAt.Equal(m.Timestamp) || d.Event != "push" {
		t.Errorf("ReceivedAt = %v, want %v; Event %q", d.ReceivedAt, m.Timestamp, d.Event)
	}

	// smee.io's frame: the body is the JSON text, line breaks as "\n".
	d, err = DecodeDelivery(data(t, NewFrame(m).Bytes()))
	if err != nil || string(d.Body) != "{\"a\":\n 1,\n\"b\":\"\\u00e9\"}" || d.BodySource != delivery.BodyJSON || d.Format != delivery.FormatSmee {
		t.Errorf("without bodyB: %q from %q (%s), %v", d.Body, d.BodySource, d.Format, err)
	}
}

// hookline's message for a JSON body (see StreamHeader): "body" is the body's
// bytes as sent, escapes and number spellings kept, and "bodyB" is null;
// the decoder takes those bytes as they are. CarriesExactly allows it only
// for the body's own bytes with no white space at either end.
func TestExactJSONBody(t *testing.T) {
	body := []byte(`{"s":"\u00e9\/\"","n":[1.50,2e3],"o":{}}`)
	m := Message{Header: []Header{{Name: "content-type", Value: "application/json"}}, Body: body, Query: []byte("{}"), Timestamp: time.UnixMilli(1)}
	frame := NewFrame(m).ExactJSON().Bytes()
	if !bytes.Contains(frame, []byte(`"bodyB":null`)) || !bytes.Contains(frame, body) {
		t.Fatalf("frame %s: want the body as it is and bodyB null", frame)
	}
	if n := NewFrame(m).ExactJSON().Len(); n != len(frame) {
		t.Errorf("Len = %d, WriteTo wrote %d", n, len(frame))
	}
	d, err := DecodeDelivery(data(t, frame))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.Body, body) || d.BodySource != delivery.BodyJSONExact || !d.BodySource.Exact() || d.Format != delivery.FormatHookline {
		t.Errorf("Body = %q from %q (%s), want %q exactly (hookline)", d.Body, d.BodySource, d.Format, body)
	}

	copied := append([]byte(nil), body...)
	for _, tt := range []struct {
		name       string
		text, body []byte
		want       bool
	}{
		{"the body itself", body, body, true},
		{"a copy", copied, body, false},
		{"a part", body[:len(body)-1], body, false},
		{"empty", nil, nil, false},
		{"space first", []byte(" 1"), nil, false},
		{"tab last", []byte("1\t"), nil, false},
		{"CR last", []byte("1\r"), nil, false},
		{"a number", []byte("1"), nil, true},
	} {
		text, b := tt.text, tt.body
		if b == nil {
			b = text
		}
		if got := CarriesExactly(text, b); got != tt.want {
			t.Errorf("CarriesExactly(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A delivery whose body is nested as deep as encoding/json allows decodes;
// the message around it does not count against the limit.
func TestDecodeDeepBody(t *testing.T) {
	body := []byte(strings.Repeat("[", 10000) + "1" + strings.Repeat("]", 10000))
	frame := NewFrame(Message{Header: []Header{{Name: "x-github-event", Value: "push"}}, Body: body, Query: []byte("{}"), BodyB: body}).Bytes()
	d, err := DecodeDelivery(data(t, frame))
	if err != nil || !bytes.Equal(d.Body, body) {
		t.Fatalf("Decode of a 10,000-deep body: %v", err)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name, data string
		want       Kind
	}{
		{"", `{"message":"connected"}`, KindControl},
		{"message", `ready`, KindControl},
		{"", `{"message":"hi","x-a":"1"}`, KindDelivery},
		{"", `{"message":"a","message":"b"}`, KindControl},
		{"", `{"message":1}`, KindDelivery},
		{"", `{"message":"hi","timestamp":1}`, KindDelivery},
		{"", `[1]`, KindDelivery},
		{EventPing, `{}`, KindControl},
		{"unknown-name", `{"x-a":"1"}`, KindControl},
		{EventGap, `{}`, KindGap},
		{EventGosmeeGap, `{}`, KindGap},
	}
	for _, tt := range tests {
		if got := Classify(tt.name, []byte(tt.data)); got != tt.want {
			t.Errorf("Classify(%q, %s) = %v, want %v", tt.name, tt.data, got, tt.want)
		}
	}
}

// The message keys are never request headers (a linked message's bodyLink
// once reached the target as a "Bodylink" header, its token with it); of
// repeated names the last wins, as in JSON.parse, escaped names included;
// headers come out in the order of their names.
func TestDecodeMembers(t *testing.T) {
	data := `{"x-b":"first","bodyLink":"ch/body/2?s=secret","x-b":"last","method":"PUT","rawdata":null,` +
		`"x-a":["1","2"],"\u0078-c":"escaped","x-c":"plain","query":{},"timestamp":5,"body":null,"bodyB":null}`
	d, err := DecodeDelivery([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{"X-A": {"1", "2"}, "X-B": {"last"}, "X-C": {"plain"}}
	if !reflect.DeepEqual(d.Headers, want) {
		t.Errorf("Headers = %v, want %v", d.Headers, want)
	}
	if d.Link != "ch/body/2?s=secret" || d.BodySource != delivery.BodyLinked || d.Format != delivery.FormatHookline || d.Method != "" {
		t.Errorf("Link %q, BodySource %q, Format %q, Method %q", d.Link, d.BodySource, d.Format, d.Method)
	}
	// Two names that canonicalise alike keep the order of their names.
	d, err = DecodeDelivery([]byte(`{"x-y":"lower","X-Y":"upper"}`))
	if err != nil || !reflect.DeepEqual(d.Headers["X-Y"], []string{"upper", "lower"}) {
		t.Errorf("X-Y = %q (%v), want upper then lower", d.Headers["X-Y"], err)
	}
}

func TestDecodeDeliveryErrors(t *testing.T) {
	tests := []struct{ data, err string }{
		{`[1]`, "data is not a JSON object"},
		{`{"body":{}}`, "no request headers in the message"},
		{`{"x-a":"1","bodyB":"!!"}`, `"bodyB" is not valid base64`},
	}
	for _, tt := range tests {
		d, err := DecodeDelivery([]byte(tt.data))
		if d != nil || err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("DecodeDelivery(%s) = %v, %v; want an error saying %q", tt.data, d, err, tt.err)
		}
	}
}

func TestGap(t *testing.T) {
	g := Gap{From: 3, To: 9, Reason: "expired", LastEventID: "2"}
	want := "event: hookline-gap\ndata: {\"from\":3,\"to\":9,\"reason\":\"expired\",\"lastEventId\":\"2\"}\n\n"
	if got := string(g.Frame()); got != want {
		t.Errorf("Frame = %q, want %q", got, want)
	}
	g.Oldest = "10"
	if got := DecodeGap(EventGap, []byte(`{"from":3,"to":9,"reason":"expired","lastEventId":"2"}`)); got != g {
		t.Errorf("DecodeGap = %+v; want %+v", got, g)
	}
	want2 := Gap{LastEventID: "5-0", Oldest: "7-0"}
	if got := DecodeGap(EventGosmeeGap, []byte(`{"error":"missed_history","requested_id":"5-0","oldest_id":"7-0"}`)); got != want2 {
		t.Errorf("DecodeGap(gosmee) = %+v; want %+v", got, want2)
	}
}

func TestReserved(t *testing.T) {
	for name, want := range map[string]bool{"bodyb": true, "BodyB": true, "Method": true, "rawdata": true, "x-github-event": false, "bodies": false} {
		if got := Reserved(name); got != want {
			t.Errorf("Reserved(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestIndexLineBreak(t *testing.T) {
	for in, want := range map[string]int{"": -1, "abc": -1, "a\nb": 1, "a\rb\n": 1, "ab\n\r": 2, "\r\n": 0} {
		if got := IndexLineBreak([]byte(in)); got != want {
			t.Errorf("IndexLineBreak(%q) = %d, want %d", in, got, want)
		}
	}
}

// A frame writes what Bytes returns, Len bytes of it, in the order the
// message keys are documented in; a failing writer stops it with the error.
func TestFrameWriteTo(t *testing.T) {
	body := bytes.Repeat([]byte("héllo\x00"), 5000) // base64 streamed in several chunks
	for _, bodyB := range [][]byte{nil, {}, body} {
		f := NewFrame(Message{Header: []Header{{Name: "x-a", Value: "1"}}, Body: []byte("{\"a\":\n1}"), Query: []byte("{}"), Timestamp: time.UnixMilli(5)})
		want := "data: {\"x-a\":\"1\",\"body\":{\"a\":\ndata: 1},\"query\":{},\"timestamp\":5"
		if bodyB != nil {
			f = f.Hookline(bodyB)
			want = `data: {"x-a":"1","query":{},"timestamp":5,"bodyB":"` + base64.StdEncoding.EncodeToString(bodyB) + `"`
		}
		var buf bytes.Buffer
		n, err := f.WriteTo(&buf)
		if err != nil || n != int64(buf.Len()) || buf.Len() != f.Len() || !bytes.Equal(buf.Bytes(), f.Bytes()) {
			t.Fatalf("WriteTo = %d, %v; wrote %d, Len %d", n, err, buf.Len(), f.Len())
		}
		if got := buf.String(); got != want+"}\n\n" {
			t.Errorf("frame = %.200q..., want %.200q...", got, want)
		}
		for limit := 0; limit < f.Len(); limit += 997 {
			lw := &limitWriter{left: limit}
			if n, err := f.WriteTo(lw); err != errFull || n != int64(limit) {
				t.Fatalf("WriteTo a writer full after %d bytes = %d, %v; want %d, errFull", limit, n, err, limit)
			}
		}
	}
}

var errFull = errors.New("full")

type limitWriter struct{ left int }

func (w *limitWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, errFull
	}
	w.left -= len(p)
	return len(p), nil
}

// Hookline is the frame with "bodyB" in place of "body": valid JSON with
// the other keys, for any headers, bodies with line breaks and queries.
func TestFrameHookline(t *testing.T) {
	for _, m := range []Message{
		{Body: []byte("{}"), Query: []byte("{}"), BodyB: []byte{}},
		{Header: []Header{{"a", "1"}, {"b", "2"}}, Body: []byte("{\n\"x\":\n1}"), Query: []byte(`{"q":"1"}`), Timestamp: time.UnixMilli(5), BodyB: []byte("{\n\"x\":\n1}")},
	} {
		ev := NewFrame(m).Hookline(m.BodyB).Bytes()
		data := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(string(ev), "data: "), "\n\n"), "\ndata: ", "\n")
		var got map[string]any
		if err := json.Unmarshal([]byte(data), &got); err != nil {
			t.Fatalf("lean frame %q: %v", ev, err)
		}
		if _, ok := got["body"]; ok || got["bodyB"] == nil || got["query"] == nil || got["timestamp"] == nil || len(got) != len(m.Header)+3 {
			t.Errorf("lean frame %q: want the headers, query, timestamp and bodyB, no body", ev)
		}
	}
}

// FuzzBase64InPlace: decoding over the input gives what decoding into new
// memory gives, and fails where it fails.
func FuzzBase64InPlace(f *testing.F) {
	for _, s := range []string{"", "YQ==", "YWI=", "YWJj", "eyJhIjoxfQ==", "!!!!", "YQ", "YQ==YQ==", strings.Repeat("QUJD", 1000),
		// Longer than decodeBase64InPlace's 16 KiB block: several blocks,
		// padding that ends a block before the last, a bad byte in the
		// second block, line breaks.
		strings.Repeat("QUJD", 5000), strings.Repeat("QUJD", 4095) + "QQ==" + "QUJD",
		strings.Repeat("QUJD", 4500) + "!" + strings.Repeat("QUJD", 10), strings.Repeat("QUJD", 4096) + "\r\n" + "QQ=="} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want, wantErr := base64.StdEncoding.DecodeString(string(in))
		got, err := decodeBase64InPlace(bytes.Clone(in))
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("decodeBase64InPlace(%q) error %v, base64 says %v", in, err, wantErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("decodeBase64InPlace(%q) = %q, want %q", in, got, want)
		}
	})
}

// BenchmarkBase64InPlace decodes a 20 MiB body's bodyB over itself:
//
//	go test -run '^$' -bench Base64InPlace -count 6 ./internal/wire/
func BenchmarkBase64InPlace(b *testing.B) {
	text := []byte(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("hookline"), 20<<20/8)))
	work := make([]byte, len(text))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		copy(work, text)
		if _, err := decodeBase64InPlace(work); err != nil {
			b.Fatal(err)
		}
	}
}
