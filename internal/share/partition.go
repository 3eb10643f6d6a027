package share

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a record's state in a share partition (KIP-932's numbering).
type State int8

// Record states.
const (
	Available    State = 0 // may be acquired
	Acquired     State = 1 // locked by one member until acknowledged or its lock expires
	Acknowledged State = 2 // accepted: never delivered again
	Archived     State = 4 // rejected, a gap, over the delivery limit, or never deliverable
)

func (s State) String() string {
	switch s {
	case Available:
		return "available"
	case Acquired:
		return "acquired"
	case Acknowledged:
		return "acknowledged"
	case Archived:
		return "archived"
	}
	return fmt.Sprintf("state(%d)", int8(s))
}

// AckType is an acknowledgement's type (the AcknowledgeTypes values).
type AckType int8

// Acknowledgement types.
const (
	AckGap     AckType = 0 // the offset holds no record: archived
	AckAccept  AckType = 1 // processed: acknowledged
	AckRelease AckType = 2 // give back: available again (archived at the delivery limit)
	AckReject  AckType = 3 // unprocessable: archived
	AckRenew   AckType = 4 // keep the lock for another lock duration (KIP-1222)
)

// Limits are the share-partition settings a state change obeys.
type Limits struct {
	// LockMs is the acquisition lock duration (share.record.lock.duration.ms).
	LockMs int64
	// DeliveryLimit is how many times a record is delivered before it
	// is archived (share.delivery.count.limit).
	DeliveryLimit int
	// MaxLocks bounds the in-flight window, end - start
	// (group.share.partition.max.record.locks).
	MaxLocks int
}

// Batch is one record batch of the log as an acquisition sees it.
type Batch struct {
	First, Last int64
	// Skip marks a batch never delivered: a control batch, or an
	// aborted transaction's batch under read_committed. Its available
	// offsets are archived.
	Skip bool
}

// Range is a run of acquired offsets with one delivery count.
type Range struct {
	First, Last int64
	Count       int16
}

// record is one in-flight offset.
type record struct {
	state    State
	count    int16  // deliveries so far
	owner    string // the member holding the lock (Acquired only)
	deadline int64  // the lock's expiry, unix milliseconds (Acquired only)
}

// spState is one share partition's state: the share-partition start
// offset (start, SPSO), below which every record is acknowledged or
// archived, and the in-flight records from start up to the end offset
// (start+len(recs), SPEO), the next offset never acquired. It has no
// lock and does no I/O: the coordinator's sharePartition guards it.
type spState struct {
	start int64
	recs  []record
	// dirty is the range of offsets changed since the last delta was
	// taken (lo > hi: none); moved is set when start moved.
	lo, hi int64
	moved  bool
}

func newState(start int64) *spState { return &spState{start: start, lo: 1, hi: 0} }

// end is the share-partition end offset.
func (s *spState) end() int64 { return s.start + int64(len(s.recs)) }

func (s *spState) at(off int64) *record {
	if off < s.start || off >= s.end() {
		return nil
	}
	return &s.recs[off-s.start]
}

func (s *spState) touch(off int64) {
	if s.lo > s.hi {
		s.lo, s.hi = off, off
		return
	}
	s.lo, s.hi = min(s.lo, off), max(s.hi, off)
}

// nextFetch is the offset an acquisition reads the log from: the first
// available in-flight record, else the end offset.
func (s *spState) nextFetch() int64 {
	for i := range s.recs {
		if s.recs[i].state == Available {
			return s.start + int64(i)
		}
	}
	return s.end()
}

// hasAvailable reports whether an in-flight record is available.
func (s *spState) hasAvailable() bool { return s.nextFetch() < s.end() }

// trimTo moves the start to logStart when the log no longer holds the
// records below it (retention or DeleteRecords): they are archived.
func (s *spState) trimTo(logStart int64) {
	if logStart <= s.start {
		return
	}
	n := logStart - s.start
	if n >= int64(len(s.recs)) {
		s.recs = s.recs[:0]
	} else {
		s.recs = append(s.recs[:0], s.recs[n:]...)
	}
	s.start = logStart
	s.moved = true
}

// advance moves the start past the leading acknowledged and archived
// records.
func (s *spState) advance() {
	n := 0
	for n < len(s.recs) && (s.recs[n].state == Acknowledged || s.recs[n].state == Archived) {
		n++
	}
	if n == 0 {
		return
	}
	s.recs = append(s.recs[:0], s.recs[n:]...)
	s.start += int64(n)
	s.moved = true
}

