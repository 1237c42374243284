package sse_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/testutil/ssetest"
	"github.com/hookline/hookline/internal/wire"
)

// states records StateChanges.
type states struct {
	mu   sync.Mutex
	list []sse.StateChange
}

func (s *states) add(c sse.StateChange) {
	s.mu.Lock()
	s.list = append(s.list, c)
	s.mu.Unlock()
}

func (s *states) all() []sse.StateChange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sse.StateChange(nil), s.list...)
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
func runSubscribe(t *testing.T, tr sse.Transport, opts sse.Options, fn func(sse.Event)) (stop func() error, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- sse.Subscribe(ctx, tr, opts, func(ev sse.Event) error { fn(ev); return nil }) }()
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
	srv := ssetest.NewServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		ssetest.WriteStream(w, fmt.Appendf(nil, "event: ready\ndata: {}\n\nid: %d\ndata: {\"x-github-event\":\"push\"}\n\n", n+1))
		if n == 2 {
			ssetest.HoldOpen(r)
		}
	})
	got, st := ssetest.NewCollect(), &states{}
	stop, _ := runSubscribe(t, nil, ssetest.NoBackoff(sse.Options{URL: srv.URL + "/chan", OnState: st.add}), got.Add)
	evs := got.WaitFor(t, 6)
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
		if c.State == sse.StateDisconnected && !errors.Is(c.Err, io.EOF) {
			t.Errorf("Disconnected.Err = %v, want io.EOF", c.Err)
		}
		if c.URL != srv.URL+"/chan" {
			t.Errorf("StateChange.URL = %q", c.URL)
		}
	}
	for i := 1; i < 3; i++ {
		if id := srv.Request(i).Header.Get("Last-Event-ID"); id != fmt.Sprint(i) {
			t.Errorf("request %d: Last-Event-ID = %q, want %q (durable ids)", i, id, fmt.Sprint(i))
		}
	}
}

func TestSubscribeLastEventID(t *testing.T) {
	tests := []struct {
		name, fixture string
		opts          sse.Options
		first         string // Last-Event-ID of the first request
		resume        string // Last-Event-ID of the second request
	}{
		{name: "hookline ids are durable", fixture: "hookline.txt", resume: "42"},
		{name: "gosmee redis ids are durable", fixture: "gosmee-redis-gap.txt", resume: "1700000100500-0"},
		// smee.io's ids count the events of one connection, ready included.
		{name: "smee ids are per connection", fixture: "smee-ready-ping-delivery.txt", resume: ""},
		{name: "smee rawdata ids are per connection", fixture: "smee-rawdata.txt", resume: ""},
		{name: "gosmee without ids", fixture: "gosmee.txt", resume: ""},
		{name: "ResumeAlways", fixture: "smee-ready-ping-delivery.txt", opts: sse.Options{Resume: sse.ResumeAlways}, resume: "4"},
		{name: "ResumeNever", fixture: "hookline.txt", opts: sse.Options{Resume: sse.ResumeNever}, resume: ""},
		{name: "saved id, no new ids", fixture: "gosmee.txt", opts: sse.Options{LastEventID: "7"}, first: "7", resume: "7"},
		{name: "saved id, then new ids", fixture: "hookline.txt", opts: sse.Options{LastEventID: "7"}, first: "7", resume: "42"},
		{name: "saved id with ResumeNever", fixture: "hookline.txt", opts: sse.Options{LastEventID: "7", Resume: sse.ResumeNever}, first: "", resume: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := ssetest.Fixture(t, tt.fixture)
			srv := ssetest.NewServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n > 0 {
					ssetest.WriteStream(w, nil)
					ssetest.HoldOpen(r)
					return
				}
				ssetest.WriteStream(w, body)
			})
			opts := tt.opts
			opts.URL = srv.URL
			opts.Sleep = ssetest.NoSleep
			connected := make(chan struct{}, 2)
			opts.OnState = func(c sse.StateChange) {
				if c.State == sse.StateConnected {
					connected <- struct{}{}
				}
			}
			stop, _ := runSubscribe(t, nil, opts, func(sse.Event) {})
			for range 2 {
				select {
				case <-connected:
				case <-time.After(20 * time.Second):
					t.Fatal("no second connection")
				}
			}
			stop()
			got := []string{srv.Request(0).Header.Get("Last-Event-ID"), srv.Request(1).Header.Get("Last-Event-ID")}
			if want := []string{tt.first, tt.resume}; !reflect.DeepEqual(got, want) {
				t.Errorf("Last-Event-ID of the two requests = %q, want %q", got, want)
			}
		})
	}
}

