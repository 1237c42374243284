package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/agent"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/inspect"
	"github.com/hookline/hookline/internal/metrics"
	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/rest/header"
	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/provider"
	"github.com/hookline/hookline/webhooks/webhookstest"
)

// forwardOptions are the parsed flags of `hookline forward`.
type forwardOptions struct {
	url            string
	newChannel     bool
	private        bool   // --private: --new makes a private channel
	verifyOnRelay  bool   // --verify-on-relay
	hubVerifyToken string // --hub-verify-token
	token          string // a private channel's read token (private.go)
	server         string
	format         delivery.Format
	targets        []proxy.Target // --target, --route
	secret         string
	schemeSecret   map[provider.Scheme][]string // --secret PROVIDER=SECRET
	scheme         provider.Scheme              // --provider ("": auto)
	tolerance      time.Duration                // --tolerance (negative: none)
	sendHint       [2]string                    // how a suggested `hookline send` passes the secret (sendSecretHint)
	targetSecret   string
	resign         bool
	noQuery        bool
	header         http.Header // --header, set on every request to the target
	plugins        pluginOptions
	events         []string
	ignore         []string
	quietFiltered  bool
	concurrency    int
	timeout        time.Duration
	retries        int
	saveDir        string
	saveScripts    bool   // --save-scripts
	stateFile      string // "" for none
	stateDefault   bool   // stateFile is the default one (not --state-file)
	noState        bool   // --no-state: no default state file
	failedDir      string // "" for none
	failedAuto     bool   // failedDir is the default one (not --save or --failed-dir)
	dedupWindow    time.Duration
	insecure       bool
	jsonOut        bool
	verbose        bool
	lastEventID    string
	listen         string
	channelName    string           // --channel
	health         string           // --health ADDR
	inspect        *inspect.Options // --inspect (nil: off), at inspectAddr
	inspectAddr    string
	mcp            bool // --mcp: the MCP server on stdin and stdout, the trace on stderr
	mcpReadOnly    bool // --mcp-read-only
	github         githubOptions
	keepHook       bool
}

func forwardCommand(s *streams) *ucli.Command {
	var o forwardOptions
	var f forwardFlagValues
	return &ucli.Command{
		Name:    "forward",
		Aliases: []string{"client"},
		Usage:   "receive deliveries from a relay channel, verify them, run plugins and replay them to a local server",
		Description: `Subscribes to a relay channel (smee.io, a gosmee server or hookline serve),
verifies each delivery with --secret, runs plugins and replays it byte-exact
to --target, one trace line per delivery. Without --url or --new it starts a
relay on this machine and prints its channel URL. The README explains the
rest: failed folder, state file, plugins, reconnection.

   hookline forward --url https://smee.io/abc --target http://127.0.0.1:3000/api/github/webhooks --secret-file .secret
   hookline forward --target http://127.0.0.1:3000/hook    # a local relay, no internet
   hookline forward --repo octo/hello --new --target http://127.0.0.1:3000/hook   # a webhook for this run`,
		Flags: forwardFlags(&o, &f),
		Action: func(c *ucli.Context) error {
			opts, err := parseForward(c, o, &f)
			if err != nil {
				return errRedacted(err, opts.secret)
			}
			return errRedacted(runForward(c.Context, opts, s), opts.secret)
		},
	}
}

