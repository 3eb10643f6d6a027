package groups

// Online migration between the classic protocol and the consumer
// protocol (KIP-848), and classic members in a consumer group.
//
// Behaviour notes:
//   - Upgrade: a ConsumerGroupHeartbeat joining a classic group that has
//     members converts it to a consumer group when
//     group.consumer.migration.policy allows upgrades (bidirectional,
//     upgrade), every member speaks protocol type "consumer" with
//     subscription metadata that decodes, and the group stays within
//     group.consumer.max.size (the messages are Kafka's). Each classic member becomes a member of
//     the consumer group at the classic generation as its epoch, with
//     the partitions of its classic assignment as its current and target
//     assignment; the group epoch is the generation. JoinGroup and
//     SyncGroup calls waiting in the classic rebalance are answered
//     REBALANCE_IN_PROGRESS. Otherwise the heartbeat gets
//     GROUP_ID_NOT_FOUND saying why, as in Kafka.
//   - Classic members in a consumer group (a mixed group) keep using
//     JoinGroup, SyncGroup, Heartbeat, LeaveGroup and OffsetCommit: a
//     JoinGroup updates the member's subscription (from its consumer
//     protocol metadata) and reports its owned partitions (those of
//     cooperative clients; none for eager ones), and the member is
//     reconciled as a consumer-protocol member would be; the response's
//     generation is the member's epoch, no member leads. SyncGroup
//     returns the partitions the member holds. Heartbeat answers
//     REBALANCE_IN_PROGRESS while the member has not reached the target
//     assignment's epoch in a stable state, so it joins again. Generation
//     mismatches get ILLEGAL_GENERATION. A static classic member that
//     joins again with a new member id and its instance id takes its
//     predecessor's place and assignment (FENCED_INSTANCE_ID for a known
//     member id that does not hold the instance id).
//   - Downgrade: when the last consumer-protocol member leaves (epoch -1
//     or a session or rebalance timeout) and classic members remain, the
//     group converts back to a classic group if the policy allows
//     downgrades (bidirectional, downgrade): the consumer group's records
//     are deleted, the members keep their ids, protocols and assignments
//     at the group epoch as generation, and a classic rebalance starts so
//     the members join again and their leader assigns.

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Migration policies (group.consumer.migration.policy).
const (
	MigrationBidirectional = "bidirectional"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationDisabled      = "disabled"
)

func (c *Coordinator) upgradeEnabled() bool {
	p := c.cfg.Consumer.MigrationPolicy
	return p == MigrationBidirectional || p == MigrationUpgrade
}

func (c *Coordinator) downgradeEnabled() bool {
	p := c.cfg.Consumer.MigrationPolicy
	return p == MigrationBidirectional || p == MigrationDowngrade
}

// classicMeta is what a classic member of a consumer group sent in its
// last JoinGroup. It is never changed in place (a new one replaces it).
type classicMeta struct {
	SessionMs int32             `json:"sessionMs"`
	Protocols []classicProtocol `json:"protocols"`
}

type classicProtocol struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

func classicProtocols(ps []kmsg.JoinGroupRequestProtocol) []classicProtocol {
	out := make([]classicProtocol, len(ps))
	for i, p := range ps {
		out[i] = classicProtocol{Name: p.Name, Metadata: slices.Clone(p.Metadata)}
	}
	return out
}

// subscription decodes a classic member's consumer protocol metadata:
// its topics and the partitions it reports owning.
func subscription(meta []byte) (topics []string, owned assignment, ok bool) {
	var md kmsg.ConsumerMemberMetadata
	if err := md.ReadFrom(meta); err != nil {
		return nil, nil, false
	}
	topics = slices.Clone(md.Topics)
	slices.Sort(topics)
	topics = slices.Compact(topics)
	owned = assignment{}
	for _, op := range md.OwnedPartitions {
		for _, p := range op.Partitions {
			owned.add(op.Topic, p)
		}
	}
	return topics, owned, true
}

// decodeAssignment reads a classic consumer assignment; bytes that do not
// decode give an empty assignment.
func decodeAssignment(b []byte) assignment {
	out := assignment{}
	var a kmsg.ConsumerMemberAssignment
	if len(b) == 0 || a.ReadFrom(b) != nil {
		return out
	}
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			out.add(t.Topic, p)
		}
	}
	return out
}

func encodeAssignment(a assignment) []byte {
	v := kmsg.NewConsumerMemberAssignment()
	for _, t := range a.topics() {
		v.Topics = append(v.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: t, Partitions: slices.Clone(a[t])})
	}
	return v.AppendTo(nil)
}

