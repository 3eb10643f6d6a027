package broker

// AlterPartitionReassignments v0-1.
//
// Behaviour:
//   - Sluice is one broker, so the only replica set a partition can have
//     is [0]: asking for it succeeds (nothing moves), any other set gets
//     INVALID_REPLICA_ASSIGNMENT, and cancelling (null replicas) gets
//     NO_REASSIGNMENT_IN_PROGRESS. Unknown partitions get
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - v1 AllowReplicationFactorChange is echoed.
//   - Authorization: ALTER on the cluster (else
//     CLUSTER_AUTHORIZATION_FAILED).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.AlterPartitionAssignments.Int16(), 0, 1, handleAlterPartitionAssignments)
}

func handleAlterPartitionAssignments(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	if !r.allowedCluster(opAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		t := r.b.lookup(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			var msg string
			switch {
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				sp.ErrorCode, msg = kerr.UnknownTopicOrPartition.Code, "the partition does not exist"
			case rp.Replicas == nil:
				sp.ErrorCode, msg = kerr.NoReassignmentInProgress.Code, "no reassignment is in progress"
			case len(rp.Replicas) == 1 && rp.Replicas[0] == nodeID:
			default:
				sp.ErrorCode = kerr.InvalidReplicaAssignment.Code
				msg = fmt.Sprintf("replicas %v: Sluice is one broker (id 0); the only assignment is [0]", rp.Replicas)
			}
			if msg != "" {
				sp.ErrorMessage = &msg
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
