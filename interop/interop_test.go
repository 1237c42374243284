package interop

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/webhooks"
)

const (
	// secret is the webhook secret both sides are configured with.
	secret = "hookline interop secret"

	// npmInstall installs the pinned node packages these tests need
	// (from the repository root; Node.js 20+ first).
	npmInstall = "npm ci --prefix interop"
	// installHint is how to get what these tests need.
	installHint = "install Node.js 20+ and run `" + npmInstall + "` from the repository root"

	// examplesFloor is fewer example payloads than any 7.x release of
	// @octokit/webhooks-examples holds (7.6.1: 329 for api.github.com,
	// 726 with the GHES sets), so an empty or half-read set fails.
	examplesFloor = 600

	// nodeTimeout bounds one batch run of methods.mjs.
	nodeTimeout = 60 * time.Second
	// serverStartTimeout bounds the wait for server.mjs to print its port.
	serverStartTimeout = 15 * time.Second
	// middlewareTimeout is both middlewares' Timeout: a handler still
	// running then gets a 202. Far above what a trivial handler takes.
	middlewareTimeout = 2 * time.Second
	// noResponseWait is how long a request may go unanswered before the
	// outcome is recorded as "no response" (status 0). Above
	// middlewareTimeout, so a 202 always arrives first.
	noResponseWait = 5 * time.Second
)

// requireNode returns the path of node after checking that the packages
// pinned in package.json are installed at exactly those versions. Anything
// missing or stale ends the test through testenv.Missing: a failure in CI,
// a skip naming the install command elsewhere.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "install Node.js 20+, then run `"+npmInstall+"`")
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	readJSON(t, "package.json", &pkg)
	if len(pkg.Dependencies) == 0 {
		t.Fatalf("interop: package.json pins no dependencies")
	}
	for _, name := range slices.Sorted(maps.Keys(pkg.Dependencies)) {
		want := pkg.Dependencies[name]
		path := filepath.Join("node_modules", filepath.FromSlash(name), "package.json")
		var installed struct {
			Version string `json:"version"`
		}
		data, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(data, &installed)
		}
		if err != nil || installed.Version != want {
			testenv.Missing(t, "the npm package "+name+"@"+want, "run `"+npmInstall+"`")
		}
	}
	return node
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("interop: %v", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("interop: %s: %v", path, err)
	}
}

// runNode runs node with args in this directory, stdin as its input, and
// decodes its stdout as JSON into out.
func runNode(t *testing.T, node string, stdin []byte, out any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (gave up after %v)", err, nodeTimeout)
		}
		t.Fatalf("interop: node %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("interop: node %s printed no valid JSON: %v\nstderr:\n%s",
			strings.Join(args, " "), err, stderr.Bytes())
	}
}

// signedExample is one example payload as methods.mjs serialised and
// signed it.
type signedExample struct {
	Source    string `json:"source"`
	Event     string `json:"event"`
	Index     int    `json:"index"`
	Payload   []byte `json:"payload"` // base64 in JSON
	Signature string `json:"signature"`
}

func (e signedExample) String() string {
	return fmt.Sprintf("%s %s example %d", e.Source, e.Event, e.Index)
}

// methodsJob is a job for `node methods.mjs batch`.
type methodsJob struct {
	Op        string `json:"op"`
	Payload   []byte `json:"payload"` // base64 in JSON
	Signature string `json:"signature,omitempty"`
}

// methodsResult is the answer to one methodsJob.
type methodsResult struct {
	Signature string `json:"signature"`
	Valid     *bool  `json:"valid"`
	Error     string `json:"error"`
}

// countExamples counts, independently of methods.mjs, the example payloads
// in every index.json of @octokit/webhooks-examples, by directory.
func countExamples(t *testing.T) map[string]int {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("node_modules", "@octokit", "webhooks-examples", "*", "index.json"))
	if err != nil {
		t.Fatalf("interop: %v", err)
	}
	counts := make(map[string]int)
	for _, path := range paths {
		var events []struct {
			Examples []json.RawMessage `json:"examples"`
		}
		readJSON(t, path, &events)
		for _, e := range events {
			counts[filepath.Base(filepath.Dir(path))] += len(e.Examples)
		}
	}
	return counts
}

