// Package webhookstest builds signed GitHub webhook deliveries for an
// App's own tests, as net/http/httptest builds requests: from hookline's
// built-in examples, a payload value or bytes, with members overridden,
// and hands them to an http.Handler or a *webhooks.Webhooks. A delivery is
// a *delivery.Delivery, the one type hookline's capture files, relays and
// pipeline use: a recorded one (capture.Read) goes through the same calls.
// No network, no relay, no hand-signed JSON. `hookline send` builds its
// deliveries with it.
//
//	d, _ := webhookstest.Example("issues.opened")
//	webhookstest.Set(d, "issue.title", "A title my handler must see")
//	rec := webhookstest.Serve(d, handler, secret) // an httptest.ResponseRecorder
//
// A delivery is signed when it is sent, with the secret given then, over
// its body as it is at that moment. Set and Apply change only the bytes of
// the member they name, checked against the payload's type from GitHub's
// description: every other byte stays as it was.
package webhookstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/examples"
	"github.com/hookline/hookline/webhooks"
)

// Example returns a delivery of name ("push", "issues.opened") with a new
// id: hookline's built-in example of that name (Names lists them), or,
// for any other event.action GitHub sends ("issues.closed"), one made as
// `hookline send` makes it: the event's nearest example with "action" set
// and every member GitHub's description requires for name present (an
// absent one as its zero value).
func Example(name string) (*delivery.Delivery, error) {
	body, _, ok := examples.Build(name)
	if !ok {
		return nil, fmt.Errorf("webhookstest: no example %q and no payload type to make one from (Names lists the %d examples)", name, len(examples.Names()))
	}
	event, _, _ := strings.Cut(name, ".")
	return FromBytes(event, body), nil
}

// Names returns the names of the built-in examples.
func Names() []string { return examples.Names() }

// FromPayload returns a delivery of event whose body is v encoded as JSON
// (a map, a struct, a webhooks/payload type).
func FromPayload(event string, v any) (*delivery.Delivery, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("webhookstest: encoding the payload: %w", err)
	}
	return FromBytes(event, body), nil
}

// FromBytes returns a delivery of event with exactly body and a new id.
func FromBytes(event string, body []byte) *delivery.Delivery {
	id := delivery.NewID()
	return &delivery.Delivery{ID: id, Event: event, Method: http.MethodPost, Body: body,
		Headers: http.Header{"Content-Type": {"application/json"}, "X-Github-Event": {event}, "X-Github-Delivery": {id}}}
}

// Request returns the POST to target that GitHub would make for d, signed
// with secret (unsigned when secret is empty; d's own signatures are never
// sent), for a handler's ServeHTTP: d's headers, with its event and id.
func Request(d *delivery.Delivery, target, secret string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(d.Body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "GitHub-Hookshot/webhookstest")
	for k, vs := range d.Headers {
		r.Header[http.CanonicalHeaderKey(k)] = vs
	}
	for _, k := range []string{"X-Hub-Signature", webhooks.HeaderSignature256, "Content-Length"} {
		r.Header.Del(k)
	}
	r.Header.Set(webhooks.HeaderEvent, d.Event)
	r.Header.Set(webhooks.HeaderDelivery, d.ID)
	if secret != "" {
		sig, _ := webhooks.Sign(secret, d.Body)
		r.Header.Set(webhooks.HeaderSignature256, sig)
	}
	return r
}

// Serve sends d, signed with secret, to h and returns what h answered.
func Serve(d *delivery.Delivery, h http.Handler, secret string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, Request(d, "/", secret))
	return rec
}

// Receive verifies d (signed with secret) and dispatches it to wh's
// handlers, as wh's middleware would: its error is theirs, or the
// verification's.
func Receive(ctx context.Context, d *delivery.Delivery, wh *webhooks.Webhooks, secret string) error {
	sig, err := webhooks.Sign(secret, d.Body)
	if err != nil {
		return err
	}
	return wh.VerifyAndReceive(ctx, d.ID, d.Event, d.Body, sig)
}
