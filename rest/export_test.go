package rest

import (
	"context"
	"time"

	"github.com/hookline/hookline/rest/backoff"
)

// SetRetryClock makes p use now, random and sleep instead of the real clock,
// jitter and timer; a nil function keeps the real one.
func SetRetryClock(p *RetryPolicy, now func() time.Time, random func() float64, sleep func(context.Context, time.Duration) error) {
	p.clock = &retryClock{now: now, random: random, sleep: sleep}
}

// SleepContext is the real wait of a RetryPolicy.
var SleepContext = backoff.Sleep

// DefaultHTTPClientTimeout is the timeout of the client used when
// Client.HTTPClient is nil.
var DefaultHTTPClientTimeout = defaultHTTPClient.Timeout
