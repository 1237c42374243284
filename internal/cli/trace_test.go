package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/webhooks"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// golden compares got with the named file under testdata/golden, or
// rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("..", "..", "testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update if the change is intended)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// traceResults are deliveries covering every part of a trace line.
func traceResults() []proxy.Result {
	at := time.Now().UTC().Truncate(24 * time.Hour).Add(10 * time.Hour) // today 10:00 (synctest: 2000-01-01)
	d := func(id, event string, body string) *delivery.Delivery {
		return &delivery.Delivery{
			ID: id, Event: event, EventID: "7", BodySource: delivery.BodyBase64, Body: []byte(body),
			Headers: http.Header{
				"X-Github-Event":      {event},
				"X-Github-Delivery":   {id},
				"X-Hub-Signature-256": {"sha256=abc"},
				"Authorization":       {"Bearer ghp_secret_token"},
				"Content-Type":        {"application/json"},
			},
		}
	}
	return []proxy.Result{
		{
			Delivery: d("72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues", `{"action":"opened","issue":{"number":1}}`), Received: at,
			Action: "opened", Repository: "octo-org/hello-world", Sender: "octocat",
			Verification: proxy.VerificationPassed,
			Handlers:     []proxy.HandlerResult{{Name: "issues.opened", Duration: 12 * time.Millisecond}},
			Targets:      []*proxy.TargetResult{{URL: "http://127.0.0.1:3000/hook", Status: 200, Duration: 3200 * time.Microsecond}},
		},
		{
			Delivery: d("9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", "push", `{"ref":"refs/heads/main"}`), Received: at.Add(time.Second),
			Repository: "octo-org/hello-world", Sender: "octocat",
			Verification: proxy.VerificationFailed, VerifyNote: "signature does not match the body and secret: check --secret against the webhook's secret on GitHub",
		},
		{
			Delivery: d("1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed", "pull_request", `{"action":"closed"}`), Received: at.Add(2 * time.Second),
			Action: "closed", Verification: proxy.VerificationSkipped,
			Handlers:   []proxy.HandlerResult{{Name: "_any", Err: errors.New("plugin failed: _any: exit status 3: database is locked"), Duration: time.Millisecond}},
			HandlerErr: errors.New("plugin failed: _any: exit status 3: database is locked"),
			Targets: []*proxy.TargetResult{{URL: "http://127.0.0.1:3000/hook", Status: 503, Duration: 1500 * time.Millisecond, Attempts: make([]proxy.Attempt, 4), Body: []byte("maintenance until 10:30\nretry later\n"),
				Header:     http.Header{"Content-Type": {"text/plain"}, "Retry-After": {"120"}, "Set-Cookie": {"session=abc"}},
				FailedFile: "failed/20261122T100002.000Z-pull_request-1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed.json"}},
		},
		{
			Delivery: d("6ec0bd7f-11c0-43da-975e-2a8ad9ebae0b", "workflow_run", `{"action":"completed"}`), Received: at.Add(3 * time.Second),
			Action: "completed", Verification: proxy.VerificationPassed, VerifyNote: "legacy SHA-1 signature (X-Hub-Signature): the sender does not send X-Hub-Signature-256",
			Targets: []*proxy.TargetResult{{URL: "http://127.0.0.1:3000/hook", Err: errors.New(`rest: Post "http://127.0.0.1:3000/hook": dial tcp 127.0.0.1:3000: connect: connection refused (gave up after 4 attempts)`), Duration: 900 * time.Microsecond,
				FailedErr: errors.New("saving delivery 6ec0bd7f: write: no space left on device")}},
			SaveErr: errors.New("saving delivery 6ec0bd7f: write: no space left on device"),
		},
		{
			Delivery: d("0e2c3e4a", "star", `{"action":"created"}`), Received: at.Add(4 * time.Second),
			Action: "created", Filtered: true,
		},
		{
			// A 4xx is kept for a replay too (a wrong path, fixed by
			// replaying to the right URL).
			Delivery: d("a3bb189e", "release", `{"action":"published"}`), Received: at.Add(5 * time.Second),
			Action: "published", Verification: proxy.VerificationPassed,
			Targets: []*proxy.TargetResult{{URL: "http://127.0.0.1:3000/hook", Status: 404, Duration: 2 * time.Millisecond,
				FailedFile: "failed/20261122T100005.000Z-release-a3bb189e.json"}},
		},
		{
			Delivery: d("72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues", `{"action":"opened","issue":{"number":1}}`), Received: at.Add(6 * time.Second),
			Action: "opened", Repository: "octo-org/hello-world", Sender: "octocat", Duplicate: true,
		},
		{
			Delivery: d("72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues", `{"action":"opened","issue":{"number":1}}`), Received: at.Add(7 * time.Second),
			Action: "opened", Repository: "octo-org/hello-world", Sender: "octocat", Redelivery: true,
			Verification: proxy.VerificationPassed,
			Targets:      []*proxy.TargetResult{{URL: "http://127.0.0.1:3000/hook", Status: 200, Duration: 2900 * time.Microsecond}},
		},
		{
			// Hostile strings from a payload and headers: a CR that would
			// rewrite the line, an OSC 52 clipboard write, a newline that
			// would forge a second line, a C1 CSI. All are escaped.
			Delivery: func() *delivery.Delivery {
				d := d("e5c1\r\x1b[2K", "issues", `{"action":"opened"}`)
				d.Headers.Set("X-Evil", "a\x1b]52;c;ZXZpbA==\x07b")
				return d
			}(),
			Received: at.Add(8 * time.Second), Action: "opened\n10:00:08 00000000 ping ✓ verified → 200",
			Repository: "octo-org/\x1b]52;c;ZXZpbA==\x07repo", Sender: "mallory\r\x1b[32m✓ verified\u009b0m",
			Verification: proxy.VerificationFailed, VerifyNote: "signature does not match",
		},
		{
			// A handler that works before it answers: 200 after 20 s is a
			// failed delivery for GitHub, which waits 10 s.
			Delivery: d("c0ffee00", "issues", `{"action":"labeled"}`), Received: at.Add(10 * time.Second),
			Action: "labeled", Verification: proxy.VerificationPassed,
			Targets: []*proxy.TargetResult{{URL: "http://127.0.0.1:3000/hook", Status: 200, Duration: 20010 * time.Millisecond}},
		},
		{
			// The one behind it waited.
			Delivery: d("c0ffee01", "issues", `{"action":"closed"}`), Received: at.Add(11 * time.Second),
			Action: "closed", Verification: proxy.VerificationPassed, Waited: 18200 * time.Millisecond,
			Targets: []*proxy.TargetResult{{URL: "http://127.0.0.1:3000/hook", Status: 200, Duration: 3 * time.Millisecond}},
		},
		{
			// In flight at the second Ctrl-C: sent, so it may have run the
			// handler (not "not delivered").
			Delivery: d("d00dfeed", "issues", `{"action":"edited"}`), Received: at.Add(12 * time.Second),
			Action: "edited", Verification: proxy.VerificationPassed,
			Targets: []*proxy.TargetResult{{URL: "http://127.0.0.1:3000/hook", Err: context.Canceled, Interrupted: true, Duration: 2 * time.Second, Attempts: make([]proxy.Attempt, 1),
				FailedFile: "failed/20261122T100012.000Z-issues-d00dfeed.json"}},
		},
		{
			// Replayed from the inspector.
			Delivery: d("0ddba11", "issues", `{"action":"opened"}`), Received: at.Add(13 * time.Second),
			Action: "opened", Verification: proxy.VerificationPassed, Replay: true,
			Targets: []*proxy.TargetResult{{URL: "http://127.0.0.1:3000/hook", Status: 200, Duration: time.Millisecond}},
		},
		{
			// A gosmee relay recorded a PUT: the trace shows the method.
			Delivery: func() *delivery.Delivery {
				d := d("5f0e0c8a", "ping", `{"zen":"x"}`)
				d.Method = http.MethodPut
				return d
			}(),
			Received: at.Add(9 * time.Second), Verification: proxy.VerificationSkipped,
			Targets: []*proxy.TargetResult{{URL: "http://127.0.0.1:3000/hook", Status: 200, Duration: time.Millisecond}},
		},
	}
}

