package relay_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/relay"
)

// gosmeeClient subscribes as the gosmee client does (chmouel/gosmee
// v0.32.0, gosmee/client.go: checkServerVersion, prepareSubscription,
// consumeSSEStream, isClientControlEvent, parse), written from that code:
// GET <base>/version first, then GET <base>/events/<channel> with its
// headers and Last-Event-ID, events read line by line.
type gosmeeClient struct {
	t    *testing.T
	resp *http.Response
	br   *bufio.Reader
}

// gosmeeMessage is what gosmee's parse makes of a message.
type gosmeeMessage struct {
	id        string
	headers   map[string]string
	body      []byte
	timestamp time.Time
	keys      []string
}

func gosmeeSubscribe(t *testing.T, base, channel, lastID string) *gosmeeClient {
	t.Helper()
	// checkServerVersion: a 404 stops the client; a "version" newer than
	// its own too.
	resp, err := http.Get(base + "/version")
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Version string }
	err = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || v.Version != "" {
		t.Fatalf("GET /version = %d, version %q (%v); gosmee's client wants 200 and no version newer than its own", resp.StatusCode, v.Version, err)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/events/"+channel, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	req.Header.Set("User-Agent", "gosmee/v0.32.0")
	req.Header.Set("X-Accel-Buffering", "no")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		t.Fatalf("GET /events/%s = %s", channel, resp.Status)
	}
	c := &gosmeeClient{t: t, resp: resp, br: bufio.NewReader(resp.Body)}
	t.Cleanup(func() { resp.Body.Close() })
	return c
}

// next returns the next event as gosmee's loop dispatches it: its name, id
// and data lines joined; comments skipped.
func (c *gosmeeClient) next() (name, id, data string) {
	c.t.Helper()
	var lines []string
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			c.t.Fatalf("stream ended: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if len(lines) > 0 || name != "" || id != "" {
				return name, id, strings.Join(lines, "\n")
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "data:"):
			lines = append(lines, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		}
	}
}

// control is gosmee's isClientControlEvent.
func gosmeeControl(name, data string) bool {
	if name == "ready" || name == "ping" || data == "ready" {
		return true
	}
	var msg map[string]any
	if json.Unmarshal([]byte(data), &msg) != nil || len(msg) != 1 {
		return false
	}
	m, ok := msg["message"].(string)
	return ok && (strings.EqualFold(m, "connected") || strings.EqualFold(m, "ready"))
}

// message reads the next delivery, as gosmee's parse does.
func (c *gosmeeClient) message() gosmeeMessage {
	c.t.Helper()
	for {
		name, id, data := c.next()
		if gosmeeControl(name, data) || name == "gosmee-gap" {
			continue
		}
		var raw map[string]any
		if err := json.Unmarshal([]byte(data), &raw); err != nil {
			c.t.Fatalf("message is not JSON: %v\n%s", err, data)
		}
		m := gosmeeMessage{id: id, headers: map[string]string{}}
		for k, v := range raw {
			m.keys = append(m.keys, k)
			switch k {
			case "bodyB":
				b, err := base64.StdEncoding.DecodeString(v.(string))
				if err != nil {
					c.t.Fatalf("bodyB: %v", err)
				}
				m.body = b
			case "timestamp":
				s, ok := v.(string) // gosmee ignores a number
				if !ok {
					c.t.Fatalf("timestamp %v is not a string", v)
				}
				ms, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					c.t.Fatalf("timestamp %q: %v", s, err)
				}
				m.timestamp = time.UnixMilli(ms)
			default:
				if s, ok := v.(string); ok {
					m.headers[k] = s
				}
			}
		}
		return m
	}
}

