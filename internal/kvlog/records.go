package kvlog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"sluice/internal/batch"
)

// ErrBadRecord marks an internal-log record that does not decode.
var ErrBadRecord = errors.New("kvlog: undecodable internal log record")

// encodeBatch appends one uncompressed RecordBatch v2 holding recs, with
// base offset 0 (the acceptor assigns the real one) and timestamp ts
// (milliseconds), to dst.
func encodeBatch(dst []byte, recs []Record, ts int64) []byte {
	var body []byte
	for i, r := range recs {
		rec := kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		enc := rec.AppendTo(nil) // Length 0 encodes as one varint byte
		body = binary.AppendVarint(body, int64(len(enc)-1))
		body = append(body, enc[1:]...)
	}
	b := kmsg.RecordBatch{
		Length:          int32(batch.HeaderSize - batch.LengthOffset + len(body)),
		Magic:           2,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  ts,
		MaxTimestamp:    ts,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(len(recs)),
		Records:         body,
	}
	start := len(dst)
	dst = b.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start+17:], batch.Checksum(dst[start:]))
	return dst
}

// decodeBatches calls fn for every record of the whole, CRC-checked
// batches in b, with the record's offset.
func decodeBatches(b []byte, fn func(offset int64, r Record) error) error {
	_, err := batch.Split(b, func(h batch.Header, raw []byte) error {
		if h.Compression() != 0 {
			return fmt.Errorf("%w: compressed batch at offset %d", ErrBadRecord, h.BaseOffset)
		}
		if h.Control() {
			return nil
		}
		rest := raw[batch.HeaderSize:]
		for i := int32(0); i < h.NumRecords; i++ {
			n, w := binary.Varint(rest)
			if w <= 0 || n < 0 || int64(len(rest)-w) < n {
				return fmt.Errorf("%w: record %d of batch at offset %d is cut short", ErrBadRecord, i, h.BaseOffset)
			}
			var rec kmsg.Record
			if err := rec.ReadFrom(rest[:w+int(n)]); err != nil {
				return fmt.Errorf("%w: record %d of batch at offset %d: %w", ErrBadRecord, i, h.BaseOffset, err)
			}
			rest = rest[w+int(n):]
			if err := fn(h.BaseOffset+int64(rec.OffsetDelta), Record{Key: rec.Key, Value: rec.Value}); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

// setBaseOffset sets the base offset of the single batch in b.
func setBaseOffset(b []byte, off int64) { batch.SetBaseOffset(b, off) }