// splitNames flattens repeated, comma-separated flag values.
func splitNames(values []string) []string {
	var out []string
	for _, v := range values {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

// forwardFlagValues are what forward's flags hold that are not options
// yet: read and checked by parseForward.
type forwardFlagValues struct {
	secret                 secretFlagValues
	provider               providerFlagValues
	plugins                pluginFlagValues
	inspect                inspectFlagValues
	github                 githubFlagValues
	targets                targetFlagValues
	format, path           string
	port, retries          int
	events, ignore, header ucli.StringSlice
}

func parseForward(c *ucli.Context, o forwardOptions, f *forwardFlagValues) (forwardOptions, error) {
	o.format = delivery.Format(f.format)
	o.resign = o.resign || o.targetSecret != ""
	o.plugins = f.plugins.options()
	o.events, o.ignore = splitNames(f.events.Value()), splitNames(f.ignore.Value())
	var err error
	if o.secret, err = readSecret(c, &f.secret); err != nil {
		return o, err
	}
	_, o.schemeSecret, _ = f.secret.split()
	if o.scheme, err = f.provider.scheme(); err != nil {
		return o, err
	}
	o.tolerance = f.provider.checkTolerance()
	if _, err = eventPatterns("--events", o.events, o.scheme); err != nil {
		return o, err
	}
	if _, err = eventPatterns("--ignore", o.ignore, o.scheme); err != nil {
		return o, err
	}
	if o.header, err = parseHeaders(f.header.Value()); err != nil {
		return o, err
	}
	if o.retries, err = parseRetries(c, f.retries); err != nil {
		return o, err
	}
	if o.inspect, err = f.inspect.options(); err != nil {
		return o, err
	}
	if o.inspect != nil {
		o.inspectAddr = f.inspect.addr
	}
	switch {
	case o.mcp && o.inspect == nil:
		return o, usageErrorf(`--mcp serves the inspector's tools: drop --inspect ""`)
	case o.mcpReadOnly && !o.mcp:
		return o, usageErrorf("--mcp-read-only goes with --mcp")
	}
	o.sendHint[0], o.sendHint[1] = sendSecretHint(c, &f.secret)
	if o.github, err = parseGitHub(c, &f.github, false); err != nil {
		return o, err
	}
	if o.keepHook && !o.github.set() {
		return o, usageErrorf("--keep-hook keeps the webhook that --repo, --org or --app points at the channel: give one of them")
	}
	if o.secret == "" && o.github.app.secret != "" {
		o.secret = o.github.app.secret
	}
	if o.github.set() {
		channel := o.url
		if channel == "" && !o.newChannel {
			channel = "http://" + o.listen // the embedded relay
		}
		if channel != "" {
			if err := o.github.checkReachable(channel); err != nil {
				return o, err
			}
		}
	}
	if o.saveScripts && o.saveDir == "" {
		return o, usageErrorf("--save-scripts writes its scripts beside the capture files: give --save DIR too")
	}
	if c.IsSet("channel") {
		if o.url != "" || o.newChannel {
			return o, usageErrorf("--channel names the embedded relay's channel; with --url or --new there is none")
		}
		if err := relay.ValidChannelName(o.channelName); err != nil {
			return o, usageErrorf("--channel: %v", err)
		}
	}
	if c.NArg() > 0 {
		return o, usageErrorf("forward takes no arguments (got %q); did you mean --url %s?", c.Args().First(), c.Args().First())
	}
	if o.targets, err = f.targets.parse(); err != nil {
		return o, err
	}
	if c.IsSet("port") || c.IsSet("path") {
		// smee-client's -p/-P, so its users' scripts work unchanged.
		if o.targets != nil {
			return o, usageErrorf("--target and --port/--path cannot be used together: --port %d --path P is --target http://127.0.0.1:%d/P", f.port, f.port)
		}
		port := f.port
		if port < 1 || port > 65535 {
			return o, usageErrorf("--port %d: want a port number from 1 to 65535 (--path needs --port)", port)
		}
		o.targets = []proxy.Target{{URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/" + strings.TrimPrefix(f.path, "/")}}
	}
	if o.url != "" && o.newChannel {
		return o, usageErrorf("--url and --new cannot be used together: --new creates a channel, --url uses an existing one")
	}
	o.url, o.token = wire.SplitToken(o.url) // the token goes in a header, never in a URL forward shows
	if o.private && !o.newChannel {
		return o, usageErrorf("--private makes the channel --new creates private: give --new (a channel given with --url is private or not already)")
	}
	if o.verifyOnRelay && o.url == "" && !o.newChannel {
		return o, usageErrorf("--verify-on-relay binds a private channel of a relay to the secret: give --new --private or --url (the embedded relay on this machine needs no binding)")
	}
	if o.hubVerifyToken != "" && o.url == "" && !o.newChannel {
		return o, usageErrorf("--hub-verify-token sets a private channel's verify token on its relay: give --new --private or --url (the embedded relay, on loopback, is out of a hub's reach)")
	}
	if o.verifyOnRelay && o.secret == "" && !o.github.set() {
		return o, usageErrorf("--verify-on-relay needs the webhook secret to bind the channel to: give --secret")
	}
	switch o.format {
	case "", delivery.FormatSmee, delivery.FormatGosmee, delivery.FormatHookline:
	default:
		return o, usageErrorf("--format %q: want smee, gosmee or hookline", o.format)
	}
	if o.url != "" {
		if _, err := sse.StreamURL(o.url, o.format); err != nil {
			return o, usageErrorf("--url: %v", err)
		}
	}
	if o.resign && o.secret == "" && o.targetSecret == "" {
		return o, usageErrorf("--resign needs a secret to sign with: give --target-secret or --secret")
	}
	if o.concurrency < 1 {
		return o, usageErrorf("--concurrency %d: must be at least 1", o.concurrency)
	}
	if o.timeout <= 0 {
		return o, usageErrorf("--timeout %v: must be positive", o.timeout)
	}
	if o.saveDir != "" {
		if st, err := os.Stat(o.saveDir); err != nil || !st.IsDir() {
			if err := os.MkdirAll(o.saveDir, 0o755); err != nil {
				return o, usageErrorf("--save %s: %v", o.saveDir, err)
			}
		}
	}
	if o.dedupWindow < 0 {
		return o, usageErrorf("--dedup-window %v: must be 0 (off) or positive", o.dedupWindow)
	}
	if o.noState && o.stateFile != "" {
		return o, usageErrorf("--no-state and --state-file cannot be used together: --no-state keeps no position, --state-file keeps it in FILE")
	}
	if c.IsSet("state-file") && o.stateFile == "" {
		return o, usageErrorf("--state-file is empty; give a file path, or leave the flag out")
	}
	if o.lastEventID != "" && !header.IsValue(o.lastEventID) {
		return o, usageErrorf("--last-event-id: the id contains control characters")
	}
	if err := checkNotDir("--state-file", o.stateFile); err != nil {
		return o, err
	}
	if st, err := os.Stat(o.failedDir); o.failedDir != "" && err == nil && !st.IsDir() {
		return o, usageErrorf("--failed-dir %s is a file; give a directory (it is created when needed)", o.failedDir)
	}
	return o, nil
}

// checkNotDir refuses a file flag that names a directory.
func checkNotDir(flag, path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usageErrorf("%s %s is a directory; give a file path", flag, path)
	}
	return nil
}

// defaultPaths fills in the state file and the failed folder that the user
// did not name (see the command's description), for a run on channel
// (empty for the embedded relay). A state directory that cannot be found
// leaves them empty, with a note on stderr.
func (o *forwardOptions) defaultPaths(channel string, s *streams) {
	if o.failedDir == "" && o.saveDir != "" {
		o.failedDir = filepath.Join(o.saveDir, "failed")
	}
	needFailed := o.failedDir == "" && o.targets != nil
	// The position is kept by default for a channel given with --url, so
	// that a restart gets what arrived while forward was down (a --new
	// channel is new every run; the embedded relay's history is in memory).
	needState := o.stateFile == "" && !o.noState && o.url != ""
	if !needFailed && !needState {
		return
	}
	dir, err := stateDir()
	if err != nil {
		if needFailed {
			fmt.Fprintf(s.err, "note: no state directory (%v): deliveries the target does not take are not saved; give --failed-dir DIR\n", err)
		}
		return
	}
	if needFailed {
		// One subfolder per run, so that the replay the summary suggests
		// sends this run's failures only, not earlier runs' to other
		// targets.
		o.failedDir, o.failedAuto = filepath.Join(dir, "failed", time.Now().UTC().Format("20060102T150405Z")), true
	}
	if needState {
		if stream, err := sse.StreamURL(channel, o.format); err == nil {
			o.stateFile, o.stateDefault = filepath.Join(dir, "state", stateFileName(stream)), true
		}
	}
}

// newLogger returns the logger for warnings on stderr, written as lines of
// the trace ("warn: <message> (key=value, ...)"), never as raw slog
// records. Debug records (relay control events and the like) are not
// shown, -v or not: -v adds headers, payloads and answers to the trace.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(&traceHandler{w: w, level: slog.LevelWarn})
}

// traceHandler writes slog records as one readable line each.
type traceHandler struct {
	w     io.Writer
	level slog.Level
	attrs []slog.Attr
}

func (h *traceHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *traceHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(strings.ToLower(r.Level.String()) + ": " + termSafe(r.Message))
	var kv []string
	add := func(a slog.Attr) bool {
		kv = append(kv, a.Key+"="+termSafe(a.Value.String()))
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if len(kv) > 0 {
		b.WriteString(" (" + strings.Join(kv, ", ") + ")")
	}
	b.WriteString("\n")
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clip(h.attrs), as...)
	return &c
}

func (h *traceHandler) WithGroup(string) slog.Handler { return h }

// runForward is forward: the channel (setUpChannel), the client and what
// reports on it (newForwardClient), the webhook of --repo/--org
// (startHook), then the run, its summary and what its end means.
func runForward(ctx context.Context, o forwardOptions, s *streams) error {
	defer oneProc(o)()
	logger := newLogger(s.err)
	transport := httpTransport(o.insecure, s)
	var access githubAccess
	if o.github.set() {
		// The token first: a run that cannot make the webhook makes no
		// channel either.
		var err error
		if access, err = o.github.checkAccess(ctx, s, transport); err != nil {
			return err
		}
	}
	channel, stopRelay, err := setUpChannel(ctx, &o, s, transport)
	if err != nil {
		return err
	}
	defer stopRelay()
	if err := chooseSecret(&o, access, s); err != nil {
		return err
	}
	if o.verifyOnRelay {
		if err := bindChannel(ctx, transport, channel, o.token, "secret", "--verify-on-relay", o.secret); err != nil {
			return err
		}
		fmt.Fprintln(s.err, "the relay keeps only deliveries signed with the webhook secret on this channel (--verify-on-relay)")
	}
	if o.hubVerifyToken != "" {
		if err := bindChannel(ctx, transport, channel, o.token, "verify-token", "--hub-verify-token", o.hubVerifyToken); err != nil {
			return err
		}
		fmt.Fprintln(s.err, "the relay answers a hub's handshake (hub.challenge) that carries this verify token (--hub-verify-token)")
	}
	handlers, err := pluginHandlers(o.plugins, logger, s)
	if err != nil {
		return err
	}
	traceOut, traceColor := s.out, s.outColor
	if o.mcp { // standard output carries the protocol
		traceOut, traceColor = s.err, s.errColor
	}
	tr := newTracer(traceOut, s.err, traceColor, o.jsonOut, o.verbose, nil)
	defer tr.flush()
	tr.secrets = []string{o.secret, o.targetSecret}
	tr.forward = true
	tr.events, tr.quietFiltered = o.events, o.quietFiltered

	// With --repo, the webhook is created once the channel is subscribed
	// to, so that GitHub's ping does not go to a relay that keeps nothing
	// (smee.io) before anyone listens.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	var hook *hookSetup
	if o.github.set() {
		hook = &hookSetup{connected: make(chan struct{})}
	}
	client, ep, closeClient, err := newForwardClient(ctx, o, channel, transport, handlers, hook, tr, logger, s)
	if err != nil {
		return err
	}
	defer closeClient()
	if o.mcp {
		// The agent's session is the run's: when the agent leaves, forward
		// stops as at Ctrl-C.
		srv := agent.New(agent.Options{Inspector: func() (agent.Endpoint, error) { return ep, nil }, ReadOnly: o.mcpReadOnly, Version: version})
		go func() {
			if err := serveMCP(runCtx, srv, s.in, s.out); err != nil {
				tr.note("mcp: " + err.Error())
			}
			stopRun(nil)
		}()
	}
	// The first Ctrl-C (ctx) says what it waits for; the second quits.
	quit := quitContext(ctx)
	defer context.AfterFunc(quit, client.Stop)()
	defer context.AfterFunc(ctx, func() {
		if n := client.Stats().InFlight; n > 0 && quit.Err() == nil {
			tr.note(fmt.Sprintf("waiting up to %s for %s in flight; Ctrl-C again to quit now", drainTimeout, plural(int(n), "delivery", "deliveries")))
		}
	})()
	if hook != nil {
		defer hook.start(runCtx, stopRun, func(ctx context.Context) (func(), error) {
			return o.github.setUpHooks(ctx, access, channel, o.secret, hookEvents(o.events), o.keepHook, s)
		})()
	}
	err = client.Run(runCtx)
	if hook != nil && context.Cause(runCtx) != nil && ctx.Err() == nil {
		<-hook.done
		if hook.err != nil {
			return hook.err
		}
	}
	tr.summary(client.Stats(), summaryInfo{
		saveDir: o.saveDir, failedDir: client.FailedDir(), failedAuto: o.failedAuto, target: singleURL(o.targets), verified: o.secret != "" || len(o.schemeSecret) > 0,
		stateFile: o.stateFile, checkpoint: client.Checkpoint(),
	})
	if hint := certHint(err, "relay"); hint != "" {
		return fmt.Errorf("%w\n%s", err, hint)
	}
	switch {
	case err == nil && quit.Err() != nil:
		return &codeError{code: ExitInterrupted, err: errors.New("quit at the second Ctrl-C: deliveries in flight were cut short (see the trace; the failed folder keeps them)")}
	case errors.Is(err, sse.ErrNotEventStream):
		return fmt.Errorf("%w\nfor a gosmee server, add --format gosmee", err)
	case errors.Is(err, proxy.ErrPermanent) && !isStatus(err, http.StatusUnauthorized, http.StatusForbidden):
		// A 401 or 403 is about the read token, which the error names.
		return fmt.Errorf("%w\nthe relay refused the channel; check --url (a channel URL looks like https://smee.io/AbCdEf123)", err)
	}
	return err
}

// isStatus reports whether err is a relay's answer with one of codes.
func isStatus(err error, codes ...int) bool {
	var se *sse.StatusError
	return errors.As(err, &se) && slices.Contains(codes, se.StatusCode)
}

// chooseSecret settles the webhook secret when GitHub's webhooks are set
// up: the one given (--secret, or --app-env's WEBHOOK_SECRET) is set on
// each; without one, a new random one, except for a GitHub App that has a
// secret already, which GitHub never returns: replacing it could not be
// undone, so it is left as it is and deliveries go unverified.
func chooseSecret(o *forwardOptions, access githubAccess, s *streams) error {
	if !o.github.set() {
		return nil
	}
	if o.secret != "" {
		if o.github.hasApp() {
			from := "the one given with --secret"
			if o.github.app.secretFrom != "" && o.secret == o.github.app.secret {
				from = o.github.app.secretFrom
			}
			fmt.Fprintf(s.err, "the App's webhook secret is now %s: GitHub never returns a secret, so the one before could not be read to put back\n", from)
		}
		return nil
	}
	if o.github.hasApp() && access.appConfig.Secret != "" {
		if len(o.github.hooks()) > 0 {
			return usageErrorf("the GitHub App has a webhook secret, which GitHub never returns, and --repo/--org need the same one to verify every delivery: give it with --secret (or --app-env)")
		}
		fmt.Fprintln(s.err, "the App's webhook secret is left as it is (GitHub never returns it): deliveries are forwarded unverified; give it with --secret or --app-env to verify them")
		return nil
	}
	o.secret = rand.Text() // 26 characters, 130 random bits
	fmt.Fprintln(s.err, "webhook secret: a new random one for this run, not shown (give --secret to choose it)")
	return nil
}

// setUpChannel returns the channel forward subscribes to: --url, a new one
// on --server (--new), or the embedded relay's (whose stop it returns; a
// no-op otherwise). It fills in o's default paths for that channel, and
// refuses a --target that is the channel itself.
func setUpChannel(ctx context.Context, o *forwardOptions, s *streams, transport http.RoundTripper) (channel string, stop func(), err error) {
	stop = func() {}
	channel = o.url
	if o.newChannel {
		fmt.Fprintf(s.err, "creating a channel on %s (up to %s)\n", httpx.RedactURL(o.server), newChannelTimeout)
		if channel, o.token, err = createChannel(ctx, o.server, transport, o.private); err != nil {
			return "", stop, err
		}
		fmt.Fprintf(s.err, "created channel %s\n", httpx.RedactURL(channel))
		if o.private {
			path, err := keepToken(channel, o.token)
			if err != nil {
				return "", stop, fmt.Errorf("keeping the private channel's read token: %w (nothing else has it: the channel cannot be read without it)", err)
			}
			fmt.Fprintf(s.err, "it is private: its read token is in %s (mode 0600; not shown); elsewhere give it as %s, or as ?token= in a browser's URL\n", path, tokenEnv)
		}
	} else if channel != "" {
		o.token = findToken(channel, o.token)
	}
	o.defaultPaths(channel, s)
	if channel == "" {
		name, keep := o.embeddedChannel()
		if channel, stop, err = startEmbeddedRelay(ctx, o.listen, name, o.sendHint, s); err != nil {
			return "", func() {}, err
		}
		keep(channel[strings.LastIndexByte(channel, '/')+1:])
	}
	for _, target := range targetURLs(o.targets) {
		if sameChannel(channel, target) {
			stop()
			return "", func() {}, usageErrorf("--target %s is the relay channel itself: every delivery would come back and be forwarded again, for ever; give your server's URL (http://127.0.0.1:PORT/PATH)", httpx.RedactURL(target))
		}
	}
	return channel, stop, nil
}

// newForwardClient makes the client for channel from o, reporting to the
// tracer (and --health, and hook's first connection), serves --health
// until closeFn, and prints the start lines.
func newForwardClient(ctx context.Context, o forwardOptions, channel string, transport http.RoundTripper, handlers *webhooks.Emitter,
	hook *hookSetup, tr *tracer, logger *slog.Logger, s *streams) (client *proxy.Client, ep agent.Endpoint, closeFn func(), err error) {
	closeFn = func() {}
	resignSecret := ""
	if o.resign {
		resignSecret = o.targetSecret
		if resignSecret == "" {
			resignSecret = o.secret
		}
	}
	dedupWindow := o.dedupWindow
	if dedupWindow == 0 {
		dedupWindow = -1 // off
	}
	var health *forwardHealth
	if o.health != "" {
		health = &forwardHealth{}
	}
	var ins *inspect.Inspector
	if o.inspect != nil {
		iopts := *o.inspect
		iopts.Secret, iopts.SchemeSecrets, iopts.TargetURL = o.secret, o.schemeSecret, firstOf(targetURLs(o.targets))
		iopts.Resend = func(ctx context.Context, d *delivery.Delivery) proxy.Result { return client.Handle(ctx, d) }
		iopts.Build = func(name string, overrides []webhookstest.Override) (*delivery.Delivery, error) {
			secret := o.secret
			if sec := o.schemeSecret[provider.GitHub]; len(sec) > 0 {
				secret = sec[0]
			}
			return testEvent(name, overrides, secret)
		}
		iopts.OnCall = tr.call
		if ins, ep, closeFn, err = startInspector(ctx, o.inspectAddr, iopts, s); err != nil {
			return nil, ep, func() {}, err
		}
	}
	popts := proxy.Options{
		URL: channel, Format: o.format, LastEventID: o.lastEventID, StateFile: o.stateFile,
		RelayClient: &http.Client{Transport: transport}, ReadToken: o.token,
		Secret: o.secret, SchemeSecrets: o.schemeSecret, Provider: o.scheme, Tolerance: o.tolerance,
		Targets:    withSettings(o.targets, o.header, o.noQuery, resignSecret),
		HTTPClient: targetClient(o.timeout, o.retries, o.targets != nil, transport, tr.note), DrainTimeout: drainTimeout,
		Concurrency: o.concurrency, Events: o.events, Ignore: o.ignore, SaveDir: o.saveDir,
		FailedDir: o.failedDir, DedupWindow: dedupWindow, SaveScripts: o.saveScripts,
		Logger: logger,
		OnGap: func(g proxy.Gap) {
			if ins != nil {
				ins.AddGap(g)
			}
			tr.gap(g)
		},
		OnState: func(sc proxy.StateChange) {
			if health != nil {
				health.onState(sc)
			}
			if hook != nil && sc.State == proxy.StateConnected {
				hook.once.Do(func() { close(hook.connected) })
			}
			tr.state(sc)
		},
		OnResult: func(r proxy.Result) {
			if health != nil {
				health.onResult(r)
			}
			if ins != nil {
				ins.Add(r)
			}
			tr.result(r)
		},
	}
	if handlers != nil {
		popts.Handlers = handlers
		popts.AllowUnverified = true // without --secret the trace says "unverified"; the user chose it
	}
	if client, err = proxy.New(popts); err != nil {
		if errors.Is(err, proxy.ErrInvalidOptions) && o.stateFile != "" && strings.Contains(err.Error(), "state file") {
			return nil, ep, closeFn, fmt.Errorf("--state-file %s: %w", o.stateFile, err)
		}
		return nil, ep, closeFn, err
	}
	if health != nil {
		health.stats = client.Stats
		reg := metrics.NewRegistry()
		health.observe = reg.Forward(client.Stats, health.connections.Load)
		health.metrics = reg.Handler()
		u, closeHealth, err := serveHealth(o.health, health)
		if err != nil {
			return nil, ep, closeFn, err
		}
		// Served until forward exits: "stopping" from the first Ctrl-C.
		stopWatch := context.AfterFunc(ctx, health.stop)
		forget := closeFn
		closeFn = func() { stopWatch(); closeHealth(); forget() }
		fmt.Fprintf(s.err, "health: %s\n", u)
	}
	if o.secret == "" && len(o.schemeSecret) == 0 {
		fmt.Fprintln(s.err, "no --secret: deliveries are not verified (set HOOKLINE_SECRET to the webhook's secret)")
	}
	fmt.Fprintf(s.err, "forwarding %s", httpx.RedactURL(channel))
	if o.targets != nil {
		fmt.Fprintf(s.err, " → %s%s", describeTargets(o.targets), headerNote(o.header))
	}
	fmt.Fprintln(s.err)
	if o.targets == nil && handlers == nil {
		fmt.Fprintln(s.err, "no --target and no plugins: deliveries are only shown here (and saved with --save), not sent anywhere")
	}
	if o.stateFile != "" {
		if id := client.Checkpoint(); id != "" && o.lastEventID == "" {
			fmt.Fprintf(s.err, "position in the channel: after event %s (state file %s; --no-state starts from new deliveries)\n", id, o.stateFile)
		} else if o.stateDefault {
			fmt.Fprintf(s.err, "state file: %s (the position in the channel, to resume after a restart; --no-state keeps none)\n", o.stateFile)
		}
	}
	return client, ep, closeFn, nil
}

// sameChannel reports whether target is a URL of the relay channel itself:
// the same host and port (every loopback name counts as one: 127.0.0.1,
// localhost, [::1]) and the channel's path, or gosmee's /events/<name> for
// it. Forwarding there would loop; proxy stops a loop that gets past this
// (a server that posts to the channel) at run time.
func sameChannel(channel, target string) bool {
	cu, err1 := url.Parse(channel)
	tu, err2 := url.Parse(target)
	if err1 != nil || err2 != nil || cu.Host == "" || tu.Host == "" {
		return false
	}
	hostPort := func(u *url.URL) (string, string) {
		host, port := strings.ToLower(u.Hostname()), u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			host = "loopback"
		}
		return host, port
	}
	ch, cp := hostPort(cu)
	th, tp := hostPort(tu)
	if ch != th || cp != tp {
		return false
	}
	name := path.Base(strings.TrimRight(cu.Path, "/"))
	tpath := strings.TrimRight(tu.Path, "/")
	return name != "" && name != "/" && (strings.TrimRight(cu.Path, "/") == tpath ||
		tpath == "/"+name || tpath == "/events/"+name)
}

// oneProc runs a forwarder that handles one delivery at a time on one
// processor, unless GOMAXPROCS says otherwise, and returns what restores
// the setting (for a Run inside a longer-lived process, such as a test):
// the pipeline is sequential, and on more processors net/http's
// per-connection goroutines and the stream reader wake each other across
// CPUs (docs/PERFORMANCE.md, "With r3labs as the one reader"). Not with
// the embedded relay, which serves other clients in the same process.
func oneProc(o forwardOptions) (restore func()) {
	if o.concurrency == 1 && (o.url != "" || o.newChannel) && os.Getenv("GOMAXPROCS") == "" {
		prev := runtime.GOMAXPROCS(1)
		return func() { runtime.GOMAXPROCS(prev) }
	}
	return func() {}
}

// hookSetup is the webhook forward --repo creates once connected.
type hookSetup struct {
	once      sync.Once
	connected chan struct{} // closed at the first connection
	done      chan struct{} // closed when set up, or given up
	remove    func()
	err       error
}

// start sets the webhook up with setUp once the client is first connected
// (or gives up when ctx ends), stopping the run with setUp's error, and
// returns what ends it when forward ends: it waits for the set-up, then
// removes the webhook.
func (h *hookSetup) start(ctx context.Context, stop context.CancelCauseFunc, setUp func(context.Context) (func(), error)) (end func()) {
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		select {
		case <-h.connected:
		case <-ctx.Done():
			return
		}
		if h.remove, h.err = setUp(ctx); h.err != nil {
			stop(h.err)
		}
	}()
	return func() {
		stop(nil)
		<-h.done
		if h.remove != nil {
			h.remove()
		}
	}
}