// TestGosmeeClientStreams: hookline serve answers gosmee's client on
// /events/<channel> as a gosmee server does (v0.32.0, gosmee/server.go
// handleWebhookPost, handleEventsGet): connected and ready messages,
// lowercase headers, timestamp as a string, bodyB with the exact bytes and
// no body, ids, and Last-Event-ID resumes.
func TestGosmeeClientStreams(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	const ch = "gosmeeChannel123"
	c := gosmeeSubscribe(t, ts.URL, ch, "")
	for _, want := range []string{`{"message":"connected"}`, `{"message":"ready"}`} {
		if name, id, data := c.next(); name != "" || id != "" || data != want {
			t.Fatalf("start of stream: event %q id %q data %s, want data %s as gosmee's server writes", name, id, data, want)
		}
	}
	bodies := []string{"{\n  \"pretty\": true\n}\n", "not json at all \x00\xff", `{"action":"opened"}`}
	before := time.Now().Add(-time.Millisecond)
	for _, b := range bodies[:1] {
		mustPost(t, ts.URL+"/"+ch, b, "Content-Type", "application/json", "X-GitHub-Event", "issues", "X-GitHub-Delivery", "d-1")
	}
	m := c.message()
	if string(m.body) != bodies[0] || m.id != "0-1" {
		t.Errorf("first message: id %q body %q, want id 0-1 (a Redis stream id: the only shape gosmee's client resends) and %q byte for byte", m.id, m.body, bodies[0])
	}
	if m.headers["x-github-event"] != "issues" || m.headers["x-github-delivery"] != "d-1" || m.headers["content-type"] != "application/json" {
		t.Errorf("headers %v, want lowercase x-github-event, x-github-delivery, content-type", m.headers)
	}
	for _, k := range m.keys {
		if k == "body" || k == "query" || k == "host" {
			t.Errorf("message has %q, which a gosmee server never sends (keys %v)", k, m.keys)
		}
	}
	if m.timestamp.Before(before) || m.timestamp.After(time.Now()) {
		t.Errorf("timestamp %v, want the POST's time", m.timestamp)
	}
	c.resp.Body.Close()

	// Deliveries made while it was away arrive after Last-Event-ID.
	mustPost(t, ts.URL+"/"+ch, bodies[1], "Content-Type", "application/octet-stream")
	mustPost(t, ts.URL+"/"+ch, bodies[2], "Content-Type", "application/json")
	c = gosmeeSubscribe(t, ts.URL, ch, m.id)
	for i, want := range bodies[1:] {
		if m := c.message(); string(m.body) != want || m.id != "0-"+strconv.Itoa(i+2) {
			t.Errorf("after Last-Event-ID 0-1: id %q body %q, want id 0-%d %q", m.id, m.body, i+2, want)
		}
	}
}

// TestGosmeeKeepaliveAndGap: an idle gosmee stream gets ": keepalive"
// comments, and a resume past the history a gosmee-gap event in gosmee's
// shape (which its client logs and goes on).
func TestGosmeeKeepaliveAndGap(t *testing.T) {
	_, ts := newRelay(t, relay.Options{PingInterval: 20 * time.Millisecond, HistoryCount: 1})
	const ch = "gosmeeChannel456"
	for _, b := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
		mustPost(t, ts.URL+"/"+ch, b, "Content-Type", "application/json")
	}
	c := gosmeeSubscribe(t, ts.URL, ch, "0-1")
	name, _, data := "", "", ""
	for name != "gosmee-gap" {
		name, _, data = c.next()
	}
	var gap map[string]string
	if err := json.Unmarshal([]byte(data), &gap); err != nil || gap["error"] != "missed_history" || gap["requested_id"] != "0-1" || gap["oldest_id"] != "0-3" {
		t.Errorf("gap %s (%v), want missed_history, requested_id 0-1, oldest_id 0-3", data, err)
	}
	if m := c.message(); string(m.body) != `{"n":3}` {
		t.Errorf("after the gap: %q, want the delivery still kept", m.body)
	}
	deadline := time.Now().Add(wait)
	for {
		line, err := c.br.ReadString('\n')
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("no keepalive comment (%v)", err)
		}
		if line == ": keepalive\n" {
			break
		}
		if strings.HasPrefix(line, "event: ping") {
			t.Fatalf("a gosmee stream got hookline's ping event")
		}
	}
}

