// Package webhooks receives GitHub webhook deliveries: it signs and verifies
// payloads (HMAC-SHA256, X-Hub-Signature-256), dispatches events to
// handlers by event name and action, and serves them over net/http. It is a
// Go port of @octokit/webhooks 14 (with @octokit/webhooks-methods 6) and
// imports only the standard library.
//
// # Usage
//
//	wh, err := webhooks.New(webhooks.Options{Secret: os.Getenv("WEBHOOK_SECRET")})
//	if err != nil {
//		return err
//	}
//	webhooks.Handle(wh, webhooks.EventIssuesOpened, func(ctx context.Context, e webhooks.Event, p *payload.IssuesOpenedEvent) error {
//		log.Printf("issue #%d opened (delivery %s)", p.Issue.Number, e.ID)
//		return nil
//	})
//	wh.OnError(func(ctx context.Context, err *webhooks.AggregateError) {
//		log.Printf("%s %s: %v", err.Event.Name, err.Event.ID, err)
//	})
//	http.Handle("POST /api/github/webhooks", webhooks.NewMiddleware(wh, webhooks.MiddlewareOptions{}))
//	// POST /api/github/webhooks now verifies and dispatches deliveries: the
//	// router chooses the path (set MiddlewareOptions.Path to have the
//	// middleware check it, or use Wrap or Handle, which do).
//
// Payload types for every event and action are in package webhooks/payload,
// generated from GitHub's description of its webhooks; Handle decodes into
// them (or into any type of yours), and refuses a type of another event
// ([ErrWrongPayloadType]); HandleEvent takes the event from the type. Event names are constants
// (EventIssuesOpened is "issues.opened"); with
// Options.StrictEventNames, On refuses a name GitHub does not send. A
// handler reads the delivery's headers in Event.Header (HeaderHookID...).
//
// Without HTTP, pass what the request carried to VerifyAndReceive:
//
//	err := wh.VerifyAndReceive(ctx, deliveryID, eventName, body, signature256)
//
// The pieces are usable alone: package webhooks/signature holds Sign,
// Verify and VerifyWithFallback (re-exported here), and Emitter is the
// event-handler module (octokit's createEventHandler) without signatures or
// HTTP; Webhooks embeds an Emitter and adds the secret.
//
// # Dispatch
//
// Receive runs, concurrently, the handlers registered for "name.action"
// (when the payload's top-level "action" is a non-empty string), for "name",
// and with OnAny; it waits for all of them. When any fails it returns an
// *AggregateError whose Errors lists every failure in registration order
// (action handlers, then name handlers, then OnAny handlers) and whose
// message joins theirs with newlines; errors.Is and errors.As see through it.
// It then starts the OnError handlers in their own goroutines, each getting
// the same *AggregateError, whose Event is the event before any transform.
//
// A handler's panic is recovered and becomes that handler's error (wrapping
// ErrHandlerPanic, with the panic value in the message); a panicking error
// handler is recovered and logged, so no handler can crash the process.
//
// # Differences from @octokit/webhooks and why
//
//   - Registration identity. Go functions are not comparable, so On, OnEach,
//     OnAny and OnError return a *Registration, and RemoveListener takes the
//     name and that Registration. As in octokit, a Registration added
//     several times under one name loses only its most recent entry per
//     RemoveListener call, and removing what is not there does nothing.
//   - Several names. on(["a","b"], h) is OnEach([]string{"a","b"}, h);
//     removeListener(names, h) is RemoveListenerEach. OnEach checks every
//     name before registering any, so a bad name registers nothing (octokit
//     registers the names before the bad one).
//   - Errors instead of exceptions. On and OnEach return an error for "",
//     "*" and "error" (ErrMissingName, ErrReservedEventName); an unknown name
//     logs a warning and is registered, as in octokit. OnAny and OnError
//     panic on a nil handler, like http.Handle.
//   - Transform. Options.Transform is a TransformFunc that returns an Event
//     (for example with a rewritten Payload), not an arbitrary value, so
//     that every handler has the one Handler type. It runs once per Receive
//     (octokit runs it once per handler), only when a handler matches, and
//     it applies to OnAny handlers too (as octokit's code does, though its
//     README says only "on"). If it fails or panics, every matching handler
//     fails with its error and none runs. To hand extra values to handlers,
//     put them in the context given to Receive or close over them.
//   - Error handlers receive (ctx, *AggregateError) instead of an error with
//     an .event property. Their context carries Receive's values but is never
//     cancelled, since they outlive Receive.
//   - Contexts. Handlers receive the context passed to Receive. Receive
//     always waits for every handler; it does not return early on
//     cancellation.
//   - Payloads are json.RawMessage, the exact bytes received, not parsed
//     objects; handlers decode what they need (go-github's types work) and
//     must not modify the shared bytes. Event.Action reads the top-level
//     "action" member without decoding the rest; an action that is not a
//     string counts as no action (octokit would build "name.5").
//   - Bad input. Receive rejects an empty name (ErrMissingName, not octokit's
//     copy-pasted "Event name not passed" for a missing payload), an empty
//     payload (ErrMissingPayload) and a payload that is not a JSON object
//     (ErrInvalidPayload); all have StatusCode 400, are returned directly
//     (not as *AggregateError) and do not reach error handlers.
//   - Signatures. Payloads are []byte, so the HMAC covers the body exactly as
//     received (octokit 14 decodes the body to a string and signs its UTF-8
//     re-encoding, which alters invalid UTF-8). A nil payload is missing; an
//     empty non-nil one can be signed, but VerifyAndReceive rejects it. The
//     functions are synchronous. Webhooks.Verify, like octokit's
//     webhooks.verify, ignores AdditionalSecrets; VerifyAndReceive uses them.
//     An empty additional secret is rejected by New.
//   - A failed verification (wrong, missing or malformed signature, empty
//     body) returns an *AggregateError wrapping ErrInvalidSignature with the
//     message "signature does not match event payload and secret" (without
//     octokit's "[@octokit/webhooks] " prefix) and StatusCode 400, and calls
//     the error handlers, as octokit does.
//   - HTTP status. An error carries a status through a StatusCode() int
//     method (octokit reads an error's .status property). The middleware
//     uses the status of the first error in registration order, found with
//     errors.As, when it is 400–599, else 500.
//   - Logging is log/slog. A nil Logger means slog.Default() (octokit
//     defaults to console with debug and info silenced; slog.Default's
//     level, Info, has the same effect for this package, which logs debug,
//     warn and error only).
//   - Event names. EmitterEventNames returns a fresh sorted slice. The
//     list is GitHub's webhooks description's (as octokit 14.2.0's) plus
//     "repository_dispatch.sample" from the original specification; it is
//     generated with package payload's types by `go generate
//     ./webhooks/payload/`, one event table for both. ValidateEventName
//     also rejects "" (ErrMissingName) in every mode; an OnUnknownEventName
//     other than "warn" or "ignore" behaves like "" (an error), as in
//     octokit.
//
// # Middleware
//
// Middleware is the net/http counterpart of createNodeMiddleware and
// createWebMiddleware (see Middleware for the status table). It implements
// http.Handler (404 for other paths), wraps a next handler with Wrap, and
// offers Handle, which returns false, writing nothing, for a request outside
// its path. Differences from octokit 14, decided where the specification
// is silent:
//
//   - Error bodies carry the Go error's message, without JavaScript's
//     "Error: " name prefix; a bad signature answers
//     {"error":"signature does not match event payload and secret"}.
//     Bodies are encoded with encoding/json without HTML escaping, like
//     JSON.stringify; they differ only where Go escapes U+2028 and U+2029 and
//     replaces invalid UTF-8 with U+FFFD.
//   - Content-Length is the body's length in bytes (octokit uses the
//     JavaScript string length).
//   - The Content-Type test is octokit's regular expression: optional
//     leading white space, then application/json exactly (case-sensitive:
//     "Application/JSON" is refused with 415, as in octokit), then optional
//     white space and the end or a ";" with parameters. A header that is
//     present but empty counts as present, as in octokit.
//   - The body is limited to MaxBodyBytes (default 25 MiB, GitHub's payload
//     cap): 413, which octokit does not have. A body that cannot be read is
//     400 (octokit: 500).
//   - Timeout (default 9 s, as in octokit) starts after the body is read:
//     a Go handler may not read the request body after it returns, and the
//     server's ReadTimeout bounds slow uploads. Handlers that outlive it keep
//     running with a context that is never cancelled; a later failure is
//     logged (octokit drops it silently).
//   - Paths are compared in escaped form, trailing slashes ignored, and the
//     query string never matters (octokit keeps a trailing slash that is
//     followed by a query string). A configured path without a leading slash
//     gets one. Go's server answers unparsable request targets itself, so
//     octokit's 422 has no counterpart.
//   - A signed body that is valid JSON but not an object answers 400 with a
//     JSON error, as the specification asks. octokit 14 dispatches an array,
//     answers 500 "Event name not passed" for null, false, 0 and "", and
//     never answers other scalars (its promise rejects unhandled).
//   - There is one middleware: net/http's Handler model covers both
//     createNodeMiddleware and createWebMiddleware, and Handle's bool is
//     the Node middleware's resolved "handled" value.
//
// # Concurrency
//
// Webhooks, Emitter and Middleware are safe for concurrent use: handlers may
// be registered and removed while deliveries are received. A Receive uses
// the handlers registered when it starts.
package webhooks
