// Package webhookstest builds signed GitHub webhook deliveries for an
// App's own tests, as net/http/httptest builds requests: from hookline's
// built-in examples, a payload value, bytes or a recorded delivery (a
// capture file's), with fields overridden, and hands them to an
// http.Handler or a *webhooks.Webhooks.
// No network, no relay, no hand-signed JSON.
//
//	d, _ := webhookstest.Example("issues.opened")
//	d.Set("issue.title", "A title my handler must see")
//	rec := d.Serve(handler, secret) // an httptest.ResponseRecorder
//
// A Delivery is signed when it is sent, with the secret given then, over
// its body as it is at that moment; Set re-encodes the body (compact JSON,
// keys sorted), so give bytes (FromBytes) when a test needs exact ones.
package webhookstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/examples"
	"github.com/hookline/hookline/webhooks"
)

// Delivery is one webhook delivery to send: its event, id, body and any
// more headers.
type Delivery struct {
	Event  string      // X-GitHub-Event: "issues"
	ID     string      // X-GitHub-Delivery; a new random one by default
	Body   []byte      // the JSON payload, sent as it is
	Header http.Header // more headers, set after hookline's (nil: none)
}

// Example returns hookline's built-in example called name ("push",
// "issues.opened"; Names lists them) as a Delivery.
func Example(name string) (*Delivery, error) {
	body, ok := examples.Payload(name)
	if !ok {
		return nil, fmt.Errorf("webhookstest: no example %q (Names lists the %d there are)", name, len(examples.Names()))
	}
	event, _, _ := strings.Cut(name, ".")
	return FromBytes(event, body), nil
}

// Names returns the names of the built-in examples.
func Names() []string { return examples.Names() }

// FromPayload returns a Delivery of event whose body is v encoded as JSON
// (a map, a struct, a webhooks/payload type).
func FromPayload(event string, v any) (*Delivery, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("webhookstest: encoding the payload: %w", err)
	}
	return FromBytes(event, body), nil
}

// FromDelivery returns a Delivery of a recorded one: a capture file's
// (capture.Read(path) gives a capture.File, whose Delivery this takes), or
// any delivery.Delivery. Its event, id and exact body are kept, and its
// headers but the signatures, which Request makes again.
func FromDelivery(rec *delivery.Delivery) *Delivery {
	d := &Delivery{Event: rec.Event, ID: rec.ID, Body: slices.Clone(rec.Body), Header: rec.Headers.Clone()}
	if d.ID == "" {
		d.ID = delivery.NewID()
	}
	for _, k := range []string{"X-Hub-Signature", "X-Hub-Signature-256", "Content-Length"} {
		d.Header.Del(k)
	}
	return d
}

// FromBytes returns a Delivery of event with exactly body.
func FromBytes(event string, body []byte) *Delivery {
	return &Delivery{Event: event, ID: delivery.NewID(), Body: body}
}

// Set sets the field at path, a dotted path through objects and array
// indexes ("pull_request.number", "commits.0.message"), to value (any
// value encoding/json encodes; nil is null). Every step of the path but
// the last must exist. The body is encoded again.
func (d *Delivery) Set(path string, value any) error {
	var root any
	dec := json.NewDecoder(bytes.NewReader(d.Body))
	dec.UseNumber() // numbers stay as they were written
	if err := dec.Decode(&root); err != nil {
		return fmt.Errorf("webhookstest: the body is not JSON: %w", err)
	}
	steps := strings.Split(path, ".")
	cur := root
	for i, step := range steps {
		last := i == len(steps)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[step] = value
				break
			}
			next, ok := c[step]
			if !ok {
				return fmt.Errorf("webhookstest: %s: no field %q", strings.Join(steps[:i+1], "."), step)
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(step)
			if err != nil || n < 0 || n >= len(c) {
				return fmt.Errorf("webhookstest: %s: want an index below %d", strings.Join(steps[:i+1], "."), len(c))
			}
			if last {
				c[n] = value
				break
			}
			cur = c[n]
		default:
			return fmt.Errorf("webhookstest: %s: not an object or an array", strings.Join(steps[:i], "."))
		}
	}
	body, err := json.Marshal(root)
	if err != nil {
		return fmt.Errorf("webhookstest: encoding the body: %w", err)
	}
	d.Body = body
	return nil
}

// Request returns the POST to target that GitHub would make, signed with
// secret (unsigned when secret is empty), for a handler's ServeHTTP.
func (d *Delivery) Request(target, secret string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(d.Body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "GitHub-Hookshot/webhookstest")
	r.Header.Set(webhooks.HeaderEvent, d.Event)
	r.Header.Set(webhooks.HeaderDelivery, d.ID)
	if secret != "" {
		sig, _ := webhooks.Sign(secret, d.Body)
		r.Header.Set(webhooks.HeaderSignature256, sig)
	}
	for k, vs := range d.Header {
		r.Header[http.CanonicalHeaderKey(k)] = vs
	}
	return r
}

// Serve sends the delivery, signed with secret, to h and returns what h
// answered.
func (d *Delivery) Serve(h http.Handler, secret string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, d.Request("/", secret))
	return rec
}

// Receive verifies the delivery (signed with secret) and dispatches it to
// wh's handlers, as wh's middleware would: its error is theirs, or the
// verification's.
func (d *Delivery) Receive(ctx context.Context, wh *webhooks.Webhooks, secret string) error {
	sig, err := webhooks.Sign(secret, d.Body)
	if err != nil {
		return err
	}
	return wh.VerifyAndReceive(ctx, d.ID, d.Event, d.Body, sig)
}
