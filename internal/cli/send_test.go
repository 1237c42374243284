package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/webhooks"
)

// recordedRequest is one request a recordingTarget received.
type recordedRequest struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// recordingTarget is a local webhook server that records every request and
// answers with status(n, request) (200 when status is nil).
type recordingTarget struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recordedRequest
}

func newRecordingTarget(t *testing.T, status func(n int, r recordedRequest) int) *recordingTarget {
	t.Helper()
	rt := &recordingTarget{}
	rt.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := recordedRequest{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: body}
		rt.mu.Lock()
		n := len(rt.reqs)
		rt.reqs = append(rt.reqs, rec)
		rt.mu.Unlock()
		code := http.StatusOK
		if status != nil {
			code = status(n, rec)
		}
		w.WriteHeader(code)
		if code >= 400 {
			io.WriteString(w, `{"error":"the target says no"}`)
		} else {
			io.WriteString(w, "ok\n")
		}
	}))
	t.Cleanup(rt.Close)
	return rt
}

func (rt *recordingTarget) requests() []recordedRequest {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.reqs)
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSendHeadersAndSignature(t *testing.T) {
	target := newRecordingTarget(t, nil)
	payload := writeFile(t, "payload.txt", []byte("Hello, World!"))
	code, out, errOut := run(t, "send", "--event", "issues.opened", "--payload", payload,
		"--secret", "It's a Secret to Everybody", "--target", target.URL+"/api/github/webhooks?x=1")
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, errOut)
	}
	reqs := target.requests()
	if len(reqs) != 1 {
		t.Fatalf("target got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.method != http.MethodPost || r.path != "/api/github/webhooks" || r.query != "x=1" {
		t.Errorf("request = %s %s?%s, want POST /api/github/webhooks?x=1", r.method, r.path, r.query)
	}
	if string(r.body) != "Hello, World!" {
		t.Errorf("body = %q, want %q", r.body, "Hello, World!")
	}
	want := map[string]string{
		"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		"X-Github-Event":      "issues",
		"User-Agent":          "GitHub-Hookshot/hookline",
		"Content-Type":        "application/json",
		"Accept":              "*/*",
		"X-Hub-Signature":     "",
		"Accept-Encoding":     "", // GitHub sends none; net/http would add gzip
	}
	for k, v := range want {
		if got := r.header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	id := r.header.Get("X-GitHub-Delivery")
	if !uuidV4.MatchString(id) {
		t.Errorf("X-GitHub-Delivery = %q, want a version 4 UUID", id)
	}
	if !strings.Contains(out, "delivery "+id) || !strings.Contains(out, " 200 ") {
		t.Errorf("stdout = %q, want the delivery id %s and status 200", out, id)
	}
	if want := "warning: the payload is not a JSON object"; !strings.Contains(errOut, want) {
		t.Errorf("stderr = %q, want %q", errOut, want)
	}
}

func TestSendDeliveryIDsAreFresh(t *testing.T) {
	target := newRecordingTarget(t, nil)
	for range 2 {
		if code, _, errOut := run(t, "send", "--event", "ping", "--target", target.URL); code != ExitOK {
			t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, errOut)
		}
	}
	reqs := target.requests()
	a, b := reqs[0].header.Get("X-GitHub-Delivery"), reqs[1].header.Get("X-GitHub-Delivery")
	if a == b {
		t.Errorf("two sends used the same delivery id %q", a)
	}
}

// TestSendToMiddleware sends built-in examples to a server running the
// webhooks middleware: the same secret verifies, another does not.
func TestSendToMiddleware(t *testing.T) {
	const secret = "middleware-shared-secret"
	wh, err := webhooks.New(webhooks.Options{Secret: secret, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	wh.OnAny(func(_ context.Context, e webhooks.Event) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e.Name+"."+e.Action())
		return nil
	})
	srv := httptest.NewServer(webhooks.NewMiddleware(wh, webhooks.MiddlewareOptions{Logger: discardLogger()}))
	t.Cleanup(srv.Close)
	target := srv.URL + "/api/github/webhooks"

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"same secret", []string{"--event", "pull_request.closed", "--secret", secret}, ExitOK, " 200 "},
		{"event with one example", []string{"--event", "issues", "--secret", secret}, ExitOK, "issues.opened"},
		{"other secret", []string{"--event", "push", "--secret", "not-the-secret"}, ExitFailure, " 400 "},
		{"no secret", []string{"--event", "push", "--retries", "0"}, ExitFailure, "Required headers missing: x-hub-signature-256"},
		{"signature removed", []string{"--event", "push", "--secret", secret, "--header", "X-Hub-Signature-256="}, ExitFailure, " 400 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{"send", "--target", target}, tt.args...)...)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.wantCode, errOut)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("stdout = %q, want it to contain %q", out, tt.wantOut)
			}
			if tt.wantCode != ExitOK && !strings.Contains(errOut, "answered 400 Bad Request") {
				t.Errorf("stderr = %q, want the target's status", errOut)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"pull_request.closed", "issues.opened"}; !slices.Equal(got, want) {
		t.Errorf("handlers saw %q, want %q", got, want)
	}
}

