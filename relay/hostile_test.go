package relay_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/relay"
)

// lenient sends a hand-written request and body (the body written
// concurrently, and its write errors ignored: the relay may answer and
// close before it has all of it) and returns the status and body of the
// answer, or 0 and the read error when none came.
func lenient(t *testing.T, addr, head string, body io.Reader) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(wait))
	go func() {
		if _, err := io.WriteString(conn, head); err == nil && body != nil {
			io.Copy(conn, body)
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// hostileCase is one malformed or hostile request to the relay.
type hostileCase struct {
	name string
	// send makes the request against the relay at addr (host:port), with
	// canary the host:port of a server the relay must never contact.
	send func(t *testing.T, addr, canary string) (int, string)
	// status is the answer wanted; errHas, if set, a part of its JSON error.
	status int
	errHas string
	// relayed, if not nil, is the body the channel "h" must relay for it
	// (exactly these bytes, read from bodyB); check looks at the message.
	relayed []byte
	check   func(t *testing.T, m map[string]any)
	// boltOnly runs the case against the bolt store only (slow under
	// -race, and covered for memory elsewhere).
	boltOnly bool
}

// postTo returns a send that POSTs body to path with the header pairs given.
func postTo(path string, body []byte, header ...string) func(*testing.T, string, string) (int, string) {
	return func(t *testing.T, addr, canary string) (int, string) {
		path := strings.ReplaceAll(path, "CANARY", canary)
		body := bytes.ReplaceAll(body, []byte("CANARY"), []byte(canary))
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header[header[i]] = append(req.Header[header[i]], strings.ReplaceAll(header[i+1], "CANARY", canary))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// rawTo returns a send that writes head (CANARY replaced) and body as is.
func rawTo(head string, body []byte) func(*testing.T, string, string) (int, string) {
	return func(t *testing.T, addr, canary string) (int, string) {
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(body)
		}
		return lenient(t, addr, strings.ReplaceAll(head, "CANARY", canary), r)
	}
}

func bodyIs(want string) func(*testing.T, map[string]any) {
	return func(t *testing.T, m map[string]any) {
		t.Helper()
		if got := string(mustJSON(m["body"])); got != want {
			t.Errorf("message body = %s, want %s", got, want)
		}
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// hostileLimit is the relay's body limit in TestHostileInput: the limit's
// mechanism is the same at any size, and 2 MiB keeps a body at the limit
// a body sent by link (1 MiB or more) at a twelfth of the race detector's
// cost. TestBodyLimit checks the default, 25 MiB.
const hostileLimit = 2 << 20

func hostileCases() []hostileCase {
	limit := bytes.Repeat([]byte("a"), hostileLimit)
	over := bytes.Repeat([]byte("a"), hostileLimit+1<<20)
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	var manyParams strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&manyParams, "p%d=%d&", i, i)
	}
	var manyHeaders strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&manyHeaders, "X-H%d: v\r\n", i)
	}
	return []hostileCase{
		// Sizes.
		// TestBodyLimit relays the default limit, 25 MiB, from memory.
		{name: "body at the limit", send: postTo("/h", limit, "Content-Type", "application/octet-stream"), status: 200, relayed: limit, boltOnly: true},
		{name: "body over the limit announced", send: rawTo("POST /h HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(len(over))+"\r\n\r\n", over), status: 413, errHas: "larger than the relay's limit"},
		{name: "body over the limit chunked", send: postTo("/h", nil), status: 0}, // replaced below
		{name: "over the limit announced with Expect: 100-continue", send: rawTo("POST /h HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: "+strconv.Itoa(len(over))+"\r\n\r\n", nil), status: 413, errHas: "larger than the relay's limit"},
		{name: "header block over 16 KiB", send: postTo("/h", []byte("x"), "X-Big", strings.Repeat("b", 17<<10)), status: 431, errHas: "request headers take"},
		{name: "3000 small headers", send: rawTo("POST /h HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"+manyHeaders.String()+"\r\nx", nil), status: 431, errHas: "request headers take"},
		{name: "2 MiB header line", send: rawTo("POST /h HTTP/1.1\r\nHost: x\r\nX-Huge: "+strings.Repeat("h", 2<<20)+"\r\nContent-Length: 1\r\n\r\nx", nil), status: 431},

		// Bytes that are not text.
		{name: "NUL bytes in the body", send: postTo("/h", []byte("a\x00b\x00\x00"), "Content-Type", "text/plain"), status: 200, relayed: []byte("a\x00b\x00\x00"), check: bodyIs("{}")},
		{name: "invalid UTF-8 in a JSON body", send: postTo("/h", []byte("{\"a\":\"\xff\xfe\xc3\x28\"}"), "Content-Type", "application/json"), status: 200, relayed: []byte("{\"a\":\"\xff\xfe\xc3\x28\"}")},
		// Every stream format carries header values as JSON text, which
		// cannot hold these bytes: refused, naming the header, never
		// changed to U+FFFD on the way.
		{name: "invalid UTF-8 in a header value", send: postTo("/h", []byte("{}"), "X-Bad", "caf\xc3\xa9 \xff\xfe \xc0\xaf end"), status: 400, errHas: "X-Bad is not valid UTF-8"},
		{name: "UTF-8 in a header value", send: postTo("/h", []byte("{}"), "X-Good", "caf\xc3\xa9 \u2028 end"), status: 200, relayed: []byte("{}"), check: func(t *testing.T, m map[string]any) {
			if m["x-good"] != "café \u2028 end" {
				t.Errorf("x-good = %q, want the bytes sent", m["x-good"])
			}
		}},
		{name: "NUL in a header value", send: rawTo("POST /h HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\nContent-Length: 1\r\n\r\nx", nil), status: 400},
		{name: "bare CR in a header value", send: rawTo("POST /h HTTP/1.1\r\nHost: x\r\nX-A: a\rX-B: b\r\nContent-Length: 1\r\n\r\nx", nil), status: 400},
		{name: "header name with a space", send: rawTo("POST /h HTTP/1.1\r\nHost: x\r\nX Bad: 1\r\nContent-Length: 1\r\n\r\nx", nil), status: 400},
		{name: "no Host header", send: rawTo("POST /h HTTP/1.1\r\nContent-Length: 1\r\n\r\nx", nil), status: 400},

		// Headers that would be mistaken for message keys or hop headers.
		{name: "headers named like message keys", send: postTo("/h", []byte(`{"real":1}`), "Content-Type", "application/json", "Body", "evil", "Query", "evil", "Timestamp", "1", "BodyB", "ZXZpbA==", "Rawdata", "evil"), status: 200, relayed: []byte(`{"real":1}`), check: func(t *testing.T, m map[string]any) {
			if _, ok := m["rawdata"]; ok || m["bodyB"] != nil || string(mustJSON(m["body"])) != `{"real":1}` {
				t.Errorf("message keys taken over by headers: %v", m)
			}
		}},
		{name: "Connection names a header", send: postTo("/h", []byte("x"), "Connection", "X-Secret", "X-Secret", "s"), status: 200, relayed: []byte("x"), check: func(t *testing.T, m map[string]any) {
			if _, ok := m["x-secret"]; ok {
				t.Error("a header named by Connection was relayed")
			}
		}},

		// Content types and bodies that are not what they say.
		{name: "unknown content type", send: postTo("/h", []byte("<xml/>"), "Content-Type", "application/x-unknown"), status: 200, relayed: []byte("<xml/>"), check: bodyIs("{}")},
		{name: "malformed content type", send: postTo("/h", []byte(`{"a":1}`), "Content-Type", "application/json; ==="), status: 200, relayed: []byte(`{"a":1}`), check: bodyIs("{}")},
		{name: "no content type", send: postTo("/h", []byte(`{"a":1}`)), status: 200, relayed: []byte(`{"a":1}`), check: bodyIs("{}")},
		{name: "JSON array", send: postTo("/h", []byte(`[1,"two",{"three":3}]`), "Content-Type", "application/json"), status: 200, relayed: []byte(`[1,"two",{"three":3}]`), check: bodyIs(`[1,"two",{"three":3}]`)},
		{name: "JSON string", send: postTo("/h", []byte(`"just text"`), "Content-Type", "application/json"), status: 200, relayed: []byte(`"just text"`), check: bodyIs(`"just text"`)},
		{name: "truncated JSON", send: postTo("/h", []byte(`{"a":`), "Content-Type", "application/json"), status: 200, relayed: []byte(`{"a":`), check: bodyIs("{}")},
		{name: "empty body", send: postTo("/h", nil, "Content-Type", "application/json"), status: 200, relayed: []byte{}, check: bodyIs("{}")},
		{name: "JSON nested 5000 deep", send: postTo("/h", []byte(deep), "Content-Type", "application/json"), status: 200, relayed: []byte(deep)},
		{name: "form with 5000 parameters", send: postTo("/h", []byte(manyParams.String()), "Content-Type", "application/x-www-form-urlencoded"), status: 200, relayed: []byte(manyParams.String()), check: func(t *testing.T, m map[string]any) {
			// url.ParseQuery keeps every pair; the body limit bounds them.
			if body, _ := m["body"].(map[string]any); len(body) != 5000 {
				t.Errorf("form body has %d keys, want all 5000", len(body))
			}
		}},
		{name: "form with prototype keys and deep brackets", send: postTo("/h?__proto__[x]=1", []byte("__proto__[a]=1&constructor[prototype][b]=2&a[b][c][d][e][f][g][h]=1"), "Content-Type", "application/x-www-form-urlencoded"), status: 200, relayed: []byte("__proto__[a]=1&constructor[prototype][b]=2&a[b][c][d][e][f][g][h]=1")},
		{name: "no GitHub headers at all", send: postTo("/h", []byte(`{"zen":"x"}`), "Content-Type", "application/json"), status: 200, relayed: []byte(`{"zen":"x"}`)},
		{name: "Idempotency-Key reused with another body", send: func(t *testing.T, addr, canary string) (int, string) {
			postTo("/other", []byte("one"), "Idempotency-Key", "k")(t, addr, canary)
			return postTo("/other", []byte("two"), "Idempotency-Key", "k")(t, addr, canary)
		}, status: 422, errHas: "already used for delivery 1"},
		{name: "malformed chunked body", send: rawTo("POST /h HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n", nil), status: 400, errHas: "reading the body"},
		// RFC 9112 6.3: Transfer-Encoding wins, Content-Length is ignored
		// (Go's server does it); the relay stores what it read.
		{name: "Content-Length and Transfer-Encoding both", send: rawTo("POST /h HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n", nil), status: 200, relayed: []byte("ab")},

		// Paths: channel names are an alphabet, never a file name.
		{name: "dot-dot segment", send: rawTo("POST /../etc/passwd HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx", nil), status: 404, errHas: "channel names are"},
		{name: "escaped dot-dot", send: postTo("/%2e%2e/h", []byte("x")), status: 404, errHas: "channel names are"},
		{name: "escaped slash in the name", send: postTo("/h%2Fx", []byte("x")), status: 404, errHas: "channel names are"},
		{name: "dot in the name", send: postTo("/h.json", []byte("x")), status: 404, errHas: "channel names are"},
		{name: "trailing slash", send: postTo("/h/", []byte("x")), status: 404, errHas: "no route"},
		{name: "double slash", send: rawTo("POST //h HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx", nil), status: 404, errHas: "no channel in the path"},
		{name: "backslash", send: rawTo("POST /h\\..\\x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx", nil), status: 404, errHas: "channel names are"},
		{name: "129-character name", send: postTo("/"+strings.Repeat("a", 129), []byte("x")), status: 404, errHas: "129 characters long"},
		{name: "non-ASCII name", send: postTo("/h%C3%A9", []byte("x")), status: 404, errHas: "channel names are"},
		{name: "NUL in the path", send: postTo("/h%00", []byte("x")), status: 404, errHas: "channel names are"},

		// Requests that try to make the relay contact someone.
		{name: "absolute-form URI naming another host", send: rawTo("POST http://CANARY/h HTTP/1.1\r\nHost: CANARY\r\nContent-Length: 1\r\n\r\nx", nil), status: 200, relayed: []byte("x")},
		{name: "CONNECT to another host", send: rawTo("CONNECT CANARY HTTP/1.1\r\nHost: CANARY\r\n\r\n", nil), status: 404},
		{name: "URLs in headers, query and body", send: postTo("/h?callback=http://CANARY/q&url=http://CANARY", []byte(`{"url":"http://CANARY/b"}`), "Content-Type", "application/json", "X-Forwarded-Host", "CANARY", "Referer", "http://CANARY/", "Location", "http://CANARY/", "Origin", "http://CANARY"), status: 200, relayed: []byte(`{"url":"http://CANARY/b"}`)},
		{name: "new channel for a forwarded host", send: func(t *testing.T, addr, canary string) (int, string) {
			c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/new", nil)
			req.Header.Set("X-Forwarded-Host", canary)
			resp, err := c.Do(req)
			if err != nil {
				return 0, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode, resp.Header.Get("Location")
		}, status: 307},

		// Methods and redeliveries.
		{name: "PUT", send: rawTo("PUT /h HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx", nil), status: 405, errHas: "not allowed"},
		{name: "DELETE", send: rawTo("DELETE /h HTTP/1.1\r\nHost: x\r\n\r\n", nil), status: 405, errHas: "not allowed"},
		{name: "redeliver a negative id", send: postTo("/h/redeliver/-1", nil), status: 404, errHas: "ids are positive integers"},
		{name: "redeliver id 0", send: postTo("/h/redeliver/0", nil), status: 404, errHas: "ids are positive integers"},
		{name: "redeliver an overflowing id", send: postTo("/h/redeliver/99999999999999999999", nil), status: 404, errHas: "ids are positive integers"},
		{name: "redeliver garbage", send: postTo("/h/redeliver/1e3", nil), status: 404, errHas: "ids are positive integers"},
		{name: "redeliver an unknown id", send: postTo("/h/redeliver/9223372036854775807", nil), status: 404, errHas: "not in the relay's history"},
	}
}

// The relay's rows of issue 8's table of malformed inputs: each gets a
// clear answer (or is relayed exactly), a delivery posted after each one
// still arrives, in order, with the next id, and the relay never contacts
// any host named in a request. Run against both history stores.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	var canaryHits atomic.Int64
	canary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { canaryHits.Add(1) }))
	t.Cleanup(canary.Close)
	canaryHost := strings.TrimPrefix(canary.URL, "http://")

	for _, kind := range []string{"memory", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			var ts *httptest.Server
			if kind == "bolt" {
				_, ts, _ = openRelay(t, relay.Options{MaxBodyBytes: hostileLimit}, t.TempDir())
			} else {
				_, ts = newRelay(t, relay.Options{MaxBodyBytes: hostileLimit})
			}
			// hookline's stream carries the exact bytes (bodyB, or a link),
			// smee.io's the message shape that the checks read.
			sub, plain := subscribe(t, ts.URL+"/h?hookline=1"), subscribe(t, ts.URL+"/h")
			sub.ready()
			plain.ready()
			nextID := 1
			// upTo reads the events up to the one relaying last (at most
			// a few more than wanted), checking that ids go on by one.
			upTo := func(t *testing.T, last []byte, want int) (bodies [][]byte, msgs []map[string]any) {
				t.Helper()
				for len(bodies) <= want+2 {
					ev, pev := sub.next(), plain.next()
					var m map[string]any
					if len(pev.Data) <= 1<<20 { // decoding megabytes of JSON is slow under -race
						m = message(t, pev)
					}
					body, err := bodyOf(t, ts.URL+"/h", ev)
					if err != nil {
						t.Errorf("event %s: %v", ev.ID, err)
					}
					if ev.ID != strconv.Itoa(nextID) {
						t.Errorf("event id %s, want %d", ev.ID, nextID)
					}
					nextID, _ = strconv.Atoi(ev.ID)
					nextID++
					bodies, msgs = append(bodies, body), append(msgs, m)
					if bytes.Equal(body, last) {
						break
					}
				}
				return bodies, msgs
			}
			for i, tc := range hostileCases() {
				if tc.name == "body over the limit chunked" {
					tc.send = rawTo("POST /h HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", chunked(bytes.Repeat([]byte("c"), hostileLimit+1<<20)))
					tc.status, tc.errHas = 413, "larger than the relay's limit"
				}
				if tc.boltOnly && kind != "bolt" {
					continue
				}
				t.Run(tc.name, func(t *testing.T) {
					code, body := tc.send(t, addr(ts), canaryHost)
					if code != tc.status {
						t.Errorf("status %d %.200s, want %d", code, body, tc.status)
					}
					if tc.errHas != "" && code == tc.status && !strings.Contains(jsonError(t, body), tc.errHas) {
						t.Errorf("error %q, want it to say %q", jsonError(t, body), tc.errHas)
					}
					// Nothing lost, nothing extra: after what this case
					// relays (if anything), the next delivery is next.
					sentinel := []byte(fmt.Sprintf("sentinel %d", i))
					mustPost(t, ts.URL+"/h", string(sentinel))
					var want [][]byte
					if tc.relayed != nil {
						want = append(want, bytes.ReplaceAll(tc.relayed, []byte("CANARY"), []byte(canaryHost)))
					}
					want = append(want, sentinel)
					got, msgs := upTo(t, sentinel, len(want))
					if len(got) != len(want) || !bytes.Equal(got[0], want[0]) {
						for i := range got {
							t.Errorf("relayed #%d: %d bytes %.60q", i+1, len(got[i]), got[i])
						}
						t.Fatalf("want %d deliveries, the first %d bytes %.60q, then the sentinel", len(want), len(want[0]), want[0])
					}
					if tc.check != nil {
						tc.check(t, msgs[0])
					}
				})
			}
		})
	}
	if n := canaryHits.Load(); n != 0 {
		t.Errorf("the relay made %d requests to a host named in a request", n)
	}
}

