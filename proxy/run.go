package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/rest"
	"github.com/hookline/hookline/webhooks/provider"
)

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
	queue := make(chan item, defaultQueueSize)

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

	so, t := c.streamOptions()
	subCtx, stopSub := context.WithCancelCause(ctx)
	defer stopSub(nil)
	rd := reader{queue: queue, work: work, stopSub: stopSub}
	err := sse.Subscribe(subCtx, t, so, func(ev sse.Event) error { return c.receive(ctx, ev, &rd) })
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

// streamOptions are the subscription's options and transport.
func (c *Client) streamOptions() (sse.Options, sse.Transport) {
	so := c.opts.stream
	if c.opts.MaxBackoff > 0 {
		so.MaxBackoff = c.opts.MaxBackoff
	}
	so.URL = c.streamURL
	so.LastEventID = c.state.Mark()
	on := c.opts.OnState
	so.OnState = func(sc sse.StateChange) {
		if sc.State == sse.StateReady && sc.LastEventID == "" {
			// A first connection to a hookline relay: its newest id is
			// where this client stands, stored so that a restart
			// resumes there and gets what was sent while it was down.
			c.state.adopt(strconv.FormatInt(sc.RelayLast, 10))
		}
		if on != nil {
			on(stateChangeOf(sc))
		}
	}
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
	return so, t
}

// reader is what receive needs of Run: the workers' queue and context, and
// what stops the subscription; and when the previous event was done with.
type reader struct {
	queue   chan<- item
	work    context.Context
	stopSub context.CancelCauseFunc
	idle    time.Time // when receive last returned: the reader waits from then
}

// quietGap is how long the reader must have waited for an event for the
// stream to count as quiet (see receive).
const quietGap = 2 * time.Millisecond

// receive takes one event of the stream: a delivery is prepared and
// queued for the workers (its body fetched first when it came by link); a
// delivery that keeps coming back to the channel is a loop, and stops the
// subscription (stopSub). Its error makes the stream reconnect.
//
// At a user's rate (the stream was quiet for quietGap, and no delivery is
// queued or being handled) the delivery is handled here, on the reader's
// goroutine, instead of being handed to a worker: one goroutine reads,
// verifies and sends it (with one target, see fanOut and lane.submit), and
// no idle thread is woken for a hand-off. Deliveries that come close
// together go to the workers, so that each is prepared while the one
// before it is at the target. Order is kept either way: one handled here
// is the only one in flight. Only in order (Concurrency one), where the
// deliveries after a slow one wait for it whoever handles it: with more,
// the workers would handle them meanwhile, and the reader must go on
// reading them (TestConcurrentAfterAQuietSpell).
func (c *Client) receive(ctx context.Context, ev sse.Event, rd *reader) error {
	quiet := time.Since(rd.idle) >= quietGap
	defer func() { rd.idle = time.Now() }()
	d := c.decode(ev)
	if d == nil {
		return nil
	}
	if n := c.loops.cameBack(d.ID, d.EventID, time.Now()); n >= loopLimit {
		err := fmt.Errorf("%w: delivery %s came back to the channel %d times within %s of being sent to the target; is the target the channel's own URL, or does it post deliveries back to it?",
			ErrLoop, d.ID, n, loopWindow)
		c.logger.Error("stopping: the target sends deliveries back to the channel", "delivery", d.ID, "event_id", d.EventID)
		rd.stopSub(err)
		return nil
	}
	if d.Link != "" {
		switch err := c.fetchBody(ctx, d); {
		case err != nil && ctx.Err() != nil:
			c.logger.Warn("shutting down: delivery received but its body not fetched; it stays in the relay's history",
				"delivery", d.ID, "event", d.Event, "event_id", d.EventID)
			return nil
		case errors.Is(err, errBodyGone) || errors.Is(err, errMalformed):
			// The relay no longer has it, or the link cannot be fetched
			// at all: resuming would not help.
			c.keepSkipped(ev, "whose body could not be fetched", err)
			return nil
		case err != nil:
			// The stream resumes before it, and the relay sends it again
			// with a new link.
			c.logger.Warn("the body of a delivery could not be fetched; reconnecting to receive it again",
				"delivery", d.ID, "event_id", d.EventID, "err", err)
			return err
		}
	}
	it := c.classify(d, ev.Durable)
	// Prepared here, while the workers are busy with the deliveries
	// before it (in order, the one at the target).
	it.pre = c.prepare(d, it.duplicate)
	// Only this goroutine adds to inFlight: none in flight stays so.
	if quiet && c.inOrder() && c.stats.inFlight.Load() == 0 && ctx.Err() == nil {
		c.stats.inFlight.Add(1)
		c.handle(rd.work, it)
		return nil
	}
	c.stats.inFlight.Add(1)
	select {
	case rd.queue <- it:
	case <-ctx.Done():
		c.stats.inFlight.Add(-1)
		// Read but not queued: report it rather than lose it silently;
		// the relay's history still has it.
		c.logger.Warn("shutting down: delivery received but not handled; it stays in the relay's history",
			"delivery", d.ID, "event", d.Event, "event_id", d.EventID)
	}
	return nil
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
		g.Message = g.message()
		c.stats.gaps.Add(1)
		c.stats.gapLost.Add(g.Count)
		if c.opts.OnGap != nil {
			c.opts.OnGap(g)
		} else {
			c.logger.Warn(g.Message, "after_id", g.AfterID, "oldest_kept", g.OldestID)
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
	Message  string `json:"message"`  // what the gap means, in one sentence (for a person)
}

// message says what the gap means, in one sentence (Gap.Message).
func (g Gap) message() string {
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
		it.duplicate, it.doneBefore = true, true
		return it
	}
	it.duplicate, it.redelivery = c.dedup.check(d.ID, d.EventID, durable && asked(d), time.Now())
	return it
}

// asked reports whether a repeat of d's delivery id that comes as a new
// event would be a redelivery someone asked for: one the hookline relay
// marks as its own (its page's Redeliver button), or one of a sender that
// never resends on its own (GitHub's Redeliver button, hookline deliveries
// --redeliver). Another sender's repeat is its retry of a delivery it
// thought lost (Standard Webhooks, Stripe, Shopify...): a duplicate.
func asked(d *delivery.Delivery) bool {
	return d.Headers.Get(wire.RedeliveryHeader) != "" || !provider.Resent(d.Headers, d.Body)
}
