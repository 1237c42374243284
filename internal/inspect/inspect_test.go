package inspect_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/inspect"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/provider"
)

const secret = "inspector-secret"

// target is a local server that verifies signatures with the secret and
// answers 201 with a header and a body naming what it got, or 500 for a
// body holding "fail".
type target struct {
	*httptest.Server
	mu  sync.Mutex
	got [][]byte
	bad int
}

func newTarget(t *testing.T) *target {
	tg := &target{}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tg.mu.Lock()
		defer tg.mu.Unlock()
		if ok, _ := webhooks.Verify(secret, body, r.Header.Get("X-Hub-Signature-256")); !ok {
			tg.bad++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		tg.got = append(tg.got, body)
		if strings.Contains(string(body), "fail") {
			http.Error(w, "handler failed on purpose", http.StatusInternalServerError)
			return
		}
		w.Header().Set("X-Handled-By", "test-target")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "handled %d bytes", len(body))
	}))
	t.Cleanup(tg.Close)
	return tg
}

// setup is an inspector served on loopback, fed by a proxy.Client that
// forwards to tg.
type setup struct {
	in     *inspect.Inspector
	client *proxy.Client
	base   string
}

func start(t *testing.T, opts inspect.Options, tg *target) *setup {
	t.Helper()
	s := &setup{}
	opts.Secret = secret
	opts.Resend = func(ctx context.Context, d *delivery.Delivery) proxy.Result { return s.client.Handle(ctx, d) }
	s.in = inspect.New(opts)
	var err error
	s.client, err = proxy.New(proxy.Options{Targets: []proxy.Target{{URL: tg.URL}}, Secret: secret, OnResult: s.in.Add, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.in.Serve(t.Context(), ln)
	s.base = "http://" + ln.Addr().String()
	return s
}

// deliver hands a signed delivery of event to the client.
func (s *setup) deliver(t *testing.T, id, event string, body []byte) proxy.Result {
	t.Helper()
	sig, _ := webhooks.Sign(secret, body)
	h := http.Header{"X-Github-Delivery": {id}, "X-Github-Event": {event}, "Content-Type": {"application/json"}, "X-Hub-Signature-256": {sig}}
	return s.client.Handle(t.Context(), &delivery.Delivery{ID: id, Event: event, Headers: h, Body: body, BodySource: delivery.BodyBase64})
}

type listAnswer struct {
	Deliveries []inspect.Summary `json:"deliveries"`
	Counts     map[string]int    `json:"counts"`
	Evicted    int64             `json:"evicted"`
}

// read GETs path with the run's token, as the page does.
func (s *setup) read(t *testing.T, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Hookline-Token", s.in.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (s *setup) get(t *testing.T, path string, v any) *http.Response {
	t.Helper()
	resp := s.read(t, path)
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	return resp
}

func (s *setup) post(t *testing.T, path, token, origin, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.base+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("X-Hookline-Token", token)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func ids(ds []inspect.Summary) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.DeliveryID)
	}
	return out
}

