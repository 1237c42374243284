package cli

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/relay"
)

// testRelay serves one channel in hookline's SSE format; send pushes a
// signed delivery to the subscriber.
type testRelay struct {
	*httptest.Server
	frames chan string
	next   int
}

func newTestRelay(t *testing.T) *testRelay {
	r := &testRelay{frames: make(chan string, 64)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: ready\ndata: {}\n\n")
		http.NewResponseController(w).Flush()
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
	t.Cleanup(r.Close)
	return r
}

func (r *testRelay) send(id, event, secret string, body []byte) {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	msg, _ := json.Marshal(map[string]any{
		"x-github-event": event, "x-github-delivery": id, "content-type": "application/json",
		"x-hub-signature-256": "sha256=" + hex.EncodeToString(m.Sum(nil)),
		"authorization":       "Bearer should-never-print",
		"bodyB":               base64.StdEncoding.EncodeToString(body),
		"query":               map[string]string{}, "timestamp": 1763805600000,
	})
	r.next++
	r.frames <- fmt.Sprintf("id: %d\ndata: %s\n\n", r.next, msg)
}

func TestForwardEndToEnd(t *testing.T) {
	const secret = "forward-secret-value"
	got := make(chan []byte, 4)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(target.Close)
	relay := newTestRelay(t)
	saveDir := t.TempDir()
	pluginDir := t.TempDir()
	testenv.Tools(t, "cat") // the plugin's
	marker := filepath.Join(t.TempDir(), "ran")
	if err := os.WriteFile(filepath.Join(pluginDir, "issues.opened"), []byte("#!/bin/sh\ncat > \"$MARK\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr relaytest.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, []string{"hookline", "forward", "--url", relay.URL + "/chan", "--target", target.URL + "/hook",
			"--secret", secret, "--json", "--save", saveDir, "--plugin-dir", pluginDir, "--plugin-env", "MARK=" + marker},
			strings.NewReader(""), &stdout, &stderr)
	}()
	good := []byte(`{"action":"opened","repository":{"full_name":"octo-org/hello-world"},"sender":{"login":"octocat"}}`)
	relay.send("d-good", "issues", secret, good)
	relay.send("d-bad", "issues", "not-the-secret", good)
	select {
	case b := <-got:
		if !bytes.Equal(b, good) {
			t.Errorf("target body = %q, want %q", b, good)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("nothing reached the target; stderr:\n%s", stderr.String())
	}
	stdout.WaitLines(t, 2)
	cancel()
	if c := <-code; c != ExitOK {
		t.Errorf("exit code = %d, want 0; stderr:\n%s", c, stderr.String())
	}
	select {
	case b := <-got:
		t.Errorf("the delivery with a bad signature reached the target: %q", b)
	default:
	}

	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("stdout has %d lines, want 2:\n%s", len(lines), stdout.String())
	}
	var first, second struct {
		Delivery, Verification, Repository, Sender string
		Targets                                    []struct{ Status int }
		Handlers                                   []struct {
			Name string
			OK   bool
		}
		Saved string
		OK    bool
	}
	for i, v := range []any{&first, &second} {
		if err := json.Unmarshal([]byte(lines[i]), v); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, lines[i])
		}
	}
	if first.Delivery != "d-good" || first.Verification != "verified" || len(first.Targets) == 0 || first.Targets[0].Status != 202 ||
		first.Repository != "octo-org/hello-world" || first.Sender != "octocat" || !first.OK ||
		len(first.Handlers) != 1 || first.Handlers[0].Name != "issues.opened" || !first.Handlers[0].OK {
		t.Errorf("first line = %+v, want d-good verified, 202, plugin ok", first)
	}
	if second.Delivery != "d-bad" || second.Verification != "failed" || len(second.Targets) > 0 || second.OK || len(second.Handlers) != 0 {
		t.Errorf("second line = %+v, want d-bad failed, not forwarded nor dispatched", second)
	}
	if ran, err := os.ReadFile(marker); err != nil || !bytes.Equal(ran, good) {
		t.Errorf("plugin stdin = %q (%v), want the payload", ran, err)
	}
	files, _ := filepath.Glob(filepath.Join(saveDir, "*.json"))
	if len(files) != 2 {
		t.Errorf("saved %d capture files, want 2 (every delivery is saved)", len(files))
	}
	summary := stderr.String()
	for _, want := range []string{"summary: 2 received, 1 forwarded, 1 bad signature(s)", "2 saved in " + saveDir,
		// The replay it suggests verifies again: never one that sends on
		// what failed verification.
		"send them again with: hookline replay --secret-file FILE --target", "the 1 with a bad signature are sent only if they match"} {
		if !strings.Contains(summary, want) {
			t.Errorf("stderr lacks %q:\n%s", want, summary)
		}
	}
	if strings.Contains(summary, "hookline replay --target") {
		t.Errorf("the summary suggests a replay without the secret:\n%s", summary)
	}
	for _, secretText := range []string{secret, "should-never-print"} {
		if strings.Contains(stdout.String()+stderr.String(), secretText) {
			t.Errorf("output contains the secret %q", secretText)
		}
	}
}

func TestForwardUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"target without scheme", []string{"--url", "http://127.0.0.1:1/c", "--target", "localhost:3000/hook"},
			`--target: invalid target URL: "localhost:3000/hook" has no scheme; did you mean http://localhost:3000/hook?`},
		{"url and new", []string{"--url", "http://127.0.0.1:1/c", "--new"}, "--url and --new cannot be used together"},
		{"bad concurrency", []string{"--url", "http://127.0.0.1:1/c", "--concurrency", "0"}, "--concurrency 0: must be at least 1"},
		{"resign without secret", []string{"--url", "http://127.0.0.1:1/c", "--resign"}, "--resign needs a secret"},
		{"unknown format", []string{"--url", "http://127.0.0.1:1/c", "--format", "ngrok"}, `--format "ngrok": want smee, gosmee or hookline`},
		{"relay url without scheme", []string{"--url", "smee.io/abc"}, `--url: channel URL "smee.io/abc" has no scheme; did you mean https://smee.io/abc?`},
		{"relay url host:port without scheme", []string{"--url", "127.0.0.1:3333/chan"}, `--url: channel URL "127.0.0.1:3333/chan" has no scheme; did you mean http://127.0.0.1:3333/chan?`},
		{"stray argument", []string{"https://smee.io/abc"}, `forward takes no arguments (got "https://smee.io/abc"); did you mean --url https://smee.io/abc?`},
		{"port and target", []string{"--url", "http://127.0.0.1:1/c", "--target", "http://x", "--port", "3000"}, "--target and --port/--path cannot be used together"},
		{"path without port", []string{"--url", "http://127.0.0.1:1/c", "--path", "/hook"}, "--port 0: want a port number from 1 to 65535 (--path needs --port)"},
		{"flag without a value", []string{"--url", "http://127.0.0.1:1/c", "--target"}, "forward: --target needs a value"},
		{"flag as a flag's value", []string{"--url", "http://127.0.0.1:1/c", "--target", "--secret", "x"}, "forward: --target got --secret as its value, which is a flag"},
		{"target is the channel", []string{"--url", "http://127.0.0.1:1/c", "--target", "http://localhost:1/c/"}, "--target http://localhost:1/c/ is the relay channel itself"},
		{"target is the channel's gosmee stream", []string{"--url", "https://relay.example/c", "--target", "https://relay.example:443/events/c"}, "is the relay channel itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, append([]string{"forward"}, tt.args...)...)
			if code != ExitUsage {
				t.Errorf("exit code = %d, want %d", code, ExitUsage)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tt.wantErr)
			}
		})
	}
}

// The embedded relay's channel given as the target is refused at start, in
// one line, before anything is forwarded (it looped: 4,780 deliveries in 3 s).
func TestForwardRefusesTheEmbeddedChannelAsTarget(t *testing.T) {
	addr := closedAddr(t)
	code, _, errOut := run(t, "forward", "--listen", addr, "--channel", "loopchannel", "--target", "http://"+addr+"/loopchannel")
	if code != ExitUsage || !strings.Contains(errOut, "is the relay channel itself") {
		t.Errorf("exit %d, stderr %q; want a usage error saying the target is the channel", code, errOut)
	}
	if strings.Contains(errOut, "connected to") {
		t.Errorf("it subscribed before refusing: %q", errOut)
	}
}

