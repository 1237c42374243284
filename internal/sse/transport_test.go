package sse_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	r3 "github.com/r3labs/sse/v2"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/testutil/ssetest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/internal/wire"
)

func TestTransportDeliversEveryFixture(t *testing.T) {
	for _, name := range ssetest.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			srv := ssetest.ServeFixture(t, name)
			got := ssetest.NewCollect()
			tr := &sse.HTTPTransport{}
			err := tr.Subscribe(t.Context(), sse.Request{URL: srv.URL + "/chan"}, got.Add)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("Subscribe = %v, want an error wrapping io.EOF", err)
			}
			if want := ssetest.FixtureEvents(t, name); !ssetest.EventsEqual(got.All(), want) {
				t.Errorf("events =\n%+v\nwant\n%+v", got.All(), want)
			}
			r := srv.Request(0)
			if accept := r.Header.Values("Accept"); len(accept) != 1 || accept[0] != "text/event-stream" {
				t.Errorf("Accept = %q, want exactly [text/event-stream]", accept)
			}
			if id := r.Header.Get("Last-Event-ID"); id != "" {
				t.Errorf("Last-Event-ID = %q on a first connection", id)
			}
		})
	}
}

func TestTransportRequestHeaders(t *testing.T) {
	srv := ssetest.ServeFixture(t, "hookline.txt")
	tr := &sse.HTTPTransport{}
	req := sse.Request{
		URL:         srv.URL + "/chan",
		LastEventID: "41",
		Header:      http.Header{"accept": {"application/json"}, "Last-Event-Id": {"999"}, "X-Relay-Token": {"t1"}},
	}
	if err := tr.Subscribe(t.Context(), req, func(sse.Event) {}); !errors.Is(err, io.EOF) {
		t.Fatalf("Subscribe = %v, want EOF", err)
	}
	r := srv.Request(0)
	got := []string{strings.Join(r.Header.Values("Accept"), ","), strings.Join(r.Header.Values("Last-Event-Id"), ","), r.Header.Get("X-Relay-Token")}
	if want := []string{"text/event-stream", "41", "t1"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Accept, Last-Event-ID, X-Relay-Token = %q, want %q", got, want)
	}
}

func TestTransportOnOpen(t *testing.T) {
	srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		ssetest.WriteStream(w, []byte("data: {\"x-a\":\"1\"}\n\n"))
	})
	var order []string
	tr := &sse.HTTPTransport{}
	err := tr.Subscribe(t.Context(), sse.Request{URL: srv.URL, OnOpen: func() { order = append(order, "open") }},
		func(sse.Event) { order = append(order, "event") })
	if !errors.Is(err, io.EOF) || strings.Join(order, ",") != "open,event" {
		t.Errorf("Subscribe = %v with calls %q; want EOF with [open event]", err, order)
	}
}

// bigEvent returns an SSE frame holding a gosmee-format delivery of body,
// written out by hand (base64 needs no JSON escaping) so that building a
// 33 MiB frame stays cheap under the race detector.
func bigEvent(id string, body []byte) []byte {
	var b bytes.Buffer
	b.WriteString("id: " + id + "\ndata: {\"bodyB\":\"")
	b.WriteString(base64.StdEncoding.EncodeToString(body))
	b.WriteString(`","content-type":"application/octet-stream","timestamp":"1700000000000",`)
	b.WriteString(`"x-github-delivery":"big-` + id + `","x-github-event":"push"}` + "\n\n")
	return b.Bytes()
}

