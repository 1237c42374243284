package webhookstest_test

import (
	"context"
	"fmt"

	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/payload"
	"github.com/hookline/hookline/webhooks/webhookstest"
)

// An App's handler, tested with a built-in example whose title the test
// chose, through the same middleware that serves GitHub.
func Example() {
	const secret = "test-secret"
	wh, _ := webhooks.New(webhooks.Options{Secret: secret})
	webhooks.HandleEvent(wh, func(ctx context.Context, e webhooks.Event, p *payload.IssuesOpenedEvent) error {
		fmt.Printf("issue #%d: %s\n", p.Issue.Number, p.Issue.Title)
		return nil
	})

	d, _ := webhookstest.Example("issues.opened")
	webhookstest.Set(d, "issue.title", "Hello from a test")
	rec := webhookstest.Serve(d, webhooks.NewMiddleware(wh, webhooks.MiddlewareOptions{}), secret)
	fmt.Println(rec.Code)
	// Output:
	// issue #1: Hello from a test
	// 200
}

// A payload value of the test's own, received straight by the handlers.
func ExampleFromPayload() {
	const secret = "test-secret"
	wh, _ := webhooks.New(webhooks.Options{Secret: secret})
	wh.On("push", func(ctx context.Context, e webhooks.Event) error {
		var p struct{ Ref string }
		e.Decode(&p)
		fmt.Println("push to", p.Ref)
		return nil
	})
	d, _ := webhookstest.FromPayload("push", map[string]any{"ref": "refs/heads/main"})
	fmt.Println(webhookstest.Receive(context.Background(), d, wh, secret))
	// Output:
	// push to refs/heads/main
	// <nil>
}
