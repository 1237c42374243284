package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	hldelivery "github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/rest"
	"github.com/hookline/hookline/webhooks"
)

// laneTarget records what one target received, checking each signature
// with the secret on its own (hmacSHA256), and answers 200.
type laneTarget struct {
	mu     sync.Mutex
	ids    []string
	bodies [][]byte
	bad    int // deliveries whose signature did not match their bytes
}

func (lt *laneTarget) handler(secret string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		lt.mu.Lock()
		defer lt.mu.Unlock()
		lt.ids = append(lt.ids, r.Header.Get("X-GitHub-Delivery"))
		lt.bodies = append(lt.bodies, body)
		if r.Header.Get("X-Hub-Signature-256") != hmacSHA256(secret, body) {
			lt.bad++
		}
	})
}

func (lt *laneTarget) got() []string {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return slices.Clone(lt.ids)
}

func (lt *laneTarget) waitFor(t *testing.T, n int) {
	t.Helper()
	testenv.Poll(t, fmt.Sprintf("%d deliveries at the target", n), 5*time.Millisecond, func() bool { return len(lt.got()) >= n })
}

func newLaneTarget(t *testing.T, secret string) (*laneTarget, string) {
	lt := &laneTarget{}
	return lt, httptestServer(t, lt.handler(secret))
}

// TestTargetsFanOutAndRoutes: two default targets get every delivery no
// route takes, byte for byte and verifiable; a route by event.action and
// one by event.* get theirs alone; without a default target, a delivery no
// route takes is reported as unrouted.
func TestTargetsFanOutAndRoutes(t *testing.T) {
	const secret = "lanes-secret"
	a, aURL := newLaneTarget(t, secret)
	b, bURL := newLaneTarget(t, secret)
	opened, openedURL := newLaneTarget(t, secret)
	prs, prsURL := newLaneTarget(t, secret)
	relay := newPushRelay(t)
	res := newResults()
	// Local handlers run beside the lanes: every delivery, once.
	var handled atomic.Int32
	em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: slog.New(slog.DiscardHandler)})
	em.OnAny(func(context.Context, webhooks.Event) error { handled.Add(1); return nil })
	c := startConnected(t, proxy.Options{URL: relay.URL + "/c", Secret: secret, OnResult: res.add, Handlers: em, Targets: []proxy.Target{
		{Name: "a", URL: aURL}, {Name: "b", URL: bURL},
		{Name: "opened", URL: openedURL, Events: []string{"issues.opened"}},
		{Name: "prs", URL: prsURL, Events: []string{"pull_request.*"}},
	}})
	deliveries := []struct{ id, event, body string }{
		{"d1", "push", `{"ref":"refs/heads/main",  "x":"\u00e9"}`},
		{"d2", "issues", `{"action":"opened","n":2}`},
		{"d3", "issues", `{"action":"closed","n":3}`},
		{"d4", "pull_request", `{"action":"synchronize","n":4}`},
	}
	for i, d := range deliveries {
		relay.push(i+1, githubHeaders(d.id, d.event, secret, []byte(d.body)), nil, []byte(d.body))
	}
	all := res.wait(t, len(deliveries))
	for lt, want := range map[*laneTarget][]string{a: {"d1", "d3"}, b: {"d1", "d3"}, opened: {"d2"}, prs: {"d4"}} {
		if got := lt.got(); !slices.Equal(got, want) || lt.bad != 0 {
			t.Errorf("a target got %v (%d bad signatures), want %v", got, lt.bad, want)
		}
	}
	if !bytes.Equal(a.bodies[0], []byte(deliveries[0].body)) || !bytes.Equal(b.bodies[0], []byte(deliveries[0].body)) {
		t.Errorf("bodies %q %q, want the exact bytes %q", a.bodies[0], b.bodies[0], deliveries[0].body)
	}
	for _, r := range all {
		var names []string
		for _, tr := range r.Targets {
			names = append(names, tr.Name)
			if !tr.OK() {
				t.Errorf("%s → %s: %s", r.Delivery.ID, tr.Name, tr.Summary())
			}
		}
		want := map[string][]string{"d1": {"a", "b"}, "d2": {"opened"}, "d3": {"a", "b"}, "d4": {"prs"}}[r.Delivery.ID]
		if !slices.Equal(names, want) || !r.OK() {
			t.Errorf("%s: targets %v, want %v", r.Delivery.ID, names, want)
		}
	}
	if n := handled.Load(); n != 4 {
		t.Errorf("handlers ran %d times, want 4", n)
	}
	st := c.Stats()
	if st.Forwarded != 6 || st.Targets["a"].Forwarded != 2 || st.Targets["opened"].Forwarded != 1 || st.Targets["prs"].Forwarded != 1 {
		t.Errorf("stats %+v", st)
	}

	// Routes only: a push no route takes is reported, not lost silently.
	relay2 := newPushRelay(t)
	res2 := newResults()
	c2 := startConnected(t, proxy.Options{URL: relay2.URL + "/c", OnResult: res2.add, Targets: []proxy.Target{{URL: openedURL, Events: []string{"issues.opened"}}}})
	relay2.push(1, githubHeaders("u1", "push", "", []byte(`{}`)), nil, []byte(`{}`))
	if r := res2.wait(t, 1)[0]; !r.Unrouted || len(r.Targets) != 0 || c2.Stats().Unrouted != 1 {
		t.Errorf("unrouted: %+v, stats %+v", r, c2.Stats())
	}
}

