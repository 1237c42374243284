package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/eventmatch"
	"github.com/hookline/hookline/internal/githubapi"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/rest"
	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/provider"
)

// githubOptions are the flags that name GitHub repositories,
// organisations or the GitHub App of --app, and the API that serves them.
type githubOptions struct {
	owners []githubapi.Owner // --repo and --org, in that order, then TheApp
	api    string
	app    appCredentials // with --app
}

func (g githubOptions) set() bool { return len(g.owners) > 0 }

// hasApp reports whether --app was given.
func (g githubOptions) hasApp() bool { return slices.Contains(g.owners, githubapi.TheApp) }

// hooks are the owners whose webhooks a token manages (not the App).
func (g githubOptions) hooks() []githubapi.Owner {
	return slices.DeleteFunc(slices.Clone(g.owners), func(o githubapi.Owner) bool { return o.App })
}

// githubFlagValues are what the flags of githubOptions hold.
type githubFlagValues struct {
	repos, orgs ucli.StringSlice
	api         string
	app         appFlagValues
}

// githubFlags are the flags of githubOptions, bound to v, under category,
// with the usage of --repo, --org and --app.
func githubFlags(category, repoUsage, orgUsage, appUsage string, v *githubFlagValues) []ucli.Flag {
	flags := append([]ucli.Flag{
		&ucli.StringSliceFlag{Name: "repo", Usage: repoUsage + " (token: $GITHUB_TOKEN, $GH_TOKEN or gh auth token)", Destination: &v.repos},
		&ucli.StringSliceFlag{Name: "org", Usage: orgUsage, Destination: &v.orgs},
		&ucli.StringFlag{Name: "github-api", Value: githubapi.DefaultBaseURL, Usage: "GitHub's API `URL` (GitHub Enterprise Server: https://HOST/api/v3)", EnvVars: []string{"HOOKLINE_GITHUB_API"}, Destination: &v.api},
	}, appFlags(appUsage, &v.app)...)
	for _, f := range flags {
		setCategory(f, category)
	}
	return flags
}

// parseGitHub reads the flags of githubOptions; single says the command
// takes one repository, organisation or App (deliveries).
func parseGitHub(c *ucli.Context, v *githubFlagValues, single bool) (githubOptions, error) {
	g := githubOptions{api: strings.TrimSuffix(v.api, "/")}
	for _, r := range v.repos.Value() {
		g.owners = append(g.owners, githubapi.Repo(r))
	}
	for _, o := range v.orgs.Value() {
		g.owners = append(g.owners, githubapi.Org(o))
	}
	var err error
	if g.app, err = v.app.parse(c); err != nil {
		return g, err
	}
	if v.app.app {
		g.owners = append(g.owners, githubapi.TheApp)
	}
	if !g.set() {
		return g, nil
	}
	for i, o := range g.owners {
		if err := o.Check(); err != nil {
			return g, usageErrorf("--repo/--org: %v", err)
		}
		if slices.Contains(g.owners[:i], o) {
			return g, usageErrorf("%s is given twice", o)
		}
	}
	if single && len(g.owners) > 1 {
		return g, usageErrorf("give one of --repo, --org or --app: this command works on one webhook at a time")
	}
	u, err := url.Parse(g.api)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return g, usageErrorf("--github-api %q: want an http or https URL, such as %s", g.api, githubapi.DefaultBaseURL)
	}
	return g, nil
}

// client returns the API client: with a token from the environment or gh
// when a repository or organisation is named, with the App's key for --app.
func (g githubOptions) client(ctx context.Context, s *streams, transport http.RoundTripper) (*githubapi.Client, error) {
	c := &githubapi.Client{
		BaseURL: g.api, App: g.app.app,
		REST:   &rest.Client{HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: transport}, Retry: githubapi.RetryPolicy()},
		Notify: func(msg string) { fmt.Fprintln(s.err, msg) },
	}
	if len(g.hooks()) > 0 {
		token, err := githubToken(ctx, g.api)
		if err != nil {
			return nil, err
		}
		c.Token = token
	}
	return c, nil
}

