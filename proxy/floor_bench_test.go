package proxy_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	r3 "github.com/r3labs/sse/v2"

	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/webhooks"
)

// The floor: what one 4 KiB delivery costs at the least, stage by stage,
// to compare the forwarder's cost per delivery with (docs/PERFORMANCE.md):
//
//	go test -run '^$' -bench 'Floor' -benchmem -count 6 ./proxy/

// floorBody is a 4 KiB compact JSON body.
func floorBody() []byte {
	body := []byte(`{"action":"opened","x":"` + strings.Repeat("a", 4<<10-26) + `"}`)
	return body
}

// floorEvent is the message hookline serve writes for a 4 KiB delivery to
// hookline forward (lean: bodyB without body), with its id line.
func floorEvent() []byte {
	body := floorBody()
	sig, _ := webhooks.Sign("floor", body)
	f := wire.NewFrame(wire.Message{
		Header: []wire.Header{
			{Name: "content-type", Value: "application/json"},
			{Name: "x-github-delivery", Value: "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
			{Name: "x-github-event", Value: "issues"},
			{Name: "x-hub-signature-256", Value: sig},
		},
		Body: body, Query: []byte("{}"), Timestamp: time.Unix(1763805600, 0),
	})
	return append([]byte("id: 1\n"), f.Hookline(body).Bytes()...)
}

// BenchmarkFloorReadEvent reads one 4 KiB delivery's event with r3labs'
// EventStreamReader from a stream of them, as SSETransport does.
func BenchmarkFloorReadEvent(b *testing.B) {
	ev := floorEvent()
	stream := bytes.Repeat(ev, 1000)
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	r := r3.NewEventStreamReader(bytes.NewReader(stream), sse.DefaultMaxEventSize)
	for b.Loop() {
		if _, err := r.ReadEvent(); err == io.EOF {
			r = r3.NewEventStreamReader(bytes.NewReader(stream), sse.DefaultMaxEventSize)
			if _, err := r.ReadEvent(); err != nil {
				b.Fatal(err)
			}
		} else if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorDecode decodes one 4 KiB delivery's message (its data
// line) into a Delivery: headers, base64 body.
func BenchmarkFloorDecode(b *testing.B) {
	ev := floorEvent()
	data := ev[bytes.Index(ev, []byte("data: "))+6 : len(ev)-2]
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	buf := make([]byte, len(data))
	for b.Loop() {
		copy(buf, data) // Decode writes the body over bodyB's text
		if _, err := proxy.Decode(sse.Event{ID: "1", Data: buf}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorHMAC computes one X-Hub-Signature-256 of 4 KiB.
func BenchmarkFloorHMAC(b *testing.B) {
	body := floorBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := webhooks.Sign("floor", body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorPOST sends one 4 KiB POST with net/http's default
// transport to a loopback server, kept alive, and reads the answer: the
// client's and the server's cost together.
func BenchmarkFloorPOST(b *testing.B) {
	body := floorBody()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer target.Close()
	client := &http.Client{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, target.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
