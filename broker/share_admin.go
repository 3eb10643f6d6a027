package broker

// DescribeShareGroupOffsets v0-1 (KIP-932; v1 adds the lag, KIP-1226),
// served from the share coordinator's state.
//
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
