package cli

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
)

// TestSecretsNeverPrinted runs every command that takes a secret, on its
// success and failure paths and with -v, and checks that the secret
// appears in no output.
func TestSecretsNeverPrinted(t *testing.T) {
	const secret = "s3cr3t-Zebra-Quokka-42"
	secretFile := writeFile(t, "secret", []byte(secret+"\n"))
	payload := writeFile(t, "payload.json", []byte(`{"action":"opened","note":"hello"}`))
	capDir := t.TempDir()
	writeCapture(t, capDir, "auth.json", capture.File{Delivery: delivery.Delivery{ID: "auth", Event: "issues", ReceivedAt: time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC), Headers: http.Header{
		"Authorization":       {"Bearer ghs_tokenThatMustNotShow"},
		"X-Hub-Signature-256": {"sha256=0000000000000000000000000000000000000000000000000000000000000000"},
		"Content-Type":        {"application/json"},
	}, Body: []byte(`{"action":"opened"}`)}})
	ok := newRecordingTarget(t, nil)
	// A target that echoes the secret in its error body.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "wrong secret, I expected "+secret, http.StatusBadRequest)
	}))
	t.Cleanup(echo.Close)

	tests := []struct {
		name  string
		env   string
		stdin string
		args  []string
		want  string // some other output proving the path ran
	}{
		{name: "sign", args: []string{"sign", "--secret", secret, payload}},
		{name: "sign from env", env: secret, args: []string{"sign", payload}},
		{name: "sign from file", args: []string{"sign", "--secret-file", secretFile, payload}},
		{name: "sign secret given as file", args: []string{"sign", "--secret-file", secret, payload}},
		{name: "sign both", args: []string{"sign", "--secret", secret, "--secret-file", secretFile, payload}},
		{name: "sign stdin newline", stdin: "x\n", args: []string{"sign", "--secret", secret}},
		{name: "verify valid", stdin: "Hello, World!", args: []string{"verify", "--secret", secret, "--signature", "sha256=00"}},
		{name: "verify newline", stdin: "Hello\n", args: []string{"verify", "--secret", secret, "--signature", "sha1=00"}},
		{name: "verify no signature", args: []string{"verify", "--secret", secret, payload}},
		{name: "send ok", args: []string{"send", "--event", "issues.opened", "--secret", secret, "--target", ok.URL}},
		{name: "send payload", args: []string{"send", "--event", "issues.closed", "--payload", payload, "--secret", secret, "--target", ok.URL}},
		{name: "send echoing target", args: []string{"send", "--event", "push", "--retries", "0", "--secret-file", secretFile, "--target", echo.URL}, want: "wrong secret, I expected [secret]"},
		{name: "send unreachable", args: []string{"send", "--event", "push", "--retries", "0", "--secret", secret, "--target", "http://127.0.0.1:1"}},
		{name: "send usage error", args: []string{"send", "--event", "pull_request", "--secret", secret, "--target", ok.URL}},
		{name: "replay verbose", args: []string{"replay", "-v", "--secret", secret, "--target", ok.URL, capturesDir}},
		{name: "replay resign verbose", args: []string{"replay", "-v", "--secret", secret, "--resign", "--target", ok.URL, capturesDir}},
		{name: "replay resign json", args: []string{"replay", "-v", "--json", "--secret", secret, "--resign", "--target", ok.URL, capturesDir}},
		{name: "replay dry run verbose", env: secret, args: []string{"replay", "-v", "--resign", capDir, capturesDir}, want: "Authorization: [redacted]"},
		{name: "replay echoing target", args: []string{"replay", "-v", "--retries", "0", "--resign", "--secret", secret, "--target", echo.URL, capDir}},
		{name: "replay bad path", args: []string{"replay", "--secret", secret, filepath.Join(capDir, "nope")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(secretEnv, tt.env)
			_, out, errOut := runStdin(t, tt.stdin, tt.args...)
			for _, s := range []string{secret, "ghs_tokenThatMustNotShow"} {
				if strings.Contains(out, s) || strings.Contains(errOut, s) {
					t.Errorf("%q printed %q:\nstdout:\n%s\nstderr:\n%s", tt.args, s, out, errOut)
				}
			}
			if !strings.Contains(out+errOut, tt.want) {
				t.Errorf("%q: output lacks %q:\nstdout:\n%s\nstderr:\n%s", tt.args, tt.want, out, errOut)
			}
		})
	}
}

// A short secret is masked only where it stands as a whole value: the rest
// of a message stays readable, and the secret gets one warning instead.
func TestShortSecretDoesNotGarbleMessages(t *testing.T) {
	code, _, errOut := run(t, "replay", "--secret", "s")
	if code != ExitUsage || !strings.Contains(errOut, "replay needs capture files") {
		t.Errorf("exit %d, stderr %q; want the usage error readable", code, errOut)
	}
	if strings.Count(errOut, "warning: the secret is 1 character long") != 1 {
		t.Errorf("stderr %q, want one warning about the short secret", errOut)
	}
	for _, tt := range []struct{ text, secret, want string }{
		{"send needs --event", "s", "send needs --event"},
		{`{"secret":"s"} s`, "s", `{"secret":"[secret]"} [secret]`},
		{"a/test/b test tests", "test", "a/[secret]/b [secret] tests"},
		{"xlong-secret-valuex", "long-secret-value", "x[secret]x"}, // long: masked anywhere
	} {
		if got := redactSecret(tt.text, tt.secret); got != tt.want {
			t.Errorf("redactSecret(%q, %q) = %q, want %q", tt.text, tt.secret, got, tt.want)
		}
	}
}
