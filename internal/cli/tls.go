package cli

import (
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/fatih/color"
	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/internal/httpx"
)

// insecureFlag is --insecure, shared by forward, replay and send.
func insecureFlag(dst *bool) ucli.Flag {
	return &ucli.BoolFlag{
		Name:        "insecure",
		Usage:       "do not verify TLS certificates of targets and relays (for test servers with self-signed certificates only)",
		Destination: dst,
	}
}

// httpTransport returns the transport for requests to targets and relays
// (httpx.NewTransport) that, with insecure, skips certificate
// verification. It prints the warning about insecure on stderr, once per
// call: commands call it once.
func httpTransport(insecure bool, s *streams) http.RoundTripper {
	t := httpx.NewTransport()
	if insecure {
		fmt.Fprintf(s.err, "%s --insecure: TLS certificates are not verified; anyone on the network path can read and change deliveries (use it only with test servers)\n",
			paint(s.errColor, color.FgYellow).Sprint("warning:"))
		t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	}
	return t
}

// certHint returns advice for an error caused by a certificate that could
// not be verified, "" for any other error.
func certHint(err error, what string) string {
	if err == nil || httpx.CertError(err) == nil {
		return ""
	}
	return fmt.Sprintf("the %s's TLS certificate is not trusted; if it is a test server with a self-signed certificate, add --insecure (or trust its CA)", what)
}
