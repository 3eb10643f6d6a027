package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestLock: a second lock on the same file fails at once with ErrLocked
// naming the holder's pid, for the OS filesystem (flock: a second open
// file description conflicts, as a second process would) and MemFS; after
// Unlock (idempotent) it can be taken again.
func TestLock(t *testing.T) {
	for name, fs := range map[string]FS{"os": OS(), "mem": NewMem()} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := fs.MkdirAll(dir); err != nil {
				t.Fatal(err)
			}
			lk := fs.(Locker)
			p := filepath.Join(dir, "LOCK")
			u, err := lk.Lock(p)
			if err != nil {
				t.Fatal(err)
			}
			_, err = lk.Lock(p)
			var le *LockedError
			if !errors.Is(err, ErrLocked) || !errors.As(err, &le) || le.PID != os.Getpid() || le.Name != p {
				t.Fatalf("second Lock: %v, want a LockedError naming %s and pid %d", err, p, os.Getpid())
			}
			if err := u.Unlock(); err != nil {
				t.Fatal(err)
			}
			if err := u.Unlock(); err != nil {
				t.Fatalf("second Unlock: %v", err)
			}
			u2, err := lk.Lock(p)
			if err != nil {
				t.Fatalf("Lock after Unlock: %v", err)
			}
			u2.Unlock()
		})
	}
}

func TestOSUsage(t *testing.T) {
	u, err := OS().(Statter).Usage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if u.Total == 0 || u.Free > u.Total {
		t.Fatalf("Usage = %+v", u)
	}
}

// TestMemCapacity: writes past the capacity fail with ENOSPC and write
// nothing; removing a file frees its space.
func TestMemCapacity(t *testing.T) {
	m := NewMem()
	m.SetCapacity(10)
	f, _ := m.Create("/a")
	if _, err := f.Write(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 3)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past capacity: %v, want ENOSPC", err)
	}
	if sz, _ := f.Size(); sz != 8 {
		t.Fatalf("size %d after a refused write, want 8", sz)
	}
	if u, _ := m.Usage("/"); u.Free != 2 || u.Total != 10 {
		t.Fatalf("Usage = %+v, want 2 free of 10", u)
	}
	// WriteAt over existing bytes takes no space; past the end it takes
	// what the file grows by.
	if _, err := f.WriteAt(make([]byte, 8), 0); err != nil {
		t.Fatalf("WriteAt over existing bytes on a nearly full FS: %v", err)
	}
	if _, err := f.WriteAt(make([]byte, 4), 7); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteAt growing the file past capacity: %v, want ENOSPC", err)
	}
	if _, err := f.WriteAt(make([]byte, 3), 7); err != nil {
		t.Fatalf("WriteAt growing the file to capacity: %v", err)
	}
	if err := f.Truncate(8); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m.Remove("/a")
	if u, _ := m.Usage("/"); u.Free != 10 {
		t.Fatalf("Usage after remove = %+v", u)
	}
}

// TestMemRenameDir: a directory rename moves its files, their durable
// state included.
func TestMemRenameDir(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d/sub")
	f, _ := m.Create("/d/sub/x")
	f.Write([]byte("hi"))
	f.Sync()
	f.Close()
	m.SyncDir("/d/sub")
	m.MkdirAll("/e")
	if err := m.Rename("/d", "/e/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stat("/d/sub/x"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old path: %v", err)
	}
	c := m.CrashClone(CrashOptions{})
	if fi, err := c.Stat("/e/d/sub/x"); err != nil || fi.Size() != 2 {
		t.Fatalf("moved file after a crash: %v %v", fi, err)
	}
}