// embeddedChannel returns the embedded relay's channel name: --channel, else
// the one an earlier run stored in the state directory, else "" (the relay
// picks one); and keep, which stores the name used for the next run.
func (o forwardOptions) embeddedChannel() (name string, keep func(string)) {
	keep = func(string) {}
	if o.channelName != "" {
		return o.channelName, keep
	}
	dir, err := stateDir()
	if err != nil {
		return "", keep
	}
	path := filepath.Join(dir, "embedded-channel")
	if b, err := os.ReadFile(path); err == nil {
		if name := strings.TrimSpace(string(b)); relay.ValidChannelName(name) == nil {
			return name, keep
		}
	}
	return "", func(name string) {
		if os.MkdirAll(dir, 0o700) == nil {
			os.WriteFile(path, []byte(name+"\n"), 0o600)
		}
	}
}

// startEmbeddedRelay serves a hookline relay on addr (or, when that port is
// taken, on a free loopback port) and returns the URL of channel name (a
// new one if empty) and a function that shuts the relay down.
func startEmbeddedRelay(ctx context.Context, addr, name string, sendHint [2]string, s *streams) (string, func(), error) {
	srv, err := relay.New(relay.Options{})
	if err != nil {
		return "", nil, fmt.Errorf("starting the embedded relay: %w", err)
	}
	ln, err := listenOrFree(addr, s)
	if err != nil {
		return "", nil, fmt.Errorf("starting the embedded relay on %s: %w", addr, err)
	}
	// The relay outlives ctx until the client has drained.
	relayCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(relayCtx, ln)
	}()
	if name == "" {
		name = srv.NewChannel()
	}
	channel := relay.ListenURL(ln.Addr()) + "/" + name
	fmt.Fprintf(s.err, "embedded relay: POST deliveries to %s\n  try: %shookline send --event ping%s --url %s\n", channel, sendHint[0], sendHint[1], channel)
	return channel, func() { cancel(); <-done }, nil
}

