//go:build unix

package testenv

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockDir holds an exclusive lock on dir until unlock is called: test
// binaries of several packages, running at once, build the shared binary
// once between them. The kernel drops the lock of a process that dies.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
