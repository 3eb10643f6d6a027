package storage

import (
	"slices"
	"testing"
)

// FuzzDecodeCleanFiles feeds arbitrary bytes to the decoders of the
// files compaction and DeleteRecords write (clean-swap,
// cleaner-checkpoint, log-start-offset). Invariants: no panic; whatever
// decodes re-encodes to the same bytes (nothing is accepted that the
// encoder would not have written).
func FuzzDecodeCleanFiles(f *testing.F) {
	f.Add(encodeSwap([]int64{0, 100, 250}))
	f.Add(encodeCleanMarks([]cleanMark{{upTo: 10, at: 5}, {upTo: 30, at: 9}}, 42))
	f.Add(encodeStartOffset(12345))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if bases, err := decodeSwap(b); err == nil && !slices.Equal(encodeSwap(bases), b) {
			t.Fatalf("clean-swap %x decodes to %v, which encodes differently", b, bases)
		}
		if ms, due, err := decodeCleanMarks(b); err == nil && !slices.Equal(encodeCleanMarks(ms, due), b) {
			t.Fatalf("cleaner-checkpoint %x decodes to %v %d, which encodes differently", b, ms, due)
		}
		if off, err := decodeStartOffset(b); err == nil && !slices.Equal(encodeStartOffset(off), b) {
			t.Fatalf("log-start-offset %x decodes to %d, which encodes differently", b, off)
		}
	})
}
