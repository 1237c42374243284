package relay_test

import (
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
)

// TestCanary: with Options.Canary, the relay times deliveries POSTed to a
// channel of its own through its socket until they arrive on that
// channel's stream, and Stats (so /healthz) has the round trip.
func TestCanary(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{Canary: 20 * time.Millisecond})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c := rl.Server.Stats().Canary
		if c != nil && c.RoundTripMS > 0 && !c.At.IsZero() {
			if c.Failures != 0 || c.LastError != "" {
				t.Errorf("canary %+v, want no failure on an idle relay", c)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no canary round trip: %+v", c)
		}
		time.Sleep(10 * time.Millisecond) // polls a real relay
	}
	if c := (relaytest.Start(t, relay.Options{})).Server.Stats().Canary; c != nil {
		t.Errorf("without Options.Canary, Stats.Canary = %+v, want nil", c)
	}
}
