package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/proxy"
)

// transports are the Transport implementations that must behave alike: the
// conformance tests below run every case on each.
var transports = []struct {
	name string
	new  func(max int, idle time.Duration) proxy.Transport
}{
	{"r3labs", func(max int, idle time.Duration) proxy.Transport {
		return &proxy.SSETransport{MaxEventSize: max, IdleTimeout: idle}
	}},
	{"stdlib", func(max int, idle time.Duration) proxy.Transport {
		return &proxy.StdlibTransport{MaxEventSize: max, IdleTimeout: idle}
	}},
}

func forEachTransport(t *testing.T, test func(t *testing.T, newT func(max int, idle time.Duration) proxy.Transport)) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { test(t, tr.new) })
	}
}

func TestTransportsDeliverEveryFixture(t *testing.T) {
	forEachTransport(t, func(t *testing.T, newT func(int, time.Duration) proxy.Transport) {
		for name := range fixtureWant {
			srv := serveFixture(t, name)
			got := newCollect()
			err := newT(0, 0).Subscribe(t.Context(), proxy.SubscribeRequest{URL: srv.URL + "/chan"}, got.add)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("%s: Subscribe = %v, want an error wrapping io.EOF", name, err)
			}
			if want := fixtureEvents(t, name); !eventsEqual(got.all(), want) {
				t.Errorf("%s: events =\n%q\nwant\n%q", name, got.all(), want)
			}
			r := srv.request(0)
			if accept := r.Header.Values("Accept"); len(accept) != 1 || accept[0] != "text/event-stream" {
				t.Errorf("%s: Accept = %q, want exactly [text/event-stream]", name, accept)
			}
		}
	})
}

func TestTransportsRequest(t *testing.T) {
	forEachTransport(t, func(t *testing.T, newT func(int, time.Duration) proxy.Transport) {
		srv := serveFixture(t, "hookline.txt")
		var order []string
		req := proxy.SubscribeRequest{
			URL:         srv.URL + "/chan",
			LastEventID: "41",
			Header:      http.Header{"accept": {"application/json"}, "Last-Event-Id": {"999"}, "X-Relay-Token": {"t1", "t2"}},
			OnOpen:      func() { order = append(order, "open") },
		}
		err := newT(0, 0).Subscribe(t.Context(), req, func(proxy.SSEEvent) { order = append(order, "event") })
		if !errors.Is(err, io.EOF) || len(order) < 2 || order[0] != "open" || order[1] != "event" {
			t.Fatalf("Subscribe = %v with calls %q, want EOF after open, then events", err, order)
		}
		r := srv.request(0)
		got := []string{strings.Join(r.Header.Values("Accept"), ","), strings.Join(r.Header.Values("Last-Event-Id"), ","), r.Header.Get("X-Relay-Token")}
		if want := []string{"text/event-stream", "41", "t1, t2"}; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("Accept, Last-Event-ID, X-Relay-Token = %q, want %q", got, want)
		}
	})
}

