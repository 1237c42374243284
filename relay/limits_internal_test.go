package relay

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}
	tests := []struct {
		name, remote string
		xff          []string
		trusted      bool
		want         string
	}{
		{"peer", "203.0.113.7:5000", nil, true, "203.0.113.7"},
		{"forwarded header of an untrusted peer is ignored", "203.0.113.7:5000", []string{"198.51.100.1"}, true, "203.0.113.7"},
		{"no trusted proxies configured", "127.0.0.1:5000", []string{"198.51.100.1"}, false, "127.0.0.1"},
		{"trusted proxy", "127.0.0.1:5000", []string{"198.51.100.1"}, true, "198.51.100.1"},
		{"the rightmost untrusted hop, not a spoofed first entry", "127.0.0.1:5000", []string{"1.2.3.4, 198.51.100.1, 10.1.2.3"}, true, "198.51.100.1"},
		{"several header lines", "10.9.9.9:5000", []string{"1.2.3.4", "198.51.100.1", "10.1.2.3"}, true, "198.51.100.1"},
		{"garbage stops at the last trusted hop", "127.0.0.1:5000", []string{"198.51.100.1, garbage"}, true, "127.0.0.1"},
		{"all trusted", "127.0.0.1:5000", []string{"10.1.1.1"}, true, "10.1.1.1"},
		{"IPv6 counts as its /64", "[2001:db8:1:2:3:4:5:6]:5000", nil, true, "2001:db8:1:2::/64"},
		{"IPv4-mapped IPv6", "[::ffff:203.0.113.7]:5000", nil, true, "203.0.113.7"},
		{"trusted mapped proxy", "[::ffff:127.0.0.1]:5000", []string{"198.51.100.1"}, true, "198.51.100.1"},
		{"not an address", "@", nil, true, "@"},
		{"an entry with a port", "127.0.0.1:5000", []string{"203.0.113.5:1234"}, true, "203.0.113.5"},
		{"IPv6 in brackets with a port", "127.0.0.1:5000", []string{"[2001:db8:1:2::9]:443"}, true, "2001:db8:1:2::/64"},
		{"IPv6 in brackets", "127.0.0.1:5000", []string{"[2001:db8:1:2::9]"}, true, "2001:db8:1:2::/64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{log: slog.New(slog.DiscardHandler)}
			if tt.trusted {
				s.opts.TrustedProxies = trusted
			}
			r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{"X-Forwarded-For": tt.xff}}
			if got := s.clientIP(r); got != tt.want {
				t.Errorf("clientIP = %q, want %q", got, tt.want)
			}
		})
	}
}

// X-Forwarded-For from a peer that is not trusted is a sign of a proxy
// the relay was not told about: the log says so, once.
func TestUntrustedForwardedForIsLoggedOnce(t *testing.T) {
	var logs bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&logs, nil))}
	for range 3 {
		s.clientIP(&http.Request{RemoteAddr: "10.0.0.2:5000", Header: http.Header{"X-Forwarded-For": {"198.51.100.1"}}})
	}
	s.clientIP(&http.Request{RemoteAddr: "10.0.0.2:5000"})
	if n := bytes.Count(logs.Bytes(), []byte("not a trusted proxy")); n != 1 || !bytes.Contains(logs.Bytes(), []byte("peer=10.0.0.2")) {
		t.Errorf("log %q: want one line naming the peer", logs.String())
	}
}