func TestForwardMissingChannelIsAClearError(t *testing.T) {
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	code, _, errOut := run(t, "forward", "--url", notFound.URL+"/missing")
	if code != ExitFailure {
		t.Errorf("exit code = %d, want %d", code, ExitFailure)
	}
	if !strings.Contains(errOut, "404") || !strings.Contains(errOut, "check --url") {
		t.Errorf("stderr = %q, want the 404 and a hint to check --url", errOut)
	}
	// hookline serve's JSON error, said once, decoded (before: twice, with
	// its quotes escaped twice over).
	rl := relaytest.Start(t, relay.Options{})
	_, _, errOut = run(t, "forward", "--url", rl.Base+"/bad.name")
	msg := `no channel "bad.name": channel names are 1 to 128 characters`
	if strings.Count(errOut, msg) != 1 || strings.Contains(errOut, `\"`) || strings.Count(errOut, "404 Not Found") != 1 {
		t.Errorf("stderr = %q, want %q once, unescaped", errOut, msg)
	}
}

func TestCreateChannel(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string // with %s for the server URL
		wantErr string
	}{
		{"smee redirect", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/new" || r.Method != http.MethodHead {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Location", "/AbCdEf123")
			w.WriteHeader(http.StatusTemporaryRedirect)
		}, "%s/AbCdEf123", ""},
		{"gosmee text body", func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodHead {
				w.WriteHeader(http.StatusOK)
				return
			}
			io.WriteString(w, "https://hook.example/XyZ\n")
		}, "https://hook.example/XyZ", ""},
		{"not a relay", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
		}, "", "answered 404 without a channel URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			t.Cleanup(srv.Close)
			got, _, err := createChannel(t.Context(), srv.URL, nil, false)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("createChannel error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			want := tt.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, srv.URL)
			}
			if err != nil || got != want {
				t.Errorf("createChannel = %q, %v; want %q", got, err, want)
			}
		})
	}
}

