package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookline/hookline/internal/jsonscan"
)

// validCases are RFC 8259 examples and the edges of the grammar, with
// encoding/json's verdict written out (the fuzz target compares with it on
// everything else).
var validCases = []struct {
	in   string
	want bool
}{
	{`{}`, true},
	{` {"a":1} `, true},
	{"\t\r\n[1, 2.5, -0, 1e9, 1E+9, 1e-9, -12.0e3]\n", true},
	{`"plain"`, true},
	{`"esc \" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00"`, true},
	{`"caf` + "\xc3\xa9" + `"`, true},
	{`"invalid utf-8 ` + "\xff\xfe" + `"`, true}, // encoding/json accepts it too
	{`true`, true},
	{`false`, true},
	{`null`, true},
	{`{"a":{"b":[{"c":null}]}}`, true},
	{`0`, true},
	{`-1`, true},

	{``, false},
	{` `, false},
	{`{`, false},
	{`{"a"}`, false},
	{`{"a":}`, false},
	{`{"a":1,}`, false},
	{`[1,]`, false},
	{`[1 2]`, false},
	{`{a:1}`, false},
	{`{'a':1}`, false},
	{`"unterminated`, false},
	{`"tab	inside"`, false},
	{"\"newline\ninside\"", false},
	{`"\x"`, false},
	{`"\u12"`, false},
	{`"\u12G4"`, false},
	{`01`, false},
	{`1.`, false},
	{`.5`, false},
	{`1e`, false},
	{`1e+`, false},
	{`+1`, false},
	{`-`, false},
	{`tru`, false},
	{`nul`, false},
	{`truex`, false},
	{`{} {}`, false},
	{`NaN`, false},
	{"\x00", false},
	{`"a" "b"`, false},
}

func TestValid(t *testing.T) {
	for _, tc := range validCases {
		if got := jsonscan.Valid([]byte(tc.in)); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if std := json.Valid([]byte(tc.in)); std != tc.want {
			t.Errorf("the test is wrong: encoding/json.Valid(%q) = %v", tc.in, std)
		}
	}
}

// TestValidStringBlocks puts every special byte at every offset of a long
// string, so that the eight-byte skip and the byte loop both meet it.
func TestValidStringBlocks(t *testing.T) {
	for _, special := range []string{`\"`, `\\`, "\x01", "\x1f", `\u0041`, "\xff", "\x7f", " "} {
		for off := 0; off < 20; off++ {
			s := `"` + strings.Repeat("a", off) + special + strings.Repeat("b", 17) + `"`
			if got, want := jsonscan.Valid([]byte(s)), json.Valid([]byte(s)); got != want {
				t.Errorf("Valid(%q) = %v, want %v", s, got, want)
			}
		}
	}
}

func TestDepthLimit(t *testing.T) {
	for _, n := range []int{9999, 10000, 10001} {
		for _, open := range []string{"[", `{"a":`} {
			close := "]"
			if open != "[" {
				close = "}"
			}
			s := []byte(strings.Repeat(open, n) + "1" + strings.Repeat(close, n))
			if got, want := jsonscan.Valid(s), json.Valid(s); got != want {
				t.Errorf("Valid(%d × %q) = %v, want %v", n, open, got, want)
			}
		}
	}
}

// A member value is checked on its own: one nested as deep as
// encoding/json allows is a member, one nested deeper is not. Before, the
// object around it counted, so a relay message carrying a body nested
// exactly 10,000 deep was refused while 9,999 and 10,001 arrived.
func TestObjectMemberDepth(t *testing.T) {
	for _, n := range []int{9999, 10000, 10001} {
		body := strings.Repeat("[", n) + "1" + strings.Repeat("]", n)
		_, ok := jsonscan.Object([]byte(`{"body":` + body + `}`))
		if want := json.Valid([]byte(body)); ok != want {
			t.Errorf("Object({\"body\": %d deep}) ok = %v, want %v (encoding/json on the body alone)", n, ok, want)
		}
	}
}

