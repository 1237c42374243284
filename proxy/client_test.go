package proxy_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/rest"
	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/provider"
)

// pushRelay is a relay channel on loopback in hookline's format: the test
// pushes deliveries; every subscriber gets them as SSE messages with ids.
type pushRelay struct {
	*httptest.Server
	frames chan string
	subs   atomic.Int32
}

func newPushRelay(t *testing.T) *pushRelay {
	t.Helper()
	r := &pushRelay{frames: make(chan string, 1024)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "event: ready\ndata: {}\n\n")
		http.NewResponseController(w).Flush()
		r.subs.Add(1)
		for {
			select {
			case f := <-r.frames:
				io.WriteString(w, f)
				http.NewResponseController(w).Flush()
			case <-req.Context().Done():
				return
			}
		}
	}))
	t.Cleanup(r.Server.Close)
	return r
}

// push sends one delivery: headers as lowercase keys, the exact body in
// bodyB, the query object, and the SSE id.
func (r *pushRelay) push(id int, headers map[string]string, query map[string]string, body []byte) {
	msg := map[string]any{}
	for k, v := range headers {
		msg[strings.ToLower(k)] = v
	}
	msg["bodyB"] = base64.StdEncoding.EncodeToString(body)
	msg["query"] = query
	msg["timestamp"] = 1763805600000
	var parsed any
	if json.Unmarshal(body, &parsed) == nil {
		msg["body"] = parsed
	}
	data, err := json.Marshal(msg)
	if err != nil {
		panic(err)
	}
	r.frames <- fmt.Sprintf("id: %d\ndata: %s\n\n", id, data)
}

// hmacSHA256 signs independently of the code under test.
func hmacSHA256(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// githubHeaders returns the headers GitHub sends with a delivery.
func githubHeaders(id, event, secret string, body []byte) map[string]string {
	h := map[string]string{
		"X-GitHub-Delivery": id,
		"X-GitHub-Event":    event,
		"Content-Type":      "application/json",
		"User-Agent":        "GitHub-Hookshot/abc123",
	}
	if secret != "" {
		h["X-Hub-Signature-256"] = hmacSHA256(secret, body)
	}
	return h
}

// results collects a Client's Results.
type results struct {
	mu  sync.Mutex
	all []proxy.Result
	ch  chan struct{}
}

func newResults() *results { return &results{ch: make(chan struct{}, 4096)} }

func (r *results) add(res proxy.Result) {
	r.mu.Lock()
	r.all = append(r.all, res)
	r.mu.Unlock()
	r.ch <- struct{}{}
}

func (r *results) wait(t *testing.T, n int) []proxy.Result {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("got %d results, want %d", i, n)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]proxy.Result(nil), r.all...)
}

// startClient runs a Client until the test ends. wait returns Run's error
// once it has returned (it may be called more than once).
func startClient(t *testing.T, opts proxy.Options) (c *proxy.Client, cancel context.CancelFunc, wait func() error) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := proxy.New(opts)
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	var runErr error
	go func() { runErr = c.Run(ctx); close(done) }()
	wait = func() error {
		select {
		case <-done:
			return runErr
		case <-time.After(20 * time.Second):
			t.Error("Client.Run did not return after cancel")
			return nil
		}
	}
	t.Cleanup(func() { cancel(); wait() })
	return c, cancel, wait
}

// startConnected is startClient that returns once the client is
// subscribed. A test that publishes to a relay right after starting a client
// must use it: a subscriber that resumes after no id gets only what is
// published once it has joined, and on a loaded machine the subscription
// can come after the first Publish.
func startConnected(t *testing.T, opts proxy.Options) *proxy.Client {
	t.Helper()
	cw := newConnWatch()
	onState := opts.OnState
	opts.OnState = func(s proxy.StateChange) {
		cw.on(s)
		if onState != nil {
			onState(s)
		}
	}
	c, _, _ := startClient(t, opts)
	cw.waitConnected(t)
	return c
}

