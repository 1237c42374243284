package proxy

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/eventmatch"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/jsonscan"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/provider"
)

// Handle runs one delivery that did not come from the subscription (a
// capture file, a replay the user asked for: the inspector's) through the
// same pipeline as Run's on purpose: Events/Ignore, verification, Handlers
// and the targets at the same time, SaveDir and FailedDir. It is never
// skipped as a duplicate, and is counted apart from what the relay sent:
// Result.Replay, Stats.Replayed (its outcome is counted as any delivery's:
// Forwarded, TargetFails...). It reports the Result to OnResult too, and
// returns it once every target is done with it. It is safe for concurrent
// use, and needs no URL.
func (c *Client) Handle(ctx context.Context, d *delivery.Delivery) Result {
	c.dedup.check(d.ID, d.EventID, false, time.Now()) // a copy the relay sends after it is a duplicate
	return c.processAndReport(ctx, item{d: d, replay: true})
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

// handle runs one delivery read by Run (counted in inFlight by receive),
// stores the checkpoint and reports the Result.
func (c *Client) handle(ctx context.Context, it item) {
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
	payload                      []byte
	action, repo, sender, branch string
	filtered                     bool
	filteredBy                   string
	handshake                    string // provider.Handshake's Kind: not a delivery
	verification                 Verification
	verifyNote                   string
	scheme                       provider.Scheme
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
	p.branch = branchOf(d.Event, members)
	if duplicate {
		return p
	}
	if hs, ok := provider.HandshakeOf(d.Headers, queryOf(d), d.Body); ok {
		p.handshake = hs.Kind
		return p
	}
	if p.filtered, p.filteredBy = c.filter.drop(eventmatch.Key{Event: d.Event, Action: p.action, Branch: p.branch}); p.filtered {
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
	r = Result{Delivery: d, Received: time.Now(), Duplicate: it.duplicate, DoneBefore: it.doneBefore, Redelivery: it.redelivery, Replay: it.replay}
	if d.BodySource == delivery.BodyCapture && !d.ReceivedAt.IsZero() {
		r.Received = d.ReceivedAt
	}
	r.Action, r.Repository, r.Sender, r.Branch = p.action, p.repo, p.sender, p.branch
	switch {
	case r.Duplicate:
		c.stats.duplicates.Add(1)
		return r, true
	case r.Replay:
		c.stats.replayed.Add(1)
	case r.Redelivery:
		c.stats.redeliveries.Add(1)
	}
	if p.handshake != "" {
		r.Handshake, r.HandshakeAnswered = p.handshake, d.Headers.Get(wire.HandshakeHeader) == "answered"
		c.stats.handshakes.Add(1)
		return r, true
	}
	if p.filtered {
		r.Filtered, r.FilteredBy = true, p.filteredBy
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
// JSON.parse, the last of duplicate keys wins (member).
func summarize(members []jsonscan.Member) (action, repo, sender string) {
	return member(members, "action"), member(members, "repository", "full_name"), member(members, "sender", "login")
}

// branchOf returns the branch a delivery of event is about, from its
// payload's members: a push's (or a branch's create or delete) ref, a pull
// request's head, a check suite's, check run's, workflow run's or job's
// head branch; "" for other events, and for tags.
func branchOf(event string, members []jsonscan.Member) string {
	var path []string
	switch event {
	case "push":
		path = []string{"ref"}
	case "create", "delete":
		if member(members, "ref_type") != "branch" {
			return ""
		}
		return member(members, "ref")
	case "pull_request", "pull_request_review", "pull_request_review_comment", "pull_request_review_thread":
		path = []string{"pull_request", "head", "ref"}
	case "check_suite":
		path = []string{"check_suite", "head_branch"}
	case "check_run":
		path = []string{"check_run", "check_suite", "head_branch"}
	case "workflow_run":
		path = []string{"workflow_run", "head_branch"}
	case "workflow_job":
		path = []string{"workflow_job", "head_branch"}
	default:
		return ""
	}
	ref := member(members, path...)
	if event == "push" {
		branch, ok := strings.CutPrefix(ref, "refs/heads/")
		if !ok {
			return "" // a tag
		}
		return branch
	}
	return ref
}

// member returns the string at path in the object whose members are
// given, "" when there is none. As in JSON.parse, the last of duplicate
// keys wins.
func member(members []jsonscan.Member, path ...string) string {
	for i, name := range path {
		var next []byte
		for _, m := range members {
			if m.Is(name) {
				next = m.Value
			}
		}
		if next == nil {
			return ""
		}
		if i == len(path)-1 {
			return stringValue(next)
		}
		var ok bool
		if members, ok = jsonscan.Object(next); !ok {
			return ""
		}
	}
	return ""
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

// queryOf is d's query string, parsed (the pairs that parse).
func queryOf(d *delivery.Delivery) url.Values {
	q, _ := url.ParseQuery(d.Query)
	return q
}
