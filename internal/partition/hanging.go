package partition

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Hanging transactions (KIP-664).
//
// A transaction is open on a partition from its first batch to its
// marker, and only the transaction coordinator writes markers. If the
// coordinator lost the transaction's state (a crash that took its log),
// the marker never comes: the partition's last stable offset stays at
// the transaction's first offset for ever, and read_committed consumers
// see nothing after it, committed transactions included.
//
// As a safeguard the partition notes when it first saw each transaction
// open (its broker's clock: at the first batch, or at Open for one
// found in the log) and AbortHanging aborts one open longer than the
// transaction timeout bound whose producer has no live coordinator
// state, with an ABORT marker through the acceptor, as an operator would
// with WriteTxnMarkers.

// openWatch remembers when the partition first saw each open
// transaction. It is brought up to date lazily (OpenTxns), so the
// append path does not touch it.
type openWatch struct {
	mu   sync.Mutex // guards seen
	seen map[int64]openSeen
}

type openSeen struct {
	first   int64 // the transaction's first offset
	sinceMs int64 // when it was first seen open
}

// OpenTxn is a transaction open on the partition.
type OpenTxn struct {
	ProducerID  int64
	Epoch       int16 // the producer's epoch on the partition
	FirstOffset int64
	// SinceMs is when the partition first saw it open (Unix ms, the
	// broker's clock): at its first batch, or when the partition was
	// opened for one found in the log, or at the first OpenTxns after.
	SinceMs int64
}

// OpenTxns lists the transactions open on the partition, oldest first,
// noting those not seen before as open since nowMs.
func (p *Partition) OpenTxns(nowMs int64) []OpenTxn {
	p.txns.mu.Lock()
	open := make(map[int64]int64, len(p.txns.open))
	for pid, first := range p.txns.open {
		open[pid] = first
	}
	p.txns.mu.Unlock()
	w := &p.openWatch
	w.mu.Lock()
	if w.seen == nil {
		w.seen = map[int64]openSeen{}
	}
	for pid := range w.seen {
		if _, ok := open[pid]; !ok {
			delete(w.seen, pid)
		}
	}
	out := make([]OpenTxn, 0, len(open))
	for pid, first := range open {
		s, ok := w.seen[pid]
		if !ok || s.first != first {
			s = openSeen{first: first, sinceMs: nowMs}
			w.seen[pid] = s
		}
		epoch, _ := p.pids.epochOf(pid)
		out = append(out, OpenTxn{ProducerID: pid, Epoch: epoch, FirstOffset: first, SinceMs: s.sinceMs})
	}
	w.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	return out
}

// AbortHanging aborts the transactions open on the partition for at
// least timeout (by OpenTxns' clock, nowMs) whose producer live says has
// no live coordinator state: it writes an ABORT marker at the producer's
// epoch on the partition and waits until it is durable. It returns those
// it aborted; each is logged at WARN. The last stable offset then moves
// past them.
func (p *Partition) AbortHanging(ctx context.Context, nowMs int64, timeout time.Duration, live func(pid int64) bool) ([]OpenTxn, error) {
	var aborted []OpenTxn
	for _, o := range p.OpenTxns(nowMs) {
		if nowMs-o.SinceMs < timeout.Milliseconds() || live(o.ProducerID) {
			continue
		}
		pend, err := p.EnqueueMarker(o.ProducerID, o.Epoch, false, o.Epoch, max(p.pids.coordEpochOf(o.ProducerID), 0), nowMs)
		if err == nil {
			_, err = p.Wait(ctx, pend)
		}
		if err != nil {
			return aborted, fmt.Errorf("abort hanging transaction of producer %d on %s/%d: %w", o.ProducerID, p.topic, p.index, err)
		}
		if p.txns.openFirst(o.ProducerID) == o.FirstOffset {
			continue // the marker was not written: a newer batch of the producer
		}
		p.lg.Warn("partition: aborted a hanging transaction: it was open longer than the transaction timeout bound and its producer has no live transaction coordinator state",
			"producer_id", o.ProducerID, "epoch", o.Epoch, "first_offset", o.FirstOffset,
			"open_for", time.Duration(nowMs-o.SinceMs)*time.Millisecond, "timeout", timeout)
		aborted = append(aborted, o)
	}
	return aborted, nil
}
