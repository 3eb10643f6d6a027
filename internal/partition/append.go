package partition

import (
	"context"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/txn"
)

// TxnCoordinator is what a partition needs of the transaction
// coordinator: the check of a transactional batch, run on the
// partition's acceptor goroutine. *txn.Coordinator implements it.
type TxnCoordinator interface {
	// CheckProduceAt checks a transactional batch of producer pid at
	// epoch for the partition, to be written at offset base. It returns a
	// Kafka error code (0: accepted) and, when implicit (KIP-890) added
	// the partition to the transaction, the coordinator record to wait
	// for before the reply.
	CheckProduceAt(pid int64, epoch int16, topic string, partition int32, base int64, implicit bool) (int16, *txn.Pending)
}

// Append is what one append to a partition carries through its
// acceptor: the request, and what its check needs. A Produce request
// keeps one per partition by value inside its items, so that an append
// allocates nothing of its own. Set WantEnd, Txn and Implicit before
// Enqueue; nothing else may be touched until the append is waited for.
type Append struct {
	// WantEnd: End is set once the append is accepted, so that a caller
	// can tell from the high watermark (Partition.Ready) that the append
	// is durable without waiting.
	WantEnd bool
	// Txn checks transactional batches; it must be set when the batches
	// are transactional. Implicit (Produce v12+, KIP-890 transaction
	// version 2) adds the partition to its producer's transaction when it
	// is missing.
	Txn      TxnCoordinator
	Implicit bool
	// SyncInline: a durable append may be written and fsynced on the
	// Enqueue caller's goroutine (acceptor.Request.SyncInline), Enqueue
	// returning only after the fsync.
	SyncInline bool
	// Shared, when set, is the buffer the records lie in (the produce
	// request's frame), held by the caller until the append is waited
	// for: a new partition's log may keep them by reference instead of
	// copying them (acceptor.Request.Shared).
	Shared *storage.Shared

	req         acceptor.Request
	p           *Partition
	hs          []batch.Header
	records     []byte
	n           int64
	idem, txnal bool
	end         atomic.Int64
	// pending is the coordinator record that implicitly added the
	// partition, set by the check on the acceptor goroutine.
	pending atomic.Pointer[txn.Pending]
}

// Records is the number of records the append carries.
func (ap *Append) Records() int64 { return ap.n }

// End is the offset after the append once it was accepted (0 before, or
// for a duplicate); set only with WantEnd.
func (ap *Append) End() int64 { return ap.end.Load() }

// TxnDone reports whether TxnWait would return at once.
func (ap *Append) TxnDone() bool {
	pend := ap.pending.Load()
	return pend == nil || pend.Done()
}

// TxnWait waits for the coordinator record that added the partition to
// its transaction, if the append made one.
func (ap *Append) TxnWait() error {
	pend := ap.pending.Load()
	if pend == nil {
		return nil
	}
	if err := pend.Wait(); err != nil {
		return errCode(kerr.KafkaStorageError, "%v", err)
	}
	return nil
}

// Enqueue queues validated batches (records, whose headers hs the
// validation parsed, n records in all) on the partition's acceptor. For
// idempotent batches the producer-state check runs on the acceptor
// goroutine, serialized with offset assignment (see producers.go); for
// transactional ones so do the coordinator's check (the producer is the
// current incarnation and added this partition to its ongoing
// transaction) and the opening of the transaction on the partition, so
// no batch can land after its transaction's marker.
func (p *Partition) Enqueue(ctx context.Context, records []byte, hs []batch.Header, n int64, durable bool, ap *Append) (acceptor.Pending, error) {
	// Kafka's leader stamps its leader epoch on every batch it appends,
	// whatever the producer sent (librdkafka sends 0, franz-go and Java
	// -1); Sluice's is always 0 (Metadata says so). Consumers order
	// commits by (epoch, offset): franz-go skipped commits of a -1 batch
	// after a 0 one as going backwards. The field is outside the CRC.
	for i, pos := 0, 0; i < len(hs); i++ {
		batch.SetPartitionLeaderEpoch(records[pos:], 0)
		hs[i].PartitionLeaderEpoch = 0
		pos += hs[i].Size()
	}
	// The validation parsed these bytes once (CRC32C included); its
	// headers travel with them to storage, which reads them no more.
	ap.p, ap.hs, ap.records, ap.n = p, hs, records, n
	ap.req = acceptor.Request{Batches: records, Headers: hs, Records: n, Durable: durable, SyncInline: ap.SyncInline, Shared: ap.Shared}
	for i := range hs {
		ap.idem = ap.idem || hs[i].Idempotent()
		ap.txnal = ap.txnal || hs[i].Transactional()
	}
	if ap.txnal {
		if ap.Txn == nil {
			return acceptor.Pending{}, errCode(kerr.CoordinatorNotAvailable, "the transaction coordinator is not running")
		}
		// The coordinator's check takes its locks: on the partition's
		// goroutine, never on the caller's.
		ap.req.NoInline = true
	}
	ap.req.Check = ap.check
	pend, err := p.acc.Enqueue(ctx, &ap.req)
	if err == nil {
		p.traffic.In(n, len(records))
	}
	return pend, p.appendError(err)
}

// check is the append's acceptor.Request.Check. Every append passes the
// partition's snapshot point (snapshot.go) before its own check, and
// counts toward the next snapshot once accepted.
func (ap *Append) check(base int64) (int64, bool, error) {
	p := ap.p
	p.snapshotPoint(base)
	switch {
	case ap.txnal:
		if err := ap.checkTxn(base); err != nil {
			return 0, false, err
		}
		dupBase, dup, err := p.pids.check(ap.hs, base)
		if err != nil || dup {
			return dupBase, dup, err
		}
		off := base
		for i := range ap.hs {
			if ap.hs[i].Transactional() {
				p.txns.begin(ap.hs[i].ProducerID, off)
			}
			off += int64(ap.hs[i].LastOffsetDelta) + 1
		}
	case ap.idem:
		if dupBase, dup, err := p.pids.check(ap.hs, base); err != nil || dup {
			return dupBase, dup, err
		}
	}
	p.snaps.since += int64(len(ap.records))
	if ap.WantEnd {
		ap.end.Store(base + ap.n)
	}
	return 0, false, nil
}

// checkTxn validates the transactional batches (the first at offset
// base) against the transaction coordinator, on the acceptor goroutine.
func (ap *Append) checkTxn(base int64) error {
	p := ap.p
	off := base
	for i := range ap.hs {
		h := &ap.hs[i]
		at := off
		off += int64(h.LastOffsetDelta) + 1
		if !h.Transactional() {
			continue
		}
		code, pend := ap.Txn.CheckProduceAt(h.ProducerID, h.ProducerEpoch, p.topic, p.index, at, ap.Implicit)
		if code != 0 {
			return codeErr(code, "transactional batch of producer %d epoch %d for %s/%d", h.ProducerID, h.ProducerEpoch, p.topic, p.index)
		}
		if pend != nil {
			ap.pending.Store(pend)
		}
	}
	return nil
}
