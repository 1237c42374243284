package relay_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/proxy"
)

// relayProcess is `hookline serve` running as a child process.
type relayProcess struct {
	t    *testing.T
	bin  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    bytes.Buffer // stderr of every run, for failure reports
}

// start runs the relay and waits until it listens.
func (p *relayProcess) start() {
	p.t.Helper()
	cmd := exec.Command(p.bin, p.args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.log}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("starting %s: %v", p.bin, err)
	}
	exited := make(chan struct{})
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			if !found && strings.HasPrefix(sc.Text(), "hookline relay listening on ") {
				found = true
				listening <- true
			}
		}
		if !found {
			listening <- false
		}
		cmd.Wait()
		close(exited)
	}()
	select {
	case ok := <-listening:
		if !ok {
			p.t.Fatalf("hookline serve exited before listening:\n%s", p.stderr())
		}
	case <-time.After(wait):
		cmd.Process.Kill()
		p.t.Fatalf("hookline serve not listening after %s:\n%s", wait, p.stderr())
	}
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
}

// kill sends SIGKILL (no shutdown, no flush: whatever was not on disk is
// gone) and waits for the process to end.
func (p *relayProcess) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill() // SIGKILL on Unix
	<-exited
}

func (p *relayProcess) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

// faultBody returns the body of delivery seq: JSON (with CRLF whitespace,
// non-ASCII text and random bytes in base64), some of it large.
func faultBody(seq int) []byte {
	n := 64 + seq%7*512
	if seq%37 == 0 {
		n = 200 << 10
	}
	random := make([]byte, n)
	rand.Read(random)
	return fmt.Appendf(nil, "{\"seq\":%d,\r\n \"text\":\"caf\u00e9 \u2603 \\\"q\\\"\",\n \"random\":%q}", seq, base64.StdEncoding.EncodeToString(random))
}

