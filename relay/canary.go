package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/internal/sse"
)

// The canary (Options.Canary) measures what a user of the relay feels: at
// every interval it POSTs a small delivery to a channel of its own, through
// the relay's listening socket as a sender would, and times its arrival on
// that channel's stream, read as a subscriber would (internal/sse, the one
// SSE reader). Stats.Canary has the last round trip, when it was, and how
// many did not come back in time; /healthz and serve's /metrics show them.
// Its channel's name is random, like any channel's; its deliveries count
// in Stats.Deliveries like any other (one per interval).

// CanaryStats are Stats.Canary.
type CanaryStats struct {
	RoundTripMS float64   `json:"roundTripMs"`         // the last round trip that came back
	At          time.Time `json:"at,omitzero"`         // when it was sent
	Failures    int64     `json:"failures"`            // round trips that did not come back within their time
	LastError   string    `json:"lastError,omitempty"` // why the last one failed, if it did
}

// canaryState is what the canary has measured.
type canaryState struct {
	mu sync.Mutex
	st CanaryStats
}

func (c *canaryState) stats() CanaryStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

// runCanary runs the canary against the relay at base until ctx ends.
func (s *Server) runCanary(ctx context.Context, base string, every time.Duration) {
	name := "canary-" + strings.ToLower(rand.Text())
	wait := min(every, 10*time.Second) // a round trip slower than this failed
	var mu sync.Mutex
	waiting := map[string]chan struct{}{}
	stream, err := sse.StreamURL(base+"/"+name, "")
	if err != nil {
		s.log.Error("canary: cannot make the stream URL", "err", err)
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
		err := s.canaryPost(ctx, client, base+"/"+name, id)
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
		s.canary.mu.Lock()
		s.canary.st.At = start
		if err != nil {
			s.canary.st.Failures++
			s.canary.st.LastError = err.Error()
		} else {
			s.canary.st.RoundTripMS, s.canary.st.LastError = float64(rtt.Microseconds())/1000, ""
		}
		s.canary.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			s.log.Warn("canary: a round trip through the relay failed", "err", err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// canaryPost sends the canary's delivery id to channel.
func (s *Server) canaryPost(ctx context.Context, client *http.Client, channel, id string) error {
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
