package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookline/hookline/webhooks"
)

// recorder collects the labels of the handlers that ran.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) handler(label string, err error) webhooks.Handler {
	return func(ctx context.Context, e webhooks.Event) error {
		r.mu.Lock()
		r.calls = append(r.calls, label)
		r.mu.Unlock()
		return err
	}
}

func (r *recorder) sorted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := slices.Clone(r.calls)
	slices.Sort(s)
	return s
}

func mustOn(t *testing.T, em interface {
	On(string, webhooks.Handler) (*webhooks.Registration, error)
}, name string, h webhooks.Handler) *webhooks.Registration {
	t.Helper()
	r, err := em.On(name, h)
	if err != nil {
		t.Fatalf("On(%q) error = %v", name, err)
	}
	return r
}

func event(name, payload string) webhooks.Event {
	return webhooks.Event{ID: "d-1", Name: name, Payload: json.RawMessage(payload)}
}

func TestReceiveDispatch(t *testing.T) {
	tests := []struct {
		name    string
		event   webhooks.Event
		want    []string
		comment string
	}{
		{"event with action", event("issues", `{"action":"opened"}`), []string{"any", "issues", "issues+push", "issues.opened"}, ""},
		{"other action", event("issues", `{"action":"closed"}`), []string{"any", "issues", "issues+push"}, ""},
		{"event without action", event("push", `{"ref":"refs/heads/main"}`), []string{"any", "issues+push", "push"}, ""},
		{"empty action", event("issues", `{"action":""}`), []string{"any", "issues", "issues+push"}, ""},
		{"non-string action", event("issues", `{"action":1}`), []string{"any", "issues", "issues+push"}, ""},
		{"unregistered event", event("ping", `{"zen":"x"}`), []string{"any"}, ""},
		{"unknown event", event("not_an_event", `{"action":"opened"}`), []string{"any"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
			var rec recorder
			mustOn(t, em, "issues.opened", rec.handler("issues.opened", nil))
			mustOn(t, em, "issues", rec.handler("issues", nil))
			mustOn(t, em, "push", rec.handler("push", nil))
			if _, err := em.OnEach([]string{"issues", "push"}, rec.handler("issues+push", nil)); err != nil {
				t.Fatal(err)
			}
			em.OnAny(rec.handler("any", nil))
			if err := em.Receive(t.Context(), tt.event); err != nil {
				t.Fatalf("Receive() error = %v", err)
			}
			if got := rec.sorted(); !slices.Equal(got, tt.want) {
				t.Errorf("handlers run = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReceiveNoHandlers(t *testing.T) {
	var em webhooks.Emitter // the zero Emitter is ready to use
	if err := em.Receive(t.Context(), event("push", `{}`)); err != nil {
		t.Errorf("Receive() with no handlers = %v, want nil", err)
	}
}

func TestReceiveHandlerGetsEvent(t *testing.T) {
	em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
	type key struct{}
	var got webhooks.Event
	var gotValue any
	mustOn(t, em, "issues.opened", func(ctx context.Context, e webhooks.Event) error {
		got, gotValue = e, ctx.Value(key{})
		return nil
	})
	ctx := context.WithValue(t.Context(), key{}, "v")
	if err := em.Receive(ctx, webhooks.Event{ID: "abc", Name: "issues", Payload: json.RawMessage(`{"action":"opened"}`)}); err != nil {
		t.Fatal(err)
	}
	if got.ID != "abc" || got.Name != "issues" || string(got.Payload) != `{"action":"opened"}` || gotValue != "v" {
		t.Errorf("handler got %+v with value %v, want ID abc, Name issues, the payload and value v", got, gotValue)
	}
}

// TestReceiveConcurrentAndOrdered checks that handlers run at the same time
// and that the errors come back in registration order even when the first
// handler finishes last.
func TestReceiveConcurrentAndOrdered(t *testing.T) {
	em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
	othersDone := make(chan struct{}, 4)
	wait := func(label string) webhooks.Handler {
		return func(ctx context.Context, e webhooks.Event) error {
			for range 4 {
				select {
				case <-othersDone:
				case <-time.After(5 * time.Second):
					return errors.New("handlers did not run concurrently")
				}
			}
			return errors.New(label)
		}
	}
	done := func(label string) webhooks.Handler {
		return func(ctx context.Context, e webhooks.Event) error {
			othersDone <- struct{}{}
			return errors.New(label)
		}
	}
	em.OnAny(done("any 1"))
	mustOn(t, em, "issues", done("issues 1"))
	mustOn(t, em, "issues.opened", wait("issues.opened 1")) // finishes last
	mustOn(t, em, "issues.opened", done("issues.opened 2"))
	mustOn(t, em, "issues", done("issues 2"))

	err := em.Receive(t.Context(), event("issues", `{"action":"opened"}`))
	agg, ok := errors.AsType[*webhooks.AggregateError](err)
	if !ok {
		t.Fatalf("Receive() error = %v (%T), want *AggregateError", err, err)
	}
	want := []string{"issues.opened 1", "issues.opened 2", "issues 1", "issues 2", "any 1"}
	var got []string
	for _, e := range agg.Errors {
		got = append(got, e.Error())
	}
	if !slices.Equal(got, want) {
		t.Errorf("AggregateError.Errors = %q, want %q", got, want)
	}
	const wantMsg = "issues.opened 1\nissues.opened 2\nissues 1\nissues 2\nany 1"
	if err.Error() != wantMsg {
		t.Errorf("Receive() error message = %q, want %q", err.Error(), wantMsg)
	}
	if agg.Event.Name != "issues" || agg.Event.ID != "d-1" {
		t.Errorf("AggregateError.Event = %+v, want the received event", agg.Event)
	}
}

func TestReceiveErrors(t *testing.T) {
	errA := errors.New("handler a failed")
	errB := &statusError{msg: "handler b forbidden", status: 403}
	tests := []struct {
		name       string
		handlers   []webhooks.Handler
		wantMsg    string
		wantIs     []error
		wantStatus int
	}{
		{
			name:     "all succeed",
			handlers: []webhooks.Handler{okHandler, okHandler},
		},
		{
			name:       "one of two fails",
			handlers:   []webhooks.Handler{okHandler, failWith(errA)},
			wantMsg:    "handler a failed",
			wantIs:     []error{errA},
			wantStatus: 500,
		},
		{
			name:       "single handler fails",
			handlers:   []webhooks.Handler{failWith(errA)},
			wantMsg:    "handler a failed",
			wantIs:     []error{errA},
			wantStatus: 500,
		},
		{
			name:       "status of first error wins",
			handlers:   []webhooks.Handler{failWith(errB), failWith(errA)},
			wantMsg:    "handler b forbidden\nhandler a failed",
			wantIs:     []error{errA, errB},
			wantStatus: 403,
		},
		{
			name:       "later status ignored",
			handlers:   []webhooks.Handler{failWith(errA), failWith(errB)},
			wantMsg:    "handler a failed\nhandler b forbidden",
			wantIs:     []error{errA, errB},
			wantStatus: 500,
		},
		{
			name:       "wrapped status",
			handlers:   []webhooks.Handler{failWith(fmt.Errorf("wrapped: %w", errB))},
			wantMsg:    "wrapped: handler b forbidden",
			wantIs:     []error{errB},
			wantStatus: 403,
		},
		{
			name:       "invalid status becomes 500",
			handlers:   []webhooks.Handler{failWith(&statusError{msg: "weird", status: 200})},
			wantMsg:    "weird",
			wantStatus: 500,
		},
		{
			name:       "panic with string",
			handlers:   []webhooks.Handler{func(context.Context, webhooks.Event) error { panic("boom") }, okHandler},
			wantMsg:    "webhooks: handler panicked: boom",
			wantIs:     []error{webhooks.ErrHandlerPanic},
			wantStatus: 500,
		},
		{
			name:       "panic with error",
			handlers:   []webhooks.Handler{func(context.Context, webhooks.Event) error { panic(errA) }},
			wantMsg:    "webhooks: handler panicked: handler a failed",
			wantIs:     []error{webhooks.ErrHandlerPanic, errA},
			wantStatus: 500,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
			for _, h := range tt.handlers {
				mustOn(t, em, "push", h)
			}
			err := em.Receive(t.Context(), event("push", `{}`))
			if tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("Receive() error = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantMsg {
				t.Fatalf("Receive() error = %v, want %q", err, tt.wantMsg)
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = false, want true", err, target)
				}
			}
			agg, ok := errors.AsType[*webhooks.AggregateError](err)
			if !ok {
				t.Fatalf("Receive() error is %T, want *AggregateError", err)
			}
			if got := agg.StatusCode(); got != tt.wantStatus {
				t.Errorf("StatusCode() = %d, want %d", got, tt.wantStatus)
			}
		})
	}
}

func okHandler(context.Context, webhooks.Event) error { return nil }

func failWith(err error) webhooks.Handler {
	return func(context.Context, webhooks.Event) error { return err }
}

func TestReceiveBadInput(t *testing.T) {
	tests := []struct {
		name    string
		event   webhooks.Event
		want    error
		wantMsg string
	}{
		{"missing name", webhooks.Event{Payload: json.RawMessage(`{}`)}, webhooks.ErrMissingName, "webhooks: event name required"},
		{"name with a dot", event("issues.closed", `{}`), webhooks.ErrInvalidName, `webhooks: invalid event name: "issues.closed" (an X-GitHub-Event value has no . or *)`},
		{"name *", event("*", `{}`), webhooks.ErrInvalidName, `webhooks: invalid event name: "*" (an X-GitHub-Event value has no . or *)`},
		{"nil payload", webhooks.Event{Name: "push"}, webhooks.ErrMissingPayload, "webhooks: payload required"},
		{"empty payload", webhooks.Event{Name: "push", Payload: json.RawMessage{}}, webhooks.ErrMissingPayload, "webhooks: payload required"},
		{"array", event("push", `[{"action":"x"}]`), webhooks.ErrInvalidPayload, "webhooks: payload is not a JSON object: got an array"},
		{"null", event("push", `null`), webhooks.ErrInvalidPayload, "webhooks: payload is not a JSON object: got null"},
		{"string", event("push", `"x"`), webhooks.ErrInvalidPayload, "webhooks: payload is not a JSON object: got a string"},
		{"number", event("push", ` 12`), webhooks.ErrInvalidPayload, "webhooks: payload is not a JSON object: got a number"},
		{"invalid JSON", event("push", `{"a":`), webhooks.ErrInvalidPayload, "webhooks: payload is not a JSON object: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
				var calls atomic.Int32
				em.OnAny(func(context.Context, webhooks.Event) error { calls.Add(1); return nil })
				em.OnError(func(context.Context, *webhooks.AggregateError) { calls.Add(1) })
				err := em.Receive(t.Context(), tt.event)
				if !errors.Is(err, tt.want) {
					t.Fatalf("Receive() error = %v, want %v", err, tt.want)
				}
				if err.Error() != tt.wantMsg {
					t.Errorf("Receive() error message = %q, want %q", err.Error(), tt.wantMsg)
				}
				if sc, ok := errors.AsType[interface {
					error
					StatusCode() int
				}](err); !ok || sc.StatusCode() != 400 {
					t.Errorf("Receive() error has no StatusCode 400: %v", err)
				}
				if _, ok := errors.AsType[*webhooks.AggregateError](err); ok {
					t.Errorf("Receive() error is an *AggregateError, want a plain error")
				}
				synctest.Wait() // an error handler would be running or done
				if n := calls.Load(); n != 0 {
					t.Errorf("%d handlers or error handlers called, want 0", n)
				}
			})
		})
	}
}

