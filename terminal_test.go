package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/testenv"
)

// forward in a real terminal (tmux, 200 columns): its trace lines use the
// terminal's width (a long repository name is not cut to fit 80 columns),
// and after Ctrl-C the summary starts on a line of its own, not after the
// ^C the terminal echoed.
func TestForwardInATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hookline and runs it in tmux")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		testenv.Missing(t, "tmux", "install it with: sh internal/testutil/testenv/install.sh tmux")
	}
	bin := testenv.BuildHookline(t)
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(target.Close)
	dir := t.TempDir()
	socket := filepath.Join(dir, "tmux.sock")
	tmux := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-S", socket}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	screen := func() string { return tmux("capture-pane", "-p", "-J", "-t", "hl") }
	waitFor := func(what string) string {
		t.Helper()
		var s string
		testenv.Poll(t, fmt.Sprintf("the terminal to show %q", what), 20*time.Millisecond, func() bool { // tmux's screen is only looked at
			s = screen()
			return strings.Contains(s, what)
		})
		return s
	}
	env := fmt.Sprintf("env XDG_STATE_HOME=%s XDG_CONFIG_HOME=%s HOOKLINE_SECRET=terminal-test-secret", dir, os.DevNull)
	tmux("new-session", "-d", "-s", "hl", "-x", "200", "-y", "50",
		env+" "+bin+" forward --listen 127.0.0.1:0 --channel terminaltest --target "+target.URL+"; sleep 60") // the screen stays readable after forward exits
	t.Cleanup(func() { exec.Command("tmux", "-S", socket, "kill-server").Run() })
	s := waitFor("connected to")
	channel := ""
	for _, line := range strings.Split(s, "\n") {
		if _, rest, ok := strings.Cut(line, "POST deliveries to "); ok {
			channel = strings.TrimSpace(rest)
		}
	}
	repo := "octo-org/" + strings.Repeat("a-long-repository-name-", 3) + "end"
	payload := filepath.Join(dir, "payload.json")
	os.WriteFile(payload, []byte(`{"action":"opened","repository":{"full_name":"`+repo+`"},"sender":{"login":"octocat"}}`), 0o644)
	send := exec.Command(bin, "send", "--event", "issues", "--payload", payload, "--url", channel)
	send.Env = append(os.Environ(), "HOOKLINE_SECRET=terminal-test-secret", "XDG_CONFIG_HOME="+os.DevNull)
	if out, err := send.CombinedOutput(); err != nil {
		t.Fatalf("send: %v\n%s", err, out)
	}
	if s := waitFor("issues.opened"); !strings.Contains(s, repo) {
		t.Errorf("the trace line cut the repository name on a 200-column terminal:\n%s", s)
	}
	tmux("send-keys", "-t", "hl", "C-c")
	s = waitFor("summary:")
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "summary:") && !strings.HasPrefix(line, "summary:") {
			t.Errorf("the summary does not start its line: %q\n%s", line, s)
		}
	}
}
