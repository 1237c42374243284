package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/webhooks"
)

// anyPluginName is the plugin file name that runs for every delivery.
const anyPluginName = "_any"

// defaultPluginTimeout is how long a plugin may run when
// PluginOptions.Timeout is zero.
const defaultPluginTimeout = time.Minute

// ErrPluginFailed is wrapped by the error of a plugin that exited non-zero,
// could not start, or ran past its timeout.
var ErrPluginFailed = errors.New("plugin failed")

// pluginEnvAllowList is the part of the parent environment a plugin sees:
// enough to find programs, read the user's files and format text, nothing
// that usually carries a credential (HOOKLINE_SECRET, GITHUB_TOKEN, AWS_*).
// LC_* variables pass too.
var pluginEnvAllowList = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ",
	"TMPDIR", "TEMP", "TMP", "TERM", "NO_COLOR",
	// Windows needs these to start most programs.
	"SYSTEMROOT", "SYSTEMDRIVE", "COMSPEC", "PATHEXT", "WINDIR", "USERPROFILE", "APPDATA", "LOCALAPPDATA",
}

// pluginSpec is a local program run for matching deliveries: the payload on its
// standard input and the delivery described by environment variables
// (HOOKLINE_EVENT, HOOKLINE_ACTION, HOOKLINE_DELIVERY and
// HOOKLINE_PAYLOAD_FILE, a file holding the payload). A non-zero exit is a
// handler error. Unless deliveries are verified, the payload and those
// values are whatever a sender posted: plugins must treat them as
// untrusted input.
type pluginSpec struct {
	// Name identifies the plugin in the trace: the file name for a plugin
	// directory entry, the command line for an --exec command.
	Name string
	// On is the event name the plugin is registered under: "<event>",
	// "<event>.<action>" or "*" for every delivery.
	On string
	// Path is the program to run and Args its arguments (without Path).
	Path string
	Args []string
}

// pluginDir returns the plugins in dir: every executable regular file named
// `<event>`, `<event>.<action>` or `_any` (on Windows the extension, such as
// .exe or .cmd, is not part of the name). Hidden files, directories, files
// that are not executable and names that cannot be event names are skipped
// with a warning on logger (nil means slog.Default()). Names that are not
// known GitHub events are loaded with a warning: GitHub adds events faster
// than hookline releases. The plugins are sorted by name.
func pluginDir(dir string, logger *slog.Logger) ([]pluginSpec, error) {
	if logger == nil {
		logger = slog.Default()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading plugin directory: %w", err)
	}
	var plugins []pluginSpec
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		path := filepath.Join(dir, name)
		info, err := os.Stat(path) // follows symlinks
		if err != nil || !info.Mode().IsRegular() {
			logger.Warn("skipping plugin: not a regular file", "path", path)
			continue
		}
		on := name
		if runtime.GOOS == "windows" {
			on = strings.TrimSuffix(name, filepath.Ext(name))
		} else if info.Mode().Perm()&0o111 == 0 {
			logger.Warn("skipping plugin: not executable (chmod +x it)", "path", path)
			continue
		}
		known := func(n string) bool {
			return n == anyPluginName || webhooks.ValidateEventName(n, webhooks.ValidateOptions{}) == nil
		}
		switch base := strings.TrimSuffix(on, filepath.Ext(on)); {
		case on == anyPluginName:
			on = webhooks.AnyEventName
		case webhooks.ValidateEventName(on, webhooks.ValidateOptions{OnUnknownEventName: "ignore"}) != nil:
			logger.Warn("skipping plugin: its file name cannot be an event name", "path", path)
			continue
		case !known(on) && scriptExtensions[filepath.Ext(on)] && known(base):
			// ping.sh would wait for an event "ping" with action "sh".
			logger.Warn("skipping plugin: name it after the event, with no extension: "+base+" (or EVENT.ACTION, or _any)", "path", path)
			continue
		}
		// Another name GitHub is not known to send is loaded: the emitter
		// it is registered with warns about it, once.
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		plugins = append(plugins, pluginSpec{Name: name, On: on, Path: abs})
	}
	sort.Slice(plugins, func(i, j int) bool { return plugins[i].Name < plugins[j].Name })
	return plugins, nil
}

