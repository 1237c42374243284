package cli

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/proxy"
)

// Several targets, for forward and replay: --target repeats (every
// delivery goes to every one: fan-out), --route EVENTS=URL sends the
// deliveries of EVENTS to URL alone (a delivery no route takes goes to the
// --targets), and --target-header NAME:HEADER=VALUE sets a header on one
// target's requests. Each target is a lane of its own (proxy.Targets).
//
// A target has a name: NAME=URL in --target or --route (after the events:
// --route 'push=ci=http://…'), else its host:port. The name is what the
// trace, --health and the failed folder's subfolders show, and what
// --target-header names. Per-target headers are keyed by that name rather
// than by a route's events because a name is short, is printed on every
// trace line, and also covers the --targets, which have no events; a
// config file gives the same as a list (target-header: ["ci:Authorization=…"]).

// targetFlagValues are what --target, --route and --target-header hold.
type targetFlagValues struct {
	targets, routes, headers ucli.StringSlice
}

// targetFlags are --target (with usage), --route and --target-header.
func targetFlags(targetUsage string, env []string, v *targetFlagValues) []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringSliceFlag{Name: "target", Aliases: []string{"t"}, Usage: targetUsage + "; repeat it to send every delivery to each (`[NAME=]URL`)", EnvVars: env, Destination: &v.targets},
		&ucli.StringSliceFlag{Name: "route", Usage: "send the deliveries of `EVENTS=[NAME=]URL` (event, event.action, event.* or *, comma-separated) to URL alone, repeatable; the rest go to --target", Destination: &v.routes},
		&ucli.StringSliceFlag{Name: "target-header", Usage: "set a header on one target's requests: `NAME:HEADER=VALUE` (NAME as the trace shows it)", Destination: &v.headers},
	}
}

// targetName is a target's name given before its URL ("worker=http://…").
var targetName = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)=(https?://.*)$`)

// splitTarget reads [NAME=]URL.
func splitTarget(v string) (name, rawURL string) {
	if m := targetName.FindStringSubmatch(v); m != nil {
		return m[1], m[2]
	}
	return "", v
}

// parse returns the targets, each a lane of the client (one --target
// without a name is one unnamed target: no name in the trace, its failed
// deliveries in the failed folder itself).
func (v *targetFlagValues) parse() (many []proxy.Target, err error) {
	for _, t := range v.targets.Value() {
		name, u := splitTarget(t)
		if err := checkTarget("--target", u); err != nil {
			return nil, err
		}
		many = append(many, proxy.Target{Name: name, URL: u})
	}
	for _, r := range v.routes.Value() {
		events, dest, ok := strings.Cut(r, "=")
		if !ok || strings.TrimSpace(events) == "" || dest == "" {
			return nil, usageErrorf("--route %q: want EVENTS=URL, such as --route 'push,pull_request.*=http://127.0.0.1:4000/ci'", httpx.RedactURL(r))
		}
		name, u := splitTarget(dest)
		if err := checkTarget("--route", u); err != nil {
			return nil, err
		}
		list := splitNames([]string{events})
		if _, err := eventPatterns(fmt.Sprintf("--route %q", events), list, ""); err != nil {
			return nil, err
		}
		many = append(many, proxy.Target{Name: name, URL: u, Events: list})
	}
	if len(v.headers.Value()) > 0 && len(many) < 2 {
		return nil, usageErrorf("--target-header is for one of several targets (--target twice, or --route); with one, use --header")
	}
	if len(many) == 1 && many[0].Events == nil {
		return many, nil
	}
	if len(many) == 0 {
		return nil, nil
	}
	names := laneNamesOf(many)
	for _, h := range v.headers.Value() {
		name, header, ok := strings.Cut(h, ":")
		i := slices.Index(names, name)
		if !ok || i < 0 {
			return nil, usageErrorf("--target-header %q: want NAME:HEADER=VALUE, NAME one of %s", httpx.RedactText(h), strings.Join(names, ", "))
		}
		parsed, err := parseHeaders([]string{header})
		if err != nil {
			return nil, err
		}
		if many[i].Header == nil {
			many[i].Header = http.Header{}
		}
		for k, vs := range parsed {
			many[i].Header[k] = vs
		}
	}
	for i := range many {
		many[i].Name = names[i]
	}
	return many, nil
}

// withSettings returns copies of targets with forward's and replay's
// settings for every target: --header under each one's --target-header,
// --no-query, and the secret to sign again with (resign, "" for none).
func withSettings(targets []proxy.Target, header http.Header, noQuery bool, resign string) []proxy.Target {
	out := slices.Clone(targets)
	for i := range out {
		h := header.Clone()
		for k, vs := range out[i].Header {
			if h == nil {
				h = http.Header{}
			}
			h[k] = vs
		}
		out[i].Header, out[i].NoQuery, out[i].ResignSecret = h, noQuery, resign
	}
	return out
}

// laneNamesOf is the name of each target, as proxy gives them.
func laneNamesOf(targets []proxy.Target) []string {
	names, err := proxy.TargetNames(targets)
	if err != nil {
		return make([]string, len(targets))
	}
	return names
}

// describeTargets is the start line's part that names where deliveries go.
func describeTargets(many []proxy.Target) string {
	var parts []string
	for _, t := range many {
		part := strings.TrimSpace(t.Name + " " + httpx.RedactURL(t.URL))
		if t.Events != nil {
			part = strings.Join(t.Events, ",") + " → " + part
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// targetURLs are every target's URL.
func targetURLs(many []proxy.Target) []string {
	var out []string
	for _, t := range many {
		out = append(out, t.URL)
	}
	return out
}

// singleURL is the URL of the one unnamed target, or "".
func singleURL(many []proxy.Target) string {
	if len(many) != 1 || many[0].Name != "" {
		return ""
	}
	return many[0].URL
}

// firstOf is list's first element, or "".
func firstOf(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return list[0]
}
