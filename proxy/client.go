package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/jsonscan"
	"github.com/hookline/hookline/internal/loglimit"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/wire"
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
	// ErrInvalidTarget reports a target URL that cannot be forwarded to.
	ErrInvalidTarget = errors.New("invalid target URL")
	// ErrInvalidOptions reports other unusable Options.
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
	// Provider) does not match the exact body under Secret or one of
	// AdditionalSecrets is never dispatched nor forwarded. When empty (and
	// SchemeSecrets too), deliveries are passed on unverified.
	Secret            string
	AdditionalSecrets []string
	// SchemeSecrets are the secrets of one sender's scheme, tried instead
	// of Secret for its deliveries (a channel several senders post to).
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
	// NoQuery drops the delivery's query string instead of adding it to
	// the target's.
	NoQuery bool
	// ResignSecret, if not empty, replaces the delivery's signature with
	// one made with this secret, for targets that check a different
	// secret than GitHub's.
	ResignSecret string
	// TargetHeader is set on every request to a target, replacing the
	// delivery's headers of the same names (see forwardOptions.Header).
	// Credentials here are never saved nor printed by hookline.
	TargetHeader http.Header
	// HTTPClient sends to the targets. If nil, a rest.Client with TargetTimeout
	// and Retry whose transport does not ask for compression. One given
	// here should set http.Transport.DisableCompression too, or net/http
	// adds "Accept-Encoding: gzip" to deliveries whose sender sent none.
	HTTPClient *rest.Client
	// TargetTimeout bounds one attempt to a target. If zero,
	// 30 s. Ignored when HTTPClient is set.
	TargetTimeout time.Duration
	// Retry says which failed requests to a target are sent again. If
	// nil, LaneRetry(): only what surely did not reach the target's handler
	// (see retryUnsent), so that a handler with side effects never runs
	// twice for one delivery, as with GitHub, which sends once, for as long
	// as the target is down, its lane holding its deliveries in order.
	// SafeRetry() gives up after about 20 s instead (the delivery goes to
	// the failed folder); &rest.RetryPolicy{} retries 5xx answers and
	// timeouts too. Ignored when HTTPClient is set.
	Retry *rest.RetryPolicy

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

	// DedupWindow and DedupSize bound the memory of delivery ids the
	// client uses to skip duplicates: a delivery whose X-GitHub-Delivery
	// (or X-Request-Id) was read in the last DedupWindow, among the last
	// DedupSize ids, is skipped and reported with Result.Duplicate, unless
	// it is a redelivery (see Result.Redelivery). If zero,
	// defaultDedupWindow (1 hour) and defaultDedupSize (10,000); if
	// either is negative, nothing is skipped.
	DedupWindow time.Duration
	DedupSize   int
	// Source is recorded in capture files as where deliveries came from.
	// If empty, the channel URL with credentials removed.
	Source string

	// DrainTimeout bounds how long deliveries already received may take to
	// finish once the context is done. If zero, 10 s.
	DrainTimeout time.Duration
	// QueueSize bounds the deliveries waiting for a worker. If zero,
	// 256.
	QueueSize int

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
	// sse.HTTPTransport on RelayClient) and the reconnect loop's options.
	transport sse.Transport
	stream    sse.Options
}

// StateChange reports one change of the subscription's state; State is
// the new state (see the State constants).
type StateChange = sse.StateChange

// State is a subscription's state.
type State = sse.State

// The subscription states, in the order a connection goes through them.
const (
	StateConnecting   = sse.StateConnecting   // an attempt has started
	StateConnected    = sse.StateConnected    // the relay answered with an event stream
	StateReady        = sse.StateReady        // a hookline relay said how many deliveries it kept (StateChange.Pending)
	StateDisconnected = sse.StateDisconnected // the attempt ended; the loop retries after StateChange.RetryIn
	StateStopped      = sse.StateStopped      // Run's subscription ended; StateChange.Err says why
)

// ErrPermanent is wrapped by Run's error when the relay refuses the channel
// for good (a 404, say): reconnecting cannot fix it.
var ErrPermanent = sse.ErrPermanent

// Verification is the outcome of checking a delivery's signature.
type Verification string

// The verification outcomes.
const (
	VerificationPassed  Verification = "verified"   // the signature matches
	VerificationFailed  Verification = "failed"     // it does not, or is missing
	VerificationSkipped Verification = "unverified" // no secret was given
)

// Result is what happened to one delivery.
type Result struct {
	Delivery *delivery.Delivery
	// Received is when the client read the delivery from the stream.
	Received time.Time
	// Action, Repository and Sender are read from the payload for the
	// trace: the top-level "action", "repository.full_name" and
	// "sender.login"; empty when absent.
	Action, Repository, Sender string

	// Filtered is true when Events or Ignore excluded the delivery; nothing
	// else was done with it.
	Filtered bool
	// Duplicate is true when the delivery repeats one already read (same
	// delivery id within the dedup window, or an event id the state file
	// lists as done): nothing else was done with it.
	Duplicate bool
	// Redelivery is true when the delivery id was seen before but the
	// relay sent it as a new event (a deliberate redelivery): it was
	// handled as usual.
	Redelivery bool
	// Waited is how long the delivery waited, once read from the stream,
	// for the deliveries before it (in order, behind a slow target).
	Waited time.Duration

	Verification Verification
	// VerifyNote explains a failed verification (or warns about a legacy
	// SHA-1 signature).
	VerifyNote string
	// Scheme is the sender's signature scheme that was checked (or whose
	// headers the delivery carries); empty when it carries none.
	Scheme provider.Scheme

	// Handlers lists the handlers that reported themselves (plugins), in
	// name order; HandlerErr is Handlers.Receive's error (an
	// *webhooks.AggregateError when handlers failed), nil when all passed
	// or none ran.
	Handlers   []HandlerResult
	HandlerErr error

	// Targets are the forwarding outcomes, one per target the routes
	// chose, in Options.Targets' order; none when there is no target or
	// the delivery was not forwarded. Unrouted is true when no route took
	// the delivery and there is no default target.
	Targets  []*TargetResult
	Unrouted bool

	// Saved is the capture file written; SaveErr why saving failed.
	Saved   string
	SaveErr error

	// FailedFile is the capture file written in FailedDir for a delivery
	// whose signature failed (its Note says so; a target's failures are
	// in its TargetResult.FailedFile); FailedErr why that write failed.
	// Both are empty otherwise, or when there is no FailedDir.
	FailedFile string
	FailedErr  error
}

