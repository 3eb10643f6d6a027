package groups

// JoinGroup v0-9, SyncGroup v0-5, Heartbeat v0-4 and LeaveGroup v0-5: the
// classic rebalance protocol.
//
// Behaviour notes:
//   - JoinGroup v4+ without a group.instance.id gets MEMBER_ID_REQUIRED
//     and a member id to rejoin with (KIP-394); that id is held for a
//     session timeout and the rebalance waits for it.
//   - A static member (group.instance.id, v5+) that rejoins with an
//     unknown member id takes over its old member's place: in a Stable
//     group whose selected protocol it still offers (its metadata may
//     differ) it gets its old assignment without a rebalance; the old
//     member id is fenced (FENCED_INSTANCE_ID).
//   - A rebalance completes when every member has rejoined, or at the
//     largest rebalance timeout, when members that did not rejoin are
//     removed. Members waiting in JoinGroup or SyncGroup do not expire.
//   - The leader's SyncGroup persists the group's metadata (assignments
//     included) before any member gets its assignment.
//   - Skipped: group.max.size, KIP-848 (ConsumerGroupHeartbeat), and the
//     reason strings of v8+ beyond logging.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func joinError(version, code int16, memberID string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.ErrorCode = code
	r.Generation = -1
	r.MemberID = memberID
	return r
}

func syncError(version, code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	r.ErrorCode = code
	return r
}

// JoinGroup handles a JoinGroup request: it blocks until the group's
// rebalance completes (or ctx is done, when the member stays in the
// rebalance and its answer is dropped, as when a connection closes).
func (c *Coordinator) JoinGroup(ctx context.Context, cl Client, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	start := c.now()
	c.join(cl, req, func(r *kmsg.JoinGroupResponse) { ch <- r })
	select {
	case r := <-ch:
		c.metrics.observeJoin(r.ErrorCode, c.now().Sub(start))
		return r
	case <-ctx.Done():
		return joinError(req.Version, errRebalanceInProgress, req.MemberID)
	}
}

