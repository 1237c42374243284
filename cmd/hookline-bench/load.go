package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/webhooks"
)

// payload is a scenario's deliveries: bodies and their signatures, made
// once and published by every trial.
type payload struct {
	bodies [][]byte
	sigs   []string
	ctype  string
}

// newPayload makes n deliveries of size bytes: compact, GitHub-like JSON
// whose strings hold only letters and digits (JSON.stringify writes it back
// unchanged, so smee-client can relay it byte-exact), or random bytes.
func newPayload(n, size int, kind, secret string) *payload {
	p := &payload{bodies: make([][]byte, n), sigs: make([]string, n), ctype: "application/json"}
	if kind == "binary" {
		p.ctype = "application/octet-stream"
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	for i := range p.bodies {
		if kind == "binary" {
			b := make([]byte, size)
			for j := 0; j < len(b); j += 8 {
				v := rng.Uint64()
				for k := j; k < j+8 && k < len(b); k++ {
					b[k] = byte(v)
					v >>= 8
				}
			}
			p.bodies[i] = b
		} else {
			p.bodies[i] = jsonBody(i, size, rng)
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(p.bodies[i])
		p.sigs[i] = "sha256=" + hex.EncodeToString(mac.Sum(nil))
	}
	return p
}

// load is one trial: the payload and what the target saw of it. Times are
// nanoseconds since base, on the monotonic clock; 0 means not yet.
type load struct {
	*payload
	base    time.Time
	sent    []atomic.Int64 // when the publishing POST started
	arrived []atomic.Int64 // when the target had read the whole body, first time

	received   atomic.Int64 // distinct deliveries at the target
	duplicates atomic.Int64
	notExact   atomic.Int64  // first arrivals whose body differed
	unknown    atomic.Int64  // requests without a delivery id of this trial
	window     chan struct{} // a token per delivery in flight; nil: no limit
	all        chan struct{} // closed when every delivery has arrived
	allOnce    sync.Once
}

func (p *payload) newLoad() *load {
	return &load{
		payload: p,
		base:    time.Now(),
		sent:    make([]atomic.Int64, len(p.bodies)),
		arrived: make([]atomic.Int64, len(p.bodies)),
		all:     make(chan struct{}),
	}
}

// deliveryID is the X-GitHub-Delivery of delivery i: a UUID whose last
// group is the index.
func deliveryID(i int) string { return fmt.Sprintf("8a1f4e10-5b2c-4d3e-9f60-%012d", i) }

func parseDeliveryID(s string) (int, bool) {
	if len(s) != 36 || s[:24] != "8a1f4e10-5b2c-4d3e-9f60-" {
		return 0, false
	}
	i, err := strconv.Atoi(s[24:])
	return i, err == nil
}

func jsonBody(i, size int, rng *rand.Rand) []byte {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	head := fmt.Appendf(nil, `{"action":"opened","number":%d,"issue":{"number":%d,"title":"benchmark delivery %d","state":"open","body":"`, i, i, i)
	tail := `"},"repository":{"id":1296269,"full_name":"hookline/bench","private":false},"sender":{"login":"octocat","id":583231}}`
	pad := max(size-len(head)-len(tail), 0)
	b := make([]byte, 0, len(head)+pad+len(tail))
	b = append(b, head...)
	for j := 0; j < pad; j += 8 {
		v := rng.Uint64()
		for k := j; k < j+8 && k < pad; k++ {
			b = append(b, alnum[v%62])
			v /= 62
		}
	}
	return append(b, tail...)
}

func (l *load) now() int64 { return int64(time.Since(l.base)) + 1 }

// ServeHTTP is the target: it reads the body, notes the arrival and checks
// the bytes, then answers 200.
func (l *load) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.ContentLength > 0 && r.ContentLength <= 64<<20 {
		body = make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	} else {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	t := l.now()
	w.WriteHeader(http.StatusOK)
	i, ok := parseDeliveryID(r.Header.Get(webhooks.HeaderDelivery))
	if !ok || i >= len(l.bodies) {
		l.unknown.Add(1)
		return
	}
	if !l.arrived[i].CompareAndSwap(0, t) {
		l.duplicates.Add(1)
		return
	}
	if !bytes.Equal(body, l.bodies[i]) {
		l.notExact.Add(1)
	}
	if l.window != nil {
		select {
		case <-l.window:
		default:
		}
	}
	if l.received.Add(1) == int64(len(l.bodies)) {
		l.allOnce.Do(func() { close(l.all) })
	}
}

// serveTarget serves l on a loopback port until ctx ends.
func serveTarget(ctx context.Context, l *load) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: l, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}
	return "http://" + ln.Addr().String() + "/webhook", stop, nil
}

// publish POSTs every delivery to url, paced by s, and returns the number
// of POSTs that failed (not sent, or not answered 2xx).
func (l *load) publish(ctx context.Context, url string, s scenario) (failed int64, err error) {
	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: s.Publishers, DisableCompression: true},
		Timeout:   5 * time.Minute,
	}
	defer client.CloseIdleConnections()
	if s.Rate == 0 && s.Window > 0 {
		l.window = make(chan struct{}, s.Window)
	}
	jobs := make(chan int)
	var failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range s.Publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := l.post(ctx, client, url, i); err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
					if l.window != nil {
						select { // it will never arrive
						case <-l.window:
						default:
						}
					}
				}
			}
		}()
	}
	start := time.Now()
	interval := time.Duration(0)
	if s.Rate > 0 {
		interval = time.Duration(float64(time.Second) / s.Rate)
	}
feed:
	for i := range l.bodies {
		if interval > 0 {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					break feed
				}
			}
		}
		if l.window != nil {
			select {
			case l.window <- struct{}{}:
			case <-ctx.Done():
				break feed
			}
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if e, ok := firstErr.Load().(error); ok {
		err = e
	}
	return failures.Load(), err
}

func (l *load) post(ctx context.Context, client *http.Client, url string, i int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(l.bodies[i]))
	if err != nil {
		return err
	}
	h := req.Header
	h.Set("Content-Type", l.ctype)
	h.Set("User-Agent", "GitHub-Hookshot/bench")
	h.Set(webhooks.HeaderEvent, "issues")
	h.Set(webhooks.HeaderDelivery, deliveryID(i))
	h.Set(webhooks.HeaderHookID, "42")
	h.Set(webhooks.HeaderSignature256, l.sigs[i])
	l.sent[i].Store(l.now())
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST delivery %d: %s", i, resp.Status)
	}
	return nil
}

// latencies returns the publish-to-arrival times of the deliveries that
// arrived, and the span from the first publish to the last arrival.
func (l *load) latencies() (lat []time.Duration, span time.Duration) {
	var first, last int64
	for i := range l.bodies {
		s, a := l.sent[i].Load(), l.arrived[i].Load()
		if s != 0 && (first == 0 || s < first) {
			first = s
		}
		if a == 0 || s == 0 {
			continue
		}
		last = max(last, a)
		lat = append(lat, time.Duration(a-s))
	}
	if last > first {
		span = time.Duration(last - first)
	}
	return lat, span
}