func TestOnNames(t *testing.T) {
	tests := []struct {
		name     string
		names    []string
		want     error
		wantWarn string
	}{
		{"known event", []string{"push"}, nil, ""},
		{"known event.action", []string{"issues.opened"}, nil, ""},
		{"unknown warns", []string{"pushy"}, nil, `"pushy"`},
		{"unknown action warns", []string{"push.opened"}, nil, `"push.opened"`},
		{"any is reserved", []string{"*"}, webhooks.ErrReservedEventName, ""},
		{"error is reserved", []string{"error"}, webhooks.ErrReservedEventName, ""},
		{"empty", []string{""}, webhooks.ErrMissingName, ""},
		{"reserved among valid", []string{"push", "*"}, webhooks.ErrReservedEventName, ""},
		{"no names", nil, webhooks.ErrMissingName, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, logs := newLogger()
			em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: log})
			var calls atomic.Int32
			r, err := em.OnEach(tt.names, func(context.Context, webhooks.Event) error { calls.Add(1); return nil })
			if !errors.Is(err, tt.want) {
				t.Fatalf("OnEach(%q) error = %v, want %v", tt.names, err, tt.want)
			}
			if (r == nil) != (tt.want != nil) {
				t.Errorf("OnEach(%q) registration = %v with error %v", tt.names, r, err)
			}
			if tt.wantWarn != "" && !strings.Contains(logs.String(), "level=WARN") {
				t.Errorf("OnEach(%q) logged %q, want a warning", tt.names, logs.String())
			}
			if tt.wantWarn != "" && !strings.Contains(logs.String(), "unknown event name") {
				t.Errorf("OnEach(%q) logged %q, want it to name the problem", tt.names, logs.String())
			}
			if tt.wantWarn == "" && logs.String() != "" {
				t.Errorf("OnEach(%q) logged %q, want nothing", tt.names, logs.String())
			}
			// Nothing is registered when an error is returned.
			for _, n := range []string{"push", "pushy", "issues"} {
				if err := em.Receive(t.Context(), event(n, `{"action":"opened"}`)); err != nil {
					t.Fatal(err)
				}
			}
			wantCalls := int32(0)
			if tt.want == nil {
				wantCalls = 1
			}
			if got := calls.Load(); got != wantCalls {
				t.Errorf("after OnEach(%q): %d calls, want %d", tt.names, got, wantCalls)
			}
		})
	}
}

