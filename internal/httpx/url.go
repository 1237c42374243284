package httpx

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ParseHTTPURL checks an absolute http or https URL with a host, for a
// target or a channel. Its errors quote what was typed (credentials
// hidden) and, for a URL without a scheme, suggest http://.
func ParseHTTPURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	shown := RedactURL(s) // "<invalid URL>" when it does not parse
	if err != nil && !strings.Contains(s, "@") {
		shown = s // no credentials to hide: as typed
	}
	if !strings.Contains(s, "://") {
		rest := strings.TrimPrefix(shown, "//")
		return nil, fmt.Errorf("%q has no scheme; did you mean %s://%s?", shown, likelyScheme(rest), rest)
	}
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%q: %v", shown, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q must start with http:// or https://", shown)
	case u.Host == "":
		return nil, fmt.Errorf("%q has no host", shown)
	}
	return u, nil
}

// likelyScheme guesses the scheme a URL typed without one meant: http for
// this machine and private networks (a local server rarely has TLS),
// https for a public host (smee.io/abc is https://smee.io/abc).
func likelyScheme(hostPath string) string {
	host := hostPath
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		host = host[:i]
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(strings.ToLower(host), "[]")
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
			return "http"
		}
		return "https"
	}
	if host == "localhost" || !strings.Contains(host, ".") || strings.HasSuffix(host, ".localhost") ||
		strings.HasSuffix(host, ".local") || strings.HasSuffix(host, ".test") || strings.HasSuffix(host, ".internal") {
		return "http"
	}
	return "https"
}