func TestInspectorAPI(t *testing.T) {
	tg := newTarget(t)
	s := start(t, inspect.Options{}, tg)

	// Empty: lists, not nulls, for the page.
	resp := s.read(t, "/api/deliveries")
	emptyList, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(emptyList), `"deliveries":[]`) || !strings.Contains(string(emptyList), `"events":[]`) {
		t.Errorf("the empty list = %s, want [] for deliveries and events", emptyList)
	}

	// A live stream first: every new Result comes on it.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.base+"/api/events?token="+s.in.Token(), nil) // as the page's EventSource
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	live := make(chan inspect.Summary, 16)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var sum inspect.Summary
				json.Unmarshal([]byte(data), &sum)
				live <- sum
			}
		}
	}()

	s.deliver(t, "d1", "issues", []byte(`{"action":"opened","repository":{"full_name":"o/r"},"sender":{"login":"octocat"}}`))
	s.deliver(t, "d2", "push", []byte(`{"ref":"refs/heads/main","fail":true}`))
	bad := []byte(`{"action":"created"}`)
	s.client.Handle(t.Context(), &delivery.Delivery{ID: "d3", Event: "issue_comment", Body: bad, BodySource: delivery.BodyBase64,
		Headers: http.Header{"X-Github-Event": {"issue_comment"}, "X-Hub-Signature-256": {"sha256=" + strings.Repeat("0", 64)}}})
	binary := []byte{0xff, 0xfe, 0x00, 'x'}
	s.deliver(t, "d4", "ping", binary)

	for _, want := range []string{"d1", "d2", "d3", "d4"} {
		select {
		case got := <-live:
			if got.DeliveryID != want {
				t.Errorf("live stream: %s, want %s", got.DeliveryID, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("live stream: %s never came", want)
		}
	}

	var all listAnswer
	s.get(t, "/api/deliveries", &all)
	if got := strings.Join(ids(all.Deliveries), " "); got != "d4 d3 d2 d1" {
		t.Errorf("list = %s, want newest first: d4 d3 d2 d1", got)
	}
	if all.Counts["all"] != 4 || all.Counts[inspect.OutcomeBadSignature] != 1 || all.Counts[inspect.OutcomeTargetFailed] != 1 {
		t.Errorf("counts = %v", all.Counts)
	}
	first := all.Deliveries[3]
	if first.Action != "opened" || first.Repository != "o/r" || first.Sender != "octocat" || first.Verification != "verified" ||
		len(first.Targets) == 0 || first.Targets[0].Status != 201 || len(first.Targets[0].Attempts) != 1 || first.Targets[0].Attempts[0].Status != 201 {
		t.Errorf("d1 = %+v", first)
	}

	for q, want := range map[string]string{
		"event=push":                   "d2",
		"event=issues.opened":          "d1",
		"outcome=target-failed":        "d2",
		"outcome=bad-signature":        "d3",
		"q=OCTOCAT":                    "d1", // the body, in any case
		"q=x-github-event:+ping":       "d4", // a header
		"event=issues&outcome=skipped": "",
	} {
		var l listAnswer
		s.get(t, "/api/deliveries?"+q, &l)
		if got := strings.Join(ids(l.Deliveries), " "); got != want {
			t.Errorf("?%s = %q, want %q", q, got, want)
		}
	}

	// The detail: request, and the target's answer on the last attempt.
	var d2 inspect.Detail
	s.get(t, fmt.Sprintf("/api/deliveries/%d", all.Deliveries[2].ID), &d2)
	a := d2.Targets[0].Attempts
	if len(a) != 1 || a[0].Response == nil || a[0].Status != 500 || !strings.Contains(a[0].Response.Body, "handler failed on purpose") ||
		d2.Request.Body != `{"ref":"refs/heads/main","fail":true}` || d2.Request.Encoding != "text" || !d2.Targets[0].GitHubFailed {
		t.Errorf("detail of d2 = %+v", d2)
	}
	var d4 inspect.Detail
	s.get(t, fmt.Sprintf("/api/deliveries/%d", all.Deliveries[0].ID), &d4)
	if raw, _ := base64.StdEncoding.DecodeString(d4.Request.Body); d4.Request.Encoding != "base64" || string(raw) != string(binary) || d4.Request.Size != 4 {
		t.Errorf("a body that is not UTF-8: %q (%s), want base64 of %q", d4.Request.Body, d4.Request.Encoding, binary)
	}
	if r := d4.Targets[0].Attempts[0].Response; r == nil || r.Headers.Get("X-Handled-By") != "test-target" {
		t.Errorf("d4's answer headers = %+v", r)
	}

	// Replays need the token, and no foreign Origin.
	replay := fmt.Sprintf("/api/deliveries/%d/replay", first.ID)
	if code, body := s.post(t, replay, "", "", ""); code != http.StatusForbidden {
		t.Errorf("replay without the token: %d %s, want 403", code, body)
	}
	if code, body := s.post(t, replay, s.in.Token(), "http://evil.example", ""); code != http.StatusForbidden {
		t.Errorf("replay from another origin: %d %s, want 403", code, body)
	}
	code, body := s.post(t, replay, s.in.Token(), s.base, "")
	var again inspect.Detail
	json.Unmarshal(body, &again)
	if code != 200 || again.ReplayOf != first.ID || again.Edited || len(again.Targets) == 0 || again.Targets[0].Status != 201 || again.DeliveryID != "d1" {
		t.Errorf("replay = %d %s", code, body)
	}

	// Edited: a new body, signed again, that the verifying target takes.
	edited := `{"action":"opened","edited":"by hand"}`
	code, body = s.post(t, replay, s.in.Token(), "", fmt.Sprintf(`{"body":%q,"headers":{"X-Extra":["yes"],"X-One":"single","Content-Type":"application/json"}}`, edited))
	var ed inspect.Detail
	json.Unmarshal(body, &ed)
	if code != 200 || !ed.Edited || ed.Verification != "verified" || len(ed.Targets) == 0 || ed.Targets[0].Status != 201 ||
		ed.Request.Body != edited || ed.Request.Headers.Get("X-Extra") != "yes" || ed.Request.Headers.Get("X-One") != "single" {
		t.Errorf("edited replay = %d %s", code, body)
	}
	tg.mu.Lock()
	last := string(tg.got[len(tg.got)-1])
	tg.mu.Unlock()
	if last != edited || tg.bad != 0 {
		t.Errorf("the target got %q (%d with a bad signature), want the edited body, verified", last, tg.bad)
	}
	// The body read, sent back in the same shape (body, body_encoding) as
	// it was read, changes nothing: refused, nothing replayed. Before, it
	// was replayed unchanged and marked "edited".
	var orig inspect.Detail
	s.get(t, fmt.Sprintf("/api/deliveries/%d", first.ID), &orig)
	same, _ := json.Marshal(map[string]string{"body": orig.Request.Body, "body_encoding": orig.Request.Encoding})
	var before, after listAnswer
	s.get(t, "/api/deliveries", &before)
	code, body = s.post(t, replay, s.in.Token(), "", string(same))
	s.get(t, "/api/deliveries", &after)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "the edit changes nothing") || after.Counts["all"] != before.Counts["all"] {
		t.Errorf("an edit that changes nothing = %d %s (%d deliveries, %d before), want 400 and no replay", code, body, after.Counts["all"], before.Counts["all"])
	}
	// Edited without signing again: the pipeline refuses the old signature.
	code, body = s.post(t, replay, s.in.Token(), "", `{"body":"{}","resign":false}`)
	json.Unmarshal(body, &ed)
	if code != 200 || ed.Outcome != inspect.OutcomeBadSignature || !ed.Edited {
		t.Errorf("edited, not signed again = %d %s, want a bad signature", code, body)
	}

	// A capture file hookline replay reads, and curl.
	resp, _ = http.Get(s.base + fmt.Sprintf("/api/deliveries/%d/capture?token=%s", first.ID, s.in.Token())) // a download link
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if f, err := capture.Unmarshal(data); err != nil || f.ID != "d1" || !strings.Contains(string(f.Body), "octocat") {
		t.Errorf("capture = %v, %v", f, err)
	}
	resp = s.read(t, "/api/export?outcome=target-failed")
	data, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"d2"`) {
		t.Errorf("export of the failed = %q", data)
	}

	// Clear.
	req, _ = http.NewRequest("DELETE", s.base+"/api/deliveries", nil)
	req.Header.Set("X-Hookline-Token", s.in.Token())
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("clear: %v %v", resp, err)
	}
	var empty listAnswer
	s.get(t, "/api/deliveries", &empty)
	if len(empty.Deliveries) != 0 {
		t.Errorf("after clear: %v", ids(empty.Deliveries))
	}
}

// Every read of the API needs the run's token, in the header or (for a
// link, an EventSource) in ?token=: another user of the machine reaches
// loopback too. A change takes it only in the header. The page itself
// holds nothing of the run and opens without it.
func TestInspectorReadsNeedTheToken(t *testing.T) {
	s := start(t, inspect.Options{}, newTarget(t))
	s.deliver(t, "d1", "issues", []byte(`{"action":"opened","secret-ish":"payload"}`))
	for _, path := range []string{"/api/deliveries", "/api/deliveries/1", "/api/deliveries/1/capture", "/api/deliveries/1/curl", "/api/export", "/api/events", "/api/deliveries?token=wrong"} {
		resp, err := http.Get(s.base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), "payload") || !strings.Contains(string(body), "token") {
			t.Errorf("GET %s without the token = %d %.200s, want 403 saying it needs the token", path, resp.StatusCode, body)
		}
	}
	if resp := s.read(t, "/api/deliveries/1"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET with the token = %d, want 200", resp.StatusCode)
	}
	resp, err := http.Get(s.base + "/api/deliveries/1?token=" + s.in.Token())
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("GET with ?token= = %v %v, want 200 with Referrer-Policy: no-referrer", resp, err)
	}
	if code, body := s.post(t, "/api/deliveries/1/replay?token="+s.in.Token(), "", "", `{}`); code != http.StatusForbidden {
		t.Errorf("a replay with the token only in the query = %d %s, want 403", code, body)
	}
	for _, path := range []string{"/", "/app.js", "/app.css"} {
		if resp, err := http.Get(s.base + path); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without the token: %v %v, want the page", path, resp, err)
		} else {
			resp.Body.Close()
		}
	}
}

// Only the inspector's own address is answered (DNS rebinding).
func TestInspectorRefusesAForeignHost(t *testing.T) {
	s := start(t, inspect.Options{}, newTarget(t))
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.base, "http://"))
	for host, want := range map[string]int{"evil.example:" + port: http.StatusMisdirectedRequest, "localhost:" + port: 200, strings.TrimPrefix(s.base, "http://"): 200} {
		req, _ := http.NewRequest("GET", s.base+"/api/deliveries", nil)
		req.Header.Set("X-Hookline-Token", s.in.Token())
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// The oldest go at either bound: a count of deliveries, or their bytes.
func TestInspectorEvicts(t *testing.T) {
	tg := newTarget(t)
	s := start(t, inspect.Options{History: 3}, tg)
	for i := range 5 {
		s.deliver(t, fmt.Sprint("c", i), "ping", []byte(`{}`))
	}
	var l listAnswer
	s.get(t, "/api/deliveries", &l)
	if got := strings.Join(ids(l.Deliveries), " "); got != "c4 c3 c2" || l.Evicted != 2 {
		t.Errorf("with History 3: %s (evicted %d), want c4 c3 c2 (2)", got, l.Evicted)
	}

	s = start(t, inspect.Options{HistoryBytes: 6000}, tg)
	big := []byte(`{"pad":"` + strings.Repeat("x", 2000) + `"}`)
	for i := range 4 {
		s.deliver(t, fmt.Sprint("b", i), "ping", big)
	}
	s.get(t, "/api/deliveries", &l)
	if got := strings.Join(ids(l.Deliveries), " "); got != "b3 b2" {
		t.Errorf("with 6,000 bytes and deliveries of ~2.8 KB counted: %s, want b3 b2", got)
	}
	s.deliver(t, "huge", "ping", []byte(`{"pad":"`+strings.Repeat("y", 9000)+`"}`))
	s.get(t, "/api/deliveries", &l)
	if got := strings.Join(ids(l.Deliveries), " "); got != "huge" {
		t.Errorf("one larger than the bound: %s, want it alone", got)
	}
}

// An edited Stripe delivery is signed again as Stripe signs, with the
// run's Stripe secret: the pipeline and a Stripe-checking target take it.
func TestInspectorResignsInTheSendersScheme(t *testing.T) {
	const stripeSecret = "whsec_inspector_stripe"
	var bad int
	var mu sync.Mutex
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if provider.Verify(provider.Stripe, r.Header, b, provider.Check{Secrets: []string{stripeSecret}}) != nil {
			mu.Lock()
			bad++
			mu.Unlock()
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(tg.Close)
	var client *proxy.Client
	in := inspect.New(inspect.Options{SchemeSecrets: map[provider.Scheme][]string{provider.Stripe: {stripeSecret}},
		Resend: func(ctx context.Context, d *delivery.Delivery) proxy.Result { return client.Handle(ctx, d) }})
	client, _ = proxy.New(proxy.Options{Targets: []proxy.Target{{URL: tg.URL}}, SchemeSecrets: map[provider.Scheme][]string{provider.Stripe: {stripeSecret}}, OnResult: in.Add, Logger: slog.New(slog.DiscardHandler)})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go in.Serve(t.Context(), ln)
	body := []byte(`{"id":"evt_1","type":"charge.succeeded"}`)
	h, _ := provider.Sign(provider.Stripe, stripeSecret, body, provider.Signing{})
	client.Handle(t.Context(), &delivery.Delivery{ID: "st1", Headers: h, Body: body, BodySource: delivery.BodyBase64})
	s := &setup{in: in, client: client, base: "http://" + ln.Addr().String()}
	code, answer := s.post(t, "/api/deliveries/1/replay", in.Token(), "", `{"body":"{\"id\":\"evt_1\",\"type\":\"charge.refunded\"}"}`)
	var d inspect.Detail
	json.Unmarshal(answer, &d)
	if code != 200 || !d.Edited || d.Verification != "verified" || d.Scheme != "stripe" || d.Event != "charge.refunded" || len(d.Targets) == 0 || d.Targets[0].Status != 200 || bad != 0 {
		t.Errorf("edited Stripe replay = %d %s (target refused %d)", code, answer, bad)
	}
}

// A retried attempt's answer is shown with it: its headers, and what the
// retry read of its body.
func TestInspectorShowsEveryAttemptsAnswer(t *testing.T) {
	var calls atomic.Int32
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy, try again")
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "taken")
	}))
	t.Cleanup(tg.Close)
	in := inspect.New(inspect.Options{})
	client, _ := proxy.New(proxy.Options{Targets: []proxy.Target{{URL: tg.URL}}, OnResult: in.Add, Logger: slog.New(slog.DiscardHandler)})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go in.Serve(t.Context(), ln)
	client.Handle(t.Context(), &delivery.Delivery{ID: "r1", Event: "ping", Body: []byte(`{}`), Headers: http.Header{}})
	s := &setup{in: in, client: client, base: "http://" + ln.Addr().String()}
	var d inspect.Detail
	s.get(t, "/api/deliveries/1", &d)
	a := d.Targets[0].Attempts
	if len(a) != 2 || a[0].Response == nil || a[0].Response.Body != "busy, try again" || a[0].Response.Headers.Get("Retry-After") != "0" ||
		a[1].Response == nil || a[1].Response.Body != "taken" || a[1].Status != 201 {
		t.Errorf("attempts = %+v", a)
	}
}

// TestInspectorShowsEveryTarget: with several targets, the list shows each
// target's verdict, a target that refused makes the outcome "target
// failed", and the detail holds each target's answer.
func TestInspectorShowsEveryTarget(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "fine") }))
	t.Cleanup(ok.Close)
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "boom")
	}))
	t.Cleanup(refusing.Close)
	in := inspect.New(inspect.Options{})
	client, err := proxy.New(proxy.Options{Targets: []proxy.Target{{Name: "app", URL: ok.URL}, {Name: "worker", URL: refusing.URL}}, OnResult: in.Add, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go in.Serve(t.Context(), ln)
	client.Handle(t.Context(), &delivery.Delivery{ID: "m1", Event: "ping", Body: []byte(`{}`), Headers: http.Header{}})
	s := &setup{in: in, client: client, base: "http://" + ln.Addr().String()}
	var list listAnswer
	s.get(t, "/api/deliveries", &list)
	if len(list.Deliveries) != 1 || list.Deliveries[0].Outcome != inspect.OutcomeTargetFailed || len(list.Deliveries[0].Targets) != 2 {
		t.Fatalf("list %+v", list.Deliveries)
	}
	var d inspect.Detail
	s.get(t, "/api/deliveries/1", &d)
	if len(d.Targets) != 2 || d.Targets[0].Name != "app" || d.Targets[1].Status != 500 ||
		d.Targets[0].Attempts[0].Response == nil || d.Targets[0].Attempts[0].Response.Body != "fine" || d.Targets[1].Attempts[0].Response.Body != "boom" {
		t.Errorf("detail targets %+v", d.Targets)
	}
}

// A gap the relay reports reaches the pages at once (an event on the live
// stream) and the list counts it, with the deliveries lost.
func TestInspectorGap(t *testing.T) {
	s := start(t, inspect.Options{}, newTarget(t))
	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.base+"/api/events?token="+s.in.Token(), nil) // as the page's EventSource
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	told := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: ") {
				told <- sc.Text()
			}
		}
	}()
	s.in.AddGap(proxy.Gap{AfterID: "1", OldestID: "16", Count: 14, Reason: "expired"})
	s.in.AddGap(proxy.Gap{AfterID: "20", Count: 0, Reason: "unknown", Message: "the relay restarted and its history is new"})
	for range 2 {
		select {
		case ev := <-told:
			if ev != "event: gap" {
				t.Errorf("the live stream said %q, want event: gap", ev)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the live stream said nothing of the gap")
		}
	}
	resp := s.read(t, "/api/deliveries")
	defer resp.Body.Close()
	var list struct {
		Gaps struct {
			Count, Lost int64
			Message     string
		}
	}
	json.NewDecoder(resp.Body).Decode(&list)
	if list.Gaps.Count != 2 || list.Gaps.Lost != 14 || !strings.Contains(list.Gaps.Message, "relay restarted") {
		t.Errorf("gaps = %+v, want 2 gaps, 14 lost, the last one's message", list.Gaps)
	}
}

// A sender's handshake is listed as skipped: it was not passed on, and
// it is no unverified delivery.
func TestInspectorListsAHandshakeAsSkipped(t *testing.T) {
	s := start(t, inspect.Options{}, newTarget(t))
	body := []byte(`{"token":"x","challenge":"3eZbrw1aBm2rZ","type":"url_verification"}`)
	h, _ := provider.Sign(provider.Slack, "8f742231b10e8888abcd99yyyzzz85a5", body, provider.Signing{})
	r := s.client.Handle(t.Context(), &delivery.Delivery{Headers: h, Body: body, BodySource: delivery.BodyBase64})
	if r.Handshake == "" {
		t.Fatalf("the client did not take it for a handshake: %+v", r)
	}
	var l listAnswer
	s.get(t, "/api/deliveries", &l)
	if len(l.Deliveries) != 1 || l.Deliveries[0].Outcome != inspect.OutcomeSkipped {
		t.Errorf("the inspector lists %+v, want the handshake as skipped", l.Deliveries)
	}
}

// A replay's patch changes the members it names, byte for byte, checked
// against the payload's type; what JSON Patch can do and this cannot is
// refused, saying so.
func TestInspectorReplayPatch(t *testing.T) {
	tg := newTarget(t)
	s := start(t, inspect.Options{}, tg)
	s.deliver(t, "p-1", "issues", []byte(`{"action":"opened", "issue":{"number":1,"title":"fail"},"repository":{"full_name":"o/r"}}`))
	code, body := s.post(t, "/api/deliveries/1/replay", s.in.Token(), "", `{"patch":[{"op":"replace","path":"/issue/title","value":"fixed"},{"op":"add","path":"/issue/body","value":"new"},{"op":"remove","path":"/repository"}]}`)
	var d inspect.Detail
	json.Unmarshal(body, &d)
	if want := `{"action":"opened", "issue":{"number":1,"title":"fixed","body":"new"}}`; code != http.StatusOK || d.Request.Body != want || d.Outcome != inspect.OutcomeVerified || !d.Edited {
		t.Errorf("replay with a patch: %d, body %q, outcome %s; want 200, %q, verified and edited", code, d.Request.Body, d.Outcome, want)
	}
	var orig inspect.Detail
	s.get(t, "/api/deliveries/1", &orig)
	if len(orig.Replays) != 1 || orig.Replays[0] != d.ID {
		t.Errorf("the original's replays = %v, want [%d]", orig.Replays, d.ID)
	}
	for patch, want := range map[string]string{
		`[{"op":"move","from":"/a","path":"/b"}]`:               "the op is add, replace or remove",
		`[{"op":"add","path":"/commits/-","value":1}]`:          "cannot be patched here",
		`[{"op":"replace","path":"issue/title","value":"x"}]`:   "a JSON Pointer",
		`[{"op":"replace","path":"/issue/number","value":"x"}]`: "issue.number",
		`[{"op":"replace","path":"/issue/title"}]`:              "give a value",
	} {
		code, body := s.post(t, "/api/deliveries/1/replay", s.in.Token(), "", `{"patch":`+patch+`}`)
		if code != http.StatusBadRequest || !strings.Contains(string(body), want) {
			t.Errorf("patch %s: %d %s; want 400 saying %q", patch, code, body, want)
		}
	}
}

// GET /api/deliveries?after=&wait= waits for a matching delivery, and
// answers an empty list when the time is up; after=latest is the newest
// when the request arrives. X-Hookline-Call is told to OnCall.
func TestInspectorLongPoll(t *testing.T) {
	tg := newTarget(t)
	calls := make(chan string, 4)
	s := start(t, inspect.Options{OnCall: func(c string) { calls <- c }}, tg)
	s.deliver(t, "lp-1", "issues", []byte(`{"action":"opened"}`))

	var empty listAnswer
	s.get(t, "/api/deliveries?after=latest&wait=10ms", &empty)
	if len(empty.Deliveries) != 0 {
		t.Errorf("after=latest with nothing new gave %v", ids(empty.Deliveries))
	}
	got := make(chan listAnswer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, s.base+"/api/deliveries?after=latest&wait=60s&event=push", nil)
		req.Header.Set("X-Hookline-Token", s.in.Token())
		req.Header.Set("X-Hookline-Call", "test: wait\tfor push")
		var a listAnswer
		if resp, err := http.DefaultClient.Do(req); err == nil {
			json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
		}
		got <- a
	}()
	select {
	case c := <-calls:
		if c != "test: wait\tfor push" {
			t.Errorf("OnCall got %q, want the header's text", c)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("OnCall was not told of the call")
	}
	s.deliver(t, "lp-2", "issues", []byte(`{"action":"closed"}`)) // not a push: the wait goes on
	s.deliver(t, "lp-3", "push", []byte(`{"ref":"refs/heads/main"}`))
	select {
	case a := <-got:
		if got := ids(a.Deliveries); len(got) != 1 || got[0] != "lp-3" {
			t.Errorf("the wait gave %v, want [lp-3]", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the wait did not end after a matching delivery")
	}
	if resp := s.read(t, "/api/deliveries?wait=1h"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("wait=1h: %d, want 400", resp.StatusCode)
	}
}