// upgradeLocked fills t (a transaction creating the consumer state) with
// the classic group's members, or says why the group cannot upgrade.
func (c *Coordinator) upgradeLocked(g *group, t *cgTxn) *hbError {
	switch {
	case !c.upgradeEnabled():
		return hbErr(errGroupIDNotFound, "Cannot upgrade classic group %s to consumer group because online upgrade is disabled.", g.id)
	case g.protocolType != "consumer":
		return hbErr(errGroupIDNotFound, "Cannot upgrade classic group %s to consumer group because the group does not use the consumer embedded protocol.", g.id)
	case c.cfg.Consumer.MaxSize > 0 && len(g.members) > c.cfg.Consumer.MaxSize:
		return hbErr(errGroupIDNotFound, "Cannot upgrade classic group %s to consumer group because the group size exceeds the consumer group maximum size.", g.id)
	}
	for _, m := range sortedMembers(g) {
		meta := m.metadataFor(g.protocol)
		if meta == nil && len(m.protocols) > 0 {
			meta = m.protocols[0].Metadata
		}
		topics, _, ok := subscription(meta)
		if !ok {
			return hbErr(errGroupIDNotFound, "Cannot upgrade classic group %s to consumer group because the embedded consumer protocol is malformed.", g.id)
		}
		cm := newCmember(m.id, m.instanceID)
		cm.ClientID, cm.ClientHost = m.clientID, m.clientHost
		cm.RebalanceMs = int32(m.rebalance.Milliseconds())
		cm.Topics = topics
		cm.Classic = &classicMeta{SessionMs: int32(m.session.Milliseconds()), Protocols: classicProtocols(m.protocols)}
		cm.Epoch = max(g.generation, 0)
		cm.Assigned = decodeAssignment(m.assignment)
		cm.Target = cm.Assigned.clone()
		t.add(cm)
	}
	t.n.Epoch, t.n.AssignEpoch = max(g.generation, 0), max(g.generation, 0)
	t.n.Assignor = c.cfg.Consumer.Assignors[0]
	return nil
}

// dropClassicLocked ends the classic state of a group that became a
// consumer group: its members' waiters are answered
// REBALANCE_IN_PROGRESS and their timers stopped.
func (c *Coordinator) dropClassicLocked(g *group) {
	for _, m := range g.members {
		c.failWaitersLocked(m, errRebalanceInProgress)
		if m.timer != nil {
			m.timer.Stop()
			m.timer = nil
		}
	}
	for _, t := range g.pending {
		t.Stop()
	}
	if g.rebalance != nil {
		g.rebalance.Stop()
		g.rebalance = nil
	}
	g.rebalanceSeq++
	g.members, g.static, g.pending = map[string]*member{}, map[string]string{}, map[string]Timer{}
	g.syncing = false
	g.meta = nil
	g.generation, g.protocol, g.leader = 0, "", ""
}

// memberSession is a consumer group member's session timeout: a classic
// member's own, else the group's.
func (c *Coordinator) memberSession(g *group, id string) time.Duration {
	if m := g.cg.members[id]; m != nil && m.Classic != nil && m.Classic.SessionMs > 0 {
		return time.Duration(m.Classic.SessionMs) * time.Millisecond
	}
	return c.sessionTimeout(g.id)
}

// onlyClassic reports whether cg has members and every one is classic.
func onlyClassic(cg *cgroup) bool {
	if len(cg.members) == 0 {
		return false
	}
	for _, m := range cg.members {
		if m.Classic == nil {
			return false
		}
	}
	return true
}

// downgradeLocked converts a consumer group whose remaining members are
// all classic back to a classic group, if the policy allows; it reports
// whether it did. t is the change that removed the last consumer-protocol
// member (not yet written): instead of it, the consumer group's records
// are deleted. The caller holds persistMu exclusively and g.mu (released
// across the write).
func (c *Coordinator) downgradeLocked(g *group, t *cgTxn) (bool, error) {
	if !c.downgradeEnabled() || !onlyClassic(t.n) || t.old == nil || onlyClassic(t.old) {
		return false, nil
	}
	recs := t.old.tombstones(g.id)
	n := t.n
	g.mu.Unlock()
	err := c.st.append(recs, func(int64) {
		g.mu.Lock()
		defer g.mu.Unlock()
		c.installClassicLocked(g, n)
	})
	g.mu.Lock()
	return err == nil, err
}

// installClassicLocked makes cg's classic members a classic group at the
// group epoch as generation, and starts a rebalance so they join again.
func (c *Coordinator) installClassicLocked(g *group, cg *cgroup) {
	for _, ct := range g.ctimers {
		ct.stop()
	}
	g.ctimers = map[string]*ctimer{}
	g.cg, g.cgRecorded = nil, false
	g.protocolType = "consumer"
	g.generation = cg.Epoch
	g.members, g.static = map[string]*member{}, map[string]string{}
	var names []string
	for _, cm := range cg.sortedMembers() {
		g.joinSeq++
		m := &member{id: cm.ID, instanceID: cm.InstanceID, clientID: cm.ClientID, clientHost: cm.ClientHost, joinSeq: g.joinSeq, generation: g.generation,
			session:    time.Duration(cm.Classic.SessionMs) * time.Millisecond,
			rebalance:  time.Duration(cm.RebalanceMs) * time.Millisecond,
			assignment: encodeAssignment(cm.Assigned)}
		for _, p := range cm.Classic.Protocols {
			m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		if names == nil {
			for _, p := range m.protocols {
				names = append(names, p.Name)
			}
		} else {
			names = slices.DeleteFunc(names, func(n string) bool { return !offers(m.protocols, n) })
		}
		g.members[m.id] = m
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
		c.heartbeatLocked(g, m)
	}
	if len(names) > 0 {
		g.protocol = names[0]
	}
	g.leader = sortedMembers(g)[0].id
	g.setStateLocked(stateStable, c.now())
	c.prepareRebalanceLocked(g)
	c.cfg.Logger.Info("groups: consumer group downgraded to a classic group", "group", g.id, "members", len(g.members), "generation", g.generation)
}
