package webhooks

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/hookline/hookline/webhooks/internal/signature"
)

// Sentinel errors, checked with errors.Is. Errors that stand for a bad
// request also carry an HTTP status through a StatusCode() int method
// (see AggregateError.StatusCode).
var (
	// ErrMissingSecret is returned by New, Sign and Verify when a secret is
	// the empty string. It is signature.ErrMissingSecret.
	ErrMissingSecret = signature.ErrMissingSecret
	// ErrMissingPayload is returned by Sign and Verify for a nil payload and
	// by Receive for an empty one. It is signature.ErrMissingPayload.
	ErrMissingPayload = signature.ErrMissingPayload
	// ErrMissingSignature is returned by Verify for an empty signature. It is
	// signature.ErrMissingSignature.
	ErrMissingSignature = signature.ErrMissingSignature

	// ErrInvalidSignature means a delivery's signature does not match its
	// payload under any configured secret. VerifyAndReceive returns it
	// inside an *AggregateError whose status is 400; its message is the
	// body of the middleware's 400 response.
	ErrInvalidSignature = errors.New("signature does not match event payload and secret")
	// ErrMissingName means an event has no name (Receive), or On, OnEach,
	// RemoveListener or ValidateEventName got an empty name.
	ErrMissingName = errors.New("webhooks: event name required")
	// ErrInvalidName means Receive got an event name holding "." or "*":
	// GitHub's event names have neither, and such a name would reach the
	// handlers of another name ("issues.closed") or every handler ("*").
	ErrInvalidName = errors.New("webhooks: invalid event name")
	// ErrInvalidPayload means a payload is not a JSON object.
	ErrInvalidPayload = errors.New("webhooks: payload is not a JSON object")
	// ErrUnknownEventName means a name is not in EmitterEventNames.
	ErrUnknownEventName = errors.New("webhooks: unknown event name")
	// ErrReservedEventName means "*" or "error" was given where only an
	// event name is allowed: use OnAny and OnError instead.
	ErrReservedEventName = errors.New("webhooks: reserved event name")
	// ErrNilHandler means On or OnEach got a nil Handler.
	// ErrWrongPayloadType is returned by Handle for a payload type of
	// another event than the name it is registered for (a generated type of
	// package webhooks/payload says its event: EventName).
	ErrWrongPayloadType = errors.New("webhooks: the payload type is another event's")
	ErrNilHandler       = errors.New("webhooks: nil handler")
	// ErrHandlerPanic wraps the value a handler (or the transform) panicked
	// with; the panic is reported as that handler's error.
	ErrHandlerPanic = errors.New("webhooks: handler panicked")
	// ErrPayloadTooLarge means a request body exceeds
	// MiddlewareOptions.MaxBodyBytes (status 413).
	ErrPayloadTooLarge = errors.New("webhooks: payload too large")
)

// AggregateError is the error Receive and VerifyAndReceive return when
// handlers fail or when verification fails, and the value error handlers
// receive. It is the counterpart of JavaScript's AggregateError with its
// .event property.
//
// Callers and error handlers share one value and must not modify it.
type AggregateError struct {
	// Event is the event being handled, as passed to Receive (before any
	// transform). For a failed verification its Payload holds the raw,
	// unverified body, which need not be JSON.
	Event Event
	// Errors holds every error, in a deterministic order: the errors of the
	// event.action handlers, then of the event handlers, then of the OnAny
	// handlers, each group in registration order. It has at least one entry.
	Errors []error
}

// Error returns the messages of Errors joined with newlines.
func (e *AggregateError) Error() string {
	switch len(e.Errors) {
	case 0:
		return "webhooks: no errors"
	case 1:
		return e.Errors[0].Error()
	}
	var b strings.Builder
	for i, err := range e.Errors {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap returns Errors, so errors.Is and errors.As look at every member.
func (e *AggregateError) Unwrap() []error { return e.Errors }

// StatusCode returns the HTTP status the middleware answers with: the status
// of the first error in Errors if it (or an error it wraps) has a
// StatusCode() int method returning a 4xx or 5xx code, else 500.
func (e *AggregateError) StatusCode() int {
	if len(e.Errors) == 0 {
		return http.StatusInternalServerError
	}
	return statusOf(e.Errors[0])
}

// statusCoder is implemented by errors that carry an HTTP status.
type statusCoder interface{ StatusCode() int }

// statusOf returns the status carried by err (found with errors.As) when it
// is a valid error status, else 500.
func statusOf(err error) int {
	var sc statusCoder
	if errors.As(err, &sc) {
		if s := sc.StatusCode(); s >= 400 && s <= 599 {
			return s
		}
	}
	return http.StatusInternalServerError
}

// statusError gives err an HTTP status; cause, if not nil, is also matched
// by errors.Is and errors.As but does not show in the message.
type statusError struct {
	status int
	err    error
	cause  error
}

func (e *statusError) Error() string   { return e.err.Error() }
func (e *statusError) StatusCode() int { return e.status }
func (e *statusError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.err}
	}
	return []error{e.err, e.cause}
}

// badRequest wraps err with status 400.
func badRequest(err error) error {
	return &statusError{status: http.StatusBadRequest, err: err}
}

// panicError turns a recovered panic value into an error wrapping
// ErrHandlerPanic (and the value itself when it is an error).
func panicError(v any) error {
	if err, ok := v.(error); ok {
		return fmt.Errorf("%w: %w", ErrHandlerPanic, err)
	}
	return fmt.Errorf("%w: %v", ErrHandlerPanic, v)
}
