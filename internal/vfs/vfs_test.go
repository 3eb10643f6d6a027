package vfs

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// exercise runs the same scenario on any FS and checks the results a
// correct FS gives.
func exercise(t *testing.T, fs FS, dir string) {
	t.Helper()
	if err := fs.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "a.log")
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Create(name); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second Create: %v, want ErrExist", err)
	}
	for _, s := range []string{"hello ", "world"} {
		if _, err := f.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if sz, _ := f.Size(); sz != 11 {
		t.Fatalf("size %d, want 11", sz)
	}
	buf := make([]byte, 5)
	if n, err := f.ReadAt(buf, 6); n != 5 || string(buf) != "world" || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt = %d %q %v", n, buf, err)
	}
	if n, err := f.ReadAt(buf, 8); n != 3 || err != io.EOF {
		t.Fatalf("short ReadAt = %d %v, want 3 EOF", n, err)
	}
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 6)
	if _, err := f.ReadAt(got, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if string(got) != "hello!" {
		t.Fatalf("after truncate and write: %q", got)
	}
	// WriteAt writes in place and past the end (the gap reads as zeros);
	// Write still appends at the end afterwards.
	if _, err := f.WriteAt([]byte("J"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("z"), 8); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("?")); err != nil {
		t.Fatal(err)
	}
	got = make([]byte, 10)
	if n, err := f.ReadAt(got, 0); n != 10 || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt after WriteAt = %d %v", n, err)
	}
	if string(got) != "Jello!\x00\x00z?" {
		t.Fatalf("after WriteAt and Write: %q", got)
	}
	if err := f.Truncate(6); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rename(name, filepath.Join(dir, "b.log")); err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	names, err := fs.ReadDir(dir)
	if err != nil || len(names) != 1 || names[0] != "b.log" {
		t.Fatalf("ReadDir = %v %v", names, err)
	}
	if fi, err := fs.Stat(filepath.Join(dir, "b.log")); err != nil || fi.Size() != 6 {
		t.Fatalf("Stat = %v %v", fi, err)
	}
	if _, err := fs.Stat(name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Stat of renamed-away file: %v", err)
	}
	ro, err := fs.Open(filepath.Join(dir, "b.log"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Write([]byte("x")); err == nil {
		t.Fatal("write to a read-only file succeeded")
	}
	ro.Close()
	if err := fs.Remove(filepath.Join(dir, "b.log")); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.OpenRW(filepath.Join(dir, "b.log")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open removed file: %v", err)
	}
}

func TestOSFS(t *testing.T) {
	dir := t.TempDir()
	exercise(t, OS(), filepath.Join(dir, "d"))
	f, err := OS().Create(filepath.Join(dir, "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(OSFile); !ok {
		t.Fatal("OS files do not implement OSFile")
	}
}

func TestMemFS(t *testing.T) { exercise(t, NewMem(), "/data/d") }

func write(t *testing.T, f File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func contents(t *testing.T, fs FS, name string) (string, bool) {
	t.Helper()
	f, err := fs.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sz, _ := f.Size()
	b := make([]byte, sz)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return string(b), true
}

func TestMemCrashDropsUnsynced(t *testing.T) {
	cases := []struct {
		name     string
		run      func(t *testing.T, m *MemFS)
		want     map[string]string // file -> durable contents; absent means gone
		wantGone []string
	}{
		{
			name: "unsynced bytes dropped",
			run: func(t *testing.T, m *MemFS) {
				f, _ := m.Create("/d/a")
				m.SyncDir("/d")
				write(t, f, "synced")
				f.Sync()
				write(t, f, "-lost")
			},
			want: map[string]string{"/d/a": "synced"},
		},
		{
			name: "create without SyncDir vanishes",
			run: func(t *testing.T, m *MemFS) {
				f, _ := m.Create("/d/a")
				write(t, f, "data")
				f.Sync()
			},
			wantGone: []string{"/d/a"},
		},
		{
			name: "unsynced rename undone",
			run: func(t *testing.T, m *MemFS) {
				f, _ := m.Create("/d/a")
				write(t, f, "x")
				f.Sync()
				m.SyncDir("/d")
				m.Rename("/d/a", "/d/b")
			},
			want:     map[string]string{"/d/a": "x"},
			wantGone: []string{"/d/b"},
		},
		{
			name: "synced rename kept",
			run: func(t *testing.T, m *MemFS) {
				f, _ := m.Create("/d/a")
				write(t, f, "x")
				f.Sync()
				m.Rename("/d/a", "/d/b")
				m.SyncDir("/d")
			},
			want:     map[string]string{"/d/b": "x"},
			wantGone: []string{"/d/a"},
		},
		{
			name: "unsynced remove undone",
			run: func(t *testing.T, m *MemFS) {
				f, _ := m.Create("/d/a")
				write(t, f, "keep")
				f.Sync()
				m.SyncDir("/d")
				m.Remove("/d/a")
			},
			want: map[string]string{"/d/a": "keep"},
		},
		{
			name: "unsynced truncate undone",
			run: func(t *testing.T, m *MemFS) {
				f, _ := m.Create("/d/a")
				m.SyncDir("/d")
				write(t, f, "0123456789")
				f.Sync()
				f.Truncate(3)
				write(t, f, "abcdefgh")
			},
			want: map[string]string{"/d/a": "0123456789"},
		},
		{
			name: "synced truncate kept",
			run: func(t *testing.T, m *MemFS) {
				f, _ := m.Create("/d/a")
				m.SyncDir("/d")
				write(t, f, "0123456789")
				f.Sync()
				f.Truncate(3)
				write(t, f, "ab")
				f.Sync()
			},
			want: map[string]string{"/d/a": "012ab"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewMem()
			MkdirAllDurable(m, "/d")
			c.run(t, m)
			after := m.CrashClone(CrashOptions{})
			for name, want := range c.want {
				got, ok := contents(t, after, name)
				if !ok || got != want {
					t.Errorf("%s after crash = %q (exists %v), want %q", name, got, ok, want)
				}
			}
			for _, name := range c.wantGone {
				if _, ok := contents(t, after, name); ok {
					t.Errorf("%s survived the crash", name)
				}
			}
		})
	}
}

func TestMemCrashTearsPrefix(t *testing.T) {
	m := NewMem()
	MkdirAllDurable(m, "/d")
	f, _ := m.Create("/d/a")
	m.SyncDir("/d")
	write(t, f, "durable|")
	f.Sync()
	write(t, f, "torn-write-payload")
	seen := map[int]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		got, _ := contents(t, m.CrashClone(CrashOptions{Tear: true, Rand: rng}), "/d/a")
		if !bytes.HasPrefix([]byte("durable|torn-write-payload"), []byte(got)) || len(got) < len("durable|") {
			t.Fatalf("torn crash left %q", got)
		}
		seen[len(got)] = true
	}
	if len(seen) < 5 {
		t.Fatalf("tear lengths not random: %v", seen)
	}
	// The original keeps working after a clone.
	write(t, f, "+")
	if got, _ := contents(t, m, "/d/a"); got != "durable|torn-write-payload+" {
		t.Fatalf("original changed by CrashClone: %q", got)
	}
}

// TestMemCrashWriteAt: bytes written in place over synced ones (a log
// writing into space it pre-zeroed) are durable only after Sync; a crash
// keeps the old bytes, or with tearing a prefix of the new ones, in
// file order, over them.
func TestMemCrashWriteAt(t *testing.T) {
	m := NewMem()
	MkdirAllDurable(m, "/d")
	f, _ := m.Create("/d/a")
	m.SyncDir("/d")
	zeros := string(make([]byte, 16))
	write(t, f, "head|"+zeros)
	f.Sync()
	if _, err := f.WriteAt([]byte("new-bytes"), 5); err != nil {
		t.Fatal(err)
	}
	if got, _ := contents(t, m.CrashClone(CrashOptions{}), "/d/a"); got != "head|"+zeros {
		t.Fatalf("crash before Sync left %q, want the pre-zeroed file", got)
	}
	after := "head|new-bytes" + zeros[9:]
	seen := map[string]bool{}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		got, _ := contents(t, m.CrashClone(CrashOptions{Tear: true, Rand: rng}), "/d/a")
		k := 0
		for k < len(got) && k < len(after) && got[k] == after[k] {
			k++
		}
		if len(got) != len(after) || got[k:] != ("head|" + zeros)[k:] {
			t.Fatalf("torn crash left %q: not a prefix of the new bytes over the old", got)
		}
		seen[got] = true
	}
	if len(seen) < 4 {
		t.Fatalf("tears not random: %d outcomes", len(seen))
	}
	f.Sync()
	if got, _ := contents(t, m.CrashClone(CrashOptions{Tear: true, Rand: rng}), "/d/a"); got != after {
		t.Fatalf("crash after Sync left %q, want %q", got, after)
	}
}

func TestMemInjection(t *testing.T) {
	cases := []struct {
		name  string
		inj   func(Op) error
		errno syscall.Errno
		fail  OpKind
	}{
		{"second write ENOSPC", FailNth(OpWrite, 2, syscall.ENOSPC, false), syscall.ENOSPC, OpWrite},
		{"first sync EIO", FailNth(OpSync, 1, syscall.EIO, false), syscall.EIO, OpSync},
		{"rename EIO", FailNth(OpRename, 1, syscall.EIO, false), syscall.EIO, OpRename},
		{"create ENOSPC", FailNth(OpCreate, 2, syscall.ENOSPC, false), syscall.ENOSPC, OpCreate},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewMem()
			MkdirAllDurable(m, "/d")
			m.Inject(c.inj)
			var failed []error
			note := func(k OpKind, err error) {
				if err != nil {
					if k != c.fail || !errors.Is(err, c.errno) {
						t.Fatalf("%v failed with %v", k, err)
					}
					failed = append(failed, err)
				}
			}
			f, err := m.Create("/d/a")
			note(OpCreate, err)
			_, err = f.Write([]byte("one"))
			note(OpWrite, err)
			_, err = f.Write([]byte("two"))
			note(OpWrite, err)
			note(OpSync, f.Sync())
			note(OpRename, m.Rename("/d/a", "/d/b"))
			_, err = m.Create("/d/c")
			note(OpCreate, err)
			if len(failed) != 1 {
				t.Fatalf("%d failures, want exactly 1: %v", len(failed), failed)
			}
			if m.Ops(OpWrite) != 2 || m.Ops(OpCreate) != 2 || m.Ops(OpSync) != 1 {
				t.Fatalf("counts write %d create %d sync %d", m.Ops(OpWrite), m.Ops(OpCreate), m.Ops(OpSync))
			}
		})
	}
	// A failed write leaves the file unchanged.
	m := NewMem()
	MkdirAllDurable(m, "/d")
	f, _ := m.Create("/d/a")
	m.Inject(FailFromSeq(m.Seq()+1, syscall.EIO))
	if _, err := f.Write([]byte("x")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write after FailFromSeq: %v", err)
	}
	if sz, _ := f.Size(); sz != 0 {
		t.Fatalf("failed write changed the size to %d", sz)
	}
}

