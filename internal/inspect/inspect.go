// Package inspect is hookline's local inspector: a page and a JSON API on
// loopback that show every delivery a proxy.Client handled with what the
// target answered (status, headers, body, each attempt), and replay one,
// as it was or edited and signed again with the run's secret.
//
// It keeps the Results it is given (Inspector.Add is an OnResult), newest
// last, within Options.History deliveries and Options.HistoryBytes of
// bodies and answers, evicting the oldest; a delivery's body is the
// pipeline's own slice, never a copy. docs/INSPECT.md documents the API.
//
// Only the address it was bound to may be named in Host (a DNS-rebinding
// guard), and every API request needs the run's token (another user of
// the machine reaches loopback too): in X-Hookline-Token, or for a read in
// ?token= (a download link, the page's EventSource); a request that
// changes anything (replay, clear) needs the header and, when the browser
// sends an Origin, the inspector's own. The page takes the token from the
// URL forward printed into the tab's session storage and out of the
// address bar; nothing is sent as a Referer (Referrer-Policy: no-referrer).
package inspect

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/webhooks/provider"
	"github.com/hookline/hookline/webhooks/webhookstest"
)

// Defaults of Options.
const (
	DefaultAddr         = "127.0.0.1:4040" // ngrok's inspector's
	DefaultHistory      = 500
	DefaultHistoryBytes = 256 << 20
)

// maxEditBytes bounds the body of a replay request.
const maxEditBytes = 32 << 20

// Options configure an Inspector.
type Options struct {
	// History and HistoryBytes bound what is kept: deliveries, and bytes
	// of request bodies and answers. If zero, DefaultHistory and
	// DefaultHistoryBytes. The newest delivery is kept even when larger.
	History      int
	HistoryBytes int64
	// Secret signs an edited replay again, in the delivery's own scheme
	// (GitHub's X-Hub-Signature-256, whose legacy X-Hub-Signature is
	// dropped; Stripe's...), SchemeSecrets[scheme] first when there is one,
	// so that the pipeline's verification passes and so does the
	// target's. Empty: an edited replay keeps the signature it had.
	Secret        string
	SchemeSecrets map[provider.Scheme][]string
	// Resend runs a delivery through the pipeline again (proxy.Client's
	// Handle); its Result must come back to Add too (OnResult). Nil: no
	// replay.
	Resend func(context.Context, *delivery.Delivery) proxy.Result
	// TargetURL is shown in the copied curl commands; empty: a placeholder.
	TargetURL string
	// Build makes the delivery POST /api/send runs through the pipeline
	// (with Resend): event.action's example with the overrides, its
	// headers and signature as hookline send makes them. Nil: nothing can
	// be sent.
	Build func(name string, overrides []webhookstest.Override) (*delivery.Delivery, error)
	// OnCall is told of every API request that names itself in
	// X-Hookline-Call (an agent's tool call, through hookline mcp), with
	// that text as sent, so that the run shows who replayed or sent what;
	// what shows it makes it safe to print.
	OnCall func(call string)
}

// Inspector keeps Results and serves them; create it with New.
type Inspector struct {
	opts  Options
	token string
	host  string // the address requests must name (Serve)
	mux   *http.ServeMux

	mu      sync.Mutex
	items   []*item // oldest first
	bytes   int64
	next    int64
	evicted int64
	gaps    gapTotals // what the relay reported lost (AddGap)
	subs    map[chan liveEvent]struct{}
	pending map[*delivery.Delivery]replayMark // replays on their way through the pipeline
}

// replayMark is what Add records of a replay, or of a delivery sent into
// the run (POST /api/send), it is given back.
type replayMark struct {
	of     int64
	edited bool
	sent   bool
}

// item is one Result the inspector keeps.
type item struct {
	id      int64
	at      time.Time
	r       proxy.Result
	of      int64 // a replay's original
	edited  bool
	sent    bool    // made by Options.Build, not received
	replays []int64 // the replays of it kept or evicted since, oldest first
	size    int64
}

// New returns an Inspector with a new random token.
func New(opts Options) *Inspector {
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	if opts.HistoryBytes <= 0 {
		opts.HistoryBytes = DefaultHistoryBytes
	}
	in := &Inspector{opts: opts, token: rand.Text(), subs: map[chan liveEvent]struct{}{}, pending: map[*delivery.Delivery]replayMark{}}
	in.routes()
	return in
}

// Token returns the token every API request needs.
func (in *Inspector) Token() string { return in.token }

