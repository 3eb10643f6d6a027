package broker

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/groups"
	"github.com/sluicedb/sluice/internal/txn"
)

// openTxn opens the transaction coordinator over the data directory,
// with markers written through the partitions' acceptors and committed
// offsets through the group coordinator g.
func (b *Broker) openTxn(g *groups.Coordinator) (*txn.Coordinator, error) {
	return txn.Open(txn.Config{
		FS:            b.fs,
		Dir:           b.layout.TransactionsDir(),
		Fsync:         b.cfg.fsync,
		WAL:           b.wal,
		Logger:        b.componentLogger("txn"),
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
				return p.Log().NextOffset()
			}
			return -1
		},
		CommittedSince:   b.committedSince,
		OpenTransactions: b.openTransactions,
		AfterSweep:       b.abortHanging,
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
