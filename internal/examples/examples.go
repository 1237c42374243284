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
//
// Every other event and action comes from @octokit/webhooks-examples (MIT,
// the Octokit contributors): octokit.json.gz holds the first api.github.com
// example of each name, compact (161 names, 59 KB; genexamples writes it).
// hookline's own example wins where both have one; ForEvent offers
// hookline's first, so `send --event issues` stays issues.opened.
package examples

//go:generate go run ./genexamples -in ../../interop/node_modules/@octokit/webhooks-examples -out octokit.json.gz

import (
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/json"
	"io"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
)

//go:embed payloads/*.json
var files embed.FS

//go:embed octokit.json.gz
var octokitGz []byte

// octokit is the decoded octokit.json.gz: its package version and
// examples by name.
var octokit = sync.OnceValue(func() (o struct {
	Version  string
	Examples map[string]json.RawMessage
}) {
	zr, err := gzip.NewReader(bytes.NewReader(octokitGz))
	if err == nil {
		var data []byte
		if data, err = io.ReadAll(zr); err == nil {
			err = json.Unmarshal(data, &o)
		}
	}
	if err != nil {
		panic("examples: octokit.json.gz: " + err.Error()) // the tests read it
	}
	return o
})

// Source says where the example called name comes from: "hookline", or
// "@octokit/webhooks-examples <version>"; "" when there is none.
func Source(name string) string {
	if _, err := files.Open(path.Join("payloads", name+".json")); err == nil && validName(name) {
		return "hookline"
	}
	if _, ok := octokit().Examples[name]; ok {
		return "@octokit/webhooks-examples " + octokit().Version
	}
	return ""
}

func validName(name string) bool { return name != "" && !strings.ContainsAny(name, "/\\") }

// Names returns the name of every example, "event" or "event.action",
// hookline's and @octokit/webhooks-examples', sorted. It returns a new
// slice on each call.
func Names() []string {
	set := map[string]bool{}
	for _, n := range own() {
		set[n] = true
	}
	for n := range octokit().Examples {
		set[n] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// own returns the names of hookline's own examples, sorted.
func own() []string {
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
// dot), sorted: hookline's own when it has any, else
// @octokit/webhooks-examples'; nil when there is none.
func ForEvent(event string) []string {
	of := func(names []string) []string {
		var out []string
		for _, n := range names {
			if e, _, _ := strings.Cut(n, "."); e == event {
				out = append(out, n)
			}
		}
		return out
	}
	if out := of(own()); out != nil {
		return out
	}
	return of(slices.Sorted(maps.Keys(octokit().Examples)))
}

// Payload returns the compact JSON of the example called name ("push",
// "issues.opened"), and false when there is no such example.
func Payload(name string) ([]byte, bool) {
	if !validName(name) {
		return nil, false
	}
	data, err := files.ReadFile(path.Join("payloads", name+".json"))
	if err != nil {
		if ex, ok := octokit().Examples[name]; ok {
			return slices.Clone(ex), true // compact already
		}
		return nil, false
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		panic("examples: " + name + ": " + err.Error()) // the tests check every file
	}
	return buf.Bytes(), true
}
