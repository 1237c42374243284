package webhooks

import "context"

// Registrar is what Handle registers with: a *Webhooks or an *Emitter.
type Registrar interface {
	On(name string, h Handler) (*Registration, error)
}

// Handle registers, for the event or event.action name, a handler that
// takes the payload decoded into a T (see Event.Decode): a payload that
// does not decode is the handler's error. With the Event constants and the
// generated types of package webhooks/payload (or types of your own):
//
//	webhooks.Handle(wh, webhooks.EventIssuesOpened, func(ctx context.Context, e webhooks.Event, p *payload.IssuesOpenedEvent) error {
//		return greet(ctx, p.Repository.FullName, p.Issue.Number)
//	})
//
// It returns what r.On returns.
func Handle[T any](r Registrar, name string, h func(ctx context.Context, e Event, payload *T) error) (*Registration, error) {
	if h == nil {
		return nil, ErrNilHandler
	}
	return r.On(name, func(ctx context.Context, e Event) error {
		p := new(T)
		if err := e.Decode(p); err != nil {
			return err
		}
		return h(ctx, e, p)
	})
}
