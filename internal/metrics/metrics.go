// Package metrics exposes hookline's counters to Prometheus with
// github.com/prometheus/client_golang: the relay's (hookline serve), the
// forwarder's (forward --health) and the delivery watcher's (deliveries
// --watch --health), each served at /metrics.
//
// Names follow Prometheus' conventions: the hookline_ prefix, then the
// part (relay_, forward_, watch_), base units (seconds, bytes), _total on
// counters. The counters are read from the parts' own Stats when
// Prometheus scrapes (one source of truth: /healthz shows the same numbers);
// only latencies are observed as they happen, into histograms. There is no
// per-channel label: a relay's channels are unbounded, and each would be a
// time series (serve --metrics-per-channel adds one, keyed by a hash of the
// name, which is the channel's secret). Targets are labelled by name: a
// forward has a few.
package metrics

import (
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/relay"
)

// Registry is a registry with the Go runtime's and the process's
// collectors, and Handler serves it.
type Registry struct{ *prometheus.Registry }

// NewRegistry returns a Registry with the standard collectors.
func NewRegistry() Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return Registry{r}
}

// Handler serves the registry's metrics in Prometheus' text format.
func (r Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.Registry, promhttp.HandlerOpts{Registry: r.Registry})
}

// stat is a metric read from a snapshot S of a part's counters.
type stat[S any] struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(S) float64
}

// snapshotCollector collects stats from one call of snap per scrape.
type snapshotCollector[S any] struct {
	snap  func() S
	stats []stat[S]
	// extra collects the labelled metrics of extraDescs.
	extra      func(S, chan<- prometheus.Metric)
	extraDescs []*prometheus.Desc
}

func (c snapshotCollector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.stats {
		ch <- s.desc
	}
	for _, d := range c.extraDescs {
		ch <- d
	}
}

func (c snapshotCollector[S]) Collect(ch chan<- prometheus.Metric) {
	snap := c.snap()
	for _, s := range c.stats {
		ch <- prometheus.MustNewConstMetric(s.desc, s.kind, s.value(snap))
	}
	if c.extra != nil {
		c.extra(snap, ch)
	}
}

func counter[S any](name, help string, v func(S) float64) stat[S] {
	return stat[S]{prometheus.NewDesc(name, help, nil, nil), prometheus.CounterValue, v}
}

func gauge[S any](name, help string, v func(S) float64) stat[S] {
	return stat[S]{prometheus.NewDesc(name, help, nil, nil), prometheus.GaugeValue, v}
}

// refusedDesc is the relay's refusals, by the limit that refused.
var refusedDesc = prometheus.NewDesc("hookline_relay_refusals_total", "Requests the relay refused, by the limit that refused them.", []string{"limit"}, nil)

// channelDesc is deliveries per channel (serve --metrics-per-channel).
var channelDesc = prometheus.NewDesc("hookline_relay_channel_deliveries_received_total", "Deliveries a channel received, by channel key (sha256: of its name; the name is its secret).", []string{"channel"}, nil)

// The canary's (serve --canary).
var (
	canaryRTTDesc      = prometheus.NewDesc("hookline_relay_canary_round_trip_seconds", "The canary's last round trip through the relay: POST to its channel, arrival on the channel's stream.", nil, nil)
	canaryFailuresDesc = prometheus.NewDesc("hookline_relay_canary_failures_total", "Canary round trips that did not come back in time.", nil, nil)
)

