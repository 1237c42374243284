package webhooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/hookline/hookline/internal/jsonscan"
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
	action, _ := objectAction(e.Payload)
	return string(action)
}

// checkPayload validates p as a JSON object and returns its action.
func checkPayload(p []byte) (action []byte, err error) {
	if len(p) == 0 {
		return nil, badRequest(ErrMissingPayload)
	}
	action, ok := objectAction(p)
	if ok {
		return action, nil
	}
	if !jsonscan.Valid(p) {
		var v json.RawMessage
		err := json.Unmarshal(p, &v) // only to describe the syntax error
		return nil, badRequest(fmt.Errorf("%w: %w", ErrInvalidPayload, err))
	}
	return nil, badRequest(fmt.Errorf("%w: got %s", ErrInvalidPayload, jsonKind(p)))
}

// jsonKind names the type of the valid JSON value p.
func jsonKind(p []byte) string {
	t := bytes.TrimLeft(p, " \t\r\n")
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
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

// objectAction reports whether p is a valid JSON object, and returns the
// decoded value of its last top-level "action" member (jsonscan's one pass
// checks and splits it); the result may alias p.
func objectAction(p []byte) (action []byte, isObject bool) {
	return jsonscan.StringMember(p, "action")
}
