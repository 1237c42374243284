package rest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"time"

	"github.com/hookline/hookline/rest/backoff"
	"github.com/hookline/hookline/rest/header"
)

// RetryPolicy says when and how long a Client waits to resend a failed
// request. The zero value is a usable policy with the defaults given for each
// field. Set Client.Retry to enable it.
//
// An attempt is retried when it fails with a network error (a refused or
// reset connection, a timeout, a body cut short; not a certificate error, a
// cancelled context or ErrResponseTooLarge) or when the status is 408, 425,
// 429, 500, 502, 503 or 504. Every method is retried, POST included: the
// policy is opt-in, and callers that cannot tolerate a duplicate should make
// their requests idempotent (for example with an idempotency key header) or
// not set a policy.
//
// Before retry n (n = 1, 2, …) the client waits for the response's
// Retry-After (delay-seconds or HTTP-date, at most MaxRetryAfter) when it has
// a valid one, and otherwise for a random duration between zero and
// min(MaxDelay, BaseDelay·2^(n-1)) ("full jitter"). A request is never resent
// when its body cannot be recreated (see Client.MakeRequest). Retries stop
// after MaxAttempts attempts, when ctx is done (the error wraps ctx's error),
// or when the wait would end after ctx's deadline (the last response or
// error is returned, as if no retries were left). After the last attempt a
// retryable status is returned as a normal Response.
//
// HTTPClient.Timeout bounds each attempt, not the whole call; bound the call
// with the context. A RetryPolicy is safe for concurrent use once its fields
// are no longer modified.
type RetryPolicy struct {
	// MaxAttempts is the largest number of attempts, the first included. If
	// less than 1, 4.
	MaxAttempts int
	// BaseDelay is the backoff ceiling before the first retry; it doubles for
	// each later retry. If zero or negative, 250 ms.
	BaseDelay time.Duration
	// MaxDelay caps the backoff ceiling. If zero or negative, 10 s.
	MaxDelay time.Duration
	// MaxRetryAfter caps a wait asked for by a Retry-After header. If zero or
	// negative, 60 s.
	MaxRetryAfter time.Duration
	// Retryable, if not nil, decides instead of the rule above whether a
	// failed attempt is retried: resp is the attempt's response (do not read
	// its body), or nil when the attempt failed with err. The other limits
	// still apply: MaxAttempts, a body that cannot be recreated, the
	// context. For a request that must not run twice, retry only what
	// surely never reached the server (a connection that was never made).
	Retryable func(resp *http.Response, err error) bool
	// OnRetry, if not nil, is called before each wait for a retry, so that
	// a program can say what it waits for: retry is the retry's number (1
	// for the first), wait how long it waits, and resp or err what the
	// attempt before it got (do not read resp's body).
	OnRetry func(retry int, wait time.Duration, resp *http.Response, err error)

	clock *retryClock // tests only; nil means the real clock
}

// retryClock replaces time and randomness in tests.
type retryClock struct {
	now    func() time.Time
	random func() float64 // in [0, 1)
	sleep  func(ctx context.Context, d time.Duration) error
}

func (p *RetryPolicy) attempts() int {
	if p.MaxAttempts < 1 {
		return 4
	}
	return p.MaxAttempts
}

func (p *RetryPolicy) baseDelay() time.Duration {
	if p.BaseDelay <= 0 {
		return 250 * time.Millisecond
	}
	return p.BaseDelay
}

func (p *RetryPolicy) maxDelay() time.Duration {
	if p.MaxDelay <= 0 {
		return 10 * time.Second
	}
	return p.MaxDelay
}

func (p *RetryPolicy) maxRetryAfter() time.Duration {
	if p.MaxRetryAfter <= 0 {
		return 60 * time.Second
	}
	return p.MaxRetryAfter
}

// delay returns the wait before retry number attempt; header is the failed
// attempt's response header, nil after a network error.
func (p *RetryPolicy) delay(attempt int, header http.Header) time.Duration {
	if header != nil {
		if d, ok := p.retryAfter(header.Get("Retry-After")); ok {
			return d
		}
	}
	return p.jitter(backoff.Ceiling(p.baseDelay(), p.maxDelay(), attempt-1))
}

// retryAfter parses a Retry-After value, capped by MaxRetryAfter.
func (p *RetryPolicy) retryAfter(v string) (time.Duration, bool) {
	d, ok := header.RetryAfter(v, p.now())
	if limit := p.maxRetryAfter(); d > limit {
		d = limit
	}
	return d, ok
}

func (p *RetryPolicy) now() time.Time {
	if p.clock != nil && p.clock.now != nil {
		return p.clock.now()
	}
	return time.Now()
}

// jitter returns a random wait in [0, ceiling): backoff.Jitter, the
// module's one source of jitter (tests fix it with the clock).
func (p *RetryPolicy) jitter(ceiling time.Duration) time.Duration {
	if p.clock != nil && p.clock.random != nil {
		return time.Duration(p.clock.random() * float64(ceiling))
	}
	return backoff.Jitter(ceiling)
}

// wait sleeps for d or until ctx is done, returning ctx's error then.
func (p *RetryPolicy) wait(ctx context.Context, d time.Duration) error {
	if p.clock != nil && p.clock.sleep != nil {
		return p.clock.sleep(ctx, d)
	}
	return backoff.Sleep(ctx, d)
}

// retryable applies p.Retryable, or the default rule, to one attempt made
// with ctx.
func (p *RetryPolicy) retryable(ctx context.Context, res *http.Response, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		res = nil
	}
	if p.Retryable != nil {
		return p.Retryable(res, err)
	}
	return DefaultRetryable(res, err)
}

// DefaultRetryable is the rule RetryPolicy applies when its Retryable is
// nil (see RetryPolicy), for a Retryable that changes part of it: resp is
// the attempt's response, or nil when the attempt failed with err.
func DefaultRetryable(resp *http.Response, err error) bool {
	if err != nil {
		return retryableError(err)
	}
	return retryableStatus(resp.StatusCode)
}

// retryableStatus reports whether a response status is worth retrying.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryableError reports whether err is a network error worth retrying
// (the caller checks that the request's context is not done).
func retryableError(err error) bool {
	if errors.Is(err, ErrResponseTooLarge) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var (
		unknownAuthority x509.UnknownAuthorityError
		invalidCert      x509.CertificateInvalidError
		wrongHost        x509.HostnameError
		notTLS           tls.RecordHeaderError
	)
	return !errors.As(err, &unknownAuthority) && !errors.As(err, &invalidCert) &&
		!errors.As(err, &wrongHost) && !errors.As(err, &notTLS)
}
