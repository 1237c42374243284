package httpx

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// CertError returns the certificate error inside err, or nil: an unknown
// authority (a self-signed certificate), a name that does not match, an
// expired or otherwise invalid certificate, no system roots.
func CertError(err error) error {
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
