//go:build !unix

package proxy

import "os/exec"

// ownGroup leaves cmd as exec.CommandContext made it: on Windows a timeout
// kills the plugin's own process (cmd /C for --exec), not the processes it
// started; a plugin that starts others must stop them itself (or run them
// with `start /wait`), until hookline puts plugins in a job object.
func ownGroup(*exec.Cmd) {}
