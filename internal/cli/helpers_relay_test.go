package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
)

const hangGuard = relaytest.HangGuard

// forwardRun is `hookline forward` running in this process.
type forwardRun struct {
	out, err relaytest.Buffer
	cancel   context.CancelFunc
	done     chan struct{}
	code     int
}

// startForward runs `hookline forward args...` until stop (or the test's
// end).
func startForward(t *testing.T, args ...string) *forwardRun {
	t.Helper()
	return startCommand(t, append([]string{"forward", "--no-color"}, args...)...)
}

// startCommand runs `hookline args...` until stop (or the test's end).
func startCommand(t *testing.T, args ...string) *forwardRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &forwardRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.code = Run(ctx, append([]string{"hookline"}, args...), strings.NewReader(""), &f.out, &f.err)
	}()
	t.Cleanup(func() { f.stop(t) })
	return f
}

// waitErr waits until stderr contains s.
func (f *forwardRun) waitErr(t testing.TB, s string) {
	t.Helper()
	waitSaid(t, "stderr", &f.err, s)
}

// waitOut waits until stdout contains s.
func (f *forwardRun) waitOut(t testing.TB, s string) {
	t.Helper()
	waitSaid(t, "stdout", &f.out, s)
}

// waitSaid waits until the running command's stream (named what) contains s.
func waitSaid(t testing.TB, what string, stream *relaytest.Buffer, s string) {
	t.Helper()
	stream.Wait(t, fmt.Sprintf("%s to say %q", what, s), func(text string) bool { return strings.Contains(text, s) })
}

// waitOutLines waits until stdout has n lines.
func (f *forwardRun) waitOutLines(t testing.TB, n int) {
	t.Helper()
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	if out, ok := relaytest.Await(&f.out, guard.C, func(text string) bool { return strings.Count(text, "\n") >= n }); !ok {
		t.Fatalf("stdout has fewer than %d lines:\n%s\nstderr:\n%s", n, out, f.err.String())
	}
}

// wait waits for the command to end by itself and returns its exit code.
func (f *forwardRun) wait(t testing.TB) int {
	t.Helper()
	select {
	case <-f.done:
		return f.code
	case <-time.After(hangGuard):
		t.Fatalf("the command did not end; stderr:\n%s", f.err.String())
		return -1
	}
}

// stop cancels the run (as SIGINT does) and returns its exit code.
func (f *forwardRun) stop(t testing.TB) int {
	f.cancel()
	select {
	case <-f.done:
		return f.code
	case <-time.After(hangGuard):
		t.Error("forward did not stop")
		return -1
	}
}
