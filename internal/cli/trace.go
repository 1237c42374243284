package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fatih/color"
	"golang.org/x/term"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/webhooks/provider"
)

// tracer prints one line per delivery (or one JSON object with --json) and
// the connection state changes. It is safe for concurrent use.
type tracer struct {
	mu      sync.Mutex
	out     io.Writer // the trace: buf, when there is one
	buf     *bufio.Writer
	flushAt *time.Timer // set while buf holds lines
	last    time.Time   // when the last line was written to out
	info    io.Writer   // state changes and the summary
	json    bool
	verbose bool
	loc     *time.Location
	width   int // the columns a trace line is made to fit (traceWidth)

	green, yellow, red, dim, bold *color.Color
	families                      map[string]*color.Color

	failed      []string    // capture files of deliveries the target did not take
	secrets     []string    // never printed, even when a target echoes them
	connected   bool        // a connection succeeded during this run
	hinted      bool        // the unreachable-relay hint was printed
	hinted404   bool        // the target-path hint was printed
	saidEmpty   bool        // the relay's channel has had no delivery: said once
	lastFailure time.Time   // when the last connection failure was printed
	silent      *time.Timer // says so when a connection attempt has no answer yet
	failedCount int
	failedWhy   map[string]int    // why each was kept: a status, "no answer", "bad signature"
	laneFailed  map[string]string // several targets: name → URL of those with deliveries kept
	topFailed   int               // kept in the failed folder itself (one target, or a bad signature)
	// forward is set by forward, whose deliveries exist nowhere else: a
	// delivery neither forwarded nor saved is shown as lost (replay's are
	// still in their capture files), and an answer GitHub would record as
	// failed is marked (a replay's answer is not GitHub's concern).
	forward bool
	// events is the --events list, for the line of a delivery it filtered
	// out; quietFiltered (--quiet-filtered) prints no line for those.
	events        []string
	quietFiltered bool
}

// traceFlushDelay is the longest a trace line waits in the buffer when
// the trace goes to a file or a pipe: a burst of deliveries then makes one
// write a tenth of a second rather than one a delivery, and a reader of
// the pipe still sees each line within a tenth of a second.
const traceFlushDelay = 100 * time.Millisecond

// traceBurstGap tells a burst from a user's rate: a line that comes at
// least this long after the one before it is written at once, with what
// is buffered. Below a thousand lines a second a write per line costs
// less than the timer it saves: at 20 deliveries a second that timer woke
// the forwarder ten times a second, one wake-up for two deliveries, and
// took 8 % of its CPU (cmd/hookline-bench, docs/PERFORMANCE.md).
const traceBurstGap = time.Millisecond

// written arranges for what was just written to t.out to be flushed. The
// caller holds t.mu.
func (t *tracer) written() {
	now := time.Now()
	alone := now.Sub(t.last) >= traceBurstGap
	t.last = now
	switch {
	case t.buf == nil:
	case alone:
		t.flushLocked() // and what a burst before it left
	case t.flushAt == nil:
		t.flushAt = time.AfterFunc(traceFlushDelay, t.flush)
	}
}

// write adds text of the command's own to the trace, in order with its
// lines.
func (t *tracer) write(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	io.WriteString(t.out, text)
	t.written()
}

// flush writes out the buffered trace lines. Commands call it before they
// return.
func (t *tracer) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked()
}

func (t *tracer) flushLocked() {
	if t.flushAt != nil {
		t.flushAt.Stop()
		t.flushAt = nil
	}
	if t.buf != nil && t.buf.Buffered() > 0 {
		t.buf.Flush()
	}
}

// maxListedFailed bounds the failed captures the summary lists by name.
const maxListedFailed = 20

func newTracer(out, info io.Writer, colorOut bool, jsonLines, verbose bool, loc *time.Location) *tracer {
	if loc == nil {
		loc = time.Local
	}
	t := &tracer{
		out: out, info: info, json: jsonLines, verbose: verbose, loc: loc, width: traceWidth(out),
		green:  paint(colorOut, color.FgGreen),
		yellow: paint(colorOut, color.FgYellow),
		red:    paint(colorOut, color.FgRed, color.Bold),
		dim:    paint(colorOut, color.Faint),
		bold:   paint(colorOut, color.Bold),
	}
	if !isTerminal(out) {
		// A file or a pipe gets the trace a burst at a time (see
		// traceFlushDelay); a terminal, line by line.
		t.buf = bufio.NewWriterSize(out, 32<<10)
		t.out = t.buf
	}
	t.families = map[string]*color.Color{
		"issues":   paint(colorOut, color.FgCyan),
		"pull":     paint(colorOut, color.FgMagenta),
		"code":     paint(colorOut, color.FgBlue),
		"ci":       paint(colorOut, color.FgYellow),
		"release":  paint(colorOut, color.FgGreen),
		"security": paint(colorOut, color.FgRed),
		"admin":    paint(colorOut, color.FgHiBlue),
		"other":    paint(colorOut, color.FgWhite),
	}
	return t
}

