package proxy

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/webhooks"
)

// verifyDelivery checks d's signature against secret and then each of
// additionalSecrets, as a Client does: VerificationSkipped when secret is empty,
// VerificationPassed when it matches, VerificationFailed otherwise, with a note saying why (or
// warning about a legacy SHA-1 signature).
func verifyDelivery(d *delivery.Delivery, secret string, additionalSecrets ...string) (Verification, string) {
	if secret == "" {
		return VerificationSkipped, ""
	}
	sig, sha1 := d.Signature()
	if sig == "" {
		if d.Headers.Get("User-Agent") == wire.SendUserAgent {
			return VerificationFailed, "no X-Hub-Signature-256 header: hookline send sent it without a secret (give send the same --secret or --secret-file)"
		}
		return VerificationFailed, "no X-Hub-Signature-256 header: the delivery was not signed (set the secret on the GitHub webhook)"
	}
	ok := false
	note := ""
	if sha1 {
		ok = verifySHA1(append([]string{secret}, additionalSecrets...), d.Body, sig)
		note = "legacy SHA-1 signature (X-Hub-Signature): the sender does not send X-Hub-Signature-256"
	} else {
		ok, _ = webhooks.VerifyWithFallback(secret, d.Body, sig, additionalSecrets...)
	}
	switch {
	case ok:
		return VerificationPassed, note
	case len(d.Body) == 0:
		return VerificationFailed, "the delivery has no body"
	case d.BodySource == delivery.BodyCapture:
		return VerificationFailed, "signature does not match the saved body and secret: check the secret (a body relayed through smee.io may have been re-encoded before it was saved)"
	case !d.BodySource.Exact():
		return VerificationFailed, fmt.Sprintf("signature does not match; the relay re-encoded the body (%s field), so the exact bytes GitHub signed may be lost; use a relay that keeps them (hookline serve, gosmee) or check the secret", d.BodySource)
	default:
		return VerificationFailed, "signature does not match the body and secret: check the secret against the webhook's secret on GitHub"
	}
}

// verifySHA1 checks a legacy "sha1=<hex>" signature in constant time.
func verifySHA1(secrets []string, body []byte, sig string) bool {
	want, ok := strings.CutPrefix(sig, "sha1=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(want)
	if err != nil || want != strings.ToLower(want) {
		return false
	}
	match := false
	for _, s := range secrets {
		m := hmac.New(sha1.New, []byte(s))
		m.Write(body)
		if hmac.Equal(m.Sum(nil), got) {
			match = true
		}
	}
	return match
}
