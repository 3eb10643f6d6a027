package broker

// Metadata v0-12.
//
// Behaviour:
//   - One broker (node 0, the advertised address), the controller and the
//     leader of every partition, with itself as the only replica and ISR;
//     leader epoch 0.
//   - All topics for a null topic list (v1+) or an empty one (v0); topic
//     ids for v10+. Topics may be asked for by id (v10+); an unknown id
//     gets UNKNOWN_TOPIC_ID.
//   - An unknown topic asked for by name is created when auto-creation is
//     on and the request allows it (always for v0-v3,
//     AllowAutoTopicCreation for v4+), with DefaultPartitions partitions;
//     otherwise it gets UNKNOWN_TOPIC_OR_PARTITION. An invalid name gets
//     INVALID_TOPIC_EXCEPTION.
//   - The internal topics clients expect, __consumer_offsets and
//     __transaction_state, are listed with IsInternal set (one partition
//     each; regex subscriptions skip them, as with Kafka). They stand for
//     the group and transaction coordinators' own logs: produce to them is
//     refused (INVALID_TOPIC_EXCEPTION), they cannot be created or
//     deleted, and they hold no records a client can fetch.
//   - With authorization on, topics the principal may not DESCRIBE are
//     left out of an all-topics answer and get TOPIC_AUTHORIZATION_FAILED
//     when named; auto-creation needs CREATE on the cluster or the topic
//     (else TOPIC_AUTHORIZATION_FAILED).
//   - The broker's address is that of the listener the client used.
//   - v8+ authorized operations (KIP-430): when the request asks, each
//     topic answered without error carries the bitfield of the topic
//     operations the principal may perform, and (v8-v10) the response
//     that of the cluster operations; otherwise -2147483648. With
//     authorization off every operation is allowed.

import (
	"crypto/sha256"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.Metadata.Int16(), 0, 12, handleMetadata) }

func handleMetadata(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	metadataTopics(r, req, resp)
	if req.Version >= 8 && req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			if mt := &resp.Topics[i]; mt.ErrorCode == 0 && mt.Topic != nil {
				mt.AuthorizedOperations = r.authorizedOps(resTopic, *mt.Topic)
			}
		}
	}
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = r.authorizedOps(resCluster, clusterResource)
	}
	return resp, nil
}

// metadataTopics fills resp's brokers, cluster and topics.
func metadataTopics(r *request, req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	b := r.b
	adv := r.c.lis.adv
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: nodeID, Host: adv.host, Port: adv.port}}
	cid := b.clusterID()
	resp.ClusterID = &cid
	resp.ControllerID = nodeID

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range b.sortedTopics() {
			if r.allowed(opDescribe, resTopic, t.name) {
				resp.Topics = append(resp.Topics, metadataTopic(t))
			}
		}
		for _, name := range internalTopics {
			resp.Topics = append(resp.Topics, internalMetadataTopic(name))
		}
		return
	}
	mayCreate := req.Version < 4 || req.AllowAutoTopicCreation
	for _, rt := range req.Topics {
		if rt.Topic == nil || *rt.Topic == "" {
			var zero [16]byte
			if req.Version >= 10 && rt.TopicID != zero {
				if t := b.lookupID(rt.TopicID); t != nil && r.allowed(opDescribe, resTopic, t.name) {
					resp.Topics = append(resp.Topics, metadataTopic(t))
					continue
				}
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID = rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		name := *rt.Topic
		if isInternalTopic(name) {
			resp.Topics = append(resp.Topics, internalMetadataTopic(name))
			continue
		}
		t := b.lookup(name)
		var err error
		if !r.allowed(opDescribe, resTopic, name) {
			t, err = nil, kerr.TopicAuthorizationFailed
		} else if t == nil {
			if mayCreate && !r.allowedCluster(opCreate) && !r.allowed(opCreate, resTopic, name) {
				err = kerr.TopicAuthorizationFailed
			} else if mayCreate {
				t, err = b.autoCreate(name)
			} else {
				err = kerr.UnknownTopicOrPartition
			}
			if err == nil && validTopicName(name) != nil {
				err = kerr.InvalidTopicException
			}
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = &name
			mt.ErrorCode = codeOf(err)
			if errors.Is(err, kerr.BrokerNotAvailable) {
				mt.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, metadataTopic(t))
	}
	return
}

func metadataTopic(t *topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.name
	mt.Topic = &name
	mt.TopicID = t.id
	for _, p := range t.parts {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index()
		mp.Leader = nodeID
		mp.LeaderEpoch = 0
		mp.Replicas = []int32{nodeID}
		mp.ISR = []int32{nodeID}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// internalTopics are the Kafka internal topics Sluice lists in Metadata.
var internalTopics = []string{"__consumer_offsets", "__transaction_state"}

func isInternalTopic(name string) bool {
	for _, n := range internalTopics {
		if n == name {
			return true
		}
	}
	return false
}

// internalMetadataTopic describes an internal topic: one partition led by
// this broker, a fixed topic id derived from the name.
func internalMetadataTopic(name string) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	n := name
	mt.Topic = &n
	mt.IsInternal = true
	sum := sha256.Sum256([]byte("sluice internal topic " + name))
	copy(mt.TopicID[:], sum[:16])
	mt.TopicID[0] |= 0x80 // never the all-zero id
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.LeaderEpoch = 0
	mp.Leader, mp.Replicas, mp.ISR = nodeID, []int32{nodeID}, []int32{nodeID}
	mt.Partitions = []kmsg.MetadataResponseTopicPartition{mp}
	return mt
}
