package webhookstest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/internal/signature"
	"github.com/hookline/hookline/webhooks/webhookstest"
)

func TestRequestIsWhatGitHubSends(t *testing.T) {
	d := webhookstest.FromBytes("ping", []byte(`{"zen":"Design for failure."}`))
	d.Header = http.Header{"X-Github-Hook-Id": {"42"}}
	r := d.Request("/api/github/webhooks", "s3cret")
	body := make([]byte, 64)
	n, _ := r.Body.Read(body)
	ok, err := signature.Verify("s3cret", body[:n], r.Header.Get("X-Hub-Signature-256"))
	if r.Method != "POST" || r.URL.Path != "/api/github/webhooks" || r.Header.Get("X-Github-Event") != "ping" || len(r.Header.Get("X-Github-Delivery")) != 36 ||
		r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Github-Hook-Id") != "42" || !ok || err != nil {
		t.Errorf("request %v %v: signature valid %v (%v)", r.Method, r.Header, ok, err)
	}
	if r := d.Request("/", ""); r.Header.Get("X-Hub-Signature-256") != "" {
		t.Error("no secret, yet signed")
	}
}

func TestSet(t *testing.T) {
	d, err := webhookstest.FromPayload("push", map[string]any{"ref": "refs/heads/main", "commits": []any{map[string]any{"message": "one"}}, "size": 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		path  string
		value any
	}{{"ref", "refs/heads/dev"}, {"commits.0.message", "two"}, {"size", 2}, {"head_commit", nil}} {
		if err := d.Set(s.path, s.value); err != nil {
			t.Fatalf("Set(%s) = %v", s.path, err)
		}
	}
	if want := `{"commits":[{"message":"two"}],"head_commit":null,"ref":"refs/heads/dev","size":2}`; string(d.Body) != want {
		t.Errorf("body = %s, want %s", d.Body, want)
	}
	for path, want := range map[string]string{
		"nope.x":            `nope: no field "nope"`,
		"commits.3.message": "commits.3: want an index below 1",
		"ref.x":             "ref: not an object or an array",
	} {
		if err := d.Set(path, 1); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Set(%s) = %v, want %q", path, err, want)
		}
	}
}

func TestExampleNamesAndErrors(t *testing.T) {
	if _, err := webhookstest.Example("issues.closed"); err == nil || !strings.Contains(err.Error(), "Names lists the 161") {
		t.Errorf("an example that is not there: %v, want the list", err)
	}
	if len(webhookstest.Names()) != 161 {
		t.Errorf("Names = %v", webhookstest.Names())
	}
	// A handler that fails, and a wrong secret, come back as errors.
	wh, _ := webhooks.New(webhooks.Options{Secret: "right"})
	wh.On("ping", func(context.Context, webhooks.Event) error { return errors.New("handler says no") })
	d, _ := webhookstest.Example("ping")
	if err := d.Receive(t.Context(), wh, "right"); err == nil || !strings.Contains(err.Error(), "handler says no") {
		t.Errorf("Receive with a failing handler = %v", err)
	}
	if err := d.Receive(t.Context(), wh, "wrong"); err == nil {
		t.Error("Receive signed with the wrong secret succeeded")
	}
	if rec := d.Serve(webhooks.NewMiddleware(wh, webhooks.MiddlewareOptions{}), "wrong"); rec.Code == http.StatusOK {
		t.Errorf("the middleware took a delivery signed with the wrong secret: %d", rec.Code)
	}
}

// A recorded delivery (a capture file's) keeps its event, id, body and
// headers; its old signature is replaced by the test's.
func TestFromDelivery(t *testing.T) {
	rec := &delivery.Delivery{ID: "abc-1", Event: "issues", Body: []byte(`{"action":"opened"}`),
		Headers: http.Header{"X-Github-Hook-Id": {"7"}, "X-Hub-Signature-256": {"sha256=old"}}}
	d := webhookstest.FromDelivery(rec)
	r := d.Request("/", "new-secret")
	ok, _ := signature.Verify("new-secret", rec.Body, r.Header.Get("X-Hub-Signature-256"))
	if r.Header.Get("X-Github-Delivery") != "abc-1" || r.Header.Get("X-Github-Event") != "issues" || r.Header.Get("X-Github-Hook-Id") != "7" || !ok {
		t.Errorf("request from a recorded delivery: %v (signature valid %v)", r.Header, ok)
	}
}
