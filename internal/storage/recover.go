package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
)

// RecoveryReport says what Open had to do.
type RecoveryReport struct {
	// Clean: a valid clean-shutdown checkpoint matched the directory, so
	// the active segment was not rescanned.
	Clean bool
	// Segments is the number of segments opened.
	Segments int
	// SegmentsScanned and BytesScanned count the batches Open read and
	// validated (CRC included) because no trusted index covered them.
	SegmentsScanned int
	BytesScanned    int64
	// IndexesRebuilt counts segments whose index files were missing,
	// corrupt or did not match the segment.
	IndexesRebuilt int
	// TruncatedBytes is the size of the torn tail cut off the last segment.
	TruncatedBytes int64
	// PreallocatedBytes is the size of the zeros written ahead of the
	// last segment's data (Log.Preallocate) that Open cut off after a
	// crash: not a torn write, nothing was lost there.
	PreallocatedBytes int64
	// FilesRemoved counts leftover temporary files and indexes without a
	// segment that Open deleted.
	FilesRemoved int
	// StartOffsetIgnored says why a log-start-offset file could not be
	// read ("" when it was read or absent); the first segment's base is
	// the start offset then.
	StartOffsetIgnored string
	// CompactionSwapRecovered: Open finished (or discarded) a compaction
	// swap a crash interrupted.
	CompactionSwapRecovered bool
	// CleanerCheckpointIgnored says why cleaner-checkpoint could not be
	// read; the next compaction pass starts from the log start then.
	CleanerCheckpointIgnored string
}

// scanChunk is how much recovery reads from a segment at once.
const scanChunk = 1 << 20

// Why a scan stopped before the end of a segment.
type stopKind int

const (
	stopIO        stopKind = iota // an I/O error: no verdict on the bytes
	stopTorn                      // the file ends inside a batch: a torn write if nothing valid follows
	stopInvalid                   // bad magic, length or CRC: torn only if nothing valid follows
	stopMisplaced                 // a valid batch with the wrong offset: never a torn write
)

var errMisplaced = errors.New("storage: batch offset does not continue the log")

// window reads a segment file through a sliding buffer.
type window struct {
	f    vfs.File
	size int64
	pos  int64 // file position of buf[0]
	buf  []byte
	back []byte
}

// bytes returns the file's bytes [pos, pos+n); the caller ensures
// pos+n <= size.
func (w *window) bytes(pos int64, n int) ([]byte, error) {
	if pos >= w.pos && pos+int64(n) <= w.pos+int64(len(w.buf)) {
		return w.buf[pos-w.pos:][:n], nil
	}
	want := int64(max(n, scanChunk))
	want = min(want, w.size-pos)
	if int64(cap(w.back)) < want {
		w.back = make([]byte, want)
	}
	b := w.back[:want]
	if k, err := w.f.ReadAt(b, pos); k < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		w.buf = nil
		return nil, fmt.Errorf("storage: read at %d: %w", pos, err)
	}
	w.buf, w.pos = b, pos
	return w.buf[:n], nil
}

// scan validates the batches of s from position from to the window's end,
// recording each in s. It returns the position where it stopped and, if
// that is before the end, why. gaps allows a batch to start past the
// previous one's end, as in a sealed segment that compaction rewrote; in
// the active segment offsets must be contiguous.
func scan(s *segment, w *window, from int64, interval int64, gaps bool) (int64, stopKind, error) {
	pos := from
	for pos < w.size {
		if w.size-pos < batch.HeaderSize {
			return pos, stopTorn, batch.ErrShort
		}
		hb, err := w.bytes(pos, batch.HeaderSize)
		if err != nil {
			return pos, stopIO, err
		}
		h, err := batch.ParseHeader(hb)
		if err != nil {
			return pos, stopInvalid, err
		}
		if h.Magic != 2 {
			return pos, stopInvalid, fmt.Errorf("%w: magic %d", batch.ErrBadMagic, h.Magic)
		}
		if int64(h.Size()) > w.size-pos {
			return pos, stopTorn, fmt.Errorf("%w: batch of %d bytes, %d left in the file", batch.ErrShort, h.Size(), w.size-pos)
		}
		b, err := w.bytes(pos, h.Size())
		if err != nil {
			return pos, stopIO, err
		}
		if h, err = batch.Validate(b); err != nil {
			return pos, stopInvalid, err
		}
		if h.BaseOffset < s.next || (h.BaseOffset > s.next && !gaps) || h.LastOffsetDelta < 0 || h.LastOffset()-s.base > math.MaxUint32 {
			return pos, stopMisplaced, fmt.Errorf("%w: batch %d..%d where offset %d was expected",
				errMisplaced, h.BaseOffset, h.LastOffset(), s.next)
		}
		s.observe(&h, pos, interval)
		pos += int64(h.Size())
	}
	return pos, 0, nil
}