func TestOnNilHandler(t *testing.T) {
	em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
	if _, err := em.On("push", nil); !errors.Is(err, webhooks.ErrNilHandler) {
		t.Errorf("On(push, nil) error = %v, want ErrNilHandler", err)
	}
	for name, f := range map[string]func(){
		"OnAny":   func() { em.OnAny(nil) },
		"OnError": func() { em.OnError(nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s(nil) did not panic", name)
				}
			}()
			f()
		})
	}
}

func TestOnEachSameNameTwice(t *testing.T) {
	em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
	var calls atomic.Int32
	r, err := em.OnEach([]string{"push", "push"}, func(context.Context, webhooks.Event) error { calls.Add(1); return nil })
	if err != nil {
		t.Fatal(err)
	}
	receive := func() int32 {
		t.Helper()
		calls.Store(0)
		if err := em.Receive(t.Context(), event("push", `{}`)); err != nil {
			t.Fatal(err)
		}
		return calls.Load()
	}
	for _, want := range []int32{2, 1, 0, 0} {
		if got := receive(); got != want {
			t.Fatalf("calls = %d, want %d", got, want)
		}
		if err := em.RemoveListener("push", r); err != nil {
			t.Fatalf("RemoveListener() error = %v", err)
		}
	}
}

func TestRemoveListener(t *testing.T) {
	em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
	r1 := mustOn(t, em, "push", failWith(errors.New("r1")))
	mustOn(t, em, "push", failWith(errors.New("r2")))
	r3, err := em.OnEach([]string{"push", "issues"}, failWith(errors.New("r3")))
	if err != nil {
		t.Fatal(err)
	}
	rAny := em.OnAny(failWith(errors.New("any")))

	messages := func(name string) []string {
		t.Helper()
		err := em.Receive(t.Context(), event(name, `{}`))
		agg, ok := errors.AsType[*webhooks.AggregateError](err)
		if !ok {
			return nil
		}
		var m []string
		for _, e := range agg.Errors {
			m = append(m, e.Error())
		}
		return m
	}
	steps := []struct {
		name       string
		remove     func() error
		wantPush   []string
		wantIssues []string
	}{
		{"start", func() error { return nil }, []string{"r1", "r2", "r3", "any"}, []string{"r3", "any"}},
		{"remove r3 from push only", func() error { return em.RemoveListener("push", r3) }, []string{"r1", "r2", "any"}, []string{"r3", "any"}},
		{"remove r3 again is a no-op", func() error { return em.RemoveListener("push", r3) }, []string{"r1", "r2", "any"}, []string{"r3", "any"}},
		{"remove any", func() error { return em.RemoveListener("*", rAny) }, []string{"r1", "r2"}, []string{"r3"}},
		{"remove from several names", func() error { return em.RemoveListenerEach([]string{"issues", "push"}, r3) }, []string{"r1", "r2"}, nil},
		{"remove r1", func() error { return em.RemoveListener("push", r1) }, []string{"r2"}, nil},
		{"unknown name", func() error { return em.RemoveListener("nope", r1) }, []string{"r2"}, nil},
	}
	for _, s := range steps {
		if err := s.remove(); err != nil {
			t.Fatalf("%s: error = %v", s.name, err)
		}
		if got := messages("push"); !slices.Equal(got, s.wantPush) {
			t.Errorf("%s: push errors = %q, want %q", s.name, got, s.wantPush)
		}
		if got := messages("issues"); !slices.Equal(got, s.wantIssues) {
			t.Errorf("%s: issues errors = %q, want %q", s.name, got, s.wantIssues)
		}
	}
}

