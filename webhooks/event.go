package webhooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// Event is one webhook delivery: the counterpart of octokit's
// EmitterWebhookEvent {id, name, payload}.
//
// Payload is the JSON body exactly as received; Decode (or Handle, for a
// handler that takes a typed payload) decodes it into a Go value. Handlers
// run concurrently and share one Payload and Header: they must not modify
// them.
type Event struct {
	// ID is the delivery id (the X-GitHub-Delivery header); it may be empty.
	ID string
	// Name is the event name (the X-GitHub-Event header), such as "issues".
	Name string
	// Payload is the delivery body, a JSON object.
	Payload json.RawMessage
	// Header holds the delivery's request headers (see the Header
	// constants, such as HeaderHookID), or nil for an event that did not
	// come from a request (Receive called directly).
	Header http.Header
}

// Decode decodes the payload into v, as json.Unmarshal does.
func (e Event) Decode(v any) error {
	if err := json.Unmarshal(e.Payload, v); err != nil {
		return fmt.Errorf("webhooks: decoding the %s payload: %w", e.Name, err)
	}
	return nil
}

// Action returns the string value of the payload's top-level "action"
// member, or "" when the payload is not a valid JSON object, has no such
// member, or its value is not a string. A member name matches only when it
// is exactly "action" (after JSON unescaping); with duplicates the last one
// wins, as in JSON.parse.
func (e Event) Action() string {
	if !json.Valid(e.Payload) {
		return ""
	}
	action, _ := objectAction(e.Payload)
	return string(action)
}

// checkPayload validates p as a JSON object and returns its action.
func checkPayload(p []byte) (action []byte, err error) {
	if len(p) == 0 {
		return nil, badRequest(ErrMissingPayload)
	}
	if !json.Valid(p) {
		var v json.RawMessage
		err := json.Unmarshal(p, &v) // only to describe the syntax error
		return nil, badRequest(fmt.Errorf("%w: %w", ErrInvalidPayload, err))
	}
	action, ok := objectAction(p)
	if !ok {
		return nil, badRequest(fmt.Errorf("%w: got %s", ErrInvalidPayload, jsonKind(p)))
	}
	return action, nil
}

// jsonKind names the type of the valid JSON value p.
func jsonKind(p []byte) string {
	i := skipSpace(p, 0)
	if i >= len(p) {
		return "nothing"
	}
	switch p[i] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// objectAction reports whether p, which should be valid JSON, is an object,
// and returns the decoded string value of its last top-level "action"
// member (empty if there is none or it is not a string); the result may
// alias p. It never panics, whatever p holds.
func objectAction(p []byte) (action []byte, isObject bool) {
	i := skipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return nil, false
	}
	i = skipSpace(p, i+1)
	if i < len(p) && p[i] == '}' {
		return nil, true
	}
	for i < len(p) {
		// Member name.
		if p[i] != '"' {
			return nil, false
		}
		k := i
		i = skipString(p, i)
		key := p[k:min(i, len(p))]
		i = skipSpace(p, i)
		if i >= len(p) || p[i] != ':' {
			return nil, false
		}
		i = skipSpace(p, i+1)
		v := i
		i = skipValue(p, i)
		if isActionKey(key) {
			action = nil
			if v < len(p) && p[v] == '"' {
				action = decodeString(p[v:min(i, len(p))])
			}
		}
		i = skipSpace(p, i)
		if i >= len(p) {
			return nil, false
		}
		switch p[i] {
		case ',':
			i = skipSpace(p, i+1)
		case '}':
			return action, true
		default:
			return nil, false
		}
	}
	return nil, false
}

func skipSpace(p []byte, i int) int {
	for i < len(p) {
		switch p[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string starting at p[i] == '"'.
func skipString(p []byte, i int) int {
	for i++; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(p)
}

// skipValue returns the index after the value starting at p[i].
func skipValue(p []byte, i int) int {
	if i >= len(p) {
		return i
	}
	switch p[i] {
	case '"':
		return skipString(p, i)
	case '{', '[':
		depth := 0
		for i < len(p) {
			switch p[i] {
			case '"':
				i = skipString(p, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(p)
	}
	for i < len(p) {
		switch p[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// isActionKey reports whether the quoted JSON string key means "action".
func isActionKey(key []byte) bool {
	if string(key) == `"action"` {
		return true
	}
	if len(key) < len(`"action"`) || !hasBackslash(key) {
		return false
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == "action"
}

// decodeString decodes the quoted JSON string q, as encoding/json does
// (invalid UTF-8 becomes U+FFFD); it returns nil if q is malformed. The
// result aliases q when q has no escapes.
func decodeString(q []byte) []byte {
	if len(q) >= 2 && q[len(q)-1] == '"' && !hasBackslash(q[1:len(q)-1]) && utf8.Valid(q) {
		return q[1 : len(q)-1]
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return nil
	}
	return []byte(s)
}

func hasBackslash(b []byte) bool { return bytes.IndexByte(b, '\\') >= 0 }
