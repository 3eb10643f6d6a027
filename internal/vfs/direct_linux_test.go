package vfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestZeroDirect: ZeroDirect overwrites a file's old bytes with zeros and
// extends it to the size asked; it refuses a size that is not aligned
// (ErrNoDirect, so that the caller writes through the page cache).
func TestZeroDirect(t *testing.T) {
	name := filepath.Join(t.TempDir(), "seg")
	old := bytes.Repeat([]byte{0xA5}, 5000)
	if err := os.WriteFile(name, old, 0o644); err != nil {
		t.Fatal(err)
	}
	const size = 3<<20 + DirectAlign // more than one buffer, not a whole number of them
	err := OS().(DirectZeroer).ZeroDirect(name, size)
	if errors.Is(err, ErrNoDirect) {
		t.Skipf("the test directory's filesystem refuses direct writes: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != size || !bytes.Equal(got, make([]byte, size)) {
		t.Fatalf("after ZeroDirect: %d bytes, zeros %v; want %d zeros", len(got), bytes.Equal(got, make([]byte, len(got))), size)
	}
	if err := OS().(DirectZeroer).ZeroDirect(name, size+1); !errors.Is(err, ErrNoDirect) {
		t.Fatalf("unaligned size: err %v, want ErrNoDirect", err)
	}
}
