package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/rest"
	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/provider"
)

// Defaults for Options.
const (
	defaultTargetTimeout = 30 * time.Second
	defaultDrainTimeout  = 10 * time.Second
	// GitHubTimeout is how long GitHub waits for a webhook's answer: a
	// delivery answered later, or with a status other than 2xx, is recorded
	// as failed on GitHub's side (and GitHub does not send it again on its
	// own). TargetResult.GitHubWouldFail applies it to the target's answer.
	GitHubTimeout = 10 * time.Second
	// defaultQueueSize is how many received deliveries may wait for a
	// worker before the client stops reading the stream (the relay then
	// holds them).
	defaultQueueSize = 256
)

// Errors returned by New.
var (
	// ErrInvalidOptions reports unusable Options: a target URL that
	// cannot be forwarded to (the message starts "invalid target URL"),
	// an event pattern, handlers nothing verifies...
	ErrInvalidOptions = errors.New("invalid options")
	// ErrLoop is returned by Run when the target posts deliveries back to
	// the channel they came from (see loopGuard): forwarding them would go
	// on for ever.
	ErrLoop = errors.New("forwarding loop")
)

// Options configure a Client. Only URL is required.
type Options struct {
	// URL is the relay channel URL (the one GitHub posts to).
	URL string
	// Format is the relay's format when known; empty detects it (a gosmee
	// channel URL is recognised by the page it serves).
	Format delivery.Format
	// MaxBackoff caps the wait between reconnection attempts (jittered,
	// exponential from 250 ms). If zero, 30 s.
	MaxBackoff time.Duration
	// RelayClient makes the requests to the relay: the event stream and
	// the bodies a hookline relay sends by link. If nil, a client on
	// http.DefaultTransport. Its Timeout is ignored for the stream, which
	// has no overall deadline (an idle stream is cut after 90 s).
	RelayClient *http.Client
	// ReadToken is the read token of a private channel on a hookline relay,
	// sent as "Authorization: Bearer" with the stream and the fetches of
	// bodies sent by link. A token in URL (?token=) is used when ReadToken
	// is empty, and taken out of the URL either way: it is never in a
	// request's URL, Source or a message.
	ReadToken string
	// LastEventID resumes a channel after an id saved by an earlier run. It
	// wins over the id in StateFile.
	LastEventID string
	// StateFile, if not empty, is where the client keeps its place in the
	// channel across runs: Run resumes after the id stored there (when the
	// file exists and was written for this channel; a file for another
	// channel or one that does not parse is ignored with a warning), and
	// after each delivery is done (forwarded, saved, handled) it stores the
	// watermark, the id of the latest delivery that it and everything read
	// before it are done, with the ids done after it (see the package
	// documentation, "Resuming after a restart"). The file is replaced
	// atomically (a synced temporary file renamed over it) and its
	// directory is created when missing. Nothing is stored for a relay
	// whose ids are not durable (smee.io).
	StateFile string
	// Secret, when not empty, verifies every delivery: a delivery whose
	// signature (GitHub's X-Hub-Signature-256, or another sender's: see
	// Provider) does not match the exact body under Secret is never
	// dispatched nor forwarded. When empty (and SchemeSecrets too),
	// deliveries are passed on unverified.
	Secret string
	// SchemeSecrets are the secrets of one sender's scheme, tried in order
	// instead of Secret for its deliveries (a channel several senders post
	// to; a secret being rotated: the new one and the old one).
	SchemeSecrets map[provider.Scheme][]string
	// Provider is the scheme every delivery is checked under; empty
	// detects it from each delivery's headers (provider.Detect). Its
	// event names come from it too: X-Gitea-Event, a Stripe payload's
	// type. Tolerance bounds how old a signed timestamp may be (Standard
	// Webhooks, Stripe, Slack; zero: 5 minutes; negative: no check).
	Provider  provider.Scheme
	Tolerance time.Duration

	// Handlers receive every verified delivery whose body is a JSON object
	// (or a form-encoded "payload=" holding one): a [*webhooks.Webhooks], a
	// [*webhooks.Emitter] (with [RegisterPlugins] for plugins), or any
	// value with that Receive method. If nil, no local handler runs.
	//
	// Handlers never run on an unverified delivery (no Secret nor
	// Verifier) unless AllowUnverified is set.
	Handlers interface {
		Receive(ctx context.Context, e webhooks.Event) error
	}
	// Verifier, when Secret is empty, checks signatures instead: give the
	// *webhooks.Webhooks of Handlers to verify with its secrets. A delivery
	// it does not pass is neither handled nor forwarded.
	Verifier interface {
		VerifyWithFallback(payload []byte, sig string) (bool, error)
	}
	// AllowUnverified runs Handlers on deliveries no secret could check:
	// anyone who can post to the channel then reaches them.
	AllowUnverified bool

	// Targets are where each delivery is replayed to, with its exact body,
	// method, content type and headers (see forwardRequest): each a lane of
	// its own, in order, some of them routes taking only some events (see
	// Target and the lanes' notes in lanes.go). One target is one lane too:
	// Targets: []proxy.Target{{URL: u}}. Concurrency is each lane's.
	Targets []Target
	// HTTPClient sends to the targets (each its own copy). If nil, a
	// rest.Client with a 30 s timeout per attempt, SafeRetry(true) (only
	// what surely did not reach the target's handler is retried, so that a
	// handler with side effects never runs twice for one delivery, as with
	// GitHub, which sends once: for as long as the target is down, its lane
	// holding its deliveries in order), and a transport that does not ask
	// for compression. Give one with SafeRetry(false) to give up after about
	// 20 s instead (the delivery goes to the failed folder), or with
	// &rest.RetryPolicy{} to retry 5xx answers and timeouts too; it should
	// set http.Transport.DisableCompression, or net/http adds
	// "Accept-Encoding: gzip" to deliveries whose sender sent none. Its
	// http.Client's Timeout bounds each attempt (a redirect's request
	// too, on its own), as a deadline on the request's context.
	HTTPClient *rest.Client

	// Concurrency is how many deliveries are handled at once. If zero or
	// one, deliveries are handled one at a time, in the order the relay
	// sent them; above one, order is not kept.
	Concurrency int
	// Events, when not empty, keeps only deliveries that match one of its
	// patterns; Ignore drops those that match one of its. A pattern is
	// "event", "event.action", "event.*" or "*", as a route's
	// (Target.Events). Names are checked against GitHub's (unless Provider
	// names another sender): one a typo away from a known name is refused
	// with it, one far from all is kept with a warning.
	Events, Ignore []string

	// SaveDir, if not empty, is a directory where every delivery is saved
	// as a capture file (see package capture). A failed save is reported
	// in the Result and does not stop forwarding.
	SaveDir string
	// SaveScripts, with SaveDir, also writes beside each capture file a
	// shell script that re-sends the delivery byte for byte with curl, to
	// the first target or the URL given to it (capture.WriteScript).
	SaveScripts bool
	// FailedDir is where a delivery a target did not take
	// (TargetResult.OK false: no answer or a non-2xx status, after the
	// retries), or whose signature failed, is saved as a capture file with
	// a note saying why, for `hookline replay`: in the target's subfolder
	// (its name) with several targets, in FailedDir itself with one
	// unnamed target. It is created when the first
	// such delivery is saved. If empty, SaveDir's
	// "failed" subdirectory when SaveDir is set; otherwise such deliveries
	// are only reported (Stats.Lost counts them).
	FailedDir string

	// DedupWindow bounds the memory of delivery ids the client uses to
	// skip duplicates: a delivery whose X-GitHub-Delivery (or
	// X-Request-Id) was read in the last DedupWindow, among the last
	// 10,000 ids, is skipped and reported with Result.Duplicate, unless it
	// is a redelivery (see Result.Redelivery). If zero, an hour; if
	// negative, nothing is skipped.
	DedupWindow time.Duration

	// DrainTimeout bounds how long deliveries already received may take to
	// finish once the context is done. If zero, 10 s.
	DrainTimeout time.Duration

	// OnResult, if not nil, is called once per delivery when it is done
	// (filtered deliveries included), from the worker's goroutine: with
	// Concurrency above one, calls may be concurrent.
	OnResult func(Result)
	// OnState, if not nil, is called on every connection state change.
	OnState func(StateChange)
	// OnGap, if not nil, is called when the relay reports that deliveries
	// left its history before this client read them (a burst larger than
	// the history, a long disconnection, a relay restarted without its
	// history), from the reading goroutine, at once: before the deliveries
	// after the gap are handled.
	OnGap func(Gap)
	// Logger receives warnings: malformed messages, gaps reported by the
	// relay, unknown event names, lost deliveries. Without OnResult it also
	// gets, at WARN, every delivery whose signature failed or that the
	// target did not take, so that an embedding program sees failures. If
	// nil, slog.Default().
	Logger *slog.Logger

	// Test seams (export_test.go): the transport (nil: an
	// sse.HTTPTransport on RelayClient), the reconnect loop's options, and
	// the state file's pause between writes (0: stateWriteInterval).
	transport     sse.Transport
	stream        sse.Options
	stateInterval time.Duration
}

