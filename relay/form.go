package relay

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file parses query strings and form-encoded bodies into the objects
// smee.io puts into a message's "query" and "body" keys. smee.io is an Express
// 4 application: its req.query comes from the qs package with Express's
// options (depth 5, arrayLimit 20) and a form body from
// express.urlencoded({extended: true}), which is qs again with body-parser's
// options (depth 32, arrayLimit max(100, number of parameters)). Both keep at
// most 1000 parameters. The rules below are qs's: "a[b]=c" nests, "a[]=x" and
// repeated keys make arrays, "a[1]=x" indexes arrays up to arrayLimit (sparse
// arrays are compacted), keys beyond the depth are kept as one literal key,
// "__proto__" keys are dropped, and a value that is not valid percent-encoded
// UTF-8 is kept as it is (with '+' as a space).

// qsOptions are the qs parse options that differ between the query string and
// a form body.
type qsOptions struct {
	depth int
	// arrayLimit returns the largest array index for n parameters.
	arrayLimit func(n int) int
}

const qsParameterLimit = 1000

var (
	queryOptions = qsOptions{depth: 5, arrayLimit: func(int) int { return 20 }}
	formOptions  = qsOptions{depth: 32, arrayLimit: func(n int) int { return max(100, n) }}
)

// qsArray is a JavaScript array that may have holes: qs builds sparse arrays
// and compacts them at the end, which the JSON encoding does by skipping the
// holes.
type qsArray struct {
	items map[int]any
	n     int // JavaScript length: one past the largest index
}

func newArray(vals ...any) *qsArray {
	a := &qsArray{items: make(map[int]any, len(vals))}
	for _, v := range vals {
		a.push(v)
	}
	return a
}

func (a *qsArray) push(v any)       { a.items[a.n] = v; a.n++ }
func (a *qsArray) set(i int, v any) { a.items[i] = v; a.n = max(a.n, i+1) }

