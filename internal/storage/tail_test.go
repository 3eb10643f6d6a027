package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"syscall"
	"testing"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

// rawSize is the length of the active segment's file itself (under a
// write-behind tail), without flushing anything.
func rawSize(t *testing.T, l *Log) int64 {
	t.Helper()
	f := l.writerActive().file
	if tf, ok := f.(*tailFile); ok {
		f = tf.f
	}
	n, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// tailOf returns the active segment's write-behind file.
func tailOf(t *testing.T, l *Log) *tailFile {
	t.Helper()
	tf, ok := l.writerActive().file.(*tailFile)
	if !ok {
		t.Fatalf("active segment file is %T, want a write-behind tail", l.writerActive().file)
	}
	return tf
}

// TestWriteBehindReadsMatch appends the same batches to a log with
// write-behind and one without and, after every append, reads the
// active segment at every position and several lengths (across the
// boundary between the file and the tail), through Read, Slice.Bytes,
// Slice.WriteTo and ScanHeaders, comparing with the log without it.
func TestWriteBehindReadsMatch(t *testing.T) {
	pm, m := vfs.NewMem(), vfs.NewMem()
	cfg := Config{SegmentBytes: 6 << 10, IndexInterval: 300, Preallocate: -1}
	plain := mustOpen(t, pm, dir, cfg)
	defer plain.Close()
	cfg.WriteBehind = 1000
	wb := mustOpen(t, m, dir, cfg)
	defer wb.Close()

	rng := rand.New(rand.NewPCG(3, 4))
	next := int64(0)
	sawTail, sawFlush := false, false
	for i := 0; i < 80; i++ {
		// Mostly small batches, some larger than the tail's limit.
		size := rng.IntN(250)
		if rng.IntN(8) == 0 {
			size = 1000 + rng.IntN(1500)
		}
		b, n := storagetest.WithBaseOffset(storagetest.MakeBatch(1+rng.IntN(3), size, int64(i)), next)
		for _, l := range []*Log{plain, wb} {
			if err := l.Append(append([]byte(nil), b...), nil); err != nil {
				t.Fatal(err)
			}
		}
		next = n
		if rng.IntN(10) == 0 {
			if err := wb.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		tf := tailOf(t, wb)
		size64 := wb.writerActive().size
		if size64 != plain.writerActive().size {
			t.Fatalf("append %d: active sizes %d and %d", i, size64, plain.writerActive().size)
		}
		flushed := tf.flushedEnd()
		sawTail = sawTail || flushed < size64
		sawFlush = sawFlush || (flushed > 0 && flushed < size64)
		if raw := rawSize(t, wb); raw != flushed {
			t.Fatalf("append %d: file holds %d bytes, tail starts at %d", i, raw, flushed)
		}
		// Every position, lengths 1 and 13; to the end from every
		// 61st position and each one near the tail's start.
		pf := plain.writerActive().file
		for off := int64(0); off < size64; off++ {
			lens := []int64{1, 13}
			if off%61 == 0 || (off > flushed-20 && off < flushed+20) {
				lens = append(lens, size64-off)
			}
			for _, n := range lens {
				n = min(n, size64-off)
				want, got := make([]byte, n), make([]byte, n)
				if _, err := pf.ReadAt(want, off); err != nil {
					t.Fatal(err)
				}
				if k, err := tf.ReadAt(got, off); k != len(got) || err != nil {
					t.Fatalf("append %d: ReadAt(%d bytes at %d) = %d, %v (tail at %d of %d)", i, n, off, k, err, flushed, size64)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("append %d: %d bytes at %d differ (tail at %d of %d)", i, n, off, flushed, size64)
				}
			}
		}
		// Past the end: a short read with an error, as from a file.
		if k, err := tf.ReadAt(make([]byte, 10), size64-5); k != 5 || err == nil {
			t.Fatalf("append %d: read past the end = %d, %v; want 5 and an error", i, k, err)
		}
		compareLogs(t, plain, wb, fmt.Sprintf("append %d", i))
	}
	if !sawTail || !sawFlush {
		t.Fatalf("the workload never had bytes in the tail (%v) or a tail after flushed bytes (%v)", sawTail, sawFlush)
	}
	// Fewer, larger writes: the point of the tail.
	if w, p := m.Ops(vfs.OpWrite), pm.Ops(vfs.OpWrite); 4*w > 3*p {
		t.Fatalf("%d writes with write-behind, %d without", w, p)
	}
}

// compareLogs reads both logs from every offset with Read (Bytes and
// WriteTo) and ScanHeaders, and fails on any difference.
func compareLogs(t *testing.T, want, got *Log, what string) {
	t.Helper()
	end := want.NextOffset()
	if got.NextOffset() != end {
		t.Fatalf("%s: next offsets %d and %d", what, end, got.NextOffset())
	}
	for off := int64(0); off < end; off++ {
		for _, max := range []int{1, 700, 1 << 20} {
			ws, err := want.Read(off, end, max)
			if err != nil {
				t.Fatal(err)
			}
			gs, err := got.Read(off, end, max)
			if err != nil {
				t.Fatalf("%s: Read(%d): %v", what, off, err)
			}
			wb, _ := ws.Bytes()
			gb, err := gs.Bytes()
			if err != nil || !bytes.Equal(gb, wb) {
				t.Fatalf("%s: Read(%d, max %d).Bytes differ (%d and %d bytes, %v)", what, off, max, len(wb), len(gb), err)
			}
			var buf bytes.Buffer
			if n, err := gs.WriteTo(&buf); err != nil || n != int64(len(wb)) || !bytes.Equal(buf.Bytes(), wb) {
				t.Fatalf("%s: Read(%d, max %d).WriteTo: %d, %v", what, off, max, n, err)
			}
		}
	}
	var wh, gh []string
	_ = want.ScanHeaders(0, func(h batch.Header) error { wh = append(wh, fmt.Sprint(h)); return nil })
	if err := got.ScanHeaders(0, func(h batch.Header) error { gh = append(gh, fmt.Sprint(h)); return nil }); err != nil {
		t.Fatalf("%s: ScanHeaders: %v", what, err)
	}
	if fmt.Sprint(wh) != fmt.Sprint(gh) {
		t.Fatalf("%s: ScanHeaders differ: %d and %d headers", what, len(wh), len(gh))
	}
}

// TestWriteBehindSyncRollClose: Sync, Roll and Close write the tail to
// the file before they sync it, so a crash right after any of them
// keeps every byte appended before.
func TestWriteBehindSyncRollClose(t *testing.T) {
	cfg := Config{SegmentBytes: 4 << 10, Preallocate: -1, WriteBehind: 8 << 10}
	m := vfs.NewMem()
	l := mustOpen(t, m, dir, cfg)
	a := newAppender(t, l)
	a.add(2, 100, 1)
	a.add(1, 50, 2)
	if raw := rawSize(t, l); raw != 0 {
		t.Fatalf("the file holds %d bytes before any sync; want them in the tail", raw)
	}
	// A crash now loses the tail: nothing was synced.
	if c := mustOpen(t, m.CrashClone(vfs.CrashOptions{}), dir, cfg); c.NextOffset() != 0 {
		t.Fatalf("after a crash before any sync: next offset %d, want 0", c.NextOffset())
	} else {
		c.Close()
	}

	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if raw := rawSize(t, l); raw != int64(len(a.data)) {
		t.Fatalf("after Sync the file holds %d bytes, want %d", raw, len(a.data))
	}
	checkCrashImage(t, m, cfg, a.data, "after Sync")

	// Roll: appends that overflow the segment seal it; the sealed
	// segment's tail is in the file and synced.
	for l.Segments() < 2 {
		a.add(2, 300, 3)
	}
	if n := len(l.segs); n < 2 {
		t.Fatal("no roll")
	}
	sealed := l.segs[len(l.segs)-2]
	if tf, ok := sealed.file.(*tailFile); !ok || tf.flushedEnd() != sealed.size || tf.buf != nil {
		t.Fatalf("sealed segment: file %T, tail not flushed and released", sealed.file)
	}
	// Everything in sealed segments survives a crash (the active
	// segment's tail may not).
	var sealedBytes int64
	for _, s := range l.segs[:len(l.segs)-1] {
		sealedBytes += s.size
	}
	checkCrashImage(t, m, cfg, a.data[:sealedBytes], "after a roll")

	a.add(1, 10, 4)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkCrashImage(t, m, cfg, a.data, "after Close")
	if r := mustOpen(t, m, dir, cfg); !r.Recovery().Clean {
		t.Fatalf("reopen after Close: %+v, want a clean checkpoint", r.Recovery())
	} else {
		r.Close()
	}
}

// checkCrashImage opens a crash image of m and checks it holds at least
// durable, and only appended bytes.
func checkCrashImage(t *testing.T, m *vfs.MemFS, cfg Config, durable []byte, what string) {
	t.Helper()
	c := mustOpen(t, m.CrashClone(vfs.CrashOptions{}), dir, cfg)
	defer c.Close()
	got := readAll(t, c, 0)
	if len(got) < len(durable) || !bytes.Equal(got[:len(durable)], durable) {
		t.Fatalf("%s: crash image holds %d bytes, want the %d synced", what, len(got), len(durable))
	}
}

// TestWriteBehindConcurrentReaders reads the log from several goroutines
// while the writer appends (flushing as the tail fills) and another
// goroutine syncs, as the acceptor and the fetch path do; every read
// must return exactly the appended bytes (run with -race).
func TestWriteBehindConcurrentReaders(t *testing.T) {
	cfg := Config{SegmentBytes: 64 << 10, IndexInterval: 512, Preallocate: -1, WriteBehind: 2 << 10}
	l := mustOpen(t, vfs.NewMem(), dir, cfg)
	defer l.Close()

	// Every batch, built up front, and where each offset's batch starts.
	const batches = 400
	var data []byte
	posOf := map[int64]int{}
	bufs := make([][]byte, batches)
	next := int64(0)
	for i := range bufs {
		b, n := storagetest.WithBaseOffset(storagetest.MakeBatch(1+i%3, 20+i*37%400, int64(i)), next)
		for o := next; o < n; o++ {
			posOf[o] = len(data)
		}
		bufs[i], data, next = b, append(data, b...), n
	}

	done := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				end := l.NextOffset()
				if end == 0 {
					continue
				}
				off := end - 1 - int64(rng.IntN(int(min(end, 20))))
				s, err := l.Read(off, end, 1+rng.IntN(4000))
				if err != nil {
					errs <- err
					return
				}
				b, err := s.Bytes()
				if err != nil {
					errs <- err
					return
				}
				first, _ := s.Offsets()
				p := posOf[first]
				if !bytes.Equal(b, data[p:p+len(b)]) {
					errs <- fmt.Errorf("read at offset %d: %d bytes differ from those appended", off, len(b))
					return
				}
			}
		}()
	}
	syncStop := make(chan struct{})
	syncErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-syncStop:
				syncErr <- nil
				return
			default:
			}
			if err := l.Sync(); err != nil {
				syncErr <- err
				return
			}
		}
	}()
	for _, b := range bufs {
		if err := l.Append(b, nil); err != nil {
			t.Fatal(err)
		}
	}
	close(syncStop)
	if err := <-syncErr; err != nil {
		t.Fatal(err)
	}
	close(done)
	wg.Wait()
	for r := 0; r < 3; r++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, data) {
		t.Fatal("the log does not hold the appended bytes")
	}
}