// family groups an event name for its colour.
func family(event string) string {
	switch {
	case strings.HasPrefix(event, "issue"), event == "label", event == "milestone", strings.HasPrefix(event, "discussion"), event == "sub_issues":
		return "issues"
	case strings.HasPrefix(event, "pull_request"), event == "merge_group":
		return "pull"
	case event == "push", event == "create", event == "delete", event == "commit_comment", event == "fork", event == "gollum", event == "status":
		return "code"
	case strings.HasPrefix(event, "workflow"), strings.HasPrefix(event, "check_"), strings.HasPrefix(event, "deployment"), event == "page_build":
		return "ci"
	case event == "release", event == "package", event == "registry_package":
		return "release"
	case strings.Contains(event, "alert"), strings.Contains(event, "advisory"), strings.Contains(event, "secret_scanning"), event == "security_and_analysis":
		return "security"
	case strings.HasPrefix(event, "installation"), event == "ping", event == "meta", event == "github_app_authorization", strings.HasPrefix(event, "repository"), event == "organization", event == "member", event == "membership", event == "team", event == "team_add":
		return "admin"
	}
	return "other"
}

func shortID(r proxy.Result) string {
	id := r.Delivery.ID
	if id == "" {
		id = "#" + r.Delivery.EventID
	}
	if len(id) > 8 {
		id = id[:8]
	}
	return id
}

func eventName(r proxy.Result) string {
	name := r.Delivery.Event
	if name == "" {
		name = "(no event header)"
	}
	if r.Action != "" {
		name += "." + r.Action
	}
	return name
}

// rule says which rule kept r from its targets (filtered, a duplicate,
// routed nowhere), in the words of forward's flags; empty for a delivery
// that went on.
func (t *tracer) rule(r proxy.Result) string {
	switch {
	case r.Handshake != "" && r.HandshakeAnswered:
		return "handshake (" + r.Handshake + "), answered by the relay; not passed on"
	case r.Handshake == "hub.challenge":
		return "handshake (hub.challenge), not answered: a hookline relay answers it on a channel with the hub's verify token (--hub-verify-token); not passed on"
	case r.Handshake != "":
		return "handshake (" + r.Handshake + "), not answered: a hookline relay answers it on a channel bound to the signing secret (--verify-on-relay, serve --channel-secrets); not passed on"
	case r.Filtered && r.FilteredBy != "":
		return "filtered by --ignore " + r.FilteredBy
	case r.Filtered && len(t.events) > 0:
		return "filtered: not in --events " + strings.Join(t.events, ",")
	case r.Filtered:
		return "filtered: not in --events"
	case r.Duplicate && r.DoneBefore:
		return "done before, skipped (--state-file)"
	case r.Duplicate:
		return "duplicate id, skipped (--dedup-window)"
	case r.Unrouted:
		return "unrouted: no --route takes it and there is no --target"
	}
	return ""
}

// traceAnswerBytes is how much of a target's answer the trace shows with
// -v (the inspector shows all the Result keeps).
const traceAnswerBytes = 4 << 10