// StateChange reports one change of the subscription's state
// (Options.OnState).
type StateChange struct {
	State State  // the new state
	URL   string // the stream's URL, credentials redacted
	// Attempt counts connection attempts since the last good connection,
	// from 1.
	Attempt int
	// LastEventID is the Last-Event-ID sent (StateConnecting), if any.
	LastEventID string
	// Err is why the connection ended (StateDisconnected) or Run's
	// subscription did (StateStopped).
	Err error
	// RetryIn is the wait before the next attempt (StateDisconnected).
	RetryIn time.Duration
	// Pending is how many deliveries a hookline relay holds after
	// LastEventID (StateReady): those kept while the client was away.
	Pending int64
	// RelayLast is the id of the newest delivery a hookline relay has
	// numbered on the channel (StateReady); 0: the channel has never had
	// a delivery (a wrong URL given to the sender, often).
	RelayLast int64
}

// State is a subscription's state: its name in lower case, as a trace
// shows it.
type State string

// The subscription states, in the order a connection goes through them.
const (
	StateConnecting   State = "connecting"   // an attempt has started
	StateConnected    State = "connected"    // the relay answered with an event stream
	StateReady        State = "ready"        // a hookline relay named its newest delivery (StateChange.RelayLast) and, resumed, how many it kept (Pending); other relays do not say
	StateDisconnected State = "disconnected" // the attempt ended; the loop retries after StateChange.RetryIn
	StateStopped      State = "stopped"      // Run's subscription ended; StateChange.Err says why
)

// stateChangeOf is sc as Options.OnState receives it.
func stateChangeOf(sc sse.StateChange) StateChange {
	return StateChange{State: State(sc.State.String()), URL: sc.URL, Attempt: sc.Attempt, LastEventID: sc.LastEventID, Err: sc.Err, RetryIn: sc.RetryIn, Pending: sc.Pending, RelayLast: sc.RelayLast}
}

// ErrPermanent is wrapped by Run's error when the relay refuses the channel
// for good (a 404, say): reconnecting cannot fix it.
var ErrPermanent = sse.ErrPermanent
