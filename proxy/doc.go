// Package proxy is hookline's relay client: it subscribes to a relay
// channel (smee.io, a gosmee server, or hookline serve) over Server-Sent
// Events, reads each relayed webhook delivery with its exact body bytes,
// verifies it, runs local handlers and replays it to a local server. It is
// the library behind `hookline forward` and `hookline replay`.
//
// A [Client] does the whole job:
//
//	wh, _ := webhooks.New(webhooks.Options{Secret: secret})
//	wh.On("issues.opened", onIssueOpened)
//	c, err := proxy.New(proxy.Options{
//		URL:      "https://smee.io/AbCdEf123",
//		Secret:   secret, // verify every delivery
//		Handlers: wh,     // dispatch verified deliveries
//		Targets:  []proxy.Target{{URL: "http://127.0.0.1:3000/api/github/webhooks"}},
//		OnResult: func(r proxy.Result) { log.Println(r.Delivery.Event, r.Action, r.Verification) },
//	})
//	if err != nil {
//		return err
//	}
//	return c.Run(ctx) // until ctx ends; then drains and returns nil
//
// Every delivery goes through one pipeline: a delivery id seen in the
// last hour is skipped ([Result].Duplicate); Options.Events and Ignore
// filter by "event" or "event.action"; with a Secret (or a Verifier) the
// signature is checked over the exact body, in the sender's own scheme
// (GitHub's, Stripe's, Standard Webhooks'... see package
// webhooks/provider; Options.Provider, SchemeSecrets), and a delivery that
// fails is never dispatched nor forwarded ([Result].VerifyNote says why,
// [Result].Scheme which scheme); Handlers
// get the payload of verified deliveries (unverified ones only with
// Options.AllowUnverified) while the delivery is replayed to each target
// byte for byte ([Client.ForwardRequest]), in order, each target a lane of
// its own (one target as several: a target that is down is waited for);
// with SaveDir it is written as a
// capture file, and a delivery the target did not take (any non-2xx) or
// whose signature failed goes to FailedDir for a replay; with StateFile
// the position in the channel is stored, so a restart resumes where it
// stopped. [Client.Handle] and [Client.Replay] feed the same pipeline from
// elsewhere, such as capture files ([delivery.Delivery] is what they
// take); [Client.Handle] runs one on purpose (never skipped as a duplicate: a repeat is a redelivery).
// [TargetResult] keeps every attempt with its answer. [RegisterPlugins]
// turns executables into handlers.
//
// Errors: [New] wraps [ErrInvalidOptions]; [Run]
// returns early only with [ErrPermanent] (a relay that refuses the channel
// for good) or [ErrLoop] (the target posts deliveries back to the
// channel); failed plugins wrap [ErrPluginFailed]. Without OnResult,
// failures are logged at WARN on Options.Logger.
//
// docs/PROXY.md holds the rules the client follows and why: relay
// formats, body fidelity, event ids and resuming, and the r3labs/sse
// defects its stream reader (internal/sse) neutralises.
package proxy
