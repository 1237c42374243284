package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/loglimit"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/rest"
)

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
		received, filtered, handshakes, verified, verifyFailed, unverified, handlerFails,
		forwarded, targetFails, githubFailed, slow, saved, saveFails, malformed, gaps, gapLost,
		duplicates, redeliveries, replayed, failedSaved, lost, stateFails, inFlight, unrouted atomic.Int64
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
	doneBefore bool // a duplicate because the state file had it
	replay     bool // given to Handle, not read from the relay
	redelivery bool
	pre        *prepared // nil: process prepares it
}

// New checks opts and returns a Client. Errors wrap
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
	// Where capture files say deliveries came from: the channel, or, for
	// a client that only takes what it is handed (Handle, Replay), a
	// replay.
	c.source = "replay"
	if opts.URL != "" {
		c.source = httpx.RedactURL(opts.URL)
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
	c.dedup = newDedup(opts.DedupWindow)
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
// or the default (see Options.HTTPClient; one per target: each its own
// connections).
func (c *Client) targetClient() *rest.Client {
	if c.opts.HTTPClient != nil {
		return c.opts.HTTPClient
	}
	return &rest.Client{HTTPClient: &http.Client{Timeout: defaultTargetTimeout, Transport: httpx.NewTransport()}, Retry: SafeRetry(true)}
}

// SafeRetry returns the retry policy for a target whose handler must not
// run twice for one delivery: only what surely did not reach the handler
// is retried (retryUnsent). With untilUp (a lane's default), a target
// that is down (its port refuses connections) is asked again every 2 s at
// most for as long as it is down, its lane holding its deliveries, which
// it then sends in order; the run's end (the drain) stops the wait, and
// those deliveries go to the failed folder. Without, 8 attempts wait for a
// target that is not up yet for about 20 s at the most (backoff from
// 500 ms to 5 s, with jitter), then the delivery goes to the failed folder
// (replay's).
func SafeRetry(untilUp bool) *rest.RetryPolicy {
	if untilUp {
		return &rest.RetryPolicy{MaxAttempts: math.MaxInt32, BaseDelay: 250 * time.Millisecond, MaxDelay: 2 * time.Second, Retryable: retryUnsent}
	}
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
		return nil, fmt.Errorf("%w: invalid target URL: %v", ErrInvalidOptions, err)
	}
	return u, nil
}

// Stats returns the counts so far. It is safe to call while Run runs.
func (c *Client) Stats() Stats {
	s := &c.stats
	st := Stats{
		Received: s.received.Load(), Filtered: s.filtered.Load(), Handshakes: s.handshakes.Load(), Verified: s.verified.Load(),
		VerifyFailed: s.verifyFailed.Load(), Unverified: s.unverified.Load(),
		HandlerFails: s.handlerFails.Load(), Forwarded: s.forwarded.Load(),
		TargetFails: s.targetFails.Load(), GitHubFailed: s.githubFailed.Load(), Slow: s.slow.Load(), Saved: s.saved.Load(), SaveFails: s.saveFails.Load(),
		Malformed: s.malformed.Load(), Gaps: s.gaps.Load(), GapLost: s.gapLost.Load(),
		Duplicates: s.duplicates.Load(), Redeliveries: s.redeliveries.Load(), Replayed: s.replayed.Load(),
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

// loadState reads StateFile, if any, and sets the resume point: the
// LastEventID option wins over the file.
func (c *Client) loadState() error {
	path := c.opts.StateFile
	c.state = newCheckpoint(path, c.streamURL, time.Now, c.stateWriteErr)
	if c.opts.stateInterval > 0 {
		c.state.interval = c.opts.stateInterval
	}
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