// With neither --url nor --new, forward starts a relay on loopback and
// prints its channel; a delivery POSTed there is forwarded byte-exact.
func TestForwardEmbeddedRelay(t *testing.T) {
	got := make(chan []byte, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
	}))
	t.Cleanup(target.Close)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr relaytest.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, []string{"hookline", "forward", "--listen", "127.0.0.1:0", "--target", target.URL, "--json"},
			strings.NewReader(""), &stdout, &stderr)
	}()
	_, rest, _ := strings.Cut(stderr.Wait(t, "the channel URL", func(text string) bool {
		_, rest, ok := strings.Cut(text, "POST deliveries to ")
		return ok && strings.Contains(rest, "\n")
	}), "POST deliveries to ")
	channel, _, _ := strings.Cut(rest, "\n")
	if !strings.HasPrefix(channel, "http://127.0.0.1:") {
		t.Fatalf("no channel URL printed; stderr:\n%s", stderr.String())
	}
	stderr.WaitFor(t, "connected to")
	// Bytes a re-encoding relay would change.
	body := []byte("{\"action\":\"created\" , \"s\":\"\\u00e9\"}")
	req, _ := http.NewRequest(http.MethodPost, channel, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "star")
	req.Header.Set("X-GitHub-Delivery", "emb-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case b := <-got:
		if !bytes.Equal(b, body) {
			t.Errorf("target body = %q, want %q", b, body)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("nothing forwarded; stderr:\n%s", stderr.String())
	}
	stdout.WaitLines(t, 1)
	cancel()
	if c := <-code; c != ExitOK {
		t.Errorf("exit code = %d, want 0; stderr:\n%s", c, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"delivery":"emb-1"`) || !strings.Contains(stdout.String(), `"body_source":"body-exact"`) {
		t.Errorf("trace = %s, want emb-1 with the exact JSON body (body-exact)", stdout.String())
	}
}

// A relay that cannot be reached is retried, and the user is told so.
func TestForwardSaysItKeepsRetryingAnUnreachableRelay(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr relaytest.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, []string{"hookline", "forward", "--url", url + "/chan"}, strings.NewReader(""), &stdout, &stderr)
	}()
	stderr.Wait(t, "two retries", func(text string) bool { return strings.Count(text, "retrying in") >= 2 })
	cancel()
	if c := <-code; c != ExitOK {
		t.Errorf("exit code = %d, want 0 after Ctrl-C", c)
	}
	if !strings.Contains(stderr.String(), "connection refused") || strings.Count(stderr.String(), "retrying in") < 2 {
		t.Errorf("stderr does not show repeated retries of a refused connection:\n%s", stderr.String())
	}
}

// smee-client's -p/-P: --port N --path P forwards to http://127.0.0.1:N/P,
// so smee-client users switch without rewriting their scripts. Without a
// target or plugins, forward says once that nothing is sent anywhere.
func TestForwardPortAndPath(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	var path atomic.Value
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { path.Store(r.URL.Path) }))
	t.Cleanup(target.Close)
	port := target.Listener.Addr().(*net.TCPAddr).Port
	f := startForward(t, "--url", rl.Channel, "-p", strconv.Itoa(port), "-P", "hook")
	f.waitErr(t, "connected to")
	if want := fmt.Sprintf(" → http://127.0.0.1:%d/hook\n", port); !strings.Contains(f.err.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, f.err.String())
	}
	rl.Publish(t, nil, 1, relaytest.Body(1, 0))
	f.waitOutLines(t, 1)
	if got, _ := path.Load().(string); got != "/hook" {
		t.Errorf("the target got %q, want /hook", got)
	}
	f.stop(t)

	g := startForward(t, "--url", rl.Channel)
	g.waitErr(t, "connected to")
	if n := strings.Count(g.err.String(), "not sent anywhere"); n != 1 {
		t.Errorf("without a target the notice appears %d times, want once:\n%s", n, g.err.String())
	}
}

// forward's own hint works: it passes the secret the way the user gave it
// (never its text), and running it verifies. Before, the hint had no
// secret and its delivery failed with a message blaming GitHub.
func TestForwardSendHintCarriesTheSecret(t *testing.T) {
	const secret = "hint-secret-42"
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, env string
		args      []string
		want      string // the hint, without the channel URL
	}{
		{"file", "", []string{"--secret-file", secretFile}, "try: hookline send --event ping --secret-file " + secretFile + " --url "},
		{"environment", secret, nil, "try: HOOKLINE_SECRET=… hookline send --event ping --url "},
		{"flag", "", []string{"--secret", secret}, "try: hookline send --event ping --secret <the same secret> --url "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(secretEnv, tt.env)
			f := startForward(t, append([]string{"--listen", "127.0.0.1:0"}, tt.args...)...)
			f.waitErr(t, "connected to")
			stderr := f.err.String()
			_, rest, ok := strings.Cut(stderr, tt.want)
			if !ok || strings.Contains(stderr, secret) {
				t.Fatalf("stderr lacks %q or shows the secret:\n%s", tt.want, stderr)
			}
			channel, _, _ := strings.Cut(rest, "\n")
			if tt.name != "file" {
				return
			}
			// Run the hint as printed.
			if code, out, errOut := run(t, "send", "--event", "ping", "--secret-file", secretFile, "--url", channel); code != ExitOK {
				t.Fatalf("the hint's send: exit %d\n%s%s", code, out, errOut)
			}
			f.waitOutLines(t, 1)
			if !strings.Contains(f.out.String(), "✓ verified") {
				t.Errorf("the hinted delivery: %q, want verified", f.out.String())
			}
			// And without the secret, the note names hookline send.
			run(t, "send", "--event", "ping", "--url", channel)
			f.waitOutLines(t, 3)
			if !strings.Contains(f.out.String(), "hookline send sent it without a secret") {
				t.Errorf("unsigned send: %q, want the note naming hookline send", f.out.String())
			}
		})
	}
}

// The embedded relay keeps its channel across restarts (stored in the
// state directory, or --channel), so a sender's URL stays valid; and send
// warns when the relay says nobody is subscribed. Before, every restart
// made a new channel and the old URL answered 200 into the void.
func TestForwardEmbeddedChannelIsStable(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	channelOf := func(args ...string) string {
		f := startForward(t, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
		f.waitErr(t, "connected to")
		_, rest, _ := strings.Cut(f.err.String(), "POST deliveries to ")
		url, _, _ := strings.Cut(rest, "\n")
		f.stop(t)
		return url[strings.LastIndexByte(url, '/')+1:]
	}
	first := channelOf()
	if second := channelOf(); second != first || first == "" {
		t.Errorf("channels %q then %q, want the same across restarts", first, second)
	}
	if named := channelOf("--channel", "my-app-hooks"); named != "my-app-hooks" {
		t.Errorf("--channel my-app-hooks gave %q", named)
	}
	for _, args := range [][]string{{"--channel", "bad/name"}, {"--channel", "x", "--url", "http://127.0.0.1:1/c"}} {
		if code, _, _ := run(t, append([]string{"forward"}, args...)...); code != ExitUsage {
			t.Errorf("forward %q: exit %d, want %d", args, code, ExitUsage)
		}
	}

}

// send to a channel nobody reads says so, and says what is true: the
// forward that stopped gets the delivery when it starts again (its state
// file resumes the channel). Before, the warning said "a forward started
// later does not get it", and a user who believed it sent again: the
// handler ran twice.
func TestSendToAChannelNobodyReads(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	rl := relaytest.Start(t, relay.Options{})
	target := newRecordingTarget(t, nil)
	f := startForward(t, "--url", rl.Channel, "--target", target.URL)
	f.waitErr(t, "no delivery on this channel yet") // after the relay's ready event: the position is taken
	f.stop(t)
	code, _, errOut := run(t, "send", "--event", "ping", "--url", rl.Channel)
	if code != ExitOK || !strings.Contains(errOut, "nobody is subscribed to this channel right now") ||
		!strings.Contains(errOut, "a forward that resumes this channel") || strings.Contains(errOut, "does not get it") {
		t.Errorf("send to a channel nobody reads: exit %d, stderr %q; want 0 and the note that a resuming forward gets it", code, errOut)
	}
	f = startForward(t, "--url", rl.Channel, "--target", target.URL)
	f.waitOutLines(t, 1)
	f.stop(t)
	if n := len(target.requests()); n != 1 || target.requests()[0].header.Get("X-GitHub-Event") != "ping" {
		t.Errorf("the restarted forward passed on %d deliveries, want the ping sent while it was stopped\n%s", n, f.err.String())
	}
}

// Warnings are trace lines, not raw slog records, and -v shows no debug
// records (before: level=DEBUG msg="relay control event" in the trace).
func TestForwardWarningsAreTraceLines(t *testing.T) {
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: ready\ndata: {}\n\nevent: ping\ndata: {}\n\nid: 1\ndata: not json\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(relay.Close)
	f := startForward(t, "-v", "--url", relay.URL+"/chan")
	f.waitErr(t, "warn: skipping a relay message that is not a delivery (err=")
	f.stop(t)
	if s := f.err.String(); strings.Contains(s, "level=") || strings.Contains(s, "msg=") || strings.Contains(s, "relay control event") {
		t.Errorf("stderr has raw slog records:\n%s", s)
	}
}

// --new says what it does before it waits, and when the server does not
// answer it points at the local relay (before: up to 30 s of silence).
func TestForwardNewSaysWhatItDoes(t *testing.T) {
	down := closedPort(t)
	code, _, errOut := run(t, "forward", "--new", "--server", down)
	if code != ExitFailure {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{"creating a channel on " + down + " (up to 10s)\n", "leave out --new (and --url) to use a relay on this machine instead"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Index(errOut, "creating a channel on") > strings.Index(errOut, "hookline:") {
		t.Errorf("the announcement must come before the error:\n%s", errOut)
	}
}

// stripe-cli's --headers: forward --header adds or replaces a header on
// every request to the target (a target behind authentication), and
// never prints a credential's value, even with -v; replay takes it too.
func TestForwardHeader(t *testing.T) {
	const token = "Bearer s3cr3t-t0ken"
	rl := relaytest.Start(t, relay.Options{})
	target := newRecordingTarget(t, nil)
	f := startForward(t, "--url", rl.Channel, "--target", target.URL, "-v", "--save", t.TempDir(),
		"--header", "Authorization="+token, "--header", "X-Env: staging", "--header", "X-Github-Event=overridden")
	f.waitErr(t, "connected to")
	if !strings.Contains(f.err.String(), "(with Authorization, X-Env, X-Github-Event)") {
		t.Errorf("the start line does not name the headers:\n%s", f.err.String())
	}
	rl.Publish(t, nil, 1, relaytest.Body(1, 0))
	f.waitOutLines(t, 1)
	f.stop(t)
	r := target.requests()[0]
	for name, want := range map[string]string{"Authorization": token, "X-Env": "staging", "X-Github-Event": "overridden", "X-Github-Delivery": relaytest.ID(1)} {
		if got := r.header.Get(name); got != want {
			t.Errorf("the target got %s %q, want %q", name, got, want)
		}
	}
	if out := f.out.String() + f.err.String(); strings.Contains(out, "s3cr3t") {
		t.Errorf("the credential was printed:\n%s", out)
	}

	path := writeCapture(t, t.TempDir(), "d.json", capture.File{Delivery: delivery.Delivery{ID: "h", Event: "push", Headers: http.Header{"X-Github-Event": {"push"}}, Body: []byte("{}")}})
	code, out, errOut := run(t, "replay", "-v", "--target", target.URL, "--header", "X-Api-Key=k3y-value", path)
	if code != ExitOK || target.requests()[1].header.Get("X-Api-Key") != "k3y-value" || strings.Contains(out+errOut, "k3y-value") {
		t.Errorf("replay --header: exit %d, the target got %q; output:\n%s%s", code, target.requests()[1].header.Get("X-Api-Key"), out, errOut)
	}
	for _, bad := range []string{"Authorization Bearer s3cr3t", "Authorization Bearer s3cr3t:x", "X Bad=1", "X-Ok=line\nbreak"} {
		code, _, errOut := run(t, "replay", "--target", target.URL, "--header", bad, path)
		if code != ExitUsage || strings.Contains(errOut, "s3cr3t") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("--header %q: exit %d, stderr %q; want one usage line that does not show the value", bad, code, errOut)
		}
	}
}

// forward --health serves /healthz for a sidecar's probe: 200 with the
// counters and the last delivery while connected, 503 while the relay
// cannot be reached.
func TestForwardHealth(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	f := startForward(t, "--url", rl.Channel, "--health", "127.0.0.1:0")
	f.waitErr(t, "connected to")
	get := func(f *forwardRun) (int, map[string]any) {
		t.Helper()
		m := regexp.MustCompile(`health: (http://\S+)`).FindStringSubmatch(f.err.String())
		if m == nil {
			t.Fatalf("no health URL on stderr:\n%s", f.err.String())
		}
		resp, err := http.Get(m[1])
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, doc
	}
	rl.Publish(t, nil, 1, relaytest.Body(1, 0))
	f.waitOutLines(t, 1)
	code, doc := get(f)
	stats, _ := doc["stats"].(map[string]any)
	if code != http.StatusOK || doc["status"] != "connected" || doc["lastDelivery"] == nil || stats["Received"] != float64(1) {
		t.Errorf("/healthz while connected = %d %v, want 200, connected, a last delivery, 1 received", code, doc)
	}
	// gosmee's path answers too: a probe written for gosmee keeps working.
	healthURL := regexp.MustCompile(`health: (http://\S+)`).FindStringSubmatch(f.err.String())[1]
	if resp, err := http.Get(strings.TrimSuffix(healthURL, "z")); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /health = %v, %v; want 200 as /healthz", resp, err)
	} else {
		resp.Body.Close()
	}
	f.stop(t)

	gone := "http://" + closedAddr(t) + "/AbCdEf1234567890"
	g := startForward(t, "--url", gone, "--health", "127.0.0.1:0")
	g.waitErr(t, "health: ")
	g.waitErr(t, "cannot reach")
	if code, doc := get(g); code != http.StatusServiceUnavailable || doc["status"] == "connected" {
		t.Errorf("/healthz while the relay cannot be reached = %d %v, want 503", code, doc)
	}
	g.stop(t)

	// During the drain after the first Ctrl-C: 503 "stopping", not silence.
	inFlight, release := make(chan struct{}, 1), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight <- struct{}{}
		<-release
	}))
	t.Cleanup(slow.Close)
	d := startForward(t, "--url", rl.Channel, "--target", slow.URL, "--health", "127.0.0.1:0")
	t.Cleanup(func() { close(release) }) // before d's stop (cleanups run last first)
	d.waitErr(t, "connected to")
	rl.Publish(t, nil, 2, relaytest.Body(2, 0))
	<-inFlight
	d.cancel() // the first Ctrl-C: forward waits for the delivery in flight
	if code, doc := get(d); code != http.StatusServiceUnavailable || doc["status"] != "stopping" {
		t.Errorf("/healthz during the drain = %d %v, want 503 stopping", code, doc)
	}
}

