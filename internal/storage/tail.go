package storage

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicedb/sluice/internal/vfs"
)

// tailFile is the active segment's file with write-behind
// (Config.WriteBehind): Log.Append's bytes go into an in-memory buffer,
// the tail, which reaches the file in one write once it holds the
// configured number of bytes (its whole pages: see append), and before
// anything else touches the file:
// Sync, Truncate, WriteAt (Preallocate's zeros), Write and Size flush it
// first. ReadAt serves the file and the tail together, so every reader
// that goes through the segment's file (fetch, Slice.Bytes, ScanHeaders,
// compaction, recovery's scans) sees the bytes Append published whether
// or not they were flushed; Slice.WriteTo sends from the file only the
// bytes below flushedEnd.
//
// Close drops an unflushed tail: the log flushes and syncs it on a clean
// close, and a log that failed is cut back to its own last sync at the
// next Open anyway (the write-ahead log that made the bytes durable
// refills them).
//
// Concurrency: the log's writer appends and truncates; Log.Sync flushes
// from a second goroutine; any number of readers read. A sealed
// segment's tailFile holds no tail and readers go straight to the file.
type tailFile struct {
	f     vfs.File
	limit int // flush once the tail would pass this many bytes

	// start is the file position of the tail's first byte: the file
	// holds the segment's bytes below it. Written under mu, read without
	// it by readers that want only bytes below it.
	start atomic.Int64

	mu  sync.Mutex // guards buf and every write to f (held across the flush write; never with Log.mu or Log.failMu)
	buf []byte     // the tail: bytes [start, start+len(buf)), not yet written to f; nil when empty
}

// tailBufs holds the tails' buffers (*[]byte) while no segment uses
// them, so that an idle partition (flushed by a checkpoint) holds none.
// A buffer of another capacity than the taker's limit is dropped.
var tailBufs sync.Pool

// newTailFile wraps f, whose first size bytes are the segment's data,
// for write-behind of up to limit bytes. A file already wrapped is
// returned as is.
func newTailFile(f vfs.File, size int64, limit int) *tailFile {
	if t, ok := f.(*tailFile); ok {
		return t
	}
	t := &tailFile{f: f, limit: limit}
	t.start.Store(size)
	return t
}

// flushedEnd is the position below which every byte is in the file.
func (t *tailFile) flushedEnd() int64 { return t.start.Load() }

// append writes p at off, the end of the segment's data, into the tail.
// When p would carry the tail past the limit, the tail is filled to the
// limit with p's first bytes and written to the file up to its last page
// boundary (flushWhole), and the bytes of its last, partial page and the
// rest of p start the next tail, so that the file gets limit-sized
// writes that end on a page boundary whatever the appends' sizes; p is
// written directly when it is at least the limit (kept by reference when
// sh is set and the file is a new log's not made yet: lazyFile). On
// error nothing of p is buffered.
func (t *tailFile) append(p []byte, off int64, sh *Shared) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if end := t.start.Load() + int64(len(t.buf)); off != end {
		// Not at the end of the tail (the file was cut): the tail
		// restarts at off.
		if err := t.flushLocked(); err != nil {
			return err
		}
		t.start.Store(off)
	}
	if len(t.buf)+len(p) > t.limit {
		had := len(t.buf)
		if had > 0 && len(p) < t.limit {
			k := t.limit - had
			t.buf = append(t.buf, p[:k]...)
			p, off = p[k:], off+int64(k)
		}
		if err := t.flushWhole(len(p)); err != nil {
			t.buf = t.buf[:had] // nothing of p stays buffered
			return err
		}
	}
	if len(p) >= t.limit {
		var n int
		var err error
		if z, ok := t.f.(*lazyFile); ok && sh != nil {
			n, err = z.write(p, off, sh)
		} else {
			n, err = t.f.WriteAt(p, off)
		}
		if err == nil && n != len(p) {
			err = fmt.Errorf("short write: %d of %d bytes", n, len(p))
		}
		if err != nil {
			return err
		}
		t.start.Store(off + int64(len(p)))
		return nil
	}
	if t.buf == nil {
		t.buf = t.getBuf()
	}
	t.buf = append(t.buf, p...)
	return nil
}

func (t *tailFile) getBuf() []byte {
	if b, ok := tailBufs.Get().(*[]byte); ok && cap(*b) == t.limit {
		return (*b)[:0]
	}
	return make([]byte, 0, t.limit)
}

// flushWhole writes the tail up to its last page boundary in the file
// and keeps the bytes past it, those of a partial page, as the start of
// the next tail, when they and the next bytes to append (next) fit in
// it; otherwise it writes the whole tail (flushLocked). On error nothing
// changes.
//
// A write that ends inside a page leaves that page partly written: the
// kernel fills the rest of a new page with zeros, writes it back partial
// and, when the next write completes it, dirties it again (waiting for
// it if its writeback is under way) and writes it back a second time.
// Writes that end on a page boundary fill each page of the segment once
// and write it back once: a third less kernel CPU per byte written, with
// fsyncs between the writes as the checkpoints make
// (docs/perf/2026-12-07-tail-pages.md).
func (t *tailFile) flushWhole(next int) error {
	start := t.start.Load()
	cut := (start + int64(len(t.buf))) &^ (tailPage - 1)
	k := int(cut - start)
	if k <= 0 || len(t.buf)-k+next > t.limit {
		return t.flushLocked()
	}
	n, err := t.f.WriteAt(t.buf[:k], start)
	if err == nil && n != k {
		err = fmt.Errorf("short write: %d of %d bytes", n, k)
	}
	if err != nil {
		return err
	}
	t.buf = t.buf[:copy(t.buf, t.buf[k:])]
	t.start.Store(cut)
	return nil
}

