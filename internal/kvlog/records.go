package kvlog

import (
	"errors"
	"fmt"

	"github.com/sluicedb/sluice/internal/batch"
)

// ErrBadRecord marks an internal-log record that does not decode.
var ErrBadRecord = errors.New("kvlog: undecodable internal log record")

// encodeBatch appends one uncompressed RecordBatch v2 holding recs, with
// base offset 0 (the acceptor assigns the real one) and timestamp ts
// (milliseconds), to dst.
func encodeBatch(dst []byte, recs []Record, ts int64) []byte {
	brs := make([]batch.Record, len(recs))
	for i, r := range recs {
		brs[i] = batch.Record{Timestamp: ts, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	p := batch.Params{}.NoProducer()
	out, err := batch.Append(dst, &p, brs)
	if err != nil {
		panic("kvlog: encoding an uncompressed batch: " + err.Error()) // offset deltas increase, no codec: cannot fail
	}
	return out
}

// decodeBatches calls fn for every record of the whole, CRC-checked
// batches in b, with the record's offset. Control batches are skipped.
func decodeBatches(b []byte, fn func(offset int64, r Record) error) error {
	_, err := batch.Split(b, func(h batch.Header, raw []byte) error {
		if h.Control() {
			return nil
		}
		err := batch.Records(&h, raw, func(r *batch.Record) error {
			return fn(h.BaseOffset+int64(r.OffsetDelta), Record{Key: r.Key, Value: r.Value})
		})
		if errors.Is(err, batch.ErrBadRecord) || errors.Is(err, batch.ErrCodec) {
			return fmt.Errorf("%w: batch at offset %d: %w", ErrBadRecord, h.BaseOffset, err)
		}
		return err
	})
	return err
}

// setBaseOffset sets the base offset of the single batch in b.
func setBaseOffset(b []byte, off int64) { batch.SetBaseOffset(b, off) }