// TestWriteBehindWriteToTCP sends a slice that spans the file and the
// tail over TCP: the part in the file goes with sendfile, the tail is
// copied after it.
func TestWriteBehindWriteToTCP(t *testing.T) {
	l := mustOpen(t, vfs.OS(), t.TempDir(), Config{Preallocate: -1, WriteBehind: 4 << 10})
	defer l.Close()
	a := newAppender(t, l)
	for i := 0; i < 10; i++ {
		a.add(2, 300, int64(i))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	flushed := int64(len(a.data))
	for i := 0; i < 5; i++ {
		a.add(1, 200, int64(20+i))
	}
	if tf := tailOf(t, l); tf.flushedEnd() != flushed {
		t.Fatalf("tail starts at %d, want %d", tf.flushedEnd(), flushed)
	}
	s, err := l.Read(0, l.NextOffset(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	c, got := tcpSink(t)
	before := sendfileBytes.Load()
	n, err := s.WriteTo(c)
	c.Close()
	if err != nil || n != int64(len(a.data)) {
		t.Fatalf("WriteTo = %d, %v; want %d", n, err, len(a.data))
	}
	if b := <-got; !bytes.Equal(b, a.data) {
		t.Fatalf("received %d bytes, want the %d appended", len(b), len(a.data))
	}
	if sent := sendfileBytes.Load() - before; runtime.GOOS == "linux" && sent != flushed {
		t.Fatalf("sendfile sent %d bytes, want the %d in the file", sent, flushed)
	}
}

// TestWriteBehindRecover: a log whose tail could not be written (a full
// disk) fails; Recover cuts it back to its last sync without writing
// the tail, and with keepUnsynced keeps the tail's whole appends.
func TestWriteBehindRecover(t *testing.T) {
	for _, keepUnsynced := range []bool{false, true} {
		t.Run(fmt.Sprint("keepUnsynced=", keepUnsynced), func(t *testing.T) {
			m := vfs.NewMem()
			cfg := Config{Preallocate: -1, WriteBehind: 1 << 10}
			l := mustOpen(t, m, dir, cfg)
			defer l.Close()
			a := newAppender(t, l)
			a.add(3, 50, 1)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			synced := append([]byte(nil), a.data...)
			a.add(2, 50, 2) // in the tail
			// The next append overflows the tail: its write fails.
			m.Inject(vfs.FailNth(vfs.OpWrite, m.Ops(vfs.OpWrite)+1, syscall.ENOSPC, false))
			b, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(2, 600, 3), a.next)
			if err := l.Append(b, nil); !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrFailed) {
				t.Fatalf("Append: %v, want ENOSPC", err)
			}
			// Readers still see what was appended before the failure.
			if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
				t.Fatal("after the failed write, reads differ from the appended bytes")
			}
			if err := l.Recover(keepUnsynced); err != nil {
				t.Fatal(err)
			}
			want := synced
			if keepUnsynced {
				want = a.data
			}
			if got := readAll(t, l, 0); !bytes.Equal(got, want) {
				t.Fatalf("after Recover: %d bytes, want %d", len(got), len(want))
			}
			checkCrashImage(t, m, cfg, want, "after Recover")
			// Appends continue at the log's end, through a tail again.
			a.data, a.next = append([]byte(nil), want...), l.NextOffset()
			a.add(1, 10, 9)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			checkCrashImage(t, m, cfg, a.data, "after appending again")
		})
	}
}

