package httpx

import "testing"

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://smee.io/abc", "https://smee.io/abc"},
		{"https://u:p@relay.example/abc?token=t&pubkey=k", "https://u:xxxxx@relay.example/abc?pubkey=xxxxx&token=xxxxx"},
		{"https://u@relay.example/abc", "https://u@relay.example/abc"},
		{"http://h\x7f/", "<invalid URL>"},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"no URL here", "no URL here"},
		// net/http's url.Error: quoted, the password as ***.
		{`rest: Post "http://u:***@127.0.0.1:9/hook?key=TKEY": dial tcp 127.0.0.1:9: connect: connection refused`,
			`rest: Post "http://u:xxxxx@127.0.0.1:9/hook?key=xxxxx": dial tcp 127.0.0.1:9: connect: connection refused`},
		{"two: https://a.example/?t=1 and http://b.example/x?u=2.", "two: https://a.example/?t=xxxxx and http://b.example/x?u=xxxxx."},
		{"at the end http://h/p?q=s", "at the end http://h/p?q=xxxxx"},
	}
	for _, tt := range tests {
		if got := RedactText(tt.in); got != tt.want {
			t.Errorf("RedactText(%q) =\n %q, want\n %q", tt.in, got, tt.want)
		}
	}
}

func TestIsCredentialHeader(t *testing.T) {
	for name, want := range map[string]bool{
		"Authorization": true, "proxy-authorization": true, "Cookie": true, "Set-Cookie": true,
		"X-Api-Key": true, "X-Auth-Token": true, "X-Vault-Token": true, "X-Client-Secret": true, "Apikey": true,
		"X-Hub-Signature-256": false, "X-GitHub-Event": false, "Content-Type": false, "User-Agent": false, "X-Env": false,
	} {
		if got := IsCredentialHeader(name); got != want {
			t.Errorf("IsCredentialHeader(%q) = %v, want %v", name, got, want)
		}
	}
}
