// Package loglimit bounds how often one kind of log line is written, so
// that what strangers send (a hostile relay's messages, a flood of
// uploads or connections) cannot fill a terminal or a log: at most Burst
// lines per Window, and the next line allowed says how many were held
// back.
package loglimit

import (
	"sync"
	"time"
)

// Limit is one kind of log line's allowance. Set Burst and Window before
// use; it is safe for concurrent use.
type Limit struct {
	Burst  int
	Window time.Duration

	mu     sync.Mutex
	start  time.Time
	shown  int
	hidden int
}

// Allow reports whether a line may be written now, and how many were held
// back since the last one written.
func (l *Limit) Allow(now time.Time) (ok bool, hidden int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.start) >= l.Window {
		l.start, l.shown = now, 0
	}
	if l.shown >= l.Burst {
		l.hidden++
		return false, 0
	}
	l.shown++
	hidden, l.hidden = l.hidden, 0
	return true, hidden
}
