package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"syscall"

	"github.com/hookline/hookline/internal/cli"
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
	code := cli.Run(ctx, append([]string{"hookline"}, os.Args[1:]...), os.Stdin, os.Stdout, os.Stderr)
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
