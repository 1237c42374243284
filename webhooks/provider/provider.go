// Package provider verifies and makes the signatures of every webhook
// sender hookline knows, not only GitHub's: one routine keyed by scheme (as
// go-github's messageMAC is keyed by hash), with the scheme detected from
// a delivery's headers or named by the caller.
//
//	s := provider.Detect(r.Header)                     // "" when no scheme's header is there
//	err := provider.Verify(s, r.Header, body, provider.Check{Secrets: []string{secret}})
//	h, err := provider.Sign(provider.Stripe, secret, body, provider.Signing{})
//
// Schemes (the header that carries the signature, what is signed, how):
//
//	github     X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>; the legacy
//	           X-Hub-Signature: sha1=<hex HMAC-SHA1> only when no sha256 is sent
//	gitea      X-Gitea-Signature: <hex HMAC-SHA256 of the body>
//	forgejo    X-Forgejo-Signature: the same
//	bitbucket  X-Hub-Signature: sha256=<hex HMAC-SHA256 of the body> (Bitbucket Cloud)
//	gitlab     X-Gitlab-Token: the secret itself, compared in constant time
//	standard   Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature:
//	           v1,<base64 HMAC-SHA256 of "id.timestamp.body">, several separated by spaces;
//	           the secret is base64, with or without "whsec_"
//	stripe     Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">[,v1=…]; the
//	           secret (whsec_…) is the key as written
//	shopify    X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256 of the body>
//	slack      X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:timestamp:body">,
//	           X-Slack-Request-Timestamp
//
// Schemes with a timestamp (standard, stripe, slack) refuse one further
// than Check.Tolerance (5 minutes by default) from Check.Now, either way.
// Errors say why: ErrNoSignature (the scheme's header is absent), ErrStale
// (with the age), ErrSecretFormat, ErrMalformed, ErrMismatch. It imports
// only the standard library and the module's stdlib-only jsonscan.
package provider

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/internal/jsonscan"
	"github.com/hookline/hookline/webhooks/internal/signature"
)

// Scheme names how a sender signs its deliveries.
type Scheme string

// The schemes, in the order Detect tries them (the most specific header
// first: Gitea and Forgejo also send GitHub's headers).
const (
	Forgejo   Scheme = "forgejo"
	Gitea     Scheme = "gitea"
	GitHub    Scheme = "github"
	Bitbucket Scheme = "bitbucket"
	GitLab    Scheme = "gitlab"
	Standard  Scheme = "standard"
	Stripe    Scheme = "stripe"
	Shopify   Scheme = "shopify"
	Slack     Scheme = "slack"
)

// Schemes lists every scheme, in Detect's order.
var Schemes = []Scheme{Forgejo, Gitea, GitHub, Bitbucket, GitLab, Standard, Stripe, Shopify, Slack}

// DefaultTolerance is how far a signed timestamp may be from now.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify and Sign; Verify's wrap them with what was found.
var (
	ErrNoSignature  = errors.New("no signature header")
	ErrMismatch     = errors.New("signature does not match")
	ErrStale        = errors.New("signed timestamp out of tolerance")
	ErrSecretFormat = errors.New("the secret is not in the scheme's format")
	ErrMalformed    = errors.New("malformed signature header")
	ErrUnknown      = errors.New("unknown scheme")
)

// Parse returns the scheme named s (any letter case; "standard-webhooks"
// and "svix" are Standard).
func Parse(s string) (Scheme, error) {
	switch v := Scheme(strings.ToLower(strings.TrimSpace(s))); v {
	case "standard-webhooks", "standardwebhooks", "svix":
		return Standard, nil
	default:
		for _, k := range Schemes {
			if v == k {
				return k, nil
			}
		}
	}
	names := make([]string, len(Schemes))
	for i, k := range Schemes {
		names[i] = string(k)
	}
	return "", fmt.Errorf("%w %q: want one of %s", ErrUnknown, s, strings.Join(names, ", "))
}

// Header returns the header that carries s's signature ("" for an unknown scheme).
func (s Scheme) Header() string {
	switch s {
	case GitHub:
		return "X-Hub-Signature-256"
	case Gitea:
		return "X-Gitea-Signature"
	case Forgejo:
		return "X-Forgejo-Signature"
	case Bitbucket:
		return "X-Hub-Signature"
	case GitLab:
		return "X-Gitlab-Token"
	case Standard:
		return "Webhook-Signature"
	case Stripe:
		return "Stripe-Signature"
	case Shopify:
		return "X-Shopify-Hmac-Sha256"
	case Slack:
		return "X-Slack-Signature"
	}
	return ""
}

