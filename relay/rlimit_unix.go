//go:build unix

package relay

import (
	"math"
	"syscall"
)

// defaultMaxStreams is three quarters of RLIMIT_NOFILE (see
// Options.MaxStreams).
func defaultMaxStreams() int {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil || l.Cur == 0 || l.Cur > math.MaxInt32 {
		return fallbackMaxStreams
	}
	return max(int(l.Cur)/4*3, 1)
}
