package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/payload"
)

func ExampleSign() {
	sig, err := webhooks.Sign("It's a Secret to Everybody", []byte("Hello, World!"))
	if err != nil {
		panic(err)
	}
	fmt.Println(sig)
	// Output:
	// sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17
}

func ExampleVerify() {
	body := []byte("Hello, World!")
	for _, sig := range []string{
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		"sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17", // uppercase: refused
		"",
	} {
		ok, err := webhooks.Verify("It's a Secret to Everybody", body, sig)
		fmt.Println(ok, err)
	}
	// Output:
	// true <nil>
	// false <nil>
	// false webhooks: signature required
}

func ExampleWebhooks_On() {
	wh, err := webhooks.New(webhooks.Options{Secret: "mysecret", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	// Runs for every "issues" event whose action is "opened".
	_, err = wh.On("issues.opened", func(ctx context.Context, e webhooks.Event) error {
		var p struct {
			Issue struct {
				Number int `json:"number"`
			} `json:"issue"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return err
		}
		fmt.Printf("%s.%s: issue #%d\n", e.Name, e.Action(), p.Issue.Number)
		return nil
	})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"action":"opened","issue":{"number":1}}`)
	// The signature GitHub sends in X-Hub-Signature-256.
	sig := "sha256=34b5d3f6b71e223779b168c469f5ee7e01145404575a01611a6cc802b841734a"
	if err := wh.VerifyAndReceive(context.Background(), "delivery-1", "issues", body, sig); err != nil {
		fmt.Println("error:", err)
	}
	err = wh.VerifyAndReceive(context.Background(), "delivery-2", "issues", body, "sha256=forged")
	fmt.Println("error:", err)
	// Output:
	// issues.opened: issue #1
	// error: signature does not match event payload and secret
}

func ExampleNewMiddleware() {
	wh, err := webhooks.New(webhooks.Options{Secret: "mysecret", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	wh.OnAny(func(ctx context.Context, e webhooks.Event) error {
		fmt.Println("received", e.Name, e.ID)
		return nil
	})
	// Serve the webhook path; other paths go to the application's mux.
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "home") })
	handler := webhooks.NewMiddleware(wh, webhooks.MiddlewareOptions{}).Wrap(mux)

	send := func(body, sig string) {
		req := httptest.NewRequest("POST", "/api/github/webhooks", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		req.Header.Set("X-Hub-Signature-256", sig)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Printf("%d %q\n", rec.Code, rec.Body.String())
	}
	send(`{"foo":"bar"}`, "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3")
	send(`{"foo":"baz"}`, "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3")
	// Output:
	// received push 72d3162e-cc78-11e3-81ab-4c9367dc0958
	// 200 "ok\n"
	// 400 "{\"error\":\"signature does not match event payload and secret\"}"
}

// A server that drains its webhook handlers when it shuts down: a handler
// still running after the middleware answered 202 (here its Timeout is
// short) finishes before the program goes on.
func ExampleEmitter_Shutdown() {
	wh, err := webhooks.New(webhooks.Options{Secret: "mysecret", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	shuttingDown := make(chan struct{})
	wh.OnAny(func(ctx context.Context, e webhooks.Event) error {
		<-shuttingDown // slow work: still running when the server shuts down
		fmt.Println("handler finished", e.Name)
		return nil
	})
	ts := httptest.NewUnstartedServer(webhooks.NewMiddleware(wh, webhooks.MiddlewareOptions{Timeout: 10 * time.Millisecond}))
	drained := make(chan error, 1)
	ts.Config.RegisterOnShutdown(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		close(shuttingDown)
		drained <- wh.Shutdown(ctx)
	})
	ts.Start()

	req, _ := http.NewRequest("POST", ts.URL+"/api/github/webhooks", strings.NewReader(`{"foo":"bar"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	req.Header.Set("X-Hub-Signature-256", "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("answered", resp.StatusCode)

	ts.Config.Shutdown(context.Background()) // runs the hook
	fmt.Println("drained:", <-drained)
	ts.Close()
	// Output:
	// answered 202
	// handler finished push
	// drained: <nil>
}

func ExampleEmitter() {
	// The event handler alone: no secret, no HTTP.
	var em webhooks.Emitter
	r := em.OnAny(func(ctx context.Context, e webhooks.Event) error {
		return fmt.Errorf("cannot handle %s", e.Name)
	})
	err := em.Receive(context.Background(), webhooks.Event{Name: "ping", Payload: json.RawMessage(`{"zen":"Keep it logically awesome."}`)})
	fmt.Println(err)
	if err := em.RemoveListener("*", r); err != nil {
		panic(err)
	}
	err = em.Receive(context.Background(), webhooks.Event{Name: "ping", Payload: json.RawMessage(`{}`)})
	fmt.Println(err)
	// Output:
	// cannot handle ping
	// <nil>
}

// A GitHub App's handlers, typed: the payload types of package
// webhooks/payload, generated from GitHub's description, under constants
// (a misspelt name does not compile; StrictEventNames refuses unknown
// strings).
func ExampleHandle() {
	wh, err := webhooks.New(webhooks.Options{Secret: "It's a Secret to Everybody", StrictEventNames: true})
	if err != nil {
		log.Fatal(err)
	}
	webhooks.Handle(wh, webhooks.EventIssuesOpened, func(ctx context.Context, e webhooks.Event, p *payload.IssuesOpenedEvent) error {
		fmt.Printf("%s#%d opened by %s (hook %s)\n", p.Repository.FullName, p.Issue.Number, p.Sender.Login, e.Header.Get(webhooks.HeaderHookID))
		return nil
	})
	webhooks.Handle(wh, webhooks.EventPullRequestSynchronize, func(ctx context.Context, e webhooks.Event, p *payload.PullRequestSynchronizeEvent) error {
		fmt.Printf("%s#%d now at %s\n", p.Repository.FullName, p.Number, p.PullRequest.Head.SHA)
		return nil
	})

	header := http.Header{}
	header.Set(webhooks.HeaderHookID, "42")
	wh.Receive(context.Background(), webhooks.Event{Name: "issues", Header: header,
		Payload: []byte(`{"action":"opened","issue":{"number":7},"repository":{"full_name":"octo/hello"},"sender":{"login":"octocat"}}`)})
	wh.Receive(context.Background(), webhooks.Event{Name: "pull_request",
		Payload: []byte(`{"action":"synchronize","number":8,"pull_request":{"head":{"sha":"6dcb09b5"}},"repository":{"full_name":"octo/hello"}}`)})
	// Output:
	// octo/hello#7 opened by octocat (hook 42)
	// octo/hello#8 now at 6dcb09b5
}

// HandleEvent takes the event from the payload type: the handler of
// *payload.IssuesOpenedEvent runs for issues.opened, and for nothing else.
func ExampleHandleEvent() {
	wh, err := webhooks.New(webhooks.Options{Secret: "It's a Secret to Everybody"})
	if err != nil {
		log.Fatal(err)
	}
	webhooks.HandleEvent(wh, func(ctx context.Context, e webhooks.Event, p *payload.IssuesOpenedEvent) error {
		fmt.Printf("%s#%d opened\n", p.Repository.FullName, p.Issue.Number)
		return nil
	})
	// A type and a name that disagree are refused, not run with zeros.
	_, err = webhooks.Handle(wh, webhooks.EventPush, func(ctx context.Context, e webhooks.Event, p *payload.IssuesOpenedEvent) error {
		return nil
	})
	fmt.Println(err)

	wh.Receive(context.Background(), webhooks.Event{Name: "issues",
		Payload: []byte(`{"action":"closed","issue":{"number":6},"repository":{"full_name":"octo/hello"}}`)})
	wh.Receive(context.Background(), webhooks.Event{Name: "issues",
		Payload: []byte(`{"action":"opened","issue":{"number":7},"repository":{"full_name":"octo/hello"}}`)})
	// Output:
	// webhooks: the payload type is another event's: *payload.IssuesOpenedEvent is the payload of "issues.opened", not of "push"
	// octo/hello#7 opened
}
