package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// The binary state record (recordVersion 2), after its version byte;
// integers are varints (zig-zag for signed), strings a uvarint length and
// the bytes:
//
//	pid, epoch, prev_pid, prev_epoch  varint
//	state                             uvarint
//	flags                             uvarint (bit 0: Bumped)
//	timeout_ms, start_ms, update_ms   varint
//	n_partitions                      uvarint, then per partition:
//	    topic string, partition varint
//	n_since                           uvarint (0 or n_partitions), then varints
//	n_groups                          uvarint, then per group (sorted):
//	    group string, n_offsets uvarint, then per offset:
//	        topic string, partition, offset, leader_epoch varint, metadata string
//
// The transactional id is the record's key and is not repeated.

const flagBumped = 1

// encodeTxn returns t's state record value.
func encodeTxn(t *Txn) []byte {
	n := 48 + 8*len(t.Since)
	for _, tp := range t.Partitions {
		n += len(tp.Topic) + 8
	}
	for g, offs := range t.Offsets {
		n += len(g) + 4
		for _, o := range offs {
			n += len(o.Topic) + len(o.Metadata) + 24
		}
	}
	b := make([]byte, 0, n)
	b = append(b, recordVersion)
	b = binary.AppendVarint(b, t.PID)
	b = binary.AppendVarint(b, int64(t.Epoch))
	b = binary.AppendVarint(b, t.PrevPID)
	b = binary.AppendVarint(b, int64(t.PrevEpoch))
	b = binary.AppendUvarint(b, uint64(t.State))
	var flags uint64
	if t.Bumped {
		flags |= flagBumped
	}
	b = binary.AppendUvarint(b, flags)
	b = binary.AppendVarint(b, int64(t.TimeoutMs))
	b = binary.AppendVarint(b, t.StartMs)
	b = binary.AppendVarint(b, t.UpdateMs)
	b = binary.AppendUvarint(b, uint64(len(t.Partitions)))
	for _, tp := range t.Partitions {
		b = appendString(b, tp.Topic)
		b = binary.AppendVarint(b, int64(tp.Partition))
	}
	b = binary.AppendUvarint(b, uint64(len(t.Since)))
	for _, s := range t.Since {
		b = binary.AppendVarint(b, s)
	}
	groups := make([]string, 0, len(t.Offsets))
	for g := range t.Offsets {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	b = binary.AppendUvarint(b, uint64(len(groups)))
	for _, g := range groups {
		b = appendString(b, g)
		offs := t.Offsets[g]
		b = binary.AppendUvarint(b, uint64(len(offs)))
		for _, o := range offs {
			b = appendString(b, o.Topic)
			b = binary.AppendVarint(b, int64(o.Partition))
			b = binary.AppendVarint(b, o.Offset)
			b = binary.AppendVarint(b, int64(o.LeaderEpoch))
			b = appendString(b, o.Metadata)
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes a binary state record; the first error sticks.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated")

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int reads a signed varint that must fit in [lo, hi].
func (r *reader) int(lo, hi int64) int64 {
	v := r.varint()
	if r.err == nil && (v < lo || v > hi) {
		r.err = fmt.Errorf("value %d out of range", v)
	}
	return v
}

// count reads a length that the remaining bytes can hold (each element
// takes at least one byte).
func (r *reader) count() int {
	v := r.uvarint()
	if r.err == nil && v > uint64(len(r.b)) {
		r.err = fmt.Errorf("count %d exceeds the record", v)
		return 0
	}
	return int(v)
}

func (r *reader) string() string {
	n := r.count()
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func decodeBinary(id string, b []byte) (*Txn, error) {
	r := &reader{b: b}
	t := &Txn{ID: id}
	t.PID = r.varint()
	t.Epoch = int16(r.int(math.MinInt16, math.MaxInt16))
	t.PrevPID = r.varint()
	t.PrevEpoch = int16(r.int(math.MinInt16, math.MaxInt16))
	t.State = State(r.uvarint())
	flags := r.uvarint()
	t.Bumped = flags&flagBumped != 0
	t.TimeoutMs = int32(r.int(math.MinInt32, math.MaxInt32))
	t.StartMs = r.varint()
	t.UpdateMs = r.varint()
	if n := r.count(); n > 0 {
		t.Partitions = make([]TopicPartition, n)
		for i := range t.Partitions {
			t.Partitions[i].Topic = r.string()
			t.Partitions[i].Partition = int32(r.int(math.MinInt32, math.MaxInt32))
		}
	}
	if n := r.count(); n > 0 {
		t.Since = make([]int64, n)
		for i := range t.Since {
			t.Since[i] = r.varint()
		}
	}
	if n := r.count(); n > 0 {
		t.Offsets = make(map[string][]Offset, n)
		for range n {
			g := r.string()
			offs := make([]Offset, r.count())
			for i := range offs {
				o := &offs[i]
				o.Topic = r.string()
				o.Partition = int32(r.int(math.MinInt32, math.MaxInt32))
				o.Offset = r.varint()
				o.LeaderEpoch = int32(r.int(math.MinInt32, math.MaxInt32))
				o.Metadata = r.string()
			}
			t.Offsets[g] = offs
		}
	}
	switch {
	case r.err != nil:
		return nil, r.err
	case len(r.b) != 0:
		return nil, fmt.Errorf("%d bytes after the state", len(r.b))
	case t.State > CompleteAbort:
		return nil, fmt.Errorf("unknown state %d", t.State)
	case len(t.Since) != 0 && len(t.Since) != len(t.Partitions):
		return nil, fmt.Errorf("%d since offsets for %d partitions", len(t.Since), len(t.Partitions))
	}
	return t, nil
}
