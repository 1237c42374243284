// Package proxy is hookline's relay client: it subscribes to a relay
// channel (smee.io, a gosmee server, or hookline serve) over Server-Sent
// Events, decodes each relayed webhook delivery with its exact body bytes,
// verifies it, runs local handlers and replays it to a local server. It is
// the library behind `hookline forward`.
//
// # Client
//
// Client does the whole job:
//
//	wh, _ := webhooks.New(webhooks.Options{Secret: secret})
//	wh.On("issues.opened", onIssueOpened) // local Go handlers ("plugins")
//	c, err := proxy.New(proxy.Options{
//		URL:      "https://smee.io/AbCdEf123",
//		Secret:   secret,       // verify every delivery
//		Handlers: &wh.Emitter,  // dispatch verified deliveries
//		Target:   "http://127.0.0.1:3000/api/github/webhooks",
//		OnResult: func(r proxy.Result) { log.Println(r.Delivery.Event, r.Action, r.Verification) },
//	})
//	if err != nil {
//		return err
//	}
//	return c.Run(ctx) // until ctx ends; then drains and returns nil
//
// For each delivery, in the relay's order (Options.Concurrency relaxes it):
//
//  1. Events/Ignore filters by "event" or "event.action".
//  2. With a Secret, the signature is checked over the exact body:
//     X-Hub-Signature-256, or the legacy X-Hub-Signature (HMAC-SHA1, with a
//     warning in Result.VerifyNote) when a server sends only that. A
//     delivery that fails is never dispatched nor forwarded; the note says
//     why (no signature header, a body the relay re-encoded, a wrong
//     secret). Without a Secret every delivery is "unverified".
//  3. Handlers (a *webhooks.Emitter: pass &wh.Emitter of a Webhooks, or an
//     Emitter with RegisterPlugins) get the payload, and at the same time
//     the delivery is replayed to Target (ForwardRequest: same method,
//     exact body, original headers except hop-by-hop ones, Host and
//     Content-Length; the query added to Target's unless NoQuery; re-signed
//     with ResignSecret when set). Transient target failures are retried by
//     rest's RetryPolicy, honouring Retry-After.
//  4. With SaveDir, the delivery is written as a capture file (package
//     capture), whatever happened to it.
//  5. OnResult gets a Result; Stats counts everything.
//
// Decisions where the specification is silent:
//
//   - Client takes the secret and a *webhooks.Emitter rather than a
//     *webhooks.Webhooks: it verifies by itself because it also accepts the
//     legacy SHA-1 header, which the webhooks package deliberately refuses,
//     and because forwarding must not wait for handlers. A Webhooks's
//     handlers are reached through &wh.Emitter.
//   - Handlers need a JSON object. A form-encoded delivery
//     (application/x-www-form-urlencoded, which GitHub can send) is passed
//     to handlers as its "payload" field; any other body skips the handlers
//     with an error in the Result and is still forwarded byte-exact.
//   - A forwarded request carries no User-Agent when the delivery had none
//     (not Go's default).
//   - When the context ends, Run stops reading and lets deliveries already
//     read finish for up to DrainTimeout (10 s); a delivery read but not yet
//     queued is logged, and stays in the relay's history.
//   - Every subscription sends "X-Hookline-Stream: 1", which makes a
//     hookline relay add the exact body bytes (bodyB); other relays ignore
//     it.
//   - Plugins (PluginDir, ExecPlugin) run with the payload on stdin, a copy
//     in HOOKLINE_PAYLOAD_FILE and HOOKLINE_EVENT, HOOKLINE_ACTION,
//     HOOKLINE_DELIVERY set, in an allow-listed environment (PATH, HOME,
//     LANG, LC_*, TZ, TMPDIR and a few more, plus PluginOptions.Env): the
//     parent's secrets (HOOKLINE_SECRET, tokens) never reach them. A
//     non-zero exit, a failure to start or a timeout (1 min) is the
//     handler's error, with the last line of its stderr.
//
// The receiving side underneath has three layers, each usable alone:
//
//   - Transport opens one SSE connection and passes events to a callback;
//     SSETransport is the implementation, on github.com/r3labs/sse/v2.
//   - Subscribe is the reconnect loop around a Transport: backoff, idle
//     detection, Last-Event-ID, state reports.
//   - Decode turns one event into a Message: a Delivery, a control message
//     or a gap warning.
//
// # Usage
//
//	url, err := proxy.StreamURL(channelURL, "") // proxy.FormatGosmee for gosmee
//	if err != nil {
//		return err
//	}
//	err = proxy.Subscribe(ctx, nil, proxy.StreamOptions{
//		URL:     url,
//		OnState: func(c proxy.StateChange) { log.Println(c.State, c.URL, c.Err) },
//	}, func(ev proxy.SSEEvent) {
//		m, err := proxy.Decode(ev)
//		if err != nil {
//			log.Println(err) // errors.Is(err, proxy.ErrMalformedMessage)
//			return
//		}
//		if m.Kind == proxy.KindDelivery {
//			handle(m.Delivery) // m.Delivery.Body holds the exact bytes
//		}
//	})
//	// err is ctx.Err() after cancellation, or wraps proxy.ErrPermanent.
//
// # Relay formats
//
// Decode detects the format of every message by itself; no option is
// needed.
//
//   - smee.io sends "id: N" on every event, numbering the events of one
//     connection from 0; "ready" and "ping" are named events (control, by
//     their name). A delivery is an unnamed event whose data is a JSON
//     object: every request header under its lowercase name, "body" (the
//     parsed body, re-serialised with JSON.stringify), "query" (an object)
//     and "timestamp" (milliseconds, a number); some versions add
//     "rawdata", the raw body as a string.
//   - gosmee streams at <host>/events/<channel>. Its control messages are
//     unnamed events whose data is exactly {"message":"connected"} or
//     {"message":"ready"}: Decode parses the object and treats an object
//     whose only member is a string "message" as control, never by looking
//     for a substring. Old gosmee servers sent a bare "ready". Comments
//     ": keepalive" come every 30 s (the transport never passes comments
//     on, but they count as activity). A delivery holds the headers
//     (lowercase, first value only), "timestamp" as a string and "bodyB",
//     the exact body in base64. With Redis, deliveries have durable ids and
//     an event named "gosmee-gap" warns that history was lost (KindGap).
//   - hookline serve sends smee.io's format, adds "bodyB" when the
//     subscriber asks for it, and numbers only deliveries, with durable
//     per-channel ids. Its "ready" and "ping" must carry no id (see Event
//     ids below).
//
// An event with any other name is KindControl, as EventSource clients
// ignore it. Every other event must be a delivery: data that is not a JSON
// object, an object with no usable header, "bodyB" that is not a string of
// valid standard base64, or "rawdata" that is not a string is an error
// wrapping ErrMalformedMessage, never a panic (FuzzDecode checks that).
// The keys body, bodyB, rawdata, query, timestamp and method are the
// relay's fields; every other key is a header, canonicalised; names that
// are not HTTP tokens and values with control characters are dropped.
//
// # Body fidelity
//
// The body is taken from "bodyB" (exact bytes), else "rawdata" (exact text),
// else "body": the JSON text of that field exactly as it appears in the
// message (a json.RawMessage slice, never re-encoded by Go). smee.io has
// already re-serialised it, so a signature survives only when the sender's
// JSON was compact with no escapes JSON.stringify rewrites, which is usually
// true of GitHub's; Delivery.BodySource tells the trace which case it is. A
// "body" that is a JSON string is the string's bytes when the request's
// Content-Type is not JSON (a text body the relay parsed as a string) and
// the JSON literal, quotes included, when it is JSON. A null or missing body
// is empty.
//
// # Reconnecting
//
// Subscribe reconnects forever until its context ends: after a clean EOF,
// an event cut off by the end of the stream, network errors, an idle stream
// and non-2xx answers, waiting a random duration up to
// min(MaxBackoff, MinBackoff·2ⁿ) after the n-th consecutive failure (full
// jitter; 250 ms and 30 s by default; Retry-After honoured when longer). A
// connection that delivered a non-control event, or stayed up for
// StableAfter (10 s), resets the backoff; one that only said "ready" does
// not, so a relay that accepts and hangs up at once is not hammered. It
// stops only on errors wrapping ErrPermanent: a 4xx other than 408 and 429
// (4xx means the channel URL or the credentials are wrong; 408 and 429 are
// the relay asking to come back later), a URL that is not http(s), or an
// answer that is not an event stream. Every URL printed in an error or a
// StateChange has its password and query values replaced by "xxxxx".
//
// A stream is idle when no byte at all (keepalive comments and pings
// included) arrives for SSETransport.IdleTimeout, 90 s by default, three
// missed 30-second keepalives. The clock is paused while the callback
// handles an event, so a slow handler does not look like a dead relay.
//
// # Event ids and resuming
//
// The loop remembers the id of the last event the callback handled and sends
// it as Last-Event-ID when it reconnects, if the relay's ids are durable.
// SSE gives no way to ask, so the rule (ResumeAuto) is: ids are durable once
// a delivery has set one, unless a control event (ready, ping, gosmee's
// control objects) ever set a new id. smee.io numbers every event of a
// connection from 0, "ready" first, so its ids are never sent back (smee.io
// ignores Last-Event-ID anyway, and an id from one connection means nothing
// on the next); gosmee with Redis and hookline number only deliveries, so
// theirs are. ResumeAlways and ResumeNever override the rule;
// StreamOptions.LastEventID resumes after an id saved by an earlier run. A
// relay that refuses the id with a permanent status (gosmee answers 400 to
// an id it cannot parse) gets one more attempt without it.
//
// # The gosmee stream URL
//
// Users paste the channel URL, <base>/<channel>; gosmee serves an HTML page
// there and the stream at <base>/events/<channel>. The decision is explicit
// with a safety net: StreamURL(channelURL, FormatGosmee) builds the stream
// URL (the CLI's --format gosmee), and when a URL answers 2xx with a
// Content-Type other than text/event-stream, Subscribe retries once at the
// /events/ URL before giving up with ErrNotEventStream. smee.io and hookline
// stream at the channel URL itself (with exactly "Accept: text/event-stream",
// or smee.io serves HTML too).
//
// # r3labs/sse v2.10.0 defects, and how SSETransport neutralises them
//
//   - A 64 KiB default buffer silently drops larger events and makes the
//     client reconnect in a loop: ClientMaxBufferSize is set to
//     DefaultMaxEventSize (64 MiB, above the largest delivery in every
//     format; see its documentation for the arithmetic), and an event over
//     the limit is reported as an error wrapping bufio.ErrTooLong.
//   - Retries inside r3labs ignore a deadline or a cancel during the wait and
//     give up after 15 minutes: each Subscribe call makes exactly one attempt
//     (ReconnectStrategy is backoff.StopBackOff) and Subscribe, the loop,
//     owns retries with a context-aware, never-expiring backoff.
//   - A clean EOF and a cancelled context both return nil: the transport
//     checks the context itself and returns ctx.Err(), an error wrapping
//     io.EOF, or ErrIdle, so the loop can tell them apart.
//   - Without a validator only 200 counts as success, a 404 is retried for
//     15 minutes, and a 200 HTML page is read as an event stream: the
//     ResponseValidator accepts 2xx event streams only and classifies the
//     rest (StatusError, ErrNotEventStream). r3labs leaves the body of a
//     rejected response open: the validator closes it.
//   - At the end of a stream r3labs dispatches a half-received event: the
//     response body is wrapped so that a stream ending without a blank line
//     first yields one more line naming the event "hookline-truncated-event",
//     which the transport drops, returning io.ErrUnexpectedEOF.
//   - Comments are never passed on, so a dead stream and a quiet one look
//     alike: the body wrapper resets the idle clock on every byte read.
//   - SubscribeChan leaks a goroutine per unsubscribe, and Connected and the
//     subscriptions map race: only the callback API is used
//     (SubscribeRawWithContext), one sse.Client per attempt, with no
//     OnConnect or OnDisconnect callbacks (the only writers of Connected).
//
// A remaining cost, measured and not fixed (it would take a fork): r3labs'
// EventStreamReader searches the whole buffered event for a blank line after
// every read, five times (one per line-ending pair), so one event costs time
// quadratic in its size when it arrives in small reads. Fed 64 KiB at a time
// (BenchmarkR3labsEventStreamReader, 2-core AMD EPYC), a 1 MiB event takes
// 3.7 ms, 4 MiB 18 ms, 16 MiB 240 ms and 33 MiB (a 25 MiB body in bodyB)
// 1.6 s. On loopback, where reads are large, the whole 25 MiB delivery
// arrives and decodes in about 0.5 s (BenchmarkRelay25MiB).
package proxy
