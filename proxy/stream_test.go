package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookline/hookline/proxy"
)

// states records StateChanges.
type states struct {
	mu   sync.Mutex
	list []proxy.StateChange
}

func (s *states) add(c proxy.StateChange) {
	s.mu.Lock()
	s.list = append(s.list, c)
	s.mu.Unlock()
}

func (s *states) all() []proxy.StateChange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]proxy.StateChange(nil), s.list...)
}

// names returns the states in order, as text.
func (s *states) names() string {
	var b []string
	for _, c := range s.all() {
		b = append(b, c.State.String())
	}
	return strings.Join(b, " ")
}

// runSubscribe runs Subscribe in the background and returns a function that
// cancels it and returns its result.
func runSubscribe(t *testing.T, tr proxy.Transport, opts proxy.StreamOptions, fn func(proxy.SSEEvent)) (stop func() error, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- proxy.Subscribe(ctx, tr, opts, fn) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-errc:
			case <-time.After(20 * time.Second): // a hang guard, not a timing assertion
				t.Fatal("Subscribe did not return after cancel")
			}
		})
		return result
	}
	t.Cleanup(func() { stop() })
	return stop, errc
}

func TestSubscribeReconnectsAfterEOF(t *testing.T) {
	srv := newSSEServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeStream(w, fmt.Appendf(nil, "event: ready\ndata: {}\n\nid: %d\ndata: {\"x-github-event\":\"push\"}\n\n", n+1))
		if n == 2 {
			holdOpen(r)
		}
	})
	got, st := newCollect(), &states{}
	stop, _ := runSubscribe(t, nil, noBackoff(proxy.StreamOptions{URL: srv.URL + "/chan", OnState: st.add}), got.add)
	evs := got.waitFor(t, 6)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Subscribe = %v, want context.Canceled", err)
	}
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	if want := []string{"", "1", "", "2", "", "3"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("event ids = %q, want %q", ids, want)
	}
	want := "connecting connected disconnected connecting connected disconnected connecting connected stopped"
	if got := st.names(); got != want {
		t.Errorf("states = %s\nwant     %s", got, want)
	}
	for _, c := range st.all() {
		if c.State == proxy.StateDisconnected && !errors.Is(c.Err, io.EOF) {
			t.Errorf("Disconnected.Err = %v, want io.EOF", c.Err)
		}
		if c.URL != srv.URL+"/chan" {
			t.Errorf("StateChange.URL = %q", c.URL)
		}
	}
	for i := 1; i < 3; i++ {
		if id := srv.request(i).Header.Get("Last-Event-ID"); id != fmt.Sprint(i) {
			t.Errorf("request %d: Last-Event-ID = %q, want %q (durable ids)", i, id, fmt.Sprint(i))
		}
	}
}

func TestSubscribeLastEventID(t *testing.T) {
	tests := []struct {
		name, fixture string
		opts          proxy.StreamOptions
		first         string // Last-Event-ID of the first request
		resume        string // Last-Event-ID of the second request
	}{
		{name: "hookline ids are durable", fixture: "hookline.txt", resume: "42"},
		{name: "gosmee redis ids are durable", fixture: "gosmee-redis-gap.txt", resume: "1700000100500-0"},
		// smee.io's ids count the events of one connection, ready included.
		{name: "smee ids are per connection", fixture: "smee-ready-ping-delivery.txt", resume: ""},
		{name: "smee rawdata ids are per connection", fixture: "smee-rawdata.txt", resume: ""},
		{name: "gosmee without ids", fixture: "gosmee.txt", resume: ""},
		{name: "ResumeAlways", fixture: "smee-ready-ping-delivery.txt", opts: proxy.StreamOptions{Resume: proxy.ResumeAlways}, resume: "4"},
		{name: "ResumeNever", fixture: "hookline.txt", opts: proxy.StreamOptions{Resume: proxy.ResumeNever}, resume: ""},
		{name: "saved id, no new ids", fixture: "gosmee.txt", opts: proxy.StreamOptions{LastEventID: "7"}, first: "7", resume: "7"},
		{name: "saved id, then new ids", fixture: "hookline.txt", opts: proxy.StreamOptions{LastEventID: "7"}, first: "7", resume: "42"},
		{name: "saved id with ResumeNever", fixture: "hookline.txt", opts: proxy.StreamOptions{LastEventID: "7", Resume: proxy.ResumeNever}, first: "", resume: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := readFixture(t, tt.fixture)
			srv := newSSEServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n > 0 {
					writeStream(w, nil)
					holdOpen(r)
					return
				}
				writeStream(w, body)
			})
			opts := tt.opts
			opts.URL = srv.URL
			proxy.SetStreamClock(&opts, noSleep, nil)
			connected := make(chan struct{}, 2)
			opts.OnState = func(c proxy.StateChange) {
				if c.State == proxy.StateConnected {
					connected <- struct{}{}
				}
			}
			stop, _ := runSubscribe(t, nil, opts, func(proxy.SSEEvent) {})
			for range 2 {
				select {
				case <-connected:
				case <-time.After(20 * time.Second):
					t.Fatal("no second connection")
				}
			}
			stop()
			got := []string{srv.request(0).Header.Get("Last-Event-ID"), srv.request(1).Header.Get("Last-Event-ID")}
			if want := []string{tt.first, tt.resume}; !reflect.DeepEqual(got, want) {
				t.Errorf("Last-Event-ID of the two requests = %q, want %q", got, want)
			}
		})
	}
}