func TestSendToRelayChannel(t *testing.T) {
	relay := newRecordingTarget(t, nil)
	code, out, errOut := run(t, "send", "--event", "release.published", "--url", relay.URL+"/AbCdEf123", "--delivery-id", "dup-1")
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, errOut)
	}
	reqs := relay.requests()
	if len(reqs) != 1 || reqs[0].path != "/AbCdEf123" || reqs[0].header.Get("X-GitHub-Delivery") != "dup-1" {
		t.Fatalf("relay got %+v, want one POST to /AbCdEf123 with delivery dup-1", reqs)
	}
	if !strings.Contains(out, "→ relay") {
		t.Errorf("stdout = %q, want it to say the delivery went to the relay", out)
	}
	if !strings.Contains(errOut, "not signed") {
		t.Errorf("stderr = %q, want a note that the delivery is not signed", errOut)
	}
}

func TestSendForm(t *testing.T) {
	target := newRecordingTarget(t, nil)
	payload := writeFile(t, "p.json", []byte(`{"action":"created","a":"b c&d"}`))
	code, _, errOut := run(t, "send", "--event", "issue_comment.created", "--payload", payload, "--form",
		"--secret", "mysecret", "--target", target.URL)
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, errOut)
	}
	r := target.requests()[0]
	if want := "payload=%7B%22action%22%3A%22created%22%2C%22a%22%3A%22b+c%26d%22%7D"; string(r.body) != want {
		t.Errorf("body = %q, want %q", r.body, want)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		t.Errorf("Content-Type = %q, want application/x-www-form-urlencoded", ct)
	}
	if errOut != "" {
		t.Errorf("stderr = %q, want nothing", errOut)
	}
}

func TestSendPayloadFromStdin(t *testing.T) {
	target := newRecordingTarget(t, nil)
	code, _, errOut := runStdin(t, `{"action":"closed"}`, "send", "--event", "issues.opened", "--payload", "-", "--target", target.URL)
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, errOut)
	}
	if got := string(target.requests()[0].body); got != `{"action":"closed"}` {
		t.Errorf("body = %q, want stdin's bytes", got)
	}
	if want := `--event issues.opened asks for action "opened", but the payload's action is "closed"`; !strings.Contains(errOut, want) {
		t.Errorf("stderr = %q, want %q", errOut, want)
	}
}

func TestSendHeaderFlag(t *testing.T) {
	target := newRecordingTarget(t, nil)
	code, _, errOut := run(t, "send", "--event", "ping", "--target", target.URL,
		"--header", "X-GitHub-Hook-ID=501234567", "--header", "user-agent=curl/8", "--header", "Accept=",
		"--header", "X-List: a, b,c") // a comma is part of the value, never a second flag value
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, errOut)
	}
	h := target.requests()[0].header
	if h.Get("X-Github-Hook-Id") != "501234567" || h.Get("User-Agent") != "curl/8" || len(h["X-List"]) != 1 || h.Get("X-List") != "a, b,c" {
		t.Errorf("headers = %v, want the --header values", h)
	}
	if _, ok := h["Accept"]; ok {
		t.Errorf("Accept = %q, want it removed by --header Accept=", h.Get("Accept"))
	}
}

func TestSendUnknownEventWarns(t *testing.T) {
	target := newRecordingTarget(t, nil)
	payload := writeFile(t, "p.json", []byte(`{"action":"frobbed"}`))
	code, _, errOut := run(t, "send", "--event", "frobnicate.frobbed", "--payload", payload, "--target", target.URL)
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0 (an unknown name is a warning); stderr:\n%s", code, errOut)
	}
	if !strings.Contains(errOut, `warning: "frobnicate.frobbed" is not an event GitHub is known to send`) {
		t.Errorf("stderr = %q, want an unknown-event warning", errOut)
	}
	if got := target.requests()[0].header.Get("X-GitHub-Event"); got != "frobnicate" {
		t.Errorf("X-GitHub-Event = %q, want frobnicate", got)
	}
}

