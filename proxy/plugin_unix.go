//go:build unix

package proxy

import (
	"os/exec"
	"syscall"
)

// ownGroup runs cmd in a process group of its own and makes cancellation
// (the plugin timeout, shutdown) kill the whole group: a plugin script's
// children and an --exec command's pipeline die with it, instead of
// outliving it under PID 1.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
