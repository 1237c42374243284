package sse_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/testutil/ssetest"
	"github.com/hookline/hookline/internal/wire"
)

// Benchmarks of the relay client's receiving side: SSE transport (r3labs)
// plus Decode, through a local httptest server (the server's writing cost is
// in the figures too).
//
//	go test ./proxy/ -run '^$' -bench 'Relay|R3labs' -benchmem

// BenchmarkRelayStream streams b.N gosmee-format events of one size over one
// connection and decodes each.
func BenchmarkRelayStream(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			frame := bigEvent("1", randomBytes(size*3/4, 7)) // bodyB of about size bytes
			n := b.N
			srv := ssetest.NewServer(b, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for range n {
					if _, err := w.Write(frame); err != nil {
						return
					}
				}
			})
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			got := 0
			b.ResetTimer()
			start := time.Now()
			err := (&sse.HTTPTransport{}).Subscribe(context.Background(), sse.Request{URL: srv.URL}, func(ev sse.Event) {
				if _, err := wire.DecodeDelivery(ev.Data); err != nil {
					b.Fatalf("DecodeDelivery: %v", err)
				}
				got++
			})
			elapsed := time.Since(start)
			b.StopTimer()
			if !errors.Is(err, io.EOF) || got != n {
				b.Fatalf("Subscribe = %v after %d of %d events", err, got, n)
			}
			b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
		})
	}
}

// BenchmarkRelay25MiB sends one delivery with the largest body (25 MiB,
// 33.3 MiB of base64 in bodyB) per connection and decodes it.
func BenchmarkRelay25MiB(b *testing.B) {
	body := randomBytes(25<<20, 25)
	frame := bigEvent("1", body)
	srv := ssetest.NewServer(b, func(_ int, w http.ResponseWriter, _ *http.Request) { ssetest.WriteStream(w, frame) })
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		var d *delivery.Delivery
		err := (&sse.HTTPTransport{}).Subscribe(context.Background(), sse.Request{URL: srv.URL}, func(ev sse.Event) {
			var err error
			if d, err = wire.DecodeDelivery(ev.Data); err != nil {
				b.Fatal(err)
			}
		})
		if !errors.Is(err, io.EOF) || d == nil || !bytes.Equal(d.Body, body) {
			b.Fatalf("Subscribe = %v; delivery arrived intact: %v", err, d != nil && bytes.Equal(d.Body, body))
		}
	}
}
