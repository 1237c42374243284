package redact

import "testing"

func TestURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://smee.io/abc", "https://smee.io/abc"},
		{"https://u:p@relay.example/abc?token=t&pubkey=k", "https://u:xxxxx@relay.example/abc?pubkey=xxxxx&token=xxxxx"},
		{"https://u@relay.example/abc", "https://u@relay.example/abc"},
		{"http://h\x7f/", "<invalid URL>"},
	}
	for _, tt := range tests {
		if got := URL(tt.in); got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
