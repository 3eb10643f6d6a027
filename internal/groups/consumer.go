package groups

// The consumer group protocol (KIP-848): the state of a consumer group,
// its members and their assignments.
//
// A consumer group is a group whose cg field is set. Its state is changed
// only by a heartbeat, a leave, or a timer, each of which holds the
// group's persistMu exclusively from reading the state to installing the
// new one: it copies the state (copy on write, member by member; see
// cgTxn), changes the copy, writes the records of what changed to the
// internal log (fsynced), and only then installs the copy under group.mu.
// A failed write leaves memory as it was. Readers (OffsetCommit checks,
// ConsumerGroupDescribe, ListGroups) take only group.mu and see either
// the old state or the new one.
//
// Epochs, as in Kafka:
//   - the group epoch is bumped when a member joins, leaves or changes
//     its subscription, or when the metadata of the subscribed topics
//     changes (a topic matching a regex appears, a topic disappears, a
//     partition count grows);
//   - the target assignment is recomputed by the group's assignor for
//     each new group epoch, and the assignment epoch follows it;
//   - each member reconciles towards its target one heartbeat at a time:
//     it is first asked to revoke the partitions it must give up (its
//     epoch stays), then given the partitions that are free, at the
//     assignment epoch. A partition is never given to a member while
//     another member still holds it.

import (
	"maps"
	"slices"
	"time"
)

// memberState is a consumer-protocol member's place in reconciliation.
type memberState int8

const (
	// mStable: the member holds its target assignment at the
	// assignment epoch it was given.
	mStable memberState = iota
	// mUnrevoked: the member must revoke partitions (in revoking) before
	// it gets new ones; its epoch stays until it has.
	mUnrevoked
	// mUnreleased: the member has the assignment epoch, but some of its
	// target partitions are still held by other members.
	mUnreleased
)

func (s memberState) String() string {
	switch s {
	case mStable:
		return "stable"
	case mUnrevoked:
		return "unrevoked_partitions"
	case mUnreleased:
		return "unreleased_partitions"
	}
	return "unknown"
}

// Member epochs with a meaning of their own.
const (
	epochJoin        = 0
	epochLeave       = -1
	epochStaticLeave = -2
)

// assignment maps a topic name to its sorted partitions.
type assignment map[string][]int32

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a assignment) equal(b assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) has(t string, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

// add puts p into a, keeping its topic's partitions sorted.
func (a assignment) add(t string, p int32) {
	ps := a[t]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[t] = slices.Insert(ps, i, p)
	}
}

// topics returns a's topics, sorted.
func (a assignment) topics() []string {
	return slices.Sorted(maps.Keys(a))
}

// cmember is one member of a consumer group. Every field is persisted
// (in its member record); timers live in group.ctimers.
type cmember struct {
	ID          string
	InstanceID  string // "" for a dynamic member
	RackID      string
	ClientID    string
	ClientHost  string
	Epoch       int32 // epochStaticLeave while a static member is away
	PrevEpoch   int32
	State       memberState
	RebalanceMs int32
	Topics      []string // subscribed topic names, sorted
	Regex       string   // subscribed regular expression; "" for none
	Assignor    string   // the ServerAssignor it asked for; "" for none
	// RegexTopics are the topics Regex matched when the member last
	// heartbeated (only those its principal may describe), sorted.
	RegexTopics []string
	Assigned    assignment // what the member holds and may use
	Revoking    assignment // what it must give up before it gets more
	Target      assignment // its part of the group's target assignment
	// Classic is set for a member that speaks the classic protocol
	// (JoinGroup/SyncGroup) in a consumer group (migrate.go).
	Classic *classicMeta `json:",omitempty"`
}

func (m *cmember) clone() *cmember {
	n := *m
	n.Topics = slices.Clone(m.Topics)
	n.RegexTopics = slices.Clone(m.RegexTopics)
	n.Assigned = m.Assigned.clone()
	n.Revoking = m.Revoking.clone()
	n.Target = m.Target.clone()
	return &n
}

// subscribed returns the topics the member is subscribed to: its names
// and what its regex matched, deduplicated and sorted.
func (m *cmember) subscribed() []string {
	out := append(slices.Clone(m.Topics), m.RegexTopics...)
	slices.Sort(out)
	return slices.Compact(out)
}

func (m *cmember) instancePtr() *string {
	if m.InstanceID == "" {
		return nil
	}
	s := m.InstanceID
	return &s
}

