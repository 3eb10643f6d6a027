package broker

// DescribeClientQuotas v0-1.
//
// Behaviour: Sluice enforces no client quotas (one node, no throttling),
// so every filter matches no entity: the answer is an empty list with no
// error. A component with an entity type other than user, client-id or
// ip, or a match type other than 0-2, gets INVALID_REQUEST.
//   - Authorization: DESCRIBE_CONFIGS on the cluster (else
//     CLUSTER_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeClientQuotas.Int16(), 0, 1, handleDescribeClientQuotas) }

// quotaEntityTypes are the entity types Kafka knows.
var quotaEntityTypes = map[string]bool{"user": true, "client-id": true, "ip": true}

func handleDescribeClientQuotas(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !r.allowedCluster(opDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	for _, c := range req.Components {
		if !quotaEntityTypes[c.EntityType] || c.MatchType > 2 {
			resp.ErrorCode = kerr.InvalidRequest.Code
			msg := "quota filters take entity types user, client-id or ip and match types 0-2"
			resp.ErrorMessage = &msg
			return resp, nil
		}
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	return resp, nil
}
