package cli

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cli/browser"
	"github.com/joho/godotenv"
	ucli "github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/internal/githubapi"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/rest"
)

// `hookline app new` is GitHub's App manifest flow ("Registering a GitHub
// App from a manifest"), as Probot does it but without Probot: a page on
// loopback posts the manifest to GitHub, GitHub sends the browser back to
// the page's callback with a code, and the code becomes the App's
// credentials, written to a Probot .env file (mode 0600). Its webhook URL
// is the channel, so `hookline forward --app --app-env .env` then gets the
// App's deliveries with nothing more to set.

// appNewOptions are app new's parsed flags.
type appNewOptions struct {
	manifest  map[string]any // what is posted
	channel   string
	org       string
	web, api  string
	out       string
	listen    string
	timeout   time.Duration
	noBrowser bool
}

type appNewFlags struct {
	name, url, homepage, manifestFile, server string
	newChannel, public                        bool
	events, permissions                       ucli.StringSlice
}

func appCommand(s *streams) *ucli.Command {
	return &ucli.Command{
		Name:        "app",
		Usage:       "make a GitHub App for development (app new)",
		Subcommands: []*ucli.Command{appNewCommand(s)},
	}
}

func appNewCommand(s *streams) *ucli.Command {
	var o appNewOptions
	var f appNewFlags
	return &ucli.Command{
		Name:  "new",
		Usage: "make a GitHub App whose webhook is a relay channel, and write its credentials to .env",
		Description: `GitHub's App manifest flow, as Probot does it: opens a page on this
machine that sends the App's manifest (name, webhook URL = the channel,
events, permissions) to GitHub; you confirm there, GitHub sends you back
here, and hookline writes the App's ID, private key, webhook secret and
client ID and secret to a file readable by you alone (.env, with Probot's
variable names), then prints the forward command that uses them.

The channel must be one GitHub can reach: --url CHANNEL, or --new (a new
one on --server). Events and permissions come from --events and
--permission, or a manifest file (JSON or YAML, such as Probot's app.yml);
the flags win.

   hookline app new --new --name my-dev-app
   hookline app new --url https://hooks.example.com/AbC123 --org my-org --events issues,pull_request --permission issues=write --permission pull_requests=read`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "name", Usage: "the App's `NAME` (unique on GitHub; you can change it on GitHub's page)", Destination: &f.name},
			&ucli.StringFlag{Name: "url", Usage: "the App's webhook URL: a relay `CHANNEL` GitHub can reach", Destination: &f.url},
			&ucli.BoolFlag{Name: "new", Usage: "create a new channel on --server for the App's webhook", Destination: &f.newChannel},
			&ucli.StringFlag{Name: "server", Value: "https://smee.io", Usage: "relay `URL` for --new", Destination: &f.server},
			&ucli.StringSliceFlag{Name: "events", Usage: "the webhook `EVENTS` the App subscribes to (comma-separated; each needs its permission)", Destination: &f.events},
			&ucli.StringSliceFlag{Name: "permission", Usage: "a permission the App asks for, `NAME=LEVEL`, repeatable (issues=write, contents=read)", Destination: &f.permissions},
			&ucli.StringFlag{Name: "manifest", Usage: "start from the App manifest in `FILE` (JSON or YAML, such as Probot's app.yml)", TakesFile: true, Destination: &f.manifestFile},
			&ucli.StringFlag{Name: "homepage", Usage: "the App's homepage `URL` (GitHub requires one; default: the channel)", Destination: &f.homepage},
			&ucli.BoolFlag{Name: "public", Usage: "let any account install the App, not only yours", Destination: &f.public},
			&ucli.StringFlag{Name: "org", Usage: "make the App in organisation `ORG` (you must own it), not your account", Destination: &o.org},
			&ucli.StringFlag{Name: "github-web", Value: "https://github.com", Usage: "GitHub's web `URL` (GitHub Enterprise Server: https://HOST)", EnvVars: []string{"HOOKLINE_GITHUB_WEB"}, Destination: &o.web},
			&ucli.StringFlag{Name: "github-api", Value: githubapi.DefaultBaseURL, Usage: "GitHub's API `URL` (GitHub Enterprise Server: https://HOST/api/v3)", EnvVars: []string{"HOOKLINE_GITHUB_API"}, Destination: &o.api},
			&ucli.StringFlag{Name: "out", Value: ".env", Usage: "write the App's credentials to `FILE` (mode 0600; never replaced)", TakesFile: true, Destination: &o.out},
			&ucli.StringFlag{Name: "listen", Value: "127.0.0.1:0", Usage: "serve the page on `ADDR` (loopback)", Destination: &o.listen},
			&ucli.DurationFlag{Name: "timeout", Value: 15 * time.Minute, Usage: "give up when GitHub has not sent you back within `DURATION`", Destination: &o.timeout},
			&ucli.BoolFlag{Name: "no-browser", Usage: "print the page's URL without opening a browser", Destination: &o.noBrowser},
		},
		Action: func(c *ucli.Context) error {
			if err := parseAppNew(c, &o, &f); err != nil {
				return err
			}
			return runAppNew(c.Context, o, f, s)
		},
	}
}

