// Command hookline tunnels webhook deliveries from a relay channel to a local
// server, verifies their signatures, and saves and replays them.
//
// main only wires the process to the CLI: all logic lives in internal/cli.
package main

import (
	"os"

	"github.com/hookline/hookline/internal/cli"
)

func main() { os.Exit(cli.Main()) }
