package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/internal/testutil/testenv"
)

// run is the command: it parses args, measures and prints the report.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	rep, err := measure(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	writeReport(stdout, rep)
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	return 0
}

// harness holds what every trial needs.
type harness struct {
	o        options
	log      io.Writer
	work     string
	hookline []string // argv prefix running the hookline command
	self     string   // this program, for --profile
	node     string
	smee     string
	gosmee   string
}

// measure runs every scenario, round and tool.
func measure(ctx context.Context, o options, progress io.Writer) (*report, error) {
	h := &harness{o: o, log: progress}
	if err := h.setup(ctx); err != nil {
		return nil, err
	}
	o = h.o // setup may have dropped a tool it cannot run
	if o.workDir == "" {
		defer os.RemoveAll(h.work)
	}
	rep := &report{Machine: machine(h), Started: time.Now().UTC().Format(time.RFC3339), Rounds: o.rounds, Body: o.body, ForwardConcurrency: o.concurrency}
	for _, s := range o.scenarios {
		fmt.Fprintf(progress, "scenario %s: %s\n", s.Name, s.describe())
		p := newPayload(s.N, s.Size, o.body, o.secret)
		sr := scenarioReport{Scenario: s}
		for round := 1; round <= o.rounds; round++ {
			tools := slices.Clone(o.tools)
			k := (round - 1) % len(tools)
			tools = append(tools[k:], tools[:k]...) // rotate, so no tool always goes first
			for _, tool := range tools {
				r, err := h.trial(ctx, s, p, tool, round)
				if err != nil {
					return nil, fmt.Errorf("%s, %s, round %d: %w", s.Name, tool, round, err)
				}
				fmt.Fprintf(progress, "  round %d %-9s %s\n", round, tool, r.line())
				sr.Trials = append(sr.Trials, r)
			}
		}
		sr.summarize(o.tools)
		rep.Scenarios = append(rep.Scenarios, sr)
	}
	return rep, nil
}

// setup finds the module, builds hookline, and checks node and smee-client.
func (h *harness) setup(ctx context.Context) error {
	o := h.o
	root := o.moduleRoot
	if root == "" {
		var err error
		if root, err = testenv.ModuleRoot(); err != nil {
			return fmt.Errorf("run this from the hookline module: %w", err)
		}
	}
	h.work = o.workDir
	if h.work == "" {
		dir, err := os.MkdirTemp("", "hookline-bench-")
		if err != nil {
			return err
		}
		h.work = dir
	} else if err := os.MkdirAll(h.work, 0o755); err != nil {
		return err
	}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	h.self = self
	if slices.ContainsFunc(o.tools, func(t string) bool { return t != toolDirect }) {
		bin := o.hookline
		if bin == "" {
			bin = filepath.Join(h.work, "hookline")
			fmt.Fprintf(h.log, "building hookline: go build -tags=urfave_cli_no_docs -o %s .\n", bin)
			cmd := exec.CommandContext(ctx, "go", "build", "-tags=urfave_cli_no_docs", "-o", bin, ".") // as a release is built (.goreleaser.yaml)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as a release is built
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go build: %v\n%s", err, out)
			}
		}
		h.hookline = []string{bin}
	}
	if slices.Contains(o.tools, toolGosmee) {
		h.gosmee = o.gosmee
		if h.gosmee == "" {
			// Built from the Go module proxy if it has it; nothing else is
			// asked of the network.
			cmd := exec.CommandContext(ctx, "go", "install", gosmeeModule)
			cmd.Env = append(os.Environ(), "GOBIN="+h.work, "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0") // as hookline is built: the standard library compiled once
			cmd.Dir = h.work
			if out, err := cmd.CombinedOutput(); err != nil {
				msg := strings.TrimSpace(string(out))
				msg = strings.TrimSpace(msg[strings.LastIndexByte(msg, '\n')+1:]) // go's last line says why
				fmt.Fprintf(h.log, "gosmee: skipped, it cannot be built from the Go module proxy (go install %s: %s); give --gosmee PATH to a gosmee binary\n",
					gosmeeModule, msg)
				h.o.tools = slices.DeleteFunc(h.o.tools, func(t string) bool { return t == toolGosmee })
			} else {
				h.gosmee = filepath.Join(h.work, "gosmee")
			}
		}
	}
	if slices.Contains(o.tools, toolSmee) {
		node, err := exec.LookPath(o.node)
		if err != nil {
			return fmt.Errorf("smee-client needs node (%v); install Node.js 20+ or leave smee out of --tools", err)
		}
		h.node = node
		h.smee = o.smee
		if h.smee == "" {
			h.smee = filepath.Join(root, "interop", "node_modules", "smee-client", "bin", "smee.js")
		}
		if _, err := os.Stat(h.smee); err != nil {
			return fmt.Errorf("smee-client is not installed (%v); run `npm ci --prefix interop` from the repository root", err)
		}
	}
	return nil
}