func TestSubscribeRetriesTransientStatuses(t *testing.T) {
	for _, status := range []int{408, 429, 500, 502, 503, 504} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := newSSEServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					http.Error(w, "try later", status)
					return
				}
				writeStream(w, []byte("event: ready\ndata: {}\n\n"))
				holdOpen(r)
			})
			got, st := newCollect(), &states{}
			stop, _ := runSubscribe(t, nil, noBackoff(proxy.StreamOptions{URL: srv.URL, OnState: st.add}), got.add)
			got.waitFor(t, 1)
			stop()
			var se *proxy.StatusError
			if c := st.all()[1]; c.State != proxy.StateDisconnected || !errors.As(c.Err, &se) || se.StatusCode != status {
				t.Errorf("second state = %+v, want Disconnected with status %d", c, status)
			}
		})
	}
}

func TestSubscribeStopsOnPermanentError(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 410} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", status) })
			st := &states{}
			err := proxy.Subscribe(t.Context(), nil, noBackoff(proxy.StreamOptions{URL: srv.URL + "/chan", OnState: st.add}), func(proxy.SSEEvent) {})
			var se *proxy.StatusError
			if !errors.Is(err, proxy.ErrPermanent) || !errors.As(err, &se) || se.StatusCode != status {
				t.Fatalf("Subscribe = %v, want ErrPermanent with status %d", err, status)
			}
			if srv.count() != 1 {
				t.Errorf("%d requests, want 1", srv.count())
			}
			if got, want := st.names(), "connecting stopped"; got != want {
				t.Errorf("states = %s, want %s", got, want)
			}
			if last := st.all()[1]; last.Err != err {
				t.Errorf("Stopped.Err = %v, want %v", last.Err, err)
			}
		})
	}
}

func TestSubscribeReconnectsAfterIdle(t *testing.T) {
	srv := newSSEServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			writeStream(w, []byte("event: ready\ndata: {}\n\n"))
			holdOpen(r) // and say nothing more
			return
		}
		writeStream(w, []byte("id: 1\ndata: {\"x-github-event\":\"push\"}\n\n"))
		holdOpen(r)
	})
	got, st := newCollect(), &states{}
	tr := &proxy.SSETransport{IdleTimeout: 100 * time.Millisecond}
	stop, _ := runSubscribe(t, tr, noBackoff(proxy.StreamOptions{URL: srv.URL, OnState: st.add}), got.add)
	got.waitFor(t, 2)
	stop()
	if c := st.all()[2]; c.State != proxy.StateDisconnected || !errors.Is(c.Err, proxy.ErrIdle) {
		t.Errorf("third state = %+v, want Disconnected with ErrIdle", c)
	}
}

