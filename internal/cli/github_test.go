package cli

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/githubtest"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/relay"
)

// bodies is what t received, as strings.
func bodies(t *recordingTarget) []string {
	var out []string
	for _, r := range t.requests() {
		out = append(out, string(r.body))
	}
	return out
}

func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// opsOf is the operations githubtest served, without the tag.
func opsOf(gh *githubtest.Server) []string {
	var out []string
	for _, op := range gh.Calls() {
		out = append(out, op[strings.IndexByte(op, '/')+1:])
	}
	return out
}

// TestForwardRepo: forward --repo creates a webhook pointing at the channel
// with a fresh secret, verifies GitHub's ping and a delivery with it,
// forwards both, and deletes the webhook when it ends; every request is
// checked against GitHub's description by githubtest.
func TestForwardRepo(t *testing.T) {
	gh := githubtest.New(t, "")
	t.Setenv("GITHUB_TOKEN", githubtest.Token)
	rl := relaytest.Start(t, relay.Options{})
	target := newRecordingTarget(t, nil)

	f := startForward(t, "--repo", "octo/hello", "--github-api", gh.URL, "--url", rl.Channel, "--target", target.URL, "--events", "issues.opened,ping")
	f.waitErr(t, "created webhook")
	hooks := gh.Hooks()
	if len(hooks) != 1 || hooks[0].URL != rl.Channel || len(hooks[0].Secret) != 26 || !slices.Equal(hooks[0].Events, []string{"issues"}) {
		t.Fatalf("hooks %+v, want one to %s with a 26-character random secret and events [issues]", hooks, rl.Channel)
	}
	f.waitOutLines(t, 1) // the ping
	payload := []byte(`{"action":"opened","issue":{"number":1}}`)
	if _, err := gh.Deliver(hooks[0].ID, "issues", payload); err != nil {
		t.Fatal(err)
	}
	f.waitOutLines(t, 2)
	if code := f.stop(t); code != ExitOK {
		t.Errorf("exit code %d, want 0; stderr:\n%s", code, f.err.String())
	}
	if out := f.out.String(); strings.Count(out, "verified") != 2 {
		t.Errorf("trace, want the ping and the delivery verified:\n%s", out)
	}
	got := bodies(target)
	if len(got) != 2 || !strings.Contains(got[0], `"zen"`) || got[1] != string(payload) {
		t.Errorf("target got %q, want the ping and %s", got, payload)
	}
	if len(gh.Hooks()) != 0 {
		t.Errorf("hooks after forward ended: %+v, want none", gh.Hooks())
	}
	errOut := f.err.String()
	for _, want := range []string{"webhook secret: a new random one", "created webhook", "on octo/hello → ", "deleted webhook"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, hooks[0].Secret) || strings.Contains(f.out.String(), hooks[0].Secret) || strings.Contains(errOut, githubtest.Token) {
		t.Error("the secret or the token was printed")
	}
	if want := []string{"list-webhooks", "create-webhook", "delete-webhook"}; !slices.Equal(opsOf(gh), want) {
		t.Errorf("operations %v, want %v", opsOf(gh), want)
	}
}

// TestForwardRepoTakesOverAndKeeps: a webhook left with the channel's URL
// (a crashed run) is taken over with a new secret, not duplicated, and
// --keep-hook keeps it.
func TestForwardRepoTakesOverAndKeeps(t *testing.T) {
	gh := githubtest.New(t, "/api/v3") // GitHub Enterprise Server's layout
	t.Setenv("GITHUB_ENTERPRISE_TOKEN", githubtest.Token)
	t.Setenv("GITHUB_TOKEN", "not this one")
	rl := relaytest.Start(t, relay.Options{})
	id := gh.AddHook(githubtest.Hook{Owner: "/orgs/octo-org", URL: rl.Channel, Secret: "old", Events: []string{"push"}, Active: false})

	f := startForward(t, "--org", "octo-org", "--github-api", gh.URL, "--url", rl.Channel, "--secret", "chosen", "--keep-hook")
	f.waitErr(t, "took over webhook "+strconv.FormatInt(id, 10))
	f.stop(t)
	hooks := gh.Hooks()
	if len(hooks) != 1 || hooks[0].ID != id || hooks[0].Secret != "chosen" || !hooks[0].Active || !slices.Equal(hooks[0].Events, []string{"*"}) {
		t.Errorf("hooks %+v, want hook %d kept, active, with the new secret and events [*]", hooks, id)
	}
	if !strings.Contains(f.err.String(), "kept webhook") {
		t.Errorf("stderr:\n%s", f.err.String())
	}
	if want := []string{"list-webhooks", "update-webhook"}; !slices.Equal(opsOf(gh), want) {
		t.Errorf("operations %v, want %v", opsOf(gh), want)
	}
}