// result prints one delivery: a line, or a JSON object with --json.
func (t *tracer) result(r proxy.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.FailedFile != "" {
		t.keptFailed(r.FailedFile, "bad signature")
		t.topFailed++
	}
	for _, tr := range r.Targets {
		if tr.FailedFile == "" {
			continue
		}
		if tr.Name == "" { // one unnamed target: the failed folder itself
			t.keptFailed(tr.FailedFile, failedWhy(tr))
			t.topFailed++
			continue
		}
		t.keptFailed(tr.FailedFile, tr.Name+" "+failedWhy(tr))
		if t.laneFailed == nil {
			t.laneFailed = map[string]string{}
		}
		t.laneFailed[tr.Name] = tr.URL
	}
	if r.Filtered && t.quietFiltered {
		return
	}
	if t.json {
		t.writeJSON(r)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-8s %s", t.dim.Sprint(t.clock(r.Received)), termSafe(shortID(r)),
		t.families[family(r.Delivery.Event)].Sprintf("%-22s", termSafe(eventName(r))))
	if r.Filtered || r.Duplicate || r.Handshake != "" {
		c := t.dim
		if r.Duplicate || r.Handshake != "" && !r.HandshakeAnswered {
			c = t.yellow
		}
		fmt.Fprintf(&b, " %s\n", c.Sprint(termSafe(t.rule(r))))
		io.WriteString(t.out, b.String())
		t.written()
		return
	}
	if r.Delivery.BodySource == delivery.BodyEdited {
		b.WriteString(" " + t.yellow.Sprint("edited"))
	}
	// Another sender than GitHub is named: "✓ verified stripe".
	scheme := ""
	if r.Scheme != "" && r.Scheme != provider.GitHub {
		scheme = " " + string(r.Scheme)
	}
	switch r.Verification {
	case proxy.VerificationPassed:
		b.WriteString(" " + t.green.Sprint("✓ verified"+scheme))
	case proxy.VerificationFailed:
		b.WriteString(" " + t.red.Sprint("✗ bad signature"+scheme))
	default:
		b.WriteString(" " + t.dim.Sprint("· unverified"))
	}
	for i, h := range r.Handlers {
		sep := ","
		if i == 0 {
			sep = " plugins:"
		}
		if h.Err == nil {
			fmt.Fprintf(&b, "%s %s %s", sep, termSafe(h.Name), t.green.Sprint("ok"))
		} else {
			fmt.Fprintf(&b, "%s %s %s", sep, termSafe(h.Name), t.red.Sprint("failed"))
		}
	}
	if r.HandlerErr != nil && len(r.Handlers) == 0 {
		b.WriteString(" " + t.red.Sprint("handlers failed"))
	}
	if len(r.Targets) > 0 {
		b.WriteString(" → ")
		if m := r.Delivery.Method; m != "" && m != http.MethodPost {
			b.WriteString(t.yellow.Sprint(m) + " ") // a gosmee relay recorded another method
		}
	}
	for i, tr := range r.Targets {
		if i > 0 {
			b.WriteString(t.dim.Sprint(" · "))
		}
		if tr.Name != "" {
			b.WriteString(termSafe(tr.Name) + " ")
		}
		if tr.Skipped {
			b.WriteString(t.dim.Sprint("had it"))
			continue
		}
		t.writeVerdict(&b, tr)
	}
	if r.Unrouted {
		b.WriteString(" " + t.yellow.Sprint("→ "+t.rule(r)))
	}
	if r.Waited >= waitedShown {
		b.WriteString(" " + t.yellow.Sprintf("(waited %s behind the one before)", formatDuration(r.Waited)))
	}
	if r.Redelivery {
		b.WriteString(" " + t.dim.Sprint("(redelivery)"))
	}
	if r.Replay {
		b.WriteString(" " + t.dim.Sprint("(replayed)"))
	}
	// Who and where last, shortened to what is left of 80 columns: the
	// outcome never scrolls off or wraps.
	var who []string
	if r.Repository != "" {
		who = append(who, termSafe(r.Repository))
	}
	if r.Sender != "" {
		who = append(who, "@"+termSafe(r.Sender))
	}
	if len(who) > 0 {
		b.WriteString(" " + t.dim.Sprint(shorten(strings.Join(who, " "), max(t.width-visibleWidth(b.String())-1, minWho))))
	}
	b.WriteString("\n")
	// Details on the lines below, indented: why something failed.
	if r.Verification == proxy.VerificationFailed || (r.VerifyNote != "" && t.verbose) {
		fmt.Fprintf(&b, "    %s\n", termSafe(r.VerifyNote))
	} else if r.VerifyNote != "" {
		fmt.Fprintf(&b, "    %s\n", t.yellow.Sprint("warning: "+termSafe(r.VerifyNote)))
	}
	if r.HandlerErr != nil {
		for _, line := range strings.Split(r.HandlerErr.Error(), "\n") {
			fmt.Fprintf(&b, "    %s\n", t.red.Sprint(termSafe(line)))
		}
	}
	for _, tr := range r.Targets {
		t.writeTargetDetails(&b, r, tr)
	}
	if r.SaveErr != nil {
		fmt.Fprintf(&b, "    %s\n", t.red.Sprint("not saved: "+termSafe(r.SaveErr.Error())))
	}
	t.writeFailedFile(&b, r.FailedFile, r.FailedErr)
	for _, tr := range r.Targets {
		t.writeFailedFile(&b, tr.FailedFile, tr.FailedErr)
	}
	if t.forward && r.Lost() {
		fmt.Fprintf(&b, "    %s\n", t.red.Sprint("LOST: the target did not take it and no capture file keeps it (the relay may still have it)"))
	}
	if t.verbose {
		t.writeDetails(&b, r)
		for _, tr := range r.Targets {
			if tr.Err == nil && !tr.Skipped {
				// The target's answer: status and headers (its body is above).
				fmt.Fprintf(&b, "    %s %d %s\n", t.dim.Sprint(targetLabel(tr)+" answered"), tr.Status, http.StatusText(tr.Status))
				writeHeaders(&b, t.dim, tr.Header, "      ")
			}
		}
	}
	io.WriteString(t.out, b.String())
	t.written()
}

// targetLabel names a target in the detail lines: "the target", or
// "the target worker" among several.
func targetLabel(tr *proxy.TargetResult) string {
	if tr.Name == "" {
		return "the target"
	}
	return "the target " + termSafe(tr.Name)
}

// failedWhy is why a target's delivery was kept for a replay: its status,
// or "no answer".
func failedWhy(tr *proxy.TargetResult) string {
	switch {
	case tr.Interrupted && len(tr.Attempts) == 0:
		return "not sent: stopped before its turn"
	case tr.Interrupted:
		return cutShort
	case tr.Err != nil:
		return "no answer"
	}
	return strconv.Itoa(tr.Status)
}

// cutShort is why a delivery in flight at the second Ctrl-C (or the end of
// the drain) was kept: the request was sent, so the handler may have run.
const cutShort = "cut short at the stop: it may have reached your handler"

