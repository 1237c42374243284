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
//	// MustHandle panics where Handle would return an error: a payload
//	// type that is another event's.
//	webhooks.MustHandle(wh, webhooks.EventIssuesOpened, func(ctx context.Context, e webhooks.Event, p *payload.IssuesOpenedEvent) error {
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
// ([ErrWrongPayloadType]); HandleEvent takes the event from the type. Event
// names are constants (EventIssuesOpened is "issues.opened"); with
// Options.StrictEventNames, On refuses a name GitHub does not send. A
// handler reads the delivery's headers in Event.Header (HeaderHookID...).
// Receive runs every matching handler concurrently and waits; failures come
// back as one *AggregateError (errors.Is and errors.As see through it) and
// go to the OnError handlers; a handler's panic is its error.
//
// Without HTTP, pass what the request carried to VerifyAndReceive:
//
//	err := wh.VerifyAndReceive(ctx, deliveryID, eventName, body, signature256)
//
// The pieces are usable alone: Sign, Verify and VerifyWithFallback need no
// Webhooks, and Emitter is the event-handler module (octokit's
// createEventHandler) without signatures or HTTP; Webhooks embeds an
// Emitter and adds the secret. Every signature of the module, GitHub's and
// the other senders' (webhooks/provider), is computed by one HMAC routine.
//
// How dispatch and the middleware work in detail, and what differs from
// @octokit/webhooks and why, is in docs/WEBHOOKS.md. Other senders'
// signatures (Gitea, GitLab, Stripe, Standard Webhooks...) are package
// webhooks/provider's.
//
// # Concurrency
//
// Webhooks, Emitter and Middleware are safe for concurrent use: handlers may
// be registered and removed while deliveries are received. A Receive uses
// the handlers registered when it starts.
package webhooks
