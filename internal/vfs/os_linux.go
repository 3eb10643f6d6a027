package vfs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data and the metadata needed to read it back
// (fdatasync), retrying on EINTR.
func datasync(f *os.File) error { return fdatasync(f, false) }

// datasyncHeld is datasync made as a raw system call: the calling
// goroutine keeps its processor (P) while the disk syncs, so the
// runtime neither hands that P to another thread nor keeps its monitor
// thread polling every 20 µs until the call returns.
func datasyncHeld(f *os.File) error { return fdatasync(f, true) }

// fdatasync runs fdatasync on f, as a raw system call when held,
// retrying on EINTR.
func fdatasync(f *os.File, held bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if held {
				if _, _, e := unix.RawSyscall(unix.SYS_FDATASYNC, fd, 0, 0); e != 0 {
					serr = e
				} else {
					serr = nil
				}
			} else {
				serr = unix.Fdatasync(int(fd))
			}
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

// syncDirs makes the entries of dirs, all on one filesystem, durable
// with one syncfs(2) of that filesystem.
func syncDirs(dirs []string) error {
	d, err := os.Open(dirs[0])
	if err != nil {
		return err
	}
	defer d.Close()
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = unix.Syncfs(int(fd)); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("vfs: syncfs %s: %w", dirs[0], serr)
	}
	return nil
}