// newChannelTimeout bounds forward --new's request for a channel.
const newChannelTimeout = 10 * time.Second

// createChannel asks a relay for a new channel the way smee-client does:
// HEAD <server>/new answers with a redirect whose Location is the channel.
// A gosmee server answers GET /new with the URL as plain text instead.
// With private, it asks a hookline relay for a private channel, and
// returns its read token too (createPrivateChannel).
func createChannel(ctx context.Context, server string, transport http.RoundTripper, private bool) (channel, token string, err error) {
	base, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return "", "", usageErrorf("--server %q: want an http(s) URL such as https://smee.io", server)
	}
	newURL := base.JoinPath("new")
	// One budget for both tries: a server that does not answer costs
	// newChannelTimeout, not a silent half-minute.
	ctx, cancel := context.WithTimeout(ctx, newChannelTimeout)
	defer cancel()
	client := &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	try := func(method string) (string, int, error) {
		req, err := http.NewRequestWithContext(ctx, method, newURL.String(), nil)
		if err != nil {
			return "", 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", 0, err
		}
		defer resp.Body.Close()
		if loc := resp.Header.Get("Location"); loc != "" && resp.StatusCode >= 300 && resp.StatusCode < 400 {
			u, err := newURL.Parse(loc)
			if err != nil {
				return "", resp.StatusCode, err
			}
			return u.String(), resp.StatusCode, nil
		}
		if method == http.MethodGet && resp.StatusCode == http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			text := strings.TrimSpace(string(body))
			if u, err := url.Parse(text); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
				return u.String(), resp.StatusCode, nil
			}
		}
		return "", resp.StatusCode, nil
	}
	var u string
	var status int
	if private {
		var refusal string
		if u, token, refusal, err = createPrivateChannel(ctx, client, newURL.String()); err == nil && refusal != "" {
			return "", "", fmt.Errorf("creating a private channel on %s: %s", httpx.RedactURL(server), refusal)
		}
	} else if u, status, err = try(http.MethodHead); err == nil && u == "" {
		u, status, err = try(http.MethodGet)
	}
	switch {
	case err != nil:
		if hint := certHint(err, "relay"); hint != "" {
			return "", "", fmt.Errorf("creating a channel on %s: %w\n%s", httpx.RedactURL(server), err, hint)
		}
		return "", "", fmt.Errorf("creating a channel on %s: %w\nleave out --new (and --url) to use a relay on this machine instead, no internet needed", httpx.RedactURL(server), err)
	case u == "":
		return "", "", fmt.Errorf("creating a channel on %s: %s/new answered %d without a channel URL; is it a smee, gosmee or hookline relay?", httpx.RedactURL(server), httpx.RedactURL(server), status)
	}
	return u, token, nil
}