// githubToken finds a token as the gh CLI does: $GITHUB_TOKEN or $GH_TOKEN
// (for GitHub Enterprise Server, $GITHUB_ENTERPRISE_TOKEN or
// $GH_ENTERPRISE_TOKEN first), else `gh auth token`. A token is never taken
// from a flag, so it never shows in ps or shell history.
func githubToken(ctx context.Context, api string) (string, error) {
	host := "github.com"
	if u, err := url.Parse(api); err == nil && u.Host != "api.github.com" {
		host = u.Host
	}
	names := []string{"GITHUB_TOKEN", "GH_TOKEN"}
	if host != "github.com" {
		names = append([]string{"GITHUB_ENTERPRISE_TOKEN", "GH_ENTERPRISE_TOKEN"}, names...)
	}
	for _, name := range names {
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			return v, nil
		}
	}
	if gh, err := exec.LookPath("gh"); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, gh, "auth", "token", "--hostname", host).Output()
		if tok := strings.TrimSpace(string(out)); err == nil && tok != "" {
			return tok, nil
		}
	}
	return "", usageErrorf("no GitHub token: set GITHUB_TOKEN (or GH_TOKEN) to a token with the admin:repo_hook scope (admin:org_hook for --org), or install the gh CLI and run gh auth login")
}

// loopback reports whether rawURL's host is this machine or a private
// network, which GitHub cannot reach.
func loopback(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() || ip.IsLinkLocalUnicast())
}

// checkReachable refuses a channel GitHub cannot POST to: one on this
// machine or a private network, unless the API is there too (a GitHub
// Enterprise Server on the same network, or a test).
func (g githubOptions) checkReachable(channel string) error {
	if !loopback(channel) || loopback(g.api) {
		return nil
	}
	return usageErrorf("GitHub cannot reach %s: it is on this machine (or a private network). Give --new (a new smee.io channel) or --url with a public channel, such as your own hookline serve with --public-url", httpx.RedactURL(channel))
}

// actionOf is d's action, "" for an event without one.
func actionOf(d githubapi.HookDelivery) string {
	if d.Action == nil {
		return ""
	}
	return *d.Action
}

// hookEvents is the webhook's events for forward's --events: the event
// names, without actions and without ping (GitHub pings every new webhook
// and does not take ping as an event to subscribe to), or "*" for all.
func hookEvents(events []string) []string {
	var out []string
	for _, e := range events {
		e, _, _ = strings.Cut(e, "@") // a branch is chosen here, not by the webhook
		name, _, _ := strings.Cut(e, ".")
		if name == webhooks.AnyEventName {
			return []string{name}
		}
		if name != "ping" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return []string{"*"}
	}
	return out
}

// githubAccess is what checkAccess learnt: the API client, the webhooks
// each owner had then, and the App's webhook configuration.
type githubAccess struct {
	gh        *githubapi.Client
	hooks     map[githubapi.Owner][]githubapi.Hook
	appConfig githubapi.HookConfig
}

// checkAccess asks GitHub for the webhooks of every owner in g (and the
// App's configuration), so that a missing token, a refused one or a
// missing scope is said before anything is made (a channel on smee.io,
// say). setUpHooks uses what it got.
func (g githubOptions) checkAccess(ctx context.Context, s *streams, transport http.RoundTripper) (githubAccess, error) {
	gh, err := g.client(ctx, s, transport)
	if err != nil {
		return githubAccess{}, err
	}
	access := githubAccess{gh: gh, hooks: map[githubapi.Owner][]githubapi.Hook{}}
	for _, o := range g.owners {
		if o.App {
			if access.appConfig, err = gh.AppHookConfig(ctx); err != nil {
				return access, err
			}
			continue
		}
		if access.hooks[o], err = gh.Hooks(ctx, o); err != nil {
			return access, err
		}
	}
	return access, nil
}

