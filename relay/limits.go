package relay

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// What the relay refuses to hold, so that strangers on the internet cannot
// exhaust it: uploads in flight (Options.MaxUploadBytes), streams
// (Options.MaxStreams, MaxStreamsPerIP, MaxSubscribersPerIP), and the
// client address they are counted by.

// errBusy: the uploads in flight take Options.MaxUploadBytes, or the
// client's share of it.
var errBusy = errors.New("relay: too many uploads in flight")

// errTooSlow: an upload whose bytes stopped coming, or come too slowly.
var errTooSlow = errors.New("relay: the upload is too slow")

// smallUpload is the largest body that may use the eighth of
// Options.MaxUploadBytes kept for small deliveries.
const smallUpload = 1 << 20

// How slow an upload may be: its next bytes must come within uploadIdle,
// and, after uploadGrace, at minUploadRate on average (a 25 MiB body over
// a link of 128 kbit/s takes 26 minutes and is cut; one of 64 KiB never
// is). Holding the budget with uploads that send nothing, or a byte now
// and then, costs an attacker a connection each for seconds, not minutes.
const (
	uploadIdle    = 10 * time.Second
	uploadGrace   = 10 * time.Second
	minUploadRate = 16 << 10 // bytes a second
)

// uploadShare is the part of Options.MaxUploadBytes one client address
// may hold: a quarter, or one body of MaxBodyBytes if that is more.
func (s *Server) uploadShare() int64 {
	return max(s.opts.MaxUploadBytes/4, s.opts.MaxBodyBytes)
}

// readBody reads r's body, sent by client ip, into a buffer that grows
// (by doubling from 4 KiB, up to its Content-Length when it has one) as
// the bytes arrive, within Options.MaxBodyBytes (a *http.MaxBytesError
// beyond it) and Options.MaxUploadBytes: each growth reserves its bytes
// first, from the relay's budget and from the client's share of it
// (errBusy when either is full). A body whose bytes stop or crawl is cut
// (errTooSlow, see uploadIdle). release gives back what the body
// reserved; call it once the body is stored.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, ip string) (body []byte, release func(), err error) {
	var reserved int64
	release = func() {
		if reserved == 0 {
			return
		}
		s.uploads.Add(-reserved)
		s.uploadMu.Lock()
		if s.uploadsByIP[ip] -= reserved; s.uploadsByIP[ip] <= 0 {
			delete(s.uploadsByIP, ip)
		}
		s.uploadMu.Unlock()
		reserved = 0
	}
	small := r.ContentLength >= 0 && r.ContentLength <= smallUpload // the whole body, not its first steps
	reserve := func(n int64) error {
		limit := s.opts.MaxUploadBytes
		if small {
			limit += limit / 8
		}
		s.uploadMu.Lock()
		defer s.uploadMu.Unlock()
		if mine := s.uploadsByIP[ip]; mine > 0 && mine+n > s.uploadShare() {
			return s.refuse(fmt.Errorf("%w: your address is sending %d bytes of uploads already, its share of the relay's budget", errBusy, mine))
		}
		if now := s.uploads.Add(n); now > limit && now != n {
			s.uploads.Add(-n)
			return s.refuse(fmt.Errorf("%w: the relay is receiving %d bytes of uploads already, its limit", errBusy, now-n))
		}
		s.uploadsByIP[ip] += n
		reserved += n
		return nil
	}
	limit := s.opts.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, release, &http.MaxBytesError{Limit: limit}
	}
	want := limit + 1 // without a Content-Length: until the limit, then one byte more to see it passed
	if r.ContentLength >= 0 {
		want = r.ContentLength
	}
	rd := http.MaxBytesReader(w, r.Body, limit)
	rc := http.NewResponseController(w)
	done := func() ([]byte, func(), error) {
		rc.SetReadDeadline(time.Time{}) // the server's own timeouts again; after a failure the deadline stays, so nothing waits for the rest
		return body, release, nil
	}
	start, armed := time.Now(), time.Time{}
	end := time.Time{} // Options.ReadTimeout still bounds the whole request
	if s.opts.ReadTimeout > 0 {
		end = start.Add(s.opts.ReadTimeout)
	}
	for {
		if len(body) == cap(body) {
			if int64(len(body)) == want {
				if r.ContentLength >= 0 { // all the announced bytes: anything more is not read
					return done()
				}
			}
			next := min(max(2*int64(cap(body)), 4<<10), want)
			if err := reserve(next - int64(cap(body))); err != nil {
				return nil, release, err
			}
			grown := make([]byte, len(body), next)
			copy(grown, body)
			body = grown
		}
		if now := time.Now(); now.Sub(armed) >= time.Second {
			deadline := now.Add(uploadIdle)
			if !end.IsZero() && end.Before(deadline) {
				deadline = end
			}
			rc.SetReadDeadline(deadline) // renewed at most once a second
			armed = now
		}
		n, err := rd.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		switch {
		case err == io.EOF && r.ContentLength >= 0 && int64(len(body)) < want:
			return nil, release, io.ErrUnexpectedEOF
		case err == io.EOF:
			return done()
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, release, fmt.Errorf("%w: the body stopped coming (%d bytes of it received in %s)", errTooSlow, len(body), time.Since(start).Round(time.Second))
		case err != nil:
			return nil, release, err
		}
		if elapsed := time.Since(start); elapsed > uploadGrace && float64(len(body)) < minUploadRate*elapsed.Seconds() {
			return nil, release, fmt.Errorf("%w: %d bytes in %s, slower than the %d KiB/s an upload must keep up", errTooSlow, len(body), elapsed.Round(time.Second), minUploadRate>>10)
		}
	}
}

