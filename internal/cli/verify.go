package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/fatih/color"
	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/provider"
)

// verifyOptions are the parsed flags of `hookline verify`.
type verifyOptions struct {
	secret    string
	signature string
	input     string          // a file, or "-" for stdin
	scheme    provider.Scheme // --provider
	header    http.Header     // --header: what else the scheme signs (a timestamp, an id)
	tolerance time.Duration
}

// errSignatureMismatch is the exit-code-1 error of verify.
var errSignatureMismatch = errors.New("signature does not match the payload and secret")

func verifyCommand(s *streams) *ucli.Command {
	var sv secretFlagValues
	var pv providerFlagValues
	var signature string
	var headers ucli.StringSlice
	return &ucli.Command{
		Name:      "verify",
		Usage:     "check a payload's X-Hub-Signature-256",
		ArgsUsage: "[FILE|-]",
		Description: `Checks that SIG is the signature of the exact bytes of FILE (or of stdin
when FILE is - or absent) under the webhook secret, in constant time.

Exit code 0: valid. 1: the signature does not match. 2: usage error (a
missing flag, an unreadable file, or a signature that is not of the form
sha256=<64 lowercase hex digits>, which no payload could match).

Every byte counts, a trailing newline included: hookline never trims the
input, and says so when the signature would match without the newline.

   hookline verify --secret-file .secret --signature "sha256=…" payload.json`,
		Flags: append(append(secretFlags("the webhook `SECRET` to check with", &sv), providerFlags(&pv, "github", true)...),
			&ucli.StringFlag{Name: "signature", Aliases: []string{"s"}, Usage: "the signature header's value to check, `SIG`: X-Hub-Signature-256's sha256=<64 hex digits>, or --provider's header's", Destination: &signature},
			&ucli.StringSliceFlag{Name: "header", Usage: "a header `\"NAME: VALUE\"` the provider signs besides the body (webhook-id and webhook-timestamp, X-Slack-Request-Timestamp); repeatable", Destination: &headers},
		),
		Action: func(c *ucli.Context) error {
			opts, err := parseVerify(c, &sv, signature)
			if err == nil {
				opts.scheme, err = pv.scheme()
				opts.tolerance = pv.checkTolerance()
			}
			if err == nil {
				opts.header, err = parseHeaders(headers.Value())
			}
			if err != nil {
				return err
			}
			return errRedacted(runVerify(c.Context, opts, s), opts.secret)
		},
	}
}

func parseVerify(c *ucli.Context, sv *secretFlagValues, signature string) (verifyOptions, error) {
	secret, err := readSecret(c, sv)
	if err != nil {
		return verifyOptions{}, err
	}
	if secret == "" {
		return verifyOptions{}, usageErrorf("verify needs the webhook secret: give --secret, --secret-file or set %s", secretEnv)
	}
	o := verifyOptions{secret: secret, signature: strings.TrimSpace(signature)}
	if o.signature == "" {
		return o, usageErrorf("verify needs --signature (the X-Hub-Signature-256 header's value, sha256=…)")
	}
	o.input, err = inputArg(c)
	return o, err
}

func runVerify(_ context.Context, o verifyOptions, s *streams) error {
	if o.scheme != provider.GitHub {
		return runVerifyScheme(o, s)
	}
	if why := malformedSignature(o.signature); why != "" {
		return usageErrorf("--signature: %s", why)
	}
	payload, err := readInput(o.input, s)
	if err != nil {
		return err
	}
	ok, err := webhooks.Verify(o.secret, payload, o.signature)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if ok {
		_, err := fmt.Fprintln(s.out, "valid: the signature matches")
		return err
	}
	warn := paint(s.errColor, color.FgYellow).Sprint("warning:")
	if trimmed, had := trimNewline(payload); had {
		if ok, _ := webhooks.Verify(o.secret, trimmed, o.signature); ok {
			fmt.Fprintf(s.err, "%s %s ends with a newline that was not signed: the signature matches without it. An editor or echo probably added it; GitHub signs the body exactly as sent (use printf '%%s', or save the body without a final newline)\n",
				warn, inputName(o.input))
		}
	} else if ok, _ := webhooks.Verify(o.secret, append(payload[:len(payload):len(payload)], '\n'), o.signature); ok {
		fmt.Fprintf(s.err, "%s the signature was made over %s plus a final newline: whoever signed it added one (echo does; printf '%%s' does not). GitHub signs the body exactly as sent\n",
			warn, inputName(o.input))
	}
	return &codeError{code: ExitFailure, err: fmt.Errorf("%w: check the secret, and that the payload is the exact body GitHub sent", errSignatureMismatch)}
}

// trimNewline returns p without one trailing "\n" or "\r\n", and whether
// there was one.
func trimNewline(p []byte) ([]byte, bool) {
	if t, ok := bytes.CutSuffix(p, []byte("\r\n")); ok {
		return t, true
	}
	return bytes.CutSuffix(p, []byte("\n"))
}

// malformedSignature says what is wrong with the form of sig, "" when it
// is sha256=<64 lowercase hex digits>: a malformed one is a usage error
// (exit 2), not a mismatch (exit 1), since no payload could match it.
func malformedSignature(sig string) string {
	hex, prefixed := strings.CutPrefix(sig, "sha256=")
	switch {
	case strings.HasPrefix(sig, "sha1="):
		return "this is a legacy X-Hub-Signature (SHA-1); give the X-Hub-Signature-256 value (sha256=…)"
	case !prefixed:
		return "a signature looks like sha256=<64 hex digits>, the X-Hub-Signature-256 header's value"
	case len(hex) != 64:
		return fmt.Sprintf("the signature has %d hex digits after sha256=, want 64", len(hex))
	case hex != strings.ToLower(hex):
		return "the hex digits must be lowercase, as GitHub sends them"
	case strings.Trim(hex, "0123456789abcdef") != "":
		return "the signature has characters that are not hex digits after sha256="
	}
	return ""
}

// runVerifyScheme checks another sender's signature: --signature is its
// signature header, --header what else it signs.
func runVerifyScheme(o verifyOptions, s *streams) error {
	if o.scheme == "" {
		return usageErrorf("--provider auto: verify checks one sender's scheme; name it")
	}
	payload, err := readInput(o.input, s)
	if err != nil {
		return err
	}
	h := o.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(o.scheme.Header(), o.signature)
	err = provider.Verify(o.scheme, h, payload, provider.Check{Secrets: []string{o.secret}, Tolerance: o.tolerance})
	switch {
	case err == nil:
		_, err := fmt.Fprintf(s.out, "valid: the %s signature matches\n", o.scheme)
		return err
	case errors.Is(err, provider.ErrMismatch), errors.Is(err, provider.ErrStale):
		return &codeError{code: ExitFailure, err: err}
	}
	return usageErrorf("%v", err)
}
