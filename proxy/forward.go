package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/eventmatch"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/rest"
	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/provider"
)

// forwardOptions adjust forwardRequest.
type forwardOptions struct {
	// NoQuery drops the delivery's query string.
	NoQuery bool
	// ResignSecret, if not empty, signs the body again under this secret,
	// in the delivery's scheme (X-Hub-Signature-256 for GitHub's, whose
	// legacy SHA-1 X-Hub-Signature is removed).
	ResignSecret string
	// Scheme is the one re-signing uses; empty: each delivery's own.
	Scheme provider.Scheme
	// Header is set on the request, replacing the delivery's headers of the
	// same names: for a target behind authentication, say.
	Header http.Header
}

// ForwardRequest returns the request the client would send to target t
// for d (see forwardRequest): its URL, and its Header, NoQuery and
// ResignSecret. It is for showing what a replay sends.
func (c *Client) ForwardRequest(ctx context.Context, d *delivery.Delivery, t Target) (*http.Request, error) {
	u, err := parseTarget(t.URL)
	if err != nil {
		return nil, err
	}
	return forwardRequest(ctx, u, d, forwardOptions{NoQuery: t.NoQuery, ResignSecret: t.ResignSecret, Scheme: c.opts.Provider, Header: t.Header})
}

// forwardRequest returns the request that replays d to target: d's method
// (POST if none), its exact body, and its headers except hop-by-hop ones,
// Host and Content-Length; the delivery's query is added to target's own
// unless opts.NoQuery. The request can be resent (GetBody is set).
func forwardRequest(ctx context.Context, target *url.URL, d *delivery.Delivery, opts forwardOptions) (*http.Request, error) {
	u := *target
	if !opts.NoQuery && d.Query != "" {
		q := d.Query
		if u.RawQuery != "" {
			u.RawQuery += "&" + q
		} else {
			u.RawQuery = q
		}
	}
	method := d.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(d.Body))
	if err != nil {
		return nil, fmt.Errorf("building the request to the target: %w", err)
	}
	req.Header = httpx.Forwardable(d.Headers)
	for k, vs := range opts.Header {
		req.Header[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		// Send none rather than Go's default, as the sender did.
		req.Header.Set("User-Agent", "")
	}
	if opts.ResignSecret != "" {
		// Under the delivery's own scheme (Options.Provider, or the one its
		// headers carry; GitHub's when none).
		scheme := opts.Scheme
		if scheme == "" {
			scheme = provider.Detect(d.Headers)
		}
		if scheme == "" {
			scheme = provider.GitHub
		}
		h, err := provider.Sign(scheme, opts.ResignSecret, d.Body, provider.Signing{ID: d.Headers.Get("Webhook-Id")})
		if err != nil {
			return nil, fmt.Errorf("re-signing: %w", err)
		}
		for k, vs := range h {
			req.Header[k] = vs
		}
		if scheme == provider.GitHub {
			req.Header.Del(webhooks.HeaderSignature) // a legacy SHA-1 signature made with another secret
		}
	}
	return req, nil
}

// filter keeps or drops deliveries by event and event.action name
// (Options.Events and Ignore).
type filter struct {
	events, ignore eventmatch.Set
}

func (c *Client) newFilter(events, ignore []string) (f filter, err error) {
	if f.events, err = c.events("Events", events); err == nil {
		f.ignore, err = c.events("Ignore", ignore)
	}
	return f, err
}

// events compiles patterns of an option (what), the one grammar of
// package eventmatch: their names are checked against GitHub's unless
// Options.Provider names another sender. A name hookline does not know is
// a warning.
func (c *Client) events(what string, patterns []string) (eventmatch.Set, error) {
	set, unknown, err := eventmatch.Compile(patterns, c.opts.Provider == "" || c.opts.Provider == provider.GitHub)
	if err != nil {
		return set, fmt.Errorf("%w: %s: %v", ErrInvalidOptions, what, err)
	}
	for _, n := range unknown {
		c.logger.Warn("an event pattern names an event GitHub is not known to send; keeping it", "option", what, "pattern", n)
	}
	return set, nil
}

