// Package cli is the hookline command line: one file per command, each split
// into a parse step (flags to an options struct) and a run step that writes
// only to the injected streams, so tests capture everything a user would see.
//
// Exit codes are decided in one place, Run:
//
//	0  success
//	1  the command failed (the message is printed on stderr)
//	2  usage error: unknown command or flag, bad flag value
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/fatih/color"
	ucli "github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/hookline/hookline/internal/eventmatch"
	"github.com/hookline/hookline/internal/nearest"
	"github.com/hookline/hookline/webhooks/provider"
)

// The commands' defaults, which are package proxy's too.
const (
	targetTimeout = 30 * time.Second // one request to the target
	drainTimeout  = 10 * time.Second // deliveries in flight after Ctrl-C
	dedupWindow   = time.Hour        // a delivery id seen within it is skipped
)

// Exit codes returned by Run.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// Run runs the hookline command line with args (args[0] is the program name)
// and returns the process exit code. Commands read from stdin and write only
// to stdout and stderr; ctx ends long-running commands (main cancels it on
// SIGINT and SIGTERM).
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	s := &streams{in: stdin, out: stdout, err: stderr}
	app := newApp(s)
	// urfave/cli v2 parses the word being completed before it completes,
	// and crashes when that word is a partial flag ("--ta"); its flag
	// completion reads the word from os.Args, so it is left out here.
	if n := len(args); n >= 3 && args[n-1] == "--generate-bash-completion" && strings.HasPrefix(args[n-2], "-") && args[n-2] != "--" {
		args = append(args[:n-2:n-2], args[n-1])
	}
	err := app.RunContext(ctx, args)
	return exitCode(err, s)
}

// exitCode maps the error a command returned to an exit code, printing its
// message on stderr.
func exitCode(err error, s *streams) int {
	if err == nil {
		return ExitOK
	}
	code := ExitFailure
	var ue *usageError
	if errors.As(err, &ue) {
		code = ExitUsage
	}
	var ce *codeError
	if errors.As(err, &ce) {
		code = ce.code
		if ce.silent {
			return code
		}
	}
	fmt.Fprintf(s.err, "%s %v\n", paint(s.errColor, color.FgRed, color.Bold).Sprint("hookline:"), err)
	return code
}

// usageError marks an error in how the command was called (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usageErrorf returns a usage error with a formatted message.
func usageErrorf(format string, a ...interface{}) error {
	return &usageError{err: fmt.Errorf(format, a...)}
}