// allZero reports whether every byte from position from to the window's
// end is zero: zeros written ahead of the data, not a torn write.
func allZero(w *window, from int64) (bool, error) {
	for pos := from; pos < w.size; {
		b, err := w.bytes(pos, int(min(w.size-pos, scanChunk)))
		if err != nil {
			return false, err
		}
		for _, c := range b {
			if c != 0 {
				return false, nil
			}
		}
		pos += int64(len(b))
	}
	return true, nil
}

// validAfter reports whether a valid batch that could belong after offset
// next (its base offset is greater) starts anywhere after position from.
func validAfter(w *window, from int64, next int64) (bool, error) {
	for q := from + 1; q+batch.HeaderSize <= w.size; q++ {
		hb, err := w.bytes(q, batch.HeaderSize)
		if err != nil {
			return false, err
		}
		if hb[16] != 2 {
			continue
		}
		h, err := batch.ParseHeader(hb)
		if err != nil || int64(h.Size()) > w.size-q {
			continue
		}
		b, err := w.bytes(q, h.Size())
		if err != nil {
			return false, err
		}
		if _, err := batch.Validate(b); err == nil && h.BaseOffset > next {
			return true, nil
		}
	}
	return false, nil
}

// Open opens or creates the log in dir, recovering it: after a clean
// Close it trusts the checkpoint; otherwise it validates the unverified
// tail, truncates a torn tail, rebuilds missing or corrupt indexes, and
// returns a *CorruptionError if invalid bytes are followed by valid data.
func Open(fs vfs.FS, dir string, cfg Config) (*Log, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// A new log's directory is synced into its parent (and so on up),
	// or a power cut could take the log with every fsynced byte in it.
	if err := vfs.MkdirAllDurable(fs, dir); err != nil {
		return nil, fmt.Errorf("storage: create %s: %w", dir, err)
	}
	swapped, err := recoverSwap(fs, dir)
	if err != nil {
		return nil, err
	}
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: list %s: %w", dir, err)
	}
	l := &Log{fs: fs, dir: dir, cfg: cfg}
	l.report.CompactionSwapRecovered = swapped
	r := &l.report
	dirty := false // a directory entry changed and needs SyncDir

	have := map[string]bool{}
	var bases []int64
	for _, n := range names {
		have[n] = true
		if base, ok := parseSegmentName(n); ok {
			bases = append(bases, base)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	for _, n := range names {
		stem := strings.TrimSuffix(strings.TrimSuffix(n, indexSuffix), timeIndexSuffix)
		orphan := stem != n && !have[stem+logSuffix]
		if strings.HasSuffix(n, tmpSuffix) || orphan {
			if err := fs.Remove(filepath.Join(dir, n)); err != nil {
				return nil, fmt.Errorf("storage: remove leftover %s: %w", n, err)
			}
			r.FilesRemoved++
			dirty = true
		}
	}

	var cp *checkpoint
	zeroCP, cpSize := false, int64(0) // the checkpoint file needs zeroing (valid, or unreadable), and how many bytes
	if have[checkpointName] {
		b, err := vfs.ReadFile(fs, filepath.Join(dir, checkpointName))
		if err == nil {
			if c, err := decodeCheckpoint(b); err == nil {
				cp = &c
			}
		}
		zeroCP, cpSize = err != nil || cp != nil, int64(len(b))
		if err != nil {
			cpSize = checkpointSize // unreadable: zeroed to be sure
		}
	}

	fail := func(err error) (*Log, error) {
		for _, s := range l.segs {
			s.release()
		}
		return nil, err
	}
	if len(bases) == 0 {
		s, err := l.createSegment(0)
		if err != nil {
			return fail(err)
		}
		l.segs = []*segment{s}
		dirty = true
	}
	for i, base := range bases {
		if i > 0 && base < l.segs[i-1].next { // compaction may leave a gap, never an overlap
			prev := l.segs[i-1]
			return fail(&CorruptionError{
				Segment: filepath.Join(dir, segmentName(base)+logSuffix), Offset: prev.next,
				Err: fmt.Errorf("%w: segment starts at offset %d but %s ends at %d", errMisplaced, base, prev.path, prev.next),
			})
		}
		s, changed, err := l.recoverSegment(base, i == len(bases)-1, cp)
		if err != nil {
			return fail(err)
		}
		dirty = dirty || changed
		l.segs = append(l.segs, s)
	}
	r.Segments = len(l.segs)
	l.loadStartOffset()
	l.loadCleanMarks()

	// The checkpoint is made invalid before any write: if this process
	// crashes, the next Open must not trust it. It is zeroed in place (no
	// directory change), so that the next clean close writes over the
	// same file, and synced later: by SyncCheckpoints, for many logs in
	// one filesystem sync, or by the log's first Sync that writes
	// anything. One that is invalid already is left: an earlier Open
	// zeroed it (or a crash tore its write). Until the zeroing is
	// durable a checkpoint that comes back names the active segment's
	// exact size at that clean close, which the segment then still has
	// only if nothing past it became durable (bytes below it never
	// change), so it is right.
	if zeroCP {
		f, err := invalidateCheckpoint(fs, dir, cpSize)
		if err != nil {
			return fail(fmt.Errorf("storage: invalidate checkpoint: %w", err))
		}
		l.cpZeroed = f
	}
	// After a clean shutdown every byte is durable: the close synced
	// them before it wrote the checkpoint.
	l.durable.Store(r.Clean)
	if dirty {
		if err := fs.SyncDir(dir); err != nil {
			return fail(fmt.Errorf("storage: sync directory %s: %w", dir, err))
		}
	}
	a := l.active()
	if a.size > 0 {
		a.created = cfg.Now()
	}
	a.alloc = a.size // recovery cut anything after the data
	if cfg.WriteBehind > 0 {
		a.file = newTailFile(a.file, a.size, cfg.WriteBehind) // no reader has the segment yet
	}
	// What recovery accepted is the log; the acceptor's first Sync makes
	// it durable, and Recover keeps it.
	a.synced = a.size
	if r.TruncatedBytes > 0 {
		cfg.Logger.Warn("storage: cut a torn tail off the log", "dir", dir, "bytes", r.TruncatedBytes, "segment", a.path)
	}
	return l, nil
}

// Create makes a new, empty log in dir, which must not exist yet (its
// parent must). It touches no file: dir and the first segment are made
// by Prepare, or by the first write, and their directory entries become
// durable with the first Sync that has bytes to make durable (dir's
// entry in its parent, the segment's in dir). A power cut before that
// loses only an empty log, which Open makes again.
func Create(fs vfs.FS, dir string, cfg Config) (*Log, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Log{fs: fs, dir: dir, cfg: cfg}
	path := segmentPath(dir, 0)
	l.lazy = &lazyFile{fs: fs, dir: dir, path: path}
	if cfg.WriteBehind > 0 {
		l.lazy.pendMax, l.lazy.onPending, l.lazy.budget = pendMax, cfg.OnPending, cfg.Pending
	}
	var f vfs.File = l.lazy
	if cfg.WriteBehind > 0 {
		f = newTailFile(f, 0, cfg.WriteBehind)
	}
	s := newSegmentAt(path, 0, f)
	l.segs = []*segment{s}
	l.report.Segments = 1
	l.report.Clean = true
	l.dirPending.Store(true)
	return l, nil
}

// createSegment creates an empty segment file at base. The caller syncs
// the directory.
func (l *Log) createSegment(base int64) (*segment, error) {
	path := segmentPath(l.dir, base)
	f, err := l.fs.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", path, err)
	}
	if l.cfg.WriteBehind > 0 {
		f = newTailFile(f, 0, l.cfg.WriteBehind)
	}
	return newSegmentAt(path, base, f), nil
}

