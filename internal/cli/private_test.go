package cli

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
)

// forward --new --private on a real relay: the token lands in the state
// directory (0600) and nowhere on screen nor in the relay's log; the
// channel is bound to the secret (--verify-on-relay), so an unsigned POST
// gets 401 while signed ones (one large enough to come by link, which
// needs the token too) reach the target; a later run finds the token by
// itself, a run without it is told what is missing, and ?token= in --url
// works and is not shown.
func TestForwardPrivateChannel(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv(tokenEnv, "")
	var logs relaytest.Buffer
	rl := relaytest.Start(t, relay.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	target := newRecordingTarget(t, nil)
	const secret = "private channel secret"

	f := startForward(t, "--new", "--private", "--server", rl.Base, "--target", target.URL, "--secret", secret, "--verify-on-relay")
	f.waitErr(t, "keeps only deliveries signed with the webhook secret")
	m := regexp.MustCompile(`created channel (\S+)`).FindStringSubmatch(f.err.String())
	if m == nil || !strings.Contains(m[1], "/"+relay.PrivatePrefix) {
		t.Fatalf("no private channel announced:\n%s", f.err.String())
	}
	channel := m[1]
	files, _ := filepath.Glob(filepath.Join(state, "hookline", "tokens", "*"))
	if len(files) != 1 {
		t.Fatalf("token files %v, want one", files)
	}
	st, err := os.Stat(files[0])
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file %v mode %v, want 0600", err, st.Mode())
	}
	b, _ := os.ReadFile(files[0])
	token := strings.TrimSpace(string(b))
	if len(token) < 26 {
		t.Fatalf("token %q is shorter than 130 bits of base32", token)
	}
	f.waitErr(t, "connected to") // subscribed: deliveries from now on reach it

	ch := &relaytest.Relay{Base: rl.Base, Channel: channel}
	if code := postStatus(t, channel, []byte(`{"unsigned":true}`)); code != http.StatusUnauthorized {
		t.Errorf("an unsigned POST to the bound channel = %d, want 401", code)
	}
	small, large := relaytest.Body0(1), relaytest.Body(2, 3<<20/2) // the large one comes by link
	ch.Publish(t, nil, 1, small, "X-Hub-Signature-256", sign(secret, small))
	ch.Publish(t, nil, 2, large, "X-Hub-Signature-256", sign(secret, large))
	f.waitOutLines(t, 2)
	if code := f.stop(t); code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, f.err.String())
	}
	if got := bodies(target); len(got) != 2 || got[0] != string(small) || got[1] != string(large) {
		t.Fatalf("target got %d deliveries, want the two signed ones", len(got))
	}

	// A later run on the channel: the token is found in the state directory.
	g := startForward(t, "--url", channel, "--target", target.URL, "--secret", secret)
	g.waitErr(t, "connected to")
	ch.Publish(t, nil, 3, relaytest.Body0(3), "X-Hub-Signature-256", sign(secret, relaytest.Body0(3)))
	g.waitOutLines(t, 1)
	g.stop(t)

	// Elsewhere (no token kept): a clear refusal; then ?token= in the URL.
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	code, _, errOut := run(t, "forward", "--no-color", "--url", channel, "--target", target.URL)
	if code == ExitOK || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "read token") {
		t.Errorf("forward without the token: exit %d\n%s", code, errOut)
	}
	// Said once: before, the relay's refusal, then the client's hint
	// about the read token and the state directory, then "check --url".
	_, refusal, _ := strings.Cut(errOut, "401")
	if n := strings.Count(refusal, "state directory"); n != 1 || strings.Contains(refusal, "check --url") {
		t.Errorf("forward without the token: the refusal repeats itself (%d times \"state directory\"):\n%s", n, refusal)
	}
	h := startForward(t, "--url", channel+"?token="+token, "--target", target.URL, "--secret", secret, "--last-event-id", "2")
	h.waitOutLines(t, 1) // delivery 3 again, from the history
	h.stop(t)
	if n := len(target.requests()); n != 4 {
		t.Errorf("target got %d deliveries in all, want 4", n)
	}

	for what, text := range map[string]string{"forward's output": f.out.String() + f.err.String() + g.out.String() + g.err.String() + h.out.String() + h.err.String() + errOut, "the relay's log": logs.String()} {
		if strings.Contains(text, token) {
			t.Errorf("%s holds the token:\n%s", what, text)
		}
	}
}

// postStatus POSTs body to url as JSON and returns the status.
func postStatus(t *testing.T, url string, body []byte) int {
	t.Helper()
	c := &http.Client{Timeout: hangGuard}
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestPrivateUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--private", "--url", "http://127.0.0.1:1/c"}, "--private makes the channel --new creates private"},
		{[]string{"--verify-on-relay", "--secret", "s"}, "--verify-on-relay binds a private channel of a relay"},
		{[]string{"--verify-on-relay", "--new", "--private"}, "--verify-on-relay needs the webhook secret"},
	} {
		code, _, errOut := run(t, append([]string{"forward"}, c.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("forward %v: exit %d %q, want a usage error with %q", c.args, code, errOut, c.want)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "not a channel"), []byte("s"), 0o600)
	code, _, errOut := run(t, "serve", "--channel-secrets", dir)
	if code != ExitUsage || !strings.Contains(errOut, "named as the channel it binds") {
		t.Errorf("serve with a bad secret file name: exit %d %q", code, errOut)
	}
}

// A gap is reported at once with its count: a line of the trace, an object
// of --json, and forward's /healthz counters.
func TestForwardReportsAGapWithItsCount(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	rl := relaytest.Start(t, relay.Options{HistoryCount: 5})
	for n := 1; n <= 20; n++ {
		rl.Publish(t, nil, n, relaytest.Body0(n))
	}
	target := newRecordingTarget(t, nil)
	f := startForward(t, "--url", rl.Channel, "--target", target.URL, "--last-event-id", "1")
	f.waitErr(t, "gap: the relay no longer had 14 deliveries when this client asked")
	f.waitOutLines(t, 5)
	f.stop(t)
	if !strings.Contains(f.err.String(), "(after event 1)") {
		t.Errorf("the gap line does not say where:\n%s", f.err.String())
	}
	g := startForward(t, "--url", rl.Channel, "--target", target.URL, "--last-event-id", "2", "--json")
	g.waitOut(t, `{"gap":{"afterId":"2","oldestId":"16","count":13,"reason":"expired","message":"the relay no longer had 13 deliveries`)
	g.waitOutLines(t, 6)
	g.stop(t)
}

// --new --private on a relay that makes no private channels (smee.io
// answers /new with a redirect) says so, rather than using a public one.
func TestCreatePrivateChannelOnAnotherRelay(t *testing.T) {
	smee := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/AbCdEf1234567890", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(smee.Close)
	_, token, err := createChannel(t.Context(), smee.URL, nil, true)
	if err == nil || token != "" || !strings.Contains(err.Error(), "creating a private channel on "+smee.URL+": the relay answered 307 Temporary Redirect without a private channel") {
		t.Errorf("a private channel from a smee-like relay: %q, %v", token, err)
	}
	rl := relaytest.Start(t, relay.Options{})
	u, token, err := createChannel(t.Context(), rl.Base, nil, true)
	if err != nil || token == "" || !strings.HasPrefix(u, rl.Base+"/"+relay.PrivatePrefix) {
		t.Errorf("a private channel from hookline serve: %q, %q, %v", u, token, err)
	}
}
