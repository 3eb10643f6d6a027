package broker

// CreateTopics v0-7.
//
// Behaviour:
//   - NumPartitions -1 takes DefaultPartitions. ReplicationFactor must be
//     -1 or 1 (one broker), else INVALID_REPLICATION_FACTOR. A manual
//     replica assignment naming only this broker (node 0) sets the
//     partition count; checked as Kafka does (replicaassign.go): another
//     node id gets INVALID_REPLICA_ASSIGNMENT naming it.
//   - Configs are checked (topicconfig.go): retention.ms,
//     retention.bytes, segment.bytes, segment.ms, max.message.bytes and
//     cleanup.policy=delete apply; cleanup.policy=compact gets
//     INVALID_CONFIG with a message saying compaction is not supported
//     yet; unknown names get INVALID_CONFIG.
//   - A topic named twice in one request gets INVALID_REQUEST.
//   - ValidateOnly (v1+) checks without creating. v5+ responses carry the
//     partition count, replication factor and configs; v7 the topic id.
//   - The topic's metadata is fsynced before the response.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.CreateTopics.Int16(), 0, 7, handleCreateTopics) }

func handleCreateTopics(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	clusterCreate := r.allowedCluster(opCreate)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		var err error
		switch {
		case !clusterCreate && !r.allowed(opCreate, resTopic, rt.Topic):
			err = errCode(kerr.TopicAuthorizationFailed, "not authorized to create topic %q (CREATE on the cluster or the topic)", rt.Topic)
		case seen[rt.Topic] > 1:
			err = errCode(kerr.InvalidRequest, "topic %q appears more than once in the request", rt.Topic)
		case len(rt.ReplicaAssignment) > 0:
			rt.NumPartitions, err = topicAssignment(rt)
		case rt.ReplicationFactor != -1 && rt.ReplicationFactor != 1:
			err = errCode(kerr.InvalidReplicationFactor, "replication factor %d: Sluice is one broker, use 1 or -1", rt.ReplicationFactor)
		}
		configs := map[string]string{}
		for _, c := range rt.Configs {
			if c.Value != nil {
				configs[c.Name] = *c.Value
			}
		}
		var t *topic
		if err == nil {
			err = r.mutationGate(req.Version >= 6)
		}
		if err == nil {
			t, err = r.b.createTopic(rt.Topic, rt.NumPartitions, configs, req.ValidateOnly)
		}
		if err != nil {
			st.ErrorCode = codeOf(err)
			if errors.Is(err, kerr.InvalidConfig) {
				st.ConfigErrorCode = st.ErrorCode
			}
			if req.Version >= 1 {
				msg := errMessage(err)
				st.ErrorMessage = &msg
			}
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.ReplicationFactor = 1
		st.NumPartitions = rt.NumPartitions
		if st.NumPartitions == -1 {
			st.NumPartitions = r.b.cfg.defaultPartitions
		}
		if !req.ValidateOnly {
			r.recordMutations(int(st.NumPartitions))
		}
		if req.Version >= 5 && !r.allowed(opDescribeConfigs, resTopic, rt.Topic) {
			// Created, but its configs are not the principal's to see.
			st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		conf, _ := parseTopicConfigWith(configs, r.b.dynamic())
		if t != nil {
			st.TopicID = t.id
			conf = t.conf
		}
		for _, name := range conf.names() {
			v, src, _ := conf.resolve(name)
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.Source = name, &v, int8(src)
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
