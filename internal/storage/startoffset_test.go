package storage

import (
	"errors"
	"testing"

	"github.com/sluicedb/sluice/internal/vfs"
)

// TestDeleteRecordsBefore moves the start offset into the middle of a
// segment, checks reads below it fail, that it survives a crash (it was
// synced before it took effect) and that retention then removes the
// segments wholly below it.
func TestDeleteRecordsBefore(t *testing.T) {
	m := vfs.NewMem()
	l := mustOpen(t, m, dir, Config{SegmentBytes: 2000, RetentionAge: -1})
	a := newAppender(t, l)
	for i := 0; i < 30; i++ {
		a.add(2, 100, int64(1000+i))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if l.Segments() < 3 {
		t.Fatalf("want several segments, have %d", l.Segments())
	}
	if _, err := l.DeleteRecordsBefore(a.next + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past the end: %v, want ErrOffsetOutOfRange", err)
	}
	const cut = 25 // inside a batch (offsets 24..25) in the middle of a segment
	got, err := l.DeleteRecordsBefore(cut)
	if err != nil || got != cut {
		t.Fatalf("DeleteRecordsBefore(%d) = %d, %v", cut, got, err)
	}
	if got, _ := l.DeleteRecordsBefore(3); got != cut {
		t.Fatalf("a lower offset moved the start back to %d", got)
	}
	if s := l.StartOffset(); s != cut {
		t.Fatalf("StartOffset = %d, want %d", s, cut)
	}
	if _, err := l.Read(cut-1, a.next, 1<<20); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read below the start: %v, want ErrOffsetOutOfRange", err)
	}
	if b := readAll(t, l, cut); len(b) == 0 {
		t.Fatal("nothing readable from the new start")
	}

	// A crash now keeps the new start.
	c := m.CrashClone(vfs.CrashOptions{})
	l2 := mustOpen(t, c, dir, Config{SegmentBytes: 2000, RetentionAge: -1})
	if s := l2.StartOffset(); s != cut {
		t.Fatalf("after a crash StartOffset = %d, want %d", s, cut)
	}
	segsBefore := l2.Segments()
	removed, err := l2.ApplyRetention()
	if err != nil || removed == 0 {
		t.Fatalf("ApplyRetention removed %d, %v; want the segments below %d gone", removed, err, cut)
	}
	if l2.Segments() != segsBefore-removed || l2.StartOffset() != cut {
		t.Fatalf("after retention: %d segments, start %d", l2.Segments(), l2.StartOffset())
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStartOffsetFileCorruptIgnored: a damaged start-offset file is
// reported and ignored (records reappear rather than vanish).
func TestStartOffsetFileCorruptIgnored(t *testing.T) {
	m, _ := buildLog(t, Config{}, 5, false)
	overwrite(t, m, dir+"/"+startOffsetName, []byte("garbage"))
	l := mustOpen(t, m, dir, Config{})
	defer l.Close()
	if l.StartOffset() != 0 || l.Recovery().StartOffsetIgnored == "" {
		t.Fatalf("start %d, report %+v", l.StartOffset(), l.Recovery())
	}
}

// TestSetConfig changes the segment size of an open log: later appends
// roll at the new size.
func TestSetConfig(t *testing.T) {
	m := vfs.NewMem()
	l := mustOpen(t, m, dir, Config{})
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 10; i++ {
		a.add(1, 200, int64(i))
	}
	if l.Segments() != 1 {
		t.Fatalf("%d segments before SetConfig", l.Segments())
	}
	if err := l.SetConfig(Config{SegmentBytes: -5}); err == nil {
		t.Fatal("SetConfig accepted a negative segment size")
	}
	if err := l.SetConfig(Config{SegmentBytes: 1024}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		a.add(1, 200, int64(i))
	}
	if l.Segments() < 3 {
		t.Fatalf("%d segments after SetConfig(SegmentBytes 1024)", l.Segments())
	}
}