// trial runs one tool on one scenario once.
func (h *harness) trial(ctx context.Context, s scenario, p *payload, tool string, round int) (result, error) {
	r := result{Scenario: s.Name, Tool: tool, Round: round, N: s.N, Size: s.Size, Rate: s.Rate}
	l := p.newLoad()
	targetURL, stopTarget, err := serveTarget(ctx, l)
	if err != nil {
		return r, err
	}
	defer stopTarget()

	url := targetURL
	var relay *relayProc
	var fwd *proc
	var fwdStart, relayStart usage
	if tool != toolDirect {
		argv, env := h.hookline, []string(nil)
		switch tool {
		case toolCompare:
			argv = []string{h.o.compare}
		case toolFloor:
			argv, env = []string{h.self}, []string{floorEnv + "=1"}
		}
		profiling := h.o.profile != "" && tool == toolHookline
		prefix := filepath.Join(h.o.profile, fmt.Sprintf("%s-r%d-", strings.NewReplacer("/", "_", "@", "-").Replace(s.Name), round))
		if profiling {
			argv = []string{h.self}
			env = []string{childEnv + "=1", cpuProfileEnv + "=" + prefix + "serve.cpu.pprof", memProfileEnv + "=" + prefix + "serve.mem.pprof"}
			if h.o.trace {
				env = append(env, traceEnv+"="+prefix+"serve.trace")
			}
		}
		total := int64(s.N) * int64(s.Size+2048)
		var extra []string // hookline serve's flags (the floor's relay has no history)
		if !h.o.serveDefaults && tool != toolFloor {
			extra = append(extra, "--history-bytes", strconv.FormatInt(2*total+64<<20, 10), "--total-history-bytes", strconv.FormatInt(4*total+128<<20, 10))
		}
		if h.o.dataDir && tool != toolFloor {
			extra = append(extra, "--data-dir", filepath.Join(h.work, fmt.Sprintf("relay-data-%s-%s-r%d", tool, strings.NewReplacer("/", "_", "@", "-").Replace(s.Name), round)))
		}
		relay, err = startRelay(ctx, h.work, argv, env, extra)
		if err != nil {
			return r, err
		}
		defer relay.stop()
		url = relay.channel

		var fargv []string
		var fenv []string
		switch tool {
		case toolHookline, toolCompare:
			fargv = append(slices.Clone(argv), "forward", "--no-color", "--url", relay.channel, "--target", targetURL)
			if h.o.concurrency > 1 {
				fargv = append(fargv, "--concurrency", fmt.Sprint(h.o.concurrency))
			}
			fenv = []string{"HOOKLINE_SECRET=" + h.o.secret}
			if profiling {
				fenv = append(fenv, childEnv+"=1", cpuProfileEnv+"="+prefix+"forward.cpu.pprof", memProfileEnv+"="+prefix+"forward.mem.pprof")
				if h.o.trace {
					fenv = append(fenv, traceEnv+"="+prefix+"forward.trace")
				}
			}
		case toolSmee:
			fargv = []string{h.node, h.smee, "--url", relay.channel, "--target", targetURL}
		case toolFloor:
			fargv, fenv = []string{h.self, "forward", "--url", relay.channel, "--target", targetURL}, env
		case toolGosmee:
			// gosmee's client streams from <base>/events/<channel>.
			fargv = []string{h.gosmee, "client", "--nocolor", relay.channel, targetURL}
		}
		started := time.Now()
		fwd, err = startProc(tool, h.work, fargv, fenv, nil)
		if err != nil {
			return r, err
		}
		defer fwd.stop()
		if err := relay.waitSubscribed(ctx, 1, fwd); err != nil {
			return r, err
		}
		r.Ready = float64(time.Since(started)) / float64(time.Millisecond)
		if fwdStart, err = fwd.sample(); err != nil {
			return r, err
		}
		if relayStart, err = relay.sample(); err != nil {
			return r, err
		}
	}

	selfStart, serr := sampleProcess(os.Getpid())
	if serr != nil {
		return r, serr
	}
	failed, perr := l.publish(ctx, url, s)
	r.PublishErrors = failed
	if perr != nil {
		r.Note = perr.Error()
	}
	// Wait for every delivery, or until nothing new arrives for o.stall.
	progress, lastCount := time.Now(), int64(-1)
wait:
	for {
		select {
		case <-l.all:
			break wait
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if n := l.received.Load(); n != lastCount {
			progress, lastCount = time.Now(), n
		}
		if time.Since(progress) > h.o.stall {
			break
		}
		if fwd != nil {
			if err := fwd.running(); err != nil {
				return r, err
			}
		}
	}
	if self, err := sampleProcess(os.Getpid()); err == nil {
		r.HarnessCPU = (self.cpu - selfStart.cpu).Seconds()
	}
	if fwd != nil {
		end, err := fwd.sample()
		if err != nil {
			return r, err
		}
		r.FwdCPU = (end.cpu - fwdStart.cpu).Seconds()
		r.FwdPeakRSS, r.FwdFileRSS = end.peakRSS, end.fileRSS
		rend, err := relay.sample()
		if err != nil {
			return r, err
		}
		r.RelayCPU = (rend.cpu - relayStart.cpu).Seconds()
		r.RelayPeakRSS = rend.peakRSS
		if hl, err := relay.health(ctx); err == nil {
			r.CutOff = hl.CutOff
		}
	}
	r.fill(l)
	return r, nil
}

// machineInfo describes where the figures come from.
type machineInfo struct {
	CPU      string `json:"cpu"`
	CPUs     int    `json:"cpus"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	Node     string `json:"node,omitempty"`
	Smee     string `json:"smeeClient,omitempty"`
	LoadAvg  string `json:"loadAvgAtStart"`
	Hookline string `json:"hookline"`
}

func machine(h *harness) machineInfo {
	m := machineInfo{CPUs: runtime.NumCPU(), Go: runtime.Version(), Hookline: strings.Join(h.hookline, " ")}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if h.node != "" {
		if out, err := exec.Command(h.node, "--version").Output(); err == nil {
			m.Node = strings.TrimSpace(string(out))
		}
		var pkg struct{ Version string }
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(h.smee)), "package.json")); err == nil && json.Unmarshal(b, &pkg) == nil {
			m.Smee = pkg.Version
		}
	}
	return m
}
