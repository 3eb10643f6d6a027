package wal

import (
	"sync/atomic"
	"testing"

	"github.com/sluicedb/sluice/internal/vfs"
)

// TestOnBehindAtSeal: a key's OnBehind is called when a seal leaves the
// WAL holding as many sealed segments as it keeps with the key's entries
// in one, by the time the Sync of the round that sealed returns, so that
// Behind turning true is never missed; not before, not for a key with no
// entries, not once removed, and not after the key checkpointed past its
// entries.
func TestOnBehindAtSeal(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := open(t, fs, 2<<10)
	defer w.Close()
	var calls [4]atomic.Int32
	for k := range 4 {
		w.OnBehind(key(int32(k)), func() { calls[k].Add(1) })
	}
	w.OnBehind(key(3), nil) // removed: never called
	off := []int64{0, 0, 0, 0}
	write := func(k int32) {
		t.Helper()
		b := batches(off[k], 1, off[k])
		p, err := w.Append(key(k), off[k], off[k]+1, b)
		if err == nil {
			err = w.Sync(p)
		}
		if err != nil {
			t.Fatal(err)
		}
		off[k]++
		for j := range 3 {
			if behind := w.Behind(key(int32(j))); behind && calls[j].Load() == 0 {
				t.Fatalf("key %d is behind and was never told", j)
			}
		}
	}
	write(0)
	write(3)
	for i := 0; !w.Behind(key(1)); i++ {
		if i > 200 {
			t.Fatal("200 appends did not seal the WAL's segments")
		}
		write(1)
	}
	if calls[0].Load() == 0 || calls[1].Load() == 0 {
		t.Fatalf("keys with entries in the sealed segments told %d and %d times", calls[0].Load(), calls[1].Load())
	}
	if calls[2].Load() != 0 || calls[3].Load() != 0 {
		t.Fatalf("a key without entries told %d times, a removed one %d", calls[2].Load(), calls[3].Load())
	}
	w.Checkpoint(key(0), off[0])
	before := calls[0].Load()
	for range 40 { // more seals
		write(1)
	}
	if got := calls[0].Load(); got != before {
		t.Fatalf("a key checkpointed past its entries told %d times more", got-before)
	}
	if w.Behind(key(0)) {
		t.Fatal("a key checkpointed past its entries is behind")
	}
}
