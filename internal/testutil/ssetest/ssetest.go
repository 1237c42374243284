// Package ssetest holds what tests of the relay stream reader and of the
// relay client share: the recorded relay streams of testdata/sse, an
// independent SSE parser to compare with, a server that answers each
// connection its own way, and a collector of events.
package ssetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/testutil/testenv"
)

// FixtureSecret is the webhook secret the fixtures' signatures were made
// with (a published test vector's secret, see testdata/sse/README.md).
const FixtureSecret = "It's a Secret to Everybody"

// Fixture returns a recorded stream's bytes (testdata/sse, see its
// README.md).
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "testdata", "sse", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SHA256Hex is the tests' own known-answer hash, from the standard
// library, independent of the code under test.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// FixtureNames returns the names of the recorded streams.
func FixtureNames(t testing.TB) []string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(root, "testdata", "sse", "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded streams in testdata/sse: %v", err)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	return names
}

// Parse splits a stream into events the way the SSE specification
// (WHATWG HTML, "Interpreting an event stream") does. It is the tests'
// independent reference for what the transport must deliver.
func Parse(stream []byte) []sse.Event {
	var (
		events       []sse.Event
		lastID, name string
		data         bytes.Buffer
		hasData      bool
	)
	s := strings.ReplaceAll(strings.ReplaceAll(string(stream), "\r\n", "\n"), "\r", "\n")
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			if hasData {
				d := bytes.TrimSuffix(data.Bytes(), []byte("\n"))
				events = append(events, sse.Event{ID: lastID, Event: name, Data: append([]byte(nil), d...)})
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

// FixtureEvents returns a recorded stream's events per Parse.
func FixtureEvents(t testing.TB, name string) []sse.Event {
	t.Helper()
	return Parse(Fixture(t, name))
}

// Server is an httptest server whose handler is chosen per connection.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request // every request, in order
}

// NewServer starts a server that answers the n-th connection (from 0)
// with handle(n, w, r).
func NewServer(t testing.TB, handle func(n int, w http.ResponseWriter, r *http.Request)) *Server {
	t.Helper()
	s := &Server{}
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

// Request returns the n-th request the server received.
func (s *Server) Request(n int) *http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n >= len(s.requests) {
		return nil
	}
	return s.requests[n]
}

// Count returns how many requests the server received.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// WriteStream answers with an event stream holding body, flushed.
func WriteStream(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	http.NewResponseController(w).Flush()
}

// HoldOpen keeps a stream open until the client goes away or the test ends.
func HoldOpen(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(time.Minute): // a guard: no test waits this long
	}
}

// ServeFixture answers every connection with the named recording, then
// closes the stream.
func ServeFixture(t testing.TB, name string) *Server {
	body := Fixture(t, name)
	return NewServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		WriteStream(w, body)
	})
}

// Collect gathers events passed to a Transport's or Subscribe's callback.
type Collect struct {
	mu     sync.Mutex
	events []sse.Event
	notify chan struct{}
}

func NewCollect() *Collect { return &Collect{notify: make(chan struct{}, 1024)} }

func (c *Collect) Add(ev sse.Event) {
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *Collect) All() []sse.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sse.Event(nil), c.events...)
}

// WaitFor waits until the callback saw n events or fails the test.
func (c *Collect) WaitFor(t testing.TB, n int) []sse.Event {
	t.Helper()
	deadline := time.After(20 * time.Second) // a hang guard, not a timing assertion
	for {
		if evs := c.All(); len(evs) >= n {
			return evs
		}
		select {
		case <-c.notify:
		case <-deadline:
			t.Fatalf("got %d events, want %d", len(c.All()), n)
		}
	}
}

// NoSleep is an sse.Options.Sleep that does not wait.
func NoSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// NoBackoff returns o with backoff waits that end at once.
func NoBackoff(o sse.Options) sse.Options {
	o.Sleep = NoSleep
	return o
}

// EventsEqual reports whether two event lists are the same.
func EventsEqual(a, b []sse.Event) bool {
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

// PipeStream is an http.Client whose every request gets a 200 event stream
// written by serve in memory: inside a synctest bubble, the stream's reads
// and serve's sleeps are durably blocking, so the idle clock runs on the
// bubble's fake time and a test waits for nothing. serve gets the request's
// context, which ends when the client goes away. A nil serve never answers
// (no response headers) until the request is cancelled.
func PipeStream(serve func(ctx context.Context, w io.Writer)) *http.Client {
	return &http.Client{Transport: RoundTripFunc(func(r *http.Request) (*http.Response, error) {
		if serve == nil {
			<-r.Context().Done()
			return nil, r.Context().Err()
		}
		pr, pw := io.Pipe()
		go func() {
			serve(r.Context(), pw)
			pw.Close()
		}()
		go func() { <-r.Context().Done(); pr.CloseWithError(r.Context().Err()) }()
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, Request: r}, nil
	})}
}

// RoundTripFunc is an http.RoundTripper made of a function.
type RoundTripFunc func(*http.Request) (*http.Response, error)

func (f RoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