// OK reports whether the delivery was handled without any failure.
func (r Result) OK() bool {
	for _, t := range r.Targets {
		if !t.Skipped && !t.OK() {
			return false
		}
	}
	return r.Filtered || r.Duplicate || (r.Verification != VerificationFailed && r.HandlerErr == nil && r.SaveErr == nil)
}

// Lost reports whether the target did not take the delivery and no capture
// file keeps it for a replay (no FailedDir, or writing there failed). The
// relay may still have it.
func (r Result) Lost() bool {
	for _, t := range r.Targets {
		if !t.Skipped && !t.OK() && t.FailedFile == "" && r.Saved == "" {
			return true
		}
	}
	return false
}

// TargetResult is the outcome of forwarding one delivery.
type TargetResult struct {
	Name     string        // the target's name (Target.Name, TargetNames); "" for one unnamed target
	URL      string        // the URL the delivery was sent to, credentials redacted
	Status   int           // the final HTTP status; 0 when none came back
	Duration time.Duration // from the first attempt to the final answer, its body read
	Err      error         // transport failure (after retries), if any
	Body     []byte        // the first bytes of the response body (up to MaxAnswerBody)
	Header   http.Header   // the response headers
	// Interrupted: the run ended (Stop, the end of the drain, Replay's
	// context) while the delivery was in flight, or before its turn in the
	// target's lane: then it was not sent (no Attempts; counted neither
	// forwarded nor failed, and kept in the failed folder). Err says which.
	Interrupted bool
	// Attempts are the requests made, retries included, in order; the
	// last one's answer is Status, Header and Body.
	Attempts []Attempt
	// Skipped: a state file says this target had the delivery before a
	// restart; it was not sent again (Options.Targets).
	Skipped bool
	// FailedFile and FailedErr are the target's capture file in the
	// failed folder (see Options.FailedDir).
	FailedFile string
	FailedErr  error
}

// MaxAnswerBody is how much of the target's answer body a TargetResult
// keeps; the rest is read and dropped.
const MaxAnswerBody = 64 << 10

// Attempt is one request to the target: the first, or a retry.
type Attempt struct {
	Status    int           // the answer's status; 0 when none came
	Err       error         // why no answer came, credentials redacted
	FirstByte time.Duration // from the request's start to the answer's first byte
	Duration  time.Duration // from the request's start to its end (for the last, its body read)
	// Header and Body are the attempt's answer: the body's first bytes (up
	// to MaxAnswerBody) that were read, for an attempt that was retried
	// what the retry drained of it. The last attempt's are
	// TargetResult.Header and Body.
	Header http.Header
	Body   []byte
}

// Summary says in a few words how the target answered: "404 Not Found",
// "no answer (interrupted)", "no answer: <error>".
func (t *TargetResult) Summary() string {
	switch {
	case t.Interrupted:
		return "no answer (interrupted)"
	case t.Err != nil:
		return "no answer: " + t.Err.Error()
	}
	return strconv.Itoa(t.Status) + " " + http.StatusText(t.Status)
}

// GitHubWouldFail reports whether GitHub would record this answer as a
// failed delivery: a status other than 2xx, no answer, or an answer that
// took longer than GitHubTimeout (GitHub stops waiting then, whatever the
// handler goes on to answer).
func (t *TargetResult) GitHubWouldFail() bool { return !t.OK() || t.Duration > GitHubTimeout }

// OK reports whether the target answered 2xx. A delivery it did not take
// is kept in the failed folder: a 404 from a wrong path is fixed by
// replaying the same bytes to the right URL, a 5xx by replaying once the
// target is back.
func (t *TargetResult) OK() bool { return t.Err == nil && t.Status >= 200 && t.Status < 300 }

// Stats count what a Client did. All counts are deliveries.
type Stats struct {
	Received     int64 // deliveries read from the relay
	Filtered     int64 // excluded by Events/Ignore
	Verified     int64 // signature matched
	VerifyFailed int64 // signature did not match: never passed on
	Unverified   int64 // no secret to check with
	HandlerFails int64 // a local handler failed
	Forwarded    int64 // the target answered 2xx
	TargetFails  int64 // the target answered non-2xx or could not be reached
	GitHubFailed int64 // answers GitHub would record as failed (TargetResult.GitHubWouldFail)
	Slow         int64 // 2xx answers that took longer than GitHubTimeout (counted in GitHubFailed too)
	Saved        int64 // capture files written
	SaveFails    int64 // capture files that could not be written
	Malformed    int64 // relay messages that could not be read
	Gaps         int64 // gap warnings from the relay
	GapLost      int64 // deliveries those gaps lost, where the relay said how many (Gap.Count)
	Duplicates   int64 // skipped as duplicates (Result.Duplicate)
	Redeliveries int64 // repeated delivery ids passed on as redeliveries
	FailedSaved  int64 // deliveries the target did not take, saved in FailedDir
	Lost         int64 // deliveries the target did not take and nothing saved (Result.Lost)
	StateFails   int64 // failed writes of the state file
	InFlight     int64 // deliveries being handled now (not a count of the past)
	Unrouted     int64 // no route took them and there is no default target (Options.Targets)
	// Targets count each target's deliveries, by name (Options.Targets).
	Targets map[string]TargetStats
}

// Client subscribes to a relay channel and handles every delivery:
// verification, local handlers, forwarding, saving. Create it with New and
// start it with Run; it is used once.
type Client struct {
	opts      Options
	lanes     []*lane                    // Options.Targets
	laneSkip  map[string]map[string]bool // event id → lanes a state file says had it
	lanesBusy sync.WaitGroup             // deliveries in lanes
	filter    filter
	logger    *slog.Logger
	source    string
	streamURL string

	failedDir string
	dedup     *dedup
	verify    verifier
	state     *checkpoint
	skip      map[string]bool // event ids a state file lists as done
	seq       uint64          // deliveries read so far (the reading goroutine's)
	stateWarn atomic.Bool     // a state write failed and was reported
	// writeCapture saves a capture file; tests replace it to inject errors.
	writeCapture func(dir string, d capture.File) (string, error)

	stats struct {
		received, filtered, verified, verifyFailed, unverified, handlerFails,
		forwarded, targetFails, githubFailed, slow, saved, saveFails, malformed, gaps, gapLost,
		duplicates, redeliveries, failedSaved, lost, stateFails, inFlight, unrouted atomic.Int64
	}
	warnings loglimit.Limit                     // for malformed messages: warnBurst a minute
	loops    loopGuard                          // deliveries forwarded lately, to see them come back
	stop     atomic.Pointer[context.CancelFunc] // ends Run's work (Stop)
}