// TestTargetsLaneCatchesUp: one target is down while the other keeps
// receiving in order; when it comes back, it gets every delivery from its
// lane, in order; nothing is lost and the healthy one gets nothing twice.
// A delivery is reported once both targets are done with it.
func TestTargetsLaneCatchesUp(t *testing.T) {
	healthy, healthyURL := newLaneTarget(t, "")
	flakyRec := &laneTarget{}
	flaky := newSwitchableTarget(t, flakyRec.handler(""))
	flaky.down()
	relay := newPushRelay(t)
	res := newResults()
	c := startConnected(t, proxy.Options{URL: relay.URL + "/c", OnResult: res.add, Targets: []proxy.Target{
		{Name: "healthy", URL: healthyURL}, {Name: "flaky", URL: flaky.url()},
	}})
	var want []string
	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("d%d", i)
		want = append(want, id)
		relay.push(i, githubHeaders(id, "push", "", []byte(`{}`)), nil, []byte(`{}`))
	}
	healthy.waitFor(t, 6)
	if got := flakyRec.got(); len(got) != 0 {
		t.Fatalf("the down target got %v", got)
	}
	// The target has the sixth before the client has its answer.
	testenv.Poll(t, "6 forwarded to healthy in the client's Stats", 5*time.Millisecond, func() bool { return c.Stats().Targets["healthy"].Forwarded == 6 })
	if st := c.Stats(); st.Targets["flaky"].Waiting != 6 || st.Targets["flaky"].Forwarded != 0 {
		t.Errorf("while down: stats %+v", st.Targets)
	}
	flaky.up()
	all := res.wait(t, 6)
	if got := flakyRec.got(); !slices.Equal(got, want) {
		t.Errorf("the target back up got %v, want %v in order", got, want)
	}
	if got := healthy.got(); !slices.Equal(got, want) {
		t.Errorf("the healthy target got %v, want %v once each, in order", got, want)
	}
	for _, r := range all {
		if !r.OK() || len(r.Targets) != 2 {
			t.Errorf("%s: %+v", r.Delivery.ID, r.Targets)
		}
	}
}