// randomBytes returns n reproducible pseudo-random bytes.
func randomBytes(n int, seed uint64) []byte {
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

func TestTransportLargeEvents(t *testing.T) {
	// The largest delivery hookline accepts, base64 in bodyB (33.3 MiB);
	// 4 MiB under -race, whose run checks the same path (testenv.Race).
	largest := 25 << 20
	if testenv.Race {
		largest = 4 << 20
	}
	tests := []struct {
		name string
		size int
	}{
		// r3labs' default 64 KiB buffer silently drops this one.
		{"70 KiB event", 70 << 10},
		{fmt.Sprintf("%d MiB body", largest>>20), largest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := randomBytes(tt.size, uint64(tt.size))
			want := ssetest.SHA256Hex(body) // computed here, from the bytes the test made
			frame := bigEvent("1", body)
			srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				ssetest.WriteStream(w, append([]byte("event: ready\ndata: {}\n\n"), frame...))
			})
			got := ssetest.NewCollect()
			err := (&sse.HTTPTransport{}).Subscribe(t.Context(), sse.Request{URL: srv.URL}, got.Add)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("Subscribe = %v, want EOF", err)
			}
			evs := got.All()
			if len(evs) != 2 {
				t.Fatalf("got %d events, want 2", len(evs))
			}
			d, err := wire.DecodeDelivery(evs[1].Data)
			if err != nil {
				t.Fatal(err)
			}
			if ssetest.SHA256Hex(d.Body) != want || !bytes.Equal(d.Body, body) || d.BodySource != delivery.BodyBase64 {
				t.Errorf("body: %d bytes, sha256 %s, source %q; want %d bytes, sha256 %s, bodyB", len(d.Body), ssetest.SHA256Hex(d.Body), d.BodySource, len(body), want)
			}
		})
	}
}

// TestTransportR3labsDefaultBufferDropsLargeEvents documents the defect
// that DefaultMaxEventSize neutralises: r3labs' reader with its default
// 64 KiB buffer cannot read a 70 KiB event at all.
func TestTransportR3labsDefaultBufferDropsLargeEvents(t *testing.T) {
	frame := bigEvent("1", randomBytes(70<<10, 1))
	_, err := r3.NewEventStreamReader(bytes.NewReader(frame), 64<<10).ReadEvent()
	if !errors.Is(err, bufio.ErrTooLong) {
		t.Errorf("r3labs with a 64 KiB buffer: ReadEvent = %v, want ErrTooLong", err)
	}
}

// An event over MaxEventSize is skipped, reported as an OversizeEvent with
// its id, and the events after it on the same connection still arrive.
func TestTransportEventTooLarge(t *testing.T) {
	srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		ssetest.WriteStream(w, []byte("id: 1\ndata: small\n\nid: 2\ndata: "+strings.Repeat("x", 4096)+"\n\nid: 3\ndata: after\n\n"))
	})
	got := ssetest.NewCollect()
	err := (&sse.HTTPTransport{MaxEventSize: 1024}).Subscribe(t.Context(), sse.Request{URL: srv.URL}, got.Add)
	if !errors.Is(err, io.EOF) {
		t.Errorf("Subscribe = %v, want a clean EOF", err)
	}
	want := []sse.Event{
		{ID: "1", Data: []byte("small")},
		{ID: "2", Event: sse.OversizeEvent, Data: []byte(`{"limit":1024}`)},
		{ID: "3", Data: []byte("after")},
	}
	if evs := got.All(); !ssetest.EventsEqual(evs, want) {
		t.Errorf("events = %+v, want %+v", evs, want)
	}
	err = sse.OversizeError(got.All()[1])
	if !errors.Is(err, bufio.ErrTooLong) || !strings.Contains(err.Error(), `id "2"`) || !strings.Contains(err.Error(), "1024-byte limit") {
		t.Errorf("OversizeError = %v, want ErrTooLong naming id 2 and the limit", err)
	}
}

