package proxy

import (
	"testing"

	"github.com/hookline/hookline/internal/jsonscan"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name, payload              string
		action, repository, sender string
	}{
		{"all three", `{"action":"opened","repository":{"id":1,"full_name":"octo-org/hello-world"},"sender":{"login":"octocat"}}`, "opened", "octo-org/hello-world", "octocat"},
		{"escapes in values", `{"action":"op\u0065ned","sender":{"login":"oct\"cat"}}`, "opened", "", `oct"cat`},
		{"last duplicate wins", `{"action":"a","action":"b"}`, "b", "", ""},
		{"wrong types", `{"action":5,"repository":"x","sender":[1]}`, "", "", ""},
		{"nested action is not the action", `{"issue":{"action":"x"}}`, "", "", ""},
		{"not an object", `["action"]`, "", "", ""},
		{"invalid JSON", `{"action":"opened"`, "", "", ""},
		{"nothing", ``, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			members, _ := jsonscan.Object([]byte(tt.payload))
			a, r, s := summarize(members)
			if a != tt.action || r != tt.repository || s != tt.sender {
				t.Errorf("summarize(%s) = %q, %q, %q; want %q, %q, %q", tt.payload, a, r, s, tt.action, tt.repository, tt.sender)
			}
		})
	}
}
