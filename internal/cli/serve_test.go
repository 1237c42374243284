package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/redistest"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
)

var (
	listeningRE = regexp.MustCompile(`hookline relay listening on (http://127\.0\.0\.1:\d+)\n`)
	channelRE   = regexp.MustCompile(`new channel: (\S+)\n`)
)

// startServe runs `hookline serve args...` until the returned stop is
// called; it returns the relay's base URL, the printed channel URL, and stop,
// which cancels the command and returns its exit code and output.
func startServe(t *testing.T, args ...string) (base, channel string, stop func() (int, string, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut relaytest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, append([]string{"hookline", "serve"}, args...), strings.NewReader(""), &out, &errOut)
	}()
	// A hang ends serve, which ends the wait.
	guard := time.AfterFunc(hangGuard, cancel)
	text, ok := relaytest.Await(&out, done, func(text string) bool {
		return listeningRE.MatchString(text) && channelRE.MatchString(text)
	})
	guard.Stop()
	if !ok {
		cancel()
		t.Fatalf("serve exited before printing its URLs:\n%s%s", text, errOut.String())
	}
	base, channel = listeningRE.FindStringSubmatch(text)[1], channelRE.FindStringSubmatch(text)[1]
	var once sync.Once
	var code int
	stop = func() (int, string, string) {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("serve did not stop after its context ended")
			}
		})
		return code, out.String(), errOut.String()
	}
	t.Cleanup(func() { stop() })
	return base, channel, stop
}