// keptFailed counts a delivery kept in the failed folder, for the summary.
func (t *tracer) keptFailed(file, why string) {
	t.failedCount++
	if len(t.failed) < maxListedFailed {
		t.failed = append(t.failed, file)
	}
	if t.failedWhy == nil {
		t.failedWhy = map[string]int{}
	}
	t.failedWhy[why]++
}

// writeVerdict writes a target's outcome on the trace line: its status and
// time, with the attempts and GitHub's verdict.
func (t *tracer) writeVerdict(b *strings.Builder, tr *proxy.TargetResult) {
	switch {
	case tr.Interrupted:
		b.WriteString(t.yellow.Sprint("interrupted"))
	case tr.Err != nil:
		b.WriteString(t.red.Sprint("unreachable"))
	case tr.Status >= 500:
		b.WriteString(t.red.Sprintf("%d", tr.Status))
	case tr.Status >= 400:
		b.WriteString(t.yellow.Sprintf("%d", tr.Status))
	case tr.Status >= 200 && tr.Status < 300:
		b.WriteString(t.green.Sprintf("%d", tr.Status))
	default:
		b.WriteString(t.yellow.Sprintf("%d", tr.Status))
	}
	b.WriteString(" " + formatDuration(tr.Duration))
	if n := len(tr.Attempts); n > 1 {
		fmt.Fprintf(b, " after %d attempts", n)
	}
	if t.forward && tr.OK() && tr.GitHubWouldFail() {
		b.WriteString(" " + t.yellow.Sprint("⚠ too slow for GitHub"))
	}
}

// writeTargetDetails writes the lines below the trace line about one
// target's answer: what it said when it refused, a hint for a 404, why it
// could not be reached, GitHub's verdict.
func (t *tracer) writeTargetDetails(b *strings.Builder, r proxy.Result, tr *proxy.TargetResult) {
	if tr.Skipped {
		return
	}
	label := targetLabel(tr)
	if tr.Err == nil && !tr.OK() && len(tr.Body) > 0 {
		// A target may echo the request: no secret, no credential.
		body := []byte(redactEcho(string(tr.Body[:min(len(tr.Body), traceAnswerBytes)]), t.secrets, r.Delivery.Headers))
		said := termSafe(firstLine(body, 120)) // -v: the whole (first 4 KiB)
		if t.verbose {
			said = strings.ReplaceAll(termSafeLines(strings.TrimSpace(string(body))), "\n", "\n    ")
		}
		fmt.Fprintf(b, "    %s %s\n", t.dim.Sprint(label+" said:"), said)
	}
	if tr.Err == nil && tr.Status == http.StatusNotFound && !t.hinted404 {
		// Once a run: the usual cause is the path of --target.
		t.hinted404 = true
		path := "/"
		if u, err := url.Parse(tr.URL); err == nil && u.Path != "" {
			path = u.Path
		}
		fmt.Fprintf(b, "    %s\n", t.yellow.Sprintf("hint: %s has nothing at %s: check the path in --target (Probot and @octokit/webhooks' middleware listen on /api/github/webhooks)", label, termSafe(path)))
	}
	if tr.Err != nil {
		prefix := ""
		if tr.Name != "" {
			prefix = termSafe(tr.Name) + ": "
		}
		msg := tr.Err.Error()
		if tr.Interrupted { // "context canceled" says nothing of the handler
			msg = failedWhy(tr)
		}
		fmt.Fprintf(b, "    %s\n", t.red.Sprint(prefix+termSafe(msg)))
		if hint := certHint(tr.Err, "target"); hint != "" {
			fmt.Fprintf(b, "    %s\n", t.yellow.Sprint(hint))
		}
	}
	if why := githubVerdict(tr); why != "" && t.forward {
		what := "GitHub would mark this delivery failed: "
		if tr.Name != "" {
			what = "GitHub would mark this delivery failed at " + termSafe(tr.Name) + ": "
		}
		fmt.Fprintf(b, "    %s\n", t.yellow.Sprint(what+why))
	}
}

// writeFailedFile writes where a delivery was kept for a replay, or why it
// could not be.
func (t *tracer) writeFailedFile(b *strings.Builder, file string, err error) {
	switch {
	case file != "":
		fmt.Fprintf(b, "    %s %s\n", t.yellow.Sprint("saved for replay:"), termSafe(file))
	case err != nil:
		fmt.Fprintf(b, "    %s\n", t.red.Sprint("not saved for replay: "+termSafe(err.Error())))
	}
}

// waitedShown is the least queue wait the trace line mentions: below it,
// the wait is the pipeline's own, not a slow delivery ahead.
const waitedShown = time.Second