func parseAppNew(c *ucli.Context, o *appNewOptions, f *appNewFlags) error {
	if c.NArg() > 0 {
		return usageErrorf("app new takes no arguments (got %q); the App's name is --name", c.Args().First())
	}
	o.manifest = map[string]any{}
	if f.manifestFile != "" {
		b, err := os.ReadFile(f.manifestFile)
		if err != nil {
			return usageErrorf("--manifest: %v", err)
		}
		// YAML reads JSON too.
		if err := yaml.Unmarshal(b, &o.manifest); err != nil {
			return usageErrorf("--manifest %s: not a JSON or YAML object: %v", f.manifestFile, err)
		}
		if o.manifest == nil {
			o.manifest = map[string]any{}
		}
	}
	if f.name != "" {
		o.manifest["name"] = f.name
	}
	if _, ok := o.manifest["name"]; !ok {
		o.manifest["name"] = "hookline-dev-" + strings.ToLower(rand.Text()[:6])
	}
	if events := splitNames(f.events.Value()); len(events) > 0 {
		o.manifest["default_events"] = events
	}
	if len(f.permissions.Value()) > 0 {
		perms := map[string]any{}
		if m, ok := o.manifest["default_permissions"].(map[string]any); ok {
			perms = m
		}
		for _, p := range f.permissions.Value() {
			name, level, ok := strings.Cut(p, "=")
			if !ok || name == "" || (level != "read" && level != "write") {
				return usageErrorf("--permission %q: want NAME=read or NAME=write (issues=write, contents=read)", p)
			}
			perms[name] = level
		}
		o.manifest["default_permissions"] = perms
	}
	if f.public {
		o.manifest["public"] = true
	} else if _, ok := o.manifest["public"]; !ok {
		o.manifest["public"] = false
	}
	if _, ok := o.manifest["description"]; !ok {
		o.manifest["description"] = "A GitHub App for development, its webhook a relay channel (made by hookline app new)."
	}
	switch {
	case f.url != "" && f.newChannel:
		return usageErrorf("give --url CHANNEL or --new, not both")
	case f.url == "" && !f.newChannel:
		return usageErrorf("the App's webhook needs a channel GitHub can reach: --url CHANNEL, or --new (a new one on %s)", f.server)
	}
	o.channel = f.url
	if f.url != "" {
		if err := checkTarget("--url", f.url); err != nil {
			return err
		}
		if err := (githubOptions{api: o.api}).checkReachable(f.url); err != nil {
			return err
		}
	}
	for flag, v := range map[string]string{"--github-web": o.web, "--github-api": o.api} {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErrorf("%s %q: want an http or https URL", flag, v)
		}
	}
	o.web, o.api = strings.TrimSuffix(o.web, "/"), strings.TrimSuffix(o.api, "/")
	if _, err := os.Lstat(o.out); err == nil {
		return usageErrorf("--out %s exists: hookline never replaces a credentials file; give --out another file, or move it away", o.out)
	}
	host, _, err := net.SplitHostPort(o.listen)
	if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
		return usageErrorf("--listen %q: want a loopback address such as 127.0.0.1:0 (the callback receives the App's code)", o.listen)
	}
	return nil
}

