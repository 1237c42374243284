package proxy_test

// Fault tests: each publishes a numbered sequence through hookline's relay
// (in this process, on loopback) and checks at the target that every
// delivery arrived exactly once, byte-exact, in order where order is
// promised. Every wait is bounded by a hang guard; none asserts speed.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/ssetest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/rest"
)

const hangGuard = relaytest.HangGuard

// fastRetry retries a target quickly, many times: enough to ride out a
// target that is down for a fraction of a second.
func fastRetry(attempts int) *rest.RetryPolicy {
	return &rest.RetryPolicy{MaxAttempts: attempts, BaseDelay: 20 * time.Millisecond, MaxDelay: 50 * time.Millisecond}
}

// retrying is a target client with policy p (Options.HTTPClient), on a
// transport that does not ask for compression, as the default's.
func retrying(p *rest.RetryPolicy) *rest.Client {
	return &rest.Client{HTTPClient: &http.Client{Transport: &http.Transport{DisableCompression: true}}, Retry: p}
}

// connected returns an OnState that signals the first StateConnected, and
// records the Last-Event-ID of every attempt.
type connWatch struct {
	mu      sync.Mutex
	ids     []string // Last-Event-ID of each Connecting
	connect chan struct{}
}

func newConnWatch() *connWatch { return &connWatch{connect: make(chan struct{}, 16)} }

func (c *connWatch) on(s proxy.StateChange) {
	switch s.State {
	case proxy.StateConnecting:
		c.mu.Lock()
		c.ids = append(c.ids, s.LastEventID)
		c.mu.Unlock()
	case proxy.StateConnected:
		c.connect <- struct{}{}
	}
}

func (c *connWatch) waitConnected(t testing.TB) {
	t.Helper()
	select {
	case <-c.connect:
	case <-time.After(hangGuard):
		t.Fatal("the client never connected")
	}
}

func (c *connWatch) lastEventIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.ids...)
}

// fastStream reconnects without the default quarter-second backoff.
var fastStream = sse.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}

// (3) The TCP connection is cut in the middle of a large event: the client
// reconnects with Last-Event-ID and loses nothing, receives nothing twice.
func TestFaultConnectionCutMidEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a fault test")
	}
	rl := relaytest.Start(t, relay.Options{})
	target := &relaytest.Sink{}
	ts := httptestServer(t, target)

	// A loopback TCP proxy between the client and the relay that drops
	// the first connection after 1 MiB from the relay: inside delivery 4,
	// just under the size the relay sends by link (wire.LinkMin), about
	// 1.3 MiB as an event.
	proxyAddr, cuts := startCutProxy(t, strings.TrimPrefix(rl.Base, "http://"), 1<<20)
	channel := strings.Replace(rl.Channel, strings.TrimPrefix(rl.Base, "http://"), proxyAddr, 1)

	body := func(n int) []byte {
		if n == 4 {
			return relaytest.Body(n, wire.LinkMin-100) // with its JSON, under LinkMin
		}
		return relaytest.Body(n, 100)
	}
	cw := newConnWatch()
	startClient(t, proxy.WithStream(proxy.Options{URL: channel, Targets: []proxy.Target{{URL: ts}}, OnState: cw.on}, nil, fastStream))
	cw.waitConnected(t)
	const last = 8
	for n := 1; n <= last; n++ {
		rl.Publish(t, nil, n, body(n))
	}
	// One more delivery, in order after the others: a stray duplicate of
	// one before it would arrive before it.
	rl.Publish(t, nil, last+1, body(last+1))
	target.WaitFor(t, last+1)
	relaytest.CheckExactlyOnce(t, target.Arrivals(), 1, last+1, true, body)
	if cuts.Load() != 1 {
		t.Errorf("the proxy cut %d connections, want 1", cuts.Load())
	}
	ids := cw.lastEventIDs()
	if len(ids) < 2 || ids[1] != "3" {
		t.Errorf("Last-Event-ID of each attempt = %q, want the reconnect to resume after 3", ids)
	}
}

