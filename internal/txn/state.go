package txn

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// State is a transaction's state, as Kafka names it.
type State int8

const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}

func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("State(%d)", int8(s))
	}
	return stateNames[s]
}

// ParseState reads a state name (case-insensitive), as ListTransactions
// filters name them.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if strings.EqualFold(n, name) {
			return State(i), true
		}
	}
	return 0, false
}

// MarshalText writes the state's name.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name.
func (s *State) UnmarshalText(b []byte) error {
	v, ok := ParseState(string(b))
	if !ok {
		return fmt.Errorf("txn: unknown state %q", b)
	}
	*s = v
	return nil
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
}

// Offset is one staged group offset of a transaction (TxnOffsetCommit).
type Offset struct {
	Topic       string `json:"t"`
	Partition   int32  `json:"p"`
	Offset      int64  `json:"o"`
	LeaderEpoch int32  `json:"e"`
	Metadata    string `json:"m,omitempty"`
}

// Txn is the state of one transactional id. A published Txn is never
// modified: every change builds a new one (clone), persists it, and
// replaces the old one.
type Txn struct {
	ID    string `json:"id"`
	PID   int64  `json:"pid"`
	Epoch int16  `json:"epoch"`
	// PrevPID and PrevEpoch are the producer id and epoch before the last
	// InitProducerId, so that a retried InitProducerId (KIP-360) that
	// lost its answer gets the same answer again instead of a fence.
	PrevPID   int64 `json:"prev_pid"`
	PrevEpoch int16 `json:"prev_epoch"`
	State     State `json:"state"`
	// Bumped (Prepare states): the decision raised Epoch by one over the
	// epoch the transaction's batches carry (an EndTxn v5, a fencing or
	// timeout abort), so a partition whose open transaction of PID has
	// batches at Epoch belongs to a newer transaction and its marker is
	// not written there.
	Bumped    bool  `json:"bumped,omitempty"`
	TimeoutMs int32 `json:"timeout_ms"`
	// Partitions added to the ongoing transaction, sorted.
	Partitions []TopicPartition `json:"partitions,omitempty"`
	// Since holds, for each of Partitions (same index), the partition's
	// log end offset when it was added (-1: unknown): a COMMIT marker of
	// PID at or past it can only be this transaction's. Recovery uses it
	// to finish a commit whose markers became durable before its
	// decision did (see Coordinator.EndTxn). Empty in states written
	// before Sluice recorded it.
	Since []int64 `json:"since,omitempty"`
	// Offsets staged per group (AddOffsetsToTxn adds the group,
	// TxnOffsetCommit its offsets), applied to the group when the
	// transaction commits.
	Offsets  map[string][]Offset `json:"offsets,omitempty"`
	StartMs  int64               `json:"start_ms"` // when the ongoing or last completed transaction began (-1 when none since InitProducerId)
	UpdateMs int64               `json:"update_ms"`
}

// shallow returns a copy of t that shares its partitions, since offsets
// and staged offsets: for a change of t's scalar fields only, or one
// that replaces those fields rather than modifying them (add does, by
// copying on write). Cheaper than clone, which a change of Offsets needs.
func (t *Txn) shallow() *Txn {
	c := *t
	return &c
}

func (t *Txn) clone() *Txn {
	c := *t
	c.Partitions = slices.Clone(t.Partitions)
	c.Since = slices.Clone(t.Since)
	if t.Offsets != nil {
		c.Offsets = make(map[string][]Offset, len(t.Offsets))
		for g, o := range t.Offsets {
			c.Offsets[g] = slices.Clone(o)
		}
	}
	return &c
}

// has reports whether tp was added to the transaction.
func (t *Txn) has(tp TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(t.Partitions, tp, cmpTP)
	return ok
}

// add adds tp, whose log ended at offset since, to the transaction's
// partitions; it reports whether it was new.
func (t *Txn) add(tp TopicPartition, since int64) bool {
	i, ok := slices.BinarySearchFunc(t.Partitions, tp, cmpTP)
	if ok {
		return false
	}
	// New slices (copy on write): t may share them with a published
	// state (shallow).
	if len(t.Since) == len(t.Partitions) {
		ns := make([]int64, 0, len(t.Since)+1)
		ns = append(append(append(ns, t.Since[:i]...), since), t.Since[i:]...)
		t.Since = ns
	}
	np := make([]TopicPartition, 0, len(t.Partitions)+1)
	np = append(append(append(np, t.Partitions[:i]...), tp), t.Partitions[i:]...)
	t.Partitions = np
	return true
}

// knowsSince reports whether every partition has its Since offset.
func (t *Txn) knowsSince() bool {
	if len(t.Since) != len(t.Partitions) {
		return false
	}
	for _, s := range t.Since {
		if s < 0 {
			return false
		}
	}
	return true
}

func cmpTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// stage records an offset for group, replacing an earlier one for the
// same partition.
func (t *Txn) stage(group string, o Offset) {
	if t.Offsets == nil {
		t.Offsets = map[string][]Offset{}
	}
	offs := t.Offsets[group]
	for i := range offs {
		if offs[i].Topic == o.Topic && offs[i].Partition == o.Partition {
			offs[i] = o
			return
		}
	}
	t.Offsets[group] = append(offs, o)
}

// Record format of the coordinator's log: the key is "txn\x00" followed
// by the transactional id; the value is the Txn in the binary format of
// encodeTxn (first byte recordVersion). The latest record of a key is the
// id's state. Logs written before the binary format hold JSON values
// ('{' first, with a "v":1 field); decodeTxn reads both.
const (
	recordVersion     = 2
	jsonRecordVersion = 1
)

func recordKey(id string) []byte { return append([]byte("txn\x00"), id...) }

type recordValue struct {
	V int `json:"v"`
	*Txn
}

func decodeTxn(key, value []byte) (*Txn, error) {
	id, ok := strings.CutPrefix(string(key), "txn\x00")
	if !ok {
		return nil, fmt.Errorf("txn: state record key %q has no txn prefix", key)
	}
	var t *Txn
	switch {
	case len(value) > 0 && value[0] == '{':
		v := recordValue{Txn: new(Txn)}
		if err := json.Unmarshal(value, &v); err != nil {
			return nil, fmt.Errorf("txn: state record of %q: %w", id, err)
		}
		if v.V != jsonRecordVersion {
			return nil, fmt.Errorf("txn: JSON state record of %q has version %d; this Sluice reads %d", id, v.V, jsonRecordVersion)
		}
		t = v.Txn
	case len(value) > 0 && value[0] == recordVersion:
		var err error
		if t, err = decodeBinary(id, value[1:]); err != nil {
			return nil, fmt.Errorf("txn: state record of %q: %w", id, err)
		}
	case len(value) > 0:
		return nil, fmt.Errorf("txn: state record of %q has version %d; this Sluice reads %d and JSON records", id, value[0], recordVersion)
	default:
		return nil, fmt.Errorf("txn: state record of %q is empty", id)
	}
	if t.ID != id || t.State < Empty || t.State > CompleteAbort {
		return nil, fmt.Errorf("txn: state record of %q is inconsistent (id %q, state %d)", id, t.ID, t.State)
	}
	return t, nil
}
