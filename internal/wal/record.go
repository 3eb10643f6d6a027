package wal

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// Key names the partition log an entry belongs to.
type Key struct {
	Topic     [16]byte // topic ID: a recreated topic has a new one
	Partition int32
}

// Entry kinds.
const (
	kindData     = 1
	kindTruncate = 2
)

// Entry framing sizes.
const (
	frameSize = 8                     // length and CRC
	fixedBody = 1 + 16 + 4 + 8        // kind, topic, partition, offset
	entryHead = frameSize + fixedBody // bytes before the data
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is one decoded entry.
type entry struct {
	kind   byte
	key    Key
	offset int64
	data   []byte // aliases the segment buffer it was read from
}

// entryCRC is the CRC32C of body, salted with the sequence number of the
// segment the entry is written to: bytes left in a recycled segment file
// by its previous use never decode as entries of the new one.
func entryCRC(seq uint64, body []byte) uint32 {
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	return crc32.Update(crc32.Checksum(s[:], castagnoli), castagnoli, body)
}

// appendEntry encodes an entry at the end of dst, with its CRC left zero
// (sealEntries sets it once the segment is known).
func appendEntry(dst []byte, kind byte, k Key, offset int64, data []byte) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, entryHead)...)
	dst = append(dst, data...)
	h := dst[n:]
	binary.BigEndian.PutUint32(h[0:], uint32(fixedBody+len(data)))
	h[8] = kind
	copy(h[9:25], k.Topic[:])
	binary.BigEndian.PutUint32(h[25:], uint32(k.Partition))
	binary.BigEndian.PutUint64(h[29:], uint64(offset))
	return dst
}

// errEnd ends a segment's data: zeros, a torn or corrupt entry.
var errEnd = errors.New("wal: end of segment data")

// sealEntry sets the CRC of the entry at the start of b for segment seq.
func sealEntry(b []byte, seq uint64) {
	n := int(binary.BigEndian.Uint32(b[0:]))
	binary.BigEndian.PutUint32(b[4:], entryCRC(seq, b[frameSize:frameSize+n]))
}

// decodeEntry decodes the entry at the start of b, read from segment
// seq, and returns its size.
func decodeEntry(b []byte, seq uint64) (entry, int, error) {
	if len(b) < entryHead {
		return entry{}, 0, errEnd
	}
	n := int(binary.BigEndian.Uint32(b[0:]))
	if n < fixedBody || n > len(b)-frameSize {
		return entry{}, 0, errEnd
	}
	body := b[frameSize : frameSize+n]
	if entryCRC(seq, body) != binary.BigEndian.Uint32(b[4:]) {
		return entry{}, 0, errEnd
	}
	e := entry{kind: body[0], offset: int64(binary.BigEndian.Uint64(body[21:]))}
	copy(e.key.Topic[:], body[1:17])
	e.key.Partition = int32(binary.BigEndian.Uint32(body[17:]))
	if e.kind != kindData && e.kind != kindTruncate {
		return entry{}, 0, errEnd
	}
	e.data = body[fixedBody:]
	return e, frameSize + n, nil
}
