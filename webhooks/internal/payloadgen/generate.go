package payloadgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"maps"
	"slices"
	"strings"
	"unicode"
)

// Event is one webhook of the description: an event name and, when its
// schema names one, an action.
type Event struct {
	Name   string // "issues"
	Action string // "opened", or "" for events without actions
	Type   string // Go type name: "IssuesOpenedEvent"
}

// Key is the name webhooks dispatches on: "issues.opened" or "push".
func (e Event) Key() string {
	if e.Action == "" {
		return e.Name
	}
	return e.Name + "." + e.Action
}

// Generate returns the Go source of package pkg for the description src
// (read from source, named in the header), and the events it holds.
//
// How a schema becomes Go:
//   - Each webhook's request body becomes the struct <Event><Action>Event
//     (IssuesOpenedEvent; PushEvent when the event has no action), and each
//     event with actions also gets <Event>Event, the union of its actions:
//     every property any action has, required where all of them require
//     it, so one handler can take every action.
//   - A component ($ref) becomes a struct named after it (simple-user:
//     SimpleUser); an inline object is named after where it first appears
//     (IssuesOpenedEventIssue), and an inline object with the same fields as
//     one already written reuses that one's name.
//   - allOf merges its schemas; oneOf and anyOf merge theirs as a union;
//     null in a union or type list makes the value nullable. Shapes that
//     cannot share a Go type (a string or an object) become json.RawMessage.
//   - string, integer, number, boolean: string, int64, float64, bool; a
//     date-time (or GitHub's date-time-or-Unix-seconds) is Timestamp; an
//     object with only additionalProperties is a map.
//   - A property that is optional or nullable is a pointer (slices, maps
//     and json.RawMessage are nil instead); an optional one has omitempty.
//   - Every struct has Extra, which keeps properties the description does
//     not name, and MarshalJSON writes them back: GitHub sends fields
//     before its description lists them. Event types fill the Extra fields
//     of everything within them when decoded (UnmarshalJSON).
func Generate(pkg, source string, src []byte) ([]byte, []Event, error) {
	var doc document
	if err := json.Unmarshal(src, &doc); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", source, err)
	}
	z := &normalizer{schemas: doc.Components.Schemas, done: map[string]*node{}, busy: map[string]bool{}}
	e := &emitter{decls: map[string]string{}, sigs: map[string]string{}, components: map[string]string{}, reserved: map[string]bool{}}
	for name := range doc.Components.Schemas {
		e.reserved[goName(name)] = true
	}

	type hook struct {
		Event
		node *node
		desc string
	}
	byEvent := map[string][]hook{}
	for key, w := range doc.Webhooks {
		event, opAction, _ := strings.Cut(w.Post.OperationID, "/")
		event = strings.ReplaceAll(event, "-", "_")
		body, ok := w.Post.RequestBody.Content["application/json"]
		if event == "" || !ok || body.Schema == nil {
			return nil, nil, fmt.Errorf("webhook %s: no operationId or application/json schema", key)
		}
		n, err := z.norm(body.Schema)
		if err != nil {
			return nil, nil, fmt.Errorf("webhook %s: %w", key, err)
		}
		if n.kind != kObject {
			return nil, nil, fmt.Errorf("webhook %s: payload is not an object", key)
		}
		// The action is the one value of the action property; without an
		// enum (repository_dispatch's action is the sender's event_type),
		// the operationId's second part.
		action := ""
		if a := n.props["action"]; a != nil {
			switch len(a.enum) {
			case 0:
				action = opAction
			case 1:
				action = a.enum[0]
			default:
				return nil, nil, fmt.Errorf("webhook %s: action enum %q, want one value", key, a.enum)
			}
		}
		h := hook{Event: Event{Name: event, Action: action}, node: n, desc: w.Post.Description}
		h.Type = goName(event) + "Event"
		if action != "" {
			h.Type = goName(event) + goName(strings.ReplaceAll(action, ".", "_")) + "Event"
		}
		if n.name != "" {
			e.components[n.name] = h.Type
		}
		byEvent[event] = append(byEvent[event], h)
	}

	var events []Event
	for _, name := range slices.Sorted(maps.Keys(byEvent)) {
		hooks := byEvent[name]
		slices.SortFunc(hooks, func(a, b hook) int { return strings.Compare(a.Action, b.Action) })
		var union *node
		var types []string
		for _, h := range hooks {
			if h.Action == "" && len(hooks) > 1 {
				return nil, nil, fmt.Errorf("event %s: both with and without an action", name)
			}
			doc := fmt.Sprintf("%s is the payload of the %q event", h.Type, h.Name)
			if h.Action != "" {
				doc += fmt.Sprintf(" with action %q", h.Action)
			}
			e.structType(h.node, h.Type, doc+": "+h.desc)
			events = append(events, h.Event)
			types = append(types, h.Type)
			union = mergeInto(union, h.node, false)
		}
		if hooks[0].Action == "" {
			continue
		}
		all := Event{Name: name, Type: goName(name) + "Event"}
		e.structType(union, all.Type, fmt.Sprintf("%s is the payload of every %q event, whatever its action: "+
			"the properties of %s together, required only where all of them require them.",
			all.Type, name, strings.Join(types, ", ")))
		events = append(events, all)
	}
	slices.SortFunc(events, func(a, b Event) int { return strings.Compare(a.Key(), b.Key()) })

	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by genpayload from %s. DO NOT EDIT.\n\npackage %s\n\n", source, pkg)
	b.WriteString("import \"encoding/json\"\n\n")
	b.WriteString("// types maps each event and event.action name to its payload type.\nvar types = map[string]func() any{\n")
	for _, ev := range events {
		fmt.Fprintf(&b, "\t%q: func() any { return new(%s) },\n", ev.Key(), ev.Type)
	}
	b.WriteString("}\n")
	for _, name := range e.order {
		b.WriteString(e.decls[name])
	}
	// Each event type says which event it is the payload of, so that a
	// handler registered for another event is refused (webhooks.Handle) and
	// one can be registered by its type alone (webhooks.HandleEvent).
	for _, ev := range events {
		fmt.Fprintf(&b, "\n// EventName returns %q, the event %s is the payload of.\nfunc (*%s) EventName() string { return %q }\n", ev.Key(), ev.Type, ev.Type, ev.Key())
	}
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, nil, fmt.Errorf("generated code does not format: %w", err)
	}
	return out, events, nil
}