// tailPage is the page size the tails' writes end on: the smallest the
// kernel's page cache uses (a larger page's boundaries are among its).
const tailPage = 4096

// flushLocked writes the tail to the file. On error the tail is kept
// (the caller fails the log; Truncate or Close drop it). The caller holds
// mu.
func (t *tailFile) flushLocked() error { return t.flushTail(false) }

// flushTail is flushLocked, its write made with vfs.WriteAtHeld when held
// is set (SyncHeld). The caller holds mu.
func (t *tailFile) flushTail(held bool) error {
	if len(t.buf) == 0 {
		return nil
	}
	start := t.start.Load()
	var n int
	var err error
	if held {
		n, _, err = vfs.WriteAtHeld(t.f, t.buf, start)
	} else {
		n, err = t.f.WriteAt(t.buf, start)
	}
	if err == nil && n != len(t.buf) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(t.buf))
	}
	if err != nil {
		return err
	}
	t.start.Store(start + int64(len(t.buf)))
	t.dropLocked()
	return nil
}

// dropLocked forgets the tail and hands its buffer back. The caller
// holds mu.
func (t *tailFile) dropLocked() {
	if t.buf != nil {
		b := t.buf[:0]
		tailBufs.Put(&b)
		t.buf = nil
	}
}

// flush writes the tail to the file.
func (t *tailFile) flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.flushLocked()
}

// ReadAt reads bytes of the file and the tail together.
func (t *tailFile) ReadAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if end <= t.start.Load() {
		return t.f.ReadAt(p, off)
	}
	t.mu.Lock()
	s := t.start.Load()
	e := s + int64(len(t.buf))
	if lo, hi := max(off, s), min(end, e); lo < hi {
		copy(p[lo-off:hi-off], t.buf[lo-s:hi-s])
	}
	t.mu.Unlock()
	// The file's bytes below s do not change while readers read them
	// (only a Truncate cuts them, as without a tail).
	if off < s {
		want := min(end, s) - off
		if k, err := t.f.ReadAt(p[:want], off); int64(k) < want {
			return k, err
		}
	}
	if end <= e {
		return len(p), nil
	}
	from := max(off, e) // past the tail: whatever the file holds there
	k, err := t.f.ReadAt(p[from-off:], from)
	return int(from-off) + k, err
}

// WriteAt flushes the tail, then writes p at off in the file.
func (t *tailFile) WriteAt(p []byte, off int64) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.flushLocked(); err != nil {
		return 0, err
	}
	return t.f.WriteAt(p, off)
}

// Write flushes the tail, then appends p to the file.
func (t *tailFile) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.flushLocked(); err != nil {
		return 0, err
	}
	return t.f.Write(p)
}

// Sync flushes the tail and fsyncs the file. The fsync runs outside mu,
// so the writer keeps appending to a new tail meanwhile.
func (t *tailFile) Sync() error {
	if err := t.flush(); err != nil {
		return err
	}
	return t.f.Sync()
}

// SyncHeld is Sync with the tail's write and the fsync made the held way
// (vfs.SyncHeld), for a small sync its caller waits for on the latency
// path (Log.Sync). It reports whether the fsync held its processor.
func (t *tailFile) SyncHeld() (bool, error) {
	t.mu.Lock()
	err := t.flushTail(true)
	t.mu.Unlock()
	if err != nil {
		return false, err
	}
	return vfs.SyncHeld(t.f)
}

// WriteAtHeld is WriteAt (vfs.HeldFile); only SyncHeld holds.
func (t *tailFile) WriteAtHeld(p []byte, off int64) (int, bool, error) {
	n, err := t.WriteAt(p, off)
	return n, false, err
}

// syncFlushed fsyncs the bytes already in the file, leaving the tail in
// memory.
func (t *tailFile) syncFlushed() error { return t.f.Sync() }

// Truncate cuts the segment to size bytes: the tail's bytes past it are
// dropped, the rest is flushed, and the file is cut.
func (t *tailFile) Truncate(size int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.start.Load()
	if size <= s {
		t.dropLocked()
	} else if keep := size - s; keep < int64(len(t.buf)) {
		t.buf = t.buf[:keep]
	}
	if err := t.flushLocked(); err != nil {
		return err
	}
	if err := t.f.Truncate(size); err != nil {
		return err
	}
	if t.start.Load() > size {
		t.start.Store(size)
	}
	return nil
}

// Size flushes the tail and returns the file's length.
func (t *tailFile) Size() (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.flushLocked(); err != nil {
		return 0, err
	}
	return t.f.Size()
}

// Close closes the file, dropping an unflushed tail (see tailFile).
func (t *tailFile) Close() error {
	t.mu.Lock()
	t.dropLocked()
	t.mu.Unlock()
	return t.f.Close()
}

// release hands the buffer back once the segment is sealed (flushed).
func (t *tailFile) release() {
	t.mu.Lock()
	if len(t.buf) == 0 {
		t.dropLocked()
	}
	t.mu.Unlock()
}
