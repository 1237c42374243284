package cli

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
)

// The secrets no output or file may hold: the webhook secret, an
// Authorization value (a bearer token, and a basic-auth password in a URL,
// which net/http turns into one).
const (
	leakSecret   = "s3cr3t-webhook-value-Zq7"
	leakToken    = "tok-authz-9f8e7d6c5b4a"
	leakPassword = "chanpass-Kd82"
)

// echoTarget answers every request with its headers in the body, as a
// careless server might: status decides the code.
func echoTarget(t *testing.T, status int) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(status)
		r.Header.Write(w)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// Every command, with -v and --json where it has them, on deliveries that
// carry an Authorization header, through URLs with a password, to targets
// that echo what they get: neither the secret nor any Authorization value
// shows in stdout, stderr, capture files, the state file or logs.
func TestSecretsNeverLeak(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	rl := relaytest.Start(t, relay.Options{})
	// The channel URL with a user and password, as a private relay's might.
	channel := strings.Replace(rl.Channel, "http://", "http://hook:"+leakPassword+"@", 1)
	ok, broken := echoTarget(t, http.StatusOK), echoTarget(t, http.StatusInternalServerError)
	okURL := strings.Replace(ok.URL, "http://", "http://user:"+leakPassword+"@", 1) + "/hook?token=" + leakToken
	save := t.TempDir()
	payload := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(payload, relaytest.Body(1, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	sig := hmacHex(leakSecret, relaytest.Body(1, 0))

	// Every stdout and stderr, by the command that wrote it (whose
	// arguments hold the secrets, of course: they are not checked).
	type output struct{ cmd, text string }
	var outputs []output
	record := func(cmd, out, errOut string) {
		outputs = append(outputs, output{cmd, out + errOut})
	}

	// forward: text -v, then --json -v; good, badly signed and refused
	// deliveries, all with an Authorization header.
	for i, mode := range [][]string{{"-v"}, {"--json", "-v"}} {
		for j, target := range []string{okURL, broken.URL} {
			args := append([]string{"--url", channel, "--target", target, "--secret", leakSecret, "--save", save, "--retries", "0"}, mode...)
			f := startForward(t, args...)
			f.waitErr(t, "connected to")
			base := 10*(2*i+j) + 1
			rl.Publish(t, nil, base, relaytest.Body(base, 0), "Authorization", "Bearer "+leakToken, "X-Hub-Signature-256", hmacHex(leakSecret, relaytest.Body(base, 0)))
			rl.Publish(t, nil, base+1, relaytest.Body(base+1, 0), "Authorization", "Basic "+leakToken, "X-Hub-Signature-256", hmacHex("wrong", relaytest.Body(base+1, 0)))
			rl.Publish(t, nil, base+2, []byte("not json "+leakToken[:4]), "Proxy-Authorization", "Bearer "+leakToken, "Cookie", "session="+leakToken)
			f.waitOutLines(t, 3)
			f.stop(t) // every line, a late one included, is written before it returns
			record("forward "+strings.Join(args, " "), f.out.String(), f.err.String())
		}
	}

	// replay: dry run -v, -v and --json -v to a target, --resign; the
	// saved captures, and one a user wrote by hand with Authorization.
	hand := t.TempDir()
	if _, err := capture.Write(hand, capture.File{Delivery: delivery.Delivery{ID: "by-hand", Event: "ping", Body: relaytest.Body(1, 0), Headers: http.Header{"Authorization": {"Bearer " + leakToken}, "X-Hub-Signature-256": {sig}}}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-v", save, hand},
		{"-v", "--secret", leakSecret, "--target", okURL, save, hand},
		{"--json", "-v", "--secret", leakSecret, "--target", broken.URL, "--retries", "0", save, hand},
		{"-v", "--secret", leakSecret, "--resign", hand},
	} {
		_, out, errOut := run(t, append([]string{"replay"}, args...)...)
		record("replay "+strings.Join(args, " "), out, errOut)
	}

	// send, to an echoing target that fails, and through the relay.
	for _, args := range [][]string{
		{"--event", "ping", "--secret", leakSecret, "--header", "Authorization=Bearer " + leakToken, "--target", broken.URL, "--retries", "0"},
		{"--event", "ping", "--secret", leakSecret, "--payload", payload, "--url", channel},
		{"--event", "ping", "--secret", leakSecret, "--target", "http://127.0.0.1:1/?token=" + leakToken, "--retries", "0"},
	} {
		_, out, errOut := run(t, append([]string{"send"}, args...)...)
		record("send "+strings.Join(args, " "), out, errOut)
	}

	// sign, verify (good and bad), events, version.
	for _, args := range [][]string{
		{"sign", "--secret", leakSecret, payload},
		{"verify", "--secret", leakSecret, "--signature", sig, payload},
		{"verify", "--secret", leakSecret, "--signature", hmacHex("x", nil), payload},
		{"verify", "--secret", leakSecret, "--signature", leakToken, payload},
		{"events", "--json"},
		{"version"},
	} {
		_, out, errOut := run(t, args...)
		record(strings.Join(args, " "), out, errOut)
	}

	// serve: a delivery with Authorization through it, its page and stream.
	out, errOut := runServeOnce(t, func(base string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/chan-secrets", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+leakToken)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		if resp, err := http.Get(base + "/chan-secrets"); err == nil {
			resp.Body.Close()
		}
	})
	record("serve", out, errOut)

	for _, o := range outputs {
		for _, leak := range []string{leakSecret, leakToken, leakPassword} {
			if strings.Contains(o.text, leak) {
				t.Errorf("%q leaked in the output of\n$ hookline %s\n%s", leak, o.cmd, o.text)
			}
		}
	}
	files := 0
	for _, dir := range []string{save, state} {
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			files++
			data, err := os.ReadFile(path)
			if err != nil {
				t.Error(err)
				return nil
			}
			for _, leak := range []string{leakSecret, leakToken, leakPassword} {
				if bytes.Contains(data, []byte(leak)) {
					t.Errorf("%q leaked into %s", leak, path)
				}
			}
			return nil
		})
	}
	// The runs wrote captures (every delivery), captures for a replay (the
	// failing target) and a state file: the check above looked at them.
	var names []string
	filepath.WalkDir(state, func(path string, d fs.DirEntry, _ error) error {
		if !d.IsDir() {
			names = append(names, strings.TrimPrefix(path, state))
		}
		return nil
	})
	sort.Strings(names)
	if files < 12 || !strings.Contains(strings.Join(names, " "), "/hookline/state/") {
		t.Errorf("checked %d files (state dir: %q); want the captures and the state file", files, names)
	}
}

// hmacHex signs body as GitHub does, independently of the code under test.
func hmacHex(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// runServeOnce runs `hookline serve` on a free port, calls use with its
// base URL, stops it and returns its output.
func runServeOnce(t *testing.T, use func(base string)) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut relaytest.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, []string{"hookline", "serve", "--addr", "127.0.0.1:0"}, strings.NewReader(""), &out, &errOut)
	}()
	// A hang ends serve, which ends the wait.
	guard := time.AfterFunc(hangGuard, cancel)
	text, ok := relaytest.Await(&out, done, func(text string) bool {
		_, rest, ok := strings.Cut(text, "listening on ")
		return ok && strings.Contains(rest, "\n")
	})
	guard.Stop()
	if !ok {
		t.Fatalf("serve did not start:\n%s%s", text, errOut.String())
	}
	_, rest, _ := strings.Cut(text, "listening on ")
	base, _, _ := strings.Cut(rest, "\n")
	base = strings.TrimSpace(base)
	use(base)
	cancel()
	<-done
	return out.String(), errOut.String()
}
