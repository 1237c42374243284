package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/webhooks"
)

// mcpTarget is a local server as a developer has it: it verifies
// X-Hub-Signature-256 and fails (500) on an issue titled "crash".
type mcpTarget struct {
	*httptest.Server
	mu    sync.Mutex
	debug []string // X-Debug of each request
}

func newMCPTarget(t *testing.T, secret string) *mcpTarget {
	mt := &mcpTarget{}
	mt.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mt.mu.Lock()
		mt.debug = append(mt.debug, r.Header.Get("X-Debug"))
		mt.mu.Unlock()
		if ok, _ := webhooks.Verify(secret, body, r.Header.Get(webhooks.HeaderSignature256)); !ok {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p struct {
			Issue struct {
				Title string `json:"title"`
			} `json:"issue"`
		}
		json.Unmarshal(body, &p)
		if p.Issue.Title == "crash" {
			http.Error(w, "panic: the title crashed the handler", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(mt.Close)
	return mt
}

// mcpSession runs `hookline mcp args...` in this process on pipes and
// connects the Go SDK's client to it, named name; updates receives the
// URIs of resource updates.
func mcpSession(t *testing.T, name string, updates chan<- string, args ...string) *mcp.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		var errOut relaytest.Buffer
		code := Run(ctx, append([]string{"hookline", "mcp"}, args...), inR, outW, &errOut)
		outW.Close()
		done <- code
	}()
	opts := &mcp.ClientOptions{}
	if updates != nil {
		opts.ResourceUpdatedHandler = func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updates <- req.Params.URI
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		cancel()
		t.Fatalf("connecting to hookline mcp: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		select {
		case code := <-done:
			if code != ExitOK {
				t.Errorf("hookline mcp exited %d when its client left", code)
			}
		case <-time.After(hangGuard):
			t.Error("hookline mcp did not end when its client left")
		}
		cancel()
	})
	return cs
}

// call calls tool with args and returns its text (the JSON of its
// result); outputs collects every text a tool gave.
func call(t *testing.T, cs *mcp.ClientSession, outputs *[]string, tool string, args any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	*outputs = append(*outputs, b.String())
	return b.String(), res.IsError
}

