package storage

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
)

// File name suffixes of a segment and its indexes.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	brokenSuffix    = ".broken"
	tmpSuffix       = ".tmp"
)

// noTimestamp marks a segment holding no batch yet.
const noTimestamp = math.MinInt64

// segmentName is base as 20 decimal digits, zero-padded (base >= 0).
func segmentName(base int64) string {
	if base < 0 {
		return fmt.Sprintf("%020d", base)
	}
	b := segmentDigits(base)
	return string(b[:])
}

// segmentDigits is base's 20 zero-padded decimal digits (base >= 0).
func segmentDigits(base int64) [20]byte {
	var b [20]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + base%10)
		base /= 10
	}
	return b
}

// segmentPath is filepath.Join(dir, segmentName(base)+logSuffix), the
// path of the segment file at base, built in one allocation when dir is
// clean already, as a partition's directory is: creating thousands of
// partitions builds one each.
func segmentPath(dir string, base int64) string {
	sep := string(filepath.Separator)
	if base < 0 || dir == "" || dir == "." || strings.HasSuffix(dir, sep) || filepath.Clean(dir) != dir {
		return filepath.Join(dir, segmentName(base)+logSuffix)
	}
	digits := segmentDigits(base)
	var b strings.Builder
	b.Grow(len(dir) + len(sep) + len(digits) + len(logSuffix))
	b.WriteString(dir)
	b.WriteString(sep)
	b.Write(digits[:])
	b.WriteString(logSuffix)
	return b.String()
}

// parseSegmentName returns the base offset of a "%020d.log" file name.
func parseSegmentName(name string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, logSuffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || base < 0 {
		return 0, false
	}
	return base, true
}

// offEntry is an offset-index entry: the batch starting at pos has base
// offset off.
type offEntry struct {
	off int64
	pos int64
}

// timeEntry is a time-index entry: every batch before pos has a max
// timestamp of at most ts.
type timeEntry struct {
	ts  int64
	pos int64
}

// segment is one segment file and its in-memory indexes.
//
// Concurrency: the fields marked "guarded by Log.mu" are changed by the
// writer with Log.mu held and read by readers under Log.mu.RLock; the
// index slices only grow, so a reader may keep a slice header taken under
// the lock and read its elements after unlocking. file is set once (with
// Config.WriteBehind, the active segment's is a *tailFile, wrapped at
// Open before any reader sees the segment).
// refs keeps file open while any reader is using it.
type segment struct {
	base int64
	path string // path of the .log file
	file vfs.File

	// refs counts users of file: one for the Log while the segment is in
	// its list, one per in-flight read. The last release closes file, so
	// retention never closes a file under a reader.
	refs atomic.Int32

	size     int64       // guarded by Log.mu: bytes of whole batches
	next     int64       // guarded by Log.mu: offset after the last batch
	maxTs    int64       // guarded by Log.mu: largest batch max timestamp, noTimestamp when empty
	maxTsOff int64       // guarded by Log.mu: base offset of the batch first reaching maxTs
	offIdx   []offEntry  // guarded by Log.mu (append-only)
	timeIdx  []timeEntry // guarded by Log.mu (append-only)
	synced   int64       // guarded by Log.mu: the first synced bytes (a prefix of size), known durable

	// Writer-only state.
	alloc     int64     // the file's length: size, plus zeros written ahead (Log.Preallocate) in the active segment
	sinceOff  int64     // bytes since the last offset-index entry
	sinceTime int64     // bytes since the last time-index entry
	created   time.Time // when the segment got its first batch in this process
}

func newSegment(dir string, base int64, f vfs.File) *segment {
	return newSegmentAt(segmentPath(dir, base), base, f)
}

// newSegmentAt is newSegment of the .log file at path.
func newSegmentAt(path string, base int64, f vfs.File) *segment {
	s := &segment{
		base:     base,
		path:     path,
		file:     f,
		next:     base,
		maxTs:    noTimestamp,
		maxTsOff: -1,
	}
	s.refs.Store(1)
	return s
}

func (s *segment) indexPath() string { return strings.TrimSuffix(s.path, logSuffix) + indexSuffix }
func (s *segment) timeIndexPath() string {
	return strings.TrimSuffix(s.path, logSuffix) + timeIndexSuffix
}

// acquire takes a reference for a read; false once the segment's file
// has been (or is being) closed.
func (s *segment) acquire() bool {
	for {
		r := s.refs.Load()
		if r <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// release drops a reference; the last one closes the file.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		_ = s.file.Close() // read-only use or already synced: nothing to lose
	}
}

// observe records the batch h stored at pos in the segment's indexes and
// summary fields. The caller holds Log.mu (or owns the segment alone, as
// during recovery).
func (s *segment) observe(h *batch.Header, pos int64, interval int64) {
	if pos > 0 && s.sinceOff >= interval {
		s.offIdx = append(s.offIdx, offEntry{off: h.BaseOffset, pos: pos})
		s.sinceOff = 0
	}
	if pos > 0 && s.sinceTime >= interval && s.maxTs != noTimestamp &&
		(len(s.timeIdx) == 0 || s.maxTs > s.timeIdx[len(s.timeIdx)-1].ts) {
		s.timeIdx = append(s.timeIdx, timeEntry{ts: s.maxTs, pos: pos})
		s.sinceTime = 0
	}
	size := int64(h.Size())
	s.sinceOff += size
	s.sinceTime += size
	if h.MaxTimestamp > s.maxTs {
		s.maxTs, s.maxTsOff = h.MaxTimestamp, h.BaseOffset
	}
	s.size = pos + size
	s.next = h.LastOffset() + 1
}

// posForOffset returns the position of the last indexed batch starting at
// or before off (0 when none is indexed): a batch holding off starts
// there or later.
func posForOffset(idx []offEntry, off int64) int64 {
	i := sort.Search(len(idx), func(i int) bool { return idx[i].off > off })
	if i == 0 {
		return 0
	}
	return idx[i-1].pos
}

// posForTime returns a position before which every batch has a max
// timestamp below ts.
func posForTime(idx []timeEntry, ts int64) int64 {
	i := sort.Search(len(idx), func(i int) bool { return idx[i].ts >= ts })
	if i == 0 {
		return 0
	}
	return idx[i-1].pos
}

// readHeader reads and parses the batch header at pos.
func readHeader(f vfs.File, pos int64, buf *[batch.HeaderSize]byte) (batch.Header, error) {
	if _, err := f.ReadAt(buf[:], pos); err != nil {
		return batch.Header{}, fmt.Errorf("storage: read batch header at %d: %w", pos, err)
	}
	return batch.ParseHeader(buf[:])
}
