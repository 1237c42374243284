package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// IsCertificateError reports whether err, or an error it wraps, is a TLS
// certificate that could not be verified: an unknown authority (a
// self-signed certificate), a name that does not match, an expired or
// otherwise invalid certificate.
//
// SSETransport treats such an error from a relay as permanent (it wraps
// ErrPermanent): retrying cannot fix a certificate, and a forwarder that
// reconnected forever would hide the problem. Forwarder returns it in
// TargetResult.Err like any transport failure; rest's retry policy does not
// retry it. Verification is on by default everywhere; a caller that must
// reach a test server with a self-signed certificate passes an
// http.Client whose transport skips it (the CLI's --insecure).
func IsCertificateError(err error) bool {
	return certificateCause(err) != nil
}

// certificateCause returns the certificate error inside err, or nil.
func certificateCause(err error) error {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		roots    x509.SystemRootsError
	)
	switch {
	case errors.As(err, &verify):
		return verify
	case errors.As(err, &unknown):
		return unknown
	case errors.As(err, &hostname):
		return hostname
	case errors.As(err, &invalid):
		return invalid
	case errors.As(err, &roots):
		return roots
	}
	return nil
}