// Issue 8, fault test 1: the relay process is killed with SIGKILL twice
// while deliveries are being published and relayed, and restarted on the
// same data directory. The publisher retries every POST that got no 200
// (with an Idempotency-Key, so that a POST stored just before the kill is
// not stored twice); the subscriber, a proxy.Client forwarding to a local
// target, must get every delivery exactly once, in order, byte for byte,
// with the relay's ids 1..N.
func TestFaultRelayKilledMidStream(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL and a restart on the same port are Unix behaviour")
	}
	const total = 300
	killAt := map[int]bool{90: true, 200: true}

	// A hang guard on progress, not a budget for the whole run: each
	// delivery has stallAfter to be accepted, counted from the acceptance
	// of the one before, so a loaded machine is slower, never failed.
	const stallAfter = 60 * time.Second
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	bin := testenv.BuildHookline(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the relay listens on it, again after each restart
	// The history holds every delivery of the run: a subscriber that takes
	// long to reconnect on a loaded machine (the relay's restart, the
	// client's backoff) finds them all there, rather than a gap the relay
	// rightly reports once 100 (the default) have come meanwhile.
	rp := &relayProcess{t: t, bin: bin, args: []string{"serve", "--addr", addr, "--data-dir", t.TempDir(), "--history", strconv.Itoa(2 * total), "--no-color"}}
	rp.start()
	t.Cleanup(rp.kill)
	channel := "http://" + addr + "/fault-" + strconv.FormatInt(time.Now().UnixNano(), 36)

	// The target records what the subscriber forwards.
	type received struct {
		seq  string
		body []byte
	}
	var mu sync.Mutex
	var got []received
	var eventIDs []string
	all := make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, received{r.Header.Get("X-Seq"), body})
		if r.Header.Get("X-Seq") == strconv.Itoa(total+1) {
			close(all)
		}
		mu.Unlock()
	}))
	t.Cleanup(target.Close)

	var clientLog relaytest.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s\nclient log:\n%s", rp.stderr(), clientLog.String())
		}
	})
	client, err := proxy.New(proxy.Options{
		URL:         channel,
		Targets:     []proxy.Target{{URL: target.URL}},
		LastEventID: "0", // from the start: ids are durable
		MaxBackoff:  200 * time.Millisecond,
		Logger:      slog.New(slog.NewTextHandler(&clientLog, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnState: func(c proxy.StateChange) {
			clientLog.Write([]byte(fmt.Sprintf("state %v id=%q err=%v\n", c.State, c.LastEventID, c.Err)))
		},
		OnResult: func(r proxy.Result) {
			mu.Lock()
			eventIDs = append(eventIDs, r.Delivery.EventID)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	clientDone := make(chan error, 1)
	clientCtx, stopClient := context.WithCancel(ctx)
	defer stopClient()
	go func() { clientDone <- client.Run(clientCtx) }()

	// The publisher: every POST until a 200, numbered, with a killer
	// alongside that strikes while POSTs keep coming.
	bodies := make([][]byte, total+2)
	var retries, restarts int
	killer := make(chan struct{}, 1)
	killerDone := make(chan struct{})
	postFailed, posted := make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(killerDone)
		for range killer {
			select { // a failure before the kill is not one on the dead relay
			case <-postFailed:
			default:
			}
			rp.kill()
			select { // down until a POST has failed on it
			case <-postFailed:
			case <-posted:
			}
			rp.start()
			restarts++
		}
	}()
	httpc := &http.Client{Timeout: 5 * time.Second}
	// The last delivery (total+1) is published once the others are
	// accepted and no kill is to come: a stray duplicate of one before it
	// would reach the target before it.
	for seq := 1; seq <= total+1; seq++ {
		if seq == total+1 {
			close(posted)
			close(killer)
			<-killerDone
		}
		if killAt[seq] {
			killer <- struct{}{}
		}
		bodies[seq] = faultBody(seq)
		stall := time.Now().Add(stallAfter)
		for attempt := 0; ; attempt++ {
			if time.Now().After(stall) {
				t.Fatalf("delivery %d not accepted within %s of the one before (%d retries so far)\nrelay log:\n%s", seq, stallAfter, retries, rp.stderr())
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, channel, bytes.NewReader(bodies[seq]))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GitHub-Event", "push")
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("fault-%d", seq))
			req.Header.Set("X-Seq", strconv.Itoa(seq))
			req.Header.Set("Idempotency-Key", fmt.Sprintf("fault-%d", seq))
			resp, err := httpc.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			retries++
			select {
			case postFailed <- struct{}{}:
			default:
			}
			time.Sleep(20 * time.Millisecond) // a retry's backoff: a refused connection fails at once
		}
	}

	// Every delivery is accepted: the last one reaches the target soon, or
	// the subscriber has stalled.
	select {
	case <-all:
	case <-time.After(stallAfter):
	}
	stopClient()
	if err := <-clientDone; err != nil {
		t.Errorf("client.Run = %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d deliveries, %d restarts after SIGKILL, %d POSTs retried", total, restarts, retries)
	if restarts != len(killAt) {
		t.Errorf("%d restarts, want %d", restarts, len(killAt))
	}
	if len(got) != total+1 {
		t.Errorf("the target got %d deliveries, want %d", len(got), total+1)
	}
	for i, r := range got {
		want := strconv.Itoa(i + 1)
		if r.seq != want || (i+1 <= total+1 && !bytes.Equal(r.body, bodies[i+1])) {
			t.Fatalf("forwarded #%d is seq %s (%d bytes), want seq %s byte for byte (%d bytes)", i+1, r.seq, len(r.body), want, len(bodies[min(i+1, total+1)]))
		}
	}
	for i, id := range eventIDs {
		if id != strconv.Itoa(i+1) {
			t.Fatalf("event ids seen %v..., want 1..%d each once", eventIDs[max(0, i-3):i+1], total+1)
		}
	}
}
