package vfs

import (
	"errors"
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
