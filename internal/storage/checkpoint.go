package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"github.com/sluicedb/sluice/internal/vfs"
)

// checkpointName is the clean-shutdown checkpoint, written last by Close
// and removed by Open before the log accepts writes.
const checkpointName = "clean-shutdown"

const (
	checkpointMagic = "SLCP"
	checkpointSize  = 4 + 4 + 8 + 8 + 8 + 4
)

// checkpoint says how the log looked when it was closed cleanly.
type checkpoint struct {
	activeBase int64 // base offset of the last segment
	activeSize int64 // its size in bytes
	next       int64 // the log end offset
}

func (c checkpoint) encode() []byte {
	b := make([]byte, 0, checkpointSize)
	b = append(b, checkpointMagic...)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(c.activeBase))
	b = binary.BigEndian.AppendUint64(b, uint64(c.activeSize))
	b = binary.BigEndian.AppendUint64(b, uint64(c.next))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeCheckpoint(b []byte) (checkpoint, error) {
	var c checkpoint
	if len(b) != checkpointSize || string(b[:4]) != checkpointMagic || binary.BigEndian.Uint32(b[4:]) != 1 {
		return c, fmt.Errorf("storage: checkpoint malformed (%d bytes)", len(b))
	}
	if crc32.Checksum(b[:checkpointSize-4], castagnoli) != binary.BigEndian.Uint32(b[checkpointSize-4:]) {
		return c, fmt.Errorf("storage: checkpoint checksum mismatch")
	}
	c.activeBase = int64(binary.BigEndian.Uint64(b[8:]))
	c.activeSize = int64(binary.BigEndian.Uint64(b[16:]))
	c.next = int64(binary.BigEndian.Uint64(b[24:]))
	return c, nil
}

// writeCheckpoint writes the checkpoint atomically (vfs.WriteFileAtomic).
func writeCheckpoint(fs vfs.FS, dir string, c checkpoint) error {
	if err := vfs.WriteFileAtomic(fs, filepath.Join(dir, checkpointName), c.encode()); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}
