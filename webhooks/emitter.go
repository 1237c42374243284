package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
)

// Reserved names under which OnAny and OnError register; RemoveListener
// accepts them.
const (
	// AnyEventName is the name OnAny registers under ("*").
	AnyEventName = "*"
	// ErrorEventName is the name OnError registers under ("error").
	ErrorEventName = "error"
)

// Handler handles one event. A returned error (or a panic, which is
// recovered) makes Receive fail. ctx is the context passed to Receive.
type Handler func(ctx context.Context, e Event) error

// ErrorHandler is told about a failed Receive or VerifyAndReceive. err holds
// every error and the untransformed event (err.Event). Error handlers run in
// their own goroutines after the failure and never delay Receive; ctx carries
// the values of Receive's context but is never cancelled. A panic in an
// error handler is recovered and logged.
type ErrorHandler func(ctx context.Context, err *AggregateError)

// TransformFunc turns an event into the one passed to the handlers
// registered with On, OnEach and OnAny. It runs once per Receive, only when
// at least one such handler matches. If it returns an error (or panics),
// every one of those handlers fails with that error and none runs.
type TransformFunc func(ctx context.Context, e Event) (Event, error)

// Registration identifies one call of On, OnEach, OnAny or OnError; pass it
// to RemoveListener to remove the handler again. Go functions cannot be
// compared, so the registration, not the function, is the identity.
type Registration struct {
	h  Handler
	eh ErrorHandler
}

// EmitterOptions configures NewEmitter.
type EmitterOptions struct {
	// Transform, if not nil, rewrites each event before the handlers
	// registered with On, OnEach and OnAny see it (see TransformFunc).
	Transform TransformFunc
	// Logger receives warnings (unknown event names) and errors (panics).
	// If nil, slog.Default() is used at the time of logging.
	Logger *slog.Logger
	// StrictEventNames: see Options.StrictEventNames.
	StrictEventNames bool
}

// Emitter registers handlers by event name and dispatches events to them:
// the event-handler module of @octokit/webhooks (createEventHandler), usable
// without signatures or HTTP. Webhooks embeds one.
//
// The zero Emitter is ready to use (no transform, default logger). An
// Emitter is safe for concurrent use: handlers may be registered and
// removed while events are received; a Receive sees the handlers registered
// when it starts. An Emitter must not be copied after first use.
type Emitter struct {
	transform TransformFunc
	logger    *slog.Logger
	strict    bool // unknown names are errors (Options.StrictEventNames)

	mu sync.RWMutex
	// hooks maps a name ("push", "issues.opened", "*", "error") to its
	// registrations in order. The slices are copy-on-write: never modified
	// once stored, so Receive can use them after releasing mu.
	hooks map[string][]*Registration
	// never maps an event ("issues") to the handlers meant for it that
	// will never run: registered for an action GitHub does not send, or
	// refused by Handle (an error a caller may have dropped). The first
	// delivery of the event says so (told), once.
	never map[string][]string
	told  map[string]bool

	work running // Receive calls and error handlers in progress, for Shutdown
}

// neverRuns records, for the first delivery of event to report, a handler
// meant for it that will never run, and why.
func (em *Emitter) neverRuns(event, why string) {
	em.mu.Lock()
	defer em.mu.Unlock()
	if em.never == nil {
		em.never = map[string][]string{}
	}
	em.never[event] = append(em.never[event], why)
}

// tell logs, at the first delivery of event, the handlers meant for it
// that will never run.
func (em *Emitter) tell(event string, action []byte, why []string) {
	em.mu.Lock()
	if em.told[event] {
		em.mu.Unlock()
		return
	}
	if em.told == nil {
		em.told = map[string]bool{}
	}
	em.told[event] = true
	em.mu.Unlock()
	em.log().Warn("webhooks: a handler meant for this event will never run", "event", event, "action", string(action), "why", strings.Join(why, "; "))
}

// running counts work in progress and ends it on request. The zero value
// is ready to use.
type running struct {
	mu   sync.Mutex
	n    int
	idle []chan struct{} // closed when n drops to 0
	life context.Context // cancelled when wait gives up
	end  context.CancelFunc
}

// start records one piece of work that runs with ctx, and returns ctx
// cancelled also when end is called, and the function to call when the
// work is done.
func (r *running) start(ctx context.Context) (context.Context, func()) {
	r.mu.Lock()
	if r.life == nil {
		r.life, r.end = context.WithCancel(context.Background())
	}
	r.n++
	life := r.life
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(life, cancel)
	return ctx, func() {
		unhook()
		cancel()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.n--; r.n == 0 {
			for _, ch := range r.idle {
				close(ch)
			}
			r.idle = nil
		}
	}
}

// wait waits until no work is in progress, or until ctx ends: then it
// cancels the contexts of the work still running and returns ctx's error.
func (r *running) wait(ctx context.Context) error {
	r.mu.Lock()
	if r.n == 0 {
		r.mu.Unlock()
		return nil
	}
	idle := make(chan struct{})
	r.idle = append(r.idle, idle)
	r.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		r.mu.Lock()
		if r.end != nil {
			r.end()
			r.life, r.end = nil, nil // work started from now on is not cancelled
		}
		r.mu.Unlock()
		return ctx.Err()
	}
}

