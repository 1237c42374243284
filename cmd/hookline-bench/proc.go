package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a process the harness started: the relay or a forwarder.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string // its stderr
	exited  chan struct{}
	err     error // from Wait, once exited is closed
}

// startProc starts argv with stderr going to a log file in dir and stdout
// to stdout (nil: /dev/null).
func startProc(name, dir string, argv, env []string, stdout io.Writer) (*proc, error) {
	logf, err := os.CreateTemp(dir, name+"-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = stdout, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	logf.Close() // the child has its own descriptor
	p := &proc{name: name, cmd: cmd, logPath: logf.Name(), exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM and waits up to 15 s before killing.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// running reports an error when the process has already exited.
func (p *proc) running() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%v); its log:\n%s", p.name, p.err, p.logTail())
	default:
		return nil
	}
}

// logTail returns the end of the process's stderr.
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// usage is a process's CPU time so far, its peak resident memory, and how
// much of what is resident now is files' pages (a Go program's: its
// binary's) rather than its own memory.
type usage struct {
	cpu     time.Duration
	peakRSS int64 // bytes (VmHWM)
	fileRSS int64 // bytes (RssFile)
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux this runs on.
const clockTick = 10 * time.Millisecond

// sample reads /proc/<pid>/stat (utime, stime) and /proc/<pid>/status
// (VmHWM, RssFile).
func (p *proc) sample() (usage, error) { return sampleProcess(p.cmd.Process.Pid) }

// sampleProcess reads the usage of process pid (os.Getpid(): the harness's
// own, publishers and target, to show it did not saturate the machine).
func sampleProcess(pid int) (usage, error) {
	var u usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return u, err
	}
	u.cpu = time.Duration(ut+st) * clockTick
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	fields := map[string]*int64{"VmHWM": &u.peakRSS, "RssFile": &u.fileRSS}
	for _, line := range strings.Split(string(status), "\n") {
		name, v, _ := strings.Cut(line, ":")
		if dst := fields[name]; dst != nil {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return u, fmt.Errorf("/proc/%d/status: %s: %w", pid, name, err)
			}
			*dst = kb << 10
		}
	}
	return u, nil
}

// relayProc is a running `hookline serve`.
type relayProc struct {
	*proc
	base    string // http://127.0.0.1:port
	channel string // base/<name>
}

// startRelay runs `argv0... serve` with extra flags on a free loopback port
// and waits for it to print its channel URL. The harness gives it room in
// bytes for the largest scenarios (unless --serve-defaults); the history
// keeps serve's default count.
func startRelay(ctx context.Context, dir string, argv0, env, extra []string) (*relayProc, error) {
	argv := append(append(append([]string(nil), argv0...), "serve", "--no-color", "--addr", "127.0.0.1:0"), extra...)
	pr, pw := io.Pipe()
	p, err := startProc("serve", dir, argv, env, pw)
	if err != nil {
		return nil, err
	}
	r := &relayProc{proc: p}
	found := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "hookline relay listening on "); ok {
				r.base = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "new channel: "); ok {
				r.channel = strings.TrimSpace(v)
				found <- nil
				break
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() { <-p.exited; pw.Close() }()
	select {
	case <-found:
	case <-p.exited:
		return nil, p.running()
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("the relay printed no channel URL within 30 s; its log:\n%s", p.logTail())
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
	if r.base == "" || !strings.HasPrefix(r.channel, r.base+"/") {
		p.stop()
		return nil, fmt.Errorf("the relay printed listening on %q and channel %q, which do not match", r.base, r.channel)
	}
	return r, nil
}

// relayHealth is what /healthz reports.
type relayHealth struct {
	Subscribers int   `json:"subscribers"`
	Deliveries  int64 `json:"deliveries"`
	CutOff      int64 `json:"cutOff"`
}

func (r *relayProc) health(ctx context.Context) (relayHealth, error) {
	var h relayHealth
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/healthz", nil)
	if err != nil {
		return h, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("GET /healthz: %s", resp.Status)
	}
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

// waitSubscribed waits until the relay has n subscribers, failing when fwd
// exits first.
func (r *relayProc) waitSubscribed(ctx context.Context, n int, fwd *proc) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := fwd.running(); err != nil {
			return err
		}
		if err := r.running(); err != nil {
			return err
		}
		if h, err := r.health(ctx); err == nil && h.Subscribers >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not subscribe within 60 s; its log:\n%s", fwd.name, fwd.logTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond): // the resolution of Ready
		}
	}
}
