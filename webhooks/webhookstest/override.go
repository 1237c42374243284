package webhookstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/jsonscan"
	"github.com/hookline/hookline/internal/nearest"
	"github.com/hookline/hookline/webhooks/payload"
)

// Override is one change to a delivery's payload: the member at Path, a
// dotted path through objects and list indexes ("pull_request.number",
// "commits.0.message"), takes JSON, the value as JSON; or, when JSON is
// nil, Text, read as the field's type reads it ("42" for a number, "true"
// for a boolean, any text for a string); or, with Unset, the member is
// removed. It is what `hookline send --set-json`, `--set` and `--unset`
// give.
type Override struct {
	Path  string
	JSON  []byte
	Text  string
	Unset bool
}

// Apply applies overrides, in order, to d's body in place of it: each is
// checked against the Go type webhooks/payload generates from GitHub's
// description for d's event and action ("pull_request.opened"; a payload
// of another sender is not checked), then the member's value bytes are
// replaced (a missing member is added at the end of its object, a removed
// one goes with its comma), so that every other byte, key order and
// spacing included, stays as it was. An error names the override's path
// and what is wrong; d is then unchanged.
func Apply(d *delivery.Delivery, overrides ...Override) error {
	typeName := d.Event
	if action, _ := jsonscan.StringMember(d.Body, "action"); len(action) > 0 {
		typeName += "." + string(action)
	}
	var root reflect.Type
	if v := payload.New(typeName); v != nil {
		root = reflect.TypeOf(v).Elem()
	}
	body := d.Body
	for _, o := range overrides {
		steps := strings.Split(o.Path, ".")
		if slices.Contains(steps, "") {
			return fmt.Errorf("%s: a path is names and indexes joined by dots, such as pull_request.number", o.Path)
		}
		t, nullable, err := fieldType(root, steps)
		if err != nil {
			return fmt.Errorf("%s: %v", o.Path, err)
		}
		var value []byte // nil: unset
		switch {
		case o.Unset:
		case o.JSON != nil:
			value = o.JSON
			err = checkJSON(value, t, nullable)
		default:
			value, err = typedValue(o.Text, t, nullable)
		}
		if err != nil {
			return fmt.Errorf("%s: %v", o.Path, err)
		}
		if body, err = setPath(body, steps, value); err != nil {
			return fmt.Errorf("%s: %v", o.Path, err)
		}
	}
	d.Body = body
	return nil
}

// Set sets the member at path (as Override.Path) of d's payload to value
// (any value encoding/json encodes; nil is null), changing only that
// member's bytes: Apply with value as JSON.
func Set(d *delivery.Delivery, path string, value any) error {
	b, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("%s: encoding the value: %w", path, err)
	}
	return Apply(d, Override{Path: path, JSON: b})
}

// fieldType returns the Go type at steps below t (nil when t is nil or
// below a map or any: no check there), and whether null is allowed there
// (a pointer field that is required: nullable in the description).
func fieldType(t reflect.Type, steps []string) (reflect.Type, bool, error) {
	nullable := true
	for i, step := range steps {
		if t == nil {
			return nil, true, nil
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		at := strings.Join(steps[:i], ".")
		if at == "" {
			at = "the payload"
		}
		switch t.Kind() {
		case reflect.Struct:
			if t.PkgPath() != "" && t.Name() == "Timestamp" {
				return nil, false, fmt.Errorf("%s is a time, it has no fields", at)
			}
			var names []string
			found := false
			for k := range t.NumField() {
				f := t.Field(k)
				name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "" || name == "-" {
					continue
				}
				names = append(names, name)
				if name == step {
					t, found = f.Type, true
					nullable = f.Type.Kind() == reflect.Pointer && !strings.Contains(opts, "omitzero")
					break
				}
			}
			if !found {
				hint := ""
				if best := nearest.Name(step, names, len(step)/2); best != "" {
					hint = " (did you mean " + best + "?)"
				}
				return nil, false, fmt.Errorf("%s has no field %q%s", at, step, hint)
			}
		case reflect.Slice, reflect.Array:
			if n, err := strconv.Atoi(step); err != nil || n < 0 {
				return nil, false, fmt.Errorf("%s is a list: %q is not an index", at, step)
			}
			t, nullable = t.Elem(), false
		case reflect.Map, reflect.Interface:
			return nil, true, nil // free-form: not checked below
		default:
			return nil, false, fmt.Errorf("%s is %s, it has no fields", at, aKind(t))
		}
	}
	return t, nullable, nil
}

// kindName names t's JSON kind for messages.
func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "list"
	case reflect.Struct:
		if t.Name() == "Timestamp" {
			return "time"
		}
		return "object"
	}
	return "value"
}

// aKind is kindName with its article.
func aKind(t reflect.Type) string {
	k := kindName(t)
	if strings.IndexByte("aeiou", k[0]) >= 0 {
		return "an " + k
	}
	return "a " + k
}

