package webhooks_test

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"

	"github.com/hookline/hookline/webhooks"
)

// discard is the logger of tests that do not look at logs.
var discard = slog.New(slog.DiscardHandler)

// logBuffer is a concurrency-safe log sink for tests that read logs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newLogger returns a logger writing text records at every level to a buffer.
func newLogger() (*slog.Logger, *logBuffer) {
	b := new(logBuffer)
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// newWebhooks returns a Webhooks with secret "mysecret" and a discard logger.
func newWebhooks(t testing.TB, opts webhooks.Options) *webhooks.Webhooks {
	t.Helper()
	if opts.Secret == "" {
		opts.Secret = "mysecret"
	}
	if opts.Logger == nil {
		opts.Logger = discard
	}
	w, err := webhooks.New(opts)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	return w
}

// statusError is a handler error that carries an HTTP status.
type statusError struct {
	msg    string
	status int
}

func (e *statusError) Error() string   { return e.msg }
func (e *statusError) StatusCode() int { return e.status }
