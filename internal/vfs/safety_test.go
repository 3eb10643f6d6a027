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
// state included, once both parents are synced.
func TestMemRenameDir(t *testing.T) {
	m := NewMem()
	MkdirAllDurable(m, "/d/sub")
	f, _ := m.Create("/d/sub/x")
	f.Write([]byte("hi"))
	f.Sync()
	f.Close()
	m.SyncDir("/d/sub")
	MkdirAllDurable(m, "/e")
	if err := m.Rename("/d", "/e/d"); err != nil {
		t.Fatal(err)
	}
	m.SyncDir("/e")
	m.SyncDir("/")
	if _, err := m.Stat("/d/sub/x"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old path: %v", err)
	}
	c := m.CrashClone(CrashOptions{})
	if fi, err := c.Stat("/e/d/sub/x"); err != nil || fi.Size() != 2 {
		t.Fatalf("moved file after a crash: %v %v", fi, err)
	}
}

// TestMemCrashDirectories: a directory change survives a crash only once
// its parent is synced; a directory that did not survive takes its
// files, synced ones included, with it.
func TestMemCrashDirectories(t *testing.T) {
	file := func(t *testing.T, m *MemFS, name, data string) {
		t.Helper()
		f, err := m.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(data))
		f.Sync()
		f.Close()
	}
	cases := []struct {
		name     string
		run      func(t *testing.T, m *MemFS)
		want     []string // paths that must survive
		wantGone []string
	}{
		{
			name: "mkdir without parent sync vanishes with its synced file",
			run: func(t *testing.T, m *MemFS) {
				m.MkdirAll("/p/d")
				file(t, m, "/p/d/f", "x")
				m.SyncDir("/p/d")
			},
			wantGone: []string{"/p", "/p/d", "/p/d/f"},
		},
		{
			name: "MkdirAllDurable keeps the tree",
			run: func(t *testing.T, m *MemFS) {
				MkdirAllDurable(m, "/p/d")
				file(t, m, "/p/d/f", "x")
				m.SyncDir("/p/d")
			},
			want: []string{"/p", "/p/d", "/p/d/f"},
		},
		{
			name: "a sync of the directory alone is not enough",
			run: func(t *testing.T, m *MemFS) {
				MkdirAllDurable(m, "/p")
				m.MkdirAll("/p/d")
				file(t, m, "/p/d/f", "x")
				m.SyncDir("/p/d")
			},
			want:     []string{"/p"},
			wantGone: []string{"/p/d", "/p/d/f"},
		},
		{
			name: "unsynced RemoveAll undone",
			run: func(t *testing.T, m *MemFS) {
				MkdirAllDurable(m, "/p/d")
				file(t, m, "/p/d/f", "x")
				m.SyncDir("/p/d")
				m.RemoveAll("/p/d")
			},
			want: []string{"/p/d", "/p/d/f"},
		},
		{
			name: "synced RemoveAll kept",
			run: func(t *testing.T, m *MemFS) {
				MkdirAllDurable(m, "/p/d")
				file(t, m, "/p/d/f", "x")
				m.SyncDir("/p/d")
				RemoveAllDurable(m, "/p/d")
			},
			want:     []string{"/p"},
			wantGone: []string{"/p/d", "/p/d/f"},
		},
		{
			name: "a directory re-created is a new, empty one",
			run: func(t *testing.T, m *MemFS) {
				MkdirAllDurable(m, "/p/d")
				file(t, m, "/p/d/f", "x")
				m.SyncDir("/p/d")
				m.RemoveAll("/p/d")
				m.MkdirAll("/p/d")
				m.SyncDir("/p")
			},
			want:     []string{"/p/d"},
			wantGone: []string{"/p/d/f"},
		},
		{
			name: "unsynced directory rename undone",
			run: func(t *testing.T, m *MemFS) {
				MkdirAllDurable(m, "/p/d")
				file(t, m, "/p/d/f", "x")
				m.SyncDir("/p/d")
				m.Rename("/p/d", "/p/e")
			},
			want:     []string{"/p/d/f"},
			wantGone: []string{"/p/e"},
		},
		{
			name: "RenameDurable across directories kept",
			run: func(t *testing.T, m *MemFS) {
				MkdirAllDurable(m, "/p/d")
				MkdirAllDurable(m, "/q")
				file(t, m, "/p/d/f", "x")
				m.SyncDir("/p/d")
				RenameDurable(m, "/p/d", "/q/d")
			},
			want:     []string{"/q/d/f"},
			wantGone: []string{"/p/d"},
		},
		{
			name: "RemoveDurable kept",
			run: func(t *testing.T, m *MemFS) {
				MkdirAllDurable(m, "/p")
				file(t, m, "/p/f", "x")
				SyncParent(m, "/p/f")
				RemoveDurable(m, "/p/f")
			},
			want:     []string{"/p"},
			wantGone: []string{"/p/f"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewMem()
			c.run(t, m)
			after := m.CrashClone(CrashOptions{})
			for _, p := range c.want {
				if _, err := after.Stat(p); err != nil {
					t.Errorf("%s lost in the crash: %v", p, err)
				}
			}
			for _, p := range c.wantGone {
				if _, err := after.Stat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s survived the crash: %v", p, err)
				}
			}
			// A second crash of the clone keeps everything it holds.
			again := after.CrashClone(CrashOptions{})
			for _, p := range c.want {
				if _, err := again.Stat(p); err != nil {
					t.Errorf("%s lost in a second crash: %v", p, err)
				}
			}
		})
	}
}

// TestMemCrashBefore: CrashBefore takes the clone just before the chosen
// mutating operation runs, and the filesystem works on unchanged.
func TestMemCrashBefore(t *testing.T) {
	m := NewMem()
	MkdirAllDurable(m, "/d")
	f, _ := m.Create("/d/a")
	m.SyncDir("/d")
	cut := m.CrashBefore(m.Seq()+2, CrashOptions{}) // before the Sync below
	f.Write([]byte("lost"))
	if cut() != nil {
		t.Fatal("clone taken before its operation")
	}
	f.Sync()
	c := cut()
	if c == nil {
		t.Fatal("no clone after the operation ran")
	}
	if fi, err := c.Stat("/d/a"); err != nil || fi.Size() != 0 {
		t.Fatalf("the clone holds %v %v, want the empty file synced before", fi, err)
	}
	if fi, _ := m.Stat("/d/a"); fi.Size() != 4 {
		t.Fatalf("the filesystem itself changed: size %d", fi.Size())
	}
}
