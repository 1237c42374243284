// Package jsonscan checks JSON text and splits an object into its members
// without decoding or copying anything. It is the fast path of the relay
// and of the relay client, where every delivery's body (up to 25 MiB, or
// 33 MiB of base64) passes through a JSON check: encoding/json's scanner
// calls a function per byte (about 150 MB/s here); this one skips the
// inside of strings eight bytes at a time (several GB/s).
//
//	if !jsonscan.Valid(body) { ... }
//	members, ok := jsonscan.Object(data) // raw keys and values, aliasing data
//	elems, ok := jsonscan.Array(data)    // raw elements, aliasing data
//	value, ok := jsonscan.String(key)    // a string literal's value
//
// Valid accepts exactly what encoding/json.Valid accepts, nesting limit
// included (FuzzValid checks that against encoding/json).
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit: 10000 arrays and objects.
const maxDepth = 10000

// Valid reports whether b is one JSON value, with optional white space
// around it, as encoding/json.Valid does.
func Valid(b []byte) bool {
	s := scanner{b: b}
	s.ws()
	if !s.value(0) {
		return false
	}
	s.ws()
	return s.i == len(b)
}

// Member is one member of a JSON object: Key is the key as written, a JSON
// string literal with its quotes and any escapes (decode it with
// encoding/json when it holds a backslash), and Value is the value's JSON
// text without the white space around it. Both alias the scanned bytes.
type Member struct {
	Key, Value []byte
}

// Object splits b, which must be a JSON object (white space around it
// allowed), into its members in order, duplicates included. It reports
// false when b is anything else. Each member's value must be valid JSON on
// its own, nested at most as deep as encoding/json allows: the object
// around it does not count, so that a relay message can carry any body
// encoding/json accepts (a body nested 10,000 deep makes a 10,001-deep
// message).
func Object(b []byte) ([]Member, bool) {
	members := make([]Member, 0, 16)
	if !Members(b, func(m Member) { members = append(members, m) }) {
		return nil, false
	}
	return members, true
}

// Members is Object without the slice: it calls fn with each member in
// order, as it reads it, and reports whether b is a JSON object as Object
// does. When it reports false, fn may have been called for the members
// before the fault.
func Members(b []byte, fn func(Member)) bool {
	s := scanner{b: b}
	return s.whole('{', '}', func() bool {
		start := s.i
		if s.i >= len(b) || b[s.i] != '"' || !s.str() {
			return false
		}
		key := b[start:s.i]
		s.ws()
		if s.i >= len(b) || b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		start = s.i
		if !s.value(0) { // the value on its own: see Object's doc comment
			return false
		}
		fn(Member{Key: key, Value: b[start:s.i]})
		return true
	})
}

// Array splits b, which must be a JSON array (white space around it
// allowed), into the JSON text of its elements, in order, aliasing b. It
// reports false when b is anything else. Each element, like an Object
// member's value, must be valid JSON on its own.
func Array(b []byte) ([][]byte, bool) {
	s := scanner{b: b}
	var elems [][]byte
	ok := s.whole('[', ']', func() bool {
		start := s.i
		if !s.value(0) {
			return false
		}
		elems = append(elems, b[start:s.i])
		return true
	})
	if !ok {
		return nil, false
	}
	return elems, true
}

// whole reads all of s.b as one object or array, opened by open and closed
// by close, with white space around it, calling item at each member or
// element (which reads it and reports whether it was valid).
func (s *scanner) whole(open, close byte, item func() bool) bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != open {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
	} else {
		for {
			if !item() {
				return false
			}
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			c := s.b[s.i]
			s.i++
			if c == close {
				break
			}
			if c != ',' {
				return false
			}
			s.ws()
		}
	}
	s.ws()
	return s.i == len(s.b)
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value at s.i; depth is the number of arrays and objects
// around it.
func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.str()
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '-' || ('0' <= c && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *scanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

func (s *scanner) object(depth int) bool {
	if depth > maxDepth {
		return false
	}
	s.i++ // {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
			return false
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		if !s.value(depth) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		c := s.b[s.i]
		s.i++
		if c == '}' {
			return true
		}
		if c != ',' {
			return false
		}
		s.ws()
	}
}

func (s *scanner) array(depth int) bool {
	if depth > maxDepth {
		return false
	}
	s.i++ // [
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		c := s.b[s.i]
		s.i++
		if c == ']' {
			return true
		}
		if c != ',' {
			return false
		}
		s.ws()
	}
}

// SWAR constants: one in every byte, and the high bit of every byte.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special reports whether any byte of v is a control character (< 0x20),
// a quote or a backslash: the bytes that stop the scan of a string. It is
// exact ("any"), as the carries can only spill into bytes above one that
// matches.
func special(v uint64) bool {
	quote := v ^ (ones * '"')
	backslash := v ^ (ones * '\\')
	control := (v - ones*0x20) &^ v
	return (control|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs != 0
}

// str scans a string starting at the quote at s.i. Like encoding/json it
// accepts any byte but control characters, quotes and backslashes inside
// (invalid UTF-8 included), and the escapes \" \\ \/ \b \f \n \r \t \uXXXX.
func (s *scanner) str() bool {
	b := s.b
	i := s.i + 1
	for {
		for i+8 <= len(b) && !special(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return false
				}
				i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			i++
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	b, i := s.b, s.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return false
		}
		i = j
	}
	s.i = i
	return true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// String returns the value of lit, a JSON value as Valid, Object or Array
// accepted it, when it is a string: escapes resolved and invalid UTF-8
// replaced by U+FFFD, as encoding/json decodes it. ok is false for any
// other value. lit is not checked again (it was, with the text around it):
// the value aliases lit when lit holds neither a backslash nor invalid
// UTF-8, found with two fast scans (a relay message's bodyB may be tens of
// megabytes). It is the module's one JSON string decoder.
func String(lit []byte) (value []byte, ok bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return nil, false
	}
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner, true
	}
	var v string
	if json.Unmarshal(lit, &v) != nil {
		return nil, false
	}
	return []byte(v), true
}

// Is reports whether the member's name is name, after JSON unescaping
// (GitHub never escapes its names, but a name is the same either way, as
// JSON.parse and encoding/json see it).
func (m Member) Is(name string) bool {
	if len(m.Key) >= 2 && bytes.IndexByte(m.Key, '\\') < 0 {
		return string(m.Key[1:len(m.Key)-1]) == name
	}
	v, ok := String(m.Key)
	return ok && string(v) == name
}

// StringMember returns the string value of the last member named name of
// the JSON object obj (nil when there is none or its value is not a
// string: with duplicates the last one wins, as in JSON.parse), and
// whether obj is a valid JSON object at all. The value may alias obj.
func StringMember(obj []byte, name string) (value []byte, isObject bool) {
	var last []byte // the last member's value, unquoted once at the end
	found := false
	ok := Members(obj, func(m Member) {
		if m.Is(name) {
			last, found = m.Value, true
		}
	})
	if !ok {
		return nil, false
	}
	if found {
		value, _ = String(last)
	}
	return value, true
}
