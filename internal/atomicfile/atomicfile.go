// Package atomicfile replaces a file's content so that a reader, or the
// next run after a crash, sees the old content or the new, never a mix.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data: a temporary file in the same directory,
// written, synced (fsync) and renamed over path. After the process dies at
// any point (kill -9), path holds the old or the new content, never a mix;
// after a power loss too, since the data is synced before the rename. The
// directory is not synced: a power loss may undo the rename and leave the
// previous content (for proxy's state file, a restart then receives some
// deliveries again, never fewer). Syncing it would cost a second fsync per
// write (about 2 ms each on a cloud disk).
func Write(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