// indexes returns the indexes that hold a value, ascending.
func (a *qsArray) indexes() []int {
	idx := make([]int, 0, len(a.items))
	for i := range a.items {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	return idx
}

// qsObject is a JavaScript object: its keys are listed in JavaScript's order
// (array-index keys ascending, then the others in insertion order) when it is
// encoded.
type qsObject struct {
	keys []string
	m    map[string]any
}

func newObject() *qsObject { return &qsObject{m: map[string]any{}} }

func (o *qsObject) set(k string, v any) {
	if _, ok := o.m[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.m[k] = v
}

// jsKeys returns the keys in the order of JavaScript's Object.keys.
func (o *qsObject) jsKeys() []string { return jsKeyOrder(o.keys) }

func jsKeyOrder(keys []string) []string {
	out := make([]string, 0, len(keys))
	var idx []string
	for _, k := range keys {
		if _, ok := arrayIndex(k); ok {
			idx = append(idx, k)
		}
	}
	sort.Slice(idx, func(i, j int) bool {
		a, _ := arrayIndex(idx[i])
		b, _ := arrayIndex(idx[j])
		return a < b
	})
	out = append(out, idx...)
	for _, k := range keys {
		if _, ok := arrayIndex(k); !ok {
			out = append(out, k)
		}
	}
	return out
}

// arrayIndex reports whether k is a canonical JavaScript array index.
func arrayIndex(k string) (uint32, bool) {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(k, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, false
	}
	return uint32(n), true
}

// parseQS parses s the way qs.parse does with the given options. The result
// is a *qsObject whose values are string, bool, *qsArray or *qsObject.
func parseQS(s string, opts qsOptions) *qsObject {
	// qs first turns %5B and %5D into brackets, then splits on '&' keeping
	// at most parameterLimit parts.
	s = replaceFoldASCII(replaceFoldASCII(s, "%5B", "["), "%5D", "]")
	parts := strings.SplitN(s, "&", qsParameterLimit+1)
	if len(parts) > qsParameterLimit {
		parts = parts[:qsParameterLimit]
	}
	// Values of repeated keys are combined into arrays first.
	flat := newObject()
	for _, part := range parts {
		pos := strings.Index(part, "]=")
		if pos >= 0 {
			pos++
		} else {
			pos = strings.IndexByte(part, '=')
		}
		var key string
		var val any = ""
		if pos < 0 {
			key = qsDecode(part)
		} else {
			key = qsDecode(part[:pos])
			val = qsDecode(part[pos+1:])
		}
		if old, ok := flat.m[key]; ok {
			val = combine(old, val)
		}
		flat.set(key, val)
	}
	out := newObject()
	limit := opts.arrayLimit(len(parts))
	for _, key := range flat.jsKeys() {
		if key == "" {
			continue
		}
		if v := parseKey(key, flat.m[key], opts.depth, limit); v != nil {
			qsMerge(out, v)
		}
	}
	return out
}

// replaceFoldASCII replaces old (ASCII) in s case-insensitively.
func replaceFoldASCII(s, old, repl string) string {
	if !strings.Contains(strings.ToUpper(s), old) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if i+len(old) <= len(s) && strings.EqualFold(s[i:i+len(old)], old) {
			b.WriteString(repl)
			i += len(old)
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// qsDecode is qs's decoder: '+' is a space, then decodeURIComponent, whose
// failure (a bad escape or invalid UTF-8) leaves the string as it was.
func qsDecode(s string) string {
	plus := strings.ReplaceAll(s, "+", " ")
	if !strings.Contains(plus, "%") {
		return plus
	}
	d, err := url.PathUnescape(plus)
	if err != nil || !utf8.ValidString(d) {
		return plus
	}
	return d
}

// combine is qs's utils.combine: [].concat(a, b). The values it sees are
// strings, or arrays it made itself, which it extends in place.
func combine(a, b any) any {
	if arr, ok := a.(*qsArray); ok {
		arr.push(b)
		return arr
	}
	return newArray(a, b)
}

// parseKey is qs's parseKeys and parseObject: it splits key into its parent
// and bracketed segments and builds the nested value for val.
func parseKey(key string, val any, depth, arrayLimit int) any {
	var chain []string
	first := bracketSegment(key, 0)
	parent := key
	if depth > 0 && first >= 0 {
		parent = key[:first]
	}
	if parent != "" {
		chain = append(chain, parent)
	}
	if depth > 0 && first >= 0 {
		pos, n := first, 0
		for {
			start := bracketSegment(key, pos)
			if start < 0 {
				break
			}
			if n == depth {
				// The rest is kept as one literal key.
				chain = append(chain, "["+key[start:]+"]")
				break
			}
			end := start + strings.IndexByte(key[start:], ']')
			chain = append(chain, key[start:end+1])
			pos = end + 1
			n++
		}
	}
	leaf := val
	for i := len(chain) - 1; i >= 0; i-- {
		root := chain[i]
		if root == "[]" {
			a := newArray()
			if arr, ok := leaf.(*qsArray); ok {
				for _, j := range arr.indexes() {
					a.set(j, arr.items[j])
				}
			} else {
				a.push(leaf)
			}
			leaf = a
			continue
		}
		clean := root
		if len(root) >= 2 && root[0] == '[' && root[len(root)-1] == ']' {
			clean = root[1 : len(root)-1]
		}
		obj := newObject()
		if idx, err := strconv.Atoi(clean); err == nil && root != clean && strconv.Itoa(idx) == clean && idx >= 0 && idx <= arrayLimit {
			a := newArray()
			a.set(idx, leaf)
			leaf = a
			continue
		}
		if clean != "__proto__" {
			obj.set(clean, leaf)
		}
		leaf = obj
	}
	return leaf
}

// bracketSegment returns the index of the first "[...]" group (with no
// bracket inside) at or after pos, or -1.
func bracketSegment(key string, pos int) int {
	for i := pos; i < len(key); i++ {
		if key[i] != '[' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '[' {
				break
			}
			if key[j] == ']' {
				return i
			}
		}
	}
	return -1
}

func isQSContainer(v any) bool {
	switch v.(type) {
	case *qsArray, *qsObject:
		return true
	}
	return false
}

// qsMerge is qs's utils.merge: it merges source into target and returns the
// result (target itself when it could be reused).
func qsMerge(target, source any) any {
	switch src := source.(type) {
	case nil:
		return target
	case string, bool:
		if src == "" {
			return target // qs: if (!source) return target
		}
		switch t := target.(type) {
		case *qsArray:
			t.push(src)
			return t
		case *qsObject:
			k := "true"
			if s, ok := src.(string); ok {
				k = s
			}
			t.set(k, true)
			return t
		}
		return newArray(target, src)
	}
	switch t := target.(type) {
	case *qsArray:
		if sa, ok := source.(*qsArray); ok {
			for _, i := range sa.indexes() {
				item := sa.items[i]
				if ti, has := t.items[i]; has {
					if isQSContainer(ti) && isQSContainer(item) {
						t.items[i] = qsMerge(ti, item)
					} else {
						t.push(item)
					}
				} else {
					t.set(i, item)
				}
			}
			return t
		}
		target = arrayToObject(t)
	case *qsObject:
	default:
		// [target].concat(source)
		out := newArray(target)
		if sa, ok := source.(*qsArray); ok {
			base := out.n
			for _, i := range sa.indexes() {
				out.set(base+i, sa.items[i])
			}
			return out
		}
		out.push(source)
		return out
	}
	obj := target.(*qsObject)
	switch src := source.(type) {
	case *qsArray:
		for _, i := range src.indexes() {
			mergeKey(obj, strconv.Itoa(i), src.items[i])
		}
	case *qsObject:
		for _, k := range src.jsKeys() {
			mergeKey(obj, k, src.m[k])
		}
	}
	return obj
}

func mergeKey(obj *qsObject, k string, v any) {
	if old, ok := obj.m[k]; ok {
		obj.set(k, qsMerge(old, v))
		return
	}
	obj.set(k, v)
}

func arrayToObject(a *qsArray) *qsObject {
	o := newObject()
	for _, i := range a.indexes() {
		o.set(strconv.Itoa(i), a.items[i])
	}
	return o
}

// appendQSJSON appends v as JSON, the way JSON.stringify writes the object
// qs returned (holes of sparse arrays are compacted away).
func appendQSJSON(dst []byte, v any) []byte {
	switch v := v.(type) {
	case string:
		return appendJSONString(dst, v)
	case bool:
		return strconv.AppendBool(dst, v)
	case *qsArray:
		dst = append(dst, '[')
		for n, i := range v.indexes() {
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = appendQSJSON(dst, v.items[i])
		}
		return append(dst, ']')
	case *qsObject:
		dst = append(dst, '{')
		for n, k := range v.jsKeys() {
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendQSJSON(dst, v.m[k])
		}
		return append(dst, '}')
	}
	return append(dst, "null"...)
}
