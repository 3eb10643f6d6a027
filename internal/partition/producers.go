package partition

import (
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/batch"
)

// Idempotent producers.
//
// Each partition keeps, per producer id, the producer's epoch and the
// sequence ranges and offsets of its last dedupWindow batches. The table
// is touched only by the partition's acceptor goroutine, inside
// acceptor.Request.Check, so the checks are serialized with offset
// assignment; New rebuilds it from the batch headers in the log before the
// acceptor starts. For a batch from producer p with epoch e and sequences
// [first, last]:
//
//   - e below p's epoch: INVALID_PRODUCER_EPOCH (fenced by a newer session).
//   - e above p's epoch: a new session; first must be 0.
//   - same epoch, [first, last] equal to a remembered batch: a duplicate
//     (a retry); it is answered with the original base offset and nothing
//     is written.
//   - same epoch, first = the last batch's last + 1 (wrapping at MaxInt32):
//     accepted.
//   - otherwise OUT_OF_ORDER_SEQUENCE_NUMBER.
//
// A producer the partition has no state for (never seen, or every batch
// of it removed by retention) must start at sequence 0; any other gets
// UNKNOWN_PRODUCER_ID, which clients answer by resetting their producer id.
const dedupWindow = 5

type seqEntry struct {
	first, last int32
	base        int64 // offset of the batch's first record
}

type producerState struct {
	epoch int16
	// marked tells that a transaction marker of the producer was
	// written; coordEpoch is the coordinator epoch it carried, kept
	// across epoch bumps as Kafka keeps it (DescribeProducers reports it).
	marked     bool
	coordEpoch int32
	// lastTs is the max timestamp of the producer's last batch or
	// marker (Unix ms, as the batch header carries it), -1 when unknown
	// (state restored from a snapshot older than the field);
	// DescribeProducers reports it as LastTimestamp, as Kafka does.
	lastTs  int64
	batches [dedupWindow]seqEntry // ring; newest at (head-1) mod dedupWindow
	head    int
	n       int
}

// newest is the last batch's entry; s.n must be > 0.
func (s *producerState) newest() *seqEntry {
	return &s.batches[(s.head+dedupWindow-1)%dedupWindow]
}

func (s *producerState) push(e seqEntry) {
	s.batches[s.head] = e
	s.head = (s.head + 1) % dedupWindow
	s.n = min(s.n+1, dedupWindow)
}

func (s *producerState) find(first, last int32) (seqEntry, bool) {
	for i := 0; i < s.n; i++ {
		e := s.batches[(s.head+dedupWindow-1-i)%dedupWindow]
		if e.first == first && e.last == last {
			return e, true
		}
	}
	return seqEntry{}, false
}

type producerTable struct {
	// mu guards m, maxPID, last and lastPID. Only the partition's
	// acceptor goroutine writes them (and New before it starts);
	// DescribeProducers reads.
	mu     sync.Mutex
	m      map[int64]*producerState
	maxPID int64 // the largest producer id seen (for id allocation after restart)
	// last is m[lastPID] as check last found or stored it (nil: none):
	// a partition's appends nearly always come from one producer, and
	// this spares each check a map lookup on cold memory. Whatever
	// replaces an entry of m, or m itself, clears it.
	last    *producerState
	lastPID int64
}

// lookupLocked returns m[pid] through the last-used cache. The caller
// holds mu.
func (t *producerTable) lookupLocked(pid int64) *producerState {
	if t.last != nil && t.lastPID == pid {
		return t.last
	}
	s := t.m[pid]
	if s != nil {
		t.last, t.lastPID = s, pid
	}
	return s
}

// activeProducer is one producer's state as DescribeProducers reports it.
type activeProducer struct {
	pid        int64
	epoch      int16
	lastSeq    int32
	coordEpoch int32 // -1: no marker written
	lastTs     int64 // -1: unknown
}

// active lists the producers with state on the partition.
func (t *producerTable) active() []activeProducer {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]activeProducer, 0, len(t.m))
	for id, s := range t.m {
		last := int32(-1)
		if s.n > 0 {
			last = s.newest().last
		}
		ce := int32(-1)
		if s.marked {
			ce = s.coordEpoch
		}
		out = append(out, activeProducer{pid: id, epoch: s.epoch, lastSeq: last, coordEpoch: ce, lastTs: s.lastTs})
	}
	return out
}

// replaceWith makes t hold o's state (o is not used afterwards).
func (t *producerTable) replaceWith(o *producerTable) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m, t.maxPID = o.m, max(t.maxPID, o.maxPID)
	t.last = nil
}

// maxID returns the largest producer id seen.
func (t *producerTable) maxID() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.maxPID
}

func newProducerTable() *producerTable {
	return &producerTable{m: map[int64]*producerState{}, maxPID: -1}
}

// lastSeq is the last sequence of a batch starting at first.
func lastSeq(h *batch.Header) int32 {
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (math.MaxInt32 + 1))
}

func nextSeq(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

// marker records a transaction marker of producer pid at epoch, written
// by a coordinator at coordEpoch and stamped ts: a higher epoch (the
// coordinator fenced the producer) starts a new session whose first
// batch must have sequence 0.
func (t *producerTable) marker(pid int64, epoch int16, coordEpoch int32, ts int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.markerLocked(pid, epoch, coordEpoch, ts)
}

func (t *producerTable) markerLocked(pid int64, epoch int16, coordEpoch int32, ts int64) {
	t.maxPID = max(t.maxPID, pid)
	s := t.m[pid]
	if s == nil || epoch > s.epoch {
		s = &producerState{epoch: epoch}
		t.m[pid] = s
		t.last = nil
	}
	s.marked, s.coordEpoch, s.lastTs = true, coordEpoch, ts
}

// coordEpochOf is the coordinator epoch of pid's last marker, -1 when
// none was written.
func (t *producerTable) coordEpochOf(pid int64) int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.m[pid]; s != nil && s.marked {
		return s.coordEpoch
	}
	return -1
}

