package proxy

import (
	"context"
	"time"

	"github.com/hookline/hookline/capture"
)

// SetCaptureWriter replaces how c writes capture files, so tests can inject
// write errors (a full disk) without one.
func SetCaptureWriter(c *Client, write func(dir string, d capture.Delivery) (string, error)) {
	c.writeCapture = write
}

// SetStreamClock replaces how the reconnect loop waits and draws its
// jitter (nil keeps the default), so tests need not wait.
func SetStreamClock(o *StreamOptions, sleep func(context.Context, time.Duration) error, jitter func(time.Duration) time.Duration) {
	o.sleep, o.jitter = sleep, jitter
}

// OversizeEvent is the name the transport gives an event over its size
// limit.
const OversizeEvent = oversizeEvent
