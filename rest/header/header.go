// Package header checks HTTP header syntax and reads Retry-After, for rest
// and every package of hookline that needs them. It is part of the rest
// module (Go 1.14, no requirements), and public only so that hookline's
// other packages share it: rest's API is package rest.
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

// IsTokenList reports whether s is a comma-separated list of tokens (white
// space around the commas allowed), such as Access-Control-Request-Headers.
func IsTokenList(s string) bool {
	for _, t := range strings.Split(s, ",") {
		if t = strings.Trim(t, " \t"); t != "" && !IsToken(t) {
			return false
		}
	}
	return true
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

// hopByHop are the hop-by-hop headers of RFC 9110 section 7.6.1 (as in
// net/http/httputil's ReverseProxy), and Host and Content-Length: they
// describe the request as it reached one server, not as it goes on.
var hopByHop = []string{
	"Connection",
	"Proxy-Connection", // non-standard, sent by old clients
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
	"Host",
	"Content-Length",
}

// Forwardable returns a copy of h without what must not be sent on when a
// request is replayed elsewhere: hop-by-hop headers (those of RFC 9110 and
// those named in Connection), Host and Content-Length (the new request's
// own apply). It is never nil.
func Forwardable(h http.Header) http.Header {
	out := h.Clone()
	if out == nil {
		out = http.Header{}
	}
	for _, v := range out.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				out.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		out.Del(name)
	}
	return out
}
