package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/sluicedb/sluice/internal/vfs"
)

// Index files. Both share a 48-byte header and end with a CRC32C of
// everything before it; see doc.go for the layout.
const (
	indexMagic      = "SLXO"
	timeIndexMagic  = "SLXT"
	indexVersion    = 1
	indexHeaderSize = 48
	offEntrySize    = 8  // relative offset u32, position u32
	timeEntrySize   = 12 // timestamp i64, position u32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errBadIndex = errors.New("storage: index file invalid")

// indexSummary is what an index header says about its segment.
type indexSummary struct {
	base     int64
	covered  int64 // bytes of the segment the index describes
	next     int64 // offset after the last covered batch
	maxTs    int64
	maxTsOff int64
}

func putHeader(b []byte, magic string, s indexSummary, count int) {
	copy(b[0:4], magic)
	b[4] = indexVersion
	binary.BigEndian.PutUint64(b[8:], uint64(s.base))
	binary.BigEndian.PutUint64(b[16:], uint64(s.covered))
	binary.BigEndian.PutUint64(b[24:], uint64(s.next))
	binary.BigEndian.PutUint64(b[32:], uint64(s.maxTs))
	binary.BigEndian.PutUint32(b[40:], uint32(s.maxTsOff-s.base))
	binary.BigEndian.PutUint32(b[44:], uint32(count))
}

// encodeOffsetIndex serializes a segment's offset index.
func encodeOffsetIndex(s indexSummary, idx []offEntry) []byte {
	b := make([]byte, indexHeaderSize+len(idx)*offEntrySize, indexHeaderSize+len(idx)*offEntrySize+4)
	putHeader(b, indexMagic, s, len(idx))
	p := b[indexHeaderSize:]
	for _, e := range idx {
		binary.BigEndian.PutUint32(p[0:], uint32(e.off-s.base))
		binary.BigEndian.PutUint32(p[4:], uint32(e.pos))
		p = p[offEntrySize:]
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// encodeTimeIndex serializes a segment's time index.
func encodeTimeIndex(s indexSummary, idx []timeEntry) []byte {
	b := make([]byte, indexHeaderSize+len(idx)*timeEntrySize, indexHeaderSize+len(idx)*timeEntrySize+4)
	putHeader(b, timeIndexMagic, s, len(idx))
	p := b[indexHeaderSize:]
	for _, e := range idx {
		binary.BigEndian.PutUint64(p[0:], uint64(e.ts))
		binary.BigEndian.PutUint32(p[8:], uint32(e.pos))
		p = p[timeEntrySize:]
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// checkIndex verifies an index file's framing and returns its summary,
// entry count and entry bytes.
func checkIndex(b []byte, magic string, entrySize int) (indexSummary, []byte, error) {
	var s indexSummary
	if len(b) < indexHeaderSize+4 {
		return s, nil, fmt.Errorf("%w: %d bytes", errBadIndex, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return s, nil, fmt.Errorf("%w: checksum mismatch", errBadIndex)
	}
	if string(b[0:4]) != magic || b[4] != indexVersion || b[5]|b[6]|b[7] != 0 {
		return s, nil, fmt.Errorf("%w: magic %q version %d", errBadIndex, b[0:4], b[4])
	}
	s.base = int64(binary.BigEndian.Uint64(b[8:]))
	s.covered = int64(binary.BigEndian.Uint64(b[16:]))
	s.next = int64(binary.BigEndian.Uint64(b[24:]))
	s.maxTs = int64(binary.BigEndian.Uint64(b[32:]))
	s.maxTsOff = s.base + int64(binary.BigEndian.Uint32(b[40:]))
	if s.maxTs == noTimestamp {
		s.maxTsOff = -1
	}
	count := int(binary.BigEndian.Uint32(b[44:]))
	entries := body[indexHeaderSize:]
	if len(entries) != count*entrySize {
		return s, nil, fmt.Errorf("%w: %d entry bytes for %d entries", errBadIndex, len(entries), count)
	}
	return s, entries, nil
}

// decodeIndexes parses both index files of the segment at base and checks
// that they agree with each other and are internally consistent.
func decodeIndexes(base int64, ob, tb []byte) (indexSummary, []offEntry, []timeEntry, error) {
	s, oe, err := checkIndex(ob, indexMagic, offEntrySize)
	if err != nil {
		return s, nil, nil, err
	}
	ts, te, err := checkIndex(tb, timeIndexMagic, timeEntrySize)
	if err != nil {
		return s, nil, nil, err
	}
	if s != ts || s.base != base || s.covered < 0 || s.covered > maxSegmentBytes || s.next < base {
		return s, nil, nil, fmt.Errorf("%w: headers disagree with each other or the segment", errBadIndex)
	}
	offs := make([]offEntry, 0, len(oe)/offEntrySize)
	for p := oe; len(p) > 0; p = p[offEntrySize:] {
		e := offEntry{off: base + int64(binary.BigEndian.Uint32(p)), pos: int64(binary.BigEndian.Uint32(p[4:]))}
		if e.pos <= 0 || e.pos >= s.covered || e.off >= s.next ||
			(len(offs) > 0 && (e.pos <= offs[len(offs)-1].pos || e.off <= offs[len(offs)-1].off)) {
			return s, nil, nil, fmt.Errorf("%w: offset entries out of order", errBadIndex)
		}
		offs = append(offs, e)
	}
	times := make([]timeEntry, 0, len(te)/timeEntrySize)
	for p := te; len(p) > 0; p = p[timeEntrySize:] {
		e := timeEntry{ts: int64(binary.BigEndian.Uint64(p)), pos: int64(binary.BigEndian.Uint32(p[8:]))}
		if e.pos <= 0 || e.pos >= s.covered ||
			(len(times) > 0 && (e.pos <= times[len(times)-1].pos || e.ts <= times[len(times)-1].ts)) {
			return s, nil, nil, fmt.Errorf("%w: time entries out of order", errBadIndex)
		}
		times = append(times, e)
	}
	return s, offs, times, nil
}

// writeFile writes b as the whole of name, synced: an index file is
// rewritten in place (its inode reused, no remove and create), since it
// is checked against its checksum and its segment when read, and a torn
// rewrite makes the segment scanned instead. The caller syncs the
// directory when created is set.
func writeFile(fs vfs.FS, name string, b []byte) (created bool, err error) {
	f, created, err := vfs.WriteInPlace(fs, name, b)
	if err != nil {
		return created, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return created, err
	}
	return created, f.Close()
}

// summary returns the segment's state as an index header records it. The
// caller holds Log.mu or is the writer.
func (s *segment) summary() indexSummary {
	return indexSummary{base: s.base, covered: s.size, next: s.next, maxTs: s.maxTs, maxTsOff: s.maxTsOff}
}

// writeIndexes writes both index files of s, each synced. The caller has
// synced the segment first (an index only describes durable bytes) and
// syncs the directory afterwards.
func writeIndexes(fs vfs.FS, s *segment) error {
	sum := s.summary()
	if _, err := writeFile(fs, s.indexPath(), encodeOffsetIndex(sum, s.offIdx)); err != nil {
		return fmt.Errorf("write offset index of %s: %w", s.path, err)
	}
	if _, err := writeFile(fs, s.timeIndexPath(), encodeTimeIndex(sum, s.timeIdx)); err != nil {
		return fmt.Errorf("write time index of %s: %w", s.path, err)
	}
	return nil
}

// rewriteIndexes writes both index files of s in place without syncing
// them (and closes them); the caller syncs them before anything that
// relies on them (the clean-shutdown checkpoint), and the directory when
// created is set. The segment's bytes must be durable by the time the
// indexes are.
func rewriteIndexes(fs vfs.FS, s *segment) (created bool, err error) {
	sum := s.summary()
	for _, w := range []struct {
		path, what string
		b          []byte
	}{
		{s.indexPath(), "offset", encodeOffsetIndex(sum, s.offIdx)},
		{s.timeIndexPath(), "time", encodeTimeIndex(sum, s.timeIdx)},
	} {
		f, c, err := vfs.WriteInPlace(fs, w.path, w.b)
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			return created, fmt.Errorf("write %s index of %s: %w", w.what, s.path, err)
		}
		created = created || c
	}
	return created, nil
}

// loadIndexes reads both index files of s; ok is false when either is
// missing or invalid.
func loadIndexes(fs vfs.FS, s *segment) (indexSummary, []offEntry, []timeEntry, bool) {
	ob, err := vfs.ReadFile(fs, s.indexPath())
	if err != nil {
		return indexSummary{}, nil, nil, false
	}
	tb, err := vfs.ReadFile(fs, s.timeIndexPath())
	if err != nil {
		return indexSummary{}, nil, nil, false
	}
	sum, offs, times, err := decodeIndexes(s.base, ob, tb)
	return sum, offs, times, err == nil
}