// A delivery signed by GitHub's secret reaches a target running our
// middleware with the same secret and verifies: the body is byte-exact.
// With a different target secret, ResignSecret makes it verify too.
func TestClientForwardsByteExactAndVerifies(t *testing.T) {
	const githubSecret, targetSecret = "github-secret", "local-secret"
	// Bytes that re-serialisation would change: escapes, spacing, key order.
	body := []byte("{\"action\":\"opened\",  \"z\":1,\"a\":\"\\u00e9\\/\",\"n\":1.0e2 }")
	tests := []struct {
		name         string
		targetSecret string
		resign       string
	}{
		{"same secret", githubSecret, ""},
		{"resigned for the target", targetSecret, targetSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wh, err := webhooks.New(webhooks.Options{Secret: tt.targetSecret, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			var got atomic.Value
			wh.On("issues.opened", func(_ context.Context, e webhooks.Event) error {
				got.Store(string(e.Payload))
				return nil
			})
			target := httptest.NewServer(webhooks.NewMiddleware(wh, webhooks.MiddlewareOptions{}))
			t.Cleanup(target.Close)

			relay := newPushRelay(t)
			res := newResults()
			startClient(t, proxy.Options{
				URL: relay.URL + "/chan", Secret: githubSecret, Targets: []proxy.Target{{URL: target.URL + "/api/github/webhooks", ResignSecret: tt.resign}},
				OnResult: res.add,
			})
			relay.push(1, githubHeaders("d-1", "issues", githubSecret, body), nil, body)
			r := res.wait(t, 1)[0]
			if r.Verification != proxy.VerificationPassed {
				t.Errorf("Verification = %q (%s), want verified", r.Verification, r.VerifyNote)
			}
			if len(r.Targets) == 0 || r.Targets[0].Status != 200 {
				t.Fatalf("Target = %+v, want status 200", r.Targets)
			}
			if got.Load() != string(body) {
				t.Errorf("handler payload = %q, want %q", got.Load(), body)
			}
			if r.Action != "opened" {
				t.Errorf("Action = %q, want opened", r.Action)
			}
		})
	}
}

func TestClientNeverPassesOnABadSignature(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(target.Close)
	var ran atomic.Int32
	var delivery atomic.Value
	handlers := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: slog.New(slog.DiscardHandler)})
	handlers.OnAny(func(_ context.Context, e webhooks.Event) error {
		ran.Add(1)
		delivery.Store(e.Header.Get(webhooks.HeaderDelivery)) // the delivery's request headers
		return nil
	})

	relay := newPushRelay(t)
	res := newResults()
	failed := t.TempDir()
	c, _, _ := startClient(t, proxy.Options{URL: relay.URL + "/c", Secret: "right", Targets: []proxy.Target{{URL: target.URL}}, Handlers: handlers, OnResult: res.add, FailedDir: failed})
	body := []byte(`{"zen":"x"}`)
	relay.push(1, githubHeaders("bad", "ping", "wrong", body), nil, body)
	noSig := githubHeaders("nosig", "ping", "", body)
	relay.push(2, noSig, nil, body)
	relay.push(3, githubHeaders("good", "ping", "right", body), nil, body)
	all := res.wait(t, 3)
	want := []proxy.Verification{proxy.VerificationFailed, proxy.VerificationFailed, proxy.VerificationPassed}
	for i, r := range all {
		if r.Verification != want[i] {
			t.Errorf("delivery %s: Verification = %q, want %q", r.Delivery.ID, r.Verification, want[i])
		}
	}
	if !strings.Contains(all[1].VerifyNote, "no X-Hub-Signature-256") {
		t.Errorf("note for a missing signature = %q", all[1].VerifyNote)
	}
	if len(all[0].Targets) > 0 || hits.Load() != 1 || ran.Load() != 1 || delivery.Load() != "good" {
		t.Errorf("target hits = %d, handler runs = %d (for delivery %v), want 1 and 1 (only the good delivery)", hits.Load(), ran.Load(), delivery.Load())
	}
	if s := c.Stats(); s.VerifyFailed != 2 || s.Verified != 1 || s.Forwarded != 1 {
		t.Errorf("Stats = %+v, want 2 failed, 1 verified, 1 forwarded", s)
	}
	// Kept for a replay with the right secret (before, dropped for good).
	for _, r := range all[:2] {
		cd, err := capture.Read(r.FailedFile)
		if err != nil || !bytes.Equal(cd.Body, body) || !strings.HasPrefix(cd.Note, "not passed on: ") {
			t.Errorf("delivery %s: failed file %q: %v, note %q; want the delivery, marked", r.Delivery.ID, r.FailedFile, err, cd.Note)
		}
	}
}