// The fix loop an agent runs, through hookline mcp and the Go SDK's own
// client: find the delivery the server refused, read the answer, replay it
// edited (a header and a member of the body; the run signs it again and
// the server's check passes), watch the delivery's resource change, send a
// test event, wait for the next delivery. The secret is in no output, the
// trace shows each call, and what a tool cannot do is refused with why.
func TestMCPFixLoop(t *testing.T) {
	const secret = "It's a Secret to Everybody"
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	target := newMCPTarget(t, secret)
	rl := relaytest.Start(t, relay.Options{})
	f := startForward(t, "--url", rl.Channel, "--no-state", "--secret", secret, "--target", target.URL, "--inspect", "127.0.0.1:0")
	f.waitErr(t, "connected to")
	publish := func(n int, title string) {
		body := []byte(`{"action":"opened","issue":{"number":` + string(rune('0'+n)) + `,"title":"` + title + `"},"repository":{"full_name":"octo/hello"},"sender":{"login":"octocat"}}`)
		sig, _ := webhooks.Sign(secret, body)
		rl.Publish(t, nil, n, body, webhooks.HeaderSignature256, sig)
	}
	publish(1, "crash")
	f.waitOutLines(t, 1)

	updates := make(chan string, 16)
	cs := mcpSession(t, "go-test", updates)
	var outputs []string
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := []string{"get_delivery", "list_deliveries", "replay_delivery", "replay_edited", "send_test_event", "wait_for_delivery"}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}

	text, _ := call(t, cs, &outputs, "list_deliveries", map[string]any{"outcome": "target-failed"})
	var list struct {
		Deliveries []struct {
			ID      int64 `json:"id"`
			Targets []struct {
				Status int `json:"status"`
			} `json:"targets"`
		} `json:"deliveries"`
	}
	if err := json.Unmarshal([]byte(text), &list); err != nil || len(list.Deliveries) != 1 || list.Deliveries[0].Targets[0].Status != 500 {
		t.Fatalf("list_deliveries outcome target-failed: %s (%v); want the delivery the server answered 500", text, err)
	}
	id := list.Deliveries[0].ID

	text, _ = call(t, cs, &outputs, "get_delivery", map[string]any{"id": id})
	if !strings.Contains(text, "panic: the title crashed the handler") || !strings.Contains(text, `\"title\":\"crash\"`) {
		t.Errorf("get_delivery gives neither the answer's body nor the request's:\n%s", text)
	}
	uri := fmt.Sprintf("hookline://deliveries/%d", id)
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribing to %s: %v", uri, err)
	}

	text, isErr := call(t, cs, &outputs, "replay_edited", map[string]any{
		"id":      id,
		"patch":   []map[string]any{{"op": "replace", "path": "/issue/title", "value": "fixed"}},
		"headers": map[string][]string{"X-Debug": {"1"}},
	})
	if isErr || !strings.Contains(text, `"outcome":"verified"`) || !strings.Contains(text, `"status":200`) || !strings.Contains(text, `\"title\":\"fixed\"`) {
		t.Errorf("replay_edited: %s; want the edited delivery verified and answered 200", text)
	}
	target.mu.Lock()
	if !slices.Contains(target.debug, "1") {
		t.Errorf("the server got no X-Debug: 1 (X-Debug of each request: %q)", target.debug)
	}
	target.mu.Unlock()
	select {
	case got := <-updates:
		if got != uri {
			t.Errorf("resource update for %s, want %s", got, uri)
		}
	case <-time.After(hangGuard):
		t.Fatalf("no update of %s after its replay", uri)
	}
	listed, err := cs.ListResources(context.Background(), nil)
	if err != nil || !slices.ContainsFunc(listed.Resources, func(r *mcp.Resource) bool { return r.URI == uri }) {
		t.Errorf("resources/list: %v %+v; want %s among them", err, listed, uri)
	}
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, `"replays": [`) {
		t.Errorf("reading %s after its replay: %v %+v; want its replays", uri, err, res)
	}

	text, isErr = call(t, cs, &outputs, "send_test_event", map[string]any{
		"event": "issues.opened", "patch": []map[string]any{{"op": "replace", "path": "/issue/title", "value": "from the agent"}},
	})
	if isErr || !strings.Contains(text, `"sent":true`) || !strings.Contains(text, `"status":200`) || !strings.Contains(text, "from the agent") {
		t.Errorf("send_test_event: %s; want a test event verified by the server", text)
	}

	waited := make(chan string, 1)
	go func() {
		text, _ := call(t, cs, &outputs, "wait_for_delivery", map[string]any{"event": "issues.opened", "timeout_seconds": 60})
		waited <- text
	}()
	f.waitOut(t, "agent go-test: wait_for_delivery") // the wait has begun
	publish(2, "after the wait began")
	select {
	case text := <-waited:
		if !strings.Contains(text, `"delivery_id":"`+relaytest.ID(2)+`"`) {
			t.Errorf("wait_for_delivery: %s; want the delivery published after it began", text)
		}
	case <-time.After(hangGuard):
		t.Fatal("wait_for_delivery did not return after a delivery")
	}

	// Refused, with why.
	if text, isErr := call(t, cs, &outputs, "replay_delivery", map[string]any{"id": id, "url": "http://127.0.0.1:1/elsewhere"}); !isErr || !strings.Contains(text, "a replay goes only to this run's own targets ("+target.URL+")") {
		t.Errorf("replay_delivery to a URL of the caller's: %s; want it refused (replays go to the run's targets)", text)
	}
	if text, isErr := call(t, cs, &outputs, "send_test_event", map[string]any{"event": "issues.openned"}); !isErr || !strings.Contains(text, "did you mean issues.opened") {
		t.Errorf("send_test_event with a typo: %s; want it refused with the nearest name", text)
	}
	bad := mcpSession(t, "go-test", nil, "--inspect-url", f.inspector(t)+"/?token=WRONG")
	if text, isErr := call(t, bad, &outputs, "list_deliveries", map[string]any{}); !isErr || !strings.Contains(text, "the run's token") {
		t.Errorf("a call with the wrong token: %s; want it refused, saying the token is needed", text)
	}
	for _, out := range outputs {
		if strings.Contains(out, secret) {
			t.Errorf("a tool's output holds the secret: %s", out)
		}
	}

	// Each call is a line of forward's trace, naming the client.
	for _, line := range []string{"agent go-test: list_deliveries outcome=\"target-failed\"", "agent go-test: get_delivery #1", "agent go-test: replay_edited #1 (replace /issue/title, header X-Debug)", "agent go-test: send_test_event issues.opened"} {
		if !strings.Contains(f.out.String(), line) {
			t.Errorf("the trace has no line %q:\n%s", line, f.out.String())
		}
	}

	ro := mcpSession(t, "go-test", nil, "--read-only")
	tools, err = ro.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if strings.HasPrefix(tool.Name, "replay") || strings.HasPrefix(tool.Name, "send") {
			t.Errorf("--read-only lists %s", tool.Name)
		}
	}
}