// drop reports whether delivery k is filtered out, and by which rule: the
// Ignore pattern it matches, or "" when Events has patterns and it matches
// none (see Result.FilteredBy).
func (f filter) drop(k eventmatch.Key) (dropped bool, by string) {
	if by = f.ignore.Matching(k); by != "" {
		return true, by
	}
	return !f.events.Empty() && !f.events.Match(k), ""
}

// forwarder sends deliveries to one target with forwardRequest. The zero
// value is not usable: URL is required. A forwarder is safe for
// concurrent use once its fields are no longer modified.
type forwarder struct {
	// URL is where deliveries are sent. Required.
	URL *url.URL
	// HTTPClient sends the requests. Required.
	HTTPClient *rest.Client
	// Options adjust each request (query, re-signing).
	Options forwardOptions

	shown string // URL redacted (newForwarder)
}

// newForwarder returns a forwarder to target. Its requests go through a
// copy of hc whose transport records every attempt (attemptRecorder).
func newForwarder(target *url.URL, hc *rest.Client, o forwardOptions) *forwarder {
	rc := *hc
	httpc := &http.Client{Timeout: rest.DefaultTimeout}
	if hc.HTTPClient != nil {
		c := *hc.HTTPClient
		httpc = &c
	}
	base := httpc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	// The client's Timeout becomes the recorder's (see attemptRecorder).
	httpc.Transport = attemptRecorder{base: base, timeout: httpc.Timeout}
	httpc.Timeout = 0
	rc.HTTPClient = httpc
	return &forwarder{URL: target, HTTPClient: &rc, Options: o, shown: httpx.RedactURL(target.String())}
}

// attemptsKey is the context key of a request's attempt log.
type attemptsKey struct{}

// attemptLog collects the Attempts of one Forward, with their starts.
type attemptLog struct {
	mu     sync.Mutex
	list   []Attempt
	starts []time.Time
}

// done returns the attempts, the last one ending now when ended is set
// (its body read).
func (l *attemptLog) done(ended bool) []Attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.list); n > 0 && ended {
		l.list[n-1].Duration = time.Since(l.starts[n-1])
	}
	list := l.list
	l.list = nil // a late read of a body no longer writes here
	return list
}

// attemptRecorder is the forwarder's transport: it adds every request it
// sends (each retry rest makes is one) to the attempt log in its context,
// and bounds each by timeout (the forwarder's HTTP client's Timeout, which
// newForwarder moves here) with a deadline on the request's context. With
// Client.Timeout, net/http starts a goroutine and a timer for every request
// when the transport is not its own (16 µs a delivery at 20/s on a small
// VM, docs/PERFORMANCE.md); its own transport watches a context's deadline
// without one. Unlike Client.Timeout, the deadline is each attempt's: a
// redirect's request has its own.
type attemptRecorder struct {
	base    http.RoundTripper
	timeout time.Duration // 0: none
}

func (t attemptRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	dl := attemptDeadline{parent: req.Context(), ctx: req.Context(), cancel: func() {}, after: t.timeout}
	if t.timeout > 0 {
		dl.ctx, dl.cancel = context.WithTimeout(dl.parent, t.timeout)
	}
	ctx := dl.ctx
	log, _ := dl.parent.Value(attemptsKey{}).(*attemptLog)
	start := time.Now()
	var first atomic.Int64
	if log != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotFirstResponseByte: func() { first.Store(int64(time.Since(start))) },
		})
	}
	if ctx != dl.parent {
		req = req.WithContext(ctx)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		dl.cancel()
		err = dl.err(err)
	}
	i := -1 // the attempt's index in log.list
	if log != nil {
		a := Attempt{FirstByte: time.Duration(first.Load()), Duration: time.Since(start)}
		log.mu.Lock()
		if err != nil {
			a.Err = redactErr(err)
		} else {
			a.Status, a.Header = resp.StatusCode, resp.Header
			i = len(log.list)
		}
		log.list, log.starts = append(log.list, a), append(log.starts, start)
		log.mu.Unlock()
	}
	if err == nil {
		// What is read of the body (a retried attempt's, by rest's drain)
		// is kept with the attempt.
		resp.Body = &answerBody{ReadCloser: resp.Body, dl: dl, log: log, i: i}
	}
	return resp, err
}

