package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/fatih/color"
	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/inspect"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/rest"
	"github.com/hookline/hookline/webhooks/provider"
)

// traceZone is the zone of replay's and send's trace lines; nil means
// time.Local. Tests set UTC for output that does not depend on the machine.
var traceZone *time.Location

// stderrIsTerminal decides whether replay draws a progress bar; tests
// replace it.
var stderrIsTerminal = func(s *streams) bool { return isTerminal(s.err) }

// progressMin is the number of deliveries above which replay shows a
// progress bar (on a terminal).
const progressMin = 5

// safeRetries stands for a --retries not given: forward, replay and
// deliveries then retry only what surely did not reach the target's handler
// (proxy.SafeRetry), so that a handler with side effects never runs twice
// for one delivery; --retries N retries 5xx answers and timeouts too.
const safeRetries = -1

// retriesFlag is --retries for forward, replay and deliveries.
func retriesFlag(dst *int) ucli.Flag {
	return &ucli.IntFlag{Name: "retries", Usage: "retry a failed request to the target `N` times, 5xx answers and timeouts included (a handler may then run more than once); " +
		"default: only what surely never reached it (a target not up yet: forward waits until it is up, replay about 20 s; 429/503 with Retry-After)", Destination: dst}
}

// parseRetries checks --retries, given as n: the number given, or
// safeRetries when it was not.
func parseRetries(c *ucli.Context, n int) (int, error) {
	if !c.IsSet("retries") {
		return safeRetries, nil
	}
	if n < 0 {
		return 0, usageErrorf("--retries %d: must be 0 or more", n)
	}
	return n, nil
}

// replayOptions are the parsed flags of `hookline replay`.
type replayOptions struct {
	paths       []string
	targets     []proxy.Target // --target, --route
	secret      string
	resign      bool
	noQuery     bool
	header      http.Header // --header
	concurrency int
	timeout     time.Duration
	retries     int
	insecure    bool
	jsonOut     bool
	verbose     bool
	plugins     pluginOptions
	failedDir   string
	saveDir     string           // deliveries only: save each delivery there
	badSigHint  string           // deliveries only: what a bad signature means there
	inspect     *inspect.Options // --inspect (nil: none), at inspectAddr
	inspectAddr string
	timing      float64                      // --timing: 0 none, else the speed-up of the gaps as received (1: original)
	scheme      provider.Scheme              // --provider ("": auto)
	tolerance   time.Duration                // --tolerance (negative: none)
	schemeSec   map[provider.Scheme][]string // --secret PROVIDER=SECRET
}

