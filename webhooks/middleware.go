package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Middleware defaults.
const (
	// DefaultPath is the path the middleware serves when
	// MiddlewareOptions.Path is empty.
	DefaultPath = "/api/github/webhooks"
	// DefaultTimeout is how long the middleware waits for handlers before
	// answering 202 when MiddlewareOptions.Timeout is zero.
	DefaultTimeout = 9 * time.Second
	// DefaultMaxBodyBytes is the largest body the middleware accepts when
	// MiddlewareOptions.MaxBodyBytes is zero: 25 MiB, GitHub's cap on
	// webhook payloads.
	DefaultMaxBodyBytes int64 = 25 << 20
)

// MiddlewareOptions configures NewMiddleware.
type MiddlewareOptions struct {
	// Path is the request path served. Trailing slashes are ignored on
	// both sides, and a missing leading slash is added. It is compared with
	// the request's escaped path. If empty, Handle and Wrap serve
	// DefaultPath, and ServeHTTP serves whatever path it is mounted on (the
	// router that mounted it owns routing, as with any http.Handler).
	Path string
	// Logger receives a debug line per delivery and a line per failure. If
	// nil, the Webhooks' logger is used.
	Logger *slog.Logger
	// Timeout is how long to wait for the handlers (after the body has been
	// read) before answering 202 "still processing"; the handlers then go
	// on running. If zero, DefaultTimeout; if negative, no limit.
	Timeout time.Duration
	// MaxBodyBytes is the largest request body accepted; a larger one is
	// answered 413. If zero, DefaultMaxBodyBytes; if negative, no limit.
	MaxBodyBytes int64
}

// Middleware is the net/http form of octokit's createNodeMiddleware: it
// receives GitHub webhook deliveries on one path, verifies them and
// dispatches them to a Webhooks. It is safe for concurrent use.
//
// Responses, as in @octokit/webhooks 14:
//
//	path differs                         not handled (Handle: false; Wrap: next; ServeHTTP with Path set: 404)
//	method not POST                      404 {"error":"Unknown route: <METHOD> <path>"}
//	Content-Type not application/json    415 {"error":"Unsupported \"Content-Type\" header value. Must be \"application/json\""}
//	X-GitHub-Event, X-Hub-Signature-256
//	or X-GitHub-Delivery absent          400 {"error":"Required headers missing: <names>"}
//	body larger than MaxBodyBytes        413 {"error":"webhooks: payload too large: ..."}
//	body cannot be read                  400 {"error":"webhooks: reading request body: ..."}
//	bad or missing signature             400 {"error":"signature does not match event payload and secret"}
//	signed, but not a JSON object        400 {"error":"webhooks: payload is not a JSON object: ..."}
//	a handler failed                     its StatusCode() (4xx/5xx) or 500, {"error":"<message of the first error>"}
//	handlers still running at Timeout    202 still processing\n
//	success                              200 ok\n
//
// Error bodies are application/json, the others text/plain; every response
// has an exact Content-Length.
type Middleware struct {
	w       *Webhooks
	path    string
	anyPath bool // ServeHTTP ignores the path (Path was empty)
	logger  *slog.Logger
	timeout time.Duration
	maxBody int64
}

// NewMiddleware returns a Middleware dispatching to w, configured by opts.
// It panics if w is nil. Handlers still running when it answers 202 go on
// after the response: when the server shuts down, drain them with
// [Emitter.Shutdown] (from [net/http.Server.RegisterOnShutdown]; see its
// example).
func NewMiddleware(w *Webhooks, opts MiddlewareOptions) *Middleware {
	if w == nil {
		panic("webhooks: NewMiddleware: nil *Webhooks")
	}
	m := &Middleware{w: w, logger: opts.Logger, timeout: opts.Timeout, maxBody: opts.MaxBodyBytes}
	path := opts.Path
	if path == "" {
		path, m.anyPath = DefaultPath, true
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	m.path = trimTrailingSlashes(path)
	if m.timeout == 0 {
		m.timeout = DefaultTimeout
	}
	if m.maxBody == 0 {
		m.maxBody = DefaultMaxBodyBytes
	}
	return m
}

func (m *Middleware) log() *slog.Logger {
	if m.logger != nil {
		return m.logger
	}
	return m.w.log()
}

// ServeHTTP handles the request. With MiddlewareOptions.Path set, a
// request for another path is answered 404 {"error":"Unknown route:
// <METHOD> <path>"}; without it, the path is the router's business and any
// path is served.
func (m *Middleware) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if m.anyPath {
		m.serve(rw, r, requestPath(r))
		return
	}
	if !m.Handle(rw, r) {
		unknownRoute(rw, r)
	}
}