// Relay registers the relay's counters, read from stats.
func (r Registry) Relay(stats func() relay.Stats) {
	r.MustRegister(snapshotCollector[relay.Stats]{snap: stats, extraDescs: []*prometheus.Desc{refusedDesc, canaryRTTDesc, canaryFailuresDesc, channelDesc}, extra: func(s relay.Stats, ch chan<- prometheus.Metric) {
		for key, n := range s.PerChannel {
			ch <- prometheus.MustNewConstMetric(channelDesc, prometheus.CounterValue, float64(n), key)
		}
		if c := s.Canary; c != nil {
			ch <- prometheus.MustNewConstMetric(canaryRTTDesc, prometheus.GaugeValue, c.RoundTripMS/1000)
			ch <- prometheus.MustNewConstMetric(canaryFailuresDesc, prometheus.CounterValue, float64(c.Failures))
		}
		for _, l := range []struct {
			name string
			n    int64
		}{{"uploads", s.Refused.Uploads}, {"streams", s.Refused.Streams}, {"redeliveries", s.Refused.Redeliveries}, {"too_large", s.Refused.TooLarge}, {"unauthorized", s.Refused.Unauthorized}, {"unsigned", s.Refused.Unsigned}, {"connections", s.ConnsRefused}} {
			ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(l.n), l.name)
		}
	}, stats: []stat[relay.Stats]{
		counter("hookline_relay_deliveries_received_total", "Deliveries received (redeliveries included) since the relay started, the canary's apart.", func(s relay.Stats) float64 { return float64(s.Deliveries) }),
		counter("hookline_relay_canary_deliveries_total", "The canary's deliveries (serve --canary), not in hookline_relay_deliveries_received_total.", func(s relay.Stats) float64 { return float64(s.CanaryDeliveries) }),
		counter("hookline_relay_deliveries_sent_total", "Deliveries written to subscribers' streams (one per subscriber; replays of the history included).", func(s relay.Stats) float64 { return float64(s.Sent) }),
		gauge("hookline_relay_channels", "Channels with a subscriber or a retained delivery.", func(s relay.Stats) float64 { return float64(s.Channels) }),
		gauge("hookline_relay_streams", "Open subscriber streams.", func(s relay.Stats) float64 { return float64(s.Subscribers) }),
		gauge("hookline_relay_history_deliveries", "Deliveries held in the channels' histories.", func(s relay.Stats) float64 { return float64(s.Retained) }),
		gauge("hookline_relay_history_bytes", "Counted size of the deliveries in the histories.", func(s relay.Stats) float64 { return float64(s.HistoryBytes) }),
		gauge("hookline_relay_pinned_bytes", "Counted size of deliveries only streams hold (queued, being written), beyond the history.", func(s relay.Stats) float64 { return float64(s.PinnedBytes) }),
		gauge("hookline_relay_upload_bytes", "Bytes reserved by the request bodies being received.", func(s relay.Stats) float64 { return float64(s.UploadBytes) }),
		gauge("hookline_relay_connections", "Connections the relay holds, streams included.", func(s relay.Stats) float64 { return float64(s.Connections) }),
		counter("hookline_relay_subscribers_cut_off_total", "Slow subscribers cut off.", func(s relay.Stats) float64 { return float64(s.CutOff) }),
		gauge("hookline_relay_ack_replicas", "Redis replicas each POST's append waits for before its 2xx (serve --redis-min-replicas).", func(s relay.Stats) float64 { return float64(s.AckReplicas) }),
		counter("hookline_relay_unreplicated_total", "Deliveries Redis's primary took but too few replicas confirmed in time: answered 503, not relayed.", func(s relay.Stats) float64 { return float64(s.Unreplicated) }),
	}})
}

// HistoryWrites registers the histogram of the relay's durable writes
// (hookline serve --data-dir) and returns what observes one.
func (r Registry) HistoryWrites() func(time.Duration) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "hookline_relay_history_write_duration_seconds", Help: "Time of each durable write of the history (a bbolt transaction, synced to disk).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	})
	r.MustRegister(h)
	return func(d time.Duration) { h.Observe(d.Seconds()) }
}

// outcomeDesc is forward's deliveries by outcome.
var outcomeDesc = prometheus.NewDesc("hookline_forward_deliveries_total", "Deliveries handled, by outcome.", []string{"outcome"}, nil)

// targetDescs are forward's per-target counts, with several targets.
var (
	targetDeliveriesDesc = prometheus.NewDesc("hookline_forward_target_deliveries_total", "Deliveries sent to a target, by target and outcome (forwarded: 2xx).", []string{"target", "outcome"}, nil)
	targetWaitingDesc    = prometheus.NewDesc("hookline_forward_target_waiting", "Deliveries waiting in a target's lane.", []string{"target"}, nil)
)