func TestTraceGolden(t *testing.T) {
	stats := proxy.Stats{Received: 8, Filtered: 1, Verified: 4, VerifyFailed: 1, Unverified: 1, HandlerFails: 1, Forwarded: 2, TargetFails: 3,
		Saved: 5, SaveFails: 2, Duplicates: 1, Redeliveries: 1, Replayed: 1, FailedSaved: 1, Lost: 1, Slow: 1, GitHubFailed: 4}
	tests := []struct {
		file           string
		color, jsonOut bool
		verbose        bool
	}{
		{"trace.txt", false, false, false},
		{"trace-color.txt", true, false, false},
		{"trace-verbose.txt", false, false, true},
		{"trace.jsonl", false, true, false},
	}
	for _, tt := range tests {
		// In a synctest bubble, so that "today" (for the date column) is
		// the bubble's fixed day, the day of traceResults.
		t.Run(tt.file, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var out, info bytes.Buffer
				tr := newTracer(&out, &info, tt.color, tt.jsonOut, tt.verbose, time.UTC)
				tr.forward = true
				tr.state(proxy.StateChange{State: proxy.StateConnecting, URL: "http://127.0.0.1:3333/abc", Attempt: 1})
				tr.state(proxy.StateChange{State: proxy.StateConnected, URL: "http://127.0.0.1:3333/abc"})
				for _, r := range traceResults() {
					tr.result(r)
				}
				tr.state(proxy.StateChange{State: proxy.StateDisconnected, URL: "http://127.0.0.1:3333/abc", Attempt: 1, Err: errors.New("EOF"), RetryIn: 250 * time.Millisecond})
				tr.summary(stats, summaryInfo{saveDir: "captures", failedDir: "captures/failed", target: "http://127.0.0.1:3000/hook?token=abc",
					stateFile: "state/4f1c2d3e4a5b6c7d.json", checkpoint: "8"})
				got := append(out.Bytes(), []byte("--- stderr ---\n")...)
				got = append(got, info.Bytes()...)
				golden(t, tt.file, got)
				if strings.Contains(string(got), "ghp_secret_token") {
					t.Error("the trace printed an Authorization value")
				}
			})
		})
	}
}