// typedValue makes Override.Text the JSON of the field's type: a string
// field takes it as it is, a number or boolean field parses it, null is
// null where allowed; an object or list needs --set-json.
func typedValue(text string, t reflect.Type, nullable bool) ([]byte, error) {
	if text == "null" {
		if !nullable {
			return nil, fmt.Errorf("null is not allowed here (the description does not make it nullable; unset removes an optional field)")
		}
		return []byte("null"), nil
	}
	if t == nil {
		// Free-form: JSON if it is JSON, else a string.
		if json.Valid([]byte(text)) {
			return []byte(text), nil
		}
		return json.Marshal(text)
	}
	switch kindName(t) {
	case "string":
		return json.Marshal(text)
	case "integer":
		if _, err := strconv.ParseInt(text, 10, 64); err != nil {
			return nil, fmt.Errorf("want an integer, got %q", text)
		}
		return []byte(text), nil
	case "number":
		if _, err := strconv.ParseFloat(text, 64); err != nil || !json.Valid([]byte(text)) {
			return nil, fmt.Errorf("want a number, got %q", text)
		}
		return []byte(text), nil
	case "boolean":
		if text != "true" && text != "false" {
			return nil, fmt.Errorf("want true or false, got %q", text)
		}
		return []byte(text), nil
	case "time":
		return json.Marshal(text)
	}
	return nil, fmt.Errorf("the field is %s: give its value as JSON (send --set-json)", aKind(t))
}

// checkJSON checks Override.JSON against the field's type.
func checkJSON(value []byte, t reflect.Type, nullable bool) error {
	if !json.Valid(value) {
		return fmt.Errorf("%q is not JSON", value)
	}
	if bytes.Equal(bytes.TrimSpace(value), []byte("null")) {
		if !nullable {
			return fmt.Errorf("null is not allowed here (the description does not make it nullable; unset removes an optional field)")
		}
		return nil
	}
	if t == nil {
		return nil
	}
	if err := json.Unmarshal(value, reflect.New(t).Interface()); err != nil {
		return fmt.Errorf("want %s: %v", aKind(t), err)
	}
	return nil
}

// setPath returns body with the value at steps replaced by value (nil:
// removed), every other byte kept. The last step may be a member the
// object lacks: it is added at the end.
func setPath(body []byte, steps []string, value []byte) ([]byte, error) {
	start, end := 0, len(body) // the span of the current container
	for i, step := range steps {
		cur := body[start:end]
		last := i == len(steps)-1
		if members, ok := jsonscan.Object(cur); ok {
			var m *jsonscan.Member
			for j := range members {
				if members[j].Is(step) {
					m = &members[j] // the last one wins, as in encoding/json
				}
			}
			if m == nil {
				if !last {
					return nil, fmt.Errorf("%s is not in the payload", strings.Join(steps[:i+1], "."))
				}
				if value == nil {
					return body, nil // nothing to remove
				}
				closing := start + bytes.LastIndexByte(cur, '}')
				member, _ := json.Marshal(step)
				member = append(append(member, ':'), value...)
				if len(members) > 0 {
					member = append([]byte{','}, member...)
				}
				return slices.Concat(body[:closing], member, body[closing:]), nil
			}
			vs, ve := offset(body, m.Value), offset(body, m.Value)+len(m.Value)
			if !last {
				start, end = vs, ve
				continue
			}
			if value != nil {
				return slices.Concat(body[:vs], value, body[ve:]), nil
			}
			// Remove the member and one comma beside it.
			ks := offset(body, m.Key)
			after := bytes.TrimLeft(body[ve:end], " \t\r\n")
			if len(after) > 0 && after[0] == ',' {
				return slices.Concat(body[:ks], body[end-len(after)+1:]), nil
			}
			before := bytes.TrimRight(body[start:ks], " \t\r\n")
			if len(before) > 0 && before[len(before)-1] == ',' {
				return slices.Concat(body[:start+len(before)-1], body[ve:]), nil
			}
			return slices.Concat(body[:ks], body[ve:]), nil
		}
		elems, ok := jsonscan.Array(cur)
		if !ok {
			return nil, fmt.Errorf("%s is not an object or a list in the payload", strings.Join(steps[:i], "."))
		}
		n, err := strconv.Atoi(step)
		if err != nil || n < 0 || n >= len(elems) {
			return nil, fmt.Errorf("%s: the list has %d items", strings.Join(steps[:i+1], "."), len(elems))
		}
		vs, ve := offset(body, elems[n]), offset(body, elems[n])+len(elems[n])
		if !last {
			start, end = vs, ve
			continue
		}
		if value == nil {
			return nil, fmt.Errorf("only object members can be removed, not list items")
		}
		return slices.Concat(body[:vs], value, body[ve:]), nil
	}
	return body, nil
}

// offset returns where sub, a subslice of body, starts in it.
func offset(body, sub []byte) int { return cap(body) - cap(sub) }