// pluginOptions are the plugin flags forward and replay share.
type pluginOptions struct {
	dir  string
	exec []string
	env  []string
}

// forwardFlags are forward's flags, bound to o and f, grouped in its help
// by concern.
func forwardFlags(o *forwardOptions, f *forwardFlagValues) []ucli.Flag {
	relayFlags := []ucli.Flag{
		&ucli.StringFlag{Name: "url", Aliases: []string{"u"}, Usage: "relay channel `URL` to subscribe to", EnvVars: []string{"HOOKLINE_URL"}, Destination: &o.url},
		&ucli.BoolFlag{Name: "new", Usage: "create a new channel on --server and use it", Destination: &o.newChannel},
		&ucli.StringFlag{Name: "server", Value: "https://smee.io", Usage: "relay `URL` for --new", Destination: &o.server},
		&ucli.BoolFlag{Name: "private", Usage: "with --new on a hookline relay: a private channel, read with a token kept in the state directory", Destination: &o.private},
		&ucli.BoolFlag{Name: "verify-on-relay", Usage: "bind the private channel to --secret: the relay keeps only deliveries signed with it (and answers Slack's url_verification)", Destination: &o.verifyOnRelay},
		&ucli.StringFlag{Name: "hub-verify-token", Usage: "set the private channel's verify `TOKEN`: the relay answers a hub's handshake (hub.challenge: Meta, Strava, WebSub) that carries it", EnvVars: []string{"HOOKLINE_HUB_VERIFY_TOKEN"}, Destination: &o.hubVerifyToken},
		&ucli.StringFlag{Name: "format", Usage: "relay `FORMAT`: smee, gosmee or hookline (default: detect)", Destination: &f.format},
		&ucli.StringFlag{Name: "listen", Value: "127.0.0.1:3333", Usage: "`ADDR` of the embedded relay started without --url or --new (a busy port falls back to a free one)", Destination: &o.listen},
		&ucli.StringFlag{Name: "channel", Usage: "the embedded relay's channel `NAME` (default: the previous run's, so a sender's URL stays valid)", Destination: &o.channelName},
		insecureFlag(&o.insecure),
	}
	verifyFlags := append(secretFlags("webhook `SECRET`: verify every delivery (failed ones are never passed on)", &f.secret), providerFlags(&f.provider, "auto", true)...)
	forwardingFlags := append(targetFlags("replay each delivery to this URL", []string{"HOOKLINE_TARGET"}, &f.targets),
		&ucli.IntFlag{Name: "port", Aliases: []string{"p"}, Usage: "smee-client's shortcut: the target is http://127.0.0.1:`PORT` (with --path)", Destination: &f.port},
		&ucli.StringFlag{Name: "path", Aliases: []string{"P"}, Usage: "smee-client's shortcut: the target's `PATH` on --port (default /)", Destination: &f.path},
		&ucli.StringFlag{Name: "target-secret", Usage: "re-sign deliveries with this `SECRET` for the target (implies --resign)", EnvVars: []string{"HOOKLINE_TARGET_SECRET"}, Destination: &o.targetSecret},
		&ucli.BoolFlag{Name: "resign", Usage: "re-sign deliveries for the target with --target-secret, or --secret", Destination: &o.resign},
		&ucli.BoolFlag{Name: "no-query", Usage: "do not forward the delivery's query string", Destination: &o.noQuery},
		targetHeaderFlag(&f.header),
		&ucli.StringSliceFlag{Name: "events", Usage: "only these `EVENTS` (event, event.action, event.* or *, comma-separated; as --route)", Destination: &f.events},
		&ucli.StringSliceFlag{Name: "ignore", Usage: "drop these `EVENTS` (event, event.action, event.* or *, comma-separated)", Destination: &f.ignore},
		&ucli.IntFlag{Name: "concurrency", Value: 1, Usage: "`N` deliveries handled at once (with several targets: by each); above 1 the order is not kept", Destination: &o.concurrency},
		&ucli.DurationFlag{Name: "timeout", Value: targetTimeout, Usage: "time limit (`DURATION`) of one request to the target", Destination: &o.timeout},
		retriesFlag(&f.retries),
	)
	stateFlags := []ucli.Flag{
		&ucli.StringFlag{Name: "save", Usage: "save every delivery as a capture file in `DIR`", Destination: &o.saveDir},
		&ucli.BoolFlag{Name: "save-scripts", Usage: "with --save, also write a shell script per delivery that re-sends its exact bytes with curl (and its body, as NAME.body)", Destination: &o.saveScripts},
		&ucli.StringFlag{Name: "failed-dir", Usage: "keep deliveries the target did not take in `DIR`, for hookline replay (default: DIR/failed with --save, else a folder per run in hookline's state directory)", Destination: &o.failedDir},
		&ucli.StringFlag{Name: "state-file", Usage: "store the position in the channel in `FILE` after every delivery, and resume from it (default with --url: one per channel in the state directory)", Destination: &o.stateFile},
		&ucli.BoolFlag{Name: "no-state", Usage: "keep no position in the channel: a restart starts from new deliveries", Destination: &o.noState},
		&ucli.StringFlag{Name: "last-event-id", Usage: "resume the channel after this event `ID`", Destination: &o.lastEventID},
		&ucli.DurationFlag{Name: "dedup-window", Value: dedupWindow, Usage: "skip a delivery whose id was seen within this `DURATION` (and among the last 10,000); 0 lets every repeat through", Destination: &o.dedupWindow},
	}
	githubFlagList := append(githubFlags("GitHub",
		"create a webhook on GitHub repository `OWNER/NAME` that sends to the channel, with a new secret, deleted when forward ends (repeatable)",
		"the same on GitHub organisation `ORG` (repeatable)",
		"point the GitHub App's webhook at the channel (--app-id and --app-key, or --app-env), put back when forward ends", &f.github),
		&ucli.BoolFlag{Name: "keep-hook", Usage: "keep the webhooks --repo, --org or --app pointed at the channel when forward ends", Destination: &o.keepHook})
	outputFlags := []ucli.Flag{
		&ucli.BoolFlag{Name: "json", Usage: "print one JSON object per delivery instead of trace lines", Destination: &o.jsonOut},
		&ucli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "also print headers, the payload and the target's whole answer", Destination: &o.verbose},
		&ucli.BoolFlag{Name: "quiet-filtered", Usage: "print nothing for a delivery --events or --ignore filtered out (the summary still counts it)", Destination: &o.quietFiltered},
		&ucli.StringFlag{Name: "health", Usage: "serve GET /healthz on `ADDR` (host:port): 200 while connected to the relay, 503 otherwise, with the last delivery and the counters as JSON; and GET /metrics for Prometheus", Destination: &o.health},
	}
	inspectorFlags := append(inspectFlags(&f.inspect, true),
		&ucli.BoolFlag{Name: "mcp", Usage: "serve the inspector's tools to a coding agent over MCP on standard input and output (the trace goes to standard error); the agent launches forward (docs/AGENTS.md)", Destination: &o.mcp},
		&ucli.BoolFlag{Name: "mcp-read-only", Usage: "with --mcp (or hookline mcp --read-only): leave out the tools that send (replays, test events)", Destination: &o.mcpReadOnly},
	)
	var all []ucli.Flag
	for _, g := range []struct {
		name  string
		flags []ucli.Flag
	}{
		{"relay", relayFlags}, {"GitHub", githubFlagList}, {"verification", verifyFlags}, {"forwarding", forwardingFlags},
		{"plugins", pluginFlags(&f.plugins)}, {"state and files", stateFlags}, {"output", outputFlags}, {"inspector", inspectorFlags},
	} {
		for _, f := range g.flags {
			setCategory(f, g.name)
		}
		all = append(all, g.flags...)
	}
	return all
}