// (8) The connection drops before any delivery has arrived (a laptop that
// sleeps), and deliveries are acked by the relay meanwhile: the client has
// no id of its own, so it resumes after the last id the relay's ready event
// named, and gets all of them. Before, 0 of 10 arrived.
func TestFaultCutBeforeTheFirstDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a fault test")
	}
	rl := relaytest.Start(t, relay.Options{})
	target := &relaytest.Sink{}
	ts := httptestServer(t, target)
	gate := startGateProxy(t, strings.TrimPrefix(rl.Base, "http://"))
	channel := strings.Replace(rl.Channel, strings.TrimPrefix(rl.Base, "http://"), gate.addr, 1)

	cw := newConnWatch()
	startClient(t, proxy.WithStream(proxy.Options{URL: channel, Targets: []proxy.Target{{URL: ts}}, OnState: cw.on}, nil, fastStream))
	cw.waitConnected(t)
	gate.cut() // the stream drops; reconnections wait at the gate
	body := func(n int) []byte { return relaytest.Body(n, 10) }
	const last = 10
	for n := 1; n <= last; n++ {
		rl.Publish(t, nil, n, body(n))
	}
	gate.open()
	got := target.WaitFor(t, last)
	relaytest.CheckExactlyOnce(t, got, 1, last, true, body)
	if ids := cw.lastEventIDs(); len(ids) < 2 || ids[1] != "0" {
		t.Errorf("Last-Event-ID of each attempt = %q, want the reconnect to resume after 0", ids)
	}
}

// gateProxy forwards loopback TCP connections to upstream. cut closes the
// connections made so far; until open is called, later connections wait
// before they reach upstream.
type gateProxy struct {
	addr     string
	mu       sync.Mutex
	conns    []net.Conn
	cutDone  bool
	released chan struct{}
}

func startGateProxy(t *testing.T, upstream string) *gateProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	g := &gateProxy{addr: ln.Addr().String(), released: make(chan struct{})}
	t.Cleanup(g.open)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				g.mu.Lock()
				held := g.cutDone
				if !held {
					g.conns = append(g.conns, c)
				}
				g.mu.Unlock()
				if held {
					<-g.released
				}
				u, err := net.Dial("tcp", upstream)
				if err != nil {
					return
				}
				defer u.Close()
				go io.Copy(u, c)
				io.Copy(c, u)
			}()
		}
	}()
	return g
}

func (g *gateProxy) cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cutDone = true
	for _, c := range g.conns {
		c.Close()
	}
}

func (g *gateProxy) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.released:
	default:
		close(g.released)
	}
}

// startCutProxy forwards loopback TCP connections to upstream; the first
// connection is closed after cutAfter bytes came back from upstream.
func startCutProxy(t *testing.T, upstream string, cutAfter int64) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var cuts atomic.Int32
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			first := conns.Add(1) == 1
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", upstream)
				if err != nil {
					return
				}
				defer u.Close()
				go io.Copy(u, c)
				if first {
					io.CopyN(c, u, cutAfter)
					cuts.Add(1)
					return // both ends close: the cut
				}
				io.Copy(c, u)
			}()
		}
	}()
	return ln.Addr().String(), &cuts
}

// httptestServer serves h on loopback until the test ends and returns its
// URL.
func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// switchableTarget is a target that can go down (its port refuses
// connections) and come back on the same port.
type switchableTarget struct {
	t    *testing.T
	addr string
	h    http.Handler
	mu   sync.Mutex
	srv  *http.Server
	ln   net.Listener // srv's, closed by down itself
}

func newSwitchableTarget(t *testing.T, h http.Handler) *switchableTarget {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &switchableTarget{t: t, addr: ln.Addr().String(), h: h}
	s.serve(ln)
	t.Cleanup(s.down)
	return s
}

func (s *switchableTarget) url() string { return "http://" + s.addr }

func (s *switchableTarget) serve(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv, s.ln = &http.Server{Handler: s.h}, ln
	go s.srv.Serve(ln)
}

