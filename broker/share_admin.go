package broker

// The share-group offset APIs, served from the share coordinator's
// state: DescribeShareGroupOffsets v0-1 (KIP-932; v1 adds the lag,
// KIP-1226), AlterShareGroupOffsets v0 and DeleteShareGroupOffsets v0.
//
// AlterShareGroupOffsets sets share partitions of an empty share group
// (created if need be) to start at the given offsets, nothing in flight;
// DeleteShareGroupOffsets forgets a share group's state of whole topics.
// Both answer NON_EMPTY_GROUP while the group has members; a group or
// topic the caller may not READ (DELETE the group, for the deletion) is
// GROUP_AUTHORIZATION_FAILED or TOPIC_AUTHORIZATION_FAILED; an unknown
// topic or partition UNKNOWN_TOPIC_OR_PARTITION; a start offset below
// the log start offset or past the high watermark OFFSET_OUT_OF_RANGE.
//
// DescribeShareGroupOffsets:
// Behaviour:
//   - Authorization as in Kafka: DESCRIBE on the group, else
//     GROUP_AUTHORIZATION_FAILED for it; DESCRIBE on each topic, else
//     TOPIC_AUTHORIZATION_FAILED for its partitions (left out when every
//     topic is described).
//   - No topics: every partition the group has state for.
//   - A partition without state has start offset -1 and lag -1; an
//     unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION.
//   - The lag is the high watermark minus the start offset minus the
//     records acknowledged or archived after the start: what the group
//     has yet to settle.
//   - A group that is not a share group is GROUP_ID_NOT_FOUND.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/share"
)

func init() {
	register(kmsg.DescribeShareGroupOffsets.Int16(), 0, 1, handleDescribeShareGroupOffsets)
	apiACLs[kmsg.DescribeShareGroupOffsets.Int16()] = []aclNeed{{opDescribe, resGroup, ""}, {opDescribe, resTopic, "each topic described"}}
	register(kmsg.AlterShareGroupOffsets.Int16(), 0, 0, handleAlterShareGroupOffsets)
	apiACLs[kmsg.AlterShareGroupOffsets.Int16()] = []aclNeed{{opRead, resGroup, ""}, {opRead, resTopic, "each topic altered"}}
	register(kmsg.DeleteShareGroupOffsets.Int16(), 0, 0, handleDeleteShareGroupOffsets)
	apiACLs[kmsg.DeleteShareGroupOffsets.Int16()] = []aclNeed{{opDelete, resGroup, ""}, {opRead, resTopic, "each topic deleted"}}
}

func handleAlterShareGroupOffsets(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	sc := r.b.shareCoordinator()
	switch {
	case !r.allowed(opRead, resGroup, req.GroupID):
		resp.ErrorCode, resp.ErrorMessage = kerr.GroupAuthorizationFailed.Code, strPtr("not authorized to read group "+req.GroupID)
		return resp, nil
	case sc == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.CoordinatorNotAvailable.Code, strPtr(errShareNotReady.Error())
		return resp, nil
	case req.GroupID == "":
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidGroupID.Code, strPtr("the group id is empty")
		return resp, nil
	case !sc.Exists(req.GroupID) && r.b.consumerGroupExists(r.ctx, req.GroupID):
		resp.ErrorCode, resp.ErrorMessage = kerr.GroupIDNotFound.Code, strPtr("group "+req.GroupID+" is a consumer group, not a share group")
		return resp, nil
	}
	starts := map[share.TP]int64{}
	var parts []*kmsg.AlterShareGroupOffsetsResponseTopicPartition
	for _, rt := range req.Topics {
		t := r.b.lookup(rt.Topic)
		ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		if t != nil {
			ot.TopicID = t.id
		}
		denied := !r.allowed(opRead, resTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			switch {
			case denied:
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.StartOffset < t.parts[rp.Partition].StartOffset() || rp.StartOffset > t.parts[rp.Partition].HighWatermark():
				op.ErrorCode = kerr.OffsetOutOfRange.Code
				op.ErrorMessage = strPtr("the start offset is outside the partition's log")
			default:
				starts[share.TP{Topic: t.id, Partition: rp.Partition}] = rp.StartOffset
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			parts = append(parts, &resp.Topics[i].Partitions[j])
		}
	}
	if code, msg := sc.ResetStarts(req.GroupID, starts); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, strPtr(msg)
		for _, p := range parts {
			if p.ErrorCode == 0 {
				p.ErrorCode = code
			}
		}
	}
	return resp, nil
}

