package webhooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookline/hookline/webhooks"
)

// Signatures under "mysecret", from `printf %s BODY | openssl dgst -sha256 -hmac mysecret`.
const (
	bodyOK          = `{"interop":"ok"}`
	sigOK           = "sha256=1372c86a9cae903b1925029a8624deb93e50d5ad5c40d99d9758649b63d73f75"
	sigOKOldSecret  = "sha256=59c8428dabb1bdef2f3fb8f72bdfef79358250af7a74346161f536edfe39376c" // under "oldsecret"
	bodyFail        = `{"interop":"fail"}`
	sigFail         = "sha256=efa9477f062fc9010c16c64126e9da0b25abebed9f57143f40f52b43253a8cf7"
	bodyFailStatus  = `{"interop":"fail-status"}`
	sigFailStatus   = "sha256=2a91907f95f0e32d3fac1bfa6e4b0627d2550fa5772c59f3de5dc80c3e266b7c"
	bodyHTML        = `{"interop":"html"}`
	sigHTML         = "sha256=ad9ac8388fa5417da4b06269cb9f02c6a0ca643dfd69e1206167cd0f6bc6eafb"
	bodyMulti       = `{"interop":"multi"}`
	sigMulti        = "sha256=76c99680d17fc922b355ef9e8809d85b3ef9787936c8c6ecf1c9ccd279325b0c"
	bodyStall       = `{"interop":"stall"}`
	sigStall        = "sha256=1843b9036dbfeaf56dd1ebc005267d8246e52b43a933099086ccdf478b1d211a"
	bodyNotJSON     = `not json`
	sigNotJSON      = "sha256=5068d329121f1ac2ab3a9ca8723703984664128c9441b03f5b45c6ae0418d3f4"
	bodyArray       = `[1]`
	sigArray        = "sha256=1ae1ab677c338e2c3cdc3b5db53eba489b486c735880d5152f7f91240602895f"
	badSignatureErr = `{"error":"signature does not match event payload and secret"}`
)

