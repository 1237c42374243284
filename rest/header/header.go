// Package header checks HTTP header syntax and reads Retry-After: how rest
// validates a request's header names and values and how its RetryPolicy
// reads Retry-After. It is public so that the rest of hookline checks and
// reads them the same way (one implementation): its helpers that only
// hookline needs are in hookline's internal/httpx.
package header

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// IsToken reports whether s is an HTTP token (RFC 9110, section 5.6.2), the
// syntax of methods and header names.
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenByte(s[i]) {
			return false
		}
	}
	return true
}

func isTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// IsValue reports whether s can be sent as a header value: no control
// characters other than horizontal tab.
func IsValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// RetryAfter reads a Retry-After value: delay-seconds, or an HTTP-date
// measured from now (a date in the past is zero). ok is false for an empty
// or malformed value. Seconds too many for a time.Duration give the
// largest one; callers cap the result.
func RetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseInt(v, 10, 64)
		var numErr *strconv.NumError
		switch {
		case err == nil && secs <= int64(maxDuration/time.Second):
			return time.Duration(secs) * time.Second, true
		case err == nil || errors.As(err, &numErr) && numErr.Err == strconv.ErrRange:
			return maxDuration, true
		}
		return 0, false
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d = t.Sub(now); d < 0 {
		d = 0
	}
	return d, true
}

const maxDuration = time.Duration(1<<63 - 1)
