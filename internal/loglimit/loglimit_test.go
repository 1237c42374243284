package loglimit

import (
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	l := Limit{Burst: 2, Window: time.Minute}
	t0 := time.Unix(1700000000, 0)
	var got []bool
	for i := range 5 {
		ok, _ := l.Allow(t0.Add(time.Duration(i) * time.Second))
		got = append(got, ok)
	}
	if want := []bool{true, true, false, false, false}; !equal(got, want) {
		t.Errorf("within a window: %v, want %v", got, want)
	}
	if ok, hidden := l.Allow(t0.Add(time.Minute)); !ok || hidden != 3 {
		t.Errorf("next window: %v, %d held back; want true, 3", ok, hidden)
	}
	if ok, hidden := l.Allow(t0.Add(time.Minute + time.Second)); !ok || hidden != 0 {
		t.Errorf("second of the window: %v, %d; want true, 0", ok, hidden)
	}
}

func equal(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
