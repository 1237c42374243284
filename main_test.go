package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/testenv"
)

// forwardProc is a running `hookline forward` with its embedded relay,
// whose stderr is read line by line.
type forwardProc struct {
	cmd     *exec.Cmd
	channel string      // the channel URL it printed
	lines   chan string // the rest of its stderr; closed when it ends
	log     []string    // the stderr lines read so far
}

// startForward starts cmd, a `hookline forward` without --url, and waits up
// to timeout until it has printed its channel and connected to it. The
// process is killed when the test ends.
func startForward(t *testing.T, cmd *exec.Cmd, timeout time.Duration) *forwardProc {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	p := &forwardProc{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	deadline := time.After(timeout)
	for p.channel == "" || !strings.Contains(p.stderr(), "connected to") {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("%s exited early; stderr:\n%s", strings.Join(cmd.Args, " "), p.stderr())
			}
			p.log = append(p.log, l)
			if _, rest, ok := strings.Cut(l, "POST deliveries to "); ok {
				p.channel = rest
			}
		case <-deadline:
			t.Fatalf("%s did not start; stderr:\n%s", strings.Join(cmd.Args, " "), p.stderr())
		}
	}
	return p
}

// sendPing posts a ping delivery with id to the channel and waits until
// the target signals arrived.
func (p *forwardProc) sendPing(t *testing.T, id string, arrived <-chan struct{}) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.channel, strings.NewReader(`{"zen":"Design for failure."}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "ping")
	req.Header.Set("X-GitHub-Delivery", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the delivery never reached the target")
	}
}

// stderr returns the stderr lines read so far.
func (p *forwardProc) stderr() string { return strings.Join(p.log, "\n") }

// interrupt stops the process as Ctrl-C does (a kill on Windows, which has
// no SIGINT), reads the rest of its stderr and returns Wait's error.
func (p *forwardProc) interrupt(t *testing.T) error {
	t.Helper()
	p.signal(t)
	return p.wait()
}

// signal sends Ctrl-C's SIGINT (a kill on Windows, which has no SIGINT).
func (p *forwardProc) signal(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		p.cmd.Process.Kill()
	} else if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
}

// wait reads the rest of its stderr and returns Wait's error.
func (p *forwardProc) wait() error {
	for l := range p.lines {
		p.log = append(p.log, l)
	}
	return p.cmd.Wait()
}

// The real binary, stopped with SIGINT while a delivery is in flight at a
// slow target: it finishes that delivery, prints the summary and exits 0.
func TestForwardDrainsOnSIGINT(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGINT cannot be sent to a process on Windows")
	}
	bin := testenv.BuildHookline(t)
	arrived, signalled := make(chan struct{}, 1), make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-signalled // still working when SIGINT comes
		io.WriteString(w, "ok")
	}))
	t.Cleanup(target.Close)

	cmd := exec.Command(bin, "forward", "--listen", "127.0.0.1:0", "--target", target.URL, "--no-color")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	fw := startForward(t, cmd, 30*time.Second)
	fw.sendPing(t, "sigint-1", arrived)
	fw.signal(t)
	close(signalled)
	if err := fw.wait(); err != nil {
		t.Errorf("exit: %v, want 0; stderr:\n%s", err, fw.stderr())
	}
	if !strings.Contains(stdout.String(), "ping") || !strings.Contains(stdout.String(), "→ 200") {
		t.Errorf("trace = %q, want the ping forwarded with 200", stdout.String())
	}
	if !strings.Contains(fw.stderr(), "summary: 1 received, 1 forwarded") {
		t.Errorf("stderr lacks the summary:\n%s", fw.stderr())
	}
}

// The real binary with a target that never answers: the first Ctrl-C says
// what it waits for, the second quits at once with exit code 130, the
// delivery is reported as interrupted (not unreachable) and kept in the
// failed folder for a replay. Before, the first waited 10 s in silence and
// the second was ignored.
func TestForwardSecondCtrlCQuits(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGINT cannot be sent to a process on Windows")
	}
	if testing.Short() {
		t.Skip("-short: builds and signals the binary")
	}
	bin := testenv.BuildHookline(t)
	arrived := make(chan struct{}, 1)
	hang := make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select { // a hung target
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang); target.Close() })

	dir := t.TempDir()
	cmd := exec.Command(bin, "forward", "--listen", "127.0.0.1:0", "--target", target.URL, "--no-color", "--save", dir)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	fw := startForward(t, cmd, 30*time.Second)
	fw.sendPing(t, "ctrlc-1", arrived)

	if err := fw.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	const waiting = "waiting up to 10s for 1 delivery in flight; Ctrl-C again to quit now"
	deadline := time.After(5 * time.Second) // a hang guard; the line comes at once
	for !strings.Contains(fw.stderr(), waiting) {
		select {
		case l := <-fw.lines:
			fw.log = append(fw.log, l)
		case <-deadline:
			t.Fatalf("after the first Ctrl-C, stderr lacks %q:\n%s", waiting, fw.stderr())
		}
	}
	err := fw.interrupt(t) // the second Ctrl-C; ignored, the drain would end with 0
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("after the second Ctrl-C: %v, want exit 130; stderr:\n%s", err, fw.stderr())
	}
	if !strings.Contains(stdout.String(), "→ interrupted") || strings.Contains(stdout.String(), "unreachable") {
		t.Errorf("trace = %q, want the delivery shown as interrupted", stdout.String())
	}
	if failed, _ := filepath.Glob(filepath.Join(dir, "failed", "*ctrlc-1*.json")); len(failed) != 1 {
		t.Errorf("failed folder holds %v, want the interrupted delivery", failed)
	}
}