// githubVerdict says why GitHub would record the target's answer as a
// failed delivery (proxy.GitHubTimeout, a status other than 2xx); "" when
// it would not, or nothing was sent.
func githubVerdict(tr *proxy.TargetResult) string {
	switch {
	case tr == nil || tr.Interrupted || tr.Skipped || !tr.GitHubWouldFail():
		return ""
	case tr.Err != nil:
		return "no answer"
	case !tr.OK():
		return fmt.Sprintf("it answers %d, not 2xx", tr.Status)
	}
	return fmt.Sprintf("the answer took %s, and GitHub waits %s (answer first, then work: octokit/webhooks#185)",
		formatDuration(tr.Duration), proxy.GitHubTimeout)
}

func (t *tracer) writeDetails(b *strings.Builder, r proxy.Result) {
	d := r.Delivery
	writeHeaders(b, t.dim, d.Headers, "    ")
	var pretty bytes.Buffer
	if json.Indent(&pretty, d.Body, "    ", "  ") == nil {
		fmt.Fprintf(b, "    %s\n", termSafeLines(pretty.String()))
	} else if len(d.Body) > 0 {
		fmt.Fprintf(b, "    %q\n", shorten(string(d.Body), 2048))
	}
	if r.Saved != "" {
		fmt.Fprintf(b, "    %s %s\n", t.dim.Sprint("saved:"), termSafe(r.Saved))
	}
}

// writeHeaders writes h sorted, one per line after indent, with the values
// of credentials redacted and control characters escaped.
func writeHeaders(b *strings.Builder, dim *color.Color, h http.Header, indent string) {
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			if httpx.IsCredentialHeader(k) {
				v = "[redacted]"
			}
			fmt.Fprintf(b, "%s%s %s\n", indent, dim.Sprint(termSafe(k)+":"), termSafe(v))
		}
	}
}

// firstLine returns the first non-empty line of b, shortened to n runes.
func firstLine(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return shorten(s, n)
}

func formatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// jsonResult is the --json shape of one delivery.
type jsonResult struct {
	Time         string              `json:"time"`
	Delivery     string              `json:"delivery"`
	EventID      string              `json:"event_id,omitempty"`
	Event        string              `json:"event"`
	Action       string              `json:"action,omitempty"`
	Repository   string              `json:"repository,omitempty"`
	Sender       string              `json:"sender,omitempty"`
	Size         int                 `json:"size"`
	BodySource   string              `json:"body_source"`
	Filtered     bool                `json:"filtered,omitempty"`
	Handshake    string              `json:"handshake,omitempty"` // a sender's check of the URL, not a delivery: its kind
	Answered     bool                `json:"handshake_answered,omitempty"`
	Duplicate    bool                `json:"duplicate,omitempty"`
	Redelivery   bool                `json:"redelivery,omitempty"`
	Replay       bool                `json:"replay,omitempty"` // a replay asked for (the inspector's), not from the relay
	WaitedMS     float64             `json:"waited_ms,omitempty"`
	Verification string              `json:"verification,omitempty"`
	VerifyNote   string              `json:"verify_note,omitempty"`
	Scheme       string              `json:"scheme,omitempty"` // the sender's signature scheme: github, stripe...
	Handlers     []jsonHandler       `json:"handlers,omitempty"`
	HandlerError string              `json:"handler_error,omitempty"`
	Targets      []*jsonTarget       `json:"targets,omitempty"`  // one per target the routes chose
	Unrouted     bool                `json:"unrouted,omitempty"` // no route took it and there is no default target
	Rule         string              `json:"rule,omitempty"`     // filtered, duplicate or unrouted: which rule did it
	Saved        string              `json:"saved,omitempty"`
	SaveError    string              `json:"save_error,omitempty"`
	FailedFile   string              `json:"failed_file,omitempty"`
	FailedError  string              `json:"failed_error,omitempty"`
	Lost         bool                `json:"lost,omitempty"`
	Headers      map[string][]string `json:"headers,omitempty"`
	OK           bool                `json:"ok"`
}

