package vfs

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// directZeros is an aligned buffer of zeros for ZeroDirect, allocated at
// its first use; read only.
var directZeros = sync.OnceValue(func() []byte {
	const n = 1 << 20
	return AlignedBuffer(n)
})

// OpenDirect opens name with O_DIRECT for writing (see DirectOpener).
func (osFS) OpenDirect(name string) (File, error) {
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return nil, fmt.Errorf("open %s with O_DIRECT: %w (%w)", name, ErrNoDirect, err)
		}
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return osFile{os.NewFile(uintptr(fd), name)}, nil
}

// ZeroDirect writes zeros to name with O_DIRECT (see DirectZeroer).
func (osFS) ZeroDirect(name string, size int64) error {
	if size%DirectAlign != 0 {
		return fmt.Errorf("zero %s: size %d not a multiple of %d: %w", name, size, DirectAlign, ErrNoDirect)
	}
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("open %s with O_DIRECT: %w (%w)", name, ErrNoDirect, err)
		}
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	zeros := directZeros()
	for off := int64(0); off < size; {
		n := min(size-off, int64(len(zeros)))
		w, err := unix.Pwrite(fd, zeros[:n], off)
		switch {
		case err == unix.EINTR:
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP):
			return fmt.Errorf("direct write to %s: %w (%w)", name, ErrNoDirect, err)
		case err != nil:
			return &os.PathError{Op: "pwrite", Path: name, Err: err}
		case w == 0:
			return &os.PathError{Op: "pwrite", Path: name, Err: unix.EIO}
		}
		off += int64(w)
	}
	return nil
}
