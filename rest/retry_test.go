package rest_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/rest"
)

// reply is one canned server response.
type reply struct {
	status int
	header map[string]string
	body   string
	cut    bool // hijack and close the connection without a response
}

// replies returns a handler that answers with rs in order, repeating the
// last one.
func replies(t *testing.T, rs ...reply) http.HandlerFunc {
	var mu sync.Mutex
	n := 0
	return func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		rp := rs[n]
		if n < len(rs)-1 {
			n++
		}
		mu.Unlock()
		if rp.cut {
			hijack(t, w, "")
			return
		}
		for k, v := range rp.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rp.status)
		io.WriteString(w, rp.body)
	}
}

// fakeClock records waits instead of sleeping.
type fakeClock struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (f *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.waits = append(f.waits, d)
	f.mu.Unlock()
	return ctx.Err()
}

func (f *fakeClock) recorded() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.waits...)
}

// fixedNow is the injected clock for HTTP-date Retry-After values.
var fixedNow = time.Date(2025, time.January, 2, 3, 4, 5, 0, time.UTC)

// retryClient returns a client with policy p whose waits are recorded by the
// returned fakeClock; jitter is always half the ceiling.
func retryClient(p rest.RetryPolicy) (*rest.Client, *fakeClock) {
	clock := &fakeClock{}
	rest.SetRetryClock(&p, func() time.Time { return fixedNow }, func() float64 { return 0.5 }, clock.sleep)
	return &rest.Client{Retry: &p}, clock
}

func TestRetryStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status       int
		wantAttempts int
		wantStatus   int
	}{
		{408, 2, 200}, {425, 2, 200}, {429, 2, 200}, {500, 2, 200},
		{502, 2, 200}, {503, 2, 200}, {504, 2, 200},
		{400, 1, 400}, {401, 1, 401}, {404, 1, 404}, {409, 1, 409}, {501, 1, 501}, {505, 1, 505},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			t.Parallel()
			srv, rec := startServer(t, replies(t, reply{status: tc.status, body: "first"}, reply{status: 200, body: "second"}))
			c, _ := retryClient(rest.RetryPolicy{})
			req := rest.Request{Method: rest.Post, BaseURL: srv.URL, Body: []byte(`{"n":1}`)}
			resp, err := c.SendWithContext(t.Context(), req)
			if err != nil {
				t.Fatalf("Send(%q) after %d error = %v", srv.URL, tc.status, err)
			}
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("Send(%q) after %d = %d, want %d", srv.URL, tc.status, resp.StatusCode, tc.wantStatus)
			}
			reqs := rec.requests()
			if len(reqs) != tc.wantAttempts {
				t.Fatalf("Send(%q) after %d made %d attempts, want %d", srv.URL, tc.status, len(reqs), tc.wantAttempts)
			}
			for i, r := range reqs {
				if r.Body != `{"n":1}` {
					t.Errorf("attempt %d body = %q, want %q", i+1, r.Body, `{"n":1}`)
				}
			}
		})
	}
}

func TestRetryBackoff(t *testing.T) {
	t.Parallel()
	srv, rec := startServer(t, replies(t, reply{status: 503, body: "down"}))
	c, clock := retryClient(rest.RetryPolicy{MaxAttempts: 5, BaseDelay: 100 * time.Millisecond, MaxDelay: 300 * time.Millisecond})
	resp, err := c.SendWithContext(t.Context(), rest.Request{Method: rest.Get, BaseURL: srv.URL})
	if err != nil {
		t.Fatalf("Send(%q) error = %v, want the last 503 as data", srv.URL, err)
	}
	if resp.StatusCode != 503 || resp.Body != "down" {
		t.Errorf("Send(%q) = %d %q, want 503 %q", srv.URL, resp.StatusCode, resp.Body, "down")
	}
	if n := rec.count(); n != 5 {
		t.Errorf("Send(%q) made %d attempts, want 5", srv.URL, n)
	}
	// Ceilings 100, 200, 300 (capped), 300 ms; jitter 0.5.
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond, 150 * time.Millisecond}
	if got := clock.recorded(); !reflect.DeepEqual(got, want) {
		t.Errorf("Send(%q) waited %v, want %v", srv.URL, got, want)
	}
}

