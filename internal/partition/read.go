package partition

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
)

// Read reads the records from offset on, at most maxBytes of them (at
// least one whole batch when there is one), up to the high watermark,
// or, committed (read_committed), up to the last stable offset. It
// returns the slice read and the offset the read stopped before; errors
// are storage's (storage.ErrOffsetOutOfRange, storage.ErrClosed).
func (p *Partition) Read(offset int64, committed bool, maxBytes int) (storage.Slice, int64, error) {
	limit := p.acc.HighWatermark()
	if committed {
		limit = p.txns.lso(limit)
	}
	s, err := p.log.Read(offset, limit, maxBytes)
	return s, limit, err
}

// AbortedIn returns the aborted transactions (producer id, first offset)
// that overlap [from, to), for a read_committed fetch; it first forgets
// those whose records retention removed.
func (p *Partition) AbortedIn(from, to int64) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	p.txns.trim(p.log.StartOffset())
	return p.txns.abortedIn(from, to)
}

// AbortedBatch reports whether the transactional data batch h belongs to
// an aborted transaction (the log cleaner removes those records).
func (p *Partition) AbortedBatch(h *batch.Header) bool { return p.txns.abortedBatch(h) }

// Producer is one producer with state on the partition, as
// DescribeProducers reports it.
type Producer struct {
	ID           int64
	Epoch        int16
	LastSequence int32 // -1: no batch since its epoch began
	// TxnStartOffset is the first offset of its open transaction, -1
	// when none is open.
	TxnStartOffset int64
	// CoordinatorEpoch is the coordinator epoch of its last transaction
	// marker, -1 when none was written.
	CoordinatorEpoch int32
	// LastTimestamp is the max timestamp of its last batch or marker
	// (Unix ms), -1 when unknown (restored from an older snapshot and
	// nothing written since).
	LastTimestamp int64
}

// Producers lists the producers with state on the partition.
func (p *Partition) Producers() []Producer {
	act := p.pids.active()
	out := make([]Producer, len(act))
	for i, a := range act {
		out[i] = Producer{ID: a.pid, Epoch: a.epoch, LastSequence: a.lastSeq, TxnStartOffset: p.txns.openFirst(a.pid), CoordinatorEpoch: a.coordEpoch, LastTimestamp: a.lastTs}
	}
	return out
}

// LastStableOffsetAt is the last stable offset given the high watermark
// hw read earlier: never past hw.
func (p *Partition) LastStableOffsetAt(hw int64) int64 { return p.txns.lso(hw) }