// TestTransportsParse covers the SSE syntax: line endings, fields, comments,
// ids carried over, empty data, names, split reads.
func TestTransportsParse(t *testing.T) {
	stream := "\xef\xbb\xbf: a comment first\r\n" +
		"id: 1\r\nevent: ready\r\ndata: {}\r\n\r\n" +
		"data:no space\rdata:  two spaces\r\r" + // CR endings, the id carries over
		"id: 2\ndata\ndata: x\n\n" + // "data" without a colon is an empty line of data
		"id\ndata: id reset\n\n" +
		"event: only a name\n\n" + // no data: not dispatched
		"data:\n\n" + // empty data: not dispatched
		"retry: 5\nunknown: field\n: comment\ndata: last\n\n" +
		": hookline-size 12\ndata: sized\n\n" + // a size hint, as relay.SizeHint
		": hookline-size 1\ndata: larger than the hint\n\n" +
		": hookline-size 99999999999999999999\n: hookline-size x\ndata: bad hints\n\n"
	want := []proxy.SSEEvent{
		{ID: "1", Event: "ready", Data: []byte("{}")},
		{ID: "1", Data: []byte("no space\n two spaces")},
		{ID: "2", Data: []byte("\nx")},
		{ID: "", Data: []byte("id reset")},
		{ID: "", Data: []byte("last")},
		{ID: "", Data: []byte("sized")},
		{ID: "", Data: []byte("larger than the hint")},
		{ID: "", Data: []byte("bad hints")},
	}
	if !eventsEqual(parseSSE([]byte(strings.TrimPrefix(stream, "\xef\xbb\xbf"))), append(append(want[:4:4], proxy.SSEEvent{Data: []byte{}}), want[4:]...)) {
		// parseSSE (the reference) dispatches "data:" with empty data,
		// which transports drop, as r3labs does.
		t.Fatalf("the reference parser disagrees with the test: %q", parseSSE([]byte(stream)))
	}
	for _, tr := range transports {
		if tr.name == "r3labs" {
			continue // r3labs keeps the id on "id" without a value, and the byte order mark
		}
		t.Run(tr.name, func(t *testing.T) {
			for _, chunk := range []int{1, 2, 3, 7, 64 << 10} {
				srv := newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					for s := stream; len(s) > 0; {
						n := min(chunk, len(s))
						io.WriteString(w, s[:n])
						http.NewResponseController(w).Flush()
						s = s[n:]
					}
				})
				got := newCollect()
				if err := tr.new(0, 0).Subscribe(t.Context(), proxy.SubscribeRequest{URL: srv.URL}, got.add); !errors.Is(err, io.EOF) {
					t.Fatalf("chunks of %d: Subscribe = %v, want EOF", chunk, err)
				}
				if evs := got.all(); !eventsEqual(evs, want) {
					t.Errorf("chunks of %d: events =\n%q\nwant\n%q", chunk, evs, want)
				}
			}
		})
	}
}

func TestTransportsLargeEvents(t *testing.T) {
	body := randomBytes(25<<20, 25)
	frame := bigEvent("1", body)
	srv := newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeStream(w, append(append([]byte("event: ready\ndata: {}\n\n"), frame...), bigEvent("2", body[:70<<10])...))
	})
	forEachTransport(t, func(t *testing.T, newT func(int, time.Duration) proxy.Transport) {
		var sizes []int
		err := newT(0, 0).Subscribe(t.Context(), proxy.SubscribeRequest{URL: srv.URL}, func(ev proxy.SSEEvent) {
			m, err := proxy.Decode(ev)
			switch {
			case err != nil:
				t.Errorf("Decode: %v", err)
			case m.Kind == proxy.KindDelivery && !bytes.Equal(m.Delivery.Body, body[:len(m.Delivery.Body)]):
				t.Errorf("delivery %s: body differs", ev.ID)
			case m.Kind == proxy.KindDelivery:
				sizes = append(sizes, len(m.Delivery.Body))
			}
		})
		if !errors.Is(err, io.EOF) || len(sizes) != 2 || sizes[0] != len(body) || sizes[1] != 70<<10 {
			t.Errorf("Subscribe = %v with bodies of %v bytes, want EOF after %d and %d", err, sizes, len(body), 70<<10)
		}
	})
}

func TestTransportsEventTooLarge(t *testing.T) {
	srv := newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeStream(w, []byte("id: 1\ndata: small\n\nid: 2\ndata: "+strings.Repeat("x", 4096)+"\ndata: more\n\nid: 3\ndata: after\n\n"))
	})
	want := []proxy.SSEEvent{
		{ID: "1", Data: []byte("small")},
		{ID: "2", Event: proxy.OversizeEvent, Data: []byte(`{"limit":1024}`)},
		{ID: "3", Data: []byte("after")},
	}
	forEachTransport(t, func(t *testing.T, newT func(int, time.Duration) proxy.Transport) {
		got := newCollect()
		if err := newT(1024, 0).Subscribe(t.Context(), proxy.SubscribeRequest{URL: srv.URL}, got.add); !errors.Is(err, io.EOF) {
			t.Errorf("Subscribe = %v, want a clean EOF", err)
		}
		if evs := got.all(); !eventsEqual(evs, want) {
			t.Errorf("events = %q, want %q", evs, want)
		}
		if _, err := proxy.Decode(got.all()[1]); !errors.Is(err, bufio.ErrTooLong) {
			t.Errorf("Decode(oversize event) = %v, want ErrTooLong", err)
		}
	})
}

