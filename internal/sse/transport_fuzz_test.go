package sse_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/testutil/ssetest"
	"github.com/hookline/hookline/internal/wire"
)

// bodyTransport answers every request with a 200 event stream whose body is
// the given bytes, without a network.
type bodyTransport []byte

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    io.NopCloser(bytes.NewReader(b)),
		Request: r,
	}, nil
}

// FuzzSSETransport feeds arbitrary bytes to HTTPTransport as a relay's
// stream (r3labs' reader behind the event-size limiter and the
// end-of-stream guard) and every event it passes on to wire.DecodeDelivery. Whatever the
// bytes: no panic, Subscribe returns a stream-end error, no event is empty
// or over the size limit (the limit is small here so the limiter is
// exercised), and no half-received event gets through.
//
//	go test ./internal/sse -run '^$' -fuzz FuzzSSETransport -fuzztime 1m
func FuzzSSETransport(f *testing.F) {
	for _, name := range ssetest.FixtureNames(f) {
		if b := ssetest.Fixture(f, name); len(b) < 1<<20 {
			f.Add(b)
		}
	}
	f.Add([]byte("id: 1\ndata: {\"x-github-event\":\"push\",\"bodyB\":\"e30=\"}\n\n"))
	f.Add([]byte("event: ready\ndata: {}\n\nid: 2\ndata: " + string(bytes.Repeat([]byte("x"), 600)) + "\n\nid: 3\ndata: after\n\n"))
	f.Add([]byte("id: 1\r\ndata: a\r\n\r\ndata: cut off"))
	f.Add([]byte(":\n\n\r\r\nid\ndata\n\nretry: x\n\n"))
	// Size hints (an old relay's comment): no reader may size a buffer
	// from one.
	f.Add([]byte(": hookline-size 67108864\n\n: hookline-size 67108864\nid: 1\ndata: {}\n\n"))
	const limit = 512
	f.Fuzz(func(t *testing.T, stream []byte) {
		tr := &sse.HTTPTransport{Client: &http.Client{Transport: bodyTransport(stream)}, MaxEventSize: limit, IdleTimeout: -1}
		var events []sse.Event
		err := tr.Subscribe(t.Context(), sse.Request{URL: "http://relay.test/chan"}, func(ev sse.Event) {
			events = append(events, ev)
			if wire.Classify(ev.Event, ev.Data) == wire.KindDelivery {
				wire.DecodeDelivery(ev.Data) // must not panic
			}
		})
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("Subscribe = %v, want the end of the stream", err)
		}
		for i, ev := range events {
			switch {
			case ev.Event == sse.OversizeEvent:
			case len(ev.Data) == 0:
				t.Errorf("event %d has no data: %+v", i, ev)
			case len(ev.Data) > limit:
				t.Errorf("event %d has %d bytes of data, over the %d-byte limit", i, len(ev.Data), limit)
			case ev.Event == "hookline-truncated-event":
				t.Errorf("event %d is the marker of a cut-off event", i)
			}
		}
	})
}

// A hostile relay (or anyone on a plain-http path) sends comments that an
// old hookline relay used as size hints, ": hookline-size N": the client
// allocates for the bytes that arrive, never for a hint. An earlier reader
// allocated min(N, max) per hint: 5,200 bytes of them cost 12,800 MiB.
func TestTransportIgnoresSizeHints(t *testing.T) {
	hint := []byte(": hookline-size 67108864\n\n")
	stream := bytes.Repeat(hint, 5200/len(hint)+1)
	stream = append(stream, "id: 1\ndata: {}\n\n"...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var n int
	tr := &sse.HTTPTransport{Client: &http.Client{Transport: bodyTransport(stream)}, IdleTimeout: -1}
	tr.Subscribe(t.Context(), sse.Request{URL: "http://relay.test/chan"}, func(sse.Event) { n++ })
	runtime.ReadMemStats(&after)
	if n != 1 {
		t.Errorf("%d events, want 1", n)
	}
	// A fixed budget for the reader, the client and the test: far below
	// one 64 MiB hint.
	t.Logf("allocated %d KiB for %d bytes of hints", (after.TotalAlloc-before.TotalAlloc)>>10, len(stream))
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("reading %d bytes of size-hint comments allocated %d MiB", len(stream), alloc>>20)
	}
}
