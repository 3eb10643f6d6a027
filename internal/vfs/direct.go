package vfs

import (
	"errors"
	"unsafe"
)

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

// DirectOpener is implemented by filesystems that can open a file for
// writes that bypass the page cache (O_DIRECT on Linux).
type DirectOpener interface {
	// OpenDirect opens the existing file name for direct writes only.
	// Every WriteAt on it must have a buffer (AlignedBuffer), a
	// length and an offset aligned to DirectAlign; a write returns once
	// the device has the bytes, which are durable after a Sync (of this
	// file or of another descriptor of it). It fails with an error
	// matching ErrNoDirect when the filesystem refuses direct writes.
	OpenDirect(name string) (File, error)
}

// AlignedBuffer returns a buffer of n bytes (rounded up to DirectAlign)
// whose first byte is aligned to DirectAlign, for direct writes.
func AlignedBuffer(n int) []byte {
	n = (n + DirectAlign - 1) &^ (DirectAlign - 1)
	b := make([]byte, n+DirectAlign)
	skip := (DirectAlign - int(uintptr(unsafe.Pointer(&b[0]))%DirectAlign)) % DirectAlign
	return b[skip : skip+n : skip+n]
}
