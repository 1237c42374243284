package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/relay"
)

// TestCollectorsAreConsistent: every metric collected is described, names
// and help pass client_golang's lint (its version of promtool's), and the
// values are the Stats' own.
func TestCollectorsAreConsistent(t *testing.T) {
	r := NewRegistry()
	r.Relay(func() relay.Stats {
		return relay.Stats{Deliveries: 7, Subscribers: 2, Refused: relay.RefusedStats{Streams: 3}, PerChannel: map[string]int64{relay.ChannelKey("AbC"): 4}}
	})
	observe := r.Forward(func() proxy.Stats {
		return proxy.Stats{Received: 5, Replayed: 1, Forwarded: 4, TargetFails: 1, Targets: map[string]proxy.TargetStats{"app": {Forwarded: 4, Failed: 1, Waiting: 2}}}
	}, func() int64 { return 1 })
	observe(proxy.Result{Targets: []*proxy.TargetResult{{Name: "app", Status: 200, Duration: 3 * time.Millisecond}}})
	r.Watch(func() WatchStats { return WatchStats{Polls: 2, Recovered: 1} })
	if _, err := r.Gather(); err != nil {
		t.Fatalf("gathering: %v", err)
	}
	problems, err := testutil.GatherAndLint(r.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	want := `# HELP hookline_relay_refusals_total Requests the relay refused, by the limit that refused them.
# TYPE hookline_relay_refusals_total counter
hookline_relay_refusals_total{limit="connections"} 0
hookline_relay_refusals_total{limit="redeliveries"} 0
hookline_relay_refusals_total{limit="streams"} 3
hookline_relay_refusals_total{limit="too_large"} 0
hookline_relay_refusals_total{limit="unauthorized"} 0
hookline_relay_refusals_total{limit="unsigned"} 0
hookline_relay_refusals_total{limit="uploads"} 0
# HELP hookline_forward_deliveries_replayed_total Deliveries replayed on request (the inspector's), not read from the relay.
# TYPE hookline_forward_deliveries_replayed_total counter
hookline_forward_deliveries_replayed_total 1
# HELP hookline_forward_target_waiting Deliveries waiting in a target's lane.
# TYPE hookline_forward_target_waiting gauge
hookline_forward_target_waiting{target="app"} 2
`
	if err := testutil.GatherAndCompare(r.Registry, strings.NewReader(want), "hookline_relay_refusals_total", "hookline_forward_deliveries_replayed_total", "hookline_forward_target_waiting"); err != nil {
		t.Error(err)
	}
	for name, want := range map[string]int{
		"hookline_relay_deliveries_received_total": 1,
		"hookline_relay_refusals_total":            7,
		"hookline_forward_deliveries_total":        11,
		"hookline_forward_target_deliveries_total": 2,
		"hookline_forward_target_duration_seconds": 1,
		"hookline_watch_recovered_total":           1,
	} {
		if n, err := testutil.GatherAndCount(r.Registry, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", name, n, err, want)
		}
	}
}
