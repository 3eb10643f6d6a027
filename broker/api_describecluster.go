package broker

// DescribeCluster v0-2.
//
// Behaviour:
//   - One broker (node 0, the advertised address), which is the
//     controller. The cluster id is generated once and kept in
//     cluster.json.
//   - v1 EndpointType: only brokers (1) are described; a request for
//     controllers gets UNSUPPORTED_ENDPOINT_TYPE.
//   - v2 IncludeFencedBrokers: broker 0 is never fenced.
//   - Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
//     The broker's address is that of the listener the client used.
//   - Authorized operations (KIP-430): the bitfield of the cluster
//     operations the principal may perform when the request asks
//     (IncludeClusterAuthorizedOperations), else -2147483648.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeCluster.Int16(), 0, 2, handleDescribeCluster) }

func handleDescribeCluster(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "only broker endpoints are described"
		resp.ErrorMessage = &msg
		return resp, nil
	}
	if !r.allowedCluster(opDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	adv := r.c.lis.adv
	resp.EndpointType = 1
	resp.ClusterID = r.b.clusterID()
	resp.ControllerID = nodeID
	resp.ClusterAuthorizedOperations = -2147483648
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = r.authorizedOps(resCluster, clusterResource)
	}
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: nodeID, Host: adv.host, Port: adv.port}}
	return resp, nil
}
