package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

// TestRecoverAfterFailedSync: after a failed fsync the log refuses
// writes; Recover fails while the fault lasts, then cuts the bytes no
// fsync covered, and the log takes appends again; a crash afterwards
// keeps exactly the synced batches.
func TestRecoverAfterFailedSync(t *testing.T) {
	m := vfs.NewMem()
	l := mustOpen(t, m, "/p", Config{})
	defer l.Close()
	synced, b := syncedThenMore(t, l)
	m.Inject(vfs.FailNth(vfs.OpSync, 1, syscall.EIO, true))
	if err := l.Sync(); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync: %v, want ErrFailed wrapping EIO", err)
	}
	if err := l.Append(b, nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append on a failed log: %v", err)
	}
	if err := l.Recover(false); err == nil {
		t.Fatal("Recover succeeded while fsync still fails")
	}
	if l.Failed() == nil {
		t.Fatal("a failed Recover cleared the failure")
	}
	m.Inject(nil)
	if err := l.Recover(false); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if l.Failed() != nil || l.NextOffset() != 3 {
		t.Fatalf("after Recover: failed %v, next offset %d; want healthy at 3", l.Failed(), l.NextOffset())
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, synced) {
		t.Fatal("after Recover the log does not hold exactly the synced batches")
	}
	a2 := newAppender(t, l)
	a2.add(1, 50, 3)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	want := append(synced, a2.data...)
	c := mustOpen(t, m.CrashClone(vfs.CrashOptions{}), "/p", Config{})
	defer c.Close()
	if got := readAll(t, c, 0); !bytes.Equal(got, want) {
		t.Fatal("after a crash the log does not hold the synced batches")
	}
}

// TestRecoverAfterFailedRoll: a roll that failed after creating the next
// segment leaves an unlisted file; Recover removes it and later rolls
// work.
func TestRecoverAfterFailedRoll(t *testing.T) {
	m := vfs.NewMem()
	l := mustOpen(t, m, "/p", Config{SegmentBytes: 1000})
	defer l.Close()
	a := newAppender(t, l)
	a.add(5, 100, 1) // about 700 bytes: the next batch rolls
	m.Inject(vfs.FailNth(vfs.OpSyncDir, m.Ops(vfs.OpSyncDir)+1, syscall.ENOSPC, false))
	b, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(5, 100, 2), a.next)
	if err := l.Append(b, nil); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append: %v, want ENOSPC from the roll", err)
	}
	stray := filepath.Join("/p", segmentName(5)+logSuffix)
	if _, err := m.Stat(stray); err != nil {
		t.Fatalf("the failed roll left no segment file: %v", err)
	}
	if err := l.Recover(false); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Recover left the stray segment: %v", err)
	}
	a.add(5, 100, 2)
	a.add(5, 100, 3)
	if l.Segments() != 3 {
		t.Fatalf("%d segments, want 3", l.Segments())
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatal("the log after Recover and rolls differs from what was appended")
	}
}

