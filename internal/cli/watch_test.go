package cli

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/eventmatch"
	"github.com/hookline/hookline/internal/githubapi"
	"github.com/hookline/hookline/internal/testutil/githubtest"
)

// newWatcher is a watcher of hook on gh that redelivers, with its state in
// path and its clock at *now.
func newWatcher(t *testing.T, gh *githubtest.Server, hook int64, path string, now *time.Time, waits *[]time.Duration) *watcher {
	t.Helper()
	c := &githubapi.Client{BaseURL: gh.URL, Token: githubtest.Token, PerPage: 2, MaxWait: 24 * time.Hour,
		Sleep: func(_ context.Context, d time.Duration) error { *waits = append(*waits, d); return nil }}
	owner := githubapi.Repo("octo/hello")
	w := &watcher{gh: c, owner: owner, hookID: hook, grace: 5 * time.Minute, interval: time.Minute, window: 24 * time.Hour,
		path: path, now: func() time.Time { return *now }, out: &strings.Builder{}}
	w.recover = func(ctx context.Context, d githubapi.HookDelivery) error { return c.Redeliver(ctx, owner, hook, d.ID) }
	if err := w.load(); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestWatchRecoversOnce, against GitHub's description (githubtest) with
// the watcher's clock simulated: a failed delivery is redelivered once
// its --grace has passed, once only, across a restart too (the
// redelivery failing again changes nothing); one that someone else
// redelivered successfully is left alone; --events filters; the
// deliveries are read over several pages; a rate limit is waited out.
func TestWatchRecoversOnce(t *testing.T) {
	gh := githubtest.New(t, "")
	statuses := map[string]int{}
	hookURL := newRecordingTarget(t, func(_ int, r recordedRequest) int {
		if s, ok := statuses[string(r.body)]; ok {
			return s
		}
		return http.StatusInternalServerError
	})
	statuses[`{"n":"ok"}`] = 200
	id := gh.AddHook(githubtest.Hook{Owner: "/repos/octo/hello", URL: hookURL.URL, Secret: "s", Events: []string{"*"}, Active: true})
	deliver := func(event, body string) githubtest.HookDelivery {
		d, err := gh.Deliver(id, event, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	deliver("issues", `{"n":"ok"}`)                                 // delivered
	failed := deliver("issues", `{"action":"opened","n":"failed"}`) // to recover
	deliver("push", `{"n":"filtered"}`)                             // failed, but --events issues
	fixed := deliver("issues", `{"n":"fixed by hand"}`)             // failed, then redelivered by someone
	statuses[`{"n":"fixed by hand"}`] = 200
	if err := (&githubapi.Client{BaseURL: gh.URL, Token: githubtest.Token}).Redeliver(t.Context(), githubapi.Repo("octo/hello"), id, fixed.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "GitHub's record of the redelivery by hand", func() bool { return len(gh.Deliveries()) == 5 })

	now := time.Now()
	var waits []time.Duration
	state := filepath.Join(t.TempDir(), "watch.json")
	w := newWatcher(t, gh, id, state, &now, &waits)
	var err error
	if w.events, _, err = eventmatch.Compile([]string{"issues"}, true); err != nil {
		t.Fatal(err)
	}
	if err := w.poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(hookURL.requests()); n != 5 || w.stats.Waiting != 1 {
		t.Fatalf("within --grace: %d requests (want none new), waiting %d (want 1)", n, w.stats.Waiting)
	}

	// Six minutes on, with a rate limit on the first request.
	now = now.Add(6 * time.Minute)
	reset := time.Now().Add(30 * time.Second).Unix()
	gh.Refuse(githubtest.Refusal{Status: http.StatusForbidden, Header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(reset, 10)}},
		Body: `{"message":"API rate limit exceeded"}`})
	if err := w.poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits[0] < 20*time.Second {
		t.Errorf("rate limit waits %v, want one of about 30 s", waits)
	}
	waitUntil(t, "GitHub's record of the recovery", func() bool { return len(gh.Deliveries()) == 6 })
	if got := string(hookURL.requests()[5].body); got != `{"action":"opened","n":"failed"}` {
		t.Errorf("recovered %s, want the failed issues delivery", got)
	}

	// The redelivery failed too (the target still answers 500): a poll,
	// and a restart's, leave it alone.
	for i := range 2 {
		now = now.Add(10 * time.Minute)
		if i == 1 {
			w = newWatcher(t, gh, id, state, &now, &waits)
			var err error
			if w.events, _, err = eventmatch.Compile([]string{"issues"}, true); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.poll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(hookURL.requests()); n != 6 {
		t.Errorf("%d requests after two more polls and a restart, want 6: a delivery recovered twice", n)
	}
	if _, ok := w.state.Recovered[failed.GUID]; !ok || len(w.state.Recovered) != 1 {
		t.Errorf("state %+v, want the one GUID", w.state.Recovered)
	}
	calls := strings.Join(opsOf(gh), ",")
	if strings.Count(calls, "redeliver-webhook-delivery") != 2 { // the hand's and the watcher's
		t.Errorf("operations %s", calls)
	}
	if !strings.Contains(calls, "list-webhook-deliveries,list-webhook-deliveries") {
		t.Errorf("operations %s: want several pages", calls)
	}
}

// TestDeliveriesWatch runs the command: it recovers a failed delivery and
// serves its counts on --health.
func TestDeliveriesWatch(t *testing.T) {
	gh := githubtest.New(t, "")
	t.Setenv("GITHUB_TOKEN", githubtest.Token)
	hookURL := newRecordingTarget(t, func(n int, _ recordedRequest) int {
		if n == 0 {
			return 500
		}
		return 200
	})
	id := gh.AddHook(githubtest.Hook{Owner: "/repos/octo/hello", URL: hookURL.URL, Secret: "s", Events: []string{"*"}, Active: true})
	if _, err := gh.Deliver(id, "push", []byte(`{"ref":"x"}`)); err != nil {
		t.Fatal(err)
	}
	f := startCommand(t, "deliveries", "--no-color", "--repo", "octo/hello", "--github-api", gh.URL, "--watch", "--redeliver",
		"--grace", "0s", "--interval", "50ms", "--state-file", filepath.Join(t.TempDir(), "w.json"), "--health", "127.0.0.1:0")
	// The watcher's own line, not the target's request: GitHub sends the
	// redelivery as it answers, so the target may have it before the
	// watcher has read that answer.
	f.waitOut(t, "asked GitHub to redeliver")
	waitUntil(t, "the recovery", func() bool { return len(hookURL.requests()) == 2 })
	f.waitErr(t, "health: ")
	if code := f.stop(t); code != ExitOK {
		t.Errorf("exit %d: %s", code, f.err.String())
	}
	if !strings.Contains(f.out.String(), "asked GitHub to redeliver") || !strings.Contains(f.err.String(), "watching webhook") {
		t.Errorf("out %q err %q", f.out.String(), f.err.String())
	}
	code, _, errOut := run(t, "deliveries", "--repo", "octo/hello", "--github-api", gh.URL, "--watch")
	if code != ExitUsage || !strings.Contains(errOut, "say how, with --redeliver") {
		t.Errorf("--watch alone: %d %q", code, errOut)
	}
}
