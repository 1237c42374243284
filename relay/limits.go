package relay

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// What the relay refuses to hold, so that strangers on the internet cannot
// exhaust it: uploads in flight (Options.MaxUploadBytes), streams
// (Options.MaxStreams, MaxStreamsPerIP, MaxSubscribersPerIP), and the
// client address they are counted by.

// errBusy: the uploads in flight take Options.MaxUploadBytes.
var errBusy = errors.New("relay: too many uploads in flight")

// smallUpload is the largest body that may use the eighth of
// Options.MaxUploadBytes kept for small deliveries.
const smallUpload = 1 << 20

// readBody reads r's body into a buffer sized from its Content-Length (or
// grown in steps without one), within Options.MaxBodyBytes (a
// *http.MaxBytesError beyond it) and Options.MaxUploadBytes (errBusy, before
// reading, when the body does not fit). release gives back the budget the
// body took; call it once the body is stored.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), err error) {
	var reserved int64
	release = func() { s.uploads.Add(-reserved) }
	reserve := func(n int64) error {
		limit := s.opts.MaxUploadBytes
		if reserved+n <= smallUpload {
			limit += limit / 8
		}
		if now := s.uploads.Add(n); now > limit && now != n {
			s.uploads.Add(-n)
			return errBusy
		}
		reserved += n
		return nil
	}
	limit := s.opts.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, release, &http.MaxBytesError{Limit: limit}
	}
	rd := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength >= 0 {
		if err := reserve(r.ContentLength); err != nil {
			return nil, release, err
		}
		body = make([]byte, r.ContentLength)
		if _, err := io.ReadFull(rd, body); err != nil {
			return nil, release, err
		}
		return body, release, nil
	}
	// No Content-Length (chunked): grow by doubling from 64 KiB, each step
	// reserved before it is allocated.
	for {
		if len(body) == cap(body) {
			next := min(max(2*int64(cap(body)), 64<<10), limit+1)
			if err := reserve(next - int64(cap(body))); err != nil {
				return nil, release, err
			}
			grown := make([]byte, len(body), next)
			copy(grown, body)
			body = grown
		}
		n, err := rd.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if err == io.EOF {
			return body, release, nil
		}
		if err != nil {
			return nil, release, err
		}
	}
}

// errTooManyStreams: a stream beyond Options.MaxStreams or MaxStreamsPerIP.
var errTooManyStreams = errors.New("relay: too many streams")

// admit counts a new stream from client address ip against
// Options.MaxStreams and MaxStreamsPerIP, or returns an error wrapping
// errTooManyStreams (saying which) when it would exceed one. The caller
// calls leave once the stream ends.
func (s *Server) admit(ip string) (leave func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.streams >= s.opts.MaxStreams:
		return nil, fmt.Errorf("%w: the relay holds %d streams, its limit", errTooManyStreams, s.streams)
	case s.streamsByIP[ip] >= s.opts.MaxStreamsPerIP:
		return nil, fmt.Errorf("%w: your address holds %d streams, the relay's limit per client", errTooManyStreams, s.streamsByIP[ip])
	}
	s.streams++
	s.streamsByIP[ip]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.streams--
		if s.streamsByIP[ip]--; s.streamsByIP[ip] == 0 {
			delete(s.streamsByIP, ip)
		}
	}, nil
}

// clientIP returns the address r's limits are counted by: the connection's
// peer or, when that is one of Options.TrustedProxies, the rightmost
// address of X-Forwarded-For that is not (the one the trusted proxies
// saw). An IPv6 address counts as its /64, which one client usually has
// whole.
func (s *Server) clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host // not TCP (a test's ResponseRecorder, a Unix socket): one client
	}
	if s.trusted(addr) {
		fwd := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(fwd) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(fwd[i]))
			if err != nil {
				break // a garbled entry: the last trusted hop is the client
			}
			addr = a
			if !s.trusted(a) {
				break
			}
		}
	}
	addr = addr.Unmap()
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(a.Unmap()) {
			return true
		}
	}
	return false
}

// rateLimits holds a token bucket per key (a channel, a client address),
// created on first use; beyond 10,000 of them, those full again are
// forgotten (a full bucket is what a new one would be).
type rateLimits struct {
	limit rate.Limit
	burst int

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newRateLimits(perMinute, burst int) *rateLimits {
	return &rateLimits{limit: rate.Limit(float64(perMinute) / 60), burst: burst, m: map[string]*rate.Limiter{}}
}

// allow takes a token from the bucket of every key, or from none and
// returns how long to wait until it could.
func (l *rateLimits) allow(now time.Time, keys ...string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) > 10000 {
		for k, lim := range l.m {
			if lim.TokensAt(now) >= float64(l.burst) {
				delete(l.m, k)
			}
		}
	}
	rs := make([]*rate.Reservation, 0, len(keys))
	var wait time.Duration
	for _, k := range keys {
		lim := l.m[k]
		if lim == nil {
			lim = rate.NewLimiter(l.limit, l.burst)
			l.m[k] = lim
		}
		r := lim.ReserveN(now, 1)
		rs = append(rs, r)
		wait = max(wait, r.DelayFrom(now))
	}
	if wait == 0 {
		return true, 0
	}
	for _, r := range rs {
		r.CancelAt(now)
	}
	return false, wait
}

// fallbackMaxStreams is Options.MaxStreams's default where the limit on
// open files is unknown or unlimited.
const fallbackMaxStreams = 10000

// redeliveryBurst is how many redeliveries may be asked for at once before
// Options.RedeliveriesPerMinute applies.
const redeliveryBurst = 10

// streamMemory is what one open stream costs beyond the deliveries it
// holds (goroutine stack, connection buffers), rounded up from the
// measured 26 KiB (BenchmarkIdleSubscriberMemory).
const streamMemory = 32 << 10

// MemoryBound returns the live memory the relay's limits allow, the figure
// docs/DEPLOY.md derives and the attack tests check: twice
// Options.TotalHistoryBytes (the history, and what slow streams hold
// beyond it), the upload budget with its small-delivery share, and each of
// Options.MaxStreams streams. A process serving the relay alone can give
// it to the garbage collector as its soft memory limit (runtime/debug).
func (s *Server) MemoryBound() int64 {
	return 2*s.opts.TotalHistoryBytes + s.opts.MaxUploadBytes*9/8 + int64(s.opts.MaxStreams)*streamMemory
}