func replayCommand(s *streams) *ucli.Command {
	var o replayOptions
	var f replayFlags
	return &ucli.Command{
		Name:      "replay",
		Usage:     "send saved deliveries (capture files) to a local server again",
		ArgsUsage: "PATH...",
		Description: `Reads capture files (written by forward --save, or by hand) and
directories of them (their *.json files), and sends every delivery to
--target in the order they were received, with the headers they had (minus
hop-by-hop ones) and their exact body bytes. One trace line per delivery, a
summary at the end; the exit code is 1 when any delivery failed.

A file that cannot be read (damaged, not a capture file) is reported on
its own line and skipped; the others are still sent, and the exit code is 1.
forward saves the deliveries its target did not take in a failed folder:
replay that folder once the target is back. Each delivery goes through the
same pipeline as forward's: a delivery id seen twice is sent once, plugins
(--plugin-dir, --exec) run as they would have, and with --failed-dir the
deliveries the target still did not take are saved again.

Without --target nothing is sent: replay prints what it would send (a dry
run). With --secret, the saved signatures are checked first and a delivery
whose signature does not match is not sent. With --secret and --resign, each
delivery is signed again with that secret instead, for a target that
checks a different secret than GitHub's.

   hookline replay --target http://127.0.0.1:3000/api/github/webhooks ./captures
   hookline replay ./captures/20260115T094500.000Z-push-*.json          # dry run`,
		Flags: append(append(append(append(append(secretFlags("webhook `SECRET`: check the saved signatures, or with --resign sign with it", &f.secret), providerFlags(&f.provider, "auto", true)...), pluginFlags(&f.plugins)...),
			targetFlags("send the deliveries to this URL (without it: dry run)", nil, &f.targets)...),
			&ucli.StringFlag{Name: "failed-dir", Usage: "save deliveries the target did not take again in `DIR`, to replay them later", Destination: &o.failedDir},
			&ucli.BoolFlag{Name: "resign", Usage: "replace each signature with one made with the secret", Destination: &o.resign},
			&ucli.BoolFlag{Name: "no-query", Usage: "do not add the deliveries' query strings to the target URL", Destination: &o.noQuery},
			targetHeaderFlag(&f.header),
			&ucli.IntFlag{Name: "concurrency", Value: 1, Usage: "deliveries sent at once; above 1 the order is not kept", Destination: &o.concurrency},
			&ucli.DurationFlag{Name: "timeout", Value: targetTimeout, Usage: "time limit of one request to the target", Destination: &o.timeout},
			retriesFlag(&f.retries),
			insecureFlag(&o.insecure),
			&ucli.BoolFlag{Name: "json", Usage: "print one JSON object per delivery instead of trace lines", Destination: &o.jsonOut},
			&ucli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "also print the headers and the payload", Destination: &o.verbose},
			&ucli.StringFlag{Name: "timing", Value: "none", Usage: "`HOW` to space the deliveries: none (back to back), original (the gaps they were received with), or 10x (ten times faster)", Destination: &f.timing},
		), inspectFlags(&f.inspect, false)...),
		Action: func(c *ucli.Context) error {
			opts, err := parseReplay(c, o, &f)
			if err != nil {
				return err
			}
			return errRedacted(runReplay(c.Context, opts, s), opts.secret)
		},
	}
}

// replayFlags are what the flags shared by replay and deliveries hold that
// are not options yet: read and checked by parse.
type replayFlags struct {
	secret   secretFlagValues
	provider providerFlagValues
	timing   string
	plugins  pluginFlagValues
	inspect  inspectFlagValues
	header   ucli.StringSlice
	retries  int
	targets  targetFlagValues // replay's --target, --route (deliveries has its own --target)
}

// parse fills o's secret, plugins, inspector, header and retries from f.
func (f *replayFlags) parse(c *ucli.Context, o *replayOptions) error {
	var err error
	if o.secret, err = readSecret(c, &f.secret); err != nil {
		return err
	}
	if o.inspect, err = f.inspect.options(); err != nil {
		return err
	}
	if o.scheme, err = f.provider.scheme(); err != nil {
		return err
	}
	// A capture is replayed later than it was signed: no timestamp check
	// unless --tolerance is given.
	o.tolerance = -1
	if c.IsSet("tolerance") {
		o.tolerance = f.provider.checkTolerance()
	}
	_, o.schemeSec, _ = f.secret.split()
	o.inspectAddr = f.inspect.addr
	o.plugins = f.plugins.options()
	if o.header, err = parseHeaders(f.header.Value()); err != nil {
		return err
	}
	o.retries, err = parseRetries(c, f.retries)
	return err
}