// item is a delivery on its way to a worker.
type item struct {
	d          *delivery.Delivery
	read       time.Time // when it was read from the stream
	seq        uint64
	durable    bool // its event id may be stored (sse.Event.Durable)
	duplicate  bool
	redelivery bool
	pre        *prepared // nil: process prepares it
}

// New checks opts and returns a Client. Errors wrap ErrInvalidTarget or
// ErrInvalidOptions and say what to change.
func New(opts Options) (*Client, error) {
	if u, token := wire.SplitToken(opts.URL); token != "" {
		opts.URL = u
		if opts.ReadToken == "" {
			opts.ReadToken = token
		}
	}
	c := &Client{opts: opts, logger: opts.Logger, writeCapture: capture.Write,
		warnings: loglimit.Limit{Burst: warnBurst, Window: time.Minute}}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	var err error
	if opts.URL != "" {
		if c.streamURL, err = sse.StreamURL(opts.URL, opts.Format); err != nil {
			return nil, fmt.Errorf("%w: relay URL: %v", ErrInvalidOptions, err)
		}
	}
	c.source = opts.Source
	if c.source == "" && opts.URL != "" {
		c.source = httpx.RedactURL(opts.URL)
	}
	for i, s := range opts.AdditionalSecrets {
		if s == "" {
			return nil, fmt.Errorf("%w: AdditionalSecrets[%d] is empty", ErrInvalidOptions, i)
		}
	}
	if opts.LastEventID != "" && !sse.UsableEventID(opts.LastEventID) {
		return nil, fmt.Errorf("%w: LastEventID must be at most %d bytes with no control characters", ErrInvalidOptions, sse.MaxEventIDLen)
	}
	if opts.Concurrency < 0 {
		return nil, fmt.Errorf("%w: concurrency %d is negative", ErrInvalidOptions, opts.Concurrency)
	}
	if opts.Handlers != nil && !opts.AllowUnverified && opts.Verifier == nil && opts.Secret == "" && len(opts.SchemeSecrets) == 0 {
		return nil, fmt.Errorf("%w: Handlers run only on verified deliveries, and nothing verifies them: set Secret (or Verifier: the *webhooks.Webhooks of Handlers), or AllowUnverified to run them on any delivery", ErrInvalidOptions)
	}
	if c.filter, err = c.newFilter(opts.Events, opts.Ignore); err != nil {
		return nil, err
	}
	c.failedDir = opts.FailedDir
	if c.failedDir == "" && opts.SaveDir != "" {
		c.failedDir = filepath.Join(opts.SaveDir, "failed")
	}
	c.dedup = newDedup(opts.DedupWindow, opts.DedupSize)
	c.verify = newVerifier(opts)
	if err := c.loadState(); err != nil {
		return nil, err
	}
	if err := c.newLanes(c.targetClient); err != nil {
		return nil, err
	}
	return c, nil
}

// targetClient is the client that sends to a target: Options.HTTPClient,
// or one with TargetTimeout and Retry (one per target: each its own
// connections).
func (c *Client) targetClient() *rest.Client {
	if c.opts.HTTPClient != nil {
		return c.opts.HTTPClient
	}
	timeout := c.opts.TargetTimeout
	if timeout <= 0 {
		timeout = defaultTargetTimeout
	}
	retry := c.opts.Retry
	if retry == nil {
		retry = LaneRetry()
	}
	return &rest.Client{HTTPClient: &http.Client{Timeout: timeout, Transport: httpx.NewTransport()}, Retry: retry}
}

// SafeRetry returns the retry policy for a target whose handler must not
// run twice for one delivery: retryUnsent with 8 attempts, which waits for
// a target that is not up yet for about 20 s at the most (backoff from
// 500 ms to 5 s, with jitter) before the delivery goes to the failed
// folder.
func SafeRetry() *rest.RetryPolicy {
	return &rest.RetryPolicy{MaxAttempts: 8, BaseDelay: 500 * time.Millisecond, MaxDelay: 5 * time.Second, Retryable: retryUnsent}
}

// retryUnsent is a rest.RetryPolicy.Retryable that retries only what
// surely did not reach the target's handler: a connection that could not
// be made (refused: the server is not up yet, or restarting; an unknown
// host; not a certificate error, which waiting does not fix), and a 429 or
// 503 answer with Retry-After (the server asks to be asked again later, and
// did not run the request). A 5xx without Retry-After, a timeout, or a
// connection cut after the request was sent is not retried: the handler may
// have run. (A request on a kept-alive connection that the server had
// closed is resent by net/http itself, before anything is written.)
func retryUnsent(resp *http.Response, err error) bool {
	if err != nil {
		var op *net.OpError
		return httpx.CertError(err) == nil && errors.As(err, &op) && op.Op == "dial"
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return resp.Header.Get("Retry-After") != ""
	}
	return false
}

// parseTarget checks a target URL (see httpx.ParseHTTPURL).
func parseTarget(s string) (*url.URL, error) {
	u, err := httpx.ParseHTTPURL(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidTarget, err)
	}
	return u, nil
}

