package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/hookline/hookline/internal/eventmatch"
	"github.com/hookline/hookline/internal/jsonscan"
	"github.com/hookline/hookline/webhooks/payload"
)

// An override is one --set, --set-json or --unset of send: a dotted path
// ("pull_request.number", "commits.0.message") and the text given for it
// (--set's, typed by the field it lands in; --set-json's JSON).
type override struct {
	flag, path, text string
}

// applyOverrides checks each override against the Go type generated from
// GitHub's description for the event (the same webhooks/payload types)
// and applies it to body's bytes in place: the value's bytes are replaced
// (a missing member is added at the end of its object, a removed one goes
// with its comma), so every other byte, key order and spacing included,
// stays as it was.
func applyOverrides(body []byte, typeName string, overrides []override) ([]byte, error) {
	var root reflect.Type
	if v := payload.New(typeName); v != nil {
		root = reflect.TypeOf(v).Elem()
	}
	for _, o := range overrides {
		steps := strings.Split(o.path, ".")
		if slices.Contains(steps, "") {
			return nil, usageErrorf("%s %s: a path is names and indexes joined by dots, such as pull_request.number", o.flag, o.path)
		}
		t, nullable, err := fieldType(root, steps)
		if err != nil {
			return nil, usageErrorf("%s %s: %v", o.flag, o.path, err)
		}
		var value []byte // nil: --unset
		switch o.flag {
		case "--set":
			value, err = typedValue(o.text, t, nullable)
		case "--set-json":
			value = []byte(o.text)
			err = checkJSON(value, t, nullable)
		}
		if err != nil {
			return nil, usageErrorf("%s %s: %v", o.flag, o.path, err)
		}
		if body, err = setPath(body, steps, value); err != nil {
			return nil, usageErrorf("%s %s: %v", o.flag, o.path, err)
		}
	}
	return body, nil
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
				if best := eventmatch.Nearest(step, names, len(step)/2); best != "" {
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

// typedValue makes --set's text the JSON of the field's type: a string
// field takes it as it is, a number or boolean field parses it, null is
// null where allowed; an object or list needs --set-json.
func typedValue(text string, t reflect.Type, nullable bool) ([]byte, error) {
	if text == "null" {
		if !nullable {
			return nil, fmt.Errorf("null is not allowed here (the description does not make it nullable; --unset removes an optional field)")
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
	return nil, fmt.Errorf("the field is %s: give it with --set-json", aKind(t))
}

// checkJSON checks --set-json's value against the field's type.
func checkJSON(value []byte, t reflect.Type, nullable bool) error {
	if !json.Valid(value) {
		return fmt.Errorf("%q is not JSON", value)
	}
	if bytes.Equal(bytes.TrimSpace(value), []byte("null")) {
		if !nullable {
			return fmt.Errorf("null is not allowed here (the description does not make it nullable; --unset removes an optional field)")
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
			return nil, fmt.Errorf("--unset removes object members, not list items")
		}
		return slices.Concat(body[:vs], value, body[ve:]), nil
	}
	return body, nil
}

// offset returns where sub, a subslice of body, starts in it.
func offset(body, sub []byte) int { return cap(body) - cap(sub) }