// refuse notes a refused upload for /healthz and the log (at most a line
// every 10 s, saying how many were refused meanwhile) and returns err.
func (s *Server) refuse(err error) error {
	s.refusedUploads.Add(1)
	s.refusedAt.Store(time.Now().UnixNano())
	if ok, hidden := s.refusals.Allow(time.Now()); ok {
		s.log.Warn("upload refused", "err", err, "also_refused_since_last_line", hidden)
	}
	return err
}

// errTooManyStreams: a stream beyond Options.MaxStreams or MaxStreamsPerIP.
var errTooManyStreams = errors.New("relay: too many streams")

// admit counts a new stream from client address ip against
// Options.MaxStreams and MaxStreamsPerIP (and, for IPv6, four times that
// per /48), or returns an error wrapping errTooManyStreams (saying which)
// when it would exceed one. When the relay is full, the holder of the
// most streams (an IPv4 address, or an IPv6 /48) loses its oldest stream
// to the newcomer, if it holds at least two more than the newcomer's
// holder: a crowd of addresses cannot lock channel owners out, and a
// client's stream on its own channel is not cut for a stranger with as
// few. The caller calls leave once the stream ends.
func (s *Server) admit(ip string) (leave func(), err error) {
	h := holderOf(ip)
	s.mu.Lock()
	var evict string
	switch {
	case s.streamsByIP[ip] >= s.opts.MaxStreamsPerIP:
		defer s.mu.Unlock()
		return nil, fmt.Errorf("%w: your address holds %d streams, the relay's limit per client", errTooManyStreams, s.streamsByIP[ip])
	case h != ip && s.streamsByHolder[h] >= 4*s.opts.MaxStreamsPerIP:
		defer s.mu.Unlock()
		return nil, fmt.Errorf("%w: your network (%s) holds %d streams, the relay's limit per /48", errTooManyStreams, h, s.streamsByHolder[h])
	case s.streams >= s.opts.MaxStreams:
		top, most := "", 0
		for k, n := range s.streamsByHolder {
			if n > most {
				top, most = k, n
			}
		}
		if top == h || most < s.streamsByHolder[h]+2 {
			defer s.mu.Unlock()
			return nil, fmt.Errorf("%w: the relay holds %d streams, its limit", errTooManyStreams, s.streams)
		}
		evict = top
	}
	s.streams++
	s.streamsByIP[ip]++
	s.streamsByHolder[h]++
	s.mu.Unlock()
	if evict != "" {
		s.cutOldestOf(evict)
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.streams--
		if s.streamsByIP[ip]--; s.streamsByIP[ip] == 0 {
			delete(s.streamsByIP, ip)
		}
		if s.streamsByHolder[h]--; s.streamsByHolder[h] == 0 {
			delete(s.streamsByHolder, h)
		}
	}, nil
}

