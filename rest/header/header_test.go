package header

import (
	"testing"
	"time"
)

func TestIsToken(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"X-GitHub-Event", true},
		{"!#$%&'*+-.^_`|~09azAZ", true},
		{"", false},
		{"a b", false},
		{"a:b", false},
		{"é", false},
		{"a\x00", false},
	}
	for _, tt := range tests {
		if got := IsToken(tt.in); got != tt.want {
			t.Errorf("IsToken(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestIsValue(t *testing.T) {
	for in, want := range map[string]bool{"a\tb c": true, "": true, "a\r\nb": false, "a\x7f": false, "a\x00": false} {
		if got := IsValue(in); got != want {
			t.Errorf("IsValue(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{" 0 ", 0, true},
		{"Wed, 21 Oct 2015 07:28:30 GMT", 30 * time.Second, true},
		{"Wed, 21 Oct 2015 07:27:00 GMT", 0, true}, // in the past
		{"99999999999999999999", time.Duration(1<<63 - 1), true},
		{"9999999999999", time.Duration(1<<63 - 1), true},
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, ok := RetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