// The idle watch, on synctest's clock: a stream silent for IdleTimeout ends
// with a retryable ErrIdle; keepalives and a slow handler do not count as
// silence.
func TestTransportIdle(t *testing.T) {
	const idle = 100 * time.Millisecond
	const url = "http://relay.test/chan"
	t.Run("silent stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			got := ssetest.NewCollect()
			client := ssetest.PipeStream(func(ctx context.Context, w io.Writer) {
				io.WriteString(w, "event: ready\ndata: {}\n\n")
				<-ctx.Done()
			})
			start := time.Now()
			err := (&sse.HTTPTransport{IdleTimeout: idle, Client: client}).Subscribe(t.Context(), sse.Request{URL: url}, got.Add)
			if !errors.Is(err, sse.ErrIdle) || errors.Is(err, sse.ErrPermanent) {
				t.Errorf("Subscribe = %v, want a retryable ErrIdle", err)
			}
			if len(got.All()) != 1 {
				t.Errorf("got %d events before going idle, want 1", len(got.All()))
			}
			if d := time.Since(start); d != idle {
				t.Errorf("idle after %v, want %v", d, idle)
			}
		})
	})
	t.Run("no response headers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			err := (&sse.HTTPTransport{IdleTimeout: idle, Client: ssetest.PipeStream(nil)}).Subscribe(t.Context(), sse.Request{URL: url}, func(sse.Event) {})
			if !errors.Is(err, sse.ErrIdle) || time.Since(start) != idle {
				t.Errorf("Subscribe = %v after %v, want ErrIdle after %v", err, time.Since(start), idle)
			}
		})
	})
	t.Run("keepalive comments are activity", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			client := ssetest.PipeStream(func(_ context.Context, w io.Writer) {
				io.WriteString(w, "event: ready\ndata: {}\n\n")
				for range 12 { // 12 × idle/2: six times longer than idle
					time.Sleep(idle / 2) // simulated (synctest)
					io.WriteString(w, ": keepalive\n\n")
				}
			})
			start := time.Now()
			err := (&sse.HTTPTransport{IdleTimeout: idle, Client: client}).Subscribe(t.Context(), sse.Request{URL: url}, func(sse.Event) {})
			if !errors.Is(err, io.EOF) || time.Since(start) != 6*idle {
				t.Errorf("Subscribe = %v after %v, want EOF after %v (keepalives kept it alive)", err, time.Since(start), 6*idle)
			}
		})
	})
	t.Run("a slow handler is not an idle stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			client := ssetest.PipeStream(func(_ context.Context, w io.Writer) {
				io.WriteString(w, "data: {\"x-a\":\"1\"}\n\ndata: {\"x-a\":\"2\"}\n\n")
			})
			got := ssetest.NewCollect()
			err := (&sse.HTTPTransport{IdleTimeout: idle, Client: client}).Subscribe(t.Context(), sse.Request{URL: url}, func(ev sse.Event) {
				if len(got.All()) == 0 {
					time.Sleep(3 * idle) // simulated (synctest)
				}
				got.Add(ev)
			})
			if !errors.Is(err, io.EOF) || len(got.All()) != 2 {
				t.Errorf("Subscribe = %v after %d events, want EOF after 2", err, len(got.All()))
			}
		})
	})
}

func TestTransportTruncatedEvent(t *testing.T) {
	complete := "id: 1\ndata: {\"x-a\":\"1\"}\n\n"
	tests := []struct {
		name, tail string
		abort      bool // cut the TCP connection instead of ending the response
	}{
		{"mid-line", `data: {"x-github-event":"pu`, false},
		{"without the blank line", "id: 2\ndata: {\"x-a\":\"2\"}\n", false},
		{"CRLF without the blank line", "data: {\"x-a\":\"2\"}\r\n", false},
		{"connection reset mid-line", `data: {"x-github-event":"pu`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				ssetest.WriteStream(w, []byte(complete+tt.tail))
				if tt.abort {
					panic(http.ErrAbortHandler) // net/http drops the connection
				}
			})
			got := ssetest.NewCollect()
			err := (&sse.HTTPTransport{}).Subscribe(t.Context(), sse.Request{URL: srv.URL}, got.Add)
			if !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, sse.ErrPermanent) {
				t.Errorf("Subscribe = %v, want a retryable error wrapping io.ErrUnexpectedEOF", err)
			}
			if evs := got.All(); len(evs) != 1 || evs[0].ID != "1" {
				t.Errorf("events = %+v, want only the complete one", evs)
			}
		})
	}
}