// A relay that accepts the connection and does not answer: after 10 s the
// trace says so, once; an answer before then says nothing of the kind. On
// synctest's clock.
func TestTraceSaysWhenARelayDoesNotAnswer(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer time.Duration // 0: never
		want   bool
	}{{"no answer", 0, true}, {"an answer after 5s", 5 * time.Second, false}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var info relaytest.Buffer
				tr := newTracer(io.Discard, &info, false, false, false, time.UTC)
				tr.state(proxy.StateChange{State: proxy.StateConnecting, URL: "http://relay.test/c", Attempt: 1})
				if tt.answer > 0 { // the relay answers then
					time.AfterFunc(tt.answer, func() {
						tr.state(proxy.StateChange{State: proxy.StateConnected, URL: "http://relay.test/c", Attempt: 1})
					})
				}
				time.Sleep(time.Minute) // simulated (synctest)
				synctest.Wait()
				got := strings.Count(info.String(), "no answer from http://relay.test/c after 10s; still waiting")
				if (got == 1) != tt.want || got > 1 {
					t.Errorf("info:\n%s\nwant the no-answer line %v (once)", info.String(), tt.want)
				}
			})
		})
	}
}

func TestFamiliesColourEveryKnownEvent(t *testing.T) {
	// Every family has a colour, and the families split the catalogue:
	// no known event falls through to a family without one.
	tr := newTracer(&bytes.Buffer{}, &bytes.Buffer{}, true, false, false, time.UTC)
	counts := map[string]int{}
	for _, name := range webhooks.EmitterEventNames() {
		event, _, _ := strings.Cut(name, ".")
		f := family(event)
		if tr.families[f] == nil {
			t.Fatalf("family(%q) = %q has no colour", event, f)
		}
		counts[f]++
	}
	for _, f := range []string{"issues", "pull", "code", "ci", "release", "security", "admin"} {
		if counts[f] == 0 {
			t.Errorf("no known event is in family %q", f)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		800 * time.Microsecond:  "800µs",
		3200 * time.Microsecond: "3.2ms",
		1500 * time.Millisecond: "1.50s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// visibleWidth counts the runes a terminal shows: colour escapes as
// fatih/color writes them are left out, anything else that merely starts
// like one is text.
func TestVisibleWidth(t *testing.T) {
	for s, want := range map[string]int{
		"":                           0,
		"push 200":                   8,
		"\x1b[1;31mred\x1b[0m":       3,
		"\x1b[mé…":                   2,
		"a\x1b[32m\x1b[0m":           1,
		"\x1b[":                      2, // no final m: ESC and [ are shown as runes
		"\x1b[12x":                   5,
		"a\x1b[31":                   5,
		"\xff\xfe":                   2,
		"\x1b[38;5;208mX\x1b[39;49m": 1,
	} {
		if got := visibleWidth(s); got != want {
			t.Errorf("visibleWidth(%q) = %d, want %d", s, got, want)
		}
	}
}

// A relay that was never reached is "cannot reach", with one hint; a run of
// failures gets a line for each of the first few, then one a minute; after
// a connection, a drop is "disconnected".
func TestTraceConnectionFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var info bytes.Buffer
		tr := newTracer(io.Discard, &info, false, false, false, time.UTC)
		fail := func(n int) {
			tr.state(proxy.StateChange{State: proxy.StateDisconnected, URL: "http://relay.test/c", Attempt: n, Err: errors.New("connection refused"), RetryIn: 30 * time.Second})
		}
		for n := 1; n <= 10; n++ {
			fail(n)
		}
		time.Sleep(time.Minute) // simulated (synctest)
		fail(11)
		tr.state(proxy.StateChange{State: proxy.StateConnected, URL: "http://relay.test/c"})
		fail(1)
		want := "cannot reach http://relay.test/c: connection refused; retrying in 30s (attempt 1)\n" +
			"  is the relay running? is the URL right? (forward keeps trying; Ctrl-C stops it)\n" +
			"cannot reach http://relay.test/c: connection refused; retrying in 30s (attempt 2)\n" +
			"cannot reach http://relay.test/c: connection refused; retrying in 30s (attempt 3)\n" +
			"cannot reach http://relay.test/c: connection refused; retrying in 30s (attempt 11)\n" +
			"connected to http://relay.test/c\n" +
			"disconnected: connection refused; retrying in 30s (attempt 1)\n"
		if info.String() != want {
			t.Errorf("got:\n%s\nwant:\n%s", info.String(), want)
		}
	})
}

