package httpx

import (
	"net/http"
	"strings"

	"github.com/hookline/hookline/rest/header"
)

// IsTokenList reports whether s is a comma-separated list of tokens (white
// space around the commas allowed), such as Access-Control-Request-Headers.
func IsTokenList(s string) bool {
	for _, t := range strings.Split(s, ",") {
		if t = strings.Trim(t, " \t"); t != "" && !header.IsToken(t) {
			return false
		}
	}
	return true
}

// hopByHop are the hop-by-hop headers of RFC 9110 section 7.6.1 (as in
// net/http/httputil's ReverseProxy) and Expect: they describe the
// connection to one server, not the delivery. The relay keeps none of them
// in a message; the forwarder sends none of them on.
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
	"Expect", // asks one server for 100-continue; undici's fetch refuses to send it
}

// IsHopByHop reports whether a header named name (any letter case) is one
// of hopByHop: it describes a request as it reached one server, and is
// neither kept by the relay nor sent on by the forwarder.
func IsHopByHop(name string) bool {
	return hopByHopSet[strings.ToLower(name)] // no copy for a lowercase name (the relay's)
}

// hopByHopSet is hopByHop in lower case, for IsHopByHop on the relay's
// path, where every header of every POST is looked up.
var hopByHopSet = func() map[string]bool {
	set := map[string]bool{}
	for _, h := range hopByHop {
		set[strings.ToLower(h)] = true
	}
	return set
}()

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
	out.Del("Host")
	out.Del("Content-Length")
	return out
}