// emitter writes Go declarations for nodes.
type emitter struct {
	decls      map[string]string // Go type name -> declaration
	order      []string
	sigs       map[string]string // struct fields -> Go type name
	components map[string]string // component name -> Go type name
	reserved   map[string]bool   // Go names of components
}

// goType is the Go type of n, naming a new struct hint.
func (e *emitter) goType(n *node, hint string) string {
	switch n.kind {
	case kObject:
		if len(n.props) > 0 {
			return e.structType(n, hint, "")
		}
		if n.extra == nil || n.extra.kind == kAny {
			return "map[string]json.RawMessage"
		}
		return "map[string]" + e.elemType(n.extra, hint+"Value")
	case kArray:
		return "[]" + e.elemType(n.items, hint+"Item")
	case kString:
		return "string"
	case kTime:
		return "Timestamp"
	case kInt:
		return "int64"
	case kNumber:
		return "float64"
	case kBool:
		return "bool"
	}
	return "json.RawMessage"
}

// elemType is the Go type of a slice or map element: a pointer when null is
// allowed.
func (e *emitter) elemType(n *node, hint string) string {
	t := e.goType(n, hint)
	if n.nullable && pointable(n) {
		return "*" + t
	}
	return t
}

// pointable says whether a value of n's Go type has no nil of its own.
func pointable(n *node) bool {
	switch n.kind {
	case kObject:
		return len(n.props) > 0
	case kAny, kNull, kArray:
		return false
	}
	return true
}

