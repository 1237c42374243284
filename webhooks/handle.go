package webhooks

import (
	"context"
	"fmt"
	"strings"
)

// Registrar is what Handle registers with: a *Webhooks or an *Emitter.
type Registrar interface {
	On(name string, h Handler) (*Registration, error)
}

// Handle registers, for the event or event.action name, a handler that
// takes the payload decoded into a T (see Event.Decode): a payload that
// does not decode is the handler's error. With the Event constants and the
// generated types of package webhooks/payload (or types of your own):
//
//	_, err := webhooks.Handle(wh, webhooks.EventIssuesOpened, func(ctx context.Context, e webhooks.Event, p *payload.IssuesOpenedEvent) error {
//		return greet(ctx, p.Repository.FullName, p.Issue.Number)
//	})
//
// It returns what r.On returns, or an error wrapping ErrWrongPayloadType
// when T says it is the payload of another event (the generated types do:
// EventName); the type of the whole event (payload.IssuesEvent) fits every
// one of its actions. HandleEvent takes the name from the type.
func Handle[T any](r Registrar, name string, h func(ctx context.Context, e Event, payload *T) error) (*Registration, error) {
	if h == nil {
		return nil, ErrNilHandler
	}
	if n, ok := any(new(T)).(interface{ EventName() string }); ok {
		typeName := n.EventName()
		event, _, _ := strings.Cut(name, ".")
		if typeName != name && typeName != event {
			err := fmt.Errorf("%w: %T is the payload of %q, not of %q", ErrWrongPayloadType, new(T), typeName, name)
			// Dropped by the caller, the error would leave the handler
			// silently missing: the event's first delivery says so too.
			if em, ok := r.(interface{ neverRuns(event, why string) }); ok {
				em.neverRuns(event, "the handler for "+name+" was not registered: "+err.Error())
			}
			return nil, err
		}
	}
	return r.On(name, func(ctx context.Context, e Event) error {
		p := new(T)
		if err := e.Decode(p); err != nil {
			return err
		}
		return h(ctx, e, p)
	})
}

// MustHandle is Handle for registrations made once at start-up, where an
// error is a mistake in the program: it panics instead of returning it, so
// that a handler whose type does not fit its name cannot go unnoticed. It
// returns the Registration.
func MustHandle[T any](r Registrar, name string, h func(ctx context.Context, e Event, payload *T) error) *Registration {
	reg, err := Handle(r, name, h)
	if err != nil {
		panic(err)
	}
	return reg
}

// HandleEvent is Handle for a generated payload type, which names its event
// (EventName): the handler runs for that event or event.action, and the
// type and the name cannot disagree.
//
//	_, err := webhooks.HandleEvent(wh, func(ctx context.Context, e webhooks.Event, p *payload.IssuesOpenedEvent) error {
//		return greet(ctx, p.Repository.FullName, p.Issue.Number)
//	})
func HandleEvent[T any, P interface {
	*T
	EventName() string
}](r Registrar, h func(ctx context.Context, e Event, payload P) error) (*Registration, error) {
	if h == nil {
		return nil, ErrNilHandler
	}
	return Handle(r, P(new(T)).EventName(), func(ctx context.Context, e Event, p *T) error { return h(ctx, e, P(p)) })
}