// acquire locks available records of batches (read from the log at
// nextFetch, in order) for member until now+LockMs, extending the
// in-flight window as far as lim.MaxLocks allows. It stops once max
// records are acquired: exactly there when strict (record-limit mode),
// else at the end of the batch (batch-optimized mode). It returns the
// acquired ranges and, per batch, whether any of its records were
// acquired (the batches to send).
func (s *spState) acquire(member string, batches []Batch, maxRecords int, strict bool, now int64, lim Limits) ([]Range, []bool) {
	var (
		out  []Range
		used = make([]bool, len(batches))
		n    int
	)
	add := func(off int64, count int16) {
		if l := len(out); l > 0 && out[l-1].Last == off-1 && out[l-1].Count == count {
			out[l-1].Last = off
			return
		}
		out = append(out, Range{First: off, Last: off, Count: count})
	}
batches:
	for bi, b := range batches {
		if n >= maxRecords {
			break
		}
		if b.Last < s.start {
			continue
		}
		for off := max(b.First, s.start); off <= b.Last; off++ {
			if strict && n >= maxRecords {
				break batches
			}
			if off >= s.end() {
				if len(s.recs) >= lim.MaxLocks {
					break batches
				}
				// Offsets the log skipped (compaction) are never deliverable.
				for s.end() < off && len(s.recs) < lim.MaxLocks {
					s.touch(s.end())
					s.recs = append(s.recs, record{state: Archived})
				}
				if len(s.recs) >= lim.MaxLocks {
					break batches
				}
				s.recs = append(s.recs, record{state: Available})
			}
			r := s.at(off)
			if r.state != Available {
				continue
			}
			s.touch(off)
			if b.Skip {
				r.state = Archived
				continue
			}
			r.state, r.owner, r.deadline = Acquired, member, now+lim.LockMs
			r.count++
			add(off, r.count)
			used[bi] = true
			n++
		}
	}
	s.advance()
	return out, used
}

// ackError is an acknowledgement's Kafka error.
type ackError struct {
	code int16
	msg  string
}

func (e *ackError) Error() string { return e.msg }

// Code is the Kafka error code.
func (e *ackError) Code() int16 { return e.code }

// ack applies one acknowledgement batch of member: offsets first..last
// with types, one for all of them or one per offset. Every offset must
// be acquired by member; otherwise nothing changes and the error is
// INVALID_RECORD_STATE (or INVALID_REQUEST for a malformed batch).
func (s *spState) ack(member string, first, last int64, types []int8, renewOK bool, now int64, lim Limits) error {
	if first < 0 || last < first {
		return &ackError{kerr.InvalidRequest.Code, fmt.Sprintf("acknowledgement batch %d-%d is not a range of offsets", first, last)}
	}
	n := last - first + 1
	if len(types) != 1 && int64(len(types)) != n {
		return &ackError{kerr.InvalidRequest.Code, fmt.Sprintf("acknowledgement batch %d-%d has %d types, want 1 or %d", first, last, len(types), n)}
	}
	maxType := AckReject
	if renewOK {
		maxType = AckRenew
	}
	for _, t := range types {
		if t < int8(AckGap) || t > int8(maxType) {
			return &ackError{kerr.InvalidRequest.Code, fmt.Sprintf("acknowledgement type %d is not one of 0-%d", t, maxType)}
		}
	}
	for off := first; off <= last; off++ {
		r := s.at(off)
		if r == nil || r.state != Acquired || r.owner != member {
			st := "not in flight"
			if r != nil {
				st = r.state.String()
				if r.state == Acquired {
					st = "acquired by another member or its lock expired"
				}
			}
			return &ackError{kerr.InvalidRecordState.Code, fmt.Sprintf("offset %d is %s, not acquired by member %s", off, st, member)}
		}
	}
	for off := first; off <= last; off++ {
		t := AckType(types[0])
		if len(types) > 1 {
			t = AckType(types[off-first])
		}
		r := s.at(off)
		switch t {
		case AckAccept:
			r.state = Acknowledged
		case AckGap, AckReject:
			r.state = Archived
		case AckRelease:
			release(r, lim)
		case AckRenew:
			r.deadline = now + lim.LockMs
			continue
		}
		r.owner, r.deadline = "", 0
		s.touch(off)
	}
	s.advance()
	return nil
}

// release gives an acquired record back: available, or archived once
// it reached the delivery limit.
func release(r *record, lim Limits) {
	r.owner, r.deadline = "", 0
	if int(r.count) >= lim.DeliveryLimit {
		r.state = Archived
		return
	}
	r.state = Available
}

// expire releases the records whose locks expired by now, and those of
// member when member is not "" (a member that left). It reports whether
// any record changed.
func (s *spState) expire(now int64, member string, lim Limits) bool {
	changed := false
	for i := range s.recs {
		r := &s.recs[i]
		if r.state != Acquired {
			continue
		}
		if r.deadline <= now || (member != "" && r.owner == member) {
			release(r, lim)
			s.touch(s.start + int64(i))
			changed = true
		}
	}
	if changed {
		s.advance()
	}
	return changed
}

// nextDeadline is the earliest lock expiry, or 0 with no lock held.
func (s *spState) nextDeadline() int64 {
	var d int64
	for i := range s.recs {
		if r := &s.recs[i]; r.state == Acquired && (d == 0 || r.deadline < d) {
			d = r.deadline
		}
	}
	return d
}

// counts returns the in-flight records by state.
func (s *spState) counts() (available, acquired, acknowledged, archived int) {
	for i := range s.recs {
		switch s.recs[i].state {
		case Available:
			available++
		case Acquired:
			acquired++
		case Acknowledged:
			acknowledged++
		case Archived:
			archived++
		}
	}
	return
}