// Stats returns the counts so far. It is safe to call while Run runs.
func (c *Client) Stats() Stats {
	s := &c.stats
	st := Stats{
		Received: s.received.Load(), Filtered: s.filtered.Load(), Verified: s.verified.Load(),
		VerifyFailed: s.verifyFailed.Load(), Unverified: s.unverified.Load(),
		HandlerFails: s.handlerFails.Load(), Forwarded: s.forwarded.Load(),
		TargetFails: s.targetFails.Load(), GitHubFailed: s.githubFailed.Load(), Slow: s.slow.Load(), Saved: s.saved.Load(), SaveFails: s.saveFails.Load(),
		Malformed: s.malformed.Load(), Gaps: s.gaps.Load(), GapLost: s.gapLost.Load(),
		Duplicates: s.duplicates.Load(), Redeliveries: s.redeliveries.Load(),
		FailedSaved: s.failedSaved.Load(), Lost: s.lost.Load(), StateFails: s.stateFails.Load(),
		InFlight: s.inFlight.Load(), Unrouted: s.unrouted.Load(),
	}
	if len(c.lanes) > 0 {
		st.Targets = map[string]TargetStats{}
		for _, l := range c.lanes {
			st.Targets[l.name] = TargetStats{Forwarded: l.forwarded.Load(), Failed: l.fails.Load(), Waiting: l.waiting.Load()}
		}
	}
	return st
}

// Stop cuts short the drain Run does once its context is done: deliveries
// still in flight are stopped at once (their Target says Interrupted and
// they go to the failed folder) and Run returns. Before Run, or after it,
// Stop does nothing. It is for a second Ctrl-C.
func (c *Client) Stop() {
	if stop := c.stop.Load(); stop != nil {
		(*stop)()
	}
}

// FailedDir returns the directory where deliveries the target did not take
// are saved; "" when there is none.
func (c *Client) FailedDir() string { return c.failedDir }

// Checkpoint returns the watermark: the event id of the latest delivery
// that it and every delivery read before it are done; "" before the first.
// It starts at the id resumed after. It is safe to call while Run runs.
func (c *Client) Checkpoint() string { return c.state.Mark() }

