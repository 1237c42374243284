package proxy_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/webhooks"
)

// A body large enough for hookline's relay to send by link reaches the
// target byte-exact, its signature verified, between small ones that come
// inline, in order.
func TestBodyByLinkForwarded(t *testing.T) {
	const secret = "link-secret"
	rl := relaytest.Start(t, relay.Options{})
	target := &relaytest.Sink{}
	ts := httptestServer(t, target)
	var mu sync.Mutex
	var results []proxy.Result
	onResult := func(r proxy.Result) {
		mu.Lock()
		defer mu.Unlock()
		results = append(results, r)
	}
	startConnected(t, proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: ts}}, Secret: secret, OnResult: onResult})

	big := append(relaytest.Body(2, wire.LinkMin), "\r\n\xff\x00"...) // not even JSON
	bodies := [][]byte{relaytest.Body(1, 10), big, relaytest.Body(3, 10)}
	for i, b := range bodies {
		sig, err := webhooks.Sign(secret, b)
		if err != nil {
			t.Fatal(err)
		}
		rl.Publish(t, nil, i+1, b, webhooks.HeaderSignature256, sig)
	}
	got := target.WaitFor(t, 3)
	for i, a := range got {
		if a.ID != relaytest.ID(i+1) || !bytes.Equal(a.Body, bodies[i]) {
			t.Errorf("arrival %d: %s, %d bytes; want %s, %d bytes, exact", i, a.ID, len(a.Body), relaytest.ID(i+1), len(bodies[i]))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range results {
		if r.Verification != proxy.VerificationPassed {
			t.Errorf("delivery %s: verification %v, want passed", r.Delivery.ID, r.Verification)
		}
		if r.Delivery.ID == relaytest.ID(2) && r.Delivery.BodySource != delivery.BodyLinked {
			t.Errorf("the large delivery's body came from %q, want %q", r.Delivery.BodySource, delivery.BodyLinked)
		}
	}
}

// A bodyLink that is not a reference on the relay (another host), or that
// the relay does not answer, is not fetched: the delivery is reported
// skipped, with a note in the failed folder, and the stream goes on.
func TestBodyLinkRefused(t *testing.T) {
	for _, tc := range []struct{ name, link, logged string }{
		{"another host", "http://attacker.example/x", "not a relative URL reference"},
		{"not found", "nowhere/body/2?s=x", "the relay answered 404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames := "event: ready\ndata: {}\n\n" +
				"id: 2\ndata: " + message(with(hostileHeaders("linked"), wire.KeyBodyLink, tc.link), nil) + "\n\n" +
				fmt.Sprintf("id: 3\ndata: %s\n\n", message(hostileHeaders(relaytest.ID(3)), relaytest.Body(3, 10)))
			relaySrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/chan") {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write([]byte(frames))
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}))
			relaySrv.Start()
			t.Cleanup(relaySrv.Close) // after the client's end (cleanups run last first)
			target := &relaytest.Sink{}
			ts := httptestServer(t, target)
			var logs strings.Builder
			var logMu sync.Mutex
			failed := t.TempDir()
			// Done when the client reports it, not when the target has it:
			// the counts move once the target's answer is back.
			results := make(chan proxy.Result, 4)
			c, _, _ := startClient(t, proxy.Options{URL: relaySrv.URL + "/chan", Targets: []proxy.Target{{URL: ts}}, FailedDir: failed,
				Logger:   slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil)),
				OnResult: func(r proxy.Result) { results <- r }})
			select {
			case r := <-results:
				if r.Delivery.ID != relaytest.ID(3) {
					t.Errorf("the client handled %s first, want the delivery after the link", r.Delivery.ID)
				}
			case <-time.After(relaytest.HangGuard):
				t.Fatal("no delivery was handled")
			}
			if got := target.Arrivals(); len(got) != 1 || got[0].ID != relaytest.ID(3) {
				t.Errorf("the target got %v, want only the delivery after the link", got)
			}
			notes, _ := filepath.Glob(filepath.Join(failed, "*-skipped-2.txt"))
			if len(notes) != 1 {
				t.Fatalf("failed folder notes = %v, want one for event 2", notes)
			}
			note, _ := os.ReadFile(notes[0])
			logMu.Lock()
			defer logMu.Unlock()
			if !strings.Contains(string(note), tc.logged) || !strings.Contains(logs.String(), "whose body could not be fetched") {
				t.Errorf("note %q, log:\n%s\nwant them to say %q and that the body could not be fetched", note, logs.String(), tc.logged)
			}
			if s := c.Stats(); s.Forwarded != 1 {
				t.Errorf("stats %+v, want 1 forwarded", s)
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A body whose fetch fails (the relay's front answers 502 however often
// rest retries) is not skipped: the client reconnects before the delivery,
// the relay sends it again with a new link, and it reaches the target
// byte-exact, with no note in the failed folder.
func TestBodyLinkFetchFailureResumes(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	up, _ := url.Parse(rl.Base)
	rp := httputil.NewSingleHostReverseProxy(up)
	rp.FlushInterval = -1 // an event stream
	var streams, fetches atomic.Int32
	front := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/body/") {
			if fetches.Add(1); streams.Load() < 2 {
				http.Error(w, "upstream broke", http.StatusBadGateway)
				return
			}
		} else if r.Method == http.MethodGet {
			streams.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	channel := front + strings.TrimPrefix(rl.Channel, rl.Base)
	target := &relaytest.Sink{}
	ts := httptestServer(t, target)
	failed := t.TempDir()
	startConnected(t, proxy.Options{URL: channel, Targets: []proxy.Target{{URL: ts}}, FailedDir: failed, MaxBackoff: 50 * time.Millisecond})

	big := relaytest.Body(1, wire.LinkMin)
	rl.Publish(t, nil, 1, big)
	rl.Publish(t, nil, 2, relaytest.Body(2, 10))
	got := target.WaitFor(t, 2)
	if got[0].ID != relaytest.ID(1) || !bytes.Equal(got[0].Body, big) || got[1].ID != relaytest.ID(2) {
		t.Errorf("arrivals %s (%d bytes), %s; want the large delivery byte-exact, then the small one", got[0].ID, len(got[0].Body), got[1].ID)
	}
	if n := streams.Load(); n < 2 {
		t.Errorf("%d streams: the client should have reconnected after the failed fetch", n)
	}
	if notes, _ := filepath.Glob(filepath.Join(failed, "*")); len(notes) != 0 {
		t.Errorf("failed folder holds %v, want nothing skipped", notes)
	}
}

// A relay that answers a body fetch with a redirect is not followed to
// another host: the body comes from the relay or not at all (the client
// reconnects to have the delivery again).
func TestBodyLinkRedirectNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptestServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	var streams atomic.Int32
	stream := make(chan struct{}, 16)
	frame := "id: 2\ndata: " + message(with(hostileHeaders("linked"), wire.KeyBodyLink, "chan/body/2?s=x"), nil) + "\n\n"
	relaySrv := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/body/") {
			http.Redirect(w, r, other+"/steal", http.StatusFound)
			return
		}
		streams.Add(1)
		select {
		case stream <- struct{}{}:
		default:
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(frame))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	startClient(t, proxy.Options{URL: relaySrv + "/chan", MaxBackoff: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	guard := time.After(relaytest.HangGuard)
	for range 3 {
		select {
		case <-stream:
		case <-guard:
			t.Fatalf("%d streams: the client should reconnect to have the delivery again", streams.Load())
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's host got %d requests, want none", n)
	}
}