// Handlers are never reached by a forged delivery. A *webhooks.Webhooks
// given as Verifier verifies with its own secrets when Options has none
// (before, a delivery signed "sha256=forged" ran its handlers, reported as
// unverified); other handlers run on unverified deliveries only with
// AllowUnverified. Handlers with nothing to verify them and no
// AllowUnverified are refused by New: before, such a Client ran no handler
// for any delivery, correctly signed or not, and said nothing.
func TestClientHandlersOnlyRunVerified(t *testing.T) {
	body := []byte(`{"zen":"x"}`)
	quiet := slog.New(slog.DiscardHandler)
	tests := []struct {
		name            string
		webhooksSecret  string // "": an Emitter without a secret
		noVerifier      bool   // the Webhooks is given as Handlers only
		allowUnverified bool
		sig             string // the secret the delivery is signed with
		wantRun         bool
		wantV           proxy.Verification // "": New refuses the Options
	}{
		{"Webhooks, forged", "right", false, false, "forged", false, proxy.VerificationFailed},
		{"Webhooks, additional secret", "right", false, false, "old", true, proxy.VerificationPassed},
		{"Webhooks, good", "right", false, false, "right", true, proxy.VerificationPassed},
		{"Webhooks as Handlers alone", "right", true, false, "right", false, ""},
		{"Emitter, unverified", "", false, false, "forged", false, ""},
		{"Emitter, unverified allowed", "", false, true, "forged", true, proxy.VerificationSkipped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran atomic.Int32
			run := func(context.Context, webhooks.Event) error { ran.Add(1); return nil }
			opts := proxy.Options{AllowUnverified: tt.allowUnverified, Logger: quiet}
			if tt.webhooksSecret != "" {
				wh, err := webhooks.New(webhooks.Options{Secret: tt.webhooksSecret, AdditionalSecrets: []string{"old"}, Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				wh.OnAny(run)
				opts.Handlers = wh
				if !tt.noVerifier {
					opts.Verifier = wh // its secrets, given explicitly
				}
			} else {
				em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: quiet})
				em.OnAny(run)
				opts.Handlers = em
			}
			c, err := proxy.New(opts)
			if tt.wantV == "" {
				if !errors.Is(err, proxy.ErrInvalidOptions) || !strings.Contains(err.Error(), "AllowUnverified") {
					t.Errorf("New = %v, want ErrInvalidOptions saying what to set", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			msg := map[string]any{"body": json.RawMessage(body), "bodyB": base64.StdEncoding.EncodeToString(body)}
			for k, v := range githubHeaders("d1", "ping", tt.sig, body) {
				msg[strings.ToLower(k)] = v
			}
			data, _ := json.Marshal(msg)
			m, err := proxy.Decode(sse.Event{ID: "1", Data: data})
			if err != nil {
				t.Fatal(err)
			}
			r := c.Handle(t.Context(), m.Delivery)
			if got := ran.Load() == 1; got != tt.wantRun || r.Verification != tt.wantV {
				t.Errorf("handlers ran %v, Verification %q; want %v, %q (note %q)", got, r.Verification, tt.wantRun, tt.wantV, r.VerifyNote)
			}
		})
	}
}

func TestClientLegacySHA1Signature(t *testing.T) {
	relay := newPushRelay(t)
	res := newResults()
	startClient(t, proxy.Options{URL: relay.URL + "/c", Secret: "It's a Secret to Everybody", OnResult: res.add})
	body := []byte("Hello, World!")
	h := map[string]string{"X-GitHub-Event": "ping", "X-GitHub-Delivery": "sha1",
		// HMAC-SHA1 of "Hello, World!" under the secret, computed with openssl:
		// printf 'Hello, World!' | openssl dgst -sha1 -hmac "It's a Secret to Everybody"
		"X-Hub-Signature": "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59"}
	relay.push(1, h, nil, body)
	h["X-Hub-Signature"] = "sha1=0000000000000000000000000000000000000000"
	relay.push(2, h, nil, body)
	all := res.wait(t, 2)
	if all[0].Verification != proxy.VerificationPassed || !strings.Contains(all[0].VerifyNote, "legacy SHA-1") {
		t.Errorf("good sha1: %q %q, want verified with a legacy warning", all[0].Verification, all[0].VerifyNote)
	}
	if all[1].Verification != proxy.VerificationFailed {
		t.Errorf("bad sha1: %q, want failed", all[1].Verification)
	}
}

func TestClientHeaderMappingAndQuery(t *testing.T) {
	type seen struct {
		method, query, host string
		header              http.Header
		body                []byte
	}
	got := make(chan seen, 2)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.RawQuery, r.Host, r.Header.Clone(), b}
	}))
	t.Cleanup(target.Close)
	body := []byte("payload=%7B%22a%22%3A1%7D")
	h := map[string]string{
		"X-GitHub-Event": "push", "X-GitHub-Delivery": "q-1",
		"Content-Type":      "application/x-www-form-urlencoded",
		"Host":              "smee.example",
		"Content-Length":    "999",
		"Connection":        "keep-alive, X-Hop",
		"X-Hop":             "drop me",
		"Keep-Alive":        "timeout=5",
		"Transfer-Encoding": "chunked",
		"Upgrade":           "h2c",
		"X-Custom":          "kept",
	}
	for _, tt := range []struct {
		name      string
		noQuery   bool
		wantQuery string
	}{
		{"query forwarded", false, "base=1&a=b+c&x=%2F"},
		{"no query", true, "base=1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			relay := newPushRelay(t)
			res := newResults()
			startClient(t, proxy.Options{URL: relay.URL + "/c", Targets: []proxy.Target{{URL: target.URL + "/hook?base=1", NoQuery: tt.noQuery}}, OnResult: res.add})
			relay.push(1, h, map[string]string{"a": "b c", "x": "/"}, body)
			res.wait(t, 1)
			s := <-got
			if s.query != tt.wantQuery {
				t.Errorf("query = %q, want %q", s.query, tt.wantQuery)
			}
			if !bytes.Equal(s.body, body) || s.method != "POST" {
				t.Errorf("%s body %q, want POST %q", s.method, s.body, body)
			}
			if ct := s.header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
				t.Errorf("Content-Type = %q, want the original", ct)
			}
			if s.header.Get("X-Custom") != "kept" || s.header.Get("X-Github-Event") != "push" {
				t.Errorf("forwarded headers lost something: %v", s.header)
			}
			if ua, ok := s.header["User-Agent"]; ok {
				t.Errorf("User-Agent = %q, want none (the delivery had none)", ua)
			}
			if ae, ok := s.header["Accept-Encoding"]; ok {
				t.Errorf("Accept-Encoding = %q, want none (the delivery had none; net/http adds gzip unless told not to)", ae)
			}
			for _, hop := range []string{"X-Hop", "Keep-Alive", "Upgrade"} {
				if v := s.header.Get(hop); v != "" {
					t.Errorf("hop-by-hop header %s = %q was forwarded", hop, v)
				}
			}
			if s.host == "smee.example" || s.header.Get("Content-Length") == "999" {
				t.Errorf("Host %q / Content-Length %q came from the relay, want the target's", s.host, s.header.Get("Content-Length"))
			}
		})
	}
}