// Run subscribes and handles deliveries until ctx is done, then stops
// reading, lets deliveries already received finish (for up to
// DrainTimeout, or until Stop) and returns nil. It returns early with an
// error wrapping ErrPermanent when the relay refuses the channel for good
// (a 404, say), or ErrLoop when the target sends deliveries back to the
// channel.
func (c *Client) Run(ctx context.Context) error {
	if c.streamURL == "" {
		return fmt.Errorf("%w: no relay URL to subscribe to", ErrInvalidOptions)
	}
	qsize := c.opts.QueueSize
	if qsize <= 0 {
		qsize = defaultQueueSize
	}
	queue := make(chan item, qsize)

	// Deliveries already received finish after ctx ends, within the drain
	// timeout.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	c.stop.Store(&cancelWork)
	defer c.stop.Store(nil)
	drain := c.opts.DrainTimeout
	if drain <= 0 {
		drain = defaultDrainTimeout
	}
	stopDrainTimer := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(drain, cancelWork)
		<-work.Done()
		t.Stop()
	})
	defer stopDrainTimer()

	wg := workers(c.opts.Concurrency, queue, func(it item) { c.handle(work, it) })

	so := c.opts.stream
	if c.opts.MaxBackoff > 0 {
		so.MaxBackoff = c.opts.MaxBackoff
	}
	so.URL = c.streamURL
	so.LastEventID = c.state.Mark()
	so.OnState = c.opts.OnState
	so.Header = so.Header.Clone()
	if so.Header == nil {
		so.Header = http.Header{}
	}
	so.Header.Set(wire.StreamHeader, "1") // hookline's messages from a hookline relay; others ignore it
	if c.opts.ReadToken != "" {
		so.Header.Set("Authorization", "Bearer "+c.opts.ReadToken)
	}
	t := c.opts.transport
	if t == nil {
		t = &sse.HTTPTransport{Client: c.opts.RelayClient}
	}
	subCtx, stopSub := context.WithCancelCause(ctx)
	defer stopSub(nil)
	err := sse.Subscribe(subCtx, t, so, func(ev sse.Event) error {
		if d := c.decode(ev); d != nil {
			if n := c.loops.cameBack(d.ID, d.EventID, time.Now()); n >= loopLimit {
				err := fmt.Errorf("%w: delivery %s came back to the channel %d times within %s of being sent to the target; is the target the channel's own URL, or does it post deliveries back to it?",
					ErrLoop, d.ID, n, loopWindow)
				c.logger.Error("stopping: the target sends deliveries back to the channel", "delivery", d.ID, "event_id", d.EventID)
				stopSub(err)
				return nil
			}
			if d.Link != "" {
				switch err := c.fetchBody(ctx, d); {
				case err != nil && ctx.Err() != nil:
					c.logger.Warn("shutting down: delivery received but its body not fetched; it stays in the relay's history",
						"delivery", d.ID, "event", d.Event, "event_id", d.EventID)
					return nil
				case errors.Is(err, errBodyGone) || errors.Is(err, errMalformed):
					// The relay no longer has it, or the link cannot be
					// fetched at all: resuming would not help.
					c.keepSkipped(ev, "whose body could not be fetched", err)
					return nil
				case err != nil:
					// The stream resumes before it, and the relay sends
					// it again with a new link.
					c.logger.Warn("the body of a delivery could not be fetched; reconnecting to receive it again",
						"delivery", d.ID, "event_id", d.EventID, "err", err)
					return err
				}
			}
			it := c.classify(d, ev.Durable)
			// Prepared here, while the workers are busy with the
			// deliveries before it (in order, the one at the target).
			it.pre = c.prepare(d, it.duplicate)
			select {
			case queue <- it:
			case <-ctx.Done():
				// Read but not queued: report it rather than lose it
				// silently; the relay's history still has it.
				c.logger.Warn("shutting down: delivery received but not handled; it stays in the relay's history",
					"delivery", d.ID, "event", d.Event, "event_id", d.EventID)
			}
		}
		return nil
	})
	close(queue)
	wg.Wait()
	c.lanesBusy.Wait()
	c.state.flush()
	if cause := context.Cause(subCtx); errors.Is(cause, ErrLoop) {
		return cause
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

// A forwarding loop: the target posts what it receives to the channel the
// client reads (the target is the channel's URL, or a server that relays
// to it), and every delivery comes back as a new event with the same
// delivery id, for ever (thousands a second on loopback). A delivery id
// that comes back loopLimit times, each within loopWindow of the client
// sending it to the target, is a loop: GitHub's own redeliveries of one id
// are a person's clicks, never three within seconds of each forward.
const (
	loopWindow = 10 * time.Second
	loopLimit  = 3
)

// loopGuard remembers the deliveries sent to the target lately: at most
// loopRemember ids, the oldest forgotten first, so that every call costs
// the same however many deliveries a burst brings. It is safe for
// concurrent use.
type loopGuard struct {
	mu    sync.Mutex
	sent  map[string]*sentDelivery // by delivery id
	order []string                 // ids in the order they were first sent; order[head:] are live
	head  int
}

// loopRemember bounds the ids a loopGuard keeps: a loop sends the same
// few ids round and round, seconds apart, far fewer than this in between.
const loopRemember = 4096

// warnBurst bounds the warnings a relay's malformed messages cause, per
// minute, so that a hostile or broken relay cannot fill the terminal or a
// log (one sent 273 MB of them in 30 s).
const warnBurst = 10

type sentDelivery struct {
	at      time.Time // when it was last sent to the target
	eventID string    // the relay's event id it was sent as
	back    int       // how often it came back as a new event
}

// forwarding records that delivery id, read as event eventID, is being
// sent to the target.
func (g *loopGuard) forwarding(id, eventID string, now time.Time) {
	if id == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sent == nil {
		g.sent = map[string]*sentDelivery{}
	}
	s := g.sent[id]
	if s == nil {
		for len(g.sent) >= loopRemember {
			delete(g.sent, g.order[g.head])
			g.order[g.head] = ""
			g.head++
		}
		if g.head > loopRemember && g.head*2 > len(g.order) {
			g.order = append(g.order[:0:0], g.order[g.head:]...)
			g.head = 0
		}
		s = &sentDelivery{}
		g.sent[id] = s
		g.order = append(g.order, id)
	}
	s.at, s.eventID = now, eventID
}

// cameBack reports how many times delivery id has come back as a new
// event (not eventID, the one it was sent as) within loopWindow of being
// sent to the target; 0 when it has not.
func (g *loopGuard) cameBack(id, eventID string, now time.Time) int {
	if id == "" {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sent[id]
	if s == nil || now.Sub(s.at) >= loopWindow || s.eventID == eventID {
		return 0
	}
	s.back++
	return s.back
}

// errBodyGone is wrapped by fetchBody's error when the relay no longer has
// the body (404 or 410): only then is a delivery skipped.
var errBodyGone = errors.New("the relay no longer has the body")

// linkFetchTimeout bounds fetching one body by link, retries included: a
// relay that stalls must not stop the stream for good (25 MiB in it is
// 200 KiB/s).
const linkFetchTimeout = 2 * time.Minute

// fetchBody reads the body of a delivery the relay sent by link
// (wire.StreamHeader) into one buffer of its Content-Length, with the
// stream's HTTP client and rest's retries. The link is a reference relative
// to the stream's URL; the relay keeps the body for it until a later link
// is fetched or the stream ends.
func (c *Client) fetchBody(ctx context.Context, d *delivery.Delivery) error {
	ref, err := url.Parse(d.Link)
	if err != nil || ref.Scheme != "" || ref.Host != "" {
		return fmt.Errorf("%w: bodyLink %q is not a relative URL reference", errMalformed, d.Link)
	}
	base, err := url.Parse(c.streamURL)
	if err != nil {
		return err
	}
	hc := http.Client{}
	if c.opts.RelayClient != nil {
		hc = *c.opts.RelayClient
	}
	// The body comes from the relay itself: a redirect elsewhere (to any
	// host) is not followed.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	limit := sse.DefaultMaxEventSize
	ctx, cancel := context.WithTimeout(ctx, linkFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.ResolveReference(ref).String(), nil)
	if err != nil {
		return err
	}
	if c.opts.ReadToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.ReadToken)
	}
	resp, err := (&rest.Client{HTTPClient: &hc, Retry: &rest.RetryPolicy{}}).MakeRequest(req)
	if err != nil {
		return fmt.Errorf("fetching the body of delivery %s: %w", d.ID, redactErr(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return fmt.Errorf("fetching the body of delivery %s: the relay answered %s: %w", d.ID, resp.Status, errBodyGone)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("fetching the body of delivery %s: the relay answered %s", d.ID, resp.Status)
	case resp.ContentLength < 0 || resp.ContentLength > int64(limit):
		return fmt.Errorf("%w: fetching the body of delivery %s: %d bytes announced, not 0 to the %d an event may have", errMalformed, d.ID, resp.ContentLength, limit)
	}
	body := make([]byte, resp.ContentLength)
	if _, err := io.ReadFull(resp.Body, body); err != nil {
		return fmt.Errorf("fetching the body of delivery %s: %w", d.ID, err)
	}
	d.Body, d.Link, d.BodySource = body, "", delivery.BodyLinked
	return nil
}

// decode reads one relay event, counting and logging what is not a
// delivery. It returns nil for those.
func (c *Client) decode(ev sse.Event) *delivery.Delivery {
	d, gap, err := decodeEvent(ev)
	switch {
	case err != nil:
		c.stats.malformed.Add(1)
		if errors.Is(err, bufio.ErrTooLong) {
			c.keepSkipped(ev, "too large to receive", err)
		}
		if ok, hidden := c.warnings.Allow(time.Now()); ok {
			if hidden > 0 {
				c.logger.Warn("more relay messages that are not deliveries were skipped without a warning", "count", hidden)
			}
			c.logger.Warn("skipping a relay message that is not a delivery", "err", err)
		}
	case d != nil:
		c.stats.received.Add(1)
	case gap != nil:
		g := Gap{AfterID: gap.LastEventID, OldestID: gap.Oldest, Count: gap.Count(), Reason: gap.Reason}
		c.stats.gaps.Add(1)
		c.stats.gapLost.Add(g.Count)
		if c.opts.OnGap != nil {
			c.opts.OnGap(g)
		} else {
			c.logger.Warn(g.String(), "after_id", g.AfterID, "oldest_kept", g.OldestID)
		}
	default:
		c.logger.Debug("relay control event", "name", ev.Event)
	}
	return d
}

// Gap is what the relay reported lost: deliveries that left its history
// before this client read them.
type Gap struct {
	AfterID  string `json:"afterId"`  // the last event id the client had ("" if none)
	OldestID string `json:"oldestId"` // the oldest the relay still had, when known
	Count    int64  `json:"count"`    // how many were lost, when the relay said (a hookline relay); 0 when unknown
	Reason   string `json:"reason"`   // "expired" (the history's limits dropped them), "unknown" (the relay's history is new: it restarted), "lost" (its Redis lost data), or "" (not said)
}

// String says what the gap means, in one sentence.
func (g Gap) String() string {
	what := "deliveries"
	if g.Count > 0 {
		what = strconv.FormatInt(g.Count, 10) + " deliveries"
		if g.Count == 1 {
			what = "1 delivery"
		}
	}
	switch g.Reason {
	case "unknown":
		return "the relay restarted and its history is new: what it held after the id resumed from is gone (a relay keeps deliveries across restarts with --data-dir or Redis)"
	case "lost":
		return "the relay lost " + what + ": its Redis lost its data"
	}
	return "the relay no longer had " + what + " when this client asked: they left its history first (a burst larger than the relay's history, or a long disconnection); GitHub's deliveries can be redelivered with hookline deliveries"
}

// classify numbers a delivery in read order and decides whether it is a
// duplicate. It runs on the reading goroutine.
func (c *Client) classify(d *delivery.Delivery, durable bool) item {
	it := item{d: d, seq: c.seq, read: time.Now(), durable: durable}
	c.seq++
	if d.EventID != "" && c.skip[d.EventID] {
		delete(c.skip, d.EventID)
		it.duplicate = true
		return it
	}
	it.duplicate, it.redelivery = c.dedup.check(d.ID, d.EventID, durable, time.Now())
	return it
}

// Handle runs one delivery that did not come from the subscription (a
// capture file, say) through the same pipeline as Run's: the duplicate
// check, Events/Ignore, verification, Handlers and Target at the same
// time, SaveDir and FailedDir. It reports the Result to OnResult too, and
// returns it. It is safe for concurrent use, and needs no URL.
func (c *Client) Handle(ctx context.Context, d *delivery.Delivery) Result {
	dup, redelivery := c.dedup.check(d.ID, d.EventID, false, time.Now())
	return c.processAndReport(ctx, item{d: d, duplicate: dup, redelivery: redelivery})
}

// processAndReport runs it through the pipeline, reports the Result and
// returns it once every target is done with it.
func (c *Client) processAndReport(ctx context.Context, it item) Result {
	done := make(chan Result, 1)
	c.process(ctx, it, func(r Result) {
		c.report(r)
		done <- r
	})
	return <-done
}

// Resend runs d through the pipeline again on purpose, as Handle does but
// without the duplicate check: a replay the user asked for (the
// inspector's), reported as a redelivery. It is safe for concurrent use.
func (c *Client) Resend(ctx context.Context, d *delivery.Delivery) Result {
	return c.processAndReport(ctx, item{d: d, redelivery: true})
}

// Replay runs ds (from capture files, say) through Handle, Concurrency at
// a time (one: in order), reporting each Result to OnResult; Stats counts
// them. It returns once all are done, or, when ctx ends, once those
// started are done, with ctx's error.
func (c *Client) Replay(ctx context.Context, ds []*delivery.Delivery) error {
	queue := make(chan *delivery.Delivery)
	wg := workers(c.opts.Concurrency, queue, func(d *delivery.Delivery) {
		// The loop below may hand one more over after ctx ended (select
		// picks at random among ready cases): it is not started.
		if ctx.Err() == nil {
			// As Handle, without waiting for the targets' lanes: a slow
			// target holds back only its own lane.
			dup, redelivery := c.dedup.check(d.ID, d.EventID, false, time.Now())
			c.process(ctx, item{d: d, duplicate: dup, redelivery: redelivery}, c.report)
		}
	})
	defer c.lanesBusy.Wait()
	defer wg.Wait()
	defer close(queue)
	for _, d := range ds {
		select {
		case queue <- d:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// workers starts n goroutines (at least one) that run do on what queue
// carries until it is closed; wait on the WaitGroup.
func workers[T any](n int, queue <-chan T, do func(T)) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range max(1, n) {
		wg.Go(func() {
			for v := range queue {
				do(v)
			}
		})
	}
	return &wg
}

// handle runs one delivery read by Run, stores the checkpoint and reports
// the Result.
func (c *Client) handle(ctx context.Context, it item) {
	c.stats.inFlight.Add(1)
	waited := time.Since(it.read)
	c.process(ctx, it, func(r Result) {
		r.Waited = max(r.Waited, waited)
		c.state.finish(it.seq, it.d.EventID, it.durable)
		c.report(r)
		c.stats.inFlight.Add(-1)
	})
}

// process is the pipeline: filter, verify, handlers ∥ forward, save; then
// is given the Result, once every target is done with it (with several
// targets, after process returns: see fanOut).
func (c *Client) process(ctx context.Context, it item, then func(Result)) {
	if r, done := c.processOne(ctx, it, then); done { // a duplicate, filtered, or its signature failed
		c.behindLanes(ctx, r, then)
	}
}

// prepared is what the pipeline works out from a delivery alone, before
// the deliveries ahead of it are done: its payload and trace fields, its
// event, whether the filter keeps it, and (unless it is a duplicate or
// filtered out) its signature's check. Run prepares each delivery as it
// queues it, so that in order (Concurrency 1) the next one is ready while
// the one before is at the target.
type prepared struct {
	payload              []byte
	action, repo, sender string
	filtered             bool
	verification         Verification
	verifyNote           string
	scheme               provider.Scheme
}

// prepare works out d's prepared part. It sets d.Event when the headers
// name none (another sender's event: its header, or the payload's type).
func (c *Client) prepare(d *delivery.Delivery, duplicate bool) *prepared {
	p := &prepared{}
	payload, members := payloadJSON(d)
	p.payload = payload
	p.action, p.repo, p.sender = summarize(members)
	if d.Event == "" {
		scheme := c.verify.scheme
		if scheme == "" {
			scheme = provider.Detect(d.Headers)
		}
		d.Event = provider.Event(scheme, d.Headers, d.Body)
	}
	if duplicate {
		return p
	}
	if !c.filter.keep(d.Event, p.action) {
		p.filtered = true
		return p
	}
	p.verification, p.verifyNote, p.scheme = c.verify.check(d)
	if v := c.opts.Verifier; v != nil && p.verification == VerificationSkipped {
		p.verification, p.verifyNote = VerificationPassed, ""
		if ok, err := v.VerifyWithFallback(d.Body, d.Headers.Get("X-Hub-Signature-256")); !ok || err != nil {
			p.verification, p.verifyNote = VerificationFailed, "the signature does not match the Verifier's secrets"
		}
	}
	return p
}

// processOne is the pipeline's first part: the duplicate check, the
// filter, the signature's check, the save; a delivery that goes on is
// handed to its targets' lanes and its handlers (fanOut), which give then
// its Result when they are done, and done is false. A delivery that stops
// here is done: its Result is returned.
func (c *Client) processOne(ctx context.Context, it item, then func(Result)) (r Result, done bool) {
	d, p := it.d, it.pre
	if p == nil {
		p = c.prepare(d, it.duplicate)
	}
	r = Result{Delivery: d, Received: time.Now(), Duplicate: it.duplicate, Redelivery: it.redelivery}
	if d.BodySource == delivery.BodyCapture && !d.ReceivedAt.IsZero() {
		r.Received = d.ReceivedAt
	}
	r.Action, r.Repository, r.Sender = p.action, p.repo, p.sender
	switch {
	case r.Duplicate:
		c.stats.duplicates.Add(1)
		return r, true
	case r.Redelivery:
		c.stats.redeliveries.Add(1)
	}
	if p.filtered {
		r.Filtered = true
		c.stats.filtered.Add(1)
		return r, true
	}
	r.Verification, r.VerifyNote, r.Scheme = p.verification, p.verifyNote, p.scheme
	switch r.Verification {
	case VerificationPassed:
		c.stats.verified.Add(1)
	case VerificationFailed:
		c.stats.verifyFailed.Add(1)
	default:
		c.stats.unverified.Add(1)
	}
	if r.Verification == VerificationFailed {
		c.keepRefused(&r)
		return r, true
	}
	if c.opts.SaveDir != "" {
		c.save(&r, c.captureOf(d, r))
	}
	var handlers func() ([]HandlerResult, error)
	if c.opts.Handlers != nil && (r.Verification == VerificationPassed || c.opts.AllowUnverified) {
		handlers = func() ([]HandlerResult, error) { return c.dispatch(ctx, d, p.payload) }
	}
	c.fanOut(ctx, d, r, it, handlers, then)
	return r, false
}

// keepRefused saves a delivery whose signature failed (r) with SaveDir,
// and in the failed folder with a note saying why, for a replay with the
// right secret.
func (c *Client) keepRefused(r *Result) {
	if c.opts.SaveDir == "" && c.failedDir == "" {
		return
	}
	cd := c.captureOf(r.Delivery, *r)
	if c.opts.SaveDir != "" {
		c.save(r, cd)
	}
	if c.failedDir == "" {
		return
	}
	cd.Note = "not passed on: " + r.VerifyNote + " (replay it with the right secret)"
	if r.FailedFile, r.FailedErr = c.saveFailed(c.failedDir, cd); r.FailedErr != nil {
		c.stats.saveFails.Add(1)
	} else {
		c.stats.failedSaved.Add(1)
	}
}

// countTarget counts one target's outcome in Stats.
func (c *Client) countTarget(t *TargetResult) {
	if t.Err == errNotSent {
		return // not sent: neither forwarded nor failed
	}
	if t.OK() {
		c.stats.forwarded.Add(1)
	} else {
		c.stats.targetFails.Add(1)
	}
	if t.GitHubWouldFail() && !t.Interrupted {
		c.stats.githubFailed.Add(1)
		if t.OK() {
			c.stats.slow.Add(1)
		}
	}
}

// captureOf is d as a capture file, with what r read of it.
func (c *Client) captureOf(d *delivery.Delivery, r Result) capture.File {
	cd := capture.File{Delivery: *d, Action: r.Action, Source: c.source}
	cd.Event, cd.ReceivedAt, cd.Headers = captureEvent(d), r.Received, saveableHeader(d.Headers)
	return cd
}

// save writes cd to SaveDir (and its script, with SaveScripts), into r.
func (c *Client) save(r *Result, cd capture.File) {
	r.Saved, r.SaveErr = c.writeCapture(c.opts.SaveDir, cd)
	if r.SaveErr == nil && c.opts.SaveScripts {
		target := ""
		if len(c.opts.Targets) > 0 {
			target = c.opts.Targets[0].URL
		}
		_, r.SaveErr = capture.WriteScript(r.Saved, &cd.Delivery, target)
	}
	if r.SaveErr != nil {
		c.stats.saveFails.Add(1)
	} else {
		c.stats.saved.Add(1)
	}
}

// keepSkipped leaves a note in the failed folder for a delivery that could
// not be received (why: "too large to receive", or "whose body could not
// be fetched"): the client goes on past it (its id counts as read, or every
// reconnect would receive it again), so the note is what tells the user
// that a delivery the relay acknowledged did not arrive, and how to get it.
func (c *Client) keepSkipped(ev sse.Event, why string, cause error) {
	if c.failedDir == "" {
		c.stats.lost.Add(1)
		c.logger.Error("a delivery "+why+" was skipped; the relay still has it", "event_id", ev.ID, "err", cause)
		return
	}
	// Named as a capture file would be, but .txt: replay reads only .json.
	name := strings.TrimSuffix(capture.FileName(&delivery.Delivery{ReceivedAt: time.Now(), Event: "skipped", ID: ev.ID}), ".json") + ".txt"
	text := fmt.Sprintf("hookline skipped event %q of %s: %v.\nThe relay still has it while its history keeps it: resume before that id (--last-event-id; for an event over the size limit, raise the limit first), or on a hookline relay POST %s/redeliver/%s.\n",
		ev.ID, c.source, cause, c.source, ev.ID)
	path := filepath.Join(c.failedDir, name)
	err := os.MkdirAll(c.failedDir, 0o700)
	if err == nil {
		err = os.WriteFile(path, []byte(text), 0o600)
	}
	if err != nil {
		c.stats.lost.Add(1)
		c.logger.Error("a delivery "+why+" was skipped, and the note about it could not be written", "event_id", ev.ID, "err", err)
		return
	}
	c.logger.Error("a delivery "+why+" was skipped; a note about it is in the failed folder", "event_id", ev.ID, "file", path)
}

// saveFailed writes a delivery a target did not take to dir, the failed
// folder (or a target's subfolder of it), creating dir (owner-only) the
// first time.
func (c *Client) saveFailed(dir string, cd capture.File) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("saving delivery %s for a replay: %w", cd.ID, err)
	}
	path, err := c.writeCapture(dir, cd)
	if err == nil {
		// The file is synced by capture.Write; sync its name too, before
		// the state file moves past the delivery: this copy is the only one.
		syncDir(dir)
	}
	return path, err
}

// loadState reads StateFile, if any, and sets the resume point: the
// LastEventID option wins over the file.
func (c *Client) loadState() error {
	path := c.opts.StateFile
	c.state = newCheckpoint(path, c.streamURL, time.Now, c.stateWriteErr)
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("%w: state file: %v", ErrInvalidOptions, err)
		}
		doc, err := readState(path, c.streamURL)
		switch {
		case err != nil && c.opts.LastEventID == "":
			c.logger.Warn("ignoring the state file; starting from new deliveries", "err", err)
		case err == nil && c.opts.LastEventID == "" && (doc.LastEventID != "" || len(doc.LanesDone) > 0):
			// With lanes_done alone (no delivery done by every target
			// yet), the stream starts from the relay's history as before.
			if doc.LastEventID != "" {
				c.state.start(doc.LastEventID)
			}
			c.skip = map[string]bool{}
			for _, id := range doc.DoneAfter {
				c.skip[id] = true
			}
			c.laneSkip = map[string]map[string]bool{}
			for id, names := range doc.LanesDone {
				c.laneSkip[id] = map[string]bool{}
				for _, n := range names {
					c.laneSkip[id][n] = true
				}
			}
		}
	}
	if c.opts.LastEventID != "" {
		c.state.start(c.opts.LastEventID)
	}
	return nil
}

