package cli

import (
	"fmt"
	"os"
	"testing"
)

// TestMain points hookline's state directory (default state files, the
// default failed folder) at a temporary directory: no test writes to the
// user's own.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hookline-cli-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
