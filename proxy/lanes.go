package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/eventmatch"
	"github.com/hookline/hookline/rest"
)

// Several targets (Options.Targets): every target is a lane of its own, so
// that a slow or unreachable one never holds back another's deliveries.
//
// The pipeline's first part (duplicate check, filter, verification, local
// handlers, --save) runs once per delivery, as for one target; then the
// delivery is handed to each lane its routes choose, and the worker goes
// on to the next delivery. A lane sends in the order deliveries were read
// (or up to Options.Concurrency at once, unordered), with the target's own
// retries, and keeps what its target did not take in its own subfolder of
// the failed folder. When every lane is done with a delivery, its Result
// (Targets: one TargetResult per lane) is reported and the state file may
// move past it: a restart resumes without losing a lane's work, and the
// lanes already done with a delivery are recorded, so that they do not get
// it twice.
//
// A lane holds at most laneBacklog deliveries waiting for their target;
// beyond that, reading waits (memory is bounded: a target down for long
// enough holds the others back then; Stats.Targets shows each lane's
// waiting count).

// laneBacklog bounds the deliveries waiting in one lane.
const laneBacklog = 4096

// Target is one of several targets (Options.Targets).
type Target struct {
	// Name names the target in the trace, Stats and the failed folder
	// (its subfolder). If empty, TargetNames gives one: the URL's port
	// for a target on this machine, else its host, made unique.
	Name string
	// URL is where deliveries are sent (an http or https URL).
	URL string
	// Events makes the target a route: it gets only the deliveries that
	// match one of its patterns (as Options.Events: "event",
	// "event.action", "event.*" or "*"). Targets without Events get every
	// delivery that no route takes.
	Events []string
	// Header is set on this target's requests, replacing the delivery's
	// headers of the same names (see forwardOptions.Header): for a target
	// behind authentication, say. Credentials here are never saved nor
	// printed by hookline.
	Header http.Header
	// NoQuery drops the delivery's query string instead of adding it to
	// the URL's.
	NoQuery bool
	// ResignSecret, if not empty, replaces the delivery's signature with
	// one made with this secret, for a target that checks another secret
	// than the sender's.
	ResignSecret string
}

// lane is one target's queue and senders: up to workers goroutines
// take the queue's sends in order (one: the order deliveries were read);
// a sender ends when the queue is empty, and the next send starts one
// again, so that a lane costs nothing while it has nothing to send.
type lane struct {
	name    string
	route   eventmatch.Set // empty: a default target
	fwd     *forwarder
	queue   chan func() // sends waiting (laneBacklog)
	workers int
	failed  string // the lane's failed folder, "" for none

	mu      sync.Mutex
	running int // senders running

	forwarded, fails, waiting atomic.Int64
}

// submit queues send (waiting while the lane holds laneBacklog sends,
// unless ctx ends: then it runs at once, and sees ctx's end) and makes
// sure a sender runs. With inline, a lane that has nothing queued and no
// sender running runs send on the caller's goroutine instead: no hand-off
// to another goroutine, which at a user's rate wakes an idle thread for
// every delivery (the caller may wait: see fanOut).
func (l *lane) submit(ctx context.Context, send func(), inline bool) {
	if inline {
		l.mu.Lock()
		idle := l.running == 0 && len(l.queue) == 0
		if idle {
			l.running++ // what comes meanwhile queues behind it
		}
		l.mu.Unlock()
		if idle {
			send()
			l.mu.Lock()
			l.running--
			more := len(l.queue) > 0 && l.running < l.workers
			if more {
				l.running++
			}
			l.mu.Unlock()
			if more {
				go l.sender()
			}
			return
		}
	}
	select {
	case l.queue <- send:
	case <-ctx.Done():
		go send()
		return
	}
	l.mu.Lock()
	if l.running < l.workers {
		l.running++
		go l.sender()
	}
	l.mu.Unlock()
}

// sender runs the lane's sends until its queue is empty. A lane that
// waits for nothing costs no goroutine, and no timer wakes it.
func (l *lane) sender() {
	for {
		select {
		case send := <-l.queue:
			send()
			continue
		default:
		}
		l.mu.Lock()
		if len(l.queue) > 0 { // a send came meanwhile
			l.mu.Unlock()
			continue
		}
		l.running--
		l.mu.Unlock()
		return
	}
}

// TargetStats count one target's deliveries (Stats.Targets).
type TargetStats struct {
	Forwarded int64 // the target answered 2xx
	Failed    int64 // it answered otherwise or could not be reached
	Waiting   int64 // deliveries in its lane now
}

