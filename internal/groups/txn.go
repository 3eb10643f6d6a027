package groups

// Transactional offsets (KIP-98, KIP-447). The transaction coordinator
// (internal/txn) stages a transaction's offsets in its own log and, once
// the commit is decided, writes them here with CommitTxnOffsets; it
// checks a TxnOffsetCommit's member with CheckMember. OffsetFetch with
// RequireStable asks Config.PendingTxnOffset whether an unfinished
// transaction holds an offset for the partition.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TxnOffset is one offset a committed transaction writes.
type TxnOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// CheckMember validates a transactional offset commit's member (KIP-447):
// 0 when memberID is a member of the group at generation (or the group is
// empty and the commit is a simple one), otherwise UNKNOWN_MEMBER_ID,
// ILLEGAL_GENERATION, FENCED_INSTANCE_ID or COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) CheckMember(group, memberID string, instanceID *string, generation int32) int16 {
	if c.closing.Load() {
		return errCoordinatorNotAvailable
	}
	g := c.lookup(group)
	if g == nil {
		if generation >= 0 {
			return errIllegalGeneration
		}
		return errNone
	}
	instance := ""
	if instanceID != nil {
		instance = *instanceID
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cg != nil && g.state != stateDead {
		switch code := checkConsumerCommitLocked(g.cg, 9, memberID, generation); code {
		case errStaleMemberEpoch:
			return errIllegalGeneration
		default:
			return code
		}
	}
	m := g.members[memberID]
	switch {
	case g.state == stateDead:
		return errCoordinatorNotAvailable
	case generation < 0 && memberID == "":
		return errNone
	case fencedLocked(g, memberID, instance):
		return errFencedInstanceID
	case m == nil:
		return errUnknownMemberID
	case generation != g.generation:
		return errIllegalGeneration
	}
	return errNone
}

// CommitTxnOffsets durably writes the offsets of a committed transaction
// for group, without a membership check (the transaction was checked when
// it staged them), except for partitions whose offset was committed after
// notBeforeMs (a newer commit wins). So the transaction coordinator may
// write them again after a crash without undoing a later commit.
func (c *Coordinator) CommitTxnOffsets(group string, offs []TxnOffset, notBeforeMs int64) error {
	if c.closing.Load() {
		return fmt.Errorf("groups: %w", kerr.CoordinatorNotAvailable)
	}
	if group == "" || len(offs) == 0 {
		return nil
	}
	g := c.getOrCreate(group)
	g.persistMu.RLock()
	defer g.persistMu.RUnlock()
	now := c.now().UnixMilli()
	recs := make([]kv, 0, len(offs))
	keys := make([]tp, 0, len(offs))
	vals := make([]*committed, 0, len(offs))
	g.mu.Lock()
	for _, o := range offs {
		if cur := g.offsets[tp{o.Topic, o.Partition}]; cur != nil && cur.commitMs > notBeforeMs {
			continue
		}
		v := &committed{offset: o.Offset, epoch: o.LeaderEpoch, metadata: o.Metadata, commitMs: now}
		keys = append(keys, tp{o.Topic, o.Partition})
		vals = append(vals, v)
		recs = append(recs, kv{Key: offsetKey(group, o.Topic, o.Partition), Value: v.value()})
	}
	g.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}
	err := c.writeOffsets(g, keys, vals, recs)
	if err != nil {
		return fmt.Errorf("groups: write transactional offsets of %s: %w", group, err)
	}
	c.metrics.commits.Add(float64(len(recs)))
	return nil
}
