// Package storagetest builds valid Kafka RecordBatch v2 bytes for tests of
// the packages that sit on top of storage (acceptor, broker, groups),
// with the one encoder in internal/batch.
package storagetest

import (
	"github.com/sluicedb/sluice/internal/batch"
)

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
	Attributes    int16 // batch attributes: codec (bits 0-2), transactional, control
	Seed          byte  // mixed into the value pattern
}

// Build returns a valid RecordBatch v2 as s describes, with base offset 0.
func Build(s Spec) []byte {
	if s.Records < 1 || s.ValueSize < 0 {
		panic("storagetest: Build needs at least one record and a non-negative value size")
	}
	values := make([]byte, s.Records*s.ValueSize)
	recs := make([]batch.Record, s.Records)
	for i := range recs {
		value := values[i*s.ValueSize : (i+1)*s.ValueSize : (i+1)*s.ValueSize]
		for j := range value {
			value[j] = byte(int64(j) + s.Timestamp + int64(i)*31 + int64(s.Seed)*7)
		}
		recs[i] = batch.Record{Timestamp: s.Timestamp + int64(i), OffsetDelta: int32(i), Value: value}
	}
	p := batch.Params{
		Codec:         batch.Codec(s.Attributes & batch.AttrCodecMask),
		LogAppendTime: s.Attributes&batch.AttrLogAppendTime != 0,
		Transactional: s.Attributes&batch.AttrTransactional != 0,
		Control:       s.Attributes&batch.AttrControl != 0,
		ProducerID:    s.ProducerID,
		ProducerEpoch: s.ProducerEpoch,
		BaseSequence:  s.BaseSequence,
	}
	b, err := batch.Append(make([]byte, 0, batch.HeaderSize+s.Records*(s.ValueSize+16)), &p, recs)
	if err != nil {
		panic("storagetest: " + err.Error())
	}
	return b
}

// WithBaseOffset returns a copy of b, a run of whole batches, with base
// offsets assigned contiguously from base. It returns the next offset.
// It reads only the batches' framing, not their CRCs, so it also serves
// batches changed after they were encoded.
func WithBaseOffset(b []byte, base int64) ([]byte, int64) {
	out := append([]byte(nil), b...)
	next := base
	for pos := 0; pos < len(out); {
		h, err := batch.ParseHeader(out[pos:])
		if err == nil && pos+h.Size() > len(out) {
			err = batch.ErrShort
		}
		if err != nil {
			panic("storagetest: WithBaseOffset on invalid batches: " + err.Error())
		}
		batch.SetBaseOffset(out[pos:], next)
		next += int64(h.LastOffsetDelta) + 1
		pos += h.Size()
	}
	return out, next
}
