package relay_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/relay"
)

var channelURLRE = regexp.MustCompile(`^http://127\.0\.0\.1:\d+/[A-Za-z0-9_-]{22}$`)

func TestNewRedirects(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	seen := map[string]bool{}
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodGet} {
		req, _ := http.NewRequest(method, ts.URL+"/new", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusTemporaryRedirect || !channelURLRE.MatchString(loc) {
			t.Errorf("%s /new = %d, Location %q; want 307 to %s", method, resp.StatusCode, loc, channelURLRE)
		}
		if method == http.MethodGet && string(body) != loc+"\n" { // what `curl <relay>/new` prints
			t.Errorf("GET /new body %q, want the channel URL %q on a line", body, loc)
		}
		if seen[loc] {
			t.Errorf("%s /new gave %q twice", method, loc)
		}
		seen[loc] = true
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s /new Cache-Control = %q, want no-store", method, got)
		}
	}
}

func TestNewLocationBase(t *testing.T) {
	tests := []struct {
		name      string
		publicURL string
		headers   string
		want      string // regexp
	}{
		{"request host", "", "Host: relay.test:8080\r\n", `^http://relay\.test:8080/[A-Za-z0-9_-]{22}$`},
		{"forwarded", "", "Host: internal\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: hooks.example.com, internal\r\n", `^https://hooks\.example\.com/[A-Za-z0-9_-]{22}$`},
		{"bogus forwarded proto ignored", "", "Host: relay.test\r\nX-Forwarded-Proto: javascript\r\n", `^http://relay\.test/[A-Za-z0-9_-]{22}$`},
		{"public URL wins", "https://relay.example.com/", "Host: relay.test\r\nX-Forwarded-Host: evil.example\r\n", `^https://relay\.example\.com/[A-Za-z0-9_-]{22}$`},
		{"public URL with a path", "https://example.com/relay", "Host: relay.test\r\n", `^https://example\.com/relay/[A-Za-z0-9_-]{22}$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ts := newRelay(t, relay.Options{PublicURL: tt.publicURL})
			resp, _ := raw(t, addr(ts), "GET /new HTTP/1.1\r\n"+tt.headers+"Connection: close\r\n\r\n")
			if loc := resp.Header.Get("Location"); resp.StatusCode != 307 || !regexp.MustCompile(tt.want).MatchString(loc) {
				t.Errorf("GET /new = %d, Location %q; want 307 matching %s", resp.StatusCode, loc, tt.want)
			}
		})
	}
}

func TestNewRejectsBadForwardedHost(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	resp, body := raw(t, addr(ts), "GET /new HTTP/1.1\r\nHost: relay.test\r\nX-Forwarded-Host: a/b@evil\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(jsonError(t, body), "public URL") {
		t.Errorf("GET /new with a bad X-Forwarded-Host = %d %s, want 400 pointing at the public URL", resp.StatusCode, body)
	}
}

func TestURLAndNewChannel(t *testing.T) {
	srv := mustNew(t, relay.Options{})
	if got := srv.URL(); got != "" {
		t.Errorf("URL() before Serve = %q, want empty", got)
	}
	addr, cancel, done := serve(t, srv)
	waitFor(t, "URL set by Serve", func() bool { return srv.URL() != "" })
	if want := "http://" + addr; srv.URL() != want {
		t.Errorf("URL() = %q, want %q", srv.URL(), want)
	}
	ch := srv.NewChannel()
	if !channelURLRE.MatchString(srv.URL() + "/" + ch) {
		t.Errorf("NewChannel() = %q, want 22 characters of base64url", ch)
	}
	mustPost(t, srv.URL()+"/"+ch, `{}`, "Content-Type", "application/json")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
	if got := mustNew(t, relay.Options{PublicURL: "https://r.example/"}).URL(); got != "https://r.example" {
		t.Errorf("URL() with a public URL = %q, want https://r.example", got)
	}
}

// A GitHub delivery as a plain (smee-client) subscriber sees it: the
// literal is smee.io's message shape.
func TestSmeeMessageShape(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	sub := subscribe(t, ts.URL+"/chan1")
	sub.ready()
	body := `{"action":"opened","issue":{"number":1}}`
	before := time.Now().UnixMilli()
	resp, answer := raw(t, addr(ts), "POST /chan1?ref=main&a[b]=1 HTTP/1.1\r\n"+
		"Host: relay.test\r\n"+
		"User-Agent: GitHub-Hookshot/044aadd\r\n"+
		"Content-Type: application/json\r\n"+
		"X-GitHub-Event: issues\r\n"+
		"X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958\r\n"+
		"X-Hub-Signature-256: sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n"+
		"Connection: close\r\n\r\n"+body)
	after := time.Now().UnixMilli()
	if resp.StatusCode != http.StatusOK || answer != "{\"id\":1,\"subscribers\":1}\n" {
		t.Fatalf("POST = %d %q, want 200 {\"id\":1,\"subscribers\":1}", resp.StatusCode, answer)
	}
	ev := sub.next()
	want := `{"content-length":"40","content-type":"application/json","host":"relay.test",` +
		`"user-agent":"GitHub-Hookshot/044aadd","x-github-delivery":"72d3162e-cc78-11e3-81ab-4c9367dc0958",` +
		`"x-github-event":"issues","x-hub-signature-256":"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",` +
		`"body":{"action":"opened","issue":{"number":1}},"query":{"a[b]":"1","ref":"main"},"timestamp":0}`
	if ev.ID != "1" || ev.Event != "" || normalize(ev.Data) != want {
		t.Errorf("event = id %q event %q\n%s\nwant id 1, unnamed\n%s", ev.ID, ev.Event, ev.Data, want)
	}
	ts64, ok := message(t, ev)["timestamp"].(float64)
	if !ok || int64(ts64) < before || int64(ts64) > after {
		t.Errorf("timestamp = %v, want epoch ms between %d and %d", message(t, ev)["timestamp"], before, after)
	}
}

func TestBodies(t *testing.T) {
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	tests := []struct {
		name        string
		contentType string
		body        string
		wantBody    string // the raw JSON of "body" for a plain subscriber
	}{
		{"JSON exactly as sent", "application/json", `{"b": 1.50, "a":"\u00e9"}`, `{"b": 1.50, "a":"\u00e9"}`},
		{"JSON with charset", "application/json; charset=utf-8", `[1,2]`, `[1,2]`},
		{"+json type", "application/vnd.github+json", `{"x":true}`, `{"x":true}`},
		{"JSON scalar", "application/json", `"just a string"`, `"just a string"`},
		{"invalid JSON", "application/json", `{"a":`, `{}`},
		{"empty JSON body", "application/json", ``, `{}`},
		{"form", "application/x-www-form-urlencoded", "payload=%7B%22zen%22%3A%22hi%22%7D&a[]=1&a[]=2&a[]=3&b=x", `{"a[]":["1","2","3"],"b":"x","payload":"{\"zen\":\"hi\"}"}`},
		{"text", "text/plain", "hello\r\nworld", `{}`},
		{"binary", "application/octet-stream", string(binary), `{}`},
		{"no content type", "", `{"a":1}`, `{}`},
	}
	_, ts := newRelay(t, relay.Options{})
	plain := subscribe(t, ts.URL+"/bodies")
	ext := subscribe(t, ts.URL+"/bodies?hookline=1")
	plain.ready()
	ext.ready()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := []string{}
			if tt.contentType != "" {
				header = append(header, "Content-Type", tt.contentType)
			}
			mustPost(t, ts.URL+"/bodies", tt.body, header...)
			p, e := plain.next(), ext.next()
			if p.ID != e.ID {
				t.Errorf("plain id %q, extended id %q, want the same", p.ID, e.ID)
			}
			var pm struct {
				Body  json.RawMessage `json:"body"`
				BodyB *string         `json:"bodyB"`
			}
			if err := json.Unmarshal([]byte(p.Data), &pm); err != nil {
				t.Fatalf("plain data: %v\n%s", err, p.Data)
			}
			if string(pm.Body) != tt.wantBody {
				t.Errorf("plain body = %s, want %s", pm.Body, tt.wantBody)
			}
			if pm.BodyB != nil {
				t.Errorf("plain message has bodyB; only subscribers that ask get it")
			}
			var em struct {
				Body  json.RawMessage `json:"body"`
				BodyB *string         `json:"bodyB"`
			}
			if err := json.Unmarshal([]byte(e.Data), &em); err != nil {
				t.Fatalf("extended data: %v\n%s", err, e.Data)
			}
			// The exact body once: in "body" as it is (bodyB null), or in
			// bodyB alone.
			got, err := []byte(em.Body), error(nil)
			if em.BodyB != nil {
				got, err = base64.StdEncoding.DecodeString(*em.BodyB)
				if em.Body != nil {
					t.Errorf("hookline's message has body %s and bodyB: one carries it", em.Body)
				}
			}
			if err != nil || string(got) != tt.body {
				t.Errorf("hookline's message holds %q (%v), want %q", got, err, tt.body)
			}
		})
	}
}

// A JSON body with line breaks (CRLF included) continues on new data: lines,
// which clients join with "\n": still the same JSON, and byte-exact in
// hookline's bodyB.
func TestJSONBodyWithLineBreaks(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	plain, sub := subscribe(t, ts.URL+"/lines"), subscribe(t, ts.URL+"/lines", "X-Hookline-Stream", "1")
	plain.ready()
	sub.ready()
	body := "{\r\n  \"a\": 1,\r  \"b\": [\n2\n]\n}\n"
	mustPost(t, ts.URL+"/lines", body, "Content-Type", "application/json")
	var m struct {
		Body  map[string]any `json:"body"`
		BodyB []byte         `json:"bodyB"`
	}
	for _, ev := range []event{plain.next(), sub.next()} {
		if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
			t.Fatalf("data is not JSON: %v\n%q", err, ev.Data)
		}
	}
	if fmt.Sprint(m.Body) != "map[a:1 b:[2]]" || string(m.BodyB) != body {
		t.Errorf("body = %v, bodyB = %q; want map[a:1 b:[2]] and %q", m.Body, m.BodyB, body)
	}
}

// Headers that smee-client would turn into request headers fetch refuses, or
// that would clash with message keys, never reach a message.
func TestHeaderHygiene(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	plain := subscribe(t, ts.URL+"/hyg")
	ext := subscribe(t, ts.URL+"/hyg?hookline=true")
	plain.ready()
	ext.ready()
	resp, _ := raw(t, addr(ts), "POST /hyg HTTP/1.1\r\n"+
		"Host: relay.test\r\n"+
		"Connection: X-Private, close\r\n"+
		"X-Private: secret-hop\r\n"+
		"Keep-Alive: timeout=5\r\n"+
		"Upgrade: websocket\r\n"+
		"Proxy-Connection: keep-alive\r\n"+
		"TE: trailers\r\n"+
		"Body: evil\r\n"+
		"Query: evil\r\n"+
		"Timestamp: 1\r\n"+
		"Rawdata: evil\r\n"+
		"BodyB: evil\r\n"+
		"Sec-Fetch-Mode: navigate\r\n"+
		"Cookie: a=1\r\n"+
		"Cookie: b=2\r\n"+
		"X-Multi: 1\r\n"+
		"X-Multi: 2\r\n"+
		"Content-Type: application/json\r\n"+
		"Content-Length: 2\r\n\r\n{}")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST = %d, want 200", resp.StatusCode)
	}
	wantPlain := `{"content-length":"2","content-type":"application/json","cookie":"a=1; b=2","host":"relay.test","x-multi":"1, 2","body":{},"query":{},"timestamp":0}`
	if got := normalize(plain.next().Data); got != wantPlain {
		t.Errorf("plain message\n%s\nwant\n%s", got, wantPlain)
	}
	wantExt := `{"content-length":"2","content-type":"application/json","cookie":"a=1; b=2","host":"relay.test","sec-fetch-mode":"navigate","x-multi":"1, 2","body":{},"query":{},"timestamp":0,"bodyB":null}`
	if got := normalize(ext.next().Data); got != wantExt {
		t.Errorf("hookline's message\n%s\nwant\n%s", got, wantExt)
	}
}

func TestSecFetchModeKeptWhenFetchAcceptsIt(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	sub := subscribe(t, ts.URL+"/mode")
	sub.ready()
	mustPost(t, ts.URL+"/mode", "{}", "Sec-Fetch-Mode", "cors")
	if m := message(t, sub.next()); m["sec-fetch-mode"] != "cors" {
		t.Errorf("sec-fetch-mode = %v, want cors", m["sec-fetch-mode"])
	}
}

func TestHeadersTooLarge(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	code, body := post(t, ts.URL+"/big", "{}", "X-Big", strings.Repeat("a", 17<<10))
	if code != http.StatusRequestHeaderFieldsTooLarge || !strings.Contains(jsonError(t, body), "headers") {
		t.Errorf("POST with 17 KiB of headers = %d %s, want 431 with a message", code, body)
	}
}

// The body limit: a body of exactly MaxBodyBytes is taken and relayed
// whole, one byte more is refused 413 naming the limit, with or without a
// Content-Length. At 1 MiB: the mechanism is the same at any size, and a
// 25 MiB body costs seconds of CPU under the race detector; the default,
// GitHub's 25 MiB, is TestBodyLimitDefaultIsGitHubs.
func TestBodyLimit(t *testing.T) {
	const limit = 1 << 20
	srv, ts := newRelay(t, relay.Options{MaxBodyBytes: limit})
	sub := subscribe(t, ts.URL+"/limit?hookline=1")
	sub.ready()

	exact := bytes.Repeat([]byte("x"), limit)
	code, answer := post(t, ts.URL+"/limit", string(exact), "Content-Type", "application/octet-stream")
	if code != http.StatusOK {
		t.Fatalf("POST of exactly the limit = %d %s, want 200", code, answer)
	}
	got, err := bodyOf(t, ts.URL+"/limit", sub.next())
	if err != nil || !bytes.Equal(got, exact) {
		t.Errorf("a delivery of the limit arrived with %d bytes (%v), want %d", len(got), err, limit)
	}

	over := string(exact) + "x"
	code, answer = post(t, ts.URL+"/limit", over)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(jsonError(t, answer), "limit of 1048576 bytes") {
		t.Errorf("POST of the limit + 1 = %d %s, want 413 naming the limit", code, answer)
	}

	// Without a Content-Length, the limit is found while reading.
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/limit", io.MultiReader(strings.NewReader(over)))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked POST of the limit + 1 = %d %s, want 413", resp.StatusCode, b)
	}
	if n := srv.Stats().Refused.TooLarge; n != 2 {
		t.Errorf("Stats().Refused.TooLarge = %d, want the 2 refused", n)
	}
}

// By default the limit is GitHub's, 25 MiB: a POST that announces one byte
// more is refused from its Content-Length, before a byte of its body is
// read, with a message naming the limit.
func TestBodyLimitDefaultIsGitHubs(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	resp, answer := raw(t, addr(ts), "POST /limit HTTP/1.1\r\nHost: relay\r\nContent-Type: application/octet-stream\r\nContent-Length: 26214401\r\n\r\n")
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(jsonError(t, answer), "limit of 26214400 bytes") {
		t.Errorf("POST announcing 25 MiB + 1 = %d %s, want 413 naming the limit of 25 MiB", resp.StatusCode, answer)
	}
}

func TestReplayAfterLastEventID(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	url := ts.URL + "/replay"
	for i := 1; i <= 3; i++ {
		mustPost(t, url, fmt.Sprintf(`{"n":%d}`, i), "Content-Type", "application/json")
	}
	tests := []struct {
		name    string
		url     string
		header  []string
		wantIDs []string // replayed before the live delivery
	}{
		{"no Last-Event-ID: live only", url, nil, nil},
		{"after 1", url, []string{"Last-Event-ID", "1"}, ids(2, 3)},
		{"after 0: everything", url, []string{"Last-Event-ID", "0"}, ids(1, 3)},
		{"after the last: nothing", url, []string{"Last-Event-ID", "3"}, nil},
		{"query parameter", url + "?lastEventId=2", nil, ids(3, 3)},
		{"header wins over query", url + "?lastEventId=0", []string{"Last-Event-ID", "2"}, ids(3, 3)},
		{"empty header is none", url, []string{"Last-Event-ID", " "}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub := subscribe(t, tt.url, tt.header...)
			sub.ready()
			var got []string
			for range tt.wantIDs {
				ev := sub.next()
				got = append(got, ev.ID)
				if n := message(t, ev)["body"].(map[string]any)["n"]; fmt.Sprint(n) != ev.ID {
					t.Errorf("event %s carries delivery %v", ev.ID, n)
				}
			}
			if !slices.Equal(got, tt.wantIDs) {
				t.Errorf("replayed ids %v, want %v", got, tt.wantIDs)
			}
			sub.close()
		})
	}
	// The ids go on: a live delivery after the replay is 4.
	sub := subscribe(t, url, "Last-Event-ID", "3")
	sub.ready()
	mustPost(t, url, `{"n":4}`, "Content-Type", "application/json")
	if ev := sub.next(); ev.ID != "4" {
		t.Errorf("live delivery id = %q, want 4", ev.ID)
	}
}

// Deliveries posted while a client resubscribes are neither lost nor
// repeated between its replay and its live stream.
func TestReplayThenLiveHasNoGapsOrDuplicates(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{HistoryCount: 1000})
	url := ts.URL + "/race"
	const n = 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= n; i++ {
			mustPost(t, url, "{}")
		}
	}()
	waitFor(t, "the first deliveries", func() bool { return srv.Stats().Deliveries >= 20 })
	sub := subscribe(t, url, "Last-Event-ID", "0")
	sub.ready()
	<-done
	for i := 1; i <= n; i++ {
		if ev := sub.next(); ev.ID != strconv.Itoa(i) {
			t.Fatalf("event %d has id %q, want %d", i, ev.ID, i)
		}
	}
}

func TestGapEvents(t *testing.T) {
	_, ts := newRelay(t, relay.Options{HistoryCount: 2})
	url := ts.URL + "/gap"
	for i := 1; i <= 5; i++ {
		mustPost(t, url, "{}")
	}
	tests := []struct {
		name    string
		last    string
		wantGap string // data of the hookline-gap event, "" for none
		wantIDs []string
	}{
		{"within the history", "3", "", ids(4, 5)},
		{"older than the history", "1", `{"from":2,"to":3,"reason":"expired","lastEventId":"1"}`, ids(4, 5)},
		{"zero", "0", `{"from":1,"to":3,"reason":"expired","lastEventId":"0"}`, ids(4, 5)},
		{"garbage", "abc", `{"from":1,"to":3,"reason":"unknown","lastEventId":"abc"}`, ids(4, 5)},
		{"ahead of the channel (a restarted relay)", "99", `{"from":1,"to":3,"reason":"unknown","lastEventId":"99"}`, ids(4, 5)},
		{"negative", "-1", `{"from":1,"to":3,"reason":"unknown","lastEventId":"-1"}`, ids(4, 5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub := subscribe(t, url, "Last-Event-ID", tt.last)
			sub.ready()
			if tt.wantGap != "" {
				ev := sub.next()
				if ev.Event != "hookline-gap" || ev.ID != "" || ev.Data != tt.wantGap {
					t.Errorf("event = %+v, want hookline-gap without id, data %s", ev, tt.wantGap)
				}
			}
			var got []string
			for range tt.wantIDs {
				got = append(got, sub.next().ID)
			}
			if !slices.Equal(got, tt.wantIDs) {
				t.Errorf("replayed ids %v, want %v", got, tt.wantIDs)
			}
			sub.close()
		})
	}
}

func TestGapOnAFreshChannelWithUnknownID(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	sub := subscribe(t, ts.URL+"/fresh", "Last-Event-ID", "42")
	sub.ready()
	if ev := sub.next(); ev.Event != "hookline-gap" || ev.Data != `{"from":1,"to":0,"reason":"unknown","lastEventId":"42"}` {
		t.Errorf("event = %+v, want the unknown gap from 1 to 0", ev)
	}
}

func TestHistoryBytes(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{HistoryBytes: 10 << 10})
	url := ts.URL + "/bytes"
	for i := 0; i < 5; i++ {
		mustPost(t, url, strings.Repeat("a", 3<<10))
	}
	// Each delivery counts 3 KiB plus headers and overhead: three fit.
	if st := srv.Stats(); st.Retained != 2 && st.Retained != 3 {
		t.Fatalf("retained %d deliveries of 3 KiB in 10 KiB, want 2 or 3", st.Retained)
	}
	// The newest is kept even when it alone is over the limit.
	mustPost(t, url, strings.Repeat("b", 20<<10))
	if st := srv.Stats(); st.Retained != 1 || st.HistoryBytes < 20<<10 {
		t.Errorf("after a 20 KiB delivery: retained %d (%d bytes), want just it", st.Retained, st.HistoryBytes)
	}
	sub := subscribe(t, url, "Last-Event-ID", "0")
	sub.ready()
	if ev := sub.next(); ev.Event != "hookline-gap" || !strings.HasPrefix(ev.Data, `{"from":1,"to":5,`) {
		t.Errorf("event = %+v, want a gap from 1 to 5", ev)
	}
	if ev := sub.next(); ev.ID != "6" {
		t.Errorf("replayed id %q, want 6", ev.ID)
	}
}

func TestTotalHistoryBytesEvictsLeastRecentChannels(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{TotalHistoryBytes: 40 << 10})
	body := strings.Repeat("z", 8<<10)
	for _, ch := range []string{"old", "mid", "recent"} {
		for i := 0; i < 2; i++ {
			mustPost(t, ts.URL+"/"+ch, body)
		}
	}
	// 6 deliveries of 8 KiB and more do not fit in 40 KiB: "old" went
	// first, entirely, and was forgotten.
	st := srv.Stats()
	if st.HistoryBytes > 40<<10 || st.Retained != 4 || st.Channels != 2 {
		t.Errorf("stats %+v, want at most 40 KiB, 4 deliveries in 2 channels", st)
	}
	sub := subscribe(t, ts.URL+"/mid", "Last-Event-ID", "0")
	sub.ready()
	if ev := sub.next(); ev.ID != "1" {
		t.Errorf("mid's first retained delivery is %+v, want id 1", ev)
	}
}

// A full channel makes room for a newcomer by cutting off its oldest
// stream (which resumes with Last-Event-ID): strangers holding every
// stream of a channel cannot lock its owner out. Before, the newcomer got
// 429, every time.
func TestSubscriberCap(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{MaxSubscribers: 2})
	stranger1 := subscribe(t, ts.URL+"/cap")
	stranger1.ready()
	stranger2 := subscribe(t, ts.URL+"/cap?hookline=1")
	stranger2.ready()
	owner := subscribe(t, ts.URL+"/cap")
	owner.ready()
	stranger1.end() // the oldest stream ends (end fails the test if it does not)
	if st := srv.Stats(); st.Subscribers != 2 || st.CutOff != 1 {
		t.Errorf("stats = %+v, want 2 subscribers and 1 cut off", st)
	}
	mustPost(t, ts.URL+"/cap", "{}")
	if ev := owner.next(); ev.ID != "1" {
		t.Errorf("the owner got %+v, want delivery 1", ev)
	}
	// Another channel is not affected.
	subscribe(t, ts.URL+"/other").ready()
}

// A subscriber that stops reading is cut off once its queue is full, instead
// of making the relay buffer without bound; it resumes from the history.
func TestSlowSubscriberIsCutOff(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{SubscriberQueue: 8, HistoryCount: 1000, HistoryBytes: 1 << 30, TotalHistoryBytes: 1 << 30})
	conn, err := net.Dial("tcp", addr(ts))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /slow?hookline=1 HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
	waitFor(t, "the subscriber", func() bool { return srv.Stats().Subscribers == 1 })

	body := strings.Repeat("s", 256<<10)
	posted := 0
	for srv.Stats().CutOff == 0 {
		if posted == 2000 {
			t.Fatal("posted 500 MiB and the subscriber that does not read is still there")
		}
		mustPost(t, ts.URL+"/slow", body)
		posted++
	}
	if st := srv.Stats(); st.Subscribers != 0 || st.CutOff != 1 {
		t.Errorf("stats %+v after the cut-off, want no subscriber, 1 cut off", st)
	}
	// Its stream ends: what was buffered can be read, then EOF or a reset,
	// but not a timeout.
	conn.SetReadDeadline(time.Now().Add(wait))
	if _, err := io.Copy(io.Discard, conn); err != nil && strings.Contains(err.Error(), "timeout") {
		t.Errorf("the slow subscriber's connection is still open: %v", err)
	}
	// Resuming loses nothing that is still in the history.
	again := subscribe(t, ts.URL+"/slow", "Last-Event-ID", "1")
	again.ready()
	for i := 2; i <= posted; i++ {
		if ev := again.next(); ev.ID != strconv.Itoa(i) {
			t.Fatalf("resumed stream got id %q, want %d", ev.ID, i)
		}
	}
}

// The ready event names the channel's last id when the stream joined, so
// that a client that has received nothing yet can resume after it.
func TestReadyNamesTheLastID(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	url := ts.URL + "/readylast"
	if last := subscribe(t, url).ready(); last != 0 {
		t.Errorf("ready of an unused channel says last %d, want 0", last)
	}
	for range 3 {
		mustPost(t, url, "{}")
	}
	if last := subscribe(t, url).ready(); last != 3 {
		t.Errorf("ready after 3 deliveries says last %d, want 3", last)
	}
	if last := subscribe(t, url, "Last-Event-ID", "1").ready(); last != 3 {
		t.Errorf("ready of a resuming stream says last %d, want 3", last)
	}
}

// A short channel name is accepted, and the log warns that it can be
// guessed; a name from /new is not warned about.
func TestShortChannelNameIsAWarning(t *testing.T) {
	var logs relaytest.Buffer
	_, ts := newRelay(t, relay.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	subscribe(t, ts.URL+"/test").ready()
	long := "AbCdEfGhIjKlMnOpQrStUv"
	subscribe(t, ts.URL+"/"+long).ready()
	if n := strings.Count(logs.String(), "short channel name"); n != 1 || !strings.Contains(logs.String(), "channel=test") {
		t.Errorf("%d warnings, want 1 for channel test; logs:\n%s", n, logs.String())
	}
}

func TestPing(t *testing.T) {
	_, ts := newRelay(t, relay.Options{PingInterval: 10 * time.Millisecond})
	sub := subscribe(t, ts.URL+"/ping")
	sub.ready()
	select {
	case ev := <-sub.events:
		if ev.Event != "ping" || ev.Data != "{}" || ev.ID != "" {
			t.Errorf("event = %+v, want ping with data {} and no id", ev)
		}
	case <-time.After(wait):
		t.Fatal("no ping")
	}
}

func TestStreamHeaders(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	sub := subscribe(t, ts.URL+"/hdrs")
	for name, want := range map[string]string{
		"Cache-Control":               "no-cache",
		"X-Accel-Buffering":           "no",
		"Access-Control-Allow-Origin": "*",
	} {
		if got := sub.resp.Header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

func TestRedeliver(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	url := ts.URL + "/redo"
	sub := subscribe(t, url+"?hookline=1")
	sub.ready()
	mustPost(t, url+"?q=1", "a=1&b=2", "Content-Type", "application/x-www-form-urlencoded", "X-GitHub-Delivery", "d-1")
	first := sub.next()

	// The redeliver request's own headers, query and body are ignored.
	code, answer := post(t, url+"/redeliver/1?q=evil", `{"evil":true}`, "X-Injected", "yes", "Content-Type", "application/json")
	if code != http.StatusOK || answer != "{\"id\":2,\"redeliveryOf\":1}\n" {
		t.Fatalf("redeliver = %d %q, want 200 {\"id\":2,\"redeliveryOf\":1}", code, answer)
	}
	second := sub.next()
	if second.ID != "2" {
		t.Errorf("redelivery id = %q, want 2", second.ID)
	}
	a, b := message(t, first), message(t, second)
	delete(a, "timestamp")
	delete(b, "timestamp")
	// The relay marks it: a client tells it from a sender's own retry.
	if mark := b["x-hookline-redelivery-of"]; mark != "1" {
		t.Errorf("redelivery's x-hookline-redelivery-of = %v, want 1", mark)
	}
	delete(b, "x-hookline-redelivery-of")
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("redelivery differs from the delivery:\n%v\n%v", b, a)
	}

	for _, tt := range []struct {
		path string
		code int
	}{
		{"/redo/redeliver/99", http.StatusNotFound},
		{"/redo/redeliver/0", http.StatusNotFound},
		{"/redo/redeliver/x", http.StatusNotFound},
		{"/nochannel/redeliver/1", http.StatusNotFound},
	} {
		if code, body := post(t, ts.URL+tt.path, ""); code != tt.code {
			t.Errorf("POST %s = %d %s, want %d", tt.path, code, body, tt.code)
		}
	}
	// A redelivery of the redelivery names the first delivery; a sender
	// cannot set the mark.
	if code, answer := post(t, url+"/redeliver/2", ""); code != http.StatusOK {
		t.Fatalf("redeliver 2 = %d %s", code, answer)
	}
	if mark := message(t, sub.next())["x-hookline-redelivery-of"]; mark != "1" {
		t.Errorf("redelivery of a redelivery: x-hookline-redelivery-of = %v, want 1", mark)
	}
	mustPost(t, url, "{}", "Content-Type", "application/json", "X-Hookline-Redelivery-Of", "1")
	if m := message(t, sub.next()); m["x-hookline-redelivery-of"] != nil {
		t.Errorf("a sender's x-hookline-redelivery-of was relayed: %v", m["x-hookline-redelivery-of"])
	}
	resp, err := http.Get(url + "/redeliver/1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST, OPTIONS" {
		t.Errorf("GET redeliver = %d (Allow %q), want 405 (Allow: POST, OPTIONS)", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestChannelNames(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	long := strings.Repeat("a", 128)
	tests := []struct {
		name, path string
		code       int
		wantErr    string
	}{
		{"128 characters", "/" + long, http.StatusOK, ""},
		{"all allowed characters", "/AZaz09-_", http.StatusOK, ""},
		{"129 characters", "/" + long + "a", http.StatusNotFound, "129 characters"},
		{"dot", "/a.b", http.StatusNotFound, "A-Z a-z 0-9 - _"},
		{"dot dot", "/../healthz", http.StatusNotFound, "A-Z a-z 0-9 - _"},
		{"escaped slash", "/a%2Fb", http.StatusNotFound, "A-Z a-z 0-9 - _"},
		{"escaped dot dot", "/%2e%2e", http.StatusNotFound, "A-Z a-z 0-9 - _"},
		{"deeper path", "/a/b", http.StatusNotFound, "no route"},
		{"trailing slash", "/abc/", http.StatusNotFound, "no route"},
		{"empty name", "//x", http.StatusNotFound, "GET /new"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := raw(t, addr(ts), "POST "+tt.path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
			if resp.StatusCode != tt.code {
				t.Fatalf("POST %s = %d %s, want %d", tt.path, resp.StatusCode, body, tt.code)
			}
			if tt.wantErr != "" && !strings.Contains(jsonError(t, body), tt.wantErr) {
				t.Errorf("POST %s error %s, want it to mention %q", tt.path, body, tt.wantErr)
			}
		})
	}
}

func TestMethods(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	tests := []struct {
		method, path string
		code         int
		allow        string
	}{
		{http.MethodPut, "/ch", http.StatusMethodNotAllowed, "GET, HEAD, POST, OPTIONS"},
		{http.MethodDelete, "/ch", http.StatusMethodNotAllowed, "GET, HEAD, POST, OPTIONS"},
		{http.MethodPost, "/new", http.StatusMethodNotAllowed, "GET, HEAD, OPTIONS"},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, "GET, HEAD, OPTIONS"},
		{http.MethodOptions, "/ch", http.StatusNoContent, "GET, HEAD, POST, OPTIONS"},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, ts.URL+tt.path, nil)
		req.Header.Set("Access-Control-Request-Headers", "content-type, x-github-event")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.code || resp.Header.Get("Allow") != tt.allow {
			t.Errorf("%s %s = %d (Allow %q), want %d (Allow %q)", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Allow"), tt.code, tt.allow)
		}
		if tt.method == http.MethodOptions {
			if got := resp.Header.Get("Access-Control-Allow-Headers"); got != "content-type, x-github-event" {
				t.Errorf("preflight Access-Control-Allow-Headers = %q", got)
			}
		}
	}
}

func TestPages(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	tests := []struct {
		path, accept, wantType, wantText string
	}{
		{"/", "", "text/html; charset=utf-8", "Start a new channel"},
		{"/somechannel", "text/html,application/xhtml+xml,*/*;q=0.8", "text/html; charset=utf-8", `id="deliveries"`},
		{"/somechannel", "", "text/html; charset=utf-8", `src="assets/app.js"`},
		{"/assets/app.js", "", "text/javascript; charset=utf-8", "new EventSource("},
		{"/assets/style.css", "", "text/css; charset=utf-8", ".deliveries"},
		{"/assets/icon.svg", "", "image/svg+xml", "<svg"},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+tt.path, nil)
		if tt.accept != "" {
			req.Header.Set("Accept", tt.accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tt.wantType || !strings.Contains(string(b), tt.wantText) {
			t.Errorf("GET %s = %d %q, want 200 %s containing %q", tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), tt.wantType, tt.wantText)
		}
		if strings.HasPrefix(tt.wantType, "text/html") && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("GET %s has no strict Content-Security-Policy", tt.path)
		}
	}
	for _, p := range []string{"/assets/nope.js", "/assets/channel.html", "/assets/../relay.go"} {
		if resp, _ := raw(t, addr(ts), "GET "+p+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
		}
	}
	resp, _ := raw(t, addr(ts), "HEAD /somechannel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("HEAD /somechannel = %d %q, want the page's headers", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestHealthz(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{})
	subscribe(t, ts.URL+"/h1").ready()
	mustPost(t, ts.URL+"/h1", "{}")
	mustPost(t, ts.URL+"/h2", "{}")
	resp, err := http.Get(ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Status                                  string
		Channels, Subscribers, Retained, CutOff int
		Deliveries, HistoryBytes, UptimeSeconds int64
	}
	err = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /healthz = %d %v", resp.StatusCode, err)
	}
	if h.Status != "ok" || h.Channels != 2 || h.Subscribers != 1 || h.Deliveries != 2 || h.Retained != 2 || h.HistoryBytes <= 0 {
		t.Errorf("healthz = %+v, want ok, 2 channels, 1 subscriber, 2 deliveries retained", h)
	}
	srv.Close()
	resp, err = http.Get(ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /healthz after Close = %d, want 503", resp.StatusCode)
	}
}

func TestCloseEndsStreamsAndRefusesNewOnes(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{})
	sub := subscribe(t, ts.URL+"/bye")
	sub.ready()
	srv.Close()
	if err := sub.end(); !isCleanEnd(err) {
		t.Errorf("stream ended with %v, want a clean EOF", err)
	}
	resp, body := raw(t, addr(ts), "GET /bye HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("subscribe after Close = %d %s, want 503", resp.StatusCode, body)
	}
	// Deliveries are still accepted (in-flight POSTs finish).
	mustPost(t, ts.URL+"/bye", "{}")
}

// Serve's shutdown ends streams cleanly and lets a POST still uploading
// finish, then returns nil.
func TestServeShutdown(t *testing.T) {
	srv := mustNew(t, relay.Options{})
	addr, cancel, done := serve(t, srv)
	base := "http://" + addr

	sub := subscribe(t, base+"/down")
	sub.ready()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"in":"flight"}`
	// With Expect: 100-continue, the relay says "100 Continue" when its
	// handler starts reading the body: the POST is then in flight.
	conn.SetReadDeadline(time.Now().Add(wait))
	io.WriteString(conn, "POST /down HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("POST with Expect: 100-continue: %v %v, want 100 Continue", resp, err)
	}
	io.WriteString(conn, body[:5])

	cancel()
	if err := sub.end(); !isCleanEnd(err) {
		t.Errorf("stream ended with %v, want a clean EOF", err)
	}
	io.WriteString(conn, body[5:])
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("in-flight POST: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("in-flight POST = %d, want 200", resp.StatusCode)
	}
	if err := served(t, done); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("the listener still accepts connections after Serve returned")
	}
}

// A connection that has not sent a request when the relay stops (a
// client's transport dials one more than it uses; browsers and load
// balancers open them ahead) is closed at once, as one that came a moment
// later would be refused: net/http's Shutdown waits five seconds for such a
// connection, so every stop of a relay took five seconds (longer than this
// ShutdownTimeout, so that Serve reported requests cut).
func TestServeShutdownClosesConnectionsWithoutARequest(t *testing.T) {
	srv := mustNew(t, relay.Options{ShutdownTimeout: 3 * time.Second})
	addr, cancel, done := serve(t, srv)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testenv.Poll(t, "the relay to hold the connection", time.Millisecond, func() bool { return srv.Stats().Connections == 1 })
	cancel()
	if err := served(t, done); err != nil {
		t.Errorf("Serve = %v, want nil: nothing was in flight", err)
	}
	conn.SetReadDeadline(time.Now().Add(wait))
	if n, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the idle connection after Serve returned: read %d bytes, %v; want it closed (EOF)", n, err)
	}
}

func TestStreamClientLeaves(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{})
	sub := subscribe(t, ts.URL+"/leave")
	sub.ready()
	if st := srv.Stats(); st.Subscribers != 1 || st.Channels != 1 {
		t.Fatalf("stats %+v, want 1 subscriber on 1 channel", st)
	}
	sub.close()
	// A channel without subscribers or history is forgotten.
	waitFor(t, "the subscriber to leave", func() bool {
		st := srv.Stats()
		return st.Subscribers == 0 && st.Channels == 0
	})
}

// One hookline format, chosen by a header or a query parameter: the
// message without "body", the bytes in bodyB alone; a stream that asks for
// neither gets smee.io's shape, and the old X-Hookline-Lean header alone
// selects nothing.
func TestHooklineFormat(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	byHeader := subscribe(t, ts.URL+"/fmt", "X-Hookline-Stream", "1")
	byQuery := subscribe(t, ts.URL+"/fmt?hookline=1")
	plain := subscribe(t, ts.URL+"/fmt", "X-Hookline-Lean", "1")
	for _, s := range []*stream{byHeader, byQuery, plain} {
		s.ready()
	}
	body := "{\r\n  \"a\": 1\n}\n"
	mustPost(t, ts.URL+"/fmt?x=1", body, "Content-Type", "application/json", "X-GitHub-Event", "push")
	for _, tc := range []struct {
		s                 *stream
		wantBody, wantB64 bool
	}{{byHeader, false, true}, {byQuery, false, true}, {plain, true, false}} {
		ev := tc.s.next()
		m := message(t, ev)
		_, hasBody := m["body"]
		b64, hasB64 := m["bodyB"].(string)
		if hasBody != tc.wantBody || hasB64 != tc.wantB64 || ev.ID != "1" || m["x-github-event"] != "push" || m["query"] == nil || m["timestamp"] == nil {
			t.Errorf("message %s: body %v bodyB %v, want %v %v, with id, headers, query and timestamp", ev.Data, hasBody, hasB64, tc.wantBody, tc.wantB64)
		}
		if got, _ := base64.StdEncoding.DecodeString(b64); hasB64 && string(got) != body {
			t.Errorf("bodyB %q, want %q", got, body)
		}
	}
}

// TestCountPerChannel: with Options.CountPerChannel, Stats counts each
// channel's deliveries by its key, never its name; without, not at all.
func TestCountPerChannel(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{CountPerChannel: true})
	for _, ch := range []string{"chanA", "chanA", "chanB"} {
		if code, answer := post(t, ts.URL+"/"+ch, `{}`); code != http.StatusOK {
			t.Fatal(code, answer)
		}
	}
	got := srv.Stats().PerChannel
	sum := sha256.Sum256([]byte("chanA"))
	if key := "sha256:" + hex.EncodeToString(sum[:])[:12]; relay.ChannelKey("chanA") != key {
		t.Errorf("ChannelKey(chanA) = %s, want %s", relay.ChannelKey("chanA"), key)
	}
	if len(got) != 2 || got[relay.ChannelKey("chanA")] != 2 || got[relay.ChannelKey("chanB")] != 1 {
		t.Errorf("PerChannel = %v", got)
	}
	for k := range got {
		if strings.Contains(k, "chan") || !strings.HasPrefix(k, "sha256:") {
			t.Errorf("key %q shows the name, or is not a hash", k)
		}
	}
	if srv2, _ := newRelay(t, relay.Options{}); srv2.Stats().PerChannel != nil {
		t.Error("PerChannel without the option")
	}
}