// TestGosmeeNew: /new answers text/plain (as a gosmee server does) to a
// client asking for text or saying it is gosmee, and still 307 (as smee.io
// does) to everyone else; the name fits gosmee's channel pattern.
func TestGosmeeNew(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	gosmeeName := regexp.MustCompile(`^[a-zA-Z0-9_-]{12,64}$`)
	for _, tc := range []struct {
		header    [2]string
		plainText bool
	}{
		{[2]string{"Accept", "text/plain"}, true},
		{[2]string{"User-Agent", "gosmee/v0.32.0"}, true},
		{[2]string{"Accept", "*/*"}, false},
		{[2]string{"Accept", "text/html"}, false},
		{[2]string{}, false}, // hookline --new and Go's default client: 307 as before
	} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/new", nil)
		if tc.header[0] != "" {
			req.Header.Set(tc.header[0], tc.header[1])
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		u := resp.Header.Get("Location")
		if tc.plainText {
			u = strings.TrimSuffix(string(body), "\n")
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || !strings.HasSuffix(string(body), "\n") {
				t.Errorf("%v: %d %q %q, want 200 text/plain with one line", tc.header, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
		} else if resp.StatusCode != http.StatusTemporaryRedirect {
			t.Errorf("%v: %d, want 307", tc.header, resp.StatusCode)
		}
		if !strings.HasPrefix(u, ts.URL+"/") || !gosmeeName.MatchString(strings.TrimPrefix(u, ts.URL+"/")) {
			t.Errorf("%v: channel URL %q, want %s/<12 to 64 of [a-zA-Z0-9_-]>", tc.header, u, ts.URL)
		}
	}
}

// TestGosmeeClientTranscript replays what the real gosmee client sent to
// hookline serve (testdata/gosmee/resume-transcript.json, recorded as its
// README says): its first stream, its resume after a relay restart, its
// resume after its own restart from its state file. Each stream's ids must
// be ones the client keeps (a Redis stream id, <ms>-<seq>: it drops any
// other and then resends nothing), and the last one each stream gave is
// the Last-Event-ID the client sent next, and what its state file held at
// the end; after each, the deliveries made while it was away arrive.
func TestGosmeeClientTranscript(t *testing.T) {
	raw, err := os.ReadFile("../testdata/gosmee/resume-transcript.json")
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		State    string `json:"client_state_file_at_end"`
		Requests []struct {
			Path        string `json:"path"`
			LastEventID string `json:"last_event_id"`
			Step        string `json:"step"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(raw, &tr); err != nil {
		t.Fatal(err)
	}
	var streams []string // the Last-Event-ID of each stream, in order, one per step
	steps := map[string]bool{}
	ch := ""
	for _, r := range tr.Requests {
		if name, ok := strings.CutPrefix(r.Path, "/events/"); ok && !steps[r.Step] {
			steps[r.Step] = true
			streams, ch = append(streams, r.LastEventID), name
		}
	}
	if len(streams) != 3 || streams[0] != "" {
		t.Fatalf("the transcript's streams %q: want a first one without Last-Event-ID, then two resumes", streams)
	}
	redisID := regexp.MustCompile(`^[0-9]+-[0-9]+$`) // gosmee's parseRedisStreamID
	_, ts := newRelay(t, relay.Options{})
	next := 1
	post := func(upTo int) {
		for ; next <= upTo; next++ {
			mustPost(t, ts.URL+"/"+ch, fmt.Sprintf(`{"n":%d}`, next), "Content-Type", "application/json")
		}
	}
	// What each stream must end with: the id the client resent next, and
	// its state file at the end.
	ends := append(streams[1:], tr.State)
	for i, last := range streams {
		c := gosmeeSubscribe(t, ts.URL, ch, last)
		after, _ := strconv.Atoi(strings.TrimPrefix(last, "0-"))
		endID, _ := strconv.Atoi(strings.TrimPrefix(ends[i], "0-"))
		post(endID) // made while the client was away (or, first, once it listens)
		for n := after + 1; n <= endID; n++ {
			m := c.message()
			if !redisID.MatchString(m.id) || string(m.body) != fmt.Sprintf(`{"n":%d}`, n) {
				t.Fatalf("stream %d (Last-Event-ID %q): id %q body %s, want a Redis stream id and delivery %d", i+1, last, m.id, m.body, n)
			}
			if n == endID && m.id != ends[i] {
				t.Errorf("stream %d ended with id %q; the real client then resent %q", i+1, m.id, ends[i])
			}
		}
		c.resp.Body.Close()
	}
}
