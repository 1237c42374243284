package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/relay"
)

// hangGuard bounds every wait in these tests: a failure, not a timing.
const hangGuard = 30 * time.Second

// liveRelay is hookline's relay (what `hookline serve` runs) on loopback.
type liveRelay struct {
	srv     *relay.Server
	channel string
}

func startLiveRelay(t testing.TB) *liveRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := relay.New(relay.Options{HistoryCount: 100000, HistoryBytes: 1 << 30, TotalHistoryBytes: 1 << 30, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return &liveRelay{srv: srv, channel: relay.ListenURL(ln.Addr()) + "/" + srv.NewChannel()}
}

// seqBody and seqID make delivery n of a numbered sequence.
func seqBody(n int) []byte { return []byte(fmt.Sprintf(`{"action":"opened","n":%d}`, n)) }
func seqID(n int) string   { return fmt.Sprintf("seq-%06d", n) }

// publish POSTs delivery n with extra headers (name, value pairs).
func (r *liveRelay) publish(t testing.TB, client *http.Client, n int, body []byte, headers ...string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.channel, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", seqID(n))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
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

// arrival is one delivery a sink accepted.
type arrival struct {
	id     string
	header http.Header
	body   []byte
}

// sink is a target recording the deliveries it accepts.
type sink struct {
	mu   sync.Mutex
	got  []arrival
	fail func(r *http.Request) int // if set and not 0, the status to answer instead
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if s.fail != nil {
		if code := s.fail(r); code != 0 {
			w.WriteHeader(code)
			return
		}
	}
	s.mu.Lock()
	s.got = append(s.got, arrival{id: r.Header.Get("X-GitHub-Delivery"), header: r.Header.Clone(), body: body})
	s.mu.Unlock()
}

func (s *sink) arrivals() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]arrival(nil), s.got...)
}

func (s *sink) waitFor(t testing.TB, n int) []arrival {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		if got := s.arrivals(); len(got) >= n {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%d deliveries arrived, want %d", len(s.arrivals()), n)
	return nil
}

// checkSequence asserts got is deliveries from..to, once each, in order,
// with seqBody's bytes.
func checkSequence(t testing.TB, got []arrival, from, to int) {
	t.Helper()
	if len(got) != to-from+1 {
		t.Errorf("%d arrivals, want %d", len(got), to-from+1)
	}
	for i, a := range got {
		n := from + i
		if a.id != seqID(n) || !bytes.Equal(a.body, seqBody(n)) {
			t.Errorf("arrival %d = %s %q, want %s %q", i, a.id, a.body, seqID(n), seqBody(n))
			return
		}
	}
}

// forwardRun is `hookline forward` running in this process.
type forwardRun struct {
	out, err syncBuffer
	cancel   context.CancelFunc
	done     chan struct{}
	code     int
}

// startForward runs `hookline forward args...` until stop (or the test's
// end).
func startForward(t *testing.T, args ...string) *forwardRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &forwardRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.code = Run(ctx, append([]string{"hookline", "forward", "--no-color"}, args...), strings.NewReader(""), &f.out, &f.err)
	}()
	t.Cleanup(func() { f.stop(t) })
	return f
}

// waitErr waits until stderr contains s.
func (f *forwardRun) waitErr(t testing.TB, s string) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !strings.Contains(f.err.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never said %q:\n%s", s, f.err.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitOutLines waits until stdout has n lines.
func (f *forwardRun) waitOutLines(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for strings.Count(f.out.String(), "\n") < n {
		if time.Now().After(deadline) {
			t.Fatalf("stdout has fewer than %d lines:\n%s\nstderr:\n%s", n, f.out.String(), f.err.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop cancels the run (as SIGINT does) and returns its exit code.
func (f *forwardRun) stop(t testing.TB) int {
	f.cancel()
	select {
	case <-f.done:
		return f.code
	case <-time.After(hangGuard):
		t.Error("forward did not stop")
		return -1
	}
}