func parseReplay(c *ucli.Context, o replayOptions, f *replayFlags) (replayOptions, error) {
	o.paths = c.Args().Slice()
	if err := f.parse(c, &o); err != nil {
		return o, err
	}
	switch {
	case len(o.paths) == 0:
		return o, usageErrorf("replay needs capture files or directories: hookline replay [--target URL] PATH...")
	case o.resign && o.secret == "":
		return o, usageErrorf("--resign needs the secret to sign with: give --secret, --secret-file or set %s", secretEnv)
	case o.concurrency < 1:
		return o, usageErrorf("--concurrency %d: must be at least 1", o.concurrency)
	case o.timeout <= 0:
		return o, usageErrorf("--timeout %v: must be positive", o.timeout)
	}
	switch t := strings.TrimSpace(f.timing); {
	case t == "none" || t == "":
	case t == "original":
		o.timing = 1
	case strings.HasSuffix(t, "x"):
		n, err := strconv.ParseFloat(strings.TrimSuffix(t, "x"), 64)
		if err != nil || n <= 0 || math.IsInf(n, 0) {
			return o, usageErrorf("--timing %q: a speed-up is a positive number and x, such as 10x", t)
		}
		o.timing = n
	default:
		return o, usageErrorf("--timing %q: want none, original or a speed-up such as 10x", t)
	}
	if o.timing > 0 && o.concurrency > 1 {
		return o, usageErrorf("--timing keeps the order and the gaps: it sends one at a time (drop --concurrency)")
	}
	var err error
	if o.targets, err = f.targets.parse(); err != nil {
		return o, err
	}
	return o, nil
}

// targetClient returns the rest client forward, replay and send send to
// the target with: timeout per attempt, retries (safeRetries:
// proxy.SafeRetry(false), or for forward's lanes SafeRetry(true): until the target is up), over transport (nil for net/http's default). note, if
// not nil, is told of each retry before its wait: a countdown the user sees
// while the target is not up yet.
func targetClient(timeout time.Duration, retries int, lanes bool, transport http.RoundTripper, note func(string)) *rest.Client {
	policy := proxy.SafeRetry(false)
	switch {
	case retries != safeRetries:
		policy = &rest.RetryPolicy{MaxAttempts: retries + 1}
	case lanes:
		// Each target's lane waits for its target to be up, holding its
		// deliveries; --health and the summary count them as waiting.
		policy = proxy.SafeRetry(true)
	}
	if note != nil {
		of := fmt.Sprintf(" of %d", policy.MaxAttempts-1)
		if lanes && retries == safeRetries {
			of = ", until it is up" // SafeRetry(true) has no count
		}
		policy.OnRetry = func(n int, wait time.Duration, resp *http.Response, err error) {
			why := "the target did not answer"
			switch {
			case resp != nil:
				why = "the target answered " + resp.Status
			case errors.Is(err, syscall.ECONNREFUSED):
				why = "the target is not up (connection refused)"
			}
			note(fmt.Sprintf("%s; retrying in %s (retry %d%s)", why, wait.Round(100*time.Millisecond), n, of))
		}
	}
	return &rest.Client{HTTPClient: &http.Client{Timeout: timeout, Transport: transport}, Retry: policy}
}

// replayer sends (or, without a target, describes) each delivery and
// prints its result.
type replayer struct {
	o      replayOptions
	s      *streams
	c      *proxy.Client
	dry    bool         // no target: nothing is sent
	dryRun proxy.Target // what a dry run describes the requests for
	tr     *tracer
	bar    *progressBar // nil when not shown

	mu         sync.Mutex                          // the output
	kept       map[*delivery.Delivery]capture.File // each delivery's capture file
	unreadable int
	notSent    int // deliveries the interrupt caught before their turn
}

// notSent reports whether res went to targets none of which it was sent
// to: the run ended before its turn (proxy's TargetResult.Interrupted with
// no attempt).
func notSent(res proxy.Result) bool {
	for _, t := range res.Targets {
		if !t.Interrupted || len(t.Attempts) > 0 {
			return false
		}
	}
	return len(res.Targets) > 0
}

func runReplay(ctx context.Context, o replayOptions, s *streams) error {
	ds, loadErrs := capture.LoadAll(o.paths...)
	for i, err := range loadErrs {
		if errors.Is(err, capture.ErrNotCapture) {
			loadErrs[i] = fmt.Errorf("%w; a webhook payload? send it with: hookline send --event EVENT --payload FILE", err)
		}
	}
	if len(ds) == 0 && len(loadErrs) > 0 {
		if len(loadErrs) == 1 {
			return loadErrs[0]
		}
		return fmt.Errorf("no capture file could be read:\n%w", errors.Join(loadErrs...))
	}
	red := paint(s.errColor, color.FgRed)
	for _, err := range loadErrs {
		fmt.Fprintf(s.err, "%s %v\n", red.Sprint("skipped:"), err)
	}
	return replayDeliveries(ctx, o, ds, len(loadErrs), s)
}