// appNewPage is the page that posts the manifest to GitHub. It and
// appNewDone are parsed when `hookline app new` first needs them, not at
// every start of every command.
var appNewPage = lazyTemplate("page", `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>hookline: a new GitHub App</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem}code{background:#f3f3f3;padding:0 .2em}button{font-size:1rem;padding:.5rem 1rem}</style></head>
<body><h1>A new GitHub App</h1>
<p>GitHub will ask you to confirm <strong>{{.Name}}</strong>{{if .Org}} in organisation <strong>{{.Org}}</strong>{{end}}, then send you back here.</p>
<ul><li>Webhook URL: <code>{{.Channel}}</code></li><li>Events: {{if .Events}}{{range $i, $e := .Events}}{{if $i}}, {{end}}<code>{{$e}}</code>{{end}}{{else}}none (installation events come anyway){{end}}</li>
<li>Permissions: {{if .Permissions}}{{range $k, $v := .Permissions}}<code>{{$k}}: {{$v}}</code> {{end}}{{else}}metadata (read){{end}}</li></ul>
<form id="manifest" method="post" action="{{.Action}}"><input type="hidden" name="manifest" value="{{.Manifest}}">
<button type="submit">Create the App on GitHub</button></form></body></html>
`)

var appNewDone = lazyTemplate("done", `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>hookline: {{.Title}}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem}</style></head>
<body><h1 id="result">{{.Title}}</h1><p>{{.Text}}</p><p>You can close this tab; the terminal says what next.</p></body></html>
`)

func lazyTemplate(name, text string) func() *template.Template {
	return sync.OnceValue(func() *template.Template { return template.Must(template.New(name).Parse(text)) })
}