// chunked encodes b as a chunked body (1 MiB chunks) without the end, as a
// client still uploading would.
func chunked(b []byte) []byte {
	var out bytes.Buffer
	for len(b) > 0 {
		n := min(len(b), 1<<20)
		fmt.Fprintf(&out, "%x\r\n%s\r\n", n, b[:n])
		b = b[n:]
	}
	return out.Bytes()
}

// Last-Event-ID values a client may send, garbage included: each gets the
// ready event, a gap event saying what will not come (reason "unknown"
// for ids the relay cannot place), and the retained deliveries, none lost.
func TestHostileLastEventID(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"memory", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			var ts *httptest.Server
			if kind == "bolt" {
				_, ts, _ = openRelay(t, relay.Options{HistoryCount: 3}, t.TempDir())
			} else {
				_, ts = newRelay(t, relay.Options{HistoryCount: 3})
			}
			url := ts.URL + "/s"
			for i := 1; i <= 5; i++ {
				mustPost(t, url, strconv.Itoa(i)) // 3, 4 and 5 are retained
			}
			long := strings.Repeat("9", 10000)
			tests := []struct {
				name, value string
				query       bool
				gap         string // the gap event's data, or "" for none
				ids         []string
			}{
				{"garbage", "abc", false, `{"from":1,"to":2,"reason":"unknown","lastEventId":"abc"}`, ids(3, 5)},
				{"negative", "-1", false, `{"from":1,"to":2,"reason":"unknown","lastEventId":"-1"}`, ids(3, 5)},
				{"overflowing", "99999999999999999999", false, `{"from":1,"to":2,"reason":"unknown","lastEventId":"99999999999999999999"}`, ids(3, 5)},
				{"largest int64", "9223372036854775807", false, `{"from":1,"to":2,"reason":"unknown","lastEventId":"9223372036854775807"}`, ids(3, 5)},
				{"after the last id", "6", false, `{"from":1,"to":2,"reason":"unknown","lastEventId":"6"}`, ids(3, 5)},
				{"decimal point", "4.0", false, `{"from":1,"to":2,"reason":"unknown","lastEventId":"4.0"}`, ids(3, 5)},
				{"hex", "0x4", false, `{"from":1,"to":2,"reason":"unknown","lastEventId":"0x4"}`, ids(3, 5)},
				{"fullwidth digit", "\uff14", false, `{"from":1,"to":2,"reason":"unknown","lastEventId":"` + "\uff14" + `"}`, ids(3, 5)},
				{"invalid UTF-8", "\xff", false, `{"from":1,"to":2,"reason":"unknown","lastEventId":"\ufffd"}`, ids(3, 5)},
				{"10,000 digits", long, false, `{"from":1,"to":2,"reason":"unknown","lastEventId":"` + long[:64] + `..."}`, ids(3, 5)},
				{"garbage query", "zz", true, `{"from":1,"to":2,"reason":"unknown","lastEventId":"zz"}`, ids(3, 5)},
				{"expired", "1", false, `{"from":2,"to":2,"reason":"expired","lastEventId":"1"}`, ids(3, 5)},
				{"with spaces", " 4 ", false, "", ids(5, 5)},
				{"plus sign", "+4", false, "", ids(5, 5)},
				{"the last id", "5", false, "", nil},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					var sub *stream
					if tt.query {
						sub = subscribe(t, url+"?lastEventId="+tt.value)
					} else {
						sub = subscribe(t, url, "Last-Event-ID", tt.value)
					}
					sub.ready()
					if tt.gap != "" {
						if ev := sub.next(); ev.Event != "hookline-gap" || ev.Data != tt.gap || ev.ID != "" {
							t.Errorf("gap event = %+v, want data %s", ev, tt.gap)
						}
					}
					for _, want := range tt.ids {
						if ev := sub.next(); ev.ID != want || ev.Event != "" {
							t.Fatalf("event %+v, want delivery %s", ev, want)
						}
					}
					sub.close()
				})
			}
			// A NUL cannot even reach the relay: the HTTP server refuses it.
			if code, _ := lenient(t, addr(ts), "GET /s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nLast-Event-ID: 1\x002\r\n\r\n", nil); code != http.StatusBadRequest {
				t.Errorf("Last-Event-ID with a NUL = %d, want 400", code)
			}
		})
	}
}

