package proxy

import (
	"errors"
	"fmt"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/wire"
)

// errMalformed is wrapped by the error for an event that should carry a
// delivery but cannot be read as one: data that is not a JSON object, an
// object without headers, a body field of the wrong type, invalid base64
// in "bodyB", or an event over the size limit.
var errMalformed = errors.New("malformed relay message")

// decodeEvent reads one event the subscription classified (ev.Kind): a
// delivery, a gap warning, or neither (a control event: nil, nil, nil).
// The Delivery's Body may share memory with ev.Data, which it changes
// ("bodyB" is decoded over its own base64 text).
func decodeEvent(ev sse.Event) (*delivery.Delivery, *wire.Gap, error) {
	switch ev.Kind {
	case wire.KindGap:
		g := wire.DecodeGap(ev.Event, ev.Data)
		return nil, &g, nil
	case wire.KindDelivery:
	default:
		return nil, nil, nil
	}
	if ev.Event == sse.OversizeEvent {
		return nil, nil, fmt.Errorf("%w: %w", errMalformed, sse.OversizeError(ev))
	}
	d, err := wire.DecodeDelivery(ev.Data)
	switch {
	case err != nil && ev.ID != "":
		return nil, nil, fmt.Errorf("%w (event id %q): %v", errMalformed, ev.ID, err)
	case err != nil:
		return nil, nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	d.EventID = ev.ID
	return d, nil, nil
}
