package cli

import (
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/webhooks/provider"
)

// providerFlagValues are what --provider and --tolerance hold.
type providerFlagValues struct {
	name      string
	tolerance time.Duration
}

// providerFlags returns --provider (the default names it: "auto" detects
// the sender from the headers, "github" signs as GitHub) and, with
// timestamps, --tolerance.
func providerFlags(v *providerFlagValues, def string, timestamps bool) []ucli.Flag {
	flags := []ucli.Flag{&ucli.StringFlag{Name: "provider", Value: def, Destination: &v.name,
		Usage: "the sender's signature scheme `NAME`: github, gitea, forgejo, bitbucket, gitlab, standard (Standard Webhooks), stripe, shopify or slack" +
			map[bool]string{true: "; auto detects it from each delivery's headers", false: ""}[def == "auto"]}}
	if timestamps {
		flags = append(flags, &ucli.DurationFlag{Name: "tolerance", Value: provider.DefaultTolerance, Destination: &v.tolerance,
			Usage: "how far a signed timestamp (standard, stripe, slack) may be from now (`DURATION`; 0 does not check)"})
	}
	return flags
}

// scheme returns the scheme named ("" for auto).
func (v *providerFlagValues) scheme() (provider.Scheme, error) {
	if v.name == "" || v.name == "auto" {
		return "", nil
	}
	s, err := provider.Parse(v.name)
	if err != nil {
		return "", usageErrorf("--provider: %v (or auto)", err)
	}
	return s, nil
}

// check returns the provider.Check tolerance of --tolerance (0: none).
func (v *providerFlagValues) checkTolerance() time.Duration {
	if v.tolerance == 0 {
		return -1
	}
	return v.tolerance
}