// A gosmee channel URL serves a page; the stream is at /events/<channel>.
// Switching there is not reported as a failure, and the id to resume from
// goes along: before, it was dropped on the page's answer, and everything
// sent while hookline was down was lost on every restart.
func TestSubscribeFallsBackToGosmeeEvents(t *testing.T) {
	body := readFixture(t, "gosmee.txt")
	srv := newSSEServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/events/abcdefghijkl" { // gosmee shows its page at the channel URL
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<!DOCTYPE html><title>gosmee</title>")
			return
		}
		writeStream(w, body)
		holdOpen(r)
	})
	got, st := newCollect(), &states{}
	const saved = "1700000100500-0" // a gosmee Redis id from an earlier run
	stop, _ := runSubscribe(t, nil, noBackoff(proxy.StreamOptions{URL: srv.URL + "/abcdefghijkl", LastEventID: saved, OnState: st.add}), got.add)
	if evs, want := got.waitFor(t, 4), fixtureEvents(t, "gosmee.txt"); !eventsEqual(evs, want) {
		t.Errorf("events = %q, want %q", evs, want)
	}
	stop()
	if got := srv.request(1).Header.Get("Last-Event-ID"); srv.request(1).URL.Path != "/events/abcdefghijkl" || got != saved {
		t.Errorf("second request: %s with Last-Event-ID %q, want /events/abcdefghijkl with %q", srv.request(1).URL.Path, got, saved)
	}
	for _, c := range st.all() {
		if c.State == proxy.StateDisconnected && errors.Is(c.Err, proxy.ErrNotEventStream) {
			t.Errorf("the probe was reported as a failure: %+v", c)
		}
	}
	if c := st.all()[1]; c.State != proxy.StateConnecting || c.URL != srv.URL+"/events/abcdefghijkl" || c.LastEventID != saved {
		t.Errorf("second state = %+v, want Connecting to the /events/ URL with the saved id", c)
	}
}

func TestSubscribeStopsWhenNothingIsAnEventStream(t *testing.T) {
	srv := newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{}")
	})
	err := proxy.Subscribe(t.Context(), nil, noBackoff(proxy.StreamOptions{URL: srv.URL + "/abc"}), func(proxy.SSEEvent) {})
	if !errors.Is(err, proxy.ErrNotEventStream) || srv.count() != 2 {
		t.Errorf("Subscribe = %v after %d requests, want ErrNotEventStream after 2", err, srv.count())
	}
	if got := srv.request(1).URL.Path; got != "/events/abc" {
		t.Errorf("second request path = %q, want /events/abc", got)
	}
}

func TestSubscribeCancelDuringBackoff(t *testing.T) {
	srv := newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusBadGateway) })
	disconnected := make(chan struct{}, 1)
	opts := proxy.StreamOptions{
		URL:        srv.URL,
		MinBackoff: time.Hour, // the real timer-based sleep, long
		OnState: func(c proxy.StateChange) {
			if c.State == proxy.StateDisconnected {
				select {
				case disconnected <- struct{}{}:
				default:
				}
			}
		},
	}
	proxy.SetStreamClock(&opts, nil, func(max time.Duration) time.Duration { return max })
	stop, _ := runSubscribe(t, nil, opts, func(proxy.SSEEvent) {})
	<-disconnected
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Subscribe = %v, want context.Canceled", err)
	}
	if srv.count() != 1 {
		t.Errorf("%d requests, want 1", srv.count())
	}
}

func TestSubscribeDeadline(t *testing.T) {
	srv := newSSEServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		writeStream(w, []byte("event: ready\ndata: {}\n\n"))
		holdOpen(r)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := proxy.Subscribe(ctx, nil, proxy.StreamOptions{URL: srv.URL}, func(proxy.SSEEvent) {}); err != context.DeadlineExceeded {
		t.Errorf("Subscribe = %v, want context.DeadlineExceeded", err)
	}
}

func TestSubscribeInvalidURL(t *testing.T) {
	for _, u := range []string{"", "smee.io/abc", "ftp://x/y"} {
		err := proxy.Subscribe(t.Context(), nil, proxy.StreamOptions{URL: u}, func(proxy.SSEEvent) {})
		if !errors.Is(err, proxy.ErrPermanent) {
			t.Errorf("Subscribe(%q) = %v, want ErrPermanent", u, err)
		}
	}
}