// codeError carries an explicit exit code for commands whose code is part of
// their contract (for example `verify`: 1 when a signature does not match).
// A silent codeError has already told the user everything on the streams.
type codeError struct {
	code   int
	err    error
	silent bool
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

// One letter means one thing in every command: -v is --verbose (forward,
// replay, deliveries, serve), so the version is --version or `hookline
// version`, not urfave/cli's default -v; -p is forward's --port
// (smee-client's), so send's --payload has no letter.
func init() {
	ucli.VersionFlag = &ucli.BoolFlag{Name: "version", Usage: "print the version"}
}

func newApp(s *streams) *ucli.App {
	app := &ucli.App{
		// A repeatable flag's value is taken whole: --exec 'echo a,b' is
		// one command, --header 'Accept: a, b' one header. --events and
		// --ignore split their own commas (splitNames).
		DisableSliceFlagSeparator: true,
		Name:                      "hookline",
		Usage:                     "get real webhook deliveries onto your machine, verify them, see them, replay them",
		Version:                   buildVersion().Version,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{
				Name:    "no-color",
				Usage:   "never colour output (colour is also off when NO_COLOR is set or the stream is not a terminal)",
				EnvVars: []string{"HOOKLINE_NO_COLOR"},
			},
		},
		// In the order a user needs them.
		Commands: []*ucli.Command{
			forwardCommand(s),
			sendCommand(s),
			replayCommand(s),
			deliveriesCommand(s),
			mcpCommand(s),
			appCommand(s),
			serveCommand(s),
			signCommand(s),
			verifyCommand(s),
			eventsCommand(s),
			completionCommand(s),
			versionCommand(s),
		},
		Description: `Examples:
   hookline forward --target http://127.0.0.1:3000/api/github/webhooks --secret-file .secret
   hookline send --event issues.opened --secret-file .secret --url http://127.0.0.1:3333/CHANNEL`,
		Reader:    s.in,
		Writer:    s.out,
		ErrWriter: s.err,
		Before: func(c *ucli.Context) error {
			s.decideColor(noColorSet(c))
			return nil
		},
		OnUsageError: func(_ *ucli.Context, err error, _ bool) error {
			return usageErrorf("%v; run 'hookline --help' for usage", err)
		},
		Action: func(c *ucli.Context) error {
			if c.NArg() > 0 {
				var names []string
				for _, cmd := range c.App.Commands {
					names = append(names, cmd.Names()...)
				}
				hint := ""
				if best := closest(c.Args().First(), names); best != "" {
					hint = " (did you mean " + best + "?)"
				}
				return usageErrorf("unknown command %q%s; run 'hookline --help' for the list of commands", c.Args().First(), hint)
			}
			return ucli.ShowAppHelp(c)
		},
		// Exit codes are decided by Run alone: urfave/cli must never exit.
		ExitErrHandler:         func(*ucli.Context, error) {},
		HideHelpCommand:        true,
		UseShortOptionHandling: true,
		Suggest:                true,
		EnableBashCompletion:   true,
	}
	// --no-color is accepted after the command name too
	// (`hookline forward --no-color`), where people put it.
	commands := slices.Clone(app.Commands)
	for _, cmd := range app.Commands {
		commands = append(commands, cmd.Subcommands...) // app new
	}
	for _, cmd := range commands {
		cmd.Flags = append(cmd.Flags, &ucli.BoolFlag{Name: "no-color", Usage: "never colour output"})
		cmd.HideHelpCommand = true // no "help" subcommand: commands are leaves (and completion works)
		// A usage error is one line on stderr and exit 2, never the help.
		cmd.OnUsageError = func(c *ucli.Context, err error, _ bool) error {
			return commandUsageError(c.Command, err)
		}
		cmd.Flags = withConfigSource(cmd.Flags)
		if cmd.BashComplete == nil {
			cmd.BashComplete = completeFlags(cmd)
		}
		cmd.Before = func(c *ucli.Context) error {
			s.decideColor(noColorSet(c))
			if err := flagAsValue(c); err != nil {
				return err
			}
			return applyConfig(c, s)
		}
	}
	return app
}

// completeFlags completes a command's flags as urfave/cli's default does,
// except that a flag whose name is the whole word typed is offered too:
// urfave/cli leaves an exact match out, so bash, seeing one candidate left,
// completed --target to --target-secret. Like urfave/cli's, it reads the
// word from os.Args (see Run), and offers no flag already given. The bash
// and zsh scripts set HOOKLINE_COMPLETING_FLAG when the word being
// completed is a flag: without it, the last word is a flag whose value is
// being typed (send --payload <TAB>), which falls back to files.
func completeFlags(cmd *ucli.Command) ucli.BashCompleteFunc {
	return func(c *ucli.Context) {
		var last string
		if len(os.Args) > 2 {
			last = os.Args[len(os.Args)-2]
		}
		if !strings.HasPrefix(last, "-") || os.Getenv("HOOKLINE_COMPLETING_FLAG") == "" {
			ucli.DefaultCompleteWithFlags(cmd)(c)
			return
		}
		given := os.Args[1 : len(os.Args)-2]
		cur := strings.TrimLeft(last, "-")
		for _, f := range cmd.Flags {
			if v, ok := f.(ucli.VisibleFlag); ok && !v.IsVisible() {
				continue
			}
			for _, name := range f.Names() {
				if len(name) == 1 && strings.HasPrefix(last, "--") || !strings.HasPrefix(name, cur) ||
					slices.Contains(given, dashOf(name)) {
					continue
				}
				fmt.Fprintln(c.App.Writer, dashOf(name))
			}
		}
	}
}

// noColorSet reports whether --no-color was given before or after the
// command name.
func noColorSet(c *ucli.Context) bool {
	for _, x := range c.Lineage() {
		if x.Bool("no-color") {
			return true
		}
	}
	return false
}

// eventPatterns compiles the event patterns given with flag (--events,
// --ignore, --route: package eventmatch's one grammar), refusing a pattern
// that is malformed or a typo of a name hookline knows as a usage error.
// Names are GitHub's unless scheme names another sender.
func eventPatterns(flag string, patterns []string, scheme provider.Scheme) (eventmatch.Set, error) {
	set, _, err := eventmatch.Compile(patterns, scheme == "" || scheme == provider.GitHub)
	if err != nil {
		return set, usageErrorf("%s: %v", flag, err)
	}
	return set, nil
}

