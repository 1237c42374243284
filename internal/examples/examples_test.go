package examples_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hookline/hookline/internal/examples"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/webhooks"
)

func TestNames(t *testing.T) {
	want := []string{
		"check_run.completed",
		"installation.created",
		"issue_comment.created",
		"issues.opened",
		"ping",
		"pull_request.closed",
		"pull_request.opened",
		"push",
		"release.published",
		"workflow_run.completed",
	}
	var own []string
	for _, n := range examples.Names() {
		if examples.Source(n) == "hookline" {
			own = append(own, n)
		}
	}
	if !slices.Equal(own, want) {
		t.Errorf("hookline's own examples = %q, want %q", own, want)
	}
	// And every name @octokit/webhooks-examples 7.6.1 has an api.github.com
	// example of (161, counted from its index.json with Python), theirs
	// where hookline has none.
	if n, src := len(examples.Names()), examples.Source("deployment.created"); n != 161 || src != "@octokit/webhooks-examples 7.6.1" {
		t.Errorf("%d names, deployment.created from %q; want 161, octokit's", n, src)
	}
}

func TestForEvent(t *testing.T) {
	tests := []struct {
		event string
		want  []string
	}{
		{"pull_request", []string{"pull_request.closed", "pull_request.opened"}},
		{"issues", []string{"issues.opened"}},
		{"push", []string{"push"}},
		{"issue", nil},
		{"deployment", []string{"deployment.created"}}, // octokit's: hookline has none
		{"not_an_event", nil},
	}
	for _, tt := range tests {
		if got := examples.ForEvent(tt.event); !slices.Equal(got, tt.want) {
			t.Errorf("ForEvent(%q) = %q, want %q", tt.event, got, tt.want)
		}
	}
}

// TestPayloads checks that every example is a compact JSON object whose
// action matches its name, for a known event, and hookline's own in the
// one consistent story.
func TestPayloads(t *testing.T) {
	for _, name := range examples.Names() {
		t.Run(name, func(t *testing.T) {
			ownStory := examples.Source(name) == "hookline"
			p, ok := examples.Payload(name)
			if !ok {
				t.Fatalf("Payload(%q) not found", name)
			}
			if strings.ContainsAny(string(p), "\n\t") {
				t.Errorf("Payload(%q) is not compact", name)
			}
			var v struct {
				Action     *string `json:"action"`
				Repository *struct {
					FullName string `json:"full_name"`
				} `json:"repository"`
				Sender struct {
					Login string `json:"login"`
				} `json:"sender"`
				Installation *struct {
					ID int64 `json:"id"`
				} `json:"installation"`
			}
			if err := json.Unmarshal(p, &v); err != nil {
				t.Fatalf("Payload(%q) is not a JSON object: %v", name, err)
			}
			// repository_dispatch's action is the sender's own event_type.
			if err := webhooks.ValidateEventName(name, webhooks.ValidateOptions{}); err != nil && !strings.HasPrefix(name, "repository_dispatch.") {
				t.Errorf("ValidateEventName(%q) = %v, want nil", name, err)
			}
			_, action, hasAction := strings.Cut(name, ".")
			switch {
			case hasAction && (v.Action == nil || *v.Action != action):
				t.Errorf("Payload(%q) action = %v, want %q", name, v.Action, action)
			case !hasAction && v.Action != nil:
				t.Errorf("Payload(%q) has action %q, want none", name, *v.Action)
			}
			if !ownStory {
				return
			}
			if v.Sender.Login != "octocat" {
				t.Errorf("Payload(%q) sender = %q, want octocat", name, v.Sender.Login)
			}
			if v.Repository != nil && v.Repository.FullName != "octo-org/hello-world" {
				t.Errorf("Payload(%q) repository = %q, want octo-org/hello-world", name, v.Repository.FullName)
			}
			if name != "ping" && (v.Installation == nil || v.Installation.ID != 52001234) {
				t.Errorf("Payload(%q) installation = %+v, want id 52001234", name, v.Installation)
			}
		})
	}
}

func TestPayloadUnknown(t *testing.T) {
	for _, name := range []string{"", "issues.nothing", "../examples", "payloads/push", "push.json"} {
		if p, ok := examples.Payload(name); ok {
			t.Errorf("Payload(%q) = %d bytes, true; want false", name, len(p))
		}
	}
}

// octokit.json.gz is what genexamples makes of the pinned
// @octokit/webhooks-examples (go generate ./internal/examples/).
func TestOctokitExamplesAreGenerated(t *testing.T) {
	in := testenv.NodePackage(t, "@octokit/webhooks-examples")
	out := filepath.Join(t.TempDir(), "octokit.json.gz")
	cmd := testenv.GoCommand("run", "./genexamples", "-in", in, "-out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("genexamples: %v\n%s", err, b)
	}
	want, _ := os.ReadFile(out)
	have, _ := os.ReadFile("octokit.json.gz")
	if !bytes.Equal(have, want) {
		t.Error("octokit.json.gz is not what genexamples makes of the pinned package: run go generate ./internal/examples/")
	}
}
