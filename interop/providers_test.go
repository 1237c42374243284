package interop

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	hldelivery "github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/cli"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/webhooks/provider"
)

// TestProvidersOwnLibraries checks hookline's signatures both ways against
// the providers' own libraries (providers.mjs): deliveries signed by npm
// standardwebhooks and npm stripe verify in hookline's pipeline (the
// proxy.Client forward runs, with a secret per sender), and what
// `hookline send --provider` sends verifies with those libraries; a
// changed body fails in both.
func TestProvidersOwnLibraries(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an interop test (node)")
	}
	node := requireNode(t)
	secrets := map[provider.Scheme]string{provider.Standard: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", provider.Stripe: "whsec_interop_stripe_secret"}
	bodies := map[provider.Scheme][]byte{
		provider.Standard: []byte(`{"type":"invoice.paid","timestamp":"2026-11-27T10:00:00Z","data":{"id":"inv_1","amount":4200}}`),
		provider.Stripe:   []byte(`{"id":"evt_1","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1"}}}`),
	}
	type job struct {
		Op       string            `json:"op"`
		Provider string            `json:"provider"`
		Secret   string            `json:"secret"`
		ID       string            `json:"id,omitempty"`
		Headers  map[string]string `json:"headers,omitempty"`
		Payload  []byte            `json:"payload"`
	}
	type result struct {
		Headers map[string]string `json:"headers"`
		Valid   bool              `json:"valid"`
		Error   string            `json:"error"`
	}
	batch := func(jobs []job) []result {
		t.Helper()
		in, _ := json.Marshal(map[string]any{"jobs": jobs})
		var out struct{ Results []result }
		runNode(t, node, in, &out, "providers.mjs")
		if len(out.Results) != len(jobs) {
			t.Fatalf("providers.mjs answered %d results for %d jobs", len(out.Results), len(jobs))
		}
		return out.Results
	}

	// The libraries sign; hookline's pipeline verifies.
	schemes := []provider.Scheme{provider.Standard, provider.Stripe}
	var jobs []job
	for _, s := range schemes {
		jobs = append(jobs, job{Op: "sign", Provider: string(s), Secret: secrets[s], ID: "msg_interop_1", Payload: bodies[s]})
	}
	signed := batch(jobs)
	client, err := proxy.New(proxy.Options{Logger: slog.New(slog.DiscardHandler), SchemeSecrets: map[provider.Scheme][]string{provider.Standard: {secrets[provider.Standard]}, provider.Stripe: {secrets[provider.Stripe]}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range schemes {
		if signed[i].Error != "" {
			t.Fatalf("%s library could not sign: %s", s, signed[i].Error)
		}
		for _, body := range [][]byte{bodies[s], append(append([]byte{}, bodies[s]...), ' ')} {
			h := http.Header{"Content-Type": {"application/json"}}
			for k, v := range signed[i].Headers {
				h.Set(k, v)
			}
			r := client.Handle(t.Context(), &hldelivery.Delivery{ID: string(s) + string(rune('0'+len(body)%10)), Headers: h, Body: body, BodySource: hldelivery.BodyBase64})
			want := proxy.VerificationPassed
			if len(body) != len(bodies[s]) {
				want = proxy.VerificationFailed
			}
			if r.Verification != want || r.Scheme != s {
				t.Errorf("%s library's signature, %d-byte body: hookline says %s %q (%s), want %s", s, len(body), r.Verification, r.VerifyNote, r.Scheme, want)
			}
		}
	}

	// hookline signs (`hookline send --provider`, run as a command, to a
	// server that records what it got); the libraries verify.
	jobs = nil
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header }))
	t.Cleanup(srv.Close)
	for _, s := range schemes {
		payload := filepath.Join(t.TempDir(), "payload.json")
		os.WriteFile(payload, bodies[s], 0o600)
		var out, errOut bytes.Buffer
		if code := cli.Run(t.Context(), []string{"hookline", "send", "--provider", string(s), "--secret", secrets[s], "--payload", payload, "--target", srv.URL},
			strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("hookline send --provider %s: exit %d\n%s%s", s, code, out.String(), errOut.String())
		}
		h := <-got
		flat := map[string]string{}
		for k := range h {
			flat[k] = h.Get(k)
		}
		for _, body := range [][]byte{bodies[s], append(append([]byte{}, bodies[s]...), ' ')} {
			jobs = append(jobs, job{Op: "verify", Provider: string(s), Secret: secrets[s], Headers: flat, Payload: body})
		}
	}
	for i, r := range batch(jobs) {
		wantValid := i%2 == 0 // the changed body second
		if r.Valid != wantValid {
			t.Errorf("%s library on hookline's signature (job %d): valid %v (%s), want %v", jobs[i].Provider, i, r.Valid, r.Error, wantValid)
		}
		if !wantValid && !strings.Contains(strings.ToLower(r.Error), "signature") {
			t.Errorf("%s library's refusal %q does not name the signature", jobs[i].Provider, r.Error)
		}
	}
}
