package storage

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

// TestAppendSharedKeepsByReference: a new log keeps a large append's
// bytes as the slice of the Shared buffer they lie in, holding it (done
// not called at the caller's Release, the buffer's size counted once in
// the budget however many logs keep slices of it), and lets go of it once
// its file is made (Sync) or it is closed; a small append, which the
// write-behind tail buffers, is copied and holds nothing.
func TestAppendSharedKeepsByReference(t *testing.T) {
	fs := vfs.NewMem()
	if err := vfs.MkdirAllDurable(fs, "/t"); err != nil {
		t.Fatal(err)
	}
	budget := NewPendingBudget(64 << 20)
	cfg := Config{WriteBehind: 4 << 10, Pending: budget}
	logs := make([]*Log, 3)
	for i := range logs {
		l, err := Create(fs, "/t/"+string(rune('a'+i)), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		logs[i] = l
	}
	// One buffer holding a large batch for each of the first two logs
	// and a small one for the third, as a produce frame does.
	b0, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(20, 1000, 1), 0)
	b1, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(30, 1000, 2), 0)
	b2, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(1, 100, 3), 0)
	frame := make([]byte, 0, 256<<10)
	frame = append(append(append(frame, b0...), b1...), b2...)
	p0, p1, p2 := frame[:len(b0)], frame[len(b0):len(b0)+len(b1)], frame[len(b0)+len(b1):]
	var done atomic.Int32
	sh := NewShared(cap(frame), func() { done.Add(1) })
	for i, p := range [][]byte{p0, p1, p2} {
		if err := logs[i].AppendShared(p, nil, sh); err != nil {
			t.Fatal(err)
		}
	}
	sh.Release() // the caller's hold
	if n := done.Load(); n != 0 {
		t.Fatal("the buffer was given back while new logs keep slices of it")
	}
	if got, want := budget.Used(), int64(cap(frame)); got != want {
		t.Fatalf("budget counts %d bytes, want the buffer's %d once (the small batch is in the third log's tail)", got, want)
	}
	if n := budget.SharedBuffers(); n != 1 {
		t.Fatalf("%d shared buffers counted, want 1", n)
	}
	for i, want := range [][]byte{b0, b1, b2} {
		if got := readAll(t, logs[i], 0); !bytes.Equal(got, want) {
			t.Fatalf("log %d reads %d bytes, want the %d appended", i, len(got), len(want))
		}
	}
	// The first log's file made: the buffer is still kept by the second.
	if err := logs[0].Sync(); err != nil {
		t.Fatal(err)
	}
	if n := done.Load(); n != 0 {
		t.Fatal("the buffer was given back while the second log keeps a slice of it")
	}
	// The second log closed without its file: the last hold goes.
	if err := logs[1].Close(); err != nil {
		t.Fatal(err)
	}
	if n := done.Load(); n != 1 {
		t.Fatalf("done called %d times after the last log let go, want 1", n)
	}
	if used, n := budget.Used(), budget.SharedBuffers(); used != 0 || n != 0 {
		t.Fatalf("budget counts %d bytes and %d shared buffers after the buffer was given back, want 0 and 0 (the small batch is still in its tail)", used, n)
	}
	// The bytes are the file's now: changing the buffer changes nothing.
	clear(frame[:cap(frame)])
	if got := readAll(t, logs[0], 0); !bytes.Equal(got, b0) {
		t.Fatalf("log 0 reads %d bytes after its file was made, want the %d appended", len(got), len(b0))
	}
	if err := logs[2].Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, logs[2], 0); !bytes.Equal(got, b2) {
		t.Fatalf("log 2 reads %d bytes, want the %d appended", len(got), len(b2))
	}
	if used := budget.Used(); used != 0 {
		t.Fatalf("budget counts %d bytes once every file is made, want 0", used)
	}
}

// TestSharedReleasedTooOften: a Release past the last hold panics rather
// than giving the buffer back twice.
func TestSharedReleasedTooOften(t *testing.T) {
	var done int
	sh := NewShared(10, func() { done++ })
	sh.Release()
	if done != 1 {
		t.Fatalf("done called %d times, want 1", done)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second Release did not panic")
		}
	}()
	sh.Release()
}