func TestTransportsIdle(t *testing.T) {
	const idle = 100 * time.Millisecond
	silent := newSSEServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		writeStream(w, []byte("event: ready\ndata: {}\n\n"))
		holdOpen(r)
	})
	noHeaders := newSSEServer(t, func(_ int, _ http.ResponseWriter, r *http.Request) { holdOpen(r) })
	keepalive := newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeStream(w, []byte("event: ready\ndata: {}\n\n"))
		for range 12 {
			time.Sleep(25 * time.Millisecond)
			io.WriteString(w, ": keepalive\n\n")
			http.NewResponseController(w).Flush()
		}
	})
	slow := newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeStream(w, []byte("data: {\"x-a\":\"1\"}\n\ndata: {\"x-a\":\"2\"}\n\n"))
	})
	forEachTransport(t, func(t *testing.T, newT func(int, time.Duration) proxy.Transport) {
		if err := newT(0, idle).Subscribe(t.Context(), proxy.SubscribeRequest{URL: silent.URL}, func(proxy.SSEEvent) {}); !errors.Is(err, proxy.ErrIdle) {
			t.Errorf("silent stream: Subscribe = %v, want ErrIdle", err)
		}
		if err := newT(0, idle).Subscribe(t.Context(), proxy.SubscribeRequest{URL: noHeaders.URL}, func(proxy.SSEEvent) {}); !errors.Is(err, proxy.ErrIdle) {
			t.Errorf("no response headers: Subscribe = %v, want ErrIdle", err)
		}
		if err := newT(0, 250*time.Millisecond).Subscribe(t.Context(), proxy.SubscribeRequest{URL: keepalive.URL}, func(proxy.SSEEvent) {}); !errors.Is(err, io.EOF) {
			t.Errorf("keepalives: Subscribe = %v, want EOF", err)
		}
		n := 0
		err := newT(0, idle).Subscribe(t.Context(), proxy.SubscribeRequest{URL: slow.URL}, func(proxy.SSEEvent) {
			if n++; n == 1 {
				time.Sleep(3 * idle)
			}
		})
		if !errors.Is(err, io.EOF) || n != 2 {
			t.Errorf("slow handler: Subscribe = %v after %d events, want EOF after 2", err, n)
		}
	})
}

func TestTransportsTruncatedEvent(t *testing.T) {
	complete := "id: 1\ndata: {\"x-a\":\"1\"}\n\n"
	forEachTransport(t, func(t *testing.T, newT func(int, time.Duration) proxy.Transport) {
		for _, tt := range []struct {
			name, tail string
			abort      bool
		}{
			{"mid-line", `data: {"x-github-event":"pu`, false},
			{"without the blank line", "id: 2\ndata: {\"x-a\":\"2\"}\n", false},
			{"CRLF without the blank line", "data: {\"x-a\":\"2\"}\r\n", false},
			{"a comment without the blank line", ": ping\n", false},
			{"connection reset mid-line", `data: {"x-github-event":"pu`, true},
		} {
			srv := newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				writeStream(w, []byte(complete+tt.tail))
				if tt.abort {
					panic(http.ErrAbortHandler)
				}
			})
			got := newCollect()
			err := newT(0, 0).Subscribe(t.Context(), proxy.SubscribeRequest{URL: srv.URL}, got.add)
			if !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, proxy.ErrPermanent) {
				t.Errorf("%s: Subscribe = %v, want a retryable error wrapping io.ErrUnexpectedEOF", tt.name, err)
			}
			if evs := got.all(); len(evs) != 1 || evs[0].ID != "1" {
				t.Errorf("%s: events = %q, want only the complete one", tt.name, evs)
			}
		}
	})
}

