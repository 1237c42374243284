package proxy_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/ssetest"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/rest"
)

// A target that answers 200 after 20 s has failed the delivery as far as
// GitHub is concerned (it waits 10 s): the Result and the Stats say so, and
// the delivery behind it says how long it waited. On synctest's clock.
func TestSlowAnswerIsAGitHubFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stream := ssetest.PipeStream(func(ctx context.Context, w io.Writer) {
			io.WriteString(w, "event: ready\ndata: {}\n\n")
			for n := 1; n <= 2; n++ {
				fmt.Fprintf(w, "id: %d\ndata: %s\n\n", n, message(hostileHeaders(relaytest.ID(n)), relaytest.Body(n, 10)))
			}
			<-ctx.Done()
		})
		target := &http.Client{Transport: ssetest.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Header.Get("X-GitHub-Delivery") == relaytest.ID(1) {
				time.Sleep(20 * time.Second) // simulated (synctest): the handler works before it answers
			}
			return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
		})}
		results := make(chan proxy.Result, 2)
		c, err := proxy.New(proxy.Options{URL: "http://relay.test/chan", Targets: []proxy.Target{{URL: "http://127.0.0.1:3000/hook"}},
			RelayClient: stream, HTTPClient: &rest.Client{HTTPClient: target},
			Logger:   slog.New(slog.DiscardHandler),
			OnResult: func(r proxy.Result) { results <- r }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		// The bubble's clock moves on while every goroutine waits: the
		// slow answer's 20 s pass for this receive.
		slow, next := <-results, <-results
		cancel()
		<-done
		if !slow.Targets[0].OK() || !slow.Targets[0].GitHubWouldFail() || slow.Targets[0].Duration != 20*time.Second {
			t.Errorf("the slow answer: OK %v, GitHubWouldFail %v after %v; want a 200 GitHub would fail after 20s",
				slow.Targets[0].OK(), slow.Targets[0].GitHubWouldFail(), slow.Targets[0].Duration)
		}
		if next.Targets[0].GitHubWouldFail() || next.Waited != 20*time.Second {
			t.Errorf("the next one: GitHubWouldFail %v, waited %v; want a pass that waited 20s", next.Targets[0].GitHubWouldFail(), next.Waited)
		}
		if s := c.Stats(); s.Slow != 1 || s.GitHubFailed != 1 || s.Forwarded != 2 {
			t.Errorf("stats %+v, want 2 forwarded, 1 slow, 1 GitHub would fail", s)
		}
	})
}