// down closes the listener and every connection: new ones are refused.
// The listener is closed here, not only by srv.Close: that closes the
// listeners Serve has begun to track, and a Serve goroutine that has not
// run yet leaves the port listening until it does, so that a client could
// connect, send, and then have its connection reset (TestTargetsLaneCatchesUp
// saw a delivery fail so instead of waiting for the target to come back).
func (s *switchableTarget) down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Close()
		s.ln.Close()
		s.srv, s.ln = nil, nil
	}
}

// up listens on the same port again.
func (s *switchableTarget) up() {
	s.t.Helper()
	var ln net.Listener
	var err error
	// The kernel may hold the port for a moment after the close.
	testenv.Poll(s.t, "the port "+s.addr+" to be free again", 10*time.Millisecond, func() bool {
		ln, err = net.Listen("tcp", s.addr)
		return err == nil
	})
	s.serve(ln)
}

// (4) The target is down for a while, then returns: the retries ride it
// out, and every delivery arrives once, in order.
func TestFaultTargetDownThenBack(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a fault test")
	}
	rl := relaytest.Start(t, relay.Options{})
	target := &relaytest.Sink{}
	st := newSwitchableTarget(t, target)
	res := newResults()
	cw := newConnWatch()
	// Every attempt the down target refuses is told to the test.
	refused := make(chan struct{}, 1000)
	client := retrying(fastRetry(100))
	base := client.HTTPClient.Transport
	client.HTTPClient.Transport = ssetest.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(r)
		if err != nil {
			refused <- struct{}{}
		}
		return resp, err
	})
	c, _, _ := startClient(t, proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: st.url()}}, HTTPClient: client, OnResult: res.add, OnState: cw.on})
	cw.waitConnected(t)
	body := func(n int) []byte { return relaytest.Body(n, 10) }
	for n := 1; n <= 3; n++ {
		rl.Publish(t, nil, n, body(n))
	}
	// Down once the client has 3's answer: a target that dies between
	// handling a delivery and answering gets it again (at least once), a
	// different test.
	res.wait(t, 3)
	st.down()
	for n := 4; n <= 6; n++ {
		rl.Publish(t, nil, n, body(n))
	}
	for range 3 { // down while delivery 4 is retried: its first attempt and two retries refused
		select {
		case <-refused:
		case <-time.After(relaytest.HangGuard):
			t.Fatal("the client never tried delivery 4 at the down target")
		}
	}
	st.up()
	for n := 7; n <= 9; n++ {
		rl.Publish(t, nil, n, body(n))
	}
	target.WaitFor(t, 9)
	res.wait(t, 6)
	relaytest.CheckExactlyOnce(t, target.Arrivals(), 1, 9, true, body)
	if s := c.Stats(); s.Forwarded != 9 || s.TargetFails != 0 || s.FailedSaved != 0 {
		t.Errorf("stats = %+v, want 9 forwarded, no failure", s)
	}
}

