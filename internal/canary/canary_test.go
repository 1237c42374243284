package canary

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
)

// TestCanary: against a real relay on loopback, the canary's deliveries
// come back on its channel's stream and their round trip is measured, and
// the relay reports it in Stats (so /healthz).
func TestCanary(t *testing.T) {
	c := &Canary{}
	rl := relaytest.Start(t, relay.Options{Canary: c.Stats})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, rl.Base, 20*time.Millisecond, slog.New(slog.DiscardHandler)) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := rl.Server.Stats().Canary
		if st != nil && st.RoundTripMS > 0 && !st.At.IsZero() {
			if st.Failures != 0 || st.LastError != "" {
				t.Errorf("canary %+v, want no failure on an idle relay", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no canary round trip: %+v", st)
		}
		time.Sleep(10 * time.Millisecond) // polls a real relay
	}
	cancel()
	<-done
	if st := (relaytest.Start(t, relay.Options{})).Server.Stats().Canary; st != nil {
		t.Errorf("without Options.Canary, Stats.Canary = %+v, want nil", st)
	}
}
