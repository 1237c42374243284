package proxy_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/hookline/hookline/proxy"
)

// BenchmarkClient measures deliveries per second and allocations per
// delivery from an SSE source on loopback through Client (decode, verify,
// forward through rest) to a local target:
//
//	go test -run '^$' -bench BenchmarkClient -benchmem -count 6 ./proxy/
func BenchmarkClient(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(sizeName(size), func(b *testing.B) { benchmarkClient(b, size, 1) })
	}
}

// BenchmarkClientTargets compares one target with two (fan-out, each its
// lane), 4 KiB in order; a delivery counts when every target has it:
//
//	go test -run '^$' -bench BenchmarkClientTargets -count 6 ./proxy/
func BenchmarkClientTargets(b *testing.B) {
	b.Run("one", func(b *testing.B) { benchmarkClient(b, 4<<10, 1) })
	b.Run("two", func(b *testing.B) { benchmarkClient(b, 4<<10, 2) })
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}

func benchmarkClient(b *testing.B, size, targets int) {
	const secret = "bench-secret"
	body := bytes.Repeat([]byte("a"), size)
	copy(body, `{"action":"opened","x":"`)
	body[len(body)-2], body[len(body)-1] = '"', '}'
	msg, err := json.Marshal(map[string]any{
		"x-github-event": "issues", "x-github-delivery": "bench-00000000", "content-type": "application/json",
		"x-hub-signature-256": hmacSHA256(secret, body),
		"bodyB":               base64.StdEncoding.EncodeToString(body),
		"query":               map[string]string{}, "timestamp": 1763805600000,
	})
	if err != nil {
		b.Fatal(err)
	}
	n := b.N
	source := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		bw := &bytes.Buffer{}
		for i := 1; i <= n; i++ {
			// A delivery id of its own, as GitHub gives: one id seen again
			// and again within seconds is a forwarding loop (ErrLoop).
			copy(msg[bytes.Index(msg, []byte("bench-"))+6:], fmt.Sprintf("%08d", i))
			fmt.Fprintf(bw, "id: %d\ndata: %s\n\n", i, msg)
			if bw.Len() > 1<<20 || i == n {
				w.Write(bw.Bytes())
				bw.Reset()
			}
		}
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	defer source.Close()
	got := make(chan struct{}, n*targets)
	opts := proxy.Options{URL: source.URL + "/c", Secret: secret, Logger: slog.New(slog.DiscardHandler)}
	for range targets {
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			got <- struct{}{}
		}))
		defer target.Close()
		opts.Targets = append(opts.Targets, proxy.Target{URL: target.URL})
	}
	c, err := proxy.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	go c.Run(ctx)
	for i := 0; i < n*targets; i++ {
		<-got
	}
	b.StopTimer()
	if s := c.Stats(); s.Verified != int64(n) {
		b.Fatalf("verified %d of %d", s.Verified, n)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "deliveries/s")
}