// TestTargetsStateFileResumesEachLane: while one target is down, the state
// file records which deliveries the other has (lanes_done); a run started
// from that file (as after a crash) sends them to the target that lacks
// them and not again to the one that has them.
func TestTargetsStateFileResumesEachLane(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	healthy, healthyURL := newLaneTarget(t, "")
	flakyRec := &laneTarget{}
	flaky := newSwitchableTarget(t, flakyRec.handler(""))
	flaky.down()
	relay := newPushRelay(t)
	targets := []proxy.Target{{Name: "healthy", URL: healthyURL}, {Name: "flaky", URL: flaky.url()}}
	res1 := newResults()
	cw := newConnWatch()
	_, stop, wait := startClient(t, proxy.WithStateWriteInterval(proxy.Options{URL: relay.URL + "/c", StateFile: state, Targets: targets, OnState: cw.on, OnResult: res1.add, DrainTimeout: 50 * time.Millisecond}, 10*time.Millisecond))
	cw.waitConnected(t)
	for i := 1; i <= 3; i++ {
		relay.push(i, githubHeaders(fmt.Sprintf("d%d", i), "push", "", []byte(`{}`)), nil, []byte(`{}`))
	}
	healthy.waitFor(t, 3)
	var crashed []byte
	testenv.Poll(t, "the state file to list delivery 3 as the healthy target's", 5*time.Millisecond, func() bool {
		crashed, _ = os.ReadFile(state)
		return strings.Contains(string(crashed), `"3": [`)
	})
	// What a crash would leave: the file as it is now.
	if err := os.WriteFile(state, crashed, 0o600); err != nil {
		t.Fatal(err)
	}
	stop()
	wait()
	if err := os.WriteFile(state, crashed, 0o600); err != nil { // the first run's end wrote it again
		t.Fatal(err)
	}
	flaky.up()
	res := newResults()
	startConnected(t, proxy.Options{URL: relay.URL + "/c", StateFile: state, OnResult: res.add, Targets: targets})
	for i := 1; i <= 3; i++ { // the relay sends them again after the watermark
		relay.push(i, githubHeaders(fmt.Sprintf("d%d", i), "push", "", []byte(`{}`)), nil, []byte(`{}`))
	}
	all := res.wait(t, 3)
	if got := flakyRec.got(); !slices.Equal(got, []string{"d1", "d2", "d3"}) {
		t.Errorf("the target that lacked them got %v", got)
	}
	if got := healthy.got(); len(got) != 3 {
		t.Errorf("the target that had them got %v: some twice", got)
	}
	for _, r := range all {
		if len(r.Targets) != 2 || !r.Targets[0].Skipped || r.Targets[1].Skipped || !r.OK() {
			t.Errorf("%s: targets %+v, want healthy skipped and flaky sent", r.Delivery.ID, r.Targets)
		}
	}
}

// memTargets are targets in memory, by host, for a synctest bubble (a
// loopback server would stall its clock): down.test refuses connections
// until downUntil, as a stopped server does.
type memTargets struct {
	mu        sync.Mutex
	downUntil time.Time
	got       map[string][]string    // host → delivery ids, in the order sent
	at        map[string][]time.Time // when each arrived
}

func (m *memTargets) RoundTrip(req *http.Request) (*http.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if req.URL.Host == "down.test" && time.Now().Before(m.downUntil) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	io.Copy(io.Discard, req.Body)
	m.got[req.URL.Host] = append(m.got[req.URL.Host], req.Header.Get("X-GitHub-Delivery"))
	m.at[req.URL.Host] = append(m.at[req.URL.Host], time.Now())
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

// TestTargetsDownForAMinute, in simulated time: a target refuses
// connections for a minute, alone (one unnamed target: before, each
// delivery was retried for 10-14 s, then went to the failed folder) or
// beside a healthy one. The healthy one gets every delivery at once, in
// order; the down one gets them all from its lane, in order, once it is
// back; each target gets each delivery once.
func TestTargetsDownForAMinute(t *testing.T) {
	for _, tc := range []struct {
		name    string
		targets []proxy.Target
	}{
		{"one target", []proxy.Target{{URL: "http://down.test/"}}},
		{"two targets", []proxy.Target{{Name: "healthy", URL: "http://healthy.test/"}, {Name: "down", URL: "http://down.test/"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testTargetDownForAMinute(t, tc.targets) })
		})
	}
}

