package examples

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/hookline/hookline/internal/nearest"
	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/payload"
)

// Build returns a payload for any event or event.action GitHub sends, the
// one builder of `hookline send` and webhookstest.Example. The example
// called name when there is one (from is name, note empty). Otherwise one
// made for it, and note says how: from the event's nearest example with
// "action" set, or, for an event without any example, from the members of
// its payload type with those every delivery carries (repository, sender,
// organization, installation) taken from issues.opened. Either way it is
// decoded into name's payload type (GitHub's description) and encoded
// again, so every member the description requires for name is there: one
// the example lacks comes out as its zero value. ok is false for a name
// with neither an example nor a payload type.
func Build(name string) (body []byte, note string, ok bool) {
	if body, ok := Payload(name); ok {
		return body, "", true
	}
	event, action, _ := strings.Cut(name, ".")
	v := payload.New(name)
	if v == nil && action != "" && ForEvent(event) != nil && slices.Contains(webhooks.EmitterEventNames(), name) {
		// A name GitHub sends whose action the description leaves open
		// (repository_dispatch's is the sender's event_type): the
		// event's type, which takes any.
		v = payload.New(event)
	}
	if v == nil {
		return nil, "", false
	}
	base, from := "", ""
	if names := ForEvent(event); names != nil {
		base = nearest.Name(name, names, -1)
		from = base
	}
	var data []byte
	if base != "" {
		data, _ = Payload(base)
	} else {
		data = common()
		from = "the members of its payload type; repository, sender and installation from issues.opened"
	}
	// A member whose type differs for this action keeps its zero value;
	// the rest decodes.
	_ = json.Unmarshal(data, v)
	if f := reflect.ValueOf(v).Elem().FieldByName("Action"); action != "" && f.IsValid() && f.Kind() == reflect.String {
		f.SetString(action)
	}
	body, err := json.Marshal(v)
	if err != nil {
		return nil, "", false
	}
	what := "made from " + from
	if action != "" && base != "" {
		what += fmt.Sprintf(` with "action":%q`, action)
	}
	return body, fmt.Sprintf("no example of %s: %s, and every member GitHub's description requires for %s", name, what, name), true
}

// common is the members every delivery carries, from issues.opened.
func common() []byte {
	var all map[string]json.RawMessage
	data, _ := Payload("issues.opened")
	if json.Unmarshal(data, &all) != nil {
		return []byte("{}")
	}
	kept := map[string]json.RawMessage{}
	for _, k := range []string{"repository", "sender", "organization", "installation", "enterprise"} {
		if v, ok := all[k]; ok {
			kept[k] = v
		}
	}
	out, _ := json.Marshal(kept)
	return out
}
