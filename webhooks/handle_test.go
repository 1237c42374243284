package webhooks_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/payload"
)

type issuesEvent struct {
	Action string `json:"action"`
	Issue  struct {
		Number int `json:"number"`
	} `json:"issue"`
}

// Handle decodes the payload for the handler; a payload that does not fit
// the type is the handler's error (the delivery fails with it), and the
// request's headers are on the event.
func TestHandleTyped(t *testing.T) {
	wh, err := webhooks.New(webhooks.Options{Secret: "s", StrictEventNames: true})
	if err != nil {
		t.Fatal(err)
	}
	var got issuesEvent
	var hookID string
	if _, err := webhooks.Handle(wh, webhooks.EventIssuesOpened, func(_ context.Context, e webhooks.Event, p *issuesEvent) error {
		got, hookID = *p, e.Header.Get(webhooks.HeaderHookID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	post := func(body string) *httptest.ResponseRecorder {
		sig, _ := wh.Sign([]byte(body))
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		for k, v := range map[string]string{"Content-Type": "application/json", webhooks.HeaderEvent: "issues", webhooks.HeaderDelivery: "d1", webhooks.HeaderSignature256: sig, webhooks.HeaderHookID: "42"} {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		webhooks.NewMiddleware(wh, webhooks.MiddlewareOptions{}).ServeHTTP(rec, req)
		return rec
	}
	if rec := post(`{"action":"opened","issue":{"number":7}}`); rec.Code != http.StatusOK || got.Issue.Number != 7 || hookID != "42" {
		t.Errorf("answer %d, handler got %+v and hook id %q; want 200, issue 7, 42", rec.Code, got, hookID)
	}
	if rec := post(`{"action":"opened","issue":{"number":"seven"}}`); rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "decoding the issues payload") {
		t.Errorf("a payload that does not decode: %d %s, want 500 naming the decoding", rec.Code, rec.Body)
	}
}

// StrictEventNames turns a misspelt name from a warning into an error.
func TestStrictEventNames(t *testing.T) {
	handler := func(context.Context, webhooks.Event) error { return nil }
	loose := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: slog.New(slog.DiscardHandler)})
	if _, err := loose.On("issue.opened", handler); err != nil {
		t.Errorf("without StrictEventNames: %v, want a warning only", err)
	}
	strict := webhooks.NewEmitter(webhooks.EmitterOptions{StrictEventNames: true})
	if _, err := strict.On("issue.opened", handler); !errors.Is(err, webhooks.ErrUnknownEventName) {
		t.Errorf("with StrictEventNames: %v, want ErrUnknownEventName", err)
	}
	if _, err := strict.On(webhooks.EventIssuesOpened, handler); err != nil {
		t.Errorf("a known name: %v", err)
	}
}

// VerifyAndReceive receives a delivery signed for its payload and refuses
// one with the signature of another payload.
func TestVerifyAndReceiveRefusesAnotherPayload(t *testing.T) {
	wh, _ := webhooks.New(webhooks.Options{Secret: "s"})
	var got string
	wh.On(webhooks.EventPing, func(_ context.Context, e webhooks.Event) error { got = e.ID; return nil })
	payload := []byte(`{"zen":"x"}`)
	sig, _ := wh.Sign(payload)
	if err := wh.VerifyAndReceive(context.Background(), "1", "ping", payload, sig); err != nil || got != "1" {
		t.Errorf("VerifyAndReceive = %v, handler saw delivery %q", err, got)
	}
	if err := wh.VerifyAndReceive(context.Background(), "2", "ping", []byte(`{"zen":"y"}`), sig); !errors.Is(err, webhooks.ErrInvalidSignature) || got != "1" {
		t.Errorf("another payload's signature: %v, want ErrInvalidSignature and no handler", err)
	}
}

// Handle refuses a generated payload type of another event, and accepts
// the event's own type for any of its actions, and types of one's own.
func TestHandlePayloadTypeMustMatch(t *testing.T) {
	em := webhooks.NewEmitter(webhooks.EmitterOptions{})
	noop := func(context.Context, webhooks.Event, *payload.IssuesOpenedEvent) error { return nil }
	if _, err := webhooks.Handle(em, webhooks.EventPush, noop); !errors.Is(err, webhooks.ErrWrongPayloadType) {
		t.Errorf("Handle(push, *IssuesOpenedEvent) = %v, want ErrWrongPayloadType", err)
	}
	if _, err := webhooks.Handle(em, webhooks.EventIssuesClosed, noop); !errors.Is(err, webhooks.ErrWrongPayloadType) {
		t.Errorf("Handle(issues.closed, *IssuesOpenedEvent) = %v, want ErrWrongPayloadType", err)
	}
	if _, err := webhooks.Handle(em, webhooks.EventIssuesOpened, noop); err != nil {
		t.Errorf("Handle(issues.opened, *IssuesOpenedEvent) = %v", err)
	}
	if _, err := webhooks.Handle(em, webhooks.EventIssuesClosed, func(context.Context, webhooks.Event, *payload.IssuesEvent) error { return nil }); err != nil {
		t.Errorf("Handle(issues.closed, *IssuesEvent) = %v: the event's type fits its actions", err)
	}
	type mine struct{ Action string }
	if _, err := webhooks.Handle(em, webhooks.EventPush, func(context.Context, webhooks.Event, *mine) error { return nil }); err != nil {
		t.Errorf("Handle(push, *mine) = %v: a type of one's own says no event", err)
	}
}

// MustHandle panics where Handle returns an error, and registers otherwise.
func TestMustHandle(t *testing.T) {
	em := webhooks.NewEmitter(webhooks.EmitterOptions{})
	ran := false
	webhooks.MustHandle(em, webhooks.EventIssuesOpened, func(context.Context, webhooks.Event, *payload.IssuesOpenedEvent) error {
		ran = true
		return nil
	})
	if err := em.Receive(t.Context(), event("issues", `{"action":"opened"}`)); err != nil || !ran {
		t.Errorf("Receive = %v, ran %v; want the handler run", err, ran)
	}
	defer func() {
		if r := recover(); r == nil || !errors.Is(r.(error), webhooks.ErrWrongPayloadType) {
			t.Errorf("MustHandle(push, *IssuesOpenedEvent) recovered %v, want a panic with ErrWrongPayloadType", r)
		}
	}()
	webhooks.MustHandle(em, webhooks.EventPush, func(context.Context, webhooks.Event, *payload.IssuesOpenedEvent) error { return nil })
}

// A handler meant for an event that will never run is reported at the
// event's first delivery, once: one registered for an action GitHub does
// not send, and one Handle refused (the README's example dropped that
// error: the handler never ran and the middleware answered 200 in
// silence).
func TestHandlerThatNeverRunsIsReported(t *testing.T) {
	var log strings.Builder
	em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	em.On("issues.opend", func(context.Context, webhooks.Event) error { return nil })
	webhooks.Handle(em, webhooks.EventIssuesOpened, func(context.Context, webhooks.Event, *payload.IssuesClosedEvent) error { return nil })
	registered := log.String()
	for range 2 {
		if err := em.Receive(t.Context(), event("issues", `{"action":"opened"}`)); err != nil {
			t.Fatal(err)
		}
	}
	em.Receive(t.Context(), event("push", `{}`))
	said := strings.TrimPrefix(log.String(), registered)
	if n := strings.Count(said, "a handler meant for this event will never run"); n != 1 ||
		!strings.Contains(said, "a handler is registered for issues.opend, an action GitHub does not send") ||
		!strings.Contains(said, "the handler for issues.opened was not registered: webhooks: the payload type is another event's") {
		t.Errorf("after two issues deliveries and a push, the log says (%d reports):\n%s", n, said)
	}
}
