// Package signature signs and verifies GitHub webhook payloads with
// HMAC-SHA256, the X-Hub-Signature-256 scheme, and holds the module's one
// HMAC routine (MAC), which every other scheme's signing and checking
// (webhooks/provider) calls too. Package webhooks exports Sign, Verify and
// VerifyWithFallback from here; it is the Go counterpart of
// @octokit/webhooks-methods. It imports only the standard library.
//
// A signature is the string "sha256=" followed by the 64 lowercase
// hexadecimal digits of HMAC-SHA256(secret, payload), computed over the raw
// bytes of the request body exactly as received:
//
//	sig, err := signature.Sign("It's a Secret to Everybody", []byte("Hello, World!"))
//	// sig == "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
//
// Verify accepts exactly that form and nothing else: uppercase hexadecimal, a
// "sha1=" signature, another prefix or another length are a mismatch (false,
// nil error), not an error. Errors are reserved for missing arguments, so
// that a caller can tell a programming mistake from a forged delivery. The
// comparison takes the same time whatever the signature holds.
//
// Differences from @octokit/webhooks-methods: a payload is a []byte rather
// than a JavaScript string, so the HMAC covers the bytes as received and no
// UTF-8 round trip can alter them; only a nil payload is "missing" (an empty,
// non-nil payload is signed like any other, where JavaScript rejects the
// empty string); the functions are synchronous.
//
// All functions are safe for concurrent use.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
)

// Prefix is the algorithm prefix of every signature this package produces
// and accepts.
const Prefix = "sha256="

// Length is the length in bytes of a signature: len(Prefix) plus 64
// hexadecimal digits.
const Length = len(Prefix) + 2*sha256.Size

// Errors returned for missing arguments. A wrong signature is not an error:
// Verify reports it as false. Package webhooks re-exports these values, so
// errors.Is matches them whichever package returned them; their messages
// therefore say "webhooks:".
var (
	// ErrMissingSecret means the secret (or one of the additional secrets)
	// is the empty string.
	ErrMissingSecret = errors.New("webhooks: secret required")
	// ErrMissingPayload means the payload is nil.
	ErrMissingPayload = errors.New("webhooks: payload required")
	// ErrMissingSignature means the signature to check is the empty string.
	ErrMissingSignature = errors.New("webhooks: signature required")
)

// Sign returns "sha256=" followed by the lowercase hexadecimal
// HMAC-SHA256 of payload keyed with secret. It returns ErrMissingSecret
// when secret is empty and ErrMissingPayload when payload is nil; an empty
// non-nil payload is signed.
func Sign(secret string, payload []byte) (string, error) {
	if secret == "" {
		return "", ErrMissingSecret
	}
	if payload == nil {
		return "", ErrMissingPayload
	}
	var buf [Length]byte
	sign(&buf, secret, payload)
	return string(buf[:]), nil
}

// Verify reports whether sig is exactly the signature Sign computes for
// secret and payload. Any other string (uppercase hexadecimal, a "sha1="
// signature, another prefix or length) yields false and a nil error. It
// returns ErrMissingSecret, ErrMissingPayload or ErrMissingSignature when
// secret is empty, payload is nil or sig is empty. The comparison runs in
// constant time with respect to the contents of sig.
func Verify(secret string, payload []byte, sig string) (bool, error) {
	if secret == "" {
		return false, ErrMissingSecret
	}
	if payload == nil {
		return false, ErrMissingPayload
	}
	if sig == "" {
		return false, ErrMissingSignature
	}
	return verify(secret, payload, sig), nil
}

// VerifyWithFallback reports whether sig matches payload under secret or,
// failing that, under any of additionalSecrets, tried in order: it supports
// secret rotation. Its errors are those of Verify; an empty string among
// additionalSecrets is ErrMissingSecret, reported only when the secrets
// before it did not match.
func VerifyWithFallback(secret string, payload []byte, sig string, additionalSecrets ...string) (bool, error) {
	ok, err := Verify(secret, payload, sig)
	if ok || err != nil {
		return ok, err
	}
	for _, s := range additionalSecrets {
		if s == "" {
			return false, ErrMissingSecret
		}
		if verify(s, payload, sig) {
			return true, nil
		}
	}
	return false, nil
}

// verify compares sig with the expected signature; arguments are present.
func verify(secret string, payload []byte, sig string) bool {
	if len(sig) != Length {
		// The length of a valid signature is public: no secret leaks.
		return false
	}
	var want, got [Length]byte
	sign(&want, secret, payload)
	copy(got[:], sig)
	return hmac.Equal(got[:], want[:])
}

// sign writes the signature of payload into dst.
func sign(dst *[Length]byte, secret string, payload []byte) {
	var sum [sha256.Size]byte
	copy(dst[:], Prefix)
	hex.Encode(dst[len(Prefix):], MAC(sum[:0], sha256.New, []byte(secret), payload))
}

// MAC appends to dst the HMAC of msg under h and key: the module's one
// HMAC routine.
func MAC(dst []byte, h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(dst)
}
