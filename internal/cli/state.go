package cli

import (
	"crypto/sha256"
	"encoding/hex"
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

// stateFileName returns the name of the default state file for a channel
// URL: "<first 16 hex digits of the SHA-256 of its stream URL>.json", so one
// directory can hold the state of many channels and no URL shows in a file
// name.
func stateFileName(streamURL string) string {
	sum := sha256.Sum256([]byte(streamURL))
	return hex.EncodeToString(sum[:8]) + ".json"
}
