package broker

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/groups"
	"github.com/sluicedb/sluice/internal/txn"
)

// txnDir holds the transaction coordinator's internal log.
const txnDir = "transactions"

// openTxn opens the transaction coordinator over the data directory,
// with markers written through the partitions' acceptors and committed
// offsets through the group coordinator g.
func (b *Broker) openTxn(g *groups.Coordinator) (*txn.Coordinator, error) {
	return txn.Open(txn.Config{
		FS:            b.fs,
		Dir:           filepath.Join(b.cfg.dataDir, txnDir),
		SyncPolicy:    b.cfg.fsync,
		WAL:           b.wal,
		Logger:        b.cfg.logger,
		MaxTimeout:    b.cfg.txnMaxTimeout,
		SweepInterval: b.cfg.txnSweep,
		AllocPID:      b.allocPID,
		WriteMarkers:  b.writeMarkers,
		CommitOffsets: func(group string, offs []txn.Offset, notBeforeMs int64) error {
			out := make([]groups.TxnOffset, len(offs))
			for i, o := range offs {
				out[i] = groups.TxnOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
			}
			return g.CommitTxnOffsets(group, out, notBeforeMs)
		},
		PartitionExists: b.partitionExists,
		EndOffset: func(topic string, idx int32) int64 {
			if p := b.partition(topic, idx); p != nil {
				return p.log.NextOffset()
			}
			return -1
		},
		CommittedSince:   b.committedSince,
		OpenTransactions: b.openTransactions,
		CheckMember:      g.CheckMember,
	})
}

// txnCoordinator returns the running transaction coordinator, or an error
// with COORDINATOR_NOT_AVAILABLE.
func (b *Broker) txnCoordinator() (*txn.Coordinator, error) {
	if tc := b.txnc.Load(); tc != nil && !b.closing.Load() {
		return tc, nil
	}
	return nil, fmt.Errorf("%w: the transaction coordinator is not running", kerr.CoordinatorNotAvailable)
}

// fencedCode turns PRODUCER_FENCED into INVALID_PRODUCER_EPOCH for
// request versions older than the one that introduced it (KIP-588), as
// Kafka does.
func fencedCode(code int16, version, since int16) int16 {
	if code == kerr.ProducerFenced.Code && version < since {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// timeNowMs is the wall clock in milliseconds (marker timestamps,
// transaction durations).
func timeNowMs() int64 { return time.Now().UnixMilli() }

// txnAdd carries, for one partition of a transactional Produce, the
// coordinator record that implicitly added the partition to its
// transaction (KIP-890 transaction version 2) from the batch's check on
// the partition's acceptor goroutine to the reply, which waits for it.
// nil (a non-transactional request, or AppendBatch) checks as a v11
// request: the partition must have been added.
type txnAdd struct {
	implicit bool                        // Produce v12+: add the partition when missing
	pending  atomic.Pointer[txn.Pending] // set by check on the acceptor goroutine
}

// check validates the transactional batches of hs (the first at offset
// base) against the transaction coordinator. It runs on p's acceptor
// goroutine.
func (a *txnAdd) check(tc *txn.Coordinator, p *partition, hs []batch.Header, base int64) error {
	off := base
	for i := range hs {
		h := &hs[i]
		at := off
		off += int64(h.LastOffsetDelta) + 1
		if !h.Transactional() {
			continue
		}
		code, pend := tc.CheckProduceAt(h.ProducerID, h.ProducerEpoch, p.topic, p.index, at, a != nil && a.implicit)
		if code != 0 {
			return codeErr(code, "transactional batch of producer %d epoch %d for %s/%d", h.ProducerID, h.ProducerEpoch, p.topic, p.index)
		}
		if a != nil && pend != nil {
			a.pending.Store(pend)
		}
	}
	return nil
}

// done reports whether wait would return at once.
func (a *txnAdd) done() bool {
	if a == nil {
		return true
	}
	pend := a.pending.Load()
	return pend == nil || pend.Done()
}

// wait waits for the record that added the partition, if any.
func (a *txnAdd) wait() error {
	if a == nil {
		return nil
	}
	pend := a.pending.Load()
	if pend == nil {
		return nil
	}
	if err := pend.Wait(); err != nil {
		return errCode(kerr.KafkaStorageError, "%v", err)
	}
	return nil
}