// replayDeliveries runs ds through the pipeline (replay's and deliveries'):
// unreadable is how many could not be read, for the summary.
func replayDeliveries(ctx context.Context, o replayOptions, ds []capture.File, unreadable int, s *streams) error {
	r := &replayer{o: o, s: s, unreadable: unreadable, kept: make(map[*delivery.Delivery]capture.File, len(ds))}
	list := make([]*delivery.Delivery, len(ds))
	for i := range ds {
		list[i] = &ds[i].Delivery
		r.kept[list[i]] = ds[i]
	}
	popts := proxy.Options{
		Secret: o.secret, SchemeSecrets: o.schemeSec, Provider: o.scheme, Tolerance: o.tolerance,
		Targets:    withSettings(o.targets, o.header, o.noQuery, ""),
		HTTPClient: targetClient(o.timeout, o.retries, false, httpTransport(o.insecure, s), func(msg string) { fmt.Fprintln(s.err, msg) }),
		FailedDir:  o.failedDir, SaveDir: o.saveDir, DedupWindow: -1,
		Logger:      slog.New(slog.DiscardHandler), // every delivery gets its own line
		Concurrency: o.concurrency, OnResult: r.report,
	}
	var ins *inspect.Inspector
	if o.inspect != nil {
		if o.targets == nil {
			return usageErrorf("--inspect shows what the target answered: give --target too")
		}
		iopts := *o.inspect
		iopts.Secret, iopts.TargetURL = o.secret, firstOf(targetURLs(o.targets))
		iopts.Resend = func(ctx context.Context, d *delivery.Delivery) proxy.Result { return r.c.Handle(ctx, d) }
		var err error
		var forget func()
		if ins, _, forget, err = startInspector(ctx, o.inspectAddr, iopts, s); err != nil {
			return err
		}
		defer forget()
		popts.OnResult = func(res proxy.Result) {
			r.report(res)
			ins.Add(res)
		}
	}
	if len(ds) > 1 {
		popts.DedupWindow = 0 // the default window: an id seen twice is sent once
	}
	if o.resign {
		// The secret is the target's, not the sender's: the saved
		// signature is replaced, not checked.
		popts.Secret, popts.SchemeSecrets = "", nil
		popts.Targets = withSettings(o.targets, o.header, o.noQuery, o.secret)
	}
	r.dry = o.targets == nil
	r.dryRun = withSettings([]proxy.Target{{URL: dryRunTarget}}, o.header, o.noQuery, "")[0]
	if o.resign {
		r.dryRun.ResignSecret = o.secret
	}
	if !r.dry {
		handlers, err := pluginHandlers(o.plugins, newLogger(s.err), s)
		if err != nil {
			return err
		}
		if handlers != nil {
			popts.Handlers = handlers
			popts.AllowUnverified = true // without --secret the trace says "unverified"; the user chose it
		}
		fmt.Fprintf(s.err, "replaying %s → %s\n", plural(len(ds), "delivery", "deliveries"), describeTargets(o.targets))
	} else {
		fmt.Fprintf(s.err, "no --target: a dry run of %s, nothing is sent\n", plural(len(ds), "delivery", "deliveries"))
	}
	c, err := proxy.New(popts)
	if err != nil {
		return usageErrorf("%v", err)
	}
	r.c = c
	// In a dry run the request block below replaces the tracer's details.
	r.tr = newTracer(s.out, s.err, s.outColor, o.jsonOut, o.verbose && !r.dry, traceZone)
	defer r.tr.flush()
	r.tr.secrets = []string{o.secret}
	if len(ds) > progressMin && stderrIsTerminal(s) {
		r.bar = &progressBar{w: s.err, total: len(ds), label: "replaying"}
		r.bar.draw()
	}

	if o.timing > 0 {
		replayTimed(ctx, c, list, o.timing, s)
	} else {
		_ = c.Replay(ctx, list) // interrupted: the summary counts what is left
	}
	r.bar.clear()
	err = r.summary(len(ds))
	if ins != nil && ctx.Err() == nil {
		fmt.Fprintln(s.err, "the inspector stays open to look at them and replay: Ctrl-C quits")
		<-ctx.Done()
	}
	return err
}

