package storage

import (
	"fmt"
	"io"
	"net"
	"sort"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
)

// Read returns whole batches starting with the batch that holds offset,
// none at or past limit (exclusive; the caller passes the high
// watermark), at most maxBytes but always at least one whole batch if one
// exists below limit. An offset below StartOffset or past NextOffset gives
// ErrOffsetOutOfRange; offset == NextOffset (or >= limit) gives an empty
// Slice. The slice never crosses a segment boundary: a reader at the end
// of a segment reads again from the next offset.
func (l *Log) Read(offset, limit int64, maxBytes int) (Slice, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return Slice{}, ErrClosed
	}
	start, end := l.startLocked(), l.active().next
	if offset < start || offset > end {
		l.mu.RUnlock()
		return Slice{}, fmt.Errorf("%w: offset %d, log holds [%d, %d)", ErrOffsetOutOfRange, offset, start, end)
	}
	if offset == end || offset >= limit {
		l.mu.RUnlock()
		return Slice{}, nil
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	for i < len(l.segs)-1 && (offset >= l.segs[i].next || l.segs[i].size == 0) {
		i++ // offset lies in a gap compaction left after (or as) a sealed segment
	}
	s := l.segs[i]
	size, next, idx := s.size, s.next, s.offIdx
	s.acquire() // the log's own reference is held, so this succeeds
	l.mu.RUnlock()
	defer s.release()

	if offset >= next || size == 0 {
		return Slice{}, nil // at the end, or in a gap compaction left before an empty active segment
	}
	var hb [batch.HeaderSize]byte
	pos := posForOffset(idx, offset)
	var firstOff int64
	for {
		if pos >= size {
			return Slice{}, fmt.Errorf("storage: %s: offset %d not found below byte %d", s.path, offset, size)
		}
		h, err := readHeader(s.file, pos, &hb)
		if err != nil {
			return Slice{}, err
		}
		if h.LastOffset() >= offset {
			firstOff = h.BaseOffset
			break
		}
		pos += int64(h.Size())
	}
	first := pos
	endOff := firstOff // the offset after the batches up to endPos

	// Jump over whole batches with the index: the furthest known batch
	// boundary within maxBytes whose batches before it are all below limit.
	endPos := first
	if next <= limit && size-first <= int64(maxBytes) {
		endPos, endOff = size, next
	} else {
		i := sort.Search(len(idx), func(i int) bool {
			return idx[i].pos-first > int64(maxBytes) || idx[i].off > limit
		})
		if i > 0 && idx[i-1].pos > first {
			endPos, endOff = idx[i-1].pos, idx[i-1].off
		}
	}
	// Then walk headers to the last whole batch that fits.
	for endPos < size {
		h, err := readHeader(s.file, endPos, &hb)
		if err != nil {
			return Slice{}, err
		}
		if h.LastOffset() >= limit || (endPos > first && endPos+int64(h.Size())-first > int64(maxBytes)) {
			break
		}
		endPos += int64(h.Size())
		endOff = h.LastOffset() + 1
	}
	return Slice{seg: s, pos: first, n: endPos - first, first: firstOff, next: endOff}, nil
}

// Slice is a region of one segment file holding whole batches. It stays
// readable until retention or Close removes its segment; after that its
// methods return an error matching ErrOffsetOutOfRange.
type Slice struct {
	seg   *segment
	pos   int64
	n     int64
	first int64 // base offset of the first batch
	next  int64 // the offset after the last batch
}

// Offsets returns the base offset of the slice's first batch and the
// offset after its last batch (equal for an empty slice), so that
// next-first is the number of offsets the slice covers.
func (s Slice) Offsets() (first, next int64) { return s.first, s.next }

// Len is the number of bytes in the slice.
func (s Slice) Len() int { return int(s.n) }

// Bytes reads the slice into memory.
func (s Slice) Bytes() ([]byte, error) {
	if s.n == 0 {
		return nil, nil
	}
	if !s.seg.acquire() {
		return nil, errSliceGone
	}
	defer s.seg.release()
	b := make([]byte, s.n)
	if k, err := s.seg.file.ReadAt(b, s.pos); k < len(b) {
		return nil, fmt.Errorf("storage: read %s at %d: %w", s.seg.path, s.pos, err)
	}
	return b, nil
}

