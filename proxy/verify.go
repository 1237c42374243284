package proxy

import (
	"errors"
	"fmt"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/webhooks/provider"
)

// verifier checks signatures as a Client does, with the secrets of
// Options (Secret and AdditionalSecrets for any scheme, SchemeSecrets for
// one) under Options.Provider's scheme or the one the headers carry.
type verifier struct {
	scheme   provider.Scheme // "" detects it per delivery
	any      []string        // Secret
	byScheme map[provider.Scheme][]string
	times    provider.Check // Now and Tolerance
}

func newVerifier(o Options) verifier {
	v := verifier{scheme: o.Provider, byScheme: o.SchemeSecrets, times: provider.Check{Tolerance: o.Tolerance}}
	if o.Secret != "" {
		v.any = []string{o.Secret}
	}
	return v
}

// secrets returns the secrets for scheme s.
func (v verifier) secrets(s provider.Scheme) []string {
	if sec := v.byScheme[s]; len(sec) > 0 {
		return sec
	}
	return v.any
}

// check returns d's verification, a note saying why it failed (or warning
// about a legacy SHA-1 signature), and the scheme checked ("" when none):
// VerificationSkipped when there is no secret for it.
func (v verifier) check(d *delivery.Delivery) (Verification, string, provider.Scheme) {
	if len(v.any) == 0 && len(v.byScheme) == 0 {
		return VerificationSkipped, "", ""
	}
	s := v.scheme
	if s == "" {
		s = provider.Detect(d.Headers)
	}
	if s == "" {
		if d.Headers.Get("User-Agent") == wire.SendUserAgent {
			return VerificationFailed, "no X-Hub-Signature-256 header: hookline send sent it without a secret (give send the same --secret or --secret-file)", ""
		}
		return VerificationFailed, "no X-Hub-Signature-256 header (nor another sender's signature): the delivery was not signed (set the secret on the GitHub webhook)", ""
	}
	secrets := v.secrets(s)
	if len(secrets) == 0 {
		return VerificationSkipped, "no secret for " + string(s) + " (give --secret " + string(s) + "=SECRET)", s
	}
	c := v.times
	c.Secrets = secrets
	err := provider.Verify(s, d.Headers, d.Body, c)
	switch {
	case err == nil && s == provider.GitHub && d.Headers.Get("X-Hub-Signature-256") == "":
		return VerificationPassed, "legacy SHA-1 signature (X-Hub-Signature): the sender does not send X-Hub-Signature-256", s
	case err == nil:
		return VerificationPassed, "", s
	case !errors.Is(err, provider.ErrMismatch):
		return VerificationFailed, err.Error(), s
	case len(d.Body) == 0:
		return VerificationFailed, "the delivery has no body", s
	case d.BodySource == delivery.BodyCapture:
		return VerificationFailed, "signature does not match the saved body and secret: check the secret (a body relayed through smee.io may have been re-encoded before it was saved)", s
	case !d.BodySource.Exact():
		return VerificationFailed, fmt.Sprintf("signature does not match; the relay re-encoded the body (%s field), so the exact bytes the sender signed may be lost; use a relay that keeps them (hookline serve, gosmee) or check the secret", d.BodySource), s
	case s == provider.GitHub:
		return VerificationFailed, "signature does not match the body and secret: check the secret against the webhook's secret on GitHub", s
	default:
		return VerificationFailed, fmt.Sprintf("%s signature does not match the body and secret: check the %s secret", s, s), s
	}
}
