package storage

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/sluicedb/sluice/internal/vfs"
)

// fileLen is a file's length on fs.
func fileLen(t *testing.T, fs vfs.FS, name string) int64 {
	t.Helper()
	fi, err := fs.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestPreallocate: zeros are written ahead of the data, bounded by
// Config.Preallocate and the segment size, appends land over them,
// readers see only data, and a sealed segment or a clean shutdown leaves
// the file exactly its data.
func TestPreallocate(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	cfg := Config{SegmentBytes: 8 << 10, Preallocate: 2 << 10}
	l := mustOpen(t, m, dir, cfg)
	a := newAppender(t, l)
	a.add(2, 100, 1)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if !l.PreallocateDue() {
		t.Fatal("PreallocateDue false with no zeros ahead")
	}
	syncs := m.Ops(vfs.OpSync)
	if err := l.Preallocate(); err != nil {
		t.Fatal(err)
	}
	if m.Ops(vfs.OpSync) != syncs+1 {
		t.Fatal("Preallocate did not sync the zeros it wrote")
	}
	if got, want := fileLen(t, m, segPath(0)), int64(len(a.data))+2<<10; got != want {
		t.Fatalf("file is %d bytes after Preallocate, want data+2 KiB = %d", got, want)
	}
	if l.Size() != int64(len(a.data)) {
		t.Fatalf("log size %d, want %d (zeros are not data)", l.Size(), len(a.data))
	}
	// Enough left: nothing more is written, and PreallocateDue says so.
	if l.PreallocateDue() {
		t.Fatal("PreallocateDue true with 2 KiB of zeros ahead")
	}
	writes := m.Ops(vfs.OpWrite)
	if err := l.Preallocate(); err != nil || m.Ops(vfs.OpWrite) != writes {
		t.Fatalf("second Preallocate wrote again (%v)", err)
	}
	a.add(3, 200, 2)
	if got, want := fileLen(t, m, segPath(0)), int64(a.sizes[0])+2<<10; got != want {
		t.Fatalf("an append over the zeros changed the file length to %d, want %d", got, want)
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatal("reads differ from the appended data")
	}
	// Never past the segment size; PreallocateDue is true exactly when
	// Preallocate writes.
	for range 10 {
		a.add(5, 300, 3)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		due, writes := l.PreallocateDue(), m.Ops(vfs.OpWrite)
		if err := l.Preallocate(); err != nil {
			t.Fatal(err)
		}
		if wrote := m.Ops(vfs.OpWrite) != writes; wrote != due {
			t.Fatalf("PreallocateDue %v, but Preallocate wrote: %v", due, wrote)
		}
		if n := fileLen(t, m, filepathOfActive(l)); n > cfg.SegmentBytes && n != l.active().size {
			t.Fatalf("active segment file is %d bytes, past the segment size %d", n, cfg.SegmentBytes)
		}
	}
	if l.Segments() < 2 {
		t.Fatal("the workload did not roll")
	}
	// Sealed segments hold exactly their data.
	l.mu.RLock()
	sealed := append([]*segment(nil), l.segs[:len(l.segs)-1]...)
	l.mu.RUnlock()
	for _, s := range sealed {
		if n := fileLen(t, m, s.path); n != s.size {
			t.Fatalf("sealed segment %s is %d bytes, its data %d", s.path, n, s.size)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, m, dir, cfg)
	defer l.Close()
	if r := l.Recovery(); !r.Clean || r.BytesScanned != 0 {
		t.Fatalf("reopen after a clean close with preallocated zeros: %+v, want clean", r)
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatal("reopened log differs")
	}
}

func filepathOfActive(l *Log) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().path
}

// TestPreallocateDiskFull: a full disk while writing zeros ahead cuts
// them off again and leaves the log healthy; appends go on growing the
// file.
func TestPreallocateDiskFull(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Preallocate: 200 << 10}
	l := mustOpen(t, m, dir, cfg)
	defer l.Close()
	a := newAppender(t, l)
	for i := range 40 { // 200 KiB of data: as many zeros ahead, in several writes
		a.add(5, 1000, int64(i))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	m.Inject(vfs.FailNth(vfs.OpWrite, m.Ops(vfs.OpWrite)+2, syscall.ENOSPC, false)) // the second zero write
	if err := l.Preallocate(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Preallocate on a full disk: %v, want ENOSPC", err)
	}
	m.Inject(nil)
	if l.failure() != nil {
		t.Fatalf("a failed preallocation failed the log: %v", l.failure())
	}
	if got := fileLen(t, m, segPath(0)); got != int64(len(a.data)) {
		t.Fatalf("file is %d bytes after a failed preallocation, want the %d bytes of data", got, len(a.data))
	}
	a.add(3, 100, 2)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatal("reads differ after a failed preallocation")
	}
}

// TestRepairPreallocatedTail: after a crash, the zeros written ahead of
// the active segment's data are not corruption: a report-only repair
// finds nothing and changes nothing.
func TestRepairPreallocatedTail(t *testing.T) {
	m := vfs.NewMem()
	if err := vfs.MkdirAllDurable(m, dir); err != nil {
		t.Fatal(err)
	}
	l := mustOpen(t, m, dir, Config{SegmentBytes: 1 << 20, Preallocate: 4 << 10})
	a := newAppender(t, l)
	a.add(3, 100, 1)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Preallocate(); err != nil {
		t.Fatal(err)
	}
	crashed := m.CrashClone(vfs.CrashOptions{}) // no clean shutdown: the zeros stay
	l.Close()
	size := fileLen(t, crashed, segPath(0))
	if size <= int64(len(a.data)) {
		t.Fatalf("the crashed segment has no zeros ahead (%d bytes, data %d)", size, len(a.data))
	}
	rep, err := Repair(crashed, dir, false)
	if err != nil || rep.Corruption != nil || len(rep.Copies) != 0 {
		t.Fatalf("repair of a preallocated tail: %+v, %v", rep, err)
	}
	r := mustOpen(t, crashed, dir, Config{SegmentBytes: 1 << 20})
	defer r.Close()
	if got := readAll(t, r, 0); !bytes.Equal(got, a.data) {
		t.Fatal("the data before the zeros changed")
	}
}