// join is JoinGroup with the answer delivered to reply (exactly once,
// possibly later, possibly with a group lock held; reply must not block).
func (c *Coordinator) join(cl Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	fail := func(code int16) { reply(joinError(req.Version, code, req.MemberID)) }
	if c.closing.Load() {
		fail(errCoordinatorNotAvailable)
		return
	}
	if req.Group == "" {
		fail(errInvalidGroupID)
		return
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		fail(errInvalidSessionTimeout)
		return
	}
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 || rebalance <= 0 {
		rebalance = session
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		fail(errInconsistentGroupProto)
		return
	}
	instance := ""
	if req.Version >= 5 && req.InstanceID != nil {
		instance = *req.InstanceID
	}
	if !c.classicJoinConsumer(req.Group) {
		// A consumer group with members: the classic member joins it
		// (mixed.go).
		c.joinConsumerGroup(&joinReq{cl: cl, req: req, session: session, rebalance: rebalance, instance: instance, reply: reply})
		return
	}
	var g *group
	if req.MemberID == "" {
		g = c.getOrCreate(req.Group)
	} else if g = c.lookup(req.Group); g == nil {
		fail(errUnknownMemberID)
		return
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if c.closing.Load() || g.state == stateDead {
		fail(errCoordinatorNotAvailable)
		return
	}
	j := joinReq{cl: cl, req: req, session: session, rebalance: rebalance, instance: instance, reply: reply}
	if req.MemberID == "" {
		c.joinNewLocked(g, &j)
	} else {
		c.joinKnownLocked(g, &j)
	}
}

// joinReq is a validated JoinGroup request.
type joinReq struct {
	cl        Client
	req       *kmsg.JoinGroupRequest
	session   time.Duration
	rebalance time.Duration
	instance  string
	reply     func(*kmsg.JoinGroupResponse)
}

func (j *joinReq) fail(code int16, memberID string) {
	j.reply(joinError(j.req.Version, code, memberID))
}

func (c *Coordinator) joinNewLocked(g *group, j *joinReq) {
	if !g.supportsLocked("", j.req.ProtocolType, j.req.Protocols) {
		j.fail(errInconsistentGroupProto, "")
		return
	}
	id := newMemberID(j.cl.ID)
	if j.instance != "" {
		id = newMemberID(j.instance) // as Kafka names static members
		if old, ok := g.static[j.instance]; ok {
			c.replaceStaticLocked(g, g.members[old], id, j)
			return
		}
		c.addMemberLocked(g, id, j)
		return
	}
	if j.req.Version >= 4 {
		g.pending[id] = c.after(j.session, func() { c.expirePending(g, id) })
		j.fail(errMemberIDRequired, id)
		return
	}
	c.addMemberLocked(g, id, j)
}

func (c *Coordinator) joinKnownLocked(g *group, j *joinReq) {
	id := j.req.MemberID
	if t, ok := g.pending[id]; ok {
		if !g.supportsLocked("", j.req.ProtocolType, j.req.Protocols) {
			j.fail(errInconsistentGroupProto, id)
			return
		}
		t.Stop()
		delete(g.pending, id)
		c.addMemberLocked(g, id, j)
		return
	}
	if j.instance != "" {
		if sid, ok := g.static[j.instance]; ok && sid != id {
			j.fail(errFencedInstanceID, id)
			return
		}
	}
	m := g.members[id]
	if m == nil {
		j.fail(errUnknownMemberID, id)
		return
	}
	if !g.supportsLocked(id, j.req.ProtocolType, j.req.Protocols) {
		j.fail(errInconsistentGroupProto, id)
		return
	}
	same := sameProtocols(m.protocols, j.req.Protocols)
	switch g.state {
	case statePreparing:
		c.updateMemberLocked(g, m, j)
		c.maybeCompleteJoinLocked(g)
	case stateCompleting:
		if same {
			// A repeated JoinGroup (a lost response): answer it again.
			j.reply(c.joinResponseLocked(g, m, j.req.Version))
			return
		}
		c.updateMemberLocked(g, m, j)
		c.prepareRebalanceLocked(g)
	case stateStable:
		if m.id != g.leader && same {
			c.heartbeatLocked(g, m)
			j.reply(c.joinResponseLocked(g, m, j.req.Version))
			return
		}
		c.updateMemberLocked(g, m, j)
		c.prepareRebalanceLocked(g)
	default:
		j.fail(errUnknownMemberID, id)
	}
}

// updateMemberLocked records a member's rejoin: its protocols and
// timeouts, and its waiting JoinGroup.
func (c *Coordinator) updateMemberLocked(g *group, m *member, j *joinReq) {
	if m.joinWait != nil { // a second JoinGroup supersedes the first
		m.joinWait(joinError(m.joinVersion, errRebalanceInProgress, m.id))
	}
	m.protocols = j.req.Protocols
	m.session, m.rebalance = j.session, j.rebalance
	m.clientID, m.clientHost = j.cl.ID, j.cl.Host
	m.joinWait, m.joinVersion = j.reply, j.req.Version
}

func (c *Coordinator) addMemberLocked(g *group, id string, j *joinReq) {
	g.joinSeq++
	m := &member{id: id, instanceID: j.instance, joinSeq: g.joinSeq, generation: -1}
	c.updateMemberLocked(g, m, j)
	if len(g.members) == 0 {
		g.protocolType = j.req.ProtocolType
	}
	g.members[id] = m
	if m.instanceID != "" {
		g.static[m.instanceID] = id
	}
	if g.state == statePreparing {
		c.maybeCompleteJoinLocked(g)
		return
	}
	c.prepareRebalanceLocked(g)
}

// replaceStaticLocked gives a static member's place to the new member id
// it rejoined with, fencing the old id.
func (c *Coordinator) replaceStaticLocked(g *group, old *member, id string, j *joinReq) {
	c.failWaitersLocked(old, errFencedInstanceID)
	if old.timer != nil {
		old.timer.Stop()
		old.timer = nil
	}
	delete(g.members, old.id)
	m := &member{id: id, instanceID: j.instance, joinSeq: old.joinSeq, assignment: old.assignment,
		protocols: old.protocols, session: old.session, rebalance: old.rebalance, generation: old.generation}
	g.members[id] = m
	g.static[j.instance] = id
	if g.leader == old.id {
		g.leader = id
	}
	if g.state == stateStable && offers(j.req.Protocols, g.protocol) {
		// As in Kafka, only the selected protocol must survive: the new
		// incarnation's metadata (its owned partitions) may differ.
		m.protocols = j.req.Protocols
		m.clientID, m.clientHost = j.cl.ID, j.cl.Host
		m.session, m.rebalance = j.session, j.rebalance
		c.heartbeatLocked(g, m)
		r := c.joinResponseLocked(g, m, j.req.Version)
		if m.id == g.leader && j.req.Version >= 9 {
			r.SkipAssignment = true
		}
		j.reply(r)
		c.metrics.staticRejoins.Inc()
		c.persistMetadata(g)
		return
	}
	c.updateMemberLocked(g, m, j)
	if g.state == statePreparing {
		c.maybeCompleteJoinLocked(g)
		return
	}
	c.prepareRebalanceLocked(g)
}

// joinResponseLocked is member m's successful JoinGroup answer for the
// group's current generation; the leader gets the member list.
func (c *Coordinator) joinResponseLocked(g *group, m *member, version int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation = g.generation
	pt, p := g.protocolType, g.protocol
	r.ProtocolType, r.Protocol = &pt, &p
	r.LeaderID = g.leader
	r.MemberID = m.id
	if m.id == g.leader {
		for _, o := range sortedMembers(g) {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = o.id
			rm.InstanceID = o.instancePtr()
			rm.ProtocolMetadata = o.metadataFor(g.protocol)
			r.Members = append(r.Members, rm)
		}
	}
	return r
}

// sortedMembers lists a group's members in joining order.
func sortedMembers(g *group) []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	for i := 1; i < len(ms); i++ {
		for k := i; k > 0 && ms[k].joinSeq < ms[k-1].joinSeq; k-- {
			ms[k], ms[k-1] = ms[k-1], ms[k]
		}
	}
	return ms
}