func TestRetryDefaults(t *testing.T) {
	t.Parallel()
	srv, rec := startServer(t, replies(t, reply{status: 500}))
	c, clock := retryClient(rest.RetryPolicy{})
	if _, err := c.SendWithContext(t.Context(), rest.Request{Method: rest.Get, BaseURL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	if n := rec.count(); n != 4 {
		t.Errorf("zero RetryPolicy made %d attempts, want 4", n)
	}
	// Ceilings 250, 500, 1000 ms; jitter 0.5.
	want := []time.Duration{125 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond}
	if got := clock.recorded(); !reflect.DeepEqual(got, want) {
		t.Errorf("zero RetryPolicy waited %v, want %v", got, want)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		retryAfter string
		maxAfter   time.Duration
		want       time.Duration
	}{
		{"seconds", "7", 0, 7 * time.Second},
		{"zero seconds", "0", 0, 0},
		{"seconds over the default cap", "3600", 0, 60 * time.Second},
		{"seconds over a custom cap", "3600", 2 * time.Minute, 2 * time.Minute},
		{"huge seconds", "99999999999999999999999", 0, 60 * time.Second},
		{"HTTP date", "Thu, 02 Jan 2025 03:04:35 GMT", 0, 30 * time.Second},
		{"HTTP date over the cap", "Thu, 02 Jan 2025 04:04:05 GMT", 0, 60 * time.Second},
		{"HTTP date in the past", "Thu, 02 Jan 2025 03:00:00 GMT", 0, 0},
		{"RFC 850 date", "Thursday, 02-Jan-25 03:04:15 GMT", 0, 10 * time.Second},
		{"invalid falls back to backoff", "soon", 0, 125 * time.Millisecond},
		{"negative falls back to backoff", "-5", 0, 125 * time.Millisecond},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rec := startServer(t, replies(t,
				reply{status: 429, header: map[string]string{"Retry-After": tc.retryAfter}},
				reply{status: 200, body: "ok"}))
			c, clock := retryClient(rest.RetryPolicy{MaxRetryAfter: tc.maxAfter})
			resp, err := c.SendWithContext(t.Context(), rest.Request{Method: rest.Get, BaseURL: srv.URL})
			if err != nil || resp.Body != "ok" {
				t.Fatalf("Send(%q) = %v, %v; want body %q", srv.URL, resp, err, "ok")
			}
			if n := rec.count(); n != 2 {
				t.Errorf("Send(%q) made %d attempts, want 2", srv.URL, n)
			}
			if got := clock.recorded(); !reflect.DeepEqual(got, []time.Duration{tc.want}) {
				t.Errorf("Send(%q) with Retry-After %q waited %v, want [%v]", srv.URL, tc.retryAfter, got, tc.want)
			}
		})
	}
}

func TestRetryNetworkErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		replies      []reply
		wantAttempts int
		wantBody     string
		wantErr      string // suffix of the error; empty for success
	}{
		{
			name:         "connection closed, then success",
			replies:      []reply{{cut: true}, {status: 200, body: "ok"}},
			wantAttempts: 2, wantBody: "ok",
		},
		{
			name:         "connection always closed",
			replies:      []reply{{cut: true}},
			wantAttempts: 3, wantErr: ": EOF (gave up after 3 attempts)",
		},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rec := startServer(t, replies(t, tc.replies...))
			c, _ := retryClient(rest.RetryPolicy{MaxAttempts: 3})
			req := rest.Request{Method: rest.Post, BaseURL: srv.URL, Body: []byte("data")}
			resp, err := c.SendWithContext(t.Context(), req)
			if tc.wantErr == "" {
				if err != nil || resp.Body != tc.wantBody {
					t.Errorf("Send(%q) = %v, %v; want body %q", srv.URL, resp, err, tc.wantBody)
				}
			} else if err == nil || !strings.HasSuffix(err.Error(), tc.wantErr) {
				t.Errorf("Send(%q) error = %v, want one ending in %q", srv.URL, err, tc.wantErr)
			}
			if n := rec.count(); n != tc.wantAttempts {
				t.Errorf("Send(%q) made %d attempts, want %d", srv.URL, n, tc.wantAttempts)
			}
		})
	}
}

