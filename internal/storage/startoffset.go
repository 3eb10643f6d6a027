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

// startOffsetName is the file holding the log start offset that
// DeleteRecordsBefore set, when it lies past the first segment's base.
//
//	off size field
//	  0    4 magic "SLSO"
//	  4    4 version (1)
//	  8    8 log start offset
//	 16    4 crc32c of bytes 0..15
const (
	startOffsetName  = "log-start-offset"
	startOffsetMagic = "SLSO"
	startOffsetSize  = 20
)

func encodeStartOffset(off int64) []byte {
	b := make([]byte, 0, startOffsetSize)
	b = append(b, startOffsetMagic...)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(off))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeStartOffset(b []byte) (int64, error) {
	if len(b) != startOffsetSize || string(b[:4]) != startOffsetMagic || binary.BigEndian.Uint32(b[4:]) != 1 {
		return 0, fmt.Errorf("storage: %s malformed (%d bytes)", startOffsetName, len(b))
	}
	if crc32.Checksum(b[:16], castagnoli) != binary.BigEndian.Uint32(b[16:]) {
		return 0, fmt.Errorf("storage: %s checksum mismatch", startOffsetName)
	}
	return int64(binary.BigEndian.Uint64(b[8:])), nil
}

// loadStartOffset reads the start-offset file at Open. A missing file
// means the first segment's base. A file that cannot be decoded is
// ignored (reported in the recovery report): the records it hid become
// readable again, which loses nothing. The offset is clamped to the log.
func (l *Log) loadStartOffset() {
	b, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, startOffsetName))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			l.report.StartOffsetIgnored = err.Error()
		}
		return
	}
	off, err := decodeStartOffset(b)
	if err != nil {
		l.report.StartOffsetIgnored = err.Error()
		return
	}
	// Not cut to the log's end yet: the broker's WAL may replay records
	// the segment lost in a crash (acknowledged, so possibly deleted
	// since) up to and past it. SettleStartOffset cuts it after the
	// replay; until then readers see it cut (startLocked).
	l.start = off
}

// SettleStartOffset cuts the log start offset read at Open to the log's
// end, once whatever replays records into the log at Open (the broker's
// WAL) has: a start past the end (the log lost records a crash took,
// fsync policy permitting) would otherwise hide the new records written
// at those offsets.
func (l *Log) SettleStartOffset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.segs) > 0 {
		l.start = min(l.start, l.active().next)
	}
}

// startLocked is the log start offset. The caller holds mu.
func (l *Log) startLocked() int64 {
	return max(l.segs[0].base, min(l.start, l.active().next))
}

// DeleteRecordsBefore makes off the log start offset (Kafka's
// DeleteRecords): offsets below it are no longer readable, and segments
// wholly below it are removed by the next ApplyRetention. The new start
// is written to a file (synced, renamed, directory synced) before it
// takes effect, so it survives a crash. An offset at or below the
// current start changes nothing; one past NextOffset gives
// ErrOffsetOutOfRange (the caller bounds it by the high watermark).
// It returns the log start offset after the call. It may be called from
// any goroutine; calls are serialized.
func (l *Log) DeleteRecordsBefore(off int64) (int64, error) {
	l.startMu.Lock()
	defer l.startMu.Unlock()
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, ErrClosed
	}
	start, end := l.startLocked(), l.active().next
	l.mu.RUnlock()
	if off > end || off < 0 {
		return start, fmt.Errorf("%w: offset %d, log holds [%d, %d)", ErrOffsetOutOfRange, off, start, end)
	}
	if off <= start {
		return start, nil
	}
	// A created log whose first bytes are still in memory makes its
	// directory (and first segment) first.
	if err := l.Prepare(); err != nil {
		return start, err
	}
	if err := vfs.WriteFileAtomic(l.fs, filepath.Join(l.dir, startOffsetName), encodeStartOffset(off)); err != nil {
		return start, fmt.Errorf("storage: %w", err)
	}
	l.mu.Lock()
	l.start = off
	l.mu.Unlock()
	return off, nil
}