func TestSubscribeRetriesTransientStatuses(t *testing.T) {
	for _, status := range []int{408, 429, 500, 502, 503, 504} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := ssetest.NewServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					http.Error(w, "try later", status)
					return
				}
				ssetest.WriteStream(w, []byte("event: ready\ndata: {}\n\n"))
				ssetest.HoldOpen(r)
			})
			got, st := ssetest.NewCollect(), &states{}
			stop, _ := runSubscribe(t, nil, ssetest.NoBackoff(sse.Options{URL: srv.URL, OnState: st.add}), got.Add)
			got.WaitFor(t, 1)
			stop()
			var se *sse.StatusError
			if c := st.all()[1]; c.State != sse.StateDisconnected || !errors.As(c.Err, &se) || se.StatusCode != status {
				t.Errorf("second state = %+v, want Disconnected with status %d", c, status)
			}
		})
	}
}

func TestSubscribeStopsOnPermanentError(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 410} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", status) })
			st := &states{}
			err := sse.Subscribe(t.Context(), nil, ssetest.NoBackoff(sse.Options{URL: srv.URL + "/chan", OnState: st.add}), func(sse.Event) error { return nil })
			var se *sse.StatusError
			if !errors.Is(err, sse.ErrPermanent) || !errors.As(err, &se) || se.StatusCode != status {
				t.Fatalf("Subscribe = %v, want ErrPermanent with status %d", err, status)
			}
			if srv.Count() != 1 {
				t.Errorf("%d requests, want 1", srv.Count())
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
	srv := ssetest.NewServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			ssetest.WriteStream(w, []byte("event: ready\ndata: {}\n\n"))
			ssetest.HoldOpen(r) // and say nothing more
			return
		}
		ssetest.WriteStream(w, []byte("id: 1\ndata: {\"x-github-event\":\"push\"}\n\n"))
		ssetest.HoldOpen(r)
	})
	got, st := ssetest.NewCollect(), &states{}
	tr := &sse.HTTPTransport{IdleTimeout: 100 * time.Millisecond}
	stop, _ := runSubscribe(t, tr, ssetest.NoBackoff(sse.Options{URL: srv.URL, OnState: st.add}), got.Add)
	got.WaitFor(t, 2)
	stop()
	if c := st.all()[2]; c.State != sse.StateDisconnected || !errors.Is(c.Err, sse.ErrIdle) {
		t.Errorf("third state = %+v, want Disconnected with ErrIdle", c)
	}
}

// A gosmee channel URL serves a page; the stream is at /events/<channel>.
// Switching there is not reported as a failure, and the id to resume from
// goes along: before, it was dropped on the page's answer, and everything
// sent while hookline was down was lost on every restart.
func TestSubscribeFallsBackToGosmeeEvents(t *testing.T) {
	body := ssetest.Fixture(t, "gosmee.txt")
	srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/events/abcdefghijkl" { // gosmee shows its page at the channel URL
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<!DOCTYPE html><title>gosmee</title>")
			return
		}
		ssetest.WriteStream(w, body)
		ssetest.HoldOpen(r)
	})
	got, st := ssetest.NewCollect(), &states{}
	const saved = "1700000100500-0" // a gosmee Redis id from an earlier run
	stop, _ := runSubscribe(t, nil, ssetest.NoBackoff(sse.Options{URL: srv.URL + "/abcdefghijkl", LastEventID: saved, OnState: st.add}), got.Add)
	if evs, want := got.WaitFor(t, 4), ssetest.FixtureEvents(t, "gosmee.txt"); !ssetest.EventsEqual(evs, want) {
		t.Errorf("events = %+v, want %+v", evs, want)
	}
	stop()
	if got := srv.Request(1).Header.Get("Last-Event-ID"); srv.Request(1).URL.Path != "/events/abcdefghijkl" || got != saved {
		t.Errorf("second request: %s with Last-Event-ID %q, want /events/abcdefghijkl with %q", srv.Request(1).URL.Path, got, saved)
	}
	for _, c := range st.all() {
		if c.State == sse.StateDisconnected && errors.Is(c.Err, sse.ErrNotEventStream) {
			t.Errorf("the probe was reported as a failure: %+v", c)
		}
	}
	if c := st.all()[1]; c.State != sse.StateConnecting || c.URL != srv.URL+"/events/abcdefghijkl" || c.LastEventID != saved {
		t.Errorf("second state = %+v, want Connecting to the /events/ URL with the saved id", c)
	}
}