// Channel names from GET /new and NewChannel are unguessable: 128 bits
// from crypto/rand (the issue asks for at least 96), 22 URL-safe
// characters, never repeated, every bit set in about half of them.
func TestChannelNamesAreUnguessable(t *testing.T) {
	srv := mustNew(t, relay.Options{})
	const n = 2000
	seen := map[string]bool{}
	var ones [128]int
	for range n {
		name := srv.NewChannel()
		raw, err := base64.RawURLEncoding.DecodeString(name)
		if err != nil || len(name) != 22 || len(raw) != 16 {
			t.Fatalf("NewChannel() = %q (%v): want 22 base64url characters holding 128 bits", name, err)
		}
		if seen[name] {
			t.Fatalf("NewChannel() repeated %q", name)
		}
		seen[name] = true
		for i := range 128 {
			if raw[i/8]>>(i%8)&1 == 1 {
				ones[i]++
			}
		}
	}
	// For a fair bit, 1000 ± 150 of 2000 fails with probability ~1e-11.
	for i, c := range ones {
		if c < n/2-150 || c > n/2+150 {
			t.Errorf("bit %d is set in %d of %d names: not random", i, c, n)
		}
	}
}

// The relay never makes an outbound request, whatever it receives: its
// code has no HTTP client, no dialer and no resolver. (TestHostileInput
// checks the behaviour; this checks there is no way to.)
func TestRelayMakesNoOutboundRequests(t *testing.T) {
	forbidden := map[string]map[string]bool{
		"net/http": {"Client": true, "DefaultClient": true, "Transport": true, "DefaultTransport": true, "Get": true, "Head": true, "Post": true, "PostForm": true, "NewRequest": true, "NewRequestWithContext": true},
		"net":      {"Dial": true, "DialTimeout": true, "DialTCP": true, "DialUDP": true, "DialIP": true, "DialUnix": true, "Dialer": true, "Resolver": true, "LookupHost": true, "LookupIP": true, "LookupAddr": true},
	}
	forbiddenImports := []string{"net/rpc", "net/smtp", "os/exec", "net/http/httputil", "github.com/hookline/hookline/rest", "github.com/hookline/hookline/proxy"}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		local := map[string]string{} // import name -> path
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbiddenImports {
				if path == bad {
					t.Errorf("%s imports %s", name, path)
				}
			}
			as := filepath.Base(path)
			if imp.Name != nil {
				as = imp.Name.Name
			}
			local[as] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && forbidden[local[id.Name]][sel.Sel.Name] {
				t.Errorf("%s: %s.%s: the relay must not make outbound requests", fset.Position(sel.Pos()), local[id.Name], sel.Sel.Name)
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked only %d files of the relay package", checked)
	}
}