// interopWebhooks returns a Webhooks (secret "mysecret", additional
// "oldsecret") whose handlers branch on the payload's "interop" field like
// interop/server.mjs; "stall" blocks until release is closed.
func interopWebhooks(t testing.TB, release <-chan struct{}) *webhooks.Webhooks {
	t.Helper()
	w := newWebhooks(t, webhooks.Options{Secret: "mysecret", AdditionalSecrets: []string{"oldsecret"}})
	field := func(e webhooks.Event) string {
		var p struct{ Interop string }
		_ = json.Unmarshal(e.Payload, &p)
		return p.Interop
	}
	if _, err := w.On("push", func(ctx context.Context, e webhooks.Event) error {
		if field(e) == "multi" {
			return &statusError{msg: "first", status: 409}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.OnAny(func(ctx context.Context, e webhooks.Event) error {
		switch field(e) {
		case "fail":
			return errors.New("interop: handler failed")
		case "fail-status":
			return &statusError{msg: "interop: handler failed with status 403", status: 403}
		case "html":
			return errors.New(`bad <b>&"quoted"` + "\n\u00e9")
		case "multi":
			return errors.New("second")
		case "stall":
			select {
			case <-release:
			case <-ctx.Done():
				return errors.New("handler context cancelled")
			}
		}
		return nil
	})
	return w
}

type request struct {
	method      string
	target      string
	contentType string // "" means no header
	event       string // "-" means no header
	sig         string // "-" means no header
	id          string // "-" means no header
	body        string
}

func (rq request) build() *http.Request {
	if rq.method == "" {
		rq.method = http.MethodPost
	}
	if rq.target == "" {
		rq.target = "/api/github/webhooks"
	}
	r := httptest.NewRequest(rq.method, rq.target, strings.NewReader(rq.body))
	if rq.contentType != "" {
		r.Header.Set("Content-Type", rq.contentType)
	}
	for k, v := range map[string]string{"X-GitHub-Event": rq.event, "X-Hub-Signature-256": rq.sig, "X-GitHub-Delivery": rq.id} {
		if v != "-" {
			r.Header.Set(k, v)
		}
	}
	return r
}

// delivery returns a well-formed push delivery of body signed with sig.
func delivery(body, sig string) request {
	return request{contentType: "application/json", event: "push", sig: sig, id: "72d3162e-cc78-11e3-81ab-4c9367dc0958", body: body}
}

func with(rq request, f func(*request)) request { f(&rq); return rq }

func TestMiddleware(t *testing.T) {
	const (
		jsonType = "application/json"
		textType = "text/plain"
	)
	tests := []struct {
		name       string
		opts       webhooks.MiddlewareOptions
		req        request
		wantStatus int
		wantBody   string
		wantType   string
	}{
		{"success", webhooks.MiddlewareOptions{}, delivery(bodyOK, sigOK), 200, "ok\n", textType},
		{"trailing slash", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.target = "/api/github/webhooks//" }), 200, "ok\n", textType},
		{"query string ignored", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.target = "/api/github/webhooks/?x=1" }), 200, "ok\n", textType},
		{"additional secret", webhooks.MiddlewareOptions{}, delivery(bodyOK, sigOKOldSecret), 200, "ok\n", textType},
		{"custom path", webhooks.MiddlewareOptions{Path: "hooks/"}, with(delivery(bodyOK, sigOK), func(r *request) { r.target = "/hooks" }), 200, "ok\n", textType},
		{"custom path, default path not served", webhooks.MiddlewareOptions{Path: "/hooks"}, delivery(bodyOK, sigOK), 404,
			`{"error":"Unknown route: POST /api/github/webhooks"}`, jsonType},
		{"other path", webhooks.MiddlewareOptions{Path: webhooks.DefaultPath}, with(delivery(bodyOK, sigOK), func(r *request) { r.target = "/api/github/webhook" }), 404,
			`{"error":"Unknown route: POST /api/github/webhook"}`, jsonType},
		{"escaped path differs", webhooks.MiddlewareOptions{Path: webhooks.DefaultPath}, with(delivery(bodyOK, sigOK), func(r *request) { r.target = "/api/github/%77ebhooks" }), 404,
			`{"error":"Unknown route: POST /api/github/%77ebhooks"}`, jsonType},
		{"GET", webhooks.MiddlewareOptions{}, request{method: "GET"}, 404, `{"error":"Unknown route: GET /api/github/webhooks"}`, jsonType},
		{"PUT with trailing slash", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.method = "PUT"; r.target = "/api/github/webhooks/" }), 404,
			`{"error":"Unknown route: PUT /api/github/webhooks"}`, jsonType},
		{"no content type", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.contentType = "" }), 415,
			`{"error":"Unsupported \"Content-Type\" header value. Must be \"application/json\""}`, jsonType},
		{"form content type", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.contentType = "application/x-www-form-urlencoded" }), 415,
			`{"error":"Unsupported \"Content-Type\" header value. Must be \"application/json\""}`, jsonType},
		{"json prefix only", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.contentType = "application/jsonx" }), 415,
			`{"error":"Unsupported \"Content-Type\" header value. Must be \"application/json\""}`, jsonType},
		{"uppercase content type as in octokit", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.contentType = "Application/JSON" }), 415,
			`{"error":"Unsupported \"Content-Type\" header value. Must be \"application/json\""}`, jsonType},
		{"content type with charset", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.contentType = "application/json; charset=utf-8" }), 200, "ok\n", textType},
		{"content type with spaces", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.contentType = "application/json ;charset=utf-8" }), 200, "ok\n", textType},
		{"all headers missing", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.event, r.sig, r.id = "-", "-", "-" }), 400,
			`{"error":"Required headers missing: x-github-event, x-hub-signature-256, x-github-delivery"}`, jsonType},
		{"delivery missing", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.id = "-" }), 400,
			`{"error":"Required headers missing: x-github-delivery"}`, jsonType},
		{"event and delivery missing", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.event, r.id = "-", "-" }), 400,
			`{"error":"Required headers missing: x-github-event, x-github-delivery"}`, jsonType},
		{"signature missing", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.sig = "-" }), 400,
			`{"error":"Required headers missing: x-hub-signature-256"}`, jsonType},
		{"signature empty", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.sig = "" }), 400, badSignatureErr, jsonType},
		{"wrong signature", webhooks.MiddlewareOptions{}, delivery(bodyOK, sigFail), 400, badSignatureErr, jsonType},
		{"uppercase signature", webhooks.MiddlewareOptions{}, delivery(bodyOK, strings.ToUpper(sigOK)), 400, badSignatureErr, jsonType},
		{"sha1 signature", webhooks.MiddlewareOptions{}, delivery(bodyOK, "sha1=0123456789abcdef0123456789abcdef01234567"), 400, badSignatureErr, jsonType},
		{"body changed by a byte", webhooks.MiddlewareOptions{}, delivery(bodyOK+" ", sigOK), 400, badSignatureErr, jsonType},
		{"empty body", webhooks.MiddlewareOptions{}, delivery("", sigOK), 400, badSignatureErr, jsonType},
		{"signed but not JSON", webhooks.MiddlewareOptions{}, delivery(bodyNotJSON, sigNotJSON), 400,
			`{"error":"webhooks: payload is not a JSON object: invalid character 'o' in literal null (expecting 'u')"}`, jsonType},
		{"signed array", webhooks.MiddlewareOptions{}, delivery(bodyArray, sigArray), 400,
			`{"error":"webhooks: payload is not a JSON object: got an array"}`, jsonType},
		{"empty event name", webhooks.MiddlewareOptions{}, with(delivery(bodyOK, sigOK), func(r *request) { r.event = "" }), 400,
			`{"error":"webhooks: event name required"}`, jsonType},
		{"handler error", webhooks.MiddlewareOptions{}, delivery(bodyFail, sigFail), 500, `{"error":"interop: handler failed"}`, jsonType},
		{"handler error with status", webhooks.MiddlewareOptions{}, delivery(bodyFailStatus, sigFailStatus), 403,
			`{"error":"interop: handler failed with status 403"}`, jsonType},
		{"first error in registration order", webhooks.MiddlewareOptions{}, delivery(bodyMulti, sigMulti), 409, `{"error":"first"}`, jsonType},
		{"JSON escaping like JSON.stringify", webhooks.MiddlewareOptions{}, delivery(bodyHTML, sigHTML), 500,
			`{"error":"bad <b>&\"quoted\"\n` + "\u00e9" + `"}`, jsonType},
		{"body too large", webhooks.MiddlewareOptions{MaxBodyBytes: 8}, delivery(bodyOK, sigOK), 413,
			`{"error":"webhooks: payload too large: the body exceeds 8 bytes"}`, jsonType},
		{"body at the limit", webhooks.MiddlewareOptions{MaxBodyBytes: int64(len(bodyOK))}, delivery(bodyOK, sigOK), 200, "ok\n", textType},
		{"no limit", webhooks.MiddlewareOptions{MaxBodyBytes: -1}, delivery(bodyOK, sigOK), 200, "ok\n", textType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Logger = discard
			m := webhooks.NewMiddleware(interopWebhooks(t, nil), opts)
			rec := httptest.NewRecorder()
			m.ServeHTTP(rec, tt.req.build())
			checkResponse(t, rec.Result(), tt.wantStatus, tt.wantType, tt.wantBody)
		})
	}
}