// cgroup is the consumer-protocol state of a group.
type cgroup struct {
	Epoch       int32  // the group epoch
	AssignEpoch int32  // the epoch of the target assignment
	Assignor    string // the assignor that computed the target
	// Meta fingerprints the subscribed topics' metadata the target was
	// computed from; a change bumps the group epoch.
	Meta    string
	members map[string]*cmember
	static  map[string]string // instance id -> member id
}

func newCgroup() *cgroup {
	return &cgroup{members: map[string]*cmember{}, static: map[string]string{}}
}

// stateName is the group's state as ConsumerGroupDescribe and ListGroups
// report it.
func (cg *cgroup) stateName() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.Epoch > cg.AssignEpoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.Epoch != epochStaticLeave && (m.Epoch != cg.AssignEpoch || m.State != mStable) {
			return "Reconciling"
		}
	}
	return "Stable"
}

// sortedMembers lists the members by member id.
func (cg *cgroup) sortedMembers() []*cmember {
	ids := slices.Sorted(maps.Keys(cg.members))
	out := make([]*cmember, len(ids))
	for i, id := range ids {
		out[i] = cg.members[id]
	}
	return out
}

// holder returns, for every partition a member holds (assigned or being
// revoked), the member holding it.
func (cg *cgroup) holders() map[tp]string {
	h := map[tp]string{}
	for id, m := range cg.members {
		for t, ps := range m.Assigned {
			for _, p := range ps {
				h[tp{t, p}] = id
			}
		}
		for t, ps := range m.Revoking {
			for _, p := range ps {
				h[tp{t, p}] = id
			}
		}
	}
	return h
}

// cgTxn is one change to a consumer group, made on a copy: n shares the
// members of the state it was copied from until mut copies one.
type cgTxn struct {
	old        *cgroup // nil for a group that had no consumer state
	n          *cgroup
	dirty      map[string]bool // members whose record is written
	gone       map[string]bool // members removed (tombstoned)
	groupDirty bool            // the group record is written
	copied     map[string]bool // members already copied
}

func newTxn(old *cgroup) *cgTxn {
	t := &cgTxn{old: old, dirty: map[string]bool{}, gone: map[string]bool{}, copied: map[string]bool{}}
	if old == nil {
		t.n = newCgroup()
		t.groupDirty = true
		return t
	}
	n := *old
	n.members = maps.Clone(old.members)
	n.static = maps.Clone(old.static)
	t.n = &n
	return t
}

// mut returns member id of the copy, ready to change, and marks its
// record to be written.
func (t *cgTxn) mut(id string) *cmember {
	m := t.n.members[id]
	if m == nil {
		return nil
	}
	if !t.copied[id] {
		m = m.clone()
		t.n.members[id] = m
		t.copied[id] = true
	}
	t.dirty[id] = true
	return m
}

// add puts a new member into the copy.
func (t *cgTxn) add(m *cmember) {
	t.n.members[m.ID] = m
	t.copied[m.ID] = true
	t.dirty[m.ID] = true
	delete(t.gone, m.ID)
	if m.InstanceID != "" {
		t.n.static[m.InstanceID] = m.ID
	}
}

// remove takes a member out of the copy.
func (t *cgTxn) remove(id string) {
	m := t.n.members[id]
	if m == nil {
		return
	}
	delete(t.n.members, id)
	delete(t.dirty, id)
	t.gone[id] = true
	if m.InstanceID != "" && t.n.static[m.InstanceID] == id {
		delete(t.n.static, m.InstanceID)
	}
}

// bump advances the group epoch.
func (t *cgTxn) bump() {
	t.n.Epoch++
	t.groupDirty = true
}

// ctimer is a consumer-protocol member's session and rebalance timers.
// Guarded by the group's mu.
type ctimer struct {
	deadline time.Time // session expiry; pushed on by heartbeats
	session  Timer
	revokeBy time.Time // rebalance timeout of a pending revocation; zero when none
	revoke   Timer
}

func (ct *ctimer) stop() {
	if ct.session != nil {
		ct.session.Stop()
		ct.session = nil
	}
	if ct.revoke != nil {
		ct.revoke.Stop()
		ct.revoke = nil
	}
}

// finishConsumerReplayLocked brings a replayed consumer group to life:
// its members' sessions start now, and members that were revoking
// partitions get their rebalance timeout again.
func (c *Coordinator) finishConsumerReplayLocked(g *group, now time.Time) {
	g.protocolType = "consumer"
	st := stateStable
	if len(g.cg.members) == 0 {
		st = stateEmpty
	}
	g.setStateLocked(st, now)
	for id := range g.cg.members {
		c.touchMemberLocked(g, id)
		c.revokeTimerLocked(g, id)
	}
}
