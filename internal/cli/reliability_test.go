package cli

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
)

// closedPort returns a loopback URL where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	return "http://" + closedAddr(t) + "/hook"
}

// closedAddr returns a loopback address (host:port) where nothing listens
// now: a test may start a server there later.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// A target that is down: every delivery is saved in the failed folder and
// listed in the summary; `hookline replay` of that folder, once a target is
// up, delivers them all, byte-exact and in order.
func TestForwardFailedFolderThenReplay(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	failed := filepath.Join(t.TempDir(), "failed")
	down := closedPort(t)
	f := startForward(t, "--url", rl.Channel, "--target", down, "--retries", "0", "--failed-dir", failed)
	f.waitErr(t, "connected to")
	for n := 1; n <= 3; n++ {
		rl.Publish(t, nil, n, relaytest.Body(n, 0))
	}
	f.waitOutLines(t, 3*3) // each: the trace line, the error, "saved for replay:"
	if code := f.stop(t); code != ExitOK {
		t.Errorf("exit code = %d, want 0", code)
	}
	stderr := f.err.String()
	files, _ := filepath.Glob(filepath.Join(failed, "*.json"))
	if len(files) != 3 {
		t.Fatalf("%d files in the failed folder, want 3; stderr:\n%s", len(files), stderr)
	}
	for _, want := range []string{"3 kept for a replay (no answer ×3) in " + failed + ":", "send them again with: hookline replay --target " + down + " " + failed} {
		if !strings.Contains(stderr, want) {
			t.Errorf("summary lacks %q:\n%s", want, stderr)
		}
	}
	for _, file := range files {
		if !strings.Contains(stderr, "  "+file+"\n") {
			t.Errorf("the summary does not list %s:\n%s", file, stderr)
		}
	}
	if !strings.Contains(f.out.String(), "saved for replay: "+failed) {
		t.Errorf("the trace does not say where each delivery went:\n%s", f.out.String())
	}

	target := &relaytest.Sink{}
	ts := httptest.NewServer(target)
	t.Cleanup(ts.Close)
	code, out, errOut := run(t, "replay", "--target", ts.URL+"/hook", failed)
	if code != ExitOK {
		t.Fatalf("replay exit code = %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	relaytest.CheckExactlyOnce(t, target.Arrivals(), 1, 3, true, relaytest.Body0)
}

// With neither --save nor --failed-dir, undelivered deliveries go to a
// folder of this run in the state directory's failed folder, and the
// summary's replay command names that folder only (before, the whole
// shared folder, earlier runs included).
func TestForwardDefaultFailedFolder(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	earlier := filepath.Join(state, "hookline", "failed", "20260101T000000Z")
	if err := os.MkdirAll(earlier, 0o700); err != nil {
		t.Fatal(err)
	}
	rl := relaytest.Start(t, relay.Options{})
	f := startForward(t, "--url", rl.Channel, "--target", closedPort(t), "--retries", "0")
	f.waitErr(t, "connected to")
	rl.Publish(t, nil, 1, relaytest.Body(1, 0))
	f.waitOutLines(t, 3)
	f.stop(t)
	runs, _ := filepath.Glob(filepath.Join(state, "hookline", "failed", "2*"))
	if len(runs) != 2 || runs[0] != earlier {
		t.Fatalf("failed folders %q, want the earlier run's and this run's", runs)
	}
	want := runs[1]
	files, _ := filepath.Glob(filepath.Join(want, "*.json"))
	if len(files) != 1 {
		t.Fatalf("%d files in %s, want 1; stderr:\n%s", len(files), want, f.err.String())
	}
	if s := f.err.String(); !strings.Contains(s, "send them again with: hookline replay --target ") || !strings.Contains(s, " "+want+"\n") || strings.Contains(s, earlier) {
		t.Errorf("the replay command does not name this run's folder %s (and only it):\n%s", want, s)
	}
	if s := f.err.String(); !strings.Contains(s, want+" (hookline's default failed folder; choose one with --failed-dir)") {
		t.Errorf("the summary does not name the default folder:\n%s", s)
	}
	if st, err := os.Stat(want); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the failed folder: %v, mode %v; want owner-only", err, st.Mode().Perm())
	}
}

// --save uses the save folder's "failed" subfolder, for a 4xx too.
func TestForwardFailedFolderUnderSave(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	target := &relaytest.Sink{Status: func(_ int, _ http.ResponseWriter, r *http.Request) int {
		switch r.Header.Get("X-GitHub-Delivery") {
		case relaytest.ID(1):
			return http.StatusServiceUnavailable
		case relaytest.ID(2):
			return http.StatusUnprocessableEntity
		}
		return http.StatusOK
	}}
	ts := httptest.NewServer(target)
	t.Cleanup(ts.Close)
	save := t.TempDir()
	f := startForward(t, "--url", rl.Channel, "--target", ts.URL, "--retries", "0", "--save", save)
	f.waitErr(t, "connected to")
	for n := 1; n <= 3; n++ {
		rl.Publish(t, nil, n, relaytest.Body(n, 0))
	}
	f.waitOutLines(t, 4)
	f.stop(t)
	all, _ := filepath.Glob(filepath.Join(save, "*.json"))
	failed, _ := filepath.Glob(filepath.Join(save, "failed", "*.json"))
	if len(all) != 3 || len(failed) != 2 || !strings.Contains(failed[0], relaytest.ID(1)) || !strings.Contains(failed[1], relaytest.ID(2)) {
		t.Errorf("saved %q and, for a replay, %q; want 3, and the 503 and the 422", all, failed)
	}
}

// The state file: with --save and --url a default one per channel; a
// second run resumes after the position stored and gets only what came
// while it was away.
// With --url, forward keeps its position in the channel by default (no
// --save needed): a restart gets what arrived while it was down, and says
// how many the relay kept. --no-state opts out.
func TestForwardStateFileResumes(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	rl := relaytest.Start(t, relay.Options{})
	target := &relaytest.Sink{}
	ts := httptest.NewServer(target)
	t.Cleanup(ts.Close)
	stream, _ := sse.StreamURL(rl.Channel, "")
	stateFile := filepath.Join(state, "hookline", "state", stateFileName(stream))

	f := startForward(t, "--url", rl.Channel, "--target", ts.URL)
	f.waitErr(t, "connected to")
	for n := 1; n <= 2; n++ {
		rl.Publish(t, nil, n, relaytest.Body(n, 0))
	}
	target.WaitFor(t, 2)
	f.waitOutLines(t, 2)
	f.stop(t)
	if s := f.err.String(); !strings.Contains(s, "state file: "+stateFile) || !strings.Contains(s, "position stored: after event 2 in "+stateFile) {
		t.Errorf("stderr does not name the state file and position:\n%s", s)
	}
	for n := 3; n <= 4; n++ {
		rl.Publish(t, nil, n, relaytest.Body(n, 0))
	}
	f2 := startForward(t, "--url", rl.Channel, "--target", ts.URL)
	f2.waitErr(t, "position in the channel: after event 2 (state file "+stateFile)
	f2.waitErr(t, "resuming after event 2; the relay kept 2 deliveries for you")
	target.WaitFor(t, 4)
	f2.waitOutLines(t, 2)
	f2.stop(t)
	relaytest.CheckExactlyOnce(t, target.Arrivals(), 1, 4, true, relaytest.Body0)

	// --no-state: what arrives while it is down is not fetched again.
	rl.Publish(t, nil, 5, relaytest.Body(5, 0))
	f3 := startForward(t, "--url", rl.Channel, "--target", ts.URL, "--no-state")
	f3.waitErr(t, "connected to")
	rl.Publish(t, nil, 6, relaytest.Body(6, 0))
	target.WaitFor(t, 5)
	f3.waitOutLines(t, 1)
	f3.stop(t)
	if got := target.Arrivals(); got[len(got)-1].ID != relaytest.ID(6) || strings.Contains(f3.err.String(), "resuming") {
		t.Errorf("with --no-state the last arrival is %s (want %s, event 5 not resumed); stderr:\n%s", got[len(got)-1].ID, relaytest.ID(6), f3.err.String())
	}
}

// A damaged or foreign state file is ignored with a warning; forwarding
// works. (The CLI rows of the hostile-input table.)
func TestForwardHostileStateFiles(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	tests := []struct {
		name, content, warn string
	}{
		{"not JSON", "garbage\x00\xff", "not a hookline state file"},
		{"a JSON array", "[1,2]", "not a hookline state file"},
		{"another version", `{"version":9}`, "state file version 9"},
		{"an id with a control character", `{"version":1,"last_event_id":"1\u0000"}`, "not a usable event id"},
		{"another channel", `{"version":1,"channel":"https://smee.io/other","channel_sha256":"00","last_event_id":"5"}`, "belongs to another channel"},
		{"too large", `{"version":1,"pad":"` + strings.Repeat("x", 5<<20) + `"}`, "not a hookline state file"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := &relaytest.Sink{}
			ts := httptest.NewServer(target)
			t.Cleanup(ts.Close)
			file := filepath.Join(t.TempDir(), "state.json")
			if err := os.WriteFile(file, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			f := startForward(t, "--url", rl.Channel, "--target", ts.URL, "--state-file", file)
			f.waitErr(t, "connected to")
			n := 100 + i
			rl.Publish(t, nil, n, relaytest.Body(n, 0))
			target.WaitFor(t, 1)
			f.stop(t)
			if s := f.err.String(); !strings.Contains(s, "ignoring the state file") || !strings.Contains(s, tt.warn) {
				t.Errorf("stderr lacks the warning %q:\n%s", tt.warn, s)
			}
			if got := target.Arrivals(); got[0].ID != relaytest.ID(n) {
				t.Errorf("the target got %s", got[0].ID)
			}
		})
	}
}

// The CLI rows of the hostile-input table: damaged files in a folder to
// replay are each named with a clear error, and the good captures in the
// same folder are still sent.
func TestReplayHostileCaptureFiles(t *testing.T) {
	good := capture.File{Delivery: delivery.Delivery{ID: "good-1", Event: "issues", Headers: http.Header{"X-Github-Event": {"issues"}}, Body: []byte(`{"action":"opened"}`)}}
	tests := []struct {
		name    string
		file    string // the bad file's name in the folder
		content []byte
		make    func(t *testing.T, path string) // instead of content
		want    string
	}{
		{name: "not JSON", file: "a.json", content: []byte("hello"), want: "malformed capture file"},
		{name: "a JSON array", file: "a.json", content: []byte("[1,2,3]"), want: "malformed capture file"},
		{name: "no version", file: "a.json", content: []byte(`{"event":"push"}`), want: `no "version" field`},
		{name: "a future version", file: "a.json", content: []byte(`{"version":99,"event":"push"}`), want: "unsupported capture file version 99"},
		{name: "no event", file: "a.json", content: []byte(`{"version":1,"headers":{},"body_encoding":"text","body":""}`), want: `no "event" name`},
		{name: "bad base64 body", file: "a.json", content: []byte(`{"version":1,"event":"push","headers":{},"body_encoding":"base64","body":"%%%"}`), want: "body is not valid base64"},
		{name: "an unknown body encoding", file: "a.json", content: []byte(`{"version":1,"event":"push","headers":{},"body_encoding":"rot13","body":""}`), want: `body_encoding "rot13"`},
		{name: "an unknown field", file: "a.json", content: []byte(`{"version":1,"event":"push","headers":{},"body_encoding":"text","body":"","evil":1}`), want: `unknown field "evil"`},
		{name: "NUL bytes and invalid UTF-8", file: "a.json", content: []byte("{\"version\":1,\x00\xff}"), want: "malformed capture file"},
		{name: "a negative version", file: "a.json", content: []byte(`{"version":-1,"event":"push"}`), want: "unsupported capture file version -1"},
		{name: "an overflowing version", file: "a.json", content: []byte(`{"version":99999999999999999999999,"event":"push"}`), want: "malformed capture file"},
		{name: "a header that is not a list", file: "a.json", content: []byte(`{"version":1,"event":"push","headers":{"A":"b"},"body_encoding":"text","body":""}`), want: "malformed capture file"},
		{name: "larger than any capture", file: "a.json", make: func(t *testing.T, path string) {
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(capture.MaxFileSize + 1); err != nil { // sparse: no 64 MiB written
				t.Fatal(err)
			}
		}, want: "more than a capture file holds"},
		{name: "a directory named like a capture", file: "a.json", make: func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, want: "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := capture.Write(dir, good); err != nil {
				t.Fatal(err)
			}
			bad := filepath.Join(dir, tt.file)
			if tt.make != nil {
				tt.make(t, bad)
			} else if err := os.WriteFile(bad, tt.content, 0o644); err != nil {
				t.Fatal(err)
			}
			target := &relaytest.Sink{}
			ts := httptest.NewServer(target)
			t.Cleanup(ts.Close)
			code, _, errOut := run(t, "replay", "--target", ts.URL, dir)
			if code != ExitFailure {
				t.Errorf("exit code = %d, want 1", code)
			}
			if want := "skipped: " + bad + ": "; !strings.Contains(errOut, want) || !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr = %q, want it to name %s and say %q", errOut, bad, tt.want)
			}
			if got := target.Arrivals(); len(got) != 1 || !bytes.Equal(got[0].Body, good.Body) {
				t.Errorf("the target got %d deliveries, want the good one", len(got))
			}
		})
	}
}

// Bad values of the reliability flags are usage errors that say what to do.
func TestForwardReliabilityUsageErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"negative dedup window", []string{"--dedup-window", "-1s"}, "--dedup-window -1s: must be 0 (off) or positive"},
		{"state file is a directory", []string{"--state-file", dir}, "--state-file " + dir + " is a directory"},
		{"empty state file", []string{"--state-file", ""}, "--state-file is empty"},
		{"failed dir is a file", []string{"--failed-dir", file}, "--failed-dir " + file + " is a file"},
		{"negative retries", []string{"--retries", "-1"}, "--retries -1: must be 0 or more"},
		{"control character in --last-event-id", []string{"--last-event-id", "1\x002"}, "--last-event-id: the id contains control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, append([]string{"forward", "--url", "http://127.0.0.1:1/c"}, tt.args...)...)
			if code != ExitUsage || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tt.wantErr)
			}
		})
	}
}
