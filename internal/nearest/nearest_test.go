package nearest

import "testing"

func TestName(t *testing.T) {
	names := []string{"issues", "issue_comment", "push", "pull_request", "x"}
	for _, tt := range []struct {
		typed  string
		within int
		want   string
	}{
		{"isues", 2, "issues"},
		{"pussh", 2, "push"},
		{"pull_requests", 2, "pull_request"},
		{"deployment", 2, ""},
		{"issue", -1, "issues"}, // no bound: the nearest of all
		{"y", 2, ""},            // one-letter names are never suggested
		{"", 0, ""},
	} {
		if got := Name(tt.typed, names, tt.within); got != tt.want {
			t.Errorf("Name(%q, %d) = %q, want %q", tt.typed, tt.within, got, tt.want)
		}
	}
	for _, tt := range []struct {
		a, b string
		want int
	}{{"kitten", "sitting", 3}, {"", "abc", 3}, {"abc", "", 3}, {"flaw", "lawn", 2}, {"same", "same", 0}} {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
