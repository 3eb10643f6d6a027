// Package batch is the one place in Sluice that parses, validates,
// encodes and rewrites Kafka RecordBatches (magic 2), the unit Sluice
// stores on disk byte for byte (only the base offset is rewritten, and it
// lies outside the CRC).
//
//   - Validate / Split / ParseHeader: the fixed header, CRC32C, lengths.
//   - Append: the encoder (records, producer fields, transactional and
//     control bits, codec) used by the producer, the group store and the
//     test helpers.
//   - Records / DecodeRecords: the record decoder, decompressing gzip,
//     snappy (raw or xerial-framed), lz4 (frame) and zstd.
//   - Rewrite: re-encode a batch keeping some records (compaction).
//   - AppendMarker / ParseMarker: KIP-98 COMMIT/ABORT control batches.
//
// Layout of the 61-byte header (big-endian):
//
//	off  size  field
//	  0     8  baseOffset            (assigned by the broker)
//	  8     4  batchLength           (bytes after this field)
//	 12     4  partitionLeaderEpoch
//	 16     1  magic                 (2)
//	 17     4  crc                   (CRC32C of bytes 21..end)
//	 21     2  attributes            (compression 0-2, timestamp type 3, transactional 4, control 5)
//	 23     4  lastOffsetDelta
//	 27     8  baseTimestamp
//	 35     8  maxTimestamp
//	 43     8  producerId
//	 51     2  producerEpoch
//	 53     4  baseSequence
//	 57     4  recordCount
//	 61     …  records (compressed as a whole when the codec is not 0)
//
// Each record (varint: zig-zag, as protobuf's sint):
//
//	length varint (bytes after it), attributes int8, timestampDelta varlong,
//	offsetDelta varint, keyLength varint (-1 null), key,
//	valueLength varint (-1 null), value, headerCount varint,
//	headers: keyLength varint, key (a string), valueLength varint (-1 null), value
//
// A control batch (attributes bit 5, always with bit 4, transactional)
// holds one record: key = version int16 (0), type int16 (0 ABORT,
// 1 COMMIT); value = version int16 (0), coordinatorEpoch int32.
package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// HeaderSize is the size of a RecordBatch v2 header.
const HeaderSize = 61

// LengthOffset is the number of bytes before a batch's payload that are
// not counted in batchLength (baseOffset and batchLength themselves).
const LengthOffset = 12

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors returned by Parse and Validate. They describe why a byte slice is
// not a valid batch; callers map them to Kafka error codes.
var (
	ErrShort     = errors.New("batch: shorter than its header or declared length")
	ErrBadLength = errors.New("batch: batchLength field out of range")
	ErrBadMagic  = errors.New("batch: magic is not 2")
	ErrBadCRC    = errors.New("batch: CRC32C mismatch")
	ErrBadCount  = errors.New("batch: record count does not match lastOffsetDelta")
	ErrNoRecords = errors.New("batch: batch holds no records")
)

// Header is the decoded fixed header of one RecordBatch.
type Header struct {
	BaseOffset           int64
	Length               int32 // batchLength: bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the batch's total size in bytes on disk.
func (h *Header) Size() int { return int(h.Length) + LengthOffset }

// LastOffset is the offset of the batch's last record.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Compression is the codec in the attributes (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h *Header) Compression() Codec { return Codec(h.Attributes & 0x07) }

// Transactional reports the transactional attribute bit.
func (h *Header) Transactional() bool { return h.Attributes&0x10 != 0 }

// Control reports the control-batch attribute bit.
func (h *Header) Control() bool { return h.Attributes&0x20 != 0 }

// LogAppendTime reports whether the timestamp type bit is set.
func (h *Header) LogAppendTime() bool { return h.Attributes&0x08 != 0 }

// Idempotent reports whether the batch carries a producer id.
func (h *Header) Idempotent() bool { return h.ProducerID >= 0 }

// ParseHeader decodes the header at the front of b. It checks only that
// the header is present and that batchLength is plausible; it does not
// check the CRC or that the whole batch is present.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, ErrShort
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[0:]))
	h.Length = int32(binary.BigEndian.Uint32(b[8:]))
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[12:]))
	h.Magic = int8(b[16])
	h.CRC = binary.BigEndian.Uint32(b[17:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[21:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[23:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[27:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[35:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[43:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[51:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[53:]))
	h.NumRecords = int32(binary.BigEndian.Uint32(b[57:]))
	if h.Length < HeaderSize-LengthOffset {
		return h, fmt.Errorf("%w: %d", ErrBadLength, h.Length)
	}
	return h, nil
}

// Validate parses the header of the batch at the front of b and checks
// magic, length and CRC32C. It returns the header; the batch occupies
// b[:h.Size()].
func Validate(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d", ErrBadMagic, h.Magic)
	}
	if h.Size() > len(b) {
		return h, ErrShort
	}
	if got := crc32.Checksum(b[21:h.Size()], castagnoli); got != h.CRC {
		return h, fmt.Errorf("%w: header says %08x, data gives %08x", ErrBadCRC, h.CRC, got)
	}
	return h, nil
}

// CheckCount checks that the record count agrees with lastOffsetDelta, as
// it must for a batch freshly produced by a client.
func (h *Header) CheckCount() error {
	if h.NumRecords <= 0 {
		return ErrNoRecords
	}
	if int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
		return fmt.Errorf("%w: %d records, lastOffsetDelta %d", ErrBadCount, h.NumRecords, h.LastOffsetDelta)
	}
	return nil
}

// SetBaseOffset writes a base offset into the batch at the front of b.
// The base offset is outside the CRC, so the CRC stays valid.
func SetBaseOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b[0:], uint64(off)) }

// SetPartitionLeaderEpoch writes the leader epoch; it too is outside the CRC.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
}

// Checksum computes the CRC32C of a batch's checksummed region.
func Checksum(b []byte) uint32 { return crc32.Checksum(b[21:], castagnoli) }

// Split calls fn for each whole batch in b, in order, after validating it.
// It stops at the first error, which it returns along with the byte
// position of the offending batch.
func Split(b []byte, fn func(h Header, raw []byte) error) (pos int, err error) {
	for pos < len(b) {
		h, err := Validate(b[pos:])
		if err != nil {
			return pos, err
		}
		if err := fn(h, b[pos:pos+h.Size()]); err != nil {
			return pos, err
		}
		pos += h.Size()
	}
	return pos, nil
}
