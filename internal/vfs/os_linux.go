package vfs

import (
	"fmt"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data and the metadata needed to read it back
// (fdatasync), retrying on EINTR.
func datasync(f *os.File) error { return fdatasync(f, false) }

// canHold: held calls are raw system calls here (see held.go).
const canHold = true

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

// writeAtHeld is f.WriteAt made as raw system calls (pwrite64),
// retrying on EINTR and after short writes: the calling goroutine keeps
// its processor for as long as the write blocks, as datasyncHeld does
// for the fdatasync. Only worth it for a write that waits for the
// device (O_DIRECT).
func writeAtHeld(f *os.File, p []byte, off int64) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for n < len(p) {
			w, _, e := unix.RawSyscall6(unix.SYS_PWRITE64, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n), uintptr(off+int64(n)), 0, 0)
			switch {
			case e == unix.EINTR:
				continue
			case e != 0:
				serr = e
				return
			case w == 0:
				serr = io.ErrShortWrite
				return
			}
			n += int(w)
		}
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: serr}
	}
	return n, nil
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

func syncBaseline(dir string) (io.Closer, error) { return os.Open(dir) }

// syncSince makes every write to the filesystem holding via durable
// with one syncfs(2) through via: it writes back every dirty page and
// inode of the filesystem and flushes the device once, and reports a
// writeback error met since via was opened. A file written before via
// was opened is checked on its own descriptor with sync_file_range(2)
// waiting on its pages: it writes nothing more (syncfs did) and returns,
// as fsync would, an error that an earlier writeback of the file met and
// no sync on that descriptor reported yet.
func syncSince(via *os.File, files []*os.File) error {
	if err := onFD(via, func(fd int) error { return unix.Syncfs(fd) }); err != nil {
		return fmt.Errorf("vfs: syncfs %s: %w", via.Name(), err)
	}
	const wait = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	for _, f := range files {
		if err := onFD(f, func(fd int) error { return unix.SyncFileRange(fd, 0, 0, wait) }); err != nil {
			return &os.PathError{Op: "sync_file_range", Path: f.Name(), Err: err}
		}
	}
	return nil
}

// onFD runs call on f's descriptor, retrying on EINTR.
func onFD(f *os.File, call func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = call(int(fd)); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}