// report prints one result (the Client's OnResult). A note is why the
// capture was kept in a failed folder: shown under a delivery that this
// replay did not verify, so that one kept for a bad signature is never sent
// on silently.
func (r *replayer) report(res proxy.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if notSent(res) {
		r.notSent++ // interrupted before its turn: the summary counts it
		return
	}
	file := r.kept[res.Delivery]
	if res.Action == "" {
		res.Action = file.Action
	}
	note := file.Note
	r.bar.clear()
	r.tr.result(res)
	if note != "" && !r.o.jsonOut && res.Verification != proxy.VerificationPassed && !res.Filtered {
		line := "    " + r.tr.yellow.Sprint("kept because: "+termSafe(note))
		if res.Verification == proxy.VerificationSkipped && strings.HasPrefix(note, "not passed on:") {
			line += "\n    " + r.tr.yellow.Sprint("sent unverified: give --secret-file FILE to check it first")
		}
		r.tr.write(line + "\n")
	}
	if r.dry && !r.o.jsonOut && res.Verification != proxy.VerificationFailed && !res.Duplicate {
		r.writeDryRun(res.Delivery)
	}
	r.bar.step()
}

// dryRunTarget stands for the target in a dry run: only the method, query
// and headers of the request built for it are shown.
const dryRunTarget = "http://target/"

// writeDryRun prints the request replay would send for d.
func (r *replayer) writeDryRun(d *delivery.Delivery) {
	dim := paint(r.s.outColor, color.Faint)
	var b strings.Builder
	req, err := r.c.ForwardRequest(context.Background(), d, r.dryRun)
	if err != nil {
		fmt.Fprintf(&b, "    %s\n", paint(r.s.outColor, color.FgRed).Sprint("cannot build the request: "+err.Error()))
		r.tr.write(b.String())
		return
	}
	fmt.Fprintf(&b, "    %s %s", dim.Sprint("would send"), req.Method)
	if req.URL.RawQuery != "" {
		fmt.Fprintf(&b, " ?%s", req.URL.RawQuery)
	}
	fmt.Fprintf(&b, " %s\n", dim.Sprintf("(%s)", plural(len(d.Body), "byte", "bytes")))
	writeHeaders(&b, dim, req.Header, "    ")
	if r.o.verbose {
		var pretty bytes.Buffer
		if utf8.Valid(d.Body) && json.Indent(&pretty, d.Body, "    ", "  ") == nil {
			fmt.Fprintf(&b, "    %s\n", pretty.String())
		} else if len(d.Body) > 0 {
			fmt.Fprintf(&b, "    %q\n", shorten(string(d.Body), 2048))
		}
	}
	r.tr.write(b.String())
}

