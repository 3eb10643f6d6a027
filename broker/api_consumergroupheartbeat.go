package broker

// ConsumerGroupHeartbeat v0-1 (KIP-848), served by the group
// coordinator (internal/groups, cheartbeat.go for the behaviour).
//
// Behaviour:
//   - Authorization as in Kafka: READ on the group, else
//     GROUP_AUTHORIZATION_FAILED; a regex subscription resolves only to
//     the topics the principal may DESCRIBE.
//   - The member's client id and host are recorded for
//     ConsumerGroupDescribe.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/groups"
)

func init() {
	register(kmsg.ConsumerGroupHeartbeat.Int16(), 0, 1, handleConsumerGroupHeartbeat)
	apiACLs[kmsg.ConsumerGroupHeartbeat.Int16()] = []aclNeed{{opRead, resGroup, ""}, {opDescribe, resTopic, "regex subscriptions"}}
}

func handleConsumerGroupHeartbeat(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	if !r.allowed(opRead, resGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if req.MemberEpoch == 0 && r.b.isShareGroup(req.Group) { // share.go
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode, resp.ErrorMessage = kerr.InconsistentGroupProtocol.Code, strPtr("group "+req.Group+" is a share group")
		return resp, nil
	}
	var describable func(string) bool
	if r.b.authz != nil && !r.internal {
		describable = func(topic string) bool { return r.allowed(opDescribe, resTopic, topic) }
	}
	cl := groups.Client{ID: r.clientID, Host: "/" + r.host}
	return r.b.groups.ConsumerGroupHeartbeat(r.ctx, cl, req, describable), nil
}