// mutate returns a copy of payload with one byte changed: the first ASCII
// byte from the middle on gets its lowest bit flipped, so the result is
// still valid UTF-8 (node's verify takes a string).
func mutate(payload []byte) []byte {
	out := bytes.Clone(payload)
	for i := len(out) / 2; i < len(out); i++ {
		if out[i] < 0x80 {
			out[i] ^= 1
			return out
		}
	}
	panic("interop: no ASCII byte in the second half of the payload")
}

// failureBudget stops a test after limit errors, so a broken
// implementation gives a readable report instead of thousands of lines.
type failureBudget struct {
	t     *testing.T
	limit int
	n     int
}

func (b *failureBudget) errorf(format string, args ...any) {
	b.t.Helper()
	b.t.Errorf(format, args...)
	if b.n++; b.n >= b.limit {
		b.t.Fatalf("interop: stopping after %d failures", b.n)
	}
}

// TestSignaturesMatchOctokit checks webhooks.Sign and webhooks.Verify
// against @octokit/webhooks-methods on every example payload of
// @octokit/webhooks-examples, in both directions, and checks that a
// one-byte change of the payload fails on both sides.
func TestSignaturesMatchOctokit(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an interop test (node)")
	}
	node := requireNode(t)

	var signed struct {
		Examples []signedExample `json:"examples"`
	}
	runNode(t, node, nil, &signed, "methods.mjs", "examples", "--secret", secret)

	got := make(map[string]int)
	for _, e := range signed.Examples {
		got[e.Source]++
	}
	want := countExamples(t)
	if !maps.Equal(got, want) {
		t.Fatalf("interop: methods.mjs signed %v example payloads by directory, the example files hold %v", got, want)
	}
	if n := len(signed.Examples); n <= examplesFloor {
		t.Fatalf("interop: only %d example payloads (%v), want more than %d; is @octokit/webhooks-examples installed? %s",
			n, got, examplesFloor, installHint)
	}

	// Node signed, we verify; we sign, node verifies (in one batch below).
	budget := &failureBudget{t: t, limit: 20}
	var jobs []methodsJob
	type expectation struct {
		what  string
		valid bool
	}
	var expect []expectation
	for _, e := range signed.Examples {
		changed := mutate(e.Payload)

		if ok, err := webhooks.Verify(secret, e.Payload, e.Signature); !ok || err != nil {
			budget.errorf("%v: Verify(node's signature %q) = %v, %v, want true, nil", e, e.Signature, ok, err)
		}
		if ok, err := webhooks.Verify(secret, changed, e.Signature); ok || err != nil {
			budget.errorf("%v: Verify(one byte changed, node's signature) = %v, %v, want false, nil", e, ok, err)
		}

		ours, err := webhooks.Sign(secret, e.Payload)
		if err != nil {
			budget.errorf("%v: Sign: %v", e, err)
			continue
		}
		if ours != e.Signature {
			budget.errorf("%v: Sign = %q, node's sign = %q", e, ours, e.Signature)
		}
		jobs = append(jobs,
			methodsJob{Op: "verify", Payload: e.Payload, Signature: ours},
			methodsJob{Op: "verify", Payload: changed, Signature: ours})
		expect = append(expect,
			expectation{fmt.Sprintf("%v: node verify(our signature %q)", e, ours), true},
			expectation{fmt.Sprintf("%v: node verify(one byte changed, our signature)", e), false})
	}

	input, err := json.Marshal(map[string]any{"secret": secret, "jobs": jobs})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Results []methodsResult `json:"results"`
	}
	runNode(t, node, input, &out, "methods.mjs", "batch")
	if len(out.Results) != len(jobs) {
		t.Fatalf("interop: methods.mjs batch answered %d of %d jobs", len(out.Results), len(jobs))
	}
	for i, r := range out.Results {
		switch {
		case r.Error != "":
			budget.errorf("%s: error %q", expect[i].what, r.Error)
		case r.Valid == nil:
			budget.errorf("%s: no answer", expect[i].what)
		case *r.Valid != expect[i].valid:
			budget.errorf("%s = %v, want %v", expect[i].what, *r.Valid, expect[i].valid)
		}
	}
	t.Logf("checked %d example payloads %v: node's signatures verify here, ours equal node's and verify there, one changed byte fails on both sides",
		len(signed.Examples), got)
}

