package relay

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzIngest posts arbitrary bodies, content types, headers and queries to
// the ingest handler: it must not panic, must answer 200 or 4xx, and a
// recorded delivery's messages must be JSON of smee.io's shape whose bodyB
// (extended messages only) is the exact body.
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
		s := New(Options{MaxBodyBytes: 1 << 16})
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
		d := s.lookup("fuzz", 1)
		if d == nil {
			t.Fatal("200 but no delivery recorded")
		}
		for _, ext := range []bool{false, true} {
			m := decodeFrame(t, d.frame(ext))
			for _, k := range []string{"body", "query", "timestamp"} {
				if _, ok := m[k]; !ok {
					t.Fatalf("message (ext %v) has no %q: %v", ext, k, m)
				}
			}
			for k, v := range m {
				switch k {
				case "body", "query", "timestamp", "bodyB":
					continue
				}
				if _, ok := v.(string); !ok || !validToken(k) || k != strings.ToLower(k) {
					t.Fatalf("header key %q = %#v: want a lowercase token with a string value", k, v)
				}
			}
			b64, has := m["bodyB"].(string)
			if has != ext {
				t.Fatalf("bodyB present = %v in a message with ext = %v", has, ext)
			}
			if ext {
				got, err := base64.StdEncoding.DecodeString(b64)
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("bodyB = %q (%v), want %q", got, err, body)
				}
			}
		}
	})
}

// decodeFrame joins an event's data lines as an SSE client does and decodes
// the JSON.
func decodeFrame(t *testing.T, frame []byte) map[string]any {
	t.Helper()
	text := strings.TrimSuffix(string(frame), "\n\n")
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "data: ") || strings.ContainsRune(line, '\r') {
			t.Fatalf("frame line %q is not a data line", line)
		}
		lines = append(lines, strings.TrimPrefix(line, "data: "))
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.Join(lines, "\n")), &m); err != nil {
		t.Fatalf("message is not JSON: %v\n%s", err, frame)
	}
	return m
}
