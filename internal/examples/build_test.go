package examples

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/payload"
)

// Every event.action GitHub sends (the names `hookline events` lists) can
// be built, and what Build makes is a payload of that event.action as
// GitHub's description has it: "action" is the action, and every value
// has its member's JSON type. A payload Build makes has each member the
// payload type requires; an example as GitHub or hookline wrote it may
// lack some (GitHub's own examples drift from its description, hookline's
// are kept short to read): those are counted, not refused. Before, `send
// --event issues.closed` had no example and sent nothing.
func TestBuildEveryEventAction(t *testing.T) {
	made, drift := 0, 0
	for _, name := range webhooks.EmitterEventNames() {
		event, action, hasAction := strings.Cut(name, ".")
		if !hasAction || payload.New(name) == nil {
			continue // an event without actions has an example (TestEveryEventHasAnExample)
		}
		body, note, ok := Build(name)
		if !ok {
			t.Errorf("Build(%s): nothing", name)
			continue
		}
		_, exact := Payload(name)
		if exact != (note == "") {
			t.Errorf("Build(%s): note %q, but an example exists: %v", name, note, exact)
		}
		if !exact {
			made++
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("%s: not a JSON object: %v", name, err)
			continue
		}
		if m["action"] != action {
			t.Errorf("%s: action %v, want %q", name, m["action"], action)
		}
		for _, p := range conform(reflect.TypeOf(payload.New(name)).Elem(), m, event) {
			if exact && strings.HasSuffix(p, absent) {
				drift++
				continue
			}
			t.Errorf("%s (%s): %s", name, note, p)
		}
	}
	if made == 0 {
		t.Fatal("every event.action has an example: the test builds none")
	}
	t.Logf("%d event.actions without an example built; the examples lack %d required members", made, drift)
}

const absent = ": required, absent"

// conform lists where the JSON object m departs from the struct type t of
// package payload: a required member (its field has no omitzero or
// omitempty) that is absent, or a value of the wrong JSON type.
func conform(t reflect.Type, m map[string]any, at string) (problems []string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		key, opts, _ := strings.Cut(tag, ",")
		if key == "" || key == "-" {
			continue
		}
		v, present := m[key]
		path := at + "." + key
		if !present {
			if !strings.Contains(opts, "omitzero") && !strings.Contains(opts, "omitempty") {
				problems = append(problems, path+absent)
			}
			continue
		}
		problems = append(problems, conformValue(f.Type, v, path)...)
	}
	return problems
}

func conformValue(t reflect.Type, v any, path string) []string {
	if v == nil {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			return nil
		}
		if t.Name() == "Timestamp" { // a date, or null where the description allows it
			return nil
		}
		return []string{path + ": null for a " + t.String()}
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[json.RawMessage]() {
		return nil // any JSON value: the description allows several types
	}
	wrong := func(want string) []string { return []string{fmt.Sprintf("%s: %T, want %s", path, v, want)} }
	switch t.Kind() {
	case reflect.String:
		if _, ok := v.(string); !ok {
			return wrong("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return wrong("a boolean")
		}
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64, reflect.Float32, reflect.Uint, reflect.Uint64:
		if _, ok := v.(float64); !ok {
			return wrong("a number")
		}
	case reflect.Slice:
		a, ok := v.([]any)
		if !ok {
			return wrong("an array")
		}
		var out []string
		for i, e := range a {
			out = append(out, conformValue(t.Elem(), e, fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	case reflect.Struct:
		if t.Name() == "Timestamp" { // a date, or seconds since 1970
			switch v.(type) {
			case string, float64:
				return nil
			}
			return wrong("a date")
		}
		o, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		return conform(t, o, path)
	}
	return nil
}
