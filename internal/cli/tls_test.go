package cli

import (
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
)

// newTLSServer is httptest.NewTLSServer (a certificate no client trusts)
// without the log line for each refused handshake.
func newTLSServer(t *testing.T, h http.Handler) *httptest.Server {
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

const insecureWarning = "warning: --insecure: TLS certificates are not verified"

// TLS certificates are verified by default for targets: a self-signed
// target fails with a message that names --insecure, and works with it
// (with a warning, printed once).
func TestForwardTLSTarget(t *testing.T) {
	target := &relaytest.Sink{}
	ts := newTLSServer(t, target)
	rl := relaytest.Start(t, relay.Options{})

	t.Run("verified by default", func(t *testing.T) {
		failed := t.TempDir()
		f := startForward(t, "--url", rl.Channel, "--target", ts.URL, "--retries", "0", "--failed-dir", failed)
		f.waitErr(t, "connected to")
		rl.Publish(t, nil, 1, relaytest.Body(1, 0))
		f.waitOutLines(t, 4)
		f.stop(t)
		out := f.out.String()
		for _, want := range []string{"→ unreachable", "certificate", "add --insecure"} {
			if !strings.Contains(out, want) {
				t.Errorf("trace lacks %q:\n%s", want, out)
			}
		}
		if len(target.Arrivals()) != 0 {
			t.Error("the delivery reached a target whose certificate is not trusted")
		}
		if files, _ := filepath.Glob(filepath.Join(failed, "*.json")); len(files) != 1 {
			t.Errorf("%d files saved for a replay, want 1", len(files))
		}
	})
	t.Run("--insecure", func(t *testing.T) {
		f := startForward(t, "--url", rl.Channel, "--target", ts.URL, "--insecure")
		f.waitErr(t, "connected to")
		rl.Publish(t, nil, 2, relaytest.Body(2, 0))
		f.waitOutLines(t, 1)
		f.stop(t)
		if !strings.Contains(f.out.String(), "→ 200") {
			t.Errorf("trace = %q, want the delivery taken", f.out.String())
		}
		if n := strings.Count(f.err.String(), insecureWarning); n != 1 {
			t.Errorf("the warning appears %d times, want once:\n%s", n, f.err.String())
		}
	})
}

// The same for a relay served over TLS: without --insecure forward stops at
// once with a message naming --insecure (retrying cannot fix a
// certificate); with it, deliveries flow.
func TestForwardTLSRelay(t *testing.T) {
	srv, err := relay.New(relay.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rs := newTLSServer(t, srv)
	t.Cleanup(srv.Close)
	channel := rs.URL + "/" + srv.NewChannel()

	code, _, errOut := run(t, "forward", "--url", channel, "--no-color")
	if code != ExitFailure {
		t.Errorf("exit code = %d, want 1", code)
	}
	for _, want := range []string{"the relay's TLS certificate cannot be verified", "add --insecure"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}

	target := &relaytest.Sink{}
	ts := httptest.NewServer(target)
	t.Cleanup(ts.Close)
	f := startForward(t, "--url", channel, "--target", ts.URL, "--insecure")
	f.waitErr(t, "connected to")
	(&relaytest.Relay{Channel: channel}).Publish(t, rs.Client(), 1, relaytest.Body(1, 0))
	relaytest.CheckExactlyOnce(t, target.WaitFor(t, 1), 1, 1, true, relaytest.Body0)
	f.stop(t)
	if n := strings.Count(f.err.String(), insecureWarning); n != 1 {
		t.Errorf("the warning appears %d times, want once:\n%s", n, f.err.String())
	}
}

func TestReplayAndSendTLS(t *testing.T) {
	target := &relaytest.Sink{}
	ts := newTLSServer(t, target)
	dir := t.TempDir()
	if _, err := capture.Write(dir, capture.File{Delivery: delivery.Delivery{ID: "tls-1", Event: "ping", Body: []byte(`{"zen":"x"}`)}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
	}{
		{"replay", []string{"replay", "--retries", "0", "--target", ts.URL, dir}},
		{"send", []string{"send", "--event", "ping", "--retries", "0", "--target", ts.URL}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(target.Arrivals())
			code, out, errOut := run(t, tt.args...)
			if code != ExitFailure || !strings.Contains(out+errOut, "add --insecure") {
				t.Errorf("without --insecure: exit %d, output:\n%s%s\nwant 1 and a hint naming --insecure", code, out, errOut)
			}
			code, out, errOut = run(t, append(tt.args[:1:1], append([]string{"--insecure"}, tt.args[1:]...)...)...)
			if code != ExitOK || !strings.Contains(out, "200") {
				t.Errorf("with --insecure: exit %d, output:\n%s%s", code, out, errOut)
			}
			if n := strings.Count(errOut, insecureWarning); n != 1 {
				t.Errorf("the warning appears %d times, want once:\n%s", n, errOut)
			}
			if got := len(target.Arrivals()) - before; got != 1 {
				t.Errorf("the target got %d deliveries, want 1", got)
			}
		})
	}
}