// (4) A target that answers 503 with Retry-After: 1 gets the delivery again
// no sooner than a second later, and it arrives once.
func TestFaultTargetRetryAfter(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a fault test")
	}
	rl := relaytest.Start(t, relay.Options{})
	var mu sync.Mutex
	var times []time.Time
	target := &relaytest.Sink{Status: func(n int, w http.ResponseWriter, r *http.Request) int {
		if r.Header.Get("X-GitHub-Delivery") != relaytest.ID(2) {
			return http.StatusOK
		}
		mu.Lock()
		defer mu.Unlock()
		times = append(times, time.Now())
		if len(times) == 1 {
			w.Header().Set("Retry-After", "1")
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}}
	ts := httptestServer(t, target)
	res := newResults()
	cw := newConnWatch()
	startClient(t, proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: ts}}, OnResult: res.add, OnState: cw.on})
	cw.waitConnected(t)
	body := func(n int) []byte { return relaytest.Body(n, 10) }
	for n := 1; n <= 3; n++ {
		rl.Publish(t, nil, n, body(n))
	}
	res.wait(t, 3)
	relaytest.CheckExactlyOnce(t, target.Arrivals(), 1, 3, true, body)
	mu.Lock()
	defer mu.Unlock()
	if len(times) != 2 {
		t.Fatalf("delivery 2 was attempted %d times, want 2", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < time.Second {
		t.Errorf("the retry came %v after the 503, want at least the 1 s of Retry-After", gap)
	}
}

// (5) A slow target (200 ms per delivery) and a publisher that does not
// wait: nothing is lost, the order is kept.
func TestFaultSlowTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a fault test")
	}
	rl := relaytest.Start(t, relay.Options{})
	// Slower than the relay: the target holds the first delivery until the
	// relay has taken every one.
	published := make(chan struct{})
	target := &relaytest.Sink{Status: func(int, http.ResponseWriter, *http.Request) int {
		<-published
		return http.StatusOK
	}}
	ts := httptestServer(t, target)
	cw := newConnWatch()
	startClient(t, proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: ts}}, OnState: cw.on})
	cw.waitConnected(t)
	body := func(n int) []byte { return relaytest.Body(n, 1000) }
	const last = 12
	for n := 1; n <= last; n++ {
		rl.Publish(t, nil, n, body(n))
	}
	close(published)
	target.WaitFor(t, last)
	relaytest.CheckExactlyOnce(t, target.Arrivals(), 1, last, true, body)
}

// Deliveries the target does not take (down, 5xx after the retries) are
// saved in FailedDir, a 4xx too (a wrong path is fixed by replaying the
// same bytes to the right URL; before, only 408/425/429/5xx were kept), each
// with a note saying how the target answered. Forwarding goes on.
func TestFailedDeliveriesAreSavedForReplay(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	target := &relaytest.Sink{Status: func(_ int, _ http.ResponseWriter, r *http.Request) int {
		switch r.Header.Get("X-GitHub-Delivery") {
		case relaytest.ID(2):
			return http.StatusBadGateway
		case relaytest.ID(3):
			return http.StatusBadRequest
		}
		return http.StatusOK
	}}
	st := newSwitchableTarget(t, target)
	failed := filepath.Join(t.TempDir(), "failed") // created when needed
	res := newResults()
	cw := newConnWatch()
	c, _, _ := startClient(t, proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: st.url()}}, HTTPClient: retrying(fastRetry(2)), FailedDir: failed, OnResult: res.add, OnState: cw.on})
	cw.waitConnected(t)
	body := func(n int) []byte { return relaytest.Body(n, 10) }
	for n := 1; n <= 3; n++ {
		rl.Publish(t, nil, n, body(n))
	}
	res.wait(t, 3)
	st.down()
	rl.Publish(t, nil, 4, body(4))
	res.wait(t, 1) // results.wait counts new results
	st.up()
	rl.Publish(t, nil, 5, body(5))
	all := res.wait(t, 1)

	byID := map[string]proxy.Result{}
	for _, r := range all {
		byID[r.Delivery.ID] = r
	}
	for n, want := range map[int]bool{1: false, 2: true, 3: true, 4: true, 5: false} {
		r := byID[relaytest.ID(n)]
		if len(r.Targets) != 1 {
			t.Fatalf("delivery %d: %d target results, want 1", n, len(r.Targets))
		}
		tr := r.Targets[0]
		if got := tr.FailedFile != ""; got != want {
			t.Errorf("delivery %d: FailedFile = %q (err %v), want saved = %v", n, tr.FailedFile, tr.FailedErr, want)
			continue
		}
		if !want {
			continue
		}
		if filepath.Dir(tr.FailedFile) != failed {
			t.Errorf("delivery %d saved in %s, want %s (one unnamed target: the failed folder itself)", n, tr.FailedFile, failed)
		}
		cd, err := capture.Read(tr.FailedFile)
		if err != nil {
			t.Fatal(err)
		}
		if cd.ID != relaytest.ID(n) || !bytes.Equal(cd.Body, body(n)) {
			t.Errorf("delivery %d: the capture holds %q with %d bytes", n, cd.ID, len(cd.Body))
		}
		if wantNote := map[int]string{2: "the target answered 502 Bad Gateway", 3: "the target answered 400 Bad Request", 4: "the target answered no answer: "}[n]; !strings.HasPrefix(cd.Note, wantNote) {
			t.Errorf("delivery %d: note %q, want it to start %q", n, cd.Note, wantNote)
		}
	}
	if s := c.Stats(); s.FailedSaved != 3 || s.Lost != 0 || s.TargetFails != 3 {
		t.Errorf("stats = %+v, want 3 saved for replay, 3 target failures, none lost", s)
	}
	if st, err := os.Stat(failed); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("failed folder: %v, mode %v; want created owner-only", err, st.Mode().Perm())
	}
}

