package cli

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/joho/godotenv"

	"github.com/hookline/hookline/internal/githubapi"
	"github.com/hookline/hookline/internal/testutil/githubtest"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
)

// appKeyFile writes the App's private key to a file and returns its path.
func appKeyFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.private-key.pem")
	if err := os.WriteFile(path, githubtest.KeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// appRecordFiles lists the App records in the state directory.
func appRecordFiles(t *testing.T, state string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(state, "hookline", "app-hook-*"))
	return files
}

// TestForwardApp: forward --app points the App's webhook at the channel
// with the given secret, verifies and forwards the App's deliveries, and
// puts the webhook's URL back at Ctrl-C; while it runs, a record in the
// state directory says what to put back. Every request carries the App's
// token, checked by githubtest with the App's public key.
func TestForwardApp(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("GITHUB_TOKEN", "") // no user token is needed
	gh := githubtest.New(t, "")
	rl := relaytest.Start(t, relay.Options{})
	target := newRecordingTarget(t, nil)
	secret := "app webhook secret, long and random"

	// A channel on this machine, with GitHub's own API: refused before
	// anything is asked of GitHub.
	code, _, errOut := run(t, "forward", "--no-color", "--app", "--app-id", githubtest.AppID, "--app-key", appKeyFile(t), "--url", "http://127.0.0.1:9/AbCdEf1234567890")
	if code != ExitUsage || !strings.Contains(errOut, "GitHub cannot reach http://127.0.0.1:9/AbCdEf1234567890") {
		t.Errorf("a loopback channel: exit %d, %q", code, errOut)
	}

	f := startForward(t, "--app", "--app-id", githubtest.AppID, "--app-key", appKeyFile(t), "--github-api", gh.URL,
		"--url", rl.Channel, "--target", target.URL, "--secret", secret)
	f.waitErr(t, "pointed the GitHub App's webhook at")
	if h := gh.AppHook(); h.URL != rl.Channel || h.Secret != secret {
		t.Fatalf("the App's webhook %+v, want %s with the given secret", h, rl.Channel)
	}
	if n := len(appRecordFiles(t, state)); n != 1 {
		t.Errorf("%d App records while forward runs, want 1", n)
	}
	ping := []byte(`{"zen":"Design for failure.","hook_id":1,"hook":{"type":"App","id":1}}`)
	if _, err := gh.Deliver(githubtest.AppHookID, "ping", ping); err != nil {
		t.Fatal(err)
	}
	installed := []byte(`{"action":"created","installation":{"id":7}}`)
	if _, err := gh.Deliver(githubtest.AppHookID, "installation", installed); err != nil {
		t.Fatal(err)
	}
	f.waitOutLines(t, 2)
	if code := f.stop(t); code != ExitOK {
		t.Errorf("exit %d; stderr:\n%s", code, f.err.String())
	}
	if got := bodies(target); !slices.Equal(got, []string{string(ping), string(installed)}) {
		t.Errorf("target got %q", got)
	}
	if out := f.out.String(); strings.Count(out, "verified") != 2 {
		t.Errorf("trace, want both verified:\n%s", out)
	}
	if h := gh.AppHook(); h.URL != githubtest.AppHookURL {
		t.Errorf("after forward, the App's webhook URL is %s, want it put back to %s", h.URL, githubtest.AppHookURL)
	}
	errOut = f.err.String()
	for _, want := range []string{"the App's webhook secret is now the one given with --secret", "put the GitHub App's webhook back to " + githubtest.AppHookURL, "its secret stays the one this run set"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut+f.out.String(), secret) || strings.Contains(errOut, "PRIVATE KEY") {
		t.Error("the secret or the key was printed")
	}
	if files := appRecordFiles(t, state); len(files) != 0 {
		t.Errorf("records left: %v", files)
	}
	if want := []string{"get-webhook-config-for-app", "update-webhook-config-for-app", "update-webhook-config-for-app"}; !slices.Equal(opsOf(gh), want) {
		t.Errorf("operations %v, want %v", opsOf(gh), want)
	}
}

