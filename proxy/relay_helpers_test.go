package proxy_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/proxy"
)

// fixtureDir holds the recorded SSE streams (see its README.md).
const fixtureDir = "../testdata/sse"

// fixtureSecret is the webhook secret the fixtures' signatures were made
// with (a published test vector's secret, see testdata/sse/README.md).
const fixtureSecret = "It's a Secret to Everybody"

// readFixture returns a recorded stream's bytes.
func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parseSSE splits a stream into events the way the SSE specification
// (WHATWG HTML, "Interpreting an event stream") does. It is the tests'
// independent reference for what the transport must deliver.
func parseSSE(stream []byte) []proxy.SSEEvent {
	var (
		events       []proxy.SSEEvent
		lastID, name string
		data         bytes.Buffer
		hasData      bool
	)
	s := strings.ReplaceAll(strings.ReplaceAll(string(stream), "\r\n", "\n"), "\r", "\n")
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			if hasData {
				d := bytes.TrimSuffix(data.Bytes(), []byte("\n"))
				events = append(events, proxy.SSEEvent{ID: lastID, Event: name, Data: append([]byte(nil), d...)})
			}
			data.Reset()
			name, hasData = "", false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			lastID = value
		case "event":
			name = value
		}
	}
	return events
}

// fixtureEvents returns a recorded stream's events per parseSSE.
func fixtureEvents(t testing.TB, name string) []proxy.SSEEvent {
	t.Helper()
	return parseSSE(readFixture(t, name))
}

// sseServer is an httptest server whose handler is chosen per connection.
type sseServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request // every request, in order
}

// newSSEServer starts a server that answers the n-th connection (from 0)
// with handle(n, w, r).
func newSSEServer(t testing.TB, handle func(n int, w http.ResponseWriter, r *http.Request)) *sseServer {
	t.Helper()
	s := &sseServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.requests)
		s.requests = append(s.requests, r.Clone(context.Background()))
		s.mu.Unlock()
		handle(n, w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// request returns the n-th request the server received.
func (s *sseServer) request(n int) *http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n >= len(s.requests) {
		return nil
	}
	return s.requests[n]
}

// count returns how many requests the server received.
func (s *sseServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// writeStream answers with an event stream holding body, flushed.
func writeStream(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	http.NewResponseController(w).Flush()
}

// holdOpen keeps a stream open until the client goes away or the test ends.
func holdOpen(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(time.Minute): // a guard: no test waits this long
	}
}

// serveFixture answers every connection with the named recording, then
// closes the stream.
func serveFixture(t testing.TB, name string) *sseServer {
	body := readFixture(t, name)
	return newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeStream(w, body)
	})
}

// collect gathers events passed to a Transport's or Subscribe's callback.
type collect struct {
	mu     sync.Mutex
	events []proxy.SSEEvent
	notify chan struct{}
}

func newCollect() *collect { return &collect{notify: make(chan struct{}, 1024)} }

func (c *collect) add(ev proxy.SSEEvent) {
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *collect) all() []proxy.SSEEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]proxy.SSEEvent(nil), c.events...)
}

// waitFor waits until the callback saw n events or fails the test.
func (c *collect) waitFor(t testing.TB, n int) []proxy.SSEEvent {
	t.Helper()
	deadline := time.After(20 * time.Second) // a hang guard, not a timing assertion
	for {
		if evs := c.all(); len(evs) >= n {
			return evs
		}
		select {
		case <-c.notify:
		case <-deadline:
			t.Fatalf("got %d events, want %d", len(c.all()), n)
		}
	}
}

// noSleep is a StreamOptions.Sleep that does not wait.
func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// noBackoff returns o with backoff waits that end at once.
func noBackoff(o proxy.StreamOptions) proxy.StreamOptions {
	proxy.SetStreamClock(&o, noSleep, nil)
	return o
}

// eventsEqual reports whether two event lists are the same.
func eventsEqual(a, b []proxy.SSEEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Event != b[i].Event || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}
