package payload_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/internal/payloadgen"
	"github.com/hookline/hookline/webhooks/payload"
)

// description is the pinned description the package is generated from.
func description(t *testing.T) string {
	t.Helper()
	return filepath.Join(testenv.NodePackage(t, "@octokit/openapi-webhooks"), "generated", "api.github.com.json")
}

// TestGeneratedUpToDate fails when payload_gen.go is not what `go generate
// ./webhooks/payload/` makes of the pinned description.
func TestGeneratedUpToDate(t *testing.T) {
	path := description(t)
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	source, err := payloadgen.Describe(path)
	if err != nil {
		t.Fatal(err)
	}
	want, events, err := payloadgen.Generate("payload", source, src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("payload_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("payload_gen.go is out of date with %s; run: go generate ./webhooks/payload/", source)
	}
	// The one event table: webhooks' constants and EmitterEventNames come
	// from the same description and generator.
	wantNames, err := payloadgen.GenerateEventNames("webhooks", source, events)
	if err != nil {
		t.Fatal(err)
	}
	if gotNames, err := os.ReadFile("../eventnames_gen.go"); err != nil || !bytes.Equal(gotNames, wantNames) {
		t.Errorf("webhooks/eventnames_gen.go is out of date with %s (%v); run: go generate ./webhooks/payload/", source, err)
	}
}

// TestTypesCoverEventNames checks that every name webhooks dispatches on has
// a payload type, except repository_dispatch.sample, which the project's
// specification names and GitHub's description does not (its action is the
// sender's free-form event_type; "sample.collected" is the description's
// one example).
func TestTypesCoverEventNames(t *testing.T) {
	for _, name := range webhooks.EmitterEventNames() {
		v := payload.New(name)
		if name == "repository_dispatch.sample" {
			if v != nil {
				t.Errorf("New(%q) = %T, want nil", name, v)
			}
			continue
		}
		if v == nil {
			t.Errorf("New(%q) = nil, want a payload type", name)
		}
	}
	for _, name := range []string{"", "issues.", "nope", "issues.opened.x"} {
		if v := payload.New(name); v != nil {
			t.Errorf("New(%q) = %T, want nil", name, v)
		}
	}
	if _, ok := payload.New(webhooks.EventIssuesOpened).(*payload.IssuesOpenedEvent); !ok {
		t.Errorf("New(EventIssuesOpened) is %T, want *IssuesOpenedEvent", payload.New(webhooks.EventIssuesOpened))
	}
	if _, ok := payload.New(webhooks.EventIssues).(*payload.IssuesEvent); !ok {
		t.Errorf("New(EventIssues) is %T, want *IssuesEvent", payload.New(webhooks.EventIssues))
	}
}

// example is one delivery of @octokit/webhooks-examples.
type example struct {
	dir, name string // "api.github.com", "issues.opened"
	i         int
	body      []byte
}

func (e example) String() string { return fmt.Sprintf("%s %s #%d", e.dir, e.name, e.i) }

func examples(t *testing.T) []example {
	t.Helper()
	root := testenv.NodePackage(t, "@octokit/webhooks-examples")
	paths, err := filepath.Glob(filepath.Join(root, "*", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []example
	for _, path := range paths {
		var events []struct {
			Name     string            `json:"name"`
			Examples []json.RawMessage `json:"examples"`
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &events); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, ev := range events {
			for i, body := range ev.Examples {
				var head struct{ Action string }
				if err := json.Unmarshal(body, &head); err != nil {
					t.Fatalf("%s %s #%d: %v", path, ev.Name, i, err)
				}
				name := ev.Name
				if head.Action != "" {
					name += "." + head.Action
				}
				out = append(out, example{filepath.Base(filepath.Dir(path)), name, i, body})
			}
		}
	}
	if len(out) < 700 {
		t.Fatalf("only %d examples in %s, want the 726 of @octokit/webhooks-examples 7.6.1", len(out), root)
	}
	return out
}

// TestExamplesRoundTrip decodes every example delivery into its
// event.action type and its event type, encodes it again and compares the
// two JSON documents. Only two differences are allowed, both counted and
// logged: a property the example lacks comes back with a zero value
// (GitHub's description requires it; the example predates it), and a null
// the example has is left out (an optional pointer cannot tell absent from
// null). A type mismatch fails the decode; a lost or changed value fails
// the comparison.
func TestExamplesRoundTrip(t *testing.T) {
	type counts struct{ examples, addedZero, droppedNull, extra int }
	drift := map[string]*counts{}
	// 322 of the 726 examples are the same bytes under the same name in
	// another of the package's directories (GHES versions): each is
	// checked once, and its counts reused.
	type seen struct{ name, body string }
	done := map[seen]counts{}
	all, typed := 0, 0
	for _, ex := range examples(t) {
		all++
		if payload.New(ex.name) != nil || payload.New(strings.SplitN(ex.name, ".", 2)[0]) != nil {
			typed++
		}
		for _, name := range []string{ex.name, strings.SplitN(ex.name, ".", 2)[0]} {
			d := drift[ex.dir]
			if d == nil {
				d = new(counts)
				drift[ex.dir] = d
			}
			key := seen{name, string(ex.body)}
			if c, ok := done[key]; ok {
				d.examples += c.examples
				d.addedZero += c.addedZero
				d.droppedNull += c.droppedNull
				d.extra += c.extra
				continue
			}
			done[key] = counts{}
			v := payload.New(name)
			if v == nil {
				// repository_dispatch's action is the sender's event_type:
				// RepositoryDispatchEvent (the next name) takes any. GitHub
				// Enterprise Server's own events (user, enterprise,
				// cache_sync, content_reference) are not in the
				// api.github.com description.
				if ex.dir == "api.github.com" && !strings.HasPrefix(name, "repository_dispatch.") {
					t.Errorf("%v: no payload type for %q", ex, name)
				}
				continue
			}
			if err := json.Unmarshal(ex.body, v); err != nil {
				t.Errorf("%v: decode into %T: %v", ex, v, err)
				continue
			}
			out, err := json.Marshal(v)
			if err != nil {
				t.Errorf("%v: encode %T: %v", ex, v, err)
				continue
			}
			var want, got any
			mustDecode(t, ex.body, &want)
			mustDecode(t, out, &got)
			var c comparison
			c.compare("", want, got)
			for _, d := range c.diffs {
				t.Errorf("%v as %T: %s", ex, v, d)
			}
			now := counts{examples: 1, addedZero: c.addedZero, droppedNull: c.droppedNull, extra: extraCount(v)}
			done[key] = now
			d.examples += now.examples
			d.addedZero += now.addedZero
			d.droppedNull += now.droppedNull
			d.extra += now.extra
		}
	}
	t.Logf("%d examples, %d with a payload type (the others are GitHub Enterprise Server's own events)", all, typed)
	for _, dir := range slices.Sorted(maps.Keys(drift)) {
		d := drift[dir]
		t.Logf("%s: %d decodes; drift from the description: %d required properties absent, %d nulls dropped, %d unnamed properties kept in Extra",
			dir, d.examples, d.addedZero, d.droppedNull, d.extra)
	}
}

func mustDecode(t *testing.T, b []byte, v *any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		t.Fatal(err)
	}
}

// comparison compares two decoded JSON documents.
type comparison struct {
	diffs                  []string
	addedZero, droppedNull int
}

func (c *comparison) compare(path string, want, got any) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			c.diffs = append(c.diffs, fmt.Sprintf("%s: got %s, want an object", path, short(got)))
			return
		}
		for k, wv := range w {
			gv, ok := g[k]
			switch {
			case !ok && wv == nil:
				c.droppedNull++
			case !ok:
				c.diffs = append(c.diffs, fmt.Sprintf("%s.%s: missing, want %s", path, k, short(wv)))
			default:
				c.compare(path+"."+k, wv, gv)
			}
		}
		for k, gv := range g {
			if _, ok := w[k]; ok {
				continue
			}
			if !zero(gv) {
				c.diffs = append(c.diffs, fmt.Sprintf("%s.%s: got %s, not in the example", path, k, short(gv)))
				continue
			}
			c.addedZero++
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			c.diffs = append(c.diffs, fmt.Sprintf("%s: got %s, want %s", path, short(got), short(want)))
			return
		}
		for i := range w {
			c.compare(path+"["+strconv.Itoa(i)+"]", w[i], g[i])
		}
	case json.Number:
		g, ok := got.(json.Number)
		wf, _ := w.Float64()
		gf, _ := g.Float64()
		if !ok || wf != gf {
			c.diffs = append(c.diffs, fmt.Sprintf("%s: got %s, want %s", path, short(got), w))
		}
	default:
		if want != got {
			c.diffs = append(c.diffs, fmt.Sprintf("%s: got %s, want %s", path, short(got), short(want)))
		}
	}
}

// zero reports whether v is what a Go zero value encodes as.
func zero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == ""
	case json.Number:
		f, err := v.Float64()
		return err == nil && f == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		for _, x := range v {
			if !zero(x) {
				return false
			}
		}
		return true
	}
	return false
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// extraCount counts the properties kept in Extra fields anywhere in v.
func extraCount(v any) int {
	return extraIn(reflect.ValueOf(v))
}

func extraIn(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return extraIn(v.Elem())
	case reflect.Slice, reflect.Array:
		n := 0
		for i := range v.Len() {
			n += extraIn(v.Index(i))
		}
		return n
	case reflect.Map:
		if v.Type().Elem() == reflect.TypeFor[json.RawMessage]() {
			return 0
		}
		n := 0
		for it := v.MapRange(); it.Next(); {
			n += extraIn(it.Value())
		}
		return n
	case reflect.Struct:
		n := 0
		for i := range v.NumField() {
			if v.Type().Field(i).Name == "Extra" {
				n += v.Field(i).Len()
				continue
			}
			n += extraIn(v.Field(i))
		}
		return n
	}
	return 0
}