func TestTransportsRefuse(t *testing.T) {
	notFound := newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		http.NotFound(w, nil)
	})
	busy := newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	page := newSSEServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html>gosmee</html>")
	})
	closed := newSSEServer(t, nil)
	closed.Close()
	forEachTransport(t, func(t *testing.T, newT func(int, time.Duration) proxy.Transport) {
		var se *proxy.StatusError
		secret := func(base string) string {
			return strings.Replace(base, "http://", "http://user:hunter2@", 1) + "/chan?token=s3cr3t"
		}
		err := newT(0, 0).Subscribe(t.Context(), proxy.SubscribeRequest{URL: secret(notFound.URL)}, func(proxy.SSEEvent) {})
		if !errors.As(err, &se) || se.StatusCode != 404 || !errors.Is(err, proxy.ErrPermanent) || se.RetryAfter != 7*time.Second {
			t.Errorf("404: Subscribe = %v, want a permanent *StatusError with Retry-After", err)
		}
		err = newT(0, 0).Subscribe(t.Context(), proxy.SubscribeRequest{URL: busy.URL}, func(proxy.SSEEvent) {})
		if !errors.As(err, &se) || se.StatusCode != 429 || errors.Is(err, proxy.ErrPermanent) {
			t.Errorf("429: Subscribe = %v, want a retryable *StatusError", err)
		}
		err = newT(0, 0).Subscribe(t.Context(), proxy.SubscribeRequest{URL: page.URL + "/abc"}, func(proxy.SSEEvent) {})
		if !errors.Is(err, proxy.ErrNotEventStream) || !strings.Contains(err.Error(), page.URL+"/events/abc") {
			t.Errorf("a page: Subscribe = %v, want ErrNotEventStream suggesting /events/abc", err)
		}
		for _, base := range []string{notFound.URL, closed.URL} {
			err := newT(0, 0).Subscribe(t.Context(), proxy.SubscribeRequest{URL: secret(base)}, func(proxy.SSEEvent) {})
			if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "/chan?token=xxxxx") {
				t.Errorf("Subscribe = %v, which leaks a credential or hides the channel", err)
			}
		}
		for _, u := range []string{"", "smee.io/abc", "ftp://host/x", "http:///nohost"} {
			if err := newT(0, 0).Subscribe(t.Context(), proxy.SubscribeRequest{URL: u}, func(proxy.SSEEvent) {}); !errors.Is(err, proxy.ErrPermanent) {
				t.Errorf("Subscribe(%q) = %v, want ErrPermanent", u, err)
			}
		}
	})
}

func TestTransportsContext(t *testing.T) {
	srv := newSSEServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		writeStream(w, []byte("event: ready\ndata: {}\n\n"))
		holdOpen(r)
	})
	forEachTransport(t, func(t *testing.T, newT func(int, time.Duration) proxy.Transport) {
		ctx, cancel := context.WithCancel(t.Context())
		if err := newT(0, 0).Subscribe(ctx, proxy.SubscribeRequest{URL: srv.URL}, func(proxy.SSEEvent) { cancel() }); !errors.Is(err, context.Canceled) {
			t.Errorf("cancel while streaming: Subscribe = %v, want context.Canceled", err)
		}
		ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if err := newT(0, 0).Subscribe(ctx, proxy.SubscribeRequest{URL: srv.URL}, func(proxy.SSEEvent) {}); err != context.DeadlineExceeded {
			t.Errorf("deadline: Subscribe = %v, want context.DeadlineExceeded", err)
		}
	})
}

// memoryRoundTripper answers every request with an event stream of body,
// without a network.
type memoryRoundTripper []byte