func runAppNew(ctx context.Context, o appNewOptions, f appNewFlags, s *streams) error {
	if o.channel == "" {
		fmt.Fprintf(s.err, "creating a channel on %s (up to %s)\n", httpx.RedactURL(f.server), newChannelTimeout)
		var err error
		if o.channel, _, err = createChannel(ctx, f.server, nil, false); err != nil {
			return err
		}
		fmt.Fprintf(s.err, "created channel %s\n", httpx.RedactURL(o.channel))
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("serving the page on %s: %w", o.listen, err)
	}
	base := "http://" + ln.Addr().String()
	state := rand.Text()
	hook := map[string]any{"url": o.channel, "active": true}
	o.manifest["hook_attributes"] = hook
	o.manifest["redirect_url"] = base + "/callback"
	if _, ok := o.manifest["url"]; !ok {
		o.manifest["url"] = firstNonEmpty(f.homepage, o.channel)
	}
	manifest, err := json.Marshal(o.manifest)
	if err != nil {
		ln.Close()
		return fmt.Errorf("the manifest: %w", err)
	}
	action := o.web + "/settings/apps/new"
	if o.org != "" {
		action = o.web + "/organizations/" + url.PathEscape(o.org) + "/settings/apps/new"
	}
	action += "?state=" + url.QueryEscape(state)

	type result struct {
		creds githubapi.AppCredentials
		err   error
	}
	done := make(chan result, 1)
	gh := &githubapi.Client{BaseURL: o.api, REST: &rest.Client{HTTPClient: &http.Client{Timeout: 30 * time.Second}, Retry: githubapi.RetryPolicy()}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		var events []string
		if list, ok := o.manifest["default_events"].([]any); ok {
			for _, e := range list {
				events = append(events, fmt.Sprint(e))
			}
		} else {
			events, _ = o.manifest["default_events"].([]string)
		}
		perms, _ := o.manifest["default_permissions"].(map[string]any)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		appNewPage().Execute(w, map[string]any{"Name": o.manifest["name"], "Org": o.org, "Channel": o.channel, "Events": events, "Permissions": perms, "Action": action, "Manifest": string(manifest)})
	})
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		page := func(status int, title, text string) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(status)
			appNewDone().Execute(w, map[string]string{"Title": title, "Text": text})
		}
		q := r.URL.Query()
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 || q.Get("code") == "" {
			page(http.StatusBadRequest, "Not this run's callback", "This address takes GitHub's answer to the form this run of hookline app new served; its state does not match. Start again from the page the terminal names.")
			return
		}
		creds, err := gh.CreateAppFromManifest(r.Context(), q.Get("code"))
		if err == nil {
			err = writeAppEnv(o.out, creds, o.channel)
		}
		if err != nil {
			page(http.StatusBadGateway, "The App could not be finished", err.Error())
		} else {
			page(http.StatusOK, "App "+creds.Name+" is made", "Its credentials are in "+o.out+".")
		}
		http.NewResponseController(w).Flush()
		select {
		case done <- result{creds, err}:
		default:
		}
	})
	// No Host check: the page holds no secret, and the callback takes only
	// this run's state.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	// Shutdown, not Close: the callback's page is still being written when
	// the command learns the result, and a browser shown a reset connection
	// would not see it.
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()

	fmt.Fprintf(s.err, "open %s/ in your browser: it sends the App's manifest to %s for you to confirm (waiting up to %s)\n", base, o.web, o.timeout)
	if !o.noBrowser {
		openBrowser(base + "/")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("GitHub did not send the browser back within %s: run hookline app new again", o.timeout)
		}
		return ctx.Err()
	}
	if res.err != nil {
		return res.err
	}
	c := res.creds
	fmt.Fprintf(s.err, "made GitHub App %q (ID %d): %s\n", c.Name, c.ID, c.HTMLURL)
	fmt.Fprintf(s.err, "wrote %s (mode 0600): APP_ID, PRIVATE_KEY, WEBHOOK_SECRET, GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET, WEBHOOK_PROXY_URL\n", o.out)
	fmt.Fprintf(s.err, "install it on a repository: %s/installations/new\n", c.HTMLURL)
	api := ""
	if o.api != githubapi.DefaultBaseURL {
		api = " --github-api " + o.api
	}
	fmt.Fprintf(s.out, "hookline forward --app --app-env %s --url %s%s --target http://127.0.0.1:3000/api/github/webhooks\n", o.out, o.channel, api)
	return nil
}

// writeAppEnv writes the App's credentials to path, with Probot's
// variable names, readable by the user alone, never over an existing file.
func writeAppEnv(path string, c githubapi.AppCredentials, channel string) error {
	env := map[string]string{
		"APP_ID":               fmt.Sprint(c.ID),
		"PRIVATE_KEY":          c.PEM,
		"GITHUB_CLIENT_ID":     c.ClientID,
		"GITHUB_CLIENT_SECRET": c.ClientSecret,
		"WEBHOOK_PROXY_URL":    channel,
	}
	if c.WebhookSecret != nil {
		env["WEBHOOK_SECRET"] = *c.WebhookSecret
	}
	text, err := godotenv.Marshal(env)
	if err != nil {
		return err
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("writing the App's credentials: %w", err)
	}
	header := fmt.Sprintf("# GitHub App %q (%s), made by hookline app new on %s.\n# Secrets: keep this file out of version control.\n", c.Name, c.HTMLURL, time.Now().Format(time.DateOnly))
	if _, err = file.WriteString(header + text + "\n"); err == nil {
		err = file.Sync()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("writing the App's credentials to %s: %w", path, err)
	}
	return nil
}

// openBrowser opens url in the user's browser, in the background: $BROWSER
// if set (as gh does), else the system's opener through
// github.com/cli/browser (gh's); quietly nothing when there is none (the
// URL is printed). What the opener prints is not ours to show.
func openBrowser(url string) {
	browser.Stdout, browser.Stderr = io.Discard, io.Discard
	if b := os.Getenv("BROWSER"); b != "" {
		c := exec.Command(b, url)
		if c.Start() == nil {
			go c.Wait()
		}
		return
	}
	go browser.OpenURL(url)
}