// TestForwardAppAfterACrash: a record left by a run that died (its
// process gone) while the App pointed at its channel: the next run says
// so, takes over, and at its end puts back the URL from before the crashed
// run, not the dead channel. A record whose process still runs stops the
// new run.
func TestForwardAppAfterACrash(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	gh := githubtest.New(t, "")
	rl := relaytest.Start(t, relay.Options{})
	dead := exec.Command(os.Args[0], "-test.run=^$") // this test binary, running nothing: a process that has ended
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadChannel := "https://smee.io/DeadChannel1234"
	gh.SetAppHookURL(deadChannel)
	cr := appCredentials{app: &githubapi.App{ID: githubtest.AppID}}
	path, err := cr.recordPath(gh.URL)
	if err != nil {
		t.Fatal(err)
	}
	writeRecord := func(pid int) {
		rec, _ := json.Marshal(appRecord{AppID: githubtest.AppID, API: gh.URL, Channel: deadChannel, PID: pid, Previous: githubapi.HookConfig{URL: "https://prod.example.com/github"}})
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, rec, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"forward", "--no-color", "--app", "--app-id", githubtest.AppID, "--app-key", appKeyFile(t), "--github-api", gh.URL, "--url", rl.Channel, "--secret", "a long enough secret for the test"}

	// A record of a live process (this test's): refused, nothing changed.
	writeRecord(os.Getppid())
	code, _, errOut := run(t, args...)
	if code != ExitFailure || !strings.Contains(errOut, "another hookline forward (pid") || gh.AppHook().URL != deadChannel {
		t.Errorf("live record: exit %d, App URL %s, stderr %q", code, gh.AppHook().URL, errOut)
	}

	writeRecord(dead.Process.Pid)
	f := startForward(t, args[2:]...)
	f.waitErr(t, "pointed the GitHub App's webhook at")
	if !strings.Contains(f.err.String(), "an earlier forward (pid") || !strings.Contains(f.err.String(), "puts back https://prod.example.com/github") {
		t.Errorf("stderr:\n%s", f.err.String())
	}
	f.stop(t)
	if got := gh.AppHook().URL; got != "https://prod.example.com/github" {
		t.Errorf("after the run, the App points at %s, want the URL from before the crash", got)
	}
	if files := appRecordFiles(t, state); len(files) != 0 {
		t.Errorf("records left: %v", files)
	}
}

// TestForwardAppSecretKept: without a secret, an App that has one keeps
// it (GitHub never returns it, so a new one could not be undone), and the
// deliveries go unverified, which forward says; --app-env's WEBHOOK_SECRET
// verifies them.
func TestForwardAppSecretKept(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	gh := githubtest.New(t, "")
	rl := relaytest.Start(t, relay.Options{})
	before := gh.AppHook().Secret
	f := startForward(t, "--app", "--app-id", githubtest.AppID, "--app-key", appKeyFile(t), "--github-api", gh.URL, "--url", rl.Channel)
	f.waitErr(t, "pointed the GitHub App's webhook at")
	f.stop(t)
	if gh.AppHook().Secret != before || !strings.Contains(f.err.String(), "deliveries are forwarded unverified") {
		t.Errorf("secret %q (was %q); stderr:\n%s", gh.AppHook().Secret, before, f.err.String())
	}

	env := filepath.Join(t.TempDir(), ".env")
	os.WriteFile(env, []byte("APP_ID="+githubtest.AppID+"\nPRIVATE_KEY=\""+strings.ReplaceAll(string(githubtest.KeyPEM()), "\n", `\n`)+"\"\nWEBHOOK_SECRET="+before+"x\n"), 0o600)
	target := newRecordingTarget(t, nil)
	f = startForward(t, "--app", "--app-env", env, "--github-api", gh.URL, "--url", rl.Channel, "--target", target.URL)
	f.waitErr(t, "pointed the GitHub App's webhook at")
	if _, err := gh.Deliver(githubtest.AppHookID, "ping", []byte(`{"zen":"x"}`)); err != nil {
		t.Fatal(err)
	}
	f.waitOutLines(t, 1)
	f.stop(t)
	if !strings.Contains(f.out.String(), "verified") || !strings.Contains(f.err.String(), "now WEBHOOK_SECRET in "+env) || gh.AppHook().Secret != before+"x" {
		t.Errorf("with --app-env: secret %q; out:\n%s\nerr:\n%s", gh.AppHook().Secret, f.out.String(), f.err.String())
	}
}

