// Package interop checks package github.com/hookline/hookline/webhooks
// against the real @octokit/webhooks, its behavioural reference.
//
// It has no code of its own: its tests start node with the pinned packages
// of package.json and compare signatures and middleware responses. They fail,
// never skip, when node or the packages are missing. Run them with
//
//	npm ci --prefix interop && go test ./interop/
//
// from the repository root; README.md says what they check.
package interop
