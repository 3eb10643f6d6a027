package broker

import (
	"context"
	"errors"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/txn"
)

// The transaction coordinator's view of the partitions: markers written
// through their acceptors, and what its recovery asks of them.

// committedSince reports whether partition tp holds a COMMIT marker of
// pid at an offset >= from, and the first one's epoch.
func (b *Broker) committedSince(pid int64, tp txn.TopicPartition, from int64) (int16, bool, error) {
	p := b.partition(tp.Topic, tp.Partition)
	if p == nil {
		return 0, false, nil
	}
	return p.CommittedSince(pid, from)
}

// openTransactions lists the transactions open on every partition with
// the epoch of their batches.
func (b *Broker) openTransactions() []txn.OpenTxn {
	var out []txn.OpenTxn
	for _, t := range b.sortedTopics() {
		for _, p := range t.parts {
			out = append(out, p.OpenTransactions()...)
		}
	}
	return out
}

// coordinatorEpoch is the epoch of the broker's transaction coordinator,
// written in its markers: on one node its log never changes leader, so it
// is 0, as a fresh Kafka cluster's __transaction_state leader epoch.
const coordinatorEpoch = 0

// writeMarkers writes a COMMIT or ABORT marker for pid to each partition
// that has an open transaction of pid with batches at batchEpoch or
// below (Partition.EnqueueMarker), durably, in parallel. Partitions that
// no longer exist are skipped.
func (b *Broker) writeMarkers(pid int64, epoch int16, commit bool, parts []txn.TopicPartition, batchEpoch int16) error {
	type queued struct {
		p   *partition.Partition
		pen acceptor.Pending
	}
	var waits []queued
	var errs []error
	ts := timeNowMs()
	for _, tp := range parts {
		p := b.partition(tp.Topic, tp.Partition)
		if p == nil {
			continue
		}
		enqueue := p.EnqueueMarker
		if len(parts) == 1 {
			// Waited for at once: written and synced here when the
			// partition is idle, rather than handed to the WAL's
			// flusher and waited for (markers of several partitions
			// are queued together, their syncs in parallel).
			enqueue = p.EnqueueMarkerInline
		}
		pen, err := enqueue(pid, epoch, commit, batchEpoch, coordinatorEpoch, ts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		waits = append(waits, queued{p, pen})
	}
	for _, q := range waits {
		if _, err := q.p.Wait(context.Background(), q.pen); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
