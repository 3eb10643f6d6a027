package share

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/kvlog"
)

// Client is who sent a request, for ShareGroupDescribe.
type Client struct{ ID, Host string }

// Heartbeat serves ShareGroupHeartbeat: members join (epoch 0), leave
// (epoch -1) and heartbeat; every heartbeat carries the member's
// assignment from the simple assignor. The group must not be a consumer
// group (the broker checks that first).
func (c *Coordinator) Heartbeat(cl Client, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(code int16, msg string) *kmsg.ShareGroupHeartbeatResponse {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp
	}
	switch {
	case req.GroupID == "":
		return fail(kerr.InvalidRequest.Code, "the group id is empty")
	case !validMemberID(req.MemberID):
		return fail(kerr.InvalidRequest.Code, "the member id must be 1 to 36 characters, chosen by the consumer")
	case req.MemberEpoch < -1:
		return fail(kerr.InvalidRequest.Code, "the member epoch is below -1")
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fail(kerr.InvalidRequest.Code, "a joining member must subscribe to at least one topic")
	}
	if req.MemberEpoch == -1 {
		topics := c.cfg.Logs.Topics()
		c.mu.Lock()
		g := c.groups[req.GroupID]
		if g == nil || g.members[req.MemberID] == nil {
			c.mu.Unlock()
			return fail(kerr.UnknownMemberID.Code, "member "+req.MemberID+" is not in share group "+req.GroupID)
		}
		c.removeMemberLocked(g, req.MemberID, topics)
		c.mu.Unlock()
		if c.releaseMember(g, req.MemberID) {
			c.broadcast()
		}
		resp.MemberID, resp.MemberEpoch = &req.MemberID, -1
		return resp
	}
	var g *group
	if req.MemberEpoch == 0 {
		var err error
		if g, err = c.ensureGroup(req.GroupID); err != nil {
			return fail(kerr.CoordinatorNotAvailable.Code, err.Error())
		}
	}
	topics := c.cfg.Logs.Topics()
	c.mu.Lock()
	if g == nil {
		g = c.groups[req.GroupID]
	}
	if g == nil {
		c.mu.Unlock()
		return fail(kerr.GroupIDNotFound.Code, "share group "+req.GroupID+" does not exist; join with member epoch 0")
	}
	m := g.members[req.MemberID]
	switch {
	case req.MemberEpoch == 0 && m == nil:
		if len(g.members) >= c.set.MaxSize {
			c.mu.Unlock()
			return fail(kerr.GroupMaxSizeReached.Code, "share group "+req.GroupID+" has group.share.max.size members")
		}
		m = &member{id: req.MemberID}
		g.members[req.MemberID] = m
	case req.MemberEpoch == 0:
		// A member rejoining with its own id starts over.
	case m == nil:
		c.mu.Unlock()
		return fail(kerr.UnknownMemberID.Code, "member "+req.MemberID+" is not in share group "+req.GroupID+"; rejoin with epoch 0")
	case req.MemberEpoch != m.epoch:
		c.mu.Unlock()
		return fail(kerr.FencedMemberEpoch.Code, "member epoch is stale; rejoin with epoch 0")
	}
	m.clientID, m.host, m.lastSeen = cl.ID, cl.Host, c.cfg.Now()
	if req.RackID != nil {
		m.rack = req.RackID
	}
	if req.SubscribedTopicNames != nil {
		ts := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(ts)
		m.topics = slices.Compact(ts)
	}
	c.assignLocked(g, topics)
	m.epoch = g.epoch
	assigned := g.target[m.id]
	resp.MemberID, resp.MemberEpoch = &req.MemberID, m.epoch
	resp.HeartbeatIntervalMillis = int32(c.groupSettings(g.id).HeartbeatInterval.Milliseconds())
	c.mu.Unlock()

	// The share partitions start where share.auto.offset.reset says,
	// once, when first assigned.
	for _, tp := range assigned {
		if l, _, ok := c.cfg.Logs.Log(tp); ok {
			if _, err := c.partition(g, tp, l); err != nil {
				return fail(kerr.CoordinatorNotAvailable.Code, err.Error())
			}
		}
	}
	a := kmsg.NewShareGroupHeartbeatResponseAssignment()
	for _, tps := range groupByTopic(assigned) {
		t := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
		t.TopicID = tps[0].Topic
		for _, tp := range tps {
			t.Partitions = append(t.Partitions, tp.Partition)
		}
		a.TopicPartitions = append(a.TopicPartitions, t)
	}
	resp.Assignment = &a
	return resp
}

// groupByTopic splits tps (sorted by topic) into one slice per topic.
func groupByTopic(tps []TP) [][]TP {
	var out [][]TP
	for i := 0; i < len(tps); {
		j := i + 1
		for j < len(tps) && tps[j].Topic == tps[i].Topic {
			j++
		}
		out = append(out, tps[i:j])
		i = j
	}
	return out
}

