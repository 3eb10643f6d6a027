package broker

import (
	"time"

	"github.com/sluicedb/sluice/internal/partition"
)

// abortHanging is the safeguard against hanging transactions (KIP-664):
// after each sweep of the transaction coordinator, every partition
// aborts the transactions open on it for longer than
// TransactionMaxTimeout whose producer has no live coordinator state
// (partition.Partition.AbortHanging). No producer may keep a transaction
// open longer than that bound, so none of them can still be live.
func (b *Broker) abortHanging() {
	tc := b.txnc.Load()
	if tc == nil || b.closing.Load() {
		return
	}
	now := b.hangingNow().UnixMilli()
	for _, p := range b.allPartitions() {
		aborted, err := p.AbortHanging(b.stopCtx, now, b.cfg.txnMaxTimeout, tc.Live)
		b.metrics.hangingAborted.Add(float64(len(aborted)))
		if err != nil {
			b.cfg.logger.Warn("aborting a hanging transaction failed; the next sweep retries", "topic", p.Topic(), "partition", p.Index(), "err", err)
		}
	}
}

// StuckPartition is a partition whose last stable offset has lagged its
// high watermark for longer than the transaction timeout bound: an
// open transaction there is older than any producer may keep one, so it
// is hanging (or about to be aborted as one).
type StuckPartition struct {
	Topic           string
	Partition       int32
	HighWatermark   int64
	LastStable      int64
	ProducerID      int64 // the oldest open transaction's producer
	ProducerEpoch   int16
	OpenSince       time.Time // when the partition saw that transaction open
	CoordinatorLive bool      // the transaction coordinator holds live state for it
}

// StuckPartitions lists the partitions whose last stable offset lags
// the high watermark because of a transaction open longer than
// TransactionMaxTimeout, in topic and partition order.
func (b *Broker) StuckPartitions() []StuckPartition {
	now := b.hangingNow()
	tc := b.txnc.Load()
	var out []StuckPartition
	for _, p := range b.allPartitions() {
		open := p.OpenTxns(now.UnixMilli())
		if len(open) == 0 {
			continue
		}
		o := open[0]
		if now.UnixMilli()-o.SinceMs < b.cfg.txnMaxTimeout.Milliseconds() {
			continue // as AbortHanging ages them
		}
		hw := p.HighWatermark()
		lso := p.LastStableOffsetAt(hw)
		if lso >= hw {
			continue
		}
		out = append(out, StuckPartition{Topic: p.Topic(), Partition: p.Index(), HighWatermark: hw, LastStable: lso,
			ProducerID: o.ProducerID, ProducerEpoch: o.Epoch, OpenSince: time.UnixMilli(o.SinceMs), CoordinatorLive: tc != nil && tc.Live(o.ProducerID)})
	}
	return out
}

// allPartitions returns every partition of every topic, in topic and
// partition order.
func (b *Broker) allPartitions() []*partition.Partition {
	var out []*partition.Partition
	for _, t := range b.sortedTopics() {
		out = append(out, t.parts...)
	}
	return out
}

// hangingNow is the clock open transactions are aged by.
func (b *Broker) hangingNow() time.Time {
	if b.cfg.hangingNow != nil {
		return b.cfg.hangingNow()
	}
	return time.Now()
}