// (6) The disk fills up while saving (an injected ENOSPC for one file):
// the Result says so clearly, and forwarding and saving go on.
func TestFaultDiskFullWhileSaving(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a fault test")
	}
	rl := relaytest.Start(t, relay.Options{})
	target := &relaytest.Sink{}
	ts := httptestServer(t, target)
	dir := t.TempDir()
	res := newResults()
	cw := newConnWatch()
	c, err := proxy.New(proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: ts}}, SaveDir: dir, OnResult: res.add, OnState: cw.on, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetCaptureWriter(c, func(dir string, d capture.File) (string, error) {
		if d.ID == relaytest.ID(2) {
			return "", fmt.Errorf("saving delivery %s to %s: %w", d.ID, dir, &os.PathError{Op: "write", Path: filepath.Join(dir, ".capture-1.tmp"), Err: syscall.ENOSPC})
		}
		return capture.Write(dir, d)
	})
	runClient(t, c)
	cw.waitConnected(t)
	body := func(n int) []byte { return relaytest.Body(n, 10) }
	for n := 1; n <= 3; n++ {
		rl.Publish(t, nil, n, body(n))
	}
	all := res.wait(t, 3)
	relaytest.CheckExactlyOnce(t, target.WaitFor(t, 3), 1, 3, true, body)
	for _, r := range all {
		full := r.Delivery.ID == relaytest.ID(2)
		if got := r.SaveErr != nil; got != full {
			t.Errorf("%s: SaveErr = %v", r.Delivery.ID, r.SaveErr)
		}
		if full && (!errors.Is(r.SaveErr, syscall.ENOSPC) || !strings.Contains(r.SaveErr.Error(), "no space left on device")) {
			t.Errorf("SaveErr = %v, want a message saying the disk is full", r.SaveErr)
		}
	}
	if s := c.Stats(); s.Saved != 2 || s.SaveFails != 1 || s.Forwarded != 3 {
		t.Errorf("stats = %+v, want 3 forwarded, 2 saved, 1 save failure", s)
	}
}

// (6) A real full disk, where the test can mount a tiny tmpfs (Linux, as
// root): the first capture fits, the big one does not, the next small one
// fits again.
func TestFaultDiskFullTmpfs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a fault test")
	}
	dir := t.TempDir()
	if err := mountTinyTmpfs(dir); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v); TestFaultDiskFullWhileSaving injects the error instead", err)
	}
	t.Cleanup(func() { unmount(dir) })
	rl := relaytest.Start(t, relay.Options{})
	target := &relaytest.Sink{}
	ts := httptestServer(t, target)
	res := newResults()
	cw := newConnWatch()
	c, _, _ := startClient(t, proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: ts}}, SaveDir: dir, OnResult: res.add, OnState: cw.on})
	cw.waitConnected(t)
	body := func(n int) []byte {
		if n == 2 {
			return relaytest.Body(n, 256<<10) // larger than the whole tmpfs
		}
		return relaytest.Body(n, 10)
	}
	for n := 1; n <= 3; n++ {
		rl.Publish(t, nil, n, body(n))
	}
	all := res.wait(t, 3)
	relaytest.CheckExactlyOnce(t, target.WaitFor(t, 3), 1, 3, true, body)
	for _, r := range all {
		full := r.Delivery.ID == relaytest.ID(2)
		if full != (r.SaveErr != nil) || (full && !errors.Is(r.SaveErr, syscall.ENOSPC)) {
			t.Errorf("%s: SaveErr = %v, want ENOSPC only for the big one", r.Delivery.ID, r.SaveErr)
		}
	}
	if s := c.Stats(); s.Saved != 2 || s.SaveFails != 1 {
		t.Errorf("stats = %+v, want 2 saved, 1 failure", s)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".capture-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left behind: %q", leftovers)
	}
}

