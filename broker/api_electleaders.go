package broker

// ElectLeaders v0-2.
//
// Behaviour:
//   - Sluice is one broker: every partition's leader is broker 0, its
//     preferred and only replica, so each named partition gets
//     ELECTION_NOT_NEEDED (what Kafka answers when the preferred leader
//     already leads) and unknown ones UNKNOWN_TOPIC_OR_PARTITION.
//   - Topics null (elect for every partition) gets an empty list: Kafka
//     leaves out the partitions that needed no election.
//   - v1+ ElectionType 0 (preferred) and 1 (unclean) are both accepted;
//     anything else gets INVALID_REQUEST at the top level.
//   - Authorization: ALTER on the cluster (else
//     CLUSTER_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ElectLeaders.Int16(), 0, 2, handleElectLeaders) }

func handleElectLeaders(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	denied := !r.allowedCluster(opAlter)
	if denied {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code // v1+
	}
	for _, rt := range req.Topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		t := r.b.lookup(rt.Topic)
		for _, p := range rt.Partitions {
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition = p
			var msg string
			if denied {
				sp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				msg = "ElectLeaders needs ALTER on the cluster"
			} else if t == nil || p < 0 || int(p) >= len(t.parts) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				msg = "the partition does not exist"
			} else {
				sp.ErrorCode = kerr.ElectionNotNeeded.Code
				msg = "broker 0 is the partition's only replica and already leads it"
			}
			sp.ErrorMessage = &msg
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
