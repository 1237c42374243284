// Package backoff computes exponential backoff with full jitter and waits
// for it, for rest's retries and the relay client's reconnect loop. It is
// part of the rest module (Go 1.14, no requirements), and public only so
// that hookline's other packages share it.
package backoff

import (
	"context"
	"math/rand"
	"sync"
	"time"
)

// Ceiling returns base·2^n capped at max, without overflow. A base or max
// of zero or less gives zero.
func Ceiling(base, max time.Duration, n int) time.Duration {
	if base <= 0 || max <= 0 {
		return 0
	}
	c := base
	for i := 0; i < n && c < max; i++ {
		if c > max/2 {
			return max
		}
		c *= 2
	}
	if c > max {
		return max
	}
	return c
}

// Jitter returns a uniformly random duration in [0, ceiling) ("full
// jitter"); zero for a ceiling of zero or less.
func Jitter(ceiling time.Duration) time.Duration {
	if ceiling <= 0 {
		return 0
	}
	mu.Lock()
	defer mu.Unlock()
	return time.Duration(src.Int63n(int64(ceiling)))
}

// src is seeded once: the global source of math/rand is not seeded before
// Go 1.20, which would give every process the same delays.
var (
	mu  sync.Mutex
	src = rand.New(rand.NewSource(time.Now().UnixNano()))
)

// Sleep waits for d or until ctx is done, returning ctx's error then (at
// once when ctx is already done).
func Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
