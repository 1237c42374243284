package interop

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookline/hookline/internal/cli"
	"github.com/hookline/hookline/internal/examples"
)

// TestSendEveryExampleVerifiesWithOctokit runs `hookline send --event NAME`
// for every built-in example (hookline's and @octokit/webhooks-examples'),
// and @octokit/webhooks-methods verifies what the target got: the
// signature over the exact body, under the same secret.
func TestSendEveryExampleVerifiesWithOctokit(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an interop test (node)")
	}
	node := requireNode(t)
	type got struct {
		body []byte
		sig  string
		evt  string
	}
	received := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		received <- got{b, r.Header.Get("X-Hub-Signature-256"), r.Header.Get("X-Github-Event")}
	}))
	t.Cleanup(srv.Close)
	names := examples.Names()
	var jobs []methodsJob
	for _, name := range names {
		var out, errOut bytes.Buffer
		if code := cli.Run(t.Context(), []string{"hookline", "send", "--event", name, "--secret", secret, "--target", srv.URL}, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("send --event %s: exit %d\n%s%s", name, code, out.String(), errOut.String())
		}
		g := <-received
		if event, _, _ := strings.Cut(name, "."); g.evt != event {
			t.Errorf("send --event %s: X-GitHub-Event %q", name, g.evt)
		}
		jobs = append(jobs, methodsJob{Op: "verify", Payload: g.body, Signature: g.sig})
	}
	input, _ := json.Marshal(map[string]any{"secret": secret, "jobs": jobs})
	var res struct {
		Results []methodsResult `json:"results"`
	}
	runNode(t, node, input, &res, "methods.mjs", "batch")
	if len(res.Results) != len(jobs) {
		t.Fatalf("methods.mjs answered %d of %d", len(res.Results), len(jobs))
	}
	for i, r := range res.Results {
		if r.Valid == nil || !*r.Valid {
			t.Errorf("%s: @octokit/webhooks-methods says %v (%s)", names[i], r.Valid, r.Error)
		}
	}
	if len(names) < 161 {
		t.Errorf("%d examples, want every one of @octokit/webhooks-examples' 161 names", len(names))
	}
	t.Logf("%d examples sent and verified by @octokit/webhooks-methods", len(names))
}