func checkResponse(t *testing.T, res *http.Response, wantStatus int, wantType, wantBody string) {
	t.Helper()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != wantStatus {
		t.Errorf("status = %d, want %d (body %s)", res.StatusCode, wantStatus, body)
	}
	if string(body) != wantBody {
		t.Errorf("body = %q, want %q", body, wantBody)
	}
	if got := res.Header.Get("Content-Type"); got != wantType {
		t.Errorf("Content-Type = %q, want %q", got, wantType)
	}
	if got, want := res.Header.Get("Content-Length"), strconv.Itoa(len(wantBody)); got != want {
		t.Errorf("Content-Length = %q, want %q", got, want)
	}
}

func TestMiddlewareBodyTooLargeWithoutContentLength(t *testing.T) {
	m := webhooks.NewMiddleware(interopWebhooks(t, nil), webhooks.MiddlewareOptions{MaxBodyBytes: 8, Logger: discard})
	r := delivery(bodyOK, sigOK).build()
	r.ContentLength = -1 // as for a chunked upload
	r.Body = io.NopCloser(strings.NewReader(bodyOK))
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, r)
	checkResponse(t, rec.Result(), 413, "application/json", `{"error":"webhooks: payload too large: the body exceeds 8 bytes"}`)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestMiddlewareBodyReadError(t *testing.T) {
	m := webhooks.NewMiddleware(interopWebhooks(t, nil), webhooks.MiddlewareOptions{Logger: discard})
	r := delivery(bodyOK, sigOK).build()
	r.Body = io.NopCloser(errReader{})
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, r)
	checkResponse(t, rec.Result(), 400, "application/json", `{"error":"webhooks: reading request body: connection reset"}`)
}

func TestMiddlewareTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		w := interopWebhooks(t, release)
		finished := make(chan error, 1)
		w.OnError(func(ctx context.Context, err *webhooks.AggregateError) { finished <- err })
		done := make(chan struct{})
		w.OnAny(func(ctx context.Context, e webhooks.Event) error {
			<-release
			close(done)
			return ctx.Err() // the context must outlive the response
		})
		m := webhooks.NewMiddleware(w, webhooks.MiddlewareOptions{Timeout: 50 * time.Millisecond, Logger: discard})
		rec := httptest.NewRecorder()
		start := time.Now()
		m.ServeHTTP(rec, delivery(bodyStall, sigStall).build())
		checkResponse(t, rec.Result(), 202, "text/plain", "still processing\n")
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Errorf("answered 202 after %v, want the 50ms timeout", d)
		}

		close(release)
		<-done
		synctest.Wait() // the handlers have returned; an error would be reported by now
		select {
		case err := <-finished:
			t.Errorf("handlers failed after the 202: %v", err)
		default:
		}
	})
}

func TestMiddlewareSlowHandlerWithinTimeout(t *testing.T) {
	for _, timeout := range []time.Duration{0 /* DefaultTimeout, 9 s */, -1 /* none */} {
		t.Run(fmt.Sprint(timeout), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := interopWebhooks(t, nil)
				w.OnAny(func(ctx context.Context, e webhooks.Event) error {
					time.Sleep(8 * time.Second) // simulated: just within the default 9 s
					return nil
				})
				m := webhooks.NewMiddleware(w, webhooks.MiddlewareOptions{Timeout: timeout, Logger: discard})
				rec := httptest.NewRecorder()
				m.ServeHTTP(rec, delivery(bodyOK, sigOK).build())
				checkResponse(t, rec.Result(), 200, "text/plain", "ok\n")
			})
		})
	}
}

func TestMiddlewareHandle(t *testing.T) {
	m := webhooks.NewMiddleware(interopWebhooks(t, nil), webhooks.MiddlewareOptions{Logger: discard})
	tests := []struct {
		name   string
		target string
		method string
		want   bool
	}{
		{"webhook path", "/api/github/webhooks", "POST", true},
		{"webhook path GET", "/api/github/webhooks", "GET", true},
		{"root", "/", "POST", false},
		{"sub path", "/api/github/webhooks/x", "POST", false},
		{"prefix", "/api/github", "POST", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			r := with(delivery(bodyOK, sigOK), func(r *request) { r.target, r.method = tt.target, tt.method }).build()
			if got := m.Handle(rec, r); got != tt.want {
				t.Errorf("Handle(%s %s) = %v, want %v", tt.method, tt.target, got, tt.want)
			}
			if !tt.want && (rec.Body.Len() != 0 || len(rec.Header()) != 0 || rec.Flushed || rec.Code != 200) {
				t.Errorf("Handle(%s %s) wrote a response: %d %v %q", tt.method, tt.target, rec.Code, rec.Header(), rec.Body)
			}
		})
	}
}

// Mounted on a router, the http.Handler form serves whatever path the
// router gave it unless Path is set; Handle and Wrap keep octokit's path
// rule (DefaultPath when Path is empty). Before, a router mounting the
// middleware on "POST /webhook" got 404 Unknown route.
func TestMiddlewareOnARouter(t *testing.T) {
	tests := []struct {
		name       string
		path       string // MiddlewareOptions.Path
		form       string // "ServeHTTP", "Wrap"
		mount      string // the mux pattern
		target     string
		wantStatus int
	}{
		{"ServeHTTP, no Path, router path", "", "ServeHTTP", "POST /webhook", "/webhook", 200},
		{"ServeHTTP, no Path, default path", "", "ServeHTTP", "/", "/api/github/webhooks", 200},
		{"ServeHTTP, Path set, router path", "/hooks", "ServeHTTP", "POST /webhook", "/webhook", 404},
		{"ServeHTTP, Path set and matching", "/hooks", "ServeHTTP", "/hooks", "/hooks", 200},
		{"Wrap, no Path, router path", "", "Wrap", "POST /webhook", "/webhook", http.StatusTeapot},
		{"Wrap, no Path, default path", "", "Wrap", "/", "/api/github/webhooks", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := webhooks.NewMiddleware(interopWebhooks(t, nil), webhooks.MiddlewareOptions{Path: tt.path, Logger: discard})
			var h http.Handler = m
			if tt.form == "Wrap" {
				h = m.Wrap(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(http.StatusTeapot) }))
			}
			mux := http.NewServeMux()
			mux.Handle(tt.mount, h)
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, with(delivery(bodyOK, sigOK), func(r *request) { r.target = tt.target }).build())
			if rec.Code != tt.wantStatus {
				t.Errorf("%s %s → %d %q, want %d", tt.mount, tt.target, rec.Code, rec.Body, tt.wantStatus)
			}
		})
	}
}

