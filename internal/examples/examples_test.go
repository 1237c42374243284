package examples_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hookline/hookline/internal/examples"
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
	if got := examples.Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
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
		{"deployment", nil},
	}
	for _, tt := range tests {
		if got := examples.ForEvent(tt.event); !slices.Equal(got, tt.want) {
			t.Errorf("ForEvent(%q) = %q, want %q", tt.event, got, tt.want)
		}
	}
}

// TestPayloads checks that every example is a compact JSON object whose
// action matches its name, for a known event, in the one consistent story.
func TestPayloads(t *testing.T) {
	for _, name := range examples.Names() {
		t.Run(name, func(t *testing.T) {
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
			if err := webhooks.ValidateEventName(name, webhooks.ValidateOptions{}); err != nil {
				t.Errorf("ValidateEventName(%q) = %v, want nil", name, err)
			}
			_, action, hasAction := strings.Cut(name, ".")
			switch {
			case hasAction && (v.Action == nil || *v.Action != action):
				t.Errorf("Payload(%q) action = %v, want %q", name, v.Action, action)
			case !hasAction && v.Action != nil:
				t.Errorf("Payload(%q) has action %q, want none", name, *v.Action)
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
	for _, name := range []string{"", "issues.closed", "../examples", "payloads/push", "push.json"} {
		if p, ok := examples.Payload(name); ok {
			t.Errorf("Payload(%q) = %d bytes, true; want false", name, len(p))
		}
	}
}