// setUpHooks points a webhook of every owner in g at channel, with
// secret: a new one on each repository and organisation (or the one an
// earlier run left with the same URL, taken over), and the App's own. It
// returns what undoes them all when forward ends. When one fails, those
// already made are undone before the error returns: none is left behind.
func (g githubOptions) setUpHooks(ctx context.Context, access githubAccess, channel, secret string, events []string, keep bool, s *streams) (func(), error) {
	var undo []func()
	undoAll := func() {
		for _, f := range slices.Backward(undo) {
			f()
		}
	}
	for _, o := range g.owners {
		var end func()
		var err error
		if o.App {
			end, err = g.app.point(ctx, access, channel, secret, g.api, keep, s)
		} else {
			end, err = setUpHook(ctx, access, o, channel, secret, events, keep, s)
		}
		if err != nil {
			if len(undo) > 0 {
				fmt.Fprintf(s.err, "%s failed: undoing the %s already set up\n", o, plural(len(undo), "webhook", "webhooks"))
				undoAll()
			}
			return nil, err
		}
		undo = append(undo, end)
	}
	return undoAll, nil
}

// setUpHook creates (or takes over, when an earlier run left one with the
// same URL) the webhook that sends o's deliveries to channel, with secret,
// and returns what removes it when forward ends.
func setUpHook(ctx context.Context, access githubAccess, o githubapi.Owner, channel, secret string, events []string, keep bool, s *streams) (func(), error) {
	gh, hooks := access.gh, access.hooks[o]
	cfg := githubapi.HookConfig{URL: channel, Secret: secret}
	var hook githubapi.Hook
	var err error
	if i := slices.IndexFunc(hooks, func(h githubapi.Hook) bool { return h.Config.URL == channel }); i >= 0 {
		if hook, err = gh.UpdateHook(ctx, o, hooks[i].ID, cfg, events); err != nil {
			return nil, err
		}
		fmt.Fprintf(s.err, "took over webhook %d on %s (same URL, left by an earlier run): new secret, events %s\n", hook.ID, o, strings.Join(events, ","))
	} else {
		if hook, err = gh.CreateHook(ctx, o, cfg, events); err != nil {
			return nil, err
		}
		fmt.Fprintf(s.err, "created webhook %d on %s → %s (events %s)\n", hook.ID, o, httpx.RedactURL(channel), strings.Join(events, ","))
	}
	return func() {
		if keep {
			fmt.Fprintf(s.err, "kept webhook %d on %s (--keep-hook); the next forward with this URL takes it over\n", hook.ID, o)
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := gh.DeleteHook(ctx, o, hook.ID); err != nil && !errors.Is(err, githubapi.ErrNotFound) {
			fmt.Fprintf(s.err, "could not delete webhook %d from %s (%v); delete it in its settings, Webhooks\n", hook.ID, o, err)
			return
		}
		fmt.Fprintf(s.err, "deleted webhook %d from %s\n", hook.ID, o)
	}, nil
}

// deliveriesOptions are the parsed flags of `hookline deliveries`.
type deliveriesOptions struct {
	github    githubOptions
	hookID    int64
	hookURL   string
	since     time.Time
	status    string // "", success, failure
	events    eventmatch.Set
	limit     int
	redeliver bool
	replay    replayOptions
	watch     bool          // --watch: recover failed deliveries, for ever
	grace     time.Duration // --grace
	interval  time.Duration // --interval
	watchFile string        // --state-file
	health    string        // --health ADDR
}

// deliveriesFlags are what deliveries' flags hold that are not options
// yet: replay's shared flags, and values parsed later.
type deliveriesFlags struct {
	replayFlags
	github        githubFlagValues
	events        ucli.StringSlice
	status, since string
	target        string // --target: one URL
}

func deliveriesCommand(s *streams) *ucli.Command {
	var o deliveriesOptions
	var f deliveriesFlags
	r := &o.replay
	return &ucli.Command{
		Name:  "deliveries",
		Usage: "list a GitHub webhook's recent deliveries, and replay them here or have GitHub redeliver them",
		Description: `Lists the deliveries GitHub made for a repository's or organisation's
webhook, or a GitHub App's (--app, with --app-id and --app-key, or --app-env),
newest first (GitHub keeps them for 3 days), with --since,
--status and --events filters. With --target each one is fetched and sent
through the pipeline of replay (signature check with --secret, plugins,
--save, the failed folder); with --redeliver GitHub is asked to send each
again to the webhook's own URL. The webhook is --hook ID, or the one whose
URL is --url, or the only one there is.

GitHub's API returns a delivery's payload parsed, not its bytes: hookline
sends it compact, in GitHub's key order. Should a signature not match those
bytes, --resign signs them with --secret (the API, reached with your token,
vouches for the delivery).

This is its own command, not an option of replay: replay reads files and
needs nothing else; this one lists, needs a token, and can also redeliver.

   hookline deliveries --repo octo/hello --status failed
   hookline deliveries --repo octo/hello --since 2h --target http://127.0.0.1:3000/api/github/webhooks --secret-file .secret
   hookline deliveries --repo octo/hello --status failed --redeliver
   hookline deliveries --app --app-env .env --status failed --redeliver
   hookline deliveries --repo octo/hello --watch --redeliver --events push,pull_request`,
		Flags: append(append(append(githubFlags("", "the webhook's GitHub repository `OWNER/NAME`", "or its GitHub organisation `ORG`", "or the webhook of the GitHub App of --app-id and --app-key", &f.github),
			&ucli.Int64Flag{Name: "hook", Usage: "the webhook's `ID` (default: the one whose URL is --url, or the only one)", Destination: &o.hookID},
			&ucli.StringFlag{Name: "url", Usage: "find the webhook by its `URL` (a relay channel)", Destination: &o.hookURL},
			&ucli.StringFlag{Name: "since", Usage: "only deliveries after `TIME`: a duration back from now (2h) or an RFC 3339 time", Destination: &f.since},
			&ucli.StringFlag{Name: "status", Usage: "only `failed` or `succeeded` deliveries (GitHub's status code ≥ 400, or below)", Destination: &f.status},
			&ucli.StringSliceFlag{Name: "events", Usage: "only these `EVENTS` (event, event.action, event.* or *, comma-separated; as --route)", Destination: &f.events},
			&ucli.IntFlag{Name: "limit", Value: 30, Usage: "at most `N` deliveries", Destination: &o.limit},
			&ucli.BoolFlag{Name: "redeliver", Usage: "ask GitHub to send each listed delivery again", Destination: &o.redeliver},
			&ucli.BoolFlag{Name: "watch", Usage: "keep watching: every --interval, recover each delivery with no successful attempt after --grace, once (with --redeliver or --target)", Destination: &o.watch},
			&ucli.DurationFlag{Name: "grace", Value: 5 * time.Minute, Usage: "with --watch, leave a failed delivery alone for `DURATION` (for GitHub, or a person, to retry it first)", Destination: &o.grace},
			&ucli.DurationFlag{Name: "interval", Value: time.Minute, Usage: "with --watch, look every `DURATION`", Destination: &o.interval},
			&ucli.StringFlag{Name: "state-file", Usage: "with --watch, remember the deliveries recovered in `FILE` (default: one per webhook in the state directory)", Destination: &o.watchFile},
			&ucli.StringFlag{Name: "health", Usage: "with --watch, serve its counts as JSON at http://`ADDR`/healthz", Destination: &o.health},
			&ucli.StringFlag{Name: "target", Aliases: []string{"t"}, Usage: "fetch each listed delivery and send it to this `URL`", Destination: &f.target},
			&ucli.BoolFlag{Name: "resign", Usage: "with --target, sign each delivery again with --secret", Destination: &r.resign},
			&ucli.StringFlag{Name: "save", Usage: "with --target, save each delivery as a capture file in `DIR`", Destination: &r.saveDir},
			&ucli.StringFlag{Name: "failed-dir", Usage: "with --target, keep deliveries the target did not take in `DIR`", Destination: &r.failedDir},
			targetHeaderFlag(&f.header),
			&ucli.DurationFlag{Name: "timeout", Value: targetTimeout, Usage: "time limit of one request to the target", Destination: &r.timeout},
			retriesFlag(&f.retries),
			insecureFlag(&r.insecure),
			&ucli.BoolFlag{Name: "json", Usage: "print one JSON object per delivery", Destination: &r.jsonOut},
			&ucli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "also print the headers and the payload", Destination: &r.verbose},
		), secretFlags("webhook `SECRET`: with --target, check each delivery's signature, or with --resign sign with it", &f.secret)...), append(pluginFlags(&f.plugins), inspectFlags(&f.inspect, false)...)...),
		Action: func(c *ucli.Context) error {
			o, err := parseDeliveries(c, o, &f)
			if err != nil {
				return errRedacted(err, o.replay.secret)
			}
			return errRedacted(runDeliveries(c.Context, o, s), o.replay.secret)
		},
	}
}