// closest returns the name in names closest to typed when it is close
// enough to be a typo (at most two edits), "" otherwise.
func closest(typed string, names []string) string { return nearest.Name(typed, names, 2) }

// flagAsValue refuses a flag that took the next flag as its value:
// `forward --target --secret x` gives --target the value "--secret" (Go's
// flag package takes the next word, whatever it is), then x is a stray
// argument and the secret is never read.
func flagAsValue(c *ucli.Context) error {
	var names []string
	for _, f := range c.Command.Flags {
		names = append(names, f.Names()...)
	}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if !c.IsSet(name) {
			continue
		}
		var values []string
		switch f.(type) {
		case *ucli.StringFlag, *altsrc.StringFlag:
			values = []string{c.String(name)}
		case *ucli.StringSliceFlag, *altsrc.StringSliceFlag:
			values = c.StringSlice(name)
		}
		for _, v := range values {
			word, _, _ := strings.Cut(v, "=")
			if other := strings.TrimLeft(word, "-"); strings.HasPrefix(v, "-") && slices.Contains(names, other) {
				return usageErrorf("%s: %s got %s as its value, which is a flag: give %s a value first (%s VALUE %s ...)",
					c.Command.Name, dashOf(name), word, dashOf(name), dashOf(name), word)
			}
		}
	}
	return nil
}

// dashOf is a flag's name as a user types it: -p, --target.
func dashOf(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// peerFlags are gosmee client flags (gosmee/flags.go, read at its
// current source) that users type on forward out of habit, with the
// hookline flag that does the same (after a |, how it differs).
var peerFlags = map[string]string{
	"saveDir":                   "save",
	"ignore-event":              "ignore",
	"insecure-skip-tls-verify":  "insecure",
	"insecure-tls":              "insecure",
	"output":                    "json",
	"exec-on-events":            "events|which filters deliveries, plugins included",
	"exec-env-vars":             "plugin-env",
	"target-connection-timeout": "timeout",
	"target-retries":            "retries",
	"nocolor":                   "no-color",
	"health-port":               "health|an address such as 127.0.0.1:PORT",
	"resume-state-file":         "state-file",
	"new-url":                   "new",
}

// invalidValue matches the flag package's error for a value that does not
// parse.
var invalidValue = regexp.MustCompile(`^invalid value ("(?:[^"\\]|\\.)*") for flag -+([^:]+): (.*)$`)

// commandUsageError turns what the flag parser said about cmd's arguments
// into one line naming the flag as a user types it, with a suggestion.
func commandUsageError(cmd *ucli.Command, err error) error {
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		var names []string
		for _, f := range cmd.Flags {
			names = append(names, f.Names()...)
		}
		hint := ""
		if peer, note, _ := strings.Cut(peerFlags[name], "|"); peer != "" && slices.Contains(names, peer) {
			if note != "" {
				note = ", " + note
			}
			hint = " (gosmee's flag; hookline's is " + dashOf(peer) + note + ")"
		} else if best := closest(name, names); best != "" {
			hint = " (did you mean " + dashOf(best) + "?)"
		}
		return usageErrorf("%s: unknown flag %s%s", cmd.Name, dashOf(name), hint)
	}
	if name, ok := strings.CutPrefix(err.Error(), "flag needs an argument: "); ok {
		name = strings.TrimLeft(name, "-")
		return usageErrorf("%s: %s needs a value; run 'hookline %s --help' for its flags", cmd.Name, dashOf(name), cmd.Name)
	}
	if m := invalidValue.FindStringSubmatch(err.Error()); m != nil {
		what := m[3]
		for _, f := range cmd.Flags {
			_, plain := f.(*ucli.DurationFlag)
			_, configurable := f.(*altsrc.DurationFlag) // see withConfigSource
			if (plain || configurable) && slices.Contains(f.Names(), m[2]) {
				what = "want a duration such as 5s, 30s or 2m"
			}
		}
		return usageErrorf("%s: %s %s: %s", cmd.Name, dashOf(m[2]), m[1], what)
	}
	return usageErrorf("%s: %v; run 'hookline %s --help' for its flags", cmd.Name, err, cmd.Name)
}
