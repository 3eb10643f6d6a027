package partition

import (
	"errors"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ListOffset answers ListOffsets for the partition: the offset (and the
// timestamp of its record) that timestamp ts names: -2 the log start
// (-4, earliest local, the same while nothing is tiered), -1 the end (the
// high watermark, or the last stable offset when committed), -3 the
// record with the largest timestamp, otherwise the first record at or
// after ts; (-1, -1) when there is none below the end.
func (p *Partition) ListOffset(ts int64, committed bool) (offset, timestamp int64, err error) {
	hw := p.acc.HighWatermark()
	if committed {
		hw = p.txns.lso(hw)
	}
	switch ts {
	case -2, -4:
		return p.log.StartOffset(), -1, nil
	case -1:
		return hw, -1, nil
	case -3:
		maxTs, off := p.log.MaxTimestamp()
		if off < 0 || off >= hw {
			return -1, -1, nil
		}
		off = max(off, p.log.StartOffset())
		found, at, err := p.findRecord(off, hw, func(rts int64) bool { return rts == maxTs })
		if err != nil {
			return 0, 0, err
		}
		if found < 0 {
			return off, maxTs, nil
		}
		return found, at, nil
	}
	if ts < 0 {
		return 0, 0, errCode(kerr.InvalidRequest, "timestamp %d is not a ListOffsets target", ts)
	}
	off, err := p.log.OffsetForTime(ts)
	if err != nil {
		return 0, 0, storageErr(err)
	}
	off = max(off, p.log.StartOffset()) // DeleteRecords may have cut into the batch found
	if off >= hw {
		return -1, -1, nil
	}
	found, at, err := p.findRecord(off, hw, func(rts int64) bool { return rts >= ts })
	if err != nil {
		return 0, 0, err
	}
	if found < 0 || found >= hw {
		return -1, -1, nil
	}
	return found, at, nil
}

// storageErr maps a storage error to the Kafka error a client gets.
func storageErr(err error) error {
	switch {
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return errCode(kerr.OffsetOutOfRange, "%v", err)
	case errors.Is(err, storage.ErrClosed):
		return errCode(kerr.NotLeaderForPartition, "%v", err)
	}
	return errCode(kerr.KafkaStorageError, "%v", err)
}

// findRecord reads the batch holding offset and returns the offset and
// timestamp of its first record whose timestamp satisfies match. For a
// compressed batch it returns the batch's base offset and max timestamp
// when the batch's max timestamp matches. (-1, -1) when nothing matches.
func (p *Partition) findRecord(offset, hw int64, match func(int64) bool) (int64, int64, error) {
	s, err := p.log.Read(offset, hw, 1)
	if err != nil {
		return 0, 0, storageErr(err)
	}
	raw, err := s.Bytes()
	if err != nil {
		return 0, 0, storageErr(err)
	}
	if len(raw) == 0 {
		return -1, -1, nil
	}
	h, err := batch.Validate(raw)
	if err != nil {
		return 0, 0, errCode(kerr.KafkaStorageError, "stored batch at offset %d: %v", offset, err)
	}
	if h.Compression() != 0 {
		if match(h.MaxTimestamp) {
			return h.BaseOffset, h.MaxTimestamp, nil
		}
		return -1, -1, nil
	}
	off, ts := int64(-1), int64(-1)
	err = batch.Records(&h, raw, func(r *batch.Record) error {
		if match(r.Timestamp) {
			off, ts = h.BaseOffset+int64(r.OffsetDelta), r.Timestamp
			return errFound
		}
		return nil
	})
	if err != nil && err != errFound {
		return 0, 0, errCode(kerr.KafkaStorageError, "stored batch at offset %d: %v", offset, err)
	}
	return off, ts, nil
}

// errFound stops batch.Records at the record findRecord looks for.
var errFound = errors.New("found")

// DeleteRecords moves the log start offset to off (-1: the high
// watermark) and returns the start offset after the call.
func (p *Partition) DeleteRecords(off int64) (int64, error) {
	hw := p.acc.HighWatermark()
	if off == -1 {
		off = hw
	}
	if off < 0 || off > hw {
		return -1, errCode(kerr.OffsetOutOfRange, "offset %d is outside [0, high watermark %d]", off, hw)
	}
	low, err := p.log.DeleteRecordsBefore(off)
	if err != nil {
		return -1, storageErr(err)
	}
	return low, nil
}