// fakeTransport is a hand-written Transport: attempt i runs script[i]; past
// the script it waits for the context.
type fakeTransport struct {
	mu     sync.Mutex
	reqs   []proxy.SubscribeRequest
	script []func(req proxy.SubscribeRequest, fn func(proxy.SSEEvent)) error
}

func (f *fakeTransport) Subscribe(ctx context.Context, req proxy.SubscribeRequest, fn func(proxy.SSEEvent)) error {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	i := len(f.reqs) - 1
	f.mu.Unlock()
	if i >= len(f.script) {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.script[i](req, fn)
}

func (f *fakeTransport) lastEventIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, r := range f.reqs {
		ids = append(ids, r.LastEventID)
	}
	return ids
}

// fail is a script step that fails with err.
func fail(err error) func(proxy.SubscribeRequest, func(proxy.SSEEvent)) error {
	return func(proxy.SubscribeRequest, func(proxy.SSEEvent)) error { return err }
}

// deliver is a script step that opens, passes evs, and ends with EOF.
func deliver(evs ...proxy.SSEEvent) func(proxy.SubscribeRequest, func(proxy.SSEEvent)) error {
	return func(req proxy.SubscribeRequest, fn func(proxy.SSEEvent)) error {
		if req.OnOpen != nil {
			req.OnOpen()
		}
		for _, ev := range evs {
			fn(ev)
		}
		return io.EOF
	}
}

func TestSubscribeBackoff(t *testing.T) {
	unavailable := &proxy.StatusError{StatusCode: 503, URL: "x"}
	ready := proxy.SSEEvent{Event: "ready", Data: []byte("{}")}
	push := proxy.SSEEvent{Data: []byte(`{"x-github-event":"push"}`)}
	var script []func(proxy.SubscribeRequest, func(proxy.SSEEvent)) error
	for range 10 {
		script = append(script, fail(unavailable))
	}
	script = append(script,
		deliver(ready),       // control events only: not a good connection
		deliver(ready, push), // a delivery: good, the backoff starts over
		fail(unavailable),
		fail(&proxy.StatusError{StatusCode: 429, URL: "x", RetryAfter: 5 * time.Second}),
	)
	var slept []time.Duration
	done := make(chan struct{})
	opts := proxy.StreamOptions{URL: "http://relay.test/chan"}
	proxy.SetStreamClock(&opts, func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		if len(slept) == len(script) {
			close(done)
			<-ctx.Done()
		}
		return ctx.Err()
	}, func(max time.Duration) time.Duration { return max })
	stop, _ := runSubscribe(t, &fakeTransport{script: script}, opts, func(proxy.SSEEvent) {})
	<-done
	stop()
	ms := time.Millisecond
	want := []time.Duration{
		250 * ms, 500 * ms, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		30 * time.Second, 30 * time.Second, 30 * time.Second, // capped
		30 * time.Second, // ready only: still failing
		250 * ms,         // after a good connection
		500 * ms,
		5 * time.Second, // Retry-After is longer than the backoff
	}
	if !reflect.DeepEqual(slept, want) {
		t.Errorf("waits = %v\nwant    %v", slept, want)
	}
}

func TestSubscribeJitterStaysInRange(t *testing.T) {
	var script []func(proxy.SubscribeRequest, func(proxy.SSEEvent)) error
	for range 50 {
		script = append(script, fail(io.ErrUnexpectedEOF))
	}
	var slept []time.Duration
	done := make(chan struct{})
	opts := proxy.StreamOptions{URL: "http://relay.test/chan", MinBackoff: time.Millisecond, MaxBackoff: 8 * time.Millisecond}
	sleep := func(ctx context.Context, d time.Duration) error {
		if slept = append(slept, d); len(slept) == 5 {
			close(done)
			<-ctx.Done()
		}
		return ctx.Err()
	}
	proxy.SetStreamClock(&opts, sleep, func(max time.Duration) time.Duration { return 3 * max }) // a broken jitter is clamped
	stop, _ := runSubscribe(t, &fakeTransport{script: script}, opts, func(proxy.SSEEvent) {})
	<-done
	stop()
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond, 8 * time.Millisecond}
	if !reflect.DeepEqual(slept, want) {
		t.Errorf("waits = %v, want %v", slept, want)
	}

	// The default jitter: every wait within [0, ceiling].
	slept, done = nil, make(chan struct{})
	proxy.SetStreamClock(&opts, sleep, nil)
	stop, _ = runSubscribe(t, &fakeTransport{script: script}, opts, func(proxy.SSEEvent) {})
	<-done
	stop()
	for i, d := range slept {
		if d < 0 || d > want[i] {
			t.Errorf("wait %d = %v, want within [0, %v]", i, d, want[i])
		}
	}
}

