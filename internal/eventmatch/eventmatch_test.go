package eventmatch

import (
	"errors"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	set, unknown, err := Compile([]string{" issues.* ", "pull_request.closed", "push", "", "payment_intent.succeeded"}, true)
	if err != nil || len(unknown) != 1 || unknown[0] != "payment_intent.succeeded" {
		t.Fatalf("Compile = %v, %v; want payment_intent.succeeded unknown (far from every GitHub name) and kept", unknown, err)
	}
	for _, tt := range []struct {
		event, action string
		want          bool
	}{
		{"issues", "opened", true}, {"issues", "", true}, {"pull_request", "closed", true}, {"pull_request", "opened", false},
		{"push", "", true}, {"push", "x", true}, {"ping", "", false}, {"payment_intent", "succeeded", true}, {"issue_comment", "created", false},
	} {
		if got := set.Match(Key{tt.event, tt.action, ""}); got != tt.want {
			t.Errorf("Match(%s, %s) = %v, want %v", tt.event, tt.action, got, tt.want)
		}
	}
	all, _, _ := Compile([]string{"*"}, true)
	if !all.Match(Key{Event: "anything"}) || (Set{}).Match(Key{Event: "issues"}) || !(Set{}).Empty() {
		t.Error(`"*" must match every event, the zero Set none`)
	}
}

// Matching names the pattern that matched, the narrowest first, so that a
// trace can say which rule filtered a delivery.
func TestMatching(t *testing.T) {
	set, _, err := Compile([]string{"*", "issues.*", "issues.closed"}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ event, action, want string }{
		{"issues", "closed", "issues.closed"}, {"issues", "opened", "issues"}, {"issues", "", "issues"}, {"push", "", "*"},
	} {
		if got := set.Matching(Key{tt.event, tt.action, ""}); got != tt.want {
			t.Errorf("Matching(%s, %s) = %q, want %q", tt.event, tt.action, got, tt.want)
		}
	}
	if got := (Set{}).Matching(Key{Event: "push"}); got != "" {
		t.Errorf("the zero Set's Matching = %q, want none", got)
	}
}

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		pattern string
		known   bool
		ok      bool
		err     string // "" for none
	}{
		{"*", true, true, ""},
		{"issues", true, true, ""},
		{"issues.*", true, true, ""},
		{"issues.opened", true, true, ""},
		{"isues", true, false, "did you mean issues?"},
		{"isues.*", true, false, "did you mean issues.*?"},
		{"issues.opend", true, false, "did you mean issues.opened?"},
		{"issues.zzzzzzzz", true, false, ""},
		{"Push Hook", true, false, ""},
		{"isues", false, true, ""},
		{"pu*sh", true, false, "a pattern is event"},
		{"issues.op*", false, false, "a pattern is event"},
		{"issues.", true, false, "a pattern is event"},
		{"error", true, false, "handler errors"},
	} {
		ok, err := Check(tt.pattern, tt.known)
		if ok != tt.ok || (tt.err == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrPattern))) {
			t.Errorf("Check(%q, %v) = %v, %v; want %v, an error saying %q", tt.pattern, tt.known, ok, err, tt.ok, tt.err)
		}
	}
}

// A pattern may name a branch: it then matches only a delivery about that
// branch, the narrowest pattern first.
func TestMatchBranch(t *testing.T) {
	set, _, err := Compile([]string{"push@main", "pull_request.*@feature-x", "*@hotfix", "issues"}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		k    Key
		want string
	}{
		{Key{"push", "", "main"}, "push@main"},
		{Key{"push", "", "feature-x"}, ""},
		{Key{"push", "", ""}, ""},
		{Key{"pull_request", "opened", "feature-x"}, "pull_request@feature-x"},
		{Key{"pull_request", "opened", "main"}, ""},
		{Key{"check_run", "completed", "hotfix"}, "*@hotfix"},
		{Key{"issues", "opened", "main"}, "issues"},
	} {
		if got := set.Matching(tt.k); got != tt.want {
			t.Errorf("Matching(%+v) = %q, want %q", tt.k, got, tt.want)
		}
	}
	for _, bad := range []string{"push@", "push@a b", "push@a,b"} {
		if _, _, err := Compile([]string{bad}, true); !errors.Is(err, ErrPattern) {
			t.Errorf("Compile(%q) = %v, want ErrPattern", bad, err)
		}
	}
}