// lineWriter is an io.Writer for a child's output that keeps everything
// written and hands the first line to firstLine.
type lineWriter struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	sent      bool
	firstLine chan string
}

func newLineWriter() *lineWriter {
	return &lineWriter{firstLine: make(chan string, 1)}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent {
		if line, _, ok := bytes.Cut(w.buf.Bytes(), []byte("\n")); ok {
			w.firstLine <- string(line)
			w.sent = true
		}
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// startOctokit starts server.mjs, octokit's createNodeMiddleware, and
// returns its base URL. The server is killed when the test ends.
func startOctokit(t *testing.T, node string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cmd := exec.CommandContext(ctx, node, "server.mjs",
		"--secret", secret,
		"--timeout-ms", strconv.FormatInt(middlewareTimeout.Milliseconds(), 10))
	stdin, err := cmd.StdinPipe() // server.mjs exits when this closes
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := newLineWriter(), newLineWriter()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("interop: starting node server.mjs: %v; %s", err, installHint)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		stdin.Close()
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("server.mjs stderr:\n%s", stderr)
		}
	})

	select {
	case line := <-stdout.firstLine:
		port, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || port <= 0 || port > 65535 {
			t.Fatalf("interop: server.mjs printed %q, want a port\nstderr:\n%s", line, stderr)
		}
		return "http://127.0.0.1:" + strconv.Itoa(port)
	case err := <-exited:
		exited <- err // for the cleanup
		t.Fatalf("interop: server.mjs exited before printing its port: %v\nstderr:\n%s", err, stderr)
	case <-time.After(serverStartTimeout):
		t.Fatalf("interop: server.mjs printed no port within %v\nstderr:\n%s", serverStartTimeout, stderr)
	}
	panic("unreachable")
}

// statusError is a handler error that carries an HTTP status.
type statusError struct {
	status int
	msg    string
}

func (e statusError) Error() string   { return e.msg }
func (e statusError) StatusCode() int { return e.status }

