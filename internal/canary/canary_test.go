package canary

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/relay"
)

// TestCanary: against a real relay on loopback, the canary's deliveries
// come back on its channel's stream and their round trip is measured, and
// the relay reports it in Stats (so /healthz).
func TestCanary(t *testing.T) {
	c := &Canary{Channel: ChannelName()}
	rl := relaytest.Start(t, relay.Options{Canary: c.Stats, CanaryChannel: c.Channel})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, rl.Base, 20*time.Millisecond, slog.New(slog.DiscardHandler)) }()
	// The relay's Stats are read, not told: the canary's round trip shows
	// there when it has made one.
	var st *relay.CanaryStats
	testenv.Poll(t, "a canary round trip in the relay's Stats", 10*time.Millisecond, func() bool {
		st = rl.Server.Stats().Canary
		return st != nil && st.RoundTripMS > 0 && !st.At.IsZero()
	})
	if st.Failures != 0 || st.LastError != "" {
		t.Errorf("canary %+v, want no failure on an idle relay", st)
	}
	// Its deliveries are counted apart from the relay's users'.
	if s := rl.Server.Stats(); s.CanaryDeliveries == 0 || s.Deliveries != 0 {
		t.Errorf("relay Stats: %d canary deliveries, %d others; want the canary's counted apart and none else", s.CanaryDeliveries, s.Deliveries)
	}
	cancel()
	<-done
	if st := (relaytest.Start(t, relay.Options{})).Server.Stats().Canary; st != nil {
		t.Errorf("without Options.Canary, Stats.Canary = %+v, want nil", st)
	}
}
