package batch

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// Attribute bits of a batch.
const (
	AttrCodecMask     int16 = 0x07
	AttrLogAppendTime int16 = 0x08
	AttrTransactional int16 = 0x10
	AttrControl       int16 = 0x20
)

// Params are a batch's header fields for Append. The zero value is not a
// useful batch: Kafka's "none" for the producer fields is -1, which
// NoProducer sets.
type Params struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Codec                Codec
	// SkipCodecIfLarger keeps the records uncompressed (codec none) when
	// compressing them would not make them smaller, as Kafka's producers
	// may.
	SkipCodecIfLarger bool
	// Compress, when set, compresses the encoded records in place of the
	// built-in codecs (Codec is then ignored): it returns the compressed
	// bytes and their codec, or CodecNone to store them uncompressed. out
	// is copied before Compress is called again. The producer uses it to
	// keep its client's compression levels.
	Compress      func(src []byte) (out []byte, c Codec)
	LogAppendTime bool
	Transactional bool
	Control       bool
	ProducerID    int64 // -1: none
	ProducerEpoch int16 // -1: none
	BaseSequence  int32 // -1: none
	// LastOffsetDelta is kept when it is above the last record's offset
	// delta (a compacted batch keeps its offset range, and an emptied one
	// its producer's last sequence).
	LastOffsetDelta int32
	// BaseTimestamp and MaxTimestamp are used only for a batch without
	// records; otherwise they come from the records: the first record's
	// timestamp and the largest.
	BaseTimestamp, MaxTimestamp int64
}

// NoProducer sets the producer fields to Kafka's "none" (-1) and returns p.
func (p Params) NoProducer() Params {
	p.ProducerID, p.ProducerEpoch, p.BaseSequence = -1, -1, -1
	return p
}

// ParamsOf returns the Params that rebuild a batch with header h: same
// offsets, producer fields, flags and codec.
func ParamsOf(h *Header) Params {
	return Params{
		BaseOffset:           h.BaseOffset,
		PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Codec:                h.Compression(),
		LogAppendTime:        h.LogAppendTime(),
		Transactional:        h.Transactional(),
		Control:              h.Control(),
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		BaseSequence:         h.BaseSequence,
		LastOffsetDelta:      h.LastOffsetDelta,
		BaseTimestamp:        h.BaseTimestamp,
		MaxTimestamp:         h.MaxTimestamp,
	}
}

// scratch holds the encoded records of a batch before compression.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// Append appends to dst one RecordBatch v2 holding recs with the header
// fields of p, CRC32C and lengths set, and returns it. Each record's
// OffsetDelta is taken as given; they must increase. The batch's
// baseTimestamp is the first record's Timestamp.
func Append(dst []byte, p *Params, recs []Record) ([]byte, error) {
	last := p.LastOffsetDelta
	baseTs, maxTs := p.BaseTimestamp, p.MaxTimestamp
	if len(recs) > 0 {
		baseTs, maxTs = recs[0].Timestamp, recs[0].Timestamp
	}
	prev := int32(-1)
	for i := range recs {
		r := &recs[i]
		if r.OffsetDelta <= prev {
			return dst, fmt.Errorf("batch: record %d has offset delta %d after %d", i, r.OffsetDelta, prev)
		}
		prev = r.OffsetDelta
		maxTs = max(maxTs, r.Timestamp)
	}
	last = max(last, prev)
	if len(recs) > math.MaxInt32 || last < 0 && len(recs) > 0 {
		return dst, fmt.Errorf("batch: %d records", len(recs))
	}

	attrs := int16(0)
	if p.LogAppendTime {
		attrs |= AttrLogAppendTime
	}
	if p.Transactional {
		attrs |= AttrTransactional
	}
	if p.Control {
		attrs |= AttrControl
	}

	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	if p.Codec == CodecNone && p.Compress == nil {
		for i := range recs {
			dst = appendRecord(dst, &recs[i], baseTs)
		}
	} else {
		sp := scratch.Get().(*[]byte)
		body := (*sp)[:0]
		for i := range recs {
			body = appendRecord(body, &recs[i], baseTs)
		}
		codec := p.Codec
		if p.Compress != nil {
			var out []byte
			out, codec = p.Compress(body)
			if codec == CodecNone {
				out = body
			}
			dst = append(dst, out...)
		} else {
			var err error
			if dst, err = compress(dst, body, codec); err != nil {
				return dst[:start], err
			}
		}
		if codec != CodecNone && p.SkipCodecIfLarger && len(dst)-start-HeaderSize >= len(body) {
			dst, codec = append(dst[:start+HeaderSize], body...), CodecNone
		}
		attrs |= int16(codec) & AttrCodecMask
		*sp = body
		scratch.Put(sp)
	}
	b := dst[start:]
	if len(b)-LengthOffset > math.MaxInt32 {
		return dst[:start], fmt.Errorf("batch: %d bytes is too large", len(b))
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(p.BaseOffset))
	be.PutUint32(b[8:], uint32(len(b)-LengthOffset))
	be.PutUint32(b[12:], uint32(p.PartitionLeaderEpoch))
	b[16] = 2
	be.PutUint16(b[21:], uint16(attrs))
	be.PutUint32(b[23:], uint32(last))
	be.PutUint64(b[27:], uint64(baseTs))
	be.PutUint64(b[35:], uint64(maxTs))
	be.PutUint64(b[43:], uint64(p.ProducerID))
	be.PutUint16(b[51:], uint16(p.ProducerEpoch))
	be.PutUint32(b[53:], uint32(p.BaseSequence))
	be.PutUint32(b[57:], uint32(len(recs)))
	be.PutUint32(b[17:], Checksum(b))
	return dst, nil
}

// Rewrite re-encodes the batch raw (header h) keeping only the records
// keep accepts, with the same header fields, offset range and codec, as
// log compaction does. It appends the new batch to dst. keep may not
// retain the Record it is given; the records kept are copied.
func Rewrite(dst []byte, h *Header, raw []byte, keep func(r *Record) bool) ([]byte, error) {
	var kept []Record
	err := Records(h, raw, func(r *Record) error {
		if keep(r) {
			c := *r
			c.Headers = append([]RecordHeader(nil), r.Headers...)
			kept = append(kept, c)
		}
		return nil
	})
	if err != nil {
		return dst, err
	}
	p := ParamsOf(h)
	return Append(dst, &p, kept)
}
