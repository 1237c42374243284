package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fatih/color"

	"github.com/hookline/hookline/proxy"
)

// tracer prints one line per delivery (or one JSON object with --json) and
// the connection state changes. It is safe for concurrent use.
type tracer struct {
	mu      sync.Mutex
	out     io.Writer // the trace
	info    io.Writer // state changes and the summary
	json    bool
	verbose bool
	loc     *time.Location

	green, yellow, red, dim, bold *color.Color
	families                      map[string]*color.Color
}

func newTracer(out, info io.Writer, colorOut bool, jsonLines, verbose bool, loc *time.Location) *tracer {
	if loc == nil {
		loc = time.Local
	}
	t := &tracer{
		out: out, info: info, json: jsonLines, verbose: verbose, loc: loc,
		green:  paint(colorOut, color.FgGreen),
		yellow: paint(colorOut, color.FgYellow),
		red:    paint(colorOut, color.FgRed, color.Bold),
		dim:    paint(colorOut, color.Faint),
		bold:   paint(colorOut, color.Bold),
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

// sensitiveHeaders are never printed with their values.
var sensitiveHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Set-Cookie": true,
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

// result prints one delivery.
func (t *tracer) result(r proxy.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.json {
		t.writeJSON(r)
		return
	}
	if r.Filtered {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-8s %s", t.dim.Sprint(r.Received.In(t.loc).Format("15:04:05")), shortID(r),
		t.families[family(r.Delivery.Event)].Sprintf("%-28s", eventName(r)))
	if r.Repository != "" {
		b.WriteString(" " + r.Repository)
	}
	if r.Sender != "" {
		b.WriteString(" @" + r.Sender)
	}
	switch r.Verification {
	case proxy.Verified:
		b.WriteString(" " + t.green.Sprint("✓ verified"))
	case proxy.Failed:
		b.WriteString(" " + t.red.Sprint("✗ bad signature"))
	default:
		b.WriteString(" " + t.dim.Sprint("· unverified"))
	}
	for i, h := range r.Handlers {
		sep := ","
		if i == 0 {
			sep = " plugins:"
		}
		if h.Err == nil {
			fmt.Fprintf(&b, "%s %s %s", sep, h.Name, t.green.Sprint("ok"))
		} else {
			fmt.Fprintf(&b, "%s %s %s", sep, h.Name, t.red.Sprint("failed"))
		}
	}
	if r.HandlerErr != nil && len(r.Handlers) == 0 {
		b.WriteString(" " + t.red.Sprint("handlers failed"))
	}
	if tr := r.Target; tr != nil {
		b.WriteString(" → ")
		switch {
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
	}
	b.WriteString("\n")
	// Details on the lines below, indented: why something failed.
	if r.Verification == proxy.Failed || (r.VerifyNote != "" && t.verbose) {
		fmt.Fprintf(&b, "    %s\n", r.VerifyNote)
	} else if r.VerifyNote != "" {
		fmt.Fprintf(&b, "    %s\n", t.yellow.Sprint("warning: "+r.VerifyNote))
	}
	if r.HandlerErr != nil {
		for _, line := range strings.Split(r.HandlerErr.Error(), "\n") {
			fmt.Fprintf(&b, "    %s\n", t.red.Sprint(line))
		}
	}
	if tr := r.Target; tr != nil && tr.Err != nil {
		fmt.Fprintf(&b, "    %s\n", t.red.Sprint(tr.Err.Error()))
	}
	if r.SaveErr != nil {
		fmt.Fprintf(&b, "    %s\n", t.red.Sprint("not saved: "+r.SaveErr.Error()))
	}
	if t.verbose {
		t.writeDetails(&b, r)
	}
	io.WriteString(t.out, b.String())
}

func (t *tracer) writeDetails(b *strings.Builder, r proxy.Result) {
	d := r.Delivery
	names := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range d.Headers[k] {
			if sensitiveHeaders[http.CanonicalHeaderKey(k)] {
				v = "[redacted]"
			}
			fmt.Fprintf(b, "    %s %s\n", t.dim.Sprint(k+":"), v)
		}
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, d.Body, "    ", "  ") == nil {
		fmt.Fprintf(b, "    %s\n", pretty.String())
	} else if len(d.Body) > 0 {
		fmt.Fprintf(b, "    %q\n", excerpt(d.Body, 2048))
	}
	if r.Saved != "" {
		fmt.Fprintf(b, "    %s %s\n", t.dim.Sprint("saved:"), r.Saved)
	}
}

func excerpt(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
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
	Verification string              `json:"verification,omitempty"`
	VerifyNote   string              `json:"verify_note,omitempty"`
	Handlers     []jsonHandler       `json:"handlers,omitempty"`
	HandlerError string              `json:"handler_error,omitempty"`
	Target       *jsonTarget         `json:"target,omitempty"`
	Saved        string              `json:"saved,omitempty"`
	SaveError    string              `json:"save_error,omitempty"`
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
	URL        string  `json:"url"`
	Status     int     `json:"status,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	Error      string  `json:"error,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (t *tracer) writeJSON(r proxy.Result) {
	d := r.Delivery
	j := jsonResult{
		Time: r.Received.UTC().Format(time.RFC3339Nano), Delivery: d.ID, EventID: d.EventID,
		Event: d.Event, Action: r.Action, Repository: r.Repository, Sender: r.Sender,
		Size: len(d.Body), BodySource: string(d.BodySource), Filtered: r.Filtered,
		Verification: string(r.Verification), VerifyNote: r.VerifyNote,
		Saved: r.Saved, OK: r.OK(),
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
	if tr := r.Target; tr != nil {
		j.Target = &jsonTarget{URL: tr.URL, Status: tr.Status, DurationMS: ms(tr.Duration)}
		if tr.Err != nil {
			j.Target.Error = tr.Err.Error()
		}
	}
	if r.SaveErr != nil {
		j.SaveError = r.SaveErr.Error()
	}
	if t.verbose {
		j.Headers = map[string][]string{}
		for k, v := range d.Headers {
			if sensitiveHeaders[http.CanonicalHeaderKey(k)] {
				v = []string{"[redacted]"}
			}
			j.Headers[k] = v
		}
	}
	enc := json.NewEncoder(t.out)
	enc.SetEscapeHTML(false)
	enc.Encode(j)
}

// state prints a connection state change.
func (t *tracer) state(s proxy.StateChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s.State {
	case proxy.StateConnecting:
		if s.Attempt <= 1 {
			fmt.Fprintf(t.info, "%s %s\n", t.dim.Sprint("connecting to"), s.URL)
		}
	case proxy.StateConnected:
		fmt.Fprintf(t.info, "%s %s\n", t.green.Sprint("connected to"), s.URL)
	case proxy.StateDisconnected:
		fmt.Fprintf(t.info, "%s %v; retrying in %s (attempt %d)\n", t.yellow.Sprint("disconnected:"), s.Err, s.RetryIn.Round(time.Millisecond), s.Attempt)
	case proxy.StateStopped:
		if s.Err != nil {
			fmt.Fprintf(t.info, "%s %v\n", t.red.Sprint("stopped:"), s.Err)
		}
	}
}

// summary prints the counts at the end of a run.
func (t *tracer) summary(s proxy.Stats, saveDir string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.info, "%s %d received", t.bold.Sprint("summary:"), s.Received)
	parts := []struct {
		n     int64
		label string
		c     *color.Color
	}{
		{s.Forwarded, "forwarded", t.green},
		{s.TargetFails, "target failure(s)", t.red},
		{s.VerifyFailed, "bad signature(s)", t.red},
		{s.Unverified, "unverified", t.dim},
		{s.HandlerFails, "handler failure(s)", t.red},
		{s.Filtered, "filtered", t.dim},
		{s.Malformed, "malformed message(s)", t.yellow},
		{s.Gaps, "gap(s) reported by the relay", t.yellow},
		{s.SaveFails, "not saved", t.red},
	}
	for _, p := range parts {
		if p.n > 0 {
			fmt.Fprintf(t.info, ", %s", p.c.Sprintf("%d %s", p.n, p.label))
		}
	}
	if saveDir != "" {
		fmt.Fprintf(t.info, "; %d saved in %s", s.Saved, saveDir)
	}
	fmt.Fprintln(t.info)
}
