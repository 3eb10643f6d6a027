package storage

import (
	"fmt"
	"math"
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
