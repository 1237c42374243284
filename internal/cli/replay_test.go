package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/rest"
)

// runStdin is run with stdin.
func runStdin(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(t.Context(), append([]string{"hookline"}, args...), strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// capturesDir is the checked-in set of capture files.
var capturesDir = filepath.Join("..", "..", "testdata", "captures")

// hideURL replaces a test server's URL in output with a fixed one.
func hideURL(s, u string) string { return strings.ReplaceAll(s, u, "http://TARGET") }

// The golden replays run in a synctest bubble: its clock stands still
// while a request is on the (real, loopback) network, so every target
// answers in 0µs on the trace, and the trace shows UTC.
func TestReplayGolden(t *testing.T) {
	traceZone = time.UTC
	t.Cleanup(func() { traceZone = nil })
	tests := []struct {
		name     string
		args     []string
		status   func(int, recordedRequest) int
		wantCode int
	}{
		{name: "replay.txt", args: []string{"--target", "TARGET/api/github/webhooks"}},
		{name: "replay-verify.txt", args: []string{"--secret", captureSecret, "--target", "TARGET/hook"}, wantCode: ExitFailure},
		{name: "replay-failures.txt", args: []string{"--retries", "0", "--target", "TARGET"}, wantCode: ExitFailure,
			status: func(_ int, r recordedRequest) int {
				switch r.header.Get("X-GitHub-Event") {
				case "push":
					return http.StatusInternalServerError
				case "issues":
					return http.StatusBadRequest
				}
				return http.StatusOK
			}},
		{name: "replay-dry-run.txt", args: []string{"--secret", "not-the-target-secret", "--resign"}},
		{name: "replay-json.txt", args: []string{"--json", "--target", "TARGET"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				target := newRecordingTarget(t, tt.status)
				args := []string{"replay"}
				for _, a := range tt.args {
					args = append(args, strings.ReplaceAll(a, "TARGET", target.URL))
				}
				code, out, errOut := run(t, append(args, capturesDir)...)
				if code != tt.wantCode {
					t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.wantCode, errOut)
				}
				golden(t, tt.name, []byte(hideURL("$ hookline replay "+strings.Join(tt.args, " ")+" testdata/captures\n"+
					"--- stdout\n"+out+"--- stderr\n"+errOut, target.URL)))
			})
		})
	}
}

// writeCapture writes d as a capture file called name in dir.
func writeCapture(t *testing.T, dir, name string, d capture.File) string {
	t.Helper()
	data, err := capture.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReplayOrderIsReceivedTime(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	// File names sort the other way round from the received times.
	for i, name := range []string{"a.json", "b.json", "c.json", "d.json"} {
		writeCapture(t, dir, name, capture.File{Delivery: delivery.Delivery{ID: name, Event: "ping", ReceivedAt: at.Add(time.Duration(10-i) * time.Minute), Headers: http.Header{"X-Github-Delivery": {name}}, Body: []byte(`{}`)}})
	}
	extra := writeCapture(t, t.TempDir(), "z.json", capture.File{Delivery: delivery.Delivery{ID: "z.json", Event: "ping", ReceivedAt: at.Add(5 * time.Minute), Headers: http.Header{"X-Github-Delivery": {"z.json"}}, Body: []byte(`{}`)}})
	target := newRecordingTarget(t, nil)
	code, _, errOut := run(t, "replay", "--target", target.URL, dir, extra)
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, errOut)
	}
	var got []string
	for _, r := range target.requests() {
		got = append(got, r.header.Get("X-GitHub-Delivery"))
	}
	if want := []string{"z.json", "d.json", "c.json", "b.json", "a.json"}; !slices.Equal(got, want) {
		t.Errorf("replay order = %q, want %q", got, want)
	}
}

