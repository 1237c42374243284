package provider_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/webhooks/provider"
)

// Known answers, as literals. Where a provider publishes an example, it is
// that example; where it publishes only the algorithm, the literal was
// computed once with Python's hmac module (an implementation independent
// of this package), as its comment says.
var (
	// GitHub's documentation, "Validating webhook deliveries": secret
	// "It's a Secret to Everybody", payload "Hello, World!".
	githubBody   = []byte("Hello, World!")
	githubSecret = "It's a Secret to Everybody"
	githubSig    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	githubSHA1   = "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59" // Python's hmac, SHA-1

	// Standard Webhooks' own libraries' signing test (libraries/go
	// webhook_test.go TestWebhookSign, the same in every language).
	swSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swAt     = time.Unix(1614265330, 0)
	swBody   = []byte(`{"test": 2432232314}`)
	swSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

	// Slack's documentation, "Verifying requests from Slack": the worked
	// example (secret, timestamp, a slash command's body, signature).
	slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	slackAt     = time.Unix(1531420618, 0)
	slackBody   = []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
	slackSig    = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"

	// Computed with Python's hmac by each provider's documented algorithm.
	body       = []byte(`{"action":"opened","number":1}`)
	giteaSig   = "6508b1f1f158529e1e6e55c49bf8fc4e5e61e67b16bedddafb09d8fd3105220e" // key "gitea-secret"
	shopifySig = "YhkQglph22R/x6XP/ivj/IbAX0/iooUb9PKdx5UV8CM="                     // key "shopify-secret"
	stripeSig  = "a1d441c29e8aacda6664d4b9a85d0eb56b45e9167f4b90a1cdded7c130bc987a" // key "whsec_test_secret", t=1700000000
	stripeSig2 = "1b93eef23d85be59881e70d2b08a9737d89d3ade780d754d4fadbafb0267a9ed" // key "whsec_test_secret_rolled_key"
	stripeAt   = time.Unix(1700000000, 0)
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestKnownAnswers(t *testing.T) {
	tests := []struct {
		name    string
		scheme  provider.Scheme
		h       http.Header
		body    []byte
		secrets []string
		now     time.Time
		tol     time.Duration
		want    error // nil: valid
	}{
		{"github", provider.GitHub, hdr("X-Hub-Signature-256", githubSig), githubBody, []string{githubSecret}, time.Time{}, 0, nil},
		{"github, wrong secret", provider.GitHub, hdr("X-Hub-Signature-256", githubSig), githubBody, []string{"other"}, time.Time{}, 0, provider.ErrMismatch},
		{"github, rotated: the old secret second", provider.GitHub, hdr("X-Hub-Signature-256", githubSig), githubBody, []string{"new", githubSecret}, time.Time{}, 0, nil},
		{"github legacy sha1 alone", provider.GitHub, hdr("X-Hub-Signature", githubSHA1), githubBody, []string{githubSecret}, time.Time{}, 0, nil},
		{"github sha256 wins over a wrong sha1", provider.GitHub, hdr("X-Hub-Signature-256", githubSig, "X-Hub-Signature", "sha1=00"), githubBody, []string{githubSecret}, time.Time{}, 0, nil},
		{"github, no header", provider.GitHub, hdr("X-Gitea-Signature", giteaSig), githubBody, []string{githubSecret}, time.Time{}, 0, provider.ErrNoSignature},
		{"github, not hex", provider.GitHub, hdr("X-Hub-Signature-256", "sha256=zz"), githubBody, []string{githubSecret}, time.Time{}, 0, provider.ErrMalformed},

		{"standard webhooks", provider.Standard, hdr("Webhook-Id", swID, "Webhook-Timestamp", "1614265330", "Webhook-Signature", swSig), swBody, []string{swSecret}, swAt, 0, nil},
		{"standard webhooks, secret without whsec_", provider.Standard, hdr("Webhook-Id", swID, "Webhook-Timestamp", "1614265330", "Webhook-Signature", swSig), swBody, []string{strings.TrimPrefix(swSecret, "whsec_")}, swAt, 0, nil},
		{"standard webhooks, several signatures, one valid", provider.Standard, hdr("Webhook-Id", swID, "Webhook-Timestamp", "1614265330", "Webhook-Signature",
			"v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= "+swSig+" v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="), swBody, []string{swSecret}, swAt, 0, nil},
		{"standard webhooks, invalid signature", provider.Standard, hdr("Webhook-Id", swID, "Webhook-Timestamp", "1614265330", "Webhook-Signature", "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="), swBody, []string{swSecret}, swAt, 0, provider.ErrMismatch},
		{"standard webhooks, partial signature", provider.Standard, hdr("Webhook-Id", swID, "Webhook-Timestamp", "1614265330", "Webhook-Signature", "v1,"), swBody, []string{swSecret}, swAt, 0, provider.ErrMalformed},
		{"standard webhooks, missing id", provider.Standard, hdr("Webhook-Timestamp", "1614265330", "Webhook-Signature", swSig), swBody, []string{swSecret}, swAt, 0, provider.ErrMalformed},
		{"standard webhooks, missing timestamp", provider.Standard, hdr("Webhook-Id", swID, "Webhook-Signature", swSig), swBody, []string{swSecret}, swAt, 0, provider.ErrMalformed},
		{"standard webhooks, missing signature", provider.Standard, hdr("Webhook-Id", swID, "Webhook-Timestamp", "1614265330"), swBody, []string{swSecret}, swAt, 0, provider.ErrNoSignature},
		{"standard webhooks, old timestamp", provider.Standard, hdr("Webhook-Id", swID, "Webhook-Timestamp", "1614265330", "Webhook-Signature", swSig), swBody, []string{swSecret}, swAt.Add(5*time.Minute + time.Second), 0, provider.ErrStale},
		{"standard webhooks, new timestamp", provider.Standard, hdr("Webhook-Id", swID, "Webhook-Timestamp", "1614265330", "Webhook-Signature", swSig), swBody, []string{swSecret}, swAt.Add(-5*time.Minute - time.Second), 0, provider.ErrStale},
		{"standard webhooks, tolerance off", provider.Standard, hdr("Webhook-Id", swID, "Webhook-Timestamp", "1614265330", "Webhook-Signature", swSig), swBody, []string{swSecret}, swAt.Add(24 * time.Hour), -1, nil},
		{"standard webhooks, a secret that is not base64", provider.Standard, hdr("Webhook-Id", swID, "Webhook-Timestamp", "1614265330", "Webhook-Signature", swSig), swBody, []string{"whsec_not base64!"}, swAt, 0, provider.ErrSecretFormat},

		{"slack", provider.Slack, hdr("X-Slack-Signature", slackSig, "X-Slack-Request-Timestamp", "1531420618"), slackBody, []string{slackSecret}, slackAt, 0, nil},
		{"slack, stale", provider.Slack, hdr("X-Slack-Signature", slackSig, "X-Slack-Request-Timestamp", "1531420618"), slackBody, []string{slackSecret}, slackAt.Add(time.Hour), 0, provider.ErrStale},
		{"slack, no timestamp", provider.Slack, hdr("X-Slack-Signature", slackSig), slackBody, []string{slackSecret}, slackAt, 0, provider.ErrMalformed},

		{"stripe", provider.Stripe, hdr("Stripe-Signature", "t=1700000000,v1="+stripeSig), body, []string{"whsec_test_secret"}, stripeAt, 0, nil},
		{"stripe, an unreadable signature beside is ignored", provider.Stripe, hdr("Stripe-Signature", "t=1700000000,v1="+stripeSig+",v1=bad_signature"), body, []string{"whsec_test_secret"}, stripeAt, 0, nil},
		{"stripe, rolled key: both signatures, each secret", provider.Stripe, hdr("Stripe-Signature", "t=1700000000,v1="+stripeSig+",v1="+stripeSig2), body, []string{"whsec_test_secret_rolled_key"}, stripeAt, 0, nil},
		{"stripe, v0 only", provider.Stripe, hdr("Stripe-Signature", "t=1700000000,v0="+stripeSig), body, []string{"whsec_test_secret"}, stripeAt, 0, provider.ErrMalformed},
		{"stripe, bad header", provider.Stripe, hdr("Stripe-Signature", "v1,t=1"), body, []string{"whsec_test_secret"}, stripeAt, 0, provider.ErrMalformed},
		{"stripe, too old", provider.Stripe, hdr("Stripe-Signature", "t=1700000000,v1="+stripeSig), body, []string{"whsec_test_secret"}, stripeAt.Add(15 * time.Second), 10 * time.Second, provider.ErrStale},
		{"stripe, within a tolerance", provider.Stripe, hdr("Stripe-Signature", "t=1700000000,v1="+stripeSig), body, []string{"whsec_test_secret"}, stripeAt.Add(15 * time.Second), 20 * time.Second, nil},
		{"stripe, wrong body", provider.Stripe, hdr("Stripe-Signature", "t=1700000000,v1="+stripeSig), append(body, ' '), []string{"whsec_test_secret"}, stripeAt, 0, provider.ErrMismatch},

		{"gitea", provider.Gitea, hdr("X-Gitea-Signature", giteaSig), body, []string{"gitea-secret"}, time.Time{}, 0, nil},
		{"forgejo", provider.Forgejo, hdr("X-Forgejo-Signature", giteaSig), body, []string{"gitea-secret"}, time.Time{}, 0, nil},
		{"gitea, with a prefix", provider.Gitea, hdr("X-Gitea-Signature", "sha256="+giteaSig), body, []string{"gitea-secret"}, time.Time{}, 0, provider.ErrMalformed},
		{"bitbucket", provider.Bitbucket, hdr("X-Hub-Signature", "sha256="+giteaSig), body, []string{"gitea-secret"}, time.Time{}, 0, nil},
		{"gitlab", provider.GitLab, hdr("X-Gitlab-Token", "gl-token"), body, []string{"gl-token"}, time.Time{}, 0, nil},
		{"gitlab, another token", provider.GitLab, hdr("X-Gitlab-Token", "gl-token"), body, []string{"gl-token2"}, time.Time{}, 0, provider.ErrMismatch},
		{"shopify", provider.Shopify, hdr("X-Shopify-Hmac-Sha256", shopifySig), body, []string{"shopify-secret"}, time.Time{}, 0, nil},
		{"shopify, not base64", provider.Shopify, hdr("X-Shopify-Hmac-Sha256", "%%"), body, []string{"shopify-secret"}, time.Time{}, 0, provider.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := provider.Verify(tt.scheme, tt.h, tt.body, provider.Check{Secrets: tt.secrets, Now: tt.now, Tolerance: tt.tol})
			if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

// The stale message says how far, and which way.
func TestStaleSaysTheAge(t *testing.T) {
	err := provider.Verify(provider.Slack, hdr("X-Slack-Signature", slackSig, "X-Slack-Request-Timestamp", "1531420618"), slackBody,
		provider.Check{Secrets: []string{slackSecret}, Now: slackAt.Add(time.Hour)})
	if err == nil || err.Error() != "signed timestamp out of tolerance: signed 1h0m0s ago, beyond 5m0s" {
		t.Errorf("Verify = %v", err)
	}
}

// Sign makes what the providers' examples show.
func TestSignKnownAnswers(t *testing.T) {
	for _, tt := range []struct {
		scheme provider.Scheme
		secret string
		body   []byte
		opts   provider.Signing
		header string
		want   string
	}{
		{provider.GitHub, githubSecret, githubBody, provider.Signing{}, "X-Hub-Signature-256", githubSig},
		{provider.Standard, swSecret, swBody, provider.Signing{ID: swID, At: swAt}, "Webhook-Signature", swSig},
		{provider.Slack, slackSecret, slackBody, provider.Signing{At: slackAt}, "X-Slack-Signature", slackSig},
		{provider.Stripe, "whsec_test_secret", body, provider.Signing{At: stripeAt}, "Stripe-Signature", "t=1700000000,v1=" + stripeSig},
		{provider.Gitea, "gitea-secret", body, provider.Signing{}, "X-Gitea-Signature", giteaSig},
		{provider.Shopify, "shopify-secret", body, provider.Signing{}, "X-Shopify-Hmac-Sha256", shopifySig},
	} {
		h, err := provider.Sign(tt.scheme, tt.secret, tt.body, tt.opts)
		if err != nil || h.Get(tt.header) != tt.want {
			t.Errorf("Sign(%s) %s = %q, %v; want %q", tt.scheme, tt.header, h.Get(tt.header), err, tt.want)
		}
	}
}

// Detection never picks a scheme whose header is absent, prefers the most
// specific, and a caller that names a scheme gets that one checked.
func TestDetect(t *testing.T) {
	for _, tt := range []struct {
		h    http.Header
		want provider.Scheme
	}{
		{hdr("Content-Type", "application/json", "X-Github-Event", "push"), ""},
		{hdr("X-Hub-Signature-256", githubSig), provider.GitHub},
		{hdr("X-Hub-Signature", githubSHA1), provider.GitHub},
		{hdr("X-Hub-Signature", "sha256="+giteaSig), provider.Bitbucket},
		{hdr("X-Gitea-Signature", giteaSig, "X-Hub-Signature-256", "sha256="+giteaSig), provider.Gitea},
		{hdr("X-Forgejo-Signature", giteaSig, "X-Gitea-Signature", giteaSig), provider.Forgejo},
		{hdr("X-Gitlab-Token", "t"), provider.GitLab},
		{hdr("Webhook-Signature", swSig), provider.Standard},
		{hdr("Stripe-Signature", "t=1,v1=00"), provider.Stripe},
		{hdr("X-Shopify-Hmac-Sha256", shopifySig), provider.Shopify},
		{hdr("X-Slack-Signature", slackSig), provider.Slack},
	} {
		if got := provider.Detect(tt.h); got != tt.want {
			t.Errorf("Detect(%v) = %q, want %q", tt.h, got, tt.want)
		}
	}
	// Two schemes' headers: the one named is the one checked.
	both := hdr("X-Hub-Signature-256", githubSig, "Stripe-Signature", "t=1700000000,v1="+stripeSig)
	if err := provider.Verify(provider.Stripe, both, githubBody, provider.Check{Secrets: []string{"whsec_test_secret"}, Now: stripeAt}); !errors.Is(err, provider.ErrMismatch) {
		t.Errorf("stripe named on a delivery with GitHub's header too: %v, want Stripe's mismatch (its body differs)", err)
	}
	if err := provider.Verify(provider.GitHub, both, githubBody, provider.Check{Secrets: []string{githubSecret}}); err != nil {
		t.Errorf("github named: %v", err)
	}
}

func TestEvent(t *testing.T) {
	for _, tt := range []struct {
		s    provider.Scheme
		h    http.Header
		body string
		want string
	}{
		{provider.GitHub, hdr("X-Github-Event", "push"), `{}`, "push"},
		{provider.Gitea, hdr("X-Gitea-Event", "issues", "X-Github-Event", "issues"), `{}`, "issues"},
		{provider.GitLab, hdr("X-Gitlab-Event", "Push Hook"), `{}`, "Push Hook"},
		{provider.Bitbucket, hdr("X-Event-Key", "repo:push"), `{}`, "repo:push"},
		{provider.Shopify, hdr("X-Shopify-Topic", "orders/create"), `{}`, "orders/create"},
		{provider.Stripe, hdr(), `{"id":"evt_1","type":"payment_intent.succeeded"}`, "payment_intent.succeeded"},
		{provider.Standard, hdr(), `{"type":"invoice.paid","data":{}}`, "invoice.paid"},
		{provider.Standard, hdr(), `not json`, ""},
	} {
		if got := provider.Event(tt.s, tt.h, []byte(tt.body)); got != tt.want {
			t.Errorf("Event(%s) = %q, want %q", tt.s, got, tt.want)
		}
	}
}

// Each sender's delivery id, as it sends it (the header names and shapes
// of their documentation): the one id a trace, a capture file's name, the
// inspector and the duplicate check use. Before, only GitHub's was read:
// the others' deliveries were "#N" and "-noid.json".
func TestDeliveryID(t *testing.T) {
	for _, tt := range []struct {
		sender string
		h      http.Header
		body   string
		want   string
		resent bool // Resent: the sender retries on its own
	}{
		{"github", hdr("X-Github-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-Hub-Signature-256", "sha256=x"), `{}`, "72d3162e-cc78-11e3-81ab-4c9367dc0958", false},
		{"gitea", hdr("X-Gitea-Delivery", "f6266f16-1bf3-46a5-9ea4-602e06ead473", "X-Gitea-Signature", "x"), `{}`, "f6266f16-1bf3-46a5-9ea4-602e06ead473", false},
		{"forgejo", hdr("X-Forgejo-Delivery", "b5b5a0d8-6a4e-4f64-9d3a-0f5e2f36f2c1"), `{}`, "b5b5a0d8-6a4e-4f64-9d3a-0f5e2f36f2c1", false},
		{"standard", hdr("Webhook-Id", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "Webhook-Timestamp", "1674087231", "Webhook-Signature", "v1,x"), `{"type":"x"}`, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", true},
		{"gitlab, with an Idempotency-Key", hdr("Idempotency-Key", "f5e5f430-f57b-4e6e-9fac-d9128cd7232f", "X-Gitlab-Event-Uuid", "13792a34-cac6-4fda-95a8-c58e00a3954e", "X-Gitlab-Token", "t"), `{}`, "f5e5f430-f57b-4e6e-9fac-d9128cd7232f", true},
		{"gitlab", hdr("X-Gitlab-Event-Uuid", "13792a34-cac6-4fda-95a8-c58e00a3954e", "X-Gitlab-Token", "t"), `{}`, "13792a34-cac6-4fda-95a8-c58e00a3954e", true},
		{"bitbucket", hdr("X-Request-Uuid", "{afb4c6d6-0b8f-4f5b-b2b4-0c52f1a6e3b7}", "X-Event-Key", "repo:push"), `{}`, "{afb4c6d6-0b8f-4f5b-b2b4-0c52f1a6e3b7}", true},
		{"shopify", hdr("X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "X-Shopify-Hmac-Sha256", "x"), `{}`, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", true},
		{"stripe", hdr("Stripe-Signature", "t=1,v1=x"), `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","type":"invoice.paid"}`, "evt_1NG8Du2eZvKYlo2CUI79vXWy", true},
		{"slack", hdr("X-Slack-Signature", "v0=x", "X-Slack-Request-Timestamp", "1"), `{"type":"event_callback","event_id":"Ev0PV52K21"}`, "Ev0PV52K21", true},
		{"an unsigned payload with an id member", hdr(), `{"id":"not-a-delivery-id"}`, "", false},
	} {
		if got := provider.DeliveryID(tt.h, []byte(tt.body)); got != tt.want {
			t.Errorf("%s: DeliveryID = %q, want %q", tt.sender, got, tt.want)
		}
		if got := provider.Resent(tt.h, []byte(tt.body)); got != tt.resent {
			t.Errorf("%s: Resent = %v, want %v", tt.sender, got, tt.resent)
		}
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]provider.Scheme{"Stripe": provider.Stripe, "svix": provider.Standard, "standard-webhooks": provider.Standard, " gitlab ": provider.GitLab} {
		if got, err := provider.Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := provider.Parse("paypal"); !errors.Is(err, provider.ErrUnknown) || !strings.Contains(err.Error(), "forgejo, gitea, github") {
		t.Errorf("Parse(paypal) = %v", err)
	}
}

// Every scheme's header parser, fed any bytes: no panic, and nothing
// verifies without the secret's signature.
func FuzzVerify(f *testing.F) {
	f.Add("t=1700000000,v1="+stripeSig, "1531420618", swID, []byte(`{}`))
	f.Add(swSig, "1614265330", swID, swBody)
	f.Add(slackSig, "x", "", slackBody)
	f.Add("sha256="+giteaSig, "", "", body)
	f.Fuzz(func(t *testing.T, sig, ts, id string, b []byte) {
		for _, s := range provider.Schemes {
			h := hdr("Webhook-Id", id, "Webhook-Timestamp", ts, "X-Slack-Request-Timestamp", ts)
			h.Set(map[provider.Scheme]string{provider.GitHub: "X-Hub-Signature-256", provider.Gitea: "X-Gitea-Signature", provider.Forgejo: "X-Forgejo-Signature",
				provider.Bitbucket: "X-Hub-Signature", provider.GitLab: "X-Gitlab-Token", provider.Standard: "Webhook-Signature", provider.Stripe: "Stripe-Signature",
				provider.Shopify: "X-Shopify-Hmac-Sha256", provider.Slack: "X-Slack-Signature"}[s], sig)
			err := provider.Verify(s, h, b, provider.Check{Secrets: []string{"fuzz-secret-not-the-signers"}, Tolerance: -1})
			if err == nil && s != provider.GitLab {
				t.Fatalf("%s: %q verified with a secret nobody signed with", s, sig)
			}
		}
	})
}

func TestHandshakeOf(t *testing.T) {
	slackBody := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	slackSigned, err := provider.Sign(provider.Slack, "8f742231b10e8888abcd99yyyzzz85a5", slackBody, provider.Signing{})
	if err != nil {
		t.Fatal(err)
	}
	hub := url.Values{"hub.mode": {"subscribe"}, "hub.challenge": {"1158201444"}, "hub.verify_token": {"meatyhamhock"}}
	for _, tt := range []struct {
		name  string
		h     http.Header
		query url.Values
		body  []byte
		want  provider.Handshake
		ok    bool
	}{
		{"slack url_verification", slackSigned, nil, slackBody, provider.Handshake{Kind: "slack url_verification", Challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}, true},
		{"the same body unsigned", hdr(), nil, slackBody, provider.Handshake{}, false},
		{"a Slack event", slackSigned, nil, []byte(`{"type":"event_callback","challenge":"x"}`), provider.Handshake{}, false},
		{"hub.challenge (Meta's)", hdr(), hub, nil, provider.Handshake{Kind: "hub.challenge", Challenge: "1158201444", VerifyToken: "meatyhamhock"}, true},
		{"hub.challenge with a body", hdr(), hub, []byte("{}"), provider.Handshake{}, false},
		{"hub.mode without a challenge", hdr(), url.Values{"hub.mode": {"subscribe"}}, nil, provider.Handshake{}, false},
		{"another hub.mode", hdr(), url.Values{"hub.mode": {"denied"}, "hub.challenge": {"x"}}, nil, provider.Handshake{}, false},
	} {
		got, ok := provider.HandshakeOf(tt.h, tt.query, tt.body)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: HandshakeOf = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