// replay records a batch read back from the log, without checks;
// coordEpoch is a control batch's coordinator epoch.
func (t *producerTable) replay(h *batch.Header, coordEpoch int32) {
	if !h.Idempotent() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.Control() {
		t.markerLocked(h.ProducerID, h.ProducerEpoch, coordEpoch, h.MaxTimestamp)
		return
	}
	t.maxPID = max(t.maxPID, h.ProducerID)
	s := t.m[h.ProducerID]
	if s == nil || h.ProducerEpoch != s.epoch {
		if s != nil && h.ProducerEpoch < s.epoch {
			return
		}
		ns := &producerState{epoch: h.ProducerEpoch}
		if s != nil {
			ns.marked, ns.coordEpoch = s.marked, s.coordEpoch
		}
		s = ns
		t.m[h.ProducerID] = s
		t.last = nil
	}
	s.push(seqEntry{first: h.BaseSequence, last: lastSeq(h), base: h.BaseOffset})
	s.lastTs = h.MaxTimestamp
}

// check decides about the batches of one append whose first record would
// get offset base. hs are their headers in order. It returns dup when
// the append is a retry of a batch already written (dupBase is that
// batch's offset); otherwise, if the append is accepted, the state is
// updated as if it were written.
func (t *producerTable) check(hs []batch.Header, base int64) (dupBase int64, dup bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Decide on every batch against scratch copies of the states, then
	// commit, so a rejected append changes nothing. An append's batches
	// nearly always come from one producer: the copies live in a small
	// array, not a map, and are written back in place.
	var arr [1]scratchState
	scratch := arr[:0]
	off := base
	for i := range hs {
		h := &hs[i]
		if !h.Idempotent() {
			off += int64(h.LastOffsetDelta) + 1
			continue
		}
		j := 0
		for j < len(scratch) && scratch[j].pid != h.ProducerID {
			j++
		}
		if j == len(scratch) {
			sc := scratchState{pid: h.ProducerID, cur: t.lookupLocked(h.ProducerID)}
			if sc.cur != nil {
				sc.st, sc.has = *sc.cur, true
			}
			scratch = append(scratch, sc)
		}
		sc := &scratch[j]
		first, last := h.BaseSequence, lastSeq(h)
		switch {
		case h.BaseSequence < 0:
			return 0, false, errCode(kerr.InvalidRecord, "producer %d: batch has a negative base sequence %d", h.ProducerID, h.BaseSequence)
		case !sc.has || h.ProducerEpoch > sc.st.epoch:
			if first != 0 {
				if !sc.has {
					return 0, false, errCode(kerr.UnknownProducerID, "producer %d has no state on this partition and its batch starts at sequence %d, not 0", h.ProducerID, first)
				}
				return 0, false, errCode(kerr.OutOfOrderSequenceNumber, "producer %d epoch %d: a new epoch must start at sequence 0, got %d", h.ProducerID, h.ProducerEpoch, first)
			}
			sc.st, sc.has = producerState{epoch: h.ProducerEpoch, marked: sc.st.marked, coordEpoch: sc.st.coordEpoch}, true
		case h.ProducerEpoch < sc.st.epoch:
			return 0, false, errCode(kerr.InvalidProducerEpoch, "producer %d: epoch %d is older than the current epoch %d", h.ProducerID, h.ProducerEpoch, sc.st.epoch)
		default:
			if e, ok := sc.st.find(first, last); ok {
				if len(hs) != 1 {
					return 0, false, errCode(kerr.DuplicateSequenceNumber, "producer %d: batch with sequences %d..%d was already written, inside a multi-batch append", h.ProducerID, first, last)
				}
				return e.base, true, nil
			}
			if sc.st.n == 0 {
				if first != 0 {
					return 0, false, errCode(kerr.OutOfOrderSequenceNumber, "producer %d epoch %d: the first batch of an epoch must start at sequence 0, got %d", h.ProducerID, sc.st.epoch, first)
				}
			} else if want := nextSeq(sc.st.newest().last); first != want {
				return 0, false, errCode(kerr.OutOfOrderSequenceNumber, "producer %d epoch %d: expected sequence %d, got %d", h.ProducerID, sc.st.epoch, want, first)
			}
		}
		sc.st.push(seqEntry{first: first, last: last, base: off})
		sc.st.lastTs = h.MaxTimestamp
		off += int64(h.LastOffsetDelta) + 1
	}
	for i := range scratch {
		sc := &scratch[i]
		if sc.cur != nil {
			*sc.cur = sc.st
		} else {
			st := sc.st
			t.m[sc.pid] = &st
			t.last, t.lastPID = &st, sc.pid
		}
		t.maxPID = max(t.maxPID, sc.pid)
	}
	return 0, false, nil
}

// scratchState is a producer's state as check decides on an append.
type scratchState struct {
	pid int64
	cur *producerState // the table's entry (nil: none yet), written back in place
	st  producerState
	has bool // the producer has state (from the table or an earlier batch)
}