// setCategory puts f under a heading of its command's help.
func setCategory(f ucli.Flag, category string) {
	switch f := f.(type) {
	case *ucli.StringFlag:
		f.Category = category
	case *ucli.BoolFlag:
		f.Category = category
	case *ucli.IntFlag:
		f.Category = category
	case *ucli.DurationFlag:
		f.Category = category
	case *ucli.StringSliceFlag:
		f.Category = category
	case *ucli.Int64Flag:
		f.Category = category
	}
}

// pluginFlagValues are what the plugin flags hold.
type pluginFlagValues struct {
	dir       string
	exec, env ucli.StringSlice
}

func pluginFlags(v *pluginFlagValues) []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "plugin-dir", Usage: "run executables in `DIR` named <event>, <event>.<action> or _any", Destination: &v.dir},
		&ucli.StringSliceFlag{Name: "exec", Usage: "run `COMMAND` (through the shell) for every delivery; repeatable", Destination: &v.exec},
		&ucli.StringSliceFlag{Name: "plugin-env", Usage: "pass environment variable `NAME` (or NAME=value) to plugins; repeatable", Destination: &v.env},
	}
}

func (v *pluginFlagValues) options() pluginOptions {
	return pluginOptions{dir: v.dir, exec: v.exec.Value(), env: v.env.Value()}
}

