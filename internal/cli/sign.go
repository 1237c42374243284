package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"

	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/webhooks/provider"
)

// signOptions are the parsed flags of `hookline sign`.
type signOptions struct {
	secret string
	input  string          // a file, or "-" for stdin
	scheme provider.Scheme // --provider
}

func signCommand(s *streams) *ucli.Command {
	var sv secretFlagValues
	var pv providerFlagValues
	return &ucli.Command{
		Name:      "sign",
		Usage:     "print the X-Hub-Signature-256 of a payload",
		ArgsUsage: "[FILE|-]",
		Description: `Prints sha256=<hex>, the HMAC-SHA256 of the exact bytes of FILE (or of
stdin when FILE is - or absent) under the webhook secret: the value GitHub
sends in X-Hub-Signature-256.

Every byte counts, a trailing newline included: hookline never trims the
input. "echo '{}' | hookline sign" signs "{}\n"; use printf '%s' '{}'.

   hookline sign --secret-file .secret payload.json`,
		Flags: append(secretFlags("the webhook `SECRET` to sign with", &sv), providerFlags(&pv, "github", false)...),
		Action: func(c *ucli.Context) error {
			opts, err := parseSign(c, &sv)
			if err == nil {
				opts.scheme, err = pv.scheme()
			}
			if err == nil && opts.scheme == "" {
				err = usageErrorf("--provider auto: sign signs for one sender; name it")
			}
			if err != nil {
				return err
			}
			return errRedacted(runSign(c.Context, opts, s), opts.secret)
		},
	}
}

func parseSign(c *ucli.Context, sv *secretFlagValues) (signOptions, error) {
	secret, err := readSecret(c, sv)
	if err != nil {
		return signOptions{}, err
	}
	if secret == "" {
		return signOptions{}, usageErrorf("sign needs the webhook secret: give --secret, --secret-file or set %s", secretEnv)
	}
	input, err := inputArg(c)
	return signOptions{secret: secret, input: input}, err
}

// inputArg returns the one optional FILE|- argument, "-" when absent.
func inputArg(c *ucli.Context) (string, error) {
	switch c.NArg() {
	case 0:
		return "-", nil
	case 1:
		if c.Args().First() == "" {
			return "", usageErrorf("the FILE argument is empty; give a file, or - for stdin")
		}
		return c.Args().First(), nil
	}
	return "", usageErrorf("%s takes one FILE (or - for stdin), got %d arguments", c.Command.Name, c.NArg())
}

func runSign(_ context.Context, o signOptions, s *streams) error {
	payload, err := readInput(o.input, s)
	if err != nil {
		return err
	}
	h, err := provider.Sign(o.scheme, o.secret, payload, provider.Signing{})
	if err != nil {
		return usageErrorf("%v", err)
	}
	if o.scheme == provider.GitHub {
		// The value alone, as it always was: X-Hub-Signature-256's.
		if _, err := fmt.Fprintln(s.out, h.Get(o.scheme.Header())); err != nil {
			return err
		}
	} else {
		// Every header to set, one "Name: value" line each.
		for _, k := range slices.Sorted(maps.Keys(h)) {
			if _, err := fmt.Fprintf(s.out, "%s: %s\n", k, h.Get(k)); err != nil {
				return err
			}
		}
	}
	if bytes.HasSuffix(payload, []byte("\n")) {
		fmt.Fprintf(s.err, "note: %s ends with a newline, which is signed too; GitHub signs the body exactly as sent\n", inputName(o.input))
	}
	return nil
}

// inputName names an input in messages.
func inputName(input string) string {
	if input == "-" {
		return "stdin"
	}
	return input
}

// readInput reads the exact bytes of a file, or of stdin for "-". A file
// that cannot be read is a usage error (exit code 2), so that exit code 1
// keeps its one meaning for verify.
func readInput(input string, s *streams) ([]byte, error) {
	var (
		data []byte
		err  error
	)
	if input == "-" {
		if f, ok := s.in.(*os.File); ok && isTerminal(f) {
			fmt.Fprintln(s.err, "reading the payload from stdin (end it with Ctrl-D)…")
		}
		data, err = io.ReadAll(s.in)
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
	} else {
		data, err = os.ReadFile(input)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, usageErrorf("%s: no such file", input)
		}
		if err != nil {
			return nil, usageErrorf("%v", err)
		}
	}
	if data == nil {
		data = []byte{} // an empty payload has a signature too
	}
	return data, nil
}
