// Package canary is hookline serve's canary (--canary): it measures what a
// user of the relay feels. At every interval it POSTs a small delivery to a
// channel of its own, through the relay's listening socket as a sender
// would, and times its arrival on that channel's stream, read as a
// subscriber would (internal/sse, the one SSE reader). Stats has the last
// round trip, when it was, and how many did not come back in time; the
// relay reports them (relay.Options.Canary) on /healthz and serve's
// /metrics. It is its own package because package relay makes no outbound
// request. Its channel's name is random, like any channel's
// (ChannelName); the relay counts its deliveries apart from users'
// (relay.Options.CanaryChannel), and its stream is one of the relay's.
package canary

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/relay"
)

// Canary measures round trips through a relay. The zero value is ready;
// Run it once.
type Canary struct {
	// Channel is the name of the channel it sends to (ChannelName gives
	// one); if empty, Run makes one.
	Channel string

	mu sync.Mutex
	st relay.CanaryStats
}

// ChannelName returns a new name for a canary's channel: random, like any
// channel's, with "canary-" before it so that a log says whose it is.
func ChannelName() string { return "canary-" + strings.ToLower(rand.Text()) }

// Stats returns what the canary measured so far.
func (c *Canary) Stats() relay.CanaryStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

// Run sends a delivery through the relay at base every interval until ctx
// ends. A round trip slower than the interval (or 10 s) failed.
func (c *Canary) Run(ctx context.Context, base string, every time.Duration, log *slog.Logger) {
	name := c.Channel
	if name == "" {
		name = ChannelName()
	}
	wait := min(every, 10*time.Second)
	var mu sync.Mutex
	waiting := map[string]chan struct{}{}
	stream, err := sse.StreamURL(base+"/"+name, "")
	if err != nil {
		log.Error("canary: cannot make the stream URL", "err", err)
		return
	}
	connected := make(chan struct{})
	var once sync.Once
	go sse.Subscribe(ctx, &sse.HTTPTransport{}, sse.Options{URL: stream, OnState: func(sc sse.StateChange) {
		if sc.State == sse.StateConnected || sc.State == sse.StateReady {
			once.Do(func() { close(connected) })
		}
	}}, func(ev sse.Event) error {
		mu.Lock()
		defer mu.Unlock()
		for id, ch := range waiting {
			if bytes.Contains(ev.Data, []byte(id)) {
				close(ch)
				delete(waiting, id)
			}
		}
		return nil
	})
	select {
	case <-connected:
	case <-ctx.Done():
		return
	}
	client := &http.Client{Timeout: wait}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 1; ; n++ {
		id := fmt.Sprintf("hookline-canary-%d-%s", n, rand.Text())
		arrived := make(chan struct{})
		mu.Lock()
		waiting[id] = arrived
		mu.Unlock()
		start := time.Now()
		err := post(ctx, client, base+"/"+name, id)
		if err == nil {
			select {
			case <-arrived:
			case <-time.After(wait):
				err = fmt.Errorf("the delivery did not come back on the stream within %s", wait)
			case <-ctx.Done():
				return
			}
		}
		rtt := time.Since(start)
		mu.Lock()
		delete(waiting, id)
		mu.Unlock()
		c.mu.Lock()
		c.st.At = start
		if err != nil {
			c.st.Failures++
			c.st.LastError = err.Error()
		} else {
			c.st.RoundTripMS, c.st.LastError = float64(rtt.Microseconds())/1000, ""
		}
		c.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			log.Warn("canary: a round trip through the relay failed", "err", err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// post sends the canary's delivery id to channel.
func post(ctx context.Context, client *http.Client, channel, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, channel, strings.NewReader(`{"zen":"hookline canary"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "ping")
	req.Header.Set("X-GitHub-Delivery", id)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the relay answered %s to the canary's POST", resp.Status)
	}
	return nil
}