// forward --save --save-scripts writes, beside each capture, a script that
// re-sends the delivery byte for byte with curl (gosmee writes curl -d,
// which strips line breaks and breaks the signature); and replay reads
// gosmee's own --saveDir files.
func TestForwardSaveScripts(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		testenv.Missing(t, "curl", "install Debian's curl")
	}
	rl := relaytest.Start(t, relay.Options{})
	save := t.TempDir()
	f := startForward(t, "--url", rl.Channel, "--save", save, "--save-scripts")
	f.waitErr(t, "connected to")
	body := []byte("{\n  \"pretty\": true\n}\n")
	rl.Publish(t, nil, 1, body)
	f.waitOutLines(t, 1)
	f.stop(t)
	scripts, _ := filepath.Glob(filepath.Join(save, "*.sh"))
	if len(scripts) != 1 {
		t.Fatalf("scripts in %s: %v, want one", save, scripts)
	}
	target := newRecordingTarget(t, nil)
	if out, err := exec.Command("sh", scripts[0], target.URL).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", scripts[0], err, out)
	}
	r := target.requests()[0]
	if !bytes.Equal(r.body, body) || r.header.Get("X-Github-Delivery") != relaytest.ID(1) {
		t.Errorf("the script sent %q (delivery %q), want the exact body of delivery %s", r.body, r.header.Get("X-Github-Delivery"), relaytest.ID(1))
	}
	if code, _, errOut := run(t, "forward", "--url", rl.Channel, "--save-scripts"); code != ExitUsage || !strings.Contains(errOut, "--save DIR") {
		t.Errorf("--save-scripts without --save: exit %d, %s", code, errOut)
	}
}