// Forward registers a forwarder's counters, read from stats, and returns
// what observes each Result (the target's latency, in
// hookline_forward_target_duration_seconds).
func (r Registry) Forward(stats func() proxy.Stats, connections func() int64) func(proxy.Result) {
	r.MustRegister(snapshotCollector[proxy.Stats]{snap: stats, stats: []stat[proxy.Stats]{
		counter("hookline_forward_deliveries_received_total", "Deliveries read from the relay.", func(s proxy.Stats) float64 { return float64(s.Received) }),
		counter("hookline_forward_deliveries_replayed_total", "Deliveries replayed on request (the inspector's), not read from the relay.", func(s proxy.Stats) float64 { return float64(s.Replayed) }),
		gauge("hookline_forward_in_flight", "Deliveries being handled now.", func(s proxy.Stats) float64 { return float64(s.InFlight) }),
		counter("hookline_forward_gaps_total", "Gaps the relay reported (deliveries it no longer had).", func(s proxy.Stats) float64 { return float64(s.Gaps) }),
		counter("hookline_forward_gap_deliveries_total", "Deliveries the relay's gaps lost, where it said how many.", func(s proxy.Stats) float64 { return float64(s.GapLost) }),
		counter("hookline_forward_malformed_total", "Relay messages that could not be read.", func(s proxy.Stats) float64 { return float64(s.Malformed) }),
		counter("hookline_forward_connections_total", "Connections to the relay made (the first, then each reconnection).", func(proxy.Stats) float64 { return float64(connections()) }),
	}, extraDescs: []*prometheus.Desc{outcomeDesc, targetDeliveriesDesc, targetWaitingDesc}, extra: func(s proxy.Stats, ch chan<- prometheus.Metric) {
		for _, o := range []struct {
			name string
			n    int64
		}{
			{"forwarded", s.Forwarded}, {"target_failed", s.TargetFails}, {"bad_signature", s.VerifyFailed},
			{"verified", s.Verified}, {"unverified", s.Unverified}, {"filtered", s.Filtered}, {"duplicate", s.Duplicates},
			{"handler_failed", s.HandlerFails}, {"lost", s.Lost}, {"unrouted", s.Unrouted}, {"saved_for_replay", s.FailedSaved},
		} {
			ch <- prometheus.MustNewConstMetric(outcomeDesc, prometheus.CounterValue, float64(o.n), o.name)
		}
		names := make([]string, 0, len(s.Targets))
		for name := range s.Targets {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			t := s.Targets[name]
			ch <- prometheus.MustNewConstMetric(targetDeliveriesDesc, prometheus.CounterValue, float64(t.Forwarded), name, "forwarded")
			ch <- prometheus.MustNewConstMetric(targetDeliveriesDesc, prometheus.CounterValue, float64(t.Failed), name, "failed")
			ch <- prometheus.MustNewConstMetric(targetWaitingDesc, prometheus.GaugeValue, float64(t.Waiting), name)
		}
	}})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "hookline_forward_target_duration_seconds", Help: "Time from the first attempt to the target's answer, retries included.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"target"})
	r.MustRegister(latency)
	lag := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "hookline_forward_delivery_lag_seconds", Help: "Time from the relay's receipt of a delivery to the forwarder's (the relay's timestamp; same clock only on one machine).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	})
	r.MustRegister(lag)
	return func(res proxy.Result) {
		if d := res.Delivery; d != nil && !d.ReceivedAt.IsZero() && d.BodySource != delivery.BodyCapture && !res.Received.Before(d.ReceivedAt) {
			lag.Observe(res.Received.Sub(d.ReceivedAt).Seconds())
		}
		for _, t := range res.Targets {
			if t.Skipped || (t.Err != nil && t.Status == 0 && t.Duration == 0) {
				continue
			}
			name := t.Name
			if name == "" {
				name = "target"
			}
			latency.WithLabelValues(name).Observe(t.Duration.Seconds())
		}
	}
}

// WatchStats are the watcher's counts (deliveries --watch).
type WatchStats struct {
	Polls     int64 `json:"polls"`
	Recovered int64 `json:"recovered"`   // by this process
	Failed    int64 `json:"failed_seen"` // deliveries with no successful attempt, last poll
	Waiting   int64 `json:"waiting"`     // of those, still within the grace period
}

// Watch registers the delivery watcher's counters, read from stats.
func (r Registry) Watch(stats func() WatchStats) {
	r.MustRegister(snapshotCollector[WatchStats]{snap: stats, stats: []stat[WatchStats]{
		counter("hookline_watch_polls_total", "Looks at GitHub's deliveries completed.", func(s WatchStats) float64 { return float64(s.Polls) }),
		counter("hookline_watch_recovered_total", "Deliveries recovered (redelivered or replayed here) by this process.", func(s WatchStats) float64 { return float64(s.Recovered) }),
		gauge("hookline_watch_failed_deliveries", "Deliveries with no successful attempt at the last look.", func(s WatchStats) float64 { return float64(s.Failed) }),
		gauge("hookline_watch_waiting_deliveries", "Of those, the ones still within the grace period.", func(s WatchStats) float64 { return float64(s.Waiting) }),
	}})
}
