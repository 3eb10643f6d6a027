package storage

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
)

// TestSegmentName: a base offset is its 20 zero-padded decimal digits,
// and parses back.
func TestSegmentName(t *testing.T) {
	for _, base := range []int64{0, 1, 9, 10, 12345, 1<<31 + 7, math.MaxInt64} {
		name := segmentName(base)
		if want := fmt.Sprintf("%020d", base); name != want {
			t.Fatalf("segmentName(%d) = %q, want %q", base, name, want)
		}
		if got, ok := parseSegmentName(name + logSuffix); !ok || got != base {
			t.Fatalf("parseSegmentName(%q) = %d, %v", name+logSuffix, got, ok)
		}
	}
}

// TestSegmentPath: a segment's path is filepath.Join of its directory
// and file name, whatever the directory looks like, and a clean
// directory's costs one allocation.
func TestSegmentPath(t *testing.T) {
	dirs := []string{"", ".", "/", "a", "a/b", "/var/lib/sluice/topics/t/7", "a/b/", "a//b", "./a", "/x/../y", "..", "a/.", "a/.."}
	for _, dir := range dirs {
		for _, base := range []int64{0, 1, 12345, math.MaxInt64, -3} {
			want := filepath.Join(dir, segmentName(base)+logSuffix)
			if got := segmentPath(dir, base); got != want {
				t.Errorf("segmentPath(%q, %d) = %q, want %q", dir, base, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = segmentPath("/var/lib/sluice/topics/t/7", 0) }); n != 1 {
		t.Errorf("segmentPath of a clean directory allocates %v times, want 1", n)
	}
}
