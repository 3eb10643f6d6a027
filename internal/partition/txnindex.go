package partition

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/txn"
)

// Transactions on a partition.
//
// Each partition tracks the transactions open on it (producer id → offset
// of the transaction's first batch) and the aborted ones (producer id,
// first offset, offset of the ABORT marker). Transactional batches and
// markers update it on the acceptor goroutine, serialized with offset
// assignment; fetches read it. On open it is rebuilt from the log in the
// same pass that rebuilds the idempotent-producer table.
//
// The last stable offset (LSO) is the first offset of the oldest open
// transaction, or the high watermark when none is open (and never past
// it). read_committed fetches stop at the LSO and get the aborted
// transactions their range overlaps, so the client drops those records.
type txnIndex struct {
	mu      sync.Mutex      // guards open and aborted
	open    map[int64]int64 // producer id → first offset of its open transaction
	aborted []abortedTxn    // in marker order (increasing last)
}

type abortedTxn struct {
	pid         int64
	first, last int64 // last: the ABORT marker's offset
}

func newTxnIndex() *txnIndex { return &txnIndex{open: map[int64]int64{}} }

// replaceWith makes x hold o's state (o is not used afterwards).
func (x *txnIndex) replaceWith(o *txnIndex) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.open, x.aborted = o.open, o.aborted
}

// begin records a transactional batch of pid at offset off.
func (x *txnIndex) begin(pid, off int64) {
	x.mu.Lock()
	if _, ok := x.open[pid]; !ok {
		x.open[pid] = off
	}
	x.mu.Unlock()
}

// end records pid's marker at offset off; it reports false (write no
// marker) when pid has no open transaction here.
func (x *txnIndex) end(pid int64, commit bool, off int64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	first, ok := x.open[pid]
	if !ok {
		return false
	}
	delete(x.open, pid)
	if !commit {
		x.aborted = append(x.aborted, abortedTxn{pid: pid, first: first, last: off})
	}
	return true
}

// lso is the last stable offset given the high watermark.
func (x *txnIndex) lso(hw int64) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, first := range x.open {
		hw = min(hw, first)
	}
	return hw
}

// abortedIn returns the aborted transactions that overlap [from, to).
func (x *txnIndex) abortedIn(from, to int64) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.aborted), func(i int) bool { return x.aborted[i].last >= from })
	var out []kmsg.FetchResponseTopicPartitionAbortedTransaction
	for _, a := range x.aborted[i:] {
		if a.first < to {
			out = append(out, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.pid, FirstOffset: a.first})
		}
	}
	return out
}

// abortedBatch reports whether the transactional data batch h belongs
// to an aborted transaction: one of its producer's aborted transactions
// spans its offset (the log cleaner removes those records).
func (x *txnIndex) abortedBatch(h *batch.Header) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.aborted), func(i int) bool { return x.aborted[i].last > h.BaseOffset })
	for _, a := range x.aborted[i:] {
		if a.pid == h.ProducerID && a.first <= h.BaseOffset {
			return true
		}
	}
	return false
}

// trim forgets aborted transactions whose marker is below start (removed
// by retention).
func (x *txnIndex) trim(start int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.aborted), func(i int) bool { return x.aborted[i].last >= start })
	if i > 0 {
		x.aborted = append(x.aborted[:0:0], x.aborted[i:]...)
	}
}

// openFirst returns the first offset of pid's open transaction, -1 when
// it has none (DescribeProducers).
func (x *txnIndex) openFirst(pid int64) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if f, ok := x.open[pid]; ok {
		return f
	}
	return -1
}

// replay records a batch read back from the log. marker is the control
// batch's type (commit true) when h is a control batch.
func (x *txnIndex) replay(h *batch.Header, commit bool) {
	switch {
	case h.Control() && h.Transactional():
		x.end(h.ProducerID, commit, h.BaseOffset)
	case h.Transactional():
		x.begin(h.ProducerID, h.BaseOffset)
	}
}

// encodeMarker returns a transaction marker batch (base offset 0) for
// producer pid at epoch: COMMIT or ABORT.
func encodeMarker(pid int64, epoch int16, commit bool, coordEpoch int32, ts int64) []byte {
	t := batch.ControlAbort
	if commit {
		t = batch.ControlCommit
	}
	return batch.AppendMarker(nil, 0, 0, batch.Marker{Type: t, ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coordEpoch, Timestamp: ts})
}

// readMarker reads the control batch of header h from l.
func readMarker(l *storage.Log, h *batch.Header) (batch.Marker, error) {
	s, err := l.Read(h.BaseOffset, h.BaseOffset+1, h.Size())
	if err != nil {
		return batch.Marker{}, err
	}
	raw, err := s.Bytes()
	if err != nil {
		return batch.Marker{}, err
	}
	if len(raw) < h.Size() {
		return batch.Marker{}, fmt.Errorf("control batch at offset %d cut short", h.BaseOffset)
	}
	m, err := batch.ParseMarker(h, raw[:h.Size()])
	if err != nil {
		return batch.Marker{}, fmt.Errorf("control batch at offset %d: %w", h.BaseOffset, err)
	}
	return m, nil
}

