package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"syscall"

	"github.com/hookline/hookline/internal/cli"
	"github.com/hookline/hookline/proxy"
)

// childEnv, when set, makes this program act as the hookline command
// (internal/cli's Run, exactly what main.go runs) so that --profile can
// profile the relay and the forwarder without a profiling flag in the
// product. It writes a CPU profile to $HOOKLINE_CPUPROFILE and an
// allocation profile (alloc_space, alloc_objects, inuse_space) to
// $HOOKLINE_MEMPROFILE when they are set, once the command returns (after
// SIGTERM, like the real binary's graceful stop), and an execution trace to
// $HOOKLINE_TRACE.
const childEnv = "HOOKLINE_BENCH_AS_HOOKLINE"

// Environment variables naming the profiles a child writes.
const (
	cpuProfileEnv = "HOOKLINE_CPUPROFILE"
	memProfileEnv = "HOOKLINE_MEMPROFILE"
	traceEnv      = "HOOKLINE_TRACE" // an execution trace (go tool trace)
	// transportEnv makes the child run `forward` on proxy.Client with the
	// named Transport ("r3labs" or "stdlib") instead of internal/cli, which
	// has no way to choose one: see forwardWith.
	transportEnv = "HOOKLINE_BENCH_TRANSPORT"
)

func runAsHookline() int {
	var cpu *os.File
	if path := os.Getenv(cpuProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			return 1
		}
		cpu = f
	}
	if path := os.Getenv(traceEnv); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			return 1
		}
		defer func() { trace.Stop(); f.Close() }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var code int
	if tr := os.Getenv(transportEnv); tr != "" {
		code = forwardWith(ctx, tr, os.Args[1:])
	} else {
		code = cli.Run(ctx, append([]string{"hookline"}, os.Args[1:]...), os.Stdin, os.Stdout, os.Stderr)
	}
	stop()
	if cpu != nil {
		pprof.StopCPUProfile()
		cpu.Close()
	}
	if path := os.Getenv(memProfileEnv); path != "" {
		runtime.GC()
		f, err := os.Create(path)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
		}
	}
	return code
}

// forwardWith runs what `hookline forward --url U --target T
// [--concurrency N]` runs (proxy.Client with the secret from
// HOOKLINE_SECRET, one trace line per delivery on stdout, warnings on
// stderr), with the Transport named by transport. The bench's
// hookline-stdlib and hookline-r3labs tools use it to compare the two
// transports on the same code path.
func forwardWith(ctx context.Context, transport string, args []string) int {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	fs.Bool("no-color", false, "")
	url := fs.String("url", "", "")
	target := fs.String("target", "", "")
	concurrency := fs.Int("concurrency", 1, "")
	if len(args) == 0 || args[0] != "forward" || fs.Parse(args[1:]) != nil {
		fmt.Fprintln(os.Stderr, "bench child: want forward --url U --target T")
		return 2
	}
	var tr proxy.Transport
	switch transport {
	case "stdlib":
		tr = &proxy.StdlibTransport{}
	case "r3labs":
		tr = &proxy.SSETransport{}
	default:
		fmt.Fprintf(os.Stderr, "bench child: unknown transport %q\n", transport)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	c, err := proxy.New(proxy.Options{
		URL: *url, Target: *target, Secret: os.Getenv("HOOKLINE_SECRET"), Concurrency: *concurrency, Transport: tr,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnResult: func(r proxy.Result) {
			status := 0
			if r.Target != nil {
				status = r.Target.Status
			}
			mu.Lock()
			fmt.Fprintf(out, "%s %-8.8s %s.%s %s %s → %d\n", r.Received.Format("15:04:05"), r.Delivery.ID, r.Delivery.Event, r.Action, r.Repository, r.Verification, status)
			out.Flush()
			mu.Unlock()
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 1
	}
	if err := c.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 1
	}
	return 0
}