// WriteTo copies the slice to w, with sendfile when w is a TCP connection
// and the segment is an OS file (the file position is never used, so
// concurrent readers of one segment do not interfere), and with a
// positional-read copy otherwise. Bytes still in the active segment's
// write-behind tail (Config.WriteBehind) are copied from memory after
// the part the file holds is sent.
func (s Slice) WriteTo(w io.Writer) (int64, error) {
	if s.n == 0 {
		return 0, nil
	}
	if !s.seg.acquire() {
		return 0, errSliceGone
	}
	defer s.seg.release()
	var sent int64
	if tc, ok := w.(*net.TCPConn); ok {
		f, inFile := s.seg.file, s.n
		if t, ok := f.(*tailFile); ok {
			f, inFile = t.f, min(s.n, max(0, t.flushedEnd()-s.pos))
		}
		if z, ok := f.(*lazyFile); ok {
			f = z.made()
		}
		if of, ok := f.(vfs.OSFile); ok && inFile > 0 {
			n, handled, err := sendfile(tc, of.OS(), s.pos, inFile)
			if handled {
				if err != nil || n == s.n {
					return n, err
				}
				sent = n
			}
		}
	}
	rest := s.n - sent
	n, err := io.CopyBuffer(w, io.NewSectionReader(s.seg.file, s.pos+sent, rest), make([]byte, min(rest, 64<<10)))
	if err == nil && n < rest {
		err = io.ErrUnexpectedEOF
	}
	return sent + n, err
}

// OffsetForTime returns the offset of the first batch whose max timestamp
// is >= ts, or NextOffset() if none.
func (l *Log) OffsetForTime(ts int64) (int64, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, ErrClosed
	}
	var s *segment
	for _, c := range l.segs {
		if c.maxTs != noTimestamp && c.maxTs >= ts {
			s = c
			break
		}
	}
	if s == nil {
		next := l.active().next
		l.mu.RUnlock()
		return next, nil
	}
	size, idx := s.size, s.timeIdx
	s.acquire()
	l.mu.RUnlock()
	defer s.release()

	var hb [batch.HeaderSize]byte
	for pos := posForTime(idx, ts); pos < size; {
		h, err := readHeader(s.file, pos, &hb)
		if err != nil {
			return 0, err
		}
		if h.MaxTimestamp >= ts {
			return h.BaseOffset, nil
		}
		pos += int64(h.Size())
	}
	return 0, fmt.Errorf("storage: %s: max timestamp %d not found by scanning", s.path, ts)
}

// MaxTimestamp returns the largest timestamp in the log and the base
// offset of the first batch holding it (-1, -1 when empty).
func (l *Log) MaxTimestamp() (ts int64, offset int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	ts, offset = noTimestamp, -1
	for _, s := range l.segs {
		if s.maxTs > ts {
			ts, offset = s.maxTs, s.maxTsOff
		}
	}
	if ts == noTimestamp {
		return -1, -1
	}
	return ts, offset
}

// ScanHeaders calls fn with the header of every stored batch whose last
// offset is >= from, in offset order, stopping at the first error.
func (l *Log) ScanHeaders(from int64, fn func(h batch.Header) error) error {
	type view struct {
		s    *segment
		size int64
		pos  int64
	}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	var views []view
	for _, s := range l.segs {
		if s.next <= from {
			continue
		}
		s.acquire()
		views = append(views, view{s: s, size: s.size, pos: posForOffset(s.offIdx, from)})
	}
	l.mu.RUnlock()
	defer func() {
		for _, v := range views {
			v.s.release()
		}
	}()
	var hb [batch.HeaderSize]byte
	for _, v := range views {
		for pos := v.pos; pos < v.size; {
			h, err := readHeader(v.s.file, pos, &hb)
			if err != nil {
				return err
			}
			pos += int64(h.Size())
			if h.LastOffset() < from {
				continue
			}
			if err := fn(h); err != nil {
				return err
			}
		}
	}
	return nil
}
