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
	"strings"

	"github.com/fatih/color"
	ucli "github.com/urfave/cli/v2"
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

func newApp(s *streams) *ucli.App {
	app := &ucli.App{
		Name:    "hookline",
		Usage:   "get real webhook deliveries onto your machine, verify them, see them, replay them",
		Version: buildVersion().Version,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{
				Name:    "no-color",
				Usage:   "never colour output (colour is also off when NO_COLOR is set or the stream is not a terminal)",
				EnvVars: []string{"HOOKLINE_NO_COLOR"},
			},
		},
		Commands: []*ucli.Command{
			versionCommand(s),
			serveCommand(s),
			forwardCommand(s),
			replayCommand(s),
			sendCommand(s),
			signCommand(s),
			verifyCommand(s),
			eventsCommand(s),
			completionCommand(s),
		},
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
				return usageErrorf("unknown command %q; run 'hookline --help' for the list of commands", c.Args().First())
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
	for _, cmd := range app.Commands {
		cmd.Flags = append(cmd.Flags, &ucli.BoolFlag{Name: "no-color", Usage: "never colour output"})
		cmd.HideHelpCommand = true // no "help" subcommand: commands are leaves (and completion works)
		cmd.Before = func(c *ucli.Context) error {
			s.decideColor(noColorSet(c))
			return nil
		}
	}
	return app
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
