// Package redact hides credentials in what hookline prints.
package redact

import "net/url"

// URL returns s with its password and every query value replaced by
// "xxxxx", for messages and logs. The path is kept: users need it to tell
// channels apart. A string that does not parse is returned as
// "<invalid URL>".
func URL(s string) string {
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
