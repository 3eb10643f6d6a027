package wal

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"github.com/sluicedb/sluice/internal/vfs"
)

// dioFS is a filesystem whose files can be opened for direct writes
// (vfs.DirectOpener) that are checked for O_DIRECT's alignment: an
// unaligned write fails with errUnaligned. With refuse set, every direct
// write fails with EINVAL, as a filesystem that opens files with O_DIRECT
// but refuses the writes would.
type dioFS struct {
	vfs.FS
	refuse bool
	writes atomic.Int64 // direct writes made
}

var errUnaligned = errors.New("unaligned direct write")

func (d *dioFS) OpenDirect(name string) (vfs.File, error) {
	f, err := d.FS.OpenRW(name)
	if err != nil {
		return nil, err
	}
	return &dioFile{File: f, fs: d}, nil
}

type dioFile struct {
	vfs.File
	fs *dioFS
}

func (f *dioFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.refuse {
		return 0, syscall.EINVAL
	}
	const al = vfs.DirectAlign
	if len(p) == 0 || len(p)%al != 0 || off%al != 0 || uintptr(unsafe.Pointer(&p[0]))%al != 0 {
		return 0, fmt.Errorf("%w: %d bytes at %d", errUnaligned, len(p), off)
	}
	f.fs.writes.Add(1)
	return f.File.WriteAt(p, off)
}

// WriteAtHeld and SyncHeld make dioFile a vfs.HeldFile: the WAL's held
// calls reach it, counted as held (a memory file has no processor to
// hold), so that tests see which calls the WAL made the held way.
func (f *dioFile) WriteAtHeld(p []byte, off int64) (int, bool, error) {
	n, err := f.WriteAt(p, off)
	return n, true, err
}

func (f *dioFile) SyncHeld() (bool, error) { return true, f.File.Sync() }