// TestStatsSent: each delivery written to a subscriber's stream counts
// once per subscriber.
func TestStatsSent(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{})
	a := subscribe(t, ts.URL+"/sent?hookline=1")
	a.ready()
	b := subscribe(t, ts.URL+"/sent?hookline=1")
	b.ready()
	if code, answer := post(t, ts.URL+"/sent", `{}`); code != http.StatusOK {
		t.Fatal(code, answer)
	}
	a.next()
	b.next()
	// The count follows the write the client read.
	testenv.Poll(t, "Stats().Sent to be 2 (one delivery, two subscribers)", 5*time.Millisecond, func() bool { return srv.Stats().Sent == 2 })
}

// TestCountPerChannelIsBounded: 20,000 channel names POSTed to a relay that
// counts per channel (the attack: no auth needed) leave at most
// MaxChannelSeries keys and one "other", whose counts add up to every
// delivery, and the heap within 50 MiB of where it started.
func TestCountPerChannelIsBounded(t *testing.T) {
	const names, series = 20000, 1000
	srv := mustNew(t, relay.Options{CountPerChannel: true, MaxChannelSeries: series})
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	start := heap()
	for i := range names {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, fmt.Sprintf("/stranger-%022d", i), strings.NewReader(`{"zen":"Keep it logically awesome."}`)))
		if rec.Code != http.StatusOK {
			t.Fatalf("POST #%d = %d %s", i, rec.Code, rec.Body)
		}
	}
	// The latest channel counted again stays counted apart.
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, fmt.Sprintf("/stranger-%022d", names-1), strings.NewReader(`{}`)))
	got := srv.Stats().PerChannel
	var total int64
	for _, n := range got {
		total += n
	}
	if len(got) != series+1 || got[relay.OtherChannels] != names-series || total != names+1 || got[relay.ChannelKey(fmt.Sprintf("stranger-%022d", names-1))] != 2 {
		t.Errorf("PerChannel has %d keys, other %d, total %d; want %d keys, other %d, total %d, the last channel 2",
			len(got), got[relay.OtherChannels], total, series+1, names-series, names+1)
	}
	if grew := int64(heap()) - int64(start); grew > 50<<20 {
		t.Errorf("the heap grew by %d MiB over 20,000 channels, want at most 50", grew>>20)
	}
}
