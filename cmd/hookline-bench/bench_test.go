package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hookline/hookline/internal/testutil/testenv"
)

func TestMain(m *testing.M) {
	if code, ok := asChild(); ok {
		// The harness started this test binary as one of its processes
		// (the floor tool's), as it starts the bench command itself.
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestQuick runs the benchmark command's quick mode: the real hookline
// binary, the real smee-client and the direct baseline, each on a fresh `hookline serve`. It checks
// correctness only: every delivery arrives once, byte-exact, and the report
// is well formed. Timings are never asserted (SPEC section 10). It needs
// node and `npm ci --prefix interop` (see internal/testutil/testenv); -short skips it.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the benchmark smoke run starts relays, forwarders and smee-client")
	}
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Missing(t, "node", "install Node.js 20+, then run `npm ci --prefix interop`")
	}
	testenv.NodePackage(t, "smee-client")
	o, err := parseOptions([]string{"--quick", "--tools", "direct,floor,hookline,smee"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	o.workDir = t.TempDir()
	o.hookline = testenv.BuildHookline(t) // the build the other packages' tests share
	var progress bytes.Buffer
	rep, err := measure(t.Context(), o, &progress)
	if err != nil {
		t.Fatalf("measure: %v\nprogress:\n%s", err, progress.String())
	}

	if len(rep.Scenarios) != len(quickScenarios) {
		t.Fatalf("report has %d scenarios, want %d", len(rep.Scenarios), len(quickScenarios))
	}
	for _, sr := range rep.Scenarios {
		if len(sr.Trials) != len(o.tools) {
			t.Errorf("%s: %d trials, want one per tool (%d)", sr.Scenario.Name, len(sr.Trials), len(o.tools))
		}
		for _, r := range sr.Trials {
			if r.Received != int64(r.N) || r.Lost != 0 || r.NotExact != 0 || r.Duplicates != 0 || r.Unknown != 0 || r.PublishErrors != 0 {
				t.Errorf("%s, %s: received %d of %d, lost %d, not exact %d, duplicates %d, unknown %d, publish errors %d (%s); want every delivery once, byte-exact",
					sr.Scenario.Name, r.Tool, r.Received, r.N, r.Lost, r.NotExact, r.Duplicates, r.Unknown, r.PublishErrors, r.Note)
			}
			if r.PerSecond <= 0 || r.P50 <= 0 || r.P50 > r.P99 || r.P99 > r.Max {
				t.Errorf("%s, %s: rate %g/s, p50 %g, p99 %g, max %g ms: not a well-formed measurement", sr.Scenario.Name, r.Tool, r.PerSecond, r.P50, r.P99, r.Max)
			}
			if r.Tool != toolDirect && (r.FwdPeakRSS <= 0 || r.RelayPeakRSS <= 0) {
				t.Errorf("%s, %s: forwarder peak RSS %d, relay %d: not measured", sr.Scenario.Name, r.Tool, r.FwdPeakRSS, r.RelayPeakRSS)
			}
			// The binary's pages, resident at the end, are part of the
			// peak and never all of it (the heap and stacks are not files).
			if r.Tool != toolDirect && (r.FwdFileRSS <= 0 || r.FwdFileRSS >= r.FwdPeakRSS) {
				t.Errorf("%s, %s: forwarder's file-backed RSS %d of a peak of %d: not measured", sr.Scenario.Name, r.Tool, r.FwdFileRSS, r.FwdPeakRSS)
			}
		}
	}

	var out bytes.Buffer
	writeReport(&out, rep)
	text := out.String()
	for _, want := range []string{
		rep.Machine.CPU, "smee-client " + rep.Machine.Smee,
		"**quick-4KiB**", "**quick-1MiB**",
		"| direct POST (baseline) |", "| hookline forward |", "| smee-client |",
		"| hookline / smee-client |", "| hookline − direct |",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
	var back report
	if b, err := json.Marshal(rep); err != nil || json.Unmarshal(b, &back) != nil || len(back.Scenarios) != len(rep.Scenarios) {
		t.Errorf("the JSON report does not round-trip: %v", err)
	}
	if t.Failed() {
		t.Logf("progress:\n%s\nreport:\n%s", progress.String(), text)
	}
}

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr bool
		check   func(options) bool
	}{
		{nil, false, func(o options) bool {
			return len(o.scenarios) == len(defaultScenarios) && o.rounds == 3 && len(o.tools) == 5
		}},
		{[]string{"--quick"}, false, func(o options) bool { return o.rounds == 1 && o.scenarios[0].Name == "quick-4KiB" }},
		{[]string{"--n", "500", "--size", "1MiB", "--rate", "50"}, false, func(o options) bool {
			s := o.scenarios[0]
			return len(o.scenarios) == 1 && s.N == 500 && s.Size == 1<<20 && s.Rate == 50 && s.Window == 1
		}},
		{[]string{"--scenarios", "25MiB,4kib"}, false, func(o options) bool {
			return len(o.scenarios) == 2 && o.scenarios[0].Name == "25MiB" && o.scenarios[1].Name == "4KiB"
		}},
		{[]string{"--scenarios", "5MiB,20mib"}, false, func(o options) bool {
			return len(o.scenarios) == 2 && o.scenarios[0].Size == 5<<20 && o.scenarios[1].Size == 20<<20 && o.scenarios[1].Window == 1
		}},
		{[]string{"--tools", "smee-client,hookline"}, false, func(o options) bool { return strings.Join(o.tools, ",") == "smee,hookline" }},
		{[]string{"--size", "3GiB"}, true, nil},
		{[]string{"--quick", "--n", "5"}, true, nil},
		{[]string{"--tools", "gosmee-server"}, true, nil},
		{[]string{"--scenarios", "huge"}, true, nil},
		{[]string{"--body", "xml"}, true, nil},
		{[]string{"extra"}, true, nil},
	} {
		o, err := parseOptions(tc.args, &bytes.Buffer{})
		if (err != nil) != tc.wantErr {
			t.Errorf("parseOptions(%q) error = %v, want error %v", tc.args, err, tc.wantErr)
			continue
		}
		if err == nil && !tc.check(o) {
			t.Errorf("parseOptions(%q) = %+v", tc.args, o)
		}
	}
}

// TestJSONBodies checks that the generated JSON bodies are what smee-client
// can relay byte-exact: valid, compact, exactly the size asked.
func TestJSONBodies(t *testing.T) {
	p := newPayload(3, 4096, "json", "s")
	for i, b := range p.bodies {
		var v map[string]any
		if len(b) != 4096 || json.Unmarshal(b, &v) != nil {
			t.Fatalf("body %d: %d bytes, valid JSON %v", i, len(b), json.Valid(b))
		}
		compact, _ := json.Marshal(v)
		if len(compact) != len(b) {
			t.Errorf("body %d is not compact JSON that JSON.stringify would keep", i)
		}
	}
}
