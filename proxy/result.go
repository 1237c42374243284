package proxy

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/webhooks/provider"
)

// HandlerResult is the outcome of one local handler (a plugin, or any Go
// handler that reports itself) for one delivery.
type HandlerResult struct {
	Name     string        // the handler's name, as shown in the trace
	Err      error         // nil when it succeeded (a plugin's: its exit status and last line)
	Duration time.Duration // how long it ran
	Output   string        // a plugin's output, stdout and stderr as they came: the last 4 KiB
}

type handlerLogKey struct{}

// handlerLog collects the HandlerResults reported during one delivery.
type handlerLog struct {
	mu      sync.Mutex
	results []HandlerResult
}

// withHandlerLog returns a context whose handlers' reports are collected in
// the returned log.
func withHandlerLog(ctx context.Context) (context.Context, *handlerLog) {
	l := &handlerLog{}
	return context.WithValue(ctx, handlerLogKey{}, l), l
}

// reportHandler records r in the Result of the delivery being handled with
// ctx, so the trace can show it. Plugins registered with RegisterPlugins
// report themselves; a Go handler may call it too. Outside a Client's
// delivery it does nothing. It is safe for concurrent use.
func reportHandler(ctx context.Context, r HandlerResult) {
	l, ok := ctx.Value(handlerLogKey{}).(*handlerLog)
	if !ok {
		return
	}
	l.mu.Lock()
	l.results = append(l.results, r)
	l.mu.Unlock()
}

// list returns the results so far.
func (l *handlerLog) list() []HandlerResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]HandlerResult(nil), l.results...)
}

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
	// "sender.login"; empty when absent. Branch is the branch the
	// delivery is about (a push's ref, a pull request's head...), which
	// an event pattern may name ("push@main").
	Action, Repository, Sender, Branch string

	// Filtered is true when Events or Ignore excluded the delivery; nothing
	// else was done with it. FilteredBy is the rule that did: the Ignore
	// pattern it matched ("push", "issues.closed", "*"), or empty when
	// Events has patterns and it matched none of them.
	Filtered   bool
	FilteredBy string
	// Handshake is set when the request is not a delivery but a sender's
	// check of the URL (webhooks/provider.HandshakeOf): its kind ("slack
	// url_verification", "hub.challenge"). It is not passed on: the relay
	// answers it, and HandshakeAnswered says whether the relay did (the
	// hookline relay marks the ones it answered: wire.HandshakeHeader).
	Handshake         string
	HandshakeAnswered bool
	// Duplicate is true when the delivery repeats one already read (same
	// delivery id within the dedup window, or an event id the state file
	// lists as done): nothing else was done with it. DoneBefore tells the
	// second case: the state file (Options.StateFile) had it.
	Duplicate  bool
	DoneBefore bool
	// Redelivery is true when the delivery id was seen before but the
	// relay sent it as a new event (a deliberate redelivery): it was
	// handled as usual.
	Redelivery bool
	// Replay is true for a delivery given to Client.Handle (the
	// inspector's replay of one), not read from the relay.
	Replay bool
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
	Handshakes   int64 // senders' checks of the URL (Result.Handshake), not passed on
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
	Redeliveries int64 // repeated delivery ids from the relay, passed on as redeliveries
	Replayed     int64 // deliveries given to Client.Handle (the inspector's replays), not read from the relay
	FailedSaved  int64 // deliveries the target did not take, saved in FailedDir
	Lost         int64 // deliveries the target did not take and nothing saved (Result.Lost)
	StateFails   int64 // failed writes of the state file
	InFlight     int64 // deliveries received and not finished now, queued or being handled (not a count of the past)
	Unrouted     int64 // no route took them and there is no default target (Options.Targets)
	// Targets count each target's deliveries, by name (Options.Targets).
	Targets map[string]TargetStats
}