func handleDeleteShareGroupOffsets(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	sc := r.b.shareCoordinator()
	switch {
	case !r.allowed(opDelete, resGroup, req.GroupID):
		resp.ErrorCode, resp.ErrorMessage = kerr.GroupAuthorizationFailed.Code, strPtr("not authorized to delete from group "+req.GroupID)
		return resp, nil
	case sc == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.CoordinatorNotAvailable.Code, strPtr(errShareNotReady.Error())
		return resp, nil
	}
	s, ok := sc.Summary(req.GroupID)
	if !ok {
		resp.ErrorCode, resp.ErrorMessage = kerr.GroupIDNotFound.Code, strPtr("share group "+req.GroupID+" does not exist")
		return resp, nil
	}
	var drop []share.TP
	for _, rt := range req.Topics {
		ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t := r.b.lookup(rt.Topic)
		switch {
		case !r.allowed(opRead, resTopic, rt.Topic):
			ot.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case t == nil:
			ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			ot.TopicID = t.id
			for _, p := range s.Parts {
				if p.TP.Topic == t.id {
					drop = append(drop, p.TP)
				}
			}
		}
		resp.Topics = append(resp.Topics, ot)
	}
	if code, msg := sc.DropStates(req.GroupID, drop); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, strPtr(msg)
	}
	return resp, nil
}

func handleDescribeShareGroupOffsets(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	sc := r.b.shareCoordinator()
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		var (
			s  share.GroupSummary
			ok bool
		)
		if sc != nil {
			s, ok = sc.Summary(rg.GroupID)
		}
		switch {
		case !r.allowed(opDescribe, resGroup, rg.GroupID):
			g.ErrorCode, g.ErrorMessage = kerr.GroupAuthorizationFailed.Code, strPtr("not authorized to describe group "+rg.GroupID)
		case sc == nil:
			g.ErrorCode, g.ErrorMessage = kerr.CoordinatorNotAvailable.Code, strPtr(errShareNotReady.Error())
		case !ok:
			g.ErrorCode, g.ErrorMessage = kerr.GroupIDNotFound.Code, strPtr("share group "+rg.GroupID+" does not exist")
		default:
			g.Topics = r.b.shareOffsetTopics(r, s, rg.Topics, rg.Topics == nil)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

// shareOffsetTopics answers one group's topics: those asked, or with
// all, every topic the group has state for that the caller may see.
func (b *Broker) shareOffsetTopics(r *request, s share.GroupSummary, asked []kmsg.DescribeShareGroupOffsetsRequestGroupTopic, all bool) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	parts := map[share.TP]share.PartitionSummary{}
	for _, p := range s.Parts {
		parts[p.TP] = p
	}
	if all {
		byTopic := map[[16]byte][]int32{}
		for _, p := range s.Parts {
			byTopic[p.TP.Topic] = append(byTopic[p.TP.Topic], p.TP.Partition)
		}
		for id, ps := range byTopic {
			t := b.lookupID(id)
			if t == nil || !r.allowed(opDescribe, resTopic, t.name) {
				continue
			}
			asked = append(asked, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: t.name, Partitions: ps})
		}
		slices.SortFunc(asked, func(a, b kmsg.DescribeShareGroupOffsetsRequestGroupTopic) int {
			if a.Topic < b.Topic {
				return -1
			}
			if a.Topic > b.Topic {
				return 1
			}
			return 0
		})
	}
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for _, at := range asked {
		rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		rt.Topic = at.Topic
		t := b.lookup(at.Topic)
		denied := !r.allowed(opDescribe, resTopic, at.Topic)
		if t != nil {
			rt.TopicID = t.id
		}
		ps := slices.Clone(at.Partitions)
		slices.Sort(ps)
		for _, p := range ps {
			rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
			switch {
			case denied:
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case t == nil || p < 0 || int(p) >= len(t.parts):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				rp.LeaderEpoch = 0
				if st, ok := parts[share.TP{Topic: t.id, Partition: p}]; ok {
					rp.StartOffset = st.Start
					rp.Lag = max(t.parts[p].HighWatermark()-st.Start-int64(st.Acknowledged+st.Archived), 0)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}
