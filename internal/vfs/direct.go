package vfs

import "errors"

// DirectZeroer is implemented by filesystems that can fill a file with
// zeros without going through the page cache (O_DIRECT on Linux): the
// device reads the zeros from one aligned buffer, so the process spends
// no CPU copying them into cached pages and the next Sync has no dirty
// pages to write back.
type DirectZeroer interface {
	// ZeroDirect writes size zero bytes from the start of the existing
	// file name. Like WriteAt, the zeros (and the file's new length)
	// are durable only after a Sync of the file. It fails with an error
	// matching ErrNoDirect, having written nothing the caller relies on,
	// when the filesystem refuses direct writes (tmpfs before Linux 6.6) or size is not
	// a multiple of DirectAlign: the caller then writes the zeros
	// through the page cache.
	ZeroDirect(name string, size int64) error
}

// DirectAlign is the alignment ZeroDirect needs of a file's size: the
// logical block size of common disks and the page size.
const DirectAlign = 4096

// ErrNoDirect: the filesystem refused a direct write; write through the
// page cache instead.
var ErrNoDirect = errors.New("vfs: direct writes not supported here")
