package payload_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/webhooks/payload"
)

func TestTimestamp(t *testing.T) {
	for _, tc := range []struct {
		json string
		want time.Time
		zero bool
	}{
		{json: `"2019-05-15T15:20:33Z"`, want: time.Date(2019, 5, 15, 15, 20, 33, 0, time.UTC)},
		{json: `"2019-05-15T17:20:33+02:00"`, want: time.Date(2019, 5, 15, 15, 20, 33, 0, time.UTC)},
		{json: `1557933565`, want: time.Date(2019, 5, 15, 15, 19, 25, 0, time.UTC)},
		{json: `"2018-04-25 20:42:10"`, want: time.Date(2018, 4, 25, 20, 42, 10, 0, time.UTC)},
		{json: `null`, zero: true},
	} {
		var ts payload.Timestamp
		if err := json.Unmarshal([]byte(tc.json), &ts); err != nil {
			t.Errorf("Unmarshal(%s): %v", tc.json, err)
			continue
		}
		got, err := ts.Time()
		if err != nil || !got.Equal(tc.want) || ts.IsZero() != tc.zero {
			t.Errorf("%s: Time() = %v, %v; IsZero %v; want %v, nil; %v", tc.json, got, err, ts.IsZero(), tc.want, tc.zero)
		}
		out, err := json.Marshal(ts)
		if err != nil || string(out) != tc.json {
			t.Errorf("%s: Marshal = %s, %v; want it back unchanged", tc.json, out, err)
		}
	}
	for _, bad := range []string{`true`, `{}`, `[1]`} {
		var ts payload.Timestamp
		if err := json.Unmarshal([]byte(bad), &ts); err == nil {
			t.Errorf("Unmarshal(%s) = nil error, want one", bad)
		}
	}
	var ts payload.Timestamp
	if err := json.Unmarshal([]byte(`"yesterday"`), &ts); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Time(); err == nil {
		t.Error(`Time() of "yesterday" = nil error, want one`)
	}
	now := time.Date(2026, 11, 24, 6, 0, 0, 5, time.UTC)
	if got, err := payload.NewTimestamp(now).Time(); err != nil || !got.Equal(now) {
		t.Errorf("NewTimestamp(%v).Time() = %v, %v", now, got, err)
	}
}

// TestExtraKeepsUnnamedProperties: properties the description does not
// name survive decoding and encoding at every depth, and named ones still
// decode into their fields.
func TestExtraKeepsUnnamedProperties(t *testing.T) {
	const in = `{"action":"opened","future":{"a":[1,2]},"issue":{"number":7,"brand_new":"x"},"sender":{"login":"octocat","id":1,"also_new":true}}`
	var p payload.IssuesOpenedEvent
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	if p.Issue.Number != 7 || p.Sender.Login != "octocat" {
		t.Errorf("Issue.Number = %d, Sender.Login = %q; want 7, octocat", p.Issue.Number, p.Sender.Login)
	}
	for _, tc := range []struct {
		extra map[string]json.RawMessage
		key   string
		want  string
	}{
		{p.Extra, "future", `{"a":[1,2]}`},
		{p.Issue.Extra, "brand_new", `"x"`},
		{p.Sender.Extra, "also_new", `true`},
	} {
		if got := string(tc.extra[tc.key]); got != tc.want || len(tc.extra) != 1 {
			t.Errorf("Extra[%q] = %s (of %d), want %s alone", tc.key, got, len(tc.extra), tc.want)
		}
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"future":{"a":[1,2]}`, `"brand_new":"x"`, `"also_new":true`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("Marshal lost %s: %s", want, out)
		}
	}
	// Decoding again into the same value replaces Extra.
	if err := json.Unmarshal([]byte(`{"action":"opened"}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.Extra != nil {
		t.Errorf("Extra after decoding an object without unnamed properties = %v, want nil", p.Extra)
	}
}

// TestDecodeErrorNamesTheField: a wrong type is encoding/json's error,
// naming the property path and a generated type, never the generated
// code's plain twin.
func TestDecodeErrorNamesTheField(t *testing.T) {
	for _, tc := range []struct{ in, structName, field string }{
		{`{"action":5}`, "IssuesOpenedEvent", "action"},
		{`{"issue":{"number":"seven"}}`, "WebhooksIssue", "issue.number"},
	} {
		var p payload.IssuesOpenedEvent
		err := json.Unmarshal([]byte(tc.in), &p)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			t.Fatalf("Unmarshal(%s) = %v, want a *json.UnmarshalTypeError", tc.in, err)
		}
		if te.Struct != tc.structName || te.Field != tc.field || strings.Contains(err.Error(), "plain") {
			t.Errorf("Unmarshal(%s): %v; want it to name %s.%s", tc.in, err, tc.structName, tc.field)
		}
	}
}

// FuzzRoundTrip: whatever decodes encodes, and what that encodes to
// decodes to a value that encodes the same.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte(`{"action":"opened","issue":{"number":1,"created_at":"2019-05-15T15:20:33Z"},"x":[null]}`))
	f.Add([]byte(`{"repository":{"created_at":1557933565,"pushed_at":null},"commits":[{"id":"a"}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p payload.PushEvent
		if json.Unmarshal(b, &p) != nil {
			return
		}
		once, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("Marshal after Unmarshal(%q): %v", b, err)
		}
		var q payload.PushEvent
		if err := json.Unmarshal(once, &q); err != nil {
			t.Fatalf("Unmarshal(%s) of our own encoding: %v", once, err)
		}
		twice, err := json.Marshal(q)
		if err != nil || string(twice) != string(once) {
			t.Fatalf("encodings differ:\n%s\n%s (%v)", once, twice, err)
		}
	})
}