// prepareRebalanceLocked moves the group to PreparingRebalance: members
// must rejoin within the largest rebalance timeout.
func (c *Coordinator) prepareRebalanceLocked(g *group) {
	now := c.now()
	if g.state == stateCompleting {
		for _, m := range g.members {
			if m.syncWait != nil {
				w := m.syncWait
				m.syncWait = nil
				w(syncError(m.syncVersion, errRebalanceInProgress))
			}
		}
		g.syncing = false
	}
	var timeout time.Duration
	for _, m := range g.members {
		timeout = max(timeout, m.rebalance)
	}
	initial := g.state == stateEmpty && c.cfg.InitialRebalanceDelay > 0
	g.setStateLocked(statePreparing, now)
	g.rebalanceSeq++
	seq := g.rebalanceSeq
	if g.rebalance != nil {
		g.rebalance.Stop()
	}
	g.rebalance = c.after(timeout, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.rebalanceSeq == seq && g.state == statePreparing {
			c.completeJoinLocked(g)
		}
	})
	g.initialUntil = time.Time{}
	if initial {
		g.initialUntil = now.Add(c.cfg.InitialRebalanceDelay)
		c.after(c.cfg.InitialRebalanceDelay, func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.rebalanceSeq == seq {
				g.initialUntil = time.Time{}
				c.maybeCompleteJoinLocked(g)
			}
		})
	}
	c.metrics.rebalances.Inc()
	g.rebalances++
	c.maybeCompleteJoinLocked(g)
}

// maybeCompleteJoinLocked completes the join phase once every member and
// every pending member id has joined.
func (c *Coordinator) maybeCompleteJoinLocked(g *group) {
	if g.state != statePreparing || len(g.pending) > 0 || !g.initialUntil.IsZero() {
		return
	}
	for _, m := range g.members {
		if m.joinWait == nil {
			return
		}
	}
	c.completeJoinLocked(g)
}

