package broker

// The KRaft quorum APIs, answered for Sluice's single-node quorum: this
// broker, node 0, is the only voter and the leader of the metadata log.
//
//	DescribeQuorum v0-2   AddRaftVoter v0   RemoveRaftVoter v0
//	UnregisterBroker v0
//
// Behaviour:
//   - DescribeQuorum describes partition 0 of __cluster_metadata: leader
//     0, epoch 1, node 0 the only voter, caught up now, no observers;
//     log end offset and high watermark 0 (Sluice keeps its metadata in
//     files, not in a replicated log, so there is no lag to show). v2
//     lists node 0's
//     listeners (the one the client used). Needs DESCRIBE on the cluster.
//     Any other topic or partition gets UNKNOWN_TOPIC_OR_PARTITION /
//     INVALID_REQUEST as Kafka's controller answers.
//   - AddRaftVoter and RemoveRaftVoter get UNSUPPORTED_VERSION, Kafka's
//     answer for a static voter set (kraft.version 0): the quorum is this
//     one node. Need ALTER on the cluster.
//   - UnregisterBroker: another id gets BROKER_ID_NOT_REGISTERED; this
//     broker's own id succeeds and changes nothing, as a live Kafka
//     broker that is unregistered registers again at its next heartbeat.
//     Needs ALTER on the cluster.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.DescribeQuorum.Int16(), 0, 2, handleDescribeQuorum)
	register(kmsg.AddRaftVoter.Int16(), 0, 0, func(r *request) (kmsg.Response, error) {
		resp := r.kreq.(*kmsg.AddRaftVoterRequest).ResponseKind().(*kmsg.AddRaftVoterResponse)
		resp.ErrorCode, resp.ErrorMessage = staticQuorum(r)
		return resp, nil
	})
	register(kmsg.RemoveRaftVoter.Int16(), 0, 0, func(r *request) (kmsg.Response, error) {
		resp := r.kreq.(*kmsg.RemoveRaftVoterRequest).ResponseKind().(*kmsg.RemoveRaftVoterResponse)
		resp.ErrorCode, resp.ErrorMessage = staticQuorum(r)
		return resp, nil
	})
	register(kmsg.UnregisterBroker.Int16(), 0, 0, handleUnregisterBroker)
}

// metadataLogTopic is the name of KRaft's metadata log.
const metadataLogTopic = "__cluster_metadata"

func staticQuorum(r *request) (int16, *string) {
	if !r.allowedCluster(opAlter) {
		return kerr.ClusterAuthorizationFailed.Code, strPtr("changing the quorum needs ALTER on the cluster")
	}
	return kerr.UnsupportedVersion.Code, strPtr("the voter set is static (kraft.version 0): Sluice's quorum is its one node")
}

func handleDescribeQuorum(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if !r.allowedCluster(opDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		if req.Version >= 2 {
			resp.ErrorMessage = strPtr("DescribeQuorum needs DESCRIBE on the cluster")
		}
		return resp, nil
	}
	if len(req.Topics) != 1 || req.Topics[0].Topic != metadataLogTopic || len(req.Topics[0].Partitions) != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		if req.Version >= 2 {
			resp.ErrorMessage = strPtr("DescribeQuorum describes partition 0 of " + metadataLogTopic + " only")
		}
		return resp, nil
	}
	now := timeNowMs()
	const leo = 0
	st := kmsg.NewDescribeQuorumResponseTopic()
	st.Topic = metadataLogTopic
	sp := kmsg.NewDescribeQuorumResponseTopicPartition()
	sp.Partition = req.Topics[0].Partitions[0].Partition
	if sp.Partition != 0 {
		sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if req.Version >= 2 {
			sp.ErrorMessage = strPtr(fmt.Sprintf("%s has one partition, 0", metadataLogTopic))
		}
	} else {
		sp.LeaderID, sp.LeaderEpoch, sp.HighWatermark = nodeID, 1, leo
		v := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		v.ReplicaID, v.LogEndOffset = nodeID, leo
		v.LastFetchTimestamp, v.LastCaughtUpTimestamp = now, now
		sp.CurrentVoters = []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{v}
	}
	st.Partitions = append(st.Partitions, sp)
	resp.Topics = append(resp.Topics, st)
	if req.Version >= 2 {
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = nodeID
		adv := r.c.lis.adv
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = r.c.lis.Protocol, adv.host, uint16(adv.port)
		n.Listeners = append(n.Listeners, l)
		resp.Nodes = append(resp.Nodes, n)
	}
	return resp, nil
}

func handleUnregisterBroker(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.UnregisterBrokerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	switch {
	case !r.allowedCluster(opAlter):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = strPtr("UnregisterBroker needs ALTER on the cluster")
	case req.BrokerID != nodeID:
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
		resp.ErrorMessage = strPtr(fmt.Sprintf("broker %d is not registered; this cluster's only broker is %d", req.BrokerID, nodeID))
	}
	return resp, nil
}
