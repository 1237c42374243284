package webhooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookline/hookline/webhooks"
)

// Run: go test -run '^$' -bench . -count 6 ./webhooks/...

func BenchmarkReceive(b *testing.B) {
	payload := json.RawMessage(`{"action":"opened","issue":{"number":1,"title":"bench"},"repository":{"full_name":"o/r"}}`)
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("handlers=%d", n), func(b *testing.B) {
			em := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: discard})
			for i := range n {
				name := []string{"issues.opened", "issues"}[i%2]
				if _, err := em.On(name, okHandler); err != nil {
					b.Fatal(err)
				}
			}
			e := webhooks.Event{ID: "1", Name: "issues", Payload: payload}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := em.Receive(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMiddleware(b *testing.B) {
	// A 4 KiB push delivery.
	body := []byte(`{"ref":"refs/heads/main","pad":"` + strings.Repeat("x", 4096-len(`{"ref":"refs/heads/main","pad":""}`)) + `"}`)
	if len(body) != 4096 {
		b.Fatalf("body is %d bytes", len(body))
	}
	w := newWebhooks(b, webhooks.Options{Secret: "mysecret"})
	w.OnAny(okHandler)
	sig, err := w.Sign(body)
	if err != nil {
		b.Fatal(err)
	}
	m := webhooks.NewMiddleware(w, webhooks.MiddlewareOptions{Logger: discard})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/api/github/webhooks", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-GitHub-Event", "push")
		r.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		r.Header.Set("X-Hub-Signature-256", sig)
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, r)
		if rec.Code != 200 {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}