// inspector returns the inspector's base URL forward printed.
func (f *forwardRun) inspector(t *testing.T) string {
	t.Helper()
	text := f.err.String()
	i := strings.Index(text, "inspector: ")
	if i < 0 {
		t.Fatalf("no inspector URL:\n%s", text)
	}
	u, _, _ := strings.Cut(text[i+len("inspector: "):], "/?token=")
	return u
}

// With no forward running, a tool call says what to do.
func TestMCPWithoutForward(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	cs := mcpSession(t, "go-test", nil)
	var outputs []string
	if text, isErr := call(t, cs, &outputs, "list_deliveries", map[string]any{}); !isErr || !strings.Contains(text, "no hookline forward with an inspector is running for this user") || !strings.Contains(text, "start one, such as `hookline forward --target") {
		t.Errorf("list_deliveries with no forward: %s; want an error saying to start forward", text)
	}
}

// forward --mcp is forward and the MCP server in one process: the
// protocol on stdin and stdout, the trace on stderr, and forward stops
// when the agent leaves. --mcp-read-only leaves out the tools that send.
func TestForwardMCP(t *testing.T) {
	const secret = "It's a Secret to Everybody"
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	target := newMCPTarget(t, secret)
	rl := relaytest.Start(t, relay.Options{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errOut relaytest.Buffer
	done := make(chan int, 1)
	go func() {
		code := Run(context.Background(), []string{"hookline", "forward", "--no-color", "--url", rl.Channel, "--no-state", "--secret", secret,
			"--target", target.URL, "--inspect", "127.0.0.1:0", "--mcp", "--mcp-read-only"}, inR, outW, &errOut)
		outW.Close()
		done <- code
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "one-process", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connecting to forward --mcp: %v\n%s", err, errOut.String())
	}
	waitSaid(t, "stderr", &errOut, "connected to")
	body := []byte(`{"action":"opened","issue":{"number":1,"title":"hello"}}`)
	sig, _ := webhooks.Sign(secret, body)
	rl.Publish(t, nil, 1, body, webhooks.HeaderSignature256, sig)
	waitSaid(t, "stderr", &errOut, "issues.opened")
	var outputs []string
	if text, isErr := call(t, cs, &outputs, "list_deliveries", map[string]any{}); isErr || !strings.Contains(text, `"delivery_id":"`+relaytest.ID(1)+`"`) {
		t.Errorf("list_deliveries through forward --mcp: %s", text)
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(tools.Tools) != 3 {
		t.Errorf("forward --mcp-read-only lists %d tools (%v), want the 3 that only read", len(tools.Tools), err)
	}
	waitSaid(t, "stderr", &errOut, "agent one-process: list_deliveries")
	cs.Close()
	inW.Close()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("forward --mcp exited %d when the agent left:\n%s", code, errOut.String())
		}
	case <-time.After(hangGuard):
		t.Fatalf("forward --mcp did not stop when the agent left:\n%s", errOut.String())
	}
}
