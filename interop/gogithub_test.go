package interop

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-github/v84/github"

	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/webhooks/payload"
)

// githubExample is one api.github.com delivery of @octokit/webhooks-examples.
type githubExample struct {
	event, name string // "issues", "issues.opened"
	body        []byte
}

func githubExamples(t testing.TB) []githubExample {
	t.Helper()
	var events []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	path := filepath.Join(testenv.NodePackage(t, "@octokit/webhooks-examples"), "api.github.com", "index.json")
	readJSON(t, path, &events)
	var out []githubExample
	for _, ev := range events {
		for _, body := range ev.Examples {
			var head struct{ Action string }
			if err := json.Unmarshal(body, &head); err != nil {
				t.Fatal(err)
			}
			name := ev.Name
			if head.Action != "" {
				name += "." + head.Action
			}
			out = append(out, githubExample{ev.Name, name, body})
		}
	}
	if len(out) < 300 {
		t.Fatalf("interop: %d api.github.com examples, want the 329 of 7.6.1; %s", len(out), installHint)
	}
	return out
}

// TestPayloadTypesVersusGoGithub decodes every api.github.com example
// delivery with package payload and with go-github's hand-written types
// (github.ParseWebHook), the Go peer users would otherwise take. Every one
// must decode with payload; go-github's failures are counted and logged
// for the README's comparison.
func TestPayloadTypesVersusGoGithub(t *testing.T) {
	var ours, theirs, theirsUnknown int
	examples := githubExamples(t)
	for _, ex := range examples {
		v := payload.New(ex.name)
		if v == nil {
			v = payload.New(ex.event) // repository_dispatch: any action
		}
		if err := json.Unmarshal(ex.body, v); err != nil {
			ours++
			t.Errorf("payload: %s: %v", ex.name, err)
		}
		if _, err := github.ParseWebHook(ex.event, ex.body); err != nil {
			theirs++
			if strings.Contains(err.Error(), "unknown X-Github-Event") {
				theirsUnknown++
			}
			t.Logf("go-github: %s: %v", ex.name, err)
		}
	}
	t.Logf("of %d deliveries: payload fails %d, go-github v84 fails %d (%d with an unknown event type, the rest on a field's type)",
		len(examples), ours, theirs, theirsUnknown)
}

// BenchmarkDecode decodes one pull_request.opened delivery (the largest
// common payload) with package payload and with go-github.
func BenchmarkDecode(b *testing.B) {
	var body []byte
	for _, ex := range githubExamples(b) {
		if ex.name == "pull_request.opened" {
			body = ex.body
			break
		}
	}
	b.Run("payload", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var p payload.PullRequestOpenedEvent
			if err := json.Unmarshal(body, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-github", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := github.ParseWebHook("pull_request", body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