// TestWriteBehindWholeWrites: appends of about 60% of the tail's limit
// reach the file in writes of exactly the limit (the tail is filled with
// the first bytes of the append that overflows it), not one write per
// append; reads see every byte, and a failed write of the filled tail
// leaves nothing of the append buffered.
func TestWriteBehindWholeWrites(t *testing.T) {
	const limit = 1 << 10
	m := vfs.NewMem()
	l := mustOpen(t, m, dir, Config{Preallocate: -1, WriteBehind: limit})
	defer l.Close()
	a := newAppender(t, l)
	writes := func() int64 { return m.Ops(vfs.OpWrite) }
	before := writes()
	for i := range 20 {
		a.add(1, 540, int64(i)) // about 600 bytes
	}
	total := int64(len(a.data))
	if got, want := writes()-before, total/limit; got != want {
		t.Fatalf("%d bytes appended in %d file writes, want %d (whole tails)", total, got, want)
	}
	if got := rawSize(t, l); got != total/limit*limit {
		t.Fatalf("the file holds %d bytes, want %d (whole tails written, the rest buffered)", got, total/limit*limit)
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatal("reads differ from what was appended")
	}
	// The next append overflows the tail and its write fails: the log
	// fails, nothing of that append is readable, all before it is.
	m.Inject(vfs.FailNth(vfs.OpWrite, m.Ops(vfs.OpWrite)+1, syscall.EIO, false))
	tf := tailOf(t, l)
	buffered := len(tf.buf)
	b, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(1, limit-buffered, 99), a.next)
	if err := l.Append(b, nil); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Append: %v, want EIO", err)
	}
	if len(tf.buf) != buffered {
		t.Fatalf("after the failed write the tail buffers %d bytes, want the %d it had", len(tf.buf), buffered)
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatal("after the failed write reads differ from what was appended before it")
	}
}