func TestClientRetriesTransientTargetFailures(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter string
	}{
		{"seconds", "0"},
		{"http date", time.Now().Add(-time.Second).UTC().Format(http.TimeFormat)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					w.Header().Set("Retry-After", tt.retryAfter)
					w.WriteHeader(http.StatusServiceUnavailable)
					io.WriteString(w, "down for a moment")
					return
				}
				io.WriteString(w, "ok")
			}))
			t.Cleanup(target.Close)
			relay := newPushRelay(t)
			res := newResults()
			startClient(t, proxy.Options{URL: relay.URL + "/c", Targets: []proxy.Target{{URL: target.URL}}, OnResult: res.add,
				HTTPClient: retrying(&rest.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond})})
			relay.push(1, githubHeaders("r", "ping", "", []byte(`{}`)), nil, []byte(`{}`))
			r := res.wait(t, 1)[0]
			if r.Targets[0].Status != 200 || calls.Load() != 2 {
				t.Errorf("status %d after %d calls, want 200 after 2", r.Targets[0].Status, calls.Load())
			}
			// Every attempt is reported, in order, with its own answer.
			if a := r.Targets[0].Attempts; len(a) != 2 || a[0].Status != 503 || a[1].Status != 200 || a[0].Err != nil ||
				a[1].FirstByte <= 0 || a[1].FirstByte > a[1].Duration ||
				string(a[0].Body) != "down for a moment" || a[0].Header.Get("Retry-After") != tt.retryAfter || string(a[1].Body) != "ok" {
				t.Errorf("attempts = %+v, want 503 then 200, each with its answer and its first byte within its duration", a)
			}
		})
	}
}