// Shutdown waits for the handlers and error handlers that are running,
// those the middleware left running after answering 202 included, then
// returns nil. If ctx ends first, it cancels their contexts and returns
// ctx's error without waiting further. Call it when the server shuts down
// (see [http.Server.RegisterOnShutdown] and the example), so that the
// process does not exit in the middle of a handler after GitHub got a 2xx.
// Deliveries received meanwhile are still handled.
func (em *Emitter) Shutdown(ctx context.Context) error {
	return em.work.wait(ctx)
}

// NewEmitter returns an Emitter configured by opts.
func NewEmitter(opts EmitterOptions) *Emitter {
	return &Emitter{transform: opts.Transform, logger: opts.Logger, strict: opts.StrictEventNames}
}

func (em *Emitter) log() *slog.Logger {
	if em.logger != nil {
		return em.logger
	}
	return slog.Default()
}

// On registers h for the event or event.action name. It returns
// ErrMissingName for "", an error wrapping ErrReservedEventName for "*" and
// "error" (use OnAny and OnError), and ErrNilHandler for a nil h. A name
// that is not in EmitterEventNames logs a warning and is registered anyway,
// or, with StrictEventNames, returns an error wrapping ErrUnknownEventName.
// The Event constants (EventIssuesOpened...) name every known event.
func (em *Emitter) On(name string, h Handler) (*Registration, error) {
	return em.OnEach([]string{name}, h)
}

// OnEach registers h once for every name in names, in order; a name listed
// twice registers h twice. The returned Registration stands for all of
// them. Names are checked as by On before anything is registered: on error
// nothing is. An empty names is ErrMissingName.
func (em *Emitter) OnEach(names []string, h Handler) (*Registration, error) {
	if h == nil {
		return nil, ErrNilHandler
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no event names given", ErrMissingName)
	}
	for _, name := range names {
		unknown := "warn"
		if em.strict {
			unknown = "error"
		}
		err := ValidateEventName(name, ValidateOptions{OnUnknownEventName: unknown, Logger: em.log()})
		if err != nil {
			return nil, err
		}
	}
	r := &Registration{h: h}
	for _, name := range names {
		// Registered with a warning: an action GitHub does not send
		// ("issues.opend") never runs; its event's first delivery says so.
		if event, _, ok := strings.Cut(name, "."); ok && ValidateEventName(name, ValidateOptions{OnUnknownEventName: "error"}) != nil {
			em.neverRuns(event, "a handler is registered for "+name+", an action GitHub does not send")
		}
	}
	em.mu.Lock()
	for _, name := range names {
		em.add(name, r)
	}
	em.mu.Unlock()
	return r, nil
}

// OnAny registers h for every event (under the name "*"). It panics if h is
// nil.
func (em *Emitter) OnAny(h Handler) *Registration {
	if h == nil {
		panic("webhooks: OnAny: nil handler")
	}
	r := &Registration{h: h}
	em.mu.Lock()
	em.add(AnyEventName, r)
	em.mu.Unlock()
	return r
}

// OnError registers h to be told about every failed Receive and
// VerifyAndReceive (under the name "error"). It panics if h is nil.
func (em *Emitter) OnError(h ErrorHandler) *Registration {
	if h == nil {
		panic("webhooks: OnError: nil handler")
	}
	r := &Registration{eh: h}
	em.mu.Lock()
	em.add(ErrorEventName, r)
	em.mu.Unlock()
	return r
}

// add appends r under name; em.mu is held.
func (em *Emitter) add(name string, r *Registration) {
	if em.hooks == nil {
		em.hooks = make(map[string][]*Registration)
	}
	old := em.hooks[name]
	regs := make([]*Registration, len(old), len(old)+1)
	copy(regs, old)
	em.hooks[name] = append(regs, r)
}

// RemoveListener removes the most recent registration of r under name,
// which may also be "*" (OnAny) or "error" (OnError). When r was registered
// several times under name, each call removes one. Removing a registration
// that is not there is a no-op. It returns ErrMissingName for an empty name
// and an error for a nil r.
func (em *Emitter) RemoveListener(name string, r *Registration) error {
	return em.RemoveListenerEach([]string{name}, r)
}

// RemoveListenerEach calls RemoveListener for every name in names, in
// order; it checks its arguments before removing anything.
func (em *Emitter) RemoveListenerEach(names []string, r *Registration) error {
	if r == nil {
		return errors.New("webhooks: RemoveListener: nil registration")
	}
	for _, name := range names {
		if name == "" {
			return ErrMissingName
		}
	}
	em.mu.Lock()
	defer em.mu.Unlock()
	for _, name := range names {
		old := em.hooks[name]
		for i := len(old) - 1; i >= 0; i-- {
			if old[i] == r {
				if len(old) == 1 {
					delete(em.hooks, name)
					break
				}
				regs := make([]*Registration, 0, len(old)-1)
				regs = append(regs, old[:i]...)
				em.hooks[name] = append(regs, old[i+1:]...)
				break
			}
		}
	}
	return nil
}

