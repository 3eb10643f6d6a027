package broker

// ListPartitionReassignments v0.
//
// Behaviour: no reassignment is ever in progress on one broker, so the
// answer is always an empty list (named partitions included, as Kafka
// leaves out partitions that are not being reassigned).
//   - Authorization: DESCRIBE on the cluster (else
//     CLUSTER_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.ListPartitionReassignments.Int16(), 0, 0, func(r *request) (kmsg.Response, error) {
		req := r.kreq.(*kmsg.ListPartitionReassignmentsRequest)
		resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		if !r.allowedCluster(opDescribe) {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		return resp, nil
	})
}
