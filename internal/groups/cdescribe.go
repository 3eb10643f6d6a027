package groups

// ConsumerGroupDescribe v0-1, and what the other group APIs answer for
// consumer groups.
//
// Behaviour notes:
//   - ConsumerGroupDescribe of a group that does not exist, or of a
//     classic group, gets GROUP_ID_NOT_FOUND, as in Kafka. A member's
//     assignment and target carry topic ids and names (topics that no
//     longer exist are left out); MemberType (v1) is 1, consumer.
//   - DescribeGroups of a consumer group gets GROUP_ID_NOT_FOUND ("not a
//     classic group"), as in Kafka.
//   - ListGroups reports consumer groups with type "consumer" and their
//     consumer-group state (Empty, Assigning, Reconciling, Stable).
//   - OffsetCommit to a consumer group: a commit with a negative member
//     epoch is accepted while the group has no members (admin tools);
//     otherwise the member must exist (UNKNOWN_MEMBER_ID), commit with
//     OffsetCommit v9 or later (UNSUPPORTED_VERSION) and at its current
//     member epoch (STALE_MEMBER_EPOCH).
//   - OffsetFetch v9 with a member id checks the member and epoch the
//     same way; without one (epoch -1) it is an admin fetch.
//   - TxnOffsetCommit (CheckMember) of a consumer group checks the member
//     and its epoch: UNKNOWN_MEMBER_ID, or ILLEGAL_GENERATION for an epoch
//     that is not the member's (the code every TxnOffsetCommit version
//     knows).
//   - OffsetDelete of a consumer group with members refuses topics a
//     member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC).
//   - JoinGroup (classic) to a consumer group with members gets
//     INCONSISTENT_GROUP_PROTOCOL (online migration is not served); an
//     empty consumer group becomes a classic group.

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe handles a ConsumerGroupDescribe request.
func (c *Coordinator) ConsumerGroupDescribe(_ context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	r := kmsg.NewPtrConsumerGroupDescribeResponse()
	r.Version = req.Version
	topics := c.topics()
	for _, id := range req.Groups {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group = id
		d.AuthorizedOperations = -2147483648
		notFound := func(format string) {
			d.ErrorCode = errGroupIDNotFound
			msg := fmt.Sprintf(format, id)
			d.ErrorMessage = &msg
		}
		g := c.lookup(id)
		switch {
		case c.closing.Load():
			d.ErrorCode = errCoordinatorNotAvailable
		case id == "":
			d.ErrorCode = errInvalidGroupID
		case g == nil:
			notFound("Group %s not found.")
		default:
			g.mu.Lock()
			switch {
			case g.state == stateDead:
				notFound("Group %s not found.")
			case g.cg == nil:
				notFound("Group %s is not a consumer group.")
			default:
				describeConsumerLocked(g.cg, topics, &d)
			}
			g.mu.Unlock()
		}
		r.Groups = append(r.Groups, d)
	}
	return r
}

func describeConsumerLocked(cg *cgroup, topics map[string]TopicInfo, d *kmsg.ConsumerGroupDescribeResponseGroup) {
	d.State = cg.stateName()
	d.Epoch, d.AssignmentEpoch, d.AssignorName = cg.Epoch, cg.AssignEpoch, cg.Assignor
	for _, m := range cg.sortedMembers() {
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.ID
		dm.InstanceID = m.instancePtr()
		if m.RackID != "" {
			rack := m.RackID
			dm.RackID = &rack
		}
		dm.MemberEpoch = m.Epoch
		dm.ClientID, dm.ClientHost = m.ClientID, m.ClientHost
		dm.SubscribedTopics = slices.Clone(m.Topics)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		if m.Regex != "" {
			re := m.Regex
			dm.SubscribedTopicRegex = &re
		}
		dm.Assignment = describeAssignment(m.Assigned, topics)
		dm.TargetAssignment = describeAssignment(m.Target, topics)
		dm.MemberType = 1 // consumer
		if m.Classic != nil {
			dm.MemberType = 0 // classic
		}
		d.Members = append(d.Members, dm)
	}
}

func describeAssignment(a assignment, topics map[string]TopicInfo) kmsg.Assignment {
	out := kmsg.NewAssignment()
	for _, t := range a.topics() {
		ti, ok := topics[t]
		if !ok {
			continue
		}
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Topic, tp.Partitions = ti.ID, t, slices.Clone(a[t])
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	return out
}

// checkConsumerCommitLocked checks an OffsetCommit's member against a
// consumer group.
func checkConsumerCommitLocked(cg *cgroup, version int16, memberID string, epoch int32) int16 {
	if epoch < 0 && len(cg.members) == 0 {
		return errNone
	}
	m := cg.members[memberID]
	switch {
	case m == nil:
		return errUnknownMemberID
	case m.Classic != nil && epoch != m.Epoch:
		return errIllegalGeneration // a classic member commits with its generation
	case m.Classic != nil:
		return errNone
	case version < 9:
		return errUnsupportedVersion
	case epoch != m.Epoch:
		return errStaleMemberEpoch
	}
	return errNone
}

// checkConsumerFetch checks an OffsetFetch v9 member: 0 for an admin
// fetch (no member id, negative epoch) or a member at its epoch.
func (c *Coordinator) checkConsumerFetch(group string, memberID *string, epoch int32) int16 {
	if memberID == nil || (*memberID == "" && epoch < 0) {
		return errNone
	}
	g := c.lookup(group)
	if g == nil {
		return errNone
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cg == nil {
		return errNone
	}
	m := g.cg.members[*memberID]
	switch {
	case m == nil:
		return errUnknownMemberID
	case epoch != m.Epoch:
		return errStaleMemberEpoch
	}
	return errNone
}

// consumerSubscribedLocked returns the topics a consumer group's members
// subscribe to.
func consumerSubscribedLocked(cg *cgroup) map[string]bool {
	out := map[string]bool{}
	for _, m := range cg.members {
		for _, t := range m.subscribed() {
			out[t] = true
		}
	}
	return out
}

// classicJoinConsumer prepares a classic JoinGroup to group id: an empty
// consumer group is turned back into a classic one (its records deleted);
// it reports false when the group is a consumer group with members.
func (c *Coordinator) classicJoinConsumer(id string) bool {
	g := c.lookup(id)
	if g == nil {
		return true
	}
	g.mu.Lock()
	cg := g.cg
	g.mu.Unlock()
	if cg == nil {
		return true
	}
	g.persistMu.Lock()
	defer g.persistMu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.cg == nil:
		return true
	case len(g.cg.members) > 0:
		return false
	}
	if g.cgRecorded {
		recs := g.cg.tombstones(g.id)
		g.mu.Unlock()
		err := c.st.append(recs, func(int64) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.cg, g.cgRecorded = nil, false
			g.protocolType = ""
		})
		g.mu.Lock()
		if err != nil {
			c.cfg.Logger.Warn("groups: converting an empty consumer group failed", "group", g.id, "err", err)
			return false
		}
		return true
	}
	g.cg = nil
	return true
}
