package relay

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/rest/header"
)

// FuzzIngest posts arbitrary bodies, content types, headers and queries to
// the ingest handler: it must not panic, must answer 200 or 4xx, and a
// recorded delivery's messages must be JSON of smee.io's shape whose bodyB
// (hookline's messages only) is the exact body.
//
// Run it with: go test -run '^$' -fuzz FuzzIngest ./relay/
func FuzzIngest(f *testing.F) {
	f.Add([]byte(`{"action":"opened"}`), "application/json", "X-GitHub-Event", "issues", "ref=main&a[b]=1")
	f.Add([]byte("payload=%7B%22zen%22%3A1%7D&a[]=1&a[]=2"), "application/x-www-form-urlencoded", "Cookie", "a=1", "")
	f.Add([]byte{0xff, 0x00, '\r', '\n', 0x80}, "application/octet-stream", "Body", "evil", "a[b][c]=%ZZ")
	f.Add([]byte("{\r\n \"a\": [1,\r2]\n}\n"), "application/vnd.github+json; charset=utf-8", "Sec-Fetch-Mode", "navigate", "__proto__[a]=1&a[99]=x")
	f.Add([]byte(`{"a":`), "application/json", "Connection", "X-A", "a=%FF")
	f.Add([]byte("x=1&x[y]=2&x=3"), "application/x-www-form-urlencoded; charset=utf-8", "X-A", "\x7f", "[]=&[a]=b")
	f.Fuzz(func(t *testing.T, body []byte, contentType, headerName, headerValue, query string) {
		s, _ := New(Options{MaxBodyBytes: 1 << 16})
		req := httptest.NewRequest(http.MethodPost, "/fuzz", bytes.NewReader(body))
		req.URL.RawQuery = query
		req.Header.Set("Content-Type", contentType)
		req.Header.Set(headerName, headerValue)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			if rec.Code < 400 || rec.Code > 499 {
				t.Fatalf("POST = %d %s, want 200 or 4xx", rec.Code, rec.Body)
			}
			return
		}
		d, _ := s.store.Get(t.Context(), "fuzz", 1)
		if d == nil {
			t.Fatal("200 but no delivery recorded")
		}
		for _, ext := range []streamFormat{formatSmee, formatHookline} {
			m := decodeFrame(t, d.frame(ext).Bytes())
			for _, k := range []string{"body", "query", "timestamp"} {
				if _, ok := m[k]; !ok && (k != "body" || ext != formatHookline) {
					t.Fatalf("message (%v) has no %q: %v", ext, k, m)
				}
			}
			if _, ok := m["body"]; ok && ext == formatHookline && m["bodyB"] != nil {
				t.Fatalf("hookline's message has a body and a bodyB: %v", m)
			}
			for k, v := range m {
				switch k {
				case "body", "query", "timestamp", "bodyB":
					continue
				}
				if _, ok := v.(string); !ok || !header.IsToken(k) || k != strings.ToLower(k) {
					t.Fatalf("header key %q = %#v: want a lowercase token with a string value", k, v)
				}
			}
			b64, has := m["bodyB"].(string)
			if _, exact := m["bodyB"]; has != (ext != formatSmee) && !(exact && m["bodyB"] == nil) {
				t.Fatalf("bodyB present = %v in a %v message", has, ext)
			}
			if has {
				got, err := base64.StdEncoding.DecodeString(b64)
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("bodyB = %q (%v), want %q", got, err, body)
				}
			}
		}
		// hookline's message (a JSON body in "body" when it can hold it):
		// what its decoder reads is the exact body, whatever the body.
		got, err := wire.DecodeDelivery(frameData(t, d.frame(formatHookline).Bytes()))
		if err != nil {
			t.Fatalf("hookline message: %v", err)
		}
		if !bytes.Equal(got.Body, body) || !got.BodySource.Exact() {
			t.Fatalf("hookline message: body %q from %q, want %q", got.Body, got.BodySource, body)
		}
	})
}

// decodeFrame joins an event's data lines as an SSE client does and decodes
// the JSON.
func decodeFrame(t *testing.T, frame []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(frameData(t, frame), &m); err != nil {
		t.Fatalf("message is not JSON: %v\n%s", err, frame)
	}
	return m
}

// frameData joins an event's data lines as an SSE client does.
func frameData(t *testing.T, frame []byte) []byte {
	t.Helper()
	text := strings.TrimSuffix(string(frame), "\n\n")
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "data: ") || strings.ContainsRune(line, '\r') {
			t.Fatalf("frame line %q is not a data line", line)
		}
		lines = append(lines, strings.TrimPrefix(line, "data: "))
	}
	return []byte(strings.Join(lines, "\n"))
}

// FuzzDecodeRecord feeds arbitrary bytes to the decoder of the records the
// bbolt store keeps (a damaged or foreign file must not crash the relay):
// it must not panic, must reject what it cannot read with ErrBadRecord, and
// what it reads must encode to a record that decodes to the same messages.
// Seeded with the records of the captures in testdata/captures.
//
// Run it with: go test -run '^$' -fuzz FuzzDecodeRecord ./relay/
func FuzzDecodeRecord(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "captures", "*.json"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		c, err := capture.Unmarshal(data)
		if err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		req := httptest.NewRequest(http.MethodPost, "/x?"+c.Query, nil)
		req.Header = c.Headers
		f.Add(NewEntry(req, c.Body, c.ReceivedAt).Record())
	}
	if len(files) == 0 {
		f.Fatal("no captures in testdata/captures to seed from")
	}
	f.Add(makeDelivery(nil, "", nil, time.Unix(0, 0)).Record())
	f.Add(makeDelivery([]wire.Header{{Name: "content-type", Value: "application/x-www-form-urlencoded"}, {Name: "x", Value: "\xff\x00"}}, "a[b]=1", []byte("payload=%7B%7D"), time.Unix(-1, 5)).Record())
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0})
	redelivery := makeDelivery(nil, "", nil, time.Unix(7, 0))
	redelivery.of = 3
	f.Add(redelivery.RefRecord())
	f.Fuzz(func(t *testing.T, rec []byte) {
		// A reference record (a redelivery, see record.go).
		if at, of, ok, err := decodeRef(rec); ok {
			if err != nil {
				if !errors.Is(err, ErrBadRecord) {
					t.Fatalf("decodeRef = %v; want ErrBadRecord", err)
				}
				return
			}
			ref := makeDelivery(nil, "", nil, at)
			ref.of = of
			if at2, of2, _, err := decodeRef(ref.RefRecord()); err != nil || !at2.Equal(at) || of2 != of {
				t.Fatalf("reference round trip: %v %d %v, want %v %d", at2, of2, err, at, of)
			}
			return
		}
		d, err := decodeRecord(rec)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) || d != nil {
				t.Fatalf("decodeRecord = %v, %v; want nil and ErrBadRecord", d, err)
			}
			return
		}
		again, err := decodeRecord(d.Record())
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		for _, ext := range []streamFormat{formatSmee, formatHookline, formatGosmee} {
			if a, b := d.frame(ext).Bytes(), again.frame(ext).Bytes(); !bytes.Equal(a, b) {
				t.Fatalf("messages differ after a round trip (ext %v):\n%s\n%s", ext, a, b)
			}
		}
		if !bytes.Equal(d.body, again.body) || d.query != again.query || d.size != again.size {
			t.Fatalf("round trip changed the delivery: %+v, %+v", d, again)
		}
	})
}
