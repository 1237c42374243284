package interop

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/relay"
)

// These tests run the real smee-client (its CLI, pinned in package.json)
// against a relay.Server, as a user would: `smee --url <channel> --target
// <local server>`.

const (
	smeeBin     = "node_modules/smee-client/bin/smee.js"
	smeeWait    = 60 * time.Second // bounds every wait; never a timing assertion
	smeeSecret  = "hookline relay interop"
	smeeBatches = 2
	smeePerRun  = 100 // deliveries per batch: 200 in all
)

// smeeRequest is one request smee-client made to the target.
type smeeRequest struct {
	method, uri string
	header      http.Header
	body        []byte
}

// cutProxy forwards TCP connections to addr and can cut all of them at once,
// as a network outage would, while still accepting new ones.
type cutProxy struct {
	ln    net.Listener
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, addr string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, addr: addr}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestSmeeClientForwardsEveryDelivery posts 200 deliveries to a channel that
// smee-client subscribes to, with a connection cut in between, and checks
// that every one reaches the target with its headers and JSON body (byte for
// byte for compact JSON, so that the GitHub signature still verifies). The
// cut shows that smee-client resumes with Last-Event-ID from the relay's
// history and loses nothing.
func TestSmeeClientForwardsEveryDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an interop test (smee-client)")
	}
	node := requireNode(t)
	rl := relaytest.Start(t, relay.Options{HistoryCount: 500})
	srv, base := rl.Server, rl.Base
	channelName := srv.NewChannel()
	proxy := newCutProxy(t, strings.TrimPrefix(base, "http://"))

	got := make(chan smeeRequest, smeeBatches*smeePerRun+10)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- smeeRequest{r.Method, r.RequestURI, r.Header.Clone(), body}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(target.Close)

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, smeeBin, "--url", "http://"+proxy.ln.Addr().String()+"/"+channelName, "--target", target.URL+"/hook")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting smee-client: %v", err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	smeeWaitUntil(t, "smee-client to subscribe", func() bool { return srv.Stats().Subscribers == 1 }, &out)

	want := map[string][]byte{} // delivery id -> body
	wantURI := map[string]string{}
	seen := map[string]bool{}
	collect := func(n int) {
		t.Helper()
		timeout := time.After(smeeWait)
		for len(seen) < n {
			select {
			case r := <-got:
				id := r.header.Get("X-GitHub-Delivery")
				if seen[id] {
					t.Errorf("delivery %s arrived twice", id)
				}
				seen[id] = true
				checkSmeeRequest(t, r, want[id], wantURI[id])
			case <-timeout:
				t.Fatalf("%d of %d deliveries reached the target within %s; smee-client said:\n%s", len(seen), n, smeeWait, out.String())
			}
		}
	}
	for batch := 0; batch < smeeBatches; batch++ {
		if batch > 0 {
			// A network cut: smee-client's EventSource reconnects (after
			// 3 s) with Last-Event-ID while these deliveries are posted.
			proxy.cut()
		}
		for i := 0; i < smeePerRun; i++ {
			n := batch*smeePerRun + i
			id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
			body := fmt.Appendf(nil, `{"action":"opened","number":%d,"issue":{"title":"issue %d","labels":["bug","p%d"]},"sender":{"login":"octocat"}}`, n, n, n%3)
			query := ""
			if n%10 == 0 {
				query = fmt.Sprintf("?n=%d", n)
			}
			want[id], wantURI[id] = body, "/hook"+query
			postSigned(t, base+"/"+channelName+query, id, body)
		}
		collect((batch + 1) * smeePerRun)
	}
}

// postSigned posts a GitHub-style delivery, with the headers a relay must
// keep away from smee-client mixed in.
func postSigned(t *testing.T, url, id string, body []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, []byte(smeeSecret))
	mac.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/interop")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	// fetch in smee-client throws on these; the relay must not pass them on.
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	req.Header.Set("Keep-Alive", "timeout=5")
	req.Header.Set("Upgrade", "h2c")
	req.Header.Set("Connection", "Upgrade, X-Hop")
	req.Header.Set("X-Hop", "hop-by-hop")
	req.Header.Set("Body", "not the body")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s = %d, want 200", url, resp.StatusCode)
	}
}

// checkSmeeRequest checks one request smee-client made to the target.
func checkSmeeRequest(t *testing.T, r smeeRequest, body []byte, uri string) {
	t.Helper()
	id := r.header.Get("X-GitHub-Delivery")
	if body == nil {
		t.Errorf("the target got a delivery nobody posted: %q", id)
		return
	}
	if r.method != http.MethodPost || r.uri != uri {
		t.Errorf("delivery %s: %s %s, want POST %s", id, r.method, r.uri, uri)
	}
	if !bytes.Equal(r.body, body) {
		t.Errorf("delivery %s: body\n%s\nwant\n%s", id, r.body, body)
	}
	mac := hmac.New(sha256.New, []byte(smeeSecret))
	mac.Write(r.body)
	if sig := r.header.Get("X-Hub-Signature-256"); sig != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
		t.Errorf("delivery %s: signature %q does not verify over the body the target got", id, sig)
	}
	for name, want := range map[string]string{
		"X-GitHub-Event": "issues",
		"User-Agent":     "GitHub-Hookshot/interop",
		"Content-Type":   "application/json",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("delivery %s: %s = %q, want %q", id, name, got, want)
		}
	}
	// fetch sets Sec-Fetch-Mode: cors itself; "navigate" would have made it
	// throw, losing the delivery.
	if mode := r.header.Get("Sec-Fetch-Mode"); mode == "navigate" {
		t.Errorf("delivery %s: the target got Sec-Fetch-Mode: navigate, which the relay must drop", id)
	}
	for _, name := range []string{"X-Hop", "Body", "Bodyb", "Rawdata"} {
		if v := r.header.Get(name); v != "" {
			t.Errorf("delivery %s: the target got %s: %q, which the relay must drop", id, name, v)
		}
	}
}

// waitUntil polls cond; out is shown if it never holds.
func smeeWaitUntil(t *testing.T, what string, cond func() bool, out *bytes.Buffer) {
	t.Helper()
	if !testenv.Polled(20*time.Millisecond, cond) { // what the smee-client process did is only looked at
		t.Fatalf("waiting for %s: not after %s; output:\n%s", what, testenv.PollGuard, out.String())
	}
}

// TestSmeeClientCreatesChannel checks that smee-client's channel creation
// (HEAD /new with redirect: manual, then the Location) works on the relay.
func TestSmeeClientCreatesChannel(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an interop test (smee-client)")
	}
	node := requireNode(t)
	rl := relaytest.Start(t, relay.Options{})
	base := rl.Base
	script := `import Client from "smee-client";
const url = await Client.createChannel({ newChannelUrl: process.argv[1] });
console.log(url);`
	ctx, cancel := context.WithTimeout(context.Background(), smeeWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--input-type=module", "-e", script, base+"/new")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("smee-client createChannel: %v\n%s", err, out)
	}
	channel := strings.TrimSpace(string(out))
	if !strings.HasPrefix(channel, base+"/") || len(channel) != len(base)+23 {
		t.Errorf("createChannel = %q, want %s/ and a 22-character name", channel, base)
	}
}
