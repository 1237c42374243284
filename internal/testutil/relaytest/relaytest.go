// Package relaytest runs hookline's relay on loopback for the tests of other
// packages, publishes numbered deliveries to it, and records what reaches a
// target: the helpers the fault, TLS and CLI tests share.
//
//	rl := relaytest.Start(t, relay.Options{})
//	target := &relaytest.Sink{}
//	// ... run a client from rl.Channel to an httptest server of target
//	rl.Publish(t, nil, 1, relaytest.Body(1, 0))
//	relaytest.CheckExactlyOnce(t, target.WaitFor(t, 1), 1, 1, true, relaytest.Body0)
package relaytest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/webhooks"

	"github.com/hookline/hookline/relay"
)

// HangGuard bounds every wait of these helpers: a failure, not a timing.
const HangGuard = 30 * time.Second

// Relay is a relay serving on loopback until the test ends.
type Relay struct {
	Server  *relay.Server
	Base    string // http://127.0.0.1:port
	Channel string // a channel URL
}

// Start starts a relay with opts. Zero history limits become large ones
// (every delivery of a test stays), and a nil Logger discards.
func Start(t testing.TB, opts relay.Options) *Relay {
	t.Helper()
	if opts.HistoryCount == 0 {
		opts.HistoryCount = 100000
	}
	if opts.HistoryBytes == 0 {
		opts.HistoryBytes = 1 << 30
	}
	if opts.TotalHistoryBytes == 0 {
		opts.TotalHistoryBytes = 1 << 30
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := relay.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
	})
	base := relay.ListenURL(ln.Addr())
	return &Relay{Server: srv, Base: base, Channel: base + "/" + srv.NewChannel()}
}

// Body is delivery n's body: distinct JSON, with pad bytes of padding.
func Body(n, pad int) []byte {
	return []byte(fmt.Sprintf(`{"action":"opened","n":%d,"pad":"%s"}`, n, strings.Repeat("p", pad)))
}

// Body0 is Body without padding.
func Body0(n int) []byte { return Body(n, 0) }

// ID is delivery n's X-GitHub-Delivery.
func ID(n int) string { return fmt.Sprintf("seq-%06d", n) }

// Publish POSTs delivery n with body to the channel as GitHub would, with
// extra header pairs (name, value...), through client (nil: the default).
func (r *Relay) Publish(t testing.TB, client *http.Client, n int, body []byte, header ...string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.Channel, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhooks.HeaderEvent, "issues")
	req.Header.Set(webhooks.HeaderDelivery, ID(n))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("publishing %d: %v", n, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("publishing %d: relay answered %d", n, resp.StatusCode)
	}
}

// Arrival is one delivery a Sink accepted.
type Arrival struct {
	ID     string // its X-GitHub-Delivery
	Header http.Header
	Body   []byte
}

// Sink is a target that records every delivery it accepts (answers 2xx).
// The zero value accepts everything.
type Sink struct {
	// Status, if set, chooses the answer to each attempt (n counts them
	// from 0); the handler may write headers but not the status.
	Status func(n int, w http.ResponseWriter, r *http.Request) int

	mu       sync.Mutex
	got      []Arrival
	attempts int
}

func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	n := s.attempts
	s.attempts++
	s.mu.Unlock()
	code := http.StatusOK
	if s.Status != nil {
		code = s.Status(n, w, r)
	}
	if code >= 200 && code < 300 {
		s.mu.Lock()
		s.got = append(s.got, Arrival{ID: r.Header.Get(webhooks.HeaderDelivery), Header: r.Header.Clone(), Body: body})
		s.mu.Unlock()
	}
	w.WriteHeader(code)
}

// Arrivals returns what arrived so far.
func (s *Sink) Arrivals() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Arrival(nil), s.got...)
}

// WaitFor waits until n deliveries arrived and returns them.
func (s *Sink) WaitFor(t testing.TB, n int) []Arrival {
	t.Helper()
	deadline := time.Now().Add(HangGuard)
	for time.Now().Before(deadline) {
		if got := s.Arrivals(); len(got) >= n {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%d deliveries arrived, want %d", len(s.Arrivals()), n)
	return nil
}

// CheckExactlyOnce asserts that got holds deliveries from..to (inclusive),
// each once, with the bodies body makes, in order when ordered.
func CheckExactlyOnce(t testing.TB, got []Arrival, from, to int, ordered bool, body func(int) []byte) {
	t.Helper()
	seen := map[string]int{}
	for _, a := range got {
		seen[a.ID]++
	}
	for n := from; n <= to; n++ {
		if c := seen[ID(n)]; c != 1 {
			t.Errorf("delivery %d arrived %d times, want exactly once", n, c)
		}
	}
	if len(got) != to-from+1 {
		t.Errorf("%d arrivals, want %d", len(got), to-from+1)
	}
	for i, a := range got {
		n, err := strconv.Atoi(strings.TrimPrefix(a.ID, "seq-"))
		if err != nil {
			t.Errorf("arrival %d has id %q", i, a.ID)
			continue
		}
		if !bytes.Equal(a.Body, body(n)) {
			t.Errorf("delivery %d: body of %d bytes differs from the %d published", n, len(a.Body), len(body(n)))
		}
		if ordered && n != from+i {
			t.Errorf("arrival %d is delivery %d, want %d (order)", i, n, from+i)
		}
	}
}

// Buffer is a bytes.Buffer safe for concurrent use: the output of a command
// or a relay written from several goroutines while a test reads it. A test
// waits for what it expects with Wait: every Write wakes the waiters, so no
// test polls.
type Buffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed by the next Write; nil when nobody waits
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Await returns the text once cond holds for it, checking after every
// Write; ok is false when stop is closed (or sends) first, with the text
// as it was then.
func Await[T any](s *Buffer, stop <-chan T, cond func(text string) bool) (text string, ok bool) {
	for {
		s.mu.Lock()
		text = s.b.String()
		if cond(text) {
			s.mu.Unlock()
			return text, true
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-stop:
			return s.String(), false
		}
	}
}

// Wait returns the text once cond holds for it, and fails the test, saying
// what it waited for, when that takes HangGuard (a hang, not a slow
// machine).
func (s *Buffer) Wait(t testing.TB, what string, cond func(text string) bool) string {
	t.Helper()
	timer := time.NewTimer(HangGuard)
	defer timer.Stop()
	text, ok := Await(s, timer.C, cond)
	if !ok {
		t.Fatalf("waited %v for %s; the output:\n%s", HangGuard, what, text)
	}
	return text
}

// WaitFor waits (Wait) until the text contains sub.
func (s *Buffer) WaitFor(t testing.TB, sub string) string {
	t.Helper()
	return s.Wait(t, fmt.Sprintf("%q", sub), func(text string) bool { return strings.Contains(text, sub) })
}

// WaitLines waits (Wait) until the text has n lines.
func (s *Buffer) WaitLines(t testing.TB, n int) string {
	t.Helper()
	return s.Wait(t, fmt.Sprintf("%d lines", n), func(text string) bool { return strings.Count(text, "\n") >= n })
}