// TestForwardSeveralOwners: --repo twice and --org once make three
// webhooks on one channel, all removed at the end; when one cannot be made,
// those already made are removed and the error names it.
func TestForwardSeveralOwners(t *testing.T) {
	gh := githubtest.New(t, "")
	t.Setenv("GITHUB_TOKEN", githubtest.Token)
	rl := relaytest.Start(t, relay.Options{})
	args := []string{"--repo", "octo/one", "--repo", "octo/two", "--org", "octo-org", "--github-api", gh.URL, "--url", rl.Channel}
	f := startForward(t, args...)
	f.waitErr(t, "on organisation octo-org")
	owners := []string{}
	for _, h := range gh.Hooks() {
		owners = append(owners, h.Owner)
		if h.URL != rl.Channel || h.Secret != gh.Hooks()[0].Secret {
			t.Errorf("hook %+v, want the channel and one secret for all", h)
		}
	}
	if want := []string{"/repos/octo/one", "/repos/octo/two", "/orgs/octo-org"}; !slices.Equal(owners, want) {
		t.Errorf("hooks on %v, want %v", owners, want)
	}
	f.stop(t)
	if n := len(gh.Hooks()); n != 0 || strings.Count(f.err.String(), "deleted webhook") != 3 {
		t.Errorf("%d hooks left; stderr:\n%s", n, f.err.String())
	}

	// The second one is refused: the first is removed, none is left.
	gh.RefuseRequest("POST", "/repos/octo/two/hooks", githubtest.Refusal{Status: 404, Body: `{"message":"Not Found"}`})
	// startCommand: its stderr is written by two goroutines (the trace and
	// the webhooks' set-up), as a terminal is; run's buffer is not safe
	// for that.
	failed := startCommand(t, append([]string{"forward", "--no-color"}, args...)...)
	code, errOut := failed.wait(t), failed.err.String()
	if code == ExitOK || !strings.Contains(errOut, "octo/two failed: undoing the 1 webhook already set up") || !strings.Contains(errOut, "deleted webhook") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	if n := len(gh.Hooks()); n != 0 {
		t.Errorf("%d hooks left after the failure: %+v", n, gh.Hooks())
	}
}

