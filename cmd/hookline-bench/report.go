package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hookline/hookline/internal/bytesize"
)

// result is one trial's figures. Latencies are in milliseconds, memory in
// bytes, CPU in seconds.
type result struct {
	Scenario string  `json:"scenario"`
	Tool     string  `json:"tool"`
	Round    int     `json:"round"`
	N        int     `json:"n"`
	Size     int     `json:"size"`
	Rate     float64 `json:"rate"`

	PublishErrors int64 `json:"publishErrors"`
	Received      int64 `json:"received"`   // distinct deliveries at the target
	Lost          int64 `json:"lost"`       // never arrived
	Duplicates    int64 `json:"duplicates"` // arrived more than once
	NotExact      int64 `json:"notExact"`   // arrived with other bytes than published
	Unknown       int64 `json:"unknown"`    // requests that were no delivery of the trial

	Seconds   float64 `json:"seconds"`   // first publish to last arrival
	PerSecond float64 `json:"perSecond"` // Received / Seconds
	P50       float64 `json:"p50ms"`
	P95       float64 `json:"p95ms"`
	P99       float64 `json:"p99ms"`
	Max       float64 `json:"maxms"`

	FwdPeakRSS int64 `json:"forwarderPeakRSS,omitempty"`
	// FwdFileRSS is how much of the forwarder's resident memory at the end
	// was files' pages (RssFile: a Go forwarder's binary, node's and its
	// libraries for smee-client), the rest being its own.
	FwdFileRSS   int64   `json:"forwarderFileRSS,omitempty"`
	FwdCPU       float64 `json:"forwarderCPUSeconds,omitempty"`
	RelayPeakRSS int64   `json:"relayPeakRSS,omitempty"`
	RelayCPU     float64 `json:"relayCPUSeconds,omitempty"`
	HarnessCPU   float64 `json:"harnessCPUSeconds"`     // this program's: publishers and target
	CutOff       int64   `json:"relayCutOff,omitempty"` // the relay cut the forwarder off as too slow
	Note         string  `json:"note,omitempty"`
	// Ready is from starting the forwarder to the relay counting it as a
	// subscriber (polled every 5 ms).
	Ready float64 `json:"readyms,omitempty"`
}

