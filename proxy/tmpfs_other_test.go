//go:build !linux

package proxy_test

import "errors"

func mountTinyTmpfs(string) error { return errors.New("tmpfs needs Linux") }

func unmount(string) {}