// Receive dispatches e: it runs the handlers registered for
// "<name>.<action>" (only when the payload has a non-empty string action),
// for "<name>", and with OnAny, all concurrently, and waits for all of them.
// Handlers receive ctx; Receive does not stop early when ctx is cancelled.
//
// It returns nil when no handler fails (or none matches). Otherwise it
// returns an *AggregateError holding every handler's error in registration
// order (see AggregateError.Errors) and starts the OnError handlers without
// waiting for them.
//
// An empty e.Name is ErrMissingName, one holding "." or "*"
// ErrInvalidName; an empty e.Payload is ErrMissingPayload; a payload that
// is not a JSON object is ErrInvalidPayload. These errors have StatusCode
// 400 and do not reach the OnError handlers.
func (em *Emitter) Receive(ctx context.Context, e Event) error {
	if e.Name == "" {
		return badRequest(ErrMissingName)
	}
	if strings.ContainsAny(e.Name, ".*") {
		return badRequest(fmt.Errorf("%w: %q (an X-GitHub-Event value has no . or *)", ErrInvalidName, e.Name))
	}
	ctx, done := em.work.start(ctx)
	defer done()
	action, err := checkPayload(e.Payload)
	if err != nil {
		return err
	}
	return em.dispatch(ctx, e, action)
}

// dispatch runs the handlers for e, whose payload has been checked.
func (em *Emitter) dispatch(ctx context.Context, e Event, action []byte) error {
	em.mu.RLock()
	var actionHooks []*Registration
	if len(action) > 0 {
		var buf [96]byte
		key := append(append(append(buf[:0], e.Name...), '.'), action...)
		actionHooks = em.hooks[string(key)]
	}
	nameHooks := em.hooks[e.Name]
	anyHooks := em.hooks[AnyEventName]
	never := em.never[e.Name]
	em.mu.RUnlock()
	if never != nil {
		em.tell(e.Name, action, never)
	}

	n := len(actionHooks) + len(nameHooks) + len(anyHooks)
	if n == 0 {
		return nil
	}
	he := e
	if em.transform != nil {
		var err error
		if he, err = em.runTransform(ctx, e); err != nil {
			errs := make([]error, n)
			for i := range errs {
				errs[i] = err
			}
			return em.fail(ctx, e, errs)
		}
	}

	if n == 1 {
		h := first(actionHooks, nameHooks, anyHooks).h
		if err := em.call(ctx, h, he); err != nil {
			return em.fail(ctx, e, []error{err})
		}
		return nil
	}

	return em.runAll(ctx, e, he, n, actionHooks, nameHooks, anyHooks)
}

// runAll runs the n handlers of lists concurrently with event he and
// reports their failures for e.
func (em *Emitter) runAll(ctx context.Context, e, he Event, n int, lists ...[]*Registration) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	i := 0
	for _, regs := range lists {
		for _, r := range regs {
			if i == n-1 {
				errs[i] = em.call(ctx, r.h, he) // the last one runs here
				break
			}
			j := i
			wg.Go(func() { errs[j] = em.call(ctx, r.h, he) })
			i++
		}
	}
	wg.Wait()

	failed := errs[:0]
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return em.fail(ctx, e, failed)
}

func first(lists ...[]*Registration) *Registration {
	for _, l := range lists {
		if len(l) > 0 {
			return l[0]
		}
	}
	return nil
}

// call runs h, turning a panic into an error.
func (em *Emitter) call(ctx context.Context, h Handler, e Event) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v)
			em.log().Error("webhooks: handler panicked", "event", e.Name, "id", e.ID, "panic", v, "stack", string(debug.Stack()))
		}
	}()
	return h(ctx, e)
}

// runTransform runs the transform, turning a panic into an error.
func (em *Emitter) runTransform(ctx context.Context, e Event) (out Event, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v)
			em.log().Error("webhooks: transform panicked", "event", e.Name, "id", e.ID, "panic", v, "stack", string(debug.Stack()))
		}
	}()
	return em.transform(ctx, e)
}

// fail builds the aggregate error for e and notifies the error handlers.
func (em *Emitter) fail(ctx context.Context, e Event, errs []error) error {
	agg := &AggregateError{Event: e, Errors: errs}
	em.notify(ctx, agg)
	return agg
}

// notify starts every OnError handler in its own goroutine.
func (em *Emitter) notify(ctx context.Context, agg *AggregateError) {
	em.mu.RLock()
	regs := em.hooks[ErrorEventName]
	em.mu.RUnlock()
	if len(regs) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, r := range regs {
		ctx, done := em.work.start(ctx)
		go func() {
			defer done()
			defer func() {
				if v := recover(); v != nil {
					em.log().Error("webhooks: error handler panicked", "event", agg.Event.Name, "id", agg.Event.ID, "panic", v, "stack", string(debug.Stack()))
				}
			}()
			r.eh(ctx, agg)
		}()
	}
}