// removeMemberLocked drops a member and its share sessions and
// reassigns the rest (c.mu held). Its records are released by the
// caller, outside the lock.
func (c *Coordinator) removeMemberLocked(g *group, id string, topics map[string]TopicInfo) {
	delete(g.members, id)
	delete(c.sessions, sessionKey{g.id, id})
	c.assignLocked(g, topics)
}

// assignLocked computes the simple assignor's target for g and bumps
// the group epoch when it changed (c.mu held). Each topic's partitions
// are spread over the members subscribed to it: with fewer members than
// partitions, each member takes every n-th partition; with more, each
// partition is shared by every p-th member, so that every member reads
// and every partition is read.
func (c *Coordinator) assignLocked(g *group, topics map[string]TopicInfo) {
	target := map[string][]TP{}
	subs := map[string][]string{} // topic → sorted member ids
	for _, id := range sortedIDs(g.members) {
		for _, t := range g.members[id].topics {
			subs[t] = append(subs[t], id)
		}
	}
	for t, ids := range subs {
		ti, ok := topics[t]
		if !ok || ti.Partitions == 0 {
			continue
		}
		np, nm := int(ti.Partitions), len(ids)
		for i, id := range ids {
			if nm <= np {
				for p := i; p < np; p += nm {
					target[id] = append(target[id], TP{ti.ID, int32(p)})
				}
				continue
			}
			target[id] = append(target[id], TP{ti.ID, int32(i % np)})
		}
	}
	for id := range target {
		slices.SortFunc(target[id], compareTP)
	}
	if !sameTarget(g.target, target) {
		g.target = target
		g.epoch++
	}
}

