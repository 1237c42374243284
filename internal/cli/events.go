package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/webhooks"
)

// eventsOptions are the parsed flags of `hookline events`.
type eventsOptions struct {
	jsonOut bool
}

func eventsCommand(s *streams) *ucli.Command {
	var o eventsOptions
	return &ucli.Command{
		Name:  "events",
		Usage: "list the event and event.action names hookline knows",
		Description: `Prints every GitHub webhook event name and event.action combination
that --events, --ignore and send --event accept without a warning, sorted,
one per line (or a JSON array with --json).

   hookline events | grep ^pull_request`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print a JSON array", Destination: &o.jsonOut},
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
