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
//  0. A delivery whose id was read in the last hour (DedupWindow, among the
//     last 10,000 ids) is skipped as a duplicate (Result.Duplicate); see
//     "Nothing lost, nothing twice" below.
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
//     capture), whatever happened to it. A delivery the target did not take
//     is also written to FailedDir, for a replay.
//  5. With StateFile, the position in the channel is stored.
//  6. OnResult gets a Result; Stats counts everything.
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
// # Nothing lost, nothing twice
//
// The promise: every delivery that reached the relay reaches the target, or
// is saved and reported; within one run none reaches it twice; no input
// stops the client or leaks a secret.
//
// Resuming after a restart. With StateFile, after each delivery is done
// (forwarded or failed and saved, handled, filtered or skipped) the client
// stores its position in the channel, and the next Run resumes after it
// from the relay's history (Last-Event-ID). The position is a watermark: the
// event id of the latest delivery that it and every delivery read before it
// are done. With Concurrency above one a slow delivery holds it back while
// later ones finish; those are listed in the file as "done_after", and a
// restart skips them as duplicates, so only deliveries that were really
// unfinished come again. Ids are compared for equality only (deliveries are
// numbered in read order), never parsed, so any relay's ids work. The file
// is written before the Result is reported, as a synced temporary file
// renamed over the old one (never torn): a process killed at any moment
// (kill -9) leaves the position of its last finished delivery. What that
// cannot cover is the delivery in flight at the kill: the target may have
// taken it while the client died before recording it, so it comes again
// (at least once across a crash; X-GitHub-Delivery lets a target tell). A
// power loss may also undo the last rename (the directory is not synced, a
// second fsync per delivery): an older position, more repeats, never a loss.
// Nothing is stored for a relay whose ids are per connection (smee.io). A
// file written for another channel, or that does not parse, is ignored with
// a warning. The file holds the channel URL with its credentials redacted
// and a SHA-256 of the full stream URL that identifies the channel.
//
// Deliveries the target does not take. After rest's retries (honouring
// Retry-After), a delivery that got no answer (connection refused, reset,
// timeout, TLS failure, or the drain timeout at shutdown) or a 408, 425,
// 429 or 5xx (TargetResult.Failed) is written to FailedDir as a capture file
// (the folder and file names synced: this copy may be the only one) and
// Result.FailedFile names it; `hookline replay` sends such a folder later.
// Other 4xx answers are the target refusing the delivery itself, which
// resending the same bytes would not change: they are reported and kept by
// SaveDir only. When neither folder has it, Result.Lost is true, the log
// warns, and Stats.Lost counts it (the relay may still have it). A failed
// write (a full disk) is reported in the Result (SaveErr, FailedErr) and
// forwarding goes on.
//
// Duplicates. Relays deliver at least once: a replay after a reconnect, a
// relay that sends an event twice. The client remembers the delivery ids
// (X-GitHub-Delivery, else X-Request-Id) of the last DedupWindow (1 hour),
// at most DedupSize (10,000) of them, and skips a repeat: Result.Duplicate,
// Stats.Duplicates, "duplicate, skipped" in the trace. A deliberate
// redelivery keeps its delivery id too (GitHub's Redeliver button, the
// hookline relay page's): when the relay's ids are durable and the repeat
// comes as a new event (a different event id), it is forwarded as usual and
// marked Result.Redelivery; through smee.io (ids per connection) there is
// no telling, and a redelivery within the window is skipped (a negative
// DedupWindow turns the check off). Deliveries without an id are never
// skipped. The memory is per run: across a restart the state file does the
// job.
//
// Hostile input. An event larger than the transport's MaxEventSize is
// dropped without ending the connection and reported as oversizeEvent (an
// error wrapping ErrMalformedMessage and bufio.ErrTooLong), and its id
// counts as handled: a relay that keeps it in its history cannot make the
// client fetch it forever. Event ids that could not be sent back as
// Last-Event-ID (over 256 bytes, or holding control characters; net/http
// refuses such a header, so every reconnect would fail) are not kept. Every
// other malformed message is logged, counted in Stats.Malformed and skipped;
// the deliveries around it are not affected (TestClientHostileInput has a
// row per kind).
//
// Transport security. TLS certificates of relays and targets are verified
// (net/http's default); a certificate that cannot be verified is a
// permanent relay error (retrying cannot fix it) and a target failure
// (IsCertificateError tells them apart, for a hint). Callers that must reach
// a test server with a self-signed certificate pass clients that skip
// verification (the CLI's --insecure, with a warning). Errors about a
// target name its URL with the query values redacted, as RedactURL does (a
// query may carry a token); Authorization, Proxy-Authorization and Cookie
// are never written to capture files (SaveableHeader).
//
// The receiving side underneath has three layers, each usable alone:
//
//   - Transport opens one SSE connection and passes events to a callback;
//     SSETransport, on github.com/r3labs/sse/v2, is the default;
//     StdlibTransport, a small reader of its own on net/http, behaves the
//     same at a fraction of the cost for large events (see docs/PERFORMANCE.md).
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
// StreamOptions.LastEventID resumes after an id saved by an earlier run
// (Options.StateFile keeps one for the Client). A
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
//     client reconnect in a loop: the limit is DefaultMaxEventSize (64 MiB,
//     above the largest delivery in every format; see its documentation for
//     the arithmetic). An event over the limit would still end the
//     connection with bufio.ErrTooLong, and a relay that replays it would
//     loop the client forever: a reader under r3labs cuts such an event
//     short and names it oversizeEvent, so it is skipped with its id and the
//     stream goes on (ClientMaxBufferSize is the limit plus room for the
//     cut).
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
// A cost that SSETransport works around: r3labs' EventStreamReader searches
// the whole buffered event for a blank line after every read, five times
// (one per line-ending pair), so an event that arrives in small reads costs
// time quadratic in its size (33 MiB fed 64 KiB at a time: 1.6 s to 2.4 s
// here, BenchmarkR3labsEventStreamReader). The response body r3labs reads
// fills each read until the bytes hold a blank line (eventFiller), which
// cannot delay an event, as r3labs could not dispatch it before; its buffer
// then doubles between searches and the same event takes 0.08 s
// (BenchmarkR3labsFilled). What remains of r3labs' cost, and is not
// fixable from outside (it would take a fork): it splits every event into
// lines rune by rune (bytes.FieldsFunc), copies its data twice, and keeps a
// buffer as large as the largest event (64 MiB after a 25 MiB delivery in
// hookline's format) for the rest of the connection. StdlibTransport has
// none of these; docs/PERFORMANCE.md has the figures.
package proxy