// termSafeWriter writes plugins' output with control characters escaped
// (termSafeLines): what a plugin prints cannot move the cursor, clear the
// screen or retitle the terminal.
type termSafeWriter struct{ w io.Writer }

func (t termSafeWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, termSafeLines(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// pluginHandlers returns the handlers that run the plugins o names; nil
// (no handlers) when it names none.
func pluginHandlers(o pluginOptions, logger *slog.Logger, s *streams) (*webhooks.Emitter, error) {
	handlers := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: logger})
	n, err := proxy.RegisterPlugins(handlers, proxy.PluginOptions{Dir: o.dir, Commands: o.exec, Logger: logger, Env: o.env, Output: termSafeWriter{s.err}})
	switch {
	case err != nil && o.dir != "" && n == 0:
		return nil, fmt.Errorf("--plugin-dir: %w", err)
	case err != nil:
		return nil, err
	case n == 0:
		return nil, nil
	}
	return handlers, nil
}

// checkTarget returns a usage error saying what is wrong with the URL
// given to flag, as proxy.New finds it.
func checkTarget(flag, target string) error {
	if _, err := proxy.New(proxy.Options{Targets: []proxy.Target{{URL: target}}}); err != nil {
		return usageErrorf("%s: %s", flag, strings.TrimPrefix(err.Error(), proxy.ErrInvalidOptions.Error()+": "))
	}
	return nil
}

