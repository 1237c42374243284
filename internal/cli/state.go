package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"runtime"
)

// stateDir returns the directory where hookline keeps what must outlive one
// run (state files, deliveries the target did not take, the embedded
// relay's channel), as the XDG base directories say: $XDG_STATE_HOME/hookline
// when XDG_STATE_HOME is set, else ~/.local/state/hookline; on macOS and
// Windows, which have no such convention, os.UserConfigDir()/hookline
// (~/Library/Application Support/hookline, %AppData%\hookline). It is not
// created here.
func stateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		if !filepath.IsAbs(d) {
			return "", errors.New("XDG_STATE_HOME is not an absolute path")
		}
		return filepath.Join(d, "hookline"), nil
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		d, err := os.UserConfigDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(d, "hookline"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "hookline"), nil
}

// stateFileName returns the name of the default state file for a channel
// URL: "<first 16 hex digits of the SHA-256 of its stream URL>.json", so one
// directory can hold the state of many channels and no URL shows in a file
// name.
func stateFileName(streamURL string) string {
	sum := sha256.Sum256([]byte(streamURL))
	return hex.EncodeToString(sum[:8]) + ".json"
}