// recoverSegment opens the segment at base and brings its indexes up to
// date, scanning whatever no trusted index covers. changed reports a
// directory change (a rewritten or removed index) that needs SyncDir.
func (l *Log) recoverSegment(base int64, last bool, cp *checkpoint) (_ *segment, changed bool, err error) {
	path := segmentPath(l.dir, base)
	var f vfs.File
	if last {
		f, err = l.fs.OpenRW(path)
	} else {
		f, err = l.fs.Open(path)
	}
	if err != nil {
		return nil, false, fmt.Errorf("storage: open segment: %w", err)
	}
	s := newSegment(l.dir, base, f)
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	size, err := f.Size()
	if err != nil {
		return nil, false, fmt.Errorf("storage: size of %s: %w", path, err)
	}
	interval := int64(l.cfg.IndexInterval)
	r := &l.report

	sum, offs, times, ok := loadIndexes(l.fs, s)
	ok = ok && sum.covered <= size && !l.cfg.verify
	if !ok {
		r.IndexesRebuilt++
	}
	clean := last && ok && cp != nil && cp.activeBase == base && cp.activeSize == size &&
		sum.covered == size && sum.next == cp.next
	if last {
		r.Clean = clean
	}
	// Bytes an index covers were synced before it was written, so a
	// sealed segment's index is trusted. The active segment's index is
	// trusted only on a clean restart; after a crash it is rescanned whole.
	from := int64(0)
	if ok && (!last || clean) {
		s.size, s.next, s.maxTs, s.maxTsOff = sum.covered, sum.next, sum.maxTs, sum.maxTsOff
		s.offIdx, s.timeIdx = offs, times
		s.sinceOff, s.sinceTime = sum.covered, sum.covered
		if len(offs) > 0 {
			s.sinceOff = sum.covered - offs[len(offs)-1].pos
		}
		if len(times) > 0 {
			s.sinceTime = sum.covered - times[len(times)-1].pos
		}
		from = sum.covered
	}
	if from == size {
		return s, false, nil
	}

	w := &window{f: f, size: size}
	end, kind, cause := scan(s, w, from, interval, !last)
	r.SegmentsScanned++
	r.BytesScanned += end - from
	if cause != nil {
		// A length running past the end of the file is what a torn write
		// looks like, but a corrupted length field looks the same: it is
		// torn only if no valid batch follows, as for other invalid bytes.
		torn := false
		if kind == stopTorn || kind == stopInvalid {
			follows, err := validAfter(w, end, s.next)
			if err != nil {
				return nil, false, fmt.Errorf("storage: recover %s: %w", path, err)
			}
			torn = !follows
		}
		if !last || !torn || kind == stopIO {
			if kind == stopIO {
				return nil, false, fmt.Errorf("storage: recover %s: %w", path, cause)
			}
			ce := &CorruptionError{Segment: path, Offset: s.next, Position: end, Err: cause}
			if !l.cfg.noCopy {
				ce.Broken = l.copyAside(path, size)
			}
			return nil, false, ce
		}
		// A torn tail: the end of a write that never completed, or zeros
		// written ahead of the data (Log.Preallocate). Nothing after it
		// was acknowledged as durable, so it is cut off.
		zero, err := allZero(w, end)
		if err != nil {
			return nil, false, fmt.Errorf("storage: recover %s: %w", path, err)
		}
		if err := f.Truncate(end); err != nil {
			return nil, false, fmt.Errorf("storage: truncate torn tail of %s at %d: %w", path, end, err)
		}
		if err := f.Sync(); err != nil {
			return nil, false, fmt.Errorf("storage: sync %s after truncation: %w", path, err)
		}
		if zero {
			r.PreallocatedBytes += size - end
		} else {
			r.TruncatedBytes += size - end
		}
		for _, p := range []string{s.indexPath(), s.timeIndexPath()} {
			if err := l.fs.Remove(p); err == nil {
				changed = true
			} else if !errors.Is(err, os.ErrNotExist) {
				return nil, false, fmt.Errorf("storage: remove stale index %s: %w", p, err)
			}
		}
	}
	if !last {
		if err := writeIndexes(l.fs, s); err != nil {
			return nil, false, fmt.Errorf("storage: %w", err)
		}
		changed = true
	}
	return s, changed, nil
}

// copyAside copies a corrupt segment to <name>.broken, synced, and
// returns the copy's path ("" if copying failed: the original stays
// where it is either way).
func (l *Log) copyAside(path string, size int64) string {
	dst := path + brokenSuffix
	if err := l.fs.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return ""
	}
	src, err := l.fs.Open(path)
	if err != nil {
		return ""
	}
	defer src.Close()
	out, err := l.fs.Create(dst)
	if err != nil {
		return ""
	}
	buf := make([]byte, min(size, scanChunk))
	for pos := int64(0); pos < size; {
		n, err := src.ReadAt(buf[:min(int64(len(buf)), size-pos)], pos)
		if n > 0 {
			if _, werr := out.Write(buf[:n]); werr != nil {
				out.Close()
				return ""
			}
			pos += int64(n)
		}
		if err != nil && (!errors.Is(err, io.EOF) || pos < size) {
			out.Close()
			return ""
		}
	}
	if out.Sync() != nil || out.Close() != nil || l.fs.SyncDir(l.dir) != nil {
		return ""
	}
	return dst
}