// errMarkerFound stops a header scan that found what it looked for.
var errMarkerFound = errors.New("found")

// CommittedSince reports whether the partition holds a COMMIT marker of
// pid at an offset >= from, and the first one's epoch (the transaction
// coordinator's recovery asks, for transactions it finds open).
func (p *Partition) CommittedSince(pid int64, from int64) (int16, bool, error) {
	if p.txns.openFirst(pid) >= 0 {
		// pid's transaction is still open here: no marker of it was
		// written (none of pid's batches is accepted after its
		// transaction's first marker).
		return 0, false, nil
	}
	found, epoch := false, int16(0)
	err := p.log.ScanHeaders(max(from, p.log.StartOffset()), func(h batch.Header) error {
		if h.BaseOffset < from || h.ProducerID != pid || !h.Control() || !h.Transactional() {
			return nil
		}
		m, err := readMarker(p.log, &h)
		if err != nil {
			return err
		}
		if m.Type == batch.ControlCommit {
			found, epoch = true, h.ProducerEpoch
			return errMarkerFound
		}
		return nil
	})
	if err != nil && !errors.Is(err, errMarkerFound) {
		return 0, false, fmt.Errorf("look for COMMIT markers in %s/%d: %w", p.topic, p.index, err)
	}
	return epoch, found, nil
}

// OpenTransactions lists the transactions open on the partition with the
// epoch of their batches (the transaction coordinator's recovery adopts
// those whose implicit add did not become durable).
func (p *Partition) OpenTransactions() []txn.OpenTxn {
	p.txns.mu.Lock()
	open := make(map[int64]int64, len(p.txns.open))
	for pid, first := range p.txns.open {
		open[pid] = first
	}
	p.txns.mu.Unlock()
	var out []txn.OpenTxn
	for pid, first := range open {
		if epoch, ok := p.pids.epochOf(pid); ok {
			out = append(out, txn.OpenTxn{PID: pid, Epoch: epoch, TP: txn.TopicPartition{Topic: p.topic, Partition: p.index}, First: first})
		}
	}
	return out
}

// OpenTxnFirst returns the first offset of pid's open transaction on the
// partition, -1 when it has none.
func (p *Partition) OpenTxnFirst(pid int64) int64 { return p.txns.openFirst(pid) }

// epochOf returns pid's epoch on the partition: that of its last batch or
// marker.
func (t *producerTable) epochOf(pid int64) (int16, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.m[pid]; s != nil {
		return s.epoch, true
	}
	return 0, false
}

// EnqueueMarker queues pid's COMMIT or ABORT marker (at epoch, stamped
// with ts) on the acceptor. Its check runs serialized with the
// partition's appends: with no open transaction of pid the marker is not
// written (a marker rewritten by recovery, or a partition that got no
// records), nor when pid's batches here carry an epoch above batchEpoch
// (a newer transaction's, written after an EndTxn v5 bumped the epoch,
// met by recovery finishing the older one); otherwise the transaction is
// closed and the producer's epoch raised to the marker's.
func (p *Partition) EnqueueMarker(pid int64, epoch int16, commit bool, batchEpoch int16, coordEpoch int32, ts int64) (acceptor.Pending, error) {
	return p.enqueueMarker(pid, epoch, commit, batchEpoch, coordEpoch, ts, false)
}

// EnqueueMarkerInline is EnqueueMarker for a caller that waits for this
// marker before anything else (a transaction's only marker): when the
// partition's goroutine is idle, the marker is written and made durable
// on the caller's goroutine, which leads the WAL round itself
// (acceptor.Request.SyncInline and LeadWAL), and Enqueue returns after it.
func (p *Partition) EnqueueMarkerInline(pid int64, epoch int16, commit bool, batchEpoch int16, coordEpoch int32, ts int64) (acceptor.Pending, error) {
	return p.enqueueMarker(pid, epoch, commit, batchEpoch, coordEpoch, ts, true)
}

func (p *Partition) enqueueMarker(pid int64, epoch int16, commit bool, batchEpoch int16, coordEpoch int32, ts int64, inline bool) (acceptor.Pending, error) {
	m := encodeMarker(pid, epoch, commit, coordEpoch, ts)
	req := &acceptor.Request{Batches: m, Records: 1, Durable: true, SyncInline: inline, LeadWAL: inline}
	req.Check = func(base int64) (int64, bool, error) {
		if cur, ok := p.pids.epochOf(pid); ok && cur > batchEpoch && p.txns.openFirst(pid) >= 0 {
			return -1, true, nil
		}
		if !p.txns.end(pid, commit, base) {
			return -1, true, nil
		}
		p.pids.marker(pid, epoch, coordEpoch, ts)
		return 0, false, nil
	}
	pend, err := p.acc.Enqueue(context.Background(), req)
	return pend, p.appendError(err)
}