func parseDeliveries(c *ucli.Context, o deliveriesOptions, f *deliveriesFlags) (deliveriesOptions, error) {
	var err error
	if o.github, err = parseGitHub(c, &f.github, true); err != nil {
		return o, err
	}
	if !o.github.set() {
		return o, usageErrorf("deliveries needs --repo OWNER/NAME, --org ORG or --app (with --app-id and --app-key)")
	}
	if o.github.hasApp() && (o.hookID != 0 || o.hookURL != "") {
		return o, usageErrorf("--hook and --url choose among a repository's webhooks; a GitHub App has one")
	}
	if c.NArg() > 0 {
		return o, usageErrorf("deliveries takes no arguments (got %q)", c.Args().First())
	}
	if o.events, err = eventPatterns("--events", splitNames(f.events.Value()), provider.GitHub); err != nil {
		return o, err
	}
	for _, p := range splitNames(f.events.Value()) {
		if strings.Contains(p, "@") {
			return o, usageErrorf("--events %s: GitHub's list of deliveries carries no payload to read a branch from; name events only here", p)
		}
	}
	switch st := f.status; st {
	case "":
	case "failed", "failure":
		o.status = "failure"
	case "succeeded", "success":
		o.status = "success"
	default:
		return o, usageErrorf("--status %q: want failed or succeeded", st)
	}
	if since := f.since; since != "" {
		if d, err := time.ParseDuration(since); err == nil && d > 0 {
			o.since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, since); err == nil {
			o.since = t
		} else {
			return o, usageErrorf("--since %q: want a duration back from now (2h, 30m) or an RFC 3339 time (2026-11-24T09:00:00Z)", since)
		}
	}
	if o.limit < 1 {
		return o, usageErrorf("--limit %d: must be at least 1", o.limit)
	}
	if err := f.parse(c, &o.replay); err != nil {
		return o, err
	}
	o.replay.concurrency = 1
	o.replay.badSigHint = "(GitHub's API returns payloads parsed: add --resign to sign them with --secret)"
	switch {
	case o.redeliver && f.target != "":
		return o, usageErrorf("--redeliver and --target cannot be used together: GitHub redelivers to the webhook's URL, --target sends from here")
	case f.target == "" && (o.replay.resign || o.replay.saveDir != "" || o.replay.failedDir != ""):
		return o, usageErrorf("--resign, --save and --failed-dir go with --target")
	case o.replay.resign && o.replay.secret == "":
		return o, usageErrorf("--resign needs the secret to sign with: give --secret, --secret-file or set %s", secretEnv)
	case o.replay.timeout <= 0:
		return o, usageErrorf("--timeout %v: must be positive", o.replay.timeout)
	case o.watch && !o.redeliver && f.target == "":
		return o, usageErrorf("--watch recovers failed deliveries: say how, with --redeliver (GitHub sends them again) or --target URL (sent from here)")
	case o.watch && (o.status != "" || c.IsSet("limit")):
		return o, usageErrorf("--watch looks at every delivery with no successful attempt: --status and --limit are for one listing")
	case !o.watch && (c.IsSet("grace") || c.IsSet("interval") || o.watchFile != "" || o.health != ""):
		return o, usageErrorf("--grace, --interval, --state-file and --health go with --watch")
	case o.watch && (o.interval <= 0 || o.grace < 0):
		return o, usageErrorf("--interval must be positive and --grace not negative")
	}
	if f.target != "" {
		if err := checkTarget("--target", f.target); err != nil {
			return o, err
		}
		o.replay.targets = []proxy.Target{{URL: f.target}}
	}
	if o.replay.saveDir != "" {
		if err := os.MkdirAll(o.replay.saveDir, 0o755); err != nil {
			return o, usageErrorf("--save %s: %v", o.replay.saveDir, err)
		}
	}
	return o, nil
}