// Wrap returns a handler that serves the webhook path with m and passes
// every other request to next (404 as in ServeHTTP if next is nil).
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if m.Handle(rw, r) {
			return
		}
		if next == nil {
			unknownRoute(rw, r)
			return
		}
		next.ServeHTTP(rw, r)
	})
}

// Handle serves r if its path is the middleware's and reports whether it
// did. For any other path it returns false without touching rw, so the
// caller can answer itself (octokit's "not handled").
func (m *Middleware) Handle(rw http.ResponseWriter, r *http.Request) bool {
	path := requestPath(r)
	if path != m.path {
		return false
	}
	m.serve(rw, r, path)
	return true
}

// serve answers a request for the webhook path.
func (m *Middleware) serve(rw http.ResponseWriter, r *http.Request, path string) {
	if r.Method != http.MethodPost {
		writeError(rw, http.StatusNotFound, "Unknown route: "+r.Method+" "+path, false)
		return
	}
	if !isApplicationJSON(r.Header.Get("Content-Type")) {
		writeError(rw, http.StatusUnsupportedMediaType, `Unsupported "Content-Type" header value. Must be "application/json"`, true)
		return
	}
	var missing []string
	for _, h := range [...]string{"x-github-event", "x-hub-signature-256", "x-github-delivery"} {
		if len(r.Header.Values(h)) == 0 {
			missing = append(missing, h)
		}
	}
	if len(missing) > 0 {
		writeError(rw, http.StatusBadRequest, "Required headers missing: "+strings.Join(missing, ", "), true)
		return
	}
	name := r.Header.Get(HeaderEvent)
	sig := r.Header.Get(HeaderSignature256)
	id := r.Header.Get(HeaderDelivery)
	log := m.log()
	log.Debug("webhooks: event received", "event", name, "id", id)

	body, err := m.readBody(rw, r)
	if err != nil {
		status := statusOf(err)
		log.Warn("webhooks: request rejected", "event", name, "id", id, "status", status, "err", err)
		writeError(rw, status, err.Error(), true)
		return
	}

	// The handlers outlive the request when they time out: they get the
	// request's values but not its cancellation.
	ctx := context.WithoutCancel(r.Context())
	done := make(chan error, 1)
	e := Event{ID: id, Name: name, Payload: body, Header: r.Header}
	go func() { done <- m.w.verifyAndReceive(ctx, e, sig) }()

	var timeout <-chan time.Time
	if m.timeout > 0 {
		t := time.NewTimer(m.timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case err = <-done:
	case <-timeout:
		writeText(rw, http.StatusAccepted, "still processing\n")
		go func() {
			if err := <-done; err != nil {
				log.Error("webhooks: handlers failed after the response", "event", name, "id", id, "err", err)
			}
		}()
		return
	}
	if err == nil {
		writeText(rw, http.StatusOK, "ok\n")
		return
	}
	status, msg := statusOf(err), err.Error()
	if agg, ok := errors.AsType[*AggregateError](err); ok && len(agg.Errors) > 0 {
		status, msg = agg.StatusCode(), agg.Errors[0].Error()
	}
	if status < 500 {
		log.Warn("webhooks: request rejected", "event", name, "id", id, "status", status, "err", err)
	} else {
		log.Error("webhooks: handlers failed", "event", name, "id", id, "status", status, "err", err)
	}
	writeError(rw, status, msg, true)
}

// readBody reads the whole body, up to m.maxBody bytes.
func (m *Middleware) readBody(rw http.ResponseWriter, r *http.Request) ([]byte, error) {
	tooLarge := func() error {
		return &statusError{status: http.StatusRequestEntityTooLarge,
			err: fmt.Errorf("%w: the body exceeds %d bytes", ErrPayloadTooLarge, m.maxBody)}
	}
	if m.maxBody > 0 && r.ContentLength > m.maxBody {
		return nil, tooLarge()
	}
	src := r.Body
	if src == nil {
		return []byte{}, nil
	}
	if m.maxBody > 0 {
		src = http.MaxBytesReader(rw, src, m.maxBody)
	}
	body, err := readAll(src, r.ContentLength)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, tooLarge()
		}
		return nil, badRequest(fmt.Errorf("webhooks: reading request body: %w", err))
	}
	return body, nil
}

