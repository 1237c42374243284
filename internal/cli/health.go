package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/proxy"
)

// forwardHealth is what `forward --health ADDR` serves at /healthz, for
// people who run forward as a long-lived sidecar (gosmee's --health-port):
// whether the subscription is connected, since when, the last delivery,
// and the client's counters. 200 while connected, 503 otherwise, so that a
// probe can restart a forwarder that cannot reach its relay.
type forwardHealth struct {
	stats   func() proxy.Stats
	metrics http.Handler       // /metrics
	observe func(proxy.Result) // the metrics' latencies

	connections atomic.Int64 // connections to the relay made

	mu    sync.Mutex
	state proxy.State
	since time.Time
	err   string
	last  time.Time // the last delivery handled
	// stopping: the first Ctrl-C came; forward drains what is in flight
	// and exits. /healthz answers 503 "stopping" until then.
	stopping bool
}

// stop marks forward as stopping.
func (h *forwardHealth) stop() {
	h.mu.Lock()
	h.stopping = true
	h.mu.Unlock()
}

func (h *forwardHealth) onState(sc proxy.StateChange) {
	if sc.State == proxy.StateReady {
		return // still connected
	}
	if sc.State == proxy.StateConnected {
		h.connections.Add(1)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state, h.since, h.err = sc.State, time.Now(), ""
	if sc.Err != nil {
		h.err = sc.Err.Error()
	}
}

func (h *forwardHealth) onResult(r proxy.Result) {
	h.mu.Lock()
	h.last = time.Now()
	h.mu.Unlock()
	if h.observe != nil {
		h.observe(r)
	}
}

func (h *forwardHealth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/metrics" && h.metrics != nil {
		h.metrics.ServeHTTP(w, r)
		return
	}
	if r.URL.Path != "/healthz" && r.URL.Path != "/health" { // /health: gosmee's path
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	h.mu.Lock()
	doc := struct {
		Status       string      `json:"status"`
		Since        time.Time   `json:"since"`
		Error        string      `json:"error,omitempty"`
		LastDelivery *time.Time  `json:"lastDelivery,omitempty"`
		Stats        proxy.Stats `json:"stats"`
	}{Status: "starting", Since: h.since, Error: h.err}
	if h.state != "" {
		doc.Status = string(h.state)
	}
	if h.stopping {
		doc.Status = "stopping"
	}
	if !h.last.IsZero() {
		last := h.last
		doc.LastDelivery = &last
	}
	connected := h.state == proxy.StateConnected && !h.stopping
	h.mu.Unlock()
	doc.Stats = h.stats()
	code := http.StatusOK
	if !connected {
		code = http.StatusServiceUnavailable
	}
	b, _ := json.Marshal(doc) // plain fields: cannot fail
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// serveHealth serves h on addr until closed: through the drain after the
// first Ctrl-C too, when it answers 503 "stopping" (a probe sees forward
// stop, rather than a refused connection while deliveries finish).
func serveHealth(addr string, h http.Handler) (url string, closeFn func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--health %s: cannot listen: %w; pick another address", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) // ends with ErrServerClosed at close
	return "http://" + ln.Addr().String() + "/healthz", func() { srv.Close() }, nil
}