func TestReplayHeadersAndBodyExact(t *testing.T) {
	body := []byte("Hello, World!\xff\x00\r\n") // not UTF-8: stored as base64
	path := writeCapture(t, t.TempDir(), "d.json", capture.File{Delivery: delivery.Delivery{ID: "exact", Event: "push", ReceivedAt: time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC), Method: "PUT", Query: "b=2&a=1", Headers: http.Header{
		"Content-Type":        {"application/octet-stream"},
		"X-Github-Event":      {"push"},
		"X-Github-Delivery":   {"exact"},
		"X-Hub-Signature-256": {"sha256=0000000000000000000000000000000000000000000000000000000000000000"},
		"X-Hub-Signature":     {"sha1=0000000000000000000000000000000000000000"},
		"X-Custom":            {"one", "two"},
		"Connection":          {"keep-alive, X-Hop"},
		"X-Hop":               {"per-connection"},
		"Keep-Alive":          {"timeout=5"},
		"Transfer-Encoding":   {"chunked"},
		"Content-Length":      {"999"},
		"Host":                {"relay.example"},
	}, Body: body}})
	target := newRecordingTarget(t, nil)
	code, _, errOut := run(t, "replay", "--target", target.URL+"/hook?x=0", path)
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, errOut)
	}
	r := target.requests()[0]
	if r.method != "PUT" || r.path != "/hook" || r.query != "x=0&b=2&a=1" {
		t.Errorf("request = %s %s?%s, want PUT /hook?x=0&b=2&a=1 (the saved query as it was)", r.method, r.path, r.query)
	}
	if !bytes.Equal(r.body, body) {
		t.Errorf("body = %q, want %q", r.body, body)
	}
	for name, want := range map[string][]string{
		"Content-Type":        {"application/octet-stream"},
		"X-Custom":            {"one", "two"},
		"X-Hub-Signature-256": {"sha256=0000000000000000000000000000000000000000000000000000000000000000"},
		"X-Hub-Signature":     {"sha1=0000000000000000000000000000000000000000"},
		"X-Github-Delivery":   {"exact"},
		"Content-Length":      {"17"},
		"X-Hop":               nil,
		"Keep-Alive":          nil,
		"Transfer-Encoding":   nil,
	} {
		if got := r.header.Values(name); !slices.Equal(got, want) {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
}

func TestReplayResign(t *testing.T) {
	path := writeCapture(t, t.TempDir(), "d.json", capture.File{Delivery: delivery.Delivery{ID: "resign", Event: "push", ReceivedAt: time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC), Headers: http.Header{
		"X-Hub-Signature-256": {"sha256=0000000000000000000000000000000000000000000000000000000000000000"},
		"X-Hub-Signature":     {"sha1=0000000000000000000000000000000000000000"},
	}, Body: []byte("Hello, World!")}})
	target := newRecordingTarget(t, nil)
	code, out, errOut := run(t, "replay", "--secret", "It's a Secret to Everybody", "--resign", "--target", target.URL, path)
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0; stdout %q stderr:\n%s", code, out, errOut)
	}
	h := target.requests()[0].header
	if got, want := h.Get("X-Hub-Signature-256"), "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"; got != want {
		t.Errorf("X-Hub-Signature-256 = %q, want %q", got, want)
	}
	if got := h.Values("X-Hub-Signature"); got != nil {
		t.Errorf("X-Hub-Signature = %q, want it removed when re-signing", got)
	}
}