// forward --format gosmee reads hookline serve's gosmee stream
// (/events/<channel>) and forwards byte for byte: the format gosmee's
// client gets, read by hookline's own gosmee reader.
func TestForwardGosmeeFormatFromServe(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	target := newRecordingTarget(t, nil)
	f := startForward(t, "--url", rl.Channel, "--format", "gosmee", "--target", target.URL)
	f.waitErr(t, "connected to")
	if !strings.Contains(f.err.String(), "/events/") {
		t.Errorf("not subscribed to the gosmee stream:\n%s", f.err.String())
	}
	body := []byte("{\n  \"pretty\": true\n}\r\n")
	rl.Publish(t, nil, 1, body)
	f.waitOutLines(t, 1)
	f.stop(t)
	if reqs := target.requests(); len(reqs) != 1 || !bytes.Equal(reqs[0].body, body) {
		t.Errorf("target got %d requests, want 1 with %q byte for byte", len(reqs), body)
	}
}

// A channel that has never had a delivery says so once, after connecting
// (a sender given another URL is the usual cause); one that has had
// deliveries does not. Before, a typo'd channel name connected and waited
// with no hint.
func TestForwardSaysTheChannelIsEmpty(t *testing.T) {
	const hint = "no delivery on this channel yet; check the URL you gave the sender"
	rl := relaytest.Start(t, relay.Options{})
	f := startForward(t, "--url", rl.Channel, "--no-state")
	f.waitErr(t, hint)
	f.stop(t)
	if n := strings.Count(f.err.String(), hint); n != 1 {
		t.Errorf("the hint was printed %d times, want once:\n%s", n, f.err.String())
	}
	rl.Publish(t, nil, 1, relaytest.Body0(1))
	f = startForward(t, "--url", rl.Channel, "--no-state")
	f.waitErr(t, "connected to")
	rl.Publish(t, nil, 2, relaytest.Body0(2))
	f.waitOutLines(t, 1) // the ready event came before it
	f.stop(t)
	if strings.Contains(f.err.String(), hint) {
		t.Errorf("a channel with deliveries got the hint:\n%s", f.err.String())
	}
}