// writeRecorder records the offset and length of every WriteAt to the
// file under a write-behind tail.
type writeRecorder struct {
	vfs.File
	writes [][2]int64 // offset, length
}

func (r *writeRecorder) WriteAt(p []byte, off int64) (int, error) {
	r.writes = append(r.writes, [2]int64{off, int64(len(p))})
	return r.File.WriteAt(p, off)
}

// TestWriteBehindPageWrites appends batches of many sizes under a 16 KiB
// tail, with Syncs between them that leave the tail's start inside a page
// (as the checkpoints do): every write the appends make ends on a page
// boundary and is at most the limit, only the first after a Sync starts
// inside a page, the bytes of the last partial page stay in the tail and
// read back, a batch larger than the limit after them leaves no gap in
// the file, and Sync writes the rest, which a reopened log reads whole.
func TestWriteBehindPageWrites(t *testing.T) {
	const limit = 16 << 10
	m := vfs.NewMem()
	cfg := Config{Preallocate: -1, WriteBehind: limit}
	l := mustOpen(t, m, dir, cfg)
	tf := tailOf(t, l)
	rec := &writeRecorder{File: tf.f}
	tf.f = rec
	a := newAppender(t, l)
	rng := rand.New(rand.NewPCG(5, 6))
	appends := 0
	for round := range 4 {
		if round > 0 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := rawSize(t, l); got%tailPage == 0 {
				t.Fatalf("round %d: the Sync left the file at %d bytes, a page boundary: the test needs a tail starting inside a page", round, got)
			}
		}
		rec.writes = rec.writes[:0]
		for range 100 {
			a.add(1+rng.IntN(3), 40+rng.IntN(1200), int64(appends))
			appends++
		}
		if len(rec.writes) < 5 {
			t.Fatalf("round %d: %d file writes", round, len(rec.writes))
		}
		for i, w := range rec.writes {
			if (w[0]+w[1])%tailPage != 0 || w[1] > limit || w[1] <= 0 {
				t.Fatalf("round %d: write %d at %d of %d bytes: want at most %d bytes ending on a %d-byte page boundary", round, i, w[0], w[1], limit, tailPage)
			}
			if i > 0 && w[0] != rec.writes[i-1][0]+rec.writes[i-1][1] {
				t.Fatalf("round %d: write %d at %d after one ending at %d", round, i, w[0], rec.writes[i-1][0]+rec.writes[i-1][1])
			}
			if i > 0 && w[0]%tailPage != 0 {
				t.Fatalf("round %d: write %d starts at %d, inside a page: the partial page was not carried", round, i, w[0])
			}
		}
		flushed := rawSize(t, l)
		if flushed%tailPage != 0 || int64(len(a.data))-flushed != int64(len(tf.buf)) || len(tf.buf) > limit {
			t.Fatalf("round %d: file %d bytes, tail %d, appended %d", round, flushed, len(tf.buf), len(a.data))
		}
		if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
			t.Fatalf("round %d: reads differ from what was appended", round)
		}
	}

	// A batch of more than the limit goes to the file directly, after the
	// tail's bytes.
	if len(tf.buf) == 0 {
		a.add(1, 100, 1000) // leave a partial page in the tail
	}
	a.add(1, 3*limit, 1001)
	if got := rawSize(t, l); got != int64(len(a.data)) {
		t.Fatalf("after a batch larger than the tail the file holds %d bytes, want %d", got, len(a.data))
	}
	a.add(2, 300, 1002)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := rawSize(t, l); got != int64(len(a.data)) {
		t.Fatalf("after Sync the file holds %d bytes, want %d", got, len(a.data))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, m, dir, cfg)
	defer l.Close()
	if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
		t.Fatal("the reopened log differs from what was appended")
	}
}