// targetHeaderFlag is --header, for forward and replay (stripe-cli's
// --headers); send has its own, which can also remove a header.
func targetHeaderFlag(dst *ucli.StringSlice) ucli.Flag {
	return &ucli.StringSliceFlag{Name: "header", Usage: "set a header on every request to the target: `NAME=VALUE` or \"NAME: VALUE\" (a credential's value is never printed)", Destination: dst}
}

// parseHeaders reads --header values, NAME=VALUE or NAME: VALUE (forward,
// replay, send). An error names the header, never its value (it is often
// a credential).
func parseHeaders(values []string) (http.Header, error) {
	if len(values) == 0 {
		return nil, nil
	}
	h := http.Header{}
	for _, v := range values {
		i := strings.IndexAny(v, "=:")
		if i <= 0 {
			return nil, usageErrorf("--header: want NAME=VALUE or \"NAME: VALUE\", such as --header X-Env=staging (a value with neither = nor : is not shown: it may be a credential)")
		}
		name, value := strings.TrimSpace(v[:i]), strings.TrimSpace(v[i+1:])
		switch {
		case !header.IsToken(name):
			// Not shown: "Authorization Bearer abc:def" would show a credential.
			return nil, usageErrorf("--header: the text before the first = or : is not a valid header name (letters, digits and !#$%%&'*+-.^_`|~)")
		case !header.IsValue(value):
			return nil, usageErrorf("--header %s: the value has a character a header cannot carry (a line break or a control character)", name)
		}
		h.Add(name, value)
	}
	return h, nil
}

// headerNote lists the names of h for the start line, " (with X-Env,
// X-Api-Key)": never the values.
func headerNote(h http.Header) string {
	if len(h) == 0 {
		return ""
	}
	return " (with " + strings.Join(slices.Sorted(maps.Keys(h)), ", ") + ")"
}