// attemptDeadline is one attempt's time limit: ctx, made from the
// request's own context parent, ends after after (never when after is 0);
// cancel ends it sooner.
type attemptDeadline struct {
	parent, ctx context.Context
	cancel      context.CancelFunc
	after       time.Duration
}

// err returns err, the attempt's, as an attemptTimeout when the attempt's
// own deadline cut it off (not the caller's context).
func (d attemptDeadline) err(err error) error {
	if err == nil || d.ctx.Err() != context.DeadlineExceeded || d.parent.Err() != nil {
		return err
	}
	return &attemptTimeout{after: d.after, err: err}
}

// attemptTimeout is the error of an attempt the target did not answer, or
// finish answering, within the forwarder's timeout. It is a timeout
// (net.Error) and wraps the transport's error (context.DeadlineExceeded).
type attemptTimeout struct {
	after time.Duration
	err   error
}

func (e *attemptTimeout) Error() string {
	return "timed out after " + e.after.String()
}
func (e *attemptTimeout) Unwrap() error { return e.err }
func (e *attemptTimeout) Timeout() bool { return true }

// answerBody is an attempt's answer as read: its first MaxAnswerBody bytes
// are kept in the attempt (log.list[i]; none when log is nil or i is -1),
// and Close ends the attempt's deadline.
type answerBody struct {
	io.ReadCloser
	dl  attemptDeadline
	log *attemptLog
	i   int
}

func (b *answerBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && b.log != nil && b.i >= 0 {
		b.log.mu.Lock()
		if b.i < len(b.log.list) { // not after Forward took the list
			a := &b.log.list[b.i]
			if room := MaxAnswerBody - len(a.Body); room > 0 {
				a.Body = append(a.Body, p[:min(n, room)]...)
			}
		}
		b.log.mu.Unlock()
	}
	if err != nil && err != io.EOF {
		err = b.dl.err(err)
	}
	return n, err
}

func (b *answerBody) Close() error {
	err := b.ReadCloser.Close()
	b.dl.cancel()
	return err
}

// shownURL returns u redacted for results: URL's, redacted once, when
// the delivery added no query to it.
func (f *forwarder) shownURL(u *url.URL) string {
	if u.RawQuery == f.URL.RawQuery && u.Path == f.URL.Path {
		return f.shown
	}
	return httpx.RedactURL(u.String())
}

// Forward sends d to f.URL and returns the outcome: the final status,
// the first MaxAnswerBody bytes of the response body, every attempt, and
// the time from the first attempt to the answer, or the error (after the
// client's retries). It never returns nil.
func (f *forwarder) Forward(ctx context.Context, d *delivery.Delivery) *TargetResult {
	client := f.HTTPClient
	res := &TargetResult{URL: f.shownURL(f.URL)}
	log := &attemptLog{}
	req, err := forwardRequest(context.WithValue(ctx, attemptsKey{}, log), f.URL, d, f.Options)
	if err != nil {
		res.Err = err
		return res
	}
	res.URL = f.shownURL(req.URL)
	start := time.Now()
	resp, err := client.MakeRequest(req)
	if err != nil {
		res.Duration = time.Since(start)
		res.Err = redactErr(err)
		res.Attempts = log.done(false)
		return res
	}
	defer resp.Body.Close()
	res.Status, res.Header = resp.StatusCode, resp.Header
	// The body is read through the attempt's answerBody, which keeps its
	// first MaxAnswerBody bytes; a little more is drained so that the
	// connection can be reused.
	io.Copy(io.Discard, io.LimitReader(resp.Body, MaxAnswerBody+256<<10))
	res.Duration = time.Since(start)
	res.Attempts = log.done(true)
	if n := len(res.Attempts); n > 0 {
		res.Body = res.Attempts[n-1].Body // one copy of the answer
	}
	return res
}

// redactedError is an error whose message had a URL replaced by its
// redacted form; errors.Is and errors.As still see the original.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr returns err with every URL in its message redacted (see
// httpx.RedactText): net/http names the target with its query, which may hold a
// token, and with "***" for a password.
func redactErr(err error) error {
	msg := err.Error()
	if shown := httpx.RedactText(msg); shown != msg {
		return &redactedError{msg: shown, err: err}
	}
	return err
}