func TestObject(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string // key, value, key, value...
		ok   bool
	}{
		{"empty", ` { } `, nil, true},
		{"members", `{"a":1, "b" : "x\"y" ,"c":{"d":[1,{"e":null}]},"a":true}`, []string{`"a"`, `1`, `"b"`, `"x\"y"`, `"c"`, `{"d":[1,{"e":null}]}`, `"a"`, `true`}, true},
		{"escaped key", `{"x-\u0061":"v"}`, []string{`"x-\u0061"`, `"v"`}, true},
		{"array", `[1]`, nil, false},
		{"string", `"a"`, nil, false},
		{"null", `null`, nil, false},
		{"trailing", `{"a":1} x`, nil, false},
		{"bad value", `{"a":01}`, nil, false},
		{"bad nested", `{"a":{"b":}}`, nil, false},
		{"unclosed", `{"a":1`, nil, false},
		{"trailing comma", `{"a":1,}`, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members, ok := jsonscan.Object([]byte(tc.in))
			if ok != tc.ok {
				t.Fatalf("Object(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			}
			var got []string
			for _, m := range members {
				got = append(got, string(m.Key), string(m.Value))
			}
			if strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") {
				t.Errorf("Object(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestArray(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
		ok   bool
	}{
		{"empty", ` [ ] `, nil, true},
		{"elements", `[1, "a\"]" ,{"b":[2]},[], null]`, []string{`1`, `"a\"]"`, `{"b":[2]}`, `[]`, `null`}, true},
		{"object", `{"a":1}`, nil, false},
		{"trailing", `[1] x`, nil, false},
		{"trailing comma", `[1,]`, nil, false},
		{"unclosed", `[1`, nil, false},
		{"bad element", `[01]`, nil, false},
		{"missing comma", `[1 2]`, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			elems, ok := jsonscan.Array([]byte(tc.in))
			if ok != tc.ok {
				t.Fatalf("Array(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			}
			var got []string
			for _, e := range elems {
				got = append(got, string(e))
			}
			if strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") {
				t.Errorf("Array(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzValid checks Valid, Object and Array against encoding/json on any input.
//
//	go test -run '^$' -fuzz FuzzValid ./internal/jsonscan/
func FuzzValid(f *testing.F) {
	for _, tc := range validCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte(`{"x-github-event":"push","body":{"a":[1,2,{"b":"c"}]},"query":{},"timestamp":1700000000000,"bodyB":"eyJhIjoxfQ=="}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		want := json.Valid(data)
		if got := jsonscan.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", data, got, want)
		}
		trimmed := bytes.TrimLeft(data, " \t\r\n")
		elems, ok := jsonscan.Array(data)
		if wantArray := want && len(trimmed) > 0 && trimmed[0] == '['; ok != wantArray {
			t.Fatalf("Array(%q) ok = %v, want %v", data, ok, wantArray)
		}
		if ok {
			var std []json.RawMessage
			if err := json.Unmarshal(data, &std); err != nil {
				t.Fatalf("encoding/json cannot read %q: %v", data, err)
			}
			if len(std) != len(elems) {
				t.Fatalf("Array(%q) has %d elements, encoding/json %d", data, len(elems), len(std))
			}
			for i := range std {
				if !bytes.Equal(elems[i], std[i]) {
					t.Fatalf("Array(%q)[%d] = %q, encoding/json says %q", data, i, elems[i], std[i])
				}
			}
		}
		members, ok := jsonscan.Object(data)
		wantObject := want && len(trimmed) > 0 && trimmed[0] == '{'
		if ok != wantObject {
			t.Fatalf("Object(%q) ok = %v, want %v", data, ok, wantObject)
		}
		if !ok {
			return
		}
		var std map[string]json.RawMessage
		if err := json.Unmarshal(data, &std); err != nil {
			t.Fatalf("encoding/json cannot read %q: %v", data, err)
		}
		got := map[string]json.RawMessage{}
		for _, m := range members {
			var k string
			if err := json.Unmarshal(m.Key, &k); err != nil {
				t.Fatalf("Object(%q): key %q: %v", data, m.Key, err)
			}
			got[k] = m.Value
		}
		if len(got) != len(std) {
			t.Fatalf("Object(%q) has %d distinct keys, encoding/json %d", data, len(got), len(std))
		}
		for k, v := range std {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("Object(%q)[%q] = %q, encoding/json says %q", data, k, got[k], v)
			}
		}
	})
}

func BenchmarkValid(b *testing.B) {
	// A GitHub-like payload: mostly strings.
	body := []byte(`{"action":"opened","issue":{"title":"` + strings.Repeat("a benchmark ", 80000) + `","labels":[{"name":"bug","id":1}]},"sender":{"login":"octocat"}}`)
	b.Run("jsonscan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if !jsonscan.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
}

// String decodes as encoding/json does, and aliases its input when it can.
func TestString(t *testing.T) {
	for _, lit := range []string{`"plain"`, `"a\"b"`, `"\u00e9\/"`, "\"\xff\"", `""`, `"tab\t"`} {
		got, ok := jsonscan.String([]byte(lit))
		var want string
		if err := json.Unmarshal([]byte(lit), &want); !ok || err != nil || string(got) != want {
			t.Errorf("String(%q) = %q, %v; want %q (encoding/json: %v)", lit, got, ok, want, err)
		}
	}
	// Not strings, or an escape encoding/json refuses (the one thing String
	// checks itself; the rest of a literal was checked with its text).
	for _, bad := range []string{``, `"`, `"a`, `a"`, `1`, `null`, `{"a":"b"}`, `"\x"`} {
		if got, ok := jsonscan.String([]byte(bad)); ok {
			t.Errorf("String(%q) = %q, want not ok", bad, got)
		}
	}
	lit := []byte(`"no escapes"`)
	if got, _ := jsonscan.String(lit); &got[0] != &lit[1] {
		t.Error("String copied a literal without escapes")
	}
}

// StringMember matches names after unescaping, takes the last duplicate,
// and says whether the text was an object at all.
func TestStringMember(t *testing.T) {
	for _, tt := range []struct {
		obj, want string
		isObject  bool
	}{
		{`{"action":"opened"}`, "opened", true},
		{`{"\u0061ction":"opened"}`, "opened", true},
		{`{"action":"a","action":"b"}`, "b", true},
		{`{"action":1}`, "", true},
		{`{"zen":"x"}`, "", true},
		{`["action","x"]`, "", false},
		{`{"action":"x"`, "", false},
	} {
		v, isObject := jsonscan.StringMember([]byte(tt.obj), "action")
		if string(v) != tt.want || isObject != tt.isObject {
			t.Errorf("StringMember(%s) = %q, %v; want %q, %v", tt.obj, v, isObject, tt.want, tt.isObject)
		}
	}
}