// holderOf returns who holds the streams of client address ip, for the
// relay-wide limit: the address itself, or for IPv6 (ip is a /64) its /48,
// which one site usually has whole.
func holderOf(ip string) string {
	p, err := netip.ParsePrefix(ip)
	if err != nil || !p.Addr().Is6() {
		return ip
	}
	h, _ := p.Addr().Prefix(48)
	return h.String()
}

// cutOldestOf cuts the oldest stream of holder h (it resumes with
// Last-Event-ID), to make room for a newcomer when the relay is full.
func (s *Server) cutOldestOf(h string) {
	chans := s.holdChannels()
	defer func() {
		for _, c := range chans {
			s.release(c)
		}
	}()
	var oldest *subscriber
	var in *channel
	for _, c := range chans {
		c.mu.Lock()
		for sub := range c.subs {
			if holderOf(sub.ip) == h && (oldest == nil || sub.since.Before(oldest.since)) {
				oldest, in = sub, c
			}
		}
		c.mu.Unlock()
	}
	if oldest == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.subs[oldest]; ok {
		s.removeSub(in, oldest)
		s.cutOff.Add(1)
		oldest.cut()
		s.log.Warn("relay full: the oldest stream of the client holding the most was cut off to make room; it can resume with Last-Event-ID",
			"client", h, "channel", in.name, "maxStreams", s.opts.MaxStreams)
	}
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
	if fwd := r.Header.Values("X-Forwarded-For"); len(fwd) > 0 && !s.trusted(addr) && s.untrustedXFF.CompareAndSwap(false, true) {
		s.log.Warn("a request came with X-Forwarded-For from a peer that is not a trusted proxy: every client behind it counts as that one address for the per-address limits; name the proxy with --trusted-proxy",
			"peer", addr.Unmap().String())
	}
	if s.trusted(addr) {
		fwd := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(fwd) - 1; i >= 0; i-- {
			a, err := forwardedAddr(fwd[i])
			if err != nil {
				break // a garbled entry: the last trusted hop is the client
			}
			addr = a
			if !s.trusted(a) {
				break
			}
		}
	}
	return peerKey(addr)
}

// forwardedAddr reads one X-Forwarded-For entry: an address, with or
// without a port ("203.0.113.5:1234"), an IPv6 one with or without
// brackets ("[2001:db8::1]:443", "[2001:db8::1]").
func forwardedAddr(entry string) (netip.Addr, error) {
	entry = strings.TrimSpace(entry)
	if a, err := netip.ParseAddr(entry); err == nil {
		return a, nil
	}
	if ap, err := netip.ParseAddrPort(entry); err == nil {
		return ap.Addr(), nil
	}
	return netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(entry, "["), "]"))
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
	all   *rate.Limiter // if not nil, every allow takes a token from it too

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newRateLimits(perMinute, burst int) *rateLimits {
	return &rateLimits{limit: rate.Limit(float64(perMinute) / 60), burst: burst, m: map[string]*rate.Limiter{}}
}

// perMinute returns a token bucket of perMinute tokens a minute, burst at once.
func perMinute(n, burst int) *rate.Limiter { return rate.NewLimiter(rate.Limit(float64(n)/60), burst) }

// allow takes a token from the bucket of every key (and l.all), or from
// none and returns how long to wait until it could, and whether l.all is
// what refused.
func (l *rateLimits) allow(now time.Time, keys ...string) (ok bool, wait time.Duration, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) > 10000 {
		for k, lim := range l.m {
			if lim.TokensAt(now) >= float64(l.burst) {
				delete(l.m, k)
			}
		}
	}
	rs := make([]*rate.Reservation, 0, len(keys)+1)
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
	if l.all != nil && wait == 0 {
		r := l.all.ReserveN(now, 1)
		rs = append(rs, r)
		wait, all = r.DelayFrom(now), true
	}
	if wait == 0 {
		return true, 0, false
	}
	for _, r := range rs {
		r.CancelAt(now)
	}
	return false, wait, all
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