// readAll is io.ReadAll with a first buffer sized for the announced
// length (plus one byte, to see EOF without growing), so the usual body
// costs one allocation; the announcement is trusted up to
// DefaultMaxBodyBytes only. It returns a non-nil slice.
func readAll(r io.Reader, sizeHint int64) ([]byte, error) {
	n := 512
	if sizeHint > 0 {
		n = int(min(sizeHint, DefaultMaxBodyBytes)) + 1
	}
	b := make([]byte, 0, n)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // let append pick the new capacity
		}
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// requestPath returns r's escaped path without trailing slashes.
func requestPath(r *http.Request) string {
	if r.URL == nil {
		return "/"
	}
	return trimTrailingSlashes(r.URL.EscapedPath())
}

// trimTrailingSlashes removes trailing slashes; "" and all-slash paths
// become "/" (octokit's normalizeTrailingSlashes).
func trimTrailingSlashes(p string) string {
	p = strings.TrimRight(p, "/")
	if p == "" {
		return "/"
	}
	return p
}

// isApplicationJSON matches octokit's /^\s*(application\/json)\s*(?:;|$)/u:
// leading space, then exactly (case-sensitively) application/json, then
// optional space and either the end or a ";" (parameters).
func isApplicationJSON(v string) bool {
	v = strings.TrimLeft(v, jsSpace)
	rest, ok := strings.CutPrefix(v, "application/json")
	if !ok {
		return false
	}
	rest = strings.TrimLeft(rest, jsSpace)
	return rest == "" || rest[0] == ';'
}

// jsSpace is JavaScript's \s.
const jsSpace = " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"

func unknownRoute(rw http.ResponseWriter, r *http.Request) {
	writeError(rw, http.StatusNotFound, "Unknown route: "+r.Method+" "+requestPath(r), false)
}

// writeError answers status with the JSON body {"error":msg}, encoded like
// JavaScript's JSON.stringify (no HTML escaping). accept adds octokit's
// "Accept: application/json" response header.
func writeError(rw http.ResponseWriter, status int, msg string, accept bool) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		Error string `json:"error"`
	}{msg}); err != nil {
		// Unreachable: a struct of one string always encodes.
		b.Reset()
		b.WriteString(`{"error":"webhooks: internal error"}` + "\n")
	}
	body := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	h := rw.Header()
	h.Set("Content-Type", "application/json")
	if accept {
		h.Set("Accept", "application/json")
	}
	write(rw, status, body)
}

// writeText answers status with a text/plain body.
func writeText(rw http.ResponseWriter, status int, body string) {
	h := rw.Header()
	h.Set("Content-Type", "text/plain")
	h.Set("Accept", "application/json")
	write(rw, status, []byte(body))
}

func write(rw http.ResponseWriter, status int, body []byte) {
	h := rw.Header()
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	rw.WriteHeader(status)
	_, _ = rw.Write(body)
}
