package cli

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// asHooklineEnv makes the test binary run as the hookline command.
const asHooklineEnv = "HOOKLINE_CLI_TEST_AS_HOOKLINE"

// TestMain points hookline's state directory (default state files, the
// default failed folder) and its config directory at a temporary
// directory: no test writes to the user's own or reads the user's config.
//
// With asHooklineEnv set, the test binary is hookline itself (the
// completion scripts' tests call it by that name).
func TestMain(m *testing.M) {
	if os.Getenv(asHooklineEnv) != "" {
		os.Exit(Run(context.Background(), append([]string{"hookline"}, os.Args[1:]...), os.Stdin, os.Stdout, os.Stderr))
	}
	dir, err := os.MkdirTemp("", "hookline-cli-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	os.Setenv("XDG_CONFIG_HOME", dir)
	os.Unsetenv(configEnv)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
