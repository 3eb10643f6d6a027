// Package storagetest builds valid Kafka RecordBatch v2 bytes for tests of
// the packages that sit on top of storage (acceptor, broker, groups).
package storagetest

import (
	"encoding/binary"
	"hash/crc32"

	"sluice/internal/batch"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MakeBatch returns a valid, uncompressed RecordBatch v2 with base offset 0
// holding records records, each with a null key and a value of valueSize
// bytes. The first record's timestamp is ts and record i's is ts+i, so
// maxTimestamp is ts+records-1. Values are filled with a pattern derived
// from ts and the record index, so batches made with different ts differ.
// The CRC, batchLength, lastOffsetDelta and record count are all correct.
// It panics if records < 1 or valueSize < 0 (a test bug).
func MakeBatch(records int, valueSize int, ts int64) []byte {
	return Build(Spec{Records: records, ValueSize: valueSize, Timestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
}

// Spec describes a batch for Build.
type Spec struct {
	Records       int   // number of records, >= 1
	ValueSize     int   // bytes per record value, >= 0
	Timestamp     int64 // first record's timestamp; record i has Timestamp+i
	ProducerID    int64 // -1 for a non-idempotent batch
	ProducerEpoch int16 // -1 for a non-idempotent batch
	BaseSequence  int32 // -1 for a non-idempotent batch
	Attributes    int16 // batch attributes (compression bits must be 0: records are not compressed)
	Seed          byte  // mixed into the value pattern
}

// Build returns a valid RecordBatch v2 as s describes, with base offset 0.
func Build(s Spec) []byte {
	if s.Records < 1 || s.ValueSize < 0 {
		panic("storagetest: Build needs at least one record and a non-negative value size")
	}
	b := make([]byte, batch.HeaderSize, batch.HeaderSize+s.Records*(s.ValueSize+16))
	value := make([]byte, s.ValueSize)
	var rec []byte
	for i := 0; i < s.Records; i++ {
		for j := range value {
			value[j] = byte(int64(j) + s.Timestamp + int64(i)*31 + int64(s.Seed)*7)
		}
		rec = rec[:0]
		rec = append(rec, 0)                              // record attributes
		rec = binary.AppendVarint(rec, int64(i))          // timestampDelta
		rec = binary.AppendVarint(rec, int64(i))          // offsetDelta
		rec = binary.AppendVarint(rec, -1)                // key length: null key
		rec = binary.AppendVarint(rec, int64(len(value))) // value length
		rec = append(rec, value...)
		rec = binary.AppendVarint(rec, 0) // header count
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)                                       // baseOffset
	be.PutUint32(b[8:], uint32(len(b)-batch.LengthOffset))       // batchLength
	be.PutUint32(b[12:], 0)                                      // partitionLeaderEpoch
	b[16] = 2                                                    // magic
	be.PutUint16(b[21:], uint16(s.Attributes))                   // attributes
	be.PutUint32(b[23:], uint32(s.Records-1))                    // lastOffsetDelta
	be.PutUint64(b[27:], uint64(s.Timestamp))                    // baseTimestamp
	be.PutUint64(b[35:], uint64(s.Timestamp+int64(s.Records)-1)) // maxTimestamp
	be.PutUint64(b[43:], uint64(s.ProducerID))
	be.PutUint16(b[51:], uint16(s.ProducerEpoch))
	be.PutUint32(b[53:], uint32(s.BaseSequence))
	be.PutUint32(b[57:], uint32(s.Records))
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// WithBaseOffset returns a copy of b, a run of whole batches, with base
// offsets assigned contiguously from base. It returns the next offset.
func WithBaseOffset(b []byte, base int64) ([]byte, int64) {
	out := append([]byte(nil), b...)
	next := base
	if _, err := batch.Split(out, func(h batch.Header, raw []byte) error {
		batch.SetBaseOffset(raw, next)
		next += int64(h.LastOffsetDelta) + 1
		return nil
	}); err != nil {
		panic("storagetest: WithBaseOffset on invalid batches: " + err.Error())
	}
	return out, next
}