func TestRetryBodyCutShort(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	srv, _ := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			hijack(t, w, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
			return
		}
		io.WriteString(w, "complete")
	})
	c, clock := retryClient(rest.RetryPolicy{})
	resp, err := c.SendWithContext(t.Context(), rest.Request{Method: rest.Get, BaseURL: srv.URL})
	if err != nil || resp.Body != "complete" {
		t.Errorf("Send(%q) = %v, %v; want body %q", srv.URL, resp, err, "complete")
	}
	if got := len(clock.recorded()); got != 1 {
		t.Errorf("Send(%q) waited %d times, want 1", srv.URL, got)
	}
}

func TestRetryNotForPermanentErrors(t *testing.T) {
	t.Parallel()
	t.Run("certificate error", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake is expected
		srv.StartTLS()
		t.Cleanup(srv.Close)
		c, clock := retryClient(rest.RetryPolicy{})
		_, err := c.SendWithContext(t.Context(), rest.Request{Method: rest.Get, BaseURL: srv.URL})
		if err == nil || strings.Contains(err.Error(), "gave up") {
			t.Errorf("Send(%q) with an untrusted certificate error = %v, want one error without retries", srv.URL, err)
		}
		if got := clock.recorded(); len(got) != 0 {
			t.Errorf("Send(%q) with an untrusted certificate waited %v, want no waits", srv.URL, got)
		}
	})
	t.Run("response too large", func(t *testing.T) {
		t.Parallel()
		srv, rec := startServer(t, replies(t, reply{status: 200, body: "way too long"}))
		c, _ := retryClient(rest.RetryPolicy{})
		c.MaxResponseBytes = 4
		_, err := c.SendWithContext(t.Context(), rest.Request{Method: rest.Get, BaseURL: srv.URL})
		if !errors.Is(err, rest.ErrResponseTooLarge) {
			t.Errorf("Send(%q) error = %v, want %v", srv.URL, err, rest.ErrResponseTooLarge)
		}
		if n := rec.count(); n != 1 {
			t.Errorf("Send(%q) made %d attempts, want 1", srv.URL, n)
		}
	})
}

func TestRetryMakeRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		body         func() io.Reader
		wantAttempts int
		wantStatus   int
	}{
		{"no body", func() io.Reader { return nil }, 2, 200},
		{"strings.Reader body is resent", func() io.Reader { return strings.NewReader("again") }, 2, 200},
		{"body without GetBody is not resent", func() io.Reader { return io.NopCloser(strings.NewReader("once")) }, 1, 503},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rec := startServer(t, replies(t, reply{status: 503, body: "busy"}, reply{status: 200, body: "ok"}))
			c, _ := retryClient(rest.RetryPolicy{})
			req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL, tc.body())
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.MakeRequest(req)
			if err != nil {
				t.Fatalf("MakeRequest(POST %q) error = %v", srv.URL, err)
			}
			defer res.Body.Close()
			if res.StatusCode != tc.wantStatus {
				t.Errorf("MakeRequest(POST %q) status = %d, want %d", srv.URL, res.StatusCode, tc.wantStatus)
			}
			reqs := rec.requests()
			if len(reqs) != tc.wantAttempts {
				t.Fatalf("MakeRequest(POST %q) made %d attempts, want %d", srv.URL, len(reqs), tc.wantAttempts)
			}
			for i := 1; i < len(reqs); i++ {
				if reqs[i].Body != reqs[0].Body {
					t.Errorf("attempt %d body = %q, want %q as in attempt 1", i+1, reqs[i].Body, reqs[0].Body)
				}
			}
		})
	}
}

