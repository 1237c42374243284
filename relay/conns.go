package relay

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// connCount is what a Server's limitListener counts: the connections held,
// in all and by peer address, and those refused.
type connCount struct {
	mu      sync.Mutex
	byIP    map[string]int
	n       atomic.Int64
	refused atomic.Int64
}

// limitListener returns ln with Options.MaxConns and MaxConnsPerIP
// applied: a connection beyond either is closed as soon as it is accepted,
// before a byte is read (what else could a relay do with a descriptor it
// cannot spare), and counted in Stats.ConnsRefused.
func (s *Server) limitListener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, s: s}
}

type limitListener struct {
	net.Listener
	s *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	c := &l.s.conns
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := ""
		if ta, ok := conn.RemoteAddr().(*net.TCPAddr); ok && !l.s.trusted(ta.AddrPort().Addr()) {
			ip = peerKey(ta.AddrPort().Addr())
		}
		c.mu.Lock()
		if c.byIP == nil {
			c.byIP = map[string]int{}
		}
		if int(c.n.Load()) >= l.s.opts.MaxConns || (ip != "" && c.byIP[ip] >= l.s.opts.MaxConnsPerIP) {
			c.mu.Unlock()
			conn.Close()
			c.refused.Add(1)
			if ok, hidden := l.s.connRefusals.Allow(time.Now()); ok {
				l.s.log.Warn("connection refused: the relay holds its limit of connections, or this address holds its share",
					"peer", conn.RemoteAddr().String(), "connections", c.n.Load(), "max_conns", l.s.opts.MaxConns,
					"max_conns_per_ip", l.s.opts.MaxConnsPerIP, "also_refused_since_last_line", hidden)
			}
			continue
		}
		c.n.Add(1)
		if ip != "" {
			c.byIP[ip]++
		}
		c.mu.Unlock()
		return &countedConn{Conn: conn, c: c, ip: ip}, nil
	}
}

// countedConn gives its place back when it is closed, once (a hijacked
// stream's connection is this one too).
type countedConn struct {
	net.Conn
	c    *connCount
	ip   string
	once sync.Once
}

func (cc *countedConn) Close() error {
	cc.once.Do(func() {
		cc.c.mu.Lock()
		cc.c.n.Add(-1)
		if cc.ip != "" {
			if cc.c.byIP[cc.ip]--; cc.c.byIP[cc.ip] <= 0 {
				delete(cc.c.byIP, cc.ip)
			}
		}
		cc.c.mu.Unlock()
	})
	return cc.Conn.Close()
}

// peerKey is the address a client's limits count: an IPv6 address as its
// /64, which one client usually has whole.
func peerKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
