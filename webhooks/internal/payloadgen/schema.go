// Package payloadgen turns GitHub's webhooks description (the OpenAPI 3.1
// document of the npm package @octokit/openapi-webhooks) into the Go source
// of package webhooks/payload: one struct per event and per event.action.
//
// It is used by cmd/genpayload (run through `go generate ./webhooks/payload/`)
// and by the payload tests, which regenerate the file in memory and fail when
// the checked-in copy is stale.
//
// The schema walk is ours and small, with encoding/json reading the
// document: the generator needs $ref, properties, required, items,
// additionalProperties, allOf, oneOf/anyOf and type lists, and a maintained
// JSON Schema library (santhosh-tekuri/jsonschema, kin-openapi) would bring
// validation machinery and a dependency for none of that. How a schema
// becomes a Go type is written on [Generate].
package payloadgen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// document is the part of the OpenAPI description the generator reads.
type document struct {
	Webhooks map[string]struct {
		Post struct {
			OperationID string `json:"operationId"`
			Description string `json:"description"`
			RequestBody struct {
				Content map[string]struct {
					Schema *schema `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"post"`
	} `json:"webhooks"`
	Components struct {
		Schemas map[string]*schema `json:"schemas"`
	} `json:"components"`
}

// schema is one JSON Schema object of the description.
type schema struct {
	Ref                  string             `json:"$ref"`
	Type                 typeList           `json:"type"`
	Nullable             bool               `json:"nullable"`
	Format               string             `json:"format"`
	Title                string             `json:"title"`
	Description          string             `json:"description"`
	Enum                 []any              `json:"enum"`
	Properties           map[string]*schema `json:"properties"`
	Required             []string           `json:"required"`
	Items                *schema            `json:"items"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	AllOf                []*schema          `json:"allOf"`
	OneOf                []*schema          `json:"oneOf"`
	AnyOf                []*schema          `json:"anyOf"`
}

// typeList is "type": a name or a list of names.
type typeList []string

func (t *typeList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*t = typeList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("type: %w", err)
	}
	*t = many
	return nil
}

// kind is the shape of a normalized schema.
type kind int

const (
	kAny    kind = iota // several shapes: json.RawMessage
	kNull               // only null
	kObject             // properties and/or additionalProperties
	kArray
	kString
	kTime // date-time string, or Unix seconds (push events' repository)
	kInt
	kNumber
	kBool
)

// node is a schema with $ref, allOf, oneOf, anyOf and type lists resolved
// into one shape. Nodes are shared (a component is normalized once) and
// never modified after they are built.
type node struct {
	kind     kind
	nullable bool
	name     string // the component's name, when the node is one component
	title    string
	desc     string
	enum     []string
	props    map[string]*node
	required map[string]bool
	extra    *node // additionalProperties: nil if none
	items    *node
}

// normalizer resolves schemas against the document's components.
type normalizer struct {
	schemas map[string]*schema
	done    map[string]*node
	busy    map[string]bool
}

func (z *normalizer) norm(s *schema) (*node, error) {
	if s == nil {
		return &node{kind: kAny}, nil
	}
	if s.Ref != "" {
		return z.ref(s.Ref)
	}
	var parts []*node
	if base, err := z.base(s); err != nil {
		return nil, err
	} else if base != nil {
		parts = append(parts, base)
	}
	n, err := z.combine(parts, s.AllOf, true)
	if err != nil {
		return nil, err
	}
	for _, union := range [][]*schema{s.OneOf, s.AnyOf} {
		if len(union) == 0 {
			continue
		}
		u, err := z.combine(nil, union, false)
		if err != nil {
			return nil, err
		}
		n = mergeInto(n, u, true)
	}
	if n == nil {
		n = &node{kind: kAny}
	}
	if s.Nullable && !n.nullable {
		c := *n
		c.nullable = true
		n = &c
	}
	if n.title == "" && n.desc == "" && (s.Title != "" || s.Description != "") {
		c := *n
		c.title, c.desc = s.Title, s.Description
		n = &c
	}
	return n, nil
}

// combine merges the normalized schemas of list into parts: as allOf does
// (all) or as oneOf/anyOf do.
func (z *normalizer) combine(parts []*node, list []*schema, all bool) (*node, error) {
	for _, sub := range list {
		n, err := z.norm(sub)
		if err != nil {
			return nil, err
		}
		parts = append(parts, n)
	}
	if len(parts) == 0 {
		return nil, nil
	}
	n := parts[0]
	for _, p := range parts[1:] {
		n = merge(n, p, all)
	}
	return n, nil
}

func (z *normalizer) ref(ref string) (*node, error) {
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	if !ok {
		return nil, fmt.Errorf("unsupported $ref %q", ref)
	}
	if n, ok := z.done[name]; ok {
		return n, nil
	}
	s, ok := z.schemas[name]
	if !ok {
		return nil, fmt.Errorf("$ref %q: no such schema", ref)
	}
	if z.busy[name] {
		return nil, fmt.Errorf("$ref %q refers to itself", ref)
	}
	z.busy[name] = true
	n, err := z.norm(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	delete(z.busy, name)
	c := *n
	c.name = name
	z.done[name] = &c
	return &c, nil
}

// base is the node the schema's own type keywords describe, or nil when it
// has none (a bare allOf or oneOf).
func (z *normalizer) base(s *schema) (*node, error) {
	types := s.Type
	if len(types) == 0 {
		switch {
		case s.Properties != nil || len(s.AdditionalProperties) > 0:
			types = typeList{"object"}
		case s.Items != nil:
			types = typeList{"array"}
		default:
			return nil, nil
		}
	}
	var n *node
	for _, t := range types {
		one, err := z.single(s, t)
		if err != nil {
			return nil, err
		}
		n = mergeInto(n, one, false)
	}
	return n, nil
}

// single is the node of schema s read as type t alone.
func (z *normalizer) single(s *schema, t string) (*node, error) {
	n := &node{title: s.Title, desc: s.Description}
	switch t {
	case "null":
		n.kind = kNull
	case "boolean":
		n.kind = kBool
	case "integer":
		n.kind = kInt
	case "number":
		n.kind = kNumber
	case "string":
		n.kind = kString
		if s.Format == "date-time" {
			n.kind = kTime
		}
		for _, e := range s.Enum {
			if v, ok := e.(string); ok {
				n.enum = append(n.enum, v)
			}
		}
	case "array":
		n.kind = kArray
		items, err := z.norm(s.Items)
		if err != nil {
			return nil, err
		}
		n.items = items
	case "object":
		n.kind = kObject
		n.props = make(map[string]*node, len(s.Properties))
		n.required = make(map[string]bool, len(s.Required))
		for name, p := range s.Properties {
			pn, err := z.norm(p)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			n.props[name] = pn
		}
		for _, r := range s.Required {
			n.required[r] = true
		}
		switch ap := strings.TrimSpace(string(s.AdditionalProperties)); ap {
		case "", "false":
		case "true", "{}":
			n.extra = &node{kind: kAny}
		default:
			var sub schema
			if err := json.Unmarshal(s.AdditionalProperties, &sub); err != nil {
				return nil, fmt.Errorf("additionalProperties: %w", err)
			}
			extra, err := z.norm(&sub)
			if err != nil {
				return nil, err
			}
			n.extra = extra
		}
	default:
		return nil, fmt.Errorf("unknown type %q", t)
	}
	return n, nil
}

// merge is the node that describes both a and b: with all, a value that is
// both (allOf: every required property); otherwise a value that is either
// (oneOf, anyOf, or one event's actions: properties of both, required where
// both require them). Shapes that cannot share a Go type become kAny.
func merge(a, b *node, all bool) *node {
	if a == b {
		return a
	}
	switch {
	case a.kind == kNull:
		c := *b
		c.nullable = true
		return &c
	case b.kind == kNull:
		c := *a
		c.nullable = true
		return &c
	}
	c := *a
	c.nullable = a.nullable || b.nullable
	if a.name != b.name {
		c.name = ""
	}
	if c.title == "" {
		c.title = b.title
	}
	if c.desc == "" {
		c.desc = b.desc
	}
	k := mergeKind(a.kind, b.kind)
	if k != a.kind || k != b.kind {
		return &node{kind: k, nullable: c.nullable, title: c.title, desc: c.desc}
	}
	switch k {
	case kObject:
		c.props = make(map[string]*node, len(a.props)+len(b.props))
		c.required = make(map[string]bool)
		for name, p := range a.props {
			c.props[name] = p
		}
		for name, p := range b.props {
			if q, ok := c.props[name]; ok {
				c.props[name] = merge(q, p, all)
			} else {
				c.props[name] = p
			}
		}
		for name := range c.props {
			if all && (a.required[name] || b.required[name]) || !all && a.required[name] && b.required[name] {
				c.required[name] = true
			}
		}
		switch {
		case a.extra == nil:
			c.extra = b.extra
		case b.extra != nil:
			c.extra = merge(a.extra, b.extra, all)
		}
	case kArray:
		c.items = merge(a.items, b.items, all)
	case kString, kTime:
		c.enum = union(a.enum, b.enum)
	}
	return &c
}

// mergeInto is merge(a, b, all), or b when a is nil (nothing yet).
func mergeInto(a, b *node, all bool) *node {
	if a == nil {
		return b
	}
	return merge(a, b, all)
}

func mergeKind(a, b kind) kind {
	switch {
	case a == b:
		return a
	case a == kInt && b == kNumber, a == kNumber && b == kInt:
		return kNumber
	case a == kInt && b == kTime, a == kTime && b == kInt:
		return kTime
	}
	return kAny
}

func union(a, b []string) []string {
	if len(a) == 0 || len(b) == 0 {
		return nil // one side is any string
	}
	out := append([]string(nil), a...)
	for _, v := range b {
		found := false
		for _, w := range out {
			found = found || v == w
		}
		if !found {
			out = append(out, v)
		}
	}
	return out
}

// Describe names the description at path for the generated file's header:
// the npm package and version that hold it (from the package.json two
// directories up, as in node_modules/@octokit/openapi-webhooks/generated/)
// and the file's name.
func Describe(path string) (string, error) {
	dir := filepath.Dir(filepath.Dir(path))
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return "", err
	}
	var pkg struct{ Name, Version string }
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return "", fmt.Errorf("%s: %w", dir, err)
	}
	if pkg.Name == "" || pkg.Version == "" {
		return "", fmt.Errorf("%s/package.json: no name or version", dir)
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return "", err
	}
	return pkg.Name + "@" + pkg.Version + " " + filepath.ToSlash(rel), nil
}