func TestTransportStatus(t *testing.T) {
	tests := []struct {
		status      int
		contentType string
		body        string
		permanent   bool
		inMessage   string
	}{
		{404, "text/plain", "Not Found", true, "relay answered 404 Not Found for "},
		{410, "", "", true, "check the channel URL"},
		{400, "text/plain", "invalid Last-Event-ID", true, `for <url>: invalid Last-Event-ID; check`},
		// A JSON error body (hookline serve's) is shown decoded, once:
		// before, its quotes came back escaped twice.
		{404, "application/json", `{"error":"no channel \"bad.name\": channel names are 1 to 128 characters"}`, true, `for <url>: no channel "bad.name": channel names are 1 to 128 characters; check the channel URL`},
		{401, "", "", true, "read token"},
		{403, "text/html", "Channel has been disabled due to too many connections.", true, "Channel has been disabled"},
		{408, "", "", false, "408 Request Timeout"},
		{429, "", "", false, "429 Too Many Requests"},
		{500, "", "", false, "500 Internal Server Error"},
		{502, "text/html", "<html><body>Bad Gateway</body></html>", false, "502 Bad Gateway for"},
		{503, "", "", false, "503"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				if tt.contentType != "" {
					w.Header().Set("Content-Type", tt.contentType)
				}
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			err := (&sse.HTTPTransport{}).Subscribe(t.Context(), sse.Request{URL: srv.URL + "/chan"}, func(sse.Event) {})
			var se *sse.StatusError
			if !errors.As(err, &se) || se.StatusCode != tt.status {
				t.Fatalf("Subscribe = %v, want a *StatusError with %d", err, tt.status)
			}
			if errors.Is(err, sse.ErrPermanent) != tt.permanent || se.Permanent() != tt.permanent {
				t.Errorf("errors.Is(%v, ErrPermanent) = %v, want %v", err, !tt.permanent, tt.permanent)
			}
			if want := strings.ReplaceAll(tt.inMessage, "<url>", srv.URL+"/chan"); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), srv.URL+"/chan") {
				t.Errorf("error %q does not say %q and name the URL", err, tt.inMessage)
			}
			if se.RetryAfter != 7*time.Second {
				t.Errorf("RetryAfter = %v, want 7s", se.RetryAfter)
			}
		})
	}
}

func TestTransportNotAnEventStream(t *testing.T) {
	srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>gosmee</html>")
	})
	err := (&sse.HTTPTransport{}).Subscribe(t.Context(), sse.Request{URL: srv.URL + "/abc"}, func(sse.Event) {})
	if !errors.Is(err, sse.ErrNotEventStream) || !errors.Is(err, sse.ErrPermanent) {
		t.Fatalf("Subscribe = %v, want ErrNotEventStream (permanent)", err)
	}
	if want := srv.URL + "/events/abc"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not suggest %s", err, want)
	}
}

func TestTransportRedactsURL(t *testing.T) {
	notFound := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) })
	closed := ssetest.NewServer(t, nil)
	closed.Close()
	for name, base := range map[string]string{"status": notFound.URL, "connect": closed.URL} {
		t.Run(name, func(t *testing.T) {
			u := strings.Replace(base, "http://", "http://user:hunter2@", 1) + "/chan?token=s3cr3t&x=1"
			err := (&sse.HTTPTransport{}).Subscribe(t.Context(), sse.Request{URL: u}, func(sse.Event) {})
			if err == nil {
				t.Fatal("Subscribe = nil")
			}
			if msg := err.Error(); strings.Contains(msg, "hunter2") || strings.Contains(msg, "s3cr3t") || !strings.Contains(msg, "/chan?token=xxxxx") {
				t.Errorf("error %q leaks a credential or hides the channel", msg)
			}
		})
	}
}