func TestServeRelaysAndStops(t *testing.T) {
	base, channel, stop := startServe(t, "--addr", "127.0.0.1:0", "--ping-interval", "1s", "--history", "5")
	if !strings.HasPrefix(channel, base+"/") || len(channel) != len(base)+23 {
		t.Errorf("channel URL %q, want %s/ and a 22-character name", channel, base)
	}

	req, _ := http.NewRequest(http.MethodGet, channel, nil)
	req.Header.Set("Accept", "text/event-stream")
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()

	resp, err := http.Post(channel, "application/json", strings.NewReader(`{"zen":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST = %d, want 200", resp.StatusCode)
	}
	resp, err = http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz = %d, want 200", resp.StatusCode)
	}

	code, out, errOut := stop()
	if code != ExitOK {
		t.Errorf("exit code = %d, want 0; stderr:\n%s", code, errOut)
	}
	// The stream ended cleanly on shutdown, after the delivery.
	b, err := io.ReadAll(stream.Body)
	if err != nil || !strings.Contains(string(b), "event: ready\n") || !strings.Contains(string(b), "id: 1\n") {
		t.Errorf("stream read %q, %v; want ready, the delivery, then a clean end", b, err)
	}
	if !strings.Contains(out, "hookline relay stopped after") || !strings.Contains(out, "1 deliveries relayed") {
		t.Errorf("output lacks the summary:\n%s", out)
	}
	if strings.Contains(errOut, "msg=delivery") {
		t.Errorf("stderr logs a delivery without --verbose:\n%s", errOut)
	}
}

// With --verbose, the relay logs every delivery.
func TestServeVerbose(t *testing.T) {
	_, channel, stop := startServe(t, "--addr", "127.0.0.1:0", "-v")
	resp, err := http.Post(channel, "application/json", strings.NewReader(`{"zen":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, _, errOut := stop(); !strings.Contains(errOut, "msg=delivery") || !strings.Contains(errOut, "id=1") {
		t.Errorf("stderr lacks the delivery's line:\n%s", errOut)
	}
}

func TestServePublicURL(t *testing.T) {
	base, channel, _ := startServe(t, "--addr", "127.0.0.1:0", "--public-url", "https://relay.example.com/")
	if !strings.HasPrefix(channel, "https://relay.example.com/") {
		t.Errorf("channel URL %q, want it on the public URL", channel)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(base + "/new")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "https://relay.example.com/") {
		t.Errorf("GET /new Location = %q, want the public URL", loc)
	}
}

func TestServeEnvironment(t *testing.T) {
	t.Setenv("HOOKLINE_ADDR", "127.0.0.1:0")
	t.Setenv("HOOKLINE_PUBLIC_URL", "http://env.example:8080")
	_, channel, _ := startServe(t)
	if !strings.HasPrefix(channel, "http://env.example:8080/") {
		t.Errorf("channel URL %q, want HOOKLINE_PUBLIC_URL's", channel)
	}
}

func TestServeListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errOut := run(t, "serve", "--addr", ln.Addr().String())
	if code != ExitFailure || !strings.Contains(errOut, "cannot listen on "+ln.Addr().String()) || !strings.Contains(errOut, "pick another --addr") {
		t.Errorf("serve on a busy port: exit %d, stderr %q; want 1 and a hint", code, errOut)
	}
}

func TestServeUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"port only", []string{"--addr", "3333"}, `--addr "3333" has no host; did you mean 127.0.0.1:3333?`},
		{"host only", []string{"--addr", "localhost"}, `--addr "localhost" is not host:port; did you mean localhost:3333?`},
		{"bad port", []string{"--addr", "127.0.0.1:99999"}, `--addr "127.0.0.1:99999" has no valid port (0 to 65535)`},
		{"public URL without scheme", []string{"--public-url", "relay.example.com"}, `--public-url "relay.example.com" has no scheme; did you mean https://relay.example.com?`},
		{"public URL host:port", []string{"--public-url", "localhost:3333"}, `--public-url "localhost:3333" has no scheme; did you mean https://localhost:3333?`},
		{"public URL other scheme", []string{"--public-url", "ftp://x"}, `--public-url "ftp://x" must be an http or https URL`},
		{"public URL with query", []string{"--public-url", "https://x/?a=1"}, `--public-url "https://x/?a=1" must not have a user, query or fragment`},
		{"ping interval zero", []string{"--ping-interval", "0s"}, `--ping-interval 0s must be positive, such as 30s`},
		{"ping interval bogus", []string{"--ping-interval", "soon"}, `serve: --ping-interval "soon": want a duration such as 5s, 30s or 2m`},
		{"history negative", []string{"--history", "-1"}, `--history -1 must not be negative (0: no count limit)`},
		{"history bytes unit", []string{"--history-bytes", "10XB"}, `--history-bytes: "10XB" has an unknown unit; use B, KiB, MiB, GiB (or KB, MB, GB)`},
		{"total history bytes", []string{"--total-history-bytes", "lots"}, `--total-history-bytes: "lots" is not a size; write it like 50MiB or 1048576`},
		{"max subscribers", []string{"--max-subscribers", "0"}, `--max-subscribers 0 must be at least 1`},
		{"empty data dir", []string{"--data-dir", " "}, `--data-dir is empty; give a directory, or leave the flag out to keep the history in memory`},
		{"argument", []string{"extra"}, `serve takes no arguments, got "extra"`},
		{"redis and data dir", []string{"--redis-url", "redis://127.0.0.1:6379", "--data-dir", "/tmp/x"}, `--redis-url and --data-dir cannot be used together: with Redis the history is kept in Redis, shared by every relay; drop --data-dir`},
		{"redis URL without scheme", []string{"--redis-url", "localhost:6379"}, `--redis-url "localhost:6379" has no scheme; did you mean redis://localhost:6379?`},
		{"redis URL without scheme, password hidden", []string{"--redis-url", ":s3cret@10.0.0.7:6379"}, `--redis-url "xxxxx@10.0.0.7:6379" has no scheme; did you mean redis://xxxxx@10.0.0.7:6379?`},
		{"redis URL other scheme", []string{"--redis-url", "http://redis.internal:6379"}, `--redis-url "http://redis.internal:6379" must be a redis://, rediss:// (TLS) or unix:// URL`},
		{"redis URL empty", []string{"--redis-url", " "}, `--redis-url is empty; give a URL such as redis://127.0.0.1:6379, or leave the flag out`},
		{"history age negative", []string{"--history-age", "-1m"}, `--history-age -1m0s must not be negative (0 means no age limit)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, append([]string{"serve"}, tt.args...)...)
			if code != ExitUsage || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("serve %v: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, ExitUsage, tt.wantErr)
			}
		})
	}
}

func TestServeHelp(t *testing.T) {
	code, out, _ := run(t, "serve", "--help")
	if code != ExitOK {
		t.Fatalf("exit code %d", code)
	}
	for _, want := range []string{"--addr host:port", "--public-url URL", "HOOKLINE_ADDR", "--ping-interval", "--history-bytes size", "--max-subscribers", "--data-dir directory", "HOOKLINE_DATA_DIR", "--redis-url URL", "HOOKLINE_REDIS_URL", "--history-age duration", "HOOKLINE_HISTORY_AGE"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q:\n%s", want, out)
		}
	}
}

// With --data-dir, a stopped and restarted serve still has the channel's
// history, with the same ids, and numbers on from there.
func TestServeDataDirKeepsHistory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // created by serve
	base, _, stop := startServe(t, "--addr", "127.0.0.1:0", "--data-dir", dir)
	channel := base + "/kept"
	for _, body := range []string{`{"n":1}`, `{"n":2}`} {
		resp, err := http.Post(channel, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if code, out, errOut := stop(); code != ExitOK || !strings.Contains(out, "history:     "+filepath.Join(dir, "relay.db")+" (0 deliveries in 0 channels restored)") {
		t.Fatalf("first serve: exit %d, output:\n%s%s", code, out, errOut)
	}

	base, _, stop = startServe(t, "--addr", "127.0.0.1:0", "--data-dir", dir)
	req, _ := http.NewRequest(http.MethodGet, base+"/kept", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "1")
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	resp, err := http.Post(base+"/kept", "application/json", strings.NewReader(`{"n":3}`))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(answer) != "{\"id\":3,\"subscribers\":1}\n" {
		t.Errorf("POST after the restart = %q, want id 3", answer)
	}
	code, out, errOut := stop()
	b, _ := io.ReadAll(stream.Body)
	if !regexp.MustCompile(`(?s)event: ready\n.*\nid: 2\ndata: \{.*"body":\{"n":2\}.*\nid: 3\ndata: \{.*"body":\{"n":3\}`).Match(b) {
		t.Errorf("stream after the restart with Last-Event-ID 1:\n%s\nwant deliveries 2 and 3", b)
	}
	if code != ExitOK || !strings.Contains(out, "(2 deliveries in 1 channel restored)") {
		t.Errorf("second serve: exit %d, output:\n%s%s", code, out, errOut)
	}
}

func TestServeMemoryHistoryIsSaid(t *testing.T) {
	_, _, stop := startServe(t, "--addr", "127.0.0.1:0")
	if _, out, _ := stop(); !strings.Contains(out, "history:     in memory (lost on restart; --data-dir keeps it)") {
		t.Errorf("output does not say where the history is:\n%s", out)
	}
}

func TestServeDataDirUnusable(t *testing.T) {
	held := t.TempDir()
	srv, err := relay.New(relay.Options{DataDir: held})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.CloseStorage() })
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o600)
	damaged := t.TempDir()
	os.WriteFile(filepath.Join(damaged, "relay.db"), []byte(strings.Repeat("not a database ", 1000)), 0o600)

	tests := []struct {
		name, dir, want string
	}{
		{"held by another serve", held, fmt.Sprintf("hookline: --data-dir %q is in use: another hookline serve holds the lock on its relay.db; stop that one, or give this one another directory", held)},
		{"a file", file, fmt.Sprintf("hookline: --data-dir %q is not usable: cannot create the data directory: mkdir %s: not a directory", file, file)},
		{"damaged", damaged, fmt.Sprintf("hookline: --data-dir %q: %s: ", damaged, filepath.Join(damaged, "relay.db"))},
		{"damaged hint", damaged, "; move relay.db away to start with an empty history"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", tt.dir)
			if code != ExitFailure || !strings.Contains(errOut, tt.want) || strings.Contains(out, "listening") {
				t.Errorf("serve --data-dir %s: exit %d, stdout %q, stderr %q; want 1 and %q before listening", tt.dir, code, out, errOut, tt.want)
			}
		})
	}
}

// Two serves on one Redis (one configured by HOOKLINE_REDIS_URL): a
// delivery POSTed to one reaches a stream on the other, with the next id.
func TestServeRedisReplicas(t *testing.T) {
	rs := redistest.Start(t)
	baseA, _, stopA := startServe(t, "--addr", "127.0.0.1:0", "--redis-url", rs.URL())
	t.Setenv("HOOKLINE_REDIS_URL", rs.URL())
	baseB, _, stopB := startServe(t, "--addr", "127.0.0.1:0")

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a hang guard, not a speed
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, baseB+"/shared", nil)
	req.Header.Set("Accept", "text/event-stream")
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	for i, base := range []string{baseA, baseB} {
		resp, err := http.Post(base+"/shared", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i+1)))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("{\"id\":%d}\n", i+1); string(answer) != want {
			t.Errorf("POST to serve %d = %q, want %q", i+1, answer, want)
		}
	}
	// Both reach B's stream (through Redis's pub/sub, or read from Redis
	// once B's subscription is up): wait for the second, then stop.
	var b []byte
	br := bufio.NewReader(stream.Body)
	for !bytes.Contains(b, []byte(`"body":{"n":2}`)) {
		line, err := br.ReadBytes('\n')
		b = append(b, line...)
		if err != nil {
			break
		}
	}
	codeA, outA, errA := stopA()
	codeB, outB, errB := stopB()
	if !regexp.MustCompile(`(?s)event: ready\n.*\nid: 1\ndata: \{.*"body":\{"n":1\}.*\nid: 2\ndata: \{.*"body":\{"n":2\}`).Match(b) {
		t.Errorf("stream on serve B:\n%s\nwant deliveries 1 (POSTed to A) and 2", b)
	}
	for _, r := range []struct {
		code     int
		out, err string
	}{{codeA, outA, errA}, {codeB, outB, errB}} {
		if r.code != ExitOK || !strings.Contains(r.out, "history:     Redis at "+rs.URL()+", shared with every relay using it (") {
			t.Errorf("serve: exit %d, output:\n%s%s", r.code, r.out, r.err)
		}
	}
}

// A Redis that does not answer stops serve before it listens, with the
// URL (password hidden) and a hint.
func TestServeRedisUnreachable(t *testing.T) {
	rs := redistest.Start(t)
	rs.Kill()
	code, out, errOut := run(t, "serve", "--addr", "127.0.0.1:0", "--redis-url", "redis://:s3cret@"+rs.Addr())
	want := "hookline: --redis-url: connecting to Redis at redis://:xxxxx@" + rs.Addr() + ": redis is unreachable: dial tcp " + rs.Addr() + ": connect: connection refused; start Redis or check the URL"
	if code != ExitFailure || !strings.Contains(errOut, want) || strings.Contains(errOut, "s3cret") || strings.Contains(out, "listening") {
		t.Errorf("serve with Redis down: exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, want)
	}
}

// --trusted-proxy takes addresses, CIDRs and bracketed IPv6 addresses, one
// per flag or comma-separated (as HOOKLINE_TRUSTED_PROXY must be).
func TestParsePrefix(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.0/8": "10.0.0.0/8", "127.0.0.1": "127.0.0.1/32", " 10.1.2.3/8 ": "10.0.0.0/8",
		"2001:db8::1": "2001:db8::1/128", "[2001:db8::1]": "2001:db8::1/128", "2001:db8::/32": "2001:db8::/32",
	} {
		if got, err := parsePrefix(in); err != nil || got.String() != want {
			t.Errorf("parsePrefix(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	if _, err := parsePrefix("[2001:db8::1"); err == nil {
		t.Error("parsePrefix accepted an unclosed bracket")
	}
}

// On a Redis with a replica, the start-up line says that each POST waits
// for one (the default), or that acks are not replicated with
// --redis-min-replicas 0.
func TestServeRedisAcksLine(t *testing.T) {
	rs := redistest.Start(t)
	rs.StartReplica(t)
	_, _, stop := startServe(t, "--addr", "127.0.0.1:0", "--redis-url", rs.URL())
	if code, out, errOut := stop(); code != ExitOK || !strings.Contains(out, "acks:        a POST is answered once 1 of the replicas of its channel's Redis primary (1 connected) has its delivery (up to 2s, then 503; --redis-min-replicas)") {
		t.Errorf("serve on a Redis with a replica: exit %d, output:\n%s%s", code, out, errOut)
	}
	_, _, stop = startServe(t, "--addr", "127.0.0.1:0", "--redis-url", rs.URL(), "--redis-min-replicas", "0")
	if code, out, errOut := stop(); code != ExitOK || !strings.Contains(out, "acks:        not replicated (--redis-min-replicas 0): a delivery the primary has not yet copied to its 1 replica is lost if it fails") {
		t.Errorf("serve --redis-min-replicas 0: exit %d, output:\n%s%s", code, out, errOut)
	}
	if code, _, errOut := run(t, "serve", "--redis-min-replicas", "1"); code != ExitUsage || !strings.Contains(errOut, "--redis-min-replicas and --redis-ack-timeout go with --redis-url") {
		t.Errorf("serve --redis-min-replicas without --redis-url: exit %d, %q", code, errOut)
	}
}

// Given one node of a Redis Cluster whose primaries have a replica each,
// serve says it found a Cluster and that each POST waits for a replica of
// its channel's primary.
func TestServeRedisClusterLines(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	_, _, stop := startServe(t, "--addr", "127.0.0.1:0", "--redis-url", c.Nodes[2].URL())
	code, out, errOut := stop()
	if code != ExitOK || !strings.Contains(out, "history:     Redis Cluster at "+c.Nodes[2].URL()+", shared with every relay using it (") ||
		!strings.Contains(out, "acks:        a POST is answered once 1 of the replicas of its channel's Redis primary (1 connected) has its delivery") {
		t.Errorf("serve on a Redis Cluster: exit %d, output:\n%s%s", code, out, errOut)
	}
}