// structType writes the struct for object n, named name (a forced name,
// from doc) or, if n is a component, after the component, or else after
// hint unless a struct with the same fields exists; it returns the name.
func (e *emitter) structType(n *node, name, doc string) string {
	forced := doc != ""
	if !forced && n.name != "" {
		if known, ok := e.components[n.name]; ok {
			if _, done := e.decls[known]; done {
				return known
			}
			name = known
		} else {
			name = goName(n.name)
			e.components[n.name] = name
		}
	}
	var fields, sig strings.Builder
	used := map[string]bool{"Extra": true}
	for _, prop := range slices.Sorted(maps.Keys(n.props)) {
		p := n.props[prop]
		field := goName(prop)
		for i := 2; used[field]; i++ {
			field = fmt.Sprintf("%s%d", goName(prop), i)
		}
		used[field] = true
		t := e.goType(p, name+field)
		required := n.required[prop]
		if !required || p.nullable {
			if pointable(p) {
				t = "*" + t
			}
		}
		tag := prop
		if !required {
			tag += ",omitzero"
		}
		line := fmt.Sprintf("%s %s `json:%q`\n", field, t, tag)
		sig.WriteString(line)
		comment(&fields, "\t", describe(p))
		fields.WriteString("\t" + line)
	}
	key := sig.String()
	if !forced && n.name == "" {
		if have, ok := e.sigs[key]; ok {
			return have
		}
	}
	if _, taken := e.decls[goName(n.title)]; !forced && n.name == "" && n.title != "" && !taken && !e.reserved[goName(n.title)] {
		name = goName(n.title) // "User", where the description titles the object
	}
	base := name
	for i := 2; ; i++ {
		if _, taken := e.decls[name]; !taken {
			break
		}
		name = fmt.Sprintf("%s%d", base, i)
	}
	if _, ok := e.sigs[key]; !ok && !forced {
		e.sigs[key] = name
	}
	if !forced {
		switch title := strings.Join(strings.Fields(n.title), " "); {
		case n.desc != "":
			doc = name + ": " + describe(n)
		case title != "":
			doc = fmt.Sprintf("%s is the object GitHub's description titles %q.", name, title)
		default:
			doc = name + " is an object of the webhook payloads."
		}
	}
	var b strings.Builder
	b.WriteString("\n")
	comment(&b, "", doc)
	fmt.Fprintf(&b, "type %s struct {\n%s", name, fields.String())
	b.WriteString("\t// Extra holds the properties GitHub's description does not name, as\n" +
		"\t// they arrived (filled when an event type is decoded); MarshalJSON\n\t// writes them back.\n")
	b.WriteString("\tExtra map[string]json.RawMessage `json:\"-\"`\n}\n\n")
	if forced {
		fmt.Fprintf(&b, "// UnmarshalJSON decodes an object, keeping unnamed properties in the\n// Extra fields.\n"+
			"func (x *%[1]s) UnmarshalJSON(b []byte) error {\n\ttype plain %[1]s\n\treturn decodeEvent(b, (*plain)(x), %[1]q)\n}\n\n", name)
	}
	fmt.Fprintf(&b, "// MarshalJSON encodes x with the properties in Extra.\n"+
		"func (x %[1]s) MarshalJSON() ([]byte, error) {\n\ttype plain %[1]s\n\treturn encodeObject(plain(x), x.Extra)\n}\n", name)
	e.decls[name] = b.String()
	e.order = append(e.order, name)
	return name
}

// describe is n's description, or its title, with its enum.
func describe(n *node) string {
	d := strings.Join(strings.Fields(n.desc), " ")
	if d == "" {
		d = strings.Join(strings.Fields(n.title), " ")
	}
	if d != "" && !strings.HasSuffix(d, ".") {
		d += "."
	}
	if len(n.enum) > 0 && len(n.enum) <= 12 {
		quoted := make([]string, len(n.enum))
		for i, v := range n.enum {
			quoted[i] = fmt.Sprintf("%q", v)
		}
		d = strings.TrimSpace(d + " One of " + strings.Join(quoted, ", ") + ".")
	}
	return d
}

// comment writes text as a // comment wrapped at 78 columns.
func comment(b *strings.Builder, indent, text string) {
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(indent)+3+len(line)+1+len(w) > 78 {
			b.WriteString(indent + "// " + line + "\n")
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		b.WriteString(indent + "// " + line + "\n")
	}
}

// initialisms are written in capitals, as Go names do.
var initialisms = map[string]string{
	"id": "ID", "ids": "IDs", "url": "URL", "urls": "URLs", "html": "HTML", "api": "API", "sha": "SHA",
	"ssh": "SSH", "ip": "IP", "json": "JSON", "http": "HTTP", "https": "HTTPS", "uri": "URI",
	"uuid": "UUID", "ssl": "SSL", "oid": "OID", "cve": "CVE", "cvss": "CVSS", "cwe": "CWE",
	"ghsa": "GHSA", "sbom": "SBOM", "epss": "EPSS", "ui": "UI", "os": "OS", "gpg": "GPG",
}

// goName turns a JSON or schema name ("html_url", "simple-user", "+1")
// into an exported Go name ("HTMLURL", "SimpleUser", "PlusOne").
func goName(s string) string {
	switch s {
	case "+1":
		return "PlusOne"
	case "-1":
		return "MinusOne"
	}
	var b strings.Builder
	for _, part := range strings.FieldsFunc(s, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if up, ok := initialisms[strings.ToLower(part)]; ok {
			b.WriteString(up)
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	name := b.String()
	if name == "" || unicode.IsDigit(rune(name[0])) {
		name = "X" + name
	}
	return name
}
