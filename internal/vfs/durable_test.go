package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomicReplacesAndReads(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("d"); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(m, "d/f"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadFile of a missing file: %v, want ErrNotExist", err)
	}
	for _, want := range []string{"one", "second contents"} {
		if err := WriteFileAtomic(m, "d/f", []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(m, "d/f")
		if err != nil || string(got) != want {
			t.Fatalf("ReadFile = %q, %v; want %q", got, err, want)
		}
		if _, err := m.Stat("d/f" + TmpSuffix); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("temporary file left behind: %v", err)
		}
	}
}

func TestMkdirAllDurableCreatesParents(t *testing.T) {
	m := NewMem()
	if err := MkdirAllDurable(m, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "a/b", "a/b/c"} {
		if fi, err := m.Stat(d); err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v", d, err)
		}
	}
	if err := MkdirAllDurable(m, "a/b/c"); err != nil {
		t.Fatalf("existing directory: %v", err)
	}
}

// TestWriteFilePrivate: on the OS filesystem a private file and its
// directory are readable by their owner only.
func TestWriteFilePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "security")
	if err := MkdirAllPrivate(OS(), dir); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "credentials.json")
	if err := WriteFilePrivate(OS(), name, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, name: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s has mode %v, want %v", p, got, want)
		}
	}
}

// TestWriteInPlace: the file ends up holding exactly the data, whether it
// was missing (created), longer or shorter, and what is written is
// durable only after the returned file's Sync (and, when created, the
// directory's).
func TestWriteInPlace(t *testing.T) {
	m := NewMem()
	if err := MkdirAllDurable(m, "d"); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		data    string
		created bool
	}{{"first contents", true}, {"much longer second contents", false}, {"short", false}} {
		f, created, err := WriteInPlace(m, "d/f", []byte(tc.data))
		if err != nil {
			t.Fatal(err)
		}
		if created != tc.created {
			t.Fatalf("write %d: created %v, want %v", i, created, tc.created)
		}
		if got, _ := ReadFile(m, "d/f"); string(got) != tc.data {
			t.Fatalf("write %d: file holds %q, want %q", i, got, tc.data)
		}
		if got, _ := ReadFile(m.CrashClone(CrashOptions{}), "d/f"); string(got) == tc.data {
			t.Fatalf("write %d: durable before any sync", i)
		}
		set := NewSyncSet(m, "d")
		set.AddFile(f)
		set.AddDir("d")
		if err := set.Sync(); err != nil {
			t.Fatal(err)
		}
		set.Close()
		if got, _ := ReadFile(m.CrashClone(CrashOptions{}), "d/f"); string(got) != tc.data {
			t.Fatalf("write %d: after a sync a crash leaves %q, want %q", i, got, tc.data)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSyncSet: a set syncs files written before it started (open) and
// after (by name) and directories, one by one on the crash FS (so a
// crash keeps all of them) and with one syncfs on the operating system's
// filesystem when it holds many.
func TestSyncSet(t *testing.T) {
	t.Run("mem", func(t *testing.T) {
		m := NewMem()
		if err := MkdirAllDurable(m, "d"); err != nil {
			t.Fatal(err)
		}
		before, _, err := WriteInPlace(m, "d/before", []byte("before"))
		if err != nil {
			t.Fatal(err)
		}
		defer before.Close()
		set := NewSyncSet(m, "d")
		defer set.Close()
		set.AddFile(before)
		for i := range 3 {
			f, _, err := WriteInPlace(m, fmt.Sprint("d/", i), []byte(fmt.Sprint("file ", i)))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			set.AddName(fmt.Sprint("d/", i))
		}
		set.AddDir("d", "d")
		if err := set.Sync(); err != nil {
			t.Fatal(err)
		}
		c := m.CrashClone(CrashOptions{})
		if got, _ := ReadFile(c, "d/before"); string(got) != "before" {
			t.Fatalf("after a crash d/before holds %q", got)
		}
		for i := range 3 {
			if got, _ := ReadFile(c, fmt.Sprint("d/", i)); string(got) != fmt.Sprint("file ", i) {
				t.Fatalf("after a crash d/%d holds %q", i, got)
			}
		}
	})
	t.Run("os", func(t *testing.T) {
		fs := OS()
		dir := t.TempDir()
		before, _, err := WriteInPlace(fs, filepath.Join(dir, "before"), []byte("before"))
		if err != nil {
			t.Fatal(err)
		}
		defer before.Close()
		set := NewSyncSet(fs, dir)
		defer set.Close()
		if set.base == nil {
			t.Skip("no syncfs on this system: the set syncs one by one, as on the crash FS")
		}
		if s := NewSyncSet(fs, filepath.Join(dir, "not", "made")); s.base == nil {
			t.Fatal("a set on a directory not made yet has no handle on the filesystem: it would sync one by one")
		} else {
			s.Close()
		}
		set.AddFile(before)
		for i := range 2 * syncDirsMin {
			name := filepath.Join(dir, fmt.Sprint(i))
			f, _, err := WriteInPlace(fs, name, []byte(fmt.Sprint("file ", i)))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			set.AddName(name)
		}
		set.AddDir(dir)
		if err := set.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := before.Sync(); err != nil {
			t.Fatalf("a file synced by the set: %v", err)
		}
		for i := range 2 * syncDirsMin {
			if got, err := ReadFile(fs, filepath.Join(dir, fmt.Sprint(i))); err != nil || string(got) != fmt.Sprint("file ", i) {
				t.Fatalf("file %d holds %q (%v)", i, got, err)
			}
		}
	})
}
