package storage

import (
	"errors"
	"fmt"

	"github.com/sluicedb/sluice/internal/vfs"
)

// LockDir takes the exclusive lock of the data directory dir through its
// lock file name (meta.Layout.Lock), creating dir if needed. Whoever
// holds the lock (a broker, or `sluice repair`) owns the directory. A directory held by another owner gives an error
// matching vfs.ErrLocked that names the directory and, where known, the
// holder's process id. The lock lasts until Unlock or the process's exit.
// On a filesystem without locks (vfs.Locker) it returns a no-op.
func LockDir(fs vfs.FS, dir, name string) (vfs.Unlocker, error) {
	lk, ok := fs.(vfs.Locker)
	if !ok {
		return noLock{}, nil
	}
	if err := vfs.MkdirAllDurable(fs, dir); err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	u, err := lk.Lock(name)
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("data directory %s is in use by another Sluice process (%w); stop it first or use another data directory", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: lock data directory %s: %w", dir, err)
	}
	// The lock file's entry is synced too, so that the directory a
	// crash leaves holds the same names as the one the owner saw.
	if err := vfs.SyncParent(fs, name); err != nil {
		u.Unlock()
		return nil, fmt.Errorf("storage: lock data directory %s: %w", dir, err)
	}
	return u, nil
}

type noLock struct{}

func (noLock) Unlock() error { return nil }
