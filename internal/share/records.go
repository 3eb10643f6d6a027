package share

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The durable records (drawn in doc.go). Keys:
//
//	'g' group                                  a share group exists (value: groupValue)
//	'p' uvarint(len(group)) group tid[16] p[4]  a share partition's state (value: spValue)
//
// A nil value is a tombstone: the group or share partition is gone.

const recordVersion = 0

// maxWindow bounds the in-flight window a stored value may describe: far
// above group.share.partition.max.record.locks (at most 10000), so that
// a damaged value is refused rather than allocated.
const maxWindow = 1 << 20

// Kinds of share-partition value.
const (
	kindDelta = 0 // start, then the runs of offsets whose state changed
	kindFull  = 1 // start, then runs covering every in-flight offset
)

// ErrBadRecord marks a share-state record that does not decode.
var ErrBadRecord = errors.New("share: undecodable state record")

// TP names a topic partition by topic id.
type TP struct {
	Topic     [16]byte
	Partition int32
}

func groupKey(group string) []byte { return append([]byte{'g'}, group...) }

func partKey(group string, tp TP) []byte {
	k := make([]byte, 0, 1+binary.MaxVarintLen64+len(group)+20)
	k = append(k, 'p')
	k = binary.AppendUvarint(k, uint64(len(group)))
	k = append(k, group...)
	k = append(k, tp.Topic[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
}

// decodeKey returns a key's kind ('g' or 'p'), group and (for 'p') topic
// partition.
func decodeKey(k []byte) (byte, string, TP, error) {
	if len(k) == 0 {
		return 0, "", TP{}, fmt.Errorf("%w: empty key", ErrBadRecord)
	}
	switch k[0] {
	case 'g':
		return 'g', string(k[1:]), TP{}, nil
	case 'p':
		n, w := binary.Uvarint(k[1:])
		if w <= 0 || w != len(binary.AppendUvarint(nil, n)) || uint64(len(k)-1-w) != n+20 {
			return 0, "", TP{}, fmt.Errorf("%w: share-partition key of %d bytes", ErrBadRecord, len(k))
		}
		rest := k[1+w:]
		var tp TP
		group := string(rest[:n])
		copy(tp.Topic[:], rest[n:n+16])
		tp.Partition = int32(binary.BigEndian.Uint32(rest[n+16:]))
		return 'p', group, tp, nil
	}
	return 0, "", TP{}, fmt.Errorf("%w: key kind %q", ErrBadRecord, k[0])
}

// groupValue encodes a group record: its epoch.
func groupValue(epoch int32) []byte {
	return binary.AppendUvarint([]byte{recordVersion}, uint64(uint32(epoch)))
}

func decodeGroupValue(v []byte) (int32, error) {
	if len(v) < 2 || v[0] != recordVersion {
		return 0, fmt.Errorf("%w: group value of %d bytes", ErrBadRecord, len(v))
	}
	e, w := binary.Uvarint(v[1:])
	if w <= 0 || e > 1<<31-1 {
		return 0, fmt.Errorf("%w: group epoch", ErrBadRecord)
	}
	return int32(e), nil
}

// durable is a record's state as stored: an acquired record is stored
// as available (its lock does not outlive the process), with its count.
func durable(r *record) State {
	if r.state == Acquired {
		return Available
	}
	return r.state
}

// appendRuns encodes the offsets from..to (inclusive) of s as runs of
// equal durable state and count.
func appendRuns(dst []byte, s *spState, from, to int64) []byte {
	type run struct {
		first, n int64
		st       State
		count    int16
	}
	var runs []run
	for off := from; off <= to; off++ {
		r := s.at(off)
		st, c := durable(r), r.count
		if l := len(runs); l > 0 && runs[l-1].st == st && runs[l-1].count == c {
			runs[l-1].n++
			continue
		}
		runs = append(runs, run{off, 1, st, c})
	}
	dst = binary.AppendUvarint(dst, uint64(len(runs)))
	prev := s.start
	for _, r := range runs {
		dst = binary.AppendUvarint(dst, uint64(r.first-prev))
		dst = binary.AppendUvarint(dst, uint64(r.n))
		dst = append(dst, byte(r.st))
		dst = binary.AppendUvarint(dst, uint64(r.count))
		prev = r.first + r.n
	}
	return dst
}

// full encodes the whole durable state of s.
func (s *spState) full() []byte {
	b := []byte{recordVersion, kindFull}
	b = binary.AppendVarint(b, s.start)
	return appendRuns(b, s, s.start, s.end()-1)
}

// takeDelta encodes what changed since the last delta (or snapshot)
// and forgets it; nil when nothing durable changed.
func (s *spState) takeDelta() []byte {
	lo, hi := max(s.lo, s.start), min(s.hi, s.end()-1)
	has := s.lo <= s.hi && lo <= hi
	if !has && !s.moved {
		s.lo, s.hi, s.moved = 1, 0, false
		return nil
	}
	b := []byte{recordVersion, kindDelta}
	b = binary.AppendVarint(b, s.start)
	if has {
		b = appendRuns(b, s, lo, hi)
	} else {
		b = binary.AppendUvarint(b, 0)
	}
	s.lo, s.hi, s.moved = 1, 0, false
	return b
}

// apply applies a stored value (a delta or a full state) to s, or, with
// s nil, returns the state a full value holds. Records stored as
// available are loaded available, whatever their count: finishLoad
// archives those at the delivery limit.
func apply(s *spState, v []byte) (*spState, error) {
	bad := func(what string) (*spState, error) {
		return nil, fmt.Errorf("%w: share-partition value: %s", ErrBadRecord, what)
	}
	if len(v) < 3 || v[0] != recordVersion || (v[1] != kindDelta && v[1] != kindFull) {
		return bad("header")
	}
	kind := v[1]
	b := v[2:]
	start, w := binary.Varint(b)
	if w <= 0 || start < 0 {
		return bad("start offset")
	}
	b = b[w:]
	if s == nil || kind == kindFull {
		s = newState(start)
	} else if start < s.start {
		return bad(fmt.Sprintf("start offset %d before %d", start, s.start))
	} else {
		s.trimTo(start)
	}
	nruns, w := binary.Uvarint(b)
	if w <= 0 || nruns > uint64(len(b)) {
		return bad("run count")
	}
	b = b[w:]
	prev := s.start
	for range nruns {
		gap, w1 := binary.Uvarint(b)
		if w1 <= 0 {
			return bad("run offset")
		}
		b = b[w1:]
		n, w2 := binary.Uvarint(b)
		if w2 <= 0 || n == 0 || n > 1<<31 || len(b) < w2+1 {
			return bad("run length")
		}
		st := State(b[w2])
		b = b[w2+1:]
		c, w3 := binary.Uvarint(b)
		if w3 <= 0 || c > 1<<15-1 {
			return bad("run count")
		}
		b = b[w3:]
		if st != Available && st != Acknowledged && st != Archived {
			return bad(fmt.Sprintf("state %d", st))
		}
		first := prev + int64(gap)
		if gap > maxWindow || first < prev || first+int64(n)-s.start > maxWindow {
			return bad(fmt.Sprintf("runs reach past %d in-flight records", maxWindow))
		}
		for off := first; off < first+int64(n); off++ {
			for s.end() < off {
				s.recs = append(s.recs, record{state: Archived})
			}
			if off == s.end() {
				s.recs = append(s.recs, record{})
			}
			r := s.at(off)
			r.state, r.count = st, int16(c)
		}
		prev = first + int64(n)
	}
	if len(b) != 0 {
		return bad(fmt.Sprintf("%d trailing bytes", len(b)))
	}
	s.lo, s.hi, s.moved = 1, 0, false
	return s, nil
}

// finishLoad archives the records that were delivered lim.DeliveryLimit
// times and not acknowledged before the restart, then moves the start
// past the settled records.
func (s *spState) finishLoad(lim Limits) {
	for i := range s.recs {
		if r := &s.recs[i]; r.state == Available && int(r.count) >= lim.DeliveryLimit {
			r.state = Archived
			s.touch(s.start + int64(i))
		}
	}
	s.advance()
}
