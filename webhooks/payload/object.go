package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/hookline/hookline/internal/jsonscan"
)

// New returns a pointer to a new value of the payload type for an event or
// event.action name, as webhooks dispatches on: *IssuesEvent for "issues",
// *IssuesOpenedEvent for "issues.opened". It returns nil for a name
// without a type.
func New(name string) any {
	if f := types[name]; f != nil {
		return f()
	}
	return nil
}

// decodeEvent decodes the JSON object data into v, a pointer to an event
// type's plain twin (a struct without methods), and fills the Extra field
// of it and of every struct within it with the properties none of that
// struct's fields is named for. name is the event type's name, for errors.
//
// Only event types decode this way: encoding/json hands a nested value's
// own UnmarshalJSON the bytes again, so decoding costs a pass per level of
// nesting. Here encoding/json decodes once and one fast scan
// (internal/jsonscan) finds the unnamed properties.
func decodeEvent(data []byte, v any, name string) error {
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Struct == "plain" {
			te.Struct = name
		}
		return err
	}
	collect(data, reflect.ValueOf(v).Elem())
	return nil
}

// collect fills the Extra fields within v, decoded from data.
func collect(data []byte, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			collect(data, v.Elem())
		}
	case reflect.Struct:
		f := fieldsOf(v.Type())
		if f.extra < 0 {
			return // Timestamp
		}
		members, ok := jsonscan.Object(data)
		if !ok {
			return // null
		}
		var extra map[string]json.RawMessage
		for _, m := range members {
			key := unquote(m.Key)
			i, known := f.index[key]
			if !known {
				i, known = f.folded[strings.ToLower(key)] // as encoding/json matches
			}
			if known {
				collect(m.Value, v.Field(i))
				continue
			}
			if extra == nil {
				extra = make(map[string]json.RawMessage)
			}
			extra[key] = bytes.Clone(m.Value)
		}
		v.Field(f.extra).Set(reflect.ValueOf(extra))
	case reflect.Slice:
		if !holdsStructs(v.Type().Elem()) {
			return
		}
		elems, ok := jsonscan.Array(data)
		if !ok || len(elems) != v.Len() {
			return
		}
		for i, e := range elems {
			collect(e, v.Index(i))
		}
	case reflect.Map:
		if !holdsStructs(v.Type().Elem()) {
			return
		}
		members, _ := jsonscan.Object(data)
		for _, m := range members {
			key := reflect.ValueOf(unquote(m.Key))
			if old := v.MapIndex(key); old.IsValid() {
				value := reflect.New(old.Type()).Elem()
				value.Set(old)
				collect(m.Value, value)
				v.SetMapIndex(key, value)
			}
		}
	}
}

// holdsStructs reports whether values of t may hold generated structs.
func holdsStructs(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && fieldsOf(t).extra >= 0
}

// unquote decodes a JSON string literal known to be valid, as
// encoding/json does (invalid UTF-8 becomes U+FFFD).
func unquote(lit []byte) string {
	s, _ := jsonscan.String(lit)
	return string(s)
}

// encodeObject encodes v, a struct without methods, and appends the
// properties of extra in key order.
func encodeObject(v any, extra map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	out := b[:len(b)-1] // the struct's closing brace
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		key, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		out = append(append(append(out, key...), ':'), extra[k]...)
	}
	return append(out, '}'), nil
}

// fields is what collect needs of a struct type.
type fields struct {
	index  map[string]int // JSON name -> field index
	folded map[string]int // lower-case JSON name -> field index
	extra  int            // index of Extra, or -1
}

var fieldCache sync.Map // reflect.Type -> *fields

func fieldsOf(t reflect.Type) *fields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*fields)
	}
	f := &fields{index: map[string]int{}, folded: map[string]int{}, extra: -1}
	for i := range t.NumField() {
		field := t.Field(i)
		if field.Name == "Extra" && field.Type == reflect.TypeFor[map[string]json.RawMessage]() {
			f.extra = i
			continue
		}
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		if name == "" || name == "-" || !field.IsExported() {
			continue
		}
		f.index[name] = i
		if _, dup := f.folded[strings.ToLower(name)]; !dup {
			f.folded[strings.ToLower(name)] = i
		}
	}
	fieldCache.Store(t, f)
	return f
}