func TestMiddlewareWrap(t *testing.T) {
	m := webhooks.NewMiddleware(interopWebhooks(t, nil), webhooks.MiddlewareOptions{Logger: discard})
	next := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(rw, "next "+r.URL.Path)
	})
	tests := []struct {
		name       string
		h          http.Handler
		target     string
		wantStatus int
		wantBody   string
	}{
		{"webhook path", m.Wrap(next), "/api/github/webhooks", 200, "ok\n"},
		{"other path goes to next", m.Wrap(next), "/health", 418, "next /health"},
		{"nil next answers 404", m.Wrap(nil), "/health", 404, `{"error":"Unknown route: POST /health"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tt.h.ServeHTTP(rec, with(delivery(bodyOK, sigOK), func(r *request) { r.target = tt.target }).build())
			if rec.Code != tt.wantStatus || rec.Body.String() != tt.wantBody {
				t.Errorf("response = %d %q, want %d %q", rec.Code, rec.Body, tt.wantStatus, tt.wantBody)
			}
		})
	}
}

// TestMiddlewareServer sends real requests through httptest.NewServer.
func TestMiddlewareServer(t *testing.T) {
	logger, logs := newLogger()
	w := interopWebhooks(t, nil)
	srv := httptest.NewServer(webhooks.NewMiddleware(w, webhooks.MiddlewareOptions{Logger: logger, MaxBodyBytes: 1 << 10}))
	t.Cleanup(srv.Close)
	post := func(t *testing.T, body, sig string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/api/github/webhooks", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", "d-1")
		req.Header.Set("X-Hub-Signature-256", sig)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	t.Run("ok", func(t *testing.T) {
		checkResponse(t, post(t, bodyOK, sigOK), 200, "text/plain", "ok\n")
	})
	t.Run("handler error", func(t *testing.T) {
		checkResponse(t, post(t, bodyFail, sigFail), 500, "application/json", `{"error":"interop: handler failed"}`)
	})
	t.Run("too large", func(t *testing.T) {
		checkResponse(t, post(t, `{"x":"`+strings.Repeat("a", 2<<10)+`"}`, sigOK), 413, "application/json",
			`{"error":"webhooks: payload too large: the body exceeds 1024 bytes"}`)
	})
	if !strings.Contains(logs.String(), `level=DEBUG msg="webhooks: event received" event=push id=d-1`) {
		t.Errorf("no debug line for the delivery in logs:\n%s", logs)
	}
	if !strings.Contains(logs.String(), `level=ERROR msg="webhooks: handlers failed"`) {
		t.Errorf("no error line for the failed delivery in logs:\n%s", logs)
	}
}

func TestNewMiddlewareNil(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewMiddleware(nil) did not panic")
		}
	}()
	webhooks.NewMiddleware(nil, webhooks.MiddlewareOptions{})
}

// FuzzMiddleware sends arbitrary requests through the middleware: it must
// not panic, must answer one of the statuses of the table, and every error
// response must be a JSON object {"error": string} with an exact
// Content-Length.
//
// Run: go test ./webhooks -run '^$' -fuzz '^FuzzMiddleware$' -fuzztime 60s
func FuzzMiddleware(f *testing.F) {
	seeds := []request{
		delivery(bodyOK, sigOK), delivery(bodyFail, sigFail), delivery(bodyFailStatus, sigFailStatus),
		delivery(bodyMulti, sigMulti), delivery(bodyHTML, sigHTML), delivery(bodyNotJSON, sigNotJSON),
		delivery(bodyArray, sigArray), delivery(bodyOK, sigFail), delivery("", ""),
		{method: "GET", target: "/api/github/webhooks/", event: "-", sig: "-", id: "-"},
		{method: "POST", target: "/x?y", contentType: "text/plain", event: "push", sig: "-", id: "1"},
		with(delivery(bodyOK, sigOK), func(r *request) { r.contentType = " application/json;" }),
		with(delivery(`{"foo":"bar"}`, "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3"), func(r *request) { r.event = "issues" }),
	}
	for _, s := range seeds {
		var mask uint8
		for i, v := range []string{s.event, s.sig, s.id} {
			if v == "-" {
				mask |= 1 << i
			}
		}
		f.Add(s.method, s.target, s.contentType, s.event, s.sig, s.id, mask, []byte(s.body))
	}
	released := make(chan struct{})
	close(released) // "stall" returns at once
	w := interopWebhooks(f, released)
	m := webhooks.NewMiddleware(w, webhooks.MiddlewareOptions{Logger: discard, MaxBodyBytes: 1 << 12})
	allowed := map[int]bool{200: true, 202: true, 400: true, 403: true, 404: true, 409: true, 413: true, 415: true, 500: true}
	f.Fuzz(func(t *testing.T, method, target, contentType, event, sig, id string, missing uint8, body []byte) {
		u, err := url.ParseRequestURI(target)
		if err != nil || method == "" {
			return // net/http rejects such requests before any handler runs
		}
		r := &http.Request{
			Method:        method,
			URL:           u,
			Header:        http.Header{},
			Body:          io.NopCloser(bytes.NewReader(body)),
			ContentLength: int64(len(body)),
		}
		r = r.WithContext(t.Context())
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		for i, kv := range [][2]string{{"X-GitHub-Event", event}, {"X-Hub-Signature-256", sig}, {"X-GitHub-Delivery", id}} {
			if missing&(1<<i) == 0 {
				r.Header.Set(kv[0], kv[1])
			}
		}
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, r)
		res := rec.Result()
		got, _ := io.ReadAll(res.Body)
		if !allowed[res.StatusCode] {
			t.Fatalf("status %d (body %q) not in the table", res.StatusCode, got)
		}
		if cl := res.Header.Get("Content-Length"); cl != strconv.Itoa(len(got)) {
			t.Fatalf("Content-Length %q for a %d-byte body", cl, len(got))
		}
		switch res.StatusCode {
		case 200:
			if string(got) != "ok\n" {
				t.Fatalf("200 body %q", got)
			}
		case 202:
			if string(got) != "still processing\n" {
				t.Fatalf("202 body %q", got)
			}
		default:
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("error Content-Type %q", ct)
			}
			var e struct {
				Error *string `json:"error"`
			}
			dec := json.NewDecoder(bytes.NewReader(got))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&e); err != nil || e.Error == nil || *e.Error == "" || dec.More() {
				t.Fatalf("error body %q is not {\"error\": string}: %v", got, err)
			}
		}
	})
}

// TestMiddlewareDefaultBodyLimit sends a delivery of exactly 25 MiB (accepted)
// and announces one byte more (refused before reading).
func TestMiddlewareDefaultBodyLimit(t *testing.T) {
	const size = 25 << 20
	body := make([]byte, 0, size)
	body = append(body, `{"pad":"`...)
	body = append(body, bytes.Repeat([]byte("a"), size-len(`{"pad":""}`))...)
	body = append(body, `"}`...)
	// From: python3 -c '...same bytes...' > big.json; openssl dgst -sha256 -hmac mysecret big.json
	const sig = "sha256=4acba097604bd2d0acb522028523738adab747c3d02a1c5f09b522460c96075a"
	// A generous Timeout: verifying 25 MiB under -race on a busy machine
	// can outlast the default 9 s, and this test is about the size limit.
	m := webhooks.NewMiddleware(interopWebhooks(t, nil), webhooks.MiddlewareOptions{Logger: discard, Timeout: 2 * time.Minute})

	rec := httptest.NewRecorder()
	r := delivery("", sig).build()
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), size
	m.ServeHTTP(rec, r)
	checkResponse(t, rec.Result(), 200, "text/plain", "ok\n")

	rec = httptest.NewRecorder()
	r = delivery(`{}`, sig).build()
	r.ContentLength = size + 1
	m.ServeHTTP(rec, r)
	checkResponse(t, rec.Result(), 413, "application/json", `{"error":"webhooks: payload too large: the body exceeds 26214400 bytes"}`)
}