// An attempt that got no answer says why; the answer's head and body are
// kept, the body up to MaxAnswerBody.
func TestClientAttemptsAndAnswerBody(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Answer", "yes")
		w.WriteHeader(http.StatusAccepted)
		w.Write(bytes.Repeat([]byte("a"), proxy.MaxAnswerBody+100))
	}))
	t.Cleanup(target.Close)
	c, err := proxy.New(proxy.Options{Targets: []proxy.Target{{URL: target.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	r := c.Handle(t.Context(), &delivery.Delivery{ID: "a1", Body: []byte(`{}`), Headers: http.Header{}})
	a := r.Targets[0].Attempts
	if len(a) != 1 || a[0].Status != 202 || a[0].Duration < a[0].FirstByte || r.Targets[0].Header.Get("X-Answer") != "yes" || len(r.Targets[0].Body) != proxy.MaxAnswerBody {
		t.Fatalf("attempts %+v, answer %q, %d bytes of body; want one 202 with X-Answer and %d bytes", a, r.Targets[0].Header, len(r.Targets[0].Body), proxy.MaxAnswerBody)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	c, err = proxy.New(proxy.Options{Targets: []proxy.Target{{URL: down.URL}}, HTTPClient: retrying(&rest.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond})})
	if err != nil {
		t.Fatal(err)
	}
	r = c.Handle(t.Context(), &delivery.Delivery{ID: "a2", Body: []byte(`{}`), Headers: http.Header{}})
	if a := r.Targets[0].Attempts; len(a) != 2 || a[0].Status != 0 || a[0].Err == nil || !strings.Contains(a[1].Err.Error(), "refused") {
		t.Errorf("attempts to a closed port = %+v, want two, each with its error", a)
	}
}

// The HTTP client's Timeout bounds each attempt at the target without a
// goroutine and a timer per request (net/http's way for a transport not
// its own, such as the forwarder's attempt recorder): a deadline on the
// request's context. A target that does not answer within it gets one
// attempt and an error that is a timeout and says so.
func TestClientTargetTimeout(t *testing.T) {
	held := make(chan bool, 1)
	release := make(chan bool)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // then net/http notices the client leave
		held <- true
		select {
		case <-release:
		case <-r.Context().Done(): // the client gave up
		}
	}))
	t.Cleanup(target.Close)
	client := func(timeout time.Duration) *proxy.Client {
		c, err := proxy.New(proxy.Options{Targets: []proxy.Target{{URL: target.URL}}, HTTPClient: &rest.Client{HTTPClient: &http.Client{Timeout: timeout}}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	d := &delivery.Delivery{ID: "t1", Body: []byte(`{}`), Headers: http.Header{}}

	// A request in flight: no goroutine waits on its timeout.
	done := make(chan proxy.Result, 1)
	c := client(time.Hour)
	go func() { done <- c.Handle(t.Context(), d) }()
	<-held
	stacks := make([]byte, 1<<20)
	stacks = stacks[:runtime.Stack(stacks, true)]
	release <- true
	if r := <-done; !r.OK() {
		t.Fatalf("the held request's result: %+v, want the target's 200", r.Targets[0])
	}
	if bytes.Contains(stacks, []byte("net/http.setRequestCancel")) {
		t.Errorf("a goroutine waits on the request's timeout:\n%s", stacks)
	}

	// A target that does not answer.
	r := client(200*time.Millisecond).Handle(t.Context(), d)
	tr := r.Targets[0]
	var ne net.Error
	if tr.OK() || !errors.Is(tr.Err, context.DeadlineExceeded) || !errors.As(tr.Err, &ne) || !ne.Timeout() || !strings.Contains(tr.Err.Error(), "timed out after 200ms") || len(tr.Attempts) != 1 {
		t.Errorf("a target that does not answer: %v, %d attempts; want one, a timeout that says so", tr.Err, len(tr.Attempts))
	}
}

// Handle runs a delivery on purpose (the inspector's replay): a second
// Handle of one id reaches the target too, never skipped as a duplicate,
// and each is counted as a replay, apart from what the relay sent: the
// summary's counts add up. Before, a replay was counted a redelivery and
// a forward's summary read "3 received, 4 forwarded, 2 redelivered".
func TestClientHandleIsAReplay(t *testing.T) {
	var calls atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	t.Cleanup(target.Close)
	c, err := proxy.New(proxy.Options{Targets: []proxy.Target{{URL: target.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	d := &delivery.Delivery{ID: "same", Body: []byte(`{}`), Headers: http.Header{}}
	for i := range 2 {
		r := c.Handle(t.Context(), d)
		if r.Duplicate || r.Redelivery || !r.Replay || len(r.Targets) == 0 || !r.Targets[0].OK() {
			t.Errorf("Handle %d = %+v; want a replay the target took", i+1, r)
		}
	}
	s := c.Stats()
	if calls.Load() != 2 || s.Replayed != 2 || s.Redeliveries != 0 || s.Received != 0 || s.Forwarded != 2 {
		t.Errorf("after two Handles: %d requests, Stats %+v; want 2 requests, 2 replayed, 2 forwarded, none received or redelivered", calls.Load(), s)
	}
}

func TestClientTargetDownIsReportedAndCounted(t *testing.T) {
	target := httptest.NewServer(http.NotFoundHandler())
	url := target.URL
	target.Close() // nothing listens there now
	// Credentials in the target URL never reach an error message, whatever
	// form net/http prints the URL in ("***" for the password).
	url = strings.Replace(url, "http://", "http://u:TPASS@", 1) + "/hook?key=TKEY"
	relay := newPushRelay(t)
	res := newResults()
	c, _, _ := startClient(t, proxy.Options{URL: relay.URL + "/c", Targets: []proxy.Target{{URL: url}}, OnResult: res.add,
		HTTPClient: retrying(&rest.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond})})
	relay.push(1, githubHeaders("down", "ping", "", []byte(`{}`)), nil, []byte(`{}`))
	r := res.wait(t, 1)[0]
	if len(r.Targets) == 0 || r.Targets[0].Err == nil || r.OK() {
		t.Fatalf("Target = %+v, want a transport error", r.Targets)
	}
	if msg := r.Targets[0].Err.Error() + " " + r.Targets[0].URL; strings.Contains(msg, "TKEY") || strings.Contains(msg, "TPASS") || !strings.Contains(msg, "key=xxxxx") {
		t.Errorf("target error %q shows the target's credentials", msg)
	}
	if c.Stats().TargetFails != 1 {
		t.Errorf("TargetFails = %d, want 1", c.Stats().TargetFails)
	}
}

// With Concurrency 1 a slow target sees deliveries strictly in order and
// one at a time; with Concurrency 4 it sees several at once.
func TestClientOrderingAndConcurrency(t *testing.T) {
	for _, tt := range []struct {
		concurrency  int
		wantInFlight int32 // at most (1) or at least (4)
	}{{1, 1}, {4, 2}} {
		t.Run("concurrency "+strconv.Itoa(tt.concurrency), func(t *testing.T) {
			var inFlight, maxInFlight atomic.Int32
			var mu sync.Mutex
			var order []string
			// At concurrency 4 the first requests wait for a second one to
			// be in flight: overlap is shown by an event, not made likely
			// by a slow target.
			overlap := make(chan struct{})
			var overlapOnce sync.Once
			// A client that never overlaps fails after one HangGuard, not one per request.
			guard := time.AfterFunc(relaytest.HangGuard, func() { overlapOnce.Do(func() { close(overlap) }) })
			t.Cleanup(func() { guard.Stop() })
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := inFlight.Add(1)
				for {
					m := maxInFlight.Load()
					if n <= m || maxInFlight.CompareAndSwap(m, n) {
						break
					}
				}
				if n >= tt.wantInFlight {
					overlapOnce.Do(func() { close(overlap) })
				}
				if tt.concurrency > 1 {
					<-overlap
				}
				// With Concurrency 1, one at a time is shown in simulated
				// time by TestInOrderWhetherApartOrInABurst, whose target
				// holds each request until the client can do nothing more.
				mu.Lock()
				order = append(order, r.Header.Get("X-Github-Delivery"))
				mu.Unlock()
				inFlight.Add(-1)
			}))
			t.Cleanup(target.Close)
			relay := newPushRelay(t)
			res := newResults()
			startClient(t, proxy.Options{URL: relay.URL + "/c", Targets: []proxy.Target{{URL: target.URL}}, Concurrency: tt.concurrency, OnResult: res.add})
			var want []string
			for i := 1; i <= 8; i++ {
				id := fmt.Sprintf("d%d", i)
				want = append(want, id)
				relay.push(i, githubHeaders(id, "ping", "", []byte(`{}`)), nil, []byte(`{}`))
			}
			res.wait(t, 8)
			mu.Lock()
			defer mu.Unlock()
			if tt.concurrency == 1 {
				if !reflect.DeepEqual(order, want) {
					t.Errorf("target order = %v, want %v", order, want)
				}
				if maxInFlight.Load() != 1 {
					t.Errorf("max in flight = %d, want 1", maxInFlight.Load())
				}
			} else if maxInFlight.Load() < tt.wantInFlight {
				t.Errorf("max in flight = %d, want at least %d", maxInFlight.Load(), tt.wantInFlight)
			}
		})
	}
}

func TestClientFilters(t *testing.T) {
	relay := newPushRelay(t)
	res := newResults()
	c, _, _ := startClient(t, proxy.Options{URL: relay.URL + "/c", Events: []string{"issues", "pull_request.closed"}, Ignore: []string{"issues.deleted"}, OnResult: res.add})
	cases := []struct {
		event, action string
		keep          bool
	}{
		{"issues", "opened", true},
		{"issues", "deleted", false},
		{"pull_request", "opened", false},
		{"pull_request", "closed", true},
		{"push", "", false},
	}
	for i, cs := range cases {
		body := []byte(`{}`)
		if cs.action != "" {
			body = []byte(`{"action":"` + cs.action + `"}`)
		}
		relay.push(i+1, githubHeaders(strconv.Itoa(i), cs.event, "", body), nil, body)
	}
	all := res.wait(t, len(cases))
	for i, cs := range cases {
		if all[i].Filtered == cs.keep {
			t.Errorf("%s.%s: Filtered = %v, want %v", cs.event, cs.action, all[i].Filtered, !cs.keep)
		}
	}
	if c.Stats().Filtered != 3 {
		t.Errorf("Stats.Filtered = %d, want 3", c.Stats().Filtered)
	}
	if _, err := proxy.New(proxy.Options{URL: relay.URL + "/c", Events: []string{"*"}}); err != nil {
		t.Errorf("New with Events [*] = %v, want every event kept", err)
	}
	for _, typo := range []struct{ pattern, want string }{{"isues", "issues"}, {"issues.opend", "issues.opened"}, {"pull_requests.*", "pull_request.*"}} {
		if _, err := proxy.New(proxy.Options{URL: relay.URL + "/c", Ignore: []string{typo.pattern}}); !errors.Is(err, proxy.ErrInvalidOptions) || !strings.Contains(err.Error(), "did you mean "+typo.want+"?") {
			t.Errorf("New with Ignore [%s] = %v, want ErrInvalidOptions naming %s", typo.pattern, err, typo.want)
		}
	}
	if _, err := proxy.New(proxy.Options{URL: relay.URL + "/c", Events: []string{"payment_intent.succeeded"}, Provider: provider.Stripe}); err != nil {
		t.Errorf("New with a Stripe event and Provider stripe = %v, want it kept (another sender's names)", err)
	}
}

// Events and a route read the same patterns the same way: one delivery
// stream, the patterns given once as Events (a filter) and once as a
// route's (the rest to a default target); each delivery the filter keeps
// is the route's, each it drops the default target's. Before, "issues.*"
// as Events kept nothing while the route took every issues delivery.
func TestEventsAndRoutesAgree(t *testing.T) {
	patterns := []string{"issues.*", "pull_request.closed", "push"}
	deliveries := []struct {
		event, action string
		want          bool
	}{
		{"issues", "opened", true}, {"issues", "", true}, {"pull_request", "closed", true},
		{"pull_request", "opened", false}, {"push", "", true}, {"ping", "", false}, {"star", "created", false},
	}
	got := make(chan string, 2*len(deliveries))
	target := func(name string) proxy.Target {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- name + " " + r.Header.Get("X-GitHub-Delivery")
		}))
		t.Cleanup(ts.Close)
		return proxy.Target{Name: name, URL: ts.URL}
	}
	route := target("route")
	route.Events = patterns
	run := func(opts proxy.Options) []proxy.Result {
		relay := newPushRelay(t)
		res := newResults()
		opts.URL, opts.OnResult = relay.URL+"/c", res.add
		startClient(t, opts)
		for i, d := range deliveries {
			body := []byte(`{}`)
			if d.action != "" {
				body = []byte(`{"action":"` + d.action + `"}`)
			}
			relay.push(i+1, githubHeaders(strconv.Itoa(i), d.event, "", body), nil, body)
		}
		return res.wait(t, len(deliveries))
	}
	filtered := run(proxy.Options{Events: patterns})
	routed := run(proxy.Options{Targets: []proxy.Target{route, target("default")}})
	sent := map[string]bool{}
	for range deliveries {
		sent[<-got] = true
	}
	for i, d := range deliveries {
		id := strconv.Itoa(i)
		kept, toRoute, toDefault := !filtered[i].Filtered, sent["route "+id], sent["default "+id]
		if kept != d.want || toRoute != d.want || toDefault == d.want || routed[i].Filtered {
			t.Errorf("%s.%s: kept by Events %v, sent to the route %v, to the default target %v; want %v, %v, %v", d.event, d.action, kept, toRoute, toDefault, d.want, d.want, !d.want)
		}
	}
}

