package interop

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joho/godotenv"

	"github.com/hookline/hookline/internal/cli"
	"github.com/hookline/hookline/internal/testutil/githubtest"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
)

// TestAppNewInChromium: hookline app new's page, opened in headless
// Chromium, submits the App manifest to GitHub's web form (githubtest's,
// which, where GitHub asks the user to confirm, redirects at once); the
// browser follows the redirect back to the loopback callback, and the
// command writes the App's credentials to a 0600 .env with the keys
// Probot reads, and ends.
func TestAppNewInChromium(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	gh := githubtest.New(t, "")
	rl := relaytest.Start(t, relay.Options{})
	env := filepath.Join(t.TempDir(), ".env")
	var out, errOut relaytest.Buffer
	done := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		done <- cli.Run(ctx, []string{"hookline", "app", "new", "--no-color", "--no-browser", "--name", "chromium dev app", "--url", rl.Channel,
			"--events", "issues", "--permission", "issues=read", "--github-web", gh.WebURL, "--github-api", gh.URL, "--out", env}, strings.NewReader(""), &out, &errOut)
	}()
	errOut.WaitFor(t, "in your browser")
	page := strings.Fields(errOut.String()[strings.Index(errOut.String(), "open ")+5:])[0]

	b := startBrowser(t)
	p := b.newPage(1000, 700)
	p.must("Page.navigate", map[string]any{"url": page}, nil)
	p.waitFor("the manifest form", `document.querySelector('#manifest button') !== null`)
	if got := p.text(`document.querySelector('ul').textContent`); !strings.Contains(got, rl.Channel) || !strings.Contains(got, "issues") {
		t.Errorf("the page's summary: %q", got)
	}
	p.must("Runtime.evaluate", map[string]any{"expression": `document.querySelector('#manifest button').click()`}, nil)
	p.waitFor("the callback's page", `location.pathname === '/callback' && document.querySelector('#result') !== null`)
	if got := p.text(`document.querySelector('#result').textContent`); got != "App chromium dev app is made" {
		t.Errorf("the callback's page says %q", got)
	}
	select {
	case code := <-done:
		if code != cli.ExitOK {
			t.Fatalf("app new: exit %d\n%s", code, errOut.String())
		}
	case <-time.After(smeeWait):
		t.Fatalf("app new did not end:\n%s", errOut.String())
	}
	info, err := os.Stat(env)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf(".env: %v (mode %v), want mode 0600", err, info.Mode())
	}
	vars, err := godotenv.Read(env)
	if err != nil {
		t.Fatal(err)
	}
	if vars["APP_ID"] != githubtest.AppID || vars["PRIVATE_KEY"] != string(githubtest.KeyPEM()) || vars["WEBHOOK_SECRET"] != gh.AppHook().Secret ||
		vars["GITHUB_CLIENT_ID"] == "" || vars["GITHUB_CLIENT_SECRET"] == "" || vars["WEBHOOK_PROXY_URL"] != rl.Channel {
		t.Errorf(".env holds %d variables; APP_ID %q, WEBHOOK_PROXY_URL %q", len(vars), vars["APP_ID"], vars["WEBHOOK_PROXY_URL"])
	}
	if name, hookURL, _, _, ok := gh.Manifest(); !ok || name != "chromium dev app" || hookURL != rl.Channel {
		t.Errorf("GitHub made %q → %s", name, hookURL)
	}
	if !strings.Contains(out.String(), "hookline forward --app --app-env "+env) {
		t.Errorf("printed %q", out.String())
	}
	if problems := b.problems(); len(problems) > 0 {
		t.Errorf("the browser reported %v", problems)
	}
}
