package groups

// Classic members in a consumer group: JoinGroup, SyncGroup, Heartbeat
// and LeaveGroup against a group whose state is the consumer protocol's
// (see migrate.go for the rules).

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinConsumerGroup handles a classic JoinGroup to a consumer group.
func (c *Coordinator) joinConsumerGroup(j *joinReq) {
	req := j.req
	if req.ProtocolType != "consumer" {
		j.fail(errInconsistentGroupProto, req.MemberID)
		return
	}
	var topics []string
	var owned assignment
	protocol := ""
	for _, p := range req.Protocols {
		if ts, o, ok := subscription(p.Metadata); ok {
			topics, owned, protocol = ts, o, p.Name
			break
		}
	}
	if protocol == "" {
		j.fail(errInconsistentGroupProto, req.MemberID)
		return
	}
	id := req.MemberID
	if id == "" {
		id = newMemberID(j.cl.ID)
		if j.instance != "" {
			id = newMemberID(j.instance)
		} else if req.Version >= 4 {
			j.fail(errMemberIDRequired, id)
			return
		}
	}
	all := c.topics()
	g := c.lookup(req.Group)
	if g == nil {
		j.fail(errUnknownMemberID, id)
		return
	}
	g.persistMu.Lock()
	defer g.persistMu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case c.closing.Load() || g.state == stateDead:
		j.fail(errCoordinatorNotAvailable, id)
		return
	case g.cg == nil || len(g.cg.members) == 0:
		// The group changed kind meanwhile: the client joins again.
		j.fail(errRebalanceInProgress, id)
		return
	}
	t := newTxn(g.cg)
	n := t.n
	m := n.members[id]
	bump := false
	if j.instance != "" {
		// A static member: the instance id names it; a new member id
		// with it takes the place of the one that held it (its
		// assignment, without a new group epoch).
		if sid, ok := n.static[j.instance]; ok && sid != id {
			if req.MemberID != "" {
				j.fail(errFencedInstanceID, id)
				return
			}
			sm := n.members[sid]
			t.remove(sid)
			m = newCmember(id, j.instance)
			m.Assigned, m.Target = sm.Assigned.clone(), sm.Target.clone()
			m.Topics, m.Epoch, m.RebalanceMs = slices.Clone(sm.Topics), sm.Epoch, sm.RebalanceMs
			t.add(m)
		}
	}
	switch {
	case m == nil && j.instance != "" && req.MemberID != "":
		j.fail(errUnknownMemberID, id)
		return
	case m == nil:
		if c.cfg.Consumer.MaxSize > 0 && len(n.members) >= c.cfg.Consumer.MaxSize {
			j.fail(errGroupMaxSize, id)
			return
		}
		m = newCmember(id, j.instance)
		t.add(m)
		bump = true
	case m.Classic == nil && !t.copied[id]:
		j.fail(errUnknownMemberID, id)
		return
	default:
		m = t.mut(id)
	}
	m.Classic = &classicMeta{SessionMs: int32(j.session.Milliseconds()), Protocols: classicProtocols(req.Protocols)}
	m.RebalanceMs = int32(j.rebalance.Milliseconds())
	m.ClientID, m.ClientHost = j.cl.ID, j.cl.Host
	if !slices.Equal(topics, m.Topics) {
		m.Topics = topics
		bump = true
	}
	if fp := fingerprint(n, all); fp != n.Meta {
		n.Meta = fp
		t.groupDirty = true
		bump = true
	}
	if bump {
		t.bump()
	}
	if bump || n.Epoch > n.AssignEpoch {
		c.computeTarget(t, all)
		m = n.members[id]
	}
	if next := reconcile(n, m, owned); next != nil {
		m = t.mut(id)
		*m = *next
	}
	if err := c.writeTxnLocked(g, t, nil); err != nil {
		c.cfg.Logger.Warn("groups: persisting consumer group failed", "group", g.id, "err", err)
		j.fail(errCoordinatorNotAvailable, id)
		return
	}
	c.touchMemberLocked(g, id)
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = req.Version
	r.Generation = m.Epoch
	pt, p := "consumer", protocol
	r.ProtocolType, r.Protocol = &pt, &p
	r.MemberID = id
	j.reply(r)
}

// syncConsumerLocked answers a classic member's SyncGroup in a consumer
// group with the partitions it holds.
func (c *Coordinator) syncConsumerLocked(g *group, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	m := g.cg.members[req.MemberID]
	switch {
	case req.Version >= 3 && fencedConsumer(g.cg, req.MemberID, req.InstanceID):
		return syncError(req.Version, errFencedInstanceID)
	case m == nil || m.Classic == nil:
		return syncError(req.Version, errUnknownMemberID)
	case req.Generation != m.Epoch:
		return syncError(req.Version, errIllegalGeneration)
	case req.Version >= 5 && req.ProtocolType != nil && *req.ProtocolType != "consumer":
		return syncError(req.Version, errInconsistentGroupProto)
	}
	c.touchMemberLocked(g, m.ID)
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = req.Version
	pt := "consumer"
	r.ProtocolType = &pt
	if req.Protocol != nil {
		p := *req.Protocol
		r.Protocol = &p
	}
	r.MemberAssignment = encodeAssignment(m.Assigned)
	return r
}

// heartbeatConsumerLocked answers a classic member's Heartbeat in a
// consumer group: REBALANCE_IN_PROGRESS until it holds its target at the
// assignment epoch.
func (c *Coordinator) heartbeatConsumerLocked(g *group, req *kmsg.HeartbeatRequest) int16 {
	m := g.cg.members[req.MemberID]
	switch {
	case req.Version >= 3 && fencedConsumer(g.cg, req.MemberID, req.InstanceID):
		return errFencedInstanceID
	case m == nil || m.Classic == nil:
		return errUnknownMemberID
	case req.Generation != m.Epoch:
		return errIllegalGeneration
	}
	c.touchMemberLocked(g, m.ID)
	if m.State != mStable || m.Epoch != g.cg.AssignEpoch {
		return errRebalanceInProgress
	}
	return errNone
}

// leaveConsumer removes classic members of a consumer group (LeaveGroup);
// it reports false when the group is not a consumer group with members
// (the classic path then answers).
func (c *Coordinator) leaveConsumer(g *group, leaving []kmsg.LeaveGroupRequestMember, codes []int16, top *int16) bool {
	all := c.topics()
	g.persistMu.Lock()
	defer g.persistMu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cg == nil || len(g.cg.members) == 0 {
		return false
	}
	t := newTxn(g.cg)
	var ids []string
	for i, lm := range leaving {
		id, code := leavingMemberID(lm, t.n.static)
		if code != errNone {
			codes[i] = code
			continue
		}
		if m := t.n.members[id]; m == nil || m.Classic == nil {
			codes[i] = errUnknownMemberID
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return true
	}
	c.removeMembers(t, all, ids...)
	if err := c.writeTxnLocked(g, t, nil); err != nil {
		c.cfg.Logger.Warn("groups: persisting consumer group failed", "group", g.id, "err", err)
		*top = errCoordinatorNotAvailable
	}
	return true
}

// fencedConsumer reports whether instance belongs to a member of cg other
// than memberID.
func fencedConsumer(cg *cgroup, memberID string, instance *string) bool {
	if instance == nil || *instance == "" {
		return false
	}
	sid, ok := cg.static[*instance]
	return ok && sid != memberID
}
