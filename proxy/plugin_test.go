package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/webhooks"
)

func pluginTestLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// writeScript writes an executable shell script into dir.
func writeScript(t *testing.T, dir, name, body string, mode os.FileMode) {
	t.Helper()
	testenv.Tools(t, "cat", "sort", "sleep") // what the scripts run
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), mode); err != nil {
		t.Fatal(err)
	}
}

func skipOnWindows(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("plugin scripts in these tests are POSIX shell")
	}
}

func TestPluginDirSelectsExecutableEventNames(t *testing.T) {
	skipOnWindows(t)
	dir := t.TempDir()
	writeScript(t, dir, "push", "true\n", 0o755)
	writeScript(t, dir, "issues.opened", "true\n", 0o755)
	writeScript(t, dir, "_any", "true\n", 0o755)
	writeScript(t, dir, "brand_new_event", "true\n", 0o755) // unknown: loaded (the emitter warns)
	writeScript(t, dir, "issues.frobbed", "true\n", 0o755)  // an action not known yet: loaded
	writeScript(t, dir, "ping.sh", "true\n", 0o755)         // a script for ping: skipped, one line
	writeScript(t, dir, "README", "not a plugin\n", 0o644)  // not executable
	writeScript(t, dir, ".hidden", "true\n", 0o755)
	writeScript(t, dir, "*", "true\n", 0o755) // reserved name
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	plugins, err := pluginDir(dir, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range plugins {
		got = append(got, p.Name+"->"+p.On)
	}
	want := []string{"_any->*", "brand_new_event->brand_new_event", "issues.frobbed->issues.frobbed", "issues.opened->issues.opened", "push->push"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PluginDir = %v, want %v", got, want)
	}
	for _, w := range []string{"not executable (chmod +x it)", "cannot be an event name", "name it after the event, with no extension: ping"} {
		if strings.Count(logs.String(), w) != 1 {
			t.Errorf("warnings lack %q (once):\n%s", w, logs.String())
		}
	}
	if strings.Contains(logs.String(), "brand_new_event") {
		t.Errorf("PluginDir warned about an unknown name the emitter warns about (twice in all):\n%s", logs.String())
	}
	if _, err := pluginDir(filepath.Join(dir, "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pluginDir(missing) error = %v, want os.ErrNotExist", err)
	}
}

// receiveWithPlugins registers plugins on a fresh Webhooks and receives one event,
// returning Receive's error and the reported handler results.
func receiveWithPlugins(t *testing.T, plugins []pluginSpec, opts PluginOptions, e webhooks.Event) ([]HandlerResult, error) {
	t.Helper()
	w := webhooks.NewEmitter(webhooks.EmitterOptions{Logger: pluginTestLogger()})
	if err := registerPlugins(w, plugins, opts); err != nil {
		t.Fatal(err)
	}
	ctx, log := withHandlerLog(t.Context())
	err := w.Receive(ctx, e)
	results := log.list()
	sort.Slice(results, func(i, j int) bool { return results[i].Name < results[j].Name })
	return results, err
}

func TestPluginRunsWithPayloadAndEnvironment(t *testing.T) {
	skipOnWindows(t)
	dir, out := t.TempDir(), t.TempDir()
	// The plugin copies what it was given into files the test reads back.
	writeScript(t, dir, "issues.opened", `cat > "$OUT/stdin"
cp "$HOOKLINE_PAYLOAD_FILE" "$OUT/file"
env | sort > "$OUT/env"
`, 0o755)
	plugins, err := pluginDir(dir, pluginTestLogger())
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"action":"opened","issue":{"title":"é \u00e9"}}`)
	opts := PluginOptions{
		Env:     []string{"OUT=" + out, "PASSED"},
		Environ: []string{"PATH=" + os.Getenv("PATH"), "HOOKLINE_SECRET=hunter2", "GITHUB_TOKEN=ghp_x", "PASSED=yes", "LC_ALL=C", "HOME=/home/u"},
	}
	results, err := receiveWithPlugins(t, plugins, opts, webhooks.Event{ID: "d-1", Name: "issues", Payload: payload})
	if err != nil {
		t.Fatalf("Receive = %v, want nil", err)
	}
	for _, f := range []string{"stdin", "file"} {
		got, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Errorf("plugin %s = %q, want %q", f, got, payload)
		}
	}
	env, err := os.ReadFile(filepath.Join(out, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HOOKLINE_EVENT=issues\n", "HOOKLINE_ACTION=opened\n", "HOOKLINE_DELIVERY=d-1\n", "PASSED=yes\n", "LC_ALL=C\n", "HOME=/home/u\n"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("plugin environment lacks %q:\n%s", want, env)
		}
	}
	for _, leaked := range []string{"hunter2", "ghp_x"} {
		if strings.Contains(string(env), leaked) {
			t.Errorf("plugin environment leaks %q:\n%s", leaked, env)
		}
	}
	if len(results) != 1 || results[0].Name != "issues.opened" || results[0].Err != nil {
		t.Errorf("results = %+v, want one successful issues.opened", results)
	}
}

func TestPluginFailures(t *testing.T) {
	skipOnWindows(t)
	tests := []struct {
		name    string
		script  string
		timeout time.Duration
		wantMsg string
	}{
		{"non-zero exit", "echo starting >&2\necho 'database is locked' >&2\nexit 3\n", 0, "plugin failed: push: exit status 3: database is locked"},
		{"silent failure", "exit 1\n", 0, "plugin failed: push: exit status 1"},
		{"timeout", "sleep 5\n", 100 * time.Millisecond, "plugin failed: push: killed after 100ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeScript(t, dir, "push", tt.script, 0o755)
			plugins, err := pluginDir(dir, pluginTestLogger())
			if err != nil {
				t.Fatal(err)
			}
			results, err := receiveWithPlugins(t, plugins, PluginOptions{Timeout: tt.timeout}, webhooks.Event{ID: "d", Name: "push", Payload: []byte(`{}`)})
			if !errors.Is(err, ErrPluginFailed) {
				t.Fatalf("Receive error = %v, want ErrPluginFailed", err)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("error = %q, want %q", err, tt.wantMsg)
			}
			if len(results) != 1 || !errors.Is(results[0].Err, ErrPluginFailed) {
				t.Errorf("results = %+v, want one failed push", results)
			}
		})
	}
}

func TestExecPluginRunsForEveryEventWithPrefixedOutput(t *testing.T) {
	skipOnWindows(t)
	var out bytes.Buffer
	p := execPlugin(`echo "got $HOOKLINE_EVENT"; printf 'no newline' >&2`)
	for _, name := range []string{"push", "ping"} {
		results, err := receiveWithPlugins(t, []pluginSpec{p}, PluginOptions{Output: &out}, webhooks.Event{Name: name, Payload: []byte(`{}`)})
		if err != nil || len(results) != 1 {
			t.Fatalf("Receive(%s) = %v, results %+v; want nil and one result", name, err, results)
		}
		// The result keeps what it printed, both streams (the inspector shows it).
		if o := results[0].Output; !strings.Contains(o, "got "+name+"\n") || !strings.Contains(o, "no newline") {
			t.Errorf("Result.Handlers[0].Output = %q, want both streams", o)
		}
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	sort.Strings(lines)
	prefix := p.Name + ": "
	want := []string{prefix + "got ping", prefix + "got push", prefix + "no newline", prefix + "no newline"}
	sort.Strings(want)
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("output lines = %q, want %q", lines, want)
	}
}

func TestReportHandlerOutsideADeliveryIsANoOp(t *testing.T) {
	reportHandler(context.Background(), HandlerResult{Name: "x"}) // must not panic
}

// Each kind of plugin file runs for the deliveries it names: <event> for
// every action, <event>.<action> for one, _any for all.
func TestPluginKindsMatchTheirDeliveries(t *testing.T) {
	skipOnWindows(t)
	dir, out := t.TempDir(), t.TempDir()
	for _, name := range []string{"issues", "issues.opened", "_any", "push"} {
		writeScript(t, dir, name, `echo "$HOOKLINE_EVENT.$HOOKLINE_ACTION" >> "$OUT/`+name+`"`+"\n", 0o755)
	}
	plugins, err := pluginDir(dir, pluginTestLogger())
	if err != nil {
		t.Fatal(err)
	}
	opts := PluginOptions{Env: []string{"OUT=" + out}}
	for _, e := range []webhooks.Event{
		{Name: "issues", Payload: []byte(`{"action":"opened"}`)},
		{Name: "issues", Payload: []byte(`{"action":"closed"}`)},
		{Name: "ping", Payload: []byte(`{}`)},
	} {
		if _, err := receiveWithPlugins(t, plugins, opts, e); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{
		"issues":        "issues.opened\nissues.closed\n",
		"issues.opened": "issues.opened\n",
		"_any":          "issues.opened\nissues.closed\nping.\n",
		"push":          "",
	}
	for name, w := range want {
		got, _ := os.ReadFile(filepath.Join(out, name))
		if string(got) != w {
			t.Errorf("plugin %s ran for %q, want %q", name, got, w)
		}
	}
}

// A plugin whose run times out is killed with every process it started:
// here a script that starts a grandchild (sleep) and waits for it. Before
// process groups, the grandchild outlived the timeout under PID 1 and
// Receive waited for WaitDelay.
func TestPluginTimeoutKillsItsProcessGroup(t *testing.T) {
	skipOnWindows(t)
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see whether the grandchild runs")
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild.pid")
	writeScript(t, dir, "push", "sleep 30 &\necho $! > "+pidFile+"\nwait\n", 0o755)
	plugins, err := pluginDir(dir, pluginTestLogger())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = receiveWithPlugins(t, plugins, PluginOptions{Timeout: 300 * time.Millisecond}, webhooks.Event{ID: "d", Name: "push", Payload: []byte(`{}`)})
	took := time.Since(start)
	if !errors.Is(err, ErrPluginFailed) || !strings.Contains(err.Error(), "killed after 300ms") {
		t.Fatalf("Receive error = %v, want the timeout", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	// Killed means gone, or a zombie waiting for PID 1 to reap it. A
	// SIGKILLed process may take a moment to finish dying; one that was
	// not sent the signal runs for 30 s.
	testenv.Poll(t, fmt.Sprintf("the plugin's grandchild (pid %s) to die after the timeout (Receive took %v)", pid, took), 10*time.Millisecond, func() bool {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return true // gone
		}
		f := strings.Fields(string(st))
		return len(f) > 2 && (f[2] == "Z" || f[2] == "X")
	})
}

// A delivery chooses no plugin by its event name: a name with "." or "*"
// is refused (before, "*" ran _any twice and "issues.closed" ran the
// issues.closed plugin), and a NUL in the action does not make the run
// fail (before, every plugin failed: an environment value cannot hold one).
func TestPluginDispatchTakesNoNameFromTheSender(t *testing.T) {
	skipOnWindows(t)
	dir, out := t.TempDir(), t.TempDir()
	for _, name := range []string{"_any", "issues.closed"} {
		writeScript(t, dir, name, "echo \"$HOOKLINE_ACTION\" >> "+filepath.Join(out, "ran."+name)+"\n", 0o755)
	}
	plugins, err := pluginDir(dir, pluginTestLogger())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"*", "issues.closed"} {
		if _, err := receiveWithPlugins(t, plugins, PluginOptions{}, webhooks.Event{ID: "d", Name: name, Payload: []byte(`{}`)}); !errors.Is(err, webhooks.ErrInvalidName) {
			t.Errorf("event %q: Receive = %v, want ErrInvalidName", name, err)
		}
	}
	if ran, _ := filepath.Glob(filepath.Join(out, "ran.*")); len(ran) != 0 {
		t.Fatalf("plugins ran for a sender-chosen name: %v", ran)
	}
	results, err := receiveWithPlugins(t, plugins, PluginOptions{}, webhooks.Event{ID: "d", Name: "issues", Payload: []byte(`{"action":"clo\u0000sed"}`)})
	if err != nil || len(results) != 1 {
		t.Fatalf("Receive with a NUL in the action = %v, %+v; want _any to run", err, results)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "ran._any")); string(b) != "closed\n" {
		t.Errorf("HOOKLINE_ACTION = %q, want %q", b, "closed\n")
	}
}