// Add keeps r (an OnResult): a replay Resend gave back is marked as one.
func (in *Inspector) Add(r proxy.Result) {
	if r.Delivery == nil {
		return
	}
	it := &item{at: time.Now(), r: r, size: resultSize(r)}
	in.mu.Lock()
	if m, ok := in.pending[r.Delivery]; ok {
		it.of, it.edited, it.sent = m.of, m.edited, m.sent
		delete(in.pending, r.Delivery)
	}
	in.next++
	it.id = in.next
	if orig := in.itemLocked(it.of); orig != nil {
		orig.replays = append(orig.replays, it.id)
	}
	in.items = append(in.items, it)
	in.bytes += it.size
	for len(in.items) > 1 && (len(in.items) > in.opts.History || in.bytes > in.opts.HistoryBytes) {
		in.bytes -= in.items[0].size
		in.items[0] = nil
		in.items = in.items[1:]
		in.evicted++
	}
	var msg []byte
	if len(in.subs) > 0 { // encoded only for a page that listens
		msg, _ = json.Marshal(summary(it))
	}
	in.notifyLocked(liveEvent{"delivery", msg})
	in.mu.Unlock()
}

// gapTotals are the gaps the relay reported, for the page: how many, the
// deliveries they lost (where the relay said), and the last one.
type gapTotals struct {
	Count int64      `json:"count"`
	Lost  int64      `json:"lost"`
	Last  *proxy.Gap `json:"last,omitempty"`
	// Message says what the last gap means (Gap.Message).
	Message string `json:"message,omitempty"`
}

// AddGap records a gap the relay reported (an OnGap) and tells the pages,
// which show it at once beside the counts.
func (in *Inspector) AddGap(g proxy.Gap) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.gaps.Count++
	in.gaps.Lost += g.Count
	in.gaps.Last, in.gaps.Message = &g, g.Message
	msg, _ := json.Marshal(g)
	in.notifyLocked(liveEvent{"gap", msg})
}

// liveEvent is an event of the pages' live stream (events): "delivery" with
// a Summary, or "gap" with a proxy.Gap.
type liveEvent struct {
	name string
	data []byte
}

// notifyLocked sends ev to every page that listens; a page too slow to
// take it reloads when its stream ends.
func (in *Inspector) notifyLocked(ev liveEvent) {
	for ch := range in.subs {
		select {
		case ch <- ev:
		default:
			delete(in.subs, ch)
			close(ch)
		}
	}
}

// resultSize is what a Result counts against HistoryBytes: the body, the
// answer and the headers of both.
func resultSize(r proxy.Result) int64 {
	n := int64(len(r.Delivery.Body)) + headerSize(r.Delivery.Headers) + 512
	for _, t := range r.Targets {
		n += int64(len(t.Body)) + headerSize(t.Header)
		for _, a := range t.Attempts[:max(len(t.Attempts)-1, 0)] { // the last one's are t's
			n += int64(len(a.Body)) + headerSize(a.Header)
		}
	}
	return n
}