// TestRemoveListenerMostRecent registers one registration twice under one
// name, then another, and checks that each removal takes one entry only.
// (A Registration's entries under one name are always adjacent, since only
// one OnEach call creates them, so removing the latest or the earliest of
// them cannot be told apart.)
func TestRemoveListenerMostRecent(t *testing.T) {
	em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
	var mu sync.Mutex
	var order []string
	label := func(s string) webhooks.Handler {
		return func(context.Context, webhooks.Event) error {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
			return errors.New(s)
		}
	}
	a, err := em.OnEach([]string{"push", "push"}, label("a"))
	if err != nil {
		t.Fatal(err)
	}
	mustOn(t, em, "push", label("b"))
	// push: [a, a, b]. Removing a takes the second a, then the first.
	for _, want := range []string{"a\na\nb", "a\nb", "b", "b"} {
		err := em.Receive(t.Context(), event("push", `{}`))
		if err == nil || err.Error() != want {
			t.Fatalf("Receive() error = %v, want %q", err, want)
		}
		if err := em.RemoveListener("push", a); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRemoveListenerErrors(t *testing.T) {
	em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
	r := mustOn(t, em, "push", okHandler)
	if err := em.RemoveListener("", r); !errors.Is(err, webhooks.ErrMissingName) {
		t.Errorf("RemoveListener(\"\", r) error = %v, want ErrMissingName", err)
	}
	if err := em.RemoveListener("push", nil); err == nil {
		t.Errorf("RemoveListener(push, nil) error = nil, want an error")
	}
	if err := em.RemoveListenerEach([]string{"push", ""}, r); !errors.Is(err, webhooks.ErrMissingName) {
		t.Errorf("RemoveListenerEach error = %v, want ErrMissingName", err)
	}
}

func TestOnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, logs := newLogger()
		em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: log})
		errBoom := errors.New("boom")
		mustOn(t, em, "push", failWith(errBoom))

		release := make(chan struct{})
		got := make(chan *webhooks.AggregateError, 3)
		type key struct{}
		em.OnError(func(ctx context.Context, err *webhooks.AggregateError) {
			<-release // blocks until Receive has returned
			if ctx.Err() != nil || ctx.Value(key{}) != "v" {
				t.Errorf("error handler context: err %v, value %v; want live context with value v", ctx.Err(), ctx.Value(key{}))
			}
			got <- err
		})
		em.OnError(func(ctx context.Context, err *webhooks.AggregateError) { panic("error handler bug") })
		em.OnError(func(ctx context.Context, err *webhooks.AggregateError) { got <- err })

		ctx, cancel := context.WithCancel(context.WithValue(t.Context(), key{}, "v"))
		err := em.Receive(ctx, event("push", `{"ref":"x"}`))
		cancel()
		close(release)
		if !errors.Is(err, errBoom) {
			t.Fatalf("Receive() error = %v, want boom", err)
		}
		for range 2 {
			select {
			case agg := <-got:
				if agg != err {
					t.Errorf("error handler got %p, want the returned error %p", agg, err)
				}
				if agg.Event.Name != "push" || string(agg.Event.Payload) != `{"ref":"x"}` {
					t.Errorf("error handler event = %+v", agg.Event)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("error handler not called")
			}
		}
		synctest.Wait() // every error handler has returned
		if !strings.Contains(logs.String(), "error handler panicked") {
			t.Errorf("panicking error handler not logged; logs: %s", logs.String())
		}
	})
}

func TestOnErrorRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
		mustOn(t, em, "push", failWith(errors.New("x")))
		var calls atomic.Int32
		called := make(chan struct{}, 2)
		r := em.OnError(func(context.Context, *webhooks.AggregateError) { calls.Add(1); called <- struct{}{} })
		keep := em.OnError(func(context.Context, *webhooks.AggregateError) { called <- struct{}{} })
		if err := em.RemoveListener("error", r); err != nil {
			t.Fatal(err)
		}
		_ = keep
		if err := em.Receive(t.Context(), event("push", `{}`)); err == nil {
			t.Fatal("Receive() = nil, want an error")
		}
		<-called
		synctest.Wait() // the removed handler would be running or done
		if n := calls.Load(); n != 0 {
			t.Errorf("removed error handler called %d times", n)
		}
	})
}

func TestTransform(t *testing.T) {
	var transforms atomic.Int32
	em := webhooks.NewEmitter(webhooks.EmitterOptions{
		Logger: discard,
		Transform: func(ctx context.Context, e webhooks.Event) (webhooks.Event, error) {
			transforms.Add(1)
			e.Payload = json.RawMessage(`{"transformed":true}`)
			return e, nil
		},
	})
	var mu sync.Mutex
	var seen []string
	h := func(ctx context.Context, e webhooks.Event) error {
		mu.Lock()
		seen = append(seen, string(e.Payload))
		mu.Unlock()
		return errors.New("fail")
	}
	mustOn(t, em, "issues.opened", h)
	mustOn(t, em, "issues", h)
	em.OnAny(h)
	errEvent := make(chan webhooks.Event, 1)
	em.OnError(func(ctx context.Context, err *webhooks.AggregateError) { errEvent <- err.Event })

	err := em.Receive(t.Context(), event("issues", `{"action":"opened"}`))
	if err == nil {
		t.Fatal("Receive() = nil, want the handlers' errors")
	}
	if n := transforms.Load(); n != 1 {
		t.Errorf("transform ran %d times, want once per Receive", n)
	}
	want := []string{`{"transformed":true}`, `{"transformed":true}`, `{"transformed":true}`}
	if !slices.Equal(seen, want) {
		t.Errorf("handlers saw %q, want %q", seen, want)
	}
	agg, _ := errors.AsType[*webhooks.AggregateError](err)
	if string(agg.Event.Payload) != `{"action":"opened"}` {
		t.Errorf("AggregateError.Event.Payload = %s, want the untransformed payload", agg.Event.Payload)
	}
	if e := <-errEvent; string(e.Payload) != `{"action":"opened"}` {
		t.Errorf("error handler event payload = %s, want the untransformed payload", e.Payload)
	}

	// No matching handler: the transform does not run.
	transforms.Store(0)
	if err := em.Receive(t.Context(), event("ping", `{}`)); err == nil {
		t.Error("Receive(ping) = nil, want the OnAny handler's error")
	}
	em2 := webhooks.NewEmitter(webhooks.EmitterOptions{Transform: func(ctx context.Context, e webhooks.Event) (webhooks.Event, error) {
		transforms.Add(1)
		return e, nil
	}})
	if err := em2.Receive(t.Context(), event("ping", `{}`)); err != nil || transforms.Load() != 1 {
		t.Errorf("Receive with no handlers: err %v, transforms %d; want nil, 1 (from the first Receive only)", err, transforms.Load())
	}
}