func testTargetDownForAMinute(t *testing.T, targets []proxy.Target) {
	start := time.Now()
	mem := &memTargets{downUntil: start.Add(time.Minute), got: map[string][]string{}, at: map[string][]time.Time{}}
	res := newResults()
	c, err := proxy.New(proxy.Options{
		Targets:    targets,
		HTTPClient: &rest.Client{HTTPClient: &http.Client{Transport: mem}, Retry: proxy.SafeRetry(true)},
		OnResult:   res.add, Logger: slog.New(slog.DiscardHandler), FailedDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var ds []*hldelivery.Delivery
	var want []string
	for i := 1; i <= 5; i++ {
		id := fmt.Sprintf("d%d", i)
		want = append(want, id)
		ds = append(ds, &hldelivery.Delivery{ID: id, Event: "push", Method: http.MethodPost,
			Headers: http.Header{"X-Github-Delivery": {id}, "X-Github-Event": {"push"}, "Content-Type": {"application/json"}}, Body: []byte(`{}`)})
	}
	if err := c.Replay(t.Context(), ds); err != nil {
		t.Fatal(err)
	}
	if len(targets) == 2 {
		if got := mem.got["healthy.test"]; !slices.Equal(got, want) {
			t.Errorf("healthy got %v, want %v", got, want)
		}
		for _, at := range mem.at["healthy.test"] {
			if at.Sub(start) > time.Second {
				t.Errorf("healthy got one at +%v: the down target held it back", at.Sub(start))
			}
		}
	}
	if got := mem.got["down.test"]; !slices.Equal(got, want) {
		t.Errorf("down got %v, want %v, once each, in order", got, want)
	}
	if at := mem.at["down.test"]; len(at) == 0 || at[0].Sub(start) < time.Minute || at[0].Sub(start) > time.Minute+3*time.Second {
		t.Errorf("down got its first at %v, want within its lane's 2 s retry after the minute", at)
	}
	all := res.wait(t, 5)
	for _, r := range all {
		if !r.OK() || len(r.Targets) != len(targets) {
			t.Errorf("%s: %+v", r.Delivery.ID, r.Targets)
		}
	}
	st := c.Stats()
	for _, name := range laneNames(targets) {
		if st.Targets[name].Forwarded != 5 {
			t.Errorf("target %q: stats %+v, want 5 forwarded", name, st.Targets[name])
		}
	}
	if st.Lost != 0 || st.FailedSaved != 0 {
		t.Errorf("stats %+v: want none lost, none in the failed folder", st)
	}
}

// laneNames are the names a Client gives targets (one unnamed: "").
func laneNames(targets []proxy.Target) []string {
	if len(targets) == 1 && targets[0].Name == "" {
		return []string{""}
	}
	names, _ := proxy.TargetNames(targets)
	return names
}

// handedStream is a subscription in memory that hands over its next
// event when the test sends on next, then nothing until the end.
type handedStream struct {
	events []sse.Event
	next   chan struct{}
}

func (s handedStream) Subscribe(ctx context.Context, _ sse.Request, fn func(sse.Event)) error {
	for _, ev := range s.events {
		select {
		case <-s.next:
			fn(ev)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

// quietSpell lets a second of simulated time pass (in a synctest bubble):
// the stream is quiet, and the next delivery comes apart from the last.
func quietSpell() { time.Sleep(time.Second) }

// heldTarget holds each request until the test releases it, and records
// the order and how many it holds.
type heldTarget struct {
	mu      sync.Mutex
	got     []string
	held    int
	release chan struct{}
}

func (h *heldTarget) RoundTrip(req *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, req.Body)
	h.mu.Lock()
	h.got = append(h.got, req.Header.Get("X-GitHub-Delivery"))
	h.held++
	h.mu.Unlock()
	<-h.release
	h.mu.Lock()
	h.held--
	h.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

// heldRun is a Client, inside a synctest bubble, reading n deliveries
// (d1...dn) from a handedStream and sending them to a heldTarget.
type heldRun struct {
	s      handedStream
	target *heldTarget
	res    *results
	c      *proxy.Client
	ids    []string // d1...dn
	stop   func()   // ends Run and fails the test if it returned an error
}

func startHeld(t *testing.T, n, concurrency int) *heldRun {
	h := &heldRun{s: handedStream{next: make(chan struct{})}, target: &heldTarget{release: make(chan struct{})}, res: newResults()}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("d%d", i)
		h.ids = append(h.ids, id)
		data := fmt.Sprintf(`{"x-github-delivery":%q,"x-github-event":"push","content-type":"application/json","body":{"n":%d}}`, id, i)
		h.s.events = append(h.s.events, sse.Event{ID: fmt.Sprint(i), Data: []byte(data)})
	}
	c, err := proxy.New(proxy.WithStream(proxy.Options{
		URL: "http://relay.test/chan", Targets: []proxy.Target{{URL: "http://target.test/"}}, Concurrency: concurrency,
		HTTPClient: &rest.Client{HTTPClient: &http.Client{Transport: h.target}},
		OnResult:   h.res.add, Logger: slog.New(slog.DiscardHandler),
	}, h.s, sse.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	h.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	return h
}

// held is how many requests the target holds once everything else in the
// bubble is blocked.
func (h *heldRun) held() int {
	synctest.Wait()
	h.target.mu.Lock()
	defer h.target.mu.Unlock()
	return h.target.held
}

// Deliveries that come apart are handled on the reader's goroutine, and
// those that come close together by the worker (Run's receive): either
// way the target gets them in order, one at a time, each once. Simulated
// time: two a second apart, a burst of six, one more a second later; the
// target holds each until everything else in the client is blocked, so
// that a second request sent meanwhile would be seen.
func TestInOrderWhetherApartOrInABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHeld(t, 9, 0)
		// answer lets the target answer the one request it holds.
		answer := func() {
			t.Helper()
			if n := h.held(); n != 1 {
				t.Fatalf("the target holds %d requests, want 1 (got %v)", n, h.target.got)
			}
			h.target.release <- struct{}{}
			synctest.Wait()
		}
		apart := func() {
			quietSpell()
			h.s.next <- struct{}{}
			answer()
		}
		apart()
		apart()
		for range 6 {
			h.s.next <- struct{}{}
		}
		for range 6 {
			answer()
		}
		apart()
		h.res.wait(t, len(h.ids))
		h.stop()
		if !slices.Equal(h.target.got, h.ids) {
			t.Errorf("the target got %v, want %v", h.target.got, h.ids)
		}
		if st := h.c.Stats(); st.InFlight != 0 || st.Forwarded != int64(len(h.ids)) {
			t.Errorf("stats %+v: want %d forwarded, none in flight", st, len(h.ids))
		}
	})
}

// With Concurrency above one, a delivery that came after a quiet spell and
// is slow at the target does not hold back the ones after it: they are at
// the target at the same time (a delivery handled on the stream reader's
// goroutine would keep it from reading them until the slow one is done).
// Simulated time: d1 comes and is answered, d2 comes a second later and is
// held, then d3 and d4.
func TestConcurrentAfterAQuietSpell(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHeld(t, 4, 3)
		quietSpell()
		h.s.next <- struct{}{}
		if n := h.held(); n != 1 {
			t.Fatalf("the target holds %d requests, want d1", n)
		}
		h.target.release <- struct{}{}
		quietSpell()
		h.s.next <- struct{}{} // d2, held
		go func() {
			h.s.next <- struct{}{}
			h.s.next <- struct{}{}
		}()
		if n := h.held(); n != 3 {
			t.Errorf("the target holds %d requests (got %v), want d2, d3 and d4 at once", n, h.target.got)
		}
		for range 3 {
			h.target.release <- struct{}{}
		}
		h.res.wait(t, len(h.ids))
		h.stop()
	})
}