// TestRepair: corruption in a sealed segment followed by more segments:
// Repair reports it without changing the log, then cuts it, keeping
// copies, and the log opens with the batches before the corruption.
func TestRepair(t *testing.T) {
	m := vfs.NewMem()
	l := mustOpen(t, m, "/p", Config{SegmentBytes: 2000})
	a := newAppender(t, l)
	for i := 0; i < 8; i++ {
		a.add(5, 100, int64(i))
	}
	if l.Segments() < 3 {
		t.Fatalf("%d segments, want at least 3", l.Segments())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join("/p", segmentName(0)+logSuffix)
	f, _ := m.Open(first)
	size, _ := f.Size()
	data := make([]byte, size)
	f.ReadAt(data, 0)
	f.Close()
	pos := int64(a.sizes[0])
	data[pos+100] ^= 1
	m.Remove(first)
	w, _ := m.Create(first)
	w.Write(data)
	w.Sync()
	w.Close()
	m.SyncDir("/p")

	rep, err := Repair(m, "/p", false)
	if err != nil || rep.Corruption == nil || rep.Truncated {
		t.Fatalf("Repair report: %+v, %v", rep, err)
	}
	if rep.Corruption.Position != pos || rep.FirstOffset != 5 || rep.LastOffset != 39 || len(rep.LaterSegments) < 2 {
		t.Fatalf("Repair report: %+v", rep)
	}
	// Report-only changes nothing on disk: no copy is kept.
	if len(rep.Copies) != 0 {
		t.Fatalf("a report-only repair kept copies: %v", rep.Copies)
	}
	if _, err := m.Stat(first + brokenSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a report-only repair wrote %s (stat: %v)", first+brokenSuffix, err)
	}
	rep, err = Repair(m, "/p", true)
	if err != nil || !rep.Truncated {
		t.Fatalf("Repair: %+v, %v", rep, err)
	}
	if want := int64(len(a.data)) - pos; rep.RemovedBytes != want {
		t.Fatalf("removed %d bytes, want %d", rep.RemovedBytes, want)
	}
	for _, p := range rep.Copies {
		if _, err := m.Stat(p); err != nil {
			t.Fatalf("copy %s: %v", p, err)
		}
	}
	l = mustOpen(t, m, "/p", Config{})
	defer l.Close()
	if l.NextOffset() != 5 || !bytes.Equal(readAll(t, l, 0), a.data[:pos]) {
		t.Fatalf("after repair: next offset %d, want 5 with the first batch intact", l.NextOffset())
	}
	if rep, err := Repair(m, "/p", false); err != nil || rep.Corruption != nil {
		t.Fatalf("a repaired log still reports: %+v %v", rep, err)
	}
}

// TestRecoverKeepUnsynced: with keepUnsynced (fsync policies that
// acknowledge on write) Recover keeps every whole write, cuts a short
// one, and syncs.
func TestRecoverKeepUnsynced(t *testing.T) {
	m := vfs.NewMem()
	l := mustOpen(t, m, "/p", Config{})
	defer l.Close()
	a := newAppender(t, l)
	a.add(3, 50, 1)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	a.add(2, 50, 2) // written, not synced
	m.Inject(vfs.FailNth(vfs.OpWrite, m.Ops(vfs.OpWrite)+1, syscall.ENOSPC, false))
	b, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(1, 50, 3), a.next)
	if err := l.Append(b, nil); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append: %v, want ENOSPC", err)
	}
	if err := l.Recover(true); err != nil {
		t.Fatal(err)
	}
	if l.NextOffset() != 5 || !bytes.Equal(readAll(t, l, 0), a.data) {
		t.Fatalf("after Recover(true): next offset %d, want 5 with every whole write", l.NextOffset())
	}
	c := mustOpen(t, m.CrashClone(vfs.CrashOptions{}), "/p", Config{})
	defer c.Close()
	if c.NextOffset() != 5 {
		t.Fatalf("after a crash: next offset %d, want 5 (Recover syncs what it keeps)", c.NextOffset())
	}
}

// TestAbandonThenRecover: a healthy log abandoned by its writer (its
// write-ahead log failed) refuses writes, and Recover cuts it back to
// the bytes its own fsyncs covered.
func TestAbandonThenRecover(t *testing.T) {
	m := vfs.NewMem()
	l := mustOpen(t, m, "/p", Config{})
	defer l.Close()
	synced, b := syncedThenMore(t, l)
	l.Abandon(syscall.EIO)
	if err := l.Append(b, nil); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Append on an abandoned log: %v, want ErrFailed wrapping the cause", err)
	}
	if err := l.Recover(false); err != nil {
		t.Fatal(err)
	}
	if l.NextOffset() != 3 {
		t.Fatalf("after Recover the log ends at %d, want 3 (the unsynced batch cut)", l.NextOffset())
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, synced) {
		t.Fatal("after Recover the log does not hold exactly the synced batches")
	}
}

