package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/webhooks/provider"
)

// Standard Webhooks' libraries' signing vector (libraries/go
// webhook_test.go TestWebhookSign), checked through the command line.
func TestVerifyAnotherSendersScheme(t *testing.T) {
	payload := filepath.Join(t.TempDir(), "payload.json")
	os.WriteFile(payload, []byte(`{"test": 2432232314}`), 0o600)
	args := []string{"verify", "--provider", "standard", "--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"--signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		"--header", "webhook-id: msg_p5jXN8AQM9LWM0D4loKWxJek", "--header", "webhook-timestamp: 1614265330"}
	if code, out, errOut := run(t, append(args, "--tolerance", "0", payload)...); code != ExitOK || !strings.Contains(out, "valid: the standard signature matches") {
		t.Errorf("verify the vector: exit %d, %q %q", code, out, errOut)
	}
	// The vector is from 2021: with the default tolerance it is stale.
	if code, _, errOut := run(t, append(args, payload)...); code != ExitFailure || !strings.Contains(errOut, "signed timestamp out of tolerance: signed") {
		t.Errorf("verify a 2021 signature with the default tolerance: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(t, "verify", "--provider", "paypal", "--secret", "x", "--signature", "y", payload); code != ExitUsage || !strings.Contains(errOut, `unknown scheme "paypal"`) {
		t.Errorf("an unknown provider: exit %d, %q", code, errOut)
	}
}

// sign --provider prints the headers to set; send --provider signs and
// names the delivery as that sender does, the event from a Stripe
// payload's type, and a receiver that checks Stripe's scheme accepts it.
func TestSignAndSendAsAnotherSender(t *testing.T) {
	payload := filepath.Join(t.TempDir(), "event.json")
	body := `{"id":"evt_1","type":"invoice.paid","data":{}}`
	os.WriteFile(payload, []byte(body), 0o600)
	code, out, errOut := run(t, "sign", "--provider", "stripe", "--secret", "whsec_stripe-test-secret", payload)
	if code != ExitOK || !strings.HasPrefix(out, "Stripe-Signature: t=") || !strings.Contains(out, ",v1=") {
		t.Fatalf("sign --provider stripe: exit %d, %q %q", code, out, errOut)
	}
	h := http.Header{}
	name, value, _ := strings.Cut(strings.TrimSpace(out), ": ")
	h.Set(name, value)
	if err := provider.Verify(provider.Stripe, h, []byte(body), provider.Check{Secrets: []string{"whsec_stripe-test-secret"}}); err != nil {
		t.Errorf("the printed header does not verify: %v", err)
	}

	got := make(chan *http.Request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if err := provider.Verify(provider.Stripe, r.Header, b, provider.Check{Secrets: []string{"whsec_stripe-test-secret"}, Now: time.Now()}); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
		}
		got <- r
	}))
	t.Cleanup(srv.Close)
	code, out, errOut = run(t, "send", "--provider", "stripe", "--secret", "whsec_stripe-test-secret", "--payload", payload, "--target", srv.URL)
	if code != ExitOK {
		t.Fatalf("send --provider stripe: exit %d, %q %q", code, out, errOut)
	}
	if r := <-got; r.Header.Get("X-Github-Event") != "" || r.Header.Get("Stripe-Signature") == "" {
		t.Errorf("sent headers %v: want Stripe's signature, no GitHub headers", r.Header)
	}
	if !strings.Contains(out+errOut, "invoice.paid") {
		t.Errorf("send did not name the payload's type: %q %q", out, errOut)
	}
	// No id header in a Stripe delivery: no "delivery" with an empty id
	// on the line (before: "sent invoice.paid delivery  → target").
	if strings.Contains(out, "delivery  ") || strings.Contains(out, "delivery →") {
		t.Errorf("send printed an empty delivery id: %q", out)
	}
	if code, _, errOut := run(t, "send", "--provider", "gitea", "--secret", "s", "--payload", payload, "--target", srv.URL); code != ExitUsage || !strings.Contains(errOut, "--provider gitea needs --event NAME") {
		t.Errorf("send --provider gitea without --event: exit %d, %q", code, errOut)
	}
}