// Senders that trickle (headers that never end, a body that stops) are cut
// off by Serve's timeouts instead of holding a connection for ever, and
// relay nothing.
func TestSlowSendersAreCut(t *testing.T) {
	t.Parallel()
	srv := mustNew(t, relay.Options{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 400 * time.Millisecond})
	addr, cancel, done := serve(t, srv)
	t.Cleanup(func() { cancel(); <-done })
	base := "http://" + addr
	sub := subscribe(t, base+"/slow")
	sub.ready()

	for _, tc := range []struct{ name, request string }{
		{"headers never end", "POST /slow HTTP/1.1\r\nHost: x\r\nX-A: "},
		{"body stops", "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, tc.request)
			conn.SetReadDeadline(time.Now().Add(wait)) // a safety net only
			answer, err := io.ReadAll(conn)            // until the relay closes
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the relay kept the connection open for %s", wait)
			}
			if bytes.HasPrefix(answer, []byte("HTTP/1.1 200")) {
				t.Errorf("answer %q, want no 200", answer)
			}
		})
	}
	mustPost(t, base+"/slow", "after")
	if ev := sub.next(); ev.ID != "1" || !strings.Contains(ev.Data, `"content-length":"5"`) {
		t.Errorf("first delivery = %+v, want the one after the slow senders, id 1", ev)
	}
}
