package cli

import (
	"errors"
	"os"
	"path/filepath"
)

// stateDir returns the directory where hookline keeps what must outlive one
// run (state files, deliveries the target did not take):
// $XDG_STATE_HOME/hookline when XDG_STATE_HOME is set, else
// os.UserConfigDir()/hookline (~/.config/hookline on Linux,
// ~/Library/Application Support/hookline on macOS, %AppData%\hookline on
// Windows). It is not created here.
func stateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		if !filepath.IsAbs(d) {
			return "", errors.New("XDG_STATE_HOME is not an absolute path")
		}
		return filepath.Join(d, "hookline"), nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "hookline"), nil
}
