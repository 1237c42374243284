package webhooks_test

import (
	"encoding/json"
	"testing"

	"github.com/hookline/hookline/webhooks"
)

func TestEventAction(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    string
	}{
		{"simple", `{"action":"opened"}`, "opened"},
		{"among others", `{"zen":"x","action":"created","hook":{"action":"inner"}}`, "created"},
		{"white space", " \n\t{ \"action\" :\r\n \"closed\" } ", "closed"},
		{"nested only", `{"issue":{"action":"opened"},"list":["action",{"action":"x"}]}`, ""},
		{"no action", `{"ref":"refs/heads/main"}`, ""},
		{"empty object", `{}`, ""},
		{"empty action", `{"action":""}`, ""},
		{"number action", `{"action":5}`, ""},
		{"null action", `{"action":null}`, ""},
		{"object action", `{"action":{"a":1}}`, ""},
		{"key case differs", `{"Action":"opened"}`, ""},
		{"escaped key", `{"\u0061ction":"opened"}`, "opened"},
		{"escaped value", `{"action":"op\u0065ned\n"}`, "opened\n"},
		{"non-ASCII value", `{"action":"erstellt ✓"}`, "erstellt ✓"},
		{"duplicate key last wins", `{"action":"opened","action":"closed"}`, "closed"},
		{"duplicate key last not string", `{"action":"opened","action":1}`, ""},
		{"string with braces before", `{"body":"} { \" ]","action":"edited"}`, "edited"},
		{"array payload", `[{"action":"opened"}]`, ""},
		{"string payload", `"action"`, ""},
		{"invalid JSON", `{"action":"opened"`, ""},
		{"trailing garbage", `{"action":"opened"} x`, ""},
		{"empty", ``, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := webhooks.Event{Name: "issues", Payload: json.RawMessage(tt.payload)}
			if got := e.Action(); got != tt.want {
				t.Errorf("Event{Payload: %q}.Action() = %q, want %q", tt.payload, got, tt.want)
			}
		})
	}
}

// FuzzAction compares Event.Action with a decoding by encoding/json.
//
// Run: go test ./webhooks -run '^$' -fuzz '^FuzzAction$' -fuzztime 30s
func FuzzAction(f *testing.F) {
	for _, s := range []string{
		`{"action":"opened"}`, `{"a":[1,{"action":"x"}],"action":"y"}`, `{"\u0061ction":"z"}`,
		`{"action":1}`, `[]`, `{"action":"\ud800"}`, `{"action":"a","action":"b"}`, `{`, `{"x":"\\\"","action":"q"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		got := webhooks.Event{Payload: p}.Action()
		want := ""
		var m map[string]json.RawMessage
		if json.Unmarshal(p, &m) == nil && m != nil {
			var s string
			if json.Unmarshal(m["action"], &s) == nil {
				want = s
			}
		}
		if got != want {
			t.Fatalf("Event{Payload: %q}.Action() = %q, want %q", p, got, want)
		}
	})
}
