package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/webhooks/provider"
)

// idsOf is the X-GitHub-Delivery of every request t received.
func idsOf(t *recordingTarget) []string {
	var out []string
	for _, r := range t.requests() {
		out = append(out, r.header.Get("X-GitHub-Delivery"))
	}
	return out
}

// TestForwardSeveralTargets: --target twice and --route with
// event.action and event.*: each target gets its deliveries, byte for
// byte with the signature; the trace line shows every target's verdict
// on one line, --json an array; a target that refuses keeps its delivery
// in its own subfolder of the failed folder, and the summary says how to
// replay it there.
func TestForwardSeveralTargets(t *testing.T) {
	const secret = "several-targets-secret"
	app := newRecordingTarget(t, nil)
	worker := newRecordingTarget(t, func(n int, _ recordedRequest) int {
		if n == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	ci := newRecordingTarget(t, nil)
	relay := newTestRelay(t)
	failed := t.TempDir()
	f := startForward(t, "--url", relay.URL+"/chan", "--no-state", "--secret", secret, "--failed-dir", failed, "--health", "127.0.0.1:0",
		"--target", "app="+app.URL, "--target", "worker="+worker.URL, "--route", "push,pull_request.*=ci="+ci.URL,
		"--target-header", "ci:X-Ci-Token=abc")
	f.waitErr(t, "forwarding ")
	bodies := map[string][]byte{"i1": []byte(`{"action":"opened", "n":1}`), "p2": []byte(`{"ref":"x"}`), "r3": []byte(`{"action":"closed","number":3}`)}
	relay.send("i1", "issues", secret, bodies["i1"])
	relay.send("p2", "push", secret, bodies["p2"])
	relay.send("r3", "pull_request", secret, bodies["r3"])
	// Each delivery's trace line (i1's, which failed at worker, has
	// indented lines under it: a count of lines is not a count of
	// deliveries).
	for _, id := range []string{" i1 ", " p2 ", " r3 "} {
		f.waitOut(t, id)
	}
	// --health counts per target.
	healthURL := strings.Fields(lineWith(f.err.String(), "health: "))[1]
	resp, err := http.Get(healthURL)
	if err != nil {
		t.Fatal(err)
	}
	var health struct {
		Stats struct {
			Targets map[string]struct{ Forwarded, Failed int }
		} `json:"stats"`
	}
	json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if tg := health.Stats.Targets; tg["ci"].Forwarded != 2 || tg["worker"].Failed != 1 || tg["app"].Forwarded != 1 {
		t.Errorf("--health targets %+v; the trace:\n%s", tg, f.out.String())
	}
	f.stop(t)
	if got := idsOf(app); !slices.Equal(got, []string{"i1"}) {
		t.Errorf("app got %v, want [i1]", got)
	}
	if got := idsOf(worker); !slices.Equal(got, []string{"i1"}) {
		t.Errorf("worker got %v, want [i1]", got)
	}
	if got := idsOf(ci); !slices.Equal(got, []string{"p2", "r3"}) {
		t.Errorf("ci got %v, want [p2 r3]", got)
	}
	for _, r := range append(append(app.requests(), worker.requests()...), ci.requests()...) {
		id := r.header.Get("X-GitHub-Delivery")
		if string(r.body) != string(bodies[id]) || r.header.Get("X-Hub-Signature-256") != sign(secret, bodies[id]) {
			t.Errorf("%s arrived as %q, signed %s", id, r.body, r.header.Get("X-Hub-Signature-256"))
		}
	}
	if got := ci.requests()[0].header.Get("X-Ci-Token"); got != "abc" || app.requests()[0].header.Get("X-Ci-Token") != "" {
		t.Errorf("--target-header: ci got %q, app got %q", got, app.requests()[0].header.Get("X-Ci-Token"))
	}
	out := f.out.String()
	if line := lineWith(out, "i1"); !strings.Contains(line, "→ app 200") || !strings.Contains(line, "· worker 500") {
		t.Errorf("the trace line of i1: %q", line)
	}
	if line := lineWith(out, "p2"); !strings.Contains(line, "→ ci 200") {
		t.Errorf("the trace line of p2: %q", line)
	}
	kept, _ := filepath.Glob(filepath.Join(failed, "worker", "*.json"))
	if len(kept) != 1 {
		t.Errorf("worker's failed subfolder holds %v, want one capture", kept)
	}
	errOut := f.err.String()
	for _, want := range []string{"→ app " + app.URL, "push,pull_request.* → ci " + ci.URL, "targets: app 1 forwarded; ci 2 forwarded; worker 0 forwarded, 1 failed",
		"send worker's again with: hookline replay --secret-file FILE --target " + worker.URL + " " + filepath.Join(failed, "worker")} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut+out, "abc") {
		t.Error("a --target-header value was printed")
	}
}

// lineWith is the first line of s that contains sub.
func lineWith(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// TestForwardRoutesJSONAndConfig: routes from the config file's routes:
// map; --json gives each delivery's targets as an array; a delivery no
// route takes, with no --target, is reported as unrouted.
func TestForwardRoutesJSONAndConfig(t *testing.T) {
	ci := newRecordingTarget(t, nil)
	config := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(config, []byte("forward:\n  routes:\n    push: "+ci.URL+"\n    issues.opened: "+ci.URL+"/issues\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOOKLINE_CONFIG", config)
	relay := newTestRelay(t)
	f := startForward(t, "--url", relay.URL+"/chan", "--no-state", "--json")
	f.waitErr(t, "forwarding ")
	relay.send("p1", "push", "", []byte(`{}`))
	relay.send("i2", "issues", "", []byte(`{"action":"opened"}`))
	relay.send("c3", "issues", "", []byte(`{"action":"closed"}`))
	f.waitOutLines(t, 3)
	f.stop(t)
	type jsonTarget struct {
		Name   string `json:"name"`
		URL    string `json:"url"`
		Status int    `json:"status"`
	}
	type jsonLine struct {
		Delivery string       `json:"delivery"`
		Targets  []jsonTarget `json:"targets"`
		Unrouted bool         `json:"unrouted"`
	}
	var lines []jsonLine
	for line := range strings.Lines(f.out.String()) {
		var l jsonLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		lines = append(lines, l)
	}
	// Each route is a lane of its own: lines come as each is done, not
	// in the order received.
	slices.SortFunc(lines, func(a, b jsonLine) int { return strings.Compare(a.Delivery, b.Delivery) })
	if len(lines) != 3 || !lines[0].Unrouted || len(lines[1].Targets) != 1 || !strings.HasSuffix(lines[1].Targets[0].URL, "/issues") ||
		len(lines[2].Targets) != 1 || lines[2].Targets[0].Status != 200 || lines[2].Targets[0].Name == lines[1].Targets[0].Name {
		t.Errorf("--json lines (c3, i2, p1) %+v", lines)
	}
	if got := idsOf(ci); len(got) != 2 || !slices.Contains(got, "p1") || !slices.Contains(got, "i2") {
		t.Errorf("ci got %v, want p1 and i2", got)
	}
	if !strings.Contains(f.err.String(), "1 unrouted") {
		t.Errorf("summary:\n%s", f.err.String())
	}
}

func TestTargetUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--route", "push"}, "--route \"push\": want EVENTS=URL"},
		{[]string{"--route", "pu*sh=http://127.0.0.1:1/"}, "a pattern is event, event.action, event.* or *"},
		{[]string{"--route", "isues=http://127.0.0.1:1/"}, "did you mean issues?"},
		{[]string{"--events", "isues"}, "did you mean issues?"},
		{[]string{"--ignore", "issues.opend"}, "did you mean issues.opened?"},
		{[]string{"--target", "http://127.0.0.1:1/", "--target-header", "x:A=b"}, "--target-header is for one of several targets"},
		{[]string{"--target", "a=http://127.0.0.1:1/", "--target", "b=http://127.0.0.1:2/", "--target-header", "c:A=b"}, "NAME one of a, b"},
		{[]string{"--target", "ftp://x/"}, "--target"},
	} {
		code, _, errOut := run(t, append([]string{"forward", "--no-color", "--no-state"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("forward %v: exit %d, %q; want %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestReplaySeveralTargets: replay takes the same --target and --route:
// the saved push goes to its route, the six others to both targets.
func TestReplaySeveralTargets(t *testing.T) {
	a, b, ci := newRecordingTarget(t, nil), newRecordingTarget(t, nil), newRecordingTarget(t, nil)
	code, out, errOut := run(t, "replay", "--no-color", "--target", a.URL, "--target", b.URL, "--route", "push="+ci.URL, filepath.Join("..", "..", "testdata", "captures"))
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if len(a.requests()) != 6 || len(b.requests()) != 6 || len(ci.requests()) != 1 || ci.requests()[0].header.Get("X-GitHub-Event") != "push" {
		t.Errorf("a %d, b %d, ci %d requests; want 6, 6 and the push", len(a.requests()), len(b.requests()), len(ci.requests()))
	}
	if !strings.Contains(errOut, "push → ") {
		t.Errorf("start line: %s", errOut)
	}
}

// forward --events takes the route grammar: "issues.*" forwards an
// issues.opened delivery, "*" every one. Before, "issues.*" kept nothing
// ("1 received, 1 filtered") and "*" was refused.
func TestForwardEventsPatterns(t *testing.T) {
	for _, events := range []string{"issues.*", "*"} {
		rl := relaytest.Start(t, relay.Options{})
		target := newRecordingTarget(t, nil)
		f := startForward(t, "--url", rl.Channel, "--target", target.URL, "--no-state", "--events", events)
		f.waitErr(t, "connected to")
		rl.Publish(t, nil, 1, relaytest.Body(1, 0)) // issues.opened
		f.waitOutLines(t, 1)
		f.stop(t)
		if n := len(target.requests()); n != 1 {
			t.Errorf("--events %s: the target got %d deliveries, want the issues.opened one\n%s", events, n, f.err.String())
		}
	}
}

// Every delivery the filter drops has a dim line saying which rule did it
// (and a "rule" in --json); --quiet-filtered prints none of them. Before,
// a filtered delivery was only counted in the summary: with --events
// issues a user saw nothing at all for a push.
func TestForwardSaysWhatItFiltered(t *testing.T) {
	for _, tt := range []struct {
		name  string
		args  []string
		want  []string // in stdout, in order of the deliveries
		lines int
	}{
		{"trace", nil, []string{
			"filtered: not in --events issues,pull_request.opened",
			"filtered by --ignore issues.closed",
			"✓ verified",
		}, 3},
		{"json", []string{"--json"}, []string{
			`"rule":"filtered: not in --events issues,pull_request.opened"`,
			`"rule":"filtered by --ignore issues.closed"`,
			`"verification":"verified"`,
		}, 3},
		{"quiet", []string{"--quiet-filtered"}, []string{"✓ verified"}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rl := relaytest.Start(t, relay.Options{})
			target := newRecordingTarget(t, nil)
			f := startForward(t, append([]string{"--url", rl.Channel, "--target", target.URL, "--no-state", "--secret", "s3cret",
				"--events", "issues,pull_request.opened", "--ignore", "issues.closed"}, tt.args...)...)
			f.waitErr(t, "connected to")
			for n, d := range []struct{ event, body string }{
				{"push", `{"ref":"refs/heads/main"}`},
				{"issues", `{"action":"closed"}`},
				{"issues", `{"action":"opened"}`},
			} {
				rl.Publish(t, nil, n+1, []byte(d.body), "X-GitHub-Event", d.event, "X-Hub-Signature-256", sign("s3cret", []byte(d.body)))
			}
			f.waitOutLines(t, tt.lines) // in order: the filtered ones come first
			out := f.out.String()
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("stdout lacks %q (in order):\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			if n := strings.Count(out, "\n"); n != tt.lines {
				t.Errorf("stdout has %d lines, want %d:\n%s", n, tt.lines, out)
			}
			f.stop(t)
			if !strings.Contains(f.err.String(), "2 filtered") {
				t.Errorf("the summary does not count the 2 filtered:\n%s", f.err.String())
			}
			if n := len(target.requests()); n != 1 {
				t.Errorf("the target got %d deliveries, want the issues.opened one", n)
			}
		})
	}
}

// A sender's handshake gets a line saying whether the relay answered it,
// and is not passed on: a Slack url_verification on a channel the relay
// does not know the signing secret of says how to make the relay answer.
func TestForwardShowsAHandshake(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	target := newRecordingTarget(t, nil)
	f := startForward(t, "--url", rl.Channel, "--target", target.URL, "--no-state")
	f.waitErr(t, "connected to")
	body := []byte(`{"token":"x","challenge":"3eZbrw1aBm2rZ","type":"url_verification"}`)
	h, _ := provider.Sign(provider.Slack, "8f742231b10e8888abcd99yyyzzz85a5", body, provider.Signing{})
	rl.Publish(t, nil, 1, body, "X-Slack-Signature", h.Get("X-Slack-Signature"), "X-Slack-Request-Timestamp", h.Get("X-Slack-Request-Timestamp"))
	f.waitOutLines(t, 1)
	if want := "handshake (slack url_verification), not answered: a hookline relay answers it on a channel bound to the signing secret (--verify-on-relay, serve --channel-secrets); not passed on"; !strings.Contains(f.out.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, f.out.String())
	}
	f.stop(t)
	if !strings.Contains(f.err.String(), "1 handshake(s), not passed on") {
		t.Errorf("the summary does not count the handshake:\n%s", f.err.String())
	}
	if n := len(target.requests()); n != 0 {
		t.Errorf("the target got %d requests, want none", n)
	}
}

// One forward serves a dev server per branch (a git worktree each): a
// route's events may name a branch, and each target gets only its
// branch's pushes and pull requests. Before, routes chose by event alone
// and every worktree's server got every branch's deliveries.
func TestForwardRoutesByBranch(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	branches := []string{"main", "feature-a", "feature-b"}
	targets := map[string]*recordingTarget{}
	args := []string{"--url", rl.Channel, "--no-state"}
	for _, b := range branches {
		targets[b] = newRecordingTarget(t, nil)
		args = append(args, "--route", fmt.Sprintf("push@%s,pull_request@%s=%s=%s", b, b, b, targets[b].URL))
	}
	f := startForward(t, args...)
	f.waitErr(t, "connected to")
	sent := 0
	publish := func(event, body string) {
		sent++
		rl.Publish(t, nil, sent, []byte(body), "X-GitHub-Event", event)
	}
	for _, b := range append(branches, "elsewhere") {
		publish("push", fmt.Sprintf(`{"ref":"refs/heads/%s","n":%d}`, b, sent+1))
		publish("pull_request", fmt.Sprintf(`{"action":"opened","n":%d,"pull_request":{"head":{"ref":%q}}}`, sent+1, b))
	}
	publish("push", `{"ref":"refs/tags/main"}`) // a tag named like a branch
	f.waitOutLines(t, sent)
	f.stop(t)
	for _, b := range branches {
		var got []string
		for _, r := range targets[b].requests() {
			var p struct {
				Ref         string
				PullRequest struct{ Head struct{ Ref string } } `json:"pull_request"`
			}
			json.Unmarshal(r.body, &p)
			got = append(got, r.header.Get("X-GitHub-Event")+" "+strings.TrimPrefix(p.Ref, "refs/heads/")+p.PullRequest.Head.Ref)
		}
		if want := []string{"push " + b, "pull_request " + b}; !slices.Equal(got, want) {
			t.Errorf("target %s got %q, want %q\n%s", b, got, want, f.out.String())
		}
	}
	if n := strings.Count(f.out.String(), "unrouted"); n != 3 {
		t.Errorf("%d deliveries unrouted, want 3 (elsewhere's push and pull request, the tag):\n%s", n, f.out.String())
	}
}
