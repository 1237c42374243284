package proxy_test

import "syscall"

// mountTinyTmpfs mounts a 64 KiB tmpfs on dir (root only).
func mountTinyTmpfs(dir string) error {
	return syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k")
}

func unmount(dir string) { syscall.Unmount(dir, 0) }
