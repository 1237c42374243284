package cli

import (
	"context"
	"fmt"
	"net"

	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/internal/agent"
	"github.com/hookline/hookline/internal/bytesize"
	"github.com/hookline/hookline/internal/inspect"
)

// inspectFlagValues are the inspector's flags (forward, replay,
// deliveries).
type inspectFlagValues struct {
	addr         string
	history      int
	historyBytes string
}

// inspectFlags returns the inspector's flags; on is whether it runs unless
// --inspect "" (forward) or only with --inspect (replay, deliveries).
func inspectFlags(v *inspectFlagValues, on bool) []ucli.Flag {
	addr := &ucli.StringFlag{Name: "inspect", Destination: &v.addr,
		Usage: "serve the inspector (every delivery with the target's answer; replay, edit and replay signed again) on `ADDR`; a busy port falls back to a free one"}
	if on {
		addr.Value = inspect.DefaultAddr
		addr.Usage += `; --inspect "" turns it off`
	}
	return []ucli.Flag{
		addr,
		&ucli.IntFlag{Name: "inspect-history", Value: inspect.DefaultHistory, Usage: "the inspector keeps the last `N` deliveries", Destination: &v.history},
		&ucli.StringFlag{Name: "inspect-history-bytes", Value: "256MiB", Usage: "and at most `SIZE` of their bodies and answers, the oldest evicted first", Destination: &v.historyBytes},
	}
}

// inspectOptions checks the flags and returns the inspector's options
// (nil when it is off).
func (v *inspectFlagValues) options() (*inspect.Options, error) {
	if v.addr == "" {
		return nil, nil
	}
	if v.history < 1 {
		return nil, usageErrorf("--inspect-history %d: want at least 1", v.history)
	}
	n, err := bytesize.Parse(v.historyBytes)
	if err != nil || n < 1 {
		return nil, usageErrorf("--inspect-history-bytes %q: want a size such as 256MiB", v.historyBytes)
	}
	if _, _, err := net.SplitHostPort(v.addr); err != nil {
		return nil, usageErrorf("--inspect %q: want host:port, such as %s", v.addr, inspect.DefaultAddr)
	}
	return &inspect.Options{History: v.history, HistoryBytes: n}, nil
}

// startInspector serves an inspector with opts on addr (a free port of
// its host when that one is busy) until ctx ends, prints its URL, and
// records it in the state directory for hookline mcp until forget.
func startInspector(ctx context.Context, addr string, opts inspect.Options, s *streams) (in *inspect.Inspector, ep agent.Endpoint, forget func(), err error) {
	ln, err := listenOrFree(addr, s)
	if err != nil {
		return nil, ep, nil, fmt.Errorf("--inspect %s: %w", addr, err)
	}
	in = inspect.New(opts)
	go in.Serve(ctx, ln)
	fmt.Fprintf(s.err, "inspector: %s\n", inspect.URL(ln, in.Token()))
	ep = agent.Endpoint{URL: "http://" + ln.Addr().String(), Token: in.Token()}
	return in, ep, recordInspector(ep, s), nil
}

// listenOrFree listens on addr or, when it cannot (a busy port), on a free
// port of the same host, saying so.
func listenOrFree(addr string, s *streams) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	host, _, _ := net.SplitHostPort(addr)
	fallback, ferr := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if ferr != nil {
		return nil, err
	}
	fmt.Fprintf(s.err, "%s is busy (%v); using %s\n", addr, err, fallback.Addr())
	return fallback, nil
}
