//go:build !linux

package vfs

import "os"

// datasync flushes f with fsync where fdatasync is not available.
func datasync(f *os.File) error { return f.Sync() }

// datasyncHeld is datasync.
func datasyncHeld(f *os.File) error { return datasync(f) }
