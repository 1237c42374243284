package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/relay"
)

// The soak test: deliveries published as fast as the relay takes them
// (serve → forward → target, all in this process, loopback), with the
// failed folder and (full run) the state file on. It checks that none is lost, none repeated,
// the order and bytes are kept, and that memory and goroutines come back
// flat. The figures are logged (go test -v).
//
// The normal suite runs 2,000 deliveries (TestSoakQuick). The full run, 20,000
// under the race detector:
//
//	HOOKLINE_SOAK=1 go test -race -count=1 -run TestSoak -v ./internal/cli
func TestSoak(t *testing.T) {
	if os.Getenv("HOOKLINE_SOAK") != "1" {
		t.Skip("the 20,000-delivery soak runs with HOOKLINE_SOAK=1 (see its doc comment); TestSoakQuick runs 2,000")
	}
	soak(t, 20000, true)
}

// TestSoakQuick is the soak at a tenth of the size, without the state file:
// its fsync per delivery (about 2 ms on a cloud disk) would dominate the
// time; the state file has its own tests, the full soak uses it.
func TestSoakQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the soak test")
	}
	soak(t, 2000, false)
}

// soakBody is delivery n's body: a realistic size, its number inside.
func soakBody(n int) []byte {
	return []byte(fmt.Sprintf(`{"action":"opened","number":%d,"repository":{"full_name":"octo-org/hello-world"},"sender":{"login":"octocat"},"pad":%q}`,
		n, strings.Repeat("x", 300+n%200)))
}

// soakTarget checks each delivery as it comes: the next number, the exact
// bytes.
type soakTarget struct {
	mu     sync.Mutex
	next   int
	errs   []string
	got    atomic.Int64
	notify chan struct{}
}

func (s *soakTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id := r.Header.Get("X-GitHub-Delivery")
	n, err := strconv.Atoi(strings.TrimPrefix(id, "soak-"))
	s.mu.Lock()
	switch {
	case err != nil:
		s.errs = append(s.errs, fmt.Sprintf("delivery id %q", id))
	case n != s.next+1:
		s.errs = append(s.errs, fmt.Sprintf("got delivery %d after %d", n, s.next))
	case !bytes.Equal(body, soakBody(n)):
		s.errs = append(s.errs, fmt.Sprintf("delivery %d: body differs", n))
	}
	if err == nil && n > s.next {
		s.next = n
	}
	s.mu.Unlock()
	s.got.Add(1)
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// lineCounter counts trace lines and keeps none.
type lineCounter struct{ n atomic.Int64 }

func (l *lineCounter) Write(p []byte) (int, error) {
	l.n.Add(int64(bytes.Count(p, []byte{'\n'})))
	return len(p), nil
}

// heapInUse returns the heap in use after a full collection, in MiB.
func heapInUse() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}