// runClient runs c until the test ends.
func runClient(t *testing.T, c *proxy.Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(hangGuard):
			t.Error("Client.Run did not return after cancel")
		}
	})
}

// stateDoc reads a state file.
// waitStateFile waits until the state file at path holds last and done
// (comma-separated): the client writes it in the background.
func waitStateFile(t testing.TB, path, last, done string) {
	t.Helper()
	testenv.Poll(t, fmt.Sprintf("the state file to hold last_event_id %q, done_after %q", last, done), 5*time.Millisecond, func() bool {
		if _, err := os.Stat(path); err != nil {
			return false
		}
		l, d := readStateFile(t, path)
		return l == last && strings.Join(d, ",") == done
	})
}

func readStateFile(t testing.TB, path string) (last string, doneAfter []string) {
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
		t.Fatalf("state file %s: %v\n%s", path, err, data)
	}
	return doc.LastEventID, doc.DoneAfter
}

// A client stopped and started again with its state file resumes where it
// was: deliveries published while it was away arrive, none twice.
func TestStateFileResumesAfterARestart(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	target := &relaytest.Sink{}
	ts := httptestServer(t, target)
	state := filepath.Join(t.TempDir(), "state", "chan.json")
	body := func(n int) []byte { return relaytest.Body(n, 10) }

	cw := newConnWatch()
	c, cancel, wait := startClient(t, proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: ts}}, StateFile: state, OnState: cw.on})
	cw.waitConnected(t)
	for n := 1; n <= 3; n++ {
		rl.Publish(t, nil, n, body(n))
	}
	target.WaitFor(t, 3)
	cancel()
	wait()
	if got := c.Checkpoint(); got != "3" {
		t.Errorf("Checkpoint = %q, want 3", got)
	}
	if last, _ := readStateFile(t, state); last != "3" {
		t.Errorf("state file: last_event_id %q, want 3", last)
	}
	for n := 4; n <= 6; n++ { // while no client listens
		rl.Publish(t, nil, n, body(n))
	}
	cw2 := newConnWatch()
	startClient(t, proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: ts}}, StateFile: state, OnState: cw2.on})
	// One more, in order after the others: a stray duplicate would
	// arrive before it.
	rl.Publish(t, nil, 7, body(7))
	target.WaitFor(t, 7)
	relaytest.CheckExactlyOnce(t, target.Arrivals(), 1, 7, true, body)
	if ids := cw2.lastEventIDs(); len(ids) == 0 || ids[0] != "3" {
		t.Errorf("the restarted client sent Last-Event-ID %q, want 3", ids)
	}
}

