// Command bench measures hookline end to end on this machine, side by side
// with smee-client and with a direct HTTP POST, as SPEC section 10 asks.
//
//	go run ./cmd/hookline-bench                       # the full run: four scenarios, 3 rounds
//	go run ./cmd/hookline-bench --quick               # a few hundred small deliveries, 1 round
//	go run ./cmd/hookline-bench --n 5000 --size 4KiB --rate 500 --tools hookline,smee
//	go run ./cmd/hookline-bench --profile /tmp/prof   # also pprof profiles of relay and forwarder
//
// One trial starts a fresh `hookline serve` process on loopback, a target
// HTTP server inside this process, and a forwarder process: the real
// `hookline forward` binary (built as a release is, unless --hookline names
// one) or the real smee-client (node interop/node_modules/smee-client/bin/
// smee.js). It then publishes N signed deliveries of one size to the relay,
// as fast as the pipeline takes them (at most --window in flight) or at a
// fixed --rate, and measures at the target: deliveries per second, the
// latency from the start of each publishing POST to the moment the target
// has read the whole body (p50, p95, p99, max), deliveries lost, bodies not
// byte-exact, and the forwarder's and the relay's peak RSS (VmHWM) and CPU
// time (from /proc/<pid>/stat, over the measured phase). The "direct" tool
// is the baseline: the same publisher POSTs straight to the target, no relay
// and no forwarder, which is this machine's limit for one HTTP hop.
//
// The relay is a separate process (not a relay.Server in this process) so
// that its CPU and memory are measured apart from the publisher and the
// target, and so that it runs exactly as users run it. Tools alternate
// within each round (the order rotates every round) and the tables show
// medians over the rounds.
//
// With --profile DIR the hookline trials run the relay and the forwarder as
// copies of this program acting as the hookline command (the same code as
// the binary: internal/cli's Run), which write CPU and allocation profiles
// named by the environment variables HOOKLINE_CPUPROFILE and
// HOOKLINE_MEMPROFILE. The product itself has no profiling flag.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if code, ok := asChild(); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// asChild runs this program as one of the processes the harness starts
// from it, when the environment says so: hookline itself (--profile), or
// the floor tool's relay and forwarder. ok is false otherwise.
func asChild() (code int, ok bool) {
	switch {
	case os.Getenv(childEnv) != "":
		return runAsHookline(), true
	case os.Getenv(floorEnv) != "":
		return runFloor(os.Args[1:]), true
	}
	return 0, false
}