// scriptExtensions are the endings of script files: a plugin named
// ping.sh is a script for ping, not a handler of ping's action "sh".
var scriptExtensions = map[string]bool{
	".sh": true, ".bash": true, ".zsh": true, ".py": true, ".rb": true, ".pl": true, ".php": true,
	".js": true, ".mjs": true, ".cjs": true, ".ts": true, ".lua": true, ".exe": true,
}

// execPlugin returns a plugin that runs command through the shell (sh -c, or
// cmd /C on Windows) for every delivery.
func execPlugin(command string) pluginSpec {
	if runtime.GOOS == "windows" {
		return pluginSpec{Name: command, On: webhooks.AnyEventName, Path: "cmd", Args: []string{"/C", command}}
	}
	return pluginSpec{Name: command, On: webhooks.AnyEventName, Path: "/bin/sh", Args: []string{"-c", command}}
}

// PluginOptions say which plugins RegisterPlugins registers and how they
// run.
type PluginOptions struct {
	// Dir, if not empty, is a directory of plugins: every executable
	// regular file named `<event>`, `<event>.<action>` or `_any` (for every
	// delivery) runs for the deliveries its name matches. On Windows the
	// extension (.exe, .cmd) is not part of the name. Hidden files and files
	// that are not executable or whose names cannot be event names are
	// skipped with a warning on Logger.
	Dir string
	// Commands run through the shell (sh -c, or cmd /C on Windows) for
	// every delivery.
	Commands []string
	// Logger receives the warnings about skipped files. If nil,
	// slog.Default().
	Logger *slog.Logger
	// Timeout bounds one run; the plugin is killed after it. If zero, one
	// minute.
	Timeout time.Duration
	// Env lists extra variables passed to plugins: "NAME" passes the
	// parent's value, "NAME=value" sets one. The rest of the parent
	// environment is withheld except an allow-list (PATH, HOME, LANG, LC_*,
	// TZ, TMPDIR, ...).
	Env []string
	// Environ is the parent environment; if nil, os.Environ().
	Environ []string
	// Output receives what plugins write to stdout and stderr, each line
	// prefixed with the plugin name. If nil, the output is discarded (the
	// last line of stderr still appears in the error of a failed run).
	Output io.Writer
}

// RegisterPlugins registers on w (for a *webhooks.Webhooks, pass
// &wh.Emitter) a handler for each plugin opts names, and returns how many.
// A plugin gets the payload on its standard input and the delivery in
// environment variables (HOOKLINE_EVENT, HOOKLINE_ACTION,
// HOOKLINE_DELIVERY, HOOKLINE_PAYLOAD_FILE); a non-zero exit is a handler
// error, wrapping ErrPluginFailed. Unless deliveries are verified, all of
// it is whatever a sender posted: plugins must treat it as untrusted. Each
// run is reported in the Result of a Client's delivery (Result.Handlers).
func RegisterPlugins(w *webhooks.Emitter, opts PluginOptions) (int, error) {
	var plugins []pluginSpec
	if opts.Dir != "" {
		var err error
		if plugins, err = pluginDir(opts.Dir, opts.Logger); err != nil {
			return 0, err
		}
	}
	for _, cmd := range opts.Commands {
		plugins = append(plugins, execPlugin(cmd))
	}
	return len(plugins), registerPlugins(w, plugins, opts)
}

// registerPlugins registers each plugin as a handler on w under its On name.
func registerPlugins(w *webhooks.Emitter, plugins []pluginSpec, opts PluginOptions) error {
	env := pluginEnv(opts)
	var outMu sync.Mutex
	for _, p := range plugins {
		p := p
		h := func(ctx context.Context, e webhooks.Event) error {
			start := time.Now()
			out := &tailBuffer{max: pluginOutputBytes}
			err := runPlugin(ctx, p, e, env, opts, &outMu, out)
			reportHandler(ctx, HandlerResult{Name: p.Name, Err: err, Duration: time.Since(start), Output: out.String()})
			return err
		}
		if p.On == webhooks.AnyEventName {
			w.OnAny(h)
			continue
		}
		if _, err := w.On(p.On, h); err != nil {
			return fmt.Errorf("registering plugin %s: %w", p.Name, err)
		}
	}
	return nil
}

