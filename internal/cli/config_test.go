package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/webhooks"
)

// writeConfig writes a config file named name in a fresh config directory.
func writeConfig(t *testing.T, name, text string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	if err := os.MkdirAll(filepath.Join(dir, "hookline"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "hookline", name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigFile: a command's section gives its flags' defaults; the
// command line wins over it, and so does the environment.
func TestConfigFile(t *testing.T) {
	secretFile := writeFile(t, "secret", []byte("from-the-file\n"))
	for _, format := range []string{"yaml", "yml"} {
		t.Run(format, func(t *testing.T) {
			target := newRecordingTarget(t, nil)
			text := "send:\n  url: " + target.URL + "\n  event: issues.opened\n  secret-file: " + secretFile + "\n  retries: 0\n"
			writeConfig(t, "config."+format, text)

			if code, _, errOut := run(t, "send"); code != ExitOK {
				t.Fatalf("send with the config: exit %d\n%s", code, errOut)
			}
			if code, _, errOut := run(t, "send", "--event", "ping"); code != ExitOK {
				t.Fatalf("send --event ping: exit %d\n%s", code, errOut)
			}
			t.Setenv(secretEnv, "from-the-environment")
			if code, _, errOut := run(t, "send"); code != ExitOK {
				t.Fatalf("send with HOOKLINE_SECRET: exit %d\n%s", code, errOut)
			}
			reqs := target.requests()
			if len(reqs) != 3 {
				t.Fatalf("target got %d requests, want 3", len(reqs))
			}
			for i, want := range []struct{ event, secret string }{
				{"issues", "from-the-file"},        // all from the file
				{"ping", "from-the-file"},          // the flag wins
				{"issues", "from-the-environment"}, // the environment wins
			} {
				r := reqs[i]
				ok, _ := webhooks.Verify(want.secret, r.body, r.header.Get("X-Hub-Signature-256"))
				if r.header.Get("X-GitHub-Event") != want.event || !ok {
					t.Errorf("request %d: event %q, signed with %q: %v; want %s signed with %q", i, r.header.Get("X-GitHub-Event"), want.secret, ok, want.event, want.secret)
				}
			}
		})
	}
}

// TestConfigFileHome: "~/" in a value is the home directory.
func TestConfigFileHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.WriteFile(filepath.Join(home, "secret"), []byte("at-home\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := newRecordingTarget(t, nil)
	writeConfig(t, "config.yaml", "send:\n  url: "+target.URL+"\n  secret-file: ~/secret\n")
	if code, _, errOut := run(t, "send", "--event", "ping"); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	r := target.requests()[0]
	if ok, _ := webhooks.Verify("at-home", r.body, r.header.Get("X-Hub-Signature-256")); !ok {
		t.Errorf("not signed with ~/secret's secret")
	}
}

// TestConfigFileEnvironmentWins: a flag's environment variable beats the
// config file.
func TestConfigFileEnvironmentWins(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	path := writeConfig(t, "config.yaml", "forward:\n  target: http://127.0.0.1:1/from-the-file\n  url: "+rl.Channel+"\n")
	t.Setenv("HOOKLINE_TARGET", "http://127.0.0.1:1/from-the-environment")
	f := startForward(t)
	f.waitErr(t, "connected to")
	f.stop(t)
	if !strings.Contains(f.err.String(), "→ http://127.0.0.1:1/from-the-environment") {
		t.Errorf("stderr, want the environment's target:\n%s", f.err.String())
	}
	// The start lines say which config file is in force.
	if !strings.Contains(f.err.String(), "config: "+path+"\n") {
		t.Errorf("stderr does not name the config file %s:\n%s", path, f.err.String())
	}
}

func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file, text, want string
	}{
		{"unknown option", "config.yaml", "send:\n  evnt: push\n", `send has no option "evnt" (did you mean event?)`},
		{"unknown command", "config.yaml", "sned:\n  event: push\n", `no command "sned"`},
		{"a secret", "config.yaml", "send:\n  secret: hunter2\n", "keep the secret out of the config file"},
		{"not a section", "config.yaml", "event: push\n", `"event" is not a section of options`},
		{"wrong type", "config.yaml", "send:\n  retries: many\n", "retries: want a number, not text"},
		{"a TOML file", "config.toml", "[send]\nevent = \"push\"\n", "is not read: hookline's config file is YAML"},
		{"a list for one value", "config.yaml", "send:\n  payload: [a, b]\n", "send: payload: want text, not a list"},
		{"not yaml", "config.yml", "send: [\n", "config:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.file, tc.text)
			code, _, errOut := run(t, "send", "--no-color", "--event", "ping", "--url", "http://127.0.0.1:1/x")
			if code != ExitUsage || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want 2 and one line with %q", code, errOut, tc.want)
			}
			if tc.name != "not yaml" && tc.name != "unknown command" && tc.name != "not a section" && !strings.Contains(errOut, path) {
				t.Errorf("stderr %q does not name the file %s", errOut, path)
			}
			if strings.Contains(errOut, "hunter2") {
				t.Error("the secret was printed")
			}
		})
	}
	// The target's secret is refused too (it has no file flag: its place
	// is HOOKLINE_TARGET_SECRET).
	path := writeConfig(t, "config.yaml", "forward:\n  target-secret: hunter2\n")
	if code, _, errOut := run(t, "forward", "--no-color", "--url", "http://127.0.0.1:1/x"); code != ExitUsage || !strings.Contains(errOut, "keep the target's secret out of the config file") || !strings.Contains(errOut, path) || strings.Contains(errOut, "hunter2") {
		t.Errorf("target-secret in the config: exit %d, stderr %q; want 2 naming the file, the secret not printed", code, errOut)
	}
	// A section typo stops only the command it is a typo of: version and
	// sign run, with one warning line.
	writeConfig(t, "config.yaml", "forwrd:\n  target: http://127.0.0.1:3000/hook\n")
	if code, _, errOut := run(t, "forward", "--no-color", "--url", "http://127.0.0.1:1/x"); code != ExitUsage || !strings.Contains(errOut, `no command "forwrd" (did you mean forward?)`) {
		t.Errorf("forward with a forwrd section: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := run(t, "version"); code != ExitOK || !strings.Contains(out, "hookline") || !strings.Contains(errOut, `warning: config`) {
		t.Errorf("version with a forwrd section: exit %d, stdout %q, stderr %q; want it to run with a warning", code, out, errOut)
	}
	// Two config files: which one is meant is unclear.
	dir := filepath.Dir(writeConfig(t, "config.yaml", "send: {}\n"))
	os.WriteFile(filepath.Join(dir, "config.yml"), []byte("send: {}\n"), 0o644)
	if code, _, errOut := run(t, "send", "--no-color", "--event", "ping", "--url", "http://127.0.0.1:1/x"); code != ExitUsage || !strings.Contains(errOut, "two config files") {
		t.Errorf("two files: exit %d, stderr %q", code, errOut)
	}
	// HOOKLINE_CONFIG names one elsewhere.
	t.Setenv(configEnv, filepath.Join(t.TempDir(), "missing.yaml"))
	if code, _, errOut := run(t, "send", "--no-color", "--event", "ping", "--url", "http://127.0.0.1:1/x"); code != ExitUsage || !strings.Contains(errOut, "HOOKLINE_CONFIG=") {
		t.Errorf("missing HOOKLINE_CONFIG file: exit %d, stderr %q", code, errOut)
	}
}