func TestRetryWaitCanceled(t *testing.T) {
	t.Parallel()
	srv, rec := startServer(t, replies(t, reply{status: 503, header: map[string]string{"Retry-After": "3600"}}))
	policy := &rest.RetryPolicy{MaxRetryAfter: 2 * time.Hour}
	waiting := make(chan struct{})
	var once sync.Once
	rest.SetRetryClock(policy, nil, nil, func(ctx context.Context, d time.Duration) error {
		once.Do(func() { close(waiting) })
		return rest.SleepContext(ctx, d) // the real, context-aware wait
	})
	c := &rest.Client{Retry: policy}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		<-waiting
		cancel()
	}()
	type result struct {
		resp *rest.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := c.SendWithContext(ctx, rest.Request{Method: rest.Get, BaseURL: srv.URL})
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		if !errors.Is(r.err, context.Canceled) || r.resp != nil {
			t.Errorf("SendWithContext(%q) canceled while waiting = %v, %v; want nil, %v", srv.URL, r.resp, r.err, context.Canceled)
		}
		want := "rest: waiting 1h0m0s to retry GET " + srv.URL + ": context canceled"
		if r.err != nil && r.err.Error() != want {
			t.Errorf("SendWithContext(%q) error = %q, want %q", srv.URL, r.err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("SendWithContext(%q) still waiting 10s after its context was canceled", srv.URL)
	}
	if n := rec.count(); n != 1 {
		t.Errorf("SendWithContext(%q) made %d attempts, want 1", srv.URL, n)
	}
}

func TestRetryWaitBeyondDeadline(t *testing.T) {
	t.Parallel()
	srv, rec := startServer(t, replies(t, reply{status: 503, header: map[string]string{"Retry-After": "3600"}, body: "later"}))
	c, clock := retryClient(rest.RetryPolicy{MaxRetryAfter: 2 * time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := c.SendWithContext(ctx, rest.Request{Method: rest.Get, BaseURL: srv.URL})
	if err != nil || resp.StatusCode != 503 || resp.Body != "later" {
		t.Errorf("Send(%q) with a wait beyond the deadline = %v, %v; want the 503 response", srv.URL, resp, err)
	}
	if got := clock.recorded(); len(got) != 0 {
		t.Errorf("Send(%q) waited %v, want no waits", srv.URL, got)
	}
	if n := rec.count(); n != 1 {
		t.Errorf("Send(%q) made %d attempts, want 1", srv.URL, n)
	}
}

// Retryable replaces the rule (here: only 503 with Retry-After), and
// OnRetry hears of each retry before its wait.
func TestRetryableAndOnRetry(t *testing.T) {
	t.Parallel()
	type call struct {
		retry  int
		wait   time.Duration
		status int
	}
	onlyAsked := func(resp *http.Response, err error) bool {
		return resp != nil && resp.StatusCode == 503 && resp.Header.Get("Retry-After") != ""
	}
	tests := []struct {
		name         string
		first        reply
		wantAttempts int
		wantCalls    []call
	}{
		{"a 500 is not retried", reply{status: 500}, 1, nil},
		{"a 503 without Retry-After is not retried", reply{status: 503}, 1, nil},
		{"a 503 with Retry-After is", reply{status: 503, header: map[string]string{"Retry-After": "2"}}, 2, []call{{1, 2 * time.Second, 503}}},
	}
	for _, tc := range tests {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rec := startServer(t, replies(t, tc.first, reply{status: 200}))
			var calls []call
			c, clock := retryClient(rest.RetryPolicy{Retryable: onlyAsked, OnRetry: func(n int, wait time.Duration, resp *http.Response, err error) {
				calls = append(calls, call{n, wait, resp.StatusCode})
			}})
			if _, err := c.SendWithContext(t.Context(), rest.Request{Method: rest.Post, BaseURL: srv.URL}); err != nil {
				t.Fatal(err)
			}
			if n := len(rec.requests()); n != tc.wantAttempts {
				t.Errorf("%d attempts, want %d", n, tc.wantAttempts)
			}
			if !reflect.DeepEqual(calls, tc.wantCalls) {
				t.Errorf("OnRetry calls %v, want %v", calls, tc.wantCalls)
			}
			if len(clock.recorded()) != len(tc.wantCalls) {
				t.Errorf("waits %v, want one per OnRetry call", clock.recorded())
			}
		})
	}
}
