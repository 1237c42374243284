package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEventsGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"events.txt", []string{"events"}},
		{"events.json", []string{"events", "--json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, tt.args...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("exit code = %d, stderr = %q; want 0 and nothing", code, errOut)
			}
			golden(t, tt.name, []byte(out))
		})
	}
}

func TestEventsListsKnownNames(t *testing.T) {
	_, out, _ := run(t, "events")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, want := range []string{"push", "issues.opened", "github_app_authorization.revoked", "workflow_run.completed"} {
		found := false
		for _, l := range lines {
			found = found || l == want
		}
		if !found {
			t.Errorf("events does not list %q", want)
		}
	}
	_, js, _ := run(t, "events", "--json")
	var names []string
	if err := json.Unmarshal([]byte(js), &names); err != nil {
		t.Fatalf("events --json is not a JSON array of strings: %v", err)
	}
	if len(names) != len(lines) {
		t.Errorf("events --json has %d names, events prints %d", len(names), len(lines))
	}
}

func TestEventsTakesNoArguments(t *testing.T) {
	code, _, errOut := run(t, "events", "push")
	if code != ExitUsage || !strings.Contains(errOut, "hookline events | grep push") {
		t.Errorf("exit %d, stderr %q; want 2 with a grep hint", code, errOut)
	}
}