// fill computes the delivery figures from what the target saw.
func (r *result) fill(l *load) {
	r.Received = l.received.Load()
	r.Lost = int64(r.N) - r.Received
	r.Duplicates = l.duplicates.Load()
	r.NotExact = l.notExact.Load()
	r.Unknown = l.unknown.Load()
	lat, span := l.latencies()
	r.Seconds = span.Seconds()
	if span > 0 {
		r.PerSecond = float64(r.Received) / span.Seconds()
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	if len(lat) > 0 {
		r.P50, r.P95, r.P99 = ms(percentile(lat, 0.50)), ms(percentile(lat, 0.95)), ms(percentile(lat, 0.99))
		r.Max = ms(lat[len(lat)-1])
	}
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// line is a trial's figures on one line, for progress.
func (r result) line() string {
	s := fmt.Sprintf("%8.0f/s  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  lost %d  not exact %d",
		r.PerSecond, r.P50, r.P99, r.Max, r.Lost, r.NotExact)
	if r.Duplicates > 0 {
		s += fmt.Sprintf("  duplicates %d", r.Duplicates)
	}
	if r.Tool != toolDirect {
		s += fmt.Sprintf("  forwarder %s (files %s), %.2f s CPU  relay %s, %.2f s CPU", bytesize.Format(r.FwdPeakRSS), bytesize.Format(r.FwdFileRSS), r.FwdCPU, bytesize.Format(r.RelayPeakRSS), r.RelayCPU)
	}
	if r.CutOff > 0 {
		s += fmt.Sprintf("  cut off %d×", r.CutOff)
	}
	if r.PublishErrors > 0 {
		s += fmt.Sprintf("  publish errors %d (%s)", r.PublishErrors, r.Note)
	}
	return s
}

// summary is one tool's medians over the rounds, and its totals.
type summary struct {
	Tool                          string
	Rounds                        int
	PerSecond, P50, P95, P99, Max float64
	FwdPeakRSS, RelayPeakRSS      float64
	FwdCPU, RelayCPU, HarnessCPU  float64
	Ready                         float64
	Lost, NotExact, Duplicates    int64
	Deliveries                    int64
	CutOff, PublishErrors         int64
}

type scenarioReport struct {
	Scenario  scenario   `json:"scenario"`
	Trials    []result   `json:"trials"`
	Summaries []*summary `json:"-"`
}

func (sr *scenarioReport) summarize(tools []string) {
	sr.Summaries = nil
	for _, tool := range tools {
		s := &summary{Tool: tool}
		var rate, p50, p95, p99, mx, rss, rrss, cpu, rcpu, hcpu, ready []float64
		for _, r := range sr.Trials {
			if r.Tool != tool {
				continue
			}
			s.Rounds++
			rate, p50, p95, p99, mx = append(rate, r.PerSecond), append(p50, r.P50), append(p95, r.P95), append(p99, r.P99), append(mx, r.Max)
			rss, rrss, cpu, rcpu = append(rss, float64(r.FwdPeakRSS)), append(rrss, float64(r.RelayPeakRSS)), append(cpu, r.FwdCPU), append(rcpu, r.RelayCPU)
			hcpu, ready = append(hcpu, r.HarnessCPU), append(ready, r.Ready)
			s.Lost += r.Lost
			s.NotExact += r.NotExact
			s.Duplicates += r.Duplicates
			s.Deliveries += int64(r.N)
			s.CutOff += r.CutOff
			s.PublishErrors += r.PublishErrors
		}
		if s.Rounds == 0 {
			continue
		}
		s.PerSecond, s.P50, s.P95, s.P99, s.Max = median(rate), median(p50), median(p95), median(p99), median(mx)
		s.FwdPeakRSS, s.RelayPeakRSS, s.FwdCPU, s.RelayCPU, s.HarnessCPU = median(rss), median(rrss), median(cpu), median(rcpu), median(hcpu)
		s.Ready = median(ready)
		sr.Summaries = append(sr.Summaries, s)
	}
}

func (sr *scenarioReport) summary(tool string) *summary {
	for _, s := range sr.Summaries {
		if s.Tool == tool {
			return s
		}
	}
	return nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// report is everything one run measured.
type report struct {
	Machine            machineInfo      `json:"machine"`
	Started            string           `json:"started"`
	Rounds             int              `json:"rounds"`
	Body               string           `json:"body"`
	ForwardConcurrency int              `json:"forwardConcurrency"`
	Scenarios          []scenarioReport `json:"scenarios"`
}

var toolNames = map[string]string{
	toolDirect:   "direct POST (baseline)",
	toolHookline: "hookline forward",
	toolSmee:     "smee-client",
	toolGosmee:   "gosmee client",
	toolCompare:  "hookline forward (--compare binary)",
	toolFloor:    "floor (net/http relay and forwarder)",
}

// writeReport prints the tables in Markdown.
func writeReport(w io.Writer, rep *report) {
	m := rep.Machine
	fmt.Fprintf(w, "\n%s, %d CPUs, Linux %s, %s", m.CPU, m.CPUs, m.Kernel, m.Go)
	if m.Node != "" {
		fmt.Fprintf(w, ", node %s, smee-client %s", m.Node, m.Smee)
	}
	fmt.Fprintf(w, "; load average at start %s. %s bodies, hookline forward --concurrency %d. Medians of %d round(s); lost and not exact are totals.\n",
		m.LoadAvg, rep.Body, rep.ForwardConcurrency, rep.Rounds)
	for i := range rep.Scenarios {
		sr := &rep.Scenarios[i]
		fmt.Fprintf(w, "\n**%s** (%s)\n\n", sr.Scenario.Name, sr.Scenario.describe())
		fmt.Fprintln(w, "| tool | deliveries/s | p50 ms | p95 ms | p99 ms | max ms | lost | not exact | forwarder peak RSS | forwarder CPU s (µs/delivery) | relay peak RSS | relay CPU s (µs/delivery) | harness CPU µs/delivery | ready ms |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
		perDelivery := func(sec float64) string {
			return fmt.Sprintf("%.0f", sec*1e6/float64(max(sr.Scenario.N, 1)))
		}
		for _, s := range sr.Summaries {
			fwdRSS, fwdCPU, relRSS, relCPU, ready := "–", "–", "–", "–", "–"
			if s.Tool != toolDirect {
				ready = fmt.Sprintf("%.0f", s.Ready)
				fwdRSS, fwdCPU = bytesize.Format(int64(s.FwdPeakRSS)), fmt.Sprintf("%.2f (%s)", s.FwdCPU, perDelivery(s.FwdCPU))
				relRSS, relCPU = bytesize.Format(int64(s.RelayPeakRSS)), fmt.Sprintf("%.2f (%s)", s.RelayCPU, perDelivery(s.RelayCPU))
			}
			lost := fmt.Sprint(s.Lost)
			if s.Duplicates > 0 {
				lost += fmt.Sprintf(" (+%d dup.)", s.Duplicates)
			}
			if s.CutOff > 0 {
				lost += fmt.Sprintf(" (cut off %d×)", s.CutOff)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %d of %d | %s | %s | %s | %s | %s | %s |\n",
				toolNames[s.Tool], formatRate(s.PerSecond), formatMs(s.P50), formatMs(s.P95), formatMs(s.P99), formatMs(s.Max),
				lost, s.NotExact, s.Deliveries, fwdRSS, fwdCPU, relRSS, relCPU, perDelivery(s.HarnessCPU), ready)
		}
		hl, smee, direct := sr.summary(toolHookline), sr.summary(toolSmee), sr.summary(toolDirect)
		if hl != nil && smee != nil {
			fmt.Fprintf(w, "| hookline / smee-client | %s | %s | %s | %s | %s | | | %s | %s | | | | %s |\n",
				ratio(hl.PerSecond, smee.PerSecond), ratio(hl.P50, smee.P50), ratio(hl.P95, smee.P95), ratio(hl.P99, smee.P99), ratio(hl.Max, smee.Max),
				ratio(hl.FwdPeakRSS, smee.FwdPeakRSS), ratio(hl.FwdCPU, smee.FwdCPU), ratio(hl.Ready, smee.Ready))
		}
		if gs := sr.summary(toolGosmee); hl != nil && gs != nil {
			fmt.Fprintf(w, "| hookline / gosmee client | %s | %s | %s | %s | %s | | | %s | %s | | | | %s |\n",
				ratio(hl.PerSecond, gs.PerSecond), ratio(hl.P50, gs.P50), ratio(hl.P95, gs.P95), ratio(hl.P99, gs.P99), ratio(hl.Max, gs.Max),
				ratio(hl.FwdPeakRSS, gs.FwdPeakRSS), ratio(hl.FwdCPU, gs.FwdCPU), ratio(hl.Ready, gs.Ready))
		}
		// What one tool adds to another: the rate as a share, the
		// latencies added, the CPU as ratios (against direct, none).
		floor := sr.summary(toolFloor)
		for _, d := range []struct {
			name string
			a, b *summary
		}{{"hookline − direct", hl, direct}, {"floor − direct (one more hop)", floor, direct}, {"hookline − floor", hl, floor}} {
			if d.a == nil || d.b == nil {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | | | | %s | | %s | | |\n", d.name,
				percent(d.a.PerSecond, d.b.PerSecond), added(d.a.P50, d.b.P50), added(d.a.P95, d.b.P95), added(d.a.P99, d.b.P99), added(d.a.Max, d.b.Max),
				ratio(d.a.FwdCPU, d.b.FwdCPU), ratio(d.a.RelayCPU, d.b.RelayCPU))
		}
	}
}

func formatRate(v float64) string {
	if v < 100 {
		return fmt.Sprintf("%.1f", v)
	}
	s := fmt.Sprintf("%.0f", v)
	if len(s) > 3 {
		s = s[:len(s)-3] + "," + s[len(s)-3:]
	}
	return s
}

func formatMs(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return strings.TrimSuffix(fmt.Sprintf("%.2f", a/b), "0") + "×"
}

func percent(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}

func added(a, b float64) string { return fmt.Sprintf("%+.2f", a-b) }
