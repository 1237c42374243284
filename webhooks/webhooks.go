package webhooks

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/hookline/hookline/webhooks/internal/signature"
)

// Sign returns "sha256=" followed by the lowercase hexadecimal HMAC-SHA256
// of payload keyed with secret, the X-Hub-Signature-256 value. It returns
// ErrMissingSecret for an empty secret and ErrMissingPayload for a nil
// payload. It is signature.Sign.
func Sign(secret string, payload []byte) (string, error) {
	return signature.Sign(secret, payload)
}

// Verify reports whether sig is exactly Sign(secret, payload). Any other
// string, including uppercase hexadecimal, a "sha1=" signature or another
// length, is false with a nil error. It returns ErrMissingSecret,
// ErrMissingPayload or ErrMissingSignature for an empty secret, a nil
// payload or an empty sig. It runs in constant time. It is signature.Verify.
func Verify(secret string, payload []byte, sig string) (bool, error) {
	return signature.Verify(secret, payload, sig)
}

// VerifyWithFallback is Verify trying secret and then each of
// additionalSecrets, for secret rotation. It is signature.VerifyWithFallback.
func VerifyWithFallback(secret string, payload []byte, sig string, additionalSecrets ...string) (bool, error) {
	return signature.VerifyWithFallback(secret, payload, sig, additionalSecrets...)
}

// Options configures New.
type Options struct {
	// Secret is the webhook secret configured on GitHub. Required.
	Secret string
	// AdditionalSecrets are also accepted by VerifyAndReceive (not by
	// Verify), tried in order after Secret, for secret rotation. None may
	// be empty.
	AdditionalSecrets []string
	// Transform, if not nil, rewrites each event before the handlers
	// registered with On, OnEach and OnAny see it (see TransformFunc).
	Transform TransformFunc
	// Logger receives warnings and errors. If nil, slog.Default() is used
	// at the time of logging.
	Logger *slog.Logger
	// StrictEventNames makes On and OnEach refuse a name that is not in
	// EmitterEventNames with an error wrapping ErrUnknownEventName (as
	// TypeScript refuses it in octokit), instead of logging a warning.
	StrictEventNames bool
}

// Webhooks verifies and dispatches GitHub webhook deliveries: the Go
// counterpart of octokit's Webhooks class. It embeds an Emitter for
// On, OnEach, OnAny, OnError, RemoveListener and Receive.
//
// A Webhooks is safe for concurrent use. Create it with New; it must not be
// copied.
type Webhooks struct {
	Emitter

	secret            string
	additionalSecrets []string
}

// New returns a Webhooks configured by opts. It returns an error wrapping
// ErrMissingSecret when opts.Secret or one of opts.AdditionalSecrets is
// empty.
func New(opts Options) (*Webhooks, error) {
	if opts.Secret == "" {
		return nil, fmt.Errorf("webhooks: Options.Secret: %w", ErrMissingSecret)
	}
	for i, s := range opts.AdditionalSecrets {
		if s == "" {
			return nil, fmt.Errorf("webhooks: Options.AdditionalSecrets[%d]: %w", i, ErrMissingSecret)
		}
	}
	return &Webhooks{
		Emitter:           Emitter{transform: opts.Transform, logger: opts.Logger, strict: opts.StrictEventNames},
		secret:            opts.Secret,
		additionalSecrets: slices.Clone(opts.AdditionalSecrets),
	}, nil
}

// Sign returns the signature of payload under the Webhooks' secret (see the
// package-level Sign).
func (w *Webhooks) Sign(payload []byte) (string, error) {
	return signature.Sign(w.secret, payload)
}

// Verify reports whether sig is the signature of payload under the
// Webhooks' secret; like octokit's webhooks.verify it ignores
// AdditionalSecrets (VerifyAndReceive uses them). See the package-level
// Verify.
func (w *Webhooks) Verify(payload []byte, sig string) (bool, error) {
	return signature.Verify(w.secret, payload, sig)
}

// VerifyWithFallback reports whether sig is the signature of payload under
// the Webhooks' secret or one of its AdditionalSecrets: the check
// VerifyAndReceive makes, for callers that dispatch themselves (package
// proxy runs it before a Webhooks' handlers).
func (w *Webhooks) VerifyWithFallback(payload []byte, sig string) (bool, error) {
	return signature.VerifyWithFallback(w.secret, payload, sig, w.additionalSecrets...)
}

// VerifyAndReceive checks sig (the X-Hub-Signature-256 header) against
// payload (the raw request body) under the secret and the additional
// secrets, then dispatches the event with Receive. id (X-GitHub-Delivery)
// may be empty; name is the X-GitHub-Event header.
//
// When the signature does not match, or is missing, or the payload is nil
// or empty, it calls the OnError handlers and returns an *AggregateError
// whose only member wraps ErrInvalidSignature (and ErrMissingSignature or
// ErrMissingPayload when one was missing), with message "signature does
// not match event payload and secret" and StatusCode 400. No handler runs.
//
// A verified payload that is not a JSON object returns an error wrapping
// ErrInvalidPayload and an empty name ErrMissingName, both with StatusCode
// 400, without calling any handler. Otherwise it returns what Receive
// returns. Handlers share payload and must not modify it.
func (w *Webhooks) VerifyAndReceive(ctx context.Context, id, name string, payload []byte, sig string) error {
	return w.verifyAndReceive(ctx, Event{ID: id, Name: name, Payload: payload}, sig)
}

// verifyAndReceive is VerifyAndReceive with the event built (the
// middleware adds the request's headers).
func (w *Webhooks) verifyAndReceive(ctx context.Context, e Event, sig string) error {
	ok, err := w.VerifyWithFallback(e.Payload, sig)
	if len(e.Payload) == 0 && err == nil {
		err = ErrMissingPayload // an empty body is never a delivery
	}
	if !ok || err != nil {
		return w.fail(ctx, e, []error{&statusError{status: http.StatusBadRequest, err: ErrInvalidSignature, cause: err}})
	}
	return w.Receive(ctx, e)
}
