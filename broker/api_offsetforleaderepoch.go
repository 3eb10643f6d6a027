package broker

// OffsetForLeaderEpoch v0-4.
//
// Behaviour:
//   - Sluice is one node whose partitions have always had leader epoch 0
//     (as Metadata reports). For epoch 0 the answer is epoch 0 and the
//     end offset of that epoch, the high watermark (a consumer never
//     fetched past it, so a truncation check against it is exact).
//   - A requested epoch above 0 (from another cluster) or below 0 gets
//     epoch -1 and end offset -1 (UNDEFINED), as Kafka answers an epoch
//     it never had.
//   - v2+ CurrentLeaderEpoch: -1 skips the check; above 0 gets
//     UNKNOWN_LEADER_EPOCH; any other negative FENCED_LEADER_EPOCH.
//   - v3+ ReplicaID is ignored (there are no followers).
//   - Unknown topics and partitions get UNKNOWN_TOPIC_OR_PARTITION.
//   - Authorization: DESCRIBE on each topic for clients, CLUSTER_ACTION
//     for a replica id (else TOPIC_ or CLUSTER_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetForLeaderEpoch.Int16(), 0, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// A replica (ReplicaID >= 0, v3+) needs CLUSTER_ACTION; a client
	// DESCRIBE on each topic.
	replica := req.Version >= 3 && req.ReplicaID >= 0
	clusterDenied := replica && !r.allowedCluster(opClusterAction)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t := r.b.lookup(rt.Topic)
		denied := !replica && !r.allowed(opDescribe, resTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			switch {
			case clusterDenied:
				sp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			case denied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case req.Version >= 2 && rp.CurrentLeaderEpoch > 0:
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			case req.Version >= 2 && rp.CurrentLeaderEpoch < -1:
				sp.ErrorCode = kerr.FencedLeaderEpoch.Code
			case rp.LeaderEpoch == 0:
				sp.LeaderEpoch = 0
				sp.EndOffset = t.parts[rp.Partition].HighWatermark()
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
