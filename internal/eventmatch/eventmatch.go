// Package eventmatch is hookline's one grammar for "which events": the
// patterns of forward's --events, --ignore and --route, of the config
// file's, and of proxy.Options.Events, Ignore and Target.Events.
//
// A pattern is "*" (every event), "event" (every action of it),
// "event.action", or "event.*" (the same as "event"). An event name is the
// sender's: GitHub's X-GitHub-Event, or another provider's (a Stripe
// payload's type, X-Gitea-Event...). Any of them may end with "@BRANCH"
// ("push@main", "*@feature-x"): then it matches only a delivery about that
// branch (Key.Branch, read from the payload: a push's ref, a pull
// request's head, a check's or a workflow run's head branch), so that one
// forward can serve a dev server per branch (git worktrees).
//
// Checking a pattern against the names hookline knows (GitHub's, the list
// `hookline events` prints) catches typos: a name within two edits of a
// known one it is not ("isues", "issues.opend") is refused with the
// nearest. A name far from every known one is kept with a warning, since
// GitHub adds events and other senders have names of their own; a caller
// that knows its deliveries are not GitHub's does not check names at all.
package eventmatch

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hookline/hookline/internal/nearest"
	"github.com/hookline/hookline/webhooks"
)

// ErrPattern is the error of a pattern that is refused.
var ErrPattern = errors.New("not an event pattern")

// Set is a set of patterns. Its zero value matches nothing.
type Set struct {
	m map[string]bool
}

// Compile returns the set of patterns (empty ones skipped), checked by
// Check with known; unknown lists those kept although hookline does not
// know them (each worth a warning).
func Compile(patterns []string, known bool) (s Set, unknown []string, err error) {
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		ok, err := Check(p, known)
		if err != nil {
			return Set{}, nil, err
		}
		if !ok {
			unknown = append(unknown, p)
		}
		if s.m == nil {
			s.m = map[string]bool{}
		}
		names, branch, onBranch := strings.Cut(p, "@")
		key := strings.TrimSuffix(names, ".*")
		if onBranch {
			key += "@" + branch
		}
		s.m[key] = true
	}
	return s, unknown, nil
}

// Key is what a pattern matches: a delivery's event, its action and the
// branch it is about (both may be empty).
type Key struct{ Event, Action, Branch string }

// Empty reports whether s holds no pattern.
func (s Set) Empty() bool { return len(s.m) == 0 }

// Match reports whether a delivery k matches a pattern of s.
func (s Set) Match(k Key) bool { return s.Matching(k) != "" }

// Matching returns the pattern of s the delivery k matches, the narrowest
// first ("issues.opened@main", "issues.opened", "issues", "*"), as written
// without a trailing ".*"; empty when it matches none.
func (s Set) Matching(k Key) string {
	names := []string{k.Event, "*"}
	if k.Action != "" {
		names = []string{k.Event + "." + k.Action, k.Event, "*"}
	}
	for _, n := range names {
		if k.Branch != "" && s.m[n+"@"+k.Branch] {
			return n + "@" + k.Branch
		}
		if s.m[n] {
			return n
		}
	}
	return ""
}

// Check reports whether pattern p is well formed and, with known, whether
// hookline knows the names it matches: a pattern within two edits of a
// known name it is not is refused (wrapping ErrPattern) with the nearest
// known name; one far from every known name reports false.
func Check(p string, known bool) (ok bool, err error) {
	p, branch, onBranch := strings.Cut(p, "@")
	if onBranch && (branch == "" || strings.ContainsAny(branch, " \t,@")) {
		return false, fmt.Errorf("%w: %q: a branch after @ is a branch name, such as push@main", ErrPattern, p+"@"+branch)
	}
	event, action, hasAction := strings.Cut(p, ".")
	switch {
	case p == webhooks.AnyEventName:
		return true, nil
	case p == webhooks.ErrorEventName:
		return false, fmt.Errorf("%w: %q names handler errors, not deliveries", ErrPattern, p)
	case event == "" || (hasAction && action == "") || strings.Contains(event, "*") || (strings.Contains(action, "*") && action != "*"):
		return false, fmt.Errorf("%w: %q: a pattern is event, event.action, event.* or *", ErrPattern, p)
	case !known:
		return true, nil
	}
	names := webhooks.EmitterEventNames()
	if !slices.Contains(names, event) {
		events := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return strings.Contains(n, ".") })
		if best := nearest.Name(event, events, 2); best != "" {
			return false, fmt.Errorf("%w: %q is not an event GitHub sends: did you mean %s? (hookline events lists them)", ErrPattern, p, strings.Replace(p, event, best, 1))
		}
		return false, nil
	}
	if !hasAction || action == "*" || slices.Contains(names, p) {
		return true, nil
	}
	var actions []string
	for _, n := range names {
		if a, ok := strings.CutPrefix(n, event+"."); ok {
			actions = append(actions, a)
		}
	}
	if best := nearest.Name(action, actions, 2); best != "" {
		return false, fmt.Errorf("%w: %q is not an action of %s: did you mean %s.%s? (hookline events | grep ^%s.)", ErrPattern, p, event, event, best, event)
	}
	return false, nil
}
