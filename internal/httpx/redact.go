package httpx

import (
	"net/url"
	"strings"
)

// RedactURL returns s with its password and every query value replaced by
// "xxxxx", for messages and logs. The path is kept: users need it to tell
// channels apart. A string that does not parse is returned as
// "<invalid URL>".
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<invalid URL>"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for _, vs := range q {
			for i := range vs {
				vs[i] = "xxxxx"
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// RedactText returns s with every http:// and https:// URL in it passed through
// URL, whatever form it has there: as written, or as net/http prints it in
// an error (quoted, the password shown as "***"). A URL ends at white space
// or a quote, and punctuation right after it is kept.
func RedactText(s string) string {
	var b strings.Builder
	for {
		i := indexURL(s)
		if i < 0 {
			if b.Len() == 0 {
				return s
			}
			b.WriteString(s)
			return b.String()
		}
		n := strings.IndexAny(s[i:], " \t\r\n\"'`<>")
		if n < 0 {
			n = len(s) - i
		}
		for n > 0 && strings.IndexByte(".,;:)", s[i+n-1]) >= 0 {
			n-- // punctuation after the URL
		}
		b.WriteString(s[:i])
		b.WriteString(RedactURL(s[i : i+n]))
		s = s[i+n:]
	}
}

// indexURL returns the index of the first "http://" or "https://" in s, or -1.
func indexURL(s string) int {
	i, j := strings.Index(s, "http://"), strings.Index(s, "https://")
	if i < 0 || (j >= 0 && j < i) {
		return j
	}
	return i
}

// IsCredentialHeader reports whether a header named name carries a credential, whose
// value hookline never prints nor writes to disk: Authorization,
// Proxy-Authorization, Cookie, Set-Cookie, and any name with "token",
// "secret", "password", "api-key", "apikey" or "auth" in it (such as
// X-Api-Key, X-Auth-Token), in any letter case.
func IsCredentialHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "cookie", "set-cookie":
		return true
	}
	for _, w := range []string{"auth", "token", "secret", "password", "api-key", "apikey"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