// BenchmarkTraceToFile measures a trace line written to a file, as a
// forwarder writing to a pipe or a log does:
//
//	go test -run '^$' -bench TraceToFile -count 6 ./internal/cli/
func BenchmarkTraceToFile(b *testing.B) {
	f, err := os.CreateTemp(b.TempDir(), "trace")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	tr := newTracer(f, io.Discard, false, false, false, time.UTC)
	r := traceResults()[0]
	for b.Loop() {
		tr.result(r)
	}
	tr.flush()
}

// A trace to a file or a pipe is written line by line at a user's rate,
// and buffered while lines come close together (a burst): those reach it
// at the latest traceFlushDelay after the first, with the next line that
// comes alone, or when the command flushes it.
func TestTraceBufferedToFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, err := os.CreateTemp(t.TempDir(), "trace")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tr := newTracer(f, io.Discard, false, false, false, time.UTC)
		size := func() int64 {
			st, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			return st.Size()
		}
		tr.result(traceResults()[0])
		line := size()
		if line == 0 {
			t.Fatal("the first line was not written at once")
		}
		tr.result(traceResults()[0])
		tr.result(traceResults()[0])
		if n := size(); n != line {
			t.Errorf("the file holds %d bytes right after three lines, want the first (%d) and the others buffered", n, line)
		}
		// The buffer is written traceFlushDelay after the lines, and then
		// the trace is quiet as long again.
		time.Sleep(2 * traceFlushDelay) // simulated (synctest)
		if n := size(); n != 3*line {
			t.Fatalf("%d bytes written %s after the lines, want all three (%d)", n, traceFlushDelay, 3*line)
		}
		// At 20 deliveries a second, each line at once: no timer wakes
		// the process between them.
		for i := 4; i <= 6; i++ {
			time.Sleep(50 * time.Millisecond) // simulated (synctest)
			tr.result(traceResults()[0])
			if n := size(); n != int64(i)*line {
				t.Errorf("%d bytes after line %d, 50 ms after the one before it; want %d", n, i, int64(i)*line)
			}
		}
		tr.result(traceResults()[0]) // a burst again: buffered
		time.Sleep(traceBurstGap)    // simulated (synctest)
		tr.result(traceResults()[0]) // alone: written with the one before it
		if n := size(); n != 8*line {
			t.Errorf("%d bytes after a burst's line and one %s after it, want %d", n, traceBurstGap, 8*line)
		}
		tr.result(traceResults()[0])
		tr.flush()
		if n := size(); n != 9*line {
			t.Errorf("flush wrote %d bytes in all, want %d", n, 9*line)
		}
	})
}