// A file that cannot be read is named on its own line and skipped; the
// others are still sent, and the exit code says something failed.
func TestReplaySkipsUnreadableFilesAndSendsTheRest(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "future.json")
	if err := os.WriteFile(bad, []byte(`{"version":2,"event":"push"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	target := newRecordingTarget(t, nil)
	code, out, errOut := run(t, "replay", "--target", target.URL, capturesDir, dir)
	if code != ExitFailure {
		t.Errorf("exit code = %d, want 1", code)
	}
	if want := "skipped: " + bad + ": unsupported capture file version 2"; !strings.Contains(errOut, want) {
		t.Errorf("stderr = %q, want it to contain %q", errOut, want)
	}
	if want := "hookline: 1 capture file could not be read"; !strings.Contains(errOut, want) {
		t.Errorf("stderr = %q, want it to contain %q", errOut, want)
	}
	if n := len(target.requests()); n != 7 || strings.Count(out, "→ 200") != 7 {
		t.Errorf("%d requests, stdout %q; want the 7 readable captures sent", n, out)
	}
}

// With nothing readable, the error is the file's own.
func TestReplayNothingReadable(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "future.json")
	if err := os.WriteFile(bad, []byte(`{"version":2,"event":"push"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, "replay", "--target", "http://127.0.0.1:1", bad)
	if code != ExitFailure {
		t.Errorf("exit code = %d, want 1", code)
	}
	if want := "hookline: " + bad + ": unsupported capture file version 2"; !strings.Contains(errOut, want) {
		t.Errorf("stderr = %q, want it to contain %q", errOut, want)
	}
}

func TestReplayUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no paths", nil, "replay needs capture files or directories"},
		{"resign without secret", []string{"--resign", capturesDir}, "--resign needs the secret"},
		{"bad target", []string{"--target", "localhost:3000", capturesDir}, "did you mean http://localhost:3000?"},
		{"bad concurrency", []string{"--concurrency", "0", capturesDir}, "--concurrency 0"},
		{"negative retries", []string{"--retries", "-1", capturesDir}, "--retries -1"},
	}
	t.Setenv(secretEnv, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, append([]string{"replay"}, tt.args...)...)
			if code != ExitUsage {
				t.Errorf("exit code = %d, want 2", code)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tt.wantErr)
			}
		})
	}
}

func TestReplayMissingPath(t *testing.T) {
	code, _, errOut := run(t, "replay", "/nonexistent/captures")
	if code != ExitFailure || !strings.Contains(errOut, "/nonexistent/captures") {
		t.Errorf("exit %d, stderr %q; want 1 naming the path", code, errOut)
	}
}

func TestReplayConcurrency(t *testing.T) {
	target := newRecordingTarget(t, nil)
	code, out, errOut := run(t, "replay", "--concurrency", "4", "--target", target.URL, capturesDir)
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, errOut)
	}
	if n := len(target.requests()); n != 7 {
		t.Errorf("target got %d requests, want 7", n)
	}
	if n := strings.Count(out, "\n"); n != 7 {
		t.Errorf("stdout has %d lines, want 7:\n%s", n, out)
	}
	if !strings.Contains(errOut, "summary: 7 of 7 delivered") {
		t.Errorf("stderr = %q, want the summary", errOut)
	}
}

// A 5xx may come from a handler that ran: by default it is not sent again
// (a handler with side effects would run twice, where GitHub sends once);
// --retries N asks for it.
func TestReplayRetriesA5xxOnlyWhenAsked(t *testing.T) {
	path := filepath.Join(capturesDir, "20260115T090001.000Z-ping-048733b6-2af5-4fb8-b853-3c9170bc906c.json")
	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
		wantReqs int
	}{
		{"default", nil, ExitFailure, 1},
		{"--retries 1", []string{"--retries", "1"}, ExitOK, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			target := newRecordingTarget(t, func(n int, _ recordedRequest) int {
				if n == 0 {
					return http.StatusInternalServerError
				}
				return http.StatusOK
			})
			code, _, errOut := run(t, append(append([]string{"replay", "--target", target.URL}, tt.args...), path)...)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.wantCode, errOut)
			}
			if n := len(target.requests()); n != tt.wantReqs {
				t.Errorf("target got %d requests, want %d", n, tt.wantReqs)
			}
		})
	}
}