// completeJoinLocked ends the join phase: members that did not rejoin are
// removed, the generation advances, and every joined member gets its
// answer (the group goes to CompletingRebalance, or Empty if no one is
// left).
func (c *Coordinator) completeJoinLocked(g *group) {
	now := c.now()
	for _, m := range g.members {
		if m.joinWait == nil {
			c.dropMemberLocked(g, m, errUnknownMemberID)
		}
	}
	for id, t := range g.pending {
		t.Stop()
		delete(g.pending, id)
	}
	if g.rebalance != nil {
		g.rebalance.Stop()
		g.rebalance = nil
	}
	g.initialUntil = time.Time{}
	g.generation++
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.setStateLocked(stateEmpty, now)
		if g.meta != nil {
			c.persistMetadata(g)
		}
		return
	}
	ms := sortedMembers(g)
	if g.members[g.leader] == nil {
		g.leader = ms[0].id
	}
	g.protocol = g.selectProtocolLocked(g.members[g.leader])
	g.setStateLocked(stateCompleting, now)
	for _, m := range ms {
		m.assignment = nil
		m.generation = g.generation
		w := m.joinWait
		m.joinWait = nil
		w(c.joinResponseLocked(g, m, m.joinVersion))
		c.heartbeatLocked(g, m)
	}
}

// dropMemberLocked removes m from the group, answering its waiters with code.
func (c *Coordinator) dropMemberLocked(g *group, m *member, code int16) {
	c.failWaitersLocked(m, code)
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	delete(g.members, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
	}
}

// afterRemovalLocked reacts to members having left: a settled group
// rebalances; one already rebalancing may now be complete.
func (c *Coordinator) afterRemovalLocked(g *group) {
	switch g.state {
	case stateStable, stateCompleting:
		c.prepareRebalanceLocked(g)
	case statePreparing:
		c.maybeCompleteJoinLocked(g)
	}
}

// heartbeatLocked pushes m's session deadline on and makes sure its
// session timer runs.
func (c *Coordinator) heartbeatLocked(g *group, m *member) {
	m.deadline = c.now().Add(m.session)
	if m.timer == nil {
		m.timer = c.after(m.session, func() { c.sessionCheck(g, m) })
	}
}

// sessionCheck runs when m's session timer fires: a member that has
// heartbeated since is rescheduled; one waiting in JoinGroup or SyncGroup
// is kept; otherwise it is removed and the group rebalances.
func (c *Coordinator) sessionCheck(g *group, m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.members[m.id] != m {
		return
	}
	m.timer = nil
	if m.joinWait != nil || m.syncWait != nil {
		c.heartbeatLocked(g, m)
		return
	}
	if now := c.now(); now.Before(m.deadline) {
		m.timer = c.after(m.deadline.Sub(now), func() { c.sessionCheck(g, m) })
		return
	}
	c.cfg.Logger.Info("groups: member session expired", "group", g.id, "member", m.id)
	c.metrics.expiredMembers.Inc()
	c.dropMemberLocked(g, m, errUnknownMemberID)
	c.afterRemovalLocked(g)
}

// expirePending forgets a member id handed out with MEMBER_ID_REQUIRED
// that did not join within its session timeout.
func (c *Coordinator) expirePending(g *group, id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.pending[id]; !ok {
		return
	}
	delete(g.pending, id)
	c.maybeCompleteJoinLocked(g)
}

// fencedLocked reports whether instance belongs to a different member.
func fencedLocked(g *group, memberID, instance string) bool {
	if instance == "" {
		return false
	}
	sid, ok := g.static[instance]
	return ok && sid != memberID
}

// SyncGroup handles a SyncGroup request: the leader hands in the
// assignment, which is persisted, and every member blocks until it can be
// given its part (or ctx is done).
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	c.sync(req, func(r *kmsg.SyncGroupResponse) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return syncError(req.Version, errRebalanceInProgress)
	}
}

