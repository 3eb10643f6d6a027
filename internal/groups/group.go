package groups

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// state is a group's place in the classic rebalance protocol:
//
//	Empty ──join──> PreparingRebalance ──all joined / rebalance timeout──> CompletingRebalance
//	  ^                 ^      │ no member left                                 │ leader's SyncGroup
//	  └─────────────────┼──────┘                                                v   (persisted)
//	                    └──────────── join, leave, session expiry ─────────── Stable
//
// Dead is a group being deleted (DeleteGroups, or expiry of an empty
// group's offsets); requests then get COORDINATOR_NOT_AVAILABLE and retry
// against a fresh group.
type state int8

const (
	stateEmpty state = iota
	statePreparing
	stateCompleting
	stateStable
	stateDead
)

func (s state) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparing:
		return "PreparingRebalance"
	case stateCompleting:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	case stateDead:
		return "Dead"
	}
	return "Unknown"
}

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// committed is one committed offset.
type committed struct {
	offset    int64
	epoch     int32
	metadata  string
	commitMs  int64 // when it was committed
	expireMs  int64 // explicit expiry from OffsetCommit v2-v4 retention; 0 = none
	logOffset int64 // internal-log offset of the record that set it
}

func (o *committed) value() []byte {
	v := kmsg.OffsetCommitValue{
		Version:         offsetValueVersion,
		Offset:          o.offset,
		LeaderEpoch:     o.epoch,
		Metadata:        o.metadata,
		CommitTimestamp: o.commitMs,
	}
	b := v.AppendTo(nil)
	if o.expireMs > 0 {
		// Version 1 is the one that carries an expiry timestamp.
		v.Version = 1
		v.ExpireTimestamp = o.expireMs
		b = v.AppendTo(nil)
	}
	return b
}

// member is one member of a group.
type member struct {
	id         string
	instanceID string // "" for a dynamic member
	clientID   string
	clientHost string
	session    time.Duration
	rebalance  time.Duration
	protocols  []kmsg.JoinGroupRequestProtocol
	assignment []byte
	joinSeq    uint64 // order of joining; the earliest member still present leads
	generation int32  // the generation whose JoinGroup answer it got; -1 before one

	// joinWait is set while the member waits in JoinGroup for the
	// rebalance to complete; syncWait while it waits in SyncGroup for the
	// leader's assignment. Each is called exactly once, must not block,
	// and is called with the group's mu held.
	joinWait    func(*kmsg.JoinGroupResponse)
	joinVersion int16
	syncWait    func(*kmsg.SyncGroupResponse)
	syncVersion int16

	deadline time.Time // session expiry; pushed on by heartbeats
	timer    Timer     // session timer; nil when none is scheduled
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (m *member) instancePtr() *string {
	if m.instanceID == "" {
		return nil
	}
	s := m.instanceID
	return &s
}

// group is one consumer group.
type group struct {
	id string

	// persistMu orders the group's internal-log writes: offset commits
	// hold it shared; group-metadata writes, deletion and expiry hold it
	// exclusively, so a deletion's tombstones follow every commit that
	// preceded it. See doc.go for the lock order.
	persistMu sync.RWMutex

	mu           sync.Mutex // guards every field below
	state        state
	stateSince   time.Time
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	static       map[string]string // instance id -> member id
	pending      map[string]Timer  // member ids handed out with MEMBER_ID_REQUIRED -> expiry timer
	joinSeq      uint64
	rebalanceSeq uint64    // bumped by every PreparingRebalance; stale timers compare it
	rebalance    Timer     // rebalance timeout of the current PreparingRebalance
	initialUntil time.Time // an initial rebalance delay holds the join open until then
	syncing      bool      // the leader's assignment is being persisted
	offsets      map[tp]*committed
	rebalances   uint64 // rebalances since the coordinator opened (per-group metrics)
	meta         []byte // value of the group's last persisted metadata record; nil when none
	metaOffset   int64  // internal-log offset of that record

	// cg is the consumer-protocol (KIP-848) state of a consumer group;
	// nil for a classic group. It is replaced, never changed in place,
	// by a writer holding persistMu exclusively (see consumer.go).
	cg         *cgroup
	cgRecorded bool               // the internal log holds cg's group record
	ctimers    map[string]*ctimer // consumer-protocol member id -> its timers
}

func newGroup(id string, now time.Time) *group {
	return &group{
		id:         id,
		stateSince: now,
		members:    map[string]*member{},
		static:     map[string]string{},
		pending:    map[string]Timer{},
		offsets:    map[tp]*committed{},
		ctimers:    map[string]*ctimer{},
	}
}

func (g *group) setStateLocked(s state, now time.Time) {
	g.state = s
	g.stateSince = now
}

// tombstonesLocked are the records that delete what the log holds of g
// besides its offsets: its classic metadata and its consumer-group
// records.
func (g *group) tombstonesLocked() []kv {
	var recs []kv
	if g.meta != nil {
		recs = append(recs, kv{Key: groupKey(g.id)})
	}
	if g.cg != nil && g.cgRecorded {
		recs = append(recs, g.cg.tombstones(g.id)...)
	}
	return recs
}

// supportsLocked reports whether a member with this protocol type and
// protocols may join: the type must match the group's, and at least one
// of its protocols must be supported by every other member.
func (g *group) supportsLocked(self, protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	others := 0
	for id := range g.members {
		if id != self {
			others++
		}
	}
	if others == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		all := true
		for id, m := range g.members {
			if id != self && !hasProtocol(m, p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func hasProtocol(m *member, name string) bool {
	for _, p := range m.protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}

// selectProtocolLocked picks the protocol every member supports that most
// members list first among those; ties go to the leader's preference.
func (g *group) selectProtocolLocked(leader *member) string {
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.allSupportLocked(p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for _, p := range leader.protocols {
		if v, ok := votes[p.Name]; ok && v > bestVotes {
			best, bestVotes = p.Name, v
		}
	}
	return best
}

func (g *group) allSupportLocked(name string) bool {
	for _, m := range g.members {
		if !hasProtocol(m, name) {
			return false
		}
	}
	return true
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || string(a[i].Metadata) != string(b[i].Metadata) {
			return false
		}
	}
	return true
}

// metadataLocked encodes the group's metadata record as the group stands,
// with assignment (if not nil) in place of the members' current ones.
func (g *group) metadataLocked(now time.Time, assign map[string][]byte) []byte {
	v := kmsg.GroupMetadataValue{
		Version:               groupValueVersion,
		ProtocolType:          g.protocolType,
		Generation:            g.generation,
		CurrentStateTimestamp: now.UnixMilli(),
	}
	if len(g.members) > 0 {
		p, l := g.protocol, g.leader
		v.Protocol, v.Leader = &p, &l
	}
	for _, m := range g.members {
		a := m.assignment
		if assign != nil {
			a = assign[m.id]
		}
		v.Members = append(v.Members, kmsg.GroupMetadataValueMember{
			MemberID:               m.id,
			InstanceID:             m.instancePtr(),
			ClientID:               m.clientID,
			ClientHost:             m.clientHost,
			RebalanceTimeoutMillis: int32(m.rebalance.Milliseconds()),
			SessionTimeoutMillis:   int32(m.session.Milliseconds()),
			Subscription:           m.metadataFor(g.protocol),
			Assignment:             a,
		})
	}
	return v.AppendTo(nil)
}