// An edited replay (the inspector's) says so on its trace line.
func TestTraceMarksAnEditedReplay(t *testing.T) {
	for source, want := range map[delivery.BodySource]bool{delivery.BodyEdited: true, delivery.BodyBase64: false} {
		var out bytes.Buffer
		tr := newTracer(&out, io.Discard, false, false, false, time.UTC)
		tr.result(proxy.Result{Delivery: &delivery.Delivery{ID: "e1", Event: "push", BodySource: source}, Received: time.Unix(1700000000, 0), Verification: proxy.VerificationPassed})
		tr.flush()
		if got := strings.Contains(out.String(), " edited ✓ verified"); got != want {
			t.Errorf("%s: trace line %q; edited shown: %v, want %v", source, out.String(), got, want)
		}
	}
}

// An agent's call, text any local client of the inspector sends, shows on
// the trace with its control characters escaped and cut to a line.
func TestTraceShowsAnAgentsCallSafely(t *testing.T) {
	var out bytes.Buffer
	tr := newTracer(&out, io.Discard, false, false, false, time.UTC)
	tr.call("claude-code: replay_delivery #3\t\x1b[2J" + strings.Repeat("x", 300))
	tr.flush()
	line := out.String()
	if !strings.Contains(line, ` agent claude-code: replay_delivery #3\x09\x1b[2J`) || strings.ContainsAny(line, "\t\x1b") {
		t.Errorf("trace line %q: want the call with its control characters escaped", line)
	}
	_, tail, _ := strings.Cut(line, "[2J")
	if n := strings.Count(tail, "x"); n != maxCallText-1-len("claude-code: replay_delivery #3\t\x1b[2J") || !strings.HasSuffix(line, "…\n") {
		t.Errorf("trace line %q: %d x's; want the text cut to %d characters", line, n, maxCallText)
	}
}