// startOurs serves webhooks.NewMiddleware with the handlers of server.mjs
// written in Go, and returns its base URL.
func startOurs(t *testing.T) string {
	t.Helper()
	wh, err := webhooks.New(webhooks.Options{Secret: secret})
	if err != nil {
		t.Fatalf("webhooks.New: %v", err)
	}
	release := make(chan struct{})
	wh.OnAny(func(ctx context.Context, e webhooks.Event) error {
		var p struct {
			Interop string `json:"interop"`
		}
		_ = json.Unmarshal(e.Payload, &p) // the same rule as server.mjs: no field, no special case
		switch p.Interop {
		case "fail":
			return errors.New("interop: handler failed")
		case "fail-status":
			return statusError{http.StatusForbidden, "interop: handler failed with status 403"}
		case "fail-utf8":
			return errors.New("interop: handler failed: échec ✗")
		case "stall":
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	})
	srv := httptest.NewServer(webhooks.NewMiddleware(wh, webhooks.MiddlewareOptions{
		// Standalone with octokit's path rule: a Path set explicitly
		// (without one, the http.Handler form serves any path it is
		// mounted on).
		Path:    webhooks.DefaultPath,
		Timeout: middlewareTimeout,
		Logger:  slog.New(slog.DiscardHandler),
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: no handler outlives the test
	return srv.URL
}

// request is one HTTP request sent identically to both middlewares.
type request struct {
	method string
	path   string
	header map[string]string // exactly these headers (besides Go's own)
	body   string
}

const (
	hookPath  = "/api/github/webhooks"
	eventName = "issues"
	delivery  = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
)

// hmacSig signs body with the standard library, not with the code under test.
func hmacSig(body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// post returns a valid, signed delivery of body; edit returns a copy with
// headers set (or removed, for an empty value) before sending.
func post(body string) request {
	return request{
		method: http.MethodPost,
		path:   hookPath,
		header: map[string]string{
			"Content-Type":        "application/json",
			"X-GitHub-Event":      eventName,
			"X-GitHub-Delivery":   delivery,
			"X-Hub-Signature-256": hmacSig(body),
		},
		body: body,
	}
}

func (r request) with(key, value string) request {
	r.header = maps.Clone(r.header)
	r.header[key] = value
	return r
}

func (r request) without(keys ...string) request {
	r.header = maps.Clone(r.header)
	for _, k := range keys {
		delete(r.header, k)
	}
	return r
}

func (r request) at(path string) request {
	r.path = path
	return r
}

// response is what a middleware answered; status 0 means no answer within
// noResponseWait.
type response struct {
	status        int
	body          []byte
	contentType   string
	contentLength string
}

// send sends r to the server at base. It is safe to call from any goroutine.
func send(ctx context.Context, client *http.Client, base string, r request) (response, error) {
	ctx, cancel := context.WithTimeout(ctx, noResponseWait)
	defer cancel()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, base+r.path, body)
	if err != nil {
		return response{}, err
	}
	for k, v := range r.header {
		req.Header[k] = []string{v} // as given, even when empty
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return response{}, nil
		}
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: reading body: %w", r.method, base+r.path, err)
	}
	return response{
		status:        resp.StatusCode,
		body:          data,
		contentType:   resp.Header.Get("Content-Type"),
		contentLength: resp.Header.Get("Content-Length"),
	}, nil
}

func (r response) String() string {
	if r.status == 0 {
		return fmt.Sprintf("no response within %v", noResponseWait)
	}
	return fmt.Sprintf("%d %q (Content-Type %q)", r.status, r.body, r.contentType)
}

// bodyRule says how our body must compare with octokit's when the statuses
// are the same.
type bodyRule int

const (
	// sameBody: equal JSON values for JSON bodies, equal bytes otherwise.
	sameBody bodyRule = iota
	// sameWithoutErrorName: octokit writes `{"error":"<err.name>: <message>"}`
	// (JavaScript's "Error: …"); a Go error has no name, so ours is
	// `{"error":"<message>"}` (SPEC 4.4).
	sameWithoutErrorName
	// anyBody: SPEC 4.4 lets ours word this error its own way; only the
	// status and the content type are compared.
	anyBody
)

// difference is a deliberate difference: ours answers status (and body,
// when not empty) where octokit answers otherwise.
type difference struct {
	status int
	body   string
	why    string
}

// TestMiddlewareMatchesOctokit sends the same requests to octokit's
// createNodeMiddleware (server.mjs) and to webhooks.NewMiddleware and
// compares the answers. octokit's status is pinned as a literal in every
// case, so an octokit upgrade that changes its behaviour shows up here too.
func TestMiddlewareMatchesOctokit(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an interop test (node)")
	}
	node := requireNode(t)
	octokitURL := startOctokit(t, node)
	oursURL := startOurs(t)

	good := `{"action":"opened","issue":{"number":1,"title":"interop"}}`
	allHeaders := []string{"X-GitHub-Event", "X-Hub-Signature-256", "X-GitHub-Delivery"}

	cases := []struct {
		name    string
		req     request
		octokit int // octokit's status; 0: it never answers
		body    bodyRule
		diff    *difference
	}{
		{name: "good delivery", req: post(good), octokit: 200},
		{name: "content type with charset", req: post(good).with("Content-Type", "application/json; charset=utf-8"), octokit: 200},
		{name: "trailing slash on path", req: post(good).at(hookPath + "/"), octokit: 200},
		{name: "query string", req: post(good).at(hookPath + "?installation=1"), octokit: 200},
		{name: "bad signature", req: post(good).with("X-Hub-Signature-256", hmacSig(good+" ")), octokit: 400, body: anyBody},
		{name: "sha1 signature in the sha256 header", req: post(good).with("X-Hub-Signature-256", "sha1=0123456789abcdef0123456789abcdef01234567"), octokit: 400, body: anyBody},
		{name: "signature in uppercase hex", req: post(good).with("X-Hub-Signature-256", "sha256="+strings.ToUpper(strings.TrimPrefix(hmacSig(good), "sha256="))), octokit: 400, body: anyBody},
		{name: "empty signature header", req: post(good).with("X-Hub-Signature-256", ""), octokit: 400, body: anyBody},
		{name: "missing x-github-event", req: post(good).without("X-GitHub-Event"), octokit: 400},
		{name: "missing x-hub-signature-256", req: post(good).without("X-Hub-Signature-256"), octokit: 400},
		{name: "missing x-github-delivery", req: post(good).without("X-GitHub-Delivery"), octokit: 400},
		{name: "missing all three headers", req: post(good).without(allHeaders...), octokit: 400},
		{name: "form content type", req: post(good).with("Content-Type", "application/x-www-form-urlencoded"), octokit: 415},
		{name: "form content type and no webhook headers", req: post(good).with("Content-Type", "application/x-www-form-urlencoded").without(allHeaders...), octokit: 415},
		{name: "no content type", req: post(good).without("Content-Type"), octokit: 415},
		{name: "content type in capitals", req: post(good).with("Content-Type", "Application/JSON"), octokit: 415},
		{name: "content type that only starts with application/json", req: post(good).with("Content-Type", "application/json-seq"), octokit: 415},
		{name: "GET", req: request{method: http.MethodGet, path: hookPath}, octokit: 404},
		{name: "PUT of a valid delivery", req: func() request { r := post(good); r.method = http.MethodPut; return r }(), octokit: 404},
		{name: "invalid JSON, signed", req: post(`{"action":`), octokit: 400, body: anyBody},
		{name: "empty body", req: post("").with("X-Hub-Signature-256", hmacSig("x")), octokit: 400, body: anyBody},
		{name: "handler error", req: post(`{"interop":"fail"}`), octokit: 500, body: sameWithoutErrorName},
		{name: "handler error with status", req: post(`{"interop":"fail-status"}`), octokit: 403, body: sameWithoutErrorName},
		{name: "handler still running at the timeout", req: post(`{"interop":"stall"}`), octokit: 202},
		{
			name: "handler error with a non-ASCII message", req: post(`{"interop":"fail-utf8"}`), octokit: 500,
			diff: &difference{500, `{"error":"interop: handler failed: échec ✗"}`,
				"octokit sets Content-Length to the body's length in UTF-16 code units, so a non-ASCII body is cut short; " +
					"SPEC 4.4: Content-Length is the byte length"},
		},
		{
			name: "other path", req: post(good).at("/other"), octokit: 0,
			diff: &difference{404, "",
				"octokit's node middleware without next leaves a request outside its path unanswered (it returns false for the caller to answer); " +
					"SPEC 4.4: not handled means next, or 404 when standalone"},
		},
		{
			name: "trailing slash and query string", req: post(good).at(hookPath + "/?installation=1"), octokit: 0,
			diff: &difference{200, "ok\n",
				"octokit strips trailing slashes from the whole URL, query included, so it misses its own path and leaves the request unanswered; " +
					"SPEC 4.4: trailing slashes are ignored"},
		},
		{
			name: "empty x-github-event", req: post(good).with("X-GitHub-Event", ""), octokit: 500,
			diff: &difference{400, "", `octokit passes the empty name on and its receive throws "Event name not passed" without a status (500); ` +
				"ours rejects an empty name as bad input (ErrMissingName, a 400), see the webhooks package doc"},
		},
		{
			// Sent with Expect: 100-continue, as curl sends large bodies:
			// ours answers 413 from the headers without reading the body,
			// and a client still writing the body would race the reset of
			// the closing connection instead of reading that answer.
			name: "body over 25 MiB", req: post(`{"pad":"`+strings.Repeat("x", 25<<20)+`"}`).with("Expect", "100-continue"), octokit: 200,
			diff: &difference{413, "", "octokit's node middleware reads bodies of any size; SPEC 4.4: MaxBodyBytes, 25 MiB by default (GitHub's cap), 413 above"},
		},
		{
			name: "signed JSON array", req: post(`[]`), octokit: 200,
			diff: &difference{400, "", "octokit runs the handlers with an array payload; SPEC 4.2: a payload that is not a JSON object is a 400, handlers not called"},
		},
		{
			name: "signed JSON null", req: post(`null`), octokit: 500,
			diff: &difference{400, "", `octokit answers 500 "Event name not passed"; SPEC 4.2: a payload that is not a JSON object is a 400`},
		},
		{
			name: "signed JSON string", req: post(`"interop"`), octokit: 0,
			diff: &difference{400, "", "octokit's receive throws a TypeError its error path cannot unpack: the middleware's promise rejects and the request is never answered; " +
				"SPEC 4.2: a payload that is not a JSON object is a 400"},
		},
	}

	// Send everything at once, so the cases that wait for the middleware
	// timeout or for noResponseWait overlap instead of adding up.
	type exchange struct {
		theirs, ours       response
		theirsErr, oursErr error
	}
	exchanges := make([]exchange, len(cases))
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: time.Second}}
	var wg sync.WaitGroup
	for i, tc := range cases {
		wg.Go(func() { exchanges[i].theirs, exchanges[i].theirsErr = send(t.Context(), client, octokitURL, tc.req) })
		wg.Go(func() { exchanges[i].ours, exchanges[i].oursErr = send(t.Context(), client, oursURL, tc.req) })
	}
	wg.Wait()

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := exchanges[i]
			if x.theirsErr != nil {
				t.Fatalf("octokit: %v", x.theirsErr)
			}
			if x.oursErr != nil {
				t.Fatalf("ours: %v", x.oursErr)
			}
			theirs, ours := x.theirs, x.ours
			t.Logf("octokit: %v\nours:    %v", theirs, ours)

			if theirs.status != tc.octokit {
				t.Errorf("octokit answered %v, want status %d (pinned): has the pinned @octokit/webhooks changed behaviour?", theirs, tc.octokit)
			}
			if ours.status != 0 && ours.contentLength != "" && ours.contentLength != strconv.Itoa(len(ours.body)) {
				t.Errorf("ours: Content-Length %s for a body of %d bytes", ours.contentLength, len(ours.body))
			}

			if tc.diff != nil {
				if ours.status != tc.diff.status {
					t.Errorf("ours answered %v, want status %d; octokit answered %v\ndeliberate difference: %s", ours, tc.diff.status, theirs, tc.diff.why)
				}
				if tc.diff.body != "" && !sameContent(ours.body, []byte(tc.diff.body)) {
					t.Errorf("ours answered body %q, want %q\ndeliberate difference: %s", ours.body, tc.diff.body, tc.diff.why)
				}
				return
			}

			if ours.status != theirs.status {
				t.Fatalf("status: ours %d, octokit %d (both answers above)", ours.status, theirs.status)
			}
			if ours.status == 0 {
				return
			}
			if a, b := mediaType(ours.contentType), mediaType(theirs.contentType); a != b {
				t.Errorf("Content-Type: ours %q, octokit %q", ours.contentType, theirs.contentType)
			}
			switch tc.body {
			case sameBody:
				if !sameContent(ours.body, theirs.body) {
					t.Errorf("body: ours %q, octokit %q", ours.body, theirs.body)
				}
			case sameWithoutErrorName:
				msg, ok := errorMessage(theirs.body)
				if !ok || !strings.HasPrefix(msg, "Error: ") {
					t.Fatalf(`octokit body %q is not {"error":"Error: …"}`, theirs.body)
				}
				if got, ok := errorMessage(ours.body); !ok || got != strings.TrimPrefix(msg, "Error: ") {
					t.Errorf("body: ours %q, want %q (octokit's %q without JavaScript's error name)",
						ours.body, `{"error":`+strconv.Quote(strings.TrimPrefix(msg, "Error: "))+`}`, theirs.body)
				}
			case anyBody:
				if _, ok := errorMessage(ours.body); !ok {
					t.Errorf(`body: ours %q, want {"error":"…"} (octokit: %q)`, ours.body, theirs.body)
				}
			}
		})
	}
}

// sameContent reports whether a and b are equal JSON values, or equal bytes
// when either is not JSON.
func sameContent(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

// errorMessage returns the string of a {"error":"…"} body.
func errorMessage(body []byte) (string, bool) {
	var v struct {
		Error *string `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || v.Error == nil {
		return "", false
	}
	return *v.Error, true
}

func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return contentType
	}
	return mt
}