func TestSubscribeStopsWhenNothingIsAnEventStream(t *testing.T) {
	srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{}")
	})
	err := sse.Subscribe(t.Context(), nil, ssetest.NoBackoff(sse.Options{URL: srv.URL + "/abc"}), func(sse.Event) error { return nil })
	if !errors.Is(err, sse.ErrNotEventStream) || srv.Count() != 2 {
		t.Errorf("Subscribe = %v after %d requests, want ErrNotEventStream after 2", err, srv.Count())
	}
	if got := srv.Request(1).URL.Path; got != "/events/abc" {
		t.Errorf("second request path = %q, want /events/abc", got)
	}
}

func TestSubscribeCancelDuringBackoff(t *testing.T) {
	srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusBadGateway) })
	disconnected := make(chan struct{}, 1)
	opts := sse.Options{
		URL:        srv.URL,
		MinBackoff: time.Hour, // the real timer-based sleep, long
		OnState: func(c sse.StateChange) {
			if c.State == sse.StateDisconnected {
				select {
				case disconnected <- struct{}{}:
				default:
				}
			}
		},
	}
	opts.Jitter = func(max time.Duration) time.Duration { return max }
	stop, _ := runSubscribe(t, nil, opts, func(sse.Event) {})
	<-disconnected
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Subscribe = %v, want context.Canceled", err)
	}
	if srv.Count() != 1 {
		t.Errorf("%d requests, want 1", srv.Count())
	}
}

func TestSubscribeDeadline(t *testing.T) {
	srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		ssetest.WriteStream(w, []byte("event: ready\ndata: {}\n\n"))
		ssetest.HoldOpen(r)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := sse.Subscribe(ctx, nil, sse.Options{URL: srv.URL}, func(sse.Event) error { return nil }); err != context.DeadlineExceeded {
		t.Errorf("Subscribe = %v, want context.DeadlineExceeded", err)
	}
}

func TestSubscribeInvalidURL(t *testing.T) {
	for _, u := range []string{"", "smee.io/abc", "ftp://x/y"} {
		err := sse.Subscribe(t.Context(), nil, sse.Options{URL: u}, func(sse.Event) error { return nil })
		if !errors.Is(err, sse.ErrPermanent) {
			t.Errorf("Subscribe(%q) = %v, want ErrPermanent", u, err)
		}
	}
}

// fakeTransport is a hand-written Transport: attempt i runs script[i]; past
// the script it waits for the context.
type fakeTransport struct {
	mu     sync.Mutex
	reqs   []sse.Request
	script []func(req sse.Request, fn func(sse.Event)) error
}

