// Package examples holds the built-in example payloads of `hookline send`:
// small, realistic GitHub webhook payloads written for this project, telling
// one consistent story in the repository "octo-org/hello-world" with the
// sender "octocat" and the GitHub App "hookline-demo" (installation
// 52001234):
//
//	installation.created    the app is installed on octo-org
//	ping                    GitHub checks the app's webhook
//	issues.opened           issue #1 "Greeting is missing a comma"
//	issue_comment.created   a comment on issue #1
//	pull_request.opened     pull request #2 fixes it
//	pull_request.closed     #2 is merged
//	push                    the merge lands on main
//	workflow_run.completed  CI passes on main
//	check_run.completed     the "test" check passes
//	release.published       v1.0.0
//
// Every name, id, sha and date is made up; none is copied from GitHub's
// documentation. The files are stored indented for people to read; Payload
// returns them compact, as GitHub sends payloads.
package examples

import (
	"bytes"
	"embed"
	"encoding/json"
	"path"
	"sort"
	"strings"
)

//go:embed payloads/*.json
var files embed.FS

// Names returns the name of every example, "event" or "event.action",
// sorted. It returns a new slice on each call.
func Names() []string {
	entries, err := files.ReadDir("payloads")
	if err != nil {
		panic("examples: " + err.Error()) // the embedded directory always exists
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(names)
	return names
}

// ForEvent returns the names of the examples for event (the part before the
// dot), sorted; nil when there is none.
func ForEvent(event string) []string {
	var out []string
	for _, n := range Names() {
		if e, _, _ := strings.Cut(n, "."); e == event {
			out = append(out, n)
		}
	}
	return out
}

// Payload returns the compact JSON of the example called name ("push",
// "issues.opened"), and false when there is no such example.
func Payload(name string) ([]byte, bool) {
	if name == "" || strings.ContainsAny(name, "/\\") {
		return nil, false
	}
	data, err := files.ReadFile(path.Join("payloads", name+".json"))
	if err != nil {
		return nil, false
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		panic("examples: " + name + ": " + err.Error()) // the tests check every file
	}
	return buf.Bytes(), true
}