func headerSize(h http.Header) int64 {
	var n int64
	for k, vs := range h {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}

// Serve serves the inspector on ln until ctx ends; the Host of every
// request must be ln's address (or localhost with its port).
func (in *Inspector) Serve(ctx context.Context, ln net.Listener) error {
	in.host = ln.Addr().String()
	srv := &http.Server{Handler: in, ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() {
		in.closeSubs()
		srv.Close()
	})
	defer stop()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// URL returns the page's URL with the token, once Serve has started.
func URL(ln net.Listener, token string) string {
	return "http://" + ln.Addr().String() + "/?token=" + token
}

func (in *Inspector) closeSubs() {
	in.mu.Lock()
	defer in.mu.Unlock()
	for ch := range in.subs {
		close(ch)
	}
	clear(in.subs)
}

//go:embed assets
var assets embed.FS

func (in *Inspector) routes() {
	in.mux = http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	in.mux.Handle("GET /{$}", files)
	in.mux.Handle("GET /app.js", files)
	in.mux.Handle("GET /app.css", files)
	in.mux.HandleFunc("GET /api/deliveries", in.list)
	in.mux.HandleFunc("DELETE /api/deliveries", in.clear)
	in.mux.HandleFunc("GET /api/deliveries/{id}", in.detail)
	in.mux.HandleFunc("POST /api/deliveries/{id}/replay", in.replay)
	in.mux.HandleFunc("POST /api/send", in.send)
	in.mux.HandleFunc("GET /api/deliveries/{id}/capture", in.captureFile)
	in.mux.HandleFunc("GET /api/deliveries/{id}/curl", in.curl)
	in.mux.HandleFunc("GET /api/export", in.export)
	in.mux.HandleFunc("GET /api/events", in.events)
}

// ServeHTTP checks Host, the token of every API request (a read too: the
// deliveries are the run's, not every local user's) and the Origin of a
// request that changes something, then routes. The page itself (its HTML,
// script and style) holds nothing of the run and needs no token.
func (in *Inspector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !in.hostAllowed(r.Host) {
		http.Error(w, "inspect: this inspector answers only to http://"+in.host+" (Host "+strconv.Quote(r.Host)+" refused)", http.StatusMisdirectedRequest)
		return
	}
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	if !read {
		if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
			httpx.WriteError(w, http.StatusForbidden, "a request from another origin ("+o+") cannot change the inspector")
			return
		}
	}
	if strings.HasPrefix(r.URL.Path, "/api/") && !in.tokenGiven(r, read) {
		how := "X-Hookline-Token"
		if read {
			how += " (or ?token= for a link or an EventSource)"
		}
		httpx.WriteError(w, http.StatusForbidden, "this needs the run's token in "+how+": the inspector URL forward printed carries it")
		return
	}
	if q := r.URL.Query(); q.Get("after") == "latest" {
		// Resolved as the request arrives, before its call is told
		// (OnCall): a delivery that comes after the caller saw the call
		// on the trace is one the wait sees.
		in.mu.Lock()
		q.Set("after", strconv.FormatInt(in.next, 10))
		in.mu.Unlock()
		r.URL.RawQuery = q.Encode()
	}
	if call := r.Header.Get("X-Hookline-Call"); call != "" && in.opts.OnCall != nil && strings.HasPrefix(r.URL.Path, "/api/") {
		in.opts.OnCall(call)
	}
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
	w.Header().Set("X-Frame-Options", "DENY")
	in.mux.ServeHTTP(w, r)
}

// tokenGiven reports whether r carries the run's token: in the
// X-Hookline-Token header, or for a read in the token query parameter (a
// download link, an EventSource cannot send a header). A change needs the
// header, which another origin cannot send without the CORS preflight the
// inspector never answers.
func (in *Inspector) tokenGiven(r *http.Request, read bool) bool {
	t := r.Header.Get("X-Hookline-Token")
	if t == "" && read {
		t = r.URL.Query().Get("token")
	}
	return t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(in.token)) == 1
}

// hostAllowed reports whether host names the inspector: its address, or
// localhost with its port. Before Serve (tests of the handler alone),
// every host is.
func (in *Inspector) hostAllowed(host string) bool {
	if in.host == "" {
		return true
	}
	_, port, _ := net.SplitHostPort(in.host)
	return host == in.host || host == "localhost:"+port
}

// Outcomes, as the list filters them.
const (
	OutcomeVerified     = "verified"
	OutcomeUnverified   = "unverified"
	OutcomeBadSignature = "bad-signature"
	OutcomeTargetFailed = "target-failed"
	OutcomeSkipped      = "skipped"
	OutcomeDuplicate    = "duplicate"
)

// outcome classifies r for the list's filter: what went wrong first, else
// whether it was verified.
func outcome(r proxy.Result) string {
	switch {
	case r.Duplicate:
		return OutcomeDuplicate
	case r.Filtered, r.Handshake != "": // not passed on: filtered, or a sender's handshake
		return OutcomeSkipped
	case r.Verification == proxy.VerificationFailed:
		return OutcomeBadSignature
	case slices.ContainsFunc(r.Targets, func(t *proxy.TargetResult) bool { return !t.Skipped && !t.OK() }):
		return OutcomeTargetFailed
	case r.Verification == proxy.VerificationPassed:
		return OutcomeVerified
	}
	return OutcomeUnverified
}

// Summary is a delivery in the list (GET /api/deliveries, /api/events).
type Summary struct {
	ID           int64     `json:"id"`
	At           time.Time `json:"at"`
	DeliveryID   string    `json:"delivery_id"`
	Event        string    `json:"event"`
	Action       string    `json:"action,omitempty"`
	Repository   string    `json:"repository,omitempty"`
	Sender       string    `json:"sender,omitempty"`
	Outcome      string    `json:"outcome"`
	Verification string    `json:"verification"`
	VerifyNote   string    `json:"verify_note,omitempty"`
	Scheme       string    `json:"scheme,omitempty"` // the sender's signature scheme: github, stripe...
	Edited       bool      `json:"edited"`
	ReplayOf     int64     `json:"replay_of,omitempty"`
	Replays      []int64   `json:"replays,omitempty"` // the replays of this delivery, oldest first
	Sent         bool      `json:"sent,omitempty"`    // a test event sent into the run (POST /api/send)
	Size         int       `json:"size"`
	// Targets are the targets' answers, one per target the routes chose
	// (one unnamed target: no name), each with its attempts; Unrouted: no
	// route took it.
	Targets  []TargetView  `json:"targets,omitempty"`
	Unrouted bool          `json:"unrouted,omitempty"`
	Handlers []HandlerView `json:"handlers,omitempty"`
}