func (f *fakeTransport) Subscribe(ctx context.Context, req sse.Request, fn func(sse.Event)) error {
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
func fail(err error) func(sse.Request, func(sse.Event)) error {
	return func(sse.Request, func(sse.Event)) error { return err }
}

// deliver is a script step that opens, passes evs, and ends with EOF.
func deliver(evs ...sse.Event) func(sse.Request, func(sse.Event)) error {
	return func(req sse.Request, fn func(sse.Event)) error {
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
	unavailable := &sse.StatusError{StatusCode: 503, URL: "x"}
	ready := sse.Event{Event: "ready", Data: []byte("{}")}
	push := sse.Event{Data: []byte(`{"x-github-event":"push"}`)}
	var script []func(sse.Request, func(sse.Event)) error
	for range 10 {
		script = append(script, fail(unavailable))
	}
	script = append(script,
		deliver(ready),       // control events only: not a good connection
		deliver(ready, push), // a delivery: good, the backoff starts over
		fail(unavailable),
		fail(&sse.StatusError{StatusCode: 429, URL: "x", RetryAfter: 5 * time.Second}),
	)
	var slept []time.Duration
	done := make(chan struct{})
	opts := sse.Options{URL: "http://relay.test/chan"}
	opts.Sleep = func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		if len(slept) == len(script) {
			close(done)
			<-ctx.Done()
		}
		return ctx.Err()
	}
	opts.Jitter = func(max time.Duration) time.Duration { return max }
	stop, _ := runSubscribe(t, &fakeTransport{script: script}, opts, func(sse.Event) {})
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
	var script []func(sse.Request, func(sse.Event)) error
	for range 50 {
		script = append(script, fail(io.ErrUnexpectedEOF))
	}
	var slept []time.Duration
	done := make(chan struct{})
	opts := sse.Options{URL: "http://relay.test/chan", MinBackoff: time.Millisecond, MaxBackoff: 8 * time.Millisecond}
	sleep := func(ctx context.Context, d time.Duration) error {
		if slept = append(slept, d); len(slept) == 5 {
			close(done)
			<-ctx.Done()
		}
		return ctx.Err()
	}
	opts.Sleep, opts.Jitter = sleep, func(max time.Duration) time.Duration { return 3 * max } // a broken jitter is clamped
	stop, _ := runSubscribe(t, &fakeTransport{script: script}, opts, func(sse.Event) {})
	<-done
	stop()
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond, 8 * time.Millisecond}
	if !reflect.DeepEqual(slept, want) {
		t.Errorf("waits = %v, want %v", slept, want)
	}

	// The default jitter: every wait within [0, ceiling].
	slept, done = nil, make(chan struct{})
	opts.Sleep = sleep
	stop, _ = runSubscribe(t, &fakeTransport{script: script}, opts, func(sse.Event) {})
	<-done
	stop()
	for i, d := range slept {
		if d < 0 || d > want[i] {
			t.Errorf("wait %d = %v, want within [0, %v]", i, d, want[i])
		}
	}
}

func TestSubscribeDropsARejectedLastEventID(t *testing.T) {
	rejected := &sse.StatusError{StatusCode: 400, URL: "x", Message: "invalid Last-Event-ID"}
	ft := &fakeTransport{script: []func(sse.Request, func(sse.Event)) error{
		deliver(sse.Event{ID: "5", Data: []byte(`{"x-github-event":"push"}`)}),
		fail(rejected), // the relay does not know id 5
		fail(rejected), // nor anything else: permanent
	}}
	err := sse.Subscribe(t.Context(), ft, ssetest.NoBackoff(sse.Options{URL: "http://relay.test/chan"}), func(sse.Event) error { return nil })
	if !errors.Is(err, sse.ErrPermanent) {
		t.Errorf("Subscribe = %v, want ErrPermanent", err)
	}
	if got, want := ft.lastEventIDs(), []string{"", "5", ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("Last-Event-IDs sent = %q, want %q", got, want)
	}
}

func TestSubscribeNilErrorFromTransportIsRetried(t *testing.T) {
	ft := &fakeTransport{script: []func(sse.Request, func(sse.Event)) error{
		func(sse.Request, func(sse.Event)) error { return nil },
	}}
	synctest.Test(t, func(t *testing.T) {
		st := &states{}
		stop, _ := runSubscribe(t, ft, sse.Options{URL: "http://relay.test/chan", OnState: st.add}, func(sse.Event) {})
		time.Sleep(time.Minute) // simulated: longer than any first backoff
		synctest.Wait()         // the second attempt waits
		stop()
		if n := len(ft.lastEventIDs()); n != 2 {
			t.Errorf("%d attempts, want 2", n)
		}
		if c := st.all()[1]; c.State != sse.StateDisconnected || c.Err == nil {
			t.Errorf("second state = %+v, want Disconnected with an error", c)
		}
	})
}

