package proxy_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/webhooks"
)

// A Client does what `hookline forward` does: it subscribes to a relay
// channel, verifies each delivery with the webhook secret, runs Go handlers
// and replays the delivery byte-exact to a local server, which verifies the
// signature again.
func ExampleClient() {
	const secret = "It's a Secret to Everybody"
	quiet := slog.New(slog.DiscardHandler)

	// The local server under development: it verifies with the same secret.
	app, _ := webhooks.New(webhooks.Options{Secret: secret, Logger: quiet})
	appGot := make(chan string, 1)
	app.OnAny(func(_ context.Context, e webhooks.Event) error {
		appGot <- string(e.Payload)
		return nil
	})
	target := httptest.NewServer(webhooks.NewMiddleware(app, webhooks.MiddlewareOptions{}))
	defer target.Close()

	// The public relay channel GitHub posts to (here `hookline serve`).
	rl, err := relay.New(relay.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	relayServer := httptest.NewServer(rl)
	defer relayServer.Close()
	defer rl.Close()
	channel := relayServer.URL + "/" + rl.NewChannel()

	// Go handlers run on the laptop for every verified delivery.
	handlers, _ := webhooks.New(webhooks.Options{Secret: secret, Logger: quiet})
	handlers.On("issues.opened", func(_ context.Context, e webhooks.Event) error {
		fmt.Println("handler: issues.opened", e.ID)
		return nil
	})

	connected := make(chan struct{})
	var once sync.Once
	results := make(chan proxy.Result, 1)
	c, err := proxy.New(proxy.Options{
		URL:      channel,
		Secret:   secret,
		Handlers: &handlers.Emitter,
		Targets:  []proxy.Target{{URL: target.URL + "/api/github/webhooks"}},
		OnResult: func(r proxy.Result) { results <- r },
		OnState: func(s proxy.StateChange) {
			if s.State == proxy.StateConnected {
				once.Do(func() { close(connected) })
			}
		},
		Logger: quiet,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error)
	go func() { stopped <- c.Run(ctx) }()
	<-connected

	// GitHub delivers a signed webhook to the channel. The body's spacing is
	// kept byte for byte, so the signature still verifies at the target.
	body := `{"action": "opened", "issue": {"number": 1}}`
	sig, _ := webhooks.Sign(secret, []byte(body))
	req, _ := http.NewRequest(http.MethodPost, channel, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	req.Header.Set("X-Hub-Signature-256", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	r := <-results
	fmt.Println("delivery:", r.Delivery.Event, r.Action, r.Verification)
	fmt.Println("target:", r.Targets[0].Status)
	fmt.Println("target got:", <-appGot)
	cancel()
	fmt.Println("Run:", <-stopped)
	// Output:
	// handler: issues.opened 72d3162e-cc78-11e3-81ab-4c9367dc0958
	// delivery: issues opened verified
	// target: 200
	// target got: {"action": "opened", "issue": {"number": 1}}
	// Run: <nil>
}