func TestClientSavesEveryDeliveryAndReportsSaveFailures(t *testing.T) {
	dir := t.TempDir()
	relay := newPushRelay(t)
	res := newResults()
	startClient(t, proxy.Options{URL: relay.URL + "/c", SaveDir: dir, Secret: "s", OnResult: res.add})
	body := []byte{0xff, 0x00, 'x'}
	h := githubHeaders("../../evil", "ping", "s", body)
	h["Authorization"] = "Bearer ghp_never_on_disk"
	h["Cookie"] = "session=never_on_disk"
	relay.push(1, h, nil, body)
	r := res.wait(t, 1)[0]
	if r.SaveErr != nil || filepath.Dir(r.Saved) != dir {
		t.Fatalf("Saved = %q, SaveErr = %v; want a file in %s", r.Saved, r.SaveErr, dir)
	}
	d, err := capture.Read(r.Saved)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.Body, body) || d.ID != "../../evil" || d.Headers.Get("X-Hub-Signature-256") != hmacSHA256("s", body) {
		t.Errorf("capture = %+v, want the exact delivery", d)
	}
	if raw, _ := os.ReadFile(r.Saved); bytes.Contains(raw, []byte("never_on_disk")) {
		t.Errorf("the capture file holds a credential header:\n%s", raw)
	}

	// A save directory that disappears: the failure is reported, the
	// delivery still handled.
	gone := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	relay2 := newPushRelay(t)
	res2 := newResults()
	c2, _, _ := startClient(t, proxy.Options{URL: relay2.URL + "/c", SaveDir: gone, OnResult: res2.add})
	os.Remove(gone)
	relay2.push(1, githubHeaders("x", "ping", "", []byte(`{}`)), nil, []byte(`{}`))
	r2 := res2.wait(t, 1)[0]
	if r2.SaveErr == nil || c2.Stats().SaveFails != 1 {
		t.Errorf("SaveErr = %v, SaveFails = %d; want an error and 1", r2.SaveErr, c2.Stats().SaveFails)
	}
}

