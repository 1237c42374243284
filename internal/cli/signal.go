package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// ExitInterrupted is the exit code after a second Ctrl-C cut a command
// short (128 + SIGINT, as shells report it).
const ExitInterrupted = 130

// Main runs the process's command line (os.Args and the standard streams)
// and returns its exit code. The first SIGINT or SIGTERM ends the command's
// context: a graceful stop. A second one, while it stops, quits at once:
// forward cuts short the deliveries in flight (saved to the failed folder)
// and exits with ExitInterrupted. A third is the operating system's.
func Main() int {
	ctx, stop := context.WithCancel(context.Background())
	quit, quitNow := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		if <-sig == os.Interrupt && isTerminal(os.Stderr) {
			// The terminal echoed ^C where the cursor was: what the
			// command says next (the summary) starts on a line of its own.
			os.Stderr.WriteString("\n")
		}
		stop()
		<-sig
		quitNow()
		signal.Stop(sig)
	}()
	return Run(withQuit(ctx, quit), os.Args, os.Stdin, os.Stdout, os.Stderr)
}

type quitKey struct{}

// withQuit returns ctx carrying quit, a context that ends on the second
// Ctrl-C.
func withQuit(ctx, quit context.Context) context.Context {
	return context.WithValue(ctx, quitKey{}, quit)
}

// quitContext returns the context withQuit put in ctx, or one that never
// ends.
func quitContext(ctx context.Context) context.Context {
	if q, ok := ctx.Value(quitKey{}).(context.Context); ok {
		return q
	}
	return context.Background()
}