func soak(t *testing.T, total int, withState bool) {
	goroutines := runtime.NumGoroutine()
	// The relay keeps the last 500 deliveries (about 0.3 MiB): its memory
	// levels off early, so what grows would be the forwarder's.
	const history = 500
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := relay.New(relay.Options{HistoryCount: history, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	relayCtx, stopRelay := context.WithCancel(context.Background())
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); srv.Serve(relayCtx, ln) }()
	defer func() { stopRelay(); <-relayDone }()
	channel := relay.ListenURL(ln.Addr()) + "/" + srv.NewChannel()

	target := &soakTarget{notify: make(chan struct{}, 1)}
	ts := &http.Server{Handler: target}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ts.Serve(tl)
	defer ts.Close()

	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	var trace lineCounter
	var stderr relaytest.Buffer
	ctx, stop := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() {
		args := []string{"hookline", "forward", "--no-color", "--url", channel, "--target", "http://" + tl.Addr().String() + "/hook",
			"--failed-dir", filepath.Join(dir, "failed")}
		if withState {
			args = append(args, "--state-file", state)
		}
		code <- Run(ctx, args, strings.NewReader(""), &trace, &stderr)
	}()
	stderr.WaitFor(t, "connected to")

	// One publisher, as fast as the relay answers, but never more than
	// half the relay's history ahead of the target (a publisher further
	// ahead than the history can hold loses deliveries by design: the relay
	// reports that as a gap).
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	start := time.Now()
	heap := map[int]float64{}
	checkpoints := map[int]bool{total / 4: true, total / 2: true, 3 * total / 4: true}
	for n := 1; n <= total; n++ {
		for int64(n)-target.got.Load() > history/2 {
			select {
			case <-target.notify:
			case <-time.After(hangGuard):
				stop()
				t.Fatalf("the target is stuck at %d of %d; stderr:\n%s", target.got.Load(), total, stderr.String())
			}
		}
		req, _ := http.NewRequest(http.MethodPost, channel, bytes.NewReader(soakBody(n)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "issues")
		req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("soak-%d", n))
		resp, err := client.Do(req)
		if err != nil {
			stop()
			t.Fatalf("publishing %d: %v", n, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if checkpoints[n] {
			heap[n] = heapInUse()
		}
	}
	published := time.Since(start)
	for target.got.Load() < int64(total) {
		select {
		case <-target.notify:
		case <-time.After(hangGuard):
			stop()
			t.Fatalf("%d of %d arrived; stderr:\n%s", target.got.Load(), total, stderr.String())
		}
	}
	elapsed := time.Since(start)
	heap[total] = heapInUse()
	stop()
	if c := <-code; c != ExitOK {
		t.Errorf("forward exit code = %d; stderr:\n%s", c, stderr.String())
	}
	client.CloseIdleConnections()

	target.mu.Lock()
	if len(target.errs) > 0 {
		t.Errorf("%d problems at the target, first: %s", len(target.errs), target.errs[0])
	}
	if target.next != total || target.got.Load() != int64(total) {
		t.Errorf("the target got %d requests, last %d; want %d, exactly once each", target.got.Load(), target.next, total)
	}
	target.mu.Unlock()
	if want := fmt.Sprintf("summary: %d received, %d forwarded, %d unverified\n", total, total, total); !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, lastLines(stderr.String(), 5))
	}
	if withState {
		if last, _ := readState(t, state); last != strconv.Itoa(total) {
			t.Errorf("state file: last_event_id %q, want %d", last, total)
		}
	}
	if n := trace.n.Load(); n != int64(total) {
		t.Errorf("%d trace lines, want %d", n, total)
	}

	// Flat: the heap at the end is within a few MiB of the heap a quarter
	// in, once the relay's history is full; goroutines come back.
	t.Logf("%d deliveries in %v (published in %v): %.0f/s; heap in use (MiB) at 25%%: %.1f, 50%%: %.1f, 75%%: %.1f, end: %.1f",
		total, elapsed.Round(time.Millisecond), published.Round(time.Millisecond), float64(total)/elapsed.Seconds(),
		heap[total/4], heap[total/2], heap[3*total/4], heap[total])
	if growth := heap[total] - heap[total/2]; growth > 16 {
		t.Errorf("the heap grew by %.1f MiB in the second half (%.1f → %.1f MiB): a leak?", growth, heap[total/2], heap[total])
	}
	stopRelay()
	<-relayDone
	ts.Close()
	// The goroutines of real connections end a moment after their sockets
	// close: a leak is one that never does.
	testenv.Poll(t, fmt.Sprintf("the run's goroutines to end (%d before it): a leak?", goroutines), 20*time.Millisecond, func() bool {
		return runtime.NumGoroutine() <= goroutines+2
	})
}

// readState reads a state file's position.
func readState(t *testing.T, path string) (string, []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		LastEventID string   `json:"last_event_id"`
		DoneAfter   []string `json:"done_after"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return doc.LastEventID, doc.DoneAfter
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