// TestDeliveriesApp: deliveries --app lists the App's deliveries (with
// --status and --events), replays them here through replay's pipeline,
// verified with the App's secret, and has GitHub redeliver the failed one.
func TestDeliveriesApp(t *testing.T) {
	gh := githubtest.New(t, "")
	t.Setenv("GITHUB_TOKEN", "")
	statuses := []int{200, 500, 200}
	hookURL := newRecordingTarget(t, func(n int, _ recordedRequest) int {
		if n < len(statuses) {
			return statuses[n]
		}
		return 200
	})
	gh.SetAppHookURL(hookURL.URL)
	payloads := []string{`{"action":"created","installation":{"id":1}}`, `{"action":"opened","issue":{"number":2}}`, `{"ref":"refs/heads/main"}`}
	for i, event := range []string{"installation", "issues", "push"} {
		if _, err := gh.Deliver(githubtest.AppHookID, event, []byte(payloads[i])); err != nil {
			t.Fatal(err)
		}
	}
	base := []string{"deliveries", "--no-color", "--app", "--app-id", githubtest.AppID, "--app-key", appKeyFile(t), "--github-api", gh.URL}

	code, out, errOut := run(t, base...)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != ExitOK || len(lines) != 4 || !strings.Contains(lines[1], "installation.created") || !strings.Contains(lines[3], "push") {
		t.Errorf("list: exit %d:\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "3 deliveries of the GitHub App's webhook") {
		t.Errorf("list: stderr %q", errOut)
	}
	code, out, _ = run(t, append(base, "--status", "failed")...)
	if code != ExitOK || strings.Count(out, "\n") != 2 || !strings.Contains(out, "issues.opened") {
		t.Errorf("--status failed: exit %d:\n%s", code, out)
	}

	target := newRecordingTarget(t, nil)
	code, out, errOut = run(t, append(base, "--target", target.URL, "--secret", gh.AppHook().Secret, "--events", "issues,push")...)
	if code != ExitOK || !slices.Equal(bodies(target), payloads[1:]) || strings.Count(out, "verified") != 2 {
		t.Errorf("--target: exit %d, target got %q\n%s%s", code, bodies(target), out, errOut)
	}

	checkRedelivers(t, base, hookURL, payloads[1])
	code, _, errOut = run(t, append(base, "--hook", "3")...)
	if code != ExitUsage || !strings.Contains(errOut, "a GitHub App has one") {
		t.Errorf("--app --hook: exit %d, %q", code, errOut)
	}
	ops := strings.Join(opsOf(gh), ",")
	for _, want := range []string{"list-webhook-deliveries", "get-webhook-delivery", "redeliver-webhook-delivery"} {
		if !strings.Contains(ops, want) || strings.Contains(ops, "list-webhooks") {
			t.Errorf("operations %s: want %s, and no repository's", ops, want)
		}
	}
}

// TestAppNewThenForward: app new serves the manifest form on loopback;
// posted to GitHub's web form (githubtest's), it comes back to the
// callback with a code, which becomes the App's credentials in a 0600
// .env with Probot's names; the printed forward command then gets the
// App's deliveries, verified with the App's webhook secret. (The same
// flow in a real browser: interop's TestAppNewInChromium.)
func TestAppNewThenForward(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	gh := githubtest.New(t, "")
	rl := relaytest.Start(t, relay.Options{})
	env := filepath.Join(t.TempDir(), "app", ".env")
	a := startCommand(t, "app", "new", "--no-color", "--no-browser", "--name", "dev app", "--url", rl.Channel, "--events", "issues,push",
		"--permission", "issues=write", "--permission", "contents=read", "--github-web", gh.WebURL, "--github-api", gh.URL, "--out", env)
	a.waitErr(t, "in your browser")
	page := strings.Fields(a.err.String()[strings.Index(a.err.String(), "open ")+5:])[0]

	// What the browser does: read the form, post it, follow the redirect.
	action, manifest := formOf(t, page)
	resp, err := http.PostForm(action, url.Values{"manifest": {manifest}})
	if err != nil {
		t.Fatalf("%v\napp new's stderr:\n%s", err, a.err.String())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "App dev app is made") {
		t.Fatalf("callback answered %d:\n%s", resp.StatusCode, body)
	}
	if code := a.wait(t); code != ExitOK {
		t.Fatalf("app new: exit %d\n%s", code, a.err.String())
	}
	name, hookURL, events, perms, ok := gh.Manifest()
	if !ok || name != "dev app" || hookURL != rl.Channel || !slices.Equal(events, []string{"issues", "push"}) || perms["issues"] != "write" || perms["contents"] != "read" {
		t.Errorf("GitHub got the App %q → %s, events %v, permissions %v", name, hookURL, events, perms)
	}
	info, err := os.Stat(env)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf(".env: %v, mode %v; want 0600", err, info.Mode())
	}
	vars, err := godotenv.Read(env)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"APP_ID", "PRIVATE_KEY", "WEBHOOK_SECRET", "GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET", "WEBHOOK_PROXY_URL"} {
		if vars[k] == "" {
			t.Errorf(".env has no %s", k)
		}
	}
	if vars["APP_ID"] != githubtest.AppID || vars["PRIVATE_KEY"] != string(githubtest.KeyPEM()) || vars["WEBHOOK_SECRET"] != gh.AppHook().Secret {
		t.Errorf(".env's APP_ID %s, key or secret differ from GitHub's", vars["APP_ID"])
	}
	if strings.Contains(a.err.String()+a.out.String(), vars["WEBHOOK_SECRET"]) || strings.Contains(a.err.String()+a.out.String(), "PRIVATE KEY") {
		t.Error("a secret was printed")
	}
	// A second run never replaces the file.
	if code, _, errOut := run(t, "app", "new", "--url", rl.Channel, "--out", env, "--github-api", gh.URL); code != ExitUsage || !strings.Contains(errOut, "exists: hookline never replaces") {
		t.Errorf("existing .env: exit %d, %q", code, errOut)
	}

	// The printed command, with a target.
	cmd := strings.Fields(strings.TrimSpace(a.out.String()))
	i := slices.Index(cmd, "--target")
	if cmd[0] != "hookline" || i < 0 {
		t.Fatalf("printed %q", a.out.String())
	}
	target := newRecordingTarget(t, nil)
	args := append(slices.Clone(cmd[1:i]), "--target", target.URL, "--no-color")
	f := startCommand(t, args...)
	f.waitErr(t, "already points at")
	if _, err := gh.Deliver(githubtest.AppHookID, "installation", []byte(`{"action":"created"}`)); err != nil {
		t.Fatal(err)
	}
	f.waitOutLines(t, 1)
	f.stop(t)
	if !strings.Contains(f.out.String(), "verified") || len(bodies(target)) != 1 || gh.AppHook().URL != rl.Channel {
		t.Errorf("forward with the printed command:\n%s\n%s", f.out.String(), f.err.String())
	}
}

// formOf reads the manifest form of app new's page: its action and its
// manifest field.
func formOf(t *testing.T, pageURL string) (action, manifest string) {
	t.Helper()
	resp, err := http.Get(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	if m := regexp.MustCompile(`<form[^>]* action="([^"]*)"`).FindSubmatch(page); m != nil {
		action = html.UnescapeString(string(m[1]))
	}
	if m := regexp.MustCompile(`<input type="hidden" name="manifest" value="([^"]*)"`).FindSubmatch(page); m != nil {
		manifest = html.UnescapeString(string(m[1]))
	}
	if action == "" || manifest == "" {
		t.Fatalf("no manifest form on app new's page:\n%s", page)
	}
	return action, manifest
}