// pluginEnv builds the environment shared by every run.
func pluginEnv(opts PluginOptions) []string {
	parent := opts.Environ
	if parent == nil {
		parent = os.Environ()
	}
	lookup := map[string]string{}
	for _, kv := range parent {
		if k, v, ok := strings.Cut(kv, "="); ok {
			lookup[k] = v
		}
	}
	var env []string
	for _, k := range pluginEnvAllowList {
		if v, ok := lookup[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range lookup {
		if strings.HasPrefix(k, "LC_") {
			env = append(env, k+"="+v)
		}
	}
	for _, kv := range opts.Env {
		if strings.Contains(kv, "=") {
			env = append(env, kv)
		} else if v, ok := lookup[kv]; ok {
			env = append(env, kv+"="+v)
		}
	}
	sort.Strings(env)
	return env
}

// runPlugin runs p once for e.
// pluginOutputBytes is how much of a run's output (the end of it) its
// HandlerResult keeps.
const pluginOutputBytes = 4 << 10

// runPlugin runs p for e; out gets the end of what it wrote, both streams.
func runPlugin(ctx context.Context, p pluginSpec, e webhooks.Event, env []string, opts PluginOptions, outMu *sync.Mutex, out *tailBuffer) error {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = defaultPluginTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	f, err := os.CreateTemp("", "hookline-payload-*.json")
	if err != nil {
		return fmt.Errorf("%w: %s: writing the payload file: %v", ErrPluginFailed, p.Name, err)
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(e.Payload)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("%w: %s: writing the payload file: %v", ErrPluginFailed, p.Name, werr)
	}

	cmd := exec.CommandContext(ctx, p.Path, p.Args...)
	// A NUL (a payload's "\u0000") cannot be in an environment variable:
	// it is dropped rather than failing every plugin.
	noNUL := func(s string) string { return strings.ReplaceAll(s, "\x00", "") }
	cmd.Env = append(env[:len(env):len(env)],
		"HOOKLINE_EVENT="+noNUL(e.Name),
		"HOOKLINE_ACTION="+noNUL(e.Action()),
		"HOOKLINE_DELIVERY="+noNUL(e.ID),
		"HOOKLINE_PAYLOAD_FILE="+f.Name(),
	)
	cmd.Stdin = bytes.NewReader(e.Payload)
	cmd.WaitDelay = time.Second
	ownGroup(cmd)
	tail := &tailBuffer{max: 2048}
	stdout, stderr := io.Discard, io.Discard
	var flush []*prefixWriter
	if opts.Output != nil {
		o := &prefixWriter{w: opts.Output, prefix: p.Name + ": ", mu: outMu}
		e := &prefixWriter{w: opts.Output, prefix: p.Name + ": ", mu: outMu}
		stdout, stderr, flush = o, e, []*prefixWriter{o, e}
	}
	cmd.Stdout = io.MultiWriter(stdout, out)
	cmd.Stderr = io.MultiWriter(stderr, tail, out)
	err = cmd.Run()
	for _, pw := range flush {
		pw.flush()
	}
	if err == nil {
		return nil
	}
	switch msg := lastLine(strings.TrimSpace(tail.String())); {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: %s: killed after %v", ErrPluginFailed, p.Name, timeout)
	case msg != "":
		return fmt.Errorf("%w: %s: %v: %s", ErrPluginFailed, p.Name, err, msg)
	default:
		return fmt.Errorf("%w: %s: %v", ErrPluginFailed, p.Name, err)
	}
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tailBuffer keeps the last max bytes written to it. It is safe for
// concurrent use (a plugin's stdout and stderr are copied at once).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// prefixWriter writes whole lines to w, each prefixed, holding a partial
// line until it ends or flush is called. Writers share mu so lines of
// several plugins never interleave.
type prefixWriter struct {
	w       io.Writer
	prefix  string
	mu      *sync.Mutex
	partial []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		p.emit(p.partial[:i+1])
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

func (p *prefixWriter) flush() {
	if len(p.partial) > 0 {
		p.emit(append(p.partial, '\n'))
		p.partial = nil
	}
}

func (p *prefixWriter) emit(line []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	io.WriteString(p.w, p.prefix)
	p.w.Write(line)
}
