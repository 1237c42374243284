package proxy

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookline/hookline/internal/sse"
	"github.com/hookline/hookline/internal/wire"
)

// A relay that sends nothing but malformed messages gets at most warnBurst
// warnings a minute; the first one after that says how many were held
// back. Before, every message was a warning line (273 MB in 30 s).
func TestMalformedWarningsAreRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		c, err := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		for range 1000 {
			c.decode(sse.Event{Kind: wire.KindDelivery, Data: []byte("not json")})
		}
		if n := strings.Count(logs.String(), "\n"); n != warnBurst {
			t.Errorf("%d warning lines for 1000 malformed messages, want %d", n, warnBurst)
		}
		time.Sleep(time.Minute) // simulated (synctest)
		logs.Reset()
		c.decode(sse.Event{Kind: wire.KindDelivery, Data: []byte("not json")})
		if !strings.Contains(logs.String(), "count=990") || strings.Count(logs.String(), "\n") != 2 {
			t.Errorf("after a minute: %q, want the count of the 990 held back, then the warning", logs.String())
		}
		if got := c.Stats().Malformed; got != 1001 {
			t.Errorf("Stats().Malformed = %d, want every message counted (1001)", got)
		}
	})
}
