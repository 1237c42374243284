// Package payload holds Go types for the payloads of GitHub's webhook
// events, generated from GitHub's own description of them (the npm package
// @octokit/openapi-webhooks, the source @octokit/webhooks 14 generates its
// TypeScript types from). It depends on nothing outside the standard
// library (its one other import is the module's own JSON scanner,
// internal/jsonscan, which imports only the standard library) and is usable
// alone, with encoding/json:
//
//	var p payload.IssuesOpenedEvent
//	if err := json.Unmarshal(body, &p); err != nil {
//		return err
//	}
//	fmt.Println(p.Repository.FullName, p.Issue.Number)
//
// or with webhooks.Handle, which decodes for the handler.
//
// There is one type per event and action (IssuesOpenedEvent for
// "issues.opened") and, for an event with actions, one for all of them
// (IssuesEvent: every property of any action, required only where every
// action requires it). New returns the type for a name. Objects shared
// between events are named after the description's components
// (SimpleUser, RepositoryWebhooks); other objects after where they first
// appear (IssuesOpenedEventIssue).
//
// A property the description marks optional or nullable is a pointer (nil
// slices, maps and json.RawMessage stand for absent or null); a required
// one is a value. Times are Timestamp, which keeps what GitHub sent (a
// string, or Unix seconds in push events) and parses it with Time. Every
// struct keeps properties the description does not name in Extra and
// writes them back when encoded, so decoding an event type then encoding
// it loses nothing GitHub sent. (Extra is filled when an event type is
// decoded: decoding a nested type such as SimpleUser on its own with
// encoding/json leaves it nil.)
//
// The package is named payload because that is what GitHub's documentation
// ("Webhook events and payloads") and octokit (event.payload) call these
// values, and it reads well at the call site: payload.PushEvent.
//
// Regenerate with `make interop-deps` and `go generate ./webhooks/payload/`;
// a test fails when the checked-in code is not what the pinned description
// gives.
package payload

//go:generate go run ../internal/payloadgen/cmd/genpayload -in ../../interop/node_modules/@octokit/openapi-webhooks/generated/api.github.com.json -out payload_gen.go -names ../eventnames_gen.go