// sync is SyncGroup with the answer delivered to reply (exactly once,
// possibly later, possibly with a group lock held). For the leader it
// returns after the assignment has been persisted.
func (c *Coordinator) sync(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	fail := func(code int16) { reply(syncError(req.Version, code)) }
	if c.closing.Load() {
		fail(errCoordinatorNotAvailable)
		return
	}
	if req.Group == "" {
		fail(errInvalidGroupID)
		return
	}
	g := c.lookup(req.Group)
	if g == nil {
		fail(errUnknownMemberID)
		return
	}
	instance := ""
	if req.Version >= 3 && req.InstanceID != nil {
		instance = *req.InstanceID
	}
	g.mu.Lock()
	if g.cg != nil && g.state != stateDead && !c.closing.Load() {
		r := c.syncConsumerLocked(g, req) // a classic member of a consumer group (mixed.go)
		g.mu.Unlock()
		reply(r)
		return
	}
	m := g.members[req.MemberID]
	switch {
	case c.closing.Load() || g.state == stateDead:
		fail(errCoordinatorNotAvailable)
	case fencedLocked(g, req.MemberID, instance):
		fail(errFencedInstanceID)
	case m == nil:
		fail(errUnknownMemberID)
	case req.Generation != g.generation:
		fail(errIllegalGeneration)
	case req.Version >= 5 && ((req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && *req.Protocol != g.protocol)):
		fail(errInconsistentGroupProto)
	case g.state == statePreparing:
		fail(errRebalanceInProgress)
	case g.state == stateStable:
		c.heartbeatLocked(g, m)
		reply(c.syncResponseLocked(g, m.assignment, req.Version))
	case g.state == stateCompleting:
		if m.syncWait != nil {
			m.syncWait(syncError(m.syncVersion, errRebalanceInProgress))
		}
		m.syncWait, m.syncVersion = reply, req.Version
		c.heartbeatLocked(g, m)
		if m.id == g.leader && !g.syncing {
			g.syncing = true
			assign := make(map[string][]byte, len(g.members))
			for _, a := range req.GroupAssignment {
				if g.members[a.MemberID] != nil {
					assign[a.MemberID] = a.MemberAssignment
				}
			}
			gen := g.generation
			value := g.metadataLocked(c.now(), assign)
			g.mu.Unlock()
			c.persistAssignment(g, gen, value, assign)
			return
		}
	default: // Empty
		fail(errUnknownMemberID)
	}
	g.mu.Unlock()
}

func (c *Coordinator) syncResponseLocked(g *group, assignment []byte, version int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	pt, p := g.protocolType, g.protocol
	r.ProtocolType, r.Protocol = &pt, &p
	r.MemberAssignment = assignment
	if r.MemberAssignment == nil {
		r.MemberAssignment = []byte{}
	}
	return r
}

// persistAssignment writes the group's metadata with the leader's
// assignment; once durable, and if the group is still completing that
// generation, the group becomes Stable and every waiting member gets its
// assignment. If the write fails the group rebalances.
func (c *Coordinator) persistAssignment(g *group, gen int32, value []byte, assign map[string][]byte) {
	g.persistMu.Lock()
	defer g.persistMu.Unlock()
	err := c.st.append([]kv{{Key: groupKey(g.id), Value: value}}, func(base int64) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.meta, g.metaOffset = value, base
		if g.state != stateCompleting || g.generation != gen || !g.syncing {
			return
		}
		g.syncing = false
		g.setStateLocked(stateStable, c.now())
		for _, m := range sortedMembers(g) {
			m.assignment = assign[m.id]
			if m.syncWait != nil {
				w := m.syncWait
				m.syncWait = nil
				w(c.syncResponseLocked(g, m.assignment, m.syncVersion))
			}
		}
	})
	if err == nil {
		return
	}
	c.cfg.Logger.Warn("groups: persisting assignment failed", "group", g.id, "err", err)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == stateCompleting && g.generation == gen && g.syncing {
		for _, m := range g.members {
			if m.syncWait != nil {
				w := m.syncWait
				m.syncWait = nil
				w(syncError(m.syncVersion, errCoordinatorNotAvailable))
			}
		}
		c.prepareRebalanceLocked(g)
	}
}

// Heartbeat handles a Heartbeat request.
func (c *Coordinator) Heartbeat(_ context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	r := kmsg.NewPtrHeartbeatResponse()
	r.Version = req.Version
	r.ErrorCode = c.heartbeat(req)
	return r
}