func TestSubscribeDropsARejectedLastEventID(t *testing.T) {
	rejected := &proxy.StatusError{StatusCode: 400, URL: "x", Message: "invalid Last-Event-ID"}
	ft := &fakeTransport{script: []func(proxy.SubscribeRequest, func(proxy.SSEEvent)) error{
		deliver(proxy.SSEEvent{ID: "5", Data: []byte(`{"x-github-event":"push"}`)}),
		fail(rejected), // the relay does not know id 5
		fail(rejected), // nor anything else: permanent
	}}
	err := proxy.Subscribe(t.Context(), ft, noBackoff(proxy.StreamOptions{URL: "http://relay.test/chan"}), func(proxy.SSEEvent) {})
	if !errors.Is(err, proxy.ErrPermanent) {
		t.Errorf("Subscribe = %v, want ErrPermanent", err)
	}
	if got, want := ft.lastEventIDs(), []string{"", "5", ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("Last-Event-IDs sent = %q, want %q", got, want)
	}
}

func TestSubscribeNilErrorFromTransportIsRetried(t *testing.T) {
	ft := &fakeTransport{script: []func(proxy.SubscribeRequest, func(proxy.SSEEvent)) error{
		func(proxy.SubscribeRequest, func(proxy.SSEEvent)) error { return nil },
	}}
	synctest.Test(t, func(t *testing.T) {
		st := &states{}
		stop, _ := runSubscribe(t, ft, proxy.StreamOptions{URL: "http://relay.test/chan", OnState: st.add}, func(proxy.SSEEvent) {})
		time.Sleep(time.Minute) // simulated: longer than any first backoff
		synctest.Wait()         // the second attempt waits
		stop()
		if n := len(ft.lastEventIDs()); n != 2 {
			t.Errorf("%d attempts, want 2", n)
		}
		if c := st.all()[1]; c.State != proxy.StateDisconnected || c.Err == nil {
			t.Errorf("second state = %+v, want Disconnected with an error", c)
		}
	})
}

// The attempt counter starts again after a good connection: its end is
// attempt 1, not the count of the failures before it (a trace that goes
// quiet after a few failures in a row would hide it).
func TestSubscribeAttemptsResetAfterAGoodConnection(t *testing.T) {
	down := errors.New("connection refused")
	push := proxy.SSEEvent{ID: "1", Data: []byte(`{"x-github-event":"push"}`)}
	ft := &fakeTransport{script: []func(proxy.SubscribeRequest, func(proxy.SSEEvent)) error{
		fail(down), fail(down), fail(down), fail(down), deliver(push),
	}}
	synctest.Test(t, func(t *testing.T) {
		st := &states{}
		stop, _ := runSubscribe(t, ft, proxy.StreamOptions{URL: "http://relay.test/chan", OnState: st.add}, func(proxy.SSEEvent) {})
		time.Sleep(10 * time.Minute) // simulated: past every backoff
		synctest.Wait()
		stop()
		var attempts []int
		for _, c := range st.all() {
			if c.State == proxy.StateDisconnected {
				attempts = append(attempts, c.Attempt)
			}
		}
		if want := []int{1, 2, 3, 4, 1}; !reflect.DeepEqual(attempts, want) {
			t.Errorf("disconnections' attempts = %v, want %v", attempts, want)
		}
	})
}

func TestStateString(t *testing.T) {
	for s, want := range map[proxy.State]string{
		proxy.StateConnecting: "connecting", proxy.StateConnected: "connected",
		proxy.StateDisconnected: "disconnected", proxy.StateStopped: "stopped", 0: "State(0)",
	} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
	for k, want := range map[proxy.Kind]string{proxy.KindDelivery: "delivery", proxy.KindControl: "control", proxy.KindGap: "gap", 9: "Kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}