func TestTransformSingleHandler(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("handlers=%d", n), func(t *testing.T) {
			em := webhooks.NewEmitter(webhooks.EmitterOptions{
				Logger: discard,
				Transform: func(ctx context.Context, e webhooks.Event) (webhooks.Event, error) {
					e.Name, e.Payload = "transformed", json.RawMessage(`{"t":1}`)
					return e, nil
				},
			})
			got := make(chan string, n)
			for range n {
				mustOn(t, em, "push", func(ctx context.Context, e webhooks.Event) error {
					got <- e.Name + " " + string(e.Payload)
					return nil
				})
			}
			if err := em.Receive(t.Context(), event("push", `{}`)); err != nil {
				t.Fatal(err)
			}
			for range n {
				if g := <-got; g != `transformed {"t":1}` {
					t.Errorf("handler got %q, want the transformed event", g)
				}
			}
		})
	}
}

func TestTransformFails(t *testing.T) {
	errTransform := errors.New("transform failed")
	tests := []struct {
		name      string
		transform webhooks.TransformFunc
		wantMsg   string
		wantIs    error
	}{
		{"error", func(context.Context, webhooks.Event) (webhooks.Event, error) { return webhooks.Event{}, errTransform },
			"transform failed\ntransform failed\ntransform failed", errTransform},
		{"panic", func(context.Context, webhooks.Event) (webhooks.Event, error) { panic("oops") },
			"webhooks: handler panicked: oops\nwebhooks: handler panicked: oops\nwebhooks: handler panicked: oops", webhooks.ErrHandlerPanic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard, Transform: tt.transform})
			var calls atomic.Int32
			h := func(context.Context, webhooks.Event) error { calls.Add(1); return nil }
			mustOn(t, em, "push", h)
			mustOn(t, em, "push", h)
			em.OnAny(h)
			err := em.Receive(t.Context(), event("push", `{}`))
			if !errors.Is(err, tt.wantIs) || err.Error() != tt.wantMsg {
				t.Fatalf("Receive() error = %q, want %q wrapping %v", err, tt.wantMsg, tt.wantIs)
			}
			agg, _ := errors.AsType[*webhooks.AggregateError](err)
			if len(agg.Errors) != 3 {
				t.Errorf("len(Errors) = %d, want 3 (one per handler)", len(agg.Errors))
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("%d handlers ran after the transform failed, want 0", n)
			}
		})
	}
}