// On cancel the client stops reading, lets the delivery in flight finish
// at a slow target, and Run returns nil.
func TestClientDrainsOnCancel(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release // still answering when the client is cancelled
		io.WriteString(w, "done")
	}))
	t.Cleanup(target.Close)
	relay := newPushRelay(t)
	res := newResults()
	_, cancel, wait := startClient(t, proxy.Options{URL: relay.URL + "/c", Targets: []proxy.Target{{URL: target.URL}}, OnResult: res.add})
	relay.push(1, githubHeaders("slow", "ping", "", []byte(`{}`)), nil, []byte(`{}`))
	<-started
	cancel()
	close(release)
	r := res.wait(t, 1)[0]
	if len(r.Targets) == 0 || r.Targets[0].Status != 200 {
		t.Errorf("in-flight delivery after cancel: %+v, want 200", r.Targets)
	}
	if err := wait(); err != nil {
		t.Errorf("Run = %v, want nil after cancel", err)
	}
}

func TestClientStopsOnAMissingChannel(t *testing.T) {
	relay := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(relay.Close)
	c, err := proxy.New(proxy.Options{URL: relay.URL + "/nope", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(t.Context())
	if !errors.Is(err, proxy.ErrPermanent) {
		t.Errorf("Run = %v, want ErrPermanent", err)
	}
}

// New checks Target and says what to fix.
func TestNewTarget(t *testing.T) {
	tests := []struct {
		in, wantErr string
	}{
		{"http://127.0.0.1:3000/hook", ""},
		{"localhost:3000/hook", `"localhost:3000/hook" has no scheme; did you mean http://localhost:3000/hook?`},
		{"127.0.0.1:3000", `"127.0.0.1:3000" has no scheme; did you mean http://127.0.0.1:3000?`},
		{"smee.io/abc", `"smee.io/abc" has no scheme; did you mean https://smee.io/abc?`},
		{"myapp:3000/hook", `"myapp:3000/hook" has no scheme; did you mean http://myapp:3000/hook?`},
		{"ftp://x/y", "must start with http:// or https://"},
		{"http:///path", "has no host"},
	}
	for _, tt := range tests {
		_, err := proxy.New(proxy.Options{Targets: []proxy.Target{{URL: tt.in}}})
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("New(Targets: []proxy.Target{{URL: %q}}) = %v, want nil", tt.in, err)
			}
			continue
		}
		if !errors.Is(err, proxy.ErrInvalidOptions) || !strings.Contains(err.Error(), "invalid target URL: ") || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("New(Targets: []proxy.Target{{URL: %q}}) = %v, want ErrInvalidOptions saying %q", tt.in, err, tt.wantErr)
		}
	}
}

