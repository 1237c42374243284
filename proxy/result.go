package proxy

import (
	"context"
	"sync"
	"time"
)

// HandlerResult is the outcome of one local handler (a plugin, or any Go
// handler that reports itself) for one delivery.
type HandlerResult struct {
	Name     string        // the handler's name, as shown in the trace
	Err      error         // nil when it succeeded (a plugin's: its exit status and last line)
	Duration time.Duration // how long it ran
	Output   string        // a plugin's output, stdout and stderr as they came: the last 4 KiB
}

type handlerLogKey struct{}

// handlerLog collects the HandlerResults reported during one delivery.
type handlerLog struct {
	mu      sync.Mutex
	results []HandlerResult
}

// withHandlerLog returns a context whose handlers' reports are collected in
// the returned log.
func withHandlerLog(ctx context.Context) (context.Context, *handlerLog) {
	l := &handlerLog{}
	return context.WithValue(ctx, handlerLogKey{}, l), l
}

// reportHandler records r in the Result of the delivery being handled with
// ctx, so the trace can show it. Plugins registered with RegisterPlugins
// report themselves; a Go handler may call it too. Outside a Client's
// delivery it does nothing. It is safe for concurrent use.
func reportHandler(ctx context.Context, r HandlerResult) {
	l, ok := ctx.Value(handlerLogKey{}).(*handlerLog)
	if !ok {
		return
	}
	l.mu.Lock()
	l.results = append(l.results, r)
	l.mu.Unlock()
}

// list returns the results so far.
func (l *handlerLog) list() []HandlerResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]HandlerResult(nil), l.results...)
}