func (b memoryRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    io.NopCloser(bytes.NewReader(b)),
		Request: r,
	}, nil
}

// FuzzStdlibTransport compares StdlibTransport's events with the tests'
// reference parser (parseSSE, written from the specification) on any
// stream.
//
//	go test -run '^$' -fuzz FuzzStdlibTransport ./proxy/
func FuzzStdlibTransport(f *testing.F) {
	for name := range fixtureWant {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte("id: 1\r\ndata: a\r\rdata\n\nevent: x\ndata: b\n\n: c\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		if bytes.IndexByte(stream, 0) >= 0 || bytes.HasPrefix(stream, []byte("\xef\xbb\xbf")) {
			return // ids with NUL and the byte order mark: the reference does not handle them
		}
		var want []proxy.SSEEvent
		// parseSSE treats the end of its input as a line break; a partial
		// line at the end keeps it from dispatching an unfinished event.
		for _, ev := range parseSSE(append(bytes.Clone(stream), 'x')) {
			if len(ev.Data) > 0 { // transports drop events with empty data
				want = append(want, ev)
			}
		}
		got := newCollect()
		tr := &proxy.StdlibTransport{Client: &http.Client{Transport: memoryRoundTripper(stream)}, IdleTimeout: -1}
		err := tr.Subscribe(context.Background(), proxy.SubscribeRequest{URL: "http://relay.test/c"}, got.add)
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("Subscribe = %v", err)
		}
		if evs := got.all(); !eventsEqual(evs, want) {
			t.Fatalf("events =\n%q\nwant\n%q", evs, want)
		}
	})
}

// BenchmarkTransports streams deliveries of one size (hookline's extended
// format: JSON body and bodyB) over one loopback connection through each
// transport and decodes them; it reports the heap in use after a 25 MiB
// delivery, which holds what the transport keeps for the rest of the
// connection.
//
//	go test -run '^$' -bench Transports -benchmem ./proxy/
func BenchmarkTransports(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20, 25 << 20} {
		body := []byte(`{"action":"opened","pad":"` + strings.Repeat("x", size-len(`{"action":"opened","pad":""}`)) + `"}`)
		frame := hooklineFrame(body)
		for _, tr := range transports {
			b.Run(fmt.Sprintf("%s/%s", sizeName(size), tr.name), func(b *testing.B) {
				n := b.N
				srv := newSSEServer(b, func(_ int, w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					for range n {
						if _, err := w.Write(frame); err != nil {
							return
						}
					}
				})
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				var ms runtime.MemStats
				got := 0
				b.ResetTimer()
				err := tr.new(0, 0).Subscribe(context.Background(), proxy.SubscribeRequest{URL: srv.URL}, func(ev proxy.SSEEvent) {
					m, err := proxy.Decode(ev)
					if err != nil || m.Kind != proxy.KindDelivery || len(m.Delivery.Body) != len(body) {
						b.Fatalf("Decode: %v", err)
					}
					if got++; got == n && size >= 1<<20 {
						runtime.GC()
						runtime.ReadMemStats(&ms)
					}
				})
				b.StopTimer()
				if !errors.Is(err, io.EOF) || got != n {
					b.Fatalf("Subscribe = %v after %d of %d events", err, got, n)
				}
				if size >= 1<<20 {
					b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
				}
			})
		}
	}
}

// hooklineFrame returns the SSE frame hookline serve sends an extended
// subscriber for a JSON body: the headers, "body" (the JSON as sent),
// "query", "timestamp" and "bodyB".
func hooklineFrame(body []byte) []byte {
	var b bytes.Buffer
	b.WriteString(`id: 1` + "\n" + `data: {"content-type":"application/json","x-github-delivery":"d1","x-github-event":"issues","body":`)
	b.Write(body)
	b.WriteString(`,"query":{},"timestamp":1700000000000,"bodyB":"`)
	b.Write(base64.StdEncoding.AppendEncode(nil, body))
	b.WriteString("\"}\n\n")
	return b.Bytes()
}