func (c *Coordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if c.closing.Load() {
		return errCoordinatorNotAvailable
	}
	if req.Group == "" {
		return errInvalidGroupID
	}
	g := c.lookup(req.Group)
	if g == nil {
		return errUnknownMemberID
	}
	instance := ""
	if req.Version >= 3 && req.InstanceID != nil {
		instance = *req.InstanceID
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cg != nil && g.state != stateDead {
		return c.heartbeatConsumerLocked(g, req) // a classic member of a consumer group (mixed.go)
	}
	m := g.members[req.MemberID]
	switch {
	case g.state == stateDead:
		return errCoordinatorNotAvailable
	case fencedLocked(g, req.MemberID, instance):
		return errFencedInstanceID
	case m == nil:
		return errUnknownMemberID
	case req.Generation != g.generation:
		return errIllegalGeneration
	}
	c.heartbeatLocked(g, m)
	if g.state == statePreparing {
		return errRebalanceInProgress
	}
	return errNone
}

// LeaveGroup handles a LeaveGroup request: v0-2 name one member, v3+ a
// list of members by member id and/or group.instance.id.
func (c *Coordinator) LeaveGroup(_ context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	r := kmsg.NewPtrLeaveGroupResponse()
	r.Version = req.Version
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	codes := c.leave(req.Group, leaving, &r.ErrorCode)
	if req.Version < 3 {
		if r.ErrorCode == 0 && len(codes) == 1 {
			r.ErrorCode = codes[0]
		}
		return r
	}
	for i, lm := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID = lm.MemberID
		rm.InstanceID = lm.InstanceID
		if codes != nil {
			rm.ErrorCode = codes[i]
		}
		r.Members = append(r.Members, rm)
	}
	return r
}

// leave removes members, returning a code per member; a group-level
// error goes to *top (and codes is nil).
// leavingMemberID is the member id a leaving member stands for: its
// member id or, given an instance id, the static member's with it
// (errUnknownMemberID if there is none, errFencedInstanceID if the
// member id given is another).
func leavingMemberID(lm kmsg.LeaveGroupRequestMember, static map[string]string) (string, int16) {
	if lm.InstanceID == nil || *lm.InstanceID == "" {
		return lm.MemberID, errNone
	}
	sid, ok := static[*lm.InstanceID]
	switch {
	case !ok:
		return "", errUnknownMemberID
	case lm.MemberID != "" && lm.MemberID != sid:
		return "", errFencedInstanceID
	}
	return sid, errNone
}

func (c *Coordinator) leave(groupID string, leaving []kmsg.LeaveGroupRequestMember, top *int16) []int16 {
	if c.closing.Load() {
		*top = errCoordinatorNotAvailable
		return nil
	}
	if groupID == "" {
		*top = errInvalidGroupID
		return nil
	}
	codes := make([]int16, len(leaving))
	g := c.lookup(groupID)
	if g == nil {
		for i := range codes {
			codes[i] = errUnknownMemberID
		}
		return codes
	}
	if c.leaveConsumer(g, leaving, codes, top) { // classic members of a consumer group (mixed.go)
		if *top != errNone {
			return nil
		}
		return codes
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == stateDead {
		*top = errCoordinatorNotAvailable
		return nil
	}
	removed := false
	for i, lm := range leaving {
		id, code := leavingMemberID(lm, g.static)
		if code != errNone {
			codes[i] = code
			continue
		}
		if t, ok := g.pending[id]; ok {
			t.Stop()
			delete(g.pending, id)
			removed = true
			continue
		}
		m := g.members[id]
		if m == nil {
			codes[i] = errUnknownMemberID
			continue
		}
		c.dropMemberLocked(g, m, errUnknownMemberID)
		removed = true
	}
	if removed {
		c.afterRemovalLocked(g)
	}
	return codes
}

// offers reports whether protocols include name.
func offers(protocols []kmsg.JoinGroupRequestProtocol, name string) bool {
	for _, p := range protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}
