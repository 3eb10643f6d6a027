package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/batch"
)

// validateBatches checks the records of one partition of a Produce
// request (or of AppendBatch): one or more whole RecordBatches, magic 2,
// CRC32C intact, length fields consistent, record count equal to
// lastOffsetDelta+1, no batch larger than maxMessageBytes, no control or
// transactional batch, idempotence fields consistent. It appends each
// batch's header to hs (the caller's scratch, may be nil) and returns
// them and the number of offsets the batches take. Compressed
// batches are checked by header only and stored as they are. This is the
// one parse of a produce batch: the headers go with the bytes through
// acceptor.Request.Headers to storage, which do not read them again. The
// error carries the Kafka code for the partition.
func validateBatches(hs []batch.Header, records []byte, maxMessageBytes int32) ([]batch.Header, int64, error) {
	if len(records) == 0 {
		return nil, 0, errCode(kerr.CorruptMessage, "no record batches")
	}
	var n int64
	pos, err := batch.Split(records, func(h batch.Header, _ []byte) error {
		switch {
		case int64(h.Size()) > int64(maxMessageBytes):
			return errCode(kerr.MessageTooLarge, "batch of %d bytes exceeds max.message.bytes %d", h.Size(), maxMessageBytes)
		case h.Control():
			return errCode(kerr.InvalidRecord, "clients may not produce control batches")
		case h.Transactional() && !h.Idempotent():
			return errCode(kerr.InvalidRecord, "transactional batch without a producer id")
		case h.Idempotent() && (h.ProducerEpoch < 0 || h.BaseSequence < 0):
			return errCode(kerr.InvalidRecord, "idempotent batch with producer epoch %d and base sequence %d", h.ProducerEpoch, h.BaseSequence)
		}
		if err := h.CheckCount(); err != nil {
			return errCode(kerr.InvalidRecord, "%v", err)
		}
		hs = append(hs, h)
		n += int64(h.LastOffsetDelta) + 1
		return nil
	})
	if err != nil {
		var ce *codeError
		switch {
		case errors.As(err, &ce):
			return nil, 0, err
		case errors.Is(err, batch.ErrBadMagic):
			return nil, 0, errCode(kerr.UnsupportedForMessageFormat, "batch at byte %d: %v (Sluice stores RecordBatch v2 only)", pos, err)
		default:
			return nil, 0, errCode(kerr.CorruptMessage, "batch at byte %d: %v", pos, err)
		}
	}
	return hs, n, nil
}