// summary prints the counts on stderr and returns the command's error: nil
// when every delivery was replayed (or, in a dry run, could be).
func (r *replayer) summary(total int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.c.Stats()
	done := int(st.Duplicates+st.Filtered+st.Verified+st.VerifyFailed+st.Unverified) - r.notSent // each once
	delivered, targetFails, badSigs, verified := int(st.Forwarded), int(st.TargetFails), int(st.VerifyFailed), int(st.Verified)
	bold := paint(r.s.errColor, color.Bold)
	red := paint(r.s.errColor, color.FgRed, color.Bold)
	green := paint(r.s.errColor, color.FgGreen)
	yellow := paint(r.s.errColor, color.FgYellow)
	var b strings.Builder
	if r.dry {
		fmt.Fprintf(&b, "%s %d of %d would be sent", bold.Sprint("dry run:"), done-badSigs, total)
	} else {
		shown := fmt.Sprint(delivered)
		if delivered > 0 {
			shown = green.Sprint(shown)
		}
		fmt.Fprintf(&b, "%s %s of %d delivered", bold.Sprint("summary:"), shown, total)
	}
	if verified > 0 {
		fmt.Fprintf(&b, ", %d verified", verified)
	}
	if targetFails > 0 {
		fmt.Fprintf(&b, ", %s", red.Sprint(plural(targetFails, "target failure", "target failures")))
	}
	if badSigs > 0 {
		fmt.Fprintf(&b, ", %s", red.Sprint(plural(badSigs, "bad signature", "bad signatures")+" (not sent)"))
		if r.o.badSigHint != "" {
			b.WriteString(" " + r.o.badSigHint)
		}
	}
	if left := total - done; left > 0 {
		fmt.Fprintf(&b, ", %s", yellow.Sprintf("%d not replayed (interrupted)", left))
	}
	if r.unreadable > 0 {
		fmt.Fprintf(&b, ", %s", red.Sprint(plural(r.unreadable, "unreadable file", "unreadable files")+" skipped"))
	}
	if r.dry && done > badSigs {
		b.WriteString("; give --target URL to send them")
	}
	fmt.Fprintln(r.s.err, b.String())

	failed := targetFails + badSigs
	switch {
	case done < total:
		return fmt.Errorf("interrupted: %d of %d deliveries not replayed", total-done, total)
	case failed > 0:
		return fmt.Errorf("%d of %s failed", failed, plural(total, "delivery", "deliveries"))
	case r.unreadable > 0:
		return fmt.Errorf("%s could not be read (see above)", plural(r.unreadable, "capture file", "capture files"))
	}
	return nil
}

// plural returns "1 delivery" or "2 deliveries".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// progressBar draws "replaying [=====     ] 12/40" on one terminal line. A
// nil *progressBar draws nothing, so callers need not check. It is not safe
// for concurrent use: replayer calls it under its mutex.
type progressBar struct {
	w           io.Writer
	label       string
	total, done int
}

const progressWidth = 24

func (p *progressBar) draw() {
	if p == nil || p.total == 0 {
		return
	}
	filled := progressWidth * p.done / p.total
	fmt.Fprintf(p.w, "\r\x1b[K%s [%s%s] %d/%d", p.label,
		strings.Repeat("=", filled), strings.Repeat(" ", progressWidth-filled), p.done, p.total)
}

// step counts one more done and redraws.
func (p *progressBar) step() {
	if p == nil {
		return
	}
	p.done++
	p.draw()
}

// clear erases the bar's line, before other output and at the end.
func (p *progressBar) clear() {
	if p == nil {
		return
	}
	io.WriteString(p.w, "\r\x1b[K")
}

// replayTimed sends list one at a time, each after the gap it was received
// with (ReceivedAt) divided by speed, announcing a wait of a second or
// more; it stops when ctx ends.
func replayTimed(ctx context.Context, c *proxy.Client, list []*delivery.Delivery, speed float64, s *streams) {
	for i, d := range list {
		if i > 0 && !d.ReceivedAt.IsZero() && !list[i-1].ReceivedAt.IsZero() {
			gap := time.Duration(float64(d.ReceivedAt.Sub(list[i-1].ReceivedAt)) / speed)
			if gap >= time.Second {
				fmt.Fprintf(s.err, "next delivery in %s (%d of %d)\n", gap.Round(time.Millisecond), i+1, len(list))
			}
			if gap > 0 {
				t := time.NewTimer(gap)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
		c.Replay(ctx, []*delivery.Delivery{d}) // as the rest of replay: a repeated delivery id is skipped
	}
}