// newLanes makes a lane per target of c.opts.Targets, each sending with
// its own copy of the target client hc makes.
func (c *Client) newLanes(hc func() *rest.Client) error {
	opts := c.opts
	for i, t := range opts.Targets {
		if _, err := parseTarget(t.URL); err != nil {
			if len(opts.Targets) == 1 {
				return err
			}
			return fmt.Errorf("%w (Targets[%d])", err, i)
		}
	}
	names, err := TargetNames(opts.Targets)
	if err != nil {
		return err
	}
	// One unnamed target keeps today's layout: no name in the results,
	// its failed deliveries in the failed folder itself.
	single := len(opts.Targets) == 1 && opts.Targets[0].Name == "" && len(opts.Targets[0].Events) == 0
	for i, t := range opts.Targets {
		target, _ := parseTarget(t.URL) // checked above
		l := &lane{
			name: names[i], queue: make(chan func(), laneBacklog), workers: max(1, opts.Concurrency),
			fwd:    newForwarder(target, hc(), forwardOptions{NoQuery: t.NoQuery, ResignSecret: t.ResignSecret, Scheme: opts.Provider, Header: t.Header}),
			failed: laneFailedDir(c.failedDir, names[i]),
		}
		if single {
			l.name, l.failed = "", c.failedDir
		}
		if l.route, err = c.events(fmt.Sprintf("Targets[%d] (%s) Events", i, l.name), t.Events); err != nil {
			return err
		}
		c.lanes = append(c.lanes, l)
	}
	return nil
}

// TargetNames gives each target the name a Client gives it: Name, or the
// URL's port for a target on this machine (3000), its host name for
// another, with "-2", "-3"… for repeats. Names are folder names
// too: anything but letters, digits, '.', '-' and '_' becomes '_'.
func TargetNames(targets []Target) ([]string, error) {
	seen := map[string]int{}
	var names []string
	for i, t := range targets {
		name := t.Name
		if name == "" {
			u, err := url.Parse(t.URL)
			if err != nil || u.Host == "" {
				return nil, fmt.Errorf("%w: invalid target URL: Targets[%d]: %q is not a URL", ErrInvalidOptions, i, t.URL)
			}
			// On this machine the port tells targets apart; elsewhere the
			// host does.
			name = u.Hostname()
			if ip := net.ParseIP(name); (ip != nil && ip.IsLoopback()) || name == "localhost" {
				name = u.Port()
				if name == "" {
					name = "localhost"
				}
			}
		}
		name = strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
				return r
			}
			return '_'
		}, name)
		if name == "" || name == "." || name == ".." {
			name = "target" + strconv.Itoa(i+1)
		}
		seen[name]++
		if n := seen[name]; n > 1 {
			name += "-" + strconv.Itoa(n)
		}
		names = append(names, name)
	}
	return names, nil
}

// fanOut hands d (whose first part of the pipeline r holds) to the lanes
// its routes choose, except those a state file lists as done with it, and
// calls then with the Result once every lane is done (at once when none
// takes it: r.Unrouted). handlers, if not nil, runs the local handlers:
// beside the lanes, and waited for too.
func (c *Client) fanOut(ctx context.Context, d *delivery.Delivery, r Result, it item, handlers func() ([]HandlerResult, error), then func(Result)) {
	chosen := c.chooseLanes(eventmatch.Key{Event: d.Event, Action: r.Action, Branch: r.Branch})
	if len(chosen) == 0 && len(c.lanes) > 0 {
		r.Unrouted = true
		c.stats.unrouted.Add(1)
	}
	var doneBefore map[string]bool
	if it.durable {
		doneBefore = c.laneSkip[d.EventID]
	}
	if len(chosen) > 0 {
		r.Targets = make([]*TargetResult, len(chosen))
		c.loops.forwarding(d.ID, d.EventID, time.Now())
	}
	pre := r // what the lanes read: r's fields change as handlers and lanes end
	var left atomic.Int32
	left.Store(int32(len(chosen)) + 1)
	c.lanesBusy.Add(1)
	waited := make([]time.Duration, len(chosen))
	// One lane in all and no handlers to run beside it: the worker may
	// send itself, in order, as nothing else waits for it.
	inline := len(c.lanes) == 1 && handlers == nil
	finish := func() {
		if left.Add(-1) == 0 {
			r.Waited = slices.Max(append(waited, 0))
			c.afterLanes(&r)
			then(r)
			c.lanesBusy.Done()
		}
	}
	for i, l := range chosen {
		if doneBefore[l.name] {
			r.Targets[i] = &TargetResult{Name: l.name, URL: l.fwd.shown, Skipped: true}
			finish()
			continue
		}
		l.waiting.Add(1)
		l.submit(ctx, func() {
			if !it.read.IsZero() { // read from the stream (not Handle, Replay)
				waited[i] = time.Since(it.read) // behind the deliveries before it in this lane
			}
			tr := l.send(ctx, d)
			c.afterLane(l, tr, d, pre)
			if it.durable && d.EventID != "" && left.Load() > 1 {
				// Other lanes still have it: a restart must not send it
				// here again. (The last lane's done is the delivery's.)
				c.state.laneDone(it.seq, d.EventID, l.name)
			}
			r.Targets[i] = tr // each lane its own index; read after all are done
			finish()
		}, inline)
	}
	// The handlers run here, beside the lanes: the next delivery's wait
	// for them, so that they see deliveries in order, as with one target.
	if handlers != nil {
		r.Handlers, r.HandlerErr = handlers()
	}
	finish()
}

