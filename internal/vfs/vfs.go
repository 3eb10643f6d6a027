// Package vfs is the filesystem seam of Sluice's storage. Every file the
// storage layer touches goes through an FS, so that tests can swap the
// operating system's filesystem for an in-memory one that simulates
// crashes (unsynced bytes vanish, the last write tears) and injects
// errors (ENOSPC, EIO) on chosen operations.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// File is an open file. Write appends at the end of the file (files are
// logs); WriteAt writes at a position, so that a log can write over
// space it allocated ahead (pre-zeroed); reads are positional so that
// many readers can share one File.
type File interface {
	io.ReaderAt
	// Write appends p to the end of the file.
	Write(p []byte) (int, error)
	// WriteAt writes p at off, over existing bytes or past the end (a
	// gap reads as zeros). Like Write, it is durable only after Sync.
	WriteAt(p []byte, off int64) (int, error)
	// Sync makes every byte written so far durable (fdatasync).
	Sync() error
	// Truncate cuts the file to size bytes. Later writes append there.
	Truncate(size int64) error
	// Size is the file's current length, synced or not.
	Size() (int64, error)
	Close() error
}

// FS is the set of filesystem operations storage needs. Names are
// slash-separated paths as the os package takes them.
type FS interface {
	// Create makes a new empty file for writing; it fails if name exists.
	Create(name string) (File, error)
	// OpenRW opens an existing file for reading and appending.
	OpenRW(name string) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	// Remove deletes a file.
	Remove(name string) error
	// Rename replaces newname with oldname atomically.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string) error
	// ReadDir lists the names (not paths) of a directory's entries, sorted.
	ReadDir(dir string) ([]string, error)
	// SyncDir makes the directory's entries (creates, renames, removes)
	// durable.
	SyncDir(dir string) error
	// RemoveAll deletes a directory tree.
	RemoveAll(dir string) error
	// Stat reports a file's size; os.ErrNotExist when it is absent.
	Stat(name string) (os.FileInfo, error)
}

// OSFile is implemented by Files backed by an operating-system file, so
// that readers can hand regions of it to sendfile.
type OSFile interface {
	OS() *os.File
}

// Usage is a filesystem's space, as statfs reports it to an unprivileged
// process.
type Usage struct {
	Free  uint64 // bytes available to this process
	Total uint64 // size of the filesystem in bytes
}

// Statter is implemented by filesystems that can report their free space.
type Statter interface {
	// Usage reports the space of the filesystem holding dir.
	Usage(dir string) (Usage, error)
}

// Locker is implemented by filesystems that can lock a directory for one
// owner.
type Locker interface {
	// Lock takes an exclusive lock on the file name (created if absent)
	// and returns what releases it. The lock is released when the
	// process exits, however it exits. If another owner holds it, Lock
	// fails at once with an error matching ErrLocked that names the
	// holder's process id where it is known.
	Lock(name string) (Unlocker, error)
}

// Unlocker releases a lock taken by Locker.Lock. Unlock is idempotent.
type Unlocker interface {
	Unlock() error
}

// ErrLocked: a Locker.Lock found the lock held by another owner. The
// error returned is a *LockedError.
var ErrLocked = errors.New("vfs: locked by another owner")

// LockedError names a held lock and its holder.
type LockedError struct {
	Name string // the lock file
	PID  int    // the holder's process id; 0 when unknown
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%s is held by process %d", e.Name, e.PID)
	}
	return e.Name + " is held by another owner"
}

func (e *LockedError) Is(target error) bool { return target == ErrLocked }
