package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/internal/examples"
	"github.com/hookline/hookline/webhooks"
)

// eventsOptions are the parsed flags of `hookline events`.
type eventsOptions struct {
	jsonOut  bool
	examples bool // --examples: the names send has an example of
}

func eventsCommand(s *streams) *ucli.Command {
	var o eventsOptions
	return &ucli.Command{
		Name:  "events",
		Usage: "list the event and event.action names hookline knows",
		Description: `Prints every GitHub webhook event name and event.action combination
that --events, --ignore and send --event accept without a warning, sorted,
one per line (or a JSON array with --json). With --examples, the names
send --event has a built-in example of instead, each with where it comes
from (hookline's own, or @octokit/webhooks-examples).

   hookline events | grep ^pull_request
   hookline events --examples | grep ^issues`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print a JSON array", Destination: &o.jsonOut},
			&ucli.BoolFlag{Name: "examples", Usage: "list the events and actions send has a built-in example of, with where each comes from", Destination: &o.examples},
		},
		Action: func(c *ucli.Context) error {
			opts, err := parseEvents(c, o)
			if err != nil {
				return err
			}
			return runEvents(c.Context, opts, s)
		},
	}
}

func parseEvents(c *ucli.Context, o eventsOptions) (eventsOptions, error) {
	if c.NArg() > 0 {
		return eventsOptions{}, usageErrorf("events takes no arguments (got %q); filter with: hookline events | grep %s", c.Args().First(), c.Args().First())
	}
	return o, nil
}

func runEvents(_ context.Context, o eventsOptions, s *streams) error {
	names := webhooks.EmitterEventNames()
	if o.examples {
		names = examples.Names()
		if !o.jsonOut {
			for _, n := range names {
				if _, err := fmt.Fprintf(s.out, "%-44s %s\n", n, examples.Source(n)); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if o.jsonOut {
		data, err := json.MarshalIndent(names, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(s.out, "%s\n", data)
		return err
	}
	_, err := fmt.Fprintln(s.out, strings.Join(names, "\n"))
	return err
}
