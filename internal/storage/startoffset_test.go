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

// TestDeleteRecordsStartSurvivesReplay checks a start offset past what a
// crash left in the segment (the records after it were in a write-behind
// tail, durable only in the broker's WAL): once the replay appends them
// again, the start is where DeleteRecordsBefore put it, not cut back to
// the end the segment had at Open; SettleStartOffset after the replay
// keeps it. Without a replay it is cut to the log's end, so records
// written at those offsets later are not hidden.
func TestDeleteRecordsStartSurvivesReplay(t *testing.T) {
	m := vfs.NewMem()
	cfg := Config{WriteBehind: 64 << 10, RetentionAge: -1}
	l := mustOpen(t, m, dir, cfg)
	a := newAppender(t, l)
	var batches [][]byte
	for i := range 10 {
		batches = append(batches, a.add(2, 100, int64(1000+i)))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := a.next // 20
	for i := range 10 {
		batches = append(batches, a.add(2, 100, int64(2000+i))) // in the tail only
	}
	const cut = 30
	if got, err := l.DeleteRecordsBefore(cut); err != nil || got != cut {
		t.Fatalf("DeleteRecordsBefore(%d) = %d, %v", cut, got, err)
	}
	crashed := m.CrashClone(vfs.CrashOptions{})

	// The replay brings the tail's batches back.
	r := mustOpen(t, crashed, dir, cfg)
	if r.NextOffset() != synced {
		t.Fatalf("after the crash the segment ends at %d, want %d", r.NextOffset(), synced)
	}
	if s := r.StartOffset(); s > r.NextOffset() {
		t.Fatalf("start %d past the log end %d before the replay", s, r.NextOffset())
	}
	for _, b := range batches[10:] {
		if err := r.Append(b, nil); err != nil {
			t.Fatal(err)
		}
	}
	r.SettleStartOffset()
	if s := r.StartOffset(); s != cut {
		t.Fatalf("after the replay StartOffset = %d, want %d (the deleted records are readable again)", s, cut)
	}
	r.Close()

	// No replay: the start is cut to the end, and new records there stay readable.
	crashed2 := m.CrashClone(vfs.CrashOptions{})
	n := mustOpen(t, crashed2, dir, cfg)
	defer n.Close()
	n.SettleStartOffset()
	if s := n.StartOffset(); s != synced {
		t.Fatalf("without a replay StartOffset = %d, want the log end %d", s, synced)
	}
	if err := n.Append(batches[10], nil); err != nil {
		t.Fatal(err)
	}
	if s := n.StartOffset(); s != synced {
		t.Fatalf("a new record at the old start's offsets moved the start to %d", s)
	}
}
