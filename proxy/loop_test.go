package proxy_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/relay"
)

// A target that is the channel itself sends every delivery back as a new
// event with the same delivery id: Run stops with ErrLoop after a few
// rounds instead of forwarding thousands a second.
func TestForwardingLoopStops(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	forwarded := 0 // read after Run returns
	cw := newConnWatch()
	c, err := proxy.New(proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: rl.Channel}}, Logger: slog.New(slog.DiscardHandler),
		OnState: cw.on,
		OnResult: func(r proxy.Result) {
			if len(r.Targets) > 0 && r.Targets[0].OK() {
				forwarded++
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(t.Context()) }()
	cw.waitConnected(t)
	rl.Publish(t, nil, 1, relaytest.Body(1, 10))
	select {
	case err := <-done:
		if !errors.Is(err, proxy.ErrLoop) {
			t.Fatalf("Run returned %v, want ErrLoop", err)
		}
	case <-time.After(relaytest.HangGuard):
		t.Fatal("the loop was not stopped")
	}
	// The original and the two returns it lets through.
	if forwarded != 3 {
		t.Errorf("%d deliveries were forwarded before the loop was stopped, want 3", forwarded)
	}
}