func TestAggregateErrorEmpty(t *testing.T) {
	var agg webhooks.AggregateError
	if agg.Error() != "webhooks: no errors" || agg.StatusCode() != 500 || agg.Unwrap() != nil {
		t.Errorf("zero AggregateError: %q %d %v", agg.Error(), agg.StatusCode(), agg.Unwrap())
	}
}

// TestConcurrentUse registers, removes and receives from many goroutines at
// once; run it with -race.
func TestConcurrentUse(t *testing.T) {
	w := newWebhooks(t, webhooks.Options{})
	w.OnError(func(context.Context, *webhooks.AggregateError) {})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 100 {
				name := []string{"push", "issues", "issues.opened"}[i%3]
				r, err := w.On(name, func(ctx context.Context, e webhooks.Event) error {
					if i%7 == 0 {
						return errors.New("x")
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				a := w.OnAny(okHandler)
				_ = w.Receive(t.Context(), event("issues", `{"action":"opened"}`))
				payload := []byte(fmt.Sprintf(`{"g":%d}`, g))
				sig, _ := w.Sign(payload)
				_ = w.VerifyAndReceive(t.Context(), "id", "push", payload, sig)
				if err := w.RemoveListener(name, r); err != nil {
					t.Error(err)
				}
				if err := w.RemoveListener("*", a); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	var calls atomic.Int32
	w.OnAny(func(context.Context, webhooks.Event) error { calls.Add(1); return nil })
	if err := w.Receive(t.Context(), event("issues", `{"action":"opened"}`)); err != nil || calls.Load() != 1 {
		t.Errorf("after concurrent use: Receive error %v, %d calls; want nil, 1 (everything else removed)", err, calls.Load())
	}
}

// Shutdown waits for handlers still running, error handlers included, and
// when its context ends first it cancels theirs. Before, nothing could wait
// for them: a process exited mid-handler after GitHub got a 2xx.
func TestShutdownDrainsHandlers(t *testing.T) {
	t.Run("waits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
			var handled, errHandled atomic.Bool
			mustOn(t, em, "push", func(context.Context, webhooks.Event) error {
				time.Sleep(5 * time.Second) // simulated (synctest)
				handled.Store(true)
				return errors.New("failed")
			})
			em.OnError(func(context.Context, *webhooks.AggregateError) {
				time.Sleep(2 * time.Second) // simulated (synctest)
				errHandled.Store(true)
			})
			go em.Receive(context.Background(), event("push", `{}`))
			synctest.Wait() // the handler is running
			start := time.Now()
			if err := em.Shutdown(t.Context()); err != nil {
				t.Errorf("Shutdown = %v, want nil", err)
			}
			if !handled.Load() || !errHandled.Load() || time.Since(start) != 7*time.Second {
				t.Errorf("Shutdown returned after %v with handler done %v, error handler done %v; want both, after 7s", time.Since(start), handled.Load(), errHandled.Load())
			}
		})
	})
	t.Run("gives up and cancels", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
			cancelled := make(chan error, 1)
			mustOn(t, em, "push", func(ctx context.Context, _ webhooks.Event) error {
				<-ctx.Done()
				cancelled <- ctx.Err()
				return nil
			})
			go em.Receive(context.WithoutCancel(t.Context()), event("push", `{}`))
			synctest.Wait()
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if err := em.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Shutdown = %v, want DeadlineExceeded", err)
			}
			if err := <-cancelled; !errors.Is(err, context.Canceled) {
				t.Errorf("the handler's context ended with %v, want Canceled", err)
			}
		})
	})
	t.Run("nothing running", func(t *testing.T) {
		em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
		if err := em.Shutdown(t.Context()); err != nil {
			t.Errorf("Shutdown = %v, want nil", err)
		}
	})
}