// inOrder reports whether deliveries are handled one at a time, in the
// order they were read (Options.Concurrency zero or one).
func (c *Client) inOrder() bool { return c.opts.Concurrency <= 1 }

// errNotSent is a TargetResult's Err for a delivery whose turn in its lane
// came after the run ended (the drain's end, Stop, Replay's context): it
// was not sent (TargetResult.Interrupted, no Attempts).
var errNotSent = errors.New("not sent: the run ended before its turn")

// behindLanes gives then r, a delivery the pipeline is done with (a
// duplicate, filtered, its signature failed), once every lane is done with
// the deliveries before it, when deliveries are handled in order
// (Concurrency one): the results come in the order the deliveries were read.
func (c *Client) behindLanes(ctx context.Context, r Result, then func(Result)) {
	if len(c.lanes) == 0 || !c.inOrder() {
		then(r)
		return
	}
	var left atomic.Int32
	left.Store(int32(len(c.lanes)))
	c.lanesBusy.Add(1)
	for _, l := range c.lanes {
		l.submit(ctx, func() {
			if left.Add(-1) == 0 {
				then(r)
				c.lanesBusy.Done()
			}
		}, len(c.lanes) == 1)
	}
}

// send sends d to the lane's target, unless the run ended before its
// turn (errNotSent).
func (l *lane) send(ctx context.Context, d *delivery.Delivery) *TargetResult {
	tr := &TargetResult{URL: l.fwd.shown, Err: errNotSent, Interrupted: true}
	if ctx.Err() == nil {
		tr = l.fwd.Forward(ctx, d)
		tr.Interrupted = tr.Err != nil && ctx.Err() != nil
	}
	l.waiting.Add(-1)
	tr.Name = l.name
	return tr
}

// chooseLanes returns the lanes whose routes take delivery k or, when none
// does, the default targets (those without routes).
func (c *Client) chooseLanes(k eventmatch.Key) []*lane {
	var routed, defaults []*lane
	for _, l := range c.lanes {
		switch {
		case l.route.Empty():
			defaults = append(defaults, l)
		case l.route.Match(k):
			routed = append(routed, l)
		}
	}
	if len(routed) > 0 {
		return routed
	}
	return defaults
}

// afterLanes counts what all lanes' outcomes make of r.
func (c *Client) afterLanes(r *Result) {
	if r.HandlerErr != nil {
		c.stats.handlerFails.Add(1)
	}
	if r.Lost() {
		c.stats.lost.Add(1)
	}
}

// afterLane counts lane l's outcome tr for d (read as r before the lanes)
// and keeps d in the lane's failed folder when its target did not take it.
func (c *Client) afterLane(l *lane, tr *TargetResult, d *delivery.Delivery, r Result) {
	c.countTarget(tr)
	switch {
	case tr.OK():
		l.forwarded.Add(1)
		return
	case tr.Err != errNotSent:
		l.fails.Add(1)
	}
	if l.failed != "" {
		cd := c.captureOf(d, r)
		cd.Note = "the target answered " + tr.Summary()
		if l.name != "" {
			cd.Note = "the target " + l.name + " answered " + tr.Summary()
		}
		tr.FailedFile, tr.FailedErr = c.saveFailed(l.failed, cd)
		if tr.FailedErr != nil {
			c.stats.saveFails.Add(1)
		} else {
			c.stats.failedSaved.Add(1)
		}
	}
	if tr.FailedFile == "" && r.Saved == "" {
		c.logger.Warn("the target did not take a delivery and it was not saved; the relay may still have it",
			"target", l.name, "delivery", d.ID, "event", d.Event, "event_id", d.EventID)
	}
}

// laneFailedDir is lane name's subfolder of the failed folder.
func laneFailedDir(failedDir, name string) string {
	if failedDir == "" {
		return ""
	}
	return filepath.Join(failedDir, name)
}