// TargetView is the target's final answer.
type TargetView struct {
	Name         string  `json:"name,omitempty"`    // none for one unnamed target
	Skipped      bool    `json:"skipped,omitempty"` // it had the delivery before a restart
	URL          string  `json:"url"`
	Status       int     `json:"status"`
	DurationMS   float64 `json:"duration_ms"`
	Error        string  `json:"error,omitempty"`
	GitHubFailed bool    `json:"github_failed"` // GitHub would record a failed delivery (non-2xx, none, or over 10 s)
	// Attempts are the requests made to the target, retries included.
	Attempts []AttemptView `json:"attempts"`
}

// AttemptView is one request to the target, with its answer in the
// detail (Response) when one came.
type AttemptView struct {
	Status      int       `json:"status"`
	DurationMS  float64   `json:"duration_ms"`
	FirstByteMS float64   `json:"first_byte_ms"`
	Error       string    `json:"error,omitempty"`
	Response    *BodyView `json:"response,omitempty"`
}

// HandlerView is a local handler's outcome (a plugin's exit).
type HandlerView struct {
	Name       string  `json:"name"`
	Error      string  `json:"error,omitempty"` // a plugin's exit status and last line
	DurationMS float64 `json:"duration_ms"`
	Output     string  `json:"output,omitempty"` // the end of what it printed (4 KiB)
}

// BodyView is headers and a body: text when it is UTF-8, else base64.
type BodyView struct {
	Headers   http.Header `json:"headers"`
	Body      string      `json:"body"`
	Encoding  string      `json:"body_encoding"` // "text" or "base64", as in a capture file
	Size      int         `json:"size"`
	Truncated bool        `json:"truncated,omitempty"` // an answer longer than Cap
	Cap       int         `json:"cap,omitempty"`       // how much of an answer is kept`
}