func TestMemConcurrent(t *testing.T) {
	m := NewMem()
	MkdirAllDurable(m, "/d")
	f, _ := m.Create("/d/a")
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 8)
			for j := 0; j < 200; j++ {
				f.ReadAt(buf, 0)
				m.CrashClone(CrashOptions{})
			}
		}()
	}
	for j := 0; j < 200; j++ {
		f.Write([]byte("abcdefgh"))
		if j%10 == 0 {
			f.Sync()
		}
	}
	wg.Wait()
	if sz, _ := f.Size(); sz != 1600 {
		t.Fatalf("size %d", sz)
	}
}

// TestSyncHeld: SyncHeld syncs an OS file (and fails on a closed one), and
// passes any other file's Sync through, errors included.
func TestSyncHeld(t *testing.T) {
	f, err := OS().Create(filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if held, err := SyncHeld(f); err != nil || held != (canHold && runtime.GOMAXPROCS(0) >= 2) {
		t.Fatalf("SyncHeld on an OS file: held %v, %v (GOMAXPROCS %d)", held, err, runtime.GOMAXPROCS(0))
	}
	f.Close()
	if _, err := SyncHeld(f); err == nil {
		t.Fatal("SyncHeld on a closed OS file succeeded")
	}

	m := NewMem()
	MkdirAllDurable(m, "/d")
	m.Inject(FailNth(OpSync, 1, syscall.EIO, false))
	mf, err := m.Create("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SyncHeld(mf); !errors.Is(err, syscall.EIO) {
		t.Fatalf("SyncHeld on a memory file whose sync fails: %v, want EIO", err)
	}
	if held, err := SyncHeld(mf); err != nil || held {
		t.Fatalf("second SyncHeld on a memory file: %v", err)
	}
}

// TestHoldGate: the gate admits at most max held calls at once, none
// with max below 1, and none within HoldCooloff of a call slower than
// HoldMaxWait.
func TestHoldGate(t *testing.T) {
	var g holdGate
	t0 := time.Unix(1000, 0).UnixNano()
	if g.begin(t0, 0) {
		t.Fatal("a call holds with no processor to spare")
	}
	if !g.begin(t0, 2) || !g.begin(t0, 2) {
		t.Fatal("two calls do not hold with two to spare")
	}
	if g.begin(t0, 2) {
		t.Fatal("a third call holds with two to spare")
	}
	g.end(t0, t0+int64(HoldMaxWait)) // not slower than the limit
	if !g.begin(t0, 2) {
		t.Fatal("a call does not hold after one ended fast")
	}
	g.end(t0, t0)
	slow := t0 + int64(HoldMaxWait) + 1
	g.end(t0, slow)
	if n := g.n.Load(); n != 0 {
		t.Fatalf("%d calls counted after all ended", n)
	}
	if g.begin(slow, 2) || g.begin(slow+int64(HoldCooloff)-1, 2) {
		t.Fatal("a call holds within HoldCooloff of a slow one")
	}
	if !g.begin(slow+int64(HoldCooloff), 2) {
		t.Fatal("a call does not hold after the cool-off")
	}
}

// TestWriteAtHeld: WriteAtHeld writes an OS file at the offset (and
// fails on a closed one), through O_DIRECT too where the filesystem
// allows it, and passes any other file's WriteAt through.
func TestWriteAtHeld(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "x")
	f, err := OS().Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if n, held, err := WriteAtHeld(f, []byte("held write"), 3); n != 10 || err != nil || held != (canHold && runtime.GOMAXPROCS(0) >= 2) {
		t.Fatalf("WriteAtHeld on an OS file: %d, held %v, %v", n, held, err)
	}
	got := make([]byte, 13)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if string(got) != "\x00\x00\x00held write" {
		t.Fatalf("file holds %q", got)
	}
	f.Close()
	if _, _, err := WriteAtHeld(f, []byte("x"), 0); err == nil {
		t.Fatal("WriteAtHeld on a closed OS file succeeded")
	}

	if do, ok := OS().(DirectOpener); ok {
		if err := WriteFileAtomic(OS(), name, make([]byte, 2*DirectAlign)); err != nil {
			t.Fatal(err)
		}
		d, err := do.OpenDirect(name)
		switch {
		case errors.Is(err, ErrNoDirect):
			t.Logf("no direct writes in %s: %v", dir, err)
		case err != nil:
			t.Fatal(err)
		default:
			b := AlignedBuffer(DirectAlign)
			for i := range b {
				b[i] = byte(i)
			}
			if n, _, err := WriteAtHeld(d, b, DirectAlign); n != len(b) || err != nil {
				t.Fatalf("WriteAtHeld on a direct file: %d, %v", n, err)
			}
			d.Close()
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data[DirectAlign:], b) || !bytes.Equal(data[:DirectAlign], make([]byte, DirectAlign)) {
				t.Fatal("the direct write did not land at its offset")
			}
		}
	}

	m := NewMem()
	MkdirAllDurable(m, "/d")
	m.Inject(FailNth(OpWrite, 1, syscall.EIO, false))
	mf, err := m.Create("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteAtHeld(mf, []byte("a"), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("WriteAtHeld on a memory file whose write fails: %v, want EIO", err)
	}
	if n, held, err := WriteAtHeld(mf, []byte("ab"), 0); n != 2 || err != nil || held {
		t.Fatalf("second WriteAtHeld on a memory file: %d, %v", n, err)
	}
}
