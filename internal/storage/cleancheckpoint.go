package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/sluicedb/sluice/internal/vfs"
)

// cleanerCheckpointName holds the compaction history of a log: for each
// cleaning pass, the offset it cleaned up to and when it finished, so
// that a tombstone's age since it was first cleaned is known (tombstones
// are kept DeleteRetention after that) and the first dirty offset is the
// last pass's end.
//
//	off size field
//	  0    4 magic "SLCC"
//	  4    4 version (1)
//	  8    8 tombstones due: unix ms when the earliest kept tombstone may
//	         be dropped (0: none kept)
//	 16    4 entry count n
//	 20 16*n entries: upTo int64, unix milliseconds int64
//	  …    4 crc32c of everything before
const (
	cleanerCheckpointName  = "cleaner-checkpoint"
	cleanerCheckpointMagic = "SLCC"
	// maxCleanMarks bounds the history: older marks are merged, keeping
	// the later time (tombstones then live a little longer, never less).
	maxCleanMarks = 64
)

// cleanMark says every offset below upTo had been cleaned once by time
// at (unix milliseconds).
type cleanMark struct {
	upTo int64
	at   int64
}

const cleanHeaderSize = 20

func encodeCleanMarks(ms []cleanMark, due int64) []byte {
	b := make([]byte, 0, cleanHeaderSize+4+16*len(ms))
	b = append(b, cleanerCheckpointMagic...)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(due))
	b = binary.BigEndian.AppendUint32(b, uint32(len(ms)))
	for _, m := range ms {
		b = binary.BigEndian.AppendUint64(b, uint64(m.upTo))
		b = binary.BigEndian.AppendUint64(b, uint64(m.at))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeCleanMarks(b []byte) ([]cleanMark, int64, error) {
	if len(b) < cleanHeaderSize+4 || string(b[:4]) != cleanerCheckpointMagic || binary.BigEndian.Uint32(b[4:]) != 1 {
		return nil, 0, fmt.Errorf("storage: %s malformed", cleanerCheckpointName)
	}
	due := int64(binary.BigEndian.Uint64(b[8:]))
	n := int(binary.BigEndian.Uint32(b[16:]))
	if n > maxCleanMarks || len(b) != cleanHeaderSize+4+16*n {
		return nil, 0, fmt.Errorf("storage: %s malformed (%d entries, %d bytes)", cleanerCheckpointName, n, len(b))
	}
	if crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, 0, fmt.Errorf("storage: %s checksum mismatch", cleanerCheckpointName)
	}
	ms := make([]cleanMark, n)
	for i := range ms {
		ms[i].upTo = int64(binary.BigEndian.Uint64(b[cleanHeaderSize+16*i:]))
		ms[i].at = int64(binary.BigEndian.Uint64(b[cleanHeaderSize+8+16*i:]))
	}
	return ms, due, nil
}

// loadCleanMarks reads the cleaner checkpoint at Open. A missing or
// unreadable one means nothing was cleaned yet: the next pass cleans
// everything again and tombstones restart their retention, which keeps
// data longer, never shorter.
func (l *Log) loadCleanMarks() {
	b, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, cleanerCheckpointName))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			l.report.CleanerCheckpointIgnored = err.Error()
		}
		return
	}
	ms, due, err := decodeCleanMarks(b)
	if err != nil {
		l.report.CleanerCheckpointIgnored = err.Error()
		return
	}
	l.marks, l.tombstonesDue = ms, due
}

// writeCleanMarks persists ms and due atomically. The caller holds cleanMu.
func (l *Log) writeCleanMarks(ms []cleanMark, due int64) error {
	return vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, cleanerCheckpointName), encodeCleanMarks(ms, due))
}

// addMark appends a pass to the history, merging the oldest marks when
// it is full.
func addMark(ms []cleanMark, m cleanMark) []cleanMark {
	out := append([]cleanMark(nil), ms...)
	if len(out) > 0 && out[len(out)-1].upTo >= m.upTo {
		return out // nothing newly cleaned
	}
	out = append(out, m)
	for len(out) > maxCleanMarks {
		// Merge the first two: offsets below the second's upTo count as
		// cleaned at the second's (later) time.
		out[1].at = max(out[0].at, out[1].at)
		out = out[1:]
	}
	return out
}

// firstCleanedAt returns when offset off was first cleaned (unix ms), or
// false if it never was.
func firstCleanedAt(ms []cleanMark, off int64) (int64, bool) {
	for _, m := range ms {
		if off < m.upTo {
			return m.at, true
		}
	}
	return 0, false
}
