package main

import (
	"bufio"
	"bytes"
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
)

// buildBinary builds hookline into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hookline")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The real binary, stopped with SIGINT while a delivery is in flight at a
// slow target: it finishes that delivery, prints the summary and exits 0.
func TestForwardDrainsOnSIGINT(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGINT cannot be sent to a process on Windows")
	}
	bin := buildBinary(t)
	arrived := make(chan struct{}, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		time.Sleep(300 * time.Millisecond) // still working when SIGINT comes
		io.WriteString(w, "ok")
	}))
	t.Cleanup(target.Close)

	cmd := exec.Command(bin, "forward", "--listen", "127.0.0.1:0", "--target", target.URL, "--no-color")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })

	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var channel string
	var log []string
	timeout := time.After(30 * time.Second)
	for channel == "" || !strings.Contains(strings.Join(log, "\n"), "connected to") {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("forward exited early; stderr:\n%s", strings.Join(log, "\n"))
			}
			log = append(log, l)
			if _, rest, ok := strings.Cut(l, "POST deliveries to "); ok {
				channel = rest
			}
		case <-timeout:
			t.Fatalf("forward did not start; stderr:\n%s", strings.Join(log, "\n"))
		}
	}
	req, _ := http.NewRequest(http.MethodPost, channel, strings.NewReader(`{"zen":"Design for failure."}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "ping")
	req.Header.Set("X-GitHub-Delivery", "sigint-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-arrived:
	case <-timeout:
		t.Fatal("the delivery never reached the target")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		log = append(log, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v, want 0; stderr:\n%s", err, strings.Join(log, "\n"))
	}
	if !strings.Contains(stdout.String(), "ping") || !strings.Contains(stdout.String(), "→ 200") {
		t.Errorf("trace = %q, want the ping forwarded with 200", stdout.String())
	}
	if !strings.Contains(strings.Join(log, "\n"), "summary: 1 received, 1 forwarded") {
		t.Errorf("stderr lacks the summary:\n%s", strings.Join(log, "\n"))
	}
}
