package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/testenv"
)

// TestMetricsScrapedByPrometheus: a real Prometheus (Debian's) scrapes
// serve's /metrics and forward's (--health), and PromQL through its HTTP
// API gives the deliveries that went through both; promtool checks both
// outputs against Prometheus' conventions.
func TestMetricsScrapedByPrometheus(t *testing.T) {
	server, promtool := testenv.Prometheus(t)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	serve := startCommand(t, "serve", "--no-color", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--canary", "100ms")
	serve.waitOut(t, "new channel: ")
	relayURL := strings.Fields(lineWith(serve.out.String(), "listening on"))[4]
	channel := strings.Fields(lineWith(serve.out.String(), "new channel: "))[2]
	target := newRecordingTarget(t, nil)
	fwd := startForward(t, "--url", channel, "--target", target.URL, "--no-state", "--health", "127.0.0.1:0")
	fwd.waitErr(t, "connected")
	healthURL := strings.Fields(lineWith(fwd.err.String(), "health: "))[1]
	const n = 3
	for i := range n {
		req, _ := http.NewRequest(http.MethodPost, channel, strings.NewReader(`{"n":`+fmt.Sprint(i)+`}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("metrics-%d", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	waitUntil(t, "the deliveries at the target", func() bool { return len(target.requests()) == n })

	relayMetrics := strings.TrimSuffix(relayURL, "/") + "/metrics"
	forwardMetrics := strings.TrimSuffix(healthURL, "/healthz") + "/metrics"
	for _, u := range []string{relayMetrics, forwardMetrics} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics %s: %v\n%s", u, err, out)
		}
	}

	// Prometheus scrapes both every second.
	hostOf := func(raw string) string { u, _ := url.Parse(raw); return u.Host }
	dir := t.TempDir()
	config := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: serve\n    static_configs: [{targets: [%q]}]\n  - job_name: forward\n    static_configs: [{targets: [%q]}]\n",
		hostOf(relayMetrics), hostOf(forwardMetrics))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	promAddr := ln.Addr().String()
	ln.Close() // Prometheus takes the port; a race with another process is unlikely and fails loudly
	var promLog bytes.Buffer
	prom := exec.Command(server, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	prom.Stdout, prom.Stderr = &promLog, &promLog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prom.Process.Kill(); prom.Wait() })
	query := func(q string) string {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		var ans struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&ans) != nil || len(ans.Data.Result) != 1 {
			return ""
		}
		v, _ := ans.Data.Result[0].Value[1].(string)
		return v
	}
	// Each expression keeps its series only when it holds (PromQL's
	// comparison filters): wait until it has one. The relay counts the
	// canary's deliveries (one each 100 ms) apart: its users' are n.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Prometheus' log:\n%s", promLog.String())
		}
	})
	for _, q := range []string{
		`hookline_relay_deliveries_received_total{job="serve"} == ` + fmt.Sprint(n),
		`hookline_relay_canary_deliveries_total{job="serve"} > 0`,
		`hookline_relay_history_write_duration_seconds_count{job="serve"} >= ` + fmt.Sprint(n),
		`hookline_relay_canary_round_trip_seconds{job="serve"} > 0`,
		`hookline_forward_deliveries_total{job="forward",outcome="forwarded"} == ` + fmt.Sprint(n),
		`sum(hookline_forward_target_duration_seconds_count{job="forward"}) == ` + fmt.Sprint(n),
		`hookline_forward_delivery_lag_seconds_count{job="forward"} == ` + fmt.Sprint(n),
		`hookline_relay_deliveries_sent_total{job="serve"} >= ` + fmt.Sprint(n),
	} {
		testenv.Poll(t, "Prometheus to answer "+q, 100*time.Millisecond, func() bool { return query(q) != "" }) // it scrapes every second
	}
}
