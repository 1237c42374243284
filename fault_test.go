package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/relay"
)

// killBody is delivery n's body in the kill test.
func killBody(n int) []byte { return []byte(fmt.Sprintf(`{"action":"opened","n":%d}`, n)) }

// forwarder is the built binary running `hookline forward`.
type forwarder struct {
	cmd   *exec.Cmd
	lines chan string
	log   []string
}

func startForwarder(t *testing.T, bin string, env []string, args ...string) *forwarder {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"forward", "--no-color"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	f := &forwarder{cmd: cmd, lines: make(chan string, 1000)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
	}()
	return f
}

// waitFor reads stderr until a line contains s.
func (f *forwarder) waitFor(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-f.lines:
			if !ok {
				t.Fatalf("forward exited; stderr:\n%s", strings.Join(f.log, "\n"))
			}
			f.log = append(f.log, l)
			if strings.Contains(l, s) {
				return
			}
		case <-timeout:
			t.Fatalf("forward never said %q; stderr:\n%s", s, strings.Join(f.log, "\n"))
		}
	}
}

// (2) The forwarder is killed with SIGKILL while deliveries flow, and
// restarted with its state file: every delivery published reaches the
// target, in order. The only one that may arrive twice is the one in flight
// at the kill (the target may have taken it while the forwarder died before
// it could record that), and only when the state file says it was not done:
// at least once across a crash, exactly once otherwise.
func TestForwardSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a fault test (builds the binary, kills it)")
	}
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL and SIGINT cannot be sent on Windows")
	}
	bin := testenv.BuildHookline(t)

	// The relay keeps running in this process: it holds the history the
	// restarted forwarder resumes from.
	channel := relaytest.Start(t, relay.Options{}).Channel

	// A target that holds delivery total/3 until the forwarder is killed:
	// a delivery is in flight at the SIGKILL. Every arrival is told.
	const total = 60
	var mu sync.Mutex
	var got []int
	var bodiesOK = true
	inFlight, killed := make(chan struct{}), make(chan struct{})
	arrivals := make(chan int, 4*total)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n, err := strconv.Atoi(strings.TrimPrefix(r.Header.Get("X-GitHub-Delivery"), "kill-"))
		if n == total/3 {
			select {
			case <-killed: // the restarted forwarder's
			default:
				close(inFlight)
				<-killed
			}
		}
		mu.Lock()
		got = append(got, n)
		if err != nil || !bytes.Equal(body, killBody(n)) {
			bodiesOK = false
		}
		mu.Unlock()
		arrivals <- n
	}))
	t.Cleanup(target.Close)
	arrived := func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), got...)
	}

	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	env := []string{"XDG_STATE_HOME=" + filepath.Join(dir, "xdg")}
	args := []string{"--url", channel, "--target", target.URL, "--state-file", state}

	publish := func(from, to int) {
		for n := from; n <= to; n++ {
			req, _ := http.NewRequest(http.MethodPost, channel, bytes.NewReader(killBody(n)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GitHub-Event", "issues")
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("kill-%d", n))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("publishing %d: %v", n, err)
				return
			}
			resp.Body.Close()
		}
	}

	first := startForwarder(t, bin, env, args...)
	first.waitFor(t, "connected to")
	published := make(chan struct{})
	go func() { defer close(published); publish(1, total) }()
	select {
	case <-inFlight:
	case <-time.After(relaytest.HangGuard):
		t.Fatalf("delivery %d never reached the target; arrived: %v", total/3, arrived())
	}
	// The forwarder writes its state file off the deliveries' path: kill it
	// once the file records every delivery before the one in flight.
	testenv.Poll(t, fmt.Sprintf("the state file to record delivery %d", total/3-1), 5*time.Millisecond, func() bool {
		_, err := os.Stat(state)
		return err == nil && readLastEventID(t, state) == total/3-1
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.cmd.Wait()
	close(killed)
	<-published
	atKill := arrived()
	stored := readLastEventID(t, state)
	if stored == 0 || stored >= total {
		t.Fatalf("state file after the kill: last_event_id %d; want a delivery in the middle", stored)
	}

	second := startForwarder(t, bin, env, args...)
	second.waitFor(t, "resuming after event "+strconv.Itoa(stored))
	// One more delivery, after every other in the relay's order: a stray
	// duplicate of one before it would arrive before it.
	publish(total+1, total+1)
	guard := time.After(relaytest.HangGuard)
	for n := 0; n != total+1; {
		select {
		case n = <-arrivals:
		case <-guard:
			t.Fatalf("delivery %d never arrived; arrived: %v", total+1, arrived())
		}
	}
	if err := second.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for l := range second.lines {
		second.log = append(second.log, l)
	}
	if err := second.cmd.Wait(); err != nil {
		t.Errorf("the restarted forwarder: %v", err)
	}

	all := arrived()
	maxAtKill := 0
	for _, n := range atKill {
		maxAtKill = max(maxAtKill, n)
	}
	t.Logf("killed after %d arrivals with the state file at %d; %d arrivals in all", len(atKill), stored, len(all))
	count := map[int]int{}
	var order []int
	for _, n := range all {
		if count[n] == 0 {
			order = append(order, n)
		}
		count[n]++
	}
	for n := 1; n <= total+1; n++ {
		switch c := count[n]; {
		case c == 0:
			t.Errorf("delivery %d never arrived (lost)", n)
		case c == 2 && n > stored && n <= maxAtKill+1:
			// Finished after the state file's last write (written at
			// most every second, off the deliveries' path), or in flight
			// at the kill (the next one, which may reach the target
			// after the kill): at least once. What the file says is
			// done never comes again.
		case c != 1:
			t.Errorf("delivery %d arrived %d times (the state file said %d were done)", n, c, stored)
		}
	}
	for i, n := range order {
		if n != i+1 {
			t.Errorf("deliveries arrived in the order %v, want 1..%d", order, total+1)
			break
		}
	}
	if !bodiesOK {
		t.Error("a body arrived changed")
	}
	if s := strings.Join(second.log, "\n"); !strings.Contains(s, fmt.Sprintf("summary: %d received", total+1-stored)) {
		t.Errorf("the restarted forwarder's summary:\n%s\nwant %d received (the deliveries after %d)", s, total+1-stored, stored)
	}
}

// readLastEventID reads a state file's last_event_id as a number.
func readLastEventID(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the state file: %v", err)
	}
	var doc struct {
		LastEventID string `json:"last_event_id"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("the state file does not parse (a torn write?): %v\n%s", err, data)
	}
	n, err := strconv.Atoi(doc.LastEventID)
	if err != nil {
		t.Fatalf("last_event_id %q", doc.LastEventID)
	}
	return n
}