// TestRecoverUpTo: after a write refused for room, RecoverUpTo keeps the
// whole batches written past the last fsync up to the limit (and syncs
// them); after a failed fsync or another cause it cuts back to the last
// fsync, as Recover(false); a write-behind tail is never kept.
func TestRecoverUpTo(t *testing.T) {
	// setup: batches 0..2 synced, 3..4 and 5..7 written, not synced.
	setup := func(t *testing.T, cfg Config) (*vfs.MemFS, *Log, []byte) {
		m := vfs.NewMem()
		l := mustOpen(t, m, "/p", cfg)
		t.Cleanup(func() { l.Close() })
		a := newAppender(t, l)
		a.add(3, 50, 1)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		a.add(2, 50, 2)
		a.add(3, 50, 3)
		return m, l, a.data
	}
	enospc := func(t *testing.T, m *vfs.MemFS, l *Log) {
		m.Inject(vfs.FailNth(vfs.OpWrite, m.Ops(vfs.OpWrite)+1, syscall.ENOSPC, false))
		b, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(1, 50, 4), l.NextOffset())
		if err := l.Append(b, nil); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Append: %v, want ENOSPC", err)
		}
		m.Inject(nil)
	}
	check := func(t *testing.T, m *vfs.MemFS, l *Log, data []byte, next int64) {
		t.Helper()
		if l.Failed() != nil || l.NextOffset() != next {
			t.Fatalf("after RecoverUpTo: failed %v, next offset %d; want healthy at %d", l.Failed(), l.NextOffset(), next)
		}
		got := readAll(t, l, 0)
		if !bytes.Equal(got, data[:len(got)]) {
			t.Fatal("the log holds other bytes than those appended")
		}
		c := mustOpen(t, m.CrashClone(vfs.CrashOptions{}), "/p", Config{})
		defer c.Close()
		if c.NextOffset() != next {
			t.Fatalf("after a crash: next offset %d, want %d (what it keeps is synced)", c.NextOffset(), next)
		}
	}
	t.Run("enospc", func(t *testing.T) {
		m, l, data := setup(t, Config{})
		enospc(t, m, l)
		if err := l.RecoverUpTo(5); err != nil {
			t.Fatal(err)
		}
		check(t, m, l, data, 5) // 5..7 is past the limit
	})
	t.Run("enospc, limit past the end", func(t *testing.T) {
		m, l, data := setup(t, Config{})
		enospc(t, m, l)
		if err := l.RecoverUpTo(100); err != nil {
			t.Fatal(err)
		}
		check(t, m, l, data, 8)
	})
	t.Run("failed fsync", func(t *testing.T) {
		m, l, data := setup(t, Config{})
		m.Inject(vfs.FailNth(vfs.OpSync, m.Ops(vfs.OpSync)+1, syscall.ENOSPC, false))
		if err := l.Sync(); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Sync: %v", err)
		}
		m.Inject(nil)
		if err := l.RecoverUpTo(5); err != nil {
			t.Fatal(err)
		}
		check(t, m, l, data, 3)
	})
	t.Run("abandoned for another cause", func(t *testing.T) {
		m, l, data := setup(t, Config{})
		l.Abandon(syscall.EIO)
		if err := l.RecoverUpTo(5); err != nil {
			t.Fatal(err)
		}
		check(t, m, l, data, 3)
	})
	t.Run("write-behind tail", func(t *testing.T) {
		m, l, data := setup(t, Config{WriteBehind: 1 << 20})
		l.Abandon(syscall.ENOSPC)
		if err := l.RecoverUpTo(100); err != nil {
			t.Fatal(err)
		}
		check(t, m, l, data, 3) // 3..7 were in the tail only
	})
}

// syncedThenMore appends three records to l and syncs them, then
// appends two more without a sync; it returns the synced bytes and the
// unsynced batch.
func syncedThenMore(t *testing.T, l *Log) (synced, more []byte) {
	t.Helper()
	a := newAppender(t, l)
	a.add(3, 50, 1)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	synced = append([]byte(nil), a.data...)
	more, _ = storagetest.WithBaseOffset(storagetest.MakeBatch(2, 50, 2), a.next)
	if err := l.Append(more, nil); err != nil {
		t.Fatal(err)
	}
	return synced, more
}