// A target that is not up yet is waited for, with a line per retry; the
// delivery goes once it listens.
func TestReplayWaitsForATargetNotUpYet(t *testing.T) {
	addr := closedAddr(t) // refused until the target starts below
	path := filepath.Join(capturesDir, "20260115T090001.000Z-ping-048733b6-2af5-4fb8-b853-3c9170bc906c.json")
	var stdout, stderr relaytest.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Run(t.Context(), []string{"hookline", "replay", "--target", "http://" + addr, path}, strings.NewReader(""), &stdout, &stderr)
	}()
	stderr.WaitFor(t, "retrying in")
	if !strings.Contains(stderr.String(), "the target is not up (connection refused); retrying in") || !strings.Contains(stderr.String(), "(retry 1 of 7)") {
		t.Fatalf("stderr = %q, want a countdown line for the refused connection", stderr.String())
	}
	target := newRecordingTarget(t, nil)
	target.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: target.Config.Handler}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	select {
	case c := <-code:
		if c != ExitOK || len(target.requests()) != 1 {
			t.Errorf("exit %d with %d requests, want 0 with one; stderr:\n%s", c, len(target.requests()), stderr.String())
		}
	case <-time.After(relaytest.HangGuard):
		t.Fatal("replay did not end once the target was up")
	}
}

func TestReplayProgressBar(t *testing.T) {
	old := stderrIsTerminal
	stderrIsTerminal = func(*streams) bool { return true }
	t.Cleanup(func() { stderrIsTerminal = old })
	target := newRecordingTarget(t, nil)

	code, _, errOut := run(t, "replay", "--target", target.URL, capturesDir)
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, errOut)
	}
	for _, want := range []string{"\r\x1b[Kreplaying [                        ] 0/7", "\r\x1b[Kreplaying [========================] 7/7\r\x1b[K"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr = %q, want it to contain %q", errOut, want)
		}
	}

	// Five files or fewer: no bar.
	code, _, errOut = run(t, "replay", "--target", target.URL, filepath.Join(capturesDir, "20260115T090001.000Z-ping-048733b6-2af5-4fb8-b853-3c9170bc906c.json"))
	if code != ExitOK || strings.Contains(errOut, "\r") {
		t.Errorf("exit %d, stderr %q: want no progress bar for one file", code, errOut)
	}
}

func TestProgressBarNotOnPipes(t *testing.T) {
	s := &streams{err: &bytes.Buffer{}}
	if stderrIsTerminal(s) {
		t.Errorf("stderrIsTerminal(buffer) = true, want false")
	}
}

func TestReplayInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	target := newRecordingTarget(t, func(int, recordedRequest) int {
		cancel() // Ctrl-C while the first delivery is being sent
		return http.StatusOK
	})
	var out, errOut bytes.Buffer
	code := Run(ctx, []string{"hookline", "replay", "--target", target.URL, capturesDir}, strings.NewReader(""), &out, &errOut)
	if code != ExitFailure {
		t.Errorf("exit code = %d, want 1", code)
	}
	if n := len(target.requests()); n != 1 {
		t.Errorf("target got %d requests, want 1 (nothing after the interrupt)", n)
	}
	if want := "hookline: interrupted: 6 of 7 deliveries not replayed\n"; !strings.HasSuffix(errOut.String(), want) {
		t.Errorf("stderr = %q, want it to end with %q", errOut.String(), want)
	}
	if !strings.Contains(errOut.String(), "6 not replayed (interrupted)") {
		t.Errorf("stderr = %q, want the summary to count what was not replayed", errOut.String())
	}
}