// stateWriteErr reports a failed write of the state file once, until a
// write succeeds again.
func (c *Client) stateWriteErr(err error) {
	if err == nil {
		if c.stateWarn.CompareAndSwap(true, false) {
			c.logger.Warn("the state file is written again", "file", c.opts.StateFile)
		}
		return
	}
	c.stats.stateFails.Add(1)
	if c.stateWarn.CompareAndSwap(false, true) {
		c.logger.Warn("cannot store the position in the channel; a restart may receive deliveries again", "err", err)
	}
}

// captureEvent is the event name recorded in a capture file, which requires
// one.
func captureEvent(d *delivery.Delivery) string {
	if d.Event == "" {
		return "unknown"
	}
	return d.Event
}

func (c *Client) report(r Result) {
	if c.opts.OnResult != nil {
		c.opts.OnResult(r)
		return
	}
	d := r.Delivery
	switch {
	case r.Verification == VerificationFailed:
		c.logger.Warn("delivery not passed on: "+r.VerifyNote, "delivery", d.ID, "event", d.Event, "event_id", d.EventID)
	}
	for _, t := range r.Targets {
		if !t.Skipped && !t.OK() {
			c.logger.Warn("the target did not take a delivery: "+t.Summary(), "delivery", d.ID, "event", d.Event, "event_id", d.EventID, "target", t.Name, "url", t.URL)
		}
	}
}

