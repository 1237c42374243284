package cli

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
)

// sendBody runs send with args to a recording target and returns the body
// it got.
func sendBody(t *testing.T, args ...string) []byte {
	t.Helper()
	target := newRecordingTarget(t, nil)
	code, out, errOut := run(t, append(append([]string{"send"}, args...), "--target", target.URL)...)
	if code != ExitOK || len(target.requests()) != 1 {
		t.Fatalf("send %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return target.requests()[0].body
}

// --set checks each path and value against the event's type from GitHub's
// description and changes only the value's bytes.
func TestSendSet(t *testing.T) {
	orig := sendBody(t, "--event", "pull_request.opened")
	got := sendBody(t, "--event", "pull_request.opened",
		"--set", "pull_request.number=7", // an integer
		"--set", "pull_request.title=Set by a test", // a string
		"--set", "pull_request.draft=true", // a boolean (optional)
		"--set", "pull_request.body=null", // null, nullable in the description
		"--set-json", `pull_request.labels=[{"name":"x"}]`, // a list
		"--set", "pull_request.head.ref=feature/x", // nested
		"--unset", "pull_request.merged_by",
	)
	want := string(orig)
	for _, r := range [][2]string{
		{`.diff","number":2,`, `.diff","number":7,`},
		{`"title":"Add the missing comma to the greeting",`, `"title":"Set by a test",`},
		{`"draft":false,`, `"draft":true,`},
		{`"body":"Fixes #1.",`, `"body":null,`},
		{`"labels":[],`, `"labels":[{"name":"x"}],`},
		{`"merged_by":null,`, ``},
		{`"ref":"fix-greeting"`, `"ref":"feature/x"`},
	} {
		if !strings.Contains(want, r[0]) {
			t.Fatalf("the example lacks %s", r[0])
		}
		want = strings.Replace(want, r[0], r[1], 1)
	}
	// Every byte outside the overridden values is as it was.
	if string(got) != want {
		t.Errorf("send with overrides sent\n%s\nwant\n%s", got, want)
	}

	// A list item by its index.
	if got := sendBody(t, "--event", "push", "--set", "commits.0.message=Changed in a test"); !strings.Contains(string(got), `"message":"Changed in a test"`) {
		t.Errorf("commits.0.message not set: %s", got)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "pull_request.numbr=1"}, `--set pull_request.numbr: pull_request has no field "numbr" (did you mean number?)`},
		{[]string{"--set", "pull_request.number=seven"}, `--set pull_request.number: want an integer, got "seven"`},
		{[]string{"--set", "pull_request.draft=yes"}, `--set pull_request.draft: want true or false, got "yes"`},
		{[]string{"--set", "pull_request.title=null"}, `--set pull_request.title: null is not allowed here`},
		{[]string{"--set", "pull_request.labels=x"}, `--set pull_request.labels: the field is a list: give its value as JSON (send --set-json)`},
		{[]string{"--set-json", `pull_request.number="7"`}, `--set-json pull_request.number: want an integer`},
		{[]string{"--set", "pull_request.labels.x.name=a"}, `pull_request.labels is a list: "x" is not an index`},
		{[]string{"--set", "pull_request.number.x=1"}, `pull_request.number is an integer, it has no fields`},
		{[]string{"--set", "nopath"}, `--set "nopath": want PATH=VALUE`},
	} {
		code, _, errOut := run(t, append([]string{"send", "--event", "pull_request.opened", "--target", "http://127.0.0.1:1"}, tt.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}

// --from sends a capture's payload as the event it was, overrides applied
// in place: every byte outside the new value is the capture's, spacing and
// key order included.
func TestSendFromCapture(t *testing.T) {
	body := []byte("{\n  \"zeta\": 1,\n  \"action\": \"opened\",\n  \"issue\": {\"number\": 1, \"title\": \"Old\"},\n  \"alpha\": [1, 2]\n}\n")
	path, err := capture.Write(t.TempDir(), capture.File{Delivery: delivery.Delivery{ID: "c1", Event: "issues", ReceivedAt: time.Unix(1700000000, 0),
		Headers: http.Header{"X-Github-Event": {"issues"}}, Body: body}, Action: "opened"})
	if err != nil {
		t.Fatal(err)
	}
	got := sendBody(t, "--from", path, "--set", "issue.title=New title")
	want := bytes.Replace(body, []byte(`"title": "Old"`), []byte(`"title": "New title"`), 1)
	if !bytes.Equal(got, want) {
		t.Errorf("--from with --set sent\n%s\nwant\n%s", got, want)
	}
	if code, _, errOut := run(t, "send", "--from", filepath.Join(t.TempDir(), "none.json"), "--target", "http://127.0.0.1:1"); code != ExitUsage || !strings.Contains(errOut, "--from") {
		t.Errorf("--from a missing file: exit %d, %q", code, errOut)
	}
	os.Remove(path)
}
