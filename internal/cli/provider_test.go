package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
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

// Every sender's delivery id is the delivery's id in forward: on the trace
// line, in --json, in the inspector and in the capture file's name. Before, only GitHub's
// was read: "#N" on the trace and "-noid.json" files.
func TestForwardShowsEachSendersDeliveryID(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, tt := range []struct {
		sender, id, body string
		header           []string
	}{
		{"standard", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", `{"type":"invoice.paid","data":{}}`, []string{"Webhook-Id", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"}},
		{"stripe", "evt_1NG8Du2eZvKYlo2CUI79vXWy", `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","type":"invoice.paid","data":{}}`, nil},
		{"gitlab", "13792a34-cac6-4fda-95a8-c58e00a3954e", `{"object_kind":"push"}`, []string{"X-Gitlab-Event", "Push Hook", "X-Gitlab-Event-Uuid", "13792a34-cac6-4fda-95a8-c58e00a3954e"}},
		{"gitea", "f6266f16-1bf3-46a5-9ea4-602e06ead473", `{"ref":"refs/heads/main"}`, []string{"X-Gitea-Event", "push", "X-Gitea-Delivery", "f6266f16-1bf3-46a5-9ea4-602e06ead473"}},
		{"forgejo", "b5b5a0d8-6a4e-4f64-9d3a-0f5e2f36f2c1", `{"ref":"refs/heads/main"}`, []string{"X-Forgejo-Event", "push", "X-Forgejo-Delivery", "b5b5a0d8-6a4e-4f64-9d3a-0f5e2f36f2c1"}},
		{"bitbucket", "{afb4c6d6-0b8f-4f5b-b2b4-0c52f1a6e3b7}", `{"push":{}}`, []string{"X-Event-Key", "repo:push", "X-Request-Uuid", "{afb4c6d6-0b8f-4f5b-b2b4-0c52f1a6e3b7}"}},
		{"shopify", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", `{"id":820982911946154508}`, []string{"X-Shopify-Topic", "orders/create", "X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"}},
		{"slack", "Ev0PV52K21", `{"type":"event_callback","event_id":"Ev0PV52K21","event":{"type":"app_mention"}}`, nil},
	} {
		t.Run(tt.sender, func(t *testing.T) {
			rl := relaytest.Start(t, relay.Options{})
			save := t.TempDir()
			f := startForward(t, "--url", rl.Channel, "--no-state", "--save", save, "--json", "--inspect", "127.0.0.1:0")
			f.waitErr(t, "connected to")
			m := regexp.MustCompile(`inspector: (http://127\.0\.0\.1:\d+)/\?token=(\w+)`).FindStringSubmatch(f.err.String())
			if m == nil {
				t.Fatalf("no inspector URL:\n%s", f.err.String())
			}
			scheme, _ := provider.Parse(tt.sender)
			signed, err := provider.Sign(scheme, secret, []byte(tt.body), provider.Signing{ID: tt.id})
			if err != nil {
				t.Fatal(err)
			}
			header := append([]string(nil), tt.header...)
			for k, vs := range signed {
				header = append(header, k, vs[0])
			}
			rl.Publish(t, nil, 1, []byte(tt.body), append(header, "X-GitHub-Delivery", "")...)
			f.waitOutLines(t, 1)
			if ids := inspectorIDs(t, m[1], m[2]); len(ids) != 1 || ids[0] != tt.id {
				t.Errorf("the inspector lists %q, want the delivery id %s", ids, tt.id)
			}
			f.stop(t)
			if !strings.Contains(f.out.String(), `"delivery":"`+tt.id+`"`) {
				t.Errorf("--json does not give the delivery id %s:\n%s", tt.id, f.out.String())
			}
			files, _ := filepath.Glob(filepath.Join(save, "*"+strings.Trim(tt.id, "{}")+"*.json")) // a name keeps no braces
			if len(files) != 1 {
				all, _ := filepath.Glob(filepath.Join(save, "*"))
				t.Errorf("no capture file named for %s: %v", tt.id, all)
			}
		})
	}
}