// Detect returns the scheme whose signature header h carries, the most
// specific first; "" when there is none. GitHub's legacy SHA-1 header
// alone is GitHub; X-Hub-Signature with sha256= and no
// X-Hub-Signature-256 is Bitbucket.
func Detect(h http.Header) Scheme {
	for _, s := range Schemes {
		switch v := h.Get(s.Header()); {
		case v == "":
			if s == GitHub && strings.HasPrefix(h.Get("X-Hub-Signature"), "sha1=") {
				return GitHub
			}
		case s == Bitbucket && !strings.HasPrefix(v, "sha256="):
		default:
			return s
		}
	}
	return ""
}

// Check is what Verify checks a delivery against.
type Check struct {
	// Secrets are tried in turn (a key rotation): one that matches is
	// enough.
	Secrets []string
	// Now is the time signed timestamps are compared with (the zero
	// time: time.Now()); Tolerance how far they may be (zero:
	// DefaultTolerance; negative: no check).
	Now       time.Time
	Tolerance time.Duration
}

// Verify checks the signature of a delivery (its headers h and exact body)
// under scheme s. It returns nil when one of c.Secrets makes one of the
// delivery's signatures, and an error wrapping one of the package's
// errors otherwise.
func Verify(s Scheme, h http.Header, body []byte, c Check) error {
	if s.Header() == "" {
		return fmt.Errorf("%w %q", ErrUnknown, s)
	}
	if len(c.Secrets) == 0 {
		return fmt.Errorf("%w: no secret to check with", ErrSecretFormat)
	}
	p, err := parse(s, h, body)
	if err != nil {
		return err
	}
	if ts := p.ts; ts != nil {
		now := c.Now
		if now.IsZero() {
			now = time.Now()
		}
		tol := c.Tolerance
		if tol == 0 {
			tol = DefaultTolerance
		}
		if age := now.Sub(*ts); tol > 0 && (age > tol || age < -tol) {
			return fmt.Errorf("%w: signed %s %s, beyond %s", ErrStale, age.Abs().Round(time.Second), map[bool]string{true: "ago", false: "ahead"}[age > 0], tol)
		}
	}
	for _, secret := range c.Secrets {
		if s == GitLab {
			for _, sig := range p.sigs {
				if subtle.ConstantTimeCompare(sig, []byte(secret)) == 1 {
					return nil
				}
			}
			continue
		}
		key, err := keyOf(s, secret)
		if err != nil {
			return err
		}
		want := signature.MAC(nil, p.hash, key, p.msg)
		for _, sig := range p.sigs {
			if hmac.Equal(sig, want) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %s under %s with %s", ErrMismatch, s.Header(), s, plural(len(c.Secrets), "secret"))
}

func plural(n int, what string) string {
	if n == 1 {
		return "the " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// signed is what parse reads of a delivery: its signatures (raw bytes, or
// the token for GitLab), the bytes they sign, the signed timestamp if the
// scheme has one, and the hash of their HMAC.
type signed struct {
	sigs [][]byte
	msg  []byte
	ts   *time.Time
	hash func() hash.Hash
}

// parse reads s's signatures from h.
func parse(s Scheme, h http.Header, body []byte) (signed, error) {
	var sigs [][]byte
	name := s.Header()
	v := strings.TrimSpace(h.Get(name))
	if v == "" && s == GitHub {
		name = "X-Hub-Signature"
		if v = h.Get(name); !strings.HasPrefix(v, "sha1=") {
			v = ""
		}
	}
	if v == "" {
		return signed{}, fmt.Errorf("%w: %s is absent (a %s delivery carries it)", ErrNoSignature, s.Header(), s)
	}
	malformed := func(why string) error {
		return fmt.Errorf("%w: %s %.80q: %s", ErrMalformed, name, v, why)
	}
	switch s {
	case GitHub, Bitbucket:
		prefix, hash := "sha256=", sha256.New
		if name == "X-Hub-Signature" && s == GitHub {
			prefix, hash = "sha1=", sha1.New // the legacy header
		}
		hexSig, ok := strings.CutPrefix(v, prefix)
		b, err := hex.DecodeString(hexSig)
		if !ok || err != nil {
			return signed{}, malformed("want " + prefix + "<hex>")
		}
		return signed{sigs: [][]byte{b}, msg: body, hash: hash}, nil
	case Gitea, Forgejo:
		b, err := hex.DecodeString(v)
		if err != nil {
			return signed{}, malformed("want the hex HMAC")
		}
		return signed{sigs: [][]byte{b}, msg: body, hash: sha256.New}, nil
	case GitLab:
		return signed{sigs: [][]byte{[]byte(v)}}, nil
	case Shopify:
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return signed{}, malformed("want the base64 HMAC")
		}
		return signed{sigs: [][]byte{b}, msg: body, hash: sha256.New}, nil
	case Standard:
		id, tsText := h.Get("Webhook-Id"), h.Get("Webhook-Timestamp")
		if id == "" || tsText == "" {
			return signed{}, fmt.Errorf("%w: webhook-id and webhook-timestamp must come with webhook-signature", ErrMalformed)
		}
		t, err := unixTime(tsText)
		if err != nil {
			return signed{}, fmt.Errorf("%w: webhook-timestamp %.40q is not Unix seconds", ErrMalformed, tsText)
		}
		for _, part := range strings.Fields(v) {
			version, b64, ok := strings.Cut(part, ",")
			if !ok || version != "v1" {
				continue // another version, or another scheme's (v1a): not ours
			}
			if b, err := base64.StdEncoding.DecodeString(b64); err == nil && len(b) > 0 {
				sigs = append(sigs, b)
			}
		}
		if len(sigs) == 0 {
			return signed{}, malformed("no v1,<base64> signature")
		}
		return signed{sigs, append([]byte(id+"."+tsText+"."), body...), &t, sha256.New}, nil
	case Stripe:
		var tsText string
		for _, part := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
			switch k {
			case "t":
				tsText = val
			case "v1":
				if b, err := hex.DecodeString(val); err == nil && len(b) > 0 {
					sigs = append(sigs, b) // an unreadable one is ignored, as Stripe's libraries do
				}
			}
		}
		t, err := unixTime(tsText)
		if err != nil {
			return signed{}, malformed("want t=<unix seconds>,v1=<hex>")
		}
		if len(sigs) == 0 {
			return signed{}, malformed("no v1 signature (only v1 is verified)")
		}
		return signed{sigs, append([]byte(tsText+"."), body...), &t, sha256.New}, nil
	case Slack:
		tsText := h.Get("X-Slack-Request-Timestamp")
		t, err := unixTime(tsText)
		if err != nil {
			return signed{}, fmt.Errorf("%w: X-Slack-Request-Timestamp %.40q is not Unix seconds", ErrMalformed, tsText)
		}
		hexSig, ok := strings.CutPrefix(v, "v0=")
		b, err := hex.DecodeString(hexSig)
		if !ok || err != nil {
			return signed{}, malformed("want v0=<hex>")
		}
		return signed{[][]byte{b}, append([]byte("v0:"+tsText+":"), body...), &t, sha256.New}, nil
	}
	return signed{}, fmt.Errorf("%w %q", ErrUnknown, s)
}

func unixTime(s string) (time.Time, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, errors.New("not Unix seconds")
	}
	return time.Unix(n, 0), nil
}

// keyOf returns the HMAC key of secret under s: Standard Webhooks' is the
// base64 after "whsec_", every other scheme's the secret's bytes.
func keyOf(s Scheme, secret string) ([]byte, error) {
	if secret == "" {
		return nil, fmt.Errorf("%w: an empty secret", ErrSecretFormat)
	}
	if s != Standard {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("%w: a Standard Webhooks secret is base64, usually written whsec_<base64>", ErrSecretFormat)
	}
	return key, nil
}

// Signing is what Sign puts beside the signature for the schemes that sign
// more than the body.
type Signing struct {
	ID string    // Standard Webhooks' webhook-id (default: a new msg_ id)
	At time.Time // the signed timestamp (default: now)
}

// Sign returns the headers that sign body under s with secret: the
// signature, and for the schemes that need them the id and timestamp it
// signs. Set them on the request.
func Sign(s Scheme, secret string, body []byte, opts Signing) (http.Header, error) {
	if s.Header() == "" {
		return nil, fmt.Errorf("%w %q", ErrUnknown, s)
	}
	key, err := keyOf(s, secret)
	if err != nil {
		return nil, err
	}
	at := opts.At
	if at.IsZero() {
		at = time.Now()
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	h := http.Header{}
	sum := func(msg []byte) []byte { return signature.MAC(nil, sha256.New, key, msg) }
	switch s {
	case GitHub, Bitbucket:
		h.Set(s.Header(), "sha256="+hex.EncodeToString(sum(body)))
	case Gitea, Forgejo:
		h.Set(s.Header(), hex.EncodeToString(sum(body)))
	case GitLab:
		h.Set(s.Header(), secret)
	case Shopify:
		h.Set(s.Header(), base64.StdEncoding.EncodeToString(sum(body)))
	case Standard:
		id := opts.ID
		if id == "" {
			id = "msg_" + strconv.FormatInt(at.UnixNano(), 36)
		}
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", ts)
		h.Set(s.Header(), "v1,"+base64.StdEncoding.EncodeToString(sum(append([]byte(id+"."+ts+"."), body...))))
	case Stripe:
		h.Set(s.Header(), "t="+ts+",v1="+hex.EncodeToString(sum(append([]byte(ts+"."), body...))))
	case Slack:
		h.Set("X-Slack-Request-Timestamp", ts)
		h.Set(s.Header(), "v0="+hex.EncodeToString(sum(append([]byte("v0:"+ts+":"), body...))))
	}
	return h, nil
}

// idHeaders carry a delivery's id, each sender's, the most specific first:
// GitHub's, Gitea's, Forgejo's (the senders that never resend on their
// own: see Resent), Standard Webhooks', GitLab's (its
// Idempotency-Key, the same across its retries, then the event's UUID),
// Bitbucket's, Shopify's.
var idHeaders = []string{"X-Github-Delivery", "X-Gitea-Delivery", "X-Forgejo-Delivery", "Webhook-Id",
	"Idempotency-Key", "X-Gitlab-Event-Uuid", "X-Request-Uuid", "X-Shopify-Webhook-Id"}

// DeliveryID returns the sender's id of a delivery, the same across the
// sender's retries of it: the id header it carries (X-GitHub-Delivery,
// X-Gitea-Delivery, webhook-id...), or, signed by Stripe or Slack, whose
// ids are in the payload, its "id" or "event_id"; "" when there is none.
func DeliveryID(h http.Header, body []byte) string {
	for _, name := range idHeaders {
		if v := h.Get(name); v != "" {
			return v
		}
	}
	member := ""
	switch Detect(h) {
	case Stripe:
		member = "id"
	case Slack:
		member = "event_id"
	default:
		return ""
	}
	id, _ := jsonscan.StringMember(body, member)
	return string(id)
}

// Resent reports whether the sender of a delivery with headers h sends it
// again on its own, with the same DeliveryID, when it gets no 2xx answer
// in time: Standard Webhooks senders, GitLab, Bitbucket, Shopify, Stripe
// and Slack do. GitHub, Gitea and Forgejo never do: their deliveries
// repeat only when someone asks (a Redeliver button, the API), so a repeat
// of their id is a redelivery to handle, where another sender's is a
// retry of one already handled. false when the delivery has no id.
func Resent(h http.Header, body []byte) bool {
	for _, name := range idHeaders[:3] { // GitHub's, Gitea's, Forgejo's
		if h.Get(name) != "" {
			return false
		}
	}
	return DeliveryID(h, body) != ""
}

// A Handshake is a request a sender makes to learn that a URL is the
// receiver's before it sends deliveries there; it registers the URL only
// if the answer carries Challenge.
type Handshake struct {
	// Kind names it: "slack url_verification" or "hub.challenge".
	Kind string
	// Challenge is what the answer must carry: Slack's in JSON,
	// {"challenge": …}; a hub's as the whole body.
	Challenge string
	// VerifyToken is a hub's hub.verify_token: the token the receiver
	// chose when it registered the URL, to check before answering ("" for
	// Slack, whose request is signed instead).
	VerifyToken string
}

// HandshakeOf returns the handshake a request with headers h, query and
// body is, if it is one:
//
//	slack url_verification  a POST signed by Slack (X-Slack-Signature) whose JSON
//	                        "type" is "url_verification", with its "challenge"
//	hub.challenge           a GET with hub.mode=subscribe (or unsubscribe) and
//	                        hub.challenge, no body: a WebSub hub's check, Meta's
//	                        (WhatsApp, Instagram, Messenger), Strava's
func HandshakeOf(h http.Header, query url.Values, body []byte) (Handshake, bool) {
	if mode := query.Get("hub.mode"); (mode == "subscribe" || mode == "unsubscribe") && query.Get("hub.challenge") != "" && len(body) == 0 {
		return Handshake{Kind: "hub.challenge", Challenge: query.Get("hub.challenge"), VerifyToken: query.Get("hub.verify_token")}, true
	}
	if h.Get(Slack.Header()) == "" {
		return Handshake{}, false
	}
	if t, _ := jsonscan.StringMember(body, "type"); string(t) != "url_verification" {
		return Handshake{}, false
	}
	c, _ := jsonscan.StringMember(body, "challenge")
	if len(c) == 0 {
		return Handshake{}, false
	}
	return Handshake{Kind: "slack url_verification", Challenge: string(c)}, true
}

// Event returns the event a delivery of scheme s names: its event header,
// or for Standard Webhooks and Stripe the payload's "type"; "" when it
// names none.
func Event(s Scheme, h http.Header, body []byte) string {
	switch s {
	case GitHub:
		return h.Get("X-Github-Event")
	case Gitea:
		return h.Get("X-Gitea-Event")
	case Forgejo:
		return h.Get("X-Forgejo-Event")
	case GitLab:
		return h.Get("X-Gitlab-Event")
	case Bitbucket:
		return h.Get("X-Event-Key")
	case Shopify:
		return h.Get("X-Shopify-Topic")
	case Standard, Stripe, Slack:
		t, _ := jsonscan.StringMember(body, "type")
		return string(t)
	}
	return ""
}