// Without OnResult, an embedding program still sees failures: a forged
// signature and a target that refuses are logged at WARN.
func TestClientLogsFailuresWithoutOnResult(t *testing.T) {
	var logs bytes.Buffer
	refuse := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	c, err := proxy.New(proxy.Options{Secret: "right", Targets: []proxy.Target{{URL: refuse}}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"zen":"x"}`)
	for _, secret := range []string{"forged", "right"} {
		h := http.Header{}
		for k, v := range githubHeaders("d-"+secret, "ping", secret, body) {
			h.Set(k, v)
		}
		c.Handle(t.Context(), &delivery.Delivery{ID: "d-" + secret, Event: "ping", Headers: h, Body: body})
	}
	out := logs.String()
	for _, want := range []string{`level=WARN msg="delivery not passed on: signature does not match`, "delivery=d-forged", `level=WARN msg="the target did not take a delivery: 404 Not Found"`, "delivery=d-right"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// Every sender's scheme is verified in one run: GitHub's with Secret,
// Stripe's with its own secret (SchemeSecrets), their events named; a
// scheme named by Provider is the one checked.
func TestClientVerifiesEverySendersScheme(t *testing.T) {
	stripeBody := []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`)
	stripeHeaders, _ := provider.Sign(provider.Stripe, "whsec_stripe", stripeBody, provider.Signing{})
	giteaBody := []byte(`{"action":"opened"}`)
	giteaHeaders, _ := provider.Sign(provider.Gitea, "any-secret", giteaBody, provider.Signing{})
	giteaHeaders.Set("X-Gitea-Event", "issues")
	c, err := proxy.New(proxy.Options{Secret: "any-secret", SchemeSecrets: map[provider.Scheme][]string{provider.Stripe: {"whsec_stripe"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		d      *delivery.Delivery
		want   proxy.Verification
		scheme provider.Scheme
		event  string
	}{
		{"stripe", &delivery.Delivery{ID: "s1", Headers: stripeHeaders, Body: stripeBody, BodySource: delivery.BodyBase64}, proxy.VerificationPassed, provider.Stripe, "payment_intent.succeeded"},
		{"gitea", &delivery.Delivery{ID: "g1", Headers: giteaHeaders, Body: giteaBody, BodySource: delivery.BodyBase64}, proxy.VerificationPassed, provider.Gitea, "issues"},
		{"stripe, another body", &delivery.Delivery{ID: "s2", Headers: stripeHeaders, Body: append(stripeBody, ' '), BodySource: delivery.BodyBase64}, proxy.VerificationFailed, provider.Stripe, "payment_intent.succeeded"},
	} {
		r := c.Handle(t.Context(), tt.d)
		if r.Verification != tt.want || r.Scheme != tt.scheme || tt.d.Event != tt.event {
			t.Errorf("%s: %s %q (%s), event %q; want %s %s %s", tt.name, r.Verification, r.VerifyNote, r.Scheme, tt.d.Event, tt.want, tt.scheme, tt.event)
		}
	}
	// Named: a delivery with Stripe's headers checked as GitHub's has none.
	c, _ = proxy.New(proxy.Options{Secret: "whsec_stripe", Provider: provider.GitHub})
	r := c.Handle(t.Context(), &delivery.Delivery{ID: "s3", Headers: stripeHeaders, Body: stripeBody, BodySource: delivery.BodyBase64})
	if r.Verification != proxy.VerificationFailed || !strings.Contains(r.VerifyNote, "X-Hub-Signature-256 is absent") {
		t.Errorf("stripe's delivery under --provider github: %s %q", r.Verification, r.VerifyNote)
	}
}