type jsonHandler struct {
	Name       string  `json:"name"`
	OK         bool    `json:"ok"`
	Error      string  `json:"error,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

type jsonTarget struct {
	Name       string  `json:"name,omitempty"`    // none for one unnamed target
	Skipped    bool    `json:"skipped,omitempty"` // it had the delivery before a restart
	FailedFile string  `json:"failed_file,omitempty"`
	Method     string  `json:"method,omitempty"` // when not POST
	URL        string  `json:"url"`
	Status     int     `json:"status,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	Error      string  `json:"error,omitempty"`
	Hint       string  `json:"hint,omitempty"`
	// Interrupted: a second Ctrl-C cut the delivery short.
	Interrupted bool `json:"interrupted,omitempty"`
	// GitHubFailed: GitHub would record this answer as a failed delivery
	// (slower than 10 s, or not 2xx); GitHubNote says why.
	GitHubFailed bool   `json:"github_failed,omitempty"`
	GitHubNote   string `json:"github_note,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (t *tracer) writeJSON(r proxy.Result) {
	d := r.Delivery
	j := jsonResult{
		Time: r.Received.UTC().Format(time.RFC3339Nano), Delivery: d.ID, EventID: d.EventID,
		Event: d.Event, Action: r.Action, Repository: r.Repository, Sender: r.Sender,
		Size: len(d.Body), BodySource: string(d.BodySource), Filtered: r.Filtered, Handshake: r.Handshake, Answered: r.HandshakeAnswered,
		Duplicate: r.Duplicate, Redelivery: r.Redelivery, Replay: r.Replay, FailedFile: r.FailedFile, Lost: t.forward && r.Lost(),
		Verification: string(r.Verification), VerifyNote: r.VerifyNote, Scheme: string(r.Scheme),
		Saved: r.Saved, OK: r.OK(), WaitedMS: ms(r.Waited),
	}
	for _, h := range r.Handlers {
		jh := jsonHandler{Name: h.Name, OK: h.Err == nil, DurationMS: ms(h.Duration)}
		if h.Err != nil {
			jh.Error = h.Err.Error()
		}
		j.Handlers = append(j.Handlers, jh)
	}
	if r.HandlerErr != nil {
		j.HandlerError = r.HandlerErr.Error()
	}
	for _, tr := range r.Targets {
		j.Targets = append(j.Targets, t.jsonTargetOf(tr, r.Delivery.Method))
	}
	j.Unrouted, j.Rule = r.Unrouted, t.rule(r)
	if r.SaveErr != nil {
		j.SaveError = r.SaveErr.Error()
	}
	if r.FailedErr != nil {
		j.FailedError = r.FailedErr.Error()
	}
	if t.verbose {
		j.Headers = map[string][]string{}
		for k, v := range d.Headers {
			if httpx.IsCredentialHeader(k) {
				v = []string{"[redacted]"}
			}
			j.Headers[k] = v
		}
	}
	t.writeJSONLine(j)
}

// writeJSONLine writes v as one line of --json's output (HTML characters
// as they are: bodies and messages are shown, not embedded in a page).
func (t *tracer) writeJSONLine(v any) {
	enc := json.NewEncoder(t.out)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	t.written()
}

// jsonTargetOf is a target's outcome for --json.
func (t *tracer) jsonTargetOf(tr *proxy.TargetResult, method string) *jsonTarget {
	j := &jsonTarget{Name: tr.Name, Skipped: tr.Skipped, FailedFile: tr.FailedFile, URL: tr.URL, Status: tr.Status, DurationMS: ms(tr.Duration), Interrupted: tr.Interrupted}
	if method != http.MethodPost {
		j.Method = method
	}
	if why := githubVerdict(tr); why != "" && t.forward {
		j.GitHubFailed, j.GitHubNote = true, why
	}
	if tr.Err != nil {
		j.Error = tr.Err.Error()
		j.Hint = certHint(tr.Err, "target")
	}
	return j
}

// state prints a connection state change.
// clock formats when a delivery was received: the time of day, with the
// date in front when it is not today (replayed captures).
func (t *tracer) clock(at time.Time) string {
	at = at.In(t.loc)
	y, m, d := at.Date()
	if ty, tm, td := time.Now().In(t.loc).Date(); y != ty || m != tm || d != td {
		return at.Format("2006-01-02 15:04:05")
	}
	return at.Format("15:04:05")
}

// noAnswerAfter is how long a connection attempt waits for the relay's
// answer before the trace says it has none yet.
const noAnswerAfter = 10 * time.Second

// quietAfter is how many connection failures in a row each get a line.
const quietAfter = 3

// note prints a line of hookline's own on the info stream.
func (t *tracer) note(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintln(t.info, t.yellow.Sprint(msg))
}

// maxCallText bounds the text of an agent's call on the trace: it comes
// from any local client of the inspector.
const maxCallText = 200

// call shows an agent's tool call (hookline mcp, through the inspector's
// API) as a line of the trace, in order with the deliveries it causes;
// with --json, an object {"call": text}.
func (t *tracer) call(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.json {
		t.writeJSONLine(map[string]string{"call": text})
		return
	}
	fmt.Fprintf(t.out, "%s %s %s\n", t.dim.Sprint(t.clock(time.Now())), t.bold.Sprint("agent"), termSafe(shorten(text, maxCallText)))
	t.written()
}

// gap reports deliveries the relay no longer had, at once: a line of the
// trace, or with --json an object {"gap":{...}} among the deliveries.
func (t *tracer) gap(g proxy.Gap) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.json {
		t.writeJSONLine(map[string]proxy.Gap{"gap": g})
		return
	}
	after := ""
	if g.AfterID != "" {
		after = " (after event " + termSafe(g.AfterID) + ")"
	}
	fmt.Fprintf(t.info, "%s %s%s\n", t.yellow.Sprint("gap:"), g.Message, after)
}

func (t *tracer) state(s proxy.StateChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.silent != nil && s.State != proxy.StateReady {
		t.silent.Stop() // the attempt has an answer, or a new one starts
		t.silent = nil
	}
	switch s.State {
	case proxy.StateConnecting:
		if s.Attempt <= 1 {
			fmt.Fprintf(t.info, "%s %s\n", t.dim.Sprint("connecting to"), s.URL)
		}
		// A relay (or a proxy in front of it) that accepts the connection
		// and never answers would leave the user looking at "connecting"
		// for as long as the idle timeout.
		t.silent = time.AfterFunc(noAnswerAfter, func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			fmt.Fprintf(t.info, "%s %s after %s; still waiting (Ctrl-C stops)\n", t.yellow.Sprint("no answer from"), s.URL, noAnswerAfter)
		})
	case proxy.StateConnected:
		t.connected = true
		fmt.Fprintf(t.info, "%s %s\n", t.green.Sprint("connected to"), s.URL)
	case proxy.StateDisconnected:
		// The first few failures in a row each get a line; after that, a
		// relay that stays away gets one a minute, not one per attempt.
		now := time.Now()
		if s.Attempt > quietAfter && now.Sub(t.lastFailure) < time.Minute {
			return
		}
		t.lastFailure = now
		if !t.connected {
			// It never connected: "disconnected" would be wrong.
			fmt.Fprintf(t.info, "%s %s: %v; retrying in %s (attempt %d)\n", t.yellow.Sprint("cannot reach"), s.URL, s.Err, s.RetryIn.Round(time.Millisecond), s.Attempt)
			if !t.hinted {
				t.hinted = true
				fmt.Fprintf(t.info, "  %s\n", t.dim.Sprint("is the relay running? is the URL right? (forward keeps trying; Ctrl-C stops it)"))
			}
			return
		}
		fmt.Fprintf(t.info, "%s %v; retrying in %s (attempt %d)\n", t.yellow.Sprint("disconnected:"), s.Err, s.RetryIn.Round(time.Millisecond), s.Attempt)
	case proxy.StateReady:
		if s.LastEventID == "" {
			// A first connection. A channel that has never had a
			// delivery is often not the one the sender was given.
			if s.RelayLast == 0 && !t.saidEmpty {
				t.saidEmpty = true
				fmt.Fprintf(t.info, "%s\n", t.dim.Sprint("no delivery on this channel yet; check the URL you gave the sender"))
			}
			return
		}
		// A resumed hookline stream: say what waited for us.
		kept := "no delivery arrived meanwhile"
		if s.Pending > 0 {
			kept = "the relay kept " + plural(int(s.Pending), "delivery", "deliveries") + " for you"
		}
		fmt.Fprintf(t.info, "%s %s; %s\n", t.dim.Sprint("resuming after event"), s.LastEventID, kept)
	case proxy.StateStopped:
		// Nothing: the command prints why it stopped, once, as its error.
	}
}

// summaryInfo is what the summary says besides the counts.
type summaryInfo struct {
	saveDir    string // --save
	failedDir  string // where undelivered deliveries went ("" for none)
	failedAuto bool   // failedDir is hookline's default, not the user's
	target     string // the target URL, for the replay hint
	verified   bool   // the run checked signatures: so must the replay it suggests
	stateFile  string
	checkpoint string // the last event id stored
}

// summary prints the counts at the end of a run, then where the deliveries
// the target did not take are, and how to send them again.
func (t *tracer) summary(s proxy.Stats, in summaryInfo) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked() // the trace before the summary
	// Received and Replayed are where deliveries came from; the counts
	// after them are what became of them.
	fmt.Fprintf(t.info, "%s %d received", t.bold.Sprint("summary:"), s.Received)
	if s.Replayed > 0 {
		fmt.Fprintf(t.info, " + %d replayed", s.Replayed)
	}
	parts := []struct {
		n     int64
		label string
		c     *color.Color
	}{
		{s.Forwarded, "forwarded", t.green},
		{s.TargetFails, "target failure(s)", t.red},
		{s.Slow, "slower than GitHub's 10s", t.yellow},
		{s.VerifyFailed, "bad signature(s)", t.red},
		{s.Unverified, "unverified", t.dim},
		{s.HandlerFails, "handler failure(s)", t.red},
		{s.Filtered, "filtered", t.dim},
		{s.Handshakes, "handshake(s), not passed on", t.dim},
		{s.Duplicates, "duplicate(s) skipped", t.yellow},
		{s.Redeliveries, "redelivered", t.dim},
		{s.Malformed, "malformed message(s)", t.yellow},
		{s.Gaps, "gap(s) reported by the relay", t.yellow},
		{s.SaveFails, "not saved", t.red},
		{s.Lost, "LOST (not delivered, not saved)", t.red},
		{s.StateFails, "state file write failure(s)", t.red},
		{s.Unrouted, "unrouted (no route, no --target)", t.yellow},
	}
	for _, p := range parts {
		if p.n > 0 {
			fmt.Fprintf(t.info, ", %s", p.c.Sprintf("%d %s", p.n, p.label))
		}
	}
	if in.saveDir != "" {
		fmt.Fprintf(t.info, "; %d saved in %s", s.Saved, in.saveDir)
	}
	fmt.Fprintln(t.info)
	if len(s.Targets) > 0 {
		var per []string
		for _, name := range slices.Sorted(maps.Keys(s.Targets)) {
			ts := s.Targets[name]
			line := fmt.Sprintf("%s %d forwarded", termSafe(name), ts.Forwarded)
			if ts.Failed > 0 {
				line += ", " + t.red.Sprintf("%d failed", ts.Failed)
			}
			if ts.Waiting > 0 {
				line += ", " + t.yellow.Sprintf("%d still waiting", ts.Waiting)
			}
			per = append(per, line)
		}
		fmt.Fprintf(t.info, "%s %s\n", t.bold.Sprint("targets:"), strings.Join(per, "; "))
	}
	if s.GitHubFailed > 0 {
		fmt.Fprintf(t.info, "%s\n", t.yellow.Sprintf("GitHub would have marked %s failed (answers slower than %s or not 2xx): GitHub does not retry them",
			plural(int(s.GitHubFailed), "delivery", "deliveries"), proxy.GitHubTimeout))
	}
	if t.failedCount > 0 {
		where := in.failedDir
		if in.failedAuto {
			where += " (hookline's default failed folder; choose one with --failed-dir)"
		}
		var why []string
		for _, w := range slices.Sorted(maps.Keys(t.failedWhy)) {
			if n := t.failedWhy[w]; n > 1 {
				w += fmt.Sprintf(" ×%d", n)
			}
			why = append(why, w)
		}
		// Not "not delivered": a delivery cut short was sent, and its
		// handler may have run.
		fmt.Fprintf(t.info, "%s %s:\n", t.yellow.Sprintf("%d kept for a replay (%s) in", t.failedCount, strings.Join(why, ", ")), where)
		for _, p := range t.failed {
			fmt.Fprintf(t.info, "  %s\n", p)
		}
		if more := t.failedCount - len(t.failed); more > 0 {
			fmt.Fprintf(t.info, "  … and %d more\n", more)
		}
		target := "URL"
		if in.target != "" {
			target = httpx.RedactURL(in.target)
		}
		// Never a command that would send on what failed verification: a
		// run that verified suggests a replay that verifies again.
		badSigs := t.failedWhy["bad signature"]
		secretFile := ""
		if in.verified || badSigs > 0 {
			secretFile = "--secret-file FILE "
		}
		for _, name := range slices.Sorted(maps.Keys(t.laneFailed)) {
			fmt.Fprintf(t.info, "send %s's again with: hookline replay %s--target %s %s\n", termSafe(name), secretFile, httpx.RedactURL(t.laneFailed[name]), filepath.Join(in.failedDir, name))
		}
		switch {
		case t.topFailed == 0:
			// every one is in a target's subfolder: said above
		case in.verified || badSigs > 0:
			fmt.Fprintf(t.info, "send them again with: hookline replay --secret-file FILE --target %s %s\n", target, in.failedDir)
			note := "  FILE holds the webhook's secret: replay verifies each delivery again and sends only those that match"
			if badSigs > 0 {
				note += fmt.Sprintf(" (the %d with a bad signature are sent only if they match the secret you give)", badSigs)
			}
			fmt.Fprintln(t.info, note)
		default:
			fmt.Fprintf(t.info, "send them again with: hookline replay --target %s %s\n", target, in.failedDir)
		}
		if n := t.failedWhy[cutShort]; n > 0 {
			fmt.Fprintf(t.info, "  %s\n", t.yellow.Sprintf("%s cut short may have run your handler already: check before replaying, or the handler runs twice",
				plural(n, "delivery", "deliveries")))
		}
	}
	if in.stateFile != "" && in.checkpoint != "" {
		fmt.Fprintf(t.info, "position stored: after event %s in %s\n", in.checkpoint, in.stateFile)
	}
}

// termSafe escapes what a terminal would act on in a string that comes from
// a relay, a payload or a plugin: C0 controls (CR, ESC, newline...), DEL and
// C1 controls (U+0080-U+009F) become \xNN or \u00NN, so a delivery cannot
// rewrite, split or colour a trace line, nor send OSC sequences.
func termSafe(s string) string {
	clean := true
	for _, r := range s {
		if isControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case isControl(r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// termSafeLines is termSafe for text whose line breaks are hookline's own
// (indented JSON): each line is escaped on its own.
func termSafeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = termSafe(l)
	}
	return strings.Join(lines, "\n")
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) }

// defaultWidth is the width a trace line is made to fit in a file or a
// pipe; minWho is the least room the repository and sender keep on a long
// line.
const (
	defaultWidth = 80
	minWho       = 12
)

// traceWidth returns the columns of the terminal w is, else defaultWidth.
func traceWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok && isTerminal(w) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return defaultWidth
}

// visibleWidth is the number of columns s takes on a terminal: its runes,
// colour escapes (ESC [ digits and semicolons m, what fatih/color writes)
// left out. A loop, not a regexp: it runs for every trace line.
func visibleWidth(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "\x1b[") {
			j := i + 2
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == ';') {
				j++
			}
			if j < len(s) && s[j] == 'm' {
				i = j + 1
				continue
			}
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return n
}

// shorten cuts s to at most n runes, ending with "…" when it was cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