// Detail is one delivery with its request and answer
// (GET /api/deliveries/{id}).
type Detail struct {
	Summary
	Request struct {
		Method     string `json:"method"`
		Query      string `json:"query,omitempty"`
		BodySource string `json:"body_source,omitempty"`
		BodyView
	} `json:"request"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func bodyView(h http.Header, b []byte) *BodyView {
	v := &BodyView{Headers: h, Size: len(b), Encoding: "text"}
	if utf8.Valid(b) {
		v.Body = string(b)
	} else {
		v.Body, v.Encoding = base64.StdEncoding.EncodeToString(b), "base64"
	}
	if v.Headers == nil {
		v.Headers = http.Header{}
	}
	return v
}

func summary(it *item) Summary {
	r := it.r
	d := r.Delivery
	s := Summary{
		ID: it.id, At: it.at, DeliveryID: d.ID, Event: d.Event, Action: r.Action, Repository: r.Repository, Sender: r.Sender,
		Outcome: outcome(r), Verification: string(r.Verification), VerifyNote: r.VerifyNote, Scheme: string(r.Scheme),
		Edited: it.edited, ReplayOf: it.of, Replays: slices.Clone(it.replays), Sent: it.sent, Size: len(d.Body),
	}
	if s.Verification == "" {
		s.Verification = string(proxy.VerificationSkipped)
	}
	for _, h := range r.Handlers {
		hv := HandlerView{Name: h.Name, DurationMS: ms(h.Duration), Output: h.Output}
		if h.Err != nil {
			hv.Error = h.Err.Error()
		}
		s.Handlers = append(s.Handlers, hv)
	}
	for _, t := range r.Targets {
		s.Targets = append(s.Targets, targetView(t))
	}
	s.Unrouted = r.Unrouted
	return s
}

// targetView is a target's answer and attempts.
func targetView(t *proxy.TargetResult) TargetView {
	v := TargetView{Name: t.Name, Skipped: t.Skipped, URL: t.URL, Status: t.Status, DurationMS: ms(t.Duration),
		GitHubFailed: t.GitHubWouldFail() && !t.Interrupted && !t.Skipped, Attempts: []AttemptView{}}
	if t.Err != nil {
		v.Error = t.Err.Error()
	}
	for _, a := range t.Attempts {
		av := AttemptView{Status: a.Status, DurationMS: ms(a.Duration), FirstByteMS: ms(a.FirstByte)}
		if a.Err != nil {
			av.Error = a.Err.Error()
		}
		v.Attempts = append(v.Attempts, av)
	}
	return v
}

// answers puts the attempts' answers of t into views.
func answers(t *proxy.TargetResult, views []AttemptView) {
	for i, a := range t.Attempts {
		if a.Header == nil || i >= len(views) {
			continue // no answer came
		}
		v := bodyView(a.Header, a.Body)
		v.Cap, v.Truncated = proxy.MaxAnswerBody, len(a.Body) >= proxy.MaxAnswerBody // the cap, always: the page states it
		views[i].Response = v
	}
}

func detail(it *item) Detail {
	d := Detail{Summary: summary(it)}
	del := it.r.Delivery
	d.Request.Method = del.Method
	if d.Request.Method == "" {
		d.Request.Method = http.MethodPost
	}
	d.Request.Query, d.Request.BodySource = del.Query, string(del.BodySource)
	d.Request.BodyView = *bodyView(del.Headers, del.Body)
	for i, t := range it.r.Targets {
		answers(t, d.Targets[i].Attempts)
	}
	return d
}

// filter is the list's query: event (or event.action), outcome, free
// text over the delivery id, names, headers and body, and the deliveries
// kept after id after.
type filter struct {
	event, outcome, q string
	after             int64
}

func filterOf(r *http.Request) filter {
	q := r.URL.Query()
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	return filter{event: q.Get("event"), outcome: q.Get("outcome"), q: strings.ToLower(q.Get("q")), after: after}
}

func (f filter) match(it *item) bool {
	if it.id <= f.after {
		return false
	}
	r := it.r
	if f.event != "" && f.event != r.Delivery.Event && f.event != r.Delivery.Event+"."+r.Action {
		return false
	}
	if f.outcome != "" && f.outcome != outcome(r) {
		return false
	}
	if f.q == "" {
		return true
	}
	d := r.Delivery
	for _, s := range []string{d.ID, d.Event, r.Action, r.Repository, r.Sender} {
		if strings.Contains(strings.ToLower(s), f.q) {
			return true
		}
	}
	for k, vs := range d.Headers {
		for _, v := range vs {
			if strings.Contains(strings.ToLower(k+": "+v), f.q) {
				return true
			}
		}
	}
	return containsFold(d.Body, f.q)
}

// containsFold reports whether b holds q (lowercase) in any letter case,
// for ASCII letters (a body's bytes need not be text).
func containsFold(b []byte, q string) bool {
	n := len(q)
	for i := 0; i+n <= len(b); i++ {
		j := 0
		for j < n {
			c := b[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != q[j] {
				break
			}
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

// visible returns the kept items f matches, newest first.
func (in *Inspector) visible(f filter) []*item {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []*item
	for _, it := range slices.Backward(in.items) {
		if f.match(it) {
			out = append(out, it)
		}
	}
	return out
}

// maxWait bounds the wait of GET /api/deliveries?wait=.
const maxWait = 10 * time.Minute

func (in *Inspector) list(w http.ResponseWriter, r *http.Request) {
	f := filterOf(r)
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		var err error
		if wait, err = time.ParseDuration(v); err != nil || wait < 0 || wait > maxWait {
			httpx.WriteError(w, http.StatusBadRequest, "wait "+strconv.Quote(v)+": give a duration up to "+maxWait.String()+", such as 60s")
			return
		}
	}
	items := in.visible(f)
	if len(items) == 0 && wait > 0 {
		items = in.await(r.Context(), f, wait)
	}
	out := struct {
		Deliveries []Summary      `json:"deliveries"`
		Counts     map[string]int `json:"counts"` // of every kept delivery, by outcome, and "all"
		Events     []string       `json:"events"` // the event names kept, for the filter
		Evicted    int64          `json:"evicted"`
		Gaps       gapTotals      `json:"gaps"` // deliveries the relay no longer had
		Limits     map[string]any `json:"limits"`
		Target     string         `json:"target,omitempty"`
		Replay     bool           `json:"replay"` // replays are possible
	}{Deliveries: make([]Summary, 0, len(items)), Counts: map[string]int{}, Target: in.opts.TargetURL, Replay: in.opts.Resend != nil}
	for _, it := range items {
		out.Deliveries = append(out.Deliveries, summary(it))
	}
	events := map[string]bool{}
	in.mu.Lock()
	for _, it := range in.items {
		out.Counts[outcome(it.r)]++
		out.Counts["all"]++
		if e := it.r.Delivery.Event; e != "" {
			events[e] = true
		}
	}
	out.Evicted, out.Gaps = in.evicted, in.gaps
	out.Limits = map[string]any{"history": in.opts.History, "history_bytes": in.opts.HistoryBytes, "bytes": in.bytes, "answer_cap": proxy.MaxAnswerBody}
	in.mu.Unlock()
	out.Events = append([]string{}, slices.Sorted(maps.Keys(events))...) // [] when empty, never null
	httpx.WriteJSON(w, http.StatusOK, out)
}

// itemLocked returns the kept item id, or nil. The caller holds mu.
func (in *Inspector) itemLocked(id int64) *item {
	i, ok := slices.BinarySearchFunc(in.items, id, func(it *item, id int64) int { return int(it.id - id) })
	if !ok {
		return nil
	}
	return in.items[i]
}

// await waits up to wait (or ctx's end) for a delivery that f matches
// (one kept after f.after), and returns those there are then.
func (in *Inspector) await(ctx context.Context, f filter, wait time.Duration) []*item {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		ch := make(chan liveEvent, 16)
		in.mu.Lock()
		in.subs[ch] = struct{}{}
		in.mu.Unlock()
		items := in.visible(f) // after subscribing: none is missed
		over := false
		if len(items) == 0 {
			select {
			case <-ch: // a delivery, a gap, or the channel closed (too slow, or the end): look again
			case <-timer.C:
				over = true
			case <-ctx.Done():
				over = true
			}
		}
		in.mu.Lock()
		if _, ok := in.subs[ch]; ok {
			delete(in.subs, ch)
			close(ch)
		}
		in.mu.Unlock()
		if len(items) > 0 {
			return items
		}
		if over {
			return in.visible(f)
		}
	}
}

func (in *Inspector) find(w http.ResponseWriter, r *http.Request) *item {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	in.mu.Lock()
	defer in.mu.Unlock()
	if err == nil {
		if it := in.itemLocked(id); it != nil {
			return it
		}
	}
	httpx.WriteError(w, http.StatusNotFound, "no delivery "+strconv.Quote(r.PathValue("id"))+" in the inspector (it keeps the last "+strconv.Itoa(in.opts.History)+")")
	return nil
}

func (in *Inspector) detail(w http.ResponseWriter, r *http.Request) {
	if it := in.find(w, r); it != nil {
		httpx.WriteJSON(w, http.StatusOK, detail(it))
	}
}

func (in *Inspector) clear(w http.ResponseWriter, r *http.Request) {
	in.mu.Lock()
	n := len(in.items)
	clear(in.items)
	in.items, in.bytes = nil, 0
	in.mu.Unlock()
	httpx.WriteJSON(w, http.StatusOK, map[string]int{"cleared": n})
}

// editRequest is the body of POST /api/deliveries/{id}/replay: all fields
// optional. Body and Encoding have the shape of a delivery's request as
// GET /api/deliveries/{id} gives it, and of a capture file ("body",
// "body_encoding"), so what was read can be sent back edited. Patch
// changes members of the (given or kept) JSON body: JSON Patch's add,
// replace and remove (RFC 6902), each checked against the event's payload
// type and changing only that member's bytes (webhookstest.Apply, as
// hookline send --set). Headers set (a string or a list; "", [] or null
// removes one); Resign signs the result again with the run's secret (the
// default when anything is edited). An edit that changes nothing is
// refused: a replay is asked for with no edit at all.
type editRequest struct {
	Body     *string           `json:"body"`
	Encoding string            `json:"body_encoding"` // "text" (default) or "base64"
	Patch    []PatchOp         `json:"patch"`
	Headers  map[string]values `json:"headers"`
	Resign   *bool             `json:"resign"`
}

// PatchOp is one operation of a JSON Patch (RFC 6902): add, replace or
// remove, at Path, a JSON Pointer ("/issue/title", "/commits/0/message").
// A member added to an object goes at its end; an array grows only by a
// replaced or removed element (add at an index, "-", move, copy and test
// are refused with a message).
type PatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// overrides returns ops as the overrides webhookstest.Apply makes: a
// pointer's tokens joined by dots.
func overrides(ops []PatchOp) ([]webhookstest.Override, error) {
	out := make([]webhookstest.Override, 0, len(ops))
	for i, op := range ops {
		at := fmt.Sprintf("patch[%d] (%s %s)", i, op.Op, op.Path)
		if !strings.HasPrefix(op.Path, "/") || op.Path == "/" {
			return nil, fmt.Errorf("%s: a path is a JSON Pointer to a member, such as /issue/title", at)
		}
		tokens := strings.Split(op.Path[1:], "/")
		for k, t := range tokens {
			t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
			if strings.Contains(t, ".") || t == "" || t == "-" {
				return nil, fmt.Errorf("%s: the member %q cannot be patched here (a name with a dot, an empty name or -); replace the whole body instead", at, t)
			}
			tokens[k] = t
		}
		o := webhookstest.Override{Path: strings.Join(tokens, ".")}
		switch op.Op {
		case "add", "replace":
			if len(op.Value) == 0 {
				return nil, fmt.Errorf("%s: give a value", at)
			}
			o.JSON = op.Value
		case "remove":
			o.Unset = true
		default:
			return nil, fmt.Errorf("%s: the op is add, replace or remove", at)
		}
		out = append(out, o)
	}
	return out, nil
}

// values is a header's values in an edit: a list, or one string.
type values []string

func (v *values) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*v = values{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New("a header's value is a string or a list of strings")
	}
	*v = list
	return nil
}

func (in *Inspector) replay(w http.ResponseWriter, r *http.Request) {
	if in.opts.Resend == nil {
		httpx.WriteError(w, http.StatusNotImplemented, "this run cannot replay")
		return
	}
	it := in.find(w, r)
	if it == nil {
		return
	}
	var e editRequest
	data, err := io.ReadAll(io.LimitReader(r.Body, maxEditBytes+1))
	if err == nil && len(data) > maxEditBytes {
		err = fmt.Errorf("over %d MiB", maxEditBytes>>20)
	}
	if err == nil && len(strings.TrimSpace(string(data))) > 0 {
		err = json.Unmarshal(data, &e)
	}
	if err != nil {
		httpx.WriteError(w, http.StatusBadRequest, "the replay request is not valid: "+err.Error())
		return
	}
	d, edited, err := in.edit(it.r.Delivery, e)
	if err != nil {
		httpx.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	httpx.WriteJSON(w, http.StatusOK, in.run(r.Context(), d, replayMark{of: it.id, edited: edited}))
}

// run runs d through the pipeline (Resend) and returns its detail, kept
// with mark.
func (in *Inspector) run(ctx context.Context, d *delivery.Delivery, mark replayMark) Detail {
	in.mu.Lock()
	in.pending[d] = mark
	in.mu.Unlock()
	// A replay started goes to its end, whether the page waits or not.
	res := in.opts.Resend(context.WithoutCancel(ctx), d)
	// Resend gave the Result to Add (OnResult); find it.
	in.mu.Lock()
	delete(in.pending, d)
	var got *item
	for _, x := range slices.Backward(in.items) {
		if x.r.Delivery == d {
			got = x
			break
		}
	}
	in.mu.Unlock()
	if got == nil { // not reported to Add (or already evicted)
		got = &item{at: time.Now(), r: res, of: mark.of, edited: mark.edited, sent: mark.sent}
	}
	return detail(got)
}

// sendRequest is the body of POST /api/send: an event.action to make as
// hookline send does, and JSON Patch operations on its example.
type sendRequest struct {
	Event string    `json:"event"`
	Patch []PatchOp `json:"patch"`
}

// send makes a test event (Options.Build) and runs it through the pipeline
// as a delivery: verified, routed, sent to the targets; the answer is its
// detail.
func (in *Inspector) send(w http.ResponseWriter, r *http.Request) {
	if in.opts.Build == nil || in.opts.Resend == nil {
		httpx.WriteError(w, http.StatusNotImplemented, "this run cannot send a test event")
		return
	}
	var req sendRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxEditBytes)).Decode(&req); err != nil {
		httpx.WriteError(w, http.StatusBadRequest, "the send request is not valid JSON: "+err.Error())
		return
	}
	if req.Event == "" {
		httpx.WriteError(w, http.StatusBadRequest, `give "event", such as issues.opened (hookline events lists them)`)
		return
	}
	ovs, err := overrides(req.Patch)
	if err == nil {
		var d *delivery.Delivery
		if d, err = in.opts.Build(req.Event, ovs); err == nil {
			httpx.WriteJSON(w, http.StatusOK, in.run(r.Context(), d, replayMark{sent: true}))
			return
		}
	}
	httpx.WriteError(w, http.StatusBadRequest, err.Error())
}

// edit returns the delivery a replay sends: a copy of d sharing its body
// (one replay, one Delivery: Add knows it by its address), or with e's
// body and headers, signed again when asked (by default when edited).
func (in *Inspector) edit(d *delivery.Delivery, e editRequest) (*delivery.Delivery, bool, error) {
	if e.Body == nil && e.Patch == nil && e.Headers == nil && (e.Resign == nil || !*e.Resign) {
		nd := *d
		return &nd, false, nil
	}
	nd := *d
	nd.Headers = d.Headers.Clone()
	if nd.Headers == nil {
		nd.Headers = http.Header{}
	}
	if e.Body != nil {
		switch e.Encoding {
		case "", "text":
			nd.Body = []byte(*e.Body)
		case "base64":
			b, err := base64.StdEncoding.DecodeString(*e.Body)
			if err != nil {
				return nil, false, fmt.Errorf("body_encoding base64: %v", err)
			}
			nd.Body = b
		default:
			return nil, false, fmt.Errorf("body_encoding %q: give text or base64", e.Encoding)
		}
	}
	if len(e.Patch) > 0 {
		ovs, err := overrides(e.Patch)
		if err == nil {
			pd := &delivery.Delivery{Event: d.Event, Body: slices.Clone(nd.Body)}
			err = webhookstest.Apply(pd, ovs...)
			nd.Body = pd.Body
		}
		if err != nil {
			return nil, false, err
		}
	}
	for k, vs := range e.Headers {
		if !validHeaderName(k) {
			return nil, false, fmt.Errorf("header name %q is not valid", k)
		}
		k = http.CanonicalHeaderKey(k)
		if len(vs) == 0 || (len(vs) == 1 && vs[0] == "") {
			nd.Headers.Del(k)
			continue
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n\x00") {
				return nil, false, fmt.Errorf("header %s: a value cannot hold a line break", k)
			}
		}
		nd.Headers[k] = vs
	}
	if (e.Body != nil || e.Patch != nil || e.Headers != nil) && bytes.Equal(nd.Body, d.Body) && reflect.DeepEqual(nd.Headers, d.Headers) {
		// An edit sent as it was read: replaying it "edited" would
		// resend the delivery unchanged under another name.
		return nil, false, errors.New("the edit changes nothing: the body and headers are the delivery's own (edit them, or replay it as it is)")
	}
	nd.BodySource = delivery.BodyEdited
	nd.Event = nd.Headers.Get("X-Github-Event")
	if e.Resign == nil || *e.Resign {
		// In the sender's own scheme, with its secret.
		scheme := provider.Detect(nd.Headers)
		if scheme == "" {
			scheme = provider.GitHub
		}
		secret := in.opts.Secret
		if sec := in.opts.SchemeSecrets[scheme]; len(sec) > 0 {
			secret = sec[0]
		}
		if secret == "" {
			if e.Resign != nil {
				return nil, false, errors.New("resign: this run has no secret for " + string(scheme) + " (give forward --secret)")
			}
		} else {
			signed, err := provider.Sign(scheme, secret, nd.Body, provider.Signing{ID: nd.Headers.Get("Webhook-Id")})
			if err != nil {
				return nil, false, err
			}
			for k, vs := range signed {
				nd.Headers[k] = vs
			}
			if scheme == provider.GitHub {
				nd.Headers.Del("X-Hub-Signature") // a legacy SHA-1 signature of the old body
			}
		}
	}
	return &nd, true, nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func (in *Inspector) captureFile(w http.ResponseWriter, r *http.Request) {
	it := in.find(w, r)
	if it == nil {
		return
	}
	data, err := capture.Marshal(captureOf(it))
	if err != nil {
		httpx.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", `attachment; filename="`+capture.FileName(it.r.Delivery)+`"`)
	w.Write(data)
}

// captureOf is it as a capture file `hookline replay` reads.
func captureOf(it *item) capture.File {
	d := *it.r.Delivery
	f := capture.File{Delivery: d, Action: it.r.Action, Source: "hookline inspector"}
	if f.ReceivedAt.IsZero() {
		f.ReceivedAt = it.r.Received
	}
	if it.edited {
		f.Note = "edited in the inspector"
	}
	return f
}

func (in *Inspector) curl(w http.ResponseWriter, r *http.Request) {
	it := in.find(w, r)
	if it == nil {
		return
	}
	target := in.opts.TargetURL
	if target == "" {
		target = "http://127.0.0.1:3000/"
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, capture.Curl(it.r.Delivery, target))
}

// export writes the visible list as NDJSON: one capture file a line,
// oldest first, which `hookline replay` reads once split (or with jq).
func (in *Inspector) export(w http.ResponseWriter, r *http.Request) {
	items := in.visible(filterOf(r))
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", `attachment; filename="hookline-deliveries.ndjson"`)
	for _, it := range slices.Backward(items) {
		data, err := capture.Marshal(captureOf(it))
		if err != nil {
			continue
		}
		var compact bytes.Buffer
		if json.Compact(&compact, data) == nil {
			compact.WriteByte('\n')
			w.Write(compact.Bytes())
		}
	}
}

// events streams a Summary for every new Result, and a proxy.Gap for every
// gap the relay reports (Server-Sent Events "delivery" and "gap").
func (in *Inspector) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpx.WriteError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	ch := make(chan liveEvent, 256)
	in.mu.Lock()
	in.subs[ch] = struct{}{}
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		if _, ok := in.subs[ch]; ok {
			delete(in.subs, ch)
			close(ch)
		}
		in.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	io.WriteString(w, ": hookline inspector\n\n")
	flusher.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-ch:
			if !ok {
				return
			}
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, ev.data)
			flusher.Flush()
		case <-ping.C:
			io.WriteString(w, ": ping\n\n")
			flusher.Flush()
		}
	}
}
