package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		base, max time.Duration
		n         int
		want      time.Duration
	}{
		{250 * ms, 10 * time.Second, 0, 250 * ms},
		{250 * ms, 10 * time.Second, 3, 2 * time.Second},
		{250 * ms, 10 * time.Second, 6, 10 * time.Second},
		{250 * ms, 10 * time.Second, 1000, 10 * time.Second},
		{time.Duration(1 << 62), time.Duration(1<<63 - 1), 5, time.Duration(1<<63 - 1)},
		{0, time.Second, 3, 0},
	}
	for _, tt := range tests {
		if got := Ceiling(tt.base, tt.max, tt.n); got != tt.want {
			t.Errorf("Ceiling(%v, %v, %d) = %v, want %v", tt.base, tt.max, tt.n, got, tt.want)
		}
	}
}

func TestJitter(t *testing.T) {
	if got := Jitter(0); got != 0 {
		t.Errorf("Jitter(0) = %v, want 0", got)
	}
	for i := 0; i < 1000; i++ {
		if d := Jitter(10 * time.Millisecond); d < 0 || d >= 10*time.Millisecond {
			t.Fatalf("Jitter(10ms) = %v, want within [0, 10ms)", d)
		}
	}
}

func TestSleepCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(cancelled, 1h) = %v, want %v", err, context.Canceled)
	}
	if err := Sleep(t.Context(), 0); err != nil {
		t.Errorf("Sleep(ctx, 0) = %v, want nil", err)
	}
}
