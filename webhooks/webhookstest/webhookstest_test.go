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
	d.Headers.Set("X-Github-Hook-Id", "42")
	r := webhookstest.Request(d, "/api/github/webhooks", "s3cret")
	body := make([]byte, 64)
	n, _ := r.Body.Read(body)
	ok, err := signature.Verify("s3cret", body[:n], r.Header.Get("X-Hub-Signature-256"))
	if r.Method != "POST" || r.URL.Path != "/api/github/webhooks" || r.Header.Get("X-Github-Event") != "ping" || len(r.Header.Get("X-Github-Delivery")) != 36 ||
		r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Github-Hook-Id") != "42" || !ok || err != nil {
		t.Errorf("request %v %v: signature valid %v (%v)", r.Method, r.Header, ok, err)
	}
	if r := webhookstest.Request(d, "/", ""); r.Header.Get("X-Hub-Signature-256") != "" {
		t.Error("no secret, yet signed")
	}
}

// Set changes the bytes of the member it names and no other: key order,
// spacing, escapes and number spellings stay, in a payload no encoder
// would write. Before, Set decoded and encoded the whole body again, keys
// sorted.
func TestSet(t *testing.T) {
	body := "{ \"ref\" : \"refs/heads/main\",\n  \"forced\":false, \"commits\":[{\"message\":\"caf\\u00e9\",\"distinct\":true}],\"before\":\"0000\", \"created\":true }"
	d := webhookstest.FromBytes("push", []byte(body))
	for _, s := range []struct {
		path  string
		value any
	}{{"ref", "refs/heads/dev"}, {"commits.0.message", "two"}, {"forced", true}, {"head_commit", nil}} {
		if err := webhookstest.Set(d, s.path, s.value); err != nil {
			t.Fatalf("Set(%s) = %v", s.path, err)
		}
	}
	want := "{ \"ref\" : \"refs/heads/dev\",\n  \"forced\":true, \"commits\":[{\"message\":\"two\",\"distinct\":true}],\"before\":\"0000\", \"created\":true ,\"head_commit\":null}"
	if string(d.Body) != want {
		t.Errorf("body =\n%s\nwant\n%s", d.Body, want)
	}
	for path, want := range map[string]string{
		"nope.x":            "nope.x: the payload has no field \"nope\"",
		"commits.3.message": "commits.3.message: commits.3: the list has 1 items",
		"forced":            "forced: want a boolean", // GitHub's description types it
		"commits..x":        "a path is names and indexes",
	} {
		before := string(d.Body)
		if err := webhookstest.Set(d, path, "1"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Set(%s) = %v, want %q", path, err, want)
		}
		if string(d.Body) != before {
			t.Errorf("Set(%s) failed but changed the body", path)
		}
	}
	if err := webhookstest.Apply(d, webhookstest.Override{Path: "created", Unset: true}, webhookstest.Override{Path: "commits.0.distinct", Text: "false"}); err != nil {
		t.Fatal(err)
	}
	if want := "{ \"ref\" : \"refs/heads/dev\",\n  \"forced\":true, \"commits\":[{\"message\":\"two\",\"distinct\":false}],\"before\":\"0000\", \"head_commit\":null}"; string(d.Body) != want {
		t.Errorf("after Apply, body =\n%s\nwant\n%s", d.Body, want)
	}
}

func TestExampleNamesAndErrors(t *testing.T) {
	if _, err := webhookstest.Example("issues.zzz"); err == nil || !strings.Contains(err.Error(), "Names lists the 161") {
		t.Errorf("a name GitHub does not send: %v, want the list", err)
	}
	// An event.action without an example is made, as send makes it.
	if d, err := webhookstest.Example("issues.closed"); err != nil || d.Event != "issues" || !strings.Contains(string(d.Body), `"action":"closed"`) {
		t.Errorf("Example(issues.closed) = %v, %v; want an issues delivery with action closed", d, err)
	}
	if len(webhookstest.Names()) != 161 {
		t.Errorf("Names = %v", webhookstest.Names())
	}
	// A handler that fails, and a wrong secret, come back as errors.
	wh, _ := webhooks.New(webhooks.Options{Secret: "right"})
	wh.On("ping", func(context.Context, webhooks.Event) error { return errors.New("handler says no") })
	d, _ := webhookstest.Example("ping")
	if err := webhookstest.Receive(t.Context(), d, wh, "right"); err == nil || !strings.Contains(err.Error(), "handler says no") {
		t.Errorf("Receive with a failing handler = %v", err)
	}
	if err := webhookstest.Receive(t.Context(), d, wh, "wrong"); err == nil {
		t.Error("Receive signed with the wrong secret succeeded")
	}
	if rec := webhookstest.Serve(d, webhooks.NewMiddleware(wh, webhooks.MiddlewareOptions{}), "wrong"); rec.Code == http.StatusOK {
		t.Errorf("the middleware took a delivery signed with the wrong secret: %d", rec.Code)
	}
}

// A recorded delivery (a capture file's) keeps its event, id, body and
// headers; its old signature is replaced by the test's.
func TestRecordedDelivery(t *testing.T) {
	rec := &delivery.Delivery{ID: "abc-1", Event: "issues", Body: []byte(`{"action":"opened"}`),
		Headers: http.Header{"X-Github-Hook-Id": {"7"}, "X-Hub-Signature-256": {"sha256=old"}}}
	r := webhookstest.Request(rec, "/", "new-secret")
	ok, _ := signature.Verify("new-secret", rec.Body, r.Header.Get("X-Hub-Signature-256"))
	if r.Header.Get("X-Github-Delivery") != "abc-1" || r.Header.Get("X-Github-Event") != "issues" || r.Header.Get("X-Github-Hook-Id") != "7" || !ok {
		t.Errorf("request from a recorded delivery: %v (signature valid %v)", r.Header, ok)
	}
}
