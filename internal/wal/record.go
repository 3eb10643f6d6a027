package wal

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/sluicedb/sluice/internal/batch"
)

// Key names the partition log an entry belongs to.
type Key struct {
	Topic     [16]byte // topic ID: a recreated topic has a new one
	Partition int32
}

// Entry kinds. A batches entry is a data entry whose CRC covers, of its
// data, only each RecordBatch's first batchUnchecked bytes (base offset,
// length, leader epoch, magic and the batch's own CRC32C): the rest of
// each batch is covered by that batch CRC, which decodeEntry checks. The
// batches' bytes are thus checksummed once on the write path (by the
// broker's validation of a produced batch, or by the encoder of a batch
// the broker makes) instead of twice. Data that is not a run of whole v2
// batches is written as kindData, whose CRC covers every byte.
const (
	kindData     = 1
	kindTruncate = 2
	kindBatches  = 3
)

// batchUnchecked is how many bytes at the front of a v2 RecordBatch its
// own CRC does not cover.
const batchUnchecked = 21

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

// batchesCRC is entryCRC for a batches entry: the body's fixed part and
// the first batchUnchecked bytes of each batch of data, which must tile
// it (wholeBatches).
func batchesCRC(seq uint64, body []byte) uint32 {
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	c := crc32.Update(crc32.Checksum(s[:], castagnoli), castagnoli, body[:fixedBody])
	for b := body[fixedBody:]; len(b) > 0; {
		n := batchSize(b)
		c = crc32.Update(c, castagnoli, b[:batchUnchecked])
		b = b[n:]
	}
	return c
}

// batchSize is the size of the v2 batch at the front of b as its length
// field says, or 0 when b does not start with a whole one.
func batchSize(b []byte) int {
	if len(b) < batch.HeaderSize || b[16] != 2 {
		return 0
	}
	n := 12 + int(binary.BigEndian.Uint32(b[8:]))
	if n < batch.HeaderSize || n > len(b) {
		return 0
	}
	return n
}

// wholeBatches reports whether data is one or more whole v2 batches end
// to end.
func wholeBatches(data []byte) bool {
	if len(data) == 0 {
		return false
	}
	for len(data) > 0 {
		n := batchSize(data)
		if n == 0 {
			return false
		}
		data = data[n:]
	}
	return true
}

// batchesIntact reports whether every batch of data, which tiles it,
// matches its own CRC32C.
func batchesIntact(data []byte) bool {
	for len(data) > 0 {
		n := batchSize(data)
		if crc32.Checksum(data[batchUnchecked:n], castagnoli) != binary.BigEndian.Uint32(data[17:]) {
			return false
		}
		data = data[n:]
	}
	return true
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
	body := b[frameSize : frameSize+n]
	if body[0] == kindBatches {
		binary.BigEndian.PutUint32(b[4:], batchesCRC(seq, body))
		return
	}
	binary.BigEndian.PutUint32(b[4:], entryCRC(seq, body))
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
	kind, sum := body[0], binary.BigEndian.Uint32(b[4:])
	switch kind {
	case kindData, kindTruncate:
		if entryCRC(seq, body) != sum {
			return entry{}, 0, errEnd
		}
	case kindBatches:
		// The framing CRC covers the batches' headers; each batch's own
		// CRC covers the rest of it.
		if !wholeBatches(body[fixedBody:]) || batchesCRC(seq, body) != sum || !batchesIntact(body[fixedBody:]) {
			return entry{}, 0, errEnd
		}
		kind = kindData
	default:
		return entry{}, 0, errEnd
	}
	e := entry{kind: kind, offset: int64(binary.BigEndian.Uint64(body[21:]))}
	copy(e.key.Topic[:], body[1:17])
	e.key.Partition = int32(binary.BigEndian.Uint32(body[17:]))
	e.data = body[fixedBody:]
	return e, frameSize + n, nil
}
