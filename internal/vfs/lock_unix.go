//go:build unix

package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Lock takes flock(LOCK_EX|LOCK_NB) on name and writes this process's id
// into it, so that a second process can name the holder. The kernel
// releases the lock when the process exits, even by SIGKILL.
func (osFS) Lock(name string) (Unlocker, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("vfs: open lock file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			le := &LockedError{Name: name}
			b := make([]byte, 32)
			if n, _ := f.ReadAt(b, 0); n > 0 {
				if pid, perr := strconv.Atoi(string(bytes.TrimSpace(b[:n]))); perr == nil {
					le.PID = pid
				}
			}
			return nil, le
		}
		return nil, fmt.Errorf("vfs: lock %s: %w", name, err)
	}
	// The pid is informational: write it, but a failure (a full disk)
	// does not stop the owner from holding the lock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &osLock{f: f}, nil
}

// osLock is a held flock; closing the file releases it.
type osLock struct {
	once sync.Once
	f    *os.File
	err  error
}

func (l *osLock) Unlock() error {
	l.once.Do(func() { l.err = l.f.Close() })
	return l.err
}