// The attempt counter starts again after a good connection: its end is
// attempt 1, not the count of the failures before it (a trace that goes
// quiet after a few failures in a row would hide it).
func TestSubscribeAttemptsResetAfterAGoodConnection(t *testing.T) {
	down := errors.New("connection refused")
	push := sse.Event{ID: "1", Data: []byte(`{"x-github-event":"push"}`)}
	ft := &fakeTransport{script: []func(sse.Request, func(sse.Event)) error{
		fail(down), fail(down), fail(down), fail(down), deliver(push),
	}}
	synctest.Test(t, func(t *testing.T) {
		st := &states{}
		stop, _ := runSubscribe(t, ft, sse.Options{URL: "http://relay.test/chan", OnState: st.add}, func(sse.Event) {})
		time.Sleep(10 * time.Minute) // simulated: past every backoff
		synctest.Wait()
		stop()
		var attempts []int
		for _, c := range st.all() {
			if c.State == sse.StateDisconnected {
				attempts = append(attempts, c.Attempt)
			}
		}
		if want := []int{1, 2, 3, 4, 1}; !reflect.DeepEqual(attempts, want) {
			t.Errorf("disconnections' attempts = %v, want %v", attempts, want)
		}
	})
}

func TestStateString(t *testing.T) {
	for s, want := range map[sse.State]string{
		sse.StateConnecting: "connecting", sse.StateConnected: "connected",
		sse.StateDisconnected: "disconnected", sse.StateStopped: "stopped", 0: "State(0)",
	} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

// Subscribe tells its caller what each event is and whether its id is
// durable, so nothing downstream classifies again: smee.io's ready and
// ping carry ids (per connection: never durable); hookline's delivery ids
// are durable from the first delivery on; gosmee's gap is a gap.
func TestSubscribeSaysKindAndDurability(t *testing.T) {
	type seen struct {
		kind    wire.Kind
		durable bool
	}
	tests := []struct {
		fixture string
		want    []seen
	}{
		{"smee-ready-ping-delivery.txt", []seen{{wire.KindControl, false}, {wire.KindControl, false}, {wire.KindDelivery, false}, {wire.KindControl, false}, {wire.KindDelivery, false}}},
		{"hookline.txt", []seen{{wire.KindControl, false}, {wire.KindDelivery, true}, {wire.KindControl, true}, {wire.KindDelivery, true}}},
		{"gosmee-redis-gap.txt", []seen{{wire.KindControl, false}, {wire.KindControl, false}, {wire.KindGap, false}, {wire.KindDelivery, true}, {wire.KindDelivery, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			body := ssetest.Fixture(t, tt.fixture)
			srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				ssetest.WriteStream(w, body)
				ssetest.HoldOpen(r)
			})
			got := ssetest.NewCollect()
			stop, _ := runSubscribe(t, nil, sse.Options{URL: srv.URL + "/chan"}, got.Add)
			evs := got.WaitFor(t, len(tt.want))
			stop()
			var have []seen
			for _, ev := range evs {
				have = append(have, seen{ev.Kind, ev.Durable})
			}
			if !reflect.DeepEqual(have, tt.want) {
				t.Errorf("(kind, durable) = %v, want %v", have, tt.want)
			}
		})
	}
}

// An event fn does not take ends the connection, and the next resumes
// before it: the relay sends it again (a body link whose fetch failed is
// retried, never skipped).
func TestSubscribeRefusedEventIsSentAgain(t *testing.T) {
	srv := ssetest.NewServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
		var b strings.Builder
		for id := after + 1; id <= 3; id++ {
			fmt.Fprintf(&b, "id: %d\ndata: {\"x-github-event\":\"push\",\"n\":%d}\n\n", id, id)
		}
		ssetest.WriteStream(w, []byte(b.String()))
		ssetest.HoldOpen(r)
	})
	var mu sync.Mutex
	var taken []string
	refusedOnce := false
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- sse.Subscribe(ctx, nil, ssetest.NoBackoff(sse.Options{URL: srv.URL + "/chan"}), func(ev sse.Event) error {
			mu.Lock()
			defer mu.Unlock()
			if ev.ID == "2" && !refusedOnce {
				refusedOnce = true
				return errors.New("body not fetched")
			}
			taken = append(taken, ev.ID)
			if len(taken) == 3 {
				close(done)
			}
			return nil
		})
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("the refused event never came again")
	}
	cancel()
	<-errc
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(taken, []string{"1", "2", "3"}) {
		t.Errorf("taken %v, want [1 2 3]", taken)
	}
	if srv.Count() < 2 || srv.Request(1).Header.Get("Last-Event-ID") != "1" {
		t.Errorf("%d connections, the second with Last-Event-ID %q; want it to resume after 1", srv.Count(), srv.Request(1).Header.Get("Last-Event-ID"))
	}
}