// runRounds appends entries of odd sizes for three keys, one Sync per
// round, over several segments of w, and returns what each key's log
// should hold.
func runRounds(t *testing.T, w *WAL, rounds int) map[int32][]byte {
	t.Helper()
	want := map[int32][]byte{}
	next := map[int32]int64{}
	for round := range rounds {
		var last Pos
		for k := range int32(3) {
			n := 1 + (round+int(k))%5 // 1 to 5 batches: entries end anywhere in a block
			b := batches(next[k], n, int64(round*10)+int64(k))
			p, err := w.Append(key(k), next[k], next[k]+int64(n), b)
			if err != nil {
				t.Fatal(err)
			}
			next[k] += int64(n)
			want[k] = append(want[k], b...)
			last = p
		}
		if err := w.Sync(last); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	return want
}

// checkReplay replays every key from fs and compares with want.
func checkReplay(t *testing.T, fs vfs.FS, segBytes int64, want map[int32][]byte) {
	t.Helper()
	w, rp := open(t, fs, segBytes)
	defer w.Close()
	for k, b := range want {
		var l memLog
		if _, err := rp.Apply(key(k), &l); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(l.data, b) {
			t.Fatalf("key %d: replayed %d bytes, want %d", k, len(l.data), len(b))
		}
	}
	if err := rp.Done(); err != nil {
		t.Fatal(err)
	}
}

// TestDirectRounds: on a filesystem with direct writes, every round of
// full-length segments is written directly, aligned (each write starts
// with the block the previous one ended in, rewritten), and what the
// rounds made durable survives a crash, across segment boundaries.
func TestDirectRounds(t *testing.T) {
	mem := vfs.NewMem()
	fs := &dioFS{FS: mem}
	const segBytes = 16 << 10
	w, _ := open(t, fs, segBytes)
	want := runRounds(t, w, 60)
	st := w.Stats()
	if st.Rounds != 60 || st.FailedRounds != 0 || st.DirectRounds != 60 {
		t.Fatalf("stats %+v, want 60 rounds, all direct, none failed", st)
	}
	// Every round but those that start or fill a segment is written from
	// its own buffer, the segment's last block's bytes put in front.
	if st.InPlace < st.Rounds-2*int64(len(w.segs)) || st.InPlace > fs.writes.Load() {
		t.Fatalf("%d of %d direct writes in place over %d rounds and %d segments", st.InPlace, fs.writes.Load(), st.Rounds, len(w.segs))
	}
	if fs.writes.Load() < 60 {
		t.Fatalf("%d direct writes for 60 rounds", fs.writes.Load())
	}
	// The rounds are small: their direct writes are made the held way
	// (dioFile counts each as held), never more than were made.
	if st.HeldWrites < 1 || st.HeldWrites > fs.writes.Load() {
		t.Fatalf("%d of %d direct writes held their processor", st.HeldWrites, fs.writes.Load())
	}
	if len(w.segs) < 3 {
		t.Fatalf("the rounds filled %d segments; the test wants several", len(w.segs))
	}
	crashed := mem.CrashClone(vfs.CrashOptions{})
	w.Close()
	checkReplay(t, crashed, segBytes, want)
}

// TestDirectRefusedFallsBack: a filesystem that opens files for direct
// writes but refuses the writes (EINVAL) gets the rounds through the
// page cache, with nothing lost.
func TestDirectRefusedFallsBack(t *testing.T) {
	mem := vfs.NewMem()
	fs := &dioFS{FS: mem, refuse: true}
	const segBytes = 16 << 10
	w, _ := open(t, fs, segBytes)
	want := runRounds(t, w, 30)
	st := w.Stats()
	if st.Rounds != 30 || st.FailedRounds != 0 || st.DirectRounds != 0 {
		t.Fatalf("stats %+v, want 30 rounds through the page cache, none failed", st)
	}
	crashed := mem.CrashClone(vfs.CrashOptions{})
	w.Close()
	checkReplay(t, crashed, segBytes, want)
}

// TestDirectRoundsOnOSFiles: on the operating system's files rounds are
// written with O_DIRECT where the filesystem allows it, and replay reads
// back exactly what they wrote.
func TestDirectRoundsOnOSFiles(t *testing.T) {
	fs, dir := vfs.OS(), t.TempDir()
	probe := filepath.Join(dir, "probe")
	if err := vfs.WriteFileAtomic(fs, probe, make([]byte, vfs.DirectAlign)); err != nil {
		t.Fatal(err)
	}
	do, ok := fs.(vfs.DirectOpener)
	if !ok {
		t.Skip("no direct writes on this platform")
	}
	f, err := do.OpenDirect(probe)
	if errors.Is(err, vfs.ErrNoDirect) {
		t.Skipf("the filesystem of %s refuses O_DIRECT: %v", dir, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	const segBytes = 64 << 10
	opts := Options{FS: fs, Dir: filepath.Join(dir, "wal"), SegmentBytes: segBytes}
	w, rp, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Done(); err != nil {
		t.Fatal(err)
	}
	want := runRounds(t, w, 200)
	st := w.Stats()
	if st.FailedRounds != 0 || st.DirectRounds == 0 {
		t.Fatalf("stats %+v, want direct rounds and none failed", st)
	}
	if multi := runtime.GOMAXPROCS(0) >= 2; multi && st.HeldWrites < 1 || !multi && st.HeldWrites != 0 {
		t.Fatalf("stats %+v: %d direct writes held their processor with GOMAXPROCS %d", st, st.HeldWrites, runtime.GOMAXPROCS(0))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, rp, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for k, b := range want {
		var l memLog
		if _, err := rp.Apply(key(k), &l); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(l.data, b) {
			t.Fatalf("key %d: replayed %d bytes, want %d", k, len(l.data), len(b))
		}
	}
	if err := rp.Done(); err != nil {
		t.Fatal(err)
	}
}

// TestDirectNeedsWholeBlocks: segments whose length is not a whole
// number of blocks are written through the page cache (a direct write's
// padding would carry them past their length), with nothing lost.
func TestDirectNeedsWholeBlocks(t *testing.T) {
	mem := vfs.NewMem()
	fs := &dioFS{FS: mem}
	const segBytes = 10000
	w, _ := open(t, fs, segBytes)
	want := runRounds(t, w, 30)
	st := w.Stats()
	if st.Rounds != 30 || st.FailedRounds != 0 || st.DirectRounds != 0 || fs.writes.Load() != 0 {
		t.Fatalf("stats %+v, %d direct writes; want 30 rounds through the page cache, none failed", st, fs.writes.Load())
	}
	crashed := mem.CrashClone(vfs.CrashOptions{})
	w.Close()
	checkReplay(t, crashed, segBytes, want)
}

// TestDirectRoundInPlace: a round of several MiB, following one that
// left the segment mid-block, is written with one direct write from its
// own buffer: no aligned copy of its entries is made, whatever its size,
// and what it wrote survives a crash.
func TestDirectRoundInPlace(t *testing.T) {
	mem := vfs.NewMem()
	fs := &dioFS{FS: mem}
	const segBytes = 16 << 20
	w, _ := open(t, fs, segBytes)
	h := w.For(key(0))
	want := batches(0, 3, 1) // the segment then ends mid-block
	pos, err := h.Append(0, 3, want)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(Pos(pos)); err != nil {
		t.Fatal(err)
	}
	next := int64(3)
	for len(want) < 6<<20 { // more than directMax
		b := batches(next, 2000, next)
		if pos, err = h.Append(next, next+2000, b); err != nil {
			t.Fatal(err)
		}
		next += 2000
		want = append(want, b...)
	}
	before := fs.writes.Load()
	if err := w.Sync(Pos(pos)); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if got := fs.writes.Load() - before; got != 1 || st.InPlace != 2 || st.DirectRounds != 2 {
		t.Fatalf("the large round took %d direct writes; stats %+v: want one, both rounds in place", got, st)
	}
	if w.dbuf != nil {
		t.Fatalf("an aligned buffer of %d bytes was made for copies", cap(w.dbuf))
	}
	crashed := mem.CrashClone(vfs.CrashOptions{})
	w.Close()
	checkReplay(t, crashed, segBytes, map[int32][]byte{0: want})
}