func TestTransportContext(t *testing.T) {
	t.Run("cancel while streaming", func(t *testing.T) {
		srv := ssetest.NewServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			ssetest.WriteStream(w, []byte("event: ready\ndata: {}\n\n"))
			ssetest.HoldOpen(r)
		})
		ctx, cancel := context.WithCancel(t.Context())
		err := (&sse.HTTPTransport{}).Subscribe(ctx, sse.Request{URL: srv.URL}, func(sse.Event) { cancel() })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Subscribe = %v, want context.Canceled", err)
		}
	})
	t.Run("cancel while connecting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				synctest.Wait() // the request is waiting for its headers
				cancel()
			}()
			tr := &sse.HTTPTransport{Client: ssetest.PipeStream(nil)}
			if err := tr.Subscribe(ctx, sse.Request{URL: "http://relay.test/chan"}, func(sse.Event) {}); err != context.Canceled {
				t.Errorf("Subscribe = %v, want context.Canceled", err)
			}
		})
	})
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			tr := &sse.HTTPTransport{Client: ssetest.PipeStream(func(ctx context.Context, w io.Writer) {
				io.WriteString(w, "event: ready\ndata: {}\n\n")
				<-ctx.Done()
			})}
			if err := tr.Subscribe(ctx, sse.Request{URL: "http://relay.test/chan"}, func(sse.Event) {}); err != context.DeadlineExceeded {
				t.Errorf("Subscribe = %v, want context.DeadlineExceeded", err)
			}
		})
	})
	t.Run("done before the call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := (&sse.HTTPTransport{}).Subscribe(ctx, sse.Request{URL: "http://127.0.0.1:1/x"}, func(sse.Event) {}); err != context.Canceled {
			t.Errorf("Subscribe = %v, want context.Canceled", err)
		}
	})
}

func TestTransportBadURL(t *testing.T) {
	for _, u := range []string{"", "smee.io/abc", "ftp://host/x", "http:///nohost", "http://h\x7f/"} {
		err := (&sse.HTTPTransport{}).Subscribe(t.Context(), sse.Request{URL: u}, func(sse.Event) {})
		if !errors.Is(err, sse.ErrPermanent) {
			t.Errorf("Subscribe(%q) = %v, want ErrPermanent", u, err)
		}
	}
}

func TestStreamURL(t *testing.T) {
	tests := []struct {
		in     string
		format delivery.Format
		want   string
		ok     bool
	}{
		{"https://smee.io/abc", "", "https://smee.io/abc", true},
		{"https://smee.io/abc/", delivery.FormatSmee, "https://smee.io/abc", true},
		{"http://127.0.0.1:3333/abc", delivery.FormatHookline, "http://127.0.0.1:3333/abc", true},
		{"https://hook.example/abcdefghijkl", delivery.FormatGosmee, "https://hook.example/events/abcdefghijkl", true},
		{"https://hook.example/github/org/repo", delivery.FormatGosmee, "https://hook.example/events/github/org/repo", true},
		{"https://hook.example/events/abc", delivery.FormatGosmee, "https://hook.example/events/abc", true},
		{"https://hook.example/abc?pubkey=k", delivery.FormatGosmee, "https://hook.example/events/abc?pubkey=k", true},
		{"https://smee.io/", "", "", false},
		{"https://smee.io", delivery.FormatGosmee, "", false},
		{"smee.io/abc", "", "", false},
		{"ftp://smee.io/abc", "", "", false},
		{"https://smee.io/abc", "websocket", "", false},
	}
	for _, tt := range tests {
		got, err := sse.StreamURL(tt.in, tt.format)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("StreamURL(%q, %q) = %q, %v; want %q, ok %v", tt.in, tt.format, got, err, tt.want, tt.ok)
		}
	}
}