// dispatch runs the local handlers for d.
func (c *Client) dispatch(ctx context.Context, d *delivery.Delivery, payload []byte) ([]HandlerResult, error) {
	if payload == nil {
		return nil, fmt.Errorf("handlers not run: the body is not a JSON object (Content-Type %q)", d.ContentType())
	}
	ctx, log := withHandlerLog(ctx)
	err := c.opts.Handlers.Receive(ctx, webhooks.Event{ID: d.ID, Name: d.Event, Payload: payload, Header: d.Headers})
	results := log.list()
	sort.SliceStable(results, func(i, j int) bool { return results[i].Name < results[j].Name })
	return results, err
}

// payloadJSON returns the delivery's JSON payload, split into its members:
// the body when it is a JSON object, or the "payload" field of a
// form-encoded body (GitHub's application/x-www-form-urlencoded content
// type); nil otherwise. It is the one scan of the body on the way to the
// target: validity and the trace's fields come from it. (Handlers scan the
// payload once more: webhooks.Receive takes bytes, as octokit's does.)
func payloadJSON(d *delivery.Delivery) ([]byte, []jsonscan.Member) {
	p := d.Body
	if mt, _, _ := mime.ParseMediaType(d.ContentType()); mt == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(d.Body))
		if err != nil {
			return nil, nil
		}
		p = []byte(form.Get("payload"))
	}
	if members, ok := jsonscan.Object(p); ok {
		return p, members
	}
	return nil, nil
}

// summarize reads the trace fields from a payload's members. As in
// JSON.parse, the last of duplicate keys wins.
func summarize(members []jsonscan.Member) (action, repo, sender string) {
	for _, m := range members {
		switch {
		case m.Is("action"):
			action = stringValue(m.Value)
		case m.Is("repository"):
			repo = memberString(m.Value, "full_name")
		case m.Is("sender"):
			sender = memberString(m.Value, "login")
		}
	}
	return action, repo, sender
}

// memberString returns the string value of name in the JSON object obj, ""
// when obj is not an object or the value is not a string.
func memberString(obj []byte, name string) string {
	v, _ := jsonscan.StringMember(obj, name)
	return string(v)
}

// stringValue decodes a JSON string literal, "" for any other value.
func stringValue(v []byte) string {
	s, _ := jsonscan.String(v)
	return string(s)
}

// saveableHeader returns a copy of h without the headers that carry
// credentials (httpx.IsCredentialHeader: Authorization, Cookie...), which hookline
// never writes to disk: a capture file is shared and committed more often
// than people think.
func saveableHeader(h http.Header) http.Header {
	out := h.Clone()
	for k := range out {
		if httpx.IsCredentialHeader(k) {
			delete(out, k)
		}
	}
	return out
}