func runDeliveries(ctx context.Context, o deliveriesOptions, s *streams) error {
	gh, err := o.github.client(ctx, s, httpTransport(o.replay.insecure, s))
	if err != nil {
		return err
	}
	owner := o.github.owners[0]
	hookID := o.hookID
	if hookID == 0 && !owner.App {
		if hookID, err = findHook(ctx, gh, owner, o.hookURL); err != nil {
			return err
		}
	}
	if o.watch {
		return runWatch(ctx, o, gh, owner, hookID, s)
	}
	// --status is checked here too: GitHub Enterprise Server 3.2-3.4
	// ignore the filter, and would list every delivery as failed.
	statusOK := func(ok bool) bool { return o.status == "" || (o.status == "success") == ok }
	var list []githubapi.HookDelivery
	if o.redeliver || o.replay.targets != nil {
		// What is sent again is a delivery, not an attempt: its attempts
		// (GitHub's, then each redelivery: one guid) are read together,
		// and one that succeeded once is never sent again by --status
		// failed. GitHub's filter would hide those successes.
		var all []githubapi.HookDelivery
		err = gh.Deliveries(ctx, owner, hookID, "", func(d githubapi.HookDelivery) bool {
			if !o.since.IsZero() && d.DeliveredAt.Before(o.since) {
				return false // newest first: the rest are older
			}
			all = append(all, d)
			return true
		})
		for _, f := range byGUID(all) {
			if statusOK(f.succeeded) && (o.events.Empty() || o.events.Match(eventmatch.Key{Event: f.last.Event, Action: actionOf(f.last)})) {
				list = append(list, f.last)
			}
		}
		list = list[max(0, len(list)-o.limit):] // the newest o.limit, oldest first
	} else {
		err = gh.Deliveries(ctx, owner, hookID, o.status, func(d githubapi.HookDelivery) bool {
			if !o.since.IsZero() && d.DeliveredAt.Before(o.since) {
				return false // newest first: the rest are older
			}
			if statusOK(succeeded(d)) && (o.events.Empty() || o.events.Match(eventmatch.Key{Event: d.Event, Action: actionOf(d)})) {
				list = append(list, d)
			}
			return len(list) < o.limit
		})
		slices.Reverse(list) // oldest first, as they happened
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(s.err, "%s of %s\n", plural(len(list), "delivery", "deliveries"), hookName(owner, hookID))
	switch {
	case o.redeliver:
		for _, d := range list {
			if err := gh.Redeliver(ctx, owner, hookID, d.ID); err != nil {
				return fmt.Errorf("redelivering %d (%s): %w", d.ID, d.Name(), err)
			}
			fmt.Fprintf(s.out, "asked GitHub to redeliver %d (%s, %s, last answered %d)\n", d.ID, d.Name(), d.GUID, d.StatusCode)
		}
		return nil
	case o.replay.targets != nil:
		var ds []capture.File
		for _, d := range list {
			detail, err := gh.Delivery(ctx, owner, hookID, d.ID)
			if err != nil {
				return fmt.Errorf("fetching delivery %d (%s): %w", d.ID, d.Name(), err)
			}
			cd, err := githubCapture(owner, hookID, detail)
			if err != nil {
				return err
			}
			ds = append(ds, cd)
		}
		if len(ds) == 0 {
			return nil
		}
		return replayDeliveries(ctx, o.replay, ds, 0, s)
	}
	return printDeliveries(s, list, o.replay.jsonOut)
}

// hookName names a webhook in messages.
func hookName(owner githubapi.Owner, hookID int64) string {
	if owner.App {
		return "the GitHub App's webhook"
	}
	return fmt.Sprintf("webhook %d on %s", hookID, owner)
}

// findHook is the webhook whose URL is url, or, without url, the only one.
func findHook(ctx context.Context, gh *githubapi.Client, owner githubapi.Owner, url string) (int64, error) {
	hooks, err := gh.Hooks(ctx, owner)
	if err != nil {
		return 0, err
	}
	if url != "" {
		for _, h := range hooks {
			if h.Config.URL == url {
				return h.ID, nil
			}
		}
		return 0, fmt.Errorf("%s has no webhook with URL %s (%s)", owner, httpx.RedactURL(url), hookList(hooks))
	}
	if len(hooks) == 1 {
		return hooks[0].ID, nil
	}
	return 0, usageErrorf("%s has %s: name one with --hook ID or --url URL (%s)", owner, plural(len(hooks), "webhook", "webhooks"), hookList(hooks))
}

func hookList(hooks []githubapi.Hook) string {
	if len(hooks) == 0 {
		return "it has none"
	}
	var parts []string
	for _, h := range hooks {
		parts = append(parts, strconv.FormatInt(h.ID, 10)+" → "+httpx.RedactURL(h.Config.URL))
	}
	return strings.Join(parts, ", ")
}

// githubCapture is a delivery fetched from the API as a capture, its body
// the API's payload, compact, in the order GitHub gave it.
func githubCapture(owner githubapi.Owner, hookID int64, d githubapi.HookDeliveryDetail) (capture.File, error) {
	var body bytes.Buffer
	if err := json.Compact(&body, d.Request.Payload); err != nil {
		return capture.File{}, fmt.Errorf("delivery %d: GitHub's payload is not JSON: %w", d.ID, err)
	}
	h := http.Header{}
	for k, v := range d.Request.Headers {
		if s, ok := v.(string); ok {
			h.Set(k, s)
		}
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	action := ""
	if d.Action != nil {
		action = *d.Action
	}
	return capture.File{
		Delivery: delivery.Delivery{
			ID: d.GUID, Event: d.Event, ReceivedAt: d.DeliveredAt,
			Method: http.MethodPost, Headers: h, Body: body.Bytes(), BodySource: delivery.BodyCapture,
		},
		Action: action,
		Source: githubSource(owner, hookID, d.ID),
	}, nil
}

// githubSource is where a capture came from: the API's path of the
// delivery, without the host.
func githubSource(owner githubapi.Owner, hookID, id int64) string {
	if owner.App {
		return fmt.Sprintf("github:app/hook/deliveries/%d", id)
	}
	return fmt.Sprintf("github:%s/hooks/%d/deliveries/%d", owner, hookID, id)
}

// printDeliveries lists deliveries as a table, or one JSON object each.
func printDeliveries(s *streams, list []githubapi.HookDelivery, jsonOut bool) error {
	if jsonOut {
		enc := json.NewEncoder(s.out)
		for _, d := range list {
			if err := enc.Encode(d); err != nil {
				return err
			}
		}
		return nil
	}
	w := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tDELIVERED\tEVENT\tSTATUS\tGUID\t")
	for _, d := range list {
		redelivery := ""
		if d.Redelivery {
			redelivery = " (redelivery)"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d %s\t%s%s\t\n", d.ID, d.DeliveredAt.Local().Format(time.DateTime), d.Name(), d.StatusCode, d.Status, d.GUID, redelivery)
	}
	return w.Flush()
}
