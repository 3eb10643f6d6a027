package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"github.com/sluicedb/sluice/internal/vfs"
)

// checkpointName is the clean-shutdown checkpoint, written last by Close
// and zeroed by Open before the log accepts writes (an invalid one means
// that the log was not closed cleanly since).
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

// rewriteCheckpoint writes the checkpoint over the file (its inode
// reused) or creates it, without a sync: the caller syncs the file, and
// the directory when created is set. A torn write fails
// decodeCheckpoint (length, magic, version, CRC32C), so the next Open
// scans, as after a crash. The checkpoint is written only once what it
// describes is durable, so it may become durable at any time after.
func rewriteCheckpoint(fs vfs.FS, dir string, c checkpoint) (created bool, err error) {
	f, created, err := vfs.WriteInPlace(fs, filepath.Join(dir, checkpointName), c.encode())
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return created, fmt.Errorf("write checkpoint: %w", err)
	}
	return created, nil
}

// invalidateCheckpoint makes the checkpoint file of an opened log
// invalid in place, writing size zeros over it, and returns it open and
// unsynced (see Log.cpZeroed, SyncCheckpoints), so that a crash once it
// is synced makes the next Open scan; the file stays, for the next clean
// close to write over (no inode freed and allocated again, no directory
// change).
func invalidateCheckpoint(fs vfs.FS, dir string, size int64) (vfs.File, error) {
	f, err := fs.OpenRW(filepath.Join(dir, checkpointName))
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
