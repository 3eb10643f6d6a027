//go:build !linux

package vfs

import (
	"errors"
	"io"
	"os"
)

// datasync flushes f with fsync where fdatasync is not available.
func datasync(f *os.File) error { return f.Sync() }

// canHold: no call holds its processor here (see held.go).
const canHold = false

// datasyncHeld is datasync.
func datasyncHeld(f *os.File) error { return datasync(f) }

// writeAtHeld is f.WriteAt.
func writeAtHeld(f *os.File, p []byte, off int64) (int, error) { return f.WriteAt(p, off) }

// syncDirs syncs each of dirs.
func syncDirs(dirs []string) error {
	for _, d := range dirs {
		if err := (osFS{}).SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// syncBaseline fails: without syncfs a SyncSet syncs its entries one
// by one.
func syncBaseline(string) (io.Closer, error) { return nil, errors.ErrUnsupported }

// syncSince is never called (syncBaseline fails).
func syncSince(*os.File, []*os.File) error { return errors.ErrUnsupported }