func TestSendTargetFailures(t *testing.T) {
	target := newRecordingTarget(t, func(int, recordedRequest) int { return http.StatusInternalServerError })
	code, out, errOut := run(t, "send", "--event", "push", "--retries", "0", "--target", target.URL)
	if code != ExitFailure {
		t.Errorf("exit code = %d, want 1", code)
	}
	if !strings.Contains(out, " 500 ") || !strings.Contains(out, "the target says no") {
		t.Errorf("stdout = %q, want the status and the response body", out)
	}
	if !strings.Contains(errOut, "answered 500 Internal Server Error") {
		t.Errorf("stderr = %q, want the failure", errOut)
	}
	if n := len(target.requests()); n != 1 {
		t.Errorf("target got %d requests with --retries 0, want 1", n)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	code, out, errOut = run(t, "send", "--event", "push", "--retries", "0", "--target", down.URL)
	if code != ExitFailure || !strings.Contains(out, "unreachable") || !strings.Contains(errOut, "could not reach") {
		t.Errorf("down target: exit %d, stdout %q, stderr %q; want 1, unreachable", code, out, errOut)
	}
}

func TestSendRetriesHonourRetryAfter(t *testing.T) {
	target := newRecordingTarget(t, func(n int, _ recordedRequest) int {
		if n == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	// By default send sends once, as GitHub does.
	if code, _, _ := run(t, "send", "--event", "push", "--target", target.URL); code != ExitFailure || len(target.requests()) != 1 {
		t.Fatalf("default: exit %d after %d requests, want 1 after one (no retries)", code, len(target.requests()))
	}
	target = newRecordingTarget(t, func(n int, _ recordedRequest) int {
		if n == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	// The first answer has no Retry-After; rest's backoff (at most 250 ms
	// for the first retry) applies.
	code, out, errOut := run(t, "send", "--event", "push", "--retries", "3", "--target", target.URL)
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0 after a retry; stdout %q stderr %q", code, out, errOut)
	}
	if n := len(target.requests()); n != 2 {
		t.Errorf("target got %d requests, want 2", n)
	}
}

func TestSendUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no event", []string{"--target", "http://127.0.0.1:1"}, "send needs --event NAME[.ACTION]"},
		{"no destination", []string{"--event", "push"}, "send needs somewhere to send to"},
		{"both destinations", []string{"--event", "push", "--target", "http://a", "--url", "http://b"}, "not both"},
		{"target without scheme", []string{"--event", "push", "--target", "localhost:3000"}, "did you mean http://localhost:3000?"},
		{"several examples", []string{"--event", "pull_request", "--target", "http://a"},
			"pull_request has several built-in examples; name one with --event: pull_request.closed, pull_request.opened"},
		{"event typo", []string{"--event", "pull_request.opend", "--target", "http://a"}, "--event pull_request.opend is not a GitHub event (did you mean pull_request.opened?)"},
		{"event with several actions", []string{"--event", "secret_scanning_alert", "--target", "http://a"}, "secret_scanning_alert has several actions; name one with --event: secret_scanning_alert.assigned, "},
		{"not a GitHub event.action", []string{"--event", "push.zzzzzzzzzz", "--target", "http://a"}, "no payload for push.zzzzzzzzzz: --payload FILE sends any event"},
		{"reserved name", []string{"--event", "*", "--target", "http://a"}, `--event "*" is not an event GitHub sends`},
		{"empty action", []string{"--event", "issues.", "--target", "http://a"}, "want NAME or NAME.ACTION"},
		{"bad header", []string{"--event", "push", "--target", "http://a", "--header", "X-Foo"}, "want NAME=VALUE"},
		{"bad header name", []string{"--event", "push", "--target", "http://a", "--header", "X Foo=bar"}, "not a valid header name"},
		{"missing payload file", []string{"--event", "push", "--target", "http://a", "--payload", "/nonexistent/p.json"}, "no such file"},
		{"argument", []string{"--event", "push", "--target", "http://a", "payload.json"}, "send takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{"send"}, tt.args...)...)
			if code != ExitUsage {
				t.Errorf("exit code = %d, want 2", code)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tt.wantErr)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
		})
	}
}

// captureSecret signs the deliveries in testdata/captures.
const captureSecret = "hookline-testdata-secret"

// latin1Payload is a body that is not valid UTF-8: an issue title with
// "café" in ISO-8859-1, as a misconfigured proxy might re-encode it.
var latin1Payload = []byte("{\"action\":\"edited\",\"issue\":{\"number\":1,\"title\":\"Greeting is missing a comma (caf\xe9)\"}," +
	"\"changes\":{\"title\":{\"from\":\"Greeting is missing a comma\"}},\"repository\":{\"full_name\":\"octo-org/hello-world\"},\"sender\":{\"login\":\"octocat\"}}")

// TestCaptureFiles makes testdata/captures with `hookline send` against a
// local server that saves each request with capture.Write. With -update it
// rewrites testdata/captures; otherwise it checks that the checked-in files
// are exactly what the commands make today.
func TestCaptureFiles(t *testing.T) {
	latin1 := writeFile(t, "latin1.json", latin1Payload)
	sends := []struct {
		at   string
		args []string
	}{
		{"09:00:01", []string{"--event", "ping", "--delivery-id", "048733b6-2af5-4fb8-b853-3c9170bc906c", "--secret", captureSecret}},
		{"09:10:00", []string{"--event", "issues.opened", "--delivery-id", "9fd8a7df-6d49-4a7d-8420-e1fb22ac94e1", "--secret", captureSecret}},
		{"09:15:00", []string{"--event", "issue_comment.created", "--form", "--delivery-id", "c269f52a-9819-457c-aed4-175e936d3d4e", "--secret", captureSecret}},
		{"09:20:00", []string{"--event", "issues.edited", "--payload", latin1, "--delivery-id", "43a40ec0-68b0-4789-8b45-e08e4950e383", "--secret", captureSecret}},
		{"09:45:00", []string{"--event", "pull_request.closed", "--delivery-id", "747e8866-c00e-4434-a16b-dc297ebe8744", "--secret", captureSecret}},
		{"09:45:01", []string{"--event", "push", "--delivery-id", "739e04e2-948f-4c3c-b120-f73ef1b196c9", "--secret", captureSecret}},
		{"09:47:30", []string{"--event", "workflow_run.completed", "--delivery-id", "3b79272f-f4be-4f8a-8d5e-34623bccca12"}},
	}
	dir := t.TempDir()
	var at time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := capture.File{Delivery: delivery.Delivery{ID: r.Header.Get("X-GitHub-Delivery"), Event: r.Header.Get("X-GitHub-Event"), ReceivedAt: at, Method: r.Method, Query: r.URL.RawQuery, Headers: r.Header.Clone(), Body: body}, Source: "hookline send"}
		payload := body
		if r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
			form, _ := url.ParseQuery(string(body))
			payload = []byte(form.Get("payload"))
		}
		d.Action = webhooks.Event{Payload: payload}.Action()
		if _, err := capture.Write(dir, d); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(srv.Close)
	for _, s := range sends {
		var err error
		if at, err = time.Parse(time.DateTime, "2026-01-15 "+s.at); err != nil {
			t.Fatal(err)
		}
		target := srv.URL + "/api/github/webhooks"
		if s.args[1] == "pull_request.closed" {
			target += "?source=hookline" // one capture with a query string
		}
		if code, _, errOut := run(t, append([]string{"send", "--target", target}, s.args...)...); code != ExitOK {
			t.Fatalf("send %v: exit code %d; stderr:\n%s", s.args, code, errOut)
		}
	}

	made, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkedIn := filepath.Join("..", "..", "testdata", "captures")
	if *update {
		old, _ := filepath.Glob(filepath.Join(checkedIn, "*.json"))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range made {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(checkedIn, filepath.Base(f)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	have, err := filepath.Glob(filepath.Join(checkedIn, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	base := func(paths []string) []string {
		out := make([]string, len(paths))
		for i, p := range paths {
			out[i] = filepath.Base(p)
		}
		return out
	}
	if !slices.Equal(base(made), base(have)) {
		t.Fatalf("testdata/captures holds %q, send makes %q (run go test ./internal/cli -run TestCaptureFiles -update)", base(have), base(made))
	}
	for _, f := range made {
		want, _ := os.ReadFile(filepath.Join(checkedIn, filepath.Base(f)))
		got, _ := os.ReadFile(f)
		if !bytes.Equal(got, want) {
			t.Errorf("testdata/captures/%s differs from what send makes now (run with -update if intended)\ngot:\n%s", filepath.Base(f), got)
		}
	}
}

// send's installation target headers are those GitHub sends with the
// payload: the App for an App's delivery, else the repository, else the
// organization.
func TestInstallationTarget(t *testing.T) {
	for _, tt := range []struct{ payload, typ, id string }{
		{`{"installation":{"id":5,"app_id":77},"repository":{"id":9}}`, "integration", "77"},
		{`{"installation":{"id":5},"repository":{"id":9},"organization":{"id":3}}`, "repository", "9"},
		{`{"organization":{"id":3},"sender":{"id":1}}`, "organization", "3"},
		{`{"zen":"Keep it logically awesome."}`, "", ""},
		{`not json`, "", ""},
	} {
		if typ, id := installationTarget([]byte(tt.payload)); typ != tt.typ || id != tt.id {
			t.Errorf("installationTarget(%s) = %q, %q; want %q, %q", tt.payload, typ, id, tt.typ, tt.id)
		}
	}
}

// send's warnings about a payload GitHub would not send: the size in
// words, not bytes; not an object; an action other than the one asked for.
func TestCheckPayloadWarnings(t *testing.T) {
	for _, tt := range []struct {
		payload []byte
		action  string
		want    string
	}{
		{[]byte(`{"a":"` + strings.Repeat("x", 30<<20) + `"}`), "", "the payload is 30 MiB; GitHub never sends more than 25 MiB"},
		{[]byte(`[1]`), "", "the payload is not a JSON object"},
		{[]byte(`{"action":"closed"}`), "opened", `asks for action "opened", but the payload's action is "closed"`},
		{[]byte(`{"\u0061ction":"opened"}`), "opened", ""},
	} {
		var got []string
		checkPayload(tt.payload, sendOptions{name: "issues." + tt.action, action: tt.action}, func(f string, a ...interface{}) {
			got = append(got, fmt.Sprintf(f, a...))
		})
		if tt.want == "" && len(got) != 0 || tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)) {
			t.Errorf("warnings %q, want %q", got, tt.want)
		}
	}
}

// Every event.action `hookline events` lists can be sent: each arrives
// with its event header, its action and a signature that verifies (what
// each payload holds is checked against the payload types by
// examples.TestBuildEveryEventAction).
func TestSendEveryEventAction(t *testing.T) {
	target := newRecordingTarget(t, nil)
	sent := 0
	for _, name := range webhooks.EmitterEventNames() {
		event, action, ok := strings.Cut(name, ".")
		if !ok {
			continue
		}
		if code, out, errOut := run(t, "send", "--event", name, "--secret", "s3cret", "--target", target.URL); code != ExitOK {
			t.Errorf("send --event %s: exit %d\n%s%s", name, code, out, errOut)
			continue
		}
		sent++
		reqs := target.requests()
		r := reqs[len(reqs)-1]
		var p struct{ Action string }
		json.Unmarshal(r.body, &p)
		if ok, _ := webhooks.Verify("s3cret", r.body, r.header.Get("X-Hub-Signature-256")); !ok || p.Action != action || r.header.Get("X-GitHub-Event") != event {
			t.Errorf("send --event %s: verified %v, action %q, event %q", name, ok, p.Action, r.header.Get("X-GitHub-Event"))
		}
	}
	if sent < 240 {
		t.Errorf("%d event.actions sent, want every one hookline events lists", sent)
	}
}

// Any event.action GitHub sends can be sent: issues.closed (no example: made
// from issues.opened), an event with no example at all, and an event with
// one action named alone. Each arrives signed, with its action, and a note
// says how it was made. Before, `send --event issues.closed` sent nothing:
// "no built-in example for issues.closed".
func TestSendAnyEventAction(t *testing.T) {
	for _, tt := range []struct{ arg, event, action, from string }{
		{"issues.closed", "issues", "closed", "made from issues.opened"},
		{"custom_property.created", "custom_property", "created", "made from the members of its payload type"},
		{"deployment_protection_rule", "deployment_protection_rule", "requested", "made from the members of its payload type"},
	} {
		target := newRecordingTarget(t, nil)
		code, out, errOut := run(t, "send", "--event", tt.arg, "--secret", "s3cret", "--target", target.URL)
		if code != ExitOK || !strings.Contains(errOut, "note: no example of "+tt.event+"."+tt.action+": "+tt.from) {
			t.Errorf("send --event %s: exit %d\nstdout %s\nstderr %s", tt.arg, code, out, errOut)
			continue
		}
		reqs := target.requests()
		if len(reqs) != 1 {
			t.Fatalf("send --event %s: the target got %d requests", tt.arg, len(reqs))
		}
		r := reqs[0]
		if ok, err := webhooks.Verify("s3cret", r.body, r.header.Get("X-Hub-Signature-256")); !ok || err != nil {
			t.Errorf("send --event %s: the signature does not verify: %v", tt.arg, err)
		}
		var p struct{ Action string }
		if err := json.Unmarshal(r.body, &p); err != nil || p.Action != tt.action || r.header.Get("X-GitHub-Event") != tt.event {
			t.Errorf("send --event %s: event %q, action %q (%v), want %s and %q", tt.arg, r.header.Get("X-GitHub-Event"), p.Action, err, tt.event, tt.action)
		}
	}
}
