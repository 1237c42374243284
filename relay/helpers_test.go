package relay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/relay"
)

// wait bounds every wait for something the relay must do; it is a safety net
// against a hung test, never a timing assertion.
const wait = 20 * time.Second

// newRelay starts a relay with opts on an httptest server and stops both at
// the end of the test (streams first, so that the server can close).
func newRelay(t testing.TB, opts relay.Options) (*relay.Server, *httptest.Server) {
	t.Helper()
	srv := mustNew(t, opts)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	return srv, ts
}

// serve runs srv.Serve on a loopback listener until cancel (or the test's
// end), and returns the listener's address and Serve's result.
func serve(t testing.TB, srv *relay.Server) (addr string, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, ln) }()
	return ln.Addr().String(), cancel, errc
}

// served waits for Serve, started by serve, to return after its context
// ended, and returns its error; the test fails if it does not return.
func served(t testing.TB, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		t.Fatal("Serve did not return after its context ended")
		return nil
	}
}

// mustNew returns relay.New(opts) or fails the test.
func mustNew(t testing.TB, opts relay.Options) *relay.Server {
	t.Helper()
	srv, err := relay.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// event is one Server-Sent Event as a client sees it.
type event struct {
	ID, Event, Data string
}

// stream is a subscription read by a background goroutine.
type stream struct {
	t      testing.TB
	resp   *http.Response
	events chan event
	err    error // the read error that ended the stream, once events is closed
	// For a test that waits in vain: how many events the reader parsed,
	// and the last id it saw.
	parsed atomic.Int64
	lastID atomic.Pointer[string]
}

// subscribe opens GET url with Accept: text/event-stream and the header
// pairs given (name, value, name, value...), and fails the test unless the
// answer is a 200 event stream.
func subscribe(t testing.TB, url string, header ...string) *stream {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s = %d %q %s, want 200 text/event-stream", url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &stream{t: t, resp: resp, events: make(chan event, 4096)}
	go s.read()
	t.Cleanup(s.close)
	return s
}

// read parses the stream as an EventSource does.
func (s *stream) read() {
	defer close(s.events)
	br := bufio.NewReader(s.resp.Body)
	var ev event
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			s.err = err
			return
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if data != nil {
				ev.Data = strings.Join(data, "\n")
				s.parsed.Add(1)
				if ev.ID != "" {
					id := ev.ID
					s.lastID.Store(&id)
				}
				s.events <- ev
			}
			ev, data = event{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Event = value
		case "data":
			data = append(data, value)
		}
	}
}

func (s *stream) close() { s.resp.Body.Close() }

// next returns the next event, pings skipped.
func (s *stream) next() event {
	s.t.Helper()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatalf("stream ended (%v) while an event was expected", s.err)
			}
			if ev.Event == "ping" {
				continue
			}
			return ev
		case <-time.After(wait):
			last := ""
			if p := s.lastID.Load(); p != nil {
				last = *p
			}
			s.t.Fatalf("no event within %s (the stream's reader parsed %d events, the last id %q); the relay's goroutines:\n%s",
				wait, s.parsed.Load(), last, relayStacks())
		}
	}
}

// relayStacks returns the stacks of the goroutines in package relay, for a
// test that waited in vain: where the relay is stuck.
func relayStacks() string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "hookline/relay.") && !strings.Contains(g, "_test.go") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// ready reads the ready event every stream starts with.
func (s *stream) ready() int64 {
	s.t.Helper()
	ev := s.next()
	var last int64
	if ev.Event != "ready" || ev.ID != "" || !regexp.MustCompile(`^\{"last":(0|[1-9][0-9]*)\}$`).MatchString(ev.Data) {
		s.t.Fatalf("first event = %+v, want ready with data {\"last\":N} and no id", ev)
	}
	fmt.Sscanf(ev.Data, `{"last":%d}`, &last)
	return last
}

// end waits for the stream to end and returns the read error that ended it
// (io.EOF for a response that ended cleanly).
func (s *stream) end() error {
	s.t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return s.err
			}
		case <-timeout:
			s.t.Fatalf("stream still open after %s", wait)
		}
	}
}

// message decodes a delivery event's JSON.
func message(t testing.TB, ev event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
		t.Fatalf("event data is not JSON: %v\n%s", err, ev.Data)
	}
	return m
}

var timestampRE = regexp.MustCompile(`"timestamp":\d+`)

// normalize replaces the timestamp's value with 0.
func normalize(data string) string {
	return timestampRE.ReplaceAllString(data, `"timestamp":0`)
}

// do sends method url with the header pairs given and returns the status
// and the body (its first 64 KiB: a stream's start).
func do(t testing.TB, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b := make([]byte, 64<<10)
	n, _ := io.ReadAtLeast(resp.Body, b, 1)
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
		// A stream: its first bytes (the ready event) are enough.
		return resp.StatusCode, string(b[:n])
	}
	rest, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b[:n]) + string(rest)
}

// post POSTs body to url with the header pairs given and returns the status
// and response body.
func post(t testing.TB, url, body string, header ...string) (int, string) {
	t.Helper()
	return do(t, http.MethodPost, url, body, header...)
}

// mustPost POSTs and fails the test unless the answer is 200.
func mustPost(t testing.TB, url, body string, header ...string) {
	t.Helper()
	if code, resp := post(t, url, body, header...); code != http.StatusOK {
		t.Fatalf("POST %s = %d %s, want 200", url, code, resp)
	}
}

// raw sends a request written by hand (so that every header is exactly
// what the test says) and returns the answer.
func raw(t testing.TB, addr, request string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", request, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// waitFor waits until cond (the relay's state, which a test can only look
// at) holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Poll(t, what, 5*time.Millisecond, cond)
}

func addr(ts *httptest.Server) string { return strings.TrimPrefix(ts.URL, "http://") }

// jsonError returns the "error" of a JSON error answer.
func jsonError(t testing.TB, body string) string {
	t.Helper()
	var e struct{ Error string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
		t.Fatalf("answer %q is not a JSON error: %v", body, err)
	}
	return e.Error
}

var errEOF = io.EOF

func isCleanEnd(err error) bool { return errors.Is(err, errEOF) }

func ids(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprint(i))
	}
	return out
}
