package broker

// ConsumerGroupDescribe v0-1 (KIP-848), served by the group coordinator
// (internal/groups, cdescribe.go for the behaviour).
//
// Behaviour:
//   - Authorization as in Kafka's table: DESCRIBE on each group, else
//     GROUP_AUTHORIZATION_FAILED.
//   - Authorized operations (KIP-430) are filled in when asked for.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.ConsumerGroupDescribe.Int16(), 0, 1, handleConsumerGroupDescribe)
	apiACLs[kmsg.ConsumerGroupDescribe.Int16()] = []aclNeed{{opDescribe, resGroup, ""}}
}

func handleConsumerGroupDescribe(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := r.b.groups.ConsumerGroupDescribe(r.ctx, req)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if !r.allowed(opDescribe, resGroup, g.Group) {
			*g = kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group = req.Groups[i]
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			continue
		}
		if g.ErrorCode == 0 && req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = r.authorizedOps(resGroup, g.Group)
		}
	}
	return resp, nil
}
