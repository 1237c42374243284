//go:build unix

package relay

import (
	"net"
	"syscall"
)

// rawOf returns conn's socket for writeNow, or nil when it has none that
// can be written this way (a TLS connection, a wrapper other than the
// relay's own).
func rawOf(conn net.Conn) syscall.RawConn {
	if cc, ok := conn.(*countedConn); ok {
		conn = cc.Conn
	}
	sc, ok := conn.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// writeNow writes what the socket takes of b at once, without waiting for
// room, and returns how much it took.
func writeNow(rc syscall.RawConn, b []byte) (n int, err error) {
	cerr := rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, e := syscall.Write(int(fd), b[n:])
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return true
			case e != nil:
				err = e
				return true
			}
			n += m
		}
		return true
	})
	if err == nil {
		err = cerr
	}
	return n, err
}