func compareTP(a, b TP) int {
	if c := slices.Compare(a.Topic[:], b.Topic[:]); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

func sameTarget(a, b map[string][]TP) bool {
	if len(a) != len(b) {
		return false
	}
	for id, tps := range a {
		if !slices.Equal(tps, b[id]) {
			return false
		}
	}
	return true
}

// Describe serves ShareGroupDescribe for the groups the caller may see.
func (c *Coordinator) Describe(req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	names := map[[16]byte]string{}
	for n, t := range c.cfg.Logs.Topics() {
		names[t.ID] = n
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range req.GroupIDs {
		rg := kmsg.NewShareGroupDescribeResponseGroup()
		rg.GroupID = id
		g := c.groups[id]
		if g == nil {
			msg := "share group " + id + " does not exist"
			rg.ErrorCode, rg.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.GroupState = groupState(g)
		rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor = g.epoch, g.epoch, "simple"
		for _, mid := range sortedIDs(g.members) {
			m := g.members[mid]
			rm := kmsg.NewShareGroupDescribeResponseGroupMember()
			rm.MemberID, rm.RackID, rm.MemberEpoch = m.id, m.rack, m.epoch
			rm.ClientID, rm.ClientHost = m.clientID, m.host
			rm.SubscribedTopicNames = slices.Clone(m.topics)
			for _, tps := range groupByTopic(g.target[mid]) {
				t := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				t.TopicID, t.Topic = tps[0].Topic, names[tps[0].Topic]
				for _, tp := range tps {
					t.Partitions = append(t.Partitions, tp.Partition)
				}
				rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, t)
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func groupState(g *group) string {
	if len(g.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// GroupSummary is one share group for ListGroups, DescribeGroups and
// monitoring.
type GroupSummary struct {
	ID      string
	State   string
	Epoch   int32
	Members []MemberSummary
	Parts   []PartitionSummary
}

// MemberSummary is one member of a share group.
type MemberSummary struct {
	ID, ClientID, Host string
	Assigned           []TP
}

// PartitionSummary is one share partition's state.
type PartitionSummary struct {
	TP                                          TP
	Start, End                                  int64
	Available, Acquired, Acknowledged, Archived int
}

// Summaries returns every share group, sorted by id.
func (c *Coordinator) Summaries() []GroupSummary {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []GroupSummary
	for _, id := range sortedIDs(c.groups) {
		out = append(out, c.summaryLocked(c.groups[id]))
	}
	return out
}

// Summary returns share group id, or ok false.
func (c *Coordinator) Summary(id string) (s GroupSummary, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[id]; g != nil {
		return c.summaryLocked(g), true
	}
	return GroupSummary{}, false
}

func (c *Coordinator) summaryLocked(g *group) GroupSummary {
	s := GroupSummary{ID: g.id, State: groupState(g), Epoch: g.epoch}
	for _, mid := range sortedIDs(g.members) {
		m := g.members[mid]
		s.Members = append(s.Members, MemberSummary{ID: m.id, ClientID: m.clientID, Host: m.host, Assigned: slices.Clone(g.target[mid])})
	}
	for tp, sp := range g.parts {
		sp.mu.Lock()
		ps := PartitionSummary{TP: tp, Start: sp.st.start, End: sp.st.end()}
		ps.Available, ps.Acquired, ps.Acknowledged, ps.Archived = sp.st.counts()
		sp.mu.Unlock()
		s.Parts = append(s.Parts, ps)
	}
	slices.SortFunc(s.Parts, func(a, b PartitionSummary) int { return compareTP(a.TP, b.TP) })
	return s
}

// Delete deletes an empty share group and its share partitions' state,
// durably. It answers GROUP_ID_NOT_FOUND for an unknown group and
// NON_EMPTY_GROUP while the group has members, as Kafka does.
func (c *Coordinator) Delete(id string) (int16, string) {
	c.mu.Lock()
	g := c.groups[id]
	switch {
	case g == nil:
		c.mu.Unlock()
		return kerr.GroupIDNotFound.Code, "share group " + id + " does not exist"
	case len(g.members) > 0:
		c.mu.Unlock()
		return kerr.NonEmptyGroup.Code, "share group " + id + " has members: stop its consumers first"
	}
	recs := make([]kvlog.Record, 0, len(g.parts)+1)
	parts := make([]*sharePartition, 0, len(g.parts))
	for _, sp := range g.parts {
		recs = append(recs, kvlog.Record{Key: sp.key})
		parts = append(parts, sp)
	}
	recs = append(recs, kvlog.Record{Key: groupKey(id)}) // after its partitions: replay deletes them first
	g.deleted = true
	delete(c.groups, id)
	for k := range c.sessions {
		if k.group == id {
			delete(c.sessions, k)
		}
	}
	c.mu.Unlock()
	// A change in flight (an expiring lock) queues its delta before the
	// tombstones or not at all.
	for _, sp := range parts {
		sp.writeMu.Lock()
		sp.deleted = true
		sp.writeMu.Unlock()
	}
	if err := c.log.Append(recs, nil); err != nil {
		return kerr.CoordinatorNotAvailable.Code, "deleting share group " + id + ": " + err.Error()
	}
	return 0, ""
}

// emptyGroup returns share group id if it has no members: else an error
// code and message (NON_EMPTY_GROUP, or GROUP_ID_NOT_FOUND when create
// is false and the group does not exist).
func (c *Coordinator) emptyGroup(id string, create bool) (*group, int16, string) {
	var g *group
	if create {
		var err error
		if g, err = c.ensureGroup(id); err != nil {
			return nil, kerr.CoordinatorNotAvailable.Code, err.Error()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g == nil {
		g = c.groups[id]
	}
	switch {
	case g == nil:
		return nil, kerr.GroupIDNotFound.Code, "share group " + id + " does not exist"
	case len(g.members) > 0:
		return nil, kerr.NonEmptyGroup.Code, "share group " + id + " has members: stop its consumers first"
	}
	return g, 0, ""
}

// ResetStarts sets share partitions of the empty share group id
// (created if need be) to start at the given offsets, with nothing in
// flight and every delivery count forgotten (AlterShareGroupOffsets).
func (c *Coordinator) ResetStarts(id string, starts map[TP]int64) (int16, string) {
	g, code, msg := c.emptyGroup(id, true)
	if code != 0 {
		return code, msg
	}
	for tp, start := range starts {
		c.mu.Lock()
		sp := g.parts[tp]
		if sp == nil {
			sp = &sharePartition{key: partKey(id, tp), st: newState(start)}
			g.parts[tp] = sp
			sp.writeMu.Lock()
			c.mu.Unlock()
		} else {
			c.mu.Unlock()
			sp.writeMu.Lock()
			sp.mu.Lock()
			sp.st = newState(start)
			sp.mu.Unlock()
		}
		w, err := c.log.Enqueue([]kvlog.Record{{Key: sp.key, Value: sp.st.full()}})
		sp.writeMu.Unlock()
		if err == nil {
			err = w()
		}
		if err != nil {
			return kerr.KafkaStorageError.Code, "recording the new start offsets: " + err.Error()
		}
	}
	return 0, ""
}

// DropStates forgets the share partitions tps of the empty share group
// id (DeleteShareGroupOffsets): the next member starts them where
// share.auto.offset.reset says.
func (c *Coordinator) DropStates(id string, tps []TP) (int16, string) {
	g, code, msg := c.emptyGroup(id, false)
	if code != 0 {
		return code, msg
	}
	var recs []kvlog.Record
	for _, tp := range tps {
		c.mu.Lock()
		sp := g.parts[tp]
		delete(g.parts, tp)
		c.mu.Unlock()
		if sp == nil {
			continue
		}
		sp.writeMu.Lock()
		sp.deleted = true
		sp.writeMu.Unlock()
		recs = append(recs, kvlog.Record{Key: sp.key})
	}
	if len(recs) == 0 {
		return 0, ""
	}
	if err := c.log.Append(recs, nil); err != nil {
		return kerr.KafkaStorageError.Code, "deleting share-partition state: " + err.Error()
	}
	return 0, ""
}