func TestForwardRepoUsageErrors(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "")
	t.Setenv("GH_TOKEN", "")
	t.Setenv("PATH", t.TempDir()) // no gh
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--repo", "octo/hello", "--url", "http://127.0.0.1:9/AbCdEf1234567890"}, "GitHub cannot reach http://127.0.0.1:9/AbCdEf1234567890: it is on this machine"},
		{[]string{"--repo", "octo/hello"}, "GitHub cannot reach http://127.0.0.1:3333"},
		{[]string{"--repo", "octo", "--new"}, `repository "octo": want OWNER/NAME`},
		{[]string{"--keep-hook"}, "--keep-hook keeps the webhook that --repo, --org or --app points at the channel"},
		{[]string{"--repo", "a/b", "--org", "c", "--repo", "a/b", "--new"}, "a/b is given twice"},
		{[]string{"--app", "--new"}, "--app needs the App's ID and private key: --app-id ID --app-key FILE.pem"},
		{[]string{"--app-env", "x.env", "--new"}, "--app-env names a GitHub App: add --app"},
		{[]string{"--app", "--app-id", "1", "--app-key", "/nonexistent/key.pem", "--new"}, "--app-key: open /nonexistent/key.pem: no such file"},
		{[]string{"--repo", "a/b", "--new", "--github-api", "ftp://x"}, "--github-api"},
	} {
		code, _, errOut := run(t, append([]string{"forward", "--no-color"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("forward %v: exit %d, stderr %q; want 2 and one line with %q", tc.args, code, errOut, tc.want)
		}
	}
	// No token, and no gh to ask: one line saying what to set.
	gh := githubtest.New(t, "")
	rl := relaytest.Start(t, relay.Options{})
	code, _, errOut := run(t, "forward", "--no-color", "--repo", "octo/hello", "--github-api", gh.URL, "--url", rl.Channel)
	if code != ExitUsage || !strings.Contains(errOut, "no GitHub token: set GITHUB_TOKEN") {
		t.Errorf("without a token: exit %d, stderr %q", code, errOut)
	}
	// --new with no token: nothing is created on the relay before the
	// token is known to work.
	news := 0
	newServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		news++
		http.Redirect(w, r, "https://relay.example/AbCdEf1234567890", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(newServer.Close)
	code, _, errOut = run(t, "forward", "--no-color", "--repo", "octo/hello", "--github-api", gh.URL, "--new", "--server", newServer.URL)
	if code != ExitUsage || !strings.Contains(errOut, "no GitHub token") || news != 0 {
		t.Errorf("--new without a token: exit %d, %d channels created, stderr %q; want the token error and none", code, news, errOut)
	}
	// A token GitHub refuses: its one-line error, nothing left behind.
	t.Setenv("GITHUB_TOKEN", "expired")
	code, _, errOut = run(t, "forward", "--no-color", "--repo", "octo/hello", "--github-api", gh.URL, "--url", rl.Channel)
	if code != ExitFailure || !strings.Contains(errOut, "401 Bad credentials: set GITHUB_TOKEN or GH_TOKEN to a valid token") {
		t.Errorf("with a bad token: exit %d, stderr %q", code, errOut)
	}
}

// TestDeliveries lists a webhook's deliveries, replays them to a target
// (verified with the secret) and asks GitHub to redeliver the failed one.
func TestDeliveries(t *testing.T) {
	gh := githubtest.New(t, "")
	t.Setenv("GITHUB_TOKEN", githubtest.Token)
	statuses := []int{200, 500, 200}
	hookURL := newRecordingTarget(t, func(n int, _ recordedRequest) int {
		if n < len(statuses) {
			return statuses[n]
		}
		return http.StatusOK
	})
	id := gh.AddHook(githubtest.Hook{Owner: "/repos/octo/hello", URL: hookURL.URL, Secret: "s3cret", Events: []string{"*"}, Active: true})
	gh.AddHook(githubtest.Hook{Owner: "/repos/octo/hello", URL: "https://elsewhere.example/hook", Events: []string{"*"}, Active: true})
	payloads := []string{`{"action":"opened","n":0}`, `{"action":"closed","n":1}`, `{"ref":"refs/heads/main"}`}
	for i, p := range payloads {
		event := "issues"
		if i == 2 {
			event = "push"
		}
		if _, err := gh.Deliver(id, event, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	base := []string{"deliveries", "--no-color", "--repo", "octo/hello", "--github-api", gh.URL}

	// Two webhooks: it asks which.
	code, _, errOut := run(t, base...)
	if code != ExitUsage || !strings.Contains(errOut, "has 2 webhooks: name one with --hook ID or --url URL") {
		t.Errorf("with two hooks: exit %d, stderr %q", code, errOut)
	}
	base = append(base, "--url", hookURL.URL)

	code, out, errOut := run(t, base...)
	if code != ExitOK {
		t.Fatalf("list: exit %d, stderr %s", code, errOut)
	}
	for i, want := range []string{"issues.opened", "issues.closed", "push"} {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !strings.Contains(lines[i+1], want) {
			t.Errorf("list:\n%s\nwant a header and %s on line %d", out, want, i+2)
		}
	}
	code, out, _ = run(t, append(base, "--status", "failed")...)
	if code != ExitOK || strings.Count(out, "\n") != 2 || !strings.Contains(out, "issues.closed") || !strings.Contains(out, "500") {
		t.Errorf("--status failed: exit %d:\n%s", code, out)
	}
	code, out, _ = run(t, append(base, "--events", "push")...)
	if code != ExitOK || strings.Count(out, "\n") != 2 || !strings.Contains(out, "push") {
		t.Errorf("--events push: exit %d:\n%s", code, out)
	}

	// Replayed here, each checked with the secret, in the order GitHub made them.
	target := newRecordingTarget(t, nil)
	code, out, errOut = run(t, append(base, "--target", target.URL, "--secret", "s3cret")...)
	if code != ExitOK || !slices.Equal(bodies(target), payloads) {
		t.Errorf("--target: exit %d, target got %q, want %q\n%s%s", code, bodies(target), payloads, out, errOut)
	}
	if strings.Count(out, "verified") != 3 || !strings.Contains(errOut, "3 of 3 delivered, 3 verified") {
		t.Errorf("--target trace:\n%s%s", out, errOut)
	}
	// A wrong secret: nothing sent, and the summary says what to do.
	code, _, errOut = run(t, append(base, "--target", target.URL, "--secret", "wrong")...)
	if code != ExitFailure || len(bodies(target)) != 3 || !strings.Contains(errOut, "add --resign") {
		t.Errorf("wrong secret: exit %d, target got %d, stderr:\n%s", code, len(bodies(target)), errOut)
	}
	// --resign: signed with the given secret.
	code, _, _ = run(t, append(base, "--target", target.URL, "--secret", "mine", "--resign", "--events", "push")...)
	if code != ExitOK || len(bodies(target)) != 4 || target.requests()[3].header.Get("X-Hub-Signature-256") != sign("mine", []byte(payloads[2])) {
		t.Errorf("--resign: exit %d, %d requests", code, len(target.requests()))
	}

	// GitHub redelivers the failed one to the webhook's URL.
	checkRedelivers(t, base, hookURL, payloads[1])
	want := "list-webhooks,list-webhook-deliveries"
	if ops := strings.Join(opsOf(gh), ","); !strings.Contains(ops, want) || !strings.Contains(ops, "get-webhook-delivery") || !strings.HasSuffix(ops, "redeliver-webhook-delivery") {
		t.Errorf("operations %s", ops)
	}
}

// checkRedelivers runs `deliveries` with base and --status failed
// --redeliver, and checks that GitHub sent want, the failed delivery, to
// the webhook's URL again.
func checkRedelivers(t *testing.T, base []string, hookURL *recordingTarget, want string) {
	t.Helper()
	before := len(bodies(hookURL))
	code, out, _ := run(t, append(base, "--status", "failed", "--redeliver")...)
	if code != ExitOK || !strings.Contains(out, "asked GitHub to redeliver") {
		t.Errorf("--redeliver: exit %d:\n%s", code, out)
	}
	waitUntil(t, "the redelivery", func() bool { return len(bodies(hookURL)) > before })
	if got := bodies(hookURL)[before]; got != want {
		t.Errorf("redelivered %s, want %s", got, want)
	}
}

// waitUntil waits until cond (what the GitHub server on loopback does:
// its redelivery) holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Poll(t, what, 5*time.Millisecond, cond)
}

// `deliveries --status failed --redeliver` redelivers a delivery (a guid),
// not an attempt: one whose redelivery succeeded is left alone, and so is
// one that succeeded at once, even from a server that ignores the status
// filter (GitHub Enterprise Server 3.2-3.4). Before, the one-shot path
// redelivered every failed attempt (d2 again, whose redelivery had
// succeeded) and, from such a server, every delivery listed.
func TestDeliveriesRedeliverNeverRepeatsASuccess(t *testing.T) {
	gh := githubtest.New(t, "")
	gh.IgnoreStatusFilter()
	t.Setenv("GITHUB_TOKEN", githubtest.Token)
	statuses := []int{200, 500, 500, 200} // d1, d2, d3, then d2's redelivery
	hookURL := newRecordingTarget(t, func(n int, _ recordedRequest) int {
		if n < len(statuses) {
			return statuses[n]
		}
		return http.StatusOK
	})
	id := gh.AddHook(githubtest.Hook{Owner: "/repos/octo/hello", URL: hookURL.URL, Secret: "s3cret", Events: []string{"*"}, Active: true})
	var ds []githubtest.HookDelivery
	for n := range 3 {
		d, err := gh.Deliver(id, "issues", []byte(fmt.Sprintf(`{"action":"opened","n":%d}`, n+1)))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	// GitHub redelivers d2, and this time the server takes it.
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/repos/octo/hello/hooks/%d/deliveries/%d/attempts", gh.URL, id, ds[1].ID), nil)
	req.Header.Set("Authorization", "Bearer "+githubtest.Token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("redelivering d2: %v %v", resp, err)
	}
	// GitHub's record of it, not the target's request: the server records
	// a delivery once it has read the answer, after the target has the
	// request (waiting on the target, the listing could come first and
	// miss the successful redelivery).
	waitUntil(t, "d2's redelivery in GitHub's record", func() bool { return len(gh.Deliveries()) == 4 })

	code, out, errOut := run(t, "deliveries", "--no-color", "--repo", "octo/hello", "--github-api", gh.URL, "--status", "failed", "--redeliver")
	if code != ExitOK || strings.Count(out, "asked GitHub to redeliver") != 1 || !strings.Contains(out, ds[2].GUID) {
		t.Errorf("--status failed --redeliver: exit %d, want d3 (%s) alone redelivered:\n%s%s", code, ds[2].GUID, out, errOut)
	}
	// A plain listing filters by status itself too.
	code, out, _ = run(t, "deliveries", "--no-color", "--repo", "octo/hello", "--github-api", gh.URL, "--status", "failed")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != ExitOK || len(lines) != 3 || strings.Contains(out, " 200 ") {
		t.Errorf("--status failed from a server that ignores it: exit %d, want the two failed attempts:\n%s", code, out)
	}
}