// With several workers the state file stores the watermark: a slow
// delivery holds it back while the later ones finish, and those are listed
// as done after it, so a restart from that file skips them.
func TestStateFileWatermarkWithConcurrency(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	release := make(chan struct{})
	target := &relaytest.Sink{Status: func(_ int, _ http.ResponseWriter, r *http.Request) int {
		if r.Header.Get("X-GitHub-Delivery") == relaytest.ID(2) {
			<-release
		}
		return http.StatusOK
	}}
	ts := httptestServer(t, target)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	state := filepath.Join(t.TempDir(), "state.json")
	body := func(n int) []byte { return relaytest.Body(n, 10) }
	cw := newConnWatch()
	res := newResults()
	c, cancel, wait := startClient(t, proxy.WithStateWriteInterval(proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: ts}}, StateFile: state, Concurrency: 3, OnState: cw.on, OnResult: res.add}, 10*time.Millisecond))
	cw.waitConnected(t)
	for n := 1; n <= 4; n++ {
		rl.Publish(t, nil, n, body(n))
	}
	res.wait(t, 3) // 1, 3 and 4; 2 is held
	// The state is written off the deliveries' path: wait for it.
	waitStateFile(t, state, "1", "3,4")
	if got := c.Checkpoint(); got != "1" {
		t.Errorf("Checkpoint = %q, want 1", got)
	}
	close(release)
	res.wait(t, 1)
	cancel()
	wait()
	if last, done := readStateFile(t, state); last != "4" || len(done) != 0 {
		t.Errorf("at the end: last_event_id %q, done_after %q; want 4 and none", last, done)
	}

	// A state file written while 2 was held: a restart gets 2 again but
	// skips 3 and 4 as duplicates.
	doc := fmt.Sprintf(`{"version":1,"channel":"x","channel_sha256":%q,"last_event_id":"1","done_after":["3","4"]}`, channelSHA256(rl.Channel))
	if err := os.WriteFile(state, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	before := len(target.Arrivals())
	res2 := newResults()
	c2, _, _ := startClient(t, proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: ts}}, StateFile: state, OnResult: res2.add})
	all := res2.wait(t, 3)
	var dups, delivered []string
	for _, r := range all {
		if r.Duplicate {
			dups = append(dups, r.Delivery.EventID)
		} else {
			delivered = append(delivered, r.Delivery.EventID)
		}
	}
	if strings.Join(dups, ",") != "3,4" || strings.Join(delivered, ",") != "2" {
		t.Errorf("after the restart: duplicates %q, delivered %q; want 3,4 and 2", dups, delivered)
	}
	if got := target.Arrivals()[before:]; len(got) != 1 || got[0].ID != relaytest.ID(2) {
		t.Errorf("after the restart the target got %d deliveries, want only 2 again", len(got))
	}
	if s := c2.Stats(); s.Duplicates != 2 {
		t.Errorf("Duplicates = %d, want 2", s.Duplicates)
	}
}

// channelSHA256 is how a state file names its channel.
func channelSHA256(streamURL string) string {
	sum := sha256.Sum256([]byte(streamURL))
	return hex.EncodeToString(sum[:])
}

// A client that resumes after an id a relay never had (an in-memory relay
// that restarted) is told the relay's history is new, not that deliveries
// were lost while it was away.
func TestResumeOnARestartedRelaySaysSo(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	var logs relaytest.Buffer
	startConnected(t, proxy.Options{URL: rl.Channel, LastEventID: "57", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	logs.Wait(t, "the log to say the relay restarted, not that deliveries were lost", func(text string) bool {
		return strings.Contains(text, "the relay restarted and its history is new") && !strings.Contains(text, "lost deliveries")
	})
}

// A client that resumes after deliveries left the relay's history is told
// at once, with how many (OnGap, Stats.GapLost), before the deliveries
// after the gap are handled.
func TestGapReportedAtOnceWithItsCount(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{HistoryCount: 5})
	for n := 1; n <= 20; n++ {
		rl.Publish(t, nil, n, relaytest.Body0(n))
	}
	target := &relaytest.Sink{}
	ts := httptestServer(t, target)
	var mu sync.Mutex
	var order []string
	c, cancel, wait := startClient(t, proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: ts}}, LastEventID: "1",
		OnGap: func(g proxy.Gap) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, fmt.Sprintf("gap %s %d %s: %s", g.AfterID, g.Count, g.Reason, g.Message))
		},
		OnResult: func(r proxy.Result) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, r.Delivery.EventID)
		}})
	target.WaitFor(t, 5)
	cancel()
	wait() // every delivery received is done and reported
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 6 || !strings.HasPrefix(order[0], "gap 1 14 expired: the relay no longer had 14 deliveries") || order[1] != "16" {
		t.Errorf("reported %q, want the gap of 14 after 1 first, then 16 to 20", order)
	}
	if st := c.Stats(); st.Gaps != 1 || st.GapLost != 14 {
		t.Errorf("Stats: %d gaps, %d lost; want 1 and 14", st.Gaps, st.GapLost)
	}
}
