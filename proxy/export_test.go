package proxy

import (
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/wire"
)

// SetCaptureWriter replaces how c writes capture files, so tests can inject
// write errors (a full disk) without one.
func SetCaptureWriter(c *Client, write func(dir string, d capture.File) (string, error)) {
	c.writeCapture = write
}

// WithStream returns o with the subscription's transport (nil: the
// default) and loop options replaced.
func WithStream(o Options, t sse.Transport, so sse.Options) Options {
	o.transport, o.stream = t, so
	return o
}

// WithStateWriteInterval returns o with the state file written at most
// once every d instead of every stateWriteInterval: for tests that wait
// for the file to hold a position, not for its pace.
func WithStateWriteInterval(o Options, d time.Duration) Options {
	o.stateInterval = d
	return o
}

// ErrMalformedMessage is wrapped by the error of an event that should be a
// delivery and cannot be read as one.
var ErrMalformedMessage = errMalformed

// Message is what one event decodes to.
type Message struct {
	Kind     wire.Kind
	Name     string // a named event's name
	Delivery *delivery.Delivery
	Gap      *wire.Gap
}

// Decode classifies ev as the subscription does and decodes it as Run does.
func Decode(ev sse.Event) (Message, error) {
	ev.Kind = sse.Classify(ev)
	d, gap, err := decodeEvent(ev)
	if err != nil {
		return Message{}, err
	}
	name := ev.Event
	if name == "message" {
		name = ""
	}
	return Message{Kind: ev.Kind, Name: name, Delivery: d, Gap: gap}, nil
}