// heldFS counts the held calls (vfs.SyncHeld, vfs.WriteAtHeld) that
// reach its files, which pass them on as the ordinary calls.
type heldFS struct {
	vfs.FS
	syncs, writes, plainSyncs int
}

type heldFile struct {
	vfs.File
	fs *heldFS
}

func (h *heldFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &heldFile{File: f, fs: h}, nil
}

func (h *heldFS) Create(name string) (vfs.File, error) { return h.wrap(h.FS.Create(name)) }
func (h *heldFS) OpenRW(name string) (vfs.File, error) { return h.wrap(h.FS.OpenRW(name)) }
func (h *heldFS) Open(name string) (vfs.File, error)   { return h.wrap(h.FS.Open(name)) }

func (f *heldFile) Sync() error { f.fs.plainSyncs++; return f.File.Sync() }

func (f *heldFile) SyncHeld() (bool, error) { f.fs.syncs++; return true, f.File.Sync() }

func (f *heldFile) WriteAtHeld(p []byte, off int64) (int, bool, error) {
	f.fs.writes++
	n, err := f.File.WriteAt(p, off)
	return n, true, err
}

// TestSmallSyncHeld: a Sync of at most vfs.HoldMaxBytes writes the tail
// and fsyncs the segment the held way, through the write-behind tail and
// the lazily made file, and the bytes are durable; a larger one makes
// the ordinary calls.
func TestSmallSyncHeld(t *testing.T) {
	cfg := Config{SegmentBytes: 1 << 20, Preallocate: -1, WriteBehind: 64 << 10}
	m := vfs.NewMem()
	fs := &heldFS{FS: m}
	l := mustOpen(t, fs, dir, cfg)
	a := newAppender(t, l)
	a.add(1, 100, 1)
	if err := l.Sync(); err != nil { // the first: the file is made
		t.Fatal(err)
	}
	// syncAs syncs l and checks which calls reached the file.
	syncAs := func(what string, held int) {
		t.Helper()
		fs.syncs, fs.writes, fs.plainSyncs = 0, 0, 0
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		if fs.syncs != held || fs.writes != held || fs.plainSyncs != 1-held {
			t.Fatalf("%s: %d held syncs, %d held writes, %d ordinary syncs; want %d, %d, %d", what, fs.syncs, fs.writes, fs.plainSyncs, held, held, 1-held)
		}
		checkCrashImage(t, m, cfg, a.data, "after a "+what)
	}
	a.add(2, 100, 2)
	syncAs("small sync", 1)
	for range 3 {
		a.add(10, 1000, 3) // over 16 KiB unsynced
	}
	syncAs("large sync", 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