// replay runs deliveries through forward's pipeline: plugins run, a
// delivery id saved twice is sent once, and with --failed-dir a delivery
// the target still does not take is saved again.
func TestReplayPipeline(t *testing.T) {
	testenv.Tools(t, "sh", "touch") // --exec's
	dir := t.TempDir()
	at := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	for i, name := range []string{"a.json", "b.json", "c.json"} {
		id := name
		if name == "c.json" {
			id = "a.json" // the same delivery saved twice
		}
		writeCapture(t, dir, name, capture.File{Delivery: delivery.Delivery{ID: id, Event: "issues", ReceivedAt: at.Add(time.Duration(i) * time.Minute), Headers: http.Header{"X-Github-Delivery": {id}, "X-Github-Event": {"issues"}, "Content-Type": {"application/json"}}, Body: []byte(`{"action":"opened","n":"` + name + `"}`)}})
	}
	target := newRecordingTarget(t, func(_ int, r recordedRequest) int {
		if strings.Contains(string(r.body), "b.json") {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	marks := t.TempDir()
	failed := filepath.Join(t.TempDir(), "failed")
	code, out, errOut := run(t, "replay", "--target", target.URL, "--retries", "0", "--failed-dir", failed,
		"--exec", `touch "`+marks+`/$HOOKLINE_DELIVERY"`, dir)
	if code != ExitFailure {
		t.Errorf("exit code = %d, want %d (one target failure); stderr:\n%s", code, ExitFailure, errOut)
	}
	if n := len(target.requests()); n != 2 {
		t.Errorf("the target got %d requests, want 2 (a.json once, b.json)\nstdout:\n%s", n, out)
	}
	for _, id := range []string{"a.json", "b.json"} {
		if _, err := os.Stat(filepath.Join(marks, id)); err != nil {
			t.Errorf("the --exec plugin did not run for %s: %v", id, err)
		}
	}
	saved, err := capture.LoadAll(failed)
	if len(saved) != 1 || len(err) != 0 || saved[0].ID != "b.json" {
		t.Errorf("--failed-dir holds %d deliveries (%v), want b.json alone", len(saved), err)
	}
}

// What a plugin prints reaches the terminal with its control characters
// escaped: a payload cannot clear the screen or retitle the window through
// a plugin that echoes it.
func TestPluginOutputIsEscaped(t *testing.T) {
	dir := t.TempDir()
	writeCapture(t, dir, "a.json", capture.File{Delivery: delivery.Delivery{ID: "a", Event: "push", Headers: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{}`)}})
	target := newRecordingTarget(t, nil)
	code, _, errOut := run(t, "replay", "--no-color", "--target", target.URL, "--exec", `printf 'before\033[2J\033]0;owned\007after\n'`, dir)
	if code != ExitOK {
		t.Fatalf("exit code = %d; stderr:\n%s", code, errOut)
	}
	if strings.ContainsAny(errOut, "\x1b\x07") || !strings.Contains(errOut, `before\x1b[2J\x1b]0;owned\x07after`) {
		t.Errorf("stderr %q: want the plugin's control characters escaped", errOut)
	}
}

// A webhook payload given to replay (not a capture file) gets the command
// that sends it.
func TestReplayPayloadIsNotACapture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(path, []byte(`{"action":"opened"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, "replay", path)
	want := `malformed capture file: no "version" field (not a capture file); a webhook payload? send it with: hookline send --event EVENT --payload FILE`
	if code != ExitFailure || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}
}

// A delivery the failed folder kept for a bad signature says so when a
// replay does not verify it: it is never sent on without a word.
func TestReplayShowsWhyACaptureWasKept(t *testing.T) {
	dir := t.TempDir()
	_, err := capture.Write(dir, capture.File{Delivery: delivery.Delivery{ID: "0f3a9c1e-0000-4000-8000-000000000001", Event: "ping", ReceivedAt: time.Now(), Method: http.MethodPost, Headers: http.Header{"Content-Type": {"application/json"}, "X-Hub-Signature-256": {"sha256=" + strings.Repeat("0", 64)}}, Body: []byte(`{"zen":"x"}`)}, Note: "not passed on: the signature does not match the body and secret (replay it with the right secret)"})
	if err != nil {
		t.Fatal(err)
	}
	target := newRecordingTarget(t, nil)
	code, out, errOut := run(t, "replay", "--target", target.URL, dir)
	if code != ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	for _, want := range []string{"kept because: not passed on: the signature does not match", "sent unverified: give --secret-file FILE to check it first"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

// replay --inspect serves the inspector with the batch's results, and keeps
// it open (for a look and a replay) until the command's context ends.
func TestReplayInspect(t *testing.T) {
	target := newRecordingTarget(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr relaytest.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, []string{"hookline", "replay", "--target", target.URL, "--inspect", "127.0.0.1:0", capturesDir}, strings.NewReader(""), &stdout, &stderr)
	}()
	stderr.WaitFor(t, "Ctrl-C quits")
	m := regexp.MustCompile(`inspector: (http://127\.0\.0\.1:\d+)/\?token=(\w+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no inspector URL, or it did not stay open:\n%s", stderr.String())
	}
	ids := inspectorIDs(t, m[1], m[2])
	if n := len(target.requests()); n == 0 || len(ids) != n {
		t.Errorf("the inspector lists %d deliveries; the target got %d", len(ids), n)
	}
	select {
	case <-code:
		t.Fatal("replay --inspect ended before its context")
	default:
	}
	cancel()
	select {
	case <-code:
	case <-time.After(relaytest.HangGuard):
		t.Fatal("replay --inspect did not end with its context")
	}
}

// --timing original sends a scenario with the gaps it was received with,
// and 10x ten times faster: replayTimed in a synctest bubble, the target
// an in-memory transport (a loopback server's goroutines would keep the
// bubble's clock from moving), so the gaps are exact.
func TestReplayTiming(t *testing.T) {
	at := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	var list []*delivery.Delivery
	for i, offset := range []time.Duration{0, 5 * time.Second, 65 * time.Second} {
		id := fmt.Sprint("t", i)
		list = append(list, &delivery.Delivery{ID: id, Event: "ping", ReceivedAt: at.Add(offset), Headers: http.Header{"X-Github-Delivery": {id}}, Body: []byte(`{}`)})
	}
	for speed, want := range map[float64][]time.Duration{1: {0, 5 * time.Second, 65 * time.Second}, 10: {0, 500 * time.Millisecond, 6500 * time.Millisecond}} {
		synctest.Test(t, func(t *testing.T) {
			var times []time.Duration
			start := time.Now()
			target := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				times = append(times, time.Since(start))
				return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Header: http.Header{}, Request: r}, nil
			})
			c, err := proxy.New(proxy.Options{Targets: []proxy.Target{{URL: "http://target.test/hook"}}, HTTPClient: &rest.Client{HTTPClient: &http.Client{Transport: target}}, DedupWindow: -1})
			if err != nil {
				t.Fatal(err)
			}
			var errOut bytes.Buffer
			replayTimed(t.Context(), c, list, speed, &streams{err: &errOut})
			if !slices.Equal(times, want) {
				t.Errorf("speed %v: sent at %v, want %v", speed, times, want)
			}
			if speed == 1 && !strings.Contains(errOut.String(), "next delivery in 1m0s (3 of 3)") {
				t.Errorf("the wait was not announced:\n%s", errOut.String())
			}
		})
	}
	for _, bad := range []string{"fast", "0x", "-2x"} {
		if code, _, errOut := run(t, "replay", "--timing", bad, capturesDir); code != ExitUsage || !strings.Contains(errOut, "--timing") {
			t.Errorf("--timing %s: exit %d, %q", bad, code, errOut)
		}
	}
	if code, _, errOut := run(t, "replay", "--timing", "original", "--concurrency", "2", capturesDir); code != ExitUsage || !strings.Contains(errOut, "one at a time") {
		t.Errorf("--timing with --concurrency: exit %d, %q", code, errOut)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// inspectorIDs returns the delivery ids the inspector at base lists, read
// with the run's token.
func inspectorIDs(t *testing.T, base, token string) []string {
	t.Helper()
	resp, err := http.Get(base + "/api/deliveries?token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Deliveries []struct {
			DeliveryID string `json:"delivery_id"`
		} `json:"deliveries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatalf("the inspector's list: %v", err)
	}
	ids := make([]string, len(list.Deliveries))
	for i, d := range list.Deliveries {
		ids[i] = d.DeliveryID
	}
	return ids
}
